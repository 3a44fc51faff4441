//! The command line of `vrhost bench fib` (the `vrhost` binary wires it up).

use std::path::PathBuf;

use super::{BenchOptions, run};
use crate::BenchError;

/// `vrhost bench fib` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchFibArgs {
    /// Route table in any import format (text, ipasn, MRT; plain, gzip or bzip2).
    #[arg(long, default_value = "../shared/data/fib/ipasn_20140513.dat.gz")]
    pub table: PathBuf,
    /// Random addresses per lookup pass.
    #[arg(long, default_value_t = 1 << 22)]
    pub lookups: usize,
    /// Passes per measurement (best reported).
    #[arg(long, default_value_t = 3)]
    pub passes: usize,
    /// Route changes in the update measurements.
    #[arg(long, default_value_t = 1_000_000)]
    pub updates: usize,
    /// Seed of the random streams.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Do not pin threads to cores.
    #[arg(long)]
    pub no_pin: bool,
    /// Measure vrhost only (skip the other crates).
    #[arg(long)]
    pub only_vrhost: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Run `vrhost bench fib`.
///
/// # Errors
/// The table cannot be imported, or output fails.
pub fn run_cli(args: &BenchFibArgs) -> Result<(), BenchError> {
    run_cli_with(args, None)
}

/// [`run_cli`] in a binary that counts live heap bytes (see
/// [`BenchOptions::heap_bytes`]).
///
/// # Errors
/// As [`run_cli`].
pub fn run_cli_with(
    args: &BenchFibArgs,
    heap_bytes: Option<fn() -> usize>,
) -> Result<(), BenchError> {
    let opts = BenchOptions {
        table: args.table.clone(),
        lookups: args.lookups.max(1),
        passes: args.passes.max(1),
        updates: args.updates,
        seed: args.seed,
        pin: !args.no_pin,
        only_vrhost: args.only_vrhost,
        heap_bytes,
        ..BenchOptions::default()
    };
    let report = run(&opts).map_err(|error| BenchError::Import {
        path: args.table.clone(),
        error,
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        report.print_table();
    }
    Ok(())
}
