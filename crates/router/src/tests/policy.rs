//! Routing modes dst, src and src-dst (`RouterConfig::mode`) on frames,
//! through both the one-by-one and the burst path.

use super::*;

/// Three next hops of the original form on vNIC 1, MACs ...:0a, 0b, 0c.
const NH: [[u8; 6]; 3] = [
    [2, 0, 0, 0, 0, 0xa],
    [2, 0, 0, 0, 0, 0xb],
    [2, 0, 0, 0, 0, 0xc],
];
const FAR: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 9);
/// A host on vNIC 1 (not in `10.1.0.0/24`).
const H1_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 7);

/// A router in `mode`: dst `198.51.100.0/24` -> next hop 0; in mode src,
/// source `10.1.0.0/24` -> next hop 1; in mode src-dst, `198.51.100.0/24`
/// -> next hop 0 from anywhere, -> next hop 2 from `10.1.0.0/24`.
fn policy_cfg(mode: RoutingMode) -> RouterConfig {
    let nexthops = NH
        .iter()
        .map(|m| NextHopConfig {
            vnic: 1,
            mac: MacAddr(*m).to_string(),
            ..NextHopConfig::default()
        })
        .collect();
    let (routes, source_tables) = match mode {
        RoutingMode::Dst => (vec![route_to("198.51.100.0/24", 0)], vec![]),
        RoutingMode::Src => (vec![route_to("10.1.0.0/24", 1)], vec![]),
        RoutingMode::SrcDst => (
            vec![route_to("198.51.100.0/24", 0)],
            vec![SourceTableConfig {
                src: "10.1.0.0/24".into(),
                routes: vec![route_to("198.51.100.0/24", 2)],
            }],
        ),
    };
    RouterConfig {
        nexthops,
        routes,
        source_tables,
        mode,
        ..cfg()
    }
}

/// The next hop (index into `NH`) a frame went to; `None`: not forwarded
/// to one.
fn hop_of(v: Verdict, out: &[u8]) -> Option<usize> {
    (v == Verdict::Forward(1))
        .then(|| NH.iter().position(|m| out[0..6] == m[..]))
        .flatten()
}

#[test]
fn each_mode_routes_by_its_key_in_both_paths() {
    let from_h0 = udp_from_h0(FAR);
    let from_h1 = udp_ttl(GW, R1, H1_IP, FAR, 64);
    let h0_to_h1 = udp_from_h0(H1_IP);
    // (mode, next hop of h0 -> far, of h1 -> far, of h0 -> h1)
    let cases = [
        (RoutingMode::Dst, Some(0), Some(0), None),
        (RoutingMode::Src, Some(1), None, Some(1)),
        (RoutingMode::SrcDst, Some(2), Some(0), None),
    ];
    for (mode, a, b, c) in cases {
        let mut r = router_with(&policy_cfg(mode));
        let frames = [
            (0, from_h0.clone()),
            (1, from_h1.clone()),
            (0, h0_to_h1.clone()),
        ];
        let one = run_each(&mut r, &frames);
        let burst = run_burst(&mut r, &frames);
        for out in [&one, &burst] {
            let hops: Vec<_> = out.iter().map(|(v, o)| hop_of(*v, o)).collect();
            assert_eq!(hops, [a, b, c], "{mode:?}");
        }
        // Forwarded frames leave with TTL 63 and the router's MAC.
        let (v, out) = &one[0];
        assert_eq!(*v, Verdict::Forward(1), "{mode:?}");
        assert_eq!((&out[6..12], out[22]), (&R1[..], 63), "{mode:?}");
    }
    // Mode src: no route for a source outside 10.1.0.0/24: ICMP net
    // unreachable back to the host, counted.
    let mut r = router_with(&policy_cfg(RoutingMode::Src));
    let (v, _) = run(&mut r, 1, &from_h1);
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(c(&r, counters::ICMP_NET_UNREACHABLE), 1);
}

