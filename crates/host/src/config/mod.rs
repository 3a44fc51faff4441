//! The daemon's declarative configuration: ports, VRs and classifier rules.
//!
//! The whole file is parsed and checked before anything is applied; every
//! error names the file, the line and the field (`vrhost.toml:12:
//! vrs[0].vnics[1].port: no port "p9"`). A commented example is
//! `lab/default-vrhost.toml` in the repository.
//!
//! What a VR does with its config is the VR's business: for the built-in
//! router the daemon builds a [`RouterConfig`] from the VR's vNICs (MAC and
//! addresses) and its `[vrs.router]` table, and checks it by building the
//! router once; a custom program gets `[vrs.config]` as JSON in its hello.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;
use vrhost_vr::proto::PollConfig;
use vrhost_vr::router::{Router, RouterConfig};

use crate::classify::{Classifier, Match, Rule};
use crate::confine::Confine;
use crate::vrpath::{Guard, Sched};

/// A config that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("{file}: {err}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        err: std::io::Error,
    },
    /// Not TOML, or not the schema (toml's message names line and column).
    #[error("{file}: {msg}")]
    Parse {
        /// The file.
        file: String,
        /// What is wrong.
        msg: String,
    },
    /// A field has a bad value.
    #[error("{file}:{line}: {field}: {msg}")]
    Field {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// Which field.
        field: String,
        /// What is wrong.
        msg: String,
    },
}

/// A port driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Driver {
    /// AF_XDP socket(s) fed by an XDP program.
    AfXdp,
    /// AF_PACKET with TPACKET_V3 mmap rings.
    AfPacket,
    /// A raw socket, one system call per frame (the baseline).
    Socket,
    /// A TAP device vrhost creates.
    Tap,
    /// A frame generator in memory (LVRM's main-memory adapter): no
    /// interface; what it generates is its `gen` table. Frames sent to it
    /// are counted and discarded.
    Mem,
    /// A sink in memory: counts and discards what is sent to it.
    Null,
}

impl Driver {
    /// The name used in the config.
    pub fn name(self) -> &'static str {
        match self {
            Driver::AfXdp => "af_xdp",
            Driver::AfPacket => "af_packet",
            Driver::Socket => "socket",
            Driver::Tap => "tap",
            Driver::Mem => "mem",
            Driver::Null => "null",
        }
    }
}

/// A port: a Linux interface and the driver that moves its frames.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Name used by vNICs and rules.
    pub name: Spanned<String>,
    /// Driver.
    pub driver: Driver,
    /// Interface (in the daemon's network namespace); not for `mem` and
    /// `null`.
    #[serde(default)]
    pub interface: Option<Spanned<String>>,
    /// What a `mem` port generates (its `traffic` table).
    #[serde(default)]
    pub traffic: Option<Spanned<GenConf>>,
    /// `af_xdp`: descriptors in each of the socket's four rings (a power
    /// of two, 64..=16384; default 2048).
    #[serde(default)]
    pub ring_size: Option<Spanned<u32>>,
    /// `af_xdp`: UMEM frames of 2048 bytes per queue, half of them (up to
    /// `ring_size`) for receiving (default 4096).
    #[serde(default)]
    pub frames: Option<Spanned<u32>>,
}

/// The ring sizes of an `af_xdp` port (`None`: the driver's default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortRings {
    /// Descriptors per ring.
    pub ring_size: Option<u32>,
    /// UMEM frames per queue.
    pub frames: Option<u32>,
}

impl PortRings {
    /// The AF_XDP socket config these sizes give.
    pub fn af_xdp(&self) -> vrhost_io::af_xdp::AfXdpConfig {
        let d = vrhost_io::af_xdp::AfXdpConfig::default();
        vrhost_io::af_xdp::AfXdpConfig {
            ring_size: self.ring_size.unwrap_or(d.ring_size),
            frames: self.frames.unwrap_or(d.frames),
            ..d
        }
    }
}

/// What a `mem` port generates: UDP/IPv4 frames.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GenConf {
    /// Frame length without FCS, 64..=1518.
    pub frame_bytes: usize,
    /// Destination prefixes: each frame goes to a random address of a
    /// random one of them.
    pub dst: Vec<String>,
    /// Source address.
    pub src: String,
    /// Destination MAC (the VR vNIC's).
    pub dst_mac: String,
    /// Frames per second (none: as fast as the worker takes them).
    pub pps: Option<u64>,
    /// Stop after this many frames.
    pub limit: Option<u64>,
    /// Seed of the destination choice.
    pub seed: u64,
}

impl Default for GenConf {
    fn default() -> Self {
        Self {
            frame_bytes: 64,
            dst: vec!["10.1.2.3/32".into()],
            src: "10.0.0.1".into(),
            dst_mac: "02:00:00:00:00:02".into(),
            pps: None,
            limit: None,
            seed: 0x5eed,
        }
    }
}

impl GenConf {
    /// The generator's config.
    ///
    /// # Errors
    /// A bad prefix, address or MAC, or a frame size out of range.
    pub fn mem_config(&self) -> Result<vrhost_io::mem::MemPortConfig, String> {
        use vrhost_io::mem::{DstMode, MemPortConfig};
        let dst = self
            .dst
            .iter()
            .map(|p| vrhost_vr::router::parse_prefix(p))
            .collect::<Result<Vec<_>, _>>()?;
        let cfg = MemPortConfig {
            frame_bytes: self.frame_bytes,
            dst: DstMode::Prefixes(dst),
            src_ips: vec![
                self.src
                    .parse()
                    .map_err(|_| format!("src {:?}: not an IPv4 address", self.src))?,
            ],
            dst_mac: vrhost_packet::MacAddr(parse_mac(&self.dst_mac)?),
            limit: self.limit,
            seed: self.seed,
            pps: self.pps,
            ..MemPortConfig::default()
        };
        cfg.validate().map_err(|e| e.to_string())?;
        Ok(cfg)
    }
}

/// What runs a VR.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VrKind {
    /// The built-in IPv4 router.
    #[default]
    Router,
    /// A custom VR program linked with the VR SDK.
    Program,
}

/// One vNIC of a VR.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VnicConf {
    /// The port its frames leave by.
    pub port: Spanned<String>,
    /// Its MAC address (router VRs).
    #[serde(default)]
    pub mac: Option<String>,
    /// Its IPv4 addresses `A.B.C.D/LEN` (router VRs).
    #[serde(default)]
    pub addrs: Vec<String>,
}

