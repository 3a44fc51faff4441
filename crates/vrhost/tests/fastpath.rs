//! The daemon's fast path between network namespaces (root only; needs
//! `ip` and `ethtool`): a router VR moved slow -> fast -> slow while a
//! paced UDP flow goes through it, every datagram counted.
//!
//! ```text
//!  ns-a            ns-r: vrhost daemon, fast_path = true          ns-b
//!  a0 10.0.1.2 --- r0 [p0 af_xdp]  VR "r"  [p1 af_xdp] r1 --- b0 10.0.2.2
//! ```
//!
//! r0 and r1 carry the VR's vNIC MACs and no address: every frame is
//! vrhost's (the fast path's XDP program on both, the AF_XDP ports in
//! External mode as its slow path). The VR routes 10.0.2.0/24 out of vNIC
//! 1 to a static neighbour (b0's MAC), so the fast path has the next hop
//! at once.
//!
//! What veth needs (as in `crates/fast/tests/netns.rs`): a frame
//! redirected into r1 by XDP is delivered only if b0 has NAPI, which GRO
//! gives it (`ethtool -K b0 gro on`) where the fast crate's test attaches
//! an XDP_PASS program; and a0's tx checksum offload is off, since a UDP
//! checksum left to the device is never completed once the frame went
//! through XDP as raw bytes.
//!
//! The flow's datagrams carry sequence numbers. The sender paces them
//! and goes on until the test has moved the VR to fast (once ns-b has
//! received [`PHASE`] of them), then back to slow (once the fast path has
//! forwarded [`PHASE`]), then [`PHASE`] more; checked, with no time limit
//! on any of it (deadlines only bound a hung test): every datagram
//! arrived once; the VR's `rx_packets` and `tx_packets` equal what was
//! sent (slow and fast counters added); the fast path forwarded nothing
//! before the move to fast and nothing after the move back; the frames
//! it handed to the slow path while slow are counted `to_slow.select`.
//! Reorderings (a slow frame still in the VR's rings overtaken by a fast
//! one at the switch) are counted and reported, not refused. A VR moved
//! to fast right after its router resolved the next hop by ARP finds the
//! neighbour in the fast path at the move's answer.
//!
//! The namespaces are named with the process id and deleted by their
//! guards even when a check fails; the daemon is killed by its own.

mod common;

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::line::{LineMacs, line};
use serde_json::Value;
use vrhost_lab::Netns;

const R0_MAC: &str = "02:fb:00:00:00:10";
const R1_MAC: &str = "02:fb:00:00:00:11";
const A0_MAC: &str = "02:fb:00:00:00:0a";
const B0_MAC: &str = "02:fb:00:00:00:0b";
const MACS: LineMacs = LineMacs {
    a0: A0_MAC,
    r0: R0_MAC,
    r1: R1_MAC,
    b0: B0_MAC,
};
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
const PORT: u16 = 5556;
/// Datagrams in each phase (slow, fast, slow) at least.
const PHASE: u64 = 1500;
/// A bound against a hung test, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(120);
/// Payload: this tag, then the sequence number (big endian).
const TAG: &[u8; 8] = b"vrh-fast";

/// The daemon's config: VR `r` on `path`, with b0 as a static neighbour
/// (`neighbour`) or left to ARP.
fn config(path: &str, neighbour: bool) -> String {
    let neighbours = match neighbour {
        true => format!("neighbours = [{{ ip = \"10.0.2.2\", mac = \"{B0_MAC}\" }}]"),
        false => String::new(),
    };
    common::line::line_config(&MACS, path, &neighbours)
}

/// ns-a, ns-r, ns-b with their veths.
fn topology() -> [Netns; 3] {
    line("fp", &MACS)
}

/// A socket bound in ns-b to receive the flow, and one in ns-a to send it.
fn sockets(na: &Netns, nb: &Netns) -> (UdpSocket, UdpSocket) {
    let rx = nb
        .run(|| {
            let s = UdpSocket::bind((B_IP, PORT)).expect("bind in ns-b");
            // 8 MiB: the receiving thread shares two CPUs with the sender,
            // the daemon and the VR; a datagram its buffer had no room for
            // would be lost after vrhost delivered it (`UdpRcvbufErrors`).
            rustix::net::sockopt::set_socket_recv_buffer_size_force(&s, 8 << 20)
                .expect("SO_RCVBUFFORCE");
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            s
        })
        .unwrap();
    let tx = na
        .run(|| UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("bind in ns-a"))
        .unwrap();
    (rx, tx)
}

fn send_seq(tx: &UdpSocket, seq: u64) {
    send_seq_to(tx, B_IP, seq);
}

