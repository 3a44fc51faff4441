//! The internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! The checksum is the ones' complement of the ones' complement sum of the
//! data taken as big-endian 16-bit words. RFC 1071 (section 2, "parallel
//! summation") notes that the sum may be computed on wider words and folded
//! afterwards; [`sum`] adds big-endian 64-bit words with end-around carry, so
//! a 20-byte IPv4 header costs two 64-bit adds and one 32-bit add.
//!
//! Sums are carried as `u64` "accumulators" that may be combined with
//! [`add`] before a final [`fold`]; this is how the UDP pseudo-header is
//! added to the datagram's own sum.

/// Ones' complement addition of two 64-bit accumulators (end-around carry).
#[inline(always)]
pub const fn add(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + carry as u64
}

/// The ones' complement sum of `data` as an unfolded accumulator.
///
/// `data` is read as big-endian 16-bit words; an odd final byte is padded
/// with a zero byte on the right (RFC 1071 section 4.1). Only an
/// accumulator of an even-length prefix may be combined with the sum of what
/// follows it.
#[inline]
pub fn sum(data: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc = add(acc, w);
    }
    let mut rest = chunks.remainder();
    if rest.len() >= 4 {
        acc = add(
            acc,
            u64::from(u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]])),
        );
        rest = &rest[4..];
    }
    if rest.len() >= 2 {
        acc = add(acc, u64::from(u16::from_be_bytes([rest[0], rest[1]])));
        rest = &rest[2..];
    }
    if let Some(&b) = rest.first() {
        acc = add(acc, u64::from(b) << 8);
    }
    acc
}

/// Fold an accumulator to a 16-bit ones' complement sum (not complemented).
///
/// The result is `0x0000` only when every word summed was zero: end-around
/// carry addition never turns a non-zero sum into +0.
#[inline(always)]
pub const fn fold(acc: u64) -> u16 {
    // 64 -> 33 bits -> 32 bits, then 32 -> 17 -> 16; each step adds the
    // high half to the low half, so carries are wrapped around, not lost.
    let a = (acc & 0xffff_ffff) + (acc >> 32);
    let a = (a & 0xffff_ffff) + (a >> 32);
    let a = (a & 0xffff) + (a >> 16);
    let a = (a & 0xffff) + (a >> 16);
    let a = (a & 0xffff) + (a >> 16);
    a as u16
}

/// The internet checksum of `data`: `!fold(sum(data))`.
///
/// Computing it over a header whose checksum field holds a correct checksum
/// gives 0.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data))
}

/// The accumulator of the IPv4 pseudo-header (RFC 768, RFC 793): source,
/// destination, zero byte, protocol, transport length.
#[inline]
pub const fn pseudo_header_v4(src: u32, dst: u32, protocol: u8, length: u16) -> u64 {
    (src as u64) + (dst as u64) + (protocol as u64) + (length as u64)
}

/// The accumulator of the IPv6 pseudo-header (RFC 8200 8.1): source,
/// destination, upper-layer packet length (32 bits), three zero bytes,
/// next header. Ten 32-bit words added into a `u64` cannot overflow it.
#[inline]
pub const fn pseudo_header_v6(src: u128, dst: u128, next_header: u8, length: u32) -> u64 {
    const fn words(a: u128) -> u64 {
        (a as u32 as u64)
            + ((a >> 32) as u32 as u64)
            + ((a >> 64) as u32 as u64)
            + ((a >> 96) as u64)
    }
    words(src) + words(dst) + (length as u64) + (next_header as u64)
}

/// Incrementally update checksum `old_csum` after one 16-bit word of the
/// covered data changed from `old_word` to `new_word`.
///
/// Uses RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`, in ones' complement
/// arithmetic. Eqn. 2 of RFC 1071 (`HC' = HC - ~m - m'`) can yield `0xFFFF`
/// (-0) where a full recomputation yields `0x0000`; eqn. 3 cannot, because an
/// end-around-carry sum is never +0 unless all its terms are. So for a
/// checksum that was computed in full, the result equals a full
/// recomputation over the changed data.
#[inline(always)]
pub const fn update16(old_csum: u16, old_word: u16, new_word: u16) -> u16 {
    let s = (!old_csum) as u32 + (!old_word) as u32 + new_word as u32;
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    !(s as u16)
}

