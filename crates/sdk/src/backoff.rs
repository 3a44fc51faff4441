//! Adaptive polling: what a side with nothing to do does next (Europa's
//! adaptive polling, section 3.4 of `../shared/seeds/000_*.txt`).
//!
//! Busy, a side polls without pause. Idle, it spins for
//! [`PollConfig::spin_rounds`] empty rounds (and, with
//! [`PollConfig::busy_poll_us`], until that long after its last work;
//! yielding once every [`PollConfig::spin_yield_every`] rounds),
//! then yields the CPU for [`PollConfig::yield_us`] (or, with
//! [`PollConfig::nap_us`], naps for that long: short sleeps on its doorbell
//! that let work pile up for a batch), then sleeps on its doorbell; but
//! until [`PollConfig::flow_us`] after its last work it yields instead of
//! sleeping, as long as its flow credit lasts (a share of the time that
//! passes, [`vrhost_proto::FLOW_SHARE`]). A
//! sleep that ends
//! without work (the timeout that lets it look at its control socket) goes
//! straight back to sleep: only work brings back spinning, so an idle side
//! costs a wakeup per `sleep_ms` and nothing more (a VR process with a
//! control socket sleeps with no timeout at all: `runtime.rs`). The host
//! worker and every
//! VR instance share this one state machine.

use std::time::{Duration, Instant};

use crate::proto::{FLOW_SHARE, PollConfig};

/// Busy rounds since the last gap longer than the spin below which a
/// side's traffic counts as sparse (a ping's round trip is 2 to 4 of the
/// worker's).
pub const SPARSE_ROUNDS: u32 = 64;

/// Windows of [`PollConfig::flow_us`] the flow credit holds at most.
const FLOW_WINDOWS: u64 = 4;

/// What an idle side does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Poll again at once (with a spin-loop hint).
    Spin,
    /// Give the CPU away once, then poll again.
    Yield,
    /// Sleep on the doorbell alone for up to [`Backoff::nap_timeout`]
    /// (after the need-wakeup handshake), then poll again.
    Nap,
    /// Sleep on the doorbell (after the need-wakeup handshake).
    Sleep,
}

/// The back-off state of one polling loop.
#[derive(Debug, Clone)]
pub struct Backoff {
    cfg: PollConfig,
    /// Empty rounds since the last work; `u32::MAX` once asleep.
    rounds: u32,
    /// When the first empty round after work came (read only with a
    /// busy-poll window).
    idle_since: Instant,
    /// When the yield phase began, once it has.
    yield_since: Option<Instant>,
    /// Nanoseconds of flow window the side may still spend.
    credit_ns: u64,
    /// When `credit_ns` was last brought up to date.
    credit_at: Instant,
    /// When the back-off would have slept but polled on for the flow
    /// window, while it does.
    flow_since: Option<Instant>,
    /// Busy rounds since the side last went past its spin phase (a gap
    /// between frames longer than the spin): while few, its traffic is
    /// sparse and its spin yields (see [`Backoff::spin`]).
    busy_rounds: u32,
}

impl Backoff {
    /// A loop that starts busy.
    pub fn new(cfg: PollConfig) -> Self {
        let now = Instant::now();
        Self {
            cfg,
            rounds: 0,
            idle_since: now,
            yield_since: None,
            credit_ns: Self::credit_cap(&cfg),
            credit_at: now,
            flow_since: None,
            busy_rounds: 0,
        }
    }

    /// The round did work: poll again at once, and spin first when idle next.
    #[inline]
    pub fn busy(&mut self) {
        self.rounds = 0;
        self.busy_rounds = self.busy_rounds.saturating_add(1);
        self.yield_since = None;
        if self.flow_since.is_some() {
            self.end_flow();
        }
    }

