//! The control plane: the config in force, and changing it while the data
//! path runs.
//!
//! Every change, whether a whole new file (SIGHUP, `vrhost apply`) or one
//! API call (add a VR, a rule, a vNIC), becomes a new config document that
//! is checked as a whole by the same code as `vrhost daemon --check`; a
//! refused document changes nothing. An accepted one is applied as a diff:
//! new and changed VRs are started first (a changed VR gets a new process
//! and region beside the old one, and its API routes again), then the
//! worker switches ports, VRs and classifier in one step between two
//! rounds, so a VR that did not change never misses a frame. VRs taken
//! out hand back the slots they hold before they are stopped.
//!
//! Routes added through the API are kept here, per VR, and given to the VR
//! again whenever it is restarted.
//!
//! A VR whose process exits, crashes or hangs is restarted here too
//! ([`Controller::restart_after`], driven by [`crate::supervise`]): a new
//! process on the same region, given its API routes, then put back in the
//! data path in one step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use vrhost_host::alloc::Scaler;
use vrhost_host::config::{Config, ConfigError, Plan};
use vrhost_host::{
    DownReason, ExitEvent, Hurry, Keep, Mailbox, Reconfig, VrControl, VrPath, VrProcess, VrStats,
    Worker,
};
use vrhost_router::RouteConfig;
use vrhost_shm::{Doorbell, Region};

use crate::cores::Cores;
use crate::diff::{Diff, Running, diff};
use crate::fast::FastState;

mod auto;
mod cluster;
mod fast;
mod ports;
mod routes;
mod scale;
mod start;

pub use ports::open_port;
use ports::{dedicated_change, open_dedicated_on, open_port_on};
pub(crate) use routes::send_routes;
use start::Start;

/// A VR's instance processes and their doorbells, in instance order, and
/// their control sockets by instance slot.
type Instances = (Vec<VrProcess>, Vec<Doorbell>, BTreeMap<u16, VrControl>);
/// How long a call into the worker may take before the API gives up.
pub const WORKER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a VR may take to apply one control message.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request was refused. Each maps to one HTTP status and code.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The request cannot be read (not JSON, wrong types).
    #[error("{0}")]
    BadRequest(String),
    /// It reads, but the config it leads to is not valid.
    #[error("{0}")]
    Invalid(String),
    /// No such VR, rule, vNIC or route.
    #[error("{0}")]
    NotFound(String),
    /// It conflicts with what exists (a VR of that name, a rule using a vNIC).
    #[error("{0}")]
    Conflict(String),
    /// The data path or a VR did not answer.
    #[error("{0}")]
    Unavailable(String),
    /// Something failed that the request could not have avoided.
    #[error("{0}")]
    Internal(String),
}

impl ControlError {
    /// The error's code in API replies.
    pub fn code(&self) -> &'static str {
        match self {
            ControlError::BadRequest(_) => "bad_request",
            ControlError::Invalid(_) => "invalid",
            ControlError::NotFound(_) => "not_found",
            ControlError::Conflict(_) => "conflict",
            ControlError::Unavailable(_) => "unavailable",
            ControlError::Internal(_) => "internal",
        }
    }
}

impl From<vrhost_host::MailboxError> for ControlError {
    fn from(e: vrhost_host::MailboxError) -> Self {
        ControlError::Unavailable(e.to_string())
    }
}

/// What the control plane keeps about one running VR.
pub(crate) struct VrEntry {
    /// Its `VrPath::id` in the worker.
    id: u64,
    /// A second mapping of its region, to start processes on it again.
    region: Region,
    stats: Arc<VrStats>,
    /// The control socket of each instance slot that runs a process.
    pub(crate) controls: BTreeMap<u16, VrControl>,
    /// Routes added through the API, by (prefix, length).
    api_routes: BTreeMap<(u32, u8), RouteConfig>,
    /// Instance slots of its region: the most instances it can run
    /// without a new region.
    slots: u16,
    /// Its instances take cores from the host's budget: set when it
    /// starts, kept when its count changes in place (down to one, which
    /// keeps its core).
    placed: bool,
    /// How many instances it wants.
    scaler: Scaler,
    /// When its scaler last decided, and the frames offered to it by then.
    decided: (Instant, u64),
    /// Its control plane (`control_plane`), and the routes it gave.
    pub(crate) control: Option<crate::cplane::ControlPlane>,
}

