//! The host's relay of peer messages between the instances of one VR
//! (LVRM's control queues): each instance writes messages to its `CtrlOut`
//! ring, the relay checks them, stamps them with their sender and pushes
//! them to the `CtrlIn` ring of their destination, or of every other live
//! instance for a broadcast. The wire format is `vrhost_proto::peer`'s.
//!
//! What an instance writes is untrusted, and a bad instance harms only
//! itself:
//! - a message is taken only once all of its 16 words are ready (a VR
//!   publishes one with one ring push);
//! - a message that does not decode (bad magic, length or destination) is
//!   a counted violation, and everything ready in that ring is discarded
//!   to find the start of a message again;
//! - an impossible ring index (`CtrlOut`'s producer, or `CtrlIn`'s
//!   consumer) is a violation counted once; the instance then neither sends
//!   nor receives until [`Relay::reset`] (its next process);
//! - the sender field is the relay's (the ring it read from), never the
//!   VR's; the payload is copied, padding zeroed.
//!
//! Nothing blocks: a message for a full `CtrlIn`, or for an instance that
//! is not live, is dropped and counted. At most [`BURST_MSGS`] messages are
//! taken from each instance per call, so one chatty instance cannot hold
//! the worker's round. With no message waiting, a call costs one load of
//! an unchanged ring index per live instance.

use vrhost_proto::peer::{MAX_PAYLOAD, MSG_WORDS, PeerDest, decode_to, discard_ready, encode_from};
use vrhost_shm::{Consumer, Producer, Region, RingId};

/// Messages taken from one instance's `CtrlOut` per [`Relay::relay`] call.
pub const BURST_MSGS: usize = 16;

/// What one [`Relay::relay`] call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayOutcome {
    /// Messages delivered, counted per destination (a broadcast to three
    /// instances counts three).
    pub relayed: u64,
    /// Messages not delivered, per destination: its `CtrlIn` was full, or
    /// it was not live (for a message to one instance).
    pub dropped: u64,
    /// Violations by the senders (or receivers): messages that did not
    /// decode, ring indexes that are impossible.
    pub violations: u64,
    /// Bit `i` set if instance `i` got a message: the caller rings the
    /// doorbell of those that sleep (`vrhost_shm::needs_kick`).
    pub woken: u64,
}

/// The relay of one VR's region: a `CtrlOut` consumer and a `CtrlIn`
/// producer per instance of its layout.
#[derive(Debug)]
pub struct Relay {
    region: Region,
    /// `CtrlOut` of each instance (VR to host).
    outs: Vec<Consumer>,
    /// `CtrlIn` of each instance (host to VR).
    ins: Vec<Producer>,
    /// Bits of the instances in the layout.
    all: u64,
    /// Instances whose ring indexes were impossible, until reset.
    broken: u64,
}

impl Relay {
    /// The relay of `region`, taking every instance's two control rings
    /// from zero (a fresh region, as the data rings are taken).
    pub fn new(region: &Region) -> Self {
        let n = region.layout().cfg.instance_count;
        let ring = |i, id| region.ring(i, id).expect("instance in layout");
        Self {
            outs: (0..n)
                .map(|i| ring(i, RingId::CtrlOut).consumer())
                .collect(),
            ins: (0..n).map(|i| ring(i, RingId::CtrlIn).producer()).collect(),
            all: mask(n),
            broken: 0,
            region: region.clone(),
        }
    }

    /// Take instance `instance`'s two control rings from zero again, after
    /// the host reset their indexes (its process exited; before the next
    /// one starts). It may send and receive again if it was broken. An
    /// instance out of the layout is ignored.
    pub fn reset(&mut self, instance: u16) {
        let i = usize::from(instance);
        if i >= self.outs.len() {
            return;
        }
        let ring = |id| self.region.ring(instance, id).expect("instance in layout");
        self.outs[i] = ring(RingId::CtrlOut).consumer();
        self.ins[i] = ring(RingId::CtrlIn).producer();
        self.broken &= !(1u64 << i);
    }

