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

use crate::capture::{Direction, Tap};
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

/// Rings of one instance, host side.
struct InstRings {
    rx: Vec<Producer>,
    tx: Vec<Consumer>,
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
    inst: Vec<InstRings>,
    /// Slots staged for each vNIC's rx ring during a round.
    staged: Vec<Vec<u32>>,
    /// Their number, over all vNICs.
    staged_n: usize,
    backend: Backend,
    /// Doorbells of the instances (rung when one sleeps and gets work).
    bells: Vec<Doorbell>,
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
    /// Watchdog: the heartbeat last seen, and since when it has not moved
    /// while frames waited.
    wd_beat: u64,
    wd_since: Instant,
    sched: Sched,
    bucket: Option<Bucket>,
    /// Rx ring entries and pool slots only control frames may take.
    ring_reserve: u32,
    pool_reserve: usize,
}

impl VrPath {
    /// Set up the host side of a VR over `region`, whose vNIC `v` sends on
    /// port `vnic_port[v]`. `bells` are the instances' doorbells (empty for
    /// in-process backends).
    pub fn new(
        name: &str,
        region: Region,
        vnic_port: Vec<usize>,
        backend: Backend,
        bells: Vec<Doorbell>,
    ) -> Self {
        let cfg = region.layout().cfg;
        let inst = (0..cfg.instance_count)
            .map(|i| InstRings {
                rx: (0..cfg.vnic_count)
                    .map(|v| region.ring(i, RingId::Rx(v)).expect("in layout").producer())
                    .collect(),
                tx: (0..cfg.vnic_count)
                    .map(|v| region.ring(i, RingId::Tx(v)).expect("in layout").consumer())
                    .collect(),
            })
            .collect();
        let up = match &backend {
            Backend::Process(p) => !p.is_empty(),
            _ => true,
        };
        Self {
            name: name.to_string(),
            headroom: cfg.headroom as u16,
            slot_bytes: cfg.slot_bytes as u16,
            free: (0..cfg.slot_count).rev().collect(),
            owner: vec![FREE; cfg.slot_count as usize],
            vnic_port,
            inst,
            staged: (0..cfg.vnic_count)
                .map(|_| Vec::with_capacity(STAGE_MAX))
                .collect(),
            staged_n: 0,
            inproc_stage: TxStage::new(cfg.vnic_count),
            inproc_counters: VrCounters::default(),
            backend,
            bells,
            region,
            up,
            stats: Arc::new(VrStats::with_vnics(usize::from(cfg.vnic_count))),
            tap: None,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            guard: Guard::default(),
            quarantined: false,
            kill_reason: None,
            violations_base: 0,
            recovering: false,
            wd_beat: 0,
            wd_since: Instant::now(),
            sched: Sched::default(),
            bucket: None,
            ring_reserve: control_reserve(cfg.ring_entries),
            pool_reserve: control_reserve(cfg.slot_count) as usize,
        }
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
                let p = procs.get(usize::from(i));
                InstanceInfo {
                    index: i,
                    pid: p.map(VrProcess::pid),
                    running: p.is_some_and(|p| !p.reaped) && self.up,
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
        for (i, &o) in self.owner.iter().enumerate() {
            if o == FREE && !seen[i] {
                return Err(format!("slot {i} neither free nor held"));
            }
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
        let Some(staged) = self.staged.get(v) else {
            return Err(IngressDrop::NoMatch);
        };
        if staged.len() >= STAGE_MAX {
            return Err(IngressDrop::RingFull);
        }
        // Asked at most once, and only within the reserve.
        let (mut class, mut is_control) = (Some(class), None);
        let mut control = || {
            *is_control.get_or_insert_with(|| class.take().is_some_and(|c| c() == Class::Control))
        };
        if self.backend.uses_rings() {
            let rx = &mut self.inst[0].rx[v];
            let need = staged.len() as u32 + self.ring_reserve;
            if need >= rx.free_cached() {
                match rx.free() {
                    // Within the reserve: control frames only.
                    Ok(room) if need >= room => {
                        if staged.len() as u32 >= room || !control() {
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
        self.owner[slot as usize] = 1; // instance 0
        self.staged[v].push(slot);
        self.staged_n += 1;
        // The frame as received, copied from the port's buffer (not from
        // the slot, which the VR can write at any time).
        if let Some(tap) = self.tap.as_deref_mut()
            && tap.wants(vnic)
            && !tap.copy(Direction::In, vnic, frame)
        {
            self.stats.capture_dropped.add(1);
        }
        Ok(())
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
            tap.end_burst();
        }
        let mut total = 0;
        for v in 0..self.staged.len() {
            if self.staged[v].is_empty() {
                continue;
            }
            let n = self.staged[v].len();
            total += n;
            let bytes: u64 = self.staged[v]
                .iter()
                .map(|&s| u64::from(self.region.meta(s).expect("staged valid").extent().1))
                .sum();
            self.stats.rx_packets.add(n as u64);
            self.stats.rx_bytes.add(bytes);
            if let Some(c) = self.stats.vnics.get(v) {
                c.rx_packets.add(n as u64);
                c.rx_bytes.add(bytes);
            }
            match &mut self.backend {
                Backend::Process(_) | Backend::External => {
                    let pushed = match self.inst[0].rx[v].push(&self.staged[v]) {
                        Ok(p) => p,
                        Err(_) => {
                            self.stats.violation(Violation::RxRingIndex);
                            0
                        }
                    };
                    for i in pushed..n {
                        let s = self.staged[v][i];
                        self.release(s);
                    }
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
                        &self.staged[v],
                        &mut self.inproc_stage,
                        &mut self.inproc_counters,
                    );
                }
                Backend::InProc(vr) => {
                    process_slots(
                        vr.as_mut(),
                        &self.region,
                        v as u16,
                        &self.staged[v],
                        &mut self.inproc_stage,
                        &mut self.inproc_counters,
                    );
                }
            }
            self.staged[v].clear();
        }
        self.staged_n = 0;
        if total == 0 {
            return 0;
        }
        if self.backend.uses_rings() {
            let block = self.region.instance(0).expect("instance 0 exists");
            if needs_kick(&block.vr_sleeping)
                && let Some(b) = self.bells.first()
            {
                b.ring();
                self.stats.kicks.add(1);
            }
        } else {
            for v in 0..self.staged.len() {
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
        let mut done = 0;
        let mut idx = [0u32; BURST];
        for i in 0..self.inst.len() {
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
            let mut refused = 0;
            for f in &frames[..nf] {
                refused += u64::from(!tap.copy(Direction::Out, vnic, f));
            }
            tap.end_burst();
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
        for &s in &take[..nt] {
            self.release(s);
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

    /// True if a tx ring has entries (for the host's last look before sleep).
    pub fn tx_pending(&mut self) -> bool {
        !self.quarantined
            && self
                .inst
                .iter_mut()
                .flat_map(|i| i.tx.iter_mut())
                .any(|c| c.ready().map(|n| n > 0).unwrap_or(false))
    }

    /// Apply the guards (quarantine, watchdog), then check the VR's
    /// processes: if one exited, take the VR out of the data path, reclaim
    /// every slot it held and reset its rings, and say why it went down.
    pub fn supervise(&mut self, now: Instant) -> Option<ExitEvent> {
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

    /// Check the VR's processes: if one exited, take the VR out of the data
    /// path, reclaim every slot it held and reset its rings, and say why.
    pub fn reap(&mut self) -> Option<ExitEvent> {
        let Backend::Process(procs) = &mut self.backend else {
            return None;
        };
        let mut status = None;
        for p in procs.iter_mut() {
            if !p.reaped && p.has_exited() {
                p.reaped = true;
                let s = p.exit_status();
                status.get_or_insert(s);
            }
        }
        let status = status?;
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

    /// Kill it if frames wait in instance 0's rx rings and its poll loop
    /// has not moved for `limit`.
    fn watchdog(&mut self, now: Instant, limit: Duration) {
        if !matches!(self.backend, Backend::Process(_)) {
            return;
        }
        let Some(block) = self.region.instance(0) else {
            return;
        };
        // Relaxed: a liveness hint; a VR that fakes it only fools its own
        // watchdog.
        let beat = block.heartbeat.load(Ordering::Relaxed);
        let vnics = self.region.layout().cfg.vnic_count;
        let waiting = (0..vnics)
            .filter_map(|v| self.region.ring(0, RingId::Rx(v)))
            .any(|r| r.occupancy() > 0);
        if beat != self.wd_beat || !waiting {
            self.wd_beat = beat;
            self.wd_since = now;
        } else if now.duration_since(self.wd_since) >= limit {
            self.stats.hangs.add(1);
            self.kill_reason = Some(DownReason::Hung);
            self.wd_since = now;
            if let Backend::Process(procs) = &mut self.backend {
                procs.iter_mut().for_each(VrProcess::kill);
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
        self.bells = bells;
        self.violations_base = self.stats.violations_total();
        self.kill_reason = None;
        self.wd_since = Instant::now();
        self.recovering = true;
        self.stats.restarts.add(1);
        self.up = true;
        Ok(())
    }

    /// Take back every slot an instance holds and reset all rings.
    fn reclaim_all(&mut self) {
        // Staged slots are owned by instance 0 and freed below; they must
        // not be published afterwards.
        self.staged.iter_mut().for_each(Vec::clear);
        self.staged_n = 0;
        let mut n = 0;
        for s in 0..self.owner.len() as u32 {
            if self.owner[s as usize] != FREE {
                self.release(s);
                n += 1;
            }
        }
        self.stats.reclaimed.add(n);
        let cfg = self.region.layout().cfg;
        for i in 0..cfg.instance_count {
            for v in 0..cfg.vnic_count {
                let rx = self.region.ring(i, RingId::Rx(v)).expect("in layout");
                let tx = self.region.ring(i, RingId::Tx(v)).expect("in layout");
                rx.reset();
                tx.reset();
                self.inst[usize::from(i)].rx[usize::from(v)] = rx.producer();
                self.inst[usize::from(i)].tx[usize::from(v)] = tx.consumer();
            }
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
