//! The program run on real frames with `BPF_PROG_TEST_RUN` (needs root:
//! the program is loaded into the running kernel, and the verifier checks
//! it each time). In a test run the ingress port is the loopback device
//! and a redirect is reported, not done; the slow path has no AF_XDP
//! socket, so a frame for it comes back as `XDP_PASS` (the program's
//! fallback) and the counters say why it went there.

use super::testkit::{entry, load_on_lo, set_mode};
use super::*;
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;
use vrhost_packet::checksum::checksum;
use vrhost_packet::ipv4::Ipv4Packet;

const VR: u32 = 3;
const ROUTER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];
const OUT_MAC: [u8; 6] = [2, 0, 0, 0, 1, 1];
const GW_A: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);
const GW_A_MAC: [u8; 6] = [2, 0, 0, 0, 0xa, 0xa];
const GW_B: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 3);
const GW_B_MAC: [u8; 6] = [2, 0, 0, 0, 0xb, 0xb];
const GW_C: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 4);
const GW_C_MAC: [u8; 6] = [2, 0, 0, 0, 0xc, 0xc];
const OWN: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const SRC: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const DST: Ipv4Addr = Ipv4Addr::new(10, 2, 3, 4);

fn lo() -> u32 {
    ifindex("lo").expect("loopback's index")
}

fn key() -> SelectKey {
    SelectKey {
        ifindex: lo(),
        vlan: None,
        dst_mac: Some(ROUTER_MAC),
    }
}

fn frame(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr(ROUTER_MAC),
        src_mac: MacAddr(HOST_MAC),
        src_ip: src,
        dst_ip: dst,
        sport: 1000,
        dport: 2000,
        ttl,
        frame_bytes: 64,
    }
    .write(&mut f)
    .expect("frame");
    f
}

fn neighbour(mac: [u8; 6]) -> Neighbour {
    Neighbour {
        mac,
        src_mac: OUT_MAC,
        ifindex: lo(),
    }
}

/// VR 3 on the fast path in `mode`, selected by the router's MAC on the
/// loopback: routes (table 0) 10.2/16 via A and 10.1/16 via B (the latter
/// is what mode src finds for sources in 10.1/16); src-dst: sources in
/// 10.1/16 use table 7, where 10.2/16 goes via C. A, B and C are
/// neighbours out of the loopback.
fn rig(mode: RoutingMode) -> FastPath {
    let mut fp = load_on_lo(8, 64, ROUTER_MAC, VR, mode, vec![OWN]);
    let net = |a, b| Ipv4Addr::new(10, a, b, 0);
    fp.add_route(VR, 0, (net(2, 0), 16), NextHop::Gateway(GW_A))
        .expect("route");
    fp.add_route(VR, 0, (net(1, 0), 16), NextHop::Gateway(GW_B))
        .expect("route");
    fp.set_source_table(VR, (net(1, 0), 16), 7)
        .expect("source table");
    fp.add_route(VR, 7, (net(2, 0), 16), NextHop::Gateway(GW_C))
        .expect("route");
    for (ip, mac) in [(GW_A, GW_A_MAC), (GW_B, GW_B_MAC), (GW_C, GW_C_MAC)] {
        fp.set_neighbour(VR, ip, neighbour(mac)).expect("neighbour");
    }
    fp
}

/// VR 3's entry on the loopback, limited to `rate_pps` after a burst of `burst`.
fn rate_limit(fp: &mut FastPath, rate_pps: u64, burst: u64) {
    let limit = Some(TokenBucket { rate_pps, burst });
    let e = SelectEntry {
        limit,
        ..entry(VR, Path::Fast)
    };
    fp.set_select(key(), e).expect("select");
}

fn ip_ok(f: &[u8]) -> bool {
    Ipv4Packet::new_checked(&f[14..])
        .expect("ipv4")
        .verify_checksum()
}

/// A frame the fast path hands to the slow path: `XDP_PASS` here (no
/// socket), unchanged, and counted by `reason`.
fn assert_slow(fp: &mut FastPath, f: &[u8], reason: impl Fn(&FastCounters) -> u64, what: &str) {
    let before = fp.counters(VR).expect("counters");
    let (act, out) = fp.test_run(f).expect("test run");
    assert_eq!(act, Action::Pass, "{what}: to the slow path");
    assert_eq!(out, f, "{what}: frame untouched");
    let after = fp.counters(VR).expect("counters");
    assert_eq!(reason(&after), reason(&before) + 1, "{what}: counted");
    assert_eq!(after.fwd, before.fwd, "{what}: not forwarded");
    assert_eq!(after.to_slow(), before.to_slow() + 1, "{what}: one reason");
}

