//! IPv6: forwarding, ICMPv6 errors and echo, extension headers,
//! multicast and link-local rules, rate limits, routes, and the IPv6
//! table against the FIB's naive reference (neighbour discovery is in
//! `nd.rs`, with the helpers here). Frames are built and checked with
//! etherparse (checksums included), independently of `vrhost-packet`.

use std::net::Ipv6Addr;

use etherparse::{Icmpv6Slice, Ipv6HeaderSlice};
use vrhost_fib::Lpm;
use vrhost_fib::reference::NaiveLpm;

use super::*;

/// What the IPv6 echo requests carry.
const ECHO_DATA6: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// The host on vNIC 0.
pub(super) const H0_6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7);
/// The router's addresses on vNIC 0 and 1.
pub(super) const R0_6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub(super) const R0_LL: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
pub(super) const R1_6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
/// The default gateway on vNIC 1.
pub(super) const GW_6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
/// Behind the next hop of the original form (SINK, static MAC).
pub(super) const FAR: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x99, 0, 0, 0, 0, 5);
/// Behind the default gateway.
pub(super) const WORLD: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x5, 0, 0, 0, 0, 1);

pub(super) fn cfg6() -> RouterConfig {
    let mut c = cfg();
    c.vnics[0]
        .addrs
        .extend(["2001:db8::1/64".to_string(), "fe80::1/64".to_string()]);
    c.vnics[1].addrs.push("2001:db8:1::1/64".into());
    c.routes.push(route_via("::/0", GW_6));
    c.routes.push(route_to("2001:db8:99::/48", 0));
    c
}

pub(super) fn router6() -> Router {
    router_with(&cfg6())
}

/// UDP with 58 bytes of data (as [`udp_ttl`] for IPv4).
pub(super) fn udp6(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hl: u8,
) -> Vec<u8> {
    frame(src_mac, dst_mac, Ip::V6(src, dst, hl), L4::Udp(&[0x5a; 58]))
}

/// UDP from the host on vNIC 0 to `dst`, hop limit 64.
pub(super) fn udp6_from_h0(dst: Ipv6Addr) -> Vec<u8> {
    udp6(H0, R0, H0_6, dst, 64)
}

/// An echo request (as [`echo`] for IPv4).
pub(super) fn echo6(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hl: u8,
) -> Vec<u8> {
    echo_request(src_mac, dst_mac, Ip::V6(src, dst, hl), ECHO_DATA6)
}

/// An ND message (type 135 or 136, `flags` in the first byte after the
/// checksum) for `target` with a link-layer address option of `ll`
/// (option type 1 for a solicitation, 2 for an advertisement).
#[expect(clippy::too_many_arguments, reason = "the fields of three headers")]
pub(super) fn nd(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hl: u8,
    msg_type: u8,
    flags: u8,
    target: Ipv6Addr,
    ll: Option<[u8; 6]>,
) -> Vec<u8> {
    let mut body = target.octets().to_vec();
    if let Some(mac) = ll {
        body.extend_from_slice(&[if msg_type == 135 { 1 } else { 2 }, 1]);
        body.extend_from_slice(&mac);
    }
    frame(
        src_mac,
        dst_mac,
        Ip::V6(src, dst, hl),
        L4::Icmp(msg_type, 0, [flags, 0, 0, 0], &body),
    )
}

