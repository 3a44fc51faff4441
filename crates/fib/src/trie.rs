//! The multibit trie behind [`Ipv4Fib`](crate::Ipv4Fib) and [`Ipv6Fib`](crate::Ipv6Fib).
//!
//! DIR-16-8-8 for IPv4 (16-4-4-... for IPv6): a root array indexed by the first 16 bits of
//! the address, then groups of `1 << STRIDE` entries indexed by each following stride (8
//! bits for IPv4, 4 for IPv6; see [`Key::STRIDE`]), with *controlled prefix
//! expansion* and *leaf pushing* (Srinivasan & Varghese, "Faster IP lookups using controlled
//! prefix expansion", SIGMETRICS 1998; the same scheme as DPDK's `rte_lpm` with a 16-bit
//! instead of a 24-bit first level). Every entry carries the length of the prefix that wrote
//! it, so an insert overwrites only entries of shorter-or-equal prefixes and a delete
//! rewrites only its own entries with the next covering prefix, without rebuilding.
//!
//! Why 16 and not 24 bits first: a 24-bit root (64 MiB) makes every random lookup a cache
//! and TLB miss even for a 2-route table; the 256 KiB root fits in L2, and with the 512K
//! table the level-1 groups take ~22 MiB (about 20K of them), which fits in a 32 MiB L3.
//! Measured with this code and `ROOT_BITS = 24` (2-core EPYC VM, 2026-11-22): 2-route table
//! 90 M batched lookups/s (vs ~800 M with 16 bits), 512K table 94 M/s (vs ~110 M), build
//! 640 ms (vs ~110 ms); transparent huge pages (`always`) did not change the 24-bit figures.
//!
//! Concurrency: entries are `AtomicU32`. A writer fills a new group completely before it
//! publishes the group's index in the parent entry with a `Release` store; readers load every
//! entry with `Acquire`, so a reader that sees the pointer sees the filled group. Each entry
//! store replaces a whole entry, so a reader sees either the old or the new route for an
//! address, never a torn one. Growing the group pool copies the table into a bigger one and
//! publishes the new `Arc` (see [`crate::concurrent`]); readers of the old one finish their
//! batch on a consistent (if slightly stale) snapshot.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::expand::{Arrays, EXT, Prefixes, decode};
use crate::{FibError, NextHopId};

/// Bits of the root level.
pub const ROOT_BITS: u32 = 16;

/// The most pool entries a FIB can hold (16 GiB: never the limit in practice).
const MAX_POOL_ENTRIES: usize = 1 << 32;
/// Lookups handled together by `lookup_batch` (enough misses in flight to fill the
/// line-fill buffers of one core).
pub(crate) const BATCH: usize = 32;

/// An address type the trie can index: `u32` (IPv4) or `u128` (IPv6), host byte order.
pub trait Key: Copy + Eq + Hash + Ord + std::fmt::Debug + Send + Sync + 'static {
    /// Address width in bits.
    const BITS: u8;
    /// Bits per level below the root (a group has `1 << STRIDE` entries).
    const STRIDE: u32;
    /// `self` with all bits past the first `len` cleared (`len <= BITS`).
    fn mask(self, len: u8) -> Self;
    /// `width` bits starting `start` bits from the most significant bit.
    fn chunk(self, start: u32, width: u32) -> usize;
    /// The key as a number.
    fn to_u128(self) -> u128;
    /// The low `BITS` bits of `v` as a key.
    fn from_u128(v: u128) -> Self;
}

impl Key for u32 {
    const BITS: u8 = 32;
    /// 16-8-8: at most 3 accesses; a group is 1 KiB.
    const STRIDE: u32 = 8;
    #[inline]
    fn mask(self, len: u8) -> Self {
        if len == 0 {
            0
        } else {
            self & (u32::MAX << (32 - u32::from(len.min(32))))
        }
    }
    #[inline]
    fn chunk(self, start: u32, width: u32) -> usize {
        ((self >> (32 - start - width)) & ((1 << width) - 1)) as usize
    }
    fn to_u128(self) -> u128 {
        u128::from(self)
    }
    fn from_u128(v: u128) -> Self {
        v as u32
    }
}

