//! Neighbour discovery (RFC 4861): the solicitation and advertisement a
//! router answers and sends, over [`icmpv6`](crate::icmpv6).
//!
//! [`NdPacket::new_checked`] checks a neighbour solicitation or
//! advertisement: type 135 or 136, the 24 bytes up to the end of the
//! target address, and every option's length (non-zero, within the
//! message: RFC 4861 4.6 "Nodes MUST silently discard an ND packet that
//! contains an option with length zero"); after it, no accessor panics.
//! The other validity rules of RFC 4861 7.1 (hop limit 255, code 0, the
//! checksum, no source link-layer option from `::`) are the receiver's,
//! who has the IPv6 header.
//!
//! Router solicitations and advertisements are not parsed: a router that
//! sends no advertisements ignores solicitations (RFC 4861 6.2.6 only
//! applies to advertising interfaces).

use crate::bytes::{read_u128, write_u128};
use crate::icmpv6::{Icmpv6Packet, msg, sum_with_pseudo};
use crate::{MacAddr, ParseError};

/// Neighbour discovery option types (RFC 4861 4.6).
pub mod nd_option {
    /// Source link-layer address.
    pub const SOURCE_LL_ADDR: u8 = 1;
    /// Target link-layer address.
    pub const TARGET_LL_ADDR: u8 = 2;
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const FLAGS: usize = 4;
    pub const TARGET: Range<usize> = 8..24;
    pub const OPTIONS: usize = 24;
}

/// Length of a neighbour solicitation or advertisement without options.
pub const ND_LEN: usize = field::OPTIONS;
/// Length of a link-layer address option for Ethernet (one 8-byte unit).
pub const LL_OPTION_LEN: usize = 8;

/// A view of a neighbour solicitation or advertisement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NdPacket<T: AsRef<[u8]>> {
    buffer: T,
}

/// Advertisement flag: the sender is a router.
pub const NA_ROUTER: u8 = 0x80;
/// Advertisement flag: sent in response to a solicitation.
pub const NA_SOLICITED: u8 = 0x40;
/// Advertisement flag: override an existing cache entry.
pub const NA_OVERRIDE: u8 = 0x20;

impl<T: AsRef<[u8]>> NdPacket<T> {
    /// Wrap a buffer without checks; accessors may panic on a bad one.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        NdPacket { buffer }
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

    /// Check the type (135 or 136, checked first), the length (24 bytes
    /// and more) and the options (each of non-zero length, within the
    /// message).
    ///
    /// # Errors
    /// [`ParseError::WrongProtocol`] for another type,
    /// [`ParseError::Truncated`], [`ParseError::BadNdOption`].
    pub fn check(&self) -> Result<(), ParseError> {
        let b = self.buffer.as_ref();
        let t = *b.first().ok_or(ParseError::Truncated)?;
        if !matches!(t, msg::NEIGHBOR_SOLICIT | msg::NEIGHBOR_ADVERT) {
            return Err(ParseError::WrongProtocol);
        }
        if b.len() < ND_LEN {
            return Err(ParseError::Truncated);
        }
        let mut at = ND_LEN;
        // Each option takes 8 bytes at least: the loop is bounded by the
        // message length / 8.
        while at < b.len() {
            let len = usize::from(*b.get(at + 1).ok_or(ParseError::BadNdOption)?) * 8;
            if len == 0 || at + len > b.len() {
                return Err(ParseError::BadNdOption);
            }
            at += len;
        }
        Ok(())
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Whether this is a solicitation (else an advertisement).
    #[inline]
    pub fn is_solicit(&self) -> bool {
        self.buffer.as_ref()[field::TYPE] == msg::NEIGHBOR_SOLICIT
    }

    /// The advertisement flags ([`NA_ROUTER`], [`NA_SOLICITED`],
    /// [`NA_OVERRIDE`]; reserved in a solicitation).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0xe0
    }

    /// The target address, host order.
    #[inline]
    pub fn target_u128(&self) -> u128 {
        read_u128(self.buffer.as_ref(), field::TARGET)
    }

    /// The options, as `(type, bytes after type and length)`.
    pub fn options(&self) -> NdOptions<'_> {
        NdOptions {
            rest: &self.buffer.as_ref()[ND_LEN..],
        }
    }

    /// The first link-layer address option of type `kind` for Ethernet
    /// (length 1).
    fn ll_option(&self, kind: u8) -> Option<MacAddr> {
        self.options()
            .find(|&(t, v)| t == kind && v.len() == LL_OPTION_LEN - 2)
            .map(|(_, v)| MacAddr::from_bytes(v))
    }

    /// The source link-layer address option (solicitations).
    #[inline]
    pub fn source_ll_addr(&self) -> Option<MacAddr> {
        self.ll_option(nd_option::SOURCE_LL_ADDR)
    }

    /// The target link-layer address option (advertisements).
    #[inline]
    pub fn target_ll_addr(&self) -> Option<MacAddr> {
        self.ll_option(nd_option::TARGET_LL_ADDR)
    }
}

