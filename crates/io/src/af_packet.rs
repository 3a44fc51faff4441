//! `AfPacketPort`: an interface through AF_PACKET memory-mapped rings
//! (LVRM's "mmap ring" socket adapter).
//!
//! One AF_PACKET socket is bound to the interface (its index looked up in
//! the network namespace of the thread that opens the port), joined to its
//! promiscuous membership (frames to any MAC are seen) and told to ignore
//! outgoing frames (the port does not receive what it or the host's own
//! stack sends on the interface).
//!
//! # Receive: a `TPACKET_V3` ring
//!
//! The kernel fills fixed-size *blocks* with variable-size frames and hands
//! a block over when it is full or when [`AfPacketConfig::block_timeout_ms`]
//! passes (rounded up to the kernel's timer tick). [`Port::rx_burst`] walks
//! the blocks it owns and returns slices of the ring itself: no copy, no
//! system call. The frames borrow the ring until the next call on the
//! port; a block is handed back to the kernel at the start of the call
//! after the one that finished reading it.
//!
//! Everything read from the ring is checked before use: a block's packet
//! count and first offset, each packet's header position, `tp_mac` and
//! `tp_snaplen` inside the block, `tp_next_offset` moving forward past the
//! frame. A corrupt value ends the block and counts its unread frames in
//! `rx_dropped`; it never panics or reads outside the ring. Frames cut
//! short by the ring (`tp_snaplen < tp_len`), shorter than an Ethernet
//! header or longer than [`AfPacketConfig::max_frame_len`] are dropped and
//! counted too, as are the kernel's own drops (a full ring), read from
//! `PACKET_STATISTICS` when [`Port::stats`] is called.
//!
//! A VLAN tag the kernel moved into the frame's metadata (it strips tags on
//! receive) is put back in place, in the ring, so the host sees the frame
//! as it was on the wire.
//!
//! The price of blocks is latency at low rates: a lone frame waits in a
//! partly filled block for the block timeout (1 ms by default), and a
//! sleeping reader is woken only when the block is handed over, however
//! fast it polls. [`RxMode::Frames`] trades the blocks for a `TPACKET_V2`
//! ring of fixed-size slots, one per frame, each handed over (and the
//! reader woken) as soon as its frame is in it: the port for a path where
//! single frames must not wait, such as a cluster's underlay and access
//! ports (`docs/cluster.md`). And since
//! the kernel hands over a partly filled block at every timeout, a reader
//! that pauses longer than `block_count x block_timeout_ms` (64 ms by
//! default) finds the ring full and frames dropped, however few of them
//! came: size the ring for the longest pause, not only for the rate.
//!
//! # Transmit: an mmap tx ring
//!
//! [`Port::tx_burst`] copies each frame into the next free tx ring frame and
//! marks it `TP_STATUS_SEND_REQUEST`; [`Port::flush`] then sends everything
//! marked with one `sendto(MSG_DONTWAIT)`, and does nothing when nothing is
//! queued. A ring that fills inside `tx_burst` is kicked there; frames are
//! refused (`tx_dropped`) only when a kick frees nothing. `PACKET_QDISC_BYPASS` hands frames to the driver
//! directly and `PACKET_LOSS` makes the kernel skip a frame it refuses
//! rather than stall the ring on it.
//!
//! The tx ring is `TPACKET_V3` on the receiving socket by default (kernel
//! 4.11+), or `TPACKET_V2` on a second, send-only socket
//! ([`TxVersion`]): the ring version is per socket, so V2 tx beside a V3 rx
//! ring needs its own socket. The kernel's send path is the same for both
//! but for the header format. Measured with the `pps_sanity` test of
//! `tests/kernel_ports/` (50,000 64-byte frames over veth, 2-vCPU VM,
//! four alternating runs each): V3 0.27-0.34 Mpps, V2 0.24-0.28 Mpps, the
//! same within the noise. V3 saves a socket, a mapping and a descriptor
//! per port, so it is the default.
//!
//! On veth, the kernel's per-frame work (an skb, the peer's receive path)
//! dominates sending: the ring sends about as fast as one `send` per frame
//! ([`SocketPort`](crate::socket::SocketPort)). Receiving is where the
//! ring wins: walking it costs tens of nanoseconds a frame, against a
//! system call per frame.

#![expect(
    unsafe_code,
    reason = "AF_PACKET rings are memory shared with the kernel: raw pointers into an mmap, \
              atomics on its status words"
)]

