//! The cluster's agents of the desired state in etcd (`[cluster] etcd`,
//! issue 23; cargo feature `etcd`): on an engine, registering it under a
//! lease and reconciling its VRs to its placements ([`engine`]); on a
//! dispatcher, following the engines' registrations and writing the
//! placements Algorithm 1 makes over their advertised capacity
//! ([`dispatcher`]). Each runs on its own thread with its own tokio
//! runtime and reconnects when etcd goes away; the data path keeps its
//! last state meanwhile. The keys and records are
//! `vrhost_host::cluster::desired`'s.

pub mod dispatcher;
pub mod engine;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions};
use vrhost_host::cluster::desired::{EtcdPlan, Keys, VrRecord};
use vrhost_host::config::ClusterPlan;

use crate::Controller;
use crate::api::ApiState;
use crate::cluster::{EtcdHealth, EtcdState};

/// How long a request to etcd may take, and the pause before reconnecting.
pub const PATIENCE: Duration = Duration::from_secs(1);

/// The agent of this daemon's part, if its `[cluster]` names etcd.
///
/// # Errors
/// The thread or its runtime cannot be started.
///
/// An engine advertises `per_core_pps` as its per-core rate, measured
/// (the daemon's measurement at its start, see [`EtcdPlan::measure`]), if
/// given; else its config's.
pub fn start(
    state: Arc<ApiState>,
    stop: Arc<AtomicBool>,
    per_core_pps: Option<u64>,
) -> Result<Option<JoinHandle<()>>, String> {
    let (plan, health) = {
        let c = lock(&state.ctl);
        (c.plan().cluster.clone(), c.etcd_health().clone())
    };
    let (mut etcd, engine) = match plan {
        Some(ClusterPlan::Engine {
            etcd: Some(etcd), ..
        }) => (etcd, true),
        Some(ClusterPlan::Dispatcher {
            etcd: Some(etcd), ..
        }) => (etcd, false),
        _ => return Ok(None),
    };
    if let (Some(ad), Some(pps)) = (etcd.engine.as_mut(), per_core_pps) {
        ad.per_core_pps = pps.max(1);
        ad.measured = true;
    }
    if let Some(ad) = &etcd.engine {
        health.advertise(ad.capacity(), ad.measured);
    }
    health.set(EtcdState::Connecting);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let name = if engine {
        "vrhost-agent"
    } else {
        "vrhost-placer"
    };
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            rt.block_on(async move {
                if engine {
                    engine::run(&etcd, &state, &health, &stop).await;
                } else {
                    dispatcher::run(&etcd, &state, &health, &stop).await;
                }
            });
        })
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The controller, even if a holder panicked.
pub(crate) fn lock(ctl: &Mutex<Controller>) -> std::sync::MutexGuard<'_, Controller> {
    ctl.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A client of `endpoints`, with [`PATIENCE`] on each request.
pub(crate) async fn connect(endpoints: &[String]) -> Result<Client, etcd_client::Error> {
    let o = ConnectOptions::new()
        .with_connect_timeout(PATIENCE)
        .with_timeout(PATIENCE);
    Client::connect(endpoints, Some(o)).await
}

/// Sleep `d`, in steps, unless `stop`; whether to go on.
pub(crate) async fn pause(d: Duration, stop: &AtomicBool) -> bool {
    let step = Duration::from_millis(50);
    let mut left = d;
    while !stop.load(Ordering::Relaxed) && !left.is_zero() {
        tokio::time::sleep(step.min(left)).await;
        left = left.saturating_sub(step);
    }
    !stop.load(Ordering::Relaxed)
}

/// Every value under `prefix`, by key.
pub(crate) async fn list(
    c: &mut Client,
    prefix: &str,
) -> Result<Vec<(String, Vec<u8>)>, etcd_client::Error> {
    let r = c
        .get(prefix, Some(etcd_client::GetOptions::new().with_prefix()))
        .await?;
    Ok(r.kvs()
        .iter()
        .filter_map(|kv| Some((kv.key_str().ok()?.to_string(), kv.value().to_vec())))
        .collect())
}

