//! The idle experiment: what a fast VR costs without traffic. One daemon
//! (the forwarding lab's node, af_xdp ports) is measured three times over
//! the same span: with its VR on the fast path, the VR moved to the slow
//! path, and the VR removed (the daemon alone). The fast VR's cost is the
//! first minus the last; each figure is the CPU time of the daemon's
//! threads and of every process under it (its VR processes), from
//! `/proc/PID/task/TID/schedstat` (nanoseconds, not 10 ms ticks), and
//! their wakeups (context switches, from `status`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;
use vrhost_client::{Client, Method};
use vrhost_lab::Lab;

use super::FastpathArgs;
use crate::forward::Table;
use crate::forward::generator::GeneratorKind;
use crate::forward::node::setup_node_on;
use crate::sched::{tasks, tree};
use crate::{Context, Result};

/// The idle experiment's record.
#[derive(Debug, Clone, Serialize)]
pub struct IdleRecord {
    /// The fast VR's own cost, percent of one core: the daemon and its
    /// processes with the idle fast VR ([`Self::cpu_pct_raw`]) minus the
    /// same daemon without the VR ([`Self::none_cpu_pct`]).
    pub cpu_pct: f64,
    /// The daemon and its processes with the idle fast VR.
    pub cpu_pct_raw: f64,
    /// The same with the VR moved to the slow path.
    pub slow_cpu_pct: f64,
    /// The same daemon after the VR was removed.
    pub none_cpu_pct: f64,
    /// Wakeups (context switches) a second of the daemon's threads and its
    /// processes with the idle fast VR.
    pub wakeups_per_s: f64,
    /// The same with the VR on the slow path.
    pub slow_wakeups_per_s: f64,
    /// The same without the VR.
    pub none_wakeups_per_s: f64,
    /// Frames the fast path handed to the fast VR's slow path over its span
    /// (by reason in the daemon's stats): what the VR process had to do.
    /// A span with any is measured again (up to [`QUIET_TRIES`] spans):
    /// 0 unless every try had some.
    pub to_slow: u64,
    /// Spans of the fast VR measured again because frames reached the
    /// VR's slow path meanwhile (the lab's end hosts' IPv6 router
    /// solicitations, a few seconds after the lab is up): a frame wakes
    /// the worker and the VR, which then spin and yield for their
    /// back-off (`[host.poll]`), the cost of traffic, not of an idle VR.
    pub again_fast: u32,
    /// The same for the slow VR's span.
    pub again_slow: u32,
    /// The threads that ran with the fast VR, busiest first:
    /// `comm:us:wakeups` over the span.
    pub threads: String,
    /// Processes counted with the fast VR (the daemon and those under it).
    pub processes: usize,
    /// The span of each measurement, seconds.
    pub seconds: f64,
}

/// One span: (percent of a core, wakeups/s, busiest threads, processes).
type Span = (f64, f64, String, usize);

/// Measure one span of the daemon `root` and the processes under it.
fn span(root: u32, seconds: f64) -> Span {
    let pids = tree(root);
    let a = tasks(&pids);
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let b = tasks(&pids);
    let secs = t.elapsed().as_secs_f64();
    // Per thread, what it did over the span (threads gone or new count
    // what they did while both ends saw them, or nothing).
    let mut per: Vec<(String, u64, u64)> = b
        .iter()
        .filter_map(|x| {
            let y = a.iter().find(|y| (y.pid, y.tid) == (x.pid, x.tid))?;
            Some((
                x.comm.clone(),
                x.cpu_ns.saturating_sub(y.cpu_ns),
                (x.voluntary + x.involuntary).saturating_sub(y.voluntary + y.involuntary),
            ))
        })
        .filter(|x| x.1 > 0 || x.2 > 0)
        .collect();
    per.sort_by_key(|x| std::cmp::Reverse(x.1));
    let ns: u64 = per.iter().map(|x| x.1).sum();
    let wakeups: u64 = per.iter().map(|x| x.2).sum();
    let threads = per
        .iter()
        .map(|(c, ns, w)| format!("{c}:{}:{w}", ns / 1000))
        .collect::<Vec<_>>()
        .join(",");
    let pct = ns as f64 / 1e9 / secs * 100.0;
    (pct, wakeups as f64 / secs, threads, pids.len())
}

