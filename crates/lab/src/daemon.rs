//! A `vrhost daemon` started as a child process for a lab or a bench, in
//! the lab's node if given, and stopped when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Why a daemon could not be started or did not stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Starting or waiting for the process failed.
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The OS error (in the message, not a source, as the context
        /// the binary used to add said it).
        error: std::io::Error,
    },
    /// It exited before it said it runs.
    #[error("vrhost daemon exited ({status}): {said}")]
    Exited {
        /// How it exited.
        status: ExitStatus,
        /// What it wrote meanwhile.
        said: String,
    },
    /// It exited with a failure when asked to stop.
    #[error("vrhost daemon: {0}")]
    Failed(ExitStatus),
    /// It did not stop within 10 s of SIGTERM and was killed.
    #[error("vrhost daemon did not stop within 10 s (killed)")]
    Killed,
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> DaemonError {
    move |error| DaemonError::Io { what, error }
}

/// A vrhost daemon running as a child process in the lab's node; stopped
/// (SIGTERM, then SIGKILL) on drop. The running executable must be the
/// `vrhost` binary: it is started again as `vrhost daemon`.
pub struct Daemon {
    child: Child,
}

impl Daemon {
    /// Start `vrhost daemon --config CFG [--netns NS] --api API` (`none`:
    /// no API) and wait until it reports that it runs.
    ///
    /// # Errors
    /// If it cannot start or exits first (its message is in the error).
    pub fn start(
        cfg: &Path,
        netns: Option<&str>,
        stats_secs: u64,
        api: &str,
    ) -> Result<Self, DaemonError> {
        let exe = std::env::current_exe().map_err(io("find the vrhost binary"))?;
        let mut cmd = std::process::Command::new(exe);
        cmd.args([
            "daemon",
            "--stats-secs",
            &stats_secs.to_string(),
            "--api",
            api,
        ]);
        if let Some(ns) = netns {
            cmd.args(["--netns", ns]);
        }
        let mut child = cmd
            .arg("--config")
            .arg(cfg)
            .stdin(Stdio::null())
            // Its counters and summary go with its log, not into the
            // caller's output (which may be JSON).
            .stdout(std::io::stderr())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io("start vrhost daemon"))?;
        let stderr = child.stderr.take().expect("piped");
        let mut lines = BufReader::new(stderr).lines();
        let mut said = Vec::new();
        for line in lines.by_ref() {
            let line = line.unwrap_or_default();
            eprintln!("{line}");
            if line.starts_with("vrhost daemon:") {
                // Keep echoing what it says later.
                std::thread::spawn(move || {
                    for l in lines.map_while(Result::ok) {
                        eprintln!("{l}");
                    }
                });
                return Ok(Self { child });
            }
            said.push(line);
        }
        let status = child.wait().map_err(io("wait for vrhost daemon"))?;
        Err(DaemonError::Exited {
            status,
            said: said.join(" | "),
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stop it and wait; its final summary goes to stdout.
    pub fn stop(mut self) -> Result<(), DaemonError> {
        self.signal_and_wait()
    }

    fn signal_and_wait(&mut self) -> Result<(), DaemonError> {
        if self
            .child
            .try_wait()
            .map_err(io("wait for vrhost daemon"))?
            .is_some()
        {
            return Ok(());
        }
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if let Some(st) = self
                .child
                .try_wait()
                .map_err(io("wait for vrhost daemon"))?
            {
                if !st.success() {
                    return Err(DaemonError::Failed(st));
                }
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Err(DaemonError::Killed)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.signal_and_wait();
    }
}
