//! The system calls of the AF_PACKET and TAP ports, in one place.
//!
//! Setup calls return a [`SysError`] naming the call; a driver wraps it
//! with the interface name into a [`PortError`](crate::PortError) (or
//! `tap`'s [`TapError`](crate::tap::TapError)). Data-path calls
//! (`send`, `recv_frame`, `read`, `write`, `kick`) return
//! [`std::io::Result`]: building an OS error from `errno` does not allocate.
//!
//! Every `unsafe` block here is a call into libc with pointers to live,
//! correctly sized locals, or the mapping of a ring the kernel sized; each
//! says why it holds.

#![expect(
    unsafe_code,
    reason = "system calls on packet sockets and /dev/net/tun: raw libc with pointers to locals"
)]

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// Longest interface name plus its NUL (`IFNAMSIZ`).
pub(crate) const IFNAMSIZ: usize = libc::IFNAMSIZ;

/// Length of an Ethernet header: the shortest frame a port accepts.
pub(crate) const ETH_HLEN: usize = 14;

/// Length of an 802.1Q tag.
pub(crate) const VLAN_HLEN: usize = 4;

/// `TP_STATUS_VLAN_VALID`: the frame had a VLAN tag, moved to metadata.
pub(crate) const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// `TP_STATUS_VLAN_TPID_VALID`: the tag's TPID is in metadata too.
pub(crate) const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// The config check of the per-frame drivers (socket, TAP): a burst of
/// `1..=max_burst` preallocated buffers of `ETH_HLEN..=65535` bytes.
pub(crate) fn check_burst_config(
    burst: usize,
    max_burst: usize,
    max_frame_bytes: usize,
) -> Result<(), String> {
    if !(1..=max_burst).contains(&burst) {
        return Err(format!("burst {burst} outside 1..={max_burst}"));
    }
    if !(ETH_HLEN..=65535).contains(&max_frame_bytes) {
        return Err(format!(
            "max_frame_bytes {max_frame_bytes} outside {ETH_HLEN}..=65535"
        ));
    }
    Ok(())
}

/// A setup system call that failed: which one, and the OS error.
#[derive(Debug)]
pub(crate) struct SysError {
    /// The call, as the user would search for it (`"setsockopt(PACKET_RX_RING)"`).
    pub(crate) call: &'static str,
    /// The OS error.
    pub(crate) source: io::Error,
}

impl SysError {
    fn last(call: &'static str) -> SysError {
        SysError {
            call,
            source: io::Error::last_os_error(),
        }
    }

    /// The OS error number, if any.
    pub(crate) fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

pub(crate) type SysResult<T> = Result<T, SysError>;

fn check(ret: c_int, call: &'static str) -> SysResult<c_int> {
    if ret < 0 {
        Err(SysError::last(call))
    } else {
        Ok(ret)
    }
}

/// Validate an interface name the way the kernel does (`dev_valid_name`)
/// and return it NUL-padded for an `ifreq`. `allow_empty` is for TAP, where
/// an empty name lets the kernel choose one.
pub(crate) fn ifname_bytes(
    name: &str,
    allow_empty: bool,
) -> Result<[libc::c_char; IFNAMSIZ], &'static str> {
    if name.is_empty() && !allow_empty {
        return Err("empty");
    }
    if name.len() >= IFNAMSIZ {
        return Err("longer than 15 bytes");
    }
    if name == "." || name == ".." {
        return Err("\".\" and \"..\" are not interface names");
    }
    if name
        .bytes()
        .any(|b| b == 0 || b == b'/' || b == b':' || b.is_ascii_whitespace())
    {
        return Err("contains NUL, '/', ':' or whitespace");
    }
    let mut out = [0 as libc::c_char; IFNAMSIZ];
    for (o, b) in out.iter_mut().zip(name.bytes()) {
        *o = b as libc::c_char;
    }
    Ok(out)
}

