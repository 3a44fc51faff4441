//! The daemon's fast-path state from a config: routes, neighbours and
//! select entries (moved out of `fast.rs` unchanged).

use std::path::Path as FsPath;

use vrhost_host::config::Config;

use super::*;

const CFG: &str = r#"
[host]
fast_path = true

[[ports]]
name = "p0"
driver = "af_xdp"
interface = "veth0"

[[ports]]
name = "p1"
driver = "af_xdp"
interface = "veth1"

[[vrs]]
name = "a"
path = "fast"
vnics = [
  { port = "p0", mac = "02:00:00:00:01:01", addrs = ["10.0.1.1/24"] },
  { port = "p1", mac = "02:00:00:00:01:02", addrs = ["10.0.2.1/24"] },
]
[vrs.router]
routes = [{ prefix = "10.9.0.0/16", via = "10.0.2.9" }, { prefix = "10.8.0.0/16", nexthop = 0 }]
nexthops = [{ vnic = 0, mac = "02:00:00:00:0a:0a" }]
neighbours = [{ ip = "10.0.2.2", mac = "02:00:00:00:0b:0b" }]

[[rules]]
port = "p0"
dst_mac = "02:00:00:00:01:01"
vr = "a"

[[rules]]
port = "p1"
vr = "a"
vnic = 1
"#;

#[test]
fn a_vr_s_routes_neighbours_and_selects_come_from_its_plan() {
    let (_, plan) = Config::parse(CFG, "t", FsPath::new(".")).unwrap();
    let ifx = BTreeMap::from([("veth0".to_string(), 7), ("veth1".to_string(), 8)]);
    let api = BTreeMap::from([(
        (0x0a07_0000, 16),
        RouteConfig {
            prefix: "10.7.0.0/16".into(),
            via: Some("10.0.1.7".into()),
            ..RouteConfig::default()
        },
    )]);
    let learned = [(Ipv4Addr::new(10, 0, 1, 7), [2, 0, 0, 0, 7, 7], 0)];
    let d = desired(&plan, &plan.vrs[0], &api, &learned, &ifx).unwrap();
    assert_eq!(
        d.addrs,
        [Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 2, 1)]
    );
    let r = |a, b, c, l| (0, Ipv4Addr::new(10, a, b, c), l);
    assert_eq!(
        d.routes,
        BTreeMap::from([
            (r(0, 1, 0, 24), NextHop::Connected),
            (r(0, 2, 0, 24), NextHop::Connected),
            (r(7, 0, 0, 16), NextHop::Gateway(Ipv4Addr::new(10, 0, 1, 7))),
            (r(8, 0, 0, 16), NextHop::Gateway(Ipv4Addr::new(0, 0, 0, 1))),
            (r(9, 0, 0, 16), NextHop::Gateway(Ipv4Addr::new(10, 0, 2, 9))),
        ])
    );
    let n = |mac, src, ifindex| Neighbour {
        mac,
        src_mac: src,
        ifindex,
    };
    let (m0, m1) = ([2, 0, 0, 0, 1, 1], [2, 0, 0, 0, 1, 2]);
    assert_eq!(
        d.neighbours,
        BTreeMap::from([
            (Ipv4Addr::new(0, 0, 0, 1), n([2, 0, 0, 0, 0xa, 0xa], m0, 7)),
            (Ipv4Addr::new(10, 0, 1, 7), n([2, 0, 0, 0, 7, 7], m0, 7)),
            (Ipv4Addr::new(10, 0, 2, 2), n([2, 0, 0, 0, 0xb, 0xb], m1, 8)),
        ])
    );
    assert_eq!(
        d.selects,
        BTreeMap::from([
            ((7, None, Some(m0)), (Path::Fast, None)),
            ((8, None, None), (Path::Fast, None))
        ])
    );
    // Slow: the same keys, path slow; a port not attached: no key.
    let mut slow = plan.vrs[0].clone();
    slow.path = DataPath::Slow;
    let one = BTreeMap::from([("veth1".to_string(), 8)]);
    let d = desired(&plan, &slow, &BTreeMap::new(), &[], &one).unwrap();
    assert_eq!(
        d.selects,
        BTreeMap::from([((8, None, None), (Path::Slow, None))])
    );
    // A rate limit: the bucket of each key.
    slow.port_limit = Some(vrhost_host::config::PortLimit {
        rate_pps: 500,
        burst: 64,
    });
    let d = desired(&plan, &slow, &BTreeMap::new(), &[], &one).unwrap();
    let bucket = TokenBucket {
        rate_pps: 500,
        burst: 64,
    };
    assert_eq!(
        d.selects,
        BTreeMap::from([((8, None, None), (Path::Slow, Some(bucket)))])
    );
    assert_eq!(d.neighbours.len(), 1, "only those out of veth1");
}

#[test]
fn the_default_map_sizes_are_the_loaders() {
    assert_eq!(fast_config(&FastConf::default()), FastConfig::default());
}

#[test]
fn counters_since_subtract_each_field() {
    let a = FastCounters {
        rx: 10,
        fwd: 7,
        to_slow_no_neighbour: 3,
        ..FastCounters::default()
    };
    let b = FastCounters {
        rx: 4,
        fwd: 4,
        ..FastCounters::default()
    };
    let d = since(a, b);
    assert_eq!((d.rx, d.fwd, d.to_slow_no_neighbour), (6, 3, 3));
}
