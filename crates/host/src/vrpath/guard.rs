//! Guarding a VR as a whole: its processes reaped when they exit (one
//! instance out while others go on, or the VR down with every slot
//! reclaimed), the watchdog, quarantine, and restoring it with new
//! processes.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use vrhost_shm::{Doorbell, RingId, SlotState};

use super::{Backend, DownReason, ExitEvent, Inst, InstanceState, STOP_GRACE, VrPath, WdProbe};
use crate::spawn::VrProcess;
use crate::stats::mono_ns;

impl VrPath {
    /// Apply the guards (quarantine, watchdog), then check the VR's
    /// processes: if one exited, take the VR out of the data path, reclaim
    /// every slot it held and reset its rings, and say why it went down.
    pub fn supervise(&mut self, now: Instant) -> Option<ExitEvent> {
        self.supervise_seen(now, true)
    }

    /// As [`VrPath::supervise`], told whether any VR process may have
    /// exited (the worker asks every pidfd at once, in one system call):
    /// with `exits` false no process of this VR is asked.
    pub fn supervise_seen(&mut self, now: Instant, exits: bool) -> Option<ExitEvent> {
        self.sample_load(now);
        if self.up && !self.quarantined {
            if let Some(n) = self.cold.guard.quarantine_after
                && self
                    .stats
                    .violations_total()
                    .saturating_sub(self.cold.violations_base)
                    >= n
            {
                self.quarantine();
            } else if let Some(d) = self.cold.guard.watchdog {
                self.watchdog(now, d);
            }
        }
        self.reap_seen(exits)
    }

    /// Check the VR's processes. A retired instance that has handed back
    /// everything is asked to stop, and reaped once it exits. An instance
    /// that exits by itself is taken out: its slots are reclaimed
    /// (counted), its rings reset, and the others go on; when no live
    /// instance is left, the VR goes down: everything is reclaimed and the
    /// event says why.
    pub fn reap(&mut self) -> Option<ExitEvent> {
        self.reap_seen(true)
    }

    /// [`VrPath::reap`]; its processes are asked whether they exited only
    /// if `exits`.
    fn reap_seen(&mut self, exits: bool) -> Option<ExitEvent> {
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
            if exits && p.has_exited() {
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
                InstanceState::Draining if self.slots.held()[i] == 0 => {
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
                tracing::warn!(vr = %self.cold.name, instance = i, "instance exited ({why}); the others go on");
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
            vr: self.cold.name.clone(),
            id: self.cold.id,
            reason: self
                .cold
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
                self.cold.kill_reason = Some(DownReason::Quarantined);
                procs.iter_mut().for_each(VrProcess::kill);
            }
            _ => self.reclaim_all(),
        }
    }

    /// Kill an instance whose rx rings hold frames while its poll loop
    /// has not moved for `limit` (the VR goes down if it was the last),
    /// unless it was starved rather than stuck: a process that is runnable
    /// but had less than three quarters of `limit` of CPU time since the
    /// stall reached a quarter of it was kept off its CPU (other tasks on
    /// its core, the hypervisor's steal), and killing it would lose the
    /// frames in its rings for the machine's sake. It is watched on (its
    /// process looked at again each quarter of `limit`), and killed once
    /// it has had that CPU time without a beat. A process that
    /// is not runnable (stopped, blocked) is killed at `limit`. A VR that
    /// keeps up costs no look at its process.
    pub(super) fn watchdog(&mut self, now: Instant, limit: Duration) {
        let Backend::Process(procs) = &mut self.backend else {
            return;
        };
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
                inst.wd_probe = None;
                continue;
            }
            let stalled = now.duration_since(inst.wd_since);
            if stalled < limit / 4 {
                continue;
            }
            let mut mine = procs
                .iter_mut()
                .filter(|p| usize::from(p.instance()) == i)
                .peekable();
            let pid = mine.peek().map(|p| p.pid());
            let probe = || pid.and_then(crate::cpu::sched_probe);
            let before = match inst.wd_probe {
                None => {
                    let exec = probe().map(|(_, exec)| exec);
                    inst.wd_probe = Some(WdProbe { exec, next: limit });
                    continue;
                }
                Some(p) if stalled < p.next => continue,
                Some(p) => p.exec,
            };
            // Unreadable (no process, no /proc) before or now: stuck.
            let starved = match (before, probe()) {
                (Some(b), Some((true, exec))) => {
                    Duration::from_nanos(exec.saturating_sub(b)) < limit - limit / 4
                }
                _ => false,
            };
            if starved {
                inst.wd_probe = Some(WdProbe {
                    exec: before,
                    next: stalled + limit / 4,
                });
            } else {
                inst.wd_since = now;
                inst.wd_probe = None;
                self.stats.hangs.add(1);
                self.cold.kill_reason = Some(DownReason::Hung);
                mine.for_each(VrProcess::kill);
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
        self.cold.violations_base = self.stats.violations_total();
        self.cold.kill_reason = None;
        self.recovering = true;
        self.stats.restarts.add(1);
        self.up = true;
        self.go_live(bells);
        Ok(())
    }

