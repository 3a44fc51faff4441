//! What the unit tests of [`super`] share: a VR path over a small real
//! region whose instances the test plays (an external backend, reading
//! its rx rings and writing its tx rings as a VR process would), and a
//! port that keeps what it is sent.

use std::sync::{Arc, Mutex};

use vrhost_io::{Port, PortStats};
use vrhost_shm::{Consumer, Producer, Region, RingId, SlotState};

use super::{Backend, PathSpec, VrPath};

/// The frames a [`Sink`] accepted, shared with the test.
pub(crate) type Sent = Arc<Mutex<Vec<Vec<u8>>>>;

/// A port that keeps the frames it accepts, up to `room` of them.
pub(crate) struct Sink {
    /// The frames accepted, shared with the test.
    pub sent: Sent,
    /// How many more it accepts.
    pub room: usize,
}

impl Port for Sink {
    fn name(&self) -> &str {
        "sink"
    }

    fn rx_burst<'a>(&'a mut self, _out: &mut [&'a [u8]]) -> usize {
        0
    }

    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        let n = frames.len().min(self.room);
        self.room -= n;
        let mut sent = self.sent.lock().unwrap();
        sent.extend(frames[..n].iter().map(|f| f.to_vec()));
        n
    }

    fn stats(&self) -> PortStats {
        PortStats::default()
    }
}

/// A port whose receive side yields the frames it was given, a burst at a
/// time, and which sends nothing.
pub(crate) struct Source {
    pub frames: std::collections::VecDeque<Vec<u8>>,
    /// The frames of the last burst, which the caller borrows.
    burst: Vec<Vec<u8>>,
}

impl Source {
    pub(crate) fn new(frames: impl IntoIterator<Item = Vec<u8>>) -> Self {
        Self {
            frames: frames.into_iter().collect(),
            burst: Vec::new(),
        }
    }
}

impl Port for Source {
    fn name(&self) -> &str {
        "source"
    }

    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        let n = out.len().min(self.frames.len());
        self.burst = self.frames.drain(..n).collect();
        for (o, f) in out.iter_mut().zip(&self.burst) {
            *o = f;
        }
        n
    }

    fn tx_burst(&mut self, _frames: &[&[u8]]) -> usize {
        0
    }

    fn stats(&self) -> PortStats {
        PortStats::default()
    }
}

/// One instance's side of the region, as a VR process holds it.
pub(crate) struct Instance {
    /// Its rx rings, by vNIC.
    pub rx: Vec<Consumer>,
    /// Its tx rings, by vNIC.
    pub tx: Vec<Producer>,
}

/// A VR path of `vnics` vNICs (vNIC `v` out on port `v`) and `instances`
/// fed instances over a region of `slots` slots and rings of `ring`
/// entries, the instances' sides, and one [`Sink`] per vNIC.
pub(crate) struct Kit {
    pub vp: VrPath,
    pub inst: Vec<Instance>,
    pub ports: Vec<Box<dyn Port>>,
    pub sent: Vec<Sent>,
}

impl Kit {
    pub(crate) fn new(vnics: u16, instances: u16, slots: u32, ring: u32) -> Self {
        let spec = PathSpec {
            ring_entries: ring,
            instances: instances.max(1),
            ..PathSpec::new("unit", (0..usize::from(vnics)).collect(), slots)
        };
        let region = spec.create_region().expect("region");
        let inst = (0..instances)
            .map(|i| Instance {
                rx: (0..vnics)
                    .map(|v| region.ring(i, RingId::Rx(v)).unwrap().consumer())
                    .collect(),
                tx: (0..vnics)
                    .map(|v| region.ring(i, RingId::Tx(v)).unwrap().producer())
                    .collect(),
            })
            .collect();
        let bells = (0..instances)
            .map(|_| vrhost_shm::Doorbell::new().unwrap())
            .collect();
        let vp = VrPath::assemble(&spec, region, Backend::External, bells);
        let sent: Vec<_> = (0..vnics)
            .map(|_| Arc::new(Mutex::new(Vec::new())))
            .collect();
        let ports = sent
            .iter()
            .map(|s| {
                Box::new(Sink {
                    sent: s.clone(),
                    room: usize::MAX,
                }) as Box<dyn Port>
            })
            .collect();
        Self {
            vp,
            inst,
            ports,
            sent,
        }
    }

    /// Stage `frame` for `vnic` as data and publish it.
    pub(crate) fn give(&mut self, vnic: u16, frame: &[u8]) {
        self.vp
            .stage(vnic, frame, || super::Class::Data)
            .expect("admitted");
        self.vp.flush_rx(&mut self.ports);
    }

    /// Give `n` frames on vNIC 0, each published on its own: frame `t`
    /// is [`frame`]`(t as u8)`.
    pub(crate) fn give_n(&mut self, n: usize) {
        for t in 0..n {
            self.give(0, &frame(t as u8));
        }
    }

    /// Give `frame` on vNIC 0 to instance 0, which takes it and hands it
    /// back on vNIC `out` in `state`, as a VR that processed it would.
    /// Returns its slots.
    pub(crate) fn through(&mut self, frame: &[u8], out: usize, state: SlotState) -> Vec<u32> {
        self.give(0, frame);
        let slots = self.take(0, 0);
        self.hand_back(0, out, &slots, state);
        slots
    }

    /// Everything in instance `i`'s rx ring of `vnic`.
    pub(crate) fn take(&mut self, i: usize, vnic: usize) -> Vec<u32> {
        let mut out = vec![0; 4096];
        let n = self.inst[i].rx[vnic].pop(&mut out).expect("rx ring");
        out.truncate(n);
        out
    }

    /// The bytes of `slot` where its extent says.
    pub(crate) fn bytes(&self, slot: u32) -> Vec<u8> {
        slot_frame(self.vp.region(), slot)
    }

    /// Instance `i` hands `slots` back on `vnic`'s tx ring in `state`.
    pub(crate) fn hand_back(&mut self, i: usize, vnic: usize, slots: &[u32], state: SlotState) {
        for &s in slots {
            if let Some(m) = self.vp.region().meta(s) {
                m.set(state);
            }
        }
        assert_eq!(self.inst[i].tx[vnic].push(slots).unwrap(), slots.len());
    }

    /// Frames port `p` was sent.
    pub(crate) fn sent(&self, p: usize) -> Vec<Vec<u8>> {
        self.sent[p].lock().unwrap().clone()
    }
}

/// A 64-byte frame whose bytes are `tag` then its index.
pub(crate) fn frame(tag: u8) -> Vec<u8> {
    (0..64u8).map(|b| if b == 0 { tag } else { b }).collect()
}

/// The frame in `slot` of `r`, as its metadata gives its extent (the
/// test plays the VR that holds the slot).
pub(crate) fn slot_frame(r: &Region, slot: u32) -> Vec<u8> {
    let (off, len) = r.meta(slot).unwrap().extent();
    // SAFETY: the test plays the VR that holds `slot`; nothing else
    // writes it while the copy is taken.
    unsafe { r.slot_bytes_at(slot, off.into(), len.into()) }
        .unwrap()
        .to_vec()
}
