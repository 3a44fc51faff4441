//! The dispatcher's data path: frames of a remote VR's ports go to one of
//! its engines over VXLAN, tagged; what the engines send back goes out the
//! port its tag names.
//!
//! The worker hands the dispatcher every rx burst of the ports it owns (a
//! remote VR's access ports, and the underlay port). Access port: each
//! frame is copied once into a scratch buffer behind VXLAN headers whose
//! VNI is the tag (VR id, the port it came in by, instance 0), for the
//! engine the VR's policy picks among the live ones, and the burst is sent
//! on the underlay in one call. Underlay: ARP requests for the local
//! address are answered; VXLAN frames are checked against a
//! [`TunnelTable`] that holds one entry per engine and valid tag (so a
//! forged tag, an unknown VR, a port that is not the VR's, or a frame from
//! no engine is a counted drop), and the inner frames are sent on their
//! ports, one call per port and burst. No allocation, lock or syscall per
//! frame beyond the ports' own.

use std::net::Ipv4Addr;
use std::sync::Arc;

use vrhost_io::Port;
use vrhost_packet::tunnel::{EncapKind, EncapRepr, VXLAN_OVERHEAD, flow_src_port};

use super::engines::{ClusterPolicy, EngineSet};
use super::heartbeat::Liveness;
use super::tag::Tag;
use crate::balance::flow_hash;
use crate::stats::Counter;
use crate::tunnel::{ARP_REPLY_LEN, Decap, OUTER_TTL, Tunnel, TunnelKind, TunnelTable};
use crate::vrpath::BURST;

/// Largest inner frame the dispatcher carries.
pub const MAX_INNER: usize = 2048 - VXLAN_OVERHEAD;
const BUF: usize = MAX_INNER + VXLAN_OVERHEAD;

/// An engine, as the dispatcher reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineLink {
    /// Its name.
    pub name: String,
    /// Its underlay address.
    pub remote: Ipv4Addr,
    /// Its VXLAN UDP port.
    pub udp_port: u16,
    /// Its MAC, if configured (else learned from its frames).
    pub remote_mac: Option<[u8; 6]>,
    /// Its capacity (pps or instances), for `proportional`.
    pub capacity: u64,
}

/// A VR that runs on engines.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteVr {
    /// Its name.
    pub name: String,
    /// Its id in the tag (1..=255).
    pub id: u8,
    /// The dispatcher ports it owns (its frames arrive and leave there).
    pub ports: Vec<usize>,
    /// Its engines (indexes into the dispatcher's engines).
    pub engines: Vec<usize>,
    /// How its frames are shared.
    pub policy: ClusterPolicy,
    /// The rate it asks for (pps): placed by Algorithm 1 on the live
    /// engines (its `engines` are then all of them).
    pub rate: Option<f64>,
    /// The engines' VR (a `[[vrs]]` table, each vNIC's `mac` filled in,
    /// `tunnel` not), written to etcd for the engines it is placed on.
    pub vr: Option<toml::Table>,
}

/// What the dispatcher needs: the underlay, the engines, the remote VRs.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchSpec {
    /// Underlay port index.
    pub underlay: usize,
    /// The dispatcher's underlay address.
    pub local: Ipv4Addr,
    /// The underlay port's MAC.
    pub local_mac: [u8; 6],
    /// The engines.
    pub engines: Vec<EngineLink>,
    /// The remote VRs.
    pub vrs: Vec<RemoteVr>,
}

/// One engine's frame and byte counters, each way.
#[derive(Debug, Default)]
pub struct EngineTraffic {
    /// Frames sent to it.
    pub tx_frames: Counter,
    /// Bytes sent to it (inner frames).
    pub tx_bytes: Counter,
    /// Frames received from it.
    pub rx_frames: Counter,
    /// Bytes received from it (inner frames).
    pub rx_bytes: Counter,
}

