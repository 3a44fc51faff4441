//! `vrhost`: the one binary. Subcommands: `lab` (lab topologies; `lab run`
//! is the main job), `daemon` (the data path of a config file), `demo` (the
//! in-memory demo),
//! `bench` (benchmarks: `memory`, `fib`), the clients of a running daemon
//! (`vr`, `rule`, `route`, `stats`, `apply`, `config`, `health`, `top`; see
//! [`cli`]), `route import` (route files), `completions`, and
//! the hidden entry point
//! the host uses to start the built-in router's VR processes (`vr-run`).
//! The tests' and benches' VR programs are `vrhost-testvr`'s.

#![forbid(unsafe_code)]

mod cli;
mod daemon;
mod demo;
mod lab;
mod reap;
mod route_import;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// Host many isolated virtual routers on one Linux server.
#[derive(Debug, Parser)]
#[command(name = "vrhost", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the in-memory demo: two tenants' router VRs forwarding generated
    /// traffic, with live counters.
    Demo(demo::DemoArgs),
    /// Run the data path a config file describes (ports, VRs, rules).
    Daemon(daemon::DaemonArgs),
    /// Lab topologies of namespaces and veth links; `lab run` is the main
    /// job (the default lab with vrhost forwarding real traffic).
    #[command(subcommand)]
    Lab(lab::LabCmd),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// VRs of the running daemon: list, show, add, replace, del.
    Vr(cli::vr::VrArgs),
    /// Classifier rules of the running daemon: list, add, del.
    Rule(cli::rule::RuleArgs),
    /// A VR's routes in the running daemon (list, add, del, import VR
    /// FILE); `route import FILE` reads and measures a route file here.
    Route(cli::route::RouteArgs),
    /// Counters of the daemon's host worker, ports and VRs.
    Stats(cli::stats::StatsArgs),
    /// Replace the daemon's whole config with a file, applied as a diff.
    Apply(cli::config::ApplyArgs),
    /// Print the config in force in the daemon.
    Config(cli::config::ConfigArgs),
    /// A cluster's status: a dispatcher's engines and remote VRs.
    Cluster(cli::cluster::ClusterArgs),
    /// Whether the daemon and its VRs are up (non-zero exit if not).
    Health(cli::stats::HealthArgs),
    /// Live view of every VR's rates, drops and CPU.
    Top(cli::top::TopArgs),
    /// Copy a VR's frames to a pcap file or stdout (`| tcpdump -r -`).
    Capture(cli::capture::CaptureArgs),
    /// Print a shell completion script (bash, zsh, fish).
    Completions(cli::CompletionsArgs),
    /// Run the built-in router as a VR process (started by the host).
    #[command(hide = true)]
    VrRun,
    /// Populate a step of a VR's pool in its memory cgroup (started by the
    /// daemon; see `vrhost_host::pool`).
    #[command(hide = true, name = "pool-populate")]
    PoolPopulate(PoolPopulateArgs),
}

