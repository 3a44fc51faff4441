//! The VR side of the data path: attach to the region, poll the rx rings,
//! process each packet in place, push it to a tx ring; back off when idle.
//!
//! [`run`] is the whole life of a VR process (used by the built-in router and
//! by custom VRs). [`Instance`] is one instance's poll loop, usable in a
//! thread for tests; [`process_slots`] is the per-batch work, shared with the
//! host's in-process mode so both run literally the same code.

mod ctrl;
#[cfg(test)]
mod peer_tests;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use vrhost_shm::fdpass::{FdPassError, recv_with_fds, send_with_fds};
use vrhost_shm::layout::VR_COUNTERS;
use vrhost_shm::{
    Consumer, Doorbell, LAYOUT_VERSION, Producer, Region, RegionError, RingError, RingId,
    SlotState, cancel_sleep, needs_kick, prepare_sleep,
};

use self::ctrl::{Ctrl, CtrlChannel, LOOK_ROUNDS};
use crate::DropReason;
use crate::backoff::{Backoff, Idle};
use crate::peer::{MSG_WORDS, PeerCounters, Peers};
use crate::proto::{CTRL_FD_ENV, Hello, MAX_MSG, PollConfig, VrReply, counter};
use crate::sdk::{Packet, Verdict, Vr};

/// Packets taken from one rx ring at a time.
pub const BATCH: usize = 64;

/// A VR process could not start or lost its host.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The control socket descriptor is missing or bad.
    #[error("no control socket: {0} (a VR is started by the vrhost daemon, not by hand)")]
    NoCtrl(String),
    /// Talking to the host failed.
    #[error("control socket: {0}")]
    Ctrl(#[from] FdPassError),
    /// The hello message is not valid.
    #[error("bad hello from host: {0}")]
    BadHello(String),
    /// The host runs another layout version.
    #[error("host uses region layout version {host}, this VR was built for version {ours}")]
    Version {
        /// Host's version.
        host: u32,
        /// Ours.
        ours: u32,
    },
    /// Mapping the region failed.
    #[error(transparent)]
    Region(#[from] RegionError),
    /// The VR's own setup refused its config.
    #[error("VR setup failed: {0}")]
    Setup(String),
    /// A ring index written by the host is impossible.
    #[error("ring corrupt: {0}")]
    Ring(#[from] RingError),
}

/// Staged slot indexes per out vNIC, waiting for room in their tx ring;
/// and the slots of the batch in hand.
#[derive(Debug)]
pub struct TxStage {
    per_vnic: Vec<Vec<u32>>,
    /// One bit per slot of the region: set while the slot is part of the
    /// burst being processed, so that an index given twice is refused
    /// rather than handed to the VR as two aliasing packets. Sized on
    /// first use.
    in_burst: Vec<u64>,
}

impl TxStage {
    /// Room for `BATCH` per vNIC, allocated once.
    pub fn new(vnics: u16) -> Self {
        Self {
            per_vnic: (0..vnics).map(|_| Vec::with_capacity(2 * BATCH)).collect(),
            in_burst: Vec::new(),
        }
    }

    /// Mark `slot` as part of the burst; false if it already was. `slot`
    /// must be below the region's slot count (checked by the caller).
    #[inline]
    fn enter_burst(&mut self, slot: u32) -> bool {
        let (w, b) = ((slot / 64) as usize, 1u64 << (slot % 64));
        let word = &mut self.in_burst[w];
        let fresh = *word & b == 0;
        *word |= b;
        fresh
    }

    #[inline]
    fn leave_burst(&mut self, slot: u32) {
        self.in_burst[(slot / 64) as usize] &= !(1u64 << (slot % 64));
    }

    /// Indexes staged for `vnic`.
    pub fn vnic(&mut self, vnic: u16) -> &mut Vec<u32> {
        &mut self.per_vnic[usize::from(vnic)]
    }

    /// True when nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.per_vnic.iter().all(Vec::is_empty)
    }
}

/// What one round did.
#[derive(Debug, Clone, Copy)]
struct Work {
    /// Packets processed.
    packets: usize,
    /// Peer messages sent and received.
    messages: u64,
}

impl Work {
    /// Whether the round found anything to do (the back-off stays busy).
    #[inline]
    fn any(self) -> bool {
        self.packets > 0 || self.messages > 0
    }
}

/// Counters of one VR instance (private, published to the region).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VrCounters {
    /// The values, indexed as [`counter`].
    pub v: [u64; VR_COUNTERS],
}

