//! `vrhost capture VR[:VNIC]`: a VR's frames, both directions, as a pcap
//! stream from the daemon (`GET /v1/vrs/{name}/capture`) to a file or to
//! stdout, so `vrhost capture tenant-a:0 -c 10 | tcpdump -r -` works.
//!
//! The daemon copies the frames off its data path and runs the filter; this
//! command only writes what arrives, flushing each piece. It ends when the
//! daemon has sent `-c` frames, when the reader of stdout goes away (a
//! closed pipe is a normal end), or on Ctrl-C (the daemon sees the closed
//! connection and detaches the capture).

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::ApiArgs;
use super::client::{ClientError, encode, with_query};

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

/// Run `vrhost capture`.
///
/// # Errors
/// The daemon cannot be reached or refuses the capture (no such VR or
/// vNIC, a bad filter, a capture already running), stdout is a terminal,
/// or the file cannot be written.
pub fn run(args: &CaptureArgs) -> Result<()> {
    let path = path(args)?;
    let to_stdout = args.file.as_deref().is_none_or(|f| f.as_os_str() == "-");
    if to_stdout && io::stdout().is_terminal() {
        bail!("not writing a pcap stream to a terminal: give -w FILE, or pipe it (| tcpdump -r -)");
    }
    // The timeout covers the answer's headers only, not the stream.
    let client = args.api.client()?.with_timeout(Duration::from_secs(30));
    let result = if to_stdout {
        client.stream_to(&path, &mut io::stdout().lock())
    } else {
        let mut out = LazyFile {
            path: args.file.clone().expect("not stdout"),
            file: None,
        };
        client.stream_to(&path, &mut out)
    };
    match result {
        Ok(_) => Ok(()),
        // The reader went away (`tcpdump -c`, `head`): a normal end.
        Err(ClientError::Write(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e).with_context(|| format!("capture of {}", args.target)),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::{Cli, Cmd};

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
