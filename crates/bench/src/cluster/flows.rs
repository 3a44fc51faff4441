//! `bench cluster`'s traffic: numbered UDP flows from the generator's
//! namespace to the sink's, each datagram carrying its flow and sequence
//! number, sent round robin over the flows at a paced rate; and what the
//! sink got, read back as rates, reordering and losses per flow.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vrhost_lab::Netns;

use crate::Result;

/// The sink's UDP port.
pub const SINK_PORT: u16 = 9000;
/// The generator's first source port (flow `f` sends from `FIRST + f`).
pub const FIRST_SPORT: u16 = 20000;
const GEN_IP: [u8; 4] = [10, 1, 0, 2];
const SINK_IP: [u8; 4] = [10, 2, 0, 2];

/// One arrival: flow, sequence number, when.
pub type Arrival = (u16, u32, Instant);

/// A run's traffic: when each frame was sent (per sequence number: the
/// rounds are sent together) and what arrived.
#[derive(Debug, Default)]
pub struct Run {
    /// Send time of each round (a frame of every flow).
    pub sent: Vec<Instant>,
    /// Arrivals, in order.
    pub got: Vec<Arrival>,
    /// Flows.
    pub flows: u16,
}

/// The first 42 bytes of flow `f`'s frames as the dispatcher reads them
/// (the IPv4 5-tuple its flow hash reads).
pub fn header_of(f: u16) -> [u8; 42] {
    let mut b = [0u8; 42];
    b[12..14].copy_from_slice(&[0x08, 0x00]);
    b[14] = 0x45;
    b[16..18].copy_from_slice(&28u16.to_be_bytes());
    b[22] = 64;
    b[23] = 17;
    b[26..30].copy_from_slice(&GEN_IP);
    b[30..34].copy_from_slice(&SINK_IP);
    b[34..36].copy_from_slice(&(FIRST_SPORT + f).to_be_bytes());
    b[36..38].copy_from_slice(&SINK_PORT.to_be_bytes());
    b
}

/// The generator's sockets and the sink's, bound in their namespaces.
pub struct Flows {
    socks: Vec<UdpSocket>,
    rx: UdpSocket,
}

impl Flows {
    /// Bind `flows` sockets in `generator` and the sink's in `sink`.
    ///
    /// # Errors
    /// A namespace or a socket.
    pub fn bind(generator: &Netns, sink: &Netns, flows: u16) -> Result<Self> {
        let rx = sink.run(|| UdpSocket::bind(SocketAddr::from((SINK_IP, SINK_PORT))))??;
        rx.set_read_timeout(Some(Duration::from_millis(20)))?;
        // Room for the arrivals of a pause of the sink's thread at the
        // highest rates (`dispatcher_limit`): a frame the sink's socket
        // drops would count as lost by the cluster (best effort).
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(&rx, 32 << 20);
        let socks = generator.run(|| {
            (0..flows)
                .map(|f| UdpSocket::bind(SocketAddr::from((GEN_IP, FIRST_SPORT + f))))
                .collect::<std::io::Result<Vec<_>>>()
        })??;
        Ok(Self { socks, rx })
    }

    /// Send one frame of every flow until each got through once (within
    /// `patience`); whether they did.
    pub fn warm_up(&self, patience: Duration) -> bool {
        let t0 = Instant::now();
        let mut seen = vec![false; self.socks.len()];
        let mut b = [0u8; 16];
        while t0.elapsed() < patience {
            self.round(u32::MAX);
            let until = Instant::now() + Duration::from_millis(50);
            while Instant::now() < until {
                if let Ok(6) = self.rx.recv(&mut b) {
                    let f = usize::from(u16::from_be_bytes([b[0], b[1]]));
                    if let Some(s) = seen.get_mut(f) {
                        *s = true;
                    }
                }
            }
            if seen.iter().all(|s| *s) {
                return true;
            }
        }
        false
    }

    fn round(&self, seq: u32) {
        let to = SocketAddr::from((SINK_IP, SINK_PORT));
        for (f, s) in self.socks.iter().enumerate() {
            let mut p = [0u8; 6];
            p[..2].copy_from_slice(&(f as u16).to_be_bytes());
            p[2..].copy_from_slice(&seq.to_be_bytes());
            // A full socket buffer is a frame not sent: counted as lost.
            let _ = s.send_to(&p, to);
        }
    }

