//! CPU placement and CPU time: pinning threads, reading what a thread or a
//! process has used.

/// Pin the calling thread to `cpu`.
///
/// # Errors
/// The OS error of `sched_setaffinity`.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// Keep the calling thread (and the threads and processes it starts
/// later) off `cpu`, when there is another CPU to go to: the host worker
/// owns its core, and the control plane's work (starting VR processes,
/// answering the API) must not preempt it. Returns whether it did.
///
/// # Errors
/// The OS error of `sched_getaffinity`/`sched_setaffinity`.
pub fn avoid_cpu(cpu: usize) -> std::io::Result<bool> {
    let mut set = rustix::thread::sched_getaffinity(None)?;
    if !set.is_set(cpu) || set.count() < 2 {
        return Ok(false);
    }
    set.unset(cpu);
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(true)
}

/// Set the calling thread's nice value (-20..=19; 19 is a CFS weight of
/// 15 against 1024 at 0). On Linux the nice value belongs to the thread,
/// not the process (setpriority(2), NOTES), and it counts only against
/// threads of the same scheduling group (cgroup or autogroup).
///
/// # Errors
/// The OS error of `setpriority`.
pub fn set_current_thread_nice(nice: i32) -> std::io::Result<()> {
    rustix::process::setpriority_process(None, nice)?;
    Ok(())
}

/// The calling thread at another nice value until this drops, then back
/// at the one it had ([`set_current_thread_nice`]): for one piece of work
/// that must not wait as the rest of its thread's does.
#[must_use = "the nice value is restored when this drops"]
pub struct NiceFor {
    before: i32,
}

impl NiceFor {
    /// Set the calling thread's nice value to `nice` for the guard's life.
    ///
    /// # Errors
    /// The OS error of `getpriority`/`setpriority` (lowering the nice
    /// value needs `CAP_SYS_NICE`).
    pub fn set(nice: i32) -> std::io::Result<Self> {
        let before = rustix::process::getpriority_process(None)?;
        set_current_thread_nice(nice)?;
        Ok(Self { before })
    }
}

impl Drop for NiceFor {
    fn drop(&mut self) {
        let _ = set_current_thread_nice(self.before);
    }
}

/// Put the calling thread in the `SCHED_IDLE` class: it runs only when no
/// thread of its scheduling group (cgroup or autogroup) on its CPU wants
/// to, with a weight of 3 against 1024 at nice 0, and never preempts one
/// (sched(7)). For work done for an operator (a capture) that must not
/// slow the data path.
///
/// # Errors
/// The OS error of `sched_setscheduler`.
pub fn set_current_thread_idle() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid, initialised
    // sched_param that lives across the call, which only reads it.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// CPU time of the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPU time of a whole process, in nanoseconds, from `/proc/PID/schedstat`
/// (exact, unlike the tick-sampled utime/stime).
pub fn process_cpu_ns(pid: u32) -> Option<u64> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let path = task.ok()?.path().join("schedstat");
        let s = std::fs::read_to_string(path).ok()?;
        total += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// What a process's main thread is doing, for the watchdog: whether it is
/// runnable (on a CPU or waiting for one: state `R` of `/proc/PID/stat`),
/// and the CPU time it has had, in nanoseconds (`/proc/PID/schedstat`,
/// exact, unlike the tick-sampled utime/stime; time the hypervisor stole
/// from its virtual CPU is not in it where the kernel accounts steal).
pub fn sched_probe(pid: u32) -> Option<(bool, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let runnable = stat_state(&stat)? == 'R';
    let sched = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    let exec = sched.split_whitespace().next()?.parse().ok()?;
    Some((runnable, exec))
}

/// The state letter of a task's `/proc/PID/stat` line: the first field
/// after the command name (which may hold spaces and parentheses).
fn stat_state(stat: &str) -> Option<char> {
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Number of CPUs online (not the calling thread's affinity, which a
/// pinned thread would see as one).
pub fn cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Count the CPUs of a kernel CPU list such as `0-3,8,10-11`.
fn parse_cpu_list(s: &str) -> Option<usize> {
    let mut n = 0;
    for part in s.split(',') {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_lists() {
        assert_eq!(super::parse_cpu_list("0-1"), Some(2));
        assert_eq!(super::parse_cpu_list("0"), Some(1));
        assert_eq!(super::parse_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(super::parse_cpu_list("3-1"), None);
        assert_eq!(super::parse_cpu_list("x"), None);
    }

    #[test]
    fn a_task_s_state() {
        assert_eq!(super::stat_state("42 (a b) c) S 1 42"), Some('S'));
        assert_eq!(super::stat_state("42 (x) R 1"), Some('R'));
        assert_eq!(super::stat_state("42 (x"), None);
        // This thread (its id names it in /proc too) runs as it reads.
        let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        let (runnable, exec) = super::sched_probe(tid).unwrap();
        assert!(runnable && exec > 0);
        // A sleeping child is not runnable.
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let mut seen = None;
        for _ in 0..200 {
            seen = super::sched_probe(child.id()).map(|p| p.0);
            if seen == Some(false) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(seen, Some(false));
    }

    #[test]
    fn a_nice_value_is_set_for_the_guard_s_life() {
        // On a thread of its own: nice belongs to the thread.
        std::thread::spawn(|| {
            let nice = || rustix::process::getpriority_process(None).unwrap();
            let before = nice();
            let to = (before + 3).min(19);
            {
                let _g = super::NiceFor::set(to).unwrap();
                assert_eq!(nice(), to);
            }
            assert_eq!(nice(), before);
        })
        .join()
        .unwrap();
    }
}
