//! `AfXdpPort`: frames to and from a Linux interface through AF_XDP
//! sockets, bypassing the kernel's network stack.
//!
//! Opening a port on interface `IF` with its own program (the default,
//! [`XdpProgram::Own`]):
//!
//! 1. loads the XDP program `ebpf/xdp_redirect.c` (built by `build.rs`,
//!    embedded in the binary) with `aya` and attaches it to `IF` through a
//!    bpf_link (kernel 5.9+), in native (driver) mode first and in generic
//!    (SKB) mode if the driver refuses, or in the mode
//!    [`AfXdpConfig::attach`] asks for. The program
//!    redirects every frame to the AF_XDP socket of its rx queue through the
//!    XSKMAP `xsks`, and lets the kernel stack have frames of queues with no
//!    socket (`XDP_PASS`);
//! 2. opens one AF_XDP socket per rx queue of `IF` (the count ethtool
//!    reports, or [`AfXdpConfig::queues`]), each with its own UMEM: an
//!    anonymous mapping of [`AfXdpConfig::frames`] frames of
//!    [`AfXdpConfig::frame_size`] bytes, half of them (at most a ring's
//!    worth) lent to the kernel for rx through the fill ring, the rest for
//!    tx; binds it in zero-copy mode if the driver offers it and in copy
//!    mode otherwise (see [`AfXdpPort::mode`]), with `XDP_USE_NEED_WAKEUP`.
//!    Only copy mode has run here: the tests and benches use veth, which
//!    has no zero-copy (a test checks that forcing it fails cleanly), so
//!    the zero-copy path is untested;
//! 3. puts each socket in the XSKMAP at its queue's index.
//!
//! # Sharing the interface with another XDP program
//!
//! An interface takes one XDP program. With
//! [`AfXdpConfig::program`] = [`XdpProgram::External`] the port skips
//! steps 1 and 3: it binds its sockets on an interface where another
//! program runs (the fast path's, `vrhost-fast`, whose slow path is this
//! port), in the bind mode that program's attach mode allows
//! ([`AfXdpConfig::attach`], required then: native -> zero-copy if the
//! driver has it, else copy; generic -> copy), and hands them over with
//! [`AfXdpPort::sockets`] for that program's XSKMAP. It neither attaches
//! nor detaches anything, and has no redirect counter
//! ([`AfXdpPort::redirected`] is `None`). Frames reach its sockets only
//! once they are in the other program's map: until then (and after that
//! program is gone) the interface's frames go wherever that program, or
//! the kernel stack, sends them. Closing a socket removes it from every
//! XSKMAP that holds it (the kernel does it on release), so a dropped
//! port leaves no stale entry behind.
//!
//! [`XdpLink`], the bpf_link the port attaches its own program with, is
//! public so that other programs' owners detach theirs with the same
//! guarantee (see its docs).
//!
//! The data path ([`Port`]) makes no allocation, takes no lock and never
//! blocks: `rx_burst` returns the previous burst's frames to the fill ring,
//! then hands out frames straight from the rx rings (slices of the UMEM, no
//! copy); `tx_burst` reclaims completed frames, copies the frames into free
//! UMEM frames and queues tx descriptors; `flush` kicks the kernel with one
//! `sendto` if something is queued and the tx ring's need-wakeup flag asks
//! for it. At most one system call per burst: the tx kick (only when a
//! burst fills half the ring before `flush`), a zero-copy driver's rx
//! wakeup, or, once per [`STATS_EVERY`] rx bursts, a read of the kernel's
//! drop counters (`XDP_STATISTICS`), which [`Port::stats`] adds to
//! `rx_dropped` and `tx_dropped`. All transmission goes through the first
//! queue's socket.
//!
//! With [`TxPath::Xdp`] (`tx = "xdp"`) `tx_burst` and `flush` send
//! through the kernel's XDP test run instead, with no skb (`txlive.rs`);
//! so does `tx_lent`, copying a lent frame out and giving it back at once.
//!
//! Everything read from the kernel's rings is checked before use (see
//! `queue.rs`): a wrong descriptor is a counted drop. Dropping the port
//! detaches its own XDP program and closes the sockets and mappings.
//!
//! # On veth
//!
//! veth has native XDP but no zero-copy AF_XDP: a port on veth runs in
//! native mode with copy-mode sockets. Receiving needs nothing of the peer.
//! Transmitting needs nothing either: copy-mode tx builds an skb and hands
//! it to the driver's `ndo_start_xmit` like any socket, so the peer gets it
//! whether or not it has an XDP program or GRO (those matter only for
//! frames *redirected* into a veth with `XDP_REDIRECT`, which uses
//! `ndo_xdp_xmit`). In copy mode a frame longer than the frame size minus
//! the kernel's 256-byte headroom (1792 bytes with 2048-byte frames) is
//! dropped by the kernel and counted in `rx_dropped`.
//!
//! The UMEM and rings are locked memory: root is exempt from the
//! memlock limit, an unprivileged process is not (and needs `CAP_NET_RAW`
//! and `CAP_BPF`/`CAP_NET_ADMIN` anyway).

