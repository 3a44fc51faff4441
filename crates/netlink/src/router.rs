//! Route batches as the built-in router's control messages
//! ([`vrhost_router::RouteChanges`]).
//!
//! The router forwards IPv4 and IPv6 to a gateway (`via`) of the
//! prefix's family, so of a [`RouteBatch`] it takes unicast routes with a
//! gateway of their own family; blackhole/unreachable/prohibit routes,
//! routes with no gateway (a subnet on a link), routes with a gateway of
//! the other family (`RTA_VIA`) and routes out of an interface the caller
//! did not map to a vNIC are skipped and counted ([`ConvertStats`]).
//!
//! [`RouterSync`] remembers which prefixes it gave the router, because
//! the router refuses a whole message that deletes a prefix it has no
//! route for: a withdrawal of a skipped route is dropped, and a route
//! replaced by one that cannot be converted becomes a delete.
//!
//! What the daemon still has to mind: the router also refuses to replace
//! or delete the routes of its own addresses (connected subnets), and a
//! gateway in no connected subnet of the vNIC; a routing daemon in the
//! control namespace normally exports neither (BIRD's `protocol direct`
//! routes are proto kernel or scope link there, which the watch skips).

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use ipnet::IpNet;
use vrhost_router::{RouteChanges, RouteConfig};

use crate::{Route, RouteBatch, RouteKind};

/// Routes of batches that [`RouterSync`] could not convert, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConvertStats {
    /// Routes converted.
    pub converted: u64,
    /// Of `converted`, IPv6 routes.
    pub ipv6: u64,
    /// Blackhole, unreachable or prohibit routes (not in the router yet).
    pub not_unicast: u64,
    /// Routes without a gateway.
    pub no_gateway: u64,
    /// Routes with a gateway of the other family (`RTA_VIA`).
    pub gateway_family: u64,
    /// Routes out of an interface not in the vNIC map.
    pub unmapped_interface: u64,
    /// Withdrawals of routes never given to the router (skipped), dropped.
    pub deletes_dropped: u64,
}

/// Why a route cannot go to the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unfit {
    NotUnicast,
    NoGateway,
    GatewayFamily,
    Unmapped,
}

/// Turns [`RouteBatch`]es into the router's [`RouteChanges`], tracking
/// what the router was given.
#[derive(Debug, Clone, Default)]
pub struct RouterSync {
    vnics: HashMap<String, u16>,
    given: HashSet<IpNet>,
    stats: ConvertStats,
}

impl RouterSync {
    /// `vnics` maps the control namespace's interface names to the VR's
    /// vNIC indices (one TAP per vNIC).
    pub fn new(vnics: HashMap<String, u16>) -> Self {
        Self {
            vnics,
            given: HashSet::new(),
            stats: ConvertStats::default(),
        }
    }

    /// What was converted and skipped so far.
    pub fn stats(&self) -> ConvertStats {
        self.stats
    }

    /// Prefixes the router holds from this sync (as far as it knows:
    /// every change it returned was applied).
    pub fn given(&self) -> usize {
        self.given.len()
    }

    /// The router's changes for `b`: deletes first, then adds, as
    /// [`vrhost_router::Router::change_routes`] applies them.
    pub fn convert(&mut self, b: &RouteBatch) -> RouteChanges {
        let mut ch = RouteChanges::default();
        for p in &b.del {
            match self.given.remove(p) {
                true => ch.del.push(p.to_string()),
                false => self.stats.deletes_dropped += 1,
            }
        }
        for r in &b.add {
            match self.config(r) {
                Ok((p, rc)) => {
                    self.stats.converted += 1;
                    self.stats.ipv6 += u64::from(matches!(p, IpNet::V6(_)));
                    self.given.insert(p);
                    ch.add.push(rc);
                }
                Err(why) => {
                    let c = match why {
                        Unfit::NotUnicast => &mut self.stats.not_unicast,
                        Unfit::NoGateway => &mut self.stats.no_gateway,
                        Unfit::GatewayFamily => &mut self.stats.gateway_family,
                        Unfit::Unmapped => &mut self.stats.unmapped_interface,
                    };
                    *c += 1;
                    // The router's route of the prefix is stale now.
                    if self.given.remove(&r.prefix) {
                        ch.del.push(r.prefix.to_string());
                    }
                }
            }
        }
        ch
    }

