//! `vrhost demo`: the in-memory demo. Two tenants' router VRs, each its own
//! process with its own region, forward generated UDP traffic (tenants told
//! apart by source address) to a counting sink; the counters of each VR are
//! printed every second.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use vrhost_host::{IngressDrop, cpu};

use vrhost_bench::memory::{Dst, Mode, Point, Table, router_worker};

/// Options of `vrhost demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// How long to run, seconds.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Tenants (router VRs).
    #[arg(long, default_value_t = 2)]
    pub vrs: usize,
    /// Route table: `2` or a route file.
    #[arg(long, default_value = "2")]
    pub routes: String,
    /// Frame size.
    #[arg(long, default_value_t = 64)]
    pub frame_bytes: usize,
}

/// Run the demo.
pub fn run(args: &DemoArgs) -> Result<()> {
    if !(1..=16).contains(&args.vrs)
        || !(64..=1518).contains(&args.frame_bytes)
        || args.seconds == 0
    {
        bail!("--vrs must be 1..=16, --frame-bytes 64..=1518, --seconds > 0");
    }
    let table = Table::load(&args.routes)?;
    let p = Point {
        mode: Mode::Shm,
        frame_bytes: args.frame_bytes,
        vrs: args.vrs,
        idle: 0,
        pool: 1024,
        table: &table,
        poll: vrhost_proto::PollConfig::default(),
        pages: vrhost_host::hugepages::HugePages::Off,
    };
    let vr_cpu = cpu::cpus().saturating_sub(1);
    let (mut worker, sink) = router_worker(&p, Dst::Random, vr_cpu)?;
    let names: Vec<String> = worker.vrs().iter().map(|v| v.name().to_string()).collect();
    let pids: Vec<u32> = worker
        .vrs()
        .iter()
        .flat_map(|v| v.processes().iter().map(|p| p.pid()))
        .collect();
    let stats: Vec<_> = worker.vrs().iter().map(|v| v.stats().clone()).collect();
    println!(
        "vrhost demo: {} router VRs (pids {:?}), {} routes each, {}-byte UDP frames from an in-memory generator",
        args.vrs,
        pids,
        table.len(),
        args.frame_bytes
    );
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let handle = std::thread::spawn(move || {
        let _ = cpu::pin_current_thread(0);
        worker.run(&st);
        worker.shutdown();
        worker
    });
    println!(
        "{:>4} {:<6} {:>12} {:>12} {:>10} {:>10} {:>6}",
        "sec", "vr", "rx pps", "tx pps", "drops", "vr drops", "viol"
    );
    let mut last: Vec<(u64, u64, u64, u64)> = vec![(0, 0, 0, 0); stats.len()];
    let mut t = Instant::now();
    for sec in 1..=args.seconds {
        std::thread::sleep(Duration::from_secs(1));
        let dt = t.elapsed().as_secs_f64();
        t = Instant::now();
        for (i, s) in stats.iter().enumerate() {
            let now = (
                s.rx_packets.get(),
                s.tx_packets.get(),
                s.ingress_drops_total(),
                s.vr_dropped.get(),
            );
            println!(
                "{:>4} {:<6} {:>12.0} {:>12.0} {:>10} {:>10} {:>6}",
                sec,
                names[i],
                (now.0 - last[i].0) as f64 / dt,
                (now.1 - last[i].1) as f64 / dt,
                now.2 - last[i].2,
                now.3 - last[i].3,
                s.violations_total()
            );
            last[i] = now;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let worker = handle
        .join()
        .map_err(|_| anyhow::anyhow!("worker panicked"))?;
    let total_fwd = sink.packets();
    println!("forwarded {total_fwd} frames in total; per VR:");
    for vr in worker.vrs() {
        let s = vr.stats();
        let ring_full = s.ingress_drops[IngressDrop::RingFull as usize].get();
        let pool_empty = s.ingress_drops[IngressDrop::PoolEmpty as usize].get();
        println!(
            "  {}: in {} out {} | host drops ring_full {} pool_empty {} | VR drops {} | violations {} | slots free {}",
            vr.name(),
            s.rx_packets.get(),
            s.tx_packets.get(),
            ring_full,
            pool_empty,
            s.vr_dropped.get(),
            s.violations_total(),
            vr.free_slots()
        );
        vr.check_slot_accounting().map_err(anyhow::Error::msg)?;
    }
    if total_fwd == 0 {
        bail!("nothing was forwarded");
    }
    Ok(())
}
