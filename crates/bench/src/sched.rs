//! What the scheduler did to a process tree over a span, from `/proc`:
//! per thread, its time on a CPU and waiting for one (`schedstat`, in
//! nanoseconds), its context switches (`status`), and each CPU's steal
//! time (`/proc/stat`: the hypervisor running something else on the
//! vCPU). A bench that loses frames below its peak reads here whether a
//! thread was kept from its core, and by whom: another task (wait) or the
//! machine (steal).

use std::time::Instant;

/// One thread's counters at one moment.
#[derive(Debug, Clone)]
pub struct Task {
    /// Its process.
    pub pid: u32,
    /// Itself.
    pub tid: u32,
    /// Its name (`comm`).
    pub comm: String,
    /// Nanoseconds it ran.
    pub cpu_ns: u64,
    /// Nanoseconds it was runnable but waited for a CPU.
    pub wait_ns: u64,
    /// Context switches it asked for (sleeps, yields).
    pub voluntary: u64,
    /// Context switches forced on it (preempted).
    pub involuntary: u64,
}

/// (pid, parent pid) of every process.
fn parents() -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command (which may hold spaces), from field 3.
        let rest = &stat[stat.rfind(')')? + 2..];
        let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
        Some((pid, ppid))
    })
    .collect()
}

/// The children of process `pid`, from its threads' `children` files
/// (`CONFIG_PROC_CHILDREN`); `None` if the kernel has none.
fn children(pid: u32) -> Option<Vec<u32>> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Ok(s) = std::fs::read_to_string(e.path().join("children")) else {
            // A thread that exited meanwhile has no file; a kernel without
            // the option has it for no thread.
            if e.path().exists() {
                return None;
            }
            continue;
        };
        out.extend(s.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
    }
    Some(out)
}

/// `root` and the processes under it.
///
/// Read from the tree's own `children` files: a few reads, where a scan of
/// every process's `stat` (the fallback, for kernels without them) takes
/// about a millisecond on a small VM, run at the ends of each window
/// (traced 2026-11-27: the bench's thread then held the VR's core for up
/// to 2 ms on a busy machine).
pub fn tree(root: u32) -> Vec<u32> {
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        match children(tree[i]) {
            Some(c) => tree.extend(c),
            None => return tree_by_scan(root),
        }
        i += 1;
    }
    tree
}

/// [`tree`] from every process's parent.
fn tree_by_scan(root: u32) -> Vec<u32> {
    let all = parents();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(all.iter().filter(|x| x.1 == p).map(|x| x.0));
        i += 1;
    }
    tree
}

/// Every thread of the processes `pids` (those gone are left out).
pub fn tasks(pids: &[u32]) -> Vec<Task> {
    let mut out = Vec::new();
    for &pid in pids {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let p = e.path();
            let read = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
            let sched: Vec<u64> = (read("schedstat").split_whitespace())
                .filter_map(|v| v.parse().ok())
                .collect();
            let status = read("status");
            let field = |name: &str| {
                (status.lines())
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0)
            };
            out.push(Task {
                pid,
                tid,
                comm: read("comm").trim().to_string(),
                cpu_ns: sched.first().copied().unwrap_or(0),
                wait_ns: sched.get(1).copied().unwrap_or(0),
                voluntary: field("voluntary_ctxt_switches:"),
                involuntary: field("nonvoluntary_ctxt_switches:"),
            });
        }
    }
    out
}

/// Steal time of each CPU so far, nanoseconds (`/proc/stat`'s eighth
/// column, in ticks of `USER_HZ` = 100 on Linux).
pub fn steal_ns() -> Vec<u64> {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let ticks: u64 = (l.split_whitespace().nth(8))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            ticks * 10_000_000
        })
        .collect()
}

/// The counters of a process tree and of the CPUs at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    at: Instant,
    tasks: Vec<Task>,
    steal: Vec<u64>,
}

impl Snapshot {
    /// The threads of `root` and the processes under it, now.
    pub fn of_tree(root: u32) -> Self {
        Self {
            at: Instant::now(),
            tasks: tasks(&tree(root)),
            steal: steal_ns(),
        }
    }

    /// What happened from `self` to `later`, per second, for the threads
    /// `pick` chooses (those seen at both ends).
    pub fn rates(&self, later: &Self, pick: impl Fn(&Task) -> bool) -> Rates {
        let secs = later.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let mut r = Rates::default();
        for b in later.tasks.iter().filter(|t| pick(t)) {
            let Some(a) = (self.tasks.iter()).find(|a| (a.pid, a.tid) == (b.pid, b.tid)) else {
                continue;
            };
            r.threads += 1;
            r.cpu_ms += b.cpu_ns.saturating_sub(a.cpu_ns) as f64 / 1e6;
            r.wait_ms += b.wait_ns.saturating_sub(a.wait_ns) as f64 / 1e6;
            r.voluntary += b.voluntary.saturating_sub(a.voluntary) as f64;
            r.involuntary += b.involuntary.saturating_sub(a.involuntary) as f64;
        }
        r.cpu_ms /= secs;
        r.wait_ms /= secs;
        r.voluntary /= secs;
        r.involuntary /= secs;
        r
    }

    /// Steal time of `cpu` from `self` to `later`, milliseconds a second.
    pub fn steal_ms(&self, later: &Self, cpu: usize) -> f64 {
        let secs = later.at.duration_since(self.at).as_secs_f64().max(1e-9);
        let d = (later.steal.get(cpu).copied().unwrap_or(0))
            .saturating_sub(self.steal.get(cpu).copied().unwrap_or(0));
        d as f64 / 1e6 / secs
    }
}

/// A group of threads over a span, per second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Threads counted.
    pub threads: usize,
    /// Milliseconds on a CPU, a second.
    pub cpu_ms: f64,
    /// Milliseconds runnable but waiting for a CPU, a second.
    pub wait_ms: f64,
    /// Context switches asked for, a second.
    pub voluntary: f64,
    /// Preemptions, a second.
    pub involuntary: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_thread_shows_its_cpu_and_the_tree_holds_a_child() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let a = Snapshot::of_tree(me);
        assert!(
            a.tasks.iter().any(|t| t.pid == child.id()),
            "the child is in the tree"
        );
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 200 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let b = Snapshot::of_tree(me);
        // Both ways of finding the tree find the child (other tests of
        // this process may start children meanwhile: no equality).
        assert!(tree(me).contains(&child.id()), "children files");
        assert!(tree_by_scan(me).contains(&child.id()), "the scan");
        let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        let mine = a.rates(&b, |t| t.tid == tid);
        assert_eq!(mine.threads, 1);
        // Over 200 ms of spinning this thread ran (on a loaded machine
        // less than all of it, but some).
        assert!(mine.cpu_ms > 0.0, "{mine:?}");
        let none = a.rates(&b, |_| false);
        assert_eq!(none, Rates::default());
        assert_eq!(a.steal.len(), b.steal.len());
        let _ = child.kill();
        let _ = child.wait();
    }
}
