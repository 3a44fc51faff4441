//! `vrhost-testvr vr-hostile`: a VR process that breaks every rule of the region
//! protocol it can, as fast as it can, to show that the host contains it.
//!
//! It attaches like any VR ([`vrhost_sdk::runtime::handshake`], then
//! ready), and then, round after round, picks a case at random (weighted)
//! and does it to its own region:
//!
//! | case            | what it writes                                              | the host should count |
//! |-----------------|-------------------------------------------------------------|-----------------------|
//! | `honest`        | takes what its rx rings hold, returns it PROCESSED on the other vNIC, puts back the ring indexes it scribbled | nothing (frames go out) |
//! | `double_return` | returns each slot of a batch twice                          | `slot_not_owned`      |
//! | `out_of_range`  | slot indexes `>= slot_count` on a tx ring                   | `slot_index`          |
//! | `not_owned`     | random slot indexes it does not hold                        | `slot_not_owned`      |
//! | `bad_state`     | returns slots left FILLED or set EMPTY                      | `slot_state`          |
//! | `huge_length`   | returns slots whose offset + length pass the slot, or runts | `extent`              |
//! | `state_flip`    | flips random slots' states (the host's too), and flips returned ones back to FILLED right after the push | `slot_state` (when it wins the race) |
//! | `tx_backwards`  | a tx ring's producer index behind the host's tail           | `tx_ring_index`       |
//! | `tx_beyond`     | a tx ring's producer index more than a ring ahead           | `tx_ring_index`       |
//! | `tx_ahead`      | a tx ring's producer index ahead of the entries it wrote (the host reads stale entries) | `slot_not_owned`, `slot_index` |
//! | `rx_backwards`  | an rx ring's consumer index moved backwards                 | `rx_ring_index`       |
//! | `rx_beyond`     | an rx ring's consumer index past the host's head            | `rx_ring_index`       |
//! | `ring_reset`    | a ring's index that the VR writes set to zero (tx producer, rx consumer; the other index is the host's, which it never reads back) | ring index violations |
//! | `garbage_bytes` | random bytes over random slots (the host's free ones too)   | nothing (the host copies frames in before it publishes them; a garbled frame is the VR's own) |
//! | `sleep_flag`    | claims to sleep while it spins (the host rings its doorbell on every burst) | `kicks` grow |
//! | `host_bell`     | rings the host's doorbell                                   | nothing               |
//! | `flood`         | fills a tx ring with out-of-range indexes as fast as the host empties it | `slot_index` |
//!
//! Everything goes through the region's safe accessors (ring words and
//! slot metadata are atomics; slot bytes are written with `write_slot`):
//! this program needs no `unsafe` to be hostile, because the region is
//! shared memory and any value in it is possible.
//!
//! Its config (`[vrs.config]` in the daemon's file, JSON in the hello):
//! `seed` (u64), `rate` (rounds per second, 0 = as fast as it can, the
//! default), `weights` (case name to relative weight; a case not named
//! keeps its default weight, 0 turns it off), `report_file` (where to write
//! its own counters as JSON when it stops). It exits when the host says
//! Stop or closes the control socket (it looks at the socket, non-blocking,
//! every [`LOOK_EVERY`] rounds), and dies with the host (PDEATHSIG).

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use vrhost_proto::{HostMsg, MAX_MSG, VrReply};
use vrhost_sdk::runtime::{Handshake, RuntimeError, handshake};
use vrhost_shm::fdpass::{FdPassError, recv_with_fds, send_with_fds};
use vrhost_shm::{Doorbell, Region, RingId, RingMem, SlotState};

/// Rounds between two looks at the control socket (one `recvmsg` each).
pub const LOOK_EVERY: u64 = 256;

/// Slots taken from an rx ring per round.
const BATCH: usize = 32;

macro_rules! cases {
    ($($v:ident = $s:literal, $w:literal;)*) => {
        /// What one round does.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Case { $($v,)* }
        impl Case {
            /// Every case, in report order.
            pub const ALL: &[Case] = &[$(Case::$v,)*];
            /// Its name in the config and the report.
            pub fn name(self) -> &'static str { match self { $(Case::$v => $s,)* } }
            /// Its weight when the config does not name it.
            pub fn default_weight(self) -> u32 { match self { $(Case::$v => $w,)* } }
        }
    };
}

