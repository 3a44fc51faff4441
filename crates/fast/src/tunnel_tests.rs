//! Tunnel vNICs run on real frames with `BPF_PROG_TEST_RUN` (root): the
//! frames in are the ones the user-space path writes
//! (`vrhost_host::tunnel::Encap`, and a captured Linux VXLAN frame), and
//! the frames out are compared byte for byte with the user-space path's
//! (`TunnelTable::decap`, `Encap::header`) for the same input. The
//! loopback is the underlay port.

use std::net::Ipv4Addr;

use vrhost_host::tunnel::{Decap, Encap, Tunnel, TunnelKind, TunnelTable};
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;
use vrhost_packet::ipv4::Ipv4Packet;
use vrhost_packet::testdata::VXLAN_FRAME;

use super::*;
use crate::testkit::{entry, load_on_lo};
use crate::{Action, Neighbour, NextHop, Path, RoutingMode, SelectKey, ifindex};

const VR: u32 = 3;
const ID: u32 = 5;
const ROUTER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];
/// The VR's vNIC on the tunnel, and the host behind the tunnel.
const VNIC_MAC: [u8; 6] = [2, 0, 0, 0, 7, 1];
const FAR_MAC: [u8; 6] = [2, 0, 0, 0, 7, 2];
const GW_MAC: [u8; 6] = [2, 0, 0, 0, 0xa, 0xa];
/// The captured frame's endpoints: LOCAL is ours.
const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const GW: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);
const FAR: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 2);
const SRC: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);

fn lo() -> u32 {
    ifindex("lo").expect("loopback's index")
}

/// The kinds tested: VXLAN VNI 42 on 4789, UDP on 6000, IP-in-IP.
fn kinds() -> [(FastTunnelKind, u16); 3] {
    [
        (FastTunnelKind::Vxlan(42), 4789),
        (FastTunnelKind::Udp, 6000),
        (FastTunnelKind::Ipip, 0),
    ]
}

fn fast_tunnel(kind: FastTunnelKind, port: u16, peer: Option<[u8; 6]>) -> FastTunnel {
    FastTunnel {
        kind,
        ifindex: lo(),
        local: LOCAL,
        remote: REMOTE,
        udp_port: port,
        local_mac: OUR_MAC,
        peer_mac: peer,
        inner_mac: VNIC_MAC,
    }
}

/// The same tunnel as the user-space path has it; `mirror`: seen from the
/// peer (which sends what we receive).
fn host_tunnel(kind: FastTunnelKind, port: u16, mirror: bool) -> Tunnel {
    let (kind, vni) = match kind {
        FastTunnelKind::Vxlan(v) => (TunnelKind::Vxlan, v),
        FastTunnelKind::Udp => (TunnelKind::Udp, 0),
        FastTunnelKind::Ipip => (TunnelKind::Ipip, 0),
    };
    let (local, remote, local_mac, remote_mac) = match mirror {
        false => (LOCAL, REMOTE, OUR_MAC, PEER_MAC),
        true => (REMOTE, LOCAL, PEER_MAC, OUR_MAC),
    };
    Tunnel {
        kind,
        port: 0,
        local,
        remote,
        udp_port: port,
        vni,
        local_mac,
        remote_mac: Some(remote_mac),
        inner_mac: VNIC_MAC,
    }
}

fn frame(dst_mac: [u8; 6], dst: Ipv4Addr, sport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr(dst_mac),
        src_mac: MacAddr(HOST_MAC),
        src_ip: SRC,
        dst_ip: dst,
        sport,
        dport: 2000,
        ttl: 64,
        frame_bytes: 64,
    }
    .write(&mut f)
    .expect("frame");
    f
}

/// `inner` encapsulated as the user-space path sends it (from `t`).
fn encapsulate(t: Tunnel, e: &mut Encap, inner: &[u8]) -> Vec<u8> {
    assert_eq!(*e.tunnel(), t);
    let h = e.header(inner).expect("outer headers");
    let mut f = h.hdr[..h.len].to_vec();
    f.extend_from_slice(&inner[h.strip..]);
    f
}