    /// Send rounds paced at `pps` frames/s in all for `secs` s while the
    /// sink records; `at` is called with each round's number before it
    /// is sent.
    pub fn blast(&self, pps: u64, secs: f64, mut at: impl FnMut(u32)) -> Run {
        let got = Mutex::new(Vec::new());
        let stop = AtomicBool::new(false);
        let flows = self.socks.len() as u16;
        let period = Duration::from_secs_f64(f64::from(flows) / pps.max(1) as f64);
        let mut sent = Vec::new();
        std::thread::scope(|s| {
            s.spawn(|| receive(&self.rx, &got, &stop));
            let t0 = Instant::now();
            let mut next = t0;
            let mut seq = 0u32;
            while t0.elapsed().as_secs_f64() < secs {
                at(seq);
                sent.push(Instant::now());
                self.round(seq);
                seq += 1;
                next += period;
                if let Some(d) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(d);
                }
            }
            // What is still in flight.
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
        });
        let got = got.into_inner().unwrap_or_else(|p| p.into_inner());
        Run { sent, got, flows }
    }
}

fn receive(rx: &UdpSocket, got: &Mutex<Vec<Arrival>>, stop: &AtomicBool) {
    let mut b = [0u8; 16];
    let mut local = Vec::with_capacity(1 << 16);
    while !stop.load(Ordering::Relaxed) {
        if let Ok(6) = rx.recv(&mut b) {
            let f = u16::from_be_bytes([b[0], b[1]]);
            let seq = u32::from_be_bytes([b[2], b[3], b[4], b[5]]);
            if seq != u32::MAX {
                local.push((f, seq, Instant::now()));
            }
        }
    }
    got.lock().unwrap_or_else(|p| p.into_inner()).extend(local);
}

impl Run {
    /// Frames received per second over the sending time.
    pub fn pps(&self) -> f64 {
        self.rate(self.got.len() as f64)
    }

    /// `frames` per second over the sending time.
    fn rate(&self, frames: f64) -> f64 {
        let (Some(a), Some(b)) = (self.sent.first(), self.sent.last()) else {
            return 0.0;
        };
        frames / b.duration_since(*a).as_secs_f64().max(1e-3)
    }

    /// Frames sent per second over the sending time.
    pub fn sent_pps(&self) -> f64 {
        self.rate(self.frames_sent() as f64)
    }

    /// Frames sent.
    pub fn frames_sent(&self) -> u64 {
        self.sent.len() as u64 * u64::from(self.flows)
    }

    /// Percent of the arrivals that came after a later frame of their
    /// flow (PdP's reordering).
    pub fn reorder_pct(&self) -> f64 {
        let mut high: Vec<Option<u32>> = vec![None; usize::from(self.flows)];
        let mut late = 0usize;
        for &(f, s, _) in &self.got {
            let Some(h) = high.get_mut(usize::from(f)) else {
                continue;
            };
            match h {
                Some(m) if s < *m => late += 1,
                _ => *h = Some(s),
            }
        }
        100.0 * late as f64 / self.got.len().max(1) as f64
    }

    /// Per flow, the sequence numbers that never arrived.
    pub fn lost(&self) -> Vec<Vec<u32>> {
        let n = self.sent.len();
        let mut seen = vec![vec![false; n]; usize::from(self.flows)];
        for &(f, s, _) in &self.got {
            if let Some(x) = seen
                .get_mut(usize::from(f))
                .and_then(|v| v.get_mut(s as usize))
            {
                *x = true;
            }
        }
        seen.iter()
            .map(|v| (0..n as u32).filter(|&s| !v[s as usize]).collect())
            .collect()
    }

    /// For `flows`, the first arrival of a frame sent after `at`, as time
    /// since `at` (the slowest flow's; `None` if one never came back).
    pub fn back_after(&self, flows: &[u16], at: Instant) -> Option<Duration> {
        let mut worst = Duration::ZERO;
        for &f in flows {
            let first = (self.got.iter())
                .filter(|a| a.0 == f && self.sent.get(a.1 as usize).is_some_and(|t| *t > at))
                .map(|a| a.2.duration_since(at))
                .min()?;
            worst = worst.max(first);
        }
        Some(worst)
    }
}