/// The page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory arguments.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// An AF_PACKET raw socket, non-blocking, that receives nothing until bound
/// with a protocol (protocol 0 at creation: no frame of another interface
/// slips in before `bind`).
pub(crate) fn packet_socket() -> SysResult<OwnedFd> {
    // SAFETY: socket has no memory arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    let fd = check(fd, "socket(AF_PACKET, SOCK_RAW)")?;
    // SAFETY: `fd` was just returned by socket and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ifreq(name: &[libc::c_char; IFNAMSIZ]) -> libc::ifreq {
    // SAFETY: ifreq is plain data (a name and a union of integers and
    // addresses); all zeroes is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    r.ifr_name = *name;
    r
}

/// The index of interface `name` in the network namespace of `fd`'s socket
/// (the namespace of the thread that created it). `ENODEV` if none.
pub(crate) fn ifindex(fd: BorrowedFd<'_>, name: &[libc::c_char; IFNAMSIZ]) -> SysResult<c_int> {
    let mut r = ifreq(name);
    // SAFETY: SIOCGIFINDEX reads the name and writes ifru_ifindex inside
    // `r`, a live ifreq.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFINDEX, &mut r) };
    check(ret, "ioctl(SIOCGIFINDEX)")?;
    // SAFETY: the kernel filled the union's ifindex member.
    Ok(unsafe { r.ifr_ifru.ifru_ifindex })
}

/// The MTU of interface `name`.
pub(crate) fn mtu(fd: BorrowedFd<'_>, name: &[libc::c_char; IFNAMSIZ]) -> SysResult<u32> {
    let mut r = ifreq(name);
    // SAFETY: SIOCGIFMTU reads the name and writes ifru_mtu inside `r`.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU, &mut r) };
    check(ret, "ioctl(SIOCGIFMTU)")?;
    // SAFETY: the kernel filled the union's mtu member.
    let m = unsafe { r.ifr_ifru.ifru_mtu };
    Ok(u32::try_from(m).unwrap_or(0))
}

/// `setsockopt(fd, level, opt, value)`; `T` is the option's C struct or int.
pub(crate) fn setsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: c_int,
    opt: c_int,
    value: &T,
    call: &'static str,
) -> SysResult<()> {
    // SAFETY: `value` points to a live `T` of the length passed; the kernel
    // only reads it.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (value as *const T).cast::<c_void>(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    check(ret, call).map(drop)
}

/// An int socket option set to `v`.
pub(crate) fn setsockopt_int(
    fd: BorrowedFd<'_>,
    level: c_int,
    opt: c_int,
    v: c_int,
    call: &'static str,
) -> SysResult<()> {
    setsockopt(fd, level, opt, &v, call)
}

/// Set a socket buffer size, trying the privileged `*FORCE` option first
/// (it ignores `net.core.[rw]mem_max`), then the plain one.
pub(crate) fn set_buffer(
    fd: BorrowedFd<'_>,
    force_opt: c_int,
    opt: c_int,
    bytes: usize,
    call: &'static str,
) -> SysResult<()> {
    let v = c_int::try_from(bytes / 2).unwrap_or(c_int::MAX / 2);
    // The kernel doubles the value for bookkeeping overhead; ask for half.
    setsockopt_int(fd, libc::SOL_SOCKET, force_opt, v, call)
        .or_else(|_| setsockopt_int(fd, libc::SOL_SOCKET, opt, v, call))
}

/// Bind a packet socket to interface `ifindex`, receiving `protocol`
/// (`ETH_P_ALL`: every frame; 0: none, for a send-only socket).
pub(crate) fn bind_packet(fd: BorrowedFd<'_>, ifindex: c_int, protocol: u16) -> SysResult<()> {
    // SAFETY: sockaddr_ll is plain data; zeroes are valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a live sockaddr_ll of the length passed.
    let ret = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    check(ret, "bind(AF_PACKET)").map(drop)
}

/// Join the interface's promiscuous membership (counted by the kernel,
/// left when the socket closes), so frames to any MAC are seen.
pub(crate) fn join_promisc(fd: BorrowedFd<'_>, ifindex: c_int) -> SysResult<()> {
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex,
        mr_type: libc::PACKET_MR_PROMISC as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    setsockopt(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_ADD_MEMBERSHIP,
        &mreq,
        "setsockopt(PACKET_ADD_MEMBERSHIP, PACKET_MR_PROMISC)",
    )
}

