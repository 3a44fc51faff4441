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

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::spawn::above_fixed;

mod remount;

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

const PERIOD_US: u64 = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctrl {
    Cpu,
    Cpuset,
    Memory,
}

impl Ctrl {
    const ALL: [Ctrl; 3] = [Ctrl::Cpu, Ctrl::Cpuset, Ctrl::Memory];

    fn name(self) -> &'static str {
        match self {
            Ctrl::Cpu => "cpu",
            Ctrl::Cpuset => "cpuset",
            Ctrl::Memory => "memory",
        }
    }

    /// The VR field whose limit needs it.
    fn limit_field(self) -> &'static str {
        match self {
            Ctrl::Cpu => "cpu_quota",
            Ctrl::Cpuset => "cpus` and `cpu",
            Ctrl::Memory => "memory",
        }
    }
}

/// Where the host's own cgroups are.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Hierarchy {
    /// v1: for each mounted hierarchy that carries some of our controllers,
    /// the host's own cgroup directory in it and those controllers.
    V1(Vec<(PathBuf, Vec<Ctrl>)>),
    /// v2: the host's own cgroup directory.
    V2(PathBuf),
}

impl Hierarchy {
    /// No hierarchy that carries one of our controllers.
    fn is_empty(&self) -> bool {
        matches!(self, Hierarchy::V1(list) if list.is_empty())
    }
}

/// Undo the octal escapes of a mountinfo field (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The v1 layout from `/proc/self/mountinfo` and `/proc/self/cgroup`.
fn parse_v1(mountinfo: &str, self_cgroup: &str) -> Vec<(PathBuf, Vec<Ctrl>)> {
    let mut out: Vec<(PathBuf, Vec<Ctrl>)> = Vec::new();
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        if pre.len() < 5 || post.len() < 3 || post[0] != "cgroup" {
            continue;
        }
        let (root, mountpoint) = (unescape(pre[3]), unescape(pre[4]));
        let opts: Vec<&str> = post[2].split(',').collect();
        let ctrls: Vec<Ctrl> = Ctrl::ALL
            .into_iter()
            .filter(|c| opts.contains(&c.name()))
            .collect();
        if ctrls.is_empty() || out.iter().any(|(_, c)| c.contains(&ctrls[0])) {
            continue;
        }
        // Our path in that hierarchy.
        let own = self_cgroup.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, list, path) = (f.next()?, f.next()?, f.next()?);
            list.split(',')
                .any(|n| n == ctrls[0].name())
                .then(|| path.to_string())
        });
        let Some(own) = own else { continue };
        let rel = own
            .strip_prefix(root.trim_end_matches('/'))
            .unwrap_or("")
            .trim_start_matches('/');
        out.push((Path::new(&mountpoint).join(rel), ctrls));
    }
    out
}

/// The host's cgroups, as mounted in its mount namespace; if none is
/// mounted there but PID 1 has some (a daemon started by `ip netns exec`),
/// after mounting PID 1's there too (see [`remount`]).
fn detect() -> Result<Hierarchy, ConfineError> {
    let self_cgroup =
        std::fs::read_to_string("/proc/self/cgroup").map_err(os("read /proc/self/cgroup"))?;
    let own = detect_mounted(&self_cgroup)?;
    if !own.is_empty() {
        return Ok(own);
    }
    match remount::show_hidden_hierarchies() {
        Ok(true) => detect_mounted(&self_cgroup),
        Ok(false) => Ok(own),
        Err(e) => {
            tracing::warn!("{e}");
            Ok(own)
        }
    }
}

fn detect_mounted(self_cgroup: &str) -> Result<Hierarchy, ConfineError> {
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        let own = self_cgroup
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .ok_or_else(|| {
                ConfineError::Unsupported("cgroup v2, but /proc/self/cgroup has no 0:: line".into())
            })?;
        return Ok(Hierarchy::V2(
            Path::new("/sys/fs/cgroup").join(own.trim_start_matches('/')),
        ));
    }
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(os("read /proc/self/mountinfo"))?;
    Ok(Hierarchy::V1(parse_v1(&mountinfo, self_cgroup)))
}

