//! The daemon's counters as the API (`GET /v1/stats`) and the metrics show
//! them: one snapshot, taken by the worker between two rounds (so ports,
//! rings and counters are read together) and completed with what only the
//! control plane knows (pids' CPU time, restarts).
//!
//! The field names are the API's (`api/openapi.yaml`, schema `Stats`).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use vrhost_host::{IngressDrop, InstanceInfo, Violation, VrStats, Worker};
use vrhost_vr::DropReason;
use vrhost_vr::proto::counter;

use crate::control::{ControlError, Controller, WORKER_TIMEOUT};

/// One port's counters.
#[derive(Debug, Clone, Serialize)]
pub struct PortView {
    /// Port name.
    pub name: String,
    /// Driver name.
    pub driver: String,
    /// Interface.
    pub interface: String,
    /// Frames received.
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Frames the port or its kernel side dropped on receive.
    pub rx_dropped: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Frames the port could not send.
    pub tx_dropped: u64,
}

/// The host's own counters.
#[derive(Debug, Clone, Serialize)]
pub struct HostView {
    /// Frames received from all ports.
    pub rx_packets: u64,
    /// Frames dropped before any VR, by reason.
    pub ingress_drops: BTreeMap<&'static str, u64>,
    /// Times the worker went to sleep.
    pub sleeps: u64,
    /// Region protocol violations of all VRs.
    pub slot_violations: u64,
    /// VR processes restarted (a changed definition, or after an exit).
    pub vr_restarts: u64,
    /// CPU time of the worker thread.
    pub worker_cpu_seconds: f64,
}

/// One instance of a VR.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceView {
    /// Instance number.
    pub index: u16,
    /// Process id.
    pub pid: Option<u32>,
    /// Core it is pinned to.
    pub cpu: Option<usize>,
    /// Whether it runs and is fed.
    pub running: bool,
    /// CPU time of the process.
    pub cpu_seconds: f64,
    /// Times it went to sleep.
    pub sleeps: u64,
    /// Its poll loop's round counter.
    pub heartbeat: u64,
    /// Entries waiting in its rx rings.
    pub rx_ring_fill: u64,
    /// Entries waiting in its tx rings.
    pub tx_ring_fill: u64,
    /// Frames the host gave it.
    pub rx_packets: u64,
    /// Slots it holds now (the host's count): its backlog.
    pub held: u64,
    /// EWMA of the entries waiting in its rx rings (LVRM's VRI load).
    pub rx_fill_avg: f64,
    /// Frames/s it handed back while busy: its measured capacity (0 until
    /// measured).
    pub capacity_pps: u64,
}

/// One vNIC's counters.
#[derive(Debug, Clone, Serialize)]
pub struct VnicView {
    /// vNIC index.
    pub index: usize,
    /// Port name.
    pub port: String,
    /// Frames into the VR.
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Frames out of the VR.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
}

/// A VR's counters.
#[derive(Debug, Clone, Serialize)]
pub struct VrCountersView {
    /// Frames put into its rx rings.
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Frames it sent that reached a port.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Frames it dropped.
    pub vr_dropped: u64,
    /// Frames its out port refused.
    pub port_dropped: u64,
    /// Host drops on the way in, by reason.
    pub ingress_drops: BTreeMap<&'static str, u64>,
    /// Protocol violations, by kind.
    pub violations: BTreeMap<&'static str, u64>,
    /// Drops the VR reported, by reason (the VR writes these: display only).
    pub vr_drops: BTreeMap<&'static str, u64>,
    /// Process exits.
    pub exits: u64,
    /// Slots taken back from exited processes.
    pub reclaimed: u64,
    /// Restarts after an exit, crash or hang.
    pub restarts: u64,
    /// Times the watchdog found it stuck and killed it.
    pub hangs: u64,
    /// Times it was quarantined.
    pub quarantines: u64,
    /// From its last exit to its first frame out after the restart, in
    /// milliseconds (0: not restarted yet).
    pub last_recovery_ms: f64,
    /// Time the host worker spent on it.
    pub host_cpu_seconds: f64,
    /// CLOCK_MONOTONIC nanoseconds when the host saw its last exit (0:
    /// never): comparable with a client's clock on the same machine.
    pub last_exit_mono_ns: u64,
    /// CLOCK_MONOTONIC nanoseconds of its first frame out after the last
    /// restart (0: not yet).
    pub last_recovered_mono_ns: u64,
    /// Wakeups of a sleeping instance.
    pub kicks: u64,
    /// Slots in its pool.
    pub pool_slots: u64,
    /// Slots free on the host's side.
    pub free_slots: u64,
    /// Frames a capture could not keep up with.
    pub capture_dropped: u64,
    /// Frames/s offered to it: an EWMA over 100 ms.
    pub arrival_pps: u64,
    /// Changes of the set of instances fed.
    pub rebalances: u64,
    /// Instances that exited while others went on.
    pub instance_exits: u64,
    /// Instances started beside running ones (scaling up, or replacing
    /// one that exited).
    pub instances_added: u64,
    /// Instances retired (scaling down).
    pub instances_retired: u64,
    /// Instances wanted but not started (no core left, or a failed start).
    pub instances_refused: u64,
    /// Control messages relayed between its instances.
    pub ctrl_relayed: u64,
    /// Control messages between its instances dropped (peer full or gone).
    pub ctrl_dropped: u64,
    /// Per vNIC.
    pub vnics: Vec<VnicView>,
}

