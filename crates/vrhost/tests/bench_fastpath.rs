//! `vrhost bench fastpath` end to end with tiny durations (root only;
//! needs `ip`, `ethtool`, `trafgen`, `ping`, `iperf3`): the report parses,
//! every record is well formed, and frames flowed through each forwarder
//! with each generator, through each move, and to the quiet tenant of the
//! fairness run. Not figures: the durations
//! are too short and the machine may be busy.

use std::process::Command;

use serde_json::Value;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn num(r: &Value, k: &str) -> f64 {
    r[k].as_f64()
        .unwrap_or_else(|| panic!("{k} is not a number: {r}"))
}

fn check_forward(results: &[Value]) {
    for generator in ["live", "live-split", "trafgen"] {
        for fwd in [
            "generator",
            "kernel",
            "kernel_norps",
            "fast",
            "af_xdp",
            "minimal",
        ] {
            let r = results
                .iter()
                .find(|r| {
                    r["experiment"] == "forward"
                        && r["generator"] == generator
                        && r["forwarder"] == fwd
                })
                .unwrap_or_else(|| panic!("no forward record of {generator} {fwd}"));
            assert_eq!(r["frame_bytes"], 64, "{r}");
            assert!(num(r, "offered_pps") > 0.0, "nothing offered: {r}");
            assert!(num(r, "forwarded_pps") > 0.0, "nothing forwarded: {r}");
            if fwd == "generator" {
                continue;
            }
            assert_eq!(r["routes"], 2, "{r}");
            // Measured on the forwarder's core (CPU 1). `kernel_norps`
            // forwards in the softirq of the core that received the frame,
            // the generator's, and the fast path runs in XDP on p0, which
            // veth runs in the sender's softirq, also on the generator's
            // core, with either generator (trafgen's skbs too): their
            // figure there may be 0.
            let elsewhere = fwd == "kernel_norps" || fwd == "fast" || fwd == "minimal";
            assert!(
                num(r, "cpu_ns_per_pkt") > 0.0 || (elsewhere && num(r, "cpu_ns_per_pkt") >= 0.0),
                "{r}"
            );
            assert!(num(r, "rtt_us_avg") > 0.0, "{r}");
            assert!(num(r, "tcp_gbps") > 0.0, "{r}");
            assert_eq!(r["gen_sent_pps"].is_number(), generator != "trafgen", "{r}");
        }
    }
    // Each forwarder against the kernel at its best, over both kernel
    // forwarders and every generator.
    for fwd in ["fast", "af_xdp", "minimal"] {
        let b = results
            .iter()
            .find(|r| r["experiment"] == "best" && r["forwarder"] == fwd)
            .unwrap_or_else(|| panic!("no best record of {fwd}"));
        let kernel_max = results
            .iter()
            .filter(|r| {
                r["experiment"] == "forward"
                    && (r["forwarder"] == "kernel" || r["forwarder"] == "kernel_norps")
            })
            .map(|r| num(r, "forwarded_pps"))
            .fold(0.0, f64::max);
        assert_eq!(num(b, "kernel_pps"), kernel_max, "{b}");
        assert!(num(b, "ratio") > 0.0, "{b}");
    }
}

fn check_moves(results: &[Value]) {
    let moves: Vec<&Value> = results
        .iter()
        .filter(|r| r["experiment"] == "migrate")
        .collect();
    assert_eq!(moves.len(), 4, "2 moves at 2 rates: {moves:?}");
    let dirs: Vec<&str> = moves
        .iter()
        .map(|r| r["direction"].as_str().expect("direction"))
        .collect();
    assert_eq!(dirs, ["to_fast", "to_slow", "to_fast", "to_slow"]);
    for r in &moves {
        for k in [
            "lost",
            "lost_before",
            "lost_to_node",
            "lost_node_in",
            "reordered",
        ] {
            assert!(r[k].is_u64(), "{k}: {r}");
        }
        assert!(num(r, "offered_pps") > 0.0, "{r}");
        assert!(
            num(r, "forwarded_pps") > 0.0,
            "nothing through the move: {r}"
        );
        assert!(num(r, "switch_ms") > 0.0, "a frame on the new path: {r}");
        assert!(num(r, "api_ms") > 0.0, "{r}");
        // The watcher's trace: frames reached the select table by the
        // first frame on the new path, and no span it reports is longer.
        let first_rx = num(r, "first_rx_ms");
        assert!(first_rx > 0.0 && first_rx <= num(r, "switch_ms"), "{r}");
        assert!(num(r, "rx_gap_ms") <= num(r, "switch_ms"), "{r}");
        assert!(num(r, "read_gap_ms") > 0.0, "{r}");
        assert!(r["old_after_answer"].is_u64(), "{r}");
    }
    assert!(moves[0]["rate_pps"].is_null() && moves[2]["rate_pps"] == 20000);
    let totals: Vec<&Value> = results
        .iter()
        .filter(|r| r["experiment"] == "migrate_total")
        .collect();
    assert_eq!(totals.len(), 2, "one per rate: {totals:?}");
    for t in totals {
        let (sent, got, lost) = (num(t, "sent"), num(t, "received"), num(t, "lost"));
        assert!(got > 0.0, "{t}");
        assert_eq!(lost, (sent - got).max(0.0), "{t}");
        assert!(t["reordered"].is_u64(), "{t}");
    }
}