/// A VR started for an apply but not yet handed to the worker.
struct Started {
    path: VrPath,
    entry: VrEntry,
}

pub use vrhost_api::{ApplyResult, RouteResult};

/// A change of a VR's instance count made by its scaler.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleChange {
    /// The VR.
    pub vr: String,
    /// Instances fed before.
    pub from: u16,
    /// Instances fed after (the retired one is still draining).
    pub to: u16,
    /// The arrival rate it decided on, frames/s.
    pub rate_pps: f64,
}

/// The control plane of a running daemon.
pub struct Controller {
    /// Name used for the config in messages (its file, or "config").
    label: String,
    dir: PathBuf,
    doc: toml::Table,
    plan: Plan,
    generation: u64,
    mailbox: Arc<Mailbox>,
    host_bell: Doorbell,
    exe: PathBuf,
    pub(crate) vrs: BTreeMap<String, VrEntry>,
    started: Instant,
    restarts: u64,
    /// VRs that went down, reported by the worker (taken by the supervisor).
    exits: Option<mpsc::Receiver<ExitEvent>>,
    /// Cores of the instances it places.
    cores: Cores,
    /// Raised by the supervisor while a VR that went down waits for this
    /// controller: a change's idle start then stops waiting (see
    /// [`Hurry`]).
    hurry: Hurry,
    /// The XDP fast path (`[host] fast_path = true`).
    fast: Option<FastState>,
    /// When the routers were last asked for their neighbours (`fast.rs`).
    fast_polled: Option<Instant>,
    /// `path = "auto"` VRs' load and moves (`auto.rs`).
    auto: BTreeMap<String, auto::AutoState>,
    /// How the control planes' route sync reaches this controller.
    pub(crate) sync_hook: Option<crate::cplane::SyncHook>,
    /// Its part in a cluster (`[cluster]`; fixed at start).
    cluster: Option<crate::cluster::ClusterState>,
    etcd_health: Arc<crate::cluster::EtcdHealth>,
}

/// The change moves VRs and starts, stops, rescales or reopens nothing.
fn move_only(r: &ApplyResult) -> bool {
    !r.moved.is_empty()
        && r.added.is_empty()
        && r.removed.is_empty()
        && r.restarted.is_empty()
        && r.rescaled.is_empty()
        && r.ports_added.is_empty()
        && r.ports_removed.is_empty()
}

fn config_error(e: ConfigError) -> ControlError {
    match e {
        ConfigError::Read { .. } => ControlError::BadRequest(e.to_string()),
        ConfigError::Parse { msg, .. } => ControlError::Invalid(msg),
        ConfigError::Field { field, msg, .. } => ControlError::Invalid(format!("{field}: {msg}")),
    }
}