use std::ffi::c_int;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use self::frames::RxFrames;
use self::ring::{RxRing, TxRing, h3};
use crate::packet_sys::{self as sys, ETH_HLEN, KernelDrops, Mapping, SysError, ifname_bytes};
use crate::{Driver, Port, PortError, PortStats};

/// `TPACKET_V2` (libc has it only as an enum variant).
const TPACKET_V2: c_int = 1;
/// `TPACKET_V3`.
const TPACKET_V3: c_int = 2;

/// Largest ring (rx or tx) a config may ask for: 1 GiB.
pub const MAX_RING_BYTES: usize = 1 << 30;

/// Empty rx bursts between two reads of the socket's pending error (see
/// [`AfPacketPort`]'s `rx_burst`).
const CLEAR_ERROR_EVERY: u32 = 1024;

/// The tx ring's format. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxVersion {
    /// `TPACKET_V2` on a second, send-only socket.
    V2,
    /// `TPACKET_V3` on the receiving socket (kernel 4.11+).
    #[default]
    V3,
}

/// The rx ring's format. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RxMode {
    /// `TPACKET_V3` blocks, handed over when full or after
    /// [`AfPacketConfig::block_timeout_ms`]: dense, one wakeup per block.
    #[default]
    Blocks,
    /// `TPACKET_V2` slots, one per frame, each handed over at once (the
    /// tx ring is then V2 too, on the same socket; `block_timeout_ms` and
    /// `tx_version` are not used).
    Frames,
}

/// An [`AfPacketPort`]'s ring sizes and options.
///
/// [`Default`]: 64 rx blocks of 256 KiB (a 16 MiB ring: about 110,000
/// 64-byte or 10,000 1514-byte frames), 2048-byte frames (frames up to
/// 2000 bytes), a 1 ms block timeout, 1024 tx frames, V3 tx, qdisc bypass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// Bytes per rx block: a multiple of the page size.
    pub block_bytes: u32,
    /// Number of rx blocks.
    pub block_count: u32,
    /// Bytes per tx ring frame (`tp_frame_size`), a multiple of 16, at
    /// least 128 and at most `block_bytes`. The largest frame accepted
    /// either way is this minus the 48-byte frame header
    /// ([`max_frame_len`](Self::max_frame_len)).
    pub frame_bytes: u32,
    /// Milliseconds after which the kernel hands over a partly filled rx
    /// block (0: the kernel derives it from the link speed, 8 ms when it
    /// cannot). The latency of a lone frame; and `block_count` times this
    /// is the longest the reader may pause without losing frames at low
    /// rates (see the [module docs](self)).
    pub block_timeout_ms: u32,
    /// Frames in the tx ring (rounded up to fill its last block).
    pub tx_frames: u32,
    /// The tx ring's format.
    pub tx_version: TxVersion,
    /// Hand frames to the driver directly, bypassing the qdisc
    /// (`PACKET_QDISC_BYPASS`).
    pub qdisc_bypass: bool,
    /// The rx ring's format.
    pub rx_mode: RxMode,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl AfPacketConfig {
    /// [`Default`], as a constant.
    pub const DEFAULT: AfPacketConfig = AfPacketConfig {
        block_bytes: 256 << 10,
        block_count: 64,
        frame_bytes: 2048,
        block_timeout_ms: 1,
        tx_frames: 1024,
        tx_version: TxVersion::V3,
        qdisc_bypass: true,
        rx_mode: RxMode::Blocks,
    };
}

/// Ring sizes derived from a valid config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Geometry {
    rx_block: usize,
    rx_blocks: usize,
    frame: usize,
    tx_block: usize,
    tx_blocks: usize,
}

impl Geometry {
    fn rx_bytes(&self) -> usize {
        self.rx_block * self.rx_blocks
    }

    fn tx_bytes(&self) -> usize {
        self.tx_block * self.tx_blocks
    }

    fn tx_frames_per_block(&self) -> usize {
        self.tx_block / self.frame
    }
}

impl AfPacketConfig {
    /// The largest frame (without FCS) the port receives or sends:
    /// `frame_bytes` minus the 48-byte `tpacket3_hdr`.
    pub fn max_frame_len(&self) -> usize {
        (self.frame_bytes as usize).saturating_sub(h3::HEADER_LEN)
    }

    /// Check the config as a whole.
    ///
    /// # Errors
    /// What is wrong, in words.
    pub fn validate(&self) -> Result<(), String> {
        self.geometry(sys::page_size()).map(drop)
    }