pub(super) fn solicited(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

pub(super) fn solicited_mac(a: Ipv6Addr) -> [u8; 6] {
    let o = a.octets();
    [0x33, 0x33, 0xff, o[13], o[14], o[15]]
}

/// The neighbour solicitation from H0 for `target`, to its solicited-node
/// group.
pub(super) fn ns_from_h0(target: Ipv6Addr) -> Vec<u8> {
    nd(
        H0,
        solicited_mac(target),
        H0_6,
        solicited(target),
        255,
        135,
        0,
        target,
        Some(H0),
    )
}

/// The advertisement of the gateway (at `mac`) answering the router.
pub(super) fn gw6_advert(mac: [u8; 6]) -> Vec<u8> {
    nd(mac, R1, GW_6, R1_6, 255, 136, 0x60, GW_6, Some(mac))
}

/// Check the ICMPv6 message of `frame` with etherparse (checksum over the
/// pseudo-header) and return the IPv6 header, the message's type, code,
/// bytes 4..8 and what follows them.
pub(super) fn icmp6_of(frame: &[u8]) -> (Ipv6HeaderSlice<'_>, u8, u8, [u8; 4], &[u8]) {
    assert_eq!(&frame[12..14], &[0x86, 0xdd], "IPv6 frame");
    let ip = Ipv6HeaderSlice::from_slice(&frame[14..]).unwrap();
    assert_eq!(ip.next_header(), etherparse::IpNumber::IPV6_ICMP);
    let plen = usize::from(ip.payload_length());
    assert_eq!(frame.len(), 14 + 40 + plen, "frame is the IPv6 packet");
    let msg = &frame[54..];
    let s = Icmpv6Slice::from_slice(msg).unwrap();
    let h = s.header();
    let sum = h
        .icmp_type
        .calc_checksum(ip.source(), ip.destination(), s.payload())
        .unwrap();
    assert_eq!(sum, h.checksum, "ICMPv6 checksum");
    (
        ip,
        msg[0],
        msg[1],
        [msg[4], msg[5], msg[6], msg[7]],
        &msg[8..],
    )
}

/// Check that `out` is an ICMPv6 error (checksums right) quoting all of
/// `pkt`, as it arrived (RFC 4443 2.4 (c): as much as fits in 1280 bytes),
/// with bytes 4..8 zero; its type, code, and source, destination and hop
/// limit.
pub(super) fn error6_about(pkt: &[u8], out: &[u8]) -> (u8, u8, (Ipv6Addr, Ipv6Addr, u8)) {
    let (ip, t, code, rest, quoted) = icmp6_of(out);
    assert_eq!(rest, [0; 4]);
    assert_eq!(quoted, &pkt[14..]);
    (t, code, addrs_hl(&ip))
}

/// The source, destination and hop limit of `ip`.
pub(super) fn addrs_hl(ip: &Ipv6HeaderSlice<'_>) -> (Ipv6Addr, Ipv6Addr, u8) {
    (
        Ipv6Addr::from(ip.source()),
        Ipv6Addr::from(ip.destination()),
        ip.hop_limit(),
    )
}

pub(super) fn neigh6_state(r: &Router, ip: Ipv6Addr, vnic: u16) -> Option<(State, [u8; 6])> {
    entry(&r.neigh6, ip.to_bits(), vnic)
}

#[test]
fn forwards_with_the_hop_limit_decremented() {
    let mut r = router6();
    let pkt = udp6_from_h0(FAR);
    let (v, out) = run(&mut r, 0, &pkt);
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!((&out[0..6], &out[6..12]), (&SINK[..], &R1[..]));
    assert_eq!(out[14 + 7], 63);
    // Nothing else changed: no checksum in IPv6, UDP's does not cover
    // the hop limit.
    assert_eq!(&out[12..21], &pkt[12..21]);
    assert_eq!(&out[22..], &pkt[22..]);
    // Through the one-by-one path too.
    let mut buf = pkt.clone();
    let mut p = Packet::new(&mut buf, 0, pkt.len(), 0).unwrap();
    assert_eq!(r.process(&mut p), Verdict::Forward(1));
    assert_eq!(p.data()[21], 63);
    // IPv4 is untouched beside it.
    let (v, out) = run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(192, 0, 2, 9)));
    assert_eq!((v, out[22]), (Verdict::Forward(1), 63));
}

#[test]
fn hop_limit_expired_gets_time_exceeded_quoting_the_packet() {
    let mut r = router6();
    for hl in [1, 0] {
        let pkt = udp6(H0, R0, H0_6, FAR, hl);
        let (v, out) = run(&mut r, 0, &pkt);
        assert_eq!(v, Verdict::Forward(0), "back where it came from");
        assert_eq!((&out[0..6], &out[6..12]), (&H0[..], &R0[..]));
        assert_eq!(error6_about(&pkt, &out), (3, 0, (R0_6, H0_6, 64)));
    }
    assert_eq!(c(&r, counters::ICMP6_TIME_EXCEEDED), 2);
}

