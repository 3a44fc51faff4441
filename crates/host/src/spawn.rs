//! Starting VR processes and watching them.
//!
//! Each instance is a child process that gets one end of a `SOCK_SEQPACKET`
//! pair as descriptor 3, then the [`Hello`] with its region and doorbells
//! over it (SCM_RIGHTS). The host holds a pidfd per child, so it learns of an
//! exit at once (poll) without reaping races. The child dies with the host
//! (`PR_SET_PDEATHSIG`), which is why every child is forked from one thread
//! that lives as long as the host (see [`fork_from_lasting_thread`]). [`VrCommand::confine`] walls it in (own network
//! namespace, cgroup, user, no new privileges, seccomp, descriptors 0-3
//! only; see [`crate::confine`]); its cgroups go when it is stopped.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use vrhost_shm::fdpass::{FdPassError, recv_with_fds, send_with_fds, seqpacket_pair};
use vrhost_shm::{Doorbell, LAYOUT_VERSION, Region};
use vrhost_vr::proto::{CTRL_FD_ENV, Hello, HostMsg, MAX_MSG, PollConfig, VrReply};

use crate::confine::{Cgroups, Confine, ConfineError, Prepared};

/// Descriptor number of the control socket in the child.
pub(crate) const CHILD_CTRL_FD: i32 = 3;

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

/// `struct sched_attr` of `sched_setattr(2)` (`SCHED_ATTR_SIZE_VER1`).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// How long a VR process started by an operator's change waits for idle
/// time on its core ([`VrCommand::idle_start`]) before it takes a normal
/// share of it, unless `[host] start_idle_ms` says otherwise. Beside VRs
/// that never leave their core idle it would wait until `ready_timeout`;
/// measured with 4 VRs at 0.6-0.8 of their core (`vrhost bench control`),
/// changes took 0.5-1.3 s and the VRs lost nothing.
pub const IDLE_START_LIMIT: Duration = Duration::from_secs(2);

/// Set the scheduling class of every thread of process `pid`: the normal
/// class at nice 0 with a time slice of `slice` if given (`idle` false), or
/// the idle class (`idle` true: it runs only when nothing else of its core
/// wants to, and any other task that wakes there takes the core from it at
/// once). EEVDF (Linux 6.12 and later) lets a task with a slice run for at
/// most that long before a waiting task of the same core may run, and lets
/// it preempt a task with a longer slice when it wakes up: a VR that shares
/// a core with a VR that never sleeps is then off its core for fractions
/// of a millisecond, not whole default slices. Older kernels ignore the
/// slice. Threads that exit meanwhile are skipped.
///
/// # Errors
/// The OS error of `sched_setattr` for the first thread it failed on, or
/// of reading `/proc/PID/task`.
fn set_class(pid: u32, idle: bool, slice: Option<Duration>) -> std::io::Result<()> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: if idle {
            libc::SCHED_IDLE
        } else {
            libc::SCHED_OTHER
        } as u32,
        flags: 0,
        nice: 0,
        priority: 0,
        // The kernel clamps it to 0.1..=100 ms; 0 keeps its default.
        runtime: slice.map_or(0, |d| d.as_nanos() as u64),
        deadline: 0,
        period: 0,
        util_min: 0,
        util_max: 0,
    };
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let Some(tid) = task?
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: `attr` is a valid `struct sched_attr` of the size it
        // states, alive for the call, which only reads it; `tid` is a
        // thread of our child.
        let r = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr, 0u32) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Start `program` with one end of a new `SOCK_SEQPACKET` pair as its
/// descriptor 3 (named by `VRHOST_CTRL_FD`), dying with its parent. Returns
/// the child and our end.
///
/// # Errors
/// The OS error of `socketpair` or of the fork/exec.
pub fn spawn_with_ctrl(program: &Path, args: &[String]) -> std::io::Result<(Child, OwnedFd)> {
    spawn_inner(program, args, None, false)
}

