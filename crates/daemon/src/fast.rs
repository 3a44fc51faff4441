//! The daemon's fast path (`[host] fast_path = true`): one loaded
//! [`FastPath`], attached to every `af_xdp` port, whose maps are kept in
//! step with the plan in force.
//!
//! For each VR the fast path can carry (its plan's `fast` keys, whatever
//! its current path), the daemon writes the VR's state into the maps:
//! its own addresses, its routes (connected subnets, config and API
//! routes) with their next hops, and its neighbours (static ones at
//! once; those its router learns by ARP as they are reported, see
//! [`FastState::learn`]); then its select entries, with the path the
//! plan says. So a move is one select-table update per key, made after
//! the routes and neighbours are in place ([`FastState::reconcile`]
//! writes the state of every VR before any select entry). Frames already
//! in the slow path's rings are not touched: they drain in order.
//!
//! What is written is kept per VR ([`Written`]) and each reconcile writes
//! only the difference, so a config change or route change that does not
//! touch a VR leaves its entries alone. The routing mode is the VR's
//! router's (`router.mode`): in mode src the routes' prefixes are source
//! prefixes in table 0; in mode src-dst `routes` are table 0, selected by
//! `0.0.0.0/0`, and `source_tables[i]` table `i + 1`; connected subnets
//! are routes in mode dst only, as in the router.
//!
//! Counters: the program counts per VR id; a VR's id is taken when it is
//! first written and freed when it goes, and the counters it had at that
//! moment are kept as its base (the per-CPU array cannot be cleared), so a
//! VR's fast counters start at 0.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Instant;

use vrhost_fast::{
    AttachMode, FastConfig, FastCounters, FastPath, FastTunnel, Neighbour, NextHop, Path,
    RoutingMode, SelectEntry, SelectKey, TokenBucket, VrFastConfig,
};
use vrhost_host::config::{DataPath, FastConf, Plan, VrPlan};
use vrhost_io::af_xdp::AfXdpPort;
use vrhost_router::{RouteConfig, RouterConfig};

use crate::fast_routes::{FileRoutes, RouteFile, RouteFiles, Routes, all_keys, changes, log_write};
use crate::fast_tunnels::{real_port, tunnel_id, tunnels_of, vnic_port};

/// A neighbour its router resolved: address, MAC, vNIC.
pub type Learned = (Ipv4Addr, [u8; 6], u16);

/// A VR's API routes, by (prefix, length).
pub type ApiRoutes = BTreeMap<(u32, u8), RouteConfig>;
/// A select key as an ordered tuple: ifindex, VLAN, MAC.
type KeyTuple = (u32, Option<u16>, Option<[u8; 6]>);
/// Select entries: path and token bucket by key.
type Selects = BTreeMap<KeyTuple, (Path, Option<TokenBucket>)>;

/// What the maps should hold for one VR.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    /// Its routing mode.
    pub mode: RoutingMode,
    /// Its own addresses.
    pub addrs: Vec<Ipv4Addr>,
    /// Mode src-dst: the table of each source prefix.
    pub sources: BTreeMap<(Ipv4Addr, u8), u32>,
    /// Its routes (connected subnets, config and API routes).
    pub routes: Routes,
    /// Its route file, if it has one ([`crate::fast_routes`]).
    pub route_file: Option<RouteFile>,
    /// Config routes (table 0) that a route of the file replaces, as in
    /// the router (API routes are not among them: they come after).
    pub under_file: Vec<(u32, Ipv4Addr, u8)>,
    /// The route file's routes, under `routes`.
    pub file: Option<FileRoutes>,
    /// Its neighbours (out port attached to the fast path).
    pub neighbours: BTreeMap<Ipv4Addr, Neighbour>,
    /// Its select entries' paths and token buckets (its
    /// `rate_limit_pps`, the same on each of its keys).
    pub selects: Selects,
    /// Its tunnel vNICs the fast path carries, by vNIC (neighbours and
    /// select keys on one have its `fast_tunnels::vnic_port`).
    pub tunnels: BTreeMap<u16, FastTunnel>,
}

/// What was written for one VR, and its id.
#[derive(Debug, Clone)]
struct Written {
    id: u32,
    state: Desired,
    /// Its counters when it took the id.
    base: FastCounters,
}

