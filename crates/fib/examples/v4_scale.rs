//! Scale check for IPv4: the 512K ipasn table plus random prefixes with the same length
//! distribution, up to 2M prefixes. `cargo run --release -p vrhost-fib --example v4_scale`.
mod scale;

use std::time::Instant;

use rand::{Rng, SeedableRng, rngs::SmallRng};
use vrhost_fib::import::{ImportOptions, read_routes};
use vrhost_fib::{Ipv4Fib, Key};

fn main() {
    let p = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "../shared/data/fib/ipasn_20140513.dat.gz".into());
    let set = read_routes(p.as_ref(), &ImportOptions::default()).expect("import");
    let base: Vec<_> = set.ipv4().map(|r| (r.prefix, r.len)).collect();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut fib = Ipv4Fib::new();
    let t = Instant::now();
    for (i, &(p, l)) in base.iter().enumerate() {
        fib.insert(p, l, i as u32 % 64).unwrap();
    }
    while fib.len() < 2_000_000 {
        let l = base[rng.random_range(0..base.len())].1;
        fib.insert(rng.random::<u32>().mask(l), l, rng.random_range(0..64))
            .unwrap();
    }
    let build = t.elapsed();
    let addrs: Vec<u32> = (0..1 << 22).map(|_| rng.random()).collect();
    scale::lookups_and_report(&fib, build, &addrs, |_| String::new());
}
