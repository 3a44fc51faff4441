//! The two rings of an AF_PACKET socket as memory: the reader of a
//! `TPACKET_V3` rx ring and the writer of a V2 or V3 tx ring. They work on
//! raw memory laid out as the kernel lays it out (so the unit tests run
//! them over fake memory, corrupt layouts included); the port owns the
//! mapping and the socket.

use std::sync::atomic::{AtomicU32, Ordering};

use super::TxVersion;
use crate::PortStats;
use crate::packet_sys::{self as sys, ETH_HLEN, VLAN_HLEN, VlanTag};

pub(super) const TP_STATUS_KERNEL: u32 = 0;
pub(super) const TP_STATUS_USER: u32 = 1;
pub(super) const TP_STATUS_AVAILABLE: u32 = 0;
pub(super) const TP_STATUS_SEND_REQUEST: u32 = 1;

/// Byte offsets in `struct tpacket_block_desc` (header of an rx block).
pub(super) mod block {
    pub(in crate::af_packet) const STATUS: usize = 8;
    pub(in crate::af_packet) const NUM_PKTS: usize = 12;
    pub(in crate::af_packet) const FIRST_PKT: usize = 16;
    /// Size of the block header: no packet starts before it.
    pub(in crate::af_packet) const HEADER_LEN: usize = 48;
}

/// Byte offsets in `struct tpacket3_hdr`.
pub(super) mod h3 {
    pub(in crate::af_packet) const NEXT_OFFSET: usize = 0;
    pub(in crate::af_packet) const SNAPLEN: usize = 12;
    pub(in crate::af_packet) const LEN: usize = 16;
    pub(in crate::af_packet) const STATUS: usize = 20;
    pub(in crate::af_packet) const MAC: usize = 24;
    pub(in crate::af_packet) const VLAN_TCI: usize = 32;
    pub(in crate::af_packet) const VLAN_TPID: usize = 36;
    /// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`: where tx data starts.
    pub(in crate::af_packet) const HEADER_LEN: usize = 48;
}

/// Byte offsets in `struct tpacket2_hdr`.
pub(super) mod h2 {
    pub(in crate::af_packet) const STATUS: usize = 0;
    pub(in crate::af_packet) const LEN: usize = 4;
    pub(in crate::af_packet) const SNAPLEN: usize = 8;
    /// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`: where tx data starts.
    pub(in crate::af_packet) const HEADER_LEN: usize = 32;
}

// The offsets above are the kernel UAPI's; check them against libc's
// definitions of the same structs.
const _: () = {
    use std::mem::{offset_of, size_of};
    let bd = offset_of!(libc::tpacket_block_desc, hdr);
    assert!(bd + offset_of!(libc::tpacket_hdr_v1, block_status) == block::STATUS);
    assert!(bd + offset_of!(libc::tpacket_hdr_v1, num_pkts) == block::NUM_PKTS);
    assert!(bd + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt) == block::FIRST_PKT);
    assert!(size_of::<libc::tpacket_block_desc>() == block::HEADER_LEN);
    assert!(offset_of!(libc::tpacket3_hdr, tp_next_offset) == h3::NEXT_OFFSET);
    assert!(offset_of!(libc::tpacket3_hdr, tp_snaplen) == h3::SNAPLEN);
    assert!(offset_of!(libc::tpacket3_hdr, tp_len) == h3::LEN);
    assert!(offset_of!(libc::tpacket3_hdr, tp_status) == h3::STATUS);
    assert!(offset_of!(libc::tpacket3_hdr, tp_mac) == h3::MAC);
    let v1 = offset_of!(libc::tpacket3_hdr, hv1);
    assert!(v1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci) == h3::VLAN_TCI);
    assert!(v1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid) == h3::VLAN_TPID);
    assert!(size_of::<libc::tpacket3_hdr>() == h3::HEADER_LEN);
    assert!(offset_of!(libc::tpacket2_hdr, tp_status) == h2::STATUS);
    assert!(offset_of!(libc::tpacket2_hdr, tp_len) == h2::LEN);
    assert!(offset_of!(libc::tpacket2_hdr, tp_snaplen) == h2::SNAPLEN);
    assert!(size_of::<libc::tpacket2_hdr>() == h2::HEADER_LEN);
};

