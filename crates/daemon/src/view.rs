//! The daemon's counters as the API (`GET /v1/stats`) and the metrics show
//! them: one snapshot, taken by the worker between two rounds (so ports,
//! rings and counters are read together) and completed with what only the
//! control plane knows (pids' CPU time, restarts).
//!
//! The types are the API's (`vrhost-api`: `api/openapi.yaml`, schema
//! `Stats`).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use vrhost_api::{
    ControlPlaneStats, FastStats, FastTunnelStats, HostStats, InstanceStatus, PortStats, Stats,
    VnicStats, VrCounters, VrStats as VrStatsView,
};
use vrhost_fast::{FastCounters, TunnelCounters};
use vrhost_host::config::{Plan, VrPlan};
use vrhost_host::{EgressDrop, IngressDrop, InstanceInfo, Violation, VrStats, Worker};
use vrhost_proto::DropReason;
use vrhost_proto::counter;

use crate::control::{ControlError, Controller, WORKER_TIMEOUT};

/// What the worker reads for a snapshot.
struct WorkerRead {
    ports: Vec<vrhost_io::PortStats>,
    host_rx: u64,
    host_drops: Vec<u64>,
    sleeps: u64,
    naps: u64,
    colocations: u64,
    follows: u64,
    hand_overs: u64,
    heartbeats: u64,
    cpu_ns: u64,
    vrs: Vec<(String, &'static str, usize, usize, Vec<InstanceInfo>)>,
}

fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn counters(s: &VrStats) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    (
        IngressDrop::ALL
            .iter()
            .map(|d| (d.name().to_string(), s.ingress_drops[*d as usize].get()))
            .collect(),
        Violation::ALL
            .iter()
            .map(|d| (d.name().to_string(), s.violations[*d as usize].get()))
            .collect(),
    )
}

/// Take a snapshot of every counter.
///
/// # Errors
/// [`ControlError::Unavailable`] if the worker does not answer.
pub fn snapshot(ctl: &Controller) -> Result<Stats, ControlError> {
    let r = ctl.mailbox().call(WORKER_TIMEOUT, |w: &mut Worker| {
        let hs = w.stats();
        WorkerRead {
            ports: w.ports().iter().map(|p| p.stats()).collect(),
            host_rx: hs.rx_packets.get(),
            host_drops: hs.ingress_drops.iter().map(|c| c.get()).collect(),
            sleeps: hs.sleeps.get(),
            naps: hs.naps.get(),
            colocations: hs.colocations.get(),
            follows: hs.follows.get(),
            hand_overs: hs.hand_overs.get(),
            heartbeats: hs.heartbeats.get(),
            cpu_ns: thread_cpu_ns(),
            vrs: w
                .vrs()
                .iter()
                .map(|v| {
                    (
                        v.name().to_string(),
                        if v.is_quarantined() {
                            "quarantined"
                        } else if v.is_up() {
                            "running"
                        } else {
                            "stopped"
                        },
                        v.pool_slots(),
                        v.free_slots(),
                        v.instance_info(),
                    )
                })
                .collect(),
        }
    })?;
    let plan = ctl.plan();
    let ports = plan
        .ports
        .iter()
        .zip(&r.ports)
        .map(|((name, driver, iface), s)| PortStats {
            name: name.clone(),
            driver: driver.name().to_string(),
            interface: iface.clone(),
            rx_packets: s.rx_packets,
            rx_bytes: s.rx_bytes,
            rx_dropped: s.rx_dropped,
            tx_packets: s.tx_packets,
            tx_bytes: s.tx_bytes,
            tx_dropped: s.tx_dropped,
            tx_fallbacks: s.tx_fallbacks,
            tx_runs: s.tx_runs,
        })
        .collect();
    let mut violations = 0;
    let mut vrs = Vec::new();
    for (name, state, pool, free, insts) in r.vrs {
        let Some(s) = ctl.vr_stats(&name) else {
            continue;
        };
        let vp = plan.vrs.iter().find(|v| v.name == name);
        let (ingress_drops, viol) = counters(s);
        violations += s.violations_total();
        let vr_drops = vr_drops(&insts);
        let vnics = vnic_stats(s, vp, plan);
        let instances = instance_status(ctl, &name, &insts, s);
        let mut stats = vr_stats_view(s, (pool, free), (ingress_drops, viol, vr_drops), vnics);
        if let Some(f) = ctl.fast_counters(&name) {
            add_fast(&mut stats, &f);
            add_fast_tunnels(&mut stats, &ctl.fast_tunnel_counters(&name));
            if let (Some(a), Some(fs)) = (ctl.auto_state(&name), stats.fast.as_mut()) {
                fs.auto_moves = a.moves_map();
                fs.auto_rate_pps = Some(a.rate_pps() as u64);
            }
        }
        stats.control_plane = (ctl.control_plane(&name))
            // A tap VR with nothing to run has no process to report.
            .filter(|cp| cp.plan().run != vrhost_host::config::ControlRun::Nothing)
            .map(control_plane_stats);
        vrs.push(VrCounters {
            name,
            state: state.to_string(),
            stats,
            instances,
        });
    }
    Ok(Stats {
        time_s: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        uptime_s: ctl.uptime().as_secs_f64(),
        generation: ctl.generation(),
        host: HostStats {
            rx_packets: r.host_rx,
            ingress_drops: IngressDrop::ALL
                .iter()
                .map(|d| {
                    (
                        d.name().to_string(),
                        r.host_drops.get(*d as usize).copied().unwrap_or(0),
                    )
                })
                .collect(),
            sleeps: r.sleeps,
            naps: r.naps,
            colocations: r.colocations,
            follows: r.follows,
            hand_overs: r.hand_overs,
            heartbeats: r.heartbeats,
            slot_violations: violations,
            vr_restarts: ctl.restarts(),
            worker_cpu_seconds: r.cpu_ns as f64 / 1e9,
        },
        ports,
        vrs,
    })
}

