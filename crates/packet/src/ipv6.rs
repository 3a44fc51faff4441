//! IPv6 headers (RFC 8200) and their extension header chain.
//!
//! [`Ipv6Packet::new_checked`] validates what the accessors rely on: the
//! 40-byte fixed header is in the buffer, the version is 6 and the payload
//! length fits in the buffer. After it, no getter panics, and neither does
//! a setter except [`set_payload_len`](Ipv6Packet::set_payload_len)
//! (documented there). The buffer may be longer than the packet (Ethernet
//! padding); [`payload`](Ipv6Packet::payload) stops at the payload length.
//!
//! Jumbograms (RFC 2675: payload length 0 and a hop-by-hop jumbo option)
//! are not supported: a payload length of 0 means an empty payload.
//!
//! [`Ipv6Packet::upper_layer`] walks the extension headers with a bounded
//! loop (at most [`MAX_EXT_HEADERS`]) and returns the upper-layer protocol
//! and its offset, or an error for a chain that is truncated, too long or
//! has a hop-by-hop header anywhere but first.
//!
//! Addresses are carried as host-order `u128` (`2001:db8::1` is
//! `0x2001_0db8_0000_..._0001`), as `vrhost-fib`'s `Ipv6Fib` keys them;
//! the address helpers at the bottom (multicast, link-local,
//! solicited-node) work on that form.

use core::net::Ipv6Addr;

use crate::bytes::{read_u16, read_u32, read_u128, write_u16, write_u32, write_u128};
use crate::{MacAddr, ParseError};

/// Next header values (IANA "Assigned Internet Protocol Numbers") this
/// crate names.
pub mod next_header {
    /// Hop-by-hop options (RFC 8200 4.3).
    pub const HOP_BY_HOP: u8 = 0;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// Routing header (RFC 8200 4.4).
    pub const ROUTING: u8 = 43;
    /// Fragment header (RFC 8200 4.5).
    pub const FRAGMENT: u8 = 44;
    /// Encapsulating security payload (RFC 4303): opaque, an upper layer
    /// for this walk.
    pub const ESP: u8 = 50;
    /// Authentication header (RFC 4302): its length is in 4-byte units.
    pub const AUTH: u8 = 51;
    /// ICMPv6 (RFC 4443).
    pub const ICMPV6: u8 = 58;
    /// No next header.
    pub const NO_NEXT: u8 = 59;
    /// Destination options (RFC 8200 4.6).
    pub const DST_OPTS: u8 = 60;
}

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// Extension headers [`Ipv6Packet::upper_layer`] walks before it gives up.
/// RFC 8200 recommends one of each kind at most (destination options
/// twice): 8 covers every chain it describes.
pub const MAX_EXT_HEADERS: usize = 8;

