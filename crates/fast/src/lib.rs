//! vrhost-fast: the fast path, the built-in IPv4 router's forwarding in XDP
//! (`ebpf/xdp_router.c`), and its maps managed from Rust.
//!
//! What it owns: the XDP program (built by `build.rs`, embedded in the
//! binary), loading it with aya with map sizes from a [`FastConfig`],
//! attaching it to ports ([`FastPath::attach`]: native XDP, else generic),
//! and typed access to every map:
//! - the **select table** ([`FastPath::set_select`]): for each tenant,
//!   keyed by {ingress port, VLAN, destination MAC} ([`SelectKey`], with
//!   the MAC optional: a port or port-and-VLAN rule), the VR, the
//!   [`Path`] (fast, slow, drop) and a [`TokenBucket`] that limits the
//!   tenant at the port;
//! - per VR ([`FastPath::set_vr`]): the [`RoutingMode`] (dst, src, src-dst
//!   as `vrhost_fib::PolicyFib`) and its own addresses (frames to them go
//!   to the slow path);
//! - routes of every VR and table in one DIR-16-8-8 FIB in BPF arrays
//!   that user space writes through an mmap (`fib`, `vrhost_fib`'s trie
//!   algorithm; [`FastPath::add_route`]; a whole table at once:
//!   [`FastPath::add_routes`]), the source tables of src-dst mode
//!   ([`FastPath::set_source_table`]), neighbours
//!   ([`FastPath::set_neighbour`]), out ports ([`FastPath::add_port`]);
//! - the slow path's XSKMAP ([`FastPath::serve`] for an AF_XDP port,
//!   [`FastPath::set_xsk`] for one socket);
//! - per-VR counters, summed over CPUs ([`FastPath::counters`]), also
//!   readable from another process ([`CounterProbe`]);
//! - the CPUs the forwarding is spread over ([`FastPath::spread`]: a
//!   cpumap, so that on veth the transmit leaves the sender's core).
//!
//! For the benchmarks it also owns their traffic ends in XDP: a
//! live-frames generator ([`LiveGen`], [`LiveSender`]:
//! `ebpf/xdp_livegen.c` run with `BPF_PROG_RUN`) and a sink that counts
//! its frames per flow ([`SeqSink`]: `ebpf/xdp_seqsink.c`), and the
//! program's own cost per frame beside a minimal XDP router's
//! ([`measure_cost`]: `BPF_PROG_TEST_RUN` with `repeat`).
//!
//! The header comment of `ebpf/xdp_router.c` says what the program does
//! per frame. In short: the select table first; the fast path forwards
//! valid option-less IPv4 frames with a route and a neighbour (TTL - 1 with
//! the incremental checksum of RFC 1624, MACs rewritten, redirected through
//! a DEVMAP), and hands everything else to the VR's user-space instance
//! through the AF_XDP socket of the port's rx queue (XDP_PASS when there
//! is none), counted by reason.
//!
//! The daemon drives it with `[host] fast_path = true`
//! (`vrhost_daemon::fast`: a VR's routes, neighbours and select entries
//! kept in step with its config, API routes and the neighbours its router
//! resolved; `vrhost vr move`). What it does not do yet: it sends no ICMP
//! and does no ARP (both stay in the user-space router, which gets those
//! frames); no IPv6 (nor IPv6 tunnel underlays), no VLAN forwarding
//! (tagged frames go slow). Tunnel vNICs (VXLAN, UDP, IP-in-IP):
//! [`FastPath::set_tunnel`], `ebpf/xdp_tunnel.h`. Moving a tenant between the paths is one
//! select-table update (below).
//!
//! # Sharing a port with the AF_XDP slow path
//!
//! One XDP program per interface: an interface takes one, so the fast
//! path and the AF_XDP port cannot each attach their own (a port that
//! tries fails with `EBUSY` for native and `EEXIST` for generic mode).
//! With no select entry this program does what `ebpf/xdp_redirect.c`
//! does (every frame to the AF_XDP socket of its queue, XDP_PASS without
//! one), so it replaces it: the AF_XDP port is opened in
//! `XdpProgram::External` mode (`vrhost_io::af_xdp`), in which it binds
//! its sockets for the attach mode the caller gives (the one
//! [`FastPath::attached`] reports for the interface) but loads and
//! attaches nothing, and [`FastPath::serve`] puts its sockets in the
//! XSKMAP and gives the interface its range there (`xsk_ports`). One
//! loaded program serves all ports, because the DEVMAP it redirects
//! through must be its own; the XSKMAP is therefore keyed by port and
//! queue. When the port closes its sockets the kernel removes them from
//! the XSKMAP: that interface's slow-path frames go to the kernel stack
//! until another port is served.
//!
//! Moving a tenant (live migration's mechanism): its select entry's path
//! is switched by one map update; each frame takes the path of the entry
//! it meets. `tests/netns.rs` moves a paced flow slow -> fast -> slow and
//! finds every frame once, at the port or at the far namespace, in three
//! ordered runs, with the counters matching both sides.
//!
//! Attachment is a `vrhost_io::af_xdp::XdpLink` per port (a bpf_link):
//! dropping the [`FastPath`] (or a [`PeerPass`]) detaches the program at
//! once with `BPF_LINK_DETACH`, even while a child forked meanwhile by
//! another thread holds a copy of the link's descriptor (with aya's own
//! links, which only close theirs, that child kept it attached until it
//! exec'd).

