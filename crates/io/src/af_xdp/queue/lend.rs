//! Lending frames: the data path of a port whose UMEM is someone else's
//! pool (a dedicated port's VR, see `super::super::umem`). An rx burst
//! lends each frame it takes (`Owner::Lent`) instead of holding it until
//! the next burst; the caller gives it back (it goes to the free stack and
//! from there to the fill ring) or sends it from where it lies, with no
//! copy (it goes to the tx ring, and back to the free stack on
//! completion), or has its bytes copied out by a transmit of another kind
//! (`tx = "xdp"`), which gives it back at once. Frame indexes and extents
//! the caller passes are checked against the ownership record: a frame not
//! lent, or bytes outside it, are refused and counted, never followed.

use super::super::sys::XdpDesc;
use super::{MIN_FRAME, Owner, Queue};

/// A frame lent out of the UMEM: its index, and where its bytes are in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LentFrame {
    /// The frame's index in the UMEM (its byte offset / frame size).
    pub frame: u32,
    /// Offset of its first byte in the frame.
    pub offset: u32,
    /// Its length in bytes.
    pub len: u32,
}

impl Queue {
    /// Take up to `out.len()` frames from the rx ring and lend them; returns
    /// how many. Bad descriptors are counted in `rx_refused` as in
    /// `receive` (and their frames, if the kernel's, freed).
    pub(in super::super) fn lend(&mut self, out: &mut [LentFrame]) -> usize {
        let n = self.rx.available(out.len().min(u32::MAX as usize) as u32);
        let mut got = 0;
        for i in 0..n {
            let d = self.rx.get(i);
            if let Some((frame, offset, len)) = self.take_rx(d, true) {
                out[got] = LentFrame { frame, offset, len };
                got += 1;
            }
        }
        self.rx.release(n);
        got
    }

    /// Take lent frame `frame` back; false (and nothing done) if it is not
    /// lent.
    pub(in super::super) fn give_back(&mut self, frame: u32) -> bool {
        if !self.is_lent(frame) {
            return false;
        }
        self.lent -= 1;
        self.put_free(frame);
        true
    }

    /// Whether `frame` is lent out.
    pub(in super::super) fn is_lent(&self, frame: u32) -> bool {
        self.owner.get(frame as usize) == Some(&Owner::Lent)
    }

    /// Queue the lent `frames` on the tx ring as they lie, no copy. Every
    /// frame lent is taken back: sent, or (no ring room, or an extent
    /// outside its frame or shorter than an Ethernet header) freed and
    /// counted in `tx_dropped`. An index that is not lent is counted in
    /// `tx_refused` and left alone. Returns how many were queued.
    pub(in super::super) fn send_lent(&mut self, frames: &[LentFrame]) -> usize {
        self.reclaim();
        let room = self.tx.free(frames.len().min(u32::MAX as usize) as u32);
        let mut k = 0u32;
        for f in frames {
            if !self.is_lent(f.frame) {
                self.c.tx_refused += 1;
                continue;
            }
            self.lent -= 1;
            let end = u64::from(f.offset) + u64::from(f.len);
            if f.len < MIN_FRAME || end > u64::from(self.frame_size) || k == room {
                self.put_free(f.frame);
                self.c.tx_dropped += 1;
                continue;
            }
            self.owner[f.frame as usize] = Owner::Tx;
            self.tx.put(
                k,
                XdpDesc {
                    addr: (u64::from(f.frame) << self.frame_shift) + u64::from(f.offset),
                    len: f.len,
                    options: 0,
                },
            );
            k += 1;
            self.c.tx_packets += 1;
            self.c.tx_bytes += u64::from(f.len);
        }
        self.tx.submit(k);
        self.in_tx += k;
        self.tx_unkicked += k;
        k as usize
    }

    /// Hand the bytes of the lent `frames` to `copy` (a transmit that
    /// copies them, `tx = "xdp"`), then take each back to the free stack:
    /// nothing stays queued in the socket. The checks of `send_lent`: an
    /// index that is not lent is counted in `tx_refused` and left alone; a
    /// runt or an extent outside its frame is freed, not copied, and
    /// counted in `tx_dropped` (what `copy` refuses it counts itself).
    /// Returns how many `copy` took; stops, giving back the frames looked
    /// at, where `copy` says `None` (its transmit can take no more), and
    /// then returns how many were looked at as well.
    pub(in super::super) fn copy_lent(
        &mut self,
        frames: &[LentFrame],
        mut copy: impl FnMut(*const u8, usize) -> Option<bool>,
    ) -> (usize, usize) {
        let mut k = 0;
        for (i, f) in frames.iter().enumerate() {
            if !self.is_lent(f.frame) {
                self.c.tx_refused += 1;
                continue;
            }
            let end = u64::from(f.offset) + u64::from(f.len);
            if f.len < MIN_FRAME || end > u64::from(self.frame_size) {
                self.lent -= 1;
                self.put_free(f.frame);
                self.c.tx_dropped += 1;
                continue;
            }
            // `frame_ptr` of a frame index below `nframes` (it is lent) and
            // an extent inside the frame: the bytes lie in the UMEM.
            let at = self.frame_ptr(f.frame).wrapping_add(f.offset as usize);
            match copy(at, f.len as usize) {
                Some(took) => k += usize::from(took),
                None => return (k, i),
            }
            self.lent -= 1;
            self.put_free(f.frame);
        }
        (k, frames.len())
    }
}
