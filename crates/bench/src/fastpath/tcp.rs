//! The fastpath bench's `tcp` experiment: iperf3 TCP through each
//! forwarder (2 routes, no load) in both placements of `bench forward`'s
//! TCP test: `pinned` (the server on the forwarder's core, the client on
//! the generator's: `--tcp-cpus`'s default) and `unpinned` (where the
//! scheduler puts them: `--tcp-unpinned`). Neither placement is fair to
//! every forwarder (pinned, the kernel's RPS forwarding shares a core with
//! the server; unpinned, the client may land beside a user-space worker),
//! so each forwarder's best over both is compared with the kernel's best
//! over both kernel forwarders and both placements (`tcp_best` records),
//! as the forwarding points' `best` records do for frames/s. The end
//! hosts' GRO and the sink's XDP program are `bench forward`'s of
//! `--tcp-gro` (`ends` by default: GRO on both, the program off during
//! iperf3), and each record's `tcp_offloads` says what was on.

use std::path::Path;

use serde::Serialize;
use vrhost_lab::Lab;

use super::FastpathArgs;
use crate::Result;
use crate::forward::best::is_kernel;
use crate::forward::generator::GeneratorKind;
use crate::forward::node::setup_node_on;
use crate::forward::tcp::tcp_point;
use crate::forward::{Family, Record, Table, TcpFigures, TcpPlacement, p0_gro, sink_addr};

/// One TCP test: a forwarder in one placement.
#[derive(Debug, Clone, Serialize)]
pub struct TcpRecord {
    /// kernel, kernel_norps, fast, af_xdp.
    pub forwarder: String,
    /// `pinned` or `unpinned`.
    pub placement: &'static str,
    /// iperf3's rate (Gbit/s); none if the test failed.
    pub tcp_gbps: Option<f64>,
    /// What bounds it (`tcp_retransmits`, `tcp_cpus`, ...).
    #[serde(flatten)]
    pub figures: TcpFigures,
}

/// A forwarder's best TCP rate against the kernel's best.
#[derive(Debug, Clone, Serialize)]
pub struct TcpBest {
    /// The forwarder compared.
    pub forwarder: String,
    /// Its best rate over both placements (Gbit/s).
    pub tcp_gbps: f64,
    /// The placement of that rate.
    pub placement: &'static str,
    /// The kernel's best over both kernel forwarders and placements.
    pub kernel_gbps: f64,
    /// Where: `forwarder/placement`.
    pub kernel_at: String,
    /// `tcp_gbps / kernel_gbps`.
    pub ratio: f64,
}

const PLACEMENTS: [&str; 2] = ["pinned", "unpinned"];

/// Every forwarder of `args` in both placements.
pub(super) fn tcp(args: &FastpathArgs, lab: &Lab, dir: &Path) -> Result<Vec<TcpRecord>> {
    let table = Table::load("2")?;
    let mut out = Vec::new();
    if args.tcp_seconds == 0 {
        return Ok(out);
    }
    for fwd in &args.forwarders {
        let mut fa = args.forward_args(GeneratorKind::Trafgen);
        // The forwarding points leave TCP to this experiment.
        fa.tcp_seconds = args.tcp_seconds;
        let daemon = setup_node_on(&fa, lab, fwd, None, &table, dir)?;
        let _minimal = crate::forward::node::minimal_router(lab, fwd)?;
        // As the forwarding points measure TCP: GRO off on p0; the end
        // hosts' of `--tcp-gro` (in `fa`).
        p0_gro(lab, GeneratorKind::Trafgen)?;
        fa.tcp_unpinned = false;
        for placement in PLACEMENTS {
            fa.tcp_placements = vec![if placement == "unpinned" {
                TcpPlacement::Unpinned
            } else {
                TcpPlacement::Pinned
            }];
            let api = daemon.as_ref().map(|(_, c)| c);
            let to = sink_addr(Family::Ipv4);
            let (gbps, figures) = match tcp_point(&fa, lab, to, (fwd, api)) {
                Ok((g, f)) => (Some(g), f),
                Err(e) => {
                    eprintln!("{fwd} ({placement}): iperf3: {e:#}");
                    (None, TcpFigures::default())
                }
            };
            out.push(TcpRecord {
                forwarder: fwd.clone(),
                placement,
                tcp_gbps: gbps,
                figures,
            });
        }
        if let Some((d, _)) = daemon {
            d.stop()?;
        }
    }
    Ok(out)
}

