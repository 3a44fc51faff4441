//! vrhost-bench: the end-to-end benchmarks behind `vrhost bench ...`.
//!
//! What it owns: each bench's arguments, run and report ([`fib`]: vrhost's
//! FIB against other Rust LPM crates), and the errors they end with
//! ([`BenchError`]). What it does not own: the command line around it (the
//! `vrhost` binary), what is measured (the host, daemon, router and FIB
//! crates), the criterion micro-benchmarks of each crate.

mod error;
pub mod fib;

pub use error::BenchError;
