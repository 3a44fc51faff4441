//! The rings over fake memory laid out as the kernel does, including
//! corrupt layouts: no kernel needed. (The port against the kernel is in
//! `tests/kernel_ports/`.)

use proptest::prelude::*;

use super::ring::*;
use super::*;
use crate::packet_sys::TP_STATUS_VLAN_VALID;

const BB: usize = 4096;
/// Where the kernel puts an Ethernet frame in a V3 packet: netoff =
/// TPACKET_ALIGN(68 + 16) = 96, minus the 14-byte header.
const MAC: usize = 82;

/// Ring memory owned by the test; written only through `base`.
struct Fake {
    _mem: Vec<u64>,
    base: *mut u8,
    len: usize,
}

impl Fake {
    fn new(len: usize) -> Fake {
        let mut mem = vec![0u64; len / 8];
        let base = mem.as_mut_ptr().cast::<u8>();
        Fake {
            _mem: mem,
            base,
            len,
        }
    }

    fn put(&mut self, at: usize, bytes: &[u8]) {
        assert!(at + bytes.len() <= self.len);
        // SAFETY: in bounds (asserted); no reference into the memory is
        // live while a test writes (frames are copied out before).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(at), bytes.len()) }
    }

    fn put32(&mut self, at: usize, v: u32) {
        self.put(at, &v.to_ne_bytes());
    }

    fn put16(&mut self, at: usize, v: u16) {
        self.put(at, &v.to_ne_bytes());
    }

    fn get32(&self, at: usize) -> u32 {
        assert!(at + 4 <= self.len);
        // SAFETY: in bounds (asserted).
        unsafe { self.base.add(at).cast::<u32>().read_unaligned() }
    }

    fn rx(&self, max_frame: usize) -> RxRing {
        // SAFETY: the memory lives as long as `self`, which the tests keep
        // beyond the ring; 8-aligned (Vec<u64>); BB is a multiple of 8.
        unsafe { RxRing::new(self.base, BB, self.len / BB, max_frame) }
    }

    /// Write block `b` as the kernel would, with `frames` (status word
    /// and VLAN metadata per frame), and hand it to user space.
    fn block(&mut self, b: usize, frames: &[(&[u8], u32, u16)]) {
        let base = b * BB;
        let mut off = block::HEADER_LEN;
        for (i, (f, status, tci)) in frames.iter().enumerate() {
            let p = base + off;
            let next = if i + 1 == frames.len() {
                0
            } else {
                (MAC + f.len()).next_multiple_of(8)
            };
            self.put32(p + h3::NEXT_OFFSET, next as u32);
            self.put32(p + h3::SNAPLEN, f.len() as u32);
            self.put32(p + h3::LEN, f.len() as u32);
            self.put32(p + h3::STATUS, TP_STATUS_USER | status);
            self.put16(p + h3::MAC, MAC as u16);
            self.put16(p + h3::VLAN_TCI, *tci);
            self.put16(p + h3::VLAN_TPID, 0);
            self.put(p + MAC, f);
            off += next;
        }
        self.put32(base + block::NUM_PKTS, frames.len() as u32);
        self.put32(base + block::FIRST_PKT, block::HEADER_LEN as u32);
        self.put32(base + block::STATUS, TP_STATUS_USER);
    }

    fn block_status(&self, b: usize) -> u32 {
        self.get32(b * BB + block::STATUS)
    }
}

