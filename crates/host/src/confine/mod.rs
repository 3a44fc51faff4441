//! Confinement of VR processes: what a VR process may see and do.
//!
//! A VR is tenant code. The host gives it its region and doorbells and a
//! control socket, and nothing else. [`Confine`] says how a VR process is
//! walled in; the daemon turns it on for every VR (`[host] confine = true`,
//! the default), tests and benchmarks leave it off unless they are about it.
//! Every wall is set up in the child between `fork` and `exec` (the
//! `pre_exec` hook), in this order:
//!
//! 1. **Own cgroup** (`cgroup`, and the limits `cpu_quota`, `cpus`,
//!    `memory`): the host creates `<its own cgroup>/vrhost/<vr>.<instance>`
//!    in each hierarchy before the fork, writes the limits, and opens the
//!    `cgroup.procs` files; the child writes `0` to them (the kernel reads 0
//!    as "the writing task", in v1 and v2), so it is in its cgroup before it
//!    runs a single instruction of the VR program, with no window and no pid
//!    to race on. The name is `<vr>.<instance>`, or `<vr>.<instance>-N` if
//!    that is taken (a VR replaced while the old one drains, or another
//!    host). The directories go when the process is reaped
//!    ([`Cgroups::remove`], retrying briefly while the kernel still counts
//!    the exited task); those of a host that was killed (`SIGKILL`) go when
//!    a host next makes a cgroup there (empty, older than ten seconds, and
//!    not one this host still owns).
//!    Nesting under the host's own cgroup keeps the VRs inside whatever
//!    limits the service itself has.
//!    - cgroup v1 (this machine): the `cpu`, `cpuset` and `memory`
//!      hierarchies are found in `/proc/self/mountinfo` (co-mounted ones are
//!      handled once; if none is mounted there but PID 1 has them, as under
//!      `ip netns exec`, they are mounted again first, see `confine/remount.rs`); `cpu.cfs_quota_us` = quota x `cpu.cfs_period_us`
//!      (100 ms), `cpuset.cpus` (and `cpuset.mems`, copied from the parent,
//!      since v1 refuses tasks in a cpuset without them),
//!      `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`, the
//!      same: no swap past the limit).
//!    - cgroup v2 (`/sys/fs/cgroup/cgroup.controllers` exists): one tree;
//!      the controllers a limit needs are enabled in `cgroup.subtree_control`
//!      of the host's cgroup and of `vrhost`; `cpu.max`, `cpuset.cpus`,
//!      `memory.max` (and `memory.swap.max` 0). A v2 cgroup with processes cannot hand controllers to
//!      children, so if the host's own cgroup refuses (`EBUSY`), the host
//!      moves itself into a leaf `<its cgroup>/host` first (what systemd
//!      expects of a service with `Delegate=yes`).
//! 2. **Network namespace** (`netns`): `unshare(CLONE_NEWNET)`. The VR gets
//!    a namespace of its own with only a loopback device, down: it reaches no
//!    address, not even the host's loopback, and no abstract unix socket of
//!    the host. It never needs the network: the host moves its packets.
//! 3. **Descriptors** (`close_fds`): `close_range(4, ~0, CLOSE_RANGE_CLOEXEC)`
//!    marks everything above the control socket close-on-exec, so exactly
//!    0, 1, 2 (stdin is `/dev/null`) and 3 survive `exec`; the region and the
//!    doorbells come later in the hello. Marking rather than closing keeps
//!    the pipes through which a failure of a later step is reported.
//! 4. **User** (`user`, default `nobody` 65534:65534): `setgroups([])`, then
//!    `setresgid`, then `setresuid` (raw system calls: the child is one
//!    thread, and glibc's wrappers would signal threads of the parent that
//!    do not exist here). Changing uid drops every capability and clears
//!    the parent-death signal, which is set again.
//! 5. **No new privileges** (`no_new_privs`; always with `seccomp`):
//!    `PR_SET_NO_NEW_PRIVS`, so no set-uid program or file capability gives
//!    anything back.
//! 6. **Seccomp** (`seccomp`): an allowlist filter (below), installed last,
//!    just before `exec`.
//!
//! A confined VR also gets a clean environment (`clean_env`: `PATH`,
//! `RUST_LOG`, `RUST_BACKTRACE` and the control socket's number, not the
//! daemon's variables).
//!
//! If a step fails, the child writes the step and the errno to a pipe of its
//! own and std's `Command::spawn` fails; the host turns it into a
//! [`ConfineError::Child`] that names the step (`setresuid(65534):
//! Operation not permitted`). An `exec` refused for permissions says which
//! user could not run what.
//!
//! # Keeping VRs apart from each other
//!
//! All VRs run as `nobody` unless a VR's `user` says otherwise, and Linux
//! lets a process read `/proc/<pid>/fd/<n>` (so open another VR's region),
//! `/proc/<pid>/mem`, signal and `prlimit` processes of its own uid. What
//! stops that: the VR runtime makes its process non-dumpable before it
//! receives its region (`/proc/<pid>/*` of a non-dumpable process belongs to
//! root and ptrace-style access is refused), and the filter refuses
//! `kill`/`tgkill`/`ptrace`/`process_vm_*`/`pidfd_*`, `prlimit64` and
//! `sched_setaffinity` on any process but the caller. The host runs as
//! root, so its own `/proc/<pid>/fd` is out of reach of any VR. A distinct
//! `user` per VR adds the kernel's own uid separation on top; the tests
//! check both layouts.
//!
//! # The seccomp allowlist (x86_64)
//!
//! Found by running the built-in router (`vrhost vr-run`), the example VRs
//! and the tests' probe VR under `strace -f`, from `execve` on; grouped by
//! why a VR needs them:
//!
//! - loading the program (`ld.so`, glibc and std start-up): `execve`,
//!   `brk`, `arch_prctl`, `set_tid_address`, `set_robust_list`, `rseq`,
//!   `prlimit64` (own process only), `openat`/`open`, `newfstatat`/`fstat`/
//!   `stat`/`lstat`/`statx`, `access`/`faccessat`/`faccessat2`, `pread64`,
//!   `readlink`/`readlinkat`, `getrandom`, `uname`, `prctl` (libcap's
//!   start-up reads the bounding set, std reads the aux vector);
//! - memory: `mmap`, `munmap`, `mremap`, `mprotect`, `madvise` (no `mlock`:
//!   nothing in a VR locks memory, and `nobody` has 8 MiB of it anyway);
//! - files it may read (a router's `route_file`): `read`, `readv`, `write`,
//!   `writev`, `close`, `lseek`, `fcntl`, `getdents64`, and `ioctl` with
//!   `FIONBIO`, `FIOCLEX`, `FIONREAD` or `TCGETS` only (no `TIOCSTI` on an
//!   inherited terminal);
//! - the control socket and doorbells it was given: `recvmsg`, `sendmsg`,
//!   `recvfrom`, `sendto`, `poll`, `ppoll` (no `socket`, `connect`, `bind`:
//!   it makes no sockets);
//! - scheduling and time: `sched_yield`, `sched_getaffinity`,
//!   `sched_setaffinity` (own threads only: pinning to the hello's core),
//!   `getcpu`, `clock_gettime`, `clock_getres`, `gettimeofday`, `nanosleep`,
//!   `clock_nanosleep`;
//! - threads and signals of its own: `clone` with `CLONE_THREAD` only (a
//!   thread, never a new process), `futex`, `exit`, `exit_group`, `gettid`,
//!   `getpid`, `getppid`, `rt_sigaction`, `rt_sigprocmask`, `rt_sigreturn`,
//!   `sigaltstack`, `restart_syscall`, and the `get*id` family.
//!
//! Anything else fails with **`EPERM`**, rather than killing the process:
//! the filter is the last of several walls (the others already refuse what
//! matters), and a VR is tenant code linked with libraries of its choice;
//! one that probes an optional system call (a logger asking for a
//! terminal, an allocator trying a newer call) then takes its fallback
//! instead of dying in the middle of forwarding, and a VR that really needs
//! something reports it in its own words. `clone3` fails with `ENOSYS`
//! instead, so that glibc's `pthread_create` falls back to `clone`, whose
//! flags the filter can see. A call from another ABI (x32, i386) kills the
//! process (the filter's architecture check). Nothing is counted or logged
//! in the child. On other architectures `seccomp` is refused with an error
//! (no list has been measured there).

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

