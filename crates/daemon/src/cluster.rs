//! The daemon's part in a cluster: a dispatcher's heartbeat beacon and
//! data path (handed to the worker), or an engine's heartbeat responder;
//! and the status the API, the CLI and the metrics show. See
//! `docs/cluster.md`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, Ordering};

use vrhost_api::{ClusterStatus, EngineStatus, RemoteVrStatus, SliceStatus};
use vrhost_host::cluster::desired::EngineAd;
use vrhost_host::cluster::members::{Members, carried_from};
use vrhost_host::cluster::{
    Beacon, DispatchSpec, DispatchStats, Dispatcher, Liveness, Placed, Responder,
};
use vrhost_host::config::ClusterPlan;
use vrhost_host::worker::{Mailbox, Worker};

/// The etcd agent's state, as the status shows it, and a dispatcher's
/// election lease while it holds the cluster (0: none), or an engine's
/// advertised capacity, whether it was measured, and why its placements
/// did not apply.
#[derive(Debug, Default)]
pub struct EtcdHealth(
    AtomicU8,
    AtomicI64,
    AtomicU64,
    AtomicU8,
    std::sync::Mutex<Option<String>>,
);

/// What [`EtcdHealth`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum EtcdState {
    /// No etcd configured.
    None = 0,
    /// Connecting (or registering, or being elected).
    Connecting = 1,
    /// Connected, acting.
    Up = 2,
    /// A dispatcher another one's election key keeps from acting.
    Standby = 3,
    /// Unreachable: the data path keeps its last state.
    Down = 4,
}

impl EtcdHealth {
    /// Set the state (any but `Up` forgets the election lease).
    pub fn set(&self, s: EtcdState) {
        if s != EtcdState::Up {
            self.1.store(0, Ordering::Relaxed);
        }
        self.0.store(s as u8, Ordering::Relaxed);
    }

    /// An engine advertises `pps`, measured at its start or configured.
    pub fn advertise(&self, pps: u64, measured: bool) {
        self.2.store(pps, Ordering::Relaxed);
        self.3.store(1 + u8::from(measured), Ordering::Relaxed);
    }

    /// An engine's advertised capacity (pps) and its source (`measured`,
    /// `configured`; empty: none).
    pub fn advertised(&self) -> (u64, &'static str) {
        let source = match self.3.load(Ordering::Relaxed) {
            1 => "configured",
            2 => "measured",
            _ => "",
        };
        (self.2.load(Ordering::Relaxed), source)
    }

    /// An engine's placements did not apply (why, and when they are tried
    /// again), or did (`None`).
    pub fn set_placements_error(&self, e: Option<String>) {
        *self
            .4
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = e;
    }

    /// Why an engine's placements did not apply, if they did not.
    pub fn placements_error(&self) -> Option<String> {
        (self
            .4
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
        .clone()
    }

    /// Up, holding the cluster under election lease `lease`.
    pub fn elected(&self, lease: i64) {
        self.1.store(lease, Ordering::Relaxed);
        self.set(EtcdState::Up);
    }

    /// The election lease this dispatcher holds the cluster under, if it
    /// does and etcd is up.
    pub fn lease(&self) -> Option<i64> {
        let l = self.1.load(Ordering::Relaxed);
        (self.name() == "up" && l != 0).then_some(l)
    }

    /// Why a change to the desired state cannot be written now, if it
    /// cannot (a dispatcher's).
    pub fn refusal(&self) -> Option<String> {
        let why = match self.name() {
            "up" if self.lease().is_some() => return None,
            "down" => "etcd is unreachable",
            "standby" => "another dispatcher holds the cluster (this one stands by)",
            "none" => "no etcd is configured (cluster.etcd)",
            _ => "etcd is not connected yet",
        };
        Some(format!(
            "{why}: changes to the cluster's desired state are refused until it is \
             back; the data path forwards with its last state"
        ))
    }

    /// The state's name.
    pub fn name(&self) -> &'static str {
        match self.0.load(Ordering::Relaxed) {
            1 => "connecting",
            2 => "up",
            3 => "standby",
            4 => "down",
            _ => "none",
        }
    }
}

