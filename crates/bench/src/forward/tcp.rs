//! `bench forward`'s TCP figures: one iperf3 test through the forwarder
//! without load, and what bounds it: the sender's retransmits, RTT and
//! congestion window, the frames lost on the node meanwhile, the busy
//! share of the generator's and the forwarder's cores, and the offloads
//! the four interfaces on the way had on.

use std::time::Instant;

use serde::Serialize;
use vrhost_client::Client;
use vrhost_lab::Lab;

use super::ForwardArgs;
use super::measure::{LossCounters, cpu_busy_ns};
use crate::{BenchError, Result};

/// What the TCP test measured besides `tcp_gbps` (flattened into the
/// record; `None` where no TCP test ran).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TcpFigures {
    /// Segments the iperf3 sender retransmitted.
    pub tcp_retransmits: Option<u64>,
    /// The sender's smoothed RTT, mean over the test (µs).
    pub tcp_rtt_us: Option<f64>,
    /// The sender's largest congestion window (bytes).
    pub tcp_cwnd_bytes: Option<u64>,
    /// Frames lost on the node during the test, counted as the load
    /// points' `lost_*` are (the generator's tx drops, the node's and
    /// vrhost's drops in, in the VR and out).
    pub tcp_lost_frames: Option<u64>,
    /// Busy share of the generator's core during the test, percent.
    pub tcp_gen_cpu_pct: Option<f64>,
    /// Busy share of the forwarder's core during the test, percent.
    pub tcp_fwd_cpu_pct: Option<f64>,
    /// The cores the iperf3 server and client were pinned to,
    /// `SERVER,CLIENT`, or `unpinned`.
    pub tcp_cpus: Option<String>,
    /// The offloads on during the test, `host/dev:feature` (tso, gso,
    /// gro, tx and rx checksums) over the generator's, the node's and the
    /// sink's interfaces; `none` if all were off.
    pub tcp_offloads: Option<String>,
}

/// The interfaces a TCP segment crosses, as (host, dev).
const PATH: [(&str, &str); 4] = [
    ("gen", "eth0"),
    ("node", "p0"),
    ("node", "p1"),
    ("sink", "eth0"),
];

/// `ethtool -k` names and the short ones reported.
const FEATURES: [(&str, &str); 5] = [
    ("tcp-segmentation-offload", "tso"),
    ("generic-segmentation-offload", "gso"),
    ("generic-receive-offload", "gro"),
    ("tx-checksumming", "tx"),
    ("rx-checksumming", "rx"),
];

/// The offloads on along [`PATH`] (see [`TcpFigures::tcp_offloads`]).
fn offloads_on(lab: &Lab) -> Result<String> {
    let mut on = Vec::new();
    for (host, dev) in PATH {
        let out = lab.ns(host).exec("ethtool", &["-k", dev])?;
        for line in out.lines() {
            let Some((name, state)) = line.split_once(':') else {
                continue;
            };
            if let Some((_, short)) = FEATURES.iter().find(|(f, _)| *f == name.trim())
                && state.trim_start().starts_with("on")
            {
                on.push(format!("{host}/{dev}:{short}"));
            }
        }
    }
    Ok(if on.is_empty() {
        "none".into()
    } else {
        on.join(",")
    })
}

/// The cores of the iperf3 server and client (see
/// [`ForwardArgs::tcp_cpus`]); `None`: not pinned.
pub(crate) fn tcp_cpus(args: &ForwardArgs) -> [Option<usize>; 2] {
    match args.tcp_cpus[..] {
        _ if args.tcp_unpinned => [None, None],
        [s, c] => [Some(s), Some(c)],
        _ => [Some(args.fwd_cpu), Some(args.gen_cpu)],
    }
}

/// One iperf3 test of `args.tcp_seconds` to `addr` (the sink), with the
/// figures around it; the Gbit/s and the rest.
pub(crate) fn tcp_point(
    args: &ForwardArgs,
    lab: &Lab,
    addr: &str,
    daemon: Option<&Client>,
) -> Result<(f64, TcpFigures)> {
    let offloads = offloads_on(lab)?;
    let cpus = tcp_cpus(args);
    let lost_a = LossCounters::read(lab, daemon)?;
    let busy_a = [cpu_busy_ns(args.gen_cpu)?, cpu_busy_ns(args.fwd_cpu)?];
    let t = Instant::now();
    let run = vrhost_lab::tools::iperf3_run(
        &lab.ns("sink"),
        &lab.ns("gen"),
        addr,
        args.tcp_seconds,
        cpus,
    )
    .map_err(BenchError::Failed)?;
    let busy_b = [cpu_busy_ns(args.gen_cpu)?, cpu_busy_ns(args.fwd_cpu)?];
    let span_ns = t.elapsed().as_nanos() as f64;
    let lost_b = LossCounters::read(lab, daemon)?;
    let pct = |i: usize| (busy_b[i].saturating_sub(busy_a[i]) as f64 / span_ns * 100.0).min(100.0);
    let figures = TcpFigures {
        tcp_retransmits: run.retransmits,
        tcp_rtt_us: run.mean_rtt_us,
        tcp_cwnd_bytes: run.max_cwnd_bytes,
        tcp_lost_frames: Some(lost_b.total().saturating_sub(lost_a.total())),
        tcp_gen_cpu_pct: Some(pct(0)),
        tcp_fwd_cpu_pct: Some(pct(1)),
        tcp_offloads: Some(offloads),
        tcp_cpus: Some(match cpus {
            [Some(s), Some(c)] => format!("{s},{c}"),
            _ => "unpinned".into(),
        }),
    };
    eprintln!(
        "tcp: {:.2} Gbit/s, {} retransmits, rtt {} us, cwnd {} B, {} frames lost on the node, cores busy {:.0}% (gen) {:.0}% (fwd), offloads {}",
        run.gbps,
        run.retransmits.unwrap_or(0),
        run.mean_rtt_us.unwrap_or(0.0),
        run.max_cwnd_bytes.unwrap_or(0),
        figures.tcp_lost_frames.unwrap_or(0),
        pct(0),
        pct(1),
        figures.tcp_offloads.as_deref().unwrap_or("?"),
    );
    Ok((run.gbps, figures))
}
