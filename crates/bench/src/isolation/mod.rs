//! `vrhost bench isolation`: how well tenants are kept apart, measured.
//!
//! A real `vrhost daemon` forwards in memory, as in `bench control`: `mem`
//! generator ports send UDP frames to router VRs (one classifier rule per
//! VR, by destination prefix), which route them to a `null` port. The host
//! worker is pinned to `--cpu`, every VR to the other core. Three
//! experiments, each with its reference in the same invocation:
//!
//! 1. `hostile`: 3 honest router VRs and a 4th VR on one generator port,
//!    offered `--load` x the capacity of the 3 honest VRs (measured first,
//!    generator unpaced), `--seconds` of frames. Runs:
//!    - `reference`: the 4th VR is an honest router;
//!    - `spinner`: the 4th VR is `vrhost-testvr vr-hostile` doing only its honest
//!      case: it spins on its core at full rate like the hostile VR but
//!      breaks no rule (what the CPU it takes costs the others, alone);
//!    - `hostile`: the 4th VR is `vrhost-testvr vr-hostile` (see `vrhost_testvr::hostile`)
//!      scribbling on its region at full rate, quarantine off
//!      (`quarantine_after = 0`): contained for the whole run;
//!    - `hostile_quota`: the same with `cpu_quota = --hostile-quota` on it
//!      (its cgroup's CPU limit);
//!    - `quarantine`: the hostile VR with the daemon's default quarantine
//!      (`host.quarantine_after`): it is taken out.
//!
//!    Reported: whether the daemon still answers (`/v1/health`) and exits
//!    cleanly (its shutdown checks every VR's slot accounting and fails
//!    otherwise), the honest VRs' lost frames (classified to them and not
//!    forwarded, once the generator has finished and they are drained),
//!    the 4th VR's counters and violations by kind, and the hostile
//!    program's own counters (its report file), including how many
//!    `memfd:vrhost-*` regions it can see (its own only).
//! 2. `overload`: `--overload-vrs` router VRs. The generator unpaced
//!    (`unpaced`), then paced at 0.25, 0.5, 0.75, 1.0 x its forwarded rate
//!    (`sweep`): peak = the highest forwarded rate of these runs; then
//!    paced at 2 x peak (`overload`): forwarded / peak, and where the rest
//!    went (host
//!    ingress drops by reason, VR drops, and frames the generator had due
//!    but the worker never took: a `mem` port is not a NIC and drops
//!    nothing, it falls behind).
//! 3. `fairness`: a quiet tenant paced at `--quiet-load` x the 1-VR
//!    capacity (the overload experiment's unpaced rate, or measured) and a
//!    noisy one, each with its own generator port (`two_ports`): the noisy
//!    port idle (`alone`), then unpaced (`with_noise`): quiet forwarded
//!    rate with noise / alone. Then both tenants on one port (`one_port`):
//!    a `mem` port has one pace for all its frames, so the mix is set by
//!    destination prefixes (1 quiet to k-1 noisy, k such that the port is
//!    offered >= 2 x capacity) and the quiet tenant's offered rate is what
//!    the worker takes from the port / k: it measures how the shared port,
//!    not the host, splits the capacity. Then the same on real ports with
//!    the XDP fast path (`one_port_xdp`, `--fairness-xdp slow|fast|off`):
//!    both tenants with `rate_limit_pps`, which becomes the token bucket of
//!    their select entries, applied before the port's receive ring
//!    (`xdp.rs`; [`fairness_fast`] gives its quiet_ratio alone).
//! 4. `kill`: 3 honest router VRs and a 4th router VR (the victim) on one
//!    generator port, offered `--load` x the capacity of all 4, while the
//!    victim is killed (SIGKILL) `--kills` times, `--kill-gap` seconds
//!    apart (longer than the supervisor's flapping window, so each restart
//!    is a first restart, not a crash loop's back-off). Each kill is timed
//!    from the signal to the victim's first frame out after its restart
//!    (the daemon's CLOCK_MONOTONIC stamp); the honest VRs' lost frames are
//!    counted once the generator has finished and they are drained.
//!
//! Every figure is a rate over a window of `--seconds` after a warm-up, or
//! (hostile) counts once the generator's frames are all through.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{Context, Result, bail};
use serde::Serialize;
use serde_json::Value;

