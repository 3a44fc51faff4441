//! The migrate experiment: a router VR moved slow -> fast -> slow ... by
//! the API while the live generator sends numbered flows through it, each
//! move's frames lost and reordered counted at the sink from the sequence
//! numbers; and each series of moves at one rate, added up exactly once
//! the paths have drained.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use vrhost_client::{Client, Method};
use vrhost_fast::SinkCounts;

use super::switch::{Switch, Watch};
use super::{FastpathArgs, Setup};
use crate::forward::generator::{Generator, GeneratorKind, LiveOptions};
use crate::forward::measure::counter;
use crate::forward::node::setup_node_on;
use crate::forward::{Table, p0_gro};
use crate::{Context, Result};

/// One move.
#[derive(Debug, Clone, Serialize)]
pub struct MoveRecord {
    /// to_fast | to_slow.
    pub direction: &'static str,
    /// The move's place in its series (0-based).
    pub index: usize,
    /// The generator's target rate, frames/s (None: its maximum).
    pub rate_pps: Option<u64>,
    /// Frames/s the live generator sent (its own counter) over the
    /// window after the request.
    pub offered_pps: f64,
    /// Frames/s the sink received over that window.
    pub forwarded_pps: f64,
    /// Sequence numbers missing at the sink over the window after the
    /// request (`--move-settle` seconds). A frame is counted lost when a
    /// later frame of its flow arrives, and the slow path's rings delay
    /// that by their backlog: a drop at p0 may be counted in a later
    /// window; the series' exact total is [`SeriesRecord::lost`].
    pub lost: u64,
    /// The same over the same span just before the request (no move): the
    /// steady loss at this rate, to compare `lost` with.
    pub lost_before: u64,
    /// Frames the node's p0 refused over the window after the request
    /// (its ring full: the generator's `eth0` tx drops), before any
    /// forwarder saw them; part of `lost`.
    pub lost_to_node: u64,
    /// Frames dropped at the node's ingress over that window (`rx_dropped`
    /// of p0: the XDP program's drops, a full AF_XDP ring of the slow
    /// path); part of `lost`.
    pub lost_node_in: u64,
    /// Frames that arrived after a later frame of their flow, same window.
    pub reordered: u64,
    /// The switch-over, traced from the fast path's counters
    /// (`switch.rs`), its fields flat in the record.
    #[serde(flatten)]
    pub switch: Switch,
    /// From the move request to the API's answer (the select entry
    /// switched), ms.
    pub api_ms: f64,
}

/// Counts at one instant.
struct Snap {
    at: Instant,
    sink: SinkCounts,
    sent: u64,
    to_node: u64,
    node_in: u64,
}

fn snap(s: &Setup<'_>, g: &Generator, flows: u32) -> Result<Snap> {
    Ok(Snap {
        sink: s.sink.counts(flows)?,
        sent: g.live_sent()?.unwrap_or(0),
        to_node: counter(&s.lab.ns("gen"), "eth0", "tx_dropped")?,
        node_in: counter(&s.lab.ns("node"), "p0", "rx_dropped")?,
        at: Instant::now(),
    })
}

/// Move VR `bench` to `path` by the API; the time to its answer, ms.
fn move_vr(api: &Client, path: &str) -> Result<f64> {
    let t = Instant::now();
    let a = api
        .call(
            Method::POST,
            "/v1/vrs/bench/move",
            Some(&json!({ "path": path })),
        )
        .with_context(|| format!("move the VR to {path}"))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let r: serde_json::Value = a.decode()?;
    if !r["moved"].to_string().contains("bench") {
        return Err(crate::BenchError::Failed(format!(
            "move to {path}: the answer names no moved VR: {r}"
        )));
    }
    Ok(ms)
}

/// One series of moves at one rate, all added: exact, as counted once
/// the generator has stopped and the paths have drained.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesRecord {
    /// The generator's target rate, frames/s (None: its maximum).
    pub rate_pps: Option<u64>,
    /// Moves made.
    pub moves: usize,
    /// Frames the live generator sent (XDP_TX) over the series.
    pub sent: u64,
    /// Frames the sink received.
    pub received: u64,
    /// Sent but never received (anywhere on the way: p0's ring, the
    /// forwarder, the sink's ring).
    pub lost: u64,
    /// Frames that arrived after a later frame of their flow.
    pub reordered: u64,
}

/// What the experiment measured.
pub(super) struct Migration {
    pub moves: Vec<MoveRecord>,
    pub series: Vec<SeriesRecord>,
}

