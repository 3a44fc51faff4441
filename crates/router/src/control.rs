//! Changing a running router: routes added, replaced and deleted by
//! control messages from the host ([`Vr::control`](vrhost_sdk::Vr::control)),
//! between two bursts, while the rest of the table keeps forwarding.
//!
//! ```json
//! {"routes": {"add": [{"prefix": "198.51.100.0/24", "via": "10.1.1.2"},
//!                     {"prefix": "2001:db8:9::/48", "via": "2001:db8:2::2"},
//!                     {"prefix": "203.0.113.0/24", "nexthop": 0}],
//!             "del": ["192.0.2.0/24"]}}
//! ```
//!
//! Prefixes are IPv4 or IPv6, each route's `via` of its prefix's family.
//! In routing modes src and src-dst an IPv4 route changes the policy
//! table as a route of `routes` would be in it: mode src, its prefix is a
//! source prefix; mode src-dst, it is in the table of source `0.0.0.0/0`
//! (created by the first such route).
//!
//! answered `{"added": 2, "replaced": 0, "deleted": 1, "routes": 9}`, and
//! `{"stats": true}`, answered `{"routes": 9, "neighbours": 3,
//! "burst_lookup": false, "peer_neigh_sent": 0, ...}` ([`RouterStats`]),
//! and `{"neighbours": true}`, answered `{"neighbours": [{"ip":
//! "10.1.0.9", "mac": "02:00:00:00:30:09", "vnic": 0}]}`
//! ([`ResolvedNeighbours`]: those ARP resolved, for the host's fast path,
//! which does no ARP of its own).
//!
//! A message is all or nothing: every entry is checked against the table
//! as it was before the message, as [`Router::new`] checks `routes`, and
//! the first fault is the error, naming its entry (`add[3].via 10.9.9.9:
//! in no connected subnet (give add[3].vnic)`, `del[0] "10.0.0.0/8": no
//! such route`); then nothing has changed. The deletes are applied first,
//! then the adds in order, so a message may delete a prefix and add it
//! back, and a prefix added twice gets the last next hop. Adding a prefix
//! that has a route replaces its next hop (`ip route replace`). The
//! routes of the router's own addresses (connected subnets, local and
//! broadcast addresses: those [`Router::new`] derives from `vnics`) can
//! be neither deleted nor replaced.
//!
//! Each route by `via` pins its gateway's neighbour entry (counted, see
//! `neigh.rs`); the pin goes with the route. The one effect a refused
//! message can have is that a new gateway's entry took the slot of an
//! unpinned neighbour (ARP learns it again when it is next used).
//!
//! Cost: the FIB takes about a million updates a second; decoding the JSON
//! takes about as long again (see [`vrhost_proto::CONTROL_CHUNK`] for the
//! size of a message).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::config::{Hops, Net, RouteTarget, burst_for, check_route, parse_net, release_hop};
use super::{Hop, RouteConfig, Router, counters};

/// A control message to the router: the `body` of a
/// [`HostMsg::Control`](vrhost_proto::HostMsg::Control).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterControl {
    /// `{"routes": {"add": [...], "del": [...]}}`: change routes; answered
    /// by a [`RouteChangeReply`].
    Routes(RouteChanges),
    /// `{"stats": true}`: answered by [`RouterStats`] (the value is not
    /// looked at).
    Stats(bool),
    /// `{"neighbours": true}`: answered by [`ResolvedNeighbours`] (the
    /// value is not looked at).
    Neighbours(bool),
}

/// The neighbours ARP has resolved (with a MAC frames may be sent to;
/// static ones are the config's and left out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedNeighbours {
    /// One per (address, vNIC).
    pub neighbours: Vec<ResolvedNeighbour>,
}

/// One neighbour ARP resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedNeighbour {
    /// Its IPv4 address.
    pub ip: String,
    /// Its MAC address.
    pub mac: String,
    /// The vNIC it is on.
    pub vnic: u16,
}

