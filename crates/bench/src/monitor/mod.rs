//! `vrhost bench monitor`: several instances per VR (LVRM's VRIs, PdP's
//! forwarding engines), measured in memory with a dummy per-packet cost.
//!
//! One VR of the `vr-spin` program (it spins for `--cost-ns` per packet,
//! LVRM's 1/60 ms by default) gets frames from a paced `mem` port with a
//! sequence number in each; an order-checking sink counts what comes out
//! and what came out of order within its flow. Experiments:
//!
//! - `scale` (LVRM 2b): throughput against the number of instances, fixed.
//! - `balance` (LVRM 3a, PdP Table 1): throughput and reordering per
//!   load-balancing policy, with equal instances.
//! - `unequal` (PdP Table 2): the same with one instance 1.5 x slower
//!   (PdP's 75 % and 50 % CPU guests), against the ideal aggregate.
//! - `realloc`: an instance added and one retired under load: the time the
//!   worker stopped for it, the longest gap at the sink against the same
//!   window before, reaction time and frames lost.
//! - `control` (LVRM 1e): latency of a control message from one instance
//!   to the other through the host's relay, idle and under full load.
//! - `dynamic` (LVRM 2c, Fig. 11): the instance count following a stepped
//!   load under the `dynamic` policy.
//! - `vrs` (LVRM 3b, Fig. 14): two VRs, each fed its own flow (its own
//!   destination prefix, its own sink) at half the load; T = 2 x min(T1,
//!   T2) of their forwarded rates against the ideal, per policy among
//!   each VR's `--vr-instances` instances.
//!
//! Instances are placed on cores nearest the host worker's first; this
//! machine may have fewer cores than instances, and then instances share
//! cores (the table says how many cores were used).

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Context, Result, bail};
use serde::Serialize;
use vrhost_host::alloc::{DynamicPolicy, ScalePolicy, Scaler, Topology};
use vrhost_host::balance::Policy;
use vrhost_host::{
    Backend, Classifier, HostStats, Mailbox, Match, Rule, VrCommand, VrPath, VrProcess, VrStats,
    Worker, cpu,
};
use vrhost_io::mem::{DstMode, MemPort, MemPortConfig};
use vrhost_io::order::{OrderCounters, OrderSink};
use vrhost_io::{Port, PortStats};
use vrhost_proto::PollConfig;
use vrhost_shm::{Doorbell, Region};

use crate::machine::Machine;
use crate::report::percentile;

mod rig;

use rig::*;

/// One experiment of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Experiment {
    /// Throughput against the number of instances.
    Scale,
    /// Throughput and reordering per policy, equal instances.
    Balance,
    /// The same with unequal instances, against the ideal aggregate.
    Unequal,
    /// An instance added and one retired under load.
    Realloc,
    /// Control message latency between instances.
    Control,
    /// The instance count following a stepped load.
    Dynamic,
    /// Two VRs with a flow each: the smaller share against the ideal.
    Vrs,
}

