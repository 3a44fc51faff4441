//! `vrhost bench cluster`: PdP's cluster on the cluster lab's namespaces
//! (`lab/cluster.toml`: a generator, a sink, a dispatcher vrhost and three
//! engine vrhosts, each its own `vrhost daemon`), with numbered UDP flows
//! from the generator to the sink ([`flows`]).
//!
//! - `scale`: received rate against the number of engines (1, 2, 3), each
//!   engine the bottleneck. A 2-core machine cannot give each engine a
//!   core, so an engine's capacity is emulated below what the machine
//!   carries: its VR's `rate_limit_pps` (`--engine-pps`; the excess is a
//!   counted `rate_limited` drop at the engine's ingress), with the
//!   offered rate above what the engines together admit.
//! - `dispatcher_limit`: three engines without a limit, the offered rate
//!   doubled from `--offered-pps` until frames are lost (the dispatcher's
//!   limit, or the engines' if they are slower), the generator falls
//!   behind, or `--max-pps`: a record per rate, the last one saying what
//!   stopped the search (`limited_by`).
//! - `reorder`: per policy (rr, proportional, flow), three engines
//!   without a limit at the last rate of that search (the path
//!   saturated), the percent of frames that arrived after a later frame
//!   of their flow.
//! - `failover`: flow policy, three engines, a paced load; engine e2's
//!   daemon is killed (SIGKILL) a third into the run: how long until its
//!   flows (those the dispatcher's rendezvous hashing put on it) are
//!   forwarded again, and the frames lost on them and on the others.
//!
//! - `rtt` ([`rtt`](mod@rtt)): ping from the generator to the sink through the dispatcher
//!   and one engine, against the same VR run locally on the dispatcher's
//!   host: what the dispatcher hop adds (ping's average, and the median
//!   of its replies), once with the default
//!   `[host.poll]` (`"poll":"default"`: idle workers sleep, woken by the
//!   ports' sockets) and once with `busy_poll_us` on every daemon
//!   (`"poll":"busy"`: the dispatcher's worker and the local daemon's
//!   keep polling between pings; the engine's too with `--busy-engines
//!   true`; `--busy-cpus` pins them).
//!
//! - `restart` ([`restart`](mod@restart)): with the desired state in
//!   etcd, the dispatcher and then the agent running the VR killed and
//!   started again: the same placement, and how long until traffic
//!   crosses again.
//!
//! `--experiments` picks some of them.
//!
//! Each point starts the engines and the dispatcher anew from the lab's
//! configs, changed in a temporary directory (the VR's rate limit, the
//! dispatcher's engines and policy). The lab's engines get their VR from
//! etcd; every experiment but `restart` runs without it, on configs
//! derived from the lab's ([`derive`]: each engine's VR as its placement
//! would give it).

mod derive;
pub mod flows;
mod restart;
mod rtt;

pub use rtt::BusyCpus;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use vrhost_host::balance::flow_hash;
use vrhost_host::cluster::{ClusterPolicy, EngineSet};
use vrhost_lab::{Daemon, Lab, Up};

use crate::machine::Machine;
use crate::report::{Column, heading, row};
use crate::{Context, Result, bail};
use flows::{Flows, Run, header_of};

