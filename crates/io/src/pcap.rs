//! pcap files as ports: [`PcapRxPort`] replays a capture, [`PcapTxPort`]
//! records what it is sent.
//!
//! The receive side loads the whole file at open time (the file's bytes are
//! kept as they are; frames are slices of them), so replay does no I/O, no
//! copy and no allocation; a file larger than the cap
//! ([`DEFAULT_MAX_FILE_BYTES`] unless given) is refused with an error
//! instead of eating the host's memory. Timestamps are ignored: frames are
//! replayed as fast as the host pulls them. Frames captured shorter than
//! they were on the wire (snaplen) are replayed as captured.
//!
//! Only classic pcap with Ethernet link type (1) is read, in either byte
//! order and either timestamp resolution; pcapng is refused with a hint.
//! The transmit side writes classic pcap (native byte order, microsecond
//! timestamps, snaplen 65535, Ethernet) through a buffer, stamping each
//! burst with the current time.
//!
//! Every malformed input (short header, bad magic, record cut short,
//! absurd lengths) is an error naming the file and the byte offset; none
//! panics.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use pcap_file::pcap::{PcapHeader, PcapParser};
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::{Port, PortStats};

/// Default cap on the size of a file [`PcapRxPort::open`] loads: 1 GiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1 << 30;

/// Largest record accepted on read (tcpdump's maximum snaplen).
pub const MAX_RECORD_BYTES: u32 = 262_144;

/// Snaplen written by [`PcapTxPort`]; longer frames are dropped.
pub const TX_SNAPLEN: u32 = 65_535;

const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const RECORD_HEADER_LEN: usize = 16;

/// Why a pcap file could not be opened, read or created.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// Opening, reading or creating the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is larger than the cap.
    #[error("{}: {size} bytes exceeds the pcap load cap of {cap} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// The file ends inside the file header or a record.
    #[error("{}: truncated pcap file: {what} cut short at byte {offset}", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// What was being read (`"file header"`, `"record"`).
        what: &'static str,
        /// Where it starts.
        offset: usize,
    },
    /// The file is not classic pcap or a field is invalid.
    #[error("{}: not a valid pcap file at byte {offset}: {reason}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// Where the bad field is.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// A pcapng file.
    #[error("{}: pcapng is not supported; convert it with `editcap -F pcap in.pcapng out.pcap`", path.display())]
    PcapNg {
        /// The file.
        path: PathBuf,
    },
    /// The capture's link type is not Ethernet.
    #[error("{}: link type {linktype} is not Ethernet (1)", path.display())]
    LinkType {
        /// The file.
        path: PathBuf,
        /// The link type found.
        linktype: u32,
    },
}

/// Replays the frames of a pcap file. See the [module docs](self).
#[derive(Debug)]
pub struct PcapRxPort {
    name: String,
    data: Vec<u8>,
    frames: Vec<Range<usize>>,
    next: usize,
    /// Passes left to start after the current one (`None`: endless).
    loops_left: Option<u64>,
    stats: PortStats,
}

impl PcapRxPort {
    /// Load `path` (up to [`DEFAULT_MAX_FILE_BYTES`]) to replay it `loops`
    /// times (`None`: forever; `Some(0)`: never).
    ///
    /// # Errors
    /// [`PcapError`] naming the file when it cannot be read, is too large,
    /// or is not a valid Ethernet pcap file.
    pub fn open(path: impl AsRef<Path>, loops: Option<u64>) -> Result<PcapRxPort, PcapError> {
        Self::open_with_cap(path, loops, DEFAULT_MAX_FILE_BYTES)
    }

    /// [`open`](Self::open) with a cap of `max_bytes` on the file size.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_with_cap(
        path: impl AsRef<Path>,
        loops: Option<u64>,
        max_bytes: u64,
    ) -> Result<PcapRxPort, PcapError> {
        let path = path.as_ref();
        let io = |source| PcapError::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let size = file.metadata().map_err(io)?.len();
        if size > max_bytes {
            return Err(PcapError::TooLarge {
                path: path.to_owned(),
                size,
                cap: max_bytes,
            });
        }
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        // `take`: the file may have grown since `metadata`.
        file.take(max_bytes.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(io)?;
        if data.len() as u64 > max_bytes {
            return Err(PcapError::TooLarge {
                path: path.to_owned(),
                size: data.len() as u64,
                cap: max_bytes,
            });
        }
        let frames = index(path, &data)?;
        let name = path
            .file_name()
            .map_or_else(|| "pcap".to_owned(), |n| n.to_string_lossy().into_owned());
        // `next == len` means "at the end of a pass"; `loops_left` counts
        // the passes still to start.
        let (next, loops_left) = match loops {
            Some(0) => (frames.len(), Some(0)),
            Some(n) => (0, Some(n - 1)),
            None => (0, None),
        };
        Ok(PcapRxPort {
            name,
            data,
            frames,
            next,
            loops_left,
            stats: PortStats::default(),
        })
    }

    /// Rename the port (default: the file name).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Number of frames in the file.
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// Frame `i` of the file.
    ///
    /// # Panics
    /// If `i >= self.frame_count()`.
    pub fn frame(&self, i: usize) -> &[u8] {
        &self.data[self.frames[i].clone()]
    }

    /// Whether every pass has been replayed.
    pub fn is_done(&self) -> bool {
        self.frames.is_empty() || (self.next >= self.frames.len() && self.loops_left == Some(0))
    }
}

