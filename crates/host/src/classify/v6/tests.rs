//! IPv6 prefix rules against a scan of the rules in order, neighbour
//! discovery by its target, and the rules refused.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use vrhost_packet::build::{Udp6FrameSpec, neighbor_solicit_frame};
use vrhost_packet::{FlowKey, MacAddr};

use crate::classify::{Classifier, Match, Rule, RuleError};

/// A UDP/IPv6 frame, tagged with `vlan` if given.
fn udp6(mac: u8, vlan: Option<u16>, src: u128, dst: u128, dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 80];
    Udp6FrameSpec {
        dst_mac: MacAddr([2, 0, 0, 0, 0, mac]),
        src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
        src_ip: Ipv6Addr::from(src),
        dst_ip: Ipv6Addr::from(dst),
        sport: 1,
        dport,
        hop_limit: 64,
        frame_bytes: 80,
    }
    .write(&mut f)
    .unwrap();
    if let Some(v) = vlan {
        let tag = [0x81, 0x00, (v >> 8) as u8, v as u8];
        f.splice(12..12, tag);
    }
    f
}

fn key(f: &[u8]) -> FlowKey {
    FlowKey::extract(f).unwrap()
}

fn in6(p: Option<(Ipv6Addr, u8)>, a: u128) -> bool {
    p.is_none_or(|(net, len)| len == 0 || (u128::from(net) ^ a) >> (128 - u32::from(len)) == 0)
}

/// Rule `m` against an IPv6 UDP frame, field by field as `Match` says:
/// IPv4 prefixes never match it; protocol and port are the next header's
/// in a rule with an IPv6 prefix, and IPv4's (never this frame's) in one
/// without.
fn matches(
    m: &Match,
    port: usize,
    mac: u8,
    vlan: Option<u16>,
    src: u128,
    dst: u128,
    dport: u16,
) -> bool {
    let is6 = m.dst6.is_some() || m.src6.is_some();
    m.dst.is_none()
        && m.src.is_none()
        && (is6 || (m.proto.is_none() && m.udp_dport.is_none()))
        && m.in_port.is_none_or(|p| p == port)
        && in6(m.dst6, dst)
        && in6(m.src6, src)
        && m.dst_mac.is_none_or(|x| x == [2, 0, 0, 0, 0, mac])
        && m.vlan.is_none_or(|v| vlan == Some(v))
        && m.proto.is_none_or(|p| p == 17)
        && m.udp_dport.is_none_or(|d| d == dport)
}

// Small palettes, so rules overlap, share shapes and match often.
fn pal6() -> impl Strategy<Value = u128> {
    (0u128..4, 0u128..4).prop_map(|(a, h)| (0x2001_0db8u128 << 96) | a << 64 | h)
}

fn pal_prefix6() -> impl Strategy<Value = (Ipv6Addr, u8)> {
    (pal6(), prop::sample::select(vec![0u8, 32, 64, 100, 128]))
        .prop_map(|(a, l)| (Ipv6Addr::from(a), l))
}

fn arb_rule() -> impl Strategy<Value = Rule> {
    (
        (
            prop::option::weighted(0.3, 0usize..3),
            prop::option::weighted(0.6, pal_prefix6()),
            prop::option::weighted(0.4, pal_prefix6()),
            prop::option::weighted(
                0.1,
                (0u32..2).prop_map(|a| (Ipv4Addr::from(0x0a00_0000 + a), 8u8)),
            ),
        ),
        (
            prop::option::weighted(0.2, (0u8..3).prop_map(|b| [2, 0, 0, 0, 0, b])),
            prop::option::weighted(0.2, 0u16..3),
            prop::option::weighted(0.2, prop::sample::select(vec![53u16, 80])),
            0usize..20,
        ),
    )
        .prop_map(
            |((in_port, dst6, src6, dst4), (dst_mac, vlan, udp_dport, vr))| {
                // A rule of IPv4 prefixes only (never an IPv6 frame's), or of
                // IPv6 ones and link-layer fields.
                let v4 = dst4.is_some();
                Rule {
                    m: Match {
                        in_port,
                        dst: dst4,
                        dst6: dst6.filter(|_| !v4),
                        src6: src6.filter(|_| !v4),
                        dst_mac,
                        vlan,
                        udp_dport,
                        ..Match::default()
                    },
                    vr,
                    vnic: 0,
                }
            },
        )
}

