//! The machine's CPUs and how close each is to the host worker: package
//! and L3 cache, read from sysfs through one fakeable reader.

use crate::confine::parse_cpu_list;

/// The L3 of a CPU whose cache files are missing: all such CPUs count as
/// sharing one L3.
pub const UNKNOWN_L3: usize = usize::MAX;

/// One online CPU and what it shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuInfo {
    /// The CPU number.
    pub cpu: usize,
    /// Its `physical_package_id` (socket).
    pub package: usize,
    /// Its L3, named by the lowest CPU sharing it (or [`UNKNOWN_L3`]).
    pub l3: usize,
}

/// The machine's online CPUs, sorted by number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    cpus: Vec<CpuInfo>,
}

impl Topology {
    /// A topology given by hand (a CPU given twice keeps one entry).
    pub fn from_cpus(mut cpus: Vec<CpuInfo>) -> Self {
        cpus.sort_by_key(|c| c.cpu);
        cpus.dedup_by_key(|c| c.cpu);
        Self { cpus }
    }

    /// This machine's topology, from `/sys/devices/system/cpu`.
    pub fn read() -> Self {
        Self::read_with(|p| std::fs::read_to_string(format!("/sys/devices/system/cpu/{p}")).ok())
    }

    /// The topology as `read` shows it (a path under `/sys/devices/system/cpu`
    /// to its contents). Missing files fall back: the online CPUs to
    /// `0..available_parallelism`, a package to 0, an L3 to [`UNKNOWN_L3`];
    /// so without topology files the machine is one package with one L3.
    pub fn read_with(read: impl Fn(&str) -> Option<String>) -> Self {
        let online = read("online").and_then(|s| parse_cpu_list(s.trim()));
        let online = online.filter(|v| !v.is_empty()).unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, usize::from)).collect()
        });
        let cpus = online.into_iter().map(|cpu| CpuInfo {
            cpu,
            package: read(&format!("cpu{cpu}/topology/physical_package_id"))
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0),
            l3: l3_of(&read, cpu).unwrap_or(UNKNOWN_L3),
        });
        Self::from_cpus(cpus.collect())
    }

    /// The online CPUs.
    pub fn cpus(&self) -> &[CpuInfo] {
        &self.cpus
    }

    /// The order to hand cores to VR instances when the host worker runs on
    /// `host_cpu` (LVRM: sibling cores first): the CPUs sharing its L3, then
    /// the rest of its package, then the others, each group ascending; then
    /// `host_cpu` itself, for when nothing else is free. If `host_cpu` is not
    /// online, all CPUs ascending.
    pub fn affinity_order(&self, host_cpu: usize) -> Vec<usize> {
        let host = self.cpus.iter().find(|c| c.cpu == host_cpu);
        let group = |c: &CpuInfo| match host {
            Some(h) if c.l3 == h.l3 => 0,
            Some(h) if c.package == h.package => 1,
            _ => 2,
        };
        let mut others: Vec<&CpuInfo> = self.cpus.iter().filter(|c| c.cpu != host_cpu).collect();
        others.sort_by_key(|c| (group(c), c.cpu));
        others
            .iter()
            .chain(host.as_slice())
            .map(|c| c.cpu)
            .collect()
    }
}

/// The lowest CPU of the `shared_cpu_list` of `cpu`'s level-3 cache. Cache
/// indexes have no gaps, so the first missing one ends the search.
fn l3_of(read: &impl Fn(&str) -> Option<String>, cpu: usize) -> Option<usize> {
    for i in 0..16 {
        let dir = format!("cpu{cpu}/cache/index{i}");
        if read(&format!("{dir}/level"))?.trim() == "3" {
            let shared = parse_cpu_list(read(&format!("{dir}/shared_cpu_list"))?.trim())?;
            return shared.into_iter().min();
        }
    }
    None
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::collections::HashMap;

    pub(crate) fn cpu(cpu: usize, package: usize, l3: usize) -> CpuInfo {
        CpuInfo { cpu, package, l3 }
    }

    /// Two packages of two L3s of two CPUs each.
    pub(crate) fn two_sockets() -> Topology {
        Topology::from_cpus((0..8).map(|c| cpu(c, c / 4, c / 2 * 2)).collect())
    }

    #[test]
    fn topology_from_sysfs_and_affinity_order() {
        let t = two_sockets();
        assert_eq!(t.affinity_order(0), [1, 2, 3, 4, 5, 6, 7, 0]);
        assert_eq!(t.affinity_order(5), [4, 6, 7, 0, 1, 2, 3, 5]);
        assert_eq!(t.affinity_order(9), [0, 1, 2, 3, 4, 5, 6, 7]);
        let files = HashMap::from([
            ("online", "0-2\n"),
            ("cpu1/topology/physical_package_id", "1\n"),
            ("cpu0/cache/index0/level", "1"),
            ("cpu0/cache/index1/level", "3"),
            ("cpu0/cache/index1/shared_cpu_list", "0,2"),
            ("cpu1/cache/index0/level", "3"),
            ("cpu1/cache/index0/shared_cpu_list", "1"),
        ]);
        let t = Topology::read_with(|p| files.get(p).map(|s| s.to_string()));
        let want = [cpu(0, 0, 0), cpu(1, 1, 1), cpu(2, 0, UNKNOWN_L3)];
        assert_eq!(t.cpus(), want);
        let bare = Topology::read_with(|_| None).cpus().to_vec();
        assert!(!bare.is_empty() && bare.iter().all(|c| (c.package, c.l3) == (0, UNKNOWN_L3)));
        assert!(!Topology::read().cpus().is_empty());
    }
}
