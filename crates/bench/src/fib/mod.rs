//! `vrhost bench fib`: lookups per second on uniformly random addresses (single and
//! batched), build time, update rate (alone, and while another pinned core looks up) and
//! memory, for vrhost's FIB and existing Rust LPM crates on the same table and the same
//! addresses in the same run.
//!
//! Compared crates (all MIT/Apache/BSD): `prefix-trie` 0.10 (a binary prefix trie, the
//! fastest maintained general-purpose one; keyed by `(u32, u8)`, its cheapest key),
//! `ip_network_table` 0.2 (a tree bitmap, Eatherton et al. 2004, through
//! `ip_network_table-deps-treebitmap`), and `iptrie` 0.11 (`LCTrieMap`, a level-compressed
//! trie, Nilsson & Karlsson 1999; read-only once compressed, so no update figure).
//!
//! Memory of vrhost is [`Fib::mem_bytes`](vrhost_fib::Fib::mem_bytes) (exact for the lookup
//! arrays); the other crates expose no such count, so theirs is the growth of the process's
//! resident set while they are built (approximate, labelled `rss`).

mod cli;

pub use cli::{BenchFibArgs, run_cli, run_cli_with};

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng, rngs::SmallRng};
use serde::Serialize;

use vrhost_fib::import::{ImportError, ImportOptions, read_routes};
use vrhost_fib::{Fib, FibReader, Key, NextHopId};

use crate::report::{Column, heading, mib, opt, row};

mod compare;

use compare::{compare_v4, compare_v6};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Route table, any import format.
    pub table: PathBuf,
    /// Random addresses looked up per pass.
    pub lookups: usize,
    /// Passes per measurement (the best is reported).
    pub passes: usize,
    /// Route changes applied in the update measurements.
    pub updates: usize,
    /// Seed of the address and update streams.
    pub seed: u64,
    /// Pin measuring threads to cores 0 (lookups, writer) and 1 (concurrent reader).
    pub pin: bool,
    /// Skip the other crates.
    pub only_vrhost: bool,
    /// Next hops the routes are spread over (by ASN or index modulo this).
    pub nexthops: u32,
    /// Route changes per second the writer paces itself to in `update-concurrent`
    /// (0: only the unpaced measurement).
    pub update_rate: f64,
    /// Live heap bytes, if the binary counts them (a counting global allocator, as in
    /// `examples/bench_fib.rs`): the other crates' memory is then measured exactly as heap
    /// growth during their build (`mem_method: "heap"`) instead of RSS growth.
    pub heap_bytes: Option<fn() -> usize>,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            table: PathBuf::from("../shared/data/fib/ipasn_20140513.dat.gz"),
            lookups: 1 << 22,
            passes: 3,
            updates: 1_000_000,
            seed: 42,
            pin: true,
            only_vrhost: false,
            nexthops: 64,
            update_rate: 1e6,
            heap_bytes: None,
        }
    }
}

/// One row: one implementation in one mode.
#[derive(Debug, Clone, Serialize, Default)]
pub struct BenchResult {
    /// Implementation: `vrhost` or the crate name.
    #[serde(rename = "impl")]
    pub impl_name: String,
    /// `ipv4` or `ipv6`.
    pub family: String,
    /// Routes in the table.
    pub prefixes: usize,
    /// `single`, `batch`, `update` (one core), `update-concurrent` (paced to the target
    /// rate while another core looks up) or `update-concurrent-max` (unpaced).
    pub mode: String,
    /// Million lookups per second (lookup modes; for `update-concurrent`, the reader's rate).
    pub mlookups_per_s: Option<f64>,
    /// Nanoseconds per lookup.
    pub ns_per_lookup: Option<f64>,
    /// Time to build the structure from the route list.
    pub build_ms: Option<f64>,
    /// Memory of the structure.
    pub mem_bytes: Option<usize>,
    /// How `mem_bytes` was measured: `exact` (the structure's own count), `heap` (heap growth
    /// during the build) or `rss` (resident-set growth; approximate, low when the allocator
    /// reuses freed memory).
    pub mem_method: Option<String>,
    /// Route changes per second (update modes).
    pub updates_per_s: Option<f64>,
    /// Reader slowdown while updates run on another core, percent (`update-concurrent`).
    pub lookup_slowdown_pct: Option<f64>,
    /// Sum of looked-up next hops (all implementations must agree).
    pub checksum: Option<u64>,
}

