//! The balancer's tests: each policy's picks, the flow table's moves when
//! instances come and go, and a property test over any sequence of calls.

use super::hash::tests::{A, B, ipv4, udp};
use super::*;
use proptest::prelude::*;
use vrhost_packet::FlowKey;

fn balancer(policy: Policy, slots: u16, active: &[u16]) -> Balancer {
    let mut b = Balancer::new(policy, slots);
    b.set_active(active);
    b
}

/// A hash landing in `bucket` (the inverse of the Fibonacci multiply).
fn hash_of_bucket(bucket: usize) -> u32 {
    const INV: u32 = {
        // Newton's iteration for the inverse of an odd number mod 2^32.
        let mut x: u32 = 0x9E37_79B1;
        let mut i = 0;
        while i < 5 {
            x = x.wrapping_mul(2u32.wrapping_sub(0x9E37_79B1u32.wrapping_mul(x)));
            i += 1;
        }
        x
    };
    ((bucket as u32) << (32 - BUCKET_BITS)).wrapping_mul(INV)
}

/// Which instance each bucket goes to, read through `pick`.
fn owners(b: &mut Balancer) -> Vec<u16> {
    let policy = b.policy();
    b.set_policy(Policy::Flow);
    let o = (0..FLOW_BUCKETS)
        .map(|k| b.pick(hash_of_bucket(k), &[]).unwrap())
        .collect();
    b.set_policy(policy);
    o
}

fn shares(owners: &[u16]) -> [usize; 64] {
    let mut s = [0; 64];
    for &o in owners {
        s[usize::from(o)] += 1;
    }
    s
}

#[test]
fn hash_of_bucket_lands_in_it() {
    for k in 0..FLOW_BUCKETS {
        assert_eq!(bucket(hash_of_bucket(k)), k);
    }
}

#[test]
fn policy_names_parse_and_serialize() {
    for p in Policy::ALL {
        assert_eq!(p.name().parse::<Policy>().unwrap(), p);
        assert_eq!(p.to_string(), p.name());
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Policy>(&json).unwrap(), p);
        assert_eq!(json.trim_matches('"').parse::<Policy>().unwrap(), p);
    }
    assert_eq!("round_robin".parse(), Ok(Policy::RoundRobin));
    assert_eq!("shortest_queue".parse(), Ok(Policy::ShortestQueue));
    assert_eq!(
        serde_json::from_str::<Policy>("\"rr\"").unwrap(),
        Policy::RoundRobin
    );
    assert_eq!(
        serde_json::from_str::<Policy>("\"jsq\"").unwrap(),
        Policy::ShortestQueue
    );
    assert!("hash".parse::<Policy>().is_err());
    assert_eq!(Policy::default(), Policy::Flow);
}

#[test]
fn nothing_active_picks_nothing() {
    for p in Policy::ALL {
        let mut b = Balancer::new(p, 4);
        assert_eq!(b.pick(1, &[0; 4]), None);
        b.set_active(&[9, 4, 70]); // all out of range
        assert!(b.active().is_empty());
        assert_eq!(b.pick(1, &[0; 4]), None);
        b.set_active(&[3, 1, 3, 1]);
        assert_eq!(b.active(), [1, 3]);
        assert!(b.pick(1, &[0; 4]).is_some());
        b.set_active(&[]);
        assert_eq!(b.pick(1, &[0; 4]), None);
    }
}

#[test]
fn flow_keeps_a_hash_on_one_instance() {
    let mut b = balancer(Policy::Flow, 8, &[0, 2, 3, 5, 7]);
    let first: Vec<_> = (0..4096u32)
        .map(|h| b.pick(h.wrapping_mul(2_654_435_761), &[]).unwrap())
        .collect();
    b.set_capacity(3, 1e6); // other state changes do not move flows
    for (h, want) in (0..4096u32).zip(first).rev() {
        assert_eq!(b.pick(h.wrapping_mul(2_654_435_761), &[]), Some(want));
    }
}

#[test]
fn flow_shares_are_balanced() {
    for n in 1..=64u16 {
        // Scattered slots, not just the first n.
        let active: Vec<u16> = (0..n).map(|k| (k * 37) % 64).collect();
        let mut b = balancer(Policy::Flow, 64, &active);
        let s = shares(&owners(&mut b));
        let n = usize::from(n);
        let (lo, hi) = (FLOW_BUCKETS / n, FLOW_BUCKETS.div_ceil(n));
        for (i, &c) in s.iter().enumerate() {
            let want = if active.contains(&(i as u16)) {
                lo..=hi
            } else {
                0..=0
            };
            assert!(want.contains(&c), "n {n}: instance {i} has {c} buckets");
        }
    }
}

