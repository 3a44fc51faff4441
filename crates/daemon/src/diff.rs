//! A config change as data: from the plan in force and a new plan, which
//! ports and VRs are kept (and where they were), which are new, and which
//! go, as Snabb's reconfiguration diffs an app graph so that what did not
//! change keeps running. Pure: [`Controller`](crate::Controller) carries
//! the changes out.

use vrhost_host::alloc::ScalePolicy;
use vrhost_host::config::{ClusterPlan, Driver, HostConf, Plan, VrPlan};

use crate::control::{ApplyResult, ControlError};

/// What the daemon knows of a running VR that decides whether a change of
/// its instance count can be made in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Running {
    /// Instance slots of its region.
    pub slots: u16,
    /// Its instances take cores from the host's budget.
    pub placed: bool,
}

/// The change from one plan to the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// For each port of the new plan, its index in the old one if it is
    /// kept as it is, `None` if it is opened anew.
    pub ports: Vec<Option<usize>>,
    /// For each VR of the new plan, its index in the old one if it keeps
    /// forwarding (unchanged, or changed in place), `None` if a new
    /// process takes over (added or restarted).
    pub vrs: Vec<Option<usize>>,
    /// The change as the API reports it (its `generation` and `dry_run`
    /// are the caller's to set).
    pub result: ApplyResult,
    /// A dispatcher's engines or remote VRs changed: its data path is
    /// rebuilt and handed to the worker with the rest of the change.
    pub cluster: bool,
}

/// The change from `old` to `new`. `running` says what a VR of the old plan
/// runs as (`None`: not running); `force` names a VR restarted even if its
/// definition did not change.
///
/// # Errors
/// [`ControlError::Conflict`] for a change that cannot be made to a running
/// daemon: the host's core budget or fast path, a port whose driver,
/// interface, traffic or rings changed, a new port on an interface an old
/// one still uses, an `af_xdp` port removed under the fast path, or a
/// change of `[cluster]` other than a dispatcher's engines and remote VRs.
pub fn diff(
    old: &Plan,
    new: &Plan,
    running: impl Fn(&str) -> Option<Running>,
    force: Option<&str>,
) -> Result<Diff, ControlError> {
    check_budget(&old.host, &new.host)?;
    check_fast(old, new)?;
    let mut d = Diff {
        result: ApplyResult {
            rules: new.classifier.len() as u64,
            ..ApplyResult::default()
        },
        cluster: check_cluster(old, new)?,
        ..Diff::default()
    };
    diff_ports(old, new, &mut d)?;
    diff_vrs(old, new, &running, force, &mut d);
    Ok(d)
}

/// The host's core budget takes effect only when the daemon starts.
fn check_budget(old: &HostConf, new: &HostConf) -> Result<(), ControlError> {
    let budget = |h: &HostConf| {
        let limit = h.instance_cores.as_ref().map(|c| *c.get_ref());
        (h.cpu, limit, h.share_worker_core)
    };
    if budget(new) != budget(old) {
        return Err(ControlError::Conflict(
            "host.cpu, host.instance_cores and host.share_worker_core take effect when the daemon starts".into(),
        ));
    }
    Ok(())
}

/// Whether `[cluster]` changed in what a running dispatcher changes: its
/// `[[cluster.engines]]` and `[[cluster.vrs]]`. Its role, heartbeat,
/// underlay (by port name), address, MAC and etcd take effect when the
/// daemon starts, and an engine's `[cluster]` too.
fn check_cluster(old: &Plan, new: &Plan) -> Result<bool, ControlError> {
    if old.cluster == new.cluster {
        return Ok(false);
    }
    let fixed = |p: &Plan| match &p.cluster {
        Some(ClusterPlan::Dispatcher {
            spec,
            heartbeat,
            interval,
            misses,
            etcd,
            ..
        }) => {
            let under = p.ports.get(spec.underlay).map(|u| u.0.clone());
            Some((
                under,
                spec.local,
                spec.local_mac,
                *heartbeat,
                *interval,
                *misses,
                etcd.clone(),
            ))
        }
        _ => None,
    };
    match (fixed(old), fixed(new)) {
        (Some(a), Some(b)) if a == b => Ok(true),
        _ => Err(ControlError::Conflict(
            "cluster: only a dispatcher's engines and vrs change while it runs; its role, \
             heartbeat, underlay, local, local_mac and etcd (and an engine's [cluster]) take \
             effect when the daemon starts"
                .into(),
        )),
    }
}

