//! A VR on dedicated ports: a port's AF_XDP UMEM is a range of the first
//! slots of the VR's own pool, so a frame the kernel writes there is
//! handed to the VR where it lies and sent from where the VR left it. The
//! host moves descriptors only: rx (the port lends a frame) -> the VR's rx
//! ring; the VR's tx ring -> the port's tx ring (after the same checks as
//! every slot, see `egress`); a slot released or dropped -> back to the
//! port. Frames that arrive on other ports are copied into the VR's other
//! slots as always, and what leaves on another port is copied by that
//! port.
//!
//! A VR may have several dedicated ports: the first opened registers the
//! pool as its UMEM ([`open_dedicated`]), the others share it
//! (`XDP_SHARED_UMEM`, [`open_dedicated_sharing`]), each with its own range
//! of the slots. A frame one of them lent that the VR sends on another is
//! taken over by that port and sent where it lies; its completion brings
//! it home to the port that lent it ([`VrPath::bring_home`]).
//!
//! Only a port that belongs to this VR alone may be dedicated: its UMEM is
//! in the VR's region, which the VR reads and writes. A shared port keeps
//! its own UMEM and the copy, which is the isolation boundary.

use std::ops::Range;

use vrhost_io::af_xdp::{AfXdpConfig, AfXdpError, AfXdpPort, UmemArea};
use vrhost_io::{Lender, LentFrame, Port};
use vrhost_packet::FlowKey;
use vrhost_shm::{Region, SlotState};

use super::ledger::SlotLedger;
use super::{BURST, MIN_FRAME, VrPath};
use crate::balance::flow_hash;
use crate::capture::Direction;
use crate::stats::IngressDrop;

/// A dedicated port of a VR.
pub(super) struct Dedicated {
    /// Its index among the worker's ports.
    pub(super) port: usize,
    /// The vNIC whose port it is: every frame it receives is for it.
    pub(super) vnic: u16,
    /// Its frames: these slots of the pool.
    pub(super) frames: Range<u32>,
    /// Port slots released by the VR, to hand back to the port (at most
    /// every port slot once: allocated once).
    pub(super) back: Vec<u32>,
}

/// Open the AF_XDP port `ifname` with `region`'s pool as its UMEM: its
/// first `cfg.frames` slots are the port's frames (the region's slots must
/// be `cfg.frame_size` bytes). Pass the port to the worker and the frame
/// count to [`VrPath::set_dedicated`] of the VR over that region.
///
/// # Errors
/// The port's, or [`AfXdpError::Config`] for a pool the UMEM cannot be.
pub fn open_dedicated(
    ifname: &str,
    cfg: &AfXdpConfig,
    region: &Region,
) -> Result<AfXdpPort, AfXdpError> {
    let area = pool_area(ifname, cfg, region, 0)?;
    AfXdpPort::open_on(ifname, cfg, area)
}

/// Open the AF_XDP port `ifname` on the UMEM of `first`, a port opened by
/// [`open_dedicated`] (or this function, for a third port) over the same
/// `region`: its `cfg.frames` frames are the slots that follow `first`'s.
/// Give [`VrPath::set_dedicated`] the ports in the order they were opened.
///
/// # Errors
/// As [`open_dedicated`]; the kernel's refusal to share the UMEM.
pub fn open_dedicated_sharing(
    ifname: &str,
    cfg: &AfXdpConfig,
    region: &Region,
    first: &AfXdpPort,
) -> Result<AfXdpPort, AfXdpError> {
    let before = first.lent_frames().map_or(0, |r| r.end);
    let area = pool_area(ifname, cfg, region, before)?;
    AfXdpPort::open_sharing(ifname, cfg, area, first)
}

