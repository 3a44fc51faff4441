//! The trie's update algorithm (controlled prefix expansion with leaf pushing, in-place
//! inserts and deletes) over any storage of its lookup arrays: [`Arrays`].
//!
//! [`crate::Fib`] runs it over its own arrays (a heap [`Table`](crate::trie) that grows by
//! copy and republish); the XDP fast path (`vrhost-fast`) runs it over BPF array maps that
//! user space writes through an mmap, one root per table and one group pool shared by all.
//! Both see the same entries, in the encoding below, written in the same order.
//!
//! Entry encoding (a `u32`; what a reader of the arrays decodes):
//! - `0`: no route;
//! - [`EXT`] set: the low 31 bits are the index of a group (`1 << STRIDE` entries) in the
//!   pool, covering the next `STRIDE` bits of the address;
//! - otherwise a leaf: `(len + 1) << LEN_SHIFT | next_hop` (`len` the prefix length that
//!   wrote it, `next_hop <= MAX_NEXT_HOP`).
//!
//! Publish order: a new group is filled completely before its index is stored (`Release`)
//! in its parent; every entry store replaces a whole entry. A reader loading with `Acquire`
//! (or, in BPF, one plain 32-bit load per entry, the kernel's `READ_ONCE`) sees for each
//! address either the old or the new route.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::trie::{FxHasher, Key, ROOT_BITS};
use crate::{FibError, NextHopId};

/// Entry bit saying "the low bits are a group index".
pub const EXT: u32 = 1 << 31;
/// Leaf entries: `(len + 1) << LEN_SHIFT | next_hop`; 0 means "no route".
pub const LEN_SHIFT: u32 = 23;
/// The largest next-hop id a FIB can hold (23 bits: 8,388,607).
pub const MAX_NEXT_HOP: NextHopId = (1 << LEN_SHIFT) - 1;

#[inline]
pub(crate) const fn leaf(len: u8, nh: NextHopId) -> u32 {
    ((len as u32 + 1) << LEN_SHIFT) | nh
}

/// The prefix length that wrote a leaf entry; `None` for an empty entry.
#[inline]
fn leaf_len(e: u32) -> Option<u8> {
    let l = e >> LEN_SHIFT;
    if l == 0 { None } else { Some((l - 1) as u8) }
}

#[inline]
pub(crate) fn decode(e: u32) -> Option<NextHopId> {
    if e == 0 { None } else { Some(e & MAX_NEXT_HOP) }
}

/// Number of levels for a key type: the root then one per stride.
const fn levels(bits: u8, stride: u32) -> usize {
    1 + (bits as usize - ROOT_BITS as usize) / stride as usize
}

/// Where the algorithm's lookup arrays live: a root of `1 << ROOT_BITS` entries and a pool
/// of groups of `1 << K::STRIDE` entries, and who hands out the pool's groups.
pub trait Arrays {
    /// The root level.
    fn root(&self) -> &[AtomicU32];
    /// The group pool (group `g` is `pool[g << STRIDE ..][.. 1 << STRIDE]`).
    fn pool(&self) -> &[AtomicU32];
    /// Make sure `n` groups can be allocated by [`Arrays::alloc`] (the storage may replace
    /// its arrays to grow: the algorithm reads them anew after this).
    ///
    /// # Errors
    /// [`FibError::Capacity`] when it cannot.
    fn reserve(&mut self, n: usize) -> Result<(), FibError>;
    /// A group no reader can reach, one of those [`Arrays::reserve`] made room for.
    fn alloc(&mut self) -> u32;
    /// Group `g` was unlinked: readers may still be inside it; reusable once none can be.
    fn release(&mut self, g: u32);
}

type RuleMap<K> = HashMap<K, NextHopId, BuildHasherDefault<FxHasher>>;

/// What a range write does to each leaf entry it reaches.
#[derive(Clone, Copy)]
enum Op {
    /// Insert: overwrite leaves of prefixes of length <= `len` with `leaf`.
    Set { len: u8, leaf: u32 },
    /// Delete: overwrite leaves of prefixes of length == `len` with `leaf` (the covering
    /// route, or empty).
    Clear { len: u8, leaf: u32 },
}

/// The routes of one table, the source of truth for its updates, one map per prefix
/// length; [`Prefixes::insert`] and [`Prefixes::remove`] write the change into the
/// table's [`Arrays`].
pub struct Prefixes<K: Key> {
    rules: Vec<RuleMap<K>>,
    len: usize,
}

impl<K: Key> Default for Prefixes<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Key> std::fmt::Debug for Prefixes<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prefixes")
            .field("bits", &K::BITS)
            .field("routes", &self.len)
            .finish()
    }
}

