//! Cgroups of a VR process: which hierarchies are mounted (v2 or v1),
//! the VR's own directories under the daemon's, its limits (CPU quota,
//! memory, cpuset), and removing them when it is stopped.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::{ConfineError, os, remount};

pub(super) const PERIOD_US: u64 = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ctrl {
    Cpu,
    Cpuset,
    Memory,
}

impl Ctrl {
    const ALL: [Ctrl; 3] = [Ctrl::Cpu, Ctrl::Cpuset, Ctrl::Memory];

    pub(super) fn name(self) -> &'static str {
        match self {
            Ctrl::Cpu => "cpu",
            Ctrl::Cpuset => "cpuset",
            Ctrl::Memory => "memory",
        }
    }

    /// The VR field whose limit needs it.
    pub(super) fn limit_field(self) -> &'static str {
        match self {
            Ctrl::Cpu => "cpu_quota",
            Ctrl::Cpuset => "cpus` and `cpu",
            Ctrl::Memory => "memory",
        }
    }
}

/// Where the host's own cgroups are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Hierarchy {
    /// v1: for each mounted hierarchy that carries some of our controllers,
    /// the host's own cgroup directory in it and those controllers.
    V1(Vec<(PathBuf, Vec<Ctrl>)>),
    /// v2: the host's own cgroup directory.
    V2(PathBuf),
}

impl Hierarchy {
    /// No hierarchy that carries one of our controllers.
    pub(super) fn is_empty(&self) -> bool {
        matches!(self, Hierarchy::V1(list) if list.is_empty())
    }
}

/// Undo the octal escapes of a mountinfo field (`\040` for a space).
pub(super) fn unescape(s: &str) -> String {
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
pub(super) fn parse_v1(mountinfo: &str, self_cgroup: &str) -> Vec<(PathBuf, Vec<Ctrl>)> {
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
pub(super) fn detect() -> Result<Hierarchy, ConfineError> {
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

pub(super) fn detect_mounted(self_cgroup: &str) -> Result<Hierarchy, ConfineError> {
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
    pub(super) dirs: Vec<PathBuf>,
}

/// The cgroup directories this host has made and not yet removed: the sweep
/// of stale ones passes them by, and their names count as taken. Without
/// it the sweep took the directory of a VR process that had exited but was
/// not yet stopped (empty, and old if the process had run for more than
/// ten seconds), the process started in its place got the same name, and
/// the old one's [`Cgroups::remove`] then retried on the new one's, which
/// is never empty: half a second per hierarchy, on the worker's thread, so
/// a crashed VR's restart stalled every VR for 1.5 s (`vrhost bench soak`).
pub(super) static OWNED: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

pub(super) fn owned() -> MutexGuard<'static, BTreeSet<PathBuf>> {
    OWNED.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) fn read_trim(p: &Path) -> Result<String, ConfineError> {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(os(format!("read {}", p.display())))
}

pub(super) fn write_str(p: &Path, s: &str) -> Result<(), ConfineError> {
    std::fs::write(p, s).map_err(os(format!("write {s:?} to {}", p.display())))
}

pub(super) fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The limits to write.
#[derive(Debug, Clone, Default)]
pub(super) struct Limits {
    pub(super) quota_us: Option<u64>,
    pub(super) cpus: Option<Vec<usize>>,
    pub(super) memory: Option<u64>,
}

impl Limits {
    pub(super) fn needs(&self, c: Ctrl) -> bool {
        match c {
            Ctrl::Cpu => self.quota_us.is_some(),
            Ctrl::Cpuset => self.cpus.is_some(),
            Ctrl::Memory => self.memory.is_some(),
        }
    }
}

/// `mkdir`, fine if it exists.
pub(super) fn mkdir_ok(p: &Path) -> Result<(), ConfineError> {
    match std::fs::create_dir(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(os(format!("mkdir {}", p.display()))(e)),
    }
}

/// In a v1 cpuset hierarchy a cgroup takes no task until `cpuset.cpus` and
/// `cpuset.mems` are set: copy them from the parent if empty.
pub(super) fn init_cpuset_v1(dir: &Path) -> Result<(), ConfineError> {
    let parent = dir.parent().unwrap_or(dir);
    for f in ["cpuset.cpus", "cpuset.mems"] {
        if read_trim(&dir.join(f))?.is_empty() {
            write_str(&dir.join(f), &read_trim(&parent.join(f))?)?;
        }
    }
    Ok(())
}

/// v2: enable `ctrls` for the children of `dir`.
pub(super) fn enable_v2(dir: &Path, ctrls: &[Ctrl]) -> Result<(), ConfineError> {
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
pub(super) fn sweep_stale(parent: &Path, owned: &BTreeSet<PathBuf>) {
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
    /// The directories under which the VR's cgroups go (`vrhost` in the
    /// daemon's own cgroup of each hierarchy), with the controllers each
    /// must give; on v2, the controllers enabled down to it.
    fn parents(
        hier: &Hierarchy,
        limits: &Limits,
    ) -> Result<Vec<(PathBuf, Vec<Ctrl>)>, ConfineError> {
        Ok(match hier {
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
        })
    }

    /// Create the cgroup directories of instance `name`, with `limits`.
    pub(super) fn create(
        hier: &Hierarchy,
        name: &str,
        limits: &Limits,
    ) -> Result<Self, ConfineError> {
        let parents = Self::parents(hier, limits)?;
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

    pub(super) fn write_limits(
        dir: &Path,
        cs: &[Ctrl],
        l: &Limits,
        v1: bool,
    ) -> Result<(), ConfineError> {
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

    pub(super) fn remove_with(&mut self, tries: u32) {
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