/// The reader's side of a `TPACKET_V3` rx ring.
#[derive(Debug)]
pub(super) struct RxRing {
    base: *mut u8,
    block_bytes: usize,
    block_count: usize,
    max_frame: usize,
    /// Most packets a block can hold (each takes at least a header): a
    /// bound on what a corrupt block's count can make us count as lost.
    pub(super) max_pkts: u32,
    /// The block being read.
    cur: usize,
    /// Packets of `cur` not read yet; 0: `cur` is not open.
    left: u32,
    /// Offset in `cur` of the next packet's header.
    off: usize,
    /// No packet of `cur` may start before this offset (the end of the
    /// last frame read), so headers and frames never overlap and the walk
    /// only moves forward.
    floor: usize,
    /// First block of the run finished but not yet handed back.
    release_from: usize,
    /// Length of that run.
    pending: usize,
}

/// What the next packet of the open block turned out to be.
enum Next {
    /// A good frame at this offset of the ring, of this length.
    Frame(usize, usize),
    /// A frame to drop (cut short, runt, too long).
    Drop,
    /// A corrupt header: the rest of the block is lost.
    Corrupt,
}

impl RxRing {
    /// A reader over `block_count` blocks of `block_bytes` at `base`.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `block_bytes *
    /// block_count` bytes for as long as the ring lives, aligned to 8,
    /// laid out as `TPACKET_V3` blocks whose status words only the kernel
    /// and this ring touch; `block_bytes` must be a multiple of 8 and more
    /// than the block header.
    pub(super) unsafe fn new(
        base: *mut u8,
        block_bytes: usize,
        block_count: usize,
        max_frame: usize,
    ) -> RxRing {
        debug_assert!(
            block_bytes.is_multiple_of(8) && block_bytes > block::HEADER_LEN && block_count > 0
        );
        RxRing {
            base,
            block_bytes,
            block_count,
            max_frame,
            max_pkts: u32::try_from((block_bytes - block::HEADER_LEN) / h3::HEADER_LEN + 1)
                .unwrap_or(u32::MAX),
            cur: 0,
            left: 0,
            off: 0,
            floor: 0,
            release_from: 0,
            pending: 0,
        }
    }

    /// The status word of block `b` (< block_count).
    fn status(&self, b: usize) -> &AtomicU32 {
        debug_assert!(b < self.block_count);
        // SAFETY: `b * block_bytes + 8` is inside the ring (b < block_count)
        // and 4-aligned (base and block_bytes are multiples of 8); the
        // kernel and this ring access the word only atomically (the
        // kernel's plain aligned stores with barriers are its atomics),
        // and the ring outlives the reference.
        unsafe { AtomicU32::from_ptr(self.base.add(b * self.block_bytes + block::STATUS).cast()) }
    }

    /// The u32 at byte `at` of block `b`, if it lies inside the block.
    fn u32_at(&self, b: usize, at: usize) -> Option<u32> {
        if at.checked_add(4)? > self.block_bytes {
            return None;
        }
        // SAFETY: bytes `at..at + 4` of block `b` are inside the ring;
        // user space owns the block (status USER seen with Acquire), so the
        // kernel does not write it; read_unaligned needs no alignment.
        Some(unsafe {
            self.base
                .add(b * self.block_bytes + at)
                .cast::<u32>()
                .read_unaligned()
        })
    }

    /// The u16 at byte `at` of block `b`, if it lies inside the block.
    fn u16_at(&self, b: usize, at: usize) -> Option<u16> {
        if at.checked_add(2)? > self.block_bytes {
            return None;
        }
        // SAFETY: as `u32_at`, for 2 bytes.
        Some(unsafe {
            self.base
                .add(b * self.block_bytes + at)
                .cast::<u16>()
                .read_unaligned()
        })
    }