#[test]
fn the_quote_stops_at_the_minimum_mtu() {
    let mut r = router6();
    let pkt = frame(H0, R0, Ip::V6(H0_6, FAR, 1), L4::Udp(&[0x5a; 1400]));
    let (v, out) = run_at(&mut r, 0, &pkt, 0);
    assert_eq!(v, Verdict::Forward(0));
    let (ip, _, _, _, quoted) = icmp6_of(&out);
    assert_eq!(usize::from(ip.payload_length()) + 40, 1280);
    assert_eq!(quoted, &pkt[14..14 + 1280 - 48]);
}

#[test]
fn no_route_gets_destination_unreachable_code_0() {
    let mut c6 = cfg6();
    c6.routes.retain(|r| r.prefix != "::/0");
    let mut r = router_with(&c6);
    let pkt = udp6_from_h0(WORLD);
    let (v, out) = run(&mut r, 0, &pkt);
    assert_eq!(v, Verdict::Forward(0));
    let (t, code, _) = error6_about(&pkt, &out);
    assert_eq!((t, code), (1, 0));
    assert_eq!(c(&r, counters::ICMP6_NO_ROUTE), 1);
}

#[test]
fn no_error_about_an_icmpv6_error_or_to_an_unspecified_source() {
    let mut r = router6();
    let err = frame(
        H0,
        R0,
        Ip::V6(H0_6, FAR, 1),
        L4::Icmp(1, 0, [0; 4], &[0; 48]),
    );
    assert_eq!(
        run(&mut r, 0, &err).0,
        Verdict::Drop(DropReason::TtlExpired)
    );
    let pkt = udp6(H0, R0, Ipv6Addr::UNSPECIFIED, FAR, 64);
    assert_eq!(run(&mut r, 0, &pkt).0, Verdict::Drop(DropReason::BadHeader));
    assert_eq!(c(&r, counters::ICMP6_TIME_EXCEEDED), 0);
    // An informational message is answered.
    let e = echo6(H0, R0, H0_6, FAR, 1);
    assert_eq!(run(&mut r, 0, &e).0, Verdict::Forward(0));
}

#[test]
fn echo_requests_to_the_router_are_answered() {
    let mut r = router6();
    for (src, dst, hl) in [
        (H0_6, R0_6, 1),
        (H0_6, R1_6, 64),
        ("fe80::7".parse().unwrap(), R0_LL, 255),
    ] {
        let req = echo6(H0, R0, src, dst, hl);
        let (v, out) = run(&mut r, 0, &req);
        assert_eq!(v, Verdict::Forward(0), "{dst}");
        assert_eq!((&out[0..6], &out[6..12]), (&H0[..], &R0[..]));
        let (ip, t, code, rest, data) = icmp6_of(&out);
        assert_eq!(addrs_hl(&ip), (dst, src, 64));
        assert_eq!((t, code, rest), (129, 0, [0x42, 0x42, 0, 7]));
        assert_eq!(data, ECHO_DATA6);
    }
    assert_eq!(c(&r, counters::ICMP6_ECHO_REPLIES), 3);
    // A bad checksum is dropped as such.
    let mut req = echo6(H0, R0, H0_6, R0_6, 64);
    let n = req.len();
    req[n - 1] ^= 1;
    assert_eq!(
        run(&mut r, 0, &req).0,
        Verdict::Drop(DropReason::BadChecksum)
    );
    // Other traffic to the router is not delivered anywhere.
    assert_eq!(
        run(&mut r, 0, &udp6_from_h0(R0_6)).0,
        Verdict::Drop(DropReason::LocalUnsupported)
    );
}

/// `pkt` (IPv6 UDP) with a destination options header of 8 bytes (PadN)
/// before its UDP header.
fn with_dst_opts(pkt: &[u8]) -> Vec<u8> {
    let mut v = pkt[..54].to_vec();
    v[20] = 60;
    v.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
    v.extend_from_slice(&pkt[54..]);
    let plen = (v.len() - 54) as u16;
    v[18..20].copy_from_slice(&plen.to_be_bytes());
    v
}