#[test]
fn the_routers_own_addresses_stay_its_own_in_every_mode() {
    for mode in [RoutingMode::Src, RoutingMode::SrcDst] {
        let mut r = router_with(&policy_cfg(mode));
        let ping = echo(H0, R0, H0_IP, Ipv4Addr::new(10, 1, 0, 1), 64);
        for (v, out) in [run_one(&mut r, 0, &ping), run(&mut r, 0, &ping)] {
            assert_eq!(v, Verdict::Forward(0), "{mode:?}: answered on vNIC 0");
            let (ip, icmp) = icmp_of(&out);
            assert_eq!(
                (ip.source_addr(), ip.destination_addr(), icmp.type_u8()),
                (Ipv4Addr::new(10, 1, 0, 1), H0_IP, 0),
                "{mode:?}: an echo reply"
            );
        }
    }
}

#[test]
fn bad_policy_configs_are_refused_with_the_reason() {
    let mut c = policy_cfg(RoutingMode::SrcDst);
    c.mode = RoutingMode::Dst;
    let e = Router::new(&c).unwrap_err();
    assert!(e.contains("source_tables: only in mode src-dst"), "{e}");
    let mut c = policy_cfg(RoutingMode::SrcDst);
    c.source_tables[0].src = "10.1.0.1/24".into();
    let e = Router::new(&c).unwrap_err();
    assert!(
        e.contains("source_tables[0].src 10.1.0.1/24: host bits set"),
        "{e}"
    );
    let mut c = policy_cfg(RoutingMode::SrcDst);
    c.source_tables[0].routes.push(route_to("2001:db8::/32", 0));
    let e = Router::new(&c).unwrap_err();
    assert!(e.contains("source_tables[0].routes[1]: IPv6"), "{e}");
    // The mode is read from the config's text.
    let c: RouterConfig = serde_json::from_value(serde_json::json!({
        "vnics": [], "mode": "src-dst"
    }))
    .unwrap();
    assert_eq!(c.mode, RoutingMode::SrcDst);
}

/// Modes src and src-dst: a route of the API goes where one of `routes`
/// is (mode src: a source prefix; src-dst: the table of `0.0.0.0/0`),
/// replaces there and is deleted there; a refused message changes
/// nothing.
#[test]
fn the_api_changes_routes_of_a_policy_mode_where_routes_are() {
    let from_h0 = udp_from_h0(FAR);
    let from_h1 = udp_ttl(GW, R1, H1_IP, FAR, 64);
    // (mode, the API's prefix, h1 -> far before, h0 -> far throughout)
    let cases = [
        (RoutingMode::Src, "10.1.1.0/24", None, Some(1)),
        (RoutingMode::SrcDst, "198.51.100.0/24", Some(0), Some(2)),
    ];
    for (mode, prefix, before, h0) in cases {
        let mut r = router_with(&policy_cfg(mode));
        let hop = |r: &mut Router, f: &[u8]| {
            let (v, out) = run(r, 0, f);
            hop_of(v, &out)
        };
        let change = |r: &mut Router, add: Vec<RouteConfig>, del: Vec<String>| {
            r.change_routes(&RouteChanges {
                add,
                del,
                ..RouteChanges::default()
            })
        };
        assert_eq!(hop(&mut r, &from_h1), before, "{mode:?}: before");
        change(&mut r, vec![route_to(prefix, 1)], vec![]).expect("add");
        assert_eq!(hop(&mut r, &from_h1), Some(1), "{mode:?}: the API's");
        change(&mut r, vec![route_to(prefix, 2)], vec![]).expect("replace");
        assert_eq!(hop(&mut r, &from_h1), Some(2), "{mode:?}: replaced");
        let e = change(&mut r, vec![], vec!["203.0.113.0/24".into()]).unwrap_err();
        assert!(e.contains("no such route"), "{e}");
        assert_eq!(hop(&mut r, &from_h1), Some(2), "{mode:?}: as it was");
        assert_eq!(hop(&mut r, &from_h0), h0, "{mode:?}: the rest as it was");
        // (In mode src-dst the API replaced a config route: deleted, it
        // would be gone.)
        if before.is_none() {
            change(&mut r, vec![], vec![prefix.into()]).expect("delete");
            assert_eq!(hop(&mut r, &from_h1), None, "{mode:?}: deleted");
        }
    }
}
