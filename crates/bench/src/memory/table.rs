//! The memory bench's table and ratios.

use serde::Serialize;

use super::{AnyRecord, Family, IdleRecord, Mode, Record};
use crate::machine::Machine;
use crate::report::{Column, heading, row};

const FORWARDING: [Column; 20] = [
    Column::left("mode", 8),
    Column::left("family", 6),
    Column::right("frame", 6),
    Column::right("vrs", 4),
    Column::right("idle", 5),
    Column::right("pool", 6),
    Column::right("routes", 7),
    Column::right("Mpps", 8).decimals(2),
    Column::right("Gbit/s", 7).decimals(2),
    Column::right("ns/pkt", 9).decimals(1),
    Column::right("host%", 6).decimals(0),
    Column::right("ns/round", 9).decimals(0),
    Column::right("vr%", 6).decimals(0),
    Column::right("drops", 9),
    Column::right("viol", 5),
    Column::right("cs/kf", 7).decimals(2),
    Column::right("f/turn", 7).decimals(0),
    Column::right("kick/kf", 8).decimals(2),
    Column::right("held", 6).decimals(0),
    Column::right("rtt", 6).decimals(0),
];

pub(super) fn print_table(results: &[AnyRecord], rounds: &[Vec<Record>]) {
    let m = Machine::this();
    println!(
        "vrhost bench memory  {}  {} ({} cores)  kernel {}",
        m.date, m.cpu, m.cores, m.kernel
    );
    println!("{}", heading(&FORWARDING));
    for r in results {
        match r {
            AnyRecord::Fwd(r) => print_forwarding(r),
            AnyRecord::Idle(i) => print_idle(i),
        }
    }
    // Ratios per route table (the first record of each point: the pool
    // sweep comes after the main points).
    let tables = tables_of(results);
    for &table in &tables {
        print_ratios(results, rounds, table);
    }
    print_family_ratios(results, rounds, &tables);
}

/// The 64 B, 1 VR rate of a table in `mode`.
fn one_vr(results: &[AnyRecord], mode: Mode, (family, routes): (Family, usize)) -> Option<f64> {
    results.iter().find_map(|r| match r {
        AnyRecord::Fwd(r)
            if (r.mode, r.family, r.routes, r.vrs, r.idle_vrs, r.frame_bytes)
                == (mode, family, routes, 1, 0, 64) =>
        {
            Some(r.mpps)
        }
        _ => None,
    })
}

/// IPv6 against IPv4 with the same number of routes, and each family's
/// bigger tables against its 2 routes (shm, 64 B, 1 VR).
fn print_family_ratios(results: &[AnyRecord], rounds: &[Vec<Record>], tables: &[(Family, usize)]) {
    for r in family_ratios(results, rounds) {
        let each: Vec<String> = r.rounds.iter().map(|v| format!("{v:.2}")).collect();
        println!(
            "{} ipv6 / ipv4 (64 B, 1 VR, {} routes): {:.2} (each round: {})",
            format!("{:?}", r.mode).to_lowercase(),
            r.routes,
            r.ratio,
            each.join(" ")
        );
    }
    for &(family, routes) in tables {
        if routes > 2
            && let (Some(r), Some(two)) = (
                one_vr(results, Mode::Shm, (family, routes)),
                one_vr(results, Mode::Shm, (family, 2)),
            )
        {
            println!(
                "shm {} {routes} routes / 2 routes (64 B, 1 VR): {:.2}",
                family.name(),
                r / two
            );
        }
    }
}

/// IPv6 against IPv4 in one mode, with tables of the same number of
/// routes (64 B frames, 1 VR, no idle VRs): a row of the table and a
/// record of the JSON report (issue 22's figure).
#[derive(Debug, Clone, Serialize)]
pub struct FamilyRatio {
    /// `shm`, `inproc` or `syscall`.
    pub mode: Mode,
    /// Routes in each table.
    pub routes: usize,
    /// The median IPv6 rate, Mpps.
    pub ipv6_mpps: f64,
    /// The median IPv4 rate, Mpps.
    pub ipv4_mpps: f64,
    /// `ipv6_mpps / ipv4_mpps`.
    pub ratio: f64,
    /// The same ratio within each round (points run seconds apart).
    pub rounds: Vec<f64>,
}

