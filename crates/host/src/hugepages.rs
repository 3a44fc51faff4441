//! Whether VR regions live in reserved huge pages (`[host] hugepages`).
//!
//! With many busy VRs the worker and the VRs touch thousands of 4 KiB
//! pages of slots a round, more than any TLB holds; a region in 2 MiB
//! pages ([`Region::create_huge`]) is reached through one or two entries.
//! Huge pages come from the kernel's reserved pool
//! (`/proc/sys/vm/nr_hugepages`), which the operator sizes: vrhost never
//! changes it (only `vrhost bench memory --hugepages` does, for its run).
//!
//! Huge pages are charged to the `hugetlb` cgroup controller, not to a
//! VR's `memory.max` (unless cgroup v2 is mounted with
//! `memory_hugetlb_accounting`), so a VR with a `memory` limit keeps its
//! region in ordinary pages under `auto`, and `required` refuses such a
//! VR in the config ([`HugePages::allows_memory_limit`]).

use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use vrhost_shm::{Region, RegionConfig, RegionError};

/// Where VR regions get their pages. In TOML: `"off"`, `"auto"`,
/// `"required"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HugePages {
    /// Ordinary 4 KiB pages (shmem), as before 2026-11-26.
    #[default]
    Off,
    /// Huge pages while the reserved pool has them; a region that finds
    /// none falls back to ordinary pages, with a log line (the first one a
    /// warning, the rest debug).
    Auto,
    /// Huge pages or no VR: a region that finds none fails to start.
    Required,
}

impl HugePages {
    /// Whether a VR with a `memory` limit may be configured (its pool
    /// must be charged to its cgroup, which huge pages are not).
    pub fn allows_memory_limit(self) -> bool {
        self != Self::Required
    }

    /// Create the region `name` of `cfg` by this policy; `limited`: the VR
    /// has a memory limit (its region stays in ordinary pages under
    /// `auto`, see the module's doc).
    ///
    /// # Errors
    /// As [`Region::create`]; with `required`, also
    /// [`RegionError::NoHugePages`].
    pub fn create_region(
        self,
        name: &str,
        cfg: RegionConfig,
        limited: bool,
    ) -> Result<Region, RegionError> {
        match self {
            Self::Off => Region::create(name, cfg),
            Self::Auto if limited => Region::create(name, cfg),
            Self::Required => Region::create_huge(name, cfg),
            Self::Auto => Region::create_huge(name, cfg).or_else(|e| match e {
                RegionError::NoHugePages { .. } => {
                    log_fallback(name, &e);
                    Region::create(name, cfg)
                }
                other => Err(other),
            }),
        }
    }
}

/// Set once the first fallback has been logged as a warning.
static WARNED: AtomicBool = AtomicBool::new(false);

fn log_fallback(name: &str, e: &RegionError) {
    if WARNED.swap(true, Ordering::Relaxed) {
        tracing::debug!(vr = name, "hugepages = auto: {e}; region in 4 KiB pages");
    } else {
        tracing::warn!(
            vr = name,
            "hugepages = auto: {e}; this and later such regions in 4 KiB pages"
        );
    }
}

impl std::fmt::Display for HugePages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Off => "off",
            Self::Auto => "auto",
            Self::Required => "required",
        })
    }
}

impl std::str::FromStr for HugePages {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            "auto" => Ok(Self::Auto),
            "required" => Ok(Self::Required),
            _ => Err(format!("{s:?}: expected off, auto or required")),
        }
    }
}

/// Free huge pages of the default size (`HugePages_Free` of
/// `/proc/meminfo`; 0 when it cannot be read).
pub fn free_huge_pages() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("HugePages_Free:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knob_reads_its_three_values_and_refuses_others() {
        for p in [HugePages::Off, HugePages::Auto, HugePages::Required] {
            assert_eq!(p.to_string().parse::<HugePages>().unwrap(), p);
        }
        assert!(
            "on".parse::<HugePages>()
                .unwrap_err()
                .contains("off, auto or required")
        );
        assert!("".parse::<HugePages>().is_err());
        assert!("Auto".parse::<HugePages>().is_err());
        assert_eq!(HugePages::default(), HugePages::Off);
    }

    #[test]
    fn auto_falls_back_to_small_pages_when_none_are_free() {
        let cfg = RegionConfig::default();
        let pages = vrhost_shm::Layout::new(cfg)
            .unwrap()
            .region_bytes
            .div_ceil(vrhost_shm::HUGE_PAGE_BYTES);
        let free = free_huge_pages();
        let auto = HugePages::Auto.create_region("auto", cfg, false).unwrap();
        let required = HugePages::Required.create_region("required", cfg, false);
        if free < pages {
            assert!(!auto.huge_pages(), "{free} free");
            assert!(matches!(required, Err(RegionError::NoHugePages { .. })));
        } else {
            assert!(auto.huge_pages());
        }
        let limited = HugePages::Auto.create_region("limited", cfg, true).unwrap();
        assert!(
            !limited.huge_pages(),
            "a memory-limited VR keeps 4 KiB pages"
        );
        let off = HugePages::Off.create_region("off", cfg, false).unwrap();
        assert!(!off.huge_pages());
    }
}
