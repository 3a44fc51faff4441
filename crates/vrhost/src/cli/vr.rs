//! `vrhost vr list|show|add|replace|restart|move|del`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use hyper::Method;
use serde_json::{Map, Value};

use super::api::{
    ApplyResult, FastStats, InstanceStatus, MoveRequest, Vnic, VnicStats, VrStats, VrStatus,
};
use super::client::{Answer, encode};
use super::output::{Col, Table, bytes, list, map_list, opt};
use super::{ApiArgs, emit, emit_deleted, one_shot};

/// `vrhost vr ...`.
#[derive(Debug, Clone, clap::Args)]
pub struct VrArgs {
    #[command(flatten)]
    pub api: ApiArgs,
    #[command(subcommand)]
    pub cmd: VrCmd,
}

/// What to do with VRs.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum VrCmd {
    /// All VRs: state, kind, vNICs, counters, processes.
    #[command(visible_alias = "ls")]
    List,
    /// One VR: its definition and counters.
    Show {
        /// The VR.
        name: String,
    },
    /// Add a VR (with its rules) from a TOML or JSON file and start it.
    ///
    /// The file holds one VR as in the config's `[[vrs]]` table, at the top
    /// level (`name = ...`, `vnics = [...]`, `[router]`, `rules = [...]`) or
    /// as a single `[[vrs]]` entry with its `[[rules]]` beside it.
    Add {
        /// The VR file (`.json` is read as JSON, anything else as TOML).
        file: PathBuf,
    },
    /// Replace a VR's definition from a file (restarts it if it changed).
    Replace {
        /// The VR file, as for `add`.
        file: PathBuf,
    },
    /// Start a VR again with a new process and region, as if its
    /// definition had changed (the way out of quarantine).
    Restart {
        /// The VR.
        name: String,
    },
    /// Move a running VR between its user-space instances and the XDP fast path
    ///
    /// While traffic flows: one select-table update per key of its rules,
    /// made after its routes and neighbours are in the fast path; its
    /// processes, routes and counters go on. Needs `[host] fast_path =
    /// true` and a router VR the fast path can carry.
    Move {
        /// The VR.
        name: String,
        /// Where its frames go.
        path: PathArg,
    },
    /// Stop a VR and remove it with its rules.
    #[command(visible_alias = "rm")]
    Del {
        /// The VR.
        name: String,
    },
}

/// A VR's data path, as `vr move` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PathArg {
    /// Its user-space instances.
    Slow,
    /// The XDP fast path.
    Fast,
}

impl PathArg {
    fn name(self) -> &'static str {
        match self {
            PathArg::Slow => "slow",
            PathArg::Fast => "fast",
        }
    }
}

/// Run `vrhost vr ...`.
///
/// # Errors
/// The daemon cannot be reached or refuses, or a file is bad.
pub fn run(args: &VrArgs) -> Result<()> {
    let api = &args.api;
    let c = one_shot(api)?;
    match &args.cmd {
        VrCmd::List => {
            let a = c.get("/v1/vrs")?;
            emit(api, &a, |a| {
                let vrs: Vec<VrStatus> = a.decode()?;
                Ok(list_table(&vrs).print()?)
            })
        }
        VrCmd::Show { name } => {
            let a = c.get(&vr_path(name))?;
            emit(api, &a, |a| {
                let vr: VrStatus = a.decode()?;
                Ok(super::output::out(&show(&vr))?)
            })
        }
        VrCmd::Add { file } => {
            let spec = read_vr_file(file)?;
            let a = c.call(Method::POST, "/v1/vrs", Some(&spec))?;
            emit(api, &a, |a| say_vr("added", a))
        }
        VrCmd::Replace { file } => {
            let spec = read_vr_file(file)?;
            let name = spec["name"].as_str().unwrap_or_default();
            let a = c.call(Method::PUT, &vr_path(name), Some(&spec))?;
            emit(api, &a, |a| say_vr("replaced", a))
        }
        VrCmd::Restart { name } => {
            let path = format!("{}/restart", vr_path(name));
            let a = c.call(Method::POST, &path, None::<&()>)?;
            emit(api, &a, |_| {
                println!("restarted VR {name}");
                Ok(())
            })
        }
        VrCmd::Move { name, path } => {
            let body = MoveRequest {
                path: path.name().into(),
            };
            let a = c.call(
                Method::POST,
                &format!("{}/move", vr_path(name)),
                Some(&body),
            )?;
            emit(api, &a, |a| {
                let r: ApplyResult = a.decode()?;
                match r.moved.iter().any(|m| m == name) {
                    true => println!("moved VR {name} to the {} path", path.name()),
                    false => println!("VR {name} is on the {} path already", path.name()),
                }
                Ok(())
            })
        }
        VrCmd::Del { name } => {
            let a = c.call(Method::DELETE, &vr_path(name), None::<&()>)?;
            emit_deleted(api, &a, "VR", name)
        }
    }
}

