//! Egress: what the instances hand back on their tx rings, validated
//! against the host's slot ledger and the slot's state and extent before a
//! byte of it goes to a port; and the control messages relayed between
//! instances.

use vrhost_io::{LentFrame, Port};
use vrhost_shm::{Region, RingError, SlotState};

use super::{BURST, MIN_FRAME, TX_QUANTUM, VrPath};
use crate::capture::Direction;
use crate::stats::{EgressDrop, Violation, VrStats, mono_ns};
use crate::tunnel::Encap;

impl VrPath {
    /// Relay the control messages the instances wrote to each other
    /// (served before their data rings); wakes a sleeping receiver.
    /// Returns the messages taken (work, for the worker's back-off).
    /// Costs a look at one ring index per instance when there are none.
    #[inline]
    pub fn serve_ctrl(&mut self) -> usize {
        if !self.has_peers() {
            return 0;
        }
        let out = self.relay.relay(self.served_mask);
        let taken = out.relayed + out.dropped + out.violations;
        if taken != 0 {
            self.note_ctrl(out);
        }
        taken as usize
    }

    /// Whether two instances or more are served: a single one has no peer
    /// to talk to.
    #[inline]
    pub(crate) fn has_peers(&self) -> bool {
        self.served_mask & self.served_mask.wrapping_sub(1) != 0
    }

    #[cold]
    pub(super) fn note_ctrl(&mut self, out: crate::relay::RelayOutcome) {
        self.stats.ctrl_relayed.add(out.relayed);
        self.stats.ctrl_dropped.add(out.dropped);
        for _ in 0..out.violations {
            self.stats.violation(Violation::CtrlMessage);
        }
        let mut woken = out.woken & self.served_mask;
        while woken != 0 {
            let i = woken.trailing_zeros() as usize;
            woken &= woken - 1;
            self.kick(i);
        }
    }

    /// Drain the tx rings of every instance and send what they hold.
    /// Returns frames handled.
    pub fn poll_tx(&mut self, ports: &mut [Box<dyn Port>]) -> usize {
        self.poll_tx_budget(ports, usize::MAX)
    }

    /// Send what the tx rings hold, up to `budget` frames (the worker's
    /// share for this VR in one round; what is left waits for the next).
    /// Returns frames handled.
    ///
    /// A loop's VR (a tap VR, see [`VrPath::set_loop`]) sends at most
    /// [`TX_QUANTUM`] frames a round whatever its weight or priority: each
    /// frame written into one of its TAPs is forwarded by the namespace
    /// into the queue of another (`txqueuelen`, 1,000 frames by default),
    /// which the worker reads up to 256 frames a round; writing more
    /// between two reads would have the kernel drop frames it has just
    /// forwarded.
    pub fn poll_tx_budget(&mut self, ports: &mut [Box<dyn Port>], budget: usize) -> usize {
        if !self.backend.uses_rings() || self.quarantined {
            return 0;
        }
        let budget = match self.loop_vnics {
            0 => budget,
            _ => budget.min(TX_QUANTUM),
        };
        // Messages count as work done (they keep the worker awake), and
        // take from the round's budget as frames do.
        let mut done = self.serve_ctrl().min(budget);
        let mut idx = [0u32; BURST];
        let mut served = self.served_mask;
        while served != 0 {
            let i = served.trailing_zeros() as usize;
            served &= served - 1;
            for v in 0..self.inst[i].tx.len() {
                // Everything the ring holds (up to the budget), in bursts: a
                // ring left half full stalls its VR until the next round.
                loop {
                    let want = (budget - done).min(BURST);
                    if want == 0 {
                        return done;
                    }
                    let n = match self.inst[i].tx[v].pop(&mut idx[..want]) {
                        Ok(n) => n,
                        Err(
                            RingError::BadProducerIndex { .. } | RingError::BadConsumerIndex { .. },
                        ) => {
                            self.stats.violation(Violation::TxRingIndex);
                            break;
                        }
                    };
                    if n > 0 {
                        self.send(i as u16, v as u16, &idx[..n], ports);
                        done += n;
                    }
                    if n < want {
                        break;
                    }
                }
            }
        }
        done
    }

