//! The kernel's AF_XDP UAPI (`linux/if_xdp.h`) and every system call the
//! AF_XDP port makes, in one place.
//!
//! Types are `#[repr(C)]` copies of the UAPI structs; functions are thin
//! wrappers that turn `-1`/errno into [`std::io::Error`]. Nothing here knows
//! about rings or frames: `ring.rs` and `queue.rs` hold that logic and only
//! touch memory this module mapped.

use std::ffi::{CStr, c_void};
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use super::AttachMode;

/// `AF_XDP` (`PF_XDP`).
pub(super) const AF_XDP: i32 = 44;
/// `SOL_XDP`.
pub(super) const SOL_XDP: i32 = 283;

// Socket options (`linux/if_xdp.h`).
pub(super) const XDP_MMAP_OFFSETS: i32 = 1;
pub(super) const XDP_RX_RING: i32 = 2;
pub(super) const XDP_TX_RING: i32 = 3;
pub(super) const XDP_UMEM_REG: i32 = 4;
pub(super) const XDP_UMEM_FILL_RING: i32 = 5;
pub(super) const XDP_UMEM_COMPLETION_RING: i32 = 6;
pub(super) const XDP_STATISTICS: i32 = 7;
pub(super) const XDP_OPTIONS: i32 = 8;
/// Descriptors one `sendto` may move in copy mode (kernel 6.16+; older
/// kernels fix it at 32 and answer `ENOPROTOOPT`).
pub(super) const XDP_MAX_TX_SKB_BUDGET: i32 = 9;

// Bind flags (`sockaddr_xdp.sxdp_flags`).
/// `bind` flag: use the UMEM of the socket `sxdp_shared_umem_fd` names.
pub(super) const XDP_SHARED_UMEM: u16 = 1 << 0;
pub(super) const XDP_COPY: u16 = 1 << 1;
pub(super) const XDP_ZEROCOPY: u16 = 1 << 2;
pub(super) const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;

/// A ring's `flags` word: the kernel wants a system call to make progress.
pub(super) const XDP_RING_NEED_WAKEUP: u32 = 1 << 0;
/// `xdp_options.flags`: the socket is bound in zero-copy mode.
pub(super) const XDP_OPTIONS_ZEROCOPY: u32 = 1 << 0;
/// `xdp_desc.options`: more fragments of this packet follow (multi-buffer,
/// only with `XDP_USE_SG`, which this port never sets).
pub(super) const XDP_PKT_CONTD: u32 = 1 << 0;

// mmap page offsets of the four rings.
pub(super) const XDP_PGOFF_RX_RING: i64 = 0;
pub(super) const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
pub(super) const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
pub(super) const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;

/// Headroom the kernel leaves before a received frame in its UMEM chunk
/// (`XDP_PACKET_HEADROOM`), on top of the UMEM's own headroom (0 here).
pub(super) const XDP_PACKET_HEADROOM: u32 = 256;

/// `struct sockaddr_xdp`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SockaddrXdp {
    pub family: u16,
    pub flags: u16,
    pub ifindex: u32,
    pub queue_id: u32,
    pub shared_umem_fd: u32,
}

/// `struct xdp_ring_offset`: byte offsets inside one ring's mapping.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct XdpRingOffset {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct XdpMmapOffsets {
    pub rx: XdpRingOffset,
    pub tx: XdpRingOffset,
    pub fr: XdpRingOffset,
    pub cr: XdpRingOffset,
}

/// `struct xdp_umem_reg` as of kernel 6.8 (the last field fills what was
/// padding before, so older kernels read the same 32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct XdpUmemReg {
    pub addr: u64,
    pub len: u64,
    pub chunk_size: u32,
    pub headroom: u32,
    pub flags: u32,
    pub tx_metadata_len: u32,
}

