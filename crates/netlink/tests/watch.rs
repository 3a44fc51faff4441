//! The watch against a real kernel table, in namespaces of the tests' own
//! (root). No traffic is sent: routes are only added and removed.

mod common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use common::{can_run, ip_batch, lab, lab_if_root, run_ip, watch, watch_in_windows};
use ipnet::IpNet;
use vrhost_netlink::{
    NetnsRef, RouteKind, RouteWatch, RouterSync, WatchError, WatchFilter, WatchOptions, proto,
};

fn ip(s: &str) -> Option<IpAddr> {
    Some(s.parse().unwrap())
}

#[test]
fn the_initial_table_and_live_changes_of_both_families_are_handed_on() {
    let Some(ns) = lab_if_root() else { return };
    run_ip(&ns, "route add 10.9.0.0/16 via 10.0.0.9 proto static");
    let (w, mut c) = watch(&ns, WatchFilter::default(), WatchOptions::default());
    // The initial dump: the static route, not the connected subnet.
    let r = c.get("10.9.0.0/16").expect("static route of the dump");
    assert_eq!((r.protocol, r.via), (proto::STATIC, ip("10.0.0.9")));
    assert!(c.get("10.0.0.0/24").is_none(), "proto kernel skipped");
    assert!(w.stats().skipped.kernel > 0, "{:?}", w.stats());

    run_ip(&ns, "route add 10.1.0.0/16 via 10.0.0.2 proto bird");
    run_ip(
        &ns,
        "route add 10.2.0.0/16 via 10.0.0.3 proto static metric 7",
    );
    c.until("10.1/16 and 10.2/16", |t| t.len() == 3);
    let r = c.get("10.1.0.0/16").unwrap();
    assert_eq!(
        (r.protocol, r.via, r.kind),
        (proto::BIRD, ip("10.0.0.2"), RouteKind::Unicast)
    );
    assert_eq!(r.oif.as_ref().and_then(|o| o.name.as_deref()), Some("d0"));
    let r = c.get("10.2.0.0/16").unwrap();
    assert_eq!((r.protocol, r.metric), (proto::STATIC, 7));

    // A replace is one add with the new gateway.
    let before = c.batches.len();
    run_ip(&ns, "route replace 10.1.0.0/16 via 10.0.0.4 proto bird");
    c.until("the replaced gateway", |t| {
        t[&"10.1.0.0/16".parse::<IpNet>().unwrap()].via == ip("10.0.0.4")
    });
    let adds: Vec<_> = c.batches[before..].iter().flat_map(|b| &b.add).collect();
    assert_eq!(adds.len(), 1, "{adds:?}");
    assert!(c.batches[before..].iter().all(|b| b.del.is_empty()));

    // A delete.
    run_ip(&ns, "route del 10.2.0.0/16 metric 7");
    c.until("10.2/16 withdrawn", |t| t.len() == 2);

    // IPv6.
    run_ip(
        &ns,
        "-6 route add 2001:db8:1::/48 via 2001:db8::2 proto bird",
    );
    c.until("2001:db8:1::/48", |t| t.len() == 3);
    let r = c.get("2001:db8:1::/48").unwrap();
    assert_eq!((r.protocol, r.via), (proto::BIRD, ip("2001:db8::2")));

    // A blackhole is represented; a route of scope link is not taken.
    run_ip(&ns, "route add blackhole 10.4.0.0/16 proto static");
    run_ip(&ns, "route add 10.3.0.0/16 dev d0");
    c.until("the blackhole", |t| t.len() == 4);
    assert_eq!(c.get("10.4.0.0/16").unwrap().kind, RouteKind::Blackhole);
    c.settle(Duration::from_millis(100));
    assert!(c.get("10.3.0.0/16").is_none(), "scope link skipped");

    // Routes through the VR's router: IPv4 and IPv6 by gateway, the rest
    // counted.
    let mut sync = RouterSync::new(HashMap::from([("d0".to_string(), 0)]));
    let mut add = Vec::new();
    for b in &c.batches {
        let ch = sync.convert(b);
        add.extend(ch.add.into_iter().map(|r| (r.prefix, r.via, r.vnic)));
    }
    assert!(add.contains(&("10.1.0.0/16".into(), Some("10.0.0.4".into()), Some(0))));
    assert!(add.contains(&(
        "2001:db8:1::/48".into(),
        Some("2001:db8::2".into()),
        Some(0)
    )));
    let cs = sync.stats();
    assert_eq!((cs.ipv6, cs.not_unicast), (1, 1), "{cs:?}");

    let st = w.stop().expect("stops cleanly");
    assert_eq!(st.routes, 4, "{st:?}");
    assert!(st.skipped.link_scope >= 1, "{st:?}");
    assert_eq!(st.overruns, 0);
}

