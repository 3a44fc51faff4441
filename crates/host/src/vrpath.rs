//! The host's side of one VR: its pool, its rings, and the checks on
//! everything the VR hands back.
//!
//! The host keeps its own record of every slot: free (on the host's private
//! free list) or held by instance `i` (given through one of its rx rings).
//! That record, not the shared slot state, decides what the host does: an
//! index popped from a tx ring is accepted only if that instance holds it,
//! so a slot can never be freed twice or taken from another instance.
//! Everything else read from the region (ring indexes, slot states, offsets,
//! lengths) is validated, and a violation is counted and the slot reclaimed.
//!
//! The host also guards the VR as a whole ([`Guard`]): a VR whose processes
//! exit (or crash) is taken out of the data path at once and its slots
//! reclaimed; one that stops consuming while frames wait for it is killed
//! by the watchdog; one that exceeds its violation budget is quarantined
//! (killed, never fed again). Each of these is reported as an
//! [`ExitEvent`] for a supervisor to act on (restart it with
//! [`VrPath::restore`], or leave it quarantined).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vrhost_io::Port;
use vrhost_shm::{Consumer, Doorbell, Producer, Region, RingError, RingId, SlotState, needs_kick};
use vrhost_vr::Vr;
use vrhost_vr::router::Router;
use vrhost_vr::runtime::{TxStage, VrCounters, process_slots};

use crate::balance::{Balancer, Policy, flow_hash};
use crate::capture::{Direction, Tap};
use crate::relay::Relay;
use crate::spawn::VrProcess;
use crate::stats::{IngressDrop, Violation, VrStats, mono_ns};

/// Slot indexes moved per ring operation.
pub const BURST: usize = 64;

/// Most slots staged for one vNIC before they must be published: the
/// worker flushes a VR once it holds [`BURST`] staged frames, so this
/// leaves room for one more port burst on top.
const STAGE_MAX: usize = 2 * BURST;
/// Shortest frame a VR may send (an Ethernet header).
pub const MIN_FRAME: u16 = 14;

/// `owner` of a slot on the host's free list.
const FREE: u8 = 0;
/// `owner` of a slot taken back from a tx ring in the current batch, until
/// it is released: a second copy of its index in the same batch is then
/// refused as not owned.
const RETURNING: u8 = u8::MAX;

/// Why a VR's processes went down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownReason {
    /// A process exited or crashed by itself; its exit status.
    Exited(String),
    /// The watchdog killed it: frames waited for it and it made no progress.
    Hung,
    /// It exceeded its violation budget: killed and not fed again.
    Quarantined,
}

impl std::fmt::Display for DownReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DownReason::Exited(s) => write!(f, "exited ({s})"),
            DownReason::Hung => f.write_str("hung (killed by the watchdog)"),
            DownReason::Quarantined => f.write_str("quarantined (too many violations)"),
        }
    }
}

/// A VR in the data path went down: what the worker tells its supervisor.
#[derive(Debug, Clone)]
pub struct ExitEvent {
    /// The VR's name.
    pub vr: String,
    /// Its [`VrPath::id`]: a restart is for this VR path, not for another
    /// of the same name that replaced it since.
    pub id: u64,
    /// Why.
    pub reason: DownReason,
    /// When the host saw it.
    pub at: Instant,
}

/// How the host guards a VR beyond checking each value it reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Guard {
    /// Quarantine it after this many violations (since it was last
    /// started); `None`: never.
    pub quarantine_after: Option<u64>,
    /// Kill it when frames wait in its rx rings and its poll loop has not
    /// moved for this long; `None`: no watchdog.
    pub watchdog: Option<Duration>,
}

/// How the worker serves a VR among the others (ODP's scheduler in the
/// pull model: the worker pulls from the VRs' queues in this order and
/// measure).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sched {
    /// Share of the worker's tx service per round: `weight` x
    /// [`TX_QUANTUM`] frames (1..=100).
    pub weight: u32,
    /// Served before every normal VR, without a per-round budget.
    pub high_priority: bool,
    /// Frames/s admitted at ingress (token bucket); more are dropped and
    /// counted as `rate_limited` before any copy.
    pub rate_pps: Option<u64>,
    /// Bucket depth, frames.
    pub rate_burst: u64,
}

impl Default for Sched {
    fn default() -> Self {
        Self {
            weight: 1,
            high_priority: false,
            rate_pps: None,
            rate_burst: 0,
        }
    }
}

/// What a frame is to the host's admission (see [`VrPath::stage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Everything else.
    Data,
    /// A router's control traffic ([`vrhost_packet::FlowKey::is_control`]):
    /// admitted into the room kept for it when the VR is otherwise full.
    Control,
}

/// Room kept for [`Class::Control`] frames in each rx ring and in the pool
/// of `n` entries: 1/16 of it, at most one burst (none below 16).
fn control_reserve(n: u32) -> u32 {
    (n / 16).min(BURST as u32)
}

/// Frames of tx service per round per unit of weight.
pub const TX_QUANTUM: usize = 4 * BURST;

/// A token bucket of frames, refilled once per worker round.
#[derive(Debug, Clone)]
struct Bucket {
    rate: f64,
    depth: f64,
    tokens: f64,
    last: Instant,
}

/// Source of [`VrPath::id`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Who runs a VR's packet processing.
pub enum Backend {
    /// Separate processes, one per instance (the design).
    Process(Vec<VrProcess>),
    /// The built-in router called in the host thread (no isolation): the
    /// in-process reference of `vrhost bench memory`.
    InProcRouter(Box<Router>),
    /// Any VR called in the host thread.
    InProc(Box<dyn Vr + Send>),
    /// The rings are served by someone the host did not start (a test
    /// harness, or a process started elsewhere); nothing to watch.
    External,
}

impl Backend {
    fn uses_rings(&self) -> bool {
        matches!(self, Backend::Process(_) | Backend::External)
    }
}

/// One instance of a VR as the region and the host see it (display only).
#[derive(Debug, Clone, Default)]
pub struct InstanceInfo {
    /// Instance number.
    pub index: u16,
    /// Its process, if the host started one.
    pub pid: Option<u32>,
    /// Whether it runs and is fed.
    pub running: bool,
    /// Entries waiting in its rx rings (all vNICs).
    pub rx_ring_fill: u64,
    /// Entries waiting in its tx rings (all vNICs).
    pub tx_ring_fill: u64,
    /// Its poll loop's round counter.
    pub heartbeat: u64,
    /// The counters the VR SDK publishes (see `vrhost_vr::proto::counter`).
    pub vr_counters: Vec<u64>,
}

