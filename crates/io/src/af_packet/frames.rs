//! The reader of a `TPACKET_V2` rx ring ([`RxMode::Frames`](super::RxMode)):
//! one fixed-size slot per frame, each with its own status word, which the
//! kernel hands over (and wakes a sleeping reader for) as soon as the frame
//! is in it. No block timer: a lone frame waits for nothing. Like the V3
//! reader it works on raw memory laid out as the kernel lays it out, so the
//! unit tests run it over fake memory, corrupt headers included.

use std::sync::atomic::{AtomicU32, Ordering};

use super::ring::{TP_STATUS_KERNEL, TP_STATUS_USER, keep};
use crate::PortStats;
use crate::packet_sys::VlanTag;

/// Byte offsets in `struct tpacket2_hdr` read on receive.
pub(super) mod h2rx {
    pub(in crate::af_packet) const STATUS: usize = 0;
    pub(in crate::af_packet) const LEN: usize = 4;
    pub(in crate::af_packet) const SNAPLEN: usize = 8;
    pub(in crate::af_packet) const MAC: usize = 12;
    pub(in crate::af_packet) const VLAN_TCI: usize = 24;
    pub(in crate::af_packet) const VLAN_TPID: usize = 26;
    /// `sizeof(struct tpacket2_hdr)`: no frame starts before it.
    pub(in crate::af_packet) const HEADER_LEN: usize = 32;
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(libc::tpacket2_hdr, tp_status) == h2rx::STATUS);
    assert!(offset_of!(libc::tpacket2_hdr, tp_len) == h2rx::LEN);
    assert!(offset_of!(libc::tpacket2_hdr, tp_snaplen) == h2rx::SNAPLEN);
    assert!(offset_of!(libc::tpacket2_hdr, tp_mac) == h2rx::MAC);
    assert!(offset_of!(libc::tpacket2_hdr, tp_vlan_tci) == h2rx::VLAN_TCI);
    assert!(offset_of!(libc::tpacket2_hdr, tp_vlan_tpid) == h2rx::VLAN_TPID);
    assert!(size_of::<libc::tpacket2_hdr>() == h2rx::HEADER_LEN);
};

/// The reader's side of a `TPACKET_V2` rx ring.
#[derive(Debug)]
pub(super) struct RxFrames {
    base: *mut u8,
    block_bytes: usize,
    frame_bytes: usize,
    per_block: usize,
    /// Slots in the ring.
    count: usize,
    max_frame: usize,
    /// The next slot to read.
    cur: usize,
    /// First slot read but not yet handed back.
    release_from: usize,
    /// Slots read and not yet handed back.
    pending: usize,
}

impl RxFrames {
    /// A reader over `blocks` blocks of `block_bytes` at `base`, each
    /// holding `block_bytes / frame_bytes` slots.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `block_bytes * blocks`
    /// bytes for as long as the ring lives, aligned to 16, laid out as a
    /// `TPACKET_V2` rx ring whose status words only the kernel and this
    /// ring touch; `frame_bytes` a multiple of 16 above the frame header
    /// and at most `block_bytes`.
    pub(super) unsafe fn new(
        base: *mut u8,
        block_bytes: usize,
        blocks: usize,
        frame_bytes: usize,
        max_frame: usize,
    ) -> RxFrames {
        debug_assert!(frame_bytes.is_multiple_of(16) && frame_bytes > h2rx::HEADER_LEN);
        debug_assert!(frame_bytes <= block_bytes && blocks > 0);
        let per_block = block_bytes / frame_bytes;
        RxFrames {
            base,
            block_bytes,
            frame_bytes,
            per_block,
            count: per_block * blocks,
            max_frame,
            cur: 0,
            release_from: 0,
            pending: 0,
        }
    }

    /// Byte offset of slot `i` (< count) in the ring.
    fn slot_at(&self, i: usize) -> usize {
        (i / self.per_block) * self.block_bytes + (i % self.per_block) * self.frame_bytes
    }

