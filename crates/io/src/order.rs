//! `OrderSink`: a counting sink that also checks per-flow packet order.
//!
//! Like [`NullPort`](crate::null::NullPort) it accepts every frame it is
//! sent and counts packets and bytes. On top of that it reads the sequence
//! number that [`MemPort`](crate::mem::MemPort) stamps when
//! [`stamp_sequence`](crate::mem::MemPortConfig::stamp_sequence) is set (a
//! big-endian u64 at frame bytes 42..50, the first 8 bytes of the UDP
//! payload) and checks, for each flow, that those numbers keep increasing.
//! The generator's numbers are global across flows, so within one flow they
//! increase but skip; only a step backwards (or in place) is a fault.
//!
//! A flow is the 5-tuple (IPv4 source, destination, protocol, UDP source
//! and destination port) of an untagged Ethernet + IPv4 (IHL 5, not a later
//! fragment, total length covering the number) + UDP frame. For each flow
//! the sink remembers the highest number seen; a frame with a lower one is
//! *reordered*, with an equal one a *duplicate*. Any other frame (ARP, VLAN
//! tagged, IP options, TCP, too short) is counted as *unsequenced* and
//! otherwise only counted.
//!
//! # Cost and capacity
//!
//! The check is one multiply-fold hash of the tuple and, nearly always, one
//! probe of an open-addressing table (linear probing, kept at most half
//! full, so a lookup averages about 1.5 probes at the worst load): about
//! 3 ns a frame more than `NullPort` with 4096 flows, whose entries stay in
//! cache; with tens of thousands of flows a check costs a cache miss
//! (about 12 ns with 65,536 flows on the machine where this was written).
//! The table is allocated and touched when the sink is created, for
//! [`DEFAULT_FLOWS`] flows unless [`OrderSink::with_flows`] says otherwise
//! (24 bytes an entry, twice as many entries as flows, rounded up to a
//! power of two: 3 MiB for the default); nothing is allocated per frame. When it holds its maximum
//! number of flows, frames of new flows are counted as *untracked* and not
//! checked; the flows already in it keep being checked.
//!
//! The shared [`OrderCounters`] are updated once per `tx_burst`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::null::SinkCounters;
use crate::{Port, PortStats};

/// Flows an [`OrderSink::new`] sink tracks.
pub const DEFAULT_FLOWS: usize = 65_536;

/// Most flows a sink tracks, whatever [`OrderSink::with_flows`] is asked
/// for (a 768 MiB table).
pub const MAX_FLOWS: usize = 1 << 24;

/// Byte ranges read from a frame (untagged Ethernet, IPv4 without options,
/// UDP).
mod field {
    use std::ops::Range;

    pub const ETHERTYPE: Range<usize> = 12..14;
    /// IPv4 version and IHL: 0x45.
    pub const VER_IHL: usize = 14;
    pub const IP_TOTAL_LEN: Range<usize> = 16..18;
    pub const IP_FLAGS_FRAG: Range<usize> = 20..22;
    pub const IP_PROTO: usize = 23;
    /// Source and destination addresses, together.
    pub const IP_ADDRS: Range<usize> = 26..34;
    /// Source and destination ports, together.
    pub const UDP_PORTS: Range<usize> = 34..38;
    /// The generator's sequence number: the first 8 bytes of the UDP
    /// payload (`vrhost_packet::build::PAYLOAD_OFFSET`).
    pub const SEQ: Range<usize> = 42..50;
    /// Bytes a frame needs for all of the above.
    pub const MIN_LEN: usize = SEQ.end;
    /// IPv4 total length covering the UDP header and the number.
    pub const MIN_IP_LEN: u16 = 20 + 8 + 8;
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const PROTO_UDP: u8 = 17;
/// Fragment offset bits of the flags/fragment field.
const FRAG_OFFSET_MASK: u16 = 0x1fff;
/// Set in every used [`Entry::rest`], so that an all-zero entry is free.
const USED: u64 = 1 << 63;

/// Totals of an [`OrderSink`], readable from any thread.
///
/// Only the sink's worker writes them, once per `tx_burst`, with plain
/// `Relaxed` stores of its running totals (a single writer needs no
/// read-modify-write). `Relaxed` is enough: each counter is monotonic and
/// read for display or a final tally; no other memory is published through
/// them, so a reader needs no happens-before edge, only an eventually
/// visible value. The counters are independent: a reader may see
/// `packets` of one burst with `reordered` of the previous one. A reader
/// that needs a consistent set reads after the sender has stopped and
/// joined (the join orders everything).
#[derive(Debug, Default)]
pub struct OrderCounters {
    /// Frames and bytes, kept as a [`NullPort`](crate::null::NullPort)
    /// keeps them.
    sink: SinkCounters,
    reordered: AtomicU64,
    duplicate: AtomicU64,
    unsequenced: AtomicU64,
    untracked: AtomicU64,
    flows: AtomicU64,
}

impl OrderCounters {
    /// Frames received by the sink so far (every one, checked or not).
    pub fn packets(&self) -> u64 {
        self.sink.packets()
    }

