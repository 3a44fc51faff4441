//! ARP: answers, learning, resolution, aging, static neighbours.

use super::*;

#[test]
fn arp_request_is_answered_in_place_byte_for_byte() {
    let mut r = router();
    let mut req = arp_request(H0, H0_IP, Ipv4Addr::new(10, 1, 0, 1));
    req.resize(60, 0); // padded by the host's NIC
    let (v, out) = run(&mut r, 0, &req);
    assert_eq!(v, Verdict::Forward(0));
    #[rustfmt::skip]
    let expected: [u8; 42] = [
        2, 0, 0, 0, 0xa0, 7,  2, 0, 0, 0, 0x10, 0,  0x08, 0x06, // to H0, from R0
        0, 1, 0x08, 0, 6, 4, 0, 2,                              // Ethernet/IPv4, reply
        2, 0, 0, 0, 0x10, 0,  10, 1, 0, 1,                      // R0 has 10.1.0.1
        2, 0, 0, 0, 0xa0, 7,  10, 1, 0, 7,                      // to H0, 10.1.0.7
    ];
    assert_eq!(out, expected);
    assert_eq!(c(&r, counters::ARP_REPLIES), 1);
    // The asker was learned: a packet to it leaves without ARP.
    assert_eq!(neigh_state(&r, H0_IP, 0), Some((State::Reachable, H0)));
    let (v, out) = run(
        &mut r,
        1,
        &udp_ttl(GW, R1, Ipv4Addr::new(8, 8, 8, 8), H0_IP, 9),
    );
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!((&out[0..6], &out[6..12], out[22]), (&H0[..], &R0[..], 8));
    assert_eq!(c(&r, counters::ARP_REQUESTS), 0);
}

#[test]
fn arp_for_others_or_other_vnics_is_not_answered() {
    let mut r = router();
    // 10.1.1.1 belongs to vNIC 1; asked on vNIC 0 (Linux arp_ignore=1).
    let q = arp_request(H0, H0_IP, Ipv4Addr::new(10, 1, 1, 1));
    assert_eq!(run(&mut r, 0, &q).0, Verdict::Drop(DropReason::Consumed));
    // Someone else's address: nothing learned from a stranger.
    let q = arp_request(H0, H0_IP, Ipv4Addr::new(10, 1, 0, 99));
    assert_eq!(run(&mut r, 0, &q).0, Verdict::Drop(DropReason::Consumed));
    assert_eq!(neigh_state(&r, H0_IP, 0), None);
    // An unsolicited reply does not create an entry either (arp_accept=0).
    let q = arp(
        H0,
        R0,
        EpArpOp::REPLY,
        H0,
        H0_IP,
        R0,
        Ipv4Addr::new(10, 1, 0, 1),
    );
    assert_eq!(run(&mut r, 0, &q).0, Verdict::Drop(DropReason::Consumed));
    assert_eq!(neigh_state(&r, H0_IP, 0), None);
    assert_eq!(c(&r, counters::ARP_REPLIES), 0);
}

#[test]
fn arp_probe_from_0_0_0_0_is_answered_but_not_learned() {
    let mut r = router();
    // RFC 5227: a host checking whether 10.1.0.1 is taken. It is.
    let q = arp_request(H0, Ipv4Addr::UNSPECIFIED, Ipv4Addr::new(10, 1, 0, 1));
    let (v, out) = run(&mut r, 0, &q);
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!(&out[38..42], &[0, 0, 0, 0]);
    assert_eq!(c(&r, counters::ARP_LEARNED), 0);
}

#[test]
fn malformed_arp_is_counted_by_reason() {
    let mut r = router();
    let good = arp_request(H0, H0_IP, Ipv4Addr::new(10, 1, 0, 1));
    let drop = |r: &mut Router, f: &[u8]| run(r, 0, f).0;
    assert_eq!(
        drop(&mut r, &good[..41]),
        Verdict::Drop(DropReason::BadHeader)
    );
    assert_eq!(
        drop(&mut r, &good[..20]),
        Verdict::Drop(DropReason::BadHeader)
    );
    let mut f = good.clone();
    f[18] = 8; // hardware address length
    assert_eq!(drop(&mut r, &f), Verdict::Drop(DropReason::BadHeader));
    let mut f = good.clone();
    f[15] = 6; // IEEE 802 hardware
    assert_eq!(drop(&mut r, &f), Verdict::Drop(DropReason::Unsupported));
    let mut f = good.clone();
    f[21] = 3; // RARP request
    assert_eq!(drop(&mut r, &f), Verdict::Drop(DropReason::Unsupported));
    let mut f = good.clone();
    f[22] |= 1; // group sender MAC
    assert_eq!(drop(&mut r, &f), Verdict::Drop(DropReason::BadHeader));
    // On a vNIC the router does not have.
    assert_eq!(
        run(&mut r, 7, &good).0,
        Verdict::Drop(DropReason::Unsupported)
    );
    assert_eq!(c(&r, counters::ARP_REPLIES), 0);
    assert_eq!(drop(&mut r, &good), Verdict::Forward(0));
}

