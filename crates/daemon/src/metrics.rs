//! Prometheus metrics (`GET /metrics`): the stats snapshot in the
//! OpenMetrics text format, written by `prometheus-client`.
//!
//! Names are `vrhost_<what>_<counter>`; labels say which port, VR, vNIC,
//! instance, reason or kind. Counters are monotonic while the daemon runs
//! (a VR's restart by a changed definition starts its counters again, as a
//! Prometheus `rate()` expects of a reset).

use prometheus::core::Collector;
use prometheus::{Encoder, Opts, Registry, TextEncoder};

use std::collections::BTreeMap;

use vrhost_api::{InstanceStatus, PortStats, Stats, VnicStats, VrCounters, VrStats};

/// The exposition's content type (Prometheus text format 0.0.4).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

type Labels = Vec<(&'static str, String)>;

#[path = "metrics_fast.rs"]
mod fast_metrics;

/// Families of a fresh registry, made as they are first used and set from
/// the snapshot (counters are incremented from zero to its value).
#[derive(Default)]
struct Reg {
    r: Registry,
    ints: Vec<(&'static str, prometheus::IntCounterVec)>,
    floats: Vec<(&'static str, prometheus::CounterVec)>,
    gauges: Vec<(&'static str, prometheus::IntGaugeVec)>,
    float_gauges: Vec<(&'static str, prometheus::GaugeVec)>,
}

fn family<T: Collector + Clone + 'static>(
    r: &Registry,
    list: &mut Vec<(&'static str, T)>,
    name: &'static str,
    make: impl FnOnce() -> T,
) -> T {
    if let Some((_, f)) = list.iter().find(|(n, _)| *n == name) {
        return f.clone();
    }
    let f = make();
    r.register(Box::new(f.clone())).expect("names are unique");
    list.push((name, f.clone()));
    f
}

fn keys(labels: &Labels) -> Vec<&'static str> {
    labels.iter().map(|(k, _)| *k).collect()
}

fn values(labels: &Labels) -> Vec<&str> {
    labels.iter().map(|(_, v)| v.as_str()).collect()
}

impl Reg {
    fn counter(&mut self, name: &'static str, help: &str, labels: Labels, v: u64) {
        let f = family(&self.r, &mut self.ints, name, || {
            prometheus::IntCounterVec::new(
                Opts::new(format!("vrhost_{name}_total"), help),
                &keys(&labels),
            )
            .expect("valid names")
        });
        if let Ok(c) = f.get_metric_with_label_values(&values(&labels)) {
            c.inc_by(v);
        }
    }

    fn seconds(&mut self, name: &'static str, help: &str, labels: Labels, v: f64) {
        let f = family(&self.r, &mut self.floats, name, || {
            prometheus::CounterVec::new(
                Opts::new(format!("vrhost_{name}_total"), help),
                &keys(&labels),
            )
            .expect("valid names")
        });
        if let Ok(c) = f.get_metric_with_label_values(&values(&labels)) {
            c.inc_by(v.max(0.0));
        }
    }

    fn gauge(&mut self, name: &'static str, help: &str, labels: Labels, v: u64) {
        let f = family(&self.r, &mut self.gauges, name, || {
            prometheus::IntGaugeVec::new(Opts::new(format!("vrhost_{name}"), help), &keys(&labels))
                .expect("valid names")
        });
        if let Ok(g) = f.get_metric_with_label_values(&values(&labels)) {
            g.set(i64::try_from(v).unwrap_or(i64::MAX));
        }
    }
}

impl Reg {
    /// One counter of each family, read from `x`, labelled `labels()`.
    fn counters<T>(&mut self, families: &[Family<T>], x: &T, labels: impl Fn() -> Labels) {
        for &(name, read, help) in families {
            self.counter(name, help, labels(), read(x));
        }
    }

    /// One gauge of each family, read from `x`, labelled `labels()`.
    fn gauges<T>(&mut self, families: &[Family<T>], x: &T, labels: impl Fn() -> Labels) {
        for &(name, read, help) in families {
            self.gauge(name, help, labels(), read(x));
        }
    }

    /// A gauge of any real value (seconds, averages).
    fn gauge_f64(&mut self, name: &'static str, help: &str, labels: Labels, v: f64) {
        let f = family(&self.r, &mut self.float_gauges, name, || {
            prometheus::GaugeVec::new(Opts::new(format!("vrhost_{name}"), help), &keys(&labels))
                .expect("valid names")
        });
        if let Ok(g) = f.get_metric_with_label_values(&values(&labels)) {
            g.set(v);
        }
    }
}

/// A family of one value per port, VR, vNIC or instance: its name (without
/// `vrhost_` and `_total`), how to read it from `T`, and its help.
type Family<T> = (&'static str, fn(&T) -> u64, &'static str);

/// A VR's counters by reason or kind: name, the label, help, the counts.
type ByLabel = (
    &'static str,
    &'static str,
    &'static str,
    fn(&VrStats) -> &BTreeMap<String, u64>,
);

const PORT_COUNTERS: &[Family<PortStats>] = &[
    (
        "port_rx_packets",
        |p| p.rx_packets,
        "Frames received by a port",
    ),
    ("port_rx_bytes", |p| p.rx_bytes, "Bytes received by a port"),
    (
        "port_rx_dropped",
        |p| p.rx_dropped,
        "Frames a port dropped on receive",
    ),
    ("port_tx_packets", |p| p.tx_packets, "Frames sent by a port"),
    ("port_tx_bytes", |p| p.tx_bytes, "Bytes sent by a port"),
    (
        "port_tx_dropped",
        |p| p.tx_dropped,
        "Frames a port could not send",
    ),
    (
        "port_tx_fallbacks",
        |p| p.tx_fallbacks,
        "Times a port's transmit fell back from xdp_frames to its socket",
    ),
    (
        "port_tx_runs",
        |p| p.tx_runs,
        "System calls that sent a port's frames (af_xdp: BPF_PROG_RUN calls and tx kicks)",
    ),
];

/// A VR's frames and bytes, and what it or the host dropped.
const VR_TRAFFIC: &[Family<VrStats>] = &[
    (
        "vr_rx_packets",
        |s| s.rx_packets,
        "Frames put into a VR's rx rings",
    ),
    (
        "vr_rx_bytes",
        |s| s.rx_bytes,
        "Bytes put into a VR's rx rings",
    ),
    (
        "vr_tx_packets",
        |s| s.tx_packets,
        "Frames a VR sent that reached a port",
    ),
    (
        "vr_tx_bytes",
        |s| s.tx_bytes,
        "Bytes a VR sent that reached a port",
    ),
    ("vr_dropped", |s| s.vr_dropped, "Frames a VR dropped"),
    (
        "vr_port_dropped",
        |s| s.port_dropped,
        "Frames of a VR its out port refused",
    ),
    ("vr_kicks", |s| s.kicks, "Wakeups of a sleeping VR instance"),
    (
        "vr_capture_dropped",
        |s| s.capture_dropped,
        "Frames a capture could not keep up with",
    ),
];

/// How a VR's processes went: exits, restarts, hangs, quarantines.
const VR_LIFECYCLE: &[Family<VrStats>] = &[
    ("vr_exits", |s| s.exits, "Exits of a VR's processes"),
    (
        "vr_reclaimed_slots",
        |s| s.reclaimed,
        "Slots taken back from exited processes",
    ),
    (
        "vr_restarts",
        |s| s.restarts,
        "Restarts of a VR after an exit, crash or hang",
    ),
    (
        "vr_hangs",
        |s| s.hangs,
        "Times the watchdog found a VR stuck and killed it",
    ),
    (
        "vr_quarantines",
        |s| s.quarantines,
        "Times a VR was quarantined for too many violations",
    ),
];

/// A VR's instances as a set: how it changed, and the control messages
/// between them.
const VR_SCALING: &[Family<VrStats>] = &[
    (
        "vr_rebalances",
        |s| s.rebalances,
        "Changes of the set of a VR's instances fed",
    ),
    (
        "vr_pool_grows",
        |s| s.pool_grows,
        "Steps a VR's pool grew by (populated in its memory cgroup)",
    ),
    (
        "vr_pool_grow_refused",
        |s| s.pool_grow_refused,
        "Steps of a VR's pool's growth refused (too little room under its memory limit)",
    ),
    (
        "vr_instance_exits",
        |s| s.instance_exits,
        "Instances of a VR that exited while others went on",
    ),
    (
        "vr_instances_added",
        |s| s.instances_added,
        "Instances of a VR started beside running ones (scaling up, or replacing one that exited)",
    ),
    (
        "vr_instances_retired",
        |s| s.instances_retired,
        "Instances of a VR retired (scaling down)",
    ),
    (
        "vr_instances_refused",
        |s| s.instances_refused,
        "Instances of a VR wanted but not started (no core left, or a failed start)",
    ),
    (
        "vr_ctrl_relayed",
        |s| s.ctrl_relayed,
        "Control messages relayed between a VR's instances",
    ),
    (
        "vr_ctrl_dropped",
        |s| s.ctrl_dropped,
        "Control messages between a VR's instances dropped",
    ),
];

const VR_GAUGES: &[Family<VrStats>] = &[
    (
        "vr_arrival_pps",
        |s| s.arrival_pps,
        "Frames/s offered to a VR (EWMA over 100 ms)",
    ),
    (
        "vr_pool_slots",
        |s| s.pool_slots,
        "Slots in a VR's packet pool",
    ),
    (
        "vr_pool_usable",
        |s| s.pool_usable,
        "Slots of a VR's pool in use (grown to, for a VR with a memory limit)",
    ),
    (
        "vr_free_slots",
        |s| s.free_slots,
        "Slots of a VR's pool free on the host side",
    ),
];

const VR_BY_LABEL: &[ByLabel] = &[
    (
        "vr_ingress_drops",
        "reason",
        "Frames for a VR dropped by the host, by reason",
        |s| &s.ingress_drops,
    ),
    (
        "vr_egress_drops",
        "reason",
        "Frames of a VR dropped by the host before their port (tunnel encapsulation), by reason",
        |s| &s.egress_drops,
    ),
    (
        "vr_violations",
        "kind",
        "Region protocol violations of a VR, by kind",
        |s| &s.violations,
    ),
    (
        "vr_drops",
        "reason",
        "Drops a VR reported, by reason (written by the VR)",
        |s| &s.vr_drops,
    ),
];

const VNIC_COUNTERS: &[Family<VnicStats>] = &[
    ("vnic_rx_packets", |n| n.rx_packets, "Frames into a vNIC"),
    ("vnic_rx_bytes", |n| n.rx_bytes, "Bytes into a vNIC"),
    ("vnic_tx_packets", |n| n.tx_packets, "Frames out of a vNIC"),
    ("vnic_tx_bytes", |n| n.tx_bytes, "Bytes out of a vNIC"),
];

const INSTANCE_COUNTERS: &[Family<InstanceStatus>] = &[
    ("instance_sleeps", |i| i.sleeps, "Times a VR instance slept"),
    (
        "instance_rx_packets",
        |i| i.rx_packets,
        "Frames the host gave a VR instance",
    ),
];

const INSTANCE_GAUGES: &[Family<InstanceStatus>] = &[
    (
        "instance_rx_ring_fill",
        |i| i.rx_ring_fill,
        "Entries waiting in an instance's rx rings",
    ),
    (
        "instance_tx_ring_fill",
        |i| i.tx_ring_fill,
        "Entries waiting in an instance's tx rings",
    ),
    (
        "instance_held_slots",
        |i| i.held,
        "Slots a VR instance holds (its backlog)",
    ),
    (
        "instance_capacity_pps",
        |i| i.capacity_pps,
        "Frames/s a VR instance handed back while busy (0 until measured)",
    ),
    (
        "instance_up",
        |i| u64::from(i.running),
        "1 if the instance runs",
    ),
];

/// Render a snapshot as OpenMetrics text.
pub fn render(s: &Stats, c: &vrhost_api::ClusterStatus) -> String {
    let mut m = Reg::default();
    host(&mut m, s);
    cluster(&mut m, c);
    for p in &s.ports {
        let l = || vec![("port", p.name.clone()), ("driver", p.driver.clone())];
        m.counters(PORT_COUNTERS, p, l);
    }
    for v in &s.vrs {
        vr(&mut m, v);
        for n in &v.stats.vnics {
            let l = || {
                vec![
                    ("vr", v.name.clone()),
                    ("vnic", n.index.to_string()),
                    ("port", n.port.clone()),
                ]
            };
            m.counters(VNIC_COUNTERS, n, l);
        }
        for i in &v.instances {
            instance(&mut m, &v.name, i);
        }
    }
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&m.r.gather(), &mut out)
        .expect("writing to memory does not fail");
    String::from_utf8(out).unwrap_or_default()
}

/// A dispatcher's engines: `vrhost_engine_*`, labelled by engine.
fn cluster(m: &mut Reg, c: &vrhost_api::ClusterStatus) {
    for e in &c.engines {
        let l = || vec![("engine", e.name.clone())];
        m.gauge(
            "engine_up",
            "1 if the engine answers heartbeats",
            l(),
            u64::from(e.state == "up"),
        );
        m.counter(
            "engine_tx_frames",
            "Frames sent to the engine",
            l(),
            e.tx_frames,
        );
        m.counter(
            "engine_tx_bytes",
            "Inner bytes sent to the engine",
            l(),
            e.tx_bytes,
        );
        m.counter(
            "engine_rx_frames",
            "Frames received from the engine",
            l(),
            e.rx_frames,
        );
        m.counter(
            "engine_rx_bytes",
            "Inner bytes received from the engine",
            l(),
            e.rx_bytes,
        );
        m.counter(
            "engine_downs",
            "Times the engine was marked down",
            l(),
            e.downs,
        );
        m.counter(
            "engine_heartbeats_heard",
            "Heartbeat answers from the engine",
            l(),
            e.heartbeats_heard,
        );
        if let Some(ms) = e.last_heartbeat_ms {
            m.gauge_f64(
                "engine_last_heartbeat_seconds",
                "Seconds since the engine last answered",
                l(),
                ms / 1e3,
            );
        }
    }
    for (why, &n) in &c.drops {
        let l = vec![("reason", why.clone())];
        m.counter("cluster_drops", "A dispatcher's drops, by reason", l, n);
    }
}

/// The host's own families: frames in, drops before any VR, the worker.
fn host(m: &mut Reg, s: &Stats) {
    let h = &s.host;
    m.counter(
        "host_rx_packets",
        "Frames received from all ports",
        vec![],
        h.rx_packets,
    );
    for (reason, n) in &h.ingress_drops {
        m.counter(
            "host_ingress_drops",
            "Frames dropped before any VR, by reason",
            vec![("reason", (*reason).to_string())],
            *n,
        );
    }
    m.counter("host_sleeps", "Times the worker slept", vec![], h.sleeps);
    m.counter(
        "host_slot_violations",
        "Region protocol violations of all VRs",
        vec![],
        h.slot_violations,
    );
    m.counter(
        "host_vr_restarts",
        "VR processes restarted",
        vec![],
        h.vr_restarts,
    );
    m.seconds(
        "host_worker_cpu_seconds",
        "CPU time of the data path worker thread",
        vec![],
        h.worker_cpu_seconds,
    );
    m.gauge(
        "host_generation",
        "Config changes applied since start",
        vec![],
        s.generation,
    );
}

/// A VR's families (its vNICs' and instances' apart).
fn vr(m: &mut Reg, v: &VrCounters) {
    let st = &v.stats;
    let l = || vec![("vr", v.name.clone())];
    let up = u64::from(v.state == "running");
    m.gauge("vr_up", "1 if the VR runs and is fed", l(), up);
    let quarantined = u64::from(v.state == "quarantined");
    m.gauge(
        "vr_quarantined",
        "1 if the VR is quarantined (not fed until restarted)",
        l(),
        quarantined,
    );
    for families in [VR_TRAFFIC, VR_LIFECYCLE, VR_SCALING] {
        m.counters(families, st, l);
    }
    m.gauges(VR_GAUGES, st, l);
    m.seconds(
        "vr_host_cpu_seconds",
        "Time the host worker spent on a VR (its share of ingress, its tx rings)",
        l(),
        st.host_cpu_seconds,
    );
    m.gauge_f64(
        "vr_last_recovery_seconds",
        "From a VR's last exit to its first frame out after the restart",
        l(),
        st.last_recovery_ms / 1e3,
    );
    for &(name, label, help, counts) in VR_BY_LABEL {
        for (key, n) in counts(st) {
            let mut ls = l();
            ls.push((label, (*key).to_string()));
            m.counter(name, help, ls, *n);
        }
    }
    if let Some(f) = &st.fast {
        fast_metrics::fast(m, &v.name, f);
    }
    if let Some(c) = &st.control_plane {
        control_plane(m, &v.name, c);
    }
}

/// VR `vr`'s control plane: whether it runs, its restarts, its routes.
fn control_plane(m: &mut Reg, vr: &str, c: &vrhost_api::ControlPlaneStats) {
    let l = || vec![("vr", vr.to_string())];
    let up = u64::from(c.running);
    m.gauge(
        "vr_control_plane_up",
        "1 if the VR's control plane runs",
        l(),
        up,
    );
    let help = "Exits of the VR's control plane (each restarted)";
    m.counter("vr_control_plane_restarts", help, l(), c.restarts);
    let help = "Routes the VR holds from its control plane";
    m.gauge("vr_control_plane_routes", help, l(), c.routes);
    let help = "Route changes from the VR's control plane, applied";
    m.counter("vr_control_plane_route_changes", help, l(), c.route_changes);
}

/// Instance `i` of VR `vr`.
fn instance(m: &mut Reg, vr: &str, i: &InstanceStatus) {
    let l = || vec![("vr", vr.to_string()), ("instance", i.index.to_string())];
    m.counters(INSTANCE_COUNTERS, i, l);
    m.gauges(INSTANCE_GAUGES, i, l);
    m.seconds(
        "instance_cpu_seconds",
        "CPU time of a VR instance's process",
        l(),
        i.cpu_seconds,
    );
    m.gauge_f64(
        "instance_rx_fill_avg",
        "EWMA (100 ms) of the entries waiting in a VR instance's rx rings",
        l(),
        i.rx_fill_avg,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use vrhost_api::HostStats;

    /// Counters by name, as the snapshot keeps them.
    fn by_name(pairs: &[(&'static str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
    }

    fn port(name: &str, driver: &str, k: u64) -> PortStats {
        PortStats {
            name: name.into(),
            driver: driver.into(),
            interface: format!("veth-{name}"),
            rx_packets: 1000 * k,
            rx_bytes: 64_000 * k,
            rx_dropped: k,
            tx_packets: 900 * k,
            tx_bytes: 57_600 * k,
            tx_dropped: 2 * k,
            tx_fallbacks: 0,
            tx_runs: 0,
        }
    }

    fn instance(index: u32, running: bool) -> InstanceStatus {
        let k = u64::from(index) + 1;
        InstanceStatus {
            index,
            pid: running.then_some(4000 + index),
            cpu: Some(index + 1),
            running,
            cpu_seconds: 0.5 * k as f64,
            sleeps: 30 * k,
            heartbeat: 123_456 * k,
            rx_ring_fill: 3 * k,
            tx_ring_fill: k,
            rx_packets: 500 * k,
            held: 7 * k,
            rx_fill_avg: 1.25 * k as f64,
            capacity_pps: 250_000 * k,
        }
    }

    fn counters(k: u64, vnic_ports: &[&str]) -> VrStats {
        VrStats {
            rx_packets: 1000 * k,
            rx_bytes: 64_000 * k,
            tx_packets: 990 * k,
            tx_bytes: 63_360 * k,
            vr_dropped: 4 * k,
            port_dropped: k,
            ingress_drops: by_name(&[("pool_empty", 5 * k), ("rate_limited", 6 * k)]),
            egress_drops: by_name(&[("tunnel_no_mac", 2 * k)]),
            violations: by_name(&[("bad_slot", k), ("double_free", 0)]),
            vr_drops: by_name(&[("no_route", 8 * k), ("ttl", 0)]),
            exits: k,
            reclaimed: 12 * k,
            restarts: k,
            hangs: 0,
            quarantines: k - 1,
            last_recovery_ms: 37.5 * k as f64,
            host_cpu_seconds: 0.125 * k as f64,
            last_exit_mono_ns: 1_000_000 * k,
            last_recovered_mono_ns: 1_037_500 * k,
            kicks: 11 * k,
            pool_slots: 2048,
            free_slots: 2000 - k,
            pool_usable: 1024,
            pool_grows: k,
            pool_grow_refused: 0,
            capture_dropped: 0,
            arrival_pps: 150_000 * k,
            rebalances: 2 * k,
            instance_exits: k,
            instances_added: 3 * k,
            instances_retired: k,
            instances_refused: 0,
            ctrl_relayed: 9 * k,
            ctrl_dropped: k,
            vnics: vnic_ports
                .iter()
                .enumerate()
                .map(|(index, port)| VnicStats {
                    index: index as u32,
                    port: (*port).into(),
                    rx_packets: 400 * k + index as u64,
                    rx_bytes: 25_600 * k,
                    tx_packets: 300 * k,
                    tx_bytes: 19_200 * k,
                })
                .collect(),
            fast: None,
            control_plane: None,
        }
    }

    /// A daemon with two ports and two VRs: one running two instances on
    /// both ports, one quarantined.
    fn sample() -> Stats {
        Stats {
            time_s: 1_764_000_000.5,
            uptime_s: 3600.0,
            generation: 4,
            host: HostStats {
                rx_packets: 123_456_789,
                ingress_drops: by_name(&[("no_rule", 17), ("runt", 0)]),
                sleeps: 42,
                slot_violations: 3,
                vr_restarts: 2,
                worker_cpu_seconds: 12.75,
                ..HostStats::default()
            },
            ports: vec![port("p0", "af_xdp", 1), port("p1", "af_packet", 3)],
            vrs: vec![
                VrCounters {
                    name: "tenant-a".into(),
                    state: "running".into(),
                    stats: VrStats {
                        fast: Some(vrhost_api::FastStats {
                            rx_packets: 700,
                            forwarded: 650,
                            to_slow: by_name(&[("select", 40), ("no_neighbour", 7)]),
                            drops: by_name(&[("rate_limit", 3)]),
                            auto_moves: by_name(&[("to_fast", 2), ("to_slow", 1)]),
                            auto_rate_pps: Some(1200),
                            tunnels: [(
                                "1".to_string(),
                                vrhost_api::FastTunnelStats {
                                    decapsulated: 90,
                                    encapsulated: 80,
                                    to_slow: by_name(&[("no_mac", 2)]),
                                    drops: by_name(&[("headroom", 1)]),
                                },
                            )]
                            .into(),
                        }),
                        ..counters(1, &["p0", "p1"])
                    },
                    instances: vec![instance(0, true), instance(1, true)],
                },
                VrCounters {
                    name: "tenant-b".into(),
                    state: "quarantined".into(),
                    stats: counters(2, &["p1"]),
                    instances: vec![instance(0, false)],
                },
            ],
        }
    }

    /// The exposition of [`sample`], as `render` wrote it before it was
    /// cut into steps: any change to a name, help text, label, value or
    /// order shows here.
    const EXPECTED: &str = include_str!("../testdata/metrics.prom");

    #[test]
    fn a_sample_renders_as_it_always_did() {
        let got = render(&sample(), &vrhost_api::ClusterStatus::default());
        // VRHOST_BLESS=1: write the new output as the expected one.
        if std::env::var_os("VRHOST_BLESS").is_some() {
            std::fs::write("testdata/metrics.prom", &got).expect("write testdata");
            return;
        }
        if got != EXPECTED {
            let diff = got
                .lines()
                .zip(EXPECTED.lines())
                .enumerate()
                .find(|(_, (g, e))| g != e);
            panic!(
                "metrics output changed (first difference, line: got / expected): {diff:?}; lines {} / {}",
                got.lines().count(),
                EXPECTED.lines().count()
            );
        }
    }
}
