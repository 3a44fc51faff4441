//! Growing a VR's packet pool in the VR's own memory cgroup.
//!
//! A pool's pages belong to whoever first touches them: left to the
//! worker's copies they are the daemon's, outside the VR's `memory` limit.
//! A VR with a limit therefore starts with part of its pool in use
//! ([`crate::vrpath::VrPath::start_small`]); each step of its growth is
//! populated ([`populate_in`]: `fallocate` on the region's memfd) by a
//! short-lived process that joins the VR's memory cgroup first, so the
//! pages are charged to the VR, before the worker puts the step's slots in
//! use. A step that would leave the VR less than [`margin`] under its
//! limit is refused ([`grow`]) rather than taken: an allocation over the
//! limit would wake the cgroup's OOM killer, which would kill the VR. The
//! VR then forwards with the pool it has, and frames beyond it are counted
//! `pool_empty` drops.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::vrpath::GrowStep;

/// The hidden `vrhost` subcommand a step is populated by.
pub const POPULATE_COMMAND: &str = "pool-populate";

/// A step of a VR's pool's growth, for the daemon's grower.
#[derive(Debug)]
pub struct GrowRequest {
    /// The VR's path ([`crate::vrpath::VrPath::id`]).
    pub vr_id: u64,
    /// Its name, for messages.
    pub vr: String,
    /// The step.
    pub step: GrowStep,
    /// Its region's memory (a duplicate of the memfd).
    pub region: OwnedFd,
    /// The cgroup directories of one of its live processes (empty: it has
    /// none of its own).
    pub cgroups: Vec<PathBuf>,
}

/// The directory among `cgroups` whose memory the VR is charged with (v2:
/// the one with `memory.max`; v1: with `memory.limit_in_bytes`).
pub fn memory_dir(cgroups: &[PathBuf]) -> Option<&Path> {
    cgroups
        .iter()
        .find(|d| d.join("memory.max").exists() || d.join("memory.limit_in_bytes").exists())
        .map(PathBuf::as_path)
}

/// Bytes left under the memory limit of cgroup `dir` (`None`: no limit).
///
/// # Errors
/// A limit or usage file that cannot be read or parsed.
pub fn headroom(dir: &Path) -> Result<Option<u64>, String> {
    let read = |f: &str| -> Result<String, String> {
        std::fs::read_to_string(dir.join(f))
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("{}: {e}", dir.join(f).display()))
    };
    let num = |f: &str, s: &str| -> Result<u64, String> {
        s.parse()
            .map_err(|_| format!("{}: {s:?} is not a number", dir.join(f).display()))
    };
    let (limit, usage) = if dir.join("memory.max").exists() {
        let max = read("memory.max")?;
        if max == "max" {
            return Ok(None);
        }
        (
            num("memory.max", &max)?,
            num("memory.current", &read("memory.current")?)?,
        )
    } else {
        let l = read("memory.limit_in_bytes")?;
        let u = read("memory.usage_in_bytes")?;
        (
            num("memory.limit_in_bytes", &l)?,
            num("memory.usage_in_bytes", &u)?,
        )
    };
    // v1's "no limit" is a page-rounded i64::MAX.
    if limit >= 1 << 62 {
        return Ok(None);
    }
    Ok(Some(limit.saturating_sub(usage)))
}

/// Room a step of `len` bytes must leave under the limit: half a step
/// more and 4 MiB, for the VR's own memory.
pub fn margin(len: u64) -> u64 {
    len / 2 + (4 << 20)
}

