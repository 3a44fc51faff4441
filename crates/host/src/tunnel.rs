//! Tunnels as vNIC endpoints: VXLAN, plain UDP and IP-in-IP over IPv4.
//!
//! A vNIC may name a tunnel instead of a port. Its frames then travel
//! encapsulated on the tunnel's underlay port, between the tunnel's local
//! and remote addresses:
//! - on the way in, the worker asks the [`TunnelTable`] about every frame
//!   of a port that carries tunnels, before the classifier: a frame
//!   addressed to a tunnel's local address (UDP to its port, or IPv4
//!   protocol 4) has its outer headers checked and stripped, and its inner
//!   Ethernet frame (VXLAN, UDP) or inner IPv4 packet behind an Ethernet
//!   header made up for it (IP-in-IP) goes to the tunnel's vNIC. The
//!   tunnel is found by VNI (VXLAN) and outer addresses; malformed or
//!   unknown tunnel frames are counted drops, by reason ([`IngressDrop`]);
//! - on the way out, the VR's frame gets outer headers written in front of
//!   it, in its slot's headroom ([`Encap`]); no copy, no allocation.
//!
//! The outer destination MAC is the tunnel's `remote_mac` when configured,
//! else the source MAC of the last valid frame received from the remote
//! (learned): until one came, frames out are dropped as `tunnel_no_mac`.
//! The host answers ARP requests for a tunnel's local address on its
//! underlay port ([`TunnelTable::arp_reply`]), with the tunnel's
//! `local_mac`; it sends no ARP of its own.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use vrhost_packet::arp::{ArpOperation, ArpPacket, ArpRepr};
use vrhost_packet::ethernet::{self, EtherType};
use vrhost_packet::ipv4::proto;
use vrhost_packet::tunnel::{EncapKind, EncapRepr, OuterV4, VxlanHeader, flow_src_port};
use vrhost_packet::{MacAddr, ParseError};

use crate::balance::flow_hash;
use crate::stats::{EgressDrop, IngressDrop};

/// Length of the ARP replies [`TunnelTable::arp_reply`] writes: the
/// minimum Ethernet frame without FCS.
pub const ARP_REPLY_LEN: usize = 60;

/// Outer TTL of the frames a tunnel sends.
pub const OUTER_TTL: u8 = 64;

/// Which encapsulation a tunnel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// VXLAN (RFC 7348): an Ethernet frame behind UDP and a VNI.
    Vxlan,
    /// An Ethernet frame as a UDP payload.
    Udp,
    /// IPv4 in IPv4 (RFC 2003): the inner IPv4 packet only.
    Ipip,
}

impl TunnelKind {
    /// The name used in the config.
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Udp => "udp",
            TunnelKind::Ipip => "ipip",
        }
    }
}

/// One tunnel, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tunnel {
    /// Encapsulation.
    pub kind: TunnelKind,
    /// Underlay port index.
    pub port: usize,
    /// Local underlay address (outer source out, destination in).
    pub local: Ipv4Addr,
    /// Remote underlay address.
    pub remote: Ipv4Addr,
    /// UDP destination port (VXLAN, UDP; 0 for IP-in-IP).
    pub udp_port: u16,
    /// VNI (VXLAN; 0 otherwise).
    pub vni: u32,
    /// Outer source MAC: the underlay port's.
    pub local_mac: [u8; 6],
    /// Outer destination MAC, if configured (else learned).
    pub remote_mac: Option<[u8; 6]>,
    /// IP-in-IP: the destination MAC of the Ethernet header made up for
    /// an inner packet (the vNIC's MAC, or broadcast).
    pub inner_mac: [u8; 6],
}

impl Tunnel {
    fn encap_kind(&self) -> EncapKind {
        match self.kind {
            TunnelKind::Vxlan => EncapKind::Vxlan(self.vni),
            TunnelKind::Udp => EncapKind::Udp,
            TunnelKind::Ipip => EncapKind::Ipip,
        }
    }
}