/// What the instances of a VR report they dropped, by reason, summed.
fn vr_drops(insts: &[InstanceInfo]) -> BTreeMap<String, u64> {
    let mut vr_drops = BTreeMap::new();
    for i in insts {
        for d in DropReason::ALL {
            let n = i
                .vr_counters
                .get(counter::DROP_BASE + d as usize)
                .copied()
                .unwrap_or(0);
            *vr_drops.entry(d.name().to_string()).or_insert(0) += n;
        }
    }
    vr_drops
}

/// The counters of each vNIC of a VR, with the port it sends on.
fn vnic_stats(s: &VrStats, vp: Option<&VrPlan>, plan: &Plan) -> Vec<VnicStats> {
    s.vnics
        .iter()
        .enumerate()
        .map(|(i, c)| VnicStats {
            index: i as u32,
            port: vp
                .and_then(|v| v.vnic_ports.get(i))
                .and_then(|&p| plan.ports.get(p))
                .map_or_else(String::new, |p| p.0.clone()),
            rx_packets: c.rx_packets.get(),
            rx_bytes: c.rx_bytes.get(),
            tx_packets: c.tx_packets.get(),
            tx_bytes: c.tx_bytes.get(),
        })
        .collect()
}

/// Each instance of VR `name` as the region, the host and the OS show it.
fn instance_status(
    ctl: &Controller,
    name: &str,
    insts: &[InstanceInfo],
    s: &VrStats,
) -> Vec<InstanceStatus> {
    insts
        .iter()
        .map(|i| (i, s.instances.get(usize::from(i.index))))
        .map(|(i, c)| InstanceStatus {
            index: u32::from(i.index),
            pid: i.pid,
            cpu: ctl
                .instance_cpu(name, i.index)
                .and_then(|c| u32::try_from(c).ok()),
            running: i.running,
            cpu_seconds: i
                .pid
                .and_then(vrhost_host::cpu::process_cpu_ns)
                .map_or(0.0, |ns| ns as f64 / 1e9),
            sleeps: i.vr_counters.get(counter::SLEEPS).copied().unwrap_or(0),
            heartbeat: i.heartbeat,
            rx_ring_fill: i.rx_ring_fill,
            tx_ring_fill: i.tx_ring_fill,
            rx_packets: c.map_or(0, |c| c.rx_packets.get()),
            held: c.map_or(0, |c| c.held.get()),
            rx_fill_avg: c.map_or(0.0, |c| c.rx_fill_milli.get() as f64 / 1000.0),
            capacity_pps: c.map_or(0, |c| c.capacity_pps.get()),
        })
        .collect()
}

/// A VR's control plane as the API shows it.
fn control_plane_stats(cp: &crate::cplane::ControlPlane) -> ControlPlaneStats {
    let pid = cp.pid();
    ControlPlaneStats {
        running: cp.is_running(),
        pid,
        starts: cp.starts,
        restarts: cp.exits,
        routes: cp.routes().len() as u64,
        route_changes: cp.applied,
        refused: cp.refused,
        cpu_seconds: pid
            .and_then(vrhost_host::cpu::process_cpu_ns)
            .map_or(0.0, |ns| ns as f64 / 1e9),
    }
}

/// The fast path's counters of a VR as the API shows them.
pub fn fast_stats(f: &FastCounters) -> FastStats {
    let to_slow = [
        ("select", f.to_slow_select),
        ("not_ip", f.to_slow_not_ip),
        ("options", f.to_slow_options),
        ("bad_checksum", f.to_slow_bad_checksum),
        ("group", f.to_slow_group),
        ("local", f.to_slow_local),
        ("no_route", f.to_slow_no_route),
        ("ttl", f.to_slow_ttl),
        ("no_neighbour", f.to_slow_no_neighbour),
        ("no_port", f.to_slow_no_port),
    ];
    let drops = [
        ("select", f.drop_select),
        ("rate_limit", f.drop_rate_limit),
        ("bad_header", f.drop_bad_header),
    ];
    let map = |kv: &[(&str, u64)]| kv.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    FastStats {
        rx_packets: f.rx,
        forwarded: f.fwd,
        to_slow: map(&to_slow),
        drops: map(&drops),
        ..FastStats::default()
    }
}