/// `struct xdp_statistics`: the kernel's per-socket counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpStatistics {
    /// Frames dropped for other reasons (no fill-ring frame, too long).
    pub rx_dropped: u64,
    /// Frames dropped because of an invalid descriptor.
    pub rx_invalid_descs: u64,
    /// Tx descriptors the kernel refused as invalid.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the tx ring empty.
    pub tx_ring_empty_descs: u64,
}

impl XdpStatistics {
    /// Field-wise sum.
    pub(super) fn add(&mut self, o: &XdpStatistics) {
        self.rx_dropped += o.rx_dropped;
        self.rx_invalid_descs += o.rx_invalid_descs;
        self.tx_invalid_descs += o.tx_invalid_descs;
        self.rx_ring_full += o.rx_ring_full;
        self.rx_fill_ring_empty_descs += o.rx_fill_ring_empty_descs;
        self.tx_ring_empty_descs += o.tx_ring_empty_descs;
    }
}

/// `struct xdp_options`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct XdpOptions {
    pub flags: u32,
}

/// `struct xdp_desc`: one rx or tx descriptor.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// `-1` from a libc call: the calling thread's errno as an error.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `-1` from a libc call returning a length: errno as an error.
fn check_len(ret: isize) -> io::Result<usize> {
    usize::try_from(ret).map_err(|_| io::Error::last_os_error())
}

/// A new `AF_XDP` socket (close-on-exec).
pub(super) fn xsk_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; a non-negative return is a new
    // descriptor that nothing else owns.
    let fd = check(unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, SOL_XDP, opt, value)`.
pub(super) fn set_opt<T: Copy>(fd: BorrowedFd<'_>, opt: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of exactly the length passed; the
    // kernel only reads it.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_XDP,
            opt,
            (value as *const T).cast::<c_void>(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `setsockopt(fd, SOL_SOCKET, opt, value)` for an int option.
pub(super) fn set_sol_socket_int(fd: BorrowedFd<'_>, opt: i32, value: i32) -> io::Result<()> {
    // SAFETY: as `set_opt`: a live int of the length passed, read only.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&value as *const i32).cast::<c_void>(),
            size_of::<i32>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `getsockopt(fd, SOL_XDP, opt)` into a zeroed `T`, returning it and the
/// length the kernel wrote.
///
/// `T` must be one of the plain UAPI structs above (all-zero is a valid
/// value of each).
pub(super) fn get_opt<T: Copy + Default>(fd: BorrowedFd<'_>, opt: i32) -> io::Result<(T, usize)> {
    let mut value = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is a live, writable `T` of `len` bytes and `len` a live
    // socklen_t; the kernel writes at most `len` bytes (it never grows the
    // length it is given) and every bit pattern is valid for these plain
    // integer structs.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            SOL_XDP,
            opt,
            (&mut value as *mut T).cast::<c_void>(),
            &mut len,
        )
    })?;
    Ok((value, len as usize))
}

/// Bind an `AF_XDP` socket to queue `queue_id` of interface `ifindex`
/// (with [`XDP_SHARED_UMEM`], on the UMEM of socket `shared_umem_fd`).
pub(super) fn bind(
    fd: BorrowedFd<'_>,
    ifindex: u32,
    queue_id: u32,
    flags: u16,
    shared_umem_fd: u32,
) -> io::Result<()> {
    let sa = SockaddrXdp {
        family: AF_XDP as u16,
        flags,
        ifindex,
        queue_id,
        shared_umem_fd,
    };
    // SAFETY: `sa` is a live sockaddr_xdp and the length passed is its size;
    // the kernel only reads it.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const SockaddrXdp).cast::<libc::sockaddr>(),
            size_of::<SockaddrXdp>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Kick the tx path: `sendto(fd, NULL, 0, MSG_DONTWAIT)`. In copy mode the
/// kernel transmits queued descriptors inside this call; in zero-copy mode
/// it wakes the driver.
pub(super) fn kick_tx(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: a zero-length send with null buffer and address: the kernel
    // dereferences neither.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    check_len(r).map(drop)
}

/// Wake the rx path of a zero-copy driver: `recvfrom(fd, NULL, 0,
/// MSG_DONTWAIT)`.
pub(super) fn kick_rx(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: a zero-length receive with null buffer and address: the kernel
    // writes to neither.
    let r = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    check_len(r).map(drop)
}

/// A memory mapping, unmapped on drop.
#[derive(Debug)]
pub(super) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping belongs to the process, not to a thread; `Mmap` only
// hands out its address, and whoever uses the address synchronizes access.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Anonymous, private, populated read-write memory of `len` bytes (the
    /// UMEM).
    pub(super) fn anonymous(len: usize) -> io::Result<Mmap> {
        // SAFETY: a new anonymous mapping at an address of the kernel's
        // choosing aliases nothing.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        Self::from_ret(p, len)
    }

    /// Map `len` bytes of one of a socket's rings (`pgoff` is one of the
    /// `XDP_*PGOFF*` constants), shared with the kernel.
    pub(super) fn ring(fd: BorrowedFd<'_>, len: usize, pgoff: i64) -> io::Result<Mmap> {
        // SAFETY: a new shared mapping of the socket's ring at an address of
        // the kernel's choosing aliases no Rust object; the kernel checks
        // `len` against the ring's size.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff,
            )
        };
        Self::from_ret(p, len)
    }

    fn from_ret(p: *mut c_void, len: usize) -> io::Result<Mmap> {
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mmap { ptr, len })
    }

    /// Start of the mapping.
    pub(super) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub(super) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping this value created and
        // nothing uses after drop (the rings and frames that point into it
        // are owned by the same queue and dropped with it).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast::<c_void>(), self.len);
        }
    }
}

