//! VR control planes (issue 22, items 3 and 4): for a VR with
//! `control_plane`, its control namespace ([`netns`]: made when its TAP
//! ports open, their MACs and addresses set here), the routing daemon
//! running there confined (`vrhost_host::confine::spawn_control`: the
//! namespace, a cgroup of its own, the VR's user with the network
//! capabilities only), restarted like a VR when it goes down (at once,
//! then after 50 ms doubling to 5 s while it keeps going down within a
//! second), and the namespace's kernel routing table followed over
//! netlink ([`vrhost_netlink::RouteWatch`], both families) into the VR's
//! FIB as route changes ([`sync`]), the path API routes take.
//!
//! Where the frames go is the router's business (`control_vnics`, its
//! `cplane.rs`): the host only sees the TAPs as ports, and the VR process
//! never sees the namespace.
//!
//! A `kind = "tap"` VR has the same namespace and TAPs, but the namespace
//! is its data plane: forwarding is turned on there, its routes are not
//! followed (the VR process only moves frames, `control_all`), and what
//! runs there (nothing, or the tenant's command) is restarted the same
//! way.
//!
//! A control plane that goes down: the kernel table it programmed stays
//! as it was (BIRD killed leaves its routes; stopped cleanly it withdraws
//! them, and the watch hands the withdrawals on), so its routes stay in
//! the VR while it restarts, and when it is back it re-syncs the kernel
//! table, which the watch follows. If it is not back within its hold
//! time (`control_hold_ms`, 90 s by default, BGP's usual hold time: what
//! its peers would wait before they withdrew its routes themselves), its
//! routes are withdrawn from the VR and the watch stops; the next start
//! dumps the table again.

pub mod netns;
mod sync;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::PathBuf;
use std::process::Child;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use vrhost_host::config::{ControlPlan, ControlRun, VrPlan};
use vrhost_host::confine::{Cgroups, ControlSpawn, Ids, spawn_control};
use vrhost_netlink::{NetnsRef, RouteBatch, RouteWatch, RouterSync, WatchFilter, WatchOptions};
use vrhost_router::RouteConfig;

pub use sync::SyncHook;

/// The first delay of a flapping control plane's restart.
const FIRST_DELAY: Duration = Duration::from_millis(50);
/// The longest.
const MAX_DELAY: Duration = Duration::from_secs(5);
/// Going down within this time of a start is flapping.
const FLAPPING: Duration = Duration::from_secs(1);
/// Route changes are gathered this long after the first (the watch's
/// window): short, for the sync time; a full table still comes in
/// batches of thousands.
const WINDOW: Duration = Duration::from_millis(2);
/// Batches that may wait for the VR.
const DEPTH: usize = 64;

/// A running control plane process.
struct Running {
    child: Child,
    cgroups: Option<Cgroups>,
    since: Instant,
}

/// What a [`ControlPlane::tick`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tick {
    /// Nothing new.
    Quiet,
    /// The process exited (its status); a restart is due.
    Exited(String),
    /// It was started again.
    Restarted,
    /// Up for a second again after its hold time had passed: its routes
    /// come again from a new dump.
    Resynced,
    /// Down longer than its hold time: its routes are to be withdrawn.
    HoldExpired,
}

/// One VR's control plane.
pub struct ControlPlane {
    vr: String,
    plan: ControlPlan,
    user: Option<Ids>,
    cgroup: bool,
    running: Option<Running>,
    /// When it is to start again, while it is down.
    restart_at: Option<Instant>,
    /// When the outage began: its first exit since it last ran for
    /// [`FLAPPING`] (a process that fails at every start is down all
    /// along, for the hold time).
    outage: Option<Instant>,
    delay: Duration,
    /// Starts and exits so far.
    pub starts: u64,
    /// Exits so far.
    pub exits: u64,
    watch: Option<RouteWatch>,
    /// The watch's batches, until a sync thread takes them.
    pending: Option<Receiver<RouteBatch>>,
    /// Which watch is current (a sync thread of an older one stops).
    token: u64,
    sync: RouterSync,
    /// The routes the VR holds from it, by prefix.
    routes: BTreeMap<String, RouteConfig>,
    /// Changes taken from the watch, not yet sent: per prefix the last
    /// word (a route, or a withdrawal).
    unsent: BTreeMap<String, Option<RouteConfig>>,
    held: bool,
    /// Route changes applied and refused by the VR.
    pub applied: u64,
    /// Route changes the VR refused (each counted, the rest applied).
    pub refused: u64,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("vr", &self.vr)
            .field("netns", &self.plan.netns)
            .field("running", &self.running.is_some())
            .field("routes", &self.routes.len())
            .finish()
    }
}

