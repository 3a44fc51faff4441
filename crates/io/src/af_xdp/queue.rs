//! One AF_XDP socket's data path: its UMEM frames, who holds each one, and
//! its four rings.
//!
//! Every UMEM frame is in exactly one of four hands, recorded in `owner`:
//! free (on the tx free stack), given to the kernel through the fill ring,
//! handed to the caller by the last rx burst, or queued for transmission
//! until the completion ring returns it. Descriptors read from the kernel
//! are checked against this record before use: an rx descriptor must name
//! a frame the kernel holds through the fill ring, with its bytes inside
//! that frame; a completion must name a frame queued for tx. Anything else
//! is counted and ignored, never followed, so a wrong value costs a counted
//! drop, not a panic or a read outside the UMEM.
//!
//! The first `rx_target` frames go to the fill ring, the rest to tx. An rx
//! burst's frames go back to the fill ring at the start of the next burst;
//! completed tx frames go back to the free stack.
//!
//! Sockets of several ports may share one UMEM (`share.rs`): each queue
//! then starts with its own range of frames (its home), records the
//! others as away, and passes frames to and from the other queues.

use super::ring::{ConsRing, ProdRing, RingMem};
use super::sys::{XDP_PKT_CONTD, XdpDesc};

mod lend;
mod share;
pub use lend::LentFrame;

/// Shortest frame accepted either way: an Ethernet header.
pub(super) const MIN_FRAME: u32 = 14;

/// Who holds a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// On the free stack (available for tx).
    Free,
    /// The kernel's, through the fill ring, until it comes back on rx.
    Fill,
    /// The caller's, from the last rx burst.
    Rx,
    /// The kernel's, through the tx ring, until it comes back on completion.
    Tx,
    /// Lent to the caller by an rx burst (`lend`), until it gives it back
    /// or sends it (see `lend.rs`).
    Lent,
    /// Another queue's of the same UMEM, or on its way home to it
    /// (`share.rs`).
    Away,
}

/// Where a queue's frames are. [`super::AfXdpPort::frame_counts`] sums
/// them over the port's queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameCounts {
    /// UMEM frames in all.
    pub total: u32,
    /// Free for tx.
    pub free: u32,
    /// Given to the kernel for rx (fill ring, or received and not yet read).
    pub fill: u32,
    /// Handed out by the last rx burst.
    pub rx_held: u32,
    /// Queued for tx or in flight, until their completion is read.
    pub tx: u32,
    /// Lent to the caller by [`super::AfXdpPort::rx_lend`], not yet given
    /// back or sent.
    pub lent: u32,
    /// Frames of another port sharing the UMEM, sent from this one and
    /// waiting to go home ([`super::AfXdpPort::return_frames`]).
    pub returning: u32,
}

impl FrameCounts {
    pub(super) fn add(&mut self, o: &FrameCounts) {
        self.total += o.total;
        self.free += o.free;
        self.fill += o.fill;
        self.rx_held += o.rx_held;
        self.tx += o.tx;
        self.lent += o.lent;
        self.returning += o.returning;
    }
}

/// Per-queue counters, summed into the port's stats.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct QueueCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Rx descriptors refused: frame not the kernel's, bytes outside it,
    /// runt, multi-buffer.
    pub rx_refused: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Frames refused by `send`: too short or long, ring or frames exhausted.
    pub tx_dropped: u64,
    /// Completion addresses refused: not a frame queued for tx.
    pub comp_refused: u64,
    /// Frames the caller asked to send as lent that were not lent to it.
    pub tx_refused: u64,
}

/// One socket's frames and rings. See the [module docs](self).
#[derive(Debug)]
pub(super) struct Queue {
    umem: *mut u8,
    frame_size: u32,
    frame_shift: u32,
    /// Frames of the whole UMEM (the owner record's length).
    nframes: u32,
    /// This queue's own frames (all of them unless the UMEM is shared).
    home: std::ops::Range<u32>,
    owner: Box<[Owner]>,
    /// Free frame indexes (a stack); `free_len` in use.
    free: Box<[u32]>,
    free_len: usize,
    /// Frames of the last rx burst; `held_len` in use.
    held: Box<[u32]>,
    held_len: usize,
    rx_target: u32,
    in_fill: u32,
    in_tx: u32,
    /// Frames lent to the caller.
    lent: u32,
    /// Frames of other queues, completed here, waiting to go home; a
    /// stack, `returning_len` in use.
    returning: Box<[u32]>,
    returning_len: usize,
    fill: ProdRing<u64>,
    comp: ConsRing<u64>,
    rx: ConsRing<XdpDesc>,
    tx: ProdRing<XdpDesc>,
    /// Tx descriptors submitted that no kick has covered yet.
    tx_unkicked: u32,
    pub(super) c: QueueCounters,
}