#![deny(unsafe_code)]

mod abi;
mod bucket;
mod cache;
mod cost;
mod error;
mod fib;
mod livegen;
mod load;
mod mapped;
mod minimal;
mod probe;
mod routes;
mod seqsink;
mod spread;
mod tunnel;
mod types;
mod vrconf;

use std::collections::HashMap as StdHashMap;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd};

use aya::Ebpf;
use aya::maps::lpm_trie::Key as LpmKey;
use aya::maps::{DevMapHash, HashMap, LpmTrie, MapData, MapError, PerCpuArray, XskMap};
use aya::programs::{TestRun, TestRunOptions};
use vrhost_io::af_xdp::{AfXdpPort, XdpLink, XdpProgram};

use load::{attach_either, load_object, load_program, program};

pub use bucket::{MAX_BURST, MAX_RATE_PPS};
pub use cost::{CostLine, RUNS_PER_CALL, RunCost, measure as measure_cost};
pub use error::FastError;
pub use livegen::{
    LiveGen, LiveGenConfig, LiveGenCounters, LiveSender, MARK_OFFSET, MAX_BATCH, MAX_FLOWS, SendOn,
    udp_frame,
};
pub use load::{PeerPass, ifindex, online_cpus};
pub use minimal::MinimalRouter;
pub use probe::CounterProbe;
pub use routes::RouteEntry;
pub use seqsink::{SeqSink, SinkCounts};
pub use tunnel::{FastTunnel, FastTunnelKind, MAX_TUNNELS, TunnelCounters, tunnel_ifindex};
pub use types::*;
pub use vrhost_fib::RoutingMode;
/// How the program runs on a port: native (driver) or generic (skb) XDP.
/// The AF_XDP port's type, so that a port binding its sockets under the
/// fast path takes the mode [`FastPath::attached`] reports as it is.
pub use vrhost_io::af_xdp::AttachMode;

/// The router program's name in the object.
pub(crate) const PROGRAM: &str = "xdp_router";

pub(crate) const SELECT: &str = "select";
pub(crate) const VRS: &str = "vrs";
pub(crate) const ADDRS: &str = "addrs";
pub(crate) const SRC_TABLES: &str = "src_tables";
pub(crate) const NEIGHBOURS: &str = "neighbours";
pub(crate) const OUT_PORTS: &str = "out_ports";
pub(crate) const XSKS: &str = "xsks";
pub(crate) const XSK_PORTS: &str = "xsk_ports";
pub(crate) const COUNTERS: &str = "counters";
pub(crate) const UNSELECTED: &str = "unselected";