/// The API's resource of the VR `name`.
fn vr_path(name: &str) -> String {
    format!("/v1/vrs/{}", encode(name))
}

/// `VERB VR NAME (STATE, pid N)` of the VR in the answer.
fn say_vr(verb: &str, a: &Answer) -> Result<()> {
    let vr: VrStatus = a.decode()?;
    println!(
        "{verb} VR {} ({}{})",
        vr.name,
        vr.state,
        pids_note(&vr.instances)
    );
    Ok(())
}

fn pids_note(instances: &[InstanceStatus]) -> String {
    let pids: Vec<String> = instances
        .iter()
        .filter_map(|i| i.pid)
        .map(|p| p.to_string())
        .collect();
    match pids.len() {
        0 => String::new(),
        1 => format!(", pid {}", pids[0]),
        _ => format!(", pids {}", pids.join(",")),
    }
}

/// The `vr list` table.
pub fn list_table(vrs: &[VrStatus]) -> Table {
    Table::of(
        vrs,
        &[
            (Col::l("NAME"), &|v| v.name.clone()),
            (Col::l("STATE"), &|v| v.state.clone()),
            (Col::l("KIND"), &|v| v.kind.clone()),
            (Col::l("PATH"), &|v| path_of(v).to_string()),
            (Col::r("VNICS"), &|v| v.spec.vnics.len().to_string()),
            (Col::r("RX"), &|v| v.stats.rx_packets.to_string()),
            (Col::r("TX"), &|v| v.stats.tx_packets.to_string()),
            (Col::r("DROPS"), &|v| v.stats.drops().to_string()),
            (Col::r("ROUTES"), &|v| v.api_routes.to_string()),
            (Col::l("CPU"), &|v| {
                list(v.instances.iter().filter_map(|i| i.cpu))
            }),
            (Col::l("PIDS"), &|v| {
                list(v.instances.iter().filter_map(|i| i.pid))
            }),
        ],
    )
}

/// Where a VR's frames go (`slow` from a daemon that does not say).
fn path_of(v: &VrStatus) -> &str {
    if v.path.is_empty() { "slow" } else { &v.path }
}

/// The path, and for `path = "auto"` the policy's view: "fast (auto, 1200
/// pps, moved 2 x to fast, 1 x to slow)".
fn path_desc(v: &VrStatus) -> String {
    let path = path_of(v);
    if !v.auto {
        return path.to_string();
    }
    let f = v.stats.fast.as_ref();
    let rate = f.and_then(|f| f.auto_rate_pps).unwrap_or(0);
    let moved = |k: &str| f.and_then(|f| f.auto_moves.get(k).copied()).unwrap_or(0);
    format!(
        "{path} (auto, {rate} pps, moved {} x to fast, {} x to slow)",
        moved("to_fast"),
        moved("to_slow")
    )
}

/// `vr show`: the definition, then the counters, for a person.
pub fn show(v: &VrStatus) -> String {
    let mut o = definition(v);
    let _ = writeln!(o, "\nvNICs:");
    indent(&mut o, &vnics_table(v).render());

    if !v.spec.rules.is_empty() {
        let _ = writeln!(o, "\nrules:");
        indent(&mut o, &super::rule::table(&v.spec.rules).render());
    }

    for (label, table) in [("router", &v.spec.router), ("config", &v.spec.config)] {
        if let Some(t) = table.as_ref().filter(|t| !is_empty_table(t)) {
            let _ = writeln!(o, "\n{label}:");
            indent(&mut o, &as_toml(t));
        }
    }

    let _ = writeln!(o, "\ncounters:");
    indent(&mut o, &counters(&v.stats));

    let _ = writeln!(o, "\ninstances:");
    indent(&mut o, &instances_table(&v.instances).render());
    o
}

