//! The controller's part in a cluster's desired state: a dispatcher's
//! engines joined by those registered in etcd, its data path rebuilt when
//! its `[cluster]` changes, remote VRs added and removed through the API,
//! and the check of a change of a remote VR's rate made through the API.

use std::collections::BTreeMap;
use std::sync::Arc;

use vrhost_host::cluster::desired::{EngineAd, EtcdPlan};
use vrhost_host::cluster::dispatch::{capacities, placement_with};
use vrhost_host::cluster::members::{RateRefused, check_rate};
use vrhost_host::cluster::{ClusterPolicy, DispatchSpec, Liveness, Placed, RemoteVr};
use vrhost_host::config::{ClusterPlan, Plan};

use crate::cluster::Pending;

use super::{ControlError, Controller};

impl Controller {
    /// A dispatcher's engines with those registered in etcd joined (see
    /// [`crate::cluster::ClusterState::follow_registered`]).
    ///
    /// # Errors
    /// As that.
    pub fn follow_registered(
        &mut self,
        ads: &[EngineAd],
        rates: &BTreeMap<String, f64>,
    ) -> Result<(DispatchSpec, Arc<Liveness>), String> {
        let c = self.cluster.as_mut().ok_or("no cluster")?;
        c.follow_registered(ads, rates, &self.mailbox)
    }

    /// Whether remote VR `vr` may ask for `rate` (pps) now: the etcd plan
    /// and election lease to write it with.
    ///
    /// # Errors
    /// No dispatcher with etcd (409); etcd down, connecting or held by
    /// another dispatcher (503, with the reason); no such VR (404); a VR
    /// not placed by rate or a bad rate (422); a rate that does not fit
    /// (409, with how much is free).
    pub fn cluster_rate_check(&self, vr: &str, rate: f64) -> Result<(EtcdPlan, i64), ControlError> {
        let etcd = match &self.plan.cluster {
            Some(ClusterPlan::Dispatcher { etcd: Some(e), .. }) => e.clone(),
            _ => {
                return Err(ControlError::Conflict(
                    "the cluster's desired state is changed on a dispatcher with etcd".into(),
                ));
            }
        };
        if let Some(why) = self.etcd_health.refusal() {
            return Err(ControlError::Unavailable(why));
        }
        let lease = self.etcd_health.lease().unwrap_or(0);
        let (spec, l) = (self.cluster.as_ref())
            .and_then(|c| c.dispatch_parts())
            .ok_or_else(|| ControlError::Conflict("not a dispatcher".into()))?;
        let caps = vrhost_host::cluster::dispatch::capacities(spec, l);
        let all = match spec.engines.len() {
            64.. => !0,
            n => (1u64 << n) - 1,
        };
        match check_rate(spec, &caps, l.leased() & all, vr, rate) {
            Ok(()) => Ok((etcd, lease)),
            Err(e @ RateRefused::NoVr(_)) => Err(ControlError::NotFound(e.to_string())),
            Err(e @ RateRefused::NoFit { .. }) => Err(ControlError::Conflict(e.to_string())),
            Err(e) => Err(ControlError::Invalid(e.to_string())),
        }
    }
}

impl Controller {
    /// A changed `[cluster]`'s data path (`plan`'s), built beside the
    /// running one (none without a cluster, or if it is the same).
    ///
    /// # Errors
    /// It cannot be built (422).
    pub(super) fn rebuild_cluster(&self, plan: &Plan) -> Result<Option<Pending>, ControlError> {
        let (Some(c), Some(p)) = (&self.cluster, &plan.cluster) else {
            return Ok(None);
        };
        let names = plan.ports.iter().map(|p| p.0.clone()).collect();
        c.rebuild(p, names).map_err(ControlError::Invalid)
    }

    /// Take the data path the worker was handed with a change.
    pub(super) fn commit_cluster(&mut self, p: Option<Pending>) {
        let (Some(c), Some(p)) = (self.cluster.as_mut(), p) else {
            return;
        };
        if let Err(e) = c.commit(p) {
            tracing::error!("cluster: {e}; the engines' heartbeats follow the old list");
        }
    }

