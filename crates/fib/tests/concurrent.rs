//! Updates on one thread while another looks up: no lookup may see a torn or half-applied
//! state (an answer that was never valid for its address), across pool growth and group
//! reuse.

use std::sync::atomic::{AtomicBool, Ordering};

use vrhost_fib::Ipv4Fib;

#[test]
fn lookups_during_updates_see_only_valid_answers() {
    let mut fib = Ipv4Fib::new();
    fib.insert(0x0a00_0000, 8, 1).unwrap(); // 10/8 -> 1, never removed
    let mut reader = fib.reader();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let r = s.spawn(|| {
            let mut checked = 0u64;
            let addrs: Vec<u32> = (0..64u32)
                .map(|i| 0x0a01_0200 | (i * 4))
                .chain((0..64).map(|i| 0x0b00_0000 | (i << 12)))
                .collect();
            let mut out = vec![None; addrs.len()];
            // Relaxed: a stop flag only.
            while !stop.load(Ordering::Relaxed) {
                reader.lookup_batch(&addrs, &mut out);
                for (a, o) in addrs.iter().zip(&out) {
                    if a >> 24 == 10 {
                        // 10.1.2.x: the /8, /16, /24 or /30 answer, never nothing.
                        assert!(matches!(o, Some(1..=4)), "{a:#x} -> {o:?}");
                    } else {
                        // 11/8: only churn routes, next hops >= 100.
                        assert!(o.is_none_or(|n| n >= 100), "{a:#x} -> {o:?}");
                    }
                }
                checked += addrs.len() as u64;
            }
            checked
        });
        for round in 0..200u32 {
            fib.insert(0x0a01_0000, 16, 2).unwrap();
            fib.insert(0x0a01_0200, 24, 3).unwrap();
            fib.insert(0x0a01_0204, 30, 4).unwrap();
            // Churn in 11/8: groups are created, grown into, collapsed and reused.
            for i in 0..64u32 {
                fib.insert(0x0b00_0000 | (i << 12) | (round & 0xff), 32, 100 + i)
                    .unwrap();
            }
            fib.remove(0x0a01_0204, 30);
            fib.remove(0x0a01_0000, 16);
            fib.remove(0x0a01_0200, 24);
            for i in 0..64u32 {
                fib.remove(0x0b00_0000 | (i << 12) | (round & 0xff), 32);
            }
        }
        stop.store(true, Ordering::Relaxed);
        let checked = r.join().unwrap();
        assert!(checked > 0);
    });
    assert_eq!(fib.len(), 1);
    assert_eq!(fib.groups_used(), 0);
}
