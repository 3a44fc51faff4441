//! The monitor bench's rig: a paced generator port, a sink that sees gaps, and a worker with VRs of several instances.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vrhost_host::alloc::Topology;
use vrhost_host::balance::Policy;
use vrhost_host::{
    Backend, Classifier, HostStats, Mailbox, Match, Rule, VrCommand, VrPath, VrProcess, VrStats,
    Worker, cpu,
};
use vrhost_io::mem::{DstMode, MemPort, MemPortConfig};
use vrhost_io::order::{OrderCounters, OrderSink};
use vrhost_io::{Port, PortStats};
use vrhost_proto::PollConfig;
use vrhost_shm::{Doorbell, Region};

use super::{GEN_MAC, MonitorArgs, VR_NAME};
use crate::{Context, Result};

/// A generator whose rate the bench changes while it runs: a `mem` port
/// behind a token bucket.
pub(super) struct PacedPort {
    pub(super) inner: MemPort,
    pub(super) rate: Arc<AtomicU64>,
    pub(super) tokens: f64,
    pub(super) last: Instant,
}

impl Port for PacedPort {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        let now = Instant::now();
        let rate = self.rate.load(Ordering::Relaxed) as f64;
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        // Catch up after a pause of the worker, up to 10 ms of traffic.
        self.tokens = (self.tokens + rate * dt).min((rate * 0.01).max(64.0));
        let n = (self.tokens as usize).min(out.len());
        if n == 0 {
            return 0;
        }
        let got = self.inner.rx_burst(&mut out[..n]);
        self.tokens -= got as f64;
        got
    }

    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        self.inner.tx_burst(frames)
    }

    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
}

/// The sink: order-checking, and the longest gap between two bursts
/// since it was last read (for the `realloc` windows).
pub(super) struct GapSink {
    pub(super) inner: OrderSink,
    pub(super) last: Option<Instant>,
    pub(super) max_gap_ns: Arc<AtomicU64>,
}

impl Port for GapSink {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn rx_burst<'a>(&'a mut self, _out: &mut [&'a [u8]]) -> usize {
        0
    }

    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        if !frames.is_empty() {
            let now = Instant::now();
            if let Some(l) = self.last {
                let gap = now.duration_since(l).as_nanos() as u64;
                self.max_gap_ns.fetch_max(gap, Ordering::Relaxed);
            }
            self.last = Some(now);
        }
        self.inner.tx_burst(frames)
    }

    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
}

/// A running worker with one or more multi-instance VRs.
pub(super) struct Rig {
    pub(super) mailbox: Arc<Mailbox>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) handle: Option<JoinHandle<Worker>>,
    /// The VRs, in the worker's order.
    pub(super) vrs: Vec<RigVr>,
    /// Longest gap at any sink (for the `realloc` windows, one VR).
    pub(super) max_gap_ns: Arc<AtomicU64>,
    /// Frames/s of each VR's generator.
    pub(super) rate: Arc<AtomicU64>,
    pub(super) host: Arc<HostStats>,
    pub(super) host_bell: Doorbell,
    /// Cores for instances, nearest the host's first.
    pub(super) cores: Vec<usize>,
    pub(super) poll: PollConfig,
    /// Control sockets of VR 0's first instances (for the `control`
    /// experiment's latencies).
    pub(super) controls: Vec<vrhost_host::VrControl>,
    /// Instance 0 sends a timestamp to instance `ping.1` every `ping.0` µs
    /// (0: never).
    pub(super) ping: (u32, u16),
    /// Frames/s taken from the generators in the last window.
    pub(super) offered: f64,
    pub(super) host_cpu: usize,
    /// The `vrhost-testvr` program (its `vr-spin` VR).
    pub(super) testvr: PathBuf,
}

/// One VR of a [`Rig`]: VR `k` takes frames from its own generator (port
/// `2 k`) and forwards them to its own sink (port `2 k + 1`).
pub(super) struct RigVr {
    pub(super) name: String,
    /// Its sink's counters.
    pub(super) sink: Arc<OrderCounters>,
    pub(super) stats: Arc<VrStats>,
    pub(super) region: Region,
    /// Core of each instance slot.
    pub(super) placed: Vec<Option<usize>>,
}

