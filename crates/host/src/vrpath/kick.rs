//! The doorbells of a VR's sleeping instances, coalesced: an instance that
//! sleeps is rung once per sleep ([`vrhost_shm::take_kick`]), and with a
//! kick batch ([`vrhost_proto::PollConfig::kick_batch`]) only once it has
//! been given that many frames since it went to sleep, once the first of
//! them has waited the kick wait, or once the worker is not saturated (a
//! round emptied the ports), whichever comes first. Each wakeup then brings the instance a batch
//! rather than the few frames of one burst, so VRs that share a core run
//! in long turns (interrupt coalescing, as a NIC's `rx-frames` and
//! `rx-usecs`).

use std::time::{Duration, Instant};

use vrhost_shm::{needs_kick, take_kick};

use super::VrPath;

/// Deferred doorbells of one VR's instances (at most 64, as `served_mask`).
pub(super) struct Kicks {
    /// Frames an asleep instance must have been given before it is rung
    /// (0 or 1: at once).
    batch: u32,
    /// Longest wait of a deferred doorbell while the worker is busy.
    wait: Duration,
    /// Instances given frames they were not rung for, one bit each.
    deferred: u64,
    /// When the oldest deferral began.
    since: Instant,
    /// Frames given to each instance since it was last rung or seen awake.
    given: [u32; 64],
}

impl Kicks {
    /// Ring at once (no batch).
    pub(super) fn new() -> Self {
        Self {
            batch: 0,
            wait: Duration::ZERO,
            deferred: 0,
            since: Instant::now(),
            given: [0; 64],
        }
    }
}

impl VrPath {
    /// Ring a sleeping instance only once it has been given `batch` frames
    /// or the first of them has waited `wait` (0 or 1: at once); see the
    /// module's doc.
    pub fn set_kick_batch(&mut self, batch: u32, wait: Duration) {
        self.cold.kicks.batch = batch;
        self.cold.kicks.wait = wait;
        if batch <= 1 {
            self.ring_deferred(None);
        }
    }

    /// Instance `i` was given `n` frames: ring its doorbell if it sleeps
    /// and its batch is full (or there is no batch).
    #[inline]
    pub(super) fn kick_given(&mut self, i: usize, n: usize) {
        if self.cold.kicks.batch > 1 {
            let Some(block) = self.region.instance(i as u16) else {
                return;
            };
            let bit = 1u64 << (i & 63);
            if !needs_kick(&block.vr_sleeping) {
                // Awake: it takes what it was given without a doorbell.
                self.cold.kicks.given[i & 63] = 0;
                self.cold.kicks.deferred &= !bit;
                return;
            }
            let given = &mut self.cold.kicks.given[i & 63];
            *given = given.saturating_add(n as u32);
            if *given < self.cold.kicks.batch {
                if self.cold.kicks.deferred == 0 {
                    self.cold.kicks.since = Instant::now();
                }
                self.cold.kicks.deferred |= bit;
                return;
            }
        }
        self.kick(i);
    }

    /// Ring instance `i`'s doorbell if it sleeps and has not been rung
    /// since it went to sleep (the ring lowers its flag: [`take_kick`]).
    #[inline]
    pub(super) fn kick(&mut self, i: usize) {
        self.cold.kicks.deferred &= !(1u64 << (i & 63));
        self.cold.kicks.given[i & 63] = 0;
        let Some(block) = self.region.instance(i as u16) else {
            return;
        };
        if take_kick(&block.vr_sleeping)
            && let Some(b) = &self.inst[i].bell
        {
            b.ring();
            self.stats.kicks.add(1);
        }
    }

    /// Whether an instance was given frames it has not been rung for.
    #[inline]
    pub fn kicks_deferred(&self) -> bool {
        self.cold.kicks.deferred != 0
    }

    /// Ring the deferred doorbells: all of them (`None`: the worker has
    /// nothing else to do, or stops), or those whose first frame has
    /// waited the kick wait by `now`.
    pub fn ring_deferred(&mut self, now: Option<Instant>) {
        if self.cold.kicks.deferred == 0 {
            return;
        }
        if let Some(now) = now
            && now.saturating_duration_since(self.cold.kicks.since) < self.cold.kicks.wait
        {
            return;
        }
        let mut due = self.cold.kicks.deferred;
        while due != 0 {
            let i = due.trailing_zeros() as usize;
            due &= due - 1;
            self.kick(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;
    use std::time::{Duration, Instant};

    use vrhost_shm::{needs_kick, prepare_sleep};

    use super::super::testkit::Kit;

    fn flag(k: &Kit) -> &AtomicU32 {
        &k.vp.region().instance(0).unwrap().vr_sleeping
    }

    fn kicks(k: &Kit) -> u64 {
        k.vp.stats().kicks.get()
    }

    #[test]
    fn a_sleeping_instance_is_rung_once_per_sleep() {
        let mut k = Kit::new(1, 1, 64, 64);
        k.vp.set_kick_batch(0, Duration::ZERO);
        k.give_n(3);
        assert_eq!(kicks(&k), 0, "awake: no doorbell");
        prepare_sleep(flag(&k));
        k.give_n(5);
        assert_eq!(kicks(&k), 1, "five pushes, one ring");
        assert!(!needs_kick(flag(&k)), "the ring lowered the flag");
        assert_eq!(k.take(0, 0).len(), 8);
        prepare_sleep(flag(&k));
        k.give_n(1);
        assert_eq!(kicks(&k), 2, "the next sleep is rung");
    }

    #[test]
    fn a_sleeping_instance_is_rung_once_its_batch_is_given() {
        let mut k = Kit::new(1, 1, 64, 64);
        k.vp.set_kick_batch(4, Duration::from_secs(3600));
        prepare_sleep(flag(&k));
        k.give_n(3);
        assert_eq!(kicks(&k), 0, "three of four: deferred");
        assert!(k.vp.kicks_deferred());
        assert!(needs_kick(flag(&k)), "still asleep, flag up");
        k.give_n(1);
        assert_eq!(kicks(&k), 1, "the fourth frame rings");
        assert!(!k.vp.kicks_deferred());
        assert!(!needs_kick(flag(&k)));
        assert_eq!(k.take(0, 0).len(), 4);
        // Awake, it is given frames without a doorbell or a deferral.
        k.give_n(5);
        assert_eq!(kicks(&k), 1);
        assert!(!k.vp.kicks_deferred());
    }

    #[test]
    fn a_deferred_doorbell_rings_when_due_or_when_the_worker_is_idle() {
        let mut k = Kit::new(1, 1, 64, 64);
        k.vp.set_kick_batch(100, Duration::from_millis(50));
        prepare_sleep(flag(&k));
        k.give_n(1);
        let t = Instant::now();
        k.vp.ring_deferred(Some(t));
        assert_eq!(kicks(&k), 0, "not due yet");
        k.vp.ring_deferred(Some(t + Duration::from_millis(60)));
        assert_eq!(kicks(&k), 1, "due after the wait");
        assert!(!k.vp.kicks_deferred());
        // A new sleep: the idle worker rings at once, whatever the wait.
        prepare_sleep(flag(&k));
        k.give_n(1);
        assert!(k.vp.kicks_deferred());
        k.vp.ring_deferred(None);
        assert_eq!(kicks(&k), 2);
        // No batch: at once.
        k.vp.set_kick_batch(0, Duration::ZERO);
        prepare_sleep(flag(&k));
        k.give_n(1);
        assert_eq!(kicks(&k), 3);
    }
}
