//! Big-endian (network order) integers in a byte buffer: the one place the
//! views turn header bytes into numbers and back, as smoltcp's views use
//! `NetworkEndian`. Each function takes the field's byte range from the
//! view's `mod field`, so an accessor reads as "this field, as a u16".
//!
//! All of them panic if the range is outside the buffer; the views call
//! them only on ranges their `check` has proven present.

use core::ops::Range;

/// The 16-bit big-endian integer in the first two bytes of `field`.
#[inline(always)]
pub(crate) fn read_u16(b: &[u8], field: Range<usize>) -> u16 {
    u16::from_be_bytes([b[field.start], b[field.start + 1]])
}

/// The 32-bit big-endian integer in the first four bytes of `field`.
#[inline(always)]
pub(crate) fn read_u32(b: &[u8], field: Range<usize>) -> u32 {
    let at = field.start;
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The 128-bit big-endian integer (an IPv6 address) in the first 16 bytes
/// of `field`.
#[inline(always)]
pub(crate) fn read_u128(b: &[u8], field: Range<usize>) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[field.start..field.start + 16]);
    u128::from_be_bytes(a)
}

/// Store `v` big-endian in `field`, which must be two bytes long.
#[inline(always)]
pub(crate) fn write_u16(b: &mut [u8], field: Range<usize>, v: u16) {
    b[field].copy_from_slice(&v.to_be_bytes());
}

/// Store `v` big-endian in `field`, which must be four bytes long.
#[inline(always)]
pub(crate) fn write_u32(b: &mut [u8], field: Range<usize>, v: u32) {
    b[field].copy_from_slice(&v.to_be_bytes());
}

/// Store `v` big-endian in `field`, which must be 16 bytes long.
#[inline(always)]
pub(crate) fn write_u128(b: &mut [u8], field: Range<usize>, v: u128) {
    b[field].copy_from_slice(&v.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_in_network_order() {
        let mut b = [0u8; 8];
        write_u16(&mut b, 0..2, 0x1234);
        write_u32(&mut b, 2..6, 0xa1b2_c3d4);
        assert_eq!(b, [0x12, 0x34, 0xa1, 0xb2, 0xc3, 0xd4, 0, 0]);
        assert_eq!(read_u16(&b, 0..2), 0x1234);
        assert_eq!(read_u32(&b, 2..6), 0xa1b2_c3d4);
        assert_eq!(read_u16(&b, 5..7), 0xd400);
        let mut a = [0u8; 17];
        write_u128(&mut a, 1..17, 0x2001_0db8 << 96 | 0xb);
        assert_eq!(a[..3], [0, 0x20, 0x01]);
        assert_eq!(read_u128(&a, 1..17), 0x2001_0db8 << 96 | 0xb);
    }
}