/// A VR process's cgroup directories (one per v1 hierarchy, or one in v2),
/// removed by [`Cgroups::remove`] once the process is reaped.
#[derive(Debug)]
pub struct Cgroups {
    dirs: Vec<PathBuf>,
}

/// The cgroup directories this host has made and not yet removed: the sweep
/// of stale ones passes them by, and their names count as taken. Without
/// it the sweep took the directory of a VR process that had exited but was
/// not yet stopped (empty, and old if the process had run for more than
/// ten seconds), the process started in its place got the same name, and
/// the old one's [`Cgroups::remove`] then retried on the new one's, which
/// is never empty: half a second per hierarchy, on the worker's thread, so
/// a crashed VR's restart stalled every VR for 1.5 s (`vrhost bench soak`).
static OWNED: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

fn owned() -> MutexGuard<'static, BTreeSet<PathBuf>> {
    OWNED.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read_trim(p: &Path) -> Result<String, ConfineError> {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(os(format!("read {}", p.display())))
}

fn write_str(p: &Path, s: &str) -> Result<(), ConfineError> {
    std::fs::write(p, s).map_err(os(format!("write {s:?} to {}", p.display())))
}

fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The limits to write.
#[derive(Debug, Clone, Default)]
struct Limits {
    quota_us: Option<u64>,
    cpus: Option<Vec<usize>>,
    memory: Option<u64>,
}

impl Limits {
    fn needs(&self, c: Ctrl) -> bool {
        match c {
            Ctrl::Cpu => self.quota_us.is_some(),
            Ctrl::Cpuset => self.cpus.is_some(),
            Ctrl::Memory => self.memory.is_some(),
        }
    }
}

/// `mkdir`, fine if it exists.
fn mkdir_ok(p: &Path) -> Result<(), ConfineError> {
    match std::fs::create_dir(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(os(format!("mkdir {}", p.display()))(e)),
    }
}

/// In a v1 cpuset hierarchy a cgroup takes no task until `cpuset.cpus` and
/// `cpuset.mems` are set: copy them from the parent if empty.
fn init_cpuset_v1(dir: &Path) -> Result<(), ConfineError> {
    let parent = dir.parent().unwrap_or(dir);
    for f in ["cpuset.cpus", "cpuset.mems"] {
        if read_trim(&dir.join(f))?.is_empty() {
            write_str(&dir.join(f), &read_trim(&parent.join(f))?)?;
        }
    }
    Ok(())
}

/// v2: enable `ctrls` for the children of `dir`.
fn enable_v2(dir: &Path, ctrls: &[Ctrl]) -> Result<(), ConfineError> {
    let have = read_trim(&dir.join("cgroup.subtree_control"))?;
    let avail = read_trim(&dir.join("cgroup.controllers"))?;
    for c in ctrls {
        if have.split(' ').any(|x| x == c.name()) {
            continue;
        }
        if !avail.split(' ').any(|x| x == c.name()) {
            return Err(ConfineError::Unsupported(format!(
                "cgroup v2: the {} controller is not available in {}",
                c.name(),
                dir.display()
            )));
        }
        let p = dir.join("cgroup.subtree_control");
        std::fs::write(&p, format!("+{}", c.name())).map_err(|source| ConfineError::Os {
            what: format!("enable the {} controller in {}", c.name(), p.display()),
            source,
        })?;
    }
    Ok(())
}

