//! Changing the data path while it runs: ports and VRs kept, added and
//! removed between two rounds, and removed VRs served until they hand back
//! what they hold.

use std::time::Instant;

use vrhost_io::Port;

use super::{DRAIN_TIMEOUT, Worker};
use crate::classify::Classifier;
use crate::vrpath::VrPath;

/// Where an entry of a new port or VR list comes from.
pub enum Keep<T> {
    /// The entry at this index of the current list.
    Old(usize),
    /// A new one.
    New(T),
}

/// A new shape of the data path, applied between two rounds: ports and VRs
/// that are kept move to their new places without a lost frame.
pub struct Reconfig {
    /// The ports, in their new order.
    pub ports: Vec<Keep<Box<dyn Port>>>,
    /// The VRs, in their new order (the classifier's VR numbers), each with
    /// its vNICs' out ports (new port numbers).
    pub vrs: Vec<(Keep<VrPath>, Vec<usize>)>,
    /// The classifier over the new numbering.
    pub classifier: Classifier,
}

/// A VR taken out of the data path, still handing back what it holds.
pub(super) struct Draining {
    pub(super) vr: VrPath,
    pub(super) since: Instant,
}

impl Worker {
    /// Change the ports, VRs and classifier at once (see [`Reconfig`]).
    /// VRs left out are taken out of the data path but keep being served
    /// until they hand back every slot (or [`DRAIN_TIMEOUT`] passes); then
    /// [`Worker::take_drained`] returns them, for the caller to stop. Ports
    /// left out are returned, for the caller to close.
    ///
    /// # Errors
    /// An index out of range or used twice, or a VR whose out-port list
    /// does not have one port per vNIC; nothing is changed then.
    pub fn reconfigure(&mut self, r: Reconfig) -> Result<Vec<Box<dyn Port>>, String> {
        let mut seen_p = vec![false; self.ports.len()];
        for k in &r.ports {
            if let Keep::Old(i) = k {
                let seen = seen_p.get_mut(*i).ok_or("port index out of range")?;
                if std::mem::replace(seen, true) {
                    return Err(format!("port {i} kept twice"));
                }
            }
        }
        let mut seen_v = vec![false; self.vrs.len()];
        for (k, vp) in &r.vrs {
            let vnics = match k {
                Keep::Old(i) => {
                    let seen = seen_v.get_mut(*i).ok_or("VR index out of range")?;
                    if std::mem::replace(seen, true) {
                        return Err(format!("VR {i} kept twice"));
                    }
                    self.vrs[*i].vnic_ports().len()
                }
                Keep::New(v) => v.vnic_ports().len(),
            };
            if vp.len() != vnics || vp.iter().any(|&p| p >= r.ports.len()) {
                return Err("a VR's out ports do not match its vNICs or the ports".into());
            }
        }
        // Checked: from here on nothing fails.
        // A batch held by a port that moves or goes is sent first.
        self.flush_held();
        let mut old_ports: Vec<Option<Box<dyn Port>>> = std::mem::take(&mut self.ports)
            .into_iter()
            .map(Some)
            .collect();
        let mut port_map = vec![usize::MAX; old_ports.len()];
        for (new_ix, k) in r.ports.into_iter().enumerate() {
            self.ports.push(match k {
                Keep::Old(i) => {
                    port_map[i] = new_ix;
                    old_ports[i].take().expect("checked once")
                }
                Keep::New(p) => p,
            });
        }
        let mut old_vrs: Vec<Option<VrPath>> = std::mem::take(&mut self.vrs)
            .into_iter()
            .map(Some)
            .collect();
        for (k, vp) in r.vrs {
            let mut v = match k {
                Keep::Old(i) => old_vrs[i].take().expect("checked once"),
                Keep::New(v) => v,
            };
            v.set_vnic_ports(vp);
            self.vrs.push(v);
        }
        let remap = |v: &mut VrPath| {
            let ports = v
                .vnic_ports()
                .iter()
                .map(|&p| port_map.get(p).copied().unwrap_or(usize::MAX))
                .collect();
            v.set_vnic_ports(ports);
        };
        for d in &mut self.draining {
            remap(&mut d.vr);
        }
        for mut v in old_vrs.into_iter().flatten() {
            remap(&mut v);
            self.draining.push(Draining {
                vr: v,
                since: Instant::now(),
            });
        }
        self.classifier = r.classifier;
        self.resched();
        Ok(old_ports.into_iter().flatten().collect())
    }

    /// VRs taken out by [`Worker::reconfigure`] that have handed back
    /// everything (or ran out of time), for the caller to stop.
    pub fn take_drained(&mut self) -> Vec<VrPath> {
        std::mem::take(&mut self.drained)
    }

