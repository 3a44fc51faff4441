//! `vrhost-testvr vr-probe`: a VR for the confinement and recovery tests (hidden).
//! It forwards like a two-port bridge (vNIC 0 <-> 1), panics on its
//! `panic_at`-th frame if its config says so, reports ready only once it
//! runs in the normal scheduling class if its config has
//! `"ready_when_normal": true`, and answers a control request
//! `{"open": [PATH...], "unix": [PATH...], "tcp": [ADDR...], "syscalls":
//! true, "spin_ms": N, "alloc": BYTES}` with what it could and could not do
//! from inside its process: the
//! errno of each attempt (0: it worked), its descriptors, its
//! `/proc/self/status` credentials and seccomp state, its cgroups, its
//! network namespace and devices, its task name, and its scheduling
//! policy now and while it started. It runs the same SDK runtime as every VR,
//! so it is confined the way a real VR is.
//!
//! The system calls it tries are harmless if they are allowed: anything
//! aimed at another process names a pid that does not exist (a confined VR
//! gets `EPERM` from the filter before the kernel looks the pid up; an
//! unconfined one gets `ESRCH`).

use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use vrhost_sdk::{Packet, Verdict, Vr};

/// A pid that no process has (above the kernel's `pid_max` limit).
const NO_PID: libc::pid_t = i32::MAX;

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Request {
    open: Vec<String>,
    unix: Vec<String>,
    tcp: Vec<String>,
    syscalls: bool,
    /// Spin this long, and say how much CPU time it got.
    spin_ms: Option<u64>,
    /// Allocate and touch this many bytes (and keep them).
    alloc: Option<u64>,
}

struct Probe {
    kept: Vec<Vec<u8>>,
    /// Frames processed.
    frames: u64,
    /// Panic on this frame (1: the first); from `panic_at` in its config.
    panic_at: Option<u64>,
    /// Its scheduling policy while it started (before it was ready).
    policy_at_start: Option<u32>,
}

impl Vr for Probe {
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        self.frames += 1;
        if self.panic_at == Some(self.frames) {
            panic!("probe: frame {} is the one to panic on", self.frames);
        }
        Verdict::Forward(pkt.rx_vnic() ^ 1)
    }

    fn control(&mut self, body: &Value) -> Result<Value, String> {
        let req: Request = serde_json::from_value(body.clone()).map_err(|e| e.to_string())?;
        if let Some(n) = req.alloc {
            let mut v = vec![0u8; usize::try_from(n).map_err(|e| e.to_string())?];
            for b in v.iter_mut().step_by(4096) {
                *b = 1;
            }
            std::hint::black_box(&v);
            self.kept.push(v);
        }
        let mut out = probe(&req);
        out["policy_at_start"] = json!(self.policy_at_start);
        if let Some(ms) = req.spin_ms {
            out["spin"] = spin(Duration::from_millis(ms));
        }
        Ok(out)
    }
}

/// Run the probe VR (the host starts it with its control socket).
pub fn main() -> std::process::ExitCode {
    vrhost_sdk::runtime::main(|hello| {
        let panic_at = match hello.config.get("panic_at") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("panic_at: {v}: a frame number from 1"))?,
            ),
        };
        let policy_at_start = policy();
        if hello.config.get("ready_when_normal") == Some(&json!(true)) {
            // Until the host lifts it out of the idle class (bounded: the
            // host gives up on it long before).
            let t = std::time::Instant::now();
            while policy() == Some(libc::SCHED_IDLE as u32)
                && t.elapsed() < Duration::from_secs(120)
            {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(Probe {
            kept: Vec::new(),
            frames: 0,
            panic_at,
            policy_at_start,
        })
    })
}

/// The calling process's scheduling policy (`SCHED_*`), field 41 of
/// `/proc/self/stat` (the system call may be filtered).
fn policy() -> Option<u32> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields from the third on follow the command name's closing paren.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(38)?.parse().ok()
}

fn errno(r: std::io::Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

/// 0, or the errno of a libc call that returned -1.
fn rc(r: libc::c_long) -> i32 {
    if r < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    } else {
        0
    }
}

fn probe(req: &Request) -> Value {
    let open: BTreeMap<&str, i32> = req
        .open
        .iter()
        .map(|p| (p.as_str(), errno(std::fs::File::open(p).map(drop))))
        .collect();
    let unix: BTreeMap<&str, i32> = req
        .unix
        .iter()
        .map(|p| {
            (
                p.as_str(),
                errno(std::os::unix::net::UnixStream::connect(p).map(drop)),
            )
        })
        .collect();
    let tcp: BTreeMap<&str, i32> = req
        .tcp
        .iter()
        .map(|a| {
            let r = a
                .parse()
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
                .and_then(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(1)))
                .map(drop);
            (a.as_str(), errno(r))
        })
        .collect();
    let status: BTreeMap<String, String> = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| {
            matches!(
                *k,
                "Uid" | "Gid" | "Groups" | "NoNewPrivs" | "Seccomp" | "CapEff" | "CapPrm"
            )
        })
        .map(|(k, v)| {
            (
                k.to_string(),
                v.split_whitespace().collect::<Vec<_>>().join(" "),
            )
        })
        .collect();
    let net_devs: Vec<String> = std::fs::read_to_string("/proc/self/net/dev")
        .unwrap_or_default()
        .lines()
        .skip(2)
        .filter_map(|l| l.split_once(':').map(|(n, _)| n.trim().to_string()))
        .collect();
    json!({
        "pid": std::process::id(),
        "policy": policy(),
        "comm": std::fs::read_to_string("/proc/self/comm").unwrap_or_default().trim_end(),
        "status": status,
        "cgroup": std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
        "netns": std::fs::read_link("/proc/self/ns/net")
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        "net_devs": net_devs,
        "fds": fds(),
        "open": open,
        "unix": unix,
        "tcp": tcp,
        "syscalls": if req.syscalls { syscalls() } else { json!({}) },
    })
}

