//! Packet capture taps: copies of a VR's frames, handed from the worker to
//! a capture thread without ever slowing the data path.
//!
//! A tap is a pair of bounded single-producer single-consumer queues
//! ([`rtrb`]) that pass preallocated buffers ([`Record`]) around a loop:
//! the worker takes empty buffers from the `free` queue, copies frames into
//! them and puts them on the `full` queue; the capture thread reads them
//! and puts them back on `free`. Both queues can hold every buffer, so a
//! put never fails; when no empty buffer is left (the capture thread is
//! behind) the frame is not copied and the caller counts it
//! (`VrStats::capture_dropped`). The worker never allocates, locks or
//! waits for a frame: it only moves buffers it was given at attach time.
//!
//! The worker side works in bursts, so the queues' shared indexes move
//! once per burst, not once per frame: empty buffers are taken up to
//! [`BATCH`] at a time into a private stash, filled buffers wait in a
//! private list until [`Tap::end_burst`] publishes them with one store,
//! and every frame of a burst gets the burst's timestamp (one clock read
//! per burst).
//!
//! What a tap does not do: filter by content (the capture thread runs the
//! tcpdump filter on what it reads, so its cost is off the data path) or
//! write files.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buffers the worker takes from the free queue at a time, and filled
/// buffers it keeps before publishing them.
pub const BATCH: usize = 64;

/// Buffers of a tap unless its config says otherwise: at 2 KiB each (the
/// default slot), 8 MiB, about 1 ms of a busy host's frames.
pub const DEFAULT_ENTRIES: usize = 4096;

/// Which way a frame crossed the boundary between host and VR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Into the VR (from a port, as received).
    In,
    /// Out of the VR (to a port, as the VR sent it).
    Out,
}

/// One captured frame in a preallocated buffer.
#[derive(Debug)]
pub struct Record {
    ts_ns: u64,
    orig_len: u32,
    len: u32,
    vnic: u16,
    dir: Direction,
    buf: Box<[u8]>,
}

impl Record {
    fn empty(snaplen: usize) -> Self {
        Record {
            ts_ns: 0,
            orig_len: 0,
            len: 0,
            vnic: 0,
            dir: Direction::In,
            buf: vec![0; snaplen].into_boxed_slice(),
        }
    }

    /// When the worker took the frame (the start of its burst), ns since
    /// the Unix epoch.
    pub fn ts_ns(&self) -> u64 {
        self.ts_ns
    }

    /// The frame's length on the wire (may exceed [`Record::data`]).
    pub fn orig_len(&self) -> u32 {
        self.orig_len
    }

    /// The vNIC it came in on or went out of.
    pub fn vnic(&self) -> u16 {
        self.vnic
    }

    /// Into or out of the VR.
    pub fn direction(&self) -> Direction {
        self.dir
    }

    /// The captured bytes: the frame's first `snaplen` bytes.
    pub fn data(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

/// What a tap keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapConfig {
    /// Only this vNIC's frames, or every vNIC's.
    pub vnic: Option<u16>,
    /// Bytes kept of each frame (the buffer size; at least 1).
    pub snaplen: usize,
    /// Buffers (the queue length; at least 1).
    pub entries: usize,
}

impl Default for TapConfig {
    fn default() -> Self {
        Self {
            vnic: None,
            snaplen: 2048,
            entries: DEFAULT_ENTRIES,
        }
    }
}

/// Worker side of a capture. Lives on a `VrPath`; dropping it ends the
/// capture (the reader sees [`TapReader::is_closed`]).
#[derive(Debug)]
pub struct Tap {
    id: u64,
    vnic: Option<u16>,
    free: rtrb::Consumer<Record>,
    full: rtrb::Producer<Record>,
    /// Empty buffers taken from `free`, used before going back to it.
    stash: Vec<Record>,
    /// Filled buffers not yet published on `full`.
    pending: Vec<Record>,
    /// The current burst's timestamp (0: not read yet).
    stamp: u64,
    /// The free queue was found empty in this burst: the rest of the
    /// burst is not copied, without asking the queue again for each frame.
    dry: bool,
    /// Frames refused in this burst (returned by [`Tap::end_burst`]).
    refused: u64,
}

/// Capture-thread side of a capture.
#[derive(Debug)]
pub struct TapReader {
    id: u64,
    free: rtrb::Producer<Record>,
    full: rtrb::Consumer<Record>,
    /// Records read, between leaving the full queue and going back to the
    /// free one (capacity: every buffer; never grows).
    held: Vec<Record>,
}

/// A new tap and its reader, with every buffer allocated here (on the
/// caller's thread, not the worker's).
pub fn tap(cfg: &TapConfig) -> (Tap, TapReader) {
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    // Relaxed: a unique number, nothing is published through it.
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let entries = cfg.entries.max(1);
    let (mut free_tx, free_rx) = rtrb::RingBuffer::new(entries);
    let (full_tx, full_rx) = rtrb::RingBuffer::new(entries);
    for _ in 0..entries {
        free_tx
            .push(Record::empty(cfg.snaplen.max(1)))
            .expect("the free queue holds every buffer");
    }
    (
        Tap {
            id,
            vnic: cfg.vnic,
            free: free_rx,
            full: full_tx,
            stash: Vec::with_capacity(BATCH),
            pending: Vec::with_capacity(BATCH),
            stamp: 0,
            dry: false,
            refused: 0,
        },
        TapReader {
            id,
            free: free_tx,
            full: full_rx,
            held: Vec::with_capacity(entries),
        },
    )
}

fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

impl Tap {
    /// The capture's number (its reader has the same).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether frames of `vnic` are captured.
    #[inline]
    pub fn wants(&self, vnic: u16) -> bool {
        self.vnic.is_none_or(|v| v == vnic)
    }