/// [`spawn_with_ctrl`], confined as `confined` says (its hook runs after
/// ours, last before exec).
fn spawn_inner(
    program: &Path,
    args: &[String],
    confined: Option<&mut Prepared>,
    idle: bool,
) -> std::io::Result<(Child, OwnedFd)> {
    let (ours, theirs) = seqpacket_pair()?;
    let raw = theirs.as_raw_fd();
    // The child executes the program through a descriptor the host opened,
    // so a VR running as `nobody` needs the right to execute the file but
    // not to search the directories above it (a build under /root). The
    // kernel resolves /proc/self/fd/N (the process's own descriptor, open
    // to it whatever its user) before it closes close-on-exec descriptors.
    // Above CHILD_CTRL_FD, which the child's first step overwrites.
    let exe = above_fixed(rustix::fs::open(
        crate::confine::which(program)?,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)?;
    let mut command = Command::new(format!("/proc/self/fd/{}", exe.as_raw_fd()));
    command.arg0(program).args(args).stdin(Stdio::null());
    // SAFETY: the closure runs in the child between fork and exec and calls
    // only async-signal-safe functions (dup2, fcntl, prctl, getppid, _exit),
    // touching no memory shared with the parent's threads.
    unsafe {
        command.pre_exec(move || {
            if raw == CHILD_CTRL_FD {
                // dup2 to itself keeps CLOEXEC: clear it instead.
                if libc::fcntl(raw, libc::F_SETFD, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(raw, CHILD_CTRL_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Start in the idle class, or at the lowest priority: loading
            // the program and building its tables must not take the core
            // from VRs that forward (the host puts it in the normal class
            // once it is ready, or after `idle_start`). Failure only costs
            // that protection.
            if idle {
                let param = libc::sched_param { sched_priority: 0 };
                let _ = libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
            } else {
                let _ = libc::setpriority(libc::PRIO_PROCESS, 0, 19);
            }
            if libc::getppid() == 1 {
                // The parent died before prctl took effect.
                libc::_exit(1);
            }
            Ok(())
        });
    }
    if let Some(c) = confined {
        c.apply(&mut command);
    }
    command.env(CTRL_FD_ENV, CHILD_CTRL_FD.to_string());
    let child = fork_from_lasting_thread(command)?;
    drop((theirs, exe));
    Ok((child, ours))
}

/// A start handed to the fork thread, and where its result goes.
type ForkJob = (Command, mpsc::SyncSender<std::io::Result<Child>>);

/// The fork thread's queue; `None` until the first start.
static FORKER: Mutex<Option<mpsc::Sender<ForkJob>>> = Mutex::new(None);

/// Fork and exec `command` from the host's fork thread, which lives as long
/// as the process.
///
/// The parent-death signal a VR sets (`PR_SET_PDEATHSIG`) fires when the
/// *thread* that forked it exits, not the process: a VR forked from a
/// thread pool's worker (the API's `spawn_blocking` threads, which tokio
/// ends after 10 s idle) was killed with it. Every start goes through this
/// one thread, started on the first start (it keeps the network namespace,
/// affinity and scheduling class of the thread that started it, as a
/// thread of that thread's would: the daemon's first start is on its main
/// thread) and never ending, since the queue's sender is never dropped.
///
/// # Errors
/// The OS error of the fork/exec, or of starting the fork thread.
fn fork_from_lasting_thread(command: Command) -> std::io::Result<Child> {
    let queue = {
        let mut q = FORKER.lock().unwrap_or_else(PoisonError::into_inner);
        match &*q {
            Some(tx) => tx.clone(),
            None => {
                let (tx, rx) = mpsc::channel::<ForkJob>();
                std::thread::Builder::new()
                    .name("vrhost-fork".into())
                    .spawn(move || {
                        for (mut command, done) in rx {
                            // The caller may have given up waiting; the
                            // child is then dropped and reaped by nobody,
                            // as a failed start's would be.
                            let _ = done.send(command.spawn());
                        }
                    })?;
                *q = Some(tx.clone());
                tx
            }
        }
    };
    let (done, result) = mpsc::sync_channel(1);
    let gone = || std::io::Error::other("the fork thread is gone");
    queue.send((command, done)).map_err(|_| gone())?;
    result.recv().map_err(|_| gone())?
}

/// `fd`, renumbered above the descriptors the child fixes (0 to
/// [`CHILD_CTRL_FD`]) if it is one of them. The child's hook `dup2`s its
/// control socket onto `CHILD_CTRL_FD` before the confinement steps run, so
/// a descriptor they (or the exec) use must not have that number: it is
/// free in a host whose threads open and close descriptors at once (then
/// the child wrote its cgroup's `0` into its control socket and ran outside
/// its cgroup).
pub(crate) fn above_fixed(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > CHILD_CTRL_FD {
        return Ok(fd);
    }
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, CHILD_CTRL_FD + 1)?)
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
        let os = |what, source| SpawnError::Os {
            vr: vr.to_string(),
            what,
            source,
        };
        let vr_bell = Doorbell::new().map_err(|e| os("eventfd", e))?;
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
        let mut proc_ = Self {
            child,
            pidfd,
            ctrl: ours,
            cgroups,
            reaped: false,
            instance,
            hurry: cmd.hurry.clone(),
        };
        let hello = Hello {
            layout_version: LAYOUT_VERSION,
            vr: vr.to_string(),
            instance,
            cpu: cmd.cpu,
            poll: cmd.poll,
            config: cmd.config.clone(),
        };
        let msg = serde_json::to_vec(&hello).expect("hello serializes");
        let ctrl_err = |source| SpawnError::Ctrl {
            vr: vr.to_string(),
            source,
        };
        send_with_fds(
            proc_.ctrl.as_fd(),
            &msg,
            &[region.fd(), vr_bell.fd(), host_bell.fd()],
        )
        .map_err(ctrl_err)?;
        let slice = Duration::from_micros(cmd.poll.slice_us.into());
        // An idle start waits up to `idle_start` in the idle class (less if
        // the control plane hurries it), then the rest in the normal class.
        let t0 = Instant::now();
        let mut reply = Err(WaitError::Timeout);
        if idle {
            let first = cmd.ready_timeout.min(cmd.idle_start);
            loop {
                let left = first.saturating_sub(t0.elapsed());
                if left.is_zero() || cmd.hurry.is_set() {
                    break;
                }
                reply = proc_.wait_reply(left.min(HURRY_POLL));
                if !matches!(reply, Err(WaitError::Timeout)) {
                    break;
                }
            }
        }
        if matches!(reply, Err(WaitError::Timeout)) {
            if idle {
                proc_.set_idle(false, slice);
            }
            reply = proc_.wait_reply(cmd.ready_timeout.saturating_sub(t0.elapsed()));
        }
        match reply.map_err(|e| e.describe(cmd.ready_timeout)) {
            Ok(VrReply::Ready { .. }) => {
                // The normal class now that it forwards, with a short time
                // slice.
                proc_.set_idle(false, slice);
                Ok((proc_, vr_bell))
            }
            Ok(VrReply::Error { message } | VrReply::Panicked { message }) => {
                proc_.stop();
                Err(SpawnError::Refused {
                    vr: vr.to_string(),
                    message,
                })
            }
            Ok(VrReply::Control { .. }) => {
                proc_.stop();
                Err(SpawnError::Refused {
                    vr: vr.to_string(),
                    message: "answered a control message before it was ready".into(),
                })
            }
            Err(message) => {
                proc_.stop();
                Err(SpawnError::Refused {
                    vr: vr.to_string(),
                    message,
                })
            }
        }
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
            Err(FdPassError::Closed) => {
                let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                Err(WaitError::Other(format!(
                    "exited before it was ready ({status})"
                )))
            }
            Err(e) => Err(WaitError::Other(e.to_string())),
        }
    }

    /// A second handle on its control socket, for the control plane to
    /// send [`HostMsg::Control`] messages while the worker owns the process.
    ///
    /// # Errors
    /// The OS error of `dup`.
    pub fn control(&self) -> std::io::Result<VrControl> {
        Ok(VrControl {
            fd: self.ctrl.try_clone()?,
            next_id: 1,
            buf: Vec::new(),
        })
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

/// The control plane's handle on one instance's control socket: requests
/// ([`HostMsg::Control`]) answered in order by [`VrReply::Control`].
#[derive(Debug)]
pub struct VrControl {
    fd: OwnedFd,
    next_id: u64,
    buf: Vec<u8>,
}

impl VrControl {
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

    /// A child started from a thread that then exits lives on: its
    /// parent-death signal is tied to the fork thread, not to the caller's
    /// (the API's pool threads end after 10 s idle, and took their VRs).
    #[test]
    fn a_child_outlives_the_thread_that_started_it() {
        let (mut child, _ctrl) = std::thread::spawn(|| {
            spawn_with_ctrl(Path::new("sleep"), &["30".into()]).expect("spawn sleep")
        })
        .join()
        .expect("the starting thread");
        // The kernel signals the child as the thread exits, before join
        // returns; a short wait covers the signal's delivery.
        std::thread::sleep(Duration::from_millis(200));
        let status = child.try_wait().expect("try_wait");
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            status, None,
            "the child died with the thread that started it"
        );
    }
}
