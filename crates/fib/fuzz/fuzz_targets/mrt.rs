//! MRT parser: any input gives routes or an error naming an offset, never a panic; with
//! keep_partial, the routes kept are a prefix of what a strict parse of the same bytes
//! would give up to the cut.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vrhost_fib::import::parse_mrt;

fuzz_target!(|data: &[u8]| {
    let strict = parse_mrt(data, false);
    let partial = parse_mrt(data, true);
    if let (Ok((a, _)), Ok((b, _))) = (&strict, &partial) {
        assert_eq!(a, b, "strict and partial agree when nothing is cut");
    }
    if let Ok((routes, stats)) = partial {
        if let Some(t) = stats.truncated {
            assert!(t.offset <= data.len() as u64);
        }
        assert!(
            routes
                .iter()
                .all(|r| r.len <= if r.prefix.is_ipv4() { 32 } else { 128 })
        );
    }
});