proptest! {
    /// The first matching rule, as a scan of the rules in order would
    /// find it, for tagged and untagged IPv6 frames.
    #[test]
    fn first_match_as_a_linear_scan(
        rules in prop::collection::vec(arb_rule(), 0..24),
        frames in prop::collection::vec(
            ((0usize..3, 0u8..3, prop::option::of(0u16..3)), (pal6(), pal6(), prop::sample::select(vec![53u16, 80, 7]))),
            1..48,
        ),
    ) {
        let c = Classifier::new(&rules).unwrap();
        for &((port, mac, vlan), (src, dst, dport)) in &frames {
            let f = udp6(mac, vlan, src, dst, dport);
            let want = rules
                .iter()
                .find(|r| matches(&r.m, port, mac, vlan, src, dst, dport))
                .map(|r| (r.vr, r.vnic));
            prop_assert_eq!(c.classify_frame(port, &key(&f), &f), want);
        }
    }
}

const NET1: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0);
const NET2: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 0);

fn tenants6() -> Classifier {
    let rule = |m: Match, vr| Rule { m, vr, vnic: 0 };
    Classifier::new(&[
        rule(
            Match {
                dst6: Some((NET1, 64)),
                ..Match::default()
            },
            1,
        ),
        rule(
            Match {
                dst6: Some((NET2, 64)),
                ..Match::default()
            },
            2,
        ),
    ])
    .unwrap()
}

#[test]
fn neighbour_discovery_goes_to_the_tenant_of_its_target() {
    let c = tenants6();
    let host = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 7);
    let router = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 1);
    // To the solicited-node multicast address: no tenant's prefix.
    let ns = neighbor_solicit_frame(MacAddr([2, 0, 0, 0, 0, 9]), host, router);
    assert_eq!(c.classify_frame(0, &key(&ns), &ns), Some((2, 0)));
    // By its key alone (no frame), an IPv6 rule matches nothing.
    assert_eq!(c.classify(0, &key(&ns)), None);
}

#[test]
fn ipv4_frames_and_cut_frames_match_no_ipv6_rule() {
    let c = tenants6();
    let v4 = crate::testkit::udp(Ipv4Addr::new(10, 0, 0, 1), 1, Ipv4Addr::new(10, 0, 0, 2), 9);
    assert_eq!(c.classify_frame(0, &key(&v4), &v4), None);
    let f = udp6(0, None, 1, u128::from(NET1) | 5, 53);
    assert_eq!(c.classify_frame(0, &key(&f), &f), Some((1, 0)));
    // Cut inside the destination address.
    let cut = &f[..14 + 30];
    let k = FlowKey::extract_l2(cut).unwrap();
    assert_eq!(c.classify_frame(0, &k, cut), None);
}

#[test]
fn rules_that_cannot_match_are_refused() {
    let bad = |m: Match| Classifier::new(&[Rule { m, vr: 0, vnic: 0 }]).unwrap_err();
    assert_eq!(
        bad(Match {
            dst6: Some((NET1, 129)),
            ..Match::default()
        }),
        RuleError::PrefixLen { rule: 0, len: 129 }
    );
    assert_eq!(
        bad(Match {
            src: Some((Ipv4Addr::new(10, 0, 0, 0), 8)),
            dst6: Some((NET1, 64)),
            ..Match::default()
        }),
        RuleError::MixedFamilies { rule: 0 }
    );
}
