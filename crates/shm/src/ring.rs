//! Single-producer single-consumer rings of `u32` entries (slot indexes).
//!
//! A ring lives in memory shared with a peer we do not trust: the producer and
//! the consumer may be in different processes, and either may be a hostile VR.
//! Each side therefore keeps its own index privately, writes it to shared
//! memory for the peer, and never reads it back. The only value read from the
//! peer is the peer's index, and it is validated before use: a consumer's index
//! must lie between the last value seen and our own producer index; a
//! producer's index must be at most `size` ahead of our consumer index. A
//! violation is returned as [`RingError`] and nothing is read or written out of
//! the ring's bounds whatever the peer writes.
//!
//! Indexes are free-running `u32` counters; `head - tail` (wrapping) is the
//! fill level, and `index & mask` the entry. The ring size is a power of two,
//! so wrap-around of the counters at 2^32 keeps `head - tail` exact.
//!
//! Memory ordering (the pairs, as in DPDK's `rte_ring_c11_pvt.h`):
//! - producer: entry stores (Relaxed) then `prod.store(Release)`, paired with
//!   the consumer's `prod.load(Acquire)`: the consumer sees the entries.
//! - consumer: entry loads (Relaxed) then `cons.store(Release)`, paired with
//!   the producer's `cons.load(Acquire)`: the producer overwrites an entry only
//!   after the consumer has read it.
//!
//! Entries are atomics so that a peer writing them concurrently is a data race
//! on atomics (defined behaviour), not on plain memory.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::sync::{AtomicU32, Ordering};

/// The peer's index is impossible: the ring is corrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The consumer index read from the peer is not in `[last_seen, head]`.
    #[error(
        "consumer index {seen} outside [{last}, {head}] (moved backwards or past the producer)"
    )]
    BadConsumerIndex {
        /// Value read from shared memory.
        seen: u32,
        /// Last valid value seen.
        last: u32,
        /// Our producer index.
        head: u32,
    },
    /// The producer index read from the peer is more than `size` ahead of us
    /// or behind us.
    #[error(
        "producer index {seen} outside [{tail}, {tail} + {size}] (moved backwards or overfilled)"
    )]
    BadProducerIndex {
        /// Value read from shared memory.
        seen: u32,
        /// Our consumer index.
        tail: u32,
        /// Ring size.
        size: u32,
    },
}

/// Where a ring's words are: the two indexes and the entry array.
///
/// Built by the region code from shared memory, or by tests from ordinary
/// memory. `keep` holds whatever owns that memory alive.
#[derive(Clone)]
pub struct RingMem {
    prod: NonNull<AtomicU32>,
    cons: NonNull<AtomicU32>,
    entries: NonNull<AtomicU32>,
    mask: u32,
    _keep: Arc<dyn Send + Sync>,
}

impl fmt::Debug for RingMem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingMem")
            .field("size", &(self.mask + 1))
            .finish()
    }
}

// SAFETY: the pointers refer to atomics that `_keep` keeps alive; atomics may
// be used from any thread.
unsafe impl Send for RingMem {}
// SAFETY: as above; all access through the pointers is atomic.
unsafe impl Sync for RingMem {}

impl RingMem {
    /// Describe a ring at the given words.
    ///
    /// # Safety
    /// `prod`, `cons` and `entries[0..size]` must be valid, aligned atomics
    /// for as long as `keep` is alive, and `size` a power of two >= 1.
    pub unsafe fn new(
        prod: NonNull<AtomicU32>,
        cons: NonNull<AtomicU32>,
        entries: NonNull<AtomicU32>,
        size: u32,
        keep: Arc<dyn Send + Sync>,
    ) -> Self {
        debug_assert!(size.is_power_of_two());
        Self {
            prod,
            cons,
            entries,
            mask: size - 1,
            _keep: keep,
        }
    }

    /// Number of entries.
    pub fn size(&self) -> u32 {
        self.mask + 1
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: valid for the life of `_keep` (contract of `new`).
        unsafe { self.prod.as_ref() }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: valid for the life of `_keep` (contract of `new`).
        unsafe { self.cons.as_ref() }
    }

    fn entry(&self, index: u32) -> &AtomicU32 {
        let i = (index & self.mask) as usize;
        // SAFETY: `i <= mask < size`, and entries[0..size] are valid (contract
        // of `new`). The masking is what keeps a hostile index in bounds.
        unsafe { self.entries.add(i).as_ref() }
    }

    /// Split into the producer side, starting from the indexes in memory.
    /// Used when a ring is fresh (both indexes zero) or when we reattach and
    /// trust the memory (a VR attaching to the region the host prepared).
    pub fn producer_at(self, head: u32, cons: u32) -> Producer {
        Producer {
            mem: self,
            head,
            cons,
        }
    }