impl Controller {
    /// Check `src` (a whole config; `label` names it in errors, `dir`
    /// resolves its relative paths), move the calling thread off the
    /// worker's core (`host.cpu`), open its ports, start its VRs, and
    /// return the control plane with the worker that is to run the data
    /// path (on a thread of the caller's choosing).
    ///
    /// # Errors
    /// The config's first error (file, line, field), or the port or VR that
    /// failed to start; everything started is stopped again.
    pub fn start(
        src: &str,
        label: &str,
        dir: &Path,
        exe: PathBuf,
    ) -> Result<(Self, Worker), String> {
        let (_, plan) = Config::parse(src, label, dir).map_err(|e| e.to_string())?;
        let doc: toml::Table = toml::from_str(src).map_err(|e| format!("{label}: {e}"))?;
        // The control plane (the calling thread, the threads it starts,
        // VR processes started from it) stays off the worker's core; the
        // worker pins itself to it.
        if let Some(c) = plan.host.cpu {
            vrhost_host::cpu::avoid_cpu(c)
                .map_err(|e| format!("keeping the control plane off the worker's core: {e}"))?;
        }
        // Six or so open files per VR instance: not the usual 1,024.
        let nofile = crate::limits::raise_open_files();
        tracing::debug!(?nofile, "open files limit");
        let mut fast = match plan.host.fast_path {
            true => Some(FastState::load(&plan.host.fast)?),
            false => None,
        };
        // Control namespaces left by a daemon that is gone.
        for ns in crate::cplane::netns::sweep() {
            tracing::info!("removed control namespace {ns}, left over by a daemon that is gone");
        }
        let mut ports: Vec<Box<dyn vrhost_io::Port>> = Vec::new();
        for (i, (name, driver, iface)) in plan.ports.iter().enumerate() {
            if plan.dedicated[i].is_some() {
                // Opened on its VR's pool once that VR is started.
                ports.push(Box::new(vrhost_io::null::NullPort::new(name)));
                continue;
            }
            let (traffic, rings) = (plan.gens[i].as_ref(), plan.rings[i]);
            ports.push(
                open_port_on(fast.as_mut(), name, *driver, iface, traffic, rings)
                    .map_err(|e| format!("port {name}: {e}"))?,
            );
        }
        let mut worker = Worker::new(ports, plan.classifier.clone(), plan.host.poll)
            .map_err(|e| e.to_string())?;
        if let Some(c) = plan.host.cpu {
            worker.set_cpu(c);
        }
        let (exit_tx, exit_rx) = mpsc::channel();
        worker.set_exit_notify(exit_tx);
        let (grow_tx, grow_rx) = mpsc::channel();
        worker.set_grow_notify(grow_tx);
        crate::pool::spawn_grower(grow_rx, worker.mailbox(), exe.clone())
            .map_err(|e| format!("pool grower: {e}"))?;
        let cluster = plan
            .cluster
            .as_ref()
            .map(|c| {
                let names = plan.ports.iter().map(|p| p.0.clone()).collect();
                crate::cluster::ClusterState::start(c, &mut worker, names)
            })
            .transpose()?;
        let host_bell = Doorbell::from_fd(
            worker
                .bell()
                .fd()
                .try_clone_to_owned()
                .map_err(|e| e.to_string())?,
        );
        let mut ctl = Self {
            label: label.to_string(),
            dir: dir.to_path_buf(),
            doc,
            plan: plan.clone(),
            generation: 0,
            mailbox: worker.mailbox(),
            host_bell,
            exe,
            vrs: BTreeMap::new(),
            started: Instant::now(),
            restarts: 0,
            exits: Some(exit_rx),
            cores: Cores::new(plan.host.core_budget().ok()),
            hurry: Hurry::default(),
            fast,
            fast_polled: None,
            auto: BTreeMap::new(),
            sync_hook: None,
            cluster,
            etcd_health: Arc::default(),
        };
        for (v, vr) in plan.vrs.iter().enumerate() {
            let mut s = ctl
                .start_vr(&plan, vr, &BTreeMap::new())
                .map_err(|e| e.to_string())?;
            for (p, port) in open_dedicated_on(&plan, v, &mut s.path)? {
                worker.set_port(p, port);
            }
            ctl.vrs.insert(vr.name.clone(), s.entry);
            worker.add_vr(s.path);
        }
        ctl.sync_fast().map_err(|e| e.to_string())?;
        Ok((ctl, worker))
    }

    /// Its part in a cluster, for `GET /v1/cluster`.
    pub fn cluster_status(&self) -> vrhost_api::ClusterStatus {
        let mut s = (self.cluster.as_ref()).map_or_else(crate::cluster::no_cluster, |c| c.status());
        s.etcd = self.etcd_health.name().into();
        if s.role == "engine" {
            let (pps, source) = self.etcd_health.advertised();
            (s.capacity_pps, s.capacity_source) = (pps, source.into());
            s.placements_error = self.etcd_health.placements_error();
        }
        s
    }

