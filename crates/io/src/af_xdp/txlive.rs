//! [`TxLive`]: an AF_XDP port's transmit without skbs (`TxPath::Xdp`,
//! the port option `tx = "xdp"`), through the kernel's XDP test run with
//! live frames of the port's own program (`ebpf/xdp_redirect.c` with
//! `ebpf/xdp_txlive.h`).
//!
//! A copy-mode AF_XDP socket builds one skb per frame it sends
//! (`xsk_generic_xmit`), and on veth the peer's receive of that skb runs
//! on the sending core too. Here `send` copies each frame into a slot of
//! the program's mmap-able array `txlive_frames` (the copy the socket path
//! makes into its tx UMEM), and `run` (the port's `flush`, or a full
//! array) sends the whole batch with one `BPF_PROG_RUN`
//! (`BPF_F_TEST_XDP_LIVE_FRAMES`, `repeat` = the batch, the port's
//! interface as ingress, 8 bytes of XDP metadata that tell the program
//! this is no received frame): the program writes slot `i` into the kernel's
//! page of run `i` and returns `XDP_TX`, which the test run turns into a
//! redirect out of that interface, so each frame leaves as an xdp_frame
//! through `ndo_xdp_xmit`. No tx ring, no completion ring, no `sendto`.
//! It runs the program attached to the interface, not one of its own: a
//! test run puts its program into the kernel's XDP dispatcher and takes it
//! out again, and each change rewrites the dispatcher and waits for an
//! RCU grace period (about 120 us of CPU a frame when tried), while for a
//! program already there it only counts a user.
//!
//! Frames shorter than an Ethernet header or longer than [`MAX_FRAME`]
//! are refused and counted (`tx_dropped`), as are frames of a run the
//! kernel refuses, and slots the program refuses (a bug if ever seen).
//! What the driver drops after the program (a veth whose peer has neither
//! an XDP program nor GRO on takes no xdp_frame) the kernel counts on the
//! interface, not here, unless the port checks ([`PeerCheck`], `tx =
//! "auto"`): then a run whose frames the driver's counters do not show
//! arriving makes the port fall back to its socket for good, the refused
//! run's frames, still in the array, sent again through it. The run
//! resolves the interface in the calling
//! thread's network namespace: the thread that flushes must be in the
//! port's (the daemon runs its ports in its own).

use std::io;
use std::os::fd::AsFd;

use aya::Ebpf;
use aya::programs::{ProgramError, TestRun, TestRunAttrs, TestRunOptions, Xdp};

use super::config::AfXdpError;
use super::ethtool::XmitCounters;
use super::queue::MIN_FRAME;
use super::sys::Mmap;

pub(super) const FRAMES_MAP: &str = "txlive_frames";
const STATE_MAP: &str = "txlive_state";

/// Slots of the array (`TXLIVE_SLOTS`): frames sent by one run at most.
pub(super) const SLOTS: u32 = 1024;
/// Bytes of a slot: {len: u32, pad: u32, data}.
const SLOT: usize = 2048;
/// Largest frame a slot holds (`TXLIVE_MAX_FRAME`).
pub(super) const MAX_FRAME: usize = SLOT - 8;
/// Frames the kernel sends between two flushes to the driver (at most
/// `TEST_XDP_MAX_BATCH`, 256): a veth's peer queues 256 xdp_frames and
/// its NAPI polls 64 at a time, so batches of 256 overflowed it (4 of
/// 2,500 lost in the netns test); 64 is the kernel's default.
const BATCH: u32 = 64;
/// Runs of one batch cut short by a signal that are resumed.
const RESUMES: u32 = 4;
/// Bytes of XDP metadata in the template: what tells the program a run
/// of its own from a received frame.
const META: usize = 8;
/// The page the kernel builds each frame's page from: the metadata
/// ("VRHTXLIV"), then an Ethernet header's worth and more (rewritten by
/// the program).
static TEMPLATE: [u8; META + 64] = {
    let mut t = [0u8; META + 64];
    let m = *b"VRHTXLIV";
    let mut i = 0;
    while i < META {
        t[i] = m[i];
        i += 1;
    }
    t
};

/// Runs between two checks of the driver's counters once it has been
/// seen taking frames (before that, every run is checked).
/// A check reads them before and after one run: two system calls.
const CHECK_EVERY: u32 = 1024;

