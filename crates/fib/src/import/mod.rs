//! Route import: plain text (`PREFIX [NEXTHOP]`), ipasn (`PREFIX<TAB>ASN`, `;` comments) and
//! MRT RIB dumps (RFC 6396 TABLE_DUMP_V2), each plain, gzip or bzip2 (detected by magic
//! bytes), the format auto-detected or given.
//!
//! Bad input never panics: a malformed line is an error naming its line number; a truncated
//! or corrupt MRT record is an error naming its byte offset in the decompressed stream, or,
//! with [`ImportOptions::keep_partial`], the end of the import with every whole record kept
//! and the cut reported in [`ImportStats::truncated`]. Host bits set in a prefix are masked
//! and counted ([`ImportStats::host_bits_set`]).

mod mrt;
mod text;

use std::fmt;
use std::io::{self, BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use mrt::{MrtRecordType, parse_mrt};
pub use text::parse_text;

/// Input format of a route file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `PREFIX [NEXTHOP]` per line; `#` or `;` start a comment line.
    Text,
    /// pyasn's ipasn: `PREFIX<TAB>ASN` per line; `;` comments.
    Ipasn,
    /// MRT TABLE_DUMP_V2 (RFC 6396).
    Mrt,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Text => "text",
            Format::Ipasn => "ipasn",
            Format::Mrt => "mrt",
        })
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Format::Text),
            "ipasn" => Ok(Format::Ipasn),
            "mrt" => Ok(Format::Mrt),
            _ => Err(format!("unknown route format {s:?} (text, ipasn, mrt)")),
        }
    }
}

/// Compression of a route file, detected from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (`1f 8b`).
    Gzip,
    /// bzip2 (`BZh`).
    Bzip2,
}

/// Progress of a running import, passed to [`ImportOptions::progress`].
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Bytes read from the file so far (compressed bytes for a compressed file).
    pub bytes: u64,
    /// File size, when known.
    pub total: Option<u64>,
    /// Routes decoded so far.
    pub routes: usize,
}

/// A progress callback; the binary draws the bar.
pub type ProgressFn = Arc<dyn Fn(&Progress) + Send + Sync>;

/// How to import.
#[derive(Clone, Default)]
pub struct ImportOptions {
    /// The format, or `None` to detect it.
    pub format: Option<Format>,
    /// On a truncated or corrupt MRT record (or a cut compressed stream), return what was
    /// decoded before it instead of an error.
    pub keep_partial: bool,
    /// Called every few thousand routes and at the end.
    pub progress: Option<ProgressFn>,
}

impl fmt::Debug for ImportOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImportOptions")
            .field("format", &self.format)
            .field("keep_partial", &self.keep_partial)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// One imported route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Prefix address, host bits cleared.
    pub prefix: IpAddr,
    /// Prefix length.
    pub len: u8,
    /// Next hop, if the source gives one (text: second column; MRT: first RIB entry's).
    pub nexthop: Option<IpAddr>,
    /// Origin AS, if the source gives one (ipasn; MRT: last AS of the first AS_PATH).
    pub asn: Option<u32>,
}

/// An IPv4 route in the FIB's terms (`u32`, host byte order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Route {
    /// Prefix, host bits cleared.
    pub prefix: u32,
    /// Prefix length, 0..=32.
    pub len: u8,
    /// Next hop, if any.
    pub nexthop: Option<IpAddr>,
    /// Origin AS, if any.
    pub asn: Option<u32>,
}

/// An IPv6 route in the FIB's terms (`u128`, host byte order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Route {
    /// Prefix, host bits cleared.
    pub prefix: u128,
    /// Prefix length, 0..=128.
    pub len: u8,
    /// Next hop, if any.
    pub nexthop: Option<IpAddr>,
    /// Origin AS, if any.
    pub asn: Option<u32>,
}

/// Where and why an import stopped early (with [`ImportOptions::keep_partial`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Truncation {
    /// Byte offset in the decompressed stream of the record that could not be read whole.
    pub offset: u64,
    /// Whole records kept before it.
    pub records_kept: u64,
    /// What was wrong.
    pub reason: String,
}