/// Populate `req`'s step in its VR's memory cgroup with `exe`'s
/// [`POPULATE_COMMAND`] (or here, charged to the daemon, when the VR has
/// no memory cgroup of its own).
///
/// # Errors
/// Why the step was not taken: too little room under the VR's limit (the
/// free bytes and the step's), or the populating process's failure.
pub fn grow(req: &GrowRequest, exe: &Path) -> Result<(), String> {
    let GrowStep { offset, len, .. } = req.step;
    let Some(dir) = memory_dir(&req.cgroups) else {
        return fallocate(&req.region, offset, len);
    };
    if let Some(room) = headroom(dir)?
        && room < len + margin(len)
    {
        return Err(format!(
            "{room} bytes free under its memory limit; a step of {len} bytes needs {} more",
            margin(len)
        ));
    }
    let file = format!("/proc/{}/fd/{}", std::process::id(), req.region.as_raw_fd());
    let out = Command::new(exe)
        .arg(POPULATE_COMMAND)
        .arg("--cgroup")
        .arg(dir)
        .args(["--file", &file])
        .args(["--offset", &offset.to_string(), "--len", &len.to_string()])
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{POPULATE_COMMAND} {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// What the populating process does: join cgroup `dir`, then allocate
/// `offset..offset + len` of `file` (a region's memfd, by its
/// `/proc/PID/fd/N` path).
///
/// # Errors
/// The step in words: joining the cgroup, opening the file, allocating.
pub fn populate_in(dir: &Path, file: &Path, offset: u64, len: u64) -> Result<(), String> {
    let procs = dir.join("cgroup.procs");
    std::fs::write(&procs, "0").map_err(|e| format!("join {}: {e}", procs.display()))?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    fallocate(&f, offset, len)
}

fn fallocate(fd: impl std::os::fd::AsFd, offset: u64, len: u64) -> Result<(), String> {
    rustix::fs::fallocate(fd, rustix::fs::FallocateFlags::empty(), offset, len)
        .map_err(|e| format!("allocate {len} bytes at {offset}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_reads_v2_and_v1_limits() {
        let dir = std::env::temp_dir().join(format!("vrhost-pool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("memory.max"), "max\n").unwrap();
        std::fs::write(dir.join("memory.current"), "1000\n").unwrap();
        assert_eq!(headroom(&dir), Ok(None));
        std::fs::write(dir.join("memory.max"), "5000\n").unwrap();
        assert_eq!(headroom(&dir), Ok(Some(4000)));
        std::fs::write(dir.join("memory.current"), "9000\n").unwrap();
        assert_eq!(headroom(&dir), Ok(Some(0)), "over the limit: none");
        std::fs::write(dir.join("memory.current"), "lots\n").unwrap();
        assert!(headroom(&dir).unwrap_err().contains("not a number"));
        assert_eq!(memory_dir(std::slice::from_ref(&dir)), Some(dir.as_path()));
        std::fs::remove_file(dir.join("memory.max")).unwrap();
        assert_eq!(memory_dir(std::slice::from_ref(&dir)), None);
        std::fs::write(dir.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        std::fs::write(dir.join("memory.usage_in_bytes"), "10\n").unwrap();
        assert_eq!(headroom(&dir), Ok(None), "v1 without a limit");
        std::fs::write(dir.join("memory.limit_in_bytes"), "110\n").unwrap();
        assert_eq!(headroom(&dir), Ok(Some(100)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_step_is_allocated_in_the_region_s_memory() {
        let region = vrhost_shm::Region::create(
            "pool-test",
            vrhost_shm::RegionConfig {
                slot_count: 64,
                ..vrhost_shm::RegionConfig::default()
            },
        )
        .unwrap();
        let fd = region.fd().try_clone_to_owned().unwrap();
        let l = region.layout();
        let req = GrowRequest {
            vr_id: 0,
            vr: "t".into(),
            step: GrowStep {
                to: 64,
                offset: l.slots_offset,
                len: 64 * u64::from(l.cfg.slot_bytes),
            },
            region: fd,
            cgroups: Vec::new(),
        };
        let before = rustix::fs::fstat(&req.region).unwrap().st_blocks;
        grow(&req, Path::new("/nonexistent")).unwrap();
        let after = rustix::fs::fstat(&req.region).unwrap().st_blocks;
        assert!(
            after - before >= (req.step.len / 512) as i64,
            "{before} -> {after} blocks"
        );
    }
}
