//! The isolation bench's tables: one section per experiment.

use serde_json::Value;

use super::{f, u};
use crate::report::{Column, heading, row};

pub(super) fn print_table(results: &[Value]) {
    let of = |e: &str| -> Vec<&Value> { results.iter().filter(|r| r["experiment"] == e).collect() };
    print_hostile(&of("hostile"));
    for r in of("kill") {
        print_kill(r);
    }
    print_overload(&of("overload"));
    print_fairness(&of("fairness"));
}

/// The `run` field of a result.
fn run(r: &Value) -> &str {
    r["run"].as_str().unwrap_or("")
}

/// How the daemon exited.
fn exit(r: &Value) -> &'static str {
    if r["daemon_exit_ok"] == true {
        "ok"
    } else {
        "FAIL"
    }
}

/// `r`'s counters whose names start with `prefix` (only the non-zero ones
/// if `nonzero`), as "name count, ..." without the prefix.
fn counters(r: &Value, prefix: &str, nonzero: bool) -> String {
    let named: Vec<String> = r
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            k.strip_prefix(prefix)
                .filter(|_| !nonzero || u(v) > 0)
                .map(|k| format!("{k} {}", u(v)))
        })
        .collect();
    named.join(", ")
}

const HOSTILE: [Column; 12] = [
    Column::left("run", 11),
    Column::right("alive", 6),
    Column::right("exit", 5),
    Column::right("honest in", 10),
    Column::right("honest out", 10),
    Column::right("lost", 6),
    Column::right("4th state", 12),
    Column::right("4th out", 11),
    Column::right("violations", 11),
    Column::right("viol/s", 12).decimals(0),
    Column::right("hostile rnd/s", 13).decimals(0),
    Column::right("regions", 7),
];

fn print_hostile(hostile: &[&Value]) {
    let Some(first) = hostile.first() else {
        return;
    };
    println!(
        "hostile: 3 honest router VRs + a 4th VR on one port, capacity {} pps, offered {} pps, {} frames",
        u(&first["capacity_pps"]),
        u(&first["offered_pps"]),
        u(&first["frames"])
    );
    println!("{}", heading(&HOSTILE));
    for r in hostile {
        println!(
            "{}",
            row(
                &HOSTILE,
                &[
                    &run(r),
                    &r["host_alive"],
                    &exit(r),
                    &u(&r["honest_classified"]),
                    &u(&r["honest_forwarded"]),
                    &u(&r["honest_lost"]),
                    &r["neighbour_state"].as_str().unwrap_or(""),
                    &u(&r["neighbour_forwarded"]),
                    &u(&r["neighbour_violations"]),
                    &f(&r["neighbour_violations_per_s"]),
                    &f(&r["hostile_rounds_per_s"]),
                    &u(&r["hostile_regions_mapped"]),
                ]
            )
        );
    }
    for r in hostile {
        println!(
            "  {}: honest ingress drops: {}; honest VR drops {}; 4th VR ingress drops: {}",
            run(r),
            counters(r, "honest_ingress_drop_", true),
            u(&r["honest_vr_dropped"]),
            counters(r, "neighbour_ingress_drop_", true)
        );
    }
    for r in hostile.iter().filter(|r| r["neighbour"] == "hostile") {
        println!(
            "  {} violations by kind: {}",
            run(r),
            counters(r, "violations_", false)
        );
    }
    println!();
}

