//! `bench forward`'s TCP figures: iperf3 through the forwarder without
//! load, in each placement of `--tcp-placements` (pinned beside the
//! generator and the forwarder, or left to the scheduler), the best kept,
//! and what bounds it: the sender's retransmits, RTT and congestion
//! window, the frames lost on the node meanwhile, the busy share of the
//! generator's and the forwarder's cores, and the offloads the four
//! interfaces on the way had on (with the end hosts' GRO of `--tcp-gro`).

use std::time::Instant;

use serde::Serialize;
use vrhost_client::Client;
use vrhost_lab::Lab;

use super::ForwardArgs;
use super::measure::{LossCounters, counter, cpu_busy_ns};
use crate::{BenchError, Context, Result, bail};

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
    /// `SERVER,CLIENT`, or `unpinned`, in the best placement (the one
    /// `tcp_gbps` and the figures above are of).
    pub tcp_cpus: Option<String>,
    /// Frames the sink's `eth0` received during the test (the data
    /// segments, and the handshake's few).
    pub tcp_data_frames: Option<u64>,
    /// Frames the generator's `eth0` received during it (the ACKs):
    /// `tcp_ack_frames / tcp_data_frames` is the ACKs per segment each
    /// forwarder carries back.
    pub tcp_ack_frames: Option<u64>,
    /// vrhost: transmit system calls of both ports during the test
    /// (`tx_runs`: `BPF_PROG_RUN` calls with `tx = "xdp"`, kicks with
    /// the socket).
    pub tcp_tx_runs: Option<u64>,
    /// vrhost: frames a transmit system call of p1 carried (the data
    /// segments).
    pub tcp_frames_per_run: Option<f64>,
    /// vrhost: frames a transmit system call of p0 carried (the ACKs).
    pub tcp_ack_frames_per_run: Option<f64>,
    /// Gbit/s with iperf3 pinned (`--tcp-cpus`), if measured.
    pub tcp_gbps_pinned: Option<f64>,
    /// Gbit/s with iperf3 unpinned, if measured.
    pub tcp_gbps_unpinned: Option<f64>,
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

/// The offloads on along [`PATH`] (see [`TcpFigures::tcp_offloads`]),
/// and `host/dev:xdp` where an XDP program is attached (on an end host's
/// `eth0` veth then turns every skb into an xdp_buff, copying it).
fn offloads_on(lab: &Lab) -> Result<String> {
    let mut on = Vec::new();
    for (host, dev) in PATH {
        if has_xdp(lab, host, dev)? {
            on.push(format!("{host}/{dev}:xdp"));
        }
        if let Some(q) = root_qdisc(lab, host, dev)? {
            on.push(format!("{host}/{dev}:{q}"));
        }
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

/// The root qdisc on `host`'s `dev`, if it is a queue (not `noqueue`).
fn root_qdisc(lab: &Lab, host: &str, dev: &str) -> Result<Option<String>> {
    let out = lab
        .ns(host)
        .exec("tc", &["qdisc", "show", "dev", dev, "root"])?;
    Ok(out
        .split_whitespace()
        .nth(1)
        .filter(|q| *q != "noqueue")
        .map(str::to_string))
}

/// Whether `host`'s `dev` has an XDP program attached.
fn has_xdp(lab: &Lab, host: &str, dev: &str) -> Result<bool> {
    let out = lab.ns(host).ip(&["-d", "link", "show", "dev", dev])?;
    Ok(out.split_whitespace().any(|w| w.starts_with("prog/xdp")))
}

/// Take the XDP sink off the sink's `eth0` for the TCP test, if it is on
/// (`bench forward` attaches it for its UDP points); whether it was.
/// Every forwarded segment is an skb there for the kernel's and the
/// socket's paths, which veth copies into an xdp_buff for the program
/// (`veth_xdp_rcv_skb`, `skb_pp_cow_data`: 690 ns of the kernel's 2,850
/// a frame in a profile of 2026-11-27), while xdp_frames skip it: the
/// sink's GRO gives the veth the NAPI xdp_frames need instead.
fn sink_xdp_off(lab: &Lab) -> Result<bool> {
    if !has_xdp(lab, "sink", "eth0")? {
        return Ok(false);
    }
    lab.ns("sink")
        .ip(&["link", "set", "dev", "eth0", "xdp", "off"])
        .context("the XDP sink off the sink's eth0")?;
    Ok(true)
}

/// Put the XDP sink back on the sink's `eth0`.
fn sink_xdp_on(lab: &Lab) -> Result<()> {
    // A file of its own: the one of `xdp_sink_obj` is the run's, in use
    // until its end.
    let path = std::env::temp_dir().join(format!("vrhost-xdp-sink-tcp-{}.o", std::process::id()));
    std::fs::write(&path, vrhost_io::XDP_SINK_OBJ)?;
    let _cleanup = super::TempFile(path.clone());
    super::attach_xdp_sink(lab, &path.display().to_string())
}

/// Where iperf3 runs (`--tcp-placements`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TcpPlacement {
    /// The server on `--fwd-cpu`, the client on `--gen-cpu` (or
    /// `--tcp-cpus`).
    Pinned,
    /// Where the scheduler puts them.
    Unpinned,
}

/// The end hosts' GRO during the TCP test (`--tcp-gro`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TcpGro {
    /// On the generator's `eth0` (where the ACKs arrive) for every
    /// forwarder: a veth takes redirected xdp_frames (`af_xdp_txlive`'s
    /// `p0`, the fast path) only with NAPI, and GRO gives it that; pure
    /// ACKs are not merged. The sink's XDP program stays on (the default
    /// before 2026-11-27).
    Gen,
    /// On both end hosts' `eth0`, for every forwarder (the sink's then
    /// merges the data segments for the iperf3 server), and the sink's
    /// XDP program off during the test (the GRO gives its veth the NAPI
    /// xdp_frames need; without the program the kernel's and the
    /// socket's skbs are no longer copied into an xdp_buff there).
    Ends,
    /// Only where a forwarder needs it (the generator's `eth0` for
    /// `fast` and `af_xdp_txlive`): the setting before 2026-11-26's
    /// seventh session, not like for like.
    Needed,
}