/// The fast path of a running daemon.
pub struct FastState {
    fp: FastPath,
    /// Interface index of each attached port, by interface name.
    ifindex: BTreeMap<String, u32>,
    written: BTreeMap<String, Written>,
    /// Neighbours each VR's router reported, by VR.
    learned: BTreeMap<String, Vec<Learned>>,
    /// Per VR, the frames the fast path had handed to its slow path when
    /// its router was last asked for its neighbours, and the asks still
    /// due ([`FastState::neighbours_due`]).
    asked: BTreeMap<String, (u64, u8)>,
    /// The route files read, by VR.
    files: RouteFiles,
}

impl std::fmt::Debug for FastState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastState")
            .field("ifindex", &self.ifindex)
            .field("vrs", &self.written.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The loader's config for `[host.fast]`.
pub fn fast_config(c: &FastConf) -> FastConfig {
    FastConfig {
        max_vrs: c.max_vrs,
        max_routes: c.max_routes,
        max_route_tables: c.max_route_tables,
        max_route_groups: c.max_route_groups,
        max_neighbours: c.max_neighbours,
        max_addrs: c.max_addrs,
        max_select: c.max_select,
        ..FastConfig::default()
    }
}

fn mac_of(s: &str) -> Result<[u8; 6], String> {
    s.parse::<vrhost_packet::MacAddr>()
        .map(|m| m.0)
        .map_err(|e| format!("{s:?}: {e}"))
}

fn prefix_of(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (a, l) = vrhost_router::parse_prefix(s)?;
    let masked = if l == 0 {
        0
    } else {
        a & (u32::MAX << (32 - u32::from(l)))
    };
    Ok((Ipv4Addr::from(masked), l))
}

fn ip_of(s: &str) -> Result<Ipv4Addr, String> {
    s.parse().map_err(|_| format!("{s:?}: not an IPv4 address"))
}

/// The gateway standing for next hop `i` of the config when it has a MAC
/// and no address: `0.0.0.0/8` ("this network", RFC 1122 3.2.1.3) holds
/// no real gateway, so `0.0.0.(i+1)` cannot clash with one; the neighbour
/// map keys it like any other.
fn nexthop_gateway(i: u32) -> Ipv4Addr {
    Ipv4Addr::from((i + 1) & 0x00ff_ffff)
}

/// The next hop of the config's `nexthops[i]`, if there is one.
fn nexthop_hop(rc: &RouterConfig, i: u32) -> Option<Result<NextHop, String>> {
    let nh = rc.nexthops.get(i as usize)?;
    Some(match &nh.via {
        Some(v) => ip_of(v).map(NextHop::Gateway),
        None => Ok(NextHop::Gateway(nexthop_gateway(i))),
    })
}

/// What the maps should hold for VR `vr` of `plan` (but the routes of
/// its route file: [`Desired::route_file`] says which): `api` its API routes,
/// `learned` the neighbours its router reported, `ifindex` the attached
/// ports by interface. Neighbours whose vNIC's port the fast path is not
/// attached to are left out (frames to them go to the slow path).
///
/// # Errors
/// The VR's router config does not read (it was checked: not expected).
pub fn desired(
    plan: &Plan,
    vr: &VrPlan,
    api: &ApiRoutes,
    learned: &[Learned],
    ifindex: &BTreeMap<String, u32>,
) -> Result<Desired, String> {
    let rc: RouterConfig = serde_json::from_value(vr.config.clone()).map_err(|e| e.to_string())?;
    let tunnels = tunnels_of(plan, vr, ifindex);
    let port_of = |vnic: u16| -> Option<u32> {
        if tunnels.contains_key(&vnic) {
            return Some(vnic_port(vnic));
        }
        let p = *vr.vnic_ports.get(usize::from(vnic))?;
        ifindex.get(&plan.ports.get(p)?.2).copied()
    };
    let mut d = Desired {
        mode: rc.mode,
        ..Desired::default()
    };
    let mut subnets = Vec::new();
    let mut macs = Vec::new();
    for (j, v) in rc.vnics.iter().enumerate() {
        macs.push(mac_of(&v.mac)?);
        for a in &v.addrs {
            let (own, len) = vrhost_router::parse_prefix(a)?;
            d.addrs.push(Ipv4Addr::from(own));
            let net = prefix_of(a)?;
            if rc.mode == RoutingMode::Dst {
                d.routes.insert((0, net.0, net.1), NextHop::Connected);
            }
            subnets.push((j as u16, net, len));
        }
    }
    let vnic_for = |ip: Ipv4Addr| {
        subnets.iter().find_map(|&(j, (net, _), len)| {
            let m = if len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(len))
            };
            (u32::from(ip) & m == u32::from(net)).then_some(j)
        })
    };
    let mut neigh = |ip: Ipv4Addr, mac: [u8; 6], vnic: Option<u16>| {
        let Some(j) = vnic.or_else(|| vnic_for(ip)) else {
            return;
        };
        if let (Some(ifx), Some(src)) = (port_of(j), macs.get(usize::from(j))) {
            let n = Neighbour {
                mac,
                src_mac: *src,
                ifindex: ifx,
            };
            d.neighbours.insert(ip, n);
        }
    };
    for (i, nh) in rc.nexthops.iter().enumerate() {
        if !nh.mac.is_empty() {
            let gw = match &nh.via {
                Some(v) => ip_of(v)?,
                None => nexthop_gateway(i as u32),
            };
            neigh(gw, mac_of(&nh.mac)?, Some(nh.vnic));
        }
    }
    for n in &rc.neighbours {
        neigh(ip_of(&n.ip)?, mac_of(&n.mac)?, n.vnic);
    }
    for &(ip, mac, vnic) in learned {
        // A static entry wins over what ARP found, as in the router.
        if !rc.neighbours.iter().any(|n| n.ip == ip.to_string()) {
            neigh(ip, mac, Some(vnic));
        }
    }
    let mut tables = vec![(0, rc.routes.iter().chain(api.values()).collect::<Vec<_>>())];
    if rc.mode == RoutingMode::SrcDst {
        d.sources.insert((Ipv4Addr::UNSPECIFIED, 0), 0);
    }
    for st in &rc.source_tables {
        let n = d.sources.len() as u32;
        let t = *d.sources.entry(prefix_of(&st.src)?).or_insert(n);
        tables.push((t, st.routes.iter().collect()));
    }
    for (t, r) in tables
        .into_iter()
        .flat_map(|(t, rs)| rs.into_iter().map(move |r| (t, r)))
    {
        let hop = match (&r.via, r.nexthop) {
            (Some(v), _) => NextHop::Gateway(ip_of(v)?),
            (None, Some(i)) => nexthop_hop(&rc, i)
                .ok_or_else(|| format!("route {}: no next hop {i}", r.prefix))??,
            (None, None) => return Err(format!("route {}: no next hop", r.prefix)),
        };
        let (p, l) = prefix_of(&r.prefix)?;
        d.routes.insert((t, p, l), hop);
    }
    if let Some(path) = &rc.route_file {
        let hops = (0..rc.nexthops.len() as u32).filter_map(|i| nexthop_hop(&rc, i));
        d.route_file = Some(RouteFile {
            path: path.clone(),
            hops: hops.collect::<Result<_, _>>()?,
        });
        for r in &rc.routes {
            let (p, l) = prefix_of(&r.prefix)?;
            if !api.contains_key(&(u32::from(p), l)) {
                d.under_file.push((0, p, l));
            }
        }
    }
    d.selects = selects(plan, vr, ifindex);
    d.tunnels = tunnels;
    Ok(d)
}

