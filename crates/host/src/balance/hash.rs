//! The flow hash the balancer is fed: of a frame ([`flow_hash`]) or of the
//! key the classifier already read ([`flow_key_hash`]). Symmetric, so both
//! directions of a flow land on one instance.

use vrhost_packet::FlowKey;
use vrhost_packet::ethernet::EtherType;

/// The flow hash of an Ethernet frame (FCS not included), for
/// [`Balancer::pick`](super::Balancer::pick).
///
/// IPv4, optionally behind one 802.1Q tag, with a valid version and IHL:
/// source and destination address, protocol, and for unfragmented TCP and
/// UDP the ports (when the frame holds them). Anything else (ARP, IPv6, a
/// broken IPv4 header): the source and destination MAC address, what there
/// is of them in a short frame. Symmetric: both directions of a flow hash
/// alike, so a stateful VR sees them on one instance. Never panics; one
/// 64x64-bit multiply.
#[inline]
pub fn flow_hash(frame: &[u8]) -> u32 {
    match ipv4_tuple(frame) {
        Some(t) => tuple_hash(t),
        None => mac_hash(frame),
    }
}

/// [`flow_hash`] of a frame from the key the classifier already read
/// ([`FlowKey::extract`], or [`FlowKey::extract_l2`] when that failed), so
/// the worker does not parse the frame twice. Equal to `flow_hash(frame)`
/// whenever `FlowKey::extract(frame)` succeeds.
#[inline]
pub fn flow_key_hash(key: &FlowKey) -> u32 {
    if key.ethertype == EtherType::IPV4 {
        tuple_hash(Tuple {
            src: key.src,
            dst: key.dst,
            protocol: key.protocol,
            sport: key.sport,
            dport: key.dport,
        })
    } else {
        let mut macs = [0u8; 12];
        macs[..6].copy_from_slice(&key.dst_mac.0);
        macs[6..].copy_from_slice(&key.src_mac.0);
        mac_hash(&macs)
    }
}

/// Byte offsets in an Ethernet frame and an IPv4 header.
mod field {
    pub const ETHERTYPE: usize = 12;
    pub const VLAN_ETHERTYPE: usize = 16;
    pub const L3: usize = 14;
    pub const VLAN_L3: usize = 18;
    pub const IP_MIN_HEADER: usize = 20;
    pub const IP_FLAGS_FRAG: usize = 6;
    pub const IP_PROTOCOL: usize = 9;
    pub const IP_SRC: usize = 12;
    pub const IP_DST: usize = 16;
}

/// The 5-tuple of an IPv4 packet; ports 0 where they do not count.
#[derive(Clone, Copy)]
struct Tuple {
    src: u32,
    dst: u32,
    protocol: u8,
    sport: u16,
    dport: u16,
}

#[inline(always)]
fn ipv4_tuple(f: &[u8]) -> Option<Tuple> {
    let be16 = |at: usize| f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let (ethertype, l3) = match be16(field::ETHERTYPE)? {
        t if t == EtherType::VLAN.0 => (be16(field::VLAN_ETHERTYPE)?, field::VLAN_L3),
        t => (t, field::L3),
    };
    if ethertype != EtherType::IPV4.0 {
        return None;
    }
    let ip = f.get(l3..)?;
    let h: &[u8; field::IP_MIN_HEADER] = ip.first_chunk()?;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if h[0] >> 4 != 4 || ihl < field::IP_MIN_HEADER {
        return None;
    }
    let word = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let protocol = h[field::IP_PROTOCOL];
    // More-fragments flag or a fragment offset: only the first fragment
    // holds the ports, so no fragment uses them.
    let fragment =
        u16::from_be_bytes([h[field::IP_FLAGS_FRAG], h[field::IP_FLAGS_FRAG + 1]]) & 0x3fff != 0;
    let ported = (protocol == 6 || protocol == 17) && !fragment;
    let ports = match ip.get(ihl..).and_then(<[u8]>::first_chunk::<4>) {
        Some(p) if ported => (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        ),
        _ => (0, 0),
    };
    Some(Tuple {
        src: word(field::IP_SRC),
        dst: word(field::IP_DST),
        protocol,
        sport: ports.0,
        dport: ports.1,
    })
}

#[inline(always)]
fn tuple_hash(t: Tuple) -> u32 {
    let a = u64::from(t.src) << 16 | u64::from(t.sport);
    let b = u64::from(t.dst) << 16 | u64::from(t.dport);
    mix(a.min(b), a.max(b), u64::from(t.protocol))
}

/// Hash of the MAC addresses in the first 12 bytes (zeros past the end).
#[inline(always)]
fn mac_hash(f: &[u8]) -> u32 {
    let mut m = [0u8; 12];
    let n = f.len().min(12);
    m[..n].copy_from_slice(&f[..n]);
    let dst = u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]);
    let src = u64::from_be_bytes([0, 0, m[6], m[7], m[8], m[9], m[10], m[11]]);
    // Outside the protocol range, so MACs and an IPv4 tuple do not mix.
    const MAC_TAG: u64 = 0x100;
    mix(dst.min(src), dst.max(src), MAC_TAG)
}