/// Counters of an import.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ImportStats {
    /// Lines (text formats) or records (MRT) read.
    pub records: u64,
    /// Prefixes whose host bits were set (masked and accepted).
    pub host_bits_set: u64,
    /// MRT records of types or subtypes not imported (skipped).
    pub skipped_records: u64,
    /// MRT peers in the PEER_INDEX_TABLE.
    pub peers: u64,
    /// Decompressed bytes consumed.
    pub bytes: u64,
    /// Set when the input was cut or corrupt and `keep_partial` kept what came before.
    pub truncated: Option<Truncation>,
}

/// The routes of a file.
#[derive(Debug, Clone)]
pub struct RouteSet {
    /// Routes in file order (duplicates kept: a later one replaces an earlier one in a FIB).
    pub routes: Vec<Route>,
    /// Format read.
    pub format: Format,
    /// Compression detected.
    pub compression: Compression,
    /// Counters and warnings.
    pub stats: ImportStats,
}

impl RouteSet {
    /// The IPv4 routes, as FIB keys.
    pub fn ipv4(&self) -> impl Iterator<Item = Ipv4Route> + '_ {
        self.routes.iter().filter_map(|r| match r.prefix {
            IpAddr::V4(a) => Some(Ipv4Route {
                prefix: u32::from(a),
                len: r.len,
                nexthop: r.nexthop,
                asn: r.asn,
            }),
            IpAddr::V6(_) => None,
        })
    }

    /// The IPv6 routes, as FIB keys.
    pub fn ipv6(&self) -> impl Iterator<Item = Ipv6Route> + '_ {
        self.routes.iter().filter_map(|r| match r.prefix {
            IpAddr::V6(a) => Some(Ipv6Route {
                prefix: u128::from(a),
                len: r.len,
                nexthop: r.nexthop,
                asn: r.asn,
            }),
            IpAddr::V4(_) => None,
        })
    }

    /// Number of IPv4 and IPv6 routes.
    pub fn counts(&self) -> (usize, usize) {
        let v4 = self.routes.iter().filter(|r| r.prefix.is_ipv4()).count();
        (v4, self.routes.len() - v4)
    }
}

/// Errors of route import.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A text line could not be parsed.
    #[error("line {line}: {msg}")]
    Line {
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        msg: String,
    },
    /// The input ends inside an MRT record or a compressed stream, or a record is corrupt.
    #[error(
        "MRT record at byte offset {offset} unreadable ({reason}); {records_kept} whole records before it (use keep_partial to keep them)"
    )]
    Truncated {
        /// Byte offset of the record in the decompressed stream.
        offset: u64,
        /// Whole records before it.
        records_kept: u64,
        /// What was wrong.
        reason: String,
    },
    /// The input holds no data at all.
    #[error("empty input")]
    Empty,
    /// Reading the (decompressed) input failed.
    #[error("read error after {offset} bytes: {source}")]
    Read {
        /// Decompressed bytes read before the error.
        offset: u64,
        /// The error.
        source: io::Error,
    },
}

/// Counts bytes read through it (for progress).
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        // Relaxed: a plain counter read by the progress callback on the same thread.
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Calls the progress callback with the current counts.
pub(crate) struct Reporter<'a> {
    progress: Option<&'a ProgressFn>,
    count: Arc<AtomicU64>,
    total: Option<u64>,
}

impl Reporter<'_> {
    pub(crate) fn report(&self, routes: usize) {
        if let Some(f) = self.progress {
            f(&Progress {
                bytes: self.count.load(Ordering::Relaxed),
                total: self.total,
                routes,
            });
        }
    }
}

/// Read a route file (see the module docs for formats).
///
/// # Errors
/// [`ImportError`]: the file cannot be read, a line is malformed (with its number), an MRT
/// record is cut or corrupt (with its offset) and `keep_partial` is off, or it is empty.
pub fn read_routes(path: &Path, opts: &ImportOptions) -> Result<RouteSet, ImportError> {
    let file = std::fs::File::open(path).map_err(|source| ImportError::Io {
        path: path.to_owned(),
        source,
    })?;
    let total = file.metadata().ok().map(|m| m.len());
    let count = Arc::new(AtomicU64::new(0));
    let reader = Counting {
        inner: file,
        count: count.clone(),
    };
    let rep = Reporter {
        progress: opts.progress.as_ref(),
        count,
        total,
    };
    read_routes_inner(reader, opts, &rep)
}

