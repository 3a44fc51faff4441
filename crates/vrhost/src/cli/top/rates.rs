//! Rates from two consecutive `GET /v1/stats` snapshots: what `vrhost top`
//! shows, computed apart from the terminal so it is tested on its own.
//!
//! Counters are monotonic while the daemon and a VR run, but a restarted
//! daemon or VR (or a VR deleted and added again under its name) starts its
//! counters again from zero. A counter lower than before therefore counts
//! from zero within the interval: its rate is `now / interval`, a lower
//! bound of the truth, never negative and never the wrapped-around 2^64 a
//! plain subtraction would give. The same goes for an instance whose
//! process changed (its CPU time is that of the new process).

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use crate::cli::api::{InstanceStatus, Stats, VrCounters};

/// A snapshot and when it arrived here.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The answer.
    pub stats: Stats,
    /// When it was read (for a server that gives no `time_s`).
    pub at: Instant,
}

/// Seconds between two samples: the server's clock if it gives one that
/// moved forward, else ours. `None` if neither moved forward.
pub fn interval(prev: &Sample, cur: &Sample) -> Option<f64> {
    let server = cur.stats.time_s - prev.stats.time_s;
    if prev.stats.time_s > 0.0 && server.is_finite() && server > 0.0 {
        return Some(server);
    }
    let local = cur.at.saturating_duration_since(prev.at).as_secs_f64();
    (local > 0.0).then_some(local)
}

/// The rate of a counter that went from `prev` to `cur` in `dt` seconds;
/// a counter that went down restarted from zero in the interval. `None`
/// without a previous value or an interval.
pub fn per_sec(prev: Option<u64>, cur: u64, dt: Option<f64>) -> Option<f64> {
    let (prev, dt) = (prev?, dt.filter(|d| *d > 0.0)?);
    let delta = if cur >= prev { cur - prev } else { cur };
    Some(delta as f64 / dt)
}

/// [`per_sec`] for a counter in seconds (CPU time); `reset` says it
/// restarted even if it did not go down (another process).
pub fn per_sec_f64(prev: Option<f64>, cur: f64, dt: Option<f64>, reset: bool) -> Option<f64> {
    let (prev, dt) = (prev?, dt.filter(|d| *d > 0.0)?);
    let delta = if reset || cur < prev { cur } else { cur - prev };
    delta.is_finite().then(|| delta.max(0.0) / dt)
}

/// One vNIC's rates.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VnicView {
    /// vNIC index.
    pub index: u32,
    /// Its port.
    pub port: String,
    /// Frames per second to the VR.
    pub rx_pps: Option<f64>,
    /// Frames per second from the VR.
    pub tx_pps: Option<f64>,
    /// Bits per second to the VR.
    pub rx_bps: Option<f64>,
    /// Bits per second from the VR.
    pub tx_bps: Option<f64>,
}

/// One drop reason of a VR.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DropView {
    /// `host` (before the VR), `vr` or `port` (after it).
    pub stage: &'static str,
    /// The reason.
    pub reason: String,
    /// Drops per second.
    pub per_s: Option<f64>,
    /// Drops in all.
    pub total: u64,
}

/// One VR instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct InstanceView {
    /// Instance index.
    pub index: u32,
    /// Its process.
    pub pid: Option<u32>,
    /// Its core.
    pub core: Option<u32>,
    /// Whether it runs.
    pub running: bool,
    /// CPU use, percent of one core.
    pub cpu_pct: Option<f64>,
    /// Sleeps per second.
    pub sleeps_ps: Option<f64>,
    /// Heartbeat counter.
    pub heartbeat: u64,
    /// Entries in its rx rings.
    pub rx_fill: u64,
    /// Entries in its tx rings.
    pub tx_fill: u64,
}

