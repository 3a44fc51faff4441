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

use vrhost_packet::FlowKey;
use vrhost_packet::ethernet::EtherType;

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

/// The flow hash of an Ethernet frame (FCS not included), for
/// [`Balancer::pick`].
///
/// IPv4, optionally behind one 802.1Q tag, with a valid version and IHL:
/// source and destination address, protocol, and for unfragmented TCP and
/// UDP the ports (when the frame holds them). Anything else (ARP, IPv6, a
/// broken IPv4 header): the source and destination MAC address, what there
/// is of them in a short frame. Symmetric: both directions of a flow hash
/// alike, so a stateful VR sees them on one instance. Never panics; one
/// 64x64-bit multiply.
#[inline]
pub fn flow_hash(frame: &[u8]) -> u32 {
    match ipv4_tuple(frame) {
        Some(t) => tuple_hash(t),
        None => mac_hash(frame),
    }
}

/// [`flow_hash`] of a frame from the key the classifier already read
/// ([`FlowKey::extract`], or [`FlowKey::extract_l2`] when that failed), so
/// the worker does not parse the frame twice. Equal to `flow_hash(frame)`
/// whenever `FlowKey::extract(frame)` succeeds.
#[inline]
pub fn flow_key_hash(key: &FlowKey) -> u32 {
    if key.ethertype == EtherType::IPV4 {
        tuple_hash(Tuple {
            src: key.src,
            dst: key.dst,
            protocol: key.protocol,
            sport: key.sport,
            dport: key.dport,
        })
    } else {
        let mut macs = [0u8; 12];
        macs[..6].copy_from_slice(&key.dst_mac.0);
        macs[6..].copy_from_slice(&key.src_mac.0);
        mac_hash(&macs)
    }
}

/// Byte offsets in an Ethernet frame and an IPv4 header.
mod field {
    pub const ETHERTYPE: usize = 12;
    pub const VLAN_ETHERTYPE: usize = 16;
    pub const L3: usize = 14;
    pub const VLAN_L3: usize = 18;
    pub const IP_MIN_HEADER: usize = 20;
    pub const IP_FLAGS_FRAG: usize = 6;
    pub const IP_PROTOCOL: usize = 9;
    pub const IP_SRC: usize = 12;
    pub const IP_DST: usize = 16;
}

/// The 5-tuple of an IPv4 packet; ports 0 where they do not count.
#[derive(Clone, Copy)]
struct Tuple {
    src: u32,
    dst: u32,
    protocol: u8,
    sport: u16,
    dport: u16,
}

#[inline(always)]
fn ipv4_tuple(f: &[u8]) -> Option<Tuple> {
    let be16 = |at: usize| f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let (ethertype, l3) = match be16(field::ETHERTYPE)? {
        t if t == EtherType::VLAN.0 => (be16(field::VLAN_ETHERTYPE)?, field::VLAN_L3),
        t => (t, field::L3),
    };
    if ethertype != EtherType::IPV4.0 {
        return None;
    }
    let ip = f.get(l3..)?;
    let h: &[u8; field::IP_MIN_HEADER] = ip.first_chunk()?;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if h[0] >> 4 != 4 || ihl < field::IP_MIN_HEADER {
        return None;
    }
    let word = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let protocol = h[field::IP_PROTOCOL];
    // More-fragments flag or a fragment offset: only the first fragment
    // holds the ports, so no fragment uses them.
    let fragment =
        u16::from_be_bytes([h[field::IP_FLAGS_FRAG], h[field::IP_FLAGS_FRAG + 1]]) & 0x3fff != 0;
    let ported = (protocol == 6 || protocol == 17) && !fragment;
    let ports = match ip.get(ihl..).and_then(<[u8]>::first_chunk::<4>) {
        Some(p) if ported => (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        ),
        _ => (0, 0),
    };
    Some(Tuple {
        src: word(field::IP_SRC),
        dst: word(field::IP_DST),
        protocol,
        sport: ports.0,
        dport: ports.1,
    })
}

