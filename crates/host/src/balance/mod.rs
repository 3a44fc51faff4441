//! Which instance of a VR gets a frame: the balancing policy.
//!
//! A VR runs 1..=64 instance processes; the worker copies each frame into
//! the VR's pool and hands it to one of them. This module owns that choice
//! ([`Balancer::pick`]) and the flow hash it is fed ([`flow_hash`],
//! [`flow_key_hash`]). It does not own which instances exist or are up (the
//! VR path tells it through [`Balancer::set_active`]), how an instance's
//! capacity is measured ([`Balancer::set_capacity`] is told), or the
//! backlog counts [`Balancer::pick`] reads.
//!
//! PdP (Liao, Yin, Gao: *PdP: Parallelizing Data Plane in Virtual Network
//! Substrate*, VISA '09, section 4.5) shares a virtual network's packets
//! among its forwarding engines round robin or in proportion to their CPU,
//! and measured the cost: 10-13 % of a TCP flow's packets out of order
//! (12.3 % round robin, 10.0 % proportional, on unequal engines), which TCP
//! can take for loss. Sharing by flow is the fix it names as future work;
//! here it is [`Policy::Flow`], the default, through an indirection table
//! as NICs do for receive side scaling, rebalanced with as few moves as
//! possible. The other policies reorder within a flow and are for VRs that
//! want even load more than order.
//!
//! Hot path: [`Balancer::pick`] allocates nothing, takes no lock, makes no
//! syscall and divides by nothing; every policy but
//! [`Policy::ShortestQueue`] (a branch-free scan of the VR's slots) is one
//! table or array read. The tables are rebuilt on the control path, in
//! [`Balancer::set_active`] and [`Balancer::set_capacity`], which allocate
//! nothing either (a few microseconds at most).
//!
//! Capacity limits: 64 instance slots ([`MAX_SLOTS`]), [`FLOW_BUCKETS`]
//! flow buckets (so with `n` instances each holds 1024/n buckets, rounded
//! either way), a weighted schedule of [`SCHEDULE_LEN`] entries (so shares
//! are exact to 1/1024, and every active instance gets at least one entry).

#![forbid(unsafe_code)]

use std::fmt;
use std::str::FromStr;

mod hash;
#[cfg(test)]
mod tests;

pub use hash::{flow_hash, flow_key_hash};

use hash::folded_mul;

/// Most instance slots a VR has (the region layout's limit).
pub const MAX_SLOTS: u16 = vrhost_shm::layout::MAX_INSTANCES;

/// Buckets of the flow policy's indirection table (a power of two).
pub const FLOW_BUCKETS: usize = 1024;

/// Entries of the weighted policy's schedule (a power of two).
pub const SCHEDULE_LEN: usize = 1024;

const _: () = assert!(FLOW_BUCKETS.is_power_of_two() && SCHEDULE_LEN.is_power_of_two());
// The active set is a `u64` mask, and every instance gets a schedule entry.
const _: () = assert!(MAX_SLOTS <= 64);

/// `log2(FLOW_BUCKETS)`: a bucket is the top bits of the remixed hash.
const BUCKET_BITS: u32 = FLOW_BUCKETS.trailing_zeros();

/// Backlogs from here up count as equal for shortest queue (far more
/// frames than a VR's pool holds); below `2^26 - 1` so that an active
/// slot's key stays below an inactive one's.
pub const JSQ_BACKLOG_CAP: u32 = (1 << 26) - 2;

/// Owner of a flow bucket no instance has held yet.
const UNOWNED: u8 = u8::MAX;

/// How a VR's frames are shared among its instances.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// By flow hash through a table of [`FLOW_BUCKETS`] buckets: a flow
    /// stays on one instance (in order) while the active set is unchanged,
    /// and a change moves as few buckets as balance allows.
    #[default]
    Flow,
    /// In turn over the active instances.
    #[serde(alias = "rr")]
    RoundRobin,
    /// Uniformly at random (a wyrand generator in the balancer).
    Random,
    /// Join the shortest queue: the active instance with the smallest
    /// backlog; ties go round robin.
    #[serde(alias = "jsq")]
    ShortestQueue,
    /// In proportion to each instance's measured capacity, through an
    /// interleaved schedule of [`SCHEDULE_LEN`] entries.
    Weighted,
}