    /// Validate slots returned by `instance` on `vnic`'s tx ring, send the
    /// PROCESSED ones on the vNIC's port, free them all.
    pub(super) fn send(
        &mut self,
        instance: u16,
        vnic: u16,
        idx: &[u32],
        ports: &mut [Box<dyn Port>],
    ) {
        let mut frames: [&[u8]; BURST] = [&[]; BURST];
        let mut nf = 0;
        let mut take = [0u32; BURST];
        let mut nt = 0;
        let mut bytes = 0u64;
        // Frames that leave on a dedicated port from the dedicated ports'
        // frames (one UMEM): sent where they lie.
        let mut lent = [LentFrame::default(); BURST];
        let mut nl = 0;
        let port_slots = self.slots.port_slots();
        let lent_port = match port_slots {
            0 => None,
            n => {
                let out = self.vnic_port.get(usize::from(vnic));
                let d = &self.cold.dedicated;
                d.iter()
                    .any(|d| d.vnic == vnic && out == Some(&d.port))
                    .then_some(n)
            }
        };
        // The VR wrote these slots' states and headers on its core.
        let prefetch = self.backend.uses_rings();
        for (i, &s) in idx.iter().enumerate() {
            if prefetch && let Some(&ahead) = idx.get(i + 4) {
                self.region.prefetch(ahead, self.headroom.into());
            }
            if let Err(v) = self.slots.claim(s, usize::from(instance)) {
                self.stats.violation(v);
                continue;
            }
            let zero_copy = lent_port.is_some_and(|n| s < n);
            let wire = match self.plain_wire {
                true => None,
                false => Some((self.encap.as_deref_mut(), self.vlans.as_deref())),
            };
            let Some((off, len)) =
                outgoing(&self.region, &self.stats, self.slot_bytes, wire, vnic, s)
            else {
                take[nt] = s;
                nt += 1;
                continue;
            };
            if zero_copy {
                if let Some(tap) = self.tap.as_deref_mut()
                    && tap.wants(vnic)
                    // SAFETY: as below; copied once, into the capture.
                    && let Some(f) = unsafe { self.region.slot_bytes_at(s, off.into(), len.into()) }
                {
                    tap.copy(Direction::Out, vnic, f);
                }
                lent[nl] = LentFrame {
                    frame: s,
                    offset: off.into(),
                    len: len.into(),
                };
                nl += 1;
                continue;
            }
            take[nt] = s;
            nt += 1;
            // SAFETY: we hold the slot by our own records (owner check
            // above); the port only copies the bytes out, once.
            if let Some(f) = unsafe { self.region.slot_bytes_at(s, off.into(), len.into()) } {
                frames[nf] = f;
                nf += 1;
                bytes += u64::from(len);
            }
        }
        if nf + nl > 0
            && let Some(tap) = self.tap.as_deref_mut()
            && tap.wants(vnic)
        {
            for (k, f) in frames[..nf].iter().enumerate() {
                if !tap.copy(Direction::Out, vnic, f) {
                    tap.refuse((nf - k - 1) as u64);
                    break;
                }
            }
            let refused = tap.end_burst();
            if refused > 0 {
                self.stats.capture_dropped.add(refused);
            }
        }
        if nf > 0 {
            // A vNIC whose port was removed (a VR draining after a config
            // change) has no port: its frames are counted as port drops.
            let sent = match ports.get_mut(self.vnic_port[usize::from(vnic)]) {
                Some(p) => p.tx_burst(&frames[..nf]),
                None => 0,
            };
            // Bytes of the frames sent (a port takes a prefix of the burst).
            let bytes = if sent == nf {
                bytes
            } else {
                frames[..sent].iter().map(|f| f.len() as u64).sum()
            };
            self.count_tx(vnic, sent, nf - sent, bytes);
        }
        let i = usize::from(instance);
        if nl > 0 {
            self.send_lent(i, vnic, &lent[..nl], ports);
        }
        for &s in &take[..nt] {
            self.release(s, i);
        }
        if let Some(c) = self.stats.instances.get(i) {
            c.returned.add((nt + nl) as u64);
        }
    }

    /// Count `sent` frames of `bytes` out of `vnic`, and `refused` the port
    /// did not take.
    #[inline]
    pub(super) fn count_tx(&mut self, vnic: u16, sent: usize, refused: usize, bytes: u64) {
        self.stats.tx_packets.add(sent as u64);
        self.stats.tx_bytes.add(bytes);
        self.stats.port_dropped.add(refused as u64);
        if self.recovering && sent > 0 {
            self.recovered();
        }
        if let Some(c) = self.stats.vnics.get(usize::from(vnic)) {
            c.tx_packets.add(sent as u64);
            c.tx_bytes.add(bytes);
        }
    }

    /// The first frame out after a restore.
    #[cold]
    pub(super) fn recovered(&mut self) {
        self.recovering = false;
        let now = mono_ns();
        self.stats.last_recovered_mono_ns.set(now);
        self.stats
            .last_recovery_ns
            .set(now.saturating_sub(self.stats.last_exit_mono_ns.get()));
    }