/// `a * b` to 128 bits, halves folded by xor (wyhash, foldhash): every
/// output bit depends on every input bit of both.
#[inline(always)]
pub(super) fn folded_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Mix two 48-bit words and a tag (< 2^9) into 32 bits with one folded
/// multiply (a second, as a finisher, made no difference the tests below
/// could see: avalanche, spread of sequential flows). The constants (digits
/// of pi) have a non-zero top byte, which neither the words nor the tag
/// reach, so neither factor can be zero.
#[inline(always)]
fn mix(lo: u64, hi: u64, tag: u64) -> u32 {
    let h = folded_mul(
        lo ^ 0x243F_6A88_85A3_08D3,
        hi ^ tag << 48 ^ 0x1319_8A2E_0370_7344,
    );
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::balance::{FLOW_BUCKETS, bucket};
    use proptest::prelude::*;

    pub(crate) const A: [u8; 4] = [10, 1, 0, 1];
    pub(crate) const B: [u8; 4] = [10, 2, 0, 7];

    /// An Ethernet/IPv4 frame with a 20-byte L4 header (ports first),
    /// padded to the Ethernet minimum.
    pub(crate) fn ipv4(
        vlan: Option<u16>,
        proto: u8,
        src: [u8; 4],
        dst: [u8; 4],
        ports: (u16, u16),
    ) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 9];
        if let Some(v) = vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 40, 0, 1, 0, 0, 64, proto, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        f.extend_from_slice(&ports.0.to_be_bytes());
        f.extend_from_slice(&ports.1.to_be_bytes());
        f.resize(f.len() + 16, 0);
        f.resize(f.len().max(60), 0);
        f
    }

    pub(crate) fn udp(sport: u16, dport: u16) -> Vec<u8> {
        crate::testkit::udp(A.into(), sport, B.into(), dport)
    }

    /// IP header offset of an untagged frame.
    const IP: usize = 14;

    #[test]
    fn flow_hash_reads_the_five_tuple() {
        let base = flow_hash(&udp(1000, 53));
        assert_ne!(flow_hash(&udp(1001, 53)), base, "source port");
        assert_ne!(flow_hash(&udp(1000, 54)), base, "destination port");
        assert_ne!(
            flow_hash(&ipv4(None, 6, A, B, (1000, 53))),
            base,
            "protocol"
        );
        assert_ne!(
            flow_hash(&ipv4(None, 17, A, [10, 2, 0, 8], (1000, 53))),
            base,
            "address"
        );
        // Both directions alike; the tag and the MACs do not count.
        assert_eq!(flow_hash(&ipv4(None, 17, B, A, (53, 1000))), base);
        assert_eq!(flow_hash(&ipv4(Some(42), 17, A, B, (1000, 53))), base);
        let mut f = udp(1000, 53);
        f[0] = 0x0e;
        assert_eq!(flow_hash(&f), base);
        // Not the ports of a fragment, nor of a protocol without ports.
        for (at, v) in [(IP + 6, 0x20), (IP + 7, 0x10)] {
            let mut x = udp(1000, 53);
            let mut y = udp(2000, 80);
            x[at] = v;
            y[at] = v;
            assert_eq!(flow_hash(&x), flow_hash(&y), "fragment");
            assert_ne!(flow_hash(&x), base);
        }
        let icmp = |p| flow_hash(&ipv4(None, 1, A, B, p));
        assert_eq!(icmp((1000, 53)), icmp((2000, 80)));
        // Options: the ports come after them.
        let mut o = udp(1000, 53);
        o[IP] = 0x46;
        o.splice(IP + 20..IP + 20, [0, 0, 0, 0]);
        assert_eq!(flow_hash(&o), base);
    }

    #[test]
    fn flow_hash_falls_back_to_macs() {
        let arp = |dst: u8, src: u8| {
            let mut f = vec![2, 0, 0, 0, 0, dst, 2, 0, 0, 0, 0, src, 0x08, 0x06];
            f.resize(60, 0);
            f
        };
        assert_ne!(flow_hash(&arp(1, 9)), flow_hash(&arp(1, 8)));
        assert_ne!(flow_hash(&arp(1, 9)), flow_hash(&arp(2, 9)));
        assert_eq!(flow_hash(&arp(1, 9)), flow_hash(&arp(9, 1)));
        // A broken IPv4 header hashes as a non-IP frame: by MAC.
        for (at, v) in [(IP, 0x44), (IP, 0x65)] {
            let mut f = udp(1000, 53);
            f[at] = v;
            assert_eq!(flow_hash(&f), mac_hash(&f), "first byte {v:#x}");
        }
        // Short frames hash what is there.
        let f = udp(1000, 53);
        for n in 0..f.len() {
            flow_hash(&f[..n]);
        }
        assert_ne!(flow_hash(&f[..5]), flow_hash(&f[..6]));
        assert_eq!(
            flow_hash(&f[..IP + 20]),
            flow_hash(&ipv4(None, 17, A, B, (0, 0))[..IP + 20])
        );
    }

    #[test]
    fn flow_hash_avalanches() {
        // Flipping any one bit of the tuple flips about half the output
        // bits, and each output bit about half the time.
        const TRIALS: u32 = 2000;
        let mut by_input = [0u32; 104];
        let mut by_output = [0u32; 32];
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..TRIALS {
            x = folded_mul(x ^ 0x5555, 0x9E37_79B9_7F4A_7C15);
            let t = Tuple {
                src: x as u32,
                dst: (x >> 32) as u32,
                protocol: (x >> 11) as u8,
                sport: (x >> 7) as u16,
                dport: (x >> 23) as u16,
            };
            let h = tuple_hash(t);
            for (bit, count) in by_input.iter_mut().enumerate() {
                let mut u = t;
                match bit {
                    0..32 => u.src ^= 1 << bit,
                    32..64 => u.dst ^= 1 << (bit - 32),
                    64..80 => u.sport ^= 1 << (bit - 64),
                    80..96 => u.dport ^= 1 << (bit - 80),
                    _ => u.protocol ^= 1 << (bit - 96),
                }
                let d = h ^ tuple_hash(u);
                *count += d.count_ones();
                for (o, f) in by_output.iter_mut().enumerate() {
                    *f += d >> o & 1;
                }
            }
        }
        for (bit, &c) in by_input.iter().enumerate() {
            let mean = f64::from(c) / f64::from(TRIALS);
            assert!(
                (15.5..16.5).contains(&mean),
                "input bit {bit} flips {mean} bits"
            );
        }
        for (o, &f) in by_output.iter().enumerate() {
            let p = f64::from(f) / f64::from(TRIALS * 104);
            assert!((0.47..0.53).contains(&p), "output bit {o} flips with p {p}");
        }
    }

    #[test]
    fn flow_hash_spreads_sequential_flows() {
        // 64 Ki flows differing in one counted field fill the 1024
        // buckets about evenly (64 each; 4.5 sigma either way allowed).
        let patterns: [fn(u32) -> Vec<u8>; 4] = [
            |k| udp(k as u16, 53),
            |k| ipv4(None, 6, A, B, (40_000, k as u16)),
            |k| ipv4(None, 17, A, (0x0a00_0000 + k).to_be_bytes(), (5000, 5000)),
            |k| ipv4(None, 1, (0xc0a8_0000 + k).to_be_bytes(), B, (0, 0)),
        ];
        for (i, frame) in patterns.iter().enumerate() {
            let mut per_bucket = [0u32; FLOW_BUCKETS];
            for k in 0..65_536 {
                per_bucket[bucket(flow_hash(&frame(k)))] += 1;
            }
            let (lo, hi) = (per_bucket.iter().min(), per_bucket.iter().max());
            assert!(
                *lo.unwrap() >= 28 && *hi.unwrap() <= 100,
                "pattern {i}: {lo:?}..{hi:?}"
            );
        }
    }

    #[test]
    fn flow_key_hash_matches_flow_hash() {
        let frames = [
            udp(1000, 53),
            ipv4(Some(7), 6, B, A, (443, 40_000)),
            ipv4(None, 1, A, B, (0, 0)),
            vec![
                2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0x86, 0xdd, 0x60, 0, 0, 0,
            ],
        ];
        for f in frames {
            let key = FlowKey::extract(&f).unwrap();
            assert_eq!(flow_key_hash(&key), flow_hash(&f));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn flow_hash_never_panics(frame in proptest::collection::vec(any::<u8>(), 0..120)) {
            flow_hash(&frame);
        }

        #[test]
        fn flow_key_hash_agrees_on_parsed_frames(
            vlan in proptest::option::of(0u16..4096),
            proto in prop_oneof![Just(6u8), Just(17u8), any::<u8>()],
            src in any::<[u8; 4]>(),
            dst in any::<[u8; 4]>(),
            ports in any::<(u16, u16)>(),
            pokes in proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
            cut in 0usize..80,
        ) {
            let mut f = ipv4(vlan, proto, src, dst, ports);
            for (at, v) in pokes {
                if let Some(x) = f.get_mut(at) {
                    *x = v;
                }
            }
            f.truncate(f.len() - cut.min(f.len()));
            let h = flow_hash(&f);
            if let Ok(key) = FlowKey::extract(&f) {
                prop_assert_eq!(flow_key_hash(&key), h);
            }
        }
    }
}