/// Every IPv6 / IPv4 ratio of `results`: per mode, per route count that
/// both families have.
pub(super) fn family_ratios(results: &[AnyRecord], rounds: &[Vec<Record>]) -> Vec<FamilyRatio> {
    let is_point = |r: &Record, mode: Mode, family: Family, routes: usize| {
        (r.mode, r.family, r.routes, r.vrs, r.idle_vrs, r.frame_bytes)
            == (mode, family, routes, 1, 0, 64)
    };
    let round_of = |mode, family, routes| {
        rounds
            .iter()
            .find(|r| r.first().is_some_and(|r| is_point(r, mode, family, routes)))
    };
    let mut out = Vec::new();
    for (family, routes) in tables_of(results) {
        if family != Family::Ipv6 {
            continue;
        }
        for mode in [Mode::Shm, Mode::Inproc, Mode::Syscall] {
            let (Some(v6), Some(v4)) = (
                one_vr(results, mode, (Family::Ipv6, routes)),
                one_vr(results, mode, (Family::Ipv4, routes)),
            ) else {
                continue;
            };
            if v4 <= 0.0 {
                continue;
            }
            let each = per_round(
                round_of(mode, Family::Ipv6, routes),
                round_of(mode, Family::Ipv4, routes),
            );
            out.push(FamilyRatio {
                mode,
                routes,
                ipv6_mpps: v6,
                ipv4_mpps: v4,
                ratio: v6 / v4,
                rounds: each,
            });
        }
    }
    out
}

fn print_forwarding(r: &Record) {
    println!(
        "{}",
        row(
            &FORWARDING,
            &[
                &format!("{:?}", r.mode).to_lowercase(),
                &r.family.name(),
                &r.frame_bytes,
                &r.vrs,
                &r.idle_vrs,
                &r.pool_slots,
                &r.routes,
                &r.mpps,
                &r.gbps,
                &r.cpu_ns_per_pkt,
                &r.host_cpu_pct,
                &r.host_ns_per_round,
                &r.vr_cpu_pct,
                &r.drops,
                &r.violations,
                &(r.vr_sleeps_per_kframe + r.vr_preempts_per_kframe),
                &r.frames_per_turn,
                &r.kicks_per_kframe,
                &r.held_per_vr,
                &r.line_rtt_ns,
            ]
        )
    );
}

fn print_idle(i: &IdleRecord) {
    println!(
        "idle: {} VRs + host, no traffic: {:.2}% of one core, {:.1} MiB (PSS)\n\
         first packet after idling ({} probes): in -> out p50 {:.1} us, p99 {:.1} us, max {:.1} us; \
         of which host took it -> out p50 {:.1} us, p99 {:.1} us\n\
         reference, same run: one eventfd wakeup host CPU -> VR CPU after the same pause: p50 {:.1} us, p99 {:.1} us",
        i.vrs,
        i.cpu_pct,
        i.rss_bytes as f64 / (1024.0 * 1024.0),
        i.probes,
        i.wake_us_p50,
        i.wake_us_p99,
        i.wake_us_max,
        i.host_us_p50,
        i.host_us_p99,
        i.wake_ref_us_p50,
        i.wake_ref_us_p99
    );
}