/// Routes to add or replace and to delete, applied together or not at
/// all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteChanges {
    /// Routes to add, or to replace if their prefix has a route; as the
    /// config's `routes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<RouteConfig>,
    /// Prefixes whose routes to delete, `A.B.C.D/LEN` or `X:X::X/LEN`
    /// (host bits ignored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub del: Vec<String>,
    /// Only check: answer as if applied, change nothing (the host checks
    /// every message of a bulk change before it applies the first).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// What a [`RouteChanges`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteChangeReply {
    /// Routes added or replaced (the length of `add`).
    pub added: usize,
    /// Of those, the ones that replaced a route of the same prefix.
    pub replaced: usize,
    /// Routes deleted (the length of `del`).
    pub deleted: usize,
    /// Routes in the table now, connected and local ones included.
    pub routes: usize,
}

/// The router's table sizes, and the counts the region has no room for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterStats {
    /// Routes in the table, connected and local ones included (IPv4 and
    /// IPv6).
    pub routes: usize,
    /// Neighbour entries in use (gateways, static and learned neighbours).
    pub neighbours: usize,
    /// Of `routes`, the IPv6 ones.
    #[serde(default)]
    pub routes6: usize,
    /// IPv6 neighbour entries in use (not counted in `neighbours`).
    #[serde(default)]
    pub neighbours6: usize,
    /// The router's IPv6 counters (`nd_*`, `icmp6_*`), by name: the
    /// region has no room for them.
    #[serde(default)]
    pub ipv6: std::collections::BTreeMap<String, u64>,
    /// Whether destinations are looked up a burst at a time.
    pub burst_lookup: bool,
    /// Neighbours told to the other instances ([`counters::PEER_NEIGH_SENT`]).
    #[serde(default)]
    pub peer_neigh_sent: u64,
    /// Neighbours not told, the queue full ([`counters::PEER_NEIGH_UNSENT`]).
    #[serde(default)]
    pub peer_neigh_unsent: u64,
    /// Peers' neighbour messages applied ([`counters::PEER_NEIGH_APPLIED`]).
    #[serde(default)]
    pub peer_neigh_applied: u64,
    /// Peers' neighbour messages refused ([`counters::PEER_NEIGH_BAD`]).
    #[serde(default)]
    pub peer_neigh_bad: u64,
    /// Frames handed to the control plane ([`counters::TO_CONTROL`]).
    #[serde(default)]
    pub to_control: u64,
    /// Frames from the control plane sent out ([`counters::FROM_CONTROL`]).
    #[serde(default)]
    pub from_control: u64,
}

impl Router {
    /// Apply `ch` whole, or nothing of it.
    ///
    /// # Errors
    /// The first entry at fault, named (`add[3].via ...`, `del[0] ...`):
    /// a bad prefix, next hop, gateway or vNIC; a delete of a prefix with
    /// no route or given twice; a delete or replace of a route of the
    /// router's own addresses; no room for a gateway in the neighbour
    /// table. The table is then as it was.
    pub fn change_routes(&mut self, ch: &RouteChanges) -> Result<RouteChangeReply, String> {
        // Check everything against the table as it is, changing nothing.
        let dels = self.check_dels(&ch.del)?;
        let adds = self.check_adds(&ch.add)?;
        let (ids, pinned) = self.pin_gateways(&adds)?;
        let replaced = if ch.dry_run {
            self.unpin(&pinned);
            adds.iter()
                .filter(|&&(net, _)| self.fib_get(net).is_some())
                .count()
        } else {
            let replaced = self.apply_changes(&dels, &adds, &ids, &pinned)?;
            self.burst = burst_for(self.burst_lookup, &self.fib);
            replaced
        };
        Ok(RouteChangeReply {
            added: adds.len(),
            replaced,
            deleted: dels.len(),
            routes: self.routes(),
        })
    }

    /// The route of `net`, if any. In modes src and src-dst an IPv4
    /// route is one of the policy table's, as `routes` are
    /// ([`policy_key`]).
    fn fib_get(&self, net: Net) -> Option<u32> {
        match (net, &self.policy) {
            (Net::V4(p, l), Some(pf)) => {
                let (s, sl, d, dl) = policy_key(pf.mode(), p, l);
                pf.get(s, sl, d, dl)
            }
            (Net::V4(p, l), None) => self.fib.get(p, l),
            (Net::V6(p, l), _) => self.fib6.get(p, l),
        }
    }

