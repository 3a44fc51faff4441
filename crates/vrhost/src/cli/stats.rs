//! `vrhost stats` (counters of the host, its ports and VRs) and `vrhost
//! health`.

use std::fmt::Write as _;

use anyhow::{Result, bail};

use super::api::{Health, Stats};
use super::output::{Col, Table, bytes, duration, list, map_list, out};
use super::{ApiArgs, emit, one_shot};

/// `vrhost stats`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `vrhost health`.
#[derive(Debug, Clone, clap::Args)]
pub struct HealthArgs {
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Run `vrhost stats`.
///
/// # Errors
/// The daemon cannot be reached.
pub fn run(args: &StatsArgs) -> Result<()> {
    let a = one_shot(&args.api)?.get("/v1/stats")?;
    emit(&args.api, &a, |a| {
        let s: Stats = a.decode()?;
        Ok(out(&render(&s))?)
    })
}

/// Run `vrhost health`: exits non-zero unless the daemon says `ok`.
///
/// # Errors
/// The daemon cannot be reached, or is degraded.
pub fn health(args: &HealthArgs) -> Result<()> {
    let a = one_shot(&args.api)?.get("/v1/health")?;
    let h: Health = a.decode()?;
    emit(&args.api, &a, |_| {
        println!(
            "{}: vrhost {}, up {}, generation {}, {}/{} VRs running",
            h.status,
            h.version,
            duration(h.uptime_s),
            h.generation,
            h.vrs_up,
            h.vrs
        );
        Ok(())
    })?;
    if h.status != "ok" {
        bail!("the daemon is {}", h.status);
    }
    Ok(())
}

/// `vrhost stats` as text: the host, then a ports table and a VRs table.
pub fn render(s: &Stats) -> String {
    let h = &s.host;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "host: up {}, generation {}, rx {} packets, ingress drops {} ({}), worker CPU {:.1} s, sleeps {}, VR restarts {}, slot violations {}",
        duration(s.uptime_s),
        s.generation,
        h.rx_packets,
        h.ingress_drops.values().sum::<u64>(),
        map_list(&h.ingress_drops),
        h.worker_cpu_seconds,
        h.sleeps,
        h.vr_restarts,
        h.slot_violations,
    );

    let _ = writeln!(o, "\nports:");
    let ports = Table::of(
        &s.ports,
        &[
            (Col::l("NAME"), &|p| p.name.clone()),
            (Col::l("DRIVER"), &|p| p.driver.clone()),
            (Col::l("INTERFACE"), &|p| p.interface.clone()),
            (Col::r("RX-PKTS"), &|p| p.rx_packets.to_string()),
            (Col::r("RX-BYTES"), &|p| bytes(p.rx_bytes)),
            (Col::r("RX-DROP"), &|p| p.rx_dropped.to_string()),
            (Col::r("TX-PKTS"), &|p| p.tx_packets.to_string()),
            (Col::r("TX-BYTES"), &|p| bytes(p.tx_bytes)),
            (Col::r("TX-DROP"), &|p| p.tx_dropped.to_string()),
        ],
    );
    o.push_str(&ports.render());

    let _ = writeln!(o, "\nVRs:");
    let vrs = Table::of(
        &s.vrs,
        &[
            (Col::l("NAME"), &|v| v.name.clone()),
            (Col::l("STATE"), &|v| v.state.clone()),
            (Col::r("RX-PKTS"), &|v| v.stats.rx_packets.to_string()),
            (Col::r("RX-BYTES"), &|v| bytes(v.stats.rx_bytes)),
            (Col::r("TX-PKTS"), &|v| v.stats.tx_packets.to_string()),
            (Col::r("TX-BYTES"), &|v| bytes(v.stats.tx_bytes)),
            (Col::r("IN-DROP"), &|v| {
                v.stats.ingress_drops.values().sum::<u64>().to_string()
            }),
            (Col::r("VR-DROP"), &|v| v.stats.vr_dropped.to_string()),
            (Col::r("PORT-DROP"), &|v| v.stats.port_dropped.to_string()),
            (Col::r("VIOL"), &|v| v.stats.violation_count().to_string()),
            (Col::r("POOL-FREE"), &|v| {
                format!("{}/{}", v.stats.free_slots, v.stats.pool_slots)
            }),
            (Col::l("PIDS"), &|v| {
                list(v.instances.iter().filter_map(|i| i.pid))
            }),
        ],
    );
    o.push_str(&vrs.render());
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::api::fixtures;

    #[test]
    fn stats_text_from_fixture() {
        let s: Stats = serde_json::from_str(fixtures::STATS).unwrap();
        let text = render(&s);
        let want = "\
host: up 01:02:05, generation 3, rx 1000000 packets, ingress drops 15 (no_match=10, pool_full=5), worker CPU 100.0 s, sleeps 42, VR restarts 1, slot violations 0

ports:
NAME  DRIVER  INTERFACE  RX-PKTS  RX-BYTES  RX-DROP  TX-PKTS  TX-BYTES  TX-DROP
p0    af_xdp  p0          600000  36.6 MiB        3   400000  24.4 MiB        0
p1    af_xdp  p1          400000  24.4 MiB        0   590000  36.0 MiB        1

VRs:
NAME      STATE    RX-PKTS  RX-BYTES  TX-PKTS  TX-BYTES  IN-DROP  VR-DROP  PORT-DROP  VIOL  POOL-FREE  PIDS
tenant-a  running   600000  36.6 MiB   590000  36.0 MiB        5        7          1     2   768/1024  4242
tenant-b  stopped        0       0 B        0       0 B        0        0          0     0  1024/1024  -
";
        assert_eq!(text, want, "got:\n{text}");
    }
}
