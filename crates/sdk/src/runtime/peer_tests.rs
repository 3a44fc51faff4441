//! The runtime's side of peer messages: the hook runs before the data
//! rings, only for a VR that uses peers, and a waiting message keeps an
//! instance from sleeping or wakes it; an idle instance with a control
//! socket sleeps with no timer.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use vrhost_shm::{RegionConfig, RingMem};

use super::*;
use crate::peer::{MAX_PAYLOAD, PeerDest, Peers, decode_to, encode_from};
use crate::sdk::{Packet, Verdict};

/// Logs its calls; answers each message with "ack " and the message.
#[derive(Default)]
struct Chatty {
    log: Vec<&'static str>,
    got: Vec<(u16, Vec<u8>)>,
}

impl Vr for Chatty {
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        self.log.push("packet");
        Verdict::Forward(pkt.rx_vnic() ^ 1)
    }

    fn uses_peers(&self) -> bool {
        true
    }

    fn peers(&mut self, peers: &mut Peers<'_>) {
        self.log.push("peers");
        let mut buf = [0u8; MAX_PAYLOAD];
        while let Some((from, len)) = peers.recv(&mut buf) {
            self.got.push((from, buf[..len].to_vec()));
            let mut reply = b"ack ".to_vec();
            reply.extend_from_slice(&buf[..len]);
            reply.truncate(MAX_PAYLOAD);
            peers.send(PeerDest::Instance(from), &reply).unwrap();
        }
    }
}

/// Forwards everything; the default (no) peers hook.
struct Plain;

impl Vr for Plain {
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        Verdict::Forward(pkt.rx_vnic() ^ 1)
    }
}

fn region() -> Region {
    Region::create(
        "peers",
        RegionConfig {
            instance_count: 2,
            ..RegionConfig::default()
        },
    )
    .unwrap()
}

fn instance(region: &Region, poll: PollConfig) -> (Instance, Doorbell) {
    let bell = Doorbell::new().unwrap();
    let dup = Doorbell::from_fd(rustix::io::dup(bell.fd()).unwrap());
    let inst = Instance::new(region.clone(), 0, dup, Doorbell::new().unwrap(), poll).unwrap();
    (inst, bell)
}

fn ring(region: &Region, id: RingId) -> RingMem {
    region.ring(0, id).unwrap()
}

/// The messages waiting in instance 0's `CtrlOut`: (destination, bytes).
fn sent(out: &mut Consumer) -> Vec<(PeerDest, Vec<u8>)> {
    let mut words = [0u32; 16];
    let mut buf = [0u8; MAX_PAYLOAD];
    let mut v = Vec::new();
    while out.pop(&mut words).unwrap() == 16 {
        let (to, len) = decode_to(&words, 2, &mut buf).unwrap();
        v.push((to, buf[..len].to_vec()));
    }
    v
}

#[test]
fn hook_runs_before_packets_and_messages_arrive() {
    let region = region();
    let (mut inst, _bell) = instance(&region, PollConfig::default());
    let mut ctrl_in = ring(&region, RingId::CtrlIn).producer();
    let mut ctrl_out = ring(&region, RingId::CtrlOut).consumer();
    let mut rx = ring(&region, RingId::Rx(0)).producer();
    // At the default headroom, 128.
    assert!(region.put_frame(3, &[0; 60]));
    rx.push(&[3]).unwrap();
    ctrl_in
        .push(&encode_from(1, b"10/8 via 1").unwrap())
        .unwrap();

    let mut vr = Chatty::default();
    assert_eq!(inst.poll_once(&mut vr).unwrap(), 1);
    assert_eq!(vr.log, ["peers", "packet"], "messages are served first");
    assert_eq!(vr.got, [(1, b"10/8 via 1".to_vec())]);
    assert_eq!(
        sent(&mut ctrl_out),
        [(PeerDest::Instance(1), b"ack 10/8 via 1".to_vec())]
    );
    let c = inst.peer_counters();
    assert_eq!((c.received, c.sent, c.bad), (1, 1, 0));

    // Called every round, with or without messages.
    assert_eq!(inst.poll_once(&mut vr).unwrap(), 0);
    assert_eq!(vr.log, ["peers", "packet", "peers"]);
    assert_eq!(vr.got.len(), 1);
}

#[test]
fn a_vr_without_peers_never_reads_ctrl_in() {
    let region = region();
    let (mut inst, _bell) = instance(&region, PollConfig::default());
    let mem = ring(&region, RingId::CtrlIn);
    let mut ctrl_in = mem.clone().producer();
    ctrl_in.push(&encode_from(1, b"x").unwrap()).unwrap();
    let mut vr = Plain;
    for _ in 0..3 {
        inst.poll_once(&mut vr).unwrap();
    }
    assert_eq!(mem.indexes(), (16, 0), "the message is still there");
    assert_eq!(inst.peer_counters(), PeerCounters::default());
    // Boxed, the hook and its flag are forwarded.
    let mut boxed: Box<dyn Vr> = Box::new(Chatty::default());
    inst.poll_once(&mut boxed).unwrap();
    assert_eq!(mem.indexes(), (16, 16));
    assert_eq!(inst.peer_counters().received, 1);
}

