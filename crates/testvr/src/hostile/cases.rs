//! One method per [`Case`]: what a round of that case writes (the table in
//! the [module docs](super) says what the host should count for each).

use std::sync::atomic::Ordering;

use vrhost_shm::SlotState;

use super::{Case, Hostile};

impl Hostile {
    /// Do one round of `case`.
    pub(super) fn round(&mut self, case: Case) {
        match case {
            Case::Honest => self.honest(),
            Case::DoubleReturn => self.double_return(),
            Case::OutOfRange => self.out_of_range(),
            Case::NotOwned => self.not_owned(),
            Case::BadState => self.bad_state(),
            Case::HugeLength => self.huge_length(),
            Case::StateFlip => self.state_flip(),
            Case::TxBackwards => self.tx_backwards(),
            Case::TxBeyond => self.tx_beyond(),
            Case::TxAhead => self.tx_ahead(),
            Case::RxBackwards => self.rx_backwards(),
            Case::RxBeyond => self.rx_beyond(),
            Case::RingReset => self.ring_reset(),
            Case::GarbageBytes => self.garbage_bytes(),
            Case::SleepFlag => self.sleep_flag(),
            Case::HostBell => self.ring_host_bell(),
            Case::Flood => self.flood(),
        }
    }

    /// `honest`: takes what its rx rings hold, returns it PROCESSED on the other vNIC, puts back
    /// the ring indexes it scribbled.
    fn honest(&mut self) {
        self.restore();
        let mut work = std::mem::take(&mut self.pending);
        work.extend(self.take());
        self.return_ok(&work);
    }

    /// `double_return`: returns each slot of a batch twice.
    fn double_return(&mut self) {
        let got = self.take();
        for &(v, s) in &got {
            if let Some(m) = self.region.meta(s) {
                m.set(SlotState::Processed);
            }
            let out = self.out_of(v);
            // Twice in one push (same host batch) and once more.
            let n = self.push(out, &[s, s]);
            let m = self.push(out, &[s]);
            self.report.returned_ok += u64::from(n > 0);
            self.report.bad_writes += (n.saturating_sub(1) + m) as u64;
            if n == 0 {
                self.pending.push((v, s));
            }
        }
    }

    /// `out_of_range`: slot indexes `>= slot_count` on a tx ring.
    fn out_of_range(&mut self) {
        let v = self.vnic();
        let sc = self.slot_count;
        let items = [
            u32::MAX,
            sc,
            sc.saturating_add(self.rng.below(1 << 20) as u32),
            0x8000_0000 | self.rng.next() as u32,
        ];
        self.report.bad_writes += self.push(v, &items) as u64;
    }

    /// `not_owned`: random slot indexes it does not hold.
    fn not_owned(&mut self) {
        let v = self.vnic();
        let items: Vec<u32> = (0..4)
            .map(|_| self.rng.below(u64::from(self.slot_count)) as u32)
            .collect();
        self.report.bad_writes += self.push(v, &items) as u64;
    }

    /// `bad_state`: returns slots left FILLED or set EMPTY.
    fn bad_state(&mut self) {
        let got = self.take();
        for &(v, s) in &got {
            if let Some(m) = self.region.meta(s) {
                // FILLED as the host left it, or EMPTY.
                if self.rng.next() & 1 == 0 {
                    m.set(SlotState::Empty);
                }
            }
            self.push_or_keep(v, s);
        }
    }

    /// `huge_length`: returns slots whose offset + length pass the slot, or runts.
    fn huge_length(&mut self) {
        let got = self.take();
        let sb = self.slot_bytes.min(u32::from(u16::MAX)) as u16;
        for &(v, s) in &got {
            let extent = match self.rng.below(4) {
                0 => (0, u16::MAX),
                1 => (u16::MAX, 64),
                2 => (sb.saturating_sub(10), 64),
                _ => (0, self.rng.below(14) as u16),
            };
            if let Some(m) = self.region.meta(s) {
                m.set(SlotState::Processed);
                m.set_extent(extent.0, extent.1);
            }
            self.push_or_keep(v, s);
        }
    }

    /// `state_flip`: flips random slots' states (the host's too), and flips returned ones back to
    /// FILLED right after the push.
    fn state_flip(&mut self) {
        for _ in 0..8 {
            let s = self.rng.below(u64::from(self.slot_count)) as u32;
            let st = match self.rng.below(4) {
                0 => SlotState::Empty,
                1 => SlotState::Filled,
                2 => SlotState::Processed,
                _ => SlotState::Dropped,
            };
            if let Some(m) = self.region.meta(s) {
                m.set(st);
            }
        }
        let got = self.take();
        for &(v, s) in &got {
            if let Some(m) = self.region.meta(s) {
                m.set(SlotState::Processed);
            }
            if self.push_or_keep(v, s)
                && let Some(m) = self.region.meta(s)
            {
                // Under the host, which may be reading it now.
                m.set(SlotState::Filled);
            }
        }
        self.report.bad_writes += 8 + got.len() as u64;
    }