/// TCP through each forwarder in both placements, and each non-kernel
/// forwarder's best against the kernel's best.
fn check_tcp(results: &[Value]) {
    for fwd in ["kernel", "kernel_norps", "fast", "af_xdp", "minimal"] {
        for placement in ["pinned", "unpinned"] {
            let r = results
                .iter()
                .find(|r| {
                    r["experiment"] == "tcp" && r["forwarder"] == fwd && r["placement"] == placement
                })
                .unwrap_or_else(|| panic!("no tcp record of {fwd} {placement}"));
            assert!(num(r, "tcp_gbps") > 0.0, "{r}");
            let pinned = r["tcp_cpus"] != "unpinned";
            assert_eq!(pinned, placement == "pinned", "{r}");
            // `--tcp-gro ends` (the default): GRO on both end hosts, and
            // no XDP program on the sink's eth0 during iperf3; `--tcp-qdisc
            // pfifo-fast` (the default): a root qdisc on both.
            let on = r["tcp_offloads"].as_str().unwrap_or_else(|| panic!("{r}"));
            for o in [
                "gen/eth0:gro",
                "sink/eth0:gro",
                "gen/eth0:pfifo_fast",
                "sink/eth0:pfifo_fast",
            ] {
                assert!(on.split(',').any(|x| x == o), "{o}: {r}");
            }
            assert!(!on.contains("sink/eth0:xdp"), "{r}");
            // The minimal XDP router is on both of the node's ports.
            let xdp = ["node/p0:xdp", "node/p1:xdp"].map(|x| on.split(',').any(|o| o == x));
            if fwd == "minimal" || fwd == "fast" {
                assert_eq!(xdp, [true, true], "{r}");
            }
        }
    }
    for fwd in ["fast", "af_xdp", "minimal"] {
        let b = results
            .iter()
            .find(|r| r["experiment"] == "tcp_best" && r["forwarder"] == fwd)
            .unwrap_or_else(|| panic!("no tcp_best record of {fwd}"));
        assert!(num(b, "ratio") > 0.0, "{b}");
        assert!(
            b["kernel_at"].as_str().unwrap().starts_with("kernel"),
            "{b}"
        );
    }
}

/// The ping experiment: a record per forwarder and round, and each
/// non-kernel forwarder set against the kernel's best.
fn check_ping(results: &[Value]) {
    for fwd in ["kernel", "kernel_norps", "fast", "af_xdp", "minimal"] {
        let rounds: Vec<&Value> = results
            .iter()
            .filter(|r| r["experiment"] == "ping" && r["forwarder"] == fwd)
            .collect();
        assert_eq!(rounds.len(), 2, "{fwd}: {rounds:?}");
        for r in rounds {
            assert!(r["replies"].as_u64().is_some_and(|n| n > 0), "{r}");
            assert!(num(r, "min_us") > 0.0, "{r}");
            assert!(num(r, "min_us") <= num(r, "median_us"), "{r}");
            assert!(num(r, "median_us") <= num(r, "p99_us"), "{r}");
            assert!(num(r, "p99_us") <= num(r, "max_us"), "{r}");
            // Counted where a VR is behind the forwarder.
            let vr = fwd == "fast" || fwd == "af_xdp";
            assert_eq!(r["to_slow"].is_u64(), vr, "{r}");
        }
    }
    for fwd in ["fast", "af_xdp", "minimal"] {
        let v = results
            .iter()
            .find(|r| r["experiment"] == "ping_vs_kernel" && r["forwarder"] == fwd)
            .unwrap_or_else(|| panic!("no ping_vs_kernel record of {fwd}"));
        assert!(v["kernel"].as_str().unwrap().starts_with("kernel"), "{v}");
        let diff = num(v, "median_us") - num(v, "kernel_median_us");
        assert!((num(v, "diff_median_us") - diff).abs() < 1e-9, "{v}");
        assert!(
            v["rounds_at_or_below_kernel"]
                .as_u64()
                .is_some_and(|n| n <= 2),
            "{v}"
        );
    }
}

