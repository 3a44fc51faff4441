//! Route changes on a running router ([`Router::change_routes`] and its
//! JSON form).

use std::net::Ipv6Addr;

use serde_json::json;

use super::*;

fn change(r: &mut Router, body: serde_json::Value) -> Result<RouteChangeReply, String> {
    r.change_routes(&serde_json::from_value(body).unwrap())
}

/// (verdict, destination MAC) of a UDP packet from the host on vNIC 0.
fn to(r: &mut Router, dst: [u8; 4]) -> (Verdict, [u8; 6]) {
    let (v, out) = run(r, 0, &udp_from_h0(Ipv4Addr::from(dst)));
    (v, out[0..6].try_into().unwrap())
}

fn pins(r: &Router, ip: [u8; 4], vnic: u16) -> Option<u32> {
    let i = r.neigh.find(u32::from_be_bytes(ip), vnic)?;
    Some(r.neigh.get(i).pins)
}

/// `c` with a neighbour table of 8 entries, one window: easy to fill.
fn eight_neighbours(mut c: RouterConfig) -> RouterConfig {
    c.arp.neighbours = 8;
    c
}

/// A router on `c` with 8 neighbour entries: add the routes `seven` (by
/// distinct gateways), then `refused` (routes to add), which must fail.
/// The router and the error.
fn fill_then_refuse(
    c: RouterConfig,
    seven: Vec<serde_json::Value>,
    refused: serde_json::Value,
) -> (Router, String) {
    let mut r = router_with(&eight_neighbours(c));
    change(&mut r, json!({ "add": seven })).unwrap();
    let e = change(&mut r, json!({ "add": refused })).unwrap_err();
    (r, e)
}

/// Every route, sorted.
fn table(r: &Router) -> Vec<(u32, u8, u32)> {
    let mut t: Vec<_> = r.fib.iter().collect();
    t.sort();
    t
}

#[test]
fn add_replace_delete() {
    let mut r = router();
    let start = r.routes();
    // Without the default route, 8.8.8.8 has none: net unreachable.
    let reply = change(
        &mut r,
        json!({"add": [{"prefix": "198.51.100.0/24", "nexthop": 0}], "del": ["0.0.0.0/0"]}),
    )
    .unwrap();
    let expect = |added, replaced, deleted, routes| RouteChangeReply {
        added,
        replaced,
        deleted,
        routes,
    };
    assert_eq!(reply, expect(1, 0, 1, start));
    assert_eq!(to(&mut r, [198, 51, 100, 9]), (Verdict::Forward(1), SINK));
    let (v, mac) = to(&mut r, [8, 8, 8, 8]);
    assert_eq!((v, mac), (Verdict::Forward(0), H0), "an ICMP error back");
    assert_eq!(c(&r, counters::ICMP_NET_UNREACHABLE), 1);
    // Replace by a gateway: resolved by ARP on vNIC 1 (host bits ignored).
    let reply = change(
        &mut r,
        json!({"add": [{"prefix": "198.51.100.77/24", "via": "10.1.1.9"}]}),
    )
    .unwrap();
    assert_eq!(reply, expect(1, 1, 0, start));
    let (v, out) = run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(198, 51, 100, 9)));
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(
        out,
        request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(10, 1, 1, 9))
    );
    // An onlink gateway out of a given vNIC; a prefix given twice gets the
    // last next hop.
    let reply = change(
        &mut r,
        json!({"add": [
            {"prefix": "203.0.113.0/24", "via": "10.1.1.9"},
            {"prefix": "203.0.113.0/24", "via": "172.16.0.1", "vnic": 0},
        ]}),
    )
    .unwrap();
    assert_eq!(reply, expect(2, 1, 0, start + 1));
    let (v, out) = run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(203, 0, 113, 1)));
    assert_eq!(v, Verdict::Forward(0));
    assert_eq!(&out[38..42], &[172, 16, 0, 1], "a request for the gateway");
    // Delete and add back in one message: the deletes go first.
    let reply = change(
        &mut r,
        json!({"del": ["203.0.113.0/24", "198.51.100.0/24"],
               "add": [{"prefix": "203.0.113.0/24", "nexthop": 0}]}),
    )
    .unwrap();
    assert_eq!(reply, expect(1, 0, 2, start));
    assert_eq!(to(&mut r, [203, 0, 113, 1]), (Verdict::Forward(1), SINK));
    assert_eq!(to(&mut r, [198, 51, 100, 9]).1, H0, "net unreachable again");
}

