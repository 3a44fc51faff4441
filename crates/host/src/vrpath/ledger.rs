//! The host's own record of a VR's slots: which are on the free list and
//! which instance holds each of the others.
//!
//! The record, not the slot state in shared memory, decides what the host
//! does with an index a VR hands back, so a VR cannot free a slot twice,
//! hand back one it does not hold, or take one from a sibling instance.
//! A slot moves only along these transitions:
//!
//! | from                  | to                    | by                                   |
//! |-----------------------|-----------------------|--------------------------------------|
//! | free                  | held by `i`           | [`SlotLedger::give`] (ingress)       |
//! | held by `i`           | returning from `i`    | [`SlotLedger::claim`] (tx validation)|
//! | held by or returning from `i` | free          | [`SlotLedger::release`]              |
//! | held by `i`           | free                  | [`SlotLedger::reclaim`] (`i` is gone)|
//!
//! "Returning" marks a slot taken back in the current batch until it is
//! released, so a second copy of its index in the same batch is refused.
//! Nothing here touches the region: the caller sets the shared slot state.
//!
//! A VR on a dedicated port ([`SlotLedger::with_port`]) shares its pool
//! with that port: slots `0..port_slots` are the port's frames (its
//! UMEM) and never on the free list. They are the port's (`PORT`) until it
//! lends one with a received frame ([`SlotLedger::adopt`]: port -> held by
//! `i`); released, they go back to the port instead of the free list
//! ([`SlotLedger::release`] says so), as do those reclaimed from an
//! instance that is gone.
//!
//! A pool that grows with its load ([`SlotLedger::limit`]) keeps its slots
//! from `usable` up out of use (`RESERVED`: never given, and a VR that
//! hands one back holds no such slot) until [`SlotLedger::grow`] frees
//! them, once their memory is there (see `crate::pool`).

use crate::stats::Violation;

/// `owner` of a slot on the free list.
const FREE: u8 = 0;
/// `owner` of a slot claimed back in the current batch, until released.
const RETURNING: u8 = u8::MAX;
/// `owner` of a slot that is a dedicated port's frame, at the port.
const PORT: u8 = u8::MAX - 1;

/// `owner` of a slot past the usable part of a pool that grows.
const RESERVED: u8 = PORT - 1;

/// Most instances a ledger tells apart (`owner` is instance + 1 in a byte,
/// below [`RESERVED`]).
pub(crate) const MAX_INSTANCES: usize = RESERVED as usize - 1;

/// Who has each slot of a VR's pool (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct SlotLedger {
    /// Free slots; the last one is given next.
    free: Vec<u32>,
    /// Per slot: [`FREE`], instance + 1, or [`RETURNING`].
    owner: Box<[u8]>,
    /// Slots each instance holds (given and not released): its backlog.
    held: Box<[u32]>,
    /// Slots `0..port_slots` are a dedicated port's frames (0: none).
    port_slots: u32,
    /// Of those, the ones at the port (`PORT`).
    at_port: u32,
    /// Slots `usable..` are not in use yet (`RESERVED`).
    usable: u32,
}

impl SlotLedger {
    /// A pool of `slots` slots, all free, for `instances` instances.
    ///
    /// # Panics
    /// If `instances` is over [`MAX_INSTANCES`] (the region allows 64).
    pub(crate) fn new(slots: u32, instances: usize) -> Self {
        assert!(instances <= MAX_INSTANCES, "{instances} instances");
        Self {
            // Reversed: slot 0 is given first.
            free: (0..slots).rev().collect(),
            owner: vec![FREE; slots as usize].into_boxed_slice(),
            held: vec![0; instances].into_boxed_slice(),
            port_slots: 0,
            at_port: 0,
            usable: slots,
        }
    }

    /// A pool of `slots` slots whose first `port_slots` are a dedicated
    /// port's frames, at the port; the others free.
    ///
    /// # Panics
    /// As [`SlotLedger::new`]; if `port_slots > slots`.
    pub(crate) fn with_port(slots: u32, instances: usize, port_slots: u32) -> Self {
        assert!(port_slots <= slots, "{port_slots} port slots of {slots}");
        let mut l = Self::new(slots, instances);
        l.free.retain(|&s| s >= port_slots);
        l.owner[..port_slots as usize].fill(PORT);
        l.port_slots = port_slots;
        l.at_port = port_slots;
        l
    }

    /// Slots `0..n` are the dedicated port's frames (`n` = 0: no port).
    #[inline]
    pub(crate) fn port_slots(&self) -> u32 {
        self.port_slots
    }

    /// True when every slot is free, at the port or not in use yet: no
    /// instance holds one.
    #[inline]
    pub(crate) fn drained(&self) -> bool {
        self.free.len() + self.at_port as usize + self.reserved() == self.owner.len()
    }

