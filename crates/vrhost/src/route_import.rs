//! `vrhost route import FILE`: read a route file here (not in the daemon), build the FIBs,
//! and say what was in it and how long it took.

use std::path::Path;
use std::time::Instant;

use vrhost_fib::import::{ImportOptions, ImportSummary, import_summary};

/// Run `vrhost route import`: import `file`, build the FIBs, print counts per family, time
/// and warnings (as JSON if `json`). `opts.progress`, if given, is called while reading
/// (the binary draws the bar).
///
/// # Errors
/// The import fails (the message names the line or byte offset).
pub fn run_route_import(
    file: &Path,
    opts: &ImportOptions,
    json: bool,
) -> anyhow::Result<ImportSummary> {
    let bar = opts.progress.is_some();
    let t = Instant::now();
    let s = import_summary(file, opts);
    if bar {
        // End the bar's line before anything else is printed.
        eprintln!();
    }
    let s = s.map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    if json {
        println!("{}", serde_json::to_string(&s)?);
    } else {
        s.print();
        eprintln!("({:.0} ms in all)", t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(s)
}
