//! The kernel at its best beside vrhost's forwarders (BENCHMARKING.md,
//! "The reference must be the kernel at its best"): for each frame size
//! and table of a run, the highest rate any kernel point forwarded (RPS
//! on or off, whichever generator placement), beside the highest of each
//! other forwarder and its ratio to it. Computed from the run's own
//! records, so both sides come from the same run.

use serde::Serialize;

use super::Record;

/// One forwarder at its best against the kernel at its best, at one frame
/// size and table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Best {
    /// Frame size on the wire.
    pub frame_bytes: usize,
    /// Routes in the forwarders' tables.
    pub routes: usize,
    /// The forwarder compared (fast, af_xdp, ...).
    pub forwarder: String,
    /// Its highest forwarded rate (frames/s).
    pub forwarded_pps: f64,
    /// The generator of that point.
    pub generator: &'static str,
    /// The kernel's highest forwarded rate (frames/s).
    pub kernel_pps: f64,
    /// The kernel's point: `generator/forwarder` (`live-split/kernel_norps`).
    pub kernel_at: String,
    /// `forwarded_pps / kernel_pps`.
    pub ratio: f64,
}

/// The kernel's own forwarders (`kernel`, with RPS, and `kernel_norps`):
/// the best of them is the reference every other forwarder is held to.
pub(crate) fn is_kernel(fwd: &str) -> bool {
    fwd == "kernel" || fwd == "kernel_norps"
}

/// Each non-kernel forwarder's best against the kernel's best, per frame
/// size and table (in the order first measured); none where no kernel
/// point was measured.
pub fn best(records: &[Record]) -> Vec<Best> {
    let max_of = |keep: &dyn Fn(&Record) -> bool| {
        records
            .iter()
            .filter(|r| keep(r))
            .max_by(|a, b| a.forwarded_pps.total_cmp(&b.forwarded_pps))
    };
    let mut out: Vec<Best> = Vec::new();
    for r in records {
        if r.forwarder == "generator" || is_kernel(&r.forwarder) {
            continue;
        }
        let (fb, routes) = (r.frame_bytes, r.routes);
        if out
            .iter()
            .any(|b| (b.frame_bytes, b.routes, b.forwarder.as_str()) == (fb, routes, &r.forwarder))
        {
            continue;
        }
        let same = |x: &Record| x.frame_bytes == fb && x.routes == routes;
        let Some(k) = max_of(&|x| same(x) && is_kernel(&x.forwarder)) else {
            continue;
        };
        let Some(f) = max_of(&|x| same(x) && x.forwarder == r.forwarder) else {
            continue;
        };
        out.push(Best {
            frame_bytes: fb,
            routes,
            forwarder: r.forwarder.clone(),
            forwarded_pps: f.forwarded_pps,
            generator: f.generator,
            kernel_pps: k.forwarded_pps,
            kernel_at: format!("{}/{}", k.generator, k.forwarder),
            ratio: if k.forwarded_pps > 0.0 {
                f.forwarded_pps / k.forwarded_pps
            } else {
                0.0
            },
        });
    }
    out
}

/// One forwarder's best iperf3 TCP against the kernel's best, in one
/// address family: over every point with a TCP figure (each the best of
/// its placements), both kernel forwarders alike.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TcpBest {
    /// The frames' address family.
    pub family: &'static str,
    /// The forwarder compared.
    pub forwarder: String,
    /// Its best Gbit/s.
    pub tcp_gbps: f64,
    /// Where iperf3 ran for it (`SERVER,CLIENT` or `unpinned`).
    pub tcp_cpus: String,
    /// The kernel's best Gbit/s.
    pub kernel_gbps: f64,
    /// The kernel's point: `forwarder/placement` (`kernel/unpinned`).
    pub kernel_at: String,
    /// `tcp_gbps / kernel_gbps`.
    pub ratio: f64,
}

/// Each non-kernel forwarder's best TCP against the kernel's best TCP,
/// per family (in the order first measured); none without a kernel
/// figure.
pub fn tcp_best(records: &[Record]) -> Vec<TcpBest> {
    let max_of = |keep: &dyn Fn(&Record) -> bool| {
        records
            .iter()
            .filter(|r| r.tcp_gbps.is_some() && keep(r))
            .max_by(|a, b| {
                a.tcp_gbps
                    .unwrap_or(0.0)
                    .total_cmp(&b.tcp_gbps.unwrap_or(0.0))
            })
    };
    let cpus = |r: &Record| r.tcp.tcp_cpus.clone().unwrap_or_default();
    let mut out: Vec<TcpBest> = Vec::new();
    for r in records.iter().filter(|r| r.tcp_gbps.is_some()) {
        if is_kernel(&r.forwarder)
            || out
                .iter()
                .any(|b| (b.family, b.forwarder.as_str()) == (r.family, &r.forwarder))
        {
            continue;
        }
        let (Some(k), Some(f)) = (
            max_of(&|x| x.family == r.family && is_kernel(&x.forwarder)),
            max_of(&|x| x.family == r.family && x.forwarder == r.forwarder),
        ) else {
            continue;
        };
        let (kg, fg) = (k.tcp_gbps.unwrap_or(0.0), f.tcp_gbps.unwrap_or(0.0));
        out.push(TcpBest {
            family: r.family,
            forwarder: r.forwarder.clone(),
            tcp_gbps: fg,
            tcp_cpus: cpus(f),
            kernel_gbps: kg,
            kernel_at: format!("{}/{}", k.forwarder, cpus(k)),
            ratio: if kg > 0.0 { fg / kg } else { 0.0 },
        });
    }
    out
}

