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
//! Each check fails if the generator sends nothing.
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
use vrhost_fast::{LiveGen, LiveGenConfig, LiveSender, SendOn, SeqSink, udp_frame};

const G0_MAC: [u8; 6] = [0x02, 0xfc, 0, 0, 0, 0x01];
const S0_MAC: [u8; 6] = [0x02, 0xfc, 0, 0, 0, 0x02];
/// A bound against a hung test, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(60);

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
        let p = Pair(format!("lg-g-{tag}-{id}"), format!("lg-s-{tag}-{id}"));
        ip(&["netns", "add", &p.0]);
        ip(&["netns", "add", &p.1]);
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
    }
}

/// Send until the generator has sent `n` frames (or more), then stop.
fn send_at_least(g: &Arc<LiveGen>, p: &Pair, n: u64) {
    let t = Instant::now();
    let mut s = LiveSender::start(g.clone(), send_on(p)).expect("start sending");
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
}