    /// Put `slot`, held by or claimed back from instance `i`, back on the
    /// free list, empty.
    #[inline]
    pub(super) fn release(&mut self, slot: u32, i: usize) {
        self.region
            .meta(slot)
            .expect("valid index")
            .set(SlotState::Empty);
        if self.slots.release(slot, i) {
            self.back_to_port(slot);
        }
    }

    /// Raise or clear the host's sleeping flag in every instance block.
    pub fn set_host_sleeping(&self, sleeping: bool) {
        for i in 0..self.inst.len() as u16 {
            if let Some(b) = self.region.instance(i) {
                if sleeping {
                    vrhost_shm::prepare_sleep(&b.host_sleeping);
                } else {
                    vrhost_shm::cancel_sleep(&b.host_sleeping);
                }
            }
        }
    }

    /// True if a tx ring has entries, or a control ring between instances
    /// (for the host's last look before sleep).
    pub fn tx_pending(&mut self) -> bool {
        if self.quarantined {
            return false;
        }
        let ctrl = self.has_peers() && self.relay.pending(self.served_mask);
        ctrl || self
            .inst
            .iter_mut()
            .filter(|i| i.served())
            .flat_map(|i| i.tx.iter_mut())
            .any(|c| c.ready().map(|n| n > 0).unwrap_or(false))
    }
}

/// Where the frame of slot `s` of `region`, claimed back for `vnic`, lies
/// as it leaves: as the VR left it, or (`wire`: the VR's tunnels and
/// VLANs, when it has some) behind its tunnel's headers or with its VLAN
/// tag. `None`, counted in `stats`, for a dropped slot, a bad state or
/// extent, or a frame its vNIC cannot send.
#[inline]
fn outgoing(
    region: &Region,
    stats: &VrStats,
    slot_bytes: u16,
    wire: Option<Wire<'_>>,
    vnic: u16,
    s: u32,
) -> Option<(u16, u16)> {
    let meta = region.meta(s).expect("index checked against the ledger");
    match SlotState::from_raw(meta.state_raw()) {
        Some(SlotState::Processed) => {}
        Some(SlotState::Dropped) => {
            stats.vr_dropped.add(1);
            return None;
        }
        _ => {
            stats.violation(Violation::SlotState);
            return None;
        }
    }
    let (off, len) = meta.extent();
    if len < MIN_FRAME || u32::from(off) + u32::from(len) > u32::from(slot_bytes) {
        stats.violation(Violation::Extent);
        return None;
    }
    // The common case, one test.
    let Some((encap, vlans)) = wire else {
        return Some((off, len));
    };
    wire_out(encap, vlans, region, vnic, s, (off, len))
        .map_err(|why| stats.drop_out(why))
        .ok()
}

/// A VR's tunnels and VLANs, for [`outgoing`].
type Wire<'a> = (
    Option<&'a mut [Option<Encap>]>,
    Option<&'a [u16; super::MAX_VLAN_VNICS]>,
);

/// The frame of slot `s` (`extent`) in `region` as it leaves vNIC
/// `vnic`: behind its tunnel's outer headers ([`encap_at`]), with its
/// VLAN tag ([`tag_at`]).
#[inline]
fn wire_out(
    encap: Option<&mut [Option<Encap>]>,
    vlans: Option<&[u16; super::MAX_VLAN_VNICS]>,
    region: &Region,
    vnic: u16,
    s: u32,
    extent: (u16, u16),
) -> Result<(u16, u16), EgressDrop> {
    let extent = encap_at(encap, region, vnic, s, extent)?;
    tag_at(vlans.map(|v| &v[..]), region, vnic, s, extent)
}

/// Write the outer headers of `vnic`'s tunnel (in `encap`), if it has one,
/// in front of slot `s`'s frame (`off`, `len`) in `region`, in its
/// headroom; the extent of the frame to send. See [`crate::tunnel`].
#[inline]
fn encap_at(
    encap: Option<&mut [Option<Encap>]>,
    region: &Region,
    vnic: u16,
    s: u32,
    (off, len): (u16, u16),
) -> Result<(u16, u16), EgressDrop> {
    let Some(e) = encap
        .and_then(|e| e.get_mut(usize::from(vnic)))
        .and_then(Option::as_mut)
    else {
        return Ok((off, len));
    };
    // SAFETY: the caller holds the slot by its own records and checked the
    // extent; the bytes are read once, for the outer headers.
    let Some(inner) = (unsafe { region.slot_bytes_at(s, off.into(), len.into()) }) else {
        return Err(EgressDrop::TunnelHeadroom);
    };
    let h = e.header(inner)?;
    let Some(at) = (usize::from(off) + h.strip).checked_sub(h.len) else {
        return Err(EgressDrop::TunnelHeadroom);
    };
    region.write_slot(s, at as u32, &h.hdr[..h.len]);
    // Ends where the frame ended: inside the slot, under u16::MAX.
    Ok((at as u16, (usize::from(len) + h.len - h.strip) as u16))
}