/// `region`'s slots as a UMEM area for a port of `cfg.frames` frames
/// after the `before` frames of other ports.
fn pool_area(
    ifname: &str,
    cfg: &AfXdpConfig,
    region: &Region,
    before: u32,
) -> Result<UmemArea, AfXdpError> {
    let refuse = |why: String| AfXdpError::Config {
        ifname: ifname.to_string(),
        why,
    };
    let frames = u64::from(before) + u64::from(cfg.frames);
    if region.slot_bytes() != cfg.frame_size || frames > u64::from(region.slot_count()) {
        return Err(refuse(format!(
            "a pool of {} slots of {} bytes cannot hold {} frames of {} bytes after {before}",
            region.slot_count(),
            region.slot_bytes(),
            cfg.frames,
            cfg.frame_size
        )));
    }
    let base = region
        .slot_ptr(0)
        .ok_or_else(|| refuse("an empty pool".into()))?;
    let len = region.slot_count() as usize * region.slot_bytes() as usize;
    // SAFETY: the slots are one page-aligned, read-write, shared mapping
    // of `len` bytes (the region's layout), kept mapped by the region's
    // clone the area owns; the host makes no reference into the slots but
    // the transient copies of the slot protocol (`Region::slot_bytes_at`).
    Ok(unsafe { UmemArea::new(base, len, Box::new(region.clone())) })
}

/// The lending sides of ports `a` and `b` (two different ports), if both
/// have one.
fn two_lenders(
    ports: &mut [Box<dyn Port>],
    a: usize,
    b: usize,
) -> Option<(&mut dyn Lender, &mut dyn Lender)> {
    let [pa, pb] = ports.get_disjoint_mut([a, b]).ok()?;
    Some((pa.lender()?, pb.lender()?))
}

impl VrPath {
    /// Make port `port` dedicated to this VR: the port's UMEM is `frames`
    /// slots of its pool (opened with [`open_dedicated`] over its region,
    /// the first `frames` slots; or, for its second dedicated port and
    /// after, with [`open_dedicated_sharing`], the `frames` slots that
    /// follow the previous port's, so call this in the order the ports
    /// were opened). Every frame the port receives goes to the vNIC whose
    /// port it is, with no copy ([`VrPath::adopt`]). Before any frame
    /// moves.
    ///
    /// # Errors
    /// In words: no vNIC or several on that port, a port dedicated
    /// already, a VLAN or tunnel on it (they rewrite frames in the slot),
    /// more frames than slots, or slots in use.
    pub fn set_dedicated(&mut self, port: usize, frames: u32) -> Result<(), String> {
        let mut on_port = self
            .vnic_port
            .iter()
            .enumerate()
            .filter(|(_, p)| **p == port);
        let (Some((v, _)), None) = (on_port.next(), on_port.next()) else {
            return Err(format!(
                "a dedicated port is one vNIC's; port {port} is not"
            ));
        };
        if self.cold.dedicated.iter().any(|d| d.port == port) {
            return Err(format!("port {port} is dedicated to this VR already"));
        }
        if !self.plain_wire {
            return Err("a dedicated port's vNIC has no VLAN and no tunnel".into());
        }
        let first = self.slots.port_slots();
        let end = u64::from(first) + u64::from(frames);
        if end > self.slots.pool() as u64 || !self.is_drained() {
            return Err(format!(
                "{frames} port frames after {first} in a pool of {} with {} slots free",
                self.slots.pool(),
                self.slots.free()
            ));
        }
        let end = end as u32;
        self.slots = SlotLedger::with_port(self.slots.pool() as u32, self.inst.len(), end);
        // A port's pool is whole: all of it is the port's memory.
        self.pool_in_use_changed();
        self.cold.dedicated.push(Dedicated {
            port,
            vnic: v as u16,
            frames: first..end,
            back: Vec::with_capacity(frames as usize),
        });
        Ok(())
    }

