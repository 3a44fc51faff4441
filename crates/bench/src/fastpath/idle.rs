//! The idle experiment: what a fast VR costs without traffic, as the CPU
//! time (utime + stime, /proc) of the daemon and every process under it
//! (its VR processes) over a span.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use vrhost_lab::Lab;

use super::FastpathArgs;
use crate::forward::Table;
use crate::forward::generator::GeneratorKind;
use crate::forward::node::setup_node_on;
use crate::{Context, Result};

/// The idle experiment's record.
#[derive(Debug, Clone, Serialize)]
pub struct IdleRecord {
    /// CPU of the daemon and its VR processes, percent of one core.
    pub cpu_pct: f64,
    /// Processes counted (the daemon and those under it).
    pub processes: usize,
    /// The span counted, seconds.
    pub seconds: f64,
}

/// (pid, parent pid, utime + stime in ticks) of every process.
fn processes() -> Vec<(u32, u32, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command (which may hold spaces), from field 3.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ppid = f.get(1)?.parse().ok()?;
        let utime: u64 = f.get(11)?.parse().ok()?;
        let stime: u64 = f.get(12)?.parse().ok()?;
        Some((pid, ppid, utime + stime))
    })
    .collect()
}

/// CPU ticks of `root` and the processes under it, and how many.
fn tree_ticks(root: u32) -> (u64, usize) {
    let all = processes();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(all.iter().filter(|x| x.1 == p).map(|x| x.0));
        i += 1;
    }
    let ticks = all
        .iter()
        .filter(|x| tree.contains(&x.0))
        .map(|x| x.2)
        .sum();
    (ticks, tree.len())
}

/// Run the experiment: a daemon with one VR on the fast path, no traffic.
pub(super) fn idle(args: &FastpathArgs, lab: &Lab, dir: &Path) -> Result<IdleRecord> {
    let fa = args.forward_args(GeneratorKind::Live);
    let table = Table::load("2")?;
    let (daemon, _api) = setup_node_on(&fa, lab, "fast", None, &table, dir)?
        .context("the idle experiment's daemon")?;
    // Past its start.
    std::thread::sleep(Duration::from_secs(1));
    let (a, _) = tree_ticks(daemon.pid());
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(args.idle_seconds));
    let (b, n) = tree_ticks(daemon.pid());
    let secs = t.elapsed().as_secs_f64();
    // USER_HZ is 100 on Linux: a tick is 10 ms.
    let cpu_pct = (b.saturating_sub(a)) as f64 * 0.01 / secs * 100.0;
    eprintln!("idle: {n} processes, {cpu_pct:.2}% of a core over {secs:.1} s");
    daemon.stop()?;
    Ok(IdleRecord {
        cpu_pct,
        processes: n,
        seconds: secs,
    })
}