/// The look before sleeping includes `CtrlIn`: a message pushed without a
/// doorbell (the relay saw no flag raised) does not wait out the sleep.
#[test]
fn waiting_message_keeps_the_instance_awake() {
    let region = region();
    let (mut inst, _bell) = instance(&region, PollConfig::default());
    let mut ctrl_in = ring(&region, RingId::CtrlIn).producer();
    ctrl_in.push(&encode_from(1, b"x").unwrap()).unwrap();
    let t = Instant::now();
    let r = inst.sleep(
        &mut Chatty::default(),
        None,
        Some(Duration::from_secs(10)),
        true,
    );
    assert_eq!(r.unwrap(), Ctrl::Open);
    assert!(t.elapsed() < Duration::from_secs(5), "slept on a message");
    assert_eq!(inst.counters().v[counter::SLEEPS], 0);
    assert_eq!(
        region
            .instance(0)
            .unwrap()
            .vr_sleeping
            .load(Ordering::Relaxed),
        0
    );
}

/// A sleeping instance woken by a message (and its doorbell) answers it.
#[test]
fn sleeping_instance_wakes_for_a_message() {
    let region = region();
    let poll = PollConfig {
        spin_rounds: 0,
        yield_us: 0,
        sleep_ms: 10_000,
        ..PollConfig::default()
    };
    let (mut inst, bell) = instance(&region, poll);
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut vr = Chatty::default();
            inst.run(&mut vr, None, &stop).unwrap();
            (vr, inst.peer_counters())
        })
    };
    let block = region.instance(0).unwrap();
    let mut ctrl_in = ring(&region, RingId::CtrlIn).producer();
    let mut ctrl_out = ring(&region, RingId::CtrlOut).consumer();
    for round in 0..3u8 {
        while !needs_kick(&block.vr_sleeping) {
            std::thread::yield_now();
        }
        let t = Instant::now();
        ctrl_in.push(&encode_from(1, &[round]).unwrap()).unwrap();
        if needs_kick(&block.vr_sleeping) {
            bell.ring();
        }
        let mut got = Vec::new();
        while got.is_empty() {
            assert!(t.elapsed() < Duration::from_secs(5), "no answer");
            got = sent(&mut ctrl_out);
        }
        assert_eq!(
            got,
            [(PeerDest::Instance(1), vec![b'a', b'c', b'k', b' ', round])]
        );
    }
    stop.store(true, Ordering::Relaxed);
    bell.ring();
    let (vr, counts) = thread.join().unwrap();
    assert_eq!(vr.got.len(), 3);
    assert_eq!((counts.received, counts.sent), (3, 3));
}

/// Uses peers until its hook finds it has none: the runtime then stops
/// calling the hook (and reading `CtrlIn`).
#[derive(Default)]
struct Alone {
    calls: u32,
    told: Option<u16>,
}

impl Vr for Alone {
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        Verdict::Forward(pkt.rx_vnic() ^ 1)
    }

    fn uses_peers(&self) -> bool {
        self.told != Some(1)
    }

    fn peers(&mut self, peers: &mut Peers<'_>) {
        self.calls += 1;
        self.told = Some(peers.instances());
    }
}

#[test]
fn a_vr_that_finds_no_peer_is_not_asked_again() {
    let region = Region::create("alone", RegionConfig::default()).unwrap();
    let (mut inst, _bell) = instance(&region, PollConfig::default());
    let mut vr = Alone::default();
    // As `run` does: asked once, then after each call of the hook.
    let mut peers = vr.uses_peers();
    for _ in 0..5 {
        inst.round(&mut vr, &mut peers).unwrap();
    }
    assert_eq!((vr.calls, vr.told, peers), (1, Some(1), false));
}

/// An idle instance with a control socket sleeps until the socket or its
/// doorbell fires, with no timer: over 30 `sleep_ms` it sleeps once (a
/// timer would wake it about 30 times), and the host closing the socket
/// still wakes and stops it.
#[test]
fn an_idle_instance_with_a_control_socket_sleeps_with_no_timer() {
    let region = region();
    let poll = PollConfig {
        spin_rounds: 0,
        yield_us: 0,
        sleep_ms: 10,
        ..PollConfig::default()
    };
    let (mut inst, _bell) = instance(&region, poll);
    let (host_end, vr_end) = std::os::unix::net::UnixStream::pair().unwrap();
    let thread = std::thread::spawn(move || {
        let stop = AtomicBool::new(false);
        let r = inst.run(&mut Plain, Some(std::os::fd::AsFd::as_fd(&vr_end)), &stop);
        (r, inst.counters().v[counter::SLEEPS])
    });
    std::thread::sleep(Duration::from_millis(300));
    drop(host_end);
    let t = Instant::now();
    let (r, sleeps) = thread.join().unwrap();
    r.unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the close did not wake it"
    );
    assert!(sleeps <= 2, "{sleeps} sleeps in 300 ms: woken by a timer");
}
