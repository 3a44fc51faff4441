//! The hostile-VR experiment: honest VRs beside a VR writing garbage into its rings.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use vrhost_testvr::hostile::HostileReport;

use super::kill::INGRESS;
use super::overload::set_mode;
use super::{
    Gen, HostileRecord, IsolationArgs, Kind, Running, Tenant, classified, config, forwarded,
    router, sum_map, u, vr,
};
use crate::{Context, Result};

pub(super) fn hostile_run(
    args: &IsolationArgs,
    dir: &Path,
    cap: u64,
    run: &'static str,
) -> Result<HostileRecord> {
    let honest: Vec<Tenant> = (0..3).map(|i| router(i, "gen")).collect();
    let report = dir.join(format!("hostile-{run}.json"));
    let fourth = fourth_vr(args, run, &report)?;
    let mut tenants = honest.clone();
    tenants.push(fourth.clone());
    let pps = ((cap as f64 * args.load) as u64).max(1000);
    let frames = (pps as f64 * args.seconds) as u64;
    let g = Gen {
        name: "gen".into(),
        to: vec![0, 1, 2, 3],
        pps: Some(pps),
        limit: Some(frames),
    };
    let r = Running::start(
        dir,
        &format!("hostile-{run}"),
        &config(args, &[g], &tenants)?,
    )?;
    let t0 = Instant::now();
    let last = r
        .drained(
            &honest,
            frames,
            Duration::from_secs_f64(args.seconds * 3.0 + 30.0),
        )
        .with_context(|| format!("hostile {run}"))?;
    let seconds = t0.elapsed().as_secs_f64();
    let host_alive = r
        .client
        .get("/v1/health")
        .and_then(|a| a.decode::<Value>())
        .is_ok();
    let daemon_exit_ok = r.stop_checked(&format!("hostile {run}"));
    let rep: Option<HostileReport> = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let rep = rep.unwrap_or_default();
    let lost: Vec<u64> = honest
        .iter()
        .map(|t| classified(&last, &t.name).saturating_sub(forwarded(&last, &t.name)))
        .collect();
    let n = vr(&last, &fourth.name);
    let viol = sum_map(&n["violations"]);
    Ok(HostileRecord {
        experiment: "hostile",
        run,
        capacity_pps: cap,
        offered_pps: pps,
        frames,
        host_alive,
        daemon_exit_ok,
        honest_vrs: honest.len(),
        honest_classified: honest.iter().map(|t| classified(&last, &t.name)).sum(),
        honest_forwarded: honest.iter().map(|t| forwarded(&last, &t.name)).sum(),
        honest_lost: lost.iter().sum(),
        honest_lost_max: lost.iter().copied().max().unwrap_or(0),
        honest_violations: honest
            .iter()
            .map(|t| sum_map(&vr(&last, &t.name)["violations"]))
            .sum(),
        neighbour: match fourth.kind {
            Kind::Router => "router",
            Kind::Hostile { spinner: true, .. } => "spinner",
            Kind::Hostile { .. } => "hostile",
        },
        neighbour_state: vr_state(&last, &fourth.name),
        neighbour_classified: classified(&last, &fourth.name),
        neighbour_forwarded: forwarded(&last, &fourth.name),
        neighbour_ingress_drops: sum_map(&n["ingress_drops"]),
        neighbour_vr_dropped: u(&n["vr_dropped"]),
        neighbour_violations: viol,
        neighbour_violations_per_s: viol as f64 / seconds,
        neighbour_kicks: u(&n["kicks"]),
        neighbour_quarantines: u(&n["quarantines"]),
        neighbour_exits: u(&n["exits"]),
        neighbour_restarts: u(&n["restarts"]),
        hostile_rounds: rep.rounds,
        hostile_rounds_per_s: if rep.millis > 0 {
            rep.rounds as f64 * 1e3 / rep.millis as f64
        } else {
            0.0
        },
        hostile_taken: rep.taken,
        hostile_returned_ok: rep.returned_ok,
        hostile_bad_writes: rep.bad_writes,
        hostile_regions_mapped: rep.regions_mapped,
        hostile_region_fds: rep.region_fds,
        seconds,
        by_kind: by_kind(&last, &honest, &fourth, &rep),
    })
}

/// The 4th VR of `run`: an honest router in the reference run, else the
/// hostile program writing its report to `report`.
fn fourth_vr(args: &IsolationArgs, run: &str, report: &Path) -> Result<Tenant> {
    if run == "reference" {
        return Ok(router(3, "gen"));
    }
    // The hostile VR runs as its own user when confined: give it a
    // file it may write.
    std::fs::write(report, b"")?;
    set_mode(report, 0o666)?;
    Ok(Tenant {
        i: 3,
        name: "evil".into(),
        port: "gen".into(),
        kind: Kind::Hostile {
            report: report.to_path_buf(),
            seed: args.seed,
            quarantine_after: (run != "quarantine").then_some(0),
            cpu_quota: (run == "hostile_quota").then_some(args.hostile_quota),
            spinner: run == "spinner",
        },
    })
}

/// The state the daemon shows for the VR `name`, "" if none.
fn vr_state(s: &Value, name: &str) -> String {
    s["vrs"]
        .as_array()
        .and_then(|a| a.iter().find(|v| v["name"] == name))
        .and_then(|v| v["state"].as_str())
        .unwrap_or("")
        .to_string()
}

/// The record's counters by kind: ingress drops by reason (the honest VRs'
/// summed, the 4th VR's), the honest VRs' own drops, the 4th VR's
/// violations, and the hostile program's cases.
fn by_kind(
    last: &Value,
    honest: &[Tenant],
    fourth: &Tenant,
    rep: &HostileReport,
) -> BTreeMap<String, u64> {
    let mut by_kind = BTreeMap::new();
    for reason in INGRESS {
        let h: u64 = honest
            .iter()
            .map(|t| u(&vr(last, &t.name)["ingress_drops"][reason]))
            .sum();
        by_kind.insert(format!("honest_ingress_drop_{reason}"), h);
        by_kind.insert(
            format!("neighbour_ingress_drop_{reason}"),
            u(&vr(last, &fourth.name)["ingress_drops"][reason]),
        );
    }
    by_kind.insert(
        "honest_vr_dropped".into(),
        honest
            .iter()
            .map(|t| u(&vr(last, &t.name)["vr_dropped"]))
            .sum(),
    );
    if let Some(o) = vr(last, &fourth.name)["violations"].as_object() {
        for (k, v) in o {
            by_kind.insert(format!("violations_{k}"), u(v));
        }
    }
    for (k, v) in &rep.cases {
        by_kind.insert(format!("hostile_case_{k}"), *v);
    }
    by_kind
}