/// [`assert_slow`] for a UDP frame from `SRC` to `dst`, TTL 64.
fn assert_slow_to(
    fp: &mut FastPath,
    dst: Ipv4Addr,
    reason: impl Fn(&FastCounters) -> u64,
    what: &str,
) {
    assert_slow(fp, &frame(SRC, dst, 64), reason, what);
}

#[test]
fn forwards_with_ttl_checksum_and_macs() {
    let mut fp = rig(RoutingMode::Dst);
    let f = frame(SRC, DST, 64);
    let (act, out) = fp.test_run(&f).expect("test run");
    assert_eq!(act, Action::Redirect);
    assert_eq!(out.len(), f.len());
    assert_eq!(&out[0..6], &GW_A_MAC, "next hop's MAC");
    assert_eq!(&out[6..12], &OUT_MAC, "out port's MAC");
    let ip = Ipv4Packet::new_checked(&out[14..]).expect("ipv4");
    assert_eq!(ip.ttl(), 63);
    assert!(ip.verify_checksum(), "RFC 1624 update keeps it valid");
    assert_eq!(checksum(&out[14..34]), 0);
    // Only TTL and checksum changed past the MACs.
    for (i, (a, b)) in f.iter().zip(&out).enumerate().skip(12) {
        if ![14 + 8, 14 + 10, 14 + 11].contains(&i) {
            assert_eq!(a, b, "byte {i}");
        }
    }
    let c = fp.counters(VR).expect("counters");
    assert_eq!((c.rx, c.fwd, c.to_slow(), c.dropped()), (1, 1, 0, 0));
}

#[test]
fn checksum_update_across_ttls() {
    // Every TTL from 255 to 2 through the incremental update, against a
    // full recomputation.
    let mut fp = rig(RoutingMode::Dst);
    for ttl in 2..=255u8 {
        let f = frame(SRC, DST, ttl);
        let (act, out) = fp.test_run(&f).expect("test run");
        assert_eq!(act, Action::Redirect, "ttl {ttl}");
        assert_eq!(out[22], ttl - 1);
        assert!(ip_ok(&out), "ttl {ttl}: checksum");
    }
}

#[test]
fn unselected_goes_to_slow() {
    let mut fp = rig(RoutingMode::Dst);
    let mut f = frame(SRC, DST, 64);
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x77]);
    let (act, out) = fp.test_run(&f).expect("test run");
    assert_eq!(act, Action::Pass);
    assert_eq!(out, f);
    assert_eq!(fp.unselected().expect("unselected"), 1);
    assert_eq!(fp.counters(VR).expect("counters").rx, 0);
}

#[test]
fn wildcard_mac_entry_selects_the_port() {
    let mut fp = rig(RoutingMode::Dst);
    assert!(fp.remove_select(key()).expect("remove"));
    assert!(!fp.remove_select(key()).expect("remove again"));
    let any = SelectKey {
        dst_mac: None,
        ..key()
    };
    fp.set_select(any, entry(VR, Path::Fast)).expect("select");
    let (act, _) = fp.test_run(&frame(SRC, DST, 64)).expect("test run");
    assert_eq!(act, Action::Redirect);
}