/// `key:` padded to `width`, then the value, a line each (a part of `vr
/// show`).
fn fields(width: usize, lines: &[(&str, String)]) -> String {
    let mut o = String::new();
    for (key, value) in lines {
        let _ = writeln!(o, "{:<width$}{value}", format!("{key}:"));
    }
    o
}

/// The head of `vr show`: name, kind, state, program, pool, CPU, routes.
fn definition(v: &VrStatus) -> String {
    let s = &v.stats;
    // The program and its arguments, if it is not the built-in router.
    let program = v.spec.program.as_ref().map(|p| {
        let mut cmd = p.clone();
        for a in &v.spec.args {
            cmd.push(' ');
            cmd.push_str(a);
        }
        cmd
    });
    let pool_slots = if s.pool_slots > 0 {
        s.pool_slots
    } else {
        u64::from(v.spec.slots.unwrap_or(0))
    };
    let mut lines = vec![
        ("name", v.name.clone()),
        ("kind", v.kind.clone()),
        ("state", v.state.clone()),
        ("path", path_desc(v)),
    ];
    lines.extend(
        (v.fast_unavailable.as_ref()).map(|why| ("fast path", format!("cannot carry it: {why}"))),
    );
    lines.extend(program.map(|cmd| ("program", cmd)));
    lines.extend([
        ("pool", pool_desc(pool_slots, s)),
        ("cpu", opt(v.spec.cpu)),
        ("api routes", v.api_routes.to_string()),
    ]);
    lines.extend(
        s.control_plane
            .as_ref()
            .map(|c| ("control", control_desc(c))),
    );
    fields(12, &lines)
}

/// A VR's control plane on one line: whether it runs, its restarts, the
/// routes it gave.
fn control_desc(c: &vrhost_api::ControlPlaneStats) -> String {
    let state = match c.pid {
        Some(pid) if c.running => format!("running (pid {pid})"),
        _ => "down".to_string(),
    };
    format!(
        "{state}, {} restarts, {} routes learnt ({} changes, {} refused), {:.2} s CPU",
        c.restarts, c.routes, c.route_changes, c.refused, c.cpu_seconds
    )
}

/// A VR's vNICs: the definition and the counters of each.
fn vnics_table(v: &VrStatus) -> Table {
    // Each vNIC's definition with its counters, if the VR reports them.
    let vnics: Vec<(usize, &Vnic, Option<&VnicStats>)> = v
        .spec
        .vnics
        .iter()
        .enumerate()
        .map(|(i, n)| (i, n, v.stats.vnics.iter().find(|x| x.index as usize == i)))
        .collect();
    Table::of(
        &vnics,
        &[
            (Col::r("INDEX"), &|(i, _, _)| i.to_string()),
            (Col::l("PORT"), &|(_, n, _)| match &n.tunnel {
                Some(t) => format!("tunnel:{t}"),
                None => n.port.clone(),
            }),
            (Col::l("MAC"), &|(_, n, _)| opt(n.mac.as_deref())),
            (Col::l("ADDRS"), &|(_, n, _)| list(&n.addrs)),
            (Col::r("RX-PKTS"), &|(_, _, st)| {
                opt(st.map(|x| x.rx_packets))
            }),
            (Col::r("RX-BYTES"), &|(_, _, st)| {
                opt(st.map(|x| bytes(x.rx_bytes)))
            }),
            (Col::r("TX-PKTS"), &|(_, _, st)| {
                opt(st.map(|x| x.tx_packets))
            }),
            (Col::r("TX-BYTES"), &|(_, _, st)| {
                opt(st.map(|x| bytes(x.tx_bytes)))
            }),
        ],
    )
}

