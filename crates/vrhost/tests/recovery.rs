//! Crash recovery against a real daemon forwarding in memory (a paced
//! `mem` generator into router VRs a and b, out to a `null` port):
//! - b killed with SIGKILL is seen at once, its slots reclaimed, and it is
//!   restarted with its config and its API routes (the traffic it forwards
//!   after the restart needs the route added through the API); a, beside
//!   it, forwards every frame it accepted;
//! - b stopped with SIGSTOP (a hang: frames wait, its poll loop does not
//!   move) is killed by the watchdog and restarted the same way.
//! - p, a VR that panics on a frame, is restarted; the host's log says
//!   which VR and why (the panic's place and message), and the frame it
//!   held is counted (`reclaimed`).
//!
//! No speed is asserted: the waits are bounds against a hung test.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Daemon, Lab, count, vr};
use serde_json::{Value, json};
use vrhost_api::Rule;

/// Frames the generator sends in all, at `PPS`.
const FRAMES: u64 = 160_000;
const PPS: u64 = 20_000;

/// VRs a and b, paced; the host's watchdog at `watchdog_ms` (0: off). VR
/// b's config routes cover only 10.2.0.0/17; the generator's frames for b
/// go to 10.2.128.0/17, which the test adds through the API.
fn config(watchdog_ms: u64) -> Lab {
    Lab::two_vrs()
        .paced(PPS)
        .limit(FRAMES)
        .with_watchdog_ms(watchdog_ms)
        .edit_vr("b", |b| {
            b.router.as_mut().unwrap()["routes"][0]["prefix"] = "10.2.0.0/17".into();
        })
}

fn pid(stats: &Value, name: &str) -> u32 {
    vr(stats, name)["instances"][0]["pid"].as_u64().unwrap() as u32
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill {sig} {pid}");
}

/// Start the daemon, give b its API route, and wait until both forward.
fn start(tag: &str, watchdog_ms: u64) -> Daemon {
    let d = Daemon::start(tag, &config(watchdog_ms).to_toml());
    d.ok(&["route", "add", "b", "10.2.128.0/17", "via", "10.9.2.2"]);
    d.wait_for("both VRs forwarding", Duration::from_secs(30), |s| {
        count(s, "a", "tx_packets") > 1000 && count(s, "b", "tx_packets") > 1000
    });
    d
}

/// Wait for the generator to finish and every frame to settle, then check
/// VR a lost nothing it accepted; returns the final stats.
fn finish_and_check_a(d: &Daemon) -> Value {
    let s = d.wait_for("the generator to finish", Duration::from_secs(120), |s| {
        s["host"]["rx_packets"].as_u64() == Some(FRAMES)
            && count(s, "a", "rx_packets") == count(s, "a", "tx_packets")
    });
    let a = &vr(&s, "a")["stats"];
    assert_eq!(a["exits"], 0, "{a:#}");
    assert_eq!(a["vr_dropped"], 0, "{a:#}");
    assert_eq!(a["port_dropped"], 0, "{a:#}");
    for (why, n) in a["ingress_drops"].as_object().unwrap() {
        // Only a full ring or pool (the VR's core was busy) may refuse a
        // frame at the door; nothing accepted is lost.
        if why != "ring_full" && why != "pool_empty" {
            assert_eq!(n, 0, "a: ingress drops {why}: {a:#}");
        }
    }
    assert_eq!(
        a["violations"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_u64)
            .sum::<u64>(),
        0
    );
    s
}

/// b after its restart: up, forwarding what only its API route reaches,
/// and it never dropped a frame after the restart (`dropped_before`: its
/// drops when it went down; the frames sent before the test added the
/// route are dropped for want of it).
fn check_b_restarted(d: &Daemon, s: &Value, why: &str, dropped_before: u64) {
    let b = &vr(s, "b")["stats"];
    assert_eq!(vr(s, "b")["state"], "running", "{s:#}");
    assert_eq!(b["restarts"], 1, "{why}: {b:#}");
    assert_eq!(b["exits"], 1, "{why}: {b:#}");
    assert_eq!(
        b["vr_dropped"].as_u64(),
        Some(dropped_before),
        "{why}: the API route was not back before traffic: {b:#}"
    );
    let rec = b["last_recovery_ms"].as_f64().unwrap();
    assert!(rec > 0.0, "{b:#}");
    eprintln!("{why}: b back to forwarding {rec:.1} ms after its exit was seen");
    // The control plane's view agrees: the API route is listed once.
    let routes = d.json(&["route", "list", "b"]);
    assert!(routes.to_string().contains("10.2.128.0/17"), "{routes:#}");
}

