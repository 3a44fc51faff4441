//! [`CounterProbe`]: a running fast path's per-VR counters, read by
//! another process (root) from the kernel's map, found through the XDP
//! program attached to a port (the id `ip link` reports). The benchmarks
//! use it to see the first frame a path forwards after a move, without
//! asking the daemon.

use aya::maps::{Map, MapData, MapInfo, PerCpuArray};

use crate::{COUNTERS, FastCounters, FastError, abi, map_err};

/// The counters map of one loaded fast path.
pub struct CounterProbe {
    map: PerCpuArray<MapData, abi::CountersValue>,
    /// The program's `unselected` count, if it has one.
    unselected: Option<PerCpuArray<MapData, u64>>,
}

impl std::fmt::Debug for CounterProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CounterProbe").finish_non_exhaustive()
    }
}

fn not_ours(why: &'static str) -> FastError {
    FastError::Config { why }
}

impl CounterProbe {
    /// The `counters` map of the loaded program `prog_id` (the fast path's
    /// program attached to a port).
    ///
    /// # Errors
    /// [`FastError::Config`] if the program has no map named `counters`
    /// of the fast path's layout; [`FastError::Map`] (no such program or
    /// map, not root).
    pub fn of_program(prog_id: u32) -> Result<Self, FastError> {
        let prog_err = |step| {
            move |e| FastError::Program {
                program: "attached program",
                step,
                source: Box::new(e),
            }
        };
        let info = aya::programs::loaded_programs()
            .filter_map(Result::ok)
            .find(|p| p.id() == prog_id)
            .ok_or_else(|| not_ours("no loaded program has that id"))?;
        let ids = info
            .map_ids()
            .map_err(prog_err("map ids"))?
            .unwrap_or_default();
        let (mut map, mut unselected) = (None, None);
        for id in ids {
            let name = MapInfo::from_id(id)
                .map_err(map_err(COUNTERS, "info by id"))?
                .name_as_str()
                .map(String::from);
            match name.as_deref() {
                Some(COUNTERS) => {
                    let data = MapData::from_id(id).map_err(map_err(COUNTERS, "open by id"))?;
                    map = Some(PerCpuArray::try_from(Map::PerCpuArray(data)).map_err(|_| {
                        not_ours("the program's counters map is not the fast path's")
                    })?);
                }
                Some(crate::UNSELECTED) => {
                    let data = MapData::from_id(id).map_err(map_err(COUNTERS, "open by id"))?;
                    unselected = PerCpuArray::try_from(Map::PerCpuArray(data)).ok();
                }
                _ => {}
            }
        }
        match map {
            Some(map) => Ok(Self { map, unselected }),
            None => Err(not_ours(
                "the program has no counters map: not the fast path",
            )),
        }
    }

    /// Frames the program found no select entry for (summed over the
    /// CPUs; 0 if it has no such count).
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn unselected(&self) -> Result<u64, FastError> {
        let Some(m) = &self.unselected else {
            return Ok(0);
        };
        let per_cpu = m.get(&0, 0).map_err(map_err(crate::UNSELECTED, "get"))?;
        Ok(per_cpu.iter().fold(0u64, |a, v| a.wrapping_add(*v)))
    }

    /// The counters of VR id `vr`, summed over the CPUs.
    ///
    /// # Errors
    /// [`FastError::Map`] (`vr` out of range).
    pub fn counters(&self, vr: u32) -> Result<FastCounters, FastError> {
        sum(&self.map, vr)
    }

    /// VR ids up to `max` with frames received (`rx` > 0).
    ///
    /// # Errors
    /// As [`CounterProbe::counters`].
    pub fn active(&self, max: u32) -> Result<Vec<u32>, FastError> {
        let mut v = Vec::new();
        for vr in 0..max.min(self.map.len()) {
            if self.counters(vr)?.rx > 0 {
                v.push(vr);
            }
        }
        Ok(v)
    }
}

/// VR `vr`'s counters in `map`, summed over the CPUs.
pub(crate) fn sum(
    map: &PerCpuArray<MapData, abi::CountersValue>,
    vr: u32,
) -> Result<FastCounters, FastError> {
    let per_cpu = map.get(&vr, 0).map_err(map_err(COUNTERS, "get"))?;
    let mut sum = [0u64; abi::COUNTERS];
    for cpu in per_cpu.iter() {
        for (s, v) in sum.iter_mut().zip(cpu.0) {
            *s = s.wrapping_add(v);
        }
    }
    Ok(FastCounters::from_words(&sum))
}
