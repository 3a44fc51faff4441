//! Property tests: the FIB against the naive reference (longest match by linear scan), over
//! random tables with /0, host routes, nested and overlapping prefixes, replaces, and
//! deletes that uncover shorter prefixes.

use proptest::prelude::*;
use vrhost_fib::reference::NaiveLpm;
use vrhost_fib::{Fib, Key, Lpm};

#[derive(Debug, Clone)]
enum Op<K> {
    Insert(K, u8, u32),
    Remove(K, u8),
    /// Insert every sub-prefix `stride` bits longer than `K/len` with one next hop: fills a
    /// whole group with equal leaves of sibling prefixes.
    Fill(K, u8, u32),
}

/// Addresses clustered around a few bases, so prefixes nest and overlap.
fn addr_v4() -> impl Strategy<Value = u32> {
    prop_oneof![
        any::<u32>(),
        (0..4u32, any::<u32>())
            .prop_map(|(b, x)| (b.wrapping_mul(0x0a01_0000)) ^ (x & 0x0000_ffff)),
        (0..4u32, any::<u32>())
            .prop_map(|(b, x)| (b.wrapping_mul(0x0a01_0100)) ^ (x & 0x0000_00ff)),
    ]
}

fn len_for(bits: u8) -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(0u8),
        Just(bits),
        0..=bits,
        (bits.saturating_sub(16))..=bits
    ]
}

fn ops_v4() -> impl Strategy<Value = Vec<Op<u32>>> {
    prop::collection::vec(
        prop_oneof![
            3 => (addr_v4(), len_for(32), 0..8u32).prop_map(|(a, l, n)| Op::Insert(a, l, n)),
            1 => (addr_v4(), len_for(32)).prop_map(|(a, l)| Op::Remove(a, l)),
            // Groups start at /16 and /24.
            1 => (addr_v4(), prop_oneof![Just(16u8), Just(24u8)], 0..2u32).prop_map(|(a, l, n)| Op::Fill(a, l, n)),
        ],
        1..60,
    )
}

fn addr_v6() -> impl Strategy<Value = u128> {
    prop_oneof![
        any::<u128>(),
        (0..4u128, any::<u128>())
            .prop_map(|(b, x)| (b << 112 | 0x2001_0db8 << 80) ^ (x & ((1 << 80) - 1))),
        (0..4u128, any::<u64>())
            .prop_map(|(b, x)| (b << 112 | 0x2001_0db8 << 80) ^ u128::from(x & 0xffff)),
    ]
}

fn ops_v6() -> impl Strategy<Value = Vec<Op<u128>>> {
    prop::collection::vec(
        prop_oneof![
            3 => (addr_v6(), len_for(128), 0..8u32).prop_map(|(a, l, n)| Op::Insert(a, l, n)),
            1 => (addr_v6(), len_for(128)).prop_map(|(a, l)| Op::Remove(a, l)),
            1 => (addr_v6(), (4..=28u8).prop_map(|k| k * 4), 0..2u32).prop_map(|(a, l, n)| Op::Fill(a, l, n)),
        ],
        1..60,
    )
}

/// The next prefix of length `len` (>= 1) after `p`, wrapping.
fn next_sibling<K: Key>(p: K, len: u8) -> K {
    K::from_u128(
        p.to_u128()
            .wrapping_add(1u128 << (u32::from(K::BITS) - u32::from(len))),
    )
}

/// Where the answer for `a/len` changes: the prefix's first and last addresses and the one
/// after the last (wrapping to 0 past the top of the space).
fn edges<K: Key>(a: K, len: u8) -> [K; 3] {
    let first = a.mask(len).to_u128();
    // The prefix's host bits, all ones, in a K::BITS-wide space (none for a full-length one).
    let host_bits = u128::MAX
        .checked_shr(128 - u32::from(K::BITS) + u32::from(len))
        .unwrap_or(0);
    let last = first | host_bits;
    [first, last, last.wrapping_add(1)].map(K::from_u128)
}

