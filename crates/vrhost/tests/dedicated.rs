//! A dedicated port (needs root, `ip`, `ping`): an AF_XDP port whose UMEM
//! is its VR's own pool (`vrhost_host::open_dedicated`), so that frames
//! reach the VR where the kernel wrote them and leave from where it left
//! them, the host moving only descriptors.
//!
//! ns-a (a0) --- r0 [worker in this process] r1 --- b0 (ns-b)
//!
//! r0 is dedicated to one VR (its vNIC 0); r1 is an ordinary AF_PACKET
//! port (the copy path), shared by rules, or a second dedicated port of
//! the same VR on the same UMEM (`vrhost_host::open_dedicated_sharing`).
//! The worker runs in a thread of the test; its VRs are processes.

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vrhost_host::{
    Backend, Classifier, Confine, Match, PathSpec, Rule, VrCommand, VrPath, VrProcess, Worker,
    open_dedicated, open_dedicated_sharing,
};
use vrhost_io::Port;
use vrhost_io::af_packet::AfPacketPort;
use vrhost_io::af_xdp::{AfXdpConfig, AfXdpPort, TxPath};
use vrhost_lab::{Netns, veth};
use vrhost_proto::PollConfig;
use vrhost_router::{NeighbourConfig, RouterConfig, VnicConfig};
use vrhost_shm::Region;

const A0_MAC: &str = "02:7e:00:00:24:0a";
const R0_MAC: &str = "02:7e:00:00:24:10";
const R1_MAC: &str = "02:7e:00:00:24:11";
const B0_MAC: &str = "02:7e:00:00:24:0b";
/// Slots of the VR's pool that are the dedicated port's frames.
const PORT_FRAMES: u32 = 512;

/// The namespaces: a and b, and r where the worker's ports are.
struct Lab {
    a: Netns,
    b: Netns,
    r: Netns,
}

fn lab() -> Lab {
    let (a, b, r) = (
        Netns::unique("vrh-zc").unwrap(),
        Netns::unique("vrh-zc").unwrap(),
        Netns::unique("vrh-zc").unwrap(),
    );
    for ns in [&a, &b, &r] {
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
            .unwrap();
    }
    veth(&a, "a0", Some(A0_MAC), &r, "r0", Some(R0_MAC)).unwrap();
    veth(&b, "b0", Some(B0_MAC), &r, "r1", Some(R1_MAC)).unwrap();
    for (ns, dev, addr, gw) in [
        (&a, "a0", "10.1.0.2/24", "10.1.0.1"),
        (&b, "b0", "10.2.0.2/24", "10.2.0.1"),
    ] {
        ns.ip(&["addr", "add", addr, "dev", dev]).unwrap();
        ns.ip(&["route", "add", "default", "via", gw]).unwrap();
        // Whole checksums: a frame the VR forwards is a copy of the wire's,
        // and a veth's partial checksum is never completed on that way.
        ns.exec("ethtool", &["-K", dev, "tx", "off"]).unwrap();
    }
    // A second address on b0: the other tenant's host (test 2).
    b.ip(&["addr", "add", "10.2.0.3/24", "dev", "b0"]).unwrap();
    Lab { a, b, r }
}

/// The router between a0 (vNIC 0, 10.1.0.1) and b0 (vNIC 1, 10.2.0.1).
fn router() -> RouterConfig {
    let neighbour = |ip: &str, mac: &str, vnic| NeighbourConfig {
        ip: ip.into(),
        mac: mac.into(),
        vnic: Some(vnic),
    };
    RouterConfig {
        vnics: vec![
            VnicConfig {
                mac: R0_MAC.into(),
                addrs: vec!["10.1.0.1/24".into()],
                mtu: None,
            },
            VnicConfig {
                mac: R1_MAC.into(),
                addrs: vec!["10.2.0.1/24".into()],
                mtu: None,
            },
        ],
        neighbours: vec![
            neighbour("10.1.0.2", A0_MAC, 0),
            neighbour("10.2.0.2", B0_MAC, 1),
            neighbour("10.2.0.3", B0_MAC, 1),
        ],
        ..RouterConfig::default()
    }
}