    fn geometry(&self, page: usize) -> Result<Geometry, String> {
        let rx_block = self.block_bytes as usize;
        let frame = self.frame_bytes as usize;
        if rx_block == 0 || !rx_block.is_multiple_of(page) {
            return Err(format!(
                "block_bytes {rx_block} is not a positive multiple of the page size {page}"
            ));
        }
        if self.block_count == 0 {
            return Err("block_count is 0".into());
        }
        let rx_blocks = self.block_count as usize;
        if rx_block
            .checked_mul(rx_blocks)
            .is_none_or(|b| b > MAX_RING_BYTES)
        {
            return Err(format!(
                "rx ring of {rx_blocks} x {rx_block} bytes exceeds {MAX_RING_BYTES} bytes"
            ));
        }
        if frame < 128 || !frame.is_multiple_of(16) || frame > rx_block {
            return Err(format!(
                "frame_bytes {frame} is not a multiple of 16 in 128..=block_bytes ({rx_block})"
            ));
        }
        if self.tx_frames == 0 {
            return Err("tx_frames is 0".into());
        }
        let tx_block = frame.div_ceil(page) * page;
        let per_block = tx_block / frame;
        let tx_blocks = (self.tx_frames as usize).div_ceil(per_block);
        if tx_block
            .checked_mul(tx_blocks)
            .is_none_or(|b| b > MAX_RING_BYTES)
        {
            return Err(format!(
                "tx ring of {} frames of {frame} bytes exceeds {MAX_RING_BYTES} bytes",
                self.tx_frames
            ));
        }
        Ok(Geometry {
            rx_block,
            rx_blocks,
            frame,
            tx_block,
            tx_blocks,
        })
    }
}

/// The AF_PACKET mmap port. See the [module docs](self).
#[derive(Debug)]
pub struct AfPacketPort {
    name: String,
    ifindex: i32,
    rx: Rx,
    tx: TxRing,
    /// Largest frame accepted either way.
    max_frame: usize,
    /// Largest untagged frame the interface's MTU lets through (MTU + 14),
    /// as read at open.
    mtu_frame: usize,
    /// Consecutive empty rx bursts.
    empty_polls: u32,
    stats: PortStats,
    kernel_drops: KernelDrops,
    // The rings point into these mappings: declared after the rings, so
    // dropped after them; the sockets close last.
    _rx_map: Mapping,
    _tx_map: Option<Mapping>,
    fd: OwnedFd,
    tx_fd: Option<OwnedFd>,
}

// SAFETY: the port owns its mappings and sockets outright; its raw
// pointers lead only into those mappings, which no other Rust value
// references once the port's borrows end, and the kernel's side of the
// rings does not care which thread uses them. Moving the port moves all of
// it. (`KernelDrops`' `Cell` keeps it `!Sync`: one thread at a time.)
unsafe impl Send for AfPacketPort {}

impl AfPacketPort {
    /// Open interface `ifname` (looked up in the calling thread's network
    /// namespace) with `cfg`.
    ///
    /// # Errors
    /// [`PortError`] naming the interface: invalid name or config, no
    /// such device, or the system call that failed (`EPERM` without
    /// `CAP_NET_RAW`).
    pub fn open(ifname: &str, cfg: AfPacketConfig) -> Result<AfPacketPort, PortError> {
        let cname = ifname_bytes(ifname, false)
            .map_err(|reason| PortError::invalid_name(ifname, reason))?;
        let geo = cfg
            .geometry(sys::page_size())
            .map_err(|reason| PortError::config(ifname, Driver::AfPacket, reason))?;
        let err = |e| PortError::on_device(ifname, e);
        let fd = sys::packet_socket().map_err(err)?;
        let ifindex = sys::prepare_packet_socket(fd.as_fd(), &cname).map_err(err)?;
        let mtu = sys::mtu(fd.as_fd(), &cname).map_err(err)?;
        let mapped = match (cfg.rx_mode, cfg.tx_version) {
            (RxMode::Frames, _) => map_frame_rings(fd.as_fd(), &geo, &cfg),
            (RxMode::Blocks, tx) => {
                set_version(fd.as_fd(), TxVersion::V3).and_then(|()| match tx {
                    TxVersion::V3 => map_v3_rings(fd.as_fd(), &geo, &cfg),
                    TxVersion::V2 => map_v2_rings(fd.as_fd(), ifindex, &geo, &cfg),
                })
            }
        }
        .map_err(err)?;
        // Room in the send buffer for a whole tx ring in flight (best
        // effort: the ring, not the buffer, should be the limit).
        let _ = sys::set_buffer(
            mapped.tx_fd.as_ref().unwrap_or(&fd).as_fd(),
            libc::SO_SNDBUFFORCE,
            libc::SO_SNDBUF,
            geo.tx_bytes() * 2,
            "setsockopt(SO_SNDBUF)",
        );
        let (rx, tx) = mapped.rings(&geo, &cfg);

        // Last: start receiving.
        sys::bind_packet(fd.as_fd(), ifindex, libc::ETH_P_ALL as u16).map_err(err)?;

        Ok(AfPacketPort {
            name: ifname.to_owned(),
            ifindex,
            rx,
            tx,
            max_frame: cfg.max_frame_len(),
            mtu_frame: mtu as usize + ETH_HLEN,
            empty_polls: 0,
            stats: PortStats::default(),
            kernel_drops: KernelDrops::default(),
            _rx_map: mapped.rx_map,
            _tx_map: mapped.tx_map,
            fd,
            tx_fd: mapped.tx_fd,
        })
    }

