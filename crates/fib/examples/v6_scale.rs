//! Scale check for IPv6: the RouteViews IPv6 prefixes (cut dump) replicated under 73
//! different /16s, ~500K prefixes. `cargo run --release -p vrhost-fib --example v6_scale`.
mod scale;

use std::time::Instant;

use rand::{Rng, SeedableRng, rngs::SmallRng};
use vrhost_fib::Ipv6Fib;
use vrhost_fib::import::{ImportOptions, read_routes};

fn main() {
    let p = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "../shared/data/mrt/rib6.20151101.0600_firstMB.bz2".into());
    let set = read_routes(
        p.as_ref(),
        &ImportOptions {
            keep_partial: true,
            ..Default::default()
        },
    )
    .expect("import");
    let base: Vec<_> = set.ipv6().map(|r| (r.prefix, r.len)).collect();
    let mut fib = Ipv6Fib::new();
    let t = Instant::now();
    let mut n = 0u32;
    for k in 0..73u128 {
        for &(p, l) in &base {
            let q = if l >= 16 { p ^ (k << 113) } else { p };
            fib.insert(q, l, n % 64).unwrap();
            n += 1;
        }
    }
    let build = t.elapsed();
    let mut rng = SmallRng::seed_from_u64(3);
    // Addresses near real prefixes, so lookups walk deep.
    let addrs: Vec<u128> = (0..1 << 21)
        .map(|_| {
            let (p, l) = base[rng.random_range(0..base.len())];
            let k = rng.random_range(0..73u128);
            (if l >= 16 { p ^ (k << 113) } else { p }) | (rng.random::<u128>() >> l.max(1))
        })
        .collect();
    scale::lookups_and_report(&fib, build, &addrs, |out| {
        format!(", {} matched", out.iter().filter(|o| o.is_some()).count())
    });
}