/// Run the experiment: a daemon with one VR on the fast path, no traffic;
/// the VR moved to the slow path; the VR removed.
pub(super) fn idle(args: &FastpathArgs, lab: &Lab, dir: &Path) -> Result<IdleRecord> {
    let fa = args.forward_args(GeneratorKind::Live);
    let table = Table::load("2")?;
    let (daemon, api) = setup_node_on(&fa, lab, "fast", None, &table, dir)?
        .context("the idle experiment's daemon")?;
    // Past its start, and past the supervisor's first asks of the VR's
    // router for its neighbours (one a second, the first two after it
    // starts: `vrhost_daemon`'s `control/fast.rs`).
    std::thread::sleep(Duration::from_millis(2500));
    let s = args.idle_seconds;
    let pid = daemon.pid();
    let (fast, handed, fast_retries) = quiet_span(&api, pid, s)?;
    move_to_slow(&api)?;
    std::thread::sleep(Duration::from_millis(500));
    let (slow, _, slow_retries) = quiet_span(&api, pid, s)?;
    api.call::<()>(Method::DELETE, "/v1/vrs/bench", None)
        .context("remove the idle VR")?;
    std::thread::sleep(Duration::from_millis(500));
    let none = span(pid, s);
    eprintln!(
        "idle: fast VR {:.3}% of a core ({:.0} wakeups/s; {}; {handed} frames to its slow path), slow VR {:.3}% ({:.0}/s; {}), none {:.3}% ({:.0}/s; {})",
        fast.0, fast.1, fast.2, slow.0, slow.1, slow.2, none.0, none.1, none.2
    );
    daemon.stop()?;
    Ok(IdleRecord {
        cpu_pct: fast.0 - none.0,
        cpu_pct_raw: fast.0,
        slow_cpu_pct: slow.0,
        none_cpu_pct: none.0,
        wakeups_per_s: fast.1,
        slow_wakeups_per_s: slow.1,
        none_wakeups_per_s: none.1,
        to_slow: handed,
        again_fast: fast_retries,
        again_slow: slow_retries,
        threads: fast.2,
        processes: fast.3,
        seconds: s,
    })
}

/// Most spans measured for one figure of the idle experiment.
const QUIET_TRIES: u32 = 4;

/// A span of the daemon `pid` in which the fast path handed VR `bench`'s
/// slow path no frame (the first of [`QUIET_TRIES`], else the last), the
/// frames it handed over in it, and the spans measured again.
fn quiet_span(api: &Client, pid: u32, seconds: f64) -> Result<(Span, u64, u32)> {
    let mut again = 0;
    loop {
        let before = to_slow(api)?;
        let measured = span(pid, seconds);
        let handed = to_slow(api)?.saturating_sub(before);
        if handed == 0 || again + 1 == QUIET_TRIES {
            return Ok((measured, handed, again));
        }
        again += 1;
    }
}

/// Frames the fast path handed to VR `bench`'s slow path so far.
pub(super) fn to_slow(api: &Client) -> Result<u64> {
    let s: serde_json::Value = api.get("/v1/stats")?.decode()?;
    let vr = s["vrs"]
        .as_array()
        .and_then(|a| a.iter().find(|v| v["name"] == "bench"));
    let by_reason = vr.and_then(|v| v["stats"]["fast"]["to_slow"].as_object());
    Ok(by_reason.map_or(0, |o| o.values().filter_map(|v| v.as_u64()).sum()))
}

fn move_to_slow(api: &Client) -> Result<()> {
    api.call(
        Method::POST,
        "/v1/vrs/bench/move",
        Some(&json!({ "path": "slow" })),
    )
    .context("move the idle VR to the slow path")?;
    Ok(())
}
