//! Starting VR processes and watching them.
//!
//! Each instance is a child process that gets one end of a `SOCK_SEQPACKET`
//! pair as descriptor 3, then the [`Hello`] with its region and doorbells
//! over it (SCM_RIGHTS). The host holds a pidfd per child, so it learns of an
//! exit at once (poll) without reaping races. The child dies with the host
//! (`PR_SET_PDEATHSIG`), which is why every child is forked from one thread
//! that lives as long as the host (see `fork::fork_from_lasting_thread`).
//! [`VrCommand::confine`] walls it in (own network namespace, cgroup, user,
//! no new privileges, seccomp, descriptors 0-3 only; see
//! [`crate::confine`]); its cgroups go when it is stopped.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vrhost_proto::{Hello, HostMsg, MAX_MSG, PollConfig, VrReply};
use vrhost_shm::fdpass::{FdPassError, recv_with_fds, send_with_fds};
use vrhost_shm::{Doorbell, LAYOUT_VERSION, Region};

use crate::confine::{Cgroups, Confine, ConfineError, Prepared};

#[expect(unsafe_code, reason = "sched_setattr and sched_getscheduler: raw libc")]
mod class;
mod control;
#[expect(
    unsafe_code,
    reason = "the VR child's setup between fork and exec (pre_exec): raw libc"
)]
mod fork;

pub use class::IDLE_START_LIMIT;
use class::set_class;
pub use control::{ControlError, VrControl};
pub(crate) use fork::above_fixed;
use fork::spawn_inner;
pub use fork::spawn_with_ctrl;

/// How to start one instance of a VR.
#[derive(Debug, Clone)]
pub struct VrCommand {
    /// Program to run.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// CPU to pin it to.
    pub cpu: Option<usize>,
    /// Idle back-off.
    pub poll: PollConfig,
    /// The VR's own config, passed in the hello.
    pub config: serde_json::Value,
    /// How long to wait for it to report ready.
    pub ready_timeout: Duration,
    /// How long it starts in the idle class, on the time VRs that forward
    /// leave its core, before it takes a normal share (at most
    /// `ready_timeout`). Zero: it starts in the normal class at nice 19,
    /// which is fastest but takes its cgroup's share of the core from the
    /// VRs beside it. Changes an operator makes use `[host] start_idle_ms`
    /// (default [`IDLE_START_LIMIT`]); restarts of a VR that went down use
    /// zero (its tenant waits).
    pub idle_start: Duration,
    /// How its process is confined (`Confine::default()`: not at all).
    pub confine: Confine,
    /// Set while the control plane has a VR that went down to start again:
    /// an idle start then takes a normal share at once, so that the
    /// restart queued behind it does not wait for it.
    pub hurry: Hurry,
}

/// A flag the supervisor raises while an urgent start (a VR that went
/// down) waits for the control plane, which may be busy starting a VR in
/// the idle class for an operator's change (see [`VrCommand::idle_start`]).
#[derive(Debug, Clone, Default)]
pub struct Hurry(Arc<AtomicBool>);

impl Hurry {
    /// Raise or lower it.
    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed);
    }

    /// Whether it is raised.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// How often an idle start looks at [`VrCommand::hurry`].
const HURRY_POLL: Duration = Duration::from_millis(10);

/// Starting a VR failed.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// A system call or fork/exec failed.
    #[error("VR {vr}: {what}: {source}")]
    Os {
        /// VR name.
        vr: String,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// Confining it failed (in the host, or in the child before exec).
    #[error("VR {vr}: confinement: {source}")]
    Confine {
        /// VR name.
        vr: String,
        /// What failed.
        source: ConfineError,
    },
    /// The control socket failed.
    #[error("VR {vr}: control socket: {source}")]
    Ctrl {
        /// VR name.
        vr: String,
        /// What failed.
        source: FdPassError,
    },
    /// The VR reported an error, or exited, before it was ready.
    #[error("VR {vr} failed to start: {message}")]
    Refused {
        /// VR name.
        vr: String,
        /// Its message.
        message: String,
    },
}

/// Why no reply came while a VR started.
#[derive(Debug)]
enum WaitError {
    /// None within the time given.
    Timeout,
    /// It exited, or the socket or its message failed.
    Other(String),
}

impl WaitError {
    /// The message for a start that waited `timeout` in all.
    fn describe(self, timeout: Duration) -> String {
        match self {
            Self::Timeout => format!("no answer within {timeout:?}"),
            Self::Other(m) => m,
        }
    }
}