    /// The running dispatcher's spec, liveness and etcd plan, where a
    /// change of its remote VRs may be made now.
    ///
    /// # Errors
    /// Not a dispatcher (409); with etcd, etcd down, connecting or held
    /// by another dispatcher (503).
    fn dispatcher_now(&self) -> Result<(DispatchSpec, Arc<Liveness>, bool), ControlError> {
        let (spec, l) = (self.cluster.as_ref())
            .and_then(|c| c.dispatch_parts())
            .ok_or_else(|| ControlError::Conflict("this vrhost is no cluster dispatcher".into()))?;
        let etcd = matches!(
            &self.plan.cluster,
            Some(ClusterPlan::Dispatcher { etcd: Some(_), .. })
        );
        if let (true, Some(why)) = (etcd, self.etcd_health.refusal()) {
            return Err(ControlError::Unavailable(why));
        }
        Ok((spec.clone(), l.clone(), etcd))
    }

    /// Add remote VR `vr` (a `[[cluster.vrs]]` table) to a running
    /// dispatcher, as a config change; its status.
    ///
    /// # Errors
    /// [`Controller::dispatcher_now`]'s; a name, id or port taken (by a
    /// VR, remote or local, or the underlay) or a rate that does not fit
    /// (409, with how much is free); what the config check refuses (422).
    pub fn cluster_add(
        &mut self,
        vr: toml::Table,
    ) -> Result<vrhost_api::RemoteVrStatus, ControlError> {
        let (spec, l, etcd) = self.dispatcher_now()?;
        let name = vr.get("name").and_then(toml::Value::as_str).unwrap_or("");
        let name = name.to_string();
        if spec.vrs.iter().any(|v| v.name == name) || self.plan.vrs.iter().any(|v| v.name == name) {
            return Err(ControlError::Conflict(format!("a VR {name:?} exists")));
        }
        let id = vr.get("id").and_then(toml::Value::as_integer);
        if let Some(o) = spec.vrs.iter().find(|v| Some(i64::from(v.id)) == id) {
            let msg = format!("id {}: taken by remote VR {:?}", o.id, o.name);
            return Err(ControlError::Conflict(msg));
        }
        let ports = vr.get("ports").and_then(toml::Value::as_array);
        for p in ports.into_iter().flatten().filter_map(toml::Value::as_str) {
            if let Some(why) = self.port_taken(&spec, p) {
                return Err(ControlError::Conflict(format!("port {p:?}: {why}")));
            }
        }
        let rate = vr
            .get("rate")
            .and_then(|r| r.as_float().or(r.as_integer().map(|i| i as f64)));
        if let Some(rate) = rate.filter(|r| r.is_finite() && *r > 0.0) {
            fits(&spec, &l, etcd, &name, rate)?;
        }
        let mut doc = self.doc.clone();
        cluster_vrs(&mut doc).push(toml::Value::Table(vr));
        self.apply_doc(doc, false).map_err(|e| match e {
            // The config check's refusal of the rate: how much is free.
            ControlError::Invalid(m) if m.contains("pps free") => ControlError::Conflict(m),
            e => e,
        })?;
        (self.cluster_status().vrs.into_iter())
            .find(|v| v.name == name)
            .ok_or_else(|| ControlError::Internal(format!("VR {name:?} added but not shown")))
    }

    /// Remove remote VR `name` from a running dispatcher, as a config
    /// change: its ports are no VR's any more (their frames are counted
    /// drops), and with etcd its records and placements are deleted (the
    /// engines stop its VR).
    ///
    /// # Errors
    /// [`Controller::dispatcher_now`]'s; no such remote VR (404).
    pub fn cluster_remove(&mut self, name: &str) -> Result<(), ControlError> {
        self.dispatcher_now()?;
        let mut doc = self.doc.clone();
        let vrs = cluster_vrs(&mut doc);
        let at = vrs
            .iter()
            .position(|v| v.get("name").and_then(toml::Value::as_str) == Some(name))
            .ok_or_else(|| ControlError::NotFound(format!("no remote VR {name:?}")))?;
        vrs.remove(at);
        self.apply_doc(doc, false).map(|_| ())
    }