    /// `tx_backwards`: a tx ring's producer index behind the host's tail.
    fn tx_backwards(&mut self) {
        let v = self.vnic();
        let cons = self.tx_cons(v);
        let k = 1 + self.rng.below(u64::from(self.ring_size)) as u32;
        self.set_tx_prod(v, cons.wrapping_sub(k));
        self.report.bad_writes += 1;
    }

    /// `tx_beyond`: a tx ring's producer index more than a ring ahead.
    fn tx_beyond(&mut self) {
        let v = self.vnic();
        let cons = self.tx_cons(v);
        let k = self.ring_size + 1 + self.rng.below(1 << 30) as u32;
        self.set_tx_prod(v, cons.wrapping_add(k));
        self.report.bad_writes += 1;
    }

    /// `tx_ahead`: a tx ring's producer index ahead of the entries it wrote (the host reads stale
    /// entries).
    fn tx_ahead(&mut self) {
        let v = self.vnic();
        let i = usize::from(v);
        let cons = self.tx_cons(v);
        let used = self.tx_head[i].wrapping_sub(cons);
        if used < self.ring_size {
            let k = 1 + self.rng.below(u64::from(self.ring_size - used)) as u32;
            // The host reads the stale entries up to there.
            self.set_tx_prod(v, self.tx_head[i].wrapping_add(k));
            self.report.bad_writes += 1;
        }
    }

    /// `rx_backwards`: an rx ring's consumer index moved backwards.
    fn rx_backwards(&mut self) {
        let v = self.vnic();
        let k = 1 + self.rng.below(u64::from(self.ring_size)) as u32;
        self.set_rx_cons(v, self.rx_tail[usize::from(v)].wrapping_sub(k));
        self.report.bad_writes += 1;
    }

    /// `rx_beyond`: an rx ring's consumer index past the host's head.
    fn rx_beyond(&mut self) {
        // More than a ring past our tail: past the host's head
        // whatever it published since we looked.
        let v = self.vnic();
        let k = self.ring_size + 1 + self.rng.below(1 << 30) as u32;
        self.set_rx_cons(v, self.rx_tail[usize::from(v)].wrapping_add(k));
        self.report.bad_writes += 1;
    }

    /// `ring_reset`: a ring's index that the VR writes set to zero (tx producer, rx consumer; the
    /// other index is the host's, which it never reads back).
    fn ring_reset(&mut self) {
        let v = usize::from(self.vnic());
        if self.rng.next() & 1 == 0 {
            // The producer index is the host's and the host never
            // reads it back: zeroing it would only blind us.
            self.set_rx_cons(v as u16, 0);
        } else {
            // Likewise the consumer index is the host's.
            self.set_tx_prod(v as u16, 0);
        }
        self.report.bad_writes += 1;
    }

    /// `garbage_bytes`: random bytes over random slots (the host's free ones too).
    fn garbage_bytes(&mut self) {
        let mut junk = [0u8; 64];
        for b in junk.chunks_mut(8) {
            b.copy_from_slice(&self.rng.next().to_le_bytes()[..b.len()]);
        }
        for _ in 0..4 {
            let s = self.rng.below(u64::from(self.slot_count)) as u32;
            let off = self.rng.below(u64::from(self.slot_bytes)) as u32;
            // Refused (nothing written) when it would pass the slot.
            let _ = self.region.write_slot(s, off & !63, &junk);
        }
    }

    /// `sleep_flag`: claims to sleep while it spins (the host rings its doorbell on every burst).
    fn sleep_flag(&mut self) {
        if let Some(b) = self.region.instance(self.instance) {
            b.vr_sleeping.store(1, Ordering::SeqCst);
        }
    }

    /// `host_bell`: rings the host's doorbell.
    fn ring_host_bell(&mut self) {
        self.host_bell.ring();
    }

    /// `flood`: fills a tx ring with out-of-range indexes as fast as the host empties it.
    fn flood(&mut self) {
        let v = self.vnic();
        let junk = [u32::MAX; 64];
        for _ in 0..4 * (self.ring_size as usize).div_ceil(64) {
            let n = self.push(v, &junk);
            self.report.bad_writes += n as u64;
            if n == 0 {
                break;
            }
        }
    }
}
