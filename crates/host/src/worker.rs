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

    /// One round over all ports and VRs. Returns frames moved.
    pub fn poll_once(&mut self) -> usize {
        let mut moved = 0;
        for p in 0..self.ports.len() {
            let mut frames: [&[u8]; BURST] = [&[]; BURST];
            let n = self.ports[p].rx_burst(&mut frames[..self.rx_burst]);
            if n == 0 {
                continue;
            }
            moved += n;
            self.stats.rx_packets.add(n as u64);
            for f in &frames[..n] {
                // A frame whose IPv4 header is broken can still match a rule
                // on its port, MAC or VLAN; its VR then counts the bad header.
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
                    path.stats().drop_in(why, 1);
                }
            }
            for vr in &mut self.vrs {
                vr.flush_rx(&mut self.ports);
            }
        }
        for vr in &mut self.vrs {
            moved += vr.poll_tx(&mut self.ports);
        }
        if self.last_reap.elapsed() >= REAP_EVERY {
            self.reap();
        }
        moved
    }

    /// Handle exited VR processes; returns how many exited.
    pub fn reap(&mut self) -> usize {
        self.last_reap = Instant::now();
        self.vrs.iter_mut().map(VrPath::reap).sum()
    }

    /// Run until `stop` is set, backing off when idle.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut idle_rounds = 0u32;
        let mut idle_since = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if self.poll_once() > 0 {
                idle_rounds = 0;
                continue;
            }
            if idle_rounds == 0 {
                idle_since = Instant::now();
            }
            idle_rounds = idle_rounds.saturating_add(1);
            if idle_rounds <= self.poll.spin_rounds {
                std::hint::spin_loop();
            } else if idle_since.elapsed() < Duration::from_micros(self.poll.yield_us.into()) {
                std::thread::yield_now();
            } else {
                self.sleep();
                idle_rounds = 0;
            }
        }
        for p in &mut self.ports {
            let _ = p.flush();
        }
    }

    /// Sleep until a VR or port has work, a VR process exits, or the
    /// timeout passes.
    fn sleep(&mut self) {
        use rustix::event::{PollFd, PollFlags, Timespec};
        for vr in &self.vrs {
            vr.set_host_sleeping(true);
        }
        let pending = self.vrs.iter_mut().any(VrPath::tx_pending);
        if !pending {
            self.stats.sleeps.add(1);
            let ms = self.poll.sleep_ms;
            let ts = Timespec {
                tv_sec: i64::from(ms / 1000),
                tv_nsec: i64::from(ms % 1000) * 1_000_000,
            };
            let mut fds = Vec::with_capacity(1 + self.ports.len() + self.vrs.len());
            fds.push(PollFd::from_borrowed_fd(self.bell.fd(), PollFlags::IN));
            for p in &self.ports {
                if let Some(fd) = p.wait_fd() {
                    fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
                }
            }
            for vr in &self.vrs {
                for proc_ in vr.processes() {
                    if !proc_.reaped {
                        fds.push(PollFd::from_borrowed_fd(proc_.pidfd(), PollFlags::IN));
                    }
                }
            }
            let _ = rustix::event::poll(&mut fds, Some(&ts));
            drop(fds);
            self.bell.clear();
        }
        for vr in &self.vrs {
            vr.set_host_sleeping(false);
        }
        self.reap();
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