/// Options of `vrhost bench monitor`.
#[derive(Debug, Clone, clap::Args)]
pub struct MonitorArgs {
    /// Experiments to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "scale,balance,unequal,realloc,control,dynamic,vrs"
    )]
    pub experiments: Vec<Experiment>,
    /// Busy work per packet in each instance, ns (LVRM: 1/60 ms).
    #[arg(long, default_value_t = 16_667)]
    pub cost_ns: u64,
    /// Instance counts of the `scale` experiment.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4")]
    pub instances: Vec<u16>,
    /// Instances of each VR in the `vrs` experiment (with 1, the policies
    /// have no choice to make and one row is run).
    #[arg(long, default_value_t = 1)]
    pub vr_instances: u16,
    /// Policies of the `balance`, `unequal` and `vrs` experiments.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "flow,rr,random,jsq,weighted"
    )]
    pub policies: Vec<Policy>,
    /// Offered load as a multiple of what the instances can take.
    #[arg(long, default_value_t = 1.2)]
    pub overload: f64,
    /// Flows in the generated traffic (distinct destinations). The
    /// generator cycles through them in order: a count with a factor in
    /// common with the instance count would keep each flow on one instance
    /// under round-robin by coincidence (hence a prime).
    #[arg(long, default_value_t = 1021)]
    pub flows: usize,
    /// Measurement window per point, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Warm-up before each window, seconds.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Length of each load step of the `dynamic` experiment, seconds.
    #[arg(long, default_value_t = 5.0)]
    pub step_seconds: f64,
    /// Period of the `dynamic` policy, seconds (LVRM: 1).
    #[arg(long, default_value_t = 1.0)]
    pub period: f64,
    /// Control messages sent per second in the `control` experiment.
    #[arg(long, default_value_t = 2000)]
    pub pings: u32,
    /// CPU of the host worker.
    #[arg(long, default_value_t = 0)]
    pub host_cpu: usize,
    /// Write a PNG of the `dynamic` experiment (scripts/plot-monitor).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The test VR program (default: `vrhost-testvr` beside this
    /// executable, where `cargo build` puts it).
    #[arg(long, value_name = "PATH")]
    pub testvr: Option<std::path::PathBuf>,
}

/// One result, flat (see the JSON form).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Rec {
    /// Which experiment.
    pub experiment: &'static str,
    /// Balancing policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<&'static str>,
    /// Instances fed (`vrs`: of each VR).
    pub instances: u16,
    /// Distinct cores they ran on.
    pub cores: usize,
    /// Offered frames/s, millions.
    pub offered_mpps: f64,
    /// Forwarded frames/s, millions.
    pub mpps: f64,
    /// Forwarded over the reference: 1 instance (`scale`), the ideal
    /// aggregate (`unequal`, `vrs`), the offered load (`balance`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Frames out of order within their flow, percent of forwarded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder_pct: Option<f64>,
    /// `realloc`: what changed (`add`, `retire`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<&'static str>,
    /// `realloc`: time the worker spent on the change, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disruption_us: Option<f64>,
    /// `realloc`: longest gap between frames at the sink in the change's
    /// window, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_us: Option<f64>,
    /// `realloc`: the same in a window of equal length before it, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_before_us: Option<f64>,
    /// `realloc`: from the request to the new share of frames flowing
    /// (`add`: the new instance's first frame; `retire`: drained and
    /// stopped), µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reaction_us: Option<f64>,
    /// `realloc`: starting the new instance's process, before the change
    /// (off the data path), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_ms: Option<f64>,
    /// Frames that vanished without a counter saying why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// Frames dropped and counted (ingress, by the VR, by ports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
    /// `control`: `loopback` (an instance to itself through the host) or
    /// `peer` (to the other instance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<&'static str>,
    /// `control`: `idle` or `full`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<&'static str>,
    /// `control`: latency median, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_us_p50: Option<f64>,
    /// `control`: its 99th percentile, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_us_p99: Option<f64>,
    /// `control`: messages measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<usize>,
    /// `dynamic`: seconds since the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t: Option<f64>,
    /// `dynamic`: the host's estimate of the arrival rate, millions/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_mpps: Option<f64>,
    /// `vrs`: VRs hosted (`mpps` is then T = 2 x min(T1, T2)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vrs: Option<usize>,
    /// `vrs`: frames/s forwarded by VR 1 (T1), millions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t1_mpps: Option<f64>,
    /// `vrs`: the same of VR 2 (T2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t2_mpps: Option<f64>,
    /// `vrs`: the ideal T: the offered load or what the cores take,
    /// whichever is lower, millions/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_mpps: Option<f64>,
}

#[derive(Serialize)]
struct Report<'a> {
    bench: &'static str,
    machine: Machine,
    cost_ns: u64,
    results: &'a [Rec],
}

const GEN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const VR_NAME: &str = "spin";