/// `vrhost pool-populate`'s arguments.
#[derive(Debug, clap::Args)]
struct PoolPopulateArgs {
    /// The VR's memory cgroup directory, joined first.
    #[arg(long)]
    cgroup: std::path::PathBuf,
    /// The region's memfd (`/proc/PID/fd/N` of the daemon).
    #[arg(long)]
    file: std::path::PathBuf,
    /// Byte offset of the step.
    #[arg(long)]
    offset: u64,
    /// Its bytes.
    #[arg(long)]
    len: u64,
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// Forwarding in memory: VR processes over shared memory vs the same
    /// router in the host thread vs a syscall per packet.
    Memory(vrhost_bench::memory::MemoryArgs),
    /// Forwarding on real interfaces (veth between namespaces): vrhost with
    /// each driver against the Linux kernel, same run, same topology.
    Forward(Box<vrhost_bench::forward::ForwardArgs>),
    /// The XDP fast path (issue 21): forwarding against the kernel and the
    /// af_xdp VR with the live-frames generator and trafgen, moves between
    /// the paths under load (frames lost, reordered, switch-over time),
    /// an idle fast VR's CPU.
    Fastpath(vrhost_bench::fastpath::FastpathArgs),
    /// Changing a running daemon: VRs added, changed and removed beside
    /// forwarding ones (frames lost), and a full table loaded through the
    /// API (routes/s).
    Control(vrhost_bench::control::ControlArgs),
    /// A VR's control plane: kernel route to forwarded frame, idle CPU.
    #[command(name = "control-plane")]
    ControlPlane(vrhost_bench::cplane::ControlPlaneArgs),
    /// Packet capture: what a full-rate `vrhost capture` of one VR costs
    /// the VR beside it.
    Capture(vrhost_bench::capture::CaptureArgs),
    /// Isolation: a hostile VR beside honest ones, 2 x overload, and a
    /// quiet tenant beside a noisy one.
    Isolation(vrhost_bench::isolation::IsolationArgs),
    /// Several instances per VR (LVRM, PdP): scaling, load-balancing
    /// policies and their reordering, adding and retiring instances under
    /// load, control messages between instances, dynamic allocation.
    Monitor(vrhost_bench::monitor::MonitorArgs),
    /// Soak: VRs killed, restarted, removed and added at random while
    /// others forward; slot accounting and memory checked every second.
    Soak(vrhost_bench::soak::SoakArgs),
    /// Tunnel vNICs (VXLAN, UDP, IP-in-IP): the worker's CPU per frame
    /// decapsulated or encapsulated, against a plain vNIC, in memory.
    Tunnel(vrhost_bench::tunnel::TunnelArgs),
    /// Longest-prefix match: vrhost's FIB against other Rust LPM crates on a
    /// real table (lookups, build time, updates, memory).
    Fib(vrhost_bench::fib::BenchFibArgs),
    /// PdP's cluster on the cluster lab: throughput against 1, 2, 3
    /// engines (each the bottleneck) and the dispatcher's own limit,
    /// reordering per policy, failover time and frames lost, RTT the
    /// dispatcher hop adds.
    Cluster(vrhost_bench::cluster::ClusterArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.cmd, Cmd::Bench(_) | Cmd::Lab(_))
        && let Err(e) = reap::stop_children_on_signal()
    {
        eprintln!("vrhost: signal handlers: {e}");
        return ExitCode::FAILURE;
    }
    let result = match cli.cmd {
        Cmd::Demo(a) => demo::run(&a),
        Cmd::Daemon(a) => daemon::run(&a),
        Cmd::Lab(c) => lab::run(&c),
        Cmd::Bench(BenchCmd::Memory(a)) => vrhost_bench::memory::run(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::Forward(a)) => vrhost_bench::forward::run(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::Fastpath(a)) => vrhost_bench::fastpath::run(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::Control(a)) => vrhost_bench::control::run(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::ControlPlane(a)) => vrhost_bench::cplane::run(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::Capture(a)) => vrhost_bench::capture::run(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::Isolation(a)) => vrhost_bench::isolation::run(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::Soak(a)) => vrhost_bench::soak::run(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::Tunnel(a)) => vrhost_bench::tunnel::run(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::Monitor(a)) => vrhost_bench::monitor::run(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::Fib(a)) => vrhost_bench::fib::run_cli(&a).map_err(Into::into),
        Cmd::Bench(BenchCmd::Cluster(a)) => vrhost_bench::cluster::run(&a).map_err(Into::into),
        Cmd::Vr(a) => cli::vr::run(&a),
        Cmd::Rule(a) => cli::rule::run(&a),
        Cmd::Route(a) => cli::route::run(&a),
        Cmd::Stats(a) => cli::stats::run(&a),
        Cmd::Apply(a) => cli::config::apply(&a),
        Cmd::Config(a) => cli::config::config(&a),
        Cmd::Health(a) => cli::stats::health(&a),
        Cmd::Cluster(a) => cli::cluster::run(&a),
        Cmd::Top(a) => cli::top::run(&a),
        Cmd::Capture(a) => cli::capture::run(&a),
        Cmd::Completions(a) => cli::completions(&a, Cli::command()),
        Cmd::PoolPopulate(a) => vrhost_host::pool::populate_in(&a.cgroup, &a.file, a.offset, a.len)
            .map_err(anyhow::Error::msg),
        Cmd::VrRun => {
            return vrhost_sdk::runtime::main(|hello| {
                let cfg: vrhost_router::RouterConfig = serde_json::from_value(hello.config.clone())
                    .map_err(|e| format!("router config: {e}"))?;
                vrhost_router::Router::new(&cfg)
            });
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vrhost: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A progress bar on stderr for long route imports, when stderr is a
/// terminal (redrawn at most 10 times a second).
fn progress_bar() -> Option<vrhost_fib::import::ProgressFn> {
    use std::io::{IsTerminal, Write};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let last = Mutex::new(Instant::now() - Duration::from_secs(1));
    Some(std::sync::Arc::new(
        move |p: &vrhost_fib::import::Progress| {
            let Ok(mut last) = last.lock() else { return };
            // The last call (everything read) is always drawn, so the bar
            // ends full.
            let finished = p.total.is_some_and(|t| p.bytes >= t);
            if last.elapsed() < Duration::from_millis(100) && !finished {
                return;
            }
            *last = Instant::now();
            let mut err = std::io::stderr().lock();
            match p.total.filter(|t| *t > 0) {
                Some(t) => {
                    let frac = (p.bytes as f64 / t as f64).min(1.0);
                    let done = (frac * 30.0) as usize;
                    let _ = write!(
                        err,
                        "\rimport [{}{}] {:>3.0}% {} routes",
                        "#".repeat(done),
                        " ".repeat(30 - done),
                        frac * 100.0,
                        p.routes
                    );
                }
                None => {
                    let _ = write!(err, "\rimport {} bytes, {} routes", p.bytes, p.routes);
                }
            }
            let _ = err.flush();
        },
    ))
}
