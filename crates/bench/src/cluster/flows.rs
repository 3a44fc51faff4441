//! `bench cluster`'s traffic: numbered UDP flows from the generator's
//! namespace to the sink's, each datagram carrying its flow and sequence
//! number, sent round robin over the flows at a paced rate; and what the
//! sink got, read back as rates, reordering and losses per flow.
//!
//! The generator writes whole frames (Ethernet to the generator's
//! neighbour for the sink's subnet, IPv4, UDP) into an AF_PACKET tx ring
//! on its interface, a round of every flow's frame per `sendto`, so that
//! it offers rates a socket per flow and a `sendto` per datagram could
//! not (`dispatcher_limit`); the sink is a UDP socket.

use std::cell::RefCell;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vrhost_io::Port;
use vrhost_io::af_packet::{AfPacketConfig, AfPacketPort};
use vrhost_lab::Netns;

use crate::{Context, Result};

/// The sink's UDP port.
pub const SINK_PORT: u16 = 9000;
/// The generator's first source port (flow `f` sends from `FIRST + f`).
pub const FIRST_SPORT: u16 = 20000;
const GEN_IP: [u8; 4] = [10, 1, 0, 2];
const SINK_IP: [u8; 4] = [10, 2, 0, 2];
/// The generator's interface, and its next hop toward the sink.
const GEN_IF: &str = "eth0";
const GEN_GW: &str = "10.1.0.1";
/// A frame: Ethernet, IPv4, UDP, then flow (2 bytes) and sequence (4).
const FRAME: usize = 48;

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

/// The generator's port and frames and the sink's socket, in their
/// namespaces.
pub struct Flows {
    tx: RefCell<Tx>,
    flows: u16,
    rx: UdpSocket,
}

/// The generator's AF_PACKET port and a frame per flow.
struct Tx {
    port: AfPacketPort,
    frames: Vec<[u8; FRAME]>,
}

impl Tx {
    /// Open the generator's interface; each flow's frame, from the
    /// interface's MAC to its next hop's.
    fn open(generator: &Netns, flows: u16) -> Result<Self> {
        let src = mac_in(
            &generator.exec("ip", &["-o", "link", "show", GEN_IF])?,
            "link/ether",
        )
        .context("the generator's MAC")?;
        let dst = mac_in(&generator.exec("ip", &["neigh", "show", GEN_GW])?, "lladdr")
            .context("the generator's neighbour toward the sink")?;
        let port = generator
            .run(|| AfPacketPort::open(GEN_IF, AfPacketConfig::DEFAULT))?
            .context("the generator's port")?;
        let frames = (0..flows)
            .map(|f| {
                let mut b = [0u8; FRAME];
                b[..42].copy_from_slice(&header_of(f));
                b[..6].copy_from_slice(&dst);
                b[6..12].copy_from_slice(&src);
                b[16..18].copy_from_slice(&((FRAME - 14) as u16).to_be_bytes());
                b[38..40].copy_from_slice(&((FRAME - 34) as u16).to_be_bytes());
                let ck = vrhost_packet::checksum::checksum(&b[14..34]);
                b[24..26].copy_from_slice(&ck.to_be_bytes());
                b[42..44].copy_from_slice(&f.to_be_bytes());
                b
            })
            .collect();
        Ok(Self { port, frames })
    }

    /// Every flow's frame numbered `seq`, in one `sendto`. A full ring is
    /// frames not sent: counted as lost.
    fn round(&mut self, seq: u32) {
        let mut burst: [&[u8]; 64] = [&[]; 64];
        for f in &mut self.frames {
            f[44..48].copy_from_slice(&seq.to_be_bytes());
        }
        for chunk in self.frames.chunks(burst.len()) {
            for (b, f) in burst.iter_mut().zip(chunk) {
                *b = f;
            }
            self.port.tx_burst(&burst[..chunk.len()]);
        }
        let _ = self.port.flush();
    }
}

/// The MAC after `key` in `ip`'s output.
fn mac_in(out: &str, key: &str) -> Option<[u8; 6]> {
    let mut words = out.split_whitespace();
    words.find(|w| *w == key)?;
    let mut mac = [0u8; 6];
    let mut parts = words.next()?.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(mac)
}

impl Flows {
    /// Open the generator's port in `generator` and bind the sink's
    /// socket in `sink`.
    ///
    /// # Errors
    /// A namespace, the port or the socket.
    pub fn bind(generator: &Netns, sink: &Netns, flows: u16) -> Result<Self> {
        let rx = sink.run(|| UdpSocket::bind(SocketAddr::from((SINK_IP, SINK_PORT))))??;
        rx.set_read_timeout(Some(Duration::from_millis(20)))?;
        // Room for the arrivals of a pause of the sink's thread at the
        // highest rates (`dispatcher_limit`): a frame the sink's socket
        // drops would count as lost by the cluster (best effort).
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(&rx, 32 << 20);
        let tx = RefCell::new(Tx::open(generator, flows)?);
        Ok(Self { tx, flows, rx })
    }

    /// Send one frame of every flow until each got through once (within
    /// `patience`); whether they did.
    pub fn warm_up(&self, patience: Duration) -> bool {
        let t0 = Instant::now();
        let mut seen = vec![false; usize::from(self.flows)];
        let mut b = [0u8; 16];
        while t0.elapsed() < patience {
            self.round(u32::MAX);
            let until = Instant::now() + Duration::from_millis(50);
            while Instant::now() < until {
                if let Ok(6..) = self.rx.recv(&mut b) {
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
        self.tx.borrow_mut().round(seq);
    }

    /// Send rounds paced at `pps` frames/s in all for `secs` s while the
    /// sink records; `at` is called with each round's number before it
    /// is sent.
    pub fn blast(&self, pps: u64, secs: f64, mut at: impl FnMut(u32)) -> Run {
        let got = Mutex::new(Vec::new());
        let stop = AtomicBool::new(false);
        let flows = self.flows;
        let period = Duration::from_secs_f64(f64::from(flows) / pps.max(1) as f64);
        let mut sent = Vec::new();
        std::thread::scope(|s| {
            let rx = &self.rx;
            s.spawn(|| receive(rx, &got, &stop));
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
        if let Ok(6..) = rx.recv(&mut b) {
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

#[cfg(test)]
mod tests {
    use super::mac_in;

    #[test]
    fn macs_are_read_from_ip_output() {
        let link = "2: eth0@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue \
                    state UP mode DEFAULT group default qlen 1000\\    link/ether \
                    02:7c:00:00:00:0a brd ff:ff:ff:ff:ff:ff link-netns vrc-disp";
        assert_eq!(
            mac_in(link, "link/ether"),
            Some([0x02, 0x7c, 0, 0, 0, 0x0a])
        );
        let neigh = "10.1.0.1 dev eth0 lladdr 02:7c:00:00:01:00 PERMANENT";
        assert_eq!(mac_in(neigh, "lladdr"), Some([0x02, 0x7c, 0, 0, 1, 0]));
        assert_eq!(mac_in("10.1.0.1 dev eth0 FAILED", "lladdr"), None);
        assert_eq!(mac_in("lladdr 02:7c:zz:00:01:00", "lladdr"), None);
        assert_eq!(mac_in("lladdr 02:7c:00", "lladdr"), None);
    }
}