/// `tx = "auto"`: whether the driver takes the frames, from its counters
/// (see [`XmitCounters`]).
pub(super) struct PeerCheck {
    counters: XmitCounters,
    /// The program's `sent` and the driver's count at the last check.
    sent_at: u64,
    xmit_at: u64,
    /// The driver was seen taking frames.
    confirmed: bool,
    runs: u32,
    /// `sent` and the driver's count before the run a periodic check
    /// looks at.
    before: (u64, u64),
}

impl PeerCheck {
    /// Check interface `ifname` (in the calling thread's namespace); `None`
    /// if its driver has no counters to check (see [`XmitCounters`]).
    pub(super) fn open(ifname: &str) -> Option<PeerCheck> {
        let mut counters = XmitCounters::open(ifname).ok()??;
        let xmit_at = counters.read().ok()?;
        Some(PeerCheck {
            counters,
            sent_at: 0,
            xmit_at,
            confirmed: false,
            runs: 0,
            before: (0, xmit_at),
        })
    }
}

/// Offsets in `txlive_state`: next, count (u32), sent, refused (u64).
const ST_NEXT: usize = 0;
const ST_COUNT: usize = 4;
const ST_SENT: usize = 8;
const ST_REFUSED: usize = 16;

/// What [`TxLive::push`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Push {
    /// In the array, sent by the next run.
    Queued,
    /// Too short or too long: counted in `dropped`.
    Refused,
    /// The run of a full array found the driver refusing xdp_frames
    /// ([`TxLive::fell_back`]): not taken, to be sent otherwise.
    FellBack,
}

/// See the [module docs](self).
pub(super) struct TxLive {
    frames: Mmap,
    state: Mmap,
    ctx: [u8; 24],
    queued: u32,
    queued_bytes: u64,
    /// Bytes of the frames in runs the kernel took.
    pub(super) tx_bytes: u64,
    /// `BPF_PROG_RUN` calls made.
    pub(super) runs: u64,
    /// Frames refused here (size) or in a failed run.
    pub(super) dropped: u64,
    /// `tx = "auto"`'s check of the driver.
    check: Option<PeerCheck>,
    /// The driver refused a run (see [`PeerCheck`]): the port sends
    /// through its socket from now on.
    pub(super) fell_back: bool,
    /// Frames of the refused run, in slots `0..resend`, to be sent again
    /// through the socket ([`TxLive::take_resend`]).
    resend: u32,
    /// Frames the program sent that the driver did not take (resent or
    /// lost): not in `tx_packets`.
    pub(super) refused_by_driver: u64,
}

impl TxLive {
    /// Map the two arrays of the port's program `ebpf` (loaded with
    /// [`SLOTS`] slots), for interface `ifindex` (`ifname` names it in
    /// errors). The mappings hold the maps alive.
    pub(super) fn open(
        ebpf: &Ebpf,
        (ifname, ifindex): (&str, u32),
        check: Option<PeerCheck>,
    ) -> Result<TxLive, AfXdpError> {
        let map = |name: &str, len: usize| -> Result<Mmap, AfXdpError> {
            let m = ebpf.map(name).ok_or_else(|| {
                super::program::map_error(
                    ifname,
                    aya::maps::MapError::InvalidName {
                        name: name.to_string(),
                    },
                )
            })?;
            let fd = match m {
                aya::maps::Map::Array(d) => d.fd().as_fd(),
                _ => {
                    return Err(super::program::map_error(
                        ifname,
                        aya::maps::MapError::InvalidMapType { map_type: 0 },
                    ));
                }
            };
            Mmap::ring(fd, len, 0).map_err(|source| AfXdpError::Socket {
                ifname: ifname.to_string(),
                queue: 0,
                step: "mmap the XDP transmit's array",
                source,
            })
        };
        let frames = map(FRAMES_MAP, SLOTS as usize * SLOT)?;
        let state = map(STATE_MAP, 4096)?;
        let mut ctx = [0u8; 24];
        // struct xdp_md: data after the metadata, data_end, data_meta 0,
        // ingress_ifindex, rx queue 0.
        ctx[0..4].copy_from_slice(&(META as u32).to_ne_bytes());
        ctx[4..8].copy_from_slice(&(TEMPLATE.len() as u32).to_ne_bytes());
        ctx[12..16].copy_from_slice(&ifindex.to_ne_bytes());
        Ok(TxLive {
            frames,
            state,
            ctx,
            queued: 0,
            queued_bytes: 0,
            tx_bytes: 0,
            runs: 0,
            dropped: 0,
            check,
            fell_back: false,
            resend: 0,
            refused_by_driver: 0,
        })
    }

