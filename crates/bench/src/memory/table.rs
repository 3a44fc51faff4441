//! The memory bench's table and ratios.

use super::*;

pub(super) fn print_table(results: &[AnyRecord], rounds: &[Vec<Record>]) {
    let m = Machine::this();
    println!(
        "vrhost bench memory  {}  {} ({} cores)  kernel {}",
        m.date, m.cpu, m.cores, m.kernel
    );
    println!(
        "{:<8} {:>6} {:>4} {:>6} {:>7} {:>8} {:>7} {:>9} {:>6} {:>6} {:>9} {:>5}",
        "mode",
        "frame",
        "vrs",
        "pool",
        "routes",
        "Mpps",
        "Gbit/s",
        "ns/pkt",
        "host%",
        "vr%",
        "drops",
        "viol"
    );
    for r in results {
        match r {
            AnyRecord::Fwd(r) => println!(
                "{:<8} {:>6} {:>4} {:>6} {:>7} {:>8.2} {:>7.2} {:>9.1} {:>6.0} {:>6.0} {:>9} {:>5}",
                format!("{:?}", r.mode).to_lowercase(),
                r.frame_bytes,
                r.vrs,
                r.pool_slots,
                r.routes,
                r.mpps,
                r.gbps,
                r.cpu_ns_per_pkt,
                r.host_cpu_pct,
                r.vr_cpu_pct,
                r.drops,
                r.violations
            ),
            AnyRecord::Idle(i) => println!(
                "idle: {} VRs + host, no traffic: {:.2}% of one core\n\
                 first packet after idling ({} probes): in -> out p50 {:.1} us, p99 {:.1} us, max {:.1} us; \
                 of which host took it -> out p50 {:.1} us, p99 {:.1} us\n\
                 reference, same run: one eventfd wakeup host CPU -> VR CPU after the same pause: p50 {:.1} us, p99 {:.1} us",
                i.vrs,
                i.cpu_pct,
                i.probes,
                i.wake_us_p50,
                i.wake_us_p99,
                i.wake_us_max,
                i.host_us_p50,
                i.host_us_p99,
                i.wake_ref_us_p50,
                i.wake_ref_us_p99
            ),
        }
    }
    // Ratios per route table (the first record of each point: the pool
    // sweep comes after the main points).
    let mut tables: Vec<usize> = Vec::new();
    for r in results {
        if let AnyRecord::Fwd(r) = r
            && !tables.contains(&r.routes)
        {
            tables.push(r.routes);
        }
    }
    for routes in tables {
        // The same ratio within each round (points run seconds apart).
        let per_round = |num: (Mode, usize), den: (Mode, usize)| {
            let find = |(mode, vrs): (Mode, usize)| {
                rounds.iter().find(|r| {
                    r.first().is_some_and(|r| {
                        r.mode == mode && r.vrs == vrs && r.frame_bytes == 64 && r.routes == routes
                    })
                })
            };
            match (find(num), find(den)) {
                (Some(n), Some(d)) => {
                    let v: Vec<String> = n
                        .iter()
                        .zip(d)
                        .map(|(n, d)| format!("{:.2}", n.mpps / d.mpps))
                        .collect();
                    format!(" (each round: {})", v.join(" "))
                }
                _ => String::new(),
            }
        };
        let get = |mode: Mode, vrs: usize| {
            results.iter().find_map(|r| match r {
                AnyRecord::Fwd(r)
                    if r.mode == mode
                        && r.vrs == vrs
                        && r.frame_bytes == 64
                        && r.routes == routes =>
                {
                    Some(r.mpps)
                }
                _ => None,
            })
        };
        if let (Some(shm), Some(inproc)) = (get(Mode::Shm, 1), get(Mode::Inproc, 1)) {
            println!(
                "shm / inproc (64 B, 1 VR, {routes} routes): {:.2}{}",
                shm / inproc,
                per_round((Mode::Shm, 1), (Mode::Inproc, 1))
            );
        }
        if let (Some(shm), Some(sys)) = (get(Mode::Shm, 1), get(Mode::Syscall, 1)) {
            println!(
                "shm / syscall (64 B, 1 VR, {routes} routes): {:.1}",
                shm / sys
            );
        }
        if let (Some(one), Some(ten)) = (get(Mode::Shm, 1), get(Mode::Shm, 10)) {
            println!(
                "shm 10 VRs / 1 VR aggregate (64 B, {routes} routes): {:.2}{}",
                ten / one,
                per_round((Mode::Shm, 10), (Mode::Shm, 1))
            );
        }
    }
}
