//! Lookups on other threads while one writer updates: [`Fib::reader`] hands out
//! [`FibReader`]s.
//!
//! Two mechanisms, both in safe Rust:
//!
//! - **Per-entry atomic publication** for route changes. Every trie entry is an `AtomicU32`
//!   holding a whole answer (next hop + prefix length) or a group pointer. The writer fills
//!   a new group before it links it with a `Release` store; readers load with `Acquire`.
//!   A reader therefore sees, for each address, the route before or after a change, never a
//!   mix; a lookup never blocks and never retries. A change that spans many entries (a short
//!   prefix) becomes visible entry by entry: during it, addresses it covers answer old or new.
//! - **RCU by reference count** for the rare structural change: when the group pool is full
//!   the writer copies the table into a larger one, publishes the new `Arc<Table>` and bumps
//!   a generation counter. A reader checks the counter once per call (a read-mostly shared
//!   cache line) and takes the new `Arc` when it changed; the old table is freed when its
//!   last reader has moved on.
//! - **Quiescent-state reclamation** (QSBR, as DPDK's `rte_rcu_qsbr` for `rte_lpm`) for
//!   groups emptied by deletes: the writer unlinks such a group (its parent entry becomes a
//!   leaf), then advances a global epoch and tags the group with the old value. Each reader,
//!   between two calls (when it holds no entry), stores the epoch it saw into its own
//!   cache-line-sized slot. A tagged group is reused only when every live reader's slot is
//!   past its tag: no reader can still be walking it. A reader that stops calling holds
//!   reclamation back (the pool grows instead); dropping it unregisters it.
//!
//! Readers are threads of one process; VR instances in other processes each build their
//! own FIB from the same route feed.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::trie::{BATCH, Table};
use crate::{Fib, Key, NextHopId};

/// The current table, as published by the writer.
pub(crate) struct Published {
    /// Bumped after each publication.
    generation: AtomicU64,
    table: Mutex<Arc<Table>>,
    /// Reclamation epoch, advanced by the writer after it unlinks a group.
    epoch: AtomicU64,
    /// Each live reader's last quiescent epoch.
    readers: Mutex<Vec<Weak<ReaderSlot>>>,
}

/// One reader's quiescent epoch, alone on its cache line (only its reader writes it).
#[repr(align(64))]
struct ReaderSlot(AtomicU64);

impl Published {
    fn new(table: Arc<Table>) -> Self {
        Self {
            generation: AtomicU64::new(0),
            table: Mutex::new(table),
            epoch: AtomicU64::new(1),
            readers: Mutex::new(Vec::new()),
        }
    }

    /// Advance the epoch after unlinking a group; returns the group's tag (the epoch before).
    pub(crate) fn advance_epoch(&self) -> u64 {
        // AcqRel: the Release half orders the unlink store before the new epoch, pairing with
        // the reader's Acquire load in `quiesce`: a reader that reports the new epoch has
        // seen the unlink and cannot reach the group in later calls.
        self.epoch.fetch_add(1, Ordering::AcqRel)
    }

    /// The smallest epoch every live reader has passed.
    pub(crate) fn min_reader_epoch(&self) -> u64 {
        let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        readers.retain(|w| w.strong_count() > 0);
        readers
            .iter()
            .filter_map(Weak::upgrade)
            // Acquire: pairs with the reader's Release store in `quiesce`; its lookups before
            // that store are done before the writer reuses a group.
            .map(|s| s.0.load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// A slot for a new reader, at the current epoch.
    fn register(&self) -> Arc<ReaderSlot> {
        // Acquire: as in `refresh`.
        let slot = Arc::new(ReaderSlot(AtomicU64::new(
            self.epoch.load(Ordering::Acquire),
        )));
        self.readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(&slot));
        slot
    }

    pub(crate) fn publish(&self, t: &Arc<Table>) {
        *self.table.lock().unwrap_or_else(PoisonError::into_inner) = t.clone();
        // Release: pairs with the Acquire in `FibReader::refresh`; the new Arc is in place
        // before readers see the new generation.
        self.generation.fetch_add(1, Ordering::Release);
    }
}

/// A lookup handle for another thread; see the module docs.
pub struct FibReader<K: Key> {
    shared: Arc<Published>,
    slot: Arc<ReaderSlot>,
    table: Arc<Table>,
    generation: u64,
    _key: PhantomData<K>,
}

impl<K: Key> Clone for FibReader<K> {
    fn clone(&self) -> Self {
        Self {
            slot: self.shared.register(),
            shared: self.shared.clone(),
            table: self.table.clone(),
            generation: self.generation,
            _key: PhantomData,
        }
    }
}

impl<K: Key> FibReader<K> {
    /// Take the latest table if the writer published a new one, and report a quiescent
    /// state (this reader holds no entry between calls).
    #[inline]
    pub fn refresh(&mut self) {
        // Acquire: pairs with the writer's AcqRel `advance_epoch`; Release: pairs with the
        // writer's Acquire in `min_reader_epoch` (our earlier lookups are finished).
        let e = self.shared.epoch.load(Ordering::Acquire);
        if self.slot.0.load(Ordering::Relaxed) != e {
            self.slot.0.store(e, Ordering::Release);
        }
        // Acquire: pairs with the Release in `Published::publish`.
        let g = self.shared.generation.load(Ordering::Acquire);
        if g != self.generation {
            self.table = self
                .shared
                .table
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            self.generation = g;
        }
    }

    /// Longest-prefix match (refreshes first).
    #[inline]
    pub fn lookup(&mut self, addr: K) -> Option<NextHopId> {
        self.refresh();
        self.table.lookup(addr)
    }

    /// Batched longest-prefix match (refreshes once per call).
    ///
    /// # Panics
    /// If `addrs` and `out` differ in length.
    pub fn lookup_batch(&mut self, addrs: &[K], out: &mut [Option<NextHopId>]) {
        assert_eq!(
            addrs.len(),
            out.len(),
            "lookup_batch: addrs and out differ in length"
        );
        self.refresh();
        for (a, o) in addrs.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            self.table.lookup_chunk(a, o);
        }
    }
}

impl<K: Key> Fib<K> {
    /// A reader that sees this FIB's updates while they happen (see [`crate::concurrent`]).
    pub fn reader(&mut self) -> FibReader<K> {
        let table = self.table().clone();
        let shared = self
            .published()
            .get_or_insert_with(|| Arc::new(Published::new(table.clone())))
            .clone();
        let generation = shared.generation.load(Ordering::Acquire);
        FibReader {
            slot: shared.register(),
            shared,
            table,
            generation,
            _key: PhantomData,
        }
    }
}
