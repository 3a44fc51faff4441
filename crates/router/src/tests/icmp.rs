//! ICMP: echo replies, errors, their limits.

use super::*;

#[test]
fn echo_request_gets_a_valid_reply() {
    let mut r = router();
    // TTL 1 is fine for the router itself; 10.1.1.1 is vNIC 1's, asked on 0.
    for (dst, ttl) in [
        (Ipv4Addr::new(10, 1, 0, 1), 1),
        (Ipv4Addr::new(10, 1, 1, 1), 64),
    ] {
        let req = echo(H0, R0, H0_IP, dst, ttl);
        let (v, out) = run(&mut r, 0, &req);
        assert_eq!(v, Verdict::Forward(0));
        assert_eq!((&out[0..6], &out[6..12]), (&H0[..], &R0[..]));
        let (ip, icmp) = icmp_of(&out);
        assert_eq!(
            (ip.source_addr(), ip.destination_addr(), ip.ttl()),
            (dst, H0_IP, 64)
        );
        assert_eq!((icmp.type_u8(), icmp.code_u8()), (0, 0));
        assert_eq!(&out[34 + 4..], &req[34 + 4..], "id, seq and data echoed");
        assert_eq!(out.len(), req.len());
    }
    assert_eq!(c(&r, counters::ICMP_ECHO_REPLIES), 2);
}

#[test]
fn echo_with_ip_options_is_answered_without_them() {
    let mut r = router();
    let req = echo(H0, R0, H0_IP, Ipv4Addr::new(10, 1, 0, 1), 64);
    // Insert 4 bytes of options (NOP x 3, EOL), fix IHL, length, checksum.
    let mut f = req[..34].to_vec();
    f.extend_from_slice(&[1, 1, 1, 0]);
    f.extend_from_slice(&req[34..]);
    f[14] = 0x46;
    let total = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    vrhost_packet::ipv4::Ipv4Packet::new_unchecked(&mut f[14..]).fill_checksum();
    let (v, out) = run(&mut r, 0, &f);
    assert_eq!(v, Verdict::Forward(0));
    let (ip, icmp) = icmp_of(&out);
    assert_eq!(ip.ihl(), 5);
    assert_eq!(icmp.type_u8(), 0);
    assert_eq!(&out[38..], &req[38..]);
}

#[test]
fn other_local_traffic_is_dropped_by_reason() {
    let mut r = router();
    let us = Ipv4Addr::new(10, 1, 0, 1);
    let mut bad = echo(H0, R0, H0_IP, us, 64);
    bad[40] ^= 0xff; // ICMP data: checksum no longer verifies
    assert_eq!(
        run(&mut r, 0, &bad).0,
        Verdict::Drop(DropReason::BadChecksum)
    );
    let cases = [
        udp_ttl(H0, R0, H0_IP, us, 64),                         // UDP to us
        echo(H0, R0, H0_IP, Ipv4Addr::new(10, 1, 0, 255), 64),  // subnet broadcast
        echo(H0, [0xff; 6], H0_IP, us, 64),                     // link broadcast
        udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(224, 0, 0, 5), 1), // multicast
        udp_ttl(H0, R0, H0_IP, Ipv4Addr::BROADCAST, 64),        // limited broadcast
    ];
    for f in cases {
        assert_eq!(
            run(&mut r, 0, &f).0,
            Verdict::Drop(DropReason::LocalUnsupported)
        );
    }
    let zero_src = udp_ttl(H0, R0, Ipv4Addr::UNSPECIFIED, Ipv4Addr::new(8, 8, 8, 8), 64);
    assert_eq!(
        run(&mut r, 0, &zero_src).0,
        Verdict::Drop(DropReason::BadHeader)
    );
    assert_eq!(c(&r, counters::ICMP_ECHO_REPLIES), 0);
}

