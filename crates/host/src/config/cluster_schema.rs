//! The TOML of the `[cluster]` table: serde types only (checked in
//! `cluster`).

use serde::Deserialize;
use toml::Spanned;

/// `[cluster]`: this host's part in a PdP cluster.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConf {
    /// `dispatcher` or `engine`.
    pub role: Spanned<String>,
    /// Address and UDP port of the heartbeat socket: the dispatcher's
    /// beacon sends from it, an engine answers on it.
    pub heartbeat: Spanned<String>,
    /// The underlay port (a `ports[].name`): a dispatcher's, or an
    /// engine's with etcd (its VRs' tunnels go there).
    #[serde(default)]
    pub underlay: Option<Spanned<String>>,
    /// Its underlay address (a dispatcher's, or an engine's with etcd).
    #[serde(default)]
    pub local: Option<Spanned<String>>,
    /// The underlay's MAC (default: the interface's): a dispatcher's, or
    /// an engine's with etcd (its tunnels' `local_mac`).
    #[serde(default)]
    pub local_mac: Option<Spanned<String>>,
    /// Dispatcher: heartbeat period in ms (default 100).
    #[serde(default)]
    pub heartbeat_ms: Option<Spanned<u64>>,
    /// Dispatcher: periods without an answer before an engine is down
    /// (default 3).
    #[serde(default)]
    pub misses: Option<Spanned<u32>>,
    /// Dispatcher: the engines.
    #[serde(default)]
    pub engines: Vec<EngineConf>,
    /// Dispatcher: the VRs that run on engines.
    #[serde(default)]
    pub vrs: Vec<RemoteVrConf>,
    /// etcd endpoints (`http://host:port`): the cluster's desired state
    /// lives there (none: no etcd, the config is the whole state).
    #[serde(default)]
    pub etcd: Vec<Spanned<String>>,
    /// Key prefix of this cluster's desired state (default
    /// `/vrhost/default`).
    #[serde(default)]
    pub etcd_prefix: Option<Spanned<String>>,
    /// TTL of etcd leases in seconds (an engine's registration, the
    /// dispatcher's election; default 2).
    #[serde(default)]
    pub lease_s: Option<Spanned<u64>>,
    /// Engine with etcd: its name (the dispatcher's `cluster.engines[].name`).
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    /// Engine with etcd: cores it gives VR instances (default 1).
    #[serde(default)]
    pub cores: Option<Spanned<u32>>,
    /// Engine with etcd: the rate one core forwards, pps (default 1); it
    /// advertises `cores` x `per_core_pps` as its capacity.
    #[serde(default)]
    pub per_core_pps: Option<Spanned<u64>>,
    /// Engine with etcd: the MAC its VRs' tunnels send to, when the
    /// dispatcher is behind a router (default: the dispatcher's own).
    #[serde(default)]
    pub next_hop_mac: Option<Spanned<String>>,
}

/// `[[cluster.engines]]`: an engine host.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConf {
    /// Unique name (seeds the flow hashing: keep it stable).
    pub name: Spanned<String>,
    /// Its underlay address.
    pub address: Spanned<String>,
    /// Its VXLAN UDP port (default 4789).
    #[serde(default)]
    pub udp_port: Option<Spanned<u16>>,
    /// The UDP port it answers heartbeats on (default 4790).
    #[serde(default)]
    pub heartbeat_port: Option<Spanned<u16>>,
    /// Its MAC (default: learned from its frames).
    #[serde(default)]
    pub mac: Option<Spanned<String>>,
    /// Its capacity (pps or instances), for `proportional` (default 1).
    #[serde(default)]
    pub capacity: Option<Spanned<u64>>,
}

/// `[[cluster.vrs]]`: a VR that runs on engines.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteVrConf {
    /// Unique name.
    pub name: Spanned<String>,
    /// Its id in the tag, 1..=255, the same on its engines.
    pub id: Spanned<u8>,
    /// The dispatcher ports it owns.
    pub ports: Vec<Spanned<String>>,
    /// Its engines (`cluster.engines[].name`); none with `rate`.
    #[serde(default)]
    pub engines: Vec<Spanned<String>>,
    /// The rate it asks for (pps): placed on the engines by Algorithm 1.
    #[serde(default)]
    pub rate: Option<Spanned<f64>>,
    /// `flow` (default), `rr` or `proportional`.
    #[serde(default)]
    pub policy: Option<Spanned<String>>,
    /// With etcd: the engines' VR, a `[[vrs]]` table whose `vnics` (one
    /// per port, `tunnel` left out) the dispatcher binds to tunnels of
    /// the tags; written to etcd for the engines it is placed on.
    #[serde(default)]
    pub vr: Option<toml::Table>,
}