/// A view of an IPv6 packet in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Where the extension header chain ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UpperLayer {
    /// The upper-layer protocol ([`next_header`]; [`next_header::NO_NEXT`]
    /// for none).
    pub protocol: u8,
    /// Offset of its header from the start of the IPv6 header.
    pub offset: usize,
    /// Extension headers walked (0: the protocol is the fixed header's
    /// next header).
    pub ext_headers: u8,
    /// A fragment header with a non-zero offset was seen: what follows is
    /// not the upper-layer header but the middle of the payload.
    pub later_fragment: bool,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wrap a buffer without checks; accessors may panic on a bad one.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wrap a buffer after [`check`](Self::check).
    ///
    /// # Errors
    /// As [`check`](Self::check).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let p = Self::new_unchecked(buffer);
        p.check()?;
        Ok(p)
    }

    /// Validate the fields the accessors rely on.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if the buffer is shorter than 40 bytes or
    /// than 40 plus the payload length; [`ParseError::BadVersion`] if the
    /// version is not 6.
    #[inline]
    pub fn check(&self) -> Result<(), ParseError> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(ParseError::BadVersion);
        }
        if HEADER_LEN + usize::from(self.payload_len()) > b.len() {
            return Err(ParseError::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline(always)]
    fn word0(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    /// The version field (6 after `new_checked`).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (DSCP and ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }

    /// Payload length: everything after the fixed header, extension
    /// headers included.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }

    /// Header plus payload, in bytes.
    #[inline]
    pub fn total_len(&self) -> usize {
        HEADER_LEN + usize::from(self.payload_len())
    }

    /// The fixed header's next header.
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address as a host-order integer.
    #[inline]
    pub fn src_u128(&self) -> u128 {
        read_u128(self.buffer.as_ref(), field::SRC)
    }

    /// Destination address as a host-order integer.
    #[inline]
    pub fn dst_u128(&self) -> u128 {
        read_u128(self.buffer.as_ref(), field::DST)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.src_u128())
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.dst_u128())
    }

    /// The payload: from the end of the fixed header to the payload length
    /// (extension headers included).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.total_len()]
    }

    /// The packet: header and payload, without padding after it.
    #[inline]
    pub fn packet(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.total_len()]
    }

    /// Walk the extension headers (hop-by-hop, routing, fragment,
    /// destination options, authentication) to the upper-layer header.
    ///
    /// RFC 8200 4.1: "The Hop-by-Hop Options header, when present, must
    /// immediately follow the IPv6 header"; elsewhere it is an error here
    /// (a node sends a parameter problem, code 1). Any other next header
    /// value ends the walk: it is the upper layer, known or not.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if a header runs past the payload;
    /// [`ParseError::BadExtHeader`] for a hop-by-hop header not first, or
    /// more than [`MAX_EXT_HEADERS`] headers.
    #[inline]
    pub fn upper_layer(&self) -> Result<UpperLayer, ParseError> {
        // Most packets carry none: the walk's first step, inline.
        let nh = self.next_header();
        if !is_extension_header(nh) {
            return Ok(UpperLayer {
                protocol: nh,
                offset: HEADER_LEN,
                ext_headers: 0,
                later_fragment: false,
            });
        }
        self.walk_extension_headers()
    }

    /// [`upper_layer`](Self::upper_layer) for a chain that starts with an
    /// extension header.
    #[inline(never)]
    fn walk_extension_headers(&self) -> Result<UpperLayer, ParseError> {
        let p = self.payload();
        let mut nh = self.next_header();
        let mut at = 0usize;
        let mut later_fragment = false;
        for n in 0..=MAX_EXT_HEADERS {
            let len = match nh {
                next_header::HOP_BY_HOP if n > 0 => return Err(ParseError::BadExtHeader),
                next_header::HOP_BY_HOP | next_header::ROUTING | next_header::DST_OPTS => {
                    // Hdr Ext Len: 8-octet units, not counting the first 8.
                    let l = *p.get(at + 1).ok_or(ParseError::Truncated)?;
                    (usize::from(l) + 1) * 8
                }
                next_header::FRAGMENT => {
                    let o = p.get(at + 2..at + 4).ok_or(ParseError::Truncated)?;
                    if u16::from_be_bytes([o[0], o[1]]) >> 3 != 0 {
                        later_fragment = true;
                    }
                    8
                }
                next_header::AUTH => {
                    // RFC 4302 2.2: 4-octet units, minus 2.
                    let l = *p.get(at + 1).ok_or(ParseError::Truncated)?;
                    (usize::from(l) + 2) * 4
                }
                _ => {
                    return Ok(UpperLayer {
                        protocol: nh,
                        offset: HEADER_LEN + at,
                        ext_headers: n as u8,
                        later_fragment,
                    });
                }
            };
            if n == MAX_EXT_HEADERS {
                break;
            }
            if at + len > p.len() {
                return Err(ParseError::Truncated);
            }
            nh = p[at];
            at += len;
        }
        Err(ParseError::BadExtHeader)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Set version 6, the traffic class and the flow label (20 bits;
    /// higher bits ignored).
    #[inline]
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let w = (6u32 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000f_ffff);
        write_u32(self.buffer.as_mut(), field::VER_TC_FLOW, w);
    }

    /// Set the payload length. A value beyond the buffer makes
    /// [`payload`](Ipv6Packet::payload) panic.
    #[inline]
    pub fn set_payload_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::PAYLOAD_LEN, len);
    }

    /// Set the next header.
    #[inline]
    pub fn set_next_header(&mut self, nh: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = nh;
    }

    /// Set the hop limit (IPv6 has no header checksum to update).
    #[inline]
    pub fn set_hop_limit(&mut self, h: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = h;
    }

    /// Set the source address from a host-order integer.
    #[inline]
    pub fn set_src_u128(&mut self, a: u128) {
        write_u128(self.buffer.as_mut(), field::SRC, a);
    }

    /// Set the destination address from a host-order integer.
    #[inline]
    pub fn set_dst_u128(&mut self, a: u128) {
        write_u128(self.buffer.as_mut(), field::DST, a);
    }

    /// The payload, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let t = self.total_len();
        &mut self.buffer.as_mut()[HEADER_LEN..t]
    }
}

