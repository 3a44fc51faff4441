//! ARP for IPv4 over Ethernet (RFC 826).
//!
//! Only the one combination vrhost speaks is viewed: hardware type 1
//! (Ethernet, 6-byte addresses) and protocol type 0x0800 (IPv4, 4-byte
//! addresses), a 28-byte packet. [`ArpPacket::new_checked`] checks the
//! length and those four fields; after it no accessor panics. Bytes after
//! the 28 (Ethernet padding to 60 bytes) are ignored.
//!
//! RFC 826 leaves the target hardware address of a request unspecified;
//! senders put zeros there (Linux) or the broadcast address (some stacks),
//! so nothing here relies on it.

use core::net::Ipv4Addr;

use crate::ParseError;
use crate::bytes::{read_u16, read_u32, write_u16, write_u32};
use crate::ethernet::EtherType;
use crate::mac::MacAddr;

mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;
/// Hardware type of Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

/// The operation of an ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// 1: who has the target protocol address?
    Request,
    /// 2: the sender hardware address has the sender protocol address.
    Reply,
    /// Anything else (RARP's 3 and 4, InARP's 8 and 9...).
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(v: u16) -> Self {
        match v {
            1 => Self::Request,
            2 => Self::Reply,
            v => Self::Unknown(v),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(op: ArpOperation) -> u16 {
        match op {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(v) => v,
        }
    }
}

/// A view of an Ethernet/IPv4 ARP packet in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wrap a buffer without checks; accessors may panic on a short one.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
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

    /// Check the buffer holds an Ethernet/IPv4 ARP packet.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if the buffer is shorter than the 8-byte
    /// fixed part or than 28 bytes; [`ParseError::Unsupported`] for another
    /// hardware or protocol type; [`ParseError::BadArpAddressLength`] when
    /// the address lengths are not 6 and 4 for Ethernet and IPv4.
    #[inline]
    pub fn check(&self) -> Result<(), ParseError> {
        let b = self.buffer.as_ref();
        if b.len() < field::SHA.start {
            return Err(ParseError::Truncated);
        }
        if self.hardware_type() != HTYPE_ETHERNET || self.protocol_type() != EtherType::IPV4 {
            return Err(ParseError::Unsupported);
        }
        if b[field::HLEN] != 6 || b[field::PLEN] != 4 {
            return Err(ParseError::BadArpAddressLength);
        }
        if b.len() < PACKET_LEN {
            return Err(ParseError::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type (1 after `new_checked`).
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::HTYPE)
    }

    /// Protocol type (IPv4 after `new_checked`).
    #[inline]
    pub fn protocol_type(&self) -> EtherType {
        EtherType(read_u16(self.buffer.as_ref(), field::PTYPE))
    }

    /// Operation.
    #[inline]
    pub fn operation(&self) -> ArpOperation {
        read_u16(self.buffer.as_ref(), field::OPER).into()
    }

    /// Sender hardware address.
    #[inline]
    pub fn sender_hardware_addr(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buffer.as_ref()[field::SHA])
    }

    /// Sender protocol address as a host-order integer.
    #[inline]
    pub fn sender_protocol_u32(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::SPA)
    }

    /// Sender protocol address.
    #[inline]
    pub fn sender_protocol_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.sender_protocol_u32())
    }

    /// Target hardware address.
    #[inline]
    pub fn target_hardware_addr(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buffer.as_ref()[field::THA])
    }

    /// Target protocol address as a host-order integer.
    #[inline]
    pub fn target_protocol_u32(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::TPA)
    }

    /// Target protocol address.
    #[inline]
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.target_protocol_u32())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Write the fixed part for Ethernet/IPv4 (types and address lengths).
    #[inline]
    pub fn set_ethernet_ipv4(&mut self) {
        let b = self.buffer.as_mut();
        write_u16(b, field::HTYPE, HTYPE_ETHERNET);
        write_u16(b, field::PTYPE, EtherType::IPV4.0);
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
    }

    /// Set the operation.
    #[inline]
    pub fn set_operation(&mut self, op: ArpOperation) {
        write_u16(self.buffer.as_mut(), field::OPER, u16::from(op));
    }

    /// Set the sender hardware address.
    #[inline]
    pub fn set_sender_hardware_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&a.0);
    }

    /// Set the sender protocol address from a host-order integer.
    #[inline]
    pub fn set_sender_protocol_u32(&mut self, a: u32) {
        write_u32(self.buffer.as_mut(), field::SPA, a);
    }

    /// Set the target hardware address.
    #[inline]
    pub fn set_target_hardware_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&a.0);
    }

    /// Set the target protocol address from a host-order integer.
    #[inline]
    pub fn set_target_protocol_u32(&mut self, a: u32) {
        write_u32(self.buffer.as_mut(), field::TPA, a);
    }
}

