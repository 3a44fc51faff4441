//! `vrhost daemon --config FILE`: run the data path a config describes.
//!
//! The config is checked as a whole first (`--check` stops there); then the
//! ports are opened (inside `--netns NAME` if given), one region and one
//! process per VR are created, and the host worker runs on its core until
//! SIGINT or SIGTERM, printing per-VR counters every `--stats-secs`. On the
//! way out the VRs are stopped, the ports closed (an XDP program detached)
//! and the slot accounting of every VR checked.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use vrhost_host::config::{Config, Driver, Plan};
use vrhost_host::{Backend, VrCommand, VrPath, VrProcess, VrStats, Worker, cpu};
use vrhost_io::Port;
use vrhost_shm::{Region, RegionConfig};

/// Options of `vrhost daemon`.
#[derive(Debug, Clone, clap::Args)]
pub struct DaemonArgs {
    /// The config file (TOML).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Only check the config and print what it would build.
    #[arg(long)]
    pub check: bool,
    /// Run inside this network namespace (`ip netns` name).
    #[arg(long)]
    pub netns: Option<String>,
    /// Seconds between counter lines (0: none).
    #[arg(long, default_value_t = 1)]
    pub stats_secs: u64,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long)]
    pub seconds: Option<u64>,
}

/// Open a port with its driver, in the calling thread's namespace.
pub fn open_port(driver: Driver, iface: &str) -> Result<Box<dyn Port>> {
    let port: Box<dyn Port> = match driver {
        Driver::AfPacket => Box::new(vrhost_io::af_packet::AfPacketPort::open(
            iface,
            Default::default(),
        )?),
        Driver::Socket => Box::new(vrhost_io::socket::SocketPort::open(
            iface,
            Default::default(),
        )?),
        Driver::Tap => Box::new(vrhost_io::tap::TapPort::open(iface, Default::default())?),
        Driver::AfXdp => Box::new(vrhost_io::af_xdp::AfXdpPort::open(
            iface,
            &Default::default(),
        )?),
    };
    Ok(port)
}

/// The built data path: a worker with its ports and VRs.
pub struct Node {
    /// The worker (ports, VRs, classifier).
    pub worker: Worker,
    /// Per-VR counters, for printing while the worker runs elsewhere.
    pub stats: Vec<(String, Arc<VrStats>)>,
}

/// Open the ports and start the VRs of a checked plan.
///
/// # Errors
/// The port or VR that failed, with the reason; everything opened or
/// started so far is closed or stopped (dropped).
pub fn build(plan: &Plan) -> Result<Node> {
    let mut ports = Vec::new();
    for (name, driver, iface) in &plan.ports {
        let p = open_port(*driver, iface)
            .with_context(|| format!("port {name} ({} on {iface})", driver.name()))?;
        ports.push(p);
    }
    let mut worker = Worker::new(ports, plan.classifier.clone(), plan.host.poll)?;
    let exe = std::env::current_exe()?;
    let mut stats = Vec::new();
    for vr in &plan.vrs {
        let region = Region::create(
            &vr.name,
            RegionConfig {
                slot_count: vr.slots,
                ring_entries: RegionConfig::ring_entries_for(vr.slots),
                vnic_count: vr.vnic_ports.len() as u16,
                ..RegionConfig::default()
            },
        )
        .with_context(|| format!("VR {}: region", vr.name))?;
        let (program, args) = match &vr.program {
            Some((p, a)) => (p.clone(), a.clone()),
            None => (exe.clone(), vec!["vr-run".to_string()]),
        };
        // A VR that shares the host's core must not spin.
        let shared = vr.cpu.is_none() || vr.cpu == plan.host.cpu;
        let cmd = VrCommand {
            program,
            args,
            cpu: vr.cpu,
            poll: vrhost_vr::proto::PollConfig {
                spin_rounds: if shared {
                    0
                } else {
                    plan.host.poll.spin_rounds
                },
                ..plan.host.poll
            },
            config: vr.config.clone(),
            ready_timeout: Duration::from_secs(60),
        };
        let (proc_, bell) = VrProcess::start(&vr.name, 0, &region, worker.bell(), &cmd)
            .with_context(|| format!("VR {}", vr.name))?;
        let path = VrPath::new(
            &vr.name,
            region,
            vr.vnic_ports.clone(),
            Backend::Process(vec![proc_]),
            vec![bell],
        );
        stats.push((vr.name.clone(), path.stats().clone()));
        worker.add_vr(path);
    }
    Ok(Node { worker, stats })
}