/// [`update16`] for a 32-bit field (an IPv4 address), as two 16-bit words.
#[inline(always)]
pub const fn update32(old_csum: u16, old: u32, new: u32) -> u16 {
    let s = (!old_csum) as u32
        + (!(old >> 16) & 0xffff)
        + (!old & 0xffff)
        + (new >> 16)
        + (new & 0xffff);
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The obvious 16-bit-at-a-time sum, the reference for the fast one.
    fn naive(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from(c[0]) << 8
            };
            s += u32::from(w);
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn known_ipv4_header() {
        // A real IPv4 header (Wikipedia's worked example): checksum b861.
        let h = crate::testdata::IPV4_HEADER;
        assert_eq!(checksum(&h), 0);
        let mut z = h;
        z[10] = 0;
        z[11] = 0;
        assert_eq!(checksum(&z), 0xb861);
    }

    #[test]
    fn rfc1624_example() {
        // RFC 1624 section 4: m = 0x5555 -> m' = 0x3285, other octets sum
        // to 0xCD7A, HC = 0xDD2F. Eqn. 3 gives 0x0000 (eqn. 2 gave -0).
        let hc = !fold(add(0xCD7A, 0x5555));
        assert_eq!(hc, 0xDD2F);
        assert_eq!(update16(hc, 0x5555, 0x3285), 0x0000);
        assert_eq!(update16(hc, 0x5555, 0x3285), !fold(add(0xCD7A, 0x3285)));
    }

    #[test]
    fn update_corner_cases() {
        // No change leaves a full-computed checksum alone, incl. 0x0000.
        assert_eq!(update16(0x0000, 0x1234, 0x1234), 0x0000);
        assert_eq!(update16(0xabcd, 0xffff, 0xffff), 0xabcd);
        // A word going 0xffff <-> 0x0000 is the same value in ones'
        // complement: the checksum must not move.
        assert_eq!(update16(0x1234, 0xffff, 0x0000), 0x1234);
        assert_eq!(update16(0x1234, 0x0000, 0xffff), 0x1234);
    }

    proptest! {
        #[test]
        fn fast_sum_matches_naive(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(fold(sum(&data)), naive(&data));
        }

        #[test]
        fn split_sums_combine(data in proptest::collection::vec(any::<u8>(), 0..200), cut in 0usize..100) {
            let cut = (cut * 2).min(data.len() & !1);
            let (a, b) = data.split_at(cut);
            prop_assert_eq!(fold(add(sum(a), sum(b))), naive(&data));
        }

        #[test]
        fn update16_matches_recompute(mut data in proptest::collection::vec(any::<u8>(), 2..64), at in 0usize..32, new: u16) {
            let at = (at * 2) % (data.len() & !1);
            let old_csum = checksum(&data);
            let old = u16::from_be_bytes([data[at], data[at + 1]]);
            data[at..at + 2].copy_from_slice(&new.to_be_bytes());
            let full = checksum(&data);
            let inc = update16(old_csum, old, new);
            // Equal except when the data became all zeros (full = 0xffff,
            // which no real header is).
            if data.iter().any(|&b| b != 0) {
                prop_assert_eq!(inc, full);
            }
        }

        #[test]
        fn update32_is_two_update16(c: u16, old: u32, new: u32) {
            let two = update16(update16(c, (old >> 16) as u16, (new >> 16) as u16), old as u16, new as u16);
            // Equal as ones' complement numbers (0x0000 and 0xffff are both zero).
            let norm = |x: u16| if x == 0xffff { 0 } else { x };
            prop_assert_eq!(norm(update32(c, old, new)), norm(two));
        }
    }
}
