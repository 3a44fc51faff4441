//! Ethernet II frames, with at most one 802.1Q VLAN tag.
//!
//! [`EthernetFrame::new_checked`] checks that the buffer holds the 14-byte
//! header, and the 4-byte tag when the EtherType is [`EtherType::VLAN`];
//! after it, no accessor panics. Stacked tags (QinQ, 0x88a8) are not
//! parsed: such a frame has [`ethertype`](EthernetFrame::ethertype) 0x88a8
//! and its tags are payload. The FCS is not part of the buffer.

use core::fmt;

use crate::bytes::{read_u16, write_u16};
use crate::{MacAddr, ParseError};

/// A 16-bit EtherType.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EtherType(pub u16);

impl EtherType {
    /// Internet Protocol version 4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// Address Resolution Protocol.
    pub const ARP: EtherType = EtherType(0x0806);
    /// Internet Protocol version 6.
    pub const IPV6: EtherType = EtherType(0x86DD);
    /// IEEE 802.1Q VLAN tag.
    pub const VLAN: EtherType = EtherType(0x8100);
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x}", self.0)
    }
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const HEADER_LEN: usize = 14;
    // Present when ETHERTYPE is 0x8100.
    pub const VLAN_TCI: Range<usize> = 14..16;
    pub const VLAN_ETHERTYPE: Range<usize> = 16..18;
    pub const VLAN_HEADER_LEN: usize = 18;
}

/// Length of an untagged Ethernet header.
pub const HEADER_LEN: usize = field::HEADER_LEN;
/// Length of an Ethernet header with one 802.1Q tag.
pub const VLAN_HEADER_LEN: usize = field::VLAN_HEADER_LEN;