/// Run `vrhost daemon`.
pub fn run(args: &DaemonArgs) -> Result<()> {
    let (_cfg, plan) = Config::load(&args.config)?;
    if args.check {
        println!(
            "{}: ok: {} ports, {} VRs, {} rules",
            args.config.display(),
            plan.ports.len(),
            plan.vrs.len(),
            plan.classifier.len()
        );
        return Ok(());
    }
    let _ns = match &args.netns {
        Some(n) => {
            if !vrhost_lab::Netns::exists(n) {
                bail!("network namespace {n:?} does not exist");
            }
            // The whole process works in the namespace: ports opened here
            // and VR processes started from here belong to it.
            Some(vrhost_lab::Netns::existing(n).enter()?)
        }
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let node = build(&plan)?;
    let Node { mut worker, stats } = node;
    let names: Vec<String> = worker
        .ports()
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    eprintln!(
        "vrhost daemon: {} ports ({}), {} VRs ({}); SIGINT or SIGTERM stops",
        names.len(),
        names.join(", "),
        stats.len(),
        stats
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let host_cpu = plan.host.cpu;
    let st = stop.clone();
    let handle = std::thread::Builder::new()
        .name("vrhost-worker".into())
        .spawn(move || {
            if let Some(c) = host_cpu {
                let _ = cpu::pin_current_thread(c);
            }
            worker.run(&st);
            worker.shutdown();
            worker
        })?;
    let started = Instant::now();
    let mut last: Vec<(u64, u64)> = vec![(0, 0); stats.len()];
    let mut t = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if args
            .seconds
            .is_some_and(|s| started.elapsed() >= Duration::from_secs(s))
        {
            stop.store(true, Ordering::Relaxed);
        }
        if args.stats_secs > 0 && t.elapsed() >= Duration::from_secs(args.stats_secs) {
            let dt = t.elapsed().as_secs_f64();
            t = Instant::now();
            for (i, (name, s)) in stats.iter().enumerate() {
                let now = (s.rx_packets.get(), s.tx_packets.get());
                println!(
                    "{:>7.1}s {:<12} rx {:>10.0} pps  tx {:>10.0} pps  drops host {} vr {}  violations {}",
                    started.elapsed().as_secs_f64(),
                    name,
                    (now.0 - last[i].0) as f64 / dt,
                    (now.1 - last[i].1) as f64 / dt,
                    s.ingress_drops_total(),
                    s.vr_dropped.get(),
                    s.violations_total()
                );
                last[i] = now;
            }
        }
    }
    let worker = handle
        .join()
        .map_err(|_| anyhow::anyhow!("worker thread panicked"))?;
    summary(&worker)
}

/// Final counters of every port and VR, and the slot accounting check.
pub fn summary(worker: &Worker) -> Result<()> {
    for p in worker.ports() {
        let s = p.stats();
        println!(
            "port {:<10} rx {} ({} B) dropped {}  tx {} ({} B) dropped {}",
            p.name(),
            s.rx_packets,
            s.rx_bytes,
            s.rx_dropped,
            s.tx_packets,
            s.tx_bytes,
            s.tx_dropped
        );
    }
    let hs = worker.stats();
    println!(
        "host: rx {} ingress drops {}",
        hs.rx_packets.get(),
        vrhost_host::IngressDrop::ALL
            .iter()
            .map(|d| format!("{} {}", d.name(), hs.ingress_drops[*d as usize].get()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for vr in worker.vrs() {
        let s = vr.stats();
        println!(
            "vr {:<12} in {} out {} host drops {} VR drops {} violations {}",
            vr.name(),
            s.rx_packets.get(),
            s.tx_packets.get(),
            s.ingress_drops_total(),
            s.vr_dropped.get(),
            s.violations_total()
        );
        vr.check_slot_accounting().map_err(anyhow::Error::msg)?;
    }
    Ok(())
}