/// A VR program of `vrhost-testvr` (`sub`, e.g. `vr-hostile`) on `config`.
fn testvr_cmd(sub: &str, config: serde_json::Value) -> VrCommand {
    VrCommand {
        program: common::testvr(),
        args: vec![sub.into()],
        config,
        ..common::datapath::router_cmd(&router(), Confine::default())
    }
}

/// The AF_XDP config of the dedicated port.
fn xdp() -> AfXdpConfig {
    AfXdpConfig {
        frames: PORT_FRAMES,
        ring_size: 256,
        queues: Some(1),
        ..AfXdpConfig::default()
    }
}

/// VR `name` running `cmd` in the region of `spec`, started for `worker`.
fn start(worker: &Worker, spec: &PathSpec, region: Region, cmd: &VrCommand) -> VrPath {
    let (p, bell) = VrProcess::start(&spec.name, 0, &region, worker.bell(), cmd).unwrap();
    VrPath::assemble(spec, region, Backend::Process(vec![p]), vec![bell])
}

/// Run `worker` in a thread in namespace `ns` (its ports', as the daemon
/// runs it: a `tx = "xdp"` port's test run names its interface there)
/// while `f` runs; returns what `f` returns. The worker stops when `f`
/// returns or panics.
fn with_worker<T>(worker: &mut Worker, ns: &Netns, f: impl FnOnce() -> T) -> T {
    /// Stops the worker when dropped, also on a panic.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let _in = ns.enter().expect("the ports' namespace");
            worker.run(&stop)
        });
        let _stop = Stop(&stop);
        f()
    })
}

/// UDP datagrams of `sizes` from `from` (in its namespace) to `to`:7000,
/// received by a socket bound there in `to_ns`; returns what arrived.
fn udp(from_ns: &Netns, to_ns: &Netns, to: Ipv4Addr, sizes: &[usize], tag: &[u8]) -> Vec<Vec<u8>> {
    let rx = to_ns.run(|| UdpSocket::bind((to, 7000))).unwrap().unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let tx = from_ns
        .run(|| UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)))
        .unwrap()
        .unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 2048];
    for (k, &n) in sizes.iter().enumerate() {
        let d = payload(k, n, tag);
        tx.send_to(&d, (to, 7000)).unwrap();
        if let Ok(m) = rx.recv(&mut buf) {
            got.push(buf[..m].to_vec());
        }
    }
    got
}

/// [`udp`] from a0 to b0 (10.2.0.2).
fn udp_a_to_b(lab: &Lab, sizes: &[usize], tag: &[u8]) -> Vec<Vec<u8>> {
    udp(&lab.a, &lab.b, Ipv4Addr::new(10, 2, 0, 2), sizes, tag)
}

/// `got` is every datagram of `sizes` with `tag`, intact.
fn assert_intact(got: &[Vec<u8>], sizes: &[usize], tag: &[u8]) {
    assert_eq!(got.len(), sizes.len(), "every datagram arrived");
    for (k, (g, &n)) in got.iter().zip(sizes).enumerate() {
        assert!(*g == payload(k, n, tag), "datagram {k} of {n} bytes intact");
    }
}

/// Two pings of `size` bytes from a0 to `addr`; ping's output.
fn ping_from_a(lab: &Lab, addr: &str, size: usize) -> String {
    let size_s = size.to_string();
    let args = ["-c", "2", "-i", "0.2", "-W", "2", "-s", &size_s, addr];
    lab.a
        .exec("ping", &args)
        .unwrap_or_else(|e| panic!("ping -s {size} {addr}: {e}"))
}

/// Datagram `k` of `n` bytes: `tag`, then a pattern.
fn payload(k: usize, n: usize, tag: &[u8]) -> Vec<u8> {
    let mut d = tag.to_vec();
    d.extend((d.len()..n).map(|i| (i * 7 + k) as u8));
    d.truncate(n);
    d
}

