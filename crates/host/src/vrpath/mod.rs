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
//!
//! The parts, each with its unit tests (over a real region whose instances
//! the tests play, `testkit`):
//! - `ledger`: the host's record of who has each slot, and its transitions;
//! - `ingress`: admission, the copy into a slot, publishing to rx rings;
//! - `egress`: validating what comes back on tx rings, sending it, and
//!   relaying control messages between instances;
//! - `instances`: which instance slots are fed, draining or vacant;
//! - `load`: arrival rate, ring fill and capacity estimates;
//! - `guard`: reaping exits, the watchdog, quarantine, restore;
//! - `spec`: what a path is made of ([`PathSpec`]) and assembling it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vrhost_router::Router;
use vrhost_sdk::Vr;
use vrhost_sdk::runtime::{TxStage, VrCounters, process_slots};
use vrhost_shm::{Doorbell, Region};

use crate::balance::{Balancer, Policy};
use crate::capture::Tap;
use crate::relay::Relay;
use crate::spawn::VrProcess;
use crate::stats::VrStats;
use crate::tunnel::{Encap, Tunnel};

#[expect(
    unsafe_code,
    reason = "reads the bytes of a slot the VR handed back, under the slot protocol"
)]
mod egress;
mod grow;
mod guard;
mod ingress;
mod instances;
mod kick;
mod ledger;
#[expect(
    unsafe_code,
    reason = "a VR's slots become its dedicated port's UMEM, and a lent frame is read for its class"
)]
mod lent;
mod load;
mod spec;
mod stageq;
#[cfg(test)]
#[expect(
    unsafe_code,
    reason = "reads slot bytes out of a test region, as egress does"
)]
pub(crate) mod testkit;

pub use grow::{GrowStep, RETRY as GROW_RETRY};
pub use ingress::{LOOP_ENTRY_MAX, loop_share};
use instances::{Inst, SHARED, WdProbe};
pub use instances::{InstanceInfo, InstanceState, STOP_GRACE};
use kick::Kicks;
use ledger::SlotLedger;
pub use lent::{open_dedicated, open_dedicated_sharing};
use load::Load;
pub use spec::PathSpec;
use stageq::StageQ;

/// Slot indexes moved per ring operation.
pub const BURST: usize = 64;

/// Most slots staged for one vNIC before they must be published: the
/// worker flushes a VR once it holds [`BURST`] staged frames, so this
/// leaves room for one more port burst on top.
const STAGE_MAX: usize = 2 * BURST;
/// Shortest frame a VR may send (an Ethernet header).
pub const MIN_FRAME: u16 = 14;

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

/// Host side of one VR.
///
/// Its fields by how often the worker touches them, in this order:
/// - after every port burst, for every VR (whether the burst had frames
///   for it or not): `staged_n` and `served_mask` (the worker asks each
///   VR for its staged frames and serves its control rings), together at
///   the start so that a VR the burst skipped costs one cache line;
/// - per packet (ingress `stage_with`, egress `send`): `bucket`,
///   `vnic_port`, `staged`, `backend`, `inst`, `pool_reserve`,
///   `loop_floor`, `slots`, `region`, `tap` (a null check when there is
///   none), `stats`, `ring_reserve`, `solo`, `headroom`, `slot_bytes`,
///   `loop_vnics`, `up`; with several live instances also `inst_cap` and
///   `balancer`;
/// - per batch or round: `sched`, `relay` (only when two instances or more
///   are served), `inproc` (only for in-process backends, boxed: 300
///   bytes the process backends never touch), `quarantined`,
///   `recovering`;
/// - per tick, on supervision and setup: `cold` (`Cold`, boxed).
///
/// `repr(C)` keeps that order in memory (Rust's default layout reorders
/// fields freely, and spread the per-packet ones over all nine cache
/// lines): the per-burst and per-packet fields take the first 368 bytes
/// on 64-bit targets, the 8-byte aligned ones first so that no padding
/// Most vNICs that can be VLAN sub-interfaces (a config's vNICs).
pub const MAX_VLAN_VNICS: usize = 64;

