//! The checks of the `[[vrs]]` tables, one VR at a time, into a [`VrPlan`]
//! each: its name, pool, vNICs and what runs it here; its confinement,
//! instances and schedule in the modules beside this one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use vrhost_router::{Router, RouterConfig};

use super::instances::{BudgetCheck, vr_instances};
use super::plan::VrPlan;
use super::sched::vr_sched;
use super::schema::{Config, HostConf, VrConf, VrKind};
use super::tunnels::TunnelIx;
use super::{ConfigError, FieldError, Source};
use crate::tunnel::Tunnel;
use crate::vrpath::Guard;

/// What runs a VR: its program and arguments (`None`: the built-in
/// router), and the config its hello carries.
type Runs = (Option<(PathBuf, Vec<String>)>, serde_json::Value);

/// The port of each vNIC, and the tunnel of each that is an endpoint.
/// Each vNIC's port, tunnel and VLAN.
type VnicPorts = (Vec<usize>, Vec<Option<Tunnel>>, Vec<Option<u16>>);

impl Config {
    /// Check every VR, in order, taking the cores of those whose instances
    /// come from the host's `budget`; `port_ix` is each port's index by
    /// name.
    pub(super) fn check_vrs(
        &self,
        port_ix: &BTreeMap<String, usize>,
        tunnels: &TunnelIx,
        budget: &mut BudgetCheck,
        at: &Source,
    ) -> Result<Vec<VrPlan>, ConfigError> {
        let mut names = BTreeSet::new();
        let mut vrs = Vec::new();
        for (i, v) in self.vrs.iter().enumerate() {
            check_name(i, v, &mut names, at)?;
            vrs.push(self.plan_vr(i, v, (port_ix, tunnels), budget, at)?);
        }
        Ok(vrs)
    }

    /// Check VR `i` (`v`), whose name is checked, into its plan.
    fn plan_vr(
        &self,
        i: usize,
        v: &VrConf,
        (port_ix, tunnels): (&BTreeMap<String, usize>, &TunnelIx),
        budget: &mut BudgetCheck,
        at: &Source,
    ) -> Result<VrPlan, ConfigError> {
        let fail = |(span, field, msg): FieldError| at.err(span, format!("vrs[{i}].{field}"), msg);
        let slots = pool_slots(v).map_err(fail)?;
        let (vnic_ports, vnic_tunnels, vnic_vlans) = vnic_ports(i, v, port_ix, tunnels, at)?;
        let (program, config) = self.vr_runs(v).map_err(fail)?;
        let confine = self.vr_confine(i, v, &program, &config, at)?;
        let inst = vr_instances(v).map_err(fail)?;
        budget.take_for(i, v, &inst, at)?;
        let sched = vr_sched(v).map_err(fail)?;
        let (path, auto) = super::fast::vr_path(v).map_err(fail)?;
        let control = super::control::vr_control(v, &self.dir).map_err(fail)?;
        Ok(VrPlan {
            name: v.name.get_ref().clone(),
            program,
            vnic_ports,
            vnic_tunnels,
            vnic_vlans,
            slots,
            cpu: v.cpu,
            instances: inst.start,
            scale: inst.scale,
            placed: inst.placed,
            instance_cpus: inst.cpus,
            balance: inst.balance,
            config,
            guard: guard(&self.host, v),
            restart: v.restart,
            sched,
            confine,
            path,
            // Filled in once the rules are checked (`fast::check_fast`).
            fast: Err("not checked".into()),
            port_limit: None,
            auto,
            control,
        })
    }

    /// What runs VR `v`: the built-in router, checked by building it once
    /// from its config, or a program that exists, with its own config as
    /// JSON.
    fn vr_runs(&self, v: &VrConf) -> Result<Runs, FieldError> {
        match v.kind {
            VrKind::Router | VrKind::Tap => {
                let fail = |msg| (v.name.span(), "router", msg);
                let rcfg = self.router_config(v).map_err(fail)?;
                Router::new(&rcfg).map_err(fail)?;
                Ok((None, serde_json::to_value(&rcfg).expect("serializes")))
            }
            VrKind::Program => {
                let Some(p) = &v.program else {
                    let msg = "kind = \"program\" needs `program`".into();
                    return Err((v.name.span(), "program", msg));
                };
                let path = self.dir.join(p.get_ref());
                if !path.is_file() {
                    let msg = format!("{}: no such file", path.display());
                    return Err((p.span(), "program", msg));
                }
                let c = v.config.clone().unwrap_or_default();
                let config = serde_json::to_value(c)
                    .map_err(|e| (v.name.span(), "config", format!("not JSON-able: {e}")))?;
                Ok((Some((path, v.args.clone())), config))
            }
        }
    }