/// One VR.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VrConf {
    /// Unique name.
    pub name: Spanned<String>,
    /// What runs it.
    #[serde(default)]
    pub kind: VrKind,
    /// For `kind = "program"`: the executable.
    #[serde(default)]
    pub program: Option<Spanned<String>>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// vNICs, in index order.
    pub vnics: Spanned<Vec<VnicConf>>,
    /// Slots in its packet pool (2..=65536).
    #[serde(default = "default_slots")]
    pub slots: Spanned<u32>,
    /// Core its instance is pinned to (with several instances: `cpus`).
    #[serde(default)]
    pub cpu: Option<usize>,
    /// Instances (processes) of it, each with its own rings, fed by the
    /// host's balancer (1..=64, default 1). Instance `k` is pinned to
    /// `cpus[k]` when `cpus` lists enough distinct cores.
    #[serde(default)]
    pub instances: Option<Spanned<u16>>,
    /// How frames are shared among its instances: `flow` (default: a flow
    /// stays on one instance), `rr`, `random`, `jsq`, `weighted`.
    #[serde(default)]
    pub balance: Option<Spanned<String>>,
    /// Scale with the load (the `dynamic` policy) instead of running
    /// `instances` (the `fixed` policy).
    #[serde(default)]
    pub scale: Option<ScaleConf>,
    /// The router's tables (routes, next hops, neighbours, route file), for
    /// `kind = "router"`; its `vnics` come from `vnics` above.
    #[serde(default)]
    // Not `Spanned`: toml 0.8 cannot read a spanned table whose subtables
    // come in `[[vrs.router.x]]` headers (as the API writes them).
    pub router: Option<toml::Table>,
    /// A custom program's own config, passed to it as JSON.
    #[serde(default)]
    pub config: Option<toml::Table>,
    /// Quarantine it after this many violations (0: never); default
    /// `host.quarantine_after`.
    #[serde(default)]
    pub quarantine_after: Option<u64>,
    /// Start it again when it exits, crashes or hangs (default true).
    #[serde(default = "default_true")]
    pub restart: bool,
    /// Its share of the host worker's tx service (1..=100, default 1).
    #[serde(default)]
    pub weight: Option<Spanned<u32>>,
    /// `"high"`: served before every `"normal"` VR (default normal).
    #[serde(default)]
    pub priority: Option<Spanned<String>>,
    /// Frames/s admitted at ingress; the excess is dropped, counted as
    /// `rate_limited`.
    #[serde(default)]
    pub rate_limit_pps: Option<Spanned<u64>>,
    /// Token bucket depth of the rate limit, frames (default: 10 ms of
    /// the rate, at least 64).
    #[serde(default)]
    pub rate_burst: Option<Spanned<u64>>,
    /// CPU time it may use, in cores (0.5: half of one core).
    #[serde(default)]
    pub cpu_quota: Option<Spanned<f64>>,
    /// Memory limit: bytes, or a size like `"256M"` or `"1G"`.
    #[serde(default)]
    pub memory: Option<Spanned<toml::Value>>,
    /// CPUs it may run on (default: its `cpu`, if given).
    #[serde(default)]
    pub cpus: Option<Spanned<Vec<usize>>>,
    /// The user it runs as: a name or a uid (default `nobody` when
    /// `host.confine`).
    #[serde(default)]
    pub user: Option<Spanned<toml::Value>>,
}

/// The `dynamic` scaling policy of a VR (LVRM's dynamic core allocation):
/// every `period_ms` the host compares an EWMA of the VR's arrival rate
/// with thresholds per instance and adds or retires one instance, between
/// `min` and `max`. With `n` instances it adds one above `n * up_pps` and
/// retires one below `(n - 1) * down_pps`; `down_pps < up_pps` keeps a rate
/// near a threshold from flapping.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleConf {
    /// Frames/s one instance is meant to carry.
    pub up_pps: Spanned<u64>,
    /// Per-instance rate below which one fewer will do.
    pub down_pps: Spanned<u64>,
    /// How often to decide, and the EWMA's time constant, ms (default 1000).
    #[serde(default)]
    pub period_ms: Option<Spanned<u64>>,
    /// Fewest instances (default 1).
    #[serde(default)]
    pub min: Option<Spanned<u16>>,
    /// Most instances.
    pub max: Spanned<u16>,
}

fn default_vnic() -> Spanned<u16> {
    Spanned::new(0..0, 0)
}

impl Default for HostConf {
    fn default() -> Self {
        Self {
            cpu: None,
            poll: PollConfig::default(),
            quarantine_after: default_quarantine_after(),
            watchdog_ms: default_watchdog_ms(),
            start_idle_ms: default_start_idle_ms(),
            confine: true,
            instance_cores: None,
            share_worker_core: false,
        }
    }
}

fn default_quarantine_after() -> u64 {
    10_000
}

fn default_watchdog_ms() -> u64 {
    1000
}

fn default_start_idle_ms() -> u64 {
    crate::spawn::IDLE_START_LIMIT.as_millis() as u64
}

fn default_true() -> bool {
    true
}

fn default_slots() -> Spanned<u32> {
    Spanned::new(0..0, 2048)
}

/// A classifier rule: frames matching every given field go to a VR's vNIC.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConf {
    /// Ingress port name.
    #[serde(default)]
    pub port: Option<Spanned<String>>,
    /// Destination prefix (IPv4 destination, or an ARP target address).
    #[serde(default)]
    pub dst: Option<Spanned<String>>,
    /// Source prefix.
    #[serde(default)]
    pub src: Option<Spanned<String>>,
    /// Destination MAC.
    #[serde(default)]
    pub dst_mac: Option<Spanned<String>>,
    /// VLAN id (802.1Q), 0..=4095. The frame reaches the VR with its tag:
    /// the built-in router drops tagged frames, so only a custom VR that
    /// handles the tag can serve a VLAN.
    #[serde(default)]
    pub vlan: Option<Spanned<u16>>,
    /// IP protocol number.
    #[serde(default)]
    pub proto: Option<u8>,
    /// UDP destination port.
    #[serde(default)]
    pub udp_dport: Option<u16>,
    /// Target VR.
    pub vr: Spanned<String>,
    /// Target vNIC of that VR.
    #[serde(default = "default_vnic")]
    pub vnic: Spanned<u16>,
}

/// Host-wide settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConf {
    /// Core of the host worker.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// Idle back-off of the worker and of VRs.
    #[serde(default)]
    pub poll: PollConfig,
    /// Quarantine a VR after this many protocol violations since it was
    /// last started (0: never); a VR may override it.
    #[serde(default = "default_quarantine_after")]
    pub quarantine_after: u64,
    /// Kill (and restart) a VR whose rx rings hold frames while its poll
    /// loop has not moved for this many milliseconds (0: no watchdog).
    #[serde(default = "default_watchdog_ms")]
    pub watchdog_ms: u64,
    /// A VR process started by a change (config, API) runs on the time the
    /// VRs beside it leave (the idle class) for up to this many
    /// milliseconds before it takes a normal share of its core (0: it
    /// starts in the normal class at once, faster, at their expense).
    /// Restarts after a VR went down never wait.
    #[serde(default = "default_start_idle_ms")]
    pub start_idle_ms: u64,
    /// Confine every VR process (own network namespace and cgroup, its
    /// `user` or `nobody`, no new privileges, seccomp, no descriptors but
    /// its own); default true. A VR's `user` and limits apply either way.
    #[serde(default = "default_true")]
    pub confine: bool,
    /// Cores for the instances of VRs that run several or scale (and list
    /// no `cpus` of their own): this many of the CPUs besides the
    /// worker's, nearest it first (default: all of them).
    #[serde(default)]
    pub instance_cores: Option<Spanned<usize>>,
    /// Let one instance share the worker's core, handed out last (on a
    /// 2-CPU machine, the only way to run two instances).
    #[serde(default)]
    pub share_worker_core: bool,
}

