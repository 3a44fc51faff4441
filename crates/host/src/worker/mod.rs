//! The host worker: one thread that moves frames between ports and VRs.
//!
//! Each round: an rx burst from every port, each frame classified and copied
//! into a slot of its VR (one copy, as in Europa), the slots published to the
//! VRs' rx rings in one store per ring; then every VR's tx rings drained,
//! validated and sent on the out ports. When nothing moves it spins, yields
//! (or naps: short sleeps on its doorbell alone, which batch the ports'
//! frames), then sleeps on its doorbell (which VRs ring only while it
//! sleeps or naps), the ports' descriptors and the VR processes' pidfds, so
//! an idle host costs no CPU and a VR exit is seen at once. With a pinned
//! worker, lightly loaded unpinned VRs may run on its core (see
//! `colocate`), where waking them is a local switch, and while the traffic
//! is light the worker and they follow it to the CPU it arrives on (see
//! `follow`). The loop and the
//! back-off are in `idle`.
//!
//! A round visits only the VRs with work (see `active`): those it staged
//! frames for, and those that hold slots (whose tx rings may hold frames)
//! or relay control messages between instances; the others are looked at
//! once per tick, when the VRs are supervised. So idle VRs cost the round
//! nothing, however many are configured.
//!
//! The VRs' tx rings are served as a scheduler in ODP's pull model would:
//! high-priority VRs first and without a budget, then the others, each up
//! to its weight's share of frames per round (a VR that sends more waits
//! for the next round, and its backlog pushes back to its own ingress).
//! Rate limits drop a VR's excess frames at ingress before any copy. The
//! worker's time is accounted per VR (`host_ns`). Control traffic (ARP,
//! routing protocols: [`vrhost_packet::FlowKey::is_control`]) comes first
//! at ingress: each VR's rx rings and pool keep room that data frames
//! cannot take.

use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use vrhost_io::Port;
use vrhost_proto::PollConfig;
use vrhost_shm::Doorbell;

use crate::capture::Tap;
use crate::classify::Classifier;
use crate::cluster::Dispatcher;
use crate::pool::GrowRequest;
use crate::spawn::VrProcess;
use crate::stats::HostStats;
use crate::vrpath::{BURST, ExitEvent, TX_QUANTUM, VrPath};

mod active;
mod colocate;
mod flush;
mod follow;
mod idle;
mod mailbox;
mod reconfig;
mod rx;

use active::RankSet;
use colocate::Colocate;
use follow::Follow;

pub use mailbox::{Job, Mailbox, MailboxError};
use reconfig::Draining;
pub use reconfig::{Keep, Reconfig};

/// Most ARP replies for tunnels' local addresses sent per rx burst (more
/// requests in one burst wait for the peer to ask again).
const ARP_REPLIES: usize = 4;

/// Most frames taken from one port in a round however many VRs are busy
/// (see [`PollConfig::round_per_vr`]).
const MAX_ROUND: usize = 8192;

/// How often a busy worker looks for exited VR processes.
const REAP_EVERY: Duration = Duration::from_millis(10);

/// Longest a removed VR is given to hand back the slots it holds before
/// it is stopped anyway.
pub const DRAIN_TIMEOUT: Duration = Duration::from_millis(500);

/// Why a capture could not be attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CaptureRefused {
    /// No VR of that name in the data path.
    #[error("no such VR in the data path")]
    NoVr,
    /// The VR already has a capture.
    #[error("the VR already has a capture")]
    Busy,
}

