//! The daemon API's JSON: the types of `vrhost-api`, which the daemon
//! answers with, and answers shaped as the schemas say for the tests.

pub use vrhost_api::*;

#[cfg(test)]
pub(crate) mod fixtures {
    //! JSON answers shaped as the schemas say, shared by the tests.

    /// A `Stats` answer: two ports, two VRs (one with two vNICs, one
    /// stopped), counters as after some traffic.
    pub const STATS: &str = r#"{
      "time_s": 1795000000.0,
      "uptime_s": 3725.5,
      "generation": 3,
      "host": {
        "rx_packets": 1000000,
        "ingress_drops": {"no_match": 10, "pool_full": 5},
        "sleeps": 42,
        "slot_violations": 0,
        "vr_restarts": 1,
        "worker_cpu_seconds": 100.0
      },
      "ports": [
        {"name": "p0", "driver": "af_xdp", "interface": "p0", "rx_packets": 600000, "rx_bytes": 38400000,
         "rx_dropped": 3, "tx_packets": 400000, "tx_bytes": 25600000, "tx_dropped": 0},
        {"name": "p1", "driver": "af_xdp", "interface": "p1", "rx_packets": 400000, "rx_bytes": 25600000,
         "rx_dropped": 0, "tx_packets": 590000, "tx_bytes": 37760000, "tx_dropped": 1}
      ],
      "vrs": [
        {"name": "tenant-a", "state": "running",
         "stats": {"rx_packets": 600000, "rx_bytes": 38400000, "tx_packets": 590000, "tx_bytes": 37760000,
                   "vr_dropped": 7, "port_dropped": 1, "ingress_drops": {"pool_full": 5},
                   "violations": {"slot_state": 2}, "vr_drops": {"no_route": 7},
                   "exits": 0, "reclaimed": 0, "kicks": 900, "pool_slots": 1024, "free_slots": 768,
                   "capture_dropped": 0,
                   "vnics": [
                     {"index": 0, "port": "p0", "rx_packets": 400000, "rx_bytes": 25600000, "tx_packets": 190000, "tx_bytes": 12160000},
                     {"index": 1, "port": "p1", "rx_packets": 200000, "rx_bytes": 12800000, "tx_packets": 400000, "tx_bytes": 25600000}
                   ]},
         "instances": [{"index": 0, "pid": 4242, "cpu": 1, "running": true, "cpu_seconds": 50.0,
                        "sleeps": 10, "heartbeat": 123456, "rx_ring_fill": 12, "tx_ring_fill": 3}]},
        {"name": "tenant-b", "state": "stopped",
         "stats": {"rx_packets": 0, "rx_bytes": 0, "tx_packets": 0, "tx_bytes": 0,
                   "vr_dropped": 0, "port_dropped": 0, "ingress_drops": {}, "violations": {}, "vr_drops": {},
                   "exits": 1, "reclaimed": 4, "kicks": 0, "pool_slots": 1024, "free_slots": 1024,
                   "capture_dropped": 0,
                   "vnics": [{"index": 0, "port": "p0", "rx_packets": 0, "rx_bytes": 0, "tx_packets": 0, "tx_bytes": 0}]},
         "instances": [{"index": 0, "pid": null, "cpu": null, "running": false, "cpu_seconds": 0.0,
                        "sleeps": 0, "heartbeat": 0, "rx_ring_fill": 0, "tx_ring_fill": 0}]}
      ]
    }"#;

    /// A `VrStatus` answer.
    pub const VR_STATUS: &str = r#"{
      "name": "tenant-a", "kind": "router", "state": "running",
      "spec": {"name": "tenant-a", "kind": "router", "slots": 1024,
               "vnics": [{"port": "p0", "mac": "02:00:00:0a:00:01", "addrs": ["10.1.0.1/24"]},
                         {"port": "p1", "mac": "02:00:00:0a:01:01", "addrs": ["10.1.1.1/24"]}],
               "router": {"routes": [{"prefix": "0.0.0.0/0", "via": "10.1.1.2"}]},
               "rules": [{"port": "p0", "dst": "10.1.0.0/16", "vr": "tenant-a", "vnic": 0, "index": 0}]},
      "stats": {"rx_packets": 600000, "rx_bytes": 38400000, "tx_packets": 590000, "tx_bytes": 37760000,
                "vr_dropped": 7, "port_dropped": 1, "ingress_drops": {"pool_full": 5},
                "violations": {}, "vr_drops": {"no_route": 7}, "exits": 0, "reclaimed": 0, "kicks": 900,
                "pool_slots": 1024, "free_slots": 768, "capture_dropped": 0,
                "vnics": [{"index": 0, "port": "p0", "rx_packets": 400000, "rx_bytes": 25600000, "tx_packets": 190000, "tx_bytes": 12160000},
                          {"index": 1, "port": "p1", "rx_packets": 200000, "rx_bytes": 12800000, "tx_packets": 400000, "tx_bytes": 25600000}]},
      "instances": [{"index": 0, "pid": 4242, "cpu": 1, "running": true, "cpu_seconds": 50.0,
                     "sleeps": 10, "heartbeat": 123456, "rx_ring_fill": 12, "tx_ring_fill": 3}],
      "api_routes": 2
    }"#;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_fixture_decodes() {
        let s: Stats = serde_json::from_str(fixtures::STATS).unwrap();
        assert_eq!(s.generation, 3);
        assert_eq!(s.ports.len(), 2);
        assert_eq!(s.vrs[0].name, "tenant-a");
        assert_eq!(s.vrs[0].stats.vnics[1].tx_packets, 400_000);
        assert_eq!(s.vrs[0].instances[0].pid, Some(4242));
        assert_eq!(s.vrs[1].instances[0].pid, None);
        assert_eq!(s.host.ingress_drops["no_match"], 10);
        // 5 before the VR, 7 in it, 1 at the port.
        assert_eq!(s.vrs[0].stats.drops(), 13);
        assert_eq!(s.vrs[0].stats.violation_count(), 2);
    }

    #[test]
    fn vr_status_fixture_decodes() {
        let v: VrStatus = serde_json::from_str(fixtures::VR_STATUS).unwrap();
        assert_eq!(v.spec.vnics[1].addrs, ["10.1.1.1/24"]);
        assert_eq!(v.spec.rules[0].index, Some(0));
        assert_eq!(
            v.spec.router.as_ref().unwrap()["routes"][0]["via"],
            "10.1.1.2"
        );
        assert_eq!(v.api_routes, 2);
    }

    #[test]
    fn decoding_tolerates_missing_and_unknown_fields() {
        let s: Stats = serde_json::from_str(
            r#"{"generation": 1, "future_field": [1, 2], "vrs": [{"name": "x"}]}"#,
        )
        .unwrap();
        assert_eq!(s.generation, 1);
        assert_eq!(s.vrs[0].name, "x");
        assert_eq!(s.vrs[0].stats.rx_packets, 0);
        assert!(s.ports.is_empty());
    }

    #[test]
    fn inputs_leave_out_absent_fields() {
        let r = Rule {
            dst: Some("10.0.0.0/8".into()),
            vr: "a".into(),
            ..Rule::default()
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"dst":"10.0.0.0/8","vr":"a"}"#
        );
        let routes = [Route {
            prefix: "192.0.2.0/24".into(),
            nexthop: Some(1),
            ..Route::default()
        }];
        let bulk = RouteBulk {
            add: &routes,
            del: &[],
        };
        assert_eq!(
            serde_json::to_string(&bulk).unwrap(),
            r#"{"add":[{"prefix":"192.0.2.0/24","nexthop":1}]}"#
        );
    }
}