/// Push `vnic`'s VLAN tag (in `vlans`), if it has one, into slot `s`'s
/// frame (`off`, `len`) in `region`: its MAC addresses move 4 bytes into
/// the headroom and the tag follows them. The extent of the frame to send.
#[inline]
fn tag_at(
    vlans: Option<&[u16]>,
    region: &Region,
    vnic: u16,
    s: u32,
    (off, len): (u16, u16),
) -> Result<(u16, u16), EgressDrop> {
    let id = vlans
        .and_then(|v| v.get(usize::from(vnic)))
        .copied()
        .unwrap_or(0);
    if id == 0 {
        return Ok((off, len));
    }
    // SAFETY: the caller holds the slot by its own records and checked the
    // extent; the first 14 bytes are read once.
    let head = unsafe { region.slot_bytes_at(s, off.into(), 14.min(len.into())) };
    let mut macs = [0u8; 16];
    match head {
        Some(h) if h.len() == 14 && h[12..14] != [0x81, 0x00] => {
            macs[..12].copy_from_slice(&h[..12])
        }
        _ => return Err(EgressDrop::VlanTagged),
    }
    let Some(at) = off.checked_sub(4) else {
        return Err(EgressDrop::VlanHeadroom);
    };
    macs[12..14].copy_from_slice(&[0x81, 0x00]);
    macs[14..16].copy_from_slice(&id.to_be_bytes());
    region.write_slot(s, at.into(), &macs);
    // 4 bytes longer, ending where the frame ended: inside the slot.
    Ok((at, len + 4))
}

#[cfg(test)]
mod tests {
    use vrhost_shm::RingId;

    use super::super::testkit::{Kit, Sink, frame};
    use super::*;

    fn violations(k: &Kit, v: Violation) -> u64 {
        k.vp.stats().violations[v as usize].get()
    }

    #[test]
    fn a_processed_slot_goes_out_its_vnics_port_and_back_to_the_pool() {
        let mut k = Kit::new(2, 1, 64, 64);
        // The VR routes it out of vNIC 1.
        k.through(&frame(3), 1, SlotState::Processed);
        assert_eq!(k.vp.poll_tx(&mut k.ports), 1);
        assert_eq!(k.sent(1), vec![frame(3)]);
        assert!(k.sent(0).is_empty());
        let st = k.vp.stats();
        assert_eq!((st.tx_packets.get(), st.tx_bytes.get()), (1, 64));
        assert_eq!(st.instances[0].returned.get(), 1);
        assert!(k.vp.is_drained());
        k.vp.check_slot_accounting().unwrap();
    }

    #[test]
    fn a_dropped_slot_is_counted_and_freed() {
        let mut k = Kit::new(1, 1, 64, 64);
        k.through(&frame(1), 0, SlotState::Dropped);
        k.vp.poll_tx(&mut k.ports);
        assert!(k.sent(0).is_empty());
        assert_eq!(k.vp.stats().vr_dropped.get(), 1);
        assert!(k.vp.is_drained());
    }

    #[test]
    fn a_slot_not_held_is_refused_and_nothing_is_sent() {
        let mut k = Kit::new(1, 2, 64, 64);
        k.vp.set_balance(crate::balance::Policy::RoundRobin);
        k.give(0, &frame(0));
        k.give(0, &frame(1));
        let (a, b) = (k.take(0, 0), k.take(1, 0));
        assert_eq!((a.len(), b.len()), (1, 1));
        // Instance 0 hands back its sibling's slot, a free slot, an index
        // past the pool, and its own slot twice in one batch.
        let free = (0..64).find(|s| !a.contains(s) && !b.contains(s)).unwrap();
        for &s in &[b[0], free, 64, u32::MAX] {
            k.hand_back(0, 0, &[s], SlotState::Processed);
        }
        k.hand_back(0, 0, &[a[0], a[0]], SlotState::Processed);
        k.vp.poll_tx(&mut k.ports);
        assert_eq!(k.sent(0), vec![frame(0)], "only its own slot, once");
        assert_eq!(violations(&k, Violation::SlotNotOwned), 3);
        assert_eq!(violations(&k, Violation::SlotIndex), 2);
        // The sibling still holds its slot and may hand it back.
        k.hand_back(1, 0, &b, SlotState::Processed);
        k.vp.poll_tx(&mut k.ports);
        assert_eq!(k.sent(0), vec![frame(0), frame(1)]);
        assert!(k.vp.is_drained());
        k.vp.check_slot_accounting().unwrap();
    }