/// An ICMP error about `pkt` (from H0 on vNIC 0): checks and returns
/// (type, code).
fn check_error_about(pkt: &[u8], out: &[u8]) -> (u8, u8) {
    assert_eq!((&out[0..6], &out[6..12]), (&H0[..], &R0[..]));
    let (ip, icmp) = icmp_of(out);
    assert_eq!(
        ip.source_addr(),
        Ipv4Addr::new(10, 1, 0, 1),
        "the out vNIC's address"
    );
    assert_eq!(ip.destination_addr(), H0_IP);
    assert_eq!(ip.ttl(), 64);
    assert_eq!(ip.dcp().value(), 0x30);
    // RFC 792: the IP header and 64 bits of the datagram, as received.
    assert_eq!(icmp.payload(), &pkt[14..14 + 20 + 8]);
    assert_eq!(icmp.bytes5to8(), [0; 4]);
    assert_eq!(out.len(), 14 + 20 + 8 + 28);
    (icmp.type_u8(), icmp.code_u8())
}

#[test]
fn ttl_1_gets_time_exceeded_quoting_the_header() {
    for off in [128, 0, 10] {
        let mut r = router();
        let pkt = udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(192, 0, 2, 9), 1);
        let (v, out) = run_at(&mut r, 0, &pkt, off);
        assert_eq!(v, Verdict::Forward(0), "headroom {off}");
        assert_eq!(check_error_about(&pkt, &out), (11, 0));
        assert_eq!(c(&r, counters::ICMP_TIME_EXCEEDED), 1);
    }
    // TTL 0 too; TTL 2 is forwarded.
    let mut r = router();
    let pkt = udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(192, 0, 2, 9), 0);
    assert_eq!(check_error_about(&pkt, &run(&mut r, 0, &pkt).1), (11, 0));
    let (v, out) = run(
        &mut r,
        0,
        &udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(192, 0, 2, 9), 2),
    );
    assert_eq!(
        (v, &out[0..6], out[22]),
        (Verdict::Forward(1), &SINK[..], 1)
    );
}

#[test]
fn no_route_gets_net_unreachable() {
    let mut r = router_with(&RouterConfig {
        routes: vec![],
        ..cfg()
    });
    let pkt = udp_from_h0(Ipv4Addr::new(203, 0, 113, 5));
    let (v, out) = run(&mut r, 0, &pkt);
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!(check_error_about(&pkt, &out), (3, 0));
    assert_eq!(c(&r, counters::ICMP_NET_UNREACHABLE), 1);
    // A short datagram quotes what there is.
    let mut short = vec![];
    PacketBuilder::ethernet2(H0, R0)
        .ipv4(H0_IP.octets(), [203, 0, 113, 5], 64)
        .write(&mut short, etherparse::IpNumber(253), &[1, 2, 3])
        .unwrap();
    let (v, out) = run(&mut r, 0, &short);
    assert_eq!(v, Verdict::Forward(0));
    let (_, icmp) = icmp_of(&out);
    assert_eq!(icmp.payload(), &short[14..]);
}

#[test]
fn icmp_errors_are_rate_limited() {
    let mut r = router();
    let pkt = udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(192, 0, 2, 9), 1);
    let sent = |r: &mut Router, n: usize| {
        (0..n)
            .filter(|_| match run(r, 0, &pkt).0 {
                Verdict::Forward(_) => true,
                v => {
                    assert_eq!(v, Verdict::Drop(DropReason::TtlExpired));
                    false
                }
            })
            .count()
    };
    assert_eq!(sent(&mut r, 30), 10, "the burst");
    assert_eq!(c(&r, counters::ICMP_RATE_LIMITED), 20);
    at(&mut r, 9);
    assert_eq!(sent(&mut r, 5), 0);
    at(&mut r, 10);
    assert_eq!(sent(&mut r, 5), 1, "100 per second");
    at(&mut r, 60_000);
    assert_eq!(sent(&mut r, 30), 10, "never more than the burst");
    // Echo replies are not limited.
    let e = echo(H0, R0, H0_IP, Ipv4Addr::new(10, 1, 0, 1), 64);
    assert!((0..50).all(|_| run(&mut r, 0, &e).0 == Verdict::Forward(0)));
}