    /// The round found nothing: what to do now.
    #[inline]
    pub fn idle(&mut self) -> Idle {
        if self.rounds == u32::MAX {
            return Idle::Sleep;
        }
        self.rounds += 1;
        let busy_poll = self.cfg.busy_poll_us > 0;
        if (busy_poll || self.cfg.flow_us > 0) && self.rounds == 1 {
            self.idle_since = Instant::now();
        }
        if self.rounds <= self.cfg.spin_rounds {
            return self.spin();
        }
        let yield_since = match self.yield_since {
            Some(t) => t,
            None => {
                // A gap longer than the spin: the traffic is sparse.
                self.busy_rounds = 0;
                let now = Instant::now();
                if busy_poll
                    && now.duration_since(self.idle_since)
                        < Duration::from_micros(self.cfg.busy_poll_us.into())
                {
                    return self.spin();
                }
                *self.yield_since.insert(now)
            }
        };
        if yield_since.elapsed() < Duration::from_micros(self.cfg.yield_us.into()) {
            if self.cfg.nap_us > 0 {
                Idle::Nap
            } else {
                Idle::Yield
            }
        } else if self.cfg.flow_us > 0 && self.in_flow() {
            Idle::Yield
        } else {
            if self.flow_since.is_some() {
                self.end_flow();
            }
            self.rounds = u32::MAX;
            Idle::Sleep
        }
    }

    /// A round of the spin phase: a spin, or, while the traffic is sparse
    /// (fewer than [`SPARSE_ROUNDS`] busy rounds since the last gap longer
    /// than the spin), every [`PollConfig::spin_yield_every`]th round a
    /// yield, so that a task woken on this core (by this side's own
    /// `sendto` or doorbell: the ping it answered) waits a few rounds
    /// rather than the whole spin. Dense traffic, whose gaps the spin
    /// bridges, spins as before: a yield on a shared core would hand it
    /// away for a time slice between two bursts.
    #[inline]
    fn spin(&self) -> Idle {
        let every = self.cfg.spin_yield_every;
        if every > 0 && self.busy_rounds < SPARSE_ROUNDS && self.rounds.is_multiple_of(every) {
            Idle::Yield
        } else {
            Idle::Spin
        }
    }

    /// Whether the side polls on instead of sleeping: within `flow_us` of
    /// its last work, and its credit not spent.
    fn in_flow(&mut self) -> bool {
        let now = Instant::now();
        let window = Duration::from_micros(self.cfg.flow_us.into());
        let since = match self.flow_since {
            Some(t) => t,
            None => {
                self.refill(now);
                *self.flow_since.insert(now)
            }
        };
        now.duration_since(self.idle_since) < window
            && (now.duration_since(since).as_nanos() as u64) < self.credit_ns
    }

    /// The flow window ended (work came, or it ran out): pay for it.
    fn end_flow(&mut self) {
        if let Some(t) = self.flow_since.take() {
            let spent = t.elapsed().as_nanos() as u64;
            self.credit_ns = self.credit_ns.saturating_sub(spent);
        }
    }

    /// Add the credit earned since it was last counted.
    fn refill(&mut self, now: Instant) {
        let earned = now.duration_since(self.credit_at).as_nanos() as u64 / u64::from(FLOW_SHARE);
        self.credit_ns = (self.credit_ns + earned).min(Self::credit_cap(&self.cfg));
        self.credit_at = now;
    }

    fn credit_cap(cfg: &PollConfig) -> u64 {
        u64::from(cfg.flow_us) * 1000 * FLOW_WINDOWS
    }

    /// True once the loop has gone to sleep and no work has come since.
    pub fn asleep(&self) -> bool {
        self.rounds == u32::MAX
    }

    /// The longest single sleep.
    pub fn sleep_timeout(&self) -> Duration {
        Duration::from_millis(self.cfg.sleep_ms.max(1).into())
    }

    /// The longest single hand-over of the host worker's core to a VR on
    /// it ([`PollConfig::hand_over`]): the yield phase's length, at most
    /// the longest sleep.
    pub fn hand_over_timeout(&self) -> Duration {
        Duration::from_micros(self.cfg.yield_us.max(1).into()).min(self.sleep_timeout())
    }

