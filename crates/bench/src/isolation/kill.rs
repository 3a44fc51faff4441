//! Kills under load: a VR killed and restarted while the others forward.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{
    Gen, IsolationArgs, KillRecord, Running, Tenant, capacity, classified, config, forwarded,
    router, u, vr,
};
use crate::report::percentile;
use crate::{Context, Result};

/// The kill experiment (see the module doc).
pub(super) fn kill_run(args: &IsolationArgs, dir: &Path) -> Result<KillRecord> {
    let tenants: Vec<Tenant> = (0..4).map(|i| router(i, "gen")).collect();
    let (honest, victim) = (&tenants[..3], &tenants[3].name);
    let cap = capacity(args, dir, "kill-capacity", &tenants)?;
    let pps = ((cap as f64 * args.load) as u64).max(1000);
    // Frames for every kill and its gap, and a second on each side.
    let frames = (pps as f64 * (args.kills as f64 * args.kill_gap + 2.0)) as u64;
    let g = Gen {
        name: "gen".into(),
        to: vec![0, 1, 2, 3],
        pps: Some(pps),
        limit: Some(frames),
    };
    let r = Running::start(dir, "kill", &config(args, &[g], &tenants)?)?;
    std::thread::sleep(Duration::from_secs(1));
    let mut times = Vec::new();
    let mut not_recovered = 0;
    for _ in 0..args.kills {
        let next = Instant::now() + Duration::from_secs_f64(args.kill_gap);
        match crate::soak::kill_and_time(&r.client, victim)? {
            Some(ms) => times.push(ms),
            None => not_recovered += 1,
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let last = r
        .drained(honest, frames, Duration::from_secs(30))
        .context("kill")?;
    let host_alive = r
        .client
        .get("/v1/health")
        .and_then(|a| a.decode::<Value>())
        .is_ok_and(|h| h["slot_accounting"].as_array().is_some_and(Vec::is_empty));
    let daemon_exit_ok = r.stop_checked("kill");
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let q = |p| percentile(&sorted, p).unwrap_or(0.0);
    let v = vr(&last, victim);
    Ok(KillRecord {
        experiment: "kill",
        run: "kills",
        capacity_pps: cap,
        offered_pps: pps,
        frames,
        kills: args.kills as u64,
        not_recovered,
        restart_ms_p50: q(0.5),
        restart_ms_p90: q(0.9),
        restart_ms_p99: q(0.99),
        restart_ms_max: sorted.last().copied().unwrap_or(0.0),
        restart_ms: times,
        victim_restarts: u(&v["restarts"]),
        victim_reclaimed: u(&v["reclaimed"]),
        victim_down_drops: u(&v["ingress_drops"]["vr_down"]),
        honest_vrs: honest.len(),
        honest_classified: honest.iter().map(|t| classified(&last, &t.name)).sum(),
        honest_forwarded: honest.iter().map(|t| forwarded(&last, &t.name)).sum(),
        honest_lost: honest
            .iter()
            .map(|t| classified(&last, &t.name).saturating_sub(forwarded(&last, &t.name)))
            .sum(),
        host_alive,
        daemon_exit_ok,
    })
}

/// Host ingress drop reasons, as the stats name them.
pub(super) const INGRESS: [&str; 7] = [
    "malformed",
    "no_match",
    "vr_down",
    "pool_empty",
    "ring_full",
    "too_big",
    "rate_limited",
];