/// Apply `ops` to both and compare every answer, then lookups at prefix edges and random
/// addresses, single and batched.
fn check<K: Key>(ops: &[Op<K>], probes: &[K]) {
    let mut fib = Fib::<K>::new();
    let mut naive = NaiveLpm::<K>::new();
    let mut points = probes.to_vec();
    for op in ops {
        match *op {
            Op::Insert(a, l, n) => {
                assert_eq!(
                    Lpm::insert(&mut fib, a, l, n),
                    naive.insert(a, l, n),
                    "insert {a:?}/{l}"
                );
                points.extend(edges(a, l));
            }
            Op::Remove(a, l) => assert_eq!(
                Lpm::remove(&mut fib, a, l),
                naive.remove(a, l),
                "remove {a:?}/{l}"
            ),
            Op::Fill(a, l, n) => {
                let stride = if K::BITS == 32 { 8 } else { 4 };
                let sl = l + stride;
                let mut sub = a.mask(l);
                for i in 0..1u32 << stride {
                    assert_eq!(
                        Lpm::insert(&mut fib, sub, sl, n),
                        naive.insert(sub, sl, n),
                        "fill {sub:?}/{sl}"
                    );
                    if i % (1 << (stride - 2)) == 0 {
                        points.extend(edges(sub, sl));
                    }
                    sub = next_sibling(sub, sl);
                }
            }
        }
        assert_eq!(fib.len(), naive.len());
    }
    let mut out = vec![None; points.len()];
    fib.lookup_batch(&points, &mut out);
    for (p, o) in points.iter().zip(&out) {
        let want = naive.lookup(*p);
        assert_eq!(fib.lookup(*p), want, "lookup {p:?}");
        assert_eq!(*o, want, "batch lookup {p:?}");
    }
    // Deleting everything must leave an empty table that answers None.
    let routes: Vec<_> = fib.iter().collect();
    for (p, l, _) in routes {
        fib.remove(p, l);
    }
    assert!(fib.is_empty());
    assert!(points.iter().all(|&p| fib.lookup(p).is_none()));
    assert_eq!(fib.groups_used(), 0, "groups not released");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn ipv4_matches_reference(ops in ops_v4(), probes in prop::collection::vec(addr_v4(), 64)) {
        check(&ops, &probes);
    }

    #[test]
    fn ipv6_matches_reference(ops in ops_v6(), probes in prop::collection::vec(addr_v6(), 64)) {
        check(&ops, &probes);
    }
}

#[test]
fn edges_at_both_ends_of_the_space() {
    assert_eq!(
        edges(0x0a00_0001u32, 8),
        [0x0a00_0000, 0x0aff_ffff, 0x0b00_0000]
    );
    assert_eq!(
        edges(0x0a00_0001u32, 32),
        [0x0a00_0001, 0x0a00_0001, 0x0a00_0002]
    );
    assert_eq!(edges(0x0a00_0001u32, 0), [0, u32::MAX, 0]);
    assert_eq!(edges(u32::MAX, 32), [u32::MAX, u32::MAX, 0]);
    assert_eq!(edges(u128::MAX, 0), [0, u128::MAX, 0]);
    assert_eq!(edges(u128::MAX, 128), [u128::MAX, u128::MAX, 0]);
    assert_eq!(
        edges(0x2001_0db8_u128 << 96 | 1, 32),
        [
            0x2001_0db8 << 96,
            (0x2001_0db8 << 96) | (u128::MAX >> 32),
            0x2001_0db9 << 96
        ]
    );
}

#[test]
fn default_route_and_host_route() {
    let mut f = Fib::<u32>::new();
    assert_eq!(f.insert(0, 0, 1), Ok(None));
    assert_eq!(f.insert(0x0a00_0001, 32, 2), Ok(None));
    assert_eq!(f.insert(0x0a00_0000, 8, 3), Ok(None));
    assert_eq!(
        f.insert(0x0aff_ffff, 8, 4),
        Ok(Some(3)),
        "host bits masked, replaced"
    );
    assert_eq!(f.lookup(0x0a00_0001), Some(2));
    assert_eq!(f.lookup(0x0a00_0002), Some(4));
    assert_eq!(f.lookup(0x0b00_0000), Some(1));
    assert_eq!(f.remove(0x0a00_0000, 8), Some(4));
    assert_eq!(f.lookup(0x0a00_0002), Some(1), "delete uncovers /0");
    assert_eq!(f.remove(0x0a00_0000, 8), None);
    assert!(f.insert(0, 33, 1).is_err());
    assert!(f.insert(0, 8, vrhost_fib::MAX_NEXT_HOP + 1).is_err());
    assert_eq!(f.len(), 2);
}

#[test]
fn pool_growth_and_compaction() {
    // Many /32s in distinct /24s force many groups, growth, deletes and compaction.
    let mut f = Fib::<u32>::new();
    for round in 0..3u32 {
        for i in 0..3000u32 {
            f.insert((i << 8) | 7, 32, (i + round) % 100).unwrap();
        }
        for i in 0..3000u32 {
            assert_eq!(f.lookup((i << 8) | 7), Some((i + round) % 100));
            assert_eq!(f.lookup((i << 8) | 8), None);
        }
        for i in 0..3000u32 {
            assert!(f.remove((i << 8) | 7, 32).is_some());
        }
        assert_eq!(f.groups_used(), 0);
    }
}

