//! The fast path forwarding real frames between network namespaces (root
//! only; needs `ip` and `ethtool`).
//!
//! ```text
//!  ns-a            ns-r (ip_forward = 0)           ns-b
//!  a0 10.0.1.2 --- r0 10.0.1.1  [fast path]  r1 10.0.2.1 --- b0 10.0.2.2
//! ```
//!
//! UDP from ns-a to 10.0.2.2 arrives in ns-b, and the fast path's `fwd`
//! counter accounts for it, while ns-r's kernel does not forward (its
//! `ip_forward` is 0, and a control run without a select entry, whose
//! frames the program passes to ns-r's kernel, delivers nothing): the
//! frames went r0 -> XDP -> DEVMAP -> r1. Then a token bucket lets its
//! burst through and drops the rest, and a drop entry drops them all.
//!
//! What veth needs: a frame redirected into a veth (`ndo_xdp_xmit` of r1)
//! is delivered only if the peer (b0) has an XDP program attached (or GRO
//! on, which gives it NAPI); otherwise the redirect fails and the frame
//! is lost. So b0 gets [`PeerPass`] (XDP_PASS). And a0's checksum offload
//! is turned off: a UDP checksum left to the device (CHECKSUM_PARTIAL) is
//! never completed once the frame has gone through XDP as raw bytes, and
//! ns-b would drop the datagram as corrupt.
//!
//! A second test attaches to a namespace's loopback, where native XDP
//! fails, and checks the generic fallback is taken and reported.
//!
//! A third one gives r0 a slow path: an AF_XDP port opened in External
//! mode and served by the fast path (one XDP program on the interface).
//! Frames without a select entry reach the port; then a tenant's flow,
//! paced, is moved slow -> fast -> slow by single map updates, and every
//! frame is found once, at the port or in ns-b, in order within each
//! path, with the fast path's counters matching both sides. Last,
//! dropping the fast path detaches it even while a forked child holds
//! copies of its link descriptors.
//!
//! The namespaces are named with the process id (other users of the
//! machine may have their own `ns-a`), and deleted by a guard even when
//! the test fails. Sockets, programs and DEVMAP entries are made by a
//! thread that has entered the namespace (`setns`) and then used from
//! the test's thread.

use std::fs::File;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsFd;
use std::process::Command;
use std::time::Duration;

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
use vrhost_fast::{
    AttachMode, FastConfig, FastPath, Neighbour, NextHop, Path, PeerPass, RoutingMode, SelectEntry,
    SelectKey, TokenBucket, VrFastConfig, ifindex,
};
use vrhost_io::Port;
use vrhost_io::af_xdp::{AfXdpConfig, AfXdpPort, XdpProgram};

const R0_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 0x10];
const R1_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 0x11];
const A0_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 0x0a];
const B0_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 0x0b];
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
const PORT: u16 = 5555;
const FRAMES: u64 = 50;

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Run `ip ARGS`; panic with its output if it fails.
fn ip(args: &[&str]) {
    run("ip", args);
}

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The test's namespaces, deleted on drop (with their veths).
struct Namespaces(Vec<String>);

