use std::net::Ipv4Addr;

use vrhost_packet::testdata::VXLAN_FRAME;
use vrhost_packet::tunnel::{OuterV4, VXLAN_OVERHEAD, VXLAN_PORT, VxlanHeader};
use vrhost_shm::SlotState;

use super::*;
use crate::vrpath::testkit::Kit;

const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];

/// The tunnel the captured Linux frame (`VXLAN_FRAME`) belongs to, seen
/// from its receiver, on port `port`.
fn vxlan42(port: usize) -> Tunnel {
    Tunnel {
        kind: TunnelKind::Vxlan,
        port,
        local: LOCAL,
        remote: REMOTE,
        udp_port: VXLAN_PORT,
        vni: 42,
        local_mac: OUR_MAC,
        remote_mac: None,
        inner_mac: [0xff; 6],
    }
}

fn table(t: Tunnel) -> TunnelTable {
    let mut tt = TunnelTable::default();
    tt.add(t, 3, 1);
    tt
}

fn ip_checksum_fixed(mut f: Vec<u8>) -> Vec<u8> {
    let mut ip = vrhost_packet::ipv4::Ipv4Packet::new_unchecked(&mut f[14..34]);
    ip.fill_checksum();
    f
}

#[test]
fn a_linux_vxlan_frame_goes_to_its_vni_s_vnic_without_its_outer_headers() {
    let t = table(vxlan42(0));
    match t.decap(0, &VXLAN_FRAME) {
        Decap::Inner {
            vr,
            vnic,
            head,
            body,
            peer_mac,
        } => {
            assert_eq!((vr, vnic, head, peer_mac), (3, 1, None, PEER_MAC));
            assert_eq!(body, &VXLAN_FRAME[VXLAN_OVERHEAD..]);
        }
        d => panic!("{d:?}"),
    }
    // Another port, or a table without tunnels: not a tunnel frame.
    assert_eq!(t.decap(1, &VXLAN_FRAME), Decap::NotTunnel);
    assert_eq!(
        TunnelTable::default().decap(0, &VXLAN_FRAME),
        Decap::NotTunnel
    );
}

#[test]
fn malformed_and_unknown_tunnel_frames_are_drops_by_reason() {
    let t = table(vxlan42(0));
    let drop = |f: &[u8]| match t.decap(0, f) {
        Decap::Drop(why) => why.name(),
        d => panic!("{d:?}"),
    };
    let f = VXLAN_FRAME.to_vec();
    let mut vni = f.clone();
    vni[48] = 43;
    assert_eq!(drop(&vni), "tunnel_unknown");
    let mut remote = f.clone();
    remote[29] = 9;
    assert_eq!(drop(&ip_checksum_fixed(remote)), "tunnel_unknown");
    let mut csum = f.clone();
    csum[24] ^= 0x40;
    assert_eq!(drop(&csum), "tunnel_checksum");
    let mut frag = f.clone();
    frag[20] = 0x20;
    assert_eq!(drop(&ip_checksum_fixed(frag)), "tunnel_fragment");
    let mut flags = f.clone();
    flags[42] = 0;
    assert_eq!(drop(&flags), "tunnel_bad_header");
    // Cut short: the IPv4 total length runs past the frame.
    assert_eq!(drop(&f[..100]), "tunnel_malformed");
    // A UDP length past the IPv4 payload.
    let mut ulen = f.clone();
    ulen[38..40].copy_from_slice(&200u16.to_be_bytes());
    assert_eq!(drop(&ulen), "tunnel_malformed");
    // Other UDP to the local address, and ARP: not tunnel frames.
    let mut dns = f.clone();
    dns[36..38].copy_from_slice(&53u16.to_be_bytes());
    assert_eq!(t.decap(0, &dns), Decap::NotTunnel);
    let arp = vrhost_packet::testdata::ARP_REQUEST_FRAME;
    assert_eq!(t.decap(0, &arp), Decap::NotTunnel);
}

#[test]
fn an_ipip_packet_gets_an_ethernet_header_made_up_for_it() {
    let mut tun = vxlan42(0);
    tun.kind = TunnelKind::Ipip;
    tun.udp_port = 0;
    tun.vni = 0;
    tun.inner_mac = [2, 0, 0, 0, 1, 1];
    let t = table(tun);
    let inner = crate::testkit::udp(Ipv4Addr::new(10, 1, 0, 2), 7, Ipv4Addr::new(10, 2, 0, 2), 9);
    let mut e = Encap::new(Tunnel {
        local: REMOTE,
        remote: LOCAL,
        remote_mac: Some(OUR_MAC),
        local_mac: PEER_MAC,
        ..tun
    });
    let h = e.header(&inner).unwrap();
    assert_eq!((h.len, h.strip), (34, 14));
    let frame = [&h.hdr[..h.len], &inner[14..]].concat();
    match t.decap(0, &frame) {
        Decap::Inner { head, body, .. } => {
            let head = head.unwrap();
            assert_eq!(&head[..6], &[2, 0, 0, 0, 1, 1]);
            assert_eq!(&head[6..12], &PEER_MAC);
            assert_eq!([&head[..], body].concat()[12..], inner[12..]);
        }
        d => panic!("{d:?}"),
    }
    // Not IPv4 inside: refused on the way out and on the way in.
    let arp = vrhost_packet::testdata::ARP_REQUEST_FRAME;
    assert_eq!(e.header(&arp).unwrap_err(), EgressDrop::TunnelNotIpv4);
    let mut bad = frame.clone();
    bad[34] = 0x65;
    assert_eq!(t.decap(0, &bad), Decap::Drop(IngressDrop::TunnelMalformed));
}

