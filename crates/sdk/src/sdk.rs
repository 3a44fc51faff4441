//! What a VR implements: [`Vr::process`], called for each packet in place,
//! or [`Vr::process_burst`] for a whole burst (to batch lookups).

use std::fmt;

use vrhost_proto::DropReason;

use crate::peer::Peers;

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
    #[inline]
    pub fn new(buf: &'a mut [u8], off: usize, len: usize, rx_vnic: u16) -> Option<Self> {
        (off.checked_add(len)? <= buf.len()).then_some(Self {
            buf,
            off,
            len,
            rx_vnic,
        })
    }

    /// A packet of no bytes in an empty buffer, to fill arrays of packets.
    pub(crate) fn placeholder() -> Packet<'static> {
        Packet {
            buf: &mut [],
            off: 0,
            len: 0,
            rx_vnic: 0,
        }
    }

    /// The vNIC the packet arrived on.
    #[inline]
    pub fn rx_vnic(&self) -> u16 {
        self.rx_vnic
    }

    /// The packet bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf[self.off..self.off + self.len]
    }

    /// The packet bytes, mutable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.off..self.off + self.len]
    }

    /// Packet length.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the packet has no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offset of the packet in its slot (the headroom left).
    #[inline]
    pub fn offset(&self) -> usize {
        self.off
    }

    /// Grow the packet by `n` bytes at the front (for an encapsulation
    /// header) and return them; `None` if the headroom is too small.
    #[inline]
    pub fn push_front(&mut self, n: usize) -> Option<&mut [u8]> {
        let off = self.off.checked_sub(n)?;
        self.off = off;
        self.len += n;
        Some(&mut self.buf[off..off + n])
    }

    /// Remove `n` bytes from the front (decapsulation); `false` if the packet
    /// is shorter.
    #[inline]
    pub fn pull_front(&mut self, n: usize) -> bool {
        if n > self.len {
            return false;
        }
        self.off += n;
        self.len -= n;
        true
    }

    /// Set the length, within the slot; `false` if it does not fit.
    #[inline]
    pub fn set_len(&mut self, len: usize) -> bool {
        if self.off + len > self.buf.len() {
            return false;
        }
        self.len = len;
        true
    }

    /// Bytes in the slot: headroom, packet and tailroom.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Place the packet at `off..off + len` of its slot (a VR that rewrites
    /// a slot into another packet); `false`, changing nothing, if that is
    /// not inside the slot.
    #[inline]
    pub fn set_extent(&mut self, off: usize, len: usize) -> bool {
        match off.checked_add(len) {
            Some(end) if end <= self.buf.len() => {
                self.off = off;
                self.len = len;
                true
            }
            _ => false,
        }
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
///
/// The runtime calls [`Vr::process`] for each packet, or, for a VR that
/// [prefers bursts](Vr::prefers_burst), hands packets over in bursts of up
/// to [`runtime::BATCH`](crate::runtime::BATCH) through
/// [`Vr::process_burst`]: a VR that gains from seeing a burst at once
/// (batched table lookups whose cache misses overlap) overrides both.
pub trait Vr {
    /// Process one packet in place and say where it goes.
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict;

    /// Process a burst in place: `verdicts[i]` says where `pkts[i]` goes,
    /// as if the packets were processed one by one in order. The runtime
    /// passes slices of equal length; an implementation must set every
    /// verdict (the runtime's initial values are not meaningful).
    #[inline]
    fn process_burst(&mut self, pkts: &mut [Packet<'_>], verdicts: &mut [Verdict]) {
        for (p, v) in pkts.iter_mut().zip(verdicts.iter_mut()) {
            *v = self.process(p);
        }
    }

    /// Whether the runtime should use [`Vr::process_burst`] rather than
    /// [`Vr::process`] per packet; asked once per batch. Default false:
    /// gathering a burst costs a few nanoseconds per packet, which only a
    /// VR that does something with the burst earns back.
    #[inline]
    fn prefers_burst(&self) -> bool {
        false
    }

    /// The VR's own counters (the built-in router's ARP and ICMP counts),
    /// published after the SDK's at [`crate::proto::counter::VR_BASE`]; at
    /// most [`crate::proto::counter::VR_SLOTS`] of them are published.
    fn counters(&self) -> &[u64] {
        &[]
    }

    /// Apply a control message from the host to the running VR (a
    /// [`HostMsg::Control`](crate::proto::HostMsg::Control)) and say what
    /// came of it; the host receives the result as it is.
    ///
    /// The runtime calls it between two batches, never in the middle of
    /// one, on the instance's own thread: the VR changes its state with
    /// `&mut self`, no locks, and the next batch sees the change whole.
    /// Packets wait meanwhile, so one call should take about a millisecond
    /// at most; the host splits bulk changes into several messages
    /// ([`crate::proto::CONTROL_CHUNK`]). Each instance of a VR gets every
    /// message sent to it and answers it alone.
    ///
    /// The body's form is the VR's to define; deserialize it into a typed
    /// message (`T::deserialize(body)` borrows, without copying the value).
    /// An error should name the part of the body at fault and leave the VR
    /// as it was, so that the host can resend a corrected message.
    ///
    /// ```
    /// # use vrhost_sdk::{Packet, Verdict, Vr};
    /// struct Bridge { blocked: Vec<u16> }
    /// impl Vr for Bridge {
    ///     fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
    ///         Verdict::Forward(pkt.rx_vnic() ^ 1)
    ///     }
    ///     fn control(&mut self, body: &serde_json::Value) -> Result<serde_json::Value, String> {
    ///         let ports: Vec<u16> = serde::Deserialize::deserialize(&body["block"])
    ///             .map_err(|e| format!("block: {e}"))?;
    ///         self.blocked = ports;
    ///         Ok(serde_json::json!({"blocked": self.blocked.len()}))
    ///     }
    /// }
    /// ```
    ///
    /// # Errors
    /// By default every message is refused ("this VR takes no control
    /// messages").
    fn control(&mut self, body: &serde_json::Value) -> Result<serde_json::Value, String> {
        let _ = body;
        Err("this VR takes no control messages".into())
    }

    /// Whether the VR exchanges messages with its other instances through
    /// [`Vr::peers`]. Asked once when the instance starts polling (and by
    /// each [`Instance::poll_once`](crate::runtime::Instance::poll_once)),
    /// and again after each call of [`Vr::peers`], where a VR learns how
    /// many instances it has ([`Peers::instances`]): one that finds it has
    /// none to talk to may say false then, and is not asked again. The
    /// runtime calls [`Vr::peers`] and looks at the incoming control ring
    /// only while it is true, so a VR that does not use peers pays nothing
    /// for them. Default false.
    #[inline]
    fn uses_peers(&self) -> bool {
        false
    }

    /// Exchange small messages with the VR's other instances (see
    /// [`crate::peer`]): receive with [`Peers::recv`], send with
    /// [`Peers::send`] to one instance or to all the others.
    ///
    /// Called only if [`Vr::uses_peers`] says so, once per poll round
    /// *before* the round's packets, on the instance's own thread: a route
    /// update from a peer is applied before the next batch is looked up.
    /// An idle instance sleeping on its doorbell is woken by a message for
    /// it. A message is at most [`MAX_PAYLOAD`](crate::peer::MAX_PAYLOAD)
    /// (60) bytes; one that does not fit now ([`PeerError::Full`](crate::peer::PeerError::Full)) may be
    /// sent again on a later round. The host relays messages in the order
    /// each instance sent them, and drops (and counts) those for an
    /// instance whose incoming ring is full or that is not running.
    ///
    /// ```
    /// # use vrhost_sdk::{Packet, Verdict, Vr};
    /// use vrhost_sdk::peer::{MAX_PAYLOAD, PeerDest, PeerError, Peers};
    ///
    /// /// Ports blocked by any instance are blocked by all.
    /// struct Filter { blocked: Vec<u16>, to_tell: Vec<u16> }
    /// impl Vr for Filter {
    ///     fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
    ///         Verdict::Forward(pkt.rx_vnic() ^ 1)
    ///     }
    ///     fn uses_peers(&self) -> bool {
    ///         true
    ///     }
    ///     fn peers(&mut self, peers: &mut Peers<'_>) {
    ///         let mut buf = [0u8; MAX_PAYLOAD];
    ///         while let Some((_from, len)) = peers.recv(&mut buf) {
    ///             if let Ok(port) = <[u8; 2]>::try_from(&buf[..len]) {
    ///                 self.blocked.push(u16::from_le_bytes(port));
    ///             }
    ///         }
    ///         while let Some(&port) = self.to_tell.last() {
    ///             match peers.send(PeerDest::All, &port.to_le_bytes()) {
    ///                 Err(PeerError::Full) => break, // again next round
    ///                 _ => { self.to_tell.pop(); }
    ///             }
    ///         }
    ///     }
    /// }
    ///
    /// // Two instances' rings wired by hand, as a unit test of the hook.
    /// let (out, inp) = (vrhost_shm::heap_ring(64), vrhost_shm::heap_ring(64));
    /// let (mut out_p, mut out_c) = (out.clone().producer(), out.consumer());
    /// let (mut in_c, mut in_p) = (inp.clone().consumer(), inp.producer());
    /// let mut f = Filter { blocked: vec![], to_tell: vec![22] };
    /// f.peers(&mut Peers::new(0, 2, &mut in_c, &mut out_p));
    /// assert_eq!(out_c.ready().unwrap(), 16, "one message of 16 words");
    /// in_p.push(&vrhost_sdk::peer::encode_from(1, &23u16.to_le_bytes()).unwrap()).unwrap();
    /// f.peers(&mut Peers::new(0, 2, &mut in_c, &mut out_p));
    /// assert_eq!(f.blocked, [23]);
    /// ```
    #[inline]
    fn peers(&mut self, peers: &mut Peers<'_>) {
        let _ = peers;
    }
}

impl<V: Vr + ?Sized> Vr for Box<V> {
    #[inline]
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        (**self).process(pkt)
    }

    #[inline]
    fn process_burst(&mut self, pkts: &mut [Packet<'_>], verdicts: &mut [Verdict]) {
        (**self).process_burst(pkts, verdicts)
    }

    #[inline]
    fn prefers_burst(&self) -> bool {
        (**self).prefers_burst()
    }

    fn counters(&self) -> &[u64] {
        (**self).counters()
    }

    fn control(&mut self, body: &serde_json::Value) -> Result<serde_json::Value, String> {
        (**self).control(body)
    }

    #[inline]
    fn uses_peers(&self) -> bool {
        (**self).uses_peers()
    }

    #[inline]
    fn peers(&mut self, peers: &mut Peers<'_>) {
        (**self).peers(peers)
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
        assert_eq!(p.capacity(), 64);
        assert!(p.set_extent(0, 64));
        assert_eq!((p.offset(), p.len()), (0, 64));
        assert!(!p.set_extent(1, 64));
        assert!(!p.set_extent(usize::MAX, 2));
        assert_eq!((p.offset(), p.len()), (0, 64));
    }

    #[test]
    fn reasons_are_in_counter_order() {
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "{}", r.name());
        }
    }
}
