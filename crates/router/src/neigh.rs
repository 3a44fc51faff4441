//! The neighbour table: IPv4 address on a vNIC -> MAC address, learned by
//! ARP (RFC 826) or configured, and the pending buffers of packets waiting
//! for a neighbour to be resolved. The IPv6 neighbour cache (RFC 4861) is
//! the same structure keyed by `u128` ([`NeighAddr`]): a sibling table,
//! with its own entries and pending buffers, driven by the same states.
//!
//! Fixed capacity, allocated once: an open-addressed table of
//! `capacity` entries (a power of two), where a key lives within [`WINDOW`]
//! slots of its hash. Entries are never removed, only reused in place: an
//! insert into a full window evicts the least useful entry of the window
//! (failed first, then the longest unconfirmed), never a static entry nor a
//! gateway's (pinned: routes point at their slot), so a lookup stops at
//! the first never-used slot. Pins are counted (one per route by `via`,
//! one per static entry or next hop of the original form): a gateway
//! whose last route is deleted becomes an ordinary entry again, kept until
//! it is evicted. Pending buffers are a pool of `pending`
//! buffers of [`PENDING_BYTES`]; an entry holds at most one (Linux's
//! `unres_qlen`, here 1), so a pool smaller than the table bounds the
//! memory that unresolved neighbours can take.

use vrhost_sdk::Packet;

/// Slots a key may be placed away from its hash.
pub(super) const WINDOW: usize = 8;
/// Largest packet a pending buffer holds (a default slot).
pub(super) const PENDING_BYTES: usize = 2048;
/// No pending buffer.
pub(super) const NONE: u16 = u16::MAX;

/// An address the table is keyed by: IPv4 (`u32`) or IPv6 (`u128`).
pub(super) trait NeighAddr: Copy + Eq + core::fmt::Debug {
    /// The key of an unused entry.
    const ZERO: Self;
    /// The address and vNIC folded into 64 bits, for the hash.
    fn key(self, vnic: u16) -> u64;
}

impl NeighAddr for u32 {
    const ZERO: Self = 0;
    #[inline]
    fn key(self, vnic: u16) -> u64 {
        u64::from(self) | (u64::from(vnic) << 32)
    }
}

impl NeighAddr for u128 {
    const ZERO: Self = 0;
    #[inline]
    fn key(self, vnic: u16) -> u64 {
        // Interface identifiers vary in the low half; the high half (the
        // prefix) and the vNIC are mixed in so that equal suffixes on two
        // links do not collide.
        (self as u64) ^ ((self >> 64) as u64).rotate_left(29) ^ (u64::from(vnic) << 48)
    }
}

/// Resolution state of a neighbour (a subset of Linux's NUD states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Never used: ends a lookup.
    Unused,
    /// Known address, no MAC yet, nothing sent (a gateway before its first
    /// packet, or a slot just taken by an insert).
    Empty,
    /// Requests sent, no answer yet; packets wait in the pending buffer.
    Incomplete,
    /// MAC confirmed at `since`; used until `reachable_ms` later.
    Reachable,
    /// Reachable time over: a request went out, packets still go to the
    /// old MAC meanwhile (Linux's STALE, DELAY and PROBE in one).
    Probe,
    /// No answer to the last requests: ICMP host unreachable until
    /// `failed_ms` after `since`.
    Failed,
    /// Configured: never ages, never changed by ARP.
    Static,
}

/// One neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Neigh<A = u32> {
    pub ip: A,
    pub vnic: u16,
    pub state: State,
    /// Routes, next hops and static entries that need the entry in its
    /// slot: while above 0, never evicted.
    pub pins: u32,
    /// Requests sent in this resolution.
    pub probes: u8,
    pub mac: [u8; 6],
    /// Milliseconds: confirmed (Reachable), last request (Incomplete,
    /// Probe), given up (Failed).
    pub since: u64,
    /// Index of its pending buffer, or [`NONE`].
    pub pending: u16,
}

impl<A: NeighAddr> Neigh<A> {
    const UNUSED: Neigh<A> = Neigh {
        ip: A::ZERO,
        vnic: 0,
        state: State::Unused,
        pins: 0,
        probes: 0,
        mac: [0; 6],
        since: 0,
        pending: NONE,
    };

