//! The daemon API's JSON, as serde types mirroring the schemas of
//! `api/openapi.yaml` (the contract). One place for all of them.
//!
//! Decoding is tolerant: every struct takes `#[serde(default)]`, so a field
//! the server leaves out reads as zero or empty, and fields this client does
//! not know are ignored; a newer daemon can add counters without breaking an
//! older client. Where the schema is open (a VR's `router` and `config`
//! tables) the value stays a [`serde_json::Value`]. Input types skip absent
//! optional fields, so the server applies its own defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `Error`: the body of every 4xx and 5xx answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The inside of [`ErrorBody`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ErrorDetail {
    /// `bad_request`, `invalid`, `not_found`, `conflict`, `too_large`,
    /// `unauthorized`, `unavailable` or `internal`.
    pub code: String,
    /// For a person.
    pub message: String,
}

/// `Health` (`GET /v1/health`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Health {
    /// `ok` or `degraded`.
    pub status: String,
    /// The daemon's version.
    pub version: String,
    /// Seconds since the daemon started.
    pub uptime_s: f64,
    /// Changes applied since start.
    pub generation: u64,
    /// VRs running.
    pub vrs_up: u64,
    /// VRs defined.
    pub vrs: u64,
}

/// `ConfigDoc` (`GET /v1/config`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ConfigDoc {
    /// Changes applied since start.
    pub generation: u64,
    /// The config in force.
    pub toml: String,
}

/// `ApplyRequest` (`POST /v1/apply`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ApplyRequest {
    /// A whole daemon config.
    pub toml: String,
    /// Compute the diff only.
    pub dry_run: bool,
}

/// `ApplyResult`: what an apply changed (or would change).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ApplyResult {
    /// The generation after the change.
    pub generation: u64,
    /// Nothing was applied.
    pub dry_run: bool,
    /// VRs started.
    pub added: Vec<String>,
    /// VRs stopped.
    pub removed: Vec<String>,
    /// VRs restarted with a changed definition.
    pub restarted: Vec<String>,
    /// VRs whose instances, scaling or balancing changed in place.
    pub rescaled: Vec<String>,
    /// VRs left forwarding.
    pub unchanged: Vec<String>,
    /// Ports opened.
    pub ports_added: Vec<String>,
    /// Ports closed.
    pub ports_removed: Vec<String>,
    /// Rules after the change.
    pub rules: u64,
}

/// `Vnic`: one vNIC of a VR.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Vnic {
    /// The port its frames leave by.
    pub port: String,
    /// Its MAC address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Its addresses, `A.B.C.D/LEN`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addrs: Vec<String>,
}

/// `Rule`: frames matching every given field go to vNIC `vnic` of `vr`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Rule {
    /// Ingress port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// Destination prefix (or an ARP target address).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
    /// Source prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// Destination MAC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_mac: Option<String>,
    /// 802.1Q VLAN id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// IP protocol number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proto: Option<u8>,
    /// UDP destination port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_dport: Option<u16>,
    /// Target VR (may be left out in a VR's own `rules`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub vr: String,
    /// Target vNIC of that VR (the server's default is 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vnic: Option<u16>,
    /// On insert: where (default the end). Never returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Returned: the rule's place in match order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
}

/// `VrSpec`: a VR as in the config file's `[[vrs]]` table, with its rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VrSpec {
    /// Unique name.
    pub name: String,
    /// `router` or `program`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A custom program's executable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// Its arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// vNICs in index order.
    pub vnics: Vec<Vnic>,
    /// Packet pool slots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
    /// Core its instance is pinned to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// The built-in router's tables (open schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router: Option<Value>,
    /// A custom program's own config (open schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// This VR's classifier rules.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
}

/// `InstanceStatus`: one process of a VR.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InstanceStatus {
    /// Instance index.
    pub index: u32,
    /// Its process, if running.
    pub pid: Option<u32>,
    /// The core it is pinned to.
    pub cpu: Option<u32>,
    /// Whether its process runs.
    pub running: bool,
    /// User plus system CPU time of the process.
    pub cpu_seconds: f64,
    /// Times it went to sleep.
    pub sleeps: u64,
    /// Its heartbeat counter.
    pub heartbeat: u64,
    /// Entries waiting in its rx rings.
    pub rx_ring_fill: u64,
    /// Entries waiting in its tx rings.
    pub tx_ring_fill: u64,
}

/// `VnicStats`: one vNIC's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VnicStats {
    /// vNIC index.
    pub index: u32,
    /// Its port.
    pub port: String,
    /// Frames to the VR.
    pub rx_packets: u64,
    /// Bytes to the VR.
    pub rx_bytes: u64,
    /// Frames from the VR.
    pub tx_packets: u64,
    /// Bytes from the VR.
    pub tx_bytes: u64,
}

