//! What a checked config becomes: the [`Plan`] the daemon builds, with a
//! [`VrPlan`] per VR.

use std::path::PathBuf;

use super::fast::{DataPath, FastKey, PortLimit};
use super::schema::{Config, Driver, GenConf, HostConf, PortRings, port_rings};
use crate::classify::Classifier;
use crate::confine::Confine;
use crate::vrpath::{Guard, PathSpec, Sched};

/// A checked VR, ready to start.
#[derive(Debug, Clone)]
pub struct VrPlan {
    /// Name.
    pub name: String,
    /// Program and arguments (the built-in router: `None`, the caller runs
    /// its own binary's router entry point).
    pub program: Option<(PathBuf, Vec<String>)>,
    /// Port index of each vNIC (a tunnel's: its underlay port).
    pub vnic_ports: Vec<usize>,
    /// The tunnel of each vNIC that is a tunnel endpoint.
    pub vnic_tunnels: Vec<Option<crate::tunnel::Tunnel>>,
    /// The VLAN of each vNIC that is an 802.1Q sub-interface of its port.
    pub vnic_vlans: Vec<Option<u16>>,
    /// Pool slots.
    pub slots: u32,
    /// Core (of a single instance).
    pub cpu: Option<usize>,
    /// Instances started (with the `dynamic` policy, its minimum).
    pub instances: u16,
    /// How many instances it runs: `instances`, or following the load.
    pub scale: crate::alloc::ScalePolicy,
    /// Its instances' cores come from the host's core budget
    /// ([`HostConf::core_budget`]), one each, rather than `cpus` or `cpu`.
    pub placed: bool,
    /// Core of each instance slot, when pinned by the config (one per
    /// slot: `instance_slots()`).
    pub instance_cpus: Vec<Option<usize>>,
    /// How frames are shared among its instances.
    pub balance: crate::balance::Policy,
    /// Hello config (JSON).
    pub config: serde_json::Value,
    /// Quarantine and watchdog.
    pub guard: Guard,
    /// Start it again when it goes down (not when quarantined).
    pub restart: bool,
    /// How the worker serves it.
    pub sched: Sched,
    /// How its process is confined.
    pub confine: Confine,
    /// Where its frames go when the host has a fast path.
    pub path: DataPath,
    /// Its select-table keys, or why the fast path cannot carry it.
    pub fast: Result<Vec<FastKey>, String>,
    /// Its `rate_limit_pps` as the token bucket of its select entries
    /// (a host with a fast path that carries the VR); `None` otherwise,
    /// and then the worker applies the limit (`sched`).
    pub port_limit: Option<PortLimit>,
    /// `path = "auto"`: its load policy (`path` is then where it is now).
    pub auto: Option<super::auto::AutoPath>,
    /// Its control plane (`control_plane`), whose TAP ports are the
    /// last of `vnic_ports`.
    pub control: Option<super::ControlPlan>,
}

impl VrPlan {
    /// Instance slots of its region: its fixed count, or its maximum.
    pub fn instance_slots(&self) -> u16 {
        match self.scale {
            crate::alloc::ScalePolicy::Fixed(n) => n,
            crate::alloc::ScalePolicy::Dynamic(d) => d.max,
        }
    }

    /// Its data path: a region of its slots (rings that hold them all)
    /// for its vNICs and [instance slots](VrPlan::instance_slots), shared,
    /// guarded and served as it says.
    pub fn path_spec(&self) -> PathSpec {
        PathSpec {
            instances: self.instance_slots(),
            balance: self.balance,
            guard: self.guard,
            sched: self.sched,
            tunnels: self.vnic_tunnels.clone(),
            vlans: self.vnic_vlans.clone(),
            // A tap VR's data vNICs: their frames come back on its TAPs.
            loop_vnics: match &self.control {
                Some(c) if c.data_plane => c.taps.len() as u16,
                _ => 0,
            },
            // A pool counts against the VR's memory limit: it grows in
            // the VR's cgroup (see `crate::pool`).
            pool_initial: self.confine.memory.map(|_| POOL_INITIAL.min(self.slots)),
            ..PathSpec::new(&self.name, self.vnic_ports.clone(), self.slots)
        }
    }
}

/// Slots in use at the start in the pool of a VR with a memory limit (2
/// MiB of 2 KiB slots); the rest grow with its load.
pub const POOL_INITIAL: u32 = 1024;

