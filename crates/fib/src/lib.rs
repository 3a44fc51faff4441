//! vrhost-fib: the forwarding information base of vrhost's routers.
//!
//! What it owns: IPv4 and IPv6 longest-prefix match ([`Ipv4Fib`], [`Ipv6Fib`]), route import
//! from text, ipasn and MRT dumps ([`import`]), and `vrhost bench fib` ([`bench`]). What it
//! does not own: the next-hop table itself (a route maps to a [`NextHopId`], an index into
//! the VR's next-hop table of out vNIC + neighbour), nor the routing daemon.
//!
//! # Algorithm
//!
//! A multibit trie with controlled prefix expansion and leaf pushing (Srinivasan & Varghese,
//! SIGMETRICS 1998), laid out as DIR-16-8-8 for IPv4 (Gupta, Lin & McKeown's DIR-24-8,
//! INFOCOM 1998, and DPDK `rte_lpm`, with a 16-bit root) and 16-8-8-...-8 for IPv6: a lookup
//! is one root access plus one access per further byte that holds longer prefixes, at most 3
//! for IPv4. The 256 KiB root stays in L2, so a small table answers from cache even for
//! uniformly random destinations; the full 512K IPv4 table needs ~22 MiB of 1 KiB groups.
//! See `trie.rs` for the entry format and the update rules.
//!
//! # Capacity
//!
//! Next-hop ids up to [`MAX_NEXT_HOP`] (2^23 - 1). Prefixes: memory only (1 KiB per group;
//! up to 2^24 groups). A 2M-prefix IPv4 table fits in well under 100 MiB.
#![forbid(unsafe_code)]

pub mod bench;
pub mod cli;
pub mod concurrent;
pub mod import;
pub mod policy;
mod trie;

pub mod reference;

pub use concurrent::FibReader;
pub use policy::{PolicyFib, RoutingMode};
pub use trie::{Fib, Key, MAX_NEXT_HOP};

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