#[test]
fn the_fastpath_bench_reports_well_formed_records_of_frames_that_flowed() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    // The plot (scripts/plot-fastpath, run from the repository root) and
    // the JSON it reads, beside it.
    let dir = std::env::temp_dir().join(format!("vrhost-test-fastpath-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join("fastpath.png");
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args([
            "bench",
            "fastpath",
            "--json",
            "--table",
            "2",
            "--forwarders",
            "kernel,kernel_norps,fast,af_xdp,minimal",
            "--generators",
            "live,live-split,trafgen",
            "--seconds",
            "0.5",
            "--warmup",
            "0.2",
            "--pings",
            "3",
            "--ping-interval",
            "0.02",
            "--tcp-seconds",
            "1",
            "--ping-count",
            "5",
            "--ping-rounds",
            "2",
            "--moves",
            "2",
            "--move-settle",
            "0.2",
            "--migrate-rates",
            "0,20000",
            "--flows",
            "2",
            "--idle-seconds",
            "0.5",
            "--live-repeat",
            "65536",
        ])
        .arg("--plot")
        .arg(&png)
        .output()
        .expect("run vrhost bench fastpath");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let drawn = std::fs::read(&png).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(drawn.starts_with(b"\x89PNG"), "no plot drawn: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(report["bench"], "fastpath");
    assert!(report["machine"]["cores"].is_u64(), "{}", report["machine"]);
    let results = report["results"].as_array().expect("results");
    check_forward(results);
    check_moves(results);
    let idle: Vec<&Value> = results
        .iter()
        .filter(|r| r["experiment"] == "idle")
        .collect();
    assert_eq!(idle.len(), 1);
    // The VR's own cost is a difference (with it, without it): either sign
    // in so short a span; the three figures it comes from are not.
    let i = idle[0];
    let cost = num(i, "cpu_pct_raw") - num(i, "none_cpu_pct");
    assert!((num(i, "cpu_pct") - cost).abs() < 1e-9, "{i}");
    for k in [
        "cpu_pct_raw",
        "slow_cpu_pct",
        "none_cpu_pct",
        "wakeups_per_s",
    ] {
        assert!(num(i, k) >= 0.0, "{k}: {i}");
    }
    assert!(i["processes"].as_u64().unwrap() >= 1);
    // Spans measured again (frames reached the slow path), fast and slow:
    // at most 3 each (4 spans); the kept fast span's frames only if all
    // 4 had some.
    for k in ["again_fast", "again_slow"] {
        assert!(i[k].as_u64().is_some_and(|n| n <= 3), "{k}: {i}");
    }
    assert!(i["to_slow"] == 0 || i["again_fast"] == 3, "{i}");
    check_tcp(results);
    check_ping(results);
    // The fairness runs (live; both tenants fast, then both slow):
    // one record per path, the quiet tenant's share with noise over
    // alone, and what each tenant was asked for and sent.
    let fair: Vec<&Value> = results
        .iter()
        .filter(|r| r["experiment"] == "fairness")
        .collect();
    assert_eq!(fair.len(), 2, "{fair:?}");
    for (f, path) in fair.iter().zip(["fast", "slow"]) {
        assert_eq!(f["path"], path, "{f}");
        for k in [
            "quiet_ratio",
            "overload",
            "port_overload",
            "quiet_asked_pps",
            "quiet_sent_alone_pps",
            "quiet_sent_pps",
            "noisy_sent_pps",
            "noisy_at_port_pps",
            "offer_over_capacity",
            "quiet_limit_pps",
            "noisy_limit_pps",
        ] {
            assert!(num(f, k) > 0.0, "{k}: {f}");
        }
        // `--fairness-bytes auto`: one of the sizes tried, chosen in the run.
        assert_eq!(f["frame_bytes_from"], "auto", "{f}");
        assert!(
            [64, 512, 1024, 1500].contains(&f["frame_bytes"].as_u64().unwrap_or(0)),
            "{f}"
        );
        assert!(
            (1..=3).contains(&f["overload_tries"].as_u64().unwrap_or(0)),
            "{f}"
        );
    }
    // Every record is flat.
    for r in results {
        for (k, v) in r.as_object().expect("object") {
            assert!(!v.is_object() && !v.is_array(), "{k} nested: {r}");
        }
    }
}
