//! The dispatcher's engines with etcd: its configured ones
//! (`[[cluster.engines]]`, static: their links and heartbeat addresses
//! are the config's) joined by the engines registered in etcd under other
//! names, whose underlay address, heartbeat port, MAC and capacity are
//! their registration's. An engine whose registration goes is left out
//! again. The joined list is ordered: the configured engines in config
//! order, then the registered ones by name, so the same registrations give
//! the same list (and the same placement) on every dispatcher.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::desired::EngineAd;
use super::dispatch::{DispatchSpec, EngineLink};
use super::engines::MAX_ENGINES;

/// The configured part of a dispatcher's engines, and how registered
/// engines are reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Members {
    /// The spec as configured (its engines are the static ones).
    pub base: DispatchSpec,
    /// The configured engines' heartbeat addresses.
    pub beats: Vec<(String, SocketAddr)>,
    /// The MAC frames to registered engines go to (the underlay's next
    /// hop; `None`: each engine's advertised MAC).
    pub via: Option<[u8; 6]>,
}

/// The configured engines joined by the registered ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Joined {
    /// The spec: engines and the VRs placed by rate over all of them.
    pub spec: DispatchSpec,
    /// Each engine's name and heartbeat address, as `spec.engines`.
    pub beats: Vec<(String, SocketAddr)>,
    /// Registered engines left out (more than [`MAX_ENGINES`]).
    pub left_out: Vec<String>,
}

impl Members {
    /// The engines with `ads` (the live registrations) joined, and the
    /// rates of the VRs placed by rate as `rates` gives (by VR name; the
    /// desired state's, else the config's).
    pub fn join(&self, ads: &[EngineAd], rates: &BTreeMap<String, f64>) -> Joined {
        let mut spec = self.base.clone();
        for v in spec.vrs.iter_mut() {
            if let (Some(r), Some(_)) = (rates.get(&v.name), v.rate) {
                v.rate = Some(*r);
            }
        }
        let mut beats = self.beats.clone();
        let mut extra: Vec<&EngineAd> = ads
            .iter()
            .filter(|a| a.capacity() > 0 && !spec.engines.iter().any(|e| e.name == a.name))
            .collect();
        extra.sort_by(|a, b| a.name.cmp(&b.name));
        extra.dedup_by(|a, b| a.name == b.name);
        let mut left_out = Vec::new();
        for a in extra {
            if spec.engines.len() >= MAX_ENGINES {
                left_out.push(a.name.clone());
                continue;
            }
            let mac = a.local_mac.as_deref().and_then(|m| m.parse().ok());
            spec.engines.push(EngineLink {
                name: a.name.clone(),
                remote: a.address,
                udp_port: vrhost_packet::tunnel::VXLAN_PORT,
                remote_mac: self.via.or(mac.map(|m: vrhost_packet::MacAddr| m.0)),
                capacity: a.capacity(),
            });
            let port = a.heartbeat_port.unwrap_or(crate::config::HEARTBEAT_PORT);
            beats.push((a.name.clone(), SocketAddr::new(a.address.into(), port)));
        }
        let n = spec.engines.len();
        for v in spec.vrs.iter_mut().filter(|v| v.rate.is_some()) {
            v.engines = (0..n).collect();
        }
        Joined {
            spec,
            beats,
            left_out,
        }
    }
}

/// For each engine of `new`, its index in `old` (by name), if there.
pub fn carried_from(old: &[EngineLink], new: &[EngineLink]) -> Vec<Option<usize>> {
    new.iter()
        .map(|n| old.iter().position(|o| o.name == n.name))
        .collect()
}

/// Why a VR's new rate is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RateRefused {
    /// No remote VR of that name.
    #[error("no remote VR {0:?}")]
    NoVr(String),
    /// The VR names its engines: it is not placed by rate.
    #[error("VR {0:?} names its engines: it is not placed by rate")]
    NotByRate(String),
    /// Not a rate.
    #[error("{0}: a rate must be a number > 0 (pps)")]
    Bad(f64),
    /// It, or a VR placed after it, would not fit.
    #[error("VR {vr:?}: {why}; {free} pps free on the engines")]
    NoFit {
        /// The VR that would not fit.
        vr: String,
        /// Algorithm 1's refusal.
        why: String,
        /// The free capacity Algorithm 1 reports.
        free: f64,
    },
}

/// Whether VR `vr` of `spec` may ask for `rate` (pps) on the engines
/// `leased` (one bit each) of capacities `caps`: every VR that fits now
/// must still fit (Algorithm 1 places them in order), `vr` too.
///
/// # Errors
/// [`RateRefused`], with how much is free when it does not fit.
pub fn check_rate(
    spec: &DispatchSpec,
    caps: &[u64],
    leased: u64,
    vr: &str,
    rate: f64,
) -> Result<(), RateRefused> {
    let Some(i) = spec.vrs.iter().position(|v| v.name == vr) else {
        return Err(RateRefused::NoVr(vr.into()));
    };
    if spec.vrs[i].rate.is_none() {
        return Err(RateRefused::NotByRate(vr.into()));
    }
    if !(rate.is_finite() && rate > 0.0) {
        return Err(RateRefused::Bad(rate));
    }
    let before = super::dispatch::placement_with(spec, caps, leased);
    let mut after = spec.clone();
    after.vrs[i].rate = Some(rate);
    let now = super::dispatch::placement_with(&after, caps, leased);
    for (k, p) in now.iter().enumerate() {
        let fitted = !matches!(before.get(k), Some(super::Placed::NoFit { .. }));
        if let super::Placed::NoFit { why, free } = p
            && (k == i || fitted)
        {
            return Err(RateRefused::NoFit {
                vr: after.vrs[k].name.clone(),
                why: why.clone(),
                free: *free,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "members_tests.rs"]
mod tests;