    /// VRs still draining.
    pub fn draining(&self) -> usize {
        self.draining.len()
    }

    /// Serve the tx rings of VRs being taken out; move the ones that hold
    /// nothing any more (or ran out of time) to the drained list.
    #[cold]
    pub(super) fn poll_draining(&mut self) -> usize {
        let mut moved = 0;
        let mut i = 0;
        while i < self.draining.len() {
            let d = &mut self.draining[i];
            moved += d.vr.poll_tx(&mut self.ports);
            let _ = d.vr.reap();
            if d.vr.is_drained() || !d.vr.is_up() || d.since.elapsed() >= DRAIN_TIMEOUT {
                let d = self.draining.swap_remove(i);
                self.drained.push(d.vr);
            } else {
                i += 1;
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use vrhost_shm::SlotState;

    use super::*;
    use crate::vrpath::testkit::{Instance, Kit, Sink, frame};

    /// A worker with two sink ports and VR 0 (one vNIC, out on port 0);
    /// VR 1 (out on port 1), not yet added, whose instance has taken and
    /// processed 3 frames: its side and those slots.
    fn worker() -> (Worker, VrPath, Instance, Vec<u32>) {
        let sink = || -> Box<dyn Port> {
            Box::new(Sink {
                sent: Default::default(),
                room: usize::MAX,
            })
        };
        let mut w = Worker::new(
            vec![sink(), sink()],
            Classifier::default(),
            Default::default(),
        )
        .unwrap();
        let mut a = Kit::new(1, 1, 64, 64);
        a.vp.set_vnic_ports(vec![0]);
        w.add_vr(a.vp);
        let mut b = Kit::new(1, 1, 64, 64);
        for t in 0..3 {
            b.give(0, &frame(t));
        }
        let slots = b.take(0, 0);
        for &s in &slots {
            b.vp.region().meta(s).unwrap().set(SlotState::Processed);
        }
        b.vp.set_vnic_ports(vec![1]);
        let side = b.inst.pop().unwrap();
        (w, b.vp, side, slots)
    }

    fn ids(w: &Worker) -> Vec<u64> {
        w.vrs().iter().map(VrPath::id).collect()
    }

    #[test]
    fn a_bad_change_is_refused_whole() {
        let (mut w, ..) = worker();
        let before = ids(&w);
        let change = |ports, vrs| Reconfig {
            ports,
            vrs,
            classifier: Classifier::default(),
        };
        let bad = [
            change(
                vec![Keep::Old(0), Keep::Old(0)],
                vec![(Keep::Old(0), vec![0])],
            ),
            change(vec![Keep::Old(2)], vec![]),
            change(vec![Keep::Old(0)], vec![(Keep::Old(1), vec![0])]),
            change(
                vec![Keep::Old(0)],
                vec![(Keep::Old(0), vec![0]), (Keep::Old(0), vec![0])],
            ),
            // One out port per vNIC, and only ports that exist.
            change(vec![Keep::Old(0)], vec![(Keep::Old(0), vec![0, 0])]),
            change(vec![Keep::Old(0)], vec![(Keep::Old(0), vec![1])]),
        ];
        for r in bad {
            assert!(w.reconfigure(r).is_err());
            assert_eq!((w.ports().len(), ids(&w)), (2, before.clone()), "unchanged");
        }
    }

    #[test]
    fn kept_vrs_follow_their_ports_and_removed_ones_drain_first() {
        let (mut w, b, mut side, slots) = worker();
        let b_id = b.id();
        w.add_vr(b);
        // Port 0 goes; port 1 becomes port 0. VR 0 now sends on it; VR 1
        // goes.
        let gone = w
            .reconfigure(Reconfig {
                ports: vec![Keep::Old(1)],
                vrs: vec![(Keep::Old(0), vec![0])],
                classifier: Classifier::default(),
            })
            .unwrap();
        assert_eq!(gone.len(), 1, "the port left out is handed back to close");
        assert_eq!(w.vrs().len(), 1);
        assert_eq!(w.vrs()[0].vnic_ports(), &[0]);
        assert_eq!(w.draining(), 1);
        // It still holds 3 frames: served until it hands them back, and
        // they go out on its port's new number.
        w.poll_once();
        assert!(w.take_drained().is_empty());
        assert_eq!(side.tx[0].push(&slots).unwrap(), 3);
        w.poll_once();
        let drained = w.take_drained();
        assert_eq!(drained.iter().map(VrPath::id).collect::<Vec<_>>(), [b_id]);
        assert_eq!(drained[0].stats().tx_packets.get(), 3);
        assert_eq!(drained[0].vnic_ports(), &[0]);
        assert_eq!(w.draining(), 0);
    }
}