// SAFETY: the raw pointers point into the UMEM and ring mappings owned by
// the same `Socket`, which moves with the queue; nothing in them is tied to
// the thread that created them (the kernel serves the socket from any
// thread), and the queue is only used through `&mut`.
unsafe impl Send for Queue {}

impl Queue {
    /// The data path of one socket whose UMEM is `nframes` frames of
    /// `frame_size` bytes (a power of two) at `umem`, of which frames
    /// `home` are this queue's (the others, another socket's of a shared
    /// UMEM); `rx_target` of them are for rx. Frames go to the fill ring
    /// at once.
    ///
    /// # Safety
    /// - `umem` points to `nframes * frame_size` bytes that stay mapped and
    ///   writable for the queue's life, that no Rust reference aliases, and
    ///   that the kernel writes only in frames this queue gave it through
    ///   the fill ring.
    /// - Each `RingMem` is valid for the queue's life (see `ProdRing::new`).
    #[expect(
        clippy::too_many_arguments,
        reason = "one-off constructor mirroring the kernel's setup"
    )]
    pub(super) unsafe fn new(
        umem: *mut u8,
        frame_size: u32,
        nframes: u32,
        home: std::ops::Range<u32>,
        rx_target: u32,
        fill: RingMem<u64>,
        comp: RingMem<u64>,
        rx: RingMem<XdpDesc>,
        tx: RingMem<XdpDesc>,
    ) -> Queue {
        assert!(frame_size.is_power_of_two() && frame_size >= 2 * MIN_FRAME);
        assert!(home.start <= home.end && home.end <= nframes);
        assert!(rx_target <= home.len() as u32 && rx_target <= fill.size);
        let mut owner = vec![Owner::Away; nframes as usize].into_boxed_slice();
        owner[home.start as usize..home.end as usize].fill(Owner::Free);
        let mut free = vec![0; nframes as usize].into_boxed_slice();
        // The first home frame on top: the rx share is taken from the low
        // frames.
        for (i, f) in home.clone().rev().enumerate() {
            free[i] = f;
        }
        let mut q = Queue {
            umem,
            frame_size,
            frame_shift: frame_size.trailing_zeros(),
            nframes,
            free_len: home.len(),
            home,
            owner,
            free,
            held: vec![0; rx.size as usize].into_boxed_slice(),
            held_len: 0,
            rx_target,
            in_fill: 0,
            in_tx: 0,
            lent: 0,
            returning: vec![0; nframes as usize].into_boxed_slice(),
            returning_len: 0,
            // SAFETY: forwarded contract (each ring valid for our life).
            fill: unsafe { ProdRing::new(fill) },
            // SAFETY: as above.
            comp: unsafe { ConsRing::new(comp) },
            // SAFETY: as above.
            rx: unsafe { ConsRing::new(rx) },
            // SAFETY: as above.
            tx: unsafe { ProdRing::new(tx) },
            tx_unkicked: 0,
            c: QueueCounters::default(),
        };
        q.top_up_fill();
        q
    }

    /// Frame `idx`'s first byte.
    fn frame_ptr(&self, idx: u32) -> *mut u8 {
        debug_assert!(idx < self.nframes);
        // In bounds: idx < nframes (checked by every caller), so the offset
        // is inside the UMEM. wrapping_add keeps this safe code.
        self.umem.wrapping_add((idx as usize) << self.frame_shift)
    }

    /// Give free frames to the fill ring until `rx_target` are there (at
    /// setup, and after a fill ring refused frames).
    fn top_up_fill(&mut self) {
        let want = self.rx_target.saturating_sub(self.in_fill);
        let n = self.fill.free(want.min(self.free_len as u32));
        for i in 0..n {
            self.free_len -= 1;
            let idx = self.free[self.free_len];
            self.owner[idx as usize] = Owner::Fill;
            self.fill.put(i, u64::from(idx) << self.frame_shift);
        }
        self.fill.submit(n);
        self.in_fill += n;
    }

    /// Return the last rx burst's frames to the fill ring.
    pub(super) fn recycle(&mut self) {
        let n = self.held_len as u32;
        if n > 0 {
            let room = self.fill.free(n);
            for i in 0..room {
                let idx = self.held[i as usize];
                self.owner[idx as usize] = Owner::Fill;
                self.fill.put(i, u64::from(idx) << self.frame_shift);
            }
            self.fill.submit(room);
            self.in_fill += room;
            // The fill ring holds every rx frame, so this only runs if the
            // kernel's consumer index was refused: keep the frames free.
            for i in room..n {
                let idx = self.held[i as usize];
                self.owner[idx as usize] = Owner::Free;
                self.free[self.free_len] = idx;
                self.free_len += 1;
            }
            self.held_len = 0;
        }
        if self.in_fill < self.rx_target && self.free_len > 0 {
            self.top_up_fill();
        }
    }

    /// Read up to `out.len()` frames from the rx ring into `out`; returns
    /// how many. Descriptors that fail validation are counted in
    /// `rx_refused` and skipped (their frame, if it was the kernel's, is
    /// held for recycling like the others).
    ///
    /// # Safety
    /// The slices written to `out` point into the UMEM: the caller must not
    /// use them after the next call to [`Queue::recycle`] or after the
    /// UMEM is unmapped (the port ties them to `&'a mut self`).
    pub(super) unsafe fn receive(&mut self, out: &mut [&[u8]]) -> usize {
        let room = out.len().min(self.held.len() - self.held_len) as u32;
        let n = self.rx.available(room);
        let mut got = 0;
        for i in 0..n {
            let d = self.rx.get(i);
            let Some((idx, off, len)) = self.take_rx(d, false) else {
                continue;
            };
            // Inside frame `idx` (checked by `take_rx`), which is ours until
            // the next recycle.
            let p = self.frame_ptr(idx).wrapping_add(off as usize);
            // SAFETY: `p..p+len` lies inside frame `idx` of the UMEM (off +
            // len <= frame_size, idx < nframes); the frame left the kernel's
            // hands with this descriptor (it was the kernel's through the
            // fill ring, now `Owner::Rx`), so nothing writes it until the
            // next `recycle`, which the caller promises not to call while the
            // slice lives; no `&mut` to UMEM memory exists.
            out[got] = unsafe { std::slice::from_raw_parts(p, len as usize) };
            got += 1;
        }
        self.rx.release(n);
        got
    }

    /// Check rx descriptor `d` and take its frame back from the kernel:
    /// held for the next recycle, or lent (`lend`). `None`, counted in
    /// `rx_refused`, for a frame the kernel does not hold (untouched) or
    /// bytes that are not a frame (the frame is ours again: held, or free
    /// when lending). Returns the frame, and the offset and length of its
    /// bytes in it.
    fn take_rx(&mut self, d: XdpDesc, lend: bool) -> Option<(u32, u32, u32)> {
        let idx = d.addr >> self.frame_shift;
        if idx >= u64::from(self.nframes) || self.owner[idx as usize] != Owner::Fill {
            // Not a frame the kernel holds: touch nothing.
            self.c.rx_refused += 1;
            return None;
        }
        let idx = idx as u32;
        self.in_fill -= 1;
        let off = d.addr & u64::from(self.frame_size - 1);
        let len = u64::from(d.len);
        let good = len >= u64::from(MIN_FRAME)
            && off + len <= u64::from(self.frame_size)
            && d.options & XDP_PKT_CONTD == 0;
        // The frame is ours again whatever its descriptor says.
        if !lend {
            self.owner[idx as usize] = Owner::Rx;
            self.held[self.held_len] = idx;
            self.held_len += 1;
        } else if good {
            self.owner[idx as usize] = Owner::Lent;
            self.lent += 1;
        } else {
            self.put_free(idx);
        }
        if !good {
            self.c.rx_refused += 1;
            return None;
        }
        self.c.rx_packets += 1;
        self.c.rx_bytes += len;
        Some((idx, off as u32, len as u32))
    }

    /// Frame `idx`, which nobody else holds, onto the free stack.
    fn put_free(&mut self, idx: u32) {
        if !self.home.contains(&idx) {
            // Another queue's frame, sent from here: it goes home.
            self.owner[idx as usize] = Owner::Away;
            self.returning[self.returning_len] = idx;
            self.returning_len += 1;
            return;
        }
        self.owner[idx as usize] = Owner::Free;
        self.free[self.free_len] = idx;
        self.free_len += 1;
    }

    /// Take completed tx frames back onto the free stack; returns how many.
    pub(super) fn reclaim(&mut self) -> u32 {
        let n = self.comp.available(self.comp_size());
        for i in 0..n {
            let addr = self.comp.get(i);
            let idx = addr >> self.frame_shift;
            if idx >= u64::from(self.nframes) || self.owner[idx as usize] != Owner::Tx {
                self.c.comp_refused += 1;
                continue;
            }
            self.put_free(idx as u32);
            self.in_tx -= 1;
        }
        self.comp.release(n);
        n
    }

    fn comp_size(&self) -> u32 {
        // The completion ring is never larger than the frames it returns.
        self.nframes
    }

    /// Copy `frames` into free UMEM frames and queue them on the tx ring
    /// (not kicked). Returns how many were queued; the others are counted
    /// in `tx_dropped`.
    pub(super) fn send(&mut self, frames: &[&[u8]]) -> usize {
        self.reclaim();
        let want = frames.len().min(self.free_len).min(u32::MAX as usize) as u32;
        let room = self.tx.free(want);
        let mut k = 0u32;
        for f in frames {
            let len = f.len();
            if len < MIN_FRAME as usize || len > self.frame_size as usize || k == room {
                self.c.tx_dropped += 1;
                continue;
            }
            self.free_len -= 1;
            let idx = self.free[self.free_len];
            self.owner[idx as usize] = Owner::Tx;
            // SAFETY: frame `idx` (< nframes) was free: in no ring, so the
            // kernel does not touch it, and no slice handed out points to it;
            // `len <= frame_size` keeps the copy inside it; `f` is a Rust
            // slice, which cannot overlap a free frame.
            unsafe { std::ptr::copy_nonoverlapping(f.as_ptr(), self.frame_ptr(idx), len) };
            self.tx.put(
                k,
                XdpDesc {
                    addr: u64::from(idx) << self.frame_shift,
                    len: len as u32,
                    options: 0,
                },
            );
            k += 1;
            self.c.tx_packets += 1;
            self.c.tx_bytes += len as u64;
        }
        self.tx.submit(k);
        self.in_tx += k;
        self.tx_unkicked += k;
        k as usize
    }

    /// Whether a tx kick is due: at least `threshold` descriptors (and at
    /// least one) were queued since the last one, and (with need-wakeup) the
    /// kernel asks for it. Without the flag the kernel makes progress by
    /// itself, so the queued descriptors count as covered.
    pub(super) fn tx_kick_due(&mut self, threshold: u32, need_wakeup: bool) -> bool {
        if self.tx_unkicked == 0 || self.tx_unkicked < threshold {
            return false;
        }
        if need_wakeup && !self.tx.needs_wakeup() {
            self.tx_unkicked = 0;
            return false;
        }
        true
    }

    /// After a kick: what the kernel has not consumed yet (a copy-mode kick
    /// moves a bounded batch) still needs one.
    pub(super) fn tx_kicked(&mut self) {
        self.tx_unkicked = self.tx.outstanding();
    }

    /// Whether the fill ring asks for a wakeup (zero-copy drivers only).
    pub(super) fn fill_needs_wakeup(&self) -> bool {
        self.fill.needs_wakeup()
    }

    /// Where the frames are, counted from the ownership record.
    pub(super) fn frame_counts(&self) -> FrameCounts {
        let mut c = FrameCounts::default();
        for o in self.owner.iter() {
            match o {
                Owner::Free => c.free += 1,
                Owner::Fill => c.fill += 1,
                Owner::Rx => c.rx_held += 1,
                Owner::Tx => c.tx += 1,
                Owner::Lent => c.lent += 1,
                Owner::Away => continue,
            }
            c.total += 1;
        }
        c.returning = self.returning_len as u32;
        debug_assert_eq!(c.free as usize, self.free_len);
        debug_assert_eq!(c.fill, self.in_fill);
        debug_assert_eq!(c.rx_held as usize, self.held_len);
        debug_assert_eq!(c.tx, self.in_tx);
        debug_assert_eq!(c.lent, self.lent);
        c
    }

    /// Kernel ring indexes refused on any of the four rings.
    pub(super) fn bad_indexes(&self) -> u64 {
        self.fill.bad_index() + self.comp.bad_index() + self.rx.bad_index() + self.tx.bad_index()
    }

    /// Largest frame `send` accepts.
    pub(super) fn max_frame(&self) -> u32 {
        self.frame_size
    }
}