/// VR `vr`'s select entries: each of its keys on an attached port, with
/// its path and port bucket.
fn selects(plan: &Plan, vr: &VrPlan, ifindex: &BTreeMap<String, u32>) -> Selects {
    let path = match vr.path {
        DataPath::Slow => Path::Slow,
        DataPath::Fast => Path::Fast,
    };
    let limit = vr.port_limit.map(|l| TokenBucket {
        rate_pps: l.rate_pps,
        burst: l.burst,
    });
    let mut m = Selects::new();
    for k in vr.fast.as_deref().unwrap_or_default() {
        let Some(ifx) = plan.ports.get(k.port).and_then(|p| ifindex.get(&p.2)) else {
            continue;
        };
        m.insert((*ifx, k.vlan, k.dst_mac), (path, limit));
    }
    // Every frame out of a tunnel is its vNIC's.
    for j in tunnels_of(plan, vr, ifindex).keys() {
        m.insert((vnic_port(*j), None, None), (path, limit));
    }
    m
}

/// The select key of `t` for VR id `vr`.
fn key(vr: u32, t: &KeyTuple) -> SelectKey {
    SelectKey {
        ifindex: real_port(vr, t.0),
        vlan: t.1,
        dst_mac: t.2,
    }
}

/// Write each entry of `new` that `old` (what the maps hold) lacks or has
/// otherwise with `set`, and record it in `old`; stops at the first error.
fn write_changed<K: Ord + Copy, V: PartialEq + Copy>(
    old: &mut BTreeMap<K, V>,
    new: &BTreeMap<K, V>,
    mut set: impl FnMut(K, V) -> Result<(), vrhost_fast::FastError>,
) -> Result<(), String> {
    for (k, v) in new {
        if old.get(k) != Some(v) {
            set(*k, *v).map_err(fe)?;
            old.insert(*k, *v);
        }
    }
    Ok(())
}

