//! What `tests.rs` and `differential.rs` share: a program loaded for
//! `BPF_PROG_TEST_RUN` with one VR selected on the loopback, and the
//! select entries the tests write.

use super::*;

/// A fast path loaded with room for `max_vrs` VRs and `max_routes` routes,
/// the loopback as an out port, frames to `router_mac` on the loopback
/// selected for `vr` on the fast path, and `vr` in `mode` owning `addrs`.
pub(crate) fn load_on_lo(
    max_vrs: u32,
    max_routes: u32,
    router_mac: [u8; 6],
    vr: u32,
    mode: RoutingMode,
    addrs: Vec<Ipv4Addr>,
) -> FastPath {
    let cfg = FastConfig {
        max_vrs,
        max_routes,
        // Small arrays (each test loads its own): 32 MiB of roots (the
        // src-dst differential test uses up to 60 tables), 8 MiB of
        // groups.
        max_route_tables: 128,
        max_route_groups: 8192,
        ..FastConfig::default()
    };
    load_cfg_on_lo(&cfg, router_mac, vr, mode, addrs)
}

/// [`load_on_lo`] with map sizes `cfg`.
pub(crate) fn load_cfg_on_lo(
    cfg: &FastConfig,
    router_mac: [u8; 6],
    vr: u32,
    mode: RoutingMode,
    addrs: Vec<Ipv4Addr>,
) -> FastPath {
    let lo = ifindex("lo").expect("loopback's index");
    let mut fp = FastPath::load(cfg).expect("load (root, kernel 6.x)");
    fp.add_port(lo).expect("out port");
    let key = SelectKey {
        ifindex: lo,
        vlan: None,
        dst_mac: Some(router_mac),
    };
    fp.set_select(key, entry(vr, Path::Fast)).expect("select");
    set_mode(&mut fp, vr, mode, addrs);
    fp
}

/// A select entry for `vr` on `path`, without a rate limit.
pub(crate) fn entry(vr: u32, path: Path) -> SelectEntry {
    SelectEntry {
        vr,
        path,
        limit: None,
    }
}

/// `vr` in `mode`, owning `addrs`.
pub(crate) fn set_mode(fp: &mut FastPath, vr: u32, mode: RoutingMode, addrs: Vec<Ipv4Addr>) {
    fp.set_vr(vr, &VrFastConfig { mode, addrs }).expect("vr");
}
