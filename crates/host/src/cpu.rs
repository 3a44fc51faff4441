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
}
