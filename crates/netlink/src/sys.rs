//! Every system call of the watch: entering the namespace, the
//! `NETLINK_ROUTE` socket, the stop event and waiting on both. Each error
//! names its call ([`WatchError::Sys`]).

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::LinkMessage;
use netlink_packet_route::route::RouteMessage;
use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};
use rustix::io::Errno;
use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

use crate::WatchError;

/// The network namespace to watch.
#[derive(Debug)]
pub enum NetnsRef {
    /// A namespace file: `/run/netns/NAME`, `/proc/PID/ns/net`.
    Path(PathBuf),
    /// An open namespace file.
    Fd(OwnedFd),
    /// The namespace of the thread that calls [`RouteWatch::start`](crate::RouteWatch::start).
    Current,
}

impl NetnsRef {
    /// `/run/netns/NAME`, a namespace made by `ip netns add NAME`.
    pub fn named(name: &str) -> Self {
        Self::Path(PathBuf::from("/run/netns").join(name))
    }

    /// A description for errors.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Path(p) => p.display().to_string(),
            Self::Fd(_) => "namespace fd".into(),
            Self::Current => "current namespace".into(),
        }
    }
}

fn sys(call: &'static str) -> impl FnOnce(Errno) -> WatchError {
    move |e| WatchError::Sys {
        call,
        source: e.into(),
    }
}

/// Move the calling thread into `ns` for good (the watch's thread never
/// leaves it).
pub(crate) fn enter(ns: &NetnsRef) -> Result<(), WatchError> {
    let file;
    let fd = match ns {
        NetnsRef::Current => return Ok(()),
        NetnsRef::Fd(fd) => fd.as_fd(),
        NetnsRef::Path(p) => {
            file = File::open(p).map_err(|source| WatchError::Netns {
                netns: p.display().to_string(),
                source,
            })?;
            file.as_fd()
        }
    };
    move_into_link_name_space(fd, Some(LinkNameSpaceType::Network)).map_err(sys("setns"))
}

/// `RTMGRP_LINK`: link added, changed, removed.
const GRP_LINK: u32 = 0x1;
/// `RTMGRP_IPV4_ROUTE`.
const GRP_IPV4_ROUTE: u32 = 0x40;
/// `RTMGRP_IPV6_ROUTE`.
const GRP_IPV6_ROUTE: u32 = 0x400;

/// A `NETLINK_ROUTE` socket in the namespace of the thread that opened
/// it, subscribed to link and route events.
pub(crate) struct NlSocket {
    fd: OwnedFd,
    seq: u32,
}

/// What one receive gave.
pub(crate) enum Recv {
    /// Bytes read into the buffer (one or more netlink messages).
    Data(usize),
    /// Nothing to read now.
    Empty,
    /// The kernel dropped messages (the receive buffer was full): the
    /// table must be dumped again.
    Overrun,
}

impl NlSocket {
    /// A socket with a receive buffer of `rcvbuf` bytes.
    pub(crate) fn open(rcvbuf: usize) -> Result<Self, WatchError> {
        let fd = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            None, // NETLINK_ROUTE
        )
        .map_err(sys("socket"))?;
        if rustix::net::sockopt::set_socket_recv_buffer_size_force(&fd, rcvbuf).is_err() {
            // Not root: the ordinary limit (rmem_max) applies.
            rustix::net::sockopt::set_socket_recv_buffer_size(&fd, rcvbuf)
                .map_err(sys("setsockopt(SO_RCVBUF)"))?;
        }
        let groups = GRP_LINK | GRP_IPV4_ROUTE | GRP_IPV6_ROUTE;
        rustix::net::bind(&fd, &SocketAddrNetlink::new(0, groups)).map_err(sys("bind"))?;
        Ok(Self { fd, seq: 0 })
    }

    /// Ask for a dump of every link (`link`) or every route of every
    /// family (`!link`). Returns its sequence number.
    pub(crate) fn request_dump(&mut self, link: bool) -> Result<u32, WatchError> {
        self.seq += 1;
        let mut h = NetlinkHeader::default();
        h.flags = NLM_F_REQUEST | NLM_F_DUMP;
        h.sequence_number = self.seq;
        let inner = if link {
            RouteNetlinkMessage::GetLink(LinkMessage::default())
        } else {
            RouteNetlinkMessage::GetRoute(RouteMessage::default())
        };
        let mut m = NetlinkMessage::new(h, NetlinkPayload::from(inner));
        m.finalize();
        let mut buf = vec![0; m.buffer_len()];
        m.serialize(&mut buf);
        let kernel = SocketAddrNetlink::new(0, 0);
        rustix::net::sendto(&self.fd, &buf, SendFlags::empty(), &kernel).map_err(sys("sendto"))?;
        Ok(self.seq)
    }

    /// Read what is there, without waiting. A message longer than `buf`
    /// (none of the kernel's are, for a 64 KiB buffer) counts as lost.
    pub(crate) fn recv(&self, buf: &mut [u8]) -> Result<Recv, WatchError> {
        match rustix::net::recv(&self.fd, buf, RecvFlags::DONTWAIT | RecvFlags::TRUNC) {
            Ok((n, full)) if full > n => Ok(Recv::Overrun),
            Ok((n, _)) => Ok(Recv::Data(n)),
            Err(Errno::AGAIN) => Ok(Recv::Empty),
            Err(Errno::NOBUFS) => Ok(Recv::Overrun),
            Err(Errno::INTR) => Ok(Recv::Empty),
            Err(e) => Err(sys("recv")(e)),
        }
    }
}

/// Wakes the watch's thread to stop it (an eventfd its `poll` watches),
/// and tells a batch callback that waits to give up.
pub(crate) struct StopEvent {
    fd: OwnedFd,
    fired: AtomicBool,
}

impl StopEvent {
    pub(crate) fn new() -> Result<Self, WatchError> {
        eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
            .map(|fd| Self {
                fd,
                fired: AtomicBool::new(false),
            })
            .map_err(sys("eventfd"))
    }

    /// Whether [`fire`](Self::fire) was called.
    pub(crate) fn fired(&self) -> bool {
        // Relaxed: a flag polled by the one thread that waits on it; no
        // other memory is published through it.
        self.fired.load(Ordering::Relaxed)
    }

    pub(crate) fn fire(&self) {
        // Relaxed: see `fired`.
        self.fired.store(true, Ordering::Relaxed);
        // An eventfd write fails only if the counter would overflow: then
        // it is already set.
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }
}

/// What [`wait`] saw.
pub(crate) struct Ready {
    pub(crate) socket: bool,
    pub(crate) stop: bool,
}

/// Wait until the socket has data, the stop event fires, or `timeout`
/// passes (`None`: no limit).
pub(crate) fn wait(
    s: &NlSocket,
    stop: &StopEvent,
    timeout: Option<Duration>,
) -> Result<Ready, WatchError> {
    let mut fds = [
        PollFd::new(&s.fd, PollFlags::IN),
        PollFd::new(&stop.fd, PollFlags::IN),
    ];
    let ts = timeout.map(|d| {
        Timespec::try_from(d).unwrap_or(Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        })
    });
    match poll(&mut fds, ts.as_ref()) {
        Ok(_) => {}
        Err(Errno::INTR) => {
            return Ok(Ready {
                socket: false,
                stop: false,
            });
        }
        Err(e) => return Err(sys("poll")(e)),
    }
    let ready = |f: &PollFd<'_>| !f.revents().is_empty();
    Ok(Ready {
        socket: ready(&fds[0]),
        stop: ready(&fds[1]),
    })
}