use crate::machine::Machine;
use crate::sched::Snapshot;
use vrhost_client::{Client, Endpoint};
use vrhost_lab::Daemon;
use vrhost_testvr::hostile::Case;

mod hops;
mod hostile;
mod kill;
mod overload;
mod table;
mod xdp;

pub use hops::{FairHops, FairnessRecord};
pub use xdp::{FairFast, FairXdp, fairness_fast, fairness_xdp};

use hostile::hostile_run;
use kill::kill_run;
pub use overload::OverloadSched;
use overload::{fairness, overload, set_mode};
use table::print_table;

/// Options of `vrhost bench isolation`.
#[derive(Debug, Clone, clap::Args)]
pub struct IsolationArgs {
    /// Experiments to run, comma-separated: hostile, kill, overload,
    /// fairness (with its `one_port_xdp` run unless `--fairness-xdp off`),
    /// fairness_xdp (that run alone).
    #[arg(
        long,
        default_value = "hostile,kill,overload,fairness",
        value_delimiter = ','
    )]
    pub experiments: Vec<String>,
    /// Kill: SIGKILLs of the victim VR.
    #[arg(long, default_value_t = 20)]
    pub kills: usize,
    /// Kill: seconds between two kills.
    #[arg(long, default_value_t = 1.5)]
    pub kill_gap: f64,
    /// Seconds per run (hostile: seconds of frames; the others: the
    /// measuring window).
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Hostile: offered load, as a fraction of the 3 honest VRs' capacity
    /// (generator unpaced).
    #[arg(long, default_value_t = 0.25)]
    pub load: f64,
    /// Hostile: the hostile VR's CPU quota in the `hostile_quota` run, in
    /// cores.
    #[arg(long, default_value_t = 0.2)]
    pub hostile_quota: f64,
    /// Overload: router VRs.
    #[arg(long, default_value_t = 1)]
    pub overload_vrs: usize,
    /// Fairness: the quiet tenant's load, as a fraction of the 1-VR
    /// capacity.
    #[arg(long, default_value_t = 0.1)]
    pub quiet_load: f64,
    /// Fairness: the one-port run on real ports with the XDP fast path and
    /// per-tenant buckets (`one_port_xdp`, needs root), its tenants on the
    /// `slow` or `fast` path, or `off`.
    #[arg(long, default_value = "slow")]
    pub fairness_xdp: String,
    /// Fairness: the one-port run's generator: `live` (the XDP
    /// live-frames generator, several times trafgen's rate on veth) or
    /// `trafgen` (netsniff-ng).
    #[arg(long, value_enum, default_value = "live")]
    pub fairness_generator: crate::forward::GeneratorKind,
    /// Fairness: run p0's NAPI (its XDP program) in a kernel thread on
    /// `--cpu`, off the generator's core.
    #[arg(long)]
    pub fairness_napi_thread: bool,
    /// Fairness: the live generator sends the quiet tenant one frame in k
    /// in turn (as before), not from a token bucket at its own pace.
    #[arg(long)]
    pub fairness_mix_turn: bool,
    /// Core of the host worker; the VRs get the other core.
    #[arg(long, default_value_t = 1)]
    pub cpu: usize,
    /// Slots in each VR's pool: enough for a VR's share of 0.25 x capacity
    /// through one 250 Hz kernel tick (4 ms) without its core, the longest
    /// a task that does not yield (the hog) keeps it (`bench control` says
    /// the same of its default). At the AMD VM's 42 Mpps that is 42,000:
    /// 65,536 (the most a VR may have), which lasts 1.7 ms at 0.9 x the
    /// peak. 16,384 (the default before 2026-11-27, sized when the
    /// capacity was 16 Mpps) lasted 0.8 ms at 0.5 x the peak, and the
    /// VM's agent and kernel threads took the VR's core for longer now and
    /// then: the sweep lost frames at ingress below the peak.
    #[arg(long, default_value_t = 65_536)]
    pub slots: u32,
    /// Seed of the hostile VR.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run the VRs unconfined (`[host] confine = false`); by default they
    /// are confined as the daemon does by default.
    #[arg(long)]
    pub unconfined: bool,
    /// Where the report goes: `--json`, `--out FILE`.
    #[command(flatten)]
    pub output: crate::report::Output,
    /// The test VR program (default: `vrhost-testvr` beside this
    /// executable, where `cargo build` puts it).
    #[arg(long, value_name = "PATH")]
    pub testvr: Option<std::path::PathBuf>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// "isolation".
    pub bench: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// One flat record per run, each with `experiment` and `run`.
    pub results: Vec<Value>,
}

