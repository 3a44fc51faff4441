//! `vrhost bench soak`: a real `vrhost daemon` forwarding through several
//! router VRs for `--minutes`, while the benchmark kills (SIGKILL),
//! restarts (API), removes and adds its "chaos" VRs at random. The
//! "honest" VRs beside them are never touched.
//!
//! Every second it asks the daemon to check the slot accounting invariant
//! (every slot of every VR free exactly once or held by one instance:
//! `/v1/health`) and reads the daemon's resident memory. Each kill is timed
//! from the signal to the VR's first frame out after its restart (the
//! daemon's CLOCK_MONOTONIC stamp, comparable with ours on one machine).
//! The generator is paced below the VRs' capacity and stops by itself at
//! the end, so every frame classified to an honest VR that did not come
//! out of it is a lost frame.

use std::time::{Duration, Instant};

use crate::{Context, Result, bail};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::{Value, json};
use vrhost_client::Method;

use crate::control::{config, lost, start, stats, u, vr, vr_name};
use crate::machine::Machine;
use crate::report::{mib, percentile};
use vrhost_client::Client;

/// Options of `vrhost bench soak`.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// How long to run.
    #[arg(long, default_value_t = 1.0)]
    pub minutes: f64,
    /// VRs that are never touched (their losses are reported).
    #[arg(long, default_value_t = 3)]
    pub honest: usize,
    /// VRs that are killed, restarted, removed and added.
    #[arg(long, default_value_t = 2)]
    pub chaos: usize,
    /// Offered load, frames/s over all VRs (below their capacity).
    #[arg(long, default_value_t = 100_000)]
    pub pps: u64,
    /// Mean time between two actions, seconds.
    #[arg(long, default_value_t = 1.0)]
    pub every: f64,
    /// Core of the host worker; the VRs get the other core.
    #[arg(long, default_value_t = 1)]
    pub cpu: usize,
    /// Slots in each VR's pool.
    #[arg(long, default_value_t = 2048)]
    pub slots: u32,
    /// Seed of the random actions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where the report goes: `--json`, `--out FILE`.
    #[command(flatten)]
    pub output: crate::report::Output,
}

/// The summary.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// "soak".
    pub bench: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// Minutes run.
    pub minutes: f64,
    /// Offered load, frames/s.
    pub pps: u64,
    /// Honest and chaos VRs.
    pub honest_vrs: usize,
    /// Chaos VRs.
    pub chaos_vrs: usize,
    /// Invariant checks made (one per second).
    pub checks: u64,
    /// Broken slot accounting invariants seen.
    pub invariant_violations: u64,
    /// SIGKILLs sent.
    pub kills: u64,
    /// Restarts through the API.
    pub api_restarts: u64,
    /// VRs removed.
    pub removes: u64,
    /// VRs added.
    pub adds: u64,
    /// Kills after which the VR did not forward again within 5 s.
    pub kills_not_recovered: u64,
    /// From a SIGKILL to the VR's first frame out after its restart, ms.
    pub restart_ms_p50: f64,
    /// 99th percentile of the same.
    pub restart_ms_p99: f64,
    /// Longest.
    pub restart_ms_max: f64,
    /// Every kill's restart time, ms, in order.
    pub restart_ms: Vec<f64>,
    /// Frames classified to honest VRs that did not come out.
    pub honest_lost: u64,
    /// Frames the honest VRs forwarded.
    pub honest_forwarded: u64,
    /// Frames the chaos VRs forwarded.
    pub chaos_forwarded: u64,
    /// The daemon's resident memory after the first second.
    pub rss_start_bytes: u64,
    /// At the end.
    pub rss_end_bytes: u64,
    /// The most seen.
    pub rss_max_bytes: u64,
    /// At the end of each whole minute.
    pub rss_minute_bytes: Vec<u64>,
    /// The daemon still answered at the end.
    pub daemon_alive: bool,
}

fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The API definition of chaos VR `i` (the same as in the config file).
fn chaos_spec(i: usize, slots: u32, cpu: usize) -> Value {
    json!({
        "name": vr_name(i), "slots": slots, "cpu": cpu,
        "vnics": [
            { "port": "gen", "mac": format!("02:00:00:{i:02x}:00:01"), "addrs": [format!("10.{}.0.1/24", i + 1)] },
            { "port": "out", "mac": format!("02:00:00:{i:02x}:01:01"), "addrs": [format!("10.9.{i}.1/24")] }
        ],
        "router": {
            "neighbours": [{ "ip": format!("10.9.{i}.2"), "mac": format!("02:00:00:00:99:{i:02x}") }],
            "routes": [{ "prefix": format!("10.{}.0.0/16", i + 1), "via": format!("10.9.{i}.2") }]
        },
        "rules": [{ "port": "gen", "dst": format!("10.{}.0.0/16", i + 1) }]
    })
}

