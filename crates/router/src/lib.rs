//! vrhost-router: the built-in VR, an IPv4 and IPv6 router that Linux
//! hosts can use as their gateway.
//!
//! What it owns: the router's packet path, its ARP and ICMP, its config
//! ([`RouterConfig`], which the host's config checks a `kind = "router"` VR
//! against) and its control messages ([`RouterControl`]: routes added and
//! removed while it runs). It is one VR among others: written with
//! `vrhost-sdk` like a tenant's VR, run as a process by the daemon
//! (`vrhost vr-run`) or called in the host thread by `vrhost bench memory`.
//! What it does not own: the LPM table (`vrhost-fib`), the header views
//! (`vrhost-packet`), the poll loop and the protocol (`vrhost-sdk`,
//! `vrhost-proto`).
//!
//! Per burst of packets (the runtime's [`BATCH`](vrhost_sdk::runtime::BATCH);
//! for a table the caches hold, packets one by one, which is cheaper there:
//! see [`RouterConfig::burst_lookup`]):
//! 1. each frame is checked: Ethernet, then ARP (see [ARP](self#arp)) or
//!    IPv4 (version, IHL, lengths, header checksum); IPv6 frames go their
//!    own way here (see [IPv6](self#ipv6));
//!    frames to a group MAC address, to a multicast, class E or broadcast
//!    address, or from a source no host may have, are not forwarded;
//! 2. the destinations of the rest are looked up together
//!    ([`Ipv4Fib::lookup_batch`]: the table's cache misses overlap);
//! 3. each packet goes where its route says: to one of the router's own
//!    addresses (ICMP echo is answered), or, its TTL decremented with the
//!    incremental checksum update of RFC 1624, to a next hop whose MAC is
//!    configured, or resolved by ARP. ARP frames are handled in this step
//!    too, in their place among the others, so that a burst does exactly
//!    what its packets would one by one.
//!
//! Every drop is counted by reason ([`DropReason`]); the router's own
//! counts (ARP and ICMP sent, ...) are [`counters`].
//!
//! # ARP
//!
//! The router answers requests for the addresses of the vNIC they arrive
//! on (Linux's `arp_ignore=1`), in place: the request's slot becomes the
//! reply. It learns the sender of a request for it (creating an entry) and
//! of any ARP packet from a neighbour it already knows (updating it).
//! A VR cannot allocate slots, so resolution reuses the slots it is given:
//! the first packet to an unresolved neighbour is copied into a pending
//! buffer and its slot becomes the broadcast request; the reply's slot
//! becomes the pending packet, MACs set. Requests for one neighbour go out
//! at most every `retrans_ms`, in the slot of a packet to it (which then
//! replaces the older pending packet); after `probes` of them without an
//! answer the packet gets an ICMP host unreachable, and so do the packets
//! of the next `failed_ms`. A MAC is used for `reachable_ms` after it was
//! confirmed, then confirmed again the same way while packets keep going
//! to it. Static neighbours never age. The neighbour table has a fixed
//! capacity (`arp.neighbours` entries, `arp.pending` pending buffers of
//! 2048 bytes, both allocated once; `neigh.rs` says how entries are placed
//! and evicted).
//!
//! # Instances
//!
//! Each instance of the VR has its own neighbour table, and the host's
//! balancer hands an ARP reply to one instance, not always the one that
//! asked (it hashes a non-IP frame by its MACs, so every reply of one
//! neighbour reaches the same instance). So an instance that learns a
//! neighbour from ARP tells the others through [`Vr::peers`] (a 13-byte
//! message: vNIC, address, MAC; `peer.rs`), when the MAC is new to it or
//! changed, and for every reply to the router's MAC, whether or not it
//! has an entry itself (some instance asked). An instance told updates the
//! entry it has as the reply would have (it adds none, and tells nobody:
//! no echoes). Replies come at most one per request, and a neighbour's own
//! requests repeating a known MAC are not told, so the messages follow the
//! requests' pace (`retrans_ms`); messages for one neighbour still queued
//! are merged. The packet an instance kept for the neighbour has no slot
//! to leave in (the reply's slot went to the other instance): it leaves
//! in the slot of the next packet the router consumes (an ARP frame, a
//! packet kept for another neighbour) if that comes within
//! `retrans_ms x probes` of the message; otherwise it is discarded
//! (counted in `arp_unres_discards`, as a packet left waiting by a request
//! that resolved its neighbour is). A router alone (one instance) sends
//! nothing and, once its first round has told it so, is not asked again.
//!
//! # ICMP
//!
//! Echo requests to the router's addresses are answered in place (TTL 64,
//! IP options dropped). Time exceeded (TTL <= 1), net unreachable (no
//! route) and host unreachable (ARP failed) are sent in place of the
//! packet: its IP header and 8 bytes of its data quoted (RFC 792), from the
//! address of the vNIC the error leaves by, TTL 64, at most `icmp.rate` per
//! second after a burst of `icmp.burst` (a token bucket, like Linux's
//! `icmp_ratelimit`); never about an ICMP error, a fragment other than the
//! first, or to a source no host may have (RFC 1812 4.3.2.7). An error or
//! reply goes out of the vNIC the route back to its destination names; on
//! the vNIC the packet came in by, to the frame's source MAC.
//!
//! # Time
//!
//! The clock (`CLOCK_MONOTONIC_COARSE`, read through the vDSO: no system
//! call) is read at most once per burst (per packet when they come one by
//! one), and only for packets that need it: to a neighbour resolved by
//! ARP or neighbour discovery, ARP and ND themselves, ICMP and ICMPv6
//! errors. Packets to next hops with a configured MAC never read it.
//!
//! # IPv6
//!
//! IPv6 frames take their own branch after the EtherType test (the IPv4
//! path above is unchanged), one packet at a time (no batched lookup),
//! in step 1 of a burst: they touch only IPv6 state (the IPv6 table,
//! neighbour cache and ICMPv6 bucket) besides counters, so their verdicts
//! are those they would have in order (`ipv6.rs`, `nd.rs`, `icmp6.rs`):
//! - checked: version, payload length, source not multicast, the
//!   extension header chain walked (bounded; a truncated or misordered
//!   chain is [`DropReason::BadHeader`]); frames carrying extension
//!   headers are passed, or dropped as [`DropReason::ExtHeader`] when
//!   `ipv6.drop_ext_headers` is set;
//! - multicast destinations are not forwarded ([`DropReason::Multicast`]);
//!   the router takes the neighbour discovery messages sent to its
//!   solicited-node groups and to all-nodes;
//! - link-local sources and destinations do not leave their link
//!   ([`DropReason::LinkLocal`]); link-local addresses of the router's own
//!   (given in `addrs`) are answered on their vNIC;
//! - the destination is looked up in an [`Ipv6Fib`]; the hop limit is
//!   decremented (no checksum); hop limit <= 1 gets an ICMPv6 time
//!   exceeded (code 0), no route a destination unreachable (code 0), a
//!   failed resolution a destination unreachable (code 3, address
//!   unreachable). Errors quote as much of the packet as fits in 1280
//!   bytes (RFC 4443 2.4 (c)), are never sent about an ICMPv6 error, to an
//!   unspecified or link-local source, and are rate-limited by a token
//!   bucket of their own with the `icmp.rate` and `icmp.burst` of IPv4's
//!   (two buckets: an IPv6 flood does not silence IPv4 errors);
//! - the router's own addresses answer echo requests, and neighbour
//!   solicitations for them with a solicited advertisement (router,
//!   solicited and override flags, target link-layer option); the
//!   sender of a solicitation with a source link-layer option is learned,
//!   and an advertisement updates the entry it answers;
//! - next hops are resolved as ARP resolves them, with the same timers
//!   (`arp.*`) and a sibling table of the same size: a neighbour
//!   solicitation to the target's solicited-node group in the slot of
//!   the first packet, which waits in a pending buffer; the advertisement's
//!   slot carries it out.
//!
//! A packet larger than its out vNIC's `mtu` (when one is given) gets an
//! ICMPv6 packet too big with that MTU (RFC 4443 3.2), under the same
//! rate limit, checked before the next hop is resolved.
//!
//! Not for IPv6: redirects, router advertisements (solicitations are
//! ignored), duplicate address detection for its own addresses, batched
//! lookups, and neighbours told to the other instances: peers carry IPv4
//! neighbours only, and the host's balancer hands an IPv6 frame to an
//! instance by its MACs, so an advertisement may reach an instance that
//! did not ask. IPv6 through a router of more than one instance is not
//! expected to resolve its next hops reliably yet.
//!
//! # Not here
//!
//! Local delivery to a control plane without control vNICs (packets to
//! the router other than ARP and echo are then dropped as
//! [`DropReason::LocalUnsupported`]; with `control_vnics`, see
//! `cplane.rs`, they go to the control plane), VLAN tags, IP options processing,
//! fragmentation and MTUs, ICMP redirects, proxy ARP.

