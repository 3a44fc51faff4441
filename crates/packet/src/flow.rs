//! The classifier's per-packet key.

use crate::ParseError;
use crate::arp::ArpPacket;
use crate::bytes;
use crate::ethernet::EtherType;
use crate::ipv4::proto;
use crate::mac::MacAddr;

/// The header fields the host's classifier matches on, read in one pass.
///
/// For an ARP frame (Ethernet/IPv4 ARP) `src` and `dst` are the sender and
/// target protocol addresses, so that a rule on a tenant's prefix takes the
/// tenant's ARP to its VR; the other IP fields are zero. For other non-IPv4
/// frames the IP fields are zero; for an IPv4 fragment, or a protocol other
/// than UDP and TCP, the ports are zero. Addresses are host-order integers
/// (`10.0.0.1` is `0x0a000001`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    /// Destination MAC address.
    pub dst_mac: MacAddr,
    /// Source MAC address.
    pub src_mac: MacAddr,
    /// 802.1Q VLAN id (12 bits), if the frame is tagged.
    pub vlan: Option<u16>,
    /// EtherType of the payload (after the VLAN tag).
    pub ethertype: EtherType,
    /// IPv4 source address (ARP: the sender protocol address).
    pub src: u32,
    /// IPv4 destination address (ARP: the target protocol address).
    pub dst: u32,
    /// IPv4 protocol.
    pub protocol: u8,
    /// UDP/TCP source port.
    pub sport: u16,
    /// UDP/TCP destination port.
    pub dport: u16,
}

#[inline(always)]
fn be16(f: &[u8], at: usize) -> u16 {
    bytes::read_u16(f, at..at + 2)
}

#[inline(always)]
fn be32(f: &[u8], at: usize) -> u32 {
    bytes::read_u32(f, at..at + 4)
}

impl FlowKey {
    /// The link-layer part of a frame's key, for a frame whose network
    /// header [`FlowKey::extract`] refused: MAC addresses and the VLAN id,
    /// with `ethertype` zero, so rules on IP fields do not match it while
    /// rules on the port, MAC or VLAN still do (and the VR behind them
    /// counts the broken header). `None` if even the Ethernet header (or
    /// its VLAN tag) is cut short.
    #[inline]
    pub fn extract_l2(frame: &[u8]) -> Option<FlowKey> {
        if frame.len() < 14 {
            return None;
        }
        let vlan = if EtherType(be16(frame, 12)) == EtherType::VLAN {
            if frame.len() < 18 {
                return None;
            }
            Some(be16(frame, 14) & 0x0fff)
        } else {
            None
        };
        Some(FlowKey {
            dst_mac: MacAddr([frame[0], frame[1], frame[2], frame[3], frame[4], frame[5]]),
            src_mac: MacAddr([frame[6], frame[7], frame[8], frame[9], frame[10], frame[11]]),
            vlan,
            ..FlowKey::default()
        })
    }