/// An Ethernet/IPv4 ARP packet as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Operation.
    pub operation: ArpOperation,
    /// Sender hardware address.
    pub sender_hardware_addr: MacAddr,
    /// Sender protocol address.
    pub sender_protocol_addr: Ipv4Addr,
    /// Target hardware address.
    pub target_hardware_addr: MacAddr,
    /// Target protocol address.
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Read a checked packet.
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> ArpRepr {
        ArpRepr {
            operation: p.operation(),
            sender_hardware_addr: p.sender_hardware_addr(),
            sender_protocol_addr: p.sender_protocol_addr(),
            target_hardware_addr: p.target_hardware_addr(),
            target_protocol_addr: p.target_protocol_addr(),
        }
    }

    /// The length this repr emits (28).
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Write the packet into the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 28 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        let mut p = ArpPacket::new_unchecked(&mut buf[..PACKET_LEN]);
        p.set_ethernet_ipv4();
        p.set_operation(self.operation);
        p.set_sender_hardware_addr(self.sender_hardware_addr);
        p.set_sender_protocol_u32(self.sender_protocol_addr.to_bits());
        p.set_target_hardware_addr(self.target_hardware_addr);
        p.set_target_protocol_u32(self.target_protocol_addr.to_bits());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // Who has 192.168.1.1? Tell 192.168.1.100.
    use crate::testdata::ARP_REQUEST as REQUEST;
    use proptest::prelude::*;

    #[test]
    fn captured_request() {
        let p = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.operation(), ArpOperation::Request);
        assert_eq!(p.sender_hardware_addr().to_string(), "00:1b:21:3a:4f:5e");
        assert_eq!(p.sender_protocol_addr(), Ipv4Addr::new(192, 168, 1, 100));
        assert_eq!(p.target_hardware_addr(), MacAddr::ZERO);
        assert_eq!(p.target_protocol_u32(), 0xc0a8_0101);
        let r = ArpRepr::parse(&p);
        let mut b = [0xeeu8; 28];
        r.emit(&mut b);
        assert_eq!(b, REQUEST);
    }

    #[test]
    fn padded_is_fine() {
        let mut b = REQUEST.to_vec();
        b.resize(46, 0);
        assert!(ArpPacket::new_checked(&b[..]).is_ok());
    }

    #[test]
    fn check_errors() {
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..7]),
            Err(ParseError::Truncated)
        );
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..27]),
            Err(ParseError::Truncated)
        );
        let mut b = REQUEST;
        b[1] = 6; // IEEE 802 hardware type
        assert_eq!(ArpPacket::new_checked(&b[..]), Err(ParseError::Unsupported));
        let mut b = REQUEST;
        b[2] = 0x86; // IPv6 protocol type
        b[3] = 0xdd;
        assert_eq!(ArpPacket::new_checked(&b[..]), Err(ParseError::Unsupported));
        let mut b = REQUEST;
        b[4] = 8;
        assert_eq!(
            ArpPacket::new_checked(&b[..]),
            Err(ParseError::BadArpAddressLength)
        );
        let mut b = REQUEST;
        b[5] = 16;
        assert_eq!(
            ArpPacket::new_checked(&b[..]),
            Err(ParseError::BadArpAddressLength)
        );
        // A claim of 4-byte addresses checked before the length: an 8-byte
        // buffer with a bad length says so rather than "truncated".
        let mut b = REQUEST;
        b[4] = 2;
        assert_eq!(
            ArpPacket::new_checked(&b[..8]),
            Err(ParseError::BadArpAddressLength)
        );
    }

    #[test]
    fn operations() {
        for (v, op) in [
            (1, ArpOperation::Request),
            (2, ArpOperation::Reply),
            (3, ArpOperation::Unknown(3)),
        ] {
            assert_eq!(ArpOperation::from(v), op);
            assert_eq!(u16::from(op), v);
        }
    }

    fn repr() -> impl Strategy<Value = ArpRepr> {
        (
            any::<u16>(),
            any::<[u8; 6]>(),
            any::<u32>(),
            any::<[u8; 6]>(),
            any::<u32>(),
        )
            .prop_map(|(op, sha, spa, tha, tpa)| ArpRepr {
                operation: op.into(),
                sender_hardware_addr: MacAddr(sha),
                sender_protocol_addr: spa.into(),
                target_hardware_addr: MacAddr(tha),
                target_protocol_addr: tpa.into(),
            })
    }

    proptest! {
        #[test]
        fn parse_emit(r in repr(), extra in 0usize..32) {
            let mut b = vec![0u8; r.buffer_len() + extra];
            r.emit(&mut b);
            let p = ArpPacket::new_checked(&b[..]).unwrap();
            prop_assert_eq!(ArpRepr::parse(&p), r);
        }

        #[test]
        fn random_bytes_never_panic(mut b in proptest::collection::vec(any::<u8>(), 0..40), fix: bool) {
            if fix && b.len() >= 6 {
                b[..6].copy_from_slice(&REQUEST[..6]);
            }
            if let Ok(p) = ArpPacket::new_checked(&b[..]) {
                let _ = ArpRepr::parse(&p);
                prop_assert!(b.len() >= PACKET_LEN);
            }
        }
    }
}