fn send_seq_to(tx: &UdpSocket, dst: Ipv4Addr, seq: u64) {
    let mut p = [0u8; 16];
    p[..8].copy_from_slice(TAG);
    p[8..].copy_from_slice(&seq.to_be_bytes());
    tx.send_to(&p, (dst, PORT)).expect("send");
}

/// A counter of the fast path's in a stats document, by its path under
/// `stats.fast` (`["to_slow", "no_route"]`).
/// Send datagrams 1..=`n`, 0.5 ms apart, and wait (until [`PATIENCE`]
/// after `since`) for every one of them to arrive, in any order.
fn send_and_receive(tx: &UdpSocket, rx: &UdpSocket, n: u64, since: Instant) {
    for seq in 1..=n {
        send_seq(tx, seq);
        std::thread::sleep(Duration::from_micros(500));
    }
    let (mut got, mut buf) = (BTreeSet::new(), [0u8; 64]);
    while got.len() < n as usize {
        if let Some(s) = rx.recv(&mut buf).ok().and_then(|k| seq_of(&buf[..k])) {
            got.insert(s);
        }
        assert!(since.elapsed() < PATIENCE, "received {} of {n}", got.len());
    }
}

fn fast_count(stats: &Value, path: &[&str]) -> u64 {
    let v = path.iter().fold(fast(stats), |v, k| &v[*k]);
    v.as_u64()
        .unwrap_or_else(|| panic!("no fast counter {path:?}"))
}

/// Print where frames may have been lost: ns-b's UDP counters, the
/// veths' counters.
fn where_lost(na: &Netns, nr: &Netns, nb: &Netns) {
    let runs: [(&Netns, &[&str]); 5] = [
        (
            nb,
            &[
                "nstat",
                "-az",
                "UdpInErrors",
                "UdpRcvbufErrors",
                "UdpInDatagrams",
            ],
        ),
        (nb, &["ip", "-s", "link", "show", "b0"]),
        (nr, &["ip", "-s", "link", "show", "r1"]),
        (nr, &["ethtool", "-S", "r1"]),
        (na, &["ip", "-s", "link", "show", "a0"]),
    ];
    for (ns, what) in runs {
        eprintln!("{} {what:?}: {:?}", ns.name(), ns.exec(what[0], &what[1..]));
    }
}

fn seq_of(p: &[u8]) -> Option<u64> {
    (p.len() == 16 && &p[..8] == TAG).then(|| u64::from_be_bytes(p[8..16].try_into().unwrap()))
}

/// The fast path's counters of VR `r` in a stats document.
fn fast(stats: &Value) -> &Value {
    &common::vr_stats(stats, "r")["fast"]
}

fn fwd(stats: &Value) -> u64 {
    fast(stats)["forwarded"].as_u64().expect("fast.forwarded")
}