/// Process the packets in slots `idxs`, received on `rx_vnic`, in place;
/// stage each for the tx ring of its out vNIC (dropped ones go back through
/// the rx vNIC's tx ring in state DROPPED).
///
/// The packets go to [`Vr::process`] one by one, or, if the VR
/// [prefers bursts](Vr::prefers_burst), to [`Vr::process_burst`] in bursts
/// of up to [`BATCH`]. An index out of range, or given twice in one burst,
/// is counted ([`counter::BAD_SLOT`]) and skipped. The VR's own counters
/// are copied into `counters` at the end.
pub fn process_slots<V: Vr + ?Sized>(
    vr: &mut V,
    region: &Region,
    rx_vnic: u16,
    idxs: &[u32],
    stage: &mut TxStage,
    counters: &mut VrCounters,
) {
    let headroom = region.layout().cfg.headroom;
    for &idx in idxs.iter().take(AHEAD) {
        region.prefetch(idx, headroom);
    }
    if vr.prefers_burst() {
        in_bursts(vr, region, rx_vnic, idxs, stage, counters);
    } else {
        one_by_one(vr, region, rx_vnic, idxs, stage, counters);
    }
    publish_own(vr, counters);
}

/// How many packets ahead to prefetch.
const AHEAD: usize = 4;

/// [`process_slots`] with [`Vr::process`].
#[inline]
fn one_by_one<V: Vr + ?Sized>(
    vr: &mut V,
    region: &Region,
    rx_vnic: u16,
    idxs: &[u32],
    stage: &mut TxStage,
    counters: &mut VrCounters,
) {
    let vnics = region.layout().cfg.vnic_count;
    let headroom = region.layout().cfg.headroom;
    for (i, &idx) in idxs.iter().enumerate() {
        if let Some(&next) = idxs.get(i + AHEAD) {
            // The host puts packets at the headroom offset; if a VR moved
            // one, this only misses the hint.
            region.prefetch(next, headroom);
        }
        let Some(meta) = region.meta(idx) else {
            counters.v[counter::BAD_SLOT] += 1;
            continue;
        };
        counters.v[counter::RX] += 1;
        let (off, len) = meta.extent();
        // SAFETY: the host gave us this slot through our rx ring and will not
        // touch it until we push it to a tx ring; no other reference to it
        // exists (one packet at a time).
        let buf = unsafe { region.slot_mut(idx) }.unwrap_or_default();
        let verdict = match Packet::new(buf, off.into(), len.into(), rx_vnic) {
            Some(mut pkt) => {
                let v = vr.process(&mut pkt);
                if let Verdict::Forward(_) = v {
                    meta.set_extent(pkt.offset() as u16, pkt.len() as u16);
                }
                v
            }
            None => Verdict::Drop(DropReason::BadHeader),
        };
        settle(idx, meta, verdict, rx_vnic, vnics, stage, counters);
    }
}