mod config;
mod ethtool;
mod program;
mod queue;
mod ring;
mod shared;
mod socket;
mod sys;
mod txlive;
mod umem;

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

pub use config::{AfXdpConfig, AfXdpError, AttachMode, BindMode, Mode, TxPath, XdpProgram};
pub use queue::{FrameCounts, LentFrame};
pub use sys::{XdpLink, XdpStatistics};
pub use umem::UmemArea;

use crate::{Port, PortStats};
use program::{OwnProgram, map_error, rx_queues};
use socket::{ShareUmem, Socket};

/// Rx bursts between two reads of one socket's kernel counters.
pub const STATS_EVERY: u32 = 1024;

/// An AF_XDP port. See the [module docs](self).
pub struct AfXdpPort {
    // Field order is drop order: the own program (if any) goes before the
    // sockets.
    own: Option<OwnProgram>,
    wait: Option<OwnedFd>,
    socks: Box<[Socket]>,
    name: String,
    ifindex: u32,
    mode: Mode,
    need_wakeup: bool,
    /// Tx descriptors queued by one burst that warrant a kick before
    /// `flush`.
    kick_threshold: u32,
    next_rx: usize,
    rx_calls: u32,
    next_stats: usize,
    /// UMEM frames, when the UMEM is a lent area ([`AfXdpPort::open_on`]).
    lent_area: Option<u32>,
    /// The lent area (start, length) and the end of this port's frames in
    /// it, for a port that shares it ([`AfXdpPort::open_sharing`]).
    lent_at: Option<(usize, usize, u32)>,
    /// [`TxPath::Xdp`]: where `tx_burst` and `flush` send instead of the
    /// socket.
    txlive: Option<Box<txlive::TxLive>>,
    /// Tx kicks (`sendto`) made.
    kicks: u64,
}

impl fmt::Debug for AfXdpPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfXdpPort")
            .field("name", &self.name)
            .field("ifindex", &self.ifindex)
            .field("mode", &self.mode)
            .field("queues", &self.socks.len())
            .finish_non_exhaustive()
    }
}

impl AfXdpPort {
    /// Open interface `ifname` (in the calling thread's network namespace):
    /// attach the XDP program and bind a socket to each rx queue. See the
    /// [module docs](self).
    ///
    /// # Errors
    /// [`AfXdpError`], naming the interface and the failed step; whatever
    /// was set up before it is undone.
    pub fn open(ifname: &str, cfg: &AfXdpConfig) -> Result<AfXdpPort, AfXdpError> {
        Self::open_with(ifname, cfg, None, None)
    }

    /// [`AfXdpPort::open`] with `area` as the UMEM (its first
    /// `cfg.frames * cfg.frame_size` bytes, frame `i` at `i *
    /// cfg.frame_size`): what a dedicated port does with its VR's packet
    /// pool, so that frames are lent ([`AfXdpPort::rx_lend`]) and sent
    /// ([`AfXdpPort::tx_lent`]) where they lie. One rx queue only (the
    /// interface must have one, or `cfg.queues` be `Some(1)`): queues
    /// would need an area each.
    ///
    /// # Errors
    /// As [`AfXdpPort::open`]; [`AfXdpError::Config`] for an interface of
    /// several queues; [`AfXdpError::Socket`] (step `UMEM area`) for an
    /// area too small or not page aligned, or (step
    /// `setsockopt(XDP_UMEM_REG)`) memory the kernel cannot pin.
    pub fn open_on(
        ifname: &str,
        cfg: &AfXdpConfig,
        area: UmemArea,
    ) -> Result<AfXdpPort, AfXdpError> {
        Self::open_with(ifname, cfg, Some(area), None)
    }

