//! `vrhost daemon --config FILE`: run the data path a config describes,
//! with its API.
//!
//! The config is checked as a whole first (`--check` stops there); then the
//! ports are opened (inside `--netns NAME` if given), one region and one
//! process per VR are created, and the host worker runs on its core. The
//! HTTP API listens on a unix socket (`--api`), and on TCP (`--api-tcp`)
//! only with a bearer token. SIGHUP re-reads the config file and applies it
//! as a diff; SIGINT or SIGTERM stop. On the way out the API socket is
//! removed, the VRs are stopped, the ports closed (an XDP program
//! detached) and the slot accounting of every VR checked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use vrhost_daemon::api::{self, ApiState};
use vrhost_daemon::supervise::Supervisor;
use vrhost_daemon::{Controller, view};
use vrhost_host::config::Config;
use vrhost_host::{Worker, cpu};

/// Default path of the API's unix socket.
pub const DEFAULT_API_SOCKET: &str = "/run/vrhost/api.sock";

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
    /// The API's unix socket ("none": no API).
    #[arg(long, default_value = DEFAULT_API_SOCKET)]
    pub api: String,
    /// Also serve the API on TCP at this address (needs a token).
    #[arg(long)]
    pub api_tcp: Option<std::net::SocketAddr>,
    /// A file holding the bearer token TCP clients must send.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

/// Run `vrhost daemon`.
pub fn run(args: &DaemonArgs) -> Result<()> {
    // Structured logs on stderr; RUST_LOG sets the levels (default info).
    // Colours only on a terminal (not in journald or a file).
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let label = args.config.display().to_string();
    let src = std::fs::read_to_string(&args.config).with_context(|| label.clone())?;
    let dir = args
        .config
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    if args.check {
        let (_, plan) = Config::parse(&src, &label, &dir)?;
        println!(
            "{label}: ok: {} ports, {} VRs, {} rules",
            plan.ports.len(),
            plan.vrs.len(),
            plan.classifier.len()
        );
        return Ok(());
    }
    let token = read_token(args)?;
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
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())?;

    let exe = std::env::current_exe()?;
    let (ctl, mut worker) =
        Controller::start(&src, &label, &dir, exe).map_err(anyhow::Error::msg)?;
    let host_cpu = ctl.plan().host.cpu;
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
    // Compiled here, at the daemon's priority, not on the first request.
    vrhost_daemon::contract::warm();
    // The control plane (this thread, and the API's work on the
    // controller) yields to the data path: nice is per thread on Linux, and
    // the worker thread started above keeps the daemon's priority.
    let _ = cpu::set_current_thread_nice(api::CONTROL_NICE);
    let state = Arc::new(ApiState {
        ctl: Mutex::new(ctl),
        token,
    });
    set_sync_hook(&state);
    // VRs that go down are restarted on their own thread, at the daemon's
    // priority (a restart is the data path coming back).
    let supervisor = {
        let (exits, hurry) = {
            let mut c = state
                .ctl
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (c.take_exits().expect("taken once"), c.hurry())
        };
        let (state, stop) = (state.clone(), stop.clone());
        std::thread::Builder::new()
            .name("vrhost-supervise".into())
            .spawn(move || {
                let _ = cpu::set_current_thread_nice(0);
                Supervisor::new(exits, hurry).run(&state.ctl, &stop);
            })?
    };
    let server = match serve_api(args, state.clone()) {
        Ok(s) => s,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            let _ = handle.join();
            return Err(e);
        }
    };
    let agent = match etcd_agent(&state, &stop) {
        Ok(a) => a,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            let _ = handle.join();
            return Err(e);
        }
    };
    announce(&state, &args.api);
    watch(args, &state, &stop, &hup);
    drop(server);
    if let Some(a) = agent {
        let _ = a.join();
    }
    let _ = supervisor.join();
    state
        .ctl
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .stop_control_planes();
    let worker = handle
        .join()
        .map_err(|_| anyhow::anyhow!("worker thread panicked"))?;
    summary(&worker)
}