/// One running VR instance process.
#[derive(Debug)]
pub struct VrProcess {
    child: Child,
    pidfd: OwnedFd,
    ctrl: OwnedFd,
    /// Its cgroups, removed once it is reaped.
    cgroups: Option<Cgroups>,
    /// Set once the host has handled its exit.
    pub reaped: bool,
    /// Which instance of its VR it is.
    instance: u16,
    /// Pinned to a CPU ([`VrCommand::cpu`]): the host never moves it.
    pinned: bool,
    /// Its command's [`VrCommand::hurry`]: raised, [`VrProcess::stop`]
    /// kills it at once rather than wait for it to exit in the idle class.
    hurry: Hurry,
}

impl VrProcess {
    /// Start instance `instance` of VR `vr` on `region` and wait until it
    /// reports ready. Returns the process and the doorbell the host rings to
    /// wake it.
    ///
    /// # Errors
    /// [`SpawnError`] saying what failed, with the VR's own message if it
    /// refused its config.
    pub fn start(
        vr: &str,
        instance: u16,
        region: &Region,
        host_bell: &Doorbell,
        cmd: &VrCommand,
    ) -> Result<(Self, Doorbell), SpawnError> {
        let vr_bell = Doorbell::new().map_err(|e| SpawnError::Os {
            vr: vr.to_string(),
            what: "eventfd",
            source: e,
        })?;
        let mut proc_ = Self::fork(vr, instance, cmd)?;
        let hello = Hello {
            layout_version: LAYOUT_VERSION,
            vr: vr.to_string(),
            instance,
            cpu: cmd.cpu,
            poll: cmd.poll,
            config: cmd.config.clone(),
        };
        let msg = serde_json::to_vec(&hello).expect("hello serializes");
        let sent = send_with_fds(
            proc_.ctrl.as_fd(),
            &msg,
            &[region.fd(), vr_bell.fd(), host_bell.fd()],
        );
        let refused = |message| SpawnError::Refused {
            vr: vr.to_string(),
            message,
        };
        match sent {
            Ok(_) => {}
            // It exited before its hello could be sent: say how.
            Err(FdPassError::Syscall { source, .. })
                if source.kind() == std::io::ErrorKind::BrokenPipe =>
            {
                return Err(refused(proc_.exited_before_ready()));
            }
            Err(source) => {
                return Err(SpawnError::Ctrl {
                    vr: vr.to_string(),
                    source,
                });
            }
        }
        let slice = Duration::from_micros(cmd.poll.slice_us.into());
        let message = match proc_.wait_ready(cmd, slice) {
            Ok(VrReply::Ready { .. }) => {
                // The normal class now that it forwards, with a short time
                // slice.
                proc_.set_idle(false, slice);
                return Ok((proc_, vr_bell));
            }
            Ok(VrReply::Error { message } | VrReply::Panicked { message }) => message,
            Ok(VrReply::Control { .. }) => "answered a control message before it was ready".into(),
            Err(message) => message,
        };
        proc_.stop();
        Err(refused(message))
    }

    /// Fork and exec instance `instance` of VR `vr`, confined as `cmd`
    /// says, in the idle class if it starts idle.
    fn fork(vr: &str, instance: u16, cmd: &VrCommand) -> Result<Self, SpawnError> {
        let os = |what, source| SpawnError::Os {
            vr: vr.to_string(),
            what,
            source,
        };
        let confine_err = |source| SpawnError::Confine {
            vr: vr.to_string(),
            source,
        };
        let idle = !cmd.idle_start.is_zero();
        let mut prep = if cmd.confine.is_off() {
            None
        } else {
            Some(
                Prepared::new(&cmd.confine, vr, instance, cmd.cpu, &cmd.program, idle)
                    .map_err(confine_err)?,
            )
        };
        let spawned = spawn_inner(&cmd.program, &cmd.args, prep.as_mut(), idle);
        let failed = prep.as_mut().and_then(|p| p.finish(&spawned));
        let (child, ours) = match (spawned, failed) {
            (Ok(v), _) => v,
            (Err(_), Some(e)) => return Err(confine_err(e)),
            (Err(e), None) => return Err(os("spawn", e)),
        };
        let cgroups = prep.as_mut().and_then(Prepared::take_cgroups);
        let pid = rustix::process::Pid::from_child(&child);
        let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
            .map_err(|e| os("pidfd_open", e.into()))?;
        Ok(Self {
            child,
            pidfd,
            ctrl: ours,
            cgroups,
            reaped: false,
            instance,
            pinned: cmd.cpu.is_some(),
            hurry: cmd.hurry.clone(),
        })
    }

