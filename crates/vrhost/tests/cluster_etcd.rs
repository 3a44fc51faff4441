//! The cluster's desired state in etcd (root only; needs `ip`, `ethtool`
//! and Debian's `etcd-server`): the lab of `tests/cluster.rs` with an etcd
//! on the underlay bridge (10.9.0.254, in namespace `ul`).
//!
//! The engines' configs hold no VR: only their underlay port and
//! `[cluster]` with etcd, a name and an advertised capacity (1 core of
//! 100 kpps). The dispatcher's remote VR `r` asks for 100 kpps and gives
//! its engines' VR as a `vr` table: Algorithm 1 places it whole on one
//! engine, the dispatcher writes the placement to etcd, and that engine's
//! agent starts the VR (its tunnels to the dispatcher with the tags'
//! VNIs): frames cross. Then the dispatcher is killed and started again:
//! it waits for its old election lease to expire, takes over, writes the
//! same placement, and frames cross again with the engine's VR never
//! restarted. Then the placed engine's daemon is killed: its lease
//! expires, the VR is placed on another engine, whose agent starts it,
//! and frames cross again. Last, that engine's daemon is started again:
//! with no config push, the VR is placed back on it and crosses there.
//! Last, etcd is killed: every daemon's status says `etcd: down` and
//! frames keep crossing with the last state.

mod common;

use std::time::{Duration, Instant};

use common::cluster::*;
use serde_json::Value;
use vrhost_lab::{Etcd, Netns};

const ETCD_IP: &str = "10.9.0.254";
const RATE: u32 = 100_000;

fn etcd_keys() -> String {
    format!("etcd = [\"http://{ETCD_IP}:2379\"]\netcd_prefix = \"/vrhost/test\"\nlease_s = 2\n")
}

fn dispatcher_config() -> String {
    remote_vr() + &engines_toml(&format!("capacity = {RATE}\n"))
}

/// The dispatcher's ports, `[cluster]` with etcd and remote VR `r`
/// (100 kpps), without engines.
fn remote_vr() -> String {
    format!(
        r#"{DISPATCHER_BASE}{etcd}
[[cluster.vrs]]
name = "r"
id = 7
ports = ["in", "out"]
rate = {RATE}
policy = "flow"
[cluster.vrs.vr]
vnics = [{{ addrs = ["10.1.0.1/24"] }}, {{ addrs = ["10.2.0.1/24"] }}]
[cluster.vrs.vr.router]
nexthops = [{{ vnic = 1, mac = "{S0_MAC}" }}, {{ vnic = 0, mac = "{G0_MAC}" }}]
routes = [{{ prefix = "10.2.0.2/32", nexthop = 0 }}, {{ prefix = "10.1.0.2/32", nexthop = 1 }}]
"#,
        etcd = etcd_keys()
    )
}

fn engine_config(i: usize) -> String {
    let ip = engine_ip(i);
    format!(
        r#"{port}
[cluster]
role = "engine"
heartbeat = "{ip}:4790"
name = "{name}"
underlay = "under"
local = "{ip}"
cores = 1
per_core_pps = {RATE}
{etcd}"#,
        port = engine_port(i),
        name = ENGINES[i],
        etcd = etcd_keys()
    )
}

fn start_engine(lab: &Lab, i: usize) -> common::Daemon {
    common::Daemon::start_under(
        &format!("etcd-e{}", i + 1),
        &engine_config(i),
        &["ip", "netns", "exec", lab.engines[i].name()],
    )
}

fn start_dispatcher(lab: &Lab, tag: &str) -> common::Daemon {
    common::Daemon::start_under(
        tag,
        &dispatcher_config(),
        &["ip", "netns", "exec", lab.disp.name()],
    )
}

