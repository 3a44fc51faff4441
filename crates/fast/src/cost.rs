//! What the fast path's program costs per frame on its own, without a
//! device, a generator or a sink, beside a minimal XDP router measured the
//! same way in the same run ([`measure`]; `vrhost bench fastpath
//! --experiments cost`).
//!
//! The kernel's `BPF_PROG_TEST_RUN` with `repeat` runs the program on one
//! frame `repeat` times in a loop and reports the mean time of one run
//! (`bpf_test_run`: nanoseconds, rounded down; the time the thread spent
//! rescheduled is left out, so other work on the machine inflates it far
//! less than a forwarding rate). A redirect is only recorded, not done:
//! what this measures is the program (its map lookups, helpers and
//! rewrites) and the harness's loop, not the transmit.
//!
//! The test run keeps the frame between runs: the router decrements its
//! TTL each time, so one call can forward a frame at most TTL - 1 times.
//! Each call therefore starts from a frame with TTL 255 and runs it
//! [`RUNS_PER_CALL`] times, every one forwarded (checked for the router
//! in its counters: [`CostLine::forwarded`]), and the figure is the median
//! over calls. `xdp_pass` (returns at once) measures the harness's own
//! share.
//!
//! The kernel adds the program to its XDP dispatcher when a test run
//! starts and removes it when the run ends, each a `synchronize_rcu()`
//! (6-40 ms a call here) unless the program is attached somewhere: each
//! program measured is therefore attached (generic XDP) to the loopback
//! of the calling thread's namespace while it is timed, which must be a
//! namespace of the measurement's own (`bench fastpath` makes one), where
//! the loopback carries nothing.

use std::net::Ipv4Addr;

use aya::Ebpf;
use aya::programs::{TestRun, TestRunOptions, Xdp};

use crate::load::{attach_either, load_xdp, program};
use crate::{
    Action, FastConfig, FastError, FastPath, Neighbour, NextHop, Path, RouteEntry, RoutingMode,
    SelectEntry, SelectKey, VrFastConfig, ifindex,
};

use crate::minimal::PROGRAM as MIN_PROGRAM;
const PASS_PROGRAM: &str = "xdp_pass";

/// Runs per test-run call: a frame sent with TTL 255 is forwarded this
/// many times before its TTL reaches 1.
pub const RUNS_PER_CALL: u32 = 254;

/// The VR the measured router serves.
const VR: u32 = 1;
const ROUTER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];
/// The next hop's MAC is the router's own: the rewritten frame, which the
/// next run gets, still matches a select entry keyed by that MAC.
const HOP_MAC: [u8; 6] = ROUTER_MAC;
const OUT_MAC: [u8; 6] = [2, 0, 0, 0, 0xee, 1];
const OWN: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 1, 2, 1)];
const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 1, 2, 2);
const SOURCE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Timing of one program over many test-run calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunCost {
    /// The median over calls of a call's mean ns per run.
    pub ns_median: f64,
    /// The lowest call's mean.
    pub ns_min: f64,
    /// The mean over calls.
    pub ns_mean: f64,
    /// Calls made (each [`RUNS_PER_CALL`] runs).
    pub calls: u32,
    /// The verdict of the last call's last run.
    pub verdict: Action,
}

/// One program measured by [`measure`].
#[derive(Debug, Clone, PartialEq)]
pub struct CostLine {
    /// `pass` (the harness), `minimal` (`ebpf/xdp_minrouter.c`),
    /// `router` (the fast path, its VR selected by port, as the bench's
    /// daemon configures it) or `router_mac` (selected by port and MAC).
    pub program: &'static str,
    /// Routes in the router's table (0 for the others).
    pub routes: usize,
    /// Distinct frames (destinations) the calls went through in turn.
    pub frames: usize,
    /// The timing.
    pub cost: RunCost,
    /// The router: the share of its runs that it forwarded (its `fwd`
    /// counter over the runs); the others: 1 if the verdict was a
    /// redirect (`minimal`) or a pass (`pass`), else 0.
    pub forwarded: f64,
}