/// The options of a checked [`NdPacket`].
#[derive(Debug, Clone)]
pub struct NdOptions<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for NdOptions<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let len = usize::from(*self.rest.get(1)?) * 8;
        if len == 0 || len > self.rest.len() {
            // Not after `check`; stop rather than loop or panic.
            self.rest = &[];
            return None;
        }
        let (o, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some((o[0], &o[2..]))
    }
}

/// A neighbour solicitation or advertisement as values, with at most one
/// link-layer address option (source for a solicitation, target for an
/// advertisement).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NdRepr {
    /// Solicitation (else advertisement).
    pub solicit: bool,
    /// Advertisement flags (0 in a solicitation).
    pub flags: u8,
    /// Target address.
    pub target: u128,
    /// The link-layer address option.
    pub ll_addr: Option<MacAddr>,
}

impl NdRepr {
    /// Read a checked message whose checksum verifies for `src` -> `dst`.
    ///
    /// # Errors
    /// [`ParseError::BadChecksum`].
    pub fn parse<T: AsRef<[u8]>>(
        p: &NdPacket<T>,
        src: u128,
        dst: u128,
    ) -> Result<NdRepr, ParseError> {
        if sum_with_pseudo(src, dst, p.buffer.as_ref()) != 0 {
            return Err(ParseError::BadChecksum);
        }
        let solicit = p.is_solicit();
        Ok(NdRepr {
            solicit,
            flags: if solicit { 0 } else { p.flags() },
            target: p.target_u128(),
            ll_addr: if solicit {
                p.source_ll_addr()
            } else {
                p.target_ll_addr()
            },
        })
    }

    /// The message length this repr emits (24, or 32 with the option).
    pub const fn buffer_len(&self) -> usize {
        ND_LEN
            + if self.ll_addr.is_some() {
                LL_OPTION_LEN
            } else {
                0
            }
    }