/// VR 3 on the fast path, its tenant on the loopback (ROUTER_MAC) and on
/// tunnel 5's vNIC (VNIC_MAC, and any MAC); 10.2/16 via GW on the
/// loopback, 10.7/16 connected on the tunnel vNIC (FAR behind it).
fn rig(kind: FastTunnelKind, port: u16, peer: Option<[u8; 6]>) -> FastPath {
    let mut fp = load_on_lo(8, 64, ROUTER_MAC, VR, RoutingMode::Dst, vec![]);
    fp.set_tunnel(ID, &fast_tunnel(kind, port, peer))
        .expect("tunnel");
    let vnic = tunnel_ifindex(ID);
    for mac in [Some(VNIC_MAC), None] {
        let k = SelectKey {
            ifindex: vnic,
            vlan: None,
            dst_mac: mac,
        };
        fp.set_select(k, entry(VR, Path::Fast)).expect("select");
    }
    // The inner frames the user-space decap gives, selected on the
    // loopback too, for the comparison run.
    let k = SelectKey {
        ifindex: lo(),
        vlan: None,
        dst_mac: Some(VNIC_MAC),
    };
    fp.set_select(k, entry(VR, Path::Fast)).expect("select");
    let net = |a| (Ipv4Addr::new(10, a, 0, 0), 16);
    fp.add_route(VR, 0, net(2), NextHop::Gateway(GW))
        .expect("route");
    fp.add_route(VR, 0, net(7), NextHop::Connected)
        .expect("route");
    let gw = Neighbour {
        mac: GW_MAC,
        src_mac: ROUTER_MAC,
        ifindex: lo(),
    };
    fp.set_neighbour(VR, GW, gw).expect("neighbour");
    let far = Neighbour {
        mac: FAR_MAC,
        src_mac: VNIC_MAC,
        ifindex: vnic,
    };
    fp.set_neighbour(VR, FAR, far).expect("neighbour");
    fp
}

/// A frame the slow path must take as it came: XDP_PASS, unchanged, not
/// forwarded.
fn assert_slow(fp: &mut FastPath, f: &[u8], what: &str) {
    let before = fp.counters(VR).expect("counters");
    let (act, out) = fp.test_run(f).expect("test run");
    assert_eq!(act, Action::Pass, "{what}: to the slow path");
    assert_eq!(out, f, "{what}: the frame as it came");
    let after = fp.counters(VR).expect("counters");
    assert_eq!(after.fwd, before.fwd, "{what}: not forwarded");
}

#[test]
fn a_tunnel_frame_is_decapsulated_and_routed_as_user_space_decapsulates_it() {
    for (kind, port) in kinds() {
        let mut fp = rig(kind, port, Some(PEER_MAC));
        let peer = host_tunnel(kind, port, true);
        let inner = frame(VNIC_MAC, Ipv4Addr::new(10, 2, 3, 4), 1000);
        let outer = encapsulate(peer, &mut Encap::new(peer), &inner);
        let mut table = TunnelTable::default();
        table.add(host_tunnel(kind, port, false), 0, 1);
        let Decap::Inner { body, head, .. } = table.decap(0, &outer) else {
            panic!("{kind:?}: user space does not decapsulate it");
        };
        // IP-in-IP: the Ethernet header user space makes up, then the packet.
        let inner_frame = [head.as_ref().map_or(&[][..], |h| &h[..]), body].concat();
        assert_eq!(head.is_some(), kind == FastTunnelKind::Ipip);
        let (act, expected) = fp.test_run(&inner_frame).expect("test run");
        assert_eq!(act, Action::Redirect, "{kind:?}: the inner frame, routed");
        let (act, out) = fp.test_run(&outer).expect("test run");
        assert_eq!(act, Action::Redirect, "{kind:?}: decapsulated and routed");
        assert_eq!(out, expected, "{kind:?}: byte for byte");
        assert_eq!(&out[0..12], &[GW_MAC, ROUTER_MAC].concat()[..]);
        let c = fp.tunnel_counters().expect("counters");
        assert_eq!((c.decap, c.to_slow_restored), (1, 0), "{kind:?}");
    }
}