    /// Bytes of those frames.
    pub fn bytes(&self) -> u64 {
        self.sink.bytes()
    }

    /// Frames whose number was below the highest seen in their flow.
    pub fn reordered(&self) -> u64 {
        // Relaxed: a monotonic counter read for display (see the type docs).
        self.reordered.load(Ordering::Relaxed)
    }

    /// Frames whose number equalled the highest seen in their flow.
    pub fn duplicate(&self) -> u64 {
        // Relaxed: as `reordered`.
        self.duplicate.load(Ordering::Relaxed)
    }

    /// Frames that are not IPv4 + UDP with a number (not checked).
    pub fn unsequenced(&self) -> u64 {
        // Relaxed: as `reordered`.
        self.unsequenced.load(Ordering::Relaxed)
    }

    /// Frames of new flows met when the flow table was full (not checked).
    pub fn untracked(&self) -> u64 {
        // Relaxed: as `reordered`.
        self.untracked.load(Ordering::Relaxed)
    }

    /// Flows in the table.
    pub fn flows(&self) -> u64 {
        // Relaxed: as `reordered`.
        self.flows.load(Ordering::Relaxed)
    }
}

/// The worker's running totals, published to [`OrderCounters`] per burst.
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    reordered: u64,
    duplicate: u64,
    unsequenced: u64,
    untracked: u64,
}

/// One flow: its tuple and the highest number seen. All zero when free.
#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    /// Source and destination addresses, as they are in the frame.
    addrs: u64,
    /// [`USED`] | protocol << 32 | ports as they are in the frame.
    rest: u64,
    /// Highest sequence number seen.
    max_seq: u64,
}

/// The counting, order-checking sink. See the [module docs](self).
#[derive(Debug)]
pub struct OrderSink {
    name: String,
    stats: PortStats,
    totals: Totals,
    /// A power of two long, at least twice `max_flows` (and 2).
    table: Box<[Entry]>,
    /// `table.len() - 1`.
    mask: usize,
    flows: usize,
    max_flows: usize,
    shared: Arc<OrderCounters>,
}

impl OrderSink {
    /// A sink named `name` tracking up to [`DEFAULT_FLOWS`] flows.
    pub fn new(name: impl Into<String>) -> OrderSink {
        OrderSink::with_flows(name, DEFAULT_FLOWS)
    }

    /// A sink tracking up to `max_flows` flows (capped at [`MAX_FLOWS`]; 0
    /// tracks none and counts every sequenced frame as untracked).
    pub fn with_flows(name: impl Into<String>, max_flows: usize) -> OrderSink {
        let max_flows = max_flows.min(MAX_FLOWS);
        // At most half full: short probe sequences, and always a free
        // entry to end a probe for an absent flow.
        let len = (max_flows * 2).max(2).next_power_of_two();
        let mut table = Vec::with_capacity(len);
        // Written, not calloc'ed: the pages are faulted in now rather than
        // during a measured run.
        table.resize(len, Entry::default());
        OrderSink {
            name: name.into(),
            stats: PortStats::default(),
            totals: Totals::default(),
            table: table.into_boxed_slice(),
            mask: len - 1,
            flows: 0,
            max_flows,
            shared: Arc::default(),
        }
    }