    /// The status word of slot `i` (< count).
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: slot `i`'s header lies inside the ring; its first word is
        // 4-aligned (base and frame_bytes are multiples of 16); the kernel
        // and this ring access it only atomically; the ring outlives the
        // reference.
        unsafe { AtomicU32::from_ptr(self.base.add(self.slot_at(i)).cast()) }
    }

    /// The u32 (or u16, `wide` false) at byte `at` of slot `i`'s header.
    fn field(&self, i: usize, at: usize, wide: bool) -> u32 {
        debug_assert!(at + 4 <= h2rx::HEADER_LEN);
        // SAFETY: `at..at + 4` lies inside slot `i`'s header (checked
        // above against the header length, and the slot is longer than
        // its header), which user space owns (status USER seen with
        // Acquire); read_unaligned needs no alignment.
        unsafe {
            let p = self.base.add(self.slot_at(i) + at);
            if wide {
                p.cast::<u32>().read_unaligned()
            } else {
                u32::from(p.cast::<u16>().read_unaligned())
            }
        }
    }

    /// Hand the slots read in the previous call back to the kernel.
    fn release(&mut self) {
        for k in 0..self.pending {
            let i = (self.release_from + k) % self.count;
            // Release: our reads of the slot (and of the frame handed out,
            // whose borrow has ended) happen before the kernel refills it.
            self.status(i).store(TP_STATUS_KERNEL, Ordering::Release);
        }
        self.pending = 0;
    }

    /// Slot `i`'s frame as (offset in the ring, length), or `None`: a
    /// counted drop (cut short, runt, too long, a corrupt header).
    fn frame(&mut self, i: usize) -> Option<(usize, usize)> {
        let status = self.field(i, h2rx::STATUS, true);
        let len = self.field(i, h2rx::LEN, true) as usize;
        let snaplen = self.field(i, h2rx::SNAPLEN, true) as usize;
        let mac = self.field(i, h2rx::MAC, false) as usize;
        let tci = self.field(i, h2rx::VLAN_TCI, false) as u16;
        let tpid = self.field(i, h2rx::VLAN_TPID, false) as u16;
        if mac < h2rx::HEADER_LEN || mac.saturating_add(snaplen) > self.frame_bytes {
            return None;
        }
        let vlan = VlanTag::from_status(status, tci, tpid);
        // SAFETY: slot `i` from `mac - 32` past its header to `mac +
        // snaplen` (checked above) is ring memory user space owns until
        // the next call; no other frame handed out lies in this slot.
        unsafe {
            keep(
                self.base,
                self.slot_at(i) + mac,
                (snaplen, len),
                mac - h2rx::HEADER_LEN,
                vlan,
                self.max_frame,
            )
        }
    }

    /// Up to `out.len()` frames. See [`Port::rx_burst`](crate::Port::rx_burst).
    pub(super) fn burst<'a>(&'a mut self, out: &mut [&'a [u8]], stats: &mut PortStats) -> usize {
        self.release();
        self.release_from = self.cur;
        let mut n = 0;
        while n < out.len() && self.pending < self.count {
            let i = self.cur;
            // Acquire: pairs with the kernel's barrier before it sets
            // TP_STATUS_USER, so the slot's contents are visible.
            if self.status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                break;
            }
            self.pending += 1;
            self.cur = if i + 1 == self.count { 0 } else { i + 1 };
            let Some((at, len)) = self.frame(i) else {
                stats.rx_dropped += 1;
                continue;
            };
            // SAFETY: `at .. at + len` was checked to lie inside a slot the
            // ring owns; slots are handed back only by `release`, which
            // needs `&mut self` and so runs after these borrows end.
            out[n] = unsafe { std::slice::from_raw_parts(self.base.add(at), len) };
            n += 1;
            stats.rx_packets += 1;
            stats.rx_bytes += len as u64;
        }
        n
    }
}
