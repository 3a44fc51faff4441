//! The router's configuration, and building a [`Router`] from it.
//!
//! Two ways to say where packets go, usable together:
//! - by address, as a Linux host does: vNICs have addresses (`addrs`), from
//!   which connected routes follow; routes name a gateway (`via`), resolved
//!   by ARP, or by a static neighbour (`neighbours`);
//! - by next hop, the original form: `nexthops` with a vNIC and a MAC
//!   (no ARP), routes pointing at them by index (`nexthop`), and a
//!   `route_file` whose routes spread over them.
//!
//! Both IPv4 and IPv6: `addrs` holds addresses of either family, routes
//! IPv4 or IPv6 prefixes (a `via` of the prefix's family; next hops of
//! the original form serve both).
//!
//! ```toml
//! vnics = [
//!   { mac = "02:00:00:00:10:00", addrs = ["10.1.0.1/24", "2001:db8:1::1/64"] },
//!   { mac = "02:00:00:00:10:01", addrs = ["10.1.1.1/24", "2001:db8:2::1/64"] },
//! ]
//! routes = [
//!   { prefix = "0.0.0.0/0", via = "10.1.1.2" },
//!   { prefix = "::/0", via = "2001:db8:2::2" },
//!   { prefix = "192.0.2.0/24", nexthop = 0 },
//! ]
//! nexthops = [{ vnic = 1, mac = "02:00:00:00:20:02" }]
//! neighbours = [{ ip = "10.1.0.9", mac = "02:00:00:00:30:09", vnic = 0 }]
//! arp = { reachable_ms = 30000, retrans_ms = 100, probes = 3 }
//! icmp = { rate = 100, burst = 10 }
//! ipv6 = { drop_ext_headers = false }
//! ```

use std::collections::HashMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use vrhost_fib::{Ipv4Fib, Ipv6Fib, PolicyFib, RoutingMode};
use vrhost_packet::MacAddr;

pub(super) use super::addr6::{Net, parse_net};
mod build;

use super::addr6::{is_local6, parse_iface6, parse_ip6, vnic_for6};
use super::icmp::TokenBucket;
use super::neigh::NeighTable;
use super::peer::PeerState;
use super::{Clock, Hop, Iface, Iface6, Router, Timers, Vnic, counters};

/// One vNIC of the router.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VnicConfig {
    /// The vNIC's MAC address, the source of frames it sends.
    pub mac: String,
    /// Its addresses, IPv4 `A.B.C.D/LEN` or IPv6 `X:X::X/LEN`: the router
    /// answers ARP, neighbour solicitations and echo requests for them,
    /// and routes their subnets out of this vNIC (not those of IPv6
    /// link-local addresses, `fe80::/10`: every link has that prefix).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addrs: Vec<String>,
    /// The link's MTU (the largest IP packet it carries, 1280..=65535):
    /// an IPv6 packet to forward out of this vNIC that is larger gets an
    /// ICMPv6 packet too big instead. None: no limit is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
}

/// A next hop of the original form: where routes by index send packets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NextHopConfig {
    /// Out vNIC.
    pub vnic: u16,
    /// The neighbour's MAC address (static, no ARP). Empty: resolve `via`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// The neighbour's IPv4 address, resolved by ARP when `mac` is empty
    /// (with `mac`, a static neighbour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// A static route: to a next hop by index, or to a gateway by address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// `A.B.C.D/LEN` or `X:X::X/LEN`.
    pub prefix: String,
    /// Index into `nexthops`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nexthop: Option<u32>,
    /// The gateway's address, of the prefix's family, resolved by ARP or
    /// neighbour discovery (or a static neighbour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The gateway's vNIC; by default the vNIC whose subnet holds `via`.
    /// Given, `via` need not be in its subnets (Linux's `onlink`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnic: Option<u16>,
}

/// A static neighbour: never resolved, never aged, never changed by ARP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighbourConfig {
    /// Its IPv4 or IPv6 address.
    pub ip: String,
    /// Its MAC address.
    pub mac: String,
    /// Its vNIC; by default the vNIC whose subnet holds `ip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnic: Option<u16>,
}

