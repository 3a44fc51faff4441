//! One rx queue's AF_XDP socket: its UMEM, its four rings mapped, bound
//! to the queue (zero-copy if the driver has it, else copy), each setup
//! step named in the error.

use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use super::config::{AfXdpConfig, AfXdpError, AttachMode, BindMode};
use super::queue::Queue;
use super::ring::RingMem;
use super::sys::{self, Mmap, XdpDesc, XdpStatistics};
use super::umem::{Umem, UmemArea};

/// One rx queue's socket. Field order is drop order: the queue's view of
/// the rings goes first, then the ring mappings, then the socket, then the
/// UMEM (the kernel keeps the UMEM pages pinned until it releases the
/// socket, which happens once the descriptor and every ring mapping are
/// gone).
#[derive(Debug)]
pub(super) struct Socket {
    pub(super) q: Queue,
    pub(super) _rings: [Mmap; 4],
    pub(super) fd: OwnedFd,
    pub(super) _umem: Umem,
    pub(super) zero_copy: bool,
    /// The kernel's counters as last read.
    pub(super) kernel: XdpStatistics,
}

/// A failed step of a queue's setup: the step (`socket(AF_XDP)`,
/// `setsockopt(XDP_UMEM_REG)`, ...) and its OS error, for
/// [`AfXdpError::Socket`].
type StepResult<T> = Result<T, (&'static str, io::Error)>;

/// `r` with its error named after `step`.
fn step<T>(r: io::Result<T>, step: &'static str) -> StepResult<T> {
    r.map_err(|e| (step, e))
}

/// A socket whose UMEM another socket registered (`XDP_SHARED_UMEM`):
/// that socket, and the frames of the UMEM that start as this one's.
#[derive(Debug, Clone, Copy)]
pub(super) struct ShareUmem<'a> {
    pub(super) with: BorrowedFd<'a>,
    pub(super) first_frame: u32,
}

impl Socket {
    /// Open the socket of rx queue `queue` of interface `ifindex`: UMEM
    /// (its own, or `area`, registered here or, with `share`, by another
    /// socket), rings, bind, options. Also returns whether one copy-mode
    /// `sendto` moves the whole tx ring.
    pub(super) fn open(
        ifname: &str,
        ifindex: u32,
        queue: u32,
        cfg: &AfXdpConfig,
        attach: AttachMode,
        area: Option<UmemArea>,
        share: Option<ShareUmem<'_>>,
    ) -> Result<(Socket, bool), AfXdpError> {
        let socket_err = |(step, source)| AfXdpError::Socket {
            ifname: ifname.to_string(),
            queue,
            step,
            source,
        };
        let fd = step(sys::xsk_socket(), "socket(AF_XDP)").map_err(socket_err)?;
        let first_frame = share.map_or(0, |s| s.first_frame);
        let (umem, nframes, home) =
            register_umem(fd.as_fd(), cfg, area, first_frame, share.is_none())
                .map_err(socket_err)?;
        let maps = RingMaps::create(fd.as_fd(), cfg).map_err(socket_err)?;
        let (flags, mode, shared_fd) = match share {
            // The first socket's pool decides copy or zero-copy and
            // need-wakeup: the kernel refuses those flags here.
            Some(s) => (
                sys::XDP_SHARED_UMEM,
                "shared UMEM",
                s.with.as_raw_fd() as u32,
            ),
            None => {
                let (f, m) = bind_flags(cfg, attach);
                (f, m, 0)
            }
        };
        bind_retrying(fd.as_fd(), ifindex, queue, flags, shared_fd).map_err(|source| {
            AfXdpError::Bind {
                ifname: ifname.to_string(),
                queue,
                mode,
                source,
            }
        })?;
        let (zero_copy, whole_ring) = tune_bound(fd.as_fd(), cfg).map_err(socket_err)?;

        // SAFETY: the UMEM and ring mappings are moved into the returned
        // Socket next to the queue and dropped after it (field order); the
        // UMEM is at least `frames * frame_size` bytes (`register_umem`
        // checks a lent area), no Rust reference points into it (a lent
        // area's contract), and the kernel writes only frames given to it
        // through the fill ring; the ring layouts were checked against
        // their mappings.
        let q = unsafe {
            Queue::new(
                umem.ptr(),
                cfg.frame_size,
                nframes,
                home,
                cfg.rx_frames(),
                maps.fill.1,
                maps.comp.1,
                maps.rx.1,
                maps.tx.1,
            )
        };
        let s = Socket {
            q,
            _rings: [maps.fill.0, maps.comp.0, maps.rx.0, maps.tx.0],
            fd,
            _umem: umem,
            zero_copy,
            kernel: XdpStatistics::default(),
        };
        Ok((s, whole_ring))
    }