#[test]
fn the_peer_mac_is_configured_or_learned() {
    let mut e = Encap::new(vxlan42(0));
    let inner = &VXLAN_FRAME[VXLAN_OVERHEAD..];
    assert_eq!(e.header(inner).unwrap_err(), EgressDrop::TunnelNoMac);
    e.learn(PEER_MAC);
    let h = e.header(inner).unwrap();
    assert_eq!(&h.hdr[..6], &PEER_MAC);
    let mut fixed = Encap::new(Tunnel {
        remote_mac: Some([2, 2, 2, 2, 2, 2]),
        ..vxlan42(0)
    });
    fixed.learn(PEER_MAC);
    assert_eq!(
        fixed.peer_mac(),
        Some([2, 2, 2, 2, 2, 2]),
        "configured wins"
    );
}

#[test]
fn a_vr_s_frame_leaves_a_tunnel_vnic_encapsulated_in_its_headroom() {
    // vNIC 0 plain, vNIC 1 a VXLAN tunnel on port 1.
    let mut k = Kit::new(2, 1, 64, 64);
    k.vp.set_tunnels(&[None, Some(vxlan42(1))]);
    assert_eq!(k.vp.tunnels(), vec![None, Some(vxlan42(1))]);
    let inner = crate::testkit::udp(
        Ipv4Addr::new(10, 1, 0, 2),
        1000,
        Ipv4Addr::new(10, 2, 0, 2),
        2000,
    );
    // No peer MAC yet: a counted drop.
    k.through(&inner, 1, SlotState::Processed);
    k.vp.poll_tx(&mut k.ports);
    assert!(k.sent(1).is_empty());
    let drops = &k.vp.stats().egress_drops;
    assert_eq!(drops[EgressDrop::TunnelNoMac as usize].get(), 1);
    // A frame from the peer teaches its MAC (and reaches vNIC 1).
    k.vp.stage_tunneled(1, &[], &VXLAN_FRAME[VXLAN_OVERHEAD..], PEER_MAC)
        .unwrap();
    k.vp.flush_rx(&mut k.ports);
    let got = k.take(0, 1);
    assert_eq!(k.bytes(got[0]), &VXLAN_FRAME[VXLAN_OVERHEAD..]);
    k.hand_back(0, 1, &got, SlotState::Dropped);
    assert_eq!(k.vp.tunnel_peer_macs(), vec![None, Some(PEER_MAC)]);
    // Now it goes out, encapsulated; vNIC 0 stays plain.
    k.through(&inner, 1, SlotState::Processed);
    k.through(&inner, 0, SlotState::Processed);
    k.vp.poll_tx(&mut k.ports);
    assert_eq!(k.sent(0), vec![inner.clone()]);
    let out = k.sent(1);
    assert_eq!(out.len(), 1);
    let f = &out[0];
    assert_eq!(f.len(), inner.len() + VXLAN_OVERHEAD);
    let o = OuterV4::parse(f).unwrap();
    assert_eq!((o.src, o.dst, o.src_mac), (LOCAL, REMOTE, OUR_MAC));
    assert_eq!(&f[..6], &PEER_MAC);
    let (sport, dport, body) = o.udp(f).unwrap();
    assert_eq!(dport, VXLAN_PORT);
    assert!((32768..=60999).contains(&sport));
    let v = VxlanHeader::new_checked(&f[body]).unwrap();
    assert_eq!((v.vni(), v.payload()), (42, &inner[..]));
    assert!(k.vp.is_drained());
    k.vp.check_slot_accounting().unwrap();
}

#[test]
fn a_frame_without_headroom_is_a_counted_drop() {
    let mut k = Kit::new(1, 1, 64, 64);
    let mut t = vxlan42(0);
    t.remote_mac = Some(PEER_MAC);
    k.vp.set_tunnels(&[Some(t)]);
    let slots = {
        k.give(0, &crate::vrpath::testkit::frame(1));
        k.take(0, 0)
    };
    // The VR moved its frame to the start of the slot.
    k.vp.region().meta(slots[0]).unwrap().set_extent(10, 64);
    k.hand_back(0, 0, &slots, SlotState::Processed);
    k.vp.poll_tx(&mut k.ports);
    assert!(k.sent(0).is_empty());
    let drops = &k.vp.stats().egress_drops;
    assert_eq!(drops[EgressDrop::TunnelHeadroom as usize].get(), 1);
    assert!(k.vp.is_drained());
}

