//! The daemon API's JSON as serde types, one for each schema of
//! `api/openapi.yaml` (the contract): the daemon answers with them and the
//! `vrhost` CLI reads them, so the two cannot drift apart; a test of the
//! daemon checks each against its schema in the document (its fields, and
//! that a value of it fits). Plain data: serde only, none of the daemon's
//! dependencies.
//!
//! Decoding is tolerant: every struct takes `#[serde(default)]`, so a field
//! the server leaves out reads as zero or empty, and fields this client does
//! not know are ignored; a newer daemon can add counters without breaking an
//! older client. Where the schema is open (a VR's `router` and `config`
//! tables) the value stays a [`serde_json::Value`]. Input types skip absent
//! optional fields, so the server applies its own defaults.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod cluster;
pub use cluster::{
    ClusterRateRequest, ClusterRateResult, ClusterStatus, EngineStatus, RemoteVrStatus, SliceStatus,
};

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
    /// Broken slot accounting invariants, one message per VR.
    pub slot_accounting: Vec<String>,
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
    #[serde(default)]
    pub dry_run: bool,
}

/// `ApplyResult`: what an apply changed (or would change).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// VRs moved between the slow and the fast path (no restart).
    #[serde(default)]
    pub moved: Vec<String>,
    /// Rules after the change.
    pub rules: u64,
}

/// `Vnic`: one vNIC of a VR.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Vnic {
    /// The port its frames leave by (empty for a tunnel's vNIC).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub port: String,
    /// Instead of `port`: the tunnel it is the endpoint of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<String>,
    /// An 802.1Q sub-interface of its port: the VLAN (1..=4094) its frames
    /// carry on the wire, untagged in the VR.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// Its MAC address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Its addresses, `A.B.C.D/LEN`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addrs: Vec<String>,
    /// Its link's MTU (router VRs): larger IPv6 packets to forward out of
    /// it get an ICMPv6 packet too big.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
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
    /// `router`, `program` or `tap`.
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
    /// Instances (processes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<u16>,
    /// How frames are shared among its instances.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balance: Option<String>,
    /// The dynamic scaling policy (open here: the server checks it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale: Option<Value>,
    /// Quarantine it after this many violations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantine_after: Option<u64>,
    /// Start it again when it exits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart: Option<bool>,
    /// Its share of the host worker's tx service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// `normal` or `high`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// Frames/s admitted at ingress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_pps: Option<u64>,
    /// Token bucket depth of the rate limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_burst: Option<u64>,
    /// CPU time it may use, in cores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<f64>,
    /// Memory limit: bytes, or a size like `"256M"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Value>,
    /// Cores its process may run on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<u32>>,
    /// The user (name or uid) its process runs as.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<Value>,
    /// Where its frames go: `slow` (default) or `fast`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `path = "auto"`'s thresholds (`up_pps`, `down_pps`, `dwell_ms`,
    /// `period_ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<Value>,
    /// The built-in router's tables (open schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router: Option<Value>,
    /// A custom program's own config (open schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// Its control plane: `"bird"` or `{"command": [...]}` (router VRs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<Value>,
    /// The control plane's config file, relative to the daemon's config.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_config: Option<String>,
    /// How long a control plane's routes outlive it, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_hold_ms: Option<u64>,
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
    /// Frames the host gave it.
    pub rx_packets: u64,
    /// Slots it holds now, by the host's count.
    pub held: u64,
    /// EWMA (100 ms) of the entries waiting in its rx rings.
    pub rx_fill_avg: f64,
    /// Frames/s it handed back while busy (0 until measured).
    pub capacity_pps: u64,
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
    /// Frames of this VR dropped by the host after it, before their port,
    /// by reason (a tunnel vNIC's encapsulation).
    #[serde(default)]
    pub egress_drops: BTreeMap<String, u64>,
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
    /// Time the host worker spent on this VR.
    pub host_cpu_seconds: f64,
    /// CLOCK_MONOTONIC nanoseconds of its last exit (0 never).
    pub last_exit_mono_ns: u64,
    /// CLOCK_MONOTONIC nanoseconds of its first frame out after the last
    /// restart (0 not yet).
    pub last_recovered_mono_ns: u64,
    /// Doorbells rung.
    pub kicks: u64,
    /// Pool size.
    pub pool_slots: u64,
    /// Free slots in the pool.
    pub free_slots: u64,
    /// Slots of the pool in use: all, or for a VR with a memory limit,
    /// those its pool has grown to (its pages charged to the VR).
    pub pool_usable: u64,
    /// Steps its pool grew by.
    pub pool_grows: u64,
    /// Steps of its pool's growth refused (too little room under its
    /// memory limit).
    pub pool_grow_refused: u64,
    /// Frames a capture could not keep.
    pub capture_dropped: u64,
    /// Frames/s offered to it (EWMA over 100 ms).
    pub arrival_pps: u64,
    /// Changes of the set of instances fed.
    pub rebalances: u64,
    /// Instances that exited while others went on.
    pub instance_exits: u64,
    /// Instances started beside running ones.
    pub instances_added: u64,
    /// Instances retired.
    pub instances_retired: u64,
    /// Instances wanted but not started.
    pub instances_refused: u64,
    /// Control messages relayed between its instances.
    pub ctrl_relayed: u64,
    /// Control messages between its instances dropped.
    pub ctrl_dropped: u64,
    /// Per vNIC.
    pub vnics: Vec<VnicStats>,
    /// The fast path's counters of the VR (a host with a fast path that
    /// carries it); `rx_packets` and `tx_packets` above include what it
    /// forwarded and dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast: Option<FastStats>,
    /// Its control plane (a VR with `control_plane`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlaneStats>,
}

