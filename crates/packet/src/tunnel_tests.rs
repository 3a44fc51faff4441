use super::*;
use crate::testdata::VXLAN_FRAME;
use proptest::prelude::*;

const A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

#[test]
fn a_linux_vxlan_frame_parses_to_its_vni_and_inner_frame() {
    let f = &VXLAN_FRAME[..];
    let o = OuterV4::parse(f).unwrap();
    assert_eq!((o.src, o.dst, o.protocol), (A, B, proto::UDP));
    assert_eq!(o.src_mac, [2, 0, 0, 0, 0, 0x0a]);
    let (sp, dp, body) = o.udp(f).unwrap();
    assert_eq!((sp, dp), (34220, VXLAN_PORT));
    let v = VxlanHeader::new_checked(&f[body]).unwrap();
    assert_eq!((v.flags(), v.vni()), (VXLAN_FLAG_I, 42));
    let inner = EthernetFrame::new_checked(v.payload()).unwrap();
    assert_eq!(inner.ethertype(), EtherType::IPV6);
    assert_eq!(inner.src_addr().0, [2, 0, 0, 0, 1, 0x0a]);
    assert_eq!(v.payload().len(), 136 - VXLAN_OVERHEAD);
}

#[test]
fn bad_outer_headers_are_named() {
    let f = VXLAN_FRAME;
    assert_eq!(OuterV4::parse(&f[..30]), Err(ParseError::Truncated));
    let mut c = f;
    c[24] ^= 1; // the outer IPv4 checksum
    assert_eq!(OuterV4::parse(&c), Err(ParseError::BadChecksum));
    let mut frag = f;
    // More fragments, then the checksum made right again.
    frag[20] = 0x20;
    fix_ip_checksum(&mut frag);
    assert_eq!(OuterV4::parse(&frag), Err(ParseError::Fragment));
    let mut arp = f;
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(OuterV4::parse(&arp), Err(ParseError::WrongEtherType));
    // A UDP length past the IPv4 payload, and a UDP checksum that fails.
    let o = OuterV4::parse(&f).unwrap();
    let mut long = f;
    long[38..40].copy_from_slice(&0x67u16.to_be_bytes());
    assert_eq!(o.udp(&long), Err(ParseError::Truncated));
    let mut short = f;
    short[38..40].copy_from_slice(&7u16.to_be_bytes());
    assert_eq!(o.udp(&short), Err(ParseError::BadUdpLength));
    // The captured UDP checksum is the offload's partial sum (the
    // pseudo-header only), which is why the tunnel does not verify it.
    let u = UdpPacket::new_checked(&f[o.payload_at..o.payload_end]).unwrap();
    assert!(!u.verify_checksum(A, B));
    assert!(o.udp(&f).is_ok());
}

#[test]
fn a_vxlan_header_needs_its_i_flag() {
    let mut h = [0u8; 8];
    assert_eq!(
        VxlanHeader::new_checked(&h[..]),
        Err(ParseError::BadVxlanFlags)
    );
    assert_eq!(
        VxlanHeader::new_checked(&h[..7]),
        Err(ParseError::Truncated)
    );
    emit_vxlan(&mut h, 0x12_3456);
    assert_eq!(h, [0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
    // Other flags and the reserved byte are ignored (RFC 7348).
    h[0] |= 0x80;
    h[7] = 0xff;
    assert_eq!(VxlanHeader::new_checked(&h[..]).unwrap().vni(), 0x12_3456);
}

fn fix_ip_checksum(f: &mut [u8]) {
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..34]);
    ip.fill_checksum();
}

#[test]
fn emitted_vxlan_headers_are_linux_s_but_for_the_udp_checksum() {
    // Re-encapsulate the captured frame's inner frame with its own values:
    // the same bytes, but for the UDP checksum (0 here).
    let inner = &VXLAN_FRAME[VXLAN_OVERHEAD..];
    let r = EncapRepr {
        kind: EncapKind::Vxlan(42),
        dst_mac: [2, 0, 0, 0, 0, 0x0b],
        src_mac: [2, 0, 0, 0, 0, 0x0a],
        src: A,
        dst: B,
        ident: 0x11d5,
        ttl: 64,
        src_port: 34220,
        dst_port: VXLAN_PORT,
    };
    let mut hdr = [0u8; VXLAN_OVERHEAD];
    r.emit(&mut hdr, inner.len()).unwrap();
    let mut want = [0u8; VXLAN_OVERHEAD];
    want.copy_from_slice(&VXLAN_FRAME[..VXLAN_OVERHEAD]);
    want[40..42].fill(0);
    assert_eq!(hdr, want);
    assert_eq!(r.emit(&mut hdr[..10], 1), Err(ParseError::Truncated));
    assert_eq!(r.emit(&mut hdr, 65536), Err(ParseError::Unsupported));
}

#[test]
fn ipip_carries_the_inner_packet_with_protocol_4() {
    let inner = crate::testdata::IPV4_HEADER;
    let r = EncapRepr {
        kind: EncapKind::Ipip,
        dst_mac: [2; 6],
        src_mac: [4; 6],
        src: A,
        dst: B,
        ident: 7,
        ttl: 64,
        src_port: 0,
        dst_port: 0,
    };
    let mut f = vec![0u8; IPIP_OVERHEAD + inner.len()];
    r.emit(&mut f[..IPIP_OVERHEAD], inner.len()).unwrap();
    f[IPIP_OVERHEAD..].copy_from_slice(&inner);
    let o = OuterV4::parse(&f).unwrap();
    assert_eq!((o.src, o.dst, o.protocol), (A, B, proto::IPIP));
    assert_eq!(&f[o.payload_at..o.payload_end], &inner[..]);
    assert_eq!(o.udp(&f), Err(ParseError::WrongProtocol));
}

#[test]
fn the_source_port_spreads_over_the_ephemeral_range() {
    assert_eq!(flow_src_port(0), 32768);
    assert_eq!(flow_src_port(u32::MAX), 60999);
    assert_eq!(flow_src_port(1 << 31), 32768 + 14116);
}

proptest! {
    #[test]
    fn emit_then_parse(vni in 0..=VNI_MAX, sp: u16, dp: u16, src: u32, dst: u32, ident: u16,
                       inner in proptest::collection::vec(any::<u8>(), 14..200), udp: bool) {
        let kind = if udp { EncapKind::Udp } else { EncapKind::Vxlan(vni) };
        let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
        let r = EncapRepr { kind, dst_mac: [1; 6], src_mac: [2; 6], src, dst, ident, ttl: 9,
                            src_port: sp, dst_port: dp };
        let over = kind.overhead();
        let mut f = vec![0u8; over + inner.len()];
        r.emit(&mut f[..over], inner.len()).unwrap();
        f[over..].copy_from_slice(&inner);
        let o = OuterV4::parse(&f).unwrap();
        prop_assert_eq!((o.src, o.dst, o.src_mac), (src, dst, [2; 6]));
        let (s, d, body) = o.udp(&f).unwrap();
        prop_assert_eq!((s, d), (sp, dp));
        if udp {
            prop_assert_eq!(&f[body], &inner[..]);
        } else {
            let v = VxlanHeader::new_checked(&f[body]).unwrap();
            prop_assert_eq!(v.vni(), vni);
            prop_assert_eq!(v.payload(), &inner[..]);
        }
    }

    #[test]
    fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..120)) {
        if let Ok(o) = OuterV4::parse(&b)
            && let Ok((_, _, body)) = o.udp(&b)
        {
            let _ = VxlanHeader::new_checked(&b[body]).map(|v| (v.vni(), v.payload().len()));
        }
    }
}
