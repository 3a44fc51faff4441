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

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use vrhost_host::balance::flow_hash;
use vrhost_host::cluster::{ClusterPolicy, EngineSet};
use vrhost_lab::{Netns, veth};

const G0_MAC: &str = "02:7c:00:00:00:0a";
const S0_MAC: &str = "02:7c:00:00:00:0b";
/// The VR's vNIC MACs (the same on every engine: one logical router);
/// the dispatcher's access ports carry them too.
const VNIC0_MAC: &str = "02:7c:00:00:01:00";
const VNIC1_MAC: &str = "02:7c:00:00:01:01";
const D_UL_MAC: &str = "02:7c:00:00:09:01";
const ENGINES: [&str; 3] = ["e1", "e2", "e3"];
const FLOWS: u16 = 24;
const SINK_PORT: u16 = 9000;
const FIRST_SPORT: u16 = 20000;
/// A bound against a hung test, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(30);
/// One round (a frame of every flow) every this long: 4,800 frames/s.
const PACE: Duration = Duration::from_millis(5);

fn engine_mac(i: usize) -> String {
    format!("02:7c:00:00:09:1{}", i + 1)
}

fn engine_ip(i: usize) -> String {
    format!("10.9.0.1{}", i + 1)
}

fn dispatcher_config() -> String {
    let mut s = String::from(
        r#"
[[ports]]
name = "in"
driver = "af_packet"
interface = "d_in"

[[ports]]
name = "out"
driver = "af_packet"
interface = "d_out"

[[ports]]
name = "under"
driver = "af_packet"
interface = "d_ul"

[cluster]
role = "dispatcher"
heartbeat = "10.9.0.1:4790"
underlay = "under"
local = "10.9.0.1"

[[cluster.vrs]]
name = "r"
id = 7
ports = ["in", "out"]
engines = ["e1", "e2", "e3"]
policy = "flow"
"#,
    );
    for (i, e) in ENGINES.iter().enumerate() {
        s += &format!(
            "\n[[cluster.engines]]\nname = \"{e}\"\naddress = \"{}\"\nmac = \"{}\"\n",
            engine_ip(i),
            engine_mac(i)
        );
    }
    s
}

fn engine_config(i: usize) -> String {
    let ip = engine_ip(i);
    let (vni_in, vni_out) = (7 << 16, 7 << 16 | 1 << 8);
    format!(
        r#"
[[ports]]
name = "under"
driver = "af_packet"
interface = "e{n}_ul"

[[tunnels]]
name = "t_in"
kind = "vxlan"
port = "under"
local = "{ip}"
remote = "10.9.0.1"
vni = {vni_in}
remote_mac = "{D_UL_MAC}"

[[tunnels]]
name = "t_out"
kind = "vxlan"
port = "under"
local = "{ip}"
remote = "10.9.0.1"
vni = {vni_out}
remote_mac = "{D_UL_MAC}"

[[vrs]]
name = "r"
vnics = [
  {{ tunnel = "t_in", mac = "{VNIC0_MAC}", addrs = ["10.1.0.1/24"] }},
  {{ tunnel = "t_out", mac = "{VNIC1_MAC}", addrs = ["10.2.0.1/24"] }},
]
[vrs.router]
nexthops = [{{ vnic = 1, mac = "{S0_MAC}" }}, {{ vnic = 0, mac = "{G0_MAC}" }}]
routes = [{{ prefix = "10.2.0.2/32", nexthop = 0 }}, {{ prefix = "10.1.0.2/32", nexthop = 1 }}]

[cluster]
role = "engine"
heartbeat = "{ip}:4790"
"#,
        n = i + 1
    )
}

/// The namespaces: gen, disp, sink, ul, e1, e2, e3.
struct Lab {
    generator: Netns,
    disp: Netns,
    sink: Netns,
    _ul: Netns,
    engines: Vec<Netns>,
}

