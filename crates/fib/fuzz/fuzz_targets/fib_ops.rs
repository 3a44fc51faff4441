//! The FIB against the naive reference under arbitrary insert/remove/lookup sequences, in
//! a small address space so that prefixes nest, fill groups and get deleted again.
//! Each op is 4 bytes (IPv4) or 4 bytes plus a selector (IPv6): kind, length, address bits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vrhost_fib::reference::NaiveLpm;
use vrhost_fib::{Fib, Key, Lpm};

fn run<K: Key>(data: &[u8], addr: impl Fn(u16) -> K) {
    let mut fib = Fib::<K>::new();
    let mut naive = NaiveLpm::<K>::new();
    for op in data.chunks_exact(4) {
        let a = addr(u16::from_be_bytes([op[2], op[3]]));
        let len = op[1] % (K::BITS + 1);
        match op[0] % 4 {
            0 | 1 => assert_eq!(
                Lpm::insert(&mut fib, a, len, u32::from(op[0] >> 5)),
                naive.insert(a, len, u32::from(op[0] >> 5))
            ),
            2 => assert_eq!(fib.remove(a, len), naive.remove(a, len)),
            _ => assert_eq!(fib.lookup(a), naive.lookup(a), "{a:?}"),
        }
    }
    for op in data.chunks_exact(4) {
        let a = addr(u16::from_be_bytes([op[2], op[3]]));
        assert_eq!(fib.lookup(a), naive.lookup(a), "{a:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, ops)) = data.split_first() else {
        return;
    };
    if sel & 1 == 0 {
        // 16 address bits spread over the trie levels: 10.x.y.z with x, y, z from them.
        run::<u32>(ops, |b| {
            0x0a00_0000
                | (u32::from(b & 0xff00) << 8)
                | u32::from(b & 0xf0) << 4
                | u32::from(b & 0x0f)
        });
    } else {
        run::<u128>(ops, |b| {
            (0x2001_0db8u128 << 96) | (u128::from(b >> 8) << 88) | (u128::from(b & 0xff) << 76)
        });
    }
});