    /// Whether a live instance has a whole message waiting in `CtrlOut`:
    /// for the worker's look before it sleeps. One ring index load per
    /// live instance.
    pub fn pending(&mut self, live: u64) -> bool {
        let mut bits = live & self.all & !self.broken;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if self.outs[i].ready().is_ok_and(|r| r >= MSG_WORDS as u32) {
                return true;
            }
        }
        false
    }

    /// Relay what the instances in `live` (bit `i`: instance `i` runs)
    /// have written: up to [`BURST_MSGS`] whole messages from each, to
    /// their destinations among `live`. Never blocks; see the module doc
    /// for what is counted.
    #[inline]
    pub fn relay(&mut self, live: u64) -> RelayOutcome {
        let live = live & self.all;
        let mut out = RelayOutcome::default();
        let mut bits = live & !self.broken;
        while bits != 0 {
            let src = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            // The idle case: one Acquire load of the producer index, which
            // stays in our cache while the VR does not write it.
            let ready = match self.outs[src].ready() {
                Ok(r) if r < MSG_WORDS as u32 => continue,
                Ok(r) => r as usize,
                Err(_) => {
                    self.break_instance(src, &mut out);
                    continue;
                }
            };
            self.relay_from(src, ready, live, &mut out);
        }
        out
    }

    /// Relay the messages in `ready` entries of `src`'s `CtrlOut`. Out of
    /// line and cold: keeps [`Relay::relay`]'s idle loop small, at the
    /// cost of a call per instance with messages.
    #[cold]
    #[inline(never)]
    fn relay_from(&mut self, src: usize, ready: usize, live: u64, out: &mut RelayOutcome) {
        let instances = self.outs.len() as u16;
        let take = (ready / MSG_WORDS).min(BURST_MSGS) * MSG_WORDS;
        let mut words = [0u32; BURST_MSGS * MSG_WORDS];
        match self.outs[src].pop(&mut words[..take]) {
            Ok(n) if n == take => {}
            // Not expected: `take` entries were counted ready.
            Ok(_) | Err(_) => {
                self.break_instance(src, out);
                return;
            }
        }
        let mut buf = [0u8; MAX_PAYLOAD];
        for m in words[..take].chunks_exact(MSG_WORDS) {
            let m: &[u32; MSG_WORDS] = m.try_into().expect("chunks of MSG_WORDS");
            let Ok((dest, len)) = decode_to(m, instances, &mut buf) else {
                out.violations += 1;
                // Out of step (or garbage): drop the rest of what we took
                // and everything else ready, and start afresh after it.
                if discard_ready(&mut self.outs[src]).is_err() {
                    self.break_instance(src, out);
                }
                return;
            };
            // Re-encoded with the sender the ring says, padding zeroed.
            let msg = encode_from(src as u16, &buf[..len]).expect("a decoded payload fits");
            match dest {
                PeerDest::Instance(d) => self.deliver(usize::from(d), &msg, live, out),
                PeerDest::All => {
                    let mut to = live & !(1u64 << src);
                    while to != 0 {
                        let d = to.trailing_zeros() as usize;
                        to &= to - 1;
                        self.deliver(d, &msg, live, out);
                    }
                }
            }
        }
    }

    /// Push `msg` to `d`'s `CtrlIn` if `d` is live and has room.
    #[inline]
    fn deliver(&mut self, d: usize, msg: &[u32; MSG_WORDS], live: u64, out: &mut RelayOutcome) {
        let bit = 1u64 << d;
        if live & !self.broken & bit == 0 {
            out.dropped += 1;
            return;
        }
        let ring = &mut self.ins[d];
        let need = MSG_WORDS as u32;
        // Room for all 16 words first: `push` would publish part of them.
        let room = if ring.free_cached() >= need {
            Ok(need)
        } else {
            ring.free()
        };
        match room {
            Ok(r) if r >= need => {}
            Ok(_) => {
                out.dropped += 1;
                return;
            }
            Err(_) => {
                out.dropped += 1;
                self.break_instance(d, out);
                return;
            }
        }
        match ring.push(msg) {
            Ok(MSG_WORDS) => {
                out.relayed += 1;
                out.woken |= bit;
            }
            // Not expected: the room was checked and only grows.
            Ok(_) | Err(_) => {
                out.dropped += 1;
                self.break_instance(d, out);
            }
        }
    }

    /// Count a violation and stop relaying from and to `i` until reset.
    fn break_instance(&mut self, i: usize, out: &mut RelayOutcome) {
        if self.broken & (1u64 << i) == 0 {
            self.broken |= 1u64 << i;
            out.violations += 1;
        }
    }

    /// Instances whose ring indexes were impossible (bit `i`: instance
    /// `i`), left out until [`Relay::reset`].
    pub fn broken(&self) -> u64 {
        self.broken
    }
}

