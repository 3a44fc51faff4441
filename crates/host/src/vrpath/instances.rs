//! A VR's instances as the host sees them: which instance slots of the
//! region are fed, draining, stopping or vacant, and adding and retiring
//! instances while the others forward (LVRM's VR instances).

use std::time::{Duration, Instant};

use vrhost_shm::{Consumer, Doorbell, Producer, Region, RingId};

use super::{BURST, Backend, VrPath};
use crate::balance::Policy;
use crate::spawn::VrProcess;

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
    /// The counters the VR SDK publishes (see `vrhost_proto::counter`).
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

/// [`VrPath`]'s `solo` when the balancer picks.
pub(super) const SHARED: u16 = u16::MAX;

/// How long a retired instance may take to exit once drained.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// One instance slot, host side.
pub(super) struct Inst {
    pub(super) rx: Vec<Producer>,
    pub(super) tx: Vec<Consumer>,
    /// Its doorbell (rung when it sleeps and gets work).
    pub(super) bell: Option<Doorbell>,
    pub(super) state: InstanceState,
    /// When it was asked to stop (`Stopping`) or began draining.
    pub(super) since: Instant,
    /// Watchdog: the heartbeat last seen, and since when it has not moved
    /// while frames waited.
    pub(super) wd_beat: u64,
    pub(super) wd_since: Instant,
    /// Watchdog: once a stall reaches a quarter of the limit, what its
    /// process was probed at then.
    pub(super) wd_probe: Option<WdProbe>,
}

/// The watchdog's first look at a stalled VR's process.
#[derive(Debug, Clone, Copy)]
pub(super) struct WdProbe {
    /// The CPU time its process had had ([`crate::cpu::sched_probe`];
    /// `None`: unreadable).
    pub(super) exec: Option<u64>,
    /// The stall at which to look again: the limit, then a quarter of it
    /// later each time the process is found starved (so a VR kept off
    /// its CPU costs the worker a probe each quarter limit, not each
    /// round).
    pub(super) next: std::time::Duration,
}

impl Inst {
    pub(super) fn new(region: &Region, i: u16) -> Self {
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
            wd_probe: None,
        }
    }

    /// Whether the host still serves its rings.
    pub(super) fn served(&self) -> bool {
        matches!(self.state, InstanceState::Live | InstanceState::Draining)
    }
}

impl VrPath {
    /// Make the backend's instances live, with their doorbells (see
    /// [`VrPath::new`]).
    pub(super) fn go_live(&mut self, bells: Vec<Doorbell>) {
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
    pub(super) fn rebalance(&mut self) {
        let live: Vec<u16> = (0..self.inst.len() as u16)
            .filter(|&i| self.inst[usize::from(i)].state == InstanceState::Live)
            .collect();
        self.balancer.set_active(&live);
        self.solo = match live[..] {
            [only] => only,
            _ => SHARED,
        };
        self.share_pool(live.len());
        self.served_mask = self
            .inst
            .iter()
            .enumerate()
            .filter(|(_, x)| x.served())
            .fold(0, |m, (i, _)| m | 1 << i);
    }

    /// Each of `live` instances may hold its share of the slots in use.
    pub(super) fn share_pool(&mut self, live: usize) {
        let pool = self.slots.usable();
        self.inst_cap = (pool / live.max(1) as u32).max(2 * BURST as u32).min(pool);
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
        let l = &mut self.cold.load;
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
}

#[cfg(test)]
mod tests {
    use vrhost_shm::SlotState;

    use super::super::Class;
    use super::super::testkit::{Kit, frame};
    use super::*;
    use crate::stats::IngressDrop;

    #[test]
    fn one_instance_holds_at_most_its_share_of_the_pool() {
        let mut k = Kit::new(1, 2, 512, 512);
        // One flow: every frame to the same instance.
        let f = frame(1);
        let mut n = 0;
        let why = loop {
            match k.vp.stage(0, &f, || Class::Data) {
                Ok(()) => n += 1,
                Err(e) => break e,
            }
            k.vp.flush_rx(&mut k.ports);
        };
        assert_eq!((n, why), (256, IngressDrop::RingFull), "half the pool");
        assert_eq!(k.vp.free_slots(), 256, "the rest kept for its sibling");
        k.vp.check_slot_accounting().unwrap();
    }

    #[test]
    fn a_retired_instance_is_served_until_it_has_handed_everything_back() {
        let mut k = Kit::new(1, 2, 64, 64);
        k.vp.set_balance(Policy::RoundRobin);
        k.give(0, &frame(0));
        k.give(0, &frame(1));
        let held = k.take(1, 0);
        assert_eq!(held.len(), 1);
        assert_eq!(k.vp.vacant_instance(), None);
        assert!(k.vp.retire_instance(1));
        assert!(k.vp.retiring());
        assert_eq!(k.vp.live_instances(), 1);
        assert!(!k.vp.retire_instance(0), "the last live instance stays");
        assert!(!k.vp.retire_instance(1), "retired already");
        // New frames go to instance 0 only ...
        k.give(0, &frame(2));
        assert!(k.take(1, 0).is_empty());
        // ... and what instance 1 holds still goes out.
        k.hand_back(1, 0, &held, SlotState::Processed);
        k.vp.poll_tx(&mut k.ports);
        assert_eq!(k.sent(0), vec![frame(1)]);
        assert_eq!(
            k.vp.instance_states()[..2],
            [InstanceState::Live, InstanceState::Draining]
        );
        k.vp.check_slot_accounting().unwrap();
    }

    #[test]
    fn instance_info_reports_ring_fill() {
        let mut k = Kit::new(2, 1, 64, 64);
        k.give(0, &frame(0));
        k.give(1, &frame(1));
        k.give(1, &frame(2));
        let info = k.vp.instance_info();
        assert_eq!(info.len(), 1);
        assert_eq!((info[0].rx_ring_fill, info[0].tx_ring_fill), (3, 0));
        assert_eq!(info[0].pid, None, "an external instance has no process");
    }
}
