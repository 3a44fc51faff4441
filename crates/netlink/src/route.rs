//! A kernel route as the watch hands it on ([`Route`]), which routes it
//! takes ([`WatchFilter`]), and why it skips the others ([`Skip`]).

use std::collections::HashMap;
use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use netlink_packet_route::AddressFamily;
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteProtocol, RouteScope, RouteType,
    RouteVia,
};

/// Route protocols (`rtm_protocol`, `/etc/iproute2/rt_protos`) the
/// routing suites use.
pub mod proto {
    /// Routes the kernel derives from addresses (connected subnets).
    pub const KERNEL: u8 = 2;
    /// Routes added at boot (`ip route add` without `proto`).
    pub const BOOT: u8 = 3;
    /// Routes added by an administrator as static (`proto static`).
    pub const STATIC: u8 = 4;
    /// BIRD.
    pub const BIRD: u8 = 12;
    /// FRR's zebra, lowest of its range: BGP 186, IS-IS 187, OSPF 188,
    /// RIP 189, ... static 196.
    pub const FRR_FIRST: u8 = 186;
    /// FRR, highest of its range (FRR's own static routes).
    pub const FRR_LAST: u8 = 196;
}

/// The main routing table (`RT_TABLE_MAIN`).
pub const TABLE_MAIN: u32 = 254;

/// Which route protocols the watch takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Protocols {
    /// Every protocol but `kernel` (the routes of connected subnets and
    /// local addresses, which the VR derives from its own addresses).
    #[default]
    AllButKernel,
    /// Only these (`proto::BIRD`, `proto::STATIC`, ...).
    Only(Vec<u8>),
}

impl Protocols {
    fn takes(&self, p: u8) -> bool {
        match self {
            Self::AllButKernel => p != proto::KERNEL,
            Self::Only(list) => list.contains(&p),
        }
    }
}

/// Which kernel routes the watch takes. The default: the main table, both
/// families, every protocol but `kernel`, no routes of scope `link`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchFilter {
    /// The routing table (`TABLE_MAIN`, 254, by default).
    pub table: u32,
    /// The protocols taken.
    pub protocols: Protocols,
    /// Skip routes of scope `link` (`ip route add P dev IF`: a subnet on
    /// the link itself, no gateway). True by default.
    pub skip_link_scope: bool,
    /// Take IPv4 routes.
    pub ipv4: bool,
    /// Take IPv6 routes.
    pub ipv6: bool,
}

impl Default for WatchFilter {
    fn default() -> Self {
        Self {
            table: TABLE_MAIN,
            protocols: Protocols::AllButKernel,
            skip_link_scope: true,
            ipv4: true,
            ipv6: true,
        }
    }
}

/// What a route does with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteKind {
    /// Forwards it, to `via` or on the link of `oif`.
    Unicast,
    /// Drops it silently (`blackhole`).
    Blackhole,
    /// Drops it with ICMP unreachable (`unreachable`).
    Unreachable,
    /// Drops it with ICMP administratively prohibited (`prohibit`).
    Prohibit,
}

/// The interface a route leaves by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Oif {
    /// Its index in the namespace.
    pub index: u32,
    /// Its name, when the watch knew the interface (it follows links).
    pub name: Option<String>,
}

/// A kernel route the watch took.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    /// Destination, host bits clear.
    pub prefix: IpNet,
    /// What it does.
    pub kind: RouteKind,
    /// The gateway, if any (an IPv4 route may have an IPv6 gateway:
    /// `RTA_VIA`).
    pub via: Option<IpAddr>,
    /// The interface out, if any.
    pub oif: Option<Oif>,
    /// `rtm_protocol` ([`proto`]).
    pub protocol: u8,
    /// `RTA_PRIORITY` (the `metric` of `ip route`), 0 if absent. Of several
    /// kernel routes of one prefix, the lowest metric is the one handed on.
    pub metric: u32,
    /// Next hops beyond the first of a multipath (ECMP) route, which the
    /// route does not carry (see the crate docs). 0 for a single path.
    pub dropped_nexthops: u32,
}

