//! What every frame reads besides its own entries (`ebpf/xdp_router.c`'s
//! `fast_switch`: one mmapable array value, one lookup), and the
//! generations in it that keep the program's per-CPU caches of the select
//! table and the neighbours valid (`ebpf/xdp_cache.h`): user space raises
//! a table's generation after each change of that table, and a CPU uses
//! a cached answer only while the generation it was made at is current.
//!
//! The value has three writers: [`Gens`] (the generations), the tunnels
//! (`crate::tunnel`: how many are set) and the spread (`crate::spread`:
//! its CPUs). None writes the value whole (no `bpf_map_update_elem`):
//! each stores only its own fields, each field with one atomic store
//! through this process's mapping of the array ([`Switch`]), so a writer
//! cannot clobber another's field and a frame reads each field's old or
//! new value. (All three are also behind `&mut FastPath`, one thread at a
//! time; the stores would not need that.)

use std::mem::offset_of;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use aya::Ebpf;
use aya::maps::MapData;

use crate::FastError;
use crate::abi::{self, FastSwitch};
use crate::mapped::Mapped;

pub(crate) const FAST_SWITCH: &str = "fast_switch";

/// The `fast_switch` array's value, mapped.
pub(crate) struct Switch {
    map: Mapped,
    // The map behind the mapping (which holds it too).
    _data: MapData,
}

impl Switch {
    pub(crate) fn load(ebpf: &mut Ebpf) -> Result<Arc<Self>, FastError> {
        let data = crate::fib::take_array(ebpf, FAST_SWITCH)?;
        let words = size_of::<FastSwitch>() / 4;
        let map = Mapped::new(data.fd().as_fd(), words).map_err(|source| FastError::Os {
            call: "mmap fast_switch",
            source,
        })?;
        Ok(Arc::new(Switch { map, _data: data }))
    }

    /// Store the `u32` field at byte `offset`.
    fn store(&self, offset: usize, v: u32) {
        self.map.values()[offset / 4].store(v, Ordering::Release);
    }

    /// How many tunnels are set (0: the program looks none up).
    pub(crate) fn set_tunnels(&self, n: u32) {
        self.store(offset_of!(FastSwitch, tunnels), n);
    }

    /// The CPUs forwarding is spread over (at most
    /// [`abi::MAX_FAST_CPUS`]; the caller checks): a frame reading the
    /// count, then a CPU under it, sees only CPUs of the old or the new
    /// list (growing: the CPUs before the count; shrinking: the count
    /// first). The entries past the count are zeroed, as before.
    pub(crate) fn set_cpus(&self, cpus: &[u32]) {
        let count = cpus.len().min(abi::MAX_FAST_CPUS);
        let ncpus = offset_of!(FastSwitch, ncpus);
        let old = self.map.values()[ncpus / 4].load(Ordering::Acquire) as usize;
        if count < old {
            self.store(ncpus, count as u32);
        }
        let base = offset_of!(FastSwitch, cpu);
        for i in 0..abi::MAX_FAST_CPUS {
            self.store(base + 4 * i, cpus.get(i).copied().unwrap_or(0));
        }
        if count >= old {
            self.store(ncpus, count as u32);
        }
    }

    /// Store table `i`'s generation (8 bytes, one store).
    fn set_generation(&self, i: usize, v: u64) {
        let at = offset_of!(FastSwitch, generation) / 8 + i;
        self.map.values64()[at].store(v, Ordering::Release);
    }
}

/// A table whose answers the program caches.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cached {
    Select = 0,
    Neighbours = 1,
}

/// The generations written to the switch.
pub(crate) struct Gens {
    switch: Arc<Switch>,
    now: [u64; 2],
}

impl Gens {
    pub(crate) fn new(switch: Arc<Switch>) -> Self {
        Self {
            switch,
            now: [0; 2],
        }
    }

    /// After a change of `table` (its map written): the program's cached
    /// answers from it are no longer used. Each generation is its own
    /// 8-byte field, stored whole, so a frame reads the old or the new
    /// one.
    pub(crate) fn raise(&mut self, table: Cached) -> Result<(), FastError> {
        let i = table as usize;
        self.now[i] = self.now[i].wrapping_add(1);
        self.switch.set_generation(i, self.now[i]);
        Ok(())
    }
}