    pub(super) fn read_kernel_stats(&mut self) -> io::Result<()> {
        let (s, _) = sys::get_opt::<XdpStatistics>(self.fd.as_fd(), sys::XDP_STATISTICS)?;
        self.kernel = s;
        Ok(())
    }
}

/// The UMEM, its frames, and this socket's among them
/// (`first_frame..first_frame + cfg.frames`): the whole of `area` (in
/// whole frames and pages), or an anonymous mapping of `cfg.frames`
/// frames; registered with the socket (`XDP_UMEM_REG`) if `register`
/// (else another socket did).
fn register_umem(
    fd: BorrowedFd<'_>,
    cfg: &AfXdpConfig,
    area: Option<UmemArea>,
    first_frame: u32,
    register: bool,
) -> StepResult<(Umem, u32, Range<u32>)> {
    let fs = cfg.frame_size as usize;
    let (umem, nframes) = match area {
        Some(a) => {
            let unit = fs.max(4096);
            let frames = (a.len() / unit * unit / fs).min(u32::MAX as usize) as u32;
            let need = u64::from(first_frame) + u64::from(cfg.frames);
            if u64::from(frames) < need || !(a.ptr() as usize).is_multiple_of(4096) {
                return Err((
                    "UMEM area",
                    io::Error::other(format!(
                        "{} bytes at {:p}: not page aligned or smaller than {need} frames of {fs} bytes",
                        a.len(),
                        a.ptr()
                    )),
                ));
            }
            (Umem::Lent(a), frames)
        }
        None => {
            let m = step(Mmap::anonymous(cfg.frames as usize * fs), "mmap UMEM")?;
            (Umem::Own(m), cfg.frames)
        }
    };
    let home = first_frame..first_frame + cfg.frames;
    if !register {
        return Ok((umem, nframes, home));
    }
    let umem_len = nframes as usize * fs;
    let reg = sys::XdpUmemReg {
        addr: umem.ptr() as u64,
        len: umem_len as u64,
        chunk_size: cfg.frame_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    step(
        sys::set_opt(fd, sys::XDP_UMEM_REG, &reg),
        "setsockopt(XDP_UMEM_REG)",
    )?;
    Ok((umem, nframes, home))
}

/// The socket's four rings, each a mapping and its checked layout.
struct RingMaps {
    fill: (Mmap, RingMem<u64>),
    comp: (Mmap, RingMem<u64>),
    rx: (Mmap, RingMem<XdpDesc>),
    tx: (Mmap, RingMem<XdpDesc>),
}

impl RingMaps {
    /// Size the four rings (`ring_size` entries each), map them where
    /// `XDP_MMAP_OFFSETS` says, and check each layout against its mapping.
    fn create(fd: BorrowedFd<'_>, cfg: &AfXdpConfig) -> StepResult<RingMaps> {
        let entries = cfg.ring_size as i32;
        for (opt, name) in [
            (sys::XDP_UMEM_FILL_RING, "setsockopt(XDP_UMEM_FILL_RING)"),
            (
                sys::XDP_UMEM_COMPLETION_RING,
                "setsockopt(XDP_UMEM_COMPLETION_RING)",
            ),
            (sys::XDP_RX_RING, "setsockopt(XDP_RX_RING)"),
            (sys::XDP_TX_RING, "setsockopt(XDP_TX_RING)"),
        ] {
            step(sys::set_opt(fd, opt, &entries), name)?;
        }
        let (off, len) = step(
            sys::get_opt::<sys::XdpMmapOffsets>(fd, sys::XDP_MMAP_OFFSETS),
            "getsockopt(XDP_MMAP_OFFSETS)",
        )?;
        if len < size_of::<sys::XdpMmapOffsets>() {
            return Err((
                "getsockopt(XDP_MMAP_OFFSETS)",
                io::Error::other("kernel without ring flags (before 5.4)"),
            ));
        }
        let map = |o: &sys::XdpRingOffset, entry: usize, pgoff: i64, name: &'static str| {
            let len = o.desc as usize + cfg.ring_size as usize * entry;
            step(Mmap::ring(fd, len, pgoff), name)
        };
        let fill = map(&off.fr, 8, sys::XDP_UMEM_PGOFF_FILL_RING, "mmap fill ring")?;
        let comp = map(
            &off.cr,
            8,
            sys::XDP_UMEM_PGOFF_COMPLETION_RING,
            "mmap completion ring",
        )?;
        let desc = size_of::<XdpDesc>();
        let rx = map(&off.rx, desc, sys::XDP_PGOFF_RX_RING, "mmap rx ring")?;
        let tx = map(&off.tx, desc, sys::XDP_PGOFF_TX_RING, "mmap tx ring")?;
        Ok(RingMaps {
            fill: with_layout(fill, &off.fr, cfg.ring_size)?,
            comp: with_layout(comp, &off.cr, cfg.ring_size)?,
            rx: with_layout(rx, &off.rx, cfg.ring_size)?,
            tx: with_layout(tx, &off.tx, cfg.ring_size)?,
        })
    }
}