fn print_kill(r: &Value) {
    println!(
        "kill: 3 honest router VRs + a victim router on one port, capacity {} pps, offered {} pps, {} frames",
        u(&r["capacity_pps"]),
        u(&r["offered_pps"]),
        u(&r["frames"])
    );
    println!(
        "kills {} (not recovered {}), victim restarts {}, slots reclaimed {}, its frames dropped while down {}",
        u(&r["kills"]),
        u(&r["not_recovered"]),
        u(&r["victim_restarts"]),
        u(&r["victim_reclaimed"]),
        u(&r["victim_down_drops"])
    );
    println!(
        "restart to forwarding, ms: p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
        f(&r["restart_ms_p50"]),
        f(&r["restart_ms_p90"]),
        f(&r["restart_ms_p99"]),
        f(&r["restart_ms_max"])
    );
    let all: Vec<String> = r["restart_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| format!("{:.1}", f(v)))
        .collect();
    println!("  every kill: {}", all.join(" "));
    println!(
        "honest in {} out {} lost {}; host alive {}, exit {}",
        u(&r["honest_classified"]),
        u(&r["honest_forwarded"]),
        u(&r["honest_lost"]),
        r["host_alive"],
        exit(r)
    );
    println!();
}

const OVERLOAD: [Column; 14] = [
    Column::left("run", 9),
    Column::right("offered/s", 11),
    Column::right("taken/s", 11).decimals(0),
    Column::right("fwd/s", 11).decimals(0),
    Column::right("/peak", 7).decimals(3),
    Column::right("not taken/s", 11).decimals(0),
    Column::right("pool_empty/s", 11).decimals(0),
    Column::right("ring_full/s", 11).decimals(0),
    Column::right("vr drop/s", 9).decimals(0),
    Column::right("wk wait ms/s", 12).decimals(2),
    Column::right("vr wait ms/s", 12).decimals(2),
    Column::right("vr preempt/s", 12).decimals(1),
    Column::right("vr yield+sleep/s", 16).decimals(0),
    Column::right("steal ms/s", 10).decimals(2),
];

fn print_overload(overload: &[&Value]) {
    let Some(first) = overload.first() else {
        return;
    };
    println!(
        "overload: {} router VR(s), one port, peak {:.0} pps",
        u(&first["vrs"]),
        f(&first["peak_pps"])
    );
    println!("{}", heading(&OVERLOAD));
    for r in overload {
        let offered = match u(&r["offered_pps"]) {
            0 => "unpaced".to_string(),
            p => p.to_string(),
        };
        println!(
            "{}",
            row(
                &OVERLOAD,
                &[
                    &run(r),
                    &offered,
                    &f(&r["taken_pps"]),
                    &f(&r["forwarded_pps"]),
                    &f(&r["ratio_to_peak"]),
                    &f(&r["not_taken_pps"]),
                    &f(&r["ingress_pool_empty_pps"]),
                    &f(&r["ingress_ring_full_pps"]),
                    &f(&r["vr_dropped_pps"]),
                    &f(&r["sched"]["worker_wait_ms"]),
                    &f(&r["sched"]["vr_wait_ms"]),
                    &f(&r["sched"]["vr_preempted"]),
                    &f(&r["sched"]["vr_switches"]),
                    &(f(&r["sched"]["worker_cpu_steal_ms"]) + f(&r["sched"]["vr_cpu_steal_ms"])),
                ]
            )
        );
    }
    println!();
}

const FAIRNESS: [Column; 10] = [
    Column::left("variant", 12),
    Column::left("run", 20),
    Column::right("offered/s", 11),
    Column::right("quiet in/s", 11).decimals(0),
    Column::right("quiet out/s", 11).decimals(0),
    Column::right("q lost/s", 10).decimals(0),
    Column::right("ratio", 7).decimals(3),
    Column::right("noisy in/s", 11).decimals(0),
    Column::right("noisy out/s", 11).decimals(0),
    Column::right("overload", 8).decimals(2),
];

fn print_fairness(fair: &[&Value]) {
    if fair.is_empty() {
        return;
    }
    println!(
        "fairness: quiet tenant t0 (paced), noisy tenant t1 (unpaced; one_port_xdp: limited by its select bucket)"
    );
    println!("{}", heading(&FAIRNESS));
    for r in fair {
        println!(
            "{}",
            row(
                &FAIRNESS,
                &[
                    &r["variant"].as_str().unwrap_or(""),
                    &run(r),
                    &u(&r["offered_pps"]),
                    &f(&r["quiet_classified_pps"]),
                    &f(&r["quiet_forwarded_pps"]),
                    &f(&r["quiet_lost_pps"]),
                    &f(&r["quiet_ratio"]),
                    &f(&r["noisy_classified_pps"]),
                    &f(&r["noisy_forwarded_pps"]),
                    &f(&r["overload"]),
                ]
            )
        );
    }
}
