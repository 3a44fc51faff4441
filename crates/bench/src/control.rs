//! `vrhost bench control`: changing a running daemon, measured.
//!
//! A real `vrhost daemon` forwards in memory: a `mem` generator port sends
//! UDP frames spread evenly over `--vrs` router VRs, which route them to a
//! `null` port. Runs, side by side in one invocation:
//! 1. capacity: the generator unpaced; the forwarded rate is the capacity;
//! 2. reference: the generator paced at `--load` x capacity for
//!    `--seconds`, nothing changed: frames lost by the VRs;
//! 3. changes: the same load while a client adds a VR, changes it (a
//!    restart with a new definition), and applies the original config
//!    file (which removes it), over and over through the API (back to
//!    back, or `--change-gap-ms` apart): frames lost by the VRs nobody
//!    touched, and how long each kind of change took;
//! 4. a full BGP table loaded into one VR through the bulk route API, in
//!    requests of `--chunk` routes, against the same routes given to the
//!    same router in-process (no API, no process boundary): routes/s.
//!
//! A frame is lost if it was classified to a VR and did not leave it:
//! host drops on the way in, drops by the VR, drops by the out port, and
//! frames still inside when all is done.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{BenchError, Context, Result, bail};
use serde::Serialize;
use serde_json::{Value, json};
use vrhost_client::Method;

use crate::machine::Machine;
use vrhost_client::{Client, Endpoint};
use vrhost_lab::Daemon;

/// Options of `vrhost bench control`.
#[derive(Debug, Clone, clap::Args)]
pub struct ControlArgs {
    /// VRs forwarding while others are changed beside them.
    #[arg(long, default_value_t = 4)]
    pub vrs: usize,
    /// Seconds of paced load per run.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Offered load as a fraction of the measured capacity.
    #[arg(long, default_value_t = 0.8)]
    pub load: f64,
    /// Core of the host worker; the VRs get the other core.
    #[arg(long, default_value_t = 1)]
    pub cpu: usize,
    /// Slots in each VR's pool (what absorbs a VR's scheduling gaps). The
    /// default lasts 4.6 ms at 3.5 Mpps a VR, more than a 250 Hz kernel's
    /// tick (4 ms): the longest that a task which does not yield (a kernel
    /// thread, a control-plane thread) keeps the core from the VRs.
    #[arg(long, default_value_t = 16_384)]
    pub slots: u32,
    /// Route file for the bulk load ("none": skip it).
    #[arg(long, default_value = "../shared/data/fib/ipasn_20140513.dat.gz")]
    pub routes: String,
    /// `[host] start_idle_ms` of the daemon: how long a changed VR's new
    /// process starts on the others' spare time (0: in the normal class).
    #[arg(long, default_value_t = 2000)]
    pub start_idle_ms: u64,
    /// Pause between two changes, ms (0: back to back).
    #[arg(long, default_value_t = 0)]
    pub change_gap_ms: u64,
    /// Routes per bulk request.
    #[arg(long, default_value_t = 10_000)]
    pub chunk: usize,
    /// Where the report goes: `--json`, `--out FILE`.
    #[command(flatten)]
    pub output: crate::report::Output,
}

/// One paced run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// `reference` or `changes`.
    pub run: &'static str,
    /// Offered rate, frames/s.
    pub offered_pps: u64,
    /// Frames the generator sent.
    pub frames: u64,
    /// Frames that left the VRs.
    pub forwarded: u64,
    /// Frames classified to the VRs that did not leave them.
    pub lost: u64,
    /// Lost, per VR.
    pub lost_per_vr: Vec<u64>,
    /// Changes applied during the run.
    pub changes: u64,
    /// Mean time of a change (request to answer), ms.
    pub change_ms_mean: f64,
    /// Longest change, ms.
    pub change_ms_max: f64,
    /// The same, by kind of change.
    pub by_kind: Vec<KindRecord>,
}

/// The times of one kind of change in a run.
#[derive(Debug, Clone, Serialize)]
pub struct KindRecord {
    /// `add` (POST the VR), `restart` (PUT a changed definition) or
    /// `remove` (apply the original file, which lacks it).
    pub kind: &'static str,
    /// How many.
    pub count: u64,
    /// Mean time, request to answer, ms.
    pub ms_mean: f64,
    /// Longest, ms.
    pub ms_max: f64,
}

/// Kinds of change, in the order a run makes them.
const KINDS: [&str; 3] = ["add", "restart", "remove"];

