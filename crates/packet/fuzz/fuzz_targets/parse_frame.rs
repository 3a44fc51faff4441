//! Any byte string through the classifier's key extraction and the IPv4
//! view: no input may panic, and the two must agree on what is IPv4.
//! The same bytes as a tunnel frame (outer IPv4, UDP, VXLAN): no panic, and
//! what parses re-emits to the same outer addresses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vrhost_packet::ethernet::{EtherType, EthernetFrame};
use vrhost_packet::ipv4::{Ipv4Packet, Ipv4Repr};
use vrhost_packet::tunnel::{EncapKind, EncapRepr, OuterV4, VxlanHeader};
use vrhost_packet::udp::UdpPacket;
use vrhost_packet::{FlowKey, ParseError};

fuzz_target!(|data: &[u8]| {
    let key = FlowKey::extract(data);

    // The frame as an Ethernet frame, then its payload as IPv4.
    if let Ok(eth) = EthernetFrame::new_checked(data) {
        if eth.inner_ethertype() == EtherType::IPV4 {
            let ip = Ipv4Packet::new_checked(eth.payload());
            // The key and the view agree on what is valid IPv4; the key
            // also needs the ports of unfragmented UDP/TCP.
            match (&key, &ip) {
                (Ok(k), Ok(ip)) => assert_eq!((k.src, k.dst), (ip.src_u32(), ip.dst_u32())),
                (Ok(_), Err(e)) => panic!("key extracted from an invalid IPv4 packet: {e}"),
                (Err(e), Ok(_)) => assert_eq!(*e, ParseError::Truncated),
                (Err(a), Err(b)) => assert_eq!(a, b),
            }
        }
    }

    // The whole input as an IPv4 packet: verify, decrement on a copy.
    let mut copy = [0u8; 256];
    let n = data.len().min(copy.len());
    copy[..n].copy_from_slice(&data[..n]);
    if let Ok(mut ip) = Ipv4Packet::new_checked(&mut copy[..n]) {
        let was_ok = ip.verify_checksum();
        let _ = Ipv4Repr::parse(&ip);
        let _ = UdpPacket::new_checked(ip.payload())
            .map(|u| u.verify_checksum(ip.src_addr(), ip.dst_addr()));
        ip.decrement_ttl();
        // RFC 1624: an incremental update keeps a valid checksum valid.
        if was_ok {
            assert!(ip.verify_checksum());
        }
    }

    // As a tunnel frame.
    if let Ok(o) = OuterV4::parse(data) {
        assert!(o.payload_at <= o.payload_end && o.payload_end <= data.len());
        if let Ok((sp, dp, body)) = o.udp(data) {
            let vni = VxlanHeader::new_checked(&data[body.clone()]).map(|v| v.vni());
            let kind = vni.map_or(EncapKind::Udp, EncapKind::Vxlan);
            let inner = body.len() - if vni.is_ok() { 8 } else { 0 };
            let mut hdr = [0u8; 64];
            let r = EncapRepr {
                kind,
                dst_mac: [0; 6],
                src_mac: o.src_mac,
                src: o.src,
                dst: o.dst,
                ident: 0,
                ttl: 64,
                src_port: sp,
                dst_port: dp,
            };
            r.emit(&mut hdr[..kind.overhead()], inner).unwrap();
            let back = OuterV4::parse(
                &[&hdr[..kind.overhead()], &data[body.end - inner..body.end]].concat(),
            );
            assert_eq!(back.map(|b| (b.src, b.dst)), Ok((o.src, o.dst)));
        }
    }
});