/// Walk the records of `data`, returning each frame's byte range.
fn index(path: &Path, data: &[u8]) -> Result<Vec<Range<usize>>, PcapError> {
    let format = |offset, reason: String| PcapError::Format {
        path: path.to_owned(),
        offset,
        reason,
    };
    let truncated = |what, offset| PcapError::Truncated {
        path: path.to_owned(),
        what,
        offset,
    };
    if data.starts_with(&PCAPNG_MAGIC) {
        return Err(PcapError::PcapNg {
            path: path.to_owned(),
        });
    }
    let (mut rest, parser) = match PcapParser::new(data) {
        Ok(v) => v,
        Err(pcap_file::PcapError::IncompleteBuffer) => return Err(truncated("file header", 0)),
        Err(e) => return Err(format(0, e.to_string())),
    };
    let header = parser.header();
    if header.datalink != DataLink::ETHERNET {
        return Err(PcapError::LinkType {
            path: path.to_owned(),
            linktype: header.datalink.into(),
        });
    }
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let offset = data.len() - rest.len();
        let (next, raw) = match parser.next_raw_packet(rest) {
            Ok(v) => v,
            Err(pcap_file::PcapError::IncompleteBuffer) => return Err(truncated("record", offset)),
            Err(e) => return Err(format(offset, e.to_string())),
        };
        if raw.incl_len > MAX_RECORD_BYTES {
            return Err(format(
                offset,
                format!("record length {} exceeds {MAX_RECORD_BYTES}", raw.incl_len),
            ));
        }
        let start = offset + RECORD_HEADER_LEN;
        let len = raw.data.len();
        // Empty records carry no frame; a port never hands out empty frames.
        if len > 0 {
            frames.push(start..start + len);
        }
        rest = next;
    }
    Ok(frames)
}

impl Port for PcapRxPort {
    fn name(&self) -> &str {
        &self.name
    }

    /// The next frames of the file, wrapping to the start while passes are
    /// left; 0 once all passes are done.
    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        let total = self.frames.len();
        if total == 0 {
            return 0;
        }
        let data: &'a [u8] = &self.data;
        let mut n = 0;
        while n < out.len() {
            if self.next == total {
                match self.loops_left {
                    Some(0) => break,
                    Some(ref mut l) => *l -= 1,
                    None => {}
                }
                self.next = 0;
            }
            let f = &data[self.frames[self.next].clone()];
            out[n] = f;
            self.stats.rx_bytes += f.len() as u64;
            self.next += 1;
            n += 1;
        }
        self.stats.rx_packets += n as u64;
        n
    }

    /// A replay port does not transmit: frames are refused and counted as
    /// dropped.
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        self.stats.tx_dropped += frames.len() as u64;
        0
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Writes every frame it is sent to a pcap file. See the [module docs](self).
///
/// Writes go through a 1 MiB buffer: call [`Port::flush`] to push them to
/// the file (dropping the port flushes too, ignoring errors). After a write
/// error the file is left as it is and later frames are dropped; the error
/// is returned by the next `flush`.
#[derive(Debug)]
pub struct PcapTxPort {
    name: String,
    path: PathBuf,
    out: BufWriter<File>,
    failed: bool,
    error: Option<std::io::Error>,
    stats: PortStats,
}

impl PcapTxPort {
    /// Create (or truncate) `path` and write the pcap file header.
    ///
    /// # Errors
    /// [`PcapError::Io`] naming the file.
    pub fn create(path: impl AsRef<Path>) -> Result<PcapTxPort, PcapError> {
        let path = path.as_ref();
        let io = |source| PcapError::Io {
            path: path.to_owned(),
            source,
        };
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io)?);
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: TX_SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::MicroSecond,
            endianness: Endianness::native(),
        };
        header.write_to(&mut out).map_err(|e| match e {
            pcap_file::PcapError::IoError(source) => io(source),
            other => io(std::io::Error::other(other)),
        })?;
        let name = path
            .file_name()
            .map_or_else(|| "pcap".to_owned(), |n| n.to_string_lossy().into_owned());
        Ok(PcapTxPort {
            name,
            path: path.to_owned(),
            out,
            failed: false,
            error: None,
            stats: PortStats::default(),
        })
    }

    /// Rename the port (default: the file name).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_record(&mut self, sec: u32, usec: u32, frame: &[u8]) -> std::io::Result<()> {
        let len = frame.len() as u32;
        let mut h = [0u8; RECORD_HEADER_LEN];
        // Native byte order, as announced by the file header's magic.
        h[0..4].copy_from_slice(&sec.to_ne_bytes());
        h[4..8].copy_from_slice(&usec.to_ne_bytes());
        h[8..12].copy_from_slice(&len.to_ne_bytes());
        h[12..16].copy_from_slice(&len.to_ne_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(frame)
    }
}

impl Port for PcapTxPort {
    fn name(&self) -> &str {
        &self.name
    }

    /// Never has frames.
    fn rx_burst<'a>(&'a mut self, _out: &mut [&'a [u8]]) -> usize {
        0
    }

    /// Append each frame with the current time; frames longer than
    /// [`TX_SNAPLEN`], empty ones, and all after a write error are dropped.
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        if frames.is_empty() {
            return 0;
        }
        // One clock read per burst (vDSO, no syscall).
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        // pcap's u32 seconds wrap in 2106.
        let (sec, usec) = (now.as_secs() as u32, now.subsec_micros());
        let mut sent = 0;
        for f in frames {
            if self.failed || f.is_empty() || f.len() > TX_SNAPLEN as usize {
                self.stats.tx_dropped += 1;
                continue;
            }
            match self.write_record(sec, usec, f) {
                Ok(()) => {
                    sent += 1;
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += f.len() as u64;
                }
                Err(e) => {
                    self.failed = true;
                    self.error = Some(e);
                    self.stats.tx_dropped += 1;
                }
            }
        }
        sent
    }

    /// Write the buffer to the file; report a write error met since the
    /// last flush.
    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

impl Drop for PcapTxPort {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; call `flush` to see them.
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests;