/// What a dispatcher keeps beside its worker.
pub struct DispatchSide {
    spec: DispatchSpec,
    members: Members,
    /// The registered engines, by name: whether their rate was measured.
    measured: BTreeMap<String, bool>,
    heartbeat: String,
    beacon: Beacon,
    stats: Arc<DispatchStats>,
    port_names: Vec<String>,
    /// The registrations and desired rates last followed.
    ads: Vec<EngineAd>,
    rates: BTreeMap<String, f64>,
}

/// A dispatcher's next data path, built beside the running one.
pub struct Pending {
    next: Option<Dispatcher>,
    from: Vec<Option<usize>>,
    spec: DispatchSpec,
    beats: Vec<(String, std::net::SocketAddr)>,
    liveness: Arc<Liveness>,
    members: Members,
    port_names: Vec<String>,
    stats: Arc<DispatchStats>,
}

/// The part of a [`Pending`] the worker takes.
pub struct Handed(Dispatcher, Vec<Option<usize>>);

impl Handed {
    /// Set it as `w`'s dispatcher, going on from the one it replaces
    /// (engines by name: counters, learned MACs).
    pub fn hand_to(self, w: &mut Worker) {
        let Handed(mut next, keep) = self;
        if let Some(old) = w.dispatcher() {
            next.carry(old, &keep);
        }
        w.set_dispatcher(next);
    }
}

impl Pending {
    /// What the worker takes (once).
    ///
    /// # Panics
    /// Taken twice.
    pub fn handed(&mut self) -> Handed {
        let next = self.next.take().expect("handed once");
        Handed(next, self.from.clone())
    }
}

impl DispatchSide {
    /// The data path `members` gives with the registrations last followed;
    /// `None` if it is the one running. Engines that stay keep their
    /// liveness (the same one, if the engines did not change).
    fn rebuilt(
        &self,
        members: &Members,
        port_names: Vec<String>,
    ) -> Result<Option<Pending>, String> {
        let j = members.join(&self.ads, &self.rates);
        if j.spec == self.spec && *members == self.members && port_names == self.port_names {
            return Ok(None);
        }
        if !j.left_out.is_empty() {
            tracing::warn!(left_out = ?j.left_out, "etcd: more than 64 engines registered");
        }
        let from = carried_from(&self.spec.engines, &j.spec.engines);
        let liveness = match j.spec.engines == self.spec.engines {
            true => self.beacon.liveness().clone(),
            false => {
                let n = j.spec.engines.len();
                Arc::new(Liveness::carried(n, self.beacon.liveness(), &from))
            }
        };
        let next = Dispatcher::new(j.spec.clone(), liveness.clone())?;
        Ok(Some(Pending {
            stats: next.stats().clone(),
            next: Some(next),
            from,
            spec: j.spec,
            beats: j.beats,
            liveness,
            members: members.clone(),
            port_names,
        }))
    }

    fn commit(&mut self, p: Pending) -> Result<(), String> {
        if !Arc::ptr_eq(&p.liveness, self.beacon.liveness()) {
            (self.beacon.follow(p.beats, p.liveness)).map_err(|e| format!("the beacon: {e}"))?;
        }
        let names = |s: &DispatchSpec| s.engines.iter().map(|e| e.name.clone()).collect::<Vec<_>>();
        let vrs = |s: &DispatchSpec| s.vrs.iter().map(|v| v.name.clone()).collect::<Vec<_>>();
        tracing::info!(engines = ?names(&p.spec), vrs = ?vrs(&p.spec), "cluster: a new data path");
        self.spec = p.spec;
        self.stats = p.stats;
        self.members = p.members;
        self.port_names = p.port_names;
        Ok(())
    }
}

/// The daemon's part in a cluster, running.
pub enum ClusterState {
    /// A dispatcher.
    Dispatcher(Box<DispatchSide>),
    /// An engine.
    Engine(Responder),
}

