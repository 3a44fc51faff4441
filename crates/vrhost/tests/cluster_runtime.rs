//! Remote VRs added to and removed from a running dispatcher (root only;
//! needs `ip`, `ethtool`), on the lab of `tests/cluster.rs` with a second
//! pair of access ports:
//!
//! ```text
//!  ns gen                ns disp (dispatcher)                 ns sink
//!  g0 10.1.0.2 --- d_in  [in]     VR r      [out]  d_out  --- s0 10.2.0.2
//!  g1 10.3.0.2 --- d_in2 [in2]  (VR q)      [out2] d_out2 --- s1 10.4.0.2
//!                        d_ul [under] 10.9.0.1 --- ns ul --- e1, e2
//! ```
//!
//! Remote VR `r` (id 7) runs on engines e1 and e2 and forwards numbered
//! UDP flows the whole time. Remote VR `q` (id 8, on e1, which runs its
//! router) is added with `vrhost cluster add`: its flows cross e1; then
//! removed with `vrhost cluster remove`: its ports' frames are counted
//! drops (`no_match`) and none reaches e1 or the sink. `r` loses and
//! reorders nothing meanwhile. What the API refuses (a port a VR owns, an
//! id taken, no such VR) is refused with its status.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::cluster::*;
use serde_json::Value;
use vrhost_lab::veth;

const G1_MAC: &str = "02:7c:00:00:00:1a";
const S1_MAC: &str = "02:7c:00:00:00:1b";
const Q_VNIC0_MAC: &str = "02:7c:00:00:01:10";
const Q_VNIC1_MAC: &str = "02:7c:00:00:01:11";
const Q_FLOWS: u16 = 4;
const Q_SINK_PORT: u16 = 9001;
const Q_FIRST_SPORT: u16 = 21000;

