//! The typed values the fast path's methods take and return; `abi.rs`
//! holds their layouts as the program sees them.

use std::net::Ipv4Addr;

#[cfg(doc)]
use crate::FastPath;
use crate::abi;
use crate::{AttachMode, RoutingMode};

/// Map sizes, fixed when the program is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastConfig {
    /// VR ids are `0..max_vrs` (the `vrs` and `counters` arrays).
    pub max_vrs: u32,
    /// Routes of all VRs and tables together.
    pub max_routes: u32,
    /// Route tables of all VRs together (a {VR, table} with routes, or
    /// selected by a source prefix): a 256 KiB root each, allocated when
    /// the program is loaded.
    pub max_route_tables: u32,
    /// Groups of 256 entries (1 KiB) of all route tables together,
    /// allocated when the program is loaded; a full table (512K
    /// prefixes) takes about 22K.
    pub max_route_groups: u32,
    /// Distinct next hops of all routes together (8 bytes each).
    pub max_route_hops: u32,
    /// Source prefixes of all src-dst VRs together.
    pub max_source_tables: u32,
    /// Neighbours of all VRs together.
    pub max_neighbours: u32,
    /// Own addresses of all VRs together.
    pub max_addrs: u32,
    /// Select table entries.
    pub max_select: u32,
    /// Ports: out ports, and ports with slow-path sockets.
    pub max_ports: u32,
    /// Rx queues per port with a slow-path socket (the XSKMAP holds
    /// `max_ports x max_queues` sockets).
    pub max_queues: u32,
}

impl Default for FastConfig {
    fn default() -> Self {
        FastConfig {
            max_vrs: 256,
            // The trie allocates per route (no prealloc): room for two
            // full tables costs nothing until they are written.
            max_routes: 1 << 20,
            // 64 MiB of roots: table 0 of every VR.
            max_route_tables: 256,
            // 64 MiB: about three full tables.
            max_route_groups: 1 << 16,
            max_route_hops: 1 << 16,
            max_source_tables: 4096,
            max_neighbours: 4096,
            max_addrs: 1024,
            max_select: 1024,
            max_ports: 64,
            max_queues: 16,
        }
    }
}

/// Where a tenant's frames go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// Forwarded in XDP where it can; the rest to the slow path.
    Fast,
    /// The VR's user-space instance, through the AF_XDP socket.
    Slow,
    /// Dropped at the port (counted).
    Drop,
}

/// A tenant as the select table keys it: the classifier's rules on the
/// ingress port, VLAN and destination MAC. The program looks up the exact
/// key, then the key with the MAC as `None` (a rule on the port, or port
/// and VLAN); frames that match neither go to the slow path, where the
/// host's classifier keys them as today (prefix, protocol and port rules
/// stay there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SelectKey {
    /// Ingress interface index.
    pub ifindex: u32,
    /// 802.1Q VLAN id (0..=4095), `None` for untagged frames.
    pub vlan: Option<u16>,
    /// Destination MAC; `None`: any.
    pub dst_mac: Option<[u8; 6]>,
}

/// A per-tenant rate limit at the port: `rate_pps` frames per second
/// after a burst of `burst`. Kept in the select entry and updated without
/// atomics: exact for a tenant whose frames arrive on one rx queue; across
/// queues served by several CPUs at once it may over-admit a little (see
/// the header of `ebpf/xdp_router.c`), never under-admit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    /// Frames per second (> 0).
    pub rate_pps: u64,
    /// Bucket size in frames.
    pub burst: u64,
}

/// A select table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectEntry {
    /// The VR the tenant's frames belong to.
    pub vr: u32,
    /// Where they go.
    pub path: Path,
    /// A rate limit (applied before the path), or none.
    pub limit: Option<TokenBucket>,
}

/// A VR's fast-path settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VrFastConfig {
    /// How routes are chosen.
    pub mode: RoutingMode,
    /// The router's own addresses: frames to them go to the slow path.
    pub addrs: Vec<Ipv4Addr>,
}

/// A route's next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NextHop {
    /// Through a gateway (looked up in the neighbours).
    Gateway(Ipv4Addr),
    /// On link: the packet's destination is looked up in the neighbours.
    Connected,
}

