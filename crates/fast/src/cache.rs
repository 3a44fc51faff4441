//! The generations that keep the program's per-CPU caches of the select
//! table and the neighbours valid (`ebpf/xdp_cache.h`): user space raises
//! a table's generation after each change of that table, and a CPU uses
//! a cached answer only while the generation it was made at is current.

use aya::Ebpf;
use aya::maps::{Array, MapData};

use crate::{FastError, map_err, take};

pub(crate) const FAST_GENS: &str = "fast_gens";

/// A table whose answers the program caches.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cached {
    Select = 0,
    Neighbours = 1,
}

/// The `fast_gens` array and the generations written to it.
pub(crate) struct Gens {
    map: Array<MapData, u64>,
    now: [u64; 2],
}

impl Gens {
    pub(crate) fn load(ebpf: &mut Ebpf) -> Result<Self, FastError> {
        Ok(Self {
            map: take(ebpf, FAST_GENS)?,
            now: [0; 2],
        })
    }

    /// After a change of `table` (its map written): the program's cached
    /// answers from it are no longer used. Each generation is its own
    /// array element, written whole (8 bytes), so a frame reads the old or
    /// the new one.
    pub(crate) fn raise(&mut self, table: Cached) -> Result<(), FastError> {
        let i = table as usize;
        self.now[i] = self.now[i].wrapping_add(1);
        self.map
            .set(i as u32, self.now[i], 0)
            .map_err(map_err(FAST_GENS, "set"))
    }
}
