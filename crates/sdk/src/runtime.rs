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
mod process;
mod start;

use process::Work;
pub use process::{TxStage, VrCounters, process_slots};
pub use start::{CtrlSocket, Handshake, handshake, main, run};

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use vrhost_shm::fdpass::FdPassError;
use vrhost_shm::{
    Consumer, Doorbell, Producer, Region, RegionError, RingError, RingId, cancel_sleep, needs_kick,
    prepare_sleep,
};

use self::ctrl::{Ctrl, CtrlChannel, LOOK_ROUNDS};
use crate::backoff::{Backoff, Idle};
use crate::peer::{MSG_WORDS, PeerCounters, Peers};
use crate::proto::{PollConfig, counter};
use crate::sdk::Vr;

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
                // A VR's nap is a short sleep: the host rings when it hands
                // frames over, so its rings wake it either way.
                Idle::Nap => {
                    let nap = Some(backoff.nap_timeout());
                    if self.sleep(vr, ctrl, nap, peers)? == Ctrl::Stop {
                        return Ok(());
                    }
                }
                // With a control socket, no timer: the socket and the
                // doorbell are all that can bring an idle VR work, so it
                // sleeps until one of them does (an idle VR costs nothing).
                // Without one, `sleep_ms` bounds the sleep so that `stop`
                // is seen.
                Idle::Sleep => {
                    let limit = ctrl.is_none().then(|| backoff.sleep_timeout());
                    if self.sleep(vr, ctrl, limit, peers)? == Ctrl::Stop {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// Sleep on the doorbell and the control socket, for up to `timeout`
    /// (None: until one of them fires); serve the socket if it woke us. With `peers`, a message waiting in `CtrlIn` keeps us awake
    /// like a packet: the relay rings the doorbell only if it sees our
    /// flag raised, so a message pushed just before we raised it must be
    /// seen by the look after it.
    fn sleep<V: Vr + ?Sized>(
        &mut self,
        vr: &mut V,
        ctrl: Option<BorrowedFd<'_>>,
        timeout: Option<Duration>,
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
        let ts = timeout.map(|t| Timespec {
            tv_sec: t.as_secs() as i64,
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        let bell = self.vr_bell.fd();
        let woken_by_ctrl = match ctrl {
            Some(c) => {
                let mut fds = [
                    PollFd::new(&bell, PollFlags::IN),
                    PollFd::new(&c, self.ctrl.poll_flags()),
                ];
                let _ = rustix::event::poll(&mut fds, ts.as_ref());
                !fds[1].revents().is_empty()
            }
            None => {
                let mut fds = [PollFd::new(&bell, PollFlags::IN)];
                let _ = rustix::event::poll(&mut fds, ts.as_ref());
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

#[cfg(test)]
mod tests {
    use vrhost_shm::RegionConfig;

    use crate::sdk::{Packet, Verdict};

    use super::start::task_name;
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
            assert!(region.put_frame(s, &[0; 60]));
        }
        let mut vr = Counting(0);
        let mut stage = TxStage::new(2);
        let mut c = VrCounters::default();
        process_slots(&mut vr, &region, 1, &[0, 1, 2, 3, 4], &mut stage, &mut c);
        assert_eq!(stage.vnic(0).len(), 5);
        assert_eq!(c.v[counter::VR_BASE], 5);
    }
}
