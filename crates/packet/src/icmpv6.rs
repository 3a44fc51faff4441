//! ICMPv6 (RFC 4443). Neighbour discovery messages have their own view
//! in [`ndisc`](crate::ndisc).
//!
//! [`Icmpv6Packet::new_checked`] checks that the 8-byte header is in the
//! buffer; after it no accessor panics. The buffer is the whole message
//! (the upper-layer part of the IPv6 payload): the checksum covers all of
//! it and the IPv6 pseudo-header (RFC 4443 2.3, RFC 8200 8.1), so the
//! checksum methods take the source and destination addresses.

use crate::ParseError;
use crate::bytes::{read_u16, read_u32, write_u16, write_u32};
use crate::checksum;

/// ICMPv6 message types (IANA) this crate names.
pub mod msg {
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 1;
    /// Packet too big (the MTU is in the rest of the header).
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem (the pointer is in the rest of the header).
    pub const PARAM_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Router solicitation.
    pub const ROUTER_SOLICIT: u8 = 133;
    /// Router advertisement.
    pub const ROUTER_ADVERT: u8 = 134;
    /// Neighbour solicitation.
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    /// Neighbour advertisement.
    pub const NEIGHBOR_ADVERT: u8 = 136;
    /// Redirect.
    pub const REDIRECT: u8 = 137;
}

/// Codes of destination unreachable.
pub mod unreachable {
    /// No route to destination.
    pub const NO_ROUTE: u8 = 0;
    /// Communication administratively prohibited.
    pub const ADMIN_PROHIBITED: u8 = 1;
    /// Beyond scope of source address.
    pub const BEYOND_SCOPE: u8 = 2;
    /// Address unreachable (neighbour discovery failed).
    pub const ADDRESS: u8 = 3;
    /// Port unreachable.
    pub const PORT: u8 = 4;
}

/// Codes of time exceeded.
pub mod time_exceeded {
    /// Hop limit exceeded in transit.
    pub const HOP_LIMIT: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const REASSEMBLY: u8 = 1;
}

/// Codes of parameter problem.
pub mod param_problem {
    /// Erroneous header field encountered.
    pub const HEADER_FIELD: u8 = 0;
    /// Unrecognized next header type encountered.
    pub const NEXT_HEADER: u8 = 1;
    /// Unrecognized IPv6 option encountered.
    pub const OPTION: u8 = 2;
}
/// Whether messages of type `t` are errors. RFC 4443 2.1: error messages
/// have 0 in the high-order bit of the type, informational ones 1; and
/// 2.4 (e.1): no error is sent about an error.
#[inline]
pub const fn is_error(t: u8) -> bool {
    t < 128
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQ: Range<usize> = 6..8;
}

/// Length of the ICMPv6 header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = 8;

/// The ICMPv6 checksum of `msg` (checksum field included as it is) with
/// the pseudo-header of `src` and `dst`.
#[inline]
pub(crate) fn sum_with_pseudo(src: u128, dst: u128, msg: &[u8]) -> u16 {
    let ph =
        checksum::pseudo_header_v6(src, dst, crate::ipv6::next_header::ICMPV6, msg.len() as u32);
    !checksum::fold(checksum::add(ph, checksum::sum(msg)))
}

