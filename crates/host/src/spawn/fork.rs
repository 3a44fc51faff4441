//! Forking a VR process: its control socket as descriptor 3, its program
//! executed through a descriptor the host opened, and every fork done by
//! one thread that lives as long as the host.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError, mpsc};

use vrhost_proto::CTRL_FD_ENV;
use vrhost_shm::fdpass::seqpacket_pair;

use crate::confine::Prepared;

/// Descriptor number of the control socket in the child.
pub(crate) const CHILD_CTRL_FD: i32 = 3;

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
pub(super) fn spawn_inner(
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
#[cfg(test)]
mod tests {
    use std::time::Duration;

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

    #[test]
    fn the_child_gets_its_control_socket_as_descriptor_3() {
        // The shell reports what descriptor 3 is and the variable naming it.
        let (mut child, ours) = spawn_with_ctrl(
            Path::new("sh"),
            &[
                "-c".into(),
                format!("test -S /proc/self/fd/3 && echo \"${CTRL_FD_ENV}\" >&3"),
            ],
        )
        .unwrap();
        assert!(child.wait().unwrap().success());
        let mut buf = [0u8; 16];
        let (n, _) =
            vrhost_shm::fdpass::recv_with_fds(std::os::fd::AsFd::as_fd(&ours), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"3\n");
    }
}
