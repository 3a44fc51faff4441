//! A whole table written at once ([`FastPath::add_routes`],
//! [`FastPath::remove_routes`]) and forwarded by, run on frames with
//! `BPF_PROG_TEST_RUN` (root); route changes exposing and shadowing
//! prefixes; a table that does not fit taken back whole.

use std::time::Instant;

use super::testkit::load_on_lo;
use super::*;
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;

const VR: u32 = 1;
const ROUTER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const GW: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 9, 0, 2), Ipv4Addr::new(10, 9, 0, 3)];
const GW_MAC: [[u8; 6]; 2] = [[2, 0, 0, 0, 0xa, 0xa], [2, 0, 0, 0, 0xb, 0xb]];
/// Routes in the table: /24s from 11.0.0.0 up.
const N: u32 = 200_000;

fn net(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(0x0b00_0000 + (i << 8))
}

/// Route `i`'s next hop: by its parity.
fn route(i: u32) -> RouteEntry {
    ((0, net(i), 24), NextHop::Gateway(GW[(i % 2) as usize]))
}

fn frame_to(dst: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr(ROUTER_MAC),
        src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
        src_ip: Ipv4Addr::new(10, 1, 0, 5),
        dst_ip: dst,
        sport: 1000,
        dport: 2000,
        ttl: 64,
        frame_bytes: 64,
    }
    .write(&mut f)
    .expect("frame");
    f
}

/// Where a frame to host 7 of route `i`'s /24 goes: the next hop's MAC,
/// or `None` for the slow path.
fn hop_of(fp: &mut FastPath, i: u32) -> Option<[u8; 6]> {
    let dst = Ipv4Addr::from(u32::from(net(i)) + 7);
    match fp.test_run(&frame_to(dst)).expect("test run") {
        (Action::Redirect, out) => Some(out[..6].try_into().unwrap()),
        (Action::Pass, _) => None,
        (other, _) => panic!("to {dst}: {other:?}"),
    }
}

fn rig(max_routes: u32) -> FastPath {
    neighbours(load_on_lo(
        4,
        max_routes,
        ROUTER_MAC,
        VR,
        RoutingMode::Dst,
        vec![],
    ))
}

/// The gateways as neighbours on the loopback.
fn neighbours(mut fp: FastPath) -> FastPath {
    let lo = ifindex("lo").expect("loopback");
    for (ip, mac) in GW.into_iter().zip(GW_MAC) {
        let n = Neighbour {
            mac,
            src_mac: [2, 0, 0, 0, 1, 1],
            ifindex: lo,
        };
        fp.set_neighbour(VR, ip, n).expect("neighbour");
    }
    fp
}

#[test]
fn a_table_goes_in_at_once_and_each_route_forwards() {
    let mut fp = rig(N + 16);
    let table: Vec<RouteEntry> = (0..N).map(route).collect();
    let t = Instant::now();
    fp.add_routes(VR, &table).expect("add the table");
    let load = t.elapsed();
    assert_eq!(fp.route_count().0, N as usize);
    // The same number of routes again, one call each (replacing
    // themselves).
    let t = Instant::now();
    for &((tb, p, l), hop) in &table {
        fp.add_route(VR, tb, (p, l), hop).expect("route");
    }
    let one_by_one = t.elapsed();
    eprintln!(
        "{N} routes: {:.0} ms at once, {:.0} ms one call each (debug build, busy machine)",
        load.as_secs_f64() * 1e3,
        one_by_one.as_secs_f64() * 1e3
    );
    for i in [0, 1, 2, 12_345, N / 2 + 1, N - 2, N - 1] {
        assert_eq!(
            hop_of(&mut fp, i),
            Some(GW_MAC[(i % 2) as usize]),
            "route {i}"
        );
    }
    assert_eq!(hop_of(&mut fp, N), None, "past the table: no route");
    // Half of them out, with keys that are not there among them.
    let gone: Vec<_> = (N / 2..N + 100).map(|i| route(i).0).collect();
    assert_eq!(
        fp.remove_routes(VR, &gone).expect("remove"),
        (N / 2) as usize
    );
    for i in [N / 2, N / 2 + 1, N - 1] {
        assert_eq!(hop_of(&mut fp, i), None, "route {i} removed");
    }
    assert_eq!(hop_of(&mut fp, N / 2 - 1), Some(GW_MAC[1]), "kept");
    // A missing key first, then present ones: stepped over.
    let mixed: Vec<_> = [N + 1, 0, 1].iter().map(|&i| route(i).0).collect();
    assert_eq!(fp.remove_routes(VR, &mixed).expect("remove"), 2);
    assert_eq!(hop_of(&mut fp, 0), None);
}

#[test]
fn a_table_larger_than_the_trie_is_refused_with_the_knob() {
    let mut fp = rig(1000);
    let table: Vec<RouteEntry> = (0..1500).map(route).collect();
    let e = fp.add_routes(VR, &table).expect_err("1500 routes in 1000");
    assert!(e.to_string().contains("max_routes"), "{e}");
    let bad = [((0, net(0), 33), NextHop::Connected)];
    assert!(matches!(
        fp.add_routes(VR, &bad),
        Err(FastError::PrefixLen { len: 33 })
    ));
    assert!(matches!(
        fp.add_routes(9, &table[..1]),
        Err(FastError::VrRange { vr: 9, .. })
    ));
}

