//! The process limits a daemon with many VRs needs.
//!
//! Each VR instance costs the daemon about six open files (its region's
//! memfd, its doorbell and the host's, its control socket, its pidfd, its
//! cgroups' files while it starts): 612 with 100 one-instance VRs,
//! measured (`crates/vrhost/tests/scale.rs`). The soft limit of 1,024 open
//! files most service managers and shells give would stop a daemon at
//! about 160 VRs, well below what its memory allows, so the daemon raises
//! its soft limit to the hard one before it starts VRs: a limit costs
//! nothing until files are opened, and nothing in the daemon uses
//! `select(2)`, the one reason to keep descriptors below 1,024.

use rustix::process::{Resource, getrlimit, setrlimit};

/// Raise the soft limit on open files to the hard limit (a hard limit
/// of "unlimited" is left alone: the kernel refuses it for open files).
/// Returns the soft limit in force afterwards (`None`: unlimited).
pub fn raise_open_files() -> Option<u64> {
    let mut l = getrlimit(Resource::Nofile);
    if let Some(max) = l.maximum
        && l.current.is_some_and(|cur| cur < max)
    {
        l.current = Some(max);
        // Refused only if the hard limit fell meanwhile: the old one stays.
        let _ = setrlimit(Resource::Nofile, l);
    }
    getrlimit(Resource::Nofile).current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_on_open_files_becomes_the_hard_one() {
        let after = raise_open_files();
        assert_eq!(after, getrlimit(Resource::Nofile).maximum.or(after));
    }
}
