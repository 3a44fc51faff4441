//! The conventional user-mode VR of `vrhost bench memory --modes syscall`:
//! the same router code, but each packet comes in with one `recv` and goes
//! out with one `send` on a `SOCK_SEQPACKET` socket, the way user-mode Click
//! uses recvfrom/sendto. It exists only as the reference the shared-memory
//! design is measured against.

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};

use rustix::net::{RecvFlags, SendFlags};
use serde::{Deserialize, Serialize};
use vrhost_proto::{CTRL_FD_ENV, MAX_MSG};
use vrhost_router::{Router, RouterConfig};
use vrhost_sdk::{Packet, Verdict, Vr};

/// Headroom kept before each packet, as in a region slot.
const HEADROOM: usize = 128;

/// First message to a syscall-mode VR.
#[derive(Debug, Serialize, Deserialize)]
pub struct SyscallHello {
    /// The router's config.
    pub router: RouterConfig,
    /// CPU to pin to.
    pub cpu: Option<usize>,
}

/// Why the syscall-mode VR stopped before its host closed the socket.
#[derive(Debug, thiserror::Error)]
pub enum SyscallVrError {
    /// The control socket's descriptor is not in the environment.
    #[error("{CTRL_FD_ENV} not set, or not a number: this VR is started by `vrhost bench memory`")]
    NoSocket,
    /// A call on the socket failed.
    #[error("{call}: {source}")]
    Socket {
        /// `recv` or `send`.
        call: &'static str,
        /// The OS error.
        source: rustix::io::Errno,
    },
    /// The first message is not a [`SyscallHello`].
    #[error("bad hello: {0}")]
    Hello(#[from] serde_json::Error),
    /// The CPU asked for could not be pinned to.
    #[error("pin to CPU {cpu}: {source}")]
    Pin {
        /// The CPU.
        cpu: usize,
        /// The OS error.
        source: std::io::Error,
    },
    /// The router refused its config.
    #[error("router: {0}")]
    Router(String),
}

fn socket(call: &'static str) -> impl FnOnce(rustix::io::Errno) -> SyscallVrError {
    move |source| SyscallVrError::Socket { call, source }
}

/// Run a syscall-mode VR on the control socket from the environment until
/// the host closes it.
///
/// # Errors
/// See [`SyscallVrError`].
pub fn main() -> Result<(), SyscallVrError> {
    let raw: i32 = std::env::var(CTRL_FD_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or(SyscallVrError::NoSocket)?;
    // SAFETY: the parent placed our socket at this descriptor for us alone.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut buf = vec![0u8; MAX_MSG];
    let n = rustix::net::recv(&sock, &mut buf, RecvFlags::empty())
        .map_err(socket("recv"))?
        .0;
    let hello: SyscallHello = serde_json::from_slice(&buf[..n])?;
    if let Some(cpu) = hello.cpu {
        vrhost_host::cpu::pin_current_thread(cpu)
            .map_err(|source| SyscallVrError::Pin { cpu, source })?;
    }
    let mut router = Router::new(&hello.router).map_err(SyscallVrError::Router)?;
    rustix::net::send(&sock, b"ready", SendFlags::empty()).map_err(socket("send"))?;
    serve(sock.as_fd(), &mut router)
}

fn serve(sock: BorrowedFd<'_>, router: &mut Router) -> Result<(), SyscallVrError> {
    let mut buf = vec![0u8; 2048];
    loop {
        let n = match rustix::net::recv(sock, &mut buf[HEADROOM..], RecvFlags::empty()) {
            // The host closed its end (or reset it when it stopped us).
            Ok((0, _)) | Err(rustix::io::Errno::CONNRESET) => return Ok(()),
            Ok((n, _)) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(socket("recv")(e)),
        };
        let Some(mut pkt) = Packet::new(&mut buf, HEADROOM, n, 0) else {
            continue;
        };
        if let Verdict::Forward(_) = router.process(&mut pkt) {
            let (off, len) = (pkt.offset(), pkt.len());
            match rustix::net::send(sock, &buf[off..off + len], SendFlags::empty()) {
                Ok(_) => {}
                Err(rustix::io::Errno::PIPE | rustix::io::Errno::CONNRESET) => return Ok(()),
                Err(e) => return Err(socket("send")(e)),
            }
        }
    }
}
