//! Neighbours shared among instances: two routers wired through their
//! control rings, the host's relay done by hand.

use proptest::prelude::*;
use vrhost_shm::{Consumer, Producer, heap_ring};

use super::*;
use crate::peer::{MSG_LEN, NEIGH_V1, NeighMsg};
use vrhost_sdk::peer::{MAX_PAYLOAD, MSG_WORDS, PeerDest, Peers, decode_to, encode_from};

/// One instance's control rings, both ends: `CtrlIn` (the host's producer,
/// the instance's consumer) and `CtrlOut` (the other way).
struct Rings {
    in_p: Producer,
    in_c: Consumer,
    out_p: Producer,
    out_c: Consumer,
}

impl Rings {
    fn new() -> Self {
        let (i, o) = (heap_ring(1024), heap_ring(1024));
        Self {
            in_p: i.clone().producer(),
            in_c: i.consumer(),
            out_p: o.clone().producer(),
            out_c: o.consumer(),
        }
    }

    /// One round of the hook for instance `me` of `instances`.
    fn round(&mut self, r: &mut Router, me: u16, instances: u16) {
        r.peers(&mut Peers::new(
            me,
            instances,
            &mut self.in_c,
            &mut self.out_p,
        ));
    }

    /// What instance `me` sent, taken from its `CtrlOut`: (to, bytes).
    fn sent(&mut self) -> Vec<(PeerDest, Vec<u8>)> {
        let mut w = [0u32; MSG_WORDS];
        let mut buf = [0u8; MAX_PAYLOAD];
        let mut v = Vec::new();
        while self.out_c.pop(&mut w).unwrap() == MSG_WORDS {
            let (to, len) = decode_to(&w, 2, &mut buf).unwrap();
            v.push((to, buf[..len].to_vec()));
        }
        v
    }

    /// A message from instance `from` in our `CtrlIn`, as the host relays.
    fn give(&mut self, from: u16, bytes: &[u8]) {
        self.in_p.push(&encode_from(from, bytes).unwrap()).unwrap();
    }
}

/// Instances 0 and 1 and the host between them.
struct Pair {
    a: Router,
    b: Router,
    ra: Rings,
    rb: Rings,
}

impl Pair {
    /// Both routers have run one round: they know they have a peer.
    fn new() -> Self {
        let mut p = Self {
            a: router(),
            b: router(),
            ra: Rings::new(),
            rb: Rings::new(),
        };
        p.ra.round(&mut p.a, 0, 2);
        p.rb.round(&mut p.b, 1, 2);
        assert!(p.a.uses_peers() && p.b.uses_peers());
        p
    }

    /// A round of A (it sends), the relay, a round of B (it receives);
    /// returns what A sent.
    fn a_to_b(&mut self) -> Vec<(PeerDest, Vec<u8>)> {
        self.ra.round(&mut self.a, 0, 2);
        let sent = self.ra.sent();
        for (_, m) in &sent {
            self.rb.give(0, m);
        }
        self.rb.round(&mut self.b, 1, 2);
        sent
    }
}

/// An ARP request between two other hosts on vNIC 1's link: consumed,
/// its slot free.
fn chatter() -> Vec<u8> {
    let other = [2, 0, 0, 0, 0xc0, 50];
    arp_request(
        other,
        Ipv4Addr::new(10, 1, 1, 50),
        Ipv4Addr::new(10, 1, 1, 99),
    )
}

fn msg(vnic: u16, ip: Ipv4Addr, mac: [u8; 6]) -> Vec<u8> {
    NeighMsg {
        vnic,
        ip: ip.to_bits(),
        mac,
    }
    .emit()
    .to_vec()
}

/// `pkt` as it leaves for `mac` out of vNIC 1: MACs set, TTL - 1.
fn check_released(out: &[u8], pkt: &[u8], mac: [u8; 6]) {
    assert_eq!(out.len(), pkt.len());
    assert_eq!((&out[0..6], &out[6..12]), (&mac[..], &R1[..]));
    assert_eq!(out[22], pkt[22] - 1, "TTL");
    let ip = Ipv4HeaderSlice::from_slice(&out[14..]).unwrap();
    assert_eq!(ip.header_checksum(), ip.to_header().calc_header_checksum());
    assert_eq!(&out[26..], &pkt[26..], "addresses and payload");
}