fn summarize(times: &[f64]) -> (f64, f64) {
    let n = times.len().max(1) as f64;
    (
        times.iter().sum::<f64>() / n,
        times.iter().copied().fold(0.0, f64::max),
    )
}

/// The bulk route load.
#[derive(Debug, Clone, Serialize)]
pub struct RoutesRecord {
    /// The route file.
    pub file: String,
    /// IPv4 routes loaded.
    pub routes: u64,
    /// Through the API: seconds and routes/s.
    pub api_seconds: f64,
    /// Through the API: routes per second.
    pub api_routes_per_second: f64,
    /// The same router in-process: seconds.
    pub inproc_seconds: f64,
    /// The same router in-process: routes per second.
    pub inproc_routes_per_second: f64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// "control".
    pub bench: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// VRs forwarding.
    pub vrs: usize,
    /// Forwarded rate with the generator unpaced.
    pub capacity_pps: u64,
    /// The paced runs.
    pub runs: Vec<RunRecord>,
    /// The bulk route load.
    pub routes: Option<RoutesRecord>,
}

pub(super) fn vr_name(i: usize) -> String {
    format!("t{i}")
}

/// The router table of VR `i`: a gateway on its out vNIC.
fn router_table(i: usize) -> String {
    format!(
        "[vrs.router]\nneighbours = [{{ ip = \"10.9.{i}.2\", mac = \"02:00:00:00:99:{i:02x}\" }}]\nroutes = [{{ prefix = \"10.{n}.0.0/16\", via = \"10.9.{i}.2\" }}]\n",
        n = i + 1
    )
}

pub(super) fn config(vrs: usize, cpu: usize, slots: u32, pps: Option<u64>, limit: u64) -> String {
    let dst: Vec<String> = (0..vrs)
        .map(|i| format!("\"10.{}.128.0/17\"", i + 1))
        .collect();
    let vr_cpu = if cpu == 0 { 1 } else { 0 };
    let mut s = format!(
        "[host]\ncpu = {cpu}\n\n[[ports]]\nname = \"gen\"\ndriver = \"mem\"\n[ports.traffic]\ndst = [{}]\n{}limit = {limit}\n\n[[ports]]\nname = \"out\"\ndriver = \"null\"\n",
        dst.join(", "),
        pps.map(|p| format!("pps = {p}\n")).unwrap_or_default()
    );
    for i in 0..vrs {
        s += &format!(
            "\n[[vrs]]\nname = \"{}\"\nslots = {slots}\ncpu = {vr_cpu}\nvnics = [\n  {{ port = \"gen\", mac = \"02:00:00:{i:02x}:00:01\", addrs = [\"10.{n}.0.1/24\"] }},\n  {{ port = \"out\", mac = \"02:00:00:{i:02x}:01:01\", addrs = [\"10.9.{i}.1/24\"] }},\n]\n{}",
            vr_name(i),
            router_table(i),
            n = i + 1
        );
    }
    for i in 0..vrs {
        s += &format!(
            "\n[[rules]]\nport = \"gen\"\ndst = \"10.{}.0.0/16\"\nvr = \"{}\"\n",
            i + 1,
            vr_name(i)
        );
    }
    s
}

/// The VR the changes add, change and remove (it gets no traffic), on the
/// VRs' core.
fn extra(slots: u32, cpu: usize) -> Value {
    json!({
        "name": "extra", "slots": slots, "cpu": cpu,
        "vnics": [
            { "port": "gen", "mac": "02:00:00:ee:00:01", "addrs": ["10.200.0.1/24"] },
            { "port": "out", "mac": "02:00:00:ee:01:01", "addrs": ["10.201.0.1/24"] }
        ],
        "rules": [{ "port": "gen", "dst": "10.200.0.0/16" }]
    })
}

pub(super) struct Running {
    pub(super) daemon: Daemon,
    pub(super) client: Client,
    pub(super) file: PathBuf,
}

pub(super) fn start(dir: &Path, name: &str, src: &str) -> Result<Running> {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, src)?;
    let sock = dir.join(format!("{name}.sock"));
    let daemon = Daemon::start(&file, None, 0, &sock.display().to_string())?;
    let client = Client::new(Endpoint::Unix(sock), None)?.with_timeout(Duration::from_secs(120));
    Ok(Running {
        daemon,
        client,
        file,
    })
}

pub(super) fn stats(c: &Client) -> Result<Value> {
    Ok(c.get("/v1/stats")?.decode::<Value>()?)
}

