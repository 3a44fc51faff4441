//! The forwarding benches' measurements: counters read in the lab's
//! namespaces, a window of forwarded vs offered frames under a running
//! generator, where the lost frames went, CPU per frame, ping RTT.

use std::time::{Duration, Instant};

use vrhost_client::Client;
use vrhost_lab::{Lab, Netns};

use super::Lost;
use super::generator::Generator;
use crate::{BenchError, Context, Result};

/// Counters read from sysfs inside a namespace.
pub(crate) fn counter(ns: &Netns, dev: &str, what: &str) -> Result<u64> {
    Ok(ns
        .exec("cat", &[&format!("/sys/class/net/{dev}/statistics/{what}")])?
        .trim()
        .parse()?)
}

/// Busy nanoseconds of `cpu` so far (all but idle and iowait).
pub(crate) fn cpu_busy_ns(cpu: usize) -> Result<u64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let key = format!("cpu{cpu} ");
    let line = stat
        .lines()
        .find(|l| l.starts_with(&key))
        .with_context(|| format!("no {key} in /proc/stat"))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    // USER_HZ is 100 on Linux.
    Ok((total - idle) * 10_000_000)
}

/// Offered frames so far: the generator's `eth0` tx (+ tx drops). For
/// the live generator too: a veth counts, as its own tx, the xdp_frames
/// its peer took, and as tx drops those the peer's ring refused.
pub(crate) fn offered(lab: &Lab) -> Result<u64> {
    let gen_ns = lab.ns("gen");
    Ok(counter(&gen_ns, "eth0", "tx_packets")? + counter(&gen_ns, "eth0", "tx_dropped")?)
}

/// What one window measured.
pub(crate) struct Window {
    pub offered: f64,
    pub forwarded: f64,
    pub cpu_ns_per_pkt: Option<f64>,
    /// vrhost: see [`super::Record::vrhost_cpu_ns_per_pkt`].
    pub vrhost_cpu_ns_per_pkt: Option<f64>,
    /// vrhost: see [`super::Record::wakeups_per_pkt`].
    pub wakeups_per_pkt: Option<f64>,
    /// The live generator's own count of frames sent, per second.
    pub gen_sent: Option<f64>,
    /// vrhost: see [`super::Record::tx_frames_per_run`].
    pub tx_frames_per_run: Option<f64>,
    pub lost: Lost,
}

/// Loss counters at one instant (see [`Lost`]).
#[derive(Clone, Copy, Default)]
pub(crate) struct LossCounters {
    to_node: u64,
    node_in: u64,
    vr: u64,
    node_out: u64,
    /// vrhost: CPU time of its worker and VR processes, ns.
    cpu_ns: f64,
    /// vrhost: times its worker and VRs went to sleep (or napped).
    sleeps: u64,
    /// vrhost: each port's frames sent and transmit system calls
    /// (`tx_packets`, `tx_runs`), in the config's port order.
    tx: [(u64, u64); 2],
}

impl LossCounters {
    /// Frames lost at every hop so far.
    pub(crate) fn total(&self) -> u64 {
        self.to_node + self.node_in + self.vr + self.node_out
    }

    /// Frames a transmit system call carried on each port between `a`
    /// and `self` (`None` for a port that made none).
    pub(crate) fn frames_per_run(&self, a: &Self) -> [Option<f64>; 2] {
        [0, 1].map(|i| {
            let runs = self.tx[i].1.saturating_sub(a.tx[i].1);
            let frames = self.tx[i].0.saturating_sub(a.tx[i].0);
            (runs > 0).then(|| frames as f64 / runs as f64)
        })
    }

    /// Transmit system calls of all ports between `a` and `self`.
    pub(crate) fn runs(&self, a: &Self) -> u64 {
        (0..2).map(|i| self.tx[i].1.saturating_sub(a.tx[i].1)).sum()
    }

    pub(crate) fn read(lab: &Lab, daemon: Option<&Client>) -> Result<Self> {
        let node = lab.ns("node");
        let mut c = Self {
            to_node: counter(&lab.ns("gen"), "eth0", "tx_dropped")?,
            node_in: counter(&node, "p0", "rx_dropped")?,
            vr: 0,
            node_out: counter(&node, "p1", "tx_dropped")?,
            ..Self::default()
        };
        if let Some(api) = daemon {
            let s: serde_json::Value = api.get("/v1/stats")?.decode()?;
            let u = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
            let sum = |v: &serde_json::Value| v.as_object().map_or(0, |o| o.values().map(u).sum());
            c.node_in += sum(&s["host"]["ingress_drops"]);
            let h = &s["host"];
            c.cpu_ns += h["worker_cpu_seconds"].as_f64().unwrap_or(0.0) * 1e9;
            c.sleeps += u(&h["sleeps"]) + u(&h["naps"]);
            for (i, p) in s["ports"].as_array().into_iter().flatten().enumerate() {
                c.node_in += u(&p["rx_dropped"]);
                c.node_out += u(&p["tx_dropped"]);
                if let Some(t) = c.tx.get_mut(i) {
                    *t = (u(&p["tx_packets"]), u(&p["tx_runs"]));
                }
            }
            // A tap VR's namespace: what its TAPs' queues dropped (read too
            // slowly by the worker) was lost in the VR.
            if Netns::exists(super::node::TAP_NS) {
                let ns = Netns::existing(super::node::TAP_NS);
                for dev in ["vnic0", "vnic1"] {
                    c.vr += counter(&ns, dev, "tx_dropped")?;
                }
            }
            for v in s["vrs"].as_array().into_iter().flatten() {
                let st = &v["stats"];
                c.node_in += sum(&st["ingress_drops"]);
                c.vr += u(&st["vr_dropped"]);
                c.node_out += u(&st["port_dropped"]);
                for i in v["instances"].as_array().into_iter().flatten() {
                    c.cpu_ns += i["cpu_seconds"].as_f64().unwrap_or(0.0) * 1e9;
                    c.sleeps += u(&i["sleeps"]);
                }
            }
        }
        Ok(c)
    }
}

