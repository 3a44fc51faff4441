//! Tunnel vNICs in the fast path: the `tun_locals`, `tun_in`, `tunnels`
//! and `tun_stats` maps of `ebpf/xdp_tunnel.h` ([`FastPath::set_tunnel`],
//! [`FastPath::remove_tunnel`], [`FastPath::tunnel_counters`], per tunnel
//! [`FastPath::tunnel_counters_of`]).
//!
//! A tunnel is known to the program by an id below 4096; its vNIC is the
//! port [`tunnel_ifindex`]`(id)`: a select key with that ifindex selects
//! the VR of the frames that come out of the tunnel, and a neighbour with
//! that ifindex is reached through the tunnel. VXLAN, plain UDP and
//! IP-in-IP encapsulation.

use std::collections::HashMap as StdHashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;

use aya::Ebpf;
use aya::maps::{Array, HashMap, MapData, PerCpuArray, PerCpuValues};

use crate::{FastError, FastPath, abi, map_err, removed, take};

pub(crate) const TUN_LOCALS: &str = "tun_locals";
pub(crate) const TUN_IN: &str = "tun_in";
pub(crate) const TUNNELS: &str = "tunnels";
pub(crate) const TUN_STATS: &str = "tun_stats";

/// Tunnel ids are `0..MAX_TUNNELS`.
pub const MAX_TUNNELS: u32 = abi::TUN_MAX;

/// The port a tunnel vNIC is to the program: in select keys (its tenant)
/// and neighbours (reached through it).
pub const fn tunnel_ifindex(id: u32) -> u32 {
    abi::TUN_IFINDEX | id
}

/// The encapsulations the fast path does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FastTunnelKind {
    /// VXLAN with this VNI (24 bits).
    Vxlan(u32),
    /// An Ethernet frame as a UDP payload.
    Udp,
    /// IPv4 in IPv4 (protocol 4): the inner packet only; an Ethernet header
    /// is made up for it on the way in.
    Ipip,
}

/// One tunnel, as the fast path needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FastTunnel {
    /// Encapsulation.
    pub kind: FastTunnelKind,
    /// The underlay port (its ifindex: frames in arrive there, frames out
    /// leave there; it must be an out port for the way out).
    pub ifindex: u32,
    /// Local underlay address.
    pub local: Ipv4Addr,
    /// Remote underlay address.
    pub remote: Ipv4Addr,
    /// UDP destination port (ignored for IP-in-IP).
    pub udp_port: u16,
    /// Outer source MAC (the underlay port's).
    pub local_mac: [u8; 6],
    /// Outer destination MAC; `None`: learned from the first valid frame
    /// received (until then frames out go to the slow path).
    pub peer_mac: Option<[u8; 6]>,
    /// IP-in-IP: the destination MAC of the Ethernet header made up for
    /// an inner packet (the vNIC's, as the host's tunnel table makes it).
    pub inner_mac: [u8; 6],
}

impl FastTunnel {
    fn kind_code(&self) -> u32 {
        match self.kind {
            FastTunnelKind::Vxlan(_) => abi::TUN_KIND_VXLAN,
            FastTunnelKind::Udp => abi::TUN_KIND_UDP,
            FastTunnelKind::Ipip => abi::TUN_KIND_IPIP,
        }
    }

    /// The UDP port its frames are told apart by (0: IP-in-IP).
    fn port(&self) -> u16 {
        match self.kind {
            FastTunnelKind::Ipip => 0,
            _ => self.udp_port,
        }
    }

    fn vni(&self) -> u32 {
        match self.kind {
            FastTunnelKind::Vxlan(v) => v,
            FastTunnelKind::Udp | FastTunnelKind::Ipip => 0,
        }
    }

    fn local_key(&self) -> abi::TunLocalKey {
        abi::TunLocalKey {
            ifindex: self.ifindex,
            local: self.local.octets(),
            udp_port: self.port(),
            pad: 0,
        }
    }

    fn in_key(&self) -> abi::TunInKey {
        abi::TunInKey {
            ifindex: self.ifindex,
            local: self.local.octets(),
            remote: self.remote.octets(),
            udp_port: self.port(),
            pad: 0,
            vni: self.vni(),
        }
    }

