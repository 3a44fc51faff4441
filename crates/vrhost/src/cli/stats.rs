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
    let mut t = Table::new(&[
        Col::l("NAME"),
        Col::l("DRIVER"),
        Col::l("INTERFACE"),
        Col::r("RX-PKTS"),
        Col::r("RX-BYTES"),
        Col::r("RX-DROP"),
        Col::r("TX-PKTS"),
        Col::r("TX-BYTES"),
        Col::r("TX-DROP"),
    ]);
    for p in &s.ports {
        t.row([
            p.name.clone(),
            p.driver.clone(),
            p.interface.clone(),
            p.rx_packets.to_string(),
            bytes(p.rx_bytes),
            p.rx_dropped.to_string(),
            p.tx_packets.to_string(),
            bytes(p.tx_bytes),
            p.tx_dropped.to_string(),
        ]);
    }
    o.push_str(&t.render());

    let _ = writeln!(o, "\nVRs:");
    let mut t = Table::new(&[
        Col::l("NAME"),
        Col::l("STATE"),
        Col::r("RX-PKTS"),
        Col::r("RX-BYTES"),
        Col::r("TX-PKTS"),
        Col::r("TX-BYTES"),
        Col::r("IN-DROP"),
        Col::r("VR-DROP"),
        Col::r("PORT-DROP"),
        Col::r("VIOL"),
        Col::r("POOL-FREE"),
        Col::l("PIDS"),
    ]);
    for v in &s.vrs {
        let st = &v.stats;
        t.row([
            v.name.clone(),
            v.state.clone(),
            st.rx_packets.to_string(),
            bytes(st.rx_bytes),
            st.tx_packets.to_string(),
            bytes(st.tx_bytes),
            st.ingress_drops.values().sum::<u64>().to_string(),
            st.vr_dropped.to_string(),
            st.port_dropped.to_string(),
            st.violation_count().to_string(),
            format!("{}/{}", st.free_slots, st.pool_slots),
            list(v.instances.iter().filter_map(|i| i.pid)),
        ]);
    }
    o.push_str(&t.render());
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