    fn open_with(
        ifname: &str,
        cfg: &AfXdpConfig,
        mut area: Option<UmemArea>,
        share: Option<ShareUmem<'_>>,
    ) -> Result<AfXdpPort, AfXdpError> {
        let name = ifname.to_string();
        let lent_area = area.is_some();
        let lent_at = area.as_ref().map(|a| {
            let first = share.map_or(0, |s| s.first_frame);
            (a.ptr() as usize, a.len(), first + cfg.frames)
        });
        cfg.check().map_err(|why| AfXdpError::Config {
            ifname: name.clone(),
            why,
        })?;
        let no_such = || AfXdpError::NoSuchInterface {
            ifname: name.clone(),
        };
        let cname = CString::new(ifname).map_err(|_| no_such())?;
        let ifindex = sys::if_nametoindex(&cname).ok_or_else(no_such)?;
        let queues = match cfg.queues {
            Some(n) => n,
            None => rx_queues(ifname, &cname).map_err(|source| AfXdpError::QueueCount {
                ifname: name.clone(),
                source,
            })?,
        };

        if area.is_some() && queues != 1 {
            return Err(AfXdpError::Config {
                ifname: name,
                why: format!(
                    "a port on its VR's pool serves one rx queue, the interface has {queues}"
                ),
            });
        }
        // `auto`: xdp where the driver's counters can tell it refuses.
        let (tx, check) = match cfg.tx {
            TxPath::Auto if cfg.program == XdpProgram::Own && area.is_none() => {
                match txlive::PeerCheck::open(ifname) {
                    Some(c) => (TxPath::Xdp, Some(c)),
                    None => (TxPath::Socket, None),
                }
            }
            TxPath::Auto => (TxPath::Socket, None),
            tx => (tx, None),
        };
        let (mut own, attach) = match (cfg.program, cfg.attach) {
            (XdpProgram::Own, want) => {
                let slots = match tx {
                    TxPath::Socket | TxPath::Auto => 1,
                    TxPath::Xdp => txlive::SLOTS,
                };
                let (own, attach) = OwnProgram::attach(ifname, ifindex, (queues, slots), want)?;
                (Some(own), attach)
            }
            (XdpProgram::External, Some(attach)) => (None, attach),
            (XdpProgram::External, None) => unreachable!("AfXdpConfig::check refuses it"),
        };

        let txlive = match (tx, &own) {
            (TxPath::Socket | TxPath::Auto, _) => None,
            (TxPath::Xdp, Some(own)) => Some(Box::new(txlive::TxLive::open(
                &own.bpf,
                (ifname, ifindex),
                check,
            )?)),
            (TxPath::Xdp, None) => {
                return Err(AfXdpError::Config {
                    ifname: name,
                    why: "tx xdp needs the port's own XDP program".into(),
                });
            }
        };
        let mut socks = Vec::with_capacity(queues as usize);
        let mut whole_ring = true;
        for q in 0..queues {
            let (s, w) = Socket::open(ifname, ifindex, q, cfg, attach, area.take(), share)?;
            if let Some(own) = &mut own {
                own.xsks
                    .set(q, s.fd.as_raw_fd(), 0)
                    .map_err(|e| map_error(ifname, e))?;
            }
            whole_ring &= w;
            socks.push(s);
        }
        let zero_copy = socks.iter().all(|s| s.zero_copy);
        let wait = if socks.len() > 1 {
            let fds: Vec<_> = socks.iter().map(|s| s.fd.as_raw_fd()).collect();
            Some(sys::epoll_in(&fds).map_err(|source| AfXdpError::Socket {
                ifname: name.clone(),
                queue: 0,
                step: "epoll",
                source,
            })?)
        } else {
            None
        };
        // Kick from tx_burst once a kick can no longer move everything
        // queued, or the ring is half full; flush covers the rest.
        let per_kick = if zero_copy || whole_ring {
            cfg.ring_size
        } else {
            32
        };
        Ok(AfXdpPort {
            own,
            wait,
            socks: socks.into_boxed_slice(),
            name,
            ifindex,
            mode: Mode {
                attach,
                bind: if zero_copy {
                    BindMode::ZeroCopy
                } else {
                    BindMode::Copy
                },
            },
            need_wakeup: cfg.need_wakeup,
            kick_threshold: per_kick.min(cfg.ring_size / 2),
            next_rx: 0,
            rx_calls: 0,
            next_stats: 0,
            lent_area: lent_area.then_some(cfg.frames),
            lent_at,
            txlive,
            kicks: 0,
        })
    }

