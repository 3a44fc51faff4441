//! The confinement steps in the child between fork and exec, and what
//! the host prepares for them (and learns of a step that failed).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::cgroup::{Limits, PERIOD_US, detect};
use super::seccomp::filters;
use super::{Cgroups, Confine, ConfineError, Ids, check_access, os};
use crate::spawn::above_fixed;

/// Steps of the child, as reported through the failure pipe.
pub(super) const STEPS: [&str; 9] = [
    "",
    "join the cgroup (write 0 to cgroup.procs)",
    "unshare(CLONE_NEWNET)",
    "close_range(4, ~0, CLOSE_RANGE_CLOEXEC)",
    "setgroups([])",
    "setresgid",
    "setresuid",
    "prctl(PR_SET_NO_NEW_PRIVS)",
    "install the seccomp filter",
];
pub(super) const STEP_CGROUP: u32 = 1;
pub(super) const STEP_NETNS: u32 = 2;
pub(super) const STEP_FDS: u32 = 3;
pub(super) const STEP_GROUPS: u32 = 4;
pub(super) const STEP_GID: u32 = 5;
pub(super) const STEP_UID: u32 = 6;
pub(super) const STEP_NNP: u32 = 7;
pub(super) const STEP_SECCOMP: u32 = 8;

/// Everything the child needs, prepared before the fork (the child only
/// makes system calls on it: no allocation, no locks).
pub(crate) struct Prepared {
    pub(super) ids: Option<Ids>,
    pub(super) netns: bool,
    pub(super) nnp: bool,
    pub(super) close_fds: bool,
    pub(super) clean_env: bool,
    pub(super) filters: Vec<Vec<libc::sock_filter>>,
    /// `cgroup.procs` of each new cgroup, open for writing.
    pub(super) procs: Vec<OwnedFd>,
    /// The failure pipe: (read end, write end).
    pub(super) report: Option<(OwnedFd, OwnedFd)>,
    pub(super) cgroups: Option<Cgroups>,
    pub(super) program: PathBuf,
}

pub(super) fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded: both descriptors are new and ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Prepared {
    /// Prepare the confinement of instance `instance` of VR `vr`, pinned to
    /// `pinned` if given, running `program`: create its cgroups (with the
    /// limits; in the idle class if `idle`), compile the filter, open what
    /// the child writes to.
    pub(crate) fn new(
        c: &Confine,
        vr: &str,
        instance: u16,
        pinned: Option<usize>,
        program: &Path,
        idle: bool,
    ) -> Result<Self, ConfineError> {
        if let Some(ids) = c.user {
            if ids.uid == 0 {
                return Err(ConfineError::Unsupported(
                    "a confined VR does not run as root".into(),
                ));
            }
            if let Ok(p) = which(program) {
                check_access(&p, ids, true).map_err(ConfineError::Unsupported)?;
            }
        }
        if let Some(q) = c.cpu_quota.filter(|q| !(*q > 0.0 && q.is_finite())) {
            return Err(ConfineError::Unsupported(format!(
                "cpu_quota {q}: must be above 0"
            )));
        }
        let filters = if c.seccomp { filters()? } else { Vec::new() };
        let mut prep = Self {
            ids: c.user,
            netns: c.netns,
            nnp: c.no_new_privs || c.seccomp,
            close_fds: c.close_fds,
            clean_env: c.clean_env,
            filters,
            procs: Vec::new(),
            report: None,
            cgroups: None,
            program: program.to_path_buf(),
        };
        if c.wants_cgroup() {
            let limits = Limits {
                quota_us: c
                    .cpu_quota
                    .map(|q| ((q * PERIOD_US as f64).round() as u64).max(1000)),
                cpus: c.cpus.clone().or_else(|| pinned.map(|p| vec![p])),
                memory: c.memory,
            };
            let cg = Cgroups::create(&detect()?, &format!("{vr}.{instance}"), &limits)?;
            cg.set_idle(idle);
            for d in cg.dirs() {
                let p = d.join("cgroup.procs");
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map_err(os(format!("open {}", p.display())))?;
                prep.procs
                    .push(above_fixed(f.into()).map_err(os("fcntl(F_DUPFD_CLOEXEC)"))?);
            }
            prep.cgroups = Some(cg);
        }
        if !c.is_off() {
            let (r, w) = pipe_cloexec().map_err(os("pipe"))?;
            let w = above_fixed(w).map_err(os("fcntl(F_DUPFD_CLOEXEC)"))?;
            prep.report = Some((r, w));
        }
        Ok(prep)
    }

    /// Set `command` up: the environment, and the hook that confines the
    /// child between fork and exec. Call after the other `pre_exec` hooks
    /// (it runs last) and before setting the variables the VR must get.
    pub(crate) fn apply(&mut self, command: &mut Command) {
        if self.clean_env {
            command.env_clear();
            for k in ["RUST_LOG", "RUST_BACKTRACE", "RUST_LIB_BACKTRACE"] {
                if let Some(v) = std::env::var_os(k) {
                    command.env(k, v);
                }
            }
            command.env("PATH", "/usr/local/bin:/usr/bin:/bin");
        }
        let procs: Vec<RawFd> = self.procs.iter().map(AsRawFd::as_raw_fd).collect();
        let report = self.report.as_ref().map_or(-1, |(_, w)| w.as_raw_fd());
        let ids = self.ids;
        let (netns, nnp, close_fds) = (self.netns, self.nnp, self.close_fds);
        let filters = std::mem::take(&mut self.filters);
        // The parent, as it is before the fork (a check that the child
        // still has its parent after changing uid).
        let parent = std::process::id() as libc::pid_t;
        let hook = move || -> io::Result<()> {
            // SAFETY: `child_steps` makes only async-signal-safe system
            // calls, on descriptors and memory prepared before the fork and
            // owned by this closure (see its doc).
            unsafe { child_steps(&procs, report, ids, netns, close_fds, nnp, &filters, parent) }
        };
        // SAFETY: the hook runs in the child between fork and exec; it
        // allocates nothing, takes no lock and calls only async-signal-safe
        // functions (see `child_steps`).
        unsafe {
            command.pre_exec(hook);
        }
    }

    /// After the spawn: close the parent's copies of what the child used.
    /// On a failed spawn, what the child reported (if it reported anything)
    /// is turned into the error; the cgroups go.
    pub(crate) fn finish(&mut self, spawned: &io::Result<impl Sized>) -> Option<ConfineError> {
        self.procs.clear();
        let (r, w) = self.report.take()?;
        drop(w);
        if spawned.is_ok() {
            return None;
        }
        if let Some(cg) = &mut self.cgroups {
            cg.remove();
        }
        let mut buf = [0u8; 8];
        // SAFETY: read into a local buffer of the length given; `r` is our
        // non-blocking read end.
        let n = unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n == 8 {
            let step = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
            let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
            let mut name = STEPS.get(step as usize).copied().unwrap_or("?").to_string();
            if let (Some(ids), STEP_GID | STEP_UID) = (self.ids, step) {
                name = format!("{name} to {ids}");
            }
            return Some(ConfineError::Child {
                step: name,
                source: io::Error::from_raw_os_error(errno),
            });
        }
        // Nothing reported: exec itself failed.
        let e = spawned.as_ref().err()?;
        let who = self
            .ids
            .map_or_else(|| "the host's user".to_string(), |i| i.to_string());
        Some(ConfineError::Child {
            step: format!("exec {} as {who}", self.program.display()),
            source: io::Error::new(e.kind(), e.to_string()),
        })
    }

    /// The cgroups, to remove once the process is reaped.
    pub(crate) fn take_cgroups(&mut self) -> Option<Cgroups> {
        self.cgroups.take()
    }
}