/// Wait for an event of `events` or for 200 ms, whichever comes first
/// (the agents look again either way).
pub(crate) async fn settle(events: &mut etcd_client::WatchStream) -> Result<(), String> {
    match tokio::time::timeout(Duration::from_millis(200), events.message()).await {
        Ok(Err(e)) => Err(e2s(e)),
        Ok(Ok(None)) => Err("the watch ended".into()),
        _ => Ok(()),
    }
}

/// Do `op` only if this dispatcher still holds the cluster: its election
/// key is under `lease` (a dispatcher whose lease expired, and that
/// another one took over, writes nothing).
///
/// # Errors
/// etcd's, or the election key is not under `lease` any more.
pub(crate) async fn fenced(
    c: &mut Client,
    keys: &Keys,
    lease: i64,
    op: etcd_client::TxnOp,
) -> Result<(), String> {
    let key = keys.dispatcher();
    let txn = etcd_client::Txn::new()
        .when([etcd_client::Compare::lease(
            key.as_str(),
            etcd_client::CompareOp::Equal,
            lease,
        )])
        .and_then([op]);
    match c.txn(txn).await.map_err(e2s)?.succeeded() {
        true => Ok(()),
        false => Err("this dispatcher no longer holds the cluster (its election lease)".into()),
    }
}

/// Write remote VR `vr`'s rate (pps) in the desired state, as the
/// dispatcher holding the cluster under `lease`; the placer follows it.
///
/// # Errors
/// etcd unreachable, the VR not published yet, or the election lost.
pub async fn write_rate(etcd: &EtcdPlan, lease: i64, vr: &str, rate: f64) -> Result<(), String> {
    let keys = Keys::new(&etcd.prefix);
    let mut c = connect(&etcd.endpoints).await.map_err(e2s)?;
    let key = format!("{}{vr}", keys.vrs());
    let got = c.get(key.as_str(), None).await.map_err(e2s)?;
    let mut rec: VrRecord = (got.kvs().first())
        .and_then(|kv| serde_json::from_slice(kv.value()).ok())
        .ok_or_else(|| format!("VR {vr:?} is not in etcd yet"))?;
    rec.rate = Some(rate);
    let json = serde_json::to_vec(&rec).map_err(|e| e.to_string())?;
    fenced(
        &mut c,
        &keys,
        lease,
        etcd_client::TxnOp::put(key, json, None),
    )
    .await
}

/// An etcd error as text.
pub(crate) fn e2s(e: etcd_client::Error) -> String {
    e.to_string()
}

/// Run `session` again (after [`PATIENCE`]) each time it fails, until
/// `stop`; a failure is logged with what holds meanwhile (`meanwhile`).
pub(crate) async fn again(
    stop: &AtomicBool,
    health: &EtcdHealth,
    meanwhile: &str,
    mut session: impl AsyncFnMut() -> Result<(), String>,
) {
    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = session().await {
            health.set(EtcdState::Down);
            tracing::warn!("etcd: {e}; {meanwhile}; reconnecting");
        }
        if !pause(PATIENCE, stop).await {
            break;
        }
    }
}

/// A lease kept alive every third of its TTL.
pub(crate) struct Lease {
    pub(crate) id: i64,
    keeper: etcd_client::LeaseKeeper,
    acks: etcd_client::LeaseKeepAliveStream,
    tick: Duration,
    kept: Instant,
}

impl Lease {
    pub(crate) async fn grant(c: &mut Client, ttl: Duration) -> Result<Self, String> {
        let id = c
            .lease_grant(ttl.as_secs() as i64, None)
            .await
            .map_err(e2s)?
            .id();
        let (keeper, acks) = c.lease_keep_alive(id).await.map_err(e2s)?;
        Ok(Self {
            id,
            keeper,
            acks,
            tick: ttl / 3,
            kept: Instant::now(),
        })
    }

    pub(crate) async fn keep(&mut self) -> Result<(), String> {
        if self.kept.elapsed() < self.tick {
            return Ok(());
        }
        self.keeper.keep_alive().await.map_err(e2s)?;
        match self.acks.message().await.map_err(e2s)? {
            Some(r) if r.ttl() > 0 => {
                self.kept = Instant::now();
                Ok(())
            }
            _ => Err("the lease expired".into()),
        }
    }
}
