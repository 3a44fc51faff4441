//! The cluster tests' lab (root only; needs `ip`, `ethtool`): a
//! generator, a dispatcher, a sink and three engines in their own
//! namespaces, the underlay a bridge in `ul` (see `tests/cluster.rs`),
//! the daemons' configs, and numbered UDP flows through it.

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use vrhost_host::balance::flow_hash;
use vrhost_host::cluster::{ClusterPolicy, EngineSet};
use vrhost_lab::{Netns, veth};

pub const G0_MAC: &str = "02:7c:00:00:00:0a";
pub const S0_MAC: &str = "02:7c:00:00:00:0b";
/// The VR's vNIC MACs (the same on every engine: one logical router);
/// the dispatcher's access ports carry them too.
pub const VNIC0_MAC: &str = "02:7c:00:00:01:00";
pub const VNIC1_MAC: &str = "02:7c:00:00:01:01";
pub const D_UL_MAC: &str = "02:7c:00:00:09:01";
pub const ENGINES: [&str; 3] = ["e1", "e2", "e3"];
pub const FLOWS: u16 = 24;
pub const SINK_PORT: u16 = 9000;
pub const FIRST_SPORT: u16 = 20000;
/// A bound against a hung test, not a speed limit.
pub const PATIENCE: Duration = Duration::from_secs(30);
/// One round (a frame of every flow) every this long: 4,800 frames/s.
pub const PACE: Duration = Duration::from_millis(5);

pub fn engine_mac(i: usize) -> String {
    format!("02:7c:00:00:09:1{}", i + 1)
}

pub fn engine_ip(i: usize) -> String {
    format!("10.9.0.1{}", i + 1)
}

/// The dispatcher's ports and the head of its `[cluster]` table.
pub const DISPATCHER_BASE: &str = r#"
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
"#;

/// The dispatcher's `[[cluster.engines]]`, each with the keys `extra`.
pub fn engines_toml(extra: &str) -> String {
    let mut s = String::new();
    for (i, e) in ENGINES.iter().enumerate() {
        s += &format!(
            "\n[[cluster.engines]]\nname = \"{e}\"\naddress = \"{}\"\nmac = \"{}\"\n{extra}",
            engine_ip(i),
            engine_mac(i)
        );
    }
    s
}

pub fn dispatcher_config() -> String {
    let s = format!(
        r#"{DISPATCHER_BASE}
[[cluster.vrs]]
name = "r"
id = 7
ports = ["in", "out"]
engines = ["e1", "e2", "e3"]
policy = "flow"
"#
    );
    s + &engines_toml("")
}

/// Engine `i`'s underlay port.
pub fn engine_port(i: usize) -> String {
    format!(
        "\n[[ports]]\nname = \"under\"\ndriver = \"af_packet\"\ninterface = \"e{}_ul\"\n",
        i + 1
    )
}

/// One side of an engine's routed VR: its vNIC's MAC and address, and the
/// host beyond it (address, MAC).
pub struct Side<'a> {
    pub vnic_mac: &'a str,
    pub addr: &'a str,
    pub host: &'a str,
    pub host_mac: &'a str,
}

