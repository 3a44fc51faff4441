//! Packet capture as the API serves it (`GET /v1/vrs/{name}/capture`): a
//! tap on one VR's data path, read by a capture thread that runs the
//! tcpdump filter and writes a pcap stream.
//!
//! Three threads are involved. The worker copies the VR's frames into the
//! tap's preallocated buffers (`vrhost_host::capture`) and counts what it
//! cannot copy in `capture_dropped`; it never waits. The capture thread
//! started here reads the buffers, evaluates the filter (compiled by
//! libpcap to classic BPF, run by `pcap_offline_filter`), writes pcap
//! records, and hands chunks of them to the HTTP response through a
//! bounded channel; a slow client makes it wait, so the tap fills and the
//! worker drops copies, never frames. The HTTP task only passes the chunks
//! on. The capture ends, and the tap is detached, when `count` frames are
//! written, when the client goes away (the response body, and with it the
//! channel's receiver, is dropped), or when the VR leaves the data path (a
//! config change removed or restarted it: its tap went with it).
//!
//! The stream is a pcap file: LINKTYPE_ETHERNET, nanosecond timestamps
//! (magic `a1b23c4d`), little-endian. Classic pcap has no field for the
//! vNIC or the direction: frames into and out of the VR are interleaved in
//! the order the worker saw them, each stamped with the time of its burst.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use pcap_file::pcap::PcapHeader;
use pcap_file::{DataLink, Endianness, TsResolution};
use tokio::sync::mpsc;
use vrhost_host::capture::{Record, TapConfig, TapReader, tap};
use vrhost_host::{CaptureRefused, Mailbox, Worker};

use crate::control::{ControlError, WORKER_TIMEOUT};

/// Smallest `snaplen` accepted (an Ethernet, IPv4 and TCP header fit).
pub const MIN_SNAPLEN: u32 = 64;
/// Largest `snaplen` (and the default); frames are never longer than a
/// VR's slot, so buffers are the smaller of the two.
pub const MAX_SNAPLEN: u32 = 65535;
/// Highest vNIC number a query may name (a VR has at most 64).
pub const MAX_VNIC: u16 = 63;
/// Longest filter expression.
pub const MAX_FILTER: usize = 4096;

/// Records read from the tap per chunk of the stream.
const READ_BATCH: usize = 1024;
/// Chunks of the stream waiting for the client before the capture thread
/// waits (and the tap, then the worker, start dropping copies).
const CHANNEL_CHUNKS: usize = 8;
/// How long the capture thread sleeps when the tap is empty, at most.
const IDLE_SLEEP_MAX: Duration = Duration::from_millis(2);

/// What a capture request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureParams {
    /// Only this vNIC, or all.
    pub vnic: Option<u16>,
    /// Stop after this many frames (after the filter), or never.
    pub count: Option<u64>,
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// A tcpdump expression, if any.
    pub filter: Option<String>,
}

impl CaptureParams {
    /// Read the query (`vnic`, `count`, `snaplen`, `filter`; nothing else).
    ///
    /// # Errors
    /// [`ControlError::BadRequest`], naming the parameter.
    pub fn from_query(q: &BTreeMap<String, String>) -> Result<Self, ControlError> {
        let bad = |m: String| ControlError::BadRequest(m);
        if let Some(k) = q
            .keys()
            .find(|k| !matches!(k.as_str(), "vnic" | "count" | "snaplen" | "filter"))
        {
            return Err(bad(format!(
                "unknown query parameter {k:?} (vnic, count, snaplen, filter)"
            )));
        }
        let num = |key: &str, min: u64, max: u64| -> Result<Option<u64>, ControlError> {
            match q.get(key) {
                None => Ok(None),
                Some(v) => match v.parse::<u64>() {
                    Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
                    _ => Err(bad(format!(
                        "{key}={v:?}: expected an integer {min}..={max}"
                    ))),
                },
            }
        };
        let filter = match q.get("filter").map(|f| f.trim()) {
            None | Some("") => None,
            Some(f) if f.len() > MAX_FILTER => {
                return Err(bad(format!("filter: longer than {MAX_FILTER} bytes")));
            }
            Some(f) => Some(f.to_string()),
        };
        Ok(Self {
            vnic: num("vnic", 0, u64::from(MAX_VNIC))?.map(|v| v as u16),
            count: num("count", 1, u64::MAX)?,
            snaplen: num("snaplen", u64::from(MIN_SNAPLEN), u64::from(MAX_SNAPLEN))?
                .map_or(MAX_SNAPLEN, |s| s as u32),
            filter,
        })
    }
}

