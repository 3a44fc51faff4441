//! A staging queue: the slots a round copied for one instance's vNIC and
//! has not published yet, with its length, and the room last seen in the
//! rx ring it is published to, on the line of its first entries.
//!
//! The queues were a `Vec` of `Vec`s, and admission read the ring's room
//! from the instance's producer: each frame read the inner vector's header
//! from the outer one's buffer, wrote its entry in another buffer, and read
//! the instance's and its producer's lines, four lines a frame that, with
//! 100 busy VRs, were rarely in the worker's L1 when its VR's next frame
//! came. A queue's length, room and first 14 entries are now one line.

use std::ops::Deref;

use super::STAGE_MAX;

/// One instance's vNIC's staged slots (at most [`STAGE_MAX`]).
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub(super) struct StageQ {
    len: u32,
    /// Free entries of the rx ring as last read ([`StageQ::set_room`]): a
    /// lower bound, since only the worker fills the ring (when it
    /// publishes, after which it reads the room again) and the VR only
    /// empties it; a ring reset for a new process only adds room.
    room: u32,
    slots: [u32; STAGE_MAX],
}

impl StageQ {
    /// An empty queue.
    pub(super) fn new() -> Self {
        Self {
            len: 0,
            room: 0,
            slots: [0; STAGE_MAX],
        }
    }

    /// Free entries of the rx ring, at least (0 until first read).
    #[inline]
    pub(super) fn room(&self) -> u32 {
        self.room
    }

    /// The rx ring had `room` free entries (the producer's count).
    #[inline]
    pub(super) fn set_room(&mut self, room: u32) {
        self.room = room;
    }

    /// Queue `slot`. Admission (`VrPath::admit`) refuses a frame whose
    /// queue holds [`STAGE_MAX`] already, so there is room; returns false,
    /// queueing nothing, if there is not.
    #[inline]
    pub(super) fn push(&mut self, slot: u32) -> bool {
        match self.slots.get_mut(self.len as usize) {
            Some(e) => {
                *e = slot;
                self.len += 1;
                true
            }
            None => false,
        }
    }

    /// Empty the queue.
    #[inline]
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }
}

impl Deref for StageQ {
    type Target = [u32];

    #[inline]
    fn deref(&self) -> &[u32] {
        &self.slots[..self.len as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_holds_its_slots_in_order_up_to_its_capacity() {
        let mut q = StageQ::new();
        assert!(q.is_empty());
        assert!(q.push(7) && q.push(3));
        assert_eq!(&q[..], &[7, 3]);
        q.clear();
        assert!(q.is_empty());
        for s in 0..STAGE_MAX as u32 {
            assert!(q.push(s));
        }
        assert!(!q.push(99), "full: nothing queued");
        assert_eq!(q.len(), STAGE_MAX);
        assert_eq!(q[STAGE_MAX - 1], STAGE_MAX as u32 - 1);
        assert_eq!(std::mem::offset_of!(StageQ, slots), 8, "beside the length");
        assert_eq!(q.room(), 0, "unknown: asked of the ring");
    }
}
