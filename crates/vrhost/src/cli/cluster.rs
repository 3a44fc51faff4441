//! `vrhost cluster status|rate|add|remove`: this host's part in a cluster
//! (a dispatcher's engines and remote VRs, or an engine's heartbeats), a
//! remote VR's rate changed in the cluster's desired state, and remote
//! VRs added to and removed from a running dispatcher.

use std::fmt::Write as _;

use anyhow::Result;
use hyper::Method;

use super::api::{
    ClusterRateRequest, ClusterRateResult, ClusterStatus, EngineStatus, RemoteVrStatus,
};
use super::client::encode;
use super::output::{Col, Table, bytes, list, map_list, out};
use super::{ApiArgs, emit, emit_deleted, one_shot};

/// `vrhost cluster ...`.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub api: ApiArgs,
    #[command(subcommand)]
    pub cmd: ClusterCmd,
}

/// What to show of the cluster.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ClusterCmd {
    /// Engines (state, last heartbeat, frames and bytes each way) and
    /// remote VRs.
    Status,
    /// Change the rate a remote VR asks for (pps) in the cluster's desired
    /// state in etcd (on the dispatcher; refused while etcd is down, or
    /// with how much is free when it does not fit).
    Rate {
        /// The remote VR (`cluster.vrs[].name`).
        name: String,
        /// Packets per second, > 0.
        pps: f64,
    },
    /// Add a remote VR to the running dispatcher (as a `[[cluster.vrs]]`
    /// entry: a config change, its other remote VRs keep forwarding;
    /// with etcd, written there and placed on the engines).
    Add(AddArgs),
    /// Remove a remote VR from the running dispatcher (its ports' frames
    /// become counted drops; with etcd its engines stop it).
    Remove {
        /// The remote VR.
        name: String,
    },
}

/// `vrhost cluster add`: the fields of `[[cluster.vrs]]`.
#[derive(Debug, Clone, clap::Args)]
pub struct AddArgs {
    /// Its name.
    name: String,
    /// Its id in the tag, 1..=255 (the same on its engines).
    #[arg(long)]
    id: u8,
    /// A dispatcher port it owns (`ports[].name`; repeat, in order).
    #[arg(long = "port", required = true)]
    ports: Vec<String>,
    /// An engine it runs on (repeat; none with --rate).
    #[arg(long = "engine")]
    engines: Vec<String>,
    /// The rate it asks for (pps): placed by Algorithm 1.
    #[arg(long)]
    rate: Option<f64>,
    /// flow (default), rr or proportional.
    #[arg(long)]
    policy: Option<String>,
    /// With etcd: a TOML file of the engines' VR (its `vr` table).
    #[arg(long)]
    vr: Option<std::path::PathBuf>,
}

/// Run `vrhost cluster ...`.
///
/// # Errors
/// The daemon cannot be reached.
pub fn run(args: &ClusterArgs) -> Result<()> {
    match &args.cmd {
        ClusterCmd::Rate { name, pps } => {
            let body = ClusterRateRequest { rate: *pps };
            let path = format!("/v1/cluster/vrs/{}/rate", encode(name));
            let a = one_shot(&args.api)?.call(Method::POST, &path, Some(&body))?;
            emit(&args.api, &a, |a| {
                let r: ClusterRateResult = a.decode()?;
                println!("VR {} asks for {} pps (written to etcd)", r.vr, r.rate_pps);
                Ok(())
            })
        }
        ClusterCmd::Add(add) => {
            let (name, body) = (&add.name, add_body(add)?);
            let a = one_shot(&args.api)?.call(Method::POST, "/v1/cluster/vrs", Some(&body))?;
            emit(&args.api, &a, |a| {
                let v: RemoteVrStatus = a.decode()?;
                println!(
                    "added remote VR {name} (id {}, engines {})",
                    v.id,
                    list(&v.engines)
                );
                Ok(())
            })
        }
        ClusterCmd::Remove { name } => {
            let path = format!("/v1/cluster/vrs/{}", encode(name));
            let a = one_shot(&args.api)?.call(Method::DELETE, &path, None::<&()>)?;
            emit_deleted(&args.api, &a, "remote VR", name)
        }
        ClusterCmd::Status => {
            let a = one_shot(&args.api)?.get("/v1/cluster")?;
            emit(&args.api, &a, |a| {
                let s: ClusterStatus = a.decode()?;
                Ok(out(&render(&s))?)
            })
        }
    }
}

/// The body of `POST /v1/cluster/vrs` from `vrhost cluster add`.
fn add_body(a: &AddArgs) -> Result<serde_json::Value> {
    let AddArgs {
        name,
        id,
        ports,
        engines,
        rate,
        policy,
        vr,
    } = a;
    let mut o = serde_json::json!({ "name": name, "id": id, "ports": ports });
    if !engines.is_empty() {
        o["engines"] = serde_json::json!(engines);
    }
    if let Some(r) = rate {
        o["rate"] = serde_json::json!(r);
    }
    if let Some(p) = policy {
        o["policy"] = serde_json::json!(p);
    }
    if let Some(f) = vr {
        let text =
            std::fs::read_to_string(f).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
        let t: toml::Table =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?;
        o["vr"] = serde_json::to_value(t)?;
    }
    Ok(o)
}