    /// Read the key of an Ethernet frame (FCS not included).
    ///
    /// One pass over fixed offsets, no allocation, no checksum verification
    /// (the router verifies; the classifier only needs addresses). The
    /// IPv4 header is validated as [`Ipv4Packet::check`] does, and an ARP
    /// packet as [`ArpPacket::check`] does, so a key never comes from bytes
    /// the router would refuse to parse.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] when the Ethernet header, the VLAN tag, the
    /// IPv4 header or the total length run past the frame, or the ports of
    /// an unfragmented UDP/TCP packet lie past its total length, or an ARP
    /// packet is cut short; [`ParseError::BadVersion`], [`ParseError::BadIhl`],
    /// [`ParseError::BadTotalLength`] for a broken IPv4 header;
    /// [`ParseError::Unsupported`] and [`ParseError::BadArpAddressLength`]
    /// for ARP other than Ethernet/IPv4. Frames of other EtherTypes are not
    /// errors.
    ///
    /// [`Ipv4Packet::check`]: crate::ipv4::Ipv4Packet::check
    /// [`ArpPacket::check`]: crate::arp::ArpPacket::check
    // Always inlined: out of line, the key comes back through memory and
    // the caller's copies of it (in pieces of other widths) stall on store
    // forwarding: the worker's classification took 23.7 ns a frame instead
    // of 12.6 (perf annotate on `bench memory --modes inproc`).
    #[inline(always)]
    pub fn extract(frame: &[u8]) -> Result<FlowKey, ParseError> {
        if frame.len() < 14 {
            return Err(ParseError::Truncated);
        }
        let mut key = FlowKey {
            dst_mac: MacAddr([frame[0], frame[1], frame[2], frame[3], frame[4], frame[5]]),
            src_mac: MacAddr([frame[6], frame[7], frame[8], frame[9], frame[10], frame[11]]),
            ..FlowKey::default()
        };
        let mut ethertype = EtherType(be16(frame, 12));
        let mut l3 = 14;
        if ethertype == EtherType::VLAN {
            if frame.len() < 18 {
                return Err(ParseError::Truncated);
            }
            key.vlan = Some(be16(frame, 14) & 0x0fff);
            ethertype = EtherType(be16(frame, 16));
            l3 = 18;
        }
        key.ethertype = ethertype;
        if ethertype == EtherType::ARP {
            let arp = ArpPacket::new_checked(&frame[l3..])?;
            key.src = arp.sender_protocol_u32();
            key.dst = arp.target_protocol_u32();
            return Ok(key);
        }
        if ethertype != EtherType::IPV4 {
            return Ok(key);
        }
        let ip = &frame[l3..];
        if ip.len() < 20 {
            return Err(ParseError::Truncated);
        }
        if ip[0] >> 4 != 4 {
            return Err(ParseError::BadVersion);
        }
        let hl = usize::from(ip[0] & 0x0f) * 4;
        if hl < 20 {
            return Err(ParseError::BadIhl);
        }
        let total = usize::from(be16(ip, 2));
        if hl > ip.len() {
            return Err(ParseError::Truncated);
        }
        if total < hl {
            return Err(ParseError::BadTotalLength);
        }
        if total > ip.len() {
            return Err(ParseError::Truncated);
        }
        key.protocol = ip[9];
        key.src = be32(ip, 12);
        key.dst = be32(ip, 16);
        let is_fragment = be16(ip, 6) & 0x3fff != 0;
        if (key.protocol == proto::UDP || key.protocol == proto::TCP) && !is_fragment {
            if total < hl + 4 {
                return Err(ParseError::Truncated);
            }
            key.sport = be16(ip, hl);
            key.dport = be16(ip, hl + 2);
        }
        Ok(key)
    }

