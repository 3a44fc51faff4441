//! The vrhost node of the forwarding bench: its XDP sink, ports, NAPI threads and daemon config.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use vrhost_client::{Client, Endpoint};
use vrhost_lab::{Daemon, Lab};

use super::{ForwardArgs, GEN_MAC, GEN6, P0_6, P0_MAC, P1_6, P1_MAC, SINK_MAC, SINK6, Table};
use crate::{Context, Result, bail};

/// The XDP sink object, written to a file `ip` can load.
pub(crate) fn xdp_sink_obj() -> Result<PathBuf> {
    let p = std::env::temp_dir().join(format!("vrhost-xdp-sink-{}.o", std::process::id()));
    std::fs::File::create(&p)?.write_all(vrhost_io::XDP_SINK_OBJ)?;
    Ok(p)
}

/// Set up the node for `fwd` (kernel, a vrhost driver, `fast`: vrhost
/// with `[host] fast_path = true` and the VR on the fast path, on af_xdp
/// ports, or `tap`: a tap VR on af_xdp ports, its namespace's Linux
/// forwarding), returning the daemon if vrhost forwards.
pub(crate) fn setup_node(
    args: &ForwardArgs,
    lab: &Lab,
    fwd: &str,
    table: &Table,
    dir: &Path,
) -> Result<Option<(Daemon, Client)>> {
    setup_node_on(args, lab, fwd, None, table, dir)
}

/// [`setup_node`], with the fast path on and the VR on `path` (`fast` or
/// `slow`; `fast` is the default of forwarder `fast`) if given.
pub(crate) fn setup_node_on(
    args: &ForwardArgs,
    lab: &Lab,
    fwd: &str,
    path: Option<&str>,
    table: &Table,
    dir: &Path,
) -> Result<Option<(Daemon, Client)>> {
    let node = lab.ns("node");
    let kernel = fwd == "kernel" || fwd == "kernel_norps";
    // The fast path redirects the replies (ping, TCP's ACKs) into p0, and
    // a veth delivers redirected frames only when its peer has NAPI: GRO
    // on the generator's eth0 for it and for `af_xdp_txlive`, whose p0
    // sends xdp_frames (off for every other forwarder).
    let gro = if super::tcp::needs_gen_gro(fwd) {
        "on"
    } else {
        "off"
    };
    lab.ns("gen")
        .exec("ethtool", &["-K", "eth0", "gro", gro])
        .with_context(|| format!("GRO {gro} on the generator's eth0"))?;
    for (dev, addr, addr6) in [("p0", "10.1.0.1/24", P0_6), ("p1", "10.1.1.1/24", P1_6)] {
        let _ = node.ip(&["addr", "flush", "dev", dev]);
        if kernel {
            node.ip(&["addr", "add", addr, "dev", dev])?;
            let a6 = format!("{addr6}/64");
            node.ip(&["-6", "addr", "add", &a6, "dev", dev, "nodad"])?;
        }
    }
    let _ = node.ip(&["route", "flush", "proto", "static"]);
    if kernel {
        // kernel_norps: forwarded in the softirq of the core that received
        // (with live-split, the forwarder's; with live, the generator's).
        let rps = if fwd == "kernel" {
            1u64 << args.fwd_cpu
        } else {
            0
        };
        node.sysctl("net.ipv4.ip_forward", "1")?;
        node.sysctl("net.ipv6.conf.all.forwarding", "1")?;
        kernel_tables(&node, ["p0", "p1"], table, dir)?;
        node.exec(
            "sh",
            &[
                "-c",
                &format!("echo {rps:x} > /sys/class/net/p0/queues/rx-0/rps_cpus"),
            ],
        )?;
        return Ok(None);
    }
    if fwd == MINIMAL {
        // The kernel forwards nothing (what the minimal router passes
        // stays there); the router is attached by [`minimal_router`].
        kernel_forwarding_off(&node)?;
        return Ok(None);
    }
    let (driver, path) = match fwd {
        "fast" => ("af_xdp", Some(path.unwrap_or("fast"))),
        "af_xdp_dedicated" | "af_xdp_dedicated_txlive" => ("af_xdp", path),
        "af_xdp_txlive" => ("af_xdp", path),
        "tap" => ("af_xdp", None),
        d => (d, path),
    };
    let tap = fwd == "tap";
    let vrhost = start_vrhost(args, lab, (driver, fwd), path, table, dir)?;
    if tap {
        // Made by the daemon (forwarding on there), removed by it.
        let ns = vrhost_lab::Netns::existing(TAP_NS);
        kernel_tables(&ns, ["vnic0", "vnic1"], table, dir)?;
    }
    Ok(Some(vrhost))
}

