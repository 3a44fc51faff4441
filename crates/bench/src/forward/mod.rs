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
//! RPS steering the forwarding to the forwarder's core, or without RPS:
//! `kernel_norps`; the best of them is the kernel at its best, see
//! BENCHMARKING.md and `best.rs`) or with vrhost (no addresses, `ip_forward`
//! off, one router VR on ports of the driver under test; `fast`: the fast
//! path on, the VR on it, `af_xdp` ports as its slow path; `tap`: a tap
//! VR on `af_xdp` ports, the kernel of its namespace forwarding between
//! its TAPs with the same static neighbours as the kernel forwarder). MACs and
//! neighbours are static, so every forwarder sees the same frames.
//! The generator (`--generator`) on the generator's core sends UDP to the
//! discard port at fractions of its own maximum (measured into an XDP
//! drop on p0): trafgen (netsniff-ng, the default), paced by a tbf qdisc,
//! or the XDP live-frames generator (`vrhost_fast::LiveGen`; `live-split`
//! hands its frames to the forwarder's core), paced by
//! its own token bucket, with GRO on at p0 (a veth takes xdp_frames only
//! with NAPI: an XDP program or GRO). The sink drops them in XDP
//! (`ebpf/xdp_sink.c`) and counts them on its interface. Offered = the
//! generator's tx (+ tx drops), forwarded = the sink's rx, over a window
//! after a warm-up; CPU = busy time of the forwarder's core per forwarded
//! frame (from /proc/stat), and for vrhost its worker's and VRs' own CPU
//! time and sleeps per frame (from its API). Then, without load: ping RTT
//! (average, 99th percentile), the 99th percentile of pings a second apart
//! (each the first frame after an idle second) and iperf3 TCP, with p0's
//! GRO off whatever the generator.
//!
//! What `bench fastpath` reuses is `pub(crate)`: `run_points` (the
//! generator alone, then each forwarder), the generators
//! (`generator`), the windows and counters (`measure`), the node's
//! setup (`node`).

use std::path::{Path, PathBuf};

use crate::{Context, Result, bail};
use serde::Serialize;
use vrhost_lab::Lab;

use crate::machine::Machine;

mod args;
pub(crate) mod best;
pub(crate) mod generator;
pub(crate) mod measure;
pub(crate) mod node;
pub(crate) mod table;
pub(crate) mod tcp;

pub use args::ForwardArgs;
pub use generator::GeneratorKind;
use generator::{Generator, LiveOptions, WmemDefault};
use measure::{Timing, WindowSpec, rtt, window};
use node::{setup_node, xdp_sink_obj};

use table::print_table;
pub use tcp::{TcpFigures, TcpGro, TcpPlacement, TcpQdisc};

const GEN_MAC: &str = "02:00:00:00:00:10";
const P0_MAC: &str = "02:00:00:00:01:01";
const P1_MAC: &str = "02:00:00:00:02:01";
const SINK_MAC: &str = "02:00:00:00:00:20";
/// The IPv6 addresses: the generator, the node's p0 and p1, the sink.
const GEN6: &str = "2001:db8:1::2";
const P0_6: &str = "2001:db8:1::1";
const P1_6: &str = "2001:db8:2::1";
const SINK6: &str = "2001:db8:2::2";

pub use crate::memory::Family;

/// The sink's address in `family` (ping, iperf3).
pub(crate) fn sink_addr(family: Family) -> &'static str {
    match family {
        Family::Ipv4 => "10.1.1.2",
        Family::Ipv6 => SINK6,
    }
}

/// The frame size sent for `--frame-bytes` `fb` in `family`: an IPv6
/// UDP frame has at least 66 bytes (with FCS).
pub(crate) fn frame_bytes_of(family: Family, fb: usize) -> usize {
    match family {
        Family::Ipv4 => fb,
        Family::Ipv6 => fb.max(66),
    }
}

pub(crate) const LAB: &str = r#"
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