/// Remove with `remove` each entry of `old` (what the maps hold) that `new`
/// lacks, and drop it from `old`; stops at the first error.
fn remove_stale<K: Ord + Copy, V, R>(
    old: &mut BTreeMap<K, V>,
    new: &BTreeMap<K, V>,
    mut remove: impl FnMut(K) -> Result<R, vrhost_fast::FastError>,
) -> Result<(), String> {
    let stale: Vec<_> = old
        .keys()
        .filter(|k| !new.contains_key(k))
        .copied()
        .collect();
    for k in stale {
        remove(k).map_err(fe)?;
        old.remove(&k);
    }
    Ok(())
}

fn fe(e: vrhost_fast::FastError) -> String {
    e.to_string()
}

/// `a - b`, field by field (counters since `b` was read).
fn since(a: FastCounters, b: FastCounters) -> FastCounters {
    let d = |x: u64, y: u64| x.wrapping_sub(y);
    FastCounters {
        rx: d(a.rx, b.rx),
        fwd: d(a.fwd, b.fwd),
        to_slow_select: d(a.to_slow_select, b.to_slow_select),
        to_slow_not_ip: d(a.to_slow_not_ip, b.to_slow_not_ip),
        to_slow_options: d(a.to_slow_options, b.to_slow_options),
        to_slow_bad_checksum: d(a.to_slow_bad_checksum, b.to_slow_bad_checksum),
        to_slow_group: d(a.to_slow_group, b.to_slow_group),
        to_slow_local: d(a.to_slow_local, b.to_slow_local),
        to_slow_no_route: d(a.to_slow_no_route, b.to_slow_no_route),
        to_slow_ttl: d(a.to_slow_ttl, b.to_slow_ttl),
        to_slow_no_neighbour: d(a.to_slow_no_neighbour, b.to_slow_no_neighbour),
        to_slow_no_port: d(a.to_slow_no_port, b.to_slow_no_port),
        drop_select: d(a.drop_select, b.drop_select),
        drop_rate_limit: d(a.drop_rate_limit, b.drop_rate_limit),
        drop_bad_header: d(a.drop_bad_header, b.drop_bad_header),
    }
}

impl FastState {
    /// Load the program with `[host.fast]`'s map sizes (the verifier runs
    /// here), its forwarding spread over `cpus`.
    ///
    /// # Errors
    /// The loader's error, with the verifier's reason.
    pub fn load(c: &FastConf) -> Result<FastState, String> {
        let mut fp = FastPath::load(&fast_config(c)).map_err(fe)?;
        fp.spread(&c.cpus)
            .map_err(|e| format!("host.fast.cpus {:?}: {e}", c.cpus))?;
        Ok(FastState {
            fp,
            ifindex: BTreeMap::new(),
            written: BTreeMap::new(),
            learned: BTreeMap::new(),
            asked: BTreeMap::new(),
            files: RouteFiles::default(),
        })
    }

    /// Attach to interface `iface` (once); the attach mode an AF_XDP port
    /// on it must bind its sockets for.
    ///
    /// # Errors
    /// Both attach modes failed.
    pub fn attach(&mut self, iface: &str) -> Result<AttachMode, String> {
        if let Some(a) = self.fp.attached().iter().find(|a| a.ifname == iface) {
            return Ok(a.mode);
        }
        let mode = self.fp.attach(iface).map_err(fe)?;
        let idx = self.fp.attached().last().expect("just attached").ifindex;
        self.ifindex.insert(iface.to_string(), idx);
        tracing::info!(interface = iface, ifindex = idx, mode = %mode, "fast path attached");
        Ok(mode)
    }