/// One run of the hostile experiment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostileRecord {
    /// "hostile".
    pub experiment: &'static str,
    /// `reference`, `hostile` or `quarantine`.
    pub run: &'static str,
    /// Capacity of the 3 honest VRs, frames/s (generator unpaced).
    pub capacity_pps: u64,
    /// Offered rate (all 4 VRs), frames/s.
    pub offered_pps: u64,
    /// Frames the generator sent.
    pub frames: u64,
    /// The daemon answered `/v1/health` at the end.
    pub host_alive: bool,
    /// The daemon exited cleanly (no crash; slot accounting of every VR
    /// checked at shutdown).
    pub daemon_exit_ok: bool,
    /// Honest VRs.
    pub honest_vrs: usize,
    /// Frames classified to them.
    pub honest_classified: u64,
    /// Frames they forwarded.
    pub honest_forwarded: u64,
    /// Classified and not forwarded (all honest VRs).
    pub honest_lost: u64,
    /// The most any one honest VR lost.
    pub honest_lost_max: u64,
    /// Violations counted against honest VRs.
    pub honest_violations: u64,
    /// The 4th VR: `router` or `hostile`.
    pub neighbour: &'static str,
    /// Its state at the end (`running`, `stopped`, `quarantined`).
    pub neighbour_state: String,
    /// Frames classified to it.
    pub neighbour_classified: u64,
    /// Frames it forwarded (valid returns).
    pub neighbour_forwarded: u64,
    /// Host ingress drops of its frames.
    pub neighbour_ingress_drops: u64,
    /// Frames it returned DROPPED.
    pub neighbour_vr_dropped: u64,
    /// Its violations, all kinds.
    pub neighbour_violations: u64,
    /// Per second of the run.
    pub neighbour_violations_per_s: f64,
    /// Doorbell rings the host spent on it.
    pub neighbour_kicks: u64,
    /// Times it was quarantined.
    pub neighbour_quarantines: u64,
    /// Process exits.
    pub neighbour_exits: u64,
    /// Restarts.
    pub neighbour_restarts: u64,
    /// The hostile program's rounds (from its report; 0 if it had none).
    pub hostile_rounds: u64,
    /// Its rounds per second.
    pub hostile_rounds_per_s: f64,
    /// Slots it took from its rx rings.
    pub hostile_taken: u64,
    /// Slots it returned the right way.
    pub hostile_returned_ok: u64,
    /// Words it wrote against the protocol.
    pub hostile_bad_writes: u64,
    /// `memfd:vrhost-*` regions in its address space (1: its own).
    pub hostile_regions_mapped: u64,
    /// Descriptors it holds on `memfd:vrhost-*` files.
    pub hostile_region_fds: u64,
    /// Seconds of the run, generator start to drained.
    pub seconds: f64,
    /// Violations by kind (`violations_<kind>`) and the hostile program's
    /// rounds by case (`hostile_case_<case>`).
    #[serde(flatten)]
    pub by_kind: BTreeMap<String, u64>,
}

