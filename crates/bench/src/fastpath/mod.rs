//! `vrhost bench fastpath`: issue 21's figures in one run, on the
//! forwarding bench's lab (`crates/bench/src/forward`, as namespaces
//! `vrhf-*`: `gen -- p0 [node] p1 -- sink`).
//!
//! Experiments (`--experiments`, each a kind of flat record):
//! - `cost` (not in the default set): the fast path's program alone, ns
//!   per frame in the kernel's `BPF_PROG_TEST_RUN` with `repeat`, for
//!   each table, beside `xdp_pass` (the harness) and a minimal XDP router
//!   in the same run (`cost.rs`); no lab, generator or sink.
//! - `forward`: for each generator (the XDP live-frames generator with
//!   p0's receive side on its core, `live`, or handing its frames to the
//!   forwarder's core through a cpumap, `live-split`, and trafgen) and
//!   table (2 routes, the full table), the generator alone
//!   into an XDP drop on p0, then each forwarder: `kernel` (RPS to the
//!   forwarder's core), `kernel_norps` (in the receiving core's softirq),
//!   `fast` (a daemon with `fast_path = true`,
//!   one VR on the fast path, af_xdp ports), `af_xdp` (the same VR in user
//!   space): offered and forwarded frames/s, CPU of the forwarder's core
//!   per frame, ping RTT and iperf3 TCP without load (the lab's links have
//!   TSO/GSO and checksum offloads off at the end hosts; GRO as
//!   `--tcp-gro` says during TCP). This is
//!   `bench forward`'s code (`crate::forward::run_points`). The sink's
//!   `eth0` has `bench forward`'s XDP drop (`ebpf/xdp_sink.c`) for these
//!   points, the `tcp` and the `ping` experiments, so that the TCP test
//!   takes it off as `bench forward`'s does. Then, per
//!   table, each forwarder's best against the kernel's best over both
//!   kernel forwarders and every generator of the run (`best` records).
//! - `tcp`: iperf3 through each forwarder in both placements, with the
//!   end hosts' GRO and the sink's XDP program of `--tcp-gro` (`ends`:
//!   `bench forward`'s reference, GRO on both end hosts and no program on
//!   the sink; `gen`: the setting before 2026-11-27), the best against
//!   the kernel's best (`tcp.rs`).
//! - `ping`: many pings through each forwarder, the forwarders taking
//!   turns `--ping-rounds` times in one run; median, p90, p99 a round and
//!   pooled against the kernel's best (`ping.rs`).
//! - `migrate`: the VR moved between the paths `--moves` times in a row
//!   (`POST /v1/vrs/bench/move`), while the live generator sends
//!   `--flows` numbered flows at its maximum and at each paced rate of
//!   `--migrate-rates`. The sink (`vrhost_fast::SeqSink`) counts frames
//!   lost and reordered from the sequence numbers; each move's record
//!   covers the `--move-settle` seconds from the request on, beside the
//!   same span just before it (`lost_before`, no move) and the frames p0's
//!   ring refused meanwhile (`lost_to_node`, before any forwarder). The
//!   switch-over time (`switch_ms`) runs from the request to the first
//!   frame on the new path, seen in the fast path's counters
//!   (`switch.rs`, which also traces the frames at the select table
//!   around the move: a gap in them against a late switch); `api_ms` is
//!   the API's answer time. Each series (one rate)
//!   is also added up exactly once the paths have drained
//!   (`migrate_total`: sent, received, lost, reordered).
//! - `idle`: the CPU of the daemon and its VR processes (utime + stime
//!   from /proc) with one fast VR and no traffic (a span in which frames
//!   reached its slow path is measured again).
//! - `fairness`: a quiet and a noisy tenant on one port, both on the fast
//!   path with their buckets in the select table, the live generator
//!   (`--fairness-generator`, `live` by default: the port's receive side
//!   on the generator's core, so that every frame reaches the buckets)
//!   sending 2 x the capacity (asked again for more until it has), at
//!   each size of `--fairness-bytes` (`auto`: the smallest at which the
//!   generator can offer 2.1 x the capacity measured in the same run)
//!   (`bench isolation`'s one-port XDP run, on its own lab once this one
//!   is down): the quiet tenant's `quiet_ratio`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use vrhost_fast::SeqSink;
use vrhost_lab::Lab;

