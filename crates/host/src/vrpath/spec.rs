//! What a VR's data path is made of, and the one way to assemble it: the
//! shape of its region ([`PathSpec::region_config`],
//! [`PathSpec::create_region`]) and how the host serves it
//! ([`VrPath::assemble`]). The daemon builds a spec from its config
//! ([`crate::config::VrPlan::path_spec`]); benches and tests write one.

use vrhost_shm::{Doorbell, Region, RegionConfig, RegionError};

use super::{Backend, Guard, Sched, VrPath};
use crate::balance::Policy;
use crate::hugepages::HugePages;

/// A VR's data path: its region's shape, where its vNICs send, and how the
/// host shares, guards and serves it.
#[derive(Debug, Clone, PartialEq)]
pub struct PathSpec {
    /// VR name (also the region's).
    pub name: String,
    /// Out port of each vNIC; the region has one vNIC per entry.
    pub vnic_ports: Vec<usize>,
    /// Pool slots.
    pub slots: u32,
    /// Entries per data ring (power of two).
    pub ring_entries: u32,
    /// Instance slots of the region.
    pub instances: u16,
    /// How frames are shared among its instances.
    pub balance: Policy,
    /// Quarantine and watchdog.
    pub guard: Guard,
    /// How the worker serves it.
    pub sched: Sched,
    /// The tunnel of each vNIC that is a tunnel endpoint (empty, or
    /// `None`: a plain vNIC).
    pub tunnels: Vec<Option<crate::tunnel::Tunnel>>,
    /// The VLAN of each vNIC that is an 802.1Q sub-interface of its port
    /// (empty, or `None`: untagged).
    pub vlans: Vec<Option<u16>>,
    /// vNICs `0..loop_vnics` feed a loop back into the VR (a tap VR's data
    /// vNICs, see [`VrPath::set_loop`]); 0: none.
    pub loop_vnics: u16,
    /// Slots in use at the start when the pool grows with its load
    /// ([`VrPath::start_small`]); `None`: all of them.
    pub pool_initial: Option<u32>,
    /// Where its region gets its pages ([`crate::hugepages`]).
    pub pages: HugePages,
}

impl PathSpec {
    /// A VR `name` of one instance with a pool of `slots`, rings that hold
    /// every slot ([`RegionConfig::ring_entries_for`]), and the default
    /// balance, guard and schedule.
    pub fn new(name: &str, vnic_ports: Vec<usize>, slots: u32) -> Self {
        Self {
            name: name.to_string(),
            vnic_ports,
            slots,
            ring_entries: RegionConfig::ring_entries_for(slots),
            instances: 1,
            balance: Policy::default(),
            guard: Guard::default(),
            sched: Sched::default(),
            tunnels: Vec::new(),
            vlans: Vec::new(),
            loop_vnics: 0,
            pool_initial: None,
            pages: HugePages::Off,
        }
    }

    /// The region it asks for (other fields: [`RegionConfig::default`]).
    ///
    /// # Panics
    /// If it has more than `u16::MAX` vNICs.
    pub fn region_config(&self) -> RegionConfig {
        RegionConfig {
            slot_count: self.slots,
            ring_entries: self.ring_entries,
            vnic_count: u16::try_from(self.vnic_ports.len()).expect("at most u16::MAX vNICs"),
            instance_count: self.instances,
            ..RegionConfig::default()
        }
    }

    /// Create its region ([`PathSpec::region_config`]) in the pages
    /// [`PathSpec::pages`] asks for; a pool that grows in the VR's memory
    /// cgroup ([`PathSpec::pool_initial`]) keeps ordinary pages under
    /// `auto` ([`HugePages::create_region`]).
    ///
    /// # Errors
    /// As [`Region::create`]; with `required` and no huge pages free,
    /// [`RegionError::NoHugePages`].
    pub fn create_region(&self) -> Result<Region, RegionError> {
        self.pages.create_region(
            &self.name,
            self.region_config(),
            self.pool_initial.is_some(),
        )
    }
}

impl VrPath {
    /// The data path of `spec` over `region` (normally
    /// [`PathSpec::create_region`]): [`VrPath::new`] with its vNIC ports,
    /// then its balance, guard and schedule set.
    pub fn assemble(
        spec: &PathSpec,
        region: Region,
        backend: Backend,
        bells: Vec<Doorbell>,
    ) -> Self {
        let mut path = VrPath::new(&spec.name, region, spec.vnic_ports.clone(), backend, bells);
        path.set_balance(spec.balance);
        path.set_guard(spec.guard);
        path.set_sched(spec.sched);
        path.set_tunnels(&spec.tunnels);
        path.set_vlans(&spec.vlans);
        path.set_loop(spec.loop_vnics);
        if let Some(n) = spec.pool_initial {
            path.start_small(n);
        }
        path
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_new_spec_is_one_instance_with_rings_that_hold_the_pool() {
        let s = PathSpec::new("a", vec![0, 1, 2], 300);
        let cfg = s.region_config();
        assert_eq!(cfg.slot_count, 300);
        assert_eq!(cfg.ring_entries, 512);
        assert_eq!(cfg.vnic_count, 3);
        assert_eq!(cfg.instance_count, 1);
        let d = RegionConfig::default();
        assert_eq!(
            (cfg.slot_bytes, cfg.headroom, cfg.ctrl_entries),
            (d.slot_bytes, d.headroom, d.ctrl_entries)
        );
    }

    #[test]
    fn an_assembled_path_has_the_spec_s_shape_and_settings() {
        let spec = PathSpec {
            ring_entries: 64,
            instances: 2,
            balance: Policy::RoundRobin,
            guard: Guard {
                quarantine_after: Some(3),
                watchdog: Some(Duration::from_secs(1)),
            },
            sched: Sched {
                weight: 7,
                high_priority: true,
                ..Sched::default()
            },
            ..PathSpec::new("assembled", vec![1, 0], 128)
        };
        let region = spec.create_region().unwrap();
        assert_eq!(region.layout().cfg, spec.region_config());
        let path = VrPath::assemble(&spec, region, Backend::External, Vec::new());
        assert_eq!(path.name(), "assembled");
        assert_eq!(path.vnic_ports(), [1, 0]);
        assert_eq!(path.pool_slots(), 128);
        assert_eq!(path.balance(), Policy::RoundRobin);
        assert_eq!(path.guard(), spec.guard);
        assert_eq!(path.sched(), spec.sched);
        assert!(path.is_up());
    }
}
