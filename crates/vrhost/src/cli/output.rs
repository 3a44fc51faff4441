//! Output of the client commands: aligned tables (the default) or the API's
//! JSON, pretty (`-o json`), and number formats for people.

use std::fmt::Write as _;
use std::io::Write as _;

use serde_json::Value;

/// `-o FORMAT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Aligned tables and short reports.
    #[default]
    Table,
    /// The API's JSON, pretty-printed.
    Json,
}

/// Write `text` to stdout. A reader that went away (`vrhost route list
/// VR --all | head`) ends the output quietly instead of a panic.
///
/// # Errors
/// Any other write error (a full disk).
pub fn out(text: &str) -> std::io::Result<()> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// Print JSON pretty on stdout.
///
/// # Errors
/// As [`out`].
pub fn print_json(v: &Value) -> std::io::Result<()> {
    out(&(serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()) + "\n"))
}

/// A table column: a header and whether its cells align right (numbers).
#[derive(Debug, Clone, Copy)]
pub struct Col {
    name: &'static str,
    right: bool,
}

impl Col {
    /// Left-aligned (names, addresses).
    pub const fn l(name: &'static str) -> Self {
        Col { name, right: false }
    }
    /// Right-aligned (numbers).
    pub const fn r(name: &'static str) -> Self {
        Col { name, right: true }
    }
}

/// A column of a table of `T`s: its header, and how a `T` fills its cell.
pub type Column<'a, T> = (Col, &'a dyn Fn(&T) -> String);

/// A text table: a header line, then rows, columns two spaces apart, no
/// trailing blanks (as `ip -br` or `kubectl get`).
#[derive(Debug, Clone)]
pub struct Table {
    cols: Vec<Col>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns.
    pub fn new(cols: &[Col]) -> Self {
        Table {
            cols: cols.to_vec(),
            rows: Vec::new(),
        }
    }

    /// A table with a row per item of `items`: each column is a header and
    /// how an item fills that column's cell, side by side.
    pub fn of<T>(items: &[T], cols: &[Column<'_, T>]) -> Self {
        let header: Vec<Col> = cols.iter().map(|(c, _)| *c).collect();
        let mut t = Table::new(&header);
        for item in items {
            t.row(cols.iter().map(|(_, cell)| cell(item)));
        }
        t
    }

    /// Add a row (missing cells are empty, extra ones dropped).
    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut r: Vec<String> = cells.into_iter().map(Into::into).collect();
        r.resize(self.cols.len(), String::new());
        self.rows.push(r);
    }

    /// The table as text, each line ending in `\n`.
    pub fn render(&self) -> String {
        let width = |s: &str| s.chars().count();
        let mut w: Vec<usize> = self.cols.iter().map(|c| width(c.name)).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(width(c));
            }
        }
        let mut out = String::new();
        let header: Vec<&str> = self.cols.iter().map(|c| c.name).collect();
        for line in std::iter::once(header).chain(
            self.rows
                .iter()
                .map(|r| r.iter().map(String::as_str).collect()),
        ) {
            let mut s = String::new();
            for (i, cell) in line.iter().enumerate() {
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = w[i] - width(cell);
                if self.cols[i].right {
                    s.extend(std::iter::repeat_n(' ', pad));
                    s.push_str(cell);
                } else {
                    s.push_str(cell);
                    s.extend(std::iter::repeat_n(' ', pad));
                }
            }
            let _ = writeln!(out, "{}", s.trim_end());
        }
        out
    }

    /// Print it on stdout.
    ///
    /// # Errors
    /// As [`out`].
    pub fn print(&self) -> std::io::Result<()> {
        out(&self.render())
    }
}

/// `-` for nothing, else the value.
pub fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// A count or rate with an SI suffix, three significant digits: `0`, `999`,
/// `1.23k`, `45.6M`, `1.00G`. Fractions below 10 keep one decimal (`0.5`).
pub fn si(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_owned();
    }
    let a = x.abs();
    if a < 10.0 && a.fract() != 0.0 {
        return format!("{x:.1}");
    }
    if a < 1000.0 {
        return format!("{x:.0}");
    }
    let (mut v, mut unit) = (x / 1000.0, "k");
    for u in ["M", "G", "T", "P"] {
        if v.abs() < 999.5 {
            break;
        }
        v /= 1000.0;
        unit = u;
    }
    let digits = if v.abs() < 9.995 {
        2
    } else if v.abs() < 99.95 {
        1
    } else {
        0
    };
    format!("{v:.digits$}{unit}")
}

