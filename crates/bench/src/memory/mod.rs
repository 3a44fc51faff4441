//! `vrhost bench memory`: forwarding in memory (LVRM's main-memory adapter),
//! the VR path against its references, side by side in one run.
//!
//! Modes:
//! - `shm`: the design: the host worker on one core, each VR a process on
//!   the other, frames through the VR's region and rings;
//! - `inproc`: the same router code called in the host thread, no isolation
//!   (the "kernel mode" reference: the best the router code can do);
//! - `syscall`: the conventional user-mode path: the VR process receives and
//!   sends each packet with one system call each on a `SOCK_SEQPACKET` socket.
//!
//! Frames come from a `mem` port (pre-built UDP/IPv4 frames) and go to a
//! `null` port that counts them. Each point runs a warm-up, then counts
//! forwarded frames and CPU time (host thread and VR processes, from
//! schedstat) over a window.

use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::{BenchError, Context, Result, bail};
use rustix::net::{RecvFlags, SendFlags};
use serde::Serialize;
use vrhost_host::hugepages::HugePages;
use vrhost_host::spawn::spawn_with_ctrl;
use vrhost_host::{
    Backend, Classifier, Match, PathSpec, Rule, VrCommand, VrPath, VrProcess, VrStats, Worker, cpu,
};
use vrhost_io::Port;
use vrhost_io::mem::{DstMode, MemPort, MemPortConfig};
use vrhost_io::null::{NullPort, SinkCounters};
use vrhost_proto::{PollConfig, Turns};
use vrhost_router::Router;

use crate::machine::Machine;
use vrhost_testvr::syscall::SyscallHello;

mod capacity;
mod idle;
mod linertt;
mod pages;
mod plan;
mod procfs;
mod routes;
mod table;

pub use capacity::per_core_pps;
use idle::{median_run, run_idle};
pub use pages::put_back as put_back_hugepages;
use plan::{points, validate};
use procfs::{context_switches, thread_cpu_ns_of};
use routes::load_tables;
pub use routes::{Family, Table};
use table::print_table;

/// How packets reach the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// VR processes over shared memory (the design).
    Shm,
    /// Router called in the host thread (no isolation).
    Inproc,
    /// VR processes with one system call per packet each way.
    Syscall,
}

/// Destinations of the generated frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Dst {
    /// Random a.b.c.x, a in 1..=223 (Europa's experiment). With a route file,
    /// uniformly random over its prefixes instead.
    Random,
    /// One fixed destination.
    Fixed,
}

