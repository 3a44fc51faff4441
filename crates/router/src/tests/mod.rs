//! The router on frames built here (etherparse builds and checks them, an
//! implementation independent of `vrhost-packet`).

use std::net::Ipv4Addr;

use etherparse::{
    ArpHardwareId, ArpOperation as EpArpOp, ArpPacket as EpArp, EtherType as EpEtherType,
    Icmpv4Slice, Ipv4HeaderSlice, PacketBuilder,
};

use super::neigh::{NeighAddr, State};
use super::*;

mod arp;
mod control;
mod cplane;
mod forward;
mod icmp;
mod ipv6;
mod mtu6;
mod nd;
mod peer;
mod policy;

/// The router's MACs, vNIC 0 and 1.
const R0: [u8; 6] = [2, 0, 0, 0, 0x10, 0];
const R1: [u8; 6] = [2, 0, 0, 0, 0x10, 1];
/// A host on vNIC 0, 10.1.0.7.
const H0: [u8; 6] = [2, 0, 0, 0, 0xa0, 7];
const H0_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 7);
/// The default gateway on vNIC 1, 10.1.1.2.
const GW: [u8; 6] = [2, 0, 0, 0, 0xb0, 2];
const GW_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 2);
/// The next hop of the original form (static MAC).
const SINK: [u8; 6] = [2, 0, 0, 0, 0, 2];
/// A start time, so that "long ago" exists.
const T0: u64 = 1_000_000;

fn cfg() -> RouterConfig {
    let vnic = |mac: [u8; 6], addrs: &[&str]| VnicConfig {
        mac: MacAddr(mac).to_string(),
        addrs: addrs.iter().map(|s| s.to_string()).collect(),
        mtu: None,
    };
    RouterConfig {
        vnics: vec![
            vnic(R0, &["10.1.0.1/24"]),
            vnic(R1, &["10.1.1.1/24", "10.9.0.1/16"]),
        ],
        nexthops: vec![NextHopConfig {
            vnic: 1,
            mac: MacAddr(SINK).to_string(),
            ..NextHopConfig::default()
        }],
        routes: vec![route_via("0.0.0.0/0", GW_IP), route_to("192.0.2.0/24", 0)],
        ..RouterConfig::default()
    }
}

/// A route to `prefix` via the neighbour `via`.
fn route_via(prefix: &str, via: impl ToString) -> RouteConfig {
    RouteConfig {
        prefix: prefix.into(),
        via: Some(via.to_string()),
        ..RouteConfig::default()
    }
}

/// A route to `prefix` by next hop `nexthop` (an index into `nexthops`).
fn route_to(prefix: &str, nexthop: u32) -> RouteConfig {
    RouteConfig {
        prefix: prefix.into(),
        nexthop: Some(nexthop),
        ..RouteConfig::default()
    }
}

fn router_with(cfg: &RouterConfig) -> Router {
    let mut r = Router::new(cfg).unwrap();
    r.set_time(T0);
    r
}

fn router() -> Router {
    router_with(&cfg())
}

use vrhost_packet::MacAddr;

/// Process one frame placed at `off` in a 2048-byte slot, through the
/// burst path; the verdict and the bytes after.
fn run_at(r: &mut Router, rx: u16, frame: &[u8], off: usize) -> (Verdict, Vec<u8>) {
    let mut buf = vec![0u8; 2048];
    buf[off..off + frame.len()].copy_from_slice(frame);
    let mut p = [Packet::new(&mut buf, off, frame.len(), rx).unwrap()];
    let mut v = [Verdict::Drop(DropReason::Other)];
    r.process_burst(&mut p, &mut v);
    (v[0], p[0].data().to_vec())
}

fn run(r: &mut Router, rx: u16, frame: &[u8]) -> (Verdict, Vec<u8>) {
    run_at(r, rx, frame, 128)
}

/// As [`run`], through the one-by-one path ([`Router::process`]).
fn run_one(r: &mut Router, rx: u16, frame: &[u8]) -> (Verdict, Vec<u8>) {
    let mut buf = vec![0u8; 2048];
    buf[128..128 + frame.len()].copy_from_slice(frame);
    let mut p = Packet::new(&mut buf, 128, frame.len(), rx).unwrap();
    let v = r.process(&mut p);
    (v, p.data().to_vec())
}