#[test]
fn extension_headers_pass_or_drop_as_configured() {
    let pkt = with_dst_opts(&udp6_from_h0(FAR));
    let mut r = router6();
    let (v, out) = run(&mut r, 0, &pkt);
    assert_eq!((v, out[21]), (Verdict::Forward(1), 63));
    assert_eq!(&out[54..], &pkt[54..]);
    let mut c6 = cfg6();
    c6.ipv6.drop_ext_headers = true;
    let mut r = router_with(&c6);
    assert_eq!(run(&mut r, 0, &pkt).0, Verdict::Drop(DropReason::ExtHeader));
    // Without them, forwarded as before.
    assert_eq!(run(&mut r, 0, &udp6_from_h0(FAR)).0, Verdict::Forward(1));
    // A truncated chain is a bad header either way.
    let mut bad = pkt.clone();
    bad[55] = 200;
    assert_eq!(run(&mut r, 0, &bad).0, Verdict::Drop(DropReason::BadHeader));
    // The router's own traffic is not affected: an echo behind the header.
    let req = with_dst_opts_icmp(&echo6(H0, R0, H0_6, R0_6, 64));
    let (v, out) = run(&mut r, 0, &req);
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!(icmp6_of(&out).1, 129);
}

/// As [`with_dst_opts`], for an ICMPv6 packet (next header 58).
fn with_dst_opts_icmp(pkt: &[u8]) -> Vec<u8> {
    let mut v = with_dst_opts(pkt);
    v[54] = 58;
    v
}

#[test]
fn multicast_and_link_local_are_not_forwarded() {
    let mut r = router6();
    let group: Ipv6Addr = "ff0e::1:3".parse().unwrap();
    let to_group = udp6(H0, [0x33, 0x33, 0, 1, 0, 3], H0_6, group, 64);
    assert_eq!(
        run(&mut r, 0, &to_group).0,
        Verdict::Drop(DropReason::Multicast)
    );
    // A unicast packet in a multicast frame.
    let grouped = udp6(H0, [0x33, 0x33, 0, 0, 0, 1], H0_6, FAR, 64);
    assert_eq!(
        run(&mut r, 0, &grouped).0,
        Verdict::Drop(DropReason::Multicast)
    );
    let ll: Ipv6Addr = "fe80::7".parse().unwrap();
    assert_eq!(
        run(&mut r, 0, &udp6(H0, R0, ll, FAR, 64)).0,
        Verdict::Drop(DropReason::LinkLocal)
    );
    let ll_dst: Ipv6Addr = "fe80::9".parse().unwrap();
    assert_eq!(
        run(&mut r, 0, &udp6(H0, R0, H0_6, ll_dst, 64)).0,
        Verdict::Drop(DropReason::LinkLocal)
    );
    // fe80::1 is vNIC 0's, not vNIC 1's.
    assert_eq!(
        run(
            &mut r,
            1,
            &echo6(GW, R1, "fe80::2".parse().unwrap(), R0_LL, 255)
        )
        .0,
        Verdict::Drop(DropReason::LinkLocal)
    );
    // A multicast source is no source.
    assert_eq!(
        run(&mut r, 0, &udp6(H0, R0, group, FAR, 64)).0,
        Verdict::Drop(DropReason::BadHeader)
    );
    assert_eq!(
        c(&r, counters::ICMP6_NO_ROUTE) + c(&r, counters::ICMP6_TIME_EXCEEDED),
        0
    );
}

#[test]
fn icmpv6_errors_are_rate_limited_apart_from_icmpv4() {
    let mut c6 = cfg6();
    c6.icmp = IcmpConfig { rate: 1, burst: 2 };
    let mut r = router_with(&c6);
    let pkt = udp6(H0, R0, H0_6, FAR, 1);
    assert_eq!(run(&mut r, 0, &pkt).0, Verdict::Forward(0));
    assert_eq!(run(&mut r, 0, &pkt).0, Verdict::Forward(0));
    assert_eq!(
        run(&mut r, 0, &pkt).0,
        Verdict::Drop(DropReason::TtlExpired)
    );
    assert_eq!(c(&r, counters::ICMP6_RATE_LIMITED), 1);
    // IPv4's bucket is its own.
    let v4 = udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(192, 0, 2, 9), 1);
    assert_eq!(run(&mut r, 0, &v4).0, Verdict::Forward(0));
    // One token a second.
    at(&mut r, 1000);
    assert_eq!(run(&mut r, 0, &pkt).0, Verdict::Forward(0));
    assert_eq!(
        run(&mut r, 0, &pkt).0,
        Verdict::Drop(DropReason::TtlExpired)
    );
    // Echo replies are not limited.
    let req = echo6(H0, R0, H0_6, R0_6, 64);
    assert_eq!(run(&mut r, 0, &req).0, Verdict::Forward(0));
}