#[test]
fn a_reply_to_one_instance_releases_the_packet_another_kept() {
    let mut p = Pair::new();
    // B routes a packet by the gateway: its slot becomes the request.
    let pkt = udp_from_h0(Ipv4Addr::new(8, 8, 8, 8));
    let (v, out) = run(&mut p.b, 0, &pkt);
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(out, request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), GW_IP));
    // The balancer gives the reply to A, which waited for nothing.
    at(&mut p.a, 2);
    let (v, _) = run(&mut p.a, 1, &gw_reply(GW));
    assert_eq!(v, Verdict::Drop(DropReason::Consumed));
    let sent = p.a_to_b();
    assert_eq!(sent, [(PeerDest::All, msg(1, GW_IP, GW))]);
    assert_eq!(c(&p.a, counters::PEER_NEIGH_SENT), 1);
    assert_eq!(c(&p.b, counters::PEER_NEIGH_APPLIED), 1);
    assert_eq!(neigh_state(&p.b, GW_IP, 1), Some((State::Reachable, GW)));
    // B's next burst: a packet by the gateway goes straight out; the kept
    // one leaves in the slot of the frame B consumes.
    at(&mut p.b, 3);
    let out = run_burst(
        &mut p.b,
        &[(0, udp_from_h0(Ipv4Addr::new(8, 8, 4, 4))), (1, chatter())],
    );
    let (v, first) = &out[0];
    assert_eq!((*v, &first[0..6]), (Verdict::Forward(1), &GW[..]));
    assert_eq!(out[1].0, Verdict::Forward(1));
    check_released(&out[1].1, &pkt, GW);
    assert_eq!(c(&p.b, counters::ARP_RELEASED), 1);
    assert_eq!(c(&p.b, counters::ARP_REQUESTS), 1, "no more requests");
    assert_eq!(p.b.neigh.free_buffers(), 64);
    // Later packets by the gateway leave as usual.
    let (v, out) = run(&mut p.b, 0, &udp_from_h0(Ipv4Addr::new(9, 9, 9, 9)));
    assert_eq!((v, &out[0..6]), (Verdict::Forward(1), &GW[..]));
}

/// A connected host: the instance given the reply has no entry for it,
/// and tells the others all the same.
#[test]
fn a_reply_for_a_host_only_another_instance_asked_for() {
    let mut p = Pair::new();
    let dst = Ipv4Addr::new(10, 9, 3, 4);
    let host = [2, 0, 0, 0, 0xc0, 4];
    let pkt = udp_from_h0(dst);
    assert_eq!(run(&mut p.b, 0, &pkt).0, Verdict::Forward(1));
    let reply = reply_on_1(host, dst, Ipv4Addr::new(10, 9, 0, 1));
    run(&mut p.a, 1, &reply);
    assert_eq!(neigh_state(&p.a, dst, 1), None, "A adds no entry");
    assert_eq!(p.a_to_b(), [(PeerDest::All, msg(1, dst, host))]);
    assert_eq!(neigh_state(&p.b, dst, 1), Some((State::Reachable, host)));
    // One by one too: the consumed frame's slot carries the kept packet.
    let mut buf = vec![0u8; 2048];
    let f = chatter();
    buf[..f.len()].copy_from_slice(&f);
    let mut slot = Packet::new(&mut buf, 0, f.len(), 1).unwrap();
    assert_eq!(p.b.process(&mut slot), Verdict::Forward(1));
    check_released(slot.data(), &pkt, host);
}