/// The `counters:` part of `vr show`.
fn counters(s: &VrStats) -> String {
    fields(
        16,
        &[
            (
                "rx",
                format!("{} packets, {}", s.rx_packets, bytes(s.rx_bytes)),
            ),
            (
                "tx",
                format!("{} packets, {}", s.tx_packets, bytes(s.tx_bytes)),
            ),
            ("ingress drops", map_list(&s.ingress_drops)),
            (
                "vr drops",
                format!("{} ({})", s.vr_dropped, map_list(&s.vr_drops)),
            ),
            ("port drops", s.port_dropped.to_string()),
            ("egress drops", map_list(&s.egress_drops)),
            ("violations", map_list(&s.violations)),
            (
                "exits",
                format!("{} (slots reclaimed: {})", s.exits, s.reclaimed),
            ),
            (
                "restarts",
                format!(
                    "{} (hangs {}, quarantines {}, last recovery {:.1} ms)",
                    s.restarts, s.hangs, s.quarantines, s.last_recovery_ms
                ),
            ),
            ("kicks", s.kicks.to_string()),
            ("arrival", format!("{} frames/s", s.arrival_pps)),
            (
                "instances",
                format!(
                    "added {}, retired {}, refused {}, exited {}",
                    s.instances_added, s.instances_retired, s.instances_refused, s.instance_exits
                ),
            ),
            ("capture drops", s.capture_dropped.to_string()),
            (
                "fast path",
                s.fast.as_ref().map_or_else(|| "-".into(), fast_line),
            ),
        ],
    )
}

/// The fast path's part of a VR's counters, on one line.
fn fast_line(f: &FastStats) -> String {
    let to_slow: u64 = f.to_slow.values().sum();
    let nonzero = |m: &std::collections::BTreeMap<String, u64>| {
        let kept = m
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect();
        map_list(&kept)
    };
    let mut line = format!(
        "rx {}, forwarded {}, to slow {to_slow} ({}), dropped {} ({})",
        f.rx_packets,
        f.forwarded,
        nonzero(&f.to_slow),
        f.dropped(),
        nonzero(&f.drops)
    );
    for (vnic, t) in &f.tunnels {
        line.push_str(&format!(
            "; tunnel vNIC {vnic}: decapsulated {}, encapsulated {}, to slow ({}), dropped ({})",
            t.decapsulated,
            t.encapsulated,
            nonzero(&t.to_slow),
            nonzero(&t.drops)
        ));
    }
    line
}

/// A VR's processes.
pub fn instances_table(instances: &[InstanceStatus]) -> Table {
    Table::of(
        instances,
        &[
            (Col::r("INDEX"), &|i| i.index.to_string()),
            (Col::r("PID"), &|i| opt(i.pid)),
            (Col::r("CPU"), &|i| opt(i.cpu)),
            (Col::l("RUNNING"), &|i| {
                if i.running { "yes" } else { "no" }.to_owned()
            }),
            (Col::r("CPU-S"), &|i| format!("{:.2}", i.cpu_seconds)),
            (Col::r("SLEEPS"), &|i| i.sleeps.to_string()),
            (Col::r("HEARTBEAT"), &|i| i.heartbeat.to_string()),
            (Col::r("RX-FILL"), &|i| i.rx_ring_fill.to_string()),
            (Col::r("TX-FILL"), &|i| i.tx_ring_fill.to_string()),
        ],
    )
}

fn indent(o: &mut String, text: &str) {
    for line in text.lines() {
        if line.is_empty() {
            o.push('\n');
        } else {
            let _ = writeln!(o, "  {line}");
        }
    }
}

fn is_empty_table(v: &Value) -> bool {
    v.is_null() || v.as_object().is_some_and(Map::is_empty)
}

/// An open table (`router`, `config`) as TOML, as a person wrote it; JSON
/// if TOML cannot hold it (a null).
fn as_toml(v: &Value) -> String {
    match toml::to_string(v) {
        Ok(s) => s,
        Err(_) => serde_json::to_string_pretty(v).unwrap_or_default() + "\n",
    }
}

/// Read a VR file: one VR, TOML or JSON, as the JSON `VrSpec` to send. A
/// single `[[vrs]]` entry is taken out of its array and the file's
/// top-level `[[rules]]` become its `rules`.
///
/// # Errors
/// The file cannot be read, is not TOML/JSON, or holds not exactly one VR.
pub fn read_vr_file(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let json = path.extension().is_some_and(|e| e == "json");
    let v = parse_vr(&text, json).with_context(|| path.display().to_string())?;
    Ok(v)
}