#[test]
fn config_and_control_take_ipv6_routes() {
    let mut r = router6();
    let n = r.routes();
    let ok = r
        .control(&serde_json::json!({"routes": {
            "add": [{"prefix": "2001:db8:7::/48", "via": "2001:db8:1::3"},
                    {"prefix": "2001:db8:8::/48", "nexthop": 0}],
            "del": ["2001:db8:99::/48"]}}))
        .unwrap();
    assert_eq!(ok["routes"], n + 1);
    let (v, out) = run(&mut r, 0, &udp6_from_h0("2001:db8:8::1".parse().unwrap()));
    assert_eq!((v, &out[0..6]), (Verdict::Forward(1), &SINK[..]));
    // FAR now goes to the default gateway (unresolved: a solicitation).
    let (v, out) = run(&mut r, 0, &udp6_from_h0(FAR));
    assert_eq!(
        (v, &out[0..6]),
        (Verdict::Forward(1), &solicited_mac(GW_6)[..])
    );
    for (msg, want) in [
        (
            serde_json::json!({"routes": {"add": [{"prefix": "2001:db8:7::/48", "via": "10.1.1.2"}]}}),
            "not an IPv6 address",
        ),
        (
            serde_json::json!({"routes": {"add": [{"prefix": "10.7.0.0/16", "via": "2001:db8:1::3"}]}}),
            "not an IPv4 address",
        ),
        (
            serde_json::json!({"routes": {"add": [{"prefix": "2001:db8::/64", "nexthop": 0}]}}),
            "own addresses",
        ),
        (
            serde_json::json!({"routes": {"del": ["2001:db8:1::/64"]}}),
            "own addresses",
        ),
        (
            serde_json::json!({"routes": {"add": [{"prefix": "2001:db8::/129", "nexthop": 0}]}}),
            "> 128",
        ),
        (
            serde_json::json!({"routes": {"add": [{"prefix": "2001:db8:7::/48", "via": "2001:db8:77::3"}]}}),
            "in no connected subnet",
        ),
        (
            serde_json::json!({"routes": {"add": [{"prefix": "2001:db8:7::/48", "nexthop": 1}]}}),
            "out of range",
        ),
    ] {
        let e = r.control(&msg).unwrap_err();
        assert!(e.contains(want), "{e}");
    }
    let mut c6 = cfg6();
    c6.nexthops.push(NextHopConfig {
        vnic: 1,
        via: Some(GW_IP.to_string()),
        ..NextHopConfig::default()
    });
    c6.routes.push(route_to("2001:db8:6::/48", 1));
    let e = Router::new(&c6).unwrap_err();
    assert!(e.contains("routes[4].nexthop 1: resolved by ARP"), "{e}");
    let stats = r.stats();
    assert_eq!((stats.routes6, stats.neighbours6), (r.fib6.len(), 2));
    // Config errors name the field.
    let mut c6 = cfg6();
    c6.vnics[1].addrs.push("ff02::1/64".into());
    let e = Router::new(&c6).unwrap_err();
    assert!(
        e.contains("vnics[1].addrs[3]") && e.contains("not a unicast"),
        "{e}"
    );
    let mut c6 = cfg6();
    c6.vnics[1].addrs.push("2001:db8::1/64".into());
    assert!(Router::new(&c6).unwrap_err().contains("given twice"));
}

