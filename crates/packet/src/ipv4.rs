//! IPv4 headers (RFC 791).
//!
//! [`Ipv4Packet::new_checked`] validates what the accessors rely on: the
//! version is 4, the IHL is at least 5, the header (options included) is in
//! the buffer, and `IHL*4 <= total length <= buffer length`. After it, no
//! getter panics, and neither does a setter, except those that change the
//! IHL or the total length (documented on each). The buffer may be longer
//! than the total length (Ethernet padding); [`payload`](Ipv4Packet::payload)
//! stops at the total length.
//!
//! The header checksum is not verified by `new_checked`: the host's
//! classifier reads addresses without paying for it, and the router calls
//! [`verify_checksum`](Ipv4Packet::verify_checksum).

use core::net::Ipv4Addr;

use crate::ParseError;
use crate::bytes::{read_u16, read_u32, write_u16, write_u32};
use crate::checksum;

/// IP protocol numbers (IANA) this crate names.
pub mod proto {
    /// Internet Control Message Protocol.
    pub const ICMP: u8 = 1;
    /// IPv4 in IPv4 (RFC 2003).
    pub const IPIP: u8 = 4;
    /// Transmission Control Protocol.
    pub const TCP: u8 = 6;
    /// User Datagram Protocol.
    pub const UDP: u8 = 17;
}

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    /// TTL and protocol as one 16-bit checksum word.
    pub const TTL_PROTO: Range<usize> = 8..10;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap a buffer without checks; accessors may panic on a bad one.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
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

    /// Validate the fields the accessors rely on (not the checksum).
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if the buffer is shorter than 20 bytes, the
    /// header with options, or the total length; [`ParseError::BadVersion`],
    /// [`ParseError::BadIhl`] (below 5), [`ParseError::BadTotalLength`]
    /// (below the header length).
    #[inline]
    pub fn check(&self) -> Result<(), ParseError> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        if b[field::VER_IHL] >> 4 != 4 {
            return Err(ParseError::BadVersion);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(ParseError::BadIhl);
        }
        if hl > b.len() {
            return Err(ParseError::Truncated);
        }
        let total = usize::from(self.total_len());
        if total < hl {
            return Err(ParseError::BadTotalLength);
        }
        if total > b.len() {
            return Err(ParseError::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The version field (4 after `new_checked`).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The IHL field: header length in 32-bit words.
    #[inline]
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] & 0x0f
    }

    /// Header length in bytes (`IHL * 4`).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }

    /// Differentiated services code point (6 bits).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification (2 bits).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length: header plus payload, in bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT)
    }

    /// The three flag bits (reserved, DF, MF) in the low bits.
    #[inline]
    pub fn flags(&self) -> u8 {
        (read_u16(self.buffer.as_ref(), field::FLG_OFF) >> 13) as u8
    }

    /// Don't Fragment.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & FLAG_DF != 0
    }

    /// More Fragments.
    #[inline]
    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & FLAG_MF != 0
    }

    /// Fragment offset, in 8-byte units.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & OFFSET_MASK
    }

    /// Part of a fragmented datagram (MF set or a non-zero offset): only the
    /// first fragment carries the transport header.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload (see [`proto`]).
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address as a host-order integer (`10.0.0.1` is `0x0a000001`).
    #[inline]
    pub fn src_u32(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::SRC)
    }

    /// Destination address as a host-order integer.
    #[inline]
    pub fn dst_u32(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::DST)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.src_u32())
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.dst_u32())
    }

    /// The header, options included.
    #[inline]
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The options (empty when IHL is 5).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The payload: from the end of the header to the total length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }

    /// Whether the header checksum verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.header()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Set version 4 and the IHL (header length in words). A value that
    /// does not fit the buffer makes later accessors panic.
    #[inline]
    pub fn set_ihl(&mut self, ihl: u8) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | (ihl & 0x0f);
    }

    /// Set the DSCP (6 bits; higher bits ignored).
    #[inline]
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (dscp << 2) | (*b & 0x03);
    }

    /// Set the ECN (2 bits; higher bits ignored).
    #[inline]
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (ecn & 0x03);
    }

    /// Set the total length. A value beyond the buffer makes
    /// [`payload`](Ipv4Packet::payload) panic.
    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Set the identification.
    #[inline]
    pub fn set_ident(&mut self, ident: u16) {
        write_u16(self.buffer.as_mut(), field::IDENT, ident);
    }

    /// Set the flags (3 bits) and the fragment offset (13 bits, 8-byte units).
    #[inline]
    pub fn set_flags_frag_offset(&mut self, flags: u8, offset: u16) {
        let w = (u16::from(flags & 0x07) << 13) | (offset & OFFSET_MASK);
        write_u16(self.buffer.as_mut(), field::FLG_OFF, w);
    }

    /// Set or clear Don't Fragment.
    #[inline]
    pub fn set_dont_frag(&mut self, df: bool) {
        let w = read_u16(self.buffer.as_ref(), field::FLG_OFF);
        let w = if df { w | FLAG_DF } else { w & !FLAG_DF };
        write_u16(self.buffer.as_mut(), field::FLG_OFF, w);
    }

    /// Set the TTL (the checksum is not updated; see
    /// [`decrement_ttl`](Self::decrement_ttl)).
    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Set the protocol.
    #[inline]
    pub fn set_protocol(&mut self, p: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = p;
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    /// Set the source address from a host-order integer.
    #[inline]
    pub fn set_src_u32(&mut self, a: u32) {
        write_u32(self.buffer.as_mut(), field::SRC, a);
    }

    /// Set the destination address from a host-order integer.
    #[inline]
    pub fn set_dst_u32(&mut self, a: u32) {
        write_u32(self.buffer.as_mut(), field::DST, a);
    }

    /// Set the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.set_src_u32(a.to_bits());
    }

    /// Set the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.set_dst_u32(a.to_bits());
    }

    /// Set the destination and update the header checksum incrementally
    /// (RFC 1624). The transport checksum is the caller's business.
    #[inline]
    pub fn set_dst_u32_update_checksum(&mut self, a: u32) {
        let c = checksum::update32(self.checksum(), self.dst_u32(), a);
        self.set_dst_u32(a);
        self.set_checksum(c);
    }

    /// Compute the header checksum and store it.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.header());
        self.set_checksum(c);
    }

    /// Decrement the TTL and update the checksum incrementally with
    /// RFC 1624 eqn. 3 (see [`checksum::update16`]), returning the new TTL.
    /// A TTL of 0 is left alone (the router drops before this).
    #[inline]
    pub fn decrement_ttl(&mut self) -> u8 {
        let b = self.buffer.as_ref();
        let ttl = b[field::TTL];
        if ttl == 0 {
            return 0;
        }
        let old = read_u16(b, field::TTL_PROTO);
        // TTL is the high byte of its word: the word drops by 0x0100.
        let new = old - 0x0100;
        let c = checksum::update16(self.checksum(), old, new);
        write_u16(self.buffer.as_mut(), field::TTL_PROTO, new);
        self.set_checksum(c);
        ttl - 1
    }

    /// The payload, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[h..t]
    }
}