/// Options of `vrhost bench cluster`.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// The cluster lab (brought up if it is not, down again after).
    #[arg(long, default_value = "lab/cluster.toml")]
    pub lab: PathBuf,
    /// Seconds of traffic per point.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// UDP flows.
    #[arg(long, default_value_t = 24)]
    pub flows: u16,
    /// Each engine's emulated capacity (its VR's rate_limit_pps) in
    /// `scale`.
    #[arg(long, default_value_t = 2_000)]
    pub engine_pps: u64,
    /// Rate offered in `scale`, `dispatcher_limit` and `reorder`
    /// (frames/s): above what the engines admit together.
    #[arg(long, default_value_t = 20_000)]
    pub offered_pps: u64,
    /// Rate offered in `failover` (frames/s).
    #[arg(long, default_value_t = 5_000)]
    pub paced_pps: u64,
    /// Highest rate offered in the search for the dispatcher's own limit
    /// (frames/s): from `--offered-pps`, doubled until frames are lost,
    /// the generator falls behind, or this.
    #[arg(long, default_value_t = 2_000_000)]
    pub max_pps: u64,
    /// Experiments to run, comma-separated: scale, dispatcher_limit,
    /// reorder (at the last rate of dispatcher_limit's search, or
    /// `--offered-pps` without it), failover, rtt, restart.
    #[arg(long, value_delimiter = ',', default_value = EXPERIMENTS)]
    pub experiments: Vec<String>,
    /// `rtt`: pings per run (through the cluster, then local; each
    /// poll mode).
    #[arg(long, default_value_t = 500)]
    pub pings: u32,
    /// `rtt`: milliseconds between two pings (ping's `-i`; below 2 the
    /// idle back-off never sleeps between them).
    #[arg(long, default_value_t = 20.0)]
    pub ping_interval_ms: f64,
    /// `rtt` with busy polling: the dispatcher's (and the local daemon's)
    /// `[host.poll] busy_poll_us` (its worker polls for this long after
    /// each frame, longer than ping's 20 ms interval: it never sleeps).
    #[arg(long, default_value_t = 50_000)]
    pub busy_poll_us: u32,
    /// `true`: the engine's worker busy-polls too in `rtt`'s busy run, as
    /// the dispatcher's does (sleeping, it costs a cross-core wakeup per
    /// ping, about 50 us traced, the largest step the hop adds; spinning,
    /// the engine's VR and ping are woken across cores instead, and on a
    /// loaded 2-core machine two spinning workers cost more than they
    /// save). The default `true` is PdP's setting, every host with cores
    /// of its own (three quiet runs: +2, -29, -36 us against +29 to +128
    /// with `false`, the dispatcher's worker only).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub busy_engines: bool,
    /// `rtt`'s busy run: pin the dispatcher's worker (and the local
    /// daemon's) and the engine's worker, `D,E` (`host.cpu`; their VRs
    /// then run on their workers' cores, `colocate_pps`), or `none`.
    #[arg(long, default_value = "none")]
    pub busy_cpus: BusyCpus,
    /// Write a PNG plot (scripts/plot-cluster, from the repository root).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Where the report goes: `--json`, `--out FILE`.
    #[command(flatten)]
    pub output: crate::report::Output,
}

/// Every experiment, in the order they run.
const EXPERIMENTS: &str = "scale,dispatcher_limit,reorder,failover,rtt,restart";

/// One point.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClusterRecord {
    /// `scale`, `dispatcher_limit`, `reorder` or `failover`.
    pub experiment: &'static str,
    /// Engines in use.
    pub engines: usize,
    /// The dispatcher's policy.
    pub policy: &'static str,
    /// Each engine's emulated capacity (none: no limit).
    pub engine_pps: Option<u64>,
    /// Offered rate (frames/s).
    pub offered_pps: u64,
    /// The rate the generator sent at (frames/s): below `offered_pps`
    /// when it could not keep up.
    pub sent_pps: f64,
    /// Frames sent and received.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// Received rate, Mpps.
    pub mpps: f64,
    /// `scale`: this rate over the one-engine rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_one: Option<f64>,
    /// Percent of arrivals after a later frame of their flow.
    pub reorder_pct: f64,
    /// `failover`: from the kill to the killed engine's flows forwarded
    /// again, ms (the slowest flow's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_ms: Option<f64>,
    /// `failover`: frames lost on the killed engine's flows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_moved_flows: Option<u64>,
    /// `failover`: frames lost on the other flows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_other_flows: Option<u64>,
    /// `dispatcher_limit`: what ended the search here: `loss` (frames
    /// lost on the way: the dispatcher's, or the engines', limit),
    /// `generator` (it sent below the offered rate) or `max_pps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<&'static str>,
    /// `rtt`: `default` (the daemons' default `[host.poll]`: workers
    /// sleep when idle) or `busy` (`busy_poll_us` on the dispatcher and
    /// the local daemon, and on the engine with `busy_engines`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll: Option<&'static str>,
    /// `rtt`'s busy run: the engine's worker busy-polled too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_engines: Option<bool>,
    /// `rtt`'s busy run: the workers' CPUs (`--busy-cpus`: `none`, or
    /// the dispatcher's and the engine's, `D,E`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_cpus: Option<String>,
    /// `rtt`: replies per ping run (the fewer of the two runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pings: Option<usize>,
    /// `rtt`: ping's average through the dispatcher and an engine, us.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_us_avg: Option<f64>,
    /// `rtt`: the same VR local on the dispatcher's host, us.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_rtt_us_avg: Option<f64>,
    /// `rtt`: the difference, us (what the dispatcher hop adds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added_us_avg: Option<f64>,
    /// `rtt`: the median of ping's replies through the cluster, us.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_us_p50: Option<f64>,
    /// `rtt`: the same, local, us.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_rtt_us_p50: Option<f64>,
    /// `rtt`: the difference of the medians, us.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added_us_p50: Option<f64>,
    /// `restart`: `dispatcher` or `agent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub component: Option<&'static str>,
    /// `restart`: the dispatcher's placement the same after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_placement: Option<bool>,
    /// `restart`: from the restart to every flow crossing again, ms
    /// (null: not within 30 s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub back_ms: Option<f64>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterReport {
    /// "cluster".
    pub bench: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// The points.
    pub results: Vec<ClusterRecord>,
}

