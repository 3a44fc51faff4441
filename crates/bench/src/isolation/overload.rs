//! The overload and fairness experiments.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::kill::INGRESS;
use super::{
    FairnessRecord, Gen, IsolationArgs, OverloadRecord, Running, Tenant, classified, config,
    forwarded, port, rate, ratio, router, u, vr,
};
use crate::Result;

pub(super) fn set_mode(p: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// One overload run: `vrs` routers, the generator at `pps` (None:
/// unpaced).
pub(super) fn overload_run(
    args: &IsolationArgs,
    dir: &Path,
    run: &'static str,
    pps: Option<u64>,
) -> Result<OverloadRecord> {
    let tenants: Vec<Tenant> = (0..args.overload_vrs).map(|i| router(i, "gen")).collect();
    let g = Gen {
        name: "gen".into(),
        to: tenants.iter().map(|t| t.i).collect(),
        pps,
        limit: None,
    };
    let name = format!("overload-{run}-{}", pps.unwrap_or(0));
    let r = Running::start(dir, &name, &config(args, &[g], &tenants)?)?;
    let (a, b, dt, sa, sb) = r.window_sched(0.5, args.seconds)?;
    let daemon = r.daemon.pid();
    r.daemon.stop()?;
    let worker = sa.rates(&sb, |t| t.comm.starts_with("vrhost-worker"));
    let vrs = sa.rates(&sb, |t| t.pid != daemon);
    let vr_cpu = if args.cpu == 0 { 1 } else { 0 };
    let sched = OverloadSched {
        worker_wait_ms: worker.wait_ms,
        worker_preempted: worker.involuntary,
        vr_wait_ms: vrs.wait_ms,
        vr_preempted: vrs.involuntary,
        vr_switches: vrs.voluntary,
        worker_cpu_steal_ms: sa.steal_ms(&sb, args.cpu),
        vr_cpu_steal_ms: sa.steal_ms(&sb, vr_cpu),
    };
    let all = |f: fn(&Value, &str) -> u64| {
        let names: Vec<String> = tenants.iter().map(|t| t.name.clone()).collect();
        move |s: &Value| names.iter().map(|n| f(s, n)).sum::<u64>()
    };
    let taken = rate(&a, &b, dt, |s| u(&port(s, "gen")["rx_packets"]));
    let mut ingress = BTreeMap::new();
    for reason in INGRESS {
        let per_vr = |s: &Value| {
            tenants
                .iter()
                .map(|t| u(&vr(s, &t.name)["ingress_drops"][reason]))
                .sum::<u64>()
                + u(&s["host"]["ingress_drops"][reason])
        };
        ingress.insert(format!("ingress_{reason}_pps"), rate(&a, &b, dt, per_vr));
    }
    Ok(OverloadRecord {
        experiment: "overload",
        run,
        vrs: tenants.len(),
        offered_pps: pps.unwrap_or(0),
        taken_pps: taken,
        forwarded_pps: rate(&a, &b, dt, all(forwarded)),
        peak_pps: 0.0,
        ratio_to_peak: 0.0,
        not_taken_pps: pps.map_or(0.0, |p| (p as f64 - taken).max(0.0)),
        vr_dropped_pps: rate(&a, &b, dt, all(|s, n| u(&vr(s, n)["vr_dropped"]))),
        ingress,
        sched,
    })
}

pub(super) fn overload(args: &IsolationArgs, dir: &Path) -> Result<Vec<OverloadRecord>> {
    let mut out = vec![overload_run(args, dir, "unpaced", None)?];
    let f0 = out[0].forwarded_pps;
    for load in [0.25, 0.5, 0.75, 1.0] {
        let pps = ((f0 * load) as u64).max(1000);
        out.push(overload_run(args, dir, "sweep", Some(pps))?);
    }
    // The highest forwarded rate seen, unpaced or paced.
    let peak = out.iter().map(|r| r.forwarded_pps).fold(0.0, f64::max);
    let pps = ((2.0 * peak) as u64).max(1000);
    out.push(overload_run(args, dir, "overload", Some(pps))?);
    for r in &mut out {
        r.peak_pps = peak;
        r.ratio_to_peak = ratio(r.forwarded_pps, peak);
    }
    Ok(out)
}

/// One fairness run: the quiet tenant t0, the noisy tenant t1.
pub(super) fn fairness_run(
    args: &IsolationArgs,
    dir: &Path,
    variant: &'static str,
    run: &'static str,
    gens: &[Gen],
    offered: u64,
) -> Result<FairnessRecord> {
    let port_of = |i: usize| {
        gens.iter()
            .find(|g| g.to.contains(&i))
            .map_or_else(|| gens[0].name.clone(), |g| g.name.clone())
    };
    let tenants = [router(0, &port_of(0)), router(1, &port_of(1))];
    let r = Running::start(
        dir,
        &format!("fairness-{variant}-{run}"),
        &config(args, gens, &tenants)?,
    )?;
    let (a, b, dt) = r.window(0.5, args.seconds)?;
    r.daemon.stop()?;
    let qc = rate(&a, &b, dt, |s| classified(s, "t0"));
    let qf = rate(&a, &b, dt, |s| forwarded(s, "t0"));
    Ok(FairnessRecord {
        experiment: "fairness",
        variant,
        run,
        offered_pps: offered,
        quiet_classified_pps: qc,
        quiet_forwarded_pps: qf,
        quiet_lost_pps: rate(&a, &b, dt, |s| {
            classified(s, "t0").saturating_sub(forwarded(s, "t0"))
        }),
        quiet_ratio: 0.0,
        noisy_classified_pps: rate(&a, &b, dt, |s| classified(s, "t1")),
        noisy_forwarded_pps: rate(&a, &b, dt, |s| forwarded(s, "t1")),
        ..FairnessRecord::default()
    })
}

pub(super) fn fairness(args: &IsolationArgs, dir: &Path, cap1: u64) -> Result<Vec<FairnessRecord>> {
    let quiet = ((cap1 as f64 * args.quiet_load) as u64).max(1000);
    let quiet_gen = Gen {
        name: "gq".into(),
        to: vec![0],
        pps: Some(quiet),
        limit: None,
    };
    let noisy = |limit: Option<u64>| Gen {
        name: "gn".into(),
        to: vec![1],
        pps: None,
        limit,
    };
    let mut out = Vec::new();
    // Two ports: the noisy one idle (limit 0), then unpaced.
    let alone = fairness_run(
        args,
        dir,
        "two_ports",
        "alone",
        &[quiet_gen.clone(), noisy(Some(0))],
        quiet,
    )?;
    let mut with = fairness_run(
        args,
        dir,
        "two_ports",
        "with_noise",
        &[quiet_gen, noisy(None)],
        quiet,
    )?;
    with.quiet_ratio = ratio(with.quiet_forwarded_pps, alone.quiet_forwarded_pps);
    out.extend([alone, with]);
    // One port: alone, the quiet frames only at `quiet`; with noise, 1
    // quiet to k-1 noisy at k x `quiet` (>= 2 x capacity).
    let k = ((2.0 * cap1 as f64 / quiet as f64).ceil() as usize).max(2);
    let one = |to: Vec<usize>, pps: u64| Gen {
        name: "gen".into(),
        to,
        pps: Some(pps),
        limit: None,
    };
    let alone = fairness_run(
        args,
        dir,
        "one_port",
        "alone",
        &[one(vec![0], quiet)],
        quiet,
    )?;
    let mut mix = vec![0];
    mix.extend(std::iter::repeat_n(1, k - 1));
    let port_pps = quiet * k as u64;
    let mut with = fairness_run(
        args,
        dir,
        "one_port",
        "with_noise",
        &[one(mix, port_pps)],
        port_pps,
    )?;
    with.quiet_ratio = ratio(with.quiet_forwarded_pps, alone.quiet_forwarded_pps);
    out.extend([alone, with]);
    Ok(out)
}

/// Per second of an overload run's window: the scheduler's figures of the
/// host worker and of the VR processes, and the steal time of their CPUs.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct OverloadSched {
    /// The worker thread's milliseconds waiting for its CPU while runnable.
    pub worker_wait_ms: f64,
    /// The worker's preemptions.
    pub worker_preempted: f64,
    /// The VR processes' milliseconds waiting for their CPU while runnable.
    pub vr_wait_ms: f64,
    /// The VR processes' preemptions.
    pub vr_preempted: f64,
    /// The VR processes' voluntary switches (sleeps, yields).
    pub vr_switches: f64,
    /// Steal time of the worker's CPU, milliseconds.
    pub worker_cpu_steal_ms: f64,
    /// Steal time of the VRs' CPU, milliseconds.
    pub vr_cpu_steal_ms: f64,
}