/// A small deterministic generator (xorshift64*).
fn next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn ipv6_table_matches_the_naive_reference() {
    // Four next hops of the original form, no IPv6 addresses: the table
    // holds only the routes given, hop id = next hop index.
    let mut c6 = cfg();
    c6.routes.clear();
    c6.nexthops = (0..4)
        .map(|i| NextHopConfig {
            vnic: 1,
            mac: MacAddr([2, 0, 0, 0, 0x20, i]).to_string(),
            ..NextHopConfig::default()
        })
        .collect();
    let mut r = router_with(&c6);
    let mut reference = NaiveLpm::<u128>::new();
    let mut s = 0x5eed_u64;
    // Prefixes under a few /16s so that they nest and overlap.
    let prefix = |s: &mut u64| {
        let top = [0x2001_0db8u128, 0x2001_0db9, 0x2a00_1450][(next(s) % 3) as usize];
        let a = (top << 96) | (u128::from(next(s)) << 32) | u128::from(next(s) as u32);
        let len = [0u8, 16, 24, 32, 40, 48, 56, 64, 96, 127, 128][(next(s) % 11) as usize];
        (a, len)
    };
    // The prefixes in the table (host bits cleared), each once.
    let mut added: Vec<(u128, u8)> = vec![];
    for round in 0..20 {
        // As the router applies a message: deletes first, then adds.
        let mut del = vec![];
        if round % 3 == 2 {
            for _ in 0..10 {
                let (a, len) = added.swap_remove((next(&mut s) as usize) % added.len());
                del.push(serde_json::json!(format!("{}/{len}", Ipv6Addr::from(a))));
                reference.remove(a, len);
            }
        }
        let mut add = vec![];
        for _ in 0..50 {
            let (a, len) = prefix(&mut s);
            let nh = (next(&mut s) % 4) as u32;
            add.push(serde_json::json!({"prefix": format!("{}/{len}", Ipv6Addr::from(a)), "nexthop": nh}));
            reference.insert(a, len, nh).unwrap();
            let key = (a & mask6(len), len);
            if !added.contains(&key) {
                added.push(key);
            }
        }
        r.control(&serde_json::json!({"routes": {"add": add, "del": del}}))
            .unwrap();
        for _ in 0..500 {
            let (a, _) = prefix(&mut s);
            assert_eq!(
                r.fib6.lookup(a),
                reference.lookup(a),
                "{}",
                Ipv6Addr::from(a)
            );
        }
    }
    assert_eq!(r.fib6.len(), reference.len());
}

#[test]
fn random_ipv6_frames_never_panic() {
    // Frames near the valid ones (hand-picked next headers, ICMPv6 types,
    // destinations and hop limits, random lengths and tails), on every
    // vNIC and one the router does not have: every verdict is a forward
    // or a drop, and nothing panics.
    let mut r = router6();
    let mut s = 0xfeed_u64;
    let dsts = [
        R0_6,
        R0_LL,
        R1_6,
        FAR,
        WORLD,
        solicited(R0_6),
        "ff02::1".parse().unwrap(),
        "fe80::9".parse().unwrap(),
        "2001:db8::9".parse().unwrap(),
    ];
    let srcs = [
        H0_6,
        Ipv6Addr::UNSPECIFIED,
        "fe80::7".parse().unwrap(),
        GW_6,
    ];
    for i in 0..4000u64 {
        at(&mut r, i * 7);
        let mut f = vec![0u8; 14 + 40];
        f[..6].copy_from_slice(if next(&mut s).is_multiple_of(4) {
            &[0x33, 0x33, 0xff, 0, 0, 1]
        } else {
            &R0
        });
        f[6..12].copy_from_slice(&H0);
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = if next(&mut s).is_multiple_of(16) {
            0x45
        } else {
            0x60
        };
        f[20] = [0, 43, 44, 58, 60, 17, 59][(next(&mut s) % 7) as usize];
        f[21] = [0, 1, 2, 64, 255][(next(&mut s) % 5) as usize];
        f[22..38].copy_from_slice(&srcs[(next(&mut s) % 4) as usize].octets());
        f[38..54].copy_from_slice(&dsts[(next(&mut s) % 9) as usize].octets());
        let tail = (next(&mut s) % 80) as usize;
        for _ in 0..tail {
            f.push(next(&mut s) as u8);
        }
        if tail > 0 && f[20] == 58 {
            f[54] = [1, 3, 128, 129, 133, 135, 136][(next(&mut s) % 7) as usize];
        }
        let plen = match next(&mut s) % 8 {
            0 => next(&mut s) as u16,
            _ => tail as u16,
        };
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        let rx = (next(&mut s) % 3) as u16;
        let (v, out) = run(&mut r, rx, &f);
        if let Verdict::Forward(o) = v {
            assert!(o < 2, "out of a vNIC the router has");
            assert!(out.len() >= 54);
        }
    }
    // Valid frames (checksums right), one byte changed or cut short.
    let ll: Ipv6Addr = "fe80::7".parse().unwrap();
    let valid = [
        echo6(H0, R0, ll, R0_6, 64),
        echo6(H0, R0, ll, R0_LL, 255),
        echo6(H0, R0, H0_6, R1_6, 1),
        ns_from_h0(R0_6),
        gw6_advert(GW),
        udp6_from_h0(FAR),
        with_dst_opts(&udp6(H0, R0, H0_6, WORLD, 1)),
    ];
    for i in 0..3000u64 {
        at(&mut r, 40_000 + i * 3);
        let mut f = valid[(next(&mut s) % valid.len() as u64) as usize].clone();
        match next(&mut s) % 3 {
            0 => {}
            1 => {
                let at = (next(&mut s) as usize) % f.len();
                f[at] = next(&mut s) as u8;
            }
            _ => f.truncate((next(&mut s) as usize) % f.len()),
        }
        let rx = (next(&mut s) % 3) as u16;
        if let (Verdict::Forward(o), _) = run(&mut r, rx, &f) {
            assert!(o < 2, "out of a vNIC the router has");
        }
    }
}