/// What one instance can take, frames/s (the cost alone).
fn capacity(cost_ns: u64) -> f64 {
    1e9 / cost_ns.max(1) as f64
}

fn scale(args: &MonitorArgs, out: &mut Vec<Rec>) -> Result<()> {
    let cores = cpu::cpus();
    let mut one = None;
    for &n in &args.instances {
        let n = n.clamp(1, SLOTS);
        // Enough for every core the instances can use.
        let offered = args.overload * capacity(args.cost_ns) * f64::from(n).min(cores as f64);
        let mut rig = Rig::start(
            args,
            &vec![args.cost_ns; usize::from(n)],
            Policy::Flow,
            offered,
            PollConfig::default(),
        )?;
        std::thread::sleep(Duration::from_secs_f64(args.warmup));
        let (pps, reorder) = rig.window(args.seconds);
        let offered_now = rig.offered;
        let used = rig.cores_used();
        rig.finish()?;
        let one = *one.get_or_insert(pps);
        out.push(Rec {
            experiment: "scale",
            policy: Some(Policy::Flow.name()),
            instances: n,
            cores: used,
            offered_mpps: offered_now / 1e6,
            mpps: pps / 1e6,
            ratio: Some(pps / one),
            reorder_pct: Some(reorder),
            ..Rec::default()
        });
        progress(args, out);
    }
    Ok(())
}

/// `unequal`: instance 1 costs 1.5 x instance 0.
fn balance(args: &MonitorArgs, unequal: bool, out: &mut Vec<Rec>) -> Result<()> {
    let costs = if unequal {
        vec![args.cost_ns, args.cost_ns * 3 / 2]
    } else {
        vec![args.cost_ns; 2]
    };
    let ideal: f64 = costs.iter().map(|&c| capacity(c)).sum();
    // Equal instances: overloaded. Unequal ones: offered exactly what they
    // can take together, which only a policy that follows their
    // capacities forwards whole.
    let offered = if unequal {
        ideal
    } else {
        args.overload * ideal
    };
    for &policy in &args.policies {
        let mut rig = Rig::start(args, &costs, policy, offered, PollConfig::default())?;
        std::thread::sleep(Duration::from_secs_f64(args.warmup));
        let (pps, reorder) = rig.window(args.seconds);
        let offered_now = rig.offered;
        let used = rig.cores_used();
        rig.finish()?;
        out.push(Rec {
            experiment: if unequal { "unequal" } else { "balance" },
            policy: Some(policy.name()),
            instances: 2,
            cores: used,
            offered_mpps: offered_now / 1e6,
            mpps: pps / 1e6,
            ratio: Some(pps / ideal),
            reorder_pct: Some(reorder),
            ..Rec::default()
        });
        progress(args, out);
    }
    Ok(())
}

