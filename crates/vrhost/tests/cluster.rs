//! A cluster between network namespaces (root only; needs `ip`,
//! `ethtool`): a dispatcher vrhost and three engine vrhosts (PdP, issue
//! 23), each its own `vrhost daemon` process in its own namespace.
//!
//! ```text
//!  ns gen          ns disp (dispatcher)             ns sink
//!  g0 10.1.0.2 --- d_in [in]          [out] d_out --- s0 10.2.0.2
//!                       d_ul [under] 10.9.0.1
//!                         |
//!  ns ul: bridge br0 ---- e1_ul 10.9.0.11 (ns e1: engine vrhost, VR "r")
//!                   ---- e2_ul 10.9.0.12 (ns e2)
//!                   ---- e3_ul 10.9.0.13 (ns e3)
//! ```
//!
//! The dispatcher owns `in` and `out` for the remote VR `r` (id 7) and
//! sends their frames to the engines over VXLAN, the tag in the VNI; each
//! engine runs the built-in router as VR `r`, whose two vNICs are VXLAN
//! tunnels to the dispatcher with the VNIs of the tags of `in` (7 << 16)
//! and `out` (7 << 16 | 1 << 8). Many UDP flows go from gen to sink,
//! numbered per flow: every frame arrives, none out of order (policy
//! `flow`). Then one engine's daemon is killed (SIGKILL) under load: its
//! flows are forwarded again within 1 s (after 3 missed heartbeats of
//! 100 ms), and the other engines' flows lose nothing. Which engine a flow
//! is on is computed with the dispatcher's own choice (`EngineSet`,
//! rendezvous hashing of the flow hash), and checked by the frames each
//! engine got. Namespaces are deleted by their guards even when a check
//! fails; the daemons are killed by their own.

mod common;

use std::time::{Duration, Instant};

use common::cluster::*;
use serde_json::Value;

#[test]
fn flows_cross_the_dispatcher_and_engines_in_order_and_a_killed_engine_s_flows_move_within_a_second()
 {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let lab = lab();
    let mut engines: Vec<common::Daemon> = lab
        .engines
        .iter()
        .enumerate()
        .map(|(i, n)| {
            common::Daemon::start_under(
                &format!("cluster-e{}", i + 1),
                &engine_config(i),
                &["ip", "netns", "exec", n.name()],
            )
        })
        .collect();
    let d = common::Daemon::start_under(
        "cluster-disp",
        &dispatcher_config(),
        &["ip", "netns", "exec", lab.disp.name()],
    );
    wait_engines(&d, 3);

    let mut flows = Flows::start(&lab);
    let (socks, got) = (&flows.socks, &flows.got);
    // Warm up: every flow through once (the VRs' first frames).
    flows.wait_through(0, &d);
    // Heartbeats (10 pings a second to each engine) are counted as such
    // on the engines' underlays, not as `no_match` drops (which a second
    // sees a few of at most: ARP), and the pongs on the dispatcher's.
    let counts = |e: &common::Daemon| {
        let h = e.stats()["host"].clone();
        let no_match = h["ingress_drops"]["no_match"].as_u64().unwrap_or(0);
        (h["heartbeats"].as_u64().unwrap_or(0), no_match)
    };
    let before: Vec<(u64, u64)> = engines.iter().map(counts).collect();
    let pongs = |s: &serde_json::Value| s["heartbeat_frames"].as_u64().unwrap_or(0);
    let d0 = pongs(&d.json(&["cluster", "status"]));
    std::thread::sleep(Duration::from_secs(1));
    for (e, (hb0, nm0)) in engines.iter().zip(before) {
        let (hb, nm) = counts(e);
        assert!(
            hb - hb0 >= 5 && nm - nm0 < hb - hb0,
            "heartbeats {hb0}..{hb}, no_match {nm0}..{nm}"
        );
    }
    let s = d.json(&["cluster", "status"]);
    assert!(pongs(&s) - d0 >= 15, "{s:#}");

    // Phase 1: every frame arrives, in order within its flow.
    const ROUNDS: u32 = 40;
    let before = d.json(&["cluster", "status"]);
    send(socks, 1, ROUNDS, |_| {});
    std::thread::sleep(Duration::from_millis(500));
    every_frame_in_order(got, 1, 0..FLOWS, ROUNDS, "");
    // Each engine got the frames of the flows the dispatcher's choice
    // puts on it.
    let after = d.json(&["cluster", "status"]);
    let mut per = [0u64; 3];
    for f in 0..FLOWS {
        per[engine_of(f, 0b111)] += u64::from(ROUNDS);
    }
    for (i, &n) in per.iter().enumerate() {
        let sent = |s: &Value| engine_field(s, i, "tx_frames").as_u64().unwrap();
        assert_eq!(sent(&after) - sent(&before), n, "engine {i}: {after:#}");
        let back = |s: &Value| engine_field(s, i, "rx_frames").as_u64().unwrap();
        assert_eq!(
            back(&after) - back(&before),
            n,
            "engine {i} back: {after:#}"
        );
    }
    assert_eq!(after["drops"]["bad_tag"], 0, "{after:#}");

    // Phase 2: engine e2 killed under load.
    const KILLED: usize = 1;
    let moved: Vec<u16> = (0..FLOWS)
        .filter(|&f| engine_of(f, 0b111) == KILLED)
        .collect();
    assert!(!moved.is_empty(), "no flow on e2: choose more flows");
    const LOAD: u32 = 250;
    let mut killed_at = None;
    let mut victim = Some(engines.remove(KILLED));
    let times = send(socks, 2, LOAD, |seq| {
        if seq == 80 {
            let mut v = victim.take().unwrap();
            v.child.kill().unwrap();
            killed_at = Some(Instant::now());
            let _ = v.child.wait();
        }
    });
    let killed_at = killed_at.unwrap();
    std::thread::sleep(Duration::from_millis(500));
    flows.finish();
    let p2 = by_flow(&flows.got, 2);
    let kept = (0..FLOWS).filter(|f| !moved.contains(f));
    every_frame_in_order(&flows.got, 2, kept, LOAD, "a live engine's");
    let mut recovery = Duration::ZERO;
    for &f in &moved {
        let arrived = p2.get(&f).cloned().unwrap_or_default();
        // Every frame sent 1 s after the kill or later arrived.
        for (seq, t) in times.iter().enumerate() {
            if *t >= killed_at + Duration::from_secs(1) {
                assert!(
                    arrived.iter().any(|x| x.0 == seq as u32),
                    "flow {f}: frame {seq}, sent {:?} after the kill, lost",
                    t.duration_since(killed_at)
                );
            }
        }
        // The first frame sent after the kill that arrived: when.
        let first = arrived
            .iter()
            .filter(|x| times[x.0 as usize] > killed_at)
            .map(|x| x.1.duration_since(killed_at))
            .min()
            .expect("the flow came back");
        recovery = recovery.max(first);
    }
    eprintln!(
        "{} flows moved; forwarded again {recovery:?} after the kill",
        moved.len()
    );
    assert!(recovery < Duration::from_secs(1), "{recovery:?}");
    let s = wait_engines(&d, 2);
    assert_eq!(engine_field(&s, KILLED, "state"), "down", "{s:#}");
    assert!(
        engine_field(&s, KILLED, "downs").as_u64().unwrap() >= 1,
        "{s:#}"
    );
    let text = d.ok(&["cluster", "status"]);
    assert!(text.contains("e2") && text.contains("down"), "{text}");
}

