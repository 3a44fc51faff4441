//! A VR's control plane end to end (root only; needs `ip`, `ping`, BIRD 2:
//! the test says SKIPPED without `bird`): the VR's BIRD, run by the
//! daemon in the VR's control namespace, speaks BGP through vrhost to a
//! BIRD peer in a lab namespace; the route the peer announces reaches the
//! VR's FIB with origin `control-plane` and carries a ping; its
//! withdrawal takes it out again; the VR's BIRD killed comes back and
//! the session with it. The same with OSPF (BIRD's `protocol ospf` on
//! both sides): the adjacency comes up through vrhost and the peer's stub
//! network forwards. The VR's control-plane status (`vr show`, metrics)
//! follows its runs, restarts and routes.
//!
//! ```text
//!  ns-a               ns-r: vrhost daemon (nsenter --net)        ns-p: BIRD AS 65002
//!  a0 10.0.1.2 --- r0 [p0 af_packet] VR [p1 af_packet] r1 --- p0 10.0.2.2
//!                                    |                         lo 192.0.2.1/24
//!                      vrctl-<vr>: vnic0 10.0.1.1, vnic1 10.0.2.1 (TAPs)
//!                                  BIRD AS 65001 (as nobody)
//! ```
//!
//! The daemon runs in ns-r through `nsenter --net` (not `ip netns exec`,
//! whose private mount namespace would hide the control namespace it
//! makes from the test). The namespaces are named with the process id and
//! deleted by their guards even when a check fails; the control
//! namespace, which the killed daemon leaves, by a guard of its own.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::CtlNs;
use serde_json::Value;
use vrhost_lab::{Netns, veth};

const R0_MAC: &str = "02:cc:00:00:00:10";
const R1_MAC: &str = "02:cc:00:00:00:11";
/// A bound against a hung test, not a speed limit (BGP's first
/// connection retry is 5 s after a refused attempt).
const PATIENCE: Duration = Duration::from_secs(90);

/// Kills a process when dropped.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn has_bird() -> bool {
    Command::new("bird")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// ns-a, ns-r, ns-p with their veths and addresses.
fn topology() -> [Netns; 3] {
    let na = Netns::unique("cp-a").expect("ns-a");
    let nr = Netns::unique("cp-r").expect("ns-r");
    let np = Netns::unique("cp-p").expect("ns-p");
    for n in [&na, &nr, &np] {
        n.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
        n.sysctl("net.ipv6.conf.default.disable_ipv6", "1").unwrap();
    }
    veth(&na, "a0", None, &nr, "r0", Some(R0_MAC)).expect("a0-r0");
    veth(&nr, "r1", Some(R1_MAC), &np, "p0", None).expect("r1-p0");
    na.ip(&["addr", "add", "10.0.1.2/24", "dev", "a0"]).unwrap();
    na.ip(&["route", "add", "default", "via", "10.0.1.1"])
        .unwrap();
    np.ip(&["addr", "add", "10.0.2.2/24", "dev", "p0"]).unwrap();
    np.ip(&["addr", "add", "192.0.2.1/24", "dev", "lo"])
        .unwrap();
    np.ip(&["route", "add", "default", "via", "10.0.2.1"])
        .unwrap();
    nr.sysctl("net.ipv4.ip_forward", "0").unwrap();
    // veth leaves TCP and UDP checksums to the device, and an af_packet
    // port hands them on unfinished: the control namespace's kernel
    // would drop the peer's segments (TcpInCsumErrors).
    np.exec("ethtool", &["-K", "p0", "tx", "off"])
        .expect("p0 tx off");
    na.exec("ethtool", &["-K", "a0", "tx", "off"])
        .expect("a0 tx off");
    [na, nr, np]
}

fn config(vr: &str) -> String {
    format!(
        r#"
[[ports]]
name = "p0"
driver = "af_packet"
interface = "r0"

[[ports]]
name = "p1"
driver = "af_packet"
interface = "r1"

[[vrs]]
name = "{vr}"
control_plane = "bird"
control_config = "vr-bird.conf"
vnics = [
  {{ port = "p0", mac = "{R0_MAC}", addrs = ["10.0.1.1/24"] }},
  {{ port = "p1", mac = "{R1_MAC}", addrs = ["10.0.2.1/24"] }},
]

[[rules]]
port = "p0"
vr = "{vr}"
vnic = 0

[[rules]]
port = "p1"
vr = "{vr}"
vnic = 1
"#
    )
}

