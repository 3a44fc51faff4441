//! The checks of `[cluster]`'s etcd keys into an [`EtcdPlan`] (endpoints,
//! prefix, lease, an engine's advertisement) and of a remote VR's `vr`
//! table (the VR its engines run, each vNIC's MAC filled in from the
//! dispatcher's port).

use std::time::Duration;

use super::cluster::{Ctx, ipv4, port};
use super::cluster_schema::ClusterConf;
use super::{ConfigError, Source};
use crate::cluster::desired::{DEFAULT_LEASE, DEFAULT_PREFIX, EngineAd, EtcdPlan};

/// The etcd part of `c` (`None` without endpoints); an engine's
/// advertisement with `engine`.
pub(super) fn etcd_plan(
    c: &ClusterConf,
    engine: bool,
    cx: &Ctx<'_>,
    at: &Source,
) -> Result<Option<EtcdPlan>, ConfigError> {
    if c.etcd.is_empty() {
        return Ok(None);
    }
    let mut endpoints = Vec::new();
    for (i, e) in c.etcd.iter().enumerate() {
        let s = e.get_ref();
        let ok = s.strip_prefix("http://").is_some_and(|h| {
            h.rsplit_once(':')
                .is_some_and(|(host, p)| !host.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0))
        });
        if !ok {
            let msg = format!("{s:?}: not http://host:port");
            return Err(at.err(e.span(), format!("cluster.etcd[{i}]"), msg));
        }
        endpoints.push(s.clone());
    }
    let prefix = match &c.etcd_prefix {
        Some(p) => {
            let s = p.get_ref().trim_end_matches('/');
            if !s.starts_with('/') || s.len() < 2 || s.contains("//") {
                let msg = format!("{:?}: a key prefix like /vrhost/NAME", p.get_ref());
                return Err(at.err(p.span(), "cluster.etcd_prefix".into(), msg));
            }
            s.to_string()
        }
        None => DEFAULT_PREFIX.into(),
    };
    let lease = match &c.lease_s {
        Some(l) if !(1..=3600).contains(l.get_ref()) => {
            let msg = "must be 1..=3600 (seconds)".into();
            return Err(at.err(l.span(), "cluster.lease_s".into(), msg));
        }
        Some(l) => Duration::from_secs(*l.get_ref()),
        None => DEFAULT_LEASE,
    };
    let engine = engine.then(|| advertisement(c, cx, at)).transpose()?;
    Ok(Some(EtcdPlan {
        measure: engine.is_some() && c.per_core_pps.is_none(),
        endpoints,
        prefix,
        lease,
        engine,
    }))
}

/// An engine's advertisement: its name, underlay port and address, cores,
/// per-core rate and the next hop its tunnels send to.
fn advertisement(c: &ClusterConf, cx: &Ctx<'_>, at: &Source) -> Result<EngineAd, ConfigError> {
    let need = |m: &str| at.err(c.role.span(), "cluster".into(), m.into());
    let (Some(name), Some(under), Some(local)) = (&c.name, &c.underlay, &c.local) else {
        return Err(need("an engine with etcd needs name, underlay and local"));
    };
    let n = name.get_ref();
    if n.is_empty() || n.contains('/') {
        let msg = format!("{n:?}: empty or with a '/'");
        return Err(at.err(name.span(), "cluster.name".into(), msg));
    }
    let p = port(under, "cluster.underlay", cx, at)?;
    let address = ipv4(local, "cluster.local", at)?;
    let cores = c.cores.as_ref().map_or(1, |v| *v.get_ref());
    // Without it, measured at the daemon's start (1 until then).
    let per_core_pps = c.per_core_pps.as_ref().map_or(1, |v| *v.get_ref());
    if cores == 0 || per_core_pps == 0 {
        return Err(need(
            "cluster.cores and cluster.per_core_pps must be at least 1",
        ));
    }
    let mac = |m: &Option<toml::Spanned<String>>, field: &str| match m {
        Some(m) => super::parse_mac(m.get_ref())
            .map(|mac| Some(vrhost_packet::MacAddr(mac).to_string()))
            .map_err(|e| at.err(m.span(), field.into(), e)),
        None => Ok(None),
    };
    let next_hop_mac = mac(&c.next_hop_mac, "cluster.next_hop_mac")?;
    // The interface's MAC if it can be read: a dispatcher with no entry
    // for this engine sends to it.
    let local_mac = mac(&c.local_mac, "cluster.local_mac")?.or_else(|| {
        let m = super::tunnels::interface_mac(&cx.ports[p]).ok()?;
        Some(vrhost_packet::MacAddr(m).to_string())
    });
    let heartbeat_port = c.heartbeat.get_ref().parse::<std::net::SocketAddr>();
    Ok(EngineAd {
        heartbeat_port: heartbeat_port.ok().map(|a| a.port()),
        measured: false,
        name: n.clone(),
        underlay: cx.ports[p].name.get_ref().clone(),
        address,
        cores,
        per_core_pps,
        next_hop_mac,
        local_mac,
    })
}

/// A remote VR's `vr` table, checked: no `name` (the VR's), one vNIC
/// table per port with no `tunnel` or `port` (the engine binds them),
/// and each vNIC's `mac` defaulting to its dispatcher port's interface
/// MAC (the frames cross unchanged, so the engine's VR answers for it).
pub(super) fn engine_vr(
    t: &toml::Table,
    name: &toml::Spanned<String>,
    ports: &[usize],
    cx: &Ctx<'_>,
    at: &Source,
    field: &str,
) -> Result<toml::Table, ConfigError> {
    // A nested table's span is not kept (serde's `Spanned` of a table
    // header with arrays of tables does not parse): the VR's name's.
    let bad = |m: String| at.err(name.span(), field.into(), m);
    let mut table = t.clone();
    if table.contains_key("name") {
        return Err(bad("no `name` here: the VR is the remote VR's name".into()));
    }
    let Some(toml::Value::Array(vnics)) = table.get_mut("vnics") else {
        return Err(bad("needs `vnics`, one per port".into()));
    };
    if vnics.len() != ports.len() {
        let msg = format!("{} vnics for {} ports", vnics.len(), ports.len());
        return Err(bad(msg));
    }
    for (k, (v, &p)) in vnics.iter_mut().zip(ports).enumerate() {
        let toml::Value::Table(v) = v else {
            return Err(bad(format!("vnics[{k}] is not a table")));
        };
        if v.contains_key("tunnel") || v.contains_key("port") {
            return Err(bad(format!(
                "vnics[{k}]: no tunnel or port: the engine binds it"
            )));
        }
        if !v.contains_key("mac") {
            let mac = super::tunnels::interface_mac(&cx.ports[p]).map_err(&bad)?;
            v.insert("mac".into(), vrhost_packet::MacAddr(mac).to_string().into());
        }
    }
    Ok(table)
}
