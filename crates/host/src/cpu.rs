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

/// Number of CPUs this process may run on.
pub fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
