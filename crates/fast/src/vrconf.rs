//! The `vrs` array of `ebpf/xdp_router.c` (VR id -> `struct vr_conf`),
//! mmapable and written through this process's mapping of it ([`Vrs`]).
//!
//! A VR's value has two writers: [`crate::FastPath::set_vr`] and
//! `remove_vr` (its mode, fast flag and own addresses) and the FIB
//! (`crate::fib`: its table 0's slot, which was the array `fib_vrs`, a
//! second lookup per frame). Neither writes the value whole: each stores
//! only its own fields, each with one atomic 4-byte store, so neither
//! clobbers the other's and a frame reads each field's old or new value
//! (a VR's config changed while a frame reads it may be seen part old,
//! part new, as before, when the value was copied without a lock).

use std::mem::offset_of;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use aya::Ebpf;
use aya::maps::MapData;

use crate::abi::{VR_INLINE_ADDRS, VrConf};
use crate::mapped::Mapped;
use crate::{FastError, VRS};

/// Words of a VR's value (its size is a multiple of 8, the array's
/// stride).
const WORDS: usize = size_of::<VrConf>() / 4;

/// The `vrs` array, mapped.
pub(crate) struct Vrs {
    map: Mapped,
    max: u32,
    // The map behind the mapping (which holds it too).
    _data: MapData,
}

impl Vrs {
    pub(crate) fn load(ebpf: &mut Ebpf, max_vrs: u32) -> Result<Arc<Self>, FastError> {
        let data = crate::fib::take_array(ebpf, VRS)?;
        let map = Mapped::new(data.fd().as_fd(), max_vrs as usize * WORDS).map_err(|source| {
            FastError::Os {
                call: "mmap vrs",
                source,
            }
        })?;
        Ok(Arc::new(Vrs {
            map,
            max: max_vrs,
            _data: data,
        }))
    }

    /// The word at byte `offset` of VR `vr`'s value.
    fn word(&self, vr: u32, offset: usize) -> Result<&AtomicU32, FastError> {
        let range = || FastError::VrRange { vr, max: self.max };
        let i = (vr as usize).checked_mul(WORDS).ok_or_else(range)? + offset / 4;
        self.map.values().get(i).ok_or_else(range)
    }

    fn store(&self, vr: u32, offset: usize, v: u32) -> Result<(), FastError> {
        self.word(vr, offset)?.store(v, Ordering::Release);
        Ok(())
    }

    /// VR `vr`'s mode and own addresses, then its fast flag (all but
    /// `table`); `conf.fast` 0 (remove_vr) is stored first, so a frame
    /// never takes the fast path on a half-cleared config.
    pub(crate) fn set_conf(&self, vr: u32, conf: &VrConf) -> Result<(), FastError> {
        if conf.fast == 0 {
            self.store(vr, offset_of!(VrConf, fast), 0)?;
        }
        let addr = offset_of!(VrConf, addr);
        for i in 0..VR_INLINE_ADDRS {
            self.store(vr, addr + 4 * i, u32::from_ne_bytes(conf.addr[i]))?;
        }
        self.store(vr, offset_of!(VrConf, naddrs), conf.naddrs)?;
        self.store(vr, offset_of!(VrConf, mode), conf.mode)?;
        self.store(vr, offset_of!(VrConf, fast), conf.fast)
    }

    /// VR `vr`'s table 0: 1 + its slot (0: none).
    pub(crate) fn set_table(&self, vr: u32, slot_plus_one: u32) -> Result<(), FastError> {
        self.store(vr, offset_of!(VrConf, table), slot_plus_one)
    }
}