/// Options of `vrhost bench memory`.
#[derive(Debug, Clone, clap::Args)]
pub struct MemoryArgs {
    /// Modes to run, side by side.
    #[arg(long, value_delimiter = ',', default_value = "inproc,shm,syscall")]
    pub modes: Vec<Mode>,
    /// Frame sizes in bytes (64..=1518, without FCS).
    #[arg(long, value_delimiter = ',', default_value = "64")]
    pub frame_bytes: Vec<usize>,
    /// Numbers of VRs sharing the host.
    #[arg(long, value_delimiter = ',', default_value = "1,10")]
    pub vrs: Vec<usize>,
    /// Idle VRs beside one busy VR (shm): how the busy VR's rate and the
    /// host's CPU per round change with VRs that have nothing to do;
    /// see `--no-idle-beside`.
    #[arg(long, value_delimiter = ',', default_value = "0,10,100")]
    pub idle_beside: Vec<usize>,
    /// Skip the points with idle VRs beside a busy one.
    #[arg(long)]
    pub no_idle_beside: bool,
    /// Pool size per VR, in slots.
    #[arg(long, default_value_t = 1024)]
    pub pool: u32,
    /// Route tables: `2` (two /1 routes) or a route file in any format
    /// `vrhost route import` reads, e.g. ../shared/data/fib/ipasn_20140513.dat.gz
    /// (IPv4) or ../shared/data/mrt/rib6.20151101.0600_firstMB.bz2 (IPv6).
    /// A file is used for each family of `--family` it has routes of.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    pub routes: Vec<String>,
    /// Address families (tenants told apart by source address in both).
    #[arg(long, value_delimiter = ',', default_value = "ipv4")]
    pub family: Vec<Family>,
    /// Destinations of generated frames.
    #[arg(long, value_enum, default_value = "random")]
    pub dst: Dst,
    /// Pool sizes for the pool sweep (shm, 1 VR, 64-byte frames); empty: none.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "2,4,8,16,32,64,128,256,512,1024,2048,4096"
    )]
    pub pool_sweep: Vec<u32>,
    /// Skip the pool sweep.
    #[arg(long)]
    pub no_pool_sweep: bool,
    /// Skip the idle figures (idle VRs: CPU use, memory and first-packet
    /// latency).
    #[arg(long)]
    pub no_idle: bool,
    /// Numbers of idle VRs for the idle figures.
    #[arg(long, value_delimiter = ',', default_value = "10,100")]
    pub idle_vrs: Vec<usize>,
    /// Rounds: each round runs every point once (fresh VR processes and
    /// regions each time), in turn, and each point reports its run with
    /// the median rate. The machines here are shared virtual machines
    /// whose rate sometimes halves for seconds at a time; interleaving
    /// puts such a spell on every point alike, and the ratios are also
    /// printed round by round.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Measurement window per point, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Warm-up before each window, seconds.
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// CPU of the host worker.
    #[arg(long, default_value_t = 0)]
    pub host_cpu: usize,
    /// CPU of the VR processes.
    #[arg(long, default_value_t = 1)]
    pub vr_cpu: usize,
    /// Time slice the kernel gives each VR process, µs (0: its default);
    /// as the daemon's `[host.poll] slice_us`.
    #[arg(long, default_value_t = PollConfig::default().slice_us)]
    pub slice_us: u32,
    /// How a VR beside other VRs ends its turn when its rings are empty:
    /// `yield`, `sleep` or `spin`; as the daemon's `[host.poll] turns`.
    #[arg(long, default_value_t = PollConfig::default().turns)]
    pub turns: Turns,
    /// With `--turns spin`: how long such a VR polls its empty rings
    /// before it sleeps, µs; as the daemon's `[host.poll] turn_us`.
    #[arg(long, default_value_t = PollConfig::default().turn_us)]
    pub turn_us: u32,
    /// Frames the worker gives a sleeping VR before it rings it, while
    /// busy (0: at once); as the daemon's `[host.poll] kick_batch`.
    #[arg(long, default_value_t = PollConfig::default().kick_batch)]
    pub kick_batch: u32,
    /// Longest wait of a frame for its VR's doorbell under `--kick-batch`,
    /// µs; as the daemon's `[host.poll] kick_wait_us`.
    #[arg(long, default_value_t = PollConfig::default().kick_wait_us)]
    pub kick_wait_us: u32,
    /// Frames the worker takes from a port per round, per VR it handed
    /// frames to in the round before (0: 256 a round, however many VRs);
    /// as the daemon's `[host.poll] round_per_vr`.
    #[arg(long, default_value_t = PollConfig::default().round_per_vr)]
    pub round_per_vr: u32,
    /// VR regions in reserved huge pages, as the daemon's `[host]
    /// hugepages` (`off`, `auto`, `required`); the run raises
    /// `/proc/sys/vm/nr_hugepages` by what it lacks and puts it back.
    #[arg(long, default_value_t = HugePages::Off)]
    pub hugepages: HugePages,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The test VR program (default: `vrhost-testvr` beside this
    /// executable, where `cargo build` puts it).
    #[arg(long, value_name = "PATH")]
    pub testvr: Option<std::path::PathBuf>,
}