fn cpu_time() -> Duration {
    rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime)
        .try_into()
        .unwrap_or_default()
}

/// Spin for `wall` and report the CPU time that took.
fn spin(wall: Duration) -> Value {
    let (t0, c0) = (std::time::Instant::now(), cpu_time());
    let mut x = 0u64;
    while t0.elapsed() < wall {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    json!({
        "wall_ms": t0.elapsed().as_millis() as u64,
        "cpu_ms": cpu_time().saturating_sub(c0).as_millis() as u64,
    })
}

/// Every open descriptor and what it is.
fn fds() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for fd in 0..65_536 {
        // SAFETY: the borrow only probes whether `fd` is open and ends here.
        let b = unsafe { BorrowedFd::borrow_raw(fd) };
        if rustix::io::fcntl_getfd(b).is_ok() {
            let what = std::fs::read_link(format!("/proc/self/fd/{fd}"))
                .map(|p| p.display().to_string())
                .unwrap_or_else(|e| format!("? {e}"));
            out.insert(fd.to_string(), what);
        }
    }
    out
}

/// A system call a VR has no business making: its errno (0: it worked).
type SyscallProbe = fn() -> i32;

/// System calls a VR has no business making: each probe's name and its
/// errno (0: it worked).
fn syscalls() -> Value {
    // In this order: the last, if it worked, would change this process.
    let probes: &[(&str, SyscallProbe)] = &[
        ("socket_inet", || socket(libc::AF_INET)),
        ("socket_unix", || socket(libc::AF_UNIX)),
        ("ptrace_peek_host", ptrace_peek_host),
        ("mount", mount),
        ("setuid_0", setuid_0),
        ("kill_other", kill_other),
        ("prlimit_other", prlimit_other),
        ("setaffinity_other", setaffinity_other),
        ("getaffinity_self", getaffinity_self),
        ("mlock", mlock),
        ("memfd_create", memfd_create),
        ("fork", fork),
        ("thread", thread),
        ("unshare_user", unshare_user),
    ];
    let out: BTreeMap<&str, i32> = probes
        .iter()
        .map(|&(name, probe)| (name, probe()))
        .collect();
    json!(out)
}

fn socket(domain: libc::c_int) -> i32 {
    // SAFETY: a plain system call with constant arguments.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd >= 0 {
        // SAFETY: we own `fd`.
        unsafe { libc::close(fd) };
    }
    rc(fd.into())
}

fn ptrace_peek_host() -> i32 {
    // SAFETY: a plain system call; it reads (at most) a word of the parent.
    rc(unsafe { libc::ptrace(libc::PTRACE_PEEKDATA, libc::getppid(), 0usize, 0usize) })
}

fn mount() -> i32 {
    let target = c"/nonexistent-vrhost-probe";
    // SAFETY: constant C strings; the target does not exist.
    rc(unsafe {
        libc::mount(
            c"none".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    }
    .into())
}

fn setuid_0() -> i32 {
    // SAFETY: a plain system call with a constant argument.
    rc(unsafe { libc::syscall(libc::SYS_setuid, 0) })
}

fn kill_other() -> i32 {
    // SAFETY: signal 0 (a check only) to a pid that does not exist.
    rc(unsafe { libc::kill(NO_PID, 0) }.into())
}

fn prlimit_other() -> i32 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a pid that does not exist; `lim` is ours.
    rc(unsafe { libc::prlimit(NO_PID, libc::RLIMIT_NOFILE, std::ptr::null(), &mut lim) }.into())
}

fn setaffinity_other() -> i32 {
    // SAFETY: a zeroed cpu_set_t is valid.
    let set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a pid that does not exist; `set` is ours and its size is given.
    rc(unsafe { libc::sched_setaffinity(NO_PID, std::mem::size_of_val(&set), &set) }.into())
}

fn getaffinity_self() -> i32 {
    // SAFETY: a zeroed cpu_set_t is valid.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is ours and its size is given.
    rc(unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) }.into())
}

fn mlock() -> i32 {
    let page = vec![0u8; 4096];
    // SAFETY: locks (then unlocks) our own buffer.
    rc(unsafe {
        let r = libc::mlock(page.as_ptr().cast(), page.len());
        if r == 0 {
            libc::munlock(page.as_ptr().cast(), page.len());
        }
        r
    }
    .into())
}

fn memfd_create() -> i32 {
    // SAFETY: a constant C string and flags.
    let fd = unsafe { libc::memfd_create(c"probe".as_ptr(), libc::MFD_CLOEXEC) };
    if fd >= 0 {
        // SAFETY: we own `fd`.
        unsafe { libc::close(fd) };
    }
    rc(fd.into())
}

fn fork() -> i32 {
    // SAFETY: fork; the child only calls _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: in the child: leave at once.
        unsafe { libc::_exit(0) };
    }
    if pid > 0 {
        // SAFETY: reap our own child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    }
    rc(pid.into())
}

fn thread() -> i32 {
    errno(
        std::thread::Builder::new()
            .spawn(|| 42)
            .and_then(|h| match h.join() {
                Ok(42) => Ok(()),
                _ => Err(std::io::Error::other("the thread failed")),
            }),
    )
}

fn unshare_user() -> i32 {
    // SAFETY: a plain system call with a constant argument (if it worked it
    // would only move this process into a new user namespace).
    rc(unsafe { libc::unshare(libc::CLONE_NEWUSER) }.into())
}