    /// The modes obtained: native or generic attach (in
    /// [`XdpProgram::External`] mode, as the config said), zero-copy or
    /// copy.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// How frames leave now: [`TxPath::Xdp`] while the port sends through
    /// the XDP test run (`tx = "xdp"`, or `auto` that has not fallen
    /// back), else [`TxPath::Socket`].
    pub fn tx_path(&self) -> TxPath {
        match self.live() {
            Some(_) => TxPath::Xdp,
            None => TxPath::Socket,
        }
    }

    /// The XDP transmit while frames leave through it (not fallen back).
    fn live(&self) -> Option<&txlive::TxLive> {
        self.txlive.as_deref().filter(|t| !t.fell_back)
    }

    /// Whose XDP program feeds the sockets.
    pub fn program(&self) -> XdpProgram {
        if self.own.is_some() {
            XdpProgram::Own
        } else {
            XdpProgram::External
        }
    }

    /// Each rx queue's socket, in queue order: what another program's
    /// XSKMAP takes ([`XdpProgram::External`]; with its own program the
    /// port has put them in its own map already). The descriptors stay the
    /// port's: an XSKMAP entry holds its own reference to the socket, and
    /// the kernel removes the socket from every map when the port closes
    /// it.
    pub fn sockets(&self) -> impl Iterator<Item = (u32, BorrowedFd<'_>)> + '_ {
        self.socks
            .iter()
            .enumerate()
            .map(|(q, s)| (q as u32, s.fd.as_fd()))
    }

    /// The interface's index (in the namespace it was opened in).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Rx queues served (one socket each).
    pub fn queues(&self) -> usize {
        self.socks.len()
    }

    /// Frames received through each queue's socket, in queue order.
    pub fn rx_packets_per_queue(&self) -> impl Iterator<Item = u64> + '_ {
        self.socks.iter().map(|s| s.q.c.rx_packets)
    }

    /// Where the UMEM frames of all queues are, counted from the port's
    /// ownership record: `free + fill + rx_held + tx == total` always; with
    /// no traffic in flight and completions reclaimed, `tx == 0`.
    pub fn frame_counts(&self) -> FrameCounts {
        let mut c = FrameCounts::default();
        for s in self.socks.iter() {
            c.add(&s.q.frame_counts());
        }
        c
    }

    /// Take completed tx frames back (`tx_burst` does this too); returns
    /// how many.
    pub fn reclaim_tx(&mut self) -> usize {
        self.socks.iter_mut().map(|s| s.q.reclaim() as usize).sum()
    }

    /// Read every socket's kernel counters now (rather than every
    /// [`STATS_EVERY`] bursts) and return their sum.
    ///
    /// # Errors
    /// The failed `getsockopt(XDP_STATISTICS)`.
    pub fn refresh_kernel_stats(&mut self) -> io::Result<XdpStatistics> {
        let mut sum = XdpStatistics::default();
        for s in self.socks.iter_mut() {
            s.read_kernel_stats()?;
            sum.add(&s.kernel);
        }
        Ok(sum)
    }