    /// The etcd agent's state, which it sets and the status shows.
    pub fn etcd_health(&self) -> &Arc<crate::cluster::EtcdHealth> {
        &self.etcd_health
    }

    /// Its part in a cluster, running (none without `[cluster]`).
    pub fn cluster(&self) -> Option<&crate::cluster::ClusterState> {
        self.cluster.as_ref()
    }

    /// The reports of VRs that went down, for the supervisor (once).
    pub fn take_exits(&mut self) -> Option<mpsc::Receiver<ExitEvent>> {
        self.exits.take()
    }

    /// The flag the supervisor raises while a restart waits for this
    /// controller.
    pub fn hurry(&self) -> Hurry {
        self.hurry.clone()
    }

    /// Start the VR that `ev` reports down again: a new process on its
    /// region, given its API routes, then handed to the worker. Returns
    /// `Ok(false)` when there is nothing to do: the VR was removed or
    /// replaced since, is quarantined, or has `restart = false`.
    ///
    /// # Errors
    /// The new process failed to start or to take its routes (it is
    /// stopped; the VR stays down).
    pub fn restart_after(&mut self, ev: &ExitEvent) -> Result<bool, ControlError> {
        let Some(vr) = self.plan.vrs.iter().find(|v| v.name == ev.vr) else {
            return Ok(false);
        };
        let Some(entry) = self.vrs.get(&ev.vr) else {
            return Ok(false);
        };
        if entry.id != ev.id || ev.reason == DownReason::Quarantined || !vr.restart {
            return Ok(false);
        }
        let vr = vr.clone();
        let t0 = Instant::now();
        let mut entry = self.vrs.remove(&vr.name).expect("looked up above");
        let started = self.first_cores(&vr, entry.placed).and_then(|cpus| {
            let (p, b, c) =
                self.start_instances(&self.plan, &vr, &entry.region, &cpus, Start::Urgent)?;
            entry.controls = c;
            let mut add: Vec<RouteConfig> = entry.api_routes.values().cloned().collect();
            if let Some(cp) = &entry.control {
                add.extend(cp.routes().values().cloned());
            }
            if !add.is_empty() {
                // The processes are dropped (killed) with the error: the VR
                // stays down, and the next exit report tries again.
                send_routes(&mut entry.controls, &vr.name, &add, &[])?;
            }
            Ok((p, b))
        });
        self.vrs.insert(vr.name.clone(), entry);
        let (procs, bells) = started.map_err(|e| match e {
            ControlError::Invalid(m) => ControlError::Unavailable(m),
            other => other,
        })?;
        let id = ev.id;
        let t1 = Instant::now();
        let refused = self.mailbox.call(WORKER_TIMEOUT, move |w: &mut Worker| {
            w.restore_vr(id, procs, bells)
        })?;
        tracing::debug!(
            vr = %vr.name,
            start_ms = (t1 - t0).as_secs_f64() * 1e3,
            worker_ms = t1.elapsed().as_secs_f64() * 1e3,
            "restart phases"
        );
        if let Err(procs) = refused {
            for mut p in procs {
                p.stop();
            }
            return Ok(false);
        }
        self.restarts += 1;
        Ok(true)
    }

    /// Check the slot accounting invariant of every VR in the data path;
    /// one message per VR where it is broken.
    ///
    /// # Errors
    /// The worker did not answer.
    pub fn check_slot_accounting(&self) -> Result<Vec<String>, ControlError> {
        Ok(self.mailbox.call(WORKER_TIMEOUT, |w: &mut Worker| {
            w.vrs()
                .iter()
                .filter_map(|v| {
                    v.check_slot_accounting()
                        .err()
                        .map(|e| format!("VR {}: {e}", v.name()))
                })
                .collect::<Vec<_>>()
        })?)
    }

    /// The mailbox of the worker.
    pub fn mailbox(&self) -> &Arc<Mailbox> {
        &self.mailbox
    }

    /// The plan in force.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Changes applied since start.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// VR processes replaced by a changed definition.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Time since start.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// The config in force, as a TOML document.
    pub fn doc(&self) -> &toml::Table {
        &self.doc
    }

