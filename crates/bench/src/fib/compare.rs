//! The FIB compared with other Rust LPM crates on the same table and lookups.

use super::*;

/// Build with `build`, time single lookups with `look`, and updates with `update`.
#[expect(
    clippy::too_many_arguments,
    reason = "one generic driver for every compared crate"
)]
pub(super) fn compare_one<K: Key, T: 'static>(
    keep: &mut Vec<Box<dyn std::any::Any>>,
    name: &str,
    family: &str,
    opts: &BenchOptions,
    routes: &[KeyRoute<K>],
    addrs: &[K],
    ops: &[u32],
    build: impl Fn(&[KeyRoute<K>]) -> T,
    look: impl Fn(&T, K) -> Option<NextHopId>,
    update: Option<UpdateFn<'_, T, K>>,
) -> Vec<BenchResult> {
    let (probe, method): (fn() -> usize, &str) = match opts.heap_bytes {
        Some(f) => (f, "heap"),
        None => (rss_bytes, "rss"),
    };
    let mem0 = probe();
    let t = Instant::now();
    let mut s = build(routes);
    let build_t = t.elapsed();
    let mem = probe().saturating_sub(mem0);
    let (d, sum) = best(opts.passes, || {
        addrs.iter().map(|&a| sum_opt(look(&s, a))).sum()
    });
    let mut r = lookup_row(name, family, routes.len(), "single", addrs.len(), d, sum);
    r.build_ms = Some(build_t.as_secs_f64() * 1e3);
    r.mem_bytes = Some(mem);
    r.mem_method = Some(method.into());
    let mut rows = vec![r];
    if let Some(up) = update {
        let t = Instant::now();
        for &i in ops {
            up(&mut s, &routes[i as usize]);
        }
        rows.push(BenchResult {
            impl_name: name.into(),
            family: family.into(),
            prefixes: routes.len(),
            mode: "update".into(),
            updates_per_s: Some(ops.len() as f64 * 2.0 / t.elapsed().as_secs_f64()),
            ..Default::default()
        });
    }
    // Kept until the end of the run, so that later builds' RSS growth is their own.
    keep.push(Box::new(s));
    rows
}

pub(super) fn compare_v4(
    keep: &mut Vec<Box<dyn std::any::Any>>,
    opts: &BenchOptions,
    routes: &[KeyRoute<u32>],
    addrs: &[u32],
    rng: &mut SmallRng,
) -> Vec<BenchResult> {
    let ops = update_stream(routes, opts.updates.min(routes.len() * 2), rng);
    let mut rows = Vec::new();
    type Pt = prefix_trie::PrefixMap<(u32, u8), NextHopId>;
    rows.extend(compare_one::<u32, Pt>(
        keep,
        "prefix-trie",
        "ipv4",
        opts,
        routes,
        addrs,
        &ops,
        |rs| {
            let mut m = Pt::new();
            for &(p, l, n) in rs {
                m.insert((p, l), n);
            }
            m
        },
        |m, a| m.get_lpm(&(a, 32)).map(|(_, &n)| n),
        Some(&|m: &mut Pt, &(p, l, _): &KeyRoute<u32>| {
            if let Some(n) = m.remove(&(p, l)) {
                m.insert((p, l), n ^ 1);
            }
        }),
    ));
    type Int = ip_network_table::IpNetworkTable<NextHopId>;
    let net = |p: u32, l: u8| ip_network::Ipv4Network::new(Ipv4Addr::from(p), l).ok();
    rows.extend(compare_one::<u32, Int>(
        keep,
        "ip_network_table",
        "ipv4",
        opts,
        routes,
        addrs,
        &ops,
        |rs| {
            let mut m = Int::new();
            for &(p, l, n) in rs {
                if let Some(k) = net(p, l) {
                    m.insert(k, n);
                }
            }
            m
        },
        |m, a| m.longest_match_ipv4(Ipv4Addr::from(a)).map(|(_, &n)| n),
        Some(&|m: &mut Int, &(p, l, _): &KeyRoute<u32>| {
            if let Some(k) = net(p, l)
                && let Some(n) = m.remove(k)
            {
                m.insert(k, n ^ 1);
            }
        }),
    ));
    type Lc = iptrie::map::LCTrieMap<iptrie::Ipv4Prefix, Option<NextHopId>>;
    rows.extend(compare_one::<u32, Lc>(
        keep,
        "iptrie",
        "ipv4",
        opts,
        routes,
        addrs,
        &ops,
        |rs| {
            let mut m =
                iptrie::map::RTrieMap::<iptrie::Ipv4Prefix, Option<NextHopId>>::with_root(None);
            for &(p, l, n) in rs {
                if let Ok(k) = iptrie::Ipv4Prefix::new(Ipv4Addr::from(p), l) {
                    m.insert(k, Some(n));
                }
            }
            m.compress()
        },
        |m, a| *m.lookup(&Ipv4Addr::from(a)).1,
        None,
    ));
    rows
}

pub(super) fn compare_v6(
    keep: &mut Vec<Box<dyn std::any::Any>>,
    opts: &BenchOptions,
    routes: &[KeyRoute<u128>],
    addrs: &[u128],
    rng: &mut SmallRng,
) -> Vec<BenchResult> {
    let ops = update_stream(routes, opts.updates.min(routes.len() * 2), rng);
    let mut rows = Vec::new();
    type Pt = prefix_trie::PrefixMap<(u128, u8), NextHopId>;
    rows.extend(compare_one::<u128, Pt>(
        keep,
        "prefix-trie",
        "ipv6",
        opts,
        routes,
        addrs,
        &ops,
        |rs| {
            let mut m = Pt::new();
            for &(p, l, n) in rs {
                m.insert((p, l), n);
            }
            m
        },
        |m, a| m.get_lpm(&(a, 128)).map(|(_, &n)| n),
        None,
    ));
    type Int = ip_network_table::IpNetworkTable<NextHopId>;
    let net = |p: u128, l: u8| ip_network::Ipv6Network::new(Ipv6Addr::from(p), l).ok();
    rows.extend(compare_one::<u128, Int>(
        keep,
        "ip_network_table",
        "ipv6",
        opts,
        routes,
        addrs,
        &ops,
        |rs| {
            let mut m = Int::new();
            for &(p, l, n) in rs {
                if let Some(k) = net(p, l) {
                    m.insert(k, n);
                }
            }
            m
        },
        |m, a| m.longest_match_ipv6(Ipv6Addr::from(a)).map(|(_, &n)| n),
        None,
    ));
    rows
}
