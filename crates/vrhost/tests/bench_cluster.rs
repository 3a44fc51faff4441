//! `vrhost bench cluster` end to end with tiny durations (root only;
//! needs `ip`, `ping` and Debian's `etcd-server`): on a copy of `lab/cluster.toml` with a namespace prefix of
//! its own, the report parses, has every experiment's records, well
//! formed, and frames crossed the cluster in each. Not figures: the runs
//! are too short and the machine may be busy.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn num(r: &Value, k: &str) -> f64 {
    r[k].as_f64()
        .unwrap_or_else(|| panic!("{k} is not a number: {r}"))
}

/// The cluster lab and its vrhost configs, copied into `dir` with the
/// namespace prefix `prefix`.
fn copy_lab(dir: &Path, prefix: &str) -> std::path::PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab");
    for f in std::fs::read_dir(&repo).unwrap() {
        let f = f.unwrap().path();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("cluster") && name.ends_with(".toml") {
            let mut text = std::fs::read_to_string(&f).unwrap();
            if name == "cluster.toml" {
                text = text.replacen("prefix = \"vrc\"", &format!("prefix = \"{prefix}\""), 1);
                assert!(text.contains(prefix), "the lab's prefix line changed");
            }
            std::fs::write(dir.join(&name), text).unwrap();
        }
    }
    dir.join("cluster.toml")
}

#[test]
fn bench_cluster_reports_every_experiment_and_frames_cross_the_cluster() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let dir = common::TempDir::new("bench-cluster");
    let prefix = format!("vcb{}", std::process::id() % 100_000);
    let lab = copy_lab(&dir.0, &prefix);
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args([
            "bench",
            "cluster",
            "--json",
            "--seconds",
            "0.5",
            "--flows",
            "6",
            "--max-pps",
            "40000",
            "--pings",
            "20",
            "--ping-interval-ms",
            "5",
            // The busy run with the engine's worker polling too, the
            // workers pinned (their VRs then follow them).
            "--busy-engines",
            "true",
            "--busy-cpus",
            "0,1",
        ])
        .arg("--lab")
        .arg(&lab)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["bench"], "cluster");
    assert!(rep["machine"].is_object(), "{rep}");
    let results = rep["results"].as_array().unwrap();
    let of = |e: &str| -> Vec<&Value> { results.iter().filter(|r| r["experiment"] == e).collect() };
    let scale = of("scale");
    assert_eq!(scale.len(), 3, "{rep:#}");
    for (i, r) in scale.iter().enumerate() {
        assert_eq!(r["engines"], i + 1, "{r}");
        assert!(r["engine_pps"].as_u64().is_some(), "{r}");
        assert!(num(r, "ratio_to_one") >= 0.0, "{r}");
    }
    // The search for the dispatcher's limit: 20,000 then at most 40,000
    // frames/s, the last record saying what ended it.
    let limit = of("dispatcher_limit");
    assert!((1..=2).contains(&limit.len()), "{rep:#}");
    let (last, before) = limit.split_last().unwrap();
    assert!(before.iter().all(|r| r["limited_by"].is_null()), "{rep:#}");
    let why = last["limited_by"]
        .as_str()
        .unwrap_or_else(|| panic!("{rep:#}"));
    assert!(["loss", "generator", "max_pps"].contains(&why), "{rep:#}");
    for r in &limit {
        assert!(num(r, "sent_pps") > 0.0, "{r}");
    }
    // Reordering at the last rate of that search.
    for r in of("reorder") {
        assert_eq!(r["offered_pps"], last["offered_pps"], "{rep:#}");
    }
    let policies: Vec<&Value> = of("reorder").iter().map(|r| &r["policy"]).collect();
    assert_eq!(policies, ["rr", "proportional", "flow"], "{rep:#}");
    let f = of("failover");
    assert_eq!(f.len(), 1, "{rep:#}");
    assert!(f[0]["lost_other_flows"].as_u64().is_some(), "{rep:#}");
    assert!(f[0]["lost_moved_flows"].as_u64().is_some(), "{rep:#}");
    let rtt = of("rtt");
    let polls: Vec<&Value> = rtt.iter().map(|r| &r["poll"]).collect();
    assert_eq!(polls, ["default", "busy"], "{rep:#}");
    assert!(rtt[0]["busy_engines"].is_null(), "{rep:#}");
    assert_eq!(rtt[1]["busy_engines"], true, "{rep:#}");
    assert_eq!(rtt[1]["busy_cpus"], "0,1", "{rep:#}");
    for r in rtt {
        assert!(num(r, "rtt_us_avg") > 0.0, "{r}");
        assert!(num(r, "local_rtt_us_avg") > 0.0, "{r}");
        let added = num(r, "rtt_us_avg") - num(r, "local_rtt_us_avg");
        assert!((num(r, "added_us_avg") - added).abs() < 1e-6, "{r}");
        // The medians of the replies, and every ping answered.
        assert!(num(r, "rtt_us_p50") > 0.0, "{r}");
        assert!(num(r, "local_rtt_us_p50") > 0.0, "{r}");
        let added = num(r, "rtt_us_p50") - num(r, "local_rtt_us_p50");
        assert!((num(r, "added_us_p50") - added).abs() < 1e-6, "{r}");
        assert_eq!(r["pings"], 20, "{r}");
    }
    let restart: Vec<&Value> = of("restart").iter().map(|r| &r["component"]).collect();
    assert_eq!(restart, ["dispatcher", "agent"], "{rep:#}");
    for r in of("restart") {
        assert!(r["same_placement"].is_boolean(), "{r}");
    }
    let traffic = |r: &&Value| r["experiment"] != "rtt" && r["experiment"] != "restart";
    for r in results.iter().filter(traffic) {
        assert!(num(r, "received") > 0.0, "nothing crossed the cluster: {r}");
        assert!(num(r, "received") <= num(r, "sent"), "{r}");
        assert!((0.0..=100.0).contains(&num(r, "reorder_pct")), "{r}");
    }
    // The lab is down again (it was built for the bench).
    let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(!left.contains(&format!("{prefix}-")), "{left}");
}

#[test]
fn bench_cluster_refuses_an_unknown_experiment_before_touching_the_lab() {
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args(["bench", "cluster", "--experiments", "rtt,nope", "--lab"])
        .arg("/nonexistent/cluster.toml")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no experiment \"nope\""), "{err}");
}
