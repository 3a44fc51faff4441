//! [`XmitCounters`]: a veth's `tx_queue_N_xdp_xmit` counters, read with
//! the ethtool ioctl (`SIOCETHTOOL`: `ETHTOOL_GDRVINFO`,
//! `ETHTOOL_GSTRINGS`, `ETHTOOL_GSTATS`), which is how `tx = "auto"`
//! tells whether the interface's driver took the xdp_frames it was sent.
//!
//! veth counts an xdp_frame in `tx_queue_N_xdp_xmit` when it puts it on
//! its peer's receive ring (`veth_xdp_xmit`); a peer without NAPI (neither
//! an XDP program nor GRO) takes none, and then the redirect fails before
//! veth counts anything: frames sent and none counted is the refusal.
//! Other drivers name such counters their own way, if at all: for them
//! [`XmitCounters::open`] finds none.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// `struct ethtool_drvinfo`'s size and its `n_stats`' offset.
const DRVINFO_LEN: usize = 196;
const DRVINFO_N_STATS: usize = 180;
/// More counters than any interface has: a bound on what is allocated.
const MAX_STATS: u32 = 1 << 16;

/// See the [module docs](self).
pub(super) struct XmitCounters {
    sock: OwnedFd,
    ifname: [u8; libc::IFNAMSIZ],
    n_stats: u32,
    /// Indexes of the `tx_queue_N_xdp_xmit` counters.
    xmit: Vec<usize>,
    /// `struct ethtool_stats` and its values, allocated once.
    buf: Vec<u64>,
}

impl XmitCounters {
    /// The counters of interface `ifname` in the calling thread's network
    /// namespace (they are read there afterwards, whatever thread reads
    /// them); `None` if it has no `tx_queue_N_xdp_xmit` counter.
    pub(super) fn open(ifname: &str) -> io::Result<Option<XmitCounters>> {
        let mut name = [0u8; libc::IFNAMSIZ];
        if ifname.len() >= name.len() {
            return Err(io::Error::from_raw_os_error(libc::ENODEV));
        }
        name[..ifname.len()].copy_from_slice(ifname.as_bytes());
        // SAFETY: plain socket(2); the descriptor is owned below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut c = XmitCounters {
            sock,
            ifname: name,
            n_stats: 0,
            xmit: Vec::new(),
            buf: Vec::new(),
        };
        let mut info = [0u8; DRVINFO_LEN];
        info[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
        c.ioctl(info.as_mut_ptr())?;
        let n = u32::from_ne_bytes(
            info[DRVINFO_N_STATS..DRVINFO_N_STATS + 4]
                .try_into()
                .unwrap_or_default(),
        );
        if n == 0 || n > MAX_STATS {
            return Ok(None);
        }
        let mut strings = vec![0u8; 12 + n as usize * ETH_GSTRING_LEN];
        strings[..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
        strings[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
        strings[8..12].copy_from_slice(&n.to_ne_bytes());
        c.ioctl(strings.as_mut_ptr())?;
        c.xmit = strings[12..]
            .chunks_exact(ETH_GSTRING_LEN)
            .enumerate()
            .filter(|(_, s)| is_xmit(s))
            .map(|(i, _)| i)
            .collect();
        if c.xmit.is_empty() {
            return Ok(None);
        }
        c.n_stats = n;
        c.buf = vec![0u64; 1 + n as usize];
        Ok(Some(c))
    }

    /// The sum of the `tx_queue_N_xdp_xmit` counters: one system call,
    /// no allocation.
    pub(super) fn read(&mut self) -> io::Result<u64> {
        let n = self.n_stats;
        // struct ethtool_stats: cmd and n_stats (u32 each), the values.
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
        head[4..].copy_from_slice(&n.to_ne_bytes());
        self.buf[0] = u64::from_ne_bytes(head);
        let p = self.buf.as_mut_ptr().cast::<u8>();
        self.ioctl(p)?;
        let head = self.buf[0].to_ne_bytes();
        if head[4..] != n.to_ne_bytes() {
            // The driver's counters changed (queues added): read no further.
            return Err(io::Error::from_raw_os_error(libc::EAGAIN));
        }
        Ok(self.xmit.iter().map(|&i| self.buf[1 + i]).sum())
    }

    /// `SIOCETHTOOL` on the interface with `data` as `ifr_data`.
    fn ioctl(&self, data: *mut u8) -> io::Result<()> {
        #[repr(C)]
        struct IfReq {
            name: [u8; libc::IFNAMSIZ],
            data: *mut u8,
            _pad: [u8; 16],
        }
        let mut ifr = IfReq {
            name: self.ifname,
            data,
            _pad: [0; 16],
        };
        // SAFETY: `ifr` is a `struct ifreq` (name, then the union whose
        // `ifr_data` points at `data`); every caller passes a buffer laid
        // out as the command in its first word wants, sized for what the
        // kernel writes back (`n_stats` names, `n_stats` values), which
        // the kernel checks against the counts in it.
        let r = unsafe {
            libc::ioctl(
                self.sock.as_raw_fd(),
                libc::SIOCETHTOOL as _,
                &mut ifr as *mut IfReq,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Whether an ethtool counter name (NUL padded) is `tx_queue_N_xdp_xmit`.
fn is_xmit(name: &[u8]) -> bool {
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let Ok(s) = std::str::from_utf8(&name[..end]) else {
        return false;
    };
    s.strip_prefix("tx_queue_")
        .and_then(|r| r.strip_suffix("_xdp_xmit"))
        .is_some_and(|q| !q.is_empty() && q.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::is_xmit;

    #[test]
    fn only_the_per_queue_xmit_counters_count() {
        let pad = |s: &str| {
            let mut b = [0u8; 32];
            b[..s.len()].copy_from_slice(s.as_bytes());
            b
        };
        assert!(is_xmit(&pad("tx_queue_0_xdp_xmit")));
        assert!(is_xmit(&pad("tx_queue_12_xdp_xmit")));
        for no in [
            "tx_queue_0_xdp_xmit_errors",
            "rx_queue_0_xdp_tx",
            "tx_queue__xdp_xmit",
            "tx_queue_x_xdp_xmit",
            "peer_ifindex",
            "",
        ] {
            assert!(!is_xmit(&pad(no)), "{no}");
        }
    }
}