/// Compile a tcpdump (pcap-filter) expression for Ethernet frames.
///
/// # Errors
/// [`ControlError::BadRequest`] with libpcap's message.
pub fn compile_filter(expr: &str) -> Result<pcap::BpfProgram, ControlError> {
    let dead = pcap::Capture::dead(pcap::Linktype::ETHERNET)
        .map_err(|e| ControlError::Internal(format!("libpcap: {e}")))?;
    dead.compile(expr, true).map_err(|e| {
        let msg = match e {
            pcap::Error::PcapError(m) => m,
            other => other.to_string(),
        };
        ControlError::BadRequest(format!("filter {expr:?}: {msg}"))
    })
}

/// The pcap file header of a capture.
pub fn pcap_header(snaplen: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    PcapHeader {
        version_major: 2,
        version_minor: 4,
        ts_correction: 0,
        ts_accuracy: 0,
        snaplen,
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::Little,
    }
    .write_to(&mut out)
    .expect("writing to a Vec does not fail");
    out
}

/// Append one pcap record (nanosecond timestamp, little-endian).
pub fn push_record(out: &mut Vec<u8>, rec: &Record, snaplen: u32) {
    let data = rec.data();
    let incl = data.len().min(snaplen as usize);
    let ts = rec.ts_ns();
    // pcap's seconds are 32 bits: good until 2106.
    out.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
    out.extend_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
    out.extend_from_slice(&(incl as u32).to_le_bytes());
    out.extend_from_slice(&rec.orig_len().max(incl as u32).to_le_bytes());
    out.extend_from_slice(&data[..incl]);
}

/// Attach a tap to the VR named `vr` and start the capture thread; returns
/// the stream's chunks (the first is the pcap header). Blocking: it waits
/// for the worker (call it off the async threads).
///
/// The capture thread runs on `worker_cpu` (the host worker's core, if it
/// is pinned) in the `SCHED_IDLE` class, so it takes only what the data
/// path leaves. It has to be on the worker's core for that: a thread's
/// class and nice count only against threads of its own scheduling group
/// (the daemon's), and the VRs run in cgroups of their own, against which
/// a capture thread on their cores would take its group's full share
/// (measured: 40-70% of the other VRs' rate). On a host whose worker is
/// saturated the capture keeps little and counts the rest in
/// `capture_dropped`; it costs the VRs only the worker's look at each
/// frame it cannot keep.
///
/// # Errors
/// [`ControlError::NotFound`] (no such VR), [`ControlError::BadRequest`]
/// (no such vNIC), [`ControlError::Conflict`] (the VR has a capture),
/// [`ControlError::Unavailable`] (the worker did not answer).
pub fn start(
    mailbox: &Arc<Mailbox>,
    worker_cpu: Option<usize>,
    vr: &str,
    params: CaptureParams,
    filter: Option<pcap::BpfProgram>,
) -> Result<mpsc::Receiver<Bytes>, ControlError> {
    let name = vr.to_string();
    let info = mailbox.call(WORKER_TIMEOUT, move |w: &mut Worker| {
        w.vrs().iter().find(|v| v.name() == name).map(|v| {
            (
                v.region().slot_bytes(),
                v.vnic_ports().len(),
                v.tap().is_some(),
            )
        })
    })?;
    let Some((slot_bytes, vnics, busy)) = info else {
        return Err(ControlError::NotFound(format!("no VR {vr:?}")));
    };
    if let Some(v) = params.vnic
        && usize::from(v) >= vnics
    {
        return Err(ControlError::BadRequest(format!(
            "vnic={v}: VR {vr:?} has {vnics} vNICs (0..={})",
            vnics.saturating_sub(1)
        )));
    }
    let busy_error = || {
        ControlError::Conflict(format!(
            "VR {vr:?} is already being captured (one capture per VR)"
        ))
    };
    if busy {
        return Err(busy_error());
    }
    // Buffers are made here, not on the worker.
    let (t, reader) = tap(&TapConfig {
        vnic: params.vnic,
        snaplen: (params.snaplen as usize).min(slot_bytes as usize),
        ..TapConfig::default()
    });
    let id = t.id();
    let name = vr.to_string();
    let attached = mailbox.call(WORKER_TIMEOUT, move |w: &mut Worker| {
        w.attach_capture(&name, Box::new(t))
    });
    match attached {
        Ok(Ok(())) => {}
        Ok(Err((why, t))) => {
            drop(t);
            return Err(match why {
                CaptureRefused::NoVr => ControlError::NotFound(format!("no VR {vr:?}")),
                CaptureRefused::Busy => busy_error(),
            });
        }
        Err(e) => {
            // The worker may still attach it later: queue the detach after
            // it (jobs run in order), so no orphan tap is left behind.
            detach(mailbox, vr, id);
            return Err(e.into());
        }
    }
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    let job = Job {
        reader,
        mailbox: mailbox.clone(),
        vr: vr.to_string(),
        params,
        filter,
        tx,
        worker_cpu,
    };
    let spawned = std::thread::Builder::new()
        .name(format!("vrhost-capture-{vr}"))
        .spawn(move || job.run());
    if let Err(e) = spawned {
        detach(mailbox, vr, id);
        return Err(ControlError::Internal(format!("capture thread: {e}")));
    }
    Ok(rx)
}