    /// Its dedicated ports (none for most VRs).
    pub fn dedicated_ports(&self) -> impl Iterator<Item = usize> + '_ {
        self.cold.dedicated.iter().map(|d| d.port)
    }

    /// Stage a frame its dedicated port `port` lent (`l.frame` is the
    /// slot), as [`VrPath::stage`] stages a copy: same admission, no copy.
    /// Refused frames stay the port's: the caller gives them back
    /// ([`VrPath::give_back`] does it for those the VR released).
    pub fn adopt(&mut self, port: usize, l: LentFrame) -> Result<(), IngressDrop> {
        let Some(d) = self.cold.dedicated.iter().find(|d| d.port == port) else {
            return Err(IngressDrop::NoMatch);
        };
        let vnic = d.vnic;
        if !d.frames.contains(&l.frame)
            || l.len < u32::from(MIN_FRAME)
            || u64::from(l.offset) + u64::from(l.len) > u64::from(self.slot_bytes)
        {
            return Err(IngressDrop::Malformed);
        }
        // SAFETY: the port lent the slot to the host (the extent is inside
        // it, checked above); the VR may write it, and the frame is read
        // once, for its class or its flow, never trusted beyond that.
        let frame: *const [u8] =
            unsafe { self.region.slot_bytes_at(l.frame, l.offset, l.len) }.map_or(&[][..], |f| f);
        // SAFETY: `frame` points into the region's mapping, which `self`
        // keeps (admission does not replace the region).
        let bytes = || unsafe { &*frame };
        let mut control = || FlowKey::extract(bytes()).is_ok_and(|k| k.is_control());
        let hash = || flow_hash(bytes());
        let (iu, q) = self.admit(vnic, &mut control, hash)?;
        if self.slots.adopt(l.frame, iu).is_err() {
            return Err(IngressDrop::Malformed);
        }
        let meta = self.region.meta(l.frame).expect("a port slot");
        meta.set_extent(l.offset as u16, l.len as u16);
        meta.set(SlotState::Filled);
        let queued = self.staged[q].push(l.frame);
        debug_assert!(queued, "admit leaves room in the queue");
        self.staged_n += 1;
        self.stats.lent_in.add(1);
        if let Some(tap) = self.tap.as_deref_mut()
            && tap.wants(vnic)
            // SAFETY: as above; copied once, into the capture.
            && let Some(f) = unsafe { self.region.slot_bytes_at(l.frame, l.offset, l.len) }
        {
            tap.copy_parts(Direction::In, vnic, &[], f);
        }
        Ok(())
    }

    /// Hand dedicated port `port` the slots of its frames the VR released
    /// (dropped, sent on another port, or reclaimed from an instance that
    /// is gone).
    pub fn give_back(&mut self, port: usize, lender: &mut dyn Lender) {
        if let Some(d) = self.cold.dedicated.iter_mut().find(|d| d.port == port) {
            for s in d.back.drain(..) {
                lender.give_back(s);
            }
        }
    }

    /// Bring home to dedicated port `port` its frames that its sibling
    /// ports (the VR's other dedicated ports, on the same UMEM) sent and
    /// completed. Once per rx burst of the port: a look at each sibling's
    /// completion ring, no syscall.
    pub fn bring_home(&mut self, port: usize, ports: &mut [Box<dyn Port>]) {
        if self.cold.dedicated.len() < 2 {
            return;
        }
        for d in &self.cold.dedicated {
            if d.port != port
                && let Some((sib, home)) = two_lenders(ports, d.port, port)
            {
                sib.return_frames(home);
            }
        }
    }

    /// Send `lent`, slots of the dedicated ports' frames that instance `i`
    /// handed back for `vnic` (checked by `send`), on `vnic`'s port, a
    /// dedicated port, where they lie: the port takes over those its
    /// siblings lent. They are the ports' again, sent or refused.
    pub(super) fn send_lent(
        &mut self,
        i: usize,
        vnic: u16,
        lent: &[LentFrame],
        ports: &mut [Box<dyn Port>],
    ) {
        for l in lent {
            self.region
                .meta(l.frame)
                .expect("checked by send")
                .set(SlotState::Empty);
            // A port slot: at the port now, which takes it below.
            self.slots.release(l.frame, i);
        }
        let out = self.vnic_port.get(usize::from(vnic)).copied();
        let out = out.unwrap_or(usize::MAX);
        // Frames of a sibling port: taken over by `out` first. A sibling
        // with no lending side now (replaced) gets its own back later.
        let mut reachable = 0u64;
        for (k, d) in self.cold.dedicated.iter().enumerate().take(64) {
            if d.port == out || two_lenders(ports, out, d.port).is_some() {
                reachable |= 1 << k;
            }
        }
        let mut go = [LentFrame::default(); BURST];
        let mut n = 0;
        for l in lent {
            let home = self
                .cold
                .dedicated
                .iter()
                .position(|d| d.frames.contains(&l.frame));
            if home.is_some_and(|k| k < 64 && reachable & (1 << k) != 0) {
                go[n] = *l;
                n += 1;
            } else {
                self.back_to_port(l.frame);
            }
        }
        let go = &go[..n];
        let sent = match ports.get_mut(out).and_then(|p| p.lender()) {
            Some(_) => self.send_on(out, go, ports),
            None => {
                // No lending port there now (the port was replaced): the
                // frames go back to it when one is.
                for l in go {
                    self.back_to_port(l.frame);
                }
                0
            }
        };
        self.stats.lent_out.add(sent as u64);
        let bytes = go[..sent].iter().map(|l| u64::from(l.len)).sum();
        self.count_tx(vnic, sent, lent.len() - sent, bytes);
    }

    /// Send `lent` on dedicated port `out`, which has a lending side, after
    /// taking over its siblings' frames; then bring their completed frames
    /// home. Returns how many were queued.
    fn send_on(&mut self, out: usize, lent: &[LentFrame], ports: &mut [Box<dyn Port>]) -> usize {
        for d in &self.cold.dedicated {
            if d.port != out
                && lent.iter().any(|l| d.frames.contains(&l.frame))
                && let Some((to, from)) = two_lenders(ports, out, d.port)
            {
                to.take_lent_from(from, lent);
            }
        }
        let sent = match ports[out].lender() {
            Some(p) => p.tx_lent(lent),
            None => 0,
        };
        for d in &self.cold.dedicated {
            if d.port != out
                && let Some((sib, home)) = two_lenders(ports, out, d.port)
            {
                sib.return_frames(home);
            }
        }
        sent
    }

    /// Put port slot `s` on its port's list to hand back.
    #[inline]
    pub(super) fn back_to_port(&mut self, s: u32) {
        push_back(&mut self.cold.dedicated, s);
    }
}

