//! An instance's end of the control socket after the hello: read the
//! host's messages, hand [`HostMsg::Control`] to [`Vr::control`], answer
//! each with one [`VrReply::Control`], in order (see [`crate::proto`]).
//!
//! The socket is non-blocking; nothing here waits. A reply the socket has
//! no room for is kept and sent on the next look, and no further message
//! is read until it has gone: a host that does not read its replies stops
//! getting its messages served (it then sees its own sends block), it
//! never loses a reply nor stalls the data path.

use std::io::ErrorKind;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use vrhost_shm::fdpass::{FdPassError, recv_with_fds, send_with_fds};

use crate::proto::{HostMsg, MAX_MSG, VrReply};
use crate::sdk::Vr;

/// Loop rounds between two readings of the clock while busy: a round is at
/// least a poll of every rx ring, so the reading (about 10 ns, vDSO) is
/// lost in it.
pub(super) const LOOK_ROUNDS: u64 = 64;

/// Least time between two looks at the socket while busy. A look that
/// finds nothing is one `recvmsg` (about 1 us): at most 0.1% of a core.
const LOOK_MS: u64 = 1;

/// Work on messages in one look, after which the rest wait for the next
/// look, so that a host sending chunk after chunk of a full table does not
/// stop forwarding for the whole of it. At least one message is served
/// per look.
const BUDGET: Duration = Duration::from_millis(1);

/// What the host wants after a look at the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ctrl {
    /// Keep going.
    Open,
    /// Stop: the host said so, closed the socket, or the socket failed.
    Stop,
}

/// The buffers and timing of an instance's control socket.
#[derive(Debug)]
pub(super) struct CtrlChannel {
    /// Receive buffer ([`MAX_MSG`]), allocated once.
    buf: Vec<u8>,
    /// The encoded reply, while `waiting`.
    reply: Vec<u8>,
    /// Its id (to replace it with an error if it is too long to send).
    reply_id: u64,
    /// A reply is waiting for room in the socket.
    waiting: bool,
    /// Coarse clock at the last look, in milliseconds.
    last_look_ms: u64,
    /// Messages that could not be read (answered with an error).
    pub bad: u64,
}

impl CtrlChannel {
    pub fn new() -> Self {
        Self {
            // Zeroed pages: the kernel backs them only once used.
            buf: vec![0; MAX_MSG],
            reply: Vec::with_capacity(256),
            reply_id: 0,
            waiting: false,
            last_look_ms: 0,
            bad: 0,
        }
    }

    /// Whether a look is due while busy (at least [`LOOK_MS`] since the
    /// last): one reading of the coarse clock.
    #[inline]
    pub fn due(&self) -> bool {
        coarse_ms().wrapping_sub(self.last_look_ms) >= LOOK_MS
    }

    /// What to wait for on the socket while asleep: room for the waiting
    /// reply, else a message (not both: with a reply stuck, a pending
    /// message would wake the sleeper for nothing).
    pub fn poll_flags(&self) -> PollFlags {
        if self.waiting {
            PollFlags::OUT
        } else {
            PollFlags::IN
        }
    }

    /// Send the waiting reply, then read and answer messages until none is
    /// pending, a reply cannot be sent, or [`BUDGET`] is spent.
    pub fn serve<V: Vr + ?Sized>(&mut self, vr: &mut V, sock: BorrowedFd<'_>) -> Ctrl {
        self.last_look_ms = coarse_ms();
        let start = Instant::now();
        loop {
            if self.waiting {
                match self.send(sock) {
                    Sent::Yes => self.waiting = false,
                    Sent::Later => return Ctrl::Open,
                    Sent::Broken => return Ctrl::Stop,
                }
            }
            if start.elapsed() >= BUDGET {
                return Ctrl::Open;
            }
            let n = match recv_with_fds(sock, &mut self.buf) {
                // Descriptors sent with a message are not for us: dropping
                // them closes them.
                Ok((n, _fds)) => n,
                Err(FdPassError::Syscall { source, .. }) => match source.kind() {
                    ErrorKind::WouldBlock => return Ctrl::Open,
                    ErrorKind::Interrupted => continue,
                    _ => return Ctrl::Stop,
                },
                Err(FdPassError::Truncated) => {
                    self.bad += 1;
                    let e = format!(
                        "message longer than {MAX_MSG} bytes (or with too many descriptors)"
                    );
                    self.answer(0, Err(e));
                    continue;
                }
                Err(FdPassError::Closed | FdPassError::TooManyFds(_)) => return Ctrl::Stop,
            };
            match serde_json::from_slice::<HostMsg>(&self.buf[..n]) {
                Ok(HostMsg::Stop) => return Ctrl::Stop,
                Ok(HostMsg::Control { id, body }) => {
                    let result = vr.control(&body);
                    self.answer(id, result);
                }
                Err(e) => {
                    self.bad += 1;
                    let id = id_of(&self.buf[..n]);
                    self.answer(id, Err(format!("bad control message: {e}")));
                }
            }
        }
    }