/// A kept packet that finds no free slot within `retrans_ms x probes` of
/// its release is discarded, not sent late.
#[test]
fn a_released_packet_does_not_leave_late() {
    let mut p = Pair::new();
    run(&mut p.b, 0, &udp_from_h0(Ipv4Addr::new(8, 8, 8, 8)));
    run(&mut p.a, 1, &gw_reply(GW));
    p.a_to_b();
    at(&mut p.b, 300);
    let out = run_burst(&mut p.b, &[(1, chatter())]);
    assert_eq!(out[0].0, Verdict::Drop(DropReason::Consumed));
    assert_eq!(c(&p.b, counters::ARP_UNRES_DISCARDS), 1);
    assert_eq!(c(&p.b, counters::ARP_RELEASED), 0);
    assert_eq!(p.b.neigh.free_buffers(), 64);
}

#[test]
fn malformed_messages_are_counted_and_ignored() {
    let mut p = Pair::new();
    // B waits for the gateway.
    run(&mut p.b, 0, &udp_from_h0(Ipv4Addr::new(8, 8, 8, 8)));
    let good = msg(1, GW_IP, GW);
    let mut wrong_kind = good.clone();
    wrong_kind[0] = NEIGH_V1 + 1;
    let bad = [
        good[..MSG_LEN - 1].to_vec(),             // short
        [good.as_slice(), &[0]].concat(),         // long
        Vec::new(),                               // empty
        wrong_kind,                               // another kind
        msg(2, GW_IP, GW),                        // no vNIC 2
        msg(u16::MAX, GW_IP, GW),                 // nor 65535
        msg(1, GW_IP, [3, 0, 0, 0, 0, 1]),        // group MAC
        msg(1, GW_IP, [0; 6]),                    // zero MAC
        msg(1, Ipv4Addr::new(10, 1, 1, 1), GW),   // the router's
        msg(1, Ipv4Addr::new(10, 1, 1, 255), GW), // a broadcast
        msg(1, Ipv4Addr::UNSPECIFIED, GW),        // 0.0.0.0
        msg(1, Ipv4Addr::new(224, 0, 0, 1), GW),  // a group
        vec![0xff; MAX_PAYLOAD],                  // noise
    ];
    for m in &bad {
        p.rb.give(0, m);
    }
    p.rb.round(&mut p.b, 1, 2);
    assert_eq!(c(&p.b, counters::PEER_NEIGH_BAD), bad.len() as u64);
    assert_eq!(c(&p.b, counters::PEER_NEIGH_APPLIED), 0);
    assert_eq!(neigh_state(&p.b, GW_IP, 1).unwrap().0, State::Incomplete);
    // A good one for a neighbour B has no entry for: not bad, not added.
    let stranger = Ipv4Addr::new(10, 1, 1, 77);
    p.rb.give(0, &msg(1, stranger, [2, 0, 0, 0, 0, 77]));
    // The good one after them all is applied.
    p.rb.give(0, &good);
    p.rb.round(&mut p.b, 1, 2);
    assert_eq!(neigh_state(&p.b, stranger, 1), None);
    assert_eq!(c(&p.b, counters::PEER_NEIGH_BAD), bad.len() as u64);
    assert_eq!(c(&p.b, counters::PEER_NEIGH_APPLIED), 1);
    assert_eq!(neigh_state(&p.b, GW_IP, 1), Some((State::Reachable, GW)));
}

#[test]
fn static_neighbours_are_not_moved_by_peers() {
    let n = [2, 0, 0, 0, 0xd0, 3];
    let ip = Ipv4Addr::new(10, 1, 1, 3);
    let mut r = router_with(&RouterConfig {
        neighbours: vec![NeighbourConfig {
            ip: ip.to_string(),
            mac: MacAddr(n).to_string(),
            vnic: None,
        }],
        ..cfg()
    });
    let mut rings = Rings::new();
    rings.give(0, &msg(1, ip, [2, 0, 0, 0, 0xee, 0xee]));
    rings.round(&mut r, 1, 2);
    assert_eq!(neigh_state(&r, ip, 1), Some((State::Static, n)));
    assert_eq!(c(&r, counters::PEER_NEIGH_APPLIED), 0);
}