/// [`read_vr_file`] on text.
fn parse_vr(text: &str, json: bool) -> Result<Value> {
    let mut top = if json {
        serde_json::from_str::<Value>(text)?
    } else {
        toml_to_json(toml::from_str::<toml::Value>(text)?)
    };
    let Some(obj) = top.as_object_mut() else {
        bail!("not a table");
    };
    if obj.contains_key("vrs") {
        let Some(Value::Array(mut vrs)) = obj.remove("vrs") else {
            bail!("vrs: not an array");
        };
        if vrs.len() != 1 {
            bail!(
                "holds {} VRs; `vr add` takes one (`vrhost apply` takes a whole config)",
                vrs.len()
            );
        }
        let rules = obj.remove("rules");
        if let Some(k) = obj.keys().next() {
            bail!(
                "unexpected top-level {k:?}: `vr add` takes one VR (`vrhost apply` takes a whole config)"
            );
        }
        let mut vr = vrs.remove(0);
        if let Some(rules) = rules {
            let Some(o) = vr.as_object_mut() else {
                bail!("vrs[0]: not a table");
            };
            match (o.get_mut("rules"), rules) {
                (Some(Value::Array(own)), Value::Array(more)) => own.extend(more),
                (None, r) => {
                    o.insert("rules".into(), r);
                }
                _ => bail!("rules: not an array"),
            }
        }
        top = vr;
    }
    match top.get("name") {
        Some(Value::String(_)) => Ok(top),
        _ => bail!("the VR has no name"),
    }
}

/// TOML as JSON; a datetime becomes its text.
fn toml_to_json(v: toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => Value::from(f),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
        }
    }
}