#[test]
fn a_message_is_all_or_nothing() {
    let mut r = router();
    let before = table(&r);
    let cases = [
        (
            json!({"add": [{"prefix": "198.51.100.0/24", "nexthop": 0},
                           {"prefix": "198.51.101.0/24", "via": "10.1.1.9"},
                           {"prefix": "198.51.102.0/24", "via": "10.77.7.7"}]}),
            "add[2].via 10.77.7.7: in no connected subnet (give add[2].vnic)",
        ),
        (
            json!({"add": [{"prefix": "198.51.100.0/24", "nexthop": 1}]}),
            "add[0].nexthop 1 out of range (1 next hops)",
        ),
        (
            json!({"add": [{"prefix": "198.51.100.0/33", "nexthop": 0}]}),
            "add[0]: prefix",
        ),
        (
            json!({"add": [{"prefix": "198.51.100.0/24", "via": "10.1.1.1"}]}),
            "add[0].via 10.1.1.1: one of the router's own addresses",
        ),
        (
            json!({"add": [{"prefix": "198.51.100.0/24", "via": "10.1.1.9", "vnic": 2}]}),
            "add[0].vnic 2 out of range",
        ),
        (
            json!({"add": [{"prefix": "198.51.100.0/24"}]}),
            "add[0]: needs nexthop or via",
        ),
        (
            json!({"add": [{"prefix": "198.51.100.0/24", "nexthop": 0}],
                   "del": ["192.0.2.0/24", "10.0.0.0/8"]}),
            "del[1] \"10.0.0.0/8\": no such route",
        ),
        (
            json!({"del": ["192.0.2.0/24", "192.0.2.9/24"]}),
            "del[1] \"192.0.2.9/24\": deleted twice",
        ),
        (json!({"del": ["192.0.2.0"]}), "del[0]: prefix"),
        // The routes of the router's own addresses stay.
        (
            json!({"del": ["10.1.0.0/24"]}),
            "del[0] \"10.1.0.0/24\": a route of the router's own addresses",
        ),
        (
            json!({"del": ["10.9.255.255/32"]}),
            "del[0] \"10.9.255.255/32\": a route of the router's own",
        ),
        (
            json!({"add": [{"prefix": "10.1.1.1/32", "nexthop": 0}]}),
            "add[0] \"10.1.1.1/32\": a route of the router's own",
        ),
        (
            json!({"add": [{"prefix": "10.9.0.0/16", "via": "10.1.1.9"}]}),
            "add[0] \"10.9.0.0/16\": a route of the router's own",
        ),
    ];
    for (body, want) in cases {
        let e = change(&mut r, body.clone()).unwrap_err();
        assert!(e.starts_with(want), "{body}: {e}");
        assert_eq!(table(&r), before, "{body}");
        assert_eq!(pins(&r, [10, 1, 1, 9], 1), None, "{body}");
    }
    assert_eq!(to(&mut r, [192, 0, 2, 1]), (Verdict::Forward(1), SINK));
}