/// Time `prog` on `frames` in turn, `calls` calls of [`RUNS_PER_CALL`]
/// runs each.
fn time_runs(
    prog: &Xdp,
    name: &'static str,
    frames: &[Vec<u8>],
    calls: u32,
) -> Result<RunCost, FastError> {
    let mut ns = Vec::with_capacity(calls as usize);
    let mut verdict = Action::Aborted;
    for (_, frame) in (0..calls).zip(frames.iter().cycle()) {
        let r = prog
            .test_run(TestRunOptions {
                data_in: Some(frame),
                repeat: RUNS_PER_CALL,
                ..TestRunOptions::default()
            })
            .map_err(|source| FastError::Program {
                program: name,
                step: "timed test run",
                source: Box::new(source),
            })?;
        ns.push(r.duration.as_nanos() as f64);
        verdict = Action::from_raw(r.return_value);
    }
    if ns.is_empty() {
        return Err(FastError::Config {
            why: "cost: no call to time (calls 0 or no frame)",
        });
    }
    let mean = ns.iter().sum::<f64>() / ns.len() as f64;
    ns.sort_by(f64::total_cmp);
    Ok(RunCost {
        ns_median: ns[ns.len() / 2],
        ns_min: ns[0],
        ns_mean: mean,
        calls: ns.len() as u32,
        verdict,
    })
}

/// [`time_runs`] with `prog` attached to the loopback meanwhile (see the
/// module's doc), detached after.
fn time_held(
    prog: &mut Xdp,
    name: &'static str,
    lo: u32,
    frames: &[Vec<u8>],
    calls: u32,
) -> Result<RunCost, FastError> {
    if prog.fd().is_err() {
        load_xdp(prog, name)?;
    }
    // Detached when dropped, after the timing.
    let _link = attach_either(prog, name, "lo", lo)?;
    time_runs(prog, name, frames, calls)
}

