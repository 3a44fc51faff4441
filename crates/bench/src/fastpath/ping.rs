//! The fastpath bench's `ping` experiment: ping RTT through each
//! forwarder, many pings, the forwarders alternated `--ping-rounds`
//! times in one run (kernel, fast, kernel, fast, ...), so that a
//! difference between them is not the machine's mood between two
//! minutes. Each round of each forwarder and table is a `ping` record
//! (min, median, p90, p99, max of its replies, and for a vrhost
//! forwarder the frames its VR's slow path took meanwhile); each
//! non-kernel forwarder is then set against the kernel's best over all
//! its pings (`ping_vs_kernel`: pooled medians and p99s, and in how many
//! rounds its median was at or below the kernel's of the same round).
//!
//! The node is set up as for the forwarding points (`setup_node_on`),
//! without GRO on p0 (as their ping), the sink's XDP drop on its `eth0`.

use std::path::Path;

use serde::Serialize;
use vrhost_lab::Lab;

use super::FastpathArgs;
use crate::forward::best::is_kernel;
use crate::forward::generator::GeneratorKind;
use crate::forward::node::setup_node_on;
use crate::forward::{Family, Table, p0_gro, sink_addr};
use crate::{BenchError, Result};

/// One forwarder's pings in one round.
#[derive(Debug, Clone, Serialize)]
pub struct PingRecord {
    /// kernel, kernel_norps, fast, af_xdp.
    pub forwarder: String,
    /// Routes of the table.
    pub routes: usize,
    /// The round (0-based): the forwarders take turns within one.
    pub round: u32,
    /// Pings sent.
    pub sent: u32,
    /// Replies received (the figures below are of these).
    pub replies: usize,
    /// RTT, µs.
    pub min_us: f64,
    /// RTT, µs.
    pub median_us: f64,
    /// RTT, µs.
    pub p90_us: f64,
    /// RTT, µs.
    pub p99_us: f64,
    /// RTT, µs.
    pub max_us: f64,
    /// The core ping ran on (none: where the scheduler put it).
    pub ping_cpu: Option<usize>,
    /// vrhost: frames the fast path handed to the VR's slow path during
    /// the pings (by any reason; none for the kernel).
    pub to_slow: Option<u64>,
}

/// A forwarder's pings against the kernel's, all rounds pooled.
#[derive(Debug, Clone, Serialize)]
pub struct PingVsKernel {
    /// The forwarder compared.
    pub forwarder: String,
    /// Routes of the table.
    pub routes: usize,
    /// Rounds of each.
    pub rounds: u32,
    /// Its replies over all rounds.
    pub replies: usize,
    /// Its median over all rounds, µs.
    pub median_us: f64,
    /// Its p99 over all rounds, µs.
    pub p99_us: f64,
    /// The smallest and largest of its round medians, µs.
    pub round_median_min_us: f64,
    /// See `round_median_min_us`.
    pub round_median_max_us: f64,
    /// The kernel forwarder with the lowest pooled median.
    pub kernel: String,
    /// Its pooled median, µs.
    pub kernel_median_us: f64,
    /// Its pooled p99, µs.
    pub kernel_p99_us: f64,
    /// The smallest and largest of its round medians, µs.
    pub kernel_round_median_min_us: f64,
    /// See `kernel_round_median_min_us`.
    pub kernel_round_median_max_us: f64,
    /// `median_us - kernel_median_us`.
    pub diff_median_us: f64,
    /// Rounds in which this forwarder's median was at or below the
    /// kernel's of the same round.
    pub rounds_at_or_below_kernel: u32,
}

/// The value at quantile `q` of the sorted `v`, as every bench reads it
/// ([`crate::report::percentile`]); `v` holds a reply at least
/// (`ping_rtts_on` fails with none).
fn quantile(v: &[f64], q: f64) -> f64 {
    crate::report::percentile(v, q).unwrap_or(f64::NAN)
}

/// Every forwarder of `args`, each table, `--ping-rounds` rounds; the
/// records and, per table, each forwarder against the kernel.
pub(super) fn ping(
    args: &FastpathArgs,
    lab: &Lab,
    tables: &[Table],
    dir: &Path,
) -> Result<(Vec<PingRecord>, Vec<PingVsKernel>)> {
    let mut records = Vec::new();
    let mut pooled: Vec<(String, usize, Vec<f64>)> = Vec::new();
    if args.ping_count == 0 {
        return Ok((records, Vec::new()));
    }
    let fa = args.forward_args(GeneratorKind::Trafgen);
    for round in 0..args.ping_rounds {
        for table in tables {
            for fwd in &args.forwarders {
                let daemon = setup_node_on(&fa, lab, fwd, None, table, dir)?;
                let _minimal = crate::forward::node::minimal_router(lab, fwd)?;
                p0_gro(lab, GeneratorKind::Trafgen)?;
                let api = daemon.as_ref().map(|(_, c)| c);
                let before = api.map(super::idle::to_slow).transpose()?;
                let v = vrhost_lab::tools::ping_rtts_on(
                    lab,
                    "gen",
                    sink_addr(Family::Ipv4),
                    args.ping_count,
                    args.ping_interval,
                    args.ping_cpu,
                )
                .map_err(|e| BenchError::Failed(format!("{fwd}: ping: {e}")));
                let after = api.map(super::idle::to_slow).transpose();
                if let Some((d, _)) = daemon {
                    d.stop()?;
                }
                let (v, after) = (v?, after?);
                let r = PingRecord {
                    forwarder: fwd.clone(),
                    routes: table.len(),
                    round,
                    sent: args.ping_count,
                    replies: v.len(),
                    min_us: v[0],
                    median_us: quantile(&v, 0.5),
                    p90_us: quantile(&v, 0.9),
                    p99_us: quantile(&v, 0.99),
                    max_us: v[v.len() - 1],
                    ping_cpu: args.ping_cpu,
                    to_slow: before.zip(after).map(|(b, a)| a.saturating_sub(b)),
                };
                eprintln!(
                    "ping {fwd} {} routes round {round}: {} of {} replies, min {:.0} median {:.0} p90 {:.0} p99 {:.0} max {:.0} us{}",
                    r.routes,
                    r.replies,
                    r.sent,
                    r.min_us,
                    r.median_us,
                    r.p90_us,
                    r.p99_us,
                    r.max_us,
                    r.to_slow
                        .map_or(String::new(), |n| format!(", {n} frames to the slow path"))
                );
                records.push(r);
                match pooled
                    .iter_mut()
                    .find(|(f, n, _)| f == fwd && *n == table.len())
                {
                    Some((_, _, all)) => all.extend_from_slice(&v),
                    None => pooled.push((fwd.clone(), table.len(), v)),
                }
            }
        }
    }
    let vs = vs_kernel(&records, &mut pooled, args.ping_rounds);
    Ok((records, vs))
}