#[test]
fn a_mixed_burst_does_what_single_packets_do() {
    let frames: Vec<(u16, Vec<u8>)> = vec![
        (0, udp6_from_h0(WORLD)),
        (0, udp_from_h0(Ipv4Addr::new(8, 8, 8, 8))),
        (0, udp6_from_h0(FAR)),
        (1, gw6_advert(GW)),
        (0, echo6(H0, R0, H0_6, R0_6, 64)),
        (1, gw_reply(GW)),
        (0, udp6(H0, R0, H0_6, FAR, 1)),
        (0, ns_from_h0(R0_6)),
        (0, udp6_from_h0(WORLD)),
        (0, udp_from_h0(Ipv4Addr::new(192, 0, 2, 1))),
        (0, udp6_from_h0("2001:db8:1::9".parse().unwrap())),
        (1, udp6(GW, R1, WORLD, H0_6, 30)),
    ];
    let mut one = router6();
    let singles = run_each(&mut one, &frames);
    let mut burst = router6();
    let got = run_burst(&mut burst, &frames);
    for (i, single) in singles.iter().enumerate() {
        assert_eq!(got[i], *single, "frame {i}");
    }
    assert_eq!(burst.counters, one.counters);
    assert_eq!(burst.counters[counters::ND_RELEASED], 1);
    assert_eq!(burst.counters[counters::ARP_RELEASED], 1);
}

/// A route file's IPv6 routes load with `route_file_ipv6` (and only
/// then), spread over the next hops by ASN; a next hop resolved by ARP
/// is refused for them.
#[test]
fn route_file_ipv6_routes_load_when_asked() {
    let dir = std::env::temp_dir().join(format!("vrhost-rf6-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("routes.txt");
    std::fs::write(&file, "10.77.0.0/16\t64500\n2001:db8:77::/48\t64501\n").unwrap();
    let mut c = cfg6();
    c.route_file = Some(file.to_string_lossy().into_owned());
    let dst = Ipv6Addr::new(0x2001, 0xdb8, 0x77, 1, 0, 0, 0, 9);
    let (v, _) = run(&mut router_with(&c), 0, &udp6_from_h0(dst));
    assert_eq!(
        v,
        Verdict::Forward(1),
        "to ::/0 via the gateway: not loaded"
    );
    c.route_file_ipv6 = true;
    let mut r = router_with(&c);
    let (v, out) = run(&mut r, 0, &udp6_from_h0(dst));
    assert_eq!(
        (v, &out[..6]),
        (Verdict::Forward(1), &SINK[..]),
        "next hop 0's MAC"
    );
    c.nexthops.push(NextHopConfig {
        vnic: 1,
        via: Some(GW_IP.to_string()),
        ..NextHopConfig::default()
    });
    let e = Router::new(&c).err().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        e.contains("route_file_ipv6: nexthops[1] is resolved by ARP"),
        "{e}"
    );
}