    /// Wait for its answer to the hello: an idle start waits up to
    /// `idle_start` in the idle class (less if the control plane hurries
    /// it), then the rest of `ready_timeout` in the normal class.
    fn wait_ready(&mut self, cmd: &VrCommand, slice: Duration) -> Result<VrReply, String> {
        let idle = !cmd.idle_start.is_zero();
        let t0 = Instant::now();
        let mut reply = Err(WaitError::Timeout);
        if idle {
            let first = cmd.ready_timeout.min(cmd.idle_start);
            loop {
                let left = first.saturating_sub(t0.elapsed());
                if left.is_zero() || cmd.hurry.is_set() {
                    break;
                }
                reply = self.wait_reply(left.min(HURRY_POLL));
                if !matches!(reply, Err(WaitError::Timeout)) {
                    break;
                }
            }
        }
        if matches!(reply, Err(WaitError::Timeout)) {
            if idle {
                self.set_idle(false, slice);
            }
            reply = self.wait_reply(cmd.ready_timeout.saturating_sub(t0.elapsed()));
        }
        reply.map_err(|e| e.describe(cmd.ready_timeout))
    }

    /// Put it (its threads, and its cgroup if it has one with `cpu.idle`)
    /// in the idle class, or in the normal class with time slice `slice`
    /// (zero: the kernel's default). Both levels matter: a VR's own cgroup
    /// competes with the other VRs' cgroups as one task does, so a thread's
    /// class alone would not keep it back. Failure (an old kernel) only
    /// costs that protection.
    fn set_idle(&self, idle: bool, slice: Duration) {
        if let Some(c) = &self.cgroups {
            c.set_idle(idle);
        }
        let _ = set_class(self.pid(), idle, Some(slice).filter(|d| !d.is_zero()));
    }

    fn wait_reply(&mut self, timeout: Duration) -> Result<VrReply, WaitError> {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let ts = Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&self.ctrl, PollFlags::IN)];
        let n = rustix::event::poll(&mut fds, Some(&ts))
            .map_err(|e| WaitError::Other(format!("poll: {e}")))?;
        if n == 0 {
            return Err(WaitError::Timeout);
        }
        let mut buf = vec![0u8; MAX_MSG];
        match recv_with_fds(self.ctrl.as_fd(), &mut buf) {
            Ok((n, _)) => serde_json::from_slice(&buf[..n])
                .map_err(|e| WaitError::Other(format!("bad reply: {e}"))),
            // A VR that exits without reading its hello resets the socket.
            Err(FdPassError::Closed) => Err(WaitError::Other(self.exited_before_ready())),
            Err(FdPassError::Syscall { source, .. })
                if source.kind() == std::io::ErrorKind::ConnectionReset =>
            {
                Err(WaitError::Other(self.exited_before_ready()))
            }
            Err(e) => Err(WaitError::Other(e.to_string())),
        }
    }

    /// Why a start got no reply: the process exited (its status).
    fn exited_before_ready(&mut self) -> String {
        let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
        format!("exited before it was ready ({status})")
    }

    /// A second handle on its control socket, for the control plane to
    /// send [`HostMsg::Control`] messages while the worker owns the process.
    ///
    /// # Errors
    /// The OS error of `dup`.
    pub fn control(&self) -> std::io::Result<VrControl> {
        Ok(VrControl::new(self.ctrl.try_clone()?))
    }

    /// Its cgroup directories (none if it is not confined to a cgroup of
    /// its own).
    pub fn cgroups(&self) -> &[PathBuf] {
        self.cgroups.as_ref().map_or(&[], |c| c.dirs())
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Which instance of its VR it is (its rings in the region).
    pub fn instance(&self) -> u16 {
        self.instance
    }

    /// Whether it was pinned to a CPU when started.
    pub fn pinned(&self) -> bool {
        self.pinned
    }

    /// The pidfd (readable once the process exited), to poll with others.
    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }

    /// True if the process has exited (non-blocking).
    pub fn has_exited(&self) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
    }

    /// Ask it to stop and return at once (the host worker retiring an
    /// instance: it watches for the exit and reaps it with
    /// [`VrProcess::stop`], which then does not wait).
    pub fn ask_stop(&self) {
        // Its exit (unmapping everything) runs in the idle class, beside
        // VRs that forward.
        self.set_idle(true, Duration::ZERO);
        let msg = serde_json::to_vec(&HostMsg::Stop).expect("serializes");
        let _ = send_with_fds(self.ctrl.as_fd(), &msg, &[]);
    }

    /// Ask it to stop, wait up to a second (less once its command's
    /// [`Hurry`] is raised), then kill it; reaps it.
    pub fn stop(&mut self) {
        if !self.has_exited() {
            self.ask_stop();
            for _ in 0..100 {
                if self.has_exited() || self.hurry.is_set() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            if !self.has_exited() {
                // A killed process needs its core to exit too.
                self.set_idle(false, Duration::ZERO);
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
        if let Some(c) = &mut self.cgroups {
            c.remove();
        }
    }

    /// How it ended, once it has exited ("running" before), with what it
    /// said about its panic if it panicked ([`VrReply::Panicked`]).
    pub fn exit_status(&mut self) -> String {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => s.to_string(),
            Ok(None) => return "running".into(),
            Err(e) => format!("unknown: {e}"),
        };
        match self.last_words() {
            Some(m) => format!("{status}; {m}"),
            None => status,
        }
    }

    /// A [`VrReply::Panicked`] left on the control socket by a process that
    /// has exited (other messages left there are dropped: nobody waits for
    /// them any more).
    fn last_words(&mut self) -> Option<String> {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let mut buf = vec![0u8; MAX_MSG];
        // Bounded: a dead process's socket holds what it sent, no more
        // than its buffer; a few messages are all a VR leaves in practice.
        for _ in 0..64 {
            let mut fds = [PollFd::new(&self.ctrl, PollFlags::IN)];
            if !matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(n) if n > 0) {
                return None;
            }
            let Ok((n, _)) = recv_with_fds(self.ctrl.as_fd(), &mut buf) else {
                return None;
            };
            if let Ok(VrReply::Panicked { message }) = serde_json::from_slice(&buf[..n]) {
                return Some(message);
            }
        }
        None
    }

    /// Send SIGKILL (a crash in tests; the watchdog; quarantine).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// CPU time the process has used, in nanoseconds (from schedstat).
    pub fn cpu_ns(&self) -> Option<u64> {
        crate::cpu::process_cpu_ns(self.child.id())
    }
}