use crate::forward::best::{Best, best};
use crate::forward::generator::{GeneratorKind, LiveOptions, WmemDefault};
use crate::forward::node::xdp_sink_obj;
use crate::forward::{
    ForwardArgs, Plan, Record, Table, TcpGro, TcpPlacement, TcpQdisc, TempFile, attach_xdp_sink,
    run_points,
};
use crate::isolation::FairFast;
use crate::machine::Machine;
use crate::{Context, Result, bail};

mod cost;
mod idle;
mod migrate;
mod ping;
mod switch;
mod table;
mod tcp;

pub use cost::CostRecord;
pub use idle::IdleRecord;
pub use migrate::{MoveRecord, SeriesRecord};
pub use ping::{PingRecord, PingVsKernel};
pub use switch::Switch;
pub use tcp::{TcpBest, TcpRecord};

/// Options of `vrhost bench fastpath`.
#[derive(Debug, Clone, clap::Args)]
pub struct FastpathArgs {
    /// Experiments to run: forward, tcp, ping, migrate, idle, fairness,
    /// cost (the program alone, `BPF_PROG_TEST_RUN`; not in the default
    /// set).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "forward,tcp,ping,migrate,idle,fairness"
    )]
    pub experiments: Vec<String>,
    /// Generators of the forwarding points.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "live,live-split,trafgen"
    )]
    pub generators: Vec<GeneratorKind>,
    /// Forwarders of the forwarding points: kernel, kernel_norps, fast,
    /// af_xdp, and minimal (not by default: the minimal XDP router of the
    /// cost experiment on p0 and p1, no VR and no route lookup, the
    /// reference for what XDP itself gets on the lab's veths).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "kernel,kernel_norps,fast,af_xdp"
    )]
    pub forwarders: Vec<String>,
    /// The fairness experiment's generator (trafgen cannot offer 2 x the
    /// port's capacity on veth).
    /// `live` (the default) runs the port's XDP program, the select
    /// table, on the generator's core, so that every frame reaches the
    /// buckets; `live-split` loses the excess at its cpumap's queue first.
    #[arg(long, value_enum, default_value_t = GeneratorKind::Live)]
    pub fairness_generator: GeneratorKind,
    /// The fairness experiment: run p0's NAPI (its XDP program) in a
    /// kernel thread on `--fwd-cpu` (with `--fairness-generator live`, the
    /// generator's core then only builds frames).
    #[arg(long)]
    pub fairness_napi_thread: bool,
    /// The fairness experiment: the live generator sends the quiet tenant
    /// one frame in k in turn (as before), not from a token bucket at its
    /// own pace.
    #[arg(long)]
    pub fairness_mix_turn: bool,
    /// The fairness experiment's frame sizes on the wire, bytes with FCS,
    /// each a run per path: a size (64..=1518), or `auto`: the smallest
    /// of 64, 512, 1024, 1500 at which the generator's unpaced offer is
    /// 2.1 x the capacity measured in the same run (the slow path's
    /// capacity falls with the size, the live generator's offer hardly
    /// does), else the one that reached the most.
    #[arg(long, value_delimiter = ',', default_value = "auto")]
    pub fairness_bytes: Vec<String>,
    /// The fairness experiment's paths of the two tenants: fast, slow.
    #[arg(long, value_delimiter = ',', default_value = "fast,slow")]
    pub fairness_paths: Vec<String>,
    /// Route tables: `2`, or a route file (the full table). Repeatable.
    #[arg(long, default_values_t = ["2".to_string(), "../shared/data/fib/ipasn_20140513.dat.gz".to_string()])]
    pub table: Vec<String>,
    /// Frame size on the wire, bytes (with FCS).
    #[arg(long, default_value_t = 64)]
    pub frame_bytes: usize,
    /// Offered loads of the forwarding points, fractions of the
    /// generator's maximum (1 = unpaced).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub loads: Vec<f64>,
    /// Measurement window per forwarding point, seconds.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Warm-up before each window, seconds.
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// Core of the generator.
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    /// Core of the forwarder (kernel RPS target; vrhost host worker).
    #[arg(long, default_value_t = 1)]
    pub fwd_cpu: usize,
    /// Pings per RTT measurement (0: skip).
    #[arg(long, default_value_t = 40)]
    pub pings: u32,
    /// Seconds between pings (the forwarding points and the `ping`
    /// experiment).
    #[arg(long, default_value_t = 0.05)]
    pub ping_interval: f64,
    /// The `ping` experiment: pings per forwarder, table and round (0:
    /// skip).
    #[arg(long, default_value_t = 200)]
    pub ping_count: u32,
    /// The `ping` experiment: rounds, in each of which every forwarder
    /// is pinged in turn (kernel, fast, kernel, fast, ...).
    #[arg(long, default_value_t = 3)]
    pub ping_rounds: u32,
    /// Core of the pinging process, for every ping of the run (none:
    /// where the scheduler puts it; `bench forward --ping-cpu`).
    #[arg(long)]
    pub ping_cpu: Option<usize>,
    /// Seconds of iperf3 TCP in the `tcp` experiment (each forwarder
    /// pinned and unpinned), or on the forwarding points without it (0:
    /// skip).
    #[arg(long, default_value_t = 3)]
    pub tcp_seconds: u64,
    /// The end hosts' GRO during TCP (`bench forward --tcp-gro`): ends
    /// (both end hosts' `eth0`, the sink's XDP program off meanwhile:
    /// the kernel at its best, every forwarder alike), gen (the
    /// generator's `eth0` only, the sink's XDP program left on, which
    /// copies every skb arriving there: the setting before 2026-11-27),
    /// needed (only where a forwarder needs it: not like for like).
    #[arg(long, value_enum, default_value = "ends")]
    pub tcp_gro: TcpGro,
    /// The end hosts' root qdisc during TCP (`bench forward
    /// --tcp-qdisc`): pfifo-fast (as a real host's NIC has), none (a veth's
    /// `noqueue`, which drops a segment when the fast path's `p0` ring is
    /// full: the setting before 2026-11-27).
    #[arg(long, value_enum, default_value = "pfifo-fast")]
    pub tcp_qdisc: TcpQdisc,
    /// Moves per rate in the migrate experiment (slow -> fast -> slow ...).
    #[arg(long, default_value_t = 20)]
    pub moves: usize,
    /// Rates of the migrate experiment, frames/s (0: the live
    /// generator's maximum).
    #[arg(long, value_delimiter = ',', default_value = "0,50000")]
    pub migrate_rates: Vec<u64>,
    /// Seconds counted after each move (and before it, without one).
    #[arg(long, default_value_t = 0.3)]
    pub move_settle: f64,
    /// Flows the live generator numbers in the migrate experiment.
    #[arg(long, default_value_t = 4)]
    pub flows: u32,
    /// The cost experiment: test-run calls per program and table (each
    /// `vrhost_fast::RUNS_PER_CALL` runs).
    #[arg(long, default_value_t = 2000)]
    pub cost_calls: u32,
    /// Seconds of the idle experiment's CPU count.
    #[arg(long, default_value_t = 3.0)]
    pub idle_seconds: f64,
    /// The live generator: program runs per `BPF_PROG_RUN` call.
    #[arg(long, default_value_t = 1 << 22)]
    pub live_repeat: u32,
    /// The live generator: frames per batch (1..=256; its page pool holds
    /// as many, and `live-split`'s frames come back to it from the
    /// forwarder's core).
    #[arg(long, default_value_t = 64)]
    pub live_batch: u32,
    /// The fast forwarder: CPUs its forwarding is spread over through a
    /// cpumap (`[host.fast] cpus`; default none).
    #[arg(long, value_delimiter = ',')]
    pub fast_cpus: Vec<u32>,
    /// vrhost's forwarders (`fast`, `af_xdp`), in every experiment: run
    /// the node's veth NAPI polls (p0 and p1, with the port's XDP program:
    /// the fast path's whole forward) in kernel threads pinned to
    /// `--fwd-cpu`, so the live generator keeps its core as the kernel's
    /// RPS leaves it (`bench forward --threaded-napi`).
    #[arg(long)]
    pub threaded_napi: bool,
    /// Write a PNG plot: each forwarder's peak, and every move's
    /// switch-over and losses (scripts/plot-fastpath, run from the
    /// repository root).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub output: crate::report::Output,
}