#[test]
fn a_thousand_routes_at_once_arrive_in_few_batches_in_order() {
    let Some(ns) = lab_if_root() else { return };
    // A window of 100 ms: `ip -batch` of 1000 routes takes tens of ms, more
    // on a loaded machine.
    let (w, mut c) = watch_in_windows(&ns, Duration::from_millis(100));
    let prefixes: Vec<String> = (0..1000u32)
        .map(|i| format!("10.{}.{}.0/24", 64 + i / 256, i % 256))
        .collect();
    let batch = |verb: &str| {
        let lines = prefixes
            .iter()
            .map(|p| format!("route {verb} {p} via 10.0.0.2 proto bird"));
        ip_batch(&ns, &format!("-{verb}"), lines);
    };
    batch("add");
    c.until("1000 routes", |t| t.len() == 1000);
    let n = c.batches.len();
    assert!(n <= 10, "{n} batches for 1000 routes");
    // In the order they were added.
    let order: Vec<String> = c
        .batches
        .iter()
        .flat_map(|b| &b.add)
        .map(|r| r.prefix.to_string())
        .collect();
    assert_eq!(order, prefixes);

    batch("del");
    c.until("all withdrawn", |t| t.is_empty());
    assert!(c.batches.len() - n <= 10, "{} batches", c.batches.len() - n);
    let st = w.stop().unwrap();
    assert_eq!((st.added, st.deleted, st.routes), (1000, 1000, 0), "{st:?}");
}

#[test]
fn a_route_added_and_withdrawn_within_a_window_is_not_handed_on() {
    let Some(ns) = lab_if_root() else { return };
    // A long window, so that the add and the delete surely fall in one.
    let (w, mut c) = watch_in_windows(&ns, Duration::from_millis(500));
    let lines = [
        "route add 10.50.0.0/16 via 10.0.0.2 proto bird",
        "route del 10.50.0.0/16",
        "route add 10.51.0.0/16 via 10.0.0.2 proto bird",
    ];
    ip_batch(&ns, "", lines.map(String::from));
    c.until("10.51/16", |t| t.len() == 1);
    let fleeting: IpNet = "10.50.0.0/16".parse().unwrap();
    assert!(
        c.batches
            .iter()
            .all(|b| !b.add.iter().any(|r| r.prefix == fleeting)),
        "{:?}",
        c.batches
    );
    let st = w.stop().unwrap();
    assert!(st.coalesced >= 1, "{st:?}");
    assert_eq!(st.added, 1, "{st:?}");
}

#[test]
fn the_lowest_metric_is_handed_on_and_its_withdrawal_falls_back() {
    let Some(ns) = lab_if_root() else { return };
    let (_w, mut c) = watch(&ns, WatchFilter::default(), WatchOptions::default());
    run_ip(
        &ns,
        "route add 10.7.0.0/16 via 10.0.0.8 metric 200 proto bird",
    );
    run_ip(
        &ns,
        "route add 10.7.0.0/16 via 10.0.0.7 metric 100 proto bird",
    );
    c.until("metric 100", |t| t.values().any(|r| r.metric == 100));
    run_ip(&ns, "route del 10.7.0.0/16 metric 100");
    c.until("metric 200", |t| t.values().any(|r| r.metric == 200));
    assert_eq!(c.get("10.7.0.0/16").unwrap().via, ip("10.0.0.8"));
}

