//! A fuzzed VR: the host side of a region (`VrPath`, `Backend::External`)
//! against a VR played by the fuzzer through a second mapping of the same
//! memfd, as `hostile_vr_is_contained` (crates/vrhost/tests/datapath.rs)
//! does with a random scribbler.
//!
//! The input is a small region config, then a sequence of steps. Host
//! steps: stage frames (`VrPath::stage`, or `stage_tunneled` as a tunnel
//! hands them over; vNIC 0 may be a tunnel endpoint), `flush_rx`, `poll_tx`, the
//! display and sleep calls, out-port changes, ports that take only part of
//! a burst, a capture tap, `shutdown`. VR steps: pop slots from an rx ring,
//! return them on a tx ring (processed, dropped, moved, twice, someone
//! else's), push arbitrary indexes, set any ring index word to any value,
//! reset rings, set slot states (any raw value) and extents (any offset and
//! length), write the instance block and the slots.
//!
//! Checked after every step: nothing panics; `check_slot_accounting` is Ok.
//! On every frame a port is given: it lies inside one slot of the host's
//! mapping and is `MIN_FRAME..=slot_bytes` long. At the end: the host
//! never sent more frames than it was given (each staged frame leaves at
//! most once), its counters agree with what the ports took, and captured
//! frames have lengths within the same bounds.
#![no_main]

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use vrhost_host::capture::{self, Direction, TapConfig, TapReader};
use vrhost_host::vrpath::{BURST, Class, MIN_FRAME};
use vrhost_host::{Backend, Tunnel, TunnelKind, VrPath};
use vrhost_io::null::NullPort;
use vrhost_io::{Port, PortStats};
use vrhost_shm::{Region, RegionConfig, RingId, RingMem, SlotMeta, SlotState};

/// What a port saw, shared with the harness.
#[derive(Default)]
struct Seen {
    /// Frames the port takes from each burst (a prefix); the rest it refuses.
    accept: AtomicUsize,
    /// Frames taken.
    frames: AtomicU64,
}

/// A null port that checks every frame it is given against the host's
/// mapping of the slots.
struct CheckPort {
    null: NullPort,
    host: Region,
    seen: Arc<Seen>,
}

/// Panics unless `f` lies inside one slot of `host` and has a length a
/// VR may send.
fn check_in_slot(host: &Region, f: &[u8]) {
    let sb = host.slot_bytes() as usize;
    assert!(
        (usize::from(MIN_FRAME)..=sb).contains(&f.len()),
        "frame of {} bytes",
        f.len()
    );
    let base = host.slot_ptr(0).expect("slot 0").as_ptr() as usize;
    let at = f.as_ptr() as usize;
    assert!(at >= base, "frame before the slots");
    let slot = (at - base) / sb;
    assert!(slot < host.slot_count() as usize, "frame past the slots");
    let off = at - base - slot * sb;
    assert!(off + f.len() <= sb, "frame crosses the end of slot {slot}");
}

impl Port for CheckPort {
    fn name(&self) -> &str {
        self.null.name()
    }

    fn rx_burst<'a>(&'a mut self, _out: &mut [&'a [u8]]) -> usize {
        0
    }

    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        assert!(frames.len() <= BURST);
        for f in frames {
            check_in_slot(&self.host, f);
        }
        let n = frames.len().min(self.seen.accept.load(Ordering::Relaxed));
        assert_eq!(self.null.tx_burst(&frames[..n]), n);
        self.seen.frames.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    fn stats(&self) -> PortStats {
        self.null.stats()
    }
}

/// Set the raw state word of a slot, any value (a hostile VR's store).
/// `SlotMeta` has no setter for values outside `SlotState`; it is
/// `#[repr(C)]` with the state word (an `AtomicU32`) first, which
/// `state_word_ok` checks once before this is used.
fn set_state_raw(m: &SlotMeta, raw: u32) {
    // SAFETY: `SlotMeta` is `#[repr(C)]` and starts with its state, an
    // `AtomicU32` (checked at run time by `state_word_ok`), so the cast
    // points at a live, aligned atomic inside the shared mapping.
    let w = unsafe { &*(m as *const SlotMeta).cast::<AtomicU32>() };
    w.store(raw, Ordering::Release);
}