impl HostConf {
    /// The cores for VR instances this host hands out.
    ///
    /// # Errors
    /// The budget is empty or larger than the machine.
    pub fn core_budget(&self) -> Result<crate::alloc::CoreBudget, crate::alloc::AllocError> {
        let limit = self.instance_cores.as_ref().map(|s| *s.get_ref());
        let topology = crate::alloc::Topology::read();
        crate::alloc::CoreBudget::new(&topology, self.cpu, limit, self.share_worker_core)
    }
}

/// The whole config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Host-wide settings.
    #[serde(default)]
    pub host: HostConf,
    /// Ports.
    #[serde(default)]
    pub ports: Vec<PortConfig>,
    /// VRs.
    #[serde(default)]
    pub vrs: Vec<VrConf>,
    /// Classifier rules, first match wins.
    #[serde(default)]
    pub rules: Vec<RuleConf>,
    /// Directory of the file, for relative paths.
    #[serde(skip)]
    pub dir: PathBuf,
}

/// A checked VR, ready to start.
#[derive(Debug, Clone)]
pub struct VrPlan {
    /// Name.
    pub name: String,
    /// Program and arguments (the built-in router: `None`, the caller runs
    /// its own binary's router entry point).
    pub program: Option<(PathBuf, Vec<String>)>,
    /// Port index of each vNIC.
    pub vnic_ports: Vec<usize>,
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
}

impl VrPlan {
    /// Instance slots of its region: its fixed count, or its maximum.
    pub fn instance_slots(&self) -> u16 {
        match self.scale {
            crate::alloc::ScalePolicy::Fixed(n) => n,
            crate::alloc::ScalePolicy::Dynamic(d) => d.max,
        }
    }
}

/// A checked config: what the daemon will build.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Ports: (name, driver, interface; empty for `mem` and `null`).
    pub ports: Vec<(String, Driver, String)>,
    /// What each `mem` port generates (`None` for other drivers).
    pub gens: Vec<Option<GenConf>>,
    /// Each port's ring sizes (set only for `af_xdp`).
    pub rings: Vec<PortRings>,
    /// VRs.
    pub vrs: Vec<VrPlan>,
    /// Compiled classifier.
    pub classifier: Classifier,
    /// Host settings.
    pub host: HostConf,
}

/// The ring sizes a port's table sets.
fn port_rings(p: &PortConfig) -> PortRings {
    PortRings {
        ring_size: p.ring_size.as_ref().map(|v| *v.get_ref()),
        frames: p.frames.as_ref().map(|v| *v.get_ref()),
    }
}