/// The host's data path worker.
pub struct Worker {
    ports: Vec<Box<dyn Port>>,
    vrs: Vec<VrPath>,
    draining: Vec<Draining>,
    drained: Vec<VrPath>,
    mailbox: Arc<Mailbox>,
    classifier: Classifier,
    bell: Doorbell,
    stats: Arc<HostStats>,
    poll: PollConfig,
    rx_burst: usize,
    rx_round: usize,
    last_reap: Instant,
    /// Where VRs that went down are reported (a supervisor restarts them).
    exits: Option<mpsc::Sender<ExitEvent>>,
    /// Where steps of pools that grow are asked (see [`crate::pool`]).
    /// Without it a step is taken at once, its pages the daemon's.
    grows: Option<mpsc::Sender<GrowRequest>>,
    /// VR indexes in tx service order (high priority first).
    order: Vec<usize>,
    /// Each VR's position in `order`.
    rank: Vec<usize>,
    /// The VRs the tx phase visits, by rank: every VR that may have work
    /// (see `active`).
    active: RankSet,
    /// The VRs with staged frames (each once), flushed at the end of the
    /// rx phase or once they hold a burst.
    staging: Vec<usize>,
    /// A VR was handed its `BURST`th staged frame in this rx phase: the
    /// staging list has a VR to flush before the round's end.
    burst_staged: bool,
    /// The last tx phase met a VR with two instances or more (whose
    /// control messages the rx phase relays between bursts); true until
    /// the first tx phase.
    peers: bool,
    /// VRs handed frames in the last rx phase that moved any (see
    /// [`PollConfig::round_per_vr`]).
    busy_vrs: usize,
    /// VRs with a rate limit (their buckets are refilled each round).
    limited: Vec<usize>,
    /// Frames each VR moved in the current phase of a round (for time
    /// accounting), and the VRs whose count is not 0.
    flushed: Vec<usize>,
    moved_by: Vec<usize>,
    /// A cluster dispatcher's data path: the ports it owns are its.
    dispatch: Option<Box<Dispatcher>>,
    /// Per port: the VR it is dedicated to, whose pool is its UMEM (see
    /// `VrPath::set_dedicated`): its frames go to that VR with no copy.
    lent_to: Vec<Option<usize>>,
    /// Lightly loaded VRs on the worker's core (with a pinned worker and
    /// [`PollConfig::colocate_pps`]).
    colocate: Option<Colocate>,
    /// A port holds a batch (see `flush`), since the round at each entry.
    tx_held: bool,
    held_since: Vec<Option<Instant>>,
    /// Where the worker's light traffic arrives, with co-location and
    /// [`PollConfig::follow_rx`] (see `follow`).
    follow: Option<Follow>,
}

impl Worker {
    /// Hand the ports `d` owns (remote VRs' ports and the underlay) to
    /// the cluster dispatcher `d`.
    pub fn set_dispatcher(&mut self, d: Dispatcher) {
        self.dispatch = Some(Box::new(d));
    }

    /// The cluster dispatcher, if any.
    pub fn dispatcher(&self) -> Option<&Dispatcher> {
        self.dispatch.as_deref()
    }

    /// A worker over `ports`, classifying with `classifier`.
    ///
    /// # Errors
    /// The OS error if its doorbell cannot be created.
    pub fn new(
        ports: Vec<Box<dyn Port>>,
        classifier: Classifier,
        poll: PollConfig,
    ) -> std::io::Result<Self> {
        let bell = Doorbell::new()?;
        let mailbox = Arc::new(Mailbox::new(Doorbell::from_fd(
            bell.fd().try_clone_to_owned()?,
        )));
        Ok(Self {
            ports,
            vrs: Vec::new(),
            draining: Vec::new(),
            drained: Vec::new(),
            mailbox,
            classifier,
            bell,
            stats: Arc::new(HostStats::default()),
            poll,
            rx_burst: 32,
            rx_round: 256,
            last_reap: Instant::now(),
            exits: None,
            grows: None,
            order: Vec::new(),
            rank: Vec::new(),
            active: RankSet::default(),
            staging: Vec::new(),
            burst_staged: false,
            peers: true,
            busy_vrs: 0,
            limited: Vec::new(),
            flushed: Vec::new(),
            moved_by: Vec::new(),
            dispatch: None,
            lent_to: Vec::new(),
            colocate: None,
            tx_held: false,
            held_since: Vec::new(),
            follow: None,
        })
    }

    /// The worker runs pinned to `cpu`: with [`PollConfig::colocate_pps`],
    /// unpinned VRs offered less than that are moved onto it (see
    /// `colocate`), and with [`PollConfig::follow_rx`] the worker and they
    /// follow light traffic to the CPU it arrives on (see `follow`).
    pub fn set_cpu(&mut self, cpu: usize) {
        self.colocate =
            (self.poll.colocate_pps > 0).then(|| Colocate::new(cpu, self.poll.colocate_pps));
        self.follow = (self.colocate.is_some() && self.poll.follow_rx).then(|| Follow::new(cpu));
    }

    /// The doorbell VRs ring to wake this worker (passed to their processes).
    pub fn bell(&self) -> &Doorbell {
        &self.bell
    }