/// A tunnel and the vNIC it feeds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct End {
    t: Tunnel,
    vr: usize,
    vnic: u16,
}

/// What [`TunnelTable::decap`] made of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decap<'a> {
    /// Not addressed to a tunnel: classify it as any frame.
    NotTunnel,
    /// A tunnel frame that cannot be delivered.
    Drop(IngressDrop),
    /// A tunnel frame for VR `vr`'s vNIC `vnic`: `head` (an Ethernet
    /// header made up for IP-in-IP, else empty) then `body` is the frame.
    Inner {
        /// VR index.
        vr: usize,
        /// vNIC.
        vnic: u16,
        /// Ethernet header made up for an IP-in-IP packet.
        head: Option<[u8; ethernet::HEADER_LEN]>,
        /// The inner frame (or IPv4 packet).
        body: &'a [u8],
        /// The outer source MAC (the remote's, or its next hop's).
        peer_mac: [u8; 6],
    },
}

/// What tells a tunnel's frames apart: underlay port, local and remote
/// addresses, UDP port (0: IP-in-IP) and VNI (0 but for VXLAN).
type EndKey = (usize, u32, u32, u16, u32);

/// What tells a frame for some tunnel from others: underlay port, local
/// address, UDP port (0: IP-in-IP).
type LocalKey = (usize, u32, u16);

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The tunnels of the host, for the way in: two hash lookups per frame of
/// an underlay port, however many tunnels (VNIs) it carries.
#[derive(Debug, Clone, Default)]
pub struct TunnelTable {
    ends: Vec<End>,
    /// Index in `ends` by what tells the frames apart.
    by_key: Map<EndKey, usize>,
    /// The local endpoints, each with whether it is VXLAN's.
    locals: Map<LocalKey, bool>,
    /// Ports that carry a tunnel, one bit each (ports 64 and above: the
    /// last bit).
    ports: u64,
}

impl PartialEq for TunnelTable {
    fn eq(&self, other: &Self) -> bool {
        self.ends == other.ends
    }
}

impl Eq for TunnelTable {}

fn end_key(t: &Tunnel) -> EndKey {
    (
        t.port,
        t.local.to_bits(),
        t.remote.to_bits(),
        t.udp_port,
        t.vni,
    )
}

fn port_bit(port: usize) -> u64 {
    1 << port.min(63)
}

impl TunnelTable {
    /// Add tunnel `t`, which feeds VR `vr`'s vNIC `vnic`.
    /// A tunnel that frames cannot tell from one added before (the
    /// config refuses those) is not reached.
    pub fn add(&mut self, t: Tunnel, vr: usize, vnic: u16) {
        self.ports |= port_bit(t.port);
        self.by_key.entry(end_key(&t)).or_insert(self.ends.len());
        self.locals
            .entry((t.port, t.local.to_bits(), t.udp_port))
            .or_insert(t.kind == TunnelKind::Vxlan);
        self.ends.push(End { t, vr, vnic });
    }

    /// Whether it holds no tunnel.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Whether `frame`, received on `port`, is addressed to a tunnel's
    /// local address with its encapsulation (untagged IPv4 to a local
    /// address, UDP to a tunnel's port or protocol 4), and if so whether
    /// that is VXLAN's. Reads no more than the headers; checks nothing
    /// else.
    #[inline]
    fn is_for_us(&self, port: usize, f: &[u8]) -> Option<bool> {
        const IP: usize = ethernet::HEADER_LEN;
        if f.len() < IP + 20 || f[12..14] != EtherType::IPV4.0.to_be_bytes() {
            return None;
        }
        let dst = u32::from_be_bytes([f[IP + 16], f[IP + 17], f[IP + 18], f[IP + 19]]);
        let udp_port = match f[IP + 9] {
            proto::IPIP => 0,
            proto::UDP => {
                let l4 = IP + usize::from(f[IP] & 0xf) * 4;
                let b = f.get(l4 + 2..l4 + 4)?;
                match u16::from_be_bytes([b[0], b[1]]) {
                    0 => return None,
                    p => p,
                }
            }
            _ => return None,
        };
        self.locals.get(&(port, dst, udp_port)).copied()
    }

