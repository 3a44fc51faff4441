//! The round trip of one cache line between the host worker's CPU and the
//! VRs' CPU, measured just before a point starts (`line_rtt_ns`).
//!
//! Every frame in `shm` crosses between the two cores at least twice (the
//! slot's lines, the rings' indexes), so what that crossing costs sets
//! part of the rate. On a VM it depends on where the hypervisor placed the
//! two vCPUs (the same core's two threads, one L3, or two), which the
//! guest neither sees in its topology nor chooses, and which may change
//! between runs: the probe lets a run's rate be read against it (the
//! "two modes" of `shm`, `docs/results.md`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use vrhost_host::cpu;

/// Round trips a probe makes, in chunks of [`CHUNK`].
const TRIPS: u64 = 50_000;
/// Round trips timed together; the probe reports the fastest chunk's mean,
/// so that a chunk in which either thread lost its CPU does not count.
const CHUNK: u64 = 500;

/// The fastest mean round trip, in ns, of one cache line between a thread
/// on `a` and one on `b` (each pinned, both threads its own: the caller's
/// affinity is untouched; None if either cannot be pinned, or `a == b`).
pub(super) fn line_rtt_ns(a: usize, b: usize) -> Option<f64> {
    if a == b {
        return None;
    }
    let shared = Arc::new(Shared::default());
    let s = shared.clone();
    let prober = std::thread::spawn(move || side(&s, a, true));
    let echo = std::thread::spawn(move || side(&shared, b, false));
    let echo = echo.join().ok().flatten();
    prober.join().ok().flatten().filter(|_| echo.is_some())
}

/// The line, and a flag on a line of its own that a side which could not
/// be pinned raises, so that the other stops waiting.
#[derive(Default)]
struct Shared {
    line: AtomicU64,
    failed: CachePadded,
}

#[derive(Default)]
#[repr(align(128))]
struct CachePadded(AtomicBool);

/// One side of [`line_rtt_ns`]: the prober writes `2i + 1` and waits for
/// `2i + 2`, the echo the other way round. The prober returns its fastest
/// chunk's mean; the echo `Some(0.0)` if it served every trip.
fn side(s: &Shared, cpu_n: usize, prober: bool) -> Option<f64> {
    if cpu::pin_current_thread(cpu_n).is_err() {
        // Relaxed: a flag read only by polling, carrying no other data.
        s.failed.0.store(true, Ordering::Relaxed);
        return None;
    }
    let mut best = f64::INFINITY;
    let mut i = 0;
    while i < TRIPS {
        let t = Instant::now();
        let end = i + CHUNK;
        while i < end {
            let (send, wait) = match prober {
                true => (2 * i + 1, 2 * i + 2),
                false => (2 * i + 2, 2 * i + 1),
            };
            if prober {
                // Release/Acquire: the value alone is the message; each
                // side's store pairs with the other's load.
                s.line.store(send, Ordering::Release);
            }
            while s.line.load(Ordering::Acquire) != wait {
                if s.failed.0.load(Ordering::Relaxed) {
                    return None;
                }
                std::hint::spin_loop();
            }
            if !prober {
                s.line.store(send, Ordering::Release);
            }
            i += 1;
        }
        best = best.min(t.elapsed().as_nanos() as f64 / CHUNK as f64);
    }
    Some(if prober { best } else { 0.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_between_two_cpus_takes_time_and_one_cpu_is_refused() {
        assert_eq!(line_rtt_ns(0, 0), None);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            return;
        }
        let rtt = line_rtt_ns(0, 1).expect("two CPUs pin");
        assert!(rtt > 0.0 && rtt.is_finite(), "{rtt}");
    }
}