/// falls between them.
#[repr(C)]
pub struct VrPath {
    // Per burst, every VR.
    /// Frames staged over all instances and vNICs, not yet published.
    staged_n: usize,
    /// Instances whose rings are served, one bit each.
    served_mask: u64,
    // Per packet.
    bucket: Option<Bucket>,
    /// Out port of each vNIC.
    vnic_port: Vec<usize>,
    /// Slots staged for each instance's vNIC rx rings during a round, at
    /// `instance * vnics + vnic`.
    staged: Box<[StageQ]>,
    backend: Backend,
    inst: Vec<Inst>,
    /// Pool slots only control frames may take (at most a burst).
    pool_reserve: u32,
    /// Free slots a frame of a loop's entry vNIC leaves (see
    /// [`VrPath::set_loop`]; 0: no loop).
    loop_floor: u32,
    /// Who has each slot: the host's record (see [`ledger`]).
    slots: SlotLedger,
    region: Region,
    /// The capture attached to this VR, if any (see [`crate::capture`]).
    tap: Option<Box<Tap>>,
    /// The way out of each vNIC that is a tunnel endpoint (`None`: no
    /// vNIC is; see [`crate::tunnel`]).
    encap: Option<Box<[Option<Encap>]>>,
    /// Each vNIC's VLAN (0: untagged), when one has a VLAN (a thin
    /// pointer: this struct's inline size is counted).
    vlans: Option<Box<[u16; MAX_VLAN_VNICS]>>,
    stats: Arc<VrStats>,
    /// Most slots one instance may hold: its share of the pool, so that a
    /// slow instance (or one that stopped) cannot take the slots its
    /// siblings need (several live instances only).
    inst_cap: u32,
    /// Rx ring entries only control frames may take (at most a burst).
    ring_reserve: u16,
    /// The only live instance, or [`SHARED`] when there are several (or
    /// none): the balancer is asked only then.
    solo: u16,
    headroom: u16,
    slot_bytes: u16,
    /// The vNICs below this one are a loop's entries (0: none).
    loop_vnics: u16,
    /// Whether it accepts packets.
    up: bool,
    /// No vNIC is a tunnel endpoint or a VLAN sub-interface: frames cross
    /// as they are (`encap` and `vlans` are `None`).
    plain_wire: bool,
    // Per packet with several live instances.
    /// Which live instance gets each frame (boxed: its tables are 4 KiB).
    balancer: Box<Balancer>,
    // Per batch or round.
    sched: Sched,
    /// Control messages between the instances.
    relay: Relay,
    /// In-process backends only: what the shared processing code needs.
    inproc: Box<InProc>,
    // Per tick, supervision, setup.
    cold: Box<Cold>,
    // Per round (small: at the end, in the padding).
    quarantined: bool,
    /// Restored after an exit, no frame sent yet.
    recovering: bool,
}

/// Staging and counters for the processing code an in-process backend
/// shares with the VR runtime (`process_slots`).
struct InProc {
    stage: TxStage,
    counters: VrCounters,
}

impl InProc {
    /// Run `vr` over `slots`, received on `vnic`, in place: what a VR
    /// process does with a batch from its rx ring.
    #[inline]
    fn process<V: Vr + ?Sized>(&mut self, vr: &mut V, region: &Region, vnic: usize, slots: &[u32]) {
        process_slots(
            vr,
            region,
            vnic as u16,
            slots,
            &mut self.stage,
            &mut self.counters,
        );
    }
}