    /// Take `frame`, received on `port`, apart if it is a tunnel's.
    #[inline]
    pub fn decap<'a>(&self, port: usize, frame: &'a [u8]) -> Decap<'a> {
        if self.ports & port_bit(port) == 0 {
            return Decap::NotTunnel;
        }
        let Some(vxlan) = self.is_for_us(port, frame) else {
            return Decap::NotTunnel;
        };
        match self.decap_checked(port, frame, vxlan) {
            Ok(d) => d,
            Err(why) => Decap::Drop(why),
        }
    }

    fn decap_checked<'a>(
        &self,
        port: usize,
        f: &'a [u8],
        vxlan: bool,
    ) -> Result<Decap<'a>, IngressDrop> {
        let o = OuterV4::parse(f).map_err(outer_drop)?;
        let (udp_port, vni, body) = match o.protocol {
            proto::IPIP => (0, 0, &f[o.payload_at..o.payload_end]),
            _ => {
                let (_, dport, body) = o.udp(f).map_err(outer_drop)?;
                let body = &f[body];
                match vxlan {
                    true => {
                        let v = VxlanHeader::new_checked(body).map_err(outer_drop)?;
                        (dport, v.vni(), &body[8..])
                    }
                    false => (dport, 0, body),
                }
            }
        };
        let key = (port, o.dst.to_bits(), o.src.to_bits(), udp_port, vni);
        let Some(e) = self.by_key.get(&key).map(|&i| &self.ends[i]) else {
            return Err(IngressDrop::TunnelUnknown);
        };
        let head = match e.t.kind {
            TunnelKind::Ipip => {
                if body.len() < 20 || body[0] >> 4 != 4 {
                    return Err(IngressDrop::TunnelMalformed);
                }
                let mut h = [0u8; ethernet::HEADER_LEN];
                h[0..6].copy_from_slice(&e.t.inner_mac);
                h[6..12].copy_from_slice(&o.src_mac);
                h[12..14].copy_from_slice(&EtherType::IPV4.0.to_be_bytes());
                Some(h)
            }
            _ if body.len() < ethernet::HEADER_LEN => return Err(IngressDrop::TunnelMalformed),
            _ => None,
        };
        Ok(Decap::Inner {
            vr: e.vr,
            vnic: e.vnic,
            head,
            body,
            peer_mac: o.src_mac,
        })
    }

    /// The reply to `frame`, received on `port`, if it is an ARP request
    /// for a tunnel's local address on that port: written into `out` (a
    /// minimum-size Ethernet frame, zero-padded), from the tunnel's
    /// `local_mac`. The underlay's peer then needs no static neighbour.
    #[inline]
    pub fn arp_reply(&self, port: usize, frame: &[u8], out: &mut [u8; ARP_REPLY_LEN]) -> bool {
        if self.ports & port_bit(port) == 0
            || frame.get(12..14) != Some(&EtherType::ARP.0.to_be_bytes()[..])
        {
            return false;
        }
        let Ok(arp) = ArpPacket::new_checked(&frame[ethernet::HEADER_LEN..]) else {
            return false;
        };
        let asked = arp.target_protocol_addr();
        let Some(e) = self
            .ends
            .iter()
            .find(|e| e.t.port == port && e.t.local == asked)
        else {
            return false;
        };
        if arp.operation() != ArpOperation::Request {
            return false;
        }
        let (mac, ip) = (arp.sender_hardware_addr(), arp.sender_protocol_addr());
        out.fill(0);
        out[0..6].copy_from_slice(&mac.0);
        out[6..12].copy_from_slice(&e.t.local_mac);
        out[12..14].copy_from_slice(&EtherType::ARP.0.to_be_bytes());
        ArpRepr {
            operation: ArpOperation::Reply,
            sender_hardware_addr: MacAddr(e.t.local_mac),
            sender_protocol_addr: asked,
            target_hardware_addr: mac,
            target_protocol_addr: ip,
        }
        .emit(&mut out[ethernet::HEADER_LEN..]);
        true
    }
}