    /// Make `port` (opened in External mode on an attached interface) the
    /// slow path of its interface.
    ///
    /// # Errors
    /// [`FastPath::serve`]'s.
    pub fn serve(&mut self, port: &AfXdpPort) -> Result<(), String> {
        self.fp.serve(port).map_err(fe)
    }

    /// The fast path's counters of VR `vr` since it was first written.
    pub fn counters(&self, vr: &str) -> Option<FastCounters> {
        let w = self.written.get(vr)?;
        let now = self.fp.counters(w.id).ok()?;
        Some(since(now, w.base))
    }

    /// The fast path's counters of VR `vr`'s tunnel vNICs, by vNIC (each
    /// since its tunnel was written).
    pub fn tunnel_counters(&self, vr: &str) -> BTreeMap<u16, vrhost_fast::TunnelCounters> {
        let Some(w) = self.written.get(vr) else {
            return BTreeMap::new();
        };
        (w.state.tunnels.keys())
            .filter_map(|&j| Some((j, self.fp.tunnel_counters_of(tunnel_id(w.id, j)).ok()?)))
            .collect()
    }

    /// Start VR `vr`'s fast counters again from 0, as its slow ones do
    /// when a changed definition restarts it.
    pub fn rebase(&mut self, vr: &str) {
        if let Some(w) = self.written.get_mut(vr)
            && let Ok(now) = self.fp.counters(w.id)
        {
            w.base = now;
        }
    }

    /// Record the neighbours VR `vr`'s router has resolved; returns
    /// whether they differ from those recorded (then a reconcile writes
    /// them).
    pub fn learn(&mut self, vr: &str, mut found: Vec<Learned>) -> bool {
        found.sort_unstable();
        let old = self.learned.get(vr);
        let changed = !(old == Some(&found) || (old.is_none() && found.is_empty()));
        // Recorded even when empty: the router has answered once.
        self.learned.insert(vr.to_string(), found);
        changed
    }

    /// Whether VR `vr`'s router has told the neighbours it resolved (none,
    /// perhaps) since the VR came to the fast path.
    pub fn has_learned(&self, vr: &str) -> bool {
        self.learned.contains_key(vr)
    }

    /// Whether VR `vr`'s router may have resolved a neighbour since it was
    /// last asked, so that it is worth asking (and waking) now: a router
    /// learns a neighbour only from a frame (ARP), and every frame of a
    /// VR the fast path carries passes the port's program, which counts
    /// what it hands to the slow path. See [`asks_due`].
    pub fn neighbours_due(&mut self, vr: &str) -> bool {
        let handed = self.counters(vr).map_or(0, |c| to_slow(&c));
        let seen = self.asked.entry(vr.to_string()).or_insert((u64::MAX, 0));
        asks_due(seen, handed)
    }

    /// VRs whose state is in the maps.
    pub fn vrs(&self) -> impl Iterator<Item = &str> {
        self.written.keys().map(String::as_str)
    }