impl ControlPlane {
    /// Set up the TAPs of `vr`'s control namespace (opened with its ports
    /// beforehand), start its control plane and the watch of its table.
    ///
    /// # Errors
    /// What failed, naming the VR.
    pub fn start(vr: &VrPlan, plan: &ControlPlan) -> Result<Self, String> {
        let fail = |e: String| format!("VR {}: control plane: {e}", vr.name);
        netns::configure(&plan.netns, &plan.taps).map_err(fail)?;
        if plan.data_plane {
            netns::forwarding_on(&plan.netns).map_err(fail)?;
        }
        let mut me = Self {
            vr: vr.name.clone(),
            plan: plan.clone(),
            user: vr.confine.user,
            cgroup: vr.confine.wants_cgroup(),
            running: None,
            restart_at: None,
            outage: None,
            delay: Duration::ZERO,
            starts: 0,
            exits: 0,
            watch: None,
            pending: None,
            token: 0,
            sync: RouterSync::default(),
            routes: BTreeMap::new(),
            unsent: BTreeMap::new(),
            held: false,
            applied: 0,
            refused: 0,
        };
        if !plan.data_plane {
            me.watch().map_err(fail)?;
        }
        if plan.run != ControlRun::Nothing {
            me.spawn().map_err(fail)?;
        }
        Ok(me)
    }

    /// The plan it runs.
    pub fn plan(&self) -> &ControlPlan {
        &self.plan
    }

    /// BIRD's control socket (`birdc -s`), in its run directory.
    pub fn socket(&self) -> PathBuf {
        netns::run_dir(&self.plan.netns).join("bird.ctl")
    }

    /// The routes the VR holds from it, by prefix.
    pub fn routes(&self) -> &BTreeMap<String, RouteConfig> {
        &self.routes
    }

