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

use serde::Serialize;
use vrhost_host::alloc::Scaler;
use vrhost_host::config::{Config, ConfigError, Driver, GenConf, Plan, PortRings, VrPlan};
use vrhost_host::worker::DRAIN_TIMEOUT;
use vrhost_host::{
    Backend, DownReason, ExitEvent, Hurry, InstanceState, Keep, Mailbox, Reconfig, VrCommand,
    VrControl, VrPath, VrProcess, VrStats, Worker,
};
use vrhost_io::Port;
use vrhost_shm::{Doorbell, Region, RegionConfig};
use vrhost_vr::proto::{CONTROL_CHUNK, PollConfig};
use vrhost_vr::router::RouteConfig;

use crate::cores::Cores;
use crate::diff::{Diff, Running, diff};

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

/// Open a port with its driver, in the calling thread's namespace.
///
/// # Errors
/// The driver's error.
pub fn open_port(
    name: &str,
    driver: Driver,
    iface: &str,
    traffic: Option<&GenConf>,
    rings: PortRings,
) -> Result<Box<dyn Port>, String> {
    let port: Result<Box<dyn Port>, String> = match driver {
        Driver::Mem => {
            let cfg = traffic.cloned().unwrap_or_default().mem_config()?;
            vrhost_io::mem::MemPort::new(name, cfg)
                .map(|p| Box::new(p) as _)
                .map_err(|e| e.to_string())
        }
        Driver::Null => Ok(Box::new(vrhost_io::null::NullPort::new(name))),
        Driver::AfPacket => vrhost_io::af_packet::AfPacketPort::open(iface, Default::default())
            .map(|p| Box::new(p) as _)
            .map_err(|e| e.to_string()),
        Driver::Socket => vrhost_io::socket::SocketPort::open(iface, Default::default())
            .map(|p| Box::new(p) as _)
            .map_err(|e| e.to_string()),
        Driver::Tap => vrhost_io::tap::TapPort::open(iface, Default::default())
            .map(|p| Box::new(p) as _)
            .map_err(|e| e.to_string()),
        Driver::AfXdp => vrhost_io::af_xdp::AfXdpPort::open(iface, &rings.af_xdp())
            .map(|p| Box::new(p) as _)
            .map_err(|e| e.to_string()),
    };
    port.map_err(|e| format!("{} on {iface}: {e}", driver.name()))
}

/// What the control plane keeps about one running VR.
struct VrEntry {
    /// Its `VrPath::id` in the worker.
    id: u64,
    /// A second mapping of its region, to start processes on it again.
    region: Region,
    stats: Arc<VrStats>,
    /// The control socket of each instance slot that runs a process.
    controls: BTreeMap<u16, VrControl>,
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
}

/// A VR started for an apply but not yet handed to the worker.
struct Started {
    path: VrPath,
    entry: VrEntry,
}

/// What an apply changed (or would change).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ApplyResult {
    /// Changes applied since the daemon started, this one included.
    pub generation: u64,
    /// Only computed.
    pub dry_run: bool,
    /// VRs started.
    pub added: Vec<String>,
    /// VRs stopped.
    pub removed: Vec<String>,
    /// VRs whose definition changed: a new process took over.
    pub restarted: Vec<String>,
    /// VRs whose instance count, scaling or balancing changed, changed in
    /// place: their instances are started or retired one per period.
    pub rescaled: Vec<String>,
    /// VRs that kept forwarding untouched.
    pub unchanged: Vec<String>,
    /// Ports opened.
    pub ports_added: Vec<String>,
    /// Ports closed.
    pub ports_removed: Vec<String>,
    /// Classifier rules after the change.
    pub rules: usize,
}

/// The result of a route change, as the API reports it.
#[derive(Debug, Clone, Serialize)]
pub struct RouteResult {
    /// Routes added or replaced.
    pub added: u64,
    /// Routes deleted.
    pub deleted: u64,
    /// Routes in the VR's table afterwards (connected and local included).
    pub routes: u64,
    /// Routes added through the API, afterwards.
    pub api_routes: usize,
    /// Time to apply.
    pub seconds: f64,
    /// `(added + deleted) / seconds`.
    pub routes_per_second: f64,
}

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
    vrs: BTreeMap<String, VrEntry>,
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
}