#[test]
fn a_frame_routed_to_a_tunnel_vnic_gets_the_outer_headers_user_space_writes() {
    for (kind, port) in kinds() {
        let mut fp = rig(kind, port, Some(PEER_MAC));
        let ours = host_tunnel(kind, port, false);
        let mut encap = Encap::new(ours);
        for sport in [1000, 1001, 5353] {
            let f = frame(ROUTER_MAC, FAR, sport);
            let (act, out) = fp.test_run(&f).expect("test run");
            assert_eq!(act, Action::Redirect, "{kind:?}: encapsulated");
            // The router's rewrite of the inner frame, then user space's
            // outer headers (identification 1, 2, 3; source port by flow).
            let mut routed = f.clone();
            routed[0..6].copy_from_slice(&FAR_MAC);
            routed[6..12].copy_from_slice(&VNIC_MAC);
            let mut ip = Ipv4Packet::new_unchecked(&mut routed[14..34]);
            ip.set_ttl(63);
            ip.fill_checksum();
            let expected = encapsulate(ours, &mut encap, &routed);
            assert_eq!(out, expected, "{kind:?} sport {sport}: byte for byte");
        }
        let c = fp.tunnel_counters().expect("counters");
        assert_eq!(c.encap, 3, "{kind:?}");
        assert_eq!(fp.counters(VR).expect("counters").fwd, 3);
    }
}

#[test]
fn a_malformed_or_unknown_tunnel_frame_goes_to_the_slow_path_untouched() {
    let mut fp = rig(FastTunnelKind::Vxlan(42), 4789, Some(PEER_MAC));
    let peer = host_tunnel(FastTunnelKind::Vxlan(42), 4789, true);
    let inner = frame(VNIC_MAC, Ipv4Addr::new(10, 2, 3, 4), 1000);
    let good = encapsulate(peer, &mut Encap::new(peer), &inner);
    let fix = |mut f: Vec<u8>| {
        Ipv4Packet::new_unchecked(&mut f[14..34]).fill_checksum();
        f
    };
    let mut bad_sum = good.clone();
    bad_sum[24] ^= 0xff;
    let mut no_i_flag = good.clone();
    no_i_flag[42] = 0;
    let mut fragment = good.clone();
    fragment[20] = 0x20;
    let mut short = good.clone();
    short.truncate(60);
    let mut padded = good.clone();
    padded.extend_from_slice(&[0; 4]);
    let mut udp_len = good.clone();
    udp_len[39] = udp_len[39].wrapping_add(1);
    let cases = [
        ("bad outer checksum", bad_sum),
        ("I flag clear", no_i_flag),
        ("fragment", fix(fragment)),
        ("shorter than its IPv4 length", short),
        ("padding after the payload", padded),
        ("UDP length off", udp_len),
    ];
    let n = cases.len() as u64;
    for (what, f) in cases {
        assert_slow(&mut fp, &f, what);
    }
    let mut unknown = good.clone();
    unknown[48] = 43;
    assert_slow(&mut fp, &unknown, "unknown VNI");
    let c = fp.tunnel_counters().expect("counters");
    assert_eq!((c.to_slow_bad_outer, c.to_slow_unknown, c.decap), (n, 1, 0));
    // Before its tunnel is known a frame is counted as of none.
    let none = fp.tunnel_counters_of(MAX_TUNNELS).expect("counters");
    assert_eq!(none, c, "of no tunnel");
    // The valid frame still goes fast, counted as its tunnel's.
    assert_eq!(fp.test_run(&good).expect("run").0, Action::Redirect);
    let t = fp.tunnel_counters_of(ID).expect("counters");
    assert_eq!((t.decap, t.to_slow_bad_outer), (1, 0));
    // Set anew, a tunnel's counters start at 0.
    let again = fp.tunnels.now[&ID];
    assert!(fp.remove_tunnel(ID).expect("remove"));
    fp.set_tunnel(ID, &again).expect("set again");
    assert_eq!(
        fp.tunnel_counters_of(ID).expect("counters"),
        Default::default()
    );
}

