//! The TOML's serde types: what a config file may say, with the defaults
//! of what it leaves out. Checking what it says is the other modules' job.

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;
use vrhost_proto::PollConfig;

use super::parse_mac;

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
    /// `af_xdp`: the one VR this port belongs to. Its UMEM is then the
    /// first `frames` slots of that VR's pool (fewer than its `slots`):
    /// frames reach the VR where the kernel wrote them and leave from
    /// where it wrote them, with no copy by the host. The VR must have
    /// exactly one vNIC on the port (no VLAN, no tunnel), no other VR one,
    /// and no rule of the port may name another VR; the interface must
    /// have one rx queue.
    #[serde(default)]
    pub dedicated: Option<Spanned<String>>,
    /// `af_packet`: the rx ring's format, `blocks` (TPACKET_V3, the
    /// default) or `frames` (TPACKET_V2: each frame handed over at once,
    /// no block timer; for latency).
    #[serde(default)]
    pub rx_ring: Option<Spanned<RxRing>>,
    /// `af_xdp`: how frames leave, `socket` (the default), `xdp` or `auto`.
    #[serde(default)]
    pub tx: Option<Spanned<PortTx>>,
}

/// How an `af_xdp` port transmits (`ports[].tx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortTx {
    /// The socket's tx ring (in copy mode, an skb per frame).
    #[default]
    Socket,
    /// Batches through the kernel's XDP test run with live frames.
    Xdp,
    /// `xdp` where the driver's counters show it takes the frames (veth),
    /// falling back to `socket` for good when it refuses them; `socket`
    /// on other drivers.
    Auto,
}

/// An `af_packet` port's rx ring format (`ports[].rx_ring`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RxRing {
    /// TPACKET_V3 blocks, handed over full or after 1 ms.
    #[default]
    Blocks,
    /// TPACKET_V2 slots, one per frame, handed over at once.
    Frames,
}

/// The ring sizes of an `af_xdp` port (`None`: the driver's default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortRings {
    /// Descriptors per ring.
    pub ring_size: Option<u32>,
    /// UMEM frames per queue.
    pub frames: Option<u32>,
    /// `af_packet`: the rx ring's format.
    pub rx_ring: RxRing,
    /// `af_xdp`: how frames leave.
    pub tx: PortTx,
}

impl PortRings {
    /// The AF_XDP socket config these sizes give.
    pub fn af_xdp(&self) -> vrhost_io::af_xdp::AfXdpConfig {
        let d = vrhost_io::af_xdp::AfXdpConfig::default();
        vrhost_io::af_xdp::AfXdpConfig {
            ring_size: self.ring_size.unwrap_or(d.ring_size),
            frames: self.frames.unwrap_or(d.frames),
            tx: match self.tx {
                PortTx::Socket => vrhost_io::af_xdp::TxPath::Socket,
                PortTx::Xdp => vrhost_io::af_xdp::TxPath::Xdp,
                PortTx::Auto => vrhost_io::af_xdp::TxPath::Auto,
            },
            ..d
        }
    }

