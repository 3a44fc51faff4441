//! The host worker: one thread that moves frames between ports and VRs.
//!
//! Each round: an rx burst from every port, each frame classified and copied
//! into a slot of its VR (one copy, as in Europa), the slots published to the
//! VRs' rx rings in one store per ring; then every VR's tx rings drained,
//! validated and sent on the out ports. When nothing moves it spins, yields,
//! then sleeps on its doorbell (which VRs ring only while it sleeps) and on
//! the VR processes' pidfds, so an idle host costs no CPU and a VR exit is
//! seen at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vrhost_io::Port;
use vrhost_packet::FlowKey;
use vrhost_shm::Doorbell;
use vrhost_vr::backoff::{Backoff, Idle};
use vrhost_vr::proto::PollConfig;

use crate::classify::Classifier;
use crate::stats::{HostStats, IngressDrop};
use crate::vrpath::{BURST, VrPath};

/// How often a busy worker looks for exited VR processes.
const REAP_EVERY: Duration = Duration::from_millis(10);

/// The host's data path worker.
pub struct Worker {
    ports: Vec<Box<dyn Port>>,
    vrs: Vec<VrPath>,
    classifier: Classifier,
    bell: Doorbell,
    stats: Arc<HostStats>,
    poll: PollConfig,
    rx_burst: usize,
    rx_round: usize,
    last_reap: Instant,
}

impl Worker {
    /// A worker over `ports`, classifying with `classifier`.
    ///
    /// # Errors
    /// The OS error if its doorbell cannot be created.
    pub fn new(
        ports: Vec<Box<dyn Port>>,
        classifier: Classifier,
        poll: PollConfig,
    ) -> std::io::Result<Self> {
        Ok(Self {
            ports,
            vrs: Vec::new(),
            classifier,
            bell: Doorbell::new()?,
            stats: Arc::new(HostStats::default()),
            poll,
            rx_burst: 32,
            rx_round: 256,
            last_reap: Instant::now(),
        })
    }

    /// The doorbell VRs ring to wake this worker (passed to their processes).
    pub fn bell(&self) -> &Doorbell {
        &self.bell
    }

    /// Frames taken from a port per burst (1..=64, default 32).
    pub fn set_rx_burst(&mut self, n: usize) {
        self.rx_burst = n.clamp(1, BURST);
    }

    /// Frames taken from one port per round, in bursts (default 256).
    pub fn set_rx_round(&mut self, n: usize) {
        self.rx_round = n.max(1);
    }

    /// Add a VR; returns its index (the classifier's VR number).
    pub fn add_vr(&mut self, vr: VrPath) -> usize {
        self.vrs.push(vr);
        self.vrs.len() - 1
    }

    /// Replace the classifier.
    pub fn set_classifier(&mut self, c: Classifier) {
        self.classifier = c;
    }

    /// The VRs.
    pub fn vrs(&self) -> &[VrPath] {
        &self.vrs
    }