/// Add an instance under load, then retire it.
fn realloc(args: &MonitorArgs, out: &mut Vec<Rec>) -> Result<()> {
    // Below what one instance takes: no frame need be dropped.
    let offered = 0.8 * capacity(args.cost_ns);
    let mut rig = Rig::start(
        args,
        &[args.cost_ns],
        Policy::Flow,
        offered,
        PollConfig::default(),
    )?;
    std::thread::sleep(Duration::from_secs_f64(args.warmup));
    let window = Duration::from_millis(200);
    let gap = |rig: &Rig| rig.max_gap_ns.swap(0, Ordering::Relaxed) as f64 / 1e3;
    let drops0 = rig.dropped();
    // Add.
    let t = Instant::now();
    let (p, b) = rig.spawn(0, 1, args.cost_ns)?;
    let spawn_ms = t.elapsed().as_secs_f64() * 1e3;
    gap(&rig);
    std::thread::sleep(window);
    let before = gap(&rig);
    let t = Instant::now();
    let took = rig.call(move |w| {
        let t = Instant::now();
        let ok = w.vrs_mut()[0].add_instance(p, b).is_ok();
        (ok, t.elapsed())
    })?;
    if !took.0 {
        bail!("the worker refused the new instance");
    }
    let vr = rig.vrs[0].stats.clone();
    while vr.instances[1].rx_packets.get() == 0 && t.elapsed() < Duration::from_secs(5) {
        std::hint::spin_loop();
    }
    let reaction = t.elapsed();
    std::thread::sleep(window.saturating_sub(t.elapsed()));
    let during = gap(&rig);
    out.push(Rec {
        experiment: "realloc",
        change: Some("add"),
        instances: 2,
        cores: rig.cores_used(),
        offered_mpps: offered / 1e6,
        disruption_us: Some(took.1.as_secs_f64() * 1e6),
        gap_us: Some(during),
        gap_before_us: Some(before),
        reaction_us: Some(reaction.as_secs_f64() * 1e6),
        spawn_ms: Some(spawn_ms),
        dropped: Some(rig.dropped() - drops0),
        ..Rec::default()
    });
    progress(args, out);
    std::thread::sleep(Duration::from_secs_f64(args.warmup));
    // Retire.
    gap(&rig);
    std::thread::sleep(window);
    let before = gap(&rig);
    let drops0 = rig.dropped();
    let t = Instant::now();
    let took = rig.call(move |w| {
        let t = Instant::now();
        let ok = w.vrs_mut()[0].retire_instance(1);
        (ok, t.elapsed())
    })?;
    if !took.0 {
        bail!("the worker refused to retire instance 1");
    }
    loop {
        let states = rig.call(|w| w.vrs()[0].instance_states())?;
        if states[1] == vrhost_host::InstanceState::Off || t.elapsed() > Duration::from_secs(5) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let reaction = t.elapsed();
    rig.vrs[0].placed[1] = None;
    std::thread::sleep(window.saturating_sub(t.elapsed()));
    let during = gap(&rig);
    let mut rec = Rec {
        experiment: "realloc",
        change: Some("retire"),
        instances: 1,
        cores: rig.cores_used(),
        offered_mpps: offered / 1e6,
        disruption_us: Some(took.1.as_secs_f64() * 1e6),
        gap_us: Some(during),
        gap_before_us: Some(before),
        reaction_us: Some(reaction.as_secs_f64() * 1e6),
        dropped: Some(rig.dropped() - drops0),
        ..Rec::default()
    };
    let lost = rig.finish()?;
    rec.lost = Some(lost);
    if let Some(add) = out
        .iter_mut()
        .rev()
        .find(|r| r.experiment == "realloc" && r.change == Some("add"))
    {
        add.lost = Some(lost);
    }
    out.push(rec);
    progress(args, out);
    Ok(())
}

/// Latency of control messages from instance 0 to instance `to` through
/// the host's relay, as the receiver measured it (CLOCK_MONOTONIC stamps).
fn latencies(rig: &mut Rig, to: u16) -> Result<Vec<f64>> {
    let reply = rig.controls[usize::from(to)]
        .request(
            &serde_json::json!({"latencies": true}),
            Duration::from_secs(5),
        )
        .map_err(|e| crate::failed!("latencies: {e}"))?;
    let ns: Vec<u64> = serde_json::from_value(reply["ns"].clone())?;
    Ok(ns.into_iter().map(|n| n as f64 / 1e3).collect())
}

/// LVRM 1e: control messages between instances, idle and under full load.
/// The instances forward without a dummy cost here (as LVRM's VRs did in
/// 1e) and never sleep (LVRM's busy-polling VRIs). `loopback`: instance 0
/// (on a core of its own) to itself through the host, which is the relay's
/// own latency; `peer`: to instance 1, which on a 2-core machine shares
/// the host worker's core.
fn control(args: &MonitorArgs, out: &mut Vec<Rec>) -> Result<()> {
    let period_us = (1_000_000 / args.pings.max(1)).max(1);
    let poll = PollConfig {
        spin_rounds: u32::MAX,
        yield_us: 0,
        ..PollConfig::default()
    };
    for (to, what) in [(0u16, "loopback"), (1, "peer")] {
        for (load, pps) in [("idle", 0.0), ("full", 5e6)] {
            let mut rig =
                Rig::start_pinging(args, &[0, 0], Policy::Flow, pps, poll, (period_us, to))?;
            std::thread::sleep(Duration::from_secs_f64(args.warmup));
            latencies(&mut rig, to)?;
            let (fwd, _) = rig.window(args.seconds);
            let mut v = latencies(&mut rig, to)?;
            v.sort_by(f64::total_cmp);
            let used = rig.cores_used();
            let relayed = rig.vrs[0].stats.ctrl_relayed.get();
            rig.finish()?;
            if relayed == 0 {
                bail!("no control message was relayed");
            }
            out.push(Rec {
                experiment: "control",
                path: Some(what),
                load: Some(load),
                instances: 2,
                cores: used,
                offered_mpps: pps / 1e6,
                mpps: fwd / 1e6,
                latency_us_p50: Some(percentile(&v, 0.5).unwrap_or(f64::NAN)),
                latency_us_p99: Some(percentile(&v, 0.99).unwrap_or(f64::NAN)),
                messages: Some(v.len()),
                ..Rec::default()
            });
            progress(args, out);
        }
    }
    Ok(())
}

/// The instance count under the `dynamic` policy following a stepped load
/// (up then down), sampled every 100 ms.
fn dynamic(args: &MonitorArgs, out: &mut Vec<Rec>) -> Result<()> {
    let cap = capacity(args.cost_ns);
    let most = cpu::cpus().clamp(1, usize::from(SLOTS)) as u16;
    let policy = DynamicPolicy {
        up_pps: 0.9 * cap,
        down_pps: 0.7 * cap,
        period: Duration::from_secs_f64(args.period),
        min: 1,
        max: most,
    };
    let mut scaler = Scaler::new(ScalePolicy::Dynamic(policy))?;
    // Steps of 0.4 x one instance's capacity, up to what the cores take.
    let top = (f64::from(most) / 0.4).floor() as u32;
    let steps: Vec<f64> = (1..=top)
        .chain((1..top).rev())
        .map(|k| 0.4 * f64::from(k) * cap)
        .collect();
    let mut rig = Rig::start(
        args,
        &[args.cost_ns],
        Policy::Flow,
        steps[0],
        PollConfig::default(),
    )?;
    let start = Instant::now();
    let mut live: Vec<u16> = vec![0];
    let mut decided = start;
    let mut last = (rig.vrs[0].sink.packets(), Instant::now());
    for (k, &pps) in steps.iter().enumerate() {
        rig.rate.store(pps as u64, Ordering::Relaxed);
        let end = start + Duration::from_secs_f64(args.step_seconds * (k + 1) as f64);
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
            let now = Instant::now();
            let arrival = rig.vrs[0].stats.arrival_pps.get() as f64;
            if now.duration_since(decided) >= policy.period {
                let dt = now.duration_since(decided);
                decided = now;
                let want = scaler.tick(arrival, dt, live.len() as u16);
                if usize::from(want) > live.len() {
                    let i = (0..SLOTS)
                        .find(|i| !live.contains(i) && rig.vrs[0].placed[usize::from(*i)].is_none())
                        .context("no instance slot")?;
                    let (p, b) = rig.spawn(0, i, args.cost_ns)?;
                    if rig.call(move |w| w.vrs_mut()[0].add_instance(p, b).is_ok())? {
                        live.push(i);
                    }
                } else if usize::from(want) < live.len()
                    && let Some(&i) = live.last()
                    && rig.call(move |w| w.vrs_mut()[0].retire_instance(i))?
                {
                    live.pop();
                    rig.vrs[0].placed[usize::from(i)] = None;
                }
            }
            let fwd = rig.vrs[0].sink.packets();
            let dt = now.duration_since(last.1).as_secs_f64();
            let rate = (fwd - last.0) as f64 / dt;
            last = (fwd, now);
            out.push(Rec {
                experiment: "dynamic",
                t: Some(now.duration_since(start).as_secs_f64()),
                instances: live.len() as u16,
                cores: rig.cores_used(),
                offered_mpps: pps / 1e6,
                mpps: rate / 1e6,
                arrival_mpps: Some(arrival / 1e6),
                ..Rec::default()
            });
        }
        progress(args, out);
    }
    let lost = rig.finish()?;
    if let Some(r) = out.last_mut() {
        r.lost = Some(lost);
    }
    Ok(())
}