#[test]
fn a_vr_on_a_dedicated_port_forwards_ping_and_udp_intact_with_no_host_copy() {
    let lab = lab();
    let spec = PathSpec::new("zc", vec![0, 1], 1024);
    let region = spec.create_region().unwrap();
    let r0 = lab
        .r
        .run(|| open_dedicated("r0", &xdp(), &region))
        .unwrap()
        .expect("an AF_XDP port on the VR's pool");
    let r1 = lab
        .r
        .run(|| AfPacketPort::open("r1", Default::default()))
        .unwrap()
        .unwrap();
    let ports: Vec<Box<dyn Port>> = vec![Box::new(r0), Box::new(r1)];
    let rules = [Rule {
        m: Match {
            in_port: Some(1),
            ..Match::default()
        },
        vr: 0,
        vnic: 1,
    }];
    let mut worker = Worker::new(
        ports,
        Classifier::new(&rules).unwrap(),
        PollConfig::default(),
    )
    .unwrap();
    let cmd = common::datapath::router_cmd(&router(), Confine::default());
    let mut path = start(&worker, &spec, region, &cmd);
    path.set_dedicated(0, PORT_FRAMES).unwrap();
    worker.add_vr(path);
    let stats = worker.vrs()[0].stats().clone();

    let sizes = [18, 64, 100, 512, 1000, 1400, 1472];
    let (pings, pings_router, got) = with_worker(&mut worker, &lab.r, || {
        let ping = |addr: &str, size: usize| ping_from_a(&lab, addr, size);
        let across: Vec<String> = [56, 1000, 1472]
            .iter()
            .map(|&n| ping("10.2.0.2", n))
            .collect();
        let router: Vec<String> = [56, 1472].iter().map(|&n| ping("10.1.0.1", n)).collect();
        let got = udp_a_to_b(&lab, &sizes, b"zc-udp");
        (across, router, got)
    });
    for out in pings.iter().chain(&pings_router) {
        assert!(out.contains(" 0% packet loss"), "{out}");
    }
    assert_intact(&got, &sizes, b"zc-udp");

    // Frames from a0 reached the VR where the kernel wrote them, and its
    // own replies (the router's echo replies) left from where it wrote them.
    let (lent_in, lent_out) = (stats.lent_in.get(), stats.lent_out.get());
    assert!(lent_in >= 6 + 4 + sizes.len() as u64, "lent in: {lent_in}");
    assert!(lent_out >= 4, "lent out: {lent_out}");
    assert_eq!(stats.violations.iter().map(|c| c.get()).sum::<u64>(), 0);
    worker.vrs()[0].check_slot_accounting().unwrap();
}

/// Stop VR `vr` of `worker` (stopped itself), and check that every slot
/// came back: the ledger all free or at the ports, and each of `ports`
/// (the VR's dedicated ports, taken back from the worker) holding all its
/// frames again, none lent and none on its way home from a sibling.
fn assert_all_home(worker: &mut Worker, vr: usize, ports: &[usize]) {
    let path = &mut worker.vrs_mut()[vr];
    path.shutdown();
    assert!(path.is_drained(), "the VR holds no slot after stop");
    path.check_slot_accounting().unwrap();
    let mut taken: Vec<Box<dyn Port>> = (0..worker.ports().len())
        .map(|p| worker.set_port(p, Box::new(vrhost_io::null::NullPort::new("gone"))))
        .collect();
    // In-flight completions land within a moment.
    std::thread::sleep(Duration::from_millis(100));
    let path = &mut worker.vrs_mut()[vr];
    for &p in ports {
        path.bring_home(p, &mut taken);
        path.give_back(p, taken[p].lender().expect("a dedicated port"));
    }
    for &p in ports {
        let port = taken[p].lender().unwrap().as_any_mut();
        let port = port.downcast_mut::<AfXdpPort>().unwrap();
        port.reclaim_tx();
        let c = port.frame_counts();
        assert_eq!(
            (c.total, c.lent, c.returning),
            (PORT_FRAMES, 0, 0),
            "port {p}: every frame home, none lent: {c:?}"
        );
    }
}