/// One VR, with rates.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VrView {
    /// Name.
    pub name: String,
    /// `running` or `stopped`.
    pub state: String,
    /// Frames per second to the VR.
    pub rx_pps: Option<f64>,
    /// Frames per second from the VR.
    pub tx_pps: Option<f64>,
    /// Bits per second to the VR.
    pub rx_bps: Option<f64>,
    /// Bits per second from the VR.
    pub tx_bps: Option<f64>,
    /// Drops per second: before, in and after the VR.
    pub drops_ps: Option<f64>,
    /// CPU of its instances, percent of one core.
    pub cpu_pct: Option<f64>,
    /// Entries waiting in its instances' rings.
    pub ring_fill: u64,
    /// Share of its pool in use, percent.
    pub pool_used_pct: Option<f64>,
    /// Its processes.
    pub pids: Vec<u32>,
    /// Their cores.
    pub cores: Vec<u32>,
    /// Per vNIC.
    pub vnics: Vec<VnicView>,
    /// Drops by stage and reason.
    pub drops: Vec<DropView>,
    /// Violations in all, by kind.
    pub violations: BTreeMap<String, u64>,
    /// Times its process exited.
    pub exits: u64,
    /// Its instances.
    pub instances: Vec<InstanceView>,
}

/// The host and port totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostView {
    /// Seconds since the daemon started.
    pub uptime_s: f64,
    /// Config generation.
    pub generation: u64,
    /// VRs running.
    pub vrs_running: usize,
    /// VRs in all.
    pub vrs: usize,
    /// Seconds between the two samples.
    pub interval_s: Option<f64>,
    /// Frames per second the host took from the ports.
    pub rx_pps: Option<f64>,
    /// Ingress drops per second, by reason.
    pub ingress_drops: Vec<DropView>,
    /// All ingress drops per second.
    pub ingress_drops_ps: Option<f64>,
    /// Worker CPU, percent of one core.
    pub worker_cpu_pct: Option<f64>,
    /// VR restarts in all.
    pub vr_restarts: u64,
    /// Slot violations in all.
    pub slot_violations: u64,
    /// Ports: frames per second received.
    pub ports_rx_pps: Option<f64>,
    /// Ports: frames per second sent.
    pub ports_tx_pps: Option<f64>,
    /// Ports: bits per second received.
    pub ports_rx_bps: Option<f64>,
    /// Ports: bits per second sent.
    pub ports_tx_bps: Option<f64>,
    /// Ports: drops per second (rx and tx).
    pub ports_drops_ps: Option<f64>,
}

/// Bits per second from a byte counter.
fn bits(r: Option<f64>) -> Option<f64> {
    r.map(|b| b * 8.0)
}

fn sum<'a>(m: impl IntoIterator<Item = &'a u64>) -> u64 {
    m.into_iter().fold(0, |a, b| a.saturating_add(*b))
}

/// Rates of drops by reason.
fn reasons(
    stage: &'static str,
    prev: Option<&BTreeMap<String, u64>>,
    cur: &BTreeMap<String, u64>,
    dt: Option<f64>,
) -> Vec<DropView> {
    cur.iter()
        .map(|(reason, &total)| DropView {
            stage,
            reason: reason.clone(),
            // A reason new since the last sample counts from zero.
            per_s: per_sec(prev.map(|p| p.get(reason).copied().unwrap_or(0)), total, dt),
            total,
        })
        .collect()
}

/// The host's and every VR's rates from `prev` (if any) to `cur`.
pub fn compute(prev: Option<&Sample>, cur: &Sample) -> (HostView, Vec<VrView>) {
    let dt = prev.and_then(|p| interval(p, cur));
    let ps = prev.map(|p| &p.stats);
    let s = &cur.stats;
    let h = &s.host;
    let ph = ps.map(|p| &p.host);

    // Port totals: a sum of per-port rates, so one port that restarted
    // does not spoil the others.
    let port_rate = |f: fn(&crate::cli::api::PortStats) -> u64| -> Option<f64> {
        let mut total = None;
        for p in &s.ports {
            let before = ps.and_then(|ps| ps.ports.iter().find(|x| x.name == p.name));
            let r = per_sec(before.map(f).or(ps.map(|_| 0)), f(p), dt);
            if let Some(r) = r {
                total = Some(total.unwrap_or(0.0) + r);
            }
        }
        total.or_else(|| dt.map(|_| 0.0))
    };
    let ingress = reasons("host", ph.map(|p| &p.ingress_drops), &h.ingress_drops, dt);
    let host = HostView {
        uptime_s: s.uptime_s,
        generation: s.generation,
        vrs_running: s.vrs.iter().filter(|v| v.state == "running").count(),
        vrs: s.vrs.len(),
        interval_s: dt,
        rx_pps: per_sec(ph.map(|p| p.rx_packets), h.rx_packets, dt),
        ingress_drops_ps: per_sec(
            ph.map(|p| sum(p.ingress_drops.values())),
            sum(h.ingress_drops.values()),
            dt,
        ),
        ingress_drops: ingress,
        worker_cpu_pct: per_sec_f64(
            ph.map(|p| p.worker_cpu_seconds),
            h.worker_cpu_seconds,
            dt,
            false,
        )
        .map(|x| x * 100.0),
        vr_restarts: h.vr_restarts,
        slot_violations: h.slot_violations,
        ports_rx_pps: port_rate(|p| p.rx_packets),
        ports_tx_pps: port_rate(|p| p.tx_packets),
        ports_rx_bps: bits(port_rate(|p| p.rx_bytes)),
        ports_tx_bps: bits(port_rate(|p| p.tx_bytes)),
        ports_drops_ps: port_rate(|p| p.rx_dropped.saturating_add(p.tx_dropped)),
    };

    let vrs = s
        .vrs
        .iter()
        .map(|v| {
            let before = ps.and_then(|p| p.vrs.iter().find(|x| x.name == v.name));
            vr_view(before, v, dt)
        })
        .collect();
    (host, vrs)
}

