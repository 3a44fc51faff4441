//! Engines' liveness: heartbeats over UDP on the underlay, beside the data
//! rings.
//!
//! The dispatcher's [`Beacon`] sends each engine a ping every `interval`
//! (100 ms by default) from one UDP socket; each engine's [`Responder`]
//! answers with a pong carrying the same sequence number. An engine whose
//! last pong is older than `misses` intervals (3) is marked down: the
//! [`Liveness`] mask the worker reads loses its bit, so no frame goes to
//! it and its flows are re-hashed to the others; the change is counted
//! and logged. Its first pong after that marks it up again. An engine
//! never heard from is down.
//!
//! Wire format (16 bytes, big endian): `"VRHB"`, version 1, kind (1 ping,
//! 2 pong), engine index (u16), sequence (u32), and 4 reserved zero bytes.
//! Anything else is counted (`bad`) and ignored.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::engines::MAX_ENGINES;

/// Length of a heartbeat.
pub const BEAT_LEN: usize = 16;
const MAGIC: &[u8; 4] = b"VRHB";
const VERSION: u8 = 1;
const PING: u8 = 1;
const PONG: u8 = 2;

/// Default heartbeat period.
pub const INTERVAL: Duration = Duration::from_millis(100);
/// Default periods without a pong before an engine is down.
pub const MISSES: u32 = 3;

fn beat(kind: u8, engine: u16, seq: u32) -> [u8; BEAT_LEN] {
    let mut b = [0u8; BEAT_LEN];
    b[0..4].copy_from_slice(MAGIC);
    b[4] = VERSION;
    b[5] = kind;
    b[6..8].copy_from_slice(&engine.to_be_bytes());
    b[8..12].copy_from_slice(&seq.to_be_bytes());
    b
}

/// `(kind, engine, seq)` of a valid heartbeat.
fn parse(b: &[u8]) -> Option<(u8, u16, u32)> {
    if b.len() != BEAT_LEN || &b[0..4] != MAGIC || b[4] != VERSION || b[12..16] != [0; 4] {
        return None;
    }
    let kind = b[5];
    if kind != PING && kind != PONG {
        return None;
    }
    let engine = u16::from_be_bytes([b[6], b[7]]);
    Some((kind, engine, u32::from_be_bytes([b[8], b[9], b[10], b[11]])))
}

/// Whether Ethernet frame `f` is a heartbeat (an IPv4 UDP datagram
/// carrying a valid ping or pong): the data path's copy of what the
/// heartbeat sockets get from the kernel, counted as a heartbeat rather
/// than a drop. Reads only the headers: no allocation.
pub fn is_heartbeat_frame(f: &[u8]) -> bool {
    // Ethernet (no VLAN tag), IPv4, UDP.
    if f.len() < 14 + 20 + 8 + BEAT_LEN || f[12..14] != [0x08, 0x00] || f[14] >> 4 != 4 {
        return false;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let udp = 14 + ihl;
    if ihl < 20 || f[23] != 17 || f.len() < udp + 8 + BEAT_LEN {
        return false;
    }
    let len = usize::from(u16::from_be_bytes([f[udp + 4], f[udp + 5]]));
    len == 8 + BEAT_LEN && parse(&f[udp + 8..udp + 8 + BEAT_LEN]).is_some()
}

/// An engine's state as the dispatcher sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineState {
    /// Answering.
    Up,
    /// Never answered, or missed too many.
    Down,
}

impl EngineState {
    /// Name in the API and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            EngineState::Up => "up",
            EngineState::Down => "down",
        }
    }
}

/// One engine's heartbeat counters.
#[derive(Debug, Default)]
pub struct EngineBeats {
    /// When its last pong came, in ns since the [`Liveness`] was made
    /// (0: never).
    pub last_heard_ns: AtomicU64,
    /// Pings sent.
    pub sent: AtomicU64,
    /// Pongs received.
    pub heard: AtomicU64,
    /// Times it was marked down.
    pub downs: AtomicU64,
    /// Times it was marked up.
    pub ups: AtomicU64,
}

/// The engines' liveness, shared by the beacon (writer) and the worker,
/// API and metrics (readers).
#[derive(Debug)]
pub struct Liveness {
    epoch: Instant,
    live: AtomicU64,
    /// Engines whose etcd lease holds (all without etcd).
    leased: AtomicU64,
    /// Advertised capacities (0: the configured one).
    capacity: Vec<AtomicU64>,
    /// Bumped when `capacity` changes.
    version: AtomicU64,
    engines: Vec<EngineBeats>,
    /// Heartbeats that did not parse or came from elsewhere.
    pub bad: AtomicU64,
}

impl Liveness {
    /// Liveness of `n` engines (at most [`MAX_ENGINES`]), all down.
    pub fn new(n: usize) -> Self {
        Self {
            epoch: Instant::now(),
            live: AtomicU64::new(0),
            leased: AtomicU64::new(!0),
            capacity: (0..n.min(MAX_ENGINES)).map(|_| AtomicU64::new(0)).collect(),
            version: AtomicU64::new(0),
            engines: (0..n.min(MAX_ENGINES))
                .map(|_| EngineBeats::default())
                .collect(),
            bad: AtomicU64::new(0),
        }
    }