/// The index of interface `name` in the calling thread's network
/// namespace, `None` if there is none.
pub(super) fn if_nametoindex(name: &CStr) -> Option<u32> {
    // SAFETY: `name` is a valid NUL-terminated string for the whole call.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (i != 0).then_some(i)
}

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// `struct ifreq` with the `ifr_data` member of its union.
#[repr(C)]
struct IfreqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut c_void,
    _pad: [u8; 16],
}

const ETHTOOL_GCHANNELS: u32 = 0x0000_003c;
const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// The number of rx queues of interface `name` (rx + combined channels) as
/// ethtool reports them, in the calling thread's namespace. Works where
/// `/sys/class/net` would not: a thread that entered another namespace
/// still sees the sysfs of the namespace that mounted it.
pub(super) fn rx_queue_count(name: &CStr) -> io::Result<u32> {
    let bytes = name.to_bytes();
    if bytes.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    // SAFETY: a datagram socket for the ioctl; no pointers.
    let fd =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by no one else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    // SAFETY: all-zero is a valid ifreq (name bytes, null pointer, padding).
    let mut ifr: IfreqData = unsafe { zeroed() };
    ifr.name[..bytes.len()].copy_from_slice(bytes);
    ifr.data = (&mut ch as *mut EthtoolChannels).cast::<c_void>();
    // SAFETY: SIOCETHTOOL reads the ifreq and writes one ethtool_channels to
    // `ifr.data`, which points to `ch`, live and writable for the call.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut ifr as *mut IfreqData) })?;
    Ok(ch.rx_count + ch.combined_count)
}

/// An epoll descriptor watching `fds` for input: one descriptor a worker can
/// sleep on for a port with several sockets.
pub(super) fn epoll_in(fds: &[RawFd]) -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1 takes no pointers.
    let ep = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: `ep` was just returned by epoll_create1 and is owned by no one
    // else.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for (i, &fd) in fds.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        // SAFETY: `ev` is a live epoll_event read by the kernel during the
        // call; `fd` is an open socket of the caller's.
        check(unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
    }
    Ok(ep)
}

