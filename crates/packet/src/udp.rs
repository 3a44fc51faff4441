//! UDP datagrams (RFC 768).
//!
//! [`UdpPacket::new_checked`] checks that the 8-byte header is in the buffer
//! and that `8 <= length field <= buffer length`; after it no accessor
//! panics. The buffer may extend past the length field (IP or Ethernet
//! padding); [`payload`](UdpPacket::payload) stops at the length.
//!
//! The checksum covers the IPv4 pseudo-header (source, destination,
//! protocol, UDP length), the header and the payload. A transmitted
//! checksum of 0 means "none"; a computed 0 is sent as 0xFFFF (RFC 768).

use core::net::Ipv4Addr;

use crate::ParseError;
use crate::bytes::{read_u16, write_u16};
use crate::checksum;
use crate::ipv4::proto;

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap a buffer without checks; accessors may panic on a bad one.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wrap a buffer after [`check_len`](Self::check_len).
    ///
    /// # Errors
    /// As [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Check the header is present and the length field is sane.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if the buffer is shorter than 8 bytes or the
    /// length field; [`ParseError::BadUdpLength`] if the field is below 8.
    #[inline]
    pub fn check_len(&self) -> Result<(), ParseError> {
        let n = self.buffer.as_ref().len();
        if n < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(ParseError::BadUdpLength);
        }
        if len > n {
            return Err(ParseError::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field: header plus payload.
    #[inline]
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Whether the payload is empty (length field 8).
    #[inline]
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    /// Checksum field (0: none).
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The payload, up to the length field.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// The checksum this datagram should carry between `src` and `dst`
    /// (computed with the checksum field as zero; never 0).
    #[inline]
    pub fn compute_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
        let len = self.len();
        let data = &self.buffer.as_ref()[..usize::from(len)];
        let acc = checksum::add(
            checksum::pseudo_header_v4(src.to_bits(), dst.to_bits(), proto::UDP, len),
            checksum::sum(data),
        );
        // Take the stored checksum back out of the sum.
        let acc = checksum::add(acc, u64::from(!self.checksum()));
        match !checksum::fold(acc) {
            0 => 0xffff,
            c => c,
        }
    }

    /// Whether the checksum verifies (a zero checksum, "none", does).
    #[inline]
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let c = self.checksum();
        c == 0 || c == self.compute_checksum(src, dst)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Set the source port.
    #[inline]
    pub fn set_src_port(&mut self, p: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, p);
    }

    /// Set the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, p: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, p);
    }

    /// Set the length field. A value past the buffer makes
    /// [`payload`](UdpPacket::payload) panic.
    #[inline]
    pub fn set_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    /// Compute and store the checksum.
    #[inline]
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let c = self.compute_checksum(src, dst);
        self.set_checksum(c);
    }

    /// The payload, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..len]
    }
}

/// A UDP header as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length.
    pub payload_len: u16,
}

impl UdpRepr {
    /// Read a checked datagram whose checksum verifies between `src` and `dst`.
    ///
    /// # Errors
    /// [`ParseError::BadChecksum`].
    pub fn parse<T: AsRef<[u8]>>(
        p: &UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<UdpRepr, ParseError> {
        if !p.verify_checksum(src, dst) {
            return Err(ParseError::BadChecksum);
        }
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: p.len() - HEADER_LEN as u16,
        })
    }

    /// The header length (8).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into `buf` (header followed by the payload already
    /// in place) and fill the checksum between `src` and `dst` when
    /// `with_checksum`, else store 0.
    ///
    /// # Panics
    /// If `buf` is shorter than `8 + payload_len`, or that overflows u16.
    pub fn emit(&self, buf: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr, with_checksum: bool) {
        let mut p = UdpPacket::new_unchecked(buf);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(
            self.payload_len
                .checked_add(HEADER_LEN as u16)
                .expect("UDP payload too long"),
        );
        p.set_checksum(0);
        if with_checksum {
            p.fill_checksum(src, dst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // A captured DNS query, 10.0.0.2:52125 -> 10.0.0.1:53, "example.com A".
    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

    fn dns_query() -> Vec<u8> {
        let mut v = vec![0xcb, 0x9d, 0x00, 0x35, 0x00, 0x25, 0x00, 0x00];
        v.extend_from_slice(&[
            0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ]);
        v.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
        v
    }

    /// The checksum by hand from the definition, as an independent reference.
    fn reference_checksum(src: Ipv4Addr, dst: Ipv4Addr, udp: &[u8]) -> u16 {
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src.octets());
        pseudo.extend_from_slice(&dst.octets());
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
        pseudo.extend_from_slice(udp);
        let mut s: u32 = 0;
        for c in pseudo.chunks(2) {
            s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        match !(s as u16) {
            0 => 0xffff,
            c => c,
        }
    }

    #[test]
    fn dns_query_checksum() {
        let mut b = dns_query();
        assert_eq!(b.len(), 0x25);
        let mut p = UdpPacket::new_checked(&mut b[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (52125, 53, 37));
        assert!(p.verify_checksum(SRC, DST), "zero checksum means none");
        p.fill_checksum(SRC, DST);
        let c = p.checksum();
        assert_ne!(c, 0);
        assert!(p.verify_checksum(SRC, DST));
        assert!(!p.verify_checksum(SRC, Ipv4Addr::new(10, 0, 0, 3)));
        p.set_checksum(0);
        assert_eq!(c, reference_checksum(SRC, DST, &b));
    }

    #[test]
    fn length_checks() {
        let b = dns_query();
        assert_eq!(UdpPacket::new_checked(&b[..7]), Err(ParseError::Truncated));
        assert_eq!(UdpPacket::new_checked(&b[..36]), Err(ParseError::Truncated));
        let mut v = b.clone();
        v[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(
            UdpPacket::new_checked(&v[..]),
            Err(ParseError::BadUdpLength)
        );
        let mut v = b.clone();
        v.extend_from_slice(&[0; 5]);
        assert_eq!(UdpPacket::new_checked(&v[..]).unwrap().payload().len(), 29);
    }

    proptest! {
        #[test]
        fn parse_emit(sp: u16, dp: u16, payload in proptest::collection::vec(any::<u8>(), 0..100), src: u32, dst: u32, csum: bool) {
            let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
            let r = UdpRepr { src_port: sp, dst_port: dp, payload_len: payload.len() as u16 };
            let mut buf = vec![0u8; 8 + payload.len()];
            buf[8..].copy_from_slice(&payload);
            r.emit(&mut buf, src, dst, csum);
            let p = UdpPacket::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(UdpRepr::parse(&p, src, dst), Ok(r));
            prop_assert_eq!(p.payload(), &payload[..]);
            if csum {
                let mut z = buf.clone();
                z[6] = 0;
                z[7] = 0;
                prop_assert_eq!(p.checksum(), reference_checksum(src, dst, &z));
            }
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = UdpPacket::new_checked(&b[..]) {
                let _ = (p.payload(), p.verify_checksum(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST));
            }
        }
    }
}
