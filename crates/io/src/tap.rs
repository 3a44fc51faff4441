//! `TapPort`: a TAP device, the host's side of a kernel network interface.
//!
//! [`TapPort::open`] creates the device (or attaches to an existing,
//! persistent one of that name) with `TUNSETIFF` and `IFF_TAP | IFF_NO_PI`:
//! whole Ethernet frames, no packet-information prefix. The device lives in
//! the network namespace of the thread that opens the port, and a device
//! the port created disappears when the port is dropped. Bringing the link
//! up and giving it addresses is the caller's job (`ip link set NAME up`);
//! [`TapPort::ifname`] says which name the kernel gave it.
//!
//! Frames the kernel sends out of the interface are read with one
//! non-blocking `read` each (the burst stops at `EAGAIN`); frames given to
//! `tx_burst` are written with one `write` each and enter the kernel as if
//! received on the interface (the kernel runs its stack on the frame, IP
//! forwarding included, inside that `write`). One call per frame is what
//! a TAP allows: its descriptor is a character device, so neither
//! `sendmmsg`/`recvmmsg` nor a ring applies, and the kernel's batched path
//! (`tun_sendmsg` with a batch of XDP buffers, `IFF_NAPI` with `MSG_MORE`)
//! is open only to vhost-net inside the kernel; a burst is therefore a
//! loop of calls, made a burst at a time. The tap descriptor is the
//! port's `wait_fd`.
//! Each burst slot has a buffer allocated at open, so `rx_burst` does not
//! allocate; frames borrow them until the next call.
//!
//! A frame longer than [`TapConfig::max_frame_bytes`] (the buffer holds one
//! byte more, so a longer frame shows as a read that fills it) or shorter
//! than an Ethernet header is dropped and counted. Frames the kernel
//! drops because the port reads too slowly (the device's queue,
//! `txqueuelen` long, is full) show in the interface's `tx_dropped`
//! counter (`ip -s link`), not in the port's stats.
//!
//! The module has no `unsafe`: its system calls go through `packet_sys`.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::packet_sys::{self as sys, ETH_HLEN, SysError, ifname_bytes};
use crate::per_frame::{SendOutcome, hand_out, send_each};
use crate::{Driver, Port, PortError, PortStats};

/// Most frames one `rx_burst` may return (the slots are preallocated).
pub const MAX_BURST: usize = 1024;

/// A [`TapPort`]'s options.
///
/// [`Default`]: bursts of up to 64 frames of up to 2000 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapConfig {
    /// Most frames one `rx_burst` returns (1..=[`MAX_BURST`]).
    pub burst: usize,
    /// Largest frame (without FCS) received or sent, 14..=65535.
    pub max_frame_bytes: usize,
}

impl Default for TapConfig {
    fn default() -> Self {
        TapConfig {
            burst: 64,
            max_frame_bytes: 2000,
        }
    }
}

impl TapConfig {
    /// Check the config.
    ///
    /// # Errors
    /// What is wrong, in words.
    pub fn validate(&self) -> Result<(), String> {
        sys::check_burst_config(self.burst, MAX_BURST, self.max_frame_bytes)
    }
}

/// Why a [`TapPort`] could not be opened: the cases every port on an
/// interface has, and two of a TAP device's own.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    /// An invalid name or config, or a system call that failed
    /// (`open(/dev/net/tun)` without the tun module or permission, ...).
    #[error(transparent)]
    Port(#[from] PortError),
    /// An interface of that name exists and is not a TAP device of the
    /// same kind (a veth, a TUN device, a multi-queue TAP...).
    #[error("interface {ifname:?}: exists and is not a single-queue TAP device")]
    NotTap {
        /// The name given.
        ifname: String,
    },
    /// The TAP device is already attached to another descriptor.
    #[error("interface {ifname:?}: TAP device busy (attached elsewhere)")]
    Busy {
        /// The name given.
        ifname: String,
    },
}

impl TapError {
    fn sys(ifname: &str, e: SysError) -> TapError {
        match (e.call, e.errno()) {
            ("ioctl(TUNSETIFF)", Some(libc::EINVAL)) => TapError::NotTap {
                ifname: ifname.to_owned(),
            },
            ("ioctl(TUNSETIFF)", Some(libc::EBUSY)) => TapError::Busy {
                ifname: ifname.to_owned(),
            },
            _ => PortError::sys(ifname, e).into(),
        }
    }
}

