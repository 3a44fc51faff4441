//! Opening a port of the config with its driver.

use vrhost_host::VrPath;
use vrhost_host::config::{Driver, GenConf, Plan, PortRings};
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
            rings.af_packet(),
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

/// Ports opened for the worker, each with its index among its ports.
pub(super) type Opened = Vec<(usize, Box<dyn Port>)>;

/// Open the ports of `plan` dedicated to the VR of `path` (VR `v`), on
/// that VR's pool (`ports[].dedicated`): the first registers the pool as
/// its UMEM, the others share it; each becomes a dedicated port of the VR.
/// Returns each port's index and the port.
///
/// # Errors
/// The driver's, or why the VR cannot take one, in words.
pub(super) fn open_dedicated_on(
    plan: &Plan,
    v: usize,
    path: &mut VrPath,
) -> Result<Opened, String> {
    let mut opened: Vec<(usize, AfXdpPort)> = Vec::new();
    for p in (0..plan.ports.len()).filter(|&p| plan.dedicated[p] == Some(v)) {
        let (name, _, iface) = &plan.ports[p];
        let cfg = plan.rings[p].af_xdp();
        let port = match opened.last() {
            None => vrhost_host::open_dedicated(iface, &cfg, path.region()),
            Some((_, first)) => {
                vrhost_host::open_dedicated_sharing(iface, &cfg, path.region(), first)
            }
        }
        .map_err(|e| format!("port {name}: {e}"))?;
        path.set_dedicated(p, cfg.frames)
            .map_err(|e| format!("port {name}: {e}"))?;
        opened.push((p, port));
    }
    Ok(opened
        .into_iter()
        .map(|(p, port)| (p, Box::new(port) as Box<dyn Port>))
        .collect())
}

/// Why a change cannot be applied live for the dedicated ports
/// (`ports[].dedicated`), if it cannot: a dedicated port, or its VR, that
/// would be opened or started again, or a port that becomes or stops
/// being dedicated (the port's UMEM is the VR's region).
pub(super) fn dedicated_change(
    old: &Plan,
    new: &Plan,
    port_keep: &[Option<usize>],
    vr_keep: &[Option<usize>],
) -> Option<String> {
    let owner = |plan: &Plan, p: usize| {
        let v = plan.dedicated.get(p).copied().flatten()?;
        Some(plan.vrs[v].name.clone())
    };
    for (i, (name, ..)) in new.ports.iter().enumerate() {
        let was = port_keep[i].and_then(|o| owner(old, o));
        let is = owner(new, i);
        let restarted = new.dedicated[i].is_some_and(|v| vr_keep[v].is_none());
        if was != is || (is.is_some() && (port_keep[i].is_none() || restarted)) {
            return Some(format!(
                "port {name} is or was dedicated to a VR: changing it or its VR needs a daemon restart"
            ));
        }
    }
    let kept = |o: usize| port_keep.contains(&Some(o));
    (0..old.ports.len())
        .find(|&o| old.dedicated[o].is_some() && !kept(o))
        .map(|o| {
            format!(
                "port {} was dedicated to a VR: removing it needs a daemon restart",
                old.ports[o].0
            )
        })
}

/// A driver's port, boxed, or its error in words.
fn boxed<P: Port + 'static, E: std::fmt::Display>(
    opened: Result<P, E>,
) -> Result<Box<dyn Port>, String> {
    opened
        .map(|p| Box::new(p) as Box<dyn Port>)
        .map_err(|e| e.to_string())
}