/// A view of an Ethernet II frame in a byte buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wrap a buffer without checks; accessors may panic on a short one.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wrap a buffer, checking it holds the header (and VLAN tag).
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if it does not.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Check that the buffer holds the header, tag included.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if it does not.
    #[inline]
    pub fn check_len(&self) -> Result<(), ParseError> {
        let b = self.buffer.as_ref();
        if b.len() < field::HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        if self.ethertype() == EtherType::VLAN && b.len() < field::VLAN_HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC address.
    #[inline]
    pub fn dst_addr(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buffer.as_ref()[field::DST])
    }

    /// Source MAC address.
    #[inline]
    pub fn src_addr(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buffer.as_ref()[field::SRC])
    }

    /// The outer EtherType ([`EtherType::VLAN`] for a tagged frame).
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(read_u16(self.buffer.as_ref(), field::ETHERTYPE))
    }

    /// Whether the frame carries an 802.1Q tag.
    #[inline]
    pub fn is_vlan_tagged(&self) -> bool {
        self.ethertype() == EtherType::VLAN
    }

    /// The whole tag control information (PCP, DEI, VLAN id), if tagged.
    #[inline]
    pub fn vlan_tci(&self) -> Option<u16> {
        self.is_vlan_tagged()
            .then(|| read_u16(self.buffer.as_ref(), field::VLAN_TCI))
    }

    /// The 12-bit VLAN id, if tagged.
    #[inline]
    pub fn vlan_id(&self) -> Option<u16> {
        self.vlan_tci().map(|t| t & 0x0fff)
    }

    /// The EtherType of the payload: after the tag if tagged, else the outer.
    #[inline]
    pub fn inner_ethertype(&self) -> EtherType {
        if self.is_vlan_tagged() {
            EtherType(read_u16(self.buffer.as_ref(), field::VLAN_ETHERTYPE))
        } else {
            self.ethertype()
        }
    }

    /// Header length: 14, or 18 with a tag.
    #[inline]
    pub fn header_len(&self) -> usize {
        if self.is_vlan_tagged() {
            field::VLAN_HEADER_LEN
        } else {
            field::HEADER_LEN
        }
    }

    /// The payload, after the tag if any (of type [`inner_ethertype`](Self::inner_ethertype)).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Set the destination MAC address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }

    /// Set the source MAC address.
    #[inline]
    pub fn set_src_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }

    /// Set the outer EtherType. Setting [`EtherType::VLAN`] on a buffer
    /// shorter than 18 bytes makes later accessors panic.
    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        write_u16(self.buffer.as_mut(), field::ETHERTYPE, t.0);
    }

    /// Set the tag control information.
    ///
    /// # Panics
    /// If the frame is not tagged ([`ethertype`](Self::ethertype) is not VLAN).
    #[inline]
    pub fn set_vlan_tci(&mut self, tci: u16) {
        assert!(self.is_vlan_tagged(), "set_vlan_tci on an untagged frame");
        write_u16(self.buffer.as_mut(), field::VLAN_TCI, tci);
    }

    /// Set the EtherType after the tag.
    ///
    /// # Panics
    /// If the frame is not tagged.
    #[inline]
    pub fn set_inner_ethertype(&mut self, t: EtherType) {
        assert!(
            self.is_vlan_tagged(),
            "set_inner_ethertype on an untagged frame"
        );
        write_u16(self.buffer.as_mut(), field::VLAN_ETHERTYPE, t.0);
    }

    /// The payload, mutable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// An Ethernet header as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination MAC address.
    pub dst: MacAddr,
    /// Source MAC address.
    pub src: MacAddr,
    /// The 802.1Q tag control information, if tagged.
    pub vlan_tci: Option<u16>,
    /// The payload's EtherType (after the tag).
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Read the header of a checked frame.
    pub fn parse<T: AsRef<[u8]>>(f: &EthernetFrame<T>) -> EthernetRepr {
        EthernetRepr {
            dst: f.dst_addr(),
            src: f.src_addr(),
            vlan_tci: f.vlan_tci(),
            ethertype: f.inner_ethertype(),
        }
    }

    /// The header length this repr emits.
    pub const fn buffer_len(&self) -> usize {
        if self.vlan_tci.is_some() {
            field::VLAN_HEADER_LEN
        } else {
            field::HEADER_LEN
        }
    }

    /// Write the header into the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, buf: &mut [u8]) {
        let mut f = EthernetFrame::new_unchecked(buf);
        f.set_dst_addr(self.dst);
        f.set_src_addr(self.src);
        match self.vlan_tci {
            Some(tci) => {
                f.set_ethertype(EtherType::VLAN);
                f.set_vlan_tci(tci);
                f.set_inner_ethertype(self.ethertype);
            }
            None => f.set_ethertype(self.ethertype),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::ARP_REQUEST_FRAME as ARP_FRAME;
    use proptest::prelude::*;

    #[test]
    fn untagged_arp() {
        let f = EthernetFrame::new_checked(&ARP_FRAME[..]).unwrap();
        assert!(f.dst_addr().is_broadcast());
        assert_eq!(f.src_addr().to_string(), "00:1b:21:3a:4f:5e");
        assert_eq!(f.ethertype(), EtherType::ARP);
        assert_eq!(f.inner_ethertype(), EtherType::ARP);
        assert_eq!(f.vlan_id(), None);
        assert_eq!(f.header_len(), 14);
        assert_eq!(f.payload().len(), 28);
    }

    #[test]
    fn tagged() {
        let mut b = [0u8; 60];
        b[..12].copy_from_slice(&ARP_FRAME[..12]);
        b[12..18].copy_from_slice(&[0x81, 0x00, 0xa0, 0x64, 0x08, 0x00]);
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!(f.ethertype(), EtherType::VLAN);
        assert_eq!(f.vlan_tci(), Some(0xa064));
        assert_eq!(f.vlan_id(), Some(100));
        assert_eq!(f.inner_ethertype(), EtherType::IPV4);
        assert_eq!(f.payload().len(), 42);
        assert_eq!(
            EthernetFrame::new_checked(&b[..17]),
            Err(ParseError::Truncated)
        );
        assert_eq!(
            EthernetFrame::new_checked(&b[..13]),
            Err(ParseError::Truncated)
        );
        assert!(EthernetFrame::new_checked(&b[..18]).is_ok());
    }

    #[test]
    fn setters() {
        let mut b = [0u8; 18];
        let mut f = EthernetFrame::new_unchecked(&mut b[..]);
        f.set_dst_addr(MacAddr([1, 2, 3, 4, 5, 6]));
        f.set_src_addr(MacAddr([7, 8, 9, 10, 11, 12]));
        f.set_ethertype(EtherType::IPV6);
        assert_eq!(f.payload_mut().len(), 4);
        assert_eq!(b[..14], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x86, 0xdd]);
    }

    fn repr() -> impl Strategy<Value = EthernetRepr> {
        (
            any::<[u8; 6]>(),
            any::<[u8; 6]>(),
            any::<Option<u16>>(),
            any::<u16>(),
        )
            .prop_map(|(d, s, v, t)| EthernetRepr {
                dst: MacAddr(d),
                src: MacAddr(s),
                vlan_tci: v,
                ethertype: EtherType(t),
            })
    }

    proptest! {
        #[test]
        fn parse_emit(r in repr(), extra in 0usize..8) {
            // An untagged frame whose type is 0x8100 is a tagged frame.
            prop_assume!(r.vlan_tci.is_some() || r.ethertype != EtherType::VLAN);
            let mut buf = vec![0u8; r.buffer_len() + extra];
            r.emit(&mut buf);
            let f = EthernetFrame::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(EthernetRepr::parse(&f), r);
            prop_assert_eq!(f.payload().len(), extra);
        }

        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(f) = EthernetFrame::new_checked(&b[..]) {
                let _ = EthernetRepr::parse(&f);
                let _ = (f.payload(), f.vlan_id(), f.header_len());
            }
        }
    }
}