#[test]
fn adding_an_instance_moves_only_its_share_to_it() {
    let mut b = Balancer::new(Policy::Flow, 64);
    // Grow in a scrambled order so the new one is not always the last.
    let mut active = Vec::new();
    for k in 0..64u16 {
        let new = (k * 37) % 64;
        let before = if k == 0 { Vec::new() } else { owners(&mut b) };
        active.push(new);
        b.set_active(&active);
        let after = owners(&mut b);
        if k == 0 {
            assert!(after.iter().all(|&o| o == new));
            continue;
        }
        let moved = before.iter().zip(&after).filter(|(x, y)| x != y).count();
        assert_eq!(
            moved,
            FLOW_BUCKETS / active.len(),
            "buckets moved adding {new} to {k}"
        );
        for (x, y) in before.iter().zip(&after) {
            assert!(
                x == y || *y == new,
                "bucket moved from {x} to {y}, not to {new}"
            );
        }
    }
}

#[test]
fn removing_an_instance_moves_only_its_buckets() {
    for n in 2..=64u16 {
        for gone in [0, n / 2, n - 1] {
            let active: Vec<u16> = (0..n).collect();
            let mut b = balancer(Policy::Flow, 64, &active);
            let before = owners(&mut b);
            let rest: Vec<u16> = active.iter().copied().filter(|&i| i != gone).collect();
            b.set_active(&rest);
            let after = owners(&mut b);
            for (x, y) in before.iter().zip(&after) {
                assert!(
                    x == y || *x == gone,
                    "n {n}: bucket moved from {x} to {y}, {gone} went"
                );
                assert_ne!(*y, gone);
            }
        }
    }
}

#[test]
fn flows_come_back_after_all_instances_went() {
    // A history, so the table is not what a fresh fill would give.
    let mut b = balancer(Policy::Flow, 4, &[0, 1, 2, 3]);
    b.set_active(&[0, 1, 3]);
    let before = owners(&mut b);
    b.set_active(&[]);
    assert_eq!(b.pick(7, &[]), None);
    b.set_active(&[3, 0, 1]);
    assert_eq!(owners(&mut b), before);
}

#[test]
fn round_robin_cycles_over_active() {
    let mut b = balancer(Policy::RoundRobin, 8, &[5, 1, 3]);
    let got: Vec<_> = (0..7).map(|_| b.pick(0, &[]).unwrap()).collect();
    assert_eq!(got, [1, 3, 5, 1, 3, 5, 1]);
    b.set_active(&[6]);
    assert_eq!(b.pick(0, &[]), Some(6));
    assert_eq!(b.pick(0, &[]), Some(6));
    b.set_active(&[0, 7]);
    let got: Vec<_> = (0..4).map(|_| b.pick(0, &[]).unwrap()).collect();
    assert_eq!(shares(&got)[0], 2);
    assert_eq!(shares(&got)[7], 2);
}

#[test]
fn shortest_queue_picks_the_minimum() {
    let mut b = balancer(Policy::ShortestQueue, 6, &[0, 2, 3, 5]);
    // Instance 1 is the emptiest but not active; 4 is not active either.
    let backlog = [9, 0, 7, 8, 0, 6];
    for _ in 0..10 {
        assert_eq!(b.pick(0, &backlog), Some(5));
    }
    // Ties rotate.
    let backlog = [3, 0, 3, 9, 0, 3];
    let got: Vec<_> = (0..6).map(|_| b.pick(0, &backlog).unwrap()).collect();
    assert_eq!(shares(&got)[0], 2);
    assert_eq!(shares(&got)[2], 2);
    assert_eq!(shares(&got)[5], 2);
    // A short backlog counts the missing as full.
    assert_eq!(b.pick(0, &[5, 5, 5, 4]), Some(3));
    // Fed one at a time, it evens out.
    let mut backlog = [0u32; 6];
    for _ in 0..400 {
        let i = b.pick(0, &backlog).unwrap();
        backlog[usize::from(i)] += 1;
    }
    assert_eq!(backlog, [100, 0, 100, 100, 0, 100]);
}