    /// The mailbox other threads use to reach this worker while it runs.
    pub fn mailbox(&self) -> Arc<Mailbox> {
        self.mailbox.clone()
    }

    /// Report VRs of the data path that go down (exit, crash, hang,
    /// quarantine) on `tx`, for a supervisor to restart them with
    /// [`Worker::restore_vr`]. Without it they stay down.
    pub fn set_exit_notify(&mut self, tx: mpsc::Sender<ExitEvent>) {
        self.exits = Some(tx);
    }

    /// Ask the steps of the VRs' pools that grow on `tx` (see
    /// [`crate::pool`]), for a grower to populate in each VR's memory
    /// cgroup and answer with [`Worker::pool_grown`].
    pub fn set_grow_notify(&mut self, tx: mpsc::Sender<GrowRequest>) {
        self.grows = Some(tx);
    }

    /// The answer to a [`GrowRequest`] of the VR whose [`VrPath::id`] is
    /// `id`: its step to `to` slots is populated (`ok`) or refused. False
    /// if the VR is gone.
    pub fn pool_grown(&mut self, id: u64, to: u32, ok: bool) -> bool {
        let Some(vr) = self.vrs.iter_mut().find(|v| v.id() == id) else {
            return false;
        };
        match ok {
            true => vr.grow_pool(to),
            false => vr.grow_refused(Instant::now()),
        }
        true
    }

    /// Ask for the next step of each VR's pool that wants one (see
    /// [`VrPath::growth_wanted`]); taken at once without a grower, or for
    /// a VR with no process of its own.
    fn ask_growth(&mut self, now: Instant) {
        for vr in &mut self.vrs {
            let Some(step) = vr.growth_wanted(now) else {
                continue;
            };
            let asked = self.grows.as_ref().and_then(|tx| {
                let p = vr.processes().iter().find(|p| !p.reaped)?;
                let region = vr.region().fd().try_clone_to_owned().ok()?;
                let req = GrowRequest {
                    vr_id: vr.id(),
                    vr: vr.name().to_string(),
                    step,
                    region,
                    cgroups: p.cgroups().to_vec(),
                };
                tx.send(req).ok()
            });
            if asked.is_none() {
                vr.grow_pool(step.to);
            }
        }
    }

    /// Give the VR whose [`VrPath::id`] is `id` new processes after it
    /// went down (see [`VrPath::restore`]).
    ///
    /// # Errors
    /// The processes, for the caller to stop, if that VR is no longer in
    /// the data path (removed or replaced meanwhile) or refuses them.
    pub fn restore_vr(
        &mut self,
        id: u64,
        procs: Vec<VrProcess>,
        bells: Vec<Doorbell>,
    ) -> Result<(), Vec<VrProcess>> {
        // The next round looks at every VR (the restored one included).
        self.active.fill();
        match self.vrs.iter_mut().find(|v| v.id() == id) {
            Some(v) => v.restore(procs, bells),
            None => Err(procs),
        }
    }

