//! The `cost` experiment: the fast path's program alone, ns per frame
//! (`vrhost_fast::measure_cost`: `BPF_PROG_TEST_RUN` with `repeat`, no
//! device, generator or sink), for each table, beside `xdp_pass` (the
//! harness) and a minimal XDP router measured the same way in the same
//! run. Runs in a namespace of its own (`vrhf-cost-*`), whose loopback the
//! programs are attached to while timed.

use serde::Serialize;
use vrhost_lab::Netns;

use super::FastpathArgs;
use crate::forward::Table;
use crate::report::{Column, heading, row};
use crate::{Context, Result};

/// Distinct frames (destinations) per table: each call takes the next.
const FRAMES: usize = 64;

/// One program's cost per frame.
#[derive(Debug, Clone, Serialize)]
pub struct CostRecord {
    /// `2`, or the route file's name.
    pub table: String,
    /// `router` (its VR selected by port, as the bench's daemon does),
    /// `router_mac` (by port and MAC), `pass`, `minimal`.
    pub program: String,
    /// Routes in the router's table (0: not a router of vrhost's).
    pub routes: usize,
    /// Distinct frames sent in turn.
    pub frames: usize,
    /// Median over calls of a call's mean ns per run.
    pub ns_median: f64,
    /// The lowest call's mean.
    pub ns_min: f64,
    /// The mean over calls.
    pub ns_mean: f64,
    /// Calls of `vrhost_fast::RUNS_PER_CALL` runs.
    pub calls: u32,
    /// Share of the runs forwarded (the router's counters; 1 for a
    /// reference that gave its verdict).
    pub forwarded: f64,
}

/// Measure every table of the run.
pub(super) fn cost(
    args: &FastpathArgs,
    specs: &[String],
    tables: &[Table],
) -> Result<Vec<CostRecord>> {
    let ns = Netns::unique("vrhf-cost").context("the cost experiment's namespace")?;
    let mut out = Vec::new();
    for (i, (spec, table)) in specs.iter().zip(tables).enumerate() {
        let name = table
            .file
            .as_ref()
            .and_then(|f| f.file_name())
            .map_or(spec.clone(), |f| f.to_string_lossy().into_owned());
        let lines = ns
            .run(|| vrhost_fast::measure_cost(&table.routes, FRAMES, args.cost_calls, i == 0))?
            .with_context(|| format!("cost of table {spec}"))?;
        out.extend(lines.into_iter().map(|l| CostRecord {
            table: name.clone(),
            program: l.program.to_string(),
            routes: l.routes,
            frames: l.frames,
            ns_median: l.cost.ns_median,
            ns_min: l.cost.ns_min,
            ns_mean: l.cost.ns_mean,
            calls: l.cost.calls,
            forwarded: l.forwarded,
        }));
    }
    Ok(out)
}

const COLUMNS: [Column; 8] = [
    Column::left("table", 24),
    Column::left("program", 11),
    Column::right("routes", 8),
    Column::right("frames", 7),
    Column::right("ns median", 10).decimals(0),
    Column::right("ns min", 8).decimals(0),
    Column::right("ns mean", 8).decimals(1),
    Column::right("forwarded", 10).decimals(3),
];

/// The cost lines as a table.
pub(super) fn print(records: &[&CostRecord]) {
    if records.is_empty() {
        return;
    }
    println!("\n{}", heading(&COLUMNS));
    for r in records {
        println!(
            "{}",
            row(
                &COLUMNS,
                &[
                    &r.table,
                    &r.program,
                    &r.routes,
                    &r.frames,
                    &r.ns_median,
                    &r.ns_min,
                    &r.ns_mean,
                    &r.forwarded,
                ],
            )
        );
    }
}
