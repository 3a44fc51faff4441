//! Opening a port of the config with its driver.

use vrhost_host::config::{Driver, GenConf, PortRings};
use vrhost_io::Port;

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
        Driver::Tap => boxed(vrhost_io::tap::TapPort::open(iface, Default::default())),
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
