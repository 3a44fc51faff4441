//! The live-frames generator and the counting sink between two network
//! namespaces (root only; needs `ip`):
//!
//! ```text
//!  ns-g: LiveSender on g0 --- s0: SeqSink (XDP), ns-s
//! ```
//!
//! Paced, every frame the generator sent is counted once at the sink, in
//! order, none lost, spread over the flows; the pacing dropped the frames
//! beyond the rate. Unpaced, frames arrive and the sink's received,
//! plus what its sequence numbers say was lost, never exceeds what the
//! generator sent. Without the sink's program the peer has no XDP and the
//! frames vanish: the sink, attached afterwards, has counted nothing.
//! Each check fails if the generator sends nothing. Last, through the fast
//! path (ns-g -- ns-r [`FastPath`] -- ns-s): far more frames than the
//! generator's pages, recycled each time with what the router left in
//! them (TTL - 1, MACs), are all forwarded and all arrive in order: the
//! generator writes the headers again on every run (without that, the TTL
//! ran down over the recycles and every frame went to the slow path).
//! Through another CPU (`via_cpu`), the generator pinned to CPU 0 and its
//! frames handed to CPU 1: every frame is forwarded and arrives in order,
//! and the sink behind the router counted them all on CPU 1, none on CPU 0
//! (the veth's receive side, the router and its redirect ran there); its
//! cpumap kthread is found and given nice -20.
//!
//! The namespaces are named with the process id and deleted by a guard
//! even when a check fails.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
use vrhost_fast::{
    FastConfig, FastPath, LiveGen, LiveGenConfig, LiveSender, Neighbour, NextHop, Path,
    RoutingMode, SelectEntry, SelectKey, SendOn, SeqSink, VrFastConfig, ifindex, udp_frame,
};

const G0_MAC: [u8; 6] = [0x02, 0xfc, 0, 0, 0, 0x01];
const S0_MAC: [u8; 6] = [0x02, 0xfc, 0, 0, 0, 0x02];
/// A bound against a hung test, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(60);

/// Add the namespace, with IPv6 off: on a veth just set up, the kernel's
/// IPv6 timers (MLD reports, DAD, router solicitations, for about three
/// seconds) send frames from whichever CPU they fire on, and a frame sent
/// into a veth runs its peer's NAPI there, with the test's frames queued
/// behind it (a CI run counted 19 of 20,226 on the generator's CPU).
fn netns_add(name: &str) {
    ip(&["netns", "add", name]);
    for key in [
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ] {
        let ok = Command::new("ip")
            .args(["netns", "exec", name, "sysctl", "-qw", key])
            .status()
            .expect("sysctl");
        assert!(ok.success(), "{name}: sysctl {key}");
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// ns-g and ns-s with the veth g0 -- s0, deleted on drop.
struct Pair(String, String);

impl Pair {
    fn new(tag: &str) -> Self {
        let id = std::process::id();
        // The guard first: it deletes what was added if a step fails.
        let p = Pair(format!("lg-g-{tag}-{id}"), format!("lg-s-{tag}-{id}"));
        netns_add(&p.0);
        netns_add(&p.1);
        ip(&[
            "link", "add", "g0", "netns", &p.0, "type", "veth", "peer", "name", "s0", "netns", &p.1,
        ]);
        ip(&["-n", &p.0, "link", "set", "g0", "up"]);
        ip(&["-n", &p.1, "link", "set", "s0", "up"]);
        p
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for n in [&self.0, &self.1] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn in_ns<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = File::open(format!("/run/netns/{name}")).expect("netns file");
            move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network))
                .expect("setns");
            f()
        })
        .join()
        .expect("thread in a namespace")
    })
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn generator(flows: u32, rate_pps: u64) -> Arc<LiveGen> {
    let frame = udp_frame(
        G0_MAC,
        S0_MAC,
        Ipv4Addr::new(10, 9, 0, 1),
        Ipv4Addr::new(10, 9, 0, 2),
        64,
    );
    Arc::new(
        LiveGen::load(&LiveGenConfig {
            frame,
            flows,
            rate_pps,
            repeat: 1 << 16,
            ..LiveGenConfig::default()
        })
        .expect("load the generator (root, kernel 6.x)"),
    )
}

