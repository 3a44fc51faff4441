//! The cgroup hierarchies of a daemon started by `ip netns exec`.
//!
//! `ip netns exec NS CMD` runs CMD in a mount namespace of its own (its
//! mounts are slaves of the parent's: nothing mounted here goes back) and
//! mounts a new sysfs on `/sys` there, for the namespace's network devices.
//! That hides every mount under `/sys`, the cgroup hierarchies under
//! `/sys/fs/cgroup` with them; the hierarchies themselves are still there.
//! When the daemon's mount table has no cgroup mount but PID 1's has, the
//! daemon mounts the same hierarchies at the same places in its own mount
//! namespace (a tmpfs first where PID 1 has one above them, since a
//! directory of sysfs takes no new directories). PID 1's mount table is
//! read from `/proc/1/mountinfo`, which anyone may read; its mounts cannot
//! be reached through `/proc/1/root` where PID 1 cannot be traced (a
//! sandbox's init).

use std::ffi::CString;
use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, mount};

use super::{ConfineError, mkdir_ok, unescape};

/// One mount of a mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mount {
    pub(super) point: PathBuf,
    pub(super) fstype: String,
    /// Superblock options (`rw,memory`, `rw,cpu,cpuacct`).
    pub(super) opts: String,
}

/// The mounts of a `mountinfo` table.
pub(super) fn mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let point = pre.split(' ').nth(4)?;
            let mut post = post.split(' ');
            let fstype = post.next()?;
            let opts = post.nth(1)?;
            Some(Mount {
                point: PathBuf::from(unescape(point)),
                fstype: fstype.to_string(),
                opts: opts.to_string(),
            })
        })
        .collect()
}

fn is_cgroup(m: &Mount) -> bool {
    m.fstype == "cgroup" || m.fstype == "cgroup2"
}

/// What to mount, in order, to show `init`'s cgroup hierarchies: each
/// cgroup mount, after the tmpfs mounts above them.
pub(super) fn plan(init: &[Mount]) -> Vec<Mount> {
    let cgroups: Vec<&Mount> = init.iter().filter(|m| is_cgroup(m)).collect();
    init.iter()
        .filter(|m| {
            is_cgroup(m)
                || (m.fstype == "tmpfs"
                    && cgroups
                        .iter()
                        .any(|c| c.point != m.point && c.point.starts_with(&m.point)))
        })
        .cloned()
        .collect()
}

/// Mount `plan` (see [`plan`]) in this process's mount namespace.
fn mount_all(plan: &[Mount]) -> Result<(), ConfineError> {
    let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    for m in plan {
        if !m.point.is_dir() {
            mkdir_ok(&m.point)?;
        }
        // The superblock's options but `rw`/`ro` (flags): a v1 hierarchy
        // is mounted again by naming exactly its controllers.
        let data: Vec<&str> = m
            .opts
            .split(',')
            .filter(|o| !matches!(*o, "rw" | "ro"))
            .collect();
        let data = match m.fstype.as_str() {
            "tmpfs" => "mode=755".to_string(),
            _ => data.join(","),
        };
        let data = CString::new(data).map_err(|_| {
            ConfineError::Unsupported(format!("mount options of {}", m.point.display()))
        })?;
        mount(
            m.fstype.as_str(),
            &m.point,
            m.fstype.as_str(),
            flags,
            data.as_c_str(),
        )
        .map_err(|e| ConfineError::Os {
            what: format!("mount {} on {}", m.fstype, m.point.display()),
            source: e.into(),
        })?;
    }
    Ok(())
}

/// If this process sees no cgroup mount but PID 1 does, mount PID 1's
/// cgroup hierarchies here (see the module's docs); whether it did.
///
/// # Errors
/// A mount that failed, with what to do instead.
pub(super) fn show_hidden_hierarchies() -> Result<bool, ConfineError> {
    // One at a time: VRs may start on several threads.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let own = mounts(&read(Path::new("/proc/self/mountinfo")));
    if own.iter().any(is_cgroup) {
        return Ok(false);
    }
    let init = mounts(&read(Path::new("/proc/1/mountinfo")));
    let plan = plan(&init);
    if plan.is_empty() {
        return Ok(false);
    }
    mount_all(&plan).map_err(|e| {
        ConfineError::Unsupported(format!(
            "the cgroup hierarchies are not mounted in the daemon's mount namespace (`ip netns exec` mounts a new /sys), and mounting them again failed: {e}; start the daemon with `vrhost daemon --netns NS` instead of `ip netns exec NS vrhost daemon`"
        ))
    })?;
    tracing::info!(
        mounts = plan.len(),
        "cgroup hierarchies hidden by a new /sys (ip netns exec): mounted them again in the daemon's own mount namespace, as PID 1 has them"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_is_the_cgroup_mounts_after_the_tmpfs_above_them() {
        let init = "\
23 1 0:22 / /sys rw,nosuid - sysfs sysfs rw
24 1 0:5 / /dev/shm rw - tmpfs tmpfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
";
        let p = plan(&mounts(init));
        let got: Vec<(&str, &str, &str)> = p
            .iter()
            .map(|m| {
                (
                    m.point.to_str().unwrap(),
                    m.fstype.as_str(),
                    m.opts.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("/sys/fs/cgroup", "tmpfs", "rw,mode=755"),
                ("/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct"),
                ("/sys/fs/cgroup/memory", "cgroup", "rw,memory"),
                ("/sys/fs/cgroup/unified", "cgroup2", "rw,nsdelegate"),
            ]
        );
        // v2 alone: no tmpfs.
        let v2 = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(plan(&mounts(v2)).len(), 1);
        assert!(plan(&mounts("24 1 0:5 / /dev/shm rw - tmpfs tmpfs rw\n")).is_empty());
    }
}