pub(super) fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn sum_tx(s: &Value, vrs: usize) -> u64 {
    (0..vrs)
        .map(|i| u(&vr(s, &vr_name(i))["stats"]["tx_packets"]))
        .sum()
}

pub(super) fn vr<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["vrs"]
        .as_array()
        .and_then(|a| a.iter().find(|v| v["name"] == name))
        .unwrap_or(&Value::Null)
}

/// Lost frames of one VR: classified to it and not out of it.
pub(super) fn lost(s: &Value, name: &str) -> u64 {
    let st = &vr(s, name)["stats"];
    let ingress: u64 = st["ingress_drops"]
        .as_object()
        .map_or(0, |o| o.values().map(u).sum());
    ingress
        + u(&st["vr_dropped"])
        + u(&st["port_dropped"])
        + u(&st["rx_packets"]).saturating_sub(u(&st["tx_packets"]))
}

fn capacity(args: &ControlArgs, dir: &Path) -> Result<u64> {
    let r = start(
        dir,
        "capacity",
        &config(args.vrs, args.cpu, args.slots, None, i64::MAX as u64),
    )?;
    std::thread::sleep(Duration::from_millis(500));
    let a = stats(&r.client)?;
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let b = stats(&r.client)?;
    let dt = t.elapsed().as_secs_f64();
    r.daemon.stop()?;
    Ok(((sum_tx(&b, args.vrs) - sum_tx(&a, args.vrs)) as f64 / dt) as u64)
}