/// `VrStats`: one VR's counters (monotonic while the VR runs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VrStats {
    /// Frames given to the VR.
    pub rx_packets: u64,
    /// Bytes given to the VR.
    pub rx_bytes: u64,
    /// Frames the VR sent.
    pub tx_packets: u64,
    /// Bytes the VR sent.
    pub tx_bytes: u64,
    /// Frames the VR dropped.
    pub vr_dropped: u64,
    /// Frames a port could not send.
    pub port_dropped: u64,
    /// Frames for this VR dropped by the host before it, by reason.
    pub ingress_drops: BTreeMap<String, u64>,
    /// Protocol violations of the VR, by kind.
    pub violations: BTreeMap<String, u64>,
    /// Drops the VR reported, by reason.
    pub vr_drops: BTreeMap<String, u64>,
    /// Times its process exited.
    pub exits: u64,
    /// Slots reclaimed from it.
    pub reclaimed: u64,
    /// Restarts after an exit, crash or hang.
    #[serde(default)]
    pub restarts: u64,
    /// Times the watchdog killed it.
    #[serde(default)]
    pub hangs: u64,
    /// Times it was quarantined.
    #[serde(default)]
    pub quarantines: u64,
    /// Last recovery time (exit to first frame out), ms.
    #[serde(default)]
    pub last_recovery_ms: f64,
    /// Doorbells rung.
    pub kicks: u64,
    /// Pool size.
    pub pool_slots: u64,
    /// Free slots in the pool.
    pub free_slots: u64,
    /// Frames a capture could not keep.
    pub capture_dropped: u64,
    /// Frames/s offered to it (EWMA over 100 ms).
    pub arrival_pps: u64,
    /// Instances that exited while others went on.
    pub instance_exits: u64,
    /// Instances started beside running ones.
    pub instances_added: u64,
    /// Instances retired.
    pub instances_retired: u64,
    /// Instances wanted but not started.
    pub instances_refused: u64,
    /// Per vNIC.
    pub vnics: Vec<VnicStats>,
}

impl VrStats {
    /// Every drop of the VR's frames: by the host before it, by the VR, by
    /// the port after it (`vr_drops` details `vr_dropped`, so it is not
    /// added again).
    pub fn drops(&self) -> u64 {
        self.ingress_drops
            .values()
            .fold(self.vr_dropped.saturating_add(self.port_dropped), |a, b| {
                a.saturating_add(*b)
            })
    }

    /// Violations of every kind.
    pub fn violation_count(&self) -> u64 {
        self.violations
            .values()
            .fold(0, |a: u64, b| a.saturating_add(*b))
    }
}

/// `VrStatus`: a VR's definition, state and counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VrStatus {
    /// Name.
    pub name: String,
    /// `router` or `program`.
    pub kind: String,
    /// `running` or `stopped`.
    pub state: String,
    /// Its definition.
    pub spec: VrSpec,
    /// Its counters.
    pub stats: VrStats,
    /// Its processes.
    pub instances: Vec<InstanceStatus>,
    /// Routes added through the API.
    pub api_routes: u64,
}

/// `PortStats`: one port's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PortStats {
    /// Port name.
    pub name: String,
    /// Driver.
    pub driver: String,
    /// Linux interface.
    pub interface: String,
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames dropped on receive.
    pub rx_dropped: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames dropped on send.
    pub tx_dropped: u64,
}

/// `HostStats`: the host worker's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostStats {
    /// Frames taken from the ports.
    pub rx_packets: u64,
    /// Frames dropped before any VR, by reason.
    pub ingress_drops: BTreeMap<String, u64>,
    /// Times the worker slept.
    pub sleeps: u64,
    /// Slot violations of all VRs.
    pub slot_violations: u64,
    /// VR restarts.
    pub vr_restarts: u64,
    /// CPU time of the worker.
    pub worker_cpu_seconds: f64,
}

/// One VR in [`Stats`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VrCounters {
    /// Name.
    pub name: String,
    /// `running` or `stopped`.
    pub state: String,
    /// Its counters.
    pub stats: VrStats,
    /// Its processes.
    pub instances: Vec<InstanceStatus>,
}

/// `Stats` (`GET /v1/stats`): counters of the host, every port and every VR.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    /// Seconds since the Unix epoch when read.
    pub time_s: f64,
    /// Seconds since the daemon started.
    pub uptime_s: f64,
    /// Changes applied since start.
    pub generation: u64,
    /// The host worker.
    pub host: HostStats,
    /// Every port.
    pub ports: Vec<PortStats>,
    /// Every VR.
    pub vrs: Vec<VrCounters>,
}

/// `Route`: to a gateway (`via`, optionally on `vnic`) or to a next hop of
/// the VR's config by index (`nexthop`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Route {
    /// `A.B.C.D/LEN`.
    pub prefix: String,
    /// Gateway address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The gateway's vNIC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vnic: Option<u16>,
    /// Index of a next hop of the VR's config.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nexthop: Option<u32>,
}

/// `RouteBulk`, borrowed: one request of a bulk load.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RouteBulk<'a> {
    /// Routes to add or replace.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub add: &'a [Route],
    /// Prefixes to delete.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub del: &'a [String],
}

/// `RouteResult`: what a route change did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RouteResult {
    /// Routes added or replaced.
    pub added: u64,
    /// Routes deleted.
    pub deleted: u64,
    /// Routes in the VR's table after the change (connected and local
    /// included).
    pub routes: u64,
    /// Routes added through the API.
    pub api_routes: u64,
    /// The server's time for the change.
    pub seconds: f64,
    /// `added + deleted` per second of the server's time.
    pub routes_per_second: f64,
}

/// `RoutePage`: a page of a VR's API routes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RoutePage {
    /// API routes in all.
    pub total: u64,
    /// Index of the first route of the page.
    pub offset: u64,
    /// The routes, by prefix.
    pub routes: Vec<Route>,
}

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