/// Detach capture `id` from `vr`, dropping its tap here, not on the worker.
fn detach(mailbox: &Mailbox, vr: &str, id: u64) {
    let name = vr.to_string();
    let tap = mailbox.call(WORKER_TIMEOUT, move |w: &mut Worker| {
        w.detach_capture(&name, id)
    });
    drop(tap);
}

/// The capture thread's state.
struct Job {
    reader: TapReader,
    mailbox: Arc<Mailbox>,
    vr: String,
    params: CaptureParams,
    filter: Option<pcap::BpfProgram>,
    tx: mpsc::Sender<Bytes>,
    worker_cpu: Option<usize>,
}

impl Job {
    fn run(mut self) {
        self.step_aside();
        let why = self.pump();
        tracing::info!(vr = %self.vr, why, "capture ended");
        detach(&self.mailbox, &self.vr, self.reader.id());
    }

    /// Run on what the data path leaves (see [`start`]): on the worker's
    /// core if it has one, `SCHED_IDLE`. Failing that the capture runs
    /// anyway, and says so.
    fn step_aside(&self) {
        if let Some(c) = self.worker_cpu
            && let Err(e) = vrhost_host::cpu::pin_current_thread(c)
        {
            tracing::warn!(vr = %self.vr, "capture thread not on the worker's CPU {c}: {e}");
        }
        if let Err(e) = vrhost_host::cpu::set_current_thread_idle() {
            tracing::warn!(vr = %self.vr, "capture thread not SCHED_IDLE: {e}");
        }
    }