/// Why a kernel route was not taken. Each has its own counter in
/// [`SkipCounts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Another routing table.
    Table,
    /// A family the filter does not take (or not IPv4/IPv6 at all).
    Family,
    /// Protocol `kernel`, with the default [`Protocols::AllButKernel`].
    Kernel,
    /// A protocol the filter does not take.
    Protocol,
    /// Scope `link` (with [`WatchFilter::skip_link_scope`]).
    LinkScope,
    /// A local, broadcast, anycast, multicast, throw or NAT route.
    Type,
    /// A cached clone (IPv6 exceptions such as PMTU entries).
    Cloned,
    /// A source-specific route (`from` prefix) or one with a TOS: the FIB
    /// matches on destination only.
    SourceOrTos,
    /// A route through a nexthop object (`RTA_NH_ID`) whose gateway the
    /// kernel did not include (`net.ipv4.nexthop_compat_mode` = 0): the
    /// watch does not follow nexthop objects.
    NexthopObject,
    /// A unicast route with neither gateway nor interface, or an address
    /// that does not parse.
    Malformed,
}

/// Kernel routes skipped, by reason ([`Skip`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[expect(
    missing_docs,
    reason = "one counter per Skip variant, documented there"
)]
pub struct SkipCounts {
    pub table: u64,
    pub family: u64,
    pub kernel: u64,
    pub protocol: u64,
    pub link_scope: u64,
    pub kind: u64,
    pub cloned: u64,
    pub source_or_tos: u64,
    pub nexthop_object: u64,
    pub malformed: u64,
}

impl SkipCounts {
    pub(crate) fn bump(&mut self, s: Skip) {
        let c = match s {
            Skip::Table => &mut self.table,
            Skip::Family => &mut self.family,
            Skip::Kernel => &mut self.kernel,
            Skip::Protocol => &mut self.protocol,
            Skip::LinkScope => &mut self.link_scope,
            Skip::Type => &mut self.kind,
            Skip::Cloned => &mut self.cloned,
            Skip::SourceOrTos => &mut self.source_or_tos,
            Skip::NexthopObject => &mut self.nexthop_object,
            Skip::Malformed => &mut self.malformed,
        };
        *c += 1;
    }