/// The lab, its vrhost configs and a scratch directory.
struct Bench<'a> {
    args: &'a ClusterArgs,
    lab: Lab,
    /// The dispatcher's node and config, then the engines', without etcd
    /// (the engines' VRs in their configs: [`derive`]).
    nodes: Vec<(String, toml::Table)>,
    /// The same as the lab has them (with etcd), for `restart`.
    etcd_nodes: Vec<(String, toml::Table)>,
    dir: PathBuf,
}

/// Run `vrhost bench cluster`.
///
/// # Errors
/// The lab, a daemon, a socket; traffic that never gets through.
pub fn run(args: &ClusterArgs) -> Result<()> {
    if args.flows == 0 || args.seconds <= 0.0 || args.engine_pps == 0 {
        bail!("--flows, --seconds and --engine-pps must be > 0");
    }
    let known: Vec<&str> = EXPERIMENTS.split(',').collect();
    if let Some(e) = args
        .experiments
        .iter()
        .find(|e| !known.contains(&e.as_str()))
    {
        bail!("--experiments: no experiment {e:?} ({EXPERIMENTS})");
    }
    if args.pings == 0 || !(args.ping_interval_ms >= 0.2 && args.ping_interval_ms <= 10_000.0) {
        bail!("--pings must be > 0 and --ping-interval-ms 0.2..=10000");
    }
    let lab = Lab::load(&args.lab)?;
    // Fixed namespace names: a second run waits for this one.
    let _claim = lab.claim()?;
    let mut nodes = Vec::new();
    for (name, cfg) in lab.vrhost_nodes() {
        let src = std::fs::read_to_string(&cfg).with_context(|| cfg.display().to_string())?;
        let doc: toml::Table = toml::from_str(&src).context(cfg.display().to_string())?;
        nodes.push((name.to_string(), doc));
    }
    if nodes.len() < 4 {
        bail!(
            "{}: needs a dispatcher and three engines",
            args.lab.display()
        );
    }
    // The lab's engines get their VR from etcd: without it (every
    // experiment but `restart`), static configs derived as placed.
    let lab_dir = args.lab.parent().unwrap_or(Path::new("."));
    let static_nodes = derive::without_etcd(&nodes, lab_dir)?;
    let dir = std::env::temp_dir().join(format!("vrhost-bench-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let up = lab.up()?;
    let b = Bench {
        args,
        lab,
        nodes: static_nodes,
        etcd_nodes: nodes,
        dir,
    };
    let results = b.all();
    if matches!(up, Up::Built) {
        b.lab.down();
    }
    let _ = std::fs::remove_dir_all(&b.dir);
    let report = ClusterReport {
        bench: "cluster",
        machine: Machine::this(),
        results: results?,
    };
    crate::report::emit(&report, &args.output, |r| print_table(&r.results))?;
    if let Some(png) = &args.plot {
        plot(&report, args, png)?;
    }
    Ok(())
}

/// What a point runs: engines 1..=`n`, the dispatcher's policy, each
/// engine's emulated capacity, busy polling or not.
#[derive(Debug, Clone, Copy)]
struct Point {
    n: usize,
    policy: ClusterPolicy,
    limit: Option<u64>,
    busy: bool,
}

impl Point {
    /// `n` engines without a limit, flow policy, default polling.
    fn engines(n: usize) -> Self {
        Self {
            n,
            policy: ClusterPolicy::Flow,
            limit: None,
            busy: false,
        }
    }
}

impl Bench<'_> {
    fn all(&self) -> Result<Vec<ClusterRecord>> {
        let a = self.args;
        let runs = |e: &str| a.experiments.iter().any(|x| x == e);
        let mut out = Vec::new();
        let mut one = None;
        for n in (1..=3).filter(|_| runs("scale")) {
            let pt = Point {
                limit: Some(a.engine_pps),
                ..Point::engines(n)
            };
            let mut r = self.point("scale", pt, a.offered_pps)?;
            let base = *one.get_or_insert(r.mpps);
            r.ratio_to_one = Some(if base > 0.0 { r.mpps / base } else { 0.0 });
            out.push(r);
        }
        let mut saturating = a.offered_pps;
        if runs("dispatcher_limit") {
            let (limit, rate) = self.dispatcher_limit()?;
            out.extend(limit);
            saturating = rate;
        }
        let policies = [
            ClusterPolicy::Rr,
            ClusterPolicy::Proportional,
            ClusterPolicy::Flow,
        ];
        for policy in policies.into_iter().filter(|_| runs("reorder")) {
            let pt = Point {
                policy,
                ..Point::engines(3)
            };
            out.push(self.point("reorder", pt, saturating)?);
        }
        if runs("failover") {
            out.push(self.point("failover", Point::engines(3), a.paced_pps)?);
        }
        if runs("rtt") {
            out.push(self.rtt(false)?);
            out.push(self.rtt(true)?);
        }
        if runs("restart") {
            out.extend(self.restarts()?);
        }
        Ok(out)
    }

    /// Three engines without a limit, the offered rate doubled from
    /// `--offered-pps` until frames are lost (more than 2%: the
    /// dispatcher's limit, or the engines' where they are slower), the
    /// generator falls behind (below 90% of the offered rate) or
    /// `--max-pps`: a record per rate, and the last rate offered (the
    /// one that saturated the path, for `reorder`).
    fn dispatcher_limit(&self) -> Result<(Vec<ClusterRecord>, u64)> {
        let a = self.args;
        let mut out = Vec::new();
        let mut offered = a.offered_pps.min(a.max_pps).max(1);
        loop {
            let mut r = self.point("dispatcher_limit", Point::engines(3), offered)?;
            let why = if r.received < r.sent - r.sent / 50 {
                Some("loss")
            } else if r.sent_pps < 0.9 * offered as f64 {
                Some("generator")
            } else if offered >= a.max_pps {
                Some("max_pps")
            } else {
                None
            };
            r.limited_by = why;
            out.push(r);
            if why.is_some() {
                return Ok((out, offered));
            }
            offered = offered.saturating_mul(2).min(a.max_pps);
        }
    }

    /// Write node `i`'s config for this point; its path.
    fn config(&self, i: usize, pt: Point) -> Result<PathBuf> {
        let mut doc = self.nodes[i].1.clone();
        self.set_poll(&mut doc, pt.busy, i);
        if i == 0 {
            let engines: Vec<toml::Value> = (self.nodes[1..=pt.n].iter())
                .map(|(name, _)| name.clone().into())
                .collect();
            let vr = remote_vr(&mut doc)?;
            vr.insert("engines".into(), engines.into());
            vr.insert("policy".into(), pt.policy.name().into());
        } else if let Some(limit) = pt.limit {
            let vr = (doc.get_mut("vrs").and_then(|v| v.as_array_mut()))
                .and_then(|v| v.first_mut())
                .and_then(|v| v.as_table_mut());
            let Some(vr) = vr else {
                bail!("engine {}'s config has no [[vrs]]", self.nodes[i].0);
            };
            vr.insert("rate_limit_pps".into(), (limit as i64).into());
        }
        let path = self.dir.join(format!("{}.toml", self.nodes[i].0));
        std::fs::write(&path, toml::to_string(&doc).context("a config")?)?;
        Ok(path)
    }

    /// Start the point's engines and the dispatcher.
    fn start(&self, pt: Point) -> Result<Vec<Daemon>> {
        let mut ds = Vec::new();
        for i in (1..=pt.n).chain([0]) {
            let cfg = self.config(i, pt)?;
            let ns = self.lab.ns_name(&self.nodes[i].0);
            ds.push(Daemon::start(&cfg, Some(&ns), 0, "none")?);
        }
        Ok(ds)
    }

    fn point(&self, experiment: &'static str, pt: Point, offered: u64) -> Result<ClusterRecord> {
        let a = self.args;
        let mut daemons = self.start(pt)?;
        let flows = Flows::bind(&self.lab.ns("gen"), &self.lab.ns("sink"), a.flows)?;
        if !flows.warm_up(Duration::from_secs(30)) {
            bail!("{experiment}: not every flow got through the cluster in 30 s");
        }
        // Every engine's heartbeats heard (100 ms each) before measuring.
        std::thread::sleep(Duration::from_millis(500));
        let mut killed_at = None;
        let kill_round = (a.seconds / 3.0 * offered as f64 / f64::from(a.flows)) as u32;
        let run = flows.blast(offered, a.seconds, |seq| {
            if experiment == "failover" && seq == kill_round.max(1) && killed_at.is_none() {
                // Engine e2: the second daemon started.
                let pid = daemons[1].pid();
                if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
                killed_at = Some(Instant::now());
            }
        });
        daemons.clear();
        let mut r = ClusterRecord {
            experiment,
            engines: pt.n,
            policy: pt.policy.name(),
            engine_pps: pt.limit,
            offered_pps: offered,
            sent_pps: run.sent_pps(),
            sent: run.frames_sent(),
            received: run.got.len() as u64,
            mpps: run.pps() / 1e6,
            reorder_pct: run.reorder_pct(),
            ..ClusterRecord::default()
        };
        if let Some(at) = killed_at {
            self.failover(&run, at, &mut r);
        }
        Ok(r)
    }

    /// The failover figures: the flows the dispatcher put on the killed
    /// engine (its own choice, rendezvous hashing), when they came back,
    /// and what was lost on them and on the others.
    fn failover(&self, run: &Run, at: Instant, r: &mut ClusterRecord) {
        let names: Vec<&str> = self.nodes[1..=3].iter().map(|n| n.0.as_str()).collect();
        let mut set = EngineSet::new(ClusterPolicy::Flow, &names, &[]);
        set.set_live(0b111);
        let moved: Vec<u16> = (0..run.flows)
            .filter(|&f| set.pick(flow_hash(&header_of(f))) == Some(1))
            .collect();
        let lost = run.lost();
        let count = |pick: bool| -> u64 {
            (lost.iter().enumerate())
                .filter(|(f, _)| moved.contains(&(*f as u16)) == pick)
                .map(|(_, l)| l.len() as u64)
                .sum()
        };
        r.recovery_ms = run.back_after(&moved, at).map(|d| d.as_secs_f64() * 1e3);
        r.lost_moved_flows = Some(count(true));
        r.lost_other_flows = Some(count(false));
    }
}

/// The dispatcher's (first) remote VR, `[[cluster.vrs]]`, in `doc`.
fn remote_vr(doc: &mut toml::Table) -> Result<&mut toml::Table> {
    let vr = (doc.get_mut("cluster").and_then(|c| c.get_mut("vrs")))
        .and_then(|v| v.as_array_mut())
        .and_then(|v| v.first_mut())
        .and_then(|v| v.as_table_mut());
    match vr {
        Some(vr) => Ok(vr),
        None => bail!("the dispatcher's config has no [[cluster.vrs]]"),
    }
}

fn print_table(rs: &[ClusterRecord]) {
    const C: [Column; 9] = [
        Column::left("experiment", 16),
        Column::right("engines", 7),
        Column::left("policy", 12),
        Column::right("engine_pps", 10),
        Column::right("offered", 8),
        Column::right("Mpps", 8).decimals(4),
        Column::right("ratio", 6),
        Column::right("reorder%", 8).decimals(2),
        Column::left("failover / rtt / restart", 30),
    ];
    println!("{}", heading(&C));
    for r in rs {
        let limit = r.engine_pps.map_or("-".into(), |p| p.to_string());
        let ratio = crate::report::opt(r.ratio_to_one, 2);
        let fail = match (r.recovery_ms, r.lost_moved_flows, r.lost_other_flows) {
            (rec, Some(m), Some(o)) => format!(
                "back {} ms, lost {m} moved / {o} other",
                crate::report::opt(rec, 0)
            ),
            _ => match (r.rtt_us_avg, r.local_rtt_us_avg, r.component) {
                (Some(c), Some(l), _) => format!(
                    "rtt {c:.0} us, local {l:.0} us (p50 {}/{}; {} poll)",
                    crate::report::opt(r.rtt_us_p50, 0),
                    crate::report::opt(r.local_rtt_us_p50, 0),
                    r.poll.unwrap_or("default")
                ),
                _ if r.experiment == "dispatcher_limit" => format!(
                    "sent {:.0}/s{}",
                    r.sent_pps,
                    r.limited_by
                        .map_or(String::new(), |w| format!(", stop: {w}"))
                ),
                (_, _, Some(c)) => format!(
                    "{c}: same placement {}, back {} ms",
                    r.same_placement.unwrap_or(false),
                    crate::report::opt(r.back_ms, 0)
                ),
                _ => "-".into(),
            },
        };
        let cells: [&dyn std::fmt::Display; 9] = [
            &r.experiment,
            &r.engines,
            &r.policy,
            &limit,
            &r.offered_pps,
            &r.mpps,
            &ratio,
            &r.reorder_pct,
            &fail,
        ];
        println!("{}", row(&C, &cells));
    }
}

/// The PNG, by scripts/plot-cluster.
fn plot(report: &ClusterReport, args: &ClusterArgs, png: &Path) -> Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    crate::report::plot(
        "scripts/plot-cluster",
        &json,
        args.output.out.as_deref(),
        png,
    )
}