/// The end hosts' root qdisc during the TCP test (`--tcp-qdisc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TcpQdisc {
    /// pfifo_fast on both end hosts' `eth0`, as on a real host's NIC
    /// (the kernel's `net.core.default_qdisc`): when the veth's peer queues
    /// frames in its ring (an XDP program or GRO there) and the ring is
    /// full, veth (Linux 6.16+) stops the queue and the qdisc holds the
    /// segment until there is room, as a NIC's full ring does.
    PfifoFast,
    /// None (a veth's `noqueue`): a segment that finds the peer's ring
    /// full is dropped at the sender's `eth0` (`tx_dropped`) and TCP
    /// retransmits it (the setting before 2026-11-27).
    None,
}

/// Put `qdisc` on both end hosts' `eth0` (nothing for `None`).
fn end_qdisc(lab: &Lab, qdisc: TcpQdisc) -> Result<()> {
    if qdisc == TcpQdisc::PfifoFast {
        for host in ["gen", "sink"] {
            lab.ns(host)
                .exec(
                    "tc",
                    &["qdisc", "replace", "dev", "eth0", "root", "pfifo_fast"],
                )
                .with_context(|| format!("pfifo_fast on {host}'s eth0"))?;
        }
    }
    Ok(())
}

/// Take the end hosts' root qdisc off again (a veth's default, `noqueue`;
/// the UDP points set the generator's pacing themselves).
fn end_qdisc_off(lab: &Lab, qdisc: TcpQdisc) {
    if qdisc == TcpQdisc::PfifoFast {
        for host in ["gen", "sink"] {
            let _ = lab
                .ns(host)
                .exec("tc", &["qdisc", "del", "dev", "eth0", "root"]);
        }
    }
}

/// The cores of the iperf3 server and client in `placement` (see
/// [`ForwardArgs::tcp_cpus`]); `None`: not pinned.
pub(crate) fn tcp_cpus(args: &ForwardArgs, placement: TcpPlacement) -> [Option<usize>; 2] {
    match (placement, &args.tcp_cpus[..]) {
        (TcpPlacement::Unpinned, _) => [None, None],
        (TcpPlacement::Pinned, &[s, c]) => [Some(s), Some(c)],
        (TcpPlacement::Pinned, _) => [Some(args.fwd_cpu), Some(args.gen_cpu)],
    }
}

/// The placements to measure: `--tcp-placements`, or unpinned alone with
/// `--tcp-unpinned`.
fn placements(args: &ForwardArgs) -> &[TcpPlacement] {
    if args.tcp_unpinned {
        &[TcpPlacement::Unpinned]
    } else {
        &args.tcp_placements
    }
}

/// GRO `on` or `off` on `host`'s `eth0`.
fn gro(lab: &Lab, host: &str, on: bool) -> Result<()> {
    let v = if on { "on" } else { "off" };
    lab.ns(host)
        .exec("ethtool", &["-K", "eth0", "gro", v])
        .with_context(|| format!("GRO {v} on {host}'s eth0"))?;
    Ok(())
}

/// Whether forwarder `fwd` needs GRO on the generator's `eth0` (its `p0`
/// sends xdp_frames, which a veth takes only with NAPI).
pub(crate) fn needs_gen_gro(fwd: &str) -> bool {
    matches!(fwd, "fast" | "af_xdp_txlive" | "af_xdp_dedicated_txlive")
        || fwd == super::node::MINIMAL
}

