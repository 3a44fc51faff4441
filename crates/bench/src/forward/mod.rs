//! `vrhost bench forward`: forwarding on real interfaces, vrhost against
//! the Linux kernel, in the same run on the same topology.
//!
//! Topology (namespaces `vrhb-*`, veth links, offloads off):
//!
//! ```text
//!  gen eth0 10.1.0.2 ── p0 [node] p1 ── eth0 10.1.1.2 sink
//! ```
//!
//! The node forwards with the kernel (`ip_forward`, addresses on p0/p1,
//! RPS steering the forwarding to the forwarder's core: the kernel at its
//! best, see BENCHMARKING.md) or with vrhost (no addresses, `ip_forward`
//! off, one router VR on ports of the driver under test). MACs and
//! neighbours are static, so every forwarder sees the same frames.
//! trafgen (netsniff-ng) on the generator's core sends UDP to the discard
//! port, paced by a tbf qdisc at fractions of the generator's own maximum
//! (measured into an XDP drop on p0); the sink drops them in XDP
//! (`ebpf/xdp_sink.c`) and counts them on its interface. Offered = the
//! generator's tx (+ tx drops), forwarded = the sink's rx, over a window
//! after a warm-up; CPU = busy time of the forwarder's core per forwarded
//! frame (from /proc/stat). Then, without load: ping RTT (average, 99th
//! percentile) and iperf3 TCP.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::{BenchError, Context, Result, bail};
use serde::Serialize;
use vrhost_lab::{Lab, Netns};

use crate::machine::Machine;
use vrhost_client::Client;

mod node;
mod table;

use node::{setup_node, xdp_sink_obj};
use table::print_table;

const GEN_MAC: &str = "02:00:00:00:00:10";
const P0_MAC: &str = "02:00:00:00:01:01";
const P1_MAC: &str = "02:00:00:00:02:01";
const SINK_MAC: &str = "02:00:00:00:00:20";

const LAB: &str = r#"
prefix = "vrhb"
[[hosts]]
name = "gen"
routes = ["default via 10.1.0.1"]
neighbours = [{ ip = "10.1.0.1", mac = "02:00:00:00:01:01", dev = "eth0" }]
[[hosts]]
name = "node"
[[hosts]]
name = "sink"
routes = ["default via 10.1.1.1"]
neighbours = [{ ip = "10.1.1.1", mac = "02:00:00:00:02:01", dev = "eth0" }]
[[links]]
a = { host = "gen", iface = "eth0", mac = "02:00:00:00:00:10", addrs = ["10.1.0.2/24"] }
b = { host = "node", iface = "p0", mac = "02:00:00:00:01:01" }
[[links]]
a = { host = "node", iface = "p1", mac = "02:00:00:00:02:01" }
b = { host = "sink", iface = "eth0", mac = "02:00:00:00:00:20", addrs = ["10.1.1.2/24"] }
"#;