/// One measured point.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Record {
    /// The generator: trafgen | live.
    pub generator: &'static str,
    /// The frames' address family: ipv4 | ipv6.
    pub family: &'static str,
    /// kernel | af_xdp | af_packet | socket | tap | generator (| fast in
    /// `bench fastpath`).
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
    /// The live generator's own count of frames sent (XDP_TX), per
    /// second; `offered_pps` is what the veth took of them.
    pub gen_sent_pps: Option<f64>,
    /// Ping RTT through the forwarder without load (µs), on the first point.
    pub rtt_us_avg: Option<f64>,
    /// 99th percentile of those RTTs (µs).
    pub rtt_us_p99: Option<f64>,
    /// 99th percentile of the RTTs of pings a second apart (µs), each the
    /// first frame through the forwarder after an idle second, on the
    /// first point.
    pub rtt_idle_us_p99: Option<f64>,
    /// iperf3 TCP through the forwarder (Gbit/s), on the first point.
    pub tcp_gbps: Option<f64>,
    /// What bounds that TCP figure (flattened: `tcp_retransmits`, ...),
    /// on the first point.
    /// Boxed: most records have none.
    #[serde(flatten)]
    pub tcp: Box<TcpFigures>,
    /// Busy time of the forwarder's core per forwarded frame (ns).
    pub cpu_ns_per_pkt: Option<f64>,
    /// Copies of a frame's bytes on the node from p0 to p1, counted from
    /// the code path the forwarder takes ([`copies_per_frame`]); `None`
    /// for the generator alone.
    pub copies_per_frame: Option<u32>,
    /// vrhost: CPU time of its worker thread and VR processes per
    /// forwarded frame (ns), wherever they ran: unlike `cpu_ns_per_pkt`,
    /// not charged with what else ran on the core.
    pub vrhost_cpu_ns_per_pkt: Option<f64>,
    /// vrhost: sleeps and naps of its worker and VRs per forwarded frame
    /// (each ends in a wakeup).
    pub wakeups_per_pkt: Option<f64>,
    /// vrhost: frames a transmit system call of the out port (p1)
    /// carried over the window (`tx_packets / tx_runs` of its stats:
    /// `BPF_PROG_RUN` calls with `tx = "xdp"`, kicks with the socket);
    /// `None` where it made none or counts none.
    pub tx_frames_per_run: Option<f64>,
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
    /// TCP: each forwarder's best against the kernel's best.
    tcp_best: Vec<best::TcpBest>,
}

/// The routes of a table, as (prefix, len).
pub(crate) struct Table {
    pub(crate) file: Option<PathBuf>,
    pub(crate) routes: Vec<(u32, u8)>,
}

