//! What a run of `bench memory` measures: its arguments checked, and the
//! points (mode, frame size, VRs, idle VRs beside, pool, table) in the
//! order a round runs them.

use vrhost_host::cpu;

use super::{MAX_VRS, MemoryArgs, Mode, Point, Table};
use crate::{Result, bail};

/// The arguments' ranges, each refused with its flag named.
pub(super) fn validate(args: &MemoryArgs) -> Result<()> {
    for &f in &args.frame_bytes {
        if !(64..=1518).contains(&f) {
            bail!("--frame-bytes {f}: must be within 64..=1518");
        }
    }
    for &v in &args.vrs {
        if !(1..=MAX_VRS).contains(&v) {
            bail!("--vrs {v}: must be within 1..={MAX_VRS}");
        }
    }
    for &v in &args.idle_vrs {
        if !(1..=MAX_VRS).contains(&v) {
            bail!("--idle-vrs {v}: must be within 1..={MAX_VRS}");
        }
    }
    for &v in &args.idle_beside {
        if v > MAX_VRS - 1 {
            bail!("--idle-beside {v}: must be within 0..={}", MAX_VRS - 1);
        }
    }
    for &p in std::iter::once(&args.pool).chain(&args.pool_sweep) {
        if !(2..=65_536).contains(&p) {
            bail!("pool size {p}: must be within 2..=65536");
        }
    }
    if !(1..=99).contains(&args.repeat) {
        bail!("--repeat {}: must be within 1..=99", args.repeat);
    }
    if !(args.seconds > 0.0 && args.seconds <= 3600.0 && (0.0..=60.0).contains(&args.warmup)) {
        bail!("--seconds must be in (0, 3600] and --warmup in [0, 60]");
    }
    let n = cpu::cpus();
    if args.host_cpu >= n || args.vr_cpu >= n {
        bail!("--host-cpu/--vr-cpu must be below the CPU count ({n})");
    }
    if args.host_cpu == args.vr_cpu {
        bail!(
            "--host-cpu and --vr-cpu are both {}: the host worker and the VRs need a core each \
             (a VR beside the worker only runs when the kernel takes the core from it)",
            args.vr_cpu
        );
    }
    Ok(())
}

/// Every point of the run: the main points first, then one busy VR beside
/// idle ones, then the pool sweep.
pub(super) fn points<'a>(args: &MemoryArgs, tables: &'a [Table]) -> Vec<Point<'a>> {
    let mut points = Vec::new();
    for table in tables {
        for &frame_bytes in &args.frame_bytes {
            for &vrs in &args.vrs {
                for &mode in &args.modes {
                    points.push(Point {
                        mode,
                        frame_bytes,
                        vrs,
                        idle: 0,
                        pool: args.pool,
                        table,
                        poll: args.poll(),
                        pages: args.hugepages,
                    });
                }
            }
        }
    }
    // One busy VR beside idle ones (0 idle is the 1-VR point again, run
    // in the same rounds so the ratios compare like with like).
    let beside: &[usize] = if args.no_idle_beside {
        &[]
    } else {
        &args.idle_beside
    };
    for &idle in beside {
        let same = |q: &Point<'_>| {
            (q.mode, q.frame_bytes, q.vrs, q.idle, q.pool) == (Mode::Shm, 64, 1, idle, args.pool)
                && std::ptr::eq(q.table, &tables[0])
        };
        if points.iter().any(same) {
            continue;
        }
        points.push(Point {
            mode: Mode::Shm,
            frame_bytes: 64,
            vrs: 1,
            idle,
            pool: args.pool,
            table: &tables[0],
            poll: args.poll(),
            pages: args.hugepages,
        });
    }
    if !args.no_pool_sweep {
        for &pool in &args.pool_sweep {
            points.push(Point {
                mode: Mode::Shm,
                frame_bytes: 64,
                vrs: 1,
                idle: 0,
                pool,
                table: &tables[0],
                poll: args.poll(),
                pages: args.hugepages,
            });
        }
    }
    points
}