/// Whether the walk of [`Ipv6Packet::upper_layer`] steps over next header
/// `nh` (the kinds [`next_header`] names as extension headers).
#[inline]
pub const fn is_extension_header(nh: u8) -> bool {
    matches!(
        nh,
        next_header::HOP_BY_HOP
            | next_header::ROUTING
            | next_header::FRAGMENT
            | next_header::AUTH
            | next_header::DST_OPTS
    )
}

/// A fixed IPv6 header as values (no extension headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Next header.
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Payload length in bytes.
    pub payload_len: u16,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Read a checked packet's fixed header.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Ipv6Repr {
        Ipv6Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            next_header: p.next_header(),
            hop_limit: p.hop_limit(),
            payload_len: p.payload_len(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        }
    }

    /// The header length this repr emits (40).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 40 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Ipv6Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_version_tc_flow(self.traffic_class, self.flow_label);
        p.set_payload_len(self.payload_len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_u128(self.src.to_bits());
        p.set_dst_u128(self.dst.to_bits());
    }
}

/// `::`, the unspecified address.
pub const UNSPECIFIED: u128 = 0;
/// `ff02::1`, all nodes on the link.
pub const ALL_NODES: u128 = 0xff02_0000_0000_0000_0000_0000_0000_0001;
/// `ff02::2`, all routers on the link.
pub const ALL_ROUTERS: u128 = 0xff02_0000_0000_0000_0000_0000_0000_0002;

/// Whether `a` is multicast (`ff00::/8`, RFC 4291 2.7).
#[inline]
pub const fn is_multicast(a: u128) -> bool {
    a >> 120 == 0xff
}

/// Whether `a` is link-local unicast (`fe80::/10`, RFC 4291 2.5.6).
#[inline]
pub const fn is_link_local(a: u128) -> bool {
    a >> 118 == 0xfe80 >> 6
}

/// The solicited-node multicast address of `a`: `ff02::1:ff00:0/104`
/// with the low 24 bits of `a` (RFC 4291 2.7.1).
#[inline]
pub const fn solicited_node(a: u128) -> u128 {
    0xff02_0000_0000_0000_0000_0001_ff00_0000 | (a & 0x00ff_ffff)
}

