//! `bench memory --hugepages`: the VRs' regions in reserved huge pages
//! (the daemon's `[host] hugepages`), with the huge pages the run needs
//! reserved for it (`/proc/sys/vm/nr_hugepages` raised by what is
//! missing) and the old count put back when it ends. The idle figures'
//! VRs keep ordinary pages, so their memory stays comparable.

use std::sync::atomic::{AtomicU64, Ordering};

use vrhost_host::hugepages::{HugePages, free_huge_pages};
use vrhost_shm::{HUGE_PAGE_BYTES, Layout};

use super::Point;
use crate::{Context, Result, bail};

const NR: &str = "/proc/sys/vm/nr_hugepages";

/// The pool's old size, put back on drop (or by [`put_back`]).
#[derive(Debug)]
pub(super) struct Reservation;

/// `nr_hugepages` before the run raised it; `u64::MAX`: not raised.
static OLD: AtomicU64 = AtomicU64::new(u64::MAX);

/// Put back the count of reserved huge pages a run raised, if it did:
/// for a run stopped by a signal, which exits without unwinding.
pub fn put_back() {
    let old = OLD.swap(u64::MAX, Ordering::SeqCst);
    if old == u64::MAX {
        return;
    }
    match set_nr_hugepages(old) {
        Ok(()) => eprintln!("hugepages: {NR} put back to {old}"),
        Err(e) => eprintln!("hugepages: could not put {NR} back to {old}: {e}"),
    }
}

fn nr_hugepages() -> Result<u64> {
    let s = std::fs::read_to_string(NR).context(NR)?;
    s.trim()
        .parse()
        .map_err(|e| crate::failed!("{NR}: {s:?}: {e}"))
}

fn set_nr_hugepages(n: u64) -> Result<()> {
    std::fs::write(NR, n.to_string()).context(NR)
}

/// Huge pages the largest point needs: its VRs' regions, each rounded up
/// to whole pages.
pub(super) fn needed(points: &[Point<'_>]) -> Result<u64> {
    let mut most = 0;
    for p in points {
        let spec = vrhost_host::PathSpec::new("size", vec![0, 1], p.pool);
        let bytes = Layout::new(spec.region_config())
            .map_err(|e| crate::failed!("pool {}: {e}", p.pool))?
            .region_bytes;
        most = most.max((p.vrs + p.idle) as u64 * bytes.div_ceil(HUGE_PAGE_BYTES));
    }
    Ok(most)
}

/// Reserve what `points` need under `pages` (nothing with `off`), saying
/// so on stderr. `auto` runs on with what the kernel gave (the regions
/// that find none fall back to ordinary pages); `required` fails when it
/// gave too few.
pub(super) fn reserve(pages: HugePages, points: &[Point<'_>]) -> Result<Option<Reservation>> {
    if pages == HugePages::Off {
        return Ok(None);
    }
    let need = needed(points)?;
    let free = free_huge_pages();
    if free >= need {
        eprintln!("hugepages: {need} pages of 2 MiB needed, {free} free: nothing reserved");
        return Ok(None);
    }
    let old = nr_hugepages()?;
    let want = old + (need - free);
    OLD.store(old, Ordering::SeqCst);
    let guard = Reservation;
    set_nr_hugepages(want)?;
    let got = nr_hugepages()?;
    eprintln!(
        "hugepages: {need} pages of 2 MiB needed, {free} free: {NR} {old} -> {got} for this run \
         (asked {want}), put back to {old} at its end"
    );
    if got < want && pages == HugePages::Required {
        bail!("--hugepages required: the kernel reserved {got} of {want} huge pages");
    }
    Ok(Some(guard))
}

impl Drop for Reservation {
    fn drop(&mut self) {
        put_back();
    }
}