/// LVRM 3b: two VRs of `--vr-instances` instances each, each fed its own
/// flow at half the load (overloaded, as `scale`, by what the cores
/// take); T = 2 x min(T1, T2) against the ideal, per policy. With one
/// instance per VR the policy has no choice: one row, policy `-`.
fn among_vrs(args: &MonitorArgs, out: &mut Vec<Rec>) -> Result<()> {
    let n = args.vr_instances.clamp(1, SLOTS);
    let costs = vec![args.cost_ns; usize::from(n)];
    let can = capacity(args.cost_ns) * (2.0 * f64::from(n)).min(cpu::cpus() as f64);
    let policies: Vec<Option<Policy>> = if n == 1 {
        vec![None]
    } else {
        args.policies.iter().copied().map(Some).collect()
    };
    for policy in policies {
        let by = policy.unwrap_or(Policy::Flow);
        let offered = args.overload * can;
        let poll = PollConfig::default();
        let mut rig = Rig::start_many(args, 2, &costs, by, offered, poll, (0, 0))?;
        std::thread::sleep(Duration::from_secs_f64(args.warmup));
        let (each, reorder) = rig.window_each(args.seconds);
        let offered_now = rig.offered;
        let used = rig.cores_used();
        let lost = rig.finish()?;
        let t = 2.0 * each.iter().copied().fold(f64::INFINITY, f64::min);
        let ideal = offered_now.min(can);
        out.push(Rec {
            experiment: "vrs",
            policy: policy.map(Policy::name),
            instances: n,
            cores: used,
            vrs: Some(each.len()),
            offered_mpps: offered_now / 1e6,
            mpps: t / 1e6,
            t1_mpps: Some(each[0] / 1e6),
            t2_mpps: Some(each[1] / 1e6),
            ideal_mpps: Some(ideal / 1e6),
            ratio: Some(t / ideal),
            reorder_pct: Some(reorder),
            lost: Some(lost),
            ..Rec::default()
        });
        progress(args, out);
    }
    Ok(())
}