impl Namespaces {
    fn add(&mut self, name: String) -> String {
        ip(&["netns", "add", &name]);
        self.0.push(name.clone());
        name
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            // Best effort: a failing test must not hide its own panic.
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Move the calling thread into namespace `name`.
fn enter(name: &str) {
    let f = File::open(format!("/var/run/netns/{name}")).expect("netns file");
    move_into_link_name_space(f.as_fd(), Some(LinkNameSpaceType::Network)).expect("setns");
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The traffic's ends, each made in its namespace (`na`, `nb`): b0's
/// [`PeerPass`], the receiving socket in ns-b (reads time out after
/// `timeout`) and the sending one in ns-a.
fn ends(na: &str, nb: &str, timeout: Duration) -> (PeerPass, UdpSocket, UdpSocket) {
    let pass = in_ns(nb, || PeerPass::attach("b0").expect("xdp_pass on b0"));
    let rx = in_ns(nb, || {
        let sock = UdpSocket::bind((B_IP, PORT)).expect("bind in ns-b");
        sock.set_read_timeout(Some(timeout)).expect("timeout");
        sock
    });
    let tx = in_ns(na, || {
        UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("bind in ns-a")
    });
    (pass, rx, tx)
}

/// A fast path loaded in ns-r (`nr`) and attached to r0 and r1: the path,
/// r0's and r1's indexes, and the two attach modes.
fn fast_path_on_r(nr: &str) -> (FastPath, u32, u32, (AttachMode, AttachMode)) {
    in_ns(nr, || {
        let mut fp = FastPath::load(&FastConfig::default()).expect("load");
        let m0 = fp.attach("r0").expect("attach r0");
        let m1 = fp.attach("r1").expect("attach r1");
        let r0 = ifindex("r0").expect("r0");
        let r1 = ifindex("r1").expect("r1");
        (fp, r0, r1, (m0, m1))
    })
}

/// Frames to r0's MAC on r0 (`r0` its index) selected for VR 0 on the
/// fast path: the key and entry written.
fn select_fast(fp: &mut FastPath, r0: u32) -> (SelectKey, SelectEntry) {
    let key = SelectKey {
        ifindex: r0,
        vlan: None,
        dst_mac: Some(R0_MAC),
    };
    let fast = SelectEntry {
        vr: 0,
        path: Path::Fast,
        limit: None,
    };
    fp.set_select(key, fast).expect("select");
    (key, fast)
}

/// VR 0 in mode dst owning r0's and r1's addresses, with ns-b's subnet
/// connected out of r1 (`r1` its index) and b0 as its neighbour there.
fn route_to_b(fp: &mut FastPath, r1: u32) {
    let vr = VrFastConfig {
        mode: RoutingMode::Dst,
        addrs: vec![Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 2, 1)],
    };
    fp.set_vr(0, &vr).expect("vr");
    fp.add_route(0, 0, (Ipv4Addr::new(10, 0, 2, 0), 24), NextHop::Connected)
        .expect("route");
    let b0 = Neighbour {
        mac: B0_MAC,
        src_mac: R1_MAC,
        ifindex: r1,
    };
    fp.set_neighbour(0, B_IP, b0).expect("neighbour");
}

#[test]
fn forwards_between_namespaces_with_kernel_forwarding_off() {
    assert!(
        is_root(),
        "this test loads XDP programs and makes namespaces: run as root"
    );
    let mut ns = Namespaces(Vec::new());
    let [na, nr, nb] = topology(&mut ns, "f");

    // Each object is made by a thread in its namespace and then used
    // here: a socket, a link or a DEVMAP entry belongs to the namespace
    // it was made in, not to the thread that uses it.
    let (pass, rx, tx) = ends(&na, &nb, Duration::from_millis(500));
    let (mut fp, r0, r1, modes) = fast_path_on_r(&nr);
    eprintln!("attached: r0, r1 {modes:?}; b0 {:?}", pass.mode());
    route_to_b(&mut fp, r1);

    // Control: no select entry yet, so the frames go to the slow path,
    // which has no socket here: XDP_PASS to ns-r's kernel, which does not
    // forward them.
    send(&tx, 10);
    assert_eq!(
        receive(&rx, 10),
        0,
        "ns-r's kernel forwarded: ip_forward is not 0"
    );
    assert!(fp.unselected().expect("unselected") >= 10);
    assert_eq!(fp.counters(0).expect("counters").rx, 0);

    // The tenant selected to the fast path: everything arrives.
    let (key, fast) = select_fast(&mut fp, r0);
    send(&tx, FRAMES);
    let got = receive(&rx, FRAMES);
    let c = fp.counters(0).expect("counters");
    eprintln!("received {got} of {FRAMES}; fast path counters {c:?}");
    assert_eq!(got, FRAMES, "every datagram arrived in ns-b");
    assert_eq!((c.rx, c.fwd), (FRAMES, FRAMES), "{c:?}");
    assert_eq!(c.to_slow() + c.dropped(), 0, "{c:?}");

    // A token bucket of 5 frames, refilled at 1 per second: of 20 sent
    // within a second, 5 arrive and 15 are dropped at the port.
    fp.set_select(
        key,
        SelectEntry {
            limit: Some(TokenBucket {
                rate_pps: 1,
                burst: 5,
            }),
            ..fast
        },
    )
    .expect("select");
    send(&tx, 20);
    assert_eq!(receive(&rx, 20), 5, "the bucket's burst");
    let c = fp.counters(0).expect("counters");
    assert_eq!((c.fwd, c.drop_rate_limit), (FRAMES + 5, 15), "{c:?}");

    // Path drop: nothing arrives, all counted.
    fp.set_select(
        key,
        SelectEntry {
            path: Path::Drop,
            ..fast
        },
    )
    .expect("select");
    send(&tx, 10);
    assert_eq!(receive(&rx, 10), 0);
    assert_eq!(fp.counters(0).expect("counters").drop_select, 10);

    let fwd = Command::new("ip")
        .args(["netns", "exec", &nr, "sysctl", "-n", "net.ipv4.ip_forward"])
        .output()
        .expect("sysctl");
    assert_eq!(String::from_utf8_lossy(&fwd.stdout).trim(), "0");
    drop(fp);
    drop(pass);
}

/// Spread over the CPUs (`FastPath::spread`): every datagram still
/// arrives, rewritten on this side and sent from the CPU's queue by
/// `xdp_router_cpu` (a frame it could not send would be lost: the
/// cpumap's program is the only way out once the port's program handed
/// the frame over); spreading off again, the same.
#[test]
fn forwards_spread_over_cpus() {
    assert!(
        is_root(),
        "loads XDP programs and makes namespaces: run as root"
    );
    let mut ns = Namespaces(Vec::new());
    let [na, nr, nb] = topology(&mut ns, "c");
    let (_pass, rx, tx) = ends(&na, &nb, Duration::from_millis(500));
    let (mut fp, r0, r1, _) = fast_path_on_r(&nr);
    route_to_b(&mut fp, r1);
    select_fast(&mut fp, r0);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let spread: Vec<u32> = (0..cpus.min(2)).rev().collect();
    fp.spread(&spread).expect("spread");
    assert_eq!(fp.spread_cpus(), spread.as_slice());
    let ran = cpumap_threads_ns();
    send(&tx, FRAMES);
    assert_eq!(receive(&rx, FRAMES), FRAMES, "spread: every datagram");
    assert!(
        cpumap_threads_ns() > ran,
        "the cpumap's threads ran: the frames went through them"
    );
    fp.spread(&[]).expect("spread off");
    send(&tx, FRAMES);
    assert_eq!(receive(&rx, FRAMES), FRAMES, "in place: every datagram");
    let c = fp.counters(0).expect("counters");
    assert_eq!((c.rx, c.fwd), (2 * FRAMES, 2 * FRAMES), "{c:?}");
    // Bad spreads are refused with the reason, and change nothing.
    for (bad, why) in [
        (vec![0, 0], "twice"),
        (vec![cpus], "not online"),
        (vec![0; 16], "15"),
    ] {
        let e = fp.spread(&bad).unwrap_err();
        assert!(e.to_string().contains(why), "{bad:?}: {e}");
    }
    assert!(fp.spread_cpus().is_empty());
}

/// Time on a CPU (ns, `/proc/PID/schedstat`) of the kernel's cpumap
/// threads (`cpumap/CPU/map:ID`, one per entry with a program; they run
/// only when frames are queued to them), all added.
fn cpumap_threads_ns() -> u64 {
    let mut ns = 0;
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.starts_with("cpumap/") {
            let st = std::fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
            ns += st
                .split(' ')
                .next()
                .and_then(|t| t.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    ns
}

/// The three namespaces of the module docs (ns-a, ns-r, ns-b, named
/// with the process id and `tag`), their veths and addresses; ns-a's
/// static neighbour for the router, ns-r's `ip_forward` 0, a0's checksum
/// offload off. Returns their names.
fn topology(ns: &mut Namespaces, tag: &str) -> [String; 3] {
    let pid = std::process::id();
    let na = ns.add(format!("fast-{pid}-{tag}-a"));
    let nr = ns.add(format!("fast-{pid}-{tag}-r"));
    let nb = ns.add(format!("fast-{pid}-{tag}-b"));
    // IPv6 off before the veths exist: no neighbour discovery or MLD
    // frames to count with the test's own.
    for n in [&na, &nr, &nb] {
        for key in [
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ] {
            run("ip", &["netns", "exec", n, "sysctl", "-qw", key]);
        }
    }

    let veth = |x: &str, xns: &str, xmac, y: &str, yns: &str, ymac| {
        ip(&[
            "link",
            "add",
            "name",
            x,
            "address",
            &mac(xmac),
            "netns",
            xns,
            "type",
            "veth",
            "peer",
            "name",
            y,
            "address",
            &mac(ymac),
            "netns",
            yns,
        ]);
    };
    veth("a0", &na, A0_MAC, "r0", &nr, R0_MAC);
    veth("r1", &nr, R1_MAC, "b0", &nb, B0_MAC);
    for (n, dev, addr) in [
        (&na, "a0", "10.0.1.2/24"),
        (&nr, "r0", "10.0.1.1/24"),
        (&nr, "r1", "10.0.2.1/24"),
        (&nb, "b0", "10.0.2.2/24"),
    ] {
        ip(&["-n", n, "addr", "add", addr, "dev", dev]);
        ip(&["-n", n, "link", "set", dev, "up"]);
    }
    ip(&["-n", &na, "route", "add", "default", "via", "10.0.1.1"]);
    ip(&["-n", &nb, "route", "add", "default", "via", "10.0.2.1"]);
    // ns-a knows the router's MAC (the fast path does no ARP; ns-r's
    // kernel would answer, but a static entry keeps the test to one path).
    ip(&[
        "-n",
        &na,
        "neigh",
        "replace",
        "10.0.1.1",
        "lladdr",
        &mac(R0_MAC),
        "dev",
        "a0",
        "nud",
        "permanent",
    ]);
    run(
        "ip",
        &[
            "netns",
            "exec",
            &nr,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=0",
        ],
    );
    run(
        "ip",
        &["netns", "exec", &na, "ethtool", "-K", "a0", "tx", "off"],
    );

    [na, nr, nb]
}

/// Run `f` on a thread that has entered namespace `name`.
fn in_ns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter(name);
            f()
        })
        .join()
        .expect("thread in a namespace")
    })
}