/// Instance slots of the region.
pub(super) const SLOTS: u16 = 8;

/// Name of VR `k`.
pub(super) fn vr_name(k: usize) -> String {
    if k == 0 {
        VR_NAME.to_string()
    } else {
        format!("{VR_NAME}{k}")
    }
}

/// Destinations of VR `k` when there are several: 10.(k + 1).0.0/16.
pub(super) fn vr_prefix(k: usize) -> (Ipv4Addr, u8) {
    (Ipv4Addr::new(10, 1 + k as u8, 0, 0), 16)
}

/// The paced generator of VR `k` of `vrs`: random class C destinations
/// for a lone VR, the VR's own prefix otherwise.
pub(super) fn generator(
    args: &MonitorArgs,
    k: usize,
    vrs: usize,
    rate: &Arc<AtomicU64>,
) -> Result<PacedPort> {
    let dst = if vrs == 1 {
        DstMode::RandomClassC
    } else {
        let (net, len) = vr_prefix(k);
        DstMode::Prefixes(vec![(u32::from(net), len)])
    };
    let cfg = MemPortConfig {
        frame_bytes: 64,
        dst,
        src_ips: vec![Ipv4Addr::new(10, 0, 0, 1)],
        src_mac: vrhost_packet::MacAddr(GEN_MAC),
        templates: args.flows,
        stamp_sequence: true,
        ..MemPortConfig::default()
    };
    Ok(PacedPort {
        inner: MemPort::new(format!("mem{k}"), cfg)?,
        rate: rate.clone(),
        tokens: 0.0,
        last: Instant::now(),
    })
}

/// The sink of VR `k`, and its counters.
pub(super) fn sink(
    args: &MonitorArgs,
    k: usize,
    max_gap_ns: &Arc<AtomicU64>,
) -> (GapSink, Arc<OrderCounters>) {
    let sink = OrderSink::with_flows(format!("sink{k}"), 4 * args.flows.max(1024));
    let counters = sink.counters();
    let sink = GapSink {
        inner: sink,
        last: None,
        max_gap_ns: max_gap_ns.clone(),
    };
    (sink, counters)
}

/// The classifier rule of VR `k` of `vrs`: by ingress port for a lone VR,
/// by destination prefix otherwise.
pub(super) fn rule(k: usize, vrs: usize) -> Rule {
    let m = if vrs == 1 {
        Match {
            in_port: Some(0),
            ..Match::default()
        }
    } else {
        Match {
            dst: Some(vr_prefix(k)),
            ..Match::default()
        }
    };
    Rule { m, vr: k, vnic: 0 }
}

impl Rig {
    /// Start a worker on `host_cpu` and a VR with one instance per entry
    /// of `costs` (its cost, ns), balanced by `policy`, fed `pps`.
    pub(super) fn start(
        args: &MonitorArgs,
        costs: &[u64],
        policy: Policy,
        pps: f64,
        poll: PollConfig,
    ) -> Result<Rig> {
        Self::start_many(args, 1, costs, policy, pps, poll, (0, 0))
    }

