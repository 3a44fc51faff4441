//! vrhost-fib: the forwarding information base of vrhost's routers.
//!
//! What it owns: IPv4 and IPv6 longest-prefix match ([`Ipv4Fib`], [`Ipv6Fib`]), lookups
//! during updates ([`concurrent`]), next-hop interning ([`NextHopTable`]), routing policies
//! ([`PolicyFib`]) and route import from text, ipasn and MRT dumps ([`import`]). What it
//! does not own: its benchmark against other LPM crates (`vrhost bench fib`, in
//! `vrhost-bench`), the command lines around it (`vrhost route import`), what a next hop is
//! (a route maps to a [`NextHopId`]; the VR's next-hop type, out vNIC + neighbour, lives in
//! the VR), the data path around the lookup, the routing daemon.
//!
//! # Algorithm
//!
//! A multibit trie with controlled prefix expansion and leaf pushing (Srinivasan & Varghese,
//! "Faster IP lookups using controlled prefix expansion", SIGMETRICS 1998), laid out like
//! DIR-24-8 (Gupta, Lin & McKeown, INFOCOM 1998; DPDK `rte_lpm`) but with a 16-bit root:
//! DIR-16-8-8 for IPv4 and 16-4-4-...-4 for IPv6. A lookup is one root access plus one
//! access per level that holds longer prefixes: at most 3 for IPv4, at most 9 for IPv6
//! prefixes up to /48. Every entry stores the length of the prefix that wrote it, so updates
//! are incremental (no rebuild). See `trie.rs` for the entry format and the update rules.
//!
//! Why not DIR-24-8: its 64 MiB first level makes every uniformly random lookup a cache and
//! TLB miss even for a 2-route table. The 16-bit root is 256 KiB and stays in L2, so a small
//! table answers in ~1 ns; the full 512K IPv4 table adds ~22 MiB of 1 KiB groups, which fits
//! a 32 MiB L3. [`Fib::lookup_batch`] processes 32 addresses level by level, so their cache
//! misses overlap (the effect of prefetching, in safe code: measured 9 ns vs 13 ns single).
//!
//! # Updates while forwarding
//!
//! One writer ([`Fib`], `&mut`), any number of readers on other threads
//! ([`Fib::reader`] -> [`FibReader`]): per-entry atomic publication for route changes, RCU
//! by reference count when the table grows, quiescent-state reclamation for emptied groups.
//! Details and the memory-ordering argument in [`concurrent`].
//!
//! # Capacity
//!
//! - Next-hop ids: 0..=[`MAX_NEXT_HOP`] (2^23 - 1).
//! - Prefixes: memory only. Measured (`examples/v4_scale.rs`, `examples/v6_scale.rs`): the
//!   512K IPv4 table uses ~22K groups, 39 MiB in all (lookup arrays plus the route maps kept
//!   for deletes); 2M IPv4 prefixes (the 512K table plus random prefixes of the same length
//!   mix) 119 MiB; 500K IPv6 prefixes (the RouteViews IPv6 prefixes replicated under 73
//!   /16s) 60 MiB.
//! - Readers are threads of one process (the tables are process memory).
#![forbid(unsafe_code)]

pub mod concurrent;
pub mod expand;
pub mod import;
pub mod nexthop;
pub mod policy;
mod trie;

pub mod reference;

pub use concurrent::FibReader;
pub use expand::{Arrays, MAX_NEXT_HOP, Prefixes};
pub use nexthop::NextHopTable;
pub use policy::{PolicyFib, RoutingMode};
pub use trie::{Fib, Key, ROOT_BITS};

/// Index into a VR's next-hop table.
pub type NextHopId = u32;

/// IPv4 longest-prefix match table; addresses are `u32` in host byte order.
pub type Ipv4Fib = Fib<u32>;

/// IPv6 longest-prefix match table; addresses are `u128` in host byte order.
pub type Ipv6Fib = Fib<u128>;

/// Errors of FIB updates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FibError {
    /// The prefix length exceeds the address width.
    #[error("prefix length /{len} out of range (max /{max})")]
    PrefixLength {
        /// Length given.
        len: u8,
        /// Address width.
        max: u8,
    },
    /// The next-hop id does not fit in an entry.
    #[error("next hop {nh} out of range (max {max})")]
    NextHop {
        /// Id given.
        nh: NextHopId,
        /// Largest id a FIB holds.
        max: NextHopId,
    },
    /// The group pool reached its limit.
    #[error("FIB full: {groups} groups in use")]
    Capacity {
        /// Groups in use.
        groups: usize,
    },
}

/// The interface every LPM implementation here offers (the FIB and the naive reference),
/// so one property test runs against all of them.
pub trait Lpm<K: Key> {
    /// Add or replace a route; returns the replaced next hop.
    ///
    /// # Errors
    /// See [`Fib::insert`].
    fn insert(&mut self, prefix: K, len: u8, nh: NextHopId) -> Result<Option<NextHopId>, FibError>;
    /// Delete a route; returns its next hop.
    fn remove(&mut self, prefix: K, len: u8) -> Option<NextHopId>;
    /// Longest-prefix match.
    fn lookup(&self, addr: K) -> Option<NextHopId>;
    /// Number of routes.
    fn len(&self) -> usize;
    /// True if empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Key> Lpm<K> for Fib<K> {
    fn insert(&mut self, prefix: K, len: u8, nh: NextHopId) -> Result<Option<NextHopId>, FibError> {
        Fib::insert(self, prefix, len, nh)
    }
    fn remove(&mut self, prefix: K, len: u8) -> Option<NextHopId> {
        Fib::remove(self, prefix, len)
    }
    fn lookup(&self, addr: K) -> Option<NextHopId> {
        Fib::lookup(self, addr)
    }
    fn len(&self) -> usize {
        Fib::len(self)
    }
}