#[test]
fn a_protocol_filter_takes_only_its_protocols() {
    let Some(ns) = lab_if_root() else { return };
    let filter = WatchFilter {
        protocols: vrhost_netlink::Protocols::Only(vec![proto::BIRD]),
        ipv6: false,
        ..WatchFilter::default()
    };
    let (w, mut c) = watch(&ns, filter, WatchOptions::default());
    run_ip(&ns, "route add 10.8.0.0/16 via 10.0.0.2 proto static");
    run_ip(
        &ns,
        "-6 route add 2001:db8:2::/48 via 2001:db8::2 proto bird",
    );
    run_ip(&ns, "route add 10.9.0.0/16 via 10.0.0.2 proto bird");
    c.until("the BIRD route", |t| t.len() == 1);
    c.settle(Duration::from_millis(100));
    assert_eq!(c.table.len(), 1, "{:?}", c.table);
    let st = w.stop().unwrap();
    assert!(st.skipped.protocol >= 1 && st.skipped.family >= 1, "{st:?}");
}

#[test]
fn a_missing_namespace_is_an_error_and_a_dropped_watch_ends() {
    if !can_run() {
        return;
    }
    let e = RouteWatch::start(
        NetnsRef::named("vrh-nl-no-such-namespace"),
        WatchFilter::default(),
        WatchOptions::default(),
        |_| {},
    )
    .unwrap_err();
    assert!(matches!(e, WatchError::Netns { .. }), "{e}");
    assert!(e.to_string().contains("vrh-nl-no-such-namespace"), "{e}");

    let ns = lab();
    let (w, rx) = RouteWatch::channel(
        NetnsRef::named(ns.name()),
        WatchFilter::default(),
        WatchOptions::default(),
        4,
    )
    .unwrap();
    assert!(w.is_running());
    drop(w);
    // The thread has ended and dropped its sender.
    assert!(rx.iter().count() <= 1);
}