    /// The shared counters, to read from another thread.
    pub fn counters(&self) -> Arc<OrderCounters> {
        Arc::clone(&self.shared)
    }

    /// Check one frame against its flow's state.
    #[inline]
    fn check(&mut self, frame: &[u8]) {
        let Some((addrs, rest, seq)) = parse(frame) else {
            self.totals.unsequenced += 1;
            return;
        };
        let mut i = hash(addrs, rest) as usize & self.mask;
        loop {
            let e = &mut self.table[i];
            if e.rest == rest && e.addrs == addrs {
                if seq > e.max_seq {
                    e.max_seq = seq;
                } else if seq < e.max_seq {
                    self.totals.reordered += 1;
                } else {
                    self.totals.duplicate += 1;
                }
                return;
            }
            if e.rest == 0 {
                if self.flows < self.max_flows {
                    *e = Entry {
                        addrs,
                        rest,
                        max_seq: seq,
                    };
                    self.flows += 1;
                } else {
                    self.totals.untracked += 1;
                }
                return;
            }
            // Ends: the table is never more than half full.
            i = (i + 1) & self.mask;
        }
    }

    fn publish(&self) {
        // Relaxed (every store): single writer, monotonic totals read for
        // display; see `OrderCounters`.
        let s = &self.shared;
        s.sink.publish(&self.stats);
        s.reordered.store(self.totals.reordered, Ordering::Relaxed);
        s.duplicate.store(self.totals.duplicate, Ordering::Relaxed);
        s.unsequenced
            .store(self.totals.unsequenced, Ordering::Relaxed);
        s.untracked.store(self.totals.untracked, Ordering::Relaxed);
        s.flows.store(self.flows as u64, Ordering::Relaxed);
    }
}

/// The flow tuple (addresses; protocol and ports, tagged [`USED`]) and the
/// number of a sequenced frame; `None` for any other frame. Reads fixed
/// offsets of the first [`field::MIN_LEN`] bytes, after one length check,
/// so it cannot panic.
#[inline]
fn parse(frame: &[u8]) -> Option<(u64, u64, u64)> {
    let h: &[u8; field::MIN_LEN] = frame.first_chunk()?;
    let be16 = |r: std::ops::Range<usize>| u16::from_be_bytes([h[r.start], h[r.start + 1]]);
    let ip_len = be16(field::IP_TOTAL_LEN);
    if be16(field::ETHERTYPE) != ETHERTYPE_IPV4
        || h[field::VER_IHL] != 0x45
        || h[field::IP_PROTO] != PROTO_UDP
        || be16(field::IP_FLAGS_FRAG) & FRAG_OFFSET_MASK != 0
        || ip_len < field::MIN_IP_LEN
        || usize::from(ip_len) > frame.len() - 14
    {
        return None;
    }
    let mut addrs = [0u8; 8];
    addrs.copy_from_slice(&h[field::IP_ADDRS]);
    let mut ports = [0u8; 4];
    ports.copy_from_slice(&h[field::UDP_PORTS]);
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&h[field::SEQ]);
    let rest = USED | u64::from(h[field::IP_PROTO]) << 32 | u64::from(u32::from_ne_bytes(ports));
    Some((u64::from_ne_bytes(addrs), rest, u64::from_be_bytes(seq)))
}

/// Multiply-fold: the 128-bit product's halves XORed. Every output bit
/// depends on every input bit of both factors.
#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ (p >> 64) as u64
}

/// Hash of a flow tuple: two multiply-folds by constants (digits of pi,
/// as in foldhash); the table index is its low bits.
#[inline]
fn hash(addrs: u64, rest: u64) -> u64 {
    fold_mul(
        fold_mul(addrs, 0x243f_6a88_85a3_08d3) ^ rest,
        0x082e_fa98_ec4e_6c89,
    )
}

impl Port for OrderSink {
    fn name(&self) -> &str {
        &self.name
    }

    /// Never has frames.
    fn rx_burst<'a>(&'a mut self, _out: &mut [&'a [u8]]) -> usize {
        0
    }