/// The common part of both packet ports' setup: the socket's interface
/// index, outgoing frames ignored, promiscuous membership.
pub(crate) fn prepare_packet_socket(
    fd: BorrowedFd<'_>,
    name: &[libc::c_char; IFNAMSIZ],
) -> SysResult<c_int> {
    let ifindex = ifindex(fd, name)?;
    setsockopt_int(
        fd,
        libc::SOL_PACKET,
        libc::PACKET_IGNORE_OUTGOING,
        1,
        "setsockopt(PACKET_IGNORE_OUTGOING)",
    )?;
    join_promisc(fd, ifindex)?;
    Ok(ifindex)
}

/// A packet socket's kernel drops read so far: `PACKET_STATISTICS` clears
/// on read, and [`Port::stats`](crate::Port::stats) takes `&self`. (The
/// `Cell` keeps a port holding it `!Sync`: one thread at a time.)
#[derive(Debug, Default)]
pub(crate) struct KernelDrops(Cell<u64>);

impl KernelDrops {
    /// `stats` with the drops of socket `fd` so far added to `rx_dropped`
    /// (one system call).
    pub(crate) fn add_to(
        &self,
        fd: BorrowedFd<'_>,
        mut stats: crate::PortStats,
    ) -> crate::PortStats {
        let d = self.0.get() + packet_drops(fd);
        self.0.set(d);
        stats.rx_dropped += d;
        stats
    }
}

/// Frames the kernel dropped for this socket since the last call (a full
/// ring or receive buffer). `PACKET_STATISTICS` clears on read, so the
/// caller accumulates. 0 if the call fails.
pub(crate) fn packet_drops(fd: BorrowedFd<'_>) -> u64 {
    // Large enough for tpacket_stats_v3; V1/V2 sockets fill the first two
    // words, which have the same layout.
    let mut st = libc::tpacket_stats_v3 {
        tp_packets: 0,
        tp_drops: 0,
        tp_freeze_q_cnt: 0,
    };
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: `st` and `len` are live locals; the kernel writes at most
    // `len` bytes into `st` and updates `len`.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut st as *mut libc::tpacket_stats_v3).cast::<c_void>(),
            &mut len,
        )
    };
    if ret < 0 {
        return 0;
    }
    u64::from(st.tp_drops)
}

/// Read and so clear the socket's pending error (`SO_ERROR`): a packet
/// socket whose interface went down keeps `ENETDOWN` pending, which makes
/// `poll` report it readable until someone reads it.
pub(crate) fn take_socket_error(fd: BorrowedFd<'_>) {
    let mut v: c_int = 0;
    let mut len = size_of::<c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are live locals of the sizes passed.
    let _ = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut v as *mut c_int).cast::<c_void>(),
            &mut len,
        )
    };
}

fn io_result(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// The largest frame an interface with MTU frame `mtu_frame` (MTU + 14)
/// takes: 4 bytes more for an 802.1Q-tagged frame (the kernel's rule); and
/// at most `max_frame`, the driver's own limit.
pub(crate) fn tx_limit(frame: &[u8], mtu_frame: usize, max_frame: usize) -> usize {
    let tagged = frame.len() >= ETH_HLEN && frame[12..14] == [0x81, 0x00];
    let mtu = mtu_frame + if tagged { VLAN_HLEN } else { 0 };
    mtu.min(max_frame)
}

/// Whether an error from a non-blocking call means "try again later".
pub(crate) fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN | libc::EINTR | libc::ENOBUFS)
    )
}

/// Kick a tx ring: the kernel sends every frame marked
/// `TP_STATUS_SEND_REQUEST` from its head on, without waiting.
pub(crate) fn kick(fd: BorrowedFd<'_>) -> io::Result<usize> {
    // SAFETY: a null buffer of length 0 and no address: the kernel reads
    // nothing from user memory but the ring it mapped.
    let ret = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    io_result(ret)
}