#![forbid(unsafe_code)]

mod addr6;
mod arp;
mod config;
mod control;
mod cplane;
mod icmp;
mod icmp6;
mod ipv6;
mod nd;
mod neigh;
mod peer;
mod prefix;
mod resolve;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

pub use vrhost_fib::RoutingMode;
use vrhost_fib::{Ipv4Fib, Ipv6Fib, PolicyFib};
use vrhost_packet::ethernet::{self, EtherType, EthernetFrame};
use vrhost_packet::ipv4::Ipv4Packet;

pub use config::{
    ArpConfig, IcmpConfig, Ipv6Config, NeighbourConfig, NextHopConfig, RouteConfig, RouterConfig,
    SourceTableConfig, VnicConfig, parse_prefix, parse_prefix6,
};
pub use control::{
    ResolvedNeighbour, ResolvedNeighbours, RouteChangeReply, RouteChanges, RouterControl,
    RouterStats,
};

use self::icmp::TokenBucket;
use self::neigh::NeighTable;
use self::peer::PeerState;
use self::resolve::Arp;
use vrhost_sdk::peer::Peers;
use vrhost_sdk::{DropReason, Packet, Verdict, Vr};

/// Packets looked up together.
const BURST: usize = vrhost_sdk::runtime::BATCH;