#[test]
fn gateway_pins_follow_the_routes() {
    let mut r = router();
    let gw = GW_IP.octets();
    assert_eq!(pins(&r, gw, 1), Some(1), "the default route's");
    let add =
        |n: u8, via: &str| json!({"add": [{"prefix": format!("198.51.{n}.0/24"), "via": via}]});
    change(&mut r, add(1, "10.1.1.2")).unwrap();
    change(&mut r, add(2, "10.1.1.2")).unwrap();
    assert_eq!(pins(&r, gw, 1), Some(3));
    // Replacing a route by the same gateway again and again leaks nothing.
    for _ in 0..10 {
        change(&mut r, add(1, "10.1.1.2")).unwrap();
    }
    assert_eq!(pins(&r, gw, 1), Some(3));
    let hops = r.hops.len();
    // Moved to another gateway, then back.
    change(&mut r, add(1, "10.1.1.9")).unwrap();
    assert_eq!(
        (pins(&r, gw, 1), pins(&r, [10, 1, 1, 9], 1)),
        (Some(2), Some(1))
    );
    change(&mut r, add(1, "10.1.1.2")).unwrap();
    assert_eq!(
        (pins(&r, gw, 1), pins(&r, [10, 1, 1, 9], 1)),
        (Some(3), Some(0))
    );
    assert_eq!(r.hops.len(), hops + 1, "one hop per gateway, shared");
    // To a next hop by index: no pin.
    change(
        &mut r,
        json!({"add": [{"prefix": "198.51.1.0/24", "nexthop": 0}]}),
    )
    .unwrap();
    change(&mut r, json!({"del": ["198.51.2.0/24", "0.0.0.0/0"]})).unwrap();
    assert_eq!(pins(&r, gw, 1), Some(0));
    // Unpinned, the gateway's entry is an ordinary one: it may be evicted.
    let gws = (0..7).map(
        |i| json!({"prefix": format!("198.51.{i}.0/24"), "via": format!("10.1.1.{}", 10 + i)}),
    );
    // No room for one more: refused whole, the pins it took given back.
    let (mut small, e) = fill_then_refuse(
        cfg(),
        gws.collect(),
        json!([{"prefix": "198.51.50.0/24", "via": "10.1.1.10"},
               {"prefix": "198.51.51.0/24", "via": "10.1.1.50"}]),
    );
    assert_eq!(small.neigh.used(), 8, "full of gateways");
    assert!(
        e.starts_with("add[1].via: the neighbour table (8 entries"),
        "{e}"
    );
    assert_eq!(pins(&small, [10, 1, 1, 10], 1), Some(1));
    change(&mut small, json!({"del": ["198.51.3.0/24"]})).unwrap();
    assert_eq!(pins(&small, [10, 1, 1, 13], 1), Some(0));
    change(
        &mut small,
        json!({"add": [{"prefix": "198.51.51.0/24", "via": "10.1.1.50"}]}),
    )
    .unwrap();
    assert_eq!(pins(&small, [10, 1, 1, 13], 1), None, "evicted");
    assert_eq!(pins(&small, [10, 1, 1, 50], 1), Some(1));
}

#[test]
fn a_config_that_gives_a_prefix_twice_pins_once() {
    let mut c = cfg();
    c.routes.push(route_to("0.0.0.0/0", 0));
    // And a static route shadowed by a connected one.
    c.routes.push(route_via("10.1.0.0/24", "10.1.1.9"));
    let r = router_with(&c);
    assert_eq!(pins(&r, GW_IP.octets(), 1), Some(0));
    assert_eq!(pins(&r, [10, 1, 1, 9], 1), Some(0));
}

#[test]
fn burst_lookup_follows_the_table_size() {
    // 1,100 /24s, each in a /16 of its own: 1,100 groups, past the 1 MiB
    // where bursts pay.
    let many: Vec<_> = (0..1100u32)
        .map(|i| format!("{}.{}.7.0/24", 100 + i / 256, i % 256))
        .collect();
    let adds: Vec<_> = many
        .iter()
        .map(|p| json!({"prefix": p, "nexthop": 0}))
        .collect();
    let mut r = router();
    assert!(!r.prefers_burst());
    change(&mut r, json!({"add": adds})).unwrap();
    assert!(r.prefers_burst());
    change(&mut r, json!({"del": many})).unwrap();
    assert!(!r.prefers_burst(), "{} groups", r.fib.groups_used());
    // Configured: stays.
    let mut r = router_with(&RouterConfig {
        burst_lookup: Some(false),
        ..cfg()
    });
    change(&mut r, json!({"add": adds})).unwrap();
    assert!(!r.prefers_burst());
}

