//! The forwarding bench's table.

use super::*;

pub(super) fn print_table(r: &[Record]) {
    println!(
        "{:<10} {:>5} {:>7} {:>5} {:>11} {:>11} {:>7} {:>8} {:>8} {:>7} {:>8}  lost pps: to node / in / vr / out",
        "forwarder",
        "bytes",
        "routes",
        "load",
        "offered",
        "forwarded",
        "loss%",
        "rtt avg",
        "rtt p99",
        "tcp",
        "cpu ns"
    );
    let opt = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
    for x in r {
        println!(
            "{:<10} {:>5} {:>7} {:>5.2} {:>11.0} {:>11.0} {:>7.2} {:>8} {:>8} {:>7} {:>8}  {:.0} / {:.0} / {:.0} / {:.0}",
            x.forwarder,
            x.frame_bytes,
            x.routes,
            x.load,
            x.offered_pps,
            x.forwarded_pps,
            x.loss_pct,
            opt(x.rtt_us_avg, 0),
            opt(x.rtt_us_p99, 0),
            opt(x.tcp_gbps, 2),
            opt(x.cpu_ns_per_pkt, 0),
            x.lost.to_node_pps,
            x.lost.node_in_pps,
            x.lost.vr_pps,
            x.lost.node_out_pps
        );
    }
}