impl Key for u128 {
    const BITS: u8 = 128;
    /// 16-4-4-...: a group is one 64-byte cache line. IPv6 tables are sparse below /16, so
    /// 8-bit groups would be mostly copies of one entry (8x the memory, measured on the
    /// RouteViews dump); real prefixes stop at /48, so a lookup takes at most 9 accesses,
    /// the upper ones shared by many prefixes and cached.
    const STRIDE: u32 = 4;
    #[inline]
    fn mask(self, len: u8) -> Self {
        if len == 0 {
            0
        } else {
            self & (u128::MAX << (128 - u32::from(len.min(128))))
        }
    }
    #[inline]
    fn chunk(self, start: u32, width: u32) -> usize {
        // Real prefixes end before bit 64: take the 64-bit path there (a variable u128 shift
        // is several instructions).
        let end = start + width;
        if end <= 64 {
            (((self >> 64) as u64 >> (64 - end)) as usize) & ((1 << width) - 1)
        } else {
            ((self >> (128 - end)) as usize) & ((1 << width) - 1)
        }
    }
    fn to_u128(self) -> u128 {
        self
    }
    fn from_u128(v: u128) -> Self {
        v
    }
}

/// The lookup arrays: what readers share.
pub(crate) struct Table {
    root: Box<[AtomicU32]>,
    /// Groups of 256 entries; group 0 stays all-empty (the batch lookup reads it for
    /// addresses that already resolved, which keeps the loop free of branches).
    pool: Box<[AtomicU32]>,
}

fn zeroed(n: usize) -> Box<[AtomicU32]> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

impl Table {
    fn new<K: Key>(groups: usize) -> Self {
        Self {
            root: zeroed(1 << ROOT_BITS),
            pool: zeroed(groups << K::STRIDE),
        }
    }

    fn groups<K: Key>(&self) -> usize {
        self.pool.len() >> K::STRIDE
    }

    pub(crate) fn bytes(&self) -> usize {
        (self.root.len() + self.pool.len()) * 4
    }

    /// Copy into a table with room for `groups` groups (writer side only).
    fn grown<K: Key>(&self, groups: usize) -> Self {
        let t = Self::new::<K>(groups);
        // Relaxed: the new table is not published yet; the Release store of its Arc does that.
        for (d, s) in t.root.iter().zip(self.root.iter()) {
            d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        for (d, s) in t.pool.iter().zip(self.pool.iter()) {
            d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        t
    }

    #[inline]
    pub(crate) fn lookup<K: Key>(&self, addr: K) -> Option<NextHopId> {
        // Acquire pairs with the Release store that published each entry (and, for a group
        // pointer, the group's contents written before it).
        let mut e = self.root[addr.chunk(0, ROOT_BITS)].load(Ordering::Acquire);
        let mut start = ROOT_BITS;
        while e & EXT != 0 && start < u32::from(K::BITS) {
            let g = (e & !EXT) as usize;
            e = self.pool[(g << K::STRIDE) | addr.chunk(start, K::STRIDE)].load(Ordering::Acquire);
            start += K::STRIDE;
        }
        decode(e)
    }

    /// Staged lookup of up to [`BATCH`] addresses: every stage issues independent loads for
    /// the whole batch, so the out-of-order core keeps many cache misses in flight (the
    /// effect of explicit prefetching, in safe code).
    #[inline]
    pub(crate) fn lookup_chunk<K: Key>(&self, addrs: &[K], out: &mut [Option<NextHopId>]) {
        let n = addrs.len().min(out.len()).min(BATCH);
        let mut e = [0u32; BATCH];
        let mut any = 0;
        for i in 0..n {
            e[i] = self.root[addrs[i].chunk(0, ROOT_BITS)].load(Ordering::Acquire);
            any |= e[i];
        }
        let mut start = ROOT_BITS;
        while any & EXT != 0 && start < u32::from(K::BITS) {
            any = 0;
            for i in 0..n {
                if e[i] & EXT != 0 {
                    let g = (e[i] & !EXT) as usize;
                    e[i] = self.pool[(g << K::STRIDE) | addrs[i].chunk(start, K::STRIDE)]
                        .load(Ordering::Acquire);
                    any |= e[i];
                }
            }
            start += K::STRIDE;
        }
        for i in 0..n {
            out[i] = decode(e[i]);
        }
    }
}

/// FxHash-style multiplicative hash with a final fold: the rule maps are keyed by integers, not by attacker-chosen
/// strings, and SipHash would dominate the update cost.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.write_u64(i as u64);
        self.write_u64((i >> 64) as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // Prefixes have zero low bits, so the product alone leaves the low (bucket-index) bits
        // of the hash zero: fold the high bits down (as rustc-hash 2 does with a rotate).
        let x = self.0;
        x ^ (x >> 29) ^ (x >> 47)
    }
}

/// A FIB's own arrays: a heap [`Table`] shared with its readers, grown by copy and
/// republish, and its group allocator.
struct Store<K: Key> {
    table: Arc<Table>,
    /// Groups handed out so far (group 0 is the reserved empty one).
    next_group: usize,
    /// Groups unlinked by deletes, tagged with the reclamation epoch they were unlinked in;
    /// reused once every reader has passed a later epoch (see [`crate::concurrent`]).
    released: std::collections::VecDeque<(u64, u32)>,
    /// Groups free for reuse.
    free: Vec<u32>,
    /// Where a new table is published to concurrent readers, once one was asked for.
    published: Option<Arc<crate::concurrent::Published>>,
    _key: std::marker::PhantomData<K>,
}

impl<K: Key> Store<K> {
    fn new(groups: usize) -> Self {
        Self {
            table: Arc::new(Table::new::<K>(groups)),
            next_group: 1,
            released: Default::default(),
            free: Vec::new(),
            published: None,
            _key: std::marker::PhantomData,
        }
    }

