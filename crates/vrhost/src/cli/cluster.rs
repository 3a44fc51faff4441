//! `vrhost cluster status|rate`: this host's part in a cluster (a
//! dispatcher's engines and remote VRs, or an engine's heartbeats), and
//! a remote VR's rate changed in the cluster's desired state.

use std::fmt::Write as _;

use anyhow::Result;
use hyper::Method;

use super::api::{
    ClusterRateRequest, ClusterRateResult, ClusterStatus, EngineStatus, RemoteVrStatus,
};
use super::client::encode;
use super::output::{Col, Table, bytes, list, map_list, out};
use super::{ApiArgs, emit, one_shot};

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
        ClusterCmd::Status => {
            let a = one_shot(&args.api)?.get("/v1/cluster")?;
            emit(&args.api, &a, |a| {
                let s: ClusterStatus = a.decode()?;
                Ok(out(&render(&s))?)
            })
        }
    }
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
    }
}