/// The loaded fast path: the program, its maps, the ports it is attached
/// to. Dropping it detaches the program and frees the maps.
pub struct FastPath {
    cfg: FastConfig,
    select: HashMap<MapData, abi::SelectKey, abi::SelectValue>,
    /// `vrs`, shared with `fib` (each writes its own fields).
    vrs: std::sync::Arc<vrconf::Vrs>,
    addrs: HashMap<MapData, abi::VrIp, u32>,
    /// The IPv4 routes ([`fib`]).
    fib: fib::Fib,
    /// src-dst mode's source prefixes: the LPM trie gives the table's FIB
    /// slot.
    src_tables: LpmTrie<MapData, abi::LpmData, u32>,
    /// The table each source prefix selects, by (vr, masked prefix, len).
    sources: StdHashMap<(u32, u32, u8), u32>,
    neighbours: HashMap<MapData, abi::VrIp, abi::NeighValue>,
    out_ports: DevMapHash<MapData>,
    xsks: XskMap<MapData>,
    xsk_ports: HashMap<MapData, u32, abi::XskSlot>,
    /// Ports given a slot in `xsks`, in slot order (ifindexes).
    xsk_slots: Vec<u32>,
    counters: PerCpuArray<MapData, abi::CountersValue>,
    unselected: PerCpuArray<MapData, u64>,
    /// The CPUs forwarding is spread over ([`FastPath::spread`]).
    cpus: spread::Cpus,
    /// Tunnel vNICs ([`FastPath::set_tunnel`]).
    tunnels: tunnel::Tunnels,
    /// The generations of the program's caches (`ebpf/xdp_cache.h`).
    gens: cache::Gens,
    /// Each VR's own addresses as set, to remove them on change.
    own: StdHashMap<u32, Vec<Ipv4Addr>>,
    attached: Vec<Attached>,
    /// The attachments, one per entry of `attached`: detached when the
    /// fast path is dropped, before the program is unloaded.
    links: Vec<XdpLink>,
    // Dropped last: the program, detached from its ports with it. (The
    // kernel keeps the maps a loaded program uses until it is unloaded.)
    ebpf: Ebpf,
}

impl std::fmt::Debug for FastPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastPath")
            .field("cfg", &self.cfg)
            .field("attached", &self.attached)
            .finish_non_exhaustive()
    }
}

fn map_err(map: &'static str, op: &'static str) -> impl FnOnce(MapError) -> FastError {
    move |e| FastError::Map {
        map,
        op,
        source: Box::new(e),
    }
}

