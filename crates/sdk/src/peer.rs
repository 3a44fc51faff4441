//! An instance's side of peer messages: [`Peers`], the view of its two
//! control rings that [`Vr::peers`](crate::Vr::peers) sends and receives
//! through, and the [`PeerCounters`] the runtime keeps. The wire format
//! (what the host's relay checks and rewrites) is `vrhost_proto::peer`'s,
//! re-exported here.

use vrhost_shm::{Consumer, Producer, RingError};

pub use vrhost_proto::peer::*;

/// Messages an instance exchanged with its peers (kept by the runtime,
/// [`crate::runtime::Instance::peer_counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerCounters {
    /// Messages received.
    pub received: u64,
    /// Messages sent (pushed to `CtrlOut`; the host may still drop one
    /// whose destination is full or not running).
    pub sent: u64,
    /// Sends refused because `CtrlOut` was full.
    pub full: u64,
    /// Messages from the host that did not decode (never expected); each
    /// made the instance discard what was ready in `CtrlIn`.
    pub bad: u64,
}

impl PeerCounters {
    /// Add `other`'s counts to ours.
    pub fn add(&mut self, other: &PeerCounters) {
        self.received += other.received;
        self.sent += other.sent;
        self.full += other.full;
        self.bad += other.bad;
    }
}

/// An instance's view of its peers for one round: what
/// [`Vr::peers`](crate::Vr::peers) sends and receives through.
///
/// It borrows the instance's two control rings; the runtime builds one per
/// round. A test (or a VR's own unit test) can build one over rings of its
/// own with [`Peers::new`].
#[derive(Debug)]
pub struct Peers<'a> {
    instance: u16,
    instances: u16,
    ctrl_in: &'a mut Consumer,
    ctrl_out: &'a mut Producer,
    counts: PeerCounters,
    error: Option<RingError>,
}

impl<'a> Peers<'a> {
    /// Instance `instance` of a VR of `instances`, receiving from
    /// `ctrl_in` and sending to `ctrl_out`.
    pub fn new(
        instance: u16,
        instances: u16,
        ctrl_in: &'a mut Consumer,
        ctrl_out: &'a mut Producer,
    ) -> Self {
        Self {
            instance,
            instances,
            ctrl_in,
            ctrl_out,
            counts: PeerCounters::default(),
            error: None,
        }
    }

    /// This instance's number.
    pub fn instance(&self) -> u16 {
        self.instance
    }

    /// How many instances the VR has (some may not be running).
    pub fn instances(&self) -> u16 {
        self.instances
    }

    /// Send `msg` (at most [`MAX_PAYLOAD`] bytes) to one instance, or to
    /// every other running instance. The message is published at once, in
    /// one ring push; the host relays it on its next round. A message to an
    /// instance that is not running when the host relays it is dropped.
    ///
    /// # Errors
    /// [`PeerError::TooLong`], [`PeerError::NoSuchPeer`] (not an instance
    /// of this VR), or [`PeerError::Full`] if the outgoing ring has no room
    /// (also after the host wrote an impossible ring index, which the
    /// runtime then reports).
    pub fn send(&mut self, to: PeerDest, msg: &[u8]) -> Result<(), PeerError> {
        if let PeerDest::Instance(peer) = to
            && peer >= self.instances
        {
            return Err(PeerError::NoSuchPeer {
                peer,
                instances: self.instances,
            });
        }
        let words = encode_to(to, msg)?;
        if self.error.is_some() {
            return Err(PeerError::Full);
        }
        let need = MSG_WORDS as u32;
        if self.ctrl_out.free_cached() < need {
            match self.ctrl_out.free() {
                Ok(free) if free >= need => {}
                Ok(_) => {
                    self.counts.full += 1;
                    return Err(PeerError::Full);
                }
                Err(e) => {
                    self.error = Some(e);
                    return Err(PeerError::Full);
                }
            }
        }
        // Room for the whole message was checked above (and only grows
        // while we hold the producer), so this pushes all 16 words at once.
        match self.ctrl_out.push(&words) {
            Ok(MSG_WORDS) => {
                self.counts.sent += 1;
                Ok(())
            }
            Ok(_) => Err(PeerError::Full),
            Err(e) => {
                self.error = Some(e);
                Err(PeerError::Full)
            }
        }
    }

    /// The next message from a peer, copied into `buf`: its sender and its
    /// length (`buf[..len]`); `None` when no message is waiting. Messages
    /// from one sender arrive in the order it sent them.
    pub fn recv(&mut self, buf: &mut [u8; MAX_PAYLOAD]) -> Option<(u16, usize)> {
        if self.error.is_some() {
            return None;
        }
        let need = MSG_WORDS as u32;
        if self.ctrl_in.ready_cached() < need {
            match self.ctrl_in.ready() {
                Ok(ready) if ready >= need => {}
                Ok(_) => return None,
                Err(e) => {
                    self.error = Some(e);
                    return None;
                }
            }
        }
        let mut words = [0u32; MSG_WORDS];
        match self.ctrl_in.pop(&mut words) {
            Ok(MSG_WORDS) => {}
            Ok(_) => return None,
            Err(e) => {
                self.error = Some(e);
                return None;
            }
        }
        match decode_from(&words, self.instances, buf) {
            Ok(got) => {
                self.counts.received += 1;
                Some(got)
            }
            Err(_) => {
                self.counts.bad += 1;
                if let Err(e) = discard_ready(self.ctrl_in) {
                    self.error = Some(e);
                }
                None
            }
        }
    }

