//! The daemon's fast path policies between network namespaces (root only;
//! needs `ip` and `ethtool`): a VR's `rate_limit_pps` as the token bucket
//! of its select entries, on both paths and changed in place; and
//! `path = "auto"`, which moves a VR to fast under load and back when the
//! load stops.
//!
//! ```text
//!  ns-a            ns-r: vrhost daemon, fast_path = true          ns-b
//!  a0 10.0.1.2 --- r0 [p0 af_xdp]  VR "r"  [p1 af_xdp] r1 --- b0 10.0.2.2
//! ```
//!
//! As in `fastpath.rs`: r0 and r1 carry the VR's vNIC MACs, b0 is a static
//! neighbour of the VR (the fast path has the next hop at once), GRO on b0
//! (a frame redirected into r1 by XDP needs NAPI there), tx checksum
//! offload off on a0. A second VR, `other`, is `path = "auto"` but matched
//! by destination prefix, which the select table cannot key: it stays
//! slow, and `vr show` says why.
//!
//! No speed is asserted: the bucket's bound is computed from the time the
//! test measured (frames admitted <= burst + rate x elapsed), and the
//! auto moves are waited for with a bound against a hung test only.
//! Namespaces are named with the process id and deleted by their guards
//! even when a check fails; the daemon is killed by its own.

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::line::{LineMacs, line};
use serde_json::Value;
use vrhost_lab::Netns;

const R0_MAC: &str = "02:fc:00:00:00:10";
const R1_MAC: &str = "02:fc:00:00:00:11";
const A0_MAC: &str = "02:fc:00:00:00:0a";
const B0_MAC: &str = "02:fc:00:00:00:0b";
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
const PORT: u16 = 5557;
/// A bound against a hung test, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(120);

/// The daemon's config: VR `r` with the keys `vr_extra` (path, limits)
/// and the tables `vr_tables` (`[vrs.auto]`), and VR `other` (auto, keyed
/// by prefix: not carried).
fn config(vr_extra: &str, vr_tables: &str) -> String {
    format!(
        r#"
[host]
fast_path = true

[[ports]]
name = "p0"
driver = "af_xdp"
interface = "r0"

[[ports]]
name = "p1"
driver = "af_xdp"
interface = "r1"

[[vrs]]
name = "r"
{vr_extra}
vnics = [
  {{ port = "p0", mac = "{R0_MAC}", addrs = ["10.0.1.1/24"] }},
  {{ port = "p1", mac = "{R1_MAC}", addrs = ["10.0.2.1/24"] }},
]
{vr_tables}
[vrs.router]
neighbours = [{{ ip = "10.0.2.2", mac = "{B0_MAC}" }}]

[[vrs]]
name = "other"
path = "auto"
vnics = [{{ port = "p0", mac = "02:fc:00:00:00:20", addrs = ["10.5.0.1/24"] }}]
[vrs.auto]
up_pps = 100
down_pps = 10

[[rules]]
port = "p0"
dst_mac = "02:fc:00:00:00:20"
dst = "10.77.0.0/16"
vr = "other"

[[rules]]
port = "p0"
dst_mac = "{R0_MAC}"
vr = "r"
vnic = 0

[[rules]]
port = "p1"
dst_mac = "{R1_MAC}"
vr = "r"
vnic = 1
"#
    )
}

/// ns-a, ns-r, ns-b with their veths.
fn topology() -> [Netns; 3] {
    let macs = LineMacs {
        a0: A0_MAC,
        r0: R0_MAC,
        r1: R1_MAC,
        b0: B0_MAC,
    };
    line("fq", &macs)
}

/// A socket in ns-a that sends UDP to b0.
fn sender(na: &Netns) -> UdpSocket {
    na.run(|| UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("bind in ns-a"))
        .unwrap()
}

fn fast(stats: &Value) -> &Value {
    &common::vr_stats(stats, "r")["fast"]
}