/// The program's per-CPU caches (`ebpf/xdp_cache.h`) of the select
/// table and the neighbours: each change is seen by the next frame.
#[test]
fn cached_answers_follow_every_change() {
    let mut fp = rig(RoutingMode::Dst);
    let f = frame(SRC, DST, 64);
    let next_hop = |fp: &mut FastPath| {
        let (act, out) = fp.test_run(&f).expect("test run");
        assert_eq!(act, Action::Redirect);
        <[u8; 6]>::try_from(&out[0..6]).expect("MAC")
    };
    // Twice: the second from the caches.
    assert_eq!(next_hop(&mut fp), GW_A_MAC);
    assert_eq!(next_hop(&mut fp), GW_A_MAC);
    fp.set_neighbour(VR, GW_A, neighbour(GW_B_MAC))
        .expect("neighbour");
    assert_eq!(next_hop(&mut fp), GW_B_MAC, "a changed neighbour");
    assert!(fp.remove_neighbour(VR, GW_A).expect("remove"));
    assert_slow(
        &mut fp,
        &f,
        |c| c.to_slow_no_neighbour,
        "a removed neighbour",
    );
    fp.set_neighbour(VR, GW_A, neighbour(GW_A_MAC))
        .expect("neighbour");
    assert_eq!(next_hop(&mut fp), GW_A_MAC);

    // The port-wide entry's answer cached for the frame's exact key, then
    // an entry for that key, then none.
    let any = SelectKey {
        dst_mac: None,
        ..key()
    };
    assert!(fp.remove_select(key()).expect("remove"));
    fp.set_select(any, entry(VR, Path::Fast)).expect("select");
    assert_eq!(next_hop(&mut fp), GW_A_MAC);
    assert_eq!(next_hop(&mut fp), GW_A_MAC);
    fp.set_select(key(), entry(VR, Path::Drop)).expect("select");
    let (act, _) = fp.test_run(&f).expect("test run");
    assert_eq!(act, Action::Drop, "the exact key's entry, added after");
    assert!(fp.remove_select(key()).expect("remove"));
    assert_eq!(next_hop(&mut fp), GW_A_MAC, "the port's entry again");
    assert!(fp.remove_select(any).expect("remove"));
    let before = fp.unselected().expect("unselected");
    let (act, _) = fp.test_run(&f).expect("test run");
    assert_eq!(act, Action::Pass, "no entry: the slow path");
    assert_eq!(fp.unselected().expect("unselected"), before + 1);

    // A bucket on the entry: looked up (not cached) each frame.
    fp.set_select(key(), entry(VR, Path::Fast)).expect("select");
    assert_eq!(next_hop(&mut fp), GW_A_MAC);
    rate_limit(&mut fp, 1, 1);
    assert_eq!(next_hop(&mut fp), GW_A_MAC, "the burst's one token");
    let (act, _) = fp.test_run(&f).expect("test run");
    assert_eq!(act, Action::Drop, "the bucket is empty");
}

#[test]
fn drop_and_slow_entries() {
    let mut fp = rig(RoutingMode::Dst);
    let f = frame(SRC, DST, 64);
    fp.set_select(key(), entry(VR, Path::Drop)).expect("select");
    let (act, _) = fp.test_run(&f).expect("test run");
    assert_eq!(act, Action::Drop);
    assert_eq!(fp.counters(VR).expect("counters").drop_select, 1);

    fp.set_select(key(), entry(VR, Path::Slow)).expect("select");
    assert_slow(&mut fp, &f, |c| c.to_slow_select, "path slow");

    // Fast in the select table, but the VR taken off the fast path.
    fp.set_select(key(), entry(VR, Path::Fast)).expect("select");
    fp.remove_vr(VR).expect("remove vr");
    assert_slow(&mut fp, &f, |c| c.to_slow_select, "VR not fast");
}

#[test]
fn what_the_fast_path_leaves_to_the_slow_path() {
    let mut fp = rig(RoutingMode::Dst);

    assert_slow(&mut fp, &frame(SRC, DST, 1), |c| c.to_slow_ttl, "TTL 1");
    assert_slow(&mut fp, &frame(SRC, DST, 0), |c| c.to_slow_ttl, "TTL 0");

    let mut bad = frame(SRC, DST, 64);
    bad[24] ^= 0x55;
    assert_slow(&mut fp, &bad, |c| c.to_slow_bad_checksum, "bad checksum");

    // IP options: 4 NOPs, IHL 6, lengths and checksum fixed up.
    let mut opt = frame(SRC, DST, 64);
    opt.splice(34..34, [1u8, 1, 1, 1]);
    opt[14] = 0x46;
    let tot = u16::from_be_bytes([opt[16], opt[17]]) + 4;
    opt[16..18].copy_from_slice(&tot.to_be_bytes());
    opt[24..26].copy_from_slice(&[0, 0]);
    let c = checksum(&opt[14..38]);
    opt[24..26].copy_from_slice(&c.to_be_bytes());
    assert_slow(&mut fp, &opt, |c| c.to_slow_options, "IP options");

    // ARP request (to the router's MAC, so it is selected).
    let mut arp = frame(SRC, DST, 64);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_slow(&mut fp, &arp, |c| c.to_slow_not_ip, "ARP");

    assert_slow_to(&mut fp, OWN, |c| c.to_slow_local, "own address");
    let miss = Ipv4Addr::new(192, 168, 1, 1);
    assert_slow_to(&mut fp, miss, |c| c.to_slow_no_route, "route miss");

    fp.remove_neighbour(VR, GW_A).expect("remove neighbour");
    assert_slow_to(&mut fp, DST, |c| c.to_slow_no_neighbour, "neighbour miss");
    fp.set_neighbour(VR, GW_A, neighbour(GW_A_MAC))
        .expect("neighbour");

    assert!(fp.remove_port(lo()).expect("remove port"));
    assert_slow_to(&mut fp, DST, |c| c.to_slow_no_port, "no out port");
    fp.add_port(lo()).expect("port");

    let mcast = Ipv4Addr::new(224, 0, 0, 5);
    assert_slow_to(&mut fp, mcast, |c| c.to_slow_group, "multicast");
    let bcast = Ipv4Addr::new(255, 255, 255, 255);
    assert_slow_to(&mut fp, bcast, |c| c.to_slow_group, "broadcast");

    // Still forwarding after all that.
    let (act, _) = fp.test_run(&frame(SRC, DST, 64)).expect("test run");
    assert_eq!(act, Action::Redirect);
}

