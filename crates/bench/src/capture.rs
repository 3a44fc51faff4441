//! `vrhost bench capture`: what a full-rate `vrhost capture` of one VR costs
//! the VR beside it.
//!
//! A real `vrhost daemon` forwards in memory: an unpaced `mem` generator
//! port sends UDP frames to two router VRs, t0 and t1, on one core (the
//! host worker on the other), which route them to a `null` port. Phases of
//! `--seconds` alternate, in one invocation, between no capture and a
//! `vrhost capture t1` (a real client process, writing to /dev/null) of
//! every frame, or with a filter that matches none of them (every frame
//! copied and filtered in the daemon, none written). The cost of a capture
//! phase is how much t0's forwarding rate fell against the mean of the
//! no-capture phases on either side of it. The CPU time of each party
//! (worker, VRs, the daemon's capture thread and other threads, the client)
//! says where the time went.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::{Context, Result, bail};
use serde::Serialize;
use serde_json::Value;

use crate::control::{config, start, stats, u, vr, vr_name};
use crate::machine::Machine;

/// Options of `vrhost bench capture`.
#[derive(Debug, Clone, clap::Args)]
pub struct CaptureArgs {
    /// Seconds per phase (measured after half a second of settling).
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Core of the host worker; both VRs get the other core.
    #[arg(long, default_value_t = 1)]
    pub cpu: usize,
    /// Slots in each VR's pool.
    #[arg(long, default_value_t = 2048)]
    pub slots: u32,
    /// Where the report goes: `--json`, `--out FILE`.
    #[command(flatten)]
    pub output: crate::report::Output,
}

/// What a phase captures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Capture {
    /// No capture.
    None,
    /// Every frame of t1.
    Every,
    /// t1 with a filter (`tcp`) that matches none of its frames.
    FilterNone,
}

impl Capture {
    fn label(self) -> &'static str {
        match self {
            Self::None => "no capture",
            Self::Every => "capture t1, every frame",
            Self::FilterNone => "capture t1, filter matching none",
        }
    }

    fn args(self) -> Option<&'static [&'static str]> {
        match self {
            Self::None => None,
            Self::Every => Some(&["capture", "t1", "-w", "/dev/null"]),
            Self::FilterNone => Some(&["capture", "t1", "--filter", "tcp", "-w", "/dev/null"]),
        }
    }
}

/// The phases, in order: each capture between two without.
const PHASES: [Capture; 7] = [
    Capture::None,
    Capture::Every,
    Capture::None,
    Capture::FilterNone,
    Capture::None,
    Capture::Every,
    Capture::None,
];

/// One phase.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseRecord {
    /// What it captured.
    pub capture: Capture,
    /// Frames t0 forwarded per second.
    pub t0_fps: f64,
    /// Frames t1 forwarded per second.
    pub t1_fps: f64,
    /// Frames of t1 the capture could not keep (no free buffer).
    pub t1_capture_dropped: u64,
    /// Frames the capture client wrote per second, over its whole life
    /// (from its own count at its end: its summary line).
    pub captured_fps: Option<f64>,
    /// Share of one core each party used: the host worker, VR t0, VR t1,
    /// the daemon's capture thread, its other threads (the API's), the
    /// capture client.
    pub cpu: CpuShares,
    /// For a capture phase: how much t0's rate fell against the mean of
    /// the phases on either side, percent.
    pub t0_cost_pct: Option<f64>,
}

/// Shares of one core, in [0, 1].
#[derive(Debug, Clone, Default, Serialize)]
pub struct CpuShares {
    /// The host worker.
    pub worker: f64,
    /// VR t0.
    pub t0: f64,
    /// VR t1.
    pub t1: f64,
    /// The daemon's capture thread.
    pub capture_thread: f64,
    /// The daemon's other threads but the worker (API, control).
    pub daemon_other: f64,
    /// The `vrhost capture` client.
    pub client: f64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// "capture".
    pub bench: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// Seconds measured per phase.
    pub seconds: f64,
    /// The phases, in order.
    pub phases: Vec<PhaseRecord>,
    /// The largest cost of a capture phase to t0, percent.
    pub worst_cost_pct: f64,
}

/// CPU time of one task from its `schedstat`, ns (0 if it is gone).
fn task_ns(schedstat: &Path) -> u64 {
    std::fs::read_to_string(schedstat)
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU time of the daemon's threads, ns: (capture threads, the others but
/// the worker).
fn daemon_threads_ns(pid: u32) -> (u64, u64) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, 0);
    };
    let (mut capture, mut other) = (0, 0);
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let ns = task_ns(&t.path().join("schedstat"));
        if comm.starts_with("vrhost-capture") {
            capture += ns;
        } else if !comm.starts_with("vrhost-worker") {
            other += ns;
        }
    }
    (capture, other)
}