#[test]
fn random_covers_active_evenly() {
    let mut b = balancer(Policy::Random, 8, &[1, 2, 4, 6]);
    let got: Vec<_> = (0..80_000).map(|_| b.pick(0, &[]).unwrap()).collect();
    let s = shares(&got);
    for i in [1, 2, 4, 6] {
        assert!((19_000..21_000).contains(&s[i]), "instance {i}: {}", s[i]);
    }
    assert_eq!(s.iter().sum::<usize>(), 80_000);
}

fn weighted_shares(b: &mut Balancer, picks: usize) -> [usize; 64] {
    let got: Vec<_> = (0..picks).map(|_| b.pick(0, &[]).unwrap()).collect();
    shares(&got)
}

#[test]
fn weighted_follows_capacity() {
    let mut b = balancer(Policy::Weighted, 2, &[0, 1]);
    let s = weighted_shares(&mut b, 10_000);
    assert_eq!(
        (s[0], s[1]),
        (5_000, 5_000),
        "equal before any capacity is known"
    );
    b.set_capacity(0, 1.0e6);
    b.set_capacity(1, 3.0e6);
    let s = weighted_shares(&mut b, 10_000);
    assert!((s[0] as f64 / 10_000.0 - 0.25).abs() < 0.01, "{s:?}");
    assert!((s[1] as f64 / 10_000.0 - 0.75).abs() < 0.01, "{s:?}");
    // Interleaved: every 4 picks hold one of instance 0's.
    let got: Vec<_> = (0..64).map(|_| b.pick(0, &[]).unwrap()).collect();
    for w in got.chunks(4) {
        assert_eq!(w.iter().filter(|&&i| i == 0).count(), 1, "{got:?}");
    }
}

#[test]
fn weighted_fills_in_unknown_and_ignores_nonsense() {
    let mut b = balancer(Policy::Weighted, 4, &[0, 1, 2]);
    b.set_capacity(0, 2.0e6);
    b.set_capacity(1, 4.0e6);
    // Instance 2 unknown: the mean (3e6), so 2:4:3 of 9.
    for bad in [f64::NAN, f64::INFINITY, 0.0, -5.0, f64::NEG_INFINITY] {
        b.set_capacity(2, bad);
        b.set_capacity(0, bad);
    }
    b.set_capacity(4, 1.0e9); // no such slot
    let s = weighted_shares(&mut b, 9 * SCHEDULE_LEN);
    for (i, want) in [(0, 2.0 / 9.0), (1, 4.0 / 9.0), (2, 3.0 / 9.0)] {
        let got = s[i] as f64 / (9 * SCHEDULE_LEN) as f64;
        assert!((got - want).abs() < 0.002, "instance {i}: {got} not {want}");
    }
}

#[test]
fn weighted_feeds_every_active_instance() {
    let mut b = balancer(Policy::Weighted, 64, &(0..64).collect::<Vec<_>>());
    b.set_capacity(0, 1.0);
    for i in 1..64 {
        b.set_capacity(i, 1.0e300);
    }
    let s = weighted_shares(&mut b, SCHEDULE_LEN);
    assert_eq!(s[0], 1);
    assert_eq!(s.iter().sum::<usize>(), SCHEDULE_LEN);
    assert!(s[1..].iter().all(|&c| (16..=17).contains(&c)), "{s:?}");
}