    /// Take back every slot the instances hold and reset all rings; no
    /// instance is fed until [`VrPath::restore`].
    pub(super) fn reclaim_all(&mut self) {
        for i in 0..self.inst.len() {
            self.reclaim_instance(i);
        }
        self.rebalance();
    }

    /// Take back every slot instance `i` holds (staged ones included) and
    /// reset its rings: its process is gone. Its slot becomes vacant.
    pub(super) fn reclaim_instance(&mut self, i: usize) {
        let vnics = self.vnic_port.len();
        for q in &mut self.staged[i * vnics..(i + 1) * vnics] {
            self.staged_n -= q.len();
            q.clear();
        }
        let region = &self.region;
        let ded = &mut self.cold.dedicated;
        let taken = self.slots.reclaim(i, |s, port| {
            region.meta(s).expect("valid index").set(SlotState::Empty);
            if port {
                super::lent::push_back(ded, s);
            }
        });
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

#[cfg(test)]
mod tests {
    use super::super::testkit::{Kit, frame};
    use super::super::{Class, Guard};
    use super::*;
    use crate::stats::{IngressDrop, Violation};

    #[test]
    fn too_many_violations_quarantine_it_and_take_back_every_slot() {
        let mut k = Kit::new(1, 1, 64, 64);
        k.vp.set_guard(Guard {
            quarantine_after: Some(3),
            watchdog: None,
        });
        k.give_n(5);
        let s = k.take(0, 0);
        // Two violations: under the budget.
        k.hand_back(0, 0, &[s[0], s[0]], SlotState::Filled);
        k.vp.poll_tx(&mut k.ports);
        assert_eq!(k.vp.supervise(Instant::now()).map(|e| e.reason), None);
        assert!(!k.vp.is_quarantined());
        k.hand_back(0, 0, &[999], SlotState::Processed);
        k.vp.poll_tx(&mut k.ports);
        assert_eq!(
            k.vp.stats().violations[Violation::SlotIndex as usize].get(),
            1
        );
        // The third: quarantined; with no process of the host's, its slots
        // come back at once.
        assert!(k.vp.supervise(Instant::now()).is_none());
        assert!(k.vp.is_quarantined() && !k.vp.is_up());
        assert_eq!(k.vp.stats().quarantines.get(), 1);
        assert_eq!(k.vp.stats().reclaimed.get(), 4, "the four it still held");
        assert!(k.vp.is_drained());
        k.vp.check_slot_accounting().unwrap();
        // Never fed or served again.
        assert_eq!(
            k.vp.stage(0, &frame(0), || Class::Data),
            Err(IngressDrop::VrDown)
        );
        assert_eq!(k.vp.poll_tx(&mut k.ports), 0);
    }

    #[test]
    fn a_restore_needs_processes_that_went_down() {
        let mut k = Kit::new(1, 1, 64, 64);
        // An external VR is not the host's to restart.
        assert!(k.vp.restore(Vec::new(), Vec::new()).is_err());
        assert!(k.vp.is_up());
    }

    #[test]
    fn shutdown_takes_back_staged_and_held_slots() {
        let mut k = Kit::new(1, 1, 64, 64);
        k.give(0, &frame(0));
        k.vp.stage(0, &frame(1), || Class::Data).unwrap();
        k.vp.shutdown();
        assert!(!k.vp.is_up());
        assert_eq!(k.vp.staged(), 0);
        assert!(k.vp.is_drained());
        assert_eq!(k.vp.stats().reclaimed.get(), 2);
        k.vp.check_slot_accounting().unwrap();
    }
}