/// A VR's first instance's CPU seconds, from the stats.
fn vr_cpu(s: &Value, name: &str) -> f64 {
    vr(s, name)["instances"][0]["cpu_seconds"]
        .as_f64()
        .unwrap_or(0.0)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// The capture client, killed when dropped.
struct Client {
    child: Child,
    started: Instant,
}

impl Client {
    /// End it as Ctrl-C does and return the frames it says it wrote per
    /// second of its life.
    fn finish(mut self) -> Result<f64> {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err)?;
        }
        let life = self.started.elapsed().as_secs_f64();
        let st = self.child.wait()?;
        let frames = err
            .lines()
            .find_map(|l| l.strip_suffix(" frames captured")?.parse::<u64>().ok())
            .with_context(|| format!("vrhost capture ({st}) said no count: {err}"))?;
        Ok(frames as f64 / life)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run `vrhost bench capture`.
///
/// # Errors
/// The daemon or a capture client failed to start, or the daemon stopped
/// answering.
pub fn run(args: &CaptureArgs) -> Result<()> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        bail!("--seconds {}: must be above 0", args.seconds);
    }
    let dir = std::env::temp_dir().join(format!("vrhost-bench-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = measure(args, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    crate::report::emit(&result?, &args.output, print_table)
}

fn measure(args: &CaptureArgs, dir: &Path) -> Result<Report> {
    let r = start(
        dir,
        "capture",
        &config(2, args.cpu, args.slots, None, i64::MAX as u64),
    )?;
    let sock = dir.join("capture.sock");
    let exe = std::env::current_exe()?;
    let pid = r.daemon.pid();
    // Let the generator and the VRs reach their steady rate.
    std::thread::sleep(Duration::from_secs(1));
    let mut phases = Vec::new();
    for capture in PHASES {
        let mut client = match capture.args() {
            Some(a) => Some(Client {
                child: std::process::Command::new(&exe)
                    .args(a)
                    .arg("--api")
                    .arg(&sock)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()?,
                started: Instant::now(),
            }),
            None => None,
        };
        std::thread::sleep(Duration::from_millis(500));
        if let Some(c) = &mut client
            && let Some(st) = c.child.try_wait()?
        {
            bail!("vrhost capture exited at once ({st})");
        }
        let client_stat = client
            .as_ref()
            .map(|c| PathBuf::from(format!("/proc/{}/schedstat", c.child.id())));
        let client0 = client_stat.as_deref().map_or(0, task_ns);
        let (cap0, other0) = daemon_threads_ns(pid);
        let s0 = stats(&r.client)?;
        std::thread::sleep(Duration::from_secs_f64(args.seconds));
        let s1 = stats(&r.client)?;
        let (cap1, other1) = daemon_threads_ns(pid);
        let client1 = client_stat.as_deref().map_or(0, task_ns);
        let captured_fps = client.map(Client::finish).transpose()?;
        let dt = f(&s1["time_s"]) - f(&s0["time_s"]);
        if dt <= 0.0 {
            bail!("the daemon's clock did not advance");
        }
        let tx = |name: &str| {
            (u(&vr(&s1, name)["stats"]["tx_packets"]) - u(&vr(&s0, name)["stats"]["tx_packets"]))
                as f64
                / dt
        };
        let share = |ns: u64| ns as f64 / 1e9 / dt;
        let (t0, t1) = (vr_name(0), vr_name(1));
        phases.push(PhaseRecord {
            capture,
            t0_fps: tx(&t0),
            t1_fps: tx(&t1),
            t1_capture_dropped: u(&vr(&s1, &t1)["stats"]["capture_dropped"])
                - u(&vr(&s0, &t1)["stats"]["capture_dropped"]),
            captured_fps,
            cpu: CpuShares {
                worker: (f(&s1["host"]["worker_cpu_seconds"])
                    - f(&s0["host"]["worker_cpu_seconds"]))
                    / dt,
                t0: (vr_cpu(&s1, &t0) - vr_cpu(&s0, &t0)) / dt,
                t1: (vr_cpu(&s1, &t1) - vr_cpu(&s0, &t1)) / dt,
                capture_thread: share(cap1.saturating_sub(cap0)),
                daemon_other: share(other1.saturating_sub(other0)),
                client: share(client1.saturating_sub(client0)),
            },
            t0_cost_pct: None,
        });
    }
    r.daemon.stop()?;
    let rates: Vec<f64> = phases.iter().map(|p| p.t0_fps).collect();
    let mut worst = f64::MIN;
    for (i, p) in phases.iter_mut().enumerate() {
        if p.capture == Capture::None {
            continue;
        }
        // PHASES puts a phase without a capture on either side of each one.
        let without = (rates[i - 1] + rates[i + 1]) / 2.0;
        let cost = if without > 0.0 {
            100.0 * (1.0 - p.t0_fps / without)
        } else {
            0.0
        };
        worst = worst.max(cost);
        p.t0_cost_pct = Some(cost);
    }
    Ok(Report {
        bench: "capture",
        machine: Machine::this(),
        seconds: args.seconds,
        phases,
        worst_cost_pct: worst,
    })
}

fn print_table(r: &Report) {
    println!(
        "vrhost bench capture: 2 router VRs on one core, unpaced generator, {} s phases",
        r.seconds
    );
    println!(
        "{:<33} {:>11} {:>8} {:>11} {:>9} {:>12} {:>7} {:>5} {:>5} {:>8} {:>7} {:>7}",
        "phase",
        "t0 fps",
        "t0 cost",
        "t1 fps",
        "kept fps",
        "t1 cap drop",
        "worker",
        "t0",
        "t1",
        "cap thr",
        "daemon",
        "client"
    );
    let pct = |x: f64| format!("{:.0}%", 100.0 * x);
    for p in &r.phases {
        println!(
            "{:<33} {:>11.0} {:>8} {:>11.0} {:>9} {:>12} {:>7} {:>5} {:>5} {:>8} {:>7} {:>7}",
            p.capture.label(),
            p.t0_fps,
            p.t0_cost_pct.map_or("-".into(), |c| format!("{c:.1}%")),
            p.t1_fps,
            p.captured_fps.map_or("-".into(), |c| format!("{c:.0}")),
            p.t1_capture_dropped,
            pct(p.cpu.worker),
            pct(p.cpu.t0),
            pct(p.cpu.t1),
            pct(p.cpu.capture_thread),
            pct(p.cpu.daemon_other),
            pct(p.cpu.client)
        );
    }
    println!(
        "worst cost of a capture to t0: {:.1}% of its rate",
        r.worst_cost_pct
    );
}
