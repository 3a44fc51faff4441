//! A VR's routing mode (`router.mode`) from its config to the fast path's
//! maps, and a move's early switch, checked on frames with
//! `BPF_PROG_TEST_RUN` (needs root). The port is the loopback, whose index
//! a test run reports as the ingress port.

use std::net::Ipv4Addr;
use std::path::Path as FsPath;

use vrhost_fast::Action;
use vrhost_host::config::Config;
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;

use super::*;

const ROUTER: [u8; 6] = [2, 0, 0, 0, 1, 1];
/// The next hops' MACs: 0 serves `routes`, 1 the source table.
const NH: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb]];

pub(super) fn config(mode: &str, routes: &str, source_tables: &str) -> String {
    format!(
        r#"
ports = [{{ name = "p0", driver = "af_xdp", interface = "lo" }}]
[host]
fast_path = true

[[vrs]]
name = "a"
path = "fast"
vnics = [{{ port = "p0", mac = "02:00:00:00:01:01", addrs = ["10.0.1.1/24"] }}]
[vrs.router]
mode = "{mode}"
routes = [{routes}]
source_tables = [{source_tables}]
nexthops = [{{ vnic = 0, mac = "02:00:00:00:00:0a" }}, {{ vnic = 0, mac = "02:00:00:00:00:0b" }}]

[[rules]]
port = "p0"
dst_mac = "02:00:00:00:01:01"
vr = "a"
"#
    )
}

pub(super) fn frame(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr(ROUTER),
        src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
        src_ip: Ipv4Addr::from(src),
        dst_ip: Ipv4Addr::from(dst),
        sport: 1000,
        dport: 2000,
        ttl: 64,
        frame_bytes: 64,
    }
    .write(&mut f)
    .expect("frame");
    f
}

/// Where the fast path sent a frame: the next hop (index into `NH`), or
/// `None` (to the slow path, here `XDP_PASS`).
pub(super) fn hop(st: &mut FastState, f: &[u8]) -> Option<usize> {
    let (act, out) = st.fp.test_run(f).expect("test run");
    match act {
        Action::Redirect => Some(
            NH.iter()
                .position(|m| out[0..6] == m[..])
                .expect("a next hop"),
        ),
        Action::Pass => None,
        a => panic!("{a:?}"),
    }
}

pub(super) fn state(cfg: &str) -> (FastState, Plan) {
    let (_, plan) = Config::parse(cfg, "t", FsPath::new(".")).expect("config");
    let mut st = FastState::load(&FastConf::default()).expect("load (needs root)");
    let lo = vrhost_fast::ifindex("lo").expect("loopback");
    st.ifindex.insert("lo".into(), lo);
    // What `attach` and `serve` do for a port: the loopback as an out port.
    st.fp.add_port(lo).expect("out port");
    st.reconcile(&plan, &|_| None).expect("reconcile");
    (st, plan)
}