/// Put port slot `s` on the list to hand back of the port of `ded` whose
/// frame it is.
#[inline]
pub(super) fn push_back(ded: &mut [Dedicated], s: u32) {
    if let Some(d) = ded.iter_mut().find(|d| d.frames.contains(&s)) {
        d.back.push(s);
    }
}

#[cfg(test)]
mod tests {
    use vrhost_io::LentFrame;

    use super::super::testkit::Kit;
    use crate::stats::IngressDrop;

    #[test]
    fn each_dedicated_port_lends_its_own_range_of_the_pool() {
        let mut k = Kit::new(3, 1, 64, 64);
        k.vp.set_dedicated(0, 16).unwrap();
        let e = k.vp.set_dedicated(0, 8).unwrap_err();
        assert!(e.contains("already"), "{e}");
        let e = k.vp.set_dedicated(1, 49).unwrap_err();
        assert!(e.contains("after 16"), "{e}");
        k.vp.set_dedicated(1, 16).unwrap();
        assert_eq!(k.vp.dedicated_ports().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(k.vp.free_slots(), 32, "the ports' 32 frames are not free");
        let lent = |frame| LentFrame {
            frame,
            offset: 0,
            len: 64,
        };
        // Port 1's frames are 16..32: it lends no other.
        assert_eq!(k.vp.adopt(1, lent(3)), Err(IngressDrop::Malformed));
        assert_eq!(k.vp.adopt(1, lent(32)), Err(IngressDrop::Malformed));
        assert_eq!(k.vp.adopt(0, lent(20)), Err(IngressDrop::Malformed));
        assert_eq!(k.vp.adopt(2, lent(20)), Err(IngressDrop::NoMatch));
        k.vp.adopt(1, lent(20)).unwrap();
        k.vp.adopt(0, lent(3)).unwrap();
        assert!(!k.vp.is_drained());
        k.vp.check_slot_accounting().unwrap();
    }
}
