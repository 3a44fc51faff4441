//! `vrhost capture VR[:VNIC]`: a VR's frames, both directions, as a pcap
//! stream from the daemon (`GET /v1/vrs/{name}/capture`) to a file or to
//! stdout, so `vrhost capture tenant-a:0 -c 10 | tcpdump -r -` works.
//!
//! The daemon copies the frames off its data path and runs the filter; this
//! command only writes what arrives, flushing each piece. It ends when the
//! daemon has sent `-c` frames, when the reader of stdout goes away (a
//! closed pipe is a normal end), or on Ctrl-C (the daemon sees the closed
//! connection and detaches the capture). At the end (Ctrl-C included) it
//! says on stderr, as tcpdump does, how many frames it wrote and how many
//! of the VR's frames the daemon could not keep meanwhile.

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::ApiArgs;
use super::api::VrStatus;
use super::client::{Client, ClientError, encode, with_query};

/// `vrhost capture`.
#[derive(Debug, Clone, clap::Args)]
pub struct CaptureArgs {
    /// The VR, and optionally one of its vNICs (`tenant-a`, `tenant-a:0`).
    #[arg(value_name = "VR[:VNIC]")]
    pub target: String,
    /// Write the pcap stream to FILE instead of stdout (`-`: stdout).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Stop after N frames (of those the filter passes).
    #[arg(
        short = 'c',
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub count: Option<u64>,
    /// Bytes kept of each frame [default: 65535, the whole frame].
    #[arg(
        short = 's',
        long,
        value_name = "SNAPLEN",
        value_parser = clap::value_parser!(u32).range(64..=65535)
    )]
    pub snaplen: Option<u32>,
    /// Keep only frames this tcpdump expression matches (pcap-filter(7); it
    /// sees the first SNAPLEN bytes of each frame).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Split `VR[:VNIC]`.
///
/// # Errors
/// An empty VR name or a vNIC that is not a number 0..=63.
pub fn parse_target(s: &str) -> Result<(String, Option<u16>)> {
    let (vr, vnic) = match s.rsplit_once(':') {
        Some((vr, v)) => {
            let n: u16 =
                v.parse().ok().filter(|n| *n <= 63).with_context(|| {
                    format!("{s:?}: the vNIC after ':' must be a number 0..=63")
                })?;
            (vr, Some(n))
        }
        None => (s, None),
    };
    if vr.is_empty() {
        bail!("{s:?}: no VR name (VR or VR:VNIC)");
    }
    Ok((vr.to_owned(), vnic))
}

/// The API path of a capture.
pub fn path(args: &CaptureArgs) -> Result<String> {
    let (vr, vnic) = parse_target(&args.target)?;
    Ok(with_query(
        &format!("/v1/vrs/{}/capture", encode(&vr)),
        &[
            ("vnic", vnic.map(|v| v.to_string())),
            ("count", args.count.map(|c| c.to_string())),
            ("snaplen", args.snaplen.map(|s| s.to_string())),
            ("filter", args.filter.clone()),
        ],
    ))
}

/// A file created on the first write, so a refused capture leaves none.
struct LazyFile {
    path: PathBuf,
    file: Option<File>,
}

impl LazyFile {
    fn get(&mut self) -> io::Result<&mut File> {
        if self.file.is_none() {
            let f = File::create(&self.path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))?;
            self.file = Some(f);
        }
        Ok(self.file.as_mut().expect("just created"))
    }
}

impl Write for LazyFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.get()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }
}

/// Counts the records of a pcap stream as the daemon writes it (a 24-byte
/// file header, then records with little-endian headers) on its way to
/// `inner`.
pub struct PcapCounter<W> {
    inner: W,
    /// Bytes of the file header still to pass.
    head: usize,
    /// The record header being read, and how much of it has passed.
    rec: [u8; 16],
    rec_len: usize,
    /// Bytes of the current record's data still to pass.
    body: usize,
    frames: Arc<AtomicU64>,
    /// Once set, writes fail: the stream ends between two pieces, so what
    /// was counted is what was written.
    stop: Arc<AtomicBool>,
}

impl<W: Write> PcapCounter<W> {
    /// Count what goes to `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            head: 24,
            rec: [0; 16],
            rec_len: 0,
            body: 0,
            frames: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The flag that ends the stream at its next write.
    pub fn stopper(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// The count of records begun so far, readable from other threads.
    pub fn frames(&self) -> Arc<AtomicU64> {
        self.frames.clone()
    }

    fn scan(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            let skip = if self.head > 0 {
                &mut self.head
            } else if self.body > 0 {
                &mut self.body
            } else {
                let k = (16 - self.rec_len).min(b.len());
                self.rec[self.rec_len..self.rec_len + k].copy_from_slice(&b[..k]);
                self.rec_len += k;
                b = &b[k..];
                if self.rec_len == 16 {
                    let incl =
                        u32::from_le_bytes([self.rec[8], self.rec[9], self.rec[10], self.rec[11]]);
                    self.body = incl as usize;
                    self.rec_len = 0;
                    self.frames.fetch_add(1, Ordering::Relaxed);
                }
                continue;
            };
            let k = (*skip).min(b.len());
            *skip -= k;
            b = &b[k..];
        }
    }
}