/// Where a window runs and counts.
pub(crate) struct WindowSpec<'a> {
    pub generator: &'a Generator,
    /// (namespace, interface) whose `rx_packets` are the forwarded frames.
    pub count: (&'a str, &'a str),
    /// Frames/s to offer (None: unpaced).
    pub pps: Option<f64>,
    pub frame_bytes: usize,
    pub daemon: Option<&'a Client>,
}

/// Timing of a window and the cores it uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub warmup: f64,
    pub seconds: f64,
    pub gen_cpu: usize,
    pub fwd_cpu: usize,
}

/// Run the generator at one load and count over a window.
pub(crate) fn window(lab: &Lab, t: Timing, w: &WindowSpec<'_>) -> Result<Window> {
    let cns = lab.ns(w.count.0);
    let mut run = w.generator.start(lab, w.pps, w.frame_bytes, t.gen_cpu)?;
    std::thread::sleep(Duration::from_secs_f64(t.warmup));
    run.check_running()?;
    // Each counter is read by a short-lived process (the namespaces' sysfs
    // is not visible from here), so each gets its own timestamp.
    let snap = || -> Result<[(Instant, u64); 4]> {
        let off = offered(lab)?;
        let t_off = Instant::now();
        let fwd = counter(&cns, w.count.1, "rx_packets")?;
        let t_fwd = Instant::now();
        let cpu = cpu_busy_ns(t.fwd_cpu)?;
        let t_cpu = Instant::now();
        let sent = w.generator.live_sent()?.unwrap_or(0);
        Ok([
            (t_off, off),
            (t_fwd, fwd),
            (t_cpu, cpu),
            (Instant::now(), sent),
        ])
    };
    let la = LossCounters::read(lab, w.daemon)?;
    let a = snap()?;
    std::thread::sleep(Duration::from_secs_f64(t.seconds));
    let b = snap()?;
    let lb = LossCounters::read(lab, w.daemon)?;
    run.check_running()?;
    run.stop(lab, w.frame_bytes)?;
    let rate = |i: usize| (b[i].1 - a[i].1) as f64 / (b[i].0 - a[i].0).as_secs_f64();
    let fwd = rate(1);
    let cpu = rate(2);
    // The loss counters are read just outside the rate window: per
    // second of the same span.
    let span = (b[3].0 - a[0].0).as_secs_f64();
    let per_s = |b: u64, a: u64| b.saturating_sub(a) as f64 / span;
    let per_frame = |d: f64| (w.daemon.is_some() && fwd > 0.0).then(|| d / span / fwd);
    Ok(Window {
        offered: rate(0),
        forwarded: fwd,
        cpu_ns_per_pkt: (fwd > 0.0).then(|| cpu / fwd),
        vrhost_cpu_ns_per_pkt: per_frame(lb.cpu_ns - la.cpu_ns),
        wakeups_per_pkt: per_frame(lb.sleeps.saturating_sub(la.sleeps) as f64),
        gen_sent: w.generator.live().map(|_| rate(3)),
        tx_frames_per_run: lb.frames_per_run(&la)[1],
        lost: Lost {
            to_node_pps: per_s(lb.to_node, la.to_node),
            node_in_pps: per_s(lb.node_in, la.node_in),
            vr_pps: per_s(lb.vr, la.vr),
            node_out_pps: per_s(lb.node_out, la.node_out),
        },
    })
}

/// Ping RTTs from gen to sink through the forwarder: (average, p99) µs.
/// With an interval of a second or more, each ping is the first frame
/// after an idle second.
pub(crate) fn rtt(
    lab: &Lab,
    to: &str,
    n: u32,
    interval: f64,
    cpu: Option<usize>,
) -> Result<(f64, f64)> {
    let v = vrhost_lab::tools::ping_rtts_on(lab, "gen", to, n, interval, cpu)
        .map_err(BenchError::Failed)?;
    let avg = v.iter().sum::<f64>() / v.len() as f64;
    let p99 = v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1];
    eprintln!(
        "ping (every {interval} s): {} replies, min {:.0} median {:.0} avg {avg:.0} p99 {p99:.0} us",
        v.len(),
        v[0],
        v[v.len() / 2]
    );
    Ok((avg, p99))
}
