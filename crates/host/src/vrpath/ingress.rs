//! Ingress: a frame from a port copied into a free slot of the VR's pool
//! and staged for an instance's rx ring (admission: rate limit, ring and
//! pool room, the room kept for control frames), then published a burst at
//! a time, waking an instance that sleeps.

use vrhost_io::Port;
use vrhost_packet::FlowKey;
use vrhost_shm::SlotState;

use super::{BURST, Backend, Class, SHARED, STAGE_MAX, VrPath};
use crate::balance::{flow_hash, flow_key_hash};
use crate::capture::Direction;
use crate::stats::{IngressDrop, Violation};

/// The most frames a tap VR may have on their way into its namespace
/// (held, from a loop's entry vNIC) before it takes more: enough for the
/// VR process to miss its core for 10 ms at the TAP path's peak (about
/// 0.2 Mpps), and more waiting would only delay every frame behind them.
pub const LOOP_ENTRY_MAX: usize = 2048;

/// The part of a pool of `pool` slots a loop's entry frames may hold: half
/// (the frames coming back hold at most what went in), up to
/// [`LOOP_ENTRY_MAX`].
pub fn loop_share(pool: usize) -> usize {
    (pool / 2).clamp(1, LOOP_ENTRY_MAX)
}

impl VrPath {
    /// Copy `frame` into a free slot and stage it for `vnic`'s rx ring.
    /// The caller flushes with [`VrPath::flush_rx`] after the burst. A
    /// [`Class::Data`] frame is refused (`ring_full`, `pool_empty`) when
    /// only the room kept for control frames is left: a flood of data
    /// cannot keep a VR's ARP and routing sessions from it.
    ///
    /// `class` is asked only when the VR is that full: a frame's class
    /// costs nothing on the common path. When several instances are live,
    /// the balancer reads the frame's flow ([`flow_hash`]); the worker,
    /// which has read it already, calls [`VrPath::stage_key`].
    #[inline]
    pub fn stage(
        &mut self,
        vnic: u16,
        frame: &[u8],
        class: impl FnOnce() -> Class,
    ) -> Result<(), IngressDrop> {
        let (head, body) = self.untag(vnic, frame)?;
        self.stage_with(vnic, head, body, class, || flow_hash(frame))
    }

