//! The forwarding bench's table.

use super::Record;
use crate::report::{Column, heading, opt, row};

const FORWARDING: [Column; 17] = [
    Column::left("gen", 8),
    Column::left("family", 6),
    Column::left("forwarder", 16),
    Column::right("bytes", 5),
    Column::right("routes", 7),
    Column::right("load", 5).decimals(2),
    Column::right("offered", 11).decimals(0),
    Column::right("forwarded", 11).decimals(0),
    Column::right("loss%", 7).decimals(2),
    Column::right("rtt avg", 8),
    Column::right("rtt p99", 8),
    Column::right("idle p99", 8),
    Column::right("tcp", 7),
    Column::right("cpu ns", 8),
    Column::right("copies", 6),
    Column::right("proc ns", 8),
    Column::right("wake/pkt", 8),
];

pub(crate) fn print_table(r: &[Record]) {
    println!(
        "{}  lost pps: to node / in / vr / out",
        heading(&FORWARDING)
    );
    for x in r {
        let cells = row(
            &FORWARDING,
            &[
                &x.generator,
                &x.family,
                &x.forwarder,
                &x.frame_bytes,
                &x.routes,
                &x.load,
                &x.offered_pps,
                &x.forwarded_pps,
                &x.loss_pct,
                &opt(x.rtt_us_avg, 0),
                &opt(x.rtt_us_p99, 0),
                &opt(x.rtt_idle_us_p99, 0),
                &opt(x.tcp_gbps, 2),
                &opt(x.cpu_ns_per_pkt, 0),
                &x.copies_per_frame
                    .map_or("-".to_string(), |c| c.to_string()),
                &opt(x.vrhost_cpu_ns_per_pkt, 0),
                &opt(x.wakeups_per_pkt, 3),
            ],
        );
        println!(
            "{cells}  {:.0} / {:.0} / {:.0} / {:.0}",
            x.lost.to_node_pps, x.lost.node_in_pps, x.lost.vr_pps, x.lost.node_out_pps
        );
    }
    super::best::print_best(r);
}