impl Table {
    pub(crate) fn load(spec: &str) -> Result<Self> {
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

    pub(crate) fn full(&self) -> bool {
        self.file.is_some()
    }

    /// Routes the forwarder holds: the table, plus (full tables) the two
    /// connected prefixes and a default route.
    pub(crate) fn len(&self) -> usize {
        if self.full() {
            self.routes.len() + 3
        } else {
            self.routes.len()
        }
    }
}

/// Run the benchmark.
pub fn run(args: &ForwardArgs) -> Result<()> {
    for f in &args.forwarders {
        if copies_per_frame(f, args).is_none() {
            bail!(
                "--forwarders: unknown forwarder {f:?} (kernel, kernel_norps, af_xdp, af_xdp_dedicated, af_xdp_txlive, af_xdp_dedicated_txlive, af_packet, socket, fast, minimal, tap)"
            );
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
    if !(args.tcp_cpus.is_empty()
        || args.tcp_cpus.len() == 2 && args.tcp_cpus.iter().all(|&c| c < cpus))
    {
        bail!("--tcp-cpus: SERVER,CLIENT, two of the {cpus} cores here");
    }
    let tables = args
        .table
        .iter()
        .map(|t| Table::load(t))
        .collect::<Result<Vec<_>>>()?;
    if args.family.contains(&Family::Ipv6) {
        if args.generator.iter().any(|g| g.is_live()) {
            bail!("--family ipv6: the live generator sends IPv4 only (use --generator trafgen)");
        }
        if args.forwarders.iter().any(|f| f == "fast") {
            bail!("--family ipv6: the fast path forwards IPv4 only (leave out --forwarders fast)");
        }
        if tables.iter().any(Table::full) {
            bail!("--family ipv6: route files are IPv4 here (use --table 2)");
        }
    }
    let lab = Lab::parse(LAB, "bench forward")?;
    // Fixed namespace names: a second run waits for this one.
    let _claim = lab.claim()?;
    lab.down();
    lab.up()?;
    if args.family.contains(&Family::Ipv6) {
        end_hosts_ipv6(&lab)?;
    }
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
        tcp_best: best::tcp_best(&records),
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
        crate::report::plot("scripts/plot-forward", &json, args.out.as_deref(), png)?;
    }
    Ok(())
}

fn run_all(args: &ForwardArgs, lab: &Lab, tables: &[Table], dir: &Path) -> Result<Vec<Record>> {
    let sink_obj = xdp_sink_obj()?;
    let obj = sink_obj.display().to_string();
    let _cleanup = TempFile(sink_obj.clone());
    attach_xdp_sink(lab, &obj)?;
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
    for (&family, &generator) in args
        .family
        .iter()
        .flat_map(|f| args.generator.iter().map(move |g| (f, g)))
    {
        let plan = Plan {
            forwarders: &args.forwarders,
            generator,
            loads: &args.loads,
            live: LiveOptions {
                flows: 1,
                repeat: args.live_repeat,
                fwd_cpu: args.fwd_cpu,
                batch: args.live_batch,
            },
            drop_obj: &obj,
            family,
        };
        for &fb in &args.frame_bytes {
            for table in tables {
                let fb = frame_bytes_of(family, fb);
                out.extend(run_points(args, lab, &plan, fb, table, dir)?);
            }
        }
    }
    Ok(out)
}

/// Attach the XDP drop `obj` ([`xdp_sink_obj`]'s file) to the sink's
/// `eth0` by netlink (the TCP test takes it off and puts it back).
pub(crate) fn attach_xdp_sink(lab: &Lab, obj: &str) -> Result<()> {
    lab.ns("sink")
        .ip(&[
            "link", "set", "dev", "eth0", "xdp", "obj", obj, "sec", "xdp",
        ])
        .context("attach the XDP sink to the sink's eth0")?;
    Ok(())
}

/// IPv6 on the end hosts (no DAD: usable at once): addresses, the node as
/// their default gateway, its MACs as permanent neighbours, as for IPv4.
fn end_hosts_ipv6(lab: &Lab) -> Result<()> {
    for (host, addr, gw, mac) in [("gen", GEN6, P0_6, P0_MAC), ("sink", SINK6, P1_6, P1_MAC)] {
        let ns = lab.ns(host);
        ns.ip(&[
            "-6",
            "addr",
            "add",
            &format!("{addr}/64"),
            "dev",
            "eth0",
            "nodad",
        ])?;
        ns.ip(&["-6", "route", "add", "default", "via", gw])?;
        ns.ip(&[
            "-6",
            "neigh",
            "replace",
            gw,
            "lladdr",
            mac,
            "dev",
            "eth0",
            "nud",
            "permanent",
        ])?;
    }
    Ok(())
}

/// What `run_points` measures.
pub(crate) struct Plan<'a> {
    /// Forwarders, in order (the generator alone is always measured first).
    pub forwarders: &'a [String],
    pub generator: GeneratorKind,
    /// Offered loads, fractions of the generator's maximum.
    pub loads: &'a [f64],
    pub live: LiveOptions,
    /// The XDP drop object (a file) the generator alone is measured into.
    pub drop_obj: &'a str,
    /// The frames' address family.
    pub family: Family,
}

/// The node's `p0` gets GRO for the live generator (a veth takes
/// xdp_frames only with NAPI; with an XDP program on p0 it has NAPI
/// anyway), and loses it for trafgen (its skbs then go as before).
pub(crate) fn p0_gro(lab: &Lab, kind: GeneratorKind) -> Result<()> {
    let on = if kind.is_live() { "on" } else { "off" };
    lab.ns("node")
        .exec("ethtool", &["-K", "p0", "gro", on])
        .with_context(|| format!("GRO {on} on the node's p0"))?;
    Ok(())
}

/// The points of one frame size and table: the generator alone into an
/// XDP drop on p0, then each forwarder at each load.
pub(crate) fn run_points(
    args: &ForwardArgs,
    lab: &Lab,
    plan: &Plan<'_>,
    fb: usize,
    table: &Table,
    dir: &Path,
) -> Result<Vec<Record>> {
    p0_gro(lab, plan.generator)?;
    let generator = Generator::new(
        plan.generator,
        dir,
        fb,
        table.full(),
        plan.live,
        plan.family,
    )?;
    let timing = Timing {
        warmup: args.warmup,
        seconds: args.seconds,
        gen_cpu: args.gen_cpu,
        fwd_cpu: args.fwd_cpu,
    };
    // The generator's own maximum: into an XDP drop on p0.
    let node = lab.ns("node");
    let obj = plan.drop_obj;
    node.ip(&["link", "set", "dev", "p0", "xdp", "obj", obj, "sec", "xdp"])?;
    let spec = WindowSpec {
        generator: &generator,
        count: ("node", "p0"),
        pps: None,
        frame_bytes: fb,
        daemon: None,
    };
    let g = window(lab, timing, &spec);
    node.ip(&["link", "set", "dev", "p0", "xdp", "off"])?;
    let g = g?;
    let gname = plan.generator.name();
    eprintln!("generator {gname} {fb} B: {:.0} pps", g.offered);
    let mut out = vec![Record {
        generator: gname,
        family: plan.family.name(),
        forwarder: "generator".into(),
        frame_bytes: fb,
        routes: 0,
        load: 1.0,
        offered_pps: g.offered,
        forwarded_pps: g.forwarded,
        loss_pct: loss(g.offered, g.forwarded),
        gen_sent_pps: g.gen_sent,
        rtt_us_avg: None,
        rtt_us_p99: None,
        rtt_idle_us_p99: None,
        tcp_gbps: None,
        tcp: Box::default(),
        cpu_ns_per_pkt: None,
        copies_per_frame: None,
        vrhost_cpu_ns_per_pkt: None,
        wakeups_per_pkt: None,
        tx_frames_per_run: None,
        lost: g.lost,
    }];
    for fwd in plan.forwarders {
        let at = Point {
            fwd,
            fb,
            table,
            max: g.offered,
        };
        out.extend(forwarder_points(args, lab, plan, &generator, &at, dir)?);
    }
    Ok(out)
}

/// One forwarder's points.
struct Point<'a> {
    fwd: &'a str,
    fb: usize,
    table: &'a Table,
    /// The generator's own maximum (frames/s).
    max: f64,
}