fn lab() -> Lab {
    let mk = |p: &str| {
        let n = Netns::unique(p).expect("a namespace");
        n.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
        n.sysctl("net.ipv6.conf.default.disable_ipv6", "1").unwrap();
        n
    };
    let (generator, disp, sink, ul) = (mk("cl-gen"), mk("cl-disp"), mk("cl-sink"), mk("cl-ul"));
    let engines: Vec<Netns> = (1..=3).map(|i| mk(&format!("cl-e{i}"))).collect();
    let ip = |n: &Netns, args: &[&str]| n.ip(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    veth(
        &generator,
        "g0",
        Some(G0_MAC),
        &disp,
        "d_in",
        Some(VNIC0_MAC),
    )
    .unwrap();
    veth(&disp, "d_out", Some(VNIC1_MAC), &sink, "s0", Some(S0_MAC)).unwrap();
    ip(&ul, &["link", "add", "br0", "type", "bridge"]);
    ip(&ul, &["link", "set", "br0", "up"]);
    veth(&disp, "d_ul", Some(D_UL_MAC), &ul, "ul_d", None).unwrap();
    ip(&ul, &["link", "set", "ul_d", "master", "br0"]);
    ip(&disp, &["addr", "add", "10.9.0.1/24", "dev", "d_ul"]);
    for (i, e) in engines.iter().enumerate() {
        let (eif, uif) = (format!("e{}_ul", i + 1), format!("ul_{}", i + 1));
        veth(e, &eif, Some(&engine_mac(i)), &ul, &uif, None).unwrap();
        ip(&ul, &["link", "set", &uif, "master", "br0"]);
        ip(
            e,
            &["addr", "add", &format!("{}/24", engine_ip(i)), "dev", &eif],
        );
    }
    for (n, dev, addr, gw, gw_mac) in [
        (&generator, "g0", "10.1.0.2/24", "10.1.0.1", VNIC0_MAC),
        (&sink, "s0", "10.2.0.2/24", "10.2.0.1", VNIC1_MAC),
    ] {
        ip(n, &["addr", "add", addr, "dev", dev]);
        ip(n, &["neigh", "add", gw, "lladdr", gw_mac, "dev", dev]);
        ip(n, &["route", "add", "default", "via", gw]);
        // UDP checksums complete in the frame: the frames are read raw.
        let _ = n.exec("ethtool", &["-K", dev, "tx", "off"]);
    }
    Lab {
        generator,
        disp,
        sink,
        _ul: ul,
        engines,
    }
}

/// The first 42 bytes of flow `f`'s frames as the dispatcher reads them:
/// what its flow hash reads (the IPv4 5-tuple).
fn frame_of(f: u16) -> Vec<u8> {
    let mut b = vec![0u8; 42];
    b[12..14].copy_from_slice(&[0x08, 0x00]);
    b[14] = 0x45;
    b[16..18].copy_from_slice(&28u16.to_be_bytes());
    b[22] = 64;
    b[23] = 17;
    b[26..30].copy_from_slice(&[10, 1, 0, 2]);
    b[30..34].copy_from_slice(&[10, 2, 0, 2]);
    b[34..36].copy_from_slice(&(FIRST_SPORT + f).to_be_bytes());
    b[36..38].copy_from_slice(&SINK_PORT.to_be_bytes());
    b
}

/// The engine the dispatcher picks for flow `f` with engines `live` up.
fn engine_of(f: u16, live: u64) -> usize {
    let mut set = EngineSet::new(ClusterPolicy::Flow, &ENGINES, &[]);
    set.set_live(live);
    set.pick(flow_hash(&frame_of(f))).expect("an engine up")
}

/// A datagram: phase, flow, sequence number.
fn payload(phase: u8, flow: u16, seq: u32) -> [u8; 7] {
    let mut p = [0u8; 7];
    p[0] = phase;
    p[1..3].copy_from_slice(&flow.to_be_bytes());
    p[3..7].copy_from_slice(&seq.to_be_bytes());
    p
}

/// What the sink got: (phase, flow, seq, when).
type Got = Arc<Mutex<Vec<(u8, u16, u32, Instant)>>>;

/// The sink's receiver, until `stop`.
fn receive(sock: UdpSocket, got: Got, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    std::thread::spawn(move || {
        let mut b = [0u8; 64];
        while !stop.load(Ordering::Relaxed) {
            if let Ok(7) = sock.recv(&mut b) {
                let flow = u16::from_be_bytes([b[1], b[2]]);
                let seq = u32::from_be_bytes([b[3], b[4], b[5], b[6]]);
                got.lock().unwrap().push((b[0], flow, seq, Instant::now()));
            }
        }
    })
}

/// Send `rounds` rounds of phase `phase` (a frame of every flow each
/// [`PACE`]); `at_round` is called before each round. The send time of
/// each round.
fn send(
    socks: &[UdpSocket],
    phase: u8,
    rounds: u32,
    mut at_round: impl FnMut(u32),
) -> Vec<Instant> {
    let to = SocketAddr::from(([10, 2, 0, 2], SINK_PORT));
    let mut times = Vec::new();
    let mut next = Instant::now();
    for seq in 0..rounds {
        at_round(seq);
        times.push(Instant::now());
        for (f, s) in socks.iter().enumerate() {
            s.send_to(&payload(phase, f as u16, seq), to).unwrap();
        }
        next += PACE;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    times
}

/// Per flow, the sequence numbers of phase `phase` in arrival order, with
/// their arrival times.
fn by_flow(got: &Got, phase: u8) -> BTreeMap<u16, Vec<(u32, Instant)>> {
    let mut m: BTreeMap<u16, Vec<(u32, Instant)>> = BTreeMap::new();
    for &(p, f, s, t) in got.lock().unwrap().iter() {
        if p == phase {
            m.entry(f).or_default().push((s, t));
        }
    }
    m
}

fn engine_field(status: &Value, i: usize, field: &str) -> Value {
    status["engines"][i][field].clone()
}

fn wait_engines(d: &common::Daemon, live: usize) -> Value {
    let t0 = Instant::now();
    loop {
        let s = d.json(&["cluster", "status"]);
        let up = (0..3)
            .filter(|&i| engine_field(&s, i, "state") == "up")
            .count();
        if up == live {
            return s;
        }
        assert!(t0.elapsed() < PATIENCE, "engines not up: {s:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

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

    let rx = lab
        .sink
        .run(|| UdpSocket::bind(("10.2.0.2", SINK_PORT)))
        .unwrap()
        .expect("the sink's socket");
    let socks: Vec<UdpSocket> = lab
        .generator
        .run(|| {
            (0..FLOWS)
                .map(|f| UdpSocket::bind(("10.1.0.2", FIRST_SPORT + f)).unwrap())
                .collect()
        })
        .unwrap();
    let got: Got = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = receive(rx, got.clone(), stop.clone());

    // Warm up: every flow through once (the VRs' first frames).
    let t0 = Instant::now();
    while by_flow(&got, 0).len() < usize::from(FLOWS) {
        assert!(
            t0.elapsed() < PATIENCE,
            "not every flow got through: {:#}",
            d.json(&["cluster", "status"])
        );
        send(&socks, 0, 1, |_| {});
        std::thread::sleep(Duration::from_millis(50));
    }

    // Phase 1: every frame arrives, in order within its flow.
    const ROUNDS: u32 = 40;
    let before = d.json(&["cluster", "status"]);
    send(&socks, 1, ROUNDS, |_| {});
    std::thread::sleep(Duration::from_millis(500));
    let p1 = by_flow(&got, 1);
    for f in 0..FLOWS {
        let seqs: Vec<u32> = p1
            .get(&f)
            .map(|v| v.iter().map(|x| x.0).collect())
            .unwrap_or_default();
        assert_eq!(
            seqs,
            (0..ROUNDS).collect::<Vec<_>>(),
            "flow {f}: lost or reordered"
        );
    }
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
    let times = send(&socks, 2, LOAD, |seq| {
        if seq == 80 {
            let mut v = victim.take().unwrap();
            v.child.kill().unwrap();
            killed_at = Some(Instant::now());
            let _ = v.child.wait();
        }
    });
    let killed_at = killed_at.unwrap();
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    receiver.join().unwrap();
    let p2 = by_flow(&got, 2);
    for f in (0..FLOWS).filter(|f| !moved.contains(f)) {
        let seqs: Vec<u32> = p2
            .get(&f)
            .map(|v| v.iter().map(|x| x.0).collect())
            .unwrap_or_default();
        assert_eq!(
            seqs,
            (0..LOAD).collect::<Vec<_>>(),
            "flow {f} of a live engine: lost or reordered"
        );
    }
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
/// their vrhost configs check (no root needed).
#[test]
fn the_cluster_lab_and_its_vrhost_configs_check() {
    use vrhost_host::config::{ClusterPlan, Config};
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lab = vrhost_lab::Lab::load(&repo.join("lab/cluster.toml")).unwrap();
    let nodes = lab.vrhost_nodes();
    let names: Vec<&str> = nodes.iter().map(|n| n.0).collect();
    assert_eq!(names, ["disp", "e1", "e2", "e3"]);
    let (_, disp) = Config::load(&nodes[0].1).unwrap();
    let Some(ClusterPlan::Dispatcher { spec, .. }) = disp.cluster else {
        panic!("the first node is no dispatcher");
    };
    assert_eq!(spec.engines.len(), 3);
    for (_, cfg) in &nodes[1..] {
        let (_, p) = Config::load(cfg).unwrap();
        assert!(matches!(p.cluster, Some(ClusterPlan::Engine { .. })));
        // The engine's tunnels carry the tags of the dispatcher's ports.
        let vnis: Vec<u32> = p.vrs[0]
            .vnic_tunnels
            .iter()
            .map(|t| t.unwrap().vni)
            .collect();
        let tag = |port: u8| {
            vrhost_host::cluster::Tag {
                vr: spec.vrs[0].id,
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