/// Options of `vrhost bench forward`.
#[derive(Debug, Clone, clap::Args)]
pub struct ForwardArgs {
    /// Forwarders: kernel, af_xdp, af_packet, socket.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "kernel,af_xdp,af_packet,socket"
    )]
    pub forwarders: Vec<String>,
    /// Frame sizes on the wire, bytes (with FCS).
    #[arg(long, value_delimiter = ',', default_value = "64")]
    pub frame_bytes: Vec<usize>,
    /// Offered loads as fractions of the generator's maximum (1 = unpaced).
    #[arg(long, value_delimiter = ',', default_value = "0.25,0.5,0.75,0.9,1")]
    pub loads: Vec<f64>,
    /// Route tables: `2` (two connected routes, one destination) or a
    /// route file (full table, random class-C destinations). Repeatable.
    #[arg(long, default_value = "2")]
    pub table: Vec<String>,
    /// Measurement window per point, seconds.
    #[arg(long, default_value_t = 2.0)]
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
    /// Core of the VR process (default: not pinned; the scheduler places
    /// it, which on two cores beat pinning it beside the host worker).
    #[arg(long)]
    pub vr_cpu: Option<usize>,
    /// vrhost: the VR's pool slots. It must hold what arrives while the
    /// VR waits for its core (up to a 4 ms tick behind the generator):
    /// 4,096 lost 0.1-0.3% at 0.5-0.9 x the generator's rate here.
    #[arg(long, default_value_t = 16384)]
    pub slots: u32,
    /// vrhost `af_xdp` ports: descriptors per socket ring. The fill ring
    /// must outlast a stall of the host worker (the VR preempting it, when
    /// the scheduler puts it there): 2,048 lost up to 0.3%.
    #[arg(long, default_value_t = 8192)]
    pub xdp_ring: u32,
    /// vrhost `af_xdp` ports: UMEM frames per queue (half for receiving).
    #[arg(long, default_value_t = 16384)]
    pub xdp_frames: u32,
    /// vrhost: `[host.poll] busy_poll_us`, how long the worker (and a VR
    /// with a core of its own, `--vr-cpu`) polls after its last frame
    /// before it sleeps (0: the default back-off).
    #[arg(long, default_value_t = 0)]
    pub busy_poll_us: u32,
    /// Steer the end hosts' receive processing (gen's and sink's `eth0`,
    /// with RPS) to this CPU, for every forwarder: on veth a frame is
    /// received on the CPU that sent it, so without it the sink's TCP
    /// stack runs on the forwarder's core.
    #[arg(long)]
    pub endpoint_rps_cpu: Option<usize>,
    /// vrhost: run the node's veth NAPI polls (p0 and p1) in kernel
    /// threads pinned to `--fwd-cpu`, so the XDP program and the copies
    /// into the AF_XDP sockets leave the sending end host's core.
    #[arg(long)]
    pub threaded_napi: bool,
    /// Pings per RTT measurement (0: skip).
    #[arg(long, default_value_t = 40)]
    pub pings: u32,
    /// Seconds between pings.
    #[arg(long, default_value_t = 0.05)]
    pub ping_interval: f64,
    /// Seconds of iperf3 TCP (0: skip).
    #[arg(long, default_value_t = 3)]
    pub tcp_seconds: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write a PNG plot of forwarded vs offered rate (scripts/plot-forward,
    /// run from the repository root).
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// kernel | af_xdp | af_packet | socket | generator.
    pub forwarder: String,
    /// Frame size on the wire.
    pub frame_bytes: usize,
    /// Routes in the forwarder's table.
    pub routes: usize,
    /// Offered load setting (fraction of the generator's maximum).
    pub load: f64,
    /// Frames/s the generator put on the wire.
    pub offered_pps: f64,
    /// Frames/s that reached the sink.
    pub forwarded_pps: f64,
    /// Lost share, percent.
    pub loss_pct: f64,
    /// Ping RTT through the forwarder without load (µs), on the first point.
    pub rtt_us_avg: Option<f64>,
    /// 99th percentile of those RTTs (µs).
    pub rtt_us_p99: Option<f64>,
    /// iperf3 TCP through the forwarder (Gbit/s), on the first point.
    pub tcp_gbps: Option<f64>,
    /// Busy time of the forwarder's core per forwarded frame (ns).
    pub cpu_ns_per_pkt: Option<f64>,
    /// Where the lost frames were counted, frames/s over the window
    /// (flattened: `lost_to_node_pps`, ...).
    #[serde(flatten)]
    pub lost: Lost,
}

/// Where frames were lost, frames/s over a window, from the counters of
/// each hop (a hop that does not apply reads 0).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Lost {
    /// The generator's veth could not queue the frame to the node's `p0`
    /// (its receive queue, served by NAPI, was full): `tx_dropped` of the
    /// generator's `eth0`.
    #[serde(rename = "lost_to_node_pps")]
    pub to_node_pps: f64,
    /// Dropped on the node's receive side: `rx_dropped` of `p0` (the
    /// kernel's drops, and XDP drops on the veth), plus vrhost's port
    /// receive drops (an AF_XDP or packet ring full) and its drops before
    /// any VR.
    #[serde(rename = "lost_node_in_pps")]
    pub node_in_pps: f64,
    /// Dropped by the VR (no route, bad header, ...).
    #[serde(rename = "lost_vr_pps")]
    pub vr_pps: f64,
    /// Not sent towards the sink: vrhost's port send drops, and
    /// `tx_dropped` of the node's `p1` (the sink's receive queue full).
    #[serde(rename = "lost_node_out_pps")]
    pub node_out_pps: f64,
}

#[derive(Serialize)]
struct Report<'a> {
    bench: &'static str,
    machine: Machine,
    results: &'a [Record],
}

/// The routes of a table, as (prefix, len).
struct Table {
    file: Option<PathBuf>,
    routes: Vec<(u32, u8)>,
}

