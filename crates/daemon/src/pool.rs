//! The daemon's grower: it takes the steps of the VRs' pools the worker
//! asks for ([`vrhost_host::pool`]), populates each in its VR's memory
//! cgroup (a short-lived `vrhost pool-populate`), and tells the worker to
//! put the step's slots in use, or that it was refused.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::Duration;

use vrhost_host::pool::{GrowRequest, grow};
use vrhost_host::worker::{Mailbox, MailboxError};

/// How long the grower waits for the worker to take an answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// Serve `asks` until the worker drops its end, populating with `exe`
/// (the `vrhost` binary) and answering through `mailbox`.
///
/// # Errors
/// The thread could not be started.
pub fn spawn_grower(
    asks: Receiver<GrowRequest>,
    mailbox: Arc<Mailbox>,
    exe: PathBuf,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("vrhost-pool".into())
        .spawn(move || {
            for req in asks {
                let ok = match grow(&req, &exe) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(vr = %req.vr, to = req.step.to, "pool not grown: {e}");
                        false
                    }
                };
                let (id, to) = (req.vr_id, req.step.to);
                drop(req);
                let answer = mailbox.call(ANSWER_TIMEOUT, move |w| w.pool_grown(id, to, ok));
                if let Err(MailboxError::Closed) = answer {
                    return;
                }
            }
        })
}