fn send_on(p: &Pair) -> SendOn {
    SendOn {
        netns: Some(format!("/run/netns/{}", p.0).into()),
        ifname: "g0".into(),
        cpu: None,
        hold: None,
    }
}

/// Send until the generator has sent `n` frames (or more), then stop.
fn send_at_least(g: &Arc<LiveGen>, p: &Pair, n: u64) {
    send_at_least_on(g, send_on(p), n);
}

fn send_at_least_on(g: &Arc<LiveGen>, on: SendOn, n: u64) {
    let t = Instant::now();
    let mut s = LiveSender::start(g.clone(), on).expect("start sending");
    while g.counters().expect("counters").sent < n {
        assert!(s.check().expect("sender"), "the sender stopped");
        assert!(t.elapsed() < PATIENCE, "sent {:?}", g.counters());
        std::thread::sleep(Duration::from_millis(10));
    }
    s.stop().expect("stop");
}

#[test]
fn paced_frames_all_arrive_in_order_per_flow() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let p = Pair::new("p");
    let sink = in_ns(&p.1, || SeqSink::attach("s0").expect("sink on s0"));
    let g = generator(4, 20_000);
    send_at_least(&g, &p, 2_000);
    let sent = g.counters().unwrap();
    let got = sink.counts(4).unwrap();
    assert!(sent.sent >= 2_000, "{sent:?}");
    assert!(sent.paced_out > 0, "the pacing dropped nothing: {sent:?}");
    assert_eq!(got.received, sent.sent, "{got:?} of {sent:?}");
    assert_eq!((got.lost, got.reordered, got.other), (0, 0, 0), "{got:?}");
    for f in 0..4 {
        let c = sink.flow(f).unwrap();
        assert!(c.received >= sent.sent / 4, "flow {f}: {c:?}");
    }
    assert_eq!(sink.flow(4).unwrap().received, 0);
}

#[test]
fn unpaced_frames_arrive_and_losses_add_up() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let p = Pair::new("u");
    let sink = in_ns(&p.1, || SeqSink::attach("s0").expect("sink on s0"));
    let g = generator(1, 0);
    send_at_least(&g, &p, 200_000);
    let sent = g.counters().unwrap();
    let got = sink.counts(1).unwrap();
    assert_eq!(sent.paced_out, 0);
    assert!(got.received > 0, "nothing arrived: {got:?} of {sent:?}");
    assert!(got.received + got.lost <= sent.sent, "{got:?} of {sent:?}");
    eprintln!(
        "unpaced: sent {} received {} lost {}",
        sent.sent, got.received, got.lost
    );
}

/// The XDP program id on `dev` in namespace `ns`, if any (`ip link
/// show`'s `prog/xdp id N`).
fn xdp_on(ns: &str, dev: &str) -> Option<u64> {
    let out = Command::new("ip")
        .args(["-n", ns, "link", "show", dev])
        .output()
        .expect("ip link show");
    let text = String::from_utf8_lossy(&out.stdout);
    let (_, rest) = text.split_once("prog/xdp id ")?;
    rest.split_whitespace().next()?.parse().ok()
}

#[test]
fn a_held_generator_stays_on_its_hold_interface_until_dropped() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let p = Pair::new("h");
    ip(&[
        "-n", &p.0, "link", "add", "h0", "type", "veth", "peer", "name", "h1",
    ]);
    let sink = in_ns(&p.1, || SeqSink::attach("s0").expect("sink on s0"));
    let g = generator(2, 20_000);
    let on = SendOn {
        hold: Some("h0".into()),
        ..send_on(&p)
    };
    send_at_least_on(&g, on.clone(), 1_000);
    let held = xdp_on(&p.0, "h0").expect("the program on the hold interface");
    // Held once: a second sender on the same interface keeps it.
    send_at_least_on(&g, on, 2_000);
    assert_eq!(xdp_on(&p.0, "h0"), Some(held));
    assert_eq!(xdp_on(&p.0, "h1"), None);
    let sent = g.counters().unwrap();
    let got = sink.counts(2).unwrap();
    assert_eq!(got.received, sent.sent, "{got:?} of {sent:?}");
    assert_eq!((got.lost, got.reordered, got.other), (0, 0, 0), "{got:?}");
    // Another interface is refused while held.
    let other = in_ns(&p.0, || vrhost_fast::ifindex("h1").expect("h1"));
    assert!(g.hold(other).is_err());
    drop(g);
    assert_eq!(xdp_on(&p.0, "h0"), None, "detached with the generator");
}

