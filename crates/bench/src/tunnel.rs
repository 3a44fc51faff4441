//! `vrhost bench tunnel`: what a tunnel vNIC costs the host worker per
//! frame against a plain vNIC, in memory.
//!
//! One worker, one built-in router VR run in the worker's thread (the
//! in-process backend: no VR process, so the worker's CPU time is the
//! whole path), two in-memory ports that replay prebuilt frames of 64 UDP
//! flows and count what they are sent. The VR's vNIC 0 is on port 0 (the
//! underlay), plain or the endpoint of a `vxlan`, `udp` or `ipip` tunnel;
//! vNIC 1 is plain on port 1. Two directions, each measured alone:
//! - `decap`: frames arrive on port 0 (encapsulated for a tunnel), are
//!   routed out of vNIC 1;
//! - `encap`: frames arrive on port 1, are routed out of vNIC 0
//!   (encapsulated for a tunnel).
//!
//! Each point is the worker thread's CPU time over the frames forwarded,
//! the median of `--runs` runs; `overhead_ns` is the difference to the
//! plain vNIC in the same direction and the same invocation.

use std::net::Ipv4Addr;

use serde::Serialize;
use vrhost_host::classify::{Classifier, Match, Rule};
use vrhost_host::tunnel::{Tunnel, TunnelKind, TunnelTable};
use vrhost_host::{Backend, PathSpec, VrPath, Worker};
use vrhost_io::{Port, PortStats};
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;
use vrhost_packet::tunnel::{EncapKind, EncapRepr};
use vrhost_router::{NeighbourConfig, Router, RouterConfig, VnicConfig};

use crate::machine::Machine;
use crate::{Result, bail};

/// Options of `vrhost bench tunnel`.
#[derive(Debug, Clone, clap::Args)]
pub struct TunnelArgs {
    /// Frames per run.
    #[arg(long, default_value_t = 1_000_000)]
    pub frames: u64,
    /// Runs per point (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Frame length of the inner frames, 64..=1400.
    #[arg(long, default_value_t = 64)]
    pub frame_bytes: usize,
    /// Where the report goes: `--json`, `--out FILE`.
    #[command(flatten)]
    pub output: crate::report::Output,
}