    /// Liveness of `n` engines that goes on from `old`'s: engine `i` is
    /// `old`'s engine `from[i]` if any (its state, counters, lease and
    /// capacity carried over), else new and down. The same clock, so the
    /// times of the last answers still hold.
    pub fn carried(n: usize, old: &Liveness, from: &[Option<usize>]) -> Self {
        let l = Self {
            epoch: old.epoch,
            ..Self::new(n)
        };
        let (old_live, old_leased) = (old.live.load(Ordering::Relaxed), old.leased());
        let (mut live, mut leased) = (0u64, 0u64);
        for (i, e) in l.engines.iter().enumerate() {
            let Some(j) = from
                .get(i)
                .copied()
                .flatten()
                .filter(|&j| j < old.engines.len())
            else {
                continue;
            };
            let o = &old.engines[j];
            for (to, from) in [
                (&e.last_heard_ns, &o.last_heard_ns),
                (&e.sent, &o.sent),
                (&e.heard, &o.heard),
                (&e.downs, &o.downs),
                (&e.ups, &o.ups),
            ] {
                to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            l.capacity[i].store(old.capacity[j].load(Ordering::Relaxed), Ordering::Relaxed);
            live |= (old_live >> j & 1) << i;
            leased |= (old_leased >> j & 1) << i;
        }
        l.live.store(live, Ordering::Relaxed);
        l.leased.store(leased, Ordering::Relaxed);
        l.bad
            .store(old.bad.load(Ordering::Relaxed), Ordering::Relaxed);
        l
    }

    /// Which engines are up (answering heartbeats, and with a lease in
    /// etcd when there is one), one bit each.
    #[inline]
    pub fn live(&self) -> u64 {
        // Relaxed: flag words; the data path acts on a recent value.
        self.live.load(Ordering::Relaxed) & self.leased.load(Ordering::Relaxed)
    }

    /// Which engines hold a lease in etcd (all without etcd).
    pub fn leased(&self) -> u64 {
        self.leased.load(Ordering::Relaxed)
    }

    /// Set which engines hold a lease in etcd (the etcd agent's).
    pub fn set_leased(&self, mask: u64) {
        self.leased.store(mask, Ordering::Relaxed);
    }

    /// Engine `i`'s advertised capacity (pps; `None`: not advertised).
    pub fn capacity(&self, i: usize) -> Option<u64> {
        let c = self.capacity.get(i)?.load(Ordering::Relaxed);
        (c != 0).then_some(c)
    }

    /// Set engine `i`'s advertised capacity (0: none).
    pub fn set_capacity(&self, i: usize, pps: u64) {
        if let Some(c) = self.capacity.get(i)
            && c.swap(pps, Ordering::Relaxed) != pps
        {
            self.version.fetch_add(1, Ordering::Release);
        }
    }

    /// Changes of the advertised capacities so far.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Set which engines are up, for a cluster without heartbeats (all
    /// up) or a test; a running [`Beacon`] overwrites it each period.
    pub fn force(&self, mask: u64) {
        self.live.store(mask, Ordering::Relaxed);
    }

    /// Number of engines.
    pub fn len(&self) -> usize {
        self.engines.len()
    }

    /// Whether it follows no engine.
    pub fn is_empty(&self) -> bool {
        self.engines.is_empty()
    }

    /// Engine `i`'s state.
    pub fn state(&self, i: usize) -> EngineState {
        match i < 64 && self.live() & (1 << i) != 0 {
            true => EngineState::Up,
            false => EngineState::Down,
        }
    }

    /// Engine `i`'s counters.
    pub fn engine(&self, i: usize) -> Option<&EngineBeats> {
        self.engines.get(i)
    }

    /// How long ago engine `i` last answered, if ever.
    pub fn since_heard(&self, i: usize) -> Option<Duration> {
        let at = self.engines.get(i)?.last_heard_ns.load(Ordering::Relaxed);
        (at != 0).then(|| {
            let now = self.epoch.elapsed().as_nanos() as u64;
            Duration::from_nanos(now.saturating_sub(at))
        })
    }

    fn heard(&self, i: usize) {
        if let Some(e) = self.engines.get(i) {
            let now = (self.epoch.elapsed().as_nanos() as u64).max(1);
            e.last_heard_ns.store(now, Ordering::Relaxed);
            e.heard.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Mark engines up or down by how long ago they answered; logs and
    /// counts each change.
    fn judge(&self, names: &[String], dead_after: Duration) {
        let mut live = self.live.load(Ordering::Relaxed);
        for (i, e) in self.engines.iter().enumerate() {
            let up = self.since_heard(i).is_some_and(|d| d <= dead_after);
            let was = live & (1 << i) != 0;
            if up && !was {
                live |= 1 << i;
                e.ups.fetch_add(1, Ordering::Relaxed);
                tracing::info!(engine = %names[i], "engine up");
            } else if !up && was {
                live &= !(1 << i);
                e.downs.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(engine = %names[i], "engine down: no heartbeat for {dead_after:?}; its flows move to the others");
            }
        }
        self.live.store(live, Ordering::Relaxed);
    }
}

/// The dispatcher's side: pings the engines, judges them from the pongs.
pub struct Beacon {
    liveness: Arc<Liveness>,
    stop: Arc<AtomicBool>,
    /// The thread hands its socket back when it stops.
    thread: Option<JoinHandle<UdpSocket>>,
    interval: Duration,
    misses: u32,
}

impl Beacon {
    /// Ping `engines` (name, heartbeat address) every `interval` from a
    /// socket bound to `bind`; an engine is down after `misses` periods
    /// without a pong.
    ///
    /// # Errors
    /// The socket cannot be bound or set up.
    pub fn start(
        bind: SocketAddr,
        engines: Vec<(String, SocketAddr)>,
        interval: Duration,
        misses: u32,
    ) -> io::Result<Self> {
        let sock = UdpSocket::bind(bind)?;
        sock.set_read_timeout(Some(interval / 4))?;
        let liveness = Arc::new(Liveness::new(engines.len()));
        let mut b = Self {
            liveness,
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
            interval,
            misses,
        };
        b.spawn(sock, engines)?;
        Ok(b)
    }

    fn spawn(&mut self, sock: UdpSocket, engines: Vec<(String, SocketAddr)>) -> io::Result<()> {
        let (l, s) = (self.liveness.clone(), self.stop.clone());
        let (interval, misses) = (self.interval, self.misses);
        let thread = std::thread::Builder::new()
            .name("vrhost-beacon".into())
            .spawn(move || {
                beacon_loop(&sock, &engines, interval, misses, &l, &s);
                sock
            })?;
        self.thread = Some(thread);
        Ok(())
    }

    /// Ping `engines` from now on, keeping their states in `liveness`
    /// (indexed as `engines`; see [`Liveness::carried`]), from the same
    /// socket.
    ///
    /// # Errors
    /// The thread cannot be started again (the beacon then pings no one).
    pub fn follow(
        &mut self,
        engines: Vec<(String, SocketAddr)>,
        liveness: Arc<Liveness>,
    ) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        let sock = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(s)) => s,
            _ => return Err(io::Error::other("the beacon's thread is gone")),
        };
        self.stop = Arc::new(AtomicBool::new(false));
        self.liveness = liveness;
        self.spawn(sock, engines)
    }

