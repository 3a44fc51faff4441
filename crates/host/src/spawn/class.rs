//! A VR process's scheduling class: the idle class while it starts beside
//! VRs that forward, then the normal class with a short time slice.

use std::time::Duration;

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
/// time on its core ([`VrCommand::idle_start`](super::VrCommand::idle_start)) before it takes a normal
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
pub(super) fn set_class(pid: u32, idle: bool, slice: Option<Duration>) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// `sched_getscheduler` of every thread of `pid`.
    fn policies(pid: u32) -> Vec<i32> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .map(|t| {
                t.unwrap()
                    .file_name()
                    .to_str()
                    .unwrap()
                    .parse::<i32>()
                    .unwrap()
            })
            // SAFETY: sched_getscheduler only reads the policy of a thread.
            .map(|tid| unsafe { libc::sched_getscheduler(tid) })
            .collect()
    }

    #[test]
    fn a_process_moves_to_the_idle_class_and_back() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        set_class(pid, true, None).unwrap();
        let idle = policies(pid);
        set_class(pid, false, Some(Duration::from_micros(500))).unwrap();
        let normal = policies(pid);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(idle, [libc::SCHED_IDLE]);
        assert_eq!(normal, [libc::SCHED_OTHER]);
    }

    #[test]
    fn a_process_that_is_gone_is_an_error() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(set_class(pid, true, None).is_err());
    }
}