/// The TAP port. See the [module docs](self).
#[derive(Debug)]
pub struct TapPort {
    name: String,
    fd: OwnedFd,
    /// `burst` slots of `max_frame + 1` bytes.
    bufs: Box<[u8]>,
    /// Length of the frame in each slot, for the last burst.
    lens: Box<[usize]>,
    max_frame: usize,
    stats: PortStats,
}

impl TapPort {
    /// Create or attach to TAP device `name` in the calling thread's
    /// network namespace; an empty name lets the kernel choose (`tap0`,
    /// `tap1`, ...), and so does a pattern such as `"vrtap%d"`.
    ///
    /// # Errors
    /// [`TapError`] naming the interface: invalid name or config, a device
    /// of that name that is not a TAP device, a busy device, or the system
    /// call that failed.
    pub fn open(name: &str, cfg: TapConfig) -> Result<TapPort, TapError> {
        let cname =
            ifname_bytes(name, true).map_err(|reason| PortError::invalid_name(name, reason))?;
        cfg.validate()
            .map_err(|reason| PortError::config(name, Driver::Tap, reason))?;
        let err = |e| TapError::sys(name, e);
        let fd = sys::open_tun().map_err(err)?;
        let flags = libc::IFF_TAP | libc::IFF_NO_PI;
        let ifname = sys::tun_set_iff(fd.as_fd(), &cname, flags).map_err(err)?;
        let slot = cfg.max_frame_bytes + 1;
        Ok(TapPort {
            name: ifname,
            fd,
            bufs: vec![0u8; slot * cfg.burst].into_boxed_slice(),
            lens: vec![0; cfg.burst].into_boxed_slice(),
            max_frame: cfg.max_frame_bytes,
            stats: PortStats::default(),
        })
    }

    /// The device's name as the kernel knows it (the one asked for, or the
    /// one it chose): what to pass to `ip link set ... up`.
    pub fn ifname(&self) -> &str {
        &self.name
    }
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    /// One `read` per frame until the device's queue is empty or `out` (or
    /// the slots) are full.
    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        let want = out.len().min(self.lens.len());
        let slot = self.max_frame + 1;
        // Bound the calls: dropped frames cost one each too.
        let mut tries = 2 * want;
        let mut n = 0;
        while n < want && tries > 0 {
            tries -= 1;
            let buf = &mut self.bufs[n * slot..(n + 1) * slot];
            let Ok(len) = sys::read(self.fd.as_fd(), buf) else {
                break;
            };
            if len < ETH_HLEN || len > self.max_frame {
                self.stats.rx_dropped += 1;
                continue;
            }
            self.lens[n] = len;
            n += 1;
        }
        let spans = self.lens[..n]
            .iter()
            .enumerate()
            .map(|(i, &len)| (i * slot, len));
        hand_out(&self.bufs, spans, out, &mut self.stats)
    }

    /// One `write` per frame. Frames shorter than 14 bytes or longer than
    /// `max_frame_bytes` are refused without a call; after a "try again"
    /// error the rest of the burst is refused too.
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        let (fd, max_frame) = (self.fd.as_fd(), self.max_frame);
        send_each(
            frames,
            &mut self.stats,
            |_| max_frame,
            |f| match sys::write(fd, f) {
                Ok(n) if n == f.len() => SendOutcome::Sent,
                Ok(_) => SendOutcome::Dropped,
                Err(e) if sys::is_transient(&e) => SendOutcome::Stop,
                Err(_) => SendOutcome::Dropped,
            },
        )
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    /// The tap descriptor: readable when the kernel has sent a frame.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;

    /// The contract every port keeps, against the kernel: frames sent out
    /// of the interface (by a packet socket on it), then the port as a
    /// sink.
    #[test]
    fn conformance() {
        let ns = conformance::quiet_ns();
        let mut port = conformance::open_in(&ns, || TapPort::open("", TapConfig::default()));
        let name = port.ifname().to_owned();
        assert!(name.starts_with("tap"), "{name}");
        ns.ip(&["link", "set", &name, "up"]).unwrap();
        let mut kernel = conformance::socket_on(&ns, &name);
        conformance::check_kernel_port(&mut port, &mut kernel);
    }

    #[test]
    fn config_validation() {
        let d = TapConfig::default();
        assert!(d.validate().is_ok());
        assert!(TapConfig { burst: 0, ..d }.validate().is_err());
        assert!(
            TapConfig {
                max_frame_bytes: 10,
                ..d
            }
            .validate()
            .is_err()
        );
    }
}
