//! A port for latency probes: another thread injects one frame at a time
//! (waking a sleeping worker through an eventfd, as a NIC's interrupt wakes
//! a worker sleeping on an AF_XDP socket), the worker's taking it and the
//! frame's arrival back at the port are timestamped, and the arrival rings
//! a doorbell so the measuring thread can sleep rather than compete for a
//! CPU with the path it measures.

use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use vrhost_io::{Port, PortStats};
use vrhost_shm::Doorbell;

/// The shared side of a [`ProbePort`], kept by the measuring thread.
#[derive(Debug)]
pub struct Probe {
    base: Instant,
    pending: AtomicU64,
    arrived: AtomicU64,
    last_arrival_ns: AtomicU64,
    taken_ns: AtomicU64,
    bell: Doorbell,
    arrival: Doorbell,
}

impl Probe {
    /// Inject one frame now; returns the injection time (ns since base).
    pub fn inject(&self) -> u64 {
        let t = self.now_ns();
        // Release: pairs with the port's Acquire; nothing else to publish,
        // but keeps the timestamp before the frame in the port's view.
        self.pending.fetch_add(1, Ordering::Release);
        self.bell.ring();
        t
    }

    /// Sleep until a frame arrives or `timeout` passes.
    pub fn wait_arrival(&self, timeout: std::time::Duration) {
        self.arrival.wait(timeout);
    }

    /// When the worker took the latest injected frame (ns since base).
    pub fn taken_ns(&self) -> u64 {
        self.taken_ns.load(Ordering::Acquire)
    }

    /// Frames arrived so far.
    pub fn arrived(&self) -> u64 {
        self.arrived.load(Ordering::Acquire)
    }

    /// Arrival time of the latest frame (ns since base).
    pub fn last_arrival_ns(&self) -> u64 {
        self.last_arrival_ns.load(Ordering::Acquire)
    }

    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

/// The worker's side: a [`Port`].
pub struct ProbePort {
    frame: Vec<u8>,
    shared: Arc<Probe>,
    stats: PortStats,
}

impl ProbePort {
    /// A probe port that injects copies of `frame`.
    pub fn new(frame: Vec<u8>) -> std::io::Result<(Self, Arc<Probe>)> {
        let shared = Arc::new(Probe {
            base: Instant::now(),
            pending: AtomicU64::new(0),
            arrived: AtomicU64::new(0),
            last_arrival_ns: AtomicU64::new(0),
            taken_ns: AtomicU64::new(0),
            bell: Doorbell::new()?,
            arrival: Doorbell::new()?,
        });
        Ok((
            Self {
                frame,
                shared: shared.clone(),
                stats: PortStats::default(),
            },
            shared,
        ))
    }
}

impl Port for ProbePort {
    fn name(&self) -> &str {
        "probe"
    }

    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        // Acquire: pairs with `inject`.
        if out.is_empty() || self.shared.pending.load(Ordering::Acquire) == 0 {
            return 0;
        }
        self.shared.pending.fetch_sub(1, Ordering::AcqRel);
        // Release: read with Acquire by the measuring thread.
        self.shared
            .taken_ns
            .store(self.shared.now_ns(), Ordering::Release);
        self.shared.bell.clear();
        out[0] = &self.frame;
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += self.frame.len() as u64;
        1
    }

    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        if !frames.is_empty() {
            let t = self.shared.now_ns();
            self.shared.last_arrival_ns.store(t, Ordering::Release);
            self.shared
                .arrived
                .fetch_add(frames.len() as u64, Ordering::Release);
            self.stats.tx_packets += frames.len() as u64;
        }
        frames.len()
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.shared.bell.fd())
    }
}