/// The machine a report was measured on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Online cores.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// Measurement time, UTC, ISO 8601.
    pub date: String,
    /// Whether threads were pinned.
    pub pinned: bool,
}

/// A whole `bench fib` run.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Always `fib`.
    pub bench: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// Table file.
    pub table: String,
    /// Random addresses per pass.
    pub lookups: usize,
    /// One row per implementation and mode.
    pub results: Vec<BenchResult>,
    /// Ratios the issue asks for, and anything odd (e.g. implementations disagreeing).
    pub notes: Vec<String>,
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn machine(pinned: bool) -> Machine {
    // Before pinning: afterwards the affinity mask shows one core.
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))?
                .split(':')
                .nth(1)
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_owned());
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    Machine {
        cpu,
        cores,
        kernel,
        date: utc_now(),
        pinned,
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` from the system clock (civil-from-days, H. Hinnant).
/// Every `vrhost bench` report dates itself with this.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Pin the calling thread to `core` (best effort: returns false if not possible).
pub fn pin_to_core(core: usize) -> bool {
    let mut set = rustix::thread::CpuSet::new();
    set.set(core);
    rustix::thread::sched_setaffinity(None, &set).is_ok()
}

/// Best time of `passes` runs of `f`, which returns a checksum.
fn best<F: FnMut() -> u64>(passes: usize, mut f: F) -> (Duration, u64) {
    let mut best = Duration::MAX;
    let mut sum = 0;
    for _ in 0..passes.max(1) {
        let t = Instant::now();
        sum = black_box(f());
        best = best.min(t.elapsed());
    }
    (best, sum)
}

fn sum_opt(v: Option<NextHopId>) -> u64 {
    v.map_or(0, |n| u64::from(n) + 1)
}

fn lookup_row(
    name: &str,
    family: &str,
    prefixes: usize,
    mode: &str,
    n: usize,
    d: Duration,
    sum: u64,
) -> BenchResult {
    let s = d.as_secs_f64();
    BenchResult {
        impl_name: name.into(),
        family: family.into(),
        prefixes,
        mode: mode.into(),
        mlookups_per_s: Some(n as f64 / s / 1e6),
        ns_per_lookup: Some(s * 1e9 / n as f64),
        checksum: Some(sum),
        ..Default::default()
    }
}

/// A route in key form with its next hop.
type KeyRoute<K> = (K, u8, NextHopId);

/// Flaps one route in a compared structure.
type UpdateFn<'a, T, K> = &'a dyn Fn(&mut T, &KeyRoute<K>);

/// Run the benchmark (see the module docs).
///
/// # Errors
/// The table cannot be imported.
pub fn run(opts: &BenchOptions) -> Result<BenchReport, ImportError> {
    let mut machine = machine(false);
    machine.pinned = opts.pin && pin_to_core(0);
    let set = read_routes(
        &opts.table,
        &ImportOptions {
            keep_partial: true,
            ..Default::default()
        },
    )?;
    let nh = |i: usize, asn: Option<u32>| asn.map_or(i as u32, |a| a) % opts.nexthops.max(1);
    let v4: Vec<KeyRoute<u32>> = set
        .ipv4()
        .enumerate()
        .map(|(i, r)| (r.prefix, r.len, nh(i, r.asn)))
        .collect();
    let v6: Vec<KeyRoute<u128>> = set
        .ipv6()
        .enumerate()
        .map(|(i, r)| (r.prefix, r.len, nh(i, r.asn)))
        .collect();
    let mut report = BenchReport {
        bench: "fib",
        machine,
        table: opts.table.display().to_string(),
        lookups: opts.lookups,
        results: Vec::new(),
        notes: Vec::new(),
    };
    if let Some(t) = &set.stats.truncated {
        report.notes.push(format!(
            "table cut at byte {}: {} records kept",
            t.offset, t.records_kept
        ));
    }
    let mut rng = SmallRng::seed_from_u64(opts.seed);
    if !v4.is_empty() {
        let addrs: Vec<u32> = (0..opts.lookups).map(|_| rng.random()).collect();
        bench_v4(opts, &v4, &addrs, &mut report);
    }
    if !v6.is_empty() {
        // Uniformly random IPv6 addresses almost never match anything: draw each inside a
        // random prefix of the table instead (random host bits), so lookups walk as deep as
        // real traffic's.
        let addrs: Vec<u128> = (0..opts.lookups)
            .map(|_| {
                let (p, l, _) = v6[rng.random_range(0..v6.len())];
                p | rng.random::<u128>().checked_shr(u32::from(l)).unwrap_or(0)
            })
            .collect();
        bench_v6(opts, &v6, &addrs, &mut report);
    }
    Ok(report)
}

/// vrhost's rows for one table: build, single, batch, updates.
fn bench_vrhost<K: Key>(
    opts: &BenchOptions,
    family: &str,
    routes: &[KeyRoute<K>],
    addrs: &[K],
    rng: &mut SmallRng,
) -> (Vec<BenchResult>, Fib<K>) {
    let mut rows = Vec::new();
    let t = Instant::now();
    let mut fib = Fib::<K>::new();
    for &(p, l, n) in routes {
        // The import validated lengths and next hops are < opts.nexthops: cannot fail.
        let _ = fib.insert(p, l, n);
    }
    let build = t.elapsed();
    let (d, sum) = best(opts.passes, || {
        addrs.iter().map(|&a| sum_opt(fib.lookup(a))).sum()
    });
    let mut r = lookup_row("vrhost", family, fib.len(), "single", addrs.len(), d, sum);
    r.build_ms = Some(build.as_secs_f64() * 1e3);
    r.mem_bytes = Some(fib.mem_bytes());
    r.mem_method = Some("exact".into());
    rows.push(r);
    let mut out = vec![None; 1024];
    let (d, sum) = best(opts.passes, || {
        let mut s = 0;
        for c in addrs.chunks(1024) {
            let o = &mut out[..c.len()];
            fib.lookup_batch(c, o);
            s += o.iter().map(|&v| sum_opt(v)).sum::<u64>();
        }
        s
    });
    let mut r = lookup_row("vrhost", family, fib.len(), "batch", addrs.len(), d, sum);
    r.build_ms = Some(build.as_secs_f64() * 1e3);
    r.mem_bytes = Some(fib.mem_bytes());
    r.mem_method = Some("exact".into());
    rows.push(r);
    if !routes.is_empty() && opts.updates > 0 {
        let ops = update_stream(routes, opts.updates, rng);
        let t = Instant::now();
        let changes = apply_updates(&mut fib, routes, &ops);
        let d = t.elapsed();
        rows.push(BenchResult {
            impl_name: "vrhost".into(),
            family: family.into(),
            prefixes: fib.len(),
            mode: "update".into(),
            updates_per_s: Some(changes as f64 / d.as_secs_f64()),
            ..Default::default()
        });
        if opts.update_rate > 0.0 {
            rows.push(concurrent_updates(
                opts,
                family,
                &mut fib,
                routes,
                &ops,
                addrs,
                Some(opts.update_rate),
            ));
        }
        rows.push(concurrent_updates(
            opts, family, &mut fib, routes, &ops, addrs, None,
        ));
    }
    (rows, fib)
}

/// Route flaps: random routes, each withdrawn then announced again with another next hop
/// (two route changes per entry; the table stays full).
fn update_stream<K: Key>(routes: &[KeyRoute<K>], changes: usize, rng: &mut SmallRng) -> Vec<u32> {
    (0..changes.div_ceil(2))
        .map(|_| rng.random_range(0..routes.len() as u32))
        .collect()
}

/// Apply the flaps of `ops`; returns the number of route changes.
fn apply_updates<K: Key>(fib: &mut Fib<K>, routes: &[KeyRoute<K>], ops: &[u32]) -> usize {
    for &i in ops {
        let (p, l, _) = routes[i as usize];
        if let Some(n) = fib.remove(p, l) {
            let _ = fib.insert(p, l, n ^ 1);
        }
    }
    ops.len() * 2
}

/// Reader pinned to core 1 doing batched lookups; first alone, then while this thread
/// (core 0) applies the update stream. Reports updates/s and the reader's slowdown.
/// With `rate`, the writer paces itself to that many changes per second.
fn concurrent_updates<K: Key>(
    opts: &BenchOptions,
    family: &str,
    fib: &mut Fib<K>,
    routes: &[KeyRoute<K>],
    ops: &[u32],
    addrs: &[K],
    rate: Option<f64>,
) -> BenchResult {
    use std::sync::atomic::{AtomicBool, Ordering};
    let reader = fib.reader();
    let stop = AtomicBool::new(false);
    let window = Duration::from_millis(400);
    // The reader's own rate over its whole life (start to stop), pinned to core 1.
    let run_reader = |mut r: FibReader<K>| -> f64 {
        if opts.pin {
            pin_to_core(1);
        }
        let mut out = [None; 64];
        let (mut n, mut sum) = (0u64, 0u64);
        let mut chunks = addrs.chunks(64).cycle();
        let t = Instant::now();
        // Relaxed: a stop flag; no data is handed over through it.
        while !stop.load(Ordering::Relaxed) {
            for c in chunks.by_ref().take(16) {
                r.lookup_batch(c, &mut out[..c.len()]);
                sum += out[..c.len()].iter().map(|&v| sum_opt(v)).sum::<u64>();
                n += c.len() as u64;
            }
        }
        black_box(sum);
        n as f64 / t.elapsed().as_secs_f64()
    };
    // The reader alone before and after (their mean is the baseline, which cancels slow
    // drift from other load on the machine), and while this thread (core 0) updates.
    let alone = || {
        std::thread::scope(|s| {
            stop.store(false, Ordering::Relaxed);
            let h = s.spawn(|| run_reader(reader.clone()));
            std::thread::sleep(window);
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap_or(0.0)
        })
    };
    let base1 = alone();
    let (during, upd) = std::thread::scope(|s| {
        stop.store(false, Ordering::Relaxed);
        let h = s.spawn(|| run_reader(reader.clone()));
        let t = Instant::now();
        let mut applied = 0usize;
        'outer: loop {
            for c in ops.chunks(256) {
                applied += apply_updates(fib, routes, c);
                if t.elapsed() >= window {
                    break 'outer;
                }
                if let Some(r) = rate {
                    let due = Duration::from_secs_f64(applied as f64 / r);
                    while t.elapsed() < due.min(window) {
                        std::hint::spin_loop();
                    }
                }
            }
        }
        let upd = applied as f64 / t.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        (h.join().unwrap_or(0.0), upd)
    });
    let base = (base1 + alone()) / 2.0;
    BenchResult {
        impl_name: "vrhost".into(),
        family: family.into(),
        prefixes: fib.len(),
        mode: if rate.is_some() {
            "update-concurrent"
        } else {
            "update-concurrent-max"
        }
        .into(),
        mlookups_per_s: Some(during / 1e6),
        updates_per_s: Some(upd),
        lookup_slowdown_pct: Some((1.0 - during / base) * 100.0),
        ..Default::default()
    }
}

fn bench_v4(
    opts: &BenchOptions,
    routes: &[KeyRoute<u32>],
    addrs: &[u32],
    report: &mut BenchReport,
) {
    let mut rng = SmallRng::seed_from_u64(opts.seed ^ 4);
    // Structures stay alive to the end, so that each build's RSS growth is its own.
    let (rows, _fib) = bench_vrhost(opts, "ipv4", routes, addrs, &mut rng);
    report.results.extend(rows);
    // The same FIB with 2 routes: the small-table figure for in-memory forwarding.
    let small = [(0u32, 0u8, 1u32), (0x0a00_0000, 8, 2)];
    let (rows, _small) = bench_vrhost(
        &BenchOptions {
            updates: 0,
            ..opts.clone()
        },
        "ipv4",
        &small,
        addrs,
        &mut rng,
    );
    report.results.extend(rows);
    if !opts.only_vrhost {
        let rows = compare_v4(opts, routes, addrs, &mut rng);
        report.results.extend(rows);
    }
    summarize(report, "ipv4", routes.len());
}

fn bench_v6(
    opts: &BenchOptions,
    routes: &[KeyRoute<u128>],
    addrs: &[u128],
    report: &mut BenchReport,
) {
    let mut rng = SmallRng::seed_from_u64(opts.seed ^ 6);
    let (rows, _fib) = bench_vrhost(opts, "ipv6", routes, addrs, &mut rng);
    report.results.extend(rows);
    if !opts.only_vrhost {
        let rows = compare_v6(opts, routes, addrs, &mut rng);
        report.results.extend(rows);
    }
    summarize(report, "ipv6", routes.len());
}

/// Add the ratios the issue asks for, and check that all implementations agree.
fn summarize(report: &mut BenchReport, family: &str, prefixes: usize) {
    let full = |r: &&BenchResult| r.family == family && r.prefixes > 2;
    let rows: Vec<&BenchResult> = report.results.iter().filter(full).collect();
    let rate = |name: &str, mode: &str| {
        rows.iter()
            .find(|r| r.impl_name == name && r.mode == mode)
            .and_then(|r| r.mlookups_per_s)
    };
    let sums: Vec<(String, u64)> = rows
        .iter()
        .filter(|r| r.mode == "single" || r.mode == "batch")
        .filter_map(|r| Some((format!("{}/{}", r.impl_name, r.mode), r.checksum?)))
        .collect();
    if let Some((_, s0)) = sums.first() {
        let bad: Vec<_> = sums
            .iter()
            .filter(|(_, s)| s != s0)
            .map(|(n, _)| n.clone())
            .collect();
        if bad.is_empty() {
            report.notes.push(format!(
                "{family}: all implementations agree on every lookup's next-hop checksum"
            ));
        } else {
            report.notes.push(format!(
                "{family}: CHECKSUM MISMATCH vs vrhost: {}",
                bad.join(", ")
            ));
        }
    }
    let best_other = rows
        .iter()
        .filter(|r| r.impl_name != "vrhost" && r.mode == "single")
        .filter_map(|r| Some((r.impl_name.clone(), r.mlookups_per_s?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let (Some(b), Some((name, o))) = (rate("vrhost", "batch"), best_other) {
        report.notes.push(format!(
            "{family}: vrhost batch / fastest other ({name}) = {:.1}x on {prefixes} prefixes",
            b / o
        ));
    }
    let small = report
        .results
        .iter()
        .find(|r| r.family == family && r.prefixes == 2 && r.mode == "batch")
        .and_then(|r| r.mlookups_per_s);
    if let (Some(b), Some(s)) = (rate("vrhost", "batch"), small) {
        report.notes.push(format!(
            "{family}: vrhost batch, full table / 2-route table = {:.2}",
            b / s
        ));
    }
}

const RESULTS: [Column; 10] = [
    Column::left("impl", 17),
    Column::left("fam", 5),
    Column::right("prefixes", 8),
    Column::left("mode", 17),
    Column::right("Mlookup/s", 9),
    Column::right("ns/look", 8),
    Column::right("build ms", 9),
    Column::right("mem MiB", 10),
    Column::right("updates/s", 11),
    Column::right("slowdown", 9),
];

impl BenchReport {
    /// Print the results as a table.
    pub fn print_table(&self) {
        println!(
            "bench fib  {}  {} ({} cores, kernel {}, pinned: {})",
            self.machine.date,
            self.machine.cpu,
            self.machine.cores,
            self.machine.kernel,
            self.machine.pinned
        );
        println!(
            "table {}  ({} random addresses per pass)",
            self.table, self.lookups
        );
        println!("{}", heading(&RESULTS));
        for r in &self.results {
            let mem = r.mem_bytes.map(|b| {
                format!(
                    "{:.1}{}",
                    mib(b as u64),
                    if r.mem_method.as_deref() == Some("rss") {
                        " rss"
                    } else {
                        ""
                    }
                )
            });
            let slowdown = r
                .lookup_slowdown_pct
                .map_or_else(|| "-".into(), |p| format!("{p:.1}%"));
            println!(
                "{}",
                row(
                    &RESULTS,
                    &[
                        &r.impl_name,
                        &r.family,
                        &r.prefixes,
                        &r.mode,
                        &opt(r.mlookups_per_s, 1),
                        &opt(r.ns_per_lookup, 1),
                        &opt(r.build_ms, 0),
                        &mem.unwrap_or_else(|| "-".into()),
                        &opt(r.updates_per_s, 0),
                        &slowdown,
                    ]
                )
            );
        }
        for n in &self.notes {
            println!("note: {n}");
        }
    }
}