/// Each non-kernel forwarder against the kernel forwarder with the lowest
/// pooled median, per table (`pooled`: forwarder, routes, every RTT).
fn vs_kernel(
    records: &[PingRecord],
    pooled: &mut [(String, usize, Vec<f64>)],
    rounds: u32,
) -> Vec<PingVsKernel> {
    for (_, _, v) in pooled.iter_mut() {
        v.sort_by(f64::total_cmp);
    }
    let round_medians = |fwd: &str, routes: usize| -> Vec<f64> {
        records
            .iter()
            .filter(|r| r.forwarder == fwd && r.routes == routes)
            .map(|r| r.median_us)
            .collect()
    };
    let span = |m: &[f64]| {
        (
            m.iter().copied().fold(f64::INFINITY, f64::min),
            m.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        )
    };
    let mut out = Vec::new();
    for (fwd, routes, v) in pooled.iter().filter(|(f, _, _)| !is_kernel(f)) {
        let Some((kfwd, _, kv)) = pooled
            .iter()
            .filter(|(f, n, _)| is_kernel(f) && n == routes)
            .min_by(|a, b| quantile(&a.2, 0.5).total_cmp(&quantile(&b.2, 0.5)))
        else {
            continue;
        };
        let mine = round_medians(fwd, *routes);
        let theirs = round_medians(kfwd, *routes);
        let below = mine.iter().zip(&theirs).filter(|(m, k)| m <= k).count() as u32;
        let (lo, hi) = span(&mine);
        let (klo, khi) = span(&theirs);
        let (median, kmedian) = (quantile(v, 0.5), quantile(kv, 0.5));
        out.push(PingVsKernel {
            forwarder: fwd.clone(),
            routes: *routes,
            rounds,
            replies: v.len(),
            median_us: median,
            p99_us: quantile(v, 0.99),
            round_median_min_us: lo,
            round_median_max_us: hi,
            kernel: kfwd.clone(),
            kernel_median_us: kmedian,
            kernel_p99_us: quantile(kv, 0.99),
            kernel_round_median_min_us: klo,
            kernel_round_median_max_us: khi,
            diff_median_us: median - kmedian,
            rounds_at_or_below_kernel: below,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(fwd: &str, round: u32, median: f64) -> PingRecord {
        PingRecord {
            forwarder: fwd.into(),
            routes: 2,
            round,
            sent: 3,
            replies: 3,
            min_us: median,
            median_us: median,
            p90_us: median,
            p99_us: median,
            max_us: median,
            ping_cpu: None,
            to_slow: None,
        }
    }

    /// The fast path against the kernel forwarder with the lower pooled
    /// median, round by round and pooled.
    #[test]
    fn the_fast_path_is_set_against_the_best_kernel_round_by_round() {
        let records = [
            rec("kernel", 0, 60.0),
            rec("kernel_norps", 0, 50.0),
            rec("fast", 0, 55.0),
            rec("kernel", 1, 61.0),
            rec("kernel_norps", 1, 52.0),
            rec("fast", 1, 51.0),
        ];
        let mut pooled = vec![
            ("kernel".to_string(), 2, vec![60.0, 61.0, 59.0]),
            ("kernel_norps".to_string(), 2, vec![52.0, 50.0, 53.0]),
            ("fast".to_string(), 2, vec![51.0, 55.0, 80.0]),
        ];
        let vs = vs_kernel(&records, &mut pooled, 2);
        assert_eq!(vs.len(), 1);
        let f = &vs[0];
        assert_eq!(f.kernel, "kernel_norps");
        assert_eq!((f.median_us, f.kernel_median_us), (55.0, 52.0));
        assert_eq!((f.p99_us, f.kernel_p99_us), (80.0, 53.0));
        assert_eq!(f.diff_median_us, 3.0);
        assert_eq!(f.rounds_at_or_below_kernel, 1, "51 <= 52 only");
        assert_eq!((f.round_median_min_us, f.round_median_max_us), (51.0, 55.0));
        assert!(vs_kernel(&records[2..3], &mut pooled[2..], 1).is_empty());
    }

    #[test]
    fn quantiles_are_the_benches_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        // report::percentile's rank: round(99 q).
        assert_eq!(quantile(&v, 0.5), 51.0);
        assert_eq!(quantile(&v, 0.9), 90.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v[..1], 0.99), 1.0);
        assert!(quantile(&[], 0.5).is_nan());
    }
}
