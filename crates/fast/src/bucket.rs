//! The select entries' token buckets as user space writes them: the
//! limits a bucket may have (so the program's arithmetic cannot
//! overflow), and an update that keeps a running bucket's state, so a
//! rate changed by config or API takes effect in place without handing
//! the tenant a fresh burst.
//!
//! The program's half (`take_token` in `ebpf/xdp_router.c`) refills from
//! `bpf_ktime_get_ns`: tokens = min(burst, tokens + elapsed * rate / 1 s),
//! `last_ns` advanced by the time the added tokens took (fractions of a
//! token are kept), a full bucket after a second or more idle. With
//! `elapsed` below a second and `rate` at most [`MAX_RATE_PPS`],
//! `elapsed * rate` stays below 2^64.

use crate::abi;
use crate::{FastError, SelectEntry};

/// The highest `rate_pps` a bucket may have (10 Gpps): below 2^34, which
/// keeps the program's `elapsed * rate` (elapsed < 10^9 ns) below 2^64.
pub const MAX_RATE_PPS: u64 = 10_000_000_000;
/// The largest `burst` a bucket may have (also 10^10 frames: `tokens +
/// added` cannot overflow).
pub const MAX_BURST: u64 = 10_000_000_000;

/// The raw entry for `entry`, keeping the bucket state of `old` (what the
/// map holds for the key, if anything): its tokens (at most the new
/// burst) and refill time, when `old` had a bucket. A fresh bucket starts
/// full (`last_ns` 0: the program refills it on the first frame).
pub(crate) fn select_value(
    entry: &SelectEntry,
    path: u32,
    old: Option<abi::SelectValue>,
) -> Result<abi::SelectValue, FastError> {
    let (rate_pps, burst) = match entry.limit {
        None => (0, 0),
        Some(b) if b.rate_pps == 0 || b.rate_pps > MAX_RATE_PPS => {
            return Err(FastError::Config {
                why: "token bucket: rate_pps must be 1..=10^10 (no bucket: limit None)",
            });
        }
        Some(b) if b.burst == 0 || b.burst > MAX_BURST => {
            return Err(FastError::Config {
                why: "token bucket: burst must be 1..=10^10",
            });
        }
        Some(b) => (b.rate_pps, b.burst),
    };
    let (tokens, last_ns) = match old {
        Some(o) if o.rate_pps > 0 && rate_pps > 0 => (o.tokens.min(burst), o.last_ns),
        _ => (burst, 0),
    };
    Ok(abi::SelectValue {
        vr: entry.vr,
        path,
        rate_pps,
        burst,
        tokens,
        last_ns,
    })
}

#[cfg(test)]
impl crate::FastPath {
    /// The raw select entry of `key` (tests read the bucket's state).
    pub(crate) fn select_raw(&self, key: &crate::SelectKey) -> Option<abi::SelectValue> {
        self.select.get(&crate::select_key(key), 0).ok()
    }

    /// Write a raw select entry (tests set a bucket's state).
    pub(crate) fn put_select_raw(&mut self, key: &crate::SelectKey, v: abi::SelectValue) {
        self.select
            .insert(crate::select_key(key), v, 0)
            .expect("select insert");
        self.gens
            .raise(crate::cache::Cached::Select)
            .expect("select generation");
    }
}
