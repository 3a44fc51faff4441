//! An engine's per-core rate, measured at its start (`docs/cluster.md`):
//! `bench memory`'s `shm` point of one router VR (the host worker and a
//! VR process over its region and rings, the real path, 64-byte frames,
//! the default 2-route table) over a short window.

use std::time::Duration;

use clap::Parser;

use super::{Mode, Point, load_tables, run_shm_or_inproc};
use crate::{Result, bail};

#[derive(Parser)]
struct Wrap {
    #[command(flatten)]
    args: super::MemoryArgs,
}

/// Forwarded frames per second of one router VR on one core through the
/// real path, counted over `window` after a warm-up of a fifth of it.
///
/// # Errors
/// The VR process cannot be started, or nothing was forwarded.
pub fn per_core_pps(window: Duration) -> Result<f64> {
    let secs = window.as_secs_f64().to_string();
    let warmup = (window.as_secs_f64() / 5.0).to_string();
    let w = Wrap::try_parse_from([
        "memory",
        "--modes",
        "shm",
        "--vrs",
        "1",
        "--frame-bytes",
        "64",
        "--seconds",
        &secs,
        "--warmup",
        &warmup,
    ])
    .map_err(|e| crate::failed!("{e}"))?;
    let tables = load_tables(&w.args)?;
    let Some(table) = tables.first() else {
        bail!("no route table");
    };
    let p = Point {
        mode: Mode::Shm,
        frame_bytes: 64,
        vrs: 1,
        idle: 0,
        pool: w.args.pool,
        table,
        poll: w.args.poll(),
        pages: w.args.hugepages,
    };
    let r = run_shm_or_inproc(&w.args, &p)?;
    let pps = r.mpps * 1e6;
    if !(pps.is_finite() && pps >= 1.0) {
        bail!("nothing forwarded in {window:?}");
    }
    Ok(pps)
}
