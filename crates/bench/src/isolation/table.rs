//! The isolation bench's tables.

use super::*;

pub(super) fn print_table(results: &[Value]) {
    let of = |e: &str| -> Vec<&Value> { results.iter().filter(|r| r["experiment"] == e).collect() };
    let hostile = of("hostile");
    if let Some(first) = hostile.first() {
        println!(
            "hostile: 3 honest router VRs + a 4th VR on one port, capacity {} pps, offered {} pps, {} frames",
            u(&first["capacity_pps"]),
            u(&first["offered_pps"]),
            u(&first["frames"])
        );
        println!(
            "{:<11} {:>6} {:>5} {:>10} {:>10} {:>6} {:>12} {:>11} {:>11} {:>12} {:>13} {:>7}",
            "run",
            "alive",
            "exit",
            "honest in",
            "honest out",
            "lost",
            "4th state",
            "4th out",
            "violations",
            "viol/s",
            "hostile rnd/s",
            "regions"
        );
        for r in &hostile {
            println!(
                "{:<11} {:>6} {:>5} {:>10} {:>10} {:>6} {:>12} {:>11} {:>11} {:>12.0} {:>13.0} {:>7}",
                r["run"].as_str().unwrap_or(""),
                r["host_alive"],
                if r["daemon_exit_ok"] == true {
                    "ok"
                } else {
                    "FAIL"
                },
                u(&r["honest_classified"]),
                u(&r["honest_forwarded"]),
                u(&r["honest_lost"]),
                r["neighbour_state"].as_str().unwrap_or(""),
                u(&r["neighbour_forwarded"]),
                u(&r["neighbour_violations"]),
                f(&r["neighbour_violations_per_s"]),
                f(&r["hostile_rounds_per_s"]),
                u(&r["hostile_regions_mapped"]),
            );
        }
        for r in &hostile {
            let by = |prefix: &str| -> String {
                r.as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| {
                        k.strip_prefix(prefix)
                            .filter(|_| u(v) > 0)
                            .map(|k| format!("{k} {}", u(v)))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            println!(
                "  {}: honest ingress drops: {}; honest VR drops {}; 4th VR ingress drops: {}",
                r["run"].as_str().unwrap_or(""),
                by("honest_ingress_drop_"),
                u(&r["honest_vr_dropped"]),
                by("neighbour_ingress_drop_")
            );
        }
        for r in hostile.iter().filter(|r| r["neighbour"] == "hostile") {
            let kinds: Vec<String> = r
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| {
                    k.strip_prefix("violations_")
                        .map(|k| format!("{k} {}", u(v)))
                })
                .collect();
            println!(
                "  {} violations by kind: {}",
                r["run"].as_str().unwrap_or(""),
                kinds.join(", ")
            );
        }
        println!();
    }
    for r in of("kill") {
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
            if r["daemon_exit_ok"] == true {
                "ok"
            } else {
                "FAIL"
            }
        );
        println!();
    }
    let overload = of("overload");
    if !overload.is_empty() {
        println!(
            "overload: {} router VR(s), one port, peak {:.0} pps",
            u(&overload[0]["vrs"]),
            f(&overload[0]["peak_pps"])
        );
        println!(
            "{:<9} {:>11} {:>11} {:>11} {:>7} {:>11} {:>11} {:>11} {:>9}",
            "run",
            "offered/s",
            "taken/s",
            "fwd/s",
            "/peak",
            "not taken/s",
            "pool_empty/s",
            "ring_full/s",
            "vr drop/s"
        );
        for r in &overload {
            println!(
                "{:<9} {:>11} {:>11.0} {:>11.0} {:>7.3} {:>11.0} {:>11.0} {:>11.0} {:>9.0}",
                r["run"].as_str().unwrap_or(""),
                match u(&r["offered_pps"]) {
                    0 => "unpaced".to_string(),
                    p => p.to_string(),
                },
                f(&r["taken_pps"]),
                f(&r["forwarded_pps"]),
                f(&r["ratio_to_peak"]),
                f(&r["not_taken_pps"]),
                f(&r["ingress_pool_empty_pps"]),
                f(&r["ingress_ring_full_pps"]),
                f(&r["vr_dropped_pps"]),
            );
        }
        println!();
    }
    let fair = of("fairness");
    if !fair.is_empty() {
        println!("fairness: quiet tenant t0 (paced), noisy tenant t1 (unpaced)");
        println!(
            "{:<10} {:<11} {:>11} {:>11} {:>11} {:>10} {:>7} {:>11} {:>11}",
            "variant",
            "run",
            "offered/s",
            "quiet in/s",
            "quiet out/s",
            "q lost/s",
            "ratio",
            "noisy in/s",
            "noisy out/s"
        );
        for r in &fair {
            println!(
                "{:<10} {:<11} {:>11} {:>11.0} {:>11.0} {:>10.0} {:>7.3} {:>11.0} {:>11.0}",
                r["variant"].as_str().unwrap_or(""),
                r["run"].as_str().unwrap_or(""),
                u(&r["offered_pps"]),
                f(&r["quiet_classified_pps"]),
                f(&r["quiet_forwarded_pps"]),
                f(&r["quiet_lost_pps"]),
                f(&r["quiet_ratio"]),
                f(&r["noisy_classified_pps"]),
                f(&r["noisy_forwarded_pps"]),
            );
        }
    }
}
