//! A run's claim on a lab's namespaces.
//!
//! A lab's namespaces have fixed names (`PREFIX-HOST`), so two runs of
//! the same bench at once would delete and rebuild each other's lab under
//! their feet. [`Lab::claim`] takes an exclusive `flock` on a file named
//! by the prefix; a second run waits for the first to end (and says so),
//! and a run that dies releases its claim with its file descriptor. A
//! claim is per process: a bench that runs another bench's experiment on
//! the same lab (`bench fastpath` runs `bench isolation`'s fairness run)
//! claims it again without waiting for itself.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{FlockOperation, flock};

use crate::topology::{Lab, LabError};

/// Held while a run owns a lab's namespaces; dropping the last claim of
/// a process lets the next run in.
#[derive(Debug)]
pub struct Claim {
    prefix: String,
    _file: Arc<File>,
}

/// The locked claim files of this process, by prefix, with how many
/// [`Claim`]s hold each.
static HELD: Mutex<BTreeMap<String, (Arc<File>, usize)>> = Mutex::new(BTreeMap::new());

impl Drop for Claim {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, n)) = held.get_mut(&self.prefix) {
            *n -= 1;
            if *n == 0 {
                // The last claim: closing the file (with this `Claim`'s
                // own reference) releases the lock.
                held.remove(&self.prefix);
            }
        }
    }
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
        // Held by this process already: one more holder, no wait. The
        // map stays locked while waiting below, so two threads of one
        // process do not both open and lock the file.
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((file, n)) = held.get_mut(&self.prefix) {
            *n += 1;
            return Ok(Claim {
                prefix: self.prefix.clone(),
                _file: Arc::clone(file),
            });
        }
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
        let file = Arc::new(file);
        held.insert(self.prefix.clone(), (Arc::clone(&file), 1));
        Ok(Claim {
            prefix: self.prefix.clone(),
            _file: file,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Whether another process could take the claim file now
    /// (util-linux `flock -n`).
    fn free_for_others(path: &std::path::Path) -> bool {
        Command::new("flock")
            .arg("-n")
            .arg(path)
            .arg("true")
            .status()
            .expect("flock(1)")
            .success()
    }

    #[test]
    fn a_claim_keeps_other_processes_out_and_is_reentrant_within_one() {
        let prefix = format!("vrtc{}", std::process::id() % 100_000);
        let lab = Lab::parse(&format!("prefix = \"{prefix}\"\n"), "t.toml").expect("lab");
        let path = claim_path(&prefix);
        let first = lab.claim().expect("first claim");
        assert!(!free_for_others(&path), "another process took a held claim");
        // The same process again (a bench inside a bench): no wait.
        let second = lab.claim().expect("second claim");
        drop(first);
        assert!(!free_for_others(&path), "released while a claim was held");
        drop(second);
        assert!(free_for_others(&path), "not released with the last claim");

        // Another process holds it (`flock PATH cat`, until its stdin
        // closes): the claim waits, and gets it only after the test has
        // let the other go.
        let mut other = Command::new("flock")
            .arg(&path)
            .arg("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("flock(1)");
        while free_for_others(&path) {
            assert!(
                other.try_wait().expect("wait").is_none(),
                "flock(1) ended early"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let (lab2, released2) = (lab.clone(), Arc::clone(&released));
        let waiter = std::thread::spawn(move || {
            let c = lab2.claim().expect("claim after the other");
            tx.send(released2.load(std::sync::atomic::Ordering::SeqCst))
                .expect("send");
            c
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200))
                .is_err(),
            "claimed while another process held it"
        );
        released.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(other.stdin.take());
        assert!(
            rx.recv().expect("the claim returned"),
            "claimed before the other process let go"
        );
        let third = waiter.join().expect("join");
        other.wait().expect("flock(1)");
        drop(third);
        let _ = std::fs::remove_file(path);
    }
}