/// The program's path as exec would find it (absolute, relative, or in
/// `PATH`).
pub(crate) fn which(program: &Path) -> io::Result<PathBuf> {
    if program.components().count() > 1 || program.is_absolute() {
        return Ok(program.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
}

/// The confinement steps in the child (see the module doc for the order).
///
/// # Safety
/// Call only in a child between fork and exec: it changes the calling
/// process for good. It makes only raw system calls (write, unshare,
/// close_range, fcntl, setgroups, setresgid, setresuid, prctl, getppid,
/// _exit), all async-signal-safe, on memory owned by the caller that was
/// allocated before the fork.
#[expect(
    clippy::too_many_arguments,
    reason = "the steps' inputs, each prepared before the fork; a struct would only name them again"
)]
pub(super) unsafe fn child_steps(
    procs: &[RawFd],
    report: RawFd,
    ids: Option<Ids>,
    netns: bool,
    close_fds: bool,
    nnp: bool,
    filters: &[Vec<libc::sock_filter>],
    parent: libc::pid_t,
) -> io::Result<()> {
    let fail = |step: u32| -> io::Error {
        let e = io::Error::last_os_error();
        let errno = e.raw_os_error().unwrap_or(0);
        let mut msg = [0u8; 8];
        msg[..4].copy_from_slice(&step.to_ne_bytes());
        msg[4..].copy_from_slice(&errno.to_ne_bytes());
        if report >= 0 {
            // SAFETY: write from a local buffer of the length given.
            let _ = unsafe { libc::write(report, msg.as_ptr().cast(), msg.len()) };
        }
        io::Error::from_raw_os_error(errno)
    };
    for &fd in procs {
        // SAFETY: write from a static buffer to a descriptor we opened.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(fail(STEP_CGROUP));
        }
    }
    // SAFETY: unshare with a constant flag; affects only this process.
    if netns && unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(fail(STEP_NETNS));
    }
    if close_fds {
        // SAFETY: close_range marks descriptors close-on-exec; no memory.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                4 as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        };
        if rc != 0 {
            return Err(fail(STEP_FDS));
        }
    }
    if let Some(Ids { uid, gid }) = ids {
        // SAFETY: raw set*id system calls on this (single-threaded) process;
        // setgroups reads zero entries from a null list.
        unsafe {
            if libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0 {
                return Err(fail(STEP_GROUPS));
            }
            if libc::syscall(libc::SYS_setresgid, gid, gid, gid) != 0 {
                return Err(fail(STEP_GID));
            }
            if libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0 {
                return Err(fail(STEP_UID));
            }
            // A change of uid clears the parent-death signal: set it again,
            // then check the parent did not die in between.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
        }
    }
    // SAFETY: prctl with constant arguments.
    if nnp && unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(fail(STEP_NNP));
    }
    for f in filters {
        let prog = libc::sock_fprog {
            len: f.len() as libc::c_ushort,
            filter: f.as_ptr().cast_mut(),
        };
        // SAFETY: the kernel copies the program from `prog`, which points
        // at the filter's instructions (owned by the caller) for `len`
        // entries.
        let rc = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const libc::sock_fprog as libc::c_ulong,
            )
        };
        if rc != 0 {
            return Err(fail(STEP_SECCOMP));
        }
    }
    Ok(())
}