/// The router's own counters ([`Vr::counters`]). The SDK publishes the
/// first [`VR_SLOTS`](vrhost_proto::counter::VR_SLOTS) in the region, from
/// [`vrhost_proto::counter::VR_BASE`] on (up to `NEIGH_TABLE_FULL`); the
/// region has no room for the peer counts after them, which the
/// `{"stats": true}` control message answers ([`RouterStats`]).
pub mod counters {
    /// ARP requests sent (resolving a next hop).
    pub const ARP_REQUESTS: usize = 0;
    /// ARP replies sent (for the router's addresses).
    pub const ARP_REPLIES: usize = 1;
    /// Neighbour entries created or updated from ARP.
    pub const ARP_LEARNED: usize = 2;
    /// Packets that waited for ARP and left when the reply came.
    pub const ARP_RELEASED: usize = 3;
    /// Packets lost while waiting for ARP: replaced in the pending buffer
    /// by a newer one, evicted, given up on, or not buffered at all (no
    /// buffer free, or too long) when their slot carried the request
    /// (Linux's `unresolved_discards`).
    pub const ARP_UNRES_DISCARDS: usize = 4;
    /// Resolutions given up (no reply to `arp.probes` requests).
    pub const ARP_FAILED: usize = 5;
    /// ICMP echo replies sent.
    pub const ICMP_ECHO_REPLIES: usize = 6;
    /// ICMP time exceeded sent.
    pub const ICMP_TIME_EXCEEDED: usize = 7;
    /// ICMP net unreachable sent.
    pub const ICMP_NET_UNREACHABLE: usize = 8;
    /// ICMP host unreachable sent.
    pub const ICMP_HOST_UNREACHABLE: usize = 9;
    /// ICMP errors not sent because of the rate limit.
    pub const ICMP_RATE_LIMITED: usize = 10;
    /// Packets to a neighbour that found no room in the neighbour table.
    pub const NEIGH_TABLE_FULL: usize = 11;
    /// Neighbours told to the other instances (peer messages sent).
    pub const PEER_NEIGH_SENT: usize = 12;
    /// Neighbours not told: the queue of messages to send was full.
    pub const PEER_NEIGH_UNSENT: usize = 13;
    /// Neighbour messages from peers that installed or refreshed an entry.
    pub const PEER_NEIGH_APPLIED: usize = 14;
    /// Neighbour messages from peers refused as malformed (length, kind,
    /// vNIC, address or MAC), and ignored.
    pub const PEER_NEIGH_BAD: usize = 15;
    /// Neighbour solicitations sent (resolving an IPv6 next hop).
    pub const ND_SOLICITS: usize = 16;
    /// Neighbour advertisements sent (for the router's addresses).
    pub const ND_ADVERTS: usize = 17;
    /// IPv6 neighbour entries created or updated from ND.
    pub const ND_LEARNED: usize = 18;
    /// Packets that waited for ND and left when the advertisement came.
    pub const ND_RELEASED: usize = 19;
    /// Packets lost while waiting for ND (as `ARP_UNRES_DISCARDS`).
    pub const ND_UNRES_DISCARDS: usize = 20;
    /// IPv6 resolutions given up (no advertisement to `arp.probes`
    /// solicitations).
    pub const ND_FAILED: usize = 21;
    /// ICMPv6 echo replies sent.
    pub const ICMP6_ECHO_REPLIES: usize = 22;
    /// ICMPv6 time exceeded sent.
    pub const ICMP6_TIME_EXCEEDED: usize = 23;
    /// ICMPv6 destination unreachable, no route (code 0), sent.
    pub const ICMP6_NO_ROUTE: usize = 24;
    /// ICMPv6 destination unreachable, address unreachable (code 3), sent.
    pub const ICMP6_ADDR_UNREACHABLE: usize = 25;
    /// ICMPv6 errors not sent because of the rate limit.
    pub const ICMP6_RATE_LIMITED: usize = 26;
    /// Frames for the router handed to its control plane (`cplane.rs`).
    pub const TO_CONTROL: usize = 27;
    /// Frames from the control plane sent out of their data vNIC.
    pub const FROM_CONTROL: usize = 28;
    /// ICMPv6 packet too big sent (a packet larger than its out vNIC's
    /// MTU).
    pub const ICMP6_PACKET_TOO_BIG: usize = 29;
    /// Number of counters.
    pub const COUNT: usize = 30;
    /// Counters published in the region.
    pub const PUBLISHED: usize = NEIGH_TABLE_FULL + 1;
    /// Their names, in order.
    pub const NAMES: [&str; COUNT] = [
        "arp_requests",
        "arp_replies",
        "arp_learned",
        "arp_released",
        "arp_unres_discards",
        "arp_failed",
        "icmp_echo_replies",
        "icmp_time_exceeded",
        "icmp_net_unreachable",
        "icmp_host_unreachable",
        "icmp_rate_limited",
        "neigh_table_full",
        "peer_neigh_sent",
        "peer_neigh_unsent",
        "peer_neigh_applied",
        "peer_neigh_bad",
        "nd_solicits",
        "nd_adverts",
        "nd_learned",
        "nd_released",
        "nd_unres_discards",
        "nd_failed",
        "icmp6_echo_replies",
        "icmp6_time_exceeded",
        "icmp6_no_route",
        "icmp6_addr_unreachable",
        "icmp6_rate_limited",
        "to_control",
        "from_control",
        "icmp6_packet_too_big",
    ];
    const _: () = assert!(PUBLISHED <= vrhost_proto::counter::VR_SLOTS);
}