/// Kill VR `name` (SIGKILL to its first instance) and wait until it
/// forwards again; the time from the signal to its first frame out (the
/// daemon's CLOCK_MONOTONIC stamp), if it did within 5 s.
pub(super) fn kill_and_time(client: &Client, name: &str) -> Result<Option<f64>> {
    let s = stats(client)?;
    let v = vr(&s, name);
    let Some(pid) = v["instances"][0]["pid"].as_u64() else {
        return Ok(None);
    };
    if v["state"] != "running" {
        return Ok(None);
    }
    let restarts = u(&v["stats"]["restarts"]);
    let t0 = mono_ns();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).context("pid 0")?,
        rustix::process::Signal::KILL,
    )
    .with_context(|| format!("kill {name} (pid {pid})"))?;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(2));
        let s = stats(client)?;
        let st = &vr(&s, name)["stats"];
        let back = u(&st["last_recovered_mono_ns"]);
        if u(&st["restarts"]) > restarts && back > t0 {
            return Ok(Some((back - t0) as f64 / 1e6));
        }
    }
    Ok(None)
}

/// What the chaos VRs went through.
#[derive(Debug, Default)]
struct Chaos {
    kills: u64,
    api_restarts: u64,
    removes: u64,
    adds: u64,
    not_recovered: u64,
    /// Every kill's restart time, ms, in order.
    restart_ms: Vec<f64>,
}

/// The checks made every second: slot accounting and the daemon's memory.
#[derive(Debug, Default)]
struct Checks {
    checks: u64,
    broken: u64,
    rss_start: u64,
    rss_max: u64,
    rss_minutes: Vec<u64>,
}

impl Checks {
    /// One check of the slot accounting invariant; returns the daemon's
    /// health.
    fn invariant(&mut self, client: &Client) -> Result<Value> {
        let h: Value = client.get("/v1/health")?.decode()?;
        self.checks += 1;
        self.broken += h["slot_accounting"].as_array().map_or(0, Vec::len) as u64;
        Ok(h)
    }

    /// The check made every second: the invariant, then the daemon's
    /// resident memory (`pid`).
    fn every_second(&mut self, client: &Client, pid: u32) -> Result<()> {
        let broken = self.broken;
        let h = self.invariant(client)?;
        if self.broken > broken {
            eprintln!("soak: slot accounting broken: {}", h["slot_accounting"]);
        }
        let rss = rss_bytes(pid);
        if self.rss_start == 0 {
            self.rss_start = rss;
        }
        self.rss_max = self.rss_max.max(rss);
        if self.checks.is_multiple_of(60) {
            self.rss_minutes.push(rss);
        }
        Ok(())
    }
}

impl Chaos {
    /// One random action on chaos VR `c` (`present[c]`: whether it is
    /// there): add it if it was removed, else kill (60 %), restart through
    /// the API (20 %) or remove it (20 %).
    fn act(
        &mut self,
        args: &SoakArgs,
        client: &Client,
        rng: &mut SmallRng,
        present: &mut [bool],
        vr_cpu: usize,
    ) -> Result<()> {
        let c = rng.random_range(0..args.chaos);
        let name = vr_name(args.honest + c);
        let roll = rng.random::<f64>();
        if !present[c] {
            client.call(
                Method::POST,
                "/v1/vrs",
                Some(&chaos_spec(args.honest + c, args.slots, vr_cpu)),
            )?;
            present[c] = true;
            self.adds += 1;
        } else if roll < 0.6 {
            self.kills += 1;
            match kill_and_time(client, &name)? {
                Some(ms) => self.restart_ms.push(ms),
                None => self.not_recovered += 1,
            }
        } else if roll < 0.8 {
            client.call(
                Method::POST,
                &format!("/v1/vrs/{name}/restart"),
                None::<&()>,
            )?;
            self.api_restarts += 1;
        } else {
            client.call(Method::DELETE, &format!("/v1/vrs/{name}"), None::<&()>)?;
            present[c] = false;
            self.removes += 1;
        }
        Ok(())
    }
}