/// Neighbour resolution (ARP) parameters. Linux's defaults are in the
/// comments; resolution here is driven by traffic (a request goes out in
/// the slot of a packet to the neighbour), so retries are faster. IPv6
/// neighbour discovery uses the same values, on a second table of
/// `neighbours` entries with `pending` buffers of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArpConfig {
    /// Entries in the neighbour table (rounded up to a power of two).
    pub neighbours: u32,
    /// Pending buffers: neighbours that may hold a packet while resolved.
    pub pending: u32,
    /// How long a confirmed MAC is used before it is confirmed again
    /// (Linux: `base_reachable_time_ms` 30000).
    pub reachable_ms: u64,
    /// Least time between two requests for one neighbour (Linux:
    /// `retrans_time_ms` 1000).
    pub retrans_ms: u64,
    /// Requests without an answer before giving up (Linux: `mcast_solicit`
    /// 3).
    pub probes: u8,
    /// After giving up, how long packets to the neighbour get ICMP host
    /// unreachable before it is tried again.
    pub failed_ms: u64,
}

impl Default for ArpConfig {
    fn default() -> Self {
        Self {
            neighbours: 1024,
            pending: 64,
            reachable_ms: 30_000,
            retrans_ms: 100,
            probes: 3,
            failed_ms: 1000,
        }
    }
}

/// ICMP error rate limit: a token bucket per router (Linux:
/// `icmp_msgs_per_sec` 1000, `icmp_msgs_burst` 50, per host). Echo
/// replies are not limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IcmpConfig {
    /// Errors per second (0: none at all).
    pub rate: u32,
    /// Errors sent back to back.
    pub burst: u32,
}

impl Default for IcmpConfig {
    fn default() -> Self {
        Self {
            rate: 100,
            burst: 10,
        }
    }
}

/// IPv6 forwarding options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Ipv6Config {
    /// Drop (and count, as `ext_header`) packets to forward that carry
    /// extension headers, rather than pass them (RFC 8200 4: a router
    /// examines none but hop-by-hop; RFC 9098 describes why operators
    /// filter them).
    pub drop_ext_headers: bool,
}

/// Mode src-dst: the routes of packets from `src` (longest match).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceTableConfig {
    /// The source prefix, `A.B.C.D/LEN` (host bits cleared).
    pub src: String,
    /// Its routes, IPv4, as `routes`.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
}

fn is_dst(m: &RoutingMode) -> bool {
    *m == RoutingMode::Dst
}

/// The router's configuration (the `config` of its [`vrhost_proto::Hello`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// vNICs, in index order.
    pub vnics: Vec<VnicConfig>,
    /// Next hops of the original form, referred to by index.
    #[serde(default)]
    pub nexthops: Vec<NextHopConfig>,
    /// Static routes.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// A route file (any format `vrhost route import` reads); each of its
    /// IPv4 routes goes to next hop `ASN mod len(nexthops)` (or 0 without
    /// an ASN); its IPv6 routes are skipped unless `route_file_ipv6`.
    #[serde(default)]
    pub route_file: Option<String>,
    /// Load the route file's IPv6 routes too, spread over the next hops
    /// the same way (every next hop then needs a static `mac`: one
    /// resolved by ARP cannot carry IPv6).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub route_file_ipv6: bool,
    /// Static neighbours.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neighbours: Vec<NeighbourConfig>,
    /// Neighbour resolution.
    #[serde(default)]
    pub arp: ArpConfig,
    /// ICMP error rate limit.
    #[serde(default)]
    pub icmp: IcmpConfig,
    /// IPv6 forwarding options.
    #[serde(default)]
    pub ipv6: Ipv6Config,
    /// How IPv4 routes are chosen (`policy.rs`): `"dst"` (longest match
    /// on the destination), `"src"` (on the source: each route's `prefix`
    /// is a source prefix) or `"src-dst"` (the longest matching source
    /// prefix of `source_tables` selects a table, `routes` being the
    /// table of `0.0.0.0/0`; the destination is looked up in it, with no
    /// fallback to another table). In modes src and src-dst, frames to the
    /// router's own and broadcast addresses are still for the router, but
    /// connected subnets give no route of their own, the API does not
    /// change routes, and IPv6 is routed by destination.
    #[serde(default, skip_serializing_if = "is_dst")]
    pub mode: RoutingMode,
    /// Mode src-dst: the tables of other source prefixes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_tables: Vec<SourceTableConfig>,
    /// Look destinations up a burst at a time (their cache misses
    /// overlap) rather than one by one. By default (`None`) the router
    /// does when its table is too large for the caches (more than 1 MiB
    /// below the 256 KiB root), where that pays; one by one is cheaper for
    /// a table the caches hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_lookup: Option<bool>,
    /// The control vNIC of each vNIC (empty: no control plane): frames
    /// for the router it does not handle go there, and what comes in on
    /// it leaves by its vNIC unchanged (`cplane.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub control_vnics: Vec<u16>,
    /// Every frame of a vNIC goes to its control vNIC, untouched: the
    /// router handles none itself, and the control namespace is the data
    /// plane (a `kind = "tap"` VR). Needs `control_vnics`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub control_all: bool,
}