/// Whether `set_state_raw` writes the state word (the layout it assumes).
fn state_word_ok(m: &SlotMeta) -> bool {
    if size_of::<SlotMeta>() != 8 {
        return false;
    }
    let before = m.state_raw();
    m.set(SlotState::Dropped);
    // SAFETY: as in `set_state_raw`; an `AtomicU32` is valid for any bits.
    let w = unsafe { &*(m as *const SlotMeta).cast::<AtomicU32>() };
    let ok = w.load(Ordering::Acquire) == SlotState::Dropped as u32;
    m.set(SlotState::from_raw(before).unwrap_or(SlotState::Empty));
    ok
}

/// The VR's side: its mapping and where it thinks its rings are.
struct Vr {
    region: Region,
    /// Per instance, per vNIC: its rx consumer index and tx producer index.
    rx_tail: Vec<Vec<u32>>,
    tx_head: Vec<Vec<u32>>,
    /// Slots popped from rx rings and not yet handed back.
    held: Vec<u32>,
    raw_states: bool,
}

impl Vr {
    fn ring(&self, inst: u16, id: RingId) -> RingMem {
        self.region.ring(inst, id).expect("in layout")
    }

    /// Pop up to `max` entries from an rx ring where the VR thinks it is,
    /// as an honest VR would (never past the producer index it reads).
    fn pop(&mut self, inst: u16, vnic: u16, max: usize) {
        let rx = self.ring(inst, RingId::Rx(vnic));
        let tail = self.rx_tail[usize::from(inst)][usize::from(vnic)];
        let fill = rx.indexes().0.wrapping_sub(tail);
        let avail = if fill <= rx.size() { fill as usize } else { 0 };
        let n = max.min(avail);
        let mut buf = [0u32; 256];
        let mut c = rx.consumer_at(tail, tail.wrapping_add(n as u32));
        let got = c.pop(&mut buf[..n]).expect("cached, not validated");
        self.rx_tail[usize::from(inst)][usize::from(vnic)] = c.tail();
        self.held.extend_from_slice(&buf[..got]);
    }

    /// Push `items` on a tx ring where the VR thinks it is; with `honest`
    /// only as many as the consumer index it reads leaves room for.
    fn push(&mut self, inst: u16, vnic: u16, items: &[u32], honest: bool) {
        let tx = self.ring(inst, RingId::Tx(vnic));
        let head = self.tx_head[usize::from(inst)][usize::from(vnic)];
        let n = if honest {
            let used = head.wrapping_sub(tx.indexes().1);
            let room = if used <= tx.size() {
                tx.size() - used
            } else {
                0
            };
            items.len().min(room as usize)
        } else {
            items.len().min(tx.size() as usize)
        };
        // A producer that thinks the ring is empty: it writes where told.
        let mut p = tx.producer_at(head, head);
        let pushed = p.push(&items[..n]).expect("room cached, not validated");
        self.tx_head[usize::from(inst)][usize::from(vnic)] = p.head();
        assert_eq!(pushed, n);
    }

    /// Set a ring's producer index word to `v` (writes one entry too).
    fn set_prod(mem: RingMem, v: u32, entry: u32) {
        let at = v.wrapping_sub(1);
        let _ = mem.producer_at(at, at).push(&[entry]);
    }

    /// Set a ring's consumer index word to `v`.
    fn set_cons(mem: RingMem, v: u32) {
        let _ = mem.consumer_at(v.wrapping_sub(1), v).pop(&mut [0u32; 1]);
    }
}

struct Harness {
    vp: VrPath,
    vr: Vr,
    ports: Vec<Box<dyn Port>>,
    seen: Vec<Arc<Seen>>,
    cfg: RegionConfig,
    /// Frames the host accepted from `stage`.
    staged: u64,
    /// Staged since the last `flush_rx` (it publishes exactly these).
    unflushed: usize,
    reader: Option<TapReader>,
    snaplen: usize,
}

