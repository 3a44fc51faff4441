//! `bench cluster`'s `restart` experiment: the cluster with its desired
//! state in etcd (an etcd in the lab's underlay router `ul`, on
//! 10.9.0.254), on the lab's configs as they are (the engines' hold no
//! VR: the dispatcher's `vr` table is placed on them), with the
//! dispatcher's VR asking for one engine's capacity instead of naming its
//! engines. The dispatcher, then the agent (the
//! engine daemon) running the VR, is killed (SIGKILL) and started again
//! on the same config: is the placement the same, and how long until
//! every flow crosses again.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use vrhost_client::{Client, Endpoint};
use vrhost_lab::{Daemon, Etcd};

use super::{Bench, ClusterRecord};
use crate::{Context, Result, bail};

/// etcd's address: the underlay router's on the dispatcher's link.
const ETCD_IP: [u8; 4] = [10, 9, 0, 254];
/// Each engine's advertised capacity and the VR's rate (one engine's).
const CAPACITY: i64 = 1_000;

impl Bench<'_> {
    /// The `restart` records: the dispatcher's, then the agent's.
    pub(super) fn restarts(&self) -> Result<Vec<ClusterRecord>> {
        let etcd = Etcd::start(&self.lab.ns("ul"), ETCD_IP.into())?;
        let paths = (0..=3)
            .map(|i| self.etcd_config(i, etcd.endpoint()))
            .collect::<Result<Vec<PathBuf>>>()?;
        let sock = self.dir.join("disp.sock");
        let start = |i: usize| -> Result<Daemon> {
            let ns = self.lab.ns_name(&self.nodes[i].0);
            let api = if i == 0 {
                sock.display().to_string()
            } else {
                "none".into()
            };
            Ok(Daemon::start(&paths[i], Some(&ns), 0, &api)?)
        };
        let mut engines = (1..=3).map(start).collect::<Result<Vec<Daemon>>>()?;
        let mut disp = start(0)?;
        let client = Client::new(Endpoint::Unix(sock.clone()), None)?;
        let flows = super::flows::Flows::bind(&self.lab.ns("gen"), &self.lab.ns("sink"), 4)?;
        let before = placed(&client)?;
        if !flows.warm_up(Duration::from_secs(30)) {
            bail!("restart: no traffic through the cluster in 30 s");
        }
        let mut out = Vec::new();
        // The dispatcher.
        kill(&disp);
        drop(disp);
        let t0 = Instant::now();
        disp = start(0)?;
        let ok = flows.warm_up(Duration::from_secs(30));
        out.push(record("dispatcher", &before, &placed(&client)?, ok, t0));
        // The agent running the VR (its engine daemon).
        let e = (self.nodes[1..=3].iter())
            .position(|n| before.first() == Some(&n.0))
            .unwrap_or(0);
        kill(&engines[e]);
        let t0 = Instant::now();
        engines[e] = start(e + 1)?;
        let ok = flows.warm_up(Duration::from_secs(30));
        out.push(record("agent", &before, &placed(&client)?, ok, t0));
        drop((disp, engines));
        Ok(out)
    }

    /// Node `i`'s config with the desired state in etcd at `endpoint`
    /// (the lab's, on a prefix of the bench's), the dispatcher's VR
    /// placed by rate on engines of one VR's capacity.
    fn etcd_config(&self, i: usize, endpoint: &str) -> Result<PathBuf> {
        let mut doc = self.etcd_nodes[i].1.clone();
        let mut keys = toml::Table::new();
        keys.insert("etcd".into(), vec![toml::Value::from(endpoint)].into());
        keys.insert("etcd_prefix".into(), "/vrhost/bench".into());
        if i == 0 {
            let vr = super::remote_vr(&mut doc)?;
            if !vr.contains_key("vr") {
                bail!("the dispatcher's remote VR has no `vr` table for its engines");
            }
            vr.remove("engines");
            vr.insert("rate".into(), CAPACITY.into());
            for e in (doc.get_mut("cluster").and_then(|c| c.get_mut("engines")))
                .and_then(|v| v.as_array_mut())
                .into_iter()
                .flatten()
            {
                if let Some(e) = e.as_table_mut() {
                    e.insert("capacity".into(), CAPACITY.into());
                }
            }
        } else {
            keys.insert("per_core_pps".into(), CAPACITY.into());
        }
        if let Some(c) = doc.get_mut("cluster").and_then(|c| c.as_table_mut()) {
            c.extend(keys);
        }
        let path = self.dir.join(format!("etcd-{}.toml", self.etcd_nodes[i].0));
        std::fs::write(&path, toml::to_string(&doc).context("a config")?)?;
        Ok(path)
    }
}

/// The engines of the dispatcher's first VR's placement, once it has one
/// (within 30 s).
fn placed(client: &Client) -> Result<Vec<String>> {
    let t0 = Instant::now();
    loop {
        let s: Value = client.get_as("/v1/cluster")?;
        let engines: Vec<String> = (s["vrs"][0]["placement"].as_array().into_iter().flatten())
            .filter_map(|p| p["engine"].as_str().map(String::from))
            .collect();
        if s["etcd"] == "up" && !engines.is_empty() {
            return Ok(engines);
        }
        if t0.elapsed() > Duration::from_secs(30) {
            bail!("restart: no placement in 30 s: {s}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn kill(d: &Daemon) {
    if let Some(p) = rustix::process::Pid::from_raw(d.pid() as i32) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

fn record(
    component: &'static str,
    before: &[String],
    after: &[String],
    through: bool,
    t0: Instant,
) -> ClusterRecord {
    ClusterRecord {
        experiment: "restart",
        engines: 3,
        policy: "flow",
        component: Some(component),
        same_placement: Some(before == after),
        back_ms: through.then(|| t0.elapsed().as_secs_f64() * 1e3),
        ..ClusterRecord::default()
    }
}