    /// The config in force, as TOML text.
    pub fn toml(&self) -> String {
        toml::to_string(&self.doc).unwrap_or_default()
    }

    /// Counters of a VR.
    pub fn vr_stats(&self, name: &str) -> Option<&Arc<VrStats>> {
        self.vrs.get(name).map(|e| &e.stats)
    }

    /// The core instance slot `slot` of VR `vr` is pinned to.
    pub fn instance_cpu(&self, vr: &str, slot: u16) -> Option<usize> {
        let v = self.plan.vrs.iter().find(|v| v.name == vr)?;
        match self.vrs.get(vr)?.placed {
            true => self.cores.of(vr, slot),
            false => v.instance_cpus.get(usize::from(slot)).copied().flatten(),
        }
    }

    /// The fast path's counters of VR `name` (a host with a fast path,
    /// a VR it carries).
    pub fn fast_counters(&self, name: &str) -> Option<vrhost_fast::FastCounters> {
        self.fast.as_ref()?.counters(name)
    }

    /// The fast path's counters of VR `name`'s tunnel vNICs, by vNIC.
    pub fn fast_tunnel_counters(&self, name: &str) -> BTreeMap<u16, vrhost_fast::TunnelCounters> {
        (self.fast.as_ref()).map_or_else(BTreeMap::new, |f| f.tunnel_counters(name))
    }

    /// Where VR `name`'s frames go, as planned (slow for a VR not in the
    /// plan).
    pub fn vr_path(&self, name: &str) -> vrhost_host::config::DataPath {
        let v = self.plan.vrs.iter().find(|v| v.name == name);
        v.map(|v| v.path).unwrap_or_default()
    }

    /// Whether the host has a fast path.
    pub fn has_fast_path(&self) -> bool {
        self.fast.is_some()
    }

    /// Bring the fast path's maps in step with the plan in force and the
    /// VRs' API routes (nothing without a fast path).
    ///
    /// # Errors
    /// A map update failed.
    pub(crate) fn sync_fast(&mut self) -> Result<(), ControlError> {
        let Some(fast) = self.fast.as_mut() else {
            return Ok(());
        };
        let vrs = &self.vrs;
        // Borrowed, not copied: a VR may hold a full table of API routes.
        let api = |n: &str| vrs.get(n).map(|e| &e.api_routes);
        fast.reconcile(&self.plan, &api)
            .map_err(ControlError::Internal)
    }

    /// The select entries of VRs `names` as `plan` has them
    /// ([`FastState::switch`](crate::fast::FastState::switch)).
    fn switch_fast(&mut self, plan: &Plan, names: &[String]) -> Result<(), ControlError> {
        match self.fast.as_mut() {
            Some(f) => f.switch(plan, names).map_err(ControlError::Internal),
            None => Ok(()),
        }
    }

    /// Routes added through the API to a VR.
    pub fn api_routes(&self, name: &str) -> Option<&BTreeMap<(u32, u8), RouteConfig>> {
        self.vrs.get(name).map(|e| &e.api_routes)
    }

    /// Apply a whole new config (TOML text) as a diff.
    ///
    /// # Errors
    /// The config's first error, or what failed while starting; nothing
    /// changed then.
    pub fn apply_toml(&mut self, src: &str, dry_run: bool) -> Result<ApplyResult, ControlError> {
        let doc: toml::Table =
            toml::from_str(src).map_err(|e| ControlError::Invalid(e.to_string().trim().into()))?;
        self.apply_doc(doc, dry_run)
    }

    /// Apply a new config document as a diff.
    ///
    /// # Errors
    /// As [`Controller::apply_toml`].
    pub fn apply_doc(
        &mut self,
        doc: toml::Table,
        dry_run: bool,
    ) -> Result<ApplyResult, ControlError> {
        self.apply_doc_restarting(doc, dry_run, None)
    }

