//! The built-in VR: an IPv4 router.
//!
//! Per packet: Ethernet and IPv4 header validation (EtherType, version, IHL,
//! total length, header checksum), TTL check and decrement with the
//! incremental checksum update of RFC 1624, longest-prefix match on the
//! destination, then the next hop's out vNIC and MAC addresses are written
//! in place. Every drop is counted by reason. ARP, ICMP errors and IPv6 come
//! with the real-interface work; until then neighbours are static.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use vrhost_fib::Ipv4Fib;
use vrhost_packet::MacAddr;
use vrhost_packet::ethernet::{EtherType, EthernetFrame};
use vrhost_packet::ipv4::Ipv4Packet;

use crate::sdk::{DropReason, Packet, Verdict, Vr};

/// One vNIC of the router.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VnicConfig {
    /// The vNIC's MAC address, the source of frames it sends.
    pub mac: String,
}

/// A next hop: where a route sends packets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NextHopConfig {
    /// Out vNIC.
    pub vnic: u16,
    /// The neighbour's MAC address.
    pub mac: String,
}

/// A static route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// `A.B.C.D/LEN`.
    pub prefix: String,
    /// Index into `nexthops`.
    pub nexthop: u32,
}

/// The router's configuration (the `config` of its [`crate::proto::Hello`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// vNICs, in index order.
    pub vnics: Vec<VnicConfig>,
    /// Next hops, referred to by index.
    pub nexthops: Vec<NextHopConfig>,
    /// Static routes.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// A route file (any format `vrhost route import` reads); each route goes
    /// to next hop `ASN mod len(nexthops)` (or 0 without an ASN).
    #[serde(default)]
    pub route_file: Option<String>,
}

/// A resolved next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NextHop {
    vnic: u16,
    dst: [u8; 6],
    src: [u8; 6],
}

/// The built-in IPv4 router.
#[derive(Debug)]
pub struct Router {
    fib: Ipv4Fib,
    nexthops: Vec<NextHop>,
}

/// Parse `A.B.C.D/LEN`.
pub fn parse_prefix(s: &str) -> Result<(u32, u8), String> {
    let (a, l) = s
        .split_once('/')
        .ok_or_else(|| format!("prefix {s:?}: expected A.B.C.D/LEN"))?;
    let addr: Ipv4Addr = a
        .parse()
        .map_err(|_| format!("prefix {s:?}: bad address {a:?}"))?;
    let len: u8 = l
        .parse()
        .map_err(|_| format!("prefix {s:?}: bad length {l:?}"))?;
    if len > 32 {
        return Err(format!("prefix {s:?}: length {len} > 32"));
    }
    Ok((u32::from(addr), len))
}

impl Router {
    /// Build the router: resolve next hops, load static routes and the route
    /// file.
    ///
    /// # Errors
    /// A message naming the bad field (vNIC or next hop index out of range,
    /// bad MAC, bad prefix, unreadable route file).
    pub fn new(cfg: &RouterConfig) -> Result<Self, String> {
        let macs = cfg
            .vnics
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.mac
                    .parse::<MacAddr>()
                    .map_err(|e| format!("vnics[{i}].mac {:?}: {e}", v.mac))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let nexthops = cfg
            .nexthops
            .iter()
            .enumerate()
            .map(|(i, nh)| {
                let src = macs.get(usize::from(nh.vnic)).ok_or_else(|| {
                    format!(
                        "nexthops[{i}].vnic {} out of range ({} vNICs)",
                        nh.vnic,
                        macs.len()
                    )
                })?;
                let dst = nh
                    .mac
                    .parse::<MacAddr>()
                    .map_err(|e| format!("nexthops[{i}].mac {:?}: {e}", nh.mac))?;
                Ok(NextHop {
                    vnic: nh.vnic,
                    dst: dst.0,
                    src: src.0,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut fib = Ipv4Fib::new();
        for (i, r) in cfg.routes.iter().enumerate() {
            let (p, l) = parse_prefix(&r.prefix).map_err(|e| format!("routes[{i}]: {e}"))?;
            if r.nexthop as usize >= nexthops.len() {
                return Err(format!(
                    "routes[{i}].nexthop {} out of range ({} next hops)",
                    r.nexthop,
                    nexthops.len()
                ));
            }
            fib.insert(p, l, r.nexthop)
                .map_err(|e| format!("routes[{i}]: {e}"))?;
        }
        if let Some(path) = &cfg.route_file {
            if nexthops.is_empty() {
                return Err("route_file needs at least one next hop".into());
            }
            let set =
                vrhost_fib::import::read_routes(std::path::Path::new(path), &Default::default())
                    .map_err(|e| format!("route_file {path}: {e}"))?;
            let n = nexthops.len() as u32;
            for r in set.ipv4() {
                fib.insert(r.prefix, r.len, r.asn.unwrap_or(0) % n)
                    .map_err(|e| format!("route_file {path}: {e}"))?;
            }
        }
        Ok(Self { fib, nexthops })
    }

    /// Routes in the FIB.
    pub fn routes(&self) -> usize {
        self.fib.len()
    }
}

impl Vr for Router {
    #[inline]
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        let data = pkt.data_mut();
        let Ok(mut eth) = EthernetFrame::new_checked(&mut *data) else {
            return Verdict::Drop(DropReason::BadHeader);
        };
        if eth.ethertype() != EtherType::IPV4 {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let Ok(mut ip) = Ipv4Packet::new_checked(eth.payload_mut()) else {
            return Verdict::Drop(DropReason::BadHeader);
        };
        if !ip.verify_checksum() {
            return Verdict::Drop(DropReason::BadChecksum);
        }
        if ip.ttl() <= 1 {
            return Verdict::Drop(DropReason::TtlExpired);
        }
        let Some(nh) = self
            .fib
            .lookup(ip.dst_u32())
            .and_then(|id| self.nexthops.get(id as usize))
        else {
            return Verdict::Drop(DropReason::NoRoute);
        };
        ip.decrement_ttl();
        let d = pkt.data_mut();
        d[0..6].copy_from_slice(&nh.dst);
        d[6..12].copy_from_slice(&nh.src);
        Verdict::Forward(nh.vnic)
    }
}