mod cgroup;
mod child;
mod ctlproc;
mod remount;
mod seccomp;
#[cfg(test)]
mod tests;

pub use cgroup::Cgroups;
use cgroup::*;
pub(crate) use child::{Prepared, which};
pub use ctlproc::{ControlSpawn, spawn_control};

/// A user and group id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ids {
    /// User id.
    pub uid: u32,
    /// Group id (the only group: supplementary groups are dropped).
    pub gid: u32,
}

impl Ids {
    /// `nobody:nogroup`.
    pub const NOBODY: Self = Self {
        uid: 65534,
        gid: 65534,
    };
}

impl fmt::Display for Ids {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "uid {} gid {}", self.uid, self.gid)
    }
}

/// How a VR process is confined. The default confines nothing (tests,
/// benchmarks); [`Confine::strict`] is what the daemon uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Confine {
    /// A network namespace of its own (only `lo`, down).
    pub netns: bool,
    /// Run as this user and group, without supplementary groups.
    pub user: Option<Ids>,
    /// `PR_SET_NO_NEW_PRIVS` (implied by `seccomp`).
    pub no_new_privs: bool,
    /// The allowlist seccomp filter (see the module doc).
    pub seccomp: bool,
    /// Only descriptors 0-3 survive `exec`.
    pub close_fds: bool,
    /// A clean environment (`PATH`, `RUST_LOG`, `RUST_BACKTRACE`).
    pub clean_env: bool,
    /// A cgroup of its own, even without limits.
    pub cgroup: bool,
    /// CPU time, as a fraction of one core (0.5: 50 ms per 100 ms).
    pub cpu_quota: Option<f64>,
    /// CPUs it may run on (cpuset).
    pub cpus: Option<Vec<usize>>,
    /// Memory limit, bytes.
    pub memory: Option<u64>,
}

