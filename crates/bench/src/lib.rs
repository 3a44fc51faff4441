//! vrhost-bench: the end-to-end benchmarks behind `vrhost bench ...`. Each
//! prints a table, or with `--json` one object
//! `{"bench": NAME, "machine": {...}, "results": [...]}`.
//!
//! What it owns: each bench's arguments, run and report ([`memory`],
//! [`forward`], [`fastpath`], [`control`], [`cplane`], [`capture`], [`isolation`], [`monitor`],
//! [`soak`], [`fib`], [`cluster`]), what they share ([`report`]: JSON or table,
//! quantiles; [`machine`]: the machine a run was on; [`probe`]: timed
//! frames; [`sched`]: what the scheduler did to a run's threads), and the errors they end with ([`BenchError`]). What it does not
//! own: the command line around it (the `vrhost` binary), what is measured
//! (the host, daemon, router and FIB crates), the VR programs the benches
//! start (`vrhost-testvr`), the criterion micro-benchmarks of each crate.

#![forbid(unsafe_code)]

pub mod capture;
pub mod cluster;
pub mod control;
pub mod cplane;
mod error;
pub mod fastpath;
pub mod fib;
pub mod forward;
pub mod isolation;
pub mod machine;
pub mod memory;
pub mod monitor;
pub mod probe;
pub mod report;
pub mod sched;
pub mod soak;
pub mod tunnel;

pub use error::{BenchError, Context, Result};