    /// Hand the finished blocks back to the kernel.
    fn release(&mut self) {
        for i in 0..self.pending {
            let b = (self.release_from + i) % self.block_count;
            // Release: our reads of the block (and the frames handed out,
            // whose borrows have ended) happen before the kernel, which
            // reads the status before refilling the block, writes it again.
            self.status(b).store(TP_STATUS_KERNEL, Ordering::Release);
        }
        self.pending = 0;
    }

    fn finish_block(&mut self) {
        if self.pending == 0 {
            self.release_from = self.cur;
        }
        self.pending += 1;
        self.cur = (self.cur + 1) % self.block_count;
        self.left = 0;
    }

    /// Open the next block if the kernel has handed it over. Returns false
    /// when there is none to read.
    fn open_block(&mut self, stats: &mut PortStats) -> bool {
        // Every block read and not yet handed back: `cur` is the first of
        // them again.
        if self.pending >= self.block_count {
            return false;
        }
        // Acquire: pairs with the kernel's barrier before it sets
        // TP_STATUS_USER (prb_close_block), so the block's contents are
        // visible.
        if self.status(self.cur).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            return false;
        }
        let b = self.cur;
        let num = self.u32_at(b, block::NUM_PKTS).unwrap_or(0);
        let first = self.u32_at(b, block::FIRST_PKT).unwrap_or(0) as usize;
        if num == 0 {
            self.finish_block();
        } else if first < block::HEADER_LEN || first >= self.block_bytes || num > self.max_pkts {
            stats.rx_dropped += u64::from(num.min(self.max_pkts));
            self.finish_block();
        } else {
            self.left = num;
            self.off = first;
            self.floor = first;
        }
        true
    }

    /// Read the packet at `off` in the open block.
    fn next_packet(&mut self) -> Next {
        let b = self.cur;
        let off = self.off;
        if off < self.floor
            || off
                .checked_add(h3::HEADER_LEN)
                .is_none_or(|e| e > self.block_bytes)
        {
            return Next::Corrupt;
        }
        // All inside the block: off + 48 <= block_bytes.
        let field = |at| self.u32_at(b, off + at).unwrap_or(0);
        let next = field(h3::NEXT_OFFSET) as usize;
        let snaplen = field(h3::SNAPLEN) as usize;
        let len = field(h3::LEN) as usize;
        let status = field(h3::STATUS);
        let tci = self.u16_at(b, off + h3::VLAN_TCI).unwrap_or(0);
        let tpid = self.u16_at(b, off + h3::VLAN_TPID).unwrap_or(0);
        let mac = self.u16_at(b, off + h3::MAC).unwrap_or(0) as usize;
        let start = off + mac;
        let Some(end) = start
            .checked_add(snaplen)
            .filter(|&e| e <= self.block_bytes)
        else {
            return Next::Corrupt;
        };
        if mac < h3::HEADER_LEN {
            return Next::Corrupt;
        }
        self.floor = end;
        self.left -= 1;
        if self.left == 0 {
            self.finish_block();
        } else {
            // Checked on the next call: 0 or backwards lands below `floor`.
            self.off = off.saturating_add(next);
        }

        let vlan = VlanTag::from_status(status, tci, tpid);
        let at = b * self.block_bytes + start;
        // SAFETY: bytes `at - 4 .. at + snaplen` lie in block `b` when
        // mac >= 52 (end <= block_bytes), which user space owns until the
        // next call; they overlap no frame handed out in this burst (those
        // end at or before `off` < at - 4, enforced by `floor`) and no
        // header still to be read (those start at or after `end`).
        match unsafe {
            keep(
                self.base,
                at,
                (snaplen, len),
                mac - h3::HEADER_LEN,
                vlan,
                self.max_frame,
            )
        } {
            Some((at, len)) => Next::Frame(at, len),
            None => Next::Drop,
        }
    }

    /// Up to `out.len()` frames. See [`Port::rx_burst`].
    pub(super) fn burst<'a>(&'a mut self, out: &mut [&'a [u8]], stats: &mut PortStats) -> usize {
        self.release();
        let mut n = 0;
        // Offsets and lengths first, slices after: the walk needs `&mut
        // self`, the slices borrow `self` for 'a.
        while n < out.len() {
            if self.left == 0 {
                if !self.open_block(stats) {
                    break;
                }
                continue;
            }
            match self.next_packet() {
                Next::Frame(at, len) => {
                    // SAFETY: `at .. at + len` was checked to lie inside an
                    // owned block of the ring; the block is handed back only
                    // by `release`, which needs `&mut self` and so runs
                    // after these borrows end; nothing writes the bytes
                    // meanwhile (see `next_packet`).
                    out[n] = unsafe { std::slice::from_raw_parts(self.base.add(at), len) };
                    n += 1;
                    stats.rx_packets += 1;
                    stats.rx_bytes += len as u64;
                }
                Next::Drop => stats.rx_dropped += 1,
                Next::Corrupt => {
                    stats.rx_dropped += u64::from(self.left.min(self.max_pkts));
                    self.finish_block();
                }
            }
        }
        n
    }
}