    /// [`Rig::start`] with `vrs` VRs of the same instances, each fed
    /// `pps / vrs` by its own generator, and instance 0 of each VR sending
    /// a control message to instance `ping.1` every `ping.0` µs (0: never).
    pub(super) fn start_many(
        args: &MonitorArgs,
        vrs: usize,
        costs: &[u64],
        policy: Policy,
        pps: f64,
        poll: PollConfig,
        ping: (u32, u16),
    ) -> Result<Rig> {
        let rate = Arc::new(AtomicU64::new((pps / vrs as f64) as u64));
        let max_gap_ns = Arc::new(AtomicU64::new(0));
        let mut ports: Vec<Box<dyn Port>> = Vec::new();
        let mut sinks = Vec::new();
        for k in 0..vrs {
            ports.push(Box::new(generator(args, k, vrs, &rate)?));
            let (port, counters) = sink(args, k, &max_gap_ns);
            ports.push(Box::new(port));
            sinks.push(counters);
        }
        let rules: Vec<Rule> = (0..vrs).map(|k| rule(k, vrs)).collect();
        let rules = Classifier::new(&rules)?;
        // The worker shares its core with an instance when instances
        // outnumber the other cores: it yields as soon as a round finds
        // nothing (the rates here are a few percent of what it can move).
        let worker_poll = PollConfig {
            spin_rounds: 0,
            yield_us: 10_000,
            ..PollConfig::default()
        };
        let mut worker = Worker::new(ports, rules, worker_poll)?;
        let host_bell = Doorbell::from_fd(worker.bell().fd().try_clone_to_owned()?);
        // The host's own core comes last.
        let cores = Topology::read().affinity_order(args.host_cpu);
        let mut rig = Rig {
            mailbox: worker.mailbox(),
            stop: Arc::new(AtomicBool::new(false)),
            handle: None,
            vrs: Vec::new(),
            max_gap_ns,
            rate,
            host: worker.stats().clone(),
            host_bell,
            cores,
            poll,
            controls: Vec::new(),
            ping,
            offered: 0.0,
            host_cpu: args.host_cpu,
            testvr: crate::report::testvr(args.testvr.as_deref())?,
        };
        for (k, counters) in sinks.into_iter().enumerate() {
            worker.add_vr(rig.add_vr(k, counters, costs, policy)?);
        }
        let host_cpu = args.host_cpu;
        let st = rig.stop.clone();
        rig.handle = Some(std::thread::spawn(move || {
            let _ = cpu::pin_current_thread(host_cpu);
            worker.run(&st);
            worker
        }));
        Ok(rig)
    }

    /// Create VR `k` (forwarding to `sink`) with one instance per entry of
    /// `costs`, balanced by `policy`; returns its path for the worker.
    pub(super) fn add_vr(
        &mut self,
        k: usize,
        sink: Arc<OrderCounters>,
        costs: &[u64],
        policy: Policy,
    ) -> Result<VrPath> {
        let name = vr_name(k);
        let spec = vrhost_host::PathSpec {
            instances: SLOTS,
            balance: policy,
            ..vrhost_host::PathSpec::new(&name, vec![2 * k, 2 * k + 1], 4096)
        };
        let region = spec.create_region()?;
        self.vrs.push(RigVr {
            name: name.clone(),
            sink,
            stats: Arc::new(VrStats::default()),
            region: Region::attach(region.fd().try_clone_to_owned()?)?,
            placed: vec![None; usize::from(SLOTS)],
        });
        let mut procs = Vec::new();
        let mut bells = Vec::new();
        for (i, &cost) in costs.iter().enumerate() {
            let (p, b) = self.spawn(k, i as u16, cost)?;
            if k == 0 {
                self.controls.push(p.control()?);
            }
            procs.push(p);
            bells.push(b);
        }
        let path = VrPath::assemble(&spec, region, Backend::Process(procs), bells);
        self.vrs[k].stats = path.stats().clone();
        Ok(path)
    }

    /// Start instance `i` of VR `vr` on the next free core (a core already
    /// used when there are more instances than cores).
    pub(super) fn spawn(
        &mut self,
        vr: usize,
        i: u16,
        cost_ns: u64,
    ) -> Result<(VrProcess, Doorbell)> {
        let used = self.placed();
        let core = self
            .cores
            .iter()
            .copied()
            .find(|c| !used.contains(c))
            .unwrap_or(self.cores[usize::from(i) % self.cores.len()]);
        self.vrs[vr].placed[usize::from(i)] = Some(core);
        let cmd = VrCommand {
            program: self.testvr.clone(),
            args: vec!["vr-spin".into()],
            cpu: Some(core),
            // As the daemon does: an instance beside the worker sleeps as
            // soon as it has nothing to do.
            poll: if core == self.host_cpu {
                self.poll.beside_worker()
            } else {
                self.poll
            },
            config: serde_json::json!({
                "cost_ns": cost_ns,
                "out_vnic": 1,
                "peers": self.ping.0 > 0,
                "ping_us": if i == 0 { self.ping.0 } else { 0 },
                "ping_to": self.ping.1,
            }),
            ready_timeout: Duration::from_secs(30),
            idle_start: Duration::ZERO,
            confine: vrhost_host::Confine::default(),
            hurry: Default::default(),
        };
        let v = &self.vrs[vr];
        Ok(VrProcess::start(
            &v.name,
            i,
            &v.region,
            &self.host_bell,
            &cmd,
        )?)
    }