/// A view of an ICMPv6 message in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wrap a buffer without checks; accessors may panic on a short one.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
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

    /// Check the 8-byte header is in the buffer.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if it is not.
    #[inline]
    pub fn check_len(&self) -> Result<(), ParseError> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type (see [`msg`]).
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Code.
    #[inline]
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The 4 bytes after the checksum, big-endian: unused (0) in
    /// destination unreachable and time exceeded, the MTU of packet too
    /// big, the pointer of parameter problem, identifier and sequence of
    /// an echo.
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::REST)
    }

    /// The MTU of a packet too big message.
    #[inline]
    pub fn mtu(&self) -> u32 {
        self.rest_of_header()
    }

    /// The pointer of a parameter problem message: the offset in the
    /// invoking packet of the field at fault.
    #[inline]
    pub fn pointer(&self) -> u32 {
        self.rest_of_header()
    }

    /// Identifier of an echo request or reply.
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Sequence number of an echo request or reply.
    #[inline]
    pub fn echo_seq(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_SEQ)
    }

    /// Everything after the header: an echo's data, or an error's quoted
    /// packet.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Whether the checksum over the pseudo-header of `src` -> `dst` and
    /// the whole message verifies.
    #[inline]
    pub fn verify_checksum(&self, src: u128, dst: u128) -> bool {
        sum_with_pseudo(src, dst, self.buffer.as_ref()) == 0
    }

    /// Whether this message is an error (see [`is_error`]).
    #[inline]
    pub fn is_error(&self) -> bool {
        is_error(self.msg_type())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Set the message type.
    #[inline]
    pub fn set_msg_type(&mut self, t: u8) {
        self.buffer.as_mut()[field::TYPE] = t;
    }

    /// Set the code.
    #[inline]
    pub fn set_code(&mut self, c: u8) {
        self.buffer.as_mut()[field::CODE] = c;
    }

    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    /// Set the 4 bytes after the checksum.
    #[inline]
    pub fn set_rest_of_header(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::REST, v);
    }

    /// Compute the checksum (pseudo-header of `src` -> `dst` and the whole
    /// message) and store it.
    #[inline]
    pub fn fill_checksum(&mut self, src: u128, dst: u128) {
        self.set_checksum(0);
        let c = sum_with_pseudo(src, dst, self.buffer.as_ref());
        self.set_checksum(c);
    }

    /// Change type and code, updating the checksum incrementally (RFC
    /// 1624). Swapping source and destination leaves the pseudo-header's
    /// sum as it was, so an echo request becomes a reply with this alone.
    #[inline]
    pub fn set_type_code_update_checksum(&mut self, t: u8, code: u8) {
        let b = self.buffer.as_ref();
        let old = u16::from_be_bytes([b[field::TYPE], b[field::CODE]]);
        let new = u16::from_be_bytes([t, code]);
        let c = checksum::update16(self.checksum(), old, new);
        self.set_msg_type(t);
        self.set_code(code);
        self.set_checksum(c);
    }

    /// The data after the header, mutable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// An ICMPv6 header as values (the data is the buffer's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Icmpv6Repr {
    /// Message type.
    pub msg_type: u8,
    /// Code.
    pub code: u8,
    /// The 4 bytes after the checksum.
    pub rest_of_header: u32,
}

impl Icmpv6Repr {
    /// Read a checked message whose checksum verifies for `src` -> `dst`.
    ///
    /// # Errors
    /// [`ParseError::BadChecksum`].
    pub fn parse<T: AsRef<[u8]>>(
        p: &Icmpv6Packet<T>,
        src: u128,
        dst: u128,
    ) -> Result<Icmpv6Repr, ParseError> {
        if !p.verify_checksum(src, dst) {
            return Err(ParseError::BadChecksum);
        }
        Ok(Icmpv6Repr {
            msg_type: p.msg_type(),
            code: p.code(),
            rest_of_header: p.rest_of_header(),
        })
    }

