//! Building a router's tables from its config: the vNICs, next hops, neighbours and routes checked and entered ([`Build`]'s steps).

use vrhost_fib::RoutingMode;

use super::{
    Build, Hops, NeighbourConfig, Net, NextHopConfig, RouteConfig, RouteTarget, SourceTableConfig,
    check_route, parse_ip, parse_unicast_mac, release_hop, vnic_for,
};
use crate::addr6::{parse_ip6, vnic_for6};
use crate::prefix::parse_prefix;
use crate::{Hop, Iface, Iface6, mask6};

impl Build {
    /// Vnic `v` of `field`, if there is one.
    pub(super) fn vnic_ok(&self, v: u16, field: &str) -> Result<u16, String> {
        let nv = self.vnics.len();
        if usize::from(v) < nv {
            Ok(v)
        } else {
            Err(format!("{field} {v} out of range ({nv} vNICs)"))
        }
    }

    /// The error for `field` when the neighbour table is full.
    pub(super) fn full(&self, field: &str) -> String {
        format!(
            "{field}: the neighbour table ({} entries, arp.neighbours) has no room for it",
            self.neigh_entries
        )
    }

    /// The hop id of route `i`'s gateway, whose neighbour entry was just
    /// pinned (`None`: the table had no room).
    pub(super) fn gateway_hop(&mut self, i: usize, pinned: Option<Hop>) -> Result<u32, String> {
        let hop = pinned.ok_or_else(|| self.full(&format!("routes[{i}].via")))?;
        Ok(self.interner().intern(hop))
    }