/// A received frame at byte `at` of the ring at `base`, `snaplen` of its
/// `len` bytes captured, `room` bytes free before it (past its header),
/// its VLAN tag (if the kernel moved one into the header) put back in
/// place: (offset, length) of the frame to hand out, or `None`: a drop
/// (cut short, a runt, over `max_frame`, no room for the tag).
///
/// # Safety
/// `at .. at + snaplen` and the `room` bytes before it must lie in ring
/// memory that user space owns and no frame handed out overlaps.
pub(super) unsafe fn keep(
    base: *mut u8,
    at: usize,
    (snaplen, len): (usize, usize),
    room: usize,
    vlan: Option<VlanTag>,
    max_frame: usize,
) -> Option<(usize, usize)> {
    let frame_len = snaplen + if vlan.is_some() { VLAN_HLEN } else { 0 };
    if snaplen < len || snaplen < ETH_HLEN || frame_len > max_frame {
        return None;
    }
    match vlan {
        None => Some((at, snaplen)),
        // The tag needs 4 bytes before the frame, past the header.
        Some(_) if room < VLAN_HLEN => None,
        Some(tag) => {
            // SAFETY: `at - 4 .. at + snaplen` lies in owned ring memory
            // that nothing handed out overlaps (the caller's promise, room
            // >= 4).
            let buf = unsafe {
                std::slice::from_raw_parts_mut(base.add(at - VLAN_HLEN), snaplen + VLAN_HLEN)
            };
            sys::insert_vlan(buf, tag);
            Some((at - VLAN_HLEN, frame_len))
        }
    }
}

/// The writer's side of a tx ring (V2 or V3 frame headers).
#[derive(Debug)]
pub(super) struct TxRing {
    base: *mut u8,
    block_bytes: usize,
    frame_bytes: usize,
    per_block: usize,
    pub(super) count: usize,
    version: TxVersion,
    /// The next frame to fill.
    head: usize,
    /// Frames marked and not yet seen taken by the kernel.
    pub(super) queued: usize,
}

impl TxRing {
    /// A writer over `blocks` blocks of `block_bytes` at `base`, each
    /// holding `block_bytes / frame_bytes` frames.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `block_bytes * blocks`
    /// bytes for as long as the ring lives, aligned to 16, laid out as a
    /// tx ring of `version` whose frame status words only the kernel and
    /// this ring touch; `frame_bytes` a multiple of 16 above the frame
    /// header and at most `block_bytes`.
    pub(super) unsafe fn new(
        base: *mut u8,
        block_bytes: usize,
        blocks: usize,
        frame_bytes: usize,
        version: TxVersion,
    ) -> TxRing {
        debug_assert!(frame_bytes.is_multiple_of(16) && frame_bytes > h3::HEADER_LEN);
        debug_assert!(frame_bytes <= block_bytes && blocks > 0);
        let per_block = block_bytes / frame_bytes;
        TxRing {
            base,
            block_bytes,
            frame_bytes,
            per_block,
            count: per_block * blocks,
            version,
            head: 0,
            queued: 0,
        }
    }

