//! The per-batch work of a VR: each packet of an rx ring processed in
//! place and staged for its tx ring, shared with the host's in-process
//! mode so both run literally the same code.

use vrhost_shm::layout::VR_COUNTERS;
use vrhost_shm::{Region, SlotState};

use super::BATCH;
use crate::DropReason;
use crate::proto::counter;
use crate::sdk::{Packet, Verdict, Vr};

/// Staged slot indexes per out vNIC, waiting for room in their tx ring;
/// and the slots of the batch in hand.
#[derive(Debug)]
pub struct TxStage {
    pub(super) per_vnic: Vec<Vec<u32>>,
    /// One bit per slot of the region: set while the slot is part of the
    /// burst being processed, so that an index given twice is refused
    /// rather than handed to the VR as two aliasing packets. Sized on
    /// first use.
    pub(super) in_burst: Vec<u64>,
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
    pub(super) fn enter_burst(&mut self, slot: u32) -> bool {
        let (w, b) = ((slot / 64) as usize, 1u64 << (slot % 64));
        let word = &mut self.in_burst[w];
        let fresh = *word & b == 0;
        *word |= b;
        fresh
    }

    #[inline]
    pub(super) fn leave_burst(&mut self, slot: u32) {
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
pub(super) struct Work {
    /// Packets processed.
    pub(super) packets: usize,
    /// Peer messages sent and received.
    pub(super) messages: u64,
}

impl Work {
    /// Whether the round found anything to do (the back-off stays busy).
    #[inline]
    pub(super) fn any(self) -> bool {
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
pub(super) const AHEAD: usize = 4;

/// [`process_slots`] with [`Vr::process`].
#[inline]
pub(super) fn one_by_one<V: Vr + ?Sized>(
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
pub(super) fn in_bursts<V: Vr + ?Sized>(
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
pub(super) fn publish_own<V: Vr + ?Sized>(vr: &V, counters: &mut VrCounters) {
    let own = vr.counters();
    let n = own.len().min(counter::VR_SLOTS);
    counters.v[counter::VR_BASE..counter::VR_BASE + n].copy_from_slice(&own[..n]);
}

/// Set the slot's state from its verdict, stage it and count it.
#[inline(always)]
pub(super) fn settle(
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