fn slot_index(u: &mut Unstructured<'_>, h: &Harness) -> Result<u32> {
    let count = h.cfg.slot_count;
    Ok(match u.int_in_range(0..=9u8)? {
        0 => count,
        1 => u32::MAX,
        2 => u.arbitrary()?,
        3..=5 if !h.vr.held.is_empty() => *u.choose(&h.vr.held)?,
        _ => u.int_in_range(0..=count - 1)?,
    })
}

/// A ring index value: near where it should be, or anything.
fn index_value(u: &mut Unstructured<'_>, near: u32, size: u32) -> Result<u32> {
    Ok(match u.int_in_range(0..=4u8)? {
        0 => u.arbitrary()?,
        1 => near.wrapping_sub(u.int_in_range(1..=size + 1)?),
        2 => near.wrapping_add(size).wrapping_add(u.int_in_range(0..=2)?),
        3 => 0,
        _ => near.wrapping_add(u.int_in_range(0..=size)?),
    })
}

impl Harness {
    fn new(u: &mut Unstructured<'_>) -> Result<Option<Self>> {
        let slot_bytes = *u.choose(&[256u32, 512, 2048])?;
        let slot_count = u.int_in_range(16..=64)?;
        let cfg = RegionConfig {
            slot_bytes,
            slot_count,
            headroom: *u.choose(&[0, 64, 128, slot_bytes - 64])?,
            vnic_count: u.int_in_range(1..=2)?,
            instance_count: u.int_in_range(1..=2)?,
            ring_entries: *u.choose(&[4, 16, RegionConfig::ring_entries_for(slot_count)])?,
            ctrl_entries: 8,
        };
        let Ok(host) = Region::create("fuzz", cfg) else {
            return Ok(None); // out of memfds or memory: not the host's fault
        };
        let Ok(vr) = host.fd().try_clone_to_owned().map(Region::attach) else {
            return Ok(None);
        };
        let vr = vr.expect("a region the host created attaches");
        // Slots are contiguous, as `check_in_slot` assumes.
        let base = host.slot_ptr(0).unwrap().as_ptr() as usize;
        for s in 0..slot_count {
            let p = host.slot_ptr(s).unwrap().as_ptr() as usize;
            assert_eq!(p, base + s as usize * slot_bytes as usize);
        }
        let seen: Vec<Arc<Seen>> = (0..2)
            .map(|_| {
                let s = Seen::default();
                s.accept.store(BURST, Ordering::Relaxed);
                Arc::new(s)
            })
            .collect();
        let ports: Vec<Box<dyn Port>> = seen
            .iter()
            .enumerate()
            .map(|(i, s)| {
                Box::new(CheckPort {
                    null: NullPort::new(format!("null{i}")),
                    host: host.clone(),
                    seen: s.clone(),
                }) as Box<dyn Port>
            })
            .collect();
        let raw_states = state_word_ok(vr.meta(0).unwrap());
        let vnic_port = (0..usize::from(cfg.vnic_count)).map(|v| v % 2).collect();
        let mut vp = VrPath::new("fuzz", host, vnic_port, Backend::External, vec![]);
        // vNIC 0 may be a tunnel endpoint: what the VR sends there is
        // encapsulated in the slot's headroom (or dropped, counted).
        if u.arbitrary()? {
            let kind = *u.choose(&[TunnelKind::Vxlan, TunnelKind::Udp, TunnelKind::Ipip])?;
            let t = Tunnel {
                kind,
                port: 0,
                local: Ipv4Addr::new(192, 0, 2, 2),
                remote: Ipv4Addr::new(192, 0, 2, 1),
                udp_port: if kind == TunnelKind::Ipip { 0 } else { 4789 },
                vni: 42,
                local_mac: [2; 6],
                remote_mac: u.arbitrary::<bool>()?.then_some([6; 6]),
                inner_mac: [0xff; 6],
            };
            vp.set_tunnels(&[Some(t)]);
        }
        let per = |_| vec![0u32; usize::from(cfg.vnic_count)];
        Ok(Some(Self {
            vp,
            vr: Vr {
                region: vr,
                rx_tail: (0..cfg.instance_count).map(per).collect(),
                tx_head: (0..cfg.instance_count).map(per).collect(),
                held: Vec::new(),
                raw_states,
            },
            ports,
            seen,
            cfg,
            staged: 0,
            unflushed: 0,
            reader: None,
            snaplen: 0,
        }))
    }