/// The parts of a [`VrPath`] no packet touches: who it is, how it is
/// guarded and why it went down, and its load estimates (sampled per
/// tick).
struct Cold {
    name: String,
    id: u64,
    guard: Guard,
    /// Why the host killed it, for the exit that follows.
    kill_reason: Option<DownReason>,
    /// Violations counted before its processes were last started.
    violations_base: u64,
    load: Load,
    /// Its dedicated ports, in the order of their frames (see `lent`; per burst only for a
    /// VR with one: the ledger says so first).
    dedicated: Vec<lent::Dedicated>,
    /// Its pool's growth, when it starts small (see `grow`).
    growth: grow::Growth,
    /// Doorbells deferred for its sleeping instances (see `kick`; per
    /// burst only for an instance that sleeps).
    kicks: Kicks,
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
            up,
            bucket: None,
            solo: SHARED,
            vnic_port,
            staged: (0..usize::from(cfg.instance_count) * usize::from(cfg.vnic_count))
                .map(|_| StageQ::new())
                .collect(),
            staged_n: 0,
            backend,
            ring_reserve: control_reserve(cfg.ring_entries) as u16,
            pool_reserve: control_reserve(cfg.slot_count),
            loop_floor: 0,
            loop_vnics: 0,
            headroom: cfg.headroom as u16,
            slot_bytes: cfg.slot_bytes as u16,
            slots: SlotLedger::new(cfg.slot_count, inst.len()),
            tap: None,
            encap: None,
            vlans: None,
            plain_wire: true,
            stats: Arc::new(VrStats::with_shape(
                usize::from(cfg.vnic_count),
                usize::from(cfg.instance_count),
            )),
            balancer: Box::new(Balancer::new(Policy::default(), cfg.instance_count)),
            inst_cap: cfg.slot_count,
            served_mask: 0,
            quarantined: false,
            recovering: false,
            sched: Sched::default(),
            relay: Relay::new(&region),
            inproc: Box::new(InProc {
                stage: TxStage::new(cfg.vnic_count),
                counters: VrCounters::default(),
            }),
            cold: Box::new(Cold {
                name: name.to_string(),
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                guard: Guard::default(),
                kill_reason: None,
                violations_base: 0,
                load: Load::new(inst.len()),
                dedicated: Vec::new(),
                growth: grow::Growth::default(),
                kicks: Kicks::new(),
            }),
            inst,
            region,
        };
        path.stats.pool_usable.set(u64::from(cfg.slot_count));
        path.go_live(bells);
        path
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
        self.cold.guard = guard;
    }

    /// How the host guards it.
    pub fn guard(&self) -> Guard {
        self.cold.guard
    }

    /// A number no other `VrPath` of this process has.
    pub fn id(&self) -> u64 {
        self.cold.id
    }

    /// Whether it was quarantined (it stays down until replaced).
    pub fn is_quarantined(&self) -> bool {
        self.quarantined
    }

    /// VR name.
    pub fn name(&self) -> &str {
        &self.cold.name
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

    /// Check the slot accounting invariant: every slot is either on the free
    /// list (exactly once) or held by an instance, never both.
    ///
    /// # Errors
    /// What is wrong.
    pub fn check_slot_accounting(&self) -> Result<(), String> {
        self.slots.check()
    }

    /// Slots on the host's free list.
    pub fn free_slots(&self) -> usize {
        self.slots.free()
    }

    /// Slots in the pool.
    pub fn pool_slots(&self) -> usize {
        self.slots.pool()
    }

    /// True when the VR holds no slot (everything given to it came back).
    pub fn is_drained(&self) -> bool {
        self.slots.drained()
    }

    /// True when the worker has no reason to look at its rings: it holds
    /// no slot (a VR sends only in slots it was given, so its tx rings hold
    /// nothing the host would accept) and has no second instance whose
    /// control messages the host relays. Two field reads.
    #[inline]
    pub fn idle(&self) -> bool {
        self.is_drained() && !self.has_peers()
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
        for d in &mut self.cold.dedicated {
            d.port = ports[usize::from(d.vnic)];
        }
        self.vnic_port = ports;
    }

    /// Make the vNICs with a tunnel (`tunnels[v]`) tunnel endpoints: what
    /// they send is encapsulated. Missing entries, and `None`, are plain
    /// vNICs. A MAC learned by a tunnel that stays the same is kept.
    pub fn set_tunnels(&mut self, tunnels: &[Option<Tunnel>]) {
        let old = self.encap.take();
        let encap: Box<[Option<Encap>]> = (0..self.vnic_port.len())
            .map(|v| {
                let t = tunnels.get(v).copied().flatten()?;
                let kept = old.as_deref().and_then(|o| o.get(v).copied().flatten());
                Some(kept.filter(|e| *e.tunnel() == t).unwrap_or(Encap::new(t)))
            })
            .collect();
        self.encap = encap.iter().any(Option::is_some).then_some(encap);
        self.plain_wire = self.encap.is_none() && self.vlans.is_none();
    }

    /// Make the vNICs with a VLAN (`vlans[v]`) 802.1Q sub-interfaces of
    /// their port: frames reach the VR without their tag (a frame without
    /// that tag is a counted drop) and leave with it. Missing entries, and
    /// `None`, are untagged vNICs.
    ///
    /// # Panics
    /// A VLAN on a vNIC past [`MAX_VLAN_VNICS`] (a config has at most 64
    /// vNICs).
    pub fn set_vlans(&mut self, vlans: &[Option<u16>]) {
        let mut ids = Box::new([0u16; MAX_VLAN_VNICS]);
        for (v, id) in vlans.iter().enumerate().take(self.vnic_port.len()) {
            if let Some(id) = id {
                assert!(v < MAX_VLAN_VNICS, "a VLAN on vNIC {v}");
                ids[v] = *id;
            }
        }
        self.vlans = ids.iter().any(|&id| id != 0).then_some(ids);
        self.plain_wire = self.encap.is_none() && self.vlans.is_none();
    }

    /// The VLAN of each vNIC (`None`: untagged).
    pub fn vlans(&self) -> Vec<Option<u16>> {
        (0..self.vnic_port.len())
            .map(|v| self.vlans.as_deref()?.get(v).copied().filter(|&id| id != 0))
            .collect()
    }

    /// The tunnel of each vNIC (`None`: a plain vNIC).
    pub fn tunnels(&self) -> Vec<Option<Tunnel>> {
        (0..self.vnic_port.len())
            .map(|v| {
                let e = self.encap.as_deref()?.get(v)?.as_ref()?;
                Some(*e.tunnel())
            })
            .collect()
    }

    /// The peer MAC each tunnel vNIC sends to now (configured or learned).
    pub fn tunnel_peer_macs(&self) -> Vec<Option<[u8; 6]>> {
        (0..self.vnic_port.len())
            .map(|v| self.encap.as_deref()?.get(v)?.as_ref()?.peer_mac())
            .collect()
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

#[cfg(test)]
mod vlan_tests;
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::testkit::{Kit, frame};
    use super::*;
    use crate::stats::IngressDrop;

    #[test]
    fn the_token_bucket_refills_at_its_rate_up_to_its_depth() {
        let mut k = Kit::new(1, 1, 256, 256);
        k.vp.set_sched(Sched {
            rate_pps: Some(1000),
            rate_burst: 10,
            weight: 500,
            ..Sched::default()
        });
        assert_eq!(k.vp.sched().weight, 100, "weight clamped to 1..=100");
        let t0 = k.vp.bucket.as_ref().unwrap().last;
        let admit = |k: &mut Kit| {
            (0..100)
                .take_while(|&t| k.vp.stage(0, &frame(t), || Class::Data).is_ok())
                .count()
        };
        k.vp.refill(t0);
        assert_eq!(admit(&mut k), 10, "a full bucket");
        // 5 ms at 1000/s: 5 tokens.
        k.vp.refill(t0 + Duration::from_millis(5));
        assert_eq!(admit(&mut k), 5);
        // A long pause fills it to its depth, no more.
        k.vp.refill(t0 + Duration::from_secs(10));
        assert_eq!(admit(&mut k), 10);
        assert_eq!(
            k.vp.stage(0, &frame(0), || Class::Data),
            Err(IngressDrop::RateLimited)
        );
        // Lifting the limit admits everything again.
        k.vp.set_sched(Sched::default());
        assert_eq!(admit(&mut k), 100);
    }

    #[test]
    fn what_no_packet_touches_is_out_of_line() {
        let (path, cold) = (size_of::<VrPath>(), size_of::<Cold>());
        let inproc = size_of::<InProc>();
        let hot = std::mem::offset_of!(VrPath, balancer);
        let burst = std::mem::offset_of!(VrPath, served_mask) + size_of::<u64>();
        println!(
            "VrPath {path} bytes inline (per burst: the first {burst}; per packet: \
             the first {hot}), Cold {cold} and InProc {inproc} boxed"
        );
        // 1,088 bytes inline before the split, the per-packet fields
        // anywhere in them; 64-bit targets.
        assert!(path <= 9 * 64, "VrPath is {path} bytes");
        assert!(hot <= 6 * 64, "per-packet fields over {hot} bytes");
        assert_eq!(burst, 16, "what the worker reads of every VR per burst");
    }

    #[test]
    fn the_control_reserve_is_a_sixteenth_up_to_a_burst() {
        assert_eq!(control_reserve(8), 0);
        assert_eq!(control_reserve(256), 16);
        assert_eq!(control_reserve(4096), BURST as u32);
    }
}
