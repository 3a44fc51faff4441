//! `convergence`: a full table from a BGP peer into a VR's FIB through its
//! control plane. The peer is BIRD in the sink's namespace (10.0.2.2, AS
//! 65002) with the table as static routes, exported to the VR's BIRD (AS
//! 65001, in the VR's control namespace), which exports them to its
//! kernel table; vrhost follows that table into the VR. Measured from
//! the moment the session is seen established (polled every 100 ms):
//! until the control namespace's kernel table holds every route
//! (`bird_kernel_s`, polled with `ip route` every second) and until the
//! VR's FIB does (`vrhost_fib_s`, the count of its control-plane routes
//! through the API, every second). Prefixes in 10.0.0.0/8 and
//! 198.51.0.0/16 (the rig's own) are left out of the table.
//!
//! All along, a numbered flow (`--pps`) goes to 198.51.100.7, whose
//! route (`/32 via 10.0.2.2`) is in the control namespace's kernel table
//! before the peer starts: the gaps in the numbers the sink got, from the
//! first datagram to the last, are `lost_on_installed`.

use std::net::{Ipv4Addr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{ControlPlaneArgs, Record, Rig};
use crate::{Context, Result, bail};

/// A bound against a hung run, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(1800);

/// Kills the peer when dropped.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The table's prefixes, the rig's own left out, at most `n`.
fn prefixes(file: &str, n: Option<usize>) -> Result<Vec<(Ipv4Addr, u8)>> {
    let set = vrhost_fib::import::read_routes(Path::new(file), &Default::default())
        .with_context(|| file.to_string())?;
    let ours = |a: Ipv4Addr| a.octets()[0] == 10 || a.octets()[..2] == [198, 51];
    let mut v: Vec<(Ipv4Addr, u8)> = set
        .ipv4()
        .map(|r| (Ipv4Addr::from(r.prefix), r.len))
        .filter(|&(a, l)| l >= 8 && !ours(a))
        .collect();
    v.sort_unstable();
    v.dedup();
    v.truncate(n.unwrap_or(usize::MAX));
    Ok(v)
}

fn count_lines(out: std::process::Output) -> usize {
    out.stdout.iter().filter(|&&b| b == b'\n').count()
}

/// Run `convergence`; `None` when not asked for (`--convergence-routes
/// 0`) or without `bird`.
pub(super) fn run(args: &ControlPlaneArgs) -> Result<Option<Record>> {
    if args.convergence_routes == Some(0) {
        return Ok(None);
    }
    if vrhost_host::config::find_program("bird").is_none() {
        eprintln!("convergence: skipped, no bird (Debian package bird2)");
        return Ok(None);
    }
    let table = prefixes(&args.routes, args.convergence_routes)?;
    let n = table.len();
    let rig = Rig::new("conv")?;
    // BGP crosses an af_packet port: checksums complete on the veth.
    rig.ns
        .exec("ethtool", &["-K", "s0", "tx", "off"])
        .context("ethtool -K s0 tx off")?;
    let vr_conf = rig.dir.join("vr-bird.conf");
    std::fs::write(
        &vr_conf,
        "router id 10.0.2.1;\nprotocol device { }\nprotocol kernel { ipv4 { import none; export all; }; }\nprotocol bgp peer { local 10.0.2.1 as 65001; neighbor 10.0.2.2 as 65002; connect retry time 1; ipv4 { import all; export none; }; }\n",
    )?;
    let mut peer_conf = String::from(
        "router id 10.0.2.2;\nprotocol device { }\nprotocol bgp vr { local 10.0.2.2 as 65002; neighbor 10.0.2.1 as 65001; connect retry time 1; ipv4 { import none; export all; }; }\nprotocol static st { ipv4;\n",
    );
    for (a, l) in &table {
        peer_conf.push_str(&format!("route {a}/{l} blackhole;\n"));
    }
    peer_conf.push_str("}\n");
    let peer_file = rig.dir.join("peer.conf");
    std::fs::write(&peer_file, peer_conf)?;
    let vr = format!("bcc{}", std::process::id());
    let control = format!(
        "control_plane = \"bird\"\ncontrol_config = {:?}",
        vr_conf.display().to_string()
    );
    let daemon = rig.daemon(&vr, &control, args.pps, true)?;
    let ns = format!("vrctl-{vr}");
    // The installed route and its flow, before the table comes.
    let ok = Command::new("ip")
        .args([
            "-n",
            &ns,
            "route",
            "add",
            "198.51.100.7/32",
            "via",
            "10.0.2.2",
            "proto",
            "static",
        ])
        .status()?;
    if !ok.success() {
        bail!("ip -n {ns} route add 198.51.100.7/32: {ok}");
    }
    let sink = Sink::start(&rig)?;
    let peer_sock = rig.dir.join("peer.ctl");
    let _peer = Peer(
        rig.ns
            .command("bird")
            .arg("-f")
            .arg("-c")
            .arg(&peer_file)
            .arg("-s")
            .arg(&peer_sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("the peer's bird")?,
    );
    let t = Instant::now();
    loop {
        let out = Command::new("birdc")
            .arg("-s")
            .arg(&peer_sock)
            .args(["show", "protocols", "vr"])
            .output()?;
        if String::from_utf8_lossy(&out.stdout).contains("Established") {
            break;
        }
        if t.elapsed() > PATIENCE {
            bail!("the BGP session did not come up");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let t0 = Instant::now();
    let api = daemon_api(&rig);
    let (mut kernel_s, mut fib_s) = (None, None);
    while kernel_s.is_none() || fib_s.is_none() {
        if kernel_s.is_none() {
            let out = Command::new("ip")
                .args(["-n", &ns, "-4", "route", "show", "proto", "bird"])
                .output()?;
            if count_lines(out) >= n {
                kernel_s = Some(t0.elapsed().as_secs_f64());
            }
        }
        if fib_s.is_none() && fib_count(&api, &vr)? >= n {
            fib_s = Some(t0.elapsed().as_secs_f64());
        }
        if t0.elapsed() > PATIENCE {
            bail!("{n} routes not installed within {PATIENCE:?}");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let (received, lost) = sink.stop();
    drop(daemon);
    Ok(Some(Record::Convergence {
        routes: n,
        bird_kernel_s: kernel_s.unwrap_or(f64::NAN),
        vrhost_fib_s: fib_s.unwrap_or(f64::NAN),
        lost_on_installed: lost,
        received_on_installed: received,
    }))
}

/// The sink of the numbered flow: a thread counting datagrams and the
/// numbers between the first and the last.
struct Sink {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(u64, Option<(u64, u64)>)>,
}

impl Sink {
    /// Bind in the sink's namespace and wait for the flow's first
    /// datagram.
    fn start(rig: &Rig) -> Result<Self> {
        let sock = match rig.ns.run(|| UdpSocket::bind(("0.0.0.0", super::DPORT))) {
            Ok(s) => s.context("the sink's UDP socket")?,
            Err(e) => bail!("sink namespace: {e}"),
        };
        // Room for seconds of the flow: this process's polling of a 512K
        // route table must not be what drops it.
        rustix::net::sockopt::set_socket_recv_buffer_size_force(&sock, 64 << 20)?;
        sock.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut buf = [0u8; 64];
        sock.recv(&mut buf)
            .context("no frame on the installed route")?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut n, mut span): (u64, Option<(u64, u64)>) = (0, None);
            let mut buf = [0u8; 2048];
            while !stopping.load(Ordering::Relaxed) {
                let Ok(len) = sock.recv(&mut buf) else {
                    continue;
                };
                let Some(b) = buf[..len].get(..8) else {
                    continue;
                };
                let seq = u64::from_be_bytes(b.try_into().expect("8 bytes"));
                n += 1;
                span = Some(span.map_or((seq, seq), |(a, z)| (a.min(seq), z.max(seq))));
            }
            (n, span)
        });
        Ok(Self { stop, thread })
    }

    /// Datagrams received, and the numbers missing between the first and
    /// the last.
    fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let (n, span) = self.thread.join().unwrap_or((0, None));
        let expected = span.map_or(0, |(a, z)| z - a + 1);
        (n, expected.saturating_sub(n))
    }
}

/// The daemon's API socket in the rig.
fn daemon_api(rig: &Rig) -> std::path::PathBuf {
    rig.dir.join("api.sock")
}

/// Routes of origin control-plane in VR `vr`.
fn fib_count(api: &Path, vr: &str) -> Result<usize> {
    let c = vrhost_client::Client::new(vrhost_client::Endpoint::Unix(api.to_path_buf()), None)?
        .with_timeout(Duration::from_secs(120));
    let page: serde_json::Value = c
        .get(&format!("/v1/vrs/{vr}/routes?origin=control-plane&limit=1"))?
        .decode()?;
    Ok(page["total"].as_u64().unwrap_or(0) as usize)
}
