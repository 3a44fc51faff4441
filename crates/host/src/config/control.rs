//! A VR's control plane (`control_plane`, `control_config`; issue 22,
//! item 3): what the daemon runs in the VR's control namespace, and the
//! ports, vNICs and rules that connect the namespace's TAP interfaces to
//! the VR.
//!
//! A router VR with `control_plane` gets, for each vNIC `i` of its `n`,
//! a control vNIC `n + i` whose port is a TAP device `vnic<i>` in the
//! namespace `vrctl-<vr>` (with the vNIC's MAC and addresses), fed by a
//! rule on that port placed before the config's rules; its router hands
//! frames for itself that it does not handle to the control vNIC and
//! sends what comes in on a control vNIC out of the vNIC
//! (`control_vnics`, see the router's `cplane.rs`). The TAP ports are
//! named `ctl:<vr>:<i>` and their interface is written
//! `<namespace>/<ifname>`: a `/` is never in an interface name, so the
//! daemon knows to open such a port inside the namespace.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::FieldError;
use super::schema::{Driver, VrConf, VrKind};
use crate::classify::{Match, Rule};

/// `control_plane`: `"bird"`, or a command of the tenant's choosing.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ControlPlaneConf {
    /// A control plane vrhost knows by name (`"bird"`).
    Named(String),
    /// `{ command = ["prog", "arg", ...] }`.
    Command {
        /// Program and arguments (none: refused at the check, "an empty
        /// command", rather than serde's "no variant matched").
        #[serde(default)]
        command: Vec<String>,
    },
}

/// What runs in a VR's control namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlRun {
    /// BIRD 2 (`bird -f -c CONFIG -s RUNDIR/bird.ctl`), the program found
    /// in `PATH` when the config was checked.
    Bird {
        /// The `bird` binary.
        bird: PathBuf,
        /// Its config file (`control_config`).
        config: PathBuf,
    },
    /// The tenant's command, as given.
    Command(Vec<String>),
    /// Nothing (a tap VR without `control_plane`: the namespace's own
    /// forwarding is the data plane).
    Nothing,
}

/// One TAP interface of a control namespace: a vNIC's twin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlTap {
    /// Interface name in the namespace (`vnic<i>`).
    pub ifname: String,
    /// The vNIC's MAC.
    pub mac: String,
    /// The vNIC's addresses.
    pub addrs: Vec<String>,
}

/// A checked control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlPlan {
    /// The control namespace's name (`vrctl-<vr>`).
    pub netns: String,
    /// What runs there.
    pub run: ControlRun,
    /// One TAP per vNIC, in vNIC order.
    pub taps: Vec<ControlTap>,
    /// How long its routes stay in the VR while it is down (ms).
    pub hold_ms: u64,
    /// The namespace is the VR's data plane (`kind = "tap"`): forwarding
    /// on there, and its routes are not synced into the VR (which has no
    /// table of its own to use).
    pub data_plane: bool,
}

/// The longest `control_hold_ms`: a day.
const MAX_HOLD_MS: u64 = 86_400_000;

/// The default of `control_hold_ms`: BGP's usual hold time (RFC 4271
/// suggests 90 s), what a peer would wait before it withdrew them.
pub const CONTROL_HOLD_MS: u64 = 90_000;

/// The control namespace of VR `vr`.
pub fn control_netns(vr: &str) -> String {
    format!("vrctl-{vr}")
}

/// The prefix of every control namespace's name (for the daemon's
/// clean-up of namespaces left over by a daemon that died).
pub const CONTROL_NETNS_PREFIX: &str = "vrctl-";

/// A port's interface split into (namespace, interface) when it is a
/// control TAP's (`<namespace>/<ifname>`).
pub fn split_netns(iface: &str) -> Option<(&str, &str)> {
    iface.split_once('/')
}