pub(crate) use crate::prefix::parse_addr_len;
pub use crate::prefix::{parse_prefix, parse_prefix6};

/// An interface address, `A.B.C.D/LEN` with the host part kept.
fn parse_iface(s: &str) -> Result<Iface, String> {
    let (addr, len) = parse_prefix(s)?;
    let i = Iface { addr, len };
    if len == 0 {
        return Err("length 0: an interface address needs a subnet".into());
    }
    if !unicast(addr) {
        return Err("not a unicast address".into());
    }
    if len <= 30 && addr & !i.mask() == 0 {
        return Err("the subnet's network address".into());
    }
    if len <= 30 && addr == i.broadcast() {
        return Err("the subnet's broadcast address".into());
    }
    Ok(i)
}

/// An address a host may have: not 0.0.0.0/8, not multicast, class E or
/// broadcast.
fn unicast(a: u32) -> bool {
    a >> 24 != 0 && a < 0xe000_0000
}

fn parse_ip(s: &str) -> Result<u32, String> {
    s.parse::<Ipv4Addr>()
        .map(u32::from)
        .map_err(|_| format!("{s:?}: not an IPv4 address"))
}

fn parse_unicast_mac(s: &str) -> Result<[u8; 6], String> {
    let m = s.parse::<MacAddr>().map_err(|e| format!("{s:?}: {e}"))?;
    if !m.is_unicast() || m == MacAddr::ZERO {
        return Err(format!("{s:?}: not a unicast MAC address"));
    }
    Ok(m.0)
}

/// The vNIC whose subnet holds `ip`, the longest subnet first.
fn vnic_for(vnics: &[Vnic], ip: u32) -> Option<u16> {
    vnics
        .iter()
        .enumerate()
        .flat_map(|(v, n)| n.addrs.iter().map(move |a| (v, a)))
        .filter(|(_, a)| a.contains(ip))
        .max_by_key(|(_, a)| a.len)
        .map(|(v, _)| v as u16)
}

fn is_local(vnics: &[Vnic], ip: u32) -> bool {
    vnics.iter().any(|v| v.addrs.iter().any(|a| a.addr == ip))
}

/// Tables of at least this many 1 KiB groups (beyond the root) are looked
/// up a burst at a time by default: 1 MiB, more than a core's L2 cache.
const BURST_GROUPS: usize = 1024;

/// Whether to look up in bursts: as configured, else by the table's size.
pub(super) fn burst_for(cfg: Option<bool>, fib: &Ipv4Fib) -> bool {
    cfg.unwrap_or(fib.groups_used() >= BURST_GROUPS)
}

/// Hop ids: next hops of the original form keep their index; the others
/// are shared by equal hops.
pub(super) struct Hops<'a> {
    pub hops: &'a mut Vec<Hop>,
    pub ids: &'a mut HashMap<Hop, u32>,
}

impl Hops<'_> {
    pub fn intern(&mut self, h: Hop) -> u32 {
        *self.ids.entry(h).or_insert_with(|| {
            self.hops.push(h);
            (self.hops.len() - 1) as u32
        })
    }
}

/// A route that no longer uses hop `old` (deleted, or replaced) gives back
/// its pin on the gateway's neighbour entry. Each route by `via` holds one
/// (hops past the next hops of the original form); the next hops of the
/// original form hold theirs for good.
pub(super) fn release_hop(
    neigh: &mut NeighTable,
    neigh6: &mut NeighTable<u128>,
    hops: &[Hop],
    n_nexthops: usize,
    old: Option<u32>,
) {
    let Some(old) = old else { return };
    if (old as usize) < n_nexthops {
        return;
    }
    match hops.get(old as usize) {
        Some(&Hop::Gateway { neigh: n, .. }) => neigh.unpin(n as usize),
        Some(&Hop::Gateway6 { neigh: n, .. }) => neigh6.unpin(n as usize),
        _ => {}
    }
}

/// Where a checked route goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RouteTarget {
    /// A next hop of the original form, by index.
    NextHop(u32),
    /// A gateway, resolved by ARP, out of `vnic`.
    Via {
        /// Its address.
        ip: u32,
        /// Its vNIC.
        vnic: u16,
    },
    /// An IPv6 gateway, resolved by neighbour discovery, out of `vnic`.
    Via6 {
        /// Its address.
        ip: u128,
        /// Its vNIC.
        vnic: u16,
    },
}