    /// Copy (the first `snaplen` bytes of) `frame` into a free buffer.
    /// Returns false when no buffer is free: the frame is not captured,
    /// and counted in what [`Tap::end_burst`] returns. Once the free queue
    /// is found empty, the rest of the burst is refused without looking at
    /// it again (a capture that cannot keep up costs the worker a few
    /// instructions a frame). Never allocates, locks or waits.
    #[inline]
    pub fn copy(&mut self, dir: Direction, vnic: u16, frame: &[u8]) -> bool {
        self.copy_parts(dir, vnic, &[], frame)
    }

    /// [`Tap::copy`] of the frame `head` then `frame` (a tunnel's
    /// made-up Ethernet header, then the packet it goes in front of).
    #[inline]
    pub fn copy_parts(&mut self, dir: Direction, vnic: u16, head: &[u8], frame: &[u8]) -> bool {
        if self.stash.is_empty() && (self.dry || !self.refill()) {
            self.dry = true;
            self.refused += 1;
            return false;
        }
        if self.pending.len() == BATCH {
            self.publish();
        }
        if self.stamp == 0 {
            self.stamp = now_ns();
        }
        let Some(mut r) = self.stash.pop() else {
            self.refused += 1;
            return false;
        };
        let h = head.len().min(r.buf.len());
        r.buf[..h].copy_from_slice(&head[..h]);
        let n = frame.len().min(r.buf.len() - h);
        r.buf[h..h + n].copy_from_slice(&frame[..n]);
        r.len = (h + n) as u32;
        r.orig_len = (head.len() + frame.len()) as u32;
        r.vnic = vnic;
        r.dir = dir;
        r.ts_ns = self.stamp;
        self.pending.push(r);
        true
    }

    /// Whether this burst found no free buffer: every further
    /// [`Tap::copy`] of it is refused.
    #[inline]
    pub fn is_dry(&self) -> bool {
        self.dry
    }

    /// Count `n` frames refused without offering them (the rest of a
    /// burst once [`Tap::is_dry`]).
    #[inline]
    pub fn refuse(&mut self, n: u64) {
        self.refused += n;
    }

    /// Publish what this burst copied and start a new burst (a new
    /// timestamp). Call after every burst. Returns the frames refused in
    /// it, for the caller's `capture_dropped`.
    #[inline]
    pub fn end_burst(&mut self) -> u64 {
        self.stamp = 0;
        self.dry = false;
        if !self.pending.is_empty() {
            self.publish();
        }
        std::mem::take(&mut self.refused)
    }

    /// Take up to [`BATCH`] empty buffers from the free queue (one load of
    /// the reader's index, one store of ours).
    #[cold]
    fn refill(&mut self) -> bool {
        let n = self.free.slots().min(BATCH - self.stash.len());
        if n == 0 {
            return false;
        }
        match self.free.read_chunk(n) {
            // Within the stash's capacity: no allocation.
            Ok(chunk) => self.stash.extend(chunk),
            Err(_) => return false,
        }
        true
    }