    /// Bring the maps in step with `plan`: the state of every VR the fast
    /// path can carry first (own addresses, routes, neighbours), then
    /// their select entries; VRs gone (or no longer carried) lose their
    /// select entries first, then their state. `api` gives each VR's API
    /// routes.
    ///
    /// # Errors
    /// A map update failed (a map full, ...): the message names the VR;
    /// what was written before stays.
    pub fn reconcile<'r>(
        &mut self,
        plan: &Plan,
        api: &dyn Fn(&str) -> Option<&'r ApiRoutes>,
    ) -> Result<(), String> {
        let none = ApiRoutes::new();
        let carried: Vec<&VrPlan> = plan.vrs.iter().filter(|v| v.fast.is_ok()).collect();
        let gone: Vec<String> = (self.written.keys())
            .filter(|n| !carried.iter().any(|v| &v.name == *n))
            .cloned()
            .collect();
        for name in gone {
            self.forget(&name)
                .map_err(|e| format!("VR {name}: fast path: {e}"))?;
        }
        let mut want = Vec::new();
        for v in &carried {
            let learned = self.learned.get(&v.name).map_or(&[][..], Vec::as_slice);
            let d = desired(
                plan,
                v,
                api(&v.name).unwrap_or(&none),
                learned,
                &self.ifindex,
            )
            .map_err(|e| format!("VR {}: fast path: {e}", v.name))?;
            let d = self
                .with_file(&v.name, d)
                .map_err(|e| format!("VR {}: fast path: {e}", v.name))?;
            want.push((v.name.clone(), d));
        }
        self.files
            .retain(&|n| want.iter().any(|(w, d)| w == n && d.file.is_some()));
        for (name, d) in &want {
            self.write_state(name, d)
                .map_err(|e| format!("VR {name}: fast path: {e}"))?;
        }
        for (name, d) in &want {
            self.write_selects(name, &d.selects)
                .map_err(|e| format!("VR {name}: fast path: {e}"))?;
        }
        Ok(())
    }

    /// Write the select entries of VRs `names` as `plan` has them, and
    /// nothing else: a move whose routes and neighbours are already in
    /// the maps (every VR the fast path carries has them, whatever its
    /// path), made before the rest of a config change so that the switch
    /// is one update per key. A VR not written yet is left to
    /// [`FastState::reconcile`].
    ///
    /// # Errors
    /// A map update failed; the message names the VR.
    pub fn switch(&mut self, plan: &Plan, names: &[String]) -> Result<(), String> {
        for v in plan.vrs.iter().filter(|v| names.contains(&v.name)) {
            if v.fast.is_err() || !self.written.contains_key(&v.name) {
                continue;
            }
            let sel = selects(plan, v, &self.ifindex);
            self.write_selects(&v.name, &sel)
                .map_err(|e| format!("VR {}: fast path: {e}", v.name))?;
        }
        Ok(())
    }

    /// `d` with its route file's routes (read if not yet, or changed),
    /// and without the config routes they replace.
    fn with_file(&mut self, vr: &str, mut d: Desired) -> Result<Desired, String> {
        let Some(rf) = &d.route_file else {
            return Ok(d);
        };
        let file = self.files.routes(vr, rf)?;
        for k in &d.under_file {
            if file.contains_key(k) {
                d.routes.remove(k);
            }
        }
        d.file = Some(file);
        Ok(d)
    }

    /// The lowest VR id no VR holds.
    fn free_id(&self) -> Result<u32, String> {
        let max = self.fp.config().max_vrs;
        (0..max)
            .find(|i| !self.written.values().any(|w| w.id == *i))
            .ok_or_else(|| format!("all {max} VR ids taken (host.fast.max_vrs)"))
    }

    fn write_state(&mut self, name: &str, d: &Desired) -> Result<(), String> {
        let fresh = !self.written.contains_key(name);
        if fresh {
            let id = self.free_id()?;
            let base = self.fp.counters(id).map_err(fe)?;
            let w = Written {
                id,
                state: Desired::default(),
                base,
            };
            self.written.insert(name.to_string(), w);
        }
        let w = self.written.get_mut(name).expect("inserted above");
        let (id, old) = (w.id, &mut w.state);
        let fp = &mut self.fp;
        if fresh || old.addrs != d.addrs || old.mode != d.mode {
            let cfg = VrFastConfig {
                mode: d.mode,
                addrs: d.addrs.clone(),
            };
            fp.set_vr(id, &cfg).map_err(fe)?;
            old.addrs = d.addrs.clone();
            old.mode = d.mode;
        }
        // Tunnels are set before the neighbours behind them and removed
        // after; routes are added after the neighbours they use and
        // removed before them.
        write_changed(&mut old.tunnels, &d.tunnels, |j, t| {
            fp.set_tunnel(tunnel_id(id, j), &t)
        })?;
        write_changed(&mut old.neighbours, &d.neighbours, |n, m| {
            let ifindex = real_port(id, m.ifindex);
            fp.set_neighbour(id, n, Neighbour { ifindex, ..m })
        })?;
        // Source prefixes select a table once its routes are in, and stop
        // before its routes go. Routes by the many (all or nothing): what
        // is written is recorded once all of it is (a write again is
        // harmless).
        let (add, remove) = changes(old, d);
        let t = Instant::now();
        fp.add_routes(id, &add).map_err(fe)?;
        log_write(name, add.len(), t);
        write_changed(&mut old.sources, &d.sources, |p, t| {
            fp.set_source_table(id, p, t)
        })?;
        remove_stale(&mut old.sources, &d.sources, |p| {
            fp.remove_source_table(id, p)
        })?;
        fp.remove_routes(id, &remove).map_err(fe)?;
        old.routes.clone_from(&d.routes);
        old.file.clone_from(&d.file);
        remove_stale(&mut old.neighbours, &d.neighbours, |n| {
            fp.remove_neighbour(id, n)
        })?;
        remove_stale(&mut old.tunnels, &d.tunnels, |j| {
            fp.remove_tunnel(tunnel_id(id, j))
        })
    }

    fn write_selects(&mut self, name: &str, selects: &Selects) -> Result<(), String> {
        let w = self.written.get_mut(name).expect("state written first");
        let (id, old) = (w.id, &mut w.state);
        let fp = &mut self.fp;
        // A changed rate or path rewrites the entry, which keeps the
        // bucket's state (`FastPath::set_select`).
        write_changed(&mut old.selects, selects, |k, (path, limit)| {
            let e = SelectEntry {
                vr: id,
                path,
                limit,
            };
            fp.set_select(key(id, &k), e)
        })?;
        remove_stale(&mut old.selects, selects, |k| fp.remove_select(key(id, &k)))
    }

    /// Take VR `name` out of the maps: its select entries first (its
    /// frames then go to the slow path), then its state; its id is freed.
    fn forget(&mut self, name: &str) -> Result<(), String> {
        let Some(w) = self.written.get(name) else {
            return Ok(());
        };
        let (id, st) = (w.id, w.state.clone());
        for k in st.selects.keys() {
            self.fp.remove_select(key(id, k)).map_err(fe)?;
        }
        self.fp.remove_vr(id).map_err(fe)?;
        for p in st.sources.keys() {
            self.fp.remove_source_table(id, *p).map_err(fe)?;
        }
        self.fp.remove_routes(id, &all_keys(&st)).map_err(fe)?;
        for n in st.neighbours.keys() {
            self.fp.remove_neighbour(id, *n).map_err(fe)?;
        }
        for j in st.tunnels.keys() {
            self.fp.remove_tunnel(tunnel_id(id, *j)).map_err(fe)?;
        }
        self.written.remove(name);
        self.learned.remove(name);
        self.asked.remove(name);
        Ok(())
    }
}