/// The names of the VRs daemon `d` runs.
fn vrs(d: &common::Daemon) -> Vec<String> {
    let s = d.stats();
    s["vrs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Wait until exactly the engines `want` (indexes) run VR `r`, among the
/// running ones (`None`: killed).
fn wait_placed(engines: &[Option<common::Daemon>], want: &[usize]) {
    let t0 = Instant::now();
    loop {
        let running: Vec<usize> = (engines.iter().enumerate())
            .filter(|(_, d)| d.as_ref().is_some_and(|d| vrs(d) == ["r"]))
            .map(|(i, _)| i)
            .collect();
        if running == want {
            return;
        }
        assert!(
            t0.elapsed() < PATIENCE,
            "VR r runs on engines {running:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The dispatcher's placement of VR `r`: (engine, pps) per slice.
fn placement(d: &common::Daemon) -> Vec<(String, f64)> {
    let s: Value = d.json(&["cluster", "status"]);
    (s["vrs"][0]["placement"]
        .as_array()
        .cloned()
        .unwrap_or_default())
    .iter()
    .map(|p| {
        let e = p["engine"].as_str().unwrap_or_default().to_string();
        (e, p["pps"].as_f64().unwrap_or(-1.0))
    })
    .collect()
}

/// Wait until daemon `d` logs a line with `words`.
fn wait_logged(d: &common::Daemon, words: &[&str]) -> String {
    let t0 = Instant::now();
    loop {
        if let Some(l) = d.logged(words) {
            return l;
        }
        assert!(t0.elapsed() < PATIENCE, "never logged {words:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait until the dispatcher places `r` whole on `engine`.
fn wait_placement(d: &common::Daemon, engine: &str) {
    let t0 = Instant::now();
    while placement(d) != [(engine.to_string(), f64::from(RATE))] {
        assert!(
            t0.elapsed() < PATIENCE,
            "placement {:?}, not {engine}",
            placement(d)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn start_etcd(ul: &Netns) -> Etcd {
    ul.ip(&["addr", "add", &format!("{ETCD_IP}/24"), "dev", "br0"])
        .unwrap();
    Etcd::start(ul, ETCD_IP.parse().unwrap()).expect("etcd (Debian etcd-server)")
}

#[test]
fn engines_run_the_vrs_etcd_places_on_them_and_a_restarted_dispatcher_or_an_expired_lease_places_them_again()
 {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let lab = lab();
    let etcd = start_etcd(&lab.ul);
    let mut engines: Vec<Option<common::Daemon>> =
        (0..3).map(|i| Some(start_engine(&lab, i))).collect();
    // No VR on any engine before the dispatcher places one.
    for e in engines.iter().flatten() {
        assert!(vrs(e).is_empty(), "{:?}", vrs(e));
    }
    let d = start_dispatcher(&lab, "etcd-disp");
    wait_logged(&d, &["the cluster's dispatcher"]);
    assert_eq!(d.json(&["cluster", "status"])["etcd"], "up");
    wait_placement(&d, "e1");
    wait_placed(&engines, &[0]);

    let mut flows = Flows::start(&lab);
    flows.wait_through(0, &d);
    let e1_vr_before = engines[0].as_ref().unwrap().stats()["vrs"][0]["pid"].clone();

    // The dispatcher killed and started again: the same placement, from
    // etcd's registrations, once its old election lease expired.
    let mut d = d;
    d.child.kill().unwrap();
    let _ = d.child.wait();
    drop(d);
    let d = start_dispatcher(&lab, "etcd-disp2");
    // The killed one's election lease holds until its TTL: the new one
    // stands by, then takes over.
    wait_logged(&d, &["another dispatcher", "standing by"]);
    wait_logged(&d, &["the cluster's dispatcher"]);
    assert!(d.logged(&["etcd: placed"]).is_none(), "placed anew");
    wait_placement(&d, "e1");
    flows.wait_through(1, &d);
    wait_placed(&engines, &[0]);
    let e1_vr_after = engines[0].as_ref().unwrap().stats()["vrs"][0]["pid"].clone();
    assert_eq!(e1_vr_before, e1_vr_after, "the engine's VR was restarted");

    // The placed engine's daemon killed: its lease expires, the VR is
    // placed on another engine, whose agent starts it.
    let mut e1 = engines[0].take().unwrap();
    e1.child.kill().unwrap();
    let _ = e1.child.wait();
    drop(e1);
    let t0 = Instant::now();
    wait_placement(&d, "e2");
    wait_logged(&d, &["etcd: placed", "e2"]);
    wait_placed(&engines, &[1]);
    flows.wait_through(2, &d);
    eprintln!(
        "engine e1 killed: VR r placed on e2 and forwarding again after {:?}",
        t0.elapsed()
    );
    // Engine e1's daemon started again on the same config: it registers,
    // and the placement (a function of the registrations) is the first
    // one again: its agent starts VR r from etcd alone, e2's stops it.
    engines[0] = Some(start_engine(&lab, 0));
    wait_placement(&d, "e1");
    wait_placed(&engines, &[0]);
    flows.wait_through(3, &d);

    // etcd gone: the status says so, and the data path keeps forwarding
    // with its last state.
    drop(etcd);
    for n in engines.iter().flatten().chain([&d]) {
        wait_etcd(n, "down");
    }
    assert!(d.ok(&["cluster", "status"]).contains("etcd: down"));
    wait_placed(&engines, &[0]);
    flows.wait_through(4, &d);
    flows.finish();
}

/// Wait until daemon `d`'s status says etcd is `state`.
fn wait_etcd(d: &common::Daemon, state: &str) {
    let t0 = Instant::now();
    loop {
        let s = d.json(&["cluster", "status"]);
        if s["etcd"] == state {
            return;
        }
        assert!(t0.elapsed() < PATIENCE, "etcd not {state}: {s:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The dispatcher's engine names in its status, and engine `name`'s entry.
fn engine_names(d: &common::Daemon) -> Vec<String> {
    let s = d.json(&["cluster", "status"]);
    (s["engines"].as_array().cloned().unwrap_or_default())
        .iter()
        .filter_map(|e| e["name"].as_str().map(String::from))
        .collect()
}

fn wait_engine_names(d: &common::Daemon, want: &[&str]) {
    let t0 = Instant::now();
    while engine_names(d) != want {
        assert!(
            t0.elapsed() < PATIENCE,
            "engines {:?}, not {want:?}",
            engine_names(d)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An engine the dispatcher's config does not name (e3) registers in
/// etcd: it joins the data path with the address of its registration,
/// VR r is placed on it and frames cross it; killed, its lease expires
/// and it leaves the data path. The configured engine (e1, a seed)
/// started then takes the VR over.
#[test]
fn an_engine_not_in_the_dispatcher_s_config_joins_by_registering_and_leaves_with_its_lease() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let lab = lab();
    let _etcd = start_etcd(&lab.ul);
    // Only e1 is configured (and not running yet).
    let mut cfg = remote_vr();
    cfg += &format!(
        "\n[[cluster.engines]]\nname = \"e1\"\naddress = \"{}\"\nmac = \"{}\"\n",
        engine_ip(0),
        engine_mac(0)
    );
    let d =
        common::Daemon::start_under("join-disp", &cfg, &["ip", "netns", "exec", lab.disp.name()]);
    wait_logged(&d, &["the cluster's dispatcher"]);
    assert_eq!(engine_names(&d), ["e1"]);
    let s = d.json(&["cluster", "status"]);
    assert_eq!(s["engines"][0]["capacity_source"], "dispatcher", "{s:#}");
    let mut engines: Vec<Option<common::Daemon>> = vec![None, None, Some(start_engine(&lab, 2))];
    wait_engine_names(&d, &["e1", "e3"]);
    wait_placement(&d, "e3");
    wait_placed(&engines, &[2]);
    let mut flows = Flows::start(&lab);
    flows.wait_through(0, &d);
    let s = d.json(&["cluster", "status"]);
    let e3 = &s["engines"][1];
    assert_eq!(e3["address"], engine_ip(2), "{s:#}");
    assert_eq!(e3["mac"], engine_mac(2), "its registration's MAC: {s:#}");
    assert_eq!(e3["state"], "up", "{s:#}");
    assert_eq!(e3["capacity_source"], "configured", "{s:#}");
    assert!(e3["tx_frames"].as_u64() > Some(0), "{s:#}");
    assert!(e3["rx_frames"].as_u64() > Some(0), "{s:#}");

    // e3 killed: its lease expires and it leaves the data path.
    let mut e3 = engines[2].take().unwrap();
    e3.child.kill().unwrap();
    let _ = e3.child.wait();
    drop(e3);
    wait_engine_names(&d, &["e1"]);
    wait_logged(&d, &["etcd: placement removed", "e3"]);
    // The seed e1 registers: the VR is placed on it and crosses there.
    engines[0] = Some(start_engine(&lab, 0));
    wait_placement(&d, "e1");
    wait_placed(&engines, &[0]);
    flows.wait_through(1, &d);
    assert_eq!(engine_names(&d), ["e1"]);
    flows.finish();
}

/// `vrhost cluster rate`: dispatcher `d` asked for VR r at `pps`; the
/// command's success, stdout and stderr.
fn set_rate(d: &common::Daemon, pps: u32) -> (bool, String, String) {
    d.run(&["cluster", "rate", "r", &pps.to_string()])
}

/// The cluster's desired state changed through the API: a rate the
/// engines cannot hold is refused with how much is free; one that fits is
/// written to etcd and placed (on two engines); while etcd is down a
/// change is refused with 503 and the reason, the status says `etcd:
/// down` and frames keep crossing with the last state; with etcd back
/// (on its data) the change is taken.
#[test]
fn the_api_changes_a_vr_s_rate_in_etcd_and_is_refused_while_etcd_is_down_or_the_rate_does_not_fit()
{
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let lab = lab();
    let mut etcd = start_etcd(&lab.ul);
    let engines: Vec<Option<common::Daemon>> =
        (0..3).map(|i| Some(start_engine(&lab, i))).collect();
    let d = start_dispatcher(&lab, "rate-disp");
    wait_logged(&d, &["the cluster's dispatcher"]);
    wait_placement(&d, "e1");
    wait_placed(&engines, &[0]);
    let mut flows = Flows::start(&lab);
    flows.wait_through(0, &d);

    // More than the three engines hold: refused, with what is free.
    let (ok, _, err) = set_rate(&d, 4 * RATE);
    assert!(!ok, "a rate over the capacity was taken");
    assert!(err.contains("300000 pps free"), "{err}");
    assert_eq!(placement(&d), [("e1".to_string(), f64::from(RATE))]);
    // One and a half engines: e1 whole and half of another.
    let (ok, out, err) = set_rate(&d, RATE * 3 / 2);
    assert!(ok, "{out} {err}");
    let t0 = Instant::now();
    while placement(&d).len() != 2 {
        assert!(t0.elapsed() < PATIENCE, "placement {:?}", placement(&d));
        std::thread::sleep(Duration::from_millis(100));
    }
    let placed = placement(&d);
    assert_eq!(placed[0], ("e1".to_string(), f64::from(RATE)), "{placed:?}");
    assert_eq!(placed[1].1, f64::from(RATE / 2), "{placed:?}");
    let second = ENGINES.iter().position(|e| *e == placed[1].0).unwrap();
    wait_placed(&engines, &[0, second]);
    flows.wait_through(1, &d);

    // etcd down: refused with the reason, the data path keeps its state.
    etcd.kill();
    wait_etcd(&d, "down");
    assert!(d.ok(&["cluster", "status"]).contains("etcd: down"));
    let (ok, _, err) = set_rate(&d, RATE);
    assert!(!ok, "a change was taken with etcd down");
    assert!(
        err.contains("etcd is unreachable") && err.contains("503"),
        "{err}"
    );
    flows.wait_through(2, &d);
    assert_eq!(placement(&d), placed, "the last state");

    // etcd back on its data: the change is taken and placed.
    etcd.restart(&lab.ul, ETCD_IP.parse().unwrap())
        .expect("etcd again");
    wait_etcd(&d, "up");
    let t0 = Instant::now();
    loop {
        let (ok, out, err) = set_rate(&d, RATE);
        if ok {
            break;
        }
        // The election may still wait for the old session's lease.
        assert!(t0.elapsed() < PATIENCE, "{out} {err}");
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_placement(&d, "e1");
    wait_placed(&engines, &[0]);
    flows.wait_through(3, &d);
    flows.finish();
}

/// A second dispatcher on the same etcd and prefix (in namespace `ul`,
/// beside etcd, with null ports): it stands by while the first holds the
/// cluster, writes nothing, refuses changes (503, standby); when the
/// first is killed it takes the cluster over once the first's lease
/// expired.
#[test]
fn two_dispatchers_on_one_etcd_do_not_both_act() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let lab = lab();
    let _etcd = start_etcd(&lab.ul);
    let engines: Vec<Option<common::Daemon>> = vec![Some(start_engine(&lab, 0)), None, None];
    let a = start_dispatcher(&lab, "two-a");
    wait_logged(&a, &["the cluster's dispatcher"]);
    wait_placed(&engines, &[0]);
    let mut cfg = dispatcher_config();
    for p in ["d_in", "d_out", "d_ul"] {
        cfg = cfg.replacen(
            &format!("driver = \"af_packet\"\ninterface = \"{p}\""),
            "driver = \"null\"",
            1,
        );
    }
    let cfg = cfg
        .replacen("10.9.0.1:4790", &format!("{ETCD_IP}:4791"), 1)
        .replacen(
            "local = \"10.9.0.1\"",
            &format!("local = \"{ETCD_IP}\"\nlocal_mac = \"02:7c:00:00:09:fe\""),
            1,
        )
        .replacen("{ addrs", &format!("{{ mac = \"{VNIC0_MAC}\", addrs"), 1)
        .replacen("{ addrs", &format!("{{ mac = \"{VNIC1_MAC}\", addrs"), 1);
    let b = common::Daemon::start_under("two-b", &cfg, &["ip", "netns", "exec", lab.ul.name()]);
    wait_logged(&b, &["another dispatcher", "standing by"]);
    wait_etcd(&b, "standby");
    let (ok, _, err) = set_rate(&b, RATE / 2);
    assert!(
        !ok && err.contains("another dispatcher holds the cluster"),
        "{err}"
    );
    // A keeps acting: a change through it is taken.
    let (ok, out, err) = set_rate(&a, RATE / 2);
    assert!(ok, "{out} {err}");
    std::thread::sleep(Duration::from_secs(1));
    assert!(b.logged(&["etcd: placed"]).is_none(), "the standby placed");
    assert!(b.logged(&["the cluster's dispatcher"]).is_none());
    // A killed: B takes over after A's lease (2 s) and places.
    let mut a = a;
    a.child.kill().unwrap();
    let _ = a.child.wait();
    drop(a);
    wait_logged(&b, &["the cluster's dispatcher"]);
    wait_etcd(&b, "up");
    wait_logged(&b, &["etcd: placed", "e1"]);
    drop(engines);
}

/// An engine with etcd and no `per_core_pps` measures its per-core rate
/// at its start (one router VR through the real path, in memory, for a
/// second) and advertises it: its status says `measured` (etcd need not
/// be up for that: here it is unreachable, on loopback).
#[test]
fn an_engine_without_a_configured_rate_measures_it_at_its_start() {
    let cfg = r#"
[[ports]]
name = "under"
driver = "null"

[cluster]
role = "engine"
heartbeat = "127.0.0.1:0"
name = "m1"
underlay = "under"
local = "127.0.0.1"
local_mac = "02:7c:00:00:09:31"
cores = 2
etcd = ["http://127.0.0.1:9"]
"#;
    let e = common::Daemon::start("measure", cfg);
    let s = e.json(&["cluster", "status"]);
    assert_eq!(s["capacity_source"], "measured", "{s:#}");
    let cap = s["capacity_pps"].as_u64().unwrap_or(0);
    // Two cores of a measured rate: more than the placeholder (1 pps).
    assert!(cap >= 2 * 1000, "{s:#}");
    eprintln!("measured: {cap} pps for 2 cores (debug build, a busy machine)");
    assert!(e.logged(&["per-core rate measured"]).is_some());
    let text = e.ok(&["cluster", "status"]);
    assert!(text.contains("measured"), "{text}");
}

/// Remote VRs added and removed through the API on a dispatcher with
/// etcd: `vrhost cluster add` with a rate and the engines' VR (`--vr`) is
/// published, placed by Algorithm 1 and started by the engine's agent,
/// and frames cross; a rate no engine holds is refused with 409 and how
/// much is free; `vrhost cluster remove` deletes its record and
/// placement, and the engine's agent stops its VR; with etcd down a
/// change is refused with 503.
#[test]
fn a_remote_vr_added_through_the_api_is_placed_from_etcd_and_removed_is_stopped_on_its_engine() {
    let lab = root_lab();
    let mut etcd = start_etcd(&lab.ul);
    let engines: Vec<Option<common::Daemon>> =
        (0..2).map(|i| Some(start_engine(&lab, i))).collect();
    let base = format!("{DISPATCHER_BASE}{}", etcd_keys());
    let d = start_in(&lab.disp, "add-disp", &base);
    wait_logged(&d, &["the cluster's dispatcher"]);
    wait_engine_names(&d, &["e1", "e2"]);
    let vr = d.dir().join("r.toml");
    std::fs::write(
        &vr,
        format!(
            r#"vnics = [{{ addrs = ["10.1.0.1/24"] }}, {{ addrs = ["10.2.0.1/24"] }}]
[router]
nexthops = [{{ vnic = 1, mac = "{S0_MAC}" }}, {{ vnic = 0, mac = "{G0_MAC}" }}]
routes = [{{ prefix = "10.2.0.2/32", nexthop = 0 }}, {{ prefix = "10.1.0.2/32", nexthop = 1 }}]
"#
        ),
    )
    .unwrap();
    let vr = vr.to_str().unwrap();
    let rate = RATE.to_string();
    let add = [
        "cluster", "add", "r", "--id", "7", "--port", "in", "--port", "out",
    ];
    let out = d.ok(&[&add[..], &["--rate", &rate, "--vr", vr]].concat());
    assert!(out.contains("added remote VR r"), "{out}");
    wait_placement(&d, "e1");
    wait_placed(&engines, &[0]);
    let mut flows = Flows::start(&lab);
    flows.wait_through(0, &d);

    // More than the engines hold: 409, with what is free.
    let big = (3 * RATE).to_string();
    let q = [
        "cluster", "add", "q", "--id", "8", "--port", "x", "--rate", &big,
    ];
    let (ok, _, err) = d.run(&q);
    assert!(
        !ok && err.contains("409") && err.contains("100000 pps free"),
        "{err}"
    );

    // Removed: its record and placement deleted, its VR stopped on e1.
    d.ok(&["cluster", "remove", "r"]);
    wait_logged(&d, &["remote VR removed", "/vrhost/test/vrs/r"]);
    wait_logged(&d, &["placement removed", "/vrhost/test/placements/e1/r"]);
    let t0 = Instant::now();
    while !vrs(engines[0].as_ref().unwrap()).is_empty() {
        assert!(t0.elapsed() < PATIENCE, "e1 still runs VR r");
        std::thread::sleep(Duration::from_millis(100));
    }
    flows.finish();

    // etcd down: refused with 503 and the reason.
    etcd.kill();
    wait_etcd(&d, "down");
    let (ok, _, err) = d.run(&[&add[..], &["--rate", &rate, "--vr", vr]].concat());
    assert!(
        !ok && err.contains("503") && err.contains("etcd is unreachable"),
        "{err}"
    );
}

/// A placement that does not apply on its engine (here: its VR's program
/// is not there yet) is tried again with a back-off, not only at the next
/// change, and the engine's status says why and when; once it can apply
/// (the program is there) it does, with nothing changed in etcd.
#[test]
fn a_placement_that_fails_to_apply_is_tried_again_and_the_engine_s_status_says_so() {
    let lab = root_lab();
    let _etcd = start_etcd(&lab.ul);
    let e1 = start_engine(&lab, 0);
    let dir = common::TempDir::new("retry-vr");
    let program = dir.path().join("later-vr");
    let config = format!(
        "{DISPATCHER_BASE}{}\n[[cluster.vrs]]\nname = \"r\"\nid = 7\nports = [\"in\", \"out\"]\n\
         rate = {RATE}\n[cluster.vrs.vr]\nkind = \"program\"\nprogram = \"{}\"\nargs = [\"vr-probe\"]\nvnics = [{{}}, {{}}]\n",
        etcd_keys(),
        program.display()
    );
    let d = start_in(&lab.disp, "retry-disp", &config);
    wait_placement(&d, "e1");
    let status = |e: &common::Daemon| e.json(&["cluster", "status"]);
    let t0 = Instant::now();
    let tries = |s: &Value| {
        let e = s["placements_error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let n = e
            .split_once(" tries)")
            .and_then(|(h, _)| h.rsplit_once('(')?.1.parse().ok());
        (e, n.unwrap_or(0u32))
    };
    // Refused, then tried again (a second try with no change in etcd).
    loop {
        let (e, n) = tries(&status(&e1));
        if n >= 2 {
            assert!(
                e.contains("later-vr") && e.contains("tried again in"),
                "{e}"
            );
            break;
        }
        assert!(t0.elapsed() < PATIENCE, "not tried again: {e:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(vrs(&e1).is_empty());
    let text = e1.ok(&["cluster", "status"]);
    assert!(text.contains("placements refused"), "{text}");
    // The program is there: the next try applies.
    std::os::unix::fs::symlink(common::testvr(), &program).unwrap();
    let t0 = Instant::now();
    while vrs(&e1) != ["r"] {
        assert!(t0.elapsed() < PATIENCE, "{:#}", status(&e1));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status(&e1)["placements_error"], Value::Null);
}
