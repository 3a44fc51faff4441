//! vrhost-testvr: the VR programs that vrhost's tests and benches run, kept
//! out of the `vrhost` binary that users install.
//!
//! What it owns: the hostile VR ([`hostile`], the isolation test and bench),
//! the probe VR ([`probe`], the confinement and recovery tests), the spin VR
//! ([`spin`], the multi-instance bench) and the syscall-per-packet router
//! ([`syscall`], `vrhost bench memory`'s reference), each run as
//! `vrhost-testvr SUBCOMMAND` (`vr-hostile`, `vr-probe`, `vr-spin`,
//! `vr-run-syscall`), and the types the benches read back from them. What
//! it does not own: the built-in router (`vrhost-router`, run as
//! `vrhost vr-run`), the SDK they are written with (`vrhost-sdk`).
//!
//! The tests and benches find the program beside the `vrhost` executable
//! (the same target directory; [`beside`]); `cargo build` and
//! `cargo test --workspace` build it there.

// `deny`, not `forbid`: two of the VRs opt in below.
#![deny(unsafe_code)]

use std::path::{Path, PathBuf};

pub mod hostile;
#[expect(
    unsafe_code,
    reason = "the confinement tests' VR tries, with raw libc, the system calls confinement refuses"
)]
pub mod probe;
pub mod spin;
#[expect(
    unsafe_code,
    reason = "takes over the control socket its parent placed at a descriptor (from_raw_fd)"
)]
pub mod syscall;

/// The program's file name.
pub const PROGRAM: &str = "vrhost-testvr";

/// The program beside the executable `exe` (the `vrhost` binary, or a test
/// of the workspace: both live in the target directory, a test one level
/// down in `deps/`).
pub fn beside(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    [dir, dir.parent()?]
        .into_iter()
        .map(|d| d.join(PROGRAM))
        .find(|p| p.is_file())
}