/// A rate as [`si`], or `-` for none (no interval yet).
pub fn rate(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_owned(), si)
}

/// A percentage with one decimal (`12.5`), or `-` for none.
pub fn pct(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_owned(), |x| format!("{x:.1}"))
}

/// Bytes with a binary suffix: `512 B`, `1.5 KiB`, `38.4 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut i = 0;
    while v >= 1023.95 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", UNITS[i])
}

/// Seconds as `3d 04:05:06`, `04:05:06` or `5.2 s`.
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "-".to_owned();
    }
    if secs < 60.0 {
        return format!("{secs:.1} s");
    }
    let s = secs as u64;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// `k=v, k=v` of a counter map (the non-zero ones), or `-`.
pub fn map_list(m: &std::collections::BTreeMap<String, u64>) -> String {
    let parts = m
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k}={v}"));
    join_or_dash(parts, ", ")
}

/// Items joined by commas, or `-`.
pub fn list<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    join_or_dash(items.into_iter().map(|i| i.to_string()), ",")
}

/// `parts` joined by `sep`, or `-` if there are none.
fn join_or_dash(parts: impl Iterator<Item = String>, sep: &str) -> String {
    let parts: Vec<String> = parts.collect();
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(sep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_and_trims() {
        let mut t = Table::new(&[Col::l("NAME"), Col::r("RX"), Col::l("NOTE")]);
        t.row(["tenant-a", "600000", "ok"]);
        t.row(["b", "7", ""]);
        assert_eq!(
            t.render(),
            "NAME          RX  NOTE\n\
             tenant-a  600000  ok\n\
             b              7\n"
        );
    }

    #[test]
    fn table_pads_short_rows_and_counts_chars_not_bytes() {
        let mut t = Table::new(&[Col::l("A"), Col::r("B")]);
        t.row(["é", "1"]);
        t.row(["xyz"]);
        assert_eq!(t.render(), "A    B\né    1\nxyz\n");
        assert_eq!(Table::new(&[Col::l("A")]).render(), "A\n");
    }

    #[test]
    fn table_of_items_puts_each_header_over_its_cells() {
        let t = Table::of(
            &[("a", 1), ("bb", 22)],
            &[
                (Col::l("NAME"), &|x| x.0.to_owned()),
                (Col::r("N"), &|x| x.1.to_string()),
            ],
        );
        assert_eq!(t.render(), "NAME   N\na      1\nbb    22\n");
    }

    #[test]
    fn si_suffixes() {
        assert_eq!(si(0.0), "0");
        assert_eq!(si(0.5), "0.5");
        assert_eq!(si(999.0), "999");
        assert_eq!(si(1234.0), "1.23k");
        assert_eq!(si(45_600_000.0), "45.6M");
        assert_eq!(si(999_999.0), "1.00M");
        assert_eq!(si(123_456_789_012.0), "123G");
        assert_eq!(si(f64::NAN), "-");
    }

    #[test]
    fn byte_and_time_formats() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(38_400_000), "36.6 MiB");
        assert_eq!(duration(5.24), "5.2 s");
        assert_eq!(duration(3725.5), "01:02:05");
        assert_eq!(duration(90_061.0), "1d 01:01:01");
    }

    #[test]
    fn lists() {
        let mut m = std::collections::BTreeMap::new();
        assert_eq!(map_list(&m), "-");
        m.insert("pool_full".to_owned(), 5);
        m.insert("no_match".to_owned(), 0);
        m.insert("a".to_owned(), 1);
        assert_eq!(map_list(&m), "a=1, pool_full=5");
        assert_eq!(list([1, 2]), "1,2");
        assert_eq!(list(Vec::<u32>::new()), "-");
        assert_eq!(opt(Some(3)), "3");
        assert_eq!(opt(None::<u32>), "-");
    }
}