impl<K: Key> Prefixes<K> {
    const LEVELS: usize = levels(K::BITS, K::STRIDE);

    /// No routes.
    pub fn new() -> Self {
        Self {
            rules: (0..=K::BITS).map(|_| RuleMap::default()).collect(),
            len: 0,
        }
    }

    /// Add or replace the route `prefix/len -> nh` (host bits of `prefix` ignored) and
    /// write it into `a`. Returns the next hop it replaced.
    ///
    /// # Errors
    /// [`FibError::PrefixLength`], [`FibError::NextHop`] (`nh > MAX_NEXT_HOP`),
    /// [`FibError::Capacity`] (`a` has no room for the groups it may need); nothing is
    /// changed then.
    pub fn insert<A: Arrays>(
        &mut self,
        a: &mut A,
        prefix: K,
        len: u8,
        nh: NextHopId,
    ) -> Result<Option<NextHopId>, FibError> {
        if len > K::BITS {
            return Err(FibError::PrefixLength { len, max: K::BITS });
        }
        if nh > MAX_NEXT_HOP {
            return Err(FibError::NextHop {
                nh,
                max: MAX_NEXT_HOP,
            });
        }
        let p = prefix.mask(len);
        // At most one new group per level below the root, and none to replace a route:
        // the groups down to its level are there (its entries keep each group on its path
        // from collapsing), so taking back a replace never fails for want of groups.
        if !self.rules[usize::from(len)].contains_key(&p) {
            a.reserve(Self::LEVELS - 1)?;
        }
        let old = self.rules[usize::from(len)].insert(p, nh);
        if old.is_none() {
            self.len += 1;
        }
        if old != Some(nh) {
            write(
                a,
                p,
                Op::Set {
                    len,
                    leaf: leaf(len, nh),
                },
            );
        }
        Ok(old)
    }

    /// Delete the route `prefix/len` (host bits ignored) from the rules and `a`; returns
    /// its next hop. Addresses it covered fall back to the longest shorter prefix that
    /// covers them.
    pub fn remove<A: Arrays>(&mut self, a: &mut A, prefix: K, len: u8) -> Option<NextHopId> {
        if len > K::BITS {
            return None;
        }
        let p = prefix.mask(len);
        let nh = self.rules[usize::from(len)].remove(&p)?;
        self.len -= 1;
        let cover = (0..len)
            .rev()
            .find_map(|l| {
                self.rules[usize::from(l)]
                    .get(&p.mask(l))
                    .map(|&nh| leaf(l, nh))
            })
            .unwrap_or(0);
        write(a, p, Op::Clear { len, leaf: cover });
        Some(nh)
    }

    /// Write every route into `a` (fresh, empty arrays), shortest first so that each
    /// prefix is pushed down once.
    ///
    /// # Errors
    /// [`FibError::Capacity`].
    pub fn write_all<A: Arrays>(&self, a: &mut A) -> Result<(), FibError> {
        for l in 0..=K::BITS {
            for (&p, &nh) in &self.rules[usize::from(l)] {
                a.reserve(Self::LEVELS - 1)?;
                write(
                    a,
                    p,
                    Op::Set {
                        len: l,
                        leaf: leaf(l, nh),
                    },
                );
            }
        }
        Ok(())
    }

    /// The exact route `prefix/len`, if present.
    pub fn get(&self, prefix: K, len: u8) -> Option<NextHopId> {
        self.rules
            .get(usize::from(len))?
            .get(&prefix.mask(len))
            .copied()
    }

    /// Every route as `(prefix, len, next hop)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (K, u8, NextHopId)> + '_ {
        self.rules
            .iter()
            .enumerate()
            .flat_map(|(l, m)| m.iter().map(move |(&p, &nh)| (p, l as u8, nh)))
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if there is no route.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the rule maps (estimated from their capacity).
    pub fn bytes(&self) -> usize {
        let per = std::mem::size_of::<K>() + std::mem::size_of::<NextHopId>() + 1;
        self.rules.iter().map(|m| m.capacity() * per).sum()
    }
}

/// A slot: (in the root, index).
type Slot = (bool, usize);

#[inline]
fn entry<A: Arrays>(a: &A, (root, i): Slot) -> &AtomicU32 {
    if root { &a.root()[i] } else { &a.pool()[i] }
}

/// Index into root (group None) or pool.
#[inline]
fn slot<K: Key>(group: Option<usize>, i: usize) -> Slot {
    match group {
        None => (true, i),
        Some(g) => (false, (g << K::STRIDE) | i),
    }
}