/// A neighbour: how a frame to it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbour {
    /// Its MAC (the frame's new destination).
    pub mac: [u8; 6],
    /// The out port's MAC (the frame's new source).
    pub src_mac: [u8; 6],
    /// The out port (must be in the out ports: [`FastPath::add_port`]).
    pub ifindex: u32,
}

/// An XDP verdict, as [`FastPath::test_run`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `XDP_ABORTED`.
    Aborted,
    /// `XDP_DROP`.
    Drop,
    /// `XDP_PASS`: the kernel stack (the slow path's fallback).
    Pass,
    /// `XDP_TX`.
    Tx,
    /// `XDP_REDIRECT`: to an out port, or to the slow path's socket.
    Redirect,
    /// Anything else.
    Other(u32),
}

impl Action {
    pub(crate) fn from_raw(v: u32) -> Action {
        match v {
            0 => Action::Aborted,
            1 => Action::Drop,
            2 => Action::Pass,
            3 => Action::Tx,
            4 => Action::Redirect,
            v => Action::Other(v),
        }
    }
}

/// A VR's fast-path counters, summed over CPUs. `to_slow_*` are frames
/// handed to the VR's user-space instance, by reason; `drop_*` frames
/// dropped at the port, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FastCounters {
    /// Frames the select table gave this VR.
    pub rx: u64,
    /// Forwarded by the fast path: redirected to an out port. A transmit
    /// that fails after the program has returned (a full ring, a veth
    /// whose peer has no XDP program) is not seen here.
    pub fwd: u64,
    /// Path slow, or the VR not set up for the fast path.
    pub to_slow_select: u64,
    /// ARP, other ethertypes, VLAN-tagged frames.
    pub to_slow_not_ip: u64,
    /// IP options (IHL > 5).
    pub to_slow_options: u64,
    /// Bad header checksum (the user-space router counts and drops it).
    pub to_slow_bad_checksum: u64,
    /// Group MAC, or multicast, class E or broadcast destination.
    pub to_slow_group: u64,
    /// To one of the VR's own addresses.
    pub to_slow_local: u64,
    /// No route (user space sends ICMP net unreachable).
    pub to_slow_no_route: u64,
    /// TTL <= 1 (user space sends ICMP time exceeded).
    pub to_slow_ttl: u64,
    /// Next hop not in the neighbours (user space resolves it by ARP).
    pub to_slow_no_neighbour: u64,
    /// The neighbour's port is not an out port.
    pub to_slow_no_port: u64,
    /// Path drop.
    pub drop_select: u64,
    /// The tenant's token bucket was empty.
    pub drop_rate_limit: u64,
    /// Truncated, not version 4, bad lengths, or a source no host has.
    pub drop_bad_header: u64,
}

impl FastCounters {
    pub(crate) fn from_words(w: &[u64; abi::COUNTERS]) -> FastCounters {
        FastCounters {
            rx: w[0],
            fwd: w[1],
            to_slow_select: w[2],
            to_slow_not_ip: w[3],
            to_slow_options: w[4],
            to_slow_bad_checksum: w[5],
            to_slow_group: w[6],
            to_slow_local: w[7],
            to_slow_no_route: w[8],
            to_slow_ttl: w[9],
            to_slow_no_neighbour: w[10],
            to_slow_no_port: w[11],
            drop_select: w[12],
            drop_rate_limit: w[13],
            drop_bad_header: w[14],
        }
    }

    /// All frames handed to the slow path.
    pub fn to_slow(&self) -> u64 {
        self.to_slow_select
            + self.to_slow_not_ip
            + self.to_slow_options
            + self.to_slow_bad_checksum
            + self.to_slow_group
            + self.to_slow_local
            + self.to_slow_no_route
            + self.to_slow_ttl
            + self.to_slow_no_neighbour
            + self.to_slow_no_port
    }

    /// All frames dropped.
    pub fn dropped(&self) -> u64 {
        self.drop_select + self.drop_rate_limit + self.drop_bad_header
    }
}

/// A port the program is attached to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// Its name.
    pub ifname: String,
    /// Its index (in the namespace it was attached in).
    pub ifindex: u32,
    /// The mode obtained.
    pub mode: AttachMode,
}