/// (source, source length, destination, destination length, next hop).
type PolicyRoute = (u32, u8, u32, u8, u32);

/// Naive reference for the routing modes: linear scans.
fn policy_reference(
    mode: vrhost_fib::RoutingMode,
    routes: &[PolicyRoute],
    src: u32,
    dst: u32,
) -> Option<u32> {
    use vrhost_fib::RoutingMode::*;
    // Later inserts of the same key replace earlier ones.
    let live = |key: &dyn Fn(&PolicyRoute) -> (u32, u8, u32, u8)| {
        let mut m: Vec<PolicyRoute> = Vec::new();
        for r in routes {
            let k = key(r);
            m.retain(|x| key(x) != k);
            m.push((k.0, k.1, k.2, k.3, r.4));
        }
        m
    };
    let best = |cands: Vec<PolicyRoute>, a: u32, pick: fn(&PolicyRoute) -> (u32, u8)| {
        cands
            .into_iter()
            .filter(|r| a.mask(pick(r).1) == pick(r).0)
            .max_by_key(|r| pick(r).1)
    };
    match mode {
        Dst => best(live(&|r| (0, 0, r.2.mask(r.3), r.3)), dst, |r| (r.2, r.3)).map(|r| r.4),
        Src => best(live(&|r| (r.0.mask(r.1), r.1, 0, 0)), src, |r| (r.0, r.1)).map(|r| r.4),
        SrcDst => {
            let all = live(&|r| (r.0.mask(r.1), r.1, r.2.mask(r.3), r.3));
            let s = best(all.clone(), src, |r| (r.0, r.1))?;
            let same: Vec<_> = all
                .into_iter()
                .filter(|r| (r.0, r.1) == (s.0, s.1))
                .collect();
            best(same, dst, |r| (r.2, r.3)).map(|r| r.4)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn routing_modes_match_reference(
        routes in prop::collection::vec((addr_v4(), len_for(32), addr_v4(), len_for(32), 0..8u32), 1..24),
        probes in prop::collection::vec((addr_v4(), addr_v4()), 64),
    ) {
        use vrhost_fib::{PolicyFib, RoutingMode};
        for mode in [RoutingMode::Dst, RoutingMode::Src, RoutingMode::SrcDst] {
            let mut f = PolicyFib::<u32>::new(mode);
            for &(s, sl, d, dl, n) in &routes {
                f.insert(s, sl, d, dl, n).unwrap();
            }
            let mut pts = probes.clone();
            pts.extend(routes.iter().map(|r| (r.0, r.2)));
            let (srcs, dsts): (Vec<u32>, Vec<u32>) = pts.iter().copied().unzip();
            let mut out = vec![None; pts.len()];
            f.lookup_batch(&srcs, &dsts, &mut out);
            for (i, &(s, d)) in pts.iter().enumerate() {
                let want = policy_reference(mode, &routes, s, d);
                prop_assert_eq!(f.lookup(s, d), want, "{:?} {:#x} -> {:#x}", mode, s, d);
                prop_assert_eq!(out[i], want);
            }
        }
    }
}

#[test]
fn uniform_group_of_sibling_prefixes_is_not_collapsed() {
    // 256 sibling /24s with one next hop fill a /16's group uniformly; a delete in it must
    // not fold them into one /16-wide leaf, or later deletes of single /24s would be lost.
    let mut f = Fib::<u32>::new();
    for i in 0..256u32 {
        f.insert(0x0a01_0000 | (i << 8), 24, 7).unwrap();
    }
    f.insert(0x0a01_0500, 25, 9).unwrap();
    f.remove(0x0a01_0500, 25);
    assert_eq!(f.remove(0x0a01_0300, 24), Some(7));
    assert_eq!(f.lookup(0x0a01_0301), None);
    assert_eq!(f.lookup(0x0a01_0401), Some(7));
    // The same in IPv6 (16-entry groups): 16 sibling /24s under one /20.
    let mut f = Fib::<u128>::new();
    let base = 0x2001_0d00u128 << 96;
    for i in 0..16u128 {
        f.insert(base | (i << 104), 24, 3).unwrap();
    }
    f.insert(base | (2 << 104), 28, 4).unwrap();
    f.remove(base | (2 << 104), 28);
    assert_eq!(f.remove(base | (5 << 104), 24), Some(3));
    assert_eq!(f.lookup(base | (5 << 104) | 1), None);
    assert_eq!(f.lookup(base | (6 << 104) | 1), Some(3));
}
