//! The layout of a VR's region: a versioned header, then the instance blocks,
//! the slot metadata, the rings and the packet slots, each at an offset the
//! header records.
//!
//! ```text
//! 0                 Header (magic, version, sizes, offsets)
//! instances_offset  InstanceBlock x instance_count   (wakeup flags, VR counters)
//! meta_offset       SlotMeta x slot_count            (state, packet offset+len)
//! rings_offset      per instance: per vNIC rx ring, tx ring; then ctrl-in, ctrl-out
//! slots_offset      slot_count x slot_bytes           (page aligned)
//! ```
//!
//! The host computes a [`Layout`] from a [`RegionConfig`] and writes it into
//! the header; a VR reads the header and rebuilds the same [`Layout`] with
//! [`Layout::from_header`], which refuses another version or anything that
//! does not fit the region it mapped.

use crate::slot::SlotMeta;
use crate::sync::{AtomicU32, AtomicU64};

/// `b"vrhost\0\0"` as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"vrhost\0\0");
/// Version of this layout. A VR built against another one is refused.
/// Version 2: 32 VR counters per instance (16 in version 1).
/// Version 3: the heartbeat on a cache line of its own.
pub const LAYOUT_VERSION: u32 = 3;

/// Smallest and largest pool, in slots.
pub const MIN_SLOTS: u32 = 2;
/// See [`MIN_SLOTS`].
pub const MAX_SLOTS: u32 = 65_536;
/// Largest slot: offsets and lengths are 16-bit.
pub const MAX_SLOT_BYTES: u32 = 65_535 & !63;
/// Most vNICs per VR.
pub const MAX_VNICS: u16 = 64;
/// Most instances (processes) per VR.
pub const MAX_INSTANCES: u16 = 64;
/// Number of `u64` counters a VR instance publishes in its block.
pub const VR_COUNTERS: usize = 32;

const CACHE_LINE: u64 = 64;
const PAGE: u64 = 4096;
/// Ring control words: prod and cons, each on its own cache line.
const RING_CTL_BYTES: u64 = 2 * CACHE_LINE;

/// What the host asks for when it creates a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionConfig {
    /// Bytes per slot (multiple of 64, at least 256).
    pub slot_bytes: u32,
    /// Slots in the pool, 2 to 65,536.
    pub slot_count: u32,
    /// Bytes kept free before the packet in each slot, for encapsulation.
    pub headroom: u32,
    /// Virtual NICs.
    pub vnic_count: u16,
    /// Instances (processes) with their own rings.
    pub instance_count: u16,
    /// Entries per data ring (power of two).
    pub ring_entries: u32,
    /// Entries per control ring (power of two). A peer message takes 16
    /// entries (`vrhost_proto::peer`), so the default 1024 holds 64.
    pub ctrl_entries: u32,
}

impl Default for RegionConfig {
    fn default() -> Self {
        Self {
            slot_bytes: 2048,
            slot_count: 1024,
            headroom: 128,
            vnic_count: 2,
            instance_count: 1,
            ring_entries: 1024,
            // 64 peer messages of 16 entries (vrhost_proto::peer).
            ctrl_entries: 1024,
        }
    }
}

impl RegionConfig {
    /// The default data ring size for a pool: enough entries to hold every
    /// slot, so a ring never refuses an index the pool could give.
    pub fn ring_entries_for(slot_count: u32) -> u32 {
        slot_count.max(2).next_power_of_two()
    }
}

/// A region request that cannot be laid out, or a header that does not match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// A value out of its range.
    #[error("{field} = {value} is out of range ({allowed})")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What would be accepted.
        allowed: &'static str,
    },
    /// The header does not start with the magic number.
    #[error("not a vrhost region (magic {found:#018x})")]
    BadMagic {
        /// What was found.
        found: u64,
    },
    /// The region was laid out by another version of vrhost.
    #[error(
        "region layout version {region} but this VR was built for layout version {ours}; rebuild the VR against the host's vrhost version"
    )]
    Version {
        /// Version in the region's header.
        region: u32,
        /// Version this code was built for.
        ours: u32,
    },
    /// The header's offsets disagree with what its sizes imply, or with the
    /// mapped size.
    #[error("region header inconsistent: {0}")]
    Inconsistent(&'static str),
}