/// Let the control planes' route sync threads take the controller when
/// their batches come (weakly: a sync thread does not keep the daemon's
/// state alive).
fn set_sync_hook(state: &Arc<ApiState>) {
    let weak = Arc::downgrade(state);
    let hook: vrhost_daemon::cplane::SyncHook = Arc::new(move |f| {
        let Some(st) = weak.upgrade() else {
            return false;
        };
        let mut c = st
            .ctl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut c);
        true
    });
    state
        .ctl
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .set_sync_hook(hook);
}

/// The agent of the cluster's desired state in etcd, if `[cluster] etcd`
/// names it (a build without the `etcd` feature refuses such a config).
fn etcd_agent(
    state: &Arc<ApiState>,
    stop: &Arc<AtomicBool>,
) -> Result<Option<std::thread::JoinHandle<()>>> {
    #[cfg(feature = "etcd")]
    {
        let measure = {
            let c = state
                .ctl
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            matches!(
                &c.plan().cluster,
                Some(vrhost_host::config::ClusterPlan::Engine { etcd: Some(e), .. }) if e.measure
            )
        };
        let per_core = match measure {
            true => Some(measure_per_core()?),
            false => None,
        };
        vrhost_daemon::etcd::start(state.clone(), stop.clone(), per_core)
            .map_err(anyhow::Error::msg)
    }
    #[cfg(not(feature = "etcd"))]
    {
        let _ = stop;
        let c = state
            .ctl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if c.cluster().is_some() && c.doc().get("cluster").and_then(|t| t.get("etcd")).is_some() {
            bail!("[cluster] etcd: this vrhost is built without the `etcd` feature");
        }
        Ok(None)
    }
}

/// An engine's per-core rate (pps), measured: one router VR through the
/// real path in memory for a second (`bench memory`'s `shm` point).
#[cfg(feature = "etcd")]
fn measure_per_core() -> Result<u64> {
    let t0 = std::time::Instant::now();
    let pps =
        vrhost_bench::memory::per_core_pps(std::time::Duration::from_secs(1)).map_err(|e| {
            anyhow::anyhow!(
                "[cluster] measuring this engine's per-core rate: {e}; give cluster.per_core_pps"
            )
        })?;
    tracing::info!(
        per_core_pps = pps.round(),
        took_ms = t0.elapsed().as_millis() as u64,
        "cluster: per-core rate measured (one router VR through the real path, in memory)"
    );
    Ok(pps.round() as u64)
}

/// The token TCP clients must send, from `--token-file` (required with
/// `--api-tcp`).
fn read_token(args: &DaemonArgs) -> Result<Option<String>> {
    match (&args.api_tcp, &args.token_file) {
        (Some(_), None) => {
            bail!("--api-tcp needs --token-file: the API is not served on TCP without a token")
        }
        (_, Some(f)) => {
            let t = std::fs::read_to_string(f)
                .with_context(|| format!("token file {}", f.display()))?
                .trim()
                .to_string();
            if t.len() < 16 {
                bail!(
                    "token file {}: the token must be at least 16 characters",
                    f.display()
                );
            }
            Ok(Some(t))
        }
        (None, None) => Ok(None),
    }
}

/// The line `vrhost lab` and the tests wait for: the daemon is up.
fn announce(state: &ApiState, api: &str) {
    let c = state
        .ctl
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let plan = c.plan();
    let names = |it: &mut dyn Iterator<Item = &str>| it.collect::<Vec<_>>().join(", ");
    eprintln!(
        "vrhost daemon: {} ports ({}), {} VRs ({}); API {api}; SIGHUP reloads, SIGINT or SIGTERM stops",
        plan.ports.len(),
        names(&mut plan.ports.iter().map(|p| p.0.as_str())),
        plan.vrs.len(),
        names(&mut plan.vrs.iter().map(|v| v.name.as_str())),
    );
}