/// Remove the cgroups under `parent` that a host killed before it could
/// clean up left behind: empty ones (rmdir fails on a cgroup with a task)
/// made more than ten seconds ago (a new one gets its task within
/// milliseconds, so no host is between creating it and using it), except
/// the ones this host still owns.
fn sweep_stale(parent: &Path, owned: &BTreeSet<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        if owned.contains(&e.path()) {
            continue;
        }
        let old = e
            .metadata()
            .ok()
            .filter(std::fs::Metadata::is_dir)
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(10));
        if old {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

impl Cgroups {
    /// Create the cgroup directories of instance `name`, with `limits`.
    fn create(hier: &Hierarchy, name: &str, limits: &Limits) -> Result<Self, ConfineError> {
        let parents: Vec<(PathBuf, Vec<Ctrl>)> = match hier {
            Hierarchy::V1(list) => {
                for c in Ctrl::ALL {
                    if limits.needs(c) && !list.iter().any(|(_, cs)| cs.contains(&c)) {
                        return Err(ConfineError::Unsupported(format!(
                            "cgroup v1: no {} hierarchy is mounted, neither in the daemon's mount namespace nor in PID 1's; mount it (`mount -t cgroup -o {} cgroup /sys/fs/cgroup/{}`; with `ip netns exec NS vrhost daemon`, use `vrhost daemon --netns NS`), or leave out the VR's `{}`",
                            c.name(),
                            c.name(),
                            c.name(),
                            c.limit_field(),
                        )));
                    }
                }
                list.iter()
                    .map(|(own, cs)| (own.join("vrhost"), cs.clone()))
                    .collect()
            }
            Hierarchy::V2(own) => {
                let need: Vec<Ctrl> = Ctrl::ALL.into_iter().filter(|&c| limits.needs(c)).collect();
                let parent = own.join("vrhost");
                if !need.is_empty() {
                    if let Err(e) = enable_v2(own, &need) {
                        // A cgroup with processes gives no controller to
                        // children ("no internal processes"): move the
                        // host into a leaf of its own and try again.
                        let busy = matches!(&e, ConfineError::Os { source, .. }
                            if source.raw_os_error() == Some(libc::EBUSY));
                        let root = own == Path::new("/sys/fs/cgroup");
                        if !busy || root {
                            return Err(e);
                        }
                        let leaf = own.join("host");
                        mkdir_ok(&leaf)?;
                        write_str(&leaf.join("cgroup.procs"), "0")?;
                        enable_v2(own, &need)?;
                    }
                    mkdir_ok(&parent)?;
                    enable_v2(&parent, &need)?;
                }
                vec![(parent, need)]
            }
        };
        let v1 = matches!(hier, Hierarchy::V1(_));
        // Held until the directories are made and recorded: a `remove` on
        // another thread then either is done with a name or still owns it.
        let mut own = owned();
        for (parent, _) in &parents {
            sweep_stale(parent, &own);
        }
        let (mut n, mut vanished) = (0, 0);
        while n < 1000 {
            let leaf = if n == 0 {
                name.to_string()
            } else {
                format!("{name}-{n}")
            };
            // Plain paths until recorded: a `Cgroups` dropped here would
            // take the lock this holds.
            let mut made: Vec<PathBuf> = Vec::new();
            let (mut taken, mut failed) = (false, None);
            for (parent, cs) in &parents {
                let ready =
                    mkdir_ok(parent).and_then(|()| match v1 && cs.contains(&Ctrl::Cpuset) {
                        true => init_cpuset_v1(parent),
                        false => Ok(()),
                    });
                if let Err(e) = ready {
                    failed = Some(e);
                    break;
                }
                let dir = parent.join(&leaf);
                let made_now = match own.contains(&dir) {
                    true => Err(io::ErrorKind::AlreadyExists.into()),
                    false => std::fs::create_dir(&dir),
                };
                match made_now {
                    Ok(()) => made.push(dir),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        taken = true;
                        n += 1;
                        break;
                    }
                    // The parent went (the last VR of another host left
                    // just then): make it again, same name.
                    Err(e) if e.kind() == io::ErrorKind::NotFound && vanished < 10 => {
                        taken = true;
                        vanished += 1;
                        break;
                    }
                    Err(e) => {
                        failed = Some(os(format!("mkdir {}", dir.display()))(e));
                        break;
                    }
                }
            }
            if taken || failed.is_some() {
                // Just made, empty, not recorded.
                for d in made {
                    let _ = std::fs::remove_dir(d);
                }
                match failed {
                    Some(e) => return Err(e),
                    None => continue,
                }
            }
            own.extend(made.iter().cloned());
            drop(own);
            let made = Self { dirs: made };
            for ((_, cs), dir) in parents.iter().zip(&made.dirs) {
                Self::write_limits(dir, cs, limits, v1)?;
            }
            return Ok(made);
        }
        Err(ConfineError::Unsupported(format!(
            "no free cgroup name for {name}"
        )))
    }

    fn write_limits(dir: &Path, cs: &[Ctrl], l: &Limits, v1: bool) -> Result<(), ConfineError> {
        for c in cs {
            match (c, v1) {
                (Ctrl::Cpu, true) => {
                    if let Some(q) = l.quota_us {
                        write_str(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                        write_str(&dir.join("cpu.cfs_quota_us"), &q.to_string())?;
                    }
                }
                (Ctrl::Cpu, false) => {
                    if let Some(q) = l.quota_us {
                        write_str(&dir.join("cpu.max"), &format!("{q} {PERIOD_US}"))?;
                    }
                }
                (Ctrl::Cpuset, true) => {
                    init_cpuset_v1(dir)?;
                    if let Some(cpus) = &l.cpus {
                        write_str(&dir.join("cpuset.cpus"), &cpu_list(cpus))?;
                    }
                }
                (Ctrl::Cpuset, false) => {
                    if let Some(cpus) = &l.cpus {
                        write_str(&dir.join("cpuset.cpus"), &cpu_list(cpus))?;
                    }
                }
                // No swap beyond the limit (a VR that swaps stalls its
                // tenant's traffic; it is better killed and restarted).
                (Ctrl::Memory, true) => {
                    if let Some(m) = l.memory {
                        write_str(&dir.join("memory.limit_in_bytes"), &m.to_string())?;
                        let sw = dir.join("memory.memsw.limit_in_bytes");
                        if sw.exists() {
                            write_str(&sw, &m.to_string())?;
                        }
                    }
                }
                (Ctrl::Memory, false) => {
                    if let Some(m) = l.memory {
                        write_str(&dir.join("memory.max"), &m.to_string())?;
                        let sw = dir.join("memory.swap.max");
                        if sw.exists() {
                            write_str(&sw, "0")?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Put the group in the idle scheduling class (`cpu.idle`, Linux 5.15+,
    /// v1 and v2) or take it out. An idle group runs only on what other
    /// groups leave and is preempted at once when one of theirs wakes up.
    /// A no-op where the group has no `cpu.idle` (no cpu controller).
    pub fn set_idle(&self, idle: bool) {
        for dir in &self.dirs {
            let f = dir.join("cpu.idle");
            if f.exists() {
                let _ = std::fs::write(&f, if idle { "1" } else { "0" });
            }
        }
    }

    /// The directories.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Remove the directories (the process must have been reaped): retries
    /// for up to half a second while the kernel still counts the task
    /// (`EBUSY`). Then the `vrhost` parents go too if they are empty.
    pub fn remove(&mut self) {
        self.remove_with(100);
    }

    fn remove_with(&mut self, tries: u32) {
        for dir in std::mem::take(&mut self.dirs) {
            for i in 0..tries {
                let mut own = owned();
                match std::fs::remove_dir(&dir) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) && i + 1 < tries => {
                        drop(own);
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    // Gone, or left for a later sweep.
                    _ => {
                        own.remove(&dir);
                        break;
                    }
                }
            }
            // Fails (EBUSY) while other VRs have cgroups there.
            if let Some(p) = dir.parent() {
                let _ = std::fs::remove_dir(p);
            }
        }
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        // One try: a process still in it keeps it (and is not waited for).
        self.remove_with(1);
    }
}

// ---------------------------------------------------------------------------
// Seccomp.

#[cfg(target_arch = "x86_64")]
fn filters() -> Result<Vec<Vec<libc::sock_filter>>, ConfineError> {
    use std::collections::BTreeMap;

    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
        SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
    };

    let bad = |e: seccompiler::BackendError| ConfineError::Unsupported(format!("seccomp: {e}"));
    // Dword: the kernel reads pids and ioctl requests as 32-bit values.
    let arg_is = |idx: u8, len: Len, op: Op, v: u64| -> Result<SeccompRule, ConfineError> {
        SeccompRule::new(vec![Cond::new(idx, len, op, v).map_err(bad)?]).map_err(bad)
    };
    let plain: &[libc::c_long] = &[
        // loading the program
        libc::SYS_execve,
        libc::SYS_brk,
        libc::SYS_arch_prctl,
        libc::SYS_set_tid_address,
        libc::SYS_set_robust_list,
        libc::SYS_rseq,
        libc::SYS_openat,
        libc::SYS_open,
        libc::SYS_newfstatat,
        libc::SYS_fstat,
        libc::SYS_stat,
        libc::SYS_lstat,
        libc::SYS_statx,
        libc::SYS_access,
        libc::SYS_faccessat,
        libc::SYS_faccessat2,
        libc::SYS_pread64,
        libc::SYS_readlink,
        libc::SYS_readlinkat,
        libc::SYS_getrandom,
        libc::SYS_uname,
        libc::SYS_prctl,
        // memory
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        // files it may read
        libc::SYS_read,
        libc::SYS_readv,
        libc::SYS_write,
        libc::SYS_writev,
        libc::SYS_close,
        libc::SYS_lseek,
        libc::SYS_fcntl,
        libc::SYS_getdents64,
        // its control socket and doorbells
        libc::SYS_recvmsg,
        libc::SYS_sendmsg,
        libc::SYS_recvfrom,
        libc::SYS_sendto,
        libc::SYS_poll,
        libc::SYS_ppoll,
        // scheduling and time
        libc::SYS_sched_yield,
        libc::SYS_sched_getaffinity,
        libc::SYS_getcpu,
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_gettimeofday,
        libc::SYS_nanosleep,
        libc::SYS_clock_nanosleep,
        // threads and signals of its own
        libc::SYS_futex,
        libc::SYS_exit,
        libc::SYS_exit_group,
        libc::SYS_gettid,
        libc::SYS_getpid,
        libc::SYS_getppid,
        libc::SYS_rt_sigaction,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigreturn,
        libc::SYS_sigaltstack,
        libc::SYS_restart_syscall,
        libc::SYS_getuid,
        libc::SYS_geteuid,
        libc::SYS_getgid,
        libc::SYS_getegid,
        libc::SYS_getresuid,
        libc::SYS_getresgid,
        libc::SYS_getgroups,
    ];
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        plain.iter().map(|&n| (n, Vec::new())).collect();
    // Own process only (pid 0).
    rules.insert(libc::SYS_prlimit64, vec![arg_is(0, Len::Dword, Op::Eq, 0)?]);
    rules.insert(
        libc::SYS_sched_setaffinity,
        vec![arg_is(0, Len::Dword, Op::Eq, 0)?],
    );
    // Threads, never processes.
    let thread = libc::CLONE_THREAD as u64;
    rules.insert(
        libc::SYS_clone,
        vec![arg_is(0, Len::Qword, Op::MaskedEq(thread), thread)?],
    );
    // ioctl: non-blocking mode, close-on-exec, bytes to read, isatty.
    rules.insert(
        libc::SYS_ioctl,
        [libc::FIONBIO, libc::FIOCLEX, libc::FIONREAD, libc::TCGETS]
            .into_iter()
            .map(|r| arg_is(1, Len::Dword, Op::Eq, r))
            .collect::<Result<_, _>>()?,
    );
    let allow = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        TargetArch::x86_64,
    )
    .map_err(bad)?;
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        TargetArch::x86_64,
    )
    .map_err(bad)?;
    let mut out = Vec::new();
    for f in [allow, clone3] {
        let prog: BpfProgram = f.try_into().map_err(bad)?;
        out.push(
            prog.iter()
                .map(|i| libc::sock_filter {
                    code: i.code,
                    jt: i.jt,
                    jf: i.jf,
                    k: i.k,
                })
                .collect(),
        );
    }
    Ok(out)
}

#[cfg(not(target_arch = "x86_64"))]
fn filters() -> Result<Vec<Vec<libc::sock_filter>>, ConfineError> {
    Err(ConfineError::Unsupported(format!(
        "seccomp: no allowlist for {}",
        std::env::consts::ARCH
    )))
}

// ---------------------------------------------------------------------------
// The child's side.

/// Steps of the child, as reported through the failure pipe.
const STEPS: [&str; 9] = [
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
const STEP_CGROUP: u32 = 1;
const STEP_NETNS: u32 = 2;
const STEP_FDS: u32 = 3;
const STEP_GROUPS: u32 = 4;
const STEP_GID: u32 = 5;
const STEP_UID: u32 = 6;
const STEP_NNP: u32 = 7;
const STEP_SECCOMP: u32 = 8;

/// Everything the child needs, prepared before the fork (the child only
/// makes system calls on it: no allocation, no locks).
pub(crate) struct Prepared {
    ids: Option<Ids>,
    netns: bool,
    nnp: bool,
    close_fds: bool,
    clean_env: bool,
    filters: Vec<Vec<libc::sock_filter>>,
    /// `cgroup.procs` of each new cgroup, open for writing.
    procs: Vec<OwnedFd>,
    /// The failure pipe: (read end, write end).
    report: Option<(OwnedFd, OwnedFd)>,
    cgroups: Option<Cgroups>,
    program: PathBuf,
}

fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
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
unsafe fn child_steps(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("64 MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("1X").is_err());
        assert!(parse_bytes("M").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert!(online_cpus() >= 1);
    }

    #[test]
    fn v1_layout_from_mountinfo() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:10 - cgroup cgroup rw,cpu,cpuacct
32 25 0:28 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
33 25 0:29 /outer /sys/fs/cgroup/mem\\040ory rw,relatime - cgroup cgroup rw,memory
34 25 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
";
        let self_cgroup = "4:memory:/outer/svc\n3:cpuset:/\n1:cpu:/a/b\n0::/\n";
        let got = parse_v1(mountinfo, self_cgroup);
        assert_eq!(
            got,
            vec![
                (PathBuf::from("/sys/fs/cgroup/cpu/a/b"), vec![Ctrl::Cpu]),
                (PathBuf::from("/sys/fs/cgroup/cpuset"), vec![Ctrl::Cpuset]),
                (
                    PathBuf::from("/sys/fs/cgroup/mem ory/svc"),
                    vec![Ctrl::Memory]
                ),
            ]
        );
    }

    #[test]
    fn users_resolve() {
        assert_eq!(resolve_user("nobody").unwrap().uid, 65534);
        assert_eq!(resolve_user("65534").unwrap(), Ids::NOBODY);
        assert_eq!(resolve_user("4000000").unwrap().gid, 4_000_000);
        assert!(
            resolve_user("no-such-user-here")
                .unwrap_err()
                .contains("no user")
        );
        assert!(resolve_user("root").unwrap_err().contains("root"));
        assert!(resolve_user("0").is_err());
    }

    #[test]
    fn access_is_judged_by_mode_bits() {
        let dir = std::env::temp_dir().join(format!("vrhost-confine-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let f = dir.join("routes.txt");
        std::fs::write(&f, "x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        set(&dir, 0o755);
        set(&f, 0o644);
        let owner = std::fs::metadata(&f).unwrap().uid();
        let other = Ids {
            uid: owner.wrapping_add(12345),
            gid: 4_000_001,
        };
        let r = check_access(&f, other, false);
        set(&f, 0o600);
        let r2 = check_access(&f, other, false);
        set(&f, 0o644);
        set(&dir, 0o700);
        let r3 = check_access(&f, other, false);
        set(&dir, 0o755);
        let r4 = check_access(&f, other, true);
        // A program is executed through the host's descriptor: only its
        // own mode counts.
        set(&f, 0o755);
        set(&dir, 0o700);
        let r5 = check_access(&f, other, true);
        set(&dir, 0o755);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(r.is_ok(), "{r:?}");
        assert!(r2.unwrap_err().contains("cannot be read"));
        assert!(r3.unwrap_err().contains("cannot be searched"));
        assert!(r4.unwrap_err().contains("cannot be executed"));
        assert!(r5.is_ok(), "{r5:?}");
    }

    fn bare(program: &str) -> Prepared {
        Prepared {
            ids: None,
            netns: false,
            nnp: false,
            close_fds: false,
            clean_env: false,
            filters: Vec::new(),
            procs: Vec::new(),
            report: Some(pipe_cloexec().unwrap()),
            cgroups: None,
            program: program.into(),
        }
    }

    /// A step that fails in the child is reported by name; an exec that
    /// fails after the steps too.
    #[test]
    fn failures_in_the_child_are_named() {
        // A "cgroup.procs" that refuses the write (opened read-only).
        let mut prep = bare("/bin/true");
        prep.procs
            .push(std::fs::File::open("/dev/null").unwrap().into());
        let mut cmd = Command::new("/bin/true");
        prep.apply(&mut cmd);
        let r = cmd.spawn();
        let e = prep.finish(&r).unwrap().to_string();
        assert!(r.is_err());
        assert!(
            e.contains("before exec: join the cgroup") && e.contains("Bad file descriptor"),
            "{e}"
        );
        let mut prep = bare("/nonexistent/vr");
        let mut cmd = Command::new("/nonexistent/vr");
        prep.apply(&mut cmd);
        let r = cmd.spawn();
        let e = prep.finish(&r).unwrap().to_string();
        assert!(
            e.contains("exec /nonexistent/vr as the host's user") && e.contains("No such file"),
            "{e}"
        );
        // Success reports nothing.
        let mut prep = bare("/bin/true");
        let mut cmd = Command::new("/bin/true");
        prep.apply(&mut cmd);
        let r = cmd.spawn();
        assert!(prep.finish(&r).is_none());
        r.unwrap().wait().unwrap();
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_filters_compile() {
        let f = filters().unwrap();
        assert_eq!(f.len(), 2);
        assert!(f[0].len() > 70 && f[0].len() < 4096, "{}", f[0].len());
    }

    /// cgroup v2 without controllers (the unified tree of a hybrid v1
    /// machine), or the real hierarchy: the directory is made, a process
    /// joins it, and it goes after the process is reaped.
    #[test]
    fn cgroups_are_made_joined_and_removed() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        let mut hiers = vec![detect().unwrap()];
        let unified = Path::new("/sys/fs/cgroup/unified");
        if unified.join("cgroup.controllers").exists() {
            let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
            let own = own
                .lines()
                .find_map(|l| l.strip_prefix("0::"))
                .unwrap_or("/");
            hiers.push(Hierarchy::V2(unified.join(own.trim_start_matches('/'))));
        }
        for hier in hiers {
            let name = format!("unit-test-{}.0", std::process::id());
            let mut cg = Cgroups::create(&hier, &name, &Limits::default()).unwrap();
            assert!(!cg.dirs().is_empty());
            let d = cg.dirs()[0].clone();
            let mut child = std::process::Command::new("sleep")
                .arg("10")
                .spawn()
                .unwrap();
            std::fs::write(d.join("cgroup.procs"), child.id().to_string()).unwrap();
            let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap();
            child.kill().unwrap();
            child.wait().unwrap();
            cg.remove();
            assert!(procs.contains(&child.id().to_string()), "{procs}");
            assert!(!d.exists(), "{} removed", d.display());
        }
    }

    /// The directories of a process that has exited but is not yet stopped
    /// are empty, and old if it ran long: the sweep of stale directories
    /// must leave them to their owner, and a new process of the same VR
    /// must get other names, or the owner's `remove` takes the new one's.
    #[test]
    fn a_new_cgroup_never_takes_the_name_of_one_still_owned() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        let hier = detect().unwrap();
        let name = format!("unit-test-owned-{}.0", std::process::id());
        let mut old = Cgroups::create(&hier, &name, &Limits::default()).unwrap();
        let minute_ago = std::time::SystemTime::now() - Duration::from_secs(60);
        for d in old.dirs() {
            std::fs::File::open(d)
                .and_then(|f| f.set_modified(minute_ago))
                .unwrap();
        }
        let mut new = Cgroups::create(&hier, &name, &Limits::default()).unwrap();
        let (old_dirs, new_dirs) = (old.dirs().to_vec(), new.dirs().to_vec());
        old.remove();
        let kept = new_dirs.iter().all(|d| d.exists());
        let old_gone = old_dirs.iter().all(|d| !d.exists());
        new.remove();
        assert!(old_gone, "{old_dirs:?} removed by their owner");
        assert!(
            kept,
            "{new_dirs:?} (the new process's) kept while {old_dirs:?} go"
        );
        assert!(
            old_dirs.iter().all(|d| !new_dirs.contains(d)),
            "{old_dirs:?} vs {new_dirs:?}"
        );
        assert!(new_dirs.iter().all(|d| !d.exists()));
    }
}