/// A VR's own addresses go to the slow path whether its conf holds them
/// all (up to `VR_INLINE_ADDRS`) or the program looks them up in `addrs`
/// (more); an address it no longer owns is forwarded again, either way.
#[test]
fn own_addresses_inline_or_in_the_map_go_slow() {
    let mut fp = rig(RoutingMode::Dst);
    let own = |i: u8| Ipv4Addr::new(10, 2, 0, i);
    let inline = abi::VR_INLINE_ADDRS as u8;
    for n in [1, inline, inline + 1, inline + 4] {
        set_mode(&mut fp, VR, RoutingMode::Dst, (1..=n).map(own).collect());
        for i in 1..=n {
            let what = format!("own address {i} of {n}");
            assert_slow_to(&mut fp, own(i), |c| c.to_slow_local, &what);
        }
        let (act, _) = fp.test_run(&frame(SRC, own(n + 1), 64)).expect("run");
        assert_eq!(act, Action::Redirect, "not owned, with {n}");
    }
    set_mode(&mut fp, VR, RoutingMode::Dst, vec![OWN]);
    for i in 1..=inline + 4 {
        let (act, _) = fp.test_run(&frame(SRC, own(i), 64)).expect("run");
        assert_eq!(act, Action::Redirect, "{} owned no more", own(i));
    }
    assert_slow_to(&mut fp, OWN, |c| c.to_slow_local, "own address");
}

#[test]
fn vlan_tagged_frames_select_by_vlan_and_go_slow() {
    let mut fp = rig(RoutingMode::Dst);
    let tagged_key = SelectKey {
        vlan: Some(42),
        ..key()
    };
    fp.set_select(tagged_key, entry(VR, Path::Fast))
        .expect("select");
    let mut f = frame(SRC, DST, 64);
    f.splice(12..12, [0x81, 0x00, 0x00, 42]);
    assert_slow(&mut fp, &f, |c| c.to_slow_not_ip, "VLAN 42");
    // Another VLAN: no entry.
    f[15] = 43;
    let (act, _) = fp.test_run(&f).expect("test run");
    assert_eq!(act, Action::Pass);
    assert_eq!(fp.unselected().expect("unselected"), 1);
}

/// A change that makes a frame's IPv4 header bad.
type Spoil = fn(&mut Vec<u8>);

#[test]
fn bad_headers_are_dropped() {
    let mut fp = rig(RoutingMode::Dst);
    let cases: [(&str, Spoil); 4] = [
        ("total length past the frame", |f| {
            f[16..18].copy_from_slice(&200u16.to_be_bytes())
        }),
        ("version 6", |f| f[14] = 0x65),
        ("IHL 4", |f| f[14] = 0x44),
        ("truncated", |f| f.truncate(30)),
    ];
    for (i, (what, spoil)) in cases.iter().enumerate() {
        let mut f = frame(SRC, DST, 64);
        spoil(&mut f);
        let (act, _) = fp.test_run(&f).expect("test run");
        assert_eq!(act, Action::Drop, "{what}");
        let c = fp.counters(VR).expect("counters");
        assert_eq!(c.drop_bad_header, i as u64 + 1, "{what}");
    }
    // A source no host may have (0.0.0.0), checksum valid.
    let (act, _) = fp
        .test_run(&frame(Ipv4Addr::UNSPECIFIED, DST, 64))
        .expect("test run");
    assert_eq!(act, Action::Drop);
    assert_eq!(fp.counters(VR).expect("counters").drop_bad_header, 5);
}