/// The ring of `size` entries at offsets `off` of `map`, checked to lie
/// inside it.
fn with_layout<T>(
    map: Mmap,
    off: &sys::XdpRingOffset,
    size: u32,
) -> StepResult<(Mmap, RingMem<T>)> {
    match RingMem::<T>::in_mapping(map.ptr(), map.len(), off, size) {
        Some(ring) => Ok((map, ring)),
        None => Err((
            "XDP_MMAP_OFFSETS",
            io::Error::other("ring offsets outside the mapping"),
        )),
    }
}

/// The `bind` flags for the config's bind mode and the attach obtained,
/// and the mode's name for [`AfXdpError::Bind`].
fn bind_flags(cfg: &AfXdpConfig, attach: AttachMode) -> (u16, &'static str) {
    let mut flags = if cfg.need_wakeup {
        sys::XDP_USE_NEED_WAKEUP
    } else {
        0
    };
    let mode = match (cfg.bind, attach) {
        (Some(BindMode::ZeroCopy), _) => {
            flags |= sys::XDP_ZEROCOPY;
            "zero-copy"
        }
        // Zero-copy frames only flow through a driver's own XDP hook.
        (Some(BindMode::Copy), _) | (None, AttachMode::Generic) => {
            flags |= sys::XDP_COPY;
            "copy"
        }
        // Neither flag: the kernel tries zero-copy and falls back to
        // copy by itself (xp_assign_dev); XDP_OPTIONS tells which.
        (None, AttachMode::Native) => "auto",
    };
    (flags, mode)
}

/// After `bind`: whether the socket is zero-copy (`XDP_OPTIONS`), and
/// whether one copy-mode `sendto` moves the whole tx ring; raises the send
/// buffer (best effort).
fn tune_bound(fd: BorrowedFd<'_>, cfg: &AfXdpConfig) -> StepResult<(bool, bool)> {
    let (opts, _) = step(
        sys::get_opt::<sys::XdpOptions>(fd, sys::XDP_OPTIONS),
        "getsockopt(XDP_OPTIONS)",
    )?;
    let zero_copy = opts.flags & sys::XDP_OPTIONS_ZEROCOPY != 0;
    // Let one copy-mode sendto move the whole ring (kernel 6.16+; older
    // kernels move 32 per call and refuse the option).
    let whole_ring =
        !zero_copy && sys::set_opt(fd, sys::XDP_MAX_TX_SKB_BUDGET, &cfg.ring_size).is_ok();
    // Copy-mode tx charges each in-flight skb to the socket's send
    // buffer; a full one makes sendto stop early (EAGAIN). Raising it
    // needs CAP_NET_ADMIN: best effort.
    let _ = sys::set_sol_socket_int(fd, libc::SO_SNDBUFFORCE, 4 << 20);
    Ok((zero_copy, whole_ring))
}

/// How long `bind` retries on `EBUSY`.
const BIND_BUSY_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// `bind`, retried while the queue is busy for up to
/// [`BIND_BUSY_PATIENCE`]. A closed AF_XDP socket lets go of its queue
/// only after an RCU grace period and a kernel work item
/// (`xp_release_deferred`), so a port reopened right after another one on
/// the same interface was dropped can find the queue still taken.
fn bind_retrying(
    fd: BorrowedFd<'_>,
    ifindex: u32,
    queue: u32,
    flags: u16,
    shared_fd: u32,
) -> io::Result<()> {
    let start = std::time::Instant::now();
    loop {
        match sys::bind(fd, ifindex, queue, flags, shared_fd) {
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && start.elapsed() < BIND_BUSY_PATIENCE =>
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            r => return r,
        }
    }
}
