//! The fast path against `vrhost_fib::PolicyFib`, the user-space router's
//! reference for the three routing modes: the same random routes in both,
//! the same random packets, the same next hop (or none) for each, before
//! and after deletes and re-adds (the fast path's FIB arrays against the
//! user-space trie). Root only, as `tests.rs`.

use std::collections::HashMap as StdHashMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vrhost_fib::PolicyFib;
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;

use super::testkit::load_on_lo;
use super::*;

const VR: u32 = 1;
const HOPS: u32 = 8;
const ROUTER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn gateway(nh: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 250, 0, nh as u8 + 1)
}

fn hop_mac(nh: u32) -> [u8; 6] {
    [2, 0, 0, 0, 0xee, nh as u8]
}

/// An address from a small pool inside 10/8, so random prefixes overlap.
fn addr(rng: &mut SmallRng) -> u32 {
    u32::from(Ipv4Addr::new(
        10,
        rng.random_range(0..3),
        rng.random_range(0..3),
        rng.random_range(1..4),
    ))
}

fn prefix_len(rng: &mut SmallRng) -> u8 {
    [0, 8, 12, 16, 20, 24, 30, 32][rng.random_range(0..8)]
}

fn mask(a: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        a & (u32::MAX << (32 - len))
    }
}

/// Returns (hits, misses) of the reference.
fn run_mode(mode: RoutingMode, seed: u64) -> (u64, u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let lo = ifindex("lo").expect("lo");
    let mut fp = load_on_lo(4, 1024, ROUTER_MAC, VR, mode, Vec::new());
    for nh in 0..HOPS {
        fp.set_neighbour(
            VR,
            gateway(nh),
            Neighbour {
                mac: hop_mac(nh),
                src_mac: ROUTER_MAC,
                ifindex: lo,
            },
        )
        .expect("neighbour");
    }

    let mut reference = PolicyFib::<u32>::new(mode);
    // src-dst: the fast path's table id of each source prefix.
    let mut tables: StdHashMap<(u32, u8), u32> = StdHashMap::new();
    let mut routes = Vec::new();
    for _ in 0..60 {
        let (src, sl, dst, dl) = (
            addr(&mut rng),
            prefix_len(&mut rng),
            addr(&mut rng),
            prefix_len(&mut rng),
        );
        let nh = rng.random_range(0..HOPS);
        reference.insert(src, sl, dst, dl, nh).expect("reference");
        if mode == RoutingMode::SrcDst {
            let next = tables.len() as u32 + 1;
            let t = *tables.entry((mask(src, sl), sl)).or_insert(next);
            fp.set_source_table(VR, (src.into(), sl), t)
                .expect("source table");
        }
        add_route(&mut fp, &tables, mode, (src, sl, dst, dl), nh);
        routes.push((src, sl, dst, dl));
    }
    // Remove a third of them from both.
    for &r in routes.iter().step_by(3) {
        remove_from_both(&mut fp, &mut reference, &tables, mode, r);
    }

    let (mut hits, mut misses) = compare(&mut fp, &reference, &mut rng, mode);
    // Half of those removed back, with new next hops, and as many
    // removed again: a delete exposes the covering prefix, a re-add
    // shadows it again.
    for (i, &(src, sl, dst, dl)) in routes.iter().step_by(3).enumerate() {
        if i % 2 == 1 {
            continue;
        }
        let nh = rng.random_range(0..HOPS);
        reference.insert(src, sl, dst, dl, nh).expect("reference");
        add_route(&mut fp, &tables, mode, (src, sl, dst, dl), nh);
    }
    for &r in routes.iter().skip(1).step_by(5) {
        remove_from_both(&mut fp, &mut reference, &tables, mode, r);
    }
    let (h, m) = compare(&mut fp, &reference, &mut rng, mode);
    hits += h;
    misses += m;
    let c = fp.counters(VR).expect("counters");
    assert_eq!((c.fwd, c.to_slow_no_route), (hits, misses), "{mode:?}");
    (hits, misses)
}