impl FastpathArgs {
    /// The forwarding bench's options these amount to.
    fn forward_args(&self, generator: GeneratorKind) -> ForwardArgs {
        ForwardArgs {
            forwarders: self.forwarders.clone(),
            frame_bytes: vec![self.frame_bytes],
            family: vec![crate::forward::Family::Ipv4],
            loads: self.loads.clone(),
            table: self.table.clone(),
            generator: vec![generator],
            live_repeat: self.live_repeat,
            live_batch: self.live_batch,
            seconds: self.seconds,
            warmup: self.warmup,
            gen_cpu: self.gen_cpu,
            fwd_cpu: self.fwd_cpu,
            fast_cpus: self.fast_cpus.clone(),
            vr_cpu: None,
            slots: 16384,
            xdp_ring: 8192,
            xdp_frames: 16384,
            af_xdp_tx: None,
            busy_poll_us: 0,
            nap_us: None,
            spin_rounds: None,
            spin_yield_every: None,
            colocate_pps: None,
            flow_us: None,
            tx_batch: None,
            tx_wait_us: None,
            follow_rx: None,
            hand_over: None,
            idle_pings: 0,
            ping_cpu: self.ping_cpu,
            endpoint_rps_cpu: None,
            threaded_napi: self.threaded_napi,
            pings: self.pings,
            ping_interval: self.ping_interval,
            // The `tcp` experiment measures TCP in both placements; the
            // forwarding points then take its figures (`tcp::fill_points`).
            tcp_seconds: if self.runs("tcp") {
                0
            } else {
                self.tcp_seconds
            },
            tcp_cpus: Vec::new(),
            // Both placements, the best kept; the end hosts' GRO (and the
            // sink's XDP program) of `--tcp-gro`, as `bench forward`
            // measures TCP.
            tcp_placements: vec![TcpPlacement::Pinned, TcpPlacement::Unpinned],
            tcp_unpinned: false,
            tcp_gro: self.tcp_gro,
            tcp_qdisc: self.tcp_qdisc,
            json: false,
            out: None,
            plot: None,
        }
    }