fn vr_view(prev: Option<&VrCounters>, v: &VrCounters, dt: Option<f64>) -> VrView {
    let s = &v.stats;
    let p = prev.map(|p| &p.stats);
    let rate = |f: fn(&crate::cli::api::VrStats) -> u64| per_sec(p.map(f), f(s), dt);
    let vnics = s
        .vnics
        .iter()
        .map(|n| {
            let pn = p.and_then(|p| p.vnics.iter().find(|x| x.index == n.index));
            let r = |f: fn(&crate::cli::api::VnicStats) -> u64| per_sec(pn.map(f), f(n), dt);
            VnicView {
                index: n.index,
                port: n.port.clone(),
                rx_pps: r(|x| x.rx_packets),
                tx_pps: r(|x| x.tx_packets),
                rx_bps: bits(r(|x| x.rx_bytes)),
                tx_bps: bits(r(|x| x.tx_bytes)),
            }
        })
        .collect();
    let mut drops = reasons("host", p.map(|p| &p.ingress_drops), &s.ingress_drops, dt);
    if s.vr_drops.is_empty() {
        if s.vr_dropped > 0 {
            drops.push(DropView {
                stage: "vr",
                reason: "dropped".into(),
                per_s: rate(|x| x.vr_dropped),
                total: s.vr_dropped,
            });
        }
    } else {
        drops.extend(reasons("vr", p.map(|p| &p.vr_drops), &s.vr_drops, dt));
    }
    if s.port_dropped > 0 {
        drops.push(DropView {
            stage: "port",
            reason: "tx".into(),
            per_s: rate(|x| x.port_dropped),
            total: s.port_dropped,
        });
    }
    let instances: Vec<InstanceView> = v
        .instances
        .iter()
        .map(|i| instance_view(prev.and_then(|p| find_instance(&p.instances, i)), i, dt))
        .collect();
    let cpu_pct = instances
        .iter()
        .map(|i| i.cpu_pct)
        .try_fold(0.0, |a, b| b.map(|b| a + b))
        .filter(|_| !instances.is_empty());
    VrView {
        name: v.name.clone(),
        state: v.state.clone(),
        rx_pps: rate(|x| x.rx_packets),
        tx_pps: rate(|x| x.tx_packets),
        rx_bps: bits(rate(|x| x.rx_bytes)),
        tx_bps: bits(rate(|x| x.tx_bytes)),
        drops_ps: rate(crate::cli::api::VrStats::drops),
        cpu_pct,
        ring_fill: v
            .instances
            .iter()
            .map(|i| i.rx_ring_fill.saturating_add(i.tx_ring_fill))
            .sum(),
        pool_used_pct: (s.pool_slots > 0).then(|| {
            100.0 * s.pool_slots.saturating_sub(s.free_slots) as f64 / s.pool_slots as f64
        }),
        pids: v.instances.iter().filter_map(|i| i.pid).collect(),
        cores: v.instances.iter().filter_map(|i| i.cpu).collect(),
        vnics,
        drops,
        violations: s.violations.clone(),
        exits: s.exits,
        instances,
    }
}