#[test]
fn a_decapsulated_frame_for_the_slow_path_gets_its_outer_headers_back() {
    let mut fp = rig(FastTunnelKind::Vxlan(42), 4789, Some(PEER_MAC));
    let peer = host_tunnel(FastTunnelKind::Vxlan(42), 4789, true);
    let inner = frame(VNIC_MAC, Ipv4Addr::new(10, 99, 0, 1), 1000);
    let outer = encapsulate(peer, &mut Encap::new(peer), &inner);
    assert_slow(&mut fp, &outer, "no route");
    // Linux's own VXLAN frame (VNI 42, IPv6 inside): not for the fast path.
    assert_slow(&mut fp, &VXLAN_FRAME, "a Linux VXLAN frame, IPv6 inside");
    let c = fp.tunnel_counters().expect("counters");
    assert_eq!((c.decap, c.to_slow_restored), (2, 2));
    assert_eq!(
        fp.tunnel_counters_of(ID).expect("counters"),
        c,
        "its tunnel's"
    );
    let v = fp.counters(VR).expect("counters");
    assert_eq!((v.to_slow_no_route, v.to_slow_not_ip), (1, 1));
    // IP-in-IP, whose made-up Ethernet header took 14 bytes of the outer
    // IPv4 header: they are put back.
    let mut fp = rig(FastTunnelKind::Ipip, 0, Some(PEER_MAC));
    let peer = host_tunnel(FastTunnelKind::Ipip, 0, true);
    let outer = encapsulate(peer, &mut Encap::new(peer), &inner);
    assert_slow(&mut fp, &outer, "IP-in-IP, no route");
    let mut bad_sum = outer.clone();
    bad_sum[24] ^= 0xff;
    assert_slow(&mut fp, &bad_sum, "IP-in-IP, bad outer checksum");
    let c = fp.tunnel_counters().expect("counters");
    assert_eq!(
        (c.decap, c.to_slow_restored, c.to_slow_bad_outer),
        (1, 1, 1)
    );
}

#[test]
fn without_a_peer_mac_frames_out_go_slow_until_one_is_learned() {
    let mut fp = rig(FastTunnelKind::Vxlan(42), 4789, None);
    let f = frame(ROUTER_MAC, FAR, 1000);
    assert_slow(&mut fp, &f, "peer MAC unknown");
    assert_eq!(fp.tunnel_counters().expect("counters").to_slow_no_mac, 1);
    // A valid frame from the peer teaches it.
    let peer = host_tunnel(FastTunnelKind::Vxlan(42), 4789, true);
    let inner = frame(VNIC_MAC, Ipv4Addr::new(10, 2, 3, 4), 1000);
    let outer = encapsulate(peer, &mut Encap::new(peer), &inner);
    assert_eq!(fp.test_run(&outer).expect("run").0, Action::Redirect);
    let (act, out) = fp.test_run(&f).expect("test run");
    assert_eq!(act, Action::Redirect, "encapsulated now");
    assert_eq!(&out[0..12], &[PEER_MAC, OUR_MAC].concat()[..]);
}

#[test]
fn tunnels_the_program_cannot_carry_are_refused() {
    let mut fp = rig(FastTunnelKind::Vxlan(42), 4789, Some(PEER_MAC));
    let t = fast_tunnel(FastTunnelKind::Vxlan(42), 4789, None);
    let refused = |fp: &mut FastPath, id, t: &FastTunnel| {
        matches!(fp.set_tunnel(id, t), Err(FastError::Config { .. }))
    };
    assert!(refused(&mut fp, MAX_TUNNELS, &t), "id");
    let big = fast_tunnel(FastTunnelKind::Vxlan(1 << 24), 4789, None);
    assert!(refused(&mut fp, 1, &big), "VNI");
    assert!(
        refused(&mut fp, 1, &FastTunnel { udp_port: 0, ..t }),
        "port 0"
    );
    assert!(refused(&mut fp, 1, &t), "same endpoints and VNI");
    let udp = fast_tunnel(FastTunnelKind::Udp, 4789, None);
    assert!(refused(&mut fp, 1, &udp), "UDP on VXLAN's endpoint");
    // Removed: its frames go to the slow path (not a tunnel's any more).
    assert!(fp.remove_tunnel(ID).expect("remove"));
    assert!(!fp.remove_tunnel(ID).expect("remove"));
    let outer = VXLAN_FRAME.to_vec();
    assert_slow(&mut fp, &outer, "tunnel removed");
    assert_eq!(fp.tunnel_counters().expect("counters").decap, 0);
}