    fn config(&self, r: &Route) -> Result<(IpNet, RouteConfig), Unfit> {
        let p = r.prefix;
        if r.kind != RouteKind::Unicast {
            return Err(Unfit::NotUnicast);
        }
        let via: IpAddr = match (p, r.via) {
            (IpNet::V4(_), Some(v @ IpAddr::V4(_))) | (IpNet::V6(_), Some(v @ IpAddr::V6(_))) => v,
            (_, Some(_)) => return Err(Unfit::GatewayFamily),
            (_, None) => return Err(Unfit::NoGateway),
        };
        let vnic = match &r.oif {
            None => None,
            Some(o) => Some(
                o.name
                    .as_ref()
                    .and_then(|n| self.vnics.get(n))
                    .copied()
                    .ok_or(Unfit::Unmapped)?,
            ),
        };
        Ok((
            p,
            RouteConfig {
                prefix: p.to_string(),
                nexthop: None,
                via: Some(via.to_string()),
                vnic,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Oif;

    fn route(p: &str, via: Option<&str>, oif: &str) -> Route {
        Route {
            prefix: p.parse().unwrap(),
            kind: RouteKind::Unicast,
            via: via.map(|v| v.parse().unwrap()),
            oif: Some(Oif {
                index: 2,
                name: Some(oif.into()),
            }),
            protocol: 12,
            metric: 0,
            dropped_nexthops: 0,
        }
    }

    #[test]
    fn routes_become_router_changes_and_unfit_ones_are_counted() {
        let mut s = RouterSync::new(HashMap::from([
            ("tap0".to_string(), 0),
            ("tap1".to_string(), 1),
        ]));
        let mut bh = route("10.9.0.0/16", None, "tap0");
        bh.kind = RouteKind::Blackhole;
        let b = RouteBatch {
            add: vec![
                route("10.1.0.0/16", Some("10.0.0.2"), "tap1"),
                route("2001:db8:1::/48", Some("2001:db8::2"), "tap0"),
                route("10.2.0.0/16", None, "tap0"),
                route("10.3.0.0/16", Some("10.0.0.2"), "eth9"),
                bh,
            ],
            del: vec!["10.7.0.0/16".parse().unwrap()],
        };
        let ch = s.convert(&b);
        assert_eq!(
            ch.add,
            vec![
                RouteConfig {
                    prefix: "10.1.0.0/16".into(),
                    nexthop: None,
                    via: Some("10.0.0.2".into()),
                    vnic: Some(1),
                },
                RouteConfig {
                    prefix: "2001:db8:1::/48".into(),
                    nexthop: None,
                    via: Some("2001:db8::2".into()),
                    vnic: Some(0),
                }
            ]
        );
        assert!(ch.del.is_empty(), "10.7/16 was never given: {ch:?}");
        let st = s.stats();
        assert_eq!(
            (
                st.converted,
                st.ipv6,
                st.no_gateway,
                st.unmapped_interface,
                st.not_unicast
            ),
            (2, 1, 1, 1, 1)
        );
        assert_eq!(st.deletes_dropped, 1);

        // Replaced by a route out of an unmapped interface: a delete.
        let ch = s.convert(&RouteBatch {
            add: vec![route("10.1.0.0/16", Some("10.0.0.2"), "eth9")],
            del: vec![],
        });
        assert_eq!(
            (ch.add.len(), ch.del.clone()),
            (0, vec!["10.1.0.0/16".to_string()])
        );
        assert_eq!(s.given(), 1, "the IPv6 route");
        // An IPv6 withdrawal, and an IPv6 route with an IPv4 gateway.
        let ch = s.convert(&RouteBatch {
            add: vec![route("2001:db8:9::/48", Some("10.0.0.2"), "tap0")],
            del: vec!["2001:db8:1::/48".parse().unwrap()],
        });
        assert_eq!(
            (ch.add.len(), ch.del),
            (0, vec!["2001:db8:1::/48".to_string()])
        );
        assert_eq!((s.given(), s.stats().gateway_family), (0, 1));
    }
}