#[test]
fn routing_modes_choose_different_next_hops() {
    // The same frame, 10.1.0.5 -> 10.2.3.4: dst finds 10.2/16 via A, src
    // finds 10.1/16 via B, src-dst finds table 7's 10.2/16 via C.
    for (mode, mac) in [
        (RoutingMode::Dst, GW_A_MAC),
        (RoutingMode::Src, GW_B_MAC),
        (RoutingMode::SrcDst, GW_C_MAC),
    ] {
        let mut fp = rig(mode);
        let (act, out) = fp.test_run(&frame(SRC, DST, 64)).expect("test run");
        assert_eq!(act, Action::Redirect, "{mode:?}");
        assert_eq!(&out[0..6], &mac, "{mode:?}");
    }
    // Mode switch in place on one loaded program.
    let mut fp = rig(RoutingMode::Dst);
    for (mode, mac) in [
        (RoutingMode::SrcDst, GW_C_MAC),
        (RoutingMode::Src, GW_B_MAC),
        (RoutingMode::Dst, GW_A_MAC),
    ] {
        set_mode(&mut fp, VR, mode, vec![OWN]);
        let (_, out) = fp.test_run(&frame(SRC, DST, 64)).expect("test run");
        assert_eq!(&out[0..6], &mac, "{mode:?} after a switch");
    }
}

#[test]
fn src_dst_has_no_fallback() {
    let mut fp = rig(RoutingMode::SrcDst);
    // A source with no source table: no route, though table 0 has one.
    let other = Ipv4Addr::new(10, 3, 0, 1);
    assert_slow(
        &mut fp,
        &frame(other, DST, 64),
        |c| c.to_slow_no_route,
        "no source table",
    );
    // Table 7 has no route to 10.4/16; table 0 would not be asked either.
    fp.add_route(
        VR,
        0,
        (Ipv4Addr::new(10, 4, 0, 0), 16),
        NextHop::Gateway(GW_A),
    )
    .expect("route");
    let far = Ipv4Addr::new(10, 4, 0, 1);
    assert_slow_to(&mut fp, far, |c| c.to_slow_no_route, "no route in table 7");
    // A 0/0 source table is the default.
    fp.set_source_table(VR, (Ipv4Addr::UNSPECIFIED, 0), 0)
        .expect("default source table");
    let (act, out) = fp.test_run(&frame(other, DST, 64)).expect("test run");
    assert_eq!(act, Action::Redirect);
    assert_eq!(&out[0..6], &GW_A_MAC);
    assert!(
        fp.remove_source_table(VR, (Ipv4Addr::UNSPECIFIED, 0))
            .expect("remove")
    );
}

#[test]
fn longest_prefix_wins_and_routes_are_removed() {
    let mut fp = rig(RoutingMode::Dst);
    fp.add_route(VR, 0, (DST, 32), NextHop::Connected)
        .expect("host route");
    fp.set_neighbour(VR, DST, neighbour(GW_C_MAC))
        .expect("neighbour");
    let (_, out) = fp.test_run(&frame(SRC, DST, 64)).expect("test run");
    assert_eq!(
        &out[0..6],
        &GW_C_MAC,
        "/32 connected route: the destination is the neighbour"
    );
    assert!(fp.remove_route(VR, 0, (DST, 32)).expect("remove"));
    assert!(!fp.remove_route(VR, 0, (DST, 32)).expect("remove again"));
    let (_, out) = fp.test_run(&frame(SRC, DST, 64)).expect("test run");
    assert_eq!(&out[0..6], &GW_A_MAC, "back to the /16");
    // Another VR's routes are not this one's: VR ids are matched whole.
    let (act, _) = {
        fp.set_select(key(), entry(VR + 1, Path::Fast))
            .expect("select");
        fp.set_vr(VR + 1, &VrFastConfig::default()).expect("vr");
        fp.test_run(&frame(SRC, DST, 64)).expect("test run")
    };
    assert_eq!(act, Action::Pass);
    assert_eq!(fp.counters(VR + 1).expect("counters").to_slow_no_route, 1);
}