/// Until `stop` (a signal, or `--seconds`): reload on SIGHUP, and print a
/// counter line per VR every `--stats-secs`.
fn watch(args: &DaemonArgs, state: &ApiState, stop: &AtomicBool, hup: &AtomicBool) {
    let started = Instant::now();
    let mut last: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut t = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if args
            .seconds
            .is_some_and(|s| started.elapsed() >= Duration::from_secs(s))
        {
            stop.store(true, Ordering::Relaxed);
        }
        if hup.swap(false, Ordering::Relaxed) {
            reload(state, &args.config);
        }
        if args.stats_secs == 0 || t.elapsed() < Duration::from_secs(args.stats_secs) {
            continue;
        }
        let dt = t.elapsed().as_secs_f64();
        t = Instant::now();
        let snap = {
            let c = state
                .ctl
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            view::snapshot(&c)
        };
        let Ok(snap) = snap else { continue };
        for v in &snap.vrs {
            let s = &v.stats;
            let now = (s.rx_packets, s.tx_packets);
            let before = last.get(&v.name).copied().unwrap_or(now);
            println!(
                "{:>7.1}s {:<12} rx {:>10.0} pps  tx {:>10.0} pps  drops host {} vr {}  violations {}",
                started.elapsed().as_secs_f64(),
                v.name,
                now.0.saturating_sub(before.0) as f64 / dt,
                now.1.saturating_sub(before.1) as f64 / dt,
                s.ingress_drops.values().sum::<u64>(),
                s.vr_dropped,
                s.violations.values().sum::<u64>()
            );
            last.insert(v.name.clone(), now);
        }
    }
}

/// SIGHUP: apply the config file again as a diff; a bad file is logged
/// and changes nothing.
fn reload(state: &ApiState, file: &Path) {
    let src = match std::fs::read_to_string(file) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("SIGHUP: {}: {e}; nothing changed", file.display());
            return;
        }
    };
    let mut c = state
        .ctl
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match c.apply_toml(&src, false) {
        Ok(r) => tracing::info!(
            generation = r.generation,
            added = ?r.added,
            removed = ?r.removed,
            restarted = ?r.restarted,
            "SIGHUP: {} applied",
            file.display()
        ),
        Err(e) => tracing::error!("SIGHUP: {}: {e}; nothing changed", file.display()),
    }
}

/// The API server: a tokio runtime on its own thread, stopped (and its
/// socket file removed) when dropped.
struct ApiServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    socket: Option<PathBuf>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(p) = &self.socket {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn serve_api(args: &DaemonArgs, state: Arc<ApiState>) -> Result<ApiServer> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let socket = (args.api != "none").then(|| PathBuf::from(&args.api));
    let unix = match &socket {
        Some(p) => {
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).with_context(|| d.display().to_string())?;
            }
            if std::os::unix::net::UnixStream::connect(p).is_ok() {
                bail!("{}: another daemon answers on this API socket", p.display());
            }
            let _ = std::fs::remove_file(p);
            let l = {
                let _g = rt.enter();
                tokio::net::UnixListener::bind(p)
                    .with_context(|| format!("API socket {}", p.display()))?
            };
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o660))?;
            tracing::info!("API on unix socket {}", p.display());
            Some(l)
        }
        None => None,
    };
    let tcp = match args.api_tcp {
        Some(a) => {
            let _g = rt.enter();
            let l = rt
                .block_on(tokio::net::TcpListener::bind(a))
                .with_context(|| format!("API on TCP {a}"))?;
            tracing::info!("API on TCP {a} (bearer token required)");
            Some(l)
        }
        None => None,
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("vrhost-api".into())
        .spawn(move || {
            // Woken at the data path's priority (api::CONTROL_NICE); its
            // blocking threads, started from here, inherit it.
            let _ = cpu::set_current_thread_nice(0);
            rt.block_on(async move {
                let mut tasks = Vec::new();
                if let Some(l) = unix {
                    let app = api::router(state.clone());
                    tasks.push(tokio::spawn(async move {
                        let _ = axum::serve(l, app).await;
                    }));
                }
                if let Some(l) = tcp {
                    let app = api::tcp_router(state.clone());
                    tasks.push(tokio::spawn(async move {
                        let _ = axum::serve(l, app).await;
                    }));
                }
                let _ = rx.await;
                for t in tasks {
                    t.abort();
                }
            });
        })?;
    Ok(ApiServer {
        stop: Some(tx),
        thread: Some(thread),
        socket,
    })
}

/// Final counters of every port and VR, and the slot accounting check.
pub fn summary(worker: &Worker) -> Result<()> {
    for p in worker.ports() {
        let s = p.stats();
        let fallbacks = match s.tx_fallbacks {
            0 => String::new(),
            n => format!("  tx fell back to the socket {n}"),
        };
        println!(
            "port {:<10} rx {} ({} B) dropped {}  tx {} ({} B) dropped {}{fallbacks}",
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
