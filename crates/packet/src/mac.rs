//! Ethernet MAC addresses.

use core::fmt;
use core::str::FromStr;

/// A 48-bit Ethernet MAC address, in wire order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// `00:00:00:00:00:00`.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// The address from the first six bytes of `b`.
    ///
    /// # Panics
    /// If `b` is shorter than 6 bytes.
    #[inline]
    pub fn from_bytes(b: &[u8]) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&b[..6]);
        MacAddr(a)
    }

    /// The six bytes in wire order.
    #[inline]
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// All ones: the broadcast address.
    #[inline]
    pub fn is_broadcast(&self) -> bool {
        self.0 == [0xff; 6]
    }

    /// The I/G bit (least significant bit of the first byte) is set: a group
    /// address. Broadcast is a multicast address too (IEEE 802-2014 8.2).
    #[inline]
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Neither multicast nor broadcast.
    #[inline]
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The U/L bit is set: a locally administered address (like the `02:..`
    /// addresses vrhost gives its vNICs).
    #[inline]
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// A string is not a MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid MAC address: expected six two-digit hex bytes separated by ':' or '-', like 02:00:00:00:00:01"
)]
pub struct MacParseError;

impl FromStr for MacAddr {
    type Err = MacParseError;

    /// Parses `02:00:00:00:00:01` (or with `-` separators, either case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.as_bytes();
        if s.len() != 17 {
            return Err(MacParseError);
        }
        let sep = s[2];
        if sep != b':' && sep != b'-' {
            return Err(MacParseError);
        }
        let mut out = [0u8; 6];
        for (i, byte) in out.iter_mut().enumerate() {
            let at = i * 3;
            if i < 5 && s[at + 2] != sep {
                return Err(MacParseError);
            }
            let hi = hex(s[at]).ok_or(MacParseError)?;
            let lo = hex(s[at + 1]).ok_or(MacParseError)?;
            *byte = hi << 4 | lo;
        }
        Ok(MacAddr(out))
    }
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse() {
        let m: MacAddr = "02:00:00:00:00:01".parse().unwrap();
        assert_eq!(m, MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(m.to_string(), "02:00:00:00:00:01");
        let m: MacAddr = "AA-bb-CC-dd-EE-0f".parse().unwrap();
        assert_eq!(m.to_string(), "aa:bb:cc:dd:ee:0f");
    }

    #[test]
    fn parse_rejects() {
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:",
            "02:00:00:00:00:0g",
            "02:00-00:00:00:01",
            "2:0:0:0:0:1",
            "02.00.00.00.00.01",
            "02:00:00:00:00:\u{e9}",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn classes() {
        assert!(MacAddr::BROADCAST.is_broadcast());
        assert!(MacAddr::BROADCAST.is_multicast());
        let mc: MacAddr = "01:00:5e:00:00:01".parse().unwrap();
        assert!(mc.is_multicast() && !mc.is_broadcast() && !mc.is_unicast());
        let uc = MacAddr([2, 0, 0, 0, 0, 1]);
        assert!(uc.is_unicast() && uc.is_local() && !uc.is_multicast());
    }

    proptest::proptest! {
        #[test]
        fn roundtrip(b: [u8; 6]) {
            let m = MacAddr(b);
            proptest::prop_assert_eq!(m.to_string().parse::<MacAddr>().unwrap(), m);
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,20}") {
            let _ = s.parse::<MacAddr>();
        }
    }
}