    /// Slots not in use yet.
    #[inline]
    fn reserved(&self) -> usize {
        self.owner.len() - self.usable as usize
    }

    /// Slots `0..usable` are in use; the rest wait for [`SlotLedger::grow`].
    #[inline]
    pub(crate) fn usable(&self) -> u32 {
        self.usable
    }

    /// Keep slots `usable..` out of use. Only for a pool whose slots from
    /// `usable` up are all free (a new one), without a port's frames;
    /// returns false and changes nothing otherwise.
    pub(crate) fn limit(&mut self, usable: u32) -> bool {
        let usable = usable.min(self.owner.len() as u32);
        let from = usable as usize;
        if self.port_slots > 0 || self.owner[from..].iter().any(|&o| o != FREE) {
            return false;
        }
        self.free.retain(|&s| s < usable);
        self.owner[from..].fill(RESERVED);
        self.usable = usable;
        true
    }

    /// Put slots `usable..to` in use (free, given after the lower ones);
    /// returns the new usable count.
    pub(crate) fn grow(&mut self, to: u32) -> u32 {
        let to = to.min(self.owner.len() as u32);
        if to > self.usable {
            self.owner[self.usable as usize..to as usize].fill(FREE);
            // The last is given first: the new slots go at the front.
            self.free.splice(0..0, (self.usable..to).rev());
            self.usable = to;
        }
        self.usable
    }

    /// Take `slot`, a frame the port lent (it is at the port), for instance
    /// `i`.
    ///
    /// # Errors
    /// [`Violation::SlotIndex`] for a slot that is not the port's to lend
    /// (past its frames, or not at the port).
    #[inline]
    pub(crate) fn adopt(&mut self, slot: u32, i: usize) -> Result<(), Violation> {
        match self.owner.get_mut(slot as usize) {
            Some(o) if *o == PORT && slot < self.port_slots => {
                *o = i as u8 + 1;
                self.held[i] += 1;
                self.at_port -= 1;
                Ok(())
            }
            _ => Err(Violation::SlotIndex),
        }
    }

    /// Slots in the pool.
    #[inline]
    pub(crate) fn pool(&self) -> usize {
        self.owner.len()
    }

    /// Slots on the free list.
    #[inline]
    pub(crate) fn free(&self) -> usize {
        self.free.len()
    }

    /// The slot [`SlotLedger::give`] hands out next.
    #[inline]
    pub(crate) fn next_free(&self) -> Option<u32> {
        self.free.last().copied()
    }

    /// Slots each instance holds.
    #[inline]
    pub(crate) fn held(&self) -> &[u32] {
        &self.held
    }

    /// Take a free slot for instance `i`; `None` if none is free.
    #[inline]
    pub(crate) fn give(&mut self, i: usize) -> Option<u32> {
        let slot = self.free.pop()?;
        self.owner[slot as usize] = i as u8 + 1;
        self.held[i] += 1;
        Some(slot)
    }

    /// Accept `slot` back from instance `i` (an index it put in a tx ring):
    /// refused unless `i` holds it. The slot stays the host's until
    /// [`SlotLedger::release`]d.
    ///
    /// # Errors
    /// [`Violation::SlotIndex`] for an index outside the pool,
    /// [`Violation::SlotNotOwned`] for a slot `i` does not hold (free, held
    /// by another instance, or claimed already in this batch).
    #[inline]
    pub(crate) fn claim(&mut self, slot: u32, i: usize) -> Result<(), Violation> {
        match self.owner.get_mut(slot as usize) {
            None => Err(Violation::SlotIndex),
            Some(o) if *o != i as u8 + 1 => Err(Violation::SlotNotOwned),
            Some(o) => {
                *o = RETURNING;
                Ok(())
            }
        }
    }

    /// Put `slot`, held by (or claimed back from) instance `i`, on the free
    /// list, or back at the port if it is a port's frame: returns true
    /// then (the caller hands it to the port).
    #[inline]
    pub(crate) fn release(&mut self, slot: u32, i: usize) -> bool {
        debug_assert!(matches!(self.owner[slot as usize], o if o == RETURNING || o == i as u8 + 1));
        self.held[i] -= 1;
        if slot < self.port_slots {
            self.owner[slot as usize] = PORT;
            self.at_port += 1;
            return true;
        }
        self.owner[slot as usize] = FREE;
        self.free.push(slot);
        false
    }

    /// Put every slot instance `i` holds on the free list, or back at the
    /// port (its process is gone), calling `each` with each and whether
    /// it went to the port; returns how many.
    pub(crate) fn reclaim(&mut self, i: usize, mut each: impl FnMut(u32, bool)) -> u64 {
        let holder = i as u8 + 1;
        let mut taken = 0;
        for (s, o) in self.owner.iter_mut().enumerate() {
            if *o == holder {
                let port = (s as u32) < self.port_slots;
                if port {
                    *o = PORT;
                    self.at_port += 1;
                } else {
                    *o = FREE;
                    self.free.push(s as u32);
                }
                each(s as u32, port);
                taken += 1;
            }
        }
        self.held[i] -= taken as u32;
        taken
    }