/// Read routes from any reader (compression and format detected as for [`read_routes`]).
///
/// # Errors
/// As [`read_routes`].
pub fn read_routes_from<R: Read>(reader: R, opts: &ImportOptions) -> Result<RouteSet, ImportError> {
    let count = Arc::new(AtomicU64::new(0));
    let reader = Counting {
        inner: reader,
        count: count.clone(),
    };
    let rep = Reporter {
        progress: opts.progress.as_ref(),
        count,
        total: None,
    };
    read_routes_inner(reader, opts, &rep)
}

fn read_routes_inner<R: Read>(
    reader: R,
    opts: &ImportOptions,
    rep: &Reporter<'_>,
) -> Result<RouteSet, ImportError> {
    let mut raw = BufReader::with_capacity(1 << 16, reader);
    let head = raw
        .fill_buf()
        .map_err(|source| ImportError::Read { offset: 0, source })?;
    if head.is_empty() {
        return Err(ImportError::Empty);
    }
    let compression = if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(b"BZh") {
        Compression::Bzip2
    } else {
        Compression::None
    };
    let inner: Box<dyn Read + '_> = match compression {
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(raw)),
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(raw)),
        Compression::None => Box::new(raw),
    };
    let mut dec = BufReader::with_capacity(1 << 16, inner);
    let format = match opts.format {
        Some(f) => f,
        None => detect(&mut dec)?,
    };
    let (routes, stats) = match format {
        Format::Text | Format::Ipasn => text::read_text(&mut dec, format, opts, rep)?,
        Format::Mrt => mrt::read_mrt(&mut dec, opts, rep)?,
    };
    rep.report(routes.len());
    Ok(RouteSet {
        routes,
        format,
        compression,
        stats,
    })
}

/// Text if the first bytes are printable ASCII; ipasn if its first data line has a tab
/// and a number; MRT otherwise.
fn detect<R: BufRead>(r: &mut R) -> Result<Format, ImportError> {
    let head = r
        .fill_buf()
        .map_err(|source| ImportError::Read { offset: 0, source })?;
    if head.is_empty() {
        return Err(ImportError::Empty);
    }
    let probe = &head[..head.len().min(512)];
    let texty = probe
        .iter()
        .all(|&b| b == b'\n' || b == b'\r' || b == b'\t' || (0x20..0x7f).contains(&b));
    if !texty {
        return Ok(Format::Mrt);
    }
    let first = probe
        .split(|&b| b == b'\n')
        .map(|l| String::from_utf8_lossy(l).trim().to_owned())
        .find(|l| !l.is_empty() && !l.starts_with(';') && !l.starts_with('#'));
    let ipasn = first.is_some_and(|l| {
        let mut f = l.split('\t');
        f.next().is_some() && f.next().is_some_and(|a| a.trim().parse::<u32>().is_ok())
    });
    Ok(if ipasn || probe.starts_with(b"; IP-ASN") {
        Format::Ipasn
    } else {
        Format::Text
    })
}