    /// `--fairness-bytes` as sizes (`None`: auto).
    fn fairness_sizes(&self) -> Result<Vec<Option<usize>>> {
        self.fairness_bytes
            .iter()
            .map(|b| match b.as_str() {
                "auto" => Ok(None),
                n => match n.parse::<usize>() {
                    Ok(v) if (64..=1518).contains(&v) => Ok(Some(v)),
                    _ => bail!("--fairness-bytes {n:?}: a size in 64..=1518, or auto"),
                },
            })
            .collect()
    }

    fn runs(&self, experiment: &str) -> bool {
        self.experiments.iter().any(|e| e == experiment)
    }

    fn check(&self) -> Result<()> {
        for e in &self.experiments {
            if ![
                "forward", "tcp", "ping", "migrate", "idle", "fairness", "cost",
            ]
            .contains(&e.as_str())
            {
                bail!(
                    "--experiments: unknown experiment {e:?} (forward, tcp, ping, migrate, idle, fairness, cost)"
                );
            }
        }
        if self.plot.is_some() && !self.runs("forward") && !self.runs("migrate") {
            bail!("--plot draws the forward and migrate experiments: neither runs");
        }
        self.fairness_sizes()?;
        for p in &self.fairness_paths {
            if !["fast", "slow"].contains(&p.as_str()) {
                bail!("--fairness-paths: unknown path {p:?} (fast, slow)");
            }
        }
        for f in &self.forwarders {
            if !["kernel", "kernel_norps", "fast", "af_xdp", "minimal"].contains(&f.as_str()) {
                bail!(
                    "--forwarders: unknown forwarder {f:?} (kernel, kernel_norps, fast, af_xdp, minimal)"
                );
            }
        }
        if !(64..=1518).contains(&self.frame_bytes) {
            bail!("--frame-bytes {}: must be 64..=1518", self.frame_bytes);
        }
        if self.loads.iter().any(|l| !(*l > 0.0 && *l <= 1.0)) {
            bail!("--loads: fractions in (0, 1]");
        }
        if !(1..=vrhost_fast::MAX_FLOWS).contains(&self.flows) {
            bail!("--flows {}: 1..={}", self.flows, vrhost_fast::MAX_FLOWS);
        }
        if self.cost_calls == 0 {
            bail!("--cost-calls must be > 0");
        }
        if self.move_settle <= 0.0 || self.seconds <= 0.0 || self.idle_seconds <= 0.0 {
            bail!("--seconds, --move-settle and --idle-seconds must be > 0");
        }
        let cpus = vrhost_host::cpu::cpus();
        if self.gen_cpu >= cpus || self.fwd_cpu >= cpus || self.gen_cpu == self.fwd_cpu {
            bail!("--gen-cpu and --fwd-cpu must be two different cores of the {cpus} here");
        }
        if self.ping_cpu.is_some_and(|c| c >= cpus) {
            bail!("--ping-cpu: one of the {cpus} cores here");
        }
        if self.runs("ping") && self.ping_rounds == 0 {
            bail!("--ping-rounds must be > 0");
        }
        Ok(())
    }
}

