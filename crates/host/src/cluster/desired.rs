//! The cluster's desired state as it is kept in etcd (issue 23): the key
//! schema under a cluster's prefix, the records (JSON), and what an
//! engine is asked to run (a config fragment per VR placed on it, built
//! from the dispatcher's remote VR and the engine's advertisement).
//!
//! Pure: no etcd client here (the daemon's `etcd` module talks to etcd),
//! so the schema and the fragments are checked without one. The schema is
//! written down in `docs/cluster.md`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::dispatch::{DispatchSpec, RemoteVr};
use super::place::Placed;
use super::tag::Tag;

/// Default key prefix of a cluster's desired state.
pub const DEFAULT_PREFIX: &str = "/vrhost/default";
/// Default lease TTL (an engine's registration, the dispatcher's election).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(2);

/// `[cluster] etcd`, checked: where the desired state is and, on an
/// engine, what it advertises.
#[derive(Debug, Clone, PartialEq)]
pub struct EtcdPlan {
    /// The endpoints (`http://host:port`).
    pub endpoints: Vec<String>,
    /// Key prefix (no trailing `/`).
    pub prefix: String,
    /// Lease TTL.
    pub lease: Duration,
    /// On an engine: its advertisement.
    pub engine: Option<EngineAd>,
    /// On an engine with no `per_core_pps`: measure it at start (the
    /// daemon does, before its agent registers).
    pub measure: bool,
}

/// An engine's registration (`<prefix>/engines/<name>`, under its lease).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineAd {
    /// Its name (the dispatcher's `cluster.engines[].name`).
    pub name: String,
    /// Its underlay port (a `ports[].name` of its config): its VRs'
    /// tunnels go there.
    pub underlay: String,
    /// Its underlay address.
    pub address: Ipv4Addr,
    /// Cores it gives VR instances.
    pub cores: u32,
    /// The rate one core forwards (pps).
    pub per_core_pps: u64,
    /// The MAC its tunnels send to (the underlay's next hop), if not the
    /// dispatcher's own.
    #[serde(default)]
    pub next_hop_mac: Option<String>,
    /// Its underlay's MAC: configured, else the interface's if it could
    /// be read (its tunnels' `local_mac`; a dispatcher that has no
    /// `[[cluster.engines]]` entry for it sends there).
    #[serde(default)]
    pub local_mac: Option<String>,
    /// The UDP port it answers heartbeats on (default 4790).
    #[serde(default)]
    pub heartbeat_port: Option<u16>,
    /// Whether `per_core_pps` was measured at its start (else configured).
    #[serde(default)]
    pub measured: bool,
}

impl EngineAd {
    /// Its capacity (pps): cores x per-core rate.
    pub fn capacity(&self) -> u64 {
        u64::from(self.cores).saturating_mul(self.per_core_pps)
    }
}

/// A remote VR as the dispatcher publishes it (`<prefix>/vrs/<name>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VrRecord {
    /// Its id in the tag.
    pub id: u8,
    /// Its policy's name.
    pub policy: String,
    /// The rate it asks for (pps), if placed by rate.
    pub rate: Option<f64>,
    /// The engines' VR (TOML of a `[[vrs]]` table), if given.
    pub config: Option<String>,
}

/// What an engine is asked to run (`<prefix>/placements/<engine>/<vr>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// The VR's id in the tag.
    pub id: u8,
    /// Its slice of the VR's rate (pps; 0: not placed by rate).
    pub pps: f64,
    /// A config fragment: its `[[tunnels]]` to the dispatcher and its
    /// `[[vrs]]` entry (TOML).
    pub config: String,
}

/// The keys of one cluster.
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// The keys under `prefix`.
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.trim_end_matches('/').to_string(),
        }
    }

    /// Engine registrations' prefix.
    pub fn engines(&self) -> String {
        format!("{}/engines/", self.prefix)
    }

    /// Engine `name`'s registration.
    pub fn engine(&self, name: &str) -> String {
        format!("{}{name}", self.engines())
    }

    /// Remote VRs' prefix.
    pub fn vrs(&self) -> String {
        format!("{}/vrs/", self.prefix)
    }

    /// Every placement's prefix.
    pub fn all_placements(&self) -> String {
        format!("{}/placements/", self.prefix)
    }

    /// Engine `engine`'s placements' prefix.
    pub fn placements(&self, engine: &str) -> String {
        format!("{}{engine}/", self.all_placements())
    }

    /// The dispatcher's election key (held under its lease).
    pub fn dispatcher(&self) -> String {
        format!("{}/dispatcher", self.prefix)
    }
}