#[test]
fn json_messages_and_their_errors() {
    let mut r = router();
    let routes = r.routes();
    let ok = r
        .control(&json!({"routes": {"add": [{"prefix": "198.51.100.0/24", "nexthop": 0}]}}))
        .unwrap();
    assert_eq!(
        ok,
        json!({"added": 1, "replaced": 0, "deleted": 0, "routes": routes + 1})
    );
    let stats = r.control(&json!({"stats": true})).unwrap();
    assert_eq!(
        stats,
        json!({"routes": routes + 1, "neighbours": 1, "burst_lookup": false,
               "peer_neigh_sent": 0, "peer_neigh_unsent": 0,
               "peer_neigh_applied": 0, "peer_neigh_bad": 0,
               "to_control": 0, "from_control": 0,
               "routes6": 0, "neighbours6": 0,
               "ipv6": {"nd_solicits": 0, "nd_adverts": 0, "nd_learned": 0,
                        "nd_released": 0, "nd_unres_discards": 0, "nd_failed": 0,
                        "icmp6_echo_replies": 0, "icmp6_time_exceeded": 0,
                        "icmp6_no_route": 0, "icmp6_addr_unreachable": 0,
                        "icmp6_rate_limited": 0, "icmp6_packet_too_big": 0}})
    );
    let e = r.control(&json!({"reboot": true})).unwrap_err();
    assert!(e.contains("unknown variant `reboot`"), "{e}");
    let e = r
        .control(&json!({"routes": {"add": [
            {"prefix": "198.51.101.0/24", "nexthop": 0},
            {"prefix": "198.51.102.0/24", "nexthp": 0},
        ]}}))
        .unwrap_err();
    assert!(e.starts_with("add[1]: unknown field `nexthp`"), "{e}");
    let e = r
        .control(&json!({"routes": {"del": "0.0.0.0/0"}}))
        .unwrap_err();
    assert!(
        e.starts_with("bad router control message: invalid type"),
        "{e}"
    );
    assert_eq!(r.routes(), routes + 1);
    // The typed form is the same JSON.
    let typed = RouterControl::Routes(RouteChanges {
        del: vec!["198.51.100.0/24".into()],
        ..RouteChanges::default()
    });
    assert_eq!(
        serde_json::to_value(&typed).unwrap(),
        json!({"routes": {"del": ["198.51.100.0/24"]}})
    );
    r.control(&serde_json::to_value(&typed).unwrap()).unwrap();
    assert_eq!(r.routes(), routes);
}

#[test]
fn a_dry_run_checks_and_changes_nothing() {
    let mut r = router();
    let before = table(&r);
    let reply = change(
        &mut r,
        json!({"add": [{"prefix": "198.51.100.0/24", "nexthop": 0}], "del": ["0.0.0.0/0"], "dry_run": true}),
    )
    .unwrap();
    assert_eq!((reply.added, reply.deleted), (1, 1));
    assert_eq!(table(&r), before);
    // Its errors are the real ones.
    let e = change(&mut r, json!({"del": ["203.0.113.0/24"], "dry_run": true})).unwrap_err();
    assert!(e.contains("no such route"), "{e}");
    assert_eq!(table(&r), before);
}

#[test]
fn ipv6_gateways_too_are_refused_whole_when_the_table_is_full() {
    let pins6 = |r: &Router, ip: &str| {
        let i = r
            .neigh6
            .find(ip.parse::<Ipv6Addr>().unwrap().to_bits(), 1)?;
        Some(r.neigh6.get(i).pins)
    };
    // The default route's gateway holds one entry; seven more fit.
    let gws = (0..7).map(
        |i| json!({"prefix": format!("2001:db8:5{i}::/48"), "via": format!("2001:db8:1::{}", 10 + i)}),
    );
    let (small, e) = fill_then_refuse(
        super::ipv6::cfg6(),
        gws.collect(),
        json!([{"prefix": "2001:db8:60::/48", "via": "2001:db8:1::10"},
               {"prefix": "2001:db8:61::/48", "via": "2001:db8:1::50"}]),
    );
    assert_eq!(small.neigh6.used(), 8, "full of gateways");
    assert_eq!(
        e,
        "add[1].via: the neighbour table (8 entries, arp.neighbours) has no room for it"
    );
    // The pin the first add took was given back.
    assert_eq!(pins6(&small, "2001:db8:1::10"), Some(1));
    assert_eq!(pins6(&small, "2001:db8:1::50"), None);
    // The same full table at start-up names the config field.
    let mut c = eight_neighbours(super::ipv6::cfg6());
    c.routes.extend((0..8).map(|i| {
        route_via(
            &format!("2001:db8:7{i}::/48"),
            format!("2001:db8:1::{}", 10 + i),
        )
    }));
    let e = Router::new(&c).unwrap_err();
    assert!(
        e.starts_with("routes[") && e.contains("].via: the neighbour table (8 entries"),
        "{e}"
    );
}