/// One flat record of the report.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "experiment", rename_all = "lowercase")]
pub enum FastRecord {
    /// A forwarding point (`bench forward`'s record).
    Forward(Record),
    /// A forwarder at its best against the kernel at its best, per table.
    Best(Best),
    /// One move of the migrate experiment.
    Migrate(MoveRecord),
    /// A series of moves at one rate, added up once drained.
    #[serde(rename = "migrate_total")]
    MigrateTotal(SeriesRecord),
    /// The idle experiment.
    Idle(IdleRecord),
    /// One forwarder's TCP in one placement (the `tcp` experiment).
    Tcp(TcpRecord),
    /// A forwarder's best TCP against the kernel's best.
    #[serde(rename = "tcp_best")]
    TcpBest(TcpBest),
    /// One forwarder's pings in one round (the `ping` experiment).
    Ping(PingRecord),
    /// A forwarder's pings against the kernel's best, rounds pooled.
    #[serde(rename = "ping_vs_kernel")]
    PingVsKernel(PingVsKernel),
    /// The program's own cost per frame (the `cost` experiment).
    Cost(CostRecord),
    /// Noisy vs quiet tenant on one shared port (per-tenant token buckets
    /// in the select table), per path: `bench isolation`'s one-port XDP
    /// run with the live generator ([`crate::isolation::fairness_fast`]):
    /// `quiet_ratio`, the overload reached and each tenant's rates, asked,
    /// sent, at the port and forwarded.
    Fairness(FairFast),
}

/// The report: `{"bench":"fastpath","machine":{...},"results":[...]}`.
#[derive(Debug, Serialize)]
pub struct Report {
    /// `fastpath`.
    pub bench: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// The records, in the order measured.
    pub results: Vec<FastRecord>,
}

/// The LAB of `bench forward`, the lab's directory and its sink.
pub(crate) struct Setup<'a> {
    pub lab: &'a Lab,
    pub dir: &'a Path,
    pub sink: &'a SeqSink,
}

/// Run the benchmark.
pub fn run(args: &FastpathArgs) -> Result<()> {
    args.check()?;
    let tables = if args.runs("forward") || args.runs("cost") || args.runs("ping") {
        args.table
            .iter()
            .map(|t| Table::load(t))
            .collect::<Result<Vec<_>>>()?
    } else {
        Vec::new()
    };
    // No lab: first, on a machine without the run's traffic.
    let costs = if args.runs("cost") {
        cost::cost(args, &args.table, &tables)?
    } else {
        Vec::new()
    };
    let needs_lab = ["forward", "tcp", "ping", "migrate", "idle", "fairness"]
        .iter()
        .any(|e| args.runs(e));
    if !needs_lab {
        let report = Report {
            bench: "fastpath",
            machine: Machine::this(),
            results: costs.into_iter().map(FastRecord::Cost).collect(),
        };
        return crate::report::emit(&report, &args.output, table::print);
    }
    // The forwarding bench's lab under a prefix of its own (`vrhf-*`), so
    // that it does not tear down a `bench forward` running meanwhile.
    let lab = crate::forward::LAB.replace("prefix = \"vrhb\"", "prefix = \"vrhf\"");
    let lab = Lab::parse(&lab, "bench fastpath")?;
    // Fixed namespace names: a second run waits for this one.
    let _claim = lab.claim()?;
    lab.down();
    lab.up()?;
    let dir = std::env::temp_dir().join(format!("vrhost-bench-fastpath-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut result = run_all(args, &lab, &tables, &dir).map(|mut r| {
        r.splice(0..0, costs.into_iter().map(FastRecord::Cost));
        r
    });
    lab.down();
    let _ = std::fs::remove_dir_all(&dir);
    // Its own lab, under the same prefix: after this one is down.
    let sizes = args.fairness_sizes()?;
    let fair = args
        .fairness_paths
        .iter()
        .flat_map(|p| sizes.iter().map(move |b| (p, *b)));
    for (path, bytes) in fair.filter(|_| args.runs("fairness")) {
        let Ok(out) = &mut result else { break };
        let o = crate::isolation::FairXdp {
            path: path.clone(),
            frame_bytes: bytes,
            seconds: args.seconds,
            cpu: args.fwd_cpu,
            generator: args.fairness_generator,
            napi_thread: args.fairness_napi_thread,
            mix_turn: args.fairness_mix_turn,
            ..Default::default()
        };
        match crate::isolation::fairness_fast(&o) {
            Ok(f) => out.push(FastRecord::Fairness(f)),
            Err(e) => result = Err(e),
        }
    }
    let report = Report {
        bench: "fastpath",
        machine: Machine::this(),
        results: result?,
    };
    crate::report::emit(&report, &args.output, table::print)?;
    if let Some(png) = &args.plot {
        let json = serde_json::to_string_pretty(&report)?;
        crate::report::plot(
            "scripts/plot-fastpath",
            &json,
            args.output.out.as_deref(),
            png,
        )?;
    }
    Ok(())
}