    /// Accepts every frame, counts it and checks its order.
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        if frames.is_empty() {
            return 0;
        }
        for f in frames {
            self.stats.tx_bytes += f.len() as u64;
            self.check(f);
        }
        self.stats.tx_packets += frames.len() as u64;
        self.publish();
        frames.len()
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::net::Ipv4Addr;

    use proptest::prelude::*;
    use vrhost_packet::MacAddr;
    use vrhost_packet::build::{BuildOptions, PayloadFill, UdpFrameSpec};

    use super::*;
    use crate::mem::{DstMode, MemPort, MemPortConfig};

    /// A generator-like frame of flow `(src, dst, sport, dport)` carrying
    /// `seq`.
    fn frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, seq: u64) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        UdpFrameSpec {
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            src_ip: Ipv4Addr::from(src),
            dst_ip: Ipv4Addr::from(dst),
            sport,
            dport,
            ttl: 64,
            frame_bytes: 64,
        }
        .write_with(
            &mut f,
            BuildOptions {
                udp_checksum: false,
                payload: PayloadFill::Zero,
            },
        )
        .unwrap();
        f[field::SEQ].copy_from_slice(&seq.to_be_bytes());
        f
    }

    fn send(p: &mut OrderSink, frames: &[Vec<u8>]) {
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        for burst in refs.chunks(32) {
            assert_eq!(p.tx_burst(burst), burst.len());
        }
    }

    /// (packets, reordered, duplicate, unsequenced, untracked, flows).
    fn tally(c: &OrderCounters) -> (u64, u64, u64, u64, u64, u64) {
        (
            c.packets(),
            c.reordered(),
            c.duplicate(),
            c.unsequenced(),
            c.untracked(),
            c.flows(),
        )
    }

    #[test]
    fn generator_traffic_in_order() {
        // 4096 templates over 16 sources and random destinations: the
        // real generator, stamping, through the sink several times round.
        let srcs: Vec<Ipv4Addr> = (1..=16).map(|i| Ipv4Addr::new(10, 0, 0, i)).collect();
        let mut gen_port = MemPort::new(
            "mem0",
            MemPortConfig {
                dst: DstMode::RandomClassC,
                src_ips: srcs,
                stamp_sequence: true,
                ..MemPortConfig::default()
            },
        )
        .unwrap();
        let distinct: std::collections::HashSet<Vec<u8>> = (0..gen_port.templates())
            .map(|i| gen_port.template(i)[26..38].to_vec())
            .collect();
        let mut sink = OrderSink::new("order0");
        let c = sink.counters();
        let mut sent = 0u64;
        while sent < 5 * 4096 {
            let mut out: Vec<&[u8]> = vec![&[]; 32];
            let n = gen_port.rx_burst(&mut out);
            sent += n as u64;
            assert_eq!(sink.tx_burst(&out[..n]), n);
        }
        assert_eq!(tally(&c), (sent, 0, 0, 0, 0, distinct.len() as u64));
        assert!(distinct.len() > 4000, "{} flows", distinct.len());
        assert_eq!(c.bytes(), sent * 64);
        assert_eq!(sink.stats().tx_packets, sent);
    }

    #[test]
    fn one_swap_is_one_reorder() {
        // Three flows, numbers global and increasing; swap frames 10 and 13
        // (both of flow 10 % 3 = 13 % 3 = 1).
        let mut frames: Vec<Vec<u8>> = (0..30u64)
            .map(|i| frame([10, 0, 0, 1], [10, 1, 0, (i % 3) as u8], 1024, 1024, i))
            .collect();
        frames.swap(10, 13);
        let mut p = OrderSink::new("order0");
        send(&mut p, &frames);
        assert_eq!(tally(&p.counters()), (30, 1, 0, 0, 0, 3));
    }

    #[test]
    fn duplicates_are_not_reorders() {
        let f = |seq| frame([10, 0, 0, 1], [10, 1, 0, 1], 1, 2, seq);
        let mut p = OrderSink::new("order0");
        send(&mut p, &[f(5), f(5), f(6), f(6), f(4), f(7)]);
        assert_eq!(tally(&p.counters()), (6, 1, 2, 0, 0, 1));
    }

    #[test]
    fn interleaved_flows_never_count() {
        // Flows that differ in one field each (source, destination, source
        // port, destination port), and whose numbers would go backwards if
        // any two of them were taken for one flow.
        let base = ([10, 0, 0, 1], [10, 1, 0, 1], 1000, 2000);
        let flows = [
            base,
            ([10, 0, 0, 2], base.1, base.2, base.3),
            (base.0, [10, 1, 0, 2], base.2, base.3),
            (base.0, base.1, 1001, base.3),
            (base.0, base.1, base.2, 2001),
        ];
        let mut frames = Vec::new();
        for round in 0..100u64 {
            for (k, &(s, d, sp, dp)) in flows.iter().enumerate() {
                // Flow k starts k * 1000 higher: later flows' numbers are
                // ahead of earlier ones', as when flows take different paths.
                let seq = (flows.len() as u64 - k as u64) * 1000 + round;
                frames.push(frame(s, d, sp, dp, seq));
            }
        }
        let mut p = OrderSink::new("order0");
        send(&mut p, &frames);
        assert_eq!(tally(&p.counters()), (500, 0, 0, 0, 0, 5));
    }

    #[test]
    fn unsequenced_frames() {
        let good = frame([10, 0, 0, 1], [10, 1, 0, 1], 1, 2, 9);
        let mut vlan = good.clone();
        vlan[12..14].copy_from_slice(&[0x81, 0x00]);
        let mut options = good.clone();
        options[14] = 0x46;
        let mut tcp = good.clone();
        tcp[23] = 6;
        let mut later_fragment = good.clone();
        later_fragment[21] = 1;
        let mut short_ip = good.clone();
        short_ip[16..18].copy_from_slice(&35u16.to_be_bytes());
        let mut long_ip = good.clone();
        long_ip[16..18].copy_from_slice(&51u16.to_be_bytes());
        let mut first_fragment = good.clone();
        first_fragment[20] |= 0x20; // MF: the number is in this one.
        let frames = [
            vec![],
            good[..49].to_vec(),
            vlan,
            options,
            tcp,
            later_fragment,
            short_ip,
            long_ip,
            first_fragment,
            good,
        ];
        let mut p = OrderSink::new("order0");
        send(&mut p, &frames);
        // The first fragment and the good frame: one flow, same number.
        assert_eq!(tally(&p.counters()), (10, 0, 1, 8, 0, 1));
        assert_eq!(p.stats().tx_bytes, 49 + 8 * 64);
    }

    #[test]
    fn full_table_counts_untracked() {
        let mut p = OrderSink::with_flows("order0", 3);
        let f = |dst: u8, seq| frame([10, 0, 0, 1], [10, 1, 0, dst], 1, 2, seq);
        // Flows 0..3 tracked; 3 and 4 not; flow 1 still checked.
        send(
            &mut p,
            &[
                f(0, 1),
                f(1, 1),
                f(2, 1),
                f(3, 1),
                f(4, 1),
                f(1, 0),
                f(3, 0),
            ],
        );
        assert_eq!(tally(&p.counters()), (7, 1, 0, 0, 3, 3));
        let mut none = OrderSink::with_flows("order1", 0);
        send(&mut none, &[f(0, 1), f(0, 0)]);
        assert_eq!(tally(&none.counters()), (2, 0, 0, 0, 2, 0));
    }

    #[test]
    fn default_table_holds_its_flows() {
        let mut p = OrderSink::new("order0");
        let mut f = frame([10, 0, 0, 1], [10, 1, 0, 1], 1, 2, 0);
        let frames: Vec<Vec<u8>> = (0..DEFAULT_FLOWS as u32 + 1)
            .map(|i| {
                f[30..34].copy_from_slice(&(0x0a00_0000 | i).to_be_bytes());
                f.clone()
            })
            .collect();
        send(&mut p, &frames);
        assert_eq!(
            tally(&p.counters()),
            (DEFAULT_FLOWS as u64 + 1, 0, 0, 0, 1, DEFAULT_FLOWS as u64)
        );
        // Consecutive addresses spread well: short probe sequences.
        let probes: usize = frames[..DEFAULT_FLOWS]
            .iter()
            .map(|f| {
                let (a, r, _) = parse(f).unwrap();
                let home = hash(a, r) as usize & p.mask;
                let at = (0..p.table.len())
                    .map(|k| (home + k) & p.mask)
                    .find(|&i| p.table[i].addrs == a && p.table[i].rest == r)
                    .unwrap();
                (at.wrapping_sub(home) & p.mask) + 1
            })
            .sum();
        let mean = probes as f64 / DEFAULT_FLOWS as f64;
        assert!(mean < 2.0, "mean probes {mean}");
    }

    #[test]
    fn counters_from_another_thread() {
        let mut p = OrderSink::new("order0");
        let c = p.counters();
        let reader = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let mut last = 0;
            while last < 10_000 {
                assert!(std::time::Instant::now() < deadline, "stuck at {last}");
                let n = c.packets();
                assert!(n >= last);
                last = n;
                std::hint::spin_loop();
            }
            (c.bytes(), c.flows())
        });
        let frames: Vec<Vec<u8>> = (0..10_000u64)
            .map(|i| frame([10, 0, 0, 1], [10, 1, 0, (i % 7) as u8], 1, 2, i))
            .collect();
        send(&mut p, &frames);
        assert_eq!(reader.join().unwrap(), (640_000, 7));
    }

    #[test]
    fn conformance() {
        crate::conformance::check_sink(&mut OrderSink::new("order0"));
    }

    proptest! {
        /// Any bytes: no panic, every frame counted once, and no more
        /// checked outcomes than frames.
        #[test]
        fn garbage_never_panics(
            frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 0..64),
        ) {
            let mut p = OrderSink::with_flows("order0", 8);
            send(&mut p, &frames);
            let (n, re, dup, unseq, untr, flows) = tally(&p.counters());
            prop_assert_eq!(n, frames.len() as u64);
            prop_assert!(re + dup + unseq + untr + flows <= n);
            prop_assert!(flows <= 8);
        }

        /// A good frame with a few bytes overwritten: no panic, and it is
        /// counted as exactly one outcome.
        #[test]
        fn mangled_frames(
            edits in prop::collection::vec((0usize..64, any::<u8>()), 0..6),
            cut in 0usize..=64,
        ) {
            let mut f = frame([10, 0, 0, 1], [10, 1, 0, 1], 1, 2, 7);
            for (at, b) in edits {
                f[at] = b;
            }
            f.truncate(cut);
            let mut p = OrderSink::new("order0");
            send(&mut p, &[f.clone(), f]);
            let (n, re, dup, unseq, untr, flows) = tally(&p.counters());
            prop_assert_eq!((n, re, untr), (2, 0, 0));
            // Either both unsequenced, or one flow and one duplicate.
            prop_assert!((unseq, dup, flows) == (2, 0, 0) || (unseq, dup, flows) == (0, 1, 1));
        }

        /// Against a model: a map from flow to highest number.
        #[test]
        fn matches_model(
            seqs in prop::collection::vec((0u8..6, 0u64..40), 0..200),
            burst in 1usize..40,
        ) {
            let frames: Vec<Vec<u8>> = seqs
                .iter()
                .map(|&(flow, seq)| frame([10, 0, 0, 1], [10, 1, 0, 1], 5, u16::from(flow), seq))
                .collect();
            let mut model: HashMap<u8, u64> = HashMap::new();
            let (mut re, mut dup) = (0u64, 0u64);
            for &(flow, seq) in &seqs {
                match model.get_mut(&flow) {
                    None => {
                        model.insert(flow, seq);
                    }
                    Some(max) if seq > *max => *max = seq,
                    Some(max) if seq < *max => re += 1,
                    Some(_) => dup += 1,
                }
            }
            let mut p = OrderSink::new("order0");
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            for b in refs.chunks(burst) {
                prop_assert_eq!(p.tx_burst(b), b.len());
            }
            prop_assert_eq!(
                tally(&p.counters()),
                (seqs.len() as u64, re, dup, 0, 0, model.len() as u64)
            );
        }
    }
}