/// An option-less IPv4 header as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Payload protocol.
    pub protocol: u8,
    /// Time to live.
    pub ttl: u8,
    /// Payload length in bytes (total length minus 20).
    pub payload_len: u16,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// Read a checked, unfragmented, option-less packet whose checksum
    /// verifies.
    ///
    /// # Errors
    /// [`ParseError::BadChecksum`]; [`ParseError::Unsupported`] for a header
    /// with options, a fragment or the reserved flag (not representable).
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Ipv4Repr, ParseError> {
        if !p.verify_checksum() {
            return Err(ParseError::BadChecksum);
        }
        if p.header_len() != HEADER_LEN || p.is_fragment() || p.flags() & 0x4 != 0 {
            return Err(ParseError::Unsupported);
        }
        Ok(Ipv4Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            ttl: p.ttl(),
            payload_len: p.total_len() - HEADER_LEN as u16,
            dscp: p.dscp(),
            ecn: p.ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
        })
    }

    /// The header length this repr emits (20).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header, checksum included, into the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 20 bytes, or `payload_len + 20` overflows u16.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_ihl(5);
        p.buffer[field::DSCP_ECN] = (self.dscp << 2) | (self.ecn & 3);
        p.set_total_len(
            self.payload_len
                .checked_add(HEADER_LEN as u16)
                .expect("IPv4 payload too long"),
        );
        p.set_ident(self.ident);
        p.set_flags_frag_offset(if self.dont_frag { 0b010 } else { 0 }, 0);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        p.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // A captured IPv4/UDP DNS query header (checksum b861 is correct).
    use crate::testdata::IPV4_HEADER as HEADER;
    use proptest::prelude::*;

    fn packet() -> Vec<u8> {
        let mut v = HEADER.to_vec();
        v.resize(0x73, 0xab);
        v
    }

    #[test]
    fn real_header_getters() {
        let b = packet();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.ihl(), 5);
        assert_eq!(p.total_len(), 0x73);
        assert_eq!((p.dscp(), p.ecn(), p.ident()), (0, 0, 0));
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.flags(), 0b010);
        assert_eq!((p.ttl(), p.protocol()), (64, proto::UDP));
        assert_eq!(p.checksum(), 0xb861);
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_u32(), 0xc0a8_00c7);
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 0x73 - 20);
        assert!(p.options().is_empty());
    }

    #[test]
    fn fill_checksum_restores_known_value() {
        let mut b = packet();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.set_checksum(0);
        assert!(!p.verify_checksum());
        p.fill_checksum();
        assert_eq!(p.checksum(), 0xb861);
    }

    #[test]
    fn decrement_ttl_known() {
        let mut b = packet();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.decrement_ttl(), 63);
        // b861 + 0x0100 (TTL word dropped by 0x0100).
        assert_eq!(p.checksum(), 0xb961);
        assert!(p.verify_checksum());
        p.set_ttl(0);
        p.fill_checksum();
        assert_eq!(p.decrement_ttl(), 0);
        assert!(p.verify_checksum());
    }

    #[test]
    fn check_errors() {
        let b = packet();
        assert_eq!(
            Ipv4Packet::new_checked(&b[..19]),
            Err(ParseError::Truncated)
        );
        assert_eq!(
            Ipv4Packet::new_checked(&b[..0x72]),
            Err(ParseError::Truncated)
        );
        let mut v = b.clone();
        v[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&v[..]), Err(ParseError::BadVersion));
        v[0] = 0x44;
        assert_eq!(Ipv4Packet::new_checked(&v[..]), Err(ParseError::BadIhl));
        v[0] = 0x4f;
        assert_eq!(
            Ipv4Packet::new_checked(&v[..40]),
            Err(ParseError::Truncated)
        );
        let mut v = b.clone();
        v[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&v[..]),
            Err(ParseError::BadTotalLength)
        );
        // Ethernet padding past the total length is fine.
        let mut v = b.clone();
        v.extend_from_slice(&[0; 6]);
        assert_eq!(
            Ipv4Packet::new_checked(&v[..]).unwrap().payload().len(),
            0x73 - 20
        );
    }

    #[test]
    fn fragments() {
        let mut b = packet();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.set_flags_frag_offset(0b001, 0);
        assert!(p.more_frags() && p.is_fragment());
        p.set_flags_frag_offset(0, 185);
        assert!(!p.more_frags() && p.is_fragment());
        assert_eq!(p.frag_offset(), 185);
        p.set_dont_frag(true);
        assert!(p.dont_frag() && p.frag_offset() == 185);
    }

    /// Set the ident so that the header's ones' complement sum (with a zero
    /// checksum field) is `target`; the filled checksum is then `!target`.
    fn force_sum(h: &mut [u8; 20], target: u16) {
        h[4..6].copy_from_slice(&[0, 0]);
        h[10..12].copy_from_slice(&[0, 0]);
        let s = checksum::fold(checksum::sum(h));
        // ident = target - s in ones' complement.
        let ident = checksum::fold(checksum::add(u64::from(target), u64::from(!s)));
        h[4..6].copy_from_slice(&ident.to_be_bytes());
        assert_eq!(checksum::fold(checksum::sum(h)), target);
        Ipv4Packet::new_unchecked(&mut h[..]).fill_checksum();
    }

    #[test]
    fn decrement_ttl_rfc1624_corners() {
        // Header checksum 0x0000 after the decrement (sum 0xffff): eqn. 2
        // would produce 0xffff (-0) here.
        let mut h = HEADER;
        h[8] = 63;
        force_sum(&mut h, 0xffff);
        assert_eq!(&h[10..12], &[0, 0]);
        h[8] = 64;
        Ipv4Packet::new_unchecked(&mut h[..]).fill_checksum();
        let mut p = Ipv4Packet::new_unchecked(&mut h[..]);
        assert_eq!(p.decrement_ttl(), 63);
        assert_eq!(p.checksum(), 0x0000);
        assert!(p.verify_checksum());

        // Checksum 0x0000 before the decrement.
        let mut h = HEADER;
        force_sum(&mut h, 0xffff);
        let mut p = Ipv4Packet::new_unchecked(&mut h[..]);
        assert_eq!(p.checksum(), 0x0000);
        p.decrement_ttl();
        let inc = p.checksum();
        p.fill_checksum();
        assert_eq!(inc, p.checksum());

        // Checksum 0xfffe..0x0001 neighbourhood: header sums near the wrap.
        for target in [0x0001, 0x0100, 0x00ff, 0xfeff, 0xfffe] {
            let mut h = HEADER;
            force_sum(&mut h, target);
            let mut p = Ipv4Packet::new_unchecked(&mut h[..]);
            p.decrement_ttl();
            let inc = p.checksum();
            p.fill_checksum();
            assert_eq!(inc, p.checksum(), "sum {target:#06x}");
        }
    }

    fn header() -> impl Strategy<Value = Vec<u8>> {
        (any::<[u8; 20]>(), 0u8..=10, any::<u8>()).prop_map(|(mut h, opts, pad)| {
            let ihl = 5 + opts;
            let hl = usize::from(ihl) * 4;
            h[0] = 0x40 | ihl;
            let mut v = h.to_vec();
            v.resize(hl, pad);
            v[2..4].copy_from_slice(&(hl as u16).to_be_bytes());
            Ipv4Packet::new_unchecked(&mut v[..]).fill_checksum();
            v
        })
    }

    fn repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<[u32; 2]>(),
            any::<[u8; 5]>(),
            0u16..2000,
            any::<u16>(),
            any::<bool>(),
        )
            .prop_map(|(a, b, payload_len, ident, dont_frag)| Ipv4Repr {
                src: Ipv4Addr::from(a[0]),
                dst: Ipv4Addr::from(a[1]),
                protocol: b[0],
                ttl: b[1],
                payload_len,
                dscp: b[2] >> 2,
                ecn: b[3] & 3,
                ident,
                dont_frag,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn decrement_ttl_matches_recompute(mut h in header()) {
            let mut p = Ipv4Packet::new_checked(&mut h[..]).unwrap();
            prop_assert!(p.verify_checksum());
            let ttl = p.ttl();
            let new_ttl = p.decrement_ttl();
            prop_assert_eq!(new_ttl, ttl.saturating_sub(1));
            let inc = p.checksum();
            p.fill_checksum();
            prop_assert_eq!(inc, p.checksum());
        }

        #[test]
        fn set_dst_incremental_matches_recompute(mut h in header(), dst: u32) {
            let mut p = Ipv4Packet::new_checked(&mut h[..]).unwrap();
            p.set_dst_u32_update_checksum(dst);
            let inc = p.checksum();
            p.fill_checksum();
            prop_assert_eq!(inc, p.checksum());
            prop_assert_eq!(p.dst_u32(), dst);
        }

        #[test]
        fn parse_emit(r in repr()) {
            let mut buf = vec![0u8; r.buffer_len() + usize::from(r.payload_len)];
            r.emit(&mut buf);
            let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(Ipv4Repr::parse(&p), Ok(r));
        }

        #[test]
        fn random_bytes_never_panic(mut b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let ok = Ipv4Packet::new_checked(&b[..]).is_ok();
            if let Ok(mut p) = Ipv4Packet::new_checked(&mut b[..]) {
                let _ = (p.payload().len(), p.options().len(), p.verify_checksum(), p.src_addr(), p.frag_offset());
                let _ = Ipv4Repr::parse(&p);
                p.decrement_ttl();
                let _ = p.payload_mut();
            }
            // Version-4 biased inputs reach deeper checks.
            if !b.is_empty() {
                b[0] = 0x40 | (b[0] & 0x0f);
                if let Ok(p) = Ipv4Packet::new_checked(&b[..]) {
                    let _ = (p.payload().len(), Ipv4Repr::parse(&p));
                }
            }
            let _ = ok;
        }
    }
}