/// A checked config: what the daemon will build.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Ports: (name, driver, interface; empty for `mem` and `null`).
    pub ports: Vec<(String, Driver, String)>,
    /// What each `mem` port generates (`None` for other drivers).
    pub gens: Vec<Option<GenConf>>,
    /// Each port's ring sizes (set only for `af_xdp`).
    pub rings: Vec<PortRings>,
    /// Each port's VR (index into `vrs`) when it is dedicated to it
    /// (`ports[].dedicated`): its UMEM is that VR's pool.
    pub dedicated: Vec<Option<usize>>,
    /// VRs.
    pub vrs: Vec<VrPlan>,
    /// Compiled classifier.
    pub classifier: Classifier,
    /// Host settings.
    pub host: HostConf,
    /// This host's part in a cluster, if any.
    pub cluster: Option<super::cluster::ClusterPlan>,
}

impl Plan {
    /// The plan of a checked config: its ports as they are, its checked
    /// VRs and compiled classifier.
    pub(super) fn new(
        cfg: &Config,
        vrs: Vec<VrPlan>,
        classifier: Classifier,
        ctl_ports: Vec<(String, Driver, String)>,
    ) -> Self {
        let port = |p: &super::PortConfig| {
            let interface = p.interface.as_ref().map(|i| i.get_ref().clone());
            (
                p.name.get_ref().clone(),
                p.driver,
                interface.unwrap_or_default(),
            )
        };
        let gen_of = |p: &super::PortConfig| match p.driver {
            Driver::Mem => Some(
                p.traffic
                    .as_ref()
                    .map(|g| g.get_ref().clone())
                    .unwrap_or_default(),
            ),
            _ => None,
        };
        let n = ctl_ports.len();
        Plan {
            ports: cfg.ports.iter().map(port).chain(ctl_ports).collect(),
            rings: (cfg.ports.iter().map(port_rings))
                .chain(std::iter::repeat_n(PortRings::default(), n))
                .collect(),
            gens: (cfg.ports.iter().map(gen_of))
                .chain(std::iter::repeat_n(None, n))
                .collect(),
            dedicated: vec![None; cfg.ports.len() + n],
            vrs,
            classifier,
            host: cfg.host.clone(),
            cluster: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::alloc::{DynamicPolicy, ScalePolicy};
    use crate::config::tests::{GOOD, parse};

    #[test]
    fn a_plan_keeps_the_ports_as_they_are() {
        let src = format!(
            "{GOOD}\n[[ports]]\nname = \"gen\"\ndriver = \"mem\"\ntraffic = {{ pps = 10 }}\n\n[[ports]]\nname = \"sink\"\ndriver = \"null\"\n"
        );
        let p = parse(&src).unwrap();
        let names: Vec<_> = p
            .ports
            .iter()
            .map(|(n, _, i)| (n.as_str(), i.as_str()))
            .collect();
        assert_eq!(
            names,
            [("p0", "veth0"), ("p1", "veth1"), ("gen", ""), ("sink", "")]
        );
        assert_eq!(p.gens[..2], [None, None]);
        assert_eq!(p.gens[2].as_ref().map(|g| g.pps), Some(Some(10)));
        assert_eq!(p.gens[3], None, "a null port generates nothing");
        assert_eq!(p.rings.len(), 4);
    }

    #[test]
    fn instance_slots_are_the_count_or_the_most() {
        let mut v = parse(GOOD).unwrap().vrs.remove(0);
        assert_eq!(v.instance_slots(), 1);
        v.scale = ScalePolicy::Fixed(3);
        assert_eq!(v.instance_slots(), 3);
        v.scale = ScalePolicy::Dynamic(DynamicPolicy::new(10.0, 5.0, 7));
        assert_eq!(v.instance_slots(), 7);
    }

    #[test]
    fn a_vr_s_path_spec_is_its_plan_s_shape_and_settings() {
        let v = parse(GOOD).unwrap().vrs.remove(0);
        let s = v.path_spec();
        assert_eq!(s.name, v.name);
        assert_eq!(s.vnic_ports, v.vnic_ports);
        assert_eq!(s.slots, v.slots);
        assert_eq!(
            s.ring_entries,
            vrhost_shm::RegionConfig::ring_entries_for(v.slots)
        );
        assert_eq!(s.instances, v.instance_slots());
        assert_eq!((s.balance, s.guard, s.sched), (v.balance, v.guard, v.sched));
        assert_eq!(s.loop_vnics, 0, "not a tap VR");
    }
}