    /// Check the invariant: every slot is on the free list exactly once or
    /// held by one instance, never both, and the held counts agree.
    ///
    /// # Errors
    /// What is wrong, for a test's message.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut seen = vec![false; self.owner.len()];
        for &s in &self.free {
            let i = s as usize;
            if seen[i] {
                return Err(format!("slot {s} on the free list twice"));
            }
            seen[i] = true;
            if self.owner[i] != FREE {
                return Err(format!(
                    "slot {s} free but held by instance {}",
                    self.owner[i] - 1
                ));
            }
        }
        let mut held = vec![0u32; self.held.len()];
        let mut at_port = 0;
        for (i, &o) in self.owner.iter().enumerate() {
            if o == FREE && !seen[i] {
                return Err(format!("slot {i} neither free nor held"));
            }
            if (o == RESERVED) != (i as u32 >= self.usable) {
                return Err(format!("slot {i}: owner {o}, {} usable", self.usable));
            }
            if o == RESERVED {
                continue;
            }
            if o == PORT {
                if i as u32 >= self.port_slots {
                    return Err(format!("slot {i} at a port it is not a frame of"));
                }
                at_port += 1;
            } else if o != FREE {
                match held.get_mut(usize::from(o) - 1) {
                    Some(h) => *h += 1,
                    None => return Err(format!("slot {i} held by unknown holder {o}")),
                }
            }
        }
        if *held != *self.held {
            return Err(format!("held counts {:?}, slots say {held:?}", self.held));
        }
        if at_port != self.at_port {
            return Err(format!("{} at the port, slots say {at_port}", self.at_port));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_pool_that_grows_gives_only_its_usable_slots_lowest_first() {
        let mut l = SlotLedger::new(8, 1);
        assert!(l.limit(2));
        l.check().unwrap();
        assert_eq!((l.free(), l.usable(), l.pool()), (2, 2, 8));
        assert!(l.drained());
        assert_eq!(l.give(0), Some(0));
        assert_eq!(l.give(0), Some(1));
        assert_eq!(l.give(0), None, "only the usable slots");
        assert_eq!(
            l.claim(5, 0),
            Err(Violation::SlotNotOwned),
            "not in use yet"
        );
        assert!(!l.limit(1), "slot 1 is held");
        assert_eq!(l.grow(4), 4);
        l.check().unwrap();
        assert_eq!(l.give(0), Some(2), "the lowest new slot first");
        l.claim(0, 0).unwrap();
        assert!(!l.release(0, 0));
        assert_eq!(l.give(0), Some(0), "a released slot before the new ones");
        assert_eq!(l.grow(1), 4, "never shrinks");
        assert_eq!(l.grow(100), 8, "at most the pool");
        l.check().unwrap();
        let mut n = 0;
        l.reclaim(0, |_, _| n += 1);
        assert_eq!(n, 3);
        assert!(l.drained());
        l.check().unwrap();
        assert!(
            !SlotLedger::with_port(8, 1, 4).limit(6),
            "a port's pool is whole"
        );
    }

    #[test]
    fn a_port_s_frames_go_round_through_the_port_not_the_free_list() {
        let mut l = SlotLedger::with_port(6, 2, 4);
        assert_eq!((l.free(), l.pool(), l.port_slots()), (2, 6, 4));
        assert!(l.drained());
        l.check().unwrap();
        // The free list holds the other slots only.
        assert_eq!(l.give(0), Some(4));
        assert!(!l.release(4, 0), "not a port slot: to the free list");
        // A frame the port lent, held by instance 1, then released: back
        // at the port.
        l.adopt(2, 1).unwrap();
        assert!(!l.drained());
        assert_eq!(l.adopt(2, 0), Err(Violation::SlotIndex), "lent once");
        assert_eq!(l.claim(2, 0), Err(Violation::SlotNotOwned));
        l.claim(2, 1).unwrap();
        assert!(l.release(2, 1), "a port slot goes back to the port");
        l.check().unwrap();
        // Only the port's frames, at the port, can be adopted.
        assert_eq!(l.adopt(4, 0), Err(Violation::SlotIndex));
        assert_eq!(l.adopt(6, 0), Err(Violation::SlotIndex));
        assert_eq!(l.adopt(u32::MAX, 0), Err(Violation::SlotIndex));
        // An instance that is gone gives them back too.
        l.adopt(0, 1).unwrap();
        l.adopt(1, 1).unwrap();
        let _ = l.give(1);
        let mut got = Vec::new();
        assert_eq!(l.reclaim(1, |s, port| got.push((s, port))), 3);
        got.sort();
        assert_eq!(got, [(0, true), (1, true), (4, false)]);
        assert!(l.drained());
        l.check().unwrap();
    }

    #[test]
    fn a_slot_goes_round_once() {
        let mut l = SlotLedger::new(4, 2);
        let s = l.give(1).unwrap();
        assert_eq!((s, l.free(), l.held()), (0, 3, &[0, 1][..]));
        // Not the other instance's to hand back.
        assert_eq!(l.claim(s, 0), Err(Violation::SlotNotOwned));
        l.claim(s, 1).unwrap();
        // A second copy of the index in the same batch.
        assert_eq!(l.claim(s, 1), Err(Violation::SlotNotOwned));
        l.release(s, 1);
        assert_eq!((l.free(), l.held()), (4, &[0, 0][..]));
        // Free now: nobody may hand it back.
        assert_eq!(l.claim(s, 1), Err(Violation::SlotNotOwned));
        assert_eq!(l.claim(4, 1), Err(Violation::SlotIndex));
        assert_eq!(l.claim(u32::MAX, 1), Err(Violation::SlotIndex));
        l.check().unwrap();
    }

    #[test]
    fn an_empty_pool_gives_nothing() {
        let mut l = SlotLedger::new(2, 1);
        assert!(l.give(0).is_some() && l.give(0).is_some());
        assert_eq!((l.give(0), l.next_free()), (None, None));
        l.check().unwrap();
    }

    #[test]
    fn reclaim_takes_only_the_instances_slots() {
        let mut l = SlotLedger::new(8, 3);
        let a: Vec<u32> = (0..3).map(|_| l.give(0).unwrap()).collect();
        let b: Vec<u32> = (0..2).map(|_| l.give(2).unwrap()).collect();
        let mut got = Vec::new();
        assert_eq!(l.reclaim(2, |s, _| got.push(s)), 2);
        assert_eq!(got, b);
        assert_eq!(l.held(), &[3, 0, 0]);
        l.check().unwrap();
        // Its slots are free: it cannot hand them back any more.
        assert_eq!(l.claim(b[0], 2), Err(Violation::SlotNotOwned));
        assert_eq!(l.reclaim(0, |_, _| {}), a.len() as u64);
        assert_eq!(l.free(), 8);
        l.check().unwrap();
    }

    #[test]
    fn check_finds_a_broken_record() {
        let mut l = SlotLedger::new(4, 1);
        l.free.push(0);
        assert!(l.check().unwrap_err().contains("twice"));
        let mut l = SlotLedger::new(4, 1);
        l.held[0] = 1;
        assert!(l.check().unwrap_err().contains("held counts"));
    }

    /// What a VR and the host can do to a slot.
    #[derive(Debug, Clone)]
    enum Op {
        Give(usize),
        /// Hand back the `n`-th slot number (any slot, owned or not).
        Return(usize, u32),
        Reclaim(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..3usize).prop_map(Op::Give),
            4 => (0..3usize, 0..20u32).prop_map(|(i, s)| Op::Return(i, s)),
            1 => (0..3usize).prop_map(Op::Reclaim),
        ]
    }