/// Where a frame to `dst` goes: the next hop's MAC, or `None` (slow).
fn hop_to(fp: &mut FastPath, dst: [u8; 4]) -> Option<[u8; 6]> {
    let dst = Ipv4Addr::from(dst);
    match fp.test_run(&frame_to(dst)).expect("test run") {
        (Action::Redirect, out) => Some(out[..6].try_into().unwrap()),
        (Action::Pass, _) => None,
        (other, _) => panic!("to {dst}: {other:?}"),
    }
}

fn gw(i: usize) -> NextHop {
    NextHop::Gateway(GW[i])
}

#[test]
fn a_delete_exposes_the_covering_prefix_and_a_more_specific_add_shadows() {
    let mut fp = rig(64);
    let p = |a: [u8; 4], l| (Ipv4Addr::from(a), l);
    // /8 in the root, /16 in the root, /24 in a level-1 group, /25 and
    // /32 in a level-2 group.
    fp.add_route(VR, 0, p([11, 0, 0, 0], 8), gw(0)).expect("/8");
    assert_eq!(fp.route_count(), (1, 0));
    fp.add_route(VR, 0, p([11, 1, 0, 0], 16), gw(1))
        .expect("/16");
    assert_eq!(hop_to(&mut fp, [11, 1, 2, 7]), Some(GW_MAC[1]), "/16");
    fp.add_route(VR, 0, p([11, 1, 2, 0], 24), gw(0))
        .expect("/24");
    assert_eq!(
        hop_to(&mut fp, [11, 1, 2, 7]),
        Some(GW_MAC[0]),
        "/24 shadows /16"
    );
    fp.add_route(VR, 0, p([11, 1, 2, 128], 25), gw(1))
        .expect("/25");
    assert_eq!(fp.route_count(), (4, 2), "a level-1 and a level-2 group");
    let at = |fp: &mut FastPath| {
        [
            [11, 1, 2, 7],
            [11, 1, 2, 200],
            [11, 1, 3, 1],
            [11, 2, 0, 1],
            [12, 0, 0, 1],
        ]
        .map(|d| hop_to(fp, d))
    };
    let (a, b) = (Some(GW_MAC[0]), Some(GW_MAC[1]));
    assert_eq!(at(&mut fp), [a, b, b, a, None]);
    // The /24 goes: its addresses fall back to the /16, the /25 stays.
    assert!(fp.remove_route(VR, 0, p([11, 1, 2, 0], 24)).expect("rm"));
    assert_eq!(at(&mut fp), [b, b, b, a, None]);
    // The /16 goes: to the /8.
    assert!(fp.remove_route(VR, 0, p([11, 1, 0, 0], 16)).expect("rm"));
    assert_eq!(at(&mut fp), [a, b, a, a, None]);
    assert!(!fp.remove_route(VR, 0, p([11, 1, 0, 0], 16)).expect("rm"));
    // A /32 shadows the /8 for one address only.
    fp.add_route(VR, 0, p([11, 1, 2, 7], 32), gw(1))
        .expect("/32");
    assert_eq!(at(&mut fp), [b, b, a, a, None]);
    assert_eq!(hop_to(&mut fp, [11, 1, 2, 6]), a);
    // The more specific ones go: the groups are given back, the /8 is
    // what is left.
    assert!(fp.remove_route(VR, 0, p([11, 1, 2, 7], 32)).expect("rm"));
    assert!(fp.remove_route(VR, 0, p([11, 1, 2, 128], 25)).expect("rm"));
    assert_eq!(fp.route_count(), (1, 0));
    assert_eq!(at(&mut fp), [a, a, a, a, None]);
    // Re-added with other next hops.
    fp.add_route(VR, 0, p([11, 1, 2, 128], 25), gw(0))
        .expect("/25");
    fp.add_route(VR, 0, p([11, 0, 0, 0], 8), gw(1))
        .expect("/8 again");
    assert_eq!(at(&mut fp), [b, a, b, b, None]);
    assert!(fp.remove_route(VR, 0, p([11, 0, 0, 0], 8)).expect("rm"));
    assert_eq!(at(&mut fp), [None, a, None, None, None]);
}

