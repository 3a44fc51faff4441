//! `vrhost bench control-plane`: a VR's control plane (issue 22, items 3
//! and 4), measured with a real `vrhost daemon` in a namespace of its
//! own (root only).
//!
//! - `sync`: from a kernel route appearing in the VR's control namespace
//!   to the first frame forwarded by it. A `mem` port generates UDP
//!   frames to 198.51.100.7 (`--pps`) into the VR, which has no route
//!   for them (dropped, no route); the bench adds
//!   `198.51.100.7/32 via 10.0.2.2` to the control namespace's kernel
//!   table (an `ip -batch` already running there, so no process start
//!   is timed) and times the first datagram at a UDP socket in the sink
//!   namespace behind the VR's other vNIC (an `af_packet` port on a
//!   veth). Then it deletes the route, waits until frames stop, and
//!   does it again: `--samples` times, p50 and p99. The control plane
//!   is a command that sleeps (the kernel table is the bench's): what
//!   is timed is vrhost's part (the netlink watch, the route change to
//!   the VR, the VR's FIB), not a routing daemon's.
//! - `idle`: the CPU a control plane adds to an idle VR: the CPU time of
//!   the daemon and its child processes (the VR, the control plane) over
//!   `--idle-seconds` with BIRD 2 as the VR's control plane (device and
//!   kernel protocols, no peer), less the same without a control plane.
//!   Skipped (said on stderr) without `bird`.
//! - `convergence`: a BIRD peer in the sink's namespace announces
//!   `--convergence-routes` routes of `--routes` (the 512K table of
//!   `../shared/data/fib`) over BGP to the VR's BIRD; from the session's
//!   start, the time until BIRD has installed them all in the control
//!   namespace's kernel table, and until the VR's FIB holds them all
//!   (`convergence.rs`).

use std::io::Write;
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use vrhost_lab::{Daemon, Netns, veth};

use crate::machine::Machine;
use crate::report::{Output, percentile};
use crate::{Context, Result, bail};

mod convergence;

const R0_MAC: &str = "02:cb:00:00:00:10";
const R1_MAC: &str = "02:cb:00:00:00:11";
/// The generator's UDP destination port (`mem`'s default).
const DPORT: u16 = 1024;
/// A bound against a hung run, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(30);

/// Options of `vrhost bench control-plane`.
#[derive(Debug, Clone, clap::Args)]
pub struct ControlPlaneArgs {
    /// Route syncs timed.
    #[arg(long, default_value_t = 50)]
    pub samples: usize,
    /// Frames per second the generator sends to the prefix.
    #[arg(long, default_value_t = 20_000)]
    pub pps: u64,
    /// Seconds of each idle CPU measurement (with and without).
    #[arg(long, default_value_t = 10.0)]
    pub idle_seconds: f64,
    /// Route file a BIRD peer announces for `convergence`.
    #[arg(long, default_value = "../shared/data/fib/ipasn_20140513.dat.gz")]
    pub routes: String,
    /// Routes of it announced (0: no convergence run; default: all).
    #[arg(long)]
    pub convergence_routes: Option<usize>,
    /// Where the report goes: `--json`, `--out FILE`.
    #[command(flatten)]
    pub output: Output,
}

/// One experiment's result.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "experiment", rename_all = "snake_case")]
pub enum Record {
    /// Kernel route to first forwarded frame.
    Sync {
        /// Routes timed.
        samples: usize,
        /// Median, ms.
        sync_ms_p50: f64,
        /// 99th percentile, ms.
        sync_ms_p99: f64,
        /// Slowest, ms.
        sync_ms_max: f64,
    },
    /// A full table from a BGP peer.
    Convergence {
        /// Routes announced.
        routes: usize,
        /// From the session's start until BIRD had them all in the
        /// control namespace's kernel table, s.
        bird_kernel_s: f64,
        /// From the session's start until the VR's FIB had them all, s.
        vrhost_fib_s: f64,
        /// Frames lost on a route installed before (a `--pps` flow to
        /// it all along, numbered: the gaps in what the sink got).
        lost_on_installed: u64,
        /// Frames of that flow the sink got meanwhile.
        received_on_installed: u64,
    },
    /// CPU a control plane adds to an idle VR.
    Idle {
        /// Percent of one core (with less without).
        cpu_pct: f64,
        /// The daemon and its processes without a control plane, percent.
        baseline_cpu_pct: f64,
        /// Seconds measured, each.
        seconds: f64,
    },
}

/// `{"bench": "control-plane", "machine": ..., "results": [...]}`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `"control-plane"`.
    pub bench: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// The experiments.
    pub results: Vec<Record>,
}

/// The daemon's namespace and the sink's, their veth, and the config.
struct Rig {
    nr: Netns,
    ns: Netns,
    dir: std::path::PathBuf,
}