/// Where an instance slot of the region is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceState {
    /// No process; its rings are at rest (zero), free for a new instance.
    Off,
    /// Fed by the balancer.
    Live,
    /// Fed no more; served until it hands back every slot it holds.
    Draining,
    /// Drained and asked to stop; reaped (and its slot made `Off`) when it
    /// exits, or killed after [`STOP_GRACE`].
    Stopping,
}

/// The load estimates of a VR and its instances (see
/// [`VrStats::arrival_pps`]), kept between samples.
struct Load {
    at: Instant,
    offered: u64,
    arrival: f64,
    returned: Vec<u64>,
    held: Vec<u32>,
    fill: Vec<f64>,
    capacity: Vec<f64>,
    /// What the weighted policy is told: the capacity, or more while an
    /// instance has no backlog to measure it by (it is then probed up).
    weight: Vec<f64>,
}

impl Load {
    fn new(instances: usize) -> Self {
        Self {
            at: Instant::now(),
            offered: 0,
            arrival: 0.0,
            returned: vec![0; instances],
            held: vec![0; instances],
            fill: vec![0.0; instances],
            capacity: vec![0.0; instances],
            weight: vec![0.0; instances],
        }
    }
}

/// An instance holding at least this many slots at two samples in a row
/// was busy all along: what it handed back meanwhile is its capacity.
const BACKLOGGED: u32 = BURST as u32;

/// [`VrPath`]'s `solo` when the balancer picks.
const SHARED: u16 = u16::MAX;

/// How long a retired instance may take to exit once drained.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// One instance slot, host side.
struct Inst {
    rx: Vec<Producer>,
    tx: Vec<Consumer>,
    /// Its doorbell (rung when it sleeps and gets work).
    bell: Option<Doorbell>,
    state: InstanceState,
    /// When it was asked to stop (`Stopping`) or began draining.
    since: Instant,
    /// Watchdog: the heartbeat last seen, and since when it has not moved
    /// while frames waited.
    wd_beat: u64,
    wd_since: Instant,
}

impl Inst {
    fn new(region: &Region, i: u16) -> Self {
        let cfg = region.layout().cfg;
        let ring = |r| region.ring(i, r).expect("in layout");
        let now = Instant::now();
        Self {
            rx: (0..cfg.vnic_count)
                .map(|v| ring(RingId::Rx(v)).producer())
                .collect(),
            tx: (0..cfg.vnic_count)
                .map(|v| ring(RingId::Tx(v)).consumer())
                .collect(),
            bell: None,
            state: InstanceState::Off,
            since: now,
            wd_beat: 0,
            wd_since: now,
        }
    }

    /// Whether the host still serves its rings.
    fn served(&self) -> bool {
        matches!(self.state, InstanceState::Live | InstanceState::Draining)
    }
}

/// Host side of one VR.
pub struct VrPath {
    name: String,
    region: Region,
    headroom: u16,
    slot_bytes: u16,
    free: Vec<u32>,
    owner: Vec<u8>,
    /// Out port of each vNIC.
    vnic_port: Vec<usize>,
    inst: Vec<Inst>,
    /// Slots each instance holds (given and not handed back): its backlog,
    /// by the host's own count.
    held: Vec<u32>,
    /// Which live instance gets each frame (boxed: its tables are 4 KiB,
    /// which inline would spread this struct's hot fields over more cache
    /// lines).
    balancer: Box<Balancer>,
    /// Control messages between the instances.
    relay: Relay,
    /// Instances whose rings are served, one bit each.
    served_mask: u64,
    /// Most slots one instance may hold: its share of the pool, so that a
    /// slow instance (or one that stopped) cannot take the slots its
    /// siblings need.
    inst_cap: u32,
    /// Slots staged for each instance's vNIC rx rings during a round, at
    /// `instance * vnics + vnic`.
    staged: Vec<Vec<u32>>,
    /// Frames staged over all instances and vNICs, not yet published.
    staged_n: usize,
    /// The only live instance, or [`SHARED`] when there are several (or
    /// none): the balancer is asked only then.
    solo: u16,
    load: Load,
    backend: Backend,
    /// In-process only: staging and counters for the shared processing code.
    inproc_stage: TxStage,
    inproc_counters: VrCounters,
    up: bool,
    stats: Arc<VrStats>,
    /// The capture attached to this VR, if any (see [`crate::capture`]).
    tap: Option<Box<Tap>>,
    id: u64,
    guard: Guard,
    quarantined: bool,
    /// Why the host killed it, for the exit that follows.
    kill_reason: Option<DownReason>,
    /// Violations counted before its processes were last started.
    violations_base: u64,
    /// Restored after an exit, no frame sent yet.
    recovering: bool,
    sched: Sched,
    bucket: Option<Bucket>,
    /// Rx ring entries and pool slots only control frames may take.
    ring_reserve: u32,
    pool_reserve: usize,
}

impl VrPath {
    /// Set up the host side of a VR over `region`, whose vNIC `v` sends on
    /// port `vnic_port[v]`. `bells` are the doorbells of the backend's
    /// instances: of each process in order, or, for an external backend,
    /// of instances 0, 1, ... (each of which is then fed); empty for
    /// in-process backends.
    pub fn new(
        name: &str,
        region: Region,
        vnic_port: Vec<usize>,
        backend: Backend,
        bells: Vec<Doorbell>,
    ) -> Self {
        let cfg = region.layout().cfg;
        let inst: Vec<Inst> = (0..cfg.instance_count)
            .map(|i| Inst::new(&region, i))
            .collect();
        let up = match &backend {
            Backend::Process(p) => !p.is_empty(),
            _ => true,
        };
        let mut path = Self {
            name: name.to_string(),
            headroom: cfg.headroom as u16,
            slot_bytes: cfg.slot_bytes as u16,
            free: (0..cfg.slot_count).rev().collect(),
            owner: vec![FREE; cfg.slot_count as usize],
            vnic_port,
            held: vec![0; inst.len()],
            balancer: Box::new(Balancer::new(Policy::default(), cfg.instance_count)),
            relay: Relay::new(&region),
            served_mask: 0,
            inst_cap: cfg.slot_count,
            staged: (0..usize::from(cfg.instance_count) * usize::from(cfg.vnic_count))
                .map(|_| Vec::with_capacity(STAGE_MAX))
                .collect(),
            solo: SHARED,
            load: Load::new(inst.len()),
            inst,
            staged_n: 0,
            inproc_stage: TxStage::new(cfg.vnic_count),
            inproc_counters: VrCounters::default(),
            backend,
            region,
            up,
            stats: Arc::new(VrStats::with_shape(
                usize::from(cfg.vnic_count),
                usize::from(cfg.instance_count),
            )),
            tap: None,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            guard: Guard::default(),
            quarantined: false,
            kill_reason: None,
            violations_base: 0,
            recovering: false,
            sched: Sched::default(),
            bucket: None,
            ring_reserve: control_reserve(cfg.ring_entries),
            pool_reserve: control_reserve(cfg.slot_count) as usize,
        };
        path.go_live(bells);
        path
    }

