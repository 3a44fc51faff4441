//! ICMP for IPv4 (RFC 792).
//!
//! [`Icmpv4Packet::new_checked`] checks that the 8-byte header (type, code,
//! checksum and the 4-byte "rest of header") is in the buffer; after it no
//! accessor panics. The buffer is the whole message, as bounded by the IPv4
//! total length ([`Ipv4Packet::payload`](crate::ipv4::Ipv4Packet::payload)):
//! the checksum covers all of it.
//!
//! Error messages (destination unreachable, time exceeded, ...) carry the
//! offending datagram's IP header and its first 64 bits of data after the
//! header (RFC 792); [`is_error`] says which types are errors, so that no
//! error is ever sent about one (RFC 1122 3.2.2).

use crate::ParseError;
use crate::checksum;

/// ICMP message types (IANA) this crate names.
pub mod msg {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DST_UNREACHABLE: u8 = 3;
    /// Source quench (deprecated by RFC 6633).
    pub const SOURCE_QUENCH: u8 = 4;
    /// Redirect.
    pub const REDIRECT: u8 = 5;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
    /// Parameter problem.
    pub const PARAM_PROBLEM: u8 = 12;
    /// The highest type RFC 792 and its successors define that a router
    /// has to know (address mask reply, 18).
    pub const LAST_KNOWN: u8 = 18;
}

/// Codes of destination unreachable.
pub mod unreachable {
    /// Network unreachable (no route).
    pub const NET: u8 = 0;
    /// Host unreachable (the last hop could not reach it: ARP failed).
    pub const HOST: u8 = 1;
    /// Protocol unreachable.
    pub const PROTOCOL: u8 = 2;
    /// Port unreachable.
    pub const PORT: u8 = 3;
    /// Fragmentation needed and DF set.
    pub const FRAG_NEEDED: u8 = 4;
    /// Communication administratively prohibited (RFC 1812).
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// Codes of time exceeded.
pub mod time_exceeded {
    /// TTL exceeded in transit.
    pub const TTL: u8 = 0;
    /// Fragment reassembly time exceeded.
    pub const REASSEMBLY: u8 = 1;
}

/// Whether messages of type `t` are errors, about which no error may be
/// sent (RFC 1122 3.2.2, RFC 1812 4.3.2.7). Unknown types count as errors,
/// as Linux counts them: it is the side that never answers.
#[inline]
pub const fn is_error(t: u8) -> bool {
    matches!(
        t,
        msg::DST_UNREACHABLE
            | msg::SOURCE_QUENCH
            | msg::REDIRECT
            | msg::TIME_EXCEEDED
            | msg::PARAM_PROBLEM
    ) || t > msg::LAST_KNOWN
}

pub use crate::icmp_header::HEADER_LEN;

crate::icmp_header::icmp_header_view!(
    /// A view of an ICMP message in a byte buffer.
    Icmpv4Packet
);

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Whether the checksum over the whole message verifies.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Compute the checksum over the whole message and store it.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// An ICMP header as values (the data is the buffer's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Icmpv4Repr {
    /// Message type.
    pub msg_type: u8,
    /// Code.
    pub code: u8,
    /// The 4 bytes after the checksum.
    pub rest_of_header: u32,
}

impl Icmpv4Repr {
    /// Read a checked message whose checksum verifies.
    ///
    /// # Errors
    /// [`ParseError::BadChecksum`].
    pub fn parse<T: AsRef<[u8]>>(p: &Icmpv4Packet<T>) -> Result<Icmpv4Repr, ParseError> {
        if !p.verify_checksum() {
            return Err(ParseError::BadChecksum);
        }
        Ok(Icmpv4Repr {
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
    /// all of `buf` (header and the data already in place after it).
    ///
    /// # Panics
    /// If `buf` is shorter than 8 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = Icmpv4Packet::new_unchecked(buf);
        p.set_msg_type(self.msg_type);
        p.set_code(self.code);
        p.set_rest_of_header(self.rest_of_header);
        p.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An echo request (id 0x1234, seq 1, data "abcd"), checksum by hand:
    /// 0x0800 + 0x1234 + 0x0001 + 0x6162 + 0x6364 = 0xdefb, checksum 0x2104.
    const ECHO: [u8; 12] = [
        0x08, 0x00, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64,
    ];

    #[test]
    fn echo_request() {
        let p = Icmpv4Packet::new_checked(&ECHO[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!((p.msg_type(), p.code()), (msg::ECHO_REQUEST, 0));
        assert_eq!((p.echo_ident(), p.echo_seq()), (0x1234, 1));
        assert_eq!(p.data(), b"abcd");
        assert!(!p.is_error());
        assert_eq!(
            Icmpv4Repr::parse(&p),
            Ok(Icmpv4Repr {
                msg_type: 8,
                code: 0,
                rest_of_header: 0x1234_0001
            })
        );
    }

    #[test]
    fn echo_to_reply_incrementally() {
        let mut b = ECHO;
        let mut p = Icmpv4Packet::new_checked(&mut b[..]).unwrap();
        p.set_type_code_update_checksum(msg::ECHO_REPLY, 0);
        assert!(p.verify_checksum());
        let inc = p.checksum();
        p.fill_checksum();
        assert_eq!(inc, p.checksum());
        // The sum loses 0x0800: 0xd6fb, checksum 0x2904.
        assert_eq!(inc, 0x2904);
    }

    #[test]
    fn short_and_bad() {
        assert_eq!(
            Icmpv4Packet::new_checked(&ECHO[..7]),
            Err(ParseError::Truncated)
        );
        let mut b = ECHO;
        b[11] ^= 1;
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&p), Err(ParseError::BadChecksum));
    }

    #[test]
    fn error_types() {
        for t in [3, 4, 5, 11, 12, 19, 255] {
            assert!(is_error(t), "{t}");
        }
        for t in [0, 8, 9, 10, 13, 14, 17, 18] {
            assert!(!is_error(t), "{t}");
        }
    }

    proptest! {
        #[test]
        fn emit_parse(t: u8, code: u8, rest: u32, data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let r = Icmpv4Repr { msg_type: t, code, rest_of_header: rest };
            let mut b = vec![0u8; HEADER_LEN];
            b.extend_from_slice(&data);
            r.emit(&mut b);
            let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
            prop_assert_eq!(Icmpv4Repr::parse(&p), Ok(r));
            prop_assert_eq!(p.data(), &data[..]);
        }

        #[test]
        fn type_change_matches_recompute(t: u8, code: u8, data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut b = vec![8u8, 0, 0, 0, 1, 2, 3, 4];
            b.extend_from_slice(&data);
            let mut p = Icmpv4Packet::new_unchecked(&mut b[..]);
            p.fill_checksum();
            p.set_type_code_update_checksum(t, code);
            prop_assert!(p.verify_checksum());
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = Icmpv4Packet::new_checked(&b[..]) {
                let _ = (p.data(), p.echo_seq(), p.rest_of_header(), p.is_error(), Icmpv4Repr::parse(&p));
            }
        }
    }
}
