//! A pool that grows with its load (see [`crate::pool`]): the VR starts
//! with no slot in use and asks at once for a first step of the size it
//! was given; when three quarters of the slots in use are taken the
//! worker asks for the next step (double, at most the pool),
//! whose memory is populated in the VR's own memory cgroup before its
//! slots are put in use. A refused step (the VR's memory limit) is asked
//! again after [`RETRY`]; meanwhile frames beyond the pool are counted
//! `pool_empty` drops, as for any full pool.

use std::time::{Duration, Instant};

use super::{VrPath, control_reserve};

/// How long after a refused step the next is asked.
pub const RETRY: Duration = Duration::from_secs(1);

/// Where the pool's growth stands.
#[derive(Debug, Default)]
pub(super) struct Growth {
    /// A step was asked and is not answered yet.
    asked: bool,
    /// When the last step was refused.
    refused_at: Option<Instant>,
    /// The first step's slots.
    first: u32,
}

/// A step of a pool's growth: slots up to `to` in use once the region's
/// bytes `offset..offset + len` are populated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrowStep {
    /// The pool's usable slots after it.
    pub to: u32,
    /// Where its slots start in the region.
    pub offset: u64,
    /// Their bytes.
    pub len: u64,
}

impl VrPath {
    /// Start with no slot in use, the first step `initial` slots (at
    /// least two bursts), the rest with its load
    /// ([`VrPath::growth_wanted`]). Only for a path that has not started
    /// forwarding and has no dedicated port (whose pool is the port's
    /// memory, all of it registered); returns false and changes nothing
    /// otherwise.
    pub fn start_small(&mut self, initial: u32) -> bool {
        if !self.slots.limit(0) {
            return false;
        }
        self.cold.growth.first = initial.max(2 * super::BURST as u32);
        self.pool_in_use_changed();
        true
    }

    /// Slots in use: the pool's usable part.
    pub fn usable_slots(&self) -> usize {
        self.slots.usable() as usize
    }

    /// The next step of its pool's growth, when none is in use or three
    /// quarters of those in use are taken, none is asked already, and none
    /// was refused within [`RETRY`]. Marks it asked.
    pub fn growth_wanted(&mut self, now: Instant) -> Option<GrowStep> {
        let (usable, pool) = (self.slots.usable(), self.slots.pool() as u32);
        let g = &mut self.cold.growth;
        let low = usable == 0 || self.slots.free() < usable as usize / 4;
        let waiting = g
            .refused_at
            .is_some_and(|t| now.saturating_duration_since(t) < RETRY);
        if usable >= pool || g.asked || waiting || !low {
            return None;
        }
        g.asked = true;
        let to = match usable {
            0 => g.first,
            _ => usable.saturating_mul(2),
        }
        .min(pool);
        let layout = self.region.layout();
        let bytes = u64::from(layout.cfg.slot_bytes);
        Some(GrowStep {
            to,
            offset: layout.slots_offset + u64::from(usable) * bytes,
            len: u64::from(to - usable) * bytes,
        })
    }

    /// The asked step's memory is there: put its slots in use.
    pub fn grow_pool(&mut self, to: u32) {
        self.cold.growth.asked = false;
        self.cold.growth.refused_at = None;
        if self.slots.grow(to) == to {
            self.stats.pool_grows.add(1);
        }
        self.pool_in_use_changed();
    }

    /// The asked step was refused: ask again after [`RETRY`].
    pub fn grow_refused(&mut self, now: Instant) {
        self.cold.growth.asked = false;
        self.cold.growth.refused_at = Some(now);
        self.stats.pool_grow_refused.add(1);
    }

    /// The room kept for control frames and each instance's share follow
    /// the slots in use.
    pub(super) fn pool_in_use_changed(&mut self) {
        let usable = self.slots.usable();
        self.pool_reserve = control_reserve(usable);
        self.stats.pool_usable.set(u64::from(usable));
        let live = (self.inst.iter())
            .filter(|x| x.state == super::InstanceState::Live)
            .count();
        self.share_pool(live);
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::RETRY;
    use crate::stats::IngressDrop;
    use crate::vrpath::Class;
    use crate::vrpath::testkit::{Kit, frame};

    /// Stage frames the VR does not take back until the pool refuses one;
    /// how many it took.
    fn fill(k: &mut Kit) -> usize {
        let mut given = 0;
        loop {
            match k.vp.stage(0, &frame(1), || Class::Data) {
                Ok(()) => given += 1,
                Err(IngressDrop::RingFull) => {
                    k.vp.flush_rx(&mut k.ports);
                }
                Err(IngressDrop::PoolEmpty) => break,
                Err(e) => panic!("{e:?}"),
            }
        }
        k.vp.flush_rx(&mut k.ports);
        given
    }

    #[test]
    fn a_small_pool_asks_to_grow_when_three_quarters_are_taken_and_grows_in_steps() {
        let mut k = Kit::new(1, 1, 1024, 2048);
        assert!(k.vp.start_small(256));
        assert_eq!((k.vp.usable_slots(), k.vp.free_slots()), (0, 0));
        k.vp.check_slot_accounting().unwrap();
        assert_eq!(fill(&mut k), 0, "no slot in use");
        let now = Instant::now();
        let first = k.vp.growth_wanted(now).expect("the first step");
        let layout = k.vp.region().layout();
        let (base, bytes) = (layout.slots_offset, u64::from(layout.cfg.slot_bytes));
        assert_eq!(first.to, 256);
        assert_eq!((first.offset, first.len), (base, 256 * bytes));
        k.vp.grow_pool(first.to);
        assert_eq!(k.vp.growth_wanted(now), None, "nothing taken yet");
        // Frames the VR does not take back fill the slots in use.
        let given = fill(&mut k);
        assert!((192..256).contains(&given), "{given}");
        let step = k.vp.growth_wanted(now).expect("a step");
        assert_eq!(step.to, 512);
        assert_eq!(step.offset, base + 256 * bytes);
        assert_eq!(step.len, 256 * bytes);
        assert_eq!(k.vp.growth_wanted(now), None, "asked once");
        k.vp.grow_pool(step.to);
        assert_eq!(k.vp.usable_slots(), 512);
        assert_eq!(k.vp.stats().pool_grows.get(), 2);
        assert_eq!(k.vp.stats().pool_usable.get(), 512);
        k.vp.check_slot_accounting().unwrap();
        // Room again; a refusal waits before asking again.
        assert!(fill(&mut k) >= 192);
        let step = k.vp.growth_wanted(now).expect("the next step");
        assert_eq!(step.to, 1024);
        k.vp.grow_refused(now);
        assert_eq!(k.vp.stats().pool_grow_refused.get(), 1);
        assert_eq!(k.vp.growth_wanted(now + Duration::from_millis(10)), None);
        assert_eq!(k.vp.growth_wanted(now + RETRY).map(|s| s.to), Some(1024));
        k.vp.check_slot_accounting().unwrap();
    }

    #[test]
    fn a_pool_in_use_stops_at_its_size() {
        let mut k = Kit::new(1, 1, 256, 512);
        assert!(k.vp.start_small(150));
        k.vp.grow_pool(100_000);
        assert_eq!(k.vp.usable_slots(), 256);
        let now = Instant::now();
        assert_eq!(k.vp.growth_wanted(now), None, "all in use");
    }
}
