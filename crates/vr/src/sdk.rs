//! What a VR implements: [`Vr::process`], called for each packet in place.

use std::fmt;

/// A packet inside its slot, given to [`Vr::process`] to change in place.
///
/// The packet is `buf[off..off + len]`; the bytes before `off` are headroom
/// (for encapsulation), the bytes after are tailroom.
pub struct Packet<'a> {
    buf: &'a mut [u8],
    off: usize,
    len: usize,
    rx_vnic: u16,
}

impl<'a> Packet<'a> {
    /// A packet at `off..off + len` of `buf`. Returns `None` if that range
    /// is not inside `buf`.
    pub fn new(buf: &'a mut [u8], off: usize, len: usize, rx_vnic: u16) -> Option<Self> {
        (off.checked_add(len)? <= buf.len()).then_some(Self {
            buf,
            off,
            len,
            rx_vnic,
        })
    }

    /// The vNIC the packet arrived on.
    pub fn rx_vnic(&self) -> u16 {
        self.rx_vnic
    }

    /// The packet bytes.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.off..self.off + self.len]
    }

    /// The packet bytes, mutable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.off..self.off + self.len]
    }

    /// Packet length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the packet has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offset of the packet in its slot (the headroom left).
    pub fn offset(&self) -> usize {
        self.off
    }

    /// Grow the packet by `n` bytes at the front (for an encapsulation
    /// header) and return them; `None` if the headroom is too small.
    pub fn push_front(&mut self, n: usize) -> Option<&mut [u8]> {
        let off = self.off.checked_sub(n)?;
        self.off = off;
        self.len += n;
        Some(&mut self.buf[off..off + n])
    }

    /// Remove `n` bytes from the front (decapsulation); `false` if the packet
    /// is shorter.
    pub fn pull_front(&mut self, n: usize) -> bool {
        if n > self.len {
            return false;
        }
        self.off += n;
        self.len -= n;
        true
    }

    /// Set the length, within the slot; `false` if it does not fit.
    pub fn set_len(&mut self, len: usize) -> bool {
        if self.off + len > self.buf.len() {
            return false;
        }
        self.len = len;
        true
    }
}

impl fmt::Debug for Packet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("rx_vnic", &self.rx_vnic)
            .field("off", &self.off)
            .field("len", &self.len)
            .finish()
    }
}

/// Why a VR dropped a packet. Each reason has its own counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// Ethernet or IP header invalid (truncated, bad IHL, bad length).
    BadHeader = 0,
    /// IPv4 header checksum wrong.
    BadChecksum = 1,
    /// Not a protocol this VR handles.
    Unsupported = 2,
    /// TTL expired.
    TtlExpired = 3,
    /// No route to the destination.
    NoRoute = 4,
    /// Refused by the VR's policy (a filter).
    Filtered = 5,
    /// Anything else.
    Other = 6,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 7] = [
        Self::BadHeader,
        Self::BadChecksum,
        Self::Unsupported,
        Self::TtlExpired,
        Self::NoRoute,
        Self::Filtered,
        Self::Other,
    ];

    /// Name used in stats and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::BadHeader => "bad_header",
            Self::BadChecksum => "bad_checksum",
            Self::Unsupported => "unsupported",
            Self::TtlExpired => "ttl_expired",
            Self::NoRoute => "no_route",
            Self::Filtered => "filtered",
            Self::Other => "other",
        }
    }
}

/// What to do with a processed packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send it out of this vNIC.
    Forward(u16),
    /// Drop it, counting the reason.
    Drop(DropReason),
}

/// A virtual router's data plane: implement [`Vr::process`] and hand the
/// value to [`crate::runtime::run`] (or, in the host, to the in-process path).
pub trait Vr {
    /// Process one packet in place and say where it goes.
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict;
}

impl<V: Vr + ?Sized> Vr for Box<V> {
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        (**self).process(pkt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_and_bounds() {
        let mut buf = [0u8; 64];
        assert!(Packet::new(&mut buf, 60, 5, 0).is_none());
        let mut p = Packet::new(&mut buf, 16, 20, 1).unwrap();
        p.push_front(8).unwrap().copy_from_slice(&[1; 8]);
        assert_eq!((p.offset(), p.len()), (8, 28));
        assert!(p.push_front(9).is_none());
        assert!(p.pull_front(8));
        assert!(!p.pull_front(21));
        assert!(p.set_len(48));
        assert!(!p.set_len(49));
    }
}