/// One measured forwarding point.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// `shm`, `inproc` or `syscall`.
    pub mode: Mode,
    /// `ipv4` or `ipv6`.
    pub family: Family,
    /// Frame size.
    pub frame_bytes: usize,
    /// VRs sharing the host (the ones with traffic).
    pub vrs: usize,
    /// VRs beside them with no traffic at all.
    pub idle_vrs: usize,
    /// Slots per VR pool.
    pub pool_slots: u32,
    /// Routes in each VR's table.
    pub routes: usize,
    /// Forwarded frames per second, millions.
    pub mpps: f64,
    /// Forwarded bits per second (frame bytes, no preamble), billions.
    pub gbps: f64,
    /// CPU time of host and VRs together per forwarded frame.
    pub cpu_ns_per_pkt: f64,
    /// Host worker CPU, percent of one core.
    pub host_cpu_pct: f64,
    /// Host worker CPU per round (`poll_once`, with or without work), ns.
    pub host_ns_per_round: f64,
    /// VR processes' CPU, percent of one core.
    pub vr_cpu_pct: f64,
    /// Frames dropped in the window (host ingress, by VRs, by ports).
    pub drops: u64,
    /// Protocol violations counted (should be 0 with honest VRs).
    pub violations: u64,
    /// Window length, seconds.
    pub seconds: f64,
    /// Runs of this point; the one with the median rate is this record.
    pub runs: usize,
    /// The VR processes' voluntary context switches (sleeps on the
    /// doorbell) per 1,000 forwarded frames (`shm`, `syscall`).
    pub vr_sleeps_per_kframe: f64,
    /// Their involuntary ones (a yield to another VR, the end of a time
    /// slice) per 1,000 forwarded frames.
    pub vr_preempts_per_kframe: f64,
    /// Frames a VR forwards per turn on its core: forwarded frames over
    /// the VR processes' context switches of both kinds.
    pub frames_per_turn: f64,
    /// Doorbell writes of the host to the VRs per 1,000 forwarded frames.
    pub kicks_per_kframe: f64,
    /// Slots a VR held at the window's end (given to it and not handed
    /// back, as the host last counted them), averaged over the VRs: its
    /// frames in flight, and so the part of its pool the host and the VR
    /// cycle through (`shm`; 0 in the other modes).
    pub held_per_vr: f64,
    /// The round trip of one cache line between the host's and the VRs'
    /// CPU just before the point, ns (`linertt`; 0 if not measured).
    pub line_rtt_ns: f64,
}

impl MemoryArgs {
    /// The back-off the VRs are given before it is adapted to their core.
    fn poll(&self) -> PollConfig {
        PollConfig {
            slice_us: self.slice_us,
            turns: self.turns,
            turn_us: self.turn_us,
            kick_batch: self.kick_batch,
            kick_wait_us: self.kick_wait_us,
            round_per_vr: self.round_per_vr,
            ..PollConfig::default()
        }
    }
}

/// The idle figures.
#[derive(Debug, Clone, Serialize)]
pub struct IdleRecord {
    /// Always `idle`.
    pub mode: &'static str,
    /// Idle VRs.
    pub vrs: usize,
    /// CPU of host and all VRs with no traffic, percent of one core.
    pub cpu_pct: f64,
    /// First-packet latency after idling, median, microseconds.
    pub wake_us_p50: f64,
    /// Its 99th percentile.
    pub wake_us_p99: f64,
    /// Its maximum.
    pub wake_us_max: f64,
    /// The part of it from the host taking the frame to its leaving: the
    /// VR's wakeup and the forwarding, what vrhost adds; median.
    pub host_us_p50: f64,
    /// Its 99th percentile.
    pub host_us_p99: f64,
    /// The platform's floor, same run: one eventfd wakeup of a thread
    /// sleeping on the VR CPU, from the host CPU, after the same pause.
    pub wake_ref_us_p50: f64,
    /// Its 99th percentile.
    pub wake_ref_us_p99: f64,
    /// Probes sent.
    pub probes: usize,
    /// Memory of host and VRs with no traffic: the proportional set size
    /// of the VR processes and of this process (the host), shared memory
    /// (the regions) counted once.
    pub rss_bytes: u64,
}

#[derive(Serialize)]
#[serde(untagged)]
enum AnyRecord {
    Fwd(Record),
    Idle(IdleRecord),
}

#[derive(Serialize)]
struct Report<'a> {
    bench: &'static str,
    machine: Machine,
    results: &'a [AnyRecord],
    /// N busy VRs' aggregate over one VR's, per table.
    ratios: Vec<table::ScaleRatio>,
    /// IPv6 over IPv4, per mode and route count.
    family_ratios: Vec<table::FamilyRatio>,
}

/// Most VRs in one point: each is a process with a region and three file
/// descriptors in the bench (its pidfd, control socket and doorbell), and
/// the generator tells them apart by source address (`tenant_src`).
const MAX_VRS: usize = 1000;

const GEN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const SINK_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