#[cfg(test)]
mod tests {
    use vrhost_shm::RegionConfig;

    use super::*;

    /// A VR played by the shell: `script` runs with the control socket as
    /// descriptor 3 (it may answer the hello there, or not).
    fn start(script: &str, timeout: Duration) -> Result<(VrProcess, Doorbell), SpawnError> {
        let region = Region::create("spawn-unit", RegionConfig::default()).unwrap();
        let cmd = VrCommand {
            program: PathBuf::from("sh"),
            args: vec!["-c".into(), script.into()],
            cpu: None,
            poll: PollConfig::default(),
            config: serde_json::Value::Null,
            ready_timeout: timeout,
            idle_start: Duration::ZERO,
            confine: Confine::default(),
            hurry: Hurry::default(),
        };
        let bell = Doorbell::new().unwrap();
        VrProcess::start("t", 0, &region, &bell, &cmd)
    }

    fn refused(r: Result<(VrProcess, Doorbell), SpawnError>) -> String {
        match r {
            Err(SpawnError::Refused { vr, message }) => {
                assert_eq!(vr, "t");
                message
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("started"),
        }
    }

    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn a_vr_that_says_ready_runs_until_stopped() {
        let (mut p, _bell) =
            start(r#"printf '{"Ready":{"pid":1}}' >&3; exec sleep 30"#, LONG).unwrap();
        assert!(!p.has_exited());
        assert!(p.cpu_ns().is_some());
        p.kill();
        p.stop();
        assert!(p.exit_status().contains("signal: 9"), "{}", p.exit_status());
    }

    #[test]
    fn a_vr_that_refuses_its_config_says_why() {
        let m = refused(start(
            r#"printf '{"Error":{"message":"no route file"}}' >&3; sleep 30"#,
            LONG,
        ));
        assert_eq!(m, "no route file");
    }

    #[test]
    fn a_vr_that_exits_or_stays_silent_is_refused() {
        let m = refused(start("exit 3", LONG));
        assert!(
            m.contains("exited before it was ready") && m.contains('3'),
            "{m}"
        );
        let m = refused(start("exec sleep 30", Duration::from_millis(200)));
        assert!(m.contains("no answer within"), "{m}");
        let m = refused(start("printf 'not json' >&3; sleep 30", LONG));
        assert!(m.contains("bad reply"), "{m}");
    }

    #[test]
    fn a_program_that_does_not_exist_is_an_os_error() {
        let region = Region::create("spawn-unit", RegionConfig::default()).unwrap();
        let cmd = VrCommand {
            program: PathBuf::from("/nonexistent/vr"),
            args: Vec::new(),
            cpu: None,
            poll: PollConfig::default(),
            config: serde_json::Value::Null,
            ready_timeout: LONG,
            idle_start: Duration::ZERO,
            confine: Confine::default(),
            hurry: Hurry::default(),
        };
        let bell = Doorbell::new().unwrap();
        assert!(matches!(
            VrProcess::start("t", 0, &region, &bell, &cmd),
            Err(SpawnError::Os { .. })
        ));
    }
}