    fn inst(&self, u: &mut Unstructured<'_>) -> Result<u16> {
        u.int_in_range(0..=self.cfg.instance_count - 1)
    }

    fn vnic(&self, u: &mut Unstructured<'_>) -> Result<u16> {
        u.int_in_range(0..=self.cfg.vnic_count - 1)
    }

    /// One step of the host or the VR.
    fn step(&mut self, u: &mut Unstructured<'_>) -> Result<()> {
        let room = (self.cfg.slot_bytes - self.cfg.headroom) as usize;
        match u.int_in_range(0..=19u8)? {
            // Host: frames from a port, staged for a vNIC (or one the VR
            // does not have).
            0..=2 => {
                let vnic = u.int_in_range(0..=self.cfg.vnic_count)?;
                for _ in 0..u.int_in_range(1..=12)? {
                    let len = match u.int_in_range(0..=7u8)? {
                        0 => u.int_in_range(0..=usize::from(MIN_FRAME))?,
                        1 => room,
                        2 => room + 1,
                        3 => u.int_in_range(0..=room + 64)?,
                        _ => u.int_in_range(60..=128)?,
                    };
                    let frame = vec![len as u8; len];
                    let class = if u.arbitrary()? {
                        Class::Control
                    } else {
                        Class::Data
                    };
                    // Or as a tunnel hands it over: an Ethernet header made
                    // up (IP-in-IP) before the packet, and the peer's MAC.
                    let head = if u.arbitrary()? { &[9u8; 14][..] } else { &[] };
                    let staged = match head.is_empty() && u.arbitrary()? {
                        true => self.vp.stage(vnic, &frame, || class),
                        false => self.vp.stage_tunneled(vnic, head, &frame, [4; 6]),
                    };
                    if staged.is_ok() {
                        assert!(len + head.len() <= room && vnic < self.cfg.vnic_count);
                        self.staged += 1;
                        self.unflushed += 1;
                    }
                }
            }
            3 | 4 => {
                let n = self.vp.flush_rx(&mut self.ports);
                assert_eq!(n, self.unflushed, "flush_rx publishes what was staged");
                self.unflushed = 0;
            }
            5 | 6 => {
                self.vp.poll_tx(&mut self.ports);
            }
            // VR: take what the host gave.
            7 | 8 => {
                let (i, v) = (self.inst(u)?, self.vnic(u)?);
                let max = u.int_in_range(1..=80)?;
                self.vr.pop(i, v, max);
            }
            // VR: hand slots back (mostly the ones it holds, in order).
            9..=11 => {
                let (i, v) = (self.inst(u)?, self.vnic(u)?);
                let n = u.int_in_range(0..=self.vr.held.len().min(80))?;
                let mut items: Vec<u32> = self.vr.held.drain(..n).collect();
                for &s in &items {
                    let Some(m) = self.vr.region.meta(s) else {
                        continue;
                    };
                    match u.int_in_range(0..=9u8)? {
                        0 => m.set(SlotState::Dropped),
                        1 => {} // state left as the host set it
                        2 => {
                            // Moved inside the slot (or not quite).
                            let off = u.int_in_range(0..=self.cfg.slot_bytes as u16)?;
                            let len = u.int_in_range(0..=self.cfg.slot_bytes as u16)?;
                            m.set_extent(off, len);
                            m.set(SlotState::Processed);
                        }
                        3 => {
                            m.set_extent(u.arbitrary()?, u.arbitrary()?);
                            m.set(SlotState::Processed);
                        }
                        _ => m.set(SlotState::Processed),
                    }
                }
                match u.int_in_range(0..=7u8)? {
                    0 => items.extend_from_within(..), // each twice
                    1 => items.reverse(),
                    2 if !items.is_empty() => {
                        let i = u.choose_index(items.len())?;
                        items.insert(i, items[i]);
                    }
                    3 => self.vr.held.extend_from_slice(&items), // and keep them
                    _ => {}
                }
                let honest = !u.ratio(1, 8)?;
                self.vr.push(i, v, &items, honest);
            }
            // VR: arbitrary indexes on a tx ring.
            12 => {
                let (i, v) = (self.inst(u)?, self.vnic(u)?);
                let mut items = Vec::new();
                for _ in 0..u.int_in_range(1..=8)? {
                    items.push(slot_index(u, self)?);
                }
                let honest = u.arbitrary()?;
                self.vr.push(i, v, &items, honest);
            }
            // VR: any index word of any ring.
            13 => {
                let (i, v) = (self.inst(u)?, self.vnic(u)?);
                let rx = self.vr.ring(i, RingId::Rx(v));
                let tx = self.vr.ring(i, RingId::Tx(v));
                let size = rx.size();
                let (ui, uv) = (usize::from(i), usize::from(v));
                let entry = slot_index(u, self)?;
                match u.int_in_range(0..=5u8)? {
                    0 => {
                        let near = self.vr.tx_head[ui][uv];
                        Vr::set_prod(tx, index_value(u, near, size)?, entry);
                    }
                    1 => {
                        let near = self.vr.rx_tail[ui][uv];
                        Vr::set_cons(rx, index_value(u, near, size)?);
                    }
                    // The words the host writes and never reads back.
                    2 => Vr::set_prod(rx, index_value(u, 0, size)?, entry),
                    3 => Vr::set_cons(tx, index_value(u, 0, size)?),
                    // Where the VR thinks it is.
                    4 => self.vr.tx_head[ui][uv] = index_value(u, self.vr.tx_head[ui][uv], size)?,
                    _ => self.vr.rx_tail[ui][uv] = index_value(u, self.vr.rx_tail[ui][uv], size)?,
                }
            }
            // VR: reset a ring, or pick up where the memory says it is.
            14 => {
                let (i, v) = (self.inst(u)?, self.vnic(u)?);
                let (ui, uv) = (usize::from(i), usize::from(v));
                match u.int_in_range(0..=5u8)? {
                    0 => self.vr.ring(i, RingId::Rx(v)).reset(),
                    1 => self.vr.ring(i, RingId::Tx(v)).reset(),
                    2 => self.vr.ring(i, RingId::CtrlIn).reset(),
                    3 => self.vr.ring(i, RingId::CtrlOut).reset(),
                    _ => {
                        self.vr.rx_tail[ui][uv] = self.vr.ring(i, RingId::Rx(v)).indexes().1;
                        self.vr.tx_head[ui][uv] = self.vr.ring(i, RingId::Tx(v)).indexes().0;
                    }
                }
            }
            // VR: slot states and extents, any value.
            15 => {
                for _ in 0..u.int_in_range(1..=4)? {
                    let s = slot_index(u, self)?;
                    let Some(m) = self.vr.region.meta(s) else {
                        continue;
                    };
                    if u.arbitrary()? {
                        m.set_extent(u.arbitrary()?, u.arbitrary()?);
                    }
                    let raw: u32 = if u.ratio(1, 4)? {
                        u.arbitrary()?
                    } else {
                        u.int_in_range(0..=3)?
                    };
                    match SlotState::from_raw(raw) {
                        _ if self.vr.raw_states => set_state_raw(m, raw),
                        Some(st) => m.set(st),
                        None => {}
                    }
                }
            }
            // VR: the instance block and the slots' bytes.
            16 => {
                let i = self.inst(u)?;
                let b = self.vr.region.instance(i).expect("in range");
                match u.int_in_range(0..=4u8)? {
                    0 => b.vr_sleeping.store(u.arbitrary()?, Ordering::Release),
                    1 => b.host_sleeping.store(u.arbitrary()?, Ordering::Release),
                    2 => b.heartbeat.store(u.arbitrary()?, Ordering::Relaxed),
                    3 => b.vr_pid.store(u.arbitrary()?, Ordering::Relaxed),
                    _ => {
                        let c = u.choose_index(b.vr_counters.len())?;
                        b.vr_counters[c].store(u.arbitrary()?, Ordering::Relaxed);
                    }
                }
                let s = slot_index(u, self)?;
                let off = u.int_in_range(0..=self.cfg.slot_bytes)?;
                let n = u.int_in_range(0..=64)?;
                let bytes = u.bytes(n.min(u.len()))?;
                self.vr.region.write_slot(s, off, bytes);
            }
            // Host: what the display and the sleep code look at.
            17 => {
                let info = self.vp.instance_info();
                assert_eq!(info.len(), usize::from(self.cfg.instance_count));
                let cap = u64::from(self.cfg.vnic_count) * u64::from(self.cfg.ring_entries);
                for i in &info {
                    assert!(i.rx_ring_fill <= cap && i.tx_ring_fill <= cap);
                }
                let _ = self.vp.tx_pending();
                self.vp.set_host_sleeping(u.arbitrary()?);
                assert!(self.vp.free_slots() <= self.vp.pool_slots());
                assert_eq!(
                    self.vp.is_drained(),
                    self.vp.free_slots() == self.vp.pool_slots()
                );
            }
            // Host: out ports renumbered or gone; ports that refuse frames.
            18 => {
                if u.arbitrary()? {
                    let ports = (0..self.cfg.vnic_count)
                        .map(|_| Ok(*u.choose(&[0usize, 1, 7, usize::MAX])?))
                        .collect::<Result<Vec<_>>>()?;
                    self.vp.set_vnic_ports(ports);
                } else {
                    let p = u.choose_index(self.seen.len())?;
                    let n = *u.choose(&[0usize, 1, 3, BURST])?;
                    self.seen[p].accept.store(n, Ordering::Relaxed);
                }
            }
            // Host: a capture tap attached, read, detached; rarely a
            // shutdown (all slots reclaimed, the VR down).
            _ => match u.int_in_range(0..=7u8)? {
                0 | 1 if self.reader.is_none() => {
                    let cfg = TapConfig {
                        vnic: if u.arbitrary()? {
                            None
                        } else {
                            Some(self.vnic(u)?)
                        },
                        snaplen: u.int_in_range(1..=128)?,
                        entries: u.int_in_range(1..=8)?,
                    };
                    let (tap, reader) = capture::tap(&cfg);
                    assert!(self.vp.set_tap(Some(Box::new(tap))).is_none());
                    self.reader = Some(reader);
                    self.snaplen = cfg.snaplen;
                }
                2 => {
                    drop(self.vp.set_tap(None));
                    self.read_tap();
                    self.reader = None;
                }
                7 if u.ratio(1, 4)? => {
                    self.vp.shutdown();
                    self.unflushed = 0;
                }
                _ => self.read_tap(),
            },
        }
        if let Err(e) = self.vp.check_slot_accounting() {
            panic!("slot accounting: {e}");
        }
        Ok(())
    }

