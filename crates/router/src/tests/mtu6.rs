//! IPv6 packet too big: a vNIC's `mtu` against the packets forwarded out
//! of it, whatever the kind of next hop; the error's MTU, quote and rate
//! limit; MTUs the config refuses.

use std::net::Ipv6Addr;

use super::ipv6::{FAR, H0_6, R0_6, WORLD, cfg6, icmp6_of};
use super::*;

/// `cfg6` with vNIC 1's MTU at `mtu`.
fn cfg_mtu(mtu: u16) -> RouterConfig {
    let mut c = cfg6();
    c.vnics[1].mtu = Some(mtu);
    c
}

/// UDP from the host on vNIC 0 to `dst`, an IPv6 packet of `len` bytes.
fn udp6_len(dst: Ipv6Addr, len: usize) -> Vec<u8> {
    let data = vec![0x5a; len - 48];
    frame(H0, R0, Ip::V6(H0_6, dst, 64), L4::Udp(&data))
}

#[test]
fn larger_than_the_out_mtu_gets_packet_too_big_with_the_mtu() {
    let mut r = router_with(&cfg_mtu(1280));
    // 1280 bytes fit (static next hop FAR, out of vNIC 1).
    let (v, out) = run(&mut r, 0, &udp6_len(FAR, 1280));
    assert_eq!((v, out[21]), (Verdict::Forward(1), 63));
    // 1281 do not: the error goes back where the packet came from.
    let pkt = udp6_len(FAR, 1281);
    let (v, out) = run(&mut r, 0, &pkt);
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!((&out[0..6], &out[6..12]), (&H0[..], &R0[..]));
    let (ip, t, code, rest, quoted) = icmp6_of(&out);
    assert_eq!((t, code), (2, 0));
    assert_eq!(u32::from_be_bytes(rest), 1280);
    assert_eq!(
        (
            Ipv6Addr::from(ip.source()),
            Ipv6Addr::from(ip.destination())
        ),
        (R0_6, H0_6)
    );
    // As much of the packet as fits in 1280 bytes, unchanged (hop limit
    // not decremented).
    assert_eq!(quoted, &pkt[14..14 + 1280 - 48]);
    // Through the one-by-one path, and to a connected neighbour (resolved
    // by ND) as to a gateway: the check comes before resolution.
    let (v, out) = run_one(&mut r, 0, &udp6_len("2001:db8:1::9".parse().unwrap(), 1400));
    assert_eq!((v, icmp6_of(&out).1), (Verdict::Forward(0), 2));
    let (v, out) = run(&mut r, 0, &udp6_len(WORLD, 1500));
    assert_eq!((v, icmp6_of(&out).1), (Verdict::Forward(0), 2));
    assert_eq!(c(&r, counters::ICMP6_PACKET_TOO_BIG), 3);
    assert_eq!(c(&r, counters::ND_SOLICITS), 0, "nothing was resolved");
    // vNIC 0 has no MTU: a large packet the other way gets no error
    // (it waits for its neighbour's resolution).
    let back = frame(GW, R1, Ip::V6(FAR, H0_6, 64), L4::Udp(&[1; 1400]));
    run(&mut r, 1, &back);
    assert_eq!(c(&r, counters::ICMP6_PACKET_TOO_BIG), 3);
    assert_eq!(c(&r, counters::ND_SOLICITS), 1);
}

#[test]
fn packet_too_big_is_rate_limited_and_never_about_an_icmpv6_error() {
    let mut c6 = cfg_mtu(1280);
    c6.icmp = IcmpConfig { rate: 1, burst: 1 };
    let mut r = router_with(&c6);
    let pkt = udp6_len(FAR, 1400);
    assert_eq!(run(&mut r, 0, &pkt).0, Verdict::Forward(0));
    assert_eq!(run(&mut r, 0, &pkt).0, Verdict::Drop(DropReason::Other));
    assert_eq!(c(&r, counters::ICMP6_RATE_LIMITED), 1);
    assert_eq!(c(&r, counters::ICMP6_PACKET_TOO_BIG), 1);
    // A large ICMPv6 error to forward: dropped, no error about it.
    at(&mut r, 10_000);
    let err = frame(
        H0,
        R0,
        Ip::V6(H0_6, FAR, 64),
        L4::Icmp(1, 0, [0; 4], &[7; 1400]),
    );
    assert_eq!(run(&mut r, 0, &err).0, Verdict::Drop(DropReason::Other));
    assert_eq!(c(&r, counters::ICMP6_PACKET_TOO_BIG), 1);
}

#[test]
fn an_mtu_below_ipv6_minimum_is_refused() {
    let e = Router::new(&cfg_mtu(1279)).unwrap_err();
    assert!(e.contains("vnics[1].mtu 1279: must be 1280..=65535"), "{e}");
    assert!(Router::new(&cfg_mtu(9000)).is_ok());
}