impl ClusterState {
    /// Start `plan`'s part: a dispatcher's beacon and data path (given to
    /// `worker`), or an engine's responder. `port_names` name the
    /// worker's ports.
    ///
    /// # Errors
    /// A heartbeat socket that cannot be bound, a data path that cannot
    /// be built.
    pub fn start(
        plan: &ClusterPlan,
        worker: &mut Worker,
        port_names: Vec<String>,
    ) -> Result<Self, String> {
        match plan {
            ClusterPlan::Engine { heartbeat, .. } => Responder::start(*heartbeat)
                .map(ClusterState::Engine)
                .map_err(|e| format!("cluster.heartbeat {heartbeat}: {e}")),
            ClusterPlan::Dispatcher {
                spec,
                heartbeat,
                interval,
                misses,
                beats,
                members,
                ..
            } => {
                let beacon = Beacon::start(*heartbeat, beats.clone(), *interval, *misses)
                    .map_err(|e| format!("cluster.heartbeat {heartbeat}: {e}"))?;
                let d = Dispatcher::new(spec.clone(), beacon.liveness().clone())?;
                let stats = d.stats().clone();
                worker.set_dispatcher(d);
                Ok(ClusterState::Dispatcher(Box::new(DispatchSide {
                    spec: spec.clone(),
                    members: (**members).clone(),
                    measured: BTreeMap::new(),
                    heartbeat: heartbeat.to_string(),
                    beacon,
                    stats,
                    port_names,
                    ads: Vec::new(),
                    rates: BTreeMap::new(),
                })))
            }
        }
    }

    /// A dispatcher's spec and the engines' liveness it follows.
    pub fn dispatch_parts(&self) -> Option<(&DispatchSpec, &Arc<Liveness>)> {
        match self {
            ClusterState::Dispatcher(d) => Some((&d.spec, d.beacon.liveness())),
            ClusterState::Engine(_) => None,
        }
    }

    /// A dispatcher's engines with those registered in etcd (`ads`, the
    /// live registrations) joined: when the list changes, a new data path
    /// is handed to the worker (through `mailbox`) and the beacon pings
    /// the new list, each engine keeping its state, counters and learned
    /// MAC by name. The spec and liveness now.
    ///
    /// # Errors
    /// Not a dispatcher; the data path cannot be built or the worker did
    /// not take it.
    pub fn follow_registered(
        &mut self,
        ads: &[EngineAd],
        rates: &BTreeMap<String, f64>,
        mailbox: &Mailbox,
    ) -> Result<(DispatchSpec, Arc<Liveness>), String> {
        let ClusterState::Dispatcher(d) = self else {
            return Err("not a dispatcher".into());
        };
        d.measured = ads.iter().map(|a| (a.name.clone(), a.measured)).collect();
        (d.ads, d.rates) = (ads.to_vec(), rates.clone());
        if let Some(mut p) = d.rebuilt(&d.members, d.port_names.clone())? {
            let handed = p.handed();
            mailbox
                .call(crate::control::WORKER_TIMEOUT, move |w: &mut Worker| {
                    handed.hand_to(w)
                })
                .map_err(|e| e.to_string())?;
            d.commit(p)?;
        }
        Ok((d.spec.clone(), d.beacon.liveness().clone()))
    }

    /// The data path of a changed `[cluster]` (`plan`, a dispatcher's:
    /// its engines and remote VRs; `port_names` name the worker's ports
    /// after the change), joined by the registered engines as last seen;
    /// `None` if it is the same. Hand its [`Pending::handed`] to the
    /// worker with the change, then [`ClusterState::commit`] it.
    ///
    /// # Errors
    /// Not a dispatcher; the data path cannot be built.
    pub fn rebuild(
        &self,
        plan: &ClusterPlan,
        port_names: Vec<String>,
    ) -> Result<Option<Pending>, String> {
        let (ClusterState::Dispatcher(d), ClusterPlan::Dispatcher { members, .. }) = (self, plan)
        else {
            return Err("not a dispatcher".into());
        };
        d.rebuilt(members, port_names)
    }

    /// Take the data path the worker was handed as this dispatcher's.
    ///
    /// # Errors
    /// Not a dispatcher; the beacon cannot follow the new engines.
    pub fn commit(&mut self, p: Pending) -> Result<(), String> {
        match self {
            ClusterState::Dispatcher(d) => d.commit(p),
            ClusterState::Engine(_) => Err("not a dispatcher".into()),
        }
    }

    /// A dispatcher's remote VRs as configured (before registered engines
    /// join: their `engines` are the configured ones).
    pub fn configured(&self) -> Option<&DispatchSpec> {
        match self {
            ClusterState::Dispatcher(d) => Some(&d.members.base),
            ClusterState::Engine(_) => None,
        }
    }