    fn publish(&mut self, t: Arc<Table>) {
        self.table = t;
        if let Some(p) = &self.published {
            p.publish(&self.table);
        }
    }
}

impl<K: Key> Arrays for Store<K> {
    fn root(&self) -> &[AtomicU32] {
        &self.table.root
    }

    fn pool(&self) -> &[AtomicU32] {
        &self.table.pool
    }

    /// Reuse groups no reader can still reach, else grow (copy and republish) the table.
    fn reserve(&mut self, n: usize) -> Result<(), FibError> {
        let room = |f: &Self| f.free.len() + f.table.groups::<K>() - f.next_group;
        if room(self) >= n {
            return Ok(());
        }
        if !self.released.is_empty() {
            let safe = self
                .published
                .as_ref()
                .map_or(u64::MAX, |p| p.min_reader_epoch());
            while let Some(&(tag, g)) = self.released.front() {
                if tag >= safe {
                    break;
                }
                self.free.push(g);
                self.released.pop_front();
            }
            if room(self) >= n {
                return Ok(());
            }
        }
        // x1.5: amortized O(1) copies, at most a third of the pool idle.
        let want = (self.table.groups::<K>() * 3 / 2).max(self.next_group + n);
        if want << K::STRIDE > MAX_POOL_ENTRIES {
            return Err(FibError::Capacity {
                groups: self.next_group,
            });
        }
        let t = Arc::new(self.table.grown::<K>(want));
        self.publish(t);
        Ok(())
    }

    fn alloc(&mut self) -> u32 {
        match self.free.pop() {
            Some(g) => g,
            None => {
                debug_assert!(
                    self.next_group < self.table.groups::<K>(),
                    "reserve() was not called"
                );
                self.next_group += 1;
                (self.next_group - 1) as u32
            }
        }
    }

    fn release(&mut self, g: u32) {
        match &self.published {
            // Readers may be inside the group: reuse it after they all pass this epoch.
            Some(p) => self.released.push_back((p.advance_epoch(), g)),
            None => self.free.push(g),
        }
    }
}

/// A longest-prefix-match table over keys `K` (see the module docs for the structure).
///
/// Capacity: next hops `0..=MAX_NEXT_HOP`; prefixes are limited by memory only (each
/// group is 1 KiB; the 512K-prefix IPv4 table needs about 22K groups).
pub struct Fib<K: Key> {
    store: Store<K>,
    /// The routes (the source of truth for deletes) and the update algorithm.
    prefixes: Prefixes<K>,
}

impl<K: Key> Default for Fib<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Key> std::fmt::Debug for Fib<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fib")
            .field("bits", &K::BITS)
            .field("routes", &self.len())
            .field("groups", &self.store.next_group)
            .field("mem_bytes", &self.mem_bytes())
            .finish()
    }
}