    /// A frame for vNIC `vnic` as its VR sees it: as it came, or, on a VLAN
    /// sub-interface, without its tag (`head` the MAC addresses, `body`
    /// the rest after the tag), which must be the vNIC's.
    #[inline]
    fn untag<'f>(&self, vnic: u16, frame: &'f [u8]) -> Result<(&'f [u8], &'f [u8]), IngressDrop> {
        if self.plain_wire {
            return Ok((&[], frame));
        }
        let Some(&id) = self.vlans.as_deref().and_then(|v| v.get(usize::from(vnic))) else {
            return Ok((&[], frame));
        };
        if id == 0 {
            return Ok((&[], frame));
        }
        match frame.get(12..16) {
            Some(t)
                if t[..2] == [0x81, 0x00] && u16::from_be_bytes([t[2], t[3]]) & 0x0fff == id =>
            {
                Ok((&frame[..12], &frame[16..]))
            }
            _ => Err(IngressDrop::VlanMismatch),
        }
    }

    /// [`VrPath::stage`] for a frame whose key the classifier has read:
    /// its class and its flow come from the key, not from the frame again.
    #[inline]
    pub fn stage_key(&mut self, vnic: u16, frame: &[u8], key: &FlowKey) -> Result<(), IngressDrop> {
        let class = || match key.is_control() {
            true => Class::Control,
            false => Class::Data,
        };
        let (head, body) = self.untag(vnic, frame)?;
        self.stage_with(vnic, head, body, class, || flow_key_hash(key))
    }

    /// Stage what a tunnel of vNIC `vnic` received: `head` (an Ethernet
    /// header made up for an IP-in-IP packet, else empty) then `body`, the
    /// inner frame; `peer_mac` is the outer source MAC, the tunnel's peer
    /// from now on (unless configured). See [`crate::tunnel`].
    #[inline]
    pub fn stage_tunneled(
        &mut self,
        vnic: u16,
        head: &[u8],
        body: &[u8],
        peer_mac: [u8; 6],
    ) -> Result<(), IngressDrop> {
        if let Some(e) = self
            .encap
            .as_deref_mut()
            .and_then(|e| e.get_mut(usize::from(vnic)))
            .and_then(Option::as_mut)
        {
            e.learn(peer_mac);
        }
        if head.is_empty() {
            let key = FlowKey::extract(body)
                .ok()
                .or_else(|| FlowKey::extract_l2(body));
            let class = || match key.as_ref().is_some_and(FlowKey::is_control) {
                true => Class::Control,
                false => Class::Data,
            };
            let hash = || key.as_ref().map_or_else(|| flow_hash(body), flow_key_hash);
            self.stage_with(vnic, &[], body, class, hash)
        } else {
            // An inner IPv4 packet (IP-in-IP): its addresses are the flow.
            let hash = || {
                let a = body.get(12..20).unwrap_or(&[0; 8]);
                let w = |i: usize| u32::from_be_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
                (w(0) ^ w(4).rotate_left(16)).wrapping_mul(0x9e37_79b9)
            };
            self.stage_with(vnic, head, body, || Class::Data, hash)
        }
    }

    /// [`VrPath::stage`] of the frame `head` then `frame` (`head` is empty
    /// but for a tunnel's made-up header), the flow's hash from `hash`
    /// (asked only when the balancer picks among several instances).
    #[inline]
    fn stage_with(
        &mut self,
        vnic: u16,
        head: &[u8],
        frame: &[u8],
        class: impl FnOnce() -> Class,
        hash: impl FnOnce() -> u32,
    ) -> Result<(), IngressDrop> {
        // Asked at most once, and only within the reserve.
        let (mut class, mut is_control) = (Some(class), None);
        let mut control = || {
            *is_control.get_or_insert_with(|| class.take().is_some_and(|c| c() == Class::Control))
        };
        let (iu, q) = self.admit(vnic, &mut control, hash)?;
        let len = head.len() + frame.len();
        if len > usize::from(self.slot_bytes - self.headroom) {
            return Err(IngressDrop::TooBig);
        }
        if self.slots.free() <= self.pool_reserve as usize && !control() {
            return Err(IngressDrop::PoolEmpty);
        }
        if vnic < self.loop_vnics && self.slots.free() <= self.loop_floor as usize && !control() {
            return Err(IngressDrop::TapBacklog);
        }
        let Some(slot) = self.slots.give(iu) else {
            return Err(IngressDrop::PoolEmpty);
        };
        // The slot the next frame for this VR will take: with several VRs
        // that frame is a few frames away, time for the slot's lines (last
        // written by the VR's core) to arrive.
        // (An in-process VR's slots are in this core's cache already.)
        if self.backend.uses_rings()
            && let Some(next) = self.slots.next_free()
        {
            self.region.prefetch(next, self.headroom.into());
        }
        let at = u32::from(self.headroom);
        // A made-up or kept header only for tunnels and VLANs: the common
        // frame is one copy (an empty copy is still a call).
        if !head.is_empty() {
            self.region.write_slot(slot, at, head);
        }
        self.region.write_slot(slot, at + head.len() as u32, frame);
        let meta = self
            .region
            .meta(slot)
            .expect("free list holds valid indexes");
        meta.set_extent(self.headroom, len as u16);
        meta.set(SlotState::Filled);
        // `admit` left room in the queue.
        if !self.staged[q].push(slot) {
            self.release(slot, iu);
            return Err(IngressDrop::RingFull);
        }
        self.staged_n += 1;
        // The frame as received, copied from the port's buffer (not from
        // the slot, which the VR can write at any time).
        // Frames it cannot keep are counted at the end of the burst.
        if let Some(tap) = self.tap.as_deref_mut()
            && tap.wants(vnic)
        {
            tap.copy_parts(Direction::In, vnic, head, frame);
        }
        Ok(())
    }

    /// Make vNICs `0..entries` a loop's entries: frames given to them come
    /// back to the VR on other vNICs after a detour (a tap VR: its data
    /// vNICs' frames go through its namespace's TAPs and return on its
    /// control vNICs). A data frame for an entry vNIC is refused
    /// ([`IngressDrop::TapBacklog`]) while the VR holds
    /// [`loop_share`] of its pool or more, so the frames on their way
    /// back always find slots: otherwise a flood fills the pool with
    /// frames going in, and the ones coming back, which have already cost
    /// their trip through the namespace, are dropped (a receive livelock:
    /// the forwarded rate falls to almost nothing while the host stays
    /// busy). The drop is the cheapest there is: before the copy. 0: no
    /// loop.
    pub fn set_loop(&mut self, entries: u16) {
        self.loop_vnics = entries;
        let pool = self.slots.pool();
        // A pool has at most u32::MAX slots.
        self.loop_floor = match entries {
            0 => 0,
            _ => (pool - loop_share(pool).min(pool)) as u32,
        };
    }

    /// Admission of a frame for `vnic` (up, rate limit, the instance, room
    /// in its staging and rx ring, within the control reserve only if
    /// `control` says so; the flow's `hash` asked only to pick among
    /// instances): the instance and its staging queue.
    #[inline]
    pub(super) fn admit(
        &mut self,
        vnic: u16,
        control: &mut impl FnMut() -> bool,
        hash: impl FnOnce() -> u32,
    ) -> Result<(usize, usize), IngressDrop> {
        if !self.up {
            return Err(IngressDrop::VrDown);
        }
        if let Some(b) = &mut self.bucket {
            if b.tokens < 1.0 {
                return Err(IngressDrop::RateLimited);
            }
            b.tokens -= 1.0;
        }
        let v = usize::from(vnic);
        if v >= self.vnic_port.len() {
            return Err(IngressDrop::NoMatch);
        }
        // The instance: the only live one, or the balancer's choice (the
        // frame's hash is computed only for the flow policy).
        let i = if self.solo != SHARED {
            self.solo
        } else {
            self.pick_shared(hash)?
        };
        let iu = usize::from(i);
        let q = iu * self.vnic_port.len() + v;
        let staged = self.staged[q].len();
        if staged >= STAGE_MAX {
            return Err(IngressDrop::RingFull);
        }
        if self.backend.uses_rings() {
            let need = staged as u32 + u32::from(self.ring_reserve);
            // The room last seen, kept beside the queue: the ring's
            // producer is read only when that is not enough.
            if need >= self.staged[q].room() {
                match self.inst[iu].rx[v].free() {
                    // Within the reserve: control frames only.
                    Ok(room) if need >= room => {
                        self.staged[q].set_room(room);
                        if staged as u32 >= room || !control() {
                            return Err(IngressDrop::RingFull);
                        }
                    }
                    Ok(room) => self.staged[q].set_room(room),
                    Err(_) => {
                        self.stats.violation(Violation::RxRingIndex);
                        return Err(IngressDrop::RingFull);
                    }
                }
            }
        }
        Ok((iu, q))
    }

    /// The instance of a frame when several are live (out of line: a VR
    /// with one instance does not carry this code in its loop). Refused
    /// when the chosen instance holds its share of the pool.
    #[inline(never)]
    pub(super) fn pick_shared(&mut self, hash: impl FnOnce() -> u32) -> Result<u16, IngressDrop> {
        let i = self
            .balancer
            .pick_with(hash, self.slots.held())
            .ok_or(IngressDrop::VrDown)?;
        if self.slots.held()[usize::from(i)] >= self.inst_cap {
            return Err(IngressDrop::RingFull);
        }
        Ok(i)
    }

    /// Frames staged and not yet published.
    #[inline]
    pub fn staged(&self) -> usize {
        self.staged_n
    }

    /// Publish the staged slots to the rx rings (or process them in place for
    /// an in-process backend, then send the results). Rings a sleeping
    /// instance's doorbell. Returns the frames published.
    pub fn flush_rx(&mut self, ports: &mut [Box<dyn Port>]) -> usize {
        // One burst's captures, published at once (before an in-process
        // VR's frames come out: `send` appends to the same list).
        if let Some(tap) = self.tap.as_deref_mut() {
            let refused = tap.end_burst();
            if refused > 0 {
                self.stats.capture_dropped.add(refused);
            }
        }
        if self.staged_n == 0 {
            return 0;
        }
        let total = self.staged_n;
        for i in 0..self.inst.len() {
            let mut given = 0;
            for v in 0..self.vnic_port.len() {
                let q = i * self.vnic_port.len() + v;
                let n = self.staged[q].len();
                if n == 0 {
                    continue;
                }
                given += n;
                if !self.backend.uses_rings() {
                    self.count_rx(v, n, i);
                }
                match &mut self.backend {
                    Backend::Process(_) | Backend::External => {
                        let rx = &mut self.inst[i].rx[v];
                        let pushed = match rx.push(&self.staged[q]) {
                            Ok(p) => p,
                            Err(_) => {
                                self.stats.violation(Violation::RxRingIndex);
                                0
                            }
                        };
                        self.staged[q].set_room(rx.free_cached());
                        self.count_rx(v, pushed, i);
                        for k in pushed..n {
                            let s = self.staged[q][k];
                            self.release(s, i);
                        }
                        if pushed < n {
                            self.stats
                                .drop_in(IngressDrop::RingFull, (n - pushed) as u64);
                        }
                    }
                    // Two arms for one call: the router's is monomorphic
                    // (no `dyn Vr` call per packet).
                    Backend::InProcRouter(r) => {
                        self.inproc
                            .process(r.as_mut(), &self.region, v, &self.staged[q]);
                    }
                    Backend::InProc(vr) => {
                        self.inproc
                            .process(vr.as_mut(), &self.region, v, &self.staged[q]);
                    }
                }
                self.staged[q].clear();
            }
            if given > 0 && self.backend.uses_rings() {
                self.kick_given(i, given);
            }
        }
        self.staged_n = 0;
        if !self.backend.uses_rings() {
            for v in 0..self.vnic_port.len() {
                let mut idx = [0u32; BURST];
                loop {
                    let staged = self.inproc.stage.vnic(v as u16);
                    let n = staged.len().min(BURST);
                    if n == 0 {
                        break;
                    }
                    idx[..n].copy_from_slice(&staged[..n]);
                    staged.drain(..n);
                    self.send(0, v as u16, &idx[..n], ports);
                }
            }
        }
        total
    }

    /// Count the first `n` frames staged for vNIC `v` of instance `i`,
    /// given to it.
    #[inline]
    pub(super) fn count_rx(&self, v: usize, n: usize, i: usize) {
        if n == 0 {
            return;
        }
        let bytes: u64 = self.staged[i * self.vnic_port.len() + v][..n]
            .iter()
            .map(|&s| u64::from(self.region.meta(s).expect("staged valid").extent().1))
            .sum();
        self.stats.rx_packets.add(n as u64);
        self.stats.rx_bytes.add(bytes);
        if let Some(c) = self.stats.vnics.get(v) {
            c.rx_packets.add(n as u64);
            c.rx_bytes.add(bytes);
        }
        if let Some(c) = self.stats.instances.get(i) {
            c.rx_packets.add(n as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::super::Sched;
    use super::super::testkit::{Kit, frame};
    use super::*;

    #[test]
    fn a_frame_reaches_the_instance_ring_of_its_vnic_whole() {
        let mut k = Kit::new(2, 1, 64, 64);
        k.give(1, &frame(7));
        assert!(k.take(0, 0).is_empty());
        let got = k.take(0, 1);
        assert_eq!(got.len(), 1);
        assert_eq!(k.bytes(got[0]), frame(7));
        let meta = k.vp.region().meta(got[0]).unwrap();
        assert_eq!(
            SlotState::from_raw(meta.state_raw()),
            Some(SlotState::Filled)
        );
        let st = k.vp.stats();
        assert_eq!((st.rx_packets.get(), st.rx_bytes.get()), (1, 64));
        assert_eq!(st.vnics[1].rx_packets.get(), 1);
        assert_eq!(k.vp.free_slots(), 63);
        k.vp.check_slot_accounting().unwrap();
    }

    #[test]
    fn frames_wait_staged_until_the_flush() {
        let mut k = Kit::new(1, 1, 64, 64);
        for t in 0..3 {
            k.vp.stage(0, &frame(t), || Class::Data).unwrap();
        }
        assert_eq!(k.vp.staged(), 3);
        assert!(
            k.take(0, 0).is_empty(),
            "nothing published before the flush"
        );
        assert_eq!(k.vp.flush_rx(&mut k.ports), 3);
        assert_eq!(k.vp.staged(), 0);
        let got = k.take(0, 0);
        let tags: Vec<u8> = got.iter().map(|&s| k.bytes(s)[0]).collect();
        assert_eq!(tags, [0, 1, 2], "in order");
    }

    #[test]
    fn refusals_are_named_and_take_no_slot() {
        let mut k = Kit::new(2, 1, 64, 64);
        let data = || Class::Data;
        assert_eq!(k.vp.stage(2, &frame(0), data), Err(IngressDrop::NoMatch));
        let big = vec![0u8; k.vp.region().slot_bytes() as usize];
        assert_eq!(k.vp.stage(0, &big, data), Err(IngressDrop::TooBig));
        assert_eq!(k.vp.free_slots(), 64);
        k.vp.check_slot_accounting().unwrap();
    }

    #[test]
    fn the_rate_limit_admits_its_burst_then_drops() {
        let mut k = Kit::new(1, 1, 64, 64);
        k.vp.set_sched(Sched {
            rate_pps: Some(1),
            rate_burst: 5,
            ..Sched::default()
        });
        let admitted = (0..20)
            .filter(|&t| k.vp.stage(0, &frame(t), || Class::Data).is_ok())
            .count();
        // One token may have come back meanwhile (1 frame/s).
        assert!((5..=6).contains(&admitted), "{admitted}");
        assert_eq!(
            k.vp.stage(0, &frame(0), || Class::Data),
            Err(IngressDrop::RateLimited)
        );
    }

    #[test]
    fn frames_a_full_ring_refuses_at_the_flush_go_back_to_the_pool() {
        // Ring of 16 entries: the control reserve is 1; data fills 15.
        let mut k = Kit::new(1, 1, 64, 16);
        k.give_n(15);
        assert_eq!(
            k.vp.stage(0, &frame(0), || Class::Data),
            Err(IngressDrop::RingFull)
        );
        assert_eq!(k.vp.free_slots(), 64 - 15);
        k.vp.check_slot_accounting().unwrap();
    }

    #[test]
    fn the_room_kept_beside_a_queue_refuses_nothing_the_ring_has_room_for() {
        let refused =
            |k: &mut Kit| k.vp.stage(0, &frame(0), || Class::Data) == Err(IngressDrop::RingFull);
        // Ring of 16 entries, control reserve 1: data fills 15, then the
        // ring (and the room admission last read) is full.
        let mut k = Kit::new(1, 1, 64, 16);
        k.give_n(15);
        assert!(refused(&mut k));
        // The VR empties the ring: the room kept is stale (too low), and
        // admission asks the ring again rather than refuse.
        assert_eq!(k.take(0, 0).len(), 15);
        k.give_n(15);
        assert_eq!(k.take(0, 0).len(), 15, "a whole ring's worth again");
        // Frames staged and not yet published count against the room.
        for t in 0..15 {
            k.vp.stage(0, &frame(t), || Class::Data).unwrap();
        }
        assert!(refused(&mut k));
        assert_eq!(k.vp.flush_rx(&mut k.ports), 15);
        assert_eq!(k.take(0, 0).len(), 15);
    }

    /// A UDP frame of flow `n` (its source port).
    fn udp(n: u16) -> Vec<u8> {
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 1, 0, 1));
        crate::testkit::udp(src, 1000 + n, dst, 2000)
    }

    /// Which instance each of 64 flows lands on, staged by `stage`.
    fn spread(stage: impl Fn(&mut VrPath, &[u8])) -> Vec<usize> {
        let mut k = Kit::new(1, 4, 1024, 1024);
        (0..64)
            .map(|n| {
                stage(&mut k.vp, &udp(n));
                k.vp.flush_rx(&mut k.ports);
                (0..4).find(|&i| !k.take(i, 0).is_empty()).unwrap()
            })
            .collect()
    }

    #[test]
    fn the_classifiers_key_picks_the_instance_the_frame_would() {
        let by_frame = spread(|vp, f| vp.stage(0, f, || Class::Data).unwrap());
        let by_key = spread(|vp, f| {
            let key = FlowKey::extract(f).unwrap();
            vp.stage_key(0, f, &key).unwrap();
        });
        assert_eq!(by_frame, by_key);
        let mut used = by_key.clone();
        used.sort_unstable();
        used.dedup();
        assert!(
            used.len() > 1,
            "flows spread over the instances: {by_key:?}"
        );
    }

    #[test]
    fn a_vr_that_is_down_takes_nothing() {
        let mut k = Kit::new(1, 1, 64, 64);
        k.vp.quarantine();
        assert_eq!(
            k.vp.stage(0, &frame(0), || Class::Data),
            Err(IngressDrop::VrDown)
        );
    }

    /// A tap VR (vNICs 0, 1 enter its namespace; 2, 3 are its TAPs):
    /// flooded, the frames going in stop at their share of the pool,
    /// and the ones coming back from the TAPs still find room, up to the
    /// control reserve.
    #[test]
    fn a_loop_s_entries_leave_the_pool_to_the_frames_coming_back() {
        let mut k = Kit::new(4, 1, 256, 256);
        k.vp.set_loop(2);
        let share = loop_share(256);
        assert_eq!(share, 128);
        // Published as they come (a staging queue holds a burst).
        let flood = |k: &mut Kit, vnic: u16| {
            (0..256)
                .take_while(|&t| {
                    let ok = k.vp.stage(vnic, &frame(t as u8), || Class::Data).is_ok();
                    k.vp.flush_rx(&mut k.ports);
                    ok
                })
                .count()
        };
        assert_eq!(flood(&mut k, 0), share);
        assert_eq!(
            k.vp.stage(1, &frame(0), || Class::Data),
            Err(IngressDrop::TapBacklog),
            "the other entry shares the same share"
        );
        // Control frames (ARP) go in all the same.
        assert_eq!(k.vp.stage(0, &frame(0), || Class::Control), Ok(()));
        k.vp.flush_rx(&mut k.ports);
        // What comes back takes the rest, but for the control reserve.
        let back = flood(&mut k, 3);
        assert_eq!(back, 256 - share - 1 - k.vp.pool_reserve as usize);
        // The VR sends the frames going in to the TAP (vNIC 2): the
        // entries take frames again.
        let slots = k.take(0, 0);
        k.hand_back(0, 2, &slots, SlotState::Processed);
        k.vp.poll_tx(&mut k.ports);
        assert_eq!(k.sent(2).len(), share + 1, "and the control frame");
        assert!(k.vp.stage(0, &frame(1), || Class::Data).is_ok());
        k.vp.check_slot_accounting().unwrap();
        // Without a loop, the same flood takes the pool.
        let mut k = Kit::new(4, 1, 256, 256);
        assert_eq!(flood(&mut k, 0), 256 - k.vp.pool_reserve as usize);
    }

    #[test]
    fn a_loop_s_share_is_half_the_pool_up_to_its_maximum() {
        assert_eq!(loop_share(1), 1);
        assert_eq!(loop_share(1024), 512);
        assert_eq!(loop_share(1 << 20), LOOP_ENTRY_MAX);
    }
}
