//! Passing file descriptors with a message over a unix socket (SCM_RIGHTS).
//!
//! The host hands each VR process its region memfd and its eventfds this way,
//! on a `SOCK_SEQPACKET` socket so each message keeps its boundaries.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// Most descriptors in one message.
pub const MAX_FDS: usize = 8;

/// Sending or receiving a message failed.
#[derive(Debug, thiserror::Error)]
pub enum FdPassError {
    /// The system call failed.
    #[error("{call} failed: {source}")]
    Syscall {
        /// `sendmsg` or `recvmsg`.
        call: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// More descriptors than [`MAX_FDS`].
    #[error("{0} descriptors in one message (at most {MAX_FDS})")]
    TooManyFds(usize),
    /// The message or its descriptors did not fit the receive buffers.
    #[error("message truncated (buffer too small for the payload or the descriptors)")]
    Truncated,
    /// The peer closed the socket.
    #[error("peer closed the socket")]
    Closed,
}

/// Send `payload` with `fds` as one message.
///
/// # Errors
/// [`FdPassError`] naming the failed call.
pub fn send_with_fds(
    sock: BorrowedFd<'_>,
    payload: &[u8],
    fds: &[BorrowedFd<'_>],
) -> Result<(), FdPassError> {
    if fds.len() > MAX_FDS {
        return Err(FdPassError::TooManyFds(fds.len()));
    }
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(FdPassError::TooManyFds(fds.len()));
    }
    let sent = rustix::net::sendmsg(
        sock,
        &[IoSlice::new(payload)],
        &mut control,
        SendFlags::NOSIGNAL,
    )
    .map_err(|e| FdPassError::Syscall {
        call: "sendmsg",
        source: e.into(),
    })?;
    if sent != payload.len() {
        return Err(FdPassError::Truncated);
    }
    Ok(())
}

/// Receive one message into `buf`, returning its length and the descriptors
/// that came with it (close-on-exec).
///
/// # Errors
/// [`FdPassError::Closed`] at end of stream, [`FdPassError::Truncated`] if
/// the message or its descriptors were cut, or the failed call.
pub fn recv_with_fds(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
) -> Result<(usize, Vec<OwnedFd>), FdPassError> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = rustix::net::recvmsg(
        sock,
        &mut [IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| FdPassError::Syscall {
        call: "recvmsg",
        source: e.into(),
    })?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = m {
            fds.extend(rights);
        }
    }
    if msg
        .flags
        .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC)
    {
        return Err(FdPassError::Truncated);
    }
    if msg.bytes == 0 && fds.is_empty() {
        return Err(FdPassError::Closed);
    }
    Ok((msg.bytes, fds))
}

/// A connected `SOCK_SEQPACKET` unix socket pair (close-on-exec).
///
/// # Errors
/// The OS error of `socketpair`.
pub fn seqpacket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    Ok(rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

#[cfg(all(test, not(loom)))]
#[expect(
    unsafe_code,
    reason = "reads a slot of the received region, which only the slot protocol makes safe"
)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn passes_a_memfd() {
        let (a, b) = seqpacket_pair().unwrap();
        let region = crate::Region::create("fdpass", crate::RegionConfig::default()).unwrap();
        region.write_slot(0, 0, b"xyz");
        send_with_fds(a.as_fd(), b"hello", &[region.fd()]).unwrap();
        let mut buf = [0u8; 64];
        let (n, mut fds) = recv_with_fds(b.as_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(fds.len(), 1);
        let other = crate::Region::attach(fds.pop().unwrap()).unwrap();
        // SAFETY: nobody writes the slot concurrently in this test.
        assert_eq!(unsafe { other.slot_bytes_at(0, 0, 3) }.unwrap(), b"xyz");
        drop(a);
        assert!(matches!(
            recv_with_fds(b.as_fd(), &mut buf),
            Err(FdPassError::Closed)
        ));
    }

    #[test]
    fn truncation_is_reported() {
        let (a, b) = seqpacket_pair().unwrap();
        send_with_fds(a.as_fd(), &[1u8; 100], &[]).unwrap();
        let mut small = [0u8; 10];
        assert!(matches!(
            recv_with_fds(b.as_fd(), &mut small),
            Err(FdPassError::Truncated)
        ));
    }
}