#[cfg(test)]
mod tests {
    use super::super::ring::fake::FakeRing;
    use super::*;
    use proptest::prelude::*;

    const FS: u32 = 2048;

    /// A queue over heap memory, with the test playing the kernel.
    struct Rig {
        umem: Vec<u8>,
        fill: FakeRing<u64>,
        comp: FakeRing<u64>,
        rx: FakeRing<XdpDesc>,
        tx: FakeRing<XdpDesc>,
        q: Option<Queue>,
    }

    impl Rig {
        fn new(nframes: u32, rx_target: u32, ring: u32) -> Box<Rig> {
            let mut r = Box::new(Rig {
                umem: vec![0u8; (nframes * FS) as usize],
                fill: FakeRing::new(ring),
                comp: FakeRing::new(ring.max(nframes).next_power_of_two()),
                rx: FakeRing::new(ring),
                tx: FakeRing::new(ring),
                q: None,
            });
            // SAFETY: the rig owns the UMEM and ring memory and drops the
            // queue first (it is taken in `Drop`); heap buffers do not move.
            let q = unsafe {
                Queue::new(
                    r.umem.as_mut_ptr(),
                    FS,
                    nframes,
                    0..nframes,
                    rx_target,
                    r.fill.mem(),
                    r.comp.mem(),
                    r.rx.mem(),
                    r.tx.mem(),
                )
            };
            r.q = Some(q);
            r
        }