/// Send one frame on a bound packet socket, without blocking.
pub(crate) fn send(fd: BorrowedFd<'_>, frame: &[u8]) -> io::Result<usize> {
    // SAFETY: `frame` is a live slice of the length passed; the kernel only
    // reads it.
    let ret = unsafe {
        libc::send(
            fd.as_raw_fd(),
            frame.as_ptr().cast::<c_void>(),
            frame.len(),
            libc::MSG_DONTWAIT,
        )
    };
    io_result(ret)
}

/// A VLAN tag the kernel took out of a received frame (`tp_vlan_tci`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VlanTag {
    /// The tag protocol identifier (0x8100 or 0x88a8).
    pub(crate) tpid: u16,
    /// Priority, DEI and VLAN id.
    pub(crate) tci: u16,
}

impl VlanTag {
    /// The tag of a frame whose status word and metadata the kernel wrote.
    pub(crate) fn from_status(status: u32, tci: u16, tpid: u16) -> Option<VlanTag> {
        if status & TP_STATUS_VLAN_VALID == 0 {
            return None;
        }
        let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
            tpid
        } else {
            0x8100
        };
        Some(VlanTag { tpid, tci })
    }
}

/// Put a VLAN tag back into a frame. `buf` is the frame preceded by
/// [`VLAN_HLEN`] spare bytes: the MAC addresses move forward into them and
/// the tag goes after. Returns false (nothing changed) if `buf` is too
/// short to hold an Ethernet header after the spare bytes.
pub(crate) fn insert_vlan(buf: &mut [u8], tag: VlanTag) -> bool {
    if buf.len() < VLAN_HLEN + ETH_HLEN {
        return false;
    }
    buf.copy_within(VLAN_HLEN..VLAN_HLEN + 12, 0);
    buf[12..14].copy_from_slice(&tag.tpid.to_be_bytes());
    buf[14..16].copy_from_slice(&tag.tci.to_be_bytes());
    true
}

/// Receive one frame into `buf` without blocking. Returns the frame's full
/// length (more than `buf.len()` when it was cut short: `MSG_TRUNC`) and
/// the VLAN tag the kernel took out of it, if any (`PACKET_AUXDATA` must be
/// on).
pub(crate) fn recv_frame(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
) -> io::Result<(usize, Option<VlanTag>)> {
    // Room for one cmsg carrying tpacket_auxdata (CMSG_SPACE(20) = 40),
    // 8-byte aligned as cmsghdr requires.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast::<c_void>(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; zeroes are valid (no name, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast::<c_void>();
    msg.msg_controllen = size_of::<[u64; 8]>();
    // SAFETY: `msg` points to `iov` (covering the live `buf`) and to
    // `control`, all live locals of the lengths given; the kernel writes
    // only within them.
    let ret = unsafe {
        libc::recvmsg(
            fd.as_raw_fd(),
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
        )
    };
    let len = io_result(ret)?;
    let mut vlan = None;
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR / CMSG_NXTHDR stay
    // within `msg_control` and `msg_controllen` as the kernel set them.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: a non-null header returned by CMSG_FIRSTHDR/NXTHDR lies
        // inside `control`, aligned.
        let h = unsafe { &*cmsg };
        let data_len = h.cmsg_len as usize;
        if h.cmsg_level == libc::SOL_PACKET
            && h.cmsg_type == libc::PACKET_AUXDATA
            // SAFETY: CMSG_LEN only computes a length.
            && data_len >= unsafe { libc::CMSG_LEN(size_of::<libc::tpacket_auxdata>() as u32) } as usize
        {
            // SAFETY: the cmsg's data holds a whole tpacket_auxdata (length
            // checked above), inside `control`; read_unaligned needs no
            // alignment.
            let aux = unsafe {
                libc::CMSG_DATA(cmsg)
                    .cast::<libc::tpacket_auxdata>()
                    .read_unaligned()
            };
            vlan = VlanTag::from_status(aux.tp_status, aux.tp_vlan_tci, aux.tp_vlan_tpid);
        }
        // SAFETY: as CMSG_FIRSTHDR above.
        cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
    }
    Ok((len, vlan))
}