    /// Make the backend's instances live, with their doorbells (see
    /// [`VrPath::new`]).
    fn go_live(&mut self, bells: Vec<Doorbell>) {
        let ids: Vec<u16> = match &self.backend {
            Backend::Process(p) => p.iter().map(VrProcess::instance).collect(),
            Backend::External => (0..bells.len().max(1) as u16).collect(),
            Backend::InProcRouter(_) | Backend::InProc(_) => vec![0],
        };
        let mut bells = bells.into_iter();
        for i in ids {
            let bell = bells.next();
            if let Some(inst) = self.inst.get_mut(usize::from(i)) {
                inst.bell = bell;
                inst.state = InstanceState::Live;
                inst.wd_since = Instant::now();
            }
        }
        self.rebalance();
    }

    /// Tell the balancer which instances are live, and note which are
    /// served.
    fn rebalance(&mut self) {
        let live: Vec<u16> = (0..self.inst.len() as u16)
            .filter(|&i| self.inst[usize::from(i)].state == InstanceState::Live)
            .collect();
        self.balancer.set_active(&live);
        self.solo = match live[..] {
            [only] => only,
            _ => SHARED,
        };
        let pool = self.owner.len() as u32;
        self.inst_cap = (pool / live.len().max(1) as u32)
            .max(2 * BURST as u32)
            .min(pool);
        self.served_mask = self
            .inst
            .iter()
            .enumerate()
            .filter(|(_, x)| x.served())
            .fold(0, |m, (i, _)| m | 1 << i);
    }

    /// Set the policy that shares frames among its instances.
    pub fn set_balance(&mut self, p: Policy) {
        self.balancer.set_policy(p);
    }

    /// The policy that shares frames among its instances.
    pub fn balance(&self) -> Policy {
        self.balancer.policy()
    }

    /// Tell the weighted policy what instance `i` can take (frames/s).
    pub fn set_capacity(&mut self, i: u16, pps: f64) {
        self.balancer.set_capacity(i, pps);
    }

    /// Where each instance slot is in its life.
    pub fn instance_states(&self) -> Vec<InstanceState> {
        self.inst.iter().map(|x| x.state).collect()
    }

    /// Whether an instance is being retired (draining, or asked to stop):
    /// its state moves on only as the VR is [supervised](VrPath::supervise).
    pub fn retiring(&self) -> bool {
        let retiring =
            |x: &Inst| matches!(x.state, InstanceState::Draining | InstanceState::Stopping);
        self.inst.iter().any(retiring)
    }

    /// Instances fed now.
    pub fn live_instances(&self) -> usize {
        self.balancer.active().len()
    }

    /// An instance slot with no process (its rings at rest), for a new
    /// instance; `None` if every slot is taken.
    pub fn vacant_instance(&self) -> Option<u16> {
        self.inst
            .iter()
            .position(|x| x.state == InstanceState::Off)
            .map(|i| i as u16)
    }

    /// Feed a new instance, started on a [vacant](VrPath::vacant_instance)
    /// slot: it gets its share of frames from the next one on. Refused
    /// (handed back, for the caller to stop) if the VR is not run by
    /// processes, is down, or the slot is not vacant.
    ///
    /// # Errors
    /// The process and its doorbell, when refused.
    pub fn add_instance(
        &mut self,
        p: VrProcess,
        bell: Doorbell,
    ) -> Result<(), Box<(VrProcess, Doorbell)>> {
        let i = usize::from(p.instance());
        let vacant = self
            .inst
            .get(i)
            .is_some_and(|x| x.state == InstanceState::Off);
        let Backend::Process(procs) = &mut self.backend else {
            return Err(Box::new((p, bell)));
        };
        if !self.up || self.quarantined || !vacant {
            return Err(Box::new((p, bell)));
        }
        procs.push(p);
        // Its rings are at rest: take them from zero, as the process did.
        let mut fresh = Inst::new(&self.region, i as u16);
        fresh.bell = Some(bell);
        fresh.state = InstanceState::Live;
        self.inst[i] = fresh;
        self.relay.reset(i as u16);
        // A new process: its capacity is measured afresh; until then the
        // weighted policy gives it as much as the best of the others.
        let l = &mut self.load;
        l.capacity[i] = 0.0;
        l.weight[i] = l.weight.iter().copied().fold(0.0, f64::max);
        if l.weight[i] > 0.0 {
            self.balancer.set_capacity(i as u16, l.weight[i]);
        }
        self.stats.rebalances.add(1);
        self.rebalance();
        Ok(())
    }

    /// Stop feeding instance `i`: its flows go to the other live
    /// instances at once; it is served until it hands back every slot it
    /// holds, then asked to stop, and reaped when it exits. Refused
    /// (`false`) for the last live instance, or one that is not live.
    pub fn retire_instance(&mut self, i: u16) -> bool {
        let live = self.balancer.active().len();
        match self.inst.get_mut(usize::from(i)) {
            Some(x) if x.state == InstanceState::Live && live > 1 => {
                x.state = InstanceState::Draining;
                x.since = Instant::now();
            }
            _ => return false,
        }
        self.stats.rebalances.add(1);
        self.rebalance();
        true
    }

    /// Set how the worker serves it (see [`Sched`]).
    pub fn set_sched(&mut self, s: Sched) {
        let rate = s.rate_pps.map(|r| r as f64);
        self.bucket = rate.map(|rate| {
            let depth = s.rate_burst.max(1) as f64;
            Bucket {
                rate,
                depth,
                tokens: self.bucket.as_ref().map_or(depth, |b| b.tokens.min(depth)),
                last: Instant::now(),
            }
        });
        self.sched = Sched {
            weight: s.weight.clamp(1, 100),
            ..s
        };
    }

    /// How the worker serves it.
    pub fn sched(&self) -> Sched {
        self.sched
    }

    /// Refill its token bucket (once per round, when it has one).
    #[inline]
    pub fn refill(&mut self, now: Instant) {
        if let Some(b) = &mut self.bucket {
            let dt = now.saturating_duration_since(b.last).as_secs_f64();
            b.last = now;
            b.tokens = (b.tokens + b.rate * dt).min(b.depth);
        }
    }

    /// Set how the host guards it (see [`Guard`]).
    pub fn set_guard(&mut self, guard: Guard) {
        self.guard = guard;
    }

