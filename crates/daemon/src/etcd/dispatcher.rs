//! The dispatcher's placer: wins the election (`<prefix>/dispatcher`,
//! held under its lease: a second dispatcher stands by and writes
//! nothing), publishes its remote VRs (`<prefix>/vrs/<name>`), follows
//! the engines' registrations (their leases: an engine whose lease
//! expired is gone, for the data path too, and its capacity is what it
//! advertises) and writes the placements Algorithm 1 makes over them
//! (`<prefix>/placements/<engine>/<vr>`), deleting the stale ones. The
//! placement is a function of the registrations and the config, so a
//! restarted dispatcher writes the same one. A remote VR added to or
//! removed from the config while it runs (a config change, the API) is
//! published, or its record and placements deleted, in its next round.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp, WatchOptions};
use vrhost_host::cluster::desired::{EngineAd, EtcdPlan, Keys, VrRecord, assignments};
use vrhost_host::cluster::dispatch::{capacities, placement_with};
use vrhost_host::cluster::{DispatchSpec, RemoteVr};

use super::{Lease, again, connect, e2s, fenced, list, lock, pause, settle};
use crate::api::ApiState;
use crate::cluster::{EtcdHealth, EtcdState};

/// Run until `stop`.
pub async fn run(etcd: &EtcdPlan, state: &Arc<ApiState>, health: &EtcdHealth, stop: &AtomicBool) {
    let parts = {
        let c = lock(&state.ctl);
        let parts = c.cluster().and_then(|c| c.dispatch_parts());
        parts.map(|(s, _)| s.clone())
    };
    let Some(spec) = parts else {
        return;
    };
    let mut p = Placer {
        keys: Keys::new(&etcd.prefix),
        me: format!("{} pid {}", spec.local, std::process::id()),
        spec,
        state: state.clone(),
        published: None,
    };
    let what = "forwarding with the last state";
    again(stop, health, what, async || {
        p.session(etcd, health, stop).await
    })
    .await;
}

struct Placer {
    keys: Keys,
    /// Who this dispatcher is, in the election key.
    me: String,
    /// The spec as configured (its VRs are published).
    spec: DispatchSpec,
    state: Arc<ApiState>,
    /// The remote VRs last published in this session.
    published: Option<Vec<RemoteVr>>,
}

impl Placer {
    async fn session(
        &mut self,
        etcd: &EtcdPlan,
        health: &EtcdHealth,
        stop: &AtomicBool,
    ) -> Result<(), String> {
        let mut c = connect(&etcd.endpoints).await.map_err(e2s)?;
        let mut lease = Lease::grant(&mut c, etcd.lease).await?;
        let mut said = false;
        while !self.elected(&mut c, lease.id).await? {
            if !said {
                health.set(EtcdState::Standby);
                tracing::warn!("etcd: another dispatcher acts on this cluster; standing by");
                said = true;
            }
            lease.keep().await?;
            if !pause(Duration::from_millis(200), stop).await {
                let _ = c.lease_revoke(lease.id).await;
                return Ok(());
            }
        }
        tracing::info!(lease = lease.id, "etcd: the cluster's dispatcher");
        health.elected(lease.id);
        self.published = None;
        let watch = WatchOptions::new().with_prefix();
        let engines = self.keys.engines();
        let mut events = c.watch(engines.as_str(), Some(watch)).await.map_err(e2s)?;
        while !stop.load(Ordering::Relaxed) {
            lease.keep().await?;
            self.publish(&mut c, lease.id).await?;
            self.place(&mut c, lease.id).await?;
            settle(&mut events).await?;
        }
        let _ = c.lease_revoke(lease.id).await;
        Ok(())
    }