    /// Read the capture; every record's length within the bounds of its
    /// direction.
    fn read_tap(&mut self) {
        let Some(r) = self.reader.as_mut() else {
            return;
        };
        let (sb, room) = (self.cfg.slot_bytes, self.cfg.slot_bytes - self.cfg.headroom);
        let snaplen = self.snaplen;
        r.read(usize::MAX, |rec| {
            let len = rec.orig_len();
            match rec.direction() {
                Direction::In => assert!(len <= room, "captured in: {len}"),
                Direction::Out => assert!(
                    (u32::from(MIN_FRAME)..=sb).contains(&len),
                    "captured out: {len}"
                ),
            }
            assert_eq!(rec.data().len(), (len as usize).min(snaplen));
        });
    }

    fn finish(&mut self) {
        self.vp.poll_tx(&mut self.ports);
        if let Err(e) = self.vp.check_slot_accounting() {
            panic!("slot accounting: {e}");
        }
        self.read_tap();
        let st = self.vp.stats();
        let taken: u64 = self
            .seen
            .iter()
            .map(|s| s.frames.load(Ordering::Relaxed))
            .sum();
        assert_eq!(st.tx_packets.get(), taken, "tx counter vs ports");
        let out = st.tx_packets.get() + st.port_dropped.get() + st.vr_dropped.get();
        assert!(
            out <= self.staged,
            "{out} frames came back out of {} staged",
            self.staged
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(Some(mut h)) = Harness::new(&mut u) else {
        return;
    };
    while !u.is_empty() {
        if h.step(&mut u).is_err() {
            break;
        }
    }
    h.finish();
});