/// `frame` with TTL 255 and its header checksum made again.
fn ttl_255(mut frame: Vec<u8>) -> Vec<u8> {
    frame[22] = 255;
    frame[24..26].fill(0);
    let sum = frame[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum::<u32>();
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    frame[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    frame
}

/// Destinations inside `routes`' prefixes (a host address in each of up
/// to `n` of them, spread over the table), skipping those no unicast
/// frame may go to (0/8, 127/8, 224/3) and the router's own.
fn destinations(routes: &[(u32, u8)], n: usize) -> Vec<Ipv4Addr> {
    let step = (routes.len() / n.max(1)).max(1);
    routes
        .iter()
        .step_by(step)
        .map(|&(p, len)| Ipv4Addr::from(if len >= 31 { p } else { p | 1 }))
        .filter(|a| !matches!(a.octets()[0], 0 | 127 | 224..=255) && !OWN.contains(a))
        .take(n)
        .collect()
}

/// The minimal XDP router (`ebpf/xdp_minrouter.c`), loaded, with its one
/// next hop out of the loopback.
struct MinRouter {
    ebpf: Ebpf,
}

impl MinRouter {
    fn load(lo: u32) -> Result<Self, FastError> {
        Ok(Self {
            ebpf: crate::minimal::load(HOP_MAC, OUT_MAC, lo)?,
        })
    }
}

/// A fast path as the bench's daemon sets one up for its VR (mode dst,
/// two own addresses, routes via one gateway out of the loopback), its
/// VR selected on the loopback by port, or by port and MAC (`by_mac`).
fn router(routes: &[(u32, u8)], by_mac: bool, lo: u32) -> Result<FastPath, FastError> {
    let mut fp = FastPath::load(&FastConfig {
        max_vrs: 4,
        max_routes: (routes.len() as u32).max(16) + 16,
        ..FastConfig::default()
    })?;
    fp.add_port(lo)?;
    fp.set_select(
        SelectKey {
            ifindex: lo,
            vlan: None,
            dst_mac: by_mac.then_some(ROUTER_MAC),
        },
        SelectEntry {
            vr: VR,
            path: Path::Fast,
            limit: None,
        },
    )?;
    fp.set_vr(
        VR,
        &VrFastConfig {
            mode: RoutingMode::Dst,
            addrs: OWN.to_vec(),
        },
    )?;
    let entries: Vec<RouteEntry> = routes
        .iter()
        .map(|&(p, l)| ((0, Ipv4Addr::from(p), l), NextHop::Gateway(GATEWAY)))
        .collect();
    fp.add_routes(VR, &entries)?;
    fp.set_neighbour(
        VR,
        GATEWAY,
        Neighbour {
            mac: HOP_MAC,
            src_mac: OUT_MAC,
            ifindex: lo,
        },
    )?;
    Ok(fp)
}

/// Time the router's program (and, with `references`, `xdp_pass` and the
/// minimal router) on 64-byte frames to up to `max_frames` destinations
/// in `routes`, `calls` calls each. Runs in the calling thread's network
/// namespace, which must be one of its own: its loopback is the ingress
/// and out port, and each program is attached to it while timed (see the
/// module's doc). Root only.
///
/// # Errors
/// [`FastError`] of loading or of a map; [`FastError::Config`] if no
/// route gives a usable destination.
pub fn measure(
    routes: &[(u32, u8)],
    max_frames: usize,
    calls: u32,
    references: bool,
) -> Result<Vec<CostLine>, FastError> {
    let lo = ifindex("lo")?;
    let frames: Vec<Vec<u8>> = destinations(routes, max_frames)
        .into_iter()
        .map(|d| ttl_255(crate::udp_frame(HOST_MAC, ROUTER_MAC, SOURCE, d, 64)))
        .collect();
    if frames.is_empty() {
        return Err(FastError::Config {
            why: "cost: no route gives a destination to send to",
        });
    }
    let mut out = Vec::new();
    for by_mac in [false, true] {
        let mut fp = router(routes, by_mac, lo)?;
        let before = fp.counters(VR)?;
        let prog = program(&mut fp.ebpf, crate::PROGRAM)?;
        let cost = time_held(prog, crate::PROGRAM, lo, &frames, calls)?;
        let after = fp.counters(VR)?;
        let runs = f64::from(cost.calls) * f64::from(RUNS_PER_CALL);
        out.push(CostLine {
            program: if by_mac { "router_mac" } else { "router" },
            routes: routes.len(),
            frames: frames.len(),
            cost,
            forwarded: (after.fwd - before.fwd) as f64 / runs,
        });
        if references && !by_mac {
            let pass = program(&mut fp.ebpf, PASS_PROGRAM)?;
            let cost = time_held(pass, PASS_PROGRAM, lo, &frames, calls)?;
            out.push(CostLine {
                program: "pass",
                routes: 0,
                frames: frames.len(),
                cost,
                forwarded: f64::from(u8::from(cost.verdict == Action::Pass)),
            });
        }
    }
    if references {
        let mut min = MinRouter::load(lo)?;
        let prog = program(&mut min.ebpf, MIN_PROGRAM)?;
        let cost = time_held(prog, MIN_PROGRAM, lo, &frames, calls)?;
        out.push(CostLine {
            program: "minimal",
            routes: 0,
            frames: frames.len(),
            cost,
            forwarded: f64::from(u8::from(cost.verdict == Action::Redirect)),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_with_ttl_255_keeps_a_valid_checksum() {
        let f = ttl_255(crate::udp_frame(
            HOST_MAC,
            ROUTER_MAC,
            SOURCE,
            Ipv4Addr::new(10, 1, 0, 1),
            64,
        ));
        assert_eq!(f[22], 255);
        let sum = f[14..34]
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum::<u32>();
        let sum = (sum & 0xffff) + (sum >> 16);
        assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff);
    }

    #[test]
    fn destinations_skip_group_loopback_and_own_addresses() {
        let routes = [
            (0x0a01_0000, 24),
            (0xe000_0000, 4),
            (0x7f00_0000, 8),
            (0x0a00_0000, 31),
            (0x0a01_0201, 32),
        ];
        let d = destinations(&routes, 10);
        assert_eq!(
            d,
            vec![Ipv4Addr::new(10, 1, 0, 1), Ipv4Addr::new(10, 0, 0, 0)]
        );
    }

    /// Root: every run of the router is forwarded (the figure is of the
    /// forwarding path, not of a slow-path hand-off), and the references
    /// give their verdicts.
    #[test]
    fn every_timed_run_is_forwarded() {
        let name = format!("vrhfc-{}", std::process::id());
        let ip = |a: &[&str]| {
            std::process::Command::new("ip")
                .args(a)
                .status()
                .expect("ip")
                .success()
        };
        assert!(ip(&["netns", "add", &name]), "ip netns add (root)");
        let lines = std::thread::scope(|s| {
            s.spawn(|| {
                let ns = std::fs::File::open(format!("/run/netns/{name}"));
                ns.map_err(|e| e.to_string())
                    .and_then(|f| {
                        rustix::thread::move_into_link_name_space(
                            std::os::fd::AsFd::as_fd(&f),
                            Some(rustix::thread::LinkNameSpaceType::Network),
                        )
                        .map_err(|e| e.to_string())
                    })
                    .and_then(|()| {
                        measure(&[(0x0a01_0000, 24), (0x0a01_0100, 24)], 2, 64, true)
                            .map_err(|e| e.to_string())
                    })
            })
            .join()
        });
        ip(&["netns", "del", &name]);
        let lines = lines.expect("no panic").expect("measure");
        let names: Vec<_> = lines.iter().map(|l| l.program).collect();
        assert_eq!(names, ["router", "pass", "router_mac", "minimal"]);
        for l in &lines {
            assert_eq!(l.forwarded, 1.0, "{l:?}");
            assert_eq!(l.frames, 2, "{l:?}");
            assert!(l.cost.ns_min <= l.cost.ns_median, "{l:?}");
        }
        assert_eq!(lines[0].cost.verdict, Action::Redirect);
    }
}