/// Where a route sends packets: the FIB maps a prefix to an index into
/// the router's hops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Hop {
    /// A next hop with a configured MAC (no ARP).
    Static {
        vnic: u16,
        dst: [u8; 6],
        src: [u8; 6],
    },
    /// A gateway resolved by ARP; `neigh` is its (pinned) table slot.
    Gateway { vnic: u16, neigh: u32 },
    /// A connected subnet: the destination is the neighbour.
    Connected { vnic: u16 },
    /// One of the router's addresses.
    Local,
    /// The broadcast address of a connected subnet.
    Broadcast,
    /// An IPv6 gateway resolved by ND; `neigh` is its slot in the IPv6
    /// neighbour table.
    Gateway6 { vnic: u16, neigh: u32 },
    /// A connected IPv6 subnet.
    Connected6 { vnic: u16 },
    /// One of the router's IPv6 addresses.
    Local6,
}

/// The netmask of a `len`-bit prefix (0 for `/0`).
fn mask(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

/// An address of a vNIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Iface {
    addr: u32,
    len: u8,
}

impl Iface {
    fn mask(self) -> u32 {
        mask(self.len)
    }

    fn contains(self, ip: u32) -> bool {
        (ip ^ self.addr) & self.mask() == 0
    }

    fn broadcast(self) -> u32 {
        self.addr | !self.mask()
    }
}

