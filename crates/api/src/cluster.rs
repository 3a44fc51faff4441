//! The cluster's part of the API (`GET /v1/cluster`, `POST
//! /v1/cluster/vrs/{name}/rate`): a host's place in a cluster, its engines
//! and remote VRs, and a remote VR's rate change.
use serde::{Deserialize, Serialize};

/// `ClusterStatus` (`GET /v1/cluster`): this host's part in a cluster.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterStatus {
    /// `none`, `dispatcher` or `engine`.
    pub role: String,
    /// The heartbeat socket's address (empty with no cluster).
    pub heartbeat: String,
    /// A dispatcher's engines.
    pub engines: Vec<EngineStatus>,
    /// A dispatcher's remote VRs.
    pub vrs: Vec<RemoteVrStatus>,
    /// A dispatcher's drops, by reason (`no_engine`, `no_mac`, `too_big`,
    /// `bad_tag`, `port_dropped`).
    pub drops: std::collections::BTreeMap<String, u64>,
    /// An engine's heartbeats answered.
    pub heartbeats_answered: u64,
    /// The desired state in etcd: `none` (no etcd), `connecting`, `up`,
    /// `standby` (a dispatcher another one's election key keeps from
    /// acting) or `down` (unreachable: the data path keeps its last
    /// state).
    pub etcd: String,
    /// An engine with etcd: the capacity it advertises (pps; 0: none).
    pub capacity_pps: u64,
    /// An engine with etcd: `measured` (its per-core rate measured at its
    /// start) or `configured` (`cluster.per_core_pps`); empty otherwise.
    pub capacity_source: String,
    /// A dispatcher: heartbeats (pongs) its data path saw on the underlay
    /// (its heartbeat socket gets them from the kernel): not drops.
    pub heartbeat_frames: u64,
    /// An engine with etcd: why its placements did not apply, and when
    /// they are tried again (none: applied).
    pub placements_error: Option<String>,
}

/// `EngineStatus`: one engine, as its dispatcher sees it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EngineStatus {
    /// Its name.
    pub name: String,
    /// Its underlay address.
    pub address: String,
    /// `up` or `down`.
    pub state: String,
    /// Milliseconds since its last heartbeat answer (none: never).
    pub last_heartbeat_ms: Option<f64>,
    /// Its MAC, configured or learned (empty: not known yet).
    pub mac: String,
    /// Its capacity.
    pub capacity: u64,
    /// Where its capacity comes from: `measured` or `configured` (its
    /// registration: the engine measured its per-core rate at its start,
    /// or its config gives it), or `dispatcher` (the dispatcher's
    /// `cluster.engines[].capacity`: no registration).
    pub capacity_source: String,
    /// Frames and bytes sent to it.
    pub tx_frames: u64,
    /// Bytes sent to it (inner frames).
    pub tx_bytes: u64,
    /// Frames received from it.
    pub rx_frames: u64,
    /// Bytes received from it (inner frames).
    pub rx_bytes: u64,
    /// Times it was marked down.
    pub downs: u64,
    /// Times it was marked up.
    pub ups: u64,
    /// Heartbeats sent to it.
    pub heartbeats_sent: u64,
    /// Heartbeat answers from it.
    pub heartbeats_heard: u64,
}

/// `RemoteVrStatus`: a VR that runs on engines.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RemoteVrStatus {
    /// Its name.
    pub name: String,
    /// Its id in the tag.
    pub id: u8,
    /// `flow`, `rr` or `proportional`.
    pub policy: String,
    /// The dispatcher ports it owns.
    pub ports: Vec<String>,
    /// Its engines.
    pub engines: Vec<String>,
    /// Of those, the engines up now.
    pub live_engines: Vec<String>,
    /// The rate it asks for (pps), if any.
    pub rate_pps: Option<f64>,
    /// Its placement by Algorithm 1 on the live engines (with a rate).
    pub placement: Vec<SliceStatus>,
    /// Why it could not be placed, with how much is free (its frames then
    /// go to every live engine).
    pub placement_error: Option<String>,
}

/// `SliceStatus`: part of a VR's rate placed on one engine.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SliceStatus {
    /// The engine.
    pub engine: String,
    /// The rate it carries for the VR, pps.
    pub pps: f64,
}

/// `ClusterRateRequest` (`POST /v1/cluster/vrs/{name}/rate`): the rate
/// a remote VR asks for (pps), written to the cluster's desired state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterRateRequest {
    /// Packets per second, > 0.
    pub rate: f64,
}

/// `ClusterRateResult`: the rate written to etcd (the dispatcher places
/// the VR again within its next round, 200 ms).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterRateResult {
    /// The remote VR.
    pub vr: String,
    /// The rate it asks for now (pps).
    pub rate_pps: f64,
}