/// The kill experiment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KillRecord {
    /// "kill".
    pub experiment: &'static str,
    /// "kills".
    pub run: &'static str,
    /// Capacity of the 4 VRs, frames/s (generator unpaced).
    pub capacity_pps: u64,
    /// Offered rate (all 4 VRs), frames/s.
    pub offered_pps: u64,
    /// Frames the generator sent.
    pub frames: u64,
    /// Kills done.
    pub kills: u64,
    /// Kills after which the victim did not forward again within 5 s.
    pub not_recovered: u64,
    /// Signal to first frame out, ms: median.
    pub restart_ms_p50: f64,
    /// 90th percentile.
    pub restart_ms_p90: f64,
    /// 99th percentile.
    pub restart_ms_p99: f64,
    /// Longest.
    pub restart_ms_max: f64,
    /// Every kill's time, ms, in order.
    pub restart_ms: Vec<f64>,
    /// Restarts the daemon counted for the victim.
    pub victim_restarts: u64,
    /// Slots reclaimed from the victim's dead processes.
    pub victim_reclaimed: u64,
    /// Victim's frames dropped at ingress while it was down.
    pub victim_down_drops: u64,
    /// Honest VRs.
    pub honest_vrs: usize,
    /// Frames classified to them.
    pub honest_classified: u64,
    /// Frames they forwarded.
    pub honest_forwarded: u64,
    /// Classified and not forwarded (all honest VRs).
    pub honest_lost: u64,
    /// The daemon answered `/v1/health` at the end with no broken slot
    /// accounting.
    pub host_alive: bool,
    /// The daemon exited cleanly (slot accounting checked at shutdown).
    pub daemon_exit_ok: bool,
}

/// One run of the overload experiment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OverloadRecord {
    /// "overload".
    pub experiment: &'static str,
    /// `unpaced`, `sweep` or `overload`.
    pub run: &'static str,
    /// Router VRs.
    pub vrs: usize,
    /// Generator pace, frames/s (0: unpaced).
    pub offered_pps: u64,
    /// Frames the worker took from the generator, per second.
    pub taken_pps: f64,
    /// Frames forwarded, per second.
    pub forwarded_pps: f64,
    /// The highest forwarded rate of the experiment's runs (unpaced and
    /// the sweep), frames/s.
    pub peak_pps: f64,
    /// Forwarded / peak.
    pub ratio_to_peak: f64,
    /// Frames due by the pace but not taken by the worker, per second (a
    /// NIC would drop these).
    pub not_taken_pps: f64,
    /// Frames the VRs dropped, per second.
    pub vr_dropped_pps: f64,
    /// Host ingress drops by reason, per second (`ingress_<reason>_pps`).
    #[serde(flatten)]
    pub ingress: BTreeMap<String, f64>,
    /// What kept the worker and the VRs from their cores over the window
    /// (the cause of ingress drops below the peak, if any).
    pub sched: OverloadSched,
}

/// What runs a VR.
#[derive(Debug, Clone)]
enum Kind {
    Router,
    /// `vrhost-testvr vr-hostile`, its report file, `quarantine_after` (`None`:
    /// the host's default), `cpu_quota`, and whether it only spins
    /// (honest case only).
    Hostile {
        report: PathBuf,
        seed: u64,
        quarantine_after: Option<u64>,
        cpu_quota: Option<f64>,
        spinner: bool,
    },
}

/// A tenant VR: `t{i}` gets `10.{i+1}.0.0/16`, from generator port `port`.
#[derive(Debug, Clone)]
struct Tenant {
    i: usize,
    name: String,
    port: String,
    kind: Kind,
}

/// A generator port.
#[derive(Debug, Clone)]
struct Gen {
    name: String,
    /// Tenant indexes its frames go to (one prefix each; repeat an index to
    /// give it a bigger share).
    to: Vec<usize>,
    pps: Option<u64>,
    limit: Option<u64>,
}

fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn config(args: &IsolationArgs, gens: &[Gen], tenants: &[Tenant]) -> Result<String> {
    let vr_cpu = if args.cpu == 0 { 1 } else { 0 };
    let mut s = format!("[host]\ncpu = {}\n", args.cpu);
    if args.unconfined {
        s += "confine = false\n";
    }
    for g in gens {
        let dst: Vec<String> =
            g.to.iter()
                .map(|i| format!("\"10.{}.128.0/17\"", i + 1))
                .collect();
        s += &format!(
            "\n[[ports]]\nname = {}\ndriver = \"mem\"\n[ports.traffic]\ndst = [{}]\n{}{}",
            q(&g.name),
            dst.join(", "),
            g.pps.map(|p| format!("pps = {p}\n")).unwrap_or_default(),
            g.limit
                .map(|l| format!("limit = {l}\n"))
                .unwrap_or_default(),
        );
    }
    s += "\n[[ports]]\nname = \"out\"\ndriver = \"null\"\n";
    let exe = crate::report::testvr(args.testvr.as_deref())?;
    for t in tenants {
        let i = t.i;
        let n = i + 1;
        s += &format!(
            "\n[[vrs]]\nname = {}\nslots = {}\ncpu = {vr_cpu}\n",
            q(&t.name),
            args.slots
        );
        match &t.kind {
            Kind::Router => {
                s += &format!(
                    "vnics = [\n  {{ port = {}, mac = \"02:00:00:{i:02x}:00:01\", addrs = [\"10.{n}.0.1/24\"] }},\n  {{ port = \"out\", mac = \"02:00:00:{i:02x}:01:01\", addrs = [\"10.9.{i}.1/24\"] }},\n]\n[vrs.router]\nneighbours = [{{ ip = \"10.9.{i}.2\", mac = \"02:00:00:00:99:{i:02x}\" }}]\nroutes = [{{ prefix = \"10.{n}.0.0/16\", via = \"10.9.{i}.2\" }}]\n",
                    q(&t.port)
                );
            }
            Kind::Hostile {
                report,
                seed,
                quarantine_after,
                cpu_quota,
                spinner,
            } => {
                s += &format!(
                    "kind = \"program\"\nprogram = {}\nargs = [\"vr-hostile\"]\n{}{}vnics = [{{ port = {} }}, {{ port = \"out\" }}]\n[vrs.config]\nseed = {seed}\nreport_file = {}\n",
                    q(&exe.display().to_string()),
                    quarantine_after
                        .map(|n| format!("quarantine_after = {n}\n"))
                        .unwrap_or_default(),
                    cpu_quota
                        .map(|c| format!("cpu_quota = {c}\n"))
                        .unwrap_or_default(),
                    q(&t.port),
                    q(&report.display().to_string()),
                );
                if *spinner {
                    s += "[vrs.config.weights]\n";
                    for c in Case::ALL {
                        let w = u32::from(*c == Case::Honest);
                        s += &format!("{} = {w}\n", c.name());
                    }
                }
            }
        }
    }
    for t in tenants {
        s += &format!(
            "\n[[rules]]\nport = {}\ndst = \"10.{}.0.0/16\"\nvr = {}\n",
            q(&t.port),
            t.i + 1,
            q(&t.name)
        );
    }
    Ok(s)
}

struct Running {
    daemon: Daemon,
    client: Client,
}

impl Running {
    fn start(dir: &Path, name: &str, src: &str) -> Result<Self> {
        let file = dir.join(format!("{name}.toml"));
        std::fs::write(&file, src)?;
        let sock = dir.join(format!("{name}.sock"));
        let daemon = Daemon::start(&file, None, 0, &sock.display().to_string())
            .with_context(|| format!("{name}: start the daemon"))?;
        let client = Client::new(Endpoint::Unix(sock), None)?.with_timeout(Duration::from_secs(30));
        Ok(Self { daemon, client })
    }

    /// Stop the daemon; whether it exited cleanly (its shutdown checks
    /// every VR's slot accounting), saying why not on stderr.
    fn stop_checked(self, what: &str) -> bool {
        match self.daemon.stop() {
            Ok(()) => true,
            Err(e) => {
                eprintln!("bench isolation: {what}: {e:#}");
                false
            }
        }
    }

    fn stats(&self) -> Result<Value> {
        Ok(self.client.get("/v1/stats")?.decode::<Value>()?)
    }