    /// The AF_PACKET port config this gives.
    pub fn af_packet(&self) -> vrhost_io::af_packet::AfPacketConfig {
        use vrhost_io::af_packet::{AfPacketConfig, RxMode};
        AfPacketConfig {
            rx_mode: match self.rx_ring {
                RxRing::Blocks => RxMode::Blocks,
                RxRing::Frames => RxMode::Frames,
            },
            ..AfPacketConfig::DEFAULT
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
    /// Stamp a sequence number in each frame's UDP payload (its first 8
    /// bytes, big endian; the UDP checksum is then 0), for loss counts.
    pub sequence: bool,
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
            sequence: false,
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
            .map(|p| vrhost_router::parse_prefix(p))
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
            stamp_sequence: self.sequence,
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
    /// Its vNICs are TAP interfaces in its namespace (`vrctl-<vr>`),
    /// whose Linux forwarding (or a router the tenant runs there, its
    /// `control_plane` command) is the data plane; the VR process (the
    /// built-in router with `control_all`) only moves frames between the
    /// ports and the TAPs.
    Tap,
}

/// One vNIC of a VR.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VnicConf {
    /// The port its frames leave by (or `tunnel`).
    #[serde(default)]
    pub port: Option<Spanned<String>>,
    /// The tunnel it is the endpoint of, instead of a port: its frames
    /// travel encapsulated on the tunnel's underlay port.
    #[serde(default)]
    pub tunnel: Option<Spanned<String>>,
    /// An 802.1Q sub-interface of its port: frames reach the VR without
    /// their tag (only frames tagged with this VLAN are taken) and leave
    /// tagged with it. Not with `tunnel`.
    #[serde(default)]
    pub vlan: Option<Spanned<u16>>,
    /// Its MAC address (router VRs).
    #[serde(default)]
    pub mac: Option<String>,
    /// Its IPv4 addresses `A.B.C.D/LEN` (router VRs).
    #[serde(default)]
    pub addrs: Vec<String>,
    /// Its link's MTU (router VRs): larger IPv6 packets to forward out of
    /// it get an ICMPv6 packet too big.
    #[serde(default)]
    pub mtu: Option<u16>,
}

/// A tunnel (`[[tunnels]]`): a vNIC endpoint whose frames travel
/// encapsulated over IPv4 on an underlay port.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunnelConf {
    /// Name used by vNICs.
    pub name: Spanned<String>,
    /// `vxlan`, `udp` (an Ethernet frame in UDP) or `ipip`.
    pub kind: Spanned<String>,
    /// The underlay port (a port of the config).
    pub port: Spanned<String>,
    /// Local underlay IPv4 address.
    pub local: Spanned<String>,
    /// Remote underlay IPv4 address.
    pub remote: Spanned<String>,
    /// UDP destination port (`vxlan`: default 4789; `udp`: required).
    #[serde(default)]
    pub udp_port: Option<Spanned<u16>>,
    /// VXLAN network identifier, 0..=16777215 (`vxlan` only, required).
    #[serde(default)]
    pub vni: Option<Spanned<u32>>,
    /// Outer source MAC (default: the underlay interface's, read when the
    /// config is checked).
    #[serde(default)]
    pub local_mac: Option<Spanned<String>>,
    /// Outer destination MAC (default: learned from the last valid frame
    /// received from `remote`).
    #[serde(default)]
    pub remote_mac: Option<Spanned<String>>,
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
    /// Where its frames are forwarded: `"slow"` (default: its user-space
    /// instances), `"fast"` (the XDP fast path, with `host.fast_path`) or
    /// `"auto"` (by its load, with `[vrs.auto]`).
    #[serde(default)]
    pub path: Option<Spanned<String>>,
    /// `path = "auto"`'s thresholds.
    #[serde(default)]
    pub auto: Option<super::auto::AutoConf>,
    /// A control plane run in the VR's control namespace: `"bird"`, or
    /// `{ command = ["prog", "arg", ...] }` (router VRs).
    #[serde(default)]
    pub control_plane: Option<Spanned<super::control::ControlPlaneConf>>,
    /// The control plane's config file (`"bird"`: its `bird.conf`),
    /// relative to the config file's directory.
    #[serde(default)]
    pub control_config: Option<Spanned<String>>,
    /// How long the routes of a control plane that went down stay in the
    /// VR's FIB while it is not back, milliseconds (default 90,000).
    #[serde(default)]
    pub control_hold_ms: Option<u64>,
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
            fast_path: false,
            fast: FastConf::default(),
            hugepages: crate::hugepages::HugePages::Off,
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
    /// Load the XDP fast path and attach it to every `af_xdp` port, so
    /// that router VRs may run in it (`vrs[].path`); default false.
    #[serde(default)]
    pub fast_path: bool,
    /// The fast path's map sizes.
    #[serde(default)]
    pub fast: FastConf,
    /// VR regions in reserved huge pages: `"off"` (default), `"auto"`
    /// (when `/proc/sys/vm/nr_hugepages` has them free, else ordinary
    /// pages and a log line), `"required"` (a VR whose region finds none
    /// fails to start). See `crate::hugepages`.
    #[serde(default)]
    pub hugepages: crate::hugepages::HugePages,
}

/// The fast path's map sizes (`[host.fast]`), fixed when the daemon
/// starts; the defaults are `vrhost_fast::FastConfig`'s.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FastConf {
    /// VRs the fast path can hold (ids `0..max_vrs`).
    pub max_vrs: u32,
    /// Routes of all VRs together (a full table is about 512K).
    pub max_routes: u32,
    /// Route tables of all VRs together (a VR's table 0, and each table a
    /// src-dst VR's source prefixes select): 256 KiB each, taken at start.
    pub max_route_tables: u32,
    /// 1 KiB groups of all route tables together, taken at start (a full
    /// table uses about 22K).
    pub max_route_groups: u32,
    /// Neighbours of all VRs together.
    pub max_neighbours: u32,
    /// Own addresses of all VRs together.
    pub max_addrs: u32,
    /// Select table entries (tenants' keys).
    pub max_select: u32,
    /// CPUs the forwarding is spread over (a cpumap; empty: in place, on
    /// the CPU that received the frame).
    pub cpus: Vec<u32>,
}