    proptest! {
        /// Against a plain map of slot to holder: every hand-back is
        /// accepted exactly when the model says the instance holds the
        /// slot, and the record stays consistent whatever a VR hands back.
        #[test]
        fn matches_a_map_of_holders(ops in prop::collection::vec(op(), 0..200)) {
            const SLOTS: u32 = 16;
            let mut l = SlotLedger::new(SLOTS, 3);
            let mut model: BTreeMap<u32, usize> = BTreeMap::new();
            for o in ops {
                match o {
                    Op::Give(i) => match l.give(i) {
                        Some(s) => {
                            prop_assert!(model.insert(s, i).is_none(), "slot {} given twice", s);
                        }
                        None => prop_assert_eq!(model.len(), SLOTS as usize),
                    },
                    Op::Return(i, s) => {
                        let owns = model.get(&s) == Some(&i);
                        prop_assert_eq!(l.claim(s, i).is_ok(), owns);
                        if owns {
                            l.release(s, i);
                            model.remove(&s);
                        }
                    }
                    Op::Reclaim(i) => {
                        let n = l.reclaim(i, |s, _| { model.remove(&s); });
                        prop_assert!(model.values().all(|&h| h != i));
                        prop_assert!(n <= u64::from(SLOTS));
                    }
                }
                prop_assert_eq!(l.free() + model.len(), SLOTS as usize);
                for i in 0..3 {
                    let n = model.values().filter(|&&h| h == i).count() as u32;
                    prop_assert_eq!(l.held()[i], n);
                }
                l.check().map_err(TestCaseError::fail)?;
            }
        }
    }
}