/// [`process_slots`] with [`Vr::process_burst`].
#[inline]
fn in_bursts<V: Vr + ?Sized>(
    vr: &mut V,
    region: &Region,
    rx_vnic: u16,
    idxs: &[u32],
    stage: &mut TxStage,
    counters: &mut VrCounters,
) {
    let vnics = region.layout().cfg.vnic_count;
    let headroom = region.layout().cfg.headroom;
    let words = (region.slot_count() as usize).div_ceil(64);
    if stage.in_burst.len() < words {
        // Once per stage: the region does not change size.
        stage.in_burst.resize(words, 0);
    }
    for (c, chunk) in idxs.chunks(BATCH).enumerate() {
        let mut pkts: [Packet<'_>; BATCH] = std::array::from_fn(|_| Packet::placeholder());
        let mut slots = [0u32; BATCH];
        let mut verdicts = [Verdict::Drop(DropReason::Other); BATCH];
        let mut n = 0;
        for (i, &idx) in chunk.iter().enumerate() {
            if let Some(&next) = idxs.get(c * BATCH + i + AHEAD) {
                region.prefetch(next, headroom);
            }
            let Some(meta) = region.meta(idx) else {
                counters.v[counter::BAD_SLOT] += 1;
                continue;
            };
            if !stage.enter_burst(idx) {
                counters.v[counter::BAD_SLOT] += 1;
                continue;
            }
            counters.v[counter::RX] += 1;
            let (off, len) = meta.extent();
            // SAFETY: the host gave us this slot through our rx ring and will
            // not touch it until we push it to a tx ring; it is in range
            // (meta above) and not yet in this burst (enter_burst above), so
            // this is the only reference to it.
            let buf = unsafe { region.slot_mut(idx) }.unwrap_or_default();
            match Packet::new(buf, off.into(), len.into(), rx_vnic) {
                Some(pkt) => {
                    pkts[n] = pkt;
                    slots[n] = idx;
                    n += 1;
                }
                None => {
                    stage.leave_burst(idx);
                    let bad = Verdict::Drop(DropReason::BadHeader);
                    settle(idx, meta, bad, rx_vnic, vnics, stage, counters);
                }
            }
        }
        vr.process_burst(&mut pkts[..n], &mut verdicts[..n]);
        for ((pkt, &idx), &verdict) in pkts[..n].iter().zip(&slots[..n]).zip(&verdicts[..n]) {
            let meta = region.meta(idx).expect("checked when taken");
            if let Verdict::Forward(_) = verdict {
                meta.set_extent(pkt.offset() as u16, pkt.len() as u16);
            }
            stage.leave_burst(idx);
            settle(idx, meta, verdict, rx_vnic, vnics, stage, counters);
        }
    }
}

/// Copy the VR's own counters after the SDK's.
#[inline]
fn publish_own<V: Vr + ?Sized>(vr: &V, counters: &mut VrCounters) {
    let own = vr.counters();
    let n = own.len().min(counter::VR_SLOTS);
    counters.v[counter::VR_BASE..counter::VR_BASE + n].copy_from_slice(&own[..n]);
}

/// Set the slot's state from its verdict, stage it and count it.
#[inline(always)]
fn settle(
    idx: u32,
    meta: &vrhost_shm::SlotMeta,
    verdict: Verdict,
    rx_vnic: u16,
    vnics: u16,
    stage: &mut TxStage,
    counters: &mut VrCounters,
) {
    match verdict {
        Verdict::Forward(out) if out < vnics => {
            meta.set(SlotState::Processed);
            stage.vnic(out).push(idx);
            counters.v[counter::TX] += 1;
        }
        Verdict::Forward(_) => {
            meta.set(SlotState::Dropped);
            stage.vnic(rx_vnic).push(idx);
            counters.v[counter::DROP_BASE + DropReason::Other as usize] += 1;
        }
        Verdict::Drop(reason) => {
            meta.set(SlotState::Dropped);
            stage.vnic(rx_vnic).push(idx);
            counters.v[counter::DROP_BASE + reason as usize] += 1;
        }
    }
}

/// One VR instance: its rings, doorbells and poll loop.
pub struct Instance {
    region: Region,
    id: u16,
    rx: Vec<Consumer>,
    tx: Vec<Producer>,
    /// Peer messages in (`CtrlIn`), looked at only if the VR uses peers.
    peer_in: Consumer,
    /// Peer messages out (`CtrlOut`).
    peer_out: Producer,
    peer_counts: PeerCounters,
    stage: TxStage,
    counters: VrCounters,
    vr_bell: Doorbell,
    host_bell: Doorbell,
    poll: PollConfig,
    ctrl: CtrlChannel,
}

impl Instance {
    /// Take the rings of instance `id` of `region`.
    ///
    /// # Errors
    /// [`RuntimeError::Setup`] if the instance does not exist.
    pub fn new(
        region: Region,
        id: u16,
        vr_bell: Doorbell,
        host_bell: Doorbell,
        poll: PollConfig,
    ) -> Result<Self, RuntimeError> {
        let vnics = region.layout().cfg.vnic_count;
        let missing = || RuntimeError::Setup(format!("instance {id} not in region"));
        if region.instance(id).is_none() {
            return Err(missing());
        }
        let rx = (0..vnics)
            .map(|v| region.ring(id, RingId::Rx(v)).map(|r| r.consumer()))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(missing)?;
        let tx = (0..vnics)
            .map(|v| region.ring(id, RingId::Tx(v)).map(|r| r.producer()))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(missing)?;
        let peer_in = region.ring(id, RingId::CtrlIn).ok_or_else(missing)?;
        let peer_out = region.ring(id, RingId::CtrlOut).ok_or_else(missing)?;
        Ok(Self {
            stage: TxStage::new(vnics),
            region,
            id,
            rx,
            tx,
            peer_in: peer_in.consumer(),
            peer_out: peer_out.producer(),
            peer_counts: PeerCounters::default(),
            counters: VrCounters::default(),
            vr_bell,
            host_bell,
            poll,
            ctrl: CtrlChannel::new(),
        })
    }

    fn block(&self) -> &vrhost_shm::InstanceBlock {
        self.region.instance(self.id).expect("checked in new")
    }

    /// Push staged indexes to their tx rings; true if all went.
    fn flush(&mut self) -> Result<bool, RuntimeError> {
        let mut pushed = false;
        for (v, staged) in self.stage.per_vnic.iter_mut().enumerate() {
            if staged.is_empty() {
                continue;
            }
            let n = self.tx[v].push(staged)?;
            staged.drain(..n);
            pushed |= n > 0;
        }
        if pushed && needs_kick(&self.block().host_sleeping) {
            self.host_bell.ring();
        }
        Ok(self.stage.is_empty())
    }

    /// One round: the VR's [peer messages](Vr::peers) if it
    /// [uses them](Vr::uses_peers), then flush, then a batch from each rx
    /// ring. Returns packets processed.
    ///
    /// # Errors
    /// [`RuntimeError::Ring`] if the host wrote an impossible ring index.
    pub fn poll_once<V: Vr + ?Sized>(&mut self, vr: &mut V) -> Result<usize, RuntimeError> {
        let mut peers = vr.uses_peers();
        self.round(vr, &mut peers).map(|w| w.packets)
    }

    /// [`Instance::poll_once`] with `uses_peers` asked beforehand (when
    /// [`Instance::run`] starts, and again after each [`Vr::peers`]: a VR
    /// may find there that it has no peer, and says so once).
    #[inline]
    fn round<V: Vr + ?Sized>(
        &mut self,
        vr: &mut V,
        peers: &mut bool,
    ) -> Result<Work, RuntimeError> {
        // Before the data rings: a control message (a route update) is
        // applied before the packets that follow it.
        let messages = if *peers {
            self.peer_round(vr, peers)?
        } else {
            0
        };
        let mut done = 0;
        let mut idx = [0u32; BATCH];
        for v in 0..self.rx.len() {
            if !self.flush()? {
                break; // a tx ring is full: let the host drain it first
            }
            let n = self.rx[v].pop(&mut idx)?;
            if n > 0 {
                process_slots(
                    vr,
                    &self.region,
                    v as u16,
                    &idx[..n],
                    &mut self.stage,
                    &mut self.counters,
                );
                done += n;
            }
        }
        self.flush()?;
        if done > 0 {
            self.publish();
        }
        Ok(Work {
            packets: done,
            messages,
        })
    }

    /// [`Instance::serve_peers`], then ask the VR again whether it uses
    /// peers. Out of line: the data rings' loop stays as tight as for a VR
    /// without peers.
    #[cold]
    #[inline(never)]
    fn peer_round<V: Vr + ?Sized>(
        &mut self,
        vr: &mut V,
        peers: &mut bool,
    ) -> Result<u64, RuntimeError> {
        let n = self.serve_peers(vr)?;
        *peers = vr.uses_peers();
        Ok(n)
    }

    /// Hand the control rings to [`Vr::peers`]; count what it exchanged
    /// and wake the host if it sent something while the host sleeps.
    /// Returns the messages sent and received.
    fn serve_peers<V: Vr + ?Sized>(&mut self, vr: &mut V) -> Result<u64, RuntimeError> {
        let instances = self.region.layout().cfg.instance_count;
        let mut peers = Peers::new(self.id, instances, &mut self.peer_in, &mut self.peer_out);
        vr.peers(&mut peers);
        let (counts, error) = (peers.counts(), peers.ring_error());
        self.peer_counts.add(&counts);
        if let Some(e) = error {
            return Err(e.into());
        }
        if counts.sent > 0 && needs_kick(&self.block().host_sleeping) {
            self.host_bell.ring();
        }
        Ok(counts.sent + counts.received)
    }

    fn publish(&self) {
        let block = self.block();
        for (slot, &v) in block.vr_counters.iter().zip(&self.counters.v) {
            // Relaxed: display counters, single writer.
            slot.store(v, Ordering::Relaxed);
        }
    }

    fn rx_ready(&mut self) -> Result<bool, RuntimeError> {
        for c in &mut self.rx {
            if c.ready()? > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The counters so far.
    pub fn counters(&self) -> VrCounters {
        self.counters
    }

    /// Control messages that could not be read (each answered with an
    /// error).
    pub fn bad_ctrl_messages(&self) -> u64 {
        self.ctrl.bad
    }

    /// Peer messages exchanged so far (see [`Vr::peers`]). Kept here, not
    /// published in the region: the region's counters are all allotted.
    pub fn peer_counters(&self) -> PeerCounters {
        self.peer_counts
    }

    /// Poll until `stop` is set or the control socket says stop (or closes).
    ///
    /// The control socket (non-blocking) is served between rounds, never
    /// in the middle of a batch: at once when it wakes the sleeping
    /// instance, and while the instance is busy (or spinning, or yielding)
    /// once per millisecond at most. That is timed by the coarse clock
    /// (vDSO, about 10 ns) read every 64 rounds, rather than by counting
    /// rounds alone, because a round takes from tens of nanoseconds (an
    /// empty poll) to microseconds (full batches): counting would look
    /// either too often when lightly loaded or too seldom when full. A
    /// look that finds nothing costs one `recvmsg`, about a microsecond per
    /// millisecond (0.1%); a reply comes within a clock tick (1 to 4 ms)
    /// plus the time its change takes. Each look serves messages until
    /// none is pending or 1 ms has gone into them, so that chunks of a
    /// bulk change interleave with packets.
    ///
    /// # Errors
    /// [`RuntimeError::Ring`] on a corrupt ring.
    pub fn run<V: Vr + ?Sized>(
        &mut self,
        vr: &mut V,
        ctrl: Option<BorrowedFd<'_>>,
        stop: &AtomicBool,
    ) -> Result<(), RuntimeError> {
        let mut backoff = Backoff::new(self.poll);
        let mut rounds = 0u64;
        // A VR that does not use peers never has its hook called nor its
        // incoming control ring read; one that stops (it found no peer in
        // the hook) is not asked again.
        let mut peers = vr.uses_peers();
        let pid = rustix::process::getpid().as_raw_nonzero().get() as u32;
        // Relaxed: display value; the host learns of readiness from VrReply.
        self.block().vr_pid.store(pid, Ordering::Relaxed);
        while !stop.load(Ordering::Relaxed) {
            rounds += 1;
            // Relaxed: a liveness counter for the watchdog.
            self.block().heartbeat.store(rounds, Ordering::Relaxed);
            if let Some(c) = ctrl
                && rounds.is_multiple_of(LOOK_ROUNDS)
                && self.ctrl.due()
                && self.ctrl.serve(vr, c) == Ctrl::Stop
            {
                return Ok(());
            }
            if self.round(vr, &mut peers)?.any() {
                backoff.busy();
                continue;
            }
            match backoff.idle() {
                Idle::Spin => std::hint::spin_loop(),
                Idle::Yield => std::thread::yield_now(),
                Idle::Sleep => {
                    if self.sleep(vr, ctrl, backoff.sleep_timeout(), peers)? == Ctrl::Stop {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// Sleep on the doorbell and the control socket; serve the socket if it
    /// woke us. With `peers`, a message waiting in `CtrlIn` keeps us awake
    /// like a packet: the relay rings the doorbell only if it sees our
    /// flag raised, so a message pushed just before we raised it must be
    /// seen by the look after it.
    fn sleep<V: Vr + ?Sized>(
        &mut self,
        vr: &mut V,
        ctrl: Option<BorrowedFd<'_>>,
        timeout: Duration,
        peers: bool,
    ) -> Result<Ctrl, RuntimeError> {
        use rustix::event::{PollFd, PollFlags, Timespec};
        prepare_sleep(&self.block().vr_sleeping);
        if self.rx_ready()? || (peers && self.peer_in.ready()? >= MSG_WORDS as u32) {
            cancel_sleep(&self.block().vr_sleeping);
            return Ok(Ctrl::Open);
        }
        self.counters.v[counter::SLEEPS] += 1;
        self.publish();
        let ts = Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let bell = self.vr_bell.fd();
        let woken_by_ctrl = match ctrl {
            Some(c) => {
                let mut fds = [
                    PollFd::new(&bell, PollFlags::IN),
                    PollFd::new(&c, self.ctrl.poll_flags()),
                ];
                let _ = rustix::event::poll(&mut fds, Some(&ts));
                !fds[1].revents().is_empty()
            }
            None => {
                let mut fds = [PollFd::new(&bell, PollFlags::IN)];
                let _ = rustix::event::poll(&mut fds, Some(&ts));
                false
            }
        };
        cancel_sleep(&self.block().vr_sleeping);
        self.vr_bell.clear();
        Ok(match ctrl {
            Some(c) if woken_by_ctrl => self.ctrl.serve(vr, c),
            _ => Ctrl::Open,
        })
    }
}

fn pin_to(cpu: usize) -> Result<(), RuntimeError> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| RuntimeError::Setup(format!("pin to CPU {cpu}: {e}")))
}

/// What a VR process has once the host has said hello: the hello itself,
/// the mapped region, the two doorbells and the control socket. The
/// process answers on [`Handshake::ctrl`] with [`CtrlSocket::ready`] or
/// [`CtrlSocket::reply_error`], then serves the socket as it likes (the
/// SDK's loop: [`Instance::run`]).
#[derive(Debug)]
pub struct Handshake {
    /// The host's hello.
    pub hello: Hello,
    /// The region, mapped and its header checked.
    pub region: Region,
    /// The doorbell the host rings to wake this instance.
    pub vr_bell: Doorbell,
    /// The host's doorbell (rung when the host sleeps and there is work).
    pub host_bell: Doorbell,
    /// Our end of the control socket.
    pub ctrl: CtrlSocket,
}

/// A VR instance's end of its control socket (blocking until
/// [`CtrlSocket::ready`]).
#[derive(Debug)]
pub struct CtrlSocket(OwnedFd);

impl CtrlSocket {
    /// The descriptor, to poll or to read [`crate::proto::HostMsg`]s from.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    fn reply(&self, r: &VrReply) {
        let _ = send_with_fds(
            self.0.as_fd(),
            &serde_json::to_vec(r).unwrap_or_default(),
            &[],
        );
    }

    /// Tell the host this instance is attached and polling, and make the
    /// socket non-blocking (an instance looks at it between rounds and
    /// must never wait on it).
    pub fn ready(&self) {
        self.reply(&VrReply::Ready {
            pid: rustix::process::getpid().as_raw_nonzero().get() as u32,
        });
        let _ = rustix::io::ioctl_fionbio(&self.0, true);
    }

    /// Tell the host this instance cannot start, and why.
    pub fn reply_error(&self, e: &RuntimeError) {
        self.reply(&VrReply::Error {
            message: e.to_string(),
        });
    }

    /// From now on a panic anywhere in the process is also told to the
    /// host ([`VrReply::Panicked`]: where and what) before the previous
    /// hook runs (the default one prints it on stderr) and the process
    /// dies. The host names it in its log with the VR's exit. The hook
    /// writes to this socket's own descriptor while the socket lives (no
    /// copy: a VR holds no descriptor but those the host gave it).
    pub fn report_panics(&self) {
        PANIC_FD.store(self.0.as_raw_fd(), Ordering::Release);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            report_panic(info);
            previous(info);
        }));
    }
}

impl Drop for CtrlSocket {
    fn drop(&mut self) {
        // Before the descriptor closes (the field drops after this): the
        // hook must not write to a number the process may reuse.
        let _ =
            PANIC_FD.compare_exchange(self.0.as_raw_fd(), -1, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// The control socket's descriptor while a [`CtrlSocket`] that reports
/// panics lives; -1 otherwise.
static PANIC_FD: AtomicI32 = AtomicI32::new(-1);

/// Send `info` to the host as [`VrReply::Panicked`], if a control socket
/// is there.
fn report_panic(info: &std::panic::PanicHookInfo<'_>) {
    let fd = PANIC_FD.load(Ordering::Acquire);
    if fd < 0 {
        return;
    }
    let what = info.payload_as_str().unwrap_or("Box<dyn Any>");
    let mut message = match info.location() {
        Some(l) => format!("panicked at {l}: {what}"),
        None => format!("panicked: {what}"),
    };
    // One control message; keep room for the JSON around it.
    if message.len() > MAX_MSG / 2 {
        let mut end = MAX_MSG / 2;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    let msg = serde_json::to_vec(&VrReply::Panicked { message }).unwrap_or_default();
    // SAFETY: `fd` is the descriptor of a live `CtrlSocket`: it is stored
    // by `report_panics` and taken back (-1) in `CtrlSocket::drop` before
    // the descriptor is closed; the borrow ends with this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let _ = send_with_fds(fd, &msg, &[]);
}

/// The first half of a VR process's life: take the control socket from the
/// environment, receive the hello with the region and the doorbells, check
/// the layout version, map the region, pin to the hello's CPU. A hello that
/// cannot be used is answered with an error here; the caller answers the
/// rest ([`CtrlSocket::ready`] or [`CtrlSocket::reply_error`]).
///
/// # Errors
/// [`RuntimeError`] saying what failed (the host is told too when it can be).
pub fn handshake() -> Result<Handshake, RuntimeError> {
    // Before the region arrives: other processes of our uid (other VRs run
    // as `nobody` too) must not reach it through /proc/<pid>/fd, nor our
    // memory through /proc/<pid>/mem or ptrace.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    let raw: i32 = std::env::var(CTRL_FD_ENV)
        .map_err(|_| RuntimeError::NoCtrl(format!("{CTRL_FD_ENV} is not set")))?
        .parse()
        .map_err(|_| RuntimeError::NoCtrl(format!("{CTRL_FD_ENV} is not a number")))?;
    if rustix::io::fcntl_getfd(
        // SAFETY: probing an fd number for validity; the borrow ends here.
        unsafe { BorrowedFd::borrow_raw(raw) },
    )
    .is_err()
    {
        return Err(RuntimeError::NoCtrl(format!(
            "descriptor {raw} is not open"
        )));
    }
    // SAFETY: the host placed our end of the control socket at `raw` for us
    // alone (checked open above); we take ownership once.
    let ctrl = CtrlSocket(unsafe { OwnedFd::from_raw_fd(raw) });
    let mut buf = vec![0u8; MAX_MSG];
    let (n, mut fds) = recv_with_fds(ctrl.fd(), &mut buf)?;
    let result = (|| {
        let hello: Hello =
            serde_json::from_slice(&buf[..n]).map_err(|e| RuntimeError::BadHello(e.to_string()))?;
        if hello.layout_version != LAYOUT_VERSION {
            return Err(RuntimeError::Version {
                host: hello.layout_version,
                ours: LAYOUT_VERSION,
            });
        }
        if fds.len() != 3 {
            return Err(RuntimeError::BadHello(format!(
                "expected 3 descriptors, got {}",
                fds.len()
            )));
        }
        let host_bell = Doorbell::from_fd(fds.pop().expect("3 fds"));
        let vr_bell = Doorbell::from_fd(fds.pop().expect("3 fds"));
        let region = Region::attach(fds.pop().expect("3 fds"))?;
        if let Some(cpu) = hello.cpu {
            pin_to(cpu)?;
        }
        // The host starts us through a descriptor, so the kernel named us
        // after its number; `ps`, `top` and `perf` should show the VR.
        let _ = rustix::thread::set_name(&task_name(&hello.vr, hello.instance));
        Ok((hello, region, vr_bell, host_bell))
    })();
    match result {
        Ok((hello, region, vr_bell, host_bell)) => Ok(Handshake {
            hello,
            region,
            vr_bell,
            host_bell,
            ctrl,
        }),
        Err(e) => {
            ctrl.reply_error(&e);
            Err(e)
        }
    }
}

/// The task name of instance `instance` of VR `vr`: `vr.instance`, cut to
/// the kernel's 15 bytes (keeping the instance, at a character boundary).
fn task_name(vr: &str, instance: u16) -> std::ffi::CString {
    let suffix = format!(".{instance}");
    let mut cut = 15usize.saturating_sub(suffix.len()).min(vr.len());
    while !vr.is_char_boundary(cut) {
        cut -= 1;
    }
    let name: String = vr[..cut].chars().filter(|&c| c != '\0').collect();
    std::ffi::CString::new(name + &suffix).expect("no NUL left")
}

/// The whole life of a VR process: [`handshake`] with the host, build the
/// VR with `build`, report ready, poll until told to stop. A custom VR's
/// `main` is one call:
///
/// ```no_run
/// # use vrhost_sdk::{Packet, Verdict, Vr};
/// struct Bridge;
/// impl Vr for Bridge {
///     fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
///         Verdict::Forward(pkt.rx_vnic() ^ 1)
///     }
/// }
/// fn main() -> std::process::ExitCode {
///     vrhost_sdk::runtime::main(|_hello| Ok(Bridge))
/// }
/// ```
///
/// # Errors
/// [`RuntimeError`] saying what failed; the host is told too when it can be.
pub fn run<V, F>(build: F) -> Result<(), RuntimeError>
where
    V: Vr,
    F: FnOnce(&Hello) -> Result<V, String>,
{
    let Handshake {
        hello,
        region,
        vr_bell,
        host_bell,
        ctrl,
    } = handshake()?;
    ctrl.report_panics();
    let built = build(&hello).map_err(RuntimeError::Setup).and_then(|vr| {
        let inst = Instance::new(region, hello.instance, vr_bell, host_bell, hello.poll)?;
        Ok((vr, inst))
    });
    let (mut vr, mut inst) = match built {
        Ok(v) => v,
        Err(e) => {
            ctrl.reply_error(&e);
            return Err(e);
        }
    };
    ctrl.ready();
    let stop = AtomicBool::new(false);
    inst.run(&mut vr, Some(ctrl.fd()), &stop)
}

/// [`run`] as a process `main`: prints the error and exits non-zero.
pub fn main<V, F>(build: F) -> std::process::ExitCode
where
    V: Vr,
    F: FnOnce(&Hello) -> Result<V, String>,
{
    match run(build) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vrhost VR: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use vrhost_shm::RegionConfig;

    use super::*;

    #[test]
    fn task_names_fit_the_kernel_and_keep_the_instance() {
        let name = |vr: &str, i| task_name(vr, i).into_string().unwrap();
        assert_eq!(name("t0", 0), "t0.0");
        assert_eq!(name("tenant-a", 12), "tenant-a.12");
        assert_eq!(name("a-very-long-tenant-name", 3), "a-very-long-t.3");
        assert_eq!(name("a-very-long-tenant-name", 65535), "a-very-lo.65535");
        // Not in the middle of a character.
        assert_eq!(name("ééééééééé", 1), "éééééé.1");
        for n in ["x", "a-very-long-tenant-name", "ééééééééé"] {
            assert!(name(n, 65535).len() <= 15);
        }
    }

    fn fill(region: &Region, slot: u32, frame: &[u8]) {
        let h = region.layout().cfg.headroom;
        assert!(region.write_slot(slot, h, frame));
        region
            .meta(slot)
            .unwrap()
            .set_extent(h as u16, frame.len() as u16);
    }

    /// A VR with its own counters and the default burst hook.
    struct Counting(u64);

    impl Vr for Counting {
        fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
            self.0 += 1;
            Verdict::Forward(pkt.rx_vnic() ^ 1)
        }

        fn counters(&self) -> &[u64] {
            std::slice::from_ref(&self.0)
        }
    }

    #[test]
    fn default_burst_calls_process() {
        let region = Region::create("rt3", RegionConfig::default()).unwrap();
        for s in 0..5 {
            fill(&region, s, &[0; 60]);
        }
        let mut vr = Counting(0);
        let mut stage = TxStage::new(2);
        let mut c = VrCounters::default();
        process_slots(&mut vr, &region, 1, &[0, 1, 2, 3, 4], &mut stage, &mut c);
        assert_eq!(stage.vnic(0).len(), 5);
        assert_eq!(c.v[counter::VR_BASE], 5);
    }
}