/// iperf3 to `addr` (the sink) through forwarder `fwd` in each placement,
/// with the end hosts' GRO of `--tcp-gro` (put back afterwards); the best
/// Gbit/s and its figures, with every placement's rate.
pub(crate) fn tcp_point(
    args: &ForwardArgs,
    lab: &Lab,
    addr: &str,
    (fwd, daemon): (&str, Option<&Client>),
) -> Result<(f64, TcpFigures)> {
    let (gen_gro, sink_gro) = match args.tcp_gro {
        TcpGro::Gen => (true, false),
        TcpGro::Ends => (true, true),
        TcpGro::Needed => (needs_gen_gro(fwd), false),
    };
    gro(lab, "gen", gen_gro)?;
    gro(lab, "sink", sink_gro)?;
    end_qdisc(lab, args.tcp_qdisc)?;
    let sink_xdp = sink_gro && sink_xdp_off(lab)?;
    let mut best: Option<(f64, TcpFigures)> = None;
    let mut rates = [None, None];
    let mut result = Ok(());
    for &p in placements(args) {
        match tcp_run(args, lab, addr, daemon, p) {
            Ok((gbps, f)) => {
                rates[(p == TcpPlacement::Unpinned) as usize] = Some(gbps);
                if best.as_ref().is_none_or(|(b, _)| gbps > *b) {
                    best = Some((gbps, f));
                }
            }
            Err(e) => result = Err(e),
        }
    }
    end_qdisc_off(lab, args.tcp_qdisc);
    if sink_xdp {
        sink_xdp_on(lab)?;
    }
    gro(lab, "gen", needs_gen_gro(fwd))?;
    gro(lab, "sink", false)?;
    let (gbps, mut figures) = match (best, result) {
        (Some(b), _) => b,
        (None, Err(e)) => return Err(e),
        (None, Ok(())) => bail!("--tcp-placements: none given"),
    };
    [figures.tcp_gbps_pinned, figures.tcp_gbps_unpinned] = rates;
    Ok((gbps, figures))
}

/// One iperf3 test of `args.tcp_seconds` in `placement`, with the figures
/// around it; the Gbit/s and the rest.
fn tcp_run(
    args: &ForwardArgs,
    lab: &Lab,
    addr: &str,
    daemon: Option<&Client>,
    placement: TcpPlacement,
) -> Result<(f64, TcpFigures)> {
    let offloads = offloads_on(lab)?;
    let cpus = tcp_cpus(args, placement);
    let lost_a = LossCounters::read(lab, daemon)?;
    let frames = || -> Result<[u64; 2]> {
        Ok([
            counter(&lab.ns("sink"), "eth0", "rx_packets")?,
            counter(&lab.ns("gen"), "eth0", "rx_packets")?,
        ])
    };
    let frames_a = frames()?;
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
    let frames_b = frames()?;
    let [data, acks] = [0, 1].map(|i| frames_b[i].saturating_sub(frames_a[i]));
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
        tcp_data_frames: Some(data),
        tcp_ack_frames: Some(acks),
        tcp_tx_runs: daemon.map(|_| lost_b.runs(&lost_a)),
        tcp_frames_per_run: daemon.and_then(|_| lost_b.frames_per_run(&lost_a)[1]),
        tcp_ack_frames_per_run: daemon.and_then(|_| lost_b.frames_per_run(&lost_a)[0]),
        tcp_gbps_pinned: None,
        tcp_gbps_unpinned: None,
    };
    let per_run = |f: Option<f64>| f.map_or("-".into(), |f| format!("{f:.1}"));
    eprintln!(
        "tcp ({}): {:.2} Gbit/s, {} retransmits, rtt {} us, cwnd {} B, {} frames lost on the node, {data} frames to the sink, {acks} back ({:.3} a frame), {} tx runs ({} frames a run to the sink, {} back), cores busy {:.0}% (gen) {:.0}% (fwd), offloads {}",
        figures.tcp_cpus.as_deref().unwrap_or("?"),
        run.gbps,
        run.retransmits.unwrap_or(0),
        run.mean_rtt_us.unwrap_or(0.0),
        run.max_cwnd_bytes.unwrap_or(0),
        figures.tcp_lost_frames.unwrap_or(0),
        acks as f64 / data.max(1) as f64,
        figures.tcp_tx_runs.unwrap_or(0),
        per_run(figures.tcp_frames_per_run),
        per_run(figures.tcp_ack_frames_per_run),
        pct(0),
        pct(1),
        figures.tcp_offloads.as_deref().unwrap_or("?"),
    );
    Ok((run.gbps, figures))
}
