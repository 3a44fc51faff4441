//! `vrhost bench ...`: the end-to-end benchmarks. Each prints a table, or
//! with `--json` one object `{"bench": NAME, "machine": {...}, "results": [...]}`.

pub mod control;
pub mod forward;
pub mod isolation;
pub mod machine;
pub mod memory;
pub mod monitor;
pub mod probe;
pub mod soak;