#[test]
fn token_bucket_drops_the_excess() {
    let mut fp = rig(RoutingMode::Dst);
    // 1 frame per second after a burst of 5: a test run of 20 frames
    // takes well under a second, so 5 pass and 15 are dropped.
    rate_limit(&mut fp, 1, 5);
    let f = frame(SRC, DST, 64);
    let mut acts = Vec::new();
    for _ in 0..20 {
        acts.push(fp.test_run(&f).expect("test run").0);
    }
    let fwd = acts.iter().filter(|a| **a == Action::Redirect).count();
    let dropped = acts.iter().filter(|a| **a == Action::Drop).count();
    assert_eq!((fwd, dropped), (5, 15), "{acts:?}");
    let c = fp.counters(VR).expect("counters");
    assert_eq!((c.rx, c.fwd, c.drop_rate_limit), (20, 5, 15));
    assert!(
        acts[..5].iter().all(|a| *a == Action::Redirect),
        "the burst first"
    );
}

#[test]
fn token_bucket_refills_at_its_rate() {
    let mut fp = rig(RoutingMode::Dst);
    rate_limit(&mut fp, 100, 1);
    let f = frame(SRC, DST, 64);
    assert_eq!(fp.test_run(&f).expect("run").0, Action::Redirect);
    assert_eq!(fp.test_run(&f).expect("run").0, Action::Drop);
    // 100 pps: a token every 10 ms.
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(fp.test_run(&f).expect("run").0, Action::Redirect);
}

#[test]
fn rejects_what_the_maps_cannot_hold() {
    let mut fp = rig(RoutingMode::Dst);
    assert!(matches!(
        fp.set_vr(8, &VrFastConfig::default()),
        Err(FastError::VrRange { vr: 8, max: 8 })
    ));
    assert!(matches!(
        fp.add_route(VR, 0, (DST, 33), NextHop::Connected),
        Err(FastError::PrefixLen { len: 33 })
    ));
    let too_many = (0..100u8).try_for_each(|i| {
        fp.add_route(VR, 1, (Ipv4Addr::new(10, 50, i, 0), 24), NextHop::Connected)
    });
    match too_many {
        Err(e @ FastError::Config { .. }) => {
            assert!(e.to_string().contains("host.fast.max_routes"), "{e}");
        }
        other => panic!("64 routes at most: {other:?}"),
    }
}

#[test]
fn errors_name_the_map_and_the_interface() {
    let mut fp = rig(RoutingMode::Dst);
    // A UDP socket is not an AF_XDP socket: the XSKMAP refuses it.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    match fp.set_xsk(lo(), 0, &udp) {
        Err(
            e @ FastError::Map {
                map: "xsks",
                op: "set",
                ..
            },
        ) => {
            assert!(
                e.to_string().starts_with("fast path: map xsks: set:"),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        fp.set_xsk(lo(), 16, &udp),
        Err(FastError::Config { .. })
    ));
    fp.remove_xsk(lo(), 0).expect("no socket: nothing to do");
    assert!(matches!(
        fp.attach("no-such-if0"),
        Err(FastError::NoSuchInterface { .. })
    ));
    assert!(fp.attached().is_empty());
    assert!(matches!(
        fp.set_select(
            SelectKey {
                vlan: Some(4096),
                ..key()
            },
            entry(VR, Path::Fast),
        ),
        Err(FastError::Config { .. })
    ));
}

#[test]
fn a_probe_reads_the_counters_of_the_loaded_program_by_its_id() {
    let mut fp = rig(RoutingMode::Dst);
    let probe = CounterProbe::of_program(fp.program_id().expect("id")).expect("probe");
    assert_eq!(probe.active(8).expect("active"), Vec::<u32>::new());
    for n in 1..=3 {
        let (act, _) = fp.test_run(&frame(SRC, DST, 64)).expect("test run");
        assert_eq!(act, Action::Redirect);
        let c = probe.counters(VR).expect("counters");
        assert_eq!((c.rx, c.fwd), (n, n));
        assert_eq!(c, fp.counters(VR).expect("counters"));
    }
    assert_eq!(probe.active(8).expect("active"), [VR]);
    // A frame no select entry takes: counted in the program's
    // `unselected`, which the probe reads as the loader does.
    assert_eq!(probe.unselected().expect("unselected"), 0);
    let mut f = frame(SRC, DST, 64);
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x77]);
    assert_eq!(fp.test_run(&f).expect("test run").0, Action::Pass);
    assert_eq!(probe.unselected().expect("unselected"), 1);
    assert_eq!(fp.unselected().expect("unselected"), 1);
    // No such program: refused with the reason.
    let e = CounterProbe::of_program(u32::MAX).unwrap_err();
    assert!(e.to_string().contains("no loaded program"), "{e}");
}
