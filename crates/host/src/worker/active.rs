//! The VRs a round visits.
//!
//! A VR can hand the host a frame only in a slot the host gave it (the
//! runtime sends from the slots it took off its rx rings), so a VR that
//! holds no slot has nothing in its tx rings the host would accept, and
//! one with a single served instance has no control messages to relay.
//! The worker visits such a VR only in its sweep (once per
//! [`super::REAP_EVERY`], when the VRs are supervised, and after its
//! doorbell woke it or a job ran): a round costs what its VRs with work
//! cost, however many VRs are configured. What a hostile VR writes into
//! its rings while it holds nothing waits for the sweep, and is then
//! counted as a violation as before.

/// VRs by their tx service rank, one bit each: the tx phase walks the set
/// bits in rank order (high priority first), so the set keeps the order
/// that sorting a list each round would.
#[derive(Debug, Default)]
pub(super) struct RankSet {
    words: Vec<u64>,
    len: usize,
}

impl RankSet {
    /// A set over ranks `0..len`, all in it (the first round sweeps).
    pub(super) fn full(len: usize) -> Self {
        let mut s = Self {
            words: vec![0; len.div_ceil(64)],
            len,
        };
        s.fill();
        s
    }

    /// Put every rank in the set (a sweep).
    pub(super) fn fill(&mut self) {
        self.words.fill(u64::MAX);
        if let Some(last) = self.words.last_mut()
            && !self.len.is_multiple_of(64)
        {
            *last = (1u64 << (self.len % 64)) - 1;
        }
    }

    /// Put rank `r` in the set.
    #[inline]
    pub(super) fn insert(&mut self, r: usize) {
        self.words[r / 64] |= 1 << (r % 64);
    }

    /// Take rank `r` out of the set.
    #[inline]
    pub(super) fn remove(&mut self, r: usize) {
        self.words[r / 64] &= !(1 << (r % 64));
    }

    /// The first rank in the set at or after `from`, if any. Walking with
    /// `next_from(r + 1)` lets the walker change the set as it goes.
    #[inline]
    pub(super) fn next_from(&self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        let mut bits = self.words.get(w)? & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
            w += 1;
            bits = *self.words.get(w)?;
        }
    }

    /// Ranks in the set, in order (tests, and walks that change nothing).
    #[cfg(test)]
    pub(super) fn ranks(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut r = 0;
        while let Some(at) = self.next_from(r) {
            out.push(at);
            r = at + 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::RankSet;

    #[test]
    fn a_full_set_holds_every_rank_and_no_more() {
        for len in [0, 1, 63, 64, 65, 100, 128, 1000] {
            let s = RankSet::full(len);
            assert_eq!(s.ranks(), (0..len).collect::<Vec<_>>(), "len {len}");
        }
    }

    #[test]
    fn ranks_come_back_in_order_across_words() {
        let mut s = RankSet::full(200);
        for r in 0..200 {
            s.remove(r);
        }
        assert_eq!(s.next_from(0), None);
        for r in [199, 3, 64, 63, 128, 0] {
            s.insert(r);
        }
        assert_eq!(s.ranks(), [0, 3, 63, 64, 128, 199]);
        assert_eq!(s.next_from(4), Some(63));
        assert_eq!(s.next_from(65), Some(128));
        assert_eq!(s.next_from(200), None);
        s.remove(63);
        assert_eq!(s.next_from(4), Some(64));
    }
}