    /// How the host guards it.
    pub fn guard(&self) -> Guard {
        self.guard
    }

    /// A number no other `VrPath` of this process has.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether it was quarantined (it stays down until replaced).
    pub fn is_quarantined(&self) -> bool {
        self.quarantined
    }

    /// VR name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its counters.
    pub fn stats(&self) -> &Arc<VrStats> {
        &self.stats
    }

    /// The region.
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// Whether it accepts packets.
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// The processes, if it runs in processes.
    pub fn processes(&self) -> &[VrProcess] {
        match &self.backend {
            Backend::Process(p) => p,
            _ => &[],
        }
    }

    /// Slots on the host's free list.
    pub fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Slots in the pool.
    pub fn pool_slots(&self) -> usize {
        self.owner.len()
    }

    /// True when the VR holds no slot (everything given to it came back).
    pub fn is_drained(&self) -> bool {
        self.free.len() == self.owner.len()
    }

    /// The out port of each vNIC.
    pub fn vnic_ports(&self) -> &[usize] {
        &self.vnic_port
    }

    /// Change the out port of each vNIC (the ports were renumbered); a
    /// vNIC whose port is gone gets `usize::MAX` and its frames are counted
    /// as port drops.
    ///
    /// # Panics
    /// If `ports` does not have one entry per vNIC.
    pub fn set_vnic_ports(&mut self, ports: Vec<usize>) {
        assert_eq!(ports.len(), self.vnic_port.len(), "one port per vNIC");
        self.vnic_port = ports;
    }

    /// Attach a capture tap, or detach it with `None`; returns the one it
    /// replaces (for the caller to drop off the worker thread).
    pub fn set_tap(&mut self, tap: Option<Box<Tap>>) -> Option<Box<Tap>> {
        std::mem::replace(&mut self.tap, tap)
    }

    /// The capture tap attached, if any.
    pub fn tap(&self) -> Option<&Tap> {
        self.tap.as_deref()
    }

    /// What the instances show in the region: for display only (a VR writes
    /// these values and may write anything).
    pub fn instance_info(&self) -> Vec<InstanceInfo> {
        let cfg = self.region.layout().cfg;
        let procs = self.processes();
        (0..cfg.instance_count)
            .map(|i| {
                let fill = |ring: fn(u16) -> RingId| {
                    (0..cfg.vnic_count)
                        .filter_map(|v| self.region.ring(i, ring(v)))
                        .map(|r| u64::from(r.occupancy()))
                        .sum()
                };
                let block = self.region.instance(i);
                // Relaxed: display values.
                let ld = |f: fn(&vrhost_shm::InstanceBlock) -> u64| block.map_or(0, f);
                let p = procs.iter().find(|p| p.instance() == i);
                InstanceInfo {
                    index: i,
                    pid: p.map(VrProcess::pid),
                    running: p.is_some_and(|p| !p.reaped)
                        && self.up
                        && self.inst[usize::from(i)].served(),
                    rx_ring_fill: fill(RingId::Rx),
                    tx_ring_fill: fill(RingId::Tx),
                    heartbeat: ld(|b| b.heartbeat.load(std::sync::atomic::Ordering::Relaxed)),
                    vr_counters: block.map_or_else(Vec::new, |b| {
                        b.vr_counters
                            .iter()
                            .map(|c| c.load(std::sync::atomic::Ordering::Relaxed))
                            .collect()
                    }),
                }
            })
            .collect()
    }

    /// Check the slot accounting invariant: every slot is either on the free
    /// list (exactly once) or held by an instance, never both.
    pub fn check_slot_accounting(&self) -> Result<(), String> {
        let mut seen = vec![false; self.owner.len()];
        for &s in &self.free {
            let i = s as usize;
            if seen[i] {
                return Err(format!("slot {s} on the free list twice"));
            }
            seen[i] = true;
            if self.owner[i] != FREE {
                return Err(format!(
                    "slot {s} free but held by instance {}",
                    self.owner[i] - 1
                ));
            }
        }
        let mut held = vec![0u32; self.held.len()];
        for (i, &o) in self.owner.iter().enumerate() {
            if o == FREE && !seen[i] {
                return Err(format!("slot {i} neither free nor held"));
            }
            if o != FREE {
                match held.get_mut(usize::from(o) - 1) {
                    Some(h) => *h += 1,
                    None => return Err(format!("slot {i} held by unknown holder {o}")),
                }
            }
        }
        if held != self.held {
            return Err(format!("held counts {:?}, slots say {held:?}", self.held));
        }
        Ok(())
    }