/// `ControlPlaneStats`: how a VR's control plane (its routing daemon in
/// the VR's control namespace) runs, and what it gave the VR's FIB.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ControlPlaneStats {
    /// Whether its process runs.
    pub running: bool,
    /// Its pid, while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Times it was started (the first start included).
    pub starts: u64,
    /// Times it exited (and was restarted, or is to be).
    pub restarts: u64,
    /// Routes the VR holds from it (learnt from its kernel table).
    pub routes: u64,
    /// Route changes from it the VR applied.
    pub route_changes: u64,
    /// Route changes from it the VR refused.
    pub refused: u64,
    /// CPU time of its process while it runs, seconds.
    pub cpu_seconds: f64,
}

/// `FastStats`: what the XDP fast path did with a VR's frames.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FastStats {
    /// Frames the select table gave the VR (on whichever path).
    pub rx_packets: u64,
    /// Frames it forwarded.
    pub forwarded: u64,
    /// Frames it handed to the VR's user-space instances, by reason.
    pub to_slow: BTreeMap<String, u64>,
    /// Frames it dropped, by reason.
    pub drops: BTreeMap<String, u64>,
    /// `path = "auto"`: moves made, `to_fast` and `to_slow`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub auto_moves: BTreeMap<String, u64>,
    /// `path = "auto"`: the EWMA of its rate at the port, frames/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_rate_pps: Option<u64>,
    /// Its tunnel vNICs in the fast path, by vNIC index.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tunnels: BTreeMap<String, FastTunnelStats>,
}

/// `FastTunnelStats`: what the XDP fast path did with the frames of one
/// tunnel vNIC (since the tunnel was written to it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FastTunnelStats {
    /// Frames it decapsulated (then the VR's, as the vNIC's).
    pub decapsulated: u64,
    /// Frames it encapsulated and sent on the underlay port.
    pub encapsulated: u64,
    /// Frames of the tunnel it handed to the slow path, by reason
    /// (`bad_outer`, `no_mac`, `restored`: decapsulated, then for the
    /// slow path with its outer headers back).
    pub to_slow: BTreeMap<String, u64>,
    /// Frames of the tunnel it dropped, by reason (`headroom`; also in
    /// the VR's `egress_drops` as `tunnel_headroom`, with the slow
    /// path's).
    pub drops: BTreeMap<String, u64>,
}

impl FastStats {
    /// Frames it dropped, of every reason.
    pub fn dropped(&self) -> u64 {
        self.drops
            .values()
            .fold(0, |a: u64, b| a.saturating_add(*b))
    }
}

/// `MoveRequest` (`POST /v1/vrs/{name}/move`): where the VR's frames go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MoveRequest {
    /// `slow` or `fast`.
    pub path: String,
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
    /// `router`, `program` or `tap`.
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
    /// Where its frames go: `slow` or `fast`.
    pub path: String,
    /// `path = "auto"` in its config: the daemon moves it by its load.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub auto: bool,
    /// Why the fast path cannot carry it (a host with a fast path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fast_unavailable: Option<String>,
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
    /// Times the port's transmit fell back from xdp_frames to its socket
    /// (`af_xdp` with `tx = "auto"`: the driver took none of a run's).
    pub tx_fallbacks: u64,
    /// System calls that sent frames (`af_xdp`: `BPF_PROG_RUN` calls of
    /// `tx = "xdp"` and tx kicks); `tx_packets / tx_runs` is the frames
    /// a call carried. 0 for drivers that do not count them.
    pub tx_runs: u64,
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
    /// Times the worker napped (`host.poll.nap_us`).
    pub naps: u64,
    /// Times the worker moved a VR process onto its own core or back
    /// (`host.poll.colocate_pps`).
    pub colocations: u64,
    /// Times the worker moved itself (and the VRs on its core) to the CPU
    /// its frames arrive on, or back to its own (`host.poll.follow_rx`).
    pub follows: u64,
    /// Times the worker slept to hand its core to a VR on it that held
    /// frames (`host.poll.hand_over`).
    pub hand_overs: u64,
    /// Cluster heartbeats the ports received that no rule took (the
    /// kernel's heartbeat sockets get them): counted here, not as drops.
    pub heartbeats: u64,
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
    /// Where the route comes from, in a listing: `config`, `api` or
    /// `control-plane` (never sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
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