    /// Frames the port's own XDP program redirected to a socket, summed
    /// over CPUs (one map read per call: not for the data path). `None` in
    /// [`XdpProgram::External`] mode: the port has no program, and the one
    /// attached counts (or not) by its own means (the fast path: its
    /// `to_slow` counters).
    ///
    /// # Errors
    /// `Some(Err)`: the failed map lookup.
    pub fn redirected(&self) -> Option<io::Result<u64>> {
        let own = self.own.as_ref()?;
        Some(
            own.counter
                .get(&0, 0)
                .map_err(io::Error::other)
                .map(|v| v.iter().sum()),
        )
    }

    /// Values from the kernel that were refused: ring indexes out of range
    /// and completions naming a frame not queued for tx (rx descriptors
    /// refused are in `rx_dropped`). Zero unless the kernel misbehaves.
    pub fn refused_from_kernel(&self) -> u64 {
        self.socks
            .iter()
            .map(|s| s.q.bad_indexes() + s.q.c.comp_refused)
            .sum()
    }

    /// Largest frame `tx_burst` accepts.
    pub fn max_tx_frame(&self) -> usize {
        let socket = self.socks[0].q.max_frame() as usize;
        match self.live() {
            Some(_) => socket.min(txlive::MAX_FRAME),
            None => socket,
        }
    }

    /// Largest frame the kernel delivers (copy mode, or a driver that
    /// keeps the standard headroom); longer ones are dropped by the kernel
    /// and counted in `rx_dropped`.
    pub fn max_rx_frame(&self) -> usize {
        (self.socks[0].q.max_frame() - sys::XDP_PACKET_HEADROOM) as usize
    }

    /// Take up to `out.len()` received frames and lend them where they
    /// lie (after returning frames given back to the fill ring); returns
    /// how many. Each stays the caller's until [`AfXdpPort::give_back`] or
    /// [`AfXdpPort::tx_lent`]: meant for a port opened with
    /// [`AfXdpPort::open_on`], whose frames are the caller's pool.
    pub fn rx_lend(&mut self, out: &mut [LentFrame]) -> usize {
        let q = &mut self.socks[0].q;
        q.recycle();
        let n = q.lend(out);
        self.after_rx(n);
        n
    }

    /// Take lent frame `frame` back (to the fill ring at the next burst);
    /// false, and nothing done, if it is not lent.
    pub fn give_back(&mut self, frame: u32) -> bool {
        self.socks[0].q.give_back(frame)
    }

    /// Whether frame `frame` is lent out.
    pub fn is_lent(&self, frame: u32) -> bool {
        self.socks[0].q.is_lent(frame)
    }

    /// Send lent frames from where they lie, no copy. Every lent frame
    /// passed is taken back: queued for tx, or refused (ring full, bytes
    /// outside the frame, runt) and counted in `tx_dropped`; an index not
    /// lent is counted (see [`AfXdpPort::refused_lent`]) and left alone.
    /// Returns how many were queued; [`Port::flush`] kicks them.
    ///
    /// With `tx = "xdp"` each frame is copied into the XDP transmit's
    /// array instead (the one copy the socket's skb would have made) and
    /// given back at once; [`Port::flush`] sends the array.
    pub fn tx_lent(&mut self, frames: &[LentFrame]) -> usize {
        let mut frames = frames;
        let mut taken = 0;
        if let (Some(t), Some(own)) = (&mut self.txlive, &self.own)
            && !t.fell_back
        {
            let (k, looked) = self.socks[0].q.copy_lent(frames, |at, len| {
                // SAFETY: `copy_lent` passes the extent of a lent frame,
                // inside the UMEM mapping, which is not the array.
                match unsafe { t.push(&own.bpf, at, len) } {
                    txlive::Push::Queued => Some(true),
                    txlive::Push::Refused => Some(false),
                    txlive::Push::FellBack => None,
                }
            });
            if looked == frames.len() {
                return k;
            }
            self.fall_back();
            (taken, frames) = (k, &frames[looked..]);
        }
        let n = taken + self.socks[0].q.send_lent(frames);
        if self.socks[0]
            .q
            .tx_kick_due(self.kick_threshold, self.need_wakeup)
        {
            let _ = self.tx_kick();
        }
        n
    }