/// The counter of an outer header that does not parse.
fn outer_drop(e: ParseError) -> IngressDrop {
    match e {
        ParseError::BadChecksum => IngressDrop::TunnelChecksum,
        ParseError::Fragment => IngressDrop::TunnelFragment,
        ParseError::BadVxlanFlags => IngressDrop::TunnelBadHeader,
        _ => IngressDrop::TunnelMalformed,
    }
}

/// Most bytes of outer headers a tunnel writes.
pub const MAX_OVERHEAD: usize = vrhost_packet::tunnel::VXLAN_OVERHEAD;

/// A tunnel vNIC's way out: the tunnel, the peer's MAC and the outer
/// IPv4 identification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encap {
    t: Tunnel,
    peer_mac: Option<[u8; 6]>,
    ident: u16,
}

/// Outer headers for one frame: write `hdr[..len]` so that it ends where
/// the inner data begins, `strip` bytes into the VR's frame.
#[derive(Debug, Clone, Copy)]
pub struct OuterHeader {
    /// The headers.
    pub hdr: [u8; MAX_OVERHEAD],
    /// Their length.
    pub len: usize,
    /// Bytes of the VR's frame they replace (IP-in-IP: its Ethernet
    /// header).
    pub strip: usize,
}

impl Encap {
    /// The way out of tunnel `t`.
    pub fn new(t: Tunnel) -> Self {
        Self {
            t,
            peer_mac: t.remote_mac,
            ident: 0,
        }
    }

    /// The tunnel.
    pub fn tunnel(&self) -> &Tunnel {
        &self.t
    }

    /// The outer destination MAC it uses now, if known.
    pub fn peer_mac(&self) -> Option<[u8; 6]> {
        self.peer_mac
    }

    /// A valid frame came from the remote with outer source MAC `mac`:
    /// the peer's MAC, unless one is configured.
    #[inline]
    pub fn learn(&mut self, mac: [u8; 6]) {
        if self.t.remote_mac.is_none() {
            self.peer_mac = Some(mac);
        }
    }

    /// The outer headers for the VR's `frame` (an Ethernet frame).
    ///
    /// # Errors
    /// No peer MAC yet; IP-in-IP of a frame that is not untagged IPv4; an
    /// outer packet over 65535 bytes.
    #[inline]
    pub fn header(&mut self, frame: &[u8]) -> Result<OuterHeader, EgressDrop> {
        let Some(dst_mac) = self.peer_mac else {
            return Err(EgressDrop::TunnelNoMac);
        };
        let kind = self.t.encap_kind();
        let strip = match kind {
            EncapKind::Ipip => {
                if frame.len() < ethernet::HEADER_LEN + 20
                    || frame[12..14] != EtherType::IPV4.0.to_be_bytes()
                {
                    return Err(EgressDrop::TunnelNotIpv4);
                }
                ethernet::HEADER_LEN
            }
            _ => 0,
        };
        self.ident = self.ident.wrapping_add(1);
        let r = EncapRepr {
            kind,
            dst_mac,
            src_mac: self.t.local_mac,
            src: self.t.local,
            dst: self.t.remote,
            ident: self.ident,
            ttl: OUTER_TTL,
            src_port: flow_src_port(flow_hash(frame)),
            dst_port: self.t.udp_port,
        };
        let mut out = OuterHeader {
            hdr: [0; MAX_OVERHEAD],
            len: kind.overhead(),
            strip,
        };
        r.emit(&mut out.hdr[..out.len], frame.len() - strip)
            .map_err(|_| EgressDrop::TunnelTooBig)?;
        Ok(out)
    }
}

#[cfg(test)]
#[path = "tunnel_tests.rs"]
mod tests;
