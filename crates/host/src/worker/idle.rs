//! The worker's loop and what it does with nothing to do: back off
//! (spin, yield, nap on its doorbell, sleep on every port and VR), drain
//! on stop, and shut down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vrhost_sdk::backoff::{Backoff, Idle};

use super::{DRAIN_TIMEOUT, REAP_EVERY, Worker};
use crate::vrpath::VrPath;

/// Descriptors a hand-over watches at most: the doorbell and 15 ports.
const HAND_OVER_FDS: usize = 16;

/// Longest hand-over while a port is left unwatched (more ports than
/// [`HAND_OVER_FDS`] holds).
const HAND_OVER_UNWATCHED: Duration = Duration::from_micros(50);

/// `d` as the timeout of a `poll`.
fn timespec(d: Duration) -> rustix::event::Timespec {
    rustix::event::Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

impl Worker {
    /// Run until `stop` is set, backing off when idle.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut backoff = Backoff::new(self.poll);
        while !stop.load(Ordering::Relaxed) {
            if self.mailbox.pending() {
                self.run_jobs();
            }
            if self.poll_once() > 0 {
                backoff.busy();
                continue;
            }
            self.ring_deferred();
            let idle = backoff.idle();
            // A VR on the worker's core holds frames it was handed: give
            // it the core rather than spin or yield (see `hand_over`).
            let hand_over = matches!(idle, Idle::Spin | Idle::Yield) && self.colocated_vr_waits();
            if hand_over || !matches!(idle, Idle::Spin) {
                // Nothing comes to fill a held batch while the worker is
                // off its core.
                self.flush_held();
            }
            match idle {
                _ if hand_over => self.hand_over(backoff.hand_over_timeout()),
                Idle::Spin => std::hint::spin_loop(),
                Idle::Yield => std::thread::yield_now(),
                Idle::Nap => self.nap(backoff.nap_timeout()),
                Idle::Sleep => self.sleep(backoff.sleep_timeout()),
            }
        }
        self.drain();
        // Release: jobs posted from now on are refused; run the ones that
        // raced with the flag so no caller waits for its timeout.
        self.mailbox.close();
        self.run_jobs();
    }

    /// Stop taking frames from the ports and serve the VRs' tx rings until
    /// every VR has handed back what it holds (or [`DRAIN_TIMEOUT`]), so a
    /// graceful stop sends what was accepted; then flush the ports.
    pub fn drain(&mut self) {
        let t = Instant::now();
        while t.elapsed() < DRAIN_TIMEOUT {
            for vr in &mut self.vrs {
                vr.ring_deferred(None);
                vr.poll_tx(&mut self.ports);
            }
            if !self.draining.is_empty() {
                self.poll_draining();
            }
            for p in &mut self.ports {
                let _ = p.flush();
            }
            self.reap();
            if self.vrs.iter().all(|v| v.is_drained() || !v.is_up()) && self.draining.is_empty() {
                break;
            }
            std::thread::yield_now();
        }
        for p in &mut self.ports {
            let _ = p.flush();
        }
    }

    /// Nap: sleep on the doorbell alone for up to `timeout` (see
    /// [`PollConfig::nap_us`]). A VR that hands back frames meanwhile rings
    /// it (its flag is raised, as for a sleep); frames arriving at the
    /// ports wait for the nap's end, to be taken in one round. Exited VR
    /// processes are seen by the next periodic reap.
    fn nap(&mut self, timeout: Duration) {
        use rustix::event::{PollFd, PollFlags};
        self.set_host_sleeping(true);
        if !self.work_pending() {
            self.stats.naps.add(1);
            let ts = timespec(timeout);
            let mut fds = [PollFd::from_borrowed_fd(self.bell.fd(), PollFlags::IN)];
            if let Ok(1..) = rustix::event::poll(&mut fds, Some(&ts)) {
                self.bell.clear();
            }
        }
        self.set_host_sleeping(false);
    }

    /// Whether a VR moved onto the worker's core (`colocate`) holds
    /// frames it was handed (with [`PollConfig::hand_over`]). Read in the
    /// worker's idle rounds only: after a round that found no work, a VR
    /// that holds slots has not handed them back yet.
    fn colocated_vr_waits(&self) -> bool {
        let Some(c) = self.colocate.as_ref() else {
            return false;
        };
        if !self.poll.hand_over || !c.any() {
            return false;
        }
        let mut r = 0;
        while let Some(at) = self.active.next_from(r) {
            r = at + 1;
            let vr = &self.vrs[self.order[at]];
            if !vr.is_drained() && vr.processes().iter().any(|p| !p.reaped && c.holds(p.pid())) {
                return true;
            }
        }
        false
    }

    /// Hand the core to the VRs on it: sleep on the doorbell and the
    /// ports for up to `timeout`, the sleeping flag raised, so that a VR
    /// woken on this core runs now and rings when it hands frames back,
    /// and a port's frame wakes the worker at once. A spinning or yielding
    /// worker keeps the core: `sched_yield` only lets tasks of its own
    /// cgroup run, and a VR is in its own, so a woken VR that did not
    /// preempt the worker waited for the worker's sleep or the scheduler's
    /// next tick (milliseconds). Exited VR processes are seen by the next
    /// periodic reap.
    fn hand_over(&mut self, timeout: Duration) {
        use rustix::event::{PollFd, PollFlags};
        self.set_host_sleeping(true);
        if !self.work_pending() {
            self.stats.hand_overs.add(1);
            // The doorbell and the ports' descriptors, on the stack (the
            // sleep's list without the pidfds). Ports beyond the array are
            // not watched: their frames wait for the timeout, then shorter.
            let bell = self.bell.fd();
            let mut waits = self.ports.iter().filter_map(|p| p.wait_fd());
            let mut n = 1;
            let mut list: [PollFd<'_>; HAND_OVER_FDS] = std::array::from_fn(|i| {
                let fd = if i == 0 { None } else { waits.next() };
                n += usize::from(fd.is_some());
                PollFd::from_borrowed_fd(fd.unwrap_or(bell), PollFlags::IN)
            });
            let timeout = match waits.next() {
                Some(_) => timeout.min(HAND_OVER_UNWATCHED),
                None => timeout,
            };
            let ts = timespec(timeout);
            let _ = rustix::event::poll(&mut list[..n], Some(&ts));
            if !list[0].revents().is_empty() {
                self.bell.clear();
            }
        }
        self.set_host_sleeping(false);
    }

    /// The last look after raising the host's sleeping flags (see
    /// `vrhost_shm::wake`): jobs, draining VRs, and each active VR's tx
    /// rings, as a round's tx phase would see them.
    fn work_pending(&mut self) -> bool {
        let mut pending = !self.draining.is_empty() || self.mailbox.pending();
        let mut r = 0;
        while let Some(at) = self.active.next_from(r) {
            r = at + 1;
            pending = pending || self.vrs[self.order[at]].tx_pending();
        }
        pending
    }

    /// Sleep until a VR or port has work, a VR process exits, or the
    /// timeout passes (at most [`REAP_EVERY`] while an instance is being
    /// retired: it moves on only when supervised). A sleep that times out
    /// supervises the VRs, so their load estimates fall to what idling
    /// means; one that ends with work does not, so the first frame after
    /// idling waits for nothing more.
    fn sleep(&mut self, timeout: Duration) {
        use rustix::event::{PollFd, PollFlags};
        // Only the VRs that may send (they hold slots, or relay messages
        // between instances: the active set) get the flag; the others
        // have nothing to wake the host for, and get slots only from an
        // awake host.
        self.set_host_sleeping(true);
        let pending = self.work_pending();
        let mut child_exited = false;
        let mut timed_out = false;
        if !pending {
            self.stats.sleeps.add(1);
            // Before the sleep, not after it: the wakeup to come is then
            // on the core the frames arrive on, and the first frame after
            // it waits for nothing more.
            self.follow_rx();
            let timeout = match self.vrs.iter().any(VrPath::retiring) {
                true => timeout.min(REAP_EVERY),
                false => timeout,
            };
            let ts = timespec(timeout);
            let mut fds = Vec::with_capacity(1 + self.ports.len() + self.vrs.len());
            fds.push(PollFd::from_borrowed_fd(self.bell.fd(), PollFlags::IN));
            for p in &self.ports {
                if let Some(fd) = p.wait_fd() {
                    fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
                }
            }
            let first_pidfd = fds.len();
            for vr in &self.vrs {
                for proc_ in vr.processes() {
                    if !proc_.reaped {
                        fds.push(PollFd::from_borrowed_fd(proc_.pidfd(), PollFlags::IN));
                    }
                }
            }
            let _ = rustix::event::poll(&mut fds, Some(&ts));
            // Only what fired costs a system call on the way out: the first
            // packet after idling waits for all of this.
            let rung = !fds[0].revents().is_empty();
            child_exited = fds[first_pidfd..].iter().any(|f| !f.revents().is_empty());
            timed_out = fds.iter().all(|f| f.revents().is_empty());
            drop(fds);
            if rung {
                self.bell.clear();
            }
        }
        // A VR that rang had the flag, so it is in the active set already;
        // a sleep that timed out sweeps (`reap`).
        self.set_host_sleeping(false);
        if child_exited {
            self.reap();
        } else if timed_out {
            // Every live pidfd was watched and none fired: none is asked
            // again (a system call per tick with VRs, none without).
            self.reap_seen(false);
        } else {
            // The pidfds were watched while we slept: no periodic reap is due.
            self.last_reap = Instant::now();
        }
    }

    /// Ring every doorbell deferred by `kick_batch` (the worker found no
    /// work: nothing more is coming to batch with). Only VRs holding slots
    /// (the active set) can have one.
    fn ring_deferred(&mut self) {
        let mut r = 0;
        while let Some(at) = self.active.next_from(r) {
            r = at + 1;
            self.vrs[self.order[at]].ring_deferred(None);
        }
    }

    /// Raise or clear the host's sleeping flag in the active VRs' regions.
    fn set_host_sleeping(&self, sleeping: bool) {
        let mut r = 0;
        while let Some(at) = self.active.next_from(r) {
            r = at + 1;
            self.vrs[self.order[at]].set_host_sleeping(sleeping);
        }
    }

    /// Stop every VR and flush the ports.
    pub fn shutdown(&mut self) {
        for vr in &mut self.vrs {
            vr.shutdown();
        }
        for mut d in self.draining.drain(..) {
            d.vr.shutdown();
        }
        for vr in &mut self.drained {
            vr.shutdown();
        }
        for p in &mut self.ports {
            let _ = p.flush();
        }
    }
}
