//! An engine's agent: registers the engine under a lease
//! (`<prefix>/engines/<name>`: its advertisement, kept alive every third
//! of the TTL), watches its placements (`<prefix>/placements/<name>/`)
//! and reconciles its VRs to them: its own config with the placed VRs'
//! fragments appended, applied through the controller as any config
//! change (a diff: what did not change keeps running). Placements that
//! fail to apply are tried again with a bounded back-off (1 s, doubling,
//! at most [`RETRY_MAX`]), and the status says why and when. A stopped
//! daemon revokes its lease, so the dispatcher re-places at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, PutOptions, WatchOptions};
use vrhost_host::cluster::desired::{Assignment, EngineAd, EtcdPlan, Keys, merged};

use super::{Lease, again, connect, e2s, list, lock, settle};
use crate::api::ApiState;
use crate::cluster::{EtcdHealth, EtcdState};

/// The first pause before placements that failed are tried again.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest pause between two tries.
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// Run until `stop`.
pub async fn run(
    etcd: &EtcdPlan,
    state: &Arc<ApiState>,
    health: &Arc<EtcdHealth>,
    stop: &AtomicBool,
) {
    let Some(ad) = etcd.engine.clone() else {
        return;
    };
    let mut a = Agent {
        keys: Keys::new(&etcd.prefix),
        base: lock(&state.ctl).doc().clone(),
        ad,
        state: state.clone(),
        tried: None,
        retry: None,
        health: health.clone(),
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
    /// Placements refused: when to try them again, the pause after that,
    /// and the tries so far.
    retry: Option<(Instant, Duration, u32)>,
    health: Arc<EtcdHealth>,
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

    /// Apply the placements under `mine` if they changed, or if they
    /// failed to apply and their back-off is over.
    async fn reconcile(&mut self, c: &mut Client, mine: &str) -> Result<(), String> {
        let now = list(c, mine).await.map_err(e2s)?;
        let changed = self.tried.as_ref() != Some(&now);
        let due = self.retry.is_some_and(|(at, ..)| Instant::now() >= at);
        if !changed && !due {
            return Ok(());
        }
        if changed {
            self.retry = None;
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
            Ok(r) => {
                tracing::info!(
                    placements = now.len(),
                    added = ?r.added,
                    removed = ?r.removed,
                    restarted = ?r.restarted,
                    "etcd: placements applied"
                );
                self.retry = None;
                self.health.set_placements_error(None);
            }
            Err(e) => self.refused(&e.to_string()),
        }
        self.tried = Some(now);
        Ok(())
    }

    /// The placements were refused (`why`): tried again after the next
    /// pause of the back-off, which the status shows.
    fn refused(&mut self, why: &str) {
        let (pause, tries) = match self.retry {
            Some((_, next, n)) => (next, n + 1),
            None => (RETRY_FIRST, 1),
        };
        self.retry = Some((Instant::now() + pause, (pause * 2).min(RETRY_MAX), tries));
        let msg = format!(
            "placements refused ({tries} tries): {why}; the VRs keep their last state; \
             tried again in {} s",
            pause.as_secs()
        );
        tracing::error!("etcd: {msg}");
        self.health.set_placements_error(Some(msg));
    }
}