#[test]
fn frames_vanish_without_a_program_on_the_peer() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let p = Pair::new("n");
    let g = generator(1, 0);
    send_at_least(&g, &p, 10_000);
    let sink = in_ns(&p.1, || SeqSink::attach("s0").expect("sink on s0"));
    assert_eq!(sink.counts(1).unwrap().received, 0);
    // The same generator, now that the peer has a program: they arrive.
    send_at_least(&g, &p, g.counters().unwrap().sent + 10_000);
    assert!(sink.counts(1).unwrap().received > 0);
}

#[test]
fn bad_configs_are_refused() {
    let short = LiveGen::load(&LiveGenConfig {
        frame: vec![0; 40],
        ..LiveGenConfig::default()
    });
    assert!(short.unwrap_err().to_string().contains("shorter"));
    let frame = udp_frame(G0_MAC, S0_MAC, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 64);
    let flows = LiveGen::load(&LiveGenConfig {
        frame,
        flows: 0,
        ..LiveGenConfig::default()
    });
    assert!(flows.unwrap_err().to_string().contains("flows"));
    if is_root() {
        let frame = udp_frame(G0_MAC, S0_MAC, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 64);
        let offline = LiveGen::load(&LiveGenConfig {
            frame,
            via_cpu: Some(4095),
            ..LiveGenConfig::default()
        });
        assert!(offline.unwrap_err().to_string().contains("online"));
    }
}

/// ns-g -- ns-r -- ns-s: g0 -- r0, r1 -- s0, deleted on drop.
struct Three(Pair, String);

impl Three {
    fn new(tag: &str) -> Self {
        let id = std::process::id();
        let p = Pair(format!("lg-g-{tag}-{id}"), format!("lg-s-{tag}-{id}"));
        let t = Three(p, format!("lg-r-{tag}-{id}"));
        for n in [&t.0.0, &t.1, &t.0.1] {
            netns_add(n);
        }
        let (g, r, s) = (&t.0.0, &t.1, &t.0.1);
        ip(&[
            "link",
            "add",
            "g0",
            "netns",
            g,
            "address",
            &mac(G0_MAC),
            "type",
            "veth",
            "peer",
            "name",
            "r0",
            "netns",
            r,
            "address",
            &mac(R0_MAC),
        ]);
        ip(&[
            "link",
            "add",
            "r1",
            "netns",
            r,
            "address",
            &mac(R1_MAC),
            "type",
            "veth",
            "peer",
            "name",
            "s0",
            "netns",
            s,
            "address",
            &mac(S0_MAC),
        ]);
        for (n, d) in [(g, "g0"), (r, "r0"), (r, "r1"), (s, "s0")] {
            ip(&["-n", n, "link", "set", d, "up"]);
        }
        t
    }
}

impl Drop for Three {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.1]).status();
    }
}

