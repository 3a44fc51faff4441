//! `SocketPort`: an interface through a plain AF_PACKET raw socket, one
//! system call per frame (LVRM's "raw socket" adapter).
//!
//! This is the conventional baseline the ring-based ports are measured
//! against. It is set up as [`AfPacketPort`](crate::af_packet::AfPacketPort)
//! is (bound to one interface of the calling thread's network namespace,
//! promiscuous, ignoring outgoing frames) but receives with one
//! `recvmsg(MSG_DONTWAIT)` per frame, stopping the burst at `EAGAIN`, and
//! sends with one `send(MSG_DONTWAIT)` per frame, through the qdisc unless
//! [`SocketConfig::qdisc_bypass`] says otherwise.
//!
//! Each burst slot has its own buffer, allocated when the port is opened,
//! so `rx_burst` does not allocate; frames borrow those buffers until the
//! next call. A frame longer than [`SocketConfig::max_frame_bytes`] (seen
//! whole thanks to `MSG_TRUNC`) or shorter than an Ethernet header is
//! dropped and counted, as are the kernel's drops (a full receive buffer),
//! read from `PACKET_STATISTICS` when [`Port::stats`] is called. A VLAN tag
//! the kernel stripped is put back from `PACKET_AUXDATA`.
//!
//! The module has no `unsafe`: its system calls go through `packet_sys`.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::packet_sys::{self as sys, ETH_HLEN, KernelDrops, VLAN_HLEN, ifname_bytes};
use crate::per_frame::{SendOutcome, hand_out, send_each};
use crate::{Driver, Port, PortError, PortStats};

/// Most frames one `rx_burst` may return (the slots are preallocated).
pub const MAX_BURST: usize = 1024;

/// A [`SocketPort`]'s options.
///
/// [`Default`]: bursts of up to 64 frames of up to 2000 bytes, a 4 MiB
/// receive buffer, through the qdisc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketConfig {
    /// Most frames one `rx_burst` returns (1..=[`MAX_BURST`]).
    pub burst: usize,
    /// Largest frame (without FCS) received or sent, 14..=65535.
    pub max_frame_bytes: usize,
    /// Socket receive buffer in bytes (`SO_RCVBUFFORCE`, else `SO_RCVBUF`
    /// capped by `net.core.rmem_max`); `None` keeps the system default
    /// (about 200 KiB: a few hundred frames).
    pub rcvbuf_bytes: Option<usize>,
    /// Hand frames to the driver directly (`PACKET_QDISC_BYPASS`).
    pub qdisc_bypass: bool,
}

impl Default for SocketConfig {
    fn default() -> Self {
        SocketConfig {
            burst: 64,
            max_frame_bytes: 2000,
            rcvbuf_bytes: Some(4 << 20),
            qdisc_bypass: false,
        }
    }
}

impl SocketConfig {
    /// Check the config.
    ///
    /// # Errors
    /// What is wrong, in words.
    pub fn validate(&self) -> Result<(), String> {
        sys::check_burst_config(self.burst, MAX_BURST, self.max_frame_bytes)
    }
}

/// The raw-socket port. See the [module docs](self).
#[derive(Debug)]
pub struct SocketPort {
    name: String,
    fd: OwnedFd,
    /// `burst` slots of `stride` bytes: 4 spare bytes (room to put a VLAN
    /// tag back) then up to `max_frame` bytes of frame.
    bufs: Box<[u8]>,
    stride: usize,
    /// Where each slot's frame starts and how long it is, for the last burst.
    spans: Box<[(usize, usize)]>,
    max_frame: usize,
    /// MTU + 14, read at open.
    mtu_frame: usize,
    stats: PortStats,
    kernel_drops: KernelDrops,
}

impl SocketPort {
    /// Open interface `ifname` (looked up in the calling thread's network
    /// namespace) with `cfg`.
    ///
    /// # Errors
    /// [`PortError`] naming the interface: invalid name or config, no
    /// such device, or the system call that failed.
    pub fn open(ifname: &str, cfg: SocketConfig) -> Result<SocketPort, PortError> {
        let cname = ifname_bytes(ifname, false)
            .map_err(|reason| PortError::invalid_name(ifname, reason))?;
        cfg.validate()
            .map_err(|reason| PortError::config(ifname, Driver::Socket, reason))?;
        let err = |e| PortError::on_device(ifname, e);
        let fd = sys::packet_socket().map_err(err)?;
        let ifindex = sys::prepare_packet_socket(fd.as_fd(), &cname).map_err(err)?;
        let mtu = sys::mtu(fd.as_fd(), &cname).map_err(err)?;
        sys::setsockopt_int(
            fd.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_AUXDATA,
            1,
            "setsockopt(PACKET_AUXDATA)",
        )
        .map_err(err)?;
        if cfg.qdisc_bypass {
            sys::setsockopt_int(
                fd.as_fd(),
                libc::SOL_PACKET,
                libc::PACKET_QDISC_BYPASS,
                1,
                "setsockopt(PACKET_QDISC_BYPASS)",
            )
            .map_err(err)?;
        }
        if let Some(bytes) = cfg.rcvbuf_bytes {
            sys::set_buffer(
                fd.as_fd(),
                libc::SO_RCVBUFFORCE,
                libc::SO_RCVBUF,
                bytes,
                "setsockopt(SO_RCVBUF)",
            )
            .map_err(err)?;
        }
        sys::bind_packet(fd.as_fd(), ifindex, libc::ETH_P_ALL as u16).map_err(err)?;
        let stride = VLAN_HLEN + cfg.max_frame_bytes;
        Ok(SocketPort {
            name: ifname.to_owned(),
            fd,
            bufs: vec![0u8; stride * cfg.burst].into_boxed_slice(),
            stride,
            spans: vec![(0, 0); cfg.burst].into_boxed_slice(),
            max_frame: cfg.max_frame_bytes,
            mtu_frame: mtu as usize + ETH_HLEN,
            stats: PortStats::default(),
            kernel_drops: KernelDrops::default(),
        })
    }

