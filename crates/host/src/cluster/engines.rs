//! Which engine gets a remote VR's frame: the VR's policy over the engines
//! that are up.
//!
//! - `flow`: rendezvous (highest-random-weight) hashing: each frame's flow
//!   hash is mixed with each live engine's seed and the highest score
//!   wins. A flow stays on one engine while it is up (no reordering), and
//!   when an engine goes down only its own flows move, each to the engine
//!   with its next score; when it comes back, exactly those return.
//! - `rr`: the live engines in turn, frame by frame.
//! - `proportional`: smooth weighted round robin by the engines'
//!   capacities (as nginx's upstreams): over any window each engine gets
//!   its share within one frame.
//!
//! Hot path: [`EngineSet::pick`] allocates nothing, takes no lock and makes
//! no syscall; it scans the live engines (at most [`MAX_ENGINES`]).

use std::fmt;
use std::str::FromStr;

/// Most engines a dispatcher has (the live set is a `u64` mask).
pub const MAX_ENGINES: usize = 64;

/// How a remote VR's frames are shared among its engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ClusterPolicy {
    /// By flow, rendezvous hashing: no reordering.
    #[default]
    Flow,
    /// Round robin.
    Rr,
    /// In proportion to the engines' capacities.
    Proportional,
}

impl ClusterPolicy {
    /// The name used in the config and the API.
    pub fn name(self) -> &'static str {
        match self {
            ClusterPolicy::Flow => "flow",
            ClusterPolicy::Rr => "rr",
            ClusterPolicy::Proportional => "proportional",
        }
    }
}

impl fmt::Display for ClusterPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ClusterPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "flow" => Ok(ClusterPolicy::Flow),
            "rr" => Ok(ClusterPolicy::Rr),
            "proportional" => Ok(ClusterPolicy::Proportional),
            o => Err(format!(
                "{o:?}: must be \"flow\", \"rr\" or \"proportional\""
            )),
        }
    }
}

/// A remote VR's engines, as the worker sees them.
#[derive(Debug, Clone)]
pub struct EngineSet {
    policy: ClusterPolicy,
    /// Each engine's seed for rendezvous hashing (from its name: the
    /// same on every dispatcher).
    seeds: Vec<u64>,
    /// Capacities (pps, or instances), for `proportional`; > 0.
    weights: Vec<i64>,
    /// Smooth weighted round robin's current weights.
    current: Vec<i64>,
    live: u64,
    next: usize,
}

/// A stable 64-bit seed of an engine's name (FNV-1a, then a finisher).
fn seed_of(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    mix(h)
}

/// SplitMix64's finisher: a good 64-bit mix.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl EngineSet {
    /// The engines `names` (at most [`MAX_ENGINES`], the rest ignored),
    /// with their `capacity` (a missing or non-positive one counts 1),
    /// all live.
    pub fn new(policy: ClusterPolicy, names: &[&str], capacity: &[u64]) -> Self {
        let n = names.len().min(MAX_ENGINES);
        let weights = (0..n)
            .map(|i| {
                let c = capacity.get(i).copied().unwrap_or(1).max(1);
                i64::try_from(c).unwrap_or(i64::MAX / 128)
            })
            .collect();
        Self {
            policy,
            seeds: names[..n].iter().map(|s| seed_of(s)).collect(),
            weights,
            current: vec![0; n],
            live: if n == 64 { u64::MAX } else { (1 << n) - 1 },
            next: 0,
        }
    }

    /// Number of engines, live or not.
    pub fn len(&self) -> usize {
        self.seeds.len()
    }

    /// Whether it has no engine.
    pub fn is_empty(&self) -> bool {
        self.seeds.is_empty()
    }

    /// The policy.
    pub fn policy(&self) -> ClusterPolicy {
        self.policy
    }

    /// Which engines are up: one bit each.
    pub fn live(&self) -> u64 {
        self.live
    }

    /// Set which engines are up (bits past the last engine are ignored).
    pub fn set_live(&mut self, mask: u64) {
        let all = match self.len() {
            64 => u64::MAX,
            n => (1 << n) - 1,
        };
        self.live = mask & all;
    }

    /// Set the engines' weights for `proportional` (a missing or 0 one
    /// counts 1); allocates nothing.
    pub fn set_weights(&mut self, w: &[u64]) {
        for (i, x) in self.weights.iter_mut().enumerate() {
            let c = w.get(i).copied().unwrap_or(1).max(1);
            *x = i64::try_from(c).unwrap_or(i64::MAX / 128);
        }
        self.current.fill(0);
    }

    /// The engine for a frame of flow hash `hash`; `None` when no engine
    /// is up.
    #[inline]
    pub fn pick(&mut self, hash: u32) -> Option<usize> {
        if self.live == 0 {
            return None;
        }
        match self.policy {
            ClusterPolicy::Flow => Some(self.rendezvous(hash)),
            ClusterPolicy::Rr => Some(self.round_robin()),
            ClusterPolicy::Proportional => Some(self.smooth_weighted()),
        }
    }

    #[inline]
    fn rendezvous(&self, hash: u32) -> usize {
        let h = u64::from(hash).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let (mut best, mut at) = (0u64, 0usize);
        let mut m = self.live;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let s = mix(h ^ self.seeds[i]);
            if s >= best {
                (best, at) = (s, i);
            }
        }
        at
    }

    #[inline]
    fn round_robin(&mut self) -> usize {
        let n = self.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            if self.live & (1 << i) != 0 {
                self.next = (i + 1) % n;
                return i;
            }
        }
        0
    }

    #[inline]
    fn smooth_weighted(&mut self) -> usize {
        let (mut total, mut at, mut best) = (0i64, 0usize, i64::MIN);
        let mut m = self.live;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            self.current[i] += self.weights[i];
            total += self.weights[i];
            if self.current[i] > best {
                (best, at) = (self.current[i], i);
            }
        }
        self.current[at] -= total;
        at
    }
}

#[cfg(test)]
#[path = "engines_tests.rs"]
mod tests;