#[test]
fn a_router_vr_moves_slow_fast_slow_under_a_flow_without_loss() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces and loads XDP programs: run as root"
    );
    let [na, nr, nb] = topology();
    let d = common::Daemon::start_under(
        "fastpath",
        &config("slow", true),
        &["ip", "netns", "exec", nr.name()],
    );
    let vr = d.json(&["vr", "show", "r"]);
    assert_eq!(vr["path"], "slow", "{vr:#}");
    assert_eq!(fwd(&d.stats()), 0);

    let (rx, tx) = sockets(&na, &nb);

    let stop = AtomicBool::new(false);
    let sent = AtomicU64::new(0);
    let got = AtomicU64::new(0);
    let t0 = Instant::now();
    let (seqs, marks) = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            let mut seq = 0u64;
            // Relaxed: a flag polled, nothing read through it.
            while !stop.load(Ordering::Relaxed) {
                send_seq(&tx, seq);
                seq += 1;
                sent.store(seq, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(200));
            }
            seq
        });
        let receiver = s.spawn(|| {
            let mut seqs = Vec::new();
            let mut buf = [0u8; 64];
            let mut idle = 0;
            // Until the sender is done and 10 reads in a row time out.
            while !(stop.load(Ordering::Relaxed) && idle >= 10) {
                match rx.recv(&mut buf) {
                    Ok(n) => {
                        idle = 0;
                        seqs.extend(seq_of(&buf[..n]));
                        got.store(seqs.len() as u64, Ordering::Relaxed);
                    }
                    Err(_) => idle += 1,
                }
            }
            seqs
        });
        let wait = |what: &str, f: &dyn Fn() -> bool| {
            while !f() {
                assert!(t0.elapsed() < PATIENCE, "waited for {what}");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        wait("the slow phase", &|| got.load(Ordering::Relaxed) >= PHASE);
        let before = d.stats();
        // The CLI's time for a move (process, API, apply, map updates):
        // reported, not checked.
        let t = Instant::now();
        let out = d.ok(&["vr", "move", "r", "fast"]);
        let fast_ms = t.elapsed().as_secs_f64() * 1e3;
        assert!(out.contains("moved VR r to the fast path"), "{out}");
        let at_fast = sent.load(Ordering::Relaxed);
        assert_eq!(d.json(&["vr", "show", "r"])["path"], "fast");
        let mut moved = d.stats();
        while fwd(&moved) < PHASE {
            assert!(
                t0.elapsed() < PATIENCE,
                "the fast path forwards nothing: {moved:#}"
            );
            std::thread::sleep(Duration::from_millis(20));
            moved = d.stats();
        }
        let t = Instant::now();
        d.ok(&["vr", "move", "r", "slow"]);
        let slow_ms = t.elapsed().as_secs_f64() * 1e3;
        let at_slow = sent.load(Ordering::Relaxed);
        let after_move = d.stats();
        let goal = at_slow + PHASE;
        wait("the last slow phase", &|| {
            sent.load(Ordering::Relaxed) >= goal
        });
        stop.store(true, Ordering::Relaxed);
        let n = sender.join().expect("sender");
        let seqs = receiver.join().expect("receiver");
        (
            seqs,
            (n, before, at_fast, at_slow, after_move, (fast_ms, slow_ms)),
        )
    });
    let (n, before, at_fast, at_slow, after_move, (fast_ms, slow_ms)) = marks;

    // The VR's counters, once the slow path has drained.
    let end = d.wait_for("the VR to count every frame", PATIENCE, |s| {
        common::count(s, "r", "tx_packets") >= n
    });
    let f = fast(&end);
    let (fast_n, to_slow) = (fwd(&end), f["to_slow"]["select"].as_u64().unwrap());
    let unique: BTreeSet<u64> = seqs.iter().copied().collect();
    let reordered = seqs.windows(2).filter(|w| w[1] < w[0]).count();
    eprintln!(
        "sent {n}, received {} ({} distinct), fast {fast_n}, slow {}, lost {}, reordered {reordered}; \
         moved to fast at {at_fast} ({fast_ms:.1} ms), to slow at {at_slow} ({slow_ms:.1} ms); \
         fast counters {f}",
        seqs.len(),
        unique.len(),
        n - fast_n,
        n - unique.len() as u64,
    );
    if unique.len() as u64 != n {
        where_lost(&na, &nr, &nb);
    }
    assert_eq!(fwd(&before), 0, "the fast path forwarded while slow");
    assert_eq!(seqs.len(), unique.len(), "a datagram arrived twice");
    assert_eq!(unique, (0..n).collect(), "every datagram arrived");
    assert_eq!(
        common::count(&end, "r", "rx_packets"),
        n,
        "VR rx: slow + fast"
    );
    assert_eq!(
        common::count(&end, "r", "tx_packets"),
        n,
        "VR tx: slow + fast"
    );
    let fwd_at_slow = fwd(&after_move);
    assert!(fwd_at_slow >= PHASE, "{fwd_at_slow}");
    assert_eq!(
        fast_n, fwd_at_slow,
        "the fast path forwarded after the move back"
    );
    assert!(fast_n < n, "every frame went fast");
    assert_eq!(
        f["rx_packets"].as_u64(),
        Some(n),
        "the select table saw every frame"
    );
    assert_eq!(to_slow + fast_n, n, "each frame took one path: {f}");
    drop(d);
    drop((na, nb));
}

