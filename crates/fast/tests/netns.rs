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

#[test]
fn forwards_between_namespaces_with_kernel_forwarding_off() {
    assert!(
        is_root(),
        "this test loads XDP programs and makes namespaces: run as root"
    );
    let pid = std::process::id();
    let mut ns = Namespaces(Vec::new());
    let na = ns.add(format!("fast-{pid}-a"));
    let nr = ns.add(format!("fast-{pid}-r"));
    let nb = ns.add(format!("fast-{pid}-b"));

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

    // Each object is made by a thread in its namespace and then used
    // here: a socket, a link or a DEVMAP entry belongs to the namespace
    // it was made in, not to the thread that uses it.
    let pass = in_ns(&nb, || PeerPass::attach("b0").expect("xdp_pass on b0"));
    let rx = in_ns(&nb, || {
        let sock = UdpSocket::bind((B_IP, PORT)).expect("bind in ns-b");
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        sock
    });
    let tx = in_ns(&na, || {
        UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("bind in ns-a")
    });
    let (mut fp, r0, r1, modes) = in_ns(&nr, || {
        let mut fp = FastPath::load(&FastConfig::default()).expect("load");
        let m0 = fp.attach("r0").expect("attach r0");
        let m1 = fp.attach("r1").expect("attach r1");
        let r0 = ifindex("r0").expect("r0");
        let r1 = ifindex("r1").expect("r1");
        (fp, r0, r1, (m0, m1))
    });
    eprintln!("attached: r0, r1 {modes:?}; b0 {:?}", pass.mode());
    fp.set_vr(
        0,
        &VrFastConfig {
            mode: RoutingMode::Dst,
            addrs: vec![Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 2, 1)],
        },
    )
    .expect("vr");
    fp.add_route(0, 0, (Ipv4Addr::new(10, 0, 2, 0), 24), NextHop::Connected)
        .expect("route");
    fp.set_neighbour(
        0,
        B_IP,
        Neighbour {
            mac: B0_MAC,
            src_mac: R1_MAC,
            ifindex: r1,
        },
    )
    .expect("neighbour");

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