    /// The hops, for interning.
    pub(super) fn interner(&mut self) -> Hops<'_> {
        Hops {
            hops: &mut self.hops,
            ids: &mut self.hop_ids,
        }
    }

    /// Route `p/l` to hop `id`; the hop of a route it replaces gives back
    /// its pin. `at` names the entry in the error. `src`: a route of the
    /// config (not an own route), in the table of that source prefix in
    /// mode src-dst.
    pub(super) fn insert(
        &mut self,
        net: Net,
        src: Option<(u32, u8)>,
        id: u32,
        at: impl FnOnce() -> String,
    ) -> Result<(), String> {
        let old = match (net, src, self.policy.as_mut()) {
            // Mode src takes the route's prefix as the source prefix.
            (Net::V4(p, l), Some((s, sl)), Some(pf)) => match pf.mode() {
                RoutingMode::Src => pf.insert(p, l, 0, 0, id),
                _ => pf.insert(s, sl, p, l, id),
            },
            (Net::V4(p, l), ..) => self.fib.insert(p, l, id),
            (Net::V6(p, l), ..) => self.fib6.insert(p, l, id),
        }
        .map_err(|e| format!("{}: {e}", at()))?;
        release_hop(
            &mut self.neigh,
            &mut self.neigh6,
            &self.hops,
            self.n_nexthops,
            old,
        );
        Ok(())
    }

    /// The next hops of the original form, hops `0..n_nexthops`: a
    /// gateway resolved by ARP, or a static MAC.
    pub(super) fn nexthops(&mut self, cfg: &[NextHopConfig]) -> Result<(), String> {
        for (i, nh) in cfg.iter().enumerate() {
            let vnic = self.vnic_ok(nh.vnic, &format!("nexthops[{i}].vnic"))?;
            let via = nh
                .via
                .as_deref()
                .map(parse_ip)
                .transpose()
                .map_err(|e| format!("nexthops[{i}].via {e}"))?;
            let hop = if nh.mac.is_empty() {
                let via = via.ok_or_else(|| format!("nexthops[{i}]: needs mac or via"))?;
                let n = self
                    .neigh
                    .pin(via, vnic)
                    .ok_or_else(|| self.full(&format!("nexthops[{i}].via")))?;
                Hop::Gateway {
                    vnic,
                    neigh: n as u32,
                }
            } else {
                let dst =
                    parse_unicast_mac(&nh.mac).map_err(|e| format!("nexthops[{i}].mac {e}"))?;
                if let Some(via) = via {
                    self.neigh
                        .set_static(via, vnic, dst)
                        .ok_or_else(|| self.full(&format!("nexthops[{i}].via")))?;
                }
                Hop::Static {
                    vnic,
                    dst,
                    src: self.vnics[usize::from(vnic)].mac,
                }
            };
            // Not interned: routes and the route file refer to the index.
            self.hops.push(hop);
        }
        self.n_nexthops = self.hops.len();
        Ok(())
    }

    /// The static neighbours.
    pub(super) fn neighbours(&mut self, cfg: &[NeighbourConfig]) -> Result<(), String> {
        for (i, n) in cfg.iter().enumerate() {
            let mac = parse_unicast_mac(&n.mac).map_err(|e| format!("neighbours[{i}].mac {e}"))?;
            if n.ip.contains(':') {
                let ip = parse_ip6(&n.ip).map_err(|e| format!("neighbours[{i}].ip {e}"))?;
                let vnic = self.neighbour_vnic(i, n, vnic_for6(&self.vnics, ip))?;
                self.neigh6
                    .set_static(ip, vnic, mac)
                    .ok_or_else(|| self.full(&format!("neighbours[{i}]")))?;
                continue;
            }
            let ip = parse_ip(&n.ip).map_err(|e| format!("neighbours[{i}].ip {e}"))?;
            let vnic = self.neighbour_vnic(i, n, vnic_for(&self.vnics, ip))?;
            self.neigh
                .set_static(ip, vnic, mac)
                .ok_or_else(|| self.full(&format!("neighbours[{i}]")))?;
        }
        Ok(())
    }

    /// The vNIC of static neighbour `i` (`n`): the one it gives, else
    /// `connected`, the vNIC whose subnet holds its address.
    pub(super) fn neighbour_vnic(
        &self,
        i: usize,
        n: &NeighbourConfig,
        connected: Option<u16>,
    ) -> Result<u16, String> {
        match n.vnic {
            Some(v) => self.vnic_ok(v, &format!("neighbours[{i}].vnic")),
            None => connected.ok_or_else(|| {
                format!(
                    "neighbours[{i}].ip {}: in no connected subnet (give neighbours[{i}].vnic)",
                    n.ip
                )
            }),
        }
    }

    /// The static routes; each by `via` pins its gateway. The same prefix
    /// twice: the last one wins, the first one's gateway loses a route.
    pub(super) fn routes(
        &mut self,
        cfg: &[RouteConfig],
        list: &str,
        src: (u32, u8),
    ) -> Result<(), String> {
        for (i, r) in cfg.iter().enumerate() {
            let (net, target) = check_route(r, list, i, &self.vnics, &self.hops, self.n_nexthops)?;
            let id = match target {
                RouteTarget::NextHop(nh) => nh,
                RouteTarget::Via { ip, vnic } => {
                    let hop = self.neigh.pin(ip, vnic).map(|n| {
                        let neigh = n as u32;
                        Hop::Gateway { vnic, neigh }
                    });
                    self.gateway_hop(i, hop)?
                }
                RouteTarget::Via6 { ip, vnic } => {
                    let hop = self.neigh6.pin(ip, vnic).map(|n| {
                        let neigh = n as u32;
                        Hop::Gateway6 { vnic, neigh }
                    });
                    self.gateway_hop(i, hop)?
                }
            };
            if src.1 > 0 && matches!(net, Net::V6(..)) {
                return Err(format!("{list}[{i}]: IPv6 is routed by destination"));
            }
            self.insert(net, Some(src), id, || format!("{list}[{i}]"))?;
        }
        Ok(())
    }

    /// Mode src-dst's tables of other source prefixes.
    pub(super) fn source_tables(
        &mut self,
        mode: RoutingMode,
        cfg: &[SourceTableConfig],
    ) -> Result<(), String> {
        if mode != RoutingMode::SrcDst && !cfg.is_empty() {
            return Err("source_tables: only in mode src-dst".into());
        }
        for (t, st) in cfg.iter().enumerate() {
            let (s, l) =
                parse_prefix(&st.src).map_err(|e| format!("source_tables[{t}].src {e}"))?;
            if s & !crate::mask(l) != 0 {
                return Err(format!("source_tables[{t}].src {}: host bits set", st.src));
            }
            self.routes(&st.routes, &format!("source_tables[{t}].routes"), (s, l))?;
        }
        Ok(())
    }

    /// The route file's routes, spread over the next hops by ASN.
    pub(super) fn route_file(&mut self, path: &str, ipv6: bool) -> Result<(), String> {
        if self.n_nexthops == 0 {
            return Err("route_file needs at least one next hop".into());
        }
        let arp =
            (self.hops[..self.n_nexthops].iter()).position(|h| matches!(h, Hop::Gateway { .. }));
        if let (true, Some(nh)) = (ipv6, arp) {
            return Err(format!(
                "route_file_ipv6: nexthops[{nh}] is resolved by ARP (an IPv4 via), not for IPv6 routes; give its mac"
            ));
        }
        let set = vrhost_fib::import::read_routes(std::path::Path::new(path), &Default::default())
            .map_err(|e| format!("route_file {path}: {e}"))?;
        let n = self.n_nexthops as u32;
        // IPv4 routes only, as before the router had IPv6: a file's IPv6
        // routes (an MRT dump has both) would change what existing configs
        // load, and could go to a next hop resolved by ARP.
        for r in set.ipv4() {
            let id = r.asn.unwrap_or(0) % n;
            self.insert(Net::V4(r.prefix, r.len), Some((0, 0)), id, || {
                format!("route_file {path}")
            })?;
        }
        for r in set.ipv6().filter(|_| ipv6) {
            self.insert(
                Net::V6(r.prefix, r.len),
                None,
                r.asn.unwrap_or(0) % n,
                || format!("route_file {path}"),
            )?;
        }
        Ok(())
    }

    /// The routes of the vNICs' addresses, last: connected subnets win
    /// over static routes of the same prefix (as Linux's metric 0), local
    /// and broadcast addresses over everything (Linux's local table).
    pub(super) fn own_routes(&mut self) -> Result<(), String> {
        let addrs: Vec<(usize, Iface)> = (self.vnics.iter().enumerate())
            .flat_map(|(v, n)| n.addrs.iter().map(move |&a| (v, a)))
            .collect();
        let at = |v: usize| move || format!("vnics[{v}].addrs");
        for &(v, ifa) in &addrs {
            let id = self.interner().intern(Hop::Connected { vnic: v as u16 });
            self.insert(Net::V4(ifa.addr & ifa.mask(), ifa.len), None, id, at(v))?;
        }
        for &(v, ifa) in &addrs {
            let local = self.interner().intern(Hop::Local);
            self.insert(Net::V4(ifa.addr, 32), None, local, at(v))?;
            if ifa.len <= 30 {
                let b = self.interner().intern(Hop::Broadcast);
                self.insert(Net::V4(ifa.broadcast(), 32), None, b, at(v))?;
            }
        }
        // IPv6: no broadcast; link-local addresses are answered on their
        // vNIC without a route (`ipv6.rs`).
        let addrs6: Vec<(usize, Iface6)> = (self.vnics.iter().enumerate())
            .flat_map(|(v, n)| n.addrs6.iter().map(move |&a| (v, a)))
            .filter(|(_, a)| !vrhost_packet::ipv6::is_link_local(a.addr))
            .collect();
        for &(v, ifa) in &addrs6 {
            let id = self.interner().intern(Hop::Connected6 { vnic: v as u16 });
            self.insert(Net::V6(ifa.addr & mask6(ifa.len), ifa.len), None, id, at(v))?;
        }
        for &(v, ifa) in &addrs6 {
            let local = self.interner().intern(Hop::Local6);
            self.insert(Net::V6(ifa.addr, 128), None, local, at(v))?;
        }
        Ok(())
    }
}