    fn publish(&mut self) {
        let n = self.pending.len();
        // There are as many buffers as the full queue has places, and the
        // pending ones are not in it: it always has room for them.
        match self.full.write_chunk_uninit(n) {
            Ok(chunk) => {
                chunk.fill_from_iter(self.pending.drain(..));
            }
            Err(_) => {
                debug_assert!(false, "the full queue has room for every buffer");
                self.pending.clear();
            }
        }
    }
}

impl TapReader {
    /// The capture's number (its tap has the same).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Hand up to `max` waiting records to `f`, oldest first, then give
    /// their buffers back to the worker. Returns how many were read.
    pub fn read(&mut self, max: usize, mut f: impl FnMut(&Record)) -> usize {
        let n = self.full.slots().min(max);
        if n == 0 {
            return 0;
        }
        let Ok(chunk) = self.full.read_chunk(n) else {
            return 0;
        };
        // Out of the full queue first: its places are released when the
        // chunk's iterator is dropped, at the end of `extend`. Only then
        // may the worker see the buffers again, so the full queue has a
        // place for every buffer it can fill. (Written back in one go, the
        // free queue's commit came first and, in that gap, a worker could
        // fill a buffer and find no place for it.)
        self.held.extend(chunk.into_iter().inspect(|r| f(r)));
        // The n records are out of the free queue, so it has room for them.
        match self.free.write_chunk_uninit(n) {
            Ok(back) => back.fill_from_iter(self.held.drain(..)),
            Err(_) => {
                debug_assert!(false, "the free queue has room for every buffer");
                self.held.clear();
                0
            }
        }
    }

    /// Records waiting to be read.
    pub fn waiting(&self) -> usize {
        self.full.slots()
    }

    /// The tap was dropped (detached, or its VR is gone) and every record
    /// it published was read: nothing more will come.
    pub fn is_closed(&self) -> bool {
        self.full.is_abandoned() && self.full.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize, fill: u8) -> Vec<u8> {
        vec![fill; len]
    }

    fn drain(r: &mut TapReader) -> Vec<(Direction, u16, u32, Vec<u8>, u64)> {
        let mut out = Vec::new();
        r.read(usize::MAX, |rec| {
            out.push((
                rec.direction(),
                rec.vnic(),
                rec.orig_len(),
                rec.data().to_vec(),
                rec.ts_ns(),
            ))
        });
        out
    }