fn fcount(stats: &Value, path: &[&str]) -> u64 {
    let v = path.iter().fold(fast(stats), |v, k| &v[*k]);
    v.as_u64()
        .unwrap_or_else(|| panic!("no fast counter {path:?} in {stats:#}"))
}

/// The daemon's metrics.
fn metrics(d: &common::Daemon) -> String {
    d.metrics()
}

/// Send `n` datagrams at once (a short sleep every 10 so the veth's ring
/// takes them), then wait until the select table has counted every one.
/// Returns the seconds from the first send to the last count seen moving.
fn blast(d: &common::Daemon, tx: &UdpSocket, n: u64) -> f64 {
    let rx0 = fcount(&d.stats(), &["rx_packets"]);
    let t0 = Instant::now();
    for i in 0..n {
        tx.send_to(b"vrhost-bucket", (B_IP, PORT)).expect("send");
        if i % 10 == 9 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    d.wait_for("the select table to see every frame", PATIENCE, |s| {
        fcount(s, &["rx_packets"]) >= rx0 + n
    });
    t0.elapsed().as_secs_f64()
}

/// VR `r` with `rate_limit_pps = 200`, `rate_burst = 20`: slow, then moved
/// to fast, each path gets a blast of 2000 datagrams; the bucket at the
/// port admits at most burst + rate x elapsed of them and drops the rest,
/// counted per VR (`fast.drops.rate_limit`, `vrhost_vr_fast_drops_total`).
/// Then the limit is raised by an apply: the VR is not restarted, and a
/// paced flow goes through without a drop.
#[test]
fn a_vr_s_rate_limit_is_a_bucket_at_the_port_on_both_paths() {
    assert!(rustix::process::geteuid().is_root(), "run as root");
    let [na, nr, _nb] = topology();
    let limited = "path = \"slow\"\nrate_limit_pps = 200\nrate_burst = 20";
    let d = common::Daemon::start_under(
        "fastlimit",
        &config(limited, ""),
        &["ip", "netns", "exec", nr.name()],
    );
    let tx = sender(&na);
    const N: u64 = 2000;
    for path in ["slow", "fast"] {
        if path == "fast" {
            d.ok(&["vr", "move", "r", "fast"]);
            // The bucket is the same on both paths (a move keeps its
            // state): let it refill to its burst (20 at 200/s: 0.1 s)
            // after the slow path's blast emptied it.
            std::thread::sleep(Duration::from_millis(250));
        }
        let s0 = d.stats();
        let (drop0, fwd0) = (
            fcount(&s0, &["drops", "rate_limit"]),
            common::count(&s0, "r", "tx_packets"),
        );
        let secs = blast(&d, &tx, N);
        // The admitted frames forwarded (slow: once the VR has drained).
        let s = d.wait_for("the admitted frames forwarded", PATIENCE, |s| {
            let dropped = fcount(s, &["drops", "rate_limit"]) - drop0;
            common::count(s, "r", "tx_packets") - fwd0 + dropped >= N
        });
        let dropped = fcount(&s, &["drops", "rate_limit"]) - drop0;
        let admitted = N - dropped;
        let bound = 20.0 + 200.0 * secs + 1.0;
        eprintln!(
            "{path}: {N} sent in {secs:.3} s: {admitted} admitted (at most {bound:.0}), {dropped} dropped"
        );
        assert!(admitted >= 20, "{path}: the burst passes: {admitted}");
        assert!(
            admitted as f64 <= bound,
            "{path}: {admitted} admitted, bucket allows {bound:.0}"
        );
        assert_eq!(
            common::count(&s, "r", "tx_packets") - fwd0,
            admitted,
            "{path}: what the bucket admitted was forwarded"
        );
        if path == "fast" {
            assert!(fcount(&s, &["forwarded"]) >= admitted, "{:#}", fast(&s));
        }
    }
    let metrics = metrics(&d);
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("vrhost_vr_fast_drops_total{reason=\"rate_limit\",vr=\"r\"}")),
        "{metrics}"
    );

    // Raised in place: no restart, and nothing of a paced flow dropped.
    let f = d.dir().join("raised.toml");
    std::fs::write(&f, config("path = \"fast\"\nrate_limit_pps = 1000000", "")).unwrap();
    let r = d.json(&["apply", f.to_str().unwrap()]);
    assert_eq!(r["restarted"], serde_json::json!([]), "{r:#}");
    assert!(
        r["unchanged"].as_array().unwrap().contains(&"r".into()),
        "{r:#}"
    );
    let s0 = d.stats();
    let drop0 = fcount(&s0, &["drops", "rate_limit"]);
    let tx0 = common::count(&s0, "r", "tx_packets");
    for _ in 0..300 {
        tx.send_to(b"vrhost-bucket", (B_IP, PORT)).expect("send");
        std::thread::sleep(Duration::from_micros(300));
    }
    let s = d.wait_for("300 more forwarded", PATIENCE, |s| {
        common::count(s, "r", "tx_packets") >= tx0 + 300
    });
    assert_eq!(fcount(&s, &["drops", "rate_limit"]), drop0, "no drop");
    drop(d);
}