    /// Write the message into the start of `buf`, checksum for `src` ->
    /// `dst` filled.
    ///
    /// # Panics
    /// If `buf` is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, buf: &mut [u8], src: u128, dst: u128) {
        let buf = &mut buf[..self.buffer_len()];
        buf[..ND_LEN].fill(0);
        buf[field::TYPE] = if self.solicit {
            msg::NEIGHBOR_SOLICIT
        } else {
            msg::NEIGHBOR_ADVERT
        };
        buf[field::FLAGS] = self.flags & 0xe0;
        write_u128(buf, field::TARGET, self.target);
        if let Some(mac) = self.ll_addr {
            buf[ND_LEN] = if self.solicit {
                nd_option::SOURCE_LL_ADDR
            } else {
                nd_option::TARGET_LL_ADDR
            };
            buf[ND_LEN + 1] = 1;
            buf[ND_LEN + 2..ND_LEN + 8].copy_from_slice(&mac.0);
        }
        Icmpv6Packet::new_unchecked(buf).fill_checksum(src, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icmpv6::tests::split;

    const FE80_1: u128 = 0xfe80_0000_0000_0000_0000_0000_0000_0001;
    const FE80_2: u128 = 0xfe80_0000_0000_0000_0000_0000_0000_0002;

    /// A neighbour solicitation from fe80::1 (MAC 02:00:00:00:00:01) for
    /// fe80::2, to ff02::1:ff00:2 (type, code, checksum,
    /// reserved, target, source link-layer option; RFC 4861 4.3). Written
    /// by hand; the checksum was computed with Python's
    /// one's-complement sum over the pseudo-header and message.
    #[rustfmt::skip]
    const NS: [u8; 32] = [
        135, 0, 0x7a, 0x97, 0, 0, 0, 0,
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
        1, 1, 2, 0, 0, 0, 0, 1,
    ];
    const NS_DST: u128 = 0xff02_0000_0000_0000_0000_0001_ff00_0002;

    #[test]
    fn neighbour_solicitation() {
        let i = Icmpv6Packet::new_checked(&NS[..]).unwrap();
        assert!(i.verify_checksum(FE80_1, NS_DST));
        assert!(!i.verify_checksum(FE80_2, NS_DST), "pseudo-header counts");
        assert_eq!((i.msg_type(), i.code(), i.checksum()), (135, 0, 0x7a97));
        let n = NdPacket::new_checked(&NS[..]).unwrap();
        assert!(n.is_solicit());
        assert_eq!(n.target_u128(), FE80_2);
        assert_eq!(n.source_ll_addr(), Some(MacAddr([2, 0, 0, 0, 0, 1])));
        assert_eq!(n.target_ll_addr(), None);
        let r = NdRepr::parse(&n, FE80_1, NS_DST).unwrap();
        assert_eq!(
            r,
            NdRepr {
                solicit: true,
                flags: 0,
                target: FE80_2,
                ll_addr: Some(MacAddr([2, 0, 0, 0, 0, 1]))
            }
        );
        let mut b = [0xffu8; 32];
        r.emit(&mut b, FE80_1, NS_DST);
        assert_eq!(b, NS);
    }

    #[test]
    fn neighbour_advertisement() {
        let r = NdRepr {
            solicit: false,
            flags: NA_ROUTER | NA_SOLICITED | NA_OVERRIDE,
            target: FE80_2,
            ll_addr: Some(MacAddr([2, 0, 0, 0, 0, 2])),
        };
        let mut b = [0u8; 32];
        r.emit(&mut b, FE80_2, FE80_1);
        assert_eq!(&b[..2], &[136, 0]);
        assert_eq!(b[4], 0xe0);
        assert_eq!(&b[24..32], &[2, 1, 2, 0, 0, 0, 0, 2]);
        let n = NdPacket::new_checked(&b[..]).unwrap();
        assert_eq!(n.target_ll_addr(), Some(MacAddr([2, 0, 0, 0, 0, 2])));
        assert_eq!(NdRepr::parse(&n, FE80_2, FE80_1), Ok(r));
        assert_eq!(
            NdRepr::parse(&n, FE80_2, NS_DST),
            Err(ParseError::BadChecksum)
        );
    }

    #[test]
    fn bad_nd() {
        assert_eq!(NdPacket::new_checked(&NS[..23]), Err(ParseError::Truncated));
        let mut b = NS;
        b[25] = 0;
        assert_eq!(NdPacket::new_checked(&b[..]), Err(ParseError::BadNdOption));
        b[25] = 2;
        assert_eq!(NdPacket::new_checked(&b[..]), Err(ParseError::BadNdOption));
        assert_eq!(
            NdPacket::new_checked(&NS[..25]),
            Err(ParseError::BadNdOption)
        );
        let mut b = NS;
        b[0] = 128;
        assert_eq!(
            NdPacket::new_checked(&b[..]),
            Err(ParseError::WrongProtocol)
        );
        // No options is fine.
        assert!(NdPacket::new_checked(&NS[..24]).is_ok());
    }

    use crate::testdata::{LINUX_NA, LINUX_NS};

    #[test]
    fn linux_neighbour_discovery() {
        let b = 0x2001_0db8_0000_0000_0000_0000_0000_000b_u128;
        let a_ll = 0xfe80_0000_0000_0000_0000_00ff_fe00_000a_u128;
        let (ip, m) = split(&LINUX_NS);
        assert_eq!((ip.hop_limit(), ip.src_u128()), (255, a_ll));
        assert_eq!(ip.dst_u128(), crate::ipv6::solicited_node(b));
        let r = NdRepr::parse(
            &NdPacket::new_checked(m).unwrap(),
            ip.src_u128(),
            ip.dst_u128(),
        );
        assert_eq!(
            r,
            Ok(NdRepr {
                solicit: true,
                flags: 0,
                target: b,
                ll_addr: Some(MacAddr([2, 0, 0, 0, 0, 0x0a]))
            })
        );
        // Our emit writes the same message.
        let mut out = [0u8; 32];
        r.unwrap().emit(&mut out, ip.src_u128(), ip.dst_u128());
        assert_eq!(out[..], m[..]);
        let (ip, m) = split(&LINUX_NA);
        let r = NdRepr::parse(
            &NdPacket::new_checked(m).unwrap(),
            ip.src_u128(),
            ip.dst_u128(),
        )
        .unwrap();
        // A host answers: Solicited and Override, not Router.
        assert_eq!(r.flags, NA_SOLICITED | NA_OVERRIDE);
        assert_eq!(
            (r.target, r.ll_addr),
            (b, Some(MacAddr([2, 0, 0, 0, 0, 0x0b])))
        );
        let mut out = [0u8; 32];
        r.emit(&mut out, b, a_ll);
        assert_eq!(out[..], m[..]);
    }
    #[test]
    fn random_bytes_never_panic() {
        let mut s = 0x1234_5678_9abc_def1u64;
        for _ in 0..5000 {
            let len = (crate::ipv6::tests::xorshift(&mut s) % 64) as usize;
            let mut b: Vec<u8> = (0..len)
                .map(|_| crate::ipv6::tests::xorshift(&mut s) as u8)
                .collect();
            if let Some(x) = b.first_mut() {
                *x = if *x & 1 == 0 { 135 } else { 136 };
            }
            if let Ok(n) = NdPacket::new_checked(&b[..]) {
                let _ = (n.target_u128(), n.flags(), n.options().count());
                let _ = (
                    n.source_ll_addr(),
                    n.target_ll_addr(),
                    NdRepr::parse(&n, 1, 2),
                );
            }
        }
    }
}
