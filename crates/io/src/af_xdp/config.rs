//! The AF_XDP port's configuration, modes and setup errors.

use std::fmt;
use std::io;

#[cfg(doc)]
use super::AfXdpPort;

/// How the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// Run by the driver (`XDP_FLAGS_DRV_MODE`): frames are redirected
    /// before an skb is built.
    Native,
    /// Run by the kernel stack after the skb is built
    /// (`XDP_FLAGS_SKB_MODE`): works on any interface, slower.
    Generic,
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        })
    }
}

/// How the AF_XDP sockets are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindMode {
    /// The driver DMAs straight into the UMEM (`XDP_ZEROCOPY`).
    ZeroCopy,
    /// The kernel copies frames between its buffers and the UMEM
    /// (`XDP_COPY`).
    Copy,
}

impl fmt::Display for BindMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy",
        })
    }
}

/// The modes a port obtained. See [`AfXdpPort::mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    /// How the XDP program runs.
    pub attach: AttachMode,
    /// How the sockets are bound (zero-copy only if every queue's is).
    pub bind: BindMode,
}

/// Which XDP program sends the interface's frames to the port's sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpProgram {
    /// The port loads `ebpf/xdp_redirect.c`, attaches it to the interface
    /// and puts its sockets in that program's XSKMAP; dropping the port
    /// detaches it.
    #[default]
    Own,
    /// Another program is (or will be) attached to the interface, such as
    /// the fast path's (`vrhost-fast`): the port loads and attaches
    /// nothing, binds its sockets in the mode [`AfXdpConfig::attach`] says
    /// that program runs in, and hands them over with
    /// [`AfXdpPort::sockets`] for that program's XSKMAP. Until they are in
    /// it, the port receives nothing.
    External,
}

/// An [`AfXdpPort`]'s configuration. [`Default`]: its own XDP program,
/// 4096 frames of 2048 bytes per queue, rings of 2048 descriptors, native
/// then generic attach, zero-copy then copy, need-wakeup on, every rx
/// queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfXdpConfig {
    /// Whose XDP program feeds the sockets.
    pub program: XdpProgram,
    /// UMEM frames per queue (at least 2): `min(frames / 2, ring_size)`
    /// for rx, the rest for tx.
    pub frames: u32,
    /// Bytes per frame: 2048 or 4096 (the kernel wants a power of two from
    /// 2048 up to the page size).
    pub frame_size: u32,
    /// Descriptors in each of the four rings: a power of two, 64..=16384.
    pub ring_size: u32,
    /// [`XdpProgram::Own`]: the attach mode; `None`: native, generic if
    /// that fails. [`XdpProgram::External`]: the mode the other program is
    /// attached in (required: it decides the bind mode, and zero-copy
    /// frames only flow through a native attach).
    pub attach: Option<AttachMode>,
    /// Bind mode; `None`: zero-copy if the driver has it, else copy (always
    /// copy with a generic attach).
    pub bind: Option<BindMode>,
    /// Bind with `XDP_USE_NEED_WAKEUP`: kick the kernel only when a ring's
    /// flag asks for it (without it, every flush with frames queued is a
    /// system call).
    pub need_wakeup: bool,
    /// Number of rx queues to serve; `None`: all of them, as ethtool
    /// reports (1 if it cannot tell).
    pub queues: Option<u32>,
    /// How frames leave: through the socket's tx ring (the default) or
    /// through the kernel's XDP test run with live frames (see
    /// [`TxPath::Xdp`]).
    pub tx: TxPath,
}

/// How an [`super::AfXdpPort`] transmits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TxPath {
    /// The socket's tx ring and a `sendto` kick: in copy mode the kernel
    /// builds one skb per frame.
    #[default]
    Socket,
    /// A batch of frames written into a BPF array and sent with one
    /// `BPF_PROG_RUN` (`BPF_F_TEST_XDP_LIVE_FRAMES`): each leaves as an
    /// xdp_frame through the driver's `ndo_xdp_xmit`, without an skb
    /// (`txlive.rs`). Needs a kernel with live frames (5.18+) and a driver
    /// that takes redirected frames; a veth's peer takes them only when
    /// it runs an XDP program or has GRO on. A port on a lent area (a VR's
    /// pool, [`super::AfXdpPort::open_on`]) copies each frame from where it
    /// lies into the array and gives it back at once.
    Xdp,
    /// [`TxPath::Xdp`] where the port can tell the driver takes the
    /// frames, else [`TxPath::Socket`]: on a driver whose counters show
    /// it (veth's `tx_queue_N_xdp_xmit`, read with the ethtool ioctl
    /// after every run until the driver has taken some, then every 1,024
    /// runs), the port sends xdp_frames, and falls back to the socket for
    /// good when a run's frames are not counted (a veth whose peer has
    /// neither an XDP program nor GRO): that run is sent again through
    /// the socket, the fallback logged once and counted
    /// ([`crate::PortStats::tx_fallbacks`]). Other drivers, and a port
    /// on a lent area: the socket.
    Auto,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        AfXdpConfig {
            program: XdpProgram::Own,
            frames: 4096,
            frame_size: 2048,
            ring_size: 2048,
            attach: None,
            bind: None,
            need_wakeup: true,
            queues: None,
            tx: TxPath::Socket,
        }
    }
}