    /// The liveness it keeps.
    pub fn liveness(&self) -> &Arc<Liveness> {
        &self.liveness
    }
}

impl Drop for Beacon {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn beacon_loop(
    sock: &UdpSocket,
    engines: &[(String, SocketAddr)],
    interval: Duration,
    misses: u32,
    l: &Liveness,
    stop: &AtomicBool,
) {
    let names: Vec<String> = engines.iter().map(|(n, _)| n.clone()).collect();
    let dead_after = interval * misses;
    let mut seq = 0u32;
    let mut next = Instant::now();
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() >= next {
            seq = seq.wrapping_add(1);
            for (i, (_, addr)) in engines.iter().enumerate().take(MAX_ENGINES) {
                if sock.send_to(&beat(PING, i as u16, seq), addr).is_ok()
                    && let Some(e) = l.engine(i)
                {
                    e.sent.fetch_add(1, Ordering::Relaxed);
                }
            }
            next += interval;
        }
        // Pongs until the read times out (a quarter period).
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            match parse(&buf[..n]) {
                Some((PONG, i, _))
                    if engines.get(usize::from(i)).is_some_and(|(_, a)| *a == from) =>
                {
                    l.heard(usize::from(i));
                }
                _ => {
                    l.bad.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        l.judge(&names, dead_after);
    }
}

/// The engine's side: answers pings.
pub struct Responder {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Pings answered.
    pub answered: Arc<AtomicU64>,
}

impl Responder {
    /// Answer pings on `bind`.
    ///
    /// # Errors
    /// The socket cannot be bound or set up.
    pub fn start(bind: SocketAddr) -> io::Result<Self> {
        let sock = UdpSocket::bind(bind)?;
        let addr = sock.local_addr()?;
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let (s, a) = (stop.clone(), answered.clone());
        let thread = std::thread::Builder::new()
            .name("vrhost-heartbeat".into())
            .spawn(move || {
                let mut buf = [0u8; 64];
                while !s.load(Ordering::Relaxed) {
                    let Ok((n, from)) = sock.recv_from(&mut buf) else {
                        continue;
                    };
                    if let Some((PING, i, seq)) = parse(&buf[..n])
                        && sock.send_to(&beat(PONG, i, seq), from).is_ok()
                    {
                        a.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })?;
        Ok(Self {
            addr,
            stop,
            thread: Some(thread),
            answered,
        })
    }

    /// The address it answers on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
#[path = "heartbeat_tests.rs"]
mod tests;