    /// Why dispatcher port `p` cannot be a new remote VR's (`None`: it can,
    /// or there is no such port, which the config check says).
    fn port_taken(&self, spec: &DispatchSpec, p: &str) -> Option<String> {
        let ix = self.plan.ports.iter().position(|q| q.0 == p)?;
        if ix == spec.underlay {
            return Some("the dispatcher's underlay".into());
        }
        if let Some(v) = spec.vrs.iter().find(|v| v.ports.contains(&ix)) {
            return Some(format!("owned by remote VR {:?}", v.name));
        }
        let local = self.plan.vrs.iter().find(|v| v.vnic_ports.contains(&ix));
        local.map(|v| format!("local VR {:?} has a vNIC on it", v.name))
    }
}

/// The `[[cluster.vrs]]` of `doc`, made if absent.
fn cluster_vrs(doc: &mut toml::Table) -> &mut Vec<toml::Value> {
    let c = doc
        .entry("cluster")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if !c.is_table() {
        *c = toml::Value::Table(toml::Table::new());
    }
    let t = c.as_table_mut().expect("made a table");
    let v = t
        .entry("vrs")
        .or_insert_with(|| toml::Value::Array(Vec::new()));
    if !v.is_array() {
        *v = toml::Value::Array(Vec::new());
    }
    v.as_array_mut().expect("made an array")
}

/// Whether a new VR asking for `rate` fits after `spec`'s VRs (Algorithm 1
/// places in order, so theirs do not move): on the engines with a lease
/// (with etcd), or on every engine (without: the config check's rule).
///
/// # Errors
/// It does not fit (409, with how much is free).
fn fits(
    spec: &DispatchSpec,
    l: &Liveness,
    etcd: bool,
    name: &str,
    rate: f64,
) -> Result<(), ControlError> {
    let n = spec.engines.len();
    let all = if n >= 64 { !0 } else { (1u64 << n) - 1 };
    let mask = if etcd { l.leased() & all } else { all };
    let mut after = spec.clone();
    after.vrs.push(RemoteVr {
        name: name.into(),
        id: 0,
        ports: Vec::new(),
        engines: (0..n).collect(),
        policy: ClusterPolicy::Flow,
        rate: Some(rate),
        vr: None,
    });
    match placement_with(&after, &capacities(spec, l), mask).last() {
        Some(Placed::NoFit { why, free }) => Err(ControlError::Conflict(format!(
            "VR {name:?}: {why}; {free} pps free on the engines"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vrhost_host::cluster::EngineLink;

    /// Engine e1 of 100 pps holding VR r of `rate` pps.
    fn spec(rate: f64) -> DispatchSpec {
        DispatchSpec {
            underlay: 2,
            local: "10.9.0.1".parse().unwrap(),
            local_mac: [2, 0, 0, 0, 9, 1],
            engines: vec![EngineLink {
                name: "e1".into(),
                remote: "10.9.0.11".parse().unwrap(),
                udp_port: 4789,
                remote_mac: None,
                capacity: 100,
            }],
            vrs: vec![RemoteVr {
                name: "r".into(),
                id: 7,
                ports: vec![0, 1],
                engines: vec![0],
                policy: ClusterPolicy::Flow,
                rate: Some(rate),
                vr: None,
            }],
        }
    }

    #[test]
    fn a_new_vr_s_rate_fits_after_the_others_or_is_refused_with_what_is_free() {
        let l = Liveness::new(1);
        assert!(fits(&spec(60.0), &l, false, "q", 40.0).is_ok());
        match fits(&spec(60.0), &l, false, "q", 50.0) {
            Err(ControlError::Conflict(m)) => {
                assert!(m.contains("VR \"q\"") && m.contains("40 pps free"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        // With etcd, only the engines with a lease count: none here.
        l.set_leased(0);
        assert!(matches!(
            fits(&spec(60.0), &l, true, "q", 1.0),
            Err(ControlError::Conflict(_))
        ));
    }
}
