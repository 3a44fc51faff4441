//! `vrhost bench ...`: the end-to-end benchmarks. Each prints a table, or
//! with `--json` one object `{"bench": NAME, "machine": {...}, "results": [...]}`.

pub mod capture;
pub mod control;
pub mod forward;
pub mod isolation;
pub mod machine;
pub mod memory;
pub mod monitor;
pub mod probe;
pub mod soak;

/// Write a report's JSON to `out` if given, then print the JSON (`json`)
/// or the report's table.
///
/// # Errors
/// The report does not serialize, or `out` cannot be written.
pub(crate) fn emit<R: serde::Serialize>(
    report: &R,
    json: bool,
    out: Option<&std::path::Path>,
    table: impl FnOnce(&R),
) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    if let Some(out) = out {
        std::fs::write(out, &text)?;
    }
    if json {
        println!("{text}");
    } else {
        table(report);
    }
    Ok(())
}

/// The test VR program of a bench: `explicit` (its `--testvr`), else
/// `vrhost-testvr` beside this executable.
///
/// # Errors
/// Neither is there.
pub(crate) fn testvr(explicit: Option<&std::path::Path>) -> anyhow::Result<std::path::PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let exe = std::env::current_exe()?;
    vrhost_testvr::beside(&exe).ok_or_else(|| {
        anyhow::anyhow!(
            "no {} beside {} (build it: cargo build --release -p vrhost-testvr, or give --testvr PATH)",
            vrhost_testvr::PROGRAM,
            exe.display()
        )
    })
}