/// r0 and `second` (in ns-r) opened with `cfg` as two dedicated ports on
/// `region`'s pool, `second` sharing r0's UMEM.
fn open_pair(
    lab: &Lab,
    second: &str,
    region: &Region,
    cfg: &AfXdpConfig,
) -> (AfXdpPort, AfXdpPort) {
    lab.r
        .run(|| {
            let r0 = open_dedicated("r0", cfg, region)?;
            let other = open_dedicated_sharing(second, cfg, region, &r0)?;
            Ok::<_, vrhost_io::af_xdp::AfXdpError>((r0, other))
        })
        .unwrap()
        .expect("two AF_XDP ports on one pool")
}

#[test]
fn a_vr_on_two_dedicated_ports_forwards_between_them_with_no_copy_and_dies_leaking_none() {
    two_dedicated_ports_forward_and_die_leaking_none(TxPath::Socket);
}

/// The same with both ports sending through the XDP test run (`tx =
/// "xdp"`): each frame is copied from the VR's slot into the port's array
/// and the slot given back at once, so the frames all come home all the
/// same (the end hosts' GRO gives their veths the NAPI that takes
/// xdp_frames).
#[test]
fn a_vr_on_two_dedicated_ports_sending_through_xdp_forwards_and_dies_leaking_none() {
    two_dedicated_ports_forward_and_die_leaking_none(TxPath::Xdp);
}

fn two_dedicated_ports_forward_and_die_leaking_none(tx: TxPath) {
    let lab = lab();
    if tx == TxPath::Xdp {
        lab.a.exec("ethtool", &["-K", "a0", "gro", "on"]).unwrap();
        lab.b.exec("ethtool", &["-K", "b0", "gro", "on"]).unwrap();
    }
    let spec = PathSpec::new("zc2", vec![0, 1], 2048);
    let region = spec.create_region().unwrap();
    let cfg = AfXdpConfig { tx, ..xdp() };
    let (r0, r1) = open_pair(&lab, "r1", &region, &cfg);
    assert_eq!((r0.tx_path(), r1.tx_path()), (tx, tx));
    assert_eq!(r1.lent_frames(), Some(PORT_FRAMES..2 * PORT_FRAMES));
    let ports: Vec<Box<dyn Port>> = vec![Box::new(r0), Box::new(r1)];
    let mut worker =
        Worker::new(ports, Classifier::new(&[]).unwrap(), PollConfig::default()).unwrap();
    let cmd = common::datapath::router_cmd(&router(), Confine::default());
    let mut path = start(&worker, &spec, region, &cmd);
    path.set_dedicated(0, PORT_FRAMES).unwrap();
    path.set_dedicated(1, PORT_FRAMES).unwrap();
    worker.add_vr(path);
    let stats = worker.vrs()[0].stats().clone();
    let pid = worker.vrs()[0].instance_info()[0].pid.unwrap();

    let sizes = [18, 64, 100, 512, 1000, 1400, 1472];
    let (pings, there, back) = with_worker(&mut worker, &lab.r, || {
        let pings: Vec<String> = [56, 1000, 1472]
            .iter()
            .map(|&n| ping_from_a(&lab, "10.2.0.2", n))
            .collect();
        let there = udp_a_to_b(&lab, &sizes, b"zc2-there");
        let back = udp(
            &lab.b,
            &lab.a,
            Ipv4Addr::new(10, 1, 0, 2),
            &sizes,
            b"zc2-back",
        );
        // Killed under traffic, holding the frames that came while it was
        // stopped: what it held goes back to the ports.
        let to_b = Ipv4Addr::new(10, 2, 0, 2);
        let signal = |sig: &str| {
            let st = std::process::Command::new("kill")
                .args([sig, &pid.to_string()])
                .status()
                .unwrap();
            assert!(st.success(), "kill {sig} {pid}");
        };
        std::thread::scope(|s| {
            s.spawn(|| blast(&lab.a, Ipv4Addr::UNSPECIFIED, to_b, 400, 1000, b"zc2-kill"));
            std::thread::sleep(Duration::from_millis(20));
            signal("-STOP");
            std::thread::sleep(Duration::from_millis(30));
            signal("-KILL");
        });
        let t = Instant::now();
        while stats.exits.get() == 0 && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        (pings, there, back)
    });
    assert_eq!(stats.exits.get(), 1, "the VR's exit was seen");
    assert!(stats.reclaimed.get() > 0, "it held slots when it died");
    for out in &pings {
        assert!(out.contains(" 0% packet loss"), "{out}");
    }
    assert_intact(&there, &sizes, b"zc2-there");
    assert_intact(&back, &sizes, b"zc2-back");
    // Every frame forwarded left from the slot the kernel wrote it in, on
    // the other port: 6 echo requests and 6 replies, the datagrams both
    // ways.
    let forwarded = 12 + 2 * sizes.len() as u64;
    let (lent_in, lent_out) = (stats.lent_in.get(), stats.lent_out.get());
    assert!(lent_in >= forwarded, "lent in: {lent_in}");
    assert!(lent_out >= forwarded, "lent out: {lent_out}");
    assert_eq!(stats.port_dropped.get(), 0);
    assert_eq!(stats.violations.iter().map(|c| c.get()).sum::<u64>(), 0);
    assert_all_home(&mut worker, 0, &[0, 1]);
}