/// Run the experiment: a daemon with the fast path on and the VR slow,
/// then `--moves` moves at each rate of `--migrate-rates`.
pub(super) fn migrate(args: &FastpathArgs, s: &Setup<'_>) -> Result<Migration> {
    let fa = args.forward_args(GeneratorKind::Live);
    let table = Table::load("2")?;
    p0_gro(s.lab, GeneratorKind::Live)?;
    let (daemon, api) = setup_node_on(&fa, s.lab, "fast", Some("slow"), &table, s.dir)?
        .context("the migrate experiment's daemon")?;
    let generator = Generator::new(
        GeneratorKind::Live,
        s.dir,
        args.frame_bytes,
        false,
        LiveOptions {
            flows: args.flows,
            repeat: args.live_repeat,
            fwd_cpu: args.fwd_cpu,
            batch: args.live_batch,
        },
        crate::forward::Family::Ipv4,
    )?;
    let mut fast = false;
    let mut out = Migration {
        moves: Vec::new(),
        series: Vec::new(),
    };
    for &rate in &args.migrate_rates {
        let start = snap(s, &generator, args.flows)?;
        let at = Series {
            generator: &generator,
            api: &api,
            rate,
        };
        out.moves.extend(series(args, s, &at, &mut fast)?);
        // Drained: what is still in a ring arrives (or is lost) by now.
        std::thread::sleep(Duration::from_millis(500));
        let end = snap(s, &generator, args.flows)?;
        let got = end.sink.since(&start.sink);
        let sent = end.sent - start.sent;
        let r = SeriesRecord {
            rate_pps: (rate > 0).then_some(rate),
            moves: args.moves,
            sent,
            received: got.received,
            lost: sent.saturating_sub(got.received),
            reordered: got.reordered,
        };
        eprintln!(
            "series at {}: sent {} received {} lost {} reordered {}",
            r.rate_pps.map_or("max".into(), |p| format!("{p} pps")),
            r.sent,
            r.received,
            r.lost,
            r.reordered
        );
        out.series.push(r);
    }
    daemon.stop()?;
    Ok(out)
}

/// What a series runs with.
struct Series<'a> {
    generator: &'a Generator,
    api: &'a Client,
    /// Frames/s (0: the maximum).
    rate: u64,
}

/// `--moves` moves at one rate; `fast` is where the VR is, kept up to
/// date.
fn series(
    args: &FastpathArgs,
    s: &Setup<'_>,
    at: &Series<'_>,
    fast: &mut bool,
) -> Result<Vec<MoveRecord>> {
    let (generator, rate) = (at.generator, at.rate);
    let pps = (rate > 0).then_some(rate as f64);
    let mut run = generator.start(s.lab, pps, args.frame_bytes, args.gen_cpu)?;
    std::thread::sleep(Duration::from_secs_f64(args.warmup));
    let watch = Watch::new(s.lab)?;
    let settle = Duration::from_secs_f64(args.move_settle);
    let mut out = Vec::new();
    for index in 0..args.moves {
        run.check_running()?;
        let a = snap(s, generator, args.flows)?;
        std::thread::sleep(settle);
        let b = snap(s, generator, args.flows)?;
        let to = if *fast { "slow" } else { "fast" };
        let (api_ms, sw) = watch.time(!*fast, settle, || move_vr(at.api, to))?;
        *fast = !*fast;
        std::thread::sleep(settle.saturating_sub(b.at.elapsed()));
        let c = snap(s, generator, args.flows)?;
        let secs = (c.at - b.at).as_secs_f64();
        let moved = c.sink.since(&b.sink);
        let r = MoveRecord {
            direction: if *fast { "to_fast" } else { "to_slow" },
            index,
            rate_pps: (rate > 0).then_some(rate),
            offered_pps: (c.sent - b.sent) as f64 / secs,
            forwarded_pps: moved.received as f64 / secs,
            lost: moved.lost,
            lost_before: b.sink.since(&a.sink).lost,
            lost_to_node: c.to_node.saturating_sub(b.to_node),
            lost_node_in: c.node_in.saturating_sub(b.node_in),
            reordered: moved.reordered,
            switch: sw,
            api_ms,
        };
        eprintln!(
            "move {index} {}: offered {:.0} forwarded {:.0} pps, lost {} (before {}, to node {}, node in {}), reordered {}, first frame {:?} ms (first at the table {:?}, longest gap {:.1}, last on the old path {:?}, reads {:.1} apart at most, {} on the old path after the answer), answer {:.1} ms",
            r.direction,
            r.offered_pps,
            r.forwarded_pps,
            r.lost,
            r.lost_before,
            r.lost_to_node,
            r.lost_node_in,
            r.reordered,
            r.switch.switch_ms,
            r.switch.first_rx_ms,
            r.switch.rx_gap_ms,
            r.switch.last_old_ms,
            r.switch.read_gap_ms,
            r.switch.old_after_answer,
            r.api_ms
        );
        out.push(r);
    }
    run.stop(s.lab, args.frame_bytes)?;
    Ok(out)
}
