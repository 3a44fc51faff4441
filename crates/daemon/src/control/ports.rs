//! Opening a port of the config with its driver.

use vrhost_host::config::{Driver, GenConf, PortRings};
use vrhost_io::Port;
use vrhost_io::af_xdp::{AfXdpConfig, AfXdpPort, XdpProgram};

use crate::fast::FastState;

/// Open a port as [`open_port`] does, except an `af_xdp` port on a host
/// with a fast path: the fast path is attached to its interface, and the
/// port binds its sockets there in External mode for the fast path's
/// attach mode and becomes the interface's slow path (`serve`).
///
/// # Errors
/// The driver's or the fast path's error.
pub(super) fn open_port_on(
    fast: Option<&mut FastState>,
    name: &str,
    driver: Driver,
    iface: &str,
    traffic: Option<&GenConf>,
    rings: PortRings,
) -> Result<Box<dyn Port>, String> {
    let Some(fast) = fast.filter(|_| driver == Driver::AfXdp) else {
        return open_port(name, driver, iface, traffic, rings);
    };
    let mode = fast.attach(iface)?;
    let cfg = AfXdpConfig {
        program: XdpProgram::External,
        attach: Some(mode),
        ..rings.af_xdp()
    };
    let port = AfXdpPort::open(iface, &cfg).map_err(|e| format!("af_xdp on {iface}: {e}"))?;
    fast.serve(&port)?;
    Ok(Box::new(port))
}

/// Open a port with its driver, in the calling thread's namespace.
///
/// # Errors
/// The driver's error.
pub fn open_port(
    name: &str,
    driver: Driver,
    iface: &str,
    traffic: Option<&GenConf>,
    rings: PortRings,
) -> Result<Box<dyn Port>, String> {
    let port = match driver {
        Driver::Mem => {
            let cfg = traffic.cloned().unwrap_or_default().mem_config()?;
            boxed(vrhost_io::mem::MemPort::new(name, cfg))
        }
        Driver::Null => Ok(Box::new(vrhost_io::null::NullPort::new(name)) as _),
        Driver::AfPacket => boxed(vrhost_io::af_packet::AfPacketPort::open(
            iface,
            Default::default(),
        )),
        Driver::Socket => boxed(vrhost_io::socket::SocketPort::open(
            iface,
            Default::default(),
        )),
        Driver::Tap => match vrhost_host::config::split_netns(iface) {
            // A control plane's TAP, in its control namespace.
            Some((ns, ifname)) => crate::cplane::netns::ensure(ns).and_then(|()| {
                crate::cplane::netns::run_in(ns, || {
                    boxed(vrhost_io::tap::TapPort::open(ifname, Default::default()))
                })?
            }),
            None => boxed(vrhost_io::tap::TapPort::open(iface, Default::default())),
        },
        Driver::AfXdp => boxed(vrhost_io::af_xdp::AfXdpPort::open(iface, &rings.af_xdp())),
    };
    port.map_err(|e| format!("{} on {iface}: {e}", driver.name()))
}

/// A driver's port, boxed, or its error in words.
fn boxed<P: Port + 'static, E: std::fmt::Display>(
    opened: Result<P, E>,
) -> Result<Box<dyn Port>, String> {
    opened
        .map(|p| Box::new(p) as Box<dyn Port>)
        .map_err(|e| e.to_string())
}
