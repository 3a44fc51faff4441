//! Tests of the held batches (`flush`): a real `af_xdp` port with
//! `tx = "xdp"` on a veth pair in namespaces of the test's own (GRO on at
//! the peer, which then takes xdp_frames), fed by a VR whose instance the
//! test plays.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vrhost_io::Port;
use vrhost_io::af_xdp::{AfXdpConfig, AfXdpPort, TxPath};
use vrhost_lab::{Netns, veth};
use vrhost_proto::PollConfig;
use vrhost_shm::SlotState;

use super::Worker;
use crate::classify::Classifier;
use crate::vrpath::testkit::{Instance, Kit, Source, frame};

/// Frames the VR hands back at once.
const FRAMES: usize = 10;

/// Namespaces A (the port on `a0`) and B (its peer `b0`, GRO on).
fn lab() -> (Netns, Netns) {
    let a = Netns::unique("vrh-hold").unwrap();
    let b = Netns::unique("vrh-hold").unwrap();
    for ns in [&a, &b] {
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
            .unwrap();
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
    }
    veth(&a, "a0", None, &b, "b0", None).unwrap();
    b.exec("ethtool", &["-K", "b0", "gro", "on"]).unwrap();
    (a, b)
}

fn rx_packets(b: &Netns) -> u64 {
    b.exec("cat", &["/sys/class/net/b0/statistics/rx_packets"])
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Wait up to 5 s for `b0` to have received `n` frames more than `from`.
fn arrived(b: &Netns, from: u64, n: u64) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if rx_packets(b) >= from + n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Inside namespace A: a worker whose port 1 is `a0` (`tx = "xdp"`),
/// with `poll`, and a VR out on port 1 that has handed back [`FRAMES`]
/// frames and still holds one more (a frame in flight: more may come);
/// with the VR's instance side, which must outlive it.
fn worker(poll: PollConfig) -> (Worker, Vec<Instance>) {
    let cfg = AfXdpConfig {
        tx: TxPath::Xdp,
        queues: Some(1),
        ..AfXdpConfig::default()
    };
    let port = AfXdpPort::open("a0", &cfg).unwrap();
    let ports: Vec<Box<dyn Port>> = vec![Box::new(Source::new([])), Box::new(port)];
    let mut w = Worker::new(ports, Classifier::default(), poll).unwrap();
    let mut k = Kit::new(1, 1, 4096, 4096);
    for t in 0..FRAMES {
        k.give(0, &frame(2 * t as u8));
    }
    let slots = k.take(0, 0);
    k.hand_back(0, 0, &slots, SlotState::Processed);
    k.give(0, &frame(100));
    let _in_flight = k.take(0, 0);
    k.vp.set_vnic_ports(vec![1]);
    w.add_vr(k.vp);
    w.last_reap = Instant::now() + Duration::from_secs(3600);
    (w, k.inst)
}

fn held(w: &Worker) -> usize {
    w.ports()[1].tx_batched()
}

fn runs(w: &Worker) -> u64 {
    w.ports()[1].stats().tx_runs
}

/// A batch below `tx_batch`, held while the VR has a frame in flight,
/// is not stranded when input stops: the worker sends it before it
/// yields or sleeps, in one run, although its wait (an hour) never ends.
#[test]
fn a_held_batch_is_sent_when_input_stops() {
    let (a, b) = lab();
    let before = rx_packets(&b);
    let poll = PollConfig {
        tx_batch: 64,
        tx_wait_us: 3_600_000_000,
        ..PollConfig::default()
    };
    a.run(|| {
        let (mut w, _inst) = worker(poll);
        assert_eq!(w.poll_once(), FRAMES);
        assert_eq!(held(&w), FRAMES, "held: the VR has a frame in flight");
        assert_eq!(w.poll_once(), 0);
        assert_eq!((held(&w), runs(&w)), (FRAMES, 0), "still held");
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let run = s.spawn(|| {
                // The worker's thread must be in A, where the run finds
                // the interface.
                let _in_a = a.enter().unwrap();
                w.run(&stop);
            });
            let ok = arrived(&b, before, FRAMES as u64);
            // Seen within a sleep's timeout.
            stop.store(true, Ordering::Relaxed);
            run.join().unwrap();
            assert!(ok, "the held frames reached the peer");
        });
        assert_eq!(held(&w), 0);
        assert_eq!(runs(&w), 1, "one run carried the batch");
    })
    .unwrap();
}

/// The batch goes out once it has waited `tx_wait_us`, while the worker
/// still spins; with `tx_batch = 0` (the old flush), after the round.
#[test]
fn a_held_batch_waits_no_longer_than_tx_wait_and_batch_0_holds_nothing() {
    let (a, b) = lab();
    let before = rx_packets(&b);
    a.run(|| {
        let (mut w, inst) = worker(PollConfig {
            tx_batch: 64,
            tx_wait_us: 2000,
            ..PollConfig::default()
        });
        assert_eq!(w.poll_once(), FRAMES);
        assert_eq!(held(&w), FRAMES);
        std::thread::sleep(Duration::from_millis(3));
        // The round that sees it waited 2 ms sends it.
        w.poll_once();
        assert_eq!((held(&w), runs(&w)), (0, 1));
        // The port detaches its program before the next opens one.
        drop((w, inst));

        let (mut w, _inst) = worker(PollConfig {
            tx_batch: 0,
            ..PollConfig::default()
        });
        assert_eq!(w.poll_once(), FRAMES);
        assert_eq!((held(&w), runs(&w)), (0, 1), "sent after its round");
    })
    .unwrap();
    assert!(arrived(&b, before, 2 * FRAMES as u64));
}