    /// The VRs, mutable (tests, shutdown).
    pub fn vrs_mut(&mut self) -> &mut [VrPath] {
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

    /// One round over all ports and VRs: up to the round budget of frames
    /// from each port, in bursts, each burst handed to the VRs at once; then
    /// every VR's tx rings once. Returns frames moved.
    ///
    /// Looking at a tx ring costs a cache miss when its VR has written it
    /// (its producer index lives on the VR's core), whatever it holds; with
    /// many VRs that cost, paid per round, is what a larger round amortizes.
    pub fn poll_once(&mut self) -> usize {
        let mut moved = 0;
        for p in 0..self.ports.len() {
            let mut budget = self.rx_round;
            while budget > 0 {
                let want = budget.min(self.rx_burst);
                let (n, full) = self.rx_burst_to_vrs(p, want);
                if n == 0 {
                    break;
                }
                moved += n;
                budget -= n;
                for vr in &mut self.vrs {
                    vr.flush_rx(&mut self.ports);
                }
                // A VR's ring or pool was full: serve the tx rings (which
                // frees slots) before taking more, rather than spend the
                // round taking frames only to drop them (receive livelock).
                if n < want || full {
                    break;
                }
            }
        }
        for vr in &mut self.vrs {
            moved += vr.poll_tx(&mut self.ports);
        }
        if moved > 0 {
            // One kick per port per round (a driver with nothing queued
            // returns at once; in-process VRs send from `flush_rx`).
            for p in &mut self.ports {
                let _ = p.flush();
            }
        }
        if self.last_reap.elapsed() >= REAP_EVERY {
            self.reap();
        }
        moved
    }

    /// Take up to `want` frames from port `p`, classify each and stage it in
    /// its VR's pool. Returns frames taken, and whether a VR had no room.
    fn rx_burst_to_vrs(&mut self, p: usize, want: usize) -> (usize, bool) {
        let mut full = false;
        let mut frames: [&[u8]; BURST] = [&[]; BURST];
        let n = self.ports[p].rx_burst(&mut frames[..want]);
        self.stats.rx_packets.add(n as u64);
        for f in &frames[..n] {
            // A frame whose IPv4 header is broken can still match a rule on
            // its port, MAC or VLAN; its VR then counts the bad header.
            let Some(key) = FlowKey::extract(f).ok().or_else(|| FlowKey::extract_l2(f)) else {
                self.stats.ingress_drops[IngressDrop::Malformed as usize].add(1);
                continue;
            };
            let Some((vr, vnic)) = self.classifier.classify(p, &key) else {
                self.stats.ingress_drops[IngressDrop::NoMatch as usize].add(1);
                continue;
            };
            let Some(path) = self.vrs.get_mut(vr) else {
                self.stats.ingress_drops[IngressDrop::NoMatch as usize].add(1);
                continue;
            };
            if let Err(why) = path.stage(vnic, f) {
                full |= matches!(why, IngressDrop::RingFull | IngressDrop::PoolEmpty);
                path.stats().drop_in(why, 1);
            }
        }
        (n, full)
    }

    /// Handle exited VR processes; returns how many exited.
    pub fn reap(&mut self) -> usize {
        self.last_reap = Instant::now();
        self.vrs.iter_mut().map(VrPath::reap).sum()
    }

    /// Run until `stop` is set, backing off when idle.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut backoff = Backoff::new(self.poll);
        while !stop.load(Ordering::Relaxed) {
            if self.poll_once() > 0 {
                backoff.busy();
                continue;
            }
            match backoff.idle() {
                Idle::Spin => std::hint::spin_loop(),
                Idle::Yield => std::thread::yield_now(),
                Idle::Sleep => self.sleep(backoff.sleep_timeout()),
            }
        }
        for p in &mut self.ports {
            let _ = p.flush();
        }
    }

    /// Sleep until a VR or port has work, a VR process exits, or the
    /// timeout passes.
    fn sleep(&mut self, timeout: Duration) {
        use rustix::event::{PollFd, PollFlags, Timespec};
        for vr in &self.vrs {
            vr.set_host_sleeping(true);
        }
        // The last look after raising the flags (see `vrhost_shm::wake`).
        let pending = self.vrs.iter_mut().any(VrPath::tx_pending);
        let mut child_exited = false;
        if !pending {
            self.stats.sleeps.add(1);
            let ts = Timespec {
                tv_sec: timeout.as_secs() as i64,
                tv_nsec: i64::from(timeout.subsec_nanos()),
            };
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
            drop(fds);
            if rung {
                self.bell.clear();
            }
        }
        for vr in &self.vrs {
            vr.set_host_sleeping(false);
        }
        if child_exited {
            self.reap();
        }
        // The pidfds were watched while we slept: no periodic reap is due.
        self.last_reap = Instant::now();
    }

    /// Stop every VR and flush the ports.
    pub fn shutdown(&mut self) {
        for vr in &mut self.vrs {
            vr.shutdown();
        }
        for p in &mut self.ports {
            let _ = p.flush();
        }
    }
}
