//! Tunnel encapsulations over IPv4: VXLAN (RFC 7348), plain UDP (an
//! Ethernet frame as a UDP payload, PdP's tunnel without its tag) and
//! IP-in-IP (RFC 2003, IPv4 protocol 4).
//!
//! [`VxlanHeader`] is the 8-byte VXLAN header view. [`OuterV4::parse`]
//! checks an encapsulated frame's outer Ethernet and IPv4 headers as a
//! tunnel endpoint must before it trusts them (the outer checksum, no
//! fragment, the lengths); [`OuterV4::udp`] then checks the outer UDP
//! header's lengths (not its checksum: see there). [`EncapRepr::emit`] writes the outer headers in front of an inner
//! frame or packet already in place (in a slot's headroom), with the outer
//! IPv4 checksum and, as Linux sends VXLAN over IPv4 by default, a UDP
//! checksum of 0.

use core::net::Ipv4Addr;

use crate::ParseError;
use crate::bytes::{read_u32, write_u16};
use crate::ethernet::{self, EtherType, EthernetFrame};
use crate::ipv4::{self, Ipv4Packet, Ipv4Repr, proto};
use crate::udp::{self, UdpPacket};

/// IANA's VXLAN UDP port.
pub const VXLAN_PORT: u16 = 4789;
/// Length of the VXLAN header.
pub const VXLAN_HEADER_LEN: usize = 8;
/// The VXLAN "I" flag: the VNI is valid (RFC 7348 5).
pub const VXLAN_FLAG_I: u8 = 0x08;
/// Largest VNI (24 bits).
pub const VNI_MAX: u32 = 0x00ff_ffff;

/// Outer headers of a VXLAN frame: Ethernet, IPv4, UDP, VXLAN.
pub const VXLAN_OVERHEAD: usize =
    ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN + VXLAN_HEADER_LEN;
/// Outer headers of a plain UDP tunnel frame: Ethernet, IPv4, UDP.
pub const UDP_OVERHEAD: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
/// Outer headers of an IP-in-IP frame: Ethernet, IPv4 (the inner packet
/// carries no Ethernet header of its own).
pub const IPIP_OVERHEAD: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN;

mod field {
    use core::ops::Range;
    pub const FLAGS: usize = 0;
    /// VNI (3 bytes) and the reserved byte after it.
    pub const VNI_RSVD: Range<usize> = 4..8;
}

/// A view of a VXLAN header (and what follows it) in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VxlanHeader<T> {
    /// Wrap a buffer without checks; accessors may panic on a short one.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        VxlanHeader { buffer }
    }

    /// Wrap a buffer after [`check`](Self::check).
    ///
    /// # Errors
    /// As [`check`](Self::check).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let h = Self::new_unchecked(buffer);
        h.check()?;
        Ok(h)
    }

    /// Check the header is present and its I flag set. The other flag and
    /// reserved bits are ignored, as RFC 7348 asks of a receiver.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] below 8 bytes; [`ParseError::BadVxlanFlags`]
    /// when the I flag is clear (no valid VNI).
    #[inline]
    pub fn check(&self) -> Result<(), ParseError> {
        let b = self.buffer.as_ref();
        if b.len() < VXLAN_HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        if b[field::FLAGS] & VXLAN_FLAG_I == 0 {
            return Err(ParseError::BadVxlanFlags);
        }
        Ok(())
    }

    /// The flags byte.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The 24-bit VXLAN network identifier.
    #[inline]
    pub fn vni(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::VNI_RSVD) >> 8
    }

    /// The encapsulated Ethernet frame.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[VXLAN_HEADER_LEN..]
    }
}

/// Write a VXLAN header (I flag, `vni`, reserved bits zero) into the first
/// 8 bytes of `buf`.
///
/// # Panics
/// If `buf` is shorter than 8 bytes.
#[inline]
pub fn emit_vxlan(buf: &mut [u8], vni: u32) {
    buf[..VXLAN_HEADER_LEN].fill(0);
    buf[field::FLAGS] = VXLAN_FLAG_I;
    buf[field::VNI_RSVD].copy_from_slice(&((vni & VNI_MAX) << 8).to_be_bytes());
}

/// The outer Ethernet and IPv4 headers of a frame a tunnel endpoint
/// received, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OuterV4 {
    /// Outer source MAC (the underlay's next hop toward the peer).
    pub src_mac: [u8; 6],
    /// Outer source address.
    pub src: Ipv4Addr,
    /// Outer destination address.
    pub dst: Ipv4Addr,
    /// Outer IP protocol (17 for UDP and VXLAN, 4 for IP-in-IP).
    pub protocol: u8,
    /// Offset of the IPv4 payload in the frame.
    pub payload_at: usize,
    /// End of the IPv4 payload (its total length; padding after it is not
    /// part of the packet).
    pub payload_end: usize,
}

impl OuterV4 {
    /// Check the outer headers of `frame`: Ethernet (an 802.1Q tag is
    /// allowed) carrying IPv4, a valid IPv4 header whose checksum verifies
    /// and that is not a fragment.
    ///
    /// # Errors
    /// [`ParseError::Truncated`], [`ParseError::WrongEtherType`], the IPv4
    /// view's errors, [`ParseError::BadChecksum`], [`ParseError::Fragment`].
    pub fn parse(frame: &[u8]) -> Result<OuterV4, ParseError> {
        let eth = EthernetFrame::new_checked(frame)?;
        if eth.inner_ethertype() != EtherType::IPV4 {
            return Err(ParseError::WrongEtherType);
        }
        let at = eth.header_len();
        let ip = Ipv4Packet::new_checked(&frame[at..])?;
        if !ip.verify_checksum() {
            return Err(ParseError::BadChecksum);
        }
        if ip.is_fragment() {
            return Err(ParseError::Fragment);
        }
        Ok(OuterV4 {
            src_mac: eth.src_addr().0,
            src: ip.src_addr(),
            dst: ip.dst_addr(),
            protocol: ip.protocol(),
            payload_at: at + ip.header_len(),
            payload_end: at + usize::from(ip.total_len()),
        })
    }

