//! `vrhost route import FILE`: read a route file here (not in the daemon), build the FIBs,
//! and say what was in it and how long it took.

use std::path::PathBuf;
use std::time::Instant;

use vrhost_fib::import::{Format, ImportOptions, ImportSummary, ProgressFn, import_summary};

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