/// A fast VR whose next hop is left to ARP: the first frames to ns-b go
/// to the slow path (`to_slow.no_neighbour`), whose router resolves b0
/// (the first datagram is sent alone and waited for: while it resolves,
/// the router holds one packet and drops what else comes, as Linux keeps
/// a short queue); the daemon's poll of the router's neighbours (every
/// second) gives the fast path the MAC, and it forwards from then on.
/// Every datagram after the first arrives, by one path or the other.
#[test]
fn a_neighbour_resolved_by_arp_reaches_the_fast_path() {
    assert!(rustix::process::geteuid().is_root(), "run as root");
    let [na, nr, nb] = topology();
    let d = common::Daemon::start_under(
        "fastarp",
        &config("fast", false),
        &["ip", "netns", "exec", nr.name()],
    );
    assert_eq!(d.json(&["vr", "show", "r"])["path"], "fast");
    let (rx, tx) = sockets(&na, &nb);
    let t0 = Instant::now();
    let mut buf = [0u8; 64];
    send_seq(&tx, 0);
    while rx.recv(&mut buf).ok().and_then(|n| seq_of(&buf[..n])) != Some(0) {
        assert!(
            t0.elapsed() < PATIENCE,
            "the first datagram never came: {:#}",
            d.stats()
        );
    }
    let done = AtomicBool::new(false);
    let (seq, seqs) = std::thread::scope(|s| {
        let receiver = s.spawn(|| {
            let (mut seqs, mut idle, mut buf) = (vec![0], 0, [0u8; 64]);
            // Relaxed: a flag polled, nothing read through it.
            while !(done.load(Ordering::Relaxed) && idle >= 10) {
                match rx.recv(&mut buf) {
                    Ok(n) => {
                        idle = 0;
                        seqs.extend(seq_of(&buf[..n]));
                    }
                    Err(_) => idle += 1,
                }
            }
            seqs
        });
        // Paced, until the fast path has forwarded PHASE of them.
        let mut seq = 1u64;
        loop {
            send_seq(&tx, seq);
            seq += 1;
            std::thread::sleep(Duration::from_micros(500));
            if seq.is_multiple_of(100) && fwd(&d.stats()) >= PHASE {
                break;
            }
            assert!(t0.elapsed() < PATIENCE, "the fast path never forwarded");
        }
        done.store(true, Ordering::Relaxed);
        (seq, receiver.join().expect("receiver"))
    });
    let end = d.stats();
    let f = fast(&end);
    let unique: BTreeSet<u64> = seqs.iter().copied().collect();
    eprintln!(
        "sent {seq}, received {} ({} distinct), fast {}, lost {}; fast counters {f}",
        seqs.len(),
        unique.len(),
        fwd(&end),
        seq - unique.len() as u64
    );
    if unique.len() as u64 != seq {
        where_lost(&na, &nr, &nb);
    }
    assert_eq!(unique, (0..seq).collect(), "every datagram arrived");
    assert!(f["to_slow"]["no_neighbour"].as_u64().unwrap() >= 1, "{f}");
    assert!(fwd(&end) >= PHASE, "{f}");
    // Slow and fast, and the router's ARP request(s) for b0 (at most
    // `probes`, 3).
    let tx_n = common::count(&end, "r", "tx_packets");
    assert!(
        (seq + 1..=seq + 3).contains(&tx_n),
        "VR tx {tx_n}, sent {seq}"
    );
    api_routes_reach_the_fast_path(&d, &nb, &tx);
    drop(d);
}

/// A route added through the API reaches the fast path, and one deleted
/// leaves it: datagrams to 10.9.0.1 (an address of b0's, the route's
/// only way there) sent before the route, with it, and after it is
/// deleted. Without the route both paths have none: the fast path hands
/// them over (`to_slow.no_route`) and the router drops them (answering
/// some with ICMP net unreachable, rate-limited, out of vNIC 0); with it the
/// fast path forwards them all. Counted, not timed: each step waits for
/// the counters to account for its datagrams.
fn api_routes_reach_the_fast_path(d: &common::Daemon, nb: &Netns, tx: &UdpSocket) {
    const N: u64 = 50;
    let far = Ipv4Addr::new(10, 9, 0, 1);
    nb.ip(&["addr", "add", "10.9.0.1/32", "dev", "b0"]).unwrap();
    let rx = nb
        .run(|| {
            let s = UdpSocket::bind((far, PORT)).expect("bind 10.9.0.1 in ns-b");
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            s
        })
        .unwrap();
    let s0 = d.stats();
    let (no_route, fwd0) = (fast_count(&s0, &["to_slow", "no_route"]), fwd(&s0));
    // What the router did with datagrams it has no route for: dropped, or
    // answered with an ICMP error (the only frames it sends on vNIC 0).
    let vr_no_route = |s: &Value| {
        let v = common::vr_stats(s, "r");
        v["vr_drops"]["no_route"].as_u64().unwrap_or(0)
            + v["vnics"][0]["tx_packets"].as_u64().unwrap()
    };
    let dropped0 = vr_no_route(&s0);
    let batch = |base: u64| {
        for k in 0..N {
            send_seq_to(tx, far, base + k);
            std::thread::sleep(Duration::from_micros(500));
        }
    };
    // No route: handed over and dropped by the router.
    batch(100_000);
    d.wait_for("the router to drop them", PATIENCE, |s| {
        vr_no_route(s) >= dropped0 + N
    });
    d.ok(&["route", "add", "r", "10.9.0.0/16", "via", "10.0.2.2"]);
    batch(200_000);
    let (mut got, mut buf, t0) = (Vec::new(), [0u8; 64], Instant::now());
    while got.len() < N as usize {
        if let Ok(n) = rx.recv(&mut buf) {
            got.extend(seq_of(&buf[..n]));
        }
        assert!(t0.elapsed() < PATIENCE, "routed datagrams missing: {got:?}");
    }
    assert_eq!(
        got,
        (200_000..200_000 + N).collect::<Vec<_>>(),
        "the routed ones, in order"
    );
    let s1 = d.stats();
    assert_eq!(
        fwd(&s1),
        fwd0 + N,
        "the fast path forwarded them: {:#}",
        fast(&s1)
    );
    // Deleted: no route again, on both paths.
    d.ok(&["route", "del", "r", "10.9.0.0/16"]);
    batch(300_000);
    let s2 = d.wait_for("the router to drop them", PATIENCE, |s| {
        vr_no_route(s) >= dropped0 + 2 * N
    });
    assert_eq!(fast_count(&s2, &["to_slow", "no_route"]), no_route + 2 * N);
    assert_eq!(fwd(&s2), fwd0 + N);
    eprintln!(
        "API route: {N} forwarded fast with it, {} handed over and dropped without",
        2 * N
    );
}