#[test]
fn a_table_that_does_not_fit_is_taken_back_whole() {
    let cfg = FastConfig {
        max_vrs: 4,
        max_route_tables: 2,
        max_route_groups: 40,
        ..FastConfig::default()
    };
    let fp = testkit::load_cfg_on_lo(&cfg, ROUTER_MAC, VR, RoutingMode::Dst, vec![]);
    let mut fp = neighbours(fp);
    // 30 /24s in 30 /16s: a group each.
    let spread = |i: u32, hop| ((0, Ipv4Addr::from(0x0b00_0000 + (i << 16)), 24), gw(hop));
    let first: Vec<_> = (0..30).map(|i| spread(i, 0)).collect();
    fp.add_routes(VR, &first).expect("30 fit");
    assert_eq!(fp.route_count(), (30, 30));
    // 20 more, after one of the first 30 replaced: 50 groups in 40.
    let mut more = vec![spread(0, 1)];
    more.extend((30..50).map(|i| spread(i, 1)));
    let e = fp.add_routes(VR, &more).expect_err("50 groups in 40");
    assert!(e.to_string().contains("max_route_groups"), "{e}");
    assert_eq!(fp.route_count().0, 30, "none of the 20 stays");
    let to = |i: u32| [11, i as u8, 0, 7];
    assert_eq!(hop_to(&mut fp, to(0)), Some(GW_MAC[0]), "replaced back");
    assert_eq!(hop_to(&mut fp, to(29)), Some(GW_MAC[0]));
    for i in 30..50 {
        assert_eq!(hop_to(&mut fp, to(i)), None, "route {i} taken back");
    }
    // A second VR's table fits in the slots; a third does not.
    fp.add_route(2, 0, (Ipv4Addr::new(11, 0, 0, 0), 8), gw(0))
        .expect("table 2");
    let e = fp
        .add_route(3, 0, (Ipv4Addr::new(11, 0, 0, 0), 8), gw(0))
        .expect_err("a third table in 2 slots");
    assert!(e.to_string().contains("max_route_tables"), "{e}");
}

/// A call that fails part way is taken back whole, and the taking back
/// reports its own failure ([`FastError::Undo`]) rather than leaving the
/// VR half on the new routes unsaid: here a replaced route's next hop id,
/// given up a moment before, is needed again to put the route back.
#[test]
fn a_replace_is_taken_back_when_the_next_hop_ids_run_out() {
    let cfg = FastConfig {
        max_vrs: 4,
        max_route_hops: 3,
        ..FastConfig::default()
    };
    let fp = testkit::load_cfg_on_lo(&cfg, ROUTER_MAC, VR, RoutingMode::Dst, vec![]);
    let mut fp = neighbours(fp);
    let r = |b: u8, hop| ((0, Ipv4Addr::new(11, b, 0, 0), 16), hop);
    let other = |d: u8| NextHop::Gateway(Ipv4Addr::new(10, 9, 0, d));
    fp.add_routes(VR, &[r(1, gw(0)), r(2, NextHop::Connected)])
        .expect("two next hops in three");
    assert_eq!(hop_to(&mut fp, [11, 1, 0, 7]), Some(GW_MAC[0]));
    // Route 1 moves to a third next hop (gw(0)'s id is given up), route 3
    // takes that id once it is reusable, route 4 finds none.
    let more = [r(1, gw(1)), r(3, other(4)), r(4, other(5))];
    let e = fp
        .add_routes(VR, &more)
        .expect_err("four next hops in three");
    assert!(
        matches!(e, FastError::Config { .. }) && e.to_string().contains("max_route_hops"),
        "the cause alone, the taking back having worked: {e}"
    );
    assert_eq!(fp.route_count(), (2, 0), "route 3 taken back");
    assert_eq!(
        hop_to(&mut fp, [11, 1, 0, 7]),
        Some(GW_MAC[0]),
        "route 1 on its old next hop again"
    );
    // The ids are all back: three next hops fit.
    fp.add_routes(VR, &more[..2])
        .expect("three next hops in three");
    assert_eq!(hop_to(&mut fp, [11, 1, 0, 7]), Some(GW_MAC[1]));
}

/// Replacing a route takes no group: it works with fewer groups left than
/// a new route asks for (two, one a level), and so does taking one back
/// after a call ran out of groups.
#[test]
fn a_replace_needs_no_free_group() {
    let cfg = FastConfig {
        max_vrs: 4,
        max_route_groups: 3,
        ..FastConfig::default()
    };
    let fp = testkit::load_cfg_on_lo(&cfg, ROUTER_MAC, VR, RoutingMode::Dst, vec![]);
    let mut fp = neighbours(fp);
    // A /24 in its own /16: a group each.
    let r = |b: u8, hop| ((0, Ipv4Addr::new(11, b, 1, 0), 24), hop);
    fp.add_routes(VR, &[r(1, gw(0)), r(2, gw(0))])
        .expect("two groups in three");
    assert_eq!(fp.route_count(), (2, 2));
    fp.add_routes(VR, &[r(1, gw(1))])
        .expect("a replace with one group left");
    assert_eq!(hop_to(&mut fp, [11, 1, 1, 7]), Some(GW_MAC[1]));
    let e = fp
        .add_routes(VR, &[r(2, gw(1)), r(3, gw(1))])
        .expect_err("a new route with one group left");
    assert!(
        matches!(e, FastError::Config { .. }) && e.to_string().contains("max_route_groups"),
        "the cause alone, the taking back having worked: {e}"
    );
    assert_eq!(fp.route_count(), (2, 2));
    assert_eq!(hop_to(&mut fp, [11, 2, 1, 7]), Some(GW_MAC[0]), "put back");
    assert_eq!(hop_to(&mut fp, [11, 3, 1, 7]), None);
}