    /// Its status.
    pub fn status(&self) -> ClusterStatus {
        match self {
            ClusterState::Engine(r) => ClusterStatus {
                role: "engine".into(),
                heartbeat: r.addr().to_string(),
                heartbeats_answered: r.answered.load(Ordering::Relaxed),
                ..ClusterStatus::default()
            },
            ClusterState::Dispatcher(d) => dispatcher_status(d),
        }
    }
}

/// The status with no cluster.
pub fn no_cluster() -> ClusterStatus {
    ClusterStatus {
        role: "none".into(),
        ..ClusterStatus::default()
    }
}

fn mac_str(m: [u8; 6]) -> String {
    vrhost_packet::MacAddr(m).to_string()
}

fn dispatcher_status(d: &DispatchSide) -> ClusterStatus {
    let l = d.beacon.liveness();
    let engines = d
        .spec
        .engines
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let beats = l.engine(i);
            let get =
                |f: fn(&vrhost_host::cluster::heartbeat::EngineBeats) -> u64| beats.map_or(0, f);
            let t = &d.stats.engines[i];
            EngineStatus {
                name: e.name.clone(),
                address: e.remote.to_string(),
                state: l.state(i).name().into(),
                last_heartbeat_ms: l.since_heard(i).map(|x| x.as_secs_f64() * 1e3),
                mac: e.remote_mac.map(mac_str).unwrap_or_default(),
                capacity: l.capacity(i).unwrap_or(e.capacity),
                capacity_source: match d.measured.get(&e.name) {
                    Some(true) => "measured",
                    Some(false) => "configured",
                    None => "dispatcher",
                }
                .into(),
                tx_frames: t.tx_frames.get(),
                tx_bytes: t.tx_bytes.get(),
                rx_frames: t.rx_frames.get(),
                rx_bytes: t.rx_bytes.get(),
                downs: get(|b| b.downs.load(Ordering::Relaxed)),
                ups: get(|b| b.ups.load(Ordering::Relaxed)),
                heartbeats_sent: get(|b| b.sent.load(Ordering::Relaxed)),
                heartbeats_heard: get(|b| b.heard.load(Ordering::Relaxed)),
            }
        })
        .collect();
    let live = l.live();
    let caps = vrhost_host::cluster::dispatch::capacities(&d.spec, l);
    let placed = vrhost_host::cluster::dispatch::placement_with(&d.spec, &caps, live);
    let vrs = d
        .spec
        .vrs
        .iter()
        .enumerate()
        .map(|(vi, v)| {
            let name = |e: &usize| d.spec.engines[*e].name.clone();
            let (placement, placement_error) = match placed.get(vi) {
                Some(Placed::Slices(s)) => (
                    s.iter()
                        .map(|s| SliceStatus {
                            engine: name(&s.engine),
                            pps: s.amount,
                        })
                        .collect(),
                    None,
                ),
                Some(Placed::NoFit { why, free }) => {
                    (Vec::new(), Some(format!("{why}; {free} pps free")))
                }
                _ => (Vec::new(), None),
            };
            RemoteVrStatus {
                name: v.name.clone(),
                id: v.id,
                policy: v.policy.name().into(),
                ports: v
                    .ports
                    .iter()
                    .map(|&p| d.port_names.get(p).cloned().unwrap_or_default())
                    .collect(),
                engines: v.engines.iter().map(name).collect(),
                live_engines: v
                    .engines
                    .iter()
                    .filter(|&&e| e < 64 && live & (1 << e) != 0)
                    .map(name)
                    .collect(),
                rate_pps: v.rate,
                placement,
                placement_error,
            }
        })
        .collect();
    let s = &d.stats;
    let drops = [
        ("no_engine", s.no_engine.get()),
        ("no_mac", s.no_mac.get()),
        ("too_big", s.too_big.get()),
        ("bad_tag", s.bad_tag.get()),
        ("port_dropped", s.port_dropped.get()),
        ("not_tunnel", s.not_tunnel.get()),
        ("bad_heartbeat", l.bad.load(Ordering::Relaxed)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    ClusterStatus {
        role: "dispatcher".into(),
        heartbeat: d.heartbeat.clone(),
        engines,
        vrs,
        drops,
        heartbeats_answered: 0,
        heartbeat_frames: s.heartbeats.get(),
        ..ClusterStatus::default()
    }
}