/// `read(2)` into `buf`.
pub(crate) fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, writable slice of the length passed.
    let ret = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast::<c_void>(), buf.len()) };
    io_result(ret)
}

/// `write(2)` of `buf`.
pub(crate) fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live slice of the length passed; only read.
    let ret = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast::<c_void>(), buf.len()) };
    io_result(ret)
}

/// Open `/dev/net/tun`, non-blocking.
pub(crate) fn open_tun() -> SysResult<OwnedFd> {
    // SAFETY: the path is a NUL-terminated literal.
    let fd = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    let fd = check(fd, "open(/dev/net/tun)")?;
    // SAFETY: `fd` was just returned by open and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `TUNSETIFF` with `flags`: create or attach to the tun/tap device `name`
/// (empty: the kernel picks one). Returns the device's name.
pub(crate) fn tun_set_iff(
    fd: BorrowedFd<'_>,
    name: &[libc::c_char; IFNAMSIZ],
    flags: c_int,
) -> SysResult<String> {
    let mut r = ifreq(name);
    r.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes the live ifreq `r`.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut r) };
    check(ret, "ioctl(TUNSETIFF)")?;
    let bytes: Vec<u8> = r
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A shared mapping of a packet socket's rings, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// Map `len` bytes of `fd` (a packet socket with rings set: the rx ring
    /// first, then the tx ring) read-write and shared.
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize) -> SysResult<Mapping> {
        // SAFETY: a fresh mapping chosen by the kernel (null hint) aliases
        // no Rust memory; the kernel checks `len` against the rings.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(SysError::last("mmap(packet rings)"));
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(SysError {
            call: "mmap(packet rings)",
            source: io::Error::other("null mapping"),
        })?;
        Ok(Mapping { ptr, len })
    }

    /// The start of the mapping (page aligned).
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned and were never
        // unmapped; the rings that pointed into it are dropped with their
        // port, before or with this mapping, and handed out no reference
        // that outlives the port.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast::<c_void>(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names() {
        assert!(ifname_bytes("veth0", false).is_ok());
        assert!(ifname_bytes("", true).is_ok());
        assert!(ifname_bytes("tap%d", true).is_ok());
        assert_eq!(ifname_bytes("", false), Err("empty"));
        assert!(ifname_bytes("0123456789abcde", false).is_ok());
        assert!(ifname_bytes("0123456789abcdef", false).is_err());
        for bad in ["a/b", "a b", "a:b", "a\0b", ".", ".."] {
            assert!(ifname_bytes(bad, false).is_err(), "{bad:?}");
        }
        let b = ifname_bytes("ab", false).unwrap();
        assert_eq!(
            (b[0], b[1], b[2]),
            (b'a' as libc::c_char, b'b' as libc::c_char, 0)
        );
    }

    #[test]
    fn vlan_insert() {
        let mut buf = [0u8; 4 + 20];
        buf[4..10].copy_from_slice(&[1; 6]);
        buf[10..16].copy_from_slice(&[2; 6]);
        buf[16..18].copy_from_slice(&[0x08, 0x00]);
        buf[18] = 0x45;
        let tag = VlanTag::from_status(TP_STATUS_VLAN_VALID, 0x2064, 0).unwrap();
        assert_eq!(tag.tpid, 0x8100);
        assert!(insert_vlan(&mut buf, tag));
        assert_eq!(&buf[..6], &[1; 6]);
        assert_eq!(&buf[6..12], &[2; 6]);
        assert_eq!(&buf[12..18], &[0x81, 0x00, 0x20, 0x64, 0x08, 0x00]);
        assert_eq!(buf[18], 0x45);
        assert!(!insert_vlan(&mut [0u8; 17], tag));
        assert_eq!(VlanTag::from_status(0, 5, 0x88a8), None);
        let qinq =
            VlanTag::from_status(TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID, 5, 0x88a8);
        assert_eq!(
            qinq,
            Some(VlanTag {
                tpid: 0x88a8,
                tci: 5
            })
        );
    }
}