    /// Cores of every VR's instances, one entry per instance.
    pub(super) fn placed(&self) -> Vec<usize> {
        self.vrs
            .iter()
            .flat_map(|v| v.placed.iter().flatten().copied())
            .collect()
    }

    /// Distinct cores the instances run on.
    pub(super) fn cores_used(&self) -> usize {
        let mut c = self.placed();
        c.sort_unstable();
        c.dedup();
        c.len()
    }

    /// Run `f` on the worker.
    pub(super) fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> R + Send + 'static,
    ) -> Result<R> {
        Ok(self.mailbox.call(Duration::from_secs(5), f)?)
    }

    /// Forwarded and reordered frames so far, per VR.
    pub(super) fn out(&self) -> Vec<(u64, u64)> {
        self.vrs
            .iter()
            .map(|v| (v.sink.packets(), v.sink.reordered()))
            .collect()
    }

    /// Frames dropped and counted so far.
    pub(super) fn dropped(&self) -> u64 {
        let vrs: u64 = self
            .vrs
            .iter()
            .map(|v| {
                let s = &v.stats;
                s.ingress_drops_total() + s.vr_dropped.get() + s.port_dropped.get()
            })
            .sum();
        vrs + self.host.ingress_drops.iter().map(|c| c.get()).sum::<u64>()
    }

    /// Forwarded frames/s (all VRs) and reordered percent over a window;
    /// the offered frames/s (taken from the generators) in `self.offered`.
    pub(super) fn window(&mut self, secs: f64) -> (f64, f64) {
        let (each, pct) = self.window_each(secs);
        (each.iter().sum(), pct)
    }

    /// [`Rig::window`] with the forwarded frames/s of each VR.
    pub(super) fn window_each(&mut self, secs: f64) -> (Vec<f64>, f64) {
        let before = self.out();
        let o0 = self.host.rx_packets.get();
        let t = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(secs));
        let after = self.out();
        let o1 = self.host.rx_packets.get();
        let dt = t.elapsed().as_secs_f64();
        self.offered = (o1 - o0) as f64 / dt;
        let fwd: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a.0 - b.0).collect();
        let reordered: u64 = after.iter().zip(&before).map(|(a, b)| a.1 - b.1).sum();
        let total: u64 = fwd.iter().sum();
        let pct = if total == 0 {
            0.0
        } else {
            100.0 * reordered as f64 / total as f64
        };
        (fwd.iter().map(|&f| f as f64 / dt).collect(), pct)
    }

    /// Stop the generators, let the VRs hand back what they hold, stop the
    /// worker; returns frames lost without a counter (taken from the
    /// generators, neither forwarded nor counted as dropped).
    pub(super) fn finish(mut self) -> Result<u64> {
        self.rate.store(0, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(200));
        self.stop.store(true, Ordering::Relaxed);
        let mut worker = self
            .handle
            .take()
            .context("no worker")?
            .join()
            .map_err(|_| crate::failed!("worker thread panicked"))?;
        for vr in worker.vrs() {
            vr.check_slot_accounting()
                .map_err(|e| crate::failed!("slot accounting broken: {e}"))?;
        }
        worker.shutdown();
        let taken = self.host.rx_packets.get();
        let forwarded: u64 = self.vrs.iter().map(|v| v.sink.packets()).sum();
        Ok(taken.saturating_sub(forwarded + self.dropped()))
    }
}
