//! An engine's agent: registers the engine under a lease
//! (`<prefix>/engines/<name>`: its advertisement, kept alive every third
//! of the TTL), watches its placements (`<prefix>/placements/<name>/`)
//! and reconciles its VRs to them: its own config with the placed VRs'
//! fragments appended, applied through the controller as any config
//! change (a diff: what did not change keeps running). A stopped daemon
//! revokes its lease, so the dispatcher re-places at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use etcd_client::{Client, PutOptions, WatchOptions};
use vrhost_host::cluster::desired::{Assignment, EngineAd, EtcdPlan, Keys, merged};

use super::{Lease, again, connect, e2s, list, lock, settle};
use crate::api::ApiState;
use crate::cluster::{EtcdHealth, EtcdState};

/// Run until `stop`.
pub async fn run(etcd: &EtcdPlan, state: &Arc<ApiState>, health: &EtcdHealth, stop: &AtomicBool) {
    let Some(ad) = etcd.engine.clone() else {
        return;
    };
    let mut a = Agent {
        keys: Keys::new(&etcd.prefix),
        base: lock(&state.ctl).doc().clone(),
        ad,
        state: state.clone(),
        tried: None,
    };
    let what = "the VRs keep their last state";
    again(stop, health, what, async || {
        a.session(etcd, health, stop).await
    })
    .await;
}

struct Agent {
    keys: Keys,
    /// The engine's own config (without placed VRs).
    base: toml::Table,
    ad: EngineAd,
    state: Arc<ApiState>,
    /// The placements last applied (or refused), by key.
    tried: Option<Vec<(String, Vec<u8>)>>,
}

impl Agent {
    async fn session(
        &mut self,
        etcd: &EtcdPlan,
        health: &EtcdHealth,
        stop: &AtomicBool,
    ) -> Result<(), String> {
        let mut c = connect(&etcd.endpoints).await.map_err(e2s)?;
        let mut lease = Lease::grant(&mut c, etcd.lease).await?;
        let ad = serde_json::to_vec(&self.ad).map_err(|e| e.to_string())?;
        let key = self.keys.engine(&self.ad.name);
        let put = PutOptions::new().with_lease(lease.id);
        c.put(key, ad, Some(put)).await.map_err(e2s)?;
        tracing::info!(engine = %self.ad.name, lease = lease.id, "etcd: registered");
        health.set(EtcdState::Up);
        let mine = self.keys.placements(&self.ad.name);
        let watch = WatchOptions::new().with_prefix();
        let mut events = c.watch(mine.as_str(), Some(watch)).await.map_err(e2s)?;
        while !stop.load(Ordering::Relaxed) {
            lease.keep().await?;
            self.reconcile(&mut c, &mine).await?;
            settle(&mut events).await?;
        }
        // Going away: the dispatcher re-places without waiting for the TTL.
        let _ = c.lease_revoke(lease.id).await;
        Ok(())
    }

    /// Apply the placements under `mine` if they changed.
    async fn reconcile(&mut self, c: &mut Client, mine: &str) -> Result<(), String> {
        let now = list(c, mine).await.map_err(e2s)?;
        if self.tried.as_ref() == Some(&now) {
            return Ok(());
        }
        let mut assigned: Vec<Assignment> = Vec::new();
        for (k, v) in &now {
            match serde_json::from_slice::<Assignment>(v) {
                Ok(a) => assigned.push(a),
                Err(e) => tracing::error!("etcd: {k}: not a placement ({e}); left out"),
            }
        }
        let result = merged(&self.base, &assigned)
            .map_err(crate::ControlError::Invalid)
            .and_then(|doc| lock(&self.state.ctl).apply_doc(doc, false));
        match result {
            Ok(r) => tracing::info!(
                placements = now.len(),
                added = ?r.added,
                removed = ?r.removed,
                restarted = ?r.restarted,
                "etcd: placements applied"
            ),
            Err(e) => {
                tracing::error!("etcd: placements refused: {e}; the VRs keep their last state")
            }
        }
        self.tried = Some(now);
        Ok(())
    }
}