    /// Take the election key if free; whether this dispatcher holds it.
    async fn elected(&self, c: &mut Client, lease: i64) -> Result<bool, String> {
        let key = self.keys.dispatcher();
        let put = PutOptions::new().with_lease(lease);
        let txn = Txn::new()
            .when([Compare::version(key.as_str(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.as_str(), self.me.as_str(), Some(put))])
            .or_else([TxnOp::get(key.as_str(), None)]);
        let r = c.txn(txn).await.map_err(e2s)?;
        if r.succeeded() {
            return Ok(true);
        }
        // Held by this dispatcher under an older lease (its last session's):
        // held again under this one, before that lease expires.
        let put = PutOptions::new().with_lease(lease);
        let txn = Txn::new()
            .when([Compare::value(
                key.as_str(),
                CompareOp::Equal,
                self.me.as_str(),
            )])
            .and_then([TxnOp::put(key.as_str(), self.me.as_str(), Some(put))]);
        Ok(c.txn(txn).await.map_err(e2s)?.succeeded())
    }

    /// Write the remote VRs' records when the config's changed (and at
    /// the session's start): the config's, except a rate already in etcd
    /// (the desired state's: set through the API), which stays; the
    /// records of VRs no longer in the config are deleted.
    async fn publish(&mut self, c: &mut Client, lease: i64) -> Result<(), String> {
        let vrs = {
            let ctl = lock(&self.state.ctl);
            let now = ctl.cluster().and_then(|c| c.configured());
            now.map_or_else(|| self.spec.vrs.clone(), |s| s.vrs.clone())
        };
        if self.published.as_ref() == Some(&vrs) {
            return Ok(());
        }
        let have: BTreeMap<String, Vec<u8>> = list(c, &self.keys.vrs())
            .await
            .map_err(e2s)?
            .into_iter()
            .collect();
        for v in &vrs {
            let key = format!("{}{}", self.keys.vrs(), v.name);
            let kept = (have.get(&key))
                .and_then(|j| serde_json::from_slice::<VrRecord>(j).ok())
                .and_then(|r| r.rate);
            let config = v.vr.as_ref().and_then(|t| toml::to_string(t).ok());
            let rec = VrRecord {
                id: v.id,
                policy: v.policy.name().into(),
                rate: v.rate.map(|r| kept.unwrap_or(r)),
                config,
            };
            let json = serde_json::to_vec(&rec).map_err(|e| e.to_string())?;
            if have.get(&key) != Some(&json) {
                fenced(c, &self.keys, lease, TxnOp::put(key, json, None)).await?;
            }
        }
        let gone = |k: &&String| {
            !vrs.iter()
                .any(|v| **k == format!("{}{}", self.keys.vrs(), v.name))
        };
        for k in have.keys().filter(gone) {
            tracing::info!(key = %k, "etcd: remote VR removed");
            fenced(c, &self.keys, lease, TxnOp::delete(k.as_str(), None)).await?;
        }
        self.published = Some(vrs);
        Ok(())
    }

    /// Follow the registrations and the VRs' rates and write the
    /// placement they give.
    async fn place(&self, c: &mut Client, lease: i64) -> Result<(), String> {
        let rates: BTreeMap<String, f64> = (list(c, &self.keys.vrs()).await.map_err(e2s)?)
            .into_iter()
            .filter_map(|(k, v)| {
                let name = k.strip_prefix(&self.keys.vrs())?.to_string();
                Some((name, serde_json::from_slice::<VrRecord>(&v).ok()?.rate?))
            })
            .collect();
        let regs: BTreeMap<String, Vec<u8>> = list(c, &self.keys.engines())
            .await
            .map_err(e2s)?
            .into_iter()
            .collect();
        let registered: Vec<EngineAd> = (regs.iter())
            .filter_map(|(k, v)| {
                let ad = serde_json::from_slice::<EngineAd>(v).ok()?;
                (*k == self.keys.engine(&ad.name) && ad.capacity() > 0).then_some(ad)
            })
            .collect();
        // Registered engines join the data path (and leave it). If they
        // cannot, the placements in etcd stay as they are: the spec of the
        // daemon's start would undo changes made since (VRs added or
        // removed at run time).
        let followed = lock(&self.state.ctl).follow_registered(&registered, &rates);
        let (spec, liveness) = match followed {
            Ok(f) => f,
            Err(e) => {
                tracing::error!("etcd: the registered engines cannot join: {e}; placements kept");
                return Ok(());
            }
        };
        let mut mask = 0u64;
        let ads: Vec<Option<EngineAd>> = (spec.engines.iter().enumerate())
            .map(|(i, e)| {
                let ad = registered.iter().find(|a| a.name == e.name).cloned();
                if ad.is_some() && i < 64 {
                    mask |= 1 << i;
                }
                liveness.set_capacity(i, ad.as_ref().map_or(0, EngineAd::capacity));
                ad
            })
            .collect();
        if liveness.leased() != mask {
            tracing::info!(leased = format!("{mask:#b}"), "etcd: engines with a lease");
        }
        liveness.set_leased(mask);
        let caps = capacities(&spec, &liveness);
        let placed = placement_with(&spec, &caps, mask);
        let want = assignments(&spec, &placed, &ads);
        let all = self.keys.all_placements();
        let have: BTreeMap<String, Vec<u8>> =
            list(c, &all).await.map_err(e2s)?.into_iter().collect();
        let mut wanted = Vec::new();
        for ((engine, vr), a) in &want {
            let key = format!("{}{vr}", self.keys.placements(engine));
            let json = serde_json::to_vec(a).map_err(|e| e.to_string())?;
            if have.get(&key) != Some(&json) {
                tracing::info!(%engine, %vr, pps = a.pps, "etcd: placed");
                fenced(c, &self.keys, lease, TxnOp::put(key.as_str(), json, None)).await?;
            }
            wanted.push(key);
        }
        for k in have.keys().filter(|k| !wanted.contains(k)) {
            tracing::info!(key = %k, "etcd: placement removed");
            fenced(c, &self.keys, lease, TxnOp::delete(k.as_str(), None)).await?;
        }
        Ok(())
    }
}