/// The forwarder that is the minimal XDP router (`ebpf/xdp_minrouter.c`)
/// on each of the node's ports, forwarding every IPv4 frame to the other
/// side's end host: no VR, no select table, no route lookup (the table is
/// not used), the reference for what XDP itself gets on the lab's veths.
pub(crate) const MINIMAL: &str = "minimal";

/// For forwarder [`MINIMAL`], the minimal router attached to `p0`
/// (frames to the sink) and `p1` (frames to the generator), held until
/// dropped; nothing for any other forwarder.
pub(crate) fn minimal_router(lab: &Lab, fwd: &str) -> Result<Vec<vrhost_fast::MinimalRouter>> {
    if fwd != MINIMAL {
        return Ok(Vec::new());
    }
    let mac = |m: &str| -> Result<[u8; 6]> {
        let b: Vec<u8> = m
            .split(':')
            .map(|x| u8::from_str_radix(x, 16))
            .collect::<std::result::Result<_, _>>()
            .with_context(|| format!("MAC {m}"))?;
        b.try_into()
            .map_err(|_| crate::BenchError::Failed(format!("MAC {m}")))
    };
    let (gen_mac, sink_mac, p0_mac, p1_mac) =
        (mac(GEN_MAC)?, mac(SINK_MAC)?, mac(P0_MAC)?, mac(P1_MAC)?);
    lab.ns("node")
        .run(|| {
            Ok::<_, vrhost_fast::FastError>(vec![
                vrhost_fast::MinimalRouter::attach("p0", "p1", sink_mac, p1_mac)?,
                vrhost_fast::MinimalRouter::attach("p1", "p0", gen_mac, p0_mac)?,
            ])
        })?
        .context("attach the minimal XDP router to p0 and p1")
}

/// The node's kernel forwards nothing, IPv4 or IPv6, and spreads nothing
/// by RPS: another forwarder is on its ports.
fn kernel_forwarding_off(node: &vrhost_lab::Netns) -> Result<()> {
    node.sysctl("net.ipv4.ip_forward", "0")?;
    node.sysctl("net.ipv6.conf.all.forwarding", "0")?;
    node.exec(
        "sh",
        &["-c", "echo 0 > /sys/class/net/p0/queues/rx-0/rps_cpus"],
    )?;
    Ok(())
}

/// An `ip -batch` file of the table's routes (and a default route) via
/// the sink; its path.
fn route_batch(table: &Table, dir: &Path) -> Result<String> {
    let batch = dir.join("routes.batch");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&batch)?);
    for (p, l) in &table.routes {
        writeln!(
            f,
            "route replace {}/{l} via 10.1.1.2 proto static",
            std::net::Ipv4Addr::from(*p)
        )?;
    }
    writeln!(f, "route replace default via 10.1.1.2 proto static")?;
    f.flush()?;
    Ok(batch.display().to_string())
}

