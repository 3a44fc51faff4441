//! What every bench shares: its report written as JSON or a table
//! ([`emit`]) and drawn ([`plot`]), the table's lines ([`Column`], [`heading`], [`row`],
//! [`opt`], [`mib`]), the quantiles of its samples ([`percentile`]), and the
//! test VR program it may start ([`testvr`]).

use std::fmt::Display;

/// The options of a bench whose report goes through [`emit`].
#[derive(Debug, Clone, clap::Args)]
pub struct Output {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON to this file.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

/// Draw `png` from a report's JSON (`json`) with `script`, a plot script
/// of `scripts/` (Debian's python3-matplotlib; the bench runs from the
/// repository root), which reads the file `--out` wrote, or one written
/// beside the PNG.
///
/// # Errors
/// The JSON cannot be written, or the script does not run or fails.
pub fn plot(
    script: &str,
    json: &str,
    out: Option<&std::path::Path>,
    png: &std::path::Path,
) -> crate::Result<()> {
    use crate::Context;
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => {
            let p = png.with_extension("json");
            std::fs::write(&p, json)?;
            p
        }
    };
    let st = std::process::Command::new(script)
        .arg(&path)
        .arg(png)
        .status()
        .with_context(|| format!("{script} (run from the repository root)"))?;
    if !st.success() {
        crate::bail!("plot failed ({st})");
    }
    eprintln!("plot: {}", png.display());
    Ok(())
}

/// Write a report's JSON to `output.out` if given, then print the JSON
/// (`output.json`) or the report's table.
///
/// # Errors
/// The report does not serialize, or `out` cannot be written.
pub fn emit<R: serde::Serialize>(
    report: &R,
    output: &Output,
    table: impl FnOnce(&R),
) -> crate::Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    if let Some(out) = &output.out {
        std::fs::write(out, &text)?;
    }
    if output.json {
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

/// A column of a bench's table: its heading, its width, its side, and the
/// decimals of its numbers.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    heading: &'static str,
    width: usize,
    left: bool,
    decimals: Option<usize>,
}

impl Column {
    /// A column `width` wide, its cells on the left.
    pub const fn left(heading: &'static str, width: usize) -> Self {
        Column {
            heading,
            width,
            left: true,
            decimals: None,
        }
    }

    /// A column `width` wide, its cells on the right.
    pub const fn right(heading: &'static str, width: usize) -> Self {
        Column {
            heading,
            width,
            left: false,
            decimals: None,
        }
    }

    /// The same column, its numbers written with `decimals` decimals.
    pub const fn decimals(self, decimals: usize) -> Self {
        Column {
            decimals: Some(decimals),
            ..self
        }
    }

    fn cell(&self, value: &dyn Display) -> String {
        let width = self.width;
        // The cell's own `Display` pads it: a `serde_json::Value` ignores
        // width, as it did when each table wrote its own format string.
        match (self.left, self.decimals) {
            (true, None) => format!("{value:<width$}"),
            (false, None) => format!("{value:>width$}"),
            (true, Some(d)) => format!("{value:<width$.d$}"),
            (false, Some(d)) => format!("{value:>width$.d$}"),
        }
    }
}

/// The heading line of a table: each column's heading in its width, one
/// space apart.
pub fn heading(columns: &[Column]) -> String {
    let headings: Vec<String> = columns
        .iter()
        .map(|c| {
            Column {
                decimals: None,
                ..*c
            }
            .cell(&c.heading)
        })
        .collect();
    headings.join(" ")
}

/// A line of a table: `cells[i]` written as `columns[i]` says, one space
/// apart (one cell per column, as the types say).
pub fn row<const N: usize>(columns: &[Column; N], cells: &[&dyn Display; N]) -> String {
    let cells: Vec<String> = columns.iter().zip(cells).map(|(c, v)| c.cell(*v)).collect();
    cells.join(" ")
}

/// `v` with `decimals` decimals, or "-" if there is none.
pub fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.decimals$}"))
}

/// `bytes` in MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

#[cfg(test)]
mod tests {
    use super::{Column, heading, opt, percentile, row};

    #[test]
    fn a_row_is_its_cells_in_their_columns() {
        let columns = [
            Column::left("run", 5),
            Column::right("n", 4),
            Column::right("rate", 7).decimals(1),
        ];
        assert_eq!(heading(&columns), "run      n    rate");
        assert_eq!(row(&columns, &[&"a", &12, &2.26]), "a       12     2.3");
        // A JSON value writes itself whole, without the column's width.
        assert_eq!(
            row(&columns, &[&serde_json::json!(true), &1, &0.0]),
            "true    1     0.0"
        );
        assert_eq!(opt(None, 2), "-");
        assert_eq!(opt(Some(1.0), 2), "1.00");
    }

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