/// The highest rate of the records `keep` takes.
fn top<'a>(records: &'a [TcpRecord], keep: &dyn Fn(&TcpRecord) -> bool) -> Option<&'a TcpRecord> {
    records
        .iter()
        .filter(|r| keep(r) && r.tcp_gbps.is_some())
        .max_by(|a, b| {
            a.tcp_gbps
                .unwrap_or(0.0)
                .total_cmp(&b.tcp_gbps.unwrap_or(0.0))
        })
}

/// Each non-kernel forwarder's best against the kernel's best (none
/// without a kernel figure).
pub fn tcp_best(records: &[TcpRecord]) -> Vec<TcpBest> {
    let Some(k) = top(records, &|r| is_kernel(&r.forwarder)) else {
        return Vec::new();
    };
    let kernel = k.tcp_gbps.unwrap_or(0.0);
    let mut out: Vec<TcpBest> = Vec::new();
    for r in records.iter().filter(|r| !is_kernel(&r.forwarder)) {
        if out.iter().any(|b| b.forwarder == r.forwarder) {
            continue;
        }
        let Some(f) = top(records, &|x| x.forwarder == r.forwarder) else {
            continue;
        };
        let gbps = f.tcp_gbps.unwrap_or(0.0);
        out.push(TcpBest {
            forwarder: f.forwarder.clone(),
            tcp_gbps: gbps,
            placement: f.placement,
            kernel_gbps: kernel,
            kernel_at: format!("{}/{}", k.forwarder, k.placement),
            ratio: if kernel > 0.0 { gbps / kernel } else { 0.0 },
        });
    }
    out
}

/// The forwarding points' `tcp_gbps` (on each forwarder's first point, as
/// `bench forward` puts it) from the `tcp` experiment: the forwarder's best
/// over both placements, with that test's figures.
pub(super) fn fill_points(points: &mut [Record], records: &[TcpRecord], first_load: f64) {
    for p in points.iter_mut().filter(|p| p.load == first_load) {
        if let Some(best) = top(records, &|r| r.forwarder == p.forwarder) {
            p.tcp_gbps = best.tcp_gbps;
            *p.tcp = best.figures.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(fwd: &str, placement: &'static str, gbps: f64) -> TcpRecord {
        TcpRecord {
            forwarder: fwd.into(),
            placement,
            tcp_gbps: Some(gbps),
            figures: TcpFigures::default(),
        }
    }

    /// Best against best: each side's highest over both placements, the
    /// kernel's over both kernel forwarders.
    #[test]
    fn the_ratio_is_best_against_best_over_both_placements() {
        let r = [
            rec("kernel", "pinned", 2.7),
            rec("kernel", "unpinned", 4.6),
            rec("kernel_norps", "pinned", 3.9),
            rec("kernel_norps", "unpinned", 3.0),
            rec("fast", "pinned", 5.0),
            rec("fast", "unpinned", 4.2),
            rec("af_xdp", "pinned", 2.9),
            rec("af_xdp", "unpinned", 1.5),
        ];
        let b = tcp_best(&r);
        assert_eq!(b.len(), 2);
        assert_eq!(
            (b[0].forwarder.as_str(), b[0].placement),
            ("fast", "pinned")
        );
        assert_eq!(b[0].kernel_at, "kernel/unpinned");
        assert!((b[0].ratio - 5.0 / 4.6).abs() < 1e-9);
        assert!((b[1].ratio - 2.9 / 4.6).abs() < 1e-9);
        assert!(tcp_best(&r[4..]).is_empty(), "no kernel, no ratio");
    }
}