/// A VR's pool: its slots, those in use when it grows with its load, free.
fn pool_desc(pool_slots: u64, s: &VrStats) -> String {
    let mut d = format!("{pool_slots} slots, {} free", s.free_slots);
    if s.pool_usable > 0 && s.pool_usable < pool_slots {
        d.push_str(&format!(", {} grown to", s.pool_usable));
    }
    if s.pool_grow_refused > 0 {
        d.push_str(&format!(
            ", {} steps refused (memory limit)",
            s.pool_grow_refused
        ));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::api::fixtures;

    #[test]
    fn list_table_from_fixture() {
        let v: VrStatus = serde_json::from_str(fixtures::VR_STATUS).unwrap();
        let t = list_table(&[v]).render();
        assert_eq!(
            t,
            "NAME      STATE    KIND    PATH  VNICS      RX      TX  DROPS  ROUTES  CPU  PIDS\n\
             tenant-a  running  router  slow      2  600000  590000     13       2  1    4242\n"
        );
    }

    #[test]
    fn a_tunnel_vnic_shows_its_tunnel_and_egress_drops_their_reasons() {
        let mut v: VrStatus = serde_json::from_str(fixtures::VR_STATUS).unwrap();
        v.spec.vnics[0].port = String::new();
        v.spec.vnics[0].tunnel = Some("vx42".into());
        v.stats.egress_drops.insert("tunnel_no_mac".into(), 3);
        let got = show(&v);
        assert!(
            got.contains("      0  tunnel:vx42  02:00:00:0a:00:01"),
            "{got}"
        );
        assert!(got.contains("  egress drops:   tunnel_no_mac=3\n"), "{got}");
        // In the fast path: its tunnel's counters on the fast path's line.
        let t = vrhost_api::FastTunnelStats {
            decapsulated: 5,
            encapsulated: 4,
            to_slow: [("no_mac".to_string(), 1), ("restored".to_string(), 0)].into(),
            ..Default::default()
        };
        v.stats.fast = Some(FastStats {
            tunnels: [("0".to_string(), t)].into(),
            ..FastStats::default()
        });
        let got = show(&v);
        assert!(
            got.contains(
                "; tunnel vNIC 0: decapsulated 5, encapsulated 4, to slow (no_mac=1), dropped (-)\n"
            ),
            "{got}"
        );
    }

    #[test]
    fn show_text_from_fixture() {
        let v: VrStatus = serde_json::from_str(fixtures::VR_STATUS).unwrap();
        let want = "\
name:       tenant-a
kind:       router
state:      running
path:       slow
pool:       1024 slots, 768 free
cpu:        -
api routes: 2

vNICs:
  INDEX  PORT  MAC                ADDRS        RX-PKTS  RX-BYTES  TX-PKTS  TX-BYTES
      0  p0    02:00:00:0a:00:01  10.1.0.1/24   400000  24.4 MiB   190000  11.6 MiB
      1  p1    02:00:00:0a:01:01  10.1.1.1/24   200000  12.2 MiB   400000  24.4 MiB

rules:
  INDEX  PORT  DST          SRC  DST-MAC  VLAN  PROTO  UDP-DPORT  VR        VNIC
      0  p0    10.1.0.0/16  -    -           -      -          -  tenant-a     0

router:
  [[routes]]
  prefix = \"0.0.0.0/0\"
  via = \"10.1.1.2\"

counters:
  rx:             600000 packets, 36.6 MiB
  tx:             590000 packets, 36.0 MiB
  ingress drops:  pool_full=5
  vr drops:       7 (no_route=7)
  port drops:     1
  egress drops:   -
  violations:     -
  exits:          0 (slots reclaimed: 0)
  restarts:       0 (hangs 0, quarantines 0, last recovery 0.0 ms)
  kicks:          900
  arrival:        0 frames/s
  instances:      added 0, retired 0, refused 0, exited 0
  capture drops:  0
  fast path:      -

instances:
  INDEX   PID  CPU  RUNNING  CPU-S  SLEEPS  HEARTBEAT  RX-FILL  TX-FILL
      0  4242    1  yes      50.00      10     123456       12        3
";
        let got = show(&v);
        assert_eq!(got, want, "got:\n{got}");
        let mut with_program = v.clone();
        with_program.spec.program = Some("/bin/vr".into());
        with_program.spec.args = vec!["-q".into(), "x".into()];
        assert!(show(&with_program).contains("\nprogram:    /bin/vr -q x\npool:"));
    }

    #[test]
    fn show_from_fixture() {
        let v: VrStatus = serde_json::from_str(fixtures::VR_STATUS).unwrap();
        let s = show(&v);
        for want in [
            "name:       tenant-a",
            "pool:       1024 slots, 768 free",
            "0  p0    02:00:00:0a:00:01  10.1.0.1/24   400000",
            "[[routes]]",
            "via = \"10.1.1.2\"",
            "ingress drops:  pool_full=5",
            "vr drops:       7 (no_route=7)",
            "4242",
        ] {
            assert!(s.contains(want), "{want:?} missing in\n{s}");
        }
    }

    #[test]
    fn vr_file_top_level_toml() {
        let v = parse_vr(
            r#"
            name = "tenant-c"
            slots = 512
            vnics = [{ port = "p0", addrs = ["10.3.0.1/24"] }]
            rules = [{ port = "p0", dst = "10.3.0.0/16" }]
            [router]
            routes = [{ prefix = "0.0.0.0/0", via = "10.3.0.2" }]
            "#,
            false,
        )
        .unwrap();
        assert_eq!(v["name"], "tenant-c");
        assert_eq!(v["slots"], 512);
        assert_eq!(v["rules"][0]["dst"], "10.3.0.0/16");
        assert_eq!(v["router"]["routes"][0]["via"], "10.3.0.2");
    }

    #[test]
    fn vr_file_single_vrs_entry_with_rules() {
        let v = parse_vr(
            r#"
            [[vrs]]
            name = "tenant-c"
            vnics = [{ port = "p0" }]
            [vrs.router]

            [[rules]]
            port = "p0"
            dst = "10.3.0.0/16"
            vr = "tenant-c"
            "#,
            false,
        )
        .unwrap();
        assert_eq!(v["name"], "tenant-c");
        assert_eq!(v["rules"][0]["vr"], "tenant-c");
        assert!(v.get("vrs").is_none());
    }

    #[test]
    fn vr_file_json_and_refusals() {
        let v = parse_vr(r#"{"name": "x", "vnics": [{"port": "p0"}]}"#, true).unwrap();
        assert_eq!(v["vnics"][0]["port"], "p0");
        let refusal = |toml: &str| parse_vr(toml, false).unwrap_err().to_string();
        let two = "[[vrs]]\nname = \"a\"\nvnics = []\n[[vrs]]\nname = \"b\"\nvnics = []\n";
        assert!(refusal(two).contains("holds 2 VRs"));
        let with_ports = "[[ports]]\nname = \"p0\"\n[[vrs]]\nname = \"a\"\nvnics = []\n";
        assert!(refusal(with_ports).contains("\"ports\""));
        assert!(parse_vr("slots = 3", false).is_err());
        assert!(parse_vr("name = ", false).is_err());
    }
}