impl AfXdpConfig {
    /// Whether the kernel can take this config: the reason if not.
    ///
    /// # Errors
    /// A size out of range, or a mode pair that cannot work.
    pub fn check(&self) -> Result<(), String> {
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(format!(
                "frame_size {} is not 2048 or 4096",
                self.frame_size
            ));
        }
        if !self.ring_size.is_power_of_two() || !(64..=16384).contains(&self.ring_size) {
            return Err(format!(
                "ring_size {} is not a power of two in 64..=16384",
                self.ring_size
            ));
        }
        if self.frames < 2 || u64::from(self.frames) * u64::from(self.frame_size) > 1 << 30 {
            return Err(format!(
                "frames {} must be at least 2 and at most 1 GiB of UMEM",
                self.frames
            ));
        }
        if self.queues == Some(0) {
            return Err("queues must be at least 1".into());
        }
        if self.program == XdpProgram::External && self.attach.is_none() {
            return Err(
                "program External needs attach: the mode the external program is attached in"
                    .into(),
            );
        }
        if self.attach == Some(AttachMode::Generic) && self.bind == Some(BindMode::ZeroCopy) {
            return Err("zero-copy needs a native attach".into());
        }
        Ok(())
    }

    pub(super) fn rx_frames(&self) -> u32 {
        (self.frames / 2).min(self.ring_size)
    }
}

/// Why an [`AfXdpPort`] could not be opened. Each names the interface and
/// the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum AfXdpError {
    /// The configuration is invalid.
    #[error("AF_XDP port {ifname}: bad config: {why}")]
    Config {
        /// The interface.
        ifname: String,
        /// What is wrong.
        why: String,
    },
    /// No interface of that name in the calling thread's namespace.
    #[error("AF_XDP port {ifname}: no such interface")]
    NoSuchInterface {
        /// The interface.
        ifname: String,
    },
    /// The rx queue count could not be read.
    #[error("AF_XDP port {ifname}: cannot read the rx queue count: {source}")]
    QueueCount {
        /// The interface.
        ifname: String,
        /// Why.
        source: io::Error,
    },
    /// The XDP program failed to load.
    #[error("AF_XDP port {ifname}: XDP program failed to load: {source}")]
    Load {
        /// The interface.
        ifname: String,
        /// Why (aya's error, with the kernel's).
        source: Box<aya::EbpfError>,
    },
    /// The XDP program failed to attach in the mode asked for.
    #[error("AF_XDP port {ifname}: XDP program failed to attach in {mode} mode: {source}")]
    Attach {
        /// The interface.
        ifname: String,
        /// The mode tried.
        mode: AttachMode,
        /// The OS error of `bpf(BPF_LINK_CREATE)` (`EBUSY`: another
        /// program is attached; `EOPNOTSUPP`: no native XDP).
        source: io::Error,
    },
    /// The XDP program failed to attach in native mode and then in generic
    /// mode.
    #[error(
        "AF_XDP port {ifname}: XDP program failed to attach in native mode ({native}) and in generic mode: {source}"
    )]
    AttachEither {
        /// The interface.
        ifname: String,
        /// Why native mode failed.
        native: io::Error,
        /// Why generic mode failed.
        source: io::Error,
    },
    /// Setting up a queue's socket, UMEM or rings failed.
    #[error("AF_XDP port {ifname} queue {queue}: {step}: {source}")]
    Socket {
        /// The interface.
        ifname: String,
        /// The rx queue.
        queue: u32,
        /// The step (`socket(AF_XDP)`, `setsockopt(XDP_UMEM_REG)`, ...).
        step: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// Binding a queue's socket failed.
    #[error("AF_XDP port {ifname} queue {queue}: bind in {mode} mode: {source}")]
    Bind {
        /// The interface.
        ifname: String,
        /// The rx queue.
        queue: u32,
        /// `zero-copy`, `copy` or `auto` (zero-copy, else copy).
        mode: &'static str,
        /// The OS error (its errno).
        source: io::Error,
    },
    /// Putting a socket in the XSKMAP, or finding the program's maps,
    /// failed.
    #[error("AF_XDP port {ifname}: XDP program maps: {source}")]
    Map {
        /// The interface.
        ifname: String,
        /// Why.
        source: Box<aya::maps::MapError>,
    },
}