cases! {
    Honest = "honest", 30;
    DoubleReturn = "double_return", 6;
    OutOfRange = "out_of_range", 6;
    NotOwned = "not_owned", 6;
    BadState = "bad_state", 6;
    HugeLength = "huge_length", 6;
    StateFlip = "state_flip", 6;
    TxBackwards = "tx_backwards", 4;
    TxBeyond = "tx_beyond", 4;
    TxAhead = "tx_ahead", 3;
    RxBackwards = "rx_backwards", 4;
    RxBeyond = "rx_beyond", 4;
    RingReset = "ring_reset", 2;
    GarbageBytes = "garbage_bytes", 3;
    SleepFlag = "sleep_flag", 2;
    HostBell = "host_bell", 1;
    Flood = "flood", 2;
}

/// The hostile VR's config (`[vrs.config]`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostileConfig {
    /// Seed of its random choices.
    pub seed: u64,
    /// Rounds per second at most; 0: as fast as it can.
    pub rate: u64,
    /// Relative weight of each case by name; 0 turns a case off.
    pub weights: BTreeMap<String, u32>,
    /// Write the report (JSON) to this file when stopped.
    pub report_file: Option<String>,
}

impl HostileConfig {
    /// The weight of every case, in [`Case::ALL`] order.
    ///
    /// # Errors
    /// An unknown case name, or every weight 0.
    pub fn weights(&self) -> Result<Vec<u32>, String> {
        for k in self.weights.keys() {
            if !Case::ALL.iter().any(|c| c.name() == k) {
                let names: Vec<&str> = Case::ALL.iter().map(|c| c.name()).collect();
                return Err(format!(
                    "weights: no case {k:?} (cases: {})",
                    names.join(", ")
                ));
            }
        }
        let w: Vec<u32> = Case::ALL
            .iter()
            .map(|c| {
                self.weights
                    .get(c.name())
                    .copied()
                    .unwrap_or(c.default_weight())
            })
            .collect();
        if w.iter().all(|&x| x == 0) {
            return Err("weights: every case is off".into());
        }
        Ok(w)
    }
}

/// What it did, written to `report_file` when it stops.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostileReport {
    /// Rounds done.
    pub rounds: u64,
    /// Milliseconds from ready to stop.
    pub millis: u64,
    /// Rounds per case.
    pub cases: BTreeMap<String, u64>,
    /// Slots taken from its rx rings.
    pub taken: u64,
    /// Slots returned the right way (PROCESSED, once, on a ring whose
    /// indexes were right when pushed).
    pub returned_ok: u64,
    /// Words written against the protocol (indexes, states, extents,
    /// ring indexes).
    pub bad_writes: u64,
    /// Distinct `memfd:vrhost-*` regions in its own address space (1: only
    /// its own; a VR cannot see another's).
    pub regions_mapped: u64,
    /// Open descriptors on `memfd:vrhost-*` files.
    pub region_fds: u64,
}

/// A small, fast, seeded random source (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

/// One hostile instance and where its rings really are.
struct Hostile {
    region: Region,
    instance: u16,
    vnics: u16,
    slot_count: u32,
    slot_bytes: u32,
    ring_size: u32,
    rx: Vec<RingMem>,
    tx: Vec<RingMem>,
    /// Our real consumer index per rx ring (what the host last saw from
    /// an honest round).
    rx_tail: Vec<u32>,
    /// Our real producer index per tx ring.
    tx_head: Vec<u32>,
    /// What we wrote at each position of each tx ring: moving the
    /// producer index writes the entry before it (the ring API publishes
    /// an entry with each index), and it writes this value, so no entry
    /// of ours is ever replaced.
    tx_shadow: Vec<Vec<u32>>,
    /// The host's rx producer index as last seen sane (the host does not
    /// write it again until it publishes more, so after we scribble it we
    /// go by this).
    rx_prod_seen: Vec<u32>,
    /// The host's tx consumer index as last seen sane (likewise: it is
    /// written only when the host takes entries).
    tx_cons_seen: Vec<u32>,
    /// Slots taken but not yet pushed (a tx ring was full): (vNIC, slot).
    pending: Vec<(u16, u32)>,
    host_bell: Doorbell,
    rng: Rng,
    report: HostileReport,
}

