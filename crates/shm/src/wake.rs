//! Sleeping and waking across processes: the need-wakeup handshake.
//!
//! A side with nothing to do spins, then yields, then sleeps on an eventfd
//! (its [`Doorbell`]). Before sleeping it raises its flag in the shared
//! [`crate::InstanceBlock`] and looks at its rings once more; the other side
//! rings the doorbell only when it has just published work *and* sees the flag
//! raised. Both sides put a SeqCst fence between their store and their load
//! (the store-buffering pattern), so at least one of them sees the other's
//! store: either the sleeper sees the new work, or the producer sees the flag.
//! That makes the wakeup free (no syscall) while the peer is awake.

use crate::sync::{AtomicU32, Ordering, fence};

/// Sleeper: announce that we are about to sleep. After this, re-check the
/// rings; if there is work, call [`cancel_sleep`] instead of sleeping.
#[inline]
pub fn prepare_sleep(flag: &AtomicU32) {
    // Relaxed store + SeqCst fence: the fence orders this store before our
    // re-check of the rings (pairs with the fence in `needs_kick`).
    flag.store(1, Ordering::Relaxed);
    fence(Ordering::SeqCst);
}

/// Sleeper: we are awake again (or never slept).
#[inline]
pub fn cancel_sleep(flag: &AtomicU32) {
    // Relaxed: only saves the peer a needless kick; a stale 1 costs one
    // spurious eventfd write, never a lost wakeup.
    flag.store(0, Ordering::Relaxed);
}

/// Producer: after publishing work (a ring push with Release), should we kick
/// the peer?
#[inline]
pub fn needs_kick(flag: &AtomicU32) -> bool {
    // SeqCst fence: orders our ring publication before the flag load (pairs
    // with the fence in `prepare_sleep`).
    fence(Ordering::SeqCst);
    // Relaxed: ordered by the fence above.
    flag.load(Ordering::Relaxed) != 0
}

/// Producer: after publishing work, take the sleeper's flag: true if it was
/// raised, which the caller answers with one ring of the sleeper's doorbell.
///
/// Unlike [`needs_kick`] it lowers the flag, so the pushes that follow
/// before the sleeper is back on its core ring nothing more: the first ring
/// keeps its eventfd readable until the sleeper reads it, and a sleeper that
/// woke polls its rings before it raises the flag again. So a sleep costs
/// the producer one doorbell write, not one per push (with 10 VRs on a core,
/// a VR waits for its turn through several of the host's rounds).
#[inline]
pub fn take_kick(flag: &AtomicU32) -> bool {
    // SeqCst fence: orders our ring publication before the flag's read (pairs
    // with the fence in `prepare_sleep`), as in `needs_kick`.
    fence(Ordering::SeqCst);
    // Relaxed: ordered by the fence above. Only the sleeper raises the flag
    // and only after this side's work is published, so lowering it loses no
    // wakeup: the ring this call asks for is already owed to that sleep.
    flag.swap(0, Ordering::Relaxed) != 0
}

#[cfg(not(loom))]
pub use doorbell::Doorbell;

#[cfg(not(loom))]
mod doorbell {
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::time::Duration;

    /// An eventfd to sleep on and to ring.
    #[derive(Debug)]
    pub struct Doorbell {
        fd: OwnedFd,
    }

    impl Doorbell {
        /// A new doorbell (non-blocking, close-on-exec eventfd).
        ///
        /// # Errors
        /// The OS error of `eventfd`.
        pub fn new() -> std::io::Result<Self> {
            use rustix::event::EventfdFlags;
            let fd = rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
            Ok(Self { fd })
        }

        /// Wrap a received eventfd.
        pub fn from_fd(fd: OwnedFd) -> Self {
            Self { fd }
        }

        /// The eventfd, to pass to the peer or to poll with others.
        pub fn fd(&self) -> BorrowedFd<'_> {
            self.fd.as_fd()
        }

        /// Wake the sleeper. A failure (counter overflow) means it is already
        /// signalled, so it is ignored.
        pub fn ring(&self) {
            let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
        }

        /// Sleep until rung or until `timeout`; clears the doorbell. Returns true
        /// if it was rung.
        pub fn wait(&self, timeout: Duration) -> bool {
            use rustix::event::{PollFd, PollFlags, Timespec};
            let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
            let ts = Timespec {
                tv_sec: timeout.as_secs() as i64,
                tv_nsec: i64::from(timeout.subsec_nanos()),
            };
            let _ = rustix::event::poll(&mut fds, Some(&ts));
            self.clear()
        }

        /// Consume a pending ring without sleeping; returns true if there was one.
        pub fn clear(&self) -> bool {
            let mut buf = [0u8; 8];
            matches!(rustix::io::read(&self.fd, &mut buf), Ok(8))
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ring_then_wait_returns_at_once() {
        let d = Doorbell::new().unwrap();
        d.ring();
        d.ring();
        let t = std::time::Instant::now();
        assert!(d.wait(Duration::from_secs(5)));
        assert!(t.elapsed() < Duration::from_secs(4));
        assert!(!d.clear());
        assert!(!d.wait(Duration::from_millis(1)));
    }

    #[test]
    fn kick_only_when_flag_raised() {
        let f = AtomicU32::new(0);
        assert!(!needs_kick(&f));
        prepare_sleep(&f);
        assert!(needs_kick(&f));
        cancel_sleep(&f);
        assert!(!needs_kick(&f));
    }

    #[test]
    fn a_kick_is_taken_once_per_sleep() {
        let f = AtomicU32::new(0);
        assert!(!take_kick(&f), "awake: no kick");
        prepare_sleep(&f);
        assert!(take_kick(&f), "asleep: one kick");
        assert!(!take_kick(&f), "already rung for this sleep");
        assert!(!needs_kick(&f));
        prepare_sleep(&f);
        assert!(take_kick(&f), "the next sleep is rung again");
    }
}