    /// Whether its process runs.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Its pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.running.as_ref().map(|r| r.child.id())
    }

    /// Start following the namespace's routing table (a dump first).
    fn watch(&mut self) -> Result<(), String> {
        let opts = WatchOptions {
            window: WINDOW,
            ..WatchOptions::default()
        };
        let (w, rx) = RouteWatch::channel(
            NetnsRef::named(&self.plan.netns),
            WatchFilter::default(),
            opts,
            DEPTH,
        )
        .map_err(|e| format!("route watch: {e}"))?;
        let vnics = (self.plan.taps.iter().enumerate())
            .map(|(i, t)| (t.ifname.clone(), i as u16))
            .collect();
        self.sync = RouterSync::new(vnics);
        // The new watch's dump says it all again.
        self.unsent.clear();
        self.token += 1;
        self.watch = Some(w);
        self.pending = Some(rx);
        Ok(())
    }

    /// Its command line: BIRD on a copy of its config in the run
    /// directory (readable by its user), with its socket there; started
    /// again after it went down, in graceful restart recovery (`-R`): a
    /// kernel protocol with `graceful restart` then keeps the routes it
    /// left in the kernel table until its protocols have converged again,
    /// instead of flushing them at start.
    fn command(&self) -> Result<Vec<String>, String> {
        let dir = netns::run_dir(&self.plan.netns);
        match &self.plan.run {
            ControlRun::Bird { bird, config } => {
                let copy = dir.join("bird.conf");
                std::fs::copy(config, &copy)
                    .map_err(|e| format!("copy {}: {e}", config.display()))?;
                let mut c = vec![
                    bird.display().to_string(),
                    "-f".into(),
                    "-c".into(),
                    copy.display().to_string(),
                    "-s".into(),
                    self.socket().display().to_string(),
                ];
                if self.starts > 0 {
                    c.push("-R".into());
                }
                Ok(c)
            }
            ControlRun::Command(c) => Ok(c.clone()),
            ControlRun::Nothing => Err("nothing to run".into()),
        }
    }

    /// Start the process in the namespace.
    fn spawn(&mut self) -> Result<(), String> {
        let dir = netns::run_dir(&self.plan.netns);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let command = self.command()?;
        if let Some(u) = self.user {
            for p in [dir.clone(), dir.join("bird.conf")] {
                if p.exists() {
                    std::os::unix::fs::chown(&p, Some(u.uid), Some(u.gid))
                        .map_err(|e| format!("chown {}: {e}", p.display()))?;
                }
            }
        }
        let log = File::options()
            .create(true)
            .append(true)
            .open(dir.join("control.log"))
            .map_err(|e| format!("log: {e}"))?;
        let cgroup = format!("{}.ctl", self.vr);
        let (child, cgroups) = spawn_control(ControlSpawn {
            command: &command,
            netns: &PathBuf::from("/run/netns").join(&self.plan.netns),
            user: self.user,
            cgroup: self.cgroup.then_some(cgroup.as_str()),
            dir: &dir,
            log,
        })
        .map_err(|e| e.to_string())?;
        tracing::info!(vr = %self.vr, pid = child.id(), netns = %self.plan.netns, "control plane started");
        self.running = Some(Running {
            child,
            cgroups,
            since: Instant::now(),
        });
        self.starts += 1;
        Ok(())
    }

    /// See whether it went down, restart it when due, and tell when its
    /// hold time passes and when it is back after that.
    pub fn tick(&mut self, now: Instant) -> Tick {
        if let Some(r) = &mut self.running {
            let ran = now.saturating_duration_since(r.since);
            let Ok(Some(status)) = r.child.try_wait() else {
                if ran < FLAPPING {
                    return Tick::Quiet;
                }
                // Up for good: the outage is over.
                self.outage = None;
                if !self.held {
                    return Tick::Quiet;
                }
                self.held = false;
                if !self.plan.data_plane
                    && let Err(e) = self.watch()
                {
                    tracing::error!(vr = %self.vr, "control plane: {e}");
                }
                return Tick::Resynced;
            };
            let mut r = self.running.take().expect("running");
            if let Some(cg) = r.cgroups.as_mut() {
                cg.remove();
            }
            self.exits += 1;
            self.delay = match ran < FLAPPING {
                true => (self.delay * 2).clamp(FIRST_DELAY, MAX_DELAY),
                false => Duration::ZERO,
            };
            if ran >= FLAPPING {
                self.outage = None;
            }
            self.outage.get_or_insert(now);
            self.restart_at = Some(now + self.delay);
            tracing::warn!(vr = %self.vr, %status, delay_ms = self.delay.as_millis() as u64, "control plane exited: restarting");
            return Tick::Exited(status.to_string());
        }
        if self.restart_at.is_some_and(|at| now >= at) {
            match self.spawn() {
                Ok(()) => {
                    self.restart_at = None;
                    return Tick::Restarted;
                }
                Err(e) => {
                    self.delay = (self.delay * 2).clamp(FIRST_DELAY, MAX_DELAY);
                    self.restart_at = Some(now + self.delay);
                    tracing::error!(vr = %self.vr, "control plane restart failed: {e}");
                }
            }
        }
        self.hold_check(now)
    }

    /// Whether the outage has just outlasted the hold time; if so, the
    /// watch stops (a new dump when it is back).
    fn hold_check(&mut self, now: Instant) -> Tick {
        let Some(since) = self.outage else {
            return Tick::Quiet;
        };
        let hold = Duration::from_millis(self.plan.hold_ms);
        if !self.held && now.saturating_duration_since(since) >= hold {
            self.held = true;
            // Its table is read again from a new dump when it is back.
            if let Some(w) = self.watch.take() {
                let _ = w.stop();
            }
            self.pending = None;
            self.unsent.clear();
            self.token += 1;
            return Tick::HoldExpired;
        }
        Tick::Quiet
    }

    /// Stop the watch and the process (SIGTERM, then SIGKILL after a
    /// second).
    pub fn stop(&mut self) {
        if let Some(w) = self.watch.take() {
            let _ = w.stop();
        }
        self.token += 1;
        let Some(mut r) = self.running.take() else {
            return;
        };
        if let Some(pid) = rustix::process::Pid::from_raw(r.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            if let Ok(Some(_)) = r.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = r.child.kill();
        let _ = r.child.wait();
        if let Some(cg) = r.cgroups.as_mut() {
            cg.remove();
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}