/// The VR's BIRD: BGP with the peer, its routes into the control
/// namespace's kernel table; graceful restart, so that restarted (with
/// `-R`, as the daemon restarts it) it keeps the routes it left there
/// until its session is back.
const VR_BIRD: &str = r#"
log stderr all;
router id 10.0.2.1;
protocol device { }
protocol kernel { ipv4 { import none; export all; }; graceful restart; }
protocol bgp peer {
  local 10.0.2.1 as 65001;
  neighbor 10.0.2.2 as 65002;
  connect retry time 1;
  graceful restart on;
  ipv4 { import all; export none; };
}
"#;

/// The peer's BIRD: announces 192.0.2.0/24 (static `st`).
const PEER_BIRD: &str = r#"
log stderr all;
router id 10.0.2.2;
protocol device { }
protocol static st { ipv4; route 192.0.2.0/24 blackhole; }
protocol bgp vr {
  local 10.0.2.2 as 65002;
  neighbor 10.0.2.1 as 65001;
  connect retry time 1;
  ipv4 { import none; export all; };
}
"#;

fn birdc(sock: &Path, args: &[&str]) -> String {
    let out = Command::new("birdc")
        .arg("-s")
        .arg(sock)
        .args(args)
        .output()
        .expect("birdc");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Wait (up to [`PATIENCE`]) until `f` gives `Some`.
fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The VR's routes of origin control-plane.
fn cp_routes(d: &common::daemon::Daemon, vr: &str) -> Vec<Value> {
    let page = d.json(&["route", "list", vr, "--origin", "control-plane"]);
    page["routes"].as_array().cloned().unwrap_or_default()
}

fn pings(na: &Netns) -> bool {
    na.exec("ping", &["-c", "1", "-W", "1", "192.0.2.1"])
        .is_ok()
}

/// A BIRD in `ns` on the config text `conf` (in a directory of its own,
/// with its control socket): the process, killed when dropped, the
/// socket, and the directory.
fn peer_bird(ns: &Netns, conf: &str) -> (Kill, PathBuf, common::TempDir) {
    let dir = common::TempDir::new("cp-peer");
    let path = dir.path().join("peer.conf");
    std::fs::write(&path, conf).unwrap();
    let sock = dir.path().join("peer.ctl");
    let child = ns
        .command("bird")
        .arg("-f")
        .arg("-c")
        .arg(&path)
        .arg("-s")
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("peer bird");
    (Kill(child), sock, dir)
}

/// The daemon in `nr` with VR `vr` whose BIRD runs on the config text
/// `conf` (named by its path: the daemon's config is written in a
/// directory of its own; read again at each restart), and that
/// config's directory.
fn start_with_bird(vr: &str, nr: &Netns, conf: &str) -> (common::daemon::Daemon, common::TempDir) {
    let net = format!("--net=/run/netns/{}", nr.name());
    let conf_dir = common::TempDir::new("cp-conf");
    let vr_conf = conf_dir.path().join("vr-bird.conf");
    std::fs::write(&vr_conf, conf).unwrap();
    let cfg = config(vr).replace(
        "control_config = \"vr-bird.conf\"",
        &format!("control_config = {:?}", vr_conf.display().to_string()),
    );
    let d = common::daemon::Daemon::start_under("cp", &cfg, &["nsenter", &net]);
    (d, conf_dir)
}

/// A test of the VR's BIRD against a peer BIRD in ns-p: the daemon first
/// (dropped first), the namespaces, then the control namespace's guard.
struct BirdLab {
    vr: String,
    d: common::daemon::Daemon,
    /// The VR's BIRD's control socket.
    sock: PathBuf,
    peer_sock: PathBuf,
    _peer: Kill,
    _dirs: [common::TempDir; 2],
    na: Netns,
    _nr: Netns,
    _np: Netns,
    _ctl: CtlNs,
}

/// [`BirdLab`] of VR `<tag><pid>` on the config texts `peer` and `mine`;
/// `None` (the test skipped) when not root or without `bird`.
fn bird_lab(tag: &str, peer: &str, mine: &str) -> Option<BirdLab> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: needs root");
        return None;
    }
    if !has_bird() {
        eprintln!("SKIPPED: no bird (Debian package bird2)");
        return None;
    }
    let vr = format!("{tag}{}", std::process::id());
    let ctl = CtlNs(format!("vrctl-{vr}"));
    let [na, nr, np] = topology();
    let (peer, peer_sock, peer_dir) = peer_bird(&np, peer);
    let (d, conf_dir) = start_with_bird(&vr, &nr, mine);
    let sock = Path::new("/run/vrhost/ctl")
        .join(format!("vrctl-{vr}"))
        .join("bird.ctl");
    Some(BirdLab {
        vr,
        d,
        sock,
        peer_sock,
        _peer: peer,
        _dirs: [peer_dir, conf_dir],
        na,
        _nr: nr,
        _np: np,
        _ctl: ctl,
    })
}