impl Hostile {
    fn new(hs: &Handshake, seed: u64) -> Result<Self, RuntimeError> {
        let cfg = hs.region.layout().cfg;
        let missing =
            || RuntimeError::Setup(format!("instance {} not in region", hs.hello.instance));
        let inst = hs.hello.instance;
        let rx = (0..cfg.vnic_count)
            .map(|v| hs.region.ring(inst, RingId::Rx(v)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(missing)?;
        let tx = (0..cfg.vnic_count)
            .map(|v| hs.region.ring(inst, RingId::Tx(v)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(missing)?;
        if hs.region.instance(inst).is_none() || rx.is_empty() {
            return Err(missing());
        }
        let n = rx.len();
        Ok(Self {
            region: hs.region.clone(),
            instance: inst,
            vnics: cfg.vnic_count,
            slot_count: cfg.slot_count,
            slot_bytes: cfg.slot_bytes,
            ring_size: rx[0].size(),
            // The host starts the rings at zero.
            rx_tail: vec![0; n],
            tx_head: vec![0; n],
            tx_shadow: vec![vec![0; rx[0].size() as usize]; n],
            rx_prod_seen: vec![0; n],
            tx_cons_seen: vec![0; n],
            rx,
            tx,
            pending: Vec::new(),
            host_bell: Doorbell::from_fd(
                hs.host_bell
                    .fd()
                    .try_clone_to_owned()
                    .map_err(|e| RuntimeError::Setup(format!("dup host doorbell: {e}")))?,
            ),
            rng: Rng::new(seed),
            report: HostileReport::default(),
        })
    }

    fn vnic(&mut self) -> u16 {
        self.rng.below(u64::from(self.vnics)) as u16
    }

    fn out_of(&self, v: u16) -> u16 {
        if v ^ 1 < self.vnics { v ^ 1 } else { v }
    }

    /// Write `value` as tx ring `v`'s producer index (the entry before it
    /// is written again with what it holds).
    fn set_tx_prod(&self, v: u16, value: u32) {
        let i = usize::from(v);
        let at = value.wrapping_sub(1);
        let entry = self.tx_shadow[i][(at & (self.ring_size - 1)) as usize];
        let _ = self.tx[i].clone().producer_at(at, at).push(&[entry]);
    }

    /// Write `value` as rx ring `v`'s consumer index.
    fn set_rx_cons(&self, v: u16, value: u32) {
        let mut one = [0u32; 1];
        let _ = self.rx[usize::from(v)]
            .clone()
            .consumer_at(value.wrapping_sub(1), value)
            .pop(&mut one);
    }

    /// Put back every ring index we scribbled, and follow the host if it
    /// consumed past our head (it read stale entries after `tx_ahead`).
    fn restore(&mut self) {
        for v in 0..self.vnics {
            let i = usize::from(v);
            let (_, cons) = self.rx[i].indexes();
            if cons != self.rx_tail[i] {
                self.set_rx_cons(v, self.rx_tail[i]);
            }
            self.tx_cons(v);
            let (prod, _) = self.tx[i].indexes();
            if prod != self.tx_head[i] {
                self.set_tx_prod(v, self.tx_head[i]);
            }
        }
        if let Some(b) = self.region.instance(self.instance) {
            vrhost_shm::cancel_sleep(&b.vr_sleeping);
        }
    }

    /// The host's tx consumer index on ring `v`: the one in memory if it is
    /// sane (not behind the last seen, not past our head, or past it by
    /// at most a ring when the host read stale entries: then our head
    /// follows), else the last seen.
    fn tx_cons(&mut self, v: u16) -> u32 {
        let i = usize::from(v);
        let size = self.ring_size;
        let (_, cons) = self.tx[i].indexes();
        let fwd = cons.wrapping_sub(self.tx_cons_seen[i]);
        let ahead = cons.wrapping_sub(self.tx_head[i]);
        if ahead > 0 && ahead <= size && fwd <= 2 * size {
            self.tx_head[i] = cons;
            self.tx_cons_seen[i] = cons;
        } else if fwd <= size && self.tx_head[i].wrapping_sub(cons) <= size {
            self.tx_cons_seen[i] = cons;
        }
        self.tx_cons_seen[i]
    }

    /// The host's rx producer index on ring `v`, the same way.
    fn rx_prod(&mut self, v: u16) -> u32 {
        let i = usize::from(v);
        let size = self.ring_size;
        let (prod, _) = self.rx[i].indexes();
        if prod.wrapping_sub(self.rx_prod_seen[i]) <= size
            && prod.wrapping_sub(self.rx_tail[i]) <= size
        {
            self.rx_prod_seen[i] = prod;
        }
        self.rx_prod_seen[i]
    }

    /// Take up to [`BATCH`] slots from each rx ring, where the ring really
    /// is.
    fn take(&mut self) -> Vec<(u16, u32)> {
        let mut got = Vec::new();
        let mut idx = [0u32; BATCH];
        for v in 0..self.vnics {
            let i = usize::from(v);
            let t = self.rx_tail[i];
            let prod = self.rx_prod(v);
            let avail = prod.wrapping_sub(t);
            if avail > self.ring_size {
                continue;
            }
            // No more than the entries known to be there: the pop then
            // does not read the (maybe scribbled) index again.
            let want = (avail as usize).min(BATCH);
            let mut c = self.rx[i].clone().consumer_at(t, prod);
            if let Ok(n) = c.pop(&mut idx[..want]) {
                self.rx_tail[i] = c.tail();
                got.extend(idx[..n].iter().map(|&s| (v, s)));
            }
        }
        self.report.taken += got.len() as u64;
        got
    }

    /// Push `items` on tx ring `v` where it really is; returns how many
    /// went.
    fn push(&mut self, v: u16, items: &[u32]) -> usize {
        if items.is_empty() {
            return 0;
        }
        let i = usize::from(v);
        let cons = self.tx_cons(v);
        let used = self.tx_head[i].wrapping_sub(cons);
        if used > self.ring_size {
            return 0;
        }
        // No more than the room known: the push then does not read the
        // (maybe scribbled) index again.
        let n = items.len().min((self.ring_size - used) as usize);
        let mut p = self.tx[i].clone().producer_at(self.tx_head[i], cons);
        match p.push(&items[..n]) {
            Ok(n) if n > 0 => {
                let mask = self.ring_size - 1;
                for (k, &x) in items[..n].iter().enumerate() {
                    let at = self.tx_head[i].wrapping_add(k as u32) & mask;
                    self.tx_shadow[i][at as usize] = x;
                }
                self.tx_head[i] = p.head();
                n
            }
            _ => 0,
        }
    }

    /// Return slots PROCESSED on the other vNIC; what does not fit waits.
    fn return_ok(&mut self, slots: &[(u16, u32)]) {
        let mut by_out: Vec<Vec<u32>> = vec![Vec::new(); usize::from(self.vnics)];
        for &(v, s) in slots {
            if let Some(m) = self.region.meta(s) {
                m.set(SlotState::Processed);
            }
            by_out[usize::from(self.out_of(v))].push(s);
        }
        for (o, list) in by_out.iter().enumerate() {
            let n = self.push(o as u16, list);
            self.report.returned_ok += n as u64;
            // Those that did not fit go back as coming from vNIC `o ^ 1`,
            // so their out vNIC stays `o`.
            let from = self.out_of(o as u16);
            self.pending.extend(list[n..].iter().map(|&s| (from, s)));
        }
    }

    /// Push slot `s` (taken on vNIC `v`) as it is to the other vNIC's tx
    /// ring, or keep it for an honest round if the ring is full (so no
    /// slot is hoarded for good); true if it went.
    fn push_or_keep(&mut self, v: u16, s: u32) -> bool {
        let out = self.out_of(v);
        if self.push(out, &[s]) == 1 {
            self.report.bad_writes += 1;
            true
        } else {
            self.pending.push((v, s));
            false
        }
    }
}

/// What a look at the control socket says.
enum Look {
    Open,
    Stop,
}

/// Read what the host sent (non-blocking): Stop or a closed socket stop
/// us; a control request is refused.
fn look(ctrl: std::os::fd::BorrowedFd<'_>, buf: &mut [u8]) -> Look {
    loop {
        let n = match recv_with_fds(ctrl, buf) {
            Ok((n, _fds)) => n,
            Err(FdPassError::Syscall { source, .. }) => match source.kind() {
                ErrorKind::WouldBlock => return Look::Open,
                ErrorKind::Interrupted => continue,
                _ => return Look::Stop,
            },
            Err(FdPassError::Truncated) => continue,
            Err(_) => return Look::Stop,
        };
        match serde_json::from_slice::<HostMsg>(&buf[..n]) {
            Ok(HostMsg::Stop) => return Look::Stop,
            Ok(HostMsg::Control { id, .. }) => {
                let r = VrReply::Control {
                    id,
                    result: Err("the hostile VR takes no control messages".into()),
                };
                let _ = send_with_fds(ctrl, &serde_json::to_vec(&r).unwrap_or_default(), &[]);
            }
            Err(_) => {}
        }
    }
}

/// Distinct `memfd:vrhost-*` mappings and descriptors this process has.
fn regions_visible() -> (u64, u64) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut names: Vec<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with("/memfd:vrhost-"))
        .collect();
    names.sort_unstable();
    names.dedup();
    let fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|p| p.to_string_lossy().starts_with("/memfd:vrhost-"))
                .count()
        })
        .unwrap_or(0);
    (names.len() as u64, fds as u64)
}