    /// The built-in router's config for VR `v`: its `[vrs.router]` table
    /// with `vnics` filled from the VR's vNICs; a relative `route_file` is
    /// resolved against the config's directory.
    fn router_config(&self, v: &VrConf) -> Result<RouterConfig, String> {
        let mut t = v.router.clone().unwrap_or_default();
        for k in ["vnics", "control_vnics", "control_all"] {
            if t.contains_key(k) {
                return Err(format!("`{k}` belongs to the VR, not to its router table"));
            }
        }
        if v.kind == VrKind::Tap {
            if !t.is_empty() {
                return Err("a tap VR has no router table: its namespace routes".into());
            }
            t.insert("control_all".into(), toml::Value::Boolean(true));
        }
        if v.control_plane.is_some() || v.kind == VrKind::Tap {
            // Control vNIC n + i for vNIC i (`control.rs`).
            let n = v.vnics.get_ref().len() as i64;
            let ctl = (n..2 * n).map(toml::Value::Integer).collect();
            t.insert("control_vnics".into(), toml::Value::Array(ctl));
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
                if let Some(mtu) = vn.mtu {
                    m.insert("mtu".into(), toml::Value::Integer(mtu.into()));
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

/// A VR's name: 1-32 letters, digits, '-' or '_', not one of `names`
/// (those of the VRs before it), which it joins.
fn check_name(
    i: usize,
    v: &VrConf,
    names: &mut BTreeSet<String>,
    at: &Source,
) -> Result<(), ConfigError> {
    let n = v.name.get_ref();
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let msg = if n.is_empty() || n.len() > 32 || !n.chars().all(allowed) {
        format!("{n:?}: 1-32 letters, digits, '-' or '_'")
    } else if !names.insert(n.clone()) {
        format!("{n:?} defined twice")
    } else {
        return Ok(());
    };
    Err(at.err(v.name.span(), format!("vrs[{i}].name"), msg))
}

/// `slots`: 2..=65536 in the VR's pool.
fn pool_slots(v: &VrConf) -> Result<u32, FieldError> {
    let slots = *v.slots.get_ref();
    if !(2..=65_536).contains(&slots) {
        return Err((
            v.slots.span(),
            "slots",
            format!("{slots}: must be 2..=65536"),
        ));
    }
    Ok(slots)
}

/// `vnics` of VR `i` (`v`): 1..=64 of them, each on a port of the config
/// or a tunnel of it (`tunnels`); the port index of each (a tunnel's: its
/// underlay port) and its tunnel, if it is an endpoint of one.
fn vnic_ports(
    i: usize,
    v: &VrConf,
    port_ix: &BTreeMap<String, usize>,
    tunnels: &TunnelIx,
    at: &Source,
) -> Result<VnicPorts, ConfigError> {
    let vnics = v.vnics.get_ref();
    if vnics.is_empty() || vnics.len() > 64 {
        let msg = format!("{} vNICs: must be 1..=64", vnics.len());
        return Err(at.err(v.vnics.span(), format!("vrs[{i}].vnics"), msg));
    }
    let mut ports = Vec::new();
    let mut tuns = Vec::new();
    let mut vlans = Vec::new();
    for (j, vn) in vnics.iter().enumerate() {
        let field = |f: &str| format!("vrs[{i}].vnics[{j}].{f}");
        vlans.push(vnic_vlan(vn).map_err(|(span, msg)| at.err(span, field("vlan"), msg))?);
        match (&vn.port, &vn.tunnel) {
            (Some(port), None) => {
                let Some(&p) = port_ix.get(port.get_ref()) else {
                    let msg = format!("no port {:?}", port.get_ref());
                    return Err(at.err(port.span(), field("port"), msg));
                };
                ports.push(p);
                tuns.push(None);
            }
            (None, Some(tun)) => {
                let Some(&(_, mut t)) = tunnels.get(tun.get_ref()) else {
                    let msg = format!("no tunnel {:?}", tun.get_ref());
                    return Err(at.err(tun.span(), field("tunnel"), msg));
                };
                if let Some(Ok(mac)) = vn.mac.as_deref().map(super::parse_mac) {
                    t.inner_mac = mac;
                }
                ports.push(t.port);
                tuns.push(Some(t));
            }
            (Some(port), Some(_)) => {
                let msg = "a port or a tunnel, not both".to_string();
                return Err(at.err(port.span(), field("port"), msg));
            }
            (None, None) => {
                let msg = "needs a `port` or a `tunnel`".to_string();
                return Err(at.err(v.vnics.span(), format!("vrs[{i}].vnics[{j}]"), msg));
            }
        }
    }
    Ok((ports, tuns, vlans))
}

/// A vNIC's VLAN: an id that can be on the wire (1..=4094), on a port.
fn vnic_vlan(
    vn: &super::schema::VnicConf,
) -> Result<Option<u16>, (std::ops::Range<usize>, String)> {
    let Some(v) = &vn.vlan else {
        return Ok(None);
    };
    if !(1..=4094).contains(v.get_ref()) {
        return Err((v.span(), format!("{}: must be 1..=4094", v.get_ref())));
    }
    if vn.tunnel.is_some() {
        return Err((v.span(), "a tunnel vNIC has no VLAN".into()));
    }
    Ok(Some(*v.get_ref()))
}

/// A VR's quarantine threshold (its own, or the host's) and the host's
/// watchdog.
fn guard(host: &HostConf, v: &VrConf) -> Guard {
    Guard {
        quarantine_after: Some(v.quarantine_after.unwrap_or(host.quarantine_after))
            .filter(|&n| n > 0),
        watchdog: (host.watchdog_ms > 0)
            .then(|| std::time::Duration::from_millis(host.watchdog_ms)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{said, vr_conf};

    fn name(names: &mut BTreeSet<String>, name: &str) -> Result<(), String> {
        let src = format!("name = {name:?}\nvnics = []\n");
        let v: VrConf = toml::from_str(&src).unwrap();
        let at = Source {
            src: &src,
            file: "v.toml",
        };
        check_name(3, &v, names, &at).map_err(|e| e.to_string())
    }

    #[test]
    fn names_are_short_plain_and_unique() {
        let mut names = BTreeSet::new();
        name(&mut names, "tenant-a_1").unwrap();
        name(&mut names, &"b".repeat(32)).unwrap();
        let word = "1-32 letters, digits, '-' or '_'";
        for bad in ["", "a b", "ä", &"c".repeat(33)] {
            let e = name(&mut names, bad).unwrap_err();
            assert_eq!(e, format!("v.toml:1: vrs[3].name: {bad:?}: {word}"));
        }
        assert_eq!(
            name(&mut names, "tenant-a_1").unwrap_err(),
            "v.toml:1: vrs[3].name: \"tenant-a_1\" defined twice"
        );
    }

    #[test]
    fn pool_slots_are_2_to_65536() {
        assert_eq!(pool_slots(&vr_conf("")).unwrap(), 2048, "the default");
        assert_eq!(pool_slots(&vr_conf("slots = 65536")).unwrap(), 65536);
        assert_eq!(pool_slots(&vr_conf("slots = 2")).unwrap(), 2);
        assert_eq!(
            said(pool_slots(&vr_conf("slots = 65537"))),
            "slots: 65537: must be 2..=65536"
        );
    }

    #[test]
    fn vnics_are_1_to_64_on_known_ports() {
        let ports = BTreeMap::from([("p0".to_string(), 0), ("p1".to_string(), 1)]);
        let check = |fields: &str| {
            let v: VrConf = toml::from_str(&format!("name = \"a\"\n{fields}")).unwrap();
            let at = Source {
                src: fields,
                file: "v.toml",
            };
            vnic_ports(2, &v, &ports, &TunnelIx::new(), &at).map_err(|e| e.to_string())
        };
        let two = "vnics = [{ port = \"p1\" }, { port = \"p0\" }]";
        assert_eq!(
            check(two).unwrap(),
            (vec![1, 0], vec![None, None], vec![None, None])
        );
        let vlan = "vnics = [{ port = \"p1\", vlan = 7 }, { port = \"p1\", vlan = 4094 }]";
        assert_eq!(check(vlan).unwrap().2, vec![Some(7), Some(4094)]);
        for bad in ["0", "4095"] {
            let e = check(&vlan.replace("4094", bad)).unwrap_err();
            assert!(
                e.contains(&format!("vrs[2].vnics[1].vlan: {bad}: must be 1..=4094")),
                "{e}"
            );
        }
        let e = check("vnics = [{ tunnel = \"t\", vlan = 7 }]").unwrap_err();
        assert!(
            e.contains("vrs[2].vnics[0].vlan: a tunnel vNIC has no VLAN"),
            "{e}"
        );
        assert_eq!(
            check("vnics = []").unwrap_err(),
            "v.toml:1: vrs[2].vnics: 0 vNICs: must be 1..=64"
        );
        let many = format!("vnics = [{}]", vec!["{ port = \"p0\" }"; 65].join(", "));
        assert!(check(&many).unwrap_err().contains("vrs[2].vnics: 65 vNICs"));
        assert!(
            check(&two.replace("p0", "p2"))
                .unwrap_err()
                .contains("vrs[2].vnics[1].port: no port \"p2\"")
        );
    }

    #[test]
    fn a_vr_runs_the_router_or_a_program_that_exists() {
        let mut cfg: Config = toml::from_str("").unwrap();
        cfg.dir = std::env::temp_dir();
        let router = vr_conf("vnics = [{ port = \"p0\", mac = \"02:00:00:00:00:01\" }]");
        let (program, config) = cfg.vr_runs(&router).unwrap();
        assert!(program.is_none());
        assert_eq!(config["vnics"][0]["mac"], "02:00:00:00:00:01");
        let prog = format!("vrhost-runs-{}", std::process::id());
        let path = cfg.dir.join(&prog);
        std::fs::write(&path, "").unwrap();
        let custom = vr_conf(&format!(
            "kind = \"program\"\nprogram = {prog:?}\nargs = [\"-v\"]\nconfig = {{ x = 1 }}"
        ));
        let runs = cfg.vr_runs(&custom);
        std::fs::remove_file(&path).unwrap();
        let (program, config) = runs.unwrap();
        assert_eq!(program, Some((path, vec!["-v".to_string()])));
        assert_eq!(config, serde_json::json!({ "x": 1 }));
        for (fields, want) in [
            (
                "kind = \"program\"",
                "program: kind = \"program\" needs `program`",
            ),
            ("kind = \"program\"\nprogram = \"no/such/vr\"", "program: "),
            (
                "vnics = [{ port = \"p0\" }]",
                "router: vnics[0].mac: a router vNIC needs a MAC",
            ),
            (
                "vnics = [{ port = \"p0\", mac = \"02:00:00:00:00:01\" }]\nrouter = { vnics = [] }",
                "router: `vnics` belongs to the VR, not to its router table",
            ),
            (
                "vnics = [{ port = \"p0\", mac = \"02:00:00:00:00:01\" }]\nrouter = { routes = [{ prefix = \"10.0.0.0/8\", nexthop = 3 }] }",
                "router: routes[0].nexthop 3 out of range",
            ),
        ] {
            let got = said(cfg.vr_runs(&vr_conf(fields)));
            assert!(got.starts_with(want), "want {want:?} in {got:?}");
        }
    }

    #[test]
    fn the_guard_takes_the_hosts_settings_unless_the_vr_has_its_own() {
        let host = HostConf::default();
        let g = guard(&host, &vr_conf(""));
        assert_eq!(g.quarantine_after, Some(10_000));
        assert_eq!(g.watchdog, Some(std::time::Duration::from_secs(1)));
        let g = guard(&host, &vr_conf("quarantine_after = 0"));
        assert_eq!(g.quarantine_after, None, "0: never");
        let off = HostConf {
            watchdog_ms: 0,
            quarantine_after: 5,
            ..HostConf::default()
        };
        let g = guard(&off, &vr_conf(""));
        assert_eq!((g.quarantine_after, g.watchdog), (Some(5), None));
    }
}