impl<W: Write> Write for PcapCounter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.stop.load(Ordering::Acquire) {
            return Err(io::Error::other("capture stopped"));
        }
        let n = self.inner.write(buf)?;
        self.scan(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The VR's `capture_dropped` now, if the daemon says.
fn capture_dropped(client: &Client, vr: &str) -> Option<u64> {
    let st: VrStatus = client.get_as(&format!("/v1/vrs/{}", encode(vr))).ok()?;
    Some(st.stats.capture_dropped)
}

/// What a capture did, for stderr.
struct Summary {
    api: ApiArgs,
    vr: String,
    dropped_before: Option<u64>,
    frames: Arc<AtomicU64>,
    /// Set by whoever prints it (once).
    printed: AtomicBool,
}

impl Summary {
    fn print(&self) {
        if self.printed.swap(true, Ordering::AcqRel) {
            return;
        }
        let frames = self.frames.load(Ordering::Relaxed);
        let dropped = self.dropped_before.and_then(|before| {
            let c = self.api.client().ok()?.with_timeout(Duration::from_secs(2));
            Some(capture_dropped(&c, &self.vr)?.saturating_sub(before))
        });
        match dropped {
            Some(d) => eprintln!(
                "{frames} frames captured\n{d} frames of {} not kept by the daemon (no free capture buffer)",
                self.vr
            ),
            None => eprintln!("{frames} frames captured"),
        }
    }
}

/// Run `vrhost capture`.
///
/// # Errors
/// The daemon cannot be reached or refuses the capture (no such VR or
/// vNIC, a bad filter, a capture already running), stdout is a terminal,
/// or the file cannot be written.
pub fn run(args: &CaptureArgs) -> Result<()> {
    let path = path(args)?;
    let (vr, _) = parse_target(&args.target)?;
    let to_stdout = args.file.as_deref().is_none_or(|f| f.as_os_str() == "-");
    if to_stdout && io::stdout().is_terminal() {
        bail!("not writing a pcap stream to a terminal: give -w FILE, or pipe it (| tcpdump -r -)");
    }
    // The timeout covers the answer's headers only, not the stream.
    let client = args.api.client()?.with_timeout(Duration::from_secs(30));
    let dropped_before = capture_dropped(&client, &vr);
    let mut out: PcapCounter<Box<dyn Write>> = PcapCounter::new(if to_stdout {
        Box::new(io::stdout().lock())
    } else {
        Box::new(LazyFile {
            path: args.file.clone().expect("not stdout"),
            file: None,
        })
    });
    let summary = Arc::new(Summary {
        api: args.api.clone(),
        vr,
        dropped_before,
        frames: out.frames(),
        printed: AtomicBool::new(false),
    });
    // Ctrl-C ends a capture: the stream stops at its next piece and the
    // summary says what was written; if no piece comes (a filter that
    // matches nothing), the signal's thread says it and ends the process.
    // Either way the daemon sees the connection close and detaches.
    let (on_signal, stop) = (summary.clone(), out.stopper());
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            stop.store(true, Ordering::Release);
            std::thread::sleep(Duration::from_millis(300));
            on_signal.print();
            std::process::exit(0);
        }
    });
    let result = client.stream_to(&path, &mut out);
    let stopped = out.stop.load(Ordering::Acquire);
    let result = match result {
        Ok(_) => Ok(()),
        // The reader went away (`tcpdump -c`, `head`): a normal end.
        Err(ClientError::Write(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(ClientError::Write(_)) if stopped => Ok(()),
        Err(e) => Err(e).with_context(|| format!("capture of {}", args.target)),
    };
    if result.is_ok() {
        summary.print();
    }
    result
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::{Cli, Cmd};

    #[test]
    fn pcap_records_are_counted_in_any_pieces() {
        let hdr = |incl: u32| {
            let mut h = vec![0u8; 16];
            h[8..12].copy_from_slice(&incl.to_le_bytes());
            h
        };
        let mut stream = vec![0xd4u8; 24];
        for len in [60u32, 0, 1514, 16] {
            stream.extend(hdr(len));
            stream.extend(std::iter::repeat_n(0xee, len as usize));
        }
        for piece in [1, 7, 16, 24, 100, stream.len()] {
            let mut c = PcapCounter::new(Vec::new());
            for chunk in stream.chunks(piece) {
                c.write_all(chunk).unwrap();
            }
            assert_eq!(c.frames().load(Ordering::Relaxed), 4, "pieces of {piece}");
            assert_eq!(c.inner, stream);
        }
        // A stream cut inside a record counts the records begun.
        let mut c = PcapCounter::new(Vec::new());
        c.write_all(&stream[..24 + 16 + 10]).unwrap();
        assert_eq!(c.frames().load(Ordering::Relaxed), 1);
    }

    #[test]
    fn targets() {
        assert_eq!(parse_target("tenant-a").unwrap(), ("tenant-a".into(), None));
        assert_eq!(
            parse_target("tenant-a:1").unwrap(),
            ("tenant-a".into(), Some(1))
        );
        for bad in ["", ":0", "a:", "a:x", "a:64", "a:-1"] {
            assert!(parse_target(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn command_line_to_api_path() {
        let args = |line: &str| match Cli::try_parse_from(line.split_whitespace()) {
            Ok(Cli {
                cmd: Cmd::Capture(a),
            }) => Ok(a),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        let a = args("vrhost capture tenant-a:0 -c 10").unwrap();
        assert_eq!(
            path(&a).unwrap(),
            "/v1/vrs/tenant-a/capture?vnic=0&count=10"
        );
        let mut a = args("vrhost capture b -w out.pcap -s 96 --api /tmp/x.sock").unwrap();
        a.filter = Some("udp and dst net 10.1.128.0/17".into());
        assert_eq!(a.file.as_deref(), Some(std::path::Path::new("out.pcap")));
        assert_eq!(
            path(&a).unwrap(),
            "/v1/vrs/b/capture?snaplen=96&filter=udp%20and%20dst%20net%2010.1.128.0%2F17"
        );
        assert!(args("vrhost capture a -c 0").is_err());
        assert!(args("vrhost capture a -s 10").is_err());
        assert!(args("vrhost capture").is_err());
    }
}