/// VR `r` with `path = "auto"` (up 1000 pps, down 200 pps, 300 ms dwell,
/// 200 ms EWMA): a paced flow of a few thousand frames/s moves it to fast
/// (the fast path then forwards), and when the flow stops it moves back to
/// slow; each move is logged and counted. `other` (auto too) stays slow,
/// with the reason in `vr show`.
#[test]
fn an_auto_vr_moves_to_fast_under_load_and_back_when_it_stops() {
    assert!(rustix::process::geteuid().is_root(), "run as root");
    let [na, nr, _nb] = topology();
    let auto = "[vrs.auto]\nup_pps = 1000\ndown_pps = 200\ndwell_ms = 300\nperiod_ms = 200";
    let src = config("path = \"auto\"", auto);
    let d = common::Daemon::start_under("fastauto", &src, &["ip", "netns", "exec", nr.name()]);
    let show = d.json(&["vr", "show", "r"]);
    assert_eq!(
        (&show["path"], &show["auto"]),
        (&"slow".into(), &true.into()),
        "{show:#}"
    );
    let other = d.json(&["vr", "show", "other"]);
    assert_eq!(other["path"], "slow");
    let why = other["fast_unavailable"].as_str().unwrap_or_default();
    assert!(why.contains("matches on `dst`"), "{other:#}");

    let tx = sender(&na);
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Relaxed: a flag polled, nothing read through it.
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..10 {
                    tx.send_to(b"vrhost-auto", (B_IP, PORT)).expect("send");
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        while d.json(&["vr", "show", "r"])["path"] != "fast" {
            assert!(
                t0.elapsed() < PATIENCE,
                "never moved to fast: {:#}",
                d.stats()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let f0 = fcount(&d.stats(), &["forwarded"]);
        d.wait_for("the fast path to forward", PATIENCE, |s| {
            fcount(s, &["forwarded"]) > f0 + 100
        });
        stop.store(true, Ordering::Relaxed);
    });
    let t1 = Instant::now();
    while d.json(&["vr", "show", "r"])["path"] != "slow" {
        assert!(t1.elapsed() < PATIENCE, "never moved back: {:#}", d.stats());
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = d.stats();
    assert_eq!(fcount(&s, &["auto_moves", "to_fast"]), 1, "{:#}", fast(&s));
    assert_eq!(fcount(&s, &["auto_moves", "to_slow"]), 1, "{:#}", fast(&s));
    assert!(d.logged(&["auto: VR moved", "fast"]).is_some(), "logged");
    let metrics = metrics(&d);
    assert!(
        metrics.contains("vrhost_vr_fast_auto_moves_total{to=\"fast\",vr=\"r\"} 1"),
        "{metrics}"
    );
    let text = d.ok(&["vr", "show", "r"]);
    assert!(text.contains("slow (auto,"), "{text}");
    let text = d.ok(&["vr", "show", "other"]);
    assert!(
        text.contains("cannot carry it: rules[0] matches on `dst`"),
        "{text}"
    );
    drop(d);
}