fn alloc_group<K: Key, A: Arrays>(a: &mut A, fill: u32) -> u32 {
    let g = a.alloc();
    let base = (g as usize) << K::STRIDE;
    // Relaxed: the group is unreachable until the Release store of its pointer.
    for e in &a.pool()[base..base + (1 << K::STRIDE)] {
        e.store(fill, Ordering::Relaxed);
    }
    g
}

/// Apply `op` to every entry covered by the masked prefix `p` of `op`'s length.
fn write<K: Key, A: Arrays>(a: &mut A, p: K, op: Op) {
    let len = match op {
        Op::Set { len, .. } | Op::Clear { len, .. } => u32::from(len),
    };
    let mut group: Option<usize> = None;
    let mut start = 0;
    // (parent entry, group base) of each group walked through, for collapsing.
    let mut path: [(Slot, usize, u32); 32] = [((true, 0), 0, 0); 32];
    let mut depth = 0;
    loop {
        let width = if group.is_none() {
            ROOT_BITS
        } else {
            K::STRIDE
        };
        let end = start + width;
        let idx = p.chunk(start, width);
        if len <= end {
            let count = 1usize << (end - len);
            for i in idx..idx + count {
                apply::<K, A>(a, slot::<K>(group, i), op, end);
            }
            if let Op::Clear { .. } = op {
                for &(parent, base, bits) in path[..depth].iter().rev() {
                    if !maybe_collapse::<K, A>(a, parent, base, bits) {
                        break;
                    }
                }
            }
            return;
        }
        let s = slot::<K>(group, idx);
        let e = entry(a, s).load(Ordering::Relaxed);
        if e & EXT != 0 {
            group = Some((e & !EXT) as usize);
        } else {
            // (the group created below is recorded in `path` after this match)
            match op {
                Op::Set { .. } => {
                    // Push the current leaf down into a new group, then link it.
                    let g = alloc_group::<K, A>(a, e);
                    // Release: pairs with readers' Acquire load of this entry; makes the
                    // group's fill visible before the pointer.
                    entry(a, s).store(EXT | g, Ordering::Release);
                    group = Some(g as usize);
                }
                // Nothing below: the prefix has no entries of its own here.
                Op::Clear { .. } => return,
            }
        }
        if let Some(g) = group
            && depth < path.len()
        {
            path[depth] = (s, g << K::STRIDE, end);
            depth += 1;
        }
        start = end;
    }
}

/// `child_bits`: where the group below `slot`, if any, starts (the end of `slot`'s level).
fn apply<K: Key, A: Arrays>(a: &mut A, s: Slot, op: Op, child_bits: u32) {
    let e = entry(a, s).load(Ordering::Relaxed);
    if e & EXT != 0 {
        let base = ((e & !EXT) as usize) << K::STRIDE;
        for i in base..base + (1 << K::STRIDE) {
            apply::<K, A>(a, (false, i), op, child_bits + K::STRIDE);
        }
        if let Op::Clear { .. } = op {
            maybe_collapse::<K, A>(a, s, base, child_bits);
        }
        return;
    }
    let l = leaf_len(e);
    let write = match op {
        Op::Set { len, .. } => l.is_none_or(|l| l <= len),
        Op::Clear { len, .. } => l == Some(len),
    };
    if write {
        let v = match op {
            Op::Set { leaf, .. } | Op::Clear { leaf, .. } => leaf,
        };
        // Release: pairs with readers' Acquire; a whole entry is replaced at once.
        entry(a, s).store(v, Ordering::Release);
    }
}

/// After a delete: if a group holds one leaf value everywhere, and that leaf is of a
/// prefix covering the whole group (length <= `group_bits`, where the group starts),
/// put the leaf back in the parent and release the group. (A uniform group of longer
/// prefixes, e.g. 256 sibling /24s with one next hop, must stay: each of them can be
/// deleted alone later.)
fn maybe_collapse<K: Key, A: Arrays>(
    a: &mut A,
    parent: Slot,
    base: usize,
    group_bits: u32,
) -> bool {
    let pool = &a.pool()[base..base + (1 << K::STRIDE)];
    let first = pool[0].load(Ordering::Relaxed);
    if first & EXT != 0
        || leaf_len(first).is_some_and(|l| u32::from(l) > group_bits)
        || pool.iter().any(|e| e.load(Ordering::Relaxed) != first)
    {
        return false;
    }
    // Release: pairs with readers' Acquire; readers already inside the group still read
    // the same value there, since the group is not reused before they are out of it.
    entry(a, parent).store(first, Ordering::Release);
    a.release((base >> K::STRIDE) as u32);
    true
}