    /// Receive one frame into slot `i`: its span, or `None` when the socket
    /// is empty (or failed). Drops are counted and skipped.
    fn recv_into(&mut self, i: usize, tries: &mut usize) -> Option<(usize, usize)> {
        let slot = i * self.stride;
        while *tries > 0 {
            *tries -= 1;
            let buf = &mut self.bufs[slot + VLAN_HLEN..slot + self.stride];
            let (len, vlan) = sys::recv_frame(self.fd.as_fd(), buf).ok()?;
            let frame_len = len + if vlan.is_some() { VLAN_HLEN } else { 0 };
            if len < ETH_HLEN || frame_len > self.max_frame {
                self.stats.rx_dropped += 1;
                continue;
            }
            return Some(match vlan {
                None => (slot + VLAN_HLEN, len),
                Some(tag) => {
                    sys::insert_vlan(&mut self.bufs[slot..slot + VLAN_HLEN + len], tag);
                    (slot, frame_len)
                }
            });
        }
        None
    }
}

impl Port for SocketPort {
    fn name(&self) -> &str {
        &self.name
    }

    /// One `recvmsg` per frame until the socket is empty or `out` (or the
    /// slots) are full.
    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        let want = out.len().min(self.spans.len());
        // Dropped frames cost a call each too: bound the calls per burst so
        // a flood of bad frames cannot hold the worker here.
        let mut tries = 2 * want;
        let mut n = 0;
        while n < want {
            let Some(span) = self.recv_into(n, &mut tries) else {
                break;
            };
            self.spans[n] = span;
            n += 1;
        }
        let spans = self.spans[..n].iter().copied();
        hand_out(&self.bufs, spans, out, &mut self.stats)
    }

    /// One `send` per frame. Frames shorter than 14 bytes or longer than
    /// the interface or `max_frame_bytes` allow are refused without a
    /// call; after an error saying the socket or link is busy or gone, the
    /// rest of the burst is refused too.
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        let (fd, mtu_frame, max_frame) = (self.fd.as_fd(), self.mtu_frame, self.max_frame);
        let limit = |f: &[u8]| sys::tx_limit(f, mtu_frame, max_frame);
        send_each(frames, &mut self.stats, limit, |f| match sys::send(fd, f) {
            Ok(_) => SendOutcome::Sent,
            Err(e)
                if sys::is_transient(&e)
                    || matches!(e.raw_os_error(), Some(libc::ENETDOWN | libc::ENXIO)) =>
            {
                SendOutcome::Stop
            }
            Err(_) => SendOutcome::Dropped,
        })
    }

    /// The counters, with the kernel's drops (read from
    /// `PACKET_STATISTICS`, one system call) added to `rx_dropped`.
    fn stats(&self) -> PortStats {
        self.kernel_drops.add_to(self.fd.as_fd(), self.stats)
    }

    /// The socket: readable when a frame is queued.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;

    /// The contract every port keeps, against the kernel: frames sent by a
    /// peer over veth, then the port as a sink.
    #[test]
    fn conformance() {
        let (a, b) = conformance::veth_pair();
        let (mut port, mut peer) = (
            conformance::socket_on(&a, "c0"),
            conformance::socket_on(&b, "c1"),
        );
        conformance::check_kernel_port(&mut port, &mut peer);
    }

    #[test]
    fn config_validation() {
        let d = SocketConfig::default();
        assert!(d.validate().is_ok());
        assert!(SocketConfig { burst: 0, ..d }.validate().is_err());
        assert!(
            SocketConfig {
                burst: MAX_BURST + 1,
                ..d
            }
            .validate()
            .is_err()
        );
        assert!(
            SocketConfig {
                max_frame_bytes: 13,
                ..d
            }
            .validate()
            .is_err()
        );
        assert!(
            SocketConfig {
                max_frame_bytes: 65536,
                ..d
            }
            .validate()
            .is_err()
        );
    }
}