    /// Byte offset of frame `i` (< count) in the ring.
    fn frame_at(&self, i: usize) -> usize {
        (i / self.per_block) * self.block_bytes + (i % self.per_block) * self.frame_bytes
    }

    fn header_len(&self) -> usize {
        match self.version {
            TxVersion::V2 => h2::HEADER_LEN,
            TxVersion::V3 => h3::HEADER_LEN,
        }
    }

    /// The status word of frame `i` (< count).
    fn status(&self, i: usize) -> &AtomicU32 {
        let at = self.frame_at(i)
            + match self.version {
                TxVersion::V2 => h2::STATUS,
                TxVersion::V3 => h3::STATUS,
            };
        // SAFETY: frame `i`'s header lies inside the ring; `at` is 4-aligned
        // (base and frame_bytes are multiples of 16, the status offset a
        // multiple of 4); the kernel and this ring access the word only
        // atomically; the ring outlives the reference.
        unsafe { AtomicU32::from_ptr(self.base.add(at).cast()) }
    }

    fn put_u32(&mut self, at: usize, v: u32) {
        // SAFETY: callers pass offsets inside the header of a frame this
        // ring owns (status AVAILABLE seen), which the kernel does not
        // touch until the frame is marked.
        unsafe { self.base.add(at).cast::<u32>().write_unaligned(v) }
    }

    /// Copy `frame` into the next frame and mark it for sending. False if
    /// the ring is full (or the frame too long for a ring frame).
    pub(super) fn push(&mut self, frame: &[u8]) -> bool {
        let hdr = self.header_len();
        if frame.len() > self.frame_bytes - hdr {
            return false;
        }
        let i = self.head;
        // Acquire: pairs with the kernel's status store when it is done
        // with the frame (AVAILABLE after the skb is freed), so we do not
        // overwrite data it may still read.
        if self.status(i).load(Ordering::Acquire) != TP_STATUS_AVAILABLE {
            return false;
        }
        let at = self.frame_at(i);
        // SAFETY: `at + hdr .. at + hdr + len` lies inside frame `i`
        // (len <= frame_bytes - hdr), which user space owns (AVAILABLE), and
        // `frame` is a Rust slice, which cannot point into the ring (no
        // slice of the tx ring is ever handed out).
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), self.base.add(at + hdr), frame.len());
        }
        let len = frame.len() as u32;
        match self.version {
            TxVersion::V2 => {
                self.put_u32(at + h2::LEN, len);
                self.put_u32(at + h2::SNAPLEN, len);
            }
            TxVersion::V3 => {
                // The kernel refuses variable-size tx frames.
                self.put_u32(at + h3::NEXT_OFFSET, 0);
                self.put_u32(at + h3::LEN, len);
                self.put_u32(at + h3::SNAPLEN, len);
            }
        }
        // Release: the frame's data and length are visible to the kernel,
        // which reads the status first, before it sees SEND_REQUEST.
        self.status(i)
            .store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.head = if i + 1 == self.count { 0 } else { i + 1 };
        self.queued += 1;
        true
    }

    /// Whether the last frame marked is still waiting for the kernel.
    pub(super) fn last_pending(&self) -> bool {
        let last = if self.head == 0 {
            self.count - 1
        } else {
            self.head - 1
        };
        // Acquire: pairs with the kernel's store that takes the frame.
        self.status(last).load(Ordering::Acquire) == TP_STATUS_SEND_REQUEST
    }
}