/// Parse `ADDR/LEN` (or a bare address as a host route), masking host bits.
/// Returns the masked prefix and whether host bits were set.
pub(crate) fn parse_prefix(s: &str) -> Result<(IpAddr, u8, bool), String> {
    let (a, l) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let addr: IpAddr = a
        .parse()
        .map_err(|_| format!("invalid address {a:?} in prefix {s:?}"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match l {
        None => max,
        Some(l) => {
            let n: u8 = l
                .parse()
                .map_err(|_| format!("invalid prefix length {l:?} in {s:?}"))?;
            if n > max {
                return Err(format!(
                    "prefix length /{n} out of range (max /{max}) in {s:?}"
                ));
            }
            n
        }
    };
    Ok(mask_ip(addr, len))
}

/// Clear host bits; report whether any were set.
pub(crate) fn mask_ip(addr: IpAddr, len: u8) -> (IpAddr, u8, bool) {
    use crate::Key;
    match addr {
        IpAddr::V4(a) => {
            let v = u32::from(a);
            let m = v.mask(len);
            (IpAddr::V4(Ipv4Addr::from(m)), len, m != v)
        }
        IpAddr::V6(a) => {
            let v = u128::from(a);
            let m = v.mask(len);
            (IpAddr::V6(Ipv6Addr::from(m)), len, m != v)
        }
    }
}

/// What `vrhost route import` prints: counts per family, times, warnings.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImportSummary {
    /// File imported.
    pub file: String,
    /// Format read.
    pub format: Format,
    /// Compression detected.
    pub compression: Compression,
    /// IPv4 routes in the file (duplicates included).
    pub ipv4_routes: usize,
    /// IPv6 routes in the file.
    pub ipv6_routes: usize,
    /// Distinct IPv4 prefixes in the built FIB.
    pub ipv4_prefixes: usize,
    /// Distinct IPv6 prefixes in the built FIB.
    pub ipv6_prefixes: usize,
    /// Time to read and parse.
    pub read_ms: f64,
    /// Time to build both FIBs.
    pub build_ms: f64,
    /// Memory of both FIBs.
    pub fib_bytes: usize,
    /// Counters and the cut, if any.
    pub stats: ImportStats,
    /// Human-readable warnings.
    pub warnings: Vec<String>,
}

impl ImportSummary {
    /// Print as text.
    pub fn print(&self) {
        println!("{} ({} {:?})", self.file, self.format, self.compression);
        println!(
            "  ipv4: {} routes, {} prefixes",
            self.ipv4_routes, self.ipv4_prefixes
        );
        println!(
            "  ipv6: {} routes, {} prefixes",
            self.ipv6_routes, self.ipv6_prefixes
        );
        println!(
            "  read {:.0} ms, build {:.0} ms, FIB memory {:.1} MiB",
            self.read_ms,
            self.build_ms,
            self.fib_bytes as f64 / 1048576.0
        );
        for w in &self.warnings {
            println!("  warning: {w}");
        }
    }
}

/// Import a file and build the FIBs from it (next hop = index modulo 2^23, only to size
/// them): what `vrhost route import` reports.
///
/// # Errors
/// As [`read_routes`].
pub fn import_summary(path: &Path, opts: &ImportOptions) -> Result<ImportSummary, ImportError> {
    let t = std::time::Instant::now();
    let set = read_routes(path, opts)?;
    let read_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = std::time::Instant::now();
    let mut v4 = crate::Ipv4Fib::new();
    let mut v6 = crate::Ipv6Fib::new();
    let mut warnings = Vec::new();
    for (i, r) in set.ipv4().enumerate() {
        if let Err(e) = v4.insert(r.prefix, r.len, i as u32 & crate::MAX_NEXT_HOP) {
            warnings.push(format!("{}/{}: {e}", Ipv4Addr::from(r.prefix), r.len));
        }
    }
    for (i, r) in set.ipv6().enumerate() {
        if let Err(e) = v6.insert(r.prefix, r.len, i as u32 & crate::MAX_NEXT_HOP) {
            warnings.push(format!("{}/{}: {e}", Ipv6Addr::from(r.prefix), r.len));
        }
    }
    let build_ms = t.elapsed().as_secs_f64() * 1e3;
    let (n4, n6) = set.counts();
    let st = &set.stats;
    if st.host_bits_set > 0 {
        warnings.push(format!(
            "{} prefixes had host bits set (masked)",
            st.host_bits_set
        ));
    }
    if st.skipped_records > 0 {
        warnings.push(format!(
            "{} MRT records of other types skipped",
            st.skipped_records
        ));
    }
    if let Some(c) = &st.truncated {
        warnings.push(format!(
            "input cut at byte offset {} ({}); {} whole records kept",
            c.offset, c.reason, c.records_kept
        ));
    }
    Ok(ImportSummary {
        file: path.display().to_string(),
        format: set.format,
        compression: set.compression,
        ipv4_routes: n4,
        ipv6_routes: n6,
        ipv4_prefixes: v4.len(),
        ipv6_prefixes: v6.len(),
        read_ms,
        build_ms,
        fib_bytes: v4.mem_bytes() + v6.mem_bytes(),
        stats: set.stats.clone(),
        warnings,
    })
}