/// A config field at fault: where, which, why.
type FieldError = (std::ops::Range<usize>, &'static str, String);

impl Config {
    /// How a VR's instances run: their count, scaling, cores and balancing.
    /// Two instances never share a core: several instances (or a scaling
    /// VR's) take their cores from `cpus`, one each, or else from the
    /// host's core budget.
    fn vr_instances(v: &VrConf) -> Result<InstancePlan, FieldError> {
        use crate::alloc::ScalePolicy;
        let most = vrhost_shm::layout::MAX_INSTANCES;
        let span = || v.instances.as_ref().map_or(0..0, Spanned::span);
        let scale = match (&v.scale, &v.instances) {
            (Some(_), Some(i)) => {
                let msg = "a VR with a `scale` table runs scale.min..=scale.max instances".into();
                return Err((i.span(), "instances", msg));
            }
            (Some(sc), None) => ScalePolicy::Dynamic(Self::vr_scale(sc)?),
            (None, i) => {
                let n = i.as_ref().map_or(1, |s| *s.get_ref());
                if !(1..=most).contains(&n) {
                    return Err((span(), "instances", format!("{n}: must be 1..={most}")));
                }
                ScalePolicy::Fixed(n)
            }
        };
        let (start, slots) = match scale {
            ScalePolicy::Fixed(n) => (n, n),
            ScalePolicy::Dynamic(d) => (d.min, d.max),
        };
        let balance = match &v.balance {
            None => crate::balance::Policy::default(),
            Some(s) => s
                .get_ref()
                .parse()
                .map_err(|e: crate::balance::UnknownPolicy| (s.span(), "balance", e.to_string()))?,
        };
        let several = slots > 1 || v.scale.is_some();
        let (placed, cpus) = match &v.cpus {
            Some(c) if several => {
                let mut d = c.get_ref().clone();
                d.sort_unstable();
                d.dedup();
                if d.len() < usize::from(slots) {
                    let msg = format!(
                        "{} distinct cores for {slots} instances: each instance needs its own",
                        d.len()
                    );
                    return Err((c.span(), "cpus", msg));
                }
                let pinned = c.get_ref().iter().take(slots.into()).map(|&c| Some(c));
                (false, pinned.collect())
            }
            _ if several && v.cpu.is_some() => {
                let msg = format!(
                    "{slots} instances cannot all be pinned to `cpu`; list their cores in `cpus`, or leave both out to take cores from the host's budget"
                );
                return Err((span(), "instances", msg));
            }
            _ if several => (true, vec![None; usize::from(slots)]),
            _ => (false, vec![v.cpu]),
        };
        Ok(InstancePlan {
            start,
            scale,
            placed,
            cpus,
            balance,
        })
    }

    /// A VR's `scale` table as a checked policy; an error names the field.
    fn vr_scale(sc: &ScaleConf) -> Result<crate::alloc::DynamicPolicy, FieldError> {
        let d = crate::alloc::DynamicPolicy {
            up_pps: *sc.up_pps.get_ref() as f64,
            down_pps: *sc.down_pps.get_ref() as f64,
            period: std::time::Duration::from_millis(
                sc.period_ms.as_ref().map_or(1000, |p| *p.get_ref()),
            ),
            min: sc.min.as_ref().map_or(1, |m| *m.get_ref()),
            max: *sc.max.get_ref(),
        };
        let most = vrhost_shm::layout::MAX_INSTANCES.min(crate::alloc::MAX_INSTANCES);
        let (field, msg) = match d.validate() {
            Ok(()) if d.max <= most => return Ok(d),
            Ok(()) => ("max", format!("{}: must be {}..={most}", d.max, d.min)),
            Err(crate::alloc::AllocError::Policy { field, msg }) => (field, msg),
            Err(e) => ("max", e.to_string()),
        };
        let span = |s: Option<std::ops::Range<usize>>| s.unwrap_or_else(|| sc.max.span());
        Err(match field {
            "up_pps" => (sc.up_pps.span(), "scale.up_pps", msg),
            "down_pps" => (sc.down_pps.span(), "scale.down_pps", msg),
            "period" => {
                let msg = format!("{}: must be >= 1", d.period.as_millis());
                (
                    span(sc.period_ms.as_ref().map(Spanned::span)),
                    "scale.period_ms",
                    msg,
                )
            }
            "min" => (span(sc.min.as_ref().map(Spanned::span)), "scale.min", msg),
            _ => (sc.max.span(), "scale.max", msg),
        })
    }
}

/// How a VR's instances run (see [`Config::vr_instances`]).
struct InstancePlan {
    /// Instances started.
    start: u16,
    scale: crate::alloc::ScalePolicy,
    /// Cores from the host's budget.
    placed: bool,
    /// Core of each instance slot, when pinned by the config.
    cpus: Vec<Option<usize>>,
    balance: crate::balance::Policy,
}

/// The instance cores the VRs of a config take from the host's budget: the
/// VRs' starting instances must fit, and a scaling VR's maximum too.
struct BudgetCheck {
    /// The budget's cores, or why there is none.
    cpus: Result<Vec<usize>, String>,
    /// Cores the VRs checked so far start with.
    taken: usize,
}

impl BudgetCheck {
    fn new(host: &HostConf) -> Self {
        let cpus = host
            .core_budget()
            .map(|b| b.cpus().to_vec())
            .map_err(|e| e.to_string());
        Self { cpus, taken: 0 }
    }

    /// Take the cores of a placed VR's `start` instances, of at most
    /// `slots`; an error says what is missing.
    fn take(&mut self, start: u16, slots: u16, dynamic: bool) -> Result<(), (bool, String)> {
        let hint = "see host.instance_cores and host.share_worker_core";
        let cpus = self
            .cpus
            .as_ref()
            .map_err(|e| (false, format!("no cores for instances: {e}; {hint}")))?;
        let list = cpus
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let size = cpus.len();
        if dynamic && usize::from(slots) > size {
            let msg = format!(
                "{slots}: more instances than the {size} cores of the host's budget (CPUs {list}); {hint}"
            );
            return Err((true, msg));
        }
        if self.taken + usize::from(start) > size {
            let left = size - self.taken;
            let msg = format!(
                "{start} instances need a core each, but {left} of the {size} cores of the host's budget (CPUs {list}) are left; {hint}"
            );
            return Err((false, msg));
        }
        self.taken += usize::from(start);
        Ok(())
    }
}

fn line_of(src: &str, at: usize) -> usize {
    src[..at.min(src.len())].matches('\n').count() + 1
}

fn parse_prefix(s: &str) -> Result<(Ipv4Addr, u8), String> {
    vrhost_vr::router::parse_prefix(s).map(|(a, l)| (Ipv4Addr::from(a), l))
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    s.parse::<vrhost_packet::MacAddr>()
        .map(|m| m.0)
        .map_err(|e| format!("{s:?}: {e}"))
}

impl Config {
    /// Read and check a config file.
    ///
    /// # Errors
    /// [`ConfigError`] naming file, line and field.
    pub fn load(path: &Path) -> Result<(Self, Plan), ConfigError> {
        let file = path.display().to_string();
        let src = std::fs::read_to_string(path).map_err(|err| ConfigError::Read {
            file: file.clone(),
            err,
        })?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&src, &file, &dir)
    }

    /// Parse and check config TOML; `file` names it in errors, `dir`
    /// resolves relative paths.
    ///
    /// # Errors
    /// [`ConfigError`] naming file, line and field.
    pub fn parse(src: &str, file: &str, dir: &Path) -> Result<(Self, Plan), ConfigError> {
        let mut cfg: Config = toml::from_str(src).map_err(|e| ConfigError::Parse {
            file: file.to_string(),
            msg: e.to_string().trim_end().to_string(),
        })?;
        cfg.dir = dir.to_path_buf();
        let plan = cfg.check(src, file)?;
        Ok((cfg, plan))
    }

    /// A VR's scheduling: weight, priority, rate limit.
    fn vr_sched(v: &VrConf) -> Result<Sched, (std::ops::Range<usize>, &'static str, String)> {
        let weight = match &v.weight {
            None => 1,
            Some(w) if (1..=100).contains(w.get_ref()) => *w.get_ref(),
            Some(w) => {
                return Err((
                    w.span(),
                    "weight",
                    format!("{}: must be 1..=100", w.get_ref()),
                ));
            }
        };
        let high_priority = match &v.priority {
            None => false,
            Some(p) if p.get_ref() == "normal" => false,
            Some(p) if p.get_ref() == "high" => true,
            Some(p) => {
                return Err((
                    p.span(),
                    "priority",
                    format!("{:?}: must be \"normal\" or \"high\"", p.get_ref()),
                ));
            }
        };
        let rate_pps = match &v.rate_limit_pps {
            Some(r) if *r.get_ref() == 0 => {
                return Err((r.span(), "rate_limit_pps", "0: must be above 0".into()));
            }
            r => r.as_ref().map(|r| *r.get_ref()),
        };
        let rate_burst = match (&v.rate_burst, rate_pps) {
            (Some(b), None) => {
                return Err((b.span(), "rate_burst", "needs rate_limit_pps".into()));
            }
            (Some(b), Some(_)) if *b.get_ref() == 0 => {
                return Err((b.span(), "rate_burst", "0: must be above 0".into()));
            }
            (Some(b), Some(_)) => *b.get_ref(),
            (None, Some(r)) => (r / 100).max(64),
            (None, None) => 0,
        };
        Ok(Sched {
            weight,
            high_priority,
            rate_pps,
            rate_burst,
        })
    }

    fn check(&self, src: &str, file: &str) -> Result<Plan, ConfigError> {
        let err = |s: std::ops::Range<usize>, field: String, msg: String| ConfigError::Field {
            file: file.to_string(),
            line: line_of(src, s.start),
            field,
            msg,
        };
        let mut port_ix = BTreeMap::new();
        let mut ifaces = BTreeMap::new();
        for (i, p) in self.ports.iter().enumerate() {
            let n = p.name.get_ref();
            if n.is_empty() || port_ix.insert(n.clone(), i).is_some() {
                return Err(err(
                    p.name.span(),
                    format!("ports[{i}].name"),
                    format!("{n:?}: empty or defined twice"),
                ));
            }
            let in_memory = matches!(p.driver, Driver::Mem | Driver::Null);
            match (&p.interface, in_memory) {
                (Some(ifc), true) => {
                    return Err(err(
                        ifc.span(),
                        format!("ports[{i}].interface"),
                        format!("a {} port has no interface", p.driver.name()),
                    ));
                }
                (None, false) => {
                    return Err(err(
                        p.name.span(),
                        format!("ports[{i}].interface"),
                        format!("a {} port needs an interface", p.driver.name()),
                    ));
                }
                (Some(ifc), false) => {
                    let ifn = ifc.get_ref();
                    if ifn.is_empty() || ifn.len() > 15 {
                        return Err(err(
                            ifc.span(),
                            format!("ports[{i}].interface"),
                            format!("{ifn:?}: 1-15 characters"),
                        ));
                    }
                    if ifaces.insert(ifn.clone(), i).is_some() {
                        return Err(err(
                            ifc.span(),
                            format!("ports[{i}].interface"),
                            format!("{ifn:?} used by two ports"),
                        ));
                    }
                }
                (None, true) => {}
            }
            match (&p.traffic, p.driver) {
                (Some(g), Driver::Mem) => {
                    g.get_ref()
                        .mem_config()
                        .map_err(|m| err(g.span(), format!("ports[{i}].traffic"), m))?;
                }
                (Some(g), _) => {
                    return Err(err(
                        g.span(),
                        format!("ports[{i}].traffic"),
                        "only a mem port generates".into(),
                    ));
                }
                (None, _) => {}
            }
            for (v, field) in [(&p.ring_size, "ring_size"), (&p.frames, "frames")] {
                if let Some(v) = v
                    && p.driver != Driver::AfXdp
                {
                    return Err(err(
                        v.span(),
                        format!("ports[{i}].{field}"),
                        format!("only an af_xdp port has {field}"),
                    ));
                }
            }
            if p.driver == Driver::AfXdp
                && let Err(m) = port_rings(p).af_xdp().check()
            {
                // The driver's message starts with the field at fault.
                let (field, at) = if m.starts_with("frames") {
                    ("frames", &p.frames)
                } else {
                    ("ring_size", &p.ring_size)
                };
                return Err(err(
                    at.as_ref().map_or(p.name.span(), Spanned::span),
                    format!("ports[{i}].{field}"),
                    m,
                ));
            }
        }
        let mut budget = BudgetCheck::new(&self.host);
        if let (Some(c), Err(e)) = (&self.host.instance_cores, &budget.cpus) {
            return Err(err(c.span(), "host.instance_cores".into(), e.clone()));
        }
        let mut vr_ix = BTreeMap::new();
        let mut vrs = Vec::new();
        for (i, v) in self.vrs.iter().enumerate() {
            let f = |x: &str| format!("vrs[{i}].{x}");
            let n = v.name.get_ref();
            if n.is_empty()
                || n.len() > 32
                || !n
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(err(
                    v.name.span(),
                    f("name"),
                    format!("{n:?}: 1-32 letters, digits, '-' or '_'"),
                ));
            }
            if vr_ix.insert(n.clone(), i).is_some() {
                return Err(err(
                    v.name.span(),
                    f("name"),
                    format!("{n:?} defined twice"),
                ));
            }
            let slots = *v.slots.get_ref();
            if !(2..=65_536).contains(&slots) {
                return Err(err(
                    v.slots.span(),
                    f("slots"),
                    format!("{slots}: must be 2..=65536"),
                ));
            }
            let vnics = v.vnics.get_ref();
            if vnics.is_empty() || vnics.len() > 64 {
                return Err(err(
                    v.vnics.span(),
                    f("vnics"),
                    format!("{} vNICs: must be 1..=64", vnics.len()),
                ));
            }
            let mut vnic_ports = Vec::new();
            for (j, vn) in vnics.iter().enumerate() {
                let p = port_ix.get(vn.port.get_ref()).ok_or_else(|| {
                    err(
                        vn.port.span(),
                        f(&format!("vnics[{j}].port")),
                        format!("no port {:?}", vn.port.get_ref()),
                    )
                })?;
                vnic_ports.push(*p);
            }
            let (program, config) = match v.kind {
                VrKind::Router => {
                    let rcfg = self.router_config(v).map_err(|m| {
                        let span = v.name.span();
                        err(span, f("router"), m)
                    })?;
                    Router::new(&rcfg).map_err(|m| {
                        let span = v.name.span();
                        err(span, f("router"), m)
                    })?;
                    (None, serde_json::to_value(&rcfg).expect("serializes"))
                }
                VrKind::Program => {
                    let Some(p) = &v.program else {
                        return Err(err(
                            v.name.span(),
                            f("program"),
                            "kind = \"program\" needs `program`".into(),
                        ));
                    };
                    let path = self.dir.join(p.get_ref());
                    if !path.is_file() {
                        return Err(err(
                            p.span(),
                            f("program"),
                            format!("{}: no such file", path.display()),
                        ));
                    }
                    let c = v.config.clone().unwrap_or_default();
                    (
                        Some((path, v.args.clone())),
                        serde_json::to_value(c).map_err(|e| {
                            err(v.name.span(), f("config"), format!("not JSON-able: {e}"))
                        })?,
                    )
                }
            };
            let confine = self.vr_confine(i, v, &program, &config, &err)?;
            let inst =
                Self::vr_instances(v).map_err(|(span, field, msg)| err(span, f(field), msg))?;
            if inst.placed {
                let slots = inst.cpus.len() as u16;
                budget
                    .take(inst.start, slots, v.scale.is_some())
                    .map_err(|(at_max, msg)| {
                        let (span, field) = match (&v.scale, &v.instances) {
                            (Some(sc), _) if at_max || sc.min.is_none() => {
                                (sc.max.span(), "scale.max")
                            }
                            (Some(sc), _) => {
                                (sc.min.as_ref().map_or(0..0, Spanned::span), "scale.min")
                            }
                            (None, i) => (i.as_ref().map_or(0..0, Spanned::span), "instances"),
                        };
                        err(span, f(field), msg)
                    })?;
            }
            vrs.push(VrPlan {
                name: n.clone(),
                program,
                vnic_ports,
                slots,
                cpu: v.cpu,
                instances: inst.start,
                scale: inst.scale,
                placed: inst.placed,
                instance_cpus: inst.cpus,
                balance: inst.balance,
                config,
                guard: Guard {
                    quarantine_after: Some(
                        v.quarantine_after.unwrap_or(self.host.quarantine_after),
                    )
                    .filter(|&n| n > 0),
                    watchdog: (self.host.watchdog_ms > 0)
                        .then(|| std::time::Duration::from_millis(self.host.watchdog_ms)),
                },
                restart: v.restart,
                sched: Self::vr_sched(v).map_err(|(span, field, msg)| err(span, f(field), msg))?,
                confine,
            });
        }
        let mut rules = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            let f = |x: &str| format!("rules[{i}].{x}");
            let vr = *vr_ix
                .get(r.vr.get_ref())
                .ok_or_else(|| err(r.vr.span(), f("vr"), format!("no VR {:?}", r.vr.get_ref())))?;
            let vnic = *r.vnic.get_ref();
            if usize::from(vnic) >= vrs[vr].vnic_ports.len() {
                return Err(err(
                    r.vnic.span(),
                    f("vnic"),
                    format!(
                        "VR {:?} has {} vNICs",
                        r.vr.get_ref(),
                        vrs[vr].vnic_ports.len()
                    ),
                ));
            }
            if let (Some(_), Some(p)) = (r.udp_dport, r.proto)
                && p != 17
            {
                return Err(err(
                    r.vr.span(),
                    f("proto"),
                    format!("{p}: udp_dport matches UDP only (proto 17 or none)"),
                ));
            }
            let in_port = match &r.port {
                None => None,
                Some(p) => Some(*port_ix.get(p.get_ref()).ok_or_else(|| {
                    err(p.span(), f("port"), format!("no port {:?}", p.get_ref()))
                })?),
            };
            let pfx = |p: &Option<Spanned<String>>, name: &str| {
                p.as_ref()
                    .map(|s| parse_prefix(s.get_ref()).map_err(|m| err(s.span(), f(name), m)))
                    .transpose()
            };
            let dst_mac = r
                .dst_mac
                .as_ref()
                .map(|s| parse_mac(s.get_ref()).map_err(|m| err(s.span(), f("dst_mac"), m)))
                .transpose()?;
            rules.push(Rule {
                m: Match {
                    in_port,
                    dst: pfx(&r.dst, "dst")?,
                    src: pfx(&r.src, "src")?,
                    dst_mac,
                    vlan: match &r.vlan {
                        Some(v) if *v.get_ref() > 4095 => {
                            return Err(err(
                                v.span(),
                                f("vlan"),
                                format!("{}: must be 0..=4095", v.get_ref()),
                            ));
                        }
                        v => v.as_ref().map(|v| *v.get_ref()),
                    },
                    proto: r.proto,
                    udp_dport: r.udp_dport,
                },
                vr,
                vnic,
            });
        }
        let classifier = Classifier::new(&rules).map_err(|e| ConfigError::Field {
            file: file.into(),
            line: 0,
            field: "rules".into(),
            msg: e.to_string(),
        })?;
        Ok(Plan {
            ports: self
                .ports
                .iter()
                .map(|p| {
                    (
                        p.name.get_ref().clone(),
                        p.driver,
                        p.interface
                            .as_ref()
                            .map(|i| i.get_ref().clone())
                            .unwrap_or_default(),
                    )
                })
                .collect(),
            rings: self.ports.iter().map(port_rings).collect(),
            gens: self
                .ports
                .iter()
                .map(|p| match p.driver {
                    Driver::Mem => Some(
                        p.traffic
                            .as_ref()
                            .map(|g| g.get_ref().clone())
                            .unwrap_or_default(),
                    ),
                    _ => None,
                })
                .collect(),
            vrs,
            classifier,
            host: self.host.clone(),
        })
    }

    /// How VR `i` (`v`) is confined: everything if `host.confine`, and its
    /// own `user`, `cpu_quota`, `cpus` and `memory`. Its user must be able
    /// to execute its program (run through the host's descriptor, so the
    /// directories above it do not count) and to reach and read its route
    /// file.
    fn vr_confine(
        &self,
        i: usize,
        v: &VrConf,
        program: &Option<(PathBuf, Vec<String>)>,
        config: &serde_json::Value,
        err: &dyn Fn(std::ops::Range<usize>, String, String) -> ConfigError,
    ) -> Result<Confine, ConfigError> {
        use crate::confine::{check_access, online_cpus, parse_bytes, resolve_user};
        let f = |x: &str| format!("vrs[{i}].{x}");
        let ncpu = online_cpus();
        let mut c = if self.host.confine {
            Confine::strict()
        } else {
            Confine::default()
        };
        if let Some(q) = &v.cpu_quota {
            let x = *q.get_ref();
            if !(0.01..=ncpu as f64).contains(&x) {
                return Err(err(
                    q.span(),
                    f("cpu_quota"),
                    format!("{x}: must be 0.01..={ncpu} (cores of this host)"),
                ));
            }
            c.cpu_quota = Some(x);
        }
        if let Some(m) = &v.memory {
            let bytes = match m.get_ref() {
                toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("{n}: negative")),
                toml::Value::String(s) => parse_bytes(s),
                other => Err(format!("{other}: bytes, or a size like \"256M\"")),
            }
            .map_err(|m_| err(m.span(), f("memory"), m_))?;
            if bytes < 16 << 20 {
                return Err(err(
                    m.span(),
                    f("memory"),
                    format!("{bytes} bytes: a VR needs at least 16M"),
                ));
            }
            c.memory = Some(bytes);
        }
        if let Some(cs) = &v.cpus {
            let list = cs.get_ref();
            let mut seen = std::collections::BTreeSet::new();
            let bad = if list.is_empty() {
                Some("must name at least one CPU".to_string())
            } else if let Some(x) = list.iter().find(|&&x| x >= ncpu) {
                Some(format!("CPU {x}: this host has {ncpu}"))
            } else if let Some(x) = list.iter().find(|&&x| !seen.insert(x)) {
                Some(format!("CPU {x} given twice"))
            } else {
                v.cpu
                    .filter(|p| !list.contains(p))
                    .map(|p| format!("does not include CPU {p}, the VR's `cpu`"))
            };
            if let Some(m) = bad {
                return Err(err(cs.span(), f("cpus"), m));
            }
            c.cpus = Some(list.clone());
        } else if c.wants_cgroup() {
            c.cpus = v.cpu.map(|p| vec![p]);
        }
        if let Some(u) = &v.user {
            let ids = match u.get_ref() {
                toml::Value::Integer(n) => resolve_user(&n.to_string()),
                toml::Value::String(s) => resolve_user(s),
                other => Err(format!("{other}: a user name or a uid")),
            }
            .map_err(|m| err(u.span(), f("user"), m))?;
            c.user = Some(ids);
        }
        if let Some(ids) = c.user {
            if let (Some((p, _)), Some(span)) = (program, v.program.as_ref().map(Spanned::span)) {
                check_access(p, ids, true).map_err(|m| err(span, f("program"), m))?;
            }
            let router = program.is_none();
            if let Some(rf) = config
                .get("route_file")
                .and_then(|x| x.as_str())
                .filter(|_| router)
            {
                check_access(Path::new(rf), ids, false)
                    .map_err(|m| err(v.name.span(), f("router.route_file"), m))?;
            }
        }
        Ok(c)
    }

    /// The built-in router's config for VR `v`: its `[vrs.router]` table
    /// with `vnics` filled from the VR's vNICs; a relative `route_file` is
    /// resolved against the config's directory.
    fn router_config(&self, v: &VrConf) -> Result<RouterConfig, String> {
        let mut t = v.router.clone().unwrap_or_default();
        if t.contains_key("vnics") {
            return Err("`vnics` belongs to the VR, not to its router table".into());
        }
        let vnics: Vec<toml::Value> = v
            .vnics
            .get_ref()
            .iter()
            .enumerate()
            .map(|(j, vn)| {
                let mut m = toml::Table::new();
                let mac = vn
                    .mac
                    .clone()
                    .ok_or_else(|| format!("vnics[{j}].mac: a router vNIC needs a MAC"))?;
                m.insert("mac".into(), toml::Value::String(mac));
                if !vn.addrs.is_empty() {
                    m.insert(
                        "addrs".into(),
                        toml::Value::Array(
                            vn.addrs.iter().cloned().map(toml::Value::String).collect(),
                        ),
                    );
                }
                Ok(toml::Value::Table(m))
            })
            .collect::<Result<_, String>>()?;
        t.insert("vnics".into(), toml::Value::Array(vnics));
        if let Some(toml::Value::String(f)) = t.get("route_file") {
            let p = self.dir.join(f);
            t.insert(
                "route_file".into(),
                toml::Value::String(p.display().to_string()),
            );
        }
        toml::Value::Table(t)
            .try_into::<RouterConfig>()
            .map_err(|e| e.to_string().trim_end().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_router_table_written_with_headers_reads_back() {
        // What the API writes: `[[vrs.router.neighbours]]` headers.
        let (cfg, _) = Config::parse(GOOD, "v.toml", Path::new(".")).unwrap();
        let _ = cfg;
        let mut doc: toml::Table = toml::from_str(GOOD).unwrap();
        let vr = doc["vrs"].as_array_mut().unwrap()[0]
            .as_table_mut()
            .unwrap();
        let router = vr["router"].as_table_mut().unwrap();
        router.insert(
            "neighbours".into(),
            toml::Value::Array(vec![toml::Value::Table(
                toml::from_str("ip = \"10.9.9.9\"\nmac = \"02:00:00:00:09:09\"\nvnic = 1").unwrap(),
            )]),
        );
        let src = toml::to_string(&doc).unwrap();
        assert!(src.contains("[[vrs.router.neighbours]]"), "{src}");
        Config::parse(&src, "v.toml", Path::new(".")).unwrap();
    }

    const GOOD: &str = r#"
[host]
cpu = 0

[[ports]]
name = "p0"
driver = "af_packet"
interface = "veth0"

[[ports]]
name = "p1"
driver = "af_xdp"
interface = "veth1"

[[vrs]]
name = "tenant-a"
slots = 1024
vnics = [
  { port = "p0", mac = "02:00:00:00:01:01" },
  { port = "p1", mac = "02:00:00:00:01:02" },
]
[vrs.router]
nexthops = [{ vnic = 1, mac = "02:00:00:00:02:02" }]
routes = [{ prefix = "10.1.1.0/24", nexthop = 0 }]

[[rules]]
port = "p0"
dst = "10.1.0.0/16"
vr = "tenant-a"
vnic = 0
"#;

    fn parse(src: &str) -> Result<Plan, String> {
        Config::parse(src, "v.toml", Path::new("."))
            .map(|(_, p)| p)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_good_config_plans_ports_vrs_and_rules() {
        let p = parse(GOOD).unwrap();
        assert_eq!(p.ports.len(), 2);
        assert_eq!(p.ports[1].1, Driver::AfXdp);
        assert_eq!(p.vrs[0].vnic_ports, vec![0, 1]);
        assert_eq!(p.vrs[0].slots, 1024);
        assert_eq!(p.classifier.len(), 1);
        assert_eq!(p.vrs[0].config["vnics"][1]["mac"], "02:00:00:00:01:02");
        assert_eq!(p.host.start_idle_ms, 2000);
        assert_eq!(p.rings, vec![PortRings::default(); 2]);
        let big = GOOD.replace(
            "\"veth1\"\n",
            "\"veth1\"\nring_size = 8192\nframes = 16384\n",
        );
        let rings = parse(&big).unwrap().rings[1];
        assert_eq!(
            (rings.af_xdp().ring_size, rings.af_xdp().frames),
            (8192, 16384)
        );
        let now = GOOD.replace("cpu = 0\n", "cpu = 0\nstart_idle_ms = 0\n");
        assert_eq!(parse(&now).unwrap().host.start_idle_ms, 0);
        let bad = GOOD.replace("cpu = 0\n", "cpu = 0\nstart_idle_ms = -1\n");
        assert!(parse(&bad).unwrap_err().contains("start_idle_ms"), "{bad}");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let cases = [
            (
                GOOD.replace("port = \"p1\"", "port = \"p9\""),
                "v.toml:20: vrs[0].vnics[1].port: no port \"p9\"",
            ),
            (
                GOOD.replace("vr = \"tenant-a\"", "vr = \"nobody\""),
                "v.toml:29: rules[0].vr: no VR",
            ),
            (
                GOOD.replace("vnic = 0\n", "vnic = 5\n"),
                "v.toml:30: rules[0].vnic: VR \"tenant-a\" has 2 vNICs",
            ),
            (
                GOOD.replace("10.1.0.0/16", "10.1.0.0/40"),
                "v.toml:28: rules[0].dst",
            ),
            (
                GOOD.replace("slots = 1024", "slots = 1"),
                "v.toml:17: vrs[0].slots",
            ),
            (
                GOOD.replace("nexthop = 0 }", "nexthop = 7 }"),
                "vrs[0].router: routes[0].nexthop 7 out of range",
            ),
            (
                GOOD.replace("driver = \"af_xdp\"", "driver = \"dpdk\""),
                "unknown variant `dpdk`",
            ),
            (
                GOOD.replace("\"veth0\"\n", "\"veth0\"\nring_size = 4096\n"),
                "v.toml:9: ports[0].ring_size: only an af_xdp port has ring_size",
            ),
            (
                GOOD.replace("\"veth1\"\n", "\"veth1\"\nring_size = 3000\n"),
                "v.toml:14: ports[1].ring_size: ring_size 3000 is not a power of two",
            ),
            (
                GOOD.replace("\"veth1\"\n", "\"veth1\"\nring_size = 64\nframes = 1\n"),
                "v.toml:15: ports[1].frames: frames 1 must be at least 2",
            ),
            (
                GOOD.replace("interface = \"veth1\"", "interface = \"veth0\""),
                "used by two ports",
            ),
            (
                format!(
                    "{GOOD}\n[[vrs]]\nname = \"tenant-a\"\nvnics = [{{ port = \"p0\", mac = \"02:00:00:00:00:01\" }}]\n"
                ),
                "defined twice",
            ),
        ];
        for (src, want) in cases {
            let e = parse(&src).unwrap_err();
            assert!(e.contains(want), "want {want:?} in {e:?}");
        }
    }

    #[test]
    fn instances_get_a_core_each_and_a_policy() {
        let with = |fields: &str| GOOD.replace("slots = 1024", &format!("slots = 1024\n{fields}"));
        let plan = parse(&with("instances = 2\ncpus = [1, 0]\nbalance = \"jsq\"")).unwrap();
        let v = &plan.vrs[0];
        assert_eq!(v.instances, 2);
        assert_eq!(v.instance_cpus, [Some(1), Some(0)]);
        assert_eq!(v.balance, crate::balance::Policy::ShortestQueue);
        let plan = parse(GOOD).unwrap();
        assert_eq!(plan.vrs[0].instances, 1);
        assert_eq!(plan.vrs[0].balance, crate::balance::Policy::Flow);
        for (fields, want) in [
            (
                "instances = 0",
                "v.toml:18: vrs[0].instances: 0: must be 1..=64",
            ),
            ("instances = 65", "vrs[0].instances: 65"),
            (
                "instances = 2\ncpu = 1",
                "vrs[0].instances: 2 instances cannot all be pinned",
            ),
            (
                "instances = 3\ncpus = [1, 0]",
                "vrs[0].cpus: 2 distinct cores for 3 instances",
            ),
            ("balance = \"fastest\"", "vrs[0].balance"),
        ] {
            let e = parse(&with(fields)).unwrap_err();
            assert!(e.contains(want), "{fields}: want {want:?} in {e:?}");
        }
    }

    #[test]
    fn scaling_vrs_take_cores_from_the_budget() {
        use crate::alloc::ScalePolicy;
        let ncpu = crate::confine::online_cpus();
        let with = |host: &str, fields: &str| {
            GOOD.replace("[host]\ncpu = 0", &format!("[host]\ncpu = 0\n{host}"))
                .replace("slots = 1024", &format!("slots = 1024\n{fields}"))
        };
        let shared = "share_worker_core = true";
        let v = parse(&with(shared, &format!("instances = {ncpu}")))
            .unwrap()
            .vrs[0]
            .clone();
        assert!(v.placed);
        assert_eq!(
            (v.instances, v.instance_slots()),
            (ncpu as u16, ncpu as u16)
        );
        assert_eq!(v.instance_cpus, vec![None; ncpu]);
        let scale = "scale = { up_pps = 1000, down_pps = 500, max = 2 }";
        if ncpu >= 2 {
            let v = parse(&with(shared, scale)).unwrap().vrs[0].clone();
            let ScalePolicy::Dynamic(d) = v.scale else {
                panic!("{:?}", v.scale)
            };
            assert_eq!((d.up_pps, d.down_pps, d.min, d.max), (1000.0, 500.0, 1, 2));
            assert_eq!(d.period, std::time::Duration::from_secs(1));
            assert!(v.placed);
            assert_eq!((v.instances, v.instance_slots()), (1, 2));
            let v = parse(&with("", &format!("{scale}\ncpus = [1, 0]")))
                .unwrap()
                .vrs[0]
                .clone();
            assert!(!v.placed, "its own cores");
            assert_eq!(v.instance_cpus, [Some(1), Some(0)]);
        }
        let one_vr = parse(&with("", "")).unwrap().vrs[0].clone();
        assert_eq!(
            (one_vr.placed, one_vr.scale),
            (false, ScalePolicy::Fixed(1))
        );
        // A scale table: these defaults, one field changed or added.
        let dynamic = |field: &str| {
            let key = field.split(" = ").next().unwrap_or_default();
            let mut fields: Vec<String> = ["up_pps = 1000", "down_pps = 500", "max = 1"]
                .into_iter()
                .filter(|f| !f.starts_with(key))
                .map(String::from)
                .collect();
            fields.push(field.to_string());
            with(shared, &format!("scale = {{ {} }}", fields.join(", ")))
        };
        let too_many = ncpu + 1;
        for (src, want) in [
            (
                dynamic("up_pps = 0"),
                "vrs[0].scale.up_pps: 0: must be a finite rate > 0".to_string(),
            ),
            (
                dynamic("down_pps = 0"),
                "vrs[0].scale.down_pps: 0: must be".into(),
            ),
            (
                dynamic("down_pps = 1000"),
                "vrs[0].scale.down_pps: 1000: must be below up_pps".into(),
            ),
            (dynamic("up_pps = -5"), "up_pps = -5".into()),
            (
                dynamic("period_ms = 0"),
                "vrs[0].scale.period_ms: 0: must be >= 1".into(),
            ),
            (dynamic("min = 0"), "vrs[0].scale.min: 0: must be".into()),
            (
                dynamic("min = 2"),
                "vrs[0].scale.max: 1: must be 2..=".into(),
            ),
            (
                dynamic("max = 65"),
                "vrs[0].scale.max: 65: must be 1..=64".into(),
            ),
            (dynamic("gap = 1"), "unknown field `gap`".into()),
            (
                dynamic(&format!("max = {too_many}")),
                format!(
                    "vrs[0].scale.max: {too_many}: more instances than the {ncpu} cores of the host's budget"
                ),
            ),
            (
                with(shared, &format!("{scale}\ninstances = 2")),
                "vrs[0].instances: a VR with a `scale` table".into(),
            ),
            (
                with("", &format!("instances = {ncpu}")),
                format!(
                    "vrs[0].instances: {ncpu} instances need a core each, but {} of the",
                    ncpu - 1
                ),
            ),
            (
                with(&format!("instance_cores = {ncpu}"), ""),
                format!(
                    "host.instance_cores: a budget of {ncpu} cores, but only {} CPUs",
                    ncpu - 1
                ),
            ),
        ] {
            let e = parse(&src).unwrap_err();
            assert!(e.contains(&want), "want {want:?} in {e:?}");
        }
    }

    #[test]
    fn confinement_fields_are_checked() {
        let with = |fields: &str| GOOD.replace("slots = 1024", &format!("slots = 1024\n{fields}"));
        // Default: every wall, as nobody, no limits.
        let c = &parse(GOOD).unwrap().vrs[0].confine;
        assert_eq!(*c, Confine::strict());
        // Limits and user.
        let p = parse(&with(
            "cpu_quota = 0.5\nmemory = \"256M\"\ncpus = [0]\nuser = \"nobody\"",
        ))
        .unwrap();
        let c = &p.vrs[0].confine;
        assert_eq!(c.cpu_quota, Some(0.5));
        assert_eq!(c.memory, Some(256 << 20));
        assert_eq!(c.cpus, Some(vec![0]));
        assert_eq!(c.user, Some(crate::confine::Ids::NOBODY));
        assert!(c.netns && c.seccomp && c.no_new_privs && c.close_fds);
        let p = parse(&with(
            "cpu_quota = 1\nmemory = 33554432\nuser = 65534\ncpu = 0",
        ))
        .unwrap();
        let c = &p.vrs[0].confine;
        assert_eq!((c.cpu_quota, c.memory), (Some(1.0), Some(32 << 20)));
        assert_eq!(c.cpus, Some(vec![0]), "cpuset defaults to the pinned core");
        // Off: nothing, unless a VR asks for it.
        let off = format!("[host]\nconfine = false\n{}", GOOD.replace("[host]\n", ""));
        assert!(parse(&off).unwrap().vrs[0].confine.is_off());
        let off_mem = off.replace("slots = 1024", "slots = 1024\nmemory = \"1G\"");
        let c = &parse(&off_mem).unwrap().vrs[0].confine;
        assert!(!c.netns && c.user.is_none() && c.memory == Some(1 << 30));
        // Errors name file, line and field.
        for (fields, want) in [
            (
                "cpu_quota = 0",
                "v.toml:18: vrs[0].cpu_quota: 0: must be 0.01..=",
            ),
            ("cpu_quota = 999", "v.toml:18: vrs[0].cpu_quota"),
            (
                "memory = \"12X\"",
                "v.toml:18: vrs[0].memory: \"12X\": unknown unit",
            ),
            (
                "memory = 1024",
                "v.toml:18: vrs[0].memory: 1024 bytes: a VR needs at least 16M",
            ),
            ("memory = -5", "v.toml:18: vrs[0].memory: -5: negative"),
            (
                "cpus = []",
                "v.toml:18: vrs[0].cpus: must name at least one CPU",
            ),
            (
                "cpus = [999]",
                "v.toml:18: vrs[0].cpus: CPU 999: this host has",
            ),
            ("cpus = [0, 0]", "v.toml:18: vrs[0].cpus: CPU 0 given twice"),
            ("cpu = 0\ncpus = [1]", "v.toml:19: vrs[0].cpus"),
            (
                "user = \"no-such-user-xyz\"",
                "v.toml:18: vrs[0].user: no user \"no-such-user-xyz\"",
            ),
            (
                "user = 0",
                "v.toml:18: vrs[0].user: a VR does not run as root",
            ),
            ("user = 1.5", "v.toml:18: vrs[0].user"),
        ] {
            let e = parse(&with(fields)).unwrap_err();
            assert!(e.contains(want), "{fields}: want {want:?} in {e:?}");
        }
    }

    #[test]
    fn a_route_file_the_vr_cannot_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("vrhost-cfg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let f = dir.join("routes.txt");
        std::fs::write(&f, "10.9.0.0/16\n").unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let src = GOOD.replace(
            "[vrs.router]\n",
            &format!("[vrs.router]\nroute_file = {:?}\n", f.display().to_string()),
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let ok = parse(&src);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        // SAFETY: geteuid has no preconditions.
        let owner_is_nobody = unsafe { libc::geteuid() } == 65534;
        let refused = parse(&src);
        std::fs::remove_dir_all(&dir).unwrap();
        ok.unwrap();
        if !owner_is_nobody {
            let e = refused.unwrap_err();
            assert!(
                e.contains("vrs[0].router.route_file") && e.contains("cannot be read by uid 65534"),
                "{e}"
            );
        }
    }
}