/// Tenant B's datagrams carry this: no byte of it may reach the other
/// tenant's region.
const SECRET: &[u8] = b"TENANT-B-SECRET-0123456789";

/// Whether `region`'s slots hold `needle` anywhere (what its VR can read).
fn region_holds(region: &Region, needle: &[u8]) -> bool {
    let bytes = region.slot_bytes();
    (0..region.slot_count()).any(|s| {
        // SAFETY: a copy of the slot's bytes, read once; its VR may be
        // writing them, and a torn read only changes what is searched.
        let slot = unsafe { region.slot_bytes_at(s, 0, bytes) }.map(<[u8]>::to_vec);
        slot.is_some_and(|v| v.windows(needle.len()).any(|w| w == needle))
    })
}

/// Send `n` datagrams of `len` bytes carrying `tag` from `src` (bound in
/// `ns`) to `dst`:7000, paced.
fn blast(ns: &Netns, src: Ipv4Addr, dst: Ipv4Addr, n: usize, len: usize, tag: &[u8]) {
    ns.run(|| {
        let tx = UdpSocket::bind((src, 0)).unwrap();
        for k in 0..n {
            let _ = tx.send_to(&payload(k, len, tag), (dst, 7000));
            std::thread::sleep(Duration::from_micros(200));
        }
    })
    .unwrap();
}

