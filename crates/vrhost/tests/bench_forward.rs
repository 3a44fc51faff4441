//! `vrhost bench forward` end to end with tiny durations (root only;
//! needs `ip`, `ethtool`, `trafgen`, `ping`, `iperf3`): IPv6 frames beside
//! IPv4 ones (`--family`), and the tap forwarder (a `kind = "tap"` VR)
//! beside the kernel and a vrhost driver; every record names its family,
//! frames flowed, ping and TCP passed. Not figures: the durations are too
//! short and the machine may be busy.

use std::process::Command;

use serde_json::Value;

fn num(r: &Value, k: &str) -> f64 {
    r[k].as_f64()
        .unwrap_or_else(|| panic!("{k} is not a number: {r}"))
}

/// iperf3 pinned (the server on the forwarder's core 1, the client on
/// the generator's 0) and unpinned; `tcp_gbps` the better, `tcp_cpus` its
/// placement.
/// The TCP test ran with GRO on both end hosts' `eth0` and no other
/// offload (`--tcp-gro ends`, the default), a `pfifo_fast` root qdisc
/// on both (`--tcp-qdisc pfifo-fast`, the default), and without the XDP
/// sink on the sink's `eth0` (the node's ports may hold vrhost's
/// programs).
fn gro_at_both_ends_and_no_sink_xdp(r: &Value) {
    let on = r["tcp_offloads"].as_str().expect("tcp_offloads");
    let offloads: Vec<_> = on.split(',').filter(|o| !o.ends_with(":xdp")).collect();
    assert_eq!(
        offloads,
        [
            "gen/eth0:pfifo_fast",
            "gen/eth0:gro",
            "sink/eth0:pfifo_fast",
            "sink/eth0:gro"
        ],
        "{r}"
    );
    assert!(
        on.split(',')
            .all(|o| !o.starts_with("sink/") || !o.ends_with(":xdp")),
        "{r}"
    );
}

fn tcp_in_both_placements(r: &Value) {
    let (p, u) = (num(r, "tcp_gbps_pinned"), num(r, "tcp_gbps_unpinned"));
    assert!(p > 0.0 && u > 0.0, "{r}");
    assert_eq!(num(r, "tcp_gbps"), p.max(u), "{r}");
    let at = if p >= u { "1,0" } else { "unpinned" };
    assert_eq!(r["tcp_cpus"], at, "{r}");
}

/// TCP through `af_xdp_txlive` (both ports sending xdp_frames, batches
/// held for more: `--tx-batch 64`) and through `af_xdp` with `tx =
/// "auto"`, beside the kernel, each in both placements, each against the
/// kernel's best; vrhost's runs counted.
#[test]
fn tcp_through_xdp_frames_against_the_kernel_at_its_best() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args([
            "bench",
            "forward",
            "--json",
            "--forwarders",
            "kernel,af_xdp_txlive,af_xdp",
            "--af-xdp-tx",
            "auto",
            "--tx-batch",
            "64",
            "--loads",
            "0.5",
            "--seconds",
            "0.3",
            "--warmup",
            "0.1",
            "--pings",
            "3",
            "--ping-interval",
            "0.02",
            "--idle-pings",
            "0",
            "--tcp-seconds",
            "1",
        ])
        .output()
        .expect("run vrhost bench forward");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let results = report["results"].as_array().expect("results");
    let mut kernel = 0.0f64;
    for fwd in ["kernel", "af_xdp_txlive", "af_xdp"] {
        let r = results
            .iter()
            .find(|r| r["forwarder"] == fwd)
            .unwrap_or_else(|| panic!("no {fwd} record"));
        assert!(num(r, "forwarded_pps") > 0.0, "nothing forwarded: {r}");
        gro_at_both_ends_and_no_sink_xdp(r);
        tcp_in_both_placements(r);
        if fwd == "kernel" {
            kernel = num(r, "tcp_gbps");
            assert!(r["tcp_tx_runs"].is_null(), "{r}");
            continue;
        }
        // Each port sent frames in runs (system calls) of one frame or
        // more: the segments on p1, the ACKs on p0.
        assert!(num(r, "tcp_tx_runs") > 0.0, "{r}");
        for k in ["tcp_frames_per_run", "tcp_ack_frames_per_run"] {
            assert!(num(r, k) >= 1.0, "{k}: {r}");
        }
        assert!(num(r, "tx_frames_per_run") >= 1.0, "{r}");
    }
    let best = report["tcp_best"].as_array().expect("tcp_best");
    for fwd in ["af_xdp_txlive", "af_xdp"] {
        let b = best
            .iter()
            .find(|b| b["forwarder"] == fwd)
            .unwrap_or_else(|| panic!("no tcp_best of {fwd}: {best:?}"));
        assert_eq!(num(b, "kernel_gbps"), kernel, "{b}");
        assert_eq!(b["family"], "ipv4", "{b}");
        let ratio = num(b, "tcp_gbps") / kernel;
        assert!((num(b, "ratio") - ratio).abs() < 1e-9, "{b}");
    }
}

#[test]
fn ipv6_and_tap_points_beside_ipv4_and_the_others() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args([
            "bench",
            "forward",
            "--json",
            "--family",
            "ipv4,ipv6",
            "--forwarders",
            "kernel,af_packet,tap",
            "--loads",
            "0.5",
            "--seconds",
            "0.3",
            "--warmup",
            "0.1",
            "--pings",
            "3",
            "--ping-interval",
            "0.02",
            "--tcp-seconds",
            "1",
        ])
        .output()
        .expect("run vrhost bench forward");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["bench"], "forward");
    let results = report["results"].as_array().expect("results");
    for (family, bytes) in [("ipv4", 64), ("ipv6", 66)] {
        for fwd in ["generator", "kernel", "af_packet", "tap"] {
            let r = results
                .iter()
                .find(|r| r["family"] == family && r["forwarder"] == fwd)
                .unwrap_or_else(|| panic!("no {family} {fwd} record"));
            assert_eq!(r["frame_bytes"].as_u64(), Some(bytes), "{r}");
            assert!(num(r, "forwarded_pps") > 0.0, "nothing forwarded: {r}");
            if fwd != "generator" {
                assert!(num(r, "rtt_us_avg") > 0.0, "no ping: {r}");
                assert!(num(r, "tcp_gbps") > 0.0, "no TCP: {r}");
                // What bounds it, with the lab's offloads off on the way.
                assert!(r["tcp_retransmits"].is_u64(), "{r}");
                assert!(num(r, "tcp_rtt_us") > 0.0, "{r}");
                assert!(num(r, "tcp_cwnd_bytes") > 0.0, "{r}");
                assert!(r["tcp_lost_frames"].is_u64(), "{r}");
                for k in ["tcp_gen_cpu_pct", "tcp_fwd_cpu_pct"] {
                    assert!((0.0..=100.0).contains(&num(r, k)), "{k}: {r}");
                }
                // GRO on both end hosts' eth0, for every forwarder, the
                // sink's XDP program off (`--tcp-gro ends`).
                gro_at_both_ends_and_no_sink_xdp(r);
                tcp_in_both_placements(r);
            }
        }
    }
    // The live generator and the fast path are IPv4 only: said, not run.
    for (opt, want) in [
        (
            ["--generator", "live"],
            "the live generator sends IPv4 only",
        ),
        (["--forwarders", "fast"], "the fast path forwards IPv4 only"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
            .args(["bench", "forward", "--family", "ipv6"])
            .args(opt)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{err}");
    }
}