    /// Frames [`AfXdpPort::tx_lent`] was asked to send that were not lent.
    pub fn refused_lent(&self) -> u64 {
        self.socks.iter().map(|s| s.q.c.tx_refused).sum()
    }

    /// After an rx burst of `n` frames: wake a zero-copy driver that ran
    /// out of fill entries, else now and then read the kernel's counters.
    fn after_rx(&mut self, n: usize) {
        let mut syscall = false;
        if n == 0 && self.need_wakeup && self.mode.bind == BindMode::ZeroCopy {
            // A zero-copy driver that ran out of fill entries sleeps until
            // woken; copy mode never sets the flag.
            if let Some(s) = self.socks.iter().find(|s| s.q.fill_needs_wakeup()) {
                let _ = sys::kick_rx(s.fd.as_fd());
                syscall = true;
            }
        }
        self.rx_calls = self.rx_calls.wrapping_add(1);
        if !syscall && self.rx_calls.is_multiple_of(STATS_EVERY) {
            let nq = self.socks.len();
            let s = &mut self.socks[self.next_stats];
            let _ = s.read_kernel_stats();
            self.next_stats = (self.next_stats + 1) % nq;
        }
    }

    /// `tx = "auto"`: the driver refused xdp_frames; say so once and
    /// send the refused run through the socket (its copy into the UMEM,
    /// as any frame the socket sends).
    #[cold]
    fn fall_back(&mut self) {
        let Some(t) = &mut self.txlive else { return };
        tracing::warn!(
            port = %self.name,
            "tx auto: the driver took none of the xdp_frames sent (a veth whose peer has neither an XDP program nor GRO?); sending through the socket from now on"
        );
        let q = &mut self.socks[0].q;
        let mut burst: [&[u8]; 64] = [&[]; 64];
        let mut n = 0;
        for f in t.take_resend() {
            burst[n] = f;
            n += 1;
            if n == burst.len() {
                q.send(&burst);
                n = 0;
            }
        }
        q.send(&burst[..n]);
    }

    fn tx_kick(&mut self) -> io::Result<()> {
        self.kicks += 1;
        let s = &mut self.socks[0];
        let r = sys::kick_tx(s.fd.as_fd());
        s.q.tx_kicked();
        match r {
            // EAGAIN: budget or send buffer exhausted, ENOBUFS/EBUSY: the
            // driver dropped or is busy. What is left is kicked again next
            // time; the kernel counts what it dropped.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS)
                ) =>
            {
                Ok(())
            }
            r => r,
        }
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    /// Returns the previous burst's frames to the fill rings, then takes up
    /// to `out.len()` frames from the rx rings, starting at a different
    /// queue each call.
    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        for s in self.socks.iter_mut() {
            s.q.recycle();
        }
        let nq = self.socks.len();
        let mut n = 0;
        for k in 0..nq {
            if n == out.len() {
                break;
            }
            let i = (self.next_rx + k) % nq;
            // SAFETY: the slices borrow `self` for 'a (the signature ties
            // them to `&'a mut self`), so no other call on the port (and no
            // `recycle`, which only `rx_burst` calls) can run while they
            // live, and the UMEM outlives `self`.
            n += unsafe { self.socks[i].q.receive(&mut out[n..]) };
        }
        self.next_rx = (self.next_rx + 1) % nq;

