//! [`PortError`]: why a port on a kernel interface could not be opened, the
//! cases the `af_packet`, `socket` and `tap` drivers share.
//!
//! A driver with cases of its own wraps this enum (`tap::TapError`);
//! `af_xdp` keeps its own enum, whose messages name the AF_XDP port and the
//! step that failed.

use std::fmt;
use std::io;

use crate::packet_sys::SysError;

/// The driver behind a [`PortError`], written as its messages name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// [`AfPacketPort`](crate::af_packet::AfPacketPort): `AF_PACKET`.
    AfPacket,
    /// [`SocketPort`](crate::socket::SocketPort): `socket port`.
    Socket,
    /// [`TapPort`](crate::tap::TapPort): `TAP`.
    Tap,
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Driver::AfPacket => "AF_PACKET",
            Driver::Socket => "socket port",
            Driver::Tap => "TAP",
        })
    }
}

/// Why a port on interface `ifname` could not be opened. Each message starts
/// with the interface's name, quoted.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The interface name is not one the kernel accepts.
    #[error("interface {ifname:?}: invalid name: {reason}")]
    InvalidName {
        /// The name given.
        ifname: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No interface of that name in the calling thread's network namespace.
    #[error("interface {ifname:?}: no such device")]
    NoSuchDevice {
        /// The name given.
        ifname: String,
    },
    /// The driver's config is invalid.
    #[error("interface {ifname:?}: invalid {driver} config: {reason}")]
    Config {
        /// The interface.
        ifname: String,
        /// The driver whose config it is.
        driver: Driver,
        /// What is wrong.
        reason: String,
    },
    /// A system call failed.
    #[error("interface {ifname:?}: {call}: {source}")]
    Sys {
        /// The interface.
        ifname: String,
        /// The call that failed.
        call: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

impl PortError {
    pub(crate) fn invalid_name(ifname: &str, reason: &'static str) -> PortError {
        PortError::InvalidName {
            ifname: ifname.to_owned(),
            reason,
        }
    }

    pub(crate) fn config(ifname: &str, driver: Driver, reason: String) -> PortError {
        PortError::Config {
            ifname: ifname.to_owned(),
            driver,
            reason,
        }
    }

    /// `e` as it stands: the call and its OS error.
    pub(crate) fn sys(ifname: &str, e: SysError) -> PortError {
        PortError::Sys {
            ifname: ifname.to_owned(),
            call: e.call,
            source: e.source,
        }
    }

    /// `e` from a call on an interface that should exist: `ENODEV` is
    /// [`PortError::NoSuchDevice`], anything else [`PortError::Sys`].
    pub(crate) fn on_device(ifname: &str, e: SysError) -> PortError {
        if e.errno() == Some(libc::ENODEV) {
            PortError::NoSuchDevice {
                ifname: ifname.to_owned(),
            }
        } else {
            PortError::sys(ifname, e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sys_error(errno: i32) -> SysError {
        SysError {
            call: "ioctl(SIOCGIFINDEX)",
            source: io::Error::from_raw_os_error(errno),
        }
    }

    #[test]
    fn config_messages_name_the_driver() {
        let msg = |driver| PortError::config("lo", driver, "burst 0".into()).to_string();
        assert_eq!(
            msg(Driver::AfPacket),
            "interface \"lo\": invalid AF_PACKET config: burst 0"
        );
        assert_eq!(
            msg(Driver::Socket),
            "interface \"lo\": invalid socket port config: burst 0"
        );
        assert_eq!(
            msg(Driver::Tap),
            "interface \"lo\": invalid TAP config: burst 0"
        );
    }

    #[test]
    fn enodev_on_a_device_is_no_such_device() {
        let e = PortError::on_device("a0", sys_error(libc::ENODEV));
        assert!(matches!(&e, PortError::NoSuchDevice { ifname } if ifname == "a0"));
        assert_eq!(e.to_string(), "interface \"a0\": no such device");
        // Other errors keep the call and the OS error; `sys` never maps.
        let e = PortError::on_device("a0", sys_error(libc::EPERM));
        assert!(matches!(
            &e,
            PortError::Sys {
                call: "ioctl(SIOCGIFINDEX)",
                ..
            }
        ));
        let e = PortError::sys("a0", sys_error(libc::ENODEV));
        assert!(
            e.to_string()
                .starts_with("interface \"a0\": ioctl(SIOCGIFINDEX): "),
            "{e}"
        );
    }

    #[test]
    fn invalid_name_message() {
        assert_eq!(
            PortError::invalid_name("bad/name", "contains '/'").to_string(),
            "interface \"bad/name\": invalid name: contains '/'"
        );
    }
}