// bpf(2) commands and values for attaching an XDP program through a
// bpf_link (kernel 5.9+), which user space can detach for good
// (`BPF_LINK_DETACH`) even while another process still holds a copy of the
// link's descriptor.
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_LINK_DETACH: libc::c_long = 34;
const BPF_XDP: u32 = 37;
/// `XDP_FLAGS_SKB_MODE`: generic XDP.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP.
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The `link_create` member of `union bpf_attr`, zero-padded (the kernel
/// requires the unused tail of the union to be zero).
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    _rest: [u64; 4],
}

/// The `link_detach` member of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct LinkDetachAttr {
    link_fd: u32,
    _pad: u32,
}

/// An XDP program attached to an interface through a bpf_link (kernel
/// 5.9+), detached on drop with `BPF_LINK_DETACH` and then closed.
///
/// Why not aya's XDP link: closing a link's descriptor detaches the
/// program only once no copy of the descriptor is left, and a child
/// process forked meanwhile by another thread holds one until it execs
/// (the descriptor is close-on-exec, not close-on-fork). `BPF_LINK_DETACH`
/// detaches it at once, whoever still holds a copy; aya 0.14 keeps its
/// link's descriptor private and does not expose the command. The AF_XDP
/// port attaches its own program with one; the fast path (`vrhost-fast`)
/// attaches its router with them too.
#[derive(Debug)]
pub struct XdpLink {
    fd: OwnedFd,
    mode: AttachMode,
}

impl XdpLink {
    /// Attach the loaded XDP program `prog` to interface `ifindex` (of the
    /// calling thread's network namespace) in `mode`.
    ///
    /// # Errors
    /// The OS error of `bpf(BPF_LINK_CREATE)`: `EBUSY` if another program
    /// is attached, `EOPNOTSUPP` if the driver has no native XDP, `ENODEV`
    /// if there is no such interface, `EINVAL` if `prog` is not an XDP
    /// program.
    pub fn attach(prog: BorrowedFd<'_>, ifindex: u32, mode: AttachMode) -> io::Result<XdpLink> {
        let flags = match mode {
            AttachMode::Native => XDP_FLAGS_DRV_MODE,
            AttachMode::Generic => XDP_FLAGS_SKB_MODE,
        };
        let attr = LinkCreateAttr {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags,
            ..LinkCreateAttr::default()
        };
        // SAFETY: `attr` is a live, fully initialized bpf_attr prefix of the
        // size passed; the kernel only reads it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_LINK_CREATE,
                &attr as *const LinkCreateAttr,
                size_of::<LinkCreateAttr>() as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new link descriptor (close-on-exec), owned by no one
        // else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        Ok(XdpLink { fd, mode })
    }

    /// Attach `prog` to `ifindex` natively, or generically if the driver
    /// refuses native XDP.
    ///
    /// # Errors
    /// Both modes' OS errors, native first, when neither attaches.
    pub fn attach_native_else_generic(
        prog: BorrowedFd<'_>,
        ifindex: u32,
    ) -> Result<XdpLink, (io::Error, io::Error)> {
        XdpLink::attach(prog, ifindex, AttachMode::Native).or_else(|native| {
            XdpLink::attach(prog, ifindex, AttachMode::Generic).map_err(|generic| (native, generic))
        })
    }

    /// The mode it was attached in.
    pub fn mode(&self) -> AttachMode {
        self.mode
    }
}

impl Drop for XdpLink {
    fn drop(&mut self) {
        let attr = LinkDetachAttr {
            link_fd: self.fd.as_raw_fd() as u32,
            _pad: 0,
        };
        // SAFETY: as in `attach`: a live attr of the size passed, read only.
        // Closing the descriptor alone would detach only once every copy of
        // it is closed (a child forked by another thread holds one until it
        // execs).
        unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_LINK_DETACH,
                &attr as *const LinkDetachAttr,
                size_of::<LinkDetachAttr>() as libc::c_uint,
            );
        }
    }
}