const PAYLOAD: &[u8] = b"through the fast path";

fn send(sock: &UdpSocket, n: u64) {
    for _ in 0..n {
        sock.send_to(PAYLOAD, (B_IP, PORT)).expect("send");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Datagrams received, up to `n`, until a read times out.
fn receive(sock: &UdpSocket, n: u64) -> u64 {
    let mut buf = [0u8; 2048];
    let mut got = 0;
    while got < n {
        match sock.recv(&mut buf) {
            Ok(len) => {
                assert_eq!(&buf[..len], PAYLOAD);
                got += 1;
            }
            Err(_) => break,
        }
    }
    got
}

/// Native XDP fails on the loopback device (its driver has none), so the
/// program is attached in generic mode, and says so.
#[test]
fn falls_back_to_generic_mode() {
    assert!(is_root(), "run as root");
    let mut ns = Namespaces(Vec::new());
    let n = ns.add(format!("fast-{}-g", std::process::id()));
    ip(&["-n", &n, "link", "set", "lo", "up"]);
    let attached = in_ns(&n, || {
        let mut fp = FastPath::load(&FastConfig::default()).expect("load");
        let mode = fp.attach("lo").expect("attach lo");
        assert_eq!(fp.attached().len(), 1);
        (mode, fp.attached()[0].clone())
    });
    assert_eq!(attached.0, AttachMode::Generic);
    assert_eq!(attached.1.mode, AttachMode::Generic);
    assert_eq!(attached.1.ifname, "lo");
}

/// Payload of the migration test's datagrams: this tag, then the
/// sequence number (big endian).
const SEQ_TAG: &[u8; 8] = b"vrh-move";

/// Offset of a UDP payload in an untagged, option-less IPv4 frame.
const PAYLOAD_AT: usize = 14 + 20 + 8;

/// The sequence number of one of the migration test's datagrams, as a
/// frame (`None` for any other frame).
fn seq_in_frame(f: &[u8]) -> Option<u32> {
    let ip_udp = f.len() >= PAYLOAD_AT + 12
        && f[12..14] == [0x08, 0x00]
        && f[14] == 0x45
        && f[23] == 17
        && f[36..38] == PORT.to_be_bytes();
    ip_udp.then(|| seq_in_payload(&f[PAYLOAD_AT..]))?
}

fn seq_in_payload(p: &[u8]) -> Option<u32> {
    (p.len() == 12 && &p[..8] == SEQ_TAG).then(|| u32::from_be_bytes(p[8..12].try_into().unwrap()))
}

fn send_seq(sock: &UdpSocket, seq: u32) {
    let mut p = [0u8; 12];
    p[..8].copy_from_slice(SEQ_TAG);
    p[8..].copy_from_slice(&seq.to_be_bytes());
    sock.send_to(&p, (B_IP, PORT)).expect("send");
}

/// Drain the port: the sequence numbers of the test's datagrams in it.
fn drain(port: &mut AfXdpPort, into: &mut Vec<u32>) {
    let mut out: [&[u8]; 64] = [&[]; 64];
    let n = port.rx_burst(&mut out);
    into.extend(out[..n].iter().filter_map(|f| seq_in_frame(f)));
}

/// One XDP program per interface: the fast path's, with an AF_XDP port in
/// External mode as its slow path on r0, and a tenant moved between the
/// paths while its flow runs.
///
/// 1. No select entry: every datagram from ns-a reaches the port's
///    `rx_burst` (the slow path), none ns-b.
/// 2. One flow of [`MOVE_FRAMES`] datagrams paced by the sender, with the
///    tenant's entry SLOW, switched to FAST (one map update) once the port
///    has [`SWITCH_AT`] of them, and back to SLOW once ns-b has
///    received `2 x SWITCH_AT`. Every datagram arrives exactly once, at
///    the port or in ns-b; the numbers form three runs (slow, fast, slow:
///    each frame took the path of the entry it met, one rx queue keeps
///    them in order); the fast path's counters (`fwd`, `to_slow_select`)
///    equal what each side received and add up to what was sent.
#[test]
fn slow_path_port_shares_the_interface_and_a_tenant_moves_between_paths() {
    assert!(is_root(), "run as root");
    let mut ns = Namespaces(Vec::new());
    let [na, nr, nb] = topology(&mut ns, "m");

    let (pass, rx, tx) = ends(&na, &nb, Duration::from_millis(200));
    let (mut fp, r0, r1, (mode, _)) = fast_path_on_r(&nr);
    assert_eq!(mode, AttachMode::Native, "veth has native XDP");

    // The interface takes one program: a port bringing its own cannot
    // attach beside the fast path's.
    let own = in_ns(&nr, || AfXdpPort::open("r0", &AfXdpConfig::default()));
    let e = own.expect_err("a second program attached to r0");
    eprintln!("own-program port on r0: {e}");
    assert!(e.to_string().contains("r0"), "{e}");

    let external = |attach| AfXdpConfig {
        program: XdpProgram::External,
        attach: Some(attach),
        ..AfXdpConfig::default()
    };
    // A port bound for another attach mode than the fast path's is
    // refused, and nothing is written.
    let wrong = in_ns(&nr, || {
        AfXdpPort::open("r0", &external(AttachMode::Generic))
    })
    .expect("external port (generic)");
    let e = fp.serve(&wrong).expect_err("mode mismatch");
    assert!(e.to_string().contains("attach mode"), "{e}");
    drop(wrong);

    let mut port =
        in_ns(&nr, || AfXdpPort::open("r0", &external(mode))).expect("external port on r0");
    assert_eq!(port.ifindex(), r0);
    assert!(port.redirected().is_none());
    fp.serve(&port).expect("serve");
    eprintln!("r0: fast path {mode}, AF_XDP port {:?}", port.mode());

    route_to_b(&mut fp, r1);

    // 1. No select entry: the slow path, that is the port.
    const UNSELECTED: u32 = 100;
    let mut slow = Vec::new();
    for seq in 0..UNSELECTED {
        send_seq(&tx, seq);
        std::thread::sleep(Duration::from_millis(1));
        drain(&mut port, &mut slow);
    }
    let deadline = std::time::Instant::now() + PATIENCE;
    while slow.len() < UNSELECTED as usize && std::time::Instant::now() < deadline {
        drain(&mut port, &mut slow);
    }
    assert_eq!(slow, (0..UNSELECTED).collect::<Vec<_>>(), "all, in order");
    let mut buf = [0u8; 64];
    assert!(rx.recv(&mut buf).is_err(), "ns-b got a slow-path frame");
    let unselected = fp.unselected().expect("unselected");
    eprintln!(
        "no entry: port {} of {UNSELECTED}; unselected {unselected}",
        slow.len()
    );
    assert_eq!(unselected, u64::from(UNSELECTED));
    assert_eq!(fp.counters(0).expect("counters").rx, 0);

    // 2. The tenant, slow -> fast -> slow while its flow runs.
    let key = SelectKey {
        ifindex: r0,
        vlan: None,
        dst_mac: Some(R0_MAC),
    };
    let entry = |path| SelectEntry {
        vr: 0,
        path,
        limit: None,
    };
    fp.set_select(key, entry(Path::Slow)).expect("select slow");
    let base = UNSELECTED;
    // Datagrams ns-b has received, for the switch back.
    let fast_got = std::sync::atomic::AtomicU32::new(0);
    let (to_port, to_b, switches) = std::thread::scope(|s| {
        let sent = s.spawn(|| {
            for seq in base..base + MOVE_FRAMES {
                send_seq(&tx, seq);
                // A modest pace; what is checked is counted, not timed.
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        let fast_got = &fast_got;
        let rx = &rx;
        let receiver = s.spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 64];
            let mut idle = 0;
            // Until the flow is over: 10 read timeouts in a row.
            while idle < 10 {
                match rx.recv(&mut buf) {
                    Ok(n) => {
                        idle = 0;
                        got.extend(seq_in_payload(&buf[..n]));
                        fast_got.store(got.len() as u32, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(_) => idle += 1,
                }
            }
            got
        });
        let mut to_port = Vec::new();
        let mut switches = Vec::new();
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            drain(&mut port, &mut to_port);
            // Relaxed: a count to compare against, nothing read through it.
            let fast = fast_got.load(std::sync::atomic::Ordering::Relaxed);
            if switches.is_empty() && to_port.len() >= SWITCH_AT as usize {
                fp.set_select(key, entry(Path::Fast)).expect("to fast");
                switches.push(("to fast", to_port.len(), fast));
            } else if switches.len() == 1 && fast >= 2 * SWITCH_AT {
                fp.set_select(key, entry(Path::Slow)).expect("to slow");
                switches.push(("to slow", to_port.len(), fast));
            }
            if receiver.is_finished() || std::time::Instant::now() > deadline {
                break;
            }
        }
        assert!(sent.is_finished(), "sender still running at the deadline");
        drain(&mut port, &mut to_port);
        (to_port, receiver.join().expect("receiver"), switches)
    });
    let c = fp.counters(0).expect("counters");
    let sent = u64::from(MOVE_FRAMES);
    let (slow_n, fast_n) = (to_port.len() as u64, to_b.len() as u64);
    eprintln!(
        "moved: sent {sent}, slow (port) {slow_n}, fast (ns-b) {fast_n}, lost {}; switches \
         (path, port count, ns-b count) {switches:?}; counters {c:?}; port {:?}",
        sent.saturating_sub(slow_n + fast_n),
        port.stats()
    );
    assert_eq!(switches.len(), 2, "both switches made: {switches:?}");
    // Each number once, at one side.
    let mut all: Vec<u32> = to_port.iter().chain(&to_b).copied().collect();
    all.sort_unstable();
    assert_eq!(
        all,
        (base..base + MOVE_FRAMES).collect::<Vec<_>>(),
        "each datagram once"
    );
    // Three runs: slow up to the first switch, fast, slow again.
    let (f0, f1) = (to_b[0], to_b[to_b.len() - 1] + 1);
    assert_eq!(to_b, (f0..f1).collect::<Vec<_>>(), "the fast run in order");
    let expect_slow: Vec<u32> = (base..f0).chain(f1..base + MOVE_FRAMES).collect();
    assert_eq!(to_port, expect_slow, "the slow runs, in order");
    assert!(f1 < base + MOVE_FRAMES, "frames after the switch back");
    // The fast path's view matches both sides'.
    assert_eq!(
        (c.rx, c.fwd, c.to_slow_select),
        (sent, fast_n, slow_n),
        "{c:?}"
    );
    assert_eq!(c.to_slow() + c.dropped(), slow_n, "{c:?}");
    let p = port.stats();
    assert_eq!(p.rx_dropped, 0, "{p:?}");
    assert_eq!(p.rx_packets, u64::from(UNSELECTED) + slow_n, "{p:?}");

    // Dropping the fast path detaches it from both ports at once, even
    // while a child forked meanwhile holds copies of its link descriptors.
    drop(port);
    let xdp_on = |dev: &str| {
        let out = Command::new("ip")
            .args(["-n", &nr, "link", "show", dev])
            .output()
            .expect("ip link show");
        String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
    };
    assert!(xdp_on("r0") && xdp_on("r1"), "attached before the drop");
    // SAFETY: the child calls only async-signal-safe functions (pause,
    // _exit) until it is killed.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork");
    if child == 0 {
        // SAFETY: async-signal-safe; the child keeps its copies of the
        // descriptors until it dies.
        unsafe {
            libc::pause();
            libc::_exit(0);
        }
    }
    drop(fp);
    let left = (xdp_on("r0"), xdp_on("r1"));
    // SAFETY: `child` is this process's child; `status` is a live int.
    unsafe {
        libc::kill(child, libc::SIGKILL);
        let mut status = 0;
        libc::waitpid(child, &mut status, 0);
    }
    assert_eq!(
        left,
        (false, false),
        "a forked child kept the program attached"
    );
    drop(pass);
}

/// Datagrams of the migration test's flow.
const MOVE_FRAMES: u32 = 3000;
/// Datagrams each path receives before the next switch (see the test).
const SWITCH_AT: u32 = 500;
/// Guard against a hang, never a performance bound.
const PATIENCE: Duration = Duration::from_secs(30);