#[test]
fn unresolved_next_hop_sends_a_request_then_the_packet() {
    let mut r = router();
    let pkt = udp_from_h0(Ipv4Addr::new(8, 8, 8, 8));
    let (v, out) = run(&mut r, 0, &pkt);
    assert_eq!(
        v,
        Verdict::Forward(1),
        "the request leaves by the route's vNIC"
    );
    assert_eq!(out, request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), GW_IP));
    assert_eq!(c(&r, counters::ARP_REQUESTS), 1);
    // A second packet before the reply cannot wait too (one buffer).
    let (v, _) = run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(8, 8, 4, 4)));
    assert_eq!(v, Verdict::Drop(DropReason::ArpUnresolved));
    // The reply's slot carries the first packet out, MACs set, TTL - 1.
    at(&mut r, 3);
    let (v, out) = run(&mut r, 1, &gw_reply(GW));
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(out.len(), pkt.len());
    assert_eq!((&out[0..6], &out[6..12]), (&GW[..], &R1[..]));
    assert_eq!(out[22], 63);
    let ip = Ipv4HeaderSlice::from_slice(&out[14..]).unwrap();
    assert_eq!(ip.header_checksum(), ip.to_header().calc_header_checksum());
    assert_eq!((&out[12..22], out[23]), (&pkt[12..22], pkt[23]));
    assert_eq!(&out[26..], &pkt[26..], "addresses and payload untouched");
    assert_eq!(c(&r, counters::ARP_RELEASED), 1);
    assert_eq!(neigh_state(&r, GW_IP, 1), Some((State::Reachable, GW)));
    assert_eq!(r.neigh.free_buffers(), 64);
    // Resolved: straight through.
    let (v, out) = run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(9, 9, 9, 9)));
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(&out[0..6], &GW[..]);
    assert_eq!(c(&r, counters::ARP_REQUESTS), 1);
}

#[test]
fn connected_hosts_are_resolved_too() {
    let mut r = router();
    let dst = Ipv4Addr::new(10, 9, 3, 4); // the second subnet of vNIC 1
    let (v, out) = run(&mut r, 0, &udp_from_h0(dst));
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(
        out,
        request_bytes(R1, Ipv4Addr::new(10, 9, 0, 1), dst),
        "from the address in its subnet"
    );
    let host = [2, 0, 0, 0, 0xc0, 4];
    let reply = reply_on_1(host, dst, Ipv4Addr::new(10, 9, 0, 1));
    let (v, out) = run(&mut r, 1, &reply);
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(&out[0..6], &host[..]);
    assert_eq!(&out[30..34], &dst.octets());
}

#[test]
fn retries_then_host_unreachable() {
    let mut r = router();
    let dst = Ipv4Addr::new(10, 1, 1, 60);
    let send = |r: &mut Router, ms: u64| {
        at(r, ms);
        run(r, 0, &udp_from_h0(dst))
    };
    assert_eq!(send(&mut r, 0).0, Verdict::Forward(1));
    assert_eq!(send(&mut r, 50).0, Verdict::Drop(DropReason::ArpUnresolved));
    let (v, out) = send(&mut r, 100);
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(out, request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), dst));
    assert_eq!(
        c(&r, counters::ARP_UNRES_DISCARDS),
        1,
        "the older packet made room"
    );
    assert_eq!(send(&mut r, 250).0, Verdict::Forward(1));
    assert_eq!(c(&r, counters::ARP_REQUESTS), 3);
    // Three requests unanswered: give up, host unreachable to the sender.
    let (v, out) = send(&mut r, 350);
    assert_eq!(v, Verdict::Forward(0));
    let (ip, icmp) = icmp_of(&out);
    assert_eq!((icmp.type_u8(), icmp.code_u8()), (3, 1));
    assert_eq!(ip.destination_addr(), H0_IP);
    assert_eq!(ip.source_addr(), Ipv4Addr::new(10, 1, 0, 1));
    assert_eq!(c(&r, counters::ARP_FAILED), 1);
    assert_eq!(c(&r, counters::ARP_UNRES_DISCARDS), 3);
    assert_eq!(c(&r, counters::ICMP_HOST_UNREACHABLE), 1);
    assert_eq!(r.neigh.free_buffers(), 64);
    // Failed for a second: answered at once, no more requests.
    assert_eq!(send(&mut r, 900).0, Verdict::Forward(0));
    assert_eq!(c(&r, counters::ARP_REQUESTS), 3);
    // Then tried again.
    let (v, out) = send(&mut r, 1350);
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(out, request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), dst));
    // Without ICMP (rate 0), a failure is a counted drop.
    let mut q = router_with(&RouterConfig {
        icmp: IcmpConfig { rate: 0, burst: 0 },
        ..cfg()
    });
    for ms in [0, 100, 200] {
        at(&mut q, ms);
        assert_eq!(run(&mut q, 0, &udp_from_h0(dst)).0, Verdict::Forward(1));
    }
    at(&mut q, 300);
    assert_eq!(
        run(&mut q, 0, &udp_from_h0(dst)).0,
        Verdict::Drop(DropReason::HostUnreachable)
    );
    assert_eq!(c(&q, counters::ICMP_RATE_LIMITED), 1);
}

