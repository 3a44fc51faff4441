//! The exact-match table of a large classifier group: a group's masked
//! keys in an open-addressed array (linear probing, a power-of-two size at
//! least four times the keys), indexed by a multiplicative hash of the
//! key's three words folded into one.
//!
//! A lookup is one multiply, one or two loads and a compare, where a
//! general hash map costs a seeded hash, a control-byte probe and the
//! compare: with 101 tenants told apart by source (`bench memory
//! --idle-beside 100`) the map was the largest cost the worker's round
//! added over one tenant's scan. The table holds only the operator's rules;
//! a frame chooses only where its probe starts, and a probe ends at the
//! first empty entry, so the table is grown at build time until no run of
//! occupied entries is longer than [`MAX_RUN`]: no frame costs more than
//! that many compares.

use super::{Hit, Words};

/// Longest run of occupied entries a built table keeps.
const MAX_RUN: usize = 8;

/// Fibonacci hashing's multiplier (2^64 / golden ratio, odd).
const MUL: u64 = 0x9E37_79B9_7F4A_7C15;

/// One key and the first rule's hit for it.
#[derive(Debug, Clone, Copy)]
struct Entry {
    key: Words,
    hit: Hit,
}

/// Keys to hits (see the module doc).
#[derive(Debug, Clone)]
pub(super) struct Exact {
    entries: Box<[Option<Entry>]>,
    /// `64 - log2(entries.len())`.
    shift: u32,
}

#[inline]
fn fold(k: &Words) -> u64 {
    let f = k[0] ^ k[1].rotate_left(21) ^ k[2].rotate_left(42);
    f ^ (f >> 29)
}

#[inline]
fn same(a: &Words, b: &Words) -> bool {
    // Word by word: a wide compare of a key just stored word by word
    // stalls on store forwarding.
    (a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) == 0
}

impl Exact {
    /// A table of `keys` (the first hit of each key is kept, as the rules'
    /// order asks).
    pub(super) fn new(keys: &[(Words, Hit)]) -> Self {
        let mut bits = (keys.len().max(1) * 4).next_power_of_two().trailing_zeros();
        loop {
            let mut t = Self {
                entries: vec![None; 1 << bits].into_boxed_slice(),
                shift: 64 - bits,
            };
            for &(k, h) in keys {
                t.place(k, h);
            }
            // Past 64 entries per key the keys are chosen to collide, and
            // the run is what it is.
            if t.longest_run() <= MAX_RUN || (1usize << bits) >= keys.len() * 64 {
                return t;
            }
            bits += 1;
        }
    }

    /// Keys held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.iter().flatten().count()
    }

    #[inline]
    fn home(&self, k: &Words) -> usize {
        (fold(k).wrapping_mul(MUL) >> self.shift) as usize
    }

    /// Put `k` unless it is there (room is left by the caller's sizing).
    fn place(&mut self, key: Words, hit: Hit) {
        let mask = self.entries.len() - 1;
        let mut i = self.home(&key);
        loop {
            match &self.entries[i] {
                Some(e) if same(&e.key, &key) => return,
                Some(_) => i = (i + 1) & mask,
                None => {
                    self.entries[i] = Some(Entry { key, hit });
                    return;
                }
            }
        }
    }

    /// The longest run of occupied entries, wrapping around.
    fn longest_run(&self) -> usize {
        let n = self.entries.len();
        let (mut best, mut run) = (0, 0);
        // Twice around, so a run across the end is counted whole.
        for i in 0..2 * n {
            if self.entries[i % n].is_some() {
                run += 1;
                best = best.max(run);
            } else {
                run = 0;
            }
        }
        best.min(n)
    }

    /// The hit of `k`, if held.
    #[inline]
    pub(super) fn get(&self, k: &Words) -> Option<Hit> {
        let mask = self.entries.len() - 1;
        let mut i = self.home(k);
        // At most the longest run: the table always has empty entries.
        loop {
            match &self.entries[i] {
                Some(e) if same(&e.key, k) => return Some(e.hit),
                Some(_) => i = (i + 1) & mask,
                None => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Exact, Hit, MAX_RUN, Words};

    fn hit(pos: u32) -> Hit {
        Hit {
            pos,
            vr: pos,
            vnic: 0,
        }
    }

    /// Source /32 keys as the bench's tenants have them (192.168.x.y).
    fn tenant(i: u32) -> Words {
        let src = 0xc0a8_0000 | (i / 250) << 8 | (i % 250 + 1);
        [u64::from(src) << 32, 0, 7]
    }

    #[test]
    fn every_key_is_found_with_its_first_hit_and_no_other() {
        for n in [1, 2, 25, 101, 1000, 5000] {
            let mut keys: Vec<(Words, Hit)> = (0..n).map(|i| (tenant(i), hit(i))).collect();
            // A later rule with the same key does not win.
            keys.push((tenant(0), hit(99_999)));
            let t = Exact::new(&keys);
            assert_eq!(t.len(), n as usize);
            assert!(t.longest_run() <= MAX_RUN, "n {n}: run {}", t.longest_run());
            for i in 0..n {
                assert_eq!(t.get(&tenant(i)).map(|h| h.pos), Some(i), "n {n}");
            }
            for i in n..n + 500 {
                assert!(t.get(&tenant(i)).is_none());
            }
            assert!(t.get(&[0, 0, 0]).is_none());
        }
    }

    #[test]
    fn keys_that_differ_in_any_word_are_told_apart() {
        let keys: Vec<(Words, Hit)> = (0..64u64)
            .map(|i| ([i, i << 7, i << 13], hit(i as u32)))
            .collect();
        let t = Exact::new(&keys);
        for (k, h) in &keys {
            assert_eq!(t.get(k).map(|x| x.pos), Some(h.pos));
            for w in 0..3 {
                let mut other = *k;
                other[w] ^= 1 << 40;
                assert!(t.get(&other).is_none(), "{other:?}");
            }
        }
    }
}
