//! The control plane's requests to a running VR over its control socket
//! (route changes and the like), answered in order.

use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use vrhost_proto::{HostMsg, MAX_MSG, VrReply};
use vrhost_shm::fdpass::{FdPassError, recv_with_fds, send_with_fds};

/// The control plane's handle on one instance's control socket: requests
/// ([`HostMsg::Control`]) answered in order by [`VrReply::Control`].
#[derive(Debug)]
pub struct VrControl {
    fd: OwnedFd,
    next_id: u64,
    buf: Vec<u8>,
}

impl VrControl {
    /// A handle on `fd`, the host's end of an instance's control socket.
    pub(super) fn new(fd: OwnedFd) -> Self {
        Self {
            fd,
            next_id: 1,
            buf: Vec::new(),
        }
    }

    /// Send `body` and wait up to `timeout` for the VR's answer.
    ///
    /// # Errors
    /// The VR's own error message (`Ok(Err(..))` is not used: a refused
    /// request is `Err`), or why there was no answer (closed socket,
    /// timeout, a reply that is not JSON).
    pub fn request(
        &mut self,
        body: &serde_json::Value,
        timeout: Duration,
    ) -> Result<serde_json::Value, ControlError> {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let id = self.next_id;
        self.next_id += 1;
        let msg = serde_json::to_vec(&HostMsg::Control {
            id,
            body: body.clone(),
        })
        .expect("serializes");
        if msg.len() > MAX_MSG {
            return Err(ControlError::TooBig(msg.len()));
        }
        send_with_fds(self.fd.as_fd(), &msg, &[]).map_err(|e| ControlError::Io(e.to_string()))?;
        let deadline = std::time::Instant::now() + timeout;
        if self.buf.len() < MAX_MSG {
            self.buf.resize(MAX_MSG, 0);
        }
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(ControlError::Timeout(timeout));
            }
            let ts = Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: i64::from(left.subsec_nanos()),
            };
            let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
            if rustix::event::poll(&mut fds, Some(&ts))
                .map_err(|e| ControlError::Io(e.to_string()))?
                == 0
            {
                continue;
            }
            let n = match recv_with_fds(self.fd.as_fd(), &mut self.buf) {
                Ok((n, _)) => n,
                Err(FdPassError::Closed) => return Err(ControlError::Closed),
                Err(FdPassError::Syscall { source, .. })
                    if source.kind() == std::io::ErrorKind::WouldBlock =>
                {
                    continue;
                }
                Err(e) => return Err(ControlError::Io(e.to_string())),
            };
            match serde_json::from_slice::<VrReply>(&self.buf[..n]) {
                Ok(VrReply::Control { id: got, result }) if got == id => {
                    return result.map_err(ControlError::Refused);
                }
                // An answer to an earlier request that timed out.
                Ok(VrReply::Control { id: got, .. }) if got < id && got != 0 => continue,
                Ok(VrReply::Control { result: Err(m), .. }) => {
                    return Err(ControlError::Refused(m));
                }
                Ok(VrReply::Panicked { message }) => return Err(ControlError::Panicked(message)),
                Ok(other) => return Err(ControlError::Protocol(format!("unexpected {other:?}"))),
                Err(e) => return Err(ControlError::Protocol(e.to_string())),
            }
        }
    }
}

/// A control request got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The VR refused it; its message.
    #[error("{0}")]
    Refused(String),
    /// The request does not fit one message.
    #[error("request of {0} bytes is larger than a control message")]
    TooBig(usize),
    /// No answer in time.
    #[error("the VR did not answer within {0:?}")]
    Timeout(Duration),
    /// The VR closed its control socket (it exited).
    #[error("the VR's control socket is closed")]
    Closed,
    /// The VR panicked (and exits); where and what.
    #[error("the VR {0}")]
    Panicked(String),
    /// The answer was not a reply.
    #[error("bad answer from the VR: {0}")]
    Protocol(String),
    /// A system call failed.
    #[error("control socket: {0}")]
    Io(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VR's side: answers each request with `answer(id, body)`.
    fn vr(
        theirs: OwnedFd,
        answer: impl Fn(u64, serde_json::Value) -> Option<VrReply> + Send + 'static,
    ) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; MAX_MSG];
            while let Ok((n, _)) = recv_with_fds(theirs.as_fd(), &mut buf) {
                let Ok(HostMsg::Control { id, body }) = serde_json::from_slice(&buf[..n]) else {
                    continue;
                };
                if let Some(r) = answer(id, body) {
                    let msg = serde_json::to_vec(&r).unwrap();
                    if send_with_fds(theirs.as_fd(), &msg, &[]).is_err() {
                        return;
                    }
                }
            }
        })
    }

    #[test]
    fn requests_are_answered_in_order_and_refusals_say_why() {
        let (ours, theirs) = vrhost_shm::fdpass::seqpacket_pair().unwrap();
        let t = vr(theirs, |id, body| {
            let result = match body["op"].as_str() {
                Some("add") => Ok(serde_json::json!({ "added": id })),
                _ => Err("unknown op".into()),
            };
            Some(VrReply::Control { id, result })
        });
        let mut c = VrControl::new(ours);
        let long = Duration::from_secs(30);
        let add = serde_json::json!({ "op": "add" });
        assert_eq!(c.request(&add, long), Ok(serde_json::json!({ "added": 1 })));
        assert_eq!(c.request(&add, long), Ok(serde_json::json!({ "added": 2 })));
        assert_eq!(
            c.request(&serde_json::json!({ "op": "nope" }), long),
            Err(ControlError::Refused("unknown op".into()))
        );
        drop(c);
        t.join().unwrap();
    }

    #[test]
    fn a_late_answer_is_skipped_and_a_closed_socket_reported() {
        let (ours, theirs) = vrhost_shm::fdpass::seqpacket_pair().unwrap();
        // The first request is answered late, after the second was sent
        // (its caller gave up); the third makes the VR exit.
        let t = vr(theirs, |id, _| match id {
            1 => None,
            2 => Some(VrReply::Control {
                id: 1,
                result: Ok(serde_json::json!("late")),
            }),
            _ => panic!("the VR exits"),
        });
        let mut c = VrControl::new(ours);
        let q = serde_json::json!({});
        let short = Duration::from_millis(50);
        assert_eq!(c.request(&q, short), Err(ControlError::Timeout(short)));
        // The answer to 1 is not taken for 2's; 2's never comes.
        assert_eq!(c.request(&q, short), Err(ControlError::Timeout(short)));
        assert_eq!(
            c.request(&q, Duration::from_secs(30)),
            Err(ControlError::Closed)
        );
        assert!(t.join().is_err(), "the VR side ended with its panic");
    }

    #[test]
    fn a_request_larger_than_a_message_is_refused_unsent() {
        let (ours, _theirs) = vrhost_shm::fdpass::seqpacket_pair().unwrap();
        let mut c = VrControl::new(ours);
        let big = serde_json::json!("x".repeat(MAX_MSG));
        assert!(matches!(
            c.request(&big, Duration::from_secs(1)),
            Err(ControlError::TooBig(_))
        ));
    }
}
