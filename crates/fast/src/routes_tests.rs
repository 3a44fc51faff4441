//! A whole table written by the batch ([`FastPath::add_routes`],
//! [`FastPath::remove_routes`]) and forwarded by, run on frames with
//! `BPF_PROG_TEST_RUN` (root).

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
    let mut fp = load_on_lo(4, max_routes, ROUTER_MAC, VR, RoutingMode::Dst, vec![]);
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
fn a_table_goes_in_by_the_batch_and_each_route_forwards() {
    let mut fp = rig(N + 16);
    let table: Vec<RouteEntry> = (0..N).map(route).collect();
    let t = Instant::now();
    let batched = fp.add_routes(VR, &table).expect("add the table");
    let load = t.elapsed();
    assert!(batched, "this kernel has the trie's batch update");
    // The same number of routes again, one update each (replacing
    // themselves): what the batch saves.
    let t = Instant::now();
    for &((tb, p, l), hop) in &table {
        fp.add_route(VR, tb, (p, l), hop).expect("route");
    }
    let one_by_one = t.elapsed();
    eprintln!(
        "{N} routes: {:.0} ms by the batch, {:.0} ms one update each (debug build, busy machine)",
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
