//! Command-line entry points the `vrhost` binary wires up: `vrhost bench fib` and
//! `vrhost route import FILE`. The one module of this crate that uses `anyhow`.

use std::path::PathBuf;
use std::time::Instant;

use crate::bench::{BenchOptions, run};
use crate::import::{Format, ImportOptions, ImportSummary, ProgressFn, import_summary};

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
pub fn run_cli(args: &BenchFibArgs) -> anyhow::Result<()> {
    run_cli_with(args, None)
}

/// [`run_cli`] in a binary that counts live heap bytes (see
/// [`BenchOptions::heap_bytes`]).
///
/// # Errors
/// As [`run_cli`].
pub fn run_cli_with(args: &BenchFibArgs, heap_bytes: Option<fn() -> usize>) -> anyhow::Result<()> {
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
    let report = run(&opts).map_err(|e| anyhow::anyhow!("{}: {e}", args.table.display()))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        report.print_table();
    }
    Ok(())
}

/// `vrhost route import FILE` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct RouteImportArgs {
    /// Route file (text, ipasn, MRT; plain, gzip or bzip2).
    pub file: PathBuf,
    /// Format instead of detecting it: text, ipasn or mrt.
    #[arg(long)]
    pub format: Option<Format>,
    /// On a truncated or corrupt MRT record, keep the routes before it.
    #[arg(long)]
    pub keep_partial: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Run `vrhost route import`: import, build the FIBs, print counts per family, time and
/// warnings. `progress`, if given, is called while reading (the binary draws the bar).
///
/// # Errors
/// The import fails (the message names the line or byte offset).
pub fn run_route_import(
    args: &RouteImportArgs,
    progress: Option<ProgressFn>,
) -> anyhow::Result<ImportSummary> {
    let opts = ImportOptions {
        format: args.format,
        keep_partial: args.keep_partial,
        progress,
    };
    let bar = opts.progress.is_some();
    let t = Instant::now();
    let s = import_summary(&args.file, &opts);
    if bar {
        // End the bar's line before anything else is printed.
        eprintln!();
    }
    let s = s.map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    if args.json {
        println!("{}", serde_json::to_string(&s)?);
    } else {
        s.print();
        eprintln!("({:.0} ms in all)", t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(s)
}