/// One point.
#[derive(Debug, Clone, Serialize)]
pub struct TunnelRecord {
    /// "tunnel".
    pub experiment: &'static str,
    /// `plain`, `vxlan`, `udp` or `ipip`.
    pub kind: &'static str,
    /// `decap` (in through vNIC 0) or `encap` (out through vNIC 0).
    pub direction: &'static str,
    /// Inner frame length.
    pub frame_bytes: usize,
    /// Frames forwarded in the median run.
    pub frames: u64,
    /// Worker CPU time per frame forwarded, ns (median of the runs).
    pub host_ns_per_frame: f64,
    /// Minus the plain vNIC's in the same direction, ns.
    pub overhead_ns: f64,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct TunnelReport {
    /// "tunnel".
    pub bench: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// The points.
    pub results: Vec<TunnelRecord>,
}

const VNIC0_MAC: [u8; 6] = [2, 0, 0, 0, 0x20, 0];
const VNIC1_MAC: [u8; 6] = [2, 0, 0, 0, 0x20, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0x20, 9];
const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const FLOWS: u16 = 64;

/// A port that replays its frames, in turn, until it gave `left` of them,
/// and counts what it is sent.
struct Replay {
    frames: Vec<Vec<u8>>,
    next: usize,
    left: u64,
    stats: PortStats,
}

impl Port for Replay {
    fn name(&self) -> &str {
        "replay"
    }

    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        let n = (out.len() as u64).min(self.left) as usize;
        for o in &mut out[..n] {
            *o = &self.frames[self.next];
            self.next = (self.next + 1) % self.frames.len();
        }
        self.left -= n as u64;
        n
    }

    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        self.stats.tx_packets += frames.len() as u64;
        frames.len()
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

fn tunnel(kind: TunnelKind) -> Tunnel {
    Tunnel {
        kind,
        port: 0,
        local: LOCAL,
        remote: REMOTE,
        udp_port: match kind {
            TunnelKind::Vxlan => 4789,
            TunnelKind::Udp => 6000,
            TunnelKind::Ipip => 0,
        },
        vni: if kind == TunnelKind::Vxlan { 42 } else { 0 },
        local_mac: [2, 0, 0, 0, 0x20, 2],
        remote_mac: Some(PEER_MAC),
        inner_mac: VNIC0_MAC,
    }
}

/// Flow `i` of `len` bytes from `src` to `dst`, to `dst_mac`.
fn udp(len: usize, i: u16, src: Ipv4Addr, dst: Ipv4Addr, dst_mac: [u8; 6]) -> Result<Vec<u8>> {
    let mut f = vec![0u8; len];
    UdpFrameSpec {
        dst_mac: MacAddr(dst_mac),
        src_mac: MacAddr(PEER_MAC),
        src_ip: src,
        dst_ip: dst,
        sport: 1000 + i,
        dport: 9,
        ttl: 64,
        frame_bytes: len,
    }
    .write(&mut f)
    .map_err(|e| crate::failed!("frame: {e}"))?;
    Ok(f)
}

/// `inner` as the remote endpoint of `t` sends it.
fn encapsulated(t: &Tunnel, inner: &[u8]) -> Result<Vec<u8>> {
    let kind = match t.kind {
        TunnelKind::Vxlan => EncapKind::Vxlan(t.vni),
        TunnelKind::Udp => EncapKind::Udp,
        TunnelKind::Ipip => EncapKind::Ipip,
    };
    let strip = if kind == EncapKind::Ipip { 14 } else { 0 };
    let mut f = vec![0u8; kind.overhead()];
    EncapRepr {
        kind,
        dst_mac: t.local_mac,
        src_mac: PEER_MAC,
        src: REMOTE,
        dst: LOCAL,
        ident: 1,
        ttl: 64,
        src_port: 40000,
        dst_port: t.udp_port,
    }
    .emit(&mut f, inner.len() - strip)
    .map_err(|e| crate::failed!("encapsulation: {e}"))?;
    f.extend_from_slice(&inner[strip..]);
    Ok(f)
}

fn router() -> RouterConfig {
    let mac = |m: [u8; 6]| MacAddr(m).to_string();
    RouterConfig {
        vnics: vec![
            VnicConfig {
                mac: mac(VNIC0_MAC),
                addrs: vec!["10.1.0.1/24".into()],
                mtu: None,
            },
            VnicConfig {
                mac: mac(VNIC1_MAC),
                addrs: vec!["10.2.0.1/24".into()],
                mtu: None,
            },
        ],
        neighbours: vec![
            NeighbourConfig {
                ip: "10.1.0.2".into(),
                mac: mac(PEER_MAC),
                vnic: Some(0),
            },
            NeighbourConfig {
                ip: "10.2.0.2".into(),
                mac: mac(PEER_MAC),
                vnic: Some(1),
            },
        ],
        ..RouterConfig::default()
    }
}

fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// One run: frames forwarded and the worker's CPU ns per frame.
fn run_once(args: &TunnelArgs, t: Option<Tunnel>, decap: bool) -> Result<(u64, f64)> {
    let (a, b) = (Ipv4Addr::new(10, 1, 0, 2), Ipv4Addr::new(10, 2, 0, 2));
    let mut frames = Vec::new();
    for i in 0..FLOWS {
        frames.push(match (decap, &t) {
            (true, None) => udp(args.frame_bytes, i, a, b, VNIC0_MAC)?,
            (true, Some(t)) => encapsulated(t, &udp(args.frame_bytes, i, a, b, VNIC0_MAC)?)?,
            (false, _) => udp(args.frame_bytes, i, b, a, VNIC1_MAC)?,
        });
    }
    let (into, out) = if decap { (0, 1) } else { (1, 0) };
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    for p in 0..2 {
        ports.push(Box::new(Replay {
            frames: if p == into {
                frames.clone()
            } else {
                vec![Vec::new()]
            },
            next: 0,
            left: if p == into { args.frames } else { 0 },
            stats: PortStats::default(),
        }));
    }
    let rule = |port, vnic| Rule {
        m: Match {
            in_port: Some(port),
            ..Match::default()
        },
        vr: 0,
        vnic,
    };
    let mut classifier = Classifier::new(&[rule(0, 0), rule(1, 1)])?;
    let mut spec = PathSpec::new("bench-tunnel", vec![0, 1], 4096);
    if let Some(t) = t {
        let mut table = TunnelTable::default();
        table.add(t, 0, 0);
        classifier.set_tunnels(table);
        spec.tunnels = vec![Some(t), None];
    }
    let mut w = Worker::new(ports, classifier, Default::default())?;
    let r = Router::new(&router()).map_err(crate::BenchError::Failed)?;
    let region = spec.create_region()?;
    w.add_vr(VrPath::assemble(
        &spec,
        region,
        Backend::InProcRouter(Box::new(r)),
        vec![],
    ));
    let t0 = thread_cpu_ns();
    let mut idle = 0;
    while idle < 3 {
        idle = if w.poll_once() == 0 { idle + 1 } else { 0 };
    }
    let ns = thread_cpu_ns() - t0;
    let sent = w.ports()[out].stats().tx_packets;
    if sent < args.frames {
        bail!(
            "{sent} of {} frames forwarded: {:?}",
            args.frames,
            w.vrs()[0].stats()
        );
    }
    Ok((sent, ns as f64 / sent as f64))
}

/// Measure every point and print the report.
///
/// # Errors
/// Bad options, a run that did not forward every frame.
pub fn run(args: &TunnelArgs) -> Result<()> {
    if args.runs == 0 || args.frames == 0 || !(64..=1400).contains(&args.frame_bytes) {
        bail!("--runs and --frames must be above 0, --frame-bytes 64..=1400");
    }
    let kinds = [
        ("plain", None),
        ("vxlan", Some(TunnelKind::Vxlan)),
        ("udp", Some(TunnelKind::Udp)),
        ("ipip", Some(TunnelKind::Ipip)),
    ];
    let mut results: Vec<TunnelRecord> = Vec::new();
    for (direction, decap) in [("decap", true), ("encap", false)] {
        for (name, kind) in kinds {
            let mut runs = (0..args.runs)
                .map(|_| run_once(args, kind.map(tunnel), decap))
                .collect::<Result<Vec<_>>>()?;
            runs.sort_by(|a, b| a.1.total_cmp(&b.1));
            let (frames, ns) = runs[runs.len() / 2];
            let plain = results
                .iter()
                .find(|r| r.direction == direction && r.kind == "plain")
                .map_or(ns, |r| r.host_ns_per_frame);
            results.push(TunnelRecord {
                experiment: "tunnel",
                kind: name,
                direction,
                frame_bytes: args.frame_bytes,
                frames,
                host_ns_per_frame: ns,
                overhead_ns: ns - plain,
            });
        }
    }
    let report = TunnelReport {
        bench: "tunnel",
        machine: Machine::this(),
        results,
    };
    crate::report::emit(&report, &args.output, print_table)
}

fn print_table(r: &TunnelReport) {
    println!(
        "tunnel vNIC vs plain vNIC, worker CPU per frame (in-process router VR), {} B inner frames",
        r.results.first().map_or(0, |x| x.frame_bytes)
    );
    println!(
        "{:<8} {:<6} {:>12} {:>12}",
        "dir", "kind", "ns/frame", "overhead ns"
    );
    for x in &r.results {
        println!(
            "{:<8} {:<6} {:>12.1} {:>12.1}",
            x.direction, x.kind, x.host_ns_per_frame, x.overhead_ns
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_forwards_every_frame_both_ways_through_the_router() {
        let args = TunnelArgs {
            frames: 2000,
            runs: 1,
            frame_bytes: 100,
            output: crate::report::Output {
                json: false,
                out: None,
            },
        };
        for kind in [
            None,
            Some(TunnelKind::Vxlan),
            Some(TunnelKind::Udp),
            Some(TunnelKind::Ipip),
        ] {
            for decap in [true, false] {
                let (n, ns) = run_once(&args, kind.map(tunnel), decap).unwrap();
                assert_eq!(n, 2000, "{kind:?} decap {decap}");
                assert!(ns > 0.0);
            }
        }
    }
}