fn frame(len: usize, tag: u8) -> Vec<u8> {
    let mut f = vec![tag; len];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

fn take(rx: &mut RxRing, n: usize, st: &mut PortStats) -> Vec<Vec<u8>> {
    let mut out: Vec<&[u8]> = vec![&[]; n];
    let got = rx.burst(&mut out, st);
    out[..got].iter().map(|f| f.to_vec()).collect()
}

#[test]
fn frames_in_order_blocks_released_on_the_next_call() {
    let mut m = Fake::new(BB * 4);
    let (a, b, c) = (frame(60, 1), frame(1514, 2), frame(14, 3));
    m.block(0, &[(&a, 0, 0), (&b, 0, 0)]);
    m.block(1, &[(&c, 0, 0)]);
    let mut rx = m.rx(2000);
    let mut st = PortStats::default();
    assert_eq!(take(&mut rx, 1, &mut st), vec![a.clone()]);
    assert_eq!(
        m.block_status(0),
        TP_STATUS_USER,
        "block 0 still being read"
    );
    assert_eq!(take(&mut rx, 8, &mut st), vec![b.clone(), c.clone()]);
    // Blocks 0 and 1 finished, handed back only on the next call.
    assert_eq!((m.block_status(0), m.block_status(1)), (1, 1));
    assert_eq!(take(&mut rx, 8, &mut st), Vec::<Vec<u8>>::new());
    assert_eq!((m.block_status(0), m.block_status(1)), (0, 0));
    assert_eq!(
        (st.rx_packets, st.rx_bytes, st.rx_dropped),
        (3, 60 + 1514 + 14, 0)
    );
    // The kernel refills block 2 (the next one): read from there.
    m.block(2, &[(&a, 0, 0)]);
    assert_eq!(take(&mut rx, 8, &mut st), vec![a]);
    assert_eq!(take(&mut rx, 0, &mut st), Vec::<Vec<u8>>::new());
    assert_eq!(m.block_status(2), 0);
}

#[test]
fn empty_ring_and_empty_blocks() {
    let mut m = Fake::new(BB * 2);
    let mut rx = m.rx(2000);
    let mut st = PortStats::default();
    assert!(take(&mut rx, 32, &mut st).is_empty());
    m.block(0, &[]);
    let f = frame(64, 9);
    m.block(1, &[(&f, 0, 0)]);
    assert_eq!(take(&mut rx, 32, &mut st), vec![f]);
    assert_eq!(st.rx_dropped, 0);
}

#[test]
fn whole_ring_read_stops_at_the_first_unreleased_block() {
    let mut m = Fake::new(BB * 3);
    let f = frame(64, 1);
    for b in 0..3 {
        m.block(b, &[(&f, 0, 0)]);
    }
    let mut rx = m.rx(2000);
    let mut st = PortStats::default();
    assert_eq!(take(&mut rx, 32, &mut st).len(), 3);
    // All three are pending release; none is read twice.
    assert_eq!(take(&mut rx, 32, &mut st).len(), 0);
    assert_eq!(st.rx_packets, 3);
}

#[test]
fn truncated_runt_and_oversize_frames_are_counted_drops() {
    let mut m = Fake::new(BB * 2);
    let (good, big, runt) = (frame(100, 1), frame(600, 2), vec![0u8; 10]);
    m.block(
        0,
        &[(&good, 0, 0), (&big, 0, 0), (&runt, 0, 0), (&good, 0, 0)],
    );
    // Packet 0 was cut short by the ring: tp_len larger than snaplen.
    m.put32(block::HEADER_LEN + h3::LEN, 5000);
    let mut rx = m.rx(512);
    let mut st = PortStats::default();
    assert_eq!(take(&mut rx, 32, &mut st), vec![good]);
    assert_eq!((st.rx_packets, st.rx_dropped), (1, 3));
}

#[test]
fn vlan_tag_put_back() {
    let mut m = Fake::new(BB * 2);
    let f = frame(60, 7);
    m.block(0, &[(&f, TP_STATUS_VLAN_VALID, 0x0123)]);
    let mut rx = m.rx(2000);
    let mut st = PortStats::default();
    assert_vlan_put_back(&take(&mut rx, 4, &mut st), &f);
    assert_eq!(st.rx_bytes, 64);
}

/// `got` is `f` (60 bytes) alone, with VLAN tag 0x0123 back in place.
pub(super) fn assert_vlan_put_back(got: &[Vec<u8>], f: &[u8]) {
    assert_eq!(got.len(), 1);
    let g = &got[0];
    assert_eq!(g.len(), 64);
    assert_eq!(&g[..12], &f[..12]);
    assert_eq!(&g[12..16], &[0x81, 0x00, 0x01, 0x23]);
    assert_eq!(&g[16..], &f[12..]);
}

/// Each corruption: what is still delivered, what is counted lost.
#[test]
fn corrupt_blocks_are_counted_never_followed() {
    type Corrupt = fn(&mut Fake);
    let cases: [(&str, Corrupt, usize, u64); 9] = [
        (
            "first packet past the block",
            |m| m.put32(block::FIRST_PKT, BB as u32),
            0,
            3,
        ),
        (
            "first packet inside the header",
            |m| m.put32(block::FIRST_PKT, 8),
            0,
            3,
        ),
        (
            "absurd packet count",
            |m| m.put32(block::NUM_PKTS, u32::MAX),
            0,
            85,
        ),
        (
            "more packets than written",
            |m| m.put32(block::NUM_PKTS, 5),
            3,
            2,
        ),
        (
            "snaplen past the block",
            |m| m.put32(48 + h3::SNAPLEN, BB as u32),
            0,
            3,
        ),
        ("mac inside the header", |m| m.put16(48 + h3::MAC, 4), 0, 3),
        (
            "mac past the block",
            |m| m.put16(48 + h3::MAC, u16::MAX),
            0,
            3,
        ),
        (
            "next offset zero",
            |m| m.put32(48 + h3::NEXT_OFFSET, 0),
            1,
            2,
        ),
        (
            "next offset backwards into the frame",
            |m| m.put32(48 + h3::NEXT_OFFSET, 40),
            1,
            2,
        ),
    ];
    for (what, corrupt, delivered, dropped) in cases {
        let mut m = Fake::new(BB * 2);
        let f = frame(100, 1);
        m.block(0, &[(&f, 0, 0), (&f, 0, 0), (&f, 0, 0)]);
        corrupt(&mut m);
        let g = frame(64, 2);
        m.block(1, &[(&g, 0, 0)]);
        let mut rx = m.rx(2000);
        let mut st = PortStats::default();
        let got = take(&mut rx, 64, &mut st);
        assert_eq!(got.len(), delivered + 1, "{what}: delivered");
        assert!(got[..delivered].iter().all(|x| *x == f), "{what}");
        assert_eq!(got[delivered], g, "{what}: the next block is read");
        assert_eq!(st.rx_dropped, dropped, "{what}: dropped");
        assert_eq!(take(&mut rx, 64, &mut st).len(), 0, "{what}");
        assert_eq!((m.block_status(0), m.block_status(1)), (0, 0), "{what}");
    }
}

#[test]
fn tx_ring_v3_and_v2_layout_and_full_ring() {
    for version in [TxVersion::V3, TxVersion::V2] {
        let hdr = match version {
            TxVersion::V2 => h2::HEADER_LEN,
            TxVersion::V3 => h3::HEADER_LEN,
        };
        let status_at = match version {
            TxVersion::V2 => h2::STATUS,
            TxVersion::V3 => h3::STATUS,
        };
        let len_at = match version {
            TxVersion::V2 => h2::LEN,
            TxVersion::V3 => h3::LEN,
        };
        // 2 blocks of 4096 holding 2 frames of 2048 each.
        let mut m = Fake::new(BB * 2);
        // SAFETY: the memory outlives the ring; aligned to 8, frame offsets
        // multiples of 2048.
        let mut tx = unsafe { TxRing::new(m.base, BB, 2, 2048, version) };
        assert_eq!(tx.count, 4);
        let f = frame(100, 5);
        for i in 0..4 {
            assert!(tx.push(&f), "{version:?} frame {i}");
            let at = i * 2048;
            assert_eq!(m.get32(at + status_at), TP_STATUS_SEND_REQUEST);
            assert_eq!(m.get32(at + len_at), 100);
            // SAFETY: in bounds of the fake memory.
            let data = unsafe { std::slice::from_raw_parts(m.base.add(at + hdr), 100) };
            assert_eq!(data, &f[..]);
        }
        assert_eq!(tx.queued, 4);
        assert!(tx.last_pending());
        assert!(!tx.push(&f), "{version:?}: full");
        assert!(
            !tx.push(&vec![0u8; 2048 - hdr + 1]),
            "{version:?}: too long"
        );
        // The kernel sends frames 0 and 1; the ring wraps into them.
        m.put32(status_at, TP_STATUS_AVAILABLE);
        m.put32(2048 + status_at, 2); // TP_STATUS_SENDING: still in flight
        assert!(tx.push(&f));
        assert!(!tx.push(&f), "{version:?}: frame 1 in flight");
        // The kernel took everything.
        for i in 0..4 {
            m.put32(i * 2048 + status_at, TP_STATUS_AVAILABLE);
        }
        assert!(!tx.last_pending());
        assert!(tx.push(&f));
        assert!(tx.last_pending());
    }
}

#[test]
fn config_validation() {
    let d = AfPacketConfig::default();
    let g = d.geometry(4096).unwrap();
    assert_eq!(
        (g.rx_bytes(), g.tx_block, g.tx_blocks),
        (16 << 20, 4096, 512)
    );
    assert_eq!(d.max_frame_len(), 2000);
    let bad = |c: AfPacketConfig| c.geometry(4096).unwrap_err();
    assert!(
        bad(AfPacketConfig {
            block_bytes: 5000,
            ..d
        })
        .contains("page size")
    );
    assert!(
        bad(AfPacketConfig {
            block_bytes: 0,
            ..d
        })
        .contains("block_bytes")
    );
    assert!(
        bad(AfPacketConfig {
            block_count: 0,
            ..d
        })
        .contains("block_count")
    );
    assert!(
        bad(AfPacketConfig {
            frame_bytes: 100,
            ..d
        })
        .contains("frame_bytes")
    );
    assert!(
        bad(AfPacketConfig {
            frame_bytes: 2050,
            ..d
        })
        .contains("frame_bytes")
    );
    assert!(
        bad(AfPacketConfig {
            frame_bytes: 8192,
            block_bytes: 4096,
            ..d
        })
        .contains("frame_bytes")
    );
    assert!(bad(AfPacketConfig { tx_frames: 0, ..d }).contains("tx_frames"));
    assert!(
        bad(AfPacketConfig {
            block_bytes: 1 << 30,
            block_count: 2,
            ..d
        })
        .contains("exceeds")
    );
    // Jumbo frames: a tx block of three pages holds one frame.
    let j = AfPacketConfig {
        frame_bytes: 9216,
        block_bytes: 1 << 20,
        ..d
    };
    let g = j.geometry(4096).unwrap();
    assert_eq!(
        (g.tx_block, g.tx_frames_per_block(), g.tx_blocks),
        (12288, 1, 1024)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the blocks hold, the reader hands out only frames inside
    /// the ring, no longer than the limit, and never panics.
    #[test]
    fn random_blocks_never_escape_the_ring(
        bytes in proptest::collection::vec(any::<u8>(), BB * 2),
        words in proptest::collection::vec((0usize..BB / 2, any::<u32>()), 0..64),
        bursts in proptest::collection::vec(0usize..40, 1..6),
    ) {
        let mut m = Fake::new(BB * 2);
        m.put(0, &bytes);
        // Plausible values in places: small offsets, counts.
        for (w, v) in words {
            m.put32(w * 4, v % 512);
        }
        for b in 0..2 {
            m.put32(b * BB + block::STATUS, TP_STATUS_USER);
        }
        let (lo, hi) = (m.base as usize, m.base as usize + m.len);
        let mut rx = m.rx(1500);
        let mut st = PortStats::default();
        for n in bursts {
            let mut out: Vec<&[u8]> = vec![&[]; n];
            let got = rx.burst(&mut out, &mut st);
            prop_assert!(got <= n);
            for f in &out[..got] {
                let p = f.as_ptr() as usize;
                prop_assert!(p >= lo && p + f.len() <= hi);
                prop_assert!(f.len() >= ETH_HLEN && f.len() <= 1500);
            }
        }
        prop_assert!(st.rx_packets + st.rx_dropped <= 2 * u64::from(rx.max_pkts));
    }
}

/// The contract every port keeps, against the kernel: frames sent by a
/// peer over veth, then the port as a sink.
#[test]
fn conformance() {
    use crate::conformance;
    for version in [TxVersion::V3, TxVersion::V2] {
        let (a, b) = conformance::veth_pair();
        let cfg = AfPacketConfig {
            tx_version: version,
            ..AfPacketConfig::default()
        };
        let mut port = conformance::open_in(&a, || AfPacketPort::open("c0", cfg));
        let mut peer = conformance::socket_on(&b, "c1");
        conformance::check_kernel_port(&mut port, &mut peer);
    }
}