impl Confine {
    /// Every wall: own network namespace, `nobody`, no new privileges,
    /// seccomp, descriptors 0-3 only, clean environment, own cgroup (no
    /// limits: set `cpu_quota`, `cpus`, `memory`).
    pub fn strict() -> Self {
        Self {
            netns: true,
            user: Some(Ids::NOBODY),
            no_new_privs: true,
            seccomp: true,
            close_fds: true,
            clean_env: true,
            cgroup: true,
            cpu_quota: None,
            cpus: None,
            memory: None,
        }
    }

    /// True if nothing is confined.
    pub fn is_off(&self) -> bool {
        *self == Self::default()
    }

    /// True if the process gets a cgroup of its own.
    pub fn wants_cgroup(&self) -> bool {
        self.cgroup || self.cpu_quota.is_some() || self.cpus.is_some() || self.memory.is_some()
    }
}

/// Confining a VR process failed.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// A system call or file operation in the host failed.
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// A step in the child, between fork and exec, failed.
    #[error("in the VR process before exec: {step}: {source}")]
    Child {
        /// Which step.
        step: String,
        /// The OS error.
        source: io::Error,
    },
    /// Something this host cannot do.
    #[error("{0}")]
    Unsupported(String),
}

fn os(what: impl Into<String>) -> impl FnOnce(io::Error) -> ConfineError {
    let what = what.into();
    move |source| ConfineError::Os { what, source }
}

// ---------------------------------------------------------------------------
// Users and file access.

/// Look a user up by name, or take a number as a uid: the group is the
/// user's primary group (for a uid with no passwd entry, the same number).
///
/// # Errors
/// An unknown name, or uid 0.
pub fn resolve_user(spec: &str) -> Result<Ids, String> {
    let ids = if let Ok(uid) = spec.parse::<u32>() {
        Ids {
            uid,
            gid: passwd_by_uid(uid)?.map_or(uid, |p| p.gid),
        }
    } else {
        passwd_by_name(spec)?.ok_or_else(|| format!("no user {spec:?} on this host"))?
    };
    if ids.uid == 0 {
        return Err("a VR does not run as root".into());
    }
    Ok(ids)
}

