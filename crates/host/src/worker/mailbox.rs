//! How other threads reach the running worker: a queue of jobs it runs
//! between two rounds, with one flag it looks at per round.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use vrhost_shm::Doorbell;

use super::Worker;

/// Work another thread hands to the worker, run between two rounds.
pub type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// How other threads reach a running worker: they post a [`Job`], which
/// the worker runs between two rounds (so it sees and changes the data path
/// with no lock on it), and ring its doorbell in case it sleeps. The worker
/// looks at one flag per round; the queue's lock is taken only when the
/// flag says there is work.
pub struct Mailbox {
    pending: AtomicBool,
    closed: AtomicBool,
    jobs: Mutex<Vec<Job>>,
    bell: Doorbell,
}

/// A job could not be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MailboxError {
    /// The worker has stopped.
    #[error("the data path worker has stopped")]
    Closed,
    /// The worker did not run it in time (it is stuck or very busy).
    #[error("the data path worker did not answer within {0:?}")]
    Timeout(Duration),
}

impl Mailbox {
    /// Run `f` on the worker and wait up to `timeout` for its result.
    ///
    /// # Errors
    /// [`MailboxError`] if the worker is gone or did not get to it in time
    /// (it may still run it later).
    pub fn call<R, F>(&self, timeout: Duration, f: F) -> Result<R, MailboxError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Worker) -> R + Send + 'static,
    {
        if self.closed.load(Ordering::Acquire) {
            return Err(MailboxError::Closed);
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Box::new(move |w| {
                let _ = tx.send(f(w));
            }));
        // Release: the job is in the queue before the worker sees the flag.
        self.pending.store(true, Ordering::Release);
        self.bell.ring();
        match rx.recv_timeout(timeout) {
            Ok(r) => Ok(r),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(MailboxError::Closed),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if self.closed.load(Ordering::Acquire) {
                    Err(MailboxError::Closed)
                } else {
                    Err(MailboxError::Timeout(timeout))
                }
            }
        }
    }

    /// A mailbox that rings `bell` (the worker's doorbell) when a job is
    /// posted.
    pub(super) fn new(bell: Doorbell) -> Self {
        Self {
            pending: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            jobs: Mutex::new(Vec::new()),
            bell,
        }
    }

    /// Whether a job may be waiting (a hint, read once per round; `take`
    /// synchronizes).
    #[inline]
    pub(super) fn pending(&self) -> bool {
        // Relaxed: a hint; `take` synchronizes.
        self.pending.load(Ordering::Relaxed)
    }

    /// Refuse jobs from now on (the worker is stopping); the caller then
    /// runs the ones that raced with the flag, so no caller waits for its
    /// timeout.
    pub(super) fn close(&self) {
        // Release: pairs with the Acquire loads in `call`.
        self.closed.store(true, Ordering::Release);
    }

    /// The jobs posted since the last call.
    pub(super) fn take(&self) -> Vec<Job> {
        // Acquire: pairs with the Release in `call`.
        if !self.pending.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(
            &mut *self
                .jobs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::classify::Classifier;

    fn worker() -> Worker {
        Worker::new(Vec::new(), Classifier::default(), Default::default()).unwrap()
    }

    #[test]
    fn a_job_runs_on_the_worker_between_rounds_and_returns_its_result() {
        let mut w = worker();
        let mb = w.mailbox();
        assert!(!mb.pending());
        let caller = std::thread::spawn(move || {
            mb.call(Duration::from_secs(30), |w: &mut Worker| w.vrs().len() + 41)
        });
        // The worker's loop: it looks at the flag, then runs what is queued.
        while !w.mailbox.pending() {
            std::thread::yield_now();
        }
        for job in w.mailbox.take() {
            job(&mut w);
        }
        assert_eq!(caller.join().unwrap(), Ok(41));
        assert!(!w.mailbox.pending());
        assert!(w.mailbox.take().is_empty());
    }

    #[test]
    fn a_worker_that_does_not_answer_times_out_and_a_closed_one_refuses() {
        let w = worker();
        let mb: Arc<Mailbox> = w.mailbox();
        let t = Duration::from_millis(1);
        assert_eq!(mb.call(t, |_| ()), Err(MailboxError::Timeout(t)));
        // The job stays queued; a closed worker still runs what raced.
        assert_eq!(mb.take().len(), 1);
        mb.close();
        assert_eq!(mb.call(t, |_| ()), Err(MailboxError::Closed));
        assert!(mb.take().is_empty(), "refused jobs are not queued");
    }

    #[test]
    fn a_worker_dropped_with_the_job_queued_is_closed() {
        let w = worker();
        let mb = w.mailbox();
        let caller = std::thread::spawn(move || mb.call(Duration::from_secs(30), |_| ()));
        while !w.mailbox.pending() {
            std::thread::yield_now();
        }
        // The job is dropped unrun: its reply channel closes.
        drop(w.mailbox.take());
        assert_eq!(caller.join().unwrap(), Err(MailboxError::Closed));
    }
}