/// The header at offset 0 of every region. Plain data written once by the
/// host before the region is handed to the VR; the host never reads it back.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`LAYOUT_VERSION`].
    pub version: u32,
    /// `size_of::<Header>()`.
    pub header_bytes: u32,
    /// Total bytes of the region.
    pub region_bytes: u64,
    /// Bytes per slot.
    pub slot_bytes: u32,
    /// Slots in the pool.
    pub slot_count: u32,
    /// Default headroom before a packet.
    pub headroom: u32,
    /// Virtual NICs.
    pub vnic_count: u32,
    /// Instances.
    pub instance_count: u32,
    /// Entries per data ring.
    pub ring_entries: u32,
    /// Entries per control ring.
    pub ctrl_entries: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// Offset of the instance blocks.
    pub instances_offset: u64,
    /// Offset of the slot metadata array.
    pub meta_offset: u64,
    /// Offset of the rings.
    pub rings_offset: u64,
    /// Offset of the packet slots.
    pub slots_offset: u64,
}

/// Per-instance words shared by host and VR: the wakeup handshake and the
/// counters the VR publishes. Host-written and VR-written words are on
/// separate cache lines.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct InstanceBlock {
    /// VR-written: 1 while the VR sleeps on its eventfd (the host must kick).
    pub vr_sleeping: AtomicU32,
    /// VR-written: the VR instance's pid once attached, 0 before.
    pub vr_pid: AtomicU32,
    _pad0: [u8; 56],
    /// VR-written: incremented by the VR's poll loop (for a watchdog). On a
    /// line of its own: the VR writes it every round, while the host reads
    /// `vr_sleeping` every time it publishes frames.
    pub heartbeat: AtomicU64,
    _pad_hb: [u8; 56],
    /// Host-written: 1 while the host worker sleeps (the VR must kick).
    pub host_sleeping: AtomicU32,
    _pad1: [u8; 60],
    /// VR-written counters, published by the VR SDK (untrusted: display only).
    pub vr_counters: [AtomicU64; VR_COUNTERS],
}

/// Which ring of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RingId {
    /// Host -> VR, frames received on the vNIC.
    Rx(u16),
    /// VR -> host, frames to send on the vNIC (or dropped).
    Tx(u16),
    /// Host -> VR control messages.
    CtrlIn,
    /// VR -> host control messages.
    CtrlOut,
}

/// Sizes and offsets of one region, derived from a config or a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The config it was computed from.
    pub cfg: RegionConfig,
    /// Offset of the instance blocks.
    pub instances_offset: u64,
    /// Offset of the slot metadata.
    pub meta_offset: u64,
    /// Offset of the rings.
    pub rings_offset: u64,
    /// Offset of the slots.
    pub slots_offset: u64,
    /// Total bytes.
    pub region_bytes: u64,
}