fn paced(args: &ControlArgs, dir: &Path, pps: u64, changes: bool) -> Result<RunRecord> {
    let frames = (pps as f64 * args.seconds) as u64;
    let name = if changes { "changes" } else { "reference" };
    let src = config(args.vrs, args.cpu, args.slots, Some(pps), frames).replacen(
        "[host]\n",
        &format!("[host]\nstart_idle_ms = {}\n", args.start_idle_ms),
        1,
    );
    let r = start(dir, name, &src)?;
    let original = std::fs::read_to_string(&r.file)?;
    let mut times: [Vec<f64>; 3] = Default::default();
    let vr_cpu = if args.cpu == 0 { 1 } else { 0 };
    let done = |s: &Value| {
        u(&s["ports"][0]["rx_packets"]) >= frames
            && (0..args.vrs).all(|i| {
                let st = &vr(s, &vr_name(i))["stats"];
                st["rx_packets"] == st["tx_packets"]
            })
    };
    let t0 = Instant::now();
    let last = loop {
        if changes {
            let steps: [(Method, &str, Option<Value>); 3] = [
                (Method::POST, "/v1/vrs", Some(extra(256, vr_cpu))),
                (Method::PUT, "/v1/vrs/extra", Some(extra(128, vr_cpu))),
                (Method::POST, "/v1/apply", Some(json!({ "toml": original }))),
            ];
            for ((m, p, b), kind) in steps.into_iter().zip(&mut times) {
                let t = Instant::now();
                r.client
                    .call(m.clone(), p, b.as_ref())
                    .with_context(|| format!("{m} {p}"))?;
                kind.push(t.elapsed().as_secs_f64() * 1e3);
                std::thread::sleep(Duration::from_millis(args.change_gap_ms));
            }
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
        let s = stats(&r.client)?;
        if done(&s) {
            break s;
        }
        if t0.elapsed() > Duration::from_secs_f64(args.seconds * 3.0 + 30.0) {
            bail!("{name}: the generator did not finish: {s}");
        }
    };
    r.daemon.stop()?;
    let lost_per_vr: Vec<u64> = (0..args.vrs).map(|i| lost(&last, &vr_name(i))).collect();
    let all = times.concat();
    let (change_ms_mean, change_ms_max) = summarize(&all);
    let by_kind = if changes {
        KINDS
            .iter()
            .zip(&times)
            .map(|(&kind, t)| {
                let (ms_mean, ms_max) = summarize(t);
                KindRecord {
                    kind,
                    count: t.len() as u64,
                    ms_mean,
                    ms_max,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(RunRecord {
        run: name,
        offered_pps: pps,
        frames,
        forwarded: sum_tx(&last, args.vrs),
        lost: lost_per_vr.iter().sum(),
        lost_per_vr,
        changes: all.len() as u64,
        change_ms_mean,
        change_ms_max,
        by_kind,
    })
}

fn routes(args: &ControlArgs, dir: &Path) -> Result<Option<RoutesRecord>> {
    if args.routes == "none" {
        return Ok(None);
    }
    let set = vrhost_fib::import::read_routes(Path::new(&args.routes), &Default::default())
        .with_context(|| args.routes.clone())?;
    let routes: Vec<vrhost_router::RouteConfig> = set
        .ipv4()
        .map(|r| vrhost_router::RouteConfig {
            prefix: format!("{}/{}", std::net::Ipv4Addr::from(r.prefix), r.len),
            via: Some("10.9.0.2".into()),
            ..Default::default()
        })
        .collect();
    // Through the API, into VR t0 of an idle daemon.
    let r = start(dir, "routes", &config(1, args.cpu, args.slots, Some(1), 1))?;
    let t = Instant::now();
    for c in routes.chunks(args.chunk.max(1)) {
        r.client
            .call(
                Method::POST,
                "/v1/vrs/t0/routes/bulk",
                Some(&json!({ "add": c })),
            )
            .context("bulk route load")?;
    }
    let api = t.elapsed().as_secs_f64();
    r.daemon.stop()?;
    // The same router, in this process, in the messages the daemon sends.
    let src = config(1, args.cpu, args.slots, Some(1), 1);
    let (_, plan) = vrhost_host::config::Config::parse(&src, "bench", dir)?;
    let rcfg: vrhost_router::RouterConfig = serde_json::from_value(plan.vrs[0].config.clone())?;
    let mut router = vrhost_router::Router::new(&rcfg).map_err(BenchError::Failed)?;
    let t = Instant::now();
    for c in routes.chunks(vrhost_proto::CONTROL_CHUNK) {
        router
            .change_routes(&vrhost_router::RouteChanges {
                add: c.to_vec(),
                ..Default::default()
            })
            .map_err(BenchError::Failed)?;
    }
    let inproc = t.elapsed().as_secs_f64();
    let n = routes.len() as f64;
    Ok(Some(RoutesRecord {
        file: args.routes.clone(),
        routes: routes.len() as u64,
        api_seconds: api,
        api_routes_per_second: n / api,
        inproc_seconds: inproc,
        inproc_routes_per_second: n / inproc,
    }))
}

/// Run `vrhost bench control`.
pub fn run(args: &ControlArgs) -> Result<()> {
    if args.vrs == 0 || args.vrs > 200 {
        bail!("--vrs {}: 1..=200", args.vrs);
    }
    let dir = std::env::temp_dir().join(format!("vrhost-bench-control-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = (|| -> Result<Report> {
        let cap = capacity(args, &dir)?;
        let pps = ((cap as f64 * args.load) as u64).max(1000);
        let reference = paced(args, &dir, pps, false)?;
        let changes = paced(args, &dir, pps, true)?;
        Ok(Report {
            bench: "control",
            machine: Machine::this(),
            vrs: args.vrs,
            capacity_pps: cap,
            runs: vec![reference, changes],
            routes: routes(args, &dir)?,
        })
    })();
    let _ = std::fs::remove_dir_all(&dir);
    crate::report::emit(&result?, &args.output, print_table)
}

fn print_table(report: &Report) {
    println!(
        "vrhost bench control: {} VRs, capacity {} pps (generator unpaced)",
        report.vrs, report.capacity_pps
    );
    println!(
        "{:<10} {:>11} {:>9} {:>10} {:>6} {:>8} {:>13} {:>12}",
        "run",
        "offered/s",
        "frames",
        "forwarded",
        "lost",
        "changes",
        "change ms avg",
        "change ms max"
    );
    for r in &report.runs {
        println!(
            "{:<10} {:>11} {:>9} {:>10} {:>6} {:>8} {:>13.1} {:>12.1}",
            r.run,
            r.offered_pps,
            r.frames,
            r.forwarded,
            r.lost,
            r.changes,
            r.change_ms_mean,
            r.change_ms_max
        );
    }
    for r in &report.runs {
        for k in &r.by_kind {
            println!(
                "  {} {:<8} {:>4} changes, ms avg {:>8.1}, max {:>8.1}",
                r.run, k.kind, k.count, k.ms_mean, k.ms_max
            );
        }
    }
    if let Some(r) = &report.routes {
        println!(
            "bulk routes: {} routes from {}: API {:.2} s = {:.0} routes/s; same router in-process {:.2} s = {:.0} routes/s",
            r.routes,
            r.file,
            r.api_seconds,
            r.api_routes_per_second,
            r.inproc_seconds,
            r.inproc_routes_per_second
        );
    }
}