/// Bits `0..n`.
fn mask(n: u16) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use proptest::prelude::*;
    use vrhost_proto::PollConfig;
    use vrhost_sdk::peer::{PeerError, Peers};
    use vrhost_sdk::runtime::Instance;
    use vrhost_sdk::{Packet, Verdict, Vr};
    use vrhost_shm::{Doorbell, RegionConfig, RingMem, needs_kick};

    use super::*;

    fn region(instances: u16, ctrl_entries: u32) -> Region {
        Region::create(
            "relay",
            RegionConfig {
                instance_count: instances,
                ctrl_entries,
                slot_count: 64,
                ring_entries: 64,
                ..RegionConfig::default()
            },
        )
        .unwrap()
    }

    /// The test playing instance `id` (its side of the control rings).
    struct Side {
        id: u16,
        n: u16,
        cin: Consumer,
        cout: Producer,
    }

    impl Side {
        fn new(region: &Region, id: u16) -> Self {
            Self {
                id,
                n: region.layout().cfg.instance_count,
                cin: region.ring(id, RingId::CtrlIn).unwrap().consumer(),
                cout: region.ring(id, RingId::CtrlOut).unwrap().producer(),
            }
        }

        fn send(&mut self, to: PeerDest, msg: &[u8]) -> Result<(), PeerError> {
            Peers::new(self.id, self.n, &mut self.cin, &mut self.cout).send(to, msg)
        }

        fn recv_all(&mut self) -> Vec<(u16, Vec<u8>)> {
            let mut peers = Peers::new(self.id, self.n, &mut self.cin, &mut self.cout);
            let mut buf = [0u8; MAX_PAYLOAD];
            let mut v = Vec::new();
            while let Some((from, len)) = peers.recv(&mut buf) {
                v.push((from, buf[..len].to_vec()));
            }
            assert_eq!(peers.counts().bad, 0, "the relay sent a bad message");
            assert!(peers.ring_error().is_none());
            v
        }
    }

    fn out(relayed: u64, dropped: u64, violations: u64, woken: u64) -> RelayOutcome {
        RelayOutcome {
            relayed,
            dropped,
            violations,
            woken,
        }
    }

    #[test]
    fn delivers_in_order_stamped_with_the_sender() {
        let r = region(3, 1024);
        let mut relay = Relay::new(&r);
        let mut s: Vec<Side> = (0..3).map(|i| Side::new(&r, i)).collect();
        assert_eq!(relay.relay(0b111), RelayOutcome::default());
        for k in 0..5u8 {
            s[0].send(PeerDest::Instance(1), &[k; 7]).unwrap();
        }
        s[2].send(PeerDest::Instance(1), b"from two").unwrap();
        // Instance 2 cannot pass itself off as 0: the header says the
        // destination, the relay fills in the sender.
        assert!(relay.pending(0b111));
        assert_eq!(relay.relay(0b111), out(6, 0, 0, 0b010));
        assert!(!relay.pending(0b111));
        let got = s[1].recv_all();
        let want: Vec<(u16, Vec<u8>)> = (0..5u8)
            .map(|k| (0, vec![k; 7]))
            .chain([(2, b"from two".to_vec())])
            .collect();
        assert_eq!(got, want);
        assert!(s[0].recv_all().is_empty() && s[2].recv_all().is_empty());
        // To itself, and a second call finds nothing.
        s[2].send(PeerDest::Instance(2), b"me").unwrap();
        assert_eq!(relay.relay(0b111), out(1, 0, 0, 0b100));
        assert_eq!(s[2].recv_all(), [(2, b"me".to_vec())]);
        assert_eq!(relay.relay(0b111), RelayOutcome::default());
    }

    #[test]
    fn broadcast_reaches_every_other_live_instance() {
        let r = region(4, 1024);
        let mut relay = Relay::new(&r);
        let mut s: Vec<Side> = (0..4).map(|i| Side::new(&r, i)).collect();
        let live = 0b1011; // instance 2 does not run
        s[0].send(PeerDest::All, b"10.0.0.0/8 via 3").unwrap();
        assert_eq!(relay.relay(live), out(2, 0, 0, 0b1010));
        for i in [1, 3] {
            assert_eq!(s[i].recv_all(), [(0, b"10.0.0.0/8 via 3".to_vec())]);
        }
        assert!(s[0].recv_all().is_empty() && s[2].recv_all().is_empty());
        // To one instance that does not run: dropped.
        s[1].send(PeerDest::Instance(2), b"x").unwrap();
        assert_eq!(relay.relay(live), out(0, 1, 0, 0));
        // A sender that is not live is not read at all.
        s[2].send(PeerDest::All, b"y").unwrap();
        assert_eq!(relay.relay(live), RelayOutcome::default());
        assert!(relay.relay(0b1111).relayed == 3);
    }

    #[test]
    fn full_ring_drops_and_counts() {
        // Two messages per control ring.
        let r = region(2, 32);
        let mut relay = Relay::new(&r);
        let mut s: Vec<Side> = (0..2).map(|i| Side::new(&r, i)).collect();
        s[0].send(PeerDest::Instance(1), b"a").unwrap();
        s[0].send(PeerDest::Instance(1), b"b").unwrap();
        assert_eq!(s[0].send(PeerDest::Instance(1), b"c"), Err(PeerError::Full));
        assert_eq!(relay.relay(0b11), out(2, 0, 0, 0b10));
        s[0].send(PeerDest::Instance(1), b"c").unwrap();
        s[0].send(PeerDest::All, b"d").unwrap();
        // Instance 1 has not read: both dropped, nothing blocks.
        assert_eq!(relay.relay(0b11), out(0, 2, 0, 0));
        assert_eq!(
            s[1].recv_all(),
            [(0, b"a".to_vec()), (0, b"b".to_vec())],
            "the dropped ones never arrive"
        );
        s[0].send(PeerDest::Instance(1), b"e").unwrap();
        assert_eq!(relay.relay(0b11), out(1, 0, 0, 0b10));
        assert_eq!(s[1].recv_all(), [(0, b"e".to_vec())]);
    }

    #[test]
    fn at_most_a_burst_per_instance_per_call() {
        let r = region(2, 1024);
        let mut relay = Relay::new(&r);
        let mut s: Vec<Side> = (0..2).map(|i| Side::new(&r, i)).collect();
        for k in 0..20u8 {
            s[0].send(PeerDest::Instance(1), &[k]).unwrap();
        }
        assert_eq!(relay.relay(0b11).relayed, BURST_MSGS as u64);
        assert_eq!(relay.relay(0b11).relayed, 20 - BURST_MSGS as u64);
        let got: Vec<u8> = s[1].recv_all().iter().map(|(_, m)| m[0]).collect();
        assert_eq!(got, (0..20).collect::<Vec<u8>>());
    }

    fn raw_out(r: &Region, i: u16) -> Producer {
        r.ring(i, RingId::CtrlOut).unwrap().producer()
    }

    #[test]
    fn garbage_is_a_violation_and_the_ring_resyncs() {
        let r = region(3, 1024);
        let mut relay = Relay::new(&r);
        let mut s1 = Side::new(&r, 1);
        let mut raw = raw_out(&r, 0);
        let good = |to, m: &[u8]| vrhost_sdk::peer::encode_to(to, m).unwrap();

        // Garbage, then a good message in the same ready window: both go.
        raw.push(&[0xDEAD_BEEF; 16]).unwrap();
        raw.push(&good(PeerDest::Instance(1), b"lost")).unwrap();
        assert_eq!(relay.relay(0b111), out(0, 0, 1, 0));
        // Back in step: the next message goes through.
        raw.push(&good(PeerDest::Instance(1), b"ok")).unwrap();
        assert_eq!(relay.relay(0b111), out(1, 0, 0, 0b010));
        assert_eq!(s1.recv_all(), [(0, b"ok".to_vec())]);

        // A destination out of range and a length above 60.
        let mut bad = good(PeerDest::Instance(1), b"x");
        bad[0] = (bad[0] & 0xFFFF) | 3 << 16;
        raw.push(&bad).unwrap();
        assert_eq!(relay.relay(0b111), out(0, 0, 1, 0));
        bad[0] = 0xA7 | 61 << 8 | 1 << 16;
        raw.push(&bad).unwrap();
        assert_eq!(relay.relay(0b111), out(0, 0, 1, 0));

        // Half a message waits; what completes it is out of step.
        raw.push(&[0xDEAD_BEEF; 8]).unwrap();
        assert_eq!(relay.relay(0b111), RelayOutcome::default());
        raw.push(&good(PeerDest::Instance(1), b"torn")).unwrap();
        let o = relay.relay(0b111);
        assert_eq!((o.violations, o.relayed), (1, 0), "{o:?}");
        raw.push(&good(PeerDest::All, b"again")).unwrap();
        assert_eq!(relay.relay(0b111), out(2, 0, 0, 0b110));
        assert_eq!(s1.recv_all(), [(0, b"again".to_vec())]);
        assert_eq!(relay.broken(), 0);
    }

    #[test]
    fn impossible_indexes_break_only_that_instance() {
        // Two messages per control ring.
        let r = region(3, 32);
        let mut relay = Relay::new(&r);
        let mut s: Vec<Side> = (0..3).map(|i| Side::new(&r, i)).collect();
        // Instance 0 writes a producer index far past a ring's worth.
        let out0: RingMem = r.ring(0, RingId::CtrlOut).unwrap();
        out0.producer_at(5000, 5000).push(&[1]).unwrap();
        assert_eq!(relay.relay(0b111), out(0, 0, 1, 0));
        assert_eq!(relay.broken(), 0b001);
        assert_eq!(relay.relay(0b111), RelayOutcome::default(), "counted once");
        assert!(!relay.pending(0b111));
        // The others go on; a message to the broken one is dropped.
        s[1].send(PeerDest::All, b"hi").unwrap();
        assert_eq!(relay.relay(0b111), out(1, 1, 0, 0b100));
        assert_eq!(s[2].recv_all(), [(1, b"hi".to_vec())]);

        // Instance 2 moves its CtrlIn consumer index (16) to 1000, far
        // past our head. We see it when we next need to read it: the
        // second message finds the ring full by our count.
        let in2 = r.ring(2, RingId::CtrlIn).unwrap();
        assert_eq!(in2.indexes(), (16, 16));
        in2.clone().consumer_at(999, 1000).pop(&mut [0; 1]).unwrap();
        assert_eq!(in2.indexes(), (16, 1000));
        s[1].send(PeerDest::Instance(2), b"x").unwrap();
        s[1].send(PeerDest::Instance(2), b"y").unwrap();
        assert_eq!(relay.relay(0b111), out(1, 1, 1, 0b100));
        assert_eq!(relay.broken(), 0b101);

        // The host resets the rings of the exited processes and re-takes
        // them.
        for i in [0, 2] {
            r.ring(i, RingId::CtrlIn).unwrap().reset();
            r.ring(i, RingId::CtrlOut).unwrap().reset();
            relay.reset(i);
            s[usize::from(i)] = Side::new(&r, i);
        }
        relay.reset(99); // not an instance: ignored
        assert_eq!(relay.broken(), 0);
        s[0].send(PeerDest::All, b"back").unwrap();
        assert_eq!(relay.relay(0b111), out(2, 0, 0, 0b110));
        assert_eq!(s[2].recv_all(), [(0, b"back".to_vec())]);
        assert_eq!(s[1].recv_all(), [(0, b"back".to_vec())]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Instance 0 pushes these words as they are.
        Garbage(Vec<u32>),
        /// Instance 0 pushes a well-formed message.
        Valid(Option<u16>, Vec<u8>),
        /// The host relays; instances 1 and 2 read.
        Relay(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            proptest::collection::vec(
                prop_oneof![any::<u32>(), (0u32..4).prop_map(|p| 0xA7 | (p << 16))],
                0..40
            )
            .prop_map(Op::Garbage),
            (
                proptest::option::of(0u16..3),
                proptest::collection::vec(any::<u8>(), 0..=MAX_PAYLOAD)
            )
                .prop_map(|(d, p)| Op::Valid(d, p)),
            (0u64..8).prop_map(Op::Relay),
        ]
    }

    proptest! {
        /// Whatever instance 0 writes, the relay does not panic, counts
        /// consistently, and every message anyone receives is a whole
        /// one stamped with instance 0 as its sender.
        #[test]
        fn random_words_never_escape(ops in proptest::collection::vec(op(), 1..60)) {
            let r = region(3, 64);
            let mut relay = Relay::new(&r);
            let mut raw = raw_out(&r, 0);
            // Instance 0's CtrlIn only: `raw` is its CtrlOut.
            let mut s0 = Side::new(&r, 0);
            let mut s1 = Side::new(&r, 1);
            let mut s2 = Side::new(&r, 2);
            let mut relayed = 0;
            let mut received = 0;
            for op in ops {
                match op {
                    Op::Garbage(w) => { raw.push(&w).unwrap(); }
                    Op::Valid(to, p) => {
                        let to = to.map_or(PeerDest::All, PeerDest::Instance);
                        if raw.free().unwrap() >= 16 {
                            raw.push(&vrhost_sdk::peer::encode_to(to, &p).unwrap()).unwrap();
                        }
                    }
                    Op::Relay(live) => {
                        let live = live | 1;
                        let o = relay.relay(live);
                        prop_assert!(o.woken & !live == 0);
                        prop_assert!(o.relayed <= 2 * BURST_MSGS as u64);
                        relayed += o.relayed;
                        for side in [&mut s0, &mut s1, &mut s2] {
                            for (from, m) in side.recv_all() {
                                prop_assert_eq!(from, 0);
                                prop_assert!(m.len() <= MAX_PAYLOAD);
                                received += 1;
                            }
                        }
                    }
                }
            }
            prop_assert_eq!(relayed, received);
            prop_assert_eq!(relay.broken(), 0);
        }
    }

    /// Answers every message with "pong " and the message, to its sender;
    /// forwards packets after `spin` rounds of busy work (a stand-in for
    /// a lookup).
    struct Echo {
        spin: u32,
    }

    impl Vr for Echo {
        fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
            for i in 0..self.spin {
                std::hint::black_box(i);
            }
            Verdict::Forward(pkt.rx_vnic() ^ 1)
        }

        fn uses_peers(&self) -> bool {
            true
        }

        fn peers(&mut self, peers: &mut Peers<'_>) {
            let mut buf = [0u8; MAX_PAYLOAD];
            while let Some((from, len)) = peers.recv(&mut buf) {
                let mut reply = b"pong ".to_vec();
                reply.extend_from_slice(&buf[..len.min(MAX_PAYLOAD - 5)]);
                // A full ring drops the answer; the test's rings never fill.
                let _ = peers.send(PeerDest::Instance(from), &reply);
            }
        }
    }

    /// What an instance thread returns: its peer counters and packets.
    type Done = (vrhost_sdk::peer::PeerCounters, u64);

    /// Instances `0..running` (of 3) run the SDK's poll loop in threads;
    /// the test plays instance 2 and the host's worker (relay, then
    /// doorbells, and with `load` keeps instance 0's rx ring full).
    struct Vrs {
        region: Region,
        relay: Relay,
        me: Side,
        bells: Vec<Doorbell>,
        stop: Arc<AtomicBool>,
        threads: Vec<std::thread::JoinHandle<Done>>,
        /// Instance 0's rx ring of vNIC 0 and its tx rings, when loaded.
        load: Option<(Producer, Vec<Consumer>)>,
    }

    impl Vrs {
        fn start(poll: PollConfig, running: u16, spin: u32, load: bool) -> Self {
            let region = region(3, 1024);
            let stop = Arc::new(AtomicBool::new(false));
            let mut bells = Vec::new();
            let mut threads = Vec::new();
            for i in 0..running {
                let bell = Doorbell::new().unwrap();
                let dup = Doorbell::from_fd(rustix::io::dup(bell.fd()).unwrap());
                bells.push(bell);
                let mut inst =
                    Instance::new(region.clone(), i, dup, Doorbell::new().unwrap(), poll).unwrap();
                let stop = stop.clone();
                threads.push(std::thread::spawn(move || {
                    inst.run(&mut Echo { spin }, None, &stop).unwrap();
                    (inst.peer_counters(), inst.counters().v[0])
                }));
            }
            let load = load.then(|| {
                let mut rx = region.ring(0, RingId::Rx(0)).unwrap().producer();
                let tx = (0..2)
                    .map(|v| region.ring(0, RingId::Tx(v)).unwrap().consumer())
                    .collect();
                let slots: Vec<u32> = (0..region.slot_count()).collect();
                for &s in &slots {
                    assert!(region.write_slot(s, 128, &[0; 64]));
                    region.meta(s).unwrap().set_extent(128, 64);
                }
                assert_eq!(rx.push(&slots).unwrap(), slots.len());
                (rx, tx)
            });
            Self {
                relay: Relay::new(&region),
                me: Side::new(&region, 2),
                region,
                bells,
                stop,
                threads,
                load,
            }
        }

        /// One worker round: relay, and ring the doorbell of a sleeping
        /// instance that got a message; with load, hand the packets the
        /// instance sent back to it.
        fn round(&mut self) -> RelayOutcome {
            let o = self.relay.relay(0b111);
            for i in 0..self.bells.len() as u16 {
                let block = self.region.instance(i).unwrap();
                if o.woken & (1 << i) != 0 && needs_kick(&block.vr_sleeping) {
                    self.bells[usize::from(i)].ring();
                }
            }
            if let Some((rx, tx)) = &mut self.load {
                let mut idx = [0u32; 64];
                for c in tx {
                    let n = c.pop(&mut idx).unwrap();
                    assert_eq!(rx.push(&idx[..n]).unwrap(), n);
                }
            }
            o
        }

        /// Send, then relay until `n` answers came back; they and the time.
        fn ask(&mut self, to: PeerDest, msg: &[u8], n: usize) -> (Vec<(u16, Vec<u8>)>, Duration) {
            let t = Instant::now();
            self.me.send(to, msg).unwrap();
            let mut got = Vec::new();
            while got.len() < n {
                assert!(t.elapsed() < Duration::from_secs(10), "answers: {got:?}");
                self.round();
                got.extend(self.me.recv_all());
            }
            (got, t.elapsed())
        }

        fn asleep(&self, i: u16) -> bool {
            needs_kick(&self.region.instance(i).unwrap().vr_sleeping)
        }

        fn stop(self) -> Vec<Done> {
            self.stop.store(true, Ordering::Relaxed);
            self.bells.iter().for_each(Doorbell::ring);
            self.threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect()
        }
    }

    #[test]
    fn instances_talk_through_the_relay_and_wake_for_it() {
        let poll = PollConfig {
            spin_rounds: 0,
            yield_us: 0,
            sleep_ms: 10_000,
            ..PollConfig::default()
        };
        let mut vrs = Vrs::start(poll, 2, 0, false);
        for round in 0..3u8 {
            // Both instances asleep: only a doorbell gets an answer
            // before their 10 s timeout.
            while !(vrs.asleep(0) && vrs.asleep(1)) {
                std::thread::yield_now();
            }
            let (got, took) = vrs.ask(PeerDest::Instance(0), &[b'a', round], 1);
            assert_eq!(got, [(0, vec![b'p', b'o', b'n', b'g', b' ', b'a', round])]);
            assert!(took < Duration::from_secs(5), "{took:?}");
        }
        let (mut got, _) = vrs.ask(PeerDest::All, b"all", 2);
        got.sort();
        assert_eq!(got, [(0, b"pong all".to_vec()), (1, b"pong all".to_vec())]);
        let c = vrs.stop();
        assert_eq!((c[0].0.received, c[0].0.sent), (4, 4));
        assert_eq!((c[1].0.received, c[1].0.sent), (1, 1));
    }

    /// Messages overtake packets: with instance 0's rx ring kept full,
    /// answers still come, and packets keep flowing meanwhile.
    #[test]
    fn messages_are_served_under_load() {
        let mut vrs = Vrs::start(PollConfig::default(), 1, 0, true);
        for k in 0..100u32 {
            let (got, _) = vrs.ask(PeerDest::Instance(0), &k.to_le_bytes(), 1);
            assert_eq!(got[0].1[5..], k.to_le_bytes());
        }
        let c = vrs.stop();
        assert_eq!(c[0].0.received, 100);
        assert!(c[0].1 > 0, "no packets went through");
    }

    /// Round trip test -> instance 0 -> test (two relays and two instance
    /// rounds), both polling, idle and with instance 0's rx ring kept
    /// full of packets taking `spin` rounds of work each. Two threads: one
    /// core each if the machine is otherwise idle. Run with `--release
    /// --ignored --nocapture` for the numbers.
    #[test]
    #[ignore = "timing; prints the latency"]
    fn round_trip_latency() {
        for (load, spin) in [(false, 0), (true, 0), (true, 50), (true, 200)] {
            let poll = PollConfig {
                spin_rounds: u32::MAX,
                ..PollConfig::default()
            };
            let mut vrs = Vrs::start(poll, 1, spin, load);
            let t = Instant::now();
            let mut times: Vec<Duration> = (0..50_000)
                .map(|k: u32| vrs.ask(PeerDest::Instance(0), &k.to_le_bytes(), 1).1)
                .collect();
            let secs = t.elapsed().as_secs_f64();
            let packets = vrs.stop()[0].1;
            times.sort();
            let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
            println!(
                "peer round trip, load {load}, {:.1} Mpps ({:.0} ns/packet): median {:?}, p90 {:?}, p99 {:?}",
                packets as f64 / secs / 1e6,
                if packets > 0 {
                    secs * 1e9 / packets as f64
                } else {
                    0.0
                },
                at(0.5),
                at(0.9),
                at(0.99)
            );
        }
    }

    /// The idle cost of a relay call. Run with `--release --ignored
    /// --nocapture` for the number.
    #[test]
    #[ignore = "timing; prints the cost"]
    fn idle_relay_cost() {
        let r = region(2, 1024);
        let mut relay = Relay::new(&r);
        let n = 10_000_000u32;
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(relay.relay(std::hint::black_box(0b11)));
        }
        println!(
            "idle relay over 2 instances: {:.2} ns/call",
            t.elapsed().as_nanos() as f64 / f64::from(n)
        );
    }
}