    /// Stats once the port `gen` has sent its `frames` and every VR of
    /// `tenants` has handed back all it took (polled every 100 ms).
    ///
    /// # Errors
    /// Not so within `limit` (a bound against a hung run).
    fn drained(&self, tenants: &[Tenant], frames: u64, limit: Duration) -> Result<Value> {
        let t0 = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let s = self.stats()?;
            let settled = tenants.iter().all(|t| {
                let st = vr(&s, &t.name);
                u(&st["rx_packets"])
                    == u(&st["tx_packets"]) + u(&st["vr_dropped"]) + u(&st["port_dropped"])
            });
            if u(&port(&s, "gen")["rx_packets"]) >= frames && settled {
                return Ok(s);
            }
            if t0.elapsed() > limit {
                bail!("the generator did not finish within {limit:?}: {s}");
            }
        }
    }

    /// Stats at the start and the end of a window of `secs` after `warm`
    /// seconds, and its length.
    fn window(&self, warm: f64, secs: f64) -> Result<(Value, Value, f64)> {
        let (a, b, dt, ..) = self.window_sched(warm, secs)?;
        Ok((a, b, dt))
    }

    /// [`Self::window`], with the scheduler's figures of the daemon's
    /// threads and processes at both ends.
    fn window_sched(
        &self,
        warm: f64,
        secs: f64,
    ) -> Result<(Value, Value, f64, Snapshot, Snapshot)> {
        std::thread::sleep(Duration::from_secs_f64(warm));
        let a = self.stats()?;
        let sa = Snapshot::of_tree(self.daemon.pid());
        let t = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(secs));
        let sb = Snapshot::of_tree(self.daemon.pid());
        let b = self.stats()?;
        Ok((a, b, t.elapsed().as_secs_f64(), sa, sb))
    }
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn vr<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["vrs"]
        .as_array()
        .and_then(|a| a.iter().find(|v| v["name"] == name))
        .map_or(&Value::Null, |v| &v["stats"])
}

fn port<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["ports"]
        .as_array()
        .and_then(|a| a.iter().find(|v| v["name"] == name))
        .unwrap_or(&Value::Null)
}

fn sum_map(v: &Value) -> u64 {
    v.as_object().map_or(0, |o| o.values().map(u).sum())
}

/// Frames classified to a VR: put in its rings or dropped on the way in.
fn classified(s: &Value, name: &str) -> u64 {
    let st = vr(s, name);
    u(&st["rx_packets"]) + sum_map(&st["ingress_drops"])
}

fn forwarded(s: &Value, name: &str) -> u64 {
    u(&vr(s, name)["tx_packets"])
}

/// Per-second rate of `f` over a window.
fn rate(a: &Value, b: &Value, dt: f64, f: impl Fn(&Value) -> u64) -> f64 {
    f(b).saturating_sub(f(a)) as f64 / dt
}

fn router(i: usize, port: &str) -> Tenant {
    Tenant {
        i,
        name: format!("t{i}"),
        port: port.into(),
        kind: Kind::Router,
    }
}