    fn value(&self) -> abi::TunnelValue {
        let flags = match self.peer_mac {
            Some(_) => abi::TUN_PEER_KNOWN,
            None => abi::TUN_LEARN,
        };
        abi::TunnelValue {
            kind: self.kind_code(),
            vni: self.vni(),
            local: self.local.octets(),
            remote: self.remote.octets(),
            ifindex: self.ifindex,
            udp_port: self.port(),
            local_mac: self.local_mac,
            peer_mac: self.peer_mac.unwrap_or([0; 6]),
            flags,
            ident: 0,
            inner_mac: self.inner_mac,
            pad: 0,
        }
    }
}

/// The program's tunnel counters, summed over CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TunnelCounters {
    /// Frames decapsulated (then handled as the vNIC's).
    pub decap: u64,
    /// Frames encapsulated and redirected to the underlay port.
    pub encap: u64,
    /// Tunnel frames with a bad outer header, to the slow path (which
    /// counts them by reason and drops them).
    pub to_slow_bad_outer: u64,
    /// Tunnel frames of no tunnel (VNI, addresses), to the slow path.
    pub to_slow_unknown: u64,
    /// Frames for a tunnel whose peer MAC is not known yet, to the slow
    /// path.
    pub to_slow_no_mac: u64,
    /// Frames decapsulated, then for the slow path: outer headers put back.
    pub to_slow_restored: u64,
    /// Frames dropped: no headroom for the outer headers.
    pub drop_headroom: u64,
}

/// The tunnel maps, and what was written to them.
pub(crate) struct Tunnels {
    locals: HashMap<MapData, abi::TunLocalKey, u32>,
    ins: HashMap<MapData, abi::TunInKey, u32>,
    table: Array<MapData, abi::TunnelValue>,
    stats: PerCpuArray<MapData, abi::TunCountersValue>,
    /// How many tunnels are set (its `tunnels` field is this one's): 0
    /// spares every frame the lookup.
    on: Arc<crate::cache::Switch>,
    now: StdHashMap<u32, FastTunnel>,
}

impl Tunnels {
    pub(crate) fn load(ebpf: &mut Ebpf, on: Arc<crate::cache::Switch>) -> Result<Self, FastError> {
        Ok(Self {
            locals: take(ebpf, TUN_LOCALS)?,
            ins: take(ebpf, TUN_IN)?,
            table: take(ebpf, TUNNELS)?,
            stats: take(ebpf, TUN_STATS)?,
            on,
            now: StdHashMap::new(),
        })
    }

    /// Tell the program how many tunnels are set.
    fn count(&mut self) -> Result<(), FastError> {
        self.on.set_tunnels(self.now.len() as u32);
        Ok(())
    }

    /// Whether a tunnel other than `id` uses `t`'s local endpoint.
    fn local_shared(&self, id: u32, t: &FastTunnel) -> Option<&FastTunnel> {
        let k = t.local_key();
        self.now
            .iter()
            .find(|(i, o)| **i != id && o.local_key() == k)
            .map(|(_, o)| o)
    }
}

impl FastPath {
    /// Set tunnel `id` (replacing what it was): frames to its local
    /// endpoint are decapsulated and selected as port
    /// [`tunnel_ifindex`]`(id)`'s, and neighbours on that port are
    /// reached through it.
    ///
    /// # Errors
    /// [`FastError::Config`] for an id at or past [`MAX_TUNNELS`], a VNI
    /// over 24 bits, UDP port 0, a local endpoint another tunnel uses with
    /// another encapsulation, or a tunnel frames could not tell from
    /// another's; [`FastError::Map`].
    pub fn set_tunnel(&mut self, id: u32, t: &FastTunnel) -> Result<(), FastError> {
        let bad = |why| Err(FastError::Config { why });
        if id >= MAX_TUNNELS {
            return bad("tunnel id past 4095");
        }
        if t.vni() > 0x00ff_ffff {
            return bad("VNI over 24 bits");
        }
        if t.port() == 0 && t.kind != FastTunnelKind::Ipip {
            return bad("tunnel UDP port 0");
        }
        let tun = &self.tunnels;
        if tun
            .local_shared(id, t)
            .is_some_and(|o| o.kind_code() != t.kind_code())
        {
            return bad("a local endpoint with two encapsulations");
        }
        if tun
            .now
            .iter()
            .any(|(i, o)| *i != id && o.in_key() == t.in_key())
        {
            return bad("two tunnels with the same endpoints and VNI");
        }
        let fresh = !self.tunnels.now.contains_key(&id);
        self.remove_tunnel(id)?;
        let tun = &mut self.tunnels;
        if fresh {
            // A new tunnel's counters start at 0 (a removed one's stay in
            // its slot until then).
            let zero = PerCpuValues::try_from(vec![
                abi::TunCountersValue::default();
                aya::util::nr_cpus().map_err(
                    |(_, source)| FastError::Os {
                        call: "nr_cpus",
                        source
                    }
                )?
            ])
            .map_err(|source| FastError::Os {
                call: "tun_stats values",
                source,
            })?;
            tun.stats
                .set(id, zero, 0)
                .map_err(map_err(TUN_STATS, "set"))?;
        }
        tun.table
            .set(id, t.value(), 0)
            .map_err(map_err(TUNNELS, "set"))?;
        tun.ins
            .insert(t.in_key(), id, 0)
            .map_err(map_err(TUN_IN, "insert"))?;
        tun.locals
            .insert(t.local_key(), t.kind_code(), 0)
            .map_err(map_err(TUN_LOCALS, "insert"))?;
        tun.now.insert(id, *t);
        tun.count()
    }

