//! A VR on a dedicated port: the port's AF_XDP UMEM is the first slots of
//! the VR's own pool, so a frame the kernel writes there is handed to the
//! VR where it lies and sent from where the VR left it. The host moves
//! descriptors only: rx (the port lends a frame) -> the VR's rx ring; the
//! VR's tx ring -> the port's tx ring (after the same checks as every
//! slot, see `egress`); a slot released or dropped -> back to the port.
//! Frames that arrive on other ports are copied into the VR's other slots
//! as always, and what leaves on another port is copied by that port.
//!
//! Only a port that belongs to this VR alone may be dedicated: its UMEM is
//! in the VR's region, which the VR reads and writes. A shared port keeps
//! its own UMEM and the copy, which is the isolation boundary.

use vrhost_io::af_xdp::{AfXdpConfig, AfXdpError, AfXdpPort, UmemArea};
use vrhost_io::{Lender, LentFrame, Port};
use vrhost_packet::FlowKey;
use vrhost_shm::{Region, SlotState};

use super::ledger::SlotLedger;
use super::{MIN_FRAME, VrPath};
use crate::balance::flow_hash;
use crate::capture::Direction;
use crate::stats::IngressDrop;

/// The dedicated port of a VR.
pub(super) struct Dedicated {
    /// Its index among the worker's ports.
    pub(super) port: usize,
    /// The vNIC whose port it is: every frame it receives is for it.
    pub(super) vnic: u16,
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
    let refuse = |why: String| AfXdpError::Config {
        ifname: ifname.to_string(),
        why,
    };
    if region.slot_bytes() != cfg.frame_size || cfg.frames > region.slot_count() {
        return Err(refuse(format!(
            "a pool of {} slots of {} bytes cannot hold {} frames of {} bytes",
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
    let area = unsafe { UmemArea::new(base, len, Box::new(region.clone())) };
    AfXdpPort::open_on(ifname, cfg, area)
}

impl VrPath {
    /// Make port `port` dedicated to this VR: the port's UMEM is the first
    /// `frames` slots of its pool (opened with [`open_dedicated`] over its
    /// region), and every frame it receives goes to the vNIC whose port it
    /// is, with no copy ([`VrPath::adopt`]). Before any frame moves.
    ///
    /// # Errors
    /// In words: no vNIC or several on that port, a VLAN or tunnel on it
    /// (they rewrite frames in the slot), more frames than slots, or slots
    /// in use.
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
        if !self.plain_wire {
            return Err("a dedicated port's vNIC has no VLAN and no tunnel".into());
        }
        if frames > self.slots.pool() as u32 || !self.is_drained() {
            return Err(format!(
                "{frames} port frames in a pool of {} with {} slots free",
                self.slots.pool(),
                self.slots.free()
            ));
        }
        self.slots = SlotLedger::with_port(self.slots.pool() as u32, self.inst.len(), frames);
        // A port's pool is whole: all of it is the port's memory.
        self.pool_in_use_changed();
        self.cold.dedicated = Some(Dedicated {
            port,
            vnic: v as u16,
            back: Vec::with_capacity(frames as usize),
        });
        Ok(())
    }

    /// The dedicated port, if it has one.
    #[inline]
    pub fn dedicated_port(&self) -> Option<usize> {
        self.cold.dedicated.as_ref().map(|d| d.port)
    }

    /// Stage a frame its dedicated port lent (`l.frame` is the slot), as
    /// [`VrPath::stage`] stages a copy: same admission, no copy. Refused
    /// frames stay the port's: the caller gives them back
    /// ([`VrPath::give_back`] does it for those the VR released).
    pub fn adopt(&mut self, l: LentFrame) -> Result<(), IngressDrop> {
        let Some(vnic) = self.cold.dedicated.as_ref().map(|d| d.vnic) else {
            return Err(IngressDrop::NoMatch);
        };
        if l.len < u32::from(MIN_FRAME)
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
        self.staged[q].push(l.frame);
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

    /// Hand the port the slots of its frames the VR released (dropped,
    /// sent on another port, or reclaimed from an instance that is gone).
    pub fn give_back(&mut self, lender: &mut dyn Lender) {
        if let Some(d) = self.cold.dedicated.as_mut() {
            for s in d.back.drain(..) {
                lender.give_back(s);
            }
        }
    }

    /// Send `lent`, slots of the dedicated port's frames that instance `i`
    /// handed back for `vnic` (checked by `send`), on that port where they
    /// lie: they are the port's again, sent or refused.
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
        let port = self.cold.dedicated.as_ref().map_or(usize::MAX, |d| d.port);
        let sent = match ports.get_mut(port).and_then(|p| p.lender()) {
            Some(p) => p.tx_lent(lent),
            None => {
                // No lending port there now (the port was replaced): the
                // frames go back to it when one is.
                for l in lent {
                    self.back_to_port(l.frame);
                }
                0
            }
        };
        self.stats.lent_out.add(sent as u64);
        let bytes = lent[..sent].iter().map(|l| u64::from(l.len)).sum();
        self.count_tx(vnic, sent, lent.len() - sent, bytes);
    }

    /// Put port slot `s` on the list to hand back.
    #[inline]
    pub(super) fn back_to_port(&mut self, s: u32) {
        if let Some(d) = self.cold.dedicated.as_mut() {
            d.back.push(s);
        }
    }
}