    /// Add or replace the route of `net`; the replaced hop.
    fn fib_insert(&mut self, net: Net, id: u32) -> Result<Option<u32>, vrhost_fib::FibError> {
        match (net, self.policy.as_mut()) {
            (Net::V4(p, l), Some(pf)) => {
                let (s, sl, d, dl) = policy_key(pf.mode(), p, l);
                pf.insert(s, sl, d, dl, id)
            }
            (Net::V4(p, l), None) => self.fib.insert(p, l, id),
            (Net::V6(p, l), _) => self.fib6.insert(p, l, id),
        }
    }

    /// Delete the route of `net`; its hop.
    fn fib_remove(&mut self, net: Net) -> Option<u32> {
        match (net, self.policy.as_mut()) {
            (Net::V4(p, l), Some(pf)) => {
                let (s, sl, d, dl) = policy_key(pf.mode(), p, l);
                pf.remove(s, sl, d, dl)
            }
            (Net::V4(p, l), None) => self.fib.remove(p, l),
            (Net::V6(p, l), _) => self.fib6.remove(p, l),
        }
    }

    /// The prefixes of `del`, host bits cleared: each with a route, not
    /// one of the router's own addresses, given once.
    fn check_dels(&self, del: &[String]) -> Result<Vec<Net>, String> {
        let mut dels = Vec::with_capacity(del.len());
        let mut seen = HashSet::with_capacity(del.len());
        for (i, s) in del.iter().enumerate() {
            let net = parse_net(s).map_err(|e| format!("del[{i}]: {e}"))?;
            match self.fib_get(net) {
                None => return Err(format!("del[{i}] {s:?}: no such route")),
                Some(id) if self.is_own(id) => {
                    return Err(format!("del[{i}] {s:?}: {OWN}"));
                }
                Some(_) => {}
            }
            if !seen.insert(net) {
                return Err(format!("del[{i}] {s:?}: deleted twice"));
            }
            dels.push(net);
        }
        Ok(dels)
    }

    /// The routes of `add`, checked as [`Router::new`] checks `routes`;
    /// none replaces a route of the router's own addresses.
    fn check_adds(&self, add: &[RouteConfig]) -> Result<Vec<(Net, RouteTarget)>, String> {
        let mut adds = Vec::with_capacity(add.len());
        for (i, r) in add.iter().enumerate() {
            let (net, target) = check_route(
                r,
                "add",
                i,
                &self.vnics,
                &self.hops,
                self.n_nexthops as usize,
            )?;
            if self.fib_get(net).is_some_and(|id| self.is_own(id)) {
                return Err(format!("add[{i}] {:?}: {OWN}", r.prefix));
            }
            adds.push((net, target));
        }
        Ok(adds)
    }

    /// Pin the gateways of `adds` and intern their hops: the hop id of
    /// each add, and the neighbour entries pinned. Fails when the
    /// neighbour table has no room, with nothing left pinned.
    fn pin_gateways(
        &mut self,
        adds: &[(Net, RouteTarget)],
    ) -> Result<(Vec<u32>, Vec<Pinned>), String> {
        let mut ids = Vec::with_capacity(adds.len());
        let mut pinned = Vec::new();
        for (i, &(_, target)) in adds.iter().enumerate() {
            let id = match target {
                RouteTarget::NextHop(nh) => nh,
                RouteTarget::Via6 { ip, vnic } => {
                    let hop = self.neigh6.pin(ip, vnic).map(|n| {
                        let neigh = n as u32;
                        (Pinned::V6(n), Hop::Gateway6 { vnic, neigh })
                    });
                    self.gateway_hop(i, hop, self.neigh6.capacity(), &mut pinned)?
                }
                RouteTarget::Via { ip, vnic } => {
                    let hop = self.neigh.pin(ip, vnic).map(|n| {
                        let neigh = n as u32;
                        (Pinned::V4(n), Hop::Gateway { vnic, neigh })
                    });
                    self.gateway_hop(i, hop, self.neigh.capacity(), &mut pinned)?
                }
            };
            ids.push(id);
        }
        Ok((ids, pinned))
    }