/// The Linux tables of a forwarding namespace `ns` (the node for the
/// kernel forwarder, the tap VR's namespace) whose interfaces toward the
/// generator and the sink are `devs`: the end hosts as permanent
/// neighbours, and a full table's routes via the sink.
fn kernel_tables(ns: &vrhost_lab::Netns, devs: [&str; 2], table: &Table, dir: &Path) -> Result<()> {
    for (ip, mac, dev) in [
        ("10.1.1.2", SINK_MAC, devs[1]),
        ("10.1.0.2", GEN_MAC, devs[0]),
        (SINK6, SINK_MAC, devs[1]),
        (GEN6, GEN_MAC, devs[0]),
    ] {
        ns.ip(&[
            "neigh",
            "replace",
            ip,
            "lladdr",
            mac,
            "dev",
            dev,
            "nud",
            "permanent",
        ])
        .with_context(|| format!("neighbours in {}", ns.name()))?;
    }
    if table.full() {
        ns.ip(&["-batch", &route_batch(table, dir)?])?;
    }
    Ok(())
}

/// Start vrhost on the node (its addresses already flushed): ports of
/// `driver`, one router VR (a tap VR with `tap`); with `path` (`fast` or
/// `slow`), the fast path on and the VR on that path.
fn start_vrhost(
    args: &ForwardArgs,
    lab: &Lab,
    (driver, fwd): (&str, &str),
    path: Option<&str>,
    table: &Table,
    dir: &Path,
) -> Result<(Daemon, Client)> {
    let node = lab.ns("node");
    let dedicated = fwd == "af_xdp_dedicated" || fwd == "af_xdp_dedicated_txlive";
    let tap = fwd == "tap";
    kernel_forwarding_off(&node)?;
    let cfg = dir.join(format!("vrhost-{fwd}.toml"));
    let mut src = daemon_config(args, (driver, dedicated), table, path);
    if tap {
        src = tap_vr(&src);
    }
    // `af_xdp_txlive`, `af_xdp_dedicated_txlive`: both ports send through
    // the XDP test run
    // (`ports[].tx`): the sink's eth0 runs the XDP sink and the
    // generator's has GRO on, so both take xdp_frames.
    let tx = match fwd {
        "af_xdp_txlive" | "af_xdp_dedicated_txlive" => Some("xdp"),
        "af_xdp" => args.af_xdp_tx.as_deref(),
        _ => None,
    };
    if let Some(tx) = tx {
        src = src.replace(
            "driver = \"af_xdp\"\n",
            &format!("driver = \"af_xdp\"\ntx = \"{tx}\"\n"),
        );
    }
    std::fs::write(&cfg, src)?;
    // Its API (a unix socket outside the namespaces) for the loss counters.
    let sock = dir.join(format!("vrhost-{fwd}.sock"));
    let daemon = Daemon::start(&cfg, Some(node.name()), 0, &sock.display().to_string())?;
    let api = Client::new(Endpoint::Unix(sock), None)?.with_timeout(Duration::from_secs(10));
    // veth runs its NAPI poll (with the XDP program and the copy into an
    // AF_XDP socket) on the sender's CPU unless NAPI is threaded; a veth
    // has NAPI only with an XDP program (or GRO) on it.
    if args.threaded_napi {
        for dev in ["p0", "p1"] {
            node.exec(
                "sh",
                &["-c", &format!("echo 1 > /sys/class/net/{dev}/threaded")],
            )
            .with_context(|| {
                format!("threaded NAPI on {dev} (needs an XDP program on it: af_xdp)")
            })?;
        }
        pin_napi_threads(&["p0", "p1"], args.fwd_cpu)?;
    }
    Ok((daemon, api))
}