fn mac(b: [u8; 6]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Source address of the traffic of VR `i`: tenants are told apart by source.
fn tenant_src(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(192, 168, (i / 250) as u8, (i % 250 + 1) as u8)
}

/// One configuration to measure.
pub struct Point<'a> {
    pub mode: Mode,
    pub frame_bytes: usize,
    pub vrs: usize,
    /// VRs with no traffic beside the `vrs` busy ones.
    pub idle: usize,
    pub pool: u32,
    pub table: &'a Table,
    /// The VRs' back-off before it is adapted to their core (time slice,
    /// turns: `PollConfig::slice_us`, `PollConfig::turn_us`).
    pub poll: PollConfig,
    /// Where the VRs' regions get their pages.
    pub pages: HugePages,
}

fn generator(p: &Point<'_>, dst: Dst) -> Result<MemPort> {
    let t = p.table;
    let dst = match (t.family, dst, t.route_file.is_none()) {
        (Family::Ipv4, Dst::Fixed, _) => DstMode::Fixed(Ipv4Addr::new(10, 1, 2, 3)),
        (Family::Ipv4, Dst::Random, true) => DstMode::RandomClassC,
        (Family::Ipv4, Dst::Random, false) => DstMode::Prefixes(t.prefixes.clone()),
        (Family::Ipv6, Dst::Fixed, _) => {
            DstMode::Fixed6(std::net::Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, 3))
        }
        // Global unicast (2000::/3): no multicast, link-local or ULA the
        // router would refuse to forward.
        (Family::Ipv6, Dst::Random, true) => DstMode::Prefixes6(vec![(0x2000 << 112, 3)]),
        (Family::Ipv6, Dst::Random, false) => DstMode::Prefixes6(t.prefixes6.clone()),
    };
    let cfg = MemPortConfig {
        frame_bytes: p.frame_bytes,
        dst,
        src_ips: (0..p.vrs).map(tenant_src).collect(),
        src_mac: vrhost_packet::MacAddr(GEN_MAC),
        dst_mac: vrhost_packet::MacAddr([0x02, 0, 0, 0, 0x10, 0]),
        ..MemPortConfig::default()
    };
    Ok(MemPort::new("mem0", cfg)?)
}

/// Tenants told apart by source address (IPv6: `fd00::` + the IPv4 one,
/// as the generator writes it).
fn rules(vrs: usize, family: Family) -> Result<Classifier> {
    let rules: Vec<Rule> = (0..vrs)
        .map(|i| Rule {
            m: Match {
                in_port: Some(0),
                src: (family == Family::Ipv4).then(|| (tenant_src(i), 32)),
                src6: (family == Family::Ipv6)
                    .then(|| (vrhost_io::mem::source6(tenant_src(i)), 128)),
                ..Match::default()
            },
            vr: i,
            vnic: 0,
        })
        .collect();
    Ok(Classifier::new(&rules)?)
}

/// How to start a router VR on `vr_cpu` with `poll`. VRs that share their
/// core with others back off as the daemon's do
/// ([`PollConfig::beside_vrs`]).
fn vr_command(
    table: &Table,
    vr_cpu: usize,
    shared_core: bool,
    poll: PollConfig,
) -> Result<VrCommand> {
    Ok(VrCommand {
        program: std::env::current_exe()?,
        args: vec!["vr-run".into()],
        cpu: Some(vr_cpu),
        poll: if shared_core { poll.beside_vrs() } else { poll },
        config: serde_json::to_value(table.router_config())?,
        ready_timeout: Duration::from_secs(60),
        idle_start: Duration::ZERO,
        confine: vrhost_host::Confine::default(),
        hurry: Default::default(),
    })
}

/// Snapshot of the counters that matter for a window.
#[derive(Debug, Clone, Copy, Default)]
struct Snap {
    at: Option<Instant>,
    fwd: u64,
    bytes: u64,
    drops: u64,
    violations: u64,
    host_ns: u64,
    vr_ns: u64,
    rounds: u64,
    /// The VR processes' voluntary and involuntary context switches.
    vr_switches: (u64, u64),
    kicks: u64,
    /// Slots the VRs' instances hold.
    held: u64,
}

struct Probes {
    sink: Arc<SinkCounters>,
    vr_stats: Vec<Arc<VrStats>>,
    host_drops: Arc<vrhost_host::HostStats>,
    host_tid: i32,
    vr_pids: Vec<u32>,
}