#[test]
fn a_hostile_vr_on_two_dedicated_ports_is_contained_and_sees_no_other_tenant() {
    let lab = lab();
    // Frames reach the VRs without ARP (the hostile one answers none).
    lab.b
        .ip(&["neigh", "add", "10.2.0.1", "lladdr", R1_MAC, "dev", "b0"])
        .unwrap();
    lab.a
        .ip(&["neigh", "add", "10.1.0.1", "lladdr", R0_MAC, "dev", "a0"])
        .unwrap();
    // The hostile VR's second dedicated port, r2 (to a1 in ns-a), shares
    // r0's UMEM: its vNIC 1, where its honest case sends what vNIC 0 got.
    veth(&lab.a, "a1", None, &lab.r, "r2", None).unwrap();
    let evil_spec = PathSpec::new("evil", vec![0, 3, 1], 2048);
    let evil_region = evil_spec.create_region().unwrap();
    let (r0, r2) = open_pair(&lab, "r2", &evil_region, &xdp());
    let r1 = lab
        .r
        .run(|| AfPacketPort::open("r1", Default::default()))
        .unwrap()
        .unwrap();
    let ports: Vec<Box<dyn Port>> = vec![
        Box::new(r0),
        Box::new(r1),
        Box::new(vrhost_io::null::NullPort::new("sink")),
        Box::new(r2),
    ];
    // r1 is shared: tenant B (10.2.0.2) to `good`, 10.2.0.3 to `evil`.
    let from = |ip: [u8; 4], vr, vnic| Rule {
        m: Match {
            in_port: Some(1),
            src: Some((Ipv4Addr::from(ip), 32)),
            ..Match::default()
        },
        vr,
        vnic,
    };
    let rules = [from([10, 2, 0, 2], 1, 0), from([10, 2, 0, 3], 0, 2)];
    let mut worker = Worker::new(
        ports,
        Classifier::new(&rules).unwrap(),
        PollConfig::default(),
    )
    .unwrap();
    let hostile = testvr_cmd(
        "vr-hostile",
        serde_json::json!({ "seed": 24, "rate": 20000 }),
    );
    let mut evil = start(&worker, &evil_spec, evil_region.clone(), &hostile);
    evil.set_dedicated(0, PORT_FRAMES).unwrap();
    evil.set_dedicated(3, PORT_FRAMES).unwrap();
    worker.add_vr(evil);
    // The honest router: tenant B's 10.9.0.0/16 goes to the sink.
    let good_spec = PathSpec::new("good", vec![1, 2], 1024);
    let mut good_cfg = common::router_config();
    good_cfg.routes[0].prefix = "10.9.0.0/16".into();
    let good_cmd = common::datapath::router_cmd(&good_cfg, Confine::default());
    let good_region = good_spec.create_region().unwrap();
    let good = start(&worker, &good_spec, good_region.clone(), &good_cmd);
    worker.add_vr(good);
    let (es, gs) = (
        worker.vrs()[0].stats().clone(),
        worker.vrs()[1].stats().clone(),
    );

    const N: usize = 1500;
    with_worker(&mut worker, &lab.r, || {
        std::thread::scope(|s| {
            s.spawn(|| {
                blast(
                    &lab.a,
                    Ipv4Addr::UNSPECIFIED,
                    Ipv4Addr::new(10, 2, 0, 3),
                    N,
                    1000,
                    b"tenant-a",
                )
            });
            s.spawn(|| {
                blast(
                    &lab.b,
                    Ipv4Addr::new(10, 2, 0, 2),
                    Ipv4Addr::new(10, 9, 0, 9),
                    N,
                    1000,
                    SECRET,
                )
            });
        });
        // What the honest VR was given comes out (a bound against a hang).
        let t = Instant::now();
        while gs.tx_packets.get() < gs.rx_packets.get() && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let violations: u64 = es.violations.iter().map(|c| c.get()).sum();
    println!(
        "hostile: lent in {}, lent out {}, violations {violations}; honest: rx {}, tx {}",
        es.lent_in.get(),
        es.lent_out.get(),
        gs.rx_packets.get(),
        gs.tx_packets.get()
    );
    assert!(
        es.lent_in.get() > 0,
        "the hostile VR got its port's frames in place"
    );
    assert!(violations > 0, "its forgeries were counted");
    let (grx, gtx) = (gs.rx_packets.get(), gs.tx_packets.get());
    assert!(
        grx >= N as u64 / 2,
        "tenant B's frames reached its VR: {grx}"
    );
    assert_eq!(gtx, grx, "and all came out");
    assert_eq!(gs.violations.iter().map(|c| c.get()).sum::<u64>(), 0);
    // The search finds it where it was (the honest VR's pool keeps the
    // bytes of the frames it forwarded), and not in the hostile VR's.
    assert!(region_holds(&good_region, SECRET));
    assert!(
        !region_holds(&evil_region, SECRET),
        "no byte of tenant B in the hostile VR's pool"
    );
    for vr in worker.vrs() {
        vr.check_slot_accounting().unwrap();
    }
    // Its frames sent on the other dedicated port went home, and whatever
    // it forged, nothing is lost when it stops.
    assert_all_home(&mut worker, 0, &[0, 3]);
}

/// r1 as an AF_PACKET port, in [`daemon_config`].
const R1_PACKET: &str = "driver = \"af_packet\"";

/// r1 as a second dedicated port of VR `r`, in [`daemon_config`].
const R1_DEDICATED: &str = "driver = \"af_xdp\"\nframes = 512\nring_size = 256\ndedicated = \"r\"";

/// The daemon's config: r0 dedicated to VR `r` (`frames` of its `slots`),
/// r1 with `r1` (its driver and what goes with it).
fn daemon_config(slots: u32, r1: &str) -> String {
    format!(
        r#"
[[ports]]
name = "r0"
driver = "af_xdp"
interface = "r0"
frames = {PORT_FRAMES}
ring_size = 256
dedicated = "r"

[[ports]]
name = "r1"
{r1}
interface = "r1"

[[vrs]]
name = "r"
slots = {slots}
vnics = [
  {{ port = "r0", mac = "{R0_MAC}", addrs = ["10.1.0.1/24"] }},
  {{ port = "r1", mac = "{R1_MAC}", addrs = ["10.2.0.1/24"] }},
]
[vrs.router]
neighbours = [
  {{ ip = "10.1.0.2", mac = "{A0_MAC}", vnic = 0 }},
  {{ ip = "10.2.0.2", mac = "{B0_MAC}", vnic = 1 }},
]

[[rules]]
port = "r0"
vr = "r"
vnic = 0

[[rules]]
port = "r1"
vr = "r"
vnic = 1
"#
    )
}

/// The daemon on [`daemon_config`] (`slots`, `r1`) in `lab`'s ns-r, checked
/// to forward ping and UDP from a0 to b0 intact.
fn daemon_forwarding(lab: &Lab, tag: &str, slots: u32, r1: &str) -> common::Daemon {
    let d = common::Daemon::start_under(
        tag,
        &daemon_config(slots, r1),
        &["ip", "netns", "exec", lab.r.name()],
    );
    for size in [56, 1472] {
        let out = ping_from_a(lab, "10.2.0.2", size);
        assert!(out.contains(" 0% packet loss"), "{out}\n{:#}", d.stats());
    }
    let sizes = [18, 512, 1472];
    let got = udp_a_to_b(lab, &sizes, tag.as_bytes());
    assert_intact(&got, &sizes, tag.as_bytes());
    d
}

#[test]
fn the_daemon_opens_a_dedicated_port_on_its_vr_s_pool_and_keeps_it() {
    let lab = lab();
    let d = daemon_forwarding(&lab, "dedicated", 1024, R1_PACKET);
    let rx = common::count(&d.stats(), "r", "rx_packets");
    assert!(rx >= 4 + 3, "the VR got the frames: {rx}");
    // Its VR restarted on a new region would leave the port on the old
    // one: refused, and the data path is as it was.
    let changed = d.dir().join("changed.toml");
    std::fs::write(&changed, daemon_config(2048, R1_PACKET)).unwrap();
    let (ok, _, err) = d.run(&["apply", changed.to_str().unwrap()]);
    assert!(!ok && err.contains("needs a daemon restart"), "{err}");
    let out = lab
        .a
        .exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", "10.2.0.2"])
        .unwrap();
    assert!(out.contains(" 0% packet loss"), "{out}");
}

#[test]
fn the_daemon_opens_a_vr_s_two_dedicated_ports_on_one_umem() {
    let lab = lab();
    let _d = daemon_forwarding(&lab, "dedicated-two", 2048, R1_DEDICATED);
    let sizes = [18, 512, 1472];
    let back = udp(
        &lab.b,
        &lab.a,
        Ipv4Addr::new(10, 1, 0, 2),
        &sizes,
        b"zc2-back",
    );
    assert_intact(&back, &sizes, b"zc2-back");
}