/// A VR in the stats.
#[derive(Debug, Clone, Serialize)]
pub struct VrView {
    /// Name.
    pub name: String,
    /// `running`, `stopped` (down; restarted unless `restart = false`) or
    /// `quarantined`.
    pub state: &'static str,
    /// Counters.
    pub stats: VrCountersView,
    /// Instances.
    pub instances: Vec<InstanceView>,
}

/// `GET /v1/stats`.
#[derive(Debug, Clone, Serialize)]
pub struct StatsView {
    /// When it was read, seconds since the Unix epoch.
    pub time_s: f64,
    /// Daemon uptime.
    pub uptime_s: f64,
    /// Config changes applied.
    pub generation: u64,
    /// Host counters.
    pub host: HostView,
    /// Ports.
    pub ports: Vec<PortView>,
    /// VRs, in config order.
    pub vrs: Vec<VrView>,
}

/// What the worker reads for a snapshot.
struct WorkerRead {
    ports: Vec<vrhost_io::PortStats>,
    host_rx: u64,
    host_drops: Vec<u64>,
    sleeps: u64,
    cpu_ns: u64,
    vrs: Vec<(String, &'static str, usize, usize, Vec<InstanceInfo>)>,
}

fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn counters(s: &VrStats) -> (BTreeMap<&'static str, u64>, BTreeMap<&'static str, u64>) {
    (
        IngressDrop::ALL
            .iter()
            .map(|d| (d.name(), s.ingress_drops[*d as usize].get()))
            .collect(),
        Violation::ALL
            .iter()
            .map(|d| (d.name(), s.violations[*d as usize].get()))
            .collect(),
    )
}

/// Take a snapshot of every counter.
///
/// # Errors
/// [`ControlError::Unavailable`] if the worker does not answer.
pub fn snapshot(ctl: &Controller) -> Result<StatsView, ControlError> {
    let r = ctl.mailbox().call(WORKER_TIMEOUT, |w: &mut Worker| {
        let hs = w.stats();
        WorkerRead {
            ports: w.ports().iter().map(|p| p.stats()).collect(),
            host_rx: hs.rx_packets.get(),
            host_drops: hs.ingress_drops.iter().map(|c| c.get()).collect(),
            sleeps: hs.sleeps.get(),
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
        .map(|((name, driver, iface), s)| PortView {
            name: name.clone(),
            driver: driver.name().to_string(),
            interface: iface.clone(),
            rx_packets: s.rx_packets,
            rx_bytes: s.rx_bytes,
            rx_dropped: s.rx_dropped,
            tx_packets: s.tx_packets,
            tx_bytes: s.tx_bytes,
            tx_dropped: s.tx_dropped,
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
        let mut vr_drops = BTreeMap::new();
        for i in &insts {
            for d in DropReason::ALL {
                let n = i
                    .vr_counters
                    .get(counter::DROP_BASE + d as usize)
                    .copied()
                    .unwrap_or(0);
                *vr_drops.entry(d.name()).or_insert(0) += n;
            }
        }
        let vnics = s
            .vnics
            .iter()
            .enumerate()
            .map(|(i, c)| VnicView {
                index: i,
                port: vp
                    .and_then(|v| v.vnic_ports.get(i))
                    .and_then(|&p| plan.ports.get(p))
                    .map_or_else(String::new, |p| p.0.clone()),
                rx_packets: c.rx_packets.get(),
                rx_bytes: c.rx_bytes.get(),
                tx_packets: c.tx_packets.get(),
                tx_bytes: c.tx_bytes.get(),
            })
            .collect();
        let instances = insts
            .iter()
            .map(|i| (i, s.instances.get(usize::from(i.index))))
            .map(|(i, c)| InstanceView {
                index: i.index,
                pid: i.pid,
                cpu: ctl.instance_cpu(&name, i.index),
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
            .collect();
        vrs.push(VrView {
            name,
            state,
            stats: VrCountersView {
                rx_packets: s.rx_packets.get(),
                rx_bytes: s.rx_bytes.get(),
                tx_packets: s.tx_packets.get(),
                tx_bytes: s.tx_bytes.get(),
                vr_dropped: s.vr_dropped.get(),
                port_dropped: s.port_dropped.get(),
                ingress_drops,
                violations: viol,
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
            },
            instances,
        });
    }
    Ok(StatsView {
        time_s: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        uptime_s: ctl.uptime().as_secs_f64(),
        generation: ctl.generation(),
        host: HostView {
            rx_packets: r.host_rx,
            ingress_drops: IngressDrop::ALL
                .iter()
                .map(|d| {
                    (
                        d.name(),
                        r.host_drops.get(*d as usize).copied().unwrap_or(0),
                    )
                })
                .collect(),
            sleeps: r.sleeps,
            slot_violations: violations,
            vr_restarts: ctl.restarts(),
            worker_cpu_seconds: r.cpu_ns as f64 / 1e9,
        },
        ports,
        vrs,
    })
}