/// Stats once the generator has sent its `limit` frames and the honest VRs
/// have handed back what they hold (or after 10 s).
fn settled(args: &SoakArgs, client: &Client, limit: u64) -> Result<Value> {
    let t = Instant::now();
    let mut s = stats(client)?;
    while t.elapsed() < Duration::from_secs(10) {
        let settled = u(&s["host"]["rx_packets"]) >= limit
            && (0..args.honest).all(|i| {
                let st = &vr(&s, &vr_name(i))["stats"];
                u(&st["rx_packets"]) == u(&st["tx_packets"]) + u(&st["vr_dropped"])
            });
        if settled {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        s = stats(client)?;
    }
    Ok(s)
}

/// Run `vrhost bench soak`.
///
/// # Errors
/// If the daemon cannot be started or stops answering.
pub fn run(args: &SoakArgs) -> Result<()> {
    if args.honest + args.chaos == 0 || args.honest + args.chaos > 200 {
        bail!("--honest + --chaos must be 1..=200");
    }
    let dir = std::env::temp_dir().join(format!("vrhost-bench-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let total = args.honest + args.chaos;
    let seconds = (args.minutes * 60.0).max(1.0);
    let limit = (args.pps as f64 * seconds) as u64;
    let r = start(
        &dir,
        "soak",
        &config(total, args.cpu, args.slots, Some(args.pps), limit),
    )?;
    let vr_cpu = if args.cpu == 0 { 1 } else { 0 };
    let mut rng = SmallRng::seed_from_u64(args.seed);
    let mut present = vec![true; args.chaos];
    let mut chaos = Chaos::default();
    let mut checks = Checks::default();
    let started = Instant::now();
    let mut next_check = started + Duration::from_secs(1);
    let mut next_action = started + Duration::from_secs_f64(args.every);
    let end = started + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        let now = Instant::now();
        if now >= next_check {
            next_check += Duration::from_secs(1);
            checks.every_second(&r.client, r.daemon.pid())?;
        }
        if now >= next_action && args.chaos > 0 {
            // Exponential gaps: actions come at random, sometimes close.
            let gap = -args.every * (1.0f64 - rng.random::<f64>()).ln();
            next_action = now + Duration::from_secs_f64(gap.min(5.0 * args.every));
            chaos.act(args, &r.client, &mut rng, &mut present, vr_cpu)?;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the generator finish and the VRs hand back what they hold.
    let s = settled(args, &r.client, limit)?;
    let h = checks.invariant(&r.client)?;
    let rss_end = rss_bytes(r.daemon.pid());
    let honest_lost = (0..args.honest).map(|i| lost(&s, &vr_name(i))).sum();
    let fwd = |range: std::ops::Range<usize>| -> u64 {
        range
            .map(|i| u(&vr(&s, &vr_name(i))["stats"]["tx_packets"]))
            .sum()
    };
    let mut sorted = chaos.restart_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let report = Report {
        bench: "soak",
        machine: Machine::this(),
        minutes: seconds / 60.0,
        pps: args.pps,
        honest_vrs: args.honest,
        chaos_vrs: args.chaos,
        checks: checks.checks,
        invariant_violations: checks.broken,
        kills: chaos.kills,
        api_restarts: chaos.api_restarts,
        removes: chaos.removes,
        adds: chaos.adds,
        kills_not_recovered: chaos.not_recovered,
        restart_ms_p50: percentile(&sorted, 0.5).unwrap_or(0.0),
        restart_ms_p99: percentile(&sorted, 0.99).unwrap_or(0.0),
        restart_ms_max: sorted.last().copied().unwrap_or(0.0),
        restart_ms: chaos.restart_ms,
        honest_lost,
        honest_forwarded: fwd(0..args.honest),
        chaos_forwarded: fwd(args.honest..total),
        rss_start_bytes: checks.rss_start,
        rss_end_bytes: rss_end,
        rss_max_bytes: checks.rss_max.max(rss_end),
        rss_minute_bytes: checks.rss_minutes,
        daemon_alive: h["status"].is_string(),
    };
    r.daemon.stop()?;
    let _ = std::fs::remove_dir_all(&dir);
    crate::report::emit(&report, &args.output, print_table)
}

fn print_table(report: &Report) {
    let m = &report.machine;
    println!(
        "soak: {:.1} min, {} pps over {} honest + {} chaos VRs ({}, {} cores)",
        report.minutes, report.pps, report.honest_vrs, report.chaos_vrs, m.cpu, m.cores
    );
    println!(
        "{:<28} {:>12}\n{:<28} {:>12}\n{:<28} {:>12}\n{:<28} {:>12}\n{:<28} {:>12}",
        "invariant checks",
        report.checks,
        "invariant violations",
        report.invariant_violations,
        "kills / not recovered",
        format!("{} / {}", report.kills, report.kills_not_recovered),
        "API restarts / rm / add",
        format!(
            "{} / {} / {}",
            report.api_restarts, report.removes, report.adds
        ),
        "honest lost / forwarded",
        format!("{} / {}", report.honest_lost, report.honest_forwarded),
    );
    println!(
        "{:<28} {:>12}\n{:<28} {:>12}",
        "restart ms p50 / p99 / max",
        format!(
            "{:.1} / {:.1} / {:.1}",
            report.restart_ms_p50, report.restart_ms_p99, report.restart_ms_max
        ),
        "daemon RSS start / end / max",
        format!(
            "{:.1} / {:.1} / {:.1} MiB",
            mib(report.rss_start_bytes),
            mib(report.rss_end_bytes),
            mib(report.rss_max_bytes)
        ),
    );
    let per_minute: Vec<String> = report
        .rss_minute_bytes
        .iter()
        .map(|&b| format!("{:.1}", mib(b)))
        .collect();
    println!(
        "{:<28} {}",
        "daemon RSS each minute, MiB",
        per_minute.join(" ")
    );
}