fn take<T>(ebpf: &mut Ebpf, name: &'static str) -> Result<T, FastError>
where
    T: TryFrom<aya::maps::Map, Error = MapError>,
{
    let m = ebpf
        .take_map(name)
        .ok_or_else(|| map_err(name, "open")(MapError::InvalidName { name: name.into() }))?;
    T::try_from(m).map_err(map_err(name, "open"))
}

/// Whether a map operation failed only because the key was absent.
fn not_found(e: &MapError) -> bool {
    match e {
        MapError::KeyNotFound => true,
        MapError::SyscallError(s) => s.io_error.raw_os_error() == Some(2),
        _ => false,
    }
}

/// What a map's `op` (a remove) came to: whether the key was there, or
/// the error, naming `map` and `op`, for anything but a missing key.
fn removed(
    r: Result<(), MapError>,
    map: &'static str,
    op: &'static str,
) -> Result<bool, FastError> {
    match r {
        Ok(()) => Ok(true),
        Err(e) if not_found(&e) => Ok(false),
        Err(e) => Err(map_err(map, op)(e)),
    }
}

fn lpm_key(
    vr: u32,
    table: u32,
    addr: Ipv4Addr,
    len: u8,
) -> Result<LpmKey<abi::LpmData>, FastError> {
    if len > 32 {
        return Err(FastError::PrefixLen { len });
    }
    let masked = if len == 0 {
        0
    } else {
        u32::from(addr) & (u32::MAX << (32 - u32::from(len)))
    };
    Ok(LpmKey::new(
        abi::LPM_FIXED_BITS + u32::from(len),
        abi::LpmData {
            vr,
            table,
            addr: masked.to_be_bytes(),
        },
    ))
}

fn vr_ip(vr: u32, ip: Ipv4Addr) -> abi::VrIp {
    abi::VrIp {
        vr,
        addr: ip.octets(),
    }
}

fn select_key(k: &SelectKey) -> abi::SelectKey {
    abi::SelectKey {
        ifindex: k.ifindex,
        vlan: k.vlan.unwrap_or(abi::VLAN_NONE),
        dst_mac: k.dst_mac.unwrap_or([0; 6]),
    }
}

impl FastPath {
    /// Load the program with map sizes from `cfg` (the verifier runs
    /// here). Nothing is attached yet.
    ///
    /// # Errors
    /// [`FastError::Load`] or [`FastError::Program`] (with the verifier's
    /// log), [`FastError::Map`] if a map's key or value size differs from
    /// the layouts in `abi.rs`, [`FastError::Config`].
    pub fn load(cfg: &FastConfig) -> Result<FastPath, FastError> {
        let mut ebpf = load_object(cfg)?;
        load_program(&mut ebpf, PROGRAM)?;
        let switch = cache::Switch::load(&mut ebpf)?;
        let vrs = vrconf::Vrs::load(&mut ebpf, cfg.max_vrs)?;
        Ok(FastPath {
            cfg: *cfg,
            select: take(&mut ebpf, SELECT)?,
            fib: fib::Fib::load(&mut ebpf, cfg, vrs.clone())?,
            vrs,
            addrs: take(&mut ebpf, ADDRS)?,
            src_tables: take(&mut ebpf, SRC_TABLES)?,
            sources: StdHashMap::new(),
            neighbours: take(&mut ebpf, NEIGHBOURS)?,
            out_ports: take(&mut ebpf, OUT_PORTS)?,
            xsks: take(&mut ebpf, XSKS)?,
            xsk_ports: take(&mut ebpf, XSK_PORTS)?,
            xsk_slots: Vec::new(),
            counters: take(&mut ebpf, COUNTERS)?,
            unselected: take(&mut ebpf, UNSELECTED)?,
            cpus: spread::Cpus::load(&mut ebpf, switch.clone())?,
            tunnels: tunnel::Tunnels::load(&mut ebpf, switch.clone())?,
            gens: cache::Gens::new(switch),
            own: StdHashMap::new(),
            attached: Vec::new(),
            links: Vec::new(),
            ebpf,
        })
    }

    /// The map sizes it was loaded with.
    pub fn config(&self) -> &FastConfig {
        &self.cfg
    }

    /// Attach the program to `ifname` (in the calling thread's network
    /// namespace), native XDP first, generic where native fails, and make
    /// it an out port ([`FastPath::add_port`]).
    ///
    /// # Errors
    /// [`FastError::NoSuchInterface`], [`FastError::Attach`] (both modes'
    /// reasons), [`FastError::XdpMap`].
    pub fn attach(&mut self, ifname: &str) -> Result<AttachMode, FastError> {
        let idx = ifindex(ifname)?;
        let link = attach_either(program(&mut self.ebpf, PROGRAM)?, PROGRAM, ifname, idx)?;
        let mode = link.mode();
        // Undone (the link dropped, so detached) if this fails.
        self.add_port(idx)?;
        self.links.push(link);
        self.attached.push(Attached {
            ifname: ifname.to_string(),
            ifindex: idx,
            mode,
        });
        Ok(mode)
    }

    /// The ports attached so far.
    pub fn attached(&self) -> &[Attached] {
        &self.attached
    }

    /// Let the fast path send frames out of `ifindex` (the DEVMAP
    /// `out_ports`). [`FastPath::attach`] does it for the ports it
    /// attaches to.
    ///
    /// # Errors
    /// [`FastError::XdpMap`] (for instance, no such interface).
    pub fn add_port(&mut self, ifindex: u32) -> Result<(), FastError> {
        self.out_ports
            .insert(ifindex, ifindex, None, 0)
            .map_err(|e| FastError::XdpMap {
                map: OUT_PORTS,
                op: "insert",
                source: Box::new(e),
            })
    }

    /// Stop sending frames out of `ifindex`: they go to the slow path.
    /// Returns whether it was an out port.
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn remove_port(&mut self, ifindex: u32) -> Result<bool, FastError> {
        removed(self.out_ports.remove(ifindex), OUT_PORTS, "remove")
    }

    fn check_vr(&self, vr: u32) -> Result<(), FastError> {
        if vr < self.cfg.max_vrs {
            Ok(())
        } else {
            Err(FastError::VrRange {
                vr,
                max: self.cfg.max_vrs,
            })
        }
    }

    /// Add or replace a select table entry. Replacing an entry that has a
    /// token bucket with one that has one keeps the bucket's state (its
    /// tokens, at most the new burst, and its refill time): a rate or path
    /// change takes effect in place, without a fresh burst. A new bucket
    /// starts full.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::Config`] (a VLAN above 4095, a
    /// rate or burst of 0 or above 10^10: [`MAX_RATE_PPS`], [`MAX_BURST`]),
    /// [`FastError::Map`] (the table is full).
    pub fn set_select(&mut self, key: SelectKey, entry: SelectEntry) -> Result<(), FastError> {
        self.check_vr(entry.vr)?;
        if key.vlan.is_some_and(|v| v > 4095) {
            return Err(FastError::Config {
                why: "select key: VLAN id above 4095",
            });
        }
        let path = match entry.path {
            Path::Fast => abi::PATH_FAST,
            Path::Slow => abi::PATH_SLOW,
            Path::Drop => abi::PATH_DROP,
        };
        let old = self.select.get(&select_key(&key), 0).ok();
        let value = bucket::select_value(&entry, path, old)?;
        self.select
            .insert(select_key(&key), value, 0)
            .map_err(map_err(SELECT, "insert"))?;
        self.gens.raise(cache::Cached::Select)
    }

    /// Remove a select table entry; its frames then go to the slow path.
    /// Returns whether it existed.
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn remove_select(&mut self, key: SelectKey) -> Result<bool, FastError> {
        let was = removed(self.select.remove(&select_key(&key)), SELECT, "remove")?;
        self.gens.raise(cache::Cached::Select)?;
        Ok(was)
    }

    /// Set VR `vr` up for the fast path: its routing mode and own
    /// addresses (replacing those set before). Routes, source tables and
    /// neighbours are set apart and kept.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::Map`].
    pub fn set_vr(&mut self, vr: u32, cfg: &VrFastConfig) -> Result<(), FastError> {
        self.check_vr(vr)?;
        let old = self.own.remove(&vr).unwrap_or_default();
        for ip in old.iter().filter(|ip| !cfg.addrs.contains(ip)) {
            removed(self.addrs.remove(&vr_ip(vr, *ip)), ADDRS, "remove")?;
        }
        for ip in &cfg.addrs {
            self.addrs
                .insert(vr_ip(vr, *ip), 1, 0)
                .map_err(map_err(ADDRS, "insert"))?;
        }
        self.own.insert(vr, cfg.addrs.clone());
        let mode = match cfg.mode {
            RoutingMode::Dst => abi::MODE_DST,
            RoutingMode::Src => abi::MODE_SRC,
            RoutingMode::SrcDst => abi::MODE_SRC_DST,
        };
        // The addresses in `addrs` first: a VR with more than the inline
        // ones is looked up there as soon as its conf says so.
        let mut conf = abi::VrConf {
            mode,
            fast: 1,
            naddrs: cfg.addrs.len() as u32,
            ..abi::VrConf::default()
        };
        for (slot, ip) in conf.addr.iter_mut().zip(&cfg.addrs) {
            *slot = ip.octets();
        }
        self.vrs.set_conf(vr, &conf)
    }

    /// Take VR `vr` off the fast path: its frames selected fast go to the
    /// slow path; its own addresses are removed (routes and neighbours are
    /// kept, for a move back).
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::Map`].
    pub fn remove_vr(&mut self, vr: u32) -> Result<(), FastError> {
        self.check_vr(vr)?;
        self.vrs.set_conf(vr, &abi::VrConf::default())?;
        for ip in self.own.remove(&vr).unwrap_or_default() {
            removed(self.addrs.remove(&vr_ip(vr, ip)), ADDRS, "remove")?;
        }
        Ok(())
    }

    /// Add or replace a route of VR `vr` in table `table`. `prefix` is
    /// the destination prefix (modes dst and src-dst) or the source prefix
    /// (mode src), as `vrhost_fib::PolicyFib::insert` takes them; dst and
    /// src modes use table 0, src-dst the tables that
    /// [`FastPath::set_source_table`] selects.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::PrefixLen`], [`FastError::Config`]
    /// (the FIB is full: nothing changed), [`FastError::Map`].
    pub fn add_route(
        &mut self,
        vr: u32,
        table: u32,
        prefix: (Ipv4Addr, u8),
        hop: NextHop,
    ) -> Result<(), FastError> {
        self.check_vr(vr)?;
        self.fib.insert(vr, table, prefix, hop).map(drop)
    }

    /// Remove a route; returns whether it existed.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::PrefixLen`], [`FastError::Map`].
    pub fn remove_route(
        &mut self,
        vr: u32,
        table: u32,
        prefix: (Ipv4Addr, u8),
    ) -> Result<bool, FastError> {
        self.check_vr(vr)?;
        Ok(self.fib.remove(vr, table, prefix)?.is_some())
    }

    /// src-dst mode: packets from `src_prefix` (longest match) are routed
    /// by table `table`, with no fallback to another table.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::PrefixLen`], [`FastError::Config`]
    /// (no table slot left), [`FastError::Map`].
    pub fn set_source_table(
        &mut self,
        vr: u32,
        src_prefix: (Ipv4Addr, u8),
        table: u32,
    ) -> Result<(), FastError> {
        self.check_vr(vr)?;
        let key = lpm_key(vr, 0, src_prefix.0, src_prefix.1)?;
        let id = (vr, u32::from_be_bytes(key.data().addr), src_prefix.1);
        let slot = self.fib.hold_table(vr, table)?;
        if let Err(e) = self.src_tables.insert(&key, slot, 0) {
            self.fib.drop_table(vr, table)?;
            return Err(map_err(SRC_TABLES, "insert")(e));
        }
        if let Some(old) = self.sources.insert(id, table) {
            self.fib.drop_table(vr, old)?;
        }
        Ok(())
    }

    /// Remove a source prefix; returns whether it existed.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::PrefixLen`], [`FastError::Map`].
    pub fn remove_source_table(
        &mut self,
        vr: u32,
        src_prefix: (Ipv4Addr, u8),
    ) -> Result<bool, FastError> {
        self.check_vr(vr)?;
        let key = lpm_key(vr, 0, src_prefix.0, src_prefix.1)?;
        let was = removed(self.src_tables.remove(&key), SRC_TABLES, "remove")?;
        let id = (vr, u32::from_be_bytes(key.data().addr), src_prefix.1);
        if let Some(table) = self.sources.remove(&id) {
            self.fib.drop_table(vr, table)?;
        }
        Ok(was)
    }

    /// Add or replace neighbour `ip` of VR `vr`.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::Map`] (the table is full).
    pub fn set_neighbour(&mut self, vr: u32, ip: Ipv4Addr, n: Neighbour) -> Result<(), FastError> {
        self.check_vr(vr)?;
        let value = abi::NeighValue {
            dst_mac: n.mac,
            src_mac: n.src_mac,
            ifindex: n.ifindex,
        };
        self.neighbours
            .insert(vr_ip(vr, ip), value, 0)
            .map_err(map_err(NEIGHBOURS, "insert"))?;
        self.gens.raise(cache::Cached::Neighbours)
    }

    /// Remove a neighbour (frames to it then go to the slow path, which
    /// resolves it); returns whether it existed.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::Map`].
    pub fn remove_neighbour(&mut self, vr: u32, ip: Ipv4Addr) -> Result<bool, FastError> {
        self.check_vr(vr)?;
        let was = removed(self.neighbours.remove(&vr_ip(vr, ip)), NEIGHBOURS, "remove")?;
        self.gens.raise(cache::Cached::Neighbours)?;
        Ok(was)
    }

    /// Share the slow path: frames for the slow path that arrive on port
    /// `ifindex`, rx queue `queue`, go to AF_XDP socket `fd` (bound to that
    /// queue of that port). Without a socket they go to the kernel stack
    /// (XDP_PASS). The XSKMAP is keyed by port and queue (`xsk_ports`
    /// gives each port a range of it), since one program serves every
    /// port and queue numbers repeat from port to port.
    ///
    /// # Errors
    /// [`FastError::Config`] (queue at or past `max_queues`, more than
    /// `max_ports` ports), [`FastError::Map`] (not an XDP socket, ...).
    pub fn set_xsk(&mut self, ifindex: u32, queue: u32, fd: impl AsFd) -> Result<(), FastError> {
        let base = self.xsk_base(ifindex, queue)?;
        self.xsks
            .set(base + queue, fd.as_fd().as_raw_fd(), 0)
            .map_err(map_err(XSKS, "set"))
    }

    /// Make `port` the slow path of its interface: the socket of each of
    /// its rx queues goes in the XSKMAP ([`FastPath::set_xsk`]), and
    /// `xsk_ports` gives the interface its range there. From then on the frames the
    /// program sends to the slow path on that interface (no select entry,
    /// path slow, or what the fast path cannot do) reach the port's
    /// `rx_burst`. The port keeps its sockets; when it closes them the
    /// kernel takes them out of the XSKMAP, and those frames go to the
    /// kernel stack (XDP_PASS) until another port is served.
    ///
    /// The port must have been opened on an interface this fast path is
    /// attached to, in [`vrhost_io::af_xdp::XdpProgram::External`] mode,
    /// with the attach mode [`FastPath::attached`] reports for it (that is
    /// what its sockets were bound for: zero-copy frames flow only through
    /// a native attach).
    ///
    /// # Errors
    /// [`FastError::Config`]: the port runs its own program, the fast path
    /// is not attached to its interface or in another mode, or it has more
    /// queues than `max_queues` (nothing is written then);
    /// [`FastError::Map`].
    pub fn serve(&mut self, port: &AfXdpPort) -> Result<(), FastError> {
        if port.program() != XdpProgram::External {
            return Err(FastError::Config {
                why: "serve: the AF_XDP port runs its own XDP program (open it with \
                      XdpProgram::External)",
            });
        }
        let Some(on) = self.attached.iter().find(|a| a.ifindex == port.ifindex()) else {
            return Err(FastError::Config {
                why: "serve: the fast path is not attached to the AF_XDP port's interface",
            });
        };
        if on.mode != port.mode().attach {
            return Err(FastError::Config {
                why: "serve: the AF_XDP port was bound for another attach mode than the \
                      fast path's on its interface",
            });
        }
        if port.queues() > self.cfg.max_queues as usize {
            return Err(FastError::Config {
                why: "serve: the AF_XDP port has more rx queues than max_queues",
            });
        }
        let ifindex = port.ifindex();
        for (queue, fd) in port.sockets() {
            self.set_xsk(ifindex, queue, fd)?;
        }
        Ok(())
    }

    /// Remove the socket of port `ifindex`, queue `queue`, if any: its
    /// slow-path frames go to the kernel stack. (The kernel's XSKMAP
    /// deletes an empty slot without complaint, so this cannot say
    /// whether there was one.)
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn remove_xsk(&mut self, ifindex: u32, queue: u32) -> Result<(), FastError> {
        let q = self.cfg.max_queues;
        match self.xsk_slots.iter().position(|i| *i == ifindex) {
            Some(slot) if queue < q => {
                removed(self.xsks.unset(slot as u32 * q + queue), XSKS, "unset").map(drop)
            }
            _ => Ok(()),
        }
    }

    /// The first XSKMAP index of port `ifindex`, given one if it has none.
    fn xsk_base(&mut self, ifindex: u32, queue: u32) -> Result<u32, FastError> {
        let q = self.cfg.max_queues;
        if queue >= q {
            return Err(FastError::Config {
                why: "AF_XDP socket: rx queue at or past max_queues",
            });
        }
        if let Some(slot) = self.xsk_slots.iter().position(|i| *i == ifindex) {
            return Ok(slot as u32 * q);
        }
        let slot = self.xsk_slots.len() as u32;
        if slot >= self.cfg.max_ports {
            return Err(FastError::Config {
                why: "AF_XDP socket: more ports than max_ports",
            });
        }
        let base = slot * q;
        self.xsk_ports
            .insert(ifindex, abi::XskSlot { base, queues: q }, 0)
            .map_err(map_err(XSK_PORTS, "insert"))?;
        self.xsk_slots.push(ifindex);
        Ok(base)
    }

    /// VR `vr`'s counters, summed over CPUs.
    ///
    /// # Errors
    /// [`FastError::VrRange`], [`FastError::Map`].
    pub fn counters(&self, vr: u32) -> Result<FastCounters, FastError> {
        self.check_vr(vr)?;
        probe::sum(&self.counters, vr)
    }

    /// Frames that matched no select entry (sent to the slow path).
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn unselected(&self) -> Result<u64, FastError> {
        let per_cpu = self
            .unselected
            .get(&0, 0)
            .map_err(map_err(UNSELECTED, "get"))?;
        Ok(per_cpu.iter().fold(0u64, |a, v| a.wrapping_add(*v)))
    }

    /// The kernel's id of the loaded program (what `ip link` shows for a
    /// port it is attached to; [`CounterProbe::of_program`]).
    ///
    /// # Errors
    /// [`FastError::Program`].
    pub fn program_id(&mut self) -> Result<u32, FastError> {
        let prog = program(&mut self.ebpf, PROGRAM)?;
        let info = prog.info().map_err(|source| FastError::Program {
            program: PROGRAM,
            step: "info",
            source: Box::new(source),
        })?;
        Ok(info.id())
    }

    /// Run the program once on `frame` with `BPF_PROG_TEST_RUN` (no
    /// device involved: a redirect is reported, not done; the ingress
    /// port is the loopback of the calling thread's namespace, rx queue
    /// 0). Returns the verdict and the frame as the program left it.
    /// Maps and counters are the live ones.
    ///
    /// # Errors
    /// [`FastError::Program`].
    pub fn test_run(&mut self, frame: &[u8]) -> Result<(Action, Vec<u8>), FastError> {
        let prog = program(&mut self.ebpf, PROGRAM)?;
        // Room for a frame the program grows (a tunnel's outer headers).
        let mut out = vec![0u8; frame.len() + 256];
        let r = prog
            .test_run(TestRunOptions {
                data_in: Some(frame),
                data_out: Some(&mut out),
                ..TestRunOptions::default()
            })
            .map_err(|source| FastError::Program {
                program: PROGRAM,
                step: "test run",
                source: Box::new(source),
            })?;
        out.truncate(r.data_size_out as usize);
        Ok((Action::from_raw(r.return_value), out))
    }
}

#[cfg(test)]
mod bucket_tests;
#[cfg(test)]
mod differential;
#[cfg(test)]
mod routes_tests;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;