/// Pick a case by weight.
fn pick(rng: &mut Rng, cumulative: &[u64]) -> Case {
    let total = cumulative.last().copied().unwrap_or(0);
    let r = rng.below(total);
    let i = cumulative.partition_point(|&c| c <= r);
    Case::ALL[i.min(Case::ALL.len() - 1)]
}

/// `vrhost-testvr vr-hostile`: the whole life of the hostile VR process.
pub fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vrhost-testvr vr-hostile: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), RuntimeError> {
    let hs = handshake()?;
    let setup = (|| {
        let cfg: HostileConfig = serde_json::from_value(hs.hello.config.clone())
            .map_err(|e| RuntimeError::Setup(format!("hostile VR config: {e}")))?;
        let weights = cfg.weights().map_err(RuntimeError::Setup)?;
        let hostile = Hostile::new(&hs, cfg.seed)?;
        Ok((cfg, weights, hostile))
    })();
    let (cfg, weights, mut h) = match setup {
        Ok(v) => v,
        Err(e) => {
            hs.ctrl.reply_error(&e);
            return Err(e);
        }
    };
    let (regions, fds) = regions_visible();
    h.report.regions_mapped = regions;
    h.report.region_fds = fds;
    let cumulative: Vec<u64> = weights
        .iter()
        .scan(0u64, |acc, &w| {
            *acc += u64::from(w);
            Some(*acc)
        })
        .collect();
    let mut per_case = vec![0u64; Case::ALL.len()];
    if let Some(b) = h.region.instance(h.instance) {
        // Relaxed: a display value.
        b.vr_pid.store(std::process::id(), Ordering::Relaxed);
    }
    hs.ctrl.ready();
    let mut buf = vec![0u8; MAX_MSG];
    let start = Instant::now();
    let mut rounds = 0u64;
    loop {
        rounds += 1;
        if rounds.is_multiple_of(LOOK_EVERY) {
            if let Look::Stop = look(hs.ctrl.fd(), &mut buf) {
                break;
            }
            if let Some(b) = h.region.instance(h.instance) {
                // Relaxed: a liveness counter.
                b.heartbeat.store(rounds, Ordering::Relaxed);
            }
            if cfg.rate > 0 {
                // Ahead of `rate`: wait until the next round is due.
                let due = Duration::from_secs_f64(rounds as f64 / cfg.rate as f64);
                if let Some(wait) = due.checked_sub(start.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
        }
        let case = pick(&mut h.rng, &cumulative);
        per_case[case as usize] += 1;
        h.round(case);
    }
    h.report.rounds = rounds;
    h.report.millis = start.elapsed().as_millis() as u64;
    h.report.cases = Case::ALL
        .iter()
        .zip(&per_case)
        .map(|(c, &n)| (c.name().to_string(), n))
        .collect();
    if let Some(f) = &cfg.report_file
        && let Err(e) = std::fs::write(f, serde_json::to_vec_pretty(&h.report).unwrap_or_default())
    {
        eprintln!("vrhost-testvr vr-hostile: {f}: {e}");
    }
    Ok(())
}

mod cases;
#[cfg(test)]
mod tests;
