use std::net::Ipv4Addr;
use std::process::Command;

use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;

use super::*;

/// A temporary file path, removed on drop.
struct Tmp(PathBuf);

impl Tmp {
    fn new(name: &str) -> Tmp {
        Tmp(std::env::temp_dir().join(format!("vrhost-io-{}-{name}.pcap", std::process::id())))
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn frames() -> Vec<Vec<u8>> {
    (0..20u8)
        .map(|i| {
            let len = 64 + usize::from(i) * 50;
            let mut f = vec![0u8; len];
            UdpFrameSpec {
                dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                src_ip: Ipv4Addr::new(10, 0, 0, 1),
                dst_ip: Ipv4Addr::new(10, 1, 0, i),
                sport: 1000 + u16::from(i),
                dport: 53,
                ttl: 64,
                frame_bytes: len,
            }
            .write(&mut f)
            .unwrap();
            f
        })
        .collect()
}

fn write(path: &Path, frames: &[Vec<u8>]) {
    let mut p = PcapTxPort::create(path).unwrap();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    // In two bursts.
    let (a, b) = refs.split_at(refs.len().min(5));
    assert_eq!(p.tx_burst(a), a.len());
    assert_eq!(p.tx_burst(b), b.len());
    p.flush().unwrap();
    let s = p.stats();
    assert_eq!(s.tx_packets, frames.len() as u64);
    assert_eq!(
        s.tx_bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );
}

/// A temporary pcap file `name` holding [`frames`], and those frames.
fn written(name: &str) -> (Tmp, Vec<Vec<u8>>) {
    let t = Tmp::new(name);
    let fs = frames();
    write(&t.0, &fs);
    (t, fs)
}

fn read_all(p: &mut PcapRxPort, burst: usize, max: usize) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    while all.len() < max {
        let mut out: Vec<&[u8]> = vec![&[]; burst];
        let n = p.rx_burst(&mut out);
        if n == 0 {
            break;
        }
        all.extend(out[..n].iter().map(|f| f.to_vec()));
    }
    all
}

#[test]
fn roundtrip() {
    let (t, fs) = written("roundtrip");
    let mut rx = PcapRxPort::open(&t.0, Some(1)).unwrap();
    assert_eq!(rx.frame_count(), fs.len());
    assert_eq!(read_all(&mut rx, 7, usize::MAX), fs);
    assert!(rx.is_done());
    assert_eq!(rx.stats().rx_packets, fs.len() as u64);
    assert_eq!(rx.tx_burst(&[&fs[0]]), 0);
    assert_eq!(rx.stats().tx_dropped, 1);
}

#[test]
fn loops() {
    let (t, fs) = written("loops");
    let mut rx = PcapRxPort::open(&t.0, Some(3)).unwrap();
    let got = read_all(&mut rx, 32, usize::MAX);
    assert_eq!(got.len(), 3 * fs.len());
    assert_eq!(&got[2 * fs.len()..], &fs[..]);
    let mut rx = PcapRxPort::open(&t.0, Some(0)).unwrap();
    assert!(read_all(&mut rx, 8, usize::MAX).is_empty());
    let mut rx = PcapRxPort::open(&t.0, None).unwrap();
    let got = read_all(&mut rx, 9, 10 * fs.len());
    // Endless: reads stop only at our max (bursts of 9 past 200 frames).
    assert_eq!(got.len(), 207);
    assert_eq!(&got[200..207], &fs[..7]);
    assert!(!rx.is_done());
}

#[test]
fn drop_flushes() {
    let t = Tmp::new("dropflush");
    let fs = frames();
    {
        let mut p = PcapTxPort::create(&t.0).unwrap();
        p.tx_burst(&[&fs[0], &fs[1]]);
    }
    let mut rx = PcapRxPort::open(&t.0, Some(1)).unwrap();
    assert_eq!(read_all(&mut rx, 4, usize::MAX), fs[..2]);
}

#[test]
fn tx_drops_oversize_and_empty() {
    let t = Tmp::new("oversize");
    let mut p = PcapTxPort::create(&t.0).unwrap();
    let big = vec![0u8; TX_SNAPLEN as usize + 1];
    assert_eq!(p.tx_burst(&[&big, &[], &[1u8; 60]]), 1);
    assert_eq!((p.stats().tx_packets, p.stats().tx_dropped), (1, 2));
}

#[test]
fn tx_create_error_names_file() {
    let e = PcapTxPort::create("/nonexistent-dir/x.pcap").unwrap_err();
    assert!(matches!(e, PcapError::Io { .. }));
    assert!(e.to_string().contains("/nonexistent-dir/x.pcap"), "{e}");
}

fn bytes_of(fs: &[Vec<u8>]) -> (Tmp, Vec<u8>) {
    let t = Tmp::new(&format!("src{}", fs.len()));
    write(&t.0, fs);
    let b = std::fs::read(&t.0).unwrap();
    (t, b)
}

fn open_bytes(name: &str, b: &[u8]) -> (Tmp, Result<PcapRxPort, PcapError>) {
    let t = Tmp::new(name);
    std::fs::write(&t.0, b).unwrap();
    let r = PcapRxPort::open(&t.0, Some(1));
    (t, r)
}

#[test]
fn errors_name_the_file() {
    let (_s, good) = bytes_of(&frames()[..3]);
    type Expect = fn(&PcapError) -> bool;
    let cases: Vec<(&str, Vec<u8>, Expect)> = vec![
        ("empty", vec![], |e| {
            matches!(
                e,
                PcapError::Truncated {
                    what: "file header",
                    offset: 0,
                    ..
                }
            )
        }),
        ("short_hdr", good[..20].to_vec(), |e| {
            matches!(
                e,
                PcapError::Truncated {
                    what: "file header",
                    ..
                }
            )
        }),
        ("cut_record_hdr", good[..24 + 10].to_vec(), |e| {
            matches!(
                e,
                PcapError::Truncated {
                    what: "record",
                    offset: 24,
                    ..
                }
            )
        }),
        ("cut_record", good[..good.len() - 1].to_vec(), |e| {
            matches!(e, PcapError::Truncated { what: "record", .. })
        }),
        (
            "garbage",
            b"this is not a pcap file at all, no.".to_vec(),
            |e| matches!(e, PcapError::Format { offset: 0, .. }),
        ),
        ("pcapng", [&PCAPNG_MAGIC[..], &[0u8; 40]].concat(), |e| {
            matches!(e, PcapError::PcapNg { .. })
        }),
    ];
    for (name, bytes, ok) in cases {
        let (t, r) = open_bytes(name, &bytes);
        let e = r.unwrap_err();
        assert!(ok(&e), "{name}: {e:?}");
        assert!(
            e.to_string().contains(&*t.0.to_string_lossy()),
            "{name}: {e}"
        );
    }
    let e = PcapRxPort::open("/nonexistent/file.pcap", None).unwrap_err();
    assert!(matches!(e, PcapError::Io { .. }) && e.to_string().contains("/nonexistent/file.pcap"));
}

#[test]
fn huge_record_length_is_an_error() {
    let (_s, mut b) = bytes_of(&frames()[..1]);
    // incl_len of the first record (native order, as written).
    b[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_ne_bytes());
    let (_t, r) = open_bytes("hugerec", &b);
    assert!(matches!(
        r.unwrap_err(),
        PcapError::Format { offset: 24, .. } | PcapError::Truncated { offset: 24, .. }
    ));
}

#[test]
fn link_type_and_cap() {
    let (_s, mut b) = bytes_of(&frames()[..2]);
    let (t, r) = open_bytes("cap", &b);
    assert!(r.is_ok());
    let e = PcapRxPort::open_with_cap(&t.0, None, 100).unwrap_err();
    assert!(matches!(e, PcapError::TooLarge { cap: 100, .. }), "{e}");
    assert!(e.to_string().contains("cap"));
    b[20..24].copy_from_slice(&101u32.to_ne_bytes()); // LINKTYPE_RAW
    let (_t, r) = open_bytes("linktype", &b);
    assert!(matches!(
        r.unwrap_err(),
        PcapError::LinkType { linktype: 101, .. }
    ));
}

/// Big-endian files with nanosecond timestamps, as other tools write them.
#[test]
fn reads_big_endian_nanosecond() {
    let frame = frames().swap_remove(0);
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_3c4du32.to_be_bytes());
    b.extend_from_slice(&2u16.to_be_bytes());
    b.extend_from_slice(&4u16.to_be_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    for ts in [1u32, 999_999_999] {
        b.extend_from_slice(&1_700_000_000u32.to_be_bytes());
        b.extend_from_slice(&ts.to_be_bytes());
        b.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        b.extend_from_slice(&1500u32.to_be_bytes()); // captured short of its wire length
        b.extend_from_slice(&frame);
    }
    let (_t, r) = open_bytes("bens", &b);
    let mut rx = r.unwrap();
    assert_eq!(read_all(&mut rx, 8, usize::MAX), vec![frame.clone(), frame]);
}

#[test]
fn conformance() {
    let t = Tmp::new("conf");
    crate::conformance::check_sink(&mut PcapTxPort::create(&t.0).unwrap());
    crate::conformance::check_source(&mut PcapRxPort::open(&t.0, None).unwrap());
}

/// tcpdump reads what PcapTxPort writes. Skipped, with a note, where tcpdump
/// is not installed (CI installs it).
#[test]
fn tcpdump_reads_tx_file() {
    let Ok(out) = Command::new("tcpdump").arg("--version").output() else {
        eprintln!("note: tcpdump not installed; skipping tcpdump_reads_tx_file");
        return;
    };
    assert!(out.status.success());
    let (t, fs) = written("tcpdump");
    let out = Command::new("tcpdump")
        .args(["-r"])
        .arg(&t.0)
        .args(["-nn", "-vv"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tcpdump failed: {stderr}");
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains("10.0.0.1.")).collect();
    assert_eq!(lines.len(), fs.len(), "{stdout}");
    assert!(stdout.contains("10.0.0.1.1000 > 10.1.0.0.53"), "{stdout}");
    // -vv verifies checksums: none may be reported bad.
    assert!(!stdout.contains("bad"), "{stdout}");
}

mod corrupt {
    use proptest::prelude::*;

    use super::*;

    fn valid() -> Vec<u8> {
        let mut b = Vec::new();
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        h[16..20].copy_from_slice(&65535u32.to_le_bytes());
        h[20..24].copy_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&h);
        for f in frames().iter().take(4) {
            b.extend_from_slice(&[0; 8]);
            b.extend_from_slice(&(f.len() as u32).to_le_bytes());
            b.extend_from_slice(&(f.len() as u32).to_le_bytes());
            b.extend_from_slice(f);
        }
        b
    }

    /// Whatever `index` accepts, every range lies inside the data.
    fn check(b: &[u8]) {
        if let Ok(frames) = index(Path::new("fuzz.pcap"), b) {
            for r in frames {
                assert!(r.start < r.end && r.end <= b.len());
            }
        }
    }

    #[test]
    fn valid_parses() {
        assert_eq!(index(Path::new("v.pcap"), &valid()).unwrap().len(), 4);
    }

    proptest! {
        #[test]
        fn random_bytes(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            check(&b);
            // Behind a valid header, so the record parser is reached.
            check(&[&valid()[..24], &b[..]].concat());
        }

        #[test]
        fn mutated_file(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>()) {
            let mut b = valid();
            for (at, v) in flips {
                let i = at.index(b.len());
                b[i] = v;
            }
            let cut = cut.index(b.len() + 1);
            check(&b[..cut]);
            check(&b);
        }
    }
}