    /// The interface's index in its network namespace.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// The largest frame the port receives or sends.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame
    }

    fn tx_fd(&self) -> BorrowedFd<'_> {
        self.tx_fd.as_ref().unwrap_or(&self.fd).as_fd()
    }

    /// The largest frame `f` may be: what the interface takes (see
    /// [`sys::tx_limit`]), at most what the ring takes.
    fn tx_limit(&self, f: &[u8]) -> usize {
        sys::tx_limit(f, self.mtu_frame, self.max_frame)
    }

    /// One `sendto`: the kernel sends every marked frame.
    fn kick(&mut self) -> io::Result<()> {
        let r = sys::kick(self.tx_fd());
        // The kernel takes frames in ring order: once the last one queued
        // has left SEND_REQUEST, all have. Otherwise (a full device queue,
        // a down link) they stay marked and the next kick retries them.
        if !self.tx.last_pending() {
            self.tx.queued = 0;
        }
        match r {
            Ok(_) => Ok(()),
            Err(e) if sys::is_transient(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The rings set up and mapped by [`map_v3_rings`] or [`map_v2_rings`],
/// before the port's ring views are made over them.
struct MappedRings {
    /// The send-only socket of a V2 tx ring.
    tx_fd: Option<OwnedFd>,
    /// The rx ring's mapping (with a V3 tx ring right after it).
    rx_map: Mapping,
    /// A V2 tx ring's own mapping.
    tx_map: Option<Mapping>,
    /// Where the tx ring starts, inside `rx_map` or `tx_map`.
    tx_base: *mut u8,
}

impl MappedRings {
    /// The port's views of the rx and tx rings.
    fn rings(&self, geo: &Geometry, cfg: &AfPacketConfig) -> (Rx, TxRing) {
        let (base, max) = (self.rx_map.ptr(), cfg.max_frame_len());
        let rx = match cfg.rx_mode {
            RxMode::Blocks => {
                // SAFETY: the rx ring is the first rx_bytes of a live
                // mapping that the port keeps (and drops after the ring),
                // page aligned; the kernel laid it out as rx_blocks blocks
                // of rx_block bytes.
                let r = unsafe { RxRing::new(base, geo.rx_block, geo.rx_blocks, max) };
                Rx::Blocks(r)
            }
            RxMode::Frames => {
                // SAFETY: as above, the blocks holding slots of `frame`
                // bytes (map_frame_rings asked the kernel for that layout).
                let r = unsafe { RxFrames::new(base, geo.rx_block, geo.rx_blocks, geo.frame, max) };
                Rx::Frames(r)
            }
        };
        let version = match cfg.rx_mode {
            RxMode::Frames => TxVersion::V2,
            RxMode::Blocks => cfg.tx_version,
        };
        // SAFETY: the tx ring is tx_bytes at `tx_base` inside a live mapping
        // the port keeps; the kernel laid it out as tx_blocks blocks of
        // tx_block bytes, each holding tx_block / frame frames.
        let tx = unsafe {
            TxRing::new(
                self.tx_base,
                geo.tx_block,
                geo.tx_blocks,
                geo.frame,
                version,
            )
        };
        (rx, tx)
    }
}

/// `PACKET_VERSION`: the format of the socket's rings, one of the two
/// [`TxVersion`] names (the receiving socket is always `TPACKET_V3`).
fn set_version(fd: BorrowedFd<'_>, version: TxVersion) -> Result<(), SysError> {
    let (v, call) = match version {
        TxVersion::V3 => (TPACKET_V3, "setsockopt(PACKET_VERSION, TPACKET_V3)"),
        TxVersion::V2 => (TPACKET_V2, "setsockopt(PACKET_VERSION, TPACKET_V2)"),
    };
    sys::setsockopt_int(fd, libc::SOL_PACKET, libc::PACKET_VERSION, v, call)
}

/// `PACKET_RX_RING`: the `TPACKET_V3` rx ring of `geo`, blocks retired
/// after the config's timeout.
fn set_rx_ring(fd: BorrowedFd<'_>, geo: &Geometry, cfg: &AfPacketConfig) -> Result<(), SysError> {
    let req = libc::tpacket_req3 {
        tp_block_size: geo.rx_block as u32,
        tp_block_nr: geo.rx_blocks as u32,
        tp_frame_size: geo.frame as u32,
        tp_frame_nr: (geo.rx_blocks * (geo.rx_block / geo.frame)) as u32,
        tp_retire_blk_tov: cfg.block_timeout_ms,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    let call = "setsockopt(PACKET_RX_RING)";
    sys::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req, call)
}

/// `PACKET_TX_RING` with `req`, a `tpacket_req3` or a `tpacket_req`.
fn set_tx_ring<T: Copy>(fd: BorrowedFd<'_>, req: &T) -> Result<(), SysError> {
    let call = "setsockopt(PACKET_TX_RING)";
    sys::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_TX_RING, req, call)
}

/// Frames in the tx ring of `geo`.
fn tx_frame_nr(geo: &Geometry) -> u32 {
    (geo.tx_blocks * geo.tx_frames_per_block()) as u32
}

/// V3 tx: both rings on the receiving socket `fd` (already `TPACKET_V3`),
/// in one mapping, the tx ring right after the rx ring.
fn map_v3_rings(
    fd: BorrowedFd<'_>,
    geo: &Geometry,
    cfg: &AfPacketConfig,
) -> Result<MappedRings, SysError> {
    // PACKET_LOSS must precede the rings.
    set_tx_options(fd, cfg)?;
    set_rx_ring(fd, geo, cfg)?;
    let tx_req = libc::tpacket_req3 {
        tp_block_size: geo.tx_block as u32,
        tp_block_nr: geo.tx_blocks as u32,
        tp_frame_size: geo.frame as u32,
        tp_frame_nr: tx_frame_nr(geo),
        tp_retire_blk_tov: 0,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    set_tx_ring(fd, &tx_req)?;
    map_one(fd, geo)
}

/// Both rings of `fd` in one mapping: the rx ring, then the tx ring.
fn map_one(fd: BorrowedFd<'_>, geo: &Geometry) -> Result<MappedRings, SysError> {
    let map = Mapping::map(fd, geo.rx_bytes() + geo.tx_bytes())?;
    // SAFETY: the mapping is rx_bytes + tx_bytes long; the tx ring starts
    // right after the rx ring.
    let tx_base = unsafe { map.ptr().add(geo.rx_bytes()) };
    Ok(MappedRings {
        tx_fd: None,
        rx_map: map,
        tx_map: None,
        tx_base,
    })
}

/// The `tpacket_req` of a V2 tx ring of `geo`.
fn tx_req_v2(geo: &Geometry) -> libc::tpacket_req {
    libc::tpacket_req {
        tp_block_size: geo.tx_block as u32,
        tp_block_nr: geo.tx_blocks as u32,
        tp_frame_size: geo.frame as u32,
        tp_frame_nr: tx_frame_nr(geo),
    }
}

/// [`RxMode::Frames`]: a `TPACKET_V2` rx ring of `frame`-byte slots and a
/// V2 tx ring, both on `fd`, in one mapping, the tx ring right after.
fn map_frame_rings(
    fd: BorrowedFd<'_>,
    geo: &Geometry,
    cfg: &AfPacketConfig,
) -> Result<MappedRings, SysError> {
    set_version(fd, TxVersion::V2)?;
    set_tx_options(fd, cfg)?;
    let rx_req = libc::tpacket_req {
        tp_block_size: geo.rx_block as u32,
        tp_block_nr: geo.rx_blocks as u32,
        tp_frame_size: geo.frame as u32,
        tp_frame_nr: (geo.rx_blocks * (geo.rx_block / geo.frame)) as u32,
    };
    let call = "setsockopt(PACKET_RX_RING)";
    sys::setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &rx_req, call)?;
    set_tx_ring(fd, &tx_req_v2(geo))?;
    map_one(fd, geo)
}

/// V2 tx: the rx ring on `fd`, the tx ring on a second, send-only
/// `TPACKET_V2` socket bound to interface `ifindex`, each in its own mapping.
fn map_v2_rings(
    fd: BorrowedFd<'_>,
    ifindex: c_int,
    geo: &Geometry,
    cfg: &AfPacketConfig,
) -> Result<MappedRings, SysError> {
    set_rx_ring(fd, geo, cfg)?;
    let rx_map = Mapping::map(fd, geo.rx_bytes())?;
    let tfd = sys::packet_socket()?;
    set_version(tfd.as_fd(), TxVersion::V2)?;
    set_tx_options(tfd.as_fd(), cfg)?;
    set_tx_ring(tfd.as_fd(), &tx_req_v2(geo))?;
    let tx_map = Mapping::map(tfd.as_fd(), geo.tx_bytes())?;
    // Protocol 0: bound to the interface for sending, receives nothing.
    sys::bind_packet(tfd.as_fd(), ifindex, 0)?;
    let tx_base = tx_map.ptr();
    Ok(MappedRings {
        tx_fd: Some(tfd),
        rx_map,
        tx_map: Some(tx_map),
        tx_base,
    })
}

/// `PACKET_LOSS`, and `PACKET_QDISC_BYPASS` if the config asks for it.
fn set_tx_options(fd: BorrowedFd<'_>, cfg: &AfPacketConfig) -> Result<(), SysError> {
    sys::setsockopt_int(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_LOSS,
        1,
        "setsockopt(PACKET_LOSS)",
    )?;
    if cfg.qdisc_bypass {
        sys::setsockopt_int(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            1,
            "setsockopt(PACKET_QDISC_BYPASS)",
        )?;
    }
    Ok(())
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    /// Frames from the blocks the kernel has handed over, as slices of the
    /// ring; hands back the blocks finished in the previous call first.
    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        let n = match &mut self.rx {
            Rx::Blocks(r) => r.burst(out, &mut self.stats),
            Rx::Frames(r) => r.burst(out, &mut self.stats),
        };
        if n == 0 {
            // A socket whose link went down keeps ENETDOWN pending, and
            // poll() reports it ready until it is read: a sleeping worker
            // would spin. Read it now and then while idle (never while
            // busy).
            self.empty_polls += 1;
            if self.empty_polls >= CLEAR_ERROR_EVERY {
                self.empty_polls = 0;
                sys::take_socket_error(self.fd.as_fd());
            }
        } else {
            self.empty_polls = 0;
        }
        n
    }

    /// Copy frames into the tx ring and mark them; [`Port::flush`] sends
    /// them. Frames shorter than 14 bytes or longer than the interface or
    /// the ring takes are refused; a full ring is kicked (one `sendto`) and
    /// refuses frames only if that frees nothing.
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        let mut sent = 0;
        let mut can_kick = true;
        for f in frames {
            if f.len() < ETH_HLEN || f.len() > self.tx_limit(f) {
                self.stats.tx_dropped += 1;
                continue;
            }
            let mut ok = self.tx.push(f);
            if !ok && can_kick && self.tx.queued > 0 {
                let _ = self.kick();
                ok = self.tx.push(f);
                // A kick that freed nothing will not free more in this
                // burst: refuse the rest without system calls.
                can_kick = ok;
            }
            if ok {
                sent += 1;
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += f.len() as u64;
            } else {
                self.stats.tx_dropped += 1;
            }
        }
        sent
    }

    /// One `sendto(MSG_DONTWAIT)` if frames are queued; nothing otherwise.
    ///
    /// # Errors
    /// The OS error of the `sendto`, except "try again" ones (the frames
    /// stay queued for the next flush).
    fn flush(&mut self) -> io::Result<()> {
        if self.tx.queued == 0 {
            return Ok(());
        }
        self.kick()
    }

    /// The counters, with the kernel's drops (read from
    /// `PACKET_STATISTICS`, one system call) added to `rx_dropped`.
    fn stats(&self) -> PortStats {
        self.kernel_drops.add_to(self.fd.as_fd(), self.stats)
    }

    /// The socket: readable when the kernel has handed over a block (a
    /// frame, with [`RxMode::Frames`]).
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }
}

/// The port's rx ring, in its format.
#[derive(Debug)]
enum Rx {
    Blocks(RxRing),
    Frames(RxFrames),
}

mod frames;
mod ring;

#[cfg(test)]
mod frames_tests;
#[cfg(test)]
mod tests;