/// Engine `i`'s VR `name`: two VXLAN tunnels to the dispatcher with the
/// VNIs `vnis` (the tags of its ports), and the built-in router between
/// the hosts of its two sides.
pub fn engine_vr(i: usize, name: &str, vnis: [u32; 2], sides: [Side<'_>; 2]) -> String {
    let ip = engine_ip(i);
    let mut s = String::new();
    for (end, vni) in ["in", "out"].iter().zip(vnis) {
        s += &format!(
            "\n[[tunnels]]\nname = \"{name}_{end}\"\nkind = \"vxlan\"\nport = \"under\"\n\
             local = \"{ip}\"\nremote = \"10.9.0.1\"\nvni = {vni}\nremote_mac = \"{D_UL_MAC}\"\n"
        );
    }
    let [a, b] = sides;
    format!(
        r#"{s}
[[vrs]]
name = "{name}"
vnics = [
  {{ tunnel = "{name}_in", mac = "{}", addrs = ["{}"] }},
  {{ tunnel = "{name}_out", mac = "{}", addrs = ["{}"] }},
]
[vrs.router]
nexthops = [{{ vnic = 1, mac = "{}" }}, {{ vnic = 0, mac = "{}" }}]
routes = [{{ prefix = "{}/32", nexthop = 0 }}, {{ prefix = "{}/32", nexthop = 1 }}]
"#,
        a.vnic_mac, a.addr, b.vnic_mac, b.addr, b.host_mac, a.host_mac, b.host, a.host
    )
}

/// Engine `i` running VR `r` (id 7, the dispatcher's ports 0 and 1).
pub fn engine_config(i: usize) -> String {
    let r = engine_vr(
        i,
        "r",
        [7 << 16, 7 << 16 | 1 << 8],
        [
            Side {
                vnic_mac: VNIC0_MAC,
                addr: "10.1.0.1/24",
                host: "10.1.0.2",
                host_mac: G0_MAC,
            },
            Side {
                vnic_mac: VNIC1_MAC,
                addr: "10.2.0.1/24",
                host: "10.2.0.2",
                host_mac: S0_MAC,
            },
        ],
    );
    let ip = engine_ip(i);
    format!(
        "{}{r}\n[cluster]\nrole = \"engine\"\nheartbeat = \"{ip}:4790\"\n",
        engine_port(i)
    )
}

/// A daemon of `config` in namespace `ns`.
pub fn start_in(ns: &Netns, tag: &str, config: &str) -> super::Daemon {
    super::Daemon::start_under(tag, config, &["ip", "netns", "exec", ns.name()])
}

/// The lab, checking first that the test runs as root.
pub fn root_lab() -> Lab {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    lab()
}

/// Every flow of `flows` (`0..flows`) got rounds `0..rounds` of phase
/// `phase`, in order (`what` says whose in the failure).
pub fn every_frame_in_order(
    got: &Got,
    phase: u8,
    flows: impl Iterator<Item = u16>,
    rounds: u32,
    what: &str,
) {
    let p = by_flow(got, phase);
    for f in flows {
        let seqs: Vec<u32> = (p.get(&f))
            .map(|v| v.iter().map(|x| x.0).collect())
            .unwrap_or_default();
        let lost: Vec<u32> = (0..rounds).filter(|q| !seqs.contains(q)).collect();
        let late: Vec<u32> = (seqs.windows(2).filter(|w| w[1] < w[0]))
            .map(|w| w[1])
            .collect();
        assert!(
            seqs == (0..rounds).collect::<Vec<_>>(),
            "{what} flow {f}: lost {lost:?}, arrived after a later one {late:?}, \
             {} of {rounds} arrived",
            seqs.len()
        );
    }
}

/// The namespaces: gen, disp, sink, ul, e1, e2, e3.
pub struct Lab {
    pub generator: Netns,
    pub disp: Netns,
    pub sink: Netns,
    pub ul: Netns,
    pub engines: Vec<Netns>,
}

pub fn lab() -> Lab {
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
        ul,
        engines,
    }
}

/// The first 42 bytes of flow `f`'s frames as the dispatcher reads them:
/// what its flow hash reads (the IPv4 5-tuple).
pub fn frame_of(f: u16) -> Vec<u8> {
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
pub fn engine_of(f: u16, live: u64) -> usize {
    let mut set = EngineSet::new(ClusterPolicy::Flow, &ENGINES, &[]);
    set.set_live(live);
    set.pick(flow_hash(&frame_of(f))).expect("an engine up")
}

/// A datagram: phase, flow, sequence number.
pub fn payload(phase: u8, flow: u16, seq: u32) -> [u8; 7] {
    let mut p = [0u8; 7];
    p[0] = phase;
    p[1..3].copy_from_slice(&flow.to_be_bytes());
    p[3..7].copy_from_slice(&seq.to_be_bytes());
    p
}

/// What the sink got: (phase, flow, seq, when).
pub type Got = Arc<Mutex<Vec<(u8, u16, u32, Instant)>>>;

/// The sink's receiver, until `stop`.
pub fn receive(sock: UdpSocket, got: Got, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
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
pub fn send(
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
pub fn by_flow(got: &Got, phase: u8) -> BTreeMap<u16, Vec<(u32, Instant)>> {
    let mut m: BTreeMap<u16, Vec<(u32, Instant)>> = BTreeMap::new();
    for &(p, f, s, t) in got.lock().unwrap().iter() {
        if p == phase {
            m.entry(f).or_default().push((s, t));
        }
    }
    m
}

pub fn engine_field(status: &Value, i: usize, field: &str) -> Value {
    status["engines"][i][field].clone()
}

pub fn wait_engines(d: &super::Daemon, live: usize) -> Value {
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

/// Numbered UDP flows from the generator to the sink, and what the sink
/// got, received on a thread until [`Flows::finish`].
pub struct Flows {
    /// One socket per flow, in the generator's namespace.
    pub socks: Vec<UdpSocket>,
    /// What the sink got.
    pub got: Got,
    stop: Arc<AtomicBool>,
    receiver: Option<std::thread::JoinHandle<()>>,
}

impl Flows {
    /// Bind the sockets and start the sink's receiver.
    pub fn start(lab: &Lab) -> Self {
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
        let receiver = Some(receive(rx, got.clone(), stop.clone()));
        Self {
            socks,
            got,
            stop,
            receiver,
        }
    }

    /// Send rounds of phase `phase` until every flow got through once
    /// (the cluster status of `d` in the failure).
    pub fn wait_through(&self, phase: u8, d: &super::Daemon) {
        let t0 = Instant::now();
        while by_flow(&self.got, phase).len() < usize::from(FLOWS) {
            assert!(
                t0.elapsed() < PATIENCE,
                "phase {phase}: not every flow got through: {:#}",
                d.json(&["cluster", "status"])
            );
            send(&self.socks, phase, 1, |_| {});
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stop the receiver.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.receiver.take() {
            r.join().unwrap();
        }
    }
}

impl Drop for Flows {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