/// Forwarded rate of `tenants` with the generator `gen` unpaced.
fn capacity(args: &IsolationArgs, dir: &Path, name: &str, tenants: &[Tenant]) -> Result<u64> {
    let g = Gen {
        name: "gen".into(),
        to: tenants.iter().map(|t| t.i).collect(),
        pps: None,
        limit: None,
    };
    let r = Running::start(dir, name, &config(args, &[g], tenants)?)?;
    let (a, b, dt) = r.window(0.5, args.seconds.min(2.0))?;
    r.daemon.stop()?;
    let f = |s: &Value| tenants.iter().map(|t| forwarded(s, &t.name)).sum();
    Ok(rate(&a, &b, dt, f) as u64)
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// Run `vrhost bench isolation`.
pub fn run(args: &IsolationArgs) -> Result<()> {
    for e in &args.experiments {
        if !["hostile", "kill", "overload", "fairness", "fairness_xdp"].contains(&e.as_str()) {
            bail!(
                "--experiments: no experiment {e:?} (hostile, kill, overload, fairness, fairness_xdp)"
            );
        }
    }
    if args.kills == 0 || args.kills > 10_000 {
        bail!("--kills {}: 1..=10000", args.kills);
    }
    if !(args.kill_gap >= 0.1 && args.kill_gap <= 600.0) {
        bail!("--kill-gap {}: 0.1..=600 seconds", args.kill_gap);
    }
    if args.overload_vrs == 0 || args.overload_vrs > 100 {
        bail!("--overload-vrs {}: 1..=100", args.overload_vrs);
    }
    if args.seconds.is_nan() || args.seconds <= 0.0 {
        bail!("--seconds must be > 0");
    }
    let want = |e: &str| args.experiments.iter().any(|x| x == e);
    let dir = std::env::temp_dir().join(format!("vrhost-bench-isolation-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // A confined VR runs as another user: it must reach its report file.
    set_mode(&dir, 0o755)?;
    let result = (|| -> Result<Vec<Value>> {
        let mut results = Vec::new();
        if want("hostile") {
            let honest: Vec<Tenant> = (0..3).map(|i| router(i, "gen")).collect();
            let cap = capacity(args, &dir, "hostile-capacity", &honest)?;
            for run in [
                "reference",
                "spinner",
                "hostile",
                "hostile_quota",
                "quarantine",
            ] {
                results.push(serde_json::to_value(hostile_run(args, &dir, cap, run)?)?);
            }
        }
        if want("kill") {
            results.push(serde_json::to_value(kill_run(args, &dir)?)?);
        }
        let mut cap1 = None;
        if want("overload") {
            let o = overload(args, &dir)?;
            if args.overload_vrs == 1 {
                cap1 = Some(o[0].forwarded_pps as u64);
            }
            for r in o {
                results.push(serde_json::to_value(r)?);
            }
        }
        if want("fairness") {
            let cap1 = match cap1 {
                Some(c) => c,
                None => capacity(args, &dir, "fairness-capacity", &[router(0, "gen")])?,
            };
            for r in fairness(args, &dir, cap1)? {
                results.push(serde_json::to_value(r)?);
            }
        }
        if (want("fairness") || want("fairness_xdp")) && args.fairness_xdp != "off" {
            let o = FairXdp {
                path: args.fairness_xdp.clone(),
                seconds: args.seconds,
                quiet_load: args.quiet_load,
                cpu: args.cpu,
                slots: args.slots,
                unconfined: args.unconfined,
                generator: args.fairness_generator,
                napi_thread: args.fairness_napi_thread,
                mix_turn: args.fairness_mix_turn,
                frame_bytes: Some(64),
            };
            for r in fairness_xdp(&o)? {
                results.push(serde_json::to_value(r)?);
            }
        }
        Ok(results)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let report = Report {
        bench: "isolation",
        machine: Machine::this(),
        results: result?,
    };
    crate::report::emit(&report, &args.output, |r| {
        print_table(&r.results);
    })
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> IsolationArgs {
        IsolationArgs {
            experiments: vec![],
            kills: 20,
            kill_gap: 1.5,
            seconds: 1.0,
            load: 0.25,
            hostile_quota: 0.2,
            overload_vrs: 1,
            quiet_load: 0.15,
            fairness_xdp: "off".into(),
            fairness_generator: crate::forward::GeneratorKind::Live,
            fairness_napi_thread: false,
            fairness_mix_turn: false,
            cpu: 1,
            slots: 512,
            seed: 1,
            unconfined: false,
            output: crate::report::Output {
                json: false,
                out: None,
            },
            // Any executable: the configs only name it.
            testvr: Some(std::env::current_exe().unwrap()),
        }
    }

    /// Every config the bench writes is one the daemon accepts.
    #[test]
    fn generated_configs_parse() {
        let a = args();
        let dir = std::env::temp_dir();
        let mut tenants: Vec<Tenant> = (0..3).map(|i| router(i, "gen")).collect();
        tenants.push(Tenant {
            i: 3,
            name: "evil".into(),
            port: "gen".into(),
            kind: Kind::Hostile {
                report: dir.join("r.json"),
                seed: 1,
                quarantine_after: Some(0),
                cpu_quota: Some(0.2),
                spinner: true,
            },
        });
        let g = Gen {
            name: "gen".into(),
            to: vec![0, 1, 2, 3],
            pps: Some(1000),
            limit: Some(10),
        };
        let src = config(&a, &[g], &tenants).unwrap();
        let (_, plan) = vrhost_host::config::Config::parse(&src, "bench", &dir)
            .unwrap_or_else(|e| panic!("{e}\n{src}"));
        assert_eq!(plan.vrs.len(), 4);
        assert_eq!(
            plan.vrs[3].config["report_file"],
            dir.join("r.json").display().to_string()
        );
        let two = [
            Gen {
                name: "gq".into(),
                to: vec![0],
                pps: Some(10),
                limit: None,
            },
            Gen {
                name: "gn".into(),
                to: vec![1],
                pps: None,
                limit: Some(0),
            },
        ];
        let src = config(&a, &two, &[router(0, "gq"), router(1, "gn")]).unwrap();
        vrhost_host::config::Config::parse(&src, "bench", &dir)
            .unwrap_or_else(|e| panic!("{e}\n{src}"));
    }
}