fn progress(args: &MonitorArgs, out: &[Rec]) {
    if args.json {
        return;
    }
    if let Some(r) = out.last() {
        eprintln!("  {}", line(r));
    }
}

fn line(r: &Rec) -> String {
    let opt = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |v| format!("{v:.d$}"));
    match r.experiment {
        "realloc" => format!(
            "{:<8} {:<7} inst {} cores {}: worker {} us, gap {} us (before {} us), reaction {} us, spawn {} ms, dropped {}, lost {}",
            r.experiment,
            r.change.unwrap_or("-"),
            r.instances,
            r.cores,
            opt(r.disruption_us, 1),
            opt(r.gap_us, 0),
            opt(r.gap_before_us, 0),
            opt(r.reaction_us, 0),
            opt(r.spawn_ms, 1),
            r.dropped.map_or("-".into(), |d| d.to_string()),
            r.lost.map_or("-".into(), |d| d.to_string()),
        ),
        "control" => format!(
            "{:<8} {:<8} {:<4} p50 {} us p99 {} us ({} messages; forwarded {:.3} Mpps)",
            r.experiment,
            r.path.unwrap_or("-"),
            r.load.unwrap_or("-"),
            opt(r.latency_us_p50, 2),
            opt(r.latency_us_p99, 2),
            r.messages.unwrap_or(0),
            r.mpps
        ),
        "dynamic" => format!(
            "{:<8} t {:>6.1} s offered {:>7.4} Mpps arrival {} Mpps instances {} forwarded {:>7.4} Mpps",
            r.experiment,
            r.t.unwrap_or(0.0),
            r.offered_mpps,
            opt(r.arrival_mpps, 4),
            r.instances,
            r.mpps
        ),
        "vrs" => format!(
            "{:<8} {:<8} inst {} x {} cores {}: offered {:>7.4} Mpps T1 {} T2 {} T {:>7.4} Mpps ideal {} ratio {} reordered {}% lost {}",
            r.experiment,
            r.policy.unwrap_or("-"),
            r.vrs.unwrap_or(0),
            r.instances,
            r.cores,
            r.offered_mpps,
            opt(r.t1_mpps, 4),
            opt(r.t2_mpps, 4),
            r.mpps,
            opt(r.ideal_mpps, 4),
            opt(r.ratio, 3),
            opt(r.reorder_pct, 3),
            r.lost.map_or("-".into(), |d| d.to_string()),
        ),
        _ => format!(
            "{:<8} {:<8} inst {} cores {}: offered {:>7.4} Mpps forwarded {:>7.4} Mpps ratio {} reordered {}%",
            r.experiment,
            r.policy.unwrap_or("-"),
            r.instances,
            r.cores,
            r.offered_mpps,
            r.mpps,
            opt(r.ratio, 3),
            opt(r.reorder_pct, 3),
        ),
    }
}