/// What is told: a new or changed MAC, every reply to the router; not what
/// a peer told, nor a neighbour's requests repeating what is known; one
/// message per neighbour per round.
#[test]
fn what_is_told_and_what_is_not() {
    let mut p = Pair::new();
    // Learned from a peer: told to nobody.
    p.rb.give(0, &msg(1, GW_IP, GW));
    p.rb.round(&mut p.b, 1, 2);
    assert_eq!(c(&p.b, counters::PEER_NEIGH_APPLIED), 1);
    assert_eq!(p.b.peer.queued().count(), 0);
    p.rb.round(&mut p.b, 1, 2);
    assert_eq!(p.rb.sent(), [], "B echoes nothing");
    assert_eq!(c(&p.b, counters::PEER_NEIGH_SENT), 0);

    // The gateway asks A for its address: new to A, told.
    let ask = arp_request(GW, GW_IP, Ipv4Addr::new(10, 1, 1, 1));
    assert_eq!(run(&mut p.a, 1, &ask).0, Verdict::Forward(1));
    assert_eq!(p.a_to_b(), [(PeerDest::All, msg(1, GW_IP, GW))]);
    // Again, same MAC: not told.
    run(&mut p.a, 1, &ask);
    assert_eq!(p.a_to_b(), []);
    // Replies to the router are told every time, two in a round once.
    run(&mut p.a, 1, &gw_reply(GW));
    run(&mut p.a, 1, &gw_reply(GW));
    assert_eq!(p.a_to_b(), [(PeerDest::All, msg(1, GW_IP, GW))]);
    // A new MAC in a request: told.
    let gw2 = [2, 0, 0, 0, 0xb0, 0x22];
    let mut moved = ask.clone();
    moved[6..12].copy_from_slice(&gw2);
    moved[22..28].copy_from_slice(&gw2);
    run(&mut p.a, 1, &moved);
    assert_eq!(p.a_to_b(), [(PeerDest::All, msg(1, GW_IP, gw2))]);
    assert_eq!(neigh_state(&p.b, GW_IP, 1), Some((State::Reachable, gw2)));
    // A reply to another MAC (not ours) for a neighbour A does not know:
    // not told.
    let stray = arp(
        H0,
        [2, 0, 0, 0, 0, 9],
        EpArpOp::REPLY,
        H0,
        Ipv4Addr::new(10, 1, 1, 9),
        [2, 0, 0, 0, 0, 9],
        Ipv4Addr::new(10, 1, 1, 1),
    );
    run(&mut p.a, 1, &stray);
    assert_eq!(p.a_to_b(), []);
    assert_eq!(c(&p.a, counters::PEER_NEIGH_SENT), 3);
}

/// One instance (or a host that never calls the hook): nothing queued.
#[test]
fn alone_nothing_is_told() {
    let mut r = router();
    assert!(r.uses_peers(), "not known yet");
    run(&mut r, 1, &gw_reply(GW));
    assert_eq!(r.peer.queued().count(), 0);
    let mut rings = Rings::new();
    rings.round(&mut r, 0, 1);
    assert!(!r.uses_peers(), "alone: the runtime stops asking");
    run(&mut r, 1, &gw_reply([2, 0, 0, 0, 0xb0, 9]));
    assert_eq!(r.peer.queued().count(), 0);
    rings.round(&mut r, 0, 1);
    assert_eq!(rings.sent(), []);
}

proptest! {
    /// Any bytes from a peer: applied, ignored or counted, never a panic.
    #[test]
    fn any_message_is_safe(bytes in proptest::collection::vec(any::<u8>(), 0..=MAX_PAYLOAD),
                           kind_ok in any::<bool>()) {
        let mut r = router();
        let mut rings = Rings::new();
        run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(8, 8, 8, 8)));
        let mut bytes = bytes;
        if kind_ok && !bytes.is_empty() {
            bytes[0] = NEIGH_V1;
        }
        rings.give(0, &bytes);
        rings.round(&mut r, 1, 2);
        let (applied, bad) = (c(&r, counters::PEER_NEIGH_APPLIED), c(&r, counters::PEER_NEIGH_BAD));
        prop_assert!(applied + bad <= 1);
        prop_assert_eq!(bad == 1, NeighMsg::parse(&bytes).is_none_or(|m| !r.plausible(&m)));
        prop_assert_eq!(r.peer.queued().count(), 0);
    }
}
