//! `vrhost lab up|down|status|run`: lab topologies of network namespaces
//! and veth links (described in `lab/*.toml`, built by `vrhost-lab`), and
//! the main job: the default lab with vrhost forwarding real traffic.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use vrhost_lab::{Daemon, Lab, Up};

/// The lab file used when none is given.
pub const DEFAULT_LAB: &str = "lab/default.toml";

/// `vrhost lab` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum LabCmd {
    /// Build the lab's namespaces and links (idempotent).
    Up(LabFile),
    /// Remove the lab's namespaces (and everything in them).
    Down(LabFile),
    /// Show hosts, interfaces, addresses and counters.
    Status(LabFile),
    /// Bring the lab up, start vrhost on its node, show traffic forwarded
    /// through every tenant's VR (ping, then iperf3 TCP), stop, tear down.
    Run(RunArgs),
}

/// A lab file argument.
#[derive(Debug, Clone, clap::Args)]
pub struct LabFile {
    /// The lab description (TOML).
    #[arg(default_value = DEFAULT_LAB)]
    pub file: PathBuf,
}

/// Options of `vrhost lab run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The lab description (TOML).
    #[arg(default_value = DEFAULT_LAB)]
    pub file: PathBuf,
    /// Seconds of iperf3 per flow.
    #[arg(long, default_value_t = 3)]
    pub seconds: u64,
    /// Leave the lab up afterwards (vrhost is always stopped).
    #[arg(long)]
    pub keep: bool,
}

fn load(file: &Path) -> Result<Lab> {
    if !file.exists() && file == Path::new(DEFAULT_LAB) {
        bail!("{DEFAULT_LAB} not found: run from the repository root or name a lab file");
    }
    Ok(Lab::load(file)?)
}

/// Run a `vrhost lab` subcommand.
pub fn run(cmd: &LabCmd) -> Result<()> {
    match cmd {
        LabCmd::Up(f) => {
            let lab = load(&f.file)?;
            match lab.up()? {
                Up::AlreadyUp => println!("lab {}: already up", lab.prefix),
                Up::Built => println!("lab {}: up", lab.prefix),
            }
            Ok(())
        }
        LabCmd::Down(f) => {
            let lab = load(&f.file)?;
            let n = lab.down();
            println!("lab {}: down ({n} namespaces removed)", lab.prefix);
            Ok(())
        }
        LabCmd::Status(f) => {
            let lab = load(&f.file)?;
            for l in lab.status() {
                println!("{l}");
            }
            Ok(())
        }
        LabCmd::Run(a) => run_lab(a),
    }
}

/// The API socket of a lab node other than the first: beside the
/// default one, by host name.
fn node_socket(node: &str) -> String {
    let dir = std::path::Path::new(crate::daemon::DEFAULT_API_SOCKET)
        .parent()
        .unwrap_or(std::path::Path::new("."));
    dir.join(format!("{node}.sock")).display().to_string()
}

/// Ping `to` from `from`, one at a time, until one crosses or 30 s pass
/// (the flow `flow`'s VRs placed through etcd and started by the
/// engines' agents); the traffic after says how it went.
fn wait_through(from: &vrhost_lab::Netns, to: &str, flow: &str) {
    println!("== {flow}: waiting for a ping to cross (the cluster places its VRs)");
    let t0 = std::time::Instant::now();
    while from.exec("ping", &["-c", "1", "-W", "1", to]).is_err() {
        if t0.elapsed() > std::time::Duration::from_secs(30) {
            println!("   none crossed in 30 s");
            return;
        }
    }
    println!("   crossed after {:.1} s", t0.elapsed().as_secs_f64());
}

/// The main job: lab up, vrhost on every node (one, or a cluster's
/// dispatcher and engines), traffic through every flow.
fn run_lab(a: &RunArgs) -> Result<()> {
    let lab = load(&a.file)?;
    let nodes = lab.vrhost_nodes();
    if nodes.is_empty() {
        bail!("{}: no host has `vrhost = CONFIG`", a.file.display());
    }
    // Check the daemon configs before touching the kernel.
    for (_, cfg) in &nodes {
        vrhost_host::config::Config::load(cfg)?;
    }
    let _claim = lab.claim()?;
    println!("== lab {}: up ({})", lab.prefix, a.file.display());
    lab.up()?;
    let result = (|| -> Result<()> {
        for l in lab.status() {
            println!("{l}");
        }
        // The cluster's desired state first: the vrhosts' agents use it.
        let _etcd = match &lab.etcd {
            Some(e) => {
                let addr: std::net::Ipv4Addr = e.address.get_ref().parse()?;
                let etcd = vrhost_lab::Etcd::start(&lab.ns(e.host.get_ref()), addr)?;
                println!("== etcd on {} ({})", e.host.get_ref(), etcd.endpoint());
                Some(etcd)
            }
            None => None,
        };
        // The first node's API on the default socket, the others' (a
        // cluster's engines) beside it, by host name.
        let mut daemons = Vec::new();
        for (i, (node, cfg)) in nodes.iter().enumerate() {
            let api = match i {
                0 => crate::daemon::DEFAULT_API_SOCKET.to_string(),
                _ => node_socket(node),
            };
            println!("== vrhost daemon on {node} ({}), API {api}", cfg.display());
            daemons.push(Daemon::start(cfg, Some(&lab.ns_name(node)), 1, &api)?);
        }
        let mut failed = Vec::new();
        for f in &lab.flows {
            let from = lab.ns(f.from.get_ref());
            let to = f.to.get_ref();
            if lab.etcd.is_some() {
                // Its VRs are placed through etcd: wait until they run.
                wait_through(&from, to, &f.name);
            }
            println!(
                "== {}: ping {} -> {to} ({})",
                f.name,
                f.from.get_ref(),
                f.to_host.get_ref()
            );
            match from.exec("ping", &["-c", "5", "-i", "0.2", "-W", "2", to]) {
                Ok(out) => {
                    for l in out
                        .lines()
                        .filter(|l| l.contains("received") || l.contains("rtt"))
                    {
                        println!("   {l}");
                    }
                }
                Err(e) => {
                    println!("   FAILED: {e}");
                    failed.push(format!("{}: ping", f.name));
                    continue;
                }
            }
            println!(
                "== {}: iperf3 TCP {} s {} -> {to}",
                f.name,
                a.seconds,
                f.from.get_ref()
            );
            match vrhost_lab::tools::iperf3(
                &lab,
                f.to_host.get_ref(),
                f.from.get_ref(),
                to,
                a.seconds,
            ) {
                Ok(gbps) => println!("   {gbps:.2} Gbit/s received"),
                Err(e) => {
                    println!("   FAILED: {e}");
                    failed.push(format!("{}: iperf3", f.name));
                }
            }
        }
        println!("== stopping vrhost");
        for d in daemons {
            d.stop()?;
        }
        if !failed.is_empty() {
            bail!("traffic failed: {}", failed.join(", "));
        }
        Ok(())
    })();
    if !a.keep {
        lab.down();
        println!("== lab {}: down", lab.prefix);
    }
    result
}
