//! The checks of `[cluster]` into a [`ClusterPlan`]: a dispatcher's
//! underlay, engines and remote VRs (a [`DispatchSpec`]) with its
//! heartbeat settings, or an engine's heartbeat address. The ports a
//! dispatcher owns (remote VRs' ports, the underlay) are its alone: no
//! local VR's vNIC and no tunnel may use them.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::cluster_etcd::etcd_plan;
use super::cluster_schema::{ClusterConf, EngineConf, RemoteVrConf};
use super::plan::VrPlan;
use super::schema::{PortConfig, TunnelConf};
use super::{ConfigError, Source, parse_mac};
use crate::cluster::desired::EtcdPlan;
use crate::cluster::heartbeat::{INTERVAL, MISSES};
use crate::cluster::members::Members;
use crate::cluster::{ClusterPolicy, DispatchSpec, EngineLink, RemoteVr};

/// Default UDP port of an engine's heartbeat answers.
pub const HEARTBEAT_PORT: u16 = 4790;

/// What a checked `[cluster]` table becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum ClusterPlan {
    /// A dispatcher.
    Dispatcher {
        /// Its data path.
        spec: DispatchSpec,
        /// Its heartbeat socket.
        heartbeat: SocketAddr,
        /// Heartbeat period.
        interval: Duration,
        /// Periods without an answer before an engine is down.
        misses: u32,
        /// Each engine's name and heartbeat address.
        beats: Vec<(String, SocketAddr)>,
        /// The desired state in etcd, if any.
        etcd: Option<EtcdPlan>,
        /// The configured engines, which those registered in etcd join.
        members: Box<Members>,
    },
    /// An engine: answers heartbeats on this address.
    Engine {
        /// Its heartbeat socket.
        heartbeat: SocketAddr,
        /// The desired state in etcd and its advertisement, if any.
        etcd: Option<EtcdPlan>,
    },
}

/// What the check needs of the rest of the config.
pub(super) struct Ctx<'a> {
    pub ports: &'a [PortConfig],
    pub port_ix: &'a BTreeMap<String, usize>,
    pub tunnels: &'a [TunnelConf],
    pub vrs: &'a [VrPlan],
}

/// Check `[cluster]`.
pub(super) fn check_cluster(
    c: &ClusterConf,
    cx: &Ctx<'_>,
    at: &Source,
) -> Result<ClusterPlan, ConfigError> {
    let heartbeat = c.heartbeat.get_ref().parse::<SocketAddr>().map_err(|_| {
        let msg = format!("{:?}: not an address:port", c.heartbeat.get_ref());
        at.err(c.heartbeat.span(), "cluster.heartbeat".into(), msg)
    })?;
    match c.role.get_ref().as_str() {
        "engine" => {
            let agent = c.etcd.is_empty()
                && (c.underlay.is_some()
                    || c.name.is_some()
                    || c.local.is_some()
                    || c.local_mac.is_some());
            if agent || !c.engines.is_empty() || !c.vrs.is_empty() {
                let msg = "an engine has no engines or VRs of its own here (its VRs are \
                           [[vrs]] whose vNICs are VXLAN tunnels to the dispatcher), and \
                           name, underlay and local only with etcd"
                    .into();
                return Err(at.err(c.role.span(), "cluster.role".into(), msg));
            }
            let etcd = etcd_plan(c, true, cx, at)?;
            Ok(ClusterPlan::Engine { heartbeat, etcd })
        }
        "dispatcher" => dispatcher(c, heartbeat, cx, at),
        r => {
            let msg = format!("{r:?}: must be \"dispatcher\" or \"engine\"");
            Err(at.err(c.role.span(), "cluster.role".into(), msg))
        }
    }
}