#[test]
fn events_lost_to_a_full_socket_buffer_are_recovered_by_a_new_dump() {
    let Some(ns) = lab_if_root() else { return };
    // A tiny receive buffer and a slow consumer: the kernel drops events.
    let options = WatchOptions {
        max_routes: 50,
        socket_buffer: 8 << 10,
        ..WatchOptions::default()
    };
    let table = std::sync::Arc::new(std::sync::Mutex::new(HashMap::new()));
    let t2 = table.clone();
    let w = RouteWatch::start(
        NetnsRef::named(ns.name()),
        WatchFilter::default(),
        options,
        move |b| {
            std::thread::sleep(Duration::from_millis(5));
            let mut t = t2.lock().unwrap();
            for p in &b.del {
                assert!(t.remove(p).is_some(), "delete of {p} not held");
            }
            for r in b.add {
                t.insert(r.prefix, r);
            }
        },
    )
    .unwrap();
    let lines = (0..3000u32).map(|i| {
        format!(
            "route add 10.{}.{}.0/24 via 10.0.0.2 proto bird",
            64 + i / 256,
            i % 256
        )
    });
    ip_batch(&ns, "-flood", lines);
    let end = std::time::Instant::now() + Duration::from_secs(20);
    while table.lock().unwrap().len() < 3000 {
        if std::time::Instant::now() > end {
            panic!("{:?}", w.stop());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = w.stop().unwrap();
    eprintln!("{st:?}");
    assert!(st.overruns >= 1, "the buffer never overflowed: {st:?}");
    assert!(st.dumps >= 2, "{st:?}");
    assert_eq!(
        (table.lock().unwrap().len(), st.routes),
        (3000, 3000),
        "{st:?}"
    );
}

#[test]
fn nexthop_objects_as_frr_uses_them_and_multipath_routes() {
    let Some(ns) = lab_if_root() else { return };
    let (w, mut c) = watch(&ns, WatchFilter::default(), WatchOptions::default());
    // FRR 8 installs routes through nexthop objects, proto 186-196. In
    // compat mode (the default) the kernel also gives their gateway.
    run_ip(&ns, "nexthop add id 1 via 10.0.0.2 dev d0");
    run_ip(&ns, "route add 10.30.0.0/16 nhid 1 proto 196");
    c.until("the route by nexthop object", |t| t.len() == 1);
    let r = c.get("10.30.0.0/16").unwrap();
    assert_eq!((r.protocol, r.via), (proto::FRR_LAST, ip("10.0.0.2")));
    // The object changed in place: the kernel announces its routes again.
    run_ip(&ns, "nexthop replace id 1 via 10.0.0.3 dev d0");
    c.until("the new gateway", |t| {
        t.values().any(|r| r.via == ip("10.0.0.3"))
    });

    // ECMP: the first next hop stands for the route, the rest are counted.
    run_ip(
        &ns,
        "route add 10.40.0.0/16 proto bird nexthop via 10.0.0.2 nexthop via 10.0.0.4",
    );
    c.until("the multipath route", |t| t.len() == 2);
    let r = c.get("10.40.0.0/16").unwrap();
    assert_eq!((r.via, r.dropped_nexthops), (ip("10.0.0.2"), 1));

    // A group object: a multipath route.
    run_ip(&ns, "nexthop add id 2 via 10.0.0.5 dev d0");
    run_ip(&ns, "nexthop add id 10 group 2/1");
    run_ip(&ns, "route add 10.32.0.0/16 nhid 10 proto 196");
    c.until("the route by group object", |t| t.len() == 3);
    let r = c.get("10.32.0.0/16").unwrap();
    assert_eq!((r.via, r.dropped_nexthops), (ip("10.0.0.5"), 1));

    // Without compat mode the route has only the object's id: skipped.
    ns.sysctl("net.ipv4.nexthop_compat_mode", "0").unwrap();
    run_ip(&ns, "route add 10.31.0.0/16 nhid 1 proto 196");
    c.settle(Duration::from_millis(100));
    assert!(c.get("10.31.0.0/16").is_none());
    let st = w.stop().unwrap();
    assert_eq!(
        (st.multipath_truncated, st.skipped.nexthop_object),
        (2, 1),
        "{st:?}"
    );
}

#[test]
fn a_watch_whose_channel_is_full_still_stops() {
    let Some(ns) = lab_if_root() else { return };
    let tiny = WatchOptions {
        max_routes: 1,
        window: Duration::from_millis(1),
        ..WatchOptions::default()
    };
    let (w, rx) =
        RouteWatch::channel(NetnsRef::named(ns.name()), WatchFilter::default(), tiny, 1).unwrap();
    for i in 0..5 {
        run_ip(&ns, &format!("route add 10.60.{i}.0/24 via 10.0.0.2"));
    }
    std::thread::sleep(Duration::from_millis(100));
    // Nobody reads: the watch waits on the full channel, and stops anyway.
    let st = w.stop().unwrap();
    assert!(st.batches >= 2, "{st:?}");
    drop(rx);
}

#[test]
fn an_ipv6_multipath_route_losing_one_next_hop_stays() {
    let Some(ns) = lab_if_root() else { return };
    let (w, mut c) = watch(&ns, WatchFilter::default(), WatchOptions::default());
    run_ip(
        &ns,
        "-6 route add 2001:db8:5::/48 proto bird nexthop via 2001:db8::2 dev d0 nexthop via 2001:db8::3 dev d0",
    );
    c.until("the multipath route", |t| t.len() == 1);
    assert_eq!(c.get("2001:db8:5::/48").unwrap().dropped_nexthops, 1);
    // The kernel announces the delete of ::2 alone; ::3 is left.
    run_ip(&ns, "-6 route del 2001:db8:5::/48 via 2001:db8::2");
    c.until("the route by ::3", |t| {
        t.values()
            .any(|r| r.via == ip("2001:db8::3") && r.dropped_nexthops == 0)
    });
    run_ip(&ns, "-6 route del 2001:db8:5::/48");
    c.until("the route gone", |t| t.is_empty());
    let st = w.stop().unwrap();
    assert!(st.sibling_deletes >= 1, "{st:?}");
}