fn find_instance<'a>(prev: &'a [InstanceStatus], i: &InstanceStatus) -> Option<&'a InstanceStatus> {
    prev.iter().find(|p| p.index == i.index)
}

fn instance_view(
    prev: Option<&InstanceStatus>,
    i: &InstanceStatus,
    dt: Option<f64>,
) -> InstanceView {
    // Another process under the same index: its counters are its own.
    let new_process = prev.is_some_and(|p| p.pid != i.pid);
    let sleeps_prev = prev.map(|p| if new_process { 0 } else { p.sleeps });
    InstanceView {
        index: i.index,
        pid: i.pid,
        core: i.cpu,
        running: i.running,
        cpu_pct: per_sec_f64(prev.map(|p| p.cpu_seconds), i.cpu_seconds, dt, new_process)
            .map(|x| x * 100.0),
        sleeps_ps: per_sec(sleeps_prev, i.sleeps, dt),
        heartbeat: i.heartbeat,
        rx_fill: i.rx_ring_fill,
        tx_fill: i.tx_ring_fill,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cli::api::fixtures;

    pub(crate) fn fixture() -> Stats {
        serde_json::from_str(fixtures::STATS).unwrap()
    }

    /// The fixture one second later with tenant-a at 100 kpps each way.
    pub(crate) fn one_second_later(s: &Stats) -> Stats {
        let mut n = s.clone();
        n.time_s += 1.0;
        n.uptime_s += 1.0;
        n.host.rx_packets += 100_000;
        n.host.worker_cpu_seconds += 0.5;
        *n.host.ingress_drops.get_mut("pool_full").unwrap() += 20;
        for p in &mut n.ports {
            p.rx_packets += 50_000;
            p.rx_bytes += 3_200_000;
            p.tx_packets += 50_000;
            p.tx_bytes += 3_200_000;
        }
        let a = &mut n.vrs[0];
        a.stats.rx_packets += 100_000;
        a.stats.rx_bytes += 6_400_000;
        a.stats.tx_packets += 99_000;
        a.stats.tx_bytes += 6_336_000;
        a.stats.vr_dropped += 10;
        *a.stats.vr_drops.get_mut("no_route").unwrap() += 10;
        *a.stats.ingress_drops.get_mut("pool_full").unwrap() += 20;
        a.stats.vnics[0].rx_packets += 60_000;
        a.stats.vnics[0].rx_bytes += 3_840_000;
        a.stats.vnics[1].rx_packets += 40_000;
        a.stats.vnics[1].rx_bytes += 2_560_000;
        a.instances[0].cpu_seconds += 0.25;
        a.instances[0].sleeps += 4;
        n
    }

    fn sample(stats: Stats, at: Instant) -> Sample {
        Sample { stats, at }
    }

    #[test]
    fn rates_between_two_snapshots() {
        let t0 = Instant::now();
        let a = fixture();
        let b = one_second_later(&a);
        let (h, vrs) = compute(Some(&sample(a, t0)), &sample(b, t0));
        assert_eq!(h.interval_s, Some(1.0));
        assert_eq!(h.rx_pps, Some(100_000.0));
        assert_eq!(h.ingress_drops_ps, Some(20.0));
        assert_eq!(h.worker_cpu_pct, Some(50.0));
        assert_eq!(h.ports_rx_pps, Some(100_000.0));
        assert_eq!(h.ports_tx_bps, Some(2.0 * 3_200_000.0 * 8.0));
        assert_eq!((h.vrs_running, h.vrs), (1, 2));
        let t = &vrs[0];
        assert_eq!(t.rx_pps, Some(100_000.0));
        assert_eq!(t.tx_pps, Some(99_000.0));
        assert_eq!(t.rx_bps, Some(51_200_000.0));
        assert_eq!(t.drops_ps, Some(30.0));
        assert_eq!(t.cpu_pct, Some(25.0));
        assert_eq!(t.ring_fill, 15);
        assert_eq!(t.pool_used_pct, Some(25.0));
        assert_eq!(
            (t.pids.as_slice(), t.cores.as_slice()),
            (&[4242][..], &[1][..])
        );
        assert_eq!(t.vnics[0].rx_pps, Some(60_000.0));
        assert_eq!(t.vnics[1].rx_pps, Some(40_000.0));
        assert_eq!(t.instances[0].sleeps_ps, Some(4.0));
        let no_route = t.drops.iter().find(|d| d.reason == "no_route").unwrap();
        assert_eq!(
            (no_route.stage, no_route.per_s, no_route.total),
            ("vr", Some(10.0), 17)
        );
        // The stopped VR: zero rates, no CPU, no processes.
        assert_eq!(vrs[1].rx_pps, Some(0.0));
        assert_eq!(vrs[1].cpu_pct, Some(0.0));
        assert!(vrs[1].pids.is_empty());
    }

    #[test]
    fn first_snapshot_has_no_rates() {
        let (h, vrs) = compute(None, &sample(fixture(), Instant::now()));
        assert_eq!(h.rx_pps, None);
        assert_eq!(h.ports_rx_pps, None);
        assert_eq!(vrs[0].rx_pps, None);
        assert_eq!(vrs[0].cpu_pct, None);
        assert_eq!(vrs[0].ring_fill, 15);
    }

    #[test]
    fn counter_reset_after_vr_restart_is_neither_negative_nor_huge() {
        let t0 = Instant::now();
        let a = fixture();
        let mut b = a.clone();
        b.time_s += 2.0;
        // tenant-a restarted: counters from zero, a new process.
        let v = &mut b.vrs[0];
        v.stats.rx_packets = 1_000;
        v.stats.rx_bytes = 64_000;
        v.stats.tx_packets = 900;
        v.stats.tx_bytes = 57_600;
        v.stats.vr_dropped = 0;
        v.stats.vr_drops.clear();
        v.stats.ingress_drops.clear();
        v.stats.vnics[0].rx_packets = 1_000;
        v.instances[0].pid = Some(5000);
        v.instances[0].cpu_seconds = 0.1;
        v.instances[0].sleeps = 2;
        let (_, vrs) = compute(Some(&sample(a, t0)), &sample(b, t0));
        let t = &vrs[0];
        assert_eq!(t.rx_pps, Some(500.0));
        assert_eq!(t.tx_pps, Some(450.0));
        assert_eq!(t.rx_bps, Some(256_000.0));
        assert_eq!(t.vnics[0].rx_pps, Some(500.0));
        assert_eq!(t.instances[0].cpu_pct, Some(5.0));
        assert_eq!(t.instances[0].sleeps_ps, Some(1.0));
        assert!(t.drops_ps.unwrap() >= 0.0 && t.drops_ps.unwrap() < 1.0);
        for r in [
            t.rx_pps, t.tx_pps, t.rx_bps, t.tx_bps, t.drops_ps, t.cpu_pct,
        ] {
            let r = r.unwrap();
            assert!((0.0..1e6).contains(&r), "{r}");
        }
    }

    #[test]
    fn new_and_vanished_vrs() {
        let t0 = Instant::now();
        let a = fixture();
        let mut b = one_second_later(&a);
        b.vrs.remove(1);
        let mut c = b.vrs[0].clone();
        c.name = "tenant-c".into();
        b.vrs.push(c);
        let (h, vrs) = compute(Some(&sample(a, t0)), &sample(b, t0));
        assert_eq!(h.vrs, 2);
        assert_eq!(vrs[1].name, "tenant-c");
        assert_eq!(vrs[1].rx_pps, None, "no earlier sample of tenant-c");
    }

    #[test]
    fn interval_falls_back_to_local_clock() {
        let t0 = Instant::now();
        let mut a = fixture();
        a.time_s = 0.0;
        let b = a.clone();
        let i = interval(
            &sample(a.clone(), t0),
            &sample(b.clone(), t0 + Duration::from_millis(500)),
        );
        assert_eq!(i, Some(0.5));
        // A clock that did not move: no rates rather than infinite ones.
        assert_eq!(interval(&sample(a, t0), &sample(b, t0)), None);
        assert_eq!(per_sec(Some(1), 5, None), None);
        assert_eq!(per_sec(Some(1), 5, Some(0.0)), None);
        assert_eq!(per_sec(Some(u64::MAX), 5, Some(1.0)), Some(5.0));
        assert_eq!(per_sec_f64(Some(10.0), 9.0, Some(1.0), false), Some(9.0));
    }
}
