//! Spreading the fast path's forwarding over CPUs ([`FastPath::spread`]):
//! the CPUs in the `fast_switch` array ([`crate::cache::Switch`]) and the
//! `cpu_map` CPUMAP of `ebpf/xdp_router.c`,
//! whose entries run `xdp_router_cpu`. See the program's header,
//! "Spreading".

use std::sync::Arc;

use aya::Ebpf;
use aya::maps::{CpuMap, MapData};

use crate::cache::Switch;
use crate::load::load_program;
use crate::{FastError, FastPath, abi, take};

pub(crate) const CPU_MAP: &str = "cpu_map";
/// The program run on a CPU of the spread.
pub(crate) const CPU_PROGRAM: &str = "xdp_router_cpu";
/// Frames each CPU's queue holds (the kernel's default for a cpumap).
const QUEUE: u32 = 2048;

/// The spread's maps.
pub(crate) struct Cpus {
    /// Where the CPUs go (its `ncpus` and `cpu` fields are this one's).
    switch: Arc<Switch>,
    map: CpuMap<MapData>,
    /// The CPUs given, in order.
    now: Vec<u32>,
}

impl Cpus {
    /// Load `xdp_router_cpu` (attach type cpumap) and take the maps.
    pub(crate) fn load(ebpf: &mut Ebpf, switch: Arc<Switch>) -> Result<Self, FastError> {
        load_program(ebpf, CPU_PROGRAM)?;
        Ok(Self {
            switch,
            map: take(ebpf, CPU_MAP)?,
            now: Vec::new(),
        })
    }
}

impl FastPath {
    /// Forward on `cpus` (empty: in place, on the CPU that received the
    /// frame, as after loading): frames the fast path forwards are handed
    /// to one of them by a hash of their addresses, so that a flow keeps
    /// its CPU and its order, and sent from there.
    ///
    /// # Errors
    /// [`FastError::Config`] for more than 15 CPUs, one given twice, or
    /// one that is not online; [`FastError::XdpMap`], [`FastError::Map`].
    pub fn spread(&mut self, cpus: &[u32]) -> Result<(), FastError> {
        let max = abi::MAX_FAST_CPUS;
        if cpus.len() > max {
            return Err(FastError::Config {
                why: "spread: at most 15 CPUs",
            });
        }
        if (1..cpus.len()).any(|i| cpus[..i].contains(&cpus[i])) {
            return Err(FastError::Config {
                why: "spread: a CPU given twice",
            });
        }
        // Online, not this thread's affinity (a daemon pinned to one core
        // spreads over others).
        let online = crate::load::online_cpus()?;
        let room = self.cpus.map.len();
        if cpus.iter().any(|&c| c >= room || !online.contains(&c)) {
            return Err(FastError::Config {
                why: "spread: a CPU that is not online (or above 63)",
            });
        }
        let fd = crate::load::program_fd(&mut self.ebpf, CPU_PROGRAM)?;
        for &c in cpus {
            self.cpus
                .map
                .set(c, QUEUE, Some(&fd), 0)
                .map_err(|e| FastError::XdpMap {
                    map: CPU_MAP,
                    op: "set",
                    source: Box::new(e),
                })?;
        }
        self.cpus.switch.set_cpus(cpus);
        self.cpus.now = cpus.to_vec();
        Ok(())
    }

    /// The CPUs the forwarding is spread over (empty: none).
    pub fn spread_cpus(&self) -> &[u32] {
        &self.cpus.now
    }
}