/// Each frame (vNIC, bytes) through [`run_one`], in order.
fn run_each(r: &mut Router, frames: &[(u16, Vec<u8>)]) -> Vec<(Verdict, Vec<u8>)> {
    frames.iter().map(|(rx, f)| run_one(r, *rx, f)).collect()
}

/// A burst of frames (vNIC, bytes), each in its own 2048-byte slot at
/// offset 128, in one [`Router::process_burst`] call; each verdict and the
/// bytes after.
fn run_burst(r: &mut Router, frames: &[(u16, Vec<u8>)]) -> Vec<(Verdict, Vec<u8>)> {
    let mut bufs: Vec<Vec<u8>> = frames.iter().map(|_| vec![0u8; 2048]).collect();
    let mut pkts: Vec<Packet<'_>> = bufs
        .iter_mut()
        .zip(frames)
        .map(|(b, (rx, f))| {
            b[128..128 + f.len()].copy_from_slice(f);
            Packet::new(b, 128, f.len(), *rx).unwrap()
        })
        .collect();
    let mut v = vec![Verdict::Drop(DropReason::Other); frames.len()];
    r.process_burst(&mut pkts, &mut v);
    v.into_iter()
        .zip(pkts.iter().map(|p| p.data().to_vec()))
        .collect()
}

fn at(r: &mut Router, ms: u64) {
    r.set_time(T0 + ms);
}

/// The IP header of a test frame: source, destination, TTL or hop limit.
#[derive(Clone, Copy)]
enum Ip {
    V4(Ipv4Addr, Ipv4Addr, u8),
    V6(std::net::Ipv6Addr, std::net::Ipv6Addr, u8),
}

