//! A run's claim on a lab's namespaces.
//!
//! A lab's namespaces have fixed names (`PREFIX-HOST`), so two runs of
//! the same bench at once would delete and rebuild each other's lab under
//! their feet. [`Lab::claim`] takes an exclusive `flock` on a file named
//! by the prefix; a second run waits for the first to end (and says so),
//! and a run that dies releases its claim with its file descriptor.

use std::fs::{File, OpenOptions};
use std::path::PathBuf;

use rustix::fs::{FlockOperation, flock};

use crate::topology::{Lab, LabError};

/// Held while a run owns a lab's namespaces; dropping it lets the next
/// run in.
#[derive(Debug)]
pub struct Claim {
    _file: File,
}

/// Where the claim of lab `prefix` is kept: `/run/lock` where it exists,
/// else the temporary directory.
fn claim_path(prefix: &str) -> PathBuf {
    let run_lock = std::path::Path::new("/run/lock");
    let dir = if run_lock.is_dir() {
        run_lock.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("vrhost-lab-{prefix}.lock"))
}

impl Lab {
    /// Claim this lab's namespaces for the calling run, waiting (with a
    /// message on stderr) while another run holds them.
    ///
    /// # Errors
    /// [`LabError::Claim`] when the claim file cannot be opened or locked.
    pub fn claim(&self) -> Result<Claim, LabError> {
        let path = claim_path(&self.prefix);
        let err = |err: std::io::Error| LabError::Claim {
            lab: self.prefix.clone(),
            path: path.display().to_string(),
            err,
        };
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(err)?;
        if flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
            eprintln!(
                "lab {}: another run is using its namespaces ({}); waiting for it to end",
                self.prefix,
                path.display()
            );
            flock(&file, FlockOperation::LockExclusive).map_err(|e| err(e.into()))?;
        }
        Ok(Claim { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_waits_for_the_first_to_be_dropped() {
        let prefix = format!("vrtc{}", std::process::id() % 100_000);
        let lab = Lab::parse(&format!("prefix = \"{prefix}\"\n"), "t.toml").expect("lab");
        let first = lab.claim().expect("first claim");
        let (tx, rx) = std::sync::mpsc::channel();
        let lab2 = lab.clone();
        let waiter = std::thread::spawn(move || {
            let c = lab2.claim().expect("second claim");
            tx.send(()).expect("send");
            drop(c);
        });
        // The second claim must not get in while the first is held.
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(300))
                .is_err(),
            "second claim taken while the first was held"
        );
        drop(first);
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .expect("second claim taken once the first was dropped");
        waiter.join().expect("join");
        let _ = std::fs::remove_file(claim_path(&prefix));
    }
}