impl Probes {
    fn snap(&self) -> Snap {
        let drops = self
            .vr_stats
            .iter()
            .map(|s| s.ingress_drops_total() + s.vr_dropped.get() + s.port_dropped.get())
            .sum::<u64>()
            + self
                .host_drops
                .ingress_drops
                .iter()
                .map(|c| c.get())
                .sum::<u64>();
        Snap {
            at: Some(Instant::now()),
            fwd: self.sink.packets(),
            bytes: self.sink.bytes(),
            drops,
            violations: self.vr_stats.iter().map(|s| s.violations_total()).sum(),
            host_ns: thread_cpu_ns_of(self.host_tid).unwrap_or(0),
            vr_ns: self
                .vr_pids
                .iter()
                .filter_map(|&p| cpu::process_cpu_ns(p))
                .sum(),
            rounds: self.host_drops.rounds.get(),
            vr_switches: self
                .vr_pids
                .iter()
                .filter_map(|&p| context_switches(p))
                .fold((0, 0), |(v, n), (a, b)| (v + a, n + b)),
            kicks: self.vr_stats.iter().map(|s| s.kicks.get()).sum(),
            held: self
                .vr_stats
                .iter()
                .flat_map(|s| &s.instances)
                .map(|i| i.held.get())
                .sum(),
        }
    }
}

fn record(p: &Point<'_>, a: Snap, b: Snap) -> Record {
    let secs =
        b.at.zip(a.at)
            .map(|(b, a)| (b - a).as_secs_f64())
            .unwrap_or(1.0);
    let fwd = b.fwd - a.fwd;
    let cpu_ns = (b.host_ns - a.host_ns) + (b.vr_ns - a.vr_ns);
    let per_kframe = |n: u64| {
        if fwd > 0 {
            n as f64 * 1000.0 / fwd as f64
        } else {
            0.0
        }
    };
    let sleeps = b.vr_switches.0.saturating_sub(a.vr_switches.0);
    let preempts = b.vr_switches.1.saturating_sub(a.vr_switches.1);
    Record {
        mode: p.mode,
        family: p.table.family,
        frame_bytes: p.frame_bytes,
        vrs: p.vrs,
        idle_vrs: p.idle,
        pool_slots: p.pool,
        routes: p.table.len(),
        mpps: fwd as f64 / secs / 1e6,
        gbps: (b.bytes - a.bytes) as f64 * 8.0 / secs / 1e9,
        cpu_ns_per_pkt: if fwd > 0 {
            cpu_ns as f64 / fwd as f64
        } else {
            0.0
        },
        host_cpu_pct: (b.host_ns - a.host_ns) as f64 / secs / 1e7,
        host_ns_per_round: match b.rounds - a.rounds {
            0 => 0.0,
            n => (b.host_ns - a.host_ns) as f64 / n as f64,
        },
        vr_cpu_pct: (b.vr_ns - a.vr_ns) as f64 / secs / 1e7,
        drops: b.drops - a.drops,
        violations: b.violations - a.violations,
        seconds: secs,
        runs: 1,
        vr_sleeps_per_kframe: per_kframe(sleeps),
        vr_preempts_per_kframe: per_kframe(preempts),
        frames_per_turn: match sleeps + preempts {
            0 => 0.0,
            n => fwd as f64 / n as f64,
        },
        kicks_per_kframe: per_kframe(b.kicks - a.kicks),
        held_per_vr: b.held as f64 / p.vrs.max(1) as f64,
        line_rtt_ns: 0.0,
    }
}

/// Run `worker` on the host CPU for warm-up + window and measure.
fn measure_worker(
    args: &MemoryArgs,
    p: &Point<'_>,
    mut worker: Worker,
    sink: Arc<SinkCounters>,
) -> Result<Record> {
    let vr_stats: Vec<_> = worker.vrs().iter().map(|v| v.stats().clone()).collect();
    let vr_pids: Vec<u32> = worker
        .vrs()
        .iter()
        .flat_map(|v| v.processes().iter().map(VrProcess::pid))
        .collect();
    let host_drops = worker.stats().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let host_cpu = args.host_cpu;
    let st = stop.clone();
    let handle = std::thread::spawn(move || {
        let pinned = cpu::pin_current_thread(host_cpu);
        let _ = tx.send((
            rustix::thread::gettid().as_raw_nonzero().get(),
            pinned.is_ok(),
        ));
        worker.run(&st);
        worker.shutdown();
        worker
    });
    let (host_tid, _) = rx.recv().context("worker thread died")?;
    let probes = Probes {
        sink,
        vr_stats,
        host_drops,
        host_tid,
        vr_pids,
    };
    std::thread::sleep(Duration::from_secs_f64(args.warmup));
    let a = probes.snap();
    std::thread::sleep(Duration::from_secs_f64(args.seconds));
    let b = probes.snap();
    stop.store(true, Ordering::Relaxed);
    let worker = handle
        .join()
        .map_err(|_| crate::failed!("worker thread panicked"))?;
    for vr in worker.vrs() {
        vr.check_slot_accounting()
            .map_err(|e| crate::failed!("VR {}: slot accounting broken: {e}", vr.name()))?;
    }
    Ok(record(p, a, b))
}

