//! `NullPort`: a sink that counts what it is sent and never receives.
//!
//! Besides its [`PortStats`], it publishes its totals in a [`SinkCounters`]
//! shared with other threads (a benchmark's measuring thread, a live view),
//! updated once per burst.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Port, PortStats};

/// Totals of a [`NullPort`], readable from any thread.
///
/// Only the port's worker writes them, once per `tx_burst`, with plain
/// `Relaxed` stores of its running totals (a single writer needs no
/// read-modify-write). `Relaxed` is enough: each counter is monotonic and
/// read for display or rate computation; no other memory is published
/// through them, so a reader needs no happens-before edge, only an
/// eventually visible value. The two counters are independent: a reader may
/// see `packets` of one burst with `bytes` of the previous one.
#[derive(Debug, Default)]
pub struct SinkCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
}

impl SinkCounters {
    /// Frames received by the sink so far.
    pub fn packets(&self) -> u64 {
        // Relaxed: a monotonic counter read for display (see the type docs).
        self.packets.load(Ordering::Relaxed)
    }

    /// Bytes of those frames.
    pub fn bytes(&self) -> u64 {
        // Relaxed: as `packets`.
        self.bytes.load(Ordering::Relaxed)
    }

    /// Publish a sink's running totals: `tx_packets` and `tx_bytes` of
    /// `stats`. Only the sink's worker calls it.
    pub(crate) fn publish(&self, stats: &PortStats) {
        // Relaxed: single writer, monotonic totals read for display (see
        // the type docs).
        self.packets.store(stats.tx_packets, Ordering::Relaxed);
        self.bytes.store(stats.tx_bytes, Ordering::Relaxed);
    }
}

/// The counting sink. See the [module docs](self).
#[derive(Debug)]
pub struct NullPort {
    name: String,
    stats: PortStats,
    shared: Arc<SinkCounters>,
}

impl NullPort {
    /// A sink named `name` with zeroed counters.
    pub fn new(name: impl Into<String>) -> NullPort {
        NullPort {
            name: name.into(),
            stats: PortStats::default(),
            shared: Arc::default(),
        }
    }

    /// The shared counters, to read from another thread.
    pub fn counters(&self) -> Arc<SinkCounters> {
        Arc::clone(&self.shared)
    }
}

impl Port for NullPort {
    fn name(&self) -> &str {
        &self.name
    }

    /// Never has frames.
    fn rx_burst<'a>(&'a mut self, _out: &mut [&'a [u8]]) -> usize {
        0
    }

    /// Accepts every frame and counts it.
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        if frames.is_empty() {
            return 0;
        }
        self.stats.tx_packets += frames.len() as u64;
        self.stats.tx_bytes += frames.iter().map(|f| f.len() as u64).sum::<u64>();
        self.shared.publish(&self.stats);
        frames.len()
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        let mut p = NullPort::new("null0");
        assert_eq!(p.name(), "null0");
        let mut out: [&[u8]; 4] = [&[]; 4];
        assert_eq!(p.rx_burst(&mut out), 0);
        assert_eq!(p.tx_burst(&[&[0u8; 64], &[0u8; 100]]), 2);
        assert_eq!(p.tx_burst(&[]), 0);
        assert_eq!(p.tx_burst(&[&[1u8; 1518]]), 1);
        let s = p.stats();
        assert_eq!(
            (s.tx_packets, s.tx_bytes, s.tx_dropped, s.rx_packets),
            (3, 1682, 0, 0)
        );
        let c = p.counters();
        assert_eq!((c.packets(), c.bytes()), (3, 1682));
    }

    #[test]
    fn counters_from_another_thread() {
        let mut p = NullPort::new("null0");
        let c = p.counters();
        let reader = std::thread::spawn(move || {
            // Monotonic as seen from here, and eventually the final total.
            let mut last = 0;
            loop {
                let n = c.packets();
                assert!(n >= last);
                last = n;
                if n == 100_000 {
                    break c.bytes();
                }
                std::hint::spin_loop();
            }
        });
        let f = [0u8; 64];
        let burst = [&f[..]; 32];
        let mut sent = 0;
        while sent < 100_000 {
            let n = (100_000 - sent).min(32);
            sent += p.tx_burst(&burst[..n]);
        }
        assert_eq!(reader.join().unwrap(), 64 * 100_000);
    }

    #[test]
    fn conformance() {
        crate::conformance::check_sink(&mut NullPort::new("null0"));
    }
}