    /// The consumer side, starting at `tail` with `prod` last seen. A
    /// `prod` more than a ring ahead of `tail` (indexes a hostile peer
    /// wrote) is not taken as seen: the first [`Consumer::pop`] reads the
    /// index again and names it.
    pub fn consumer_at(self, tail: u32, prod: u32) -> Consumer {
        let prod = if prod.wrapping_sub(tail) > self.size() {
            tail
        } else {
            prod
        };
        Consumer {
            mem: self,
            tail,
            prod,
        }
    }

    /// Producer side of a fresh ring whose indexes are zero.
    pub fn producer(self) -> Producer {
        self.producer_at(0, 0)
    }

    /// Consumer side of a fresh ring whose indexes are zero.
    pub fn consumer(self) -> Consumer {
        self.consumer_at(0, 0)
    }

    /// Reset both indexes to zero. Only when no peer uses the ring (a VR
    /// process that exited, before its restart).
    pub fn reset(&self) {
        // Relaxed: nobody else uses the ring now; the new peer learns of the
        // region through a socket message, which orders these stores.
        self.prod().store(0, Ordering::Relaxed);
        self.cons().store(0, Ordering::Relaxed);
    }

    /// The producer and consumer indexes as they are in memory now,
    /// unvalidated: for a side that resumes a ring it did not start (a test
    /// harness playing a VR). Pass them through `producer_at`/`consumer_at`,
    /// whose operations validate the peer's index as always.
    pub fn indexes(&self) -> (u32, u32) {
        // Acquire: pairs with the peers' Release stores, so entries written
        // before an index was published are visible to whoever resumes here.
        (
            self.prod().load(Ordering::Acquire),
            self.cons().load(Ordering::Acquire),
        )
    }

    /// Fill level as the two indexes in memory say, clamped to the size.
    /// For stats only: both values may be written by a hostile peer.
    pub fn occupancy(&self) -> u32 {
        // Relaxed: a display value, no data is read through it.
        let p = self.prod().load(Ordering::Relaxed);
        let c = self.cons().load(Ordering::Relaxed);
        p.wrapping_sub(c).min(self.size())
    }
}

/// The producing side of a ring: owns the head index.
#[derive(Debug)]
pub struct Producer {
    mem: RingMem,
    /// Our index; the shared copy is written, never read back.
    head: u32,
    /// Consumer index last read and validated.
    cons: u32,
}

impl Producer {
    /// Free entries, after reading the consumer's index.
    ///
    /// # Errors
    /// [`RingError::BadConsumerIndex`] if the consumer index moved backwards
    /// or past our head.
    pub fn free(&mut self) -> Result<u32, RingError> {
        // Acquire: pairs with the consumer's Release store of `cons`, so its
        // reads of the entries we are about to overwrite are done.
        let seen = self.mem.cons().load(Ordering::Acquire);
        // Bad: behind the index last seen, past our head, or more than a
        // ring behind our head (possible only for a producer resumed from
        // indexes in memory, `producer_at`).
        if seen.wrapping_sub(self.cons) > self.head.wrapping_sub(self.cons)
            || self.head.wrapping_sub(seen) > self.mem.size()
        {
            return Err(RingError::BadConsumerIndex {
                seen,
                last: self.cons,
                head: self.head,
            });
        }
        self.cons = seen;
        Ok(self.mem.size() - self.head.wrapping_sub(seen))
    }

    /// Free entries by the consumer index last validated, without reading
    /// shared memory. A lower bound of [`Producer::free`]. Saturating: a
    /// producer resumed by [`RingMem::producer_at`] from indexes a hostile
    /// peer wrote may start more than a ring apart; it then sees no room,
    /// and [`Producer::free`] names the bad index.
    pub fn free_cached(&self) -> u32 {
        self.mem
            .size()
            .saturating_sub(self.head.wrapping_sub(self.cons))
    }

    /// Enqueue as many of `items` as fit and publish them with one store;
    /// returns how many were enqueued.
    ///
    /// # Errors
    /// As [`Producer::free`]; nothing is enqueued then.
    pub fn push(&mut self, items: &[u32]) -> Result<usize, RingError> {
        let mut room = self.free_cached() as usize;
        if room < items.len() {
            room = self.free()? as usize;
        }
        let n = items.len().min(room);
        for (i, &item) in items[..n].iter().enumerate() {
            // Relaxed: published by the Release store of `prod` below.
            self.mem
                .entry(self.head.wrapping_add(i as u32))
                .store(item, Ordering::Relaxed);
        }
        if n > 0 {
            self.head = self.head.wrapping_add(n as u32);
            // Release: pairs with the consumer's Acquire load of `prod`; makes
            // the entry stores above (and the slot contents written before
            // them) visible to it.
            self.mem.prod().store(self.head, Ordering::Release);
        }
        Ok(n)
    }