/// The Ethernet address of IPv6 multicast `a`: `33:33` and its low 32 bits
/// (RFC 2464 7).
#[inline]
pub const fn multicast_mac(a: u128) -> MacAddr {
    let l = (a as u32).to_be_bytes();
    MacAddr([0x33, 0x33, l[0], l[1], l[2], l[3]])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An IPv6 UDP datagram, fe80::1 -> ff02::1:2 (a DHCPv6 solicit's
    /// header, port 546 -> 547), hop limit 1, 4 bytes of payload, written
    /// field by field from RFC 8200 3 and RFC 768.
    #[rustfmt::skip]
    const UDP6: [u8; 52] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x0c, 17, 1,        // v6, plen 12, UDP, hl 1
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0x02,
        0x02, 0x22, 0x02, 0x23, 0x00, 0x0c, 0x00, 0x00,   // UDP header
        0x01, 0x02, 0x03, 0x04,
    ];

    #[test]
    fn fixed_header() {
        let p = Ipv6Packet::new_checked(&UDP6[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!((p.traffic_class(), p.flow_label()), (0, 0));
        assert_eq!(
            (p.payload_len(), p.next_header(), p.hop_limit()),
            (12, 17, 1)
        );
        assert_eq!(p.src_addr(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "ff02::1:2".parse::<Ipv6Addr>().unwrap());
        assert!(is_link_local(p.src_u128()));
        assert!(is_multicast(p.dst_u128()));
        assert_eq!(p.payload().len(), 12);
        let u = p.upper_layer().unwrap();
        assert_eq!((u.protocol, u.offset, u.ext_headers), (17, 40, 0));
        let r = Ipv6Repr::parse(&p);
        let mut b = [0u8; 40];
        r.emit(&mut b);
        assert_eq!(b[..], UDP6[..40]);
    }

    #[test]
    fn checks() {
        assert_eq!(
            Ipv6Packet::new_checked(&UDP6[..39]),
            Err(ParseError::Truncated)
        );
        assert_eq!(
            Ipv6Packet::new_checked(&UDP6[..51]),
            Err(ParseError::Truncated)
        );
        let mut b = UDP6;
        b[0] = 0x45;
        assert_eq!(Ipv6Packet::new_checked(&b[..]), Err(ParseError::BadVersion));
        // Padding after the payload is allowed and not part of it.
        let mut v = UDP6.to_vec();
        v.extend_from_slice(&[0; 10]);
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        assert_eq!((p.payload().len(), p.packet().len()), (12, 52));
    }

    #[test]
    fn traffic_class_and_flow() {
        let mut b = UDP6;
        Ipv6Packet::new_unchecked(&mut b[..]).set_version_tc_flow(0xb8, 0xabcde);
        assert_eq!(&b[..4], &[0x6b, 0x8a, 0xbc, 0xde]);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.traffic_class(), p.flow_label()), (0xb8, 0xabcde));
    }

    /// `UDP6`'s payload behind `ext` (each item: next header, bytes).
    fn with_ext(first: u8, ext: &[&[u8]]) -> Vec<u8> {
        let mut v = UDP6[..40].to_vec();
        v[6] = first;
        for e in ext {
            v.extend_from_slice(e);
        }
        v.extend_from_slice(&UDP6[40..]);
        let plen = (v.len() - 40) as u16;
        v[4..6].copy_from_slice(&plen.to_be_bytes());
        v
    }

    #[test]
    fn extension_headers() {
        // Hop-by-hop with a router alert (RFC 2711) and PadN, 8 bytes;
        // destination options of 16 bytes; a first fragment.
        let hbh: &[u8] = &[next_header::DST_OPTS, 0, 5, 2, 0, 0, 1, 0];
        let dst: &[u8] = &[
            next_header::FRAGMENT,
            1,
            1,
            12,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        let frag: &[u8] = &[17, 0, 0, 1, 0, 0, 0, 7];
        let v = with_ext(next_header::HOP_BY_HOP, &[hbh, dst, frag]);
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        let u = p.upper_layer().unwrap();
        assert_eq!(
            u,
            UpperLayer {
                protocol: 17,
                offset: 40 + 8 + 16 + 8,
                ext_headers: 3,
                later_fragment: false
            }
        );
        assert_eq!(&v[u.offset..u.offset + 2], &[0x02, 0x22]);
        // A later fragment (offset 1 x 8 bytes).
        let frag2: &[u8] = &[17, 0, 0, 8, 0, 0, 0, 7];
        let v = with_ext(next_header::FRAGMENT, &[frag2]);
        let u = Ipv6Packet::new_checked(&v[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert!(u.later_fragment);
        // Hop-by-hop second: an error.
        let dst8: &[u8] = &[next_header::HOP_BY_HOP, 0, 1, 4, 0, 0, 0, 0];
        let v = with_ext(next_header::DST_OPTS, &[dst8, hbh]);
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.upper_layer(), Err(ParseError::BadExtHeader));
        // A header claiming more than the payload.
        let long: &[u8] = &[17, 9, 1, 4, 0, 0, 0, 0];
        let v = with_ext(next_header::ROUTING, &[long]);
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.upper_layer(), Err(ParseError::Truncated));
        // Too many: nine destination options headers.
        let d: &[u8] = &[next_header::DST_OPTS, 0, 1, 4, 0, 0, 0, 0];
        let v = with_ext(next_header::DST_OPTS, &[d; 9]);
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.upper_layer(), Err(ParseError::BadExtHeader));
        // Eight are fine (the last one's next header is DST_OPTS again: set UDP).
        let mut last = d.to_vec();
        last[0] = 17;
        let mut chain = vec![d; 7];
        chain.push(&last);
        let v = with_ext(next_header::DST_OPTS, &chain);
        let u = Ipv6Packet::new_checked(&v[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!((u.protocol, u.ext_headers), (17, 8));
        // Authentication header: (2 + 2) x 4 = 16 bytes.
        let ah: &[u8] = &[17, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0];
        let v = with_ext(next_header::AUTH, &[ah]);
        let u = Ipv6Packet::new_checked(&v[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!((u.protocol, u.offset), (17, 56));
    }

    #[test]
    fn upper_layer_without_extension_headers_is_the_walks_answer() {
        // Every next header value: the inline answer for the ones that are
        // no extension header is what the walk says; the others walk.
        let mut kinds = 0;
        for nh in 0..=u8::MAX {
            let mut b = UDP6;
            b[6] = nh;
            let p = Ipv6Packet::new_checked(&b[..]).unwrap();
            if is_extension_header(nh) {
                kinds += 1;
                assert_ne!(p.upper_layer().map(|u| u.ext_headers), Ok(0), "{nh}");
            } else {
                assert_eq!(p.upper_layer(), p.walk_extension_headers(), "{nh}");
                assert_eq!(p.upper_layer().unwrap().protocol, nh);
            }
        }
        assert_eq!(kinds, 5);
    }

    use crate::testdata::LINUX_MLD;

    #[test]
    fn linux_mld_report_behind_hop_by_hop() {
        let p = Ipv6Packet::new_checked(&LINUX_MLD[14..]).unwrap();
        assert_eq!(
            (p.next_header(), p.hop_limit(), p.payload_len()),
            (0, 1, 36)
        );
        assert!(is_multicast(p.dst_u128()) && is_link_local(p.src_u128()));
        let u = p.upper_layer().unwrap();
        assert_eq!(
            (u.protocol, u.offset, u.ext_headers),
            (next_header::ICMPV6, 48, 1)
        );
        // MLDv2 report, type 143.
        assert_eq!(p.packet()[u.offset], 143);
        // Cut inside the hop-by-hop header: the walk says so.
        let mut short = LINUX_MLD[14..].to_vec();
        short[4..6].copy_from_slice(&4u16.to_be_bytes());
        let p = Ipv6Packet::new_checked(&short[..]).unwrap();
        assert_eq!(p.upper_layer(), Err(ParseError::Truncated));
    }

    #[test]
    fn addresses() {
        let a: u128 = "2001:db8::1234:5678".parse::<Ipv6Addr>().unwrap().to_bits();
        assert_eq!(
            Ipv6Addr::from(solicited_node(a)),
            "ff02::1:ff34:5678".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            multicast_mac(solicited_node(a)),
            MacAddr([0x33, 0x33, 0xff, 0x34, 0x56, 0x78])
        );
        assert!(is_link_local(
            "fe80::1".parse::<Ipv6Addr>().unwrap().to_bits()
        ));
        assert!(is_link_local(
            "febf::1".parse::<Ipv6Addr>().unwrap().to_bits()
        ));
        assert!(!is_link_local(
            "fec0::1".parse::<Ipv6Addr>().unwrap().to_bits()
        ));
        assert!(!is_multicast(a));
        assert!(is_multicast(ALL_NODES) && is_multicast(ALL_ROUTERS));
    }

    /// A small deterministic generator (xorshift64*): thousands of cases
    /// without a dependency.
    pub(crate) fn xorshift(seed: &mut u64) -> u64 {
        *seed ^= *seed >> 12;
        *seed ^= *seed << 25;
        *seed ^= *seed >> 27;
        seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5000 {
            let len = (xorshift(&mut s) % 120) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| xorshift(&mut s) as u8).collect();
            // Make most of them pass the check, so the walk runs.
            if let Some(x) = b.first_mut() {
                *x = 0x60 | (*x & 0x0f);
            }
            if b.len() >= 7 {
                let plen = (len.saturating_sub(40) as u16).min(xorshift(&mut s) as u16 % 90);
                b[4..6].copy_from_slice(&plen.to_be_bytes());
                b[6] = [0, 43, 44, 51, 60, 17, 58][(xorshift(&mut s) % 7) as usize];
            }
            if let Ok(p) = Ipv6Packet::new_checked(&b[..]) {
                let _ = (
                    p.payload(),
                    p.packet(),
                    p.flow_label(),
                    p.src_addr(),
                    p.dst_addr(),
                );
                if let Ok(u) = p.upper_layer() {
                    assert!(u.offset <= p.total_len());
                }
            }
        }
    }

    proptest! {
        #[test]
        fn emit_parse(src: u128, dst: u128, nh: u8, hl: u8, tc: u8, flow in 0u32..1 << 20, plen in 0u16..64) {
            let r = Ipv6Repr {
                src: src.into(), dst: dst.into(), next_header: nh, hop_limit: hl,
                payload_len: plen, traffic_class: tc, flow_label: flow,
            };
            let mut b = vec![0u8; 40 + usize::from(plen)];
            r.emit(&mut b);
            let p = Ipv6Packet::new_checked(&b[..]).unwrap();
            prop_assert_eq!(Ipv6Repr::parse(&p), r);
        }
    }
}
