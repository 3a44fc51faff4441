//! Idle VRs: their CPU and memory cost, and the first packet after idling against a bare wakeup.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vrhost_host::{Backend, PathSpec, VrPath, VrProcess, Worker, cpu};
use vrhost_io::Port;
use vrhost_shm::Doorbell;

use super::procfs::thread_cpu_ns_of;
use super::{
    Family, GEN_MAC, IdleRecord, MemoryArgs, Record, Table, rules, tenant_src, vr_command,
};
use crate::probe::ProbePort;
use crate::report::percentile;
use crate::{Result, bail};

/// `vrs` idle VRs: the CPU and memory they and the host use without
/// traffic, then the
/// latency of a single packet sent after an idle period.
pub(super) fn run_idle(
    args: &MemoryArgs,
    table: &Table,
    vrs: usize,
    probes_n: usize,
) -> Result<IdleRecord> {
    let spec = vrhost_packet::build::UdpFrameSpec {
        dst_mac: vrhost_packet::MacAddr([0x02, 0, 0, 0, 0x10, 0]),
        src_mac: vrhost_packet::MacAddr(GEN_MAC),
        src_ip: tenant_src(0),
        dst_ip: Ipv4Addr::new(10, 1, 2, 3),
        sport: 1024,
        dport: 1024,
        ttl: 64,
        frame_bytes: 64,
    };
    let mut frame = vec![0u8; 64];
    spec.write(&mut frame)?;
    let (port, probe) = ProbePort::new(frame)?;
    let ports: Vec<Box<dyn Port>> = vec![Box::new(port)];
    let poll = args.poll();
    let mut worker = Worker::new(ports, rules(vrs, Family::Ipv4)?, poll)?;
    for i in 0..vrs {
        let name = format!("idle{i}");
        let vr_spec = PathSpec::new(&name, vec![0, 0], 256);
        let region = vr_spec.create_region()?;
        let cmd = vr_command(table, args.vr_cpu, vrs > 1, args.poll())?;
        let (proc_, bell) = VrProcess::start(&name, 0, &region, worker.bell(), &cmd)?;
        let backend = Backend::Process(vec![proc_]);
        worker.add_vr(VrPath::assemble(&vr_spec, region, backend, vec![bell]));
    }
    let pids: Vec<u32> = worker
        .vrs()
        .iter()
        .flat_map(|v| v.processes().iter().map(VrProcess::pid))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let host_cpu = args.host_cpu;
    let handle = std::thread::spawn(move || {
        let _ = cpu::pin_current_thread(host_cpu);
        let _ = tx.send(rustix::thread::gettid().as_raw_nonzero().get());
        worker.run(&st);
        worker.shutdown();
    });
    let tid = rx.recv()?;
    let cpu_all = || {
        thread_cpu_ns_of(tid).unwrap_or(0)
            + pids
                .iter()
                .filter_map(|&p| cpu::process_cpu_ns(p))
                .sum::<u64>()
    };
    // Let everyone fall asleep, then measure a quiet window.
    std::thread::sleep(Duration::from_millis(300));
    let (t0, c0) = (Instant::now(), cpu_all());
    std::thread::sleep(Duration::from_secs_f64(args.seconds.max(1.0)));
    let cpu_pct = (cpu_all() - c0) as f64 / t0.elapsed().as_secs_f64() / 1e7;
    let pss = |pid: &str| {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        text.lines()
            .find_map(|l| {
                l.strip_prefix("Pss:")?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
            * 1024
    };
    let rss_bytes = pss("self") + pids.iter().map(|p| pss(&p.to_string())).sum::<u64>();
    // The probes come from the host's CPU, as a NIC's interrupt steered to
    // the worker's core would; each after a pause long enough for host and
    // VRs to fall asleep.
    cpu::pin_current_thread(args.host_cpu)?;
    let mut lat = Vec::with_capacity(probes_n);
    let mut host_lat = Vec::with_capacity(probes_n);
    for _ in 0..probes_n {
        std::thread::sleep(IDLE_PAUSE);
        let before = probe.arrived();
        let t = probe.inject();
        let deadline = Instant::now() + Duration::from_secs(1);
        while probe.arrived() == before && Instant::now() < deadline {
            probe.wait_arrival(Duration::from_millis(100));
        }
        if probe.arrived() > before {
            let out = probe.last_arrival_ns();
            lat.push(out.saturating_sub(t) as f64 / 1e3);
            host_lat.push(out.saturating_sub(probe.taken_ns()) as f64 / 1e3);
        }
    }
    stop.store(true, Ordering::Relaxed);
    handle
        .join()
        .map_err(|_| crate::failed!("idle worker panicked"))?;
    if lat.is_empty() {
        bail!("no probe came back");
    }
    lat.sort_by(f64::total_cmp);
    host_lat.sort_by(f64::total_cmp);
    let reference = wake_reference(args, probes_n)?;
    Ok(IdleRecord {
        mode: "idle",
        vrs,
        cpu_pct,
        wake_us_p50: percentile(&lat, 0.5).unwrap_or(f64::NAN),
        wake_us_p99: percentile(&lat, 0.99).unwrap_or(f64::NAN),
        wake_us_max: *lat.last().expect("non-empty"),
        host_us_p50: percentile(&host_lat, 0.5).unwrap_or(f64::NAN),
        host_us_p99: percentile(&host_lat, 0.99).unwrap_or(f64::NAN),
        wake_ref_us_p50: percentile(&reference, 0.5).unwrap_or(f64::NAN),
        wake_ref_us_p99: percentile(&reference, 0.99).unwrap_or(f64::NAN),
        probes: lat.len(),
        rss_bytes,
    })
}

/// The run with the median rate of `runs` (non-empty), with the number of
/// runs recorded.
pub(super) fn median_run(mut runs: Vec<Record>) -> Record {
    runs.sort_by(|a, b| a.mpps.total_cmp(&b.mpps));
    let n = runs.len();
    let mut r = runs.swap_remove(n / 2);
    r.runs = n;
    r
}

/// Pause before each idle probe.
pub(super) const IDLE_PAUSE: Duration = Duration::from_millis(15);

/// The platform's floor for the idle figure, measured in the same run: the
/// time one thread on the host CPU takes to wake one sleeping on an eventfd
/// on the VR CPU, after the same pause. (A VR's first packet after idling
/// needs at least one such wakeup.) Sorted microseconds.
pub(super) fn wake_reference(args: &MemoryArgs, n: usize) -> Result<Vec<f64>> {
    let bell = Arc::new(Doorbell::new()?);
    let woke = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let base = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let (b, w, st, vr_cpu) = (bell.clone(), woke.clone(), stop.clone(), args.vr_cpu);
    let sleeper = std::thread::spawn(move || {
        let _ = cpu::pin_current_thread(vr_cpu);
        while !st.load(Ordering::Relaxed) {
            if b.wait(Duration::from_millis(100)) {
                // Release: read with Acquire by the measuring thread.
                w.store(base.elapsed().as_nanos() as u64, Ordering::Release);
            }
        }
    });
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        std::thread::sleep(IDLE_PAUSE);
        let before = woke.load(Ordering::Acquire);
        let t = base.elapsed().as_nanos() as u64;
        bell.ring();
        let deadline = Instant::now() + Duration::from_secs(1);
        while woke.load(Ordering::Acquire) == before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        let at = woke.load(Ordering::Acquire);
        if at != before {
            out.push(at.saturating_sub(t) as f64 / 1e3);
        }
    }
    stop.store(true, Ordering::Relaxed);
    bell.ring();
    sleeper
        .join()
        .map_err(|_| crate::failed!("wake reference thread panicked"))?;
    if out.is_empty() {
        bail!("the wake reference thread never woke");
    }
    out.sort_by(f64::total_cmp);
    Ok(out)
}