    /// Read, filter and send until done; returns why it stopped.
    fn pump(&mut self) -> &'static str {
        let snaplen = self.params.snaplen;
        let limit = self.params.count.unwrap_or(u64::MAX);
        let mut written = 0u64;
        let mut out = pcap_header(snaplen);
        let mut idle = Duration::ZERO;
        loop {
            let filter = self.filter.as_ref();
            let n = self.reader.read(READ_BATCH, |rec| {
                if written < limit && filter.is_none_or(|f| f.filter(rec.data())) {
                    push_record(&mut out, rec, snaplen);
                    written += 1;
                }
            });
            if !out.is_empty() {
                let chunk = Bytes::from(std::mem::take(&mut out));
                if self.tx.blocking_send(chunk).is_err() {
                    return "client gone";
                }
            }
            if written >= limit {
                return "count reached";
            }
            // Checked every round: a filter that matches nothing sends
            // nothing, so a failed send cannot be the only sign.
            if self.tx.is_closed() {
                return "client gone";
            }
            if n == 0 {
                if self.reader.is_closed() {
                    return "the VR left the data path";
                }
                // Back off while idle: a quiet capture costs a few hundred
                // wakeups a second, a busy one never sleeps.
                idle = (idle + Duration::from_micros(100)).min(IDLE_SLEEP_MAX);
                std::thread::sleep(idle);
            } else {
                idle = Duration::ZERO;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vrhost_host::capture::Direction;

    fn q(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn query_defaults_and_limits() {
        let p = CaptureParams::from_query(&q(&[])).unwrap();
        assert_eq!(
            p,
            CaptureParams {
                vnic: None,
                count: None,
                snaplen: MAX_SNAPLEN,
                filter: None
            }
        );
        let p = CaptureParams::from_query(&q(&[
            ("vnic", "1"),
            ("count", "20"),
            ("snaplen", "96"),
            ("filter", " udp "),
        ]))
        .unwrap();
        assert_eq!(
            (p.vnic, p.count, p.snaplen, p.filter.as_deref()),
            (Some(1), Some(20), 96, Some("udp"))
        );
        assert_eq!(
            CaptureParams::from_query(&q(&[("filter", "")]))
                .unwrap()
                .filter,
            None
        );
        for bad in [
            ("vnic", "64"),
            ("vnic", "-1"),
            ("vnic", "x"),
            ("count", "0"),
            ("snaplen", "63"),
            ("snaplen", "65536"),
            ("cuont", "3"),
        ] {
            let e = CaptureParams::from_query(&q(&[bad])).unwrap_err();
            assert!(matches!(e, ControlError::BadRequest(_)), "{bad:?}: {e}");
            assert!(e.to_string().contains(bad.0), "{bad:?}: {e}");
        }
        let long = "udp ".repeat(MAX_FILTER);
        assert!(CaptureParams::from_query(&q(&[("filter", &long)])).is_err());
    }

    #[test]
    fn filters_compile_and_match_frames() {
        let f = compile_filter("udp and dst net 10.1.128.0/17").unwrap();
        let frame = |dst: [u8; 4], proto: u8| {
            let mut b = vec![0u8; 60];
            b[12..14].copy_from_slice(&[0x08, 0x00]);
            b[14] = 0x45;
            b[23] = proto;
            b[26..30].copy_from_slice(&[10, 0, 0, 1]);
            b[30..34].copy_from_slice(&dst);
            b
        };
        assert!(f.filter(&frame([10, 1, 200, 1], 17)));
        assert!(!f.filter(&frame([10, 1, 2, 1], 17)));
        assert!(!f.filter(&frame([10, 1, 200, 1], 6)));
        let Err(e) = compile_filter("udp and nonsense") else {
            panic!("a bad filter compiled")
        };
        assert!(matches!(e, ControlError::BadRequest(_)));
        assert!(e.to_string().contains("nonsense"), "{e}");
        assert!(compile_filter("dst net 10.0.0.0/40").is_err());
    }

    #[test]
    fn the_stream_is_a_pcap_file_with_truncated_frames() {
        let (mut t, mut r) = tap(&TapConfig {
            snaplen: 64,
            ..TapConfig::default()
        });
        let long: Vec<u8> = (0..200u8).collect();
        t.copy(Direction::In, 0, &long);
        t.copy(Direction::Out, 1, &long[..60]);
        t.end_burst();
        let mut out = pcap_header(64);
        r.read(usize::MAX, |rec| push_record(&mut out, rec, 64));
        let mut rd = pcap_file::pcap::PcapReader::new(&out[..]).unwrap();
        let h = rd.header();
        assert_eq!(
            (h.datalink, h.snaplen, h.ts_resolution),
            (DataLink::ETHERNET, 64, TsResolution::NanoSecond)
        );
        // Raw records: pcap-file 2.0 refuses a record whose original length
        // exceeds the snaplen, which is what truncation means (tcpdump and
        // tshark read them).
        let p = rd.next_raw_packet().unwrap().unwrap();
        assert_eq!(
            (p.incl_len, p.orig_len, &p.data[..]),
            (64, 200, &long[..64])
        );
        assert!(p.ts_sec > 1_600_000_000 && p.ts_frac < 1_000_000_000);
        let p = rd.next_raw_packet().unwrap().unwrap();
        assert_eq!((p.incl_len, p.orig_len, &p.data[..]), (60, 60, &long[..60]));
        assert!(rd.next_packet().is_none());
    }
}
