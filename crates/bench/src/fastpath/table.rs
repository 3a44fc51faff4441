//! The fastpath bench's table: the forwarding points (as `bench
//! forward`'s), the moves, the idle, TCP, ping and fairness lines.

use super::{FastRecord, Report};
use crate::report::{Column, heading, opt, row};

const MOVES: [Column; 16] = [
    Column::left("move", 8),
    Column::right("#", 3),
    Column::right("rate", 9),
    Column::right("offered", 10).decimals(0),
    Column::right("forwarded", 10).decimals(0),
    Column::right("lost", 9),
    Column::right("before", 9),
    Column::right("to node", 9),
    Column::right("node in", 9),
    Column::right("reord", 7),
    Column::right("switch ms", 9),
    Column::right("gap ms", 7).decimals(1),
    Column::right("old>ans", 7),
    Column::right("unsel", 6),
    Column::right("reads ms", 8).decimals(1),
    Column::right("answer ms", 9).decimals(1),
];

pub(super) fn print(r: &Report) {
    let fwd: Vec<_> = r
        .results
        .iter()
        .filter_map(|x| match x {
            FastRecord::Forward(f) => Some(f.clone()),
            _ => None,
        })
        .collect();
    if !fwd.is_empty() {
        crate::forward::table::print_table(&fwd);
    }
    let costs: Vec<_> = r
        .results
        .iter()
        .filter_map(|x| match x {
            FastRecord::Cost(c) => Some(c),
            _ => None,
        })
        .collect();
    super::cost::print(&costs);
    let mut moves = r.results.iter().filter_map(|x| match x {
        FastRecord::Migrate(m) => Some(m),
        _ => None,
    });
    if let Some(first) = moves.next() {
        println!("\n{}", heading(&MOVES));
        for m in std::iter::once(first).chain(moves) {
            let rate = m.rate_pps.map_or("max".to_string(), |p| p.to_string());
            let switch = opt(m.switch.switch_ms, 2);
            println!(
                "{}",
                row(
                    &MOVES,
                    &[
                        &m.direction,
                        &m.index,
                        &rate,
                        &m.offered_pps,
                        &m.forwarded_pps,
                        &m.lost,
                        &m.lost_before,
                        &m.lost_to_node,
                        &m.lost_node_in,
                        &m.reordered,
                        &switch,
                        &m.switch.rx_gap_ms,
                        &m.switch.old_after_answer,
                        &m.switch.unselected,
                        &m.switch.read_gap_ms,
                        &m.api_ms,
                    ],
                )
            );
        }
    }
    for x in &r.results {
        match x {
            FastRecord::Idle(i) => println!(
                "\nidle: one fast VR, no traffic: {:.3}% of a core over the daemon without it \
                 ({:.3}% with it, {:.3}% with it slow, {:.3}% without; wakeups/s {:.0}, {:.0}, {:.0}; \
                 {} processes, {:.1} s each; spans measured again for frames to the slow path: \
                 fast {}, slow {}; {} frames in the fast span kept)",
                i.cpu_pct,
                i.cpu_pct_raw,
                i.slow_cpu_pct,
                i.none_cpu_pct,
                i.wakeups_per_s,
                i.slow_wakeups_per_s,
                i.none_wakeups_per_s,
                i.processes,
                i.seconds,
                i.again_fast,
                i.again_slow,
                i.to_slow
            ),
            FastRecord::MigrateTotal(t) => println!(
                "\n{} moves at {}: sent {} received {} lost {} reordered {}",
                t.moves,
                t.rate_pps.map_or("max".into(), |p| format!("{p} pps")),
                t.sent,
                t.received,
                t.lost,
                t.reordered
            ),
            FastRecord::Fairness(f) => {
                println!(
                    "\nfairness ({} path, {}, p0's NAPI {}, {} B {}): quiet tenant at {} of its share alone, {} of its rate \
                     (sent {} x the capacity of {:.0} pps, {} x at the port; the generator offers {:.0} pps unpaced, {} x); \
                     without the buckets {} at {} x",
                    f.path,
                    f.generator,
                    f.port_napi,
                    f.frame_bytes,
                    f.frame_bytes_from,
                    opt(Some(f.quiet_ratio), 3),
                    opt(Some(f.quiet_rate_ratio), 3),
                    opt(Some(f.overload), 2),
                    f.capacity_pps,
                    opt(Some(f.port_overload), 2),
                    f.gen_offer_pps,
                    opt(Some(f.offer_over_capacity), 2),
                    opt(Some(f.quiet_ratio_no_buckets), 3),
                    opt(Some(f.overload_no_buckets), 2),
                );
                println!(
                    "  quiet: asked {:.0}, sent {:.0} alone / {:.0} with noise, at the port {:.0} / {:.0}, forwarded {:.0} / {:.0}",
                    f.quiet_asked_pps,
                    f.quiet_sent_alone_pps,
                    f.quiet_sent_pps,
                    f.quiet_at_port_alone_pps,
                    f.quiet_at_port_pps,
                    f.quiet_forwarded_alone_pps,
                    f.quiet_forwarded_pps
                );
                println!(
                    "  noisy: asked {:.0}, sent {:.0}, at the port {:.0}, bucket drops {:.0}, forwarded {:.0} (limit {}); \
                     excess {:.0}, {} of it at its bucket",
                    f.noisy_asked_pps,
                    f.noisy_sent_pps,
                    f.noisy_at_port_pps,
                    f.noisy_rate_limited_pps,
                    f.noisy_forwarded_pps,
                    f.noisy_limit_pps,
                    f.noisy_excess_pps,
                    opt(Some(f.noisy_excess_at_bucket), 3),
                );
                println!(
                    "  tenant-blind drops: the generator's veth refused {:.0}, p0's queue {:.0}; p0's AF_XDP ring {:.0}; \
                     the quiet tenant's bucket {:.0} (limit {})",
                    f.gen_refused_pps,
                    f.port_rx_drops_pps,
                    f.port_ring_dropped_pps,
                    f.quiet_rate_limited_pps,
                    f.quiet_limit_pps,
                );
            }
            FastRecord::Tcp(t) => println!(
                "\ntcp: {} {}: {} Gbit/s (cpus {}; offloads {})",
                t.forwarder,
                t.placement,
                opt(t.tcp_gbps, 2),
                t.figures.tcp_cpus.as_deref().unwrap_or("?"),
                t.figures.tcp_offloads.as_deref().unwrap_or("?")
            ),
            FastRecord::Ping(p) => println!(
                "\nping: {} {} routes round {}: {} of {}, min {:.0} median {:.0} p90 {:.0} p99 {:.0} max {:.0} us{}",
                p.forwarder,
                p.routes,
                p.round,
                p.replies,
                p.sent,
                p.min_us,
                p.median_us,
                p.p90_us,
                p.p99_us,
                p.max_us,
                p.to_slow
                    .map_or(String::new(), |n| format!(", {n} to the slow path"))
            ),
            FastRecord::PingVsKernel(v) => println!(
                "\nping {} {} routes, {} rounds, {} replies: median {:.1} us (rounds {:.0}-{:.0}), p99 {:.0}; \
                 {} median {:.1} (rounds {:.0}-{:.0}), p99 {:.0}; {:+.1} us, at or below it in {} of {} rounds",
                v.forwarder,
                v.routes,
                v.rounds,
                v.replies,
                v.median_us,
                v.round_median_min_us,
                v.round_median_max_us,
                v.p99_us,
                v.kernel,
                v.kernel_median_us,
                v.kernel_round_median_min_us,
                v.kernel_round_median_max_us,
                v.kernel_p99_us,
                v.diff_median_us,
                v.rounds_at_or_below_kernel,
                v.rounds
            ),
            FastRecord::TcpBest(b) => println!(
                "\ntcp best: {} {:.2} Gbit/s ({}) / kernel {:.2} ({}) = {:.2} x",
                b.forwarder, b.tcp_gbps, b.placement, b.kernel_gbps, b.kernel_at, b.ratio
            ),
            _ => {}
        }
    }
}