    /// The hop id of add `i`'s gateway, whose neighbour entry was just
    /// pinned (`pinned_hop`). `None` when the table (of `capacity` entries)
    /// had no room: then what `pinned` holds is given back.
    fn gateway_hop(
        &mut self,
        i: usize,
        pinned_hop: Option<(Pinned, Hop)>,
        capacity: usize,
        pinned: &mut Vec<Pinned>,
    ) -> Result<u32, String> {
        let Some((pin, hop)) = pinned_hop else {
            self.unpin(pinned);
            return Err(format!(
                "add[{i}].via: the neighbour table ({capacity} entries, arp.neighbours) has no \
                 room for it"
            ));
        };
        pinned.push(pin);
        let mut hops = Hops {
            hops: &mut self.hops,
            ids: &mut self.hop_ids,
        };
        Ok(hops.intern(hop))
    }

    /// Give back the pins of `pinned`.
    fn unpin(&mut self, pinned: &[Pinned]) {
        for &n in pinned {
            match n {
                Pinned::V4(n) => self.neigh.unpin(n),
                Pinned::V6(n) => self.neigh6.unpin(n),
            }
        }
    }

    /// Delete `dels`, then add `adds` (to hops `ids`): the number of adds
    /// that replaced a route. Only an insert can fail (the FIB's memory
    /// cap, 16 GiB: never in practice); what was done is then undone and
    /// the `pinned` entries given back.
    fn apply_changes(
        &mut self,
        dels: &[Net],
        adds: &[(Net, RouteTarget)],
        ids: &[u32],
        pinned: &[Pinned],
    ) -> Result<usize, String> {
        let mut undo: Vec<(Net, Option<u32>)> = Vec::with_capacity(dels.len() + adds.len());
        let mut released = Vec::with_capacity(dels.len());
        for &net in dels {
            let old = self.fib_remove(net);
            debug_assert!(old.is_some(), "checked above");
            undo.push((net, old));
            released.push(old);
        }
        let mut replaced = 0;
        for (i, (&(net, _), &id)) in adds.iter().zip(ids).enumerate() {
            match self.fib_insert(net, id) {
                Ok(old) => {
                    replaced += usize::from(old.is_some());
                    undo.push((net, old));
                    released.push(old);
                }
                Err(e) => {
                    self.undo_changes(&undo);
                    self.unpin(pinned);
                    return Err(format!("add[{i}]: {e} (nothing changed)"));
                }
            }
        }
        for old in released {
            release_hop(
                &mut self.neigh,
                &mut self.neigh6,
                &self.hops,
                self.n_nexthops as usize,
                old,
            );
        }
        Ok(replaced)
    }

    /// Put back the routes `undo` recorded (prefix, length, the hop before),
    /// the last change first.
    fn undo_changes(&mut self, undo: &[(Net, Option<u32>)]) {
        for &(net, old) in undo.iter().rev() {
            match old {
                // Best effort: fails only as the insert did.
                Some(old) => {
                    let _ = self.fib_insert(net, old);
                }
                None => {
                    self.fib_remove(net);
                }
            }
        }
    }

    /// The table sizes and the peer counts.
    pub fn stats(&self) -> RouterStats {
        let c = |i: usize| self.counters[i];
        let ipv6 = (counters::ND_SOLICITS..=counters::ICMP6_RATE_LIMITED)
            .chain([counters::ICMP6_PACKET_TOO_BIG])
            .map(|i| (counters::NAMES[i].to_string(), c(i)))
            .collect();
        RouterStats {
            routes: self.routes(),
            neighbours: self.neigh.used(),
            routes6: self.fib6.len(),
            neighbours6: self.neigh6.used(),
            ipv6,
            burst_lookup: self.burst,
            peer_neigh_sent: c(counters::PEER_NEIGH_SENT),
            peer_neigh_unsent: c(counters::PEER_NEIGH_UNSENT),
            peer_neigh_applied: c(counters::PEER_NEIGH_APPLIED),
            peer_neigh_bad: c(counters::PEER_NEIGH_BAD),
            to_control: c(counters::TO_CONTROL),
            from_control: c(counters::FROM_CONTROL),
        }
    }