fn dispatcher(
    c: &ClusterConf,
    heartbeat: SocketAddr,
    cx: &Ctx<'_>,
    at: &Source,
) -> Result<ClusterPlan, ConfigError> {
    let role = |m: &str| at.err(c.role.span(), "cluster".into(), m.into());
    let (Some(under), Some(local)) = (&c.underlay, &c.local) else {
        return Err(role("a dispatcher needs underlay and local"));
    };
    let underlay = port(under, "cluster.underlay", cx, at)?;
    let local = ipv4(local, "cluster.local", at)?;
    let local_mac = match &c.local_mac {
        Some(m) => {
            parse_mac(m.get_ref()).map_err(|e| at.err(m.span(), "cluster.local_mac".into(), e))?
        }
        None => super::tunnels::interface_mac(&cx.ports[underlay])
            .map_err(|e| at.err(under.span(), "cluster.local_mac".into(), e))?,
    };
    let mut engines = Vec::new();
    let mut beats = Vec::new();
    let mut names = BTreeMap::new();
    for (i, e) in c.engines.iter().enumerate() {
        let (link, beat) = engine(i, e, at)?;
        if names.insert(link.name.clone(), i).is_some() || link.name.is_empty() {
            let msg = format!("{:?}: empty or defined twice", link.name);
            return Err(at.err(e.name.span(), format!("cluster.engines[{i}].name"), msg));
        }
        beats.push((link.name.clone(), beat));
        engines.push(link);
    }
    if engines.len() > crate::cluster::MAX_ENGINES {
        return Err(role("more than 64 engines"));
    }
    let vrs = c
        .vrs
        .iter()
        .enumerate()
        .map(|(i, v)| remote_vr(i, v, &names, cx, at))
        .collect::<Result<Vec<_>, _>>()?;
    let spec = DispatchSpec {
        underlay,
        local,
        local_mac,
        engines,
        vrs,
    };
    owned_alone(c, &spec, cx, at)?;
    let etcd = etcd_plan(c, false, cx, at)?;
    if etcd.is_none() && spec.engines.is_empty() {
        return Err(role(
            "a dispatcher needs [[cluster.engines]], or etcd where engines register",
        ));
    }
    // With every engine up, every VR that asks for a rate must fit (with
    // etcd, the registered engines' advertised capacity decides, at run
    // time: `placement_error`).
    let all = if spec.engines.len() >= 64 {
        !0
    } else {
        (1u64 << spec.engines.len()) - 1
    };
    let placed = match etcd.is_some() {
        true => Vec::new(),
        false => crate::cluster::dispatch::placement_of(&spec, all),
    };
    for (i, p) in placed.iter().enumerate() {
        if let crate::cluster::Placed::NoFit { why, free } = p {
            let msg = format!("{why}; {free} pps free on the engines");
            return Err(at.err(c.vrs[i].name.span(), format!("cluster.vrs[{i}].rate"), msg));
        }
    }
    crate::cluster::Dispatcher::check(&spec).map_err(|m| role(&m))?;
    let interval = Duration::from_millis(
        c.heartbeat_ms
            .as_ref()
            .map_or(INTERVAL.as_millis() as u64, |v| *v.get_ref()),
    );
    let misses = c.misses.as_ref().map_or(MISSES, |v| *v.get_ref());
    if interval.is_zero() || interval > Duration::from_secs(10) || misses == 0 {
        return Err(role("heartbeat_ms must be 1..=10000 and misses at least 1"));
    }
    if let (None, Some(v)) = (&etcd, c.vrs.iter().find(|v| v.vr.is_some())) {
        let msg = "a VR's `vr` table is written to etcd: give cluster.etcd".into();
        return Err(at.err(v.name.span(), "cluster.vrs[].vr".into(), msg));
    }
    let via = c
        .next_hop_mac
        .as_ref()
        .map(|m| {
            parse_mac(m.get_ref()).map_err(|e| at.err(m.span(), "cluster.next_hop_mac".into(), e))
        })
        .transpose()?;
    let members = Box::new(Members {
        base: spec.clone(),
        beats: beats.clone(),
        via,
    });
    Ok(ClusterPlan::Dispatcher {
        members,
        spec,
        heartbeat,
        interval,
        misses,
        beats,
        etcd,
    })
}

pub(super) fn port(
    name: &toml::Spanned<String>,
    field: &str,
    cx: &Ctx<'_>,
    at: &Source,
) -> Result<usize, ConfigError> {
    cx.port_ix.get(name.get_ref()).copied().ok_or_else(|| {
        let msg = format!("no port {:?}", name.get_ref());
        at.err(name.span(), field.into(), msg)
    })
}

pub(super) fn ipv4(
    s: &toml::Spanned<String>,
    field: &str,
    at: &Source,
) -> Result<Ipv4Addr, ConfigError> {
    match s.get_ref().parse::<Ipv4Addr>() {
        Ok(a) if !a.is_unspecified() && !a.is_broadcast() && !a.is_multicast() => Ok(a),
        _ => {
            let msg = format!("{:?}: not a unicast IPv4 address", s.get_ref());
            Err(at.err(s.span(), field.into(), msg))
        }
    }
}

fn engine(i: usize, e: &EngineConf, at: &Source) -> Result<(EngineLink, SocketAddr), ConfigError> {
    let f = |n: &str| format!("cluster.engines[{i}].{n}");
    let remote = ipv4(&e.address, &f("address"), at)?;
    let nonzero = |v: &Option<toml::Spanned<u16>>, n: &str, def: u16| match v {
        Some(p) if *p.get_ref() == 0 => Err(at.err(p.span(), f(n), "must be 1..=65535".into())),
        Some(p) => Ok(*p.get_ref()),
        None => Ok(def),
    };
    let udp_port = nonzero(&e.udp_port, "udp_port", vrhost_packet::tunnel::VXLAN_PORT)?;
    let hb = nonzero(&e.heartbeat_port, "heartbeat_port", HEARTBEAT_PORT)?;
    let remote_mac = e
        .mac
        .as_ref()
        .map(|m| parse_mac(m.get_ref()).map_err(|x| at.err(m.span(), f("mac"), x)))
        .transpose()?;
    let capacity = match &e.capacity {
        Some(c) if *c.get_ref() == 0 => {
            return Err(at.err(c.span(), f("capacity"), "must be at least 1".into()));
        }
        Some(c) => *c.get_ref(),
        None => 1,
    };
    let link = EngineLink {
        name: e.name.get_ref().clone(),
        remote,
        udp_port,
        remote_mac,
        capacity,
    };
    Ok((link, SocketAddr::new(remote.into(), hb)))
}

