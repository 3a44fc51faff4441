//! The `TPACKET_V2` rx reader over fake memory laid out as the kernel lays
//! it out, corrupt headers included: no kernel needed.

use super::frames::{RxFrames, h2rx};
use super::ring::TP_STATUS_USER;
use crate::PortStats;
use crate::packet_sys::TP_STATUS_VLAN_VALID;

const BB: usize = 4096;
const FB: usize = 2048;
/// Where the kernel puts an Ethernet frame in a V2 slot: netoff =
/// TPACKET_ALIGN(52 + 16) = 80, minus the 14-byte header.
const MAC: usize = 66;

/// Ring memory owned by the test: `blocks` blocks of two slots.
struct Fake {
    mem: Vec<u64>,
}

impl Fake {
    fn new(blocks: usize) -> Fake {
        Fake {
            mem: vec![0; blocks * BB / 8],
        }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the Vec's u64s viewed as bytes: same memory, same length
        // in bytes, u8 has no alignment or validity needs.
        unsafe { std::slice::from_raw_parts_mut(self.mem.as_mut_ptr().cast(), self.mem.len() * 8) }
    }

    fn put32(&mut self, at: usize, v: u32) {
        self.bytes()[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }

    fn put16(&mut self, at: usize, v: u16) {
        self.bytes()[at..at + 2].copy_from_slice(&v.to_ne_bytes());
    }

    fn status(&mut self, slot: usize) -> u32 {
        let at = slot * FB;
        u32::from_ne_bytes(self.bytes()[at..at + 4].try_into().unwrap())
    }

    /// Write slot `i` as the kernel would and hand it to user space.
    fn slot(&mut self, i: usize, f: &[u8], status: u32, tci: u16) {
        let at = i * FB;
        self.bytes()[at + MAC..at + MAC + f.len()].copy_from_slice(f);
        self.put32(at + h2rx::LEN, f.len() as u32);
        self.put32(at + h2rx::SNAPLEN, f.len() as u32);
        self.put16(at + h2rx::MAC, MAC as u16);
        self.put16(at + h2rx::VLAN_TCI, tci);
        self.put32(at + h2rx::STATUS, TP_STATUS_USER | status);
    }

    fn rx(&mut self, max_frame: usize) -> RxFrames {
        let blocks = self.mem.len() * 8 / BB;
        // SAFETY: the memory lives as long as `self`, which the tests keep
        // beyond the reader, and does not move; 8-aligned (Vec<u64>) where
        // the reader needs 4 for its status words.
        unsafe { RxFrames::new(self.mem.as_mut_ptr().cast(), BB, blocks, FB, max_frame) }
    }
}

fn frame(len: usize, tag: u8) -> Vec<u8> {
    let mut f = vec![tag; len];
    if let Some(t) = f.get_mut(12..14) {
        t.copy_from_slice(&[0x08, 0x00]);
    }
    f
}

fn take(rx: &mut RxFrames, n: usize, st: &mut PortStats) -> Vec<Vec<u8>> {
    let mut out: Vec<&[u8]> = vec![&[]; n];
    let got = rx.burst(&mut out, st);
    out[..got].iter().map(|f| f.to_vec()).collect()
}

#[test]
fn frames_in_order_slots_released_on_the_next_call_and_wrapping() {
    let mut m = Fake::new(2);
    let (a, b, c) = (frame(60, 1), frame(1514, 2), frame(100, 3));
    m.slot(0, &a, 0, 0);
    m.slot(1, &b, 0, 0);
    let mut rx = m.rx(2000);
    let mut st = PortStats::default();
    assert_eq!(take(&mut rx, 1, &mut st), vec![a.clone()]);
    assert_eq!(take(&mut rx, 8, &mut st), vec![b.clone()]);
    // Nothing more handed over; the call released the first slot.
    assert!(take(&mut rx, 8, &mut st).is_empty());
    assert_eq!((m.status(0), m.status(1)), (0, 0));
    m.slot(2, &c, 0, 0);
    m.slot(3, &a, 0, 0);
    m.slot(0, &b, 0, 0);
    assert_eq!(take(&mut rx, 8, &mut st), vec![c, a, b]);
    assert_eq!((st.rx_packets, st.rx_dropped), (5, 0));
}

#[test]
fn a_full_ring_is_read_once_until_released() {
    let mut m = Fake::new(1);
    m.slot(0, &frame(60, 1), 0, 0);
    m.slot(1, &frame(60, 2), 0, 0);
    let mut rx = m.rx(2000);
    let mut st = PortStats::default();
    let mut out: Vec<&[u8]> = vec![&[]; 8];
    assert_eq!(rx.burst(&mut out, &mut st), 2);
    assert_eq!(st.rx_packets, 2);
}

#[test]
fn bad_slots_are_counted_drops_never_read_outside_their_slot() {
    let mut m = Fake::new(4);
    let good = frame(60, 9);
    // Cut short by the ring, a runt, too long, a MAC offset inside the
    // header, a frame past the slot's end.
    m.slot(0, &frame(60, 1), 0, 0);
    m.put32(h2rx::LEN, 100);
    m.slot(1, &frame(10, 2), 0, 0);
    m.slot(2, &frame(1800, 3), 0, 0);
    m.slot(3, &frame(60, 4), 0, 0);
    m.put16(3 * FB + h2rx::MAC, 8);
    m.slot(4, &frame(60, 5), 0, 0);
    m.put32(4 * FB + h2rx::SNAPLEN, 4000);
    m.put32(4 * FB + h2rx::LEN, 4000);
    m.slot(5, &good, 0, 0);
    let mut rx = m.rx(1600);
    let mut st = PortStats::default();
    assert_eq!(take(&mut rx, 16, &mut st), vec![good]);
    assert_eq!((st.rx_packets, st.rx_dropped), (1, 5));
}

#[test]
fn vlan_tag_put_back() {
    let mut m = Fake::new(1);
    let f = frame(60, 7);
    m.slot(0, &f, TP_STATUS_VLAN_VALID, 0x0123);
    let mut rx = m.rx(2000);
    let mut st = PortStats::default();
    super::tests::assert_vlan_put_back(&take(&mut rx, 4, &mut st), &f);
}