/// Build a worker over a generator and a sink with `p.vrs` router VRs, in
/// processes (`shm`) on `vr_cpu` or in the host thread (`inproc`).
pub fn router_worker(
    p: &Point<'_>,
    dst: Dst,
    vr_cpu: usize,
) -> Result<(Worker, Arc<SinkCounters>)> {
    let mem = generator(p, dst)?;
    let sink = NullPort::new("null0");
    let counters = sink.counters();
    let ports: Vec<Box<dyn Port>> = vec![Box::new(mem), Box::new(sink)];
    let mut worker = Worker::new(ports, rules(p.vrs + p.idle, p.table.family)?, p.poll)?;
    for i in 0..p.vrs + p.idle {
        let name = format!("vr{i}");
        let spec = PathSpec {
            pages: p.pages,
            ..PathSpec::new(&name, vec![0, 1], p.pool)
        };
        let region = spec.create_region()?;
        let path = if p.mode == Mode::Inproc {
            let router = Router::new(&p.table.router_config()).map_err(BenchError::Failed)?;
            let backend = Backend::InProcRouter(Box::new(router));
            VrPath::assemble(&spec, region, backend, vec![])
        } else {
            // The busy VRs poll as they would without the idle ones.
            let shared_core = p.vrs > 1 || i >= p.vrs;
            let cmd = vr_command(p.table, vr_cpu, shared_core, p.poll)?;
            let (proc_, bell) = VrProcess::start(&name, 0, &region, worker.bell(), &cmd)?;
            VrPath::assemble(&spec, region, Backend::Process(vec![proc_]), vec![bell])
        };
        worker.add_vr(path);
    }
    Ok((worker, counters))
}

fn run_shm_or_inproc(args: &MemoryArgs, p: &Point<'_>) -> Result<Record> {
    let rtt = linertt::line_rtt_ns(args.host_cpu, args.vr_cpu).unwrap_or(0.0);
    let (worker, counters) = router_worker(p, args.dst, args.vr_cpu)?;
    let r = measure_worker(args, p, worker, counters)?;
    Ok(Record {
        line_rtt_ns: rtt,
        ..r
    })
}