fn remote_vr(
    i: usize,
    v: &RemoteVrConf,
    names: &BTreeMap<String, usize>,
    cx: &Ctx<'_>,
    at: &Source,
) -> Result<RemoteVr, ConfigError> {
    let f = |n: &str| format!("cluster.vrs[{i}].{n}");
    let ports = v
        .ports
        .iter()
        .map(|p| port(p, &f("ports"), cx, at))
        .collect::<Result<Vec<_>, _>>()?;
    let engines = v
        .engines
        .iter()
        .map(|e| {
            names.get(e.get_ref()).copied().ok_or_else(|| {
                let msg = format!("no engine {:?}", e.get_ref());
                at.err(e.span(), f("engines"), msg)
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let policy = match &v.policy {
        Some(p) => p
            .get_ref()
            .parse::<ClusterPolicy>()
            .map_err(|m| at.err(p.span(), f("policy"), m))?,
        None => ClusterPolicy::Flow,
    };
    let (rate, engines) = rate_engines(i, v, engines, names.len(), at)?;
    let vr =
        v.vr.as_ref()
            .map(|t| super::cluster_etcd::engine_vr(t, &v.name, &ports, cx, at, &f("vr")))
            .transpose()?;
    Ok(RemoteVr {
        name: v.name.get_ref().clone(),
        id: *v.id.get_ref(),
        ports,
        engines,
        policy,
        rate,
        vr,
    })
}

/// A VR's rate and engines: with a rate, every engine (Algorithm 1
/// chooses); without, the engines it names (at least one).
fn rate_engines(
    i: usize,
    v: &RemoteVrConf,
    engines: Vec<usize>,
    n_engines: usize,
    at: &Source,
) -> Result<(Option<f64>, Vec<usize>), ConfigError> {
    let f = |n: &str| format!("cluster.vrs[{i}].{n}");
    match &v.rate {
        Some(r) if !(r.get_ref().is_finite() && *r.get_ref() > 0.0) => {
            Err(at.err(r.span(), f("rate"), "must be a number > 0".into()))
        }
        Some(r) if !engines.is_empty() => Err(at.err(
            r.span(),
            f("rate"),
            "a VR with a rate is placed on the cluster's engines by Algorithm 1: leave `engines` out"
                .into(),
        )),
        Some(r) => Ok((Some(*r.get_ref()), (0..n_engines).collect())),
        None if engines.is_empty() => Err(at.err(
            v.name.span(),
            f("engines"),
            "give its engines, or a rate to place it".into(),
        )),
        None => Ok((None, engines)),
    }
}

/// No local VR's vNIC on a port the dispatcher owns, no tunnel on its
/// underlay, and remote VR names unique and not a local VR's.
fn owned_alone(
    c: &ClusterConf,
    spec: &DispatchSpec,
    cx: &Ctx<'_>,
    at: &Source,
) -> Result<(), ConfigError> {
    let mut owned: Vec<usize> = spec.vrs.iter().flat_map(|v| v.ports.clone()).collect();
    owned.push(spec.underlay);
    for (i, v) in spec.vrs.iter().enumerate() {
        let clash = cx.vrs.iter().any(|l| l.name == v.name)
            || spec.vrs[..i].iter().any(|o| o.name == v.name);
        if clash {
            let msg = format!("{:?}: defined twice", v.name);
            return Err(at.err(c.vrs[i].name.span(), format!("cluster.vrs[{i}].name"), msg));
        }
    }
    if let Some(l) = cx
        .vrs
        .iter()
        .find(|l| l.vnic_ports.iter().any(|p| owned.contains(p)))
    {
        let msg = format!("VR {:?} has a vNIC on a port the dispatcher owns", l.name);
        return Err(at.err(c.role.span(), "cluster".into(), msg));
    }
    if let Some(t) = cx
        .tunnels
        .iter()
        .find(|t| cx.port_ix.get(t.port.get_ref()) == Some(&spec.underlay))
    {
        let msg = format!(
            "tunnel {:?} is on the dispatcher's underlay",
            t.name.get_ref()
        );
        return Err(at.err(t.port.span(), "cluster.underlay".into(), msg));
    }
    Ok(())
}