/// The lines under the forwarding table.
pub(crate) fn print_best(records: &[Record]) {
    let b = best(records);
    if !b.is_empty() {
        println!("\nagainst the kernel at its best (same run):");
    }
    for x in b {
        println!(
            "  {} B, {} routes: {} {:.0} pps ({}) / kernel {:.0} pps ({}) = {:.2} x",
            x.frame_bytes,
            x.routes,
            x.forwarder,
            x.forwarded_pps,
            x.generator,
            x.kernel_pps,
            x.kernel_at,
            x.ratio
        );
    }
    let t = tcp_best(records);
    if !t.is_empty() {
        println!("\nTCP against the kernel at its best (same run, best placement of each):");
    }
    for x in t {
        println!(
            "  {}: {} {:.2} Gbit/s ({}) / kernel {:.2} Gbit/s ({}) = {:.2} x",
            x.family, x.forwarder, x.tcp_gbps, x.tcp_cpus, x.kernel_gbps, x.kernel_at, x.ratio
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(generator: &'static str, forwarder: &str, routes: usize, pps: f64) -> Record {
        Record {
            generator,
            forwarder: forwarder.into(),
            frame_bytes: 64,
            routes,
            forwarded_pps: pps,
            ..Record::default()
        }
    }

    /// The kernel's best is the highest over both kernel forwarders and
    /// both placements, per table; the generator alone counts for
    /// neither side; a table without a kernel point gets no line.
    fn tcp(family: &'static str, forwarder: &str, gbps: f64, cpus: &str) -> Record {
        Record {
            family,
            forwarder: forwarder.into(),
            tcp_gbps: Some(gbps),
            tcp: Box::new(crate::forward::TcpFigures {
                tcp_cpus: Some(cpus.into()),
                ..Default::default()
            }),
            ..Record::default()
        }
    }

    /// TCP: the kernel's best over both kernel forwarders and placements,
    /// per family; points without TCP and families without a kernel
    /// figure count for nothing.
    #[test]
    fn the_kernel_s_best_tcp_is_over_placements_per_family() {
        let r = [
            tcp("ipv4", "kernel", 2.7, "1,0"),
            tcp("ipv4", "af_xdp", 3.0, "1,0"),
            rec("live", "af_xdp", 2, 9e6),
            tcp("ipv4", "kernel_norps", 4.5, "unpinned"),
            tcp("ipv4", "af_xdp", 2.5, "unpinned"),
            tcp("ipv6", "af_xdp", 2.0, "1,0"),
        ];
        let t = tcp_best(&r);
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!((t[0].tcp_gbps, t[0].tcp_cpus.as_str()), (3.0, "1,0"));
        assert_eq!(
            (t[0].kernel_gbps, t[0].kernel_at.as_str()),
            (4.5, "kernel_norps/unpinned")
        );
        assert!((t[0].ratio - 3.0 / 4.5).abs() < 1e-12);
    }

    #[test]
    fn the_kernel_s_best_is_over_rps_and_placements_per_table() {
        let r = [
            rec("live", "generator", 0, 9e6),
            rec("live", "kernel", 2, 1.3e6),
            rec("live", "fast", 2, 2.3e6),
            rec("live-split", "kernel", 2, 1.2e6),
            rec("live-split", "kernel_norps", 2, 1.5e6),
            rec("live-split", "fast", 2, 4.5e6),
            rec("live", "kernel", 500, 0.9e6),
            rec("live-split", "fast", 500, 1.8e6),
            rec("live", "fast", 7, 1e6),
        ];
        let b = best(&r);
        assert_eq!(b.len(), 2, "{b:?}");
        assert_eq!(b[0].routes, 2);
        assert_eq!(b[0].kernel_pps, 1.5e6);
        assert_eq!(b[0].kernel_at, "live-split/kernel_norps");
        assert_eq!((b[0].forwarded_pps, b[0].generator), (4.5e6, "live-split"));
        assert_eq!(b[0].ratio, 3.0);
        assert_eq!(
            (b[1].routes, b[1].kernel_pps, b[1].ratio),
            (500, 0.9e6, 2.0)
        );
    }
}