/// `lab/cluster.toml` loads, names a dispatcher and three engines, and
/// their vrhost configs check (no root needed); the engines' configs hold
/// no VR: the dispatcher's `vr` table is placed on each of them, whose
/// placement (the config its agent applies) runs VR `r` on tunnels whose
/// VNIs are the tags of the dispatcher's ports.
#[test]
fn the_cluster_lab_and_its_vrhost_configs_check() {
    use vrhost_host::cluster::desired::{Assignment, fragment, merged};
    use vrhost_host::config::{ClusterPlan, Config};
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lab = vrhost_lab::Lab::load(&repo.join("lab/cluster.toml")).unwrap();
    assert!(lab.etcd.is_some(), "the lab starts no etcd");
    let nodes = lab.vrhost_nodes();
    let names: Vec<&str> = nodes.iter().map(|n| n.0).collect();
    assert_eq!(names, ["disp", "e1", "e2", "e3"]);
    let (_, disp) = Config::load(&nodes[0].1).unwrap();
    let Some(ClusterPlan::Dispatcher { spec, .. }) = disp.cluster else {
        panic!("the first node is no dispatcher");
    };
    assert_eq!(spec.engines.len(), 3);
    let r = &spec.vrs[0];
    assert!(r.vr.is_some(), "the remote VR has no `vr` table to place");
    for (name, cfg) in &nodes[1..] {
        let (_, p) = Config::load(cfg).unwrap();
        assert!(p.vrs.is_empty(), "{name} runs VRs of its own");
        let Some(ClusterPlan::Engine {
            etcd: Some(etcd), ..
        }) = p.cluster
        else {
            panic!("{name}: no engine with etcd");
        };
        let ad = etcd.engine.unwrap();
        let frag = toml::to_string(&fragment(&spec, r, &ad).unwrap()).unwrap();
        let base: toml::Table = toml::from_str(&std::fs::read_to_string(cfg).unwrap()).unwrap();
        let a = Assignment {
            id: r.id,
            pps: 0.0,
            config: frag,
        };
        let placed = toml::to_string(&merged(&base, &[a]).unwrap()).unwrap();
        let (_, p) = Config::parse(&placed, name, &repo.join("lab")).unwrap();
        let vnis: Vec<u32> = p.vrs[0]
            .vnic_tunnels
            .iter()
            .map(|t| t.unwrap().vni)
            .collect();
        let tag = |port: u8| {
            vrhost_host::cluster::Tag {
                vr: r.id,
                port,
                local: false,
                instance: 0,
            }
            .to_vni()
            .unwrap()
        };
        assert_eq!(vnis, [tag(0), tag(1)]);
    }
}