fn forwarder_points(
    args: &ForwardArgs,
    lab: &Lab,
    plan: &Plan<'_>,
    generator: &Generator,
    at: &Point<'_>,
    dir: &Path,
) -> Result<Vec<Record>> {
    let fwd = at.fwd;
    let daemon = setup_node(args, lab, fwd, at.table, dir)
        .with_context(|| format!("set up the {fwd} forwarder"))?;
    let _minimal = node::minimal_router(lab, fwd)?;
    // RTT and TCP without GRO on p0, whatever the generator: with it the
    // kernel would forward coalesced TCP segments, not like with like.
    p0_gro(lab, GeneratorKind::Trafgen)?;
    let ping = |n: u32, interval: f64| match rtt(
        lab,
        sink_addr(plan.family),
        n,
        interval,
        args.ping_cpu,
    ) {
        Ok((a, p)) => (Some(a), Some(p)),
        Err(e) => {
            eprintln!("{fwd}: ping: {e:#}");
            (None, None)
        }
    };
    let (rtt_avg, rtt_p99) = match args.pings {
        0 => (None, None),
        n => ping(n, args.ping_interval),
    };
    let rtt_idle_p99 = match args.idle_pings {
        0 => None,
        n => {
            // An idle second before the first too.
            std::thread::sleep(std::time::Duration::from_secs(1));
            ping(n, 1.0).1
        }
    };
    let api = daemon.as_ref().map(|(_, c)| c);
    let (tcp, tcp_figures) = if args.tcp_seconds > 0 {
        match tcp::tcp_point(args, lab, sink_addr(plan.family), (fwd, api)) {
            Ok((gbps, f)) => (Some(gbps), f),
            Err(e) => {
                eprintln!("{fwd}: iperf3: {e:#}");
                (None, TcpFigures::default())
            }
        }
    } else {
        (None, TcpFigures::default())
    };
    p0_gro(lab, plan.generator)?;
    let timing = Timing {
        warmup: args.warmup,
        seconds: args.seconds,
        gen_cpu: args.gen_cpu,
        fwd_cpu: args.fwd_cpu,
    };
    let mut out = Vec::new();
    for (i, &load) in plan.loads.iter().enumerate() {
        let spec = WindowSpec {
            generator,
            count: ("sink", "eth0"),
            pps: (load < 1.0).then_some(load * at.max),
            frame_bytes: at.fb,
            daemon: api,
        };
        let w = window(lab, timing, &spec).with_context(|| format!("{fwd} at load {load}"))?;
        eprintln!(
            "{fwd:>9} {} {} B {} routes load {load:.2}: offered {:.0} forwarded {:.0} pps",
            plan.generator.name(),
            at.fb,
            at.table.len(),
            w.offered,
            w.forwarded
        );
        out.push(Record {
            generator: plan.generator.name(),
            family: plan.family.name(),
            forwarder: fwd.to_string(),
            frame_bytes: at.fb,
            routes: at.table.len(),
            load,
            offered_pps: w.offered,
            forwarded_pps: w.forwarded,
            loss_pct: loss(w.offered, w.forwarded),
            gen_sent_pps: w.gen_sent,
            rtt_us_avg: if i == 0 { rtt_avg } else { None },
            rtt_us_p99: if i == 0 { rtt_p99 } else { None },
            rtt_idle_us_p99: if i == 0 { rtt_idle_p99 } else { None },
            tcp_gbps: if i == 0 { tcp } else { None },
            tcp: if i == 0 {
                Box::new(tcp_figures.clone())
            } else {
                Box::default()
            },
            cpu_ns_per_pkt: w.cpu_ns_per_pkt,
            copies_per_frame: copies_per_frame(fwd, args),
            vrhost_cpu_ns_per_pkt: w.vrhost_cpu_ns_per_pkt,
            wakeups_per_pkt: w.wakeups_per_pkt,
            tx_frames_per_run: w.tx_frames_per_run,
            lost: w.lost,
        });
    }
    if let Some((d, _)) = daemon {
        d.stop()?;
    }
    Ok(out)
}