const R0_MAC: [u8; 6] = [0x02, 0xfc, 0, 0, 0, 0x10];
const R1_MAC: [u8; 6] = [0x02, 0xfc, 0, 0, 0, 0x11];

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// VR 0 on the fast path in ns-r: frames to r0's MAC routed to
/// 10.9.1.0/24 out of r1, to s0.
fn router(nr: &str) -> FastPath {
    in_ns(nr, || {
        let mut fp = FastPath::load(&FastConfig::default()).expect("load the fast path");
        fp.attach("r0").expect("attach r0");
        fp.attach("r1").expect("attach r1");
        let (r0, r1) = (ifindex("r0").unwrap(), ifindex("r1").unwrap());
        let vr = VrFastConfig {
            mode: RoutingMode::Dst,
            addrs: vec![Ipv4Addr::new(10, 9, 0, 254), Ipv4Addr::new(10, 9, 1, 254)],
        };
        fp.set_vr(0, &vr).expect("vr");
        fp.add_route(0, 0, (Ipv4Addr::new(10, 9, 1, 0), 24), NextHop::Connected)
            .expect("route");
        let s0 = Neighbour {
            mac: S0_MAC,
            src_mac: R1_MAC,
            ifindex: r1,
        };
        fp.set_neighbour(0, Ipv4Addr::new(10, 9, 1, 2), s0)
            .expect("neighbour");
        let key = SelectKey {
            ifindex: r0,
            vlan: None,
            dst_mac: Some(R0_MAC),
        };
        let entry = SelectEntry {
            vr: 0,
            path: Path::Fast,
            limit: None,
        };
        fp.set_select(key, entry).expect("select");
        fp
    })
}

#[test]
fn via_another_cpu_the_forward_runs_there_not_on_the_generator_s() {
    if !is_root() || !vrhost_fast::online_cpus().unwrap().contains(&1) {
        eprintln!("skipped: needs root and CPUs 0 and 1");
        return;
    }
    let t = Three::new("c");
    let fp = router(&t.1);
    let sink = in_ns(&t.0.1, || SeqSink::attach("s0").expect("sink on s0"));
    let g = routed_generator(50_000, Some(1));
    assert!(g.raise_forwarding_priority().unwrap(), "its cpumap kthread");
    let on = SendOn {
        cpu: Some(0),
        ..send_on(&t.0)
    };
    send_at_least_on(&g, on, 20_000);
    let sent = all_forwarded(&g, &fp, &sink);
    let cpus = sink.per_cpu().unwrap();
    assert_eq!(cpus[0], 0, "received on the generator's CPU: {cpus:?}");
    assert_eq!(cpus[1], sent, "{cpus:?}");
}

#[test]
fn frames_recycled_through_a_router_in_xdp_keep_their_headers() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let t = Three::new("r");
    let fp = router(&t.1);
    let sink = in_ns(&t.0.1, || SeqSink::attach("s0").expect("sink on s0"));
    let g = routed_generator(100_000, None);
    assert!(!g.raise_forwarding_priority().unwrap(), "no cpumap kthread");
    // A page is reused after at most a few hundred frames: 64 recycles
    // would have run a TTL of 64 down.
    send_at_least(&g, &t.0, 50_000);
    let c = fp.counters(0).expect("counters");
    assert_eq!(c.to_slow_ttl, 0, "the TTL ran down: {c:?}");
    all_forwarded(&g, &fp, &sink);
}

/// A generator of 2 flows through [`router`] at `rate_pps`.
fn routed_generator(rate_pps: u64, via_cpu: Option<u32>) -> Arc<LiveGen> {
    let frame = udp_frame(
        G0_MAC,
        R0_MAC,
        Ipv4Addr::new(10, 9, 0, 1),
        Ipv4Addr::new(10, 9, 1, 2),
        64,
    );
    Arc::new(
        LiveGen::load(&LiveGenConfig {
            frame,
            flows: 2,
            rate_pps,
            repeat: 1 << 16,
            via_cpu,
            ..LiveGenConfig::default()
        })
        .expect("load the generator"),
    )
}

/// After the last frames have had time to arrive: every frame sent was
/// forwarded by the router and received in order by the sink. What was sent.
fn all_forwarded(g: &LiveGen, fp: &FastPath, sink: &SeqSink) -> u64 {
    std::thread::sleep(Duration::from_millis(200));
    let sent = g.counters().unwrap().sent;
    let c = fp.counters(0).expect("counters");
    assert_eq!(c.fwd, sent, "{c:?}, sent {sent}");
    let got = sink.counts(2).unwrap();
    assert_eq!(got.received, sent, "{got:?}");
    assert_eq!((got.lost, got.reordered), (0, 0), "{got:?}");
    sent
}