impl Rig {
    fn new(tag: &str) -> Result<Self> {
        let nr = Netns::unique(&format!("bcp-{tag}-r")).context("namespace")?;
        let ns = Netns::unique(&format!("bcp-{tag}-s")).context("namespace")?;
        for n in [&nr, &ns] {
            n.sysctl("net.ipv6.conf.all.disable_ipv6", "1")
                .context("sysctl")?;
            n.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
                .context("sysctl")?;
        }
        veth(&nr, "r1", Some(R1_MAC), &ns, "s0", None).context("veth")?;
        ns.ip(&["addr", "add", "10.0.2.2/24", "dev", "s0"])
            .context("address")?;
        ns.ip(&["addr", "add", "198.51.100.7/32", "dev", "s0"])
            .context("address")?;
        let dir =
            std::env::temp_dir().join(format!("vrhost-bench-cp-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Self { nr, ns, dir })
    }

    /// Start the daemon on a config with VR `vr` (`control`: its
    /// control-plane lines) and a generator at `pps` (0: none), its
    /// frames numbered when `sequence`.
    fn daemon(&self, vr: &str, control: &str, pps: u64, sequence: bool) -> Result<Daemon> {
        let gen_port = match pps {
            0 => String::new(),
            p => format!(
                "[[ports]]\nname = \"gen\"\ndriver = \"mem\"\ntraffic = {{ dst = [\"198.51.100.7/32\"], src = \"10.0.1.2\", dst_mac = \"{R0_MAC}\", pps = {p}, sequence = {sequence} }}\n"
            ),
        };
        let gen_vnic = match pps {
            0 => "\"null\"",
            _ => "\"gen\"",
        };
        let src = format!(
            r#"{gen_port}
[[ports]]
name = "null"
driver = "null"

[[ports]]
name = "out"
driver = "af_packet"
interface = "r1"

[[vrs]]
name = "{vr}"
{control}
vnics = [
  {{ port = {gen_vnic}, mac = "{R0_MAC}", addrs = ["10.0.1.1/24"] }},
  {{ port = "out", mac = "{R1_MAC}", addrs = ["10.0.2.1/24"] }},
]

[[rules]]
port = {gen_vnic}
vr = "{vr}"
vnic = 0

[[rules]]
port = "out"
vr = "{vr}"
vnic = 1
"#
        );
        let file = self.dir.join(format!("{vr}.toml"));
        std::fs::write(&file, src)?;
        let api = self.dir.join("api.sock").display().to_string();
        Ok(Daemon::start(&file, Some(self.nr.name()), 0, &api)?)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `ip -n NS -batch -`: route changes without a process start each.
struct IpBatch(Child);

impl IpBatch {
    fn start(ns: &str) -> Result<Self> {
        let c = Command::new("ip")
            .args(["-n", ns, "-force", "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()?;
        Ok(Self(c))
    }

    fn send(&mut self, line: &str) -> Result<()> {
        let stdin = self.0.stdin.as_mut().expect("piped");
        stdin.write_all(line.as_bytes())?;
        stdin.write_all(b"\n")?;
        stdin.flush()?;
        Ok(())
    }
}

impl Drop for IpBatch {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

/// Read datagrams until none came for `quiet`.
fn drain(sock: &UdpSocket, quiet: Duration) -> Result<()> {
    let mut buf = [0u8; 2048];
    sock.set_read_timeout(Some(quiet))?;
    let t = Instant::now();
    while sock.recv(&mut buf).is_ok() {
        if t.elapsed() > PATIENCE {
            bail!("frames still arrive {PATIENCE:?} after the route was deleted");
        }
    }
    Ok(())
}

/// The `sync` experiment.
fn sync(args: &ControlPlaneArgs) -> Result<Record> {
    if args.samples == 0 || args.pps == 0 {
        bail!("--samples and --pps must be at least 1");
    }
    let rig = Rig::new("sync")?;
    let vr = format!("bcs{}", std::process::id());
    let control = "control_plane = { command = [\"/bin/sleep\", \"infinity\"] }";
    let _d = rig.daemon(&vr, control, args.pps, false)?;
    let sock = match rig.ns.run(|| UdpSocket::bind(("0.0.0.0", DPORT))) {
        Ok(s) => s.context("the sink's UDP socket")?,
        Err(e) => bail!("sink namespace: {e}"),
    };
    let mut ip = IpBatch::start(&format!("vrctl-{vr}"))?;
    let add = "route replace 198.51.100.7/32 via 10.0.2.2 dev vnic1 proto static";
    let del = "route del 198.51.100.7/32";
    let mut buf = [0u8; 2048];
    let mut ms = Vec::with_capacity(args.samples);
    // One more than asked: the first resolves the sink's MAC by ARP.
    for i in 0..=args.samples {
        drain(&sock, Duration::from_millis(100))?;
        sock.set_read_timeout(Some(PATIENCE))?;
        let t0 = Instant::now();
        ip.send(add)?;
        sock.recv(&mut buf)
            .context("no frame through the control plane's route")?;
        if i > 0 {
            ms.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        ip.send(del)?;
    }
    ms.sort_by(f64::total_cmp);
    let q = |p| percentile(&ms, p).unwrap_or(f64::NAN);
    Ok(Record::Sync {
        samples: ms.len(),
        sync_ms_p50: q(0.5),
        sync_ms_p99: q(0.99),
        sync_ms_max: ms.last().copied().unwrap_or(f64::NAN),
    })
}

/// CPU seconds of `pid` and its children (their own, not their waited
/// children's), from `/proc`.
fn cpu_of_tree(pid: u32) -> f64 {
    // USER_HZ: /proc counts in hundredths of a second on every Linux.
    let tick = 100.0;
    let mut total = 0u64;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    for e in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, ...;
        // utime and stime are fields 14 and 15 (12 and 13 after it).
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let me = e.file_name().to_string_lossy() == pid.to_string();
        if me || f.get(1) == Some(&pid.to_string().as_str()) {
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            total += n(11) + n(12);
        }
    }
    total as f64 / tick
}

/// Percent of a core the daemon of `control` uses while idle.
fn idle_cpu(rig: &Rig, vr: &str, control: &str, seconds: f64) -> Result<f64> {
    let d = rig.daemon(vr, control, 0, false)?;
    std::thread::sleep(Duration::from_secs(1));
    let c0 = cpu_of_tree(d.pid());
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let c1 = cpu_of_tree(d.pid());
    let pct = (c1 - c0) / t0.elapsed().as_secs_f64() * 100.0;
    d.stop().context("stop the daemon")?;
    Ok(pct)
}

/// The `idle` experiment; `None` without `bird`.
fn idle(args: &ControlPlaneArgs) -> Result<Option<Record>> {
    if vrhost_host::config::find_program("bird").is_none() {
        eprintln!("idle: skipped, no bird (Debian package bird2)");
        return Ok(None);
    }
    if args.idle_seconds.is_nan() || args.idle_seconds <= 0.0 {
        bail!("--idle-seconds must be above 0");
    }
    let rig = Rig::new("idle")?;
    let conf = rig.dir.join("bird.conf");
    std::fs::write(
        &conf,
        "protocol device { }\nprotocol kernel { ipv4 { import none; export all; }; }\n",
    )?;
    let pid = std::process::id();
    let base = idle_cpu(&rig, &format!("bci{pid}"), "", args.idle_seconds)?;
    let control = format!(
        "control_plane = \"bird\"\ncontrol_config = {:?}",
        conf.display().to_string()
    );
    let with = idle_cpu(&rig, &format!("bcj{pid}"), &control, args.idle_seconds)?;
    Ok(Some(Record::Idle {
        cpu_pct: with - base,
        baseline_cpu_pct: base,
        seconds: args.idle_seconds,
    }))
}

/// Run `vrhost bench control-plane`.
///
/// # Errors
/// Not root, a namespace or the daemon cannot be set up, no frame came.
pub fn run(args: &ControlPlaneArgs) -> Result<()> {
    if !rustix::process::geteuid().is_root() {
        bail!("vrhost bench control-plane: needs root (network namespaces)");
    }
    let mut results = vec![sync(args)?];
    results.extend(idle(args)?);
    results.extend(convergence::run(args)?);
    let report = Report {
        bench: "control-plane",
        machine: Machine::this(),
        results,
    };
    crate::report::emit(&report, &args.output, print_table)
}

fn print_table(r: &Report) {
    println!("vrhost bench control-plane");
    for rec in &r.results {
        match rec {
            Record::Sync {
                samples,
                sync_ms_p50,
                sync_ms_p99,
                sync_ms_max,
            } => println!(
                "sync: kernel route to first frame forwarded, {samples} samples: p50 {sync_ms_p50:.2} ms, p99 {sync_ms_p99:.2} ms, max {sync_ms_max:.2} ms"
            ),
            Record::Convergence {
                routes,
                bird_kernel_s,
                vrhost_fib_s,
                lost_on_installed,
                received_on_installed,
            } => println!(
                "convergence: {routes} routes from a BGP peer: in BIRD's kernel table after {bird_kernel_s:.1} s, in the VR's FIB after {vrhost_fib_s:.1} s; on a route installed before, {lost_on_installed} frames lost of {received_on_installed} received"
            ),
            Record::Idle {
                cpu_pct,
                baseline_cpu_pct,
                seconds,
            } => println!(
                "idle: a control plane (BIRD) adds {cpu_pct:.2}% of a core to an idle VR (daemon and VR alone {baseline_cpu_pct:.2}%, {seconds} s each)"
            ),
        }
    }
}