    /// Copy `frames` into the array's free slots (running a full array
    /// first); returns how many were taken (the others are counted) and
    /// how many of `frames` were looked at: all, unless a run fell back
    /// ([`TxLive::fell_back`]), whose frames the caller sends otherwise.
    pub(super) fn send(&mut self, ebpf: &Ebpf, frames: &[&[u8]]) -> (usize, usize) {
        let mut k = 0;
        for (i, f) in frames.iter().enumerate() {
            // SAFETY: `f` is `f.len()` readable bytes, and cannot overlap
            // the array (no Rust reference points into it).
            match unsafe { self.push(ebpf, f.as_ptr(), f.len()) } {
                Push::Queued => k += 1,
                Push::Refused => {}
                Push::FellBack => return (k, i),
            }
        }
        (k, frames.len())
    }

    /// Copy the `len` bytes at `src` into the array's next free slot
    /// (running a full array first). A frame shorter than an Ethernet
    /// header or longer than [`MAX_FRAME`] is refused and counted.
    ///
    /// # Safety
    /// `src` must be valid for reads of `len` bytes and must not point
    /// into the array. The bytes may change meanwhile (a lent frame in a
    /// VR's pool): the copy then sends whatever it read.
    pub(super) unsafe fn push(&mut self, ebpf: &Ebpf, src: *const u8, len: usize) -> Push {
        if len < MIN_FRAME as usize || len > MAX_FRAME {
            self.dropped += 1;
            return Push::Refused;
        }
        if self.queued == SLOTS {
            // A failed run counts its frames dropped.
            let _ = self.run(ebpf);
            if self.fell_back {
                return Push::FellBack;
            }
        }
        let slot = self.frames.ptr().wrapping_add(self.queued as usize * SLOT);
        // SAFETY: slot `queued` (< SLOTS) lies inside the mapping of
        // SLOTS * SLOT bytes; `len <= MAX_FRAME` keeps the bytes inside
        // it, after its 8-byte header. Only the kernel's run of this
        // program (inside `run`, on this thread) reads the array, and no
        // Rust reference points into it; the caller vouches for `src`.
        unsafe {
            slot.cast::<u32>().write(len as u32);
            std::ptr::copy_nonoverlapping(src, slot.add(8), len);
        }
        self.queued += 1;
        self.queued_bytes += len as u64;
        Push::Queued
    }