#[test]
fn no_icmp_error_about_errors_or_later_fragments() {
    let mut r = router();
    let far = Ipv4Addr::new(192, 0, 2, 9);
    // A destination unreachable in transit with TTL 1: dropped silently.
    let mut err = vec![];
    PacketBuilder::ethernet2(H0, R0)
        .ipv4(H0_IP.octets(), far.octets(), 1)
        .icmpv4(etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::Host,
        ))
        .write(&mut err, &[0x45; 28])
        .unwrap();
    assert_eq!(
        run(&mut r, 0, &err).0,
        Verdict::Drop(DropReason::TtlExpired)
    );
    // An unknown type counts as an error.
    let mut unknown = err.clone();
    unknown[34] = 42;
    assert_eq!(
        run(&mut r, 0, &unknown).0,
        Verdict::Drop(DropReason::TtlExpired)
    );
    // An echo request is no error: it gets one.
    let (v, out) = run(&mut r, 0, &echo(H0, R0, H0_IP, far, 1));
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!(icmp_of(&out).1.type_u8(), 11);
    // A later fragment: silence; the first fragment: an error.
    let mut frag = udp_ttl(H0, R0, H0_IP, far, 1);
    frag[20..22].copy_from_slice(&185u16.to_be_bytes());
    vrhost_packet::ipv4::Ipv4Packet::new_unchecked(&mut frag[14..]).fill_checksum();
    assert_eq!(
        run(&mut r, 0, &frag).0,
        Verdict::Drop(DropReason::TtlExpired)
    );
    frag[20..22].copy_from_slice(&0x2000u16.to_be_bytes());
    vrhost_packet::ipv4::Ipv4Packet::new_unchecked(&mut frag[14..]).fill_checksum();
    assert_eq!(run(&mut r, 0, &frag).0, Verdict::Forward(0));
    assert_eq!(c(&r, counters::ICMP_TIME_EXCEEDED), 2);
}

#[test]
fn errors_go_back_by_the_route_to_the_source() {
    let mut r = router();
    // From the gateway's side (source beyond it, default route): back out
    // of vNIC 1 to the frame's source, from vNIC 1's address.
    let pkt = udp_ttl(
        GW,
        R1,
        Ipv4Addr::new(198, 18, 0, 1),
        Ipv4Addr::new(10, 1, 0, 50),
        1,
    );
    let (v, out) = run(&mut r, 1, &pkt);
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!((&out[0..6], &out[6..12]), (&GW[..], &R1[..]));
    let (ip, _) = icmp_of(&out);
    assert_eq!(ip.source_addr(), Ipv4Addr::new(10, 1, 1, 1));
    // A source whose way back is another vNIC with no known MAC: nothing.
    let pkt = udp_ttl(
        H0,
        R0,
        Ipv4Addr::new(198, 18, 0, 1),
        Ipv4Addr::new(192, 0, 2, 9),
        1,
    );
    assert_eq!(
        run(&mut r, 0, &pkt).0,
        Verdict::Drop(DropReason::TtlExpired)
    );
    // A router without addresses has no source for errors: drops, as
    // before ARP and ICMP existed.
    let mut bare = router_with(&RouterConfig {
        vnics: cfg()
            .vnics
            .into_iter()
            .map(|v| VnicConfig { addrs: vec![], ..v })
            .collect(),
        routes: vec![route_to("10.0.0.0/8", 0)],
        ..cfg()
    });
    let pkt = udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(10, 2, 0, 1), 1);
    assert_eq!(
        run(&mut bare, 0, &pkt).0,
        Verdict::Drop(DropReason::TtlExpired)
    );
    let pkt = udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(11, 0, 0, 1), 9);
    assert_eq!(
        run(&mut bare, 0, &pkt).0,
        Verdict::Drop(DropReason::NoRoute)
    );
}
