//! The FIB compared with other Rust LPM crates on the same table and lookups.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use rand::rngs::SmallRng;
use vrhost_fib::{Key, NextHopId};

use super::{
    BenchOptions, BenchResult, KeyRoute, UpdateFn, best, lookup_row, rss_bytes, sum_opt,
    update_stream,
};

/// What every compared crate of one address family is given: the table,
/// the lookups and the updates, and where its structure is kept.
struct Comparison<'a, K> {
    /// Structures built, kept until the comparison ends so that later
    /// builds' RSS growth is their own.
    keep: Vec<Box<dyn std::any::Any>>,
    family: &'a str,
    opts: &'a BenchOptions,
    routes: &'a [KeyRoute<K>],
    addrs: &'a [K],
    /// Indexes into `routes`, each route changed twice.
    ops: Vec<u32>,
    rows: Vec<BenchResult>,
}

impl<'a, K: Key> Comparison<'a, K> {
    /// The comparison of one family's `routes` and lookups `addrs`, with an
    /// update stream drawn from `rng`.
    fn new(
        family: &'a str,
        opts: &'a BenchOptions,
        routes: &'a [KeyRoute<K>],
        addrs: &'a [K],
        rng: &mut SmallRng,
    ) -> Self {
        Comparison {
            keep: Vec::new(),
            family,
            opts,
            routes,
            addrs,
            ops: update_stream(routes, opts.updates.min(routes.len() * 2), rng),
            rows: Vec::new(),
        }
    }

    /// Build crate `name`'s structure with `build`, time single lookups
    /// with `look`, and updates with `update`.
    fn run<T: 'static>(
        &mut self,
        name: &str,
        build: impl Fn(&[KeyRoute<K>]) -> T,
        look: impl Fn(&T, K) -> Option<NextHopId>,
        update: Option<UpdateFn<'_, T, K>>,
    ) {
        let (opts, routes, addrs) = (self.opts, self.routes, self.addrs);
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
        let mut r = lookup_row(
            name,
            self.family,
            routes.len(),
            "single",
            addrs.len(),
            d,
            sum,
        );
        r.build_ms = Some(build_t.as_secs_f64() * 1e3);
        r.mem_bytes = Some(mem);
        r.mem_method = Some(method.into());
        self.rows.push(r);
        if let Some(up) = update {
            let t = Instant::now();
            for &i in &self.ops {
                up(&mut s, &routes[i as usize]);
            }
            self.rows.push(BenchResult {
                impl_name: name.into(),
                family: self.family.into(),
                prefixes: routes.len(),
                mode: "update".into(),
                updates_per_s: Some(self.ops.len() as f64 * 2.0 / t.elapsed().as_secs_f64()),
                ..Default::default()
            });
        }
        self.keep.push(Box::new(s));
    }
}

/// prefix-trie's map of the routes, keyed by (prefix, length).
fn prefix_trie_map<K: Key>(rs: &[KeyRoute<K>]) -> prefix_trie::PrefixMap<(K, u8), NextHopId>
where
    (K, u8): prefix_trie::Prefix,
{
    let mut m = prefix_trie::PrefixMap::new();
    for &(p, l, n) in rs {
        m.insert((p, l), n);
    }
    m
}

/// ip_network_table's table of the routes that `net` makes a network of.
fn network_table<K: Key, N: Into<ip_network::IpNetwork>>(
    rs: &[KeyRoute<K>],
    net: impl Fn(K, u8) -> Option<N>,
) -> ip_network_table::IpNetworkTable<NextHopId> {
    let mut m = ip_network_table::IpNetworkTable::new();
    for &(p, l, n) in rs {
        if let Some(k) = net(p, l) {
            m.insert(k, n);
        }
    }
    m
}

pub(super) fn compare_v4(
    opts: &BenchOptions,
    routes: &[KeyRoute<u32>],
    addrs: &[u32],
    rng: &mut SmallRng,
) -> Vec<BenchResult> {
    let mut c = Comparison::new("ipv4", opts, routes, addrs, rng);
    type Pt = prefix_trie::PrefixMap<(u32, u8), NextHopId>;
    c.run::<Pt>(
        "prefix-trie",
        prefix_trie_map,
        |m, a| m.get_lpm(&(a, 32)).map(|(_, &n)| n),
        Some(&|m: &mut Pt, &(p, l, _): &KeyRoute<u32>| {
            if let Some(n) = m.remove(&(p, l)) {
                m.insert((p, l), n ^ 1);
            }
        }),
    );
    type Int = ip_network_table::IpNetworkTable<NextHopId>;
    let net = |p: u32, l: u8| ip_network::Ipv4Network::new(Ipv4Addr::from(p), l).ok();
    c.run::<Int>(
        "ip_network_table",
        |rs| network_table(rs, net),
        |m, a| m.longest_match_ipv4(Ipv4Addr::from(a)).map(|(_, &n)| n),
        Some(&|m: &mut Int, &(p, l, _): &KeyRoute<u32>| {
            if let Some(k) = net(p, l)
                && let Some(n) = m.remove(k)
            {
                m.insert(k, n ^ 1);
            }
        }),
    );
    type Lc = iptrie::map::LCTrieMap<iptrie::Ipv4Prefix, Option<NextHopId>>;
    c.run::<Lc>(
        "iptrie",
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
    );
    c.rows
}

pub(super) fn compare_v6(
    opts: &BenchOptions,
    routes: &[KeyRoute<u128>],
    addrs: &[u128],
    rng: &mut SmallRng,
) -> Vec<BenchResult> {
    let mut c = Comparison::new("ipv6", opts, routes, addrs, rng);
    type Pt = prefix_trie::PrefixMap<(u128, u8), NextHopId>;
    c.run::<Pt>(
        "prefix-trie",
        prefix_trie_map,
        |m, a| m.get_lpm(&(a, 128)).map(|(_, &n)| n),
        None,
    );
    type Int = ip_network_table::IpNetworkTable<NextHopId>;
    let net = |p: u128, l: u8| ip_network::Ipv6Network::new(Ipv6Addr::from(p), l).ok();
    c.run::<Int>(
        "ip_network_table",
        |rs| network_table(rs, net),
        |m, a| m.longest_match_ipv6(Ipv6Addr::from(a)).map(|(_, &n)| n),
        None,
    );
    c.rows
}
