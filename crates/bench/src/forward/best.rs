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

fn is_kernel(fwd: &str) -> bool {
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