fn align(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

fn range(
    field: &'static str,
    value: u64,
    ok: bool,
    allowed: &'static str,
) -> Result<(), LayoutError> {
    if ok {
        Ok(())
    } else {
        Err(LayoutError::OutOfRange {
            field,
            value,
            allowed,
        })
    }
}

impl Layout {
    /// Lay out a region for `cfg`.
    ///
    /// # Errors
    /// [`LayoutError::OutOfRange`] naming the first field out of range.
    pub fn new(cfg: RegionConfig) -> Result<Self, LayoutError> {
        let c = &cfg;
        range(
            "slot_count",
            c.slot_count.into(),
            (MIN_SLOTS..=MAX_SLOTS).contains(&c.slot_count),
            "2..=65536",
        )?;
        range(
            "slot_bytes",
            c.slot_bytes.into(),
            (256..=MAX_SLOT_BYTES).contains(&c.slot_bytes) && c.slot_bytes.is_multiple_of(64),
            "a multiple of 64 in 256..=65472",
        )?;
        range(
            "headroom",
            c.headroom.into(),
            // Checked: a header read from shared memory may hold any value.
            c.headroom
                .checked_add(64)
                .is_some_and(|end| end <= c.slot_bytes),
            "at most slot_bytes - 64",
        )?;
        range(
            "vnic_count",
            c.vnic_count.into(),
            (1..=MAX_VNICS).contains(&c.vnic_count),
            "1..=64",
        )?;
        range(
            "instance_count",
            c.instance_count.into(),
            (1..=MAX_INSTANCES).contains(&c.instance_count),
            "1..=64",
        )?;
        range(
            "ring_entries",
            c.ring_entries.into(),
            c.ring_entries.is_power_of_two() && (2..=65_536).contains(&c.ring_entries),
            "a power of two in 2..=65536",
        )?;
        range(
            "ctrl_entries",
            c.ctrl_entries.into(),
            c.ctrl_entries.is_power_of_two() && (2..=4096).contains(&c.ctrl_entries),
            "a power of two in 2..=4096",
        )?;
        let instances_offset = align(size_of::<Header>() as u64, CACHE_LINE);
        let meta_offset = align(
            instances_offset + u64::from(c.instance_count) * size_of::<InstanceBlock>() as u64,
            CACHE_LINE,
        );
        let rings_offset = align(
            meta_offset + u64::from(c.slot_count) * size_of::<SlotMeta>() as u64,
            CACHE_LINE,
        );
        let slots_offset = align(
            rings_offset + u64::from(c.instance_count) * Self::instance_rings_bytes(c),
            PAGE,
        );
        let region_bytes = align(
            slots_offset + u64::from(c.slot_count) * u64::from(c.slot_bytes),
            PAGE,
        );
        Ok(Self {
            cfg,
            instances_offset,
            meta_offset,
            rings_offset,
            slots_offset,
            region_bytes,
        })
    }

    fn ring_bytes(entries: u32) -> u64 {
        align(RING_CTL_BYTES + 4 * u64::from(entries), CACHE_LINE)
    }

    fn instance_rings_bytes(c: &RegionConfig) -> u64 {
        2 * u64::from(c.vnic_count) * Self::ring_bytes(c.ring_entries)
            + 2 * Self::ring_bytes(c.ctrl_entries)
    }

    /// The header describing this layout.
    pub fn header(&self) -> Header {
        let c = &self.cfg;
        Header {
            magic: MAGIC,
            version: LAYOUT_VERSION,
            header_bytes: size_of::<Header>() as u32,
            region_bytes: self.region_bytes,
            slot_bytes: c.slot_bytes,
            slot_count: c.slot_count,
            headroom: c.headroom,
            vnic_count: c.vnic_count.into(),
            instance_count: c.instance_count.into(),
            ring_entries: c.ring_entries,
            ctrl_entries: c.ctrl_entries,
            reserved: 0,
            instances_offset: self.instances_offset,
            meta_offset: self.meta_offset,
            rings_offset: self.rings_offset,
            slots_offset: self.slots_offset,
        }
    }

    /// Rebuild the layout from a header read out of a region of
    /// `mapped_bytes` bytes, refusing anything that disagrees.
    ///
    /// # Errors
    /// [`LayoutError::BadMagic`], [`LayoutError::Version`] (naming both
    /// versions), [`LayoutError::OutOfRange`] or [`LayoutError::Inconsistent`].
    pub fn from_header(h: &Header, mapped_bytes: u64) -> Result<Self, LayoutError> {
        Self::from_header_padded(h, mapped_bytes, 1)
    }

    /// As [`Layout::from_header`] for a region whose memory comes in pages
    /// of `page` bytes (huge pages): the mapped size is the layout's size
    /// rounded up to whole pages.
    ///
    /// # Errors
    /// As [`Layout::from_header`].
    pub fn from_header_padded(
        h: &Header,
        mapped_bytes: u64,
        page: u64,
    ) -> Result<Self, LayoutError> {
        if h.magic != MAGIC {
            return Err(LayoutError::BadMagic { found: h.magic });
        }
        if h.version != LAYOUT_VERSION {
            return Err(LayoutError::Version {
                region: h.version,
                ours: LAYOUT_VERSION,
            });
        }
        if h.header_bytes as usize != size_of::<Header>() {
            return Err(LayoutError::Inconsistent("header size"));
        }
        let narrow = |v: u32, f: &'static str| {
            u16::try_from(v).map_err(|_| LayoutError::OutOfRange {
                field: f,
                value: v.into(),
                allowed: "1..=64",
            })
        };
        let layout = Self::new(RegionConfig {
            slot_bytes: h.slot_bytes,
            slot_count: h.slot_count,
            headroom: h.headroom,
            vnic_count: narrow(h.vnic_count, "vnic_count")?,
            instance_count: narrow(h.instance_count, "instance_count")?,
            ring_entries: h.ring_entries,
            ctrl_entries: h.ctrl_entries,
        })?;
        if layout.header() != *h {
            return Err(LayoutError::Inconsistent("offsets do not match the sizes"));
        }
        if layout.region_bytes.next_multiple_of(page.max(1)) != mapped_bytes {
            return Err(LayoutError::Inconsistent(
                "region size differs from the mapped size",
            ));
        }
        Ok(layout)
    }

    /// Offset of an instance's block.
    pub fn instance_offset(&self, instance: u16) -> u64 {
        self.instances_offset + u64::from(instance) * size_of::<InstanceBlock>() as u64
    }

    /// Offset of a ring's control words, and its entry count.
    pub fn ring_offset(&self, instance: u16, ring: RingId) -> (u64, u32) {
        let c = &self.cfg;
        let base = self.rings_offset + u64::from(instance) * Self::instance_rings_bytes(c);
        let data = Self::ring_bytes(c.ring_entries);
        let ctrl = Self::ring_bytes(c.ctrl_entries);
        let vnics = u64::from(c.vnic_count);
        match ring {
            RingId::Rx(v) => (base + 2 * u64::from(v) * data, c.ring_entries),
            RingId::Tx(v) => (base + (2 * u64::from(v) + 1) * data, c.ring_entries),
            RingId::CtrlIn => (base + 2 * vnics * data, c.ctrl_entries),
            RingId::CtrlOut => (base + 2 * vnics * data + ctrl, c.ctrl_entries),
        }
    }

    /// Offset of the `i`th slot's first byte.
    pub fn slot_offset(&self, slot: u32) -> u64 {
        self.slots_offset + u64::from(slot) * u64::from(self.cfg.slot_bytes)
    }

    /// The ring control block size: prod at +0, cons at +64, entries at +128.
    pub const RING_ENTRIES_AT: u64 = RING_CTL_BYTES;
    /// Offset of the consumer index within a ring.
    pub const RING_CONS_AT: u64 = CACHE_LINE;
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn default_layout_round_trips() {
        let l = Layout::new(RegionConfig::default()).unwrap();
        assert_eq!(l.slots_offset % PAGE, 0);
        assert_eq!(Layout::from_header(&l.header(), l.region_bytes).unwrap(), l);
    }

    #[test]
    fn rings_do_not_overlap() {
        let cfg = RegionConfig {
            vnic_count: 3,
            instance_count: 2,
            ring_entries: 8,
            ..RegionConfig::default()
        };
        let l = Layout::new(cfg).unwrap();
        let mut spans = vec![];
        for i in 0..2 {
            for r in [
                RingId::Rx(0),
                RingId::Tx(0),
                RingId::Rx(2),
                RingId::Tx(2),
                RingId::CtrlIn,
                RingId::CtrlOut,
            ] {
                let (off, n) = l.ring_offset(i, r);
                spans.push((off, off + 128 + 4 * u64::from(n)));
            }
        }
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "{w:?}");
        }
        assert!(spans.last().unwrap().1 <= l.slots_offset);
    }

    #[test]
    fn version_mismatch_names_both() {
        let l = Layout::new(RegionConfig::default()).unwrap();
        let mut h = l.header();
        h.version = 99;
        let e = Layout::from_header(&h, l.region_bytes).unwrap_err();
        assert_eq!(
            e,
            LayoutError::Version {
                region: 99,
                ours: LAYOUT_VERSION
            }
        );
        assert!(
            e.to_string().contains("99") && e.to_string().contains(&LAYOUT_VERSION.to_string())
        );
    }

    #[test]
    fn out_of_range_is_named() {
        let default_but = |change: fn(&mut RegionConfig)| {
            let mut cfg = RegionConfig::default();
            change(&mut cfg);
            cfg
        };
        for (cfg, field) in [
            (default_but(|c| c.slot_count = 1), "slot_count"),
            (default_but(|c| c.slot_count = 65_537), "slot_count"),
            (default_but(|c| c.slot_bytes = 1000), "slot_bytes"),
            (default_but(|c| c.ring_entries = 3), "ring_entries"),
            (default_but(|c| c.vnic_count = 0), "vnic_count"),
            (default_but(|c| c.headroom = 2048), "headroom"),
            // From a header in shared memory: must not overflow (a panic in
            // a debug build, accepted after wrapping in a release build).
            (default_but(|c| c.headroom = u32::MAX - 10), "headroom"),
        ] {
            match Layout::new(cfg) {
                Err(LayoutError::OutOfRange { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{cfg:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn tampered_header_is_refused() {
        let l = Layout::new(RegionConfig::default()).unwrap();
        let mut h = l.header();
        h.slots_offset -= 4096;
        assert!(Layout::from_header(&h, l.region_bytes).is_err());
        assert!(Layout::from_header(&l.header(), l.region_bytes - 4096).is_err());
        let huge = l.region_bytes.next_multiple_of(2 << 20);
        assert!(
            Layout::from_header(&l.header(), huge).is_err(),
            "padding only in pages"
        );
        assert!(Layout::from_header_padded(&l.header(), huge, 2 << 20).is_ok());
        assert!(Layout::from_header_padded(&l.header(), huge + (2 << 20), 2 << 20).is_err());
        h = l.header();
        h.magic = 0;
        assert!(matches!(
            Layout::from_header(&h, l.region_bytes),
            Err(LayoutError::BadMagic { .. })
        ));
    }
}