    /// The reader gives buffers back only after it has released their
    /// places in the full queue: else the worker can take one back, fill
    /// it and find the full queue without room for it (which lost the
    /// buffer for the rest of the capture).
    #[test]
    fn no_buffer_is_lost_while_reader_and_worker_race() {
        const ENTRIES: usize = 4;
        let (mut t, mut r) = tap(&TapConfig {
            entries: ENTRIES,
            ..TapConfig::default()
        });
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    r.read(usize::MAX, |_| {});
                }
                r
            })
        };
        for i in 0..200_000u32 {
            for _ in 0..3 {
                t.copy(Direction::In, 0, &frame(60, i as u8));
            }
            t.end_burst();
        }
        stop.store(true, Ordering::Relaxed);
        let mut r = reader.join().expect("the reader thread");
        drain(&mut r);
        // Every buffer came back: one burst can copy ENTRIES frames again.
        let ok = (0..ENTRIES as u8 + 2)
            .filter(|i| t.copy(Direction::In, 0, &frame(60, *i)))
            .count();
        t.end_burst();
        assert_eq!(ok, ENTRIES, "buffers lost");
    }

    #[test]
    fn a_full_queue_refuses_frames_and_recovers_once_read() {
        let (mut t, mut r) = tap(&TapConfig {
            entries: 4,
            ..TapConfig::default()
        });
        let ok = (0..10u8)
            .filter(|i| t.copy(Direction::In, 0, &frame(60, *i)))
            .count();
        t.end_burst();
        assert_eq!(ok, 4, "four buffers, six refused");
        let got = drain(&mut r);
        assert_eq!(got.len(), 4);
        // The first four, in order.
        assert_eq!(got.iter().map(|g| g.3[0]).collect::<Vec<_>>(), [0, 1, 2, 3]);
        // Buffers went back: the tap copies again.
        assert!(t.copy(Direction::In, 0, &frame(60, 9)));
        t.end_burst();
        assert_eq!(drain(&mut r).len(), 1);
    }

    #[test]
    fn records_wait_for_the_end_of_the_burst_and_share_its_timestamp() {
        let (mut t, mut r) = tap(&TapConfig::default());
        assert!(t.copy(Direction::In, 0, &frame(60, 1)));
        assert!(t.copy(Direction::Out, 1, &frame(60, 2)));
        assert_eq!(r.waiting(), 0, "nothing published mid-burst");
        t.end_burst();
        let got = drain(&mut r);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].4, got[1].4);
        assert!(got[0].4 > 1_600_000_000_000_000_000, "wall clock ns");
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(t.copy(Direction::In, 0, &frame(60, 3)));
        t.end_burst();
        assert!(drain(&mut r)[0].4 > got[0].4, "a new burst, a new time");
    }

    #[test]
    fn more_than_a_batch_in_one_burst_is_published_in_order() {
        let (mut t, mut r) = tap(&TapConfig::default());
        for i in 0..(3 * BATCH + 5) {
            assert!(t.copy(Direction::Out, 0, &(i as u32).to_le_bytes()));
        }
        t.end_burst();
        let got = drain(&mut r);
        assert_eq!(got.len(), 3 * BATCH + 5);
        for (i, g) in got.iter().enumerate() {
            assert_eq!(g.3, (i as u32).to_le_bytes());
        }
    }

    #[test]
    fn snaplen_truncates_and_keeps_the_original_length() {
        let (mut t, mut r) = tap(&TapConfig {
            snaplen: 64,
            ..TapConfig::default()
        });
        let f: Vec<u8> = (0..200u8).collect();
        assert!(t.copy(Direction::In, 0, &f));
        assert!(t.copy(Direction::In, 0, &f[..40]));
        t.end_burst();
        let got = drain(&mut r);
        assert_eq!((got[0].2, got[0].3.as_slice()), (200, &f[..64]));
        assert_eq!((got[1].2, got[1].3.as_slice()), (40, &f[..40]));
    }

    #[test]
    fn vnic_filter_and_direction() {
        let (t, _r) = tap(&TapConfig {
            vnic: Some(1),
            ..TapConfig::default()
        });
        assert!(!t.wants(0));
        assert!(t.wants(1));
        let (mut t, mut r) = tap(&TapConfig::default());
        assert!(t.wants(0) && t.wants(7));
        t.copy(Direction::In, 3, &frame(20, 0));
        t.copy(Direction::Out, 2, &frame(20, 0));
        t.end_burst();
        let got = drain(&mut r);
        assert_eq!((got[0].0, got[0].1), (Direction::In, 3));
        assert_eq!((got[1].0, got[1].1), (Direction::Out, 2));
    }

    #[test]
    fn the_reader_sees_a_dropped_tap_after_reading_what_it_published() {
        let (mut t, mut r) = tap(&TapConfig::default());
        assert_eq!(t.id(), r.id());
        t.copy(Direction::In, 0, &frame(20, 0));
        t.end_burst();
        drop(t);
        assert!(!r.is_closed(), "a record is still waiting");
        assert_eq!(drain(&mut r).len(), 1);
        assert!(r.is_closed());
    }

    #[test]
    fn a_dry_burst_refuses_the_rest_and_counts_it() {
        let (mut t, mut r) = tap(&TapConfig {
            entries: 2,
            ..TapConfig::default()
        });
        let copied: Vec<bool> = (0..4)
            .map(|i| t.copy(Direction::In, 0, &frame(20, i)))
            .collect();
        assert_eq!(copied, [true, true, false, false]);
        assert!(t.is_dry());
        t.refuse(5);
        assert_eq!(t.end_burst(), 7);
        assert!(!t.is_dry(), "a new burst looks again");
        assert_eq!(drain(&mut r).len(), 2);
        // Buffers back: no longer dry, nothing refused.
        assert!(t.copy(Direction::In, 0, &frame(20, 9)));
        assert_eq!(t.end_burst(), 0);
    }

    #[test]
    fn read_respects_its_limit() {
        let (mut t, mut r) = tap(&TapConfig::default());
        for _ in 0..10 {
            t.copy(Direction::In, 0, &frame(20, 0));
        }
        t.end_burst();
        assert_eq!(r.read(3, |_| {}), 3);
        assert_eq!(r.waiting(), 7);
    }

    #[test]
    fn two_threads_every_frame_copied_or_counted() {
        let (mut t, mut r) = tap(&TapConfig {
            entries: 256,
            ..TapConfig::default()
        });
        const N: u32 = 200_000;
        let reader = std::thread::spawn(move || {
            let mut seen = Vec::new();
            loop {
                let n = r.read(usize::MAX, |rec| {
                    seen.push(u32::from_le_bytes(rec.data()[..4].try_into().unwrap()))
                });
                if n == 0 {
                    if r.is_closed() {
                        return seen;
                    }
                    std::thread::yield_now();
                }
            }
        });
        let (mut refused, mut counted) = (0, 0);
        for i in 0..N {
            if !t.copy(Direction::In, 0, &i.to_le_bytes()) {
                refused += 1;
            }
            if i % 32 == 31 {
                counted += t.end_burst();
            }
        }
        counted += t.end_burst();
        drop(t);
        let seen = reader.join().unwrap();
        assert_eq!(seen.len() as u32 + refused, N);
        assert_eq!(counted, u64::from(refused), "end_burst counts the refusals");
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order, no repeats");
    }

    /// The hooks in a VR's path: frames in as received, frames out as the
    /// VR sent them, the vNIC filter, drops counted while forwarding goes on.
    mod path {
        use vrhost_io::Port;
        use vrhost_io::null::NullPort;
        use vrhost_sdk::{Packet, Verdict, Vr};

        use super::*;
        use crate::vrpath::{Backend, PathSpec, VrPath};

        /// Sends every frame out of the other vNIC, its first byte bumped.
        struct Swap;
        impl Vr for Swap {
            fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
                pkt.data_mut()[0] += 1;
                Verdict::Forward(pkt.rx_vnic() ^ 1)
            }
        }

        fn setup() -> (VrPath, Vec<Box<dyn Port>>) {
            let spec = PathSpec::new("cap", vec![0, 1], 64);
            let region = spec.create_region().unwrap();
            let path = VrPath::assemble(&spec, region, Backend::InProc(Box::new(Swap)), Vec::new());
            let ports: Vec<Box<dyn Port>> =
                vec![Box::new(NullPort::new("p0")), Box::new(NullPort::new("p1"))];
            (path, ports)
        }

        fn burst(path: &mut VrPath, ports: &mut [Box<dyn Port>], vnic: u16, n: u8) {
            for i in 0..n {
                let mut f = vec![0u8; 60];
                f[0] = 10 * i;
                path.stage(vnic, &f, || crate::vrpath::Class::Data).unwrap();
            }
            path.flush_rx(ports);
        }

        #[test]
        fn both_directions_in_order() {
            let (mut path, mut ports) = setup();
            let (t, mut r) = tap(&TapConfig::default());
            assert!(path.set_tap(Some(Box::new(t))).is_none());
            burst(&mut path, &mut ports, 0, 3);
            let got = drain(&mut r);
            let seen: Vec<_> = got.iter().map(|g| (g.0, g.1, g.3[0])).collect();
            assert_eq!(
                seen,
                [
                    (Direction::In, 0, 0),
                    (Direction::In, 0, 10),
                    (Direction::In, 0, 20),
                    (Direction::Out, 1, 1),
                    (Direction::Out, 1, 11),
                    (Direction::Out, 1, 21),
                ]
            );
            assert_eq!(path.stats().capture_dropped.get(), 0);
            // Detached: nothing more is copied, and the reader knows.
            assert!(path.set_tap(None).is_some());
            burst(&mut path, &mut ports, 0, 3);
            assert!(r.is_closed());
            assert_eq!(path.stats().tx_packets.get(), 6);
        }

        #[test]
        fn only_the_chosen_vnic() {
            let (mut path, mut ports) = setup();
            let (t, mut r) = tap(&TapConfig {
                vnic: Some(1),
                ..TapConfig::default()
            });
            path.set_tap(Some(Box::new(t)));
            burst(&mut path, &mut ports, 0, 2);
            burst(&mut path, &mut ports, 1, 1);
            let seen: Vec<_> = drain(&mut r).iter().map(|g| (g.0, g.1)).collect();
            assert_eq!(
                seen,
                [(Direction::Out, 1), (Direction::Out, 1), (Direction::In, 1)]
            );
        }

        #[test]
        fn a_slow_reader_costs_copies_not_frames() {
            let (mut path, mut ports) = setup();
            let (t, mut r) = tap(&TapConfig {
                entries: 2,
                ..TapConfig::default()
            });
            path.set_tap(Some(Box::new(t)));
            burst(&mut path, &mut ports, 0, 5);
            // Two buffers: two frames in copied, three in and five out not.
            assert_eq!(path.stats().capture_dropped.get(), 8);
            assert_eq!(path.stats().tx_packets.get(), 5, "all forwarded");
            assert_eq!(drain(&mut r).len(), 2);
            burst(&mut path, &mut ports, 0, 1);
            assert_eq!(drain(&mut r).len(), 2, "buffers came back");
        }
    }
}