/// Check route `list[i]` against the vNICs and the next hops (the first
/// `n_nexthops` of `hops`): its prefix (returned with the host bits
/// cleared) and where it goes. Errors name the field, `routes[3].via ...`.
pub(super) fn check_route(
    r: &RouteConfig,
    list: &str,
    i: usize,
    vnics: &[Vnic],
    hops: &[Hop],
    n_nexthops: usize,
) -> Result<(Net, RouteTarget), String> {
    let net = parse_net(&r.prefix).map_err(|e| format!("{list}[{i}]: {e}"))?;
    let target = match (r.nexthop, &r.via) {
        (Some(nh), None) => {
            if r.vnic.is_some() {
                return Err(format!("{list}[{i}].vnic: only with via"));
            }
            if nh as usize >= n_nexthops {
                return Err(format!(
                    "{list}[{i}].nexthop {nh} out of range ({n_nexthops} next hops)"
                ));
            }
            if matches!(net, Net::V6(..))
                && matches!(hops.get(nh as usize), Some(Hop::Gateway { .. }))
            {
                return Err(format!(
                    "{list}[{i}].nexthop {nh}: resolved by ARP (an IPv4 via), not for an IPv6 route"
                ));
            }
            RouteTarget::NextHop(nh)
        }
        (None, Some(via_s)) => {
            let vnic_given = match r.vnic {
                Some(v) if usize::from(v) < vnics.len() => Some(v),
                Some(v) => {
                    return Err(format!(
                        "{list}[{i}].vnic {v} out of range ({} vNICs)",
                        vnics.len()
                    ));
                }
                None => None,
            };
            let no_subnet = || {
                format!("{list}[{i}].via {via_s}: in no connected subnet (give {list}[{i}].vnic)")
            };
            let own = || format!("{list}[{i}].via {via_s}: one of the router's own addresses");
            match net {
                Net::V4(..) => {
                    let ip = parse_ip(via_s).map_err(|e| format!("{list}[{i}].via {e}"))?;
                    if is_local(vnics, ip) {
                        return Err(own());
                    }
                    let vnic = vnic_given
                        .or_else(|| vnic_for(vnics, ip))
                        .ok_or_else(no_subnet)?;
                    RouteTarget::Via { ip, vnic }
                }
                Net::V6(..) => {
                    let ip = parse_ip6(via_s).map_err(|e| format!("{list}[{i}].via {e}"))?;
                    if is_local6(vnics, ip) {
                        return Err(own());
                    }
                    if ip == 0 || vrhost_packet::ipv6::is_multicast(ip) {
                        return Err(format!("{list}[{i}].via {via_s}: not a unicast address"));
                    }
                    // A link-local gateway is on the link it is given for.
                    let vnic = vnic_given
                        .or_else(|| vnic_for6(vnics, ip))
                        .ok_or_else(no_subnet)?;
                    RouteTarget::Via6 { ip, vnic }
                }
            }
        }
        (Some(_), Some(_)) => {
            return Err(format!("{list}[{i}]: give nexthop or via, not both"));
        }
        (None, None) => return Err(format!("{list}[{i}]: needs nexthop or via")),
    };
    Ok((net, target))
}

impl Router {
    /// Build the router: vNICs and their addresses, next hops, static
    /// neighbours, routes (static, route file, connected, local).
    ///
    /// # Errors
    /// A message naming the bad field (vNIC, next hop or neighbour out of
    /// range, bad MAC or address, bad prefix, a `via` in no connected
    /// subnet, unreadable route file, a table too small).
    pub fn new(cfg: &RouterConfig) -> Result<Self, String> {
        let vnics = build_vnics(&cfg.vnics)?;
        let cplane = super::cplane::Cplane::new(&cfg.control_vnics, vnics.len(), cfg.control_all)?;
        let a = cfg.arp;
        check_arp(&a)?;
        let mut b = Build {
            vnics,
            neigh: NeighTable::new(a.neighbours as usize, a.pending as usize),
            neigh_entries: a.neighbours,
            hops: Vec::new(),
            hop_ids: HashMap::new(),
            n_nexthops: 0,
            fib: Ipv4Fib::new(),
            fib6: Ipv6Fib::new(),
            neigh6: NeighTable::new(a.neighbours as usize, a.pending as usize),
            policy: (cfg.mode != RoutingMode::Dst).then(|| PolicyFib::new(cfg.mode)),
        };
        b.nexthops(&cfg.nexthops)?;
        b.neighbours(&cfg.neighbours)?;
        b.routes(&cfg.routes, "routes", (0, 0))?;
        b.source_tables(cfg.mode, &cfg.source_tables)?;
        if let Some(path) = &cfg.route_file {
            b.route_file(path, cfg.route_file_ipv6)?;
        }
        b.own_routes()?;
        let burst = burst_for(cfg.burst_lookup, &b.fib);
        Ok(Self {
            burst,
            burst_lookup: cfg.burst_lookup,
            fib: b.fib,
            policy: b.policy.map(Box::new),
            hops: b.hops,
            hop_ids: b.hop_ids,
            n_nexthops: b.n_nexthops as u32,
            vnics: b.vnics,
            neigh: b.neigh,
            fib6: b.fib6,
            neigh6: b.neigh6,
            drop_ext_headers: cfg.ipv6.drop_ext_headers,
            timers: Timers {
                reachable_ms: a.reachable_ms,
                retrans_ms: a.retrans_ms,
                probes: a.probes,
                failed_ms: a.failed_ms,
            },
            bucket: TokenBucket::new(cfg.icmp.rate, cfg.icmp.burst),
            bucket6: TokenBucket::new(cfg.icmp.rate, cfg.icmp.burst),
            clock: Clock::Coarse,
            now: None,
            peer: PeerState::new(a.pending as usize),
            cplane,
            counters: [0; counters::COUNT],
        })
    }
}