/// A VR's placement: `e1:100000 e2:50000`, why it does not fit, or `-`.
fn placement(v: &RemoteVrStatus) -> String {
    if let Some(e) = &v.placement_error {
        return format!("unplaced: {e}");
    }
    if v.placement.is_empty() {
        return "-".into();
    }
    let s: Vec<String> = v
        .placement
        .iter()
        .map(|s| format!("{}:{}", s.engine, s.pps))
        .collect();
    s.join(" ")
}

/// The status as text.
pub fn render(s: &ClusterStatus) -> String {
    let mut o = String::new();
    match s.role.as_str() {
        "dispatcher" => {
            let _ = writeln!(
                o,
                "dispatcher: heartbeats from {}, drops {}",
                s.heartbeat,
                map_list(&s.drops)
            );
            let ms = |e: &EngineStatus| {
                e.last_heartbeat_ms
                    .map_or_else(|| "never".into(), |m| format!("{m:.0} ms ago"))
            };
            o += &Table::of(
                &s.engines,
                &[
                    (Col::l("ENGINE"), &|e| e.name.clone()),
                    (Col::l("ADDRESS"), &|e| e.address.clone()),
                    (Col::l("STATE"), &|e| e.state.clone()),
                    (Col::r("HEARTBEAT"), &ms),
                    (Col::r("CAP"), &|e| e.capacity.to_string()),
                    (Col::l("CAP-FROM"), &|e| e.capacity_source.clone()),
                    (Col::r("TX-PKTS"), &|e| e.tx_frames.to_string()),
                    (Col::r("TX-BYTES"), &|e| bytes(e.tx_bytes)),
                    (Col::r("RX-PKTS"), &|e| e.rx_frames.to_string()),
                    (Col::r("RX-BYTES"), &|e| bytes(e.rx_bytes)),
                    (Col::r("DOWNS"), &|e| e.downs.to_string()),
                ],
            )
            .render();
            o += "\n";
            o += &Table::of(
                &s.vrs,
                &[
                    (Col::l("VR"), &|v: &RemoteVrStatus| v.name.clone()),
                    (Col::r("ID"), &|v| v.id.to_string()),
                    (Col::l("POLICY"), &|v| v.policy.clone()),
                    (Col::l("PORTS"), &|v| list(&v.ports)),
                    (Col::l("ENGINES"), &|v| list(&v.engines)),
                    (Col::l("LIVE"), &|v| list(&v.live_engines)),
                    (Col::l("PLACEMENT"), &placement),
                ],
            )
            .render();
        }
        "engine" => {
            let _ = writeln!(
                o,
                "engine: heartbeats on {}, {} answered",
                s.heartbeat, s.heartbeats_answered
            );
            if !s.capacity_source.is_empty() {
                let _ = writeln!(
                    o,
                    "capacity: {} pps advertised ({})",
                    s.capacity_pps, s.capacity_source
                );
            }
            if let Some(e) = &s.placements_error {
                let _ = writeln!(o, "{e}");
            }
        }
        _ => o += "no cluster: a single vrhost\n",
    }
    if s.etcd != "none" && !s.etcd.is_empty() {
        let _ = writeln!(o, "etcd: {}", s.etcd);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dispatcher_s_status_shows_its_engines_and_vrs() {
        let s: ClusterStatus = serde_json::from_str(
            r#"{"role":"dispatcher","heartbeat":"10.9.0.1:4790",
            "engines":[{"name":"e1","address":"10.9.0.11","state":"up","last_heartbeat_ms":42.0,
              "tx_frames":10,"tx_bytes":1000,"rx_frames":9,"rx_bytes":900,"capacity":1,
              "capacity_source":"measured"},
             {"name":"e2","address":"10.9.0.12","state":"down","last_heartbeat_ms":null,"downs":1}],
            "vrs":[{"name":"r","id":7,"policy":"flow","ports":["in","out"],
              "engines":["e1","e2"],"live_engines":["e1"],
              "rate_pps":150.0,"placement":[{"engine":"e1","pps":100.0},{"engine":"e2","pps":50.0}]}],
            "drops":{"bad_tag":2}}"#,
        )
        .unwrap();
        let t = render(&s);
        assert!(
            t.contains("e1") && t.contains("42 ms ago") && t.contains("never"),
            "{t}"
        );
        assert!(t.contains("bad_tag") && t.contains("flow"), "{t}");
        assert!(t.contains("e1:100 e2:50") && t.contains("measured"), "{t}");
        let none = render(&ClusterStatus::default());
        assert!(none.contains("no cluster"));
        let engine = ClusterStatus {
            role: "engine".into(),
            placements_error: Some("placements refused (2 tries): no; tried again in 2 s".into()),
            ..ClusterStatus::default()
        };
        assert!(render(&engine).contains("tried again in 2 s"));
    }
}