#[derive(Debug, Clone)]
enum Op {
    Active(Vec<u16>),
    Capacity(u16, f64),
    Policy(Policy),
    Pick(u32, Vec<u32>),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::collection::vec(0u16..70, 0..70).prop_map(Op::Active),
        (0u16..70, prop_oneof![any::<f64>(), 1.0..1.0e7]).prop_map(|(i, c)| Op::Capacity(i, c)),
        proptest::sample::select(Policy::ALL.to_vec()).prop_map(Op::Policy),
        (any::<u32>(), proptest::collection::vec(0u32..4, 0..70)).prop_map(|(h, b)| Op::Pick(h, b)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn pick_returns_only_active_instances(
        slots in 1u16..=64,
        ops in proptest::collection::vec(arb_op(), 1..60),
    ) {
        let mut b = Balancer::new(Policy::Flow, slots);
        for op in ops {
            match op {
                Op::Active(a) => {
                    b.set_active(&a);
                    let mut want: Vec<u16> = a.into_iter().filter(|&i| i < slots).collect();
                    want.sort_unstable();
                    want.dedup();
                    prop_assert_eq!(b.active(), &want[..]);
                }
                Op::Capacity(i, c) => b.set_capacity(i, c),
                Op::Policy(p) => b.set_policy(p),
                Op::Pick(h, backlog) => {
                    for k in 0..8 {
                        let got = b.pick(h.wrapping_add(k), &backlog);
                        match got {
                            None => prop_assert!(b.active().is_empty()),
                            Some(i) => prop_assert!(b.active().contains(&i), "{} not in {:?}", i, b.active()),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn rehash_moves_buckets_only_from_losers_to_gainers(
        sets in proptest::collection::vec(proptest::collection::vec(0u16..16, 1..16), 1..12),
    ) {
        let mut b = Balancer::new(Policy::Flow, 16);
        let mut before: Option<Vec<u16>> = None;
        for set in sets {
            b.set_active(&set);
            let after = owners(&mut b);
            let n = b.active().len();
            let s = shares(&after);
            for &i in b.active() {
                let c = s[usize::from(i)];
                prop_assert!(c == FLOW_BUCKETS / n || c == FLOW_BUCKETS.div_ceil(n));
            }
            if let Some(before) = before {
                let old = shares(&before);
                for (x, y) in before.iter().zip(&after) {
                    if x != y {
                        prop_assert!(s[usize::from(*x)] < old[usize::from(*x)], "{} gave a bucket but did not shrink", x);
                        prop_assert!(s[usize::from(*y)] > old[usize::from(*y)], "{} took a bucket but did not grow", y);
                    }
                }
            }
            before = Some(after);
        }
    }

}

/// ns per pick and per flow hash; run by hand:
/// `cargo test --release -p vrhost-host balance::tests::pick_cost -- --ignored --nocapture`
#[test]
#[ignore = "timing, by hand in release mode"]
fn pick_cost() {
    use std::hint::black_box;
    use std::time::Instant;
    const N: u32 = 20_000_000;
    for (slots, n) in [(2u16, 2u16), (8, 8), (64, 64), (64, 2)] {
        let active: Vec<u16> = (0..n).collect();
        let mut backlog = vec![0u32; usize::from(slots)];
        for p in Policy::ALL {
            let mut b = balancer(p, slots, &active);
            for i in 0..n {
                b.set_capacity(i, f64::from(i + 1) * 1e5);
            }
            let t = Instant::now();
            let mut acc = 0u32;
            for k in 0..N {
                let h = black_box(k.wrapping_mul(0x2545_F491));
                let i = b.pick(h, black_box(&backlog)).unwrap();
                backlog[usize::from(i)] ^= 1;
                acc = acc.wrapping_add(u32::from(i));
            }
            let ns = t.elapsed().as_secs_f64() * 1e9 / f64::from(N);
            black_box(acc);
            println!(
                "{slots:>2} slots {n:>2} active  {:<8} {ns:5.2} ns/pick",
                p.name()
            );
        }
    }
    let mut b = Balancer::new(Policy::Flow, 64);
    let t = Instant::now();
    for k in 0..1000u16 {
        b.set_active(&(0..64).filter(|&i| i != k % 64).collect::<Vec<_>>());
    }
    println!(
        "set_active (64 slots, one leaves or comes back) {:5.2} us",
        t.elapsed().as_secs_f64() * 1e3
    );
    let t = Instant::now();
    for k in 0..1000u16 {
        b.set_capacity(k % 64, f64::from(k + 1) * 1e3);
    }
    println!(
        "set_capacity (63 active) {:5.2} us",
        t.elapsed().as_secs_f64() * 1e3
    );
    let frames = [udp(1000, 53), ipv4(Some(3), 6, A, B, (443, 9))];
    let t = Instant::now();
    let mut acc = 0u32;
    for k in 0..N {
        acc ^= flow_hash(black_box(&frames[(k & 1) as usize]));
    }
    black_box(acc);
    println!(
        "flow_hash {:5.2} ns/frame",
        t.elapsed().as_secs_f64() * 1e9 / f64::from(N)
    );
    let keys = frames.map(|f| FlowKey::extract(&f).unwrap());
    let t = Instant::now();
    for k in 0..N {
        acc ^= flow_key_hash(black_box(&keys[(k & 1) as usize]));
    }
    black_box(acc);
    println!(
        "flow_key_hash {:5.2} ns/key",
        t.elapsed().as_secs_f64() * 1e9 / f64::from(N)
    );
}