/// The syscall reference: a host loop that hands each frame to its VR
/// process with one `send` and takes it back with one `recv`.
fn run_syscall(args: &MemoryArgs, p: &Point<'_>) -> Result<Record> {
    let mut mem = generator(p, args.dst)?;
    let mut sink = NullPort::new("null0");
    let counters = sink.counters();
    let classifier = rules(p.vrs, p.table.family)?;
    let exe: PathBuf = crate::report::testvr(args.testvr.as_deref())?;
    let mut children: Vec<(Child, OwnedFd)> = Vec::new();
    for _ in 0..p.vrs {
        let (child, sock) = spawn_with_ctrl(&exe, &["vr-run-syscall".into()])?;
        let hello = SyscallHello {
            router: p.table.router_config(),
            cpu: Some(args.vr_cpu),
        };
        rustix::net::send(&sock, &serde_json::to_vec(&hello)?, SendFlags::empty())?;
        let mut ok = [0u8; 16];
        let n = rustix::net::recv(&sock, &mut ok, RecvFlags::empty())?.0;
        if &ok[..n] != b"ready" {
            bail!("syscall VR did not start");
        }
        rustix::io::ioctl_fionbio(&sock, true)?;
        children.push((child, sock));
    }
    let pids: Vec<u32> = children.iter().map(|(c, _)| c.id()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let drops = Arc::new(vrhost_host::HostStats::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let (st, dr, host_cpu) = (stop.clone(), drops.clone(), args.host_cpu);
    let socks: Vec<OwnedFd> = children
        .iter()
        .map(|(_, s)| s.try_clone())
        .collect::<Result<_, _>>()?;
    let handle = std::thread::spawn(move || {
        let _ = cpu::pin_current_thread(host_cpu);
        let _ = tx.send(rustix::thread::gettid().as_raw_nonzero().get());
        let mut buf = [0u8; 2048];
        while !st.load(Ordering::Relaxed) {
            let mut frames: [&[u8]; 32] = [&[]; 32];
            let n = mem.rx_burst(&mut frames);
            for f in &frames[..n] {
                let target = vrhost_packet::FlowKey::extract(f)
                    .ok()
                    .and_then(|k| classifier.classify(0, &k));
                let sent = target
                    .map(|(vr, _)| rustix::net::send(&socks[vr], f, SendFlags::DONTWAIT).is_ok())
                    .unwrap_or(false);
                if !sent {
                    dr.ingress_drops[vrhost_host::IngressDrop::RingFull as usize].add(1);
                }
            }
            for s in &socks {
                for _ in 0..64 {
                    match rustix::net::recv(s, &mut buf, RecvFlags::DONTWAIT) {
                        Ok((len, _)) if len > 0 => {
                            sink.tx_burst(&[&buf[..len]]);
                        }
                        _ => break,
                    }
                }
            }
        }
    });
    let host_tid = rx.recv().context("syscall host thread died")?;
    let probes = Probes {
        sink: counters,
        vr_stats: vec![],
        host_drops: drops,
        host_tid,
        vr_pids: pids,
    };
    std::thread::sleep(Duration::from_secs_f64(args.warmup));
    let a = probes.snap();
    std::thread::sleep(Duration::from_secs_f64(args.seconds));
    let b = probes.snap();
    stop.store(true, Ordering::Relaxed);
    handle
        .join()
        .map_err(|_| crate::failed!("syscall host thread panicked"))?;
    for (mut child, sock) in children {
        drop(sock);
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(record(p, a, b))
}

/// Run the benchmark and print a table or JSON.
pub fn run(args: &MemoryArgs) -> Result<()> {
    validate(args)?;
    let tables = load_tables(args)?;
    let mut results = Vec::new();
    // Each run as it ends (on stderr, not with --json).
    let progress = |round: usize, r: &Record| {
        if !args.json {
            eprintln!(
                "  round {}/{} {:>7} {} {:>5}B {:>3} VRs (+{} idle) {:>5} slots {:>7} routes: {:>7.2} Mpps",
                round + 1,
                args.repeat,
                format!("{:?}", r.mode).to_lowercase(),
                r.family.name(),
                r.frame_bytes,
                r.vrs,
                r.idle_vrs,
                r.pool_slots,
                r.routes,
                r.mpps
            );
        }
    };
    let points = points(args, &tables);
    let _pages = pages::reserve(args.hugepages, &points)?;
    // Rounds: each round runs every point once, in turn, forwards in even
    // rounds and backwards in odd ones. The machines here are shared and
    // their speed drifts for seconds at a time; a point's runs spread over
    // the whole bench, and two points compared (1 VR against 10) are
    // measured seconds apart in every round, so a slow spell weighs on
    // both instead of on one point's every run.
    let mut runs: Vec<Vec<Record>> = points.iter().map(|_| Vec::new()).collect();
    for round in 0..args.repeat {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..points.len()).collect()
        } else {
            (0..points.len()).rev().collect()
        };
        for i in order {
            let p = &points[i];
            let r = match p.mode {
                Mode::Syscall => run_syscall(args, p)?,
                _ => run_shm_or_inproc(args, p)?,
            };
            progress(round, &r);
            runs[i].push(r);
        }
    }
    results.extend(runs.iter().map(|r| AnyRecord::Fwd(median_run(r.clone()))));
    if !args.no_idle {
        // The idle probes are IPv4 frames.
        let two;
        let table = match tables.iter().find(|t| t.family == Family::Ipv4) {
            Some(t) => t,
            None => {
                two = Table::load("2")?;
                &two
            }
        };
        for &n in &args.idle_vrs {
            results.push(AnyRecord::Idle(run_idle(args, table, n, 100)?));
        }
    }
    if args.json {
        let report = Report {
            bench: "memory",
            machine: Machine::this(),
            results: &results,
            ratios: table::all_scale_ratios(&results, &runs),
            family_ratios: table::family_ratios(&results, &runs),
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&results, &runs);
    }
    Ok(())
}