    /// All skipped routes.
    pub fn total(&self) -> u64 {
        self.table
            + self.family
            + self.kernel
            + self.protocol
            + self.link_scope
            + self.kind
            + self.cloned
            + self.source_or_tos
            + self.nexthop_object
            + self.malformed
    }
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

fn via_of(v: &RouteVia) -> Option<IpAddr> {
    match v {
        RouteVia::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteVia::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// The prefix of a route message, whether the filter takes it or not (a
/// delete of a route the watch never took is then recognised as such).
/// `None`: not IPv4/IPv6, or a bad address.
fn prefix_of(m: &RouteMessage) -> Option<IpNet> {
    let len = m.header.destination_prefix_length;
    let dst = m.attributes.iter().find_map(|a| match a {
        RouteAttribute::Destination(d) => Some(ip_of(d)),
        _ => None,
    });
    let net = match (m.header.address_family, dst) {
        (AddressFamily::Inet, None) => IpNet::V4(Ipv4Net::new(0.into(), len).ok()?),
        (AddressFamily::Inet6, None) => IpNet::V6(Ipv6Net::new(0.into(), len).ok()?),
        (AddressFamily::Inet, Some(Some(a @ IpAddr::V4(_))))
        | (AddressFamily::Inet6, Some(Some(a @ IpAddr::V6(_)))) => IpNet::new(a, len).ok()?,
        _ => return None,
    };
    Some(net.trunc())
}

/// A route message's table: its `RTA_TABLE` (which holds ids past 255),
/// else the header's.
fn table_of(m: &RouteMessage) -> u32 {
    m.attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(u32::from(m.header.table))
}

/// Turn a kernel route message into a [`Route`], or say why it is skipped.
/// `links` names interfaces by index.
pub(crate) fn classify(
    m: &RouteMessage,
    f: &WatchFilter,
    links: &HashMap<u32, String>,
) -> Result<Route, Skip> {
    let h = &m.header;
    if table_of(m) != f.table {
        return Err(Skip::Table);
    }
    match h.address_family {
        AddressFamily::Inet if f.ipv4 => {}
        AddressFamily::Inet6 if f.ipv6 => {}
        _ => return Err(Skip::Family),
    }
    let protocol = u8::from(h.protocol);
    if !f.protocols.takes(protocol) {
        return Err(if h.protocol == RouteProtocol::Kernel {
            Skip::Kernel
        } else {
            Skip::Protocol
        });
    }
    let kind = match h.kind {
        RouteType::Unicast => RouteKind::Unicast,
        RouteType::BlackHole => RouteKind::Blackhole,
        RouteType::Unreachable => RouteKind::Unreachable,
        RouteType::Prohibit => RouteKind::Prohibit,
        _ => return Err(Skip::Type),
    };
    if f.skip_link_scope && h.scope == RouteScope::Link {
        return Err(Skip::LinkScope);
    }
    if h.flags.contains(RouteFlags::Cloned) {
        return Err(Skip::Cloned);
    }
    if h.source_prefix_length != 0 || h.tos != 0 {
        return Err(Skip::SourceOrTos);
    }
    let prefix = prefix_of(m).ok_or(Skip::Malformed)?;
    let mut via = None;
    let mut oif = None;
    let mut metric = 0;
    let mut nh_id = false;
    let mut dropped_nexthops = 0;
    for a in &m.attributes {
        match a {
            RouteAttribute::Gateway(g) => via = Some(ip_of(g).ok_or(Skip::Malformed)?),
            RouteAttribute::Via(v) => via = Some(via_of(v).ok_or(Skip::Malformed)?),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Priority(p) => metric = *p,
            RouteAttribute::NhId(_) => nh_id = true,
            RouteAttribute::MultiPath(hops) => {
                // The first next hop stands for the route; the others are
                // counted (the VR's FIB has one next hop per prefix).
                if let Some(first) = hops.first() {
                    oif = Some(first.interface_index);
                    for na in &first.attributes {
                        match na {
                            RouteAttribute::Gateway(g) => {
                                via = Some(ip_of(g).ok_or(Skip::Malformed)?);
                            }
                            RouteAttribute::Via(v) => {
                                via = Some(via_of(v).ok_or(Skip::Malformed)?);
                            }
                            _ => {}
                        }
                    }
                }
                dropped_nexthops = u32::try_from(hops.len().saturating_sub(1)).unwrap_or(u32::MAX);
            }
            _ => {}
        }
    }
    if kind == RouteKind::Unicast && via.is_none() && oif.is_none() {
        return Err(if nh_id {
            Skip::NexthopObject
        } else {
            Skip::Malformed
        });
    }
    Ok(Route {
        prefix,
        kind,
        via,
        oif: oif.map(|index| Oif {
            index,
            name: links.get(&index).cloned(),
        }),
        protocol,
        metric,
        dropped_nexthops,
    })
}

/// The gateway of a route message (not of its multipath next hops).
pub(crate) fn gateway_of(m: &RouteMessage) -> Option<IpAddr> {
    m.attributes.iter().find_map(|a| match a {
        RouteAttribute::Gateway(g) => ip_of(g),
        RouteAttribute::Via(v) => via_of(v),
        _ => None,
    })
}

/// The prefix and metric of a route message the filter's table and
/// families hold (for deletes: a delete is matched by prefix and metric).
pub(crate) fn key_of(m: &RouteMessage, f: &WatchFilter) -> Option<(IpNet, u32)> {
    if table_of(m) != f.table {
        return None;
    }
    let metric = m
        .attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Priority(p) => Some(*p),
            _ => None,
        })
        .unwrap_or(0);
    Some((prefix_of(m)?, metric))
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use netlink_packet_route::route::RouteNextHop;

    use super::*;

    fn msg(proto: RouteProtocol, scope: RouteScope, attrs: Vec<RouteAttribute>) -> RouteMessage {
        let mut m = RouteMessage::default();
        m.header.address_family = AddressFamily::Inet;
        m.header.destination_prefix_length = 16;
        m.header.table = 254;
        m.header.protocol = proto;
        m.header.scope = scope;
        m.header.kind = RouteType::Unicast;
        m.attributes = attrs;
        m
    }

    fn dst(a: [u8; 4]) -> RouteAttribute {
        RouteAttribute::Destination(RouteAddress::Inet(Ipv4Addr::from(a)))
    }

    fn gw(a: [u8; 4]) -> RouteAttribute {
        RouteAttribute::Gateway(RouteAddress::Inet(Ipv4Addr::from(a)))
    }

    #[test]
    fn a_bird_route_is_taken_with_its_gateway_interface_and_metric() {
        let m = msg(
            RouteProtocol::Bird,
            RouteScope::Universe,
            vec![
                dst([10, 1, 7, 0]),
                gw([10, 0, 0, 2]),
                RouteAttribute::Oif(3),
                RouteAttribute::Priority(32),
            ],
        );
        let links = HashMap::from([(3, "eth0".to_string())]);
        let r = classify(&m, &WatchFilter::default(), &links).unwrap();
        assert_eq!(r.prefix.to_string(), "10.1.0.0/16", "host bits cleared");
        assert_eq!(r.via, Some("10.0.0.2".parse().unwrap()));
        assert_eq!(r.oif.unwrap().name.as_deref(), Some("eth0"));
        assert_eq!((r.protocol, r.metric, r.kind), (12, 32, RouteKind::Unicast));
    }

    #[test]
    fn kernel_link_scope_other_tables_and_local_routes_are_skipped_by_reason() {
        let f = WatchFilter::default();
        let none = HashMap::new();
        let k = msg(
            RouteProtocol::Kernel,
            RouteScope::Link,
            vec![dst([10, 0, 0, 0])],
        );
        assert_eq!(classify(&k, &f, &none), Err(Skip::Kernel));
        let l = msg(
            RouteProtocol::Boot,
            RouteScope::Link,
            vec![dst([10, 2, 0, 0]), RouteAttribute::Oif(2)],
        );
        assert_eq!(classify(&l, &f, &none), Err(Skip::LinkScope));
        let mut t = msg(
            RouteProtocol::Static,
            RouteScope::Universe,
            vec![gw([1, 1, 1, 1])],
        );
        t.attributes.push(RouteAttribute::Table(100));
        assert_eq!(classify(&t, &f, &none), Err(Skip::Table));
        let mut local = msg(RouteProtocol::Static, RouteScope::Host, vec![]);
        local.header.kind = RouteType::Local;
        assert_eq!(classify(&local, &f, &none), Err(Skip::Type));
        let only = WatchFilter {
            protocols: Protocols::Only(vec![proto::BIRD]),
            ..f.clone()
        };
        let s = msg(
            RouteProtocol::Static,
            RouteScope::Universe,
            vec![gw([1, 1, 1, 1])],
        );
        assert_eq!(classify(&s, &only, &none), Err(Skip::Protocol));
        let v4_only = WatchFilter { ipv4: false, ..f };
        assert_eq!(classify(&s, &v4_only, &none), Err(Skip::Family));
    }

    #[test]
    fn blackholes_multipath_and_nexthop_objects() {
        let f = WatchFilter::default();
        let none = HashMap::new();
        let mut b = msg(
            RouteProtocol::Static,
            RouteScope::Universe,
            vec![dst([10, 3, 0, 0])],
        );
        b.header.kind = RouteType::BlackHole;
        let r = classify(&b, &f, &none).unwrap();
        assert_eq!((r.kind, r.via, r.oif), (RouteKind::Blackhole, None, None));

        let hop = |g: [u8; 4], i: u32| {
            let mut h = RouteNextHop::default();
            h.interface_index = i;
            h.attributes = vec![gw(g)];
            h
        };
        let mp = msg(
            RouteProtocol::Bird,
            RouteScope::Universe,
            vec![
                dst([10, 4, 0, 0]),
                RouteAttribute::MultiPath(vec![hop([10, 0, 0, 2], 2), hop([10, 0, 1, 2], 3)]),
            ],
        );
        let r = classify(&mp, &f, &none).unwrap();
        assert_eq!(r.via, Some("10.0.0.2".parse().unwrap()));
        assert_eq!((r.oif.unwrap().index, r.dropped_nexthops), (2, 1));

        let nh = msg(
            RouteProtocol::Other(196),
            RouteScope::Universe,
            vec![dst([10, 5, 0, 0]), RouteAttribute::NhId(7)],
        );
        assert_eq!(classify(&nh, &f, &none), Err(Skip::NexthopObject));
        // In compat mode (the default) the kernel adds the gateway: taken.
        let mut nh2 = nh.clone();
        nh2.attributes.push(gw([10, 0, 0, 9]));
        assert_eq!(classify(&nh2, &f, &none).unwrap().protocol, 196);
    }
}