impl Default for FastConf {
    fn default() -> Self {
        Self {
            max_vrs: 256,
            max_routes: 1 << 20,
            max_route_tables: 256,
            max_route_groups: 1 << 16,
            max_neighbours: 4096,
            max_addrs: 1024,
            max_select: 1024,
            cpus: Vec::new(),
        }
    }
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
    /// Tunnels, for vNICs to be endpoints of.
    #[serde(default)]
    pub tunnels: Vec<TunnelConf>,
    /// VRs.
    #[serde(default)]
    pub vrs: Vec<VrConf>,
    /// Classifier rules, first match wins.
    #[serde(default)]
    pub rules: Vec<RuleConf>,
    /// This host's part in a cluster (none: a single vrhost).
    #[serde(default)]
    pub cluster: Option<super::cluster_schema::ClusterConf>,
    /// Directory of the file, for relative paths.
    #[serde(skip)]
    pub dir: PathBuf,
}

/// The ring sizes a port's table sets.
pub(super) fn port_rings(p: &PortConfig) -> PortRings {
    PortRings {
        ring_size: p.ring_size.as_ref().map(|v| *v.get_ref()),
        frames: p.frames.as_ref().map(|v| *v.get_ref()),
        rx_ring: p.rx_ring.as_ref().map(|v| *v.get_ref()).unwrap_or_default(),
        tx: p.tx.as_ref().map(|v| *v.get_ref()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::assert_refused;

    #[test]
    fn an_empty_file_is_a_config_of_defaults() {
        let c: Config = toml::from_str("").unwrap();
        assert!(c.ports.is_empty() && c.vrs.is_empty() && c.rules.is_empty());
        let h = c.host;
        assert_eq!(
            (h.cpu, h.quarantine_after, h.watchdog_ms),
            (None, 10_000, 1000)
        );
        assert_eq!(h.start_idle_ms, 2000);
        assert!(h.confine && !h.share_worker_core && h.instance_cores.is_none());
    }

    #[test]
    fn a_vr_table_fills_in_its_defaults() {
        let v: VrConf = toml::from_str("name = \"a\"\nvnics = []").unwrap();
        assert_eq!(
            (v.kind, *v.slots.get_ref(), v.restart),
            (VrKind::Router, 2048, true)
        );
        assert!(v.program.is_none() && v.instances.is_none() && v.scale.is_none());
        let r: RuleConf = toml::from_str("vr = \"a\"").unwrap();
        assert_eq!(*r.vnic.get_ref(), 0, "the first vNIC");
    }

    #[test]
    fn unknown_keys_and_drivers_are_refused() {
        let e = toml::from_str::<VrConf>("name = \"a\"\nvnics = []\nslot = 4")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `slot`"), "{e}");
        let e = toml::from_str::<PortConfig>("name = \"p\"\ndriver = \"dpdk\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `dpdk`"), "{e}");
    }

    #[test]
    fn driver_names_are_the_configs() {
        for name in ["af_xdp", "af_packet", "socket", "tap", "mem", "null"] {
            let p: PortConfig =
                toml::from_str(&format!("name = \"p\"\ndriver = {name:?}")).unwrap();
            assert_eq!(p.driver.name(), name);
        }
    }

    #[test]
    fn port_rings_set_only_what_is_given() {
        let p: PortConfig =
            toml::from_str("name = \"p\"\ndriver = \"af_xdp\"\nframes = 8192").unwrap();
        let rings = port_rings(&p);
        assert_eq!(
            rings,
            PortRings {
                ring_size: None,
                frames: Some(8192),
                rx_ring: RxRing::Blocks,
                tx: PortTx::Socket,
            }
        );
        let x = rings.af_xdp();
        let d = vrhost_io::af_xdp::AfXdpConfig::default();
        assert_eq!((x.ring_size, x.frames), (d.ring_size, 8192));
    }

    #[test]
    fn the_default_generator_is_valid_and_a_bad_one_says_why() {
        let g = GenConf::default().mem_config().unwrap();
        assert_eq!((g.frame_bytes, g.seed), (64, 0x5eed));
        for (bad, want) in [
            (
                GenConf {
                    src: "10.0.0".into(),
                    ..GenConf::default()
                },
                "src \"10.0.0\": not an IPv4 address",
            ),
            (
                GenConf {
                    dst_mac: "02:00".into(),
                    ..GenConf::default()
                },
                "\"02:00\"",
            ),
            (
                GenConf {
                    dst: vec!["10.0.0.0/33".into()],
                    ..GenConf::default()
                },
                "33",
            ),
        ] {
            assert_refused(bad.mem_config(), want, &format!("{bad:?}"));
        }
        assert!(
            GenConf {
                frame_bytes: 9,
                ..GenConf::default()
            }
            .mem_config()
            .is_err()
        );
    }
}