fn run_all(
    args: &FastpathArgs,
    lab: &Lab,
    tables: &[Table],
    dir: &Path,
) -> Result<Vec<FastRecord>> {
    // `bench forward`'s XDP drop on the sink's eth0 (attached by netlink,
    // so that the TCP test can take it off and put it back, `--tcp-gro
    // ends`) up to the migrate experiment, whose counting sink (a BPF
    // link) then replaces it.
    let drop_obj: PathBuf = xdp_sink_obj()?;
    let _cleanup = TempFile(drop_obj.clone());
    let obj = drop_obj.display().to_string();
    attach_xdp_sink(lab, &obj)?;
    let _wmem = WmemDefault::raise(4 << 20)?;
    let mut out = Vec::new();
    if args.runs("idle") {
        out.push(FastRecord::Idle(idle::idle(args, lab, dir)?));
    }
    let mut points = if args.runs("forward") {
        forward(args, lab, tables, &obj, dir)?
    } else {
        Vec::new()
    };
    let tcps = if args.runs("tcp") {
        tcp::tcp(args, lab, dir)?
    } else {
        Vec::new()
    };
    tcp::fill_points(&mut points, &tcps, args.loads[0]);
    let b = best(&points);
    out.extend(points.into_iter().map(FastRecord::Forward));
    out.extend(b.into_iter().map(FastRecord::Best));
    let tb = tcp::tcp_best(&tcps);
    out.extend(tcps.into_iter().map(FastRecord::Tcp));
    out.extend(tb.into_iter().map(FastRecord::TcpBest));
    if args.runs("ping") {
        let (pings, vs) = ping::ping(args, lab, tables, dir)?;
        out.extend(pings.into_iter().map(FastRecord::Ping));
        out.extend(vs.into_iter().map(FastRecord::PingVsKernel));
    }
    if args.runs("migrate") {
        lab.ns("sink")
            .ip(&["link", "set", "dev", "eth0", "xdp", "off"])
            .context("the XDP drop off the sink's eth0")?;
        let sink = lab
            .ns("sink")
            .run(|| SeqSink::attach("eth0"))?
            .context("attach the counting sink")?;
        let setup = Setup {
            lab,
            dir,
            sink: &sink,
        };
        let m = migrate::migrate(args, &setup)?;
        out.extend(m.moves.into_iter().map(FastRecord::Migrate));
        out.extend(m.series.into_iter().map(FastRecord::MigrateTotal));
    }
    Ok(out)
}

fn forward(
    args: &FastpathArgs,
    lab: &Lab,
    tables: &[Table],
    obj: &str,
    dir: &Path,
) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    for &kind in &args.generators {
        let fa = args.forward_args(kind);
        let plan = Plan {
            forwarders: &fa.forwarders,
            generator: kind,
            loads: &fa.loads,
            live: LiveOptions {
                flows: 1,
                repeat: args.live_repeat,
                fwd_cpu: args.fwd_cpu,
                batch: args.live_batch,
            },
            drop_obj: obj,
            family: crate::forward::Family::Ipv4,
        };
        for table in tables {
            out.extend(run_points(&fa, lab, &plan, args.frame_bytes, table, dir)?);
        }
    }
    Ok(out)
}