/// The fast path is loaded, and attached to the `af_xdp` ports, when the
/// daemon starts; it stays attached to them until it stops.
fn check_fast(old: &Plan, new: &Plan) -> Result<(), ControlError> {
    let (o, n) = (&old.host, &new.host);
    if (o.fast_path, &o.fast) != (n.fast_path, &n.fast) {
        return Err(ControlError::Conflict(
            "host.fast_path and host.fast take effect when the daemon starts".into(),
        ));
    }
    let xdp = |p: &(String, Driver, String)| p.1 == Driver::AfXdp;
    if let Some(p) = (old.ports.iter().filter(|p| o.fast_path && xdp(p)))
        .find(|p| !new.ports.iter().any(|q| q == *p))
    {
        return Err(ControlError::Conflict(format!(
            "port {}: the fast path stays attached to {} while the daemon runs; an af_xdp port cannot be removed or changed",
            p.0, p.2
        )));
    }
    Ok(())
}

/// Ports, by name; a port whose driver or interface changed is refused
/// while in use (its interface cannot be owned twice).
fn diff_ports(old: &Plan, new: &Plan, d: &mut Diff) -> Result<(), ControlError> {
    for (j, (name, driver, iface)) in new.ports.iter().enumerate() {
        match old.ports.iter().position(|p| &p.0 == name) {
            Some(i)
                if old.ports[i].1 == *driver
                    && &old.ports[i].2 == iface
                    && old.gens[i] == new.gens[j]
                    && old.rings[i] == new.rings[j] =>
            {
                d.ports.push(Some(i));
            }
            Some(_) => {
                return Err(ControlError::Conflict(format!(
                    "port {name}: its driver, interface, traffic or ring sizes changed; remove the port in one change and add it in the next"
                )));
            }
            None => {
                if let Some(o) = (old.ports.iter()).find(|p| !iface.is_empty() && &p.2 == iface) {
                    return Err(ControlError::Conflict(format!(
                        "port {name}: interface {iface} is still used by port {}",
                        o.0
                    )));
                }
                d.result.ports_added.push(name.clone());
                d.ports.push(None);
            }
        }
    }
    for (name, ..) in &old.ports {
        if !new.ports.iter().any(|p| &p.0 == name) {
            d.result.ports_removed.push(name.clone());
        }
    }
    Ok(())
}

/// VRs, by name: unchanged, changed in place, restarted, added, removed;
/// a kept VR whose `path` changed is moved (a change of the path alone
/// leaves its processes as they are).
fn diff_vrs(
    old: &Plan,
    new: &Plan,
    running: &impl Fn(&str) -> Option<Running>,
    force: Option<&str>,
    d: &mut Diff,
) {
    let r = &mut d.result;
    for vr in &new.vrs {
        let forced = force == Some(vr.name.as_str());
        let was = old.vrs.iter().position(|v| v.name == vr.name);
        if let Some(i) = was
            && old.vrs[i].path != vr.path
        {
            r.moved.push(vr.name.clone());
        }
        match was {
            Some(i) if !forced && same_vr(&old.vrs[i], vr) => {
                d.vrs.push(Some(i));
                r.unchanged.push(vr.name.clone());
            }
            Some(i) if !forced && in_place(&old.vrs[i], vr, running(&vr.name)) => {
                d.vrs.push(Some(i));
                r.rescaled.push(vr.name.clone());
            }
            Some(_) => {
                d.vrs.push(None);
                r.restarted.push(vr.name.clone());
            }
            None => {
                d.vrs.push(None);
                r.added.push(vr.name.clone());
            }
        }
    }
    for vr in &old.vrs {
        if !new.vrs.iter().any(|v| v.name == vr.name) {
            r.removed.push(vr.name.clone());
        }
    }
}

