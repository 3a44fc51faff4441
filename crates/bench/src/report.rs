//! What every bench shares: its report written as JSON or a table
//! ([`emit`]), the quantiles of its samples ([`percentile`]), and the test VR
//! program it may start ([`testvr`]).

/// Write a report's JSON to `out` if given, then print the JSON (`json`)
/// or the report's table.
///
/// # Errors
/// The report does not serialize, or `out` cannot be written.
pub fn emit<R: serde::Serialize>(
    report: &R,
    json: bool,
    out: Option<&std::path::Path>,
    table: impl FnOnce(&R),
) -> crate::Result<()> {
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
pub fn testvr(explicit: Option<&std::path::Path>) -> crate::Result<std::path::PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let exe = std::env::current_exe()?;
    vrhost_testvr::beside(&exe).ok_or_else(|| {
        crate::failed!(
            "no {} beside {} (build it: cargo build --release -p vrhost-testvr, or give --testvr PATH)",
            vrhost_testvr::PROGRAM,
            exe.display()
        )
    })
}

/// The `q` quantile (0..=1) of `sorted` by nearest rank, `None` if it is
/// empty.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let i = (last as f64 * q).round() as usize;
    Some(sorted[i.min(last)])
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentile_is_the_nearest_rank() {
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        // Index round(99 q): 0.5 -> 50 (49.5 rounds away from zero), 0.99 -> 98.
        assert_eq!(percentile(&v, 0.5), Some(51.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 1.0), Some(100.0));
        // Out of range asks for the ends, never past them.
        assert_eq!(percentile(&v, 2.0), Some(100.0));
    }
}