/// Add the fast path's part to a VR's counters: what it forwarded was
/// received and sent by the VR, what it dropped was received (what it
/// handed to the slow path is counted there), so `rx_packets` and
/// `tx_packets` go on across moves. Bytes and vNIC counters stay the
/// slow path's (the program counts frames only).
fn add_fast(v: &mut VrStatsView, f: &FastCounters) {
    v.rx_packets = v
        .rx_packets
        .saturating_add(f.fwd)
        .saturating_add(f.dropped());
    v.tx_packets = v.tx_packets.saturating_add(f.fwd);
    v.fast = Some(fast_stats(f));
}

/// The fast path's counters of a VR's tunnel vNICs (`by_vnic`), in its
/// `fast.tunnels`; its headroom drops are added to the VR's
/// `egress_drops` `tunnel_headroom`, the slow path's name of the same
/// reason (what it hands to the slow path, that path counts as it sees
/// it).
fn add_fast_tunnels(v: &mut VrStatsView, by_vnic: &BTreeMap<u16, TunnelCounters>) {
    let map = |kv: &[(&str, u64)]| kv.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let Some(fs) = v.fast.as_mut() else {
        return;
    };
    for (j, t) in by_vnic {
        let to_slow = [
            ("bad_outer", t.to_slow_bad_outer),
            ("no_mac", t.to_slow_no_mac),
            ("restored", t.to_slow_restored),
        ];
        let ts = FastTunnelStats {
            decapsulated: t.decap,
            encapsulated: t.encap,
            to_slow: map(&to_slow),
            drops: map(&[("headroom", t.drop_headroom)]),
        };
        fs.tunnels.insert(j.to_string(), ts);
        if t.drop_headroom > 0 {
            let name = EgressDrop::TunnelHeadroom.name().to_string();
            let e = v.egress_drops.entry(name).or_default();
            *e = e.saturating_add(t.drop_headroom);
        }
    }
}

/// A VR's counters as the API shows them.
fn vr_stats_view(
    s: &VrStats,
    (pool, free): (usize, usize),
    (ingress_drops, violations, vr_drops): (
        BTreeMap<String, u64>,
        BTreeMap<String, u64>,
        BTreeMap<String, u64>,
    ),
    vnics: Vec<VnicStats>,
) -> VrStatsView {
    VrStatsView {
        rx_packets: s.rx_packets.get(),
        rx_bytes: s.rx_bytes.get(),
        tx_packets: s.tx_packets.get(),
        tx_bytes: s.tx_bytes.get(),
        vr_dropped: s.vr_dropped.get(),
        port_dropped: s.port_dropped.get(),
        ingress_drops,
        egress_drops: EgressDrop::ALL
            .iter()
            .map(|d| (d.name().to_string(), s.egress_drops[*d as usize].get()))
            .collect(),
        violations,
        vr_drops,
        exits: s.exits.get(),
        reclaimed: s.reclaimed.get(),
        restarts: s.restarts.get(),
        hangs: s.hangs.get(),
        quarantines: s.quarantines.get(),
        last_recovery_ms: s.last_recovery_ns.get() as f64 / 1e6,
        host_cpu_seconds: s.host_ns.get() as f64 / 1e9,
        last_exit_mono_ns: s.last_exit_mono_ns.get(),
        last_recovered_mono_ns: s.last_recovered_mono_ns.get(),
        kicks: s.kicks.get(),
        pool_slots: pool as u64,
        free_slots: free as u64,
        pool_usable: s.pool_usable.get(),
        pool_grows: s.pool_grows.get(),
        pool_grow_refused: s.pool_grow_refused.get(),
        capture_dropped: s.capture_dropped.get(),
        arrival_pps: s.arrival_pps.get(),
        rebalances: s.rebalances.get(),
        instance_exits: s.instance_exits.get(),
        instances_added: s.instances_added.get(),
        instances_retired: s.instances_retired.get(),
        instances_refused: s.instances_refused.get(),
        ctrl_relayed: s.ctrl_relayed.get(),
        ctrl_dropped: s.ctrl_dropped.get(),
        vnics,
        fast: None,
        control_plane: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_adds_what_it_forwarded_and_dropped() {
        let mut v = VrStatsView {
            rx_packets: 100,
            tx_packets: 90,
            ..VrStatsView::default()
        };
        let f = FastCounters {
            rx: 70,
            fwd: 50,
            to_slow_select: 15,
            drop_rate_limit: 5,
            ..FastCounters::default()
        };
        add_fast(&mut v, &f);
        // The 15 handed over are in the slow path's 100 already.
        assert_eq!((v.rx_packets, v.tx_packets), (155, 140));
        let fs = v.fast.expect("fast counters");
        assert_eq!((fs.rx_packets, fs.forwarded, fs.dropped()), (70, 50, 5));
        assert_eq!(fs.to_slow["select"], 15);
        assert_eq!(fs.to_slow.len(), 10);
        assert_eq!(fs.drops.len(), 3);
    }
}