impl BirdLab {
    /// The VR's name, the daemon, the sockets of the VR's BIRD and the
    /// peer's, ns-a.
    fn parts(&self) -> (&str, &common::daemon::Daemon, &Path, &Path, &Netns) {
        (&self.vr, &self.d, &self.sock, &self.peer_sock, &self.na)
    }
}

#[test]
fn bgp_through_vrhost_puts_a_route_in_the_fib_and_its_withdrawal_takes_it_out() {
    let Some(lab) = bird_lab("cp", PEER_BIRD, VR_BIRD) else {
        return;
    };
    let (vr, d, sock, peer_sock, na) = lab.parts();

    // The session comes up through vrhost.
    until("the BGP session", || {
        birdc(sock, &["show", "protocols", "peer"])
            .contains("Established")
            .then_some(())
    });
    assert!(birdc(peer_sock, &["show", "protocols", "vr"]).contains("Established"));
    // Frames both ways through the control TAP of vNIC 1 (its port's
    // counters: rx from the control plane, tx to it).
    let stats = d.stats();
    let port = stats["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == format!("ctl:{vr}:1"))
        .cloned()
        .unwrap_or_else(|| panic!("no port ctl:{vr}:1 in {stats}"));
    assert!(port["rx_packets"].as_u64() > Some(0), "{port}");
    assert!(port["tx_packets"].as_u64() > Some(0), "{port}");

    // The announced route, in the FIB with origin control-plane.
    let r = until("the control plane's route", || {
        cp_routes(d, vr)
            .into_iter()
            .find(|r| r["prefix"] == "192.0.2.0/24")
    });
    assert_eq!(r["origin"], "control-plane");
    assert_eq!(
        (r["via"].as_str(), r["vnic"].as_u64()),
        (Some("10.0.2.2"), Some(1))
    );
    // Not listed by default with the config's routes, by origin.
    let all = d.json(&["route", "list", vr, "--origin", "all"]);
    assert!(
        all["routes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["origin"] != "api"),
        "{all}"
    );
    // It forwards: ns-a to the peer's 192.0.2.1.
    until("a ping through the learnt route", || {
        pings(na).then_some(())
    });

    // Withdrawn by the peer: out of the FIB, no more forwarding.
    birdc(peer_sock, &["disable", "st"]);
    until("the withdrawal", || {
        cp_routes(d, vr).is_empty().then_some(())
    });
    assert!(!pings(na), "a withdrawn route still forwards");

    // The VR's BIRD killed: restarted, the session and the route back.
    let pid = until("the VR's bird pid", || {
        let out = Command::new("ip")
            .args(["netns", "pids", &format!("vrctl-{vr}")])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .map(str::to_string)
    });
    birdc(peer_sock, &["enable", "st"]);
    until("the route again", || {
        (!cp_routes(d, vr).is_empty()).then_some(())
    });
    Command::new("kill").args(["-9", &pid]).status().unwrap();
    until("the daemon to restart it", || {
        let log = d.log.lock().unwrap();
        let starts = log.iter().filter(|l| l.contains("control plane started"));
        (starts.count() >= 2).then_some(())
    });
    let cp = d.json(&["vr", "show", vr])["stats"]["control_plane"].clone();
    assert!(cp["restarts"].as_u64() >= Some(1), "{cp}");
    assert!(cp["starts"].as_u64() >= Some(2), "{cp}");
    // Until its session is back and after, the route stays (BIRD in
    // graceful restart recovery keeps its kernel routes).
    let t = Instant::now();
    while !birdc(sock, &["show", "protocols", "peer"]).contains("Established") {
        assert!(
            !cp_routes(d, vr).is_empty(),
            "the route stays while the control plane restarts"
        );
        assert!(t.elapsed() < PATIENCE, "the session did not come back");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!cp_routes(d, vr).is_empty());
    until("a ping again", || pings(na).then_some(()));
}

/// A control plane of the tenant's own command, which stays down: the
/// routes of its namespace's kernel table reach the VR, stay while it is
/// down, are withdrawn when its hold time passes, and come back from a
/// new dump of the table when it is up again.
#[test]
fn a_control_plane_down_past_its_hold_time_loses_its_routes_until_it_is_back() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let vr = format!("ch{}", std::process::id());
    let ns = format!("vrctl-{vr}");
    let _ctl = CtlNs(ns.clone());
    let [_na, nr, _np] = topology();
    // Up until a file `down` is in its run directory (its working
    // directory), then it fails at every start.
    let cfg = config(&vr).replace(
        "control_plane = \"bird\"\ncontrol_config = \"vr-bird.conf\"",
        "control_plane = { command = [\"/bin/sh\", \"-c\", \"test -e down && exit 1; exec sleep 1000\"] }\ncontrol_hold_ms = 1500",
    );
    let net = format!("--net=/run/netns/{}", nr.name());
    let d = common::daemon::Daemon::start_under("ch", &cfg, &["nsenter", &net]);
    let ip = |args: &[&str]| {
        let st = Command::new("ip").arg("-n").arg(&ns).args(args).status();
        assert!(st.unwrap().success(), "ip {args:?}");
    };
    ip(&[
        "route",
        "add",
        "198.51.100.0/24",
        "via",
        "10.0.2.2",
        "proto",
        "static",
    ]);
    ip(&[
        "route",
        "add",
        "203.0.113.0/24",
        "via",
        "10.0.1.2",
        "dev",
        "vnic0",
        "proto",
        "static",
    ]);
    let r = until("the routes of the kernel table", || {
        let rs = cp_routes(&d, &vr);
        (rs.len() == 2).then_some(rs)
    });
    assert_eq!(r[0]["prefix"], "198.51.100.0/24");
    assert_eq!(
        (r[0]["via"].as_str(), r[0]["vnic"].as_u64()),
        (Some("10.0.2.2"), Some(1))
    );
    assert_eq!(
        (r[1]["via"].as_str(), r[1]["vnic"].as_u64()),
        (Some("10.0.1.2"), Some(0))
    );
    // A withdrawal in the table is one in the VR.
    ip(&["route", "del", "203.0.113.0/24"]);
    until("the withdrawal", || {
        (cp_routes(&d, &vr).len() == 1).then_some(())
    });

    // Down for good: the route stays until the hold time passes.
    let run = Path::new("/run/vrhost/ctl").join(&ns);
    std::fs::write(run.join("down"), "").unwrap();
    let down_at = Instant::now();
    let out = Command::new("ip").args(["netns", "pids", &ns]).output();
    for p in String::from_utf8_lossy(&out.unwrap().stdout).split_whitespace() {
        Command::new("kill").args(["-9", p]).status().unwrap();
    }
    until("the routes withdrawn after the hold time", || {
        cp_routes(&d, &vr).is_empty().then_some(())
    });
    assert!(
        down_at.elapsed() >= Duration::from_millis(1500),
        "withdrawn before the hold time: {:?}",
        down_at.elapsed()
    );
    assert!(d.logged(&["past its hold time", &vr]).is_some());
    // Back: a new dump gives the VR the table's route again.
    std::fs::remove_file(run.join("down")).unwrap();
    let r = until("the route back", || {
        cp_routes(&d, &vr)
            .into_iter()
            .find(|r| r["prefix"] == "198.51.100.0/24")
    });
    assert_eq!(r["origin"], "control-plane");
}

/// A VR changed by `vrhost apply` keeps its running control plane (same
/// process) and its control-plane routes; removed, its namespace goes.
#[test]
fn a_changed_vr_keeps_its_control_plane_and_a_removed_one_its_namespace_goes() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let vr = format!("cc{}", std::process::id());
    let ns = format!("vrctl-{vr}");
    let _ctl = CtlNs(ns.clone());
    let [_na, nr, _np] = topology();
    let cfg = config(&vr).replace(
        "control_plane = \"bird\"\ncontrol_config = \"vr-bird.conf\"",
        "control_plane = { command = [\"/bin/sleep\", \"1000\"] }",
    );
    let net = format!("--net=/run/netns/{}", nr.name());
    let d = common::daemon::Daemon::start_under("cc", &cfg, &["nsenter", &net]);
    let st = Command::new("ip")
        .args([
            "-n",
            &ns,
            "route",
            "add",
            "198.51.100.0/24",
            "via",
            "10.0.2.2",
            "proto",
            "static",
        ])
        .status();
    assert!(st.unwrap().success());
    until("the route", || {
        (cp_routes(&d, &vr).len() == 1).then_some(())
    });
    let pids = || {
        let out = Command::new("ip")
            .args(["netns", "pids", &ns])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let before = pids();
    assert!(!before.is_empty(), "the control plane runs");

    // Changed (a bigger pool): a new VR process, the same control plane.
    let changed = d.dir().join("changed.toml");
    std::fs::write(
        &changed,
        cfg.replace("control_plane =", "slots = 4096\ncontrol_plane ="),
    )
    .unwrap();
    let res = d.json(&["apply", changed.to_str().unwrap()]);
    assert_eq!(res["restarted"], serde_json::json!([vr]), "{res}");
    assert_eq!(pids(), before, "the same control plane process");
    assert_eq!(cp_routes(&d, &vr).len(), 1, "its route given to the new VR");

    // Removed: no VR left, its namespace deleted.
    let empty = d.dir().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let res = d.json(&["apply", empty.to_str().unwrap()]);
    assert_eq!(res["removed"], serde_json::json!([vr]), "{res}");
    assert!(
        !Path::new("/run/netns").join(&ns).exists(),
        "namespace removed"
    );
    assert!(
        !Path::new("/run/vrhost/ctl").join(&ns).exists(),
        "run directory removed"
    );
}

/// The VR's BIRD for [`ospf_through_vrhost_brings_up_an_adjacency_and_its_route_forwards`]:
/// OSPF on vNIC 1 (point to point, fast timers), what OSPF learns beyond
/// the link into the kernel table.
const VR_OSPF: &str = r#"
log stderr all;
router id 10.0.2.1;
protocol device { }
protocol kernel { ipv4 { import none; export where source = RTS_OSPF && net != 10.0.2.0/24; }; }
protocol ospf v2 o {
  ipv4 { import all; export none; };
  area 0 { interface "vnic1" { type ptp; hello 1; dead 4; }; };
}
"#;

/// The OSPF neighbour: its loopback's 192.0.2.0/24 as a stub network.
const PEER_OSPF: &str = r#"
log stderr all;
router id 10.0.2.2;
protocol device { }
protocol ospf v2 o {
  ipv4 { import none; export none; };
  area 0 {
    interface "p0" { type ptp; hello 1; dead 4; };
    interface "lo" { stub yes; };
  };
}
"#;

/// An OSPF neighbour (BIRD 2 in ns-p) of the VR's BIRD: the adjacency
/// comes up through vrhost (hellos to 224.0.0.5 handed to the control
/// plane, its own out of vNIC 1), the stub network it advertises reaches
/// the FIB with origin control-plane and carries a ping; the VR's control
/// plane status says it runs and how many routes it gave.
#[test]
fn ospf_through_vrhost_brings_up_an_adjacency_and_its_route_forwards() {
    let Some(lab) = bird_lab("co", PEER_OSPF, VR_OSPF) else {
        return;
    };
    let (vr, d, sock, peer_sock, na) = lab.parts();
    until("the OSPF adjacency", || {
        birdc(sock, &["show", "ospf", "neighbors", "o"])
            .contains("Full")
            .then_some(())
    });
    assert!(birdc(peer_sock, &["show", "ospf", "neighbors", "o"]).contains("Full"));
    let r = until("the OSPF route", || {
        cp_routes(d, vr)
            .into_iter()
            .find(|r| r["prefix"] == "192.0.2.0/24")
    });
    assert_eq!(
        (r["via"].as_str(), r["vnic"].as_u64()),
        (Some("10.0.2.2"), Some(1))
    );
    until("a ping through the OSPF route", || pings(na).then_some(()));
    // Its status: running, the route it gave.
    let show = d.json(&["vr", "show", vr]);
    let cp = &show["stats"]["control_plane"];
    assert_eq!(
        (cp["running"].as_bool(), cp["routes"].as_u64()),
        (Some(true), Some(1)),
        "{cp}"
    );
    assert_eq!(
        (cp["starts"].as_u64(), cp["restarts"].as_u64()),
        (Some(1), Some(0)),
        "{cp}"
    );
    let text = d.ok(&["vr", "show", vr]);
    assert!(text.contains("0 restarts, 1 routes learnt"), "{text}");
    let m = d.metrics();
    for line in [
        format!("vrhost_vr_control_plane_up{{vr=\"{vr}\"}} 1"),
        format!("vrhost_vr_control_plane_routes{{vr=\"{vr}\"}} 1"),
        format!("vrhost_vr_control_plane_restarts_total{{vr=\"{vr}\"}} 0"),
    ] {
        assert!(m.lines().any(|l| l == line), "no {line} in the metrics");
    }
    // The peer's stub withdrawn: out of the FIB.
    birdc(peer_sock, &["disable", "o"]);
    until("the withdrawal", || {
        cp_routes(d, vr).is_empty().then_some(())
    });
}
