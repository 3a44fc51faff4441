//! The ports' flushes after a round: at once for most ports, and for a
//! port that sends batches at a cost mostly fixed per batch
//! ([`vrhost_io::Port::tx_batched`]: `af_xdp` with `tx = "xdp"`, one
//! `BPF_PROG_RUN` a batch) once the batch is full, nothing more is
//! coming, or it has waited long enough ([`PollConfig::tx_batch`],
//! [`PollConfig::tx_wait_us`]).
//!
//! Every run of the kernel's XDP test run builds and destroys a page pool
//! (7-29% of the forwarding core under TCP in the 2026-11-26 profiles):
//! fewer, fuller runs pay it less often. Off by default (`tx_batch` 0:
//! every port flushed after every round that sent, as before; see
//! `docs/decisions.md`). "More is coming" is read from the VRs:
//! a VR that holds a slot has a frame in flight that may leave through
//! the port. A batch is never left behind: the worker flushes every
//! held batch before it yields or sleeps, and drains and shutdowns
//! flush every port.

use std::time::{Duration, Instant};

#[cfg(doc)]
use vrhost_proto::PollConfig;

use super::Worker;

impl Worker {
    /// After a round that moved `moved` frames (`saturated`: a port had
    /// more than the round took), at `now`: flush each port with frames
    /// to send, or hold its batch (see the [module docs](self)). Without
    /// frames moved, only the held batches are looked at.
    #[inline]
    pub(super) fn flush_ports(&mut self, moved: usize, saturated: bool, now: Instant) {
        if moved == 0 && !self.tx_held {
            return;
        }
        let batch = self.poll.tx_batch as usize;
        let wait = Duration::from_micros(self.poll.tx_wait_us.into());
        // Frames in flight through a VR may still come out on a port.
        let more = saturated || self.active.next_from(0).is_some();
        if self.held_since.len() != self.ports.len() {
            // Ports changed without `resched` (which flushes what is held
            // and sizes this): none is skipped.
            self.flush_held();
            self.held_since = vec![None; self.ports.len()];
        }
        let mut held = false;
        for (p, since) in self.ports.iter_mut().zip(self.held_since.iter_mut()) {
            if moved == 0 && since.is_none() {
                continue;
            }
            let n = p.tx_batched();
            if n > 0 && n < batch && more {
                let first = *since.get_or_insert(now);
                if now.duration_since(first) < wait {
                    held = true;
                    continue;
                }
            }
            *since = None;
            // A driver with nothing queued returns at once; in-process VRs
            // send from `flush_rx`.
            let _ = p.flush();
        }
        self.tx_held = held;
    }

    /// Send every batch held by [`Worker::flush_ports`]: the worker is
    /// about to yield or sleep, so nothing more comes to fill them.
    pub(super) fn flush_held(&mut self) {
        if !std::mem::take(&mut self.tx_held) {
            return;
        }
        for (p, since) in self.ports.iter_mut().zip(self.held_since.iter_mut()) {
            if since.take().is_some() {
                let _ = p.flush();
            }
        }
    }
}