    /// The outer UDP header of `frame` (whose outer IPv4 is `self`):
    /// `(source port, destination port, payload range in the frame)`.
    ///
    /// The UDP checksum is not verified: RFC 7348 (5) lets a VXLAN
    /// receiver skip it, the inner frame carries its own, and a frame read
    /// from a veth or virtio interface with checksum offload (as an
    /// AF_PACKET socket sees a local Linux VXLAN device's frames) holds only
    /// the pseudo-header's partial sum there. The outer IPv4 checksum is
    /// always complete and [`OuterV4::parse`] checks it.
    ///
    /// # Errors
    /// [`ParseError::WrongProtocol`] if not UDP; the UDP view's errors (the
    /// length field must fit the IPv4 payload).
    pub fn udp(&self, frame: &[u8]) -> Result<(u16, u16, core::ops::Range<usize>), ParseError> {
        if self.protocol != proto::UDP {
            return Err(ParseError::WrongProtocol);
        }
        let l4 = frame
            .get(self.payload_at..self.payload_end)
            .ok_or(ParseError::Truncated)?;
        let u = UdpPacket::new_checked(l4)?;
        let start = self.payload_at + udp::HEADER_LEN;
        Ok((
            u.src_port(),
            u.dst_port(),
            start..self.payload_at + usize::from(u.len()),
        ))
    }
}

/// Which encapsulation [`EncapRepr::emit`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EncapKind {
    /// VXLAN with this VNI, an inner Ethernet frame.
    Vxlan(u32),
    /// Plain UDP, an inner Ethernet frame.
    Udp,
    /// IP-in-IP, an inner IPv4 packet.
    Ipip,
}

impl EncapKind {
    /// Bytes of outer headers.
    pub const fn overhead(self) -> usize {
        match self {
            EncapKind::Vxlan(_) => VXLAN_OVERHEAD,
            EncapKind::Udp => UDP_OVERHEAD,
            EncapKind::Ipip => IPIP_OVERHEAD,
        }
    }
}

/// The outer headers of one encapsulated frame, as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncapRepr {
    /// Encapsulation.
    pub kind: EncapKind,
    /// Outer destination MAC (the peer, or the underlay's next hop).
    pub dst_mac: [u8; 6],
    /// Outer source MAC (the underlay port's).
    pub src_mac: [u8; 6],
    /// Outer source address (the local endpoint).
    pub src: Ipv4Addr,
    /// Outer destination address (the remote endpoint).
    pub dst: Ipv4Addr,
    /// Outer IPv4 identification.
    pub ident: u16,
    /// Outer TTL.
    pub ttl: u8,
    /// UDP source port (a hash of the inner flow, for ECMP).
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
}

impl EncapRepr {
    /// Write the outer headers into `hdr` (exactly
    /// [`EncapKind::overhead`] bytes) for an inner frame or packet of
    /// `inner_len` bytes that follows them. The outer IPv4 header carries
    /// DF clear and its checksum; the UDP checksum is 0.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if `hdr` is not the overhead's length;
    /// [`ParseError::Unsupported`] if the outer packet would exceed 65535
    /// bytes.
    pub fn emit(&self, hdr: &mut [u8], inner_len: usize) -> Result<(), ParseError> {
        let over = self.kind.overhead();
        if hdr.len() != over {
            return Err(ParseError::Truncated);
        }
        let ip_len = over - ethernet::HEADER_LEN + inner_len;
        if ip_len > usize::from(u16::MAX) {
            return Err(ParseError::Unsupported);
        }
        let payload_len = (ip_len - ipv4::HEADER_LEN) as u16;
        hdr[0..6].copy_from_slice(&self.dst_mac);
        hdr[6..12].copy_from_slice(&self.src_mac);
        write_u16(hdr, 12..14, EtherType::IPV4.0);
        let protocol = match self.kind {
            EncapKind::Ipip => proto::IPIP,
            _ => proto::UDP,
        };
        Ipv4Repr {
            src: self.src,
            dst: self.dst,
            protocol,
            ttl: self.ttl,
            payload_len,
            dscp: 0,
            ecn: 0,
            ident: self.ident,
            dont_frag: false,
        }
        .emit(&mut hdr[ethernet::HEADER_LEN..]);
        if protocol == proto::UDP {
            let u = &mut hdr[ethernet::HEADER_LEN + ipv4::HEADER_LEN..];
            write_u16(u, 0..2, self.src_port);
            write_u16(u, 2..4, self.dst_port);
            write_u16(u, 4..6, payload_len);
            write_u16(u, 6..8, 0);
            if let EncapKind::Vxlan(vni) = self.kind {
                emit_vxlan(&mut u[udp::HEADER_LEN..], vni);
            }
        }
        Ok(())
    }
}

/// The UDP source port Linux picks for a tunnel frame from a hash of the
/// inner flow (`udp_flow_src_port`): in `lo..=hi`, here the ephemeral range
/// 32768..=60999 Linux uses by default.
#[inline]
pub fn flow_src_port(hash: u32) -> u16 {
    const LO: u32 = 32768;
    const HI: u32 = 60999;
    // Linux scales the hash into the range by multiplication, not modulo.
    (((u64::from(hash) * u64::from(HI - LO + 1)) >> 32) as u32 + LO) as u16
}

#[cfg(test)]
#[path = "tunnel_tests.rs"]
mod tests;