/// Run the benchmark.
pub fn run(args: &MonitorArgs) -> Result<()> {
    if args.cost_ns == 0 {
        bail!("--cost-ns must be > 0: the experiments need instances that are the bottleneck");
    }
    if !(args.overload.is_finite() && args.overload > 0.0) {
        bail!("--overload must be a positive number");
    }
    if args.seconds <= 0.0 || args.step_seconds <= 0.0 || args.period <= 0.0 {
        bail!("--seconds, --step-seconds and --period must be positive");
    }
    if args.host_cpu >= cpu::cpus() {
        bail!(
            "--host-cpu {} but the machine has {} CPUs",
            args.host_cpu,
            cpu::cpus()
        );
    }
    let mut out = Vec::new();
    for &e in &args.experiments {
        match e {
            Experiment::Scale => scale(args, &mut out)?,
            Experiment::Balance => balance(args, false, &mut out)?,
            Experiment::Unequal => balance(args, true, &mut out)?,
            Experiment::Realloc => realloc(args, &mut out)?,
            Experiment::Control => control(args, &mut out)?,
            Experiment::Dynamic => dynamic(args, &mut out)?,
            Experiment::Vrs => among_vrs(args, &mut out)?,
        }
    }
    if let Some(png) = &args.plot {
        let json = serde_json::to_string(&out)?;
        let mut child = std::process::Command::new("scripts/plot-monitor")
            .arg(png)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .context("scripts/plot-monitor (run from the repository root)")?;
        use std::io::Write;
        child
            .stdin
            .take()
            .context("stdin")?
            .write_all(json.as_bytes())?;
        let st = child.wait()?;
        if !st.success() {
            bail!("plot failed ({st})");
        }
        eprintln!("plot: {}", png.display());
    }
    if args.json {
        let report = Report {
            bench: "monitor",
            machine: Machine::this(),
            cost_ns: args.cost_ns,
            results: &out,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let m = Machine::this();
        println!(
            "vrhost bench monitor  {}  {} ({} cores)  kernel {}  cost {} ns/packet",
            m.date, m.cpu, m.cores, m.kernel, args.cost_ns
        );
        for r in &out {
            println!("{}", line(r));
        }
    }
    Ok(())
}