    /// Our head index (entries published so far).
    pub fn head(&self) -> u32 {
        self.head
    }

    /// The ring's memory.
    pub fn mem(&self) -> &RingMem {
        &self.mem
    }
}

/// The consuming side of a ring: owns the tail index.
#[derive(Debug)]
pub struct Consumer {
    mem: RingMem,
    /// Our index; the shared copy is written, never read back.
    tail: u32,
    /// Producer index last read and validated.
    prod: u32,
}

impl Consumer {
    /// Entries ready, after reading the producer's index.
    ///
    /// # Errors
    /// [`RingError::BadProducerIndex`] if the producer index is behind our
    /// tail or more than a ring ahead of it.
    pub fn ready(&mut self) -> Result<u32, RingError> {
        // Acquire: pairs with the producer's Release store of `prod`; the
        // entries (and slot contents) it published are visible after this.
        let seen = self.mem.prod().load(Ordering::Acquire);
        let fill = seen.wrapping_sub(self.tail);
        if fill > self.mem.size() {
            return Err(RingError::BadProducerIndex {
                seen,
                tail: self.tail,
                size: self.mem.size(),
            });
        }
        self.prod = seen;
        Ok(fill)
    }

    /// Entries ready by the producer index last validated.
    pub fn ready_cached(&self) -> u32 {
        self.prod.wrapping_sub(self.tail)
    }

    /// Dequeue up to `out.len()` entries into `out`; returns how many.
    ///
    /// # Errors
    /// As [`Consumer::ready`]; nothing is dequeued then.
    pub fn pop(&mut self, out: &mut [u32]) -> Result<usize, RingError> {
        let mut avail = self.ready_cached() as usize;
        if avail < out.len() {
            avail = self.ready()? as usize;
        }
        let n = out.len().min(avail);
        for (i, slot) in out[..n].iter_mut().enumerate() {
            // Relaxed: ordered after the Acquire load of `prod` in `ready`.
            *slot = self
                .mem
                .entry(self.tail.wrapping_add(i as u32))
                .load(Ordering::Relaxed);
        }
        if n > 0 {
            self.tail = self.tail.wrapping_add(n as u32);
            // Release: pairs with the producer's Acquire load of `cons`; our
            // entry loads above happen before it may overwrite them.
            self.mem.cons().store(self.tail, Ordering::Release);
        }
        Ok(n)
    }

    /// Our tail index (entries consumed so far).
    pub fn tail(&self) -> u32 {
        self.tail
    }

    /// The ring's memory.
    pub fn mem(&self) -> &RingMem {
        &self.mem
    }
}