    /// Copy `frame` into a free slot and stage it for `vnic`'s rx ring.
    /// The caller flushes with [`VrPath::flush_rx`] after the burst. A
    /// [`Class::Data`] frame is refused (`ring_full`, `pool_empty`) when
    /// only the room kept for control frames is left: a flood of data
    /// cannot keep a VR's ARP and routing sessions from it.
    ///
    /// `class` is asked only when the VR is that full: a frame's class
    /// costs nothing on the common path.
    #[inline]
    pub fn stage(
        &mut self,
        vnic: u16,
        frame: &[u8],
        class: impl FnOnce() -> Class,
    ) -> Result<(), IngressDrop> {
        if !self.up {
            return Err(IngressDrop::VrDown);
        }
        if let Some(b) = &mut self.bucket {
            if b.tokens < 1.0 {
                return Err(IngressDrop::RateLimited);
            }
            b.tokens -= 1.0;
        }
        let v = usize::from(vnic);
        if v >= self.vnic_port.len() {
            return Err(IngressDrop::NoMatch);
        }
        // The instance: the only live one, or the balancer's choice (the
        // frame's hash is computed only for the flow policy).
        let i = if self.solo != SHARED {
            self.solo
        } else {
            self.pick_shared(frame)?
        };
        let iu = usize::from(i);
        let q = iu * self.vnic_port.len() + v;
        let staged = self.staged[q].len();
        if staged >= STAGE_MAX {
            return Err(IngressDrop::RingFull);
        }
        // Asked at most once, and only within the reserve.
        let (mut class, mut is_control) = (Some(class), None);
        let mut control = || {
            *is_control.get_or_insert_with(|| class.take().is_some_and(|c| c() == Class::Control))
        };
        if self.backend.uses_rings() {
            let rx = &mut self.inst[iu].rx[v];
            let need = staged as u32 + self.ring_reserve;
            if need >= rx.free_cached() {
                match rx.free() {
                    // Within the reserve: control frames only.
                    Ok(room) if need >= room => {
                        if staged as u32 >= room || !control() {
                            return Err(IngressDrop::RingFull);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => {
                        self.stats.violation(Violation::RxRingIndex);
                        return Err(IngressDrop::RingFull);
                    }
                }
            }
        }
        if frame.len() > usize::from(self.slot_bytes - self.headroom) {
            return Err(IngressDrop::TooBig);
        }
        if self.free.len() <= self.pool_reserve && !control() {
            return Err(IngressDrop::PoolEmpty);
        }
        let Some(slot) = self.free.pop() else {
            return Err(IngressDrop::PoolEmpty);
        };
        // The slot the next frame for this VR will take: with several VRs
        // that frame is a few frames away, time for the slot's lines (last
        // written by the VR's core) to arrive.
        // (An in-process VR's slots are in this core's cache already.)
        if self.backend.uses_rings()
            && let Some(&next) = self.free.last()
        {
            self.region.prefetch(next, self.headroom.into());
        }
        self.region.write_slot(slot, self.headroom.into(), frame);
        let meta = self
            .region
            .meta(slot)
            .expect("free list holds valid indexes");
        meta.set_extent(self.headroom, frame.len() as u16);
        meta.set(SlotState::Filled);
        self.owner[slot as usize] = i as u8 + 1;
        self.held[iu] += 1;
        self.staged[q].push(slot);
        self.staged_n += 1;
        // The frame as received, copied from the port's buffer (not from
        // the slot, which the VR can write at any time).
        // Frames it cannot keep are counted at the end of the burst.
        if let Some(tap) = self.tap.as_deref_mut()
            && tap.wants(vnic)
        {
            tap.copy(Direction::In, vnic, frame);
        }
        Ok(())
    }

    /// The instance of a frame when several are live (out of line: a VR
    /// with one instance does not carry this code in its loop). Refused
    /// when the chosen instance holds its share of the pool.
    #[inline(never)]
    fn pick_shared(&mut self, frame: &[u8]) -> Result<u16, IngressDrop> {
        let i = self
            .balancer
            .pick_with(|| flow_hash(frame), &self.held)
            .ok_or(IngressDrop::VrDown)?;
        if self.held[usize::from(i)] >= self.inst_cap {
            return Err(IngressDrop::RingFull);
        }
        Ok(i)
    }

    /// Frames staged and not yet published.
    #[inline]
    pub fn staged(&self) -> usize {
        self.staged_n
    }

    /// Publish the staged slots to the rx rings (or process them in place for
    /// an in-process backend, then send the results). Rings a sleeping
    /// instance's doorbell. Returns the frames published.
    pub fn flush_rx(&mut self, ports: &mut [Box<dyn Port>]) -> usize {
        // One burst's captures, published at once (before an in-process
        // VR's frames come out: `send` appends to the same list).
        if let Some(tap) = self.tap.as_deref_mut() {
            let refused = tap.end_burst();
            if refused > 0 {
                self.stats.capture_dropped.add(refused);
            }
        }
        if self.staged_n == 0 {
            return 0;
        }
        let total = self.staged_n;
        for i in 0..self.inst.len() {
            let mut given = 0;
            for v in 0..self.vnic_port.len() {
                let q = i * self.vnic_port.len() + v;
                let n = self.staged[q].len();
                if n == 0 {
                    continue;
                }
                given += n;
                if !self.backend.uses_rings() {
                    self.count_rx(v, n, i);
                }
                match &mut self.backend {
                    Backend::Process(_) | Backend::External => {
                        let pushed = match self.inst[i].rx[v].push(&self.staged[q]) {
                            Ok(p) => p,
                            Err(_) => {
                                self.stats.violation(Violation::RxRingIndex);
                                0
                            }
                        };
                        self.count_rx(v, pushed, i);
                        for k in pushed..n {
                            let s = self.staged[q][k];
                            self.release(s);
                        }
                        self.held[i] -= (n - pushed) as u32;
                        if pushed < n {
                            self.stats
                                .drop_in(IngressDrop::RingFull, (n - pushed) as u64);
                        }
                    }
                    Backend::InProcRouter(r) => {
                        process_slots(
                            r.as_mut(),
                            &self.region,
                            v as u16,
                            &self.staged[q],
                            &mut self.inproc_stage,
                            &mut self.inproc_counters,
                        );
                    }
                    Backend::InProc(vr) => {
                        process_slots(
                            vr.as_mut(),
                            &self.region,
                            v as u16,
                            &self.staged[q],
                            &mut self.inproc_stage,
                            &mut self.inproc_counters,
                        );
                    }
                }
                self.staged[q].clear();
            }
            if given > 0 && self.backend.uses_rings() {
                self.kick(i);
            }
        }
        self.staged_n = 0;
        if !self.backend.uses_rings() {
            for v in 0..self.vnic_port.len() {
                let mut idx = [0u32; BURST];
                loop {
                    let staged = self.inproc_stage.vnic(v as u16);
                    let n = staged.len().min(BURST);
                    if n == 0 {
                        break;
                    }
                    idx[..n].copy_from_slice(&staged[..n]);
                    staged.drain(..n);
                    self.send(0, v as u16, &idx[..n], ports);
                }
            }
        }
        total
    }

    /// Count the first `n` frames staged for vNIC `v` of instance `i`,
    /// given to it.
    #[inline]
    fn count_rx(&self, v: usize, n: usize, i: usize) {
        if n == 0 {
            return;
        }
        let bytes: u64 = self.staged[i * self.vnic_port.len() + v][..n]
            .iter()
            .map(|&s| u64::from(self.region.meta(s).expect("staged valid").extent().1))
            .sum();
        self.stats.rx_packets.add(n as u64);
        self.stats.rx_bytes.add(bytes);
        if let Some(c) = self.stats.vnics.get(v) {
            c.rx_packets.add(n as u64);
            c.rx_bytes.add(bytes);
        }
        if let Some(c) = self.stats.instances.get(i) {
            c.rx_packets.add(n as u64);
        }
    }

    /// Ring instance `i`'s doorbell if it sleeps.
    #[inline]
    fn kick(&self, i: usize) {
        let Some(block) = self.region.instance(i as u16) else {
            return;
        };
        if needs_kick(&block.vr_sleeping)
            && let Some(b) = &self.inst[i].bell
        {
            b.ring();
            self.stats.kicks.add(1);
        }
    }

    /// Relay the control messages the instances wrote to each other
    /// (served before their data rings); wakes a sleeping receiver.
    /// Returns the messages taken (work, for the worker's back-off).
    /// Costs a look at one ring index per instance when there are none.
    #[inline]
    pub fn serve_ctrl(&mut self) -> usize {
        if !self.has_peers() {
            return 0;
        }
        let out = self.relay.relay(self.served_mask);
        let taken = out.relayed + out.dropped + out.violations;
        if taken != 0 {
            self.note_ctrl(out);
        }
        taken as usize
    }

    /// Whether two instances or more are served: a single one has no peer
    /// to talk to.
    #[inline]
    fn has_peers(&self) -> bool {
        self.served_mask & self.served_mask.wrapping_sub(1) != 0
    }

    #[cold]
    fn note_ctrl(&mut self, out: crate::relay::RelayOutcome) {
        self.stats.ctrl_relayed.add(out.relayed);
        self.stats.ctrl_dropped.add(out.dropped);
        for _ in 0..out.violations {
            self.stats.violation(Violation::CtrlMessage);
        }
        let mut woken = out.woken & self.served_mask;
        while woken != 0 {
            let i = woken.trailing_zeros() as usize;
            woken &= woken - 1;
            self.kick(i);
        }
    }

    /// Drain the tx rings of every instance and send what they hold.
    /// Returns frames handled.
    pub fn poll_tx(&mut self, ports: &mut [Box<dyn Port>]) -> usize {
        self.poll_tx_budget(ports, usize::MAX)
    }

    /// Send what the tx rings hold, up to `budget` frames (the worker's
    /// share for this VR in one round; what is left waits for the next).
    /// Returns frames handled.
    pub fn poll_tx_budget(&mut self, ports: &mut [Box<dyn Port>], budget: usize) -> usize {
        if !self.backend.uses_rings() || self.quarantined {
            return 0;
        }
        // Messages count as work done (they keep the worker awake), and
        // take from the round's budget as frames do.
        let mut done = self.serve_ctrl().min(budget);
        let mut idx = [0u32; BURST];
        let mut served = self.served_mask;
        while served != 0 {
            let i = served.trailing_zeros() as usize;
            served &= served - 1;
            for v in 0..self.inst[i].tx.len() {
                // Everything the ring holds (up to the budget), in bursts: a
                // ring left half full stalls its VR until the next round.
                loop {
                    let want = (budget - done).min(BURST);
                    if want == 0 {
                        return done;
                    }
                    let n = match self.inst[i].tx[v].pop(&mut idx[..want]) {
                        Ok(n) => n,
                        Err(
                            RingError::BadProducerIndex { .. } | RingError::BadConsumerIndex { .. },
                        ) => {
                            self.stats.violation(Violation::TxRingIndex);
                            break;
                        }
                    };
                    if n > 0 {
                        self.send(i as u16, v as u16, &idx[..n], ports);
                        done += n;
                    }
                    if n < want {
                        break;
                    }
                }
            }
        }
        done
    }

    /// Validate slots returned by `instance` on `vnic`'s tx ring, send the
    /// PROCESSED ones on the vNIC's port, free them all.
    fn send(&mut self, instance: u16, vnic: u16, idx: &[u32], ports: &mut [Box<dyn Port>]) {
        let holder = instance as u8 + 1;
        let mut frames: [&[u8]; BURST] = [&[]; BURST];
        let mut nf = 0;
        let mut take = [0u32; BURST];
        let mut nt = 0;
        let mut bytes = 0u64;
        // The VR wrote these slots' states and headers on its core.
        let prefetch = self.backend.uses_rings();
        for (i, &s) in idx.iter().enumerate() {
            if prefetch && let Some(&ahead) = idx.get(i + 4) {
                self.region.prefetch(ahead, self.headroom.into());
            }
            match self.owner.get(s as usize) {
                None => {
                    self.stats.violation(Violation::SlotIndex);
                    continue;
                }
                Some(&o) if o != holder => {
                    self.stats.violation(Violation::SlotNotOwned);
                    continue;
                }
                Some(_) => {}
            }
            self.owner[s as usize] = RETURNING;
            take[nt] = s;
            nt += 1;
            let meta = self
                .region
                .meta(s)
                .expect("index checked against owner table");
            match SlotState::from_raw(meta.state_raw()) {
                Some(SlotState::Processed) => {
                    let (off, len) = meta.extent();
                    if len < MIN_FRAME
                        || u32::from(off) + u32::from(len) > u32::from(self.slot_bytes)
                    {
                        self.stats.violation(Violation::Extent);
                        continue;
                    }
                    // SAFETY: we hold the slot by our own records (owner
                    // check above); the port only copies the bytes out, once.
                    if let Some(f) = unsafe { self.region.slot_bytes_at(s, off.into(), len.into()) }
                    {
                        frames[nf] = f;
                        nf += 1;
                        bytes += u64::from(len);
                    }
                }
                Some(SlotState::Dropped) => self.stats.vr_dropped.add(1),
                _ => self.stats.violation(Violation::SlotState),
            }
        }
        if nf > 0
            && let Some(tap) = self.tap.as_deref_mut()
            && tap.wants(vnic)
        {
            for (k, f) in frames[..nf].iter().enumerate() {
                if !tap.copy(Direction::Out, vnic, f) {
                    tap.refuse((nf - k - 1) as u64);
                    break;
                }
            }
            let refused = tap.end_burst();
            if refused > 0 {
                self.stats.capture_dropped.add(refused);
            }
        }
        if nf > 0 {
            // A vNIC whose port was removed (a VR draining after a config
            // change) has no port: its frames are counted as port drops.
            let sent = match ports.get_mut(self.vnic_port[usize::from(vnic)]) {
                Some(p) => p.tx_burst(&frames[..nf]),
                None => 0,
            };
            // Bytes of the frames sent (a port takes a prefix of the burst).
            let bytes = if sent == nf {
                bytes
            } else {
                frames[..sent].iter().map(|f| f.len() as u64).sum()
            };
            self.stats.tx_packets.add(sent as u64);
            self.stats.tx_bytes.add(bytes);
            self.stats.port_dropped.add((nf - sent) as u64);
            if self.recovering && sent > 0 {
                self.recovered();
            }
            if let Some(c) = self.stats.vnics.get(usize::from(vnic)) {
                c.tx_packets.add(sent as u64);
                c.tx_bytes.add(bytes);
            }
        }
        let i = usize::from(instance);
        for &s in &take[..nt] {
            self.release(s);
        }
        self.held[i] -= nt as u32;
        if let Some(c) = self.stats.instances.get(i) {
            c.returned.add(nt as u64);
        }
    }

    /// The first frame out after a restore.
    #[cold]
    fn recovered(&mut self) {
        self.recovering = false;
        let now = mono_ns();
        self.stats.last_recovered_mono_ns.set(now);
        self.stats
            .last_recovery_ns
            .set(now.saturating_sub(self.stats.last_exit_mono_ns.get()));
    }

    /// Put `slot` back on the free list; the caller takes it off its
    /// holder's count (once per batch).
    #[inline]
    fn release(&mut self, slot: u32) {
        self.owner[slot as usize] = FREE;
        self.region
            .meta(slot)
            .expect("valid index")
            .set(SlotState::Empty);
        self.free.push(slot);
    }

    /// Raise or clear the host's sleeping flag in every instance block.
    pub fn set_host_sleeping(&self, sleeping: bool) {
        for i in 0..self.inst.len() as u16 {
            if let Some(b) = self.region.instance(i) {
                if sleeping {
                    vrhost_shm::prepare_sleep(&b.host_sleeping);
                } else {
                    vrhost_shm::cancel_sleep(&b.host_sleeping);
                }
            }
        }
    }

    /// True if a tx ring has entries, or a control ring between instances
    /// (for the host's last look before sleep).
    pub fn tx_pending(&mut self) -> bool {
        if self.quarantined {
            return false;
        }
        let ctrl = self.has_peers() && self.relay.pending(self.served_mask);
        ctrl || self
            .inst
            .iter_mut()
            .filter(|i| i.served())
            .flat_map(|i| i.tx.iter_mut())
            .any(|c| c.ready().map(|n| n > 0).unwrap_or(false))
    }

    /// Apply the guards (quarantine, watchdog), then check the VR's
    /// processes: if one exited, take the VR out of the data path, reclaim
    /// every slot it held and reset its rings, and say why it went down.
    pub fn supervise(&mut self, now: Instant) -> Option<ExitEvent> {
        self.sample_load(now);
        if self.up && !self.quarantined {
            if let Some(n) = self.guard.quarantine_after
                && self
                    .stats
                    .violations_total()
                    .saturating_sub(self.violations_base)
                    >= n
            {
                self.quarantine();
            } else if let Some(d) = self.guard.watchdog {
                self.watchdog(now, d);
            }
        }
        self.reap()
    }

    /// Update the load estimates: the VR's arrival rate, and each
    /// instance's rx ring fill and capacity (told to the weighted policy).
    fn sample_load(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.load.at).as_secs_f64();
        if dt < 0.001 {
            return;
        }
        let a = 1.0 - (-dt / crate::stats::LOAD_TAU.as_secs_f64()).exp();
        let l = &mut self.load;
        l.at = now;
        let offered = self.stats.rx_packets.get() + self.stats.ingress_drops_total();
        let rate = offered.wrapping_sub(l.offered) as f64 / dt;
        l.offered = offered;
        l.arrival += a * (rate - l.arrival);
        self.stats.arrival_pps.set(l.arrival as u64);
        let vnics = self.vnic_port.len() as u16;
        let weighted = self.balancer.policy() == Policy::Weighted;
        let top = l.capacity.iter().copied().fold(0.0, f64::max);
        for (i, c) in self.stats.instances.iter().enumerate() {
            let held = self.held[i];
            c.held.set(u64::from(held));
            let returned = c.returned.get();
            let done = returned.wrapping_sub(l.returned[i]) as f64 / dt;
            l.returned[i] = returned;
            let busy = held >= BACKLOGGED && l.held[i] >= BACKLOGGED;
            l.held[i] = held;
            if !self.inst[i].served() {
                l.fill[i] = 0.0;
                continue;
            }
            // Relaxed reads of the VR's index: a load estimate.
            let fill: u32 = (0..vnics)
                .filter_map(|v| self.region.ring(i as u16, RingId::Rx(v)))
                .map(|r| r.occupancy())
                .sum();
            l.fill[i] += a * (f64::from(fill) - l.fill[i]);
            c.rx_fill_milli.set((l.fill[i] * 1000.0) as u64);
            if busy {
                l.capacity[i] += a * (done - l.capacity[i]);
                l.weight[i] = l.capacity[i];
                c.capacity_pps.set(l.capacity[i] as u64);
            } else if top > 0.0 {
                // Not busy: it can take more than it gets.
                l.weight[i] = (l.weight[i].max(done) * (1.0 + a)).min(2.0 * top);
            }
            if weighted && l.weight[i] > 0.0 {
                self.balancer.set_capacity(i as u16, l.weight[i]);
            }
        }
    }

    /// Check the VR's processes. A retired instance that has handed back
    /// everything is asked to stop, and reaped once it exits. An instance
    /// that exits by itself is taken out: its slots are reclaimed
    /// (counted), its rings reset, and the others go on; when no live
    /// instance is left, the VR goes down: everything is reclaimed and the
    /// event says why.
    pub fn reap(&mut self) -> Option<ExitEvent> {
        let Backend::Process(procs) = &mut self.backend else {
            return None;
        };
        let now = Instant::now();
        let mut gone: Vec<(usize, String)> = Vec::new();
        let mut retired: Vec<usize> = Vec::new();
        let mut changed = false;
        let mut k = 0;
        while k < procs.len() {
            let p = &mut procs[k];
            k += 1;
            if p.reaped {
                continue;
            }
            let i = usize::from(p.instance());
            let Some(inst) = self.inst.get_mut(i) else {
                continue;
            };
            if p.has_exited() {
                p.reaped = true;
                if inst.state == InstanceState::Stopping {
                    // A retirement completed: collect it, free its slot.
                    let mut p = procs.swap_remove(k - 1);
                    k -= 1;
                    p.stop();
                    retired.push(i);
                } else {
                    gone.push((i, p.exit_status()));
                }
                continue;
            }
            match inst.state {
                InstanceState::Draining if self.held[i] == 0 => {
                    p.ask_stop();
                    inst.state = InstanceState::Stopping;
                    inst.since = now;
                    changed = true;
                }
                // Stuck: its exit reclaims (and counts) what it held.
                InstanceState::Draining | InstanceState::Stopping
                    if now.duration_since(inst.since) >= STOP_GRACE =>
                {
                    p.kill();
                }
                _ => {}
            }
        }
        for &i in &retired {
            self.reclaim_instance(i);
        }
        if changed || !retired.is_empty() {
            self.rebalance();
        }
        if gone.is_empty() {
            return None;
        }
        let status = gone[0].1.clone();
        let left = self
            .inst
            .iter()
            .enumerate()
            .any(|(i, x)| x.state == InstanceState::Live && !gone.iter().any(|g| g.0 == i));
        if left {
            // The others go on: take this one out alone.
            for (i, why) in gone {
                tracing::warn!(vr = %self.name, instance = i, "instance exited ({why}); the others go on");
                self.stats.instance_exits.add(1);
                self.stats.rebalances.add(1);
                self.reclaim_instance(i);
                if let Backend::Process(procs) = &mut self.backend
                    && let Some(k) = procs.iter().position(|p| usize::from(p.instance()) == i)
                {
                    procs.swap_remove(k).stop();
                }
            }
            self.rebalance();
            return None;
        }
        // None left: the VR goes down. Retiring instances go with it.
        if let Backend::Process(procs) = &mut self.backend {
            for p in procs.iter_mut().filter(|p| !p.reaped) {
                p.kill();
                p.stop();
                p.reaped = true;
            }
        }
        self.stats.exits.add(1);
        self.stats.last_exit_mono_ns.set(mono_ns());
        self.stats.last_recovered_mono_ns.set(0);
        self.up = false;
        self.recovering = false;
        self.reclaim_all();
        Some(ExitEvent {
            vr: self.name.clone(),
            id: self.id,
            reason: self
                .kill_reason
                .take()
                .unwrap_or(DownReason::Exited(status)),
            at: Instant::now(),
        })
    }

    /// Stop feeding it for good and kill its processes (their exit is then
    /// reported by [`VrPath::reap`] as [`DownReason::Quarantined`]). A VR
    /// without processes of the host's (a test harness) is taken out and
    /// its slots reclaimed at once.
    pub fn quarantine(&mut self) {
        if self.quarantined {
            return;
        }
        self.quarantined = true;
        self.stats.quarantines.add(1);
        self.up = false;
        match &mut self.backend {
            Backend::Process(procs) => {
                self.kill_reason = Some(DownReason::Quarantined);
                procs.iter_mut().for_each(VrProcess::kill);
            }
            _ => self.reclaim_all(),
        }
    }

    /// Kill an instance whose rx rings hold frames while its poll loop
    /// has not moved for `limit` (the VR goes down if it was the last).
    fn watchdog(&mut self, now: Instant, limit: Duration) {
        if !matches!(self.backend, Backend::Process(_)) {
            return;
        }
        let vnics = self.region.layout().cfg.vnic_count;
        for i in 0..self.inst.len() {
            if !self.inst[i].served() {
                continue;
            }
            let Some(block) = self.region.instance(i as u16) else {
                continue;
            };
            // Relaxed: a liveness hint; a VR that fakes it only fools its
            // own watchdog.
            let beat = block.heartbeat.load(Ordering::Relaxed);
            let waiting = (0..vnics)
                .filter_map(|v| self.region.ring(i as u16, RingId::Rx(v)))
                .any(|r| r.occupancy() > 0);
            let inst = &mut self.inst[i];
            if beat != inst.wd_beat || !waiting {
                inst.wd_beat = beat;
                inst.wd_since = now;
            } else if now.duration_since(inst.wd_since) >= limit {
                inst.wd_since = now;
                self.stats.hangs.add(1);
                self.kill_reason = Some(DownReason::Hung);
                if let Backend::Process(procs) = &mut self.backend {
                    procs
                        .iter_mut()
                        .filter(|p| usize::from(p.instance()) == i)
                        .for_each(VrProcess::kill);
                }
            }
        }
    }

    /// Put new processes in place of ones that went down (a restart by the
    /// supervisor after an [`ExitEvent`]): it is fed again at once. Refused
    /// (the processes are handed back, for the caller to stop) if it is up,
    /// quarantined, or not run by processes.
    ///
    /// # Errors
    /// The processes, when refused.
    pub fn restore(
        &mut self,
        procs: Vec<VrProcess>,
        bells: Vec<Doorbell>,
    ) -> Result<(), Vec<VrProcess>> {
        let Backend::Process(old) = &mut self.backend else {
            return Err(procs);
        };
        if self.up || self.quarantined || old.iter().any(|p| !p.reaped) {
            return Err(procs);
        }
        // Exited already: `stop` only collects their status.
        for mut p in std::mem::replace(old, procs) {
            p.stop();
        }
        self.violations_base = self.stats.violations_total();
        self.kill_reason = None;
        self.recovering = true;
        self.stats.restarts.add(1);
        self.up = true;
        self.go_live(bells);
        Ok(())
    }

    /// Take back every slot the instances hold and reset all rings; no
    /// instance is fed until [`VrPath::restore`].
    fn reclaim_all(&mut self) {
        for i in 0..self.inst.len() {
            self.reclaim_instance(i);
        }
        self.rebalance();
    }

    /// Take back every slot instance `i` holds (staged ones included) and
    /// reset its rings: its process is gone. Its slot becomes vacant.
    fn reclaim_instance(&mut self, i: usize) {
        let vnics = self.vnic_port.len();
        for q in &mut self.staged[i * vnics..(i + 1) * vnics] {
            self.staged_n -= q.len();
            q.clear();
        }
        let holder = i as u8 + 1;
        let mut taken = 0;
        for s in 0..self.owner.len() as u32 {
            if self.owner[s as usize] == holder {
                self.release(s);
                taken += 1;
            }
        }
        self.held[i] -= taken as u32;
        self.stats.reclaimed.add(taken);
        let ring = |r| self.region.ring(i as u16, r).expect("in layout");
        for v in 0..self.vnic_port.len() as u16 {
            ring(RingId::Rx(v)).reset();
            ring(RingId::Tx(v)).reset();
        }
        ring(RingId::CtrlIn).reset();
        ring(RingId::CtrlOut).reset();
        self.inst[i] = Inst::new(&self.region, i as u16);
        self.relay.reset(i as u16);
    }

    /// Kill instance `i`'s process with SIGKILL (a crash, for tests and
    /// benchmarks); the exit is handled by the next [`VrPath::reap`].
    pub fn kill_instance(&mut self, i: u16) {
        if let Backend::Process(procs) = &mut self.backend {
            procs
                .iter_mut()
                .filter(|p| p.instance() == i)
                .for_each(VrProcess::kill);
        }
    }

    /// Kill the VR's processes with SIGKILL (a crash, for tests and soak
    /// runs); the exit is handled by the next [`VrPath::reap`].
    pub fn kill(&mut self) {
        if let Backend::Process(procs) = &mut self.backend {
            procs.iter_mut().for_each(VrProcess::kill);
        }
    }

    /// Stop the VR's processes (graceful, then SIGKILL) and reclaim.
    pub fn shutdown(&mut self) {
        if let Backend::Process(procs) = &mut self.backend {
            for p in procs.iter_mut() {
                p.stop();
            }
        }
        self.up = false;
        self.reclaim_all();
    }
}

impl Drop for VrPath {
    fn drop(&mut self) {
        if let Backend::Process(procs) = &mut self.backend {
            for p in procs.iter_mut() {
                p.stop();
            }
        }
    }
}