    /// Send the queued frames with one `BPF_PROG_RUN` (more if a signal
    /// cuts it short); frames of a run the kernel refuses are counted
    /// dropped. Returns the kernel's error, if any.
    pub(super) fn run(&mut self, ebpf: &Ebpf) -> io::Result<()> {
        let n = self.queued;
        if n == 0 {
            return Ok(());
        }
        let bytes = std::mem::take(&mut self.queued_bytes);
        self.queued = 0;
        self.set_state(ST_NEXT, 0);
        self.set_state(ST_COUNT, n);
        let mut result = Ok(());
        for _ in 0..RESUMES {
            let left = n.saturating_sub(self.state_u32(ST_NEXT));
            if left == 0 {
                break;
            }
            match self.test_run(ebpf, left) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let left = n.saturating_sub(self.state_u32(ST_NEXT));
        if self.check.is_some() && (result.is_err() || !self.driver_took(n)) {
            // Refused by the kernel or the driver: all of the run again
            // through the socket.
            self.fell_back = true;
            self.resend = n;
            self.refused_by_driver += u64::from(n - left);
            return result;
        }
        self.dropped += u64::from(left);
        self.tx_bytes += if left == 0 {
            bytes
        } else {
            self.leading_bytes(n - left)
        };
        result
    }

    /// Bytes of the first `k` queued frames (their slots' length words):
    /// what a run the kernel cut short did send.
    fn leading_bytes(&self, k: u32) -> u64 {
        (0..k.min(SLOTS) as usize)
            .map(|i| {
                let slot = self.frames.ptr().wrapping_add(i * SLOT);
                // SAFETY: slot `i` (< SLOTS) lies inside the mapping of
                // SLOTS * SLOT bytes and starts with the u32 length `send`
                // wrote (4-aligned: SLOT and the mapping are); only this
                // thread writes the array, and no run is in progress.
                u64::from(unsafe { slot.cast::<u32>().read() })
            })
            .sum()
    }

    /// `tx = "auto"`, after a run of `n` frames: false if the driver's
    /// counters show none of its frames. Every run is checked until the
    /// driver has taken some, then one run in [`CHECK_EVERY`] (the
    /// counters read before and after it). Frames the driver did not take
    /// since the last full check, besides this run's, are lost and
    /// counted (at least: frames others sent through the driver meanwhile
    /// hide as many).
    fn driver_took(&mut self, n: u32) -> bool {
        let sent = self.sent();
        let Some(c) = &mut self.check else {
            return true;
        };
        c.runs = c.runs.wrapping_add(1);
        let phase = c.runs % CHECK_EVERY;
        if c.confirmed && phase != 0 && phase != CHECK_EVERY - 1 {
            return true;
        }
        // An unreadable counter tells nothing: checked again next run.
        let Ok(xmit) = c.counters.read() else {
            return true;
        };
        if c.confirmed && phase == CHECK_EVERY - 1 {
            c.before = (sent, xmit);
            return true;
        }
        let before = if c.confirmed {
            c.before
        } else {
            (c.sent_at, c.xmit_at)
        };
        let refused = sent > before.0 && xmit == before.1;
        let (ds, dx) = (sent - c.sent_at, xmit.wrapping_sub(c.xmit_at));
        (c.sent_at, c.xmit_at) = (sent, xmit);
        if refused {
            let lost = ds.saturating_sub(dx).saturating_sub(u64::from(n));
            self.dropped += lost;
            self.refused_by_driver += lost;
            return false;
        }
        c.confirmed |= dx > 0;
        true
    }

    /// The frames of a refused run, once ([`TxLive::resend`]).
    pub(super) fn take_resend(&mut self) -> impl Iterator<Item = &[u8]> + '_ {
        let n = std::mem::take(&mut self.resend) as usize;
        let base = self.frames.ptr();
        (0..n).map(move |i| {
            let slot = base.wrapping_add(i * SLOT);
            // SAFETY: slot `i` < SLOTS lies inside the mapping (as in
            // `send`), written by `send` with a length <= MAX_FRAME before
            // the refused run; no run happens while the slices live (they
            // borrow `self`), and the mapping lives as long as `self`.
            unsafe {
                let len = (slot.cast::<u32>().read() as usize).min(MAX_FRAME);
                std::slice::from_raw_parts(slot.add(8), len)
            }
        })
    }

    /// Frames written into the array and not yet run.
    pub(super) fn queued(&self) -> usize {
        self.queued as usize
    }

    /// One test run of `repeat` frames.
    fn test_run(&mut self, ebpf: &Ebpf, repeat: u32) -> io::Result<()> {
        self.runs += 1;
        let prog: &Xdp = ebpf
            .program(super::program::PROGRAM)
            .ok_or_else(|| io::Error::other("XDP transmit: program missing"))?
            .try_into()
            .map_err(io::Error::other)?;
        let r = prog.test_run(TestRunOptions {
            data_in: Some(&TEMPLATE),
            ctx_in: Some(&self.ctx),
            repeat,
            attrs: TestRunAttrs::new().xdp_live_frames(repeat.min(BATCH)),
            ..TestRunOptions::default()
        });
        match r {
            Ok(_) => Ok(()),
            Err(ProgramError::SyscallError(e)) => Err(e.io_error),
            Err(e) => Err(io::Error::other(e)),
        }
    }

    /// Frames the program sent.
    pub(super) fn sent(&self) -> u64 {
        self.state_u64(ST_SENT)
    }

    /// Slots the program refused.
    pub(super) fn refused(&self) -> u64 {
        self.state_u64(ST_REFUSED)
    }

    fn set_state(&self, off: usize, v: u32) {
        // SAFETY: `off` + 4 is inside the state's page-long mapping and
        // 4-aligned; the kernel reads it only during `test_run`, on this
        // thread.
        unsafe { self.state.ptr().add(off).cast::<u32>().write_volatile(v) }
    }

    fn state_u32(&self, off: usize) -> u32 {
        // SAFETY: as in `set_state`; the program writes it only during
        // `test_run`, on this thread.
        unsafe { self.state.ptr().add(off).cast::<u32>().read_volatile() }
    }

    fn state_u64(&self, off: usize) -> u64 {
        // SAFETY: as in `state_u32`, 8-aligned.
        unsafe { self.state.ptr().add(off).cast::<u64>().read_volatile() }
    }
}