/// The second pair: g1 -- d_in2, d_out2 -- s1.
fn second_pair(lab: &Lab) {
    let ip = |n: &vrhost_lab::Netns, args: &[&str]| {
        n.ip(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    };
    veth(
        &lab.generator,
        "g1",
        Some(G1_MAC),
        &lab.disp,
        "d_in2",
        Some(Q_VNIC0_MAC),
    )
    .unwrap();
    veth(
        &lab.disp,
        "d_out2",
        Some(Q_VNIC1_MAC),
        &lab.sink,
        "s1",
        Some(S1_MAC),
    )
    .unwrap();
    for (n, dev, addr, gw, gw_mac, to) in [
        (
            &lab.generator,
            "g1",
            "10.3.0.2/24",
            "10.3.0.1",
            Q_VNIC0_MAC,
            "10.4.0.0/24",
        ),
        (
            &lab.sink,
            "s1",
            "10.4.0.2/24",
            "10.4.0.1",
            Q_VNIC1_MAC,
            "10.3.0.0/24",
        ),
    ] {
        ip(n, &["addr", "add", addr, "dev", dev]);
        ip(n, &["neigh", "add", gw, "lladdr", gw_mac, "dev", dev]);
        ip(n, &["route", "add", to, "via", gw]);
        let _ = n.exec("ethtool", &["-K", dev, "tx", "off"]);
    }
}

/// The dispatcher: r on e1 and e2, the ports in2 (3) and out2 (4) no
/// VR's yet.
fn dispatcher() -> String {
    let base = DISPATCHER_BASE.replace("\n[cluster]\n", "\n[[ports]]\nname = \"in2\"\ndriver = \"af_packet\"\ninterface = \"d_in2\"\n\n[[ports]]\nname = \"out2\"\ndriver = \"af_packet\"\ninterface = \"d_out2\"\n\n[cluster]\n");
    format!(
        "{base}\n[[cluster.vrs]]\nname = \"r\"\nid = 7\nports = [\"in\", \"out\"]\nengines = [\"e1\", \"e2\"]\n{}",
        engines_toml("")
    )
}

/// Engine e1 with VR q beside r: its tunnels carry q's tags (id 8, ports
/// 3 and 4).
fn engine_e1() -> String {
    let q = engine_vr(
        0,
        "q",
        [8 << 16 | 3 << 8, 8 << 16 | 4 << 8],
        [
            Side {
                vnic_mac: Q_VNIC0_MAC,
                addr: "10.3.0.1/24",
                host: "10.3.0.2",
                host_mac: G1_MAC,
            },
            Side {
                vnic_mac: Q_VNIC1_MAC,
                addr: "10.4.0.1/24",
                host: "10.4.0.2",
                host_mac: S1_MAC,
            },
        ],
    );
    // Before `[cluster]`: its tables are the engine's.
    engine_config(0).replace("\n[cluster]\n", &format!("{q}\n[cluster]\n"))
}

/// Flows of `socks` to `to`, numbered from 0, one round every [`PACE`]
/// until `stop`: when each round was sent.
fn pace(socks: &[UdpSocket], to: SocketAddr, phase: u8, stop: &AtomicBool) -> Vec<Instant> {
    let mut seq = 0;
    let mut next = Instant::now();
    let mut times = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        times.push(Instant::now());
        for (f, s) in socks.iter().enumerate() {
            s.send_to(&payload(phase, f as u16, seq), to).unwrap();
        }
        seq += 1;
        next += PACE;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    times
}

/// q's frames the sink got (phase, flow, seq) and the VR's frames on e1.
struct Q {
    socks: Vec<UdpSocket>,
    got: Got,
    stop: Arc<AtomicBool>,
}

impl Q {
    fn start(lab: &Lab) -> Self {
        let rx = (lab.sink.run(|| UdpSocket::bind(("10.4.0.2", Q_SINK_PORT))))
            .unwrap()
            .expect("q's sink socket");
        let socks = (lab.generator)
            .run(|| {
                (0..Q_FLOWS)
                    .map(|f| UdpSocket::bind(("10.3.0.2", Q_FIRST_SPORT + f)).unwrap())
                    .collect::<Vec<_>>()
            })
            .unwrap();
        let got: Got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        receive(rx, got.clone(), stop.clone());
        Self { socks, got, stop }
    }

    /// Send `rounds` rounds of `phase`.
    fn send(&self, phase: u8, rounds: u32) {
        let to = SocketAddr::from(([10, 4, 0, 2], Q_SINK_PORT));
        for seq in 0..rounds {
            for (f, s) in self.socks.iter().enumerate() {
                s.send_to(&payload(phase, f as u16, seq), to).unwrap();
            }
            std::thread::sleep(PACE);
        }
    }

    fn count(&self, phase: u8) -> usize {
        by_flow(&self.got, phase).values().map(Vec::len).sum()
    }
}

impl Drop for Q {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A daemon's drops: its ports', its host's and its VRs' (non-zero).
fn drops(d: &common::Daemon) -> String {
    let s = d.stats();
    let mut out = Vec::new();
    for p in s["ports"].as_array().into_iter().flatten() {
        for k in ["rx_dropped", "tx_dropped"] {
            if p[k].as_u64().unwrap_or(0) > 0 {
                out.push(format!("port {} {k} {}", p["name"], p[k]));
            }
        }
    }
    out.push(format!("host {}", s["host"]["ingress_drops"]));
    for v in s["vrs"].as_array().into_iter().flatten() {
        let st = &v["stats"];
        out.push(format!(
            "VR {}: vr_dropped {} port_dropped {} ingress {}",
            v["name"], st["vr_dropped"], st["port_dropped"], st["ingress_drops"]
        ));
    }
    out.join("; ")
}

fn no_match(d: &common::Daemon) -> u64 {
    let s = d.stats();
    s["host"]["ingress_drops"]["no_match"].as_u64().unwrap_or(0)
}

fn q_rx(e1: &common::Daemon) -> u64 {
    common::count(&e1.stats(), "q", "rx_packets")
}

/// Raises its flag when dropped.
struct Halt<'a>(&'a AtomicBool);

impl Drop for Halt<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `vrhost ARGS` fails, saying `says` (with the API's status).
fn refused(d: &common::Daemon, args: &[&str], says: &[&str]) {
    let (ok, _, err) = d.run(args);
    assert!(!ok, "vrhost {args:?} succeeded");
    for s in says {
        assert!(err.contains(s), "vrhost {args:?}: {err}");
    }
}

#[test]
fn a_remote_vr_added_at_run_time_forwards_and_removed_stops_while_another_loses_nothing() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let lab = lab();
    second_pair(&lab);
    let wrap = |n: &vrhost_lab::Netns| ["ip", "netns", "exec", n.name()].map(String::from);
    let w1 = wrap(&lab.engines[0]);
    let w2 = wrap(&lab.engines[1]);
    let wd = wrap(&lab.disp);

    let e1 = common::Daemon::start_under("clrt-e1", &engine_e1(), &strs(&w1));
    let _e2 = common::Daemon::start_under("clrt-e2", &engine_config(1), &strs(&w2));
    let d = common::Daemon::start_under("clrt-disp", &dispatcher(), &strs(&wd));
    wait_engines(&d, 2);

    let mut flows = Flows::start(&lab);
    flows.wait_through(0, &d);
    let q = Q::start(&lab);

    // What is refused, with its status.
    let add = |id: &str, p0: &str| {
        [
            "cluster", "add", "q", "--id", id, "--port", p0, "--port", "out2", "--engine", "e1",
        ]
        .map(String::from)
    };

    refused(
        &d,
        &strs(&add("8", "in")),
        &["409", "owned by remote VR \"r\""],
    );
    refused(&d, &strs(&add("8", "under")), &["409", "underlay"]);
    refused(&d, &strs(&add("7", "in2")), &["409", "id 7"]);
    refused(&d, &strs(&add("8", "nope")), &["422", "nope"]);
    refused(&d, &["cluster", "remove", "q"], &["404"]);

    // r's flows the whole time, on a thread.
    let stop = AtomicBool::new(false);
    let to_r = SocketAddr::from(([10, 2, 0, 2], SINK_PORT));
    let t_r = Instant::now();
    let times = std::thread::scope(|sc| {
        let r = sc.spawn(|| pace(&flows.socks, to_r, 1, &stop));
        // A failed check below stops the thread too (else the scope waits).
        let _halt = Halt(&stop);
        // Before: q's frames are no VR's.
        let nm0 = no_match(&d);
        q.send(1, 20);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(q.count(1), 0, "q's frames through before it was added");
        assert!(no_match(&d) - nm0 >= 20 * u64::from(Q_FLOWS));

        // Added: its frames cross e1's VR q to the sink.
        let added_at = t_r.elapsed();
        let out = d.ok(&strs(&add("8", "in2")));
        let added_by = t_r.elapsed();
        assert!(out.contains("added remote VR q"), "{out}");
        let st = d.json(&["cluster", "status"]);
        assert_eq!(st["vrs"][1]["name"], "q", "{st:#}");
        assert_eq!(st["vrs"][1]["ports"], serde_json::json!(["in2", "out2"]));
        let t0 = Instant::now();
        while q.count(2) == 0 {
            assert!(
                t0.elapsed() < PATIENCE,
                "q's frames never got through: {st:#}"
            );
            q.send(2, 1);
            std::thread::sleep(Duration::from_millis(50));
        }
        let (rx0, got0) = (q_rx(&e1), q.count(3));
        assert_eq!(got0, 0);
        q.send(3, 50);
        std::thread::sleep(Duration::from_millis(500));
        let through = q.count(3);
        assert_eq!(through, 50 * usize::from(Q_FLOWS), "q lost frames");
        assert!(
            q_rx(&e1) - rx0 >= 50 * u64::from(Q_FLOWS),
            "not through e1's VR q"
        );

        // Removed: counted drops, nothing to e1 or the sink.
        let removed_at = t_r.elapsed();
        d.ok(&["cluster", "remove", "q"]);
        let removed_by = t_r.elapsed();
        let st = d.json(&["cluster", "status"]);
        assert_eq!(st["vrs"].as_array().map(Vec::len), Some(1), "{st:#}");
        std::thread::sleep(Duration::from_millis(200));
        let (rx1, nm1) = (q_rx(&e1), no_match(&d));
        q.send(4, 50);
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(q.count(4), 0, "q's frames through after it was removed");
        assert_eq!(q_rx(&e1), rx1, "q's frames reached e1 after it was removed");
        assert!(
            no_match(&d) - nm1 >= 50 * u64::from(Q_FLOWS),
            "not counted as drops"
        );
        stop.store(true, Ordering::Relaxed);
        eprintln!("q added {added_at:?}..{added_by:?}, removed {removed_at:?}..{removed_by:?}");
        r.join().unwrap()
    });
    std::thread::sleep(Duration::from_millis(500));
    flows.finish();
    // Where frames were dropped, if any (the failure's first clue).
    for (who, dm) in [("disp", &d), ("e1", &e1), ("e2", &_e2)] {
        eprintln!("{who}: {}", drops(dm));
    }
    let rounds = times.len() as u32;
    // When the rounds some flow lost were sent (against the changes).
    let p1 = by_flow(&flows.got, 1);
    let got = |f: u16, q: u32| p1.get(&f).is_some_and(|v| v.iter().any(|x| x.0 == q));
    let lost: Vec<u32> = (0..rounds)
        .filter(|&q| (0..FLOWS).any(|f| !got(f, q)))
        .collect();
    if let (Some(&a), Some(&b)) = (lost.first(), lost.last()) {
        let at = |q: u32| times[q as usize] - t_r;
        eprintln!("r lost frames of rounds sent {:?}..{:?}", at(a), at(b));
    }
    // r: every frame of every flow, in order, through both changes.
    every_frame_in_order(
        &flows.got,
        1,
        0..FLOWS,
        rounds,
        "r's (while q came and went)",
    );
    let st: Value = d.json(&["cluster", "status"]);
    assert_eq!(st["drops"]["bad_tag"], 0, "{st:#}");
    eprintln!("r: {rounds} rounds of {FLOWS} flows, none lost, while q was added and removed");
}