/// Asks of a router after the frames handed to its slow path last
/// changed: at once, and once more a poll later (the first may come
/// before the router took the frame that taught it).
const ASKS_AFTER_CHANGE: u8 = 2;

/// Whether to ask now, given `seen` (the frames handed to the slow path at
/// the last look, asks still due) and `handed` (those frames now); brings
/// `seen` up to date. A VR whose slow path gets nothing is asked nothing.
fn asks_due(seen: &mut (u64, u8), handed: u64) -> bool {
    if seen.0 != handed {
        *seen = (handed, ASKS_AFTER_CHANGE);
    }
    if seen.1 == 0 {
        return false;
    }
    seen.1 -= 1;
    true
}

/// Frames the fast path handed to a VR's slow path, every reason.
fn to_slow(c: &FastCounters) -> u64 {
    [
        c.to_slow_select,
        c.to_slow_not_ip,
        c.to_slow_options,
        c.to_slow_bad_checksum,
        c.to_slow_group,
        c.to_slow_local,
        c.to_slow_no_route,
        c.to_slow_ttl,
        c.to_slow_no_neighbour,
        c.to_slow_no_port,
    ]
    .iter()
    .fold(0u64, |a, b| a.wrapping_add(*b))
}

#[cfg(test)]
mod asks_tests {
    use super::asks_due;

    /// A router is asked twice after its slow path got frames (the first
    /// VR seen counts as a change), then not again until more come.
    #[test]
    fn a_router_is_asked_only_after_its_slow_path_got_frames() {
        let mut seen = (u64::MAX, 0);
        let asks: Vec<bool> = [0, 0, 0, 0, 5, 5, 5, 7, 7, 7]
            .iter()
            .map(|&h| asks_due(&mut seen, h))
            .collect();
        assert_eq!(
            asks,
            [
                true, true, false, false, true, true, false, true, true, false
            ]
        );
    }
}

#[cfg(test)]
#[path = "fast_modes_tests.rs"]
mod modes_tests;

#[cfg(test)]
#[path = "fast_file_tests.rs"]
mod file_tests;

#[cfg(test)]
#[path = "fast_tunnel_tests.rs"]
mod tunnel_tests;

#[cfg(test)]
#[path = "fast_tests.rs"]
mod tests;