/// The ratios of the 64 B points of a table: shm to inproc, shm to
/// syscall, N VRs to 1.
fn print_ratios(
    results: &[AnyRecord],
    rounds: &[Vec<Record>],
    (family, routes_n): (Family, usize),
) {
    let is_point = |r: &Record, (mode, vrs): (Mode, usize)| {
        r.mode == mode
            && r.vrs == vrs
            && r.idle_vrs == 0
            && r.frame_bytes == 64
            && r.routes == routes_n
            && r.family == family
    };
    let routes = format!("{routes_n} {}", family.name());
    // The same ratio within each round (points run seconds apart).
    let per_round = |num: (Mode, usize), den: (Mode, usize)| {
        let find = |point: (Mode, usize)| {
            rounds
                .iter()
                .find(|r| r.first().is_some_and(|r| is_point(r, point)))
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
            AnyRecord::Fwd(r) if is_point(r, (mode, vrs)) => Some(r.mpps),
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
    for r in scale_ratios(results, rounds, (family, routes_n)) {
        let each: Vec<String> = r.rounds.iter().map(|v| format!("{v:.2}")).collect();
        println!(
            "shm {} VRs / 1 VR aggregate (64 B, {routes} routes): {:.2}{}",
            r.vrs,
            r.ratio,
            match each.is_empty() {
                true => String::new(),
                false => format!(" (each round: {})", each.join(" ")),
            }
        );
    }
    print_idle_beside(results, (family, routes_n));
}

/// The busy VR's rate and the host's CPU per round beside N idle VRs,
/// against the same point with none.
fn print_idle_beside(results: &[AnyRecord], (family, routes): (Family, usize)) {
    let beside: Vec<&Record> = results
        .iter()
        .filter_map(|r| match r {
            AnyRecord::Fwd(r)
                if r.mode == Mode::Shm
                    && r.vrs == 1
                    && r.routes == routes
                    && r.family == family
                    && r.runs > 0 =>
            {
                Some(r)
            }
            _ => None,
        })
        .collect();
    let Some(base) = beside.iter().find(|r| r.idle_vrs == 0) else {
        return;
    };
    for r in beside.iter().filter(|r| r.idle_vrs > 0) {
        println!(
            "1 busy VR beside {} idle / beside none (64 B, {routes} {} routes): {:.2} x the rate, \
             host {:.0} ns per round against {:.0}",
            r.idle_vrs,
            family.name(),
            r.mpps / base.mpps,
            r.host_ns_per_round,
            base.host_ns_per_round
        );
    }
}

/// The aggregate of N busy VRs against one VR's (`shm`, 64 B, no idle VRs
/// beside them): a row of the table and a record of the JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRatio {
    /// Always `shm`.
    pub mode: Mode,
    /// The points' address family.
    pub family: Family,
    /// Routes in each VR's table.
    pub routes: usize,
    /// Busy VRs of the numerator (the denominator is 1 VR).
    pub vrs: usize,
    /// Median aggregate rate with `vrs` VRs over the median with 1.
    pub ratio: f64,
    /// The same ratio within each round (points run seconds apart).
    pub rounds: Vec<f64>,
}

/// Every N-VR / 1-VR ratio of the `shm` points of one table, N > 1 in
/// increasing order.
pub(super) fn scale_ratios(
    results: &[AnyRecord],
    rounds: &[Vec<Record>],
    (family, routes): (Family, usize),
) -> Vec<ScaleRatio> {
    let is_point = |r: &Record, vrs: usize| {
        (r.mode, r.vrs, r.idle_vrs, r.frame_bytes, r.routes, r.family)
            == (Mode::Shm, vrs, 0, 64, routes, family)
    };
    let get = |vrs: usize| {
        results.iter().find_map(|r| match r {
            AnyRecord::Fwd(r) if is_point(r, vrs) && r.runs > 0 => Some(r.mpps),
            _ => None,
        })
    };
    let round_of = |vrs: usize| {
        rounds
            .iter()
            .find(|r| r.first().is_some_and(|r| is_point(r, vrs)))
    };
    let Some(one) = get(1).filter(|&m| m > 0.0) else {
        return Vec::new();
    };
    let mut counts: Vec<usize> = results
        .iter()
        .filter_map(|r| match r {
            AnyRecord::Fwd(r) if r.vrs > 1 && is_point(r, r.vrs) => Some(r.vrs),
            _ => None,
        })
        .collect();
    counts.sort_unstable();
    counts.dedup();
    counts
        .into_iter()
        .filter_map(|n| {
            Some(ScaleRatio {
                mode: Mode::Shm,
                family,
                routes,
                vrs: n,
                ratio: get(n)? / one,
                rounds: per_round(round_of(n), round_of(1)),
            })
        })
        .collect()
}

/// The ratio of two points' rates within each round (none if either
/// point has no runs).
fn per_round(num: Option<&Vec<Record>>, den: Option<&Vec<Record>>) -> Vec<f64> {
    match (num, den) {
        (Some(a), Some(b)) => a
            .iter()
            .zip(b)
            .filter(|(_, d)| d.mpps > 0.0)
            .map(|(n, d)| n.mpps / d.mpps)
            .collect(),
        _ => Vec::new(),
    }
}

/// The scale ratios of every table of `results` (the JSON report's).
pub(super) fn all_scale_ratios(results: &[AnyRecord], rounds: &[Vec<Record>]) -> Vec<ScaleRatio> {
    tables_of(results)
        .into_iter()
        .flat_map(|t| scale_ratios(results, rounds, t))
        .collect()
}

/// The (family, routes) of the forwarding points, in order of first
/// appearance.
fn tables_of(results: &[AnyRecord]) -> Vec<(Family, usize)> {
    let mut tables: Vec<(Family, usize)> = Vec::new();
    for r in results {
        if let AnyRecord::Fwd(r) = r
            && !tables.contains(&(r.family, r.routes))
        {
            tables.push((r.family, r.routes));
        }
    }
    tables
}