/// The config fragment engine `ad` runs for remote VR `vr` of `spec`: one
/// VXLAN tunnel per port of the VR, to the dispatcher, with the VNI of the
/// port's tag, and the VR's table with each vNIC bound to its tunnel.
///
/// # Errors
/// The VR has no `vr` table, its `vnics` do not match its ports, or a
/// port gives no tag.
pub fn fragment(spec: &DispatchSpec, vr: &RemoteVr, ad: &EngineAd) -> Result<toml::Table, String> {
    let Some(table) = &vr.vr else {
        return Err(format!("VR {:?} has no `vr` table to run", vr.name));
    };
    let mut table = table.clone();
    let vnics = match table.get_mut("vnics") {
        Some(toml::Value::Array(a)) if a.len() == vr.ports.len() => a,
        _ => {
            return Err(format!(
                "VR {:?}: `vr.vnics` must list one vNIC per port",
                vr.name
            ));
        }
    };
    let mut tunnels = Vec::new();
    for (k, (&p, vnic)) in vr.ports.iter().zip(vnics.iter_mut()).enumerate() {
        let port = u8::try_from(p).map_err(|_| format!("port index {p} beyond the tag's"))?;
        let tag = Tag {
            vr: vr.id,
            port,
            local: false,
            instance: 0,
        };
        let vni = tag.to_vni().map_err(|e| format!("VR {:?}: {e}", vr.name))?;
        let name = format!("c{}p{k}", vr.id);
        let toml::Value::Table(v) = vnic else {
            return Err(format!("VR {:?}: vr.vnics[{k}] is not a table", vr.name));
        };
        v.insert("tunnel".into(), name.clone().into());
        let mut t = toml::Table::new();
        t.insert("name".into(), name.into());
        t.insert("kind".into(), "vxlan".into());
        t.insert("port".into(), ad.underlay.clone().into());
        t.insert("local".into(), ad.address.to_string().into());
        t.insert("remote".into(), spec.local.to_string().into());
        t.insert("vni".into(), i64::from(vni).into());
        let mac = (ad.next_hop_mac.clone())
            .unwrap_or_else(|| vrhost_packet::MacAddr(spec.local_mac).to_string());
        t.insert("remote_mac".into(), mac.into());
        if let Some(m) = &ad.local_mac {
            t.insert("local_mac".into(), m.clone().into());
        }
        tunnels.push(toml::Value::Table(t));
    }
    table.insert("name".into(), vr.name.clone().into());
    let mut doc = toml::Table::new();
    doc.insert("tunnels".into(), toml::Value::Array(tunnels));
    doc.insert("vrs".into(), toml::Value::Array(vec![table.into()]));
    Ok(doc)
}

/// Every engine's assignments, by (engine name, VR name), for the VRs of
/// `spec` that carry a `vr` table: a VR placed by rate on the engines of
/// its slices (`placed`, from [`super::dispatch::placement_of`]) or, if
/// it no longer fits, on every engine; the others on their configured
/// engines. Only engines with an
/// advertisement (`ads[e]`, a live registration) get any.
pub fn assignments(
    spec: &DispatchSpec,
    placed: &[Placed],
    ads: &[Option<EngineAd>],
) -> BTreeMap<(String, String), Assignment> {
    let mut out = BTreeMap::new();
    for (vi, vr) in spec.vrs.iter().enumerate() {
        if vr.vr.is_none() {
            continue;
        }
        let slices: Vec<(usize, f64)> = match placed.get(vi) {
            Some(Placed::Slices(s)) => s.iter().map(|s| (s.engine, s.amount)).collect(),
            // It no longer fits: its frames go to every live engine
            // (best effort), so every registered engine runs it.
            Some(Placed::NoFit { .. }) => (0..ads.len()).map(|e| (e, 0.0)).collect(),
            _ => vr.engines.iter().map(|&e| (e, 0.0)).collect(),
        };
        for (e, pps) in slices {
            let Some(Some(ad)) = ads.get(e) else { continue };
            let Ok(doc) = fragment(spec, vr, ad) else {
                continue;
            };
            let Ok(config) = toml::to_string(&doc) else {
                continue;
            };
            let a = Assignment {
                id: vr.id,
                pps,
                config,
            };
            out.insert((spec.engines[e].name.clone(), vr.name.clone()), a);
        }
    }
    out
}

/// `base` (an engine's own config) with the fragments of `assigned`
/// appended (their tunnels and VRs after the base's).
///
/// # Errors
/// A fragment that is no TOML, or a base whose `tunnels` or `vrs` is no
/// array.
pub fn merged(base: &toml::Table, assigned: &[Assignment]) -> Result<toml::Table, String> {
    let mut doc = base.clone();
    for a in assigned {
        let frag: toml::Table =
            toml::from_str(&a.config).map_err(|e| format!("VR id {}: {e}", a.id))?;
        for (k, v) in frag {
            let toml::Value::Array(items) = v else {
                return Err(format!("VR id {}: {k} is no array", a.id));
            };
            let slot = doc
                .entry(k.clone())
                .or_insert_with(|| toml::Value::Array(Vec::new()));
            let toml::Value::Array(into) = slot else {
                return Err(format!("the engine's config: {k} is no array"));
            };
            into.extend(items);
        }
    }
    Ok(doc)
}

#[cfg(test)]
#[path = "desired_tests.rs"]
pub(crate) mod tests;