#[inline(always)]
fn tuple_hash(t: Tuple) -> u32 {
    let a = u64::from(t.src) << 16 | u64::from(t.sport);
    let b = u64::from(t.dst) << 16 | u64::from(t.dport);
    mix(a.min(b), a.max(b), u64::from(t.protocol))
}

/// Hash of the MAC addresses in the first 12 bytes (zeros past the end).
#[inline(always)]
fn mac_hash(f: &[u8]) -> u32 {
    let mut m = [0u8; 12];
    let n = f.len().min(12);
    m[..n].copy_from_slice(&f[..n]);
    let dst = u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]);
    let src = u64::from_be_bytes([0, 0, m[6], m[7], m[8], m[9], m[10], m[11]]);
    // Outside the protocol range, so MACs and an IPv4 tuple do not mix.
    const MAC_TAG: u64 = 0x100;
    mix(dst.min(src), dst.max(src), MAC_TAG)
}

/// `a * b` to 128 bits, halves folded by xor (wyhash, foldhash): every
/// output bit depends on every input bit of both.
#[inline(always)]
fn folded_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Mix two 48-bit words and a tag (< 2^9) into 32 bits with one folded
/// multiply (a second, as a finisher, made no difference the tests below
/// could see: avalanche, spread of sequential flows). The constants (digits
/// of pi) have a non-zero top byte, which neither the words nor the tag
/// reach, so neither factor can be zero.
#[inline(always)]
fn mix(lo: u64, hi: u64, tag: u64) -> u32 {
    let h = folded_mul(
        lo ^ 0x243F_6A88_85A3_08D3,
        hi ^ tag << 48 ^ 0x1319_8A2E_0370_7344,
    );
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: [u8; 4] = [10, 1, 0, 1];
    const B: [u8; 4] = [10, 2, 0, 7];

    /// An Ethernet/IPv4 frame with a 20-byte L4 header (ports first),
    /// padded to the Ethernet minimum.
    fn ipv4(
        vlan: Option<u16>,
        proto: u8,
        src: [u8; 4],
        dst: [u8; 4],
        ports: (u16, u16),
    ) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 9];
        if let Some(v) = vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 40, 0, 1, 0, 0, 64, proto, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&ports.0.to_be_bytes());
        f.extend_from_slice(&ports.1.to_be_bytes());
        f.resize(f.len() + 16, 0);
        f.resize(f.len().max(60), 0);
        f
    }

    fn udp(sport: u16, dport: u16) -> Vec<u8> {
        ipv4(None, 17, A, B, (sport, dport))
    }

    /// IP header offset of an untagged frame.
    const IP: usize = 14;

    fn balancer(policy: Policy, slots: u16, active: &[u16]) -> Balancer {
        let mut b = Balancer::new(policy, slots);
        b.set_active(active);
        b
    }

    /// A hash landing in `bucket` (the inverse of the Fibonacci multiply).
    fn hash_of_bucket(bucket: usize) -> u32 {
        const INV: u32 = {
            // Newton's iteration for the inverse of an odd number mod 2^32.
            let mut x: u32 = 0x9E37_79B1;
            let mut i = 0;
            while i < 5 {
                x = x.wrapping_mul(2u32.wrapping_sub(0x9E37_79B1u32.wrapping_mul(x)));
                i += 1;
            }
            x
        };
        ((bucket as u32) << (32 - BUCKET_BITS)).wrapping_mul(INV)
    }

    /// Which instance each bucket goes to, read through `pick`.
    fn owners(b: &mut Balancer) -> Vec<u16> {
        let policy = b.policy();
        b.set_policy(Policy::Flow);
        let o = (0..FLOW_BUCKETS)
            .map(|k| b.pick(hash_of_bucket(k), &[]).unwrap())
            .collect();
        b.set_policy(policy);
        o
    }

    fn shares(owners: &[u16]) -> [usize; 64] {
        let mut s = [0; 64];
        for &o in owners {
            s[usize::from(o)] += 1;
        }
        s
    }

    #[test]
    fn hash_of_bucket_lands_in_it() {
        for k in 0..FLOW_BUCKETS {
            assert_eq!(bucket(hash_of_bucket(k)), k);
        }
    }

    #[test]
    fn policy_names_parse_and_serialize() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>().unwrap(), p);
            assert_eq!(p.to_string(), p.name());
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<Policy>(&json).unwrap(), p);
            assert_eq!(json.trim_matches('"').parse::<Policy>().unwrap(), p);
        }
        assert_eq!("round_robin".parse(), Ok(Policy::RoundRobin));
        assert_eq!("shortest_queue".parse(), Ok(Policy::ShortestQueue));
        assert_eq!(
            serde_json::from_str::<Policy>("\"rr\"").unwrap(),
            Policy::RoundRobin
        );
        assert_eq!(
            serde_json::from_str::<Policy>("\"jsq\"").unwrap(),
            Policy::ShortestQueue
        );
        assert!("hash".parse::<Policy>().is_err());
        assert_eq!(Policy::default(), Policy::Flow);
    }

    #[test]
    fn nothing_active_picks_nothing() {
        for p in Policy::ALL {
            let mut b = Balancer::new(p, 4);
            assert_eq!(b.pick(1, &[0; 4]), None);
            b.set_active(&[9, 4, 70]); // all out of range
            assert!(b.active().is_empty());
            assert_eq!(b.pick(1, &[0; 4]), None);
            b.set_active(&[3, 1, 3, 1]);
            assert_eq!(b.active(), [1, 3]);
            assert!(b.pick(1, &[0; 4]).is_some());
            b.set_active(&[]);
            assert_eq!(b.pick(1, &[0; 4]), None);
        }
    }

    #[test]
    fn flow_keeps_a_hash_on_one_instance() {
        let mut b = balancer(Policy::Flow, 8, &[0, 2, 3, 5, 7]);
        let first: Vec<_> = (0..4096u32)
            .map(|h| b.pick(h.wrapping_mul(2_654_435_761), &[]).unwrap())
            .collect();
        b.set_capacity(3, 1e6); // other state changes do not move flows
        for (h, want) in (0..4096u32).zip(first).rev() {
            assert_eq!(b.pick(h.wrapping_mul(2_654_435_761), &[]), Some(want));
        }
    }

    #[test]
    fn flow_shares_are_balanced() {
        for n in 1..=64u16 {
            // Scattered slots, not just the first n.
            let active: Vec<u16> = (0..n).map(|k| (k * 37) % 64).collect();
            let mut b = balancer(Policy::Flow, 64, &active);
            let s = shares(&owners(&mut b));
            let n = usize::from(n);
            let (lo, hi) = (FLOW_BUCKETS / n, FLOW_BUCKETS.div_ceil(n));
            for (i, &c) in s.iter().enumerate() {
                let want = if active.contains(&(i as u16)) {
                    lo..=hi
                } else {
                    0..=0
                };
                assert!(want.contains(&c), "n {n}: instance {i} has {c} buckets");
            }
        }
    }

    #[test]
    fn adding_an_instance_moves_only_its_share_to_it() {
        let mut b = Balancer::new(Policy::Flow, 64);
        // Grow in a scrambled order so the new one is not always the last.
        let mut active = Vec::new();
        for k in 0..64u16 {
            let new = (k * 37) % 64;
            let before = if k == 0 { Vec::new() } else { owners(&mut b) };
            active.push(new);
            b.set_active(&active);
            let after = owners(&mut b);
            if k == 0 {
                assert!(after.iter().all(|&o| o == new));
                continue;
            }
            let moved = before.iter().zip(&after).filter(|(x, y)| x != y).count();
            assert_eq!(
                moved,
                FLOW_BUCKETS / active.len(),
                "buckets moved adding {new} to {k}"
            );
            for (x, y) in before.iter().zip(&after) {
                assert!(
                    x == y || *y == new,
                    "bucket moved from {x} to {y}, not to {new}"
                );
            }
        }
    }

    #[test]
    fn removing_an_instance_moves_only_its_buckets() {
        for n in 2..=64u16 {
            for gone in [0, n / 2, n - 1] {
                let active: Vec<u16> = (0..n).collect();
                let mut b = balancer(Policy::Flow, 64, &active);
                let before = owners(&mut b);
                let rest: Vec<u16> = active.iter().copied().filter(|&i| i != gone).collect();
                b.set_active(&rest);
                let after = owners(&mut b);
                for (x, y) in before.iter().zip(&after) {
                    assert!(
                        x == y || *x == gone,
                        "n {n}: bucket moved from {x} to {y}, {gone} went"
                    );
                    assert_ne!(*y, gone);
                }
            }
        }
    }

    #[test]
    fn flows_come_back_after_all_instances_went() {
        // A history, so the table is not what a fresh fill would give.
        let mut b = balancer(Policy::Flow, 4, &[0, 1, 2, 3]);
        b.set_active(&[0, 1, 3]);
        let before = owners(&mut b);
        b.set_active(&[]);
        assert_eq!(b.pick(7, &[]), None);
        b.set_active(&[3, 0, 1]);
        assert_eq!(owners(&mut b), before);
    }

    #[test]
    fn round_robin_cycles_over_active() {
        let mut b = balancer(Policy::RoundRobin, 8, &[5, 1, 3]);
        let got: Vec<_> = (0..7).map(|_| b.pick(0, &[]).unwrap()).collect();
        assert_eq!(got, [1, 3, 5, 1, 3, 5, 1]);
        b.set_active(&[6]);
        assert_eq!(b.pick(0, &[]), Some(6));
        assert_eq!(b.pick(0, &[]), Some(6));
        b.set_active(&[0, 7]);
        let got: Vec<_> = (0..4).map(|_| b.pick(0, &[]).unwrap()).collect();
        assert_eq!(shares(&got)[0], 2);
        assert_eq!(shares(&got)[7], 2);
    }

    #[test]
    fn shortest_queue_picks_the_minimum() {
        let mut b = balancer(Policy::ShortestQueue, 6, &[0, 2, 3, 5]);
        // Instance 1 is the emptiest but not active; 4 is not active either.
        let backlog = [9, 0, 7, 8, 0, 6];
        for _ in 0..10 {
            assert_eq!(b.pick(0, &backlog), Some(5));
        }
        // Ties rotate.
        let backlog = [3, 0, 3, 9, 0, 3];
        let got: Vec<_> = (0..6).map(|_| b.pick(0, &backlog).unwrap()).collect();
        assert_eq!(shares(&got)[0], 2);
        assert_eq!(shares(&got)[2], 2);
        assert_eq!(shares(&got)[5], 2);
        // A short backlog counts the missing as full.
        assert_eq!(b.pick(0, &[5, 5, 5, 4]), Some(3));
        // Fed one at a time, it evens out.
        let mut backlog = [0u32; 6];
        for _ in 0..400 {
            let i = b.pick(0, &backlog).unwrap();
            backlog[usize::from(i)] += 1;
        }
        assert_eq!(backlog, [100, 0, 100, 100, 0, 100]);
    }

    #[test]
    fn random_covers_active_evenly() {
        let mut b = balancer(Policy::Random, 8, &[1, 2, 4, 6]);
        let got: Vec<_> = (0..80_000).map(|_| b.pick(0, &[]).unwrap()).collect();
        let s = shares(&got);
        for i in [1, 2, 4, 6] {
            assert!((19_000..21_000).contains(&s[i]), "instance {i}: {}", s[i]);
        }
        assert_eq!(s.iter().sum::<usize>(), 80_000);
    }

    fn weighted_shares(b: &mut Balancer, picks: usize) -> [usize; 64] {
        let got: Vec<_> = (0..picks).map(|_| b.pick(0, &[]).unwrap()).collect();
        shares(&got)
    }

    #[test]
    fn weighted_follows_capacity() {
        let mut b = balancer(Policy::Weighted, 2, &[0, 1]);
        let s = weighted_shares(&mut b, 10_000);
        assert_eq!(
            (s[0], s[1]),
            (5_000, 5_000),
            "equal before any capacity is known"
        );
        b.set_capacity(0, 1.0e6);
        b.set_capacity(1, 3.0e6);
        let s = weighted_shares(&mut b, 10_000);
        assert!((s[0] as f64 / 10_000.0 - 0.25).abs() < 0.01, "{s:?}");
        assert!((s[1] as f64 / 10_000.0 - 0.75).abs() < 0.01, "{s:?}");
        // Interleaved: every 4 picks hold one of instance 0's.
        let got: Vec<_> = (0..64).map(|_| b.pick(0, &[]).unwrap()).collect();
        for w in got.chunks(4) {
            assert_eq!(w.iter().filter(|&&i| i == 0).count(), 1, "{got:?}");
        }
    }

    #[test]
    fn weighted_fills_in_unknown_and_ignores_nonsense() {
        let mut b = balancer(Policy::Weighted, 4, &[0, 1, 2]);
        b.set_capacity(0, 2.0e6);
        b.set_capacity(1, 4.0e6);
        // Instance 2 unknown: the mean (3e6), so 2:4:3 of 9.
        for bad in [f64::NAN, f64::INFINITY, 0.0, -5.0, f64::NEG_INFINITY] {
            b.set_capacity(2, bad);
            b.set_capacity(0, bad);
        }
        b.set_capacity(4, 1.0e9); // no such slot
        let s = weighted_shares(&mut b, 9 * SCHEDULE_LEN);
        for (i, want) in [(0, 2.0 / 9.0), (1, 4.0 / 9.0), (2, 3.0 / 9.0)] {
            let got = s[i] as f64 / (9 * SCHEDULE_LEN) as f64;
            assert!((got - want).abs() < 0.002, "instance {i}: {got} not {want}");
        }
    }

    #[test]
    fn weighted_feeds_every_active_instance() {
        let mut b = balancer(Policy::Weighted, 64, &(0..64).collect::<Vec<_>>());
        b.set_capacity(0, 1.0);
        for i in 1..64 {
            b.set_capacity(i, 1.0e300);
        }
        let s = weighted_shares(&mut b, SCHEDULE_LEN);
        assert_eq!(s[0], 1);
        assert_eq!(s.iter().sum::<usize>(), SCHEDULE_LEN);
        assert!(s[1..].iter().all(|&c| (16..=17).contains(&c)), "{s:?}");
    }

    #[test]
    fn flow_hash_reads_the_five_tuple() {
        let base = flow_hash(&udp(1000, 53));
        assert_ne!(flow_hash(&udp(1001, 53)), base, "source port");
        assert_ne!(flow_hash(&udp(1000, 54)), base, "destination port");
        assert_ne!(
            flow_hash(&ipv4(None, 6, A, B, (1000, 53))),
            base,
            "protocol"
        );
        assert_ne!(
            flow_hash(&ipv4(None, 17, A, [10, 2, 0, 8], (1000, 53))),
            base,
            "address"
        );
        // Both directions alike; the tag and the MACs do not count.
        assert_eq!(flow_hash(&ipv4(None, 17, B, A, (53, 1000))), base);
        assert_eq!(flow_hash(&ipv4(Some(42), 17, A, B, (1000, 53))), base);
        let mut f = udp(1000, 53);
        f[0] = 0x0e;
        assert_eq!(flow_hash(&f), base);
        // Not the ports of a fragment, nor of a protocol without ports.
        for (at, v) in [(IP + 6, 0x20), (IP + 7, 0x10)] {
            let mut x = udp(1000, 53);
            let mut y = udp(2000, 80);
            x[at] = v;
            y[at] = v;
            assert_eq!(flow_hash(&x), flow_hash(&y), "fragment");
            assert_ne!(flow_hash(&x), base);
        }
        let icmp = |p| flow_hash(&ipv4(None, 1, A, B, p));
        assert_eq!(icmp((1000, 53)), icmp((2000, 80)));
        // Options: the ports come after them.
        let mut o = udp(1000, 53);
        o[IP] = 0x46;
        o.splice(IP + 20..IP + 20, [0, 0, 0, 0]);
        assert_eq!(flow_hash(&o), base);
    }

    #[test]
    fn flow_hash_falls_back_to_macs() {
        let arp = |dst: u8, src: u8| {
            let mut f = vec![2, 0, 0, 0, 0, dst, 2, 0, 0, 0, 0, src, 0x08, 0x06];
            f.resize(60, 0);
            f
        };
        assert_ne!(flow_hash(&arp(1, 9)), flow_hash(&arp(1, 8)));
        assert_ne!(flow_hash(&arp(1, 9)), flow_hash(&arp(2, 9)));
        assert_eq!(flow_hash(&arp(1, 9)), flow_hash(&arp(9, 1)));
        // A broken IPv4 header hashes as a non-IP frame: by MAC.
        for (at, v) in [(IP, 0x44), (IP, 0x65)] {
            let mut f = udp(1000, 53);
            f[at] = v;
            assert_eq!(flow_hash(&f), mac_hash(&f), "first byte {v:#x}");
        }
        // Short frames hash what is there.
        let f = udp(1000, 53);
        for n in 0..f.len() {
            flow_hash(&f[..n]);
        }
        assert_ne!(flow_hash(&f[..5]), flow_hash(&f[..6]));
        assert_eq!(
            flow_hash(&f[..IP + 20]),
            flow_hash(&ipv4(None, 17, A, B, (0, 0))[..IP + 20])
        );
    }

    #[test]
    fn flow_hash_avalanches() {
        // Flipping any one bit of the tuple flips about half the output
        // bits, and each output bit about half the time.
        const TRIALS: u32 = 2000;
        let mut by_input = [0u32; 104];
        let mut by_output = [0u32; 32];
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..TRIALS {
            x = folded_mul(x ^ 0x5555, 0x9E37_79B9_7F4A_7C15);
            let t = Tuple {
                src: x as u32,
                dst: (x >> 32) as u32,
                protocol: (x >> 11) as u8,
                sport: (x >> 7) as u16,
                dport: (x >> 23) as u16,
            };
            let h = tuple_hash(t);
            for (bit, count) in by_input.iter_mut().enumerate() {
                let mut u = t;
                match bit {
                    0..32 => u.src ^= 1 << bit,
                    32..64 => u.dst ^= 1 << (bit - 32),
                    64..80 => u.sport ^= 1 << (bit - 64),
                    80..96 => u.dport ^= 1 << (bit - 80),
                    _ => u.protocol ^= 1 << (bit - 96),
                }
                let d = h ^ tuple_hash(u);
                *count += d.count_ones();
                for (o, f) in by_output.iter_mut().enumerate() {
                    *f += d >> o & 1;
                }
            }
        }
        for (bit, &c) in by_input.iter().enumerate() {
            let mean = f64::from(c) / f64::from(TRIALS);
            assert!(
                (15.5..16.5).contains(&mean),
                "input bit {bit} flips {mean} bits"
            );
        }
        for (o, &f) in by_output.iter().enumerate() {
            let p = f64::from(f) / f64::from(TRIALS * 104);
            assert!((0.47..0.53).contains(&p), "output bit {o} flips with p {p}");
        }
    }

    #[test]
    fn flow_hash_spreads_sequential_flows() {
        // 64 Ki flows differing in one counted field fill the 1024
        // buckets about evenly (64 each; 4.5 sigma either way allowed).
        let patterns: [fn(u32) -> Vec<u8>; 4] = [
            |k| udp(k as u16, 53),
            |k| ipv4(None, 6, A, B, (40_000, k as u16)),
            |k| ipv4(None, 17, A, (0x0a00_0000 + k).to_be_bytes(), (5000, 5000)),
            |k| ipv4(None, 1, (0xc0a8_0000 + k).to_be_bytes(), B, (0, 0)),
        ];
        for (i, frame) in patterns.iter().enumerate() {
            let mut per_bucket = [0u32; FLOW_BUCKETS];
            for k in 0..65_536 {
                per_bucket[bucket(flow_hash(&frame(k)))] += 1;
            }
            let (lo, hi) = (per_bucket.iter().min(), per_bucket.iter().max());
            assert!(
                *lo.unwrap() >= 28 && *hi.unwrap() <= 100,
                "pattern {i}: {lo:?}..{hi:?}"
            );
        }
    }

    #[test]
    fn flow_key_hash_matches_flow_hash() {
        let frames = [
            udp(1000, 53),
            ipv4(Some(7), 6, B, A, (443, 40_000)),
            ipv4(None, 1, A, B, (0, 0)),
            vec![
                2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0x86, 0xdd, 0x60, 0, 0, 0,
            ],
        ];
        for f in frames {
            let key = FlowKey::extract(&f).unwrap();
            assert_eq!(flow_key_hash(&key), flow_hash(&f));
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Active(Vec<u16>),
        Capacity(u16, f64),
        Policy(Policy),
        Pick(u32, Vec<u32>),
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            proptest::collection::vec(0u16..70, 0..70).prop_map(Op::Active),
            (0u16..70, prop_oneof![any::<f64>(), 1.0..1.0e7]).prop_map(|(i, c)| Op::Capacity(i, c)),
            proptest::sample::select(Policy::ALL.to_vec()).prop_map(Op::Policy),
            (any::<u32>(), proptest::collection::vec(0u32..4, 0..70))
                .prop_map(|(h, b)| Op::Pick(h, b)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn pick_returns_only_active_instances(
            slots in 1u16..=64,
            ops in proptest::collection::vec(arb_op(), 1..60),
        ) {
            let mut b = Balancer::new(Policy::Flow, slots);
            for op in ops {
                match op {
                    Op::Active(a) => {
                        b.set_active(&a);
                        let mut want: Vec<u16> = a.into_iter().filter(|&i| i < slots).collect();
                        want.sort_unstable();
                        want.dedup();
                        prop_assert_eq!(b.active(), &want[..]);
                    }
                    Op::Capacity(i, c) => b.set_capacity(i, c),
                    Op::Policy(p) => b.set_policy(p),
                    Op::Pick(h, backlog) => {
                        for k in 0..8 {
                            let got = b.pick(h.wrapping_add(k), &backlog);
                            match got {
                                None => prop_assert!(b.active().is_empty()),
                                Some(i) => prop_assert!(b.active().contains(&i), "{} not in {:?}", i, b.active()),
                            }
                        }
                    }
                }
            }
        }

        #[test]
        fn rehash_moves_buckets_only_from_losers_to_gainers(
            sets in proptest::collection::vec(proptest::collection::vec(0u16..16, 1..16), 1..12),
        ) {
            let mut b = Balancer::new(Policy::Flow, 16);
            let mut before: Option<Vec<u16>> = None;
            for set in sets {
                b.set_active(&set);
                let after = owners(&mut b);
                let n = b.active().len();
                let s = shares(&after);
                for &i in b.active() {
                    let c = s[usize::from(i)];
                    prop_assert!(c == FLOW_BUCKETS / n || c == FLOW_BUCKETS.div_ceil(n));
                }
                if let Some(before) = before {
                    let old = shares(&before);
                    for (x, y) in before.iter().zip(&after) {
                        if x != y {
                            prop_assert!(s[usize::from(*x)] < old[usize::from(*x)], "{} gave a bucket but did not shrink", x);
                            prop_assert!(s[usize::from(*y)] > old[usize::from(*y)], "{} took a bucket but did not grow", y);
                        }
                    }
                }
                before = Some(after);
            }
        }

        #[test]
        fn flow_hash_never_panics(frame in proptest::collection::vec(any::<u8>(), 0..120)) {
            flow_hash(&frame);
        }

        #[test]
        fn flow_key_hash_agrees_on_parsed_frames(
            vlan in proptest::option::of(0u16..4096),
            proto in prop_oneof![Just(6u8), Just(17u8), any::<u8>()],
            src in any::<[u8; 4]>(),
            dst in any::<[u8; 4]>(),
            ports in any::<(u16, u16)>(),
            pokes in proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
            cut in 0usize..80,
        ) {
            let mut f = ipv4(vlan, proto, src, dst, ports);
            for (at, v) in pokes {
                if let Some(x) = f.get_mut(at) {
                    *x = v;
                }
            }
            f.truncate(f.len() - cut.min(f.len()));
            let h = flow_hash(&f);
            if let Ok(key) = FlowKey::extract(&f) {
                prop_assert_eq!(flow_key_hash(&key), h);
            }
        }
    }

    /// ns per pick and per flow hash; run by hand:
    /// `cargo test --release -p vrhost-host balance::tests::pick_cost -- --ignored --nocapture`
    #[test]
    #[ignore = "timing, by hand in release mode"]
    fn pick_cost() {
        use std::hint::black_box;
        use std::time::Instant;
        const N: u32 = 20_000_000;
        for (slots, n) in [(2u16, 2u16), (8, 8), (64, 64), (64, 2)] {
            let active: Vec<u16> = (0..n).collect();
            let mut backlog = vec![0u32; usize::from(slots)];
            for p in Policy::ALL {
                let mut b = balancer(p, slots, &active);
                for i in 0..n {
                    b.set_capacity(i, f64::from(i + 1) * 1e5);
                }
                let t = Instant::now();
                let mut acc = 0u32;
                for k in 0..N {
                    let h = black_box(k.wrapping_mul(0x2545_F491));
                    let i = b.pick(h, black_box(&backlog)).unwrap();
                    backlog[usize::from(i)] ^= 1;
                    acc = acc.wrapping_add(u32::from(i));
                }
                let ns = t.elapsed().as_secs_f64() * 1e9 / f64::from(N);
                black_box(acc);
                println!(
                    "{slots:>2} slots {n:>2} active  {:<8} {ns:5.2} ns/pick",
                    p.name()
                );
            }
        }
        let mut b = Balancer::new(Policy::Flow, 64);
        let t = Instant::now();
        for k in 0..1000u16 {
            b.set_active(&(0..64).filter(|&i| i != k % 64).collect::<Vec<_>>());
        }
        println!(
            "set_active (64 slots, one leaves or comes back) {:5.2} us",
            t.elapsed().as_secs_f64() * 1e3
        );
        let t = Instant::now();
        for k in 0..1000u16 {
            b.set_capacity(k % 64, f64::from(k + 1) * 1e3);
        }
        println!(
            "set_capacity (63 active) {:5.2} us",
            t.elapsed().as_secs_f64() * 1e3
        );
        let frames = [udp(1000, 53), ipv4(Some(3), 6, A, B, (443, 9))];
        let t = Instant::now();
        let mut acc = 0u32;
        for k in 0..N {
            acc ^= flow_hash(black_box(&frames[(k & 1) as usize]));
        }
        black_box(acc);
        println!(
            "flow_hash {:5.2} ns/frame",
            t.elapsed().as_secs_f64() * 1e9 / f64::from(N)
        );
        let keys = frames.map(|f| FlowKey::extract(&f).unwrap());
        let t = Instant::now();
        for k in 0..N {
            acc ^= flow_key_hash(black_box(&keys[(k & 1) as usize]));
        }
        black_box(acc);
        println!(
            "flow_key_hash {:5.2} ns/key",
            t.elapsed().as_secs_f64() * 1e9 / f64::from(N)
        );
    }
}