impl<K: Key> Fib<K> {
    /// An empty table (256 KiB root plus a small group pool).
    pub fn new() -> Self {
        Self {
            store: Store::new(64),
            prefixes: Prefixes::new(),
        }
    }

    pub(crate) fn table(&self) -> &Arc<Table> {
        &self.store.table
    }

    pub(crate) fn published(&mut self) -> &mut Option<Arc<crate::concurrent::Published>> {
        &mut self.store.published
    }

    /// Add or replace the route `prefix/len -> nh`; host bits of `prefix` are ignored.
    /// Returns the next hop it replaced.
    ///
    /// # Errors
    /// [`FibError::PrefixLength`] if `len` exceeds the address width,
    /// [`FibError::NextHop`] if `nh > MAX_NEXT_HOP`, [`FibError::Capacity`] if the group
    /// pool cannot grow.
    pub fn insert(
        &mut self,
        prefix: K,
        len: u8,
        nh: NextHopId,
    ) -> Result<Option<NextHopId>, FibError> {
        self.prefixes.insert(&mut self.store, prefix, len, nh)
    }

    /// Delete the route `prefix/len` (host bits ignored); returns its next hop. Addresses it
    /// covered fall back to the longest shorter prefix that covers it.
    pub fn remove(&mut self, prefix: K, len: u8) -> Option<NextHopId> {
        self.prefixes.remove(&mut self.store, prefix, len)
    }

    /// The exact route `prefix/len`, if present.
    pub fn get(&self, prefix: K, len: u8) -> Option<NextHopId> {
        self.prefixes.get(prefix, len)
    }

    /// Every route as `(prefix, len, next hop)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (K, u8, NextHopId)> + '_ {
        self.prefixes.iter()
    }

    /// Longest-prefix match for `addr`.
    #[inline]
    pub fn lookup(&self, addr: K) -> Option<NextHopId> {
        self.store.table.lookup(addr)
    }

    /// Look up `addrs[i]` into `out[i]`, 32 addresses at a time, with the loads of a
    /// batch issued together so that their cache misses overlap.
    ///
    /// # Panics
    /// If `addrs` and `out` differ in length.
    pub fn lookup_batch(&self, addrs: &[K], out: &mut [Option<NextHopId>]) {
        assert_eq!(
            addrs.len(),
            out.len(),
            "lookup_batch: addrs and out differ in length"
        );
        for (a, o) in addrs.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
            self.store.table.lookup_chunk(a, o);
        }
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.prefixes.len()
    }

    /// True if the table holds no route.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Bytes of the lookup arrays (root and group pool, allocated capacity).
    pub fn table_bytes(&self) -> usize {
        self.store.table.bytes()
    }

    /// Bytes used in all: lookup arrays plus the route maps kept for updates (estimated
    /// from their capacity).
    pub fn mem_bytes(&self) -> usize {
        self.store.table.bytes() + self.prefixes.bytes()
    }

    /// Groups in use (each 1 KiB).
    pub fn groups_used(&self) -> usize {
        let s = &self.store;
        s.next_group - 1 - s.released.len() - s.free.len()
    }

    /// Rebuild the lookup arrays from the routes into a right-sized table, dropping free
    /// and released groups, and publish it to readers (they switch on their next call).
    /// Useful after mass withdrawals; O(routes).
    ///
    /// # Errors
    /// [`FibError::Capacity`] as for [`Fib::insert`] (never in practice: the table was
    /// already this big).
    pub fn compact(&mut self) -> Result<(), FibError> {
        let levels = 1 + (K::BITS as usize - ROOT_BITS as usize) / K::STRIDE as usize;
        let mut fresh = Store::<K>::new((self.groups_used() + levels).max(64));
        self.prefixes.write_all(&mut fresh)?;
        self.store.next_group = fresh.next_group;
        self.store.released.clear();
        self.store.free.clear();
        self.store.publish(fresh.table);
        Ok(())
    }
}