/// IPv6's minimum link MTU (RFC 8200 5).
const MIN_MTU6: u16 = 1280;

/// The vNICs: their MACs, their addresses, each given once, and MTUs.
fn build_vnics(cfg: &[VnicConfig]) -> Result<Vec<Vnic>, String> {
    if cfg.len() > usize::from(u16::MAX) {
        return Err(format!("vnics: {} > 65535", cfg.len()));
    }
    let mut vnics = Vec::with_capacity(cfg.len());
    for (i, v) in cfg.iter().enumerate() {
        let mac = parse_unicast_mac(&v.mac).map_err(|e| format!("vnics[{i}].mac {e}"))?;
        let mut addrs = Vec::with_capacity(v.addrs.len());
        let mut addrs6 = Vec::new();
        for (j, a) in v.addrs.iter().enumerate() {
            let at = format!("vnics[{i}].addrs[{j}] {a:?}");
            if a.contains(':') {
                let ifa = parse_iface6(a).map_err(|e| format!("{at}: {e}"))?;
                if is_local6(&vnics, ifa.addr) || addrs6.iter().any(|b: &Iface6| b.addr == ifa.addr)
                {
                    return Err(format!("{at}: address given twice"));
                }
                addrs6.push(ifa);
                continue;
            }
            let ifa = parse_iface(a).map_err(|e| format!("{at}: {e}"))?;
            if is_local(&vnics, ifa.addr) || addrs.iter().any(|b: &Iface| b.addr == ifa.addr) {
                return Err(format!("{at}: address given twice"));
            }
            addrs.push(ifa);
        }
        let mtu = match v.mtu {
            None => u16::MAX,
            Some(m) if m >= MIN_MTU6 => m,
            Some(m) => {
                return Err(format!(
                    "vnics[{i}].mtu {m}: must be 1280..=65535 (IPv6's minimum MTU)"
                ));
            }
        };
        vnics.push(Vnic {
            mac,
            addrs,
            addrs6,
            mtu,
        });
    }
    Ok(vnics)
}

/// The neighbour resolution parameters are in range.
fn check_arp(a: &ArpConfig) -> Result<(), String> {
    if !(1..=1 << 20).contains(&a.neighbours) {
        return Err(format!(
            "arp.neighbours {}: must be 1..=1048576",
            a.neighbours
        ));
    }
    if a.pending > 4096 {
        return Err(format!("arp.pending {}: must be 0..=4096", a.pending));
    }
    if a.retrans_ms == 0 || a.reachable_ms == 0 || a.probes == 0 {
        return Err("arp.retrans_ms, arp.reachable_ms and arp.probes must be above 0".into());
    }
    Ok(())
}

/// A router under construction: [`Router::new`]'s steps fill it in, in
/// order (next hops, neighbours, routes, route file, own routes).
struct Build {
    vnics: Vec<Vnic>,
    neigh: NeighTable,
    /// `arp.neighbours`, named when the table has no room.
    neigh_entries: u32,
    hops: Vec<Hop>,
    hop_ids: HashMap<Hop, u32>,
    /// Next hops of the original form: the first hops, by index.
    n_nexthops: usize,
    fib: Ipv4Fib,
    fib6: Ipv6Fib,
    neigh6: NeighTable<u128>,
    /// Modes src and src-dst: the table of the IPv4 routes (`fib` then
    /// holds the own routes only).
    policy: Option<PolicyFib<u32>>,
}