impl Policy {
    /// Every policy, in declaration order.
    pub const ALL: [Policy; 5] = [
        Policy::Flow,
        Policy::RoundRobin,
        Policy::Random,
        Policy::ShortestQueue,
        Policy::Weighted,
    ];

    /// Short name: `flow`, `rr`, `random`, `jsq` or `weighted`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Flow => "flow",
            Policy::RoundRobin => "rr",
            Policy::Random => "random",
            Policy::ShortestQueue => "jsq",
            Policy::Weighted => "weighted",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name [`Policy::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown balancing policy {name:?} (expected flow, rr, random, jsq or weighted)")]
pub struct UnknownPolicy {
    /// The name given.
    pub name: String,
}

impl FromStr for Policy {
    type Err = UnknownPolicy;

    /// A short name ([`Policy::name`]) or the serde name (`round_robin`,
    /// `shortest_queue`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "flow" => Policy::Flow,
            "rr" | "round_robin" => Policy::RoundRobin,
            "random" => Policy::Random,
            "jsq" | "shortest_queue" => Policy::ShortestQueue,
            "weighted" => Policy::Weighted,
            _ => return Err(UnknownPolicy { name: s.to_owned() }),
        })
    }
}

/// Picks the instance of one VR that gets each frame.
///
/// One per VR, owned by the worker thread that feeds the VR (it is not
/// shared, so `pick` takes `&mut self` and touches no atomic). All five
/// policies' state is kept current whatever the policy, so
/// [`Balancer::set_policy`] is free and switching to `Flow` and back keeps
/// flows where they were.
#[derive(Clone)]
pub struct Balancer {
    policy: Policy,
    /// Active instances: `active[..len]`, ascending.
    len: u8,
    /// Round robin's next index into `active` (< `len` when `len > 0`).
    cursor: u8,
    /// The slot where shortest queue's tie-break starts.
    jsq_next: u8,
    active: [u16; MAX_SLOTS as usize],
    /// Per slot: 0 if active, `u32::MAX` if not (or-ed into the backlog).
    inactive: [u32; MAX_SLOTS as usize],
    /// Next index into `schedule` (wraps).
    sched_pos: u32,
    /// wyrand state.
    rng: u64,
    slots: u16,
    /// Flow bucket -> instance slot (or [`UNOWNED`]).
    table: Box<[u8; FLOW_BUCKETS]>,
    /// Buckets each slot holds in `table`.
    buckets: [u16; MAX_SLOTS as usize],
    /// Weighted schedule: position -> instance slot.
    schedule: Box<[u8; SCHEDULE_LEN]>,
    /// Measured capacity per slot (frames/s); 0 = not known.
    capacity: [f64; MAX_SLOTS as usize],
}

impl fmt::Debug for Balancer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Balancer")
            .field("policy", &self.policy)
            .field("slots", &self.slots)
            .field("active", &self.active())
            .finish_non_exhaustive()
    }
}

impl Balancer {
    /// A balancer for a VR of `slots` instance slots, with none active yet
    /// (so [`Balancer::pick`] returns `None` until [`Balancer::set_active`]).
    ///
    /// # Panics
    /// If `slots` is 0 or more than [`MAX_SLOTS`] (the region config
    /// refuses such a VR before it gets here).
    pub fn new(policy: Policy, slots: u16) -> Self {
        assert!(
            (1..=MAX_SLOTS).contains(&slots),
            "instance slots {slots} not in 1..={MAX_SLOTS}"
        );
        Balancer {
            policy,
            len: 0,
            cursor: 0,
            jsq_next: 0,
            active: [0; MAX_SLOTS as usize],
            inactive: [u32::MAX; MAX_SLOTS as usize],
            sched_pos: 0,
            rng: 0x9E37_79B9_7F4A_7C15 ^ u64::from(slots),
            slots,
            table: Box::new([UNOWNED; FLOW_BUCKETS]),
            buckets: [0; MAX_SLOTS as usize],
            schedule: Box::new([0; SCHEDULE_LEN]),
            capacity: [0.0; MAX_SLOTS as usize],
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Change the policy; takes effect at the next pick.
    pub fn set_policy(&mut self, p: Policy) {
        self.policy = p;
    }

    /// Instance slots of the VR.
    pub fn slots(&self) -> u16 {
        self.slots
    }

    /// Set the instances that are fed from now on. Order and duplicates do
    /// not matter; slots `>= slots` are ignored. An empty set makes
    /// [`Balancer::pick`] return `None` and leaves the flow table as it
    /// was, so flows return to where they were when instances come back.
    ///
    /// The flow table is rehashed consistently: every active instance ends
    /// with `1024/n` buckets rounded down or up, and a bucket moves only
    /// from an instance that is gone or has too many to one that has too
    /// few. Adding one instance to `n` moves `floor(1024/(n+1))` buckets,
    /// all to the new one; removing one moves only its buckets.
    pub fn set_active(&mut self, active: &[u16]) {
        let mut mask = 0u64;
        for &a in active {
            if a < self.slots {
                mask |= 1 << a;
            }
        }
        let mut len = 0;
        let mut rest = mask;
        while rest != 0 {
            self.active[len] = rest.trailing_zeros() as u16;
            len += 1;
            rest &= rest - 1;
        }
        self.len = len as u8;
        for (i, off) in self.inactive.iter_mut().enumerate() {
            *off = if mask >> i & 1 == 1 { 0 } else { u32::MAX };
        }
        if usize::from(self.cursor) >= len {
            self.cursor = 0;
        }
        if len > 0 {
            self.rehash();
            self.rebuild_schedule();
        }
    }

    /// The instances fed now: ascending, unique, each `< slots`.
    pub fn active(&self) -> &[u16] {
        &self.active[..usize::from(self.len)]
    }

    /// Record the measured capacity (frames/s) of `instance` for the
    /// weighted policy. Ignored unless `pps` is finite and positive and
    /// `instance < slots`. Active instances whose capacity is not known yet
    /// count as the mean of those known (all equal when none is).
    pub fn set_capacity(&mut self, instance: u16, pps: f64) {
        if instance >= self.slots || !pps.is_finite() || pps <= 0.0 {
            return;
        }
        self.capacity[usize::from(instance)] = pps;
        if self.inactive[usize::from(instance)] == 0 {
            self.rebuild_schedule();
        }
    }

    /// The instance for a frame whose flow hash is `hash` (from
    /// [`flow_hash`] or [`flow_key_hash`]); `backlog[i]` is the number of
    /// frames instance slot `i` holds now (only [`Policy::ShortestQueue`]
    /// reads it; a missing entry counts as full). `None` when no instance
    /// is active.
    ///
    /// Shortest queue reads the backlog as given: if it is updated once per
    /// batch rather than per frame, a whole batch goes to one instance.
    #[inline]
    pub fn pick(&mut self, hash: u32, backlog: &[u32]) -> Option<u16> {
        self.pick_with(|| hash, backlog)
    }

    /// [`Balancer::pick`] with the flow hash computed only if the policy
    /// needs it (only [`Policy::Flow`] does), so the other policies do not
    /// pay for reading the frame's headers.
    #[inline]
    pub fn pick_with(&mut self, hash: impl FnOnce() -> u32, backlog: &[u32]) -> Option<u16> {
        let n = usize::from(self.len);
        if n == 0 {
            return None;
        }
        Some(match self.policy {
            Policy::Flow => u16::from(self.table[bucket(hash())]),
            Policy::RoundRobin => {
                let i = usize::from(self.cursor);
                self.cursor = if i + 1 >= n { 0 } else { i as u8 + 1 };
                // `% 64` only spares a bounds check: i < n <= 64.
                self.active[i % MAX_SLOTS as usize]
            }
            Policy::Random => {
                // Lemire's multiply-shift: uniform in 0..n without a division.
                let r = (self.next_random() >> 32) * n as u64;
                self.active[(r >> 32) as usize % MAX_SLOTS as usize]
            }
            Policy::ShortestQueue => self.shortest(backlog),
            Policy::Weighted => {
                let i = self.sched_pos;
                self.sched_pos = i.wrapping_add(1);
                u16::from(self.schedule[i as usize % SCHEDULE_LEN])
            }
        })
    }

    /// The active instance with the smallest backlog; among equals, the
    /// first at or after `jsq_next` (in slot order, wrapping), which then
    /// moves past the one chosen, so equals take turns.
    #[inline]
    fn shortest(&mut self, backlog: &[u32]) -> u16 {
        let slots = usize::from(self.slots);
        match backlog.get(..slots) {
            Some(b) => self.shortest_of(b),
            None => self.shortest_of_short(backlog),
        }
    }

    /// [`Balancer::shortest`] for a backlog shorter than `slots`: the
    /// missing entries count as full.
    #[cold]
    fn shortest_of_short(&mut self, backlog: &[u32]) -> u16 {
        let slots = usize::from(self.slots);
        let mut padded = [u32::MAX; MAX_SLOTS as usize];
        let n = backlog.len().min(slots);
        padded[..n].copy_from_slice(&backlog[..n]);
        self.shortest_of(&padded[..slots])
    }

    /// [`Balancer::shortest`] over a backlog of one entry per slot.
    ///
    /// One branch-free `min` over a `u32` key per slot: the backlog
    /// (saturated at [`JSQ_BACKLOG_CAP`]) above six bits of rank in the
    /// rotated slot order; an inactive slot's key is `u32::MAX`, which no
    /// active one reaches. It runs over all slots, not the active list, so
    /// that it vectorizes; about 0.5 ns a slot on baseline x86-64, 0.1 with
    /// AVX2.
    #[inline]
    fn shortest_of(&mut self, backlog: &[u32]) -> u16 {
        let start = u32::from(self.jsq_next);
        let mut best = u32::MAX;
        for (i, (&b, &off)) in backlog.iter().zip(&self.inactive).enumerate() {
            let rank = (i as u32).wrapping_sub(start) % 64;
            best = best.min(b.min(JSQ_BACKLOG_CAP) << 6 | rank | off);
        }
        let at = ((best & 63) + start) % 64;
        self.jsq_next = ((at + 1) % 64) as u8;
        at as u16
    }

    /// wyrand (Wang Yi): one multiply per number, passes BigCrush/PractRand.
    #[inline(always)]
    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0xA076_1D64_78BD_642F);
        folded_mul(self.rng, self.rng ^ 0xE703_7ED1_A0B4_28DB)
    }

    /// Give every active instance its share of the flow table, moving as
    /// few buckets as that allows (see [`Balancer::set_active`]).
    fn rehash(&mut self) {
        let n = usize::from(self.len);
        let quota = (FLOW_BUCKETS / n) as u16;
        let extra = FLOW_BUCKETS % n;
        // The `extra` instances that hold the most buckets keep one more,
        // so none of them gives up a bucket only to take another.
        let mut order = [0u8; MAX_SLOTS as usize];
        for (o, &a) in order.iter_mut().zip(self.active()) {
            *o = a as u8;
        }
        let order = &mut order[..n];
        order.sort_unstable_by_key(|&i| (std::cmp::Reverse(self.buckets[usize::from(i)]), i));
        let mut target = [0u16; MAX_SLOTS as usize];
        for (k, &i) in order.iter().enumerate() {
            target[usize::from(i)] = quota + u16::from(k < extra);
        }
        // One pass: a bucket whose owner is gone (target 0) or over its
        // target goes to the next instance under its target. What is freed
        // equals what is missing (both sum to FLOW_BUCKETS), so the
        // receiver always exists.
        let mut to = 0;
        for b in self.table.iter_mut() {
            let owner = usize::from(*b);
            let keep = owner != usize::from(UNOWNED) && self.buckets[owner] <= target[owner];
            if keep {
                continue;
            }
            if owner != usize::from(UNOWNED) {
                self.buckets[owner] -= 1;
            }
            let short = |a: u16| self.buckets[usize::from(a)] < target[usize::from(a)];
            while to + 1 < n && !short(self.active[to]) {
                to += 1;
            }
            debug_assert!(
                short(self.active[to]),
                "freed buckets outnumber missing ones"
            );
            let a = self.active[to];
            *b = a as u8;
            self.buckets[usize::from(a)] += 1;
        }
    }

    /// Rebuild the weighted schedule from the capacities of the active
    /// instances: each gets entries in proportion (largest remainder, at
    /// least one), laid out in bit-reversed order so that any run of
    /// consecutive picks is close to the proportions (a van der Corput
    /// sequence), not one instance's block after another's.
    fn rebuild_schedule(&mut self) {
        let n = usize::from(self.len);
        let active = &self.active[..n];
        let (mut sum, mut count) = (0.0, 0u32);
        for &a in active {
            let c = self.capacity[usize::from(a)];
            if c > 0.0 {
                sum += c;
                count += 1;
            }
        }
        let unknown = if count == 0 {
            1.0
        } else {
            sum / f64::from(count)
        };
        let weight = |a: u16| match self.capacity[usize::from(a)] {
            c if c > 0.0 => c,
            _ => unknown,
        };
        // Normalise by the largest so the sum cannot overflow.
        let max = active.iter().map(|&a| weight(a)).fold(0.0, f64::max);
        let total: f64 = active.iter().map(|&a| weight(a) / max).sum();
        let mut ideal = [0.0f64; MAX_SLOTS as usize];
        let mut entries = [0u16; MAX_SLOTS as usize];
        let mut given = 0usize;
        for (k, &a) in active.iter().enumerate() {
            ideal[k] = weight(a) / max / total * SCHEDULE_LEN as f64;
            entries[k] = (ideal[k].floor() as u16).max(1);
            given += usize::from(entries[k]);
        }
        // Largest remainder: hand out what rounding down left over to the
        // largest remainders; take back what the floor of one entry each
        // added from the smallest, never below one.
        let mut order = [0u8; MAX_SLOTS as usize];
        for (k, o) in order.iter_mut().enumerate() {
            *o = k as u8;
        }
        let order = &mut order[..n];
        let remainder = |k: u8| ideal[usize::from(k)] - f64::from(entries[usize::from(k)]);
        order.sort_unstable_by(|&x, &y| remainder(y).total_cmp(&remainder(x)).then(x.cmp(&y)));
        for &k in order.iter().take(SCHEDULE_LEN.saturating_sub(given)) {
            entries[usize::from(k)] += 1;
        }
        given = given.max(SCHEDULE_LEN);
        while given > SCHEDULE_LEN {
            // Ends: the entries sum past SCHEDULE_LEN >= 64 >= n, so one
            // of them is above one.
            for &k in order.iter().rev() {
                if given > SCHEDULE_LEN && entries[usize::from(k)] > 1 {
                    entries[usize::from(k)] -= 1;
                    given -= 1;
                }
            }
        }
        let mut j = 0u32;
        for (k, &a) in active.iter().enumerate() {
            for _ in 0..entries[k] {
                let at = (j.reverse_bits() >> (32 - SCHEDULE_LEN.trailing_zeros())) as usize;
                self.schedule[at % SCHEDULE_LEN] = a as u8;
                j += 1;
            }
        }
    }
}

/// The flow table bucket of `hash`: Fibonacci hashing (Knuth) takes the top
/// bits of `hash * 2^32/phi`, so even a weak caller-supplied hash (a
/// counter, a port) spreads over the buckets.
#[inline(always)]
fn bucket(hash: u32) -> usize {
    (hash.wrapping_mul(0x9E37_79B1) >> (32 - BUCKET_BITS)) as usize
}
