//! ICMPv6 (RFC 4443). Neighbour discovery messages have their own view
//! in [`ndisc`](crate::ndisc).
//!
//! [`Icmpv6Packet::new_checked`] checks that the 8-byte header is in the
//! buffer; after it no accessor panics. The buffer is the whole message
//! (the upper-layer part of the IPv6 payload): the checksum covers all of
//! it and the IPv6 pseudo-header (RFC 4443 2.3, RFC 8200 8.1), so the
//! checksum methods take the source and destination addresses.

use crate::ParseError;
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

pub use crate::icmp_header::HEADER_LEN;

/// The ICMPv6 checksum of `msg` (checksum field included as it is) with
/// the pseudo-header of `src` and `dst`.
#[inline]
pub(crate) fn sum_with_pseudo(src: u128, dst: u128, msg: &[u8]) -> u16 {
    let ph =
        checksum::pseudo_header_v6(src, dst, crate::ipv6::next_header::ICMPV6, msg.len() as u32);
    !checksum::fold(checksum::add(ph, checksum::sum(msg)))
}

crate::icmp_header::icmp_header_view!(
    /// A view of an ICMPv6 message in a byte buffer.
    Icmpv6Packet
);

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
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

    /// Whether the checksum over the pseudo-header of `src` -> `dst` and
    /// the whole message verifies.
    #[inline]
    pub fn verify_checksum(&self, src: u128, dst: u128) -> bool {
        sum_with_pseudo(src, dst, self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Compute the checksum (pseudo-header of `src` -> `dst` and the whole
    /// message) and store it.
    #[inline]
    pub fn fill_checksum(&mut self, src: u128, dst: u128) {
        self.set_checksum(0);
        let c = sum_with_pseudo(src, dst, self.buffer.as_ref());
        self.set_checksum(c);
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
