//! IPv6 neighbour discovery: answers, learning, resolution of next hops,
//! unreachability, static neighbours, a solicitation captured from Linux.

use std::net::Ipv6Addr;

use vrhost_packet::testdata::{LINUX_NA, LINUX_NS};

use super::ipv6::*;
use super::*;

#[test]
fn solicitation_for_our_address_gets_a_solicited_advertisement() {
    let mut r = router6();
    let (v, out) = run(&mut r, 0, &ns_from_h0(R0_6));
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!((&out[0..6], &out[6..12]), (&H0[..], &R0[..]));
    let (ip, t, code, rest, body) = icmp6_of(&out);
    assert_eq!(addrs_hl(&ip), (R0_6, H0_6, 255));
    // Router, solicited, override; the target; its link-layer address.
    assert_eq!((t, code, rest), (136, 0, [0xe0, 0, 0, 0]));
    assert_eq!(&body[..16], &R0_6.octets());
    assert_eq!(&body[16..], &[2, 1, 2, 0, 0, 0, 0x10, 0]);
    assert_eq!(c(&r, counters::ND_ADVERTS), 1);
    // The sender was learned: a packet to it leaves without ND.
    assert_eq!(neigh6_state(&r, H0_6, 0), Some((State::Reachable, H0)));
    let (v, out) = run(&mut r, 1, &udp6(GW, R1, WORLD, H0_6, 9));
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!((&out[0..6], &out[6..12], out[21]), (&H0[..], &R0[..], 8));
    assert_eq!(c(&r, counters::ND_SOLICITS), 0);
}

#[test]
fn solicitations_the_router_does_not_answer() {
    let mut r = router6();
    // Hop limit other than 255: not from the link (RFC 4861 7.1.1).
    let mut ns = ns_from_h0(R0_6);
    ns[21] = 64;
    assert_eq!(run(&mut r, 0, &ns).0, Verdict::Drop(DropReason::BadHeader));
    // Another host's address: nothing learned from a stranger.
    let other: Ipv6Addr = "2001:db8::99".parse().unwrap();
    assert_eq!(
        run(&mut r, 0, &ns_from_h0(other)).0,
        Verdict::Drop(DropReason::Consumed)
    );
    assert_eq!(neigh6_state(&r, H0_6, 0), None);
    // vNIC 1's address asked on vNIC 0.
    assert_eq!(
        run(&mut r, 0, &ns_from_h0(R1_6)).0,
        Verdict::Drop(DropReason::Consumed)
    );
    // A zero-length option.
    let mut ns = ns_from_h0(R0_6);
    let n = ns.len();
    ns[n - 7] = 0;
    assert_eq!(run(&mut r, 0, &ns).0, Verdict::Drop(DropReason::BadHeader));
    // A router solicitation: ignored, the router sends no advertisements.
    let rs = nd(
        H0,
        [0x33, 0x33, 0, 0, 0, 2],
        H0_6,
        "ff02::2".parse().unwrap(),
        255,
        133,
        0,
        Ipv6Addr::UNSPECIFIED,
        None,
    );
    assert_eq!(
        run(&mut r, 0, &rs).0,
        Verdict::Drop(DropReason::LocalUnsupported)
    );
    assert_eq!(c(&r, counters::ND_ADVERTS), 0);
    // Duplicate address detection from `::`: answered to all nodes,
    // Solicited clear.
    let dad = nd(
        H0,
        solicited_mac(R0_6),
        Ipv6Addr::UNSPECIFIED,
        solicited(R0_6),
        255,
        135,
        0,
        R0_6,
        None,
    );
    let (v, out) = run(&mut r, 0, &dad);
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!(&out[0..6], &[0x33, 0x33, 0, 0, 0, 1]);
    let (ip, t, _, rest, _) = icmp6_of(&out);
    assert_eq!(
        Ipv6Addr::from(ip.destination()),
        Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)
    );
    assert_eq!((t, rest[0]), (136, 0xa0));
}

