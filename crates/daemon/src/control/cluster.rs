//! The controller's part in a cluster's desired state: a dispatcher's
//! engines joined by those registered in etcd, and the check of a change
//! of a remote VR's rate made through the API.

use std::collections::BTreeMap;
use std::sync::Arc;

use vrhost_host::cluster::desired::{EngineAd, EtcdPlan};
use vrhost_host::cluster::members::{RateRefused, check_rate};
use vrhost_host::cluster::{DispatchSpec, Liveness};
use vrhost_host::config::ClusterPlan;

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