    /// Start the VR named `name` again with a new process and region (as
    /// if its definition had changed), the way out of quarantine.
    ///
    /// # Errors
    /// No such VR, or what failed while starting it (the old one then
    /// keeps its state).
    pub fn restart_vr(&mut self, name: &str) -> Result<ApplyResult, ControlError> {
        if !self.vrs.contains_key(name) {
            return Err(ControlError::NotFound(format!("no VR {name:?}")));
        }
        self.apply_doc_restarting(self.doc.clone(), false, Some(name))
    }

    fn apply_doc_restarting(
        &mut self,
        doc: toml::Table,
        dry_run: bool,
        force: Option<&str>,
    ) -> Result<ApplyResult, ControlError> {
        let src = toml::to_string(&doc).map_err(|e| ControlError::Invalid(e.to_string()))?;
        let (_, mut plan) = Config::parse(&src, &self.label, &self.dir).map_err(config_error)?;
        auto::carry_auto(&self.plan, &mut plan);
        let vrs = &self.vrs;
        let running = |name: &str| {
            vrs.get(name).map(|e| Running {
                slots: e.slots,
                placed: e.placed,
            })
        };
        let Diff {
            ports: port_keep,
            vrs: vr_keep,
            result: mut res,
            cluster: cluster_changed,
        } = diff(&self.plan, &plan, running, force)?;
        // A dispatcher's new data path, built (and checked) beside the
        // running one; handed to the worker with the rest.
        let mut pending = match cluster_changed {
            true => self.rebuild_cluster(&plan)?,
            false => None,
        };
        res.dry_run = dry_run;
        if dry_run {
            res.generation = self.generation;
            return Ok(res);
        }
        // What the routers of VRs moving to fast resolved goes into the
        // maps before any select entry changes.
        let to_fast: Vec<String> = (res.moved.iter())
            .filter(|n| {
                plan.vrs
                    .iter()
                    .any(|v| &v.name == *n && v.path == vrhost_host::config::DataPath::Fast)
            })
            .cloned()
            .collect();
        self.neighbours_before_move(&to_fast)?;
        // A move alone: the moved VRs' select entries are written first
        // (their routes and neighbours are in the maps already), so the
        // switch waits for nothing else; undone if the rest fails.
        let early = move_only(&res);
        if early {
            self.switch_fast(&plan, &res.moved)?;
        }
        let handed = pending.as_mut().map(crate::cluster::Pending::handed);
        let done = self
            .prepare(&plan, &port_keep, &vr_keep)
            .and_then(|(reconfig, entries)| {
                self.install(&plan, reconfig, handed).map(|()| entries)
            });
        let entries = match done {
            Ok(e) => e,
            Err(e) => {
                if early {
                    let old = self.plan.clone();
                    let _ = self.switch_fast(&old, &res.moved);
                }
                return Err(e);
            }
        };
        for name in res.removed.iter() {
            self.vrs.remove(name);
            self.cores.release(name);
        }
        // Control namespaces no VR uses any more (their TAPs closed with
        // their ports, their processes stopped with their VRs).
        for ns in (self.plan.vrs.iter())
            .filter_map(|v| v.control.as_ref().map(|c| c.netns.clone()))
            .filter(|ns| {
                !plan
                    .vrs
                    .iter()
                    .any(|v| v.control.as_ref().is_some_and(|c| &c.netns == ns))
            })
        {
            crate::cplane::netns::remove(&ns);
        }
        for (name, e) in &self.vrs {
            if !e.placed {
                self.cores.release(name);
            }
        }
        for vr in plan.vrs.iter().filter(|v| res.rescaled.contains(&v.name)) {
            let e = self.vrs.get_mut(&vr.name).expect("kept VRs have an entry");
            e.scaler = Scaler::new(vr.scale).map_err(|e| ControlError::Invalid(e.to_string()))?;
        }
        for (name, mut e) in entries {
            self.inherit_control(&plan, &name, &mut e);
            self.vrs.insert(name, e);
        }
        self.restarts += res.restarted.len() as u64;
        self.commit_cluster(pending);
        self.doc = doc;
        self.plan = plan;
        self.generation += 1;
        res.generation = self.generation;
        // After the worker's switch: routes and neighbours of every VR
        // first, then the select entries (a move is one of those).
        self.sync_fast()?;
        if let Some(fast) = self.fast.as_mut() {
            for name in &res.restarted {
                fast.rebase(name);
            }
        }
        tracing::info!(
            generation = self.generation,
            added = ?res.added,
            removed = ?res.removed,
            restarted = ?res.restarted,
            rescaled = ?res.rescaled,
            moved = ?res.moved,
            "config applied"
        );
        self.reap_drained()?;
        Ok(res)
    }