        fn q(&mut self) -> &mut Queue {
            self.q.as_mut().unwrap()
        }

        /// Kernel: receive `data` into frames taken from the fill ring.
        fn kernel_rx(&mut self, frames: &[Vec<u8>]) -> Vec<u64> {
            let mut addrs = self.fill.kernel_take();
            assert!(addrs.len() >= frames.len(), "test needs fill entries");
            let rest = addrs.split_off(frames.len());
            let mut descs = Vec::new();
            for (a, f) in addrs.iter().zip(frames) {
                let at = (*a + 256) as usize;
                self.umem[at..at + f.len()].copy_from_slice(f);
                descs.push(desc(*a + 256, f.len() as u32, 0));
            }
            self.rx.kernel_put(&descs);
            rest
        }

        fn receive_all(&mut self) -> Vec<Vec<u8>> {
            let mut out: [&[u8]; 64] = [&[]; 64];
            let q = self.q.as_mut().unwrap();
            // SAFETY: the slices are copied out before anything else runs on
            // the queue.
            let n = unsafe { q.receive(&mut out) };
            out[..n].iter().map(|s| s.to_vec()).collect()
        }
    }

    impl Drop for Rig {
        fn drop(&mut self) {
            self.q = None;
        }
    }

    fn total(c: FrameCounts) -> u32 {
        c.free + c.fill + c.rx_held + c.tx + c.lent
    }