    #[test]
    fn a_bad_state_or_extent_is_a_violation_and_the_slot_comes_back() {
        let mut k = Kit::new(1, 1, 64, 64);
        k.give_n(3);
        let s = k.take(0, 0);
        let r = k.vp.region();
        // Too short for an Ethernet header; past the slot's end.
        r.meta(s[0]).unwrap().set_extent(0, MIN_FRAME - 1);
        r.meta(s[1]).unwrap().set_extent(u16::MAX - 10, 64);
        k.hand_back(0, 0, &s[..2], SlotState::Processed);
        // Returned while still FILLED: the VR never processed it.
        k.hand_back(0, 0, &s[2..], SlotState::Filled);
        k.vp.poll_tx(&mut k.ports);
        assert!(k.sent(0).is_empty());
        assert_eq!(violations(&k, Violation::Extent), 2);
        assert_eq!(violations(&k, Violation::SlotState), 1);
        assert!(k.vp.is_drained(), "every slot back whatever its state");
        k.vp.check_slot_accounting().unwrap();
    }

    #[test]
    fn what_the_port_refuses_is_a_port_drop() {
        let mut k = Kit::new(2, 1, 64, 64);
        k.ports[1] = Box::new(Sink {
            sent: k.sent[1].clone(),
            room: 1,
        });
        k.give_n(3);
        let s = k.take(0, 0);
        k.hand_back(0, 1, &s, SlotState::Processed);
        k.vp.poll_tx(&mut k.ports);
        assert_eq!(k.sent(1), vec![frame(0)]);
        let st = k.vp.stats();
        assert_eq!((st.tx_packets.get(), st.port_dropped.get()), (1, 2));
        // A vNIC whose port is gone (renumbered away).
        k.vp.set_vnic_ports(vec![0, usize::MAX]);
        k.through(&frame(9), 1, SlotState::Processed);
        k.vp.poll_tx(&mut k.ports);
        assert_eq!(k.vp.stats().port_dropped.get(), 3);
        assert!(k.vp.is_drained());
    }

    #[test]
    fn the_budget_leaves_the_rest_for_the_next_round() {
        let mut k = Kit::new(1, 1, 256, 256);
        k.give_n(100);
        let s = k.take(0, 0);
        k.hand_back(0, 0, &s, SlotState::Processed);
        assert!(k.vp.tx_pending());
        assert_eq!(k.vp.poll_tx_budget(&mut k.ports, 70), 70);
        assert!(k.vp.tx_pending());
        assert_eq!(k.vp.poll_tx_budget(&mut k.ports, 70), 30);
        assert!(!k.vp.tx_pending());
        assert_eq!(k.sent(0).len(), 100);
    }

    /// A tap VR writes at most a quantum a round into its TAPs, however
    /// large its budget: the namespace forwards each frame into another
    /// TAP's queue, read a round's worth at a time.
    #[test]
    fn a_loop_s_vr_sends_a_quantum_a_round() {
        let mut k = Kit::new(2, 1, 1024, 1024);
        k.vp.set_loop(1);
        for t in 0..300 {
            k.give(1, &frame(t as u8));
        }
        let s = k.take(0, 1);
        k.hand_back(0, 0, &s, SlotState::Processed);
        assert_eq!(k.vp.poll_tx(&mut k.ports), TX_QUANTUM);
        assert_eq!(k.vp.poll_tx(&mut k.ports), 300 - TX_QUANTUM);
        assert_eq!(k.sent(0).len(), 300);
    }

    #[test]
    fn a_tx_ring_index_out_of_bounds_is_a_violation() {
        let mut k = Kit::new(1, 1, 64, 64);
        // The VR claims to have produced more than the ring holds.
        let ring = k.vp.region().ring(0, RingId::Tx(0)).unwrap();
        ring.producer_at(1000, 1000).push(&[0]).unwrap();
        k.vp.poll_tx(&mut k.ports);
        assert_eq!(violations(&k, Violation::TxRingIndex), 1);
    }
}