impl Table {
    fn load(spec: &str) -> Result<Self> {
        if spec == "2" {
            return Ok(Self {
                file: None,
                routes: vec![(0x0a01_0000, 24), (0x0a01_0100, 24)],
            });
        }
        let path = PathBuf::from(spec);
        let set = vrhost_fib::import::read_routes(&path, &Default::default())
            .with_context(|| format!("route table {spec}"))?;
        let routes: Vec<(u32, u8)> = set.ipv4().map(|r| (r.prefix, r.len)).collect();
        if routes.is_empty() {
            bail!("{spec}: no IPv4 routes");
        }
        Ok(Self {
            file: Some(path.canonicalize()?),
            routes,
        })
    }

    fn full(&self) -> bool {
        self.file.is_some()
    }

    /// Routes the forwarder holds: the table, plus (full tables) the two
    /// connected prefixes and a default route.
    fn len(&self) -> usize {
        if self.full() {
            self.routes.len() + 3
        } else {
            self.routes.len()
        }
    }
}

/// Counters read from sysfs inside a namespace.
fn counter(ns: &Netns, dev: &str, what: &str) -> Result<u64> {
    Ok(ns
        .exec("cat", &[&format!("/sys/class/net/{dev}/statistics/{what}")])?
        .trim()
        .parse()?)
}

/// Busy nanoseconds of `cpu` so far (all but idle and iowait).
fn cpu_busy_ns(cpu: usize) -> Result<u64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let key = format!("cpu{cpu} ");
    let line = stat
        .lines()
        .find(|l| l.starts_with(&key))
        .with_context(|| format!("no {key} in /proc/stat"))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    // USER_HZ is 100 on Linux.
    Ok((total - idle) * 10_000_000)
}