fn passwd_by_name(name: &str) -> Result<Option<Ids>, String> {
    let c = CString::new(name).map_err(|_| format!("{name:?}: not a user name"))?;
    getpw(|pwd, buf, res| {
        // SAFETY: all pointers are to live, correctly sized buffers owned by
        // `getpw`'s frame; getpwnam_r writes only within `buf` (its length
        // is passed) and `pwd`/`res`.
        unsafe { libc::getpwnam_r(c.as_ptr(), pwd, buf.as_mut_ptr(), buf.len(), res) }
    })
}

fn passwd_by_uid(uid: u32) -> Result<Option<Ids>, String> {
    getpw(|pwd, buf, res| {
        // SAFETY: as in `passwd_by_name`.
        unsafe { libc::getpwuid_r(uid, pwd, buf.as_mut_ptr(), buf.len(), res) }
    })
}

fn getpw<F>(mut call: F) -> Result<Option<Ids>, String>
where
    F: FnMut(*mut libc::passwd, &mut [libc::c_char], *mut *mut libc::passwd) -> libc::c_int,
{
    let mut len = 1024usize;
    loop {
        let mut buf = vec![0 as libc::c_char; len];
        // SAFETY: passwd is plain old data; all-zero is a valid value.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        let rc = call(&mut pwd, &mut buf, &mut res);
        if rc == libc::ERANGE && len < 1 << 20 {
            len *= 4;
            continue;
        }
        if rc != 0 {
            return Err(format!(
                "user database: {}",
                io::Error::from_raw_os_error(rc)
            ));
        }
        return Ok((!res.is_null()).then_some(Ids {
            uid: pwd.pw_uid,
            gid: pwd.pw_gid,
        }));
    }
}

/// Check, from the mode bits, that `ids` may reach `path` (search every
/// directory above it) and read it; or, with `exec`, execute it. A VR's
/// program is opened by the host and executed through that descriptor
/// (see `spawn`), so for `exec` the directories above it do not count.
/// Groups other than `ids.gid` do not count (a confined VR has none); ACLs
/// and security modules are not looked at.
///
/// # Errors
/// Which path `ids` cannot get through, and why.
pub fn check_access(path: &Path, ids: Ids, exec: bool) -> Result<(), String> {
    let real = path
        .canonicalize()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let allowed = |p: &Path, bits: u32| -> Result<bool, String> {
        let m = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let mode = m.mode();
        let have = if m.uid() == ids.uid {
            mode >> 6
        } else if m.gid() == ids.gid {
            mode >> 3
        } else {
            mode
        } & 7;
        Ok(have & bits == bits)
    };
    // The path as given (a symlink in a closed directory is not reached)
    // and where it leads.
    let given = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let dirs = given.ancestors().skip(1).chain(real.ancestors().skip(1));
    for dir in dirs.filter(|_| !exec) {
        if !allowed(dir, 1)? {
            return Err(format!(
                "{}: directory {} cannot be searched by {ids}",
                path.display(),
                dir.display()
            ));
        }
    }
    let (bits, what) = if exec { (1, "executed") } else { (4, "read") };
    if !allowed(&real, bits)? {
        return Err(format!("{}: cannot be {what} by {ids}", path.display()));
    }
    Ok(())
}

/// Parse a size: bytes, or a number with a `K`, `M`, `G` or `T` suffix
/// (powers of 1024; `KiB`, `MB`, ... are read the same).
///
/// # Errors
/// Not a size, or one that overflows.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: not a size (256M, 1G, or bytes)"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(format!("{s:?}: unknown unit (K, M, G or T)")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?}: too large"))
}

/// Online CPUs (from `/sys/devices/system/cpu/online`).
pub fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()))
        .map(|v| v.iter().max().map_or(0, |m| m + 1))
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// Parse a kernel CPU list (`0-3,6`).
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    if s.is_empty() {
        return Some(out);
    }
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
                if b < a || b - a > 4096 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

// ---------------------------------------------------------------------------
// Cgroups.
