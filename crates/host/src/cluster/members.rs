//! The dispatcher's engines with etcd: its configured ones
//! (`[[cluster.engines]]`, static: their links and heartbeat addresses
//! are the config's) joined by the engines registered in etcd under other
//! names, whose underlay address, heartbeat port, MAC and capacity are
//! their registration's. An engine whose registration goes is left out
//! again. The joined list is ordered: the configured engines in config
//! order, then the registered ones by name, so the same registrations give
//! the same list (and the same placement) on every dispatcher.

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
    /// The engines with `ads` (the live registrations) joined.
    pub fn join(&self, ads: &[EngineAd]) -> Joined {
        let mut spec = self.base.clone();
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

#[cfg(test)]
#[path = "members_tests.rs"]
mod tests;