/// The trafgen config: UDP to port 9, 10.1.0.2 -> 10.1.1.2, or (full
/// table) to random addresses, one template per first octet 1..=223 but
/// 10 and 127, with the other three octets random per frame.
fn trafgen_conf(frame_bytes: usize, random_dst: bool) -> String {
    let ip_len = frame_bytes - 4 - 14;
    let udp_len = ip_len - 20;
    let payload = udp_len - 8;
    let mac = |m: &str| {
        m.split(':')
            .map(|b| format!("0x{b}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let one = |dst: &str| {
        format!(
            "{{ {}, {}, 0x08, 0x00,\n  0x45, 0x00, const16({ip_len}), const16(0), 0x40, 0x00, 64, 17, csumip(14, 33),\n  10, 1, 0, 2, {dst},\n  const16(4000), const16(9), const16({udp_len}), const16(0),\n  fill(0x00, {payload}) }}\n",
            mac(P0_MAC),
            mac(GEN_MAC)
        )
    };
    if random_dst {
        (1..=223u8)
            .filter(|o| *o != 10 && *o != 127)
            .map(|o| one(&format!("{o}, drnd(3)")))
            .collect()
    } else {
        one("10, 1, 1, 2")
    }
}

/// A running trafgen, stopped on drop.
struct Trafgen(Child);

impl Trafgen {
    fn start(lab: &Lab, conf: &Path, cpu: usize) -> Result<Self> {
        use std::os::unix::process::CommandExt;
        let child = lab
            .ns("gen")
            .command("taskset")
            // Its own process group: trafgen forks a sender per CPU, which
            // outlives a signal sent to the parent alone.
            .process_group(0)
            .args([
                "-c",
                &cpu.to_string(),
                "trafgen",
                "--dev",
                "eth0",
                "--cpus",
                "1",
                "-q",
                "--conf",
            ])
            .arg(conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("start trafgen")?;
        Ok(Self(child))
    }

    fn check_running(&mut self) -> Result<()> {
        if let Some(st) = self.0.try_wait()? {
            let mut err = String::new();
            if let Some(mut e) = self.0.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            bail!("trafgen exited ({st}): {}", err.trim());
        }
        Ok(())
    }
}

impl Drop for Trafgen {
    fn drop(&mut self) {
        // The whole group (parent and its forked senders), at once: the
        // senders do not stop on SIGINT.
        let pid = rustix::process::Pid::from_child(&self.0);
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = self.0.wait();
    }
}

/// Pace the generator's interface at `pps` frames/s (None: unpaced).
fn pace(lab: &Lab, pps: Option<f64>, frame_bytes: usize) -> Result<()> {
    let gen_ns = lab.ns("gen");
    let _ = gen_ns.exec("tc", &["qdisc", "del", "dev", "eth0", "root"]);
    if let Some(pps) = pps {
        let bytes = (frame_bytes - 4) as f64;
        let rate = format!("{}bit", (pps * bytes * 8.0) as u64);
        let burst = format!("{}", (bytes as usize) * 32);
        let limit = format!("{}", (bytes as usize) * 256);
        gen_ns.exec(
            "tc",
            &[
                "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", &rate, "burst", &burst,
                "limit", &limit,
            ],
        )?;
    }
    Ok(())
}

/// What one window measured.
struct Window {
    offered: f64,
    forwarded: f64,
    cpu_ns_per_pkt: Option<f64>,
    lost: Lost,
}

/// Loss counters at one instant (see [`Lost`]).
#[derive(Clone, Copy, Default)]
struct LossCounters {
    to_node: u64,
    node_in: u64,
    vr: u64,
    node_out: u64,
}

impl LossCounters {
    fn read(lab: &Lab, daemon: Option<&Client>) -> Result<Self> {
        let node = lab.ns("node");
        let mut c = Self {
            to_node: counter(&lab.ns("gen"), "eth0", "tx_dropped")?,
            node_in: counter(&node, "p0", "rx_dropped")?,
            vr: 0,
            node_out: counter(&node, "p1", "tx_dropped")?,
        };
        if let Some(api) = daemon {
            let s: serde_json::Value = api.get("/v1/stats")?.decode()?;
            let u = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
            let sum = |v: &serde_json::Value| v.as_object().map_or(0, |o| o.values().map(u).sum());
            c.node_in += sum(&s["host"]["ingress_drops"]);
            for p in s["ports"].as_array().into_iter().flatten() {
                c.node_in += u(&p["rx_dropped"]);
                c.node_out += u(&p["tx_dropped"]);
            }
            for v in s["vrs"].as_array().into_iter().flatten() {
                let st = &v["stats"];
                c.node_in += sum(&st["ingress_drops"]);
                c.vr += u(&st["vr_dropped"]);
                c.node_out += u(&st["port_dropped"]);
            }
        }
        Ok(c)
    }
}

/// Run trafgen at one load and count over a window at `count_ns:count_dev`.
fn window(
    args: &ForwardArgs,
    lab: &Lab,
    conf: &Path,
    count: (&str, &str),
    pps: Option<f64>,
    frame_bytes: usize,
    daemon: Option<&Client>,
) -> Result<Window> {
    pace(lab, pps, frame_bytes)?;
    let gen_ns = lab.ns("gen");
    let cns = lab.ns(count.0);
    let mut tg = Trafgen::start(lab, conf, args.gen_cpu)?;
    std::thread::sleep(Duration::from_secs_f64(args.warmup));
    tg.check_running()?;
    // Each counter is read by a short-lived process (the namespaces' sysfs
    // is not visible from here), so each gets its own timestamp.
    let snap = || -> Result<[(Instant, u64); 3]> {
        let off = counter(&gen_ns, "eth0", "tx_packets")? + counter(&gen_ns, "eth0", "tx_dropped")?;
        let t_off = Instant::now();
        let fwd = counter(&cns, count.1, "rx_packets")?;
        let t_fwd = Instant::now();
        Ok([
            (t_off, off),
            (t_fwd, fwd),
            (Instant::now(), cpu_busy_ns(args.fwd_cpu)?),
        ])
    };
    let la = LossCounters::read(lab, daemon)?;
    let a = snap()?;
    std::thread::sleep(Duration::from_secs_f64(args.seconds));
    let b = snap()?;
    let lb = LossCounters::read(lab, daemon)?;
    tg.check_running()?;
    drop(tg);
    pace(lab, None, frame_bytes)?;
    let rate = |i: usize| (b[i].1 - a[i].1) as f64 / (b[i].0 - a[i].0).as_secs_f64();
    let fwd = rate(1);
    let cpu = rate(2);
    // The loss counters are read just outside the rate window: per
    // second of the same span.
    let span = (b[2].0 - a[0].0).as_secs_f64();
    let per_s = |b: u64, a: u64| b.saturating_sub(a) as f64 / span;
    Ok(Window {
        offered: rate(0),
        forwarded: fwd,
        cpu_ns_per_pkt: (fwd > 0.0).then(|| cpu / fwd),
        lost: Lost {
            to_node_pps: per_s(lb.to_node, la.to_node),
            node_in_pps: per_s(lb.node_in, la.node_in),
            vr_pps: per_s(lb.vr, la.vr),
            node_out_pps: per_s(lb.node_out, la.node_out),
        },
    })
}

/// Ping RTTs from gen to sink through the forwarder: (average, p99) µs.
fn rtt(lab: &Lab, n: u32, interval: f64) -> Result<(f64, f64)> {
    let v = vrhost_lab::tools::ping_rtts(lab, "gen", "10.1.1.2", n, interval)
        .map_err(BenchError::Failed)?;
    let avg = v.iter().sum::<f64>() / v.len() as f64;
    let p99 = v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1];
    eprintln!(
        "ping: {} replies, min {:.0} median {:.0} avg {avg:.0} p99 {p99:.0} us",
        v.len(),
        v[0],
        v[v.len() / 2]
    );
    Ok((avg, p99))
}

/// Run the benchmark.
pub fn run(args: &ForwardArgs) -> Result<()> {
    for f in &args.forwarders {
        if !["kernel", "af_xdp", "af_packet", "socket"].contains(&f.as_str()) {
            bail!("--forwarders: unknown forwarder {f:?} (kernel, af_xdp, af_packet, socket)");
        }
    }
    for &b in &args.frame_bytes {
        if !(64..=1518).contains(&b) {
            bail!("--frame-bytes {b}: must be 64..=1518");
        }
    }
    if args.loads.iter().any(|l| !(*l > 0.0 && *l <= 1.0)) {
        bail!("--loads: fractions in (0, 1]");
    }
    let cpus = vrhost_host::cpu::cpus();
    if args.gen_cpu >= cpus || args.fwd_cpu >= cpus || args.gen_cpu == args.fwd_cpu {
        bail!("--gen-cpu and --fwd-cpu must be two different cores of the {cpus} here");
    }
    let tables = args
        .table
        .iter()
        .map(|t| Table::load(t))
        .collect::<Result<Vec<_>>>()?;
    let lab = Lab::parse(LAB, "bench forward")?;
    lab.down();
    lab.up()?;
    let dir = std::env::temp_dir().join(format!("vrhost-bench-forward-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = run_all(args, &lab, &tables, &dir);
    lab.down();
    let _ = std::fs::remove_dir_all(&dir);
    let records = result?;
    let report = Report {
        bench: "forward",
        machine: Machine::this(),
        results: &records,
    };
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(out) = &args.out {
        std::fs::write(out, &json)?;
    }
    if args.json {
        println!("{json}");
    } else {
        print_table(&records);
    }
    if let Some(png) = &args.plot {
        let json_path = match &args.out {
            Some(p) => p.clone(),
            None => {
                let p = png.with_extension("json");
                std::fs::write(&p, &json)?;
                p
            }
        };
        // Debian's python3, which has python3-matplotlib (scripts/install).
        let st = std::process::Command::new("scripts/plot-forward")
            .arg(&json_path)
            .arg(png)
            .status()
            .context("scripts/plot-forward (run from the repository root)")?;
        if !st.success() {
            bail!("plot failed ({st})");
        }
        eprintln!("plot: {}", png.display());
    }
    Ok(())
}

fn run_all(args: &ForwardArgs, lab: &Lab, tables: &[Table], dir: &Path) -> Result<Vec<Record>> {
    let sink_obj = xdp_sink_obj()?;
    let obj = sink_obj.display().to_string();
    let _cleanup = TempFile(sink_obj.clone());
    lab.ns("sink")
        .ip(&[
            "link", "set", "dev", "eth0", "xdp", "obj", &obj, "sec", "xdp",
        ])
        .context("attach the XDP sink")?;
    // trafgen's socket buffer comes from net.core.wmem_default, which is
    // not per namespace and which trafgen cannot raise from inside one:
    // with the default its TX_RING flush fails with EAGAIN under load.
    let _wmem = WmemDefault::raise(4 << 20)?;
    if let Some(c) = args.endpoint_rps_cpu {
        for host in ["gen", "sink"] {
            lab.ns(host)
                .exec(
                    "sh",
                    &[
                        "-c",
                        &format!(
                            "echo {:x} > /sys/class/net/eth0/queues/rx-0/rps_cpus",
                            1u64 << c
                        ),
                    ],
                )
                .with_context(|| format!("RPS on {host}'s eth0"))?;
        }
    }
    let mut out = Vec::new();
    for &fb in &args.frame_bytes {
        for table in tables {
            let conf = dir.join(format!("trafgen-{fb}-{}.cfg", table.full()));
            std::fs::write(&conf, trafgen_conf(fb, table.full()))?;
            // The generator's own maximum: into an XDP drop on p0.
            let node = lab.ns("node");
            node.ip(&["link", "set", "dev", "p0", "xdp", "obj", &obj, "sec", "xdp"])?;
            let g = window(args, lab, &conf, ("node", "p0"), None, fb, None);
            node.ip(&["link", "set", "dev", "p0", "xdp", "off"])?;
            let g = g?;
            eprintln!("generator {fb} B: {:.0} pps", g.offered);
            out.push(Record {
                forwarder: "generator".into(),
                frame_bytes: fb,
                routes: 0,
                load: 1.0,
                offered_pps: g.offered,
                forwarded_pps: g.forwarded,
                loss_pct: loss(g.offered, g.forwarded),
                rtt_us_avg: None,
                rtt_us_p99: None,
                tcp_gbps: None,
                cpu_ns_per_pkt: None,
                lost: g.lost,
            });
            for fwd in &args.forwarders {
                let daemon = setup_node(args, lab, fwd, table, dir)
                    .with_context(|| format!("set up the {fwd} forwarder"))?;
                let (rtt_avg, rtt_p99) = if args.pings > 0 {
                    match rtt(lab, args.pings, args.ping_interval) {
                        Ok((a, p)) => (Some(a), Some(p)),
                        Err(e) => {
                            eprintln!("{fwd}: ping: {e:#}");
                            (None, None)
                        }
                    }
                } else {
                    (None, None)
                };
                let tcp = if args.tcp_seconds > 0 {
                    vrhost_lab::tools::iperf3(lab, "sink", "gen", "10.1.1.2", args.tcp_seconds)
                        .map_err(|e| eprintln!("{fwd}: iperf3: {e}"))
                        .ok()
                } else {
                    None
                };
                for (i, &load) in args.loads.iter().enumerate() {
                    let pps = (load < 1.0).then_some(load * g.offered);
                    let api = daemon.as_ref().map(|(_, c)| c);
                    let w = window(args, lab, &conf, ("sink", "eth0"), pps, fb, api)
                        .with_context(|| format!("{fwd} at load {load}"))?;
                    eprintln!(
                        "{fwd:>9} {fb} B {} routes load {load:.2}: offered {:.0} forwarded {:.0} pps",
                        table.len(),
                        w.offered,
                        w.forwarded
                    );
                    out.push(Record {
                        forwarder: fwd.clone(),
                        frame_bytes: fb,
                        routes: table.len(),
                        load,
                        offered_pps: w.offered,
                        forwarded_pps: w.forwarded,
                        loss_pct: loss(w.offered, w.forwarded),
                        rtt_us_avg: if i == 0 { rtt_avg } else { None },
                        rtt_us_p99: if i == 0 { rtt_p99 } else { None },
                        tcp_gbps: if i == 0 { tcp } else { None },
                        cpu_ns_per_pkt: w.cpu_ns_per_pkt,
                        lost: w.lost,
                    });
                }
                if let Some((d, _)) = daemon {
                    d.stop()?;
                }
            }
        }
    }
    Ok(out)
}

fn loss(offered: f64, forwarded: f64) -> f64 {
    if offered <= 0.0 {
        0.0
    } else {
        ((1.0 - forwarded / offered) * 100.0).max(0.0)
    }
}

/// Raises `net.core.wmem_default` (host-wide) and restores it on drop.
struct WmemDefault(String);

impl WmemDefault {
    const PATH: &str = "/proc/sys/net/core/wmem_default";

    fn raise(bytes: u64) -> Result<Self> {
        let old = std::fs::read_to_string(Self::PATH)?.trim().to_string();
        std::fs::write(Self::PATH, bytes.to_string()).context("raise net.core.wmem_default")?;
        Ok(Self(old))
    }
}

impl Drop for WmemDefault {
    fn drop(&mut self) {
        let _ = std::fs::write(Self::PATH, &self.0);
    }
}

/// Removes a temporary file on drop.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