/// Copies of a frame's bytes on the node between p0 and p1 for forwarder
/// `fwd` under `args` (`None`: no such forwarder), counted from the code
/// each takes; a copy is a write of the frame's bytes somewhere else (by
/// the kernel or by vrhost), a descriptor or a page reference is not:
/// - `kernel`, `kernel_norps`, `fast`, `minimal`: 0 (the skb, or the
///   XDP frame redirected into p1, crosses by reference; `fast`'s slow
///   path is `af_xdp`'s);
/// - `socket`: 3 (`recvmsg` into the port's buffer, the worker into the
///   VR's slot, `send` into an skb);
/// - `af_packet`: 3 (the kernel into the rx ring, the worker into the
///   VR's slot, the worker into the tx ring; the kernel's skb takes the tx
///   ring's pages by reference);
/// - `af_xdp`, copy mode: 4 (the kernel into the UMEM, the worker into the
///   VR's slot, the worker into p1's UMEM, the kernel's generic xmit into
///   an skb);
/// - `af_xdp_txlive` (`ports[].tx = "xdp"`): 4 as well (the last two: the
///   worker into a slot of the port's BPF array, the XDP program into the
///   kernel's page; no skb);
/// - `af_xdp_dedicated`, p0 and p1 both dedicated to the VR on one UMEM
///   ([`node::dedicated_ports`]): 2 (the kernel into the VR's slot, the
///   generic xmit into an skb); p0 alone: 3 (the worker into p1's UMEM
///   besides);
/// - `af_xdp_dedicated_txlive`: 3 (the kernel into the VR's slot, the
///   worker into a slot of the port's BPF array, the XDP program into the
///   kernel's page; no skb), with p0 alone too (p1's array takes the
///   frame from the VR's slot);
/// - `tap`: 7 (the kernel into p0's UMEM, the worker into the VR's slot,
///   `write` into the TAP's skb; Linux forwards the skb; `read` from the
///   other TAP into the port's buffer, the worker into a slot, the worker
///   into p1's UMEM, the kernel into an skb).
pub fn copies_per_frame(fwd: &str, args: &ForwardArgs) -> Option<u32> {
    Some(match fwd {
        "kernel" | "kernel_norps" | "fast" | node::MINIMAL => 0,
        "af_xdp_dedicated" if node::dedicated_ports(args).0 == 2 => 2,
        "socket" | "af_packet" | "af_xdp_dedicated" | "af_xdp_dedicated_txlive" => 3,
        "af_xdp" | "af_xdp_txlive" => 4,
        "tap" => 7,
        _ => return None,
    })
}

pub(crate) fn loss(offered: f64, forwarded: f64) -> f64 {
    if offered <= 0.0 {
        0.0
    } else {
        ((1.0 - forwarded / offered) * 100.0).max(0.0)
    }
}

/// Removes a temporary file on drop.
pub(crate) struct TempFile(pub(crate) PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