#[test]
fn entries_age_and_are_confirmed_while_traffic_flows() {
    let mut r = router();
    let to = |r: &mut Router, ms: u64| {
        at(r, ms);
        run(r, 0, &udp_from_h0(Ipv4Addr::new(8, 8, 8, 8)))
    };
    to(&mut r, 0);
    at(&mut r, 1);
    run(&mut r, 1, &gw_reply(GW));
    assert_eq!(&to(&mut r, 30_000).1[0..6], &GW[..], "reachable for 30 s");
    // Reachable time over: this packet's slot confirms the MAC.
    let (v, out) = to(&mut r, 30_001);
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(out, request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), GW_IP));
    // Meanwhile packets still go to the known MAC.
    let (v, out) = to(&mut r, 30_002);
    assert_eq!((v, &out[0..6]), (Verdict::Forward(1), &GW[..]));
    assert_eq!(neigh_state(&r, GW_IP, 1).unwrap().0, State::Probe);
    // The gateway answers from a new MAC: the waiting packet goes there.
    let gw2 = [2, 0, 0, 0, 0xb0, 0x22];
    at(&mut r, 30_005);
    let (v, out) = run(&mut r, 1, &gw_reply(gw2));
    assert_eq!(
        (v, &out[0..6], out[22]),
        (Verdict::Forward(1), &gw2[..], 63)
    );
    assert_eq!(&to(&mut r, 30_006).1[0..6], &gw2[..]);
    // No answer this time: requests every 100 ms, then failed.
    assert_eq!(
        to(&mut r, 60_006).1,
        request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), GW_IP)
    );
    assert_eq!(&to(&mut r, 60_050).1[0..6], &gw2[..]);
    assert_eq!(
        to(&mut r, 60_106).1,
        request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), GW_IP)
    );
    assert_eq!(
        to(&mut r, 60_206).1,
        request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), GW_IP)
    );
    let (v, out) = to(&mut r, 60_306);
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!(icmp_of(&out).1.code_u8(), 1, "host unreachable");
    assert_eq!(neigh_state(&r, GW_IP, 1).unwrap().0, State::Failed);
}

#[test]
fn static_neighbours_never_age_nor_change() {
    let n = [2, 0, 0, 0, 0xd0, 3];
    let mut r = router_with(&RouterConfig {
        neighbours: vec![NeighbourConfig {
            ip: "10.1.1.3".into(),
            mac: MacAddr(n).to_string(),
            vnic: None,
        }],
        routes: vec![route_via("198.51.100.0/24", "10.1.1.3")],
        ..cfg()
    });
    let dst = Ipv4Addr::new(198, 51, 100, 1);
    for ms in [0, 31_000, 10 * 86_400_000] {
        at(&mut r, ms);
        let (v, out) = run(&mut r, 0, &udp_from_h0(dst));
        assert_eq!(
            (v, &out[0..6], &out[6..12]),
            (Verdict::Forward(1), &n[..], &R1[..])
        );
    }
    // An ARP packet claiming the address does not move it.
    let liar = [2, 0, 0, 0, 0xee, 0xee];
    let q = arp_request(liar, Ipv4Addr::new(10, 1, 1, 3), Ipv4Addr::new(10, 1, 1, 1));
    assert_eq!(run(&mut r, 1, &q).0, Verdict::Forward(1), "answered");
    assert_eq!(&run(&mut r, 0, &udp_from_h0(dst)).1[0..6], &n[..]);
    assert_eq!(c(&r, counters::ARP_REQUESTS), 0);
}

#[test]
fn gateway_next_hops_in_the_original_list() {
    // nexthops by address: the route file's routes can use ARP too.
    let mut r = router_with(&RouterConfig {
        nexthops: vec![NextHopConfig {
            vnic: 1,
            via: Some(GW_IP.to_string()),
            ..NextHopConfig::default()
        }],
        routes: vec![route_to("192.0.2.0/24", 0)],
        ..cfg()
    });
    let (v, out) = run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(192, 0, 2, 1)));
    assert_eq!(
        (v, out),
        (
            Verdict::Forward(1),
            request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), GW_IP)
        )
    );
    let (v, out) = run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(8, 8, 8, 8)));
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!(icmp_of(&out).1.type_u8(), 3, "net unreachable");
}