/// A ring in ordinary memory, for tests and for in-process use.
pub fn heap_ring(size: u32) -> RingMem {
    assert!(size.is_power_of_two(), "ring size must be a power of two");
    let words: Arc<Vec<AtomicU32>> = Arc::new((0..size + 2).map(|_| AtomicU32::new(0)).collect());
    let base = NonNull::from(&words[0]);
    // SAFETY: `words` holds size + 2 atomics and is kept alive by the Arc
    // passed as `keep`; word 0 is prod, word 1 is cons, the rest entries.
    unsafe { RingMem::new(base, base.add(1), base.add(2), size, words) }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn push_pop_wraps() {
        let mem = heap_ring(4);
        let mut p = mem.clone().producer();
        let mut c = mem.consumer();
        let mut out = [0u32; 8];
        for round in 0..10u32 {
            assert_eq!(p.push(&[round, round + 1, round + 2]).unwrap(), 3);
            assert_eq!(p.push(&[9, 9]).unwrap(), 1, "only one entry left");
            assert_eq!(c.pop(&mut out).unwrap(), 4);
            assert_eq!(&out[..4], &[round, round + 1, round + 2, 9]);
        }
    }

    #[test]
    fn counters_wrap_at_u32_max() {
        let mem = heap_ring(8);
        let start = u32::MAX - 3;
        mem.prod().store(start, Ordering::Relaxed);
        mem.cons().store(start, Ordering::Relaxed);
        let mut p = mem.clone().producer_at(start, start);
        let mut c = mem.consumer_at(start, start);
        assert_eq!(p.push(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap(), 8);
        assert_eq!(p.push(&[9]).unwrap(), 0);
        let mut out = [0u32; 8];
        assert_eq!(c.pop(&mut out).unwrap(), 8);
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn producer_resumed_from_hostile_indexes_errs_not_panics() {
        let mem = heap_ring(8);
        // Written by a hostile peer: head more than a ring ahead of cons.
        mem.prod().store(100, Ordering::Relaxed);
        mem.cons().store(3, Ordering::Relaxed);
        let (head, cons) = mem.indexes();
        let mut p = mem.producer_at(head, cons);
        assert_eq!(p.free_cached(), 0);
        assert!(matches!(
            p.push(&[1]),
            Err(RingError::BadConsumerIndex { .. })
        ));
    }

    #[test]
    fn consumer_resumed_from_hostile_indexes_errs_not_reads() {
        let mem = heap_ring(8);
        mem.prod().store(100, Ordering::Relaxed);
        mem.cons().store(3, Ordering::Relaxed);
        let (prod, tail) = mem.indexes();
        let mut c = mem.consumer_at(tail, prod);
        assert_eq!(c.ready_cached(), 0);
        let mut out = [0u32; 4];
        assert!(matches!(
            c.pop(&mut out),
            Err(RingError::BadProducerIndex { .. })
        ));
    }

    #[test]
    fn hostile_consumer_index_is_refused() {
        let mem = heap_ring(8);
        let mut p = mem.clone().producer();
        p.push(&[1, 2, 3]).unwrap();
        // Consumer index past our head.
        mem.cons().store(5, Ordering::Relaxed);
        assert!(matches!(p.free(), Err(RingError::BadConsumerIndex { .. })));
        // Moved backwards after a valid read.
        mem.cons().store(2, Ordering::Relaxed);
        assert_eq!(p.free().unwrap(), 7);
        mem.cons().store(1, Ordering::Relaxed);
        assert!(p.free().is_err());
        mem.cons().store(u32::MAX, Ordering::Relaxed);
        assert!(p.free().is_err());
    }

    #[test]
    fn hostile_producer_index_is_refused() {
        let mem = heap_ring(8);
        let mut c = mem.clone().consumer();
        let mut out = [0u32; 16];
        mem.prod().store(9, Ordering::Relaxed);
        assert!(matches!(
            c.pop(&mut out),
            Err(RingError::BadProducerIndex { .. })
        ));
        mem.prod().store(u32::MAX, Ordering::Relaxed);
        assert!(c.pop(&mut out).is_err());
        mem.prod().store(8, Ordering::Relaxed);
        assert_eq!(c.pop(&mut out).unwrap(), 8);
        // Backwards relative to our tail.
        mem.prod().store(7, Ordering::Relaxed);
        assert!(c.pop(&mut out).is_err());
    }

    proptest! {
        /// Against a VecDeque model, with random batch sizes on both sides.
        #[test]
        fn matches_fifo_model(ops in proptest::collection::vec((any::<bool>(), 0usize..20), 1..200), size_log in 0u32..6) {
            let size = 1u32 << size_log;
            let mem = heap_ring(size);
            let mut p = mem.clone().producer();
            let mut c = mem.consumer();
            let mut model = std::collections::VecDeque::new();
            let mut next = 0u32;
            for (is_push, n) in ops {
                if is_push {
                    let items: Vec<u32> = (0..n as u32).map(|i| next + i).collect();
                    let pushed = p.push(&items).unwrap();
                    prop_assert_eq!(pushed, n.min(size as usize - model.len()));
                    model.extend(&items[..pushed]);
                    next += pushed as u32;
                } else {
                    let mut out = vec![0; n];
                    let popped = c.pop(&mut out).unwrap();
                    prop_assert_eq!(popped, n.min(model.len()));
                    for v in &out[..popped] {
                        prop_assert_eq!(Some(*v), model.pop_front());
                    }
                }
            }
        }

        /// Whatever a hostile peer writes into the indexes, our calls return
        /// values within bounds or an error, and never panic.
        #[test]
        fn hostile_indexes_never_escape(writes in proptest::collection::vec((any::<u32>(), any::<u32>()), 1..50)) {
            let mem = heap_ring(16);
            let mut p = mem.clone().producer();
            let mut c = mem.clone().consumer();
            let mut out = [0u32; 32];
            for (pv, cv) in writes {
                mem.prod().store(pv, Ordering::Relaxed);
                mem.cons().store(cv, Ordering::Relaxed);
                if let Ok(n) = p.push(&[1; 20]) { prop_assert!(n <= 16); }
                if let Ok(n) = c.pop(&mut out) { prop_assert!(n <= 16); }
                prop_assert!(p.free_cached() <= 16);
            }
        }
    }
}