/// A slow VR whose router has just resolved its next hop by ARP, moved to
/// fast at once (well within the daemon's one-second poll of the
/// routers' neighbours): the move asks the router (it has reported no
/// neighbour yet) before it switches, so
/// every datagram after the move's answer is forwarded by the fast path,
/// none handed to the slow path for want of the neighbour. (Before, the
/// fast path learned the neighbour only at the next poll; the test then
/// passes only if that poll happened to fall between the ARP and the
/// move, a few tens of milliseconds out of each second.)
#[test]
fn a_move_to_fast_finds_the_neighbour_the_router_just_resolved() {
    assert!(rustix::process::geteuid().is_root(), "run as root");
    let [na, nr, nb] = topology();
    let d = common::Daemon::start_under(
        "fastmvarp",
        &config("slow", false),
        &["ip", "netns", "exec", nr.name()],
    );
    let (rx, tx) = sockets(&na, &nb);
    let t0 = Instant::now();
    let mut buf = [0u8; 64];
    // Through the slow path: the router resolves b0 for it.
    send_seq(&tx, 0);
    while rx.recv(&mut buf).ok().and_then(|n| seq_of(&buf[..n])) != Some(0) {
        assert!(t0.elapsed() < PATIENCE, "the first datagram never came");
    }
    d.ok(&["vr", "move", "r", "fast"]);
    let before = d.stats();
    const N: u64 = 100;
    send_and_receive(&tx, &rx, N, t0);
    let after = d.stats();
    let no_neighbour = |s: &Value| fast_count(s, &["to_slow", "no_neighbour"]);
    assert_eq!(
        (fwd(&after) - fwd(&before), no_neighbour(&after)),
        (N, 0),
        "every datagram after the move forwarded by the fast path: {:#}",
        fast(&after)
    );
    drop(d);
    drop((na, nb));
}

/// A VR whose router does not answer (its process stopped) is moved all
/// the same, and the fast path forwards its flow with no process behind
/// it: the controller asks a router for its neighbours before a move and
/// in its poll, and waits a bounded time for the answer (before, up to
/// 500 ms an instance, the controller held meanwhile).
#[test]
fn a_vr_whose_router_does_not_answer_is_moved_all_the_same() {
    assert!(rustix::process::geteuid().is_root(), "run as root");
    let [na, nr, nb] = topology();
    let d = common::Daemon::start_under(
        "fastmvstop",
        &config("slow", true),
        &["ip", "netns", "exec", nr.name()],
    );
    let (rx, tx) = sockets(&na, &nb);
    let s = d.wait_for("the VR to run", PATIENCE, |s| {
        common::vr(s, "r")["state"] == "running"
    });
    let pid = common::vr(&s, "r")["instances"][0]["pid"]
        .as_u64()
        .expect("a pid") as i32;
    let pid = rustix::process::Pid::from_raw(pid).expect("a pid");
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    let t = Instant::now();
    d.ok(&["vr", "move", "r", "fast"]);
    eprintln!("moved a stopped VR in {:?}", t.elapsed());
    let before = d.stats();
    const N: u64 = 50;
    send_and_receive(&tx, &rx, N, t);
    let after = d.stats();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::CONT);
    assert_eq!(
        fwd(&after) - fwd(&before),
        N,
        "every datagram forwarded by the fast path: {:#}",
        fast(&after)
    );
    drop(d);
    drop((na, nb));
}