        self.after_rx(n);
        n
    }

    /// Reclaims completed frames, copies `frames` into free UMEM frames and
    /// queues them on the first queue's tx ring. Frames shorter than an
    /// Ethernet header or longer than a UMEM frame, or beyond the free
    /// frames and ring room, are refused and counted.
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        let mut taken = 0;
        let mut frames = frames;
        if let (Some(t), Some(own)) = (&mut self.txlive, &self.own)
            && !t.fell_back
        {
            let (k, looked) = t.send(&own.bpf, frames);
            if !t.fell_back {
                return k;
            }
            self.fall_back();
            (taken, frames) = (k, &frames[looked..]);
        }
        let n = self.socks[0].q.send(frames);
        if self.socks[0]
            .q
            .tx_kick_due(self.kick_threshold, self.need_wakeup)
        {
            let _ = self.tx_kick();
        }
        taken + n
    }

    /// One `sendto` if tx descriptors were queued since the last kick and
    /// the kernel asks for one; returns at once otherwise.
    fn flush(&mut self) -> io::Result<()> {
        if let (Some(t), Some(own)) = (&mut self.txlive, &self.own)
            && !t.fell_back
        {
            let r = t.run(&own.bpf);
            if !t.fell_back {
                return r;
            }
            self.fall_back();
        }
        if !self.socks[0].q.tx_kick_due(1, self.need_wakeup) {
            return Ok(());
        }
        self.tx_kick()
    }

    /// The frames in the XDP transmit's array (`tx = "xdp"`, not fallen
    /// back): one `BPF_PROG_RUN` sends them all, at a cost mostly fixed
    /// per call.
    fn tx_batched(&self) -> usize {
        self.live().map_or(0, txlive::TxLive::queued)
    }

    /// The driver's counters plus the kernel's as last read: `rx_dropped`
    /// adds the kernel's `rx_dropped`, `rx_ring_full` and
    /// `rx_invalid_descs`; `tx_dropped` adds `tx_invalid_descs`.
    fn stats(&self) -> PortStats {
        let mut p = PortStats {
            tx_runs: self.kicks,
            ..PortStats::default()
        };
        for s in self.socks.iter() {
            let (c, k) = (&s.q.c, &s.kernel);
            p.rx_packets += c.rx_packets;
            p.rx_bytes += c.rx_bytes;
            p.rx_dropped += c.rx_refused + k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs;
            p.tx_packets += c.tx_packets;
            p.tx_bytes += c.tx_bytes;
            p.tx_dropped += c.tx_dropped + k.tx_invalid_descs;
        }
        if let Some(t) = &self.txlive {
            p.tx_packets += t.sent() - t.refused_by_driver;
            p.tx_bytes += t.tx_bytes;
            p.tx_dropped += t.dropped + t.refused();
            p.tx_fallbacks += u64::from(t.fell_back);
            p.tx_runs += t.runs;
        }
        p
    }

    /// Itself, when opened on a lent area ([`AfXdpPort::open_on`]).
    fn lender(&mut self) -> Option<&mut dyn crate::Lender> {
        self.lent_area?;
        Some(self)
    }

    /// The socket (one queue) or an epoll descriptor over all the sockets.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(match &self.wait {
            Some(ep) => ep.as_fd(),
            None => self.socks[0].fd.as_fd(),
        })
    }

    /// The per-CPU slots of the program's redirect counter (one map read);
    /// false without a program of the port's own or if the read fails.
    fn rx_by_cpu(&self, by_cpu: &mut [u64]) -> bool {
        let Some(own) = self.own.as_ref() else {
            return false;
        };
        let Ok(v) = own.counter.get(&0, 0) else {
            return false;
        };
        by_cpu.iter_mut().zip(v.iter()).for_each(|(b, n)| *b += n);
        true
    }
}

// The port's raw pointers (inside each `Queue`) point into mappings the
// port owns; nothing in it is tied to a thread.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<AfXdpPort>();
};

impl crate::Lender for AfXdpPort {
    fn frames(&self) -> u32 {
        self.lent_area.unwrap_or(0)
    }

    fn rx_lend(&mut self, out: &mut [LentFrame]) -> usize {
        AfXdpPort::rx_lend(self, out)
    }

    fn give_back(&mut self, frame: u32) -> bool {
        AfXdpPort::give_back(self, frame)
    }

    fn tx_lent(&mut self, frames: &[LentFrame]) -> usize {
        AfXdpPort::tx_lent(self, frames)
    }

    fn take_lent_from(&mut self, from: &mut dyn crate::Lender, frames: &[LentFrame]) -> usize {
        match from.as_any_mut().downcast_mut::<AfXdpPort>() {
            Some(from) => AfXdpPort::take_lent_from(self, from, frames),
            None => 0,
        }
    }

    fn return_frames(&mut self, home: &mut dyn crate::Lender) -> usize {
        let Some(home) = home.as_any_mut().downcast_mut::<AfXdpPort>() else {
            return 0;
        };
        self.reclaim_tx();
        AfXdpPort::return_frames(self, home)
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