/// Pin the NAPI kernel threads of the node's `devs` (`napi/DEV-ID`) to
/// `cpu`, beside the host worker, as RPS puts the kernel's forwarding
/// there: the generator's core keeps the end hosts' work only. Returns
/// the threads' pids.
pub(crate) fn pin_napi_threads(devs: &[&str], cpu: usize) -> Result<Vec<u32>> {
    let mut pinned = Vec::new();
    for e in std::fs::read_dir("/proc").context("/proc")? {
        let Ok(e) = e else { continue };
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) else {
            continue;
        };
        if devs
            .iter()
            .any(|d| comm.trim_end().starts_with(&format!("napi/{d}-")))
        {
            let out = std::process::Command::new("taskset")
                .args(["-p", "-c", &cpu.to_string(), &pid.to_string()])
                .output()
                .context("taskset")?;
            if !out.status.success() {
                bail!(
                    "taskset {}: {}",
                    comm.trim_end(),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            pinned.push(pid);
        }
    }
    if pinned.len() < devs.len() {
        bail!(
            "found {} NAPI threads of {devs:?}, want {}",
            pinned.len(),
            devs.len()
        );
    }
    Ok(pinned)
}

/// The tap VR's namespace (its VR is `bench`).
pub(super) const TAP_NS: &str = "vrctl-bench";

/// `config` (of [`daemon_config`]) with its VR a tap VR: the vNICs' TAPs
/// get the node's addresses, the namespace routes (no router table).
fn tap_vr(config: &str) -> String {
    let router = config.find("[vrs.router]").unwrap_or(config.len());
    let rules = config.find("[[rules]]").unwrap_or(config.len());
    let vr = config[..router].replace(
        &format!("vnics = [{{ port = \"p0\", mac = \"{P0_MAC}\" }}, {{ port = \"p1\", mac = \"{P1_MAC}\" }}]"),
        &format!("kind = \"tap\"\nvnics = [{{ port = \"p0\", mac = \"{P0_MAC}\", addrs = [\"10.1.0.1/24\", \"{P0_6}/64\"] }}, {{ port = \"p1\", mac = \"{P1_MAC}\", addrs = [\"10.1.1.1/24\", \"{P1_6}/64\"] }}]"),
    );
    format!("{vr}\n{}", &config[rules.max(router)..])
}

/// The daemon config of the vrhost forwarder with driver `driver`; with
/// `path`, the fast path on (room for the table's routes) and the VR on
/// `path`.
pub(super) fn daemon_config(
    args: &ForwardArgs,
    (driver, dedicated): (&str, bool),
    table: &Table,
    path: Option<&str>,
) -> String {
    let mut routes = String::from(
        "routes = [{ prefix = \"10.1.1.0/24\", nexthop = 0 }, { prefix = \"10.1.0.0/24\", via = \"10.1.0.2\", vnic = 0 }",
    );
    if table.full() {
        routes.push_str(", { prefix = \"0.0.0.0/0\", nexthop = 0 }");
    }
    // IPv6 the same way, but for a VR the fast path may carry (IPv4 only).
    let mut neighbours = format!("{{ ip = \"10.1.0.2\", mac = \"{GEN_MAC}\", vnic = 0 }}");
    if path.is_none() {
        routes.push_str(&format!(
            ", {{ prefix = \"2001:db8:2::/64\", nexthop = 0 }}, {{ prefix = \"2001:db8:1::/64\", via = \"{GEN6}\", vnic = 0 }}"
        ));
        neighbours.push_str(&format!(
            ", {{ ip = \"{GEN6}\", mac = \"{GEN_MAC}\", vnic = 0 }}"
        ));
    }
    routes.push(']');
    // The full table as a route file: the daemon puts its routes in the
    // fast path's maps too (one batch per 16K routes).
    let route_file = table
        .file
        .as_ref()
        .map(|f| format!("route_file = \"{}\"\n", f.display()))
        .unwrap_or_default();
    let rings = if driver == "af_xdp" {
        format!(
            "ring_size = {}\nframes = {}\n",
            args.xdp_ring, args.xdp_frames
        )
    } else {
        String::new()
    };
    // A dedicated port's UMEM is the VR's pool (see [`dedicated_ports`]).
    let (n_dedicated, frames) = dedicated_ports(args);
    let dedicated_rings = format!(
        "ring_size = {}\nframes = {frames}\ndedicated = \"bench\"\n",
        args.xdp_ring,
    );
    let p0_rings = match dedicated {
        true => dedicated_rings.clone(),
        false => rings.clone(),
    };
    let rings = match dedicated && n_dedicated == 2 {
        true => dedicated_rings,
        false => rings,
    };
    let (fast_path, fast, vr_path) = match path {
        Some(p) => (
            "fast_path = true\n",
            format!(
                "[host.fast]\nmax_routes = {}\ncpus = {:?}\n",
                table.len().max(16) + 16,
                args.fast_cpus
            ),
            format!("path = \"{p}\""),
        ),
        None => ("", String::new(), String::new()),
    };
    format!(
        r#"[host]
cpu = {cpu}
{fast_path}[host.poll]
busy_poll_us = {busy_poll_us}
{poll}{fast}
[[ports]]
name = "p0"
driver = "{driver}"
interface = "p0"
{p0_rings}
[[ports]]
name = "p1"
driver = "{driver}"
interface = "p1"
{rings}
[[vrs]]
name = "bench"
{vr_cpu}
{vr_path}
slots = {slots}
vnics = [{{ port = "p0", mac = "{P0_MAC}" }}, {{ port = "p1", mac = "{P1_MAC}" }}]
[vrs.router]
nexthops = [{{ vnic = 1, mac = "{SINK_MAC}" }}]
neighbours = [{neighbours}]
{routes}
{route_file}
[[rules]]
port = "p0"
vr = "bench"
vnic = 0

[[rules]]
port = "p1"
vr = "bench"
vnic = 1
"#,
        cpu = args.fwd_cpu,
        slots = args.slots,
        busy_poll_us = args.busy_poll_us,
        poll = poll_keys(args),
        vr_cpu = args
            .vr_cpu
            .map(|c| format!("cpu = {c}"))
            .unwrap_or_default(),
    )
}

/// The dedicated ports of forwarder `af_xdp_dedicated` (1 or 2) and each
/// one's frames: p0 and p1 both, on one UMEM, when the VR's pool holds
/// their frames with slots to spare (`--slots` of 176 or more: each takes
/// up to 3/8 of it, at least 64 frames), else p0 alone (up to half of it,
/// the other half for the frames coming back from p1, copied).
pub(crate) fn dedicated_ports(args: &ForwardArgs) -> (u32, u32) {
    let two = args.xdp_frames.min(args.slots / 8 * 3);
    if two >= 64 {
        (2, two)
    } else {
        (1, args.xdp_frames.min(args.slots / 2))
    }
}

/// The `[host.poll]` keys the bench's options set (the daemon's defaults
/// for the others).
fn poll_keys(args: &ForwardArgs) -> String {
    [
        ("nap_us", args.nap_us),
        ("spin_rounds", args.spin_rounds),
        ("spin_yield_every", args.spin_yield_every),
        ("colocate_pps", args.colocate_pps),
        ("tx_batch", args.tx_batch),
        ("tx_wait_us", args.tx_wait_us),
        ("flow_us", args.flow_us),
    ]
    .iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k} = {v}\n")))
    .chain(args.follow_rx.map(|v| format!("follow_rx = {v}\n")))
    .chain(args.hand_over.map(|v| format!("hand_over = {v}\n")))
    .collect()
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use vrhost_host::config::Config;

    use super::{ForwardArgs, daemon_config, dedicated_ports};
    use crate::forward::Table;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ForwardArgs,
    }

    fn dedicated(argv: &[&str]) -> Vec<Option<usize>> {
        let args = Cli::parse_from([&["forward"], argv].concat()).args;
        let table = Table::load("2").unwrap();
        let src = daemon_config(&args, ("af_xdp", true), &table, None);
        let (_, plan) = Config::parse(&src, "bench.toml", std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}\n{src}"));
        assert_eq!(
            plan.dedicated.iter().flatten().count() as u32,
            dedicated_ports(&args).0
        );
        plan.dedicated
    }

    #[test]
    fn af_xdp_dedicated_gives_the_vr_both_ports_when_its_pool_holds_them() {
        assert_eq!(dedicated(&[]), [Some(0), Some(0)]);
        assert_eq!(dedicated(&["--slots", "1024"]), [Some(0), Some(0)]);
        assert_eq!(dedicated(&["--slots", "128"]), [Some(0), None]);
    }
}