    /// Encode the reply to `id`; it goes at the top of the serve loop.
    fn answer(&mut self, id: u64, result: Result<serde_json::Value, String>) {
        debug_assert!(!self.waiting);
        self.reply.clear();
        self.reply_id = id;
        let reply = VrReply::Control { id, result };
        if serde_json::to_writer(&mut self.reply, &reply).is_err() {
            // Not expected: a Value always encodes.
            self.reply.clear();
            let e = VrReply::Control {
                id,
                result: Err("the VR's reply could not be encoded".into()),
            };
            let _ = serde_json::to_writer(&mut self.reply, &e);
        }
        self.waiting = true;
    }

    fn send(&mut self, sock: BorrowedFd<'_>) -> Sent {
        loop {
            let Err(e) = send_with_fds(sock, &self.reply, &[]) else {
                return Sent::Yes;
            };
            let FdPassError::Syscall { source, .. } = e else {
                return Sent::Broken;
            };
            match source.raw_os_error() {
                Some(libc::EAGAIN) => return Sent::Later,
                Some(libc::EINTR) => {}
                Some(libc::EMSGSIZE) => {
                    let len = self.reply.len();
                    self.waiting = false;
                    self.answer(
                        self.reply_id,
                        Err(format!(
                            "the VR's reply ({len} bytes) is too long for the socket"
                        )),
                    );
                }
                // EPIPE, ECONNRESET: the host is gone.
                _ => return Sent::Broken,
            }
        }
    }
}

enum Sent {
    Yes,
    /// No room in the socket now.
    Later,
    Broken,
}

/// The id of an unreadable message, if it is JSON with `Control.id`.
fn id_of(msg: &[u8]) -> u64 {
    serde_json::from_slice::<serde_json::Value>(msg)
        .ok()
        .and_then(|v| v.get("Control")?.get("id")?.as_u64())
        .unwrap_or(0)
}