    /// Whether the entry has a MAC address frames may be sent to.
    pub fn has_mac(&self) -> bool {
        matches!(self.state, State::Reachable | State::Probe | State::Static)
    }
}

/// What [`NeighTable::release_into`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Release {
    /// The packet is in the slot, to go out of this vNIC.
    Out(u16),
    /// No packet was waiting.
    NoneWaiting,
    /// The slot could not hold the waiting packet: it was discarded.
    Discarded,
}

/// The table and its pending buffers.
#[derive(Debug)]
pub(super) struct NeighTable<A = u32> {
    entries: Vec<Neigh<A>>,
    mask: usize,
    bufs: Vec<u8>,
    lens: Vec<u16>,
    free: Vec<u16>,
}

impl<A: NeighAddr> NeighTable<A> {
    /// A table of at least `capacity` entries (rounded up to a power of
    /// two, at least [`WINDOW`]) and `pending` buffers (at most 65,535).
    pub fn new(capacity: usize, pending: usize) -> Self {
        let n = capacity.max(WINDOW).next_power_of_two();
        let pending = pending.min(usize::from(NONE));
        Self {
            entries: vec![Neigh::UNUSED; n],
            mask: n - 1,
            bufs: vec![0; pending * PENDING_BYTES],
            lens: vec![0; pending],
            // Popped from the back: buffer 0 first.
            free: (0..pending as u16).rev().collect(),
        }
    }

    /// The entries in use.
    pub fn iter(&self) -> impl Iterator<Item = &Neigh<A>> {
        self.entries.iter().filter(|e| e.state != State::Unused)
    }

    /// Entries the table holds.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    #[inline]
    fn home(&self, ip: A, vnic: u16) -> usize {
        // Fibonacci hashing of address and vNIC; the high bits are the best.
        let k = ip.key(vnic);
        (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize & self.mask
    }

    /// The slot of `(ip, vnic)`, if present.
    #[inline]
    pub fn find(&self, ip: A, vnic: u16) -> Option<usize> {
        let h = self.home(ip, vnic);
        for k in 0..WINDOW {
            let i = (h + k) & self.mask;
            let e = &self.entries[i];
            if e.state == State::Unused {
                return None;
            }
            if e.ip == ip && e.vnic == vnic {
                return Some(i);
            }
        }
        None
    }

    /// The slot of `(ip, vnic)`, taken (state [`State::Empty`]) if absent,
    /// evicting the least useful entry of its window if it is full;
    /// `None` if every entry there is pinned or waiting with a packet.
    /// Returns also the number of packets discarded from an evicted
    /// entry's pending buffer (0 or 1).
    pub fn insert(&mut self, ip: A, vnic: u16) -> Option<(usize, u64)> {
        let h = self.home(ip, vnic);
        let mut victim: Option<(usize, u8, u64)> = None;
        for k in 0..WINDOW {
            let i = (h + k) & self.mask;
            let e = self.entries[i];
            if e.state == State::Unused {
                victim = Some((i, 0, 0));
                break;
            }
            if e.ip == ip && e.vnic == vnic {
                return Some((i, 0));
            }
            if e.pins > 0 {
                continue;
            }
            // Lower rank goes first; within a rank, the oldest.
            let rank = match e.state {
                State::Failed | State::Empty => 1,
                State::Reachable | State::Probe => 2,
                State::Incomplete => 3,
                State::Unused | State::Static => continue,
            };
            if victim.is_none_or(|(_, r, s)| (rank, e.since) < (r, s)) {
                victim = Some((i, rank, e.since));
            }
        }
        let (i, _, _) = victim?;
        let discarded = u64::from(self.drop_pending(i));
        self.entries[i] = Neigh {
            ip,
            vnic,
            state: State::Empty,
            ..Neigh::UNUSED
        };
        Some((i, discarded))
    }

    /// The entry in slot `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &Neigh<A> {
        &self.entries[i]
    }

    /// The MAC of entry `i`, if frames may be sent to it.
    pub fn known_mac(&self, i: usize) -> Option<[u8; 6]> {
        let e = self.get(i);
        e.has_mac().then_some(e.mac)
    }