/// Route `(src, sl, dst, dl)` -> `nh` in the fast path (src-dst: in
/// the table of its source prefix, set before).
fn add_route(
    fp: &mut FastPath,
    tables: &StdHashMap<(u32, u8), u32>,
    mode: RoutingMode,
    (src, sl, dst, dl): (u32, u8, u32, u8),
    nh: u32,
) {
    let hop = NextHop::Gateway(gateway(nh));
    match mode {
        RoutingMode::Dst => fp.add_route(VR, 0, (dst.into(), dl), hop),
        RoutingMode::Src => fp.add_route(VR, 0, (src.into(), sl), hop),
        RoutingMode::SrcDst => {
            let t = tables[&(mask(src, sl), sl)];
            fp.add_route(VR, t, (dst.into(), dl), hop)
        }
    }
    .expect("route");
}

/// Remove route `(src, sl, dst, dl)` from both; both had it or neither.
fn remove_from_both(
    fp: &mut FastPath,
    reference: &mut PolicyFib<u32>,
    tables: &StdHashMap<(u32, u8), u32>,
    mode: RoutingMode,
    (src, sl, dst, dl): (u32, u8, u32, u8),
) {
    let had = reference.remove(src, sl, dst, dl).is_some();
    let removed = match mode {
        RoutingMode::Dst => fp.remove_route(VR, 0, (dst.into(), dl)),
        RoutingMode::Src => fp.remove_route(VR, 0, (src.into(), sl)),
        RoutingMode::SrcDst => {
            let t = tables[&(mask(src, sl), sl)];
            fp.remove_route(VR, t, (dst.into(), dl))
        }
    }
    .expect("remove");
    assert_eq!(removed, had, "{mode:?}: remove {src:x}/{sl} {dst:x}/{dl}");
}

/// 300 random packets through both: the same next hop, or none. Returns
/// (hits, misses) of the reference.
fn compare(
    fp: &mut FastPath,
    reference: &PolicyFib<u32>,
    rng: &mut SmallRng,
    mode: RoutingMode,
) -> (u64, u64) {
    let mut frame = vec![0u8; 64];
    let (mut hits, mut misses) = (0, 0);
    for _ in 0..300 {
        let (src, dst) = (addr(rng), addr(rng));
        UdpFrameSpec {
            dst_mac: MacAddr(ROUTER_MAC),
            src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
            src_ip: src.into(),
            dst_ip: dst.into(),
            sport: 1,
            dport: 2,
            ttl: 64,
            frame_bytes: 64,
        }
        .write(&mut frame)
        .expect("frame");
        let (act, out) = fp.test_run(&frame).expect("test run");
        let what = format!("{mode:?} {}", describe(src, dst));
        match reference.lookup(src, dst) {
            Some(nh) => {
                hits += 1;
                assert_eq!(act, Action::Redirect, "{what}");
                assert_eq!(&out[0..6], &hop_mac(nh), "{what}: next hop {nh}");
            }
            None => {
                misses += 1;
                assert_eq!(act, Action::Pass, "{what}: no route -> slow");
            }
        }
    }
    (hits, misses)
}

/// The seeds below exercise both outcomes well (a seed whose routes keep
/// a 0/0 finds a route for nearly every packet).
fn check(mode: RoutingMode, seed: u64) {
    let (hits, misses) = run_mode(mode, seed);
    assert!(
        hits > 20 && misses > 20,
        "{mode:?}: {hits} hits, {misses} misses"
    );
}

#[test]
fn agrees_on_more_seeds() {
    for seed in 10..20 {
        for mode in [RoutingMode::Dst, RoutingMode::Src, RoutingMode::SrcDst] {
            run_mode(mode, seed);
        }
    }
}

fn describe(src: u32, dst: u32) -> String {
    format!("{} -> {}", Ipv4Addr::from(src), Ipv4Addr::from(dst))
}

#[test]
fn dst_mode_agrees_with_policy_fib() {
    check(RoutingMode::Dst, 1);
}

#[test]
fn src_mode_agrees_with_policy_fib() {
    check(RoutingMode::Src, 2);
}

#[test]
fn src_dst_mode_agrees_with_policy_fib() {
    check(RoutingMode::SrcDst, 3);
}