/// Find `prog` as `execvp` would: a path if it has a `/`, else the
/// first executable file of that name in `PATH`.
pub fn find_program(prog: &str) -> Option<PathBuf> {
    if prog.contains('/') {
        let p = PathBuf::from(prog);
        return is_exec(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| is_exec(p))
}

fn is_exec(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Check VR `v`'s control plane, if it has one (`dir`: the config's
/// directory, for a relative `control_config`).
pub(super) fn vr_control(v: &VrConf, dir: &Path) -> Result<Option<ControlPlan>, FieldError> {
    vr_control_in(v, dir, find_program)
}

/// [`vr_control`], finding programs with `find`.
fn vr_control_in(
    v: &VrConf,
    dir: &Path,
    find: impl Fn(&str) -> Option<PathBuf>,
) -> Result<Option<ControlPlan>, FieldError> {
    let name = v.name.get_ref();
    let tap = v.kind == VrKind::Tap;
    let Some(cp) = &v.control_plane else {
        if tap {
            if v.control_config.is_some() || v.control_hold_ms.is_some() {
                let msg = "a tap VR without `control_plane` takes no other control_* key";
                return Err((v.name.span(), "control_plane", msg.into()));
            }
            // Nothing runs: the namespace's forwarding is the data plane.
            return Ok(Some(control_plan(v, ControlRun::Nothing, CONTROL_HOLD_MS)));
        }
        if let Some(c) = &v.control_config {
            let msg = "`control_config` needs `control_plane`".to_string();
            return Err((c.span(), "control_config", msg));
        }
        if v.control_hold_ms.is_some() {
            let msg = "`control_hold_ms` needs `control_plane`".to_string();
            return Err((v.name.span(), "control_hold_ms", msg));
        }
        return Ok(None);
    };
    let fail = |msg: String| (cp.span(), "control_plane", format!("VR {name:?}: {msg}"));
    if v.kind == VrKind::Program {
        return Err(fail(
            "a control plane needs the built-in router (or kind = \"tap\")".into(),
        ));
    }
    if v.path.as_ref().is_some_and(|p| p.get_ref() == "fast") {
        // `daemon/src/fast.rs` gives the maps config and API routes only.
        return Err(fail(
            "not with path = \"fast\" yet: the fast path does not take the control plane's routes"
                .into(),
        ));
    }
    let run = match cp.get_ref() {
        ControlPlaneConf::Named(n) if n == "bird" => {
            let bird = find("bird").ok_or_else(|| {
                fail(
                    "control plane \"bird\": no `bird` program in PATH (Debian package bird2)"
                        .into(),
                )
            })?;
            let Some(c) = &v.control_config else {
                return Err(fail(
                    "control plane \"bird\" needs `control_config` (its bird.conf)".into(),
                ));
            };
            let config = dir.join(c.get_ref());
            if !config.is_file() {
                let msg = format!("VR {name:?}: {}: no such file", config.display());
                return Err((c.span(), "control_config", msg));
            }
            ControlRun::Bird { bird, config }
        }
        ControlPlaneConf::Named(n) => {
            return Err(fail(format!(
                "{n:?}: not a known control plane (\"bird\", or {{ command = [...] }})"
            )));
        }
        ControlPlaneConf::Command { command } => {
            let Some(prog) = command.first() else {
                return Err(fail("an empty command".into()));
            };
            if find(prog).is_none() {
                return Err(fail(format!("{prog:?}: no such program")));
            }
            ControlRun::Command(command.clone())
        }
    };
    let hold_ms = match v.control_hold_ms {
        Some(ms) if ms > MAX_HOLD_MS => {
            let msg = format!("{ms}: at most {MAX_HOLD_MS} (a day)");
            return Err((v.name.span(), "control_hold_ms", msg));
        }
        ms => ms.unwrap_or(CONTROL_HOLD_MS),
    };
    Ok(Some(control_plan(v, run, hold_ms)))
}

/// The plan of VR `v`'s control namespace, with `run` running there.
fn control_plan(v: &VrConf, run: ControlRun, hold_ms: u64) -> ControlPlan {
    let taps = (v.vnics.get_ref().iter().enumerate())
        .map(|(i, vn)| ControlTap {
            ifname: format!("vnic{i}"),
            mac: vn.mac.clone().unwrap_or_default(),
            addrs: vn.addrs.clone(),
        })
        .collect();
    ControlPlan {
        netns: control_netns(v.name.get_ref()),
        run,
        taps,
        hold_ms,
        data_plane: v.kind == VrKind::Tap,
    }
}

/// The ports, vNICs and rules of the control planes of `vrs`: control
/// vNICs are appended to each VR's `vnic_ports`; returns the control
/// ports (to follow the config's `first_port` ports) and the rules that
/// feed the control vNICs, to be placed before the config's.
pub(super) fn expand(
    vrs: &mut [super::VrPlan],
    first_port: usize,
) -> (Vec<(String, Driver, String)>, Vec<Rule>) {
    let mut ports = Vec::new();
    let mut rules = Vec::new();
    for (vr, v) in vrs.iter_mut().enumerate() {
        let Some(cp) = &v.control else { continue };
        let n = v.vnic_ports.len();
        for (i, tap) in cp.taps.iter().enumerate() {
            let port = first_port + ports.len();
            ports.push((
                format!("ctl:{}:{i}", v.name),
                Driver::Tap,
                format!("{}/{}", cp.netns, tap.ifname),
            ));
            v.vnic_ports.push(port);
            rules.push(Rule {
                m: Match {
                    in_port: Some(port),
                    ..Match::default()
                },
                vr,
                vnic: (n + i) as u16,
            });
        }
    }
    (ports, rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{GOOD, parse, said, vr_conf};

    const VNICS: &str =
        r#"vnics = [{ port = "p0", mac = "02:00:00:00:01:01", addrs = ["10.0.0.1/24"] }]"#;

    #[test]
    fn a_control_plane_adds_a_tap_port_vnic_and_rule_per_vnic() {
        let src = GOOD.replace(
            "slots = 1024\n",
            "slots = 1024\ncontrol_plane = { command = [\"/bin/sh\", \"-c\", \"sleep 1\"] }\n",
        );
        let p = parse(&src).unwrap();
        let v = &p.vrs[0];
        assert_eq!(v.vnic_ports, vec![0, 1, 2, 3]);
        assert_eq!(p.ports.len(), 4);
        assert_eq!(
            p.ports[2],
            (
                "ctl:tenant-a:0".into(),
                Driver::Tap,
                "vrctl-tenant-a/vnic0".into()
            )
        );
        assert_eq!(
            split_netns(&p.ports[3].2),
            Some(("vrctl-tenant-a", "vnic1"))
        );
        assert_eq!((p.gens.len(), p.rings.len()), (4, 4));
        assert_eq!(p.classifier.len(), 3, "two control rules and the config's");
        let key = vrhost_packet::FlowKey::default();
        assert_eq!(p.classifier.classify(3, &key), Some((0, 3)));
        assert_eq!(v.config["control_vnics"], serde_json::json!([2, 3]));
        let cp = v.control.as_ref().unwrap();
        assert_eq!(cp.netns, "vrctl-tenant-a");
        assert_eq!(cp.taps[1].mac, "02:00:00:00:01:02");
        assert!(matches!(&cp.run, ControlRun::Command(c) if c[0] == "/bin/sh"));
        assert!(parse(GOOD).unwrap().vrs[0].control.is_none());
    }

    #[test]
    fn bird_needs_its_program_and_config() {
        let dir = std::env::temp_dir();
        let none = |_: &str| None;
        let bird = |_: &str| Some(PathBuf::from("/usr/sbin/bird"));
        let v = vr_conf(&format!(
            "{VNICS}\ncontrol_plane = \"bird\"\ncontrol_config = \"x.conf\""
        ));
        let e = said(vr_control_in(&v, &dir, none));
        assert!(
            e.contains(
                "control_plane: VR \"a\": control plane \"bird\": no `bird` program in PATH"
            ),
            "{e}"
        );
        let e = said(vr_control_in(&v, &dir, bird));
        assert!(
            e.starts_with("control_config: VR \"a\": ") && e.ends_with("x.conf: no such file"),
            "{e}"
        );
        let v = vr_conf(&format!("{VNICS}\ncontrol_plane = \"bird\""));
        assert!(said(vr_control_in(&v, &dir, bird)).contains("needs `control_config`"));
        let conf = dir.join(format!("vrhost-bird-{}.conf", std::process::id()));
        std::fs::write(&conf, "").unwrap();
        let v = vr_conf(&format!(
            "{VNICS}\ncontrol_plane = \"bird\"\ncontrol_config = {:?}",
            conf.file_name().unwrap()
        ));
        let cp = vr_control_in(&v, &dir, bird).unwrap().unwrap();
        std::fs::remove_file(&conf).unwrap();
        assert_eq!(
            cp.run,
            ControlRun::Bird {
                bird: "/usr/sbin/bird".into(),
                config: conf
            }
        );
        assert_eq!(cp.taps[0].addrs, ["10.0.0.1/24"]);
    }

    #[test]
    fn bad_control_planes_are_refused_naming_the_vr() {
        let dir = Path::new(".");
        for (fields, want) in [
            (
                "control_plane = \"frr\"",
                "\"frr\": not a known control plane",
            ),
            ("control_plane = { command = [] }", "an empty command"),
            (
                "control_plane = { command = [\"no-such-prog-x\"] }",
                "no such program",
            ),
            ("control_config = \"b.conf\"", "needs `control_plane`"),
            (
                "kind = \"program\"\ncontrol_plane = \"bird\"",
                "needs the built-in router",
            ),
        ] {
            let v = vr_conf(&format!("{VNICS}\n{fields}"));
            let e = said(vr_control(&v, dir));
            assert!(e.contains(want), "{fields}: {e}");
        }
    }

    #[test]
    fn a_tap_vr_is_its_namespace_with_or_without_a_command() {
        let tap = GOOD.replace("slots = 1024\n", "slots = 1024\nkind = \"tap\"\n");
        let e = parse(&tap).unwrap_err().to_string();
        assert!(e.contains("a tap VR has no router table"), "{e}");
        let tap = tap.replace(
            "[vrs.router]\nnexthops = [{ vnic = 1, mac = \"02:00:00:00:02:02\" }]\nroutes = [{ prefix = \"10.1.1.0/24\", nexthop = 0 }]\n",
            "",
        );
        let p = parse(&tap).unwrap();
        let v = &p.vrs[0];
        assert_eq!(v.vnic_ports, vec![0, 1, 2, 3]);
        assert_eq!(v.config["control_vnics"], serde_json::json!([2, 3]));
        assert_eq!(v.config["control_all"], serde_json::json!(true));
        let cp = v.control.as_ref().unwrap();
        assert_eq!((&cp.run, cp.data_plane), (&ControlRun::Nothing, true));
        assert_eq!(cp.netns, "vrctl-tenant-a");
        // Its data vNICs' frames come back on its TAPs: the host keeps
        // them room in its pool.
        assert_eq!(v.path_spec().loop_vnics, 2);
        assert_eq!(p.vrs[0].path_spec().slots, 1024);
        // With the tenant's router as its command.
        let cmd = tap.replace(
            "kind = \"tap\"\n",
            "kind = \"tap\"\ncontrol_plane = { command = [\"/bin/sleep\", \"9\"] }\n",
        );
        let cp = parse(&cmd).unwrap().vrs[0].control.clone().unwrap();
        assert!(matches!(&cp.run, ControlRun::Command(c) if c[0] == "/bin/sleep"));
        assert!(cp.data_plane);
        // A router's control plane is not its data plane.
        let v = vr_conf(&format!(
            "{VNICS}\ncontrol_plane = {{ command = [\"/bin/sleep\"] }}"
        ));
        assert!(!vr_control(&v, Path::new(".")).unwrap().unwrap().data_plane);
        let v = vr_conf(&format!("{VNICS}\nkind = \"tap\"\ncontrol_hold_ms = 5"));
        let e = said(vr_control(&v, Path::new(".")));
        assert!(e.contains("takes no other control_* key"), "{e}");
    }
}