/// Send b `sig` under load; it must be restarted (by its exit, or by the
/// watchdog of `watchdog_ms` for a hang) and a must lose nothing.
/// `hangs`: what b's `hangs` counter must read afterwards.
fn b_recovers_from(tag: &str, watchdog_ms: u64, sig: &str, why: &str, hangs: u64) {
    let d = start(tag, watchdog_ms);
    let s = d.stats();
    let (old, tx_before) = (pid(&s, "b"), count(&s, "b", "tx_packets"));
    let dropped = count(&s, "b", "vr_dropped");
    signal(old, sig);
    let s = d.wait_for("b restarted and forwarding", Duration::from_secs(30), |s| {
        count(s, "b", "restarts") == 1 && count(s, "b", "tx_packets") > tx_before + 1000
    });
    assert_ne!(pid(&s, "b"), old);
    let s2 = finish_and_check_a(&d);
    check_b_restarted(&d, &s2, why, dropped);
    assert_eq!(count(&s2, "b", "hangs"), hangs);
}

#[test]
fn killed_vr_is_restarted_with_its_routes_and_others_lose_nothing() {
    b_recovers_from("recovery-kill", 0, "-KILL", "SIGKILL", 0);
}

#[test]
fn hung_vr_is_killed_by_the_watchdog_and_restarted() {
    // Frozen: frames wait in its ring and its poll loop stops.
    b_recovers_from("recovery-hang", 300, "-STOP", "SIGSTOP", 1);
}

/// Nanoseconds process `pid` has waited for a CPU (`run_delay`).
fn run_delay_ns(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    s.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn starved_vr_is_not_killed_by_the_watchdog() {
    // b alone on CPU 1, the worker (which runs the watchdog) on CPU 0; a
    // real-time spinner takes CPU 1 for 0.9 s, three times the watchdog's
    // limit: b's frames wait, its poll loop does not move, yet it is not
    // stuck, and killing it would lose what waits in its rings.
    let config = config(300)
        .with_host_cpu(0)
        .edit_vr("b", |b| b.cpu = Some(1));
    let d = Daemon::start("recovery-starved", &config.to_toml());
    d.ok(&["route", "add", "b", "10.2.128.0/17", "via", "10.9.2.2"]);
    let s = d.wait_for("both VRs forwarding", Duration::from_secs(30), |s| {
        count(s, "a", "tx_packets") > 1000 && count(s, "b", "tx_packets") > 1000
    });
    let b = pid(&s, "b");
    // `timeout` on CPU 0 and in the normal class, so that the spinner
    // cannot keep it from ending the spin. A spin that did not keep b
    // waiting longer than the limit (the spinner got no CPU 1) is tried
    // again.
    let spin = || {
        let before = run_delay_ns(b);
        let st = Command::new("taskset")
            .args(["-c", "0", "timeout", "0.9", "chrt", "-f", "50"])
            .args(["taskset", "-c", "1", "sh", "-c", "while :; do :; done"])
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(124), "the spinner ran until its timeout");
        run_delay_ns(b) - before
    };
    let waits: Vec<u64> = (0..3)
        .map(|_| spin())
        .take_while(|&w| w <= 300_000_000)
        .collect();
    assert!(waits.len() < 3, "b never waited for its CPU: {waits:?} ns");
    let s = finish_and_check_a(&d);
    let st = &vr(&s, "b")["stats"];
    assert_eq!(pid(&s, "b"), b, "{st:#}");
    assert_eq!(
        (count(&s, "b", "hangs"), count(&s, "b", "exits")),
        (0, 0),
        "{st:#}"
    );
    assert_eq!(count(&s, "b", "reclaimed"), 0, "{st:#}");
}

/// Frame on which the probe VR panics (each run of it counts from 1).
const PANIC_AT: u64 = 3000;