    /// What was sent and received through this view so far.
    pub fn counts(&self) -> PeerCounters {
        self.counts
    }

    /// The error of a control ring whose index (written by the host) is
    /// impossible; once set, nothing more is sent or received.
    pub fn ring_error(&self) -> Option<RingError> {
        self.error
    }
}

#[cfg(test)]
mod tests {
    use vrhost_shm::heap_ring;

    use super::*;

    /// Two instances wired back to back over heap rings (no host): what 0
    /// sends to 1 comes out of 0's `CtrlOut`, which the test feeds to 1's
    /// `CtrlIn` re-addressed as the host would.
    #[test]
    fn send_and_recv_over_rings() {
        let out_mem = heap_ring(32); // two messages
        let in_mem = heap_ring(32);
        let mut out_p = out_mem.clone().producer();
        let mut out_c = out_mem.consumer();
        let mut in_p = in_mem.clone().producer();
        let mut in_c = in_mem.consumer();
        let mut spare_c = heap_ring(16).consumer();
        let mut spare_p = heap_ring(16).producer();

        let mut a = Peers::new(0, 2, &mut spare_c, &mut out_p);
        assert_eq!(a.instance(), 0);
        a.send(PeerDest::Instance(1), b"one").unwrap();
        a.send(PeerDest::All, b"two").unwrap();
        assert_eq!(a.send(PeerDest::All, b"three"), Err(PeerError::Full));
        assert_eq!(
            a.send(PeerDest::Instance(2), b"x"),
            Err(PeerError::NoSuchPeer {
                peer: 2,
                instances: 2
            })
        );
        assert_eq!(
            a.send(PeerDest::All, &[0; 61]),
            Err(PeerError::TooLong { len: 61 })
        );
        let c = a.counts();
        assert_eq!((c.sent, c.full), (2, 1));

        // The host's part, by hand.
        let mut words = [0u32; 32];
        assert_eq!(out_c.pop(&mut words).unwrap(), 32);
        let mut buf = [0u8; MAX_PAYLOAD];
        for m in words.chunks_exact(MSG_WORDS) {
            let m: &[u32; MSG_WORDS] = m.try_into().unwrap();
            let (_, len) = decode_to(m, 2, &mut buf).unwrap();
            in_p.push(&encode_from(0, &buf[..len]).unwrap()).unwrap();
        }

        let mut b = Peers::new(1, 2, &mut in_c, &mut spare_p);
        assert_eq!(b.recv(&mut buf), Some((0, 3)));
        assert_eq!(&buf[..3], b"one");
        assert_eq!(b.recv(&mut buf), Some((0, 3)));
        assert_eq!(&buf[..3], b"two");
        assert_eq!(b.recv(&mut buf), None);
        assert_eq!(b.counts().received, 2);
    }

    /// A bad message in `CtrlIn` is counted and everything ready with it
    /// discarded; the next message published after it is read.
    #[test]
    fn recv_resyncs_after_garbage() {
        let mem = heap_ring(64);
        let mut p = mem.clone().producer();
        let mut c = mem.consumer();
        let mut out = heap_ring(16).producer();
        // Half a message, then a whole one: out of step.
        p.push(&[0xDEAD_BEEF; 8]).unwrap();
        p.push(&encode_from(1, b"lost").unwrap()).unwrap();
        let mut buf = [0u8; MAX_PAYLOAD];
        let mut peers = Peers::new(0, 2, &mut c, &mut out);
        assert_eq!(peers.recv(&mut buf), None);
        assert_eq!(peers.counts().bad, 1);
        p.push(&encode_from(1, b"kept").unwrap()).unwrap();
        assert_eq!(peers.recv(&mut buf), Some((1, 4)));
        assert_eq!(&buf[..4], b"kept");
        assert_eq!(peers.recv(&mut buf), None);
        assert_eq!((peers.counts().bad, peers.counts().received), (1, 1));
        assert!(peers.ring_error().is_none());
    }

    #[test]
    fn impossible_index_stops_the_view() {
        let mem = heap_ring(32);
        let mut c = mem.clone().consumer();
        let mut out = heap_ring(32).producer();
        // A producer index more than a ring ahead: the host is corrupt.
        let mut p = mem.clone().producer_at(100, 100);
        p.push(&[1]).unwrap();
        let mut buf = [0u8; MAX_PAYLOAD];
        let mut peers = Peers::new(0, 2, &mut c, &mut out);
        assert_eq!(peers.recv(&mut buf), None);
        assert!(peers.ring_error().is_some());
        assert_eq!(peers.send(PeerDest::All, b"x"), Err(PeerError::Full));
    }
}