/// The dispatcher's counters.
#[derive(Debug, Default)]
pub struct DispatchStats {
    /// Per engine, in config order.
    pub engines: Vec<EngineTraffic>,
    /// A remote VR's frame with no engine up.
    pub no_engine: Counter,
    /// A frame for an engine whose MAC is not known yet.
    pub no_mac: Counter,
    /// A frame over [`MAX_INNER`] bytes.
    pub too_big: Counter,
    /// Underlay frames with a bad or unknown tag, from no engine, or
    /// malformed.
    pub bad_tag: Counter,
    /// Frames a port did not take.
    pub port_dropped: Counter,
    /// Underlay frames that were no tunnel's and no heartbeat's.
    pub not_tunnel: Counter,
    /// Heartbeats (pongs) seen on the underlay: the kernel's heartbeat
    /// socket gets them; not drops.
    pub heartbeats: Counter,
}

/// Per engine, what the data path keeps.
#[derive(Debug, Clone)]
struct Peer {
    remote: Ipv4Addr,
    udp_port: u16,
    mac: Option<[u8; 6]>,
    learn: bool,
    ident: u16,
}

/// The dispatcher's data path.
pub struct Dispatcher {
    spec: DispatchSpec,
    peers: Vec<Peer>,
    /// Per port: the remote VR that owns it.
    port_vr: Vec<Option<usize>>,
    sets: Vec<EngineSet>,
    table: TunnelTable,
    liveness: Arc<Liveness>,
    live_seen: u64,
    caps_seen: u64,
    bufs: Box<[[u8; BUF]]>,
    stats: Arc<DispatchStats>,
}

/// The placement of `spec`'s VRs that ask for a rate, with engines `live`
/// up (empty when none asks).
pub fn placement_of(spec: &DispatchSpec, live: u64) -> Vec<super::Placed> {
    let caps: Vec<u64> = spec.engines.iter().map(|e| e.capacity).collect();
    placement_with(spec, &caps, live)
}

/// The engines' capacities: advertised (in `liveness`) or configured.
pub fn capacities(spec: &DispatchSpec, liveness: &Liveness) -> Vec<u64> {
    (spec.engines.iter().enumerate())
        .map(|(i, e)| liveness.capacity(i).unwrap_or(e.capacity))
        .collect()
}

/// As [`placement_of`], with the engines' capacities `caps` (pps).
pub fn placement_with(spec: &DispatchSpec, caps: &[u64], live: u64) -> Vec<super::Placed> {
    if spec.vrs.iter().all(|v| v.rate.is_none()) {
        return Vec::new();
    }
    let rates: Vec<Option<f64>> = spec.vrs.iter().map(|v| v.rate).collect();
    super::place(caps, live, &rates)
}