    /// The header length this repr emits (8).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into the start of `buf` and fill the checksum over
    /// the pseudo-header and all of `buf` (the data already in place).
    ///
    /// # Panics
    /// If `buf` is shorter than 8 bytes.
    pub fn emit(&self, buf: &mut [u8], src: u128, dst: u128) {
        let mut p = Icmpv6Packet::new_unchecked(buf);
        p.set_msg_type(self.msg_type);
        p.set_code(self.code);
        p.set_rest_of_header(self.rest_of_header);
        p.fill_checksum(src, dst);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    const FE80_1: u128 = 0xfe80_0000_0000_0000_0000_0000_0000_0001;
    const FE80_2: u128 = 0xfe80_0000_0000_0000_0000_0000_0000_0002;

    #[test]
    fn echo_and_errors() {
        // An echo request fe80::1 -> fe80::2, id 0x1234 seq 1, "abcd".
        let mut b = [128u8, 0, 0, 0, 0x12, 0x34, 0, 1, b'a', b'b', b'c', b'd'];
        Icmpv6Repr {
            msg_type: msg::ECHO_REQUEST,
            code: 0,
            rest_of_header: 0x1234_0001,
        }
        .emit(&mut b, FE80_1, FE80_2);
        let mut p = Icmpv6Packet::new_checked(&mut b[..]).unwrap();
        assert!(p.verify_checksum(FE80_1, FE80_2));
        assert_eq!((p.echo_ident(), p.echo_seq()), (0x1234, 1));
        p.set_type_code_update_checksum(msg::ECHO_REPLY, 0);
        assert!(p.verify_checksum(FE80_2, FE80_1), "addresses swapped");
        assert!(!p.is_error());
        let mut ptb = [2u8, 0, 0, 0, 0, 0, 0x05, 0xdc];
        Icmpv6Packet::new_unchecked(&mut ptb[..]).fill_checksum(FE80_1, FE80_2);
        let p = Icmpv6Packet::new_checked(&ptb[..]).unwrap();
        assert!(p.is_error());
        assert_eq!(p.mtu(), 1500);
        for t in [1, 2, 3, 4, 127] {
            assert!(is_error(t));
        }
        for t in [128, 129, 133, 135, 136, 255] {
            assert!(!is_error(t));
        }
    }

    use crate::testdata::{LINUX_ECHO, LINUX_RS};

    /// The IPv6 packet of a frame, and its ICMPv6 message.
    pub(crate) fn split(f: &[u8]) -> (crate::ipv6::Ipv6Packet<&[u8]>, &[u8]) {
        let ip = crate::ipv6::Ipv6Packet::new_checked(&f[14..]).unwrap();
        let m = &f[14 + 40..14 + ip.total_len()];
        (ip, m)
    }

    #[test]
    fn linux_echo_and_router_solicitation() {
        let (ip, m) = split(&LINUX_ECHO);
        let p = Icmpv6Packet::new_checked(m).unwrap();
        assert!(p.verify_checksum(ip.src_u128(), ip.dst_u128()));
        assert_eq!(
            (p.msg_type(), p.echo_ident(), p.echo_seq()),
            (128, 0x1d02, 1)
        );
        assert_eq!(&p.data()[..4], b"abcd");
        let (ip, m) = split(&LINUX_RS);
        let p = Icmpv6Packet::new_checked(m).unwrap();
        assert!(p.verify_checksum(ip.src_u128(), ip.dst_u128()));
        assert_eq!(p.msg_type(), msg::ROUTER_SOLICIT);
        // Not a neighbour message.
        assert_eq!(
            crate::ndisc::NdPacket::new_checked(m),
            Err(ParseError::WrongProtocol)
        );
    }
    #[test]
    fn random_bytes_never_panic() {
        let mut s = 0x1234_5678_9abc_def1u64;
        for _ in 0..5000 {
            let len = (crate::ipv6::tests::xorshift(&mut s) % 64) as usize;
            let b: Vec<u8> = (0..len)
                .map(|_| crate::ipv6::tests::xorshift(&mut s) as u8)
                .collect();
            if let Ok(p) = Icmpv6Packet::new_checked(&b[..]) {
                let _ = (p.data(), p.mtu(), p.verify_checksum(1, 2), p.echo_seq());
                let _ = (p.pointer(), p.is_error(), Icmpv6Repr::parse(&p, 1, 2));
            }
        }
    }

    proptest! {
        #[test]
        fn emit_parse(t: u8, code: u8, rest: u32, src: u128, dst: u128, data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let r = Icmpv6Repr { msg_type: t, code, rest_of_header: rest };
            let mut b = vec![0u8; HEADER_LEN];
            b.extend_from_slice(&data);
            r.emit(&mut b, src, dst);
            let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
            prop_assert_eq!(Icmpv6Repr::parse(&p, src, dst), Ok(r));
        }
    }
}