    /// Remove tunnel `id`: its frames go to the slow path again. Returns
    /// whether it was set.
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn remove_tunnel(&mut self, id: u32) -> Result<bool, FastError> {
        let tun = &mut self.tunnels;
        let Some(t) = tun.now.get(&id).copied() else {
            return Ok(false);
        };
        if tun.local_shared(id, &t).is_none() {
            removed(tun.locals.remove(&t.local_key()), TUN_LOCALS, "remove")?;
        }
        removed(tun.ins.remove(&t.in_key()), TUN_IN, "remove")?;
        tun.table
            .set(id, abi::TunnelValue::default(), 0)
            .map_err(map_err(TUNNELS, "set"))?;
        tun.now.remove(&id);
        tun.count()?;
        Ok(true)
    }

    /// The tunnel counters of every tunnel and of frames of none,
    /// summed over CPUs.
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn tunnel_counters(&self) -> Result<TunnelCounters, FastError> {
        let mut sum = TunnelCounters::default();
        for id in 0..=MAX_TUNNELS {
            sum.add(&self.tunnel_counters_of(id)?);
        }
        Ok(sum)
    }

    /// The counters of tunnel `id` (since it was set: a new tunnel's start
    /// at 0), summed over CPUs; `id` [`MAX_TUNNELS`]: those of frames of
    /// no tunnel (`to_slow_bad_outer` before a tunnel is known,
    /// `to_slow_unknown`).
    ///
    /// # Errors
    /// [`FastError::Map`] (an id past [`MAX_TUNNELS`]).
    pub fn tunnel_counters_of(&self, id: u32) -> Result<TunnelCounters, FastError> {
        let per_cpu = self
            .tunnels
            .stats
            .get(&id, 0)
            .map_err(map_err(TUN_STATS, "get"))?;
        let mut w = [0u64; abi::TUN_COUNTERS];
        for v in per_cpu.iter() {
            for (s, x) in w.iter_mut().zip(v.0) {
                *s = s.wrapping_add(x);
            }
        }
        Ok(TunnelCounters {
            decap: w[0],
            encap: w[1],
            to_slow_bad_outer: w[2],
            to_slow_unknown: w[3],
            to_slow_no_mac: w[4],
            to_slow_restored: w[5],
            drop_headroom: w[6],
        })
    }
}

impl TunnelCounters {
    /// Add `o`'s counts to these.
    pub fn add(&mut self, o: &TunnelCounters) {
        self.decap = self.decap.wrapping_add(o.decap);
        self.encap = self.encap.wrapping_add(o.encap);
        self.to_slow_bad_outer = self.to_slow_bad_outer.wrapping_add(o.to_slow_bad_outer);
        self.to_slow_unknown = self.to_slow_unknown.wrapping_add(o.to_slow_unknown);
        self.to_slow_no_mac = self.to_slow_no_mac.wrapping_add(o.to_slow_no_mac);
        self.to_slow_restored = self.to_slow_restored.wrapping_add(o.to_slow_restored);
        self.drop_headroom = self.drop_headroom.wrapping_add(o.drop_headroom);
    }
}

#[cfg(test)]
#[path = "tunnel_tests.rs"]
mod tests;