/// An IPv6 address of a vNIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Iface6 {
    addr: u128,
    len: u8,
}

impl Iface6 {
    fn contains(self, ip: u128) -> bool {
        (ip ^ self.addr) & mask6(self.len) == 0
    }
}

/// The netmask of a `len`-bit IPv6 prefix.
fn mask6(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

#[derive(Debug, Clone)]
struct Vnic {
    mac: [u8; 6],
    addrs: Vec<Iface>,
    addrs6: Vec<Iface6>,
    /// The largest IPv6 packet forwarded out of it (`u16::MAX`: no
    /// limit; an IPv6 packet is never larger).
    mtu: u16,
}

#[derive(Debug, Clone, Copy)]
struct Timers {
    reachable_ms: u64,
    retrans_ms: u64,
    probes: u8,
    failed_ms: u64,
}

#[derive(Debug, Clone, Copy)]
enum Clock {
    /// `CLOCK_MONOTONIC_COARSE`.
    Coarse,
    /// Set by tests.
    #[cfg_attr(not(test), expect(dead_code, reason = "the tests' clock"))]
    Manual(u64),
}

/// What the first look at a packet decided.
enum Ingress {
    /// Dropped.
    Done(Verdict),
    /// An ARP packet (handled in step 3, in order with the others).
    Arp,
    /// An IPv4 packet to route; its destination and source.
    Lookup(u32, u32),
    /// An IPv6 frame (checked and routed on its own, see `ipv6.rs`).
    Ipv6,
}

/// In a burst's list of packets for step 3: the packet is ARP.
const ARP_MARK: u8 = 0x80;
const _: () = assert!(BURST <= ARP_MARK as usize);

/// The built-in IPv4 and IPv6 router.
#[derive(Debug)]
pub struct Router {
    /// Whether the runtime should hand over bursts ([`Vr::prefers_burst`]).
    burst: bool,
    /// The config's choice ([`RouterConfig::burst_lookup`]): `None` decides
    /// `burst` by the table's size, again after each route change.
    burst_lookup: Option<bool>,
    fib: Ipv4Fib,
    /// Routing modes src and src-dst (`RouterConfig::mode`): the IPv4
    /// routes of the config; `fib` then holds the own routes only.
    policy: Option<Box<PolicyFib<u32>>>,
    /// Indexed by the FIB's next-hop ids: first the next hops of the
    /// original form (`n_nexthops` of them, by their index), then the
    /// others, one per distinct hop (`hop_ids`).
    hops: Vec<Hop>,
    hop_ids: HashMap<Hop, u32>,
    n_nexthops: u32,
    vnics: Vec<Vnic>,
    neigh: NeighTable,
    /// Indexed by the same hop ids as `fib`: IPv6 routes use the next hops
    /// of the original form and the `*6` hops.
    fib6: Ipv6Fib,
    /// The IPv6 neighbour cache.
    neigh6: NeighTable<u128>,
    /// `ipv6.drop_ext_headers`.
    drop_ext_headers: bool,
    timers: Timers,
    bucket: TokenBucket,
    /// ICMPv6 errors' bucket (same rate and burst as `bucket`).
    bucket6: TokenBucket,
    clock: Clock,
    /// The time of this burst in milliseconds, once read.
    now: Option<u64>,
    /// Neighbours told to and by the other instances.
    peer: PeerState,
    /// Control vNICs (local delivery to a control plane).
    cplane: cplane::Cplane,
    counters: [u64; counters::COUNT],
}

impl Router {
    /// Routes in the FIBs, IPv4 and IPv6 (connected and local routes
    /// included).
    pub fn routes(&self) -> usize {
        self.fib.len() + self.fib6.len() + self.policy.as_ref().map_or(0, |p| p.len())
    }

    /// Modes src and src-dst: the route of a packet from `src` to `dst`
    /// whose own route (`fib`'s answer) is `own`: that route if it is
    /// one of the router's own or broadcast addresses, else the policy
    /// table's.
    #[inline(never)]
    fn policy_route(
        &self,
        p: &PolicyFib<u32>,
        own: Option<u32>,
        src: u32,
        dst: u32,
    ) -> Option<u32> {
        match own.and_then(|id| self.hops.get(id as usize)) {
            Some(Hop::Local | Hop::Broadcast) => own,
            _ => p.lookup(src, dst),
        }
    }

    /// The time in milliseconds, read at most once per burst.
    #[inline]
    fn now(&mut self) -> u64 {
        if let Some(t) = self.now {
            return t;
        }
        let t = match self.clock {
            Clock::Coarse => {
                let ts = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
                (ts.tv_sec as u64) * 1000 + (ts.tv_nsec as u64) / 1_000_000
            }
            Clock::Manual(t) => t,
        };
        self.now = Some(t);
        t
    }

    /// Run the router on a manual clock at `ms` (tests).
    #[cfg(test)]
    fn set_time(&mut self, ms: u64) {
        self.clock = Clock::Manual(ms);
        self.now = None;
    }

    /// Step 1: check the frame; find what to look up. No side effects, so
    /// that a burst does exactly what its packets one by one would.
    #[inline(always)]
    fn ingress(&self, pkt: &Packet<'_>, cplane: bool) -> Ingress {
        // `cplane`: the router has a control plane (read once per burst:
        // a router without one pays nothing per packet here).
        if cplane && let Some(out) = self.cplane.bypass(pkt.rx_vnic()) {
            return Ingress::Done(Verdict::Forward(out));
        }
        let d = pkt.data();
        let Ok(eth) = EthernetFrame::new_checked(d) else {
            return Ingress::Done(Verdict::Drop(DropReason::BadHeader));
        };
        match eth.ethertype() {
            EtherType::IPV4 => {}
            EtherType::ARP => return Ingress::Arp,
            EtherType::IPV6 => return Ingress::Ipv6,
            _ => return Ingress::Done(Verdict::Drop(DropReason::Unsupported)),
        }
        // Untagged: the IPv4 header follows the 14-byte Ethernet header.
        let Ok(ip) = Ipv4Packet::new_checked(&d[ethernet::HEADER_LEN..]) else {
            return Ingress::Done(Verdict::Drop(DropReason::BadHeader));
        };
        if !ip.verify_checksum() {
            return Ingress::Done(Verdict::Drop(DropReason::BadChecksum));
        }
        // 0.0.0.0/32, multicast, class E and broadcast are no host's
        // address (RFC 1812 5.3.7): 0 wraps to the top of the range.
        if ip.src_u32().wrapping_sub(1) >= 0xdfff_ffff {
            return Ingress::Done(Verdict::Drop(DropReason::BadHeader));
        }
        // Link-layer group frames and group or broadcast destinations are
        // for the router as a host, never forwarded (RFC 1812 5.3.4,
        // Linux's ip_forward takes PACKET_HOST frames only).
        let dst = ip.dst_u32();
        if dst >= 0xe000_0000 || d[0] & 1 != 0 {
            return Ingress::Done(Verdict::Drop(DropReason::LocalUnsupported));
        }
        Ingress::Lookup(dst, ip.src_u32())
    }

    /// Step 3: send the packet where its route says. Next hops with a
    /// configured MAC here; the rest out of line.
    #[inline(always)]
    fn route(&mut self, pkt: &mut Packet<'_>, id: Option<u32>) -> Verdict {
        let Some(hop) = id.and_then(|id| self.hops.get(id as usize)) else {
            return self.net_unreachable(pkt);
        };
        if let Hop::Static { vnic, dst, src } = *hop {
            let d = pkt.data_mut();
            let mut ip = Ipv4Packet::new_unchecked(&mut d[ethernet::HEADER_LEN..]);
            if ip.ttl() <= 1 {
                return self.time_exceeded(pkt);
            }
            ip.decrement_ttl();
            d[0..6].copy_from_slice(&dst);
            d[6..12].copy_from_slice(&src);
            return Verdict::Forward(vnic);
        }
        self.route_other(pkt, *hop)
    }

    /// [`Router::route`] for hops other than [`Hop::Static`].
    #[inline(never)]
    fn route_other(&mut self, pkt: &mut Packet<'_>, hop: Hop) -> Verdict {
        let vnic = match hop {
            Hop::Gateway { vnic, .. } | Hop::Connected { vnic } => vnic,
            Hop::Local => return self.local_in(pkt),
            Hop::Broadcast => return Verdict::Drop(DropReason::LocalUnsupported),
            Hop::Static { .. } => unreachable!("routed inline"),
            // IPv6 hops are only ever in the IPv6 table.
            Hop::Gateway6 { .. } | Hop::Connected6 { .. } | Hop::Local6 => {
                return Verdict::Drop(DropReason::Other);
            }
        };
        let ip = Ipv4Packet::new_unchecked(&pkt.data()[ethernet::HEADER_LEN..]);
        if ip.ttl() <= 1 {
            return self.time_exceeded(pkt);
        }
        let i = match hop {
            Hop::Gateway { neigh, .. } => neigh as usize,
            _ => match self.neigh.insert(ip.dst_u32(), vnic) {
                Some((i, discarded)) => {
                    self.counters[counters::ARP_UNRES_DISCARDS] += discarded;
                    i
                }
                None => {
                    self.counters[counters::NEIGH_TABLE_FULL] += 1;
                    return Verdict::Drop(DropReason::ArpUnresolved);
                }
            },
        };
        self.send_to_neighbour::<Arp>(pkt, vnic, i)
    }

    /// Forward to `mac` out of `vnic`: TTL, MAC addresses.
    #[inline]
    fn send_to(&mut self, pkt: &mut Packet<'_>, vnic: u16, mac: [u8; 6]) -> Verdict {
        let d = pkt.data_mut();
        Ipv4Packet::new_unchecked(&mut d[14..]).decrement_ttl();
        d[0..6].copy_from_slice(&mac);
        d[6..12].copy_from_slice(&self.vnics[usize::from(vnic)].mac);
        Verdict::Forward(vnic)
    }
}

impl Vr for Router {
    #[inline]
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        self.now = None;
        let mut v = [match self.ingress(pkt, self.cplane.is_on()) {
            Ingress::Done(v) => v,
            Ingress::Arp => self.arp_in(pkt),
            Ingress::Ipv6 => self.ipv6_in(pkt),
            Ingress::Lookup(dst, src) => {
                let mut id = self.fib.lookup(dst);
                if let Some(p) = &self.policy {
                    id = self.policy_route(p, id, src, dst);
                }
                self.route(pkt, id)
            }
        }];
        if self.cplane.is_on() {
            self.hand_to_control(std::slice::from_ref(&*pkt), &mut v);
        }
        v[0]
    }

    #[inline]
    fn process_burst(&mut self, pkts: &mut [Packet<'_>], verdicts: &mut [Verdict]) {
        self.now = None;
        let n = pkts.len().min(verdicts.len());
        let cplane = self.cplane.is_on();
        for (pkts, verdicts) in pkts[..n]
            .chunks_mut(BURST)
            .zip(verdicts[..n].chunks_mut(BURST))
        {
            let mut dsts = [0u32; BURST];
            let mut srcs = [0u32; BURST];
            let mut at = [0u8; BURST];
            let mut m = 0;
            for (i, (p, v)) in pkts.iter_mut().zip(verdicts.iter_mut()).enumerate() {
                match self.ingress(p, cplane) {
                    Ingress::Done(x) => *v = x,
                    Ingress::Arp => {
                        // Looked up as 0.0.0.0 for nothing: ARP is rare.
                        at[m] = i as u8 | ARP_MARK;
                        m += 1;
                    }
                    // IPv6 touches only IPv6 state (its table, neighbour
                    // cache and ICMPv6 bucket) besides counters, so it
                    // is handled here, out of the IPv4 steps, with the
                    // verdicts it would have in order.
                    Ingress::Ipv6 => *v = self.ipv6_in(p),
                    Ingress::Lookup(dst, src) => {
                        dsts[m] = dst;
                        srcs[m] = src;
                        at[m] = i as u8;
                        m += 1;
                    }
                }
            }
            let mut ids = [None; BURST];
            self.fib.lookup_batch(&dsts[..m], &mut ids[..m]);
            if let Some(p) = &self.policy {
                for k in 0..m {
                    ids[k] = self.policy_route(p, ids[k], srcs[k], dsts[k]);
                }
            }
            for (&a, &id) in at[..m].iter().zip(&ids[..m]) {
                let i = usize::from(a & !ARP_MARK);
                verdicts[i] = if a & ARP_MARK != 0 {
                    self.arp_in(&mut pkts[i])
                } else {
                    self.route(&mut pkts[i], id)
                };
            }
        }
        if cplane {
            self.hand_to_control(&pkts[..n], &mut verdicts[..n]);
        }
    }

    #[inline]
    fn prefers_burst(&self) -> bool {
        self.burst
    }

    fn counters(&self) -> &[u64] {
        &self.counters
    }

    /// Route changes and stats: [`RouterControl`].
    fn control(&mut self, body: &serde_json::Value) -> Result<serde_json::Value, String> {
        self.control_json(body)
    }

    /// Until the first [`Vr::peers`] says the VR has a single instance
    /// (the count is known only there); then never again.
    #[inline]
    fn uses_peers(&self) -> bool {
        self.peer.has_peers()
    }

    /// Neighbours learned by ARP, told to and by the other instances.
    #[inline]
    fn peers(&mut self, peers: &mut Peers<'_>) {
        self.serve_peers(peers);
    }
}