/// The back-off of a VR instance on `cpu` (`None`: unpinned), with the
/// worker on `worker_cpu` and `sharers` instances pinned to `cpu` in the
/// config.
///
/// A VR on the worker's core sleeps as soon as its rings are empty (the
/// worker never yields); one on a core that only VRs share yields to them
/// first; one on a core of its own spins first. An unpinned VR sleeps at
/// once too, because what else runs where it runs is not known. Yielding
/// there was tried (2026-11-24): two busy `mem` VRs beside a worker on CPU
/// 1 went from 13.6 to 20-23.5 Mfps (sleeping, they cost the worker a
/// doorbell write per burst, 38% of its time in the kernel), but in `bench
/// forward`, where the generator shares that core, `af_xdp` fell from
/// 1.28-1.31 to 1.04-1.05 Mpps and TCP from 4.6-5.0 to 4.1-4.2 Gbit/s.
/// Pin VRs that share a core (`cpu`) to get the yielding.
fn instance_poll(
    poll: PollConfig,
    cpu: Option<usize>,
    worker_cpu: Option<usize>,
    sharers: usize,
) -> PollConfig {
    match cpu {
        None => poll.beside_worker(),
        Some(c) if Some(c) == worker_cpu => poll.beside_worker(),
        Some(_) if sharers > 1 => poll.beside_vrs(),
        Some(_) => poll,
    }
}