    /// The longest single nap (at most the longest sleep).
    pub fn nap_timeout(&self) -> Duration {
        Duration::from_micros(self.cfg.nap_us.into()).min(self.sleep_timeout())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_yield_sleep_and_stay_asleep_until_work() {
        let mut b = Backoff::new(PollConfig {
            spin_rounds: 3,
            yield_us: 0,
            // No flow window (the default; below): straight to sleep.
            flow_us: 0,
            sleep_ms: 10,
            ..PollConfig::default()
        });
        assert_eq!([b.idle(), b.idle(), b.idle()], [Idle::Spin; 3]);
        assert_eq!(b.idle(), Idle::Sleep, "no yield phase with yield_us 0");
        assert!(b.asleep());
        // A timeout without work: straight back to sleep, no spinning.
        assert_eq!(b.idle(), Idle::Sleep);
        b.busy();
        assert!(!b.asleep());
        assert_eq!(b.idle(), Idle::Spin);
    }

    #[test]
    fn busy_polls_for_the_configured_time_after_work() {
        let mut b = Backoff::new(PollConfig {
            spin_rounds: 2,
            // Spins only (the yields within are tested below).
            spin_yield_every: 0,
            yield_us: 0,
            busy_poll_us: 30_000,
            sleep_ms: 10,
            ..PollConfig::default()
        });
        for _ in 0..2 {
            let t = Instant::now();
            let mut spins = 0;
            let end = loop {
                match b.idle() {
                    Idle::Spin => spins += 1,
                    other => break other,
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            assert_eq!(end, Idle::Sleep, "no yield phase with yield_us 0");
            assert!(
                t.elapsed() >= Duration::from_millis(30),
                "{:?}",
                t.elapsed()
            );
            assert!(spins > 2, "past the spin rounds: {spins}");
            // A sleep without work goes on sleeping; work starts a new window.
            assert_eq!(b.idle(), Idle::Sleep);
            b.busy();
        }
    }

    #[test]
    fn spinning_yields_the_core_every_so_many_rounds() {
        let cfg = PollConfig {
            spin_rounds: 40,
            spin_yield_every: 16,
            yield_us: 0,
            sleep_ms: 10,
            ..PollConfig::default()
        };
        let mut b = Backoff::new(cfg);
        let got: Vec<Idle> = (0..41).map(|_| b.idle()).collect();
        let yields: Vec<usize> = (0..40).filter(|&i| got[i] == Idle::Yield).collect();
        // Rounds 16 and 32 (1-based): indexes 15 and 31.
        assert_eq!(yields, [15, 31], "{got:?}");
        assert_eq!(got[40], Idle::Sleep);
        // Work starts the count again.
        b.busy();
        let again: Vec<Idle> = (0..16).map(|_| b.idle()).collect();
        assert_eq!(again[..15], [Idle::Spin; 15]);
        assert_eq!(again[15], Idle::Yield);
        // 0: the spin never yields (the behaviour before).
        let mut old = Backoff::new(PollConfig {
            spin_yield_every: 0,
            ..cfg
        });
        assert!((0..40).all(|_| old.idle() == Idle::Spin));
        // Dense traffic (many busy rounds, gaps within the spin) spins
        // without yielding; a gap past the spin makes it sparse again.
        let mut dense = Backoff::new(cfg);
        for _ in 0..SPARSE_ROUNDS {
            dense.busy();
            assert_eq!(dense.idle(), Idle::Spin);
        }
        // (Round 1 of the 40 was the loop's last.)
        assert!((1..40).all(|_| dense.idle() == Idle::Spin), "dense");
        assert_eq!(dense.idle(), Idle::Sleep, "past the spin");
        dense.busy();
        let sparse: Vec<Idle> = (0..16).map(|_| dense.idle()).collect();
        assert_eq!(sparse[15], Idle::Yield, "sparse again");
        // The busy-poll window yields the same way; a VR's spinning turn
        // beside other VRs does not.
        let mut bp = Backoff::new(PollConfig {
            spin_rounds: 0,
            busy_poll_us: 1_000_000,
            ..cfg
        });
        let n = (0..64).filter(|_| bp.idle() == Idle::Yield).count();
        assert_eq!(n, 4);
        let turn = PollConfig {
            turns: crate::proto::Turns::Spin,
            ..cfg
        }
        .beside_vrs();
        assert_eq!(turn.spin_yield_every, 0);
    }

    #[test]
    fn naps_instead_of_yielding_for_the_yield_time() {
        let mut b = Backoff::new(PollConfig {
            spin_rounds: 1,
            yield_us: 20_000,
            nap_us: 50,
            sleep_ms: 10,
            ..PollConfig::default()
        });
        assert_eq!(b.nap_timeout(), Duration::from_micros(50));
        // A hand-over lasts the yield phase, at most the longest sleep.
        assert_eq!(b.hand_over_timeout(), Duration::from_millis(10));
        let short = Backoff::new(PollConfig {
            yield_us: 300,
            ..PollConfig::default()
        });
        assert_eq!(short.hand_over_timeout(), Duration::from_micros(300));
        assert_eq!(b.idle(), Idle::Spin);
        let t = Instant::now();
        let mut naps = 0;
        while b.idle() == Idle::Nap {
            naps += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(naps >= 1);
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert!(b.asleep());
        // Work brings back the spin, then the naps.
        b.busy();
        assert_eq!([b.idle(), b.idle()], [Idle::Spin, Idle::Nap]);
    }

    #[test]
    fn a_flow_window_yields_after_work_instead_of_sleeping_within_its_credit() {
        // A VR beside the worker: it would sleep as soon as it is idle.
        let cfg = PollConfig {
            flow_us: 20_000,
            sleep_ms: 10,
            ..PollConfig::default()
        }
        .beside_worker();
        assert_eq!(cfg.flow_us, 20_000);
        let mut b = Backoff::new(cfg);
        let (yields, took) = count_while(&mut b, Idle::Yield);
        assert!(yields >= 1);
        assert!(took >= Duration::from_millis(20), "{took:?}");
        assert!(b.asleep());
        assert_eq!(b.idle(), Idle::Sleep, "a sleep without work goes on");
        // Work opens a new window; the credit (four windows, earning 1/16
        // of the time passing) runs out after about three more: the window
        // is then cut short, to what the side has earned since.
        let mut windows = 0;
        loop {
            b.busy();
            if count_while(&mut b, Idle::Yield).1 < Duration::from_millis(20) {
                break;
            }
            windows += 1;
            assert!(windows < 10, "the credit never ran out");
        }
        assert!(windows >= 2, "{windows}");
        // Beside other VRs there is no flow window (their turns decide).
        assert_eq!(cfg.beside_vrs().flow_us, 0);
        let mut off = Backoff::new(PollConfig { flow_us: 0, ..cfg });
        assert_eq!(off.idle(), Idle::Sleep, "flow_us 0: the old back-off");
    }

    #[test]
    fn yields_for_the_configured_time() {
        let mut b = Backoff::new(PollConfig {
            spin_rounds: 0,
            yield_us: 50_000,
            sleep_ms: 10,
            ..PollConfig::default()
        });
        let (yields, took) = count_while(&mut b, Idle::Yield);
        assert!(yields >= 1);
        assert!(took >= Duration::from_millis(50));
        assert!(b.asleep());
    }

    /// Call `idle` a millisecond apart while it answers `what`: how many
    /// times it did, and how long that took.
    fn count_while(b: &mut Backoff, what: Idle) -> (u32, Duration) {
        let t = Instant::now();
        let mut n = 0;
        while b.idle() == what {
            n += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        (n, t.elapsed())
    }
}