/// The same process would run: program, pool, core, config and vNICs.
fn same_process(a: &VrPlan, b: &VrPlan) -> bool {
    a.program == b.program
        && a.slots == b.slots
        && a.cpu == b.cpu
        && a.config == b.config
        && a.vnic_ports.len() == b.vnic_ports.len()
        // A tunnel vNIC's encapsulation is set when its path is built.
        && a.vnic_tunnels == b.vnic_tunnels
        && a.vnic_vlans == b.vnic_vlans
        // Its user, limits and cgroup are set when it starts.
        && a.confine == b.confine
}

/// Nothing of the VR changed that its processes or instances see.
fn same_vr(a: &VrPlan, b: &VrPlan) -> bool {
    same_process(a, b)
        && a.instances == b.instances
        && a.scale == b.scale
        && a.placed == b.placed
        && a.instance_cpus == b.instance_cpus
        && a.balance == b.balance
}

/// Only the instance count, scaling or balancing changed, and the running
/// VR's region has the instance slots: changed in place.
fn in_place(a: &VrPlan, b: &VrPlan, running: Option<Running>) -> bool {
    let Some(e) = running else {
        return false;
    };
    // Down to one unpinned instance, a placed VR keeps its core.
    let one = b.scale == ScalePolicy::Fixed(1) && b.cpu.is_none();
    same_process(a, b)
        && (e.placed == b.placed || (e.placed && one))
        && b.instance_slots() <= e.slots
        && (a.instance_cpus.iter().zip(&b.instance_cpus)).all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use vrhost_host::config::Config;

    use super::*;

    /// Two null ports and VRs a and b (b scaled, up to two instances).
    const BASE: &str = r#"
[[ports]]
name = "p0"
driver = "null"

[[ports]]
name = "p1"
driver = "null"

[[vrs]]
name = "a"
slots = 256
vnics = [{ port = "p0", mac = "02:00:00:0a:00:01", addrs = ["10.1.0.1/24"] }]

[[vrs]]
name = "b"
slots = 256
scale = { up_pps = 1000, down_pps = 500, max = 2 }
vnics = [{ port = "p1", mac = "02:00:00:0b:00:01", addrs = ["10.2.0.1/24"] }]

[[rules]]
port = "p0"
vr = "a"
"#;

    fn plan(src: &str) -> Plan {
        let (_, plan) = Config::parse(src, "test", Path::new(".")).expect("a valid config");
        plan
    }

    /// Every VR of [`BASE`] runs as planned, in regions with 4 instance
    /// slots.
    fn running(name: &str) -> Option<Running> {
        let old = plan(BASE);
        let vr = old.vrs.iter().find(|v| v.name == name)?;
        Some(Running {
            slots: 4,
            placed: vr.placed,
        })
    }

    fn lists(d: &Diff) -> [&[String]; 5] {
        let r = &d.result;
        [
            &r.unchanged,
            &r.rescaled,
            &r.restarted,
            &r.added,
            &r.removed,
        ]
    }

    #[test]
    fn the_same_config_changes_nothing() {
        let d = diff(&plan(BASE), &plan(BASE), running, None).unwrap();
        assert_eq!(d.ports, [Some(0), Some(1)]);
        assert_eq!(d.vrs, [Some(0), Some(1)]);
        assert_eq!(
            lists(&d),
            [&["a".to_string(), "b".into()][..], &[], &[], &[], &[]]
        );
        assert_eq!(d.result.rules, 1);
    }

    #[test]
    fn a_changed_cluster_is_refused_until_a_restart() {
        let engine =
            format!("{BASE}\n[cluster]\nrole = \"engine\"\nheartbeat = \"127.0.0.1:4790\"\n");
        let e = diff(&plan(BASE), &plan(&engine), running, None).unwrap_err();
        assert!(e.to_string().contains("cluster"), "{e}");
        assert!(diff(&plan(&engine), &plan(&engine), running, None).is_ok());
    }

    /// [`BASE`] with a null underlay and port `p2` for remote VRs, a
    /// dispatcher of engine e1, and `vrs` (TOML of `[[cluster.vrs]]`).
    fn dispatcher(vrs: &str, heartbeat: &str) -> String {
        format!(
            "{BASE}\n[[ports]]\nname = \"p2\"\ndriver = \"null\"\n\n[[ports]]\nname = \"ul\"\n\
             driver = \"null\"\n\n[cluster]\nrole = \"dispatcher\"\nheartbeat = \"{heartbeat}\"\n\
             underlay = \"ul\"\nlocal = \"10.9.0.1\"\nlocal_mac = \"02:00:00:00:09:01\"\n\n\
             [[cluster.engines]]\nname = \"e1\"\naddress = \"10.9.0.11\"\n{vrs}"
        )
    }

    #[test]
    fn a_dispatcher_s_remote_vrs_change_while_it_runs_its_heartbeat_does_not() {
        let q = "[[cluster.vrs]]\nname = \"q\"\nid = 8\nports = [\"p2\"]\nengines = [\"e1\"]\n";
        let (old, new) = (
            plan(&dispatcher("", "10.9.0.1:4790")),
            plan(&dispatcher(q, "10.9.0.1:4790")),
        );
        let d = diff(&old, &new, running, None).unwrap();
        assert!(d.cluster);
        assert_eq!(d.result.unchanged, ["a", "b"]);
        assert!(!diff(&new, &new, running, None).unwrap().cluster);
        assert!(diff(&new, &old, running, None).unwrap().cluster);
        // A configured engine more: a change of the data path too.
        let e2 = format!("{q}\n[[cluster.engines]]\nname = \"e2\"\naddress = \"10.9.0.12\"\n");
        assert!(
            diff(
                &new,
                &plan(&dispatcher(&e2, "10.9.0.1:4790")),
                running,
                None
            )
            .unwrap()
            .cluster
        );
        let moved = plan(&dispatcher(q, "10.9.0.1:4791"));
        let e = diff(&new, &moved, running, None).unwrap_err();
        assert!(e.to_string().contains("heartbeat"), "{e}");
    }

    #[test]
    fn a_changed_pool_restarts_only_its_vr_and_a_forced_one_restarts() {
        let new = BASE.replacen("slots = 256", "slots = 512", 1);
        let d = diff(&plan(BASE), &plan(&new), running, None).unwrap();
        assert_eq!(d.vrs, [None, Some(1)]);
        assert_eq!(d.result.restarted, ["a"]);
        assert_eq!(d.result.unchanged, ["b"]);
        let d = diff(&plan(BASE), &plan(BASE), running, Some("b")).unwrap();
        assert_eq!(d.vrs, [Some(0), None]);
        assert_eq!(d.result.restarted, ["b"]);
    }

    #[test]
    fn a_changed_routing_mode_restarts_its_vr() {
        let vr_a = "addrs = [\"10.1.0.1/24\"] }]\n\n[[vrs]]\nname = \"b\"";
        assert!(BASE.contains(vr_a));
        for mode in ["src", "src-dst"] {
            let new = BASE.replacen(
                vr_a,
                &vr_a.replacen(
                    "}]\n",
                    &format!("}}]\n[vrs.router]\nmode = \"{mode}\"\n"),
                    1,
                ),
                1,
            );
            let d = diff(&plan(BASE), &plan(&new), running, None).unwrap();
            assert_eq!(d.result.restarted, ["a"], "{mode}");
            assert_eq!(d.result.unchanged, ["b"], "{mode}");
        }
    }

    #[test]
    fn a_changed_limit_restarts_its_vr() {
        for (key, value) in [("cpu_quota", "0.5"), ("memory", "\"64M\"")] {
            let new = BASE.replacen(
                "slots = 256\nvnics",
                &format!("slots = 256\n{key} = {value}\nvnics"),
                1,
            );
            assert_ne!(new, BASE, "{key}");
            let d = diff(&plan(BASE), &plan(&new), running, None).unwrap();
            assert_eq!(d.result.restarted, ["a"], "{key}");
            assert_eq!(d.result.unchanged, ["b"], "{key}");
        }
    }

    #[test]
    fn a_scaling_change_is_made_in_place_when_the_region_has_the_slots() {
        let new = BASE.replace("up_pps = 1000", "up_pps = 2000");
        let d = diff(&plan(BASE), &plan(&new), running, None).unwrap();
        assert_eq!(d.vrs, [Some(0), Some(1)]);
        assert_eq!(d.result.rescaled, ["b"]);
        // More instances than its region has slots: a new region.
        let small = |n: &str| running(n).map(|r| Running { slots: 1, ..r });
        assert!(plan(&new).vrs[1].instance_slots() > 1);
        let d = diff(&plan(BASE), &plan(&new), small, None).unwrap();
        assert_eq!(d.result.restarted, ["b"]);
        // Not running (down): started anew.
        let d = diff(&plan(BASE), &plan(&new), |_| None, None).unwrap();
        assert_eq!(d.result.restarted, ["b"]);
    }

    #[test]
    fn vrs_and_ports_come_and_go_by_name() {
        let new = BASE
            .replace("name = \"b\"", "name = \"c\"")
            .replace("name = \"p1\"", "name = \"p2\"")
            .replace("port = \"p1\"", "port = \"p2\"");
        let d = diff(&plan(BASE), &plan(&new), running, None).unwrap();
        assert_eq!(d.ports, [Some(0), None]);
        assert_eq!(
            (
                d.result.ports_added.as_slice(),
                d.result.ports_removed.as_slice()
            ),
            (&["p2".to_string()][..], &["p1".to_string()][..])
        );
        assert_eq!(d.vrs, [Some(0), None]);
        assert_eq!(
            (d.result.added.as_slice(), d.result.removed.as_slice()),
            (&["c".to_string()][..], &["b".to_string()][..])
        );
    }

    /// [`BASE`] on a host with a fast path, its ports af_xdp.
    fn fast_base() -> String {
        format!("[host]\nfast_path = true\n{BASE}")
            .replace("driver = \"null\"", "driver = \"af_xdp\"")
            .replace("name = \"p0\"\n", "name = \"p0\"\ninterface = \"veth0\"\n")
            .replace("name = \"p1\"\n", "name = \"p1\"\ninterface = \"veth1\"\n")
    }

    #[test]
    fn a_change_of_path_alone_is_a_move_not_a_restart() {
        let old = fast_base();
        let new = old.replacen("slots = 256\n", "slots = 256\npath = \"fast\"\n", 1);
        let d = diff(&plan(&old), &plan(&new), running, None).unwrap();
        assert_eq!(d.vrs, [Some(0), Some(1)], "both keep their processes");
        assert_eq!(d.result.moved, ["a"]);
        assert_eq!(d.result.unchanged, ["a", "b"]);
        assert!(d.result.restarted.is_empty());
        // And back.
        let d = diff(&plan(&new), &plan(&old), running, None).unwrap();
        assert_eq!(
            (d.vrs.as_slice(), d.result.moved.as_slice()),
            (&[Some(0), Some(1)][..], &["a".to_string()][..])
        );
        // With a restart (pool changed), still reported moved.
        let both = new.replacen("slots = 256", "slots = 512", 1);
        let d = diff(&plan(&old), &plan(&both), running, None).unwrap();
        assert_eq!(
            (d.result.moved.as_slice(), d.result.restarted.as_slice()),
            (&["a".to_string()][..], &["a".to_string()][..])
        );
    }

    #[test]
    fn the_fast_path_and_its_ports_change_only_at_start() {
        let old = fast_base();
        let conflict = |new: &str, says: &str| match diff(&plan(&old), &plan(new), running, None) {
            Err(ControlError::Conflict(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("{new}: {other:?}"),
        };
        conflict(
            &old.replace("fast_path = true", "fast_path = false"),
            "host.fast_path",
        );
        conflict(
            &old.replace(
                "fast_path = true",
                "fast_path = true\n[host.fast]\nmax_routes = 10",
            ),
            "host.fast",
        );
        let no_p1 = old
            .replace(
                "[[ports]]\nname = \"p1\"\ninterface = \"veth1\"\ndriver = \"af_xdp\"\n",
                "",
            )
            .replace("port = \"p1\"", "port = \"p0\"");
        conflict(&no_p1, "port p1: the fast path stays attached to veth1");
    }

    #[test]
    fn changes_a_running_daemon_cannot_make_are_conflicts() {
        let old = plan(BASE);
        let conflict = |new: &str, says: &str| match diff(&old, &plan(new), running, None) {
            Err(ControlError::Conflict(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("{new}: {other:?}"),
        };
        conflict(
            &BASE.replacen("driver = \"null\"", "driver = \"mem\"", 1),
            "port p0: its driver",
        );
        conflict(
            &format!("[host]\nshare_worker_core = true\n{BASE}"),
            "host.cpu",
        );
    }
}