/// Why a VR process starts, which decides how it shares its core while it
/// does (see [`VrCommand::idle_start`]).
#[derive(Debug, Clone, Copy)]
enum Start {
    /// An operator's change (config, API): on the time its core's VRs
    /// leave, for up to `[host] start_idle_ms`, so they lose nothing to it.
    Change,
    /// A VR that went down, or an instance its load asks for: at once.
    Urgent,
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
        let mut ports = Vec::new();
        for (i, (name, driver, iface)) in plan.ports.iter().enumerate() {
            ports.push(
                open_port(name, *driver, iface, plan.gens[i].as_ref(), plan.rings[i])
                    .map_err(|e| format!("port {name}: {e}"))?,
            );
        }
        let mut worker = Worker::new(ports, plan.classifier.clone(), plan.host.poll)
            .map_err(|e| e.to_string())?;
        let (exit_tx, exit_rx) = mpsc::channel();
        worker.set_exit_notify(exit_tx);
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
        };
        for vr in &plan.vrs {
            let s = ctl
                .start_vr(&plan, vr, &BTreeMap::new())
                .map_err(|e| e.to_string())?;
            ctl.vrs.insert(vr.name.clone(), s.entry);
            worker.add_vr(s.path);
        }
        Ok((ctl, worker))
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
            if !entry.api_routes.is_empty() {
                let add: Vec<RouteConfig> = entry.api_routes.values().cloned().collect();
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

    /// Routes added through the API to a VR.
    pub fn api_routes(&self, name: &str) -> Option<&BTreeMap<(u32, u8), RouteConfig>> {
        self.vrs.get(name).map(|e| &e.api_routes)
    }

    /// Start one VR (region, process) and give it `routes`.
    fn start_vr(
        &mut self,
        plan: &Plan,
        vr: &VrPlan,
        routes: &BTreeMap<(u32, u8), RouteConfig>,
    ) -> Result<Started, ControlError> {
        let region = Region::create(
            &vr.name,
            RegionConfig {
                slot_count: vr.slots,
                ring_entries: RegionConfig::ring_entries_for(vr.slots),
                vnic_count: vr.vnic_ports.len() as u16,
                instance_count: vr.instance_slots(),
                ..RegionConfig::default()
            },
        )
        .map_err(|e| ControlError::Internal(format!("VR {}: region: {e}", vr.name)))?;
        let cpus = self.first_cores(vr, vr.placed)?;
        let (procs, bells, controls) =
            self.start_instances(plan, vr, &region, &cpus, Start::Change)?;
        let second = region
            .fd()
            .try_clone_to_owned()
            .map_err(|e| e.to_string())
            .and_then(|fd| Region::attach(fd).map_err(|e| e.to_string()))
            .map_err(|e| ControlError::Internal(format!("VR {}: region: {e}", vr.name)))?;
        let mut path = VrPath::new(
            &vr.name,
            region,
            vr.vnic_ports.clone(),
            Backend::Process(procs),
            bells,
        );
        path.set_balance(vr.balance);
        path.set_guard(vr.guard);
        path.set_sched(vr.sched);
        let mut entry = VrEntry {
            id: path.id(),
            region: second,
            stats: path.stats().clone(),
            controls,
            api_routes: BTreeMap::new(),
            slots: vr.instance_slots(),
            placed: vr.placed,
            scaler: Scaler::new(vr.scale).map_err(|e| ControlError::Invalid(e.to_string()))?,
            decided: (Instant::now(), 0),
        };
        if !routes.is_empty() {
            let add: Vec<RouteConfig> = routes.values().cloned().collect();
            send_routes(&mut entry.controls, &vr.name, &add, &[]).map_err(|e| match e {
                ControlError::Invalid(m) => ControlError::Invalid(format!(
                    "VR {}: its API routes do not fit the new definition: {m}",
                    vr.name
                )),
                other => other,
            })?;
            entry.api_routes = routes.clone();
        }
        Ok(Started { path, entry })
    }

    /// The core of each instance `vr` starts with (slots `0..instances`):
    /// held from the host's budget for a placed VR (which gives back any
    /// other), as the config pins them otherwise.
    fn first_cores(
        &mut self,
        vr: &VrPlan,
        placed: bool,
    ) -> Result<Vec<Option<usize>>, ControlError> {
        if !placed {
            return Ok(vr
                .instance_cpus
                .iter()
                .take(vr.instances.into())
                .copied()
                .collect());
        }
        let held = self.cores.hold_first(&vr.name, vr.instances).map_err(|e| {
            ControlError::Conflict(format!(
                "VR {}: cores for its instances: {e} (scaled VRs hold cores above their minimum)",
                vr.name
            ))
        })?;
        Ok(held.into_values().map(Some).collect())
    }

    /// Start instances `0..` of `vr` on `region`, one per entry of `cpus`
    /// (its core), and return them (see [`Instances`]). On an error the
    /// ones started are dropped (killed).
    fn start_instances(
        &self,
        plan: &Plan,
        vr: &VrPlan,
        region: &Region,
        cpus: &[Option<usize>],
        how: Start,
    ) -> Result<Instances, ControlError> {
        let mut out = (Vec::new(), Vec::new(), BTreeMap::new());
        for (k, &cpu) in cpus.iter().enumerate() {
            let (p, bell, control) = self.start_instance(plan, vr, region, k as u16, cpu, how)?;
            out.0.push(p);
            out.1.push(bell);
            out.2.insert(k as u16, control);
        }
        Ok(out)
    }

    /// Start instance `k` of `vr` on `region`, on `cpu`.
    fn start_instance(
        &self,
        plan: &Plan,
        vr: &VrPlan,
        region: &Region,
        k: u16,
        cpu: Option<usize>,
        how: Start,
    ) -> Result<(VrProcess, Doorbell, VrControl), ControlError> {
        let cmd = self.vr_command(plan, vr, cpu, how);
        let (p, bell) = VrProcess::start(&vr.name, k, region, &self.host_bell, &cmd)
            .map_err(|e| ControlError::Invalid(e.to_string()))?;
        let control = p
            .control()
            .map_err(|e| ControlError::Internal(format!("VR {}: {e}", vr.name)))?;
        Ok((p, bell, control))
    }

    /// How to start an instance of `vr` on `cpu`.
    fn vr_command(&self, plan: &Plan, vr: &VrPlan, cpu: Option<usize>, how: Start) -> VrCommand {
        let (program, args) = match &vr.program {
            Some((p, a)) => (p.clone(), a.clone()),
            None => (self.exe.clone(), vec!["vr-run".to_string()]),
        };
        let sharers = plan
            .vrs
            .iter()
            .flat_map(|v| &v.instance_cpus)
            .filter(|&&c| c.is_some() && c == cpu)
            .count();
        let poll = instance_poll(plan.host.poll, cpu, plan.host.cpu, sharers);
        VrCommand {
            program,
            args,
            cpu,
            poll,
            config: vr.config.clone(),
            ready_timeout: Duration::from_secs(60),
            idle_start: match how {
                Start::Change => Duration::from_millis(plan.host.start_idle_ms),
                Start::Urgent => Duration::ZERO,
            },
            confine: vr.confine.clone(),
            hurry: self.hurry.clone(),
        }
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
        let (_, plan) = Config::parse(&src, &self.label, &self.dir).map_err(config_error)?;
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
        } = diff(&self.plan, &plan, running, force)?;
        res.dry_run = dry_run;
        if dry_run {
            res.generation = self.generation;
            return Ok(res);
        }
        let (reconfig, entries) = self.prepare(&plan, &port_keep, &vr_keep)?;
        self.install(&plan, reconfig)?;
        for name in res.removed.iter() {
            self.vrs.remove(name);
            self.cores.release(name);
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
        for (name, e) in entries {
            self.vrs.insert(name, e);
        }
        self.restarts += res.restarted.len() as u64;
        self.doc = doc;
        self.plan = plan;
        self.generation += 1;
        res.generation = self.generation;
        tracing::info!(
            generation = self.generation,
            added = ?res.added,
            removed = ?res.removed,
            restarted = ?res.restarted,
            rescaled = ?res.rescaled,
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
        let mut new_ports = BTreeMap::new();
        for (i, (name, driver, iface)) in plan.ports.iter().enumerate() {
            if port_keep[i].is_none() {
                let p = open_port(name, *driver, iface, plan.gens[i].as_ref(), plan.rings[i])
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

    /// Give the worker its new shape; guards (quarantine, watchdog),
    /// scheduling and balancing change in place, without a restart.
    fn install(&mut self, plan: &Plan, reconfig: Reconfig) -> Result<(), ControlError> {
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
                }
                r
            })?
            .map_err(ControlError::Internal)?;
        // The ports left out, closed here (off the worker's thread).
        drop(retired);
        Ok(())
    }

    /// One decision for every VR whose instance count can change (more
    /// than one instance slot) and whose scaling period is up: its scaler
    /// gets the VR's arrival rate since the last decision, then one
    /// instance is started or retired (fixed VRs: started again where one
    /// exited). Instances that are gone first give back their cores and
    /// control sockets. A VR that is down is left to the supervisor.
    /// Returns the changes made; a refusal (no core, a process that does
    /// not start) is counted (`instances_refused`) and logged.
    ///
    /// # Errors
    /// The worker did not answer.
    pub fn scale_tick(&mut self) -> Result<Vec<ScaleChange>, ControlError> {
        let now = Instant::now();
        let due: Vec<(usize, u64)> = (self.plan.vrs.iter().enumerate())
            .filter_map(|(i, v)| {
                let e = self.vrs.get(&v.name).filter(|e| e.slots > 1)?;
                (now.duration_since(e.decided.0) >= e.scaler.period()).then_some((i, e.id))
            })
            .collect();
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<u64> = due.iter().map(|d| d.1).collect();
        let states = self.mailbox.call(WORKER_TIMEOUT, move |w: &mut Worker| {
            let find = |id| w.vrs().iter().find(|v| v.id() == id);
            let of = |v: &VrPath| (v.is_up(), v.instance_states());
            ids.into_iter()
                .map(|id| find(id).map(of))
                .collect::<Vec<_>>()
        })?;
        let mut changes = Vec::new();
        for ((i, id), st) in due.into_iter().zip(states) {
            let Some((up, states)) = st else {
                continue;
            };
            let name = self.plan.vrs[i].name.clone();
            let mut e = self.vrs.remove(&name).expect("due VRs have an entry");
            let change = self.scale_vr(i, &mut e, id, up, &states, now);
            self.vrs.insert(name, e);
            changes.extend(change?);
        }
        Ok(changes)
    }

    /// [`Controller::scale_tick`] for VR `i` of the plan (its entry `e`,
    /// taken out of the map meanwhile).
    fn scale_vr(
        &mut self,
        i: usize,
        e: &mut VrEntry,
        id: u64,
        up: bool,
        states: &[InstanceState],
        now: Instant,
    ) -> Result<Option<ScaleChange>, ControlError> {
        let vr = &self.plan.vrs[i];
        let offered = e.stats.rx_packets.get() + e.stats.ingress_drops_total();
        let dt = now.duration_since(e.decided.0);
        let rate_pps = offered.wrapping_sub(e.decided.1) as f64 / dt.as_secs_f64().max(1e-3);
        e.decided = (now, offered);
        if !up {
            return Ok(None);
        }
        for (slot, _) in (0u16..)
            .zip(states)
            .filter(|(_, s)| **s == InstanceState::Off)
        {
            if e.placed {
                self.cores.give_back(&vr.name, slot);
            }
            e.controls.remove(&slot);
        }
        let live = states.iter().filter(|s| **s == InstanceState::Live).count() as u16;
        let want = e.scaler.tick(rate_pps, dt, live);
        let change = ScaleChange {
            vr: vr.name.clone(),
            from: live,
            to: want,
            rate_pps,
        };
        if want < live {
            let slot = states.iter().rposition(|s| *s == InstanceState::Live);
            let slot = slot.expect("live > 0") as u16;
            let retire = move |w: &mut Worker| {
                let v = w.vrs_mut().iter_mut().find(|v| v.id() == id);
                v.is_some_and(|v| v.retire_instance(slot))
            };
            if !self.mailbox.call(WORKER_TIMEOUT, retire)? {
                return Ok(None);
            }
            e.stats.instances_retired.add(1);
            tracing::info!(vr = %vr.name, instance = slot, rate_pps, "instance retired");
            return Ok(Some(change));
        }
        if want == live {
            return Ok(None);
        }
        let Some(slot) = states.iter().position(|s| *s == InstanceState::Off) else {
            return Ok(None);
        };
        let slot = slot as u16;
        match self.add_instance(i, e, id, slot) {
            Ok(()) => {
                e.stats.instances_added.add(1);
                tracing::info!(vr = %change.vr, instance = slot, rate_pps, "instance started");
                Ok(Some(change))
            }
            Err(ControlError::Unavailable(m)) => Err(ControlError::Unavailable(m)),
            Err(err) => {
                e.stats.instances_refused.add(1);
                self.cores.give_back(&change.vr, slot);
                tracing::warn!(vr = %change.vr, instance = slot, rate_pps, "instance not started: {err}");
                Ok(None)
            }
        }
    }

    /// Start instance `slot` of VR `i` of the plan (entry `e`, worker id
    /// `id`) on a core, give it the VR's API routes and have the worker
    /// feed it.
    fn add_instance(
        &mut self,
        i: usize,
        e: &mut VrEntry,
        id: u64,
        slot: u16,
    ) -> Result<(), ControlError> {
        let vr = &self.plan.vrs[i];
        let cpu = if e.placed {
            let cpu = self.cores.take(&vr.name, slot);
            Some(cpu.map_err(|err| ControlError::Conflict(err.to_string()))?)
        } else {
            vr.instance_cpus.get(usize::from(slot)).copied().flatten()
        };
        let (p, bell, control) =
            self.start_instance(&self.plan, vr, &e.region, slot, cpu, Start::Urgent)?;
        let mut controls = BTreeMap::from([(slot, control)]);
        if !e.api_routes.is_empty() {
            let add: Vec<RouteConfig> = e.api_routes.values().cloned().collect();
            send_routes(&mut controls, &vr.name, &add, &[])
                .map_err(|err| ControlError::Internal(err.to_string()))?;
        }
        let add = move |w: &mut Worker| match w.vrs_mut().iter_mut().find(|v| v.id() == id) {
            Some(v) => v.add_instance(p, bell),
            None => Err(Box::new((p, bell))),
        };
        if let Err(refused) = self.mailbox.call(WORKER_TIMEOUT, add)? {
            let (mut p, _) = *refused;
            p.stop();
            return Err(ControlError::Conflict(
                "the worker refused it (the VR went down)".into(),
            ));
        }
        e.controls.extend(controls);
        Ok(())
    }

    /// Stop the VRs the worker has finished draining (waits for them up to
    /// the drain timeout).
    fn reap_drained(&mut self) -> Result<(), ControlError> {
        let until = Instant::now() + DRAIN_TIMEOUT + Duration::from_millis(200);
        loop {
            let (done, left) = self.mailbox.call(WORKER_TIMEOUT, |w: &mut Worker| {
                (w.take_drained(), w.draining())
            })?;
            // Stopping a process waits for it: done here, not in the worker.
            for mut vr in done {
                vr.shutdown();
            }
            if left == 0 || Instant::now() >= until {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Change the routes a VR got through the API: add (or replace) `add`,
    /// delete `del` (which must be API routes). All or nothing: the VR
    /// checks every message before the first is applied.
    ///
    /// # Errors
    /// Unknown VR, a VR that is not a router, a bad route, or a VR that
    /// did not answer.
    pub fn change_routes(
        &mut self,
        vr: &str,
        add: Vec<RouteConfig>,
        del: Vec<String>,
    ) -> Result<RouteResult, ControlError> {
        let plan = self
            .plan
            .vrs
            .iter()
            .find(|v| v.name == vr)
            .ok_or_else(|| ControlError::NotFound(format!("no VR {vr:?}")))?;
        if plan.program.is_some() {
            return Err(ControlError::Conflict(format!(
                "VR {vr:?} is a custom program; routes are for the built-in router"
            )));
        }
        let entry = self.vrs.get_mut(vr).expect("every planned VR has an entry");
        let mut add_keys = Vec::with_capacity(add.len());
        for (i, r) in add.iter().enumerate() {
            let k = vrhost_vr::router::parse_prefix(&r.prefix)
                .map_err(|e| ControlError::Invalid(format!("add[{i}]: {e}")))?;
            add_keys.push(k);
        }
        let mut del_keys = Vec::with_capacity(del.len());
        for (i, p) in del.iter().enumerate() {
            let k = vrhost_vr::router::parse_prefix(p)
                .map_err(|e| ControlError::Invalid(format!("del[{i}]: {e}")))?;
            if !entry.api_routes.contains_key(&k) {
                return Err(ControlError::NotFound(format!(
                    "del[{i}] {p:?}: no route added through the API"
                )));
            }
            del_keys.push(k);
        }
        let t = Instant::now();
        let routes = send_routes(&mut entry.controls, vr, &add, &del)?;
        let seconds = t.elapsed().as_secs_f64();
        for k in &del_keys {
            entry.api_routes.remove(k);
        }
        let (added, deleted) = (add.len() as u64, del_keys.len() as u64);
        for (k, r) in add_keys.into_iter().zip(add) {
            entry.api_routes.insert(k, r);
        }
        Ok(RouteResult {
            added,
            deleted,
            routes,
            api_routes: entry.api_routes.len(),
            seconds,
            routes_per_second: if seconds > 0.0 {
                (added + deleted) as f64 / seconds
            } else {
                0.0
            },
        })
    }
}

/// Send route changes to every instance of a VR (`controls`), in messages of
/// [`CONTROL_CHUNK`] routes: first every message as a dry run (the VR
/// checks it), then for real, so a refused route changes nothing. Returns
/// the routes in the VR's table afterwards.
fn send_routes(
    controls: &mut BTreeMap<u16, VrControl>,
    vr: &str,
    add: &[RouteConfig],
    del: &[String],
) -> Result<u64, ControlError> {
    let mut msgs = Vec::new();
    for c in add.chunks(CONTROL_CHUNK) {
        msgs.push(serde_json::json!({ "add": c, "del": [] }));
    }
    for c in del.chunks(CONTROL_CHUNK) {
        msgs.push(serde_json::json!({ "add": [], "del": c }));
    }
    let mut routes = 0;
    for dry_run in [true, false] {
        for (m, chunk) in msgs.iter().enumerate() {
            let mut body = chunk.clone();
            body["dry_run"] = dry_run.into();
            let body = serde_json::json!({ "routes": body });
            for c in controls.values_mut() {
                let reply = c.request(&body, CONTROL_TIMEOUT).map_err(|e| match e {
                    vrhost_host::ControlError::Refused(msg) => {
                        // The VR numbers entries within its message.
                        ControlError::Invalid(format!(
                            "VR {vr}: {msg} (in message {} of {}, {CONTROL_CHUNK} routes each)",
                            m + 1,
                            msgs.len()
                        ))
                    }
                    other => ControlError::Unavailable(format!("VR {vr}: {other}")),
                })?;
                routes = reply
                    .get("routes")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(routes);
            }
        }
    }
    Ok(routes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_back_off_by_what_shares_their_core() {
        let p = PollConfig {
            busy_poll_us: 100_000,
            ..PollConfig::default()
        };
        let at = |cpu, worker, sharers| instance_poll(p, cpu, worker, sharers);
        let worker = p.beside_worker();
        assert_eq!(at(Some(1), Some(1), 1), worker, "on the worker's core");
        assert_eq!(at(None, None, 0), worker, "anywhere, worker too");
        assert_eq!(at(None, Some(1), 0), worker, "unpinned: co-runners unknown");
        assert_eq!(at(Some(0), Some(1), 2), p.beside_vrs(), "a core VRs share");
        assert_eq!(at(Some(0), Some(1), 1), p, "a core of its own");
        assert_ne!(p.beside_vrs(), p.beside_worker());
        // Only a VR with a core of its own busy-polls.
        assert_eq!(at(Some(0), Some(1), 1).busy_poll_us, 100_000);
        for shared in [
            at(Some(0), Some(1), 2),
            at(None, Some(1), 0),
            at(Some(1), Some(1), 1),
        ] {
            assert_eq!(shared.busy_poll_us, 0, "{shared:?}");
        }
    }
}