/// What follows the IP header of a test frame: UDP from port 4000 to
/// 5000, or an ICMP (ICMPv6 in IPv6) message of type, code, bytes 4..8.
#[derive(Clone, Copy)]
enum L4<'a> {
    Udp(&'a [u8]),
    Icmp(u8, u8, [u8; 4], &'a [u8]),
}

/// A test frame built (checksums included) by etherparse.
fn frame(src_mac: [u8; 6], dst_mac: [u8; 6], ip: Ip, l4: L4<'_>) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2(src_mac, dst_mac);
    let (ip, v6) = match ip {
        Ip::V4(src, dst, ttl) => (eth.ipv4(src.octets(), dst.octets(), ttl), false),
        Ip::V6(src, dst, hl) => (eth.ipv6(src.octets(), dst.octets(), hl), true),
    };
    let mut v = vec![];
    match l4 {
        L4::Udp(data) => ip.udp(4000, 5000).write(&mut v, data),
        L4::Icmp(t, code, rest, body) if v6 => ip.icmpv6_raw(t, code, rest).write(&mut v, body),
        L4::Icmp(t, code, rest, body) => ip.icmpv4_raw(t, code, rest).write(&mut v, body),
    }
    .unwrap();
    v
}

fn udp_ttl(src_mac: [u8; 6], dst_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, ttl: u8) -> Vec<u8> {
    frame(
        src_mac,
        dst_mac,
        Ip::V4(src, dst, ttl),
        L4::Udp(&[0x5a; 58]),
    )
}

/// UDP from the host on vNIC 0 to `dst`, TTL 64.
fn udp_from_h0(dst: Ipv4Addr) -> Vec<u8> {
    udp_ttl(H0, R0, H0_IP, dst, 64)
}

/// An echo request (ICMP type 8, ICMPv6 type 128) carrying `data`, with
/// identifier 0x4242 and sequence number 7.
fn echo_request(src_mac: [u8; 6], dst_mac: [u8; 6], ip: Ip, data: &[u8]) -> Vec<u8> {
    let t = match ip {
        Ip::V4(..) => 8,
        Ip::V6(..) => 128,
    };
    frame(
        src_mac,
        dst_mac,
        ip,
        L4::Icmp(t, 0, [0x42, 0x42, 0, 7], data),
    )
}

fn echo(src_mac: [u8; 6], dst_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr, ttl: u8) -> Vec<u8> {
    let data = b"0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghij";
    echo_request(src_mac, dst_mac, Ip::V4(src, dst, ttl), data)
}

/// A broadcast ARP request from `from` (MAC and address) for `target`.
fn arp_request(from: [u8; 6], from_ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    arp(
        from,
        [0xff; 6],
        EpArpOp::REQUEST,
        from,
        from_ip,
        [0; 6],
        target,
    )
}

fn arp(
    eth_src: [u8; 6],
    eth_dst: [u8; 6],
    op: EpArpOp,
    sha: [u8; 6],
    spa: Ipv4Addr,
    tha: [u8; 6],
    tpa: Ipv4Addr,
) -> Vec<u8> {
    let mut v = vec![];
    PacketBuilder::ethernet2(eth_src, eth_dst)
        .arp(
            EpArp::new(
                ArpHardwareId::ETHERNET,
                EpEtherType::IPV4,
                op,
                &sha,
                &spa.octets(),
                &tha,
                &tpa.octets(),
            )
            .unwrap(),
        )
        .write(&mut v)
        .unwrap();
    v
}

/// The gateway's reply to the router's request.
fn gw_reply(mac: [u8; 6]) -> Vec<u8> {
    reply_on_1(mac, GW_IP, Ipv4Addr::new(10, 1, 1, 1))
}

/// The reply of `host` (at `mac`) on vNIC 1 to the router's request from
/// `router_ip`.
fn reply_on_1(mac: [u8; 6], host: Ipv4Addr, router_ip: Ipv4Addr) -> Vec<u8> {
    arp(mac, R1, EpArpOp::REPLY, mac, host, R1, router_ip)
}

/// The exact request the router sends for `tpa` from `spa` out of a vNIC
/// with MAC `mac`.
fn request_bytes(mac: [u8; 6], spa: Ipv4Addr, tpa: Ipv4Addr) -> Vec<u8> {
    let mut v = vec![0xff; 6];
    v.extend_from_slice(&mac);
    v.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    v.extend_from_slice(&mac);
    v.extend_from_slice(&spa.octets());
    v.extend_from_slice(&[0; 6]);
    v.extend_from_slice(&tpa.octets());
    v
}

/// Check the IPv4 and ICMP checksums of `frame` with etherparse and return
/// (IPv4 header slice, ICMP slice).
fn icmp_of(frame: &[u8]) -> (Ipv4HeaderSlice<'_>, Icmpv4Slice<'_>) {
    assert_eq!(&frame[12..14], &[8, 0], "IPv4 frame");
    let ip = Ipv4HeaderSlice::from_slice(&frame[14..]).unwrap();
    assert_eq!(
        ip.header_checksum(),
        ip.to_header().calc_header_checksum(),
        "IPv4 header checksum"
    );
    assert_eq!(ip.protocol(), etherparse::IpNumber::ICMP);
    let total = usize::from(ip.total_len());
    assert_eq!(frame.len(), 14 + total, "frame is the IP packet");
    let icmp = Icmpv4Slice::from_slice(&frame[14 + ip.slice().len()..14 + total]).unwrap();
    let mut h = icmp.header();
    let sent = h.checksum;
    h.update_checksum(icmp.payload());
    assert_eq!(h.checksum, sent, "ICMP checksum");
    (ip, icmp)
}

fn c(r: &Router, i: usize) -> u64 {
    r.counters[i]
}

/// The state and MAC of `(ip, vnic)` in `table`, if it has the entry.
fn entry<A: NeighAddr>(table: &NeighTable<A>, ip: A, vnic: u16) -> Option<(State, [u8; 6])> {
    table.find(ip, vnic).map(|i| {
        let e = table.get(i);
        (e.state, e.mac)
    })
}

fn neigh_state(r: &Router, ip: Ipv4Addr, vnic: u16) -> Option<(State, [u8; 6])> {
    entry(&r.neigh, ip.to_bits(), vnic)
}
