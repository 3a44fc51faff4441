//! Opening a port of the config with its driver.

use super::*;

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
    let port: Result<Box<dyn Port>, String> = match driver {
        Driver::Mem => {
            let cfg = traffic.cloned().unwrap_or_default().mem_config()?;
            vrhost_io::mem::MemPort::new(name, cfg)
                .map(|p| Box::new(p) as _)
                .map_err(|e| e.to_string())
        }
        Driver::Null => Ok(Box::new(vrhost_io::null::NullPort::new(name))),
        Driver::AfPacket => vrhost_io::af_packet::AfPacketPort::open(iface, Default::default())
            .map(|p| Box::new(p) as _)
            .map_err(|e| e.to_string()),
        Driver::Socket => vrhost_io::socket::SocketPort::open(iface, Default::default())
            .map(|p| Box::new(p) as _)
            .map_err(|e| e.to_string()),
        Driver::Tap => vrhost_io::tap::TapPort::open(iface, Default::default())
            .map(|p| Box::new(p) as _)
            .map_err(|e| e.to_string()),
        Driver::AfXdp => vrhost_io::af_xdp::AfXdpPort::open(iface, &rings.af_xdp())
            .map(|p| Box::new(p) as _)
            .map_err(|e| e.to_string()),
    };
    port.map_err(|e| format!("{} on {iface}: {e}", driver.name()))
}
