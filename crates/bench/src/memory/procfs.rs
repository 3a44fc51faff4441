//! What `bench memory` reads of its processes and threads in `/proc`.

/// Voluntary and involuntary context switches of process `pid`'s threads.
pub(super) fn context_switches(pid: u32) -> Option<(u64, u64)> {
    let mut total = (0, 0);
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let s = std::fs::read_to_string(task.ok()?.path().join("status")).ok()?;
        for line in s.lines() {
            let field = |name: &str| line.strip_prefix(name)?.trim().parse::<u64>().ok();
            if let Some(n) = field("voluntary_ctxt_switches:") {
                total.0 += n;
            } else if let Some(n) = field("nonvoluntary_ctxt_switches:") {
                total.1 += n;
            }
        }
    }
    Some(total)
}

/// CPU time of thread `tid` of this process, ns (its schedstat).
pub(super) fn thread_cpu_ns_of(tid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}