    /// The descriptor the kernel would write for `len` bytes at `addr`.
    fn desc(addr: u64, len: u32, options: u32) -> XdpDesc {
        XdpDesc { addr, len, options }
    }

    #[test]
    fn rx_frames_arrive_and_are_recycled() {
        let mut r = Rig::new(16, 8, 8);
        let c = r.q().frame_counts();
        assert_eq!((c.fill, c.free), (8, 8));
        let frames: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 60 + i as usize]).collect();
        let rest = r.kernel_rx(&frames);
        assert_eq!(rest.len(), 3);
        assert_eq!(r.receive_all(), frames);
        let c = r.q().frame_counts();
        assert_eq!((c.rx_held, c.fill), (5, 3));
        r.q().recycle();
        let c = r.q().frame_counts();
        assert_eq!((c.rx_held, c.fill), (0, 8));
        // The kernel got back exactly the 5 frames (as chunk addresses).
        let back = r.fill.kernel_take();
        assert_eq!(back.len(), 5);
        assert!(back.iter().all(|a| a % u64::from(FS) == 0));
    }

    #[test]
    fn bad_rx_descriptors_are_counted_not_followed() {
        let mut r = Rig::new(16, 8, 8);
        let addrs = r.fill.kernel_take();
        let bad = [
            // Past the UMEM.
            desc(16 * u64::from(FS), 64, 0),
            desc(u64::MAX, 64, 0),
            // A frame the kernel does not hold (on the free stack).
            desc(15 * u64::from(FS), 64, 0),
            // Bytes past the end of the frame.
            desc(addrs[0] + 256, FS, 0),
            // Runt.
            desc(addrs[1] + 256, 3, 0),
            // Multi-buffer, never asked for.
            desc(addrs[2] + 256, 64, XDP_PKT_CONTD),
            // Twice the same frame: the second is refused.
            desc(addrs[3] + 256, 64, 0),
            desc(addrs[3] + 256, 64, 0),
        ];
        r.rx.kernel_put(&bad);
        let got = r.receive_all();
        assert_eq!(got.len(), 1, "only the first use of frame 3 is good");
        assert_eq!(r.q().c.rx_refused, 7);
        // Frames 0..=3 came back from the kernel, good or bad, and are held.
        let c = r.q().frame_counts();
        assert_eq!((c.rx_held, total(c)), (4, 16));
        r.q().recycle();
        let c = r.q().frame_counts();
        assert_eq!((c.fill, c.rx_held, total(c)), (8, 0, 16));
    }

    #[test]
    fn lent_frames_go_out_in_place_or_back_and_bad_ones_are_refused() {
        let mut r = Rig::new(16, 8, 8);
        let addrs = r.fill.kernel_take();
        // Two good frames, a runt (its frame comes back free, not lent),
        // and a frame the kernel does not hold.
        r.rx.kernel_put(&[
            desc(addrs[0] + 256, 100, 0),
            desc(addrs[1] + 256, 1500, 0),
            desc(addrs[2] + 256, 3, 0),
            desc(15 * u64::from(FS), 64, 0),
        ]);
        let mut out = [LentFrame::default(); 8];
        assert_eq!(r.q().lend(&mut out), 2);
        assert_eq!(r.q().c.rx_refused, 2);
        let (a, b) = (out[0], out[1]);
        assert_eq!((a.offset, a.len, b.len), (256, 100, 1500));
        let c = r.q().frame_counts();
        assert_eq!((c.lent, total(c)), (2, 16));
        // Not lent: refused and left alone.
        assert!(!r.q().give_back(addrs[3] as u32 / FS));
        let free_frame = LentFrame { frame: 15, ..a };
        assert_eq!(r.q().send_lent(&[free_frame]), 0);
        assert_eq!(r.q().c.tx_refused, 1);
        // `a` goes out where it lies, `b` with bytes past its frame is
        // taken back and counted.
        let past = LentFrame {
            offset: FS - 8,
            ..b
        };
        assert_eq!(r.q().send_lent(&[a, past]), 1);
        assert_eq!(r.q().c.tx_dropped, 1);
        let sent = r.tx.kernel_take();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].addr, u64::from(a.frame) * u64::from(FS) + 256);
        assert_eq!(sent[0].len, 100);
        assert!(!r.q().give_back(b.frame), "taken back once only");
        let c = r.q().frame_counts();
        assert_eq!((c.lent, c.tx, total(c)), (0, 1, 16));
        r.comp.kernel_put(&[sent[0].addr]);
        r.q().reclaim();
        assert_eq!(r.q().frame_counts().tx, 0);
    }

    #[test]
    fn tx_copies_queues_and_reclaims() {
        let mut r = Rig::new(16, 8, 8);
        let a = vec![0xaa; 100];
        let b = vec![0xbb; 1500];
        let runt = vec![0u8; 10];
        let huge = vec![0u8; FS as usize + 1];
        let n = r.q().send(&[&a, &runt, &b, &huge]);
        assert_eq!(n, 2);
        assert_eq!(r.q().c.tx_dropped, 2);
        assert!(r.q().tx_kick_due(1, false));
        let descs = r.tx.kernel_take();
        assert_eq!(descs.len(), 2);
        for (d, want) in descs.iter().zip([&a, &b]) {
            let at = d.addr as usize;
            assert_eq!(&r.umem[at..at + d.len as usize], &want[..]);
        }
        assert_eq!(r.q().frame_counts().tx, 2);
        // Completions, with a bogus one and a duplicate.
        r.comp
            .kernel_put(&[descs[0].addr, descs[1].addr, descs[1].addr, 1 << 40]);
        assert_eq!(r.q().reclaim(), 4);
        assert_eq!(r.q().c.comp_refused, 2);
        let c = r.q().frame_counts();
        assert_eq!((c.tx, c.free, total(c)), (0, 8, 16));
    }

    #[test]
    fn tx_stops_at_ring_and_frames() {
        // 4 tx frames, tx ring of 8.
        let mut r = Rig::new(12, 8, 8);
        let f = [1u8; 64];
        let burst = vec![&f[..]; 6];
        assert_eq!(r.q().send(&burst), 4);
        assert_eq!(r.q().c.tx_dropped, 2);
        assert_eq!(r.q().send(&burst), 0);
        // The kernel sends and completes them: room again.
        let d = r.tx.kernel_take();
        r.comp
            .kernel_put(&d.iter().map(|d| d.addr).collect::<Vec<_>>());
        assert_eq!(r.q().send(&burst[..3]), 3);
    }

    #[test]
    fn kick_follows_the_need_wakeup_flag() {
        let mut r = Rig::new(16, 8, 8);
        let f = vec![1u8; 64];
        assert!(!r.q().tx_kick_due(1, true), "nothing queued");
        r.q().send(&[&f]);
        assert!(!r.q().tx_kick_due(1, true), "flag clear: no kick");
        assert!(!r.q().tx_kick_due(1, true), "and nothing left to kick");
        r.tx.flags.store(1, std::sync::atomic::Ordering::Relaxed);
        r.q().send(&[&f, &f]);
        assert!(!r.q().tx_kick_due(3, true), "below threshold");
        assert!(r.q().tx_kick_due(2, true));
        // The kernel consumed one of the three queued.
        let _ = r.tx.kernel_take();
        r.q().tx_kicked();
        assert!(!r.q().tx_kick_due(1, true));
    }

    proptest! {
        /// Whatever the kernel writes into the rx and completion rings, the
        /// queue neither panics nor loses or duplicates a frame.
        #[test]
        fn garbage_from_the_kernel_is_survived(
            ops in proptest::collection::vec(
                (0u8..4, any::<u64>(), any::<u32>(), 0u8..3), 1..200)
        ) {
            let mut r = Rig::new(16, 8, 8);
            let mut fill_seen: Vec<u64> = Vec::new();
            for (op, a, len, which) in ops {
                let addr = match which {
                    // A plausible address: a frame the kernel was given.
                    0 if !fill_seen.is_empty() => fill_seen[(a as usize) % fill_seen.len()] + (a % 512),
                    1 => a % (20 * u64::from(FS)),
                    _ => a,
                };
                match op {
                    0 => {
                        r.rx.kernel_put(&[XdpDesc { addr, len: len % 4096, options: len & 1 }]);
                        let _ = r.receive_all();
                    }
                    1 => {
                        r.comp.kernel_put(&[addr]);
                        r.q().reclaim();
                    }
                    2 => {
                        r.q().recycle();
                        fill_seen.extend(r.fill.kernel_take());
                    }
                    _ => {
                        let f = vec![7u8; 14 + (len % 2000) as usize];
                        r.q().send(&[&f]);
                        let d = r.tx.kernel_take();
                        if a % 2 == 0 {
                            r.comp.kernel_put(&d.iter().map(|d| d.addr).collect::<Vec<_>>());
                        }
                    }
                }
                let c = r.q().frame_counts();
                prop_assert_eq!(total(c), 16);
            }
        }
    }
}
