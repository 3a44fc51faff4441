//! `vrhost bench memory` runs and reports what it measured: both address
//! families, well-formed records, frames forwarded through VR processes,
//! two IPv6 tenants told apart by source, the VRs' turns counted (tiny
//! windows: this checks the command, not a figure).

use std::process::Command;

use serde_json::Value;

fn bench(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args(["bench", "memory", "--json", "--repeat", "1"])
        .args(["--seconds", "0.5", "--warmup", "0.2"])
        .args(["--no-idle-beside", "--no-pool-sweep", "--no-idle"])
        .args(args)
        .output()
        .expect("run vrhost bench memory");
    assert!(
        out.status.success(),
        "bench memory failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

#[test]
fn ipv6_points_beside_ipv4_ones() {
    let r = bench(&[
        "--family",
        "ipv4,ipv6",
        "--modes",
        "inproc,shm",
        "--vrs",
        "1,2",
    ]);
    assert_eq!(r["bench"], "memory");
    let results = r["results"].as_array().expect("results");
    let points: Vec<(String, String, u64)> = results
        .iter()
        .map(|p| {
            assert!(p["mpps"].as_f64().unwrap() >= 0.0, "{p}");
            assert_eq!(p["violations"], 0, "{p}");
            assert_eq!(p["routes"], 2, "{p}");
            // The slots a VR holds are within its pool.
            let held = p["held_per_vr"].as_f64().unwrap();
            assert!(
                (0.0..=p["pool_slots"].as_f64().unwrap()).contains(&held),
                "{p}"
            );
            // The line's round trip between the host's and the VRs' CPU
            // (0 and 1 here): measured, so more than nothing, on a
            // machine with both.
            let rtt = p["line_rtt_ns"].as_f64().unwrap();
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            assert!(rtt.is_finite() && (cpus < 2 || rtt > 0.0), "{p}");
            (
                p["family"].as_str().unwrap().to_string(),
                p["mode"].as_str().unwrap().to_string(),
                p["vrs"].as_u64().unwrap(),
            )
        })
        .collect();
    // Frames went through VR processes in both families (each point's
    // window is short, and a loaded machine may starve one of them).
    for family in ["ipv4", "ipv6"] {
        let through_vrs: f64 = results
            .iter()
            .filter(|p| p["family"] == family && p["mode"] == "shm")
            .map(|p| p["mpps"].as_f64().unwrap())
            .sum();
        assert!(
            through_vrs > 0.0,
            "no {family} frame forwarded by a VR: {r:#}"
        );
    }
    // How the VRs took turns: two VRs on one core switch (a yield to the
    // other, the end of a slice, a sleep), so a point that forwarded has
    // turns to count; the host's doorbells are counted too.
    for p in results
        .iter()
        .filter(|p| p["mode"] == "shm" && p["vrs"] == 2)
    {
        let switches = p["vr_sleeps_per_kframe"].as_f64().unwrap()
            + p["vr_preempts_per_kframe"].as_f64().unwrap();
        assert!(p["kicks_per_kframe"].as_f64().unwrap() >= 0.0, "{p}");
        if p["mpps"].as_f64().unwrap() > 0.0 {
            assert!(switches > 0.0, "{p}");
            assert!(p["frames_per_turn"].as_f64().unwrap() > 0.0, "{p}");
        }
    }
    let has = |f: &str, m: &str, v: u64| points.contains(&(f.into(), m.into(), v));
    assert!(has("ipv4", "shm", 1) && has("ipv4", "shm", 2) && has("ipv4", "inproc", 1));
    assert!(has("ipv6", "shm", 1) && has("ipv6", "shm", 2) && has("ipv6", "inproc", 2));
    assert_eq!(points.len(), 8, "{points:?}");
    // The 2 VRs / 1 VR aggregate of each family, as the table prints it.
    let ratios = r["ratios"].as_array().expect("ratios");
    for family in ["ipv4", "ipv6"] {
        let row = ratios
            .iter()
            .find(|q| q["family"] == family && q["vrs"] == 2)
            .unwrap_or_else(|| panic!("no {family} 2/1 ratio: {r:#}"));
        assert_eq!(row["mode"], "shm", "{row}");
        assert!(row["ratio"].as_f64().is_some(), "{row}");
        assert_eq!(row["rounds"].as_array().map(Vec::len), Some(1), "{row}");
    }
    // IPv6 over IPv4 in each mode (1 VR, 2 routes), the figure.
    let family_ratios = r["family_ratios"].as_array().expect("family_ratios");
    assert_eq!(family_ratios.len(), 2, "{family_ratios:?}");
    for mode in ["shm", "inproc"] {
        let row = family_ratios
            .iter()
            .find(|q| q["mode"] == mode)
            .unwrap_or_else(|| panic!("no {mode} ipv6/ipv4 ratio: {r:#}"));
        assert_eq!(row["routes"], 2, "{row}");
        let rate = |family: &str| {
            results
                .iter()
                .find(|p| p["family"] == family && p["mode"] == mode && p["vrs"] == 1)
                .and_then(|p| p["mpps"].as_f64())
                .unwrap()
        };
        assert_eq!(row["ipv6_mpps"].as_f64(), Some(rate("ipv6")), "{row}");
        assert_eq!(row["ipv4_mpps"].as_f64(), Some(rate("ipv4")), "{row}");
        if rate("ipv4") > 0.0 {
            let ratio = row["ratio"].as_f64().unwrap();
            assert!((ratio - rate("ipv6") / rate("ipv4")).abs() < 1e-9, "{row}");
        }
        assert_eq!(row["rounds"].as_array().map(Vec::len), Some(1), "{row}");
    }
}

#[test]
fn a_route_file_without_the_family_is_refused() {
    let dir = std::env::temp_dir().join(format!("vrhost-bm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("v4.txt");
    std::fs::write(&file, "10.0.0.0/8\t64500\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args(["bench", "memory", "--family", "ipv6", "--routes"])
        .arg(&file)
        .output()
        .expect("run vrhost bench memory");
    std::fs::remove_dir_all(&dir).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("has no ipv6 routes"), "{err}");
}

fn nr_hugepages() -> String {
    std::fs::read_to_string("/proc/sys/vm/nr_hugepages").expect("nr_hugepages")
}

#[test]
fn hugepages_auto_reserves_what_the_run_needs_and_puts_the_count_back() {
    let before = nr_hugepages();
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args(["bench", "memory", "--json", "--repeat", "1"])
        .args([
            "--seconds",
            "0.3",
            "--warmup",
            "0.1",
            "--modes",
            "shm",
            "--vrs",
            "2",
        ])
        .args(["--no-idle-beside", "--no-pool-sweep", "--no-idle"])
        .args(["--hugepages", "auto"])
        .output()
        .expect("run vrhost bench memory");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Two VRs, each a region of 1,024 slots and its rings: 2 pages each.
    assert!(err.contains("hugepages: 4 pages of 2 MiB needed"), "{err}");
    assert_eq!(nr_hugepages(), before, "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(r["results"][0]["vrs"], 2, "{r}");
    assert_eq!(r["results"][0]["violations"], 0, "{r}");
    let bad = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args(["bench", "memory", "--hugepages", "on"])
        .output()
        .expect("run vrhost bench memory");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && err.contains("off, auto or required"),
        "{err}"
    );
}