    /// Whether the frame is a router's control traffic: what keeps
    /// neighbours and routing sessions up, which a router must not lose
    /// to a flood of data (the host admits it into a VR's reserve when the
    /// VR is full; Cisco calls this selective packet discard). That is:
    /// ARP; IPv4 to the link-local multicast block 224.0.0.0/24 (OSPF,
    /// RIPv2, VRRP, PIM hellos; RFC 5771); the protocols IGMP (2), OSPF
    /// (89), PIM (103) and VRRP (112); TCP to or from port 179 (BGP, RFC
    /// 4271) or 646 (LDP, RFC 5036); UDP to port 520 (RIP, RFC 2453), 646
    /// (LDP discovery), 3784/3785 (single-hop BFD, RFC 5881) or 4784
    /// (multihop BFD, RFC 5883).
    ///
    /// A host cannot tell a tenant's real routing traffic from data dressed
    /// up as it: the reserve it may use is small, and what passes still
    /// counts against the VR's own limits.
    ///
    /// Of these, vrhost's built-in router uses only ARP: it runs no routing
    /// protocol and drops the others when they are addressed to it. The
    /// rest is for a custom VR that speaks them.
    #[inline]
    pub fn is_control(&self) -> bool {
        if self.ethertype == EtherType::ARP {
            return true;
        }
        if self.ethertype != EtherType::IPV4 {
            return false;
        }
        if self.dst >> 8 == 0xe0_00_00 {
            return true;
        }
        match self.protocol {
            proto::TCP => matches!(self.dport, 179 | 646) || matches!(self.sport, 179 | 646),
            proto::UDP => matches!(self.dport, 520 | 646 | 3784 | 3785 | 4784),
            2 | 89 | 103 | 112 => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::EthernetFrame;
    use crate::ipv4::Ipv4Packet;
    use crate::testdata::ARP_REQUEST_FRAME;
    use crate::udp::UdpPacket;
    use proptest::prelude::*;

    /// A minimum-size frame, 192.168.0.1:52125 -> 192.168.0.199:53 UDP with
    /// no payload, padded to 60 bytes; IPv4 checksum b8b8 computed by hand.
    fn udp_frame() -> Vec<u8> {
        let mut f = vec![
            0x00, 0x1b, 0x21, 0x3a, 0x4f, 0x5e, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08,
            0x00, // eth
            0x45, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0xb8, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7, // ip, total 28
            0xcb, 0x9d, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00, // udp
        ];
        f.resize(60, 0);
        f
    }

    #[test]
    fn udp_key() {
        let f = udp_frame();
        assert!(Ipv4Packet::new_checked(&f[14..]).unwrap().verify_checksum());
        let k = FlowKey::extract(&f).unwrap();
        assert_eq!(k.dst_mac.to_string(), "00:1b:21:3a:4f:5e");
        assert_eq!(k.src_mac, MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(k.vlan, None);
        assert_eq!(k.ethertype, EtherType::IPV4);
        assert_eq!((k.src, k.dst, k.protocol), (0xc0a8_0001, 0xc0a8_00c7, 17));
        assert_eq!((k.sport, k.dport), (52125, 53));
    }

    #[test]
    fn control_traffic() {
        let ip = |protocol, dst, sport, dport| FlowKey {
            ethertype: EtherType::IPV4,
            protocol,
            dst,
            sport,
            dport,
            ..FlowKey::default()
        };
        let unicast = 0x0a00_0001;
        assert!(
            FlowKey {
                ethertype: EtherType::ARP,
                ..FlowKey::default()
            }
            .is_control()
        );
        // BGP both ways, BFD, RIP, OSPF, link-local multicast.
        assert!(ip(proto::TCP, unicast, 40000, 179).is_control());
        assert!(ip(proto::TCP, unicast, 179, 40000).is_control());
        assert!(ip(proto::UDP, unicast, 49152, 3784).is_control());
        assert!(ip(proto::UDP, unicast, 520, 520).is_control());
        assert!(ip(89, unicast, 0, 0).is_control());
        assert!(ip(proto::UDP, 0xe000_0005, 1, 1).is_control());
        // Data: other ports and protocols, other multicast, UDP *from* 179,
        // and a non-IPv4 frame with the same fields.
        assert!(!ip(proto::UDP, unicast, 52125, 53).is_control());
        assert!(!ip(proto::UDP, unicast, 179, 9).is_control());
        assert!(!ip(proto::ICMP, unicast, 0, 0).is_control());
        assert!(!ip(proto::UDP, 0xe000_0105, 1, 1).is_control());
        let mut v6 = ip(89, unicast, 0, 0);
        v6.ethertype = EtherType::IPV6;
        assert!(!v6.is_control());
        // The test frame is DNS: data.
        assert!(!FlowKey::extract(&udp_frame()).unwrap().is_control());
    }

    #[test]
    fn tagged_key() {
        let mut f = udp_frame();
        f.splice(12..12, [0x81, 0x00, 0x20, 0x2a]);
        let k = FlowKey::extract(&f).unwrap();
        assert_eq!(k.vlan, Some(42));
        assert_eq!(k.ethertype, EtherType::IPV4);
        assert_eq!(k.dport, 53);
    }

    /// Who has 192.168.1.1? Tell 192.168.1.100, padded to 60 bytes.
    fn arp_frame() -> Vec<u8> {
        let mut f = ARP_REQUEST_FRAME.to_vec();
        f.resize(60, 0);
        f
    }

    #[test]
    fn arp_key() {
        let f = arp_frame();
        let k = FlowKey::extract(&f).unwrap();
        assert_eq!(k.ethertype, EtherType::ARP);
        assert_eq!((k.src, k.dst), (0xc0a8_0164, 0xc0a8_0101));
        assert_eq!((k.protocol, k.sport, k.dport), (0, 0, 0));
        assert!(k.dst_mac.is_broadcast());
        // Unpadded (42 bytes, as Linux sends it on a veth) and tagged.
        assert_eq!(FlowKey::extract(&f[..42]).unwrap(), k);
        let mut t = f.clone();
        t.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        let kt = FlowKey::extract(&t).unwrap();
        assert_eq!((kt.vlan, kt.src, kt.dst), (Some(5), k.src, k.dst));
    }

    #[test]
    fn arp_errors() {
        let f = arp_frame();
        assert_eq!(FlowKey::extract(&f[..41]), Err(ParseError::Truncated));
        assert_eq!(FlowKey::extract(&f[..21]), Err(ParseError::Truncated));
        let mut v = f.clone();
        v[15] = 6; // IEEE 802 hardware
        assert_eq!(FlowKey::extract(&v), Err(ParseError::Unsupported));
        let mut v = f.clone();
        v[19] = 16; // 16-byte protocol addresses
        assert_eq!(FlowKey::extract(&v), Err(ParseError::BadArpAddressLength));
        // The classifier falls back to the link-layer key.
        assert_eq!(FlowKey::extract_l2(&v).unwrap().ethertype, EtherType(0));
    }

    #[test]
    fn non_ip_and_fragments() {
        let mut f = udp_frame();
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        let k = FlowKey::extract(&f).unwrap();
        assert_eq!(k.ethertype, EtherType::IPV6);
        assert_eq!(
            (k.src, k.dst, k.protocol, k.sport, k.dport),
            (0, 0, 0, 0, 0)
        );

        let mut f = udp_frame();
        f[20] = 0x20; // MF
        let k = FlowKey::extract(&f).unwrap();
        assert_eq!((k.protocol, k.sport, k.dport), (17, 0, 0));

        let mut f = udp_frame();
        f[23] = 1; // ICMP
        assert_eq!(FlowKey::extract(&f).unwrap().dport, 0);
    }

    #[test]
    fn errors() {
        let f = udp_frame();
        assert_eq!(FlowKey::extract(&f[..13]), Err(ParseError::Truncated));
        assert_eq!(FlowKey::extract(&f[..33]), Err(ParseError::Truncated));
        assert_eq!(FlowKey::extract(&f[..41]), Err(ParseError::Truncated));
        let mut v = f.clone();
        v[14] = 0x55;
        assert_eq!(FlowKey::extract(&v), Err(ParseError::BadVersion));
        v[14] = 0x43;
        assert_eq!(FlowKey::extract(&v), Err(ParseError::BadIhl));
        let mut v = f.clone();
        v[17] = 19;
        assert_eq!(FlowKey::extract(&v), Err(ParseError::BadTotalLength));
        let mut v = f.clone();
        v[17] = 22; // UDP with 2 bytes: no room for ports
        assert_eq!(FlowKey::extract(&v), Err(ParseError::Truncated));
        let mut v = f[..14].to_vec();
        v[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(FlowKey::extract(&v), Err(ParseError::Truncated));
        assert_eq!(FlowKey::extract_l2(&v), None, "VLAN tag cut short");
    }

    #[test]
    fn l2_key_of_a_broken_ipv4_frame() {
        let mut v = udp_frame();
        v[14] = 0x43; // IHL 3
        let k = FlowKey::extract_l2(&v).unwrap();
        assert_eq!(k.dst_mac, MacAddr(v[0..6].try_into().unwrap()));
        assert_eq!(k.src_mac, MacAddr(v[6..12].try_into().unwrap()));
        assert_eq!(
            (k.ethertype, k.src, k.dst, k.vlan),
            (EtherType(0), 0, 0, None)
        );
        assert_eq!(FlowKey::extract_l2(&v[..13]), None);
        let mut t = vec![0u8; 18];
        t[12..16].copy_from_slice(&[0x81, 0x00, 0x20, 0x07]);
        assert_eq!(FlowKey::extract_l2(&t).unwrap().vlan, Some(7));
    }

    /// The key must agree with the views on every input the views accept.
    fn via_views(f: &[u8]) -> Result<FlowKey, ParseError> {
        let eth = EthernetFrame::new_checked(f)?;
        let mut k = FlowKey {
            dst_mac: eth.dst_addr(),
            src_mac: eth.src_addr(),
            vlan: eth.vlan_id(),
            ethertype: eth.inner_ethertype(),
            ..FlowKey::default()
        };
        if k.ethertype == EtherType::ARP {
            let arp = ArpPacket::new_checked(eth.payload())?;
            k.src = arp.sender_protocol_u32();
            k.dst = arp.target_protocol_u32();
        }
        if k.ethertype == EtherType::IPV4 {
            let ip = Ipv4Packet::new_checked(eth.payload())?;
            k.src = ip.src_u32();
            k.dst = ip.dst_u32();
            k.protocol = ip.protocol();
            if (k.protocol == 6 || k.protocol == 17) && !ip.is_fragment() {
                let p = ip.payload();
                if p.len() < 4 {
                    return Err(ParseError::Truncated);
                }
                let u = UdpPacket::new_unchecked(p);
                k.sport = u.src_port();
                k.dport = u.dst_port();
            }
        }
        Ok(k)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn random_bytes(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            prop_assert_eq!(FlowKey::extract(&b), via_views(&b));
        }

        #[test]
        fn arp_biased_bytes(mut b in proptest::collection::vec(any::<u8>(), 14..64), vlan: bool, good_types: bool, good_lens: bool) {
            // Make most inputs ARP so the ARP checks are reached.
            b[12..14].copy_from_slice(&[0x08, 0x06]);
            let l3 = if vlan && b.len() >= 18 { b[12..14].copy_from_slice(&[0x81, 0]); b[16..18].copy_from_slice(&[8, 6]); 18 } else { 14 };
            if b.len() >= l3 + 6 {
                if good_types { b[l3..l3 + 4].copy_from_slice(&[0, 1, 8, 0]); }
                if good_lens { b[l3 + 4..l3 + 6].copy_from_slice(&[6, 4]); }
            }
            prop_assert_eq!(FlowKey::extract(&b), via_views(&b));
        }

        #[test]
        fn ipv4_biased_bytes(mut b in proptest::collection::vec(any::<u8>(), 14..80), vlan: bool, ihl in 5u8..7, total in 0u16..70, frag: bool, tcp: bool) {
            // Make most inputs IPv4 so the deeper checks are reached.
            b[12..14].copy_from_slice(&[0x08, 0x00]);
            let l3 = if vlan && b.len() >= 18 { b[12..14].copy_from_slice(&[0x81, 0]); b[16..18].copy_from_slice(&[8, 0]); 18 } else { 14 };
            if b.len() >= l3 + 20 {
                b[l3] = 0x40 | ihl;
                b[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
                b[l3 + 6] = if frag { 0x20 } else { 0x40 };
                b[l3 + 9] = if tcp { 6 } else { 17 };
            }
            prop_assert_eq!(FlowKey::extract(&b), via_views(&b));
        }
    }
}