    /// The neighbours ARP has resolved.
    pub fn resolved_neighbours(&self) -> ResolvedNeighbours {
        let neighbours = (self.neigh.iter())
            .filter(|n| n.has_mac() && n.state != super::neigh::State::Static)
            .map(|n| ResolvedNeighbour {
                ip: std::net::Ipv4Addr::from(n.ip).to_string(),
                mac: vrhost_packet::MacAddr(n.mac).to_string(),
                vnic: n.vnic,
            })
            .collect();
        ResolvedNeighbours { neighbours }
    }

    /// Whether hop `id` is of the router's own addresses.
    fn is_own(&self, id: u32) -> bool {
        matches!(
            self.hops.get(id as usize),
            Some(
                Hop::Connected { .. }
                    | Hop::Local
                    | Hop::Broadcast
                    | Hop::Connected6 { .. }
                    | Hop::Local6
            )
        )
    }

    /// [`Vr::control`](vrhost_sdk::Vr::control): decode a [`RouterControl`],
    /// apply it, encode the answer.
    pub(super) fn control_json(
        &mut self,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let msg = RouterControl::deserialize(body).map_err(|e| decode_error(body, &e))?;
        let reply = match msg {
            RouterControl::Routes(ch) => serde_json::to_value(self.change_routes(&ch)?),
            RouterControl::Stats(_) => serde_json::to_value(self.stats()),
            RouterControl::Neighbours(_) => serde_json::to_value(self.resolved_neighbours()),
        };
        reply.map_err(|e| e.to_string())
    }
}

/// A neighbour entry pinned by a route being added.
#[derive(Debug, Clone, Copy)]
enum Pinned {
    V4(usize),
    V6(usize),
}

/// Where an IPv4 route of `routes` (and of the API) is in the policy
/// table of `mode`, as [`PolicyFib::insert`](vrhost_fib::PolicyFib::insert)
/// takes it: mode src, the source prefix `p/l`; mode src-dst, the
/// destination `p/l` in the table of source `0.0.0.0/0`.
fn policy_key(mode: vrhost_fib::RoutingMode, p: u32, l: u8) -> (u32, u8, u32, u8) {
    match mode {
        vrhost_fib::RoutingMode::SrcDst => (0, 0, p, l),
        _ => (p, l, 0, 0),
    }
}

/// Why a route of the router's own addresses stays.
const OWN: &str = "a route of the router's own addresses (connected subnet, local or \
                   broadcast address): it changes only with the vNICs' addresses";

/// serde's error for a bad body, with the entry at fault named when it is
/// one of `routes.add` (serde does not say which element failed).
fn decode_error(body: &serde_json::Value, e: &serde_json::Error) -> String {
    let add = body
        .get("routes")
        .and_then(|r| r.get("add"))
        .and_then(|a| a.as_array());
    for (i, r) in add.into_iter().flatten().enumerate() {
        if let Err(e) = RouteConfig::deserialize(r) {
            return format!("add[{i}]: {e}");
        }
    }
    format!("bad router control message: {e}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{NeighbourConfig, RouterConfig, VnicConfig};
    use super::*;

    #[test]
    fn the_neighbours_message_lists_those_arp_resolved_not_static_ones() {
        let cfg = RouterConfig {
            vnics: vec![VnicConfig {
                mac: "02:00:00:00:01:01".into(),
                addrs: vec!["10.0.1.1/24".into()],
                mtu: None,
            }],
            neighbours: vec![NeighbourConfig {
                ip: "10.0.1.9".into(),
                mac: "02:00:00:00:09:09".into(),
                vnic: None,
            }],
            ..RouterConfig::default()
        };
        let mut r = Router::new(&cfg).unwrap();
        let none = r.control_json(&json!({"neighbours": true})).unwrap();
        assert_eq!(none, json!({"neighbours": []}));
        // One resolved, one still being resolved.
        let i = r.neigh.insert(0x0a00_0107, 0).unwrap().0;
        r.learn(i, [2, 0, 0, 0, 7, 7]);
        r.neigh.insert(0x0a00_0108, 0).unwrap();
        let got = r.control_json(&json!({"neighbours": true})).unwrap();
        assert_eq!(
            got,
            json!({"neighbours": [{"ip": "10.0.1.7", "mac": "02:00:00:00:07:07", "vnic": 0}]})
        );
    }
}