/// a as above, and p, the probe VR (a bridge) told to panic on its
/// `PANIC_AT`-th frame.
fn panic_config() -> String {
    let p = Lab::program("p", "vr-probe", 256, json!({ "panic_at": PANIC_AT }));
    config(0).without_vr("b").with_vr(p, 2).to_toml()
}

#[test]
fn panicking_vr_is_restarted_and_the_host_says_why() {
    let d = Daemon::start("recovery-panic", &panic_config());
    let s = d.wait_for("p restarted twice", Duration::from_secs(60), |s| {
        count(s, "p", "restarts") >= 2
    });
    let p = &vr(&s, "p")["stats"];
    assert!(count(&s, "p", "exits") >= 2, "{p:#}");
    // It held the frame it panicked on (and those behind it): taken back
    // and counted, never lost without a counter.
    assert!(count(&s, "p", "reclaimed") >= 2, "{p:#}");
    // Every frame it took before each panic went out, but those of the
    // batch it panicked in (processed, not yet handed back: a burst at
    // most), which were taken back and counted with what waited for it.
    let (tx, reclaimed) = (count(&s, "p", "tx_packets"), count(&s, "p", "reclaimed"));
    assert!(tx >= 2 * (PANIC_AT - 64), "{p:#}");
    assert!(tx + reclaimed >= 2 * PANIC_AT, "{p:#}");
    let line = d
        .logged(&[
            "vr=p",
            "exit status: 101",
            "panicked at",
            "frame 3000 is the one to panic on",
        ])
        .unwrap_or_else(|| {
            panic!(
                "the log does not say why p went down: {:#?}",
                d.log.lock().unwrap()
            )
        });
    assert!(line.contains("testvr/src/probe.rs"), "{line}");
    assert!(d.logged(&["vr=p", "VR restarted"]).is_some());
    let s = finish_and_check_a(&d);
    // The operator's restart, from the CLI (as for a quarantined VR).
    let before = pid(&s, "p");
    assert_eq!(d.ok(&["vr", "restart", "p"]), "restarted VR p\n");
    let out = d.cli(&["vr", "restart", "nosuch"]).output().unwrap();
    assert!(!out.status.success());
    let s = d.stats();
    assert_eq!(vr(&s, "p")["state"], "running", "{s:#}");
    assert_ne!(pid(&s, "p"), before, "a new process: {s:#}");
}

/// VR b of [`config`], as a `vrhost vr add` file, with its rule and the
/// route the generator's frames for it need.
fn b_file() -> String {
    let mut b = Lab::router("b", 2);
    b.rules = vec![Rule {
        port: Some("gen".into()),
        dst: Some("10.2.0.0/16".into()),
        ..Rule::default()
    }];
    toml::to_string(&b).unwrap()
}

/// Seconds with no API traffic after b is added: more than the 10 s after
/// which tokio ends an idle `spawn_blocking` thread, the thread the API
/// started b from (b's parent-death signal killed it with that thread).
const QUIET_S: u64 = 13;

#[test]
fn vr_added_through_the_api_outlives_the_api_thread_that_started_it() {
    // The generator sends for 50 s, past the quiet and the waits.
    let a = config(0).limit(1_000_000).without_vr("b");
    let d = Daemon::start("recovery-api-add", &a.to_toml());
    let file = d.dir().join("b.toml");
    std::fs::write(&file, b_file()).unwrap();
    d.ok(&["vr", "add", file.to_str().unwrap()]);
    let s = d.wait_for("b forwarding", Duration::from_secs(30), |s| {
        count(s, "b", "tx_packets") > 100
    });
    let (old, tx) = (pid(&s, "b"), count(&s, "b", "tx_packets"));
    std::thread::sleep(Duration::from_secs(QUIET_S));
    let s = d.wait_for(
        "b forwarding after the quiet",
        Duration::from_secs(30),
        |s| count(s, "b", "tx_packets") > tx + 1000,
    );
    let b = &vr(&s, "b");
    assert_eq!(pid(&s, "b"), old, "b is a new process: {b:#}");
    assert_eq!(b["stats"]["exits"], 0, "{b:#}");
    assert_eq!(b["stats"]["restarts"], 0, "{b:#}");
    assert!(
        d.logged(&["vr=b", "restarting"]).is_none(),
        "{:#?}",
        d.log.lock().unwrap()
    );
}