#[test]
fn a_udp_tunnel_carries_the_ethernet_frame_without_a_vxlan_header() {
    let udp = Tunnel {
        kind: TunnelKind::Udp,
        udp_port: 6000,
        vni: 0,
        remote_mac: Some(PEER_MAC),
        ..vxlan42(0)
    };
    // What the peer sends: the mirror image of this end.
    let mut peer = Encap::new(Tunnel {
        local: REMOTE,
        remote: LOCAL,
        local_mac: PEER_MAC,
        remote_mac: Some(OUR_MAC),
        ..udp
    });
    let inner = &VXLAN_FRAME[VXLAN_OVERHEAD..];
    let h = peer.header(inner).unwrap();
    assert_eq!((h.len, h.strip), (42, 0));
    let frame = [&h.hdr[..h.len], inner].concat();
    let t = table(udp);
    match t.decap(0, &frame) {
        Decap::Inner { head, body, .. } => assert_eq!((head, body), (None, inner)),
        d => panic!("{d:?}"),
    }
    // A VXLAN tunnel on the same addresses and another port does not take it.
    assert_eq!(table(vxlan42(0)).decap(0, &frame), Decap::NotTunnel);
    // An inner frame shorter than an Ethernet header.
    let short = peer.header(&inner[..10]).unwrap();
    let runt = [&short.hdr[..short.len], &inner[..10]].concat();
    assert_eq!(t.decap(0, &runt), Decap::Drop(IngressDrop::TunnelMalformed));
}

#[test]
fn arp_for_a_tunnel_s_local_address_is_answered_with_its_mac() {
    let t = table(vxlan42(0));
    // Who has 192.0.2.2? Tell 192.0.2.1 (at the peer's MAC).
    let mut req = vec![0xff; 6];
    req.extend_from_slice(&PEER_MAC);
    req.extend_from_slice(&[0x08, 0x06]);
    req.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    req.extend_from_slice(&PEER_MAC);
    req.extend_from_slice(&REMOTE.octets());
    req.extend_from_slice(&[0; 6]);
    req.extend_from_slice(&LOCAL.octets());
    let mut out = [0u8; ARP_REPLY_LEN];
    assert!(t.arp_reply(0, &req, &mut out));
    let mut want = PEER_MAC.to_vec();
    want.extend_from_slice(&OUR_MAC);
    want.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 2]);
    want.extend_from_slice(&OUR_MAC);
    want.extend_from_slice(&LOCAL.octets());
    want.extend_from_slice(&PEER_MAC);
    want.extend_from_slice(&REMOTE.octets());
    want.resize(ARP_REPLY_LEN, 0);
    assert_eq!(out.to_vec(), want);
    // Another port, another address, a reply, a runt: no answer.
    assert!(!t.arp_reply(1, &req, &mut out));
    let mut other = req.clone();
    other[41] = 3;
    assert!(!t.arp_reply(0, &other, &mut out));
    let mut reply = req.clone();
    reply[21] = 2;
    assert!(!t.arp_reply(0, &reply, &mut out));
    assert!(!t.arp_reply(0, &req[..30], &mut out));
    assert!(!t.arp_reply(0, &VXLAN_FRAME, &mut out));
}

#[test]
fn among_a_thousand_vnis_each_frame_finds_its_own() {
    let mut t = TunnelTable::default();
    for vni in 0..1000u32 {
        t.add(Tunnel { vni, ..vxlan42(0) }, vni as usize, 0);
    }
    for vni in [0u32, 42, 999] {
        let mut f = VXLAN_FRAME;
        f[46..49].copy_from_slice(&vni.to_be_bytes()[1..]);
        match t.decap(0, &f) {
            Decap::Inner { vr, .. } => assert_eq!(vr, vni as usize),
            d => panic!("{vni}: {d:?}"),
        }
    }
    let mut f = VXLAN_FRAME;
    f[46..49].copy_from_slice(&1000u32.to_be_bytes()[1..]);
    assert_eq!(t.decap(0, &f), Decap::Drop(IngressDrop::TunnelUnknown));
}

#[test]
fn the_outer_source_port_follows_the_inner_flow() {
    let mut e = Encap::new(Tunnel {
        remote_mac: Some(PEER_MAC),
        ..vxlan42(0)
    });
    let port = |e: &mut Encap, sport: u16| {
        let f = crate::testkit::udp(
            Ipv4Addr::new(10, 1, 0, 2),
            sport,
            Ipv4Addr::new(10, 2, 0, 2),
            9,
        );
        let h = e.header(&f).unwrap();
        u16::from_be_bytes([h.hdr[34], h.hdr[35]])
    };
    let mut ports: Vec<u16> = (0..64).map(|s| port(&mut e, 1000 + s)).collect();
    // One flow, one port: its frames stay on one ECMP path.
    assert_eq!(port(&mut e, 1000), ports[0]);
    ports.sort_unstable();
    ports.dedup();
    assert!(ports.len() > 48, "64 flows over {} ports", ports.len());
}