impl Dispatcher {
    /// Whether `spec` can be built: what [`Dispatcher::new`] refuses.
    ///
    /// # Errors
    /// As [`Dispatcher::new`].
    pub fn check(spec: &DispatchSpec) -> Result<(), String> {
        if spec.engines.len() > super::MAX_ENGINES {
            return Err(format!("more than {} engines", super::MAX_ENGINES));
        }
        let mut ids = [false; 256];
        let mut owned = std::collections::BTreeSet::new();
        for v in &spec.vrs {
            if v.id == 0 || std::mem::replace(&mut ids[usize::from(v.id)], true) {
                return Err(format!("VR {:?}: id {} is 0 or taken", v.name, v.id));
            }
            // A VR placed by rate may wait for engines to register.
            let none = v.engines.is_empty() && v.rate.is_none();
            if none || v.engines.iter().any(|&e| e >= spec.engines.len()) {
                return Err(format!("VR {:?}: no engines, or an unknown one", v.name));
            }
            for &p in &v.ports {
                if p == spec.underlay || p > usize::from(super::tag::MAX_PORT) || !owned.insert(p) {
                    return Err(format!(
                        "VR {:?}: port {p} is the underlay, over {}, or another VR's",
                        v.name,
                        super::tag::MAX_PORT
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Dispatcher {
    /// The data path of `spec`, whose engines' states `liveness` keeps
    /// (indexed as `spec.engines`).
    ///
    /// # Errors
    /// More than 64 engines; a VR id 0 or taken twice; a VR with no or
    /// unknown engines; a port that is the underlay, over 254, or owned
    /// by two VRs.
    pub fn new(spec: DispatchSpec, liveness: Arc<Liveness>) -> Result<Self, String> {
        Self::check(&spec)?;
        let mut table = TunnelTable::default();
        let mut port_vr = Vec::new();
        let mut sets = Vec::new();
        for (vi, v) in spec.vrs.iter().enumerate() {
            for &p in &v.ports {
                if port_vr.len() <= p {
                    port_vr.resize(p + 1, None);
                }
                port_vr[p] = Some(vi);
                for &e in &v.engines {
                    let l = &spec.engines[e];
                    let tag = Tag {
                        vr: v.id,
                        port: p as u8,
                        local: false,
                        instance: 0,
                    };
                    let t = Tunnel {
                        kind: TunnelKind::Vxlan,
                        port: spec.underlay,
                        local: spec.local,
                        remote: l.remote,
                        udp_port: l.udp_port,
                        vni: tag.to_vni().map_err(|e| e.to_string())?,
                        local_mac: spec.local_mac,
                        remote_mac: l.remote_mac,
                        inner_mac: [0xff; 6],
                    };
                    // The tunnel "feeds" engine `e`'s "vNIC" `p`: the
                    // engine it came from and the port it leaves by.
                    table.add(t, e, p as u16);
                }
            }
            let names: Vec<&str> = v
                .engines
                .iter()
                .map(|&e| spec.engines[e].name.as_str())
                .collect();
            let caps: Vec<u64> = v
                .engines
                .iter()
                .map(|&e| spec.engines[e].capacity)
                .collect();
            sets.push(EngineSet::new(v.policy, &names, &caps));
        }
        let peers = spec
            .engines
            .iter()
            .map(|l| Peer {
                remote: l.remote,
                udp_port: l.udp_port,
                mac: l.remote_mac,
                learn: l.remote_mac.is_none(),
                ident: 0,
            })
            .collect();
        let stats = DispatchStats {
            engines: spec
                .engines
                .iter()
                .map(|_| EngineTraffic::default())
                .collect(),
            ..DispatchStats::default()
        };
        let mut d = Self {
            spec,
            peers,
            port_vr,
            sets,
            table,
            liveness,
            live_seen: !0,
            caps_seen: 0,
            bufs: vec![[0u8; BUF]; BURST].into_boxed_slice(),
            stats: Arc::new(stats),
        };
        d.sync_live();
        Ok(d)
    }

    /// What it was made of.
    pub fn spec(&self) -> &DispatchSpec {
        &self.spec
    }

    /// Its counters.
    pub fn stats(&self) -> &Arc<DispatchStats> {
        &self.stats
    }

    /// The engines' liveness it follows.
    pub fn liveness(&self) -> &Arc<Liveness> {
        &self.liveness
    }

    /// Whether the worker hands it port `p`'s frames.
    #[inline]
    pub fn owns(&self, p: usize) -> bool {
        p == self.spec.underlay || self.port_vr.get(p).is_some_and(Option::is_some)
    }

    /// Go on from `old` (the data path this one replaces): engine `i` is
    /// `old`'s engine `from[i]` if any, whose counters it adds to its
    /// own and whose learned MAC it keeps; the dispatcher-wide counters
    /// too.
    pub fn carry(&mut self, old: &Dispatcher, from: &[Option<usize>]) {
        for (i, (peer, t)) in self.peers.iter_mut().zip(&self.stats.engines).enumerate() {
            let Some(j) = from.get(i).copied().flatten() else {
                continue;
            };
            if let (true, Some(o)) = (peer.learn, old.peers.get(j)) {
                peer.mac = o.mac;
            }
            if let Some(o) = old.stats.engines.get(j) {
                t.tx_frames.add(o.tx_frames.get());
                t.tx_bytes.add(o.tx_bytes.get());
                t.rx_frames.add(o.rx_frames.get());
                t.rx_bytes.add(o.rx_bytes.get());
            }
        }
        let (n, o) = (&self.stats, &old.stats);
        for (to, from) in [
            (&n.no_engine, &o.no_engine),
            (&n.no_mac, &o.no_mac),
            (&n.too_big, &o.too_big),
            (&n.bad_tag, &o.bad_tag),
            (&n.port_dropped, &o.port_dropped),
            (&n.not_tunnel, &o.not_tunnel),
            (&n.heartbeats, &o.heartbeats),
        ] {
            to.add(from.get());
        }
    }

    /// The engines' MACs now (configured or learned).
    pub fn peer_macs(&self) -> Vec<Option<[u8; 6]>> {
        self.peers.iter().map(|p| p.mac).collect()
    }

    /// Take up to `want` frames (at most a burst) from port `p`, which it
    /// owns, and move them on; frames taken.
    pub fn rx_burst(&mut self, p: usize, ports: &mut [Box<dyn Port>], want: usize) -> usize {
        let want = want.min(BURST);
        if p == self.spec.underlay {
            self.dispatch_back(ports, want)
        } else {
            self.dispatch_out(p, ports, want)
        }
    }

    /// Follow the liveness mask (one load; the sets are rebuilt only when
    /// it changed, and the VRs with a rate placed again: control work, at
    /// most once per heartbeat period).
    #[inline]
    fn sync_live(&mut self) {
        let live = self.liveness.live();
        let version = self.liveness.version();
        if live != self.live_seen || version != self.caps_seen {
            self.follow(live, version);
        }
    }

    #[cold]
    fn follow(&mut self, live: u64, version: u64) {
        self.live_seen = live;
        self.caps_seen = version;
        let placed = self.placement(live);
        for (vi, (v, s)) in self.spec.vrs.iter().zip(&mut self.sets).enumerate() {
            let allowed = placed.get(vi).and_then(|p| p.mask(live)).unwrap_or(!0);
            let mut m = 0u64;
            for (k, &e) in v.engines.iter().enumerate() {
                if e < 64 && live & allowed & (1 << e) != 0 {
                    m |= 1 << k;
                }
            }
            s.set_live(m);
            if let Some(super::Placed::Slices(sl)) = placed.get(vi) {
                let w: Vec<u64> = v
                    .engines
                    .iter()
                    .map(|e| {
                        sl.iter()
                            .find(|s| s.engine == *e)
                            .map_or(1, |s| s.amount.round() as u64)
                    })
                    .collect();
                s.set_weights(&w);
            }
        }
    }

    /// The placement of the VRs that ask for a rate, with engines `live`
    /// up (empty when none asks).
    pub fn placement(&self, live: u64) -> Vec<super::Placed> {
        placement_with(&self.spec, &capacities(&self.spec, &self.liveness), live)
    }
}

impl Dispatcher {
    /// A burst of access port `p`: each frame to its engine, tagged, in
    /// one send on the underlay.
    fn dispatch_out(&mut self, p: usize, ports: &mut [Box<dyn Port>], want: usize) -> usize {
        self.sync_live();
        let (Some(&Some(v)), Some(port)) = (self.port_vr.get(p), ports.get_mut(p)) else {
            return 0;
        };
        let mut frames: [&[u8]; BURST] = [&[]; BURST];
        let n = port.rx_burst(&mut frames[..want]);
        let vni = Tag {
            vr: self.spec.vrs[v].id,
            port: p as u8,
            local: false,
            instance: 0,
        }
        .to_vni()
        .unwrap_or(0);
        let (mut lens, mut to) = ([0usize; BURST], [0usize; BURST]);
        let mut m = 0;
        for f in &frames[..n] {
            if f.len() > MAX_INNER {
                self.stats.too_big.add(1);
                continue;
            }
            let h = flow_hash(f);
            let Some(k) = self.sets[v].pick(h) else {
                self.stats.no_engine.add(1);
                continue;
            };
            let e = self.spec.vrs[v].engines[k];
            let peer = &mut self.peers[e];
            let Some(mac) = peer.mac else {
                self.stats.no_mac.add(1);
                continue;
            };
            peer.ident = peer.ident.wrapping_add(1);
            let r = EncapRepr {
                kind: EncapKind::Vxlan(vni),
                dst_mac: mac,
                src_mac: self.spec.local_mac,
                src: self.spec.local,
                dst: peer.remote,
                ident: peer.ident,
                ttl: OUTER_TTL,
                src_port: flow_src_port(h),
                dst_port: peer.udp_port,
            };
            let buf = &mut self.bufs[m];
            if r.emit(&mut buf[..VXLAN_OVERHEAD], f.len()).is_err() {
                self.stats.too_big.add(1);
                continue;
            }
            buf[VXLAN_OVERHEAD..VXLAN_OVERHEAD + f.len()].copy_from_slice(f);
            (lens[m], to[m]) = (VXLAN_OVERHEAD + f.len(), e);
            m += 1;
        }
        let mut out: [&[u8]; BURST] = [&[]; BURST];
        for (o, (b, &l)) in out.iter_mut().zip(self.bufs.iter().zip(&lens[..m])) {
            *o = &b[..l];
        }
        let sent = match ports.get_mut(self.spec.underlay) {
            Some(u) if m > 0 => u.tx_burst(&out[..m]),
            _ => 0,
        };
        for k in 0..sent {
            let c = &self.stats.engines[to[k]];
            c.tx_frames.add(1);
            c.tx_bytes.add((lens[k] - VXLAN_OVERHEAD) as u64);
        }
        self.stats.port_dropped.add((m - sent) as u64);
        n
    }

    /// A burst of the underlay: ARP answered, engines' frames checked,
    /// decapsulated and sent on the ports their tags name (one send per
    /// port).
    fn dispatch_back(&mut self, ports: &mut [Box<dyn Port>], want: usize) -> usize {
        let u = self.spec.underlay;
        if u >= ports.len() {
            return 0;
        }
        let (before, rest) = ports.split_at_mut(u);
        let (under, after) = rest.split_first_mut().expect("u < len");
        let mut frames: [&[u8]; BURST] = [&[]; BURST];
        let n = under.rx_burst(&mut frames[..want]);
        let mut arp = [[0u8; ARP_REPLY_LEN]; 4];
        let mut n_arp = 0;
        let mut outs: [(usize, &[u8]); BURST] = [(0, &[]); BURST];
        let mut m = 0;
        for f in &frames[..n] {
            if n_arp < arp.len() && self.table.arp_reply(u, f, &mut arp[n_arp]) {
                n_arp += 1;
                continue;
            }
            match self.table.decap(u, f) {
                Decap::NotTunnel if super::heartbeat::is_heartbeat_frame(f) => {
                    self.stats.heartbeats.add(1);
                }
                Decap::NotTunnel => self.stats.not_tunnel.add(1),
                Decap::Drop(_) => self.stats.bad_tag.add(1),
                Decap::Inner {
                    vr: e,
                    vnic,
                    body,
                    peer_mac,
                    ..
                } => {
                    let peer = &mut self.peers[e];
                    if peer.learn {
                        peer.mac = Some(peer_mac);
                    }
                    let c = &self.stats.engines[e];
                    c.rx_frames.add(1);
                    c.rx_bytes.add(body.len() as u64);
                    outs[m] = (usize::from(vnic), body);
                    m += 1;
                }
            }
        }
        // One send per port: the frames for the first port not yet
        // served, in order (BURST <= 64: one bit per frame).
        let mut served = 0u64;
        for k in 0..m {
            if served & (1 << k) != 0 {
                continue;
            }
            let port = outs[k].0;
            let mut batch: [&[u8]; BURST] = [&[]; BURST];
            let mut b = 0;
            for (j, o) in outs[..m].iter().enumerate().skip(k) {
                if o.0 == port {
                    (batch[b], b) = (o.1, b + 1);
                    served |= 1 << j;
                }
            }
            let dst = match port.cmp(&u) {
                std::cmp::Ordering::Less => before.get_mut(port),
                std::cmp::Ordering::Greater => after.get_mut(port - u - 1),
                std::cmp::Ordering::Equal => None,
            };
            let sent = dst.map_or(0, |d| d.tx_burst(&batch[..b]));
            self.stats.port_dropped.add((b - sent) as u64);
        }
        if n_arp > 0 {
            let mut replies: [&[u8]; 4] = [&[]; 4];
            for (r, a) in replies.iter_mut().zip(&arp[..n_arp]) {
                *r = a;
            }
            under.tx_burst(&replies[..n_arp]);
        }
        n
    }
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