/// `CLOCK_MONOTONIC_COARSE` in milliseconds (vDSO, no system call; ticks
/// every 1 to 4 ms depending on the kernel's HZ).
fn coarse_ms() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    (ts.tv_sec as u64) * 1000 + (ts.tv_nsec as u64) / 1_000_000
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsFd, OwnedFd};

    use serde_json::json;
    use vrhost_shm::fdpass::seqpacket_pair;

    use super::*;
    use crate::{Packet, Verdict};

    /// Echoes the body; `{"fail": ...}` is refused, `{"big": n}` answers
    /// n bytes.
    struct Echo(u64);

    impl Vr for Echo {
        fn process(&mut self, _: &mut Packet<'_>) -> Verdict {
            Verdict::Forward(0)
        }

        fn control(&mut self, body: &serde_json::Value) -> Result<serde_json::Value, String> {
            self.0 += 1;
            if body.get("fail").is_some() {
                return Err("refused".into());
            }
            if let Some(n) = body.get("big").and_then(|v| v.as_u64()) {
                return Ok(json!("x".repeat(n as usize)));
            }
            Ok(body.clone())
        }
    }

    /// (host end, VR end, non-blocking).
    fn pair() -> (OwnedFd, OwnedFd) {
        let (host, vr) = seqpacket_pair().unwrap();
        rustix::io::ioctl_fionbio(&vr, true).unwrap();
        (host, vr)
    }

    fn send(host: &OwnedFd, msg: &[u8]) {
        send_with_fds(host.as_fd(), msg, &[]).unwrap();
    }

    fn control(id: u64, body: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&HostMsg::Control { id, body }).unwrap()
    }

    fn reply(host: &OwnedFd) -> (u64, Result<serde_json::Value, String>) {
        let mut buf = vec![0; MAX_MSG];
        let (n, _) = recv_with_fds(host.as_fd(), &mut buf).unwrap();
        match serde_json::from_slice(&buf[..n]).unwrap() {
            VrReply::Control { id, result } => (id, result),
            r => panic!("not a control reply: {r:?}"),
        }
    }

    fn nothing_pending(host: &OwnedFd) -> bool {
        use rustix::event::{PollFd, Timespec};
        let mut fds = [PollFd::new(host, PollFlags::IN)];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        rustix::event::poll(&mut fds, Some(&zero)).unwrap() == 0
    }

    #[test]
    fn answers_in_order_and_survives_bad_messages() {
        let (host, vr_end) = pair();
        let mut ch = CtrlChannel::new();
        let mut vr = Echo(0);
        assert_eq!(ch.serve(&mut vr, vr_end.as_fd()), Ctrl::Open, "nothing yet");
        send(&host, &control(1, json!({"a": 1})));
        send(&host, b"not json");
        send(&host, br#"{"Control":{"id":5,"bogus":1}}"#);
        send(&host, br#"{"Reboot":{"id":6}}"#);
        send(&host, &control(2, json!({"fail": true})));
        send(&host, &control(3, json!([1, 2])));
        assert_eq!(ch.serve(&mut vr, vr_end.as_fd()), Ctrl::Open);
        assert_eq!(reply(&host), (1, Ok(json!({"a": 1}))));
        let (id, r) = reply(&host);
        assert_eq!(id, 0);
        assert!(r.unwrap_err().starts_with("bad control message: "));
        let (id, r) = reply(&host);
        assert_eq!(id, 5, "the id of a readable but wrong message");
        assert!(r.unwrap_err().contains("body"));
        let (id, r) = reply(&host);
        assert_eq!(id, 0);
        assert!(r.unwrap_err().contains("unknown variant"));
        assert_eq!(reply(&host), (2, Err("refused".into())));
        assert_eq!(reply(&host), (3, Ok(json!([1, 2]))));
        assert!(nothing_pending(&host));
        assert_eq!((vr.0, ch.bad), (3, 3));
        // Stop ends the look; the messages after it are not read.
        send(&host, &control(4, json!(4)));
        send(&host, &serde_json::to_vec(&HostMsg::Stop).unwrap());
        send(&host, &control(5, json!(5)));
        assert_eq!(ch.serve(&mut vr, vr_end.as_fd()), Ctrl::Stop);
        assert_eq!(reply(&host), (4, Ok(json!(4))));
        assert_eq!(vr.0, 4);
    }

    #[test]
    fn closed_socket_stops_after_the_pending_messages() {
        let (host, vr_end) = pair();
        let mut ch = CtrlChannel::new();
        let mut vr = Echo(0);
        send(&host, &control(9, json!(null)));
        drop(host);
        // The reply cannot go (EPIPE): stop.
        assert_eq!(ch.serve(&mut vr, vr_end.as_fd()), Ctrl::Stop);
        assert_eq!(vr.0, 1);
        let (host, vr_end) = pair();
        drop(host);
        assert_eq!(ch.serve(&mut vr, vr_end.as_fd()), Ctrl::Stop);
    }

    #[test]
    fn too_long_messages_and_replies_are_errors() {
        let (host, vr_end) = pair();
        rustix::net::sockopt::set_socket_send_buffer_size(&host, 4 * MAX_MSG).unwrap();
        let mut ch = CtrlChannel::new();
        let mut vr = Echo(0);
        send(&host, &control(1, json!("y".repeat(MAX_MSG))));
        // The VR's reply would pass its send buffer (212,992 bytes by
        // default): an error goes in its place.
        send(&host, &control(2, json!({"big": 300_000})));
        send(&host, &control(3, json!({"big": 10})));
        // A serve may stop at its time budget (a loaded machine, a debug
        // build encoding 300 kB): serve until the last is answered.
        while vr.0 < 2 || ch.poll_flags() == PollFlags::OUT {
            assert_eq!(ch.serve(&mut vr, vr_end.as_fd()), Ctrl::Open);
        }
        let (id, r) = reply(&host);
        assert_eq!(id, 0);
        assert!(r.unwrap_err().contains("longer than"));
        let (id, r) = reply(&host);
        assert_eq!(id, 2);
        assert!(r.unwrap_err().contains("too long for the socket"));
        assert_eq!(reply(&host), (3, Ok(json!("x".repeat(10)))));
        assert_eq!(vr.0, 2);
    }

    #[test]
    fn a_host_that_reads_no_replies_gets_no_more_served() {
        let (host, vr_end) = pair();
        // The smallest send buffer: a few replies fill it.
        rustix::net::sockopt::set_socket_send_buffer_size(&vr_end, 1).unwrap();
        let mut ch = CtrlChannel::new();
        let mut vr = Echo(0);
        let n = 50;
        for id in 1..=n {
            send(&host, &control(id, json!({"big": 1000})));
        }
        assert_eq!(ch.serve(&mut vr, vr_end.as_fd()), Ctrl::Open);
        let served = vr.0;
        assert!(served < n, "stopped reading when a reply could not go");
        assert_eq!(ch.poll_flags(), PollFlags::OUT);
        // Another look without room serves nothing more.
        assert_eq!(ch.serve(&mut vr, vr_end.as_fd()), Ctrl::Open);
        assert_eq!(vr.0, served);
        // Reading the replies lets the rest through, every reply in order.
        let mut next = 1;
        while next <= n {
            while !nothing_pending(&host) {
                assert_eq!(reply(&host).0, next);
                next += 1;
            }
            ch.serve(&mut vr, vr_end.as_fd());
        }
        assert_eq!(vr.0, n);
        assert_eq!(ch.poll_flags(), PollFlags::IN);
    }
}