#[test]
fn each_routing_mode_reaches_the_fast_path_and_a_change_rewrites_it() {
    let from_inside = frame([10, 0, 1, 7], [198, 51, 100, 9]);
    let from_outside = frame([192, 0, 2, 7], [198, 51, 100, 9]);
    let to_local = frame([192, 0, 2, 7], [10, 0, 1, 7]);
    let dst = config("dst", r#"{ prefix = "198.51.100.0/24", nexthop = 0 }"#, "");
    let src = config("src", r#"{ prefix = "10.0.1.0/24", nexthop = 1 }"#, "");
    let src_dst = config(
        "src-dst",
        r#"{ prefix = "198.51.100.0/24", nexthop = 0 }"#,
        r#"{ src = "10.0.1.0/24", routes = [{ prefix = "198.51.100.0/24", nexthop = 1 }] }"#,
    );
    // (config, hop from inside, from outside, whether the connected
    // subnet has a route)
    let cases = [
        (&dst, Some(0), Some(0), true),
        (&src, Some(1), None, false),
        (&src_dst, Some(1), Some(0), false),
    ];
    for (cfg, a, b, connected) in &cases {
        let (mut st, _) = state(cfg);
        assert_eq!(hop(&mut st, &from_inside), *a, "{cfg}");
        assert_eq!(hop(&mut st, &from_outside), *b, "{cfg}");
        // To the connected subnet: mode dst has a connected route, whose
        // neighbour is not known yet; the other modes have no route. Both
        // go to the slow path, counted by why.
        let before = st.counters("a").expect("counters");
        assert_eq!(hop(&mut st, &to_local), None, "{cfg}");
        let after = st.counters("a").expect("counters");
        let d = |f: fn(&FastCounters) -> u64| f(&after) - f(&before);
        let why = (d(|c| c.to_slow_no_neighbour), d(|c| c.to_slow_no_route));
        assert_eq!(why, if *connected { (1, 0) } else { (0, 1) }, "{cfg}");
    }
    // A change of mode on a running fast path: rewritten in place, the
    // routes of the old mode gone.
    let (mut st, _) = state(&dst);
    for (cfg, a, b, _) in cases.iter().rev() {
        let (_, plan) = Config::parse(cfg, "t", FsPath::new(".")).expect("config");
        st.reconcile(&plan, &|_| None).expect("reconcile");
        assert_eq!(hop(&mut st, &from_inside), *a, "after a change to {cfg}");
        assert_eq!(hop(&mut st, &from_outside), *b, "after a change to {cfg}");
    }
}

/// A move's early switch ([`FastState::switch`]) writes the select
/// entries alone: the VR is forwarded by the fast path at once, with the
/// routes already in the maps; a route the same change adds arrives with
/// the reconcile that follows.
#[test]
fn a_switch_writes_the_select_entries_alone() {
    let route = r#"{ prefix = "198.51.100.0/24", nexthop = 0 }"#;
    let slow = config("dst", route, "").replace("path = \"fast\"", "path = \"slow\"");
    let (mut st, _) = state(&slow);
    let to_far = frame([10, 0, 1, 7], [198, 51, 100, 9]);
    let to_new = frame([10, 0, 1, 7], [203, 0, 113, 9]);
    assert_eq!(hop(&mut st, &to_far), None, "slow path");
    let two = format!(r#"{route}, {{ prefix = "203.0.113.0/24", nexthop = 1 }}"#);
    let (_, fast) = Config::parse(&config("dst", &two, ""), "t", FsPath::new(".")).expect("config");
    st.switch(&fast, &["a".to_string()]).expect("switch");
    assert_eq!(hop(&mut st, &to_far), Some(0), "fast path at once");
    assert_eq!(
        hop(&mut st, &to_new),
        None,
        "the new route is not written yet"
    );
    st.reconcile(&fast, &|_| None).expect("reconcile");
    assert_eq!(hop(&mut st, &to_new), Some(1));
    // A VR the maps do not hold yet is left to the reconcile.
    st.switch(&fast, &["nobody".to_string()])
        .expect("no such VR: nothing");
}

/// Modes src and src-dst: routes added and deleted through the API reach
/// the fast path where the router puts them (mode src: a source prefix;
/// mode src-dst: the table of `0.0.0.0/0`), beside the config's.
#[test]
fn api_routes_reach_the_fast_path_in_modes_src_and_src_dst() {
    let from_inside = frame([10, 0, 1, 7], [198, 51, 100, 9]);
    let from_outside = frame([192, 0, 2, 7], [198, 51, 100, 9]);
    let api_route = |prefix: &str| {
        let k = vrhost_router::parse_prefix(prefix).unwrap();
        let r = RouteConfig {
            prefix: prefix.into(),
            nexthop: Some(1),
            ..RouteConfig::default()
        };
        BTreeMap::from([(k, r)])
    };
    // (config, the API's prefix, frames it routes and those it does not)
    let src_dst = config(
        "src-dst",
        "",
        r#"{ src = "10.0.1.0/24", routes = [{ prefix = "198.51.100.0/24", nexthop = 0 }] }"#,
    );
    let cases = [
        (
            config("src", "", ""),
            "192.0.2.0/24",
            &from_outside,
            &from_inside,
        ),
        (src_dst, "198.51.100.0/24", &from_outside, &from_inside),
    ];
    for (cfg, prefix, routed, other) in &cases {
        let (mut st, plan) = state(cfg);
        let other_hop = hop(&mut st, other);
        assert_eq!(hop(&mut st, routed), None, "{cfg}: no route before");
        let api = api_route(prefix);
        st.reconcile(&plan, &|_| Some(&api)).expect("reconcile");
        assert_eq!(hop(&mut st, routed), Some(1), "{cfg}: the API's route");
        assert_eq!(hop(&mut st, other), other_hop, "{cfg}: the rest as it was");
        st.reconcile(&plan, &|_| None).expect("reconcile");
        assert_eq!(hop(&mut st, routed), None, "{cfg}: deleted");
    }
}