    /// Open the ports and start the VRs the change adds or restarts, and
    /// the worker's new shape; on failure, what was made is dropped.
    fn prepare(
        &mut self,
        plan: &Plan,
        port_keep: &[Option<usize>],
        vr_keep: &[Option<usize>],
    ) -> Result<(Reconfig, Vec<(String, VrEntry)>), ControlError> {
        if let Some(why) = dedicated_change(&self.plan, plan, port_keep, vr_keep) {
            return Err(ControlError::Invalid(why));
        }
        let mut new_ports = BTreeMap::new();
        for (i, (name, driver, iface)) in plan.ports.iter().enumerate() {
            if port_keep[i].is_none() {
                let (traffic, rings) = (plan.gens[i].as_ref(), plan.rings[i]);
                let p = open_port_on(self.fast.as_mut(), name, *driver, iface, traffic, rings)
                    .map_err(|e| ControlError::Invalid(format!("port {name}: {e}")))?;
                new_ports.insert(i, p);
            }
        }
        let mut started = BTreeMap::new();
        for (i, vr) in plan.vrs.iter().enumerate() {
            if vr_keep[i].is_none() {
                let routes = self
                    .vrs
                    .get(&vr.name)
                    .map(|e| e.api_routes.clone())
                    .unwrap_or_default();
                started.insert(i, self.start_vr(plan, vr, &routes)?);
            }
        }
        let mut entries = Vec::new();
        let reconfig = Reconfig {
            ports: (0..plan.ports.len())
                .map(|i| match port_keep[i] {
                    Some(o) => Keep::Old(o),
                    None => Keep::New(new_ports.remove(&i).expect("opened above")),
                })
                .collect(),
            vrs: plan
                .vrs
                .iter()
                .enumerate()
                .map(|(i, vr)| {
                    let k = match vr_keep[i] {
                        Some(o) => Keep::Old(o),
                        None => {
                            let s = started.remove(&i).expect("started above");
                            entries.push((vr.name.clone(), s.entry));
                            Keep::New(s.path)
                        }
                    };
                    (k, vr.vnic_ports.clone())
                })
                .collect(),
            classifier: plan.classifier.clone(),
        };
        Ok((reconfig, entries))
    }

    /// Give the worker its new shape (and a dispatcher's new data path, in
    /// the same step); guards (quarantine, watchdog), scheduling and
    /// balancing change in place, without a restart.
    fn install(
        &mut self,
        plan: &Plan,
        reconfig: Reconfig,
        dispatch: Option<crate::cluster::Handed>,
    ) -> Result<(), ControlError> {
        let guards: Vec<_> = (plan.vrs.iter())
            .map(|v| (v.guard, v.sched, v.balance))
            .collect();
        let retired = self
            .mailbox
            .call(WORKER_TIMEOUT, move |w: &mut Worker| {
                let r = w.reconfigure(reconfig);
                if r.is_ok() {
                    for (v, (g, s, b)) in w.vrs_mut().iter_mut().zip(guards) {
                        v.set_guard(g);
                        if v.sched() != s {
                            v.set_sched(s);
                        }
                        if v.balance() != b {
                            v.set_balance(b);
                        }
                    }
                    w.resched();
                    if let Some(d) = dispatch {
                        d.hand_to(w);
                    }
                }
                r
            })?
            .map_err(ControlError::Internal)?;
        // The ports left out, closed here (off the worker's thread).
        drop(retired);
        Ok(())
    }
}