    /// Recompute the service order after VRs' [`crate::Sched`] changed
    /// (done by the worker itself when VRs are added or replaced).
    pub fn resched(&mut self) {
        // Ports may change: no batch stays held across it.
        self.flush_held();
        self.held_since = vec![None; self.ports.len()];
        let n = self.vrs.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| !self.vrs[i].sched().high_priority);
        self.rank = vec![0; n];
        for (r, &i) in order.iter().enumerate() {
            self.rank[i] = r;
        }
        self.order = order;
        self.active = RankSet::full(n);
        // Called between rounds: nothing is staged. Room for every VR, so
        // that a round never allocates.
        self.staging = Vec::with_capacity(n);
        self.moved_by = Vec::with_capacity(n);
        self.limited = (0..n)
            .filter(|&i| self.vrs[i].sched().rate_pps.is_some())
            .collect();
        self.flushed = vec![0; n];
        self.lent_to = (0..self.ports.len())
            .map(|p| {
                self.vrs
                    .iter()
                    .position(|v| v.dedicated_ports().any(|q| q == p))
            })
            .collect();
        let wait = Duration::from_micros(self.poll.kick_wait_us.into());
        for v in &mut self.vrs {
            v.set_kick_batch(self.poll.kick_batch, wait);
        }
    }

    /// Frames taken from a port per burst (1..=64, default 32).
    pub fn set_rx_burst(&mut self, n: usize) {
        self.rx_burst = n.clamp(1, BURST);
    }

    /// Frames taken from one port per round, in bursts (default 256).
    pub fn set_rx_round(&mut self, n: usize) {
        self.rx_round = n.max(1);
    }

    /// Put `port` in place of port `i`, returning the one it replaces: a
    /// port opened after the worker, such as a dedicated port, whose UMEM
    /// is the pool of a VR started for this worker
    /// ([`crate::open_dedicated`]). Between rounds, before its VR is added.
    ///
    /// # Panics
    /// If there is no port `i`.
    pub fn set_port(&mut self, i: usize, port: Box<dyn Port>) -> Box<dyn Port> {
        self.flush_held();
        let old = std::mem::replace(&mut self.ports[i], port);
        self.resched();
        old
    }

    /// Add a VR; returns its index (the classifier's VR number).
    pub fn add_vr(&mut self, vr: VrPath) -> usize {
        self.vrs.push(vr);
        self.resched();
        self.vrs.len() - 1
    }

    /// Attach a capture tap to the VR named `vr` (one per VR). On refusal
    /// the tap is handed back, for the caller to drop off this thread.
    ///
    /// # Errors
    /// [`CaptureRefused::NoVr`] if no VR of that name is in the data path
    /// (one being drained after a change is not), [`CaptureRefused::Busy`]
    /// if it already has a capture.
    pub fn attach_capture(
        &mut self,
        vr: &str,
        tap: Box<Tap>,
    ) -> Result<(), (CaptureRefused, Box<Tap>)> {
        let Some(path) = self.vrs.iter_mut().find(|v| v.name() == vr) else {
            return Err((CaptureRefused::NoVr, tap));
        };
        if path.tap().is_some() {
            return Err((CaptureRefused::Busy, tap));
        }
        path.set_tap(Some(tap));
        Ok(())
    }

    /// Detach the capture numbered `id` from the VR named `vr` and return
    /// it (for the caller to drop off this thread); `None` if that VR has
    /// no such capture (it was restarted or removed: its tap went with it).
    pub fn detach_capture(&mut self, vr: &str, id: u64) -> Option<Box<Tap>> {
        let path = self
            .vrs
            .iter_mut()
            .chain(self.draining.iter_mut().map(|d| &mut d.vr))
            .find(|v| v.name() == vr && v.tap().is_some_and(|t| t.id() == id))?;
        path.set_tap(None)
    }

    /// Replace the classifier.
    pub fn set_classifier(&mut self, c: Classifier) {
        self.classifier = c;
    }

    /// The VRs.
    pub fn vrs(&self) -> &[VrPath] {
        &self.vrs
    }

    /// The VRs, mutable (tests, shutdown, jobs). The next round looks at
    /// every VR: a change (an instance added) may give one work.
    pub fn vrs_mut(&mut self) -> &mut [VrPath] {
        self.active.fill();
        &mut self.vrs
    }

    /// The ports.
    pub fn ports(&self) -> &[Box<dyn Port>] {
        &self.ports
    }

    /// Host counters.
    pub fn stats(&self) -> &Arc<HostStats> {
        &self.stats
    }

    /// One round over all ports and the VRs with work: up to the round
    /// budget of frames from each port, in bursts, each burst handed to the
    /// VRs at once; then the tx rings of every VR that may have sent
    /// something, once. Returns frames moved.
    ///
    /// Looking at a tx ring costs a cache miss when its VR has written it
    /// (its producer index lives on the VR's core), whatever it holds; with
    /// many busy VRs that cost, paid per round, is what a larger round
    /// amortizes. Idle VRs are not looked at (see `active`).
    ///
    /// With [`PollConfig::tx_batch`], a port's batch may be held at the
    /// round's end (see `flush`): a later round sends it (once no VR holds
    /// a frame, or after `tx_wait_us`), and [`Worker::run`] before it
    /// yields or sleeps.
    pub fn poll_once(&mut self) -> usize {
        self.stats.rounds.add(1);
        let mut moved = 0;
        if self.order.len() != self.vrs.len() || self.lent_to.len() != self.ports.len() {
            self.resched();
        }
        // One clock reading for the rx phase and one for the tx phase: each
        // phase's time is charged to the VRs whose frames moved in it, by
        // frames (an empty look at a port or a ring is charged to the next
        // phase with work).
        let mut mark = Instant::now();
        for &i in &self.limited {
            self.vrs[i].refill(mark);
        }
        let round = mark;
        // Whether a port had more than the round took (its budget spent, or
        // a VR full): the worker is saturated.
        let mut saturated = false;
        // Each busy VR gets about `round_per_vr` frames a visit: a visit
        // costs the same lines however many frames it carries.
        let per_vr = self.busy_vrs * self.poll.round_per_vr as usize;
        let round_budget = self.rx_round.max(per_vr.min(MAX_ROUND));
        for p in 0..self.ports.len() {
            let mut budget = round_budget;
            while budget > 0 {
                let want = budget.min(self.rx_burst);
                if let Some(d) = self.dispatch.as_deref_mut()
                    && d.owns(p)
                {
                    let n = d.rx_burst(p, &mut self.ports, want);
                    self.stats.rx_packets.add(n as u64);
                    moved += n;
                    budget -= n;
                    if n < want {
                        break;
                    }
                    continue;
                }
                let (n, full) = match self.lent_to[p] {
                    Some(vr) => self.rx_lent_to_vr(p, vr, want),
                    None => self.rx_burst_to_vrs(p, want),
                };
                if n == 0 {
                    saturated |= full;
                    break;
                }
                moved += n;
                budget -= n;
                // A VR is handed a full burst at once; what is left is
                // handed over at the end of the rx phase. With many VRs a
                // port burst holds a few frames of each: publishing each
                // burst would pay a ring's cache-line transfer (and an
                // in-process VR's call) for every few frames. The staging
                // list is walked only when a VR has a full burst: with
                // 100 VRs it holds about as many entries as a round has
                // frames.
                if std::mem::take(&mut self.burst_staged) {
                    self.flush_staged(BURST);
                }
                // Control messages between a VR's instances go before
                // data, and a round of a loaded port is long (a VR with
                // peers is always in the active set). Walked only when
                // the last tx phase met a VR with peers: otherwise every
                // busy VR's struct would be read after every burst.
                if self.peers {
                    let mut r = 0;
                    while let Some(at) = self.active.next_from(r) {
                        r = at + 1;
                        let _ = self.vrs[self.order[at]].serve_ctrl();
                    }
                }
                // A VR's ring or pool was full: serve the tx rings (which
                // frees slots) before taking more, rather than spend the
                // round taking frames only to drop them (receive livelock).
                if n < want || full {
                    saturated |= full;
                    break;
                }
            }
            saturated |= budget == 0;
        }
        if moved > 0 {
            self.flush_staged(1);
            self.busy_vrs = self.moved_by.len();
            // The rx phase's time, shared by the VRs its frames went to.
            let now = Instant::now();
            let per_frame = now.duration_since(mark).as_nanos() as u64 / moved as u64;
            mark = now;
            self.charge(per_frame);
        }
        // Doorbells deferred for a batch (`kick_batch`): a round that
        // emptied the ports is not saturated, and waiting would not fill
        // the batches, so they ring now; otherwise those whose first frame
        // has waited `kick_wait_us`.
        let kick_due = saturated.then_some(round);
        let moved_tx = self.tx_phase(kick_due);
        if moved_tx > 0 {
            // The tx phase's time, shared by the indexes each VR handed back
            // (valid or not).
            let per_frame = mark.elapsed().as_nanos() as u64 / moved_tx as u64;
            self.charge(per_frame);
            moved += moved_tx;
        } else {
            // Nothing to charge: forget who moved nothing.
            self.moved_by.clear();
        }
        if !self.draining.is_empty() {
            moved += self.poll_draining();
        }
        // One flush per port per round that sent, or a batch held for
        // more (see `flush`).
        self.flush_ports(moved, saturated, round);
        // The round's start is recent enough to time the reaping by.
        if round.duration_since(self.last_reap) >= REAP_EVERY {
            self.reap();
        }
        moved
    }

    /// The tx phase: the VRs that may have sent something, in service
    /// order; one found with nothing held (and no peers) leaves the set.
    /// Rings the doorbells deferred for a batch that are due by `kick_due`
    /// (`None`: all). Returns the indexes handed back.
    #[inline]
    fn tx_phase(&mut self, kick_due: Option<Instant>) -> usize {
        let mut moved_tx = 0;
        let mut peers = false;
        let mut r = 0;
        while let Some(at) = self.active.next_from(r) {
            r = at + 1;
            let i = self.order[at];
            let vr = &mut self.vrs[i];
            let s = vr.sched();
            let budget = if s.high_priority {
                usize::MAX
            } else {
                s.weight as usize * TX_QUANTUM
            };
            // Before its tx rings: the instance wakes while they are served.
            if vr.kicks_deferred() {
                vr.ring_deferred(kick_due);
            }
            let n = vr.poll_tx_budget(&mut self.ports, budget);
            peers |= vr.has_peers();
            if vr.idle() {
                self.active.remove(at);
            }
            self.note_moved(i, n);
            moved_tx += n;
        }
        // Every VR with peers is in the set: this walk saw them all.
        self.peers = peers;
        moved_tx
    }

    /// Publish the staged frames of every VR that holds at least `min` of
    /// them (1: all); a VR handed frames is visited by the tx phase.
    #[inline]
    fn flush_staged(&mut self, min: usize) {
        let mut j = 0;
        while j < self.staging.len() {
            let i = self.staging[j];
            let vr = &mut self.vrs[i];
            // (One with none left is dropped from the list all the same.)
            let staged = vr.staged();
            if staged > 0 && staged < min {
                j += 1;
                continue;
            }
            let n = vr.flush_rx(&mut self.ports);
            self.staging.swap_remove(j);
            self.active.insert(self.rank[i]);
            self.note_moved(i, n);
        }
    }

    /// VR `i` moved `n` frames in this phase.
    #[inline]
    fn note_moved(&mut self, i: usize, n: usize) {
        if n > 0 {
            if self.flushed[i] == 0 {
                self.moved_by.push(i);
            }
            self.flushed[i] += n;
        }
    }

    /// Charge `per_frame` ns for each frame the VRs moved in this phase.
    #[inline]
    fn charge(&mut self, per_frame: u64) {
        for i in self.moved_by.drain(..) {
            let k = std::mem::take(&mut self.flushed[i]);
            self.vrs[i].stats().host_ns.add(per_frame * k as u64);
        }
    }

    /// Run the jobs other threads posted.
    fn run_jobs(&mut self) {
        for job in self.mailbox.take() {
            job(self);
        }
        // A job may have given a VR instances (peers) or processes: the
        // next round looks at every VR.
        self.active.fill();
    }

    /// Apply the VRs' guards and handle exited VR processes (reported to
    /// the supervisor, if any); returns how many VRs went down. The next
    /// round then looks at every VR's rings (the sweep: see `active`).
    pub fn reap(&mut self) -> usize {
        let exits = self.any_process_exited();
        self.reap_seen(exits)
    }

    /// [`Worker::reap`] when whether a VR process may have exited is known
    /// (`exits`): a sleep that watched every pidfd and timed out asks
    /// none of them again.
    fn reap_seen(&mut self, exits: bool) -> usize {
        let now = Instant::now();
        self.last_reap = now;
        self.active.fill();
        let mut down = 0;
        for vr in &mut self.vrs {
            if let Some(ev) = vr.supervise_seen(now, exits) {
                down += 1;
                if let Some(tx) = &self.exits {
                    // The supervisor may be gone (shutting down): the VR
                    // then stays down, as without one.
                    let _ = tx.send(ev);
                }
            }
        }
        self.ask_growth(now);
        self.follow_home();
        if let Some(c) = &mut self.colocate {
            c.begin();
            for vr in &self.vrs {
                let n = c.place(vr.processes(), vr.stats().arrival_pps.get());
                self.stats.colocations.add(n);
            }
            c.end();
        }
        down
    }

    /// Whether any VR process may have exited: one `poll` of every live
    /// pidfd, rather than one system call per process (with 100 VRs those
    /// were 5% of a busy worker's time, sweeping every 10 ms). An error
    /// answers yes: each process is then asked.
    fn any_process_exited(&self) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut fds: Vec<PollFd<'_>> = self
            .vrs
            .iter()
            .flat_map(|v| v.processes())
            .filter(|p| !p.reaped)
            .map(|p| PollFd::from_borrowed_fd(p.pidfd(), PollFlags::IN))
            .collect();
        if fds.is_empty() {
            return false;
        }
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        !matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(0))
    }
}

#[cfg(test)]
mod flush_tests;
#[cfg(test)]
mod tests;
