//! What the scale examples share: one timed batch of lookups and the report line.

use std::time::{Duration, Instant};

use vrhost_fib::{Fib, Key, NextHopId};

/// Look `addrs` up in one batch, timed, and print the table's size, its build time
/// (`build`), its memory and the time per lookup, then `extra` of the answers on the same
/// line.
pub fn lookups_and_report<K: Key>(
    fib: &Fib<K>,
    build: Duration,
    addrs: &[K],
    extra: impl FnOnce(&[Option<NextHopId>]) -> String,
) {
    let mut out = vec![None; addrs.len()];
    let t = Instant::now();
    fib.lookup_batch(addrs, &mut out);
    let d = t.elapsed();
    println!(
        "{} prefixes, build {:.0} ms, {:.1} MiB ({:.1} MiB lookup arrays, {} groups), batch {:.1} ns/lookup{}",
        fib.len(),
        build.as_secs_f64() * 1e3,
        fib.mem_bytes() as f64 / 1048576.0,
        fib.table_bytes() as f64 / 1048576.0,
        fib.groups_used(),
        d.as_secs_f64() * 1e9 / addrs.len() as f64,
        extra(&out),
    );
}
