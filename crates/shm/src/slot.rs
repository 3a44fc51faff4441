//! Slot states and per-slot metadata (Europa's state flag, section 3.2).
//!
//! Each slot of the pool has a [`SlotMeta`]: its state and where the packet
//! sits in the slot. The state is the handshake between host and VR:
//!
//! ```text
//!   host: EMPTY -> FILLED      (copied a frame in; index goes to an rx ring)
//!   VR:   FILLED -> PROCESSED  (send it; index goes to a tx ring)
//!   VR:   FILLED -> DROPPED    (free it; index goes to a tx ring)
//!   host: PROCESSED | DROPPED -> EMPTY (after popping the index from a tx ring)
//! ```
//!
//! Every transition is a compare-and-swap from the expected state ([`SlotMeta::transition`]),
//! so a state flipped by a hostile VR shows up as a failed transition that the
//! host counts. The host does not rely on the shared state for ownership: it
//! keeps its own private record of who holds each slot.

use crate::sync::{AtomicU32, Ordering};

/// The state of one slot, as stored in shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum SlotState {
    /// Free: owned by the host.
    Empty = 0,
    /// Holds a received frame; given to the VR.
    Filled = 1,
    /// Processed by the VR; to be sent on the tx ring's vNIC.
    Processed = 2,
    /// Released by the VR without sending.
    Dropped = 3,
}

impl SlotState {
    /// Decode a raw value read from shared memory.
    pub fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            0 => Self::Empty,
            1 => Self::Filled,
            2 => Self::Processed,
            3 => Self::Dropped,
            _ => return None,
        })
    }

    /// The transitions the protocol allows (see the module docs).
    pub fn may_become(self, next: SlotState) -> bool {
        use SlotState::*;
        matches!(
            (self, next),
            (Empty, Filled)
                | (Filled, Processed)
                | (Filled, Dropped)
                | (Processed, Empty)
                | (Dropped, Empty)
        )
    }
}

/// Per-slot metadata in shared memory: state, and packet offset and length.
#[repr(C)]
#[derive(Debug)]
pub struct SlotMeta {
    state: AtomicU32,
    /// Offset of the first packet byte in the slot (high 16 bits) and packet
    /// length (low 16 bits), in one word so a reader sees a consistent pair.
    extent: AtomicU32,
}

/// Why a slot transition failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The protocol has no such transition.
    #[error("transition {from:?} -> {to:?} is not allowed")]
    NotAllowed {
        /// Expected state.
        from: SlotState,
        /// Requested state.
        to: SlotState,
    },
    /// The slot was not in the expected state; `found` is the raw value.
    #[error("slot in state {found}, expected {expected:?}")]
    WrongState {
        /// Raw state found in memory.
        found: u32,
        /// State the caller expected.
        expected: SlotState,
    },
}

impl SlotMeta {
    /// A fresh, empty slot.
    pub fn new() -> Self {
        Self {
            state: AtomicU32::new(SlotState::Empty as u32),
            extent: AtomicU32::new(0),
        }
    }

    /// Raw state as in memory (may be any value if the peer is hostile).
    pub fn state_raw(&self) -> u32 {
        // Acquire: pairs with the Release of the transition that set it, so
        // the extent and packet bytes written before are visible.
        self.state.load(Ordering::Acquire)
    }

    /// Move from `from` to `to` by compare-and-swap.
    ///
    /// # Errors
    /// [`TransitionError`] if the protocol forbids it or the slot was not in
    /// state `from`.
    pub fn transition(&self, from: SlotState, to: SlotState) -> Result<(), TransitionError> {
        if !from.may_become(to) {
            return Err(TransitionError::NotAllowed { from, to });
        }
        // AcqRel: Release publishes the extent/packet writes made before the
        // transition to whoever Acquires the state next; Acquire orders our
        // later reads after the peer's writes that preceded its transition.
        // Failure ordering Acquire: we report what we saw.
        self.state
            .compare_exchange(from as u32, to as u32, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|found| TransitionError::WrongState {
                found,
                expected: from,
            })
    }

    /// Set the state of a slot the caller owns, whatever it was: the owner's
    /// hand-over on the data path (host: FILLED and EMPTY; VR: PROCESSED and
    /// DROPPED). A plain Release store: the receiving side validates what it
    /// reads, and the host tracks ownership privately, so a CAS buys nothing
    /// there. [`SlotMeta::transition`] is for control paths.
    #[inline]
    pub fn set(&self, state: SlotState) {
        // Release: the next owner, after its Acquire (ring pop or state load),
        // sees our writes to the extent and the packet.
        self.state.store(state as u32, Ordering::Release);
    }

    /// Set offset and length of the packet.
    pub fn set_extent(&self, offset: u16, len: u16) {
        // Relaxed: published by the following state transition (Release) or
        // ring push (Release).
        self.extent
            .store(u32::from(offset) << 16 | u32::from(len), Ordering::Relaxed);
    }

    /// Offset and length as in memory; the host validates them against the
    /// slot size before use.
    pub fn extent(&self) -> (u16, u16) {
        // Relaxed: ordered by the Acquire of the ring pop or state load before.
        let v = self.extent.load(Ordering::Relaxed);
        ((v >> 16) as u16, v as u16)
    }
}

impl Default for SlotMeta {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn protocol_round_trip() {
        let m = SlotMeta::new();
        m.transition(SlotState::Empty, SlotState::Filled).unwrap();
        m.set_extent(128, 60);
        m.transition(SlotState::Filled, SlotState::Processed)
            .unwrap();
        assert_eq!(m.extent(), (128, 60));
        m.transition(SlotState::Processed, SlotState::Empty)
            .unwrap();
    }

    #[test]
    fn forbidden_and_wrong_state() {
        let m = SlotMeta::new();
        assert!(matches!(
            m.transition(SlotState::Empty, SlotState::Processed),
            Err(TransitionError::NotAllowed { .. })
        ));
        assert!(matches!(
            m.transition(SlotState::Filled, SlotState::Processed),
            Err(TransitionError::WrongState { found: 0, .. })
        ));
        assert_eq!(SlotState::from_raw(7), None);
    }
}