#[test]
fn unknown_next_hop_is_solicited_and_the_packet_released_on_the_advert() {
    let mut r = router6();
    let pkt = udp6_from_h0(WORLD);
    let (v, out) = run(&mut r, 0, &pkt);
    assert_eq!(v, Verdict::Forward(1));
    // The solicitation: to GW's solicited-node group, from vNIC 1's
    // address, hop limit 255, with R1 as source link-layer option.
    assert_eq!(
        (&out[0..6], &out[6..12]),
        (&solicited_mac(GW_6)[..], &R1[..])
    );
    let (ip, t, code, _, body) = icmp6_of(&out);
    assert_eq!(addrs_hl(&ip), (R1_6, solicited(GW_6), 255));
    assert_eq!((t, code), (135, 0));
    assert_eq!(&body[..16], &GW_6.octets());
    assert_eq!(&body[16..], &[1, 1, 2, 0, 0, 0, 0x10, 1]);
    assert_eq!(c(&r, counters::ND_SOLICITS), 1);
    // A second packet cannot wait too (one buffer per neighbour).
    assert_eq!(
        run(&mut r, 0, &udp6_from_h0(WORLD)).0,
        Verdict::Drop(DropReason::ArpUnresolved)
    );
    // The advertisement's slot carries the first packet out.
    at(&mut r, 3);
    let (v, out) = run(&mut r, 1, &gw6_advert(GW));
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!((&out[0..6], &out[6..12]), (&GW[..], &R1[..]));
    assert_eq!(out[21], 63);
    assert_eq!(&out[22..], &pkt[22..]);
    assert_eq!(c(&r, counters::ND_RELEASED), 1);
    assert_eq!(neigh6_state(&r, GW_6, 1), Some((State::Reachable, GW)));
    // Then packets go straight through.
    let (v, out) = run(&mut r, 0, &udp6_from_h0(WORLD));
    assert_eq!((v, &out[0..6]), (Verdict::Forward(1), &GW[..]));
    // An advertisement for a neighbour the router never asked about
    // creates nothing (RFC 4861 7.2.5).
    let stranger: Ipv6Addr = "2001:db8:1::77".parse().unwrap();
    let na = nd(GW, R1, stranger, R1_6, 255, 136, 0x20, stranger, Some(GW));
    assert_eq!(run(&mut r, 1, &na).0, Verdict::Drop(DropReason::Consumed));
    assert_eq!(neigh6_state(&r, stranger, 1), None);
}

#[test]
fn an_unanswered_neighbour_is_unreachable() {
    let mut r = router6();
    let silent: Ipv6Addr = "2001:db8:1::9".parse().unwrap();
    let pkt = udp6_from_h0(silent);
    // probes = 3 solicitations, retrans_ms = 100 apart.
    for (ms, sent) in [(0, 1), (100, 2), (200, 3)] {
        at(&mut r, ms);
        let (v, out) = run(&mut r, 0, &pkt);
        assert_eq!(v, Verdict::Forward(1), "{ms}");
        assert_eq!(&out[0..6], &solicited_mac(silent));
        assert_eq!(c(&r, counters::ND_SOLICITS), sent);
    }
    at(&mut r, 300);
    let (v, out) = run(&mut r, 0, &pkt);
    assert_eq!(v, Verdict::Forward(0));
    let (t, code, _) = error6_about(&pkt, &out);
    assert_eq!((t, code), (1, 3), "address unreachable");
    assert_eq!(c(&r, counters::ND_FAILED), 1);
    assert_eq!(c(&r, counters::ND_UNRES_DISCARDS), 3);
    // For failed_ms, packets get the error without asking again.
    at(&mut r, 900);
    let (_, out) = run(&mut r, 0, &pkt);
    assert_eq!(icmp6_of(&out).1, 1);
    assert_eq!(c(&r, counters::ND_SOLICITS), 3);
    // Then it is tried again.
    at(&mut r, 1400);
    let (v, out) = run(&mut r, 0, &pkt);
    assert_eq!(
        (v, &out[0..6]),
        (Verdict::Forward(1), &solicited_mac(silent)[..])
    );
}

#[test]
fn static_ipv6_neighbours_are_never_solicited() {
    let mut c6 = cfg6();
    c6.neighbours.push(NeighbourConfig {
        ip: GW_6.to_string(),
        mac: MacAddr(GW).to_string(),
        vnic: None,
    });
    let mut r = router_with(&c6);
    let (v, out) = run(&mut r, 0, &udp6_from_h0(WORLD));
    assert_eq!((v, &out[0..6]), (Verdict::Forward(1), &GW[..]));
    at(&mut r, 10_000_000);
    let (v, out) = run(&mut r, 0, &udp6_from_h0(WORLD));
    assert_eq!((v, &out[0..6]), (Verdict::Forward(1), &GW[..]));
    // An advertisement does not change it.
    run(&mut r, 1, &gw6_advert([2, 0, 0, 0, 0xee, 0xee]));
    assert_eq!(neigh6_state(&r, GW_6, 1), Some((State::Static, GW)));
    assert_eq!(c(&r, counters::ND_SOLICITS), 0);
}

#[test]
fn answers_a_linux_solicitation_as_linux_does_plus_the_router_flag() {
    let c = RouterConfig {
        vnics: vec![VnicConfig {
            mac: "02:00:00:00:00:0b".into(),
            addrs: vec!["2001:db8::b/64".into()],
            mtu: None,
        }],
        ..RouterConfig::default()
    };
    let mut r = router_with(&c);
    let (v, out) = run(&mut r, 0, &LINUX_NS);
    assert_eq!(v, Verdict::Forward(0));
    // Linux's answer byte for byte, but for the Router flag (0x80, a host
    // does not set it) and so the checksum: the sum gains 0x8000, the
    // checksum loses it.
    let mut want = LINUX_NA;
    want[58] = 0xe0;
    want[56..58].copy_from_slice(&(0xba85u16 - 0x8000).to_be_bytes());
    assert_eq!(out, want);
    icmp6_of(&out);
    let ll: Ipv6Addr = "fe80::ff:fe00:a".parse().unwrap();
    assert_eq!(
        neigh6_state(&r, ll, 0),
        Some((State::Reachable, [2, 0, 0, 0, 0, 0x0a]))
    );
}