    /// The MAC of `(ip, vnic)`, if present and frames may be sent to it.
    pub fn known_mac_of(&self, ip: A, vnic: u16) -> Option<[u8; 6]> {
        self.find(ip, vnic).and_then(|i| self.known_mac(i))
    }

    /// The entry in slot `i`, mutable.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> &mut Neigh<A> {
        &mut self.entries[i]
    }

    /// Pin `(ip, vnic)` once more (a gateway: never evicted while pinned);
    /// its slot, or `None` if its window is full of pinned entries.
    pub fn pin(&mut self, ip: A, vnic: u16) -> Option<usize> {
        let (i, _) = self.insert(ip, vnic)?;
        let e = &mut self.entries[i];
        e.pins = e.pins.saturating_add(1);
        Some(i)
    }

    /// Take back one pin of slot `i` (a route by `via` deleted). At 0
    /// pins the entry stays, state and MAC kept, and may be evicted.
    pub fn unpin(&mut self, i: usize) {
        let e = &mut self.entries[i];
        debug_assert!(e.pins > 0, "unpin of an unpinned entry");
        e.pins = e.pins.saturating_sub(1);
    }

    /// Entries in use.
    pub fn used(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.state != State::Unused)
            .count()
    }

    /// Make `(ip, vnic)` a static neighbour at `mac`.
    pub fn set_static(&mut self, ip: A, vnic: u16, mac: [u8; 6]) -> Option<usize> {
        let i = self.pin(ip, vnic)?;
        let e = &mut self.entries[i];
        e.state = State::Static;
        e.mac = mac;
        Some(i)
    }

    /// Copy `pkt` into a pending buffer of entry `i`, which must have none;
    /// false (nothing copied) if none is free or `pkt` is too long.
    pub fn park(&mut self, i: usize, pkt: &[u8]) -> bool {
        debug_assert_eq!(self.entries[i].pending, NONE);
        if pkt.len() > PENDING_BYTES {
            return false;
        }
        let Some(b) = self.free.pop() else {
            return false;
        };
        let at = usize::from(b) * PENDING_BYTES;
        self.bufs[at..at + pkt.len()].copy_from_slice(pkt);
        self.lens[usize::from(b)] = pkt.len() as u16;
        self.entries[i].pending = b;
        true
    }

    /// Whether a pending buffer is free.
    pub fn can_park(&self, len: usize) -> bool {
        len <= PENDING_BYTES && !self.free.is_empty()
    }

    /// The packet waiting in entry `i`'s pending buffer.
    pub fn pending(&self, i: usize) -> Option<&[u8]> {
        let b = self.entries[i].pending;
        (b != NONE).then(|| {
            let at = usize::from(b) * PENDING_BYTES;
            &self.bufs[at..at + usize::from(self.lens[usize::from(b)])]
        })
    }

    /// Move the packet waiting for entry `i` (now resolved) into `pkt`'s
    /// slot, where the frame that resolved it was or else from the slot's
    /// start, addressed from `src` to the entry's MAC. The buffer is free
    /// after, whatever the outcome.
    pub fn release_into(&mut self, i: usize, pkt: &mut Packet<'_>, src: [u8; 6]) -> Release {
        let e = self.entries[i];
        let Some(waiting) = self.pending(i) else {
            return Release::NoneWaiting;
        };
        let len = waiting.len();
        let off = pkt.offset();
        if !pkt.set_extent(off, len) && !pkt.set_extent(0, len) {
            self.drop_pending(i);
            return Release::Discarded;
        }
        let d = pkt.data_mut();
        d.copy_from_slice(waiting);
        d[0..6].copy_from_slice(&e.mac);
        d[6..12].copy_from_slice(&src);
        self.drop_pending(i);
        Release::Out(e.vnic)
    }

    /// Free entry `i`'s pending buffer; true if it held a packet.
    pub fn drop_pending(&mut self, i: usize) -> bool {
        let b = std::mem::replace(&mut self.entries[i].pending, NONE);
        if b == NONE {
            return false;
        }
        self.free.push(b);
        true
    }

    /// Pending buffers free.
    #[cfg(test)]
    pub fn free_buffers(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_evict() {
        let mut t = NeighTable::<u32>::new(8, 2);
        assert_eq!(t.capacity(), 8);
        let (a, _) = t.insert(1, 0).unwrap();
        assert_eq!(t.insert(1, 0), Some((a, 0)));
        assert_eq!(t.find(1, 0), Some(a));
        assert_eq!(t.find(1, 1), None);
        // Fill the table: every window is the whole table.
        let mut slots = vec![a];
        for ip in 2..=8 {
            slots.push(t.insert(ip, 0).unwrap().0);
        }
        slots.sort();
        slots.dedup();
        assert_eq!(slots.len(), 8);
        for (ip, since) in (1..=8).zip([50, 10, 60, 70, 80, 90, 95, 99]) {
            let i = t.find(ip, 0).unwrap();
            let e = t.get_mut(i);
            e.state = State::Reachable;
            e.since = since;
        }
        // The oldest Reachable (ip 2) goes, unless a Failed one exists.
        let f = t.find(7, 0).unwrap();
        t.get_mut(f).state = State::Failed;
        let (i, _) = t.insert(100, 0).unwrap();
        assert_eq!(i, f);
        assert_eq!(t.find(7, 0), None);
        assert_eq!(t.get(i).state, State::Empty);
        t.get_mut(i).state = State::Reachable;
        t.get_mut(i).since = 100;
        let two = t.find(2, 0).unwrap();
        assert_eq!(t.insert(101, 0).unwrap().0, two);
        // Pinned and static entries stay; a parked packet is discarded.
        for ip in [1, 3, 4, 5] {
            let i = t.find(ip, 0).unwrap();
            t.get_mut(i).pins = 1;
        }
        let six = t.find(6, 0).unwrap();
        assert!(t.park(six, &[1, 2, 3]));
        for ip in [8, 100, 101] {
            let i = t.find(ip, 0).unwrap();
            t.get_mut(i).state = State::Incomplete;
            t.get_mut(i).since = 1000;
        }
        let (i, discarded) = t.insert(102, 0).unwrap();
        assert_eq!((i, discarded), (six, 1));
        assert_eq!(t.free_buffers(), 2);
    }

    #[test]
    fn full_of_pinned() {
        let mut t = NeighTable::<u32>::new(8, 0);
        for ip in 0..8 {
            t.set_static(ip, 1, [2, 0, 0, 0, 0, ip as u8]).unwrap();
        }
        assert_eq!(t.insert(9, 1), None);
        assert_eq!(t.pin(10, 1), None);
        let i = t.find(3, 1).unwrap();
        assert_eq!(t.get(i).state, State::Static);
        assert_eq!(t.get(i).mac[5], 3);
    }

    #[test]
    fn pins_are_counted() {
        let mut t = NeighTable::<u32>::new(8, 0);
        let g = t.pin(1, 0).unwrap();
        assert_eq!(t.pin(1, 0), Some(g));
        for ip in 2..=8 {
            t.pin(ip, 0).unwrap();
        }
        assert_eq!(t.insert(9, 0), None, "all pinned");
        t.unpin(g);
        assert_eq!(t.insert(9, 0), None, "still one pin");
        assert_eq!(t.used(), 8);
        t.unpin(g);
        let (i, _) = t.insert(9, 0).unwrap();
        assert_eq!(i, g, "an ordinary entry again: evicted");
        assert_eq!(t.find(1, 0), None);
    }

    #[test]
    fn pending_pool() {
        let mut t = NeighTable::<u32>::new(16, 1);
        let (a, _) = t.insert(1, 0).unwrap();
        let (b, _) = t.insert(2, 0).unwrap();
        assert!(!t.park(a, &[0; PENDING_BYTES + 1]));
        assert!(t.can_park(60));
        assert!(t.park(a, &[7; 60]));
        assert!(!t.can_park(60));
        assert!(!t.park(b, &[8; 60]));
        assert_eq!(t.pending(a), Some(&[7u8; 60][..]));
        assert_eq!(t.pending(b), None);
        assert!(t.drop_pending(a));
        assert!(!t.drop_pending(a));
        assert!(t.park(b, &[8; 42]));
        assert_eq!(t.pending(b).unwrap().len(), 42);
    }
}
