//! The classifier against a reference: fuzzer-chosen rules compiled by
//! `Classifier::new`, fuzzer-chosen frames keyed as the worker keys them
//! (`FlowKey::extract`, else `FlowKey::extract_l2`), and the answer compared
//! with a linear first match over the rules as written, each field
//! evaluated directly on the key as `Match` documents it.
//!
//! Also checked: `Classifier::new` refuses exactly the rules with a prefix
//! length above 32 or a VLAN id above 4095, naming the first; the key of a
//! frame built from fields carries those fields; no input panics.
//!
//! Input: rules and frames drawn with `arbitrary::Unstructured`. Addresses,
//! MACs and VLAN ids mostly come from small palettes shared by rules and
//! frames so that rules match often; frames are built from fields (IPv4,
//! ARP, another EtherType, VLAN-tagged or not, options, fragments,
//! truncation) or taken raw.
#![no_main]

use std::net::Ipv4Addr;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use vrhost_host::classify::RuleError;
use vrhost_host::{Classifier, Match, Rule};
use vrhost_packet::FlowKey;
use vrhost_packet::ethernet::EtherType;

/// Ingress ports the frames come from and rules name.
const PORTS: u8 = 4;


/// 10.(b >> 4).(b & 15).7: addresses of 16 /16s and 256 /24s.
fn palette_addr(b: u8) -> u32 {
    0x0a00_0007 | u32::from(b >> 4) << 16 | u32::from(b & 15) << 8
}

fn addr(u: &mut Unstructured<'_>) -> Result<u32> {
    Ok(if u.ratio(1, 8)? {
        u.arbitrary()?
    } else {
        palette_addr(u.arbitrary()?)
    })
}

fn mac(u: &mut Unstructured<'_>) -> Result<[u8; 6]> {
    Ok(match u.int_in_range(0..=7u8)? {
        0 => [0xff; 6],
        1 => u.arbitrary()?,
        b => [2, 0, 0, 0, 0, b],
    })
}

fn vlan_id(u: &mut Unstructured<'_>) -> Result<u16> {
    Ok(if u.ratio(1, 8)? {
        u.int_in_range(0..=4095)?
    } else {
        u.int_in_range(0..=3)?
    })
}

fn proto(u: &mut Unstructured<'_>) -> Result<u8> {
    Ok(match u.int_in_range(0..=4u8)? {
        0 => 6,
        1 => 1,
        2 => u.arbitrary()?,
        _ => 17,
    })
}

fn port_num(u: &mut Unstructured<'_>) -> Result<u16> {
    Ok(match u.int_in_range(0..=4u8)? {
        0 => 0,
        1 => u.arbitrary()?,
        2 => 80,
        _ => 53,
    })
}

fn opt<T>(
    u: &mut Unstructured<'_>,
    f: impl FnOnce(&mut Unstructured<'_>) -> Result<T>,
) -> Result<Option<T>> {
    if u.arbitrary()? {
        Ok(Some(f(u)?))
    } else {
        Ok(None)
    }
}

fn prefix(u: &mut Unstructured<'_>) -> Result<(Ipv4Addr, u8)> {
    let a = Ipv4Addr::from(addr(u)?);
    let len = if u.ratio(1, 64)? {
        u.int_in_range(33..=255)? // refused by Classifier::new
    } else {
        match u.int_in_range(0..=5u8)? {
            0 => u.int_in_range(0..=32)?,
            1 => 0,
            2 => 8,
            3 => 24,
            4 => 32,
            _ => 16,
        }
    };
    Ok((a, len))
}

fn rule(u: &mut Unstructured<'_>) -> Result<Rule> {
    let m = Match {
        in_port: opt(u, |u| Ok(usize::from(u.int_in_range(0..=PORTS - 1)?)))?,
        dst: opt(u, prefix)?,
        src: opt(u, prefix)?,
        dst_mac: opt(u, mac)?,
        vlan: opt(u, |u| {
            if u.ratio(1, 64)? {
                u.int_in_range(4096..=u16::MAX) // refused by Classifier::new
            } else {
                vlan_id(u)
            }
        })?,
        proto: opt(u, proto)?,
        udp_dport: opt(u, port_num)?,
        // IPv6 prefix rules: the proptest of `classify::v6` in the crate.
        dst6: None,
        src6: None,
    };
    Ok(Rule {
        m,
        vr: u.int_in_range(0..=7)?,
        vnic: u.int_in_range(0..=3)?,
    })
}

/// What a frame built from fields should give as its key (None: the
/// frame is broken or cut, no expectation).
struct Expect {
    vlan: Option<u16>,
    ethertype: u16,
    src: u32,
    dst: u32,
    protocol: u8,
    dport: u16,
}

/// A frame: built from fields, or raw bytes.
fn frame(u: &mut Unstructured<'_>) -> Result<(Vec<u8>, Option<Expect>)> {
    if u.ratio(1, 5)? {
        let n = u.int_in_range(0..=80)?;
        return Ok((u.bytes(n)?.to_vec(), None));
    }
    let mut f = Vec::with_capacity(96);
    f.extend_from_slice(&mac(u)?);
    f.extend_from_slice(&mac(u)?);
    let vlan = if u.ratio(1, 3)? {
        let tci: u16 = u.arbitrary()?;
        let id = vlan_id(u)?;
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&((tci & 0xf000) | id).to_be_bytes());
        Some(id)
    } else {
        None
    };
    let kind = u.int_in_range(0..=5u8)?;
    let mut exp = Expect {
        vlan,
        ethertype: 0,
        src: 0,
        dst: 0,
        protocol: 0,
        dport: 0,
    };
    let mut well_formed = true;
    match kind {
        // ARP (Ethernet/IPv4; sometimes other address lengths).
        0 | 1 => {
            exp.ethertype = 0x0806;
            f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0]);
            if u.ratio(1, 8)? {
                let (h, p): (u8, u8) = u.arbitrary()?;
                well_formed &= h == 6 && p == 4;
                f.extend_from_slice(&[h, p]);
            } else {
                f.extend_from_slice(&[6, 4]);
            }
            let op: u16 = if u.ratio(1, 8)? {
                u.arbitrary()?
            } else {
                u.int_in_range(1..=2)?
            };
            f.extend_from_slice(&op.to_be_bytes());
            exp.src = addr(u)?;
            exp.dst = addr(u)?;
            f.extend_from_slice(&mac(u)?);
            f.extend_from_slice(&exp.src.to_be_bytes());
            f.extend_from_slice(&mac(u)?);
            f.extend_from_slice(&exp.dst.to_be_bytes());
        }
        // Another EtherType (IPv6, or anything), some payload.
        2 => {
            let et: u16 = if u.arbitrary()? {
                0x86dd
            } else {
                u.arbitrary()?
            };
            // A second VLAN tag, ARP and IPv4 are the other cases.
            well_formed &= et != 0x8100 && et != 0x0806 && et != 0x0800;
            exp.ethertype = et;
            f.extend_from_slice(&et.to_be_bytes());
            let n = u.int_in_range(0..=40)?;
            f.extend_from_slice(u.bytes(n)?);
        }
        // IPv4.
        _ => {
            exp.ethertype = 0x0800;
            f.extend_from_slice(&[0x08, 0x00]);
            let opt_words = if u.ratio(1, 6)? {
                u.int_in_range(1..=10)?
            } else {
                0
            };
            let ihl = 5 + opt_words;
            exp.protocol = proto(u)?;
            exp.src = addr(u)?;
            exp.dst = addr(u)?;
            let sport = port_num(u)?;
            let dport = port_num(u)?;
            let frag: u16 = match u.int_in_range(0..=7u8)? {
                0 => 0x2000,         // MF: first fragment
                1 => 0x0010,         // a later fragment
                2 => u.arbitrary()?, // any flags and offset
                3 | 4 => 0x4000,     // DF
                _ => 0,
            };
            let is_frag = frag & 0x3fff != 0;
            let l4 = if exp.protocol == 17 || exp.protocol == 6 {
                u.int_in_range(4..=20)?
            } else {
                u.int_in_range(0..=12)?
            };
            let total = (usize::from(ihl) * 4 + l4) as u16;
            let ip_at = f.len();
            f.extend_from_slice(&[0x40 | ihl, 0]);
            f.extend_from_slice(&total.to_be_bytes());
            f.extend_from_slice(&[0, 0]);
            f.extend_from_slice(&frag.to_be_bytes());
            f.extend_from_slice(&[u.arbitrary()?, exp.protocol, 0, 0]);
            f.extend_from_slice(&exp.src.to_be_bytes());
            f.extend_from_slice(&exp.dst.to_be_bytes());
            f.extend(std::iter::repeat_n(1u8, usize::from(opt_words) * 4));
            let mut l4b = vec![0u8; l4];
            if l4 >= 4 {
                l4b[..2].copy_from_slice(&sport.to_be_bytes());
                l4b[2..4].copy_from_slice(&dport.to_be_bytes());
            }
            f.extend_from_slice(&l4b);
            if (exp.protocol == 17 || exp.protocol == 6) && !is_frag {
                exp.dport = dport;
            }
            // Padding after the IP packet, as short frames have.
            let pad = u.int_in_range(0..=8)?;
            f.extend(std::iter::repeat_n(0u8, pad));
            // Sometimes a broken header: version, IHL or total length.
            match u.int_in_range(0..=15u8)? {
                0 => {
                    f[ip_at] = u.arbitrary()?;
                    well_formed = false;
                }
                1 => {
                    let t: u16 = u.arbitrary()?;
                    f[ip_at + 2..ip_at + 4].copy_from_slice(&t.to_be_bytes());
                    well_formed = false;
                }
                _ => {}
            }
        }
    }
    // Sometimes cut short.
    if u.ratio(1, 6)? {
        let n = u.int_in_range(0..=f.len())?;
        if n < f.len() {
            f.truncate(n);
            well_formed = false;
        }
    }
    Ok((f, well_formed.then_some(exp)))
}

fn in_prefix(p: Option<(Ipv4Addr, u8)>, a: u32) -> bool {
    match p {
        None => true,
        Some((_, 0)) => true,
        Some((net, len)) => (u32::from(net) ^ a) >> (32 - u32::from(len)) == 0,
    }
}

/// Whether rule `m` matches a frame from `port` with key `k`, field by
/// field as `Match` documents: prefixes need IPv4 or ARP, protocol and
/// UDP port need IPv4.
fn reference_match(m: &Match, port: usize, k: &FlowKey) -> bool {
    let is_ip = k.ethertype == EtherType::IPV4;
    let has_addr = is_ip || k.ethertype == EtherType::ARP;
    let udp_dport_ok = match (m.udp_dport, m.proto) {
        (None, _) => true,
        (Some(d), _) => is_ip && k.protocol == 17 && k.dport == d,
    };
    m.in_port.is_none_or(|p| p == port)
        && (m.dst.is_none() || (has_addr && in_prefix(m.dst, k.dst)))
        && (m.src.is_none() || (has_addr && in_prefix(m.src, k.src)))
        && m.dst_mac.is_none_or(|mac| mac == k.dst_mac.0)
        && m.vlan.is_none_or(|v| k.vlan == Some(v))
        && m.proto.is_none_or(|p| is_ip && k.protocol == p)
        && udp_dport_ok
}

fn reference(rules: &[Rule], port: usize, k: &FlowKey) -> Option<(usize, u16)> {
    rules
        .iter()
        .find(|r| reference_match(&r.m, port, k))
        .map(|r| (r.vr, r.vnic))
}

/// The error `Classifier::new` must give: the first rule with a prefix
/// length above 32 (destination first), a VLAN id above 4095, or a UDP
/// port with a protocol other than UDP (which could never match).
fn expected_error(rules: &[Rule]) -> Option<RuleError> {
    rules.iter().enumerate().find_map(|(rule, r)| {
        for p in [r.m.dst, r.m.src].into_iter().flatten() {
            if p.1 > 32 {
                return Some(RuleError::PrefixLen { rule, len: p.1 });
            }
        }
        if let Some(vlan) = r.m.vlan.filter(|&v| v > 4095) {
            return Some(RuleError::Vlan { rule, vlan });
        }
        match (r.m.udp_dport, r.m.proto) {
            (Some(_), Some(proto)) if proto != 17 => Some(RuleError::PortNotUdp { rule, proto }),
            _ => None,
        }
    })
}

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let n_rules = u.int_in_range(0..=12)?;
    let mut rules = Vec::with_capacity(n_rules);
    for _ in 0..n_rules {
        rules.push(rule(u)?);
    }
    let c = match (Classifier::new(&rules), expected_error(&rules)) {
        (Ok(c), None) => c,
        (Err(e), Some(want)) => {
            assert_eq!(e, want);
            return Ok(());
        }
        (got, want) => panic!("Classifier::new: {:?}, expected error {want:?}", got.err()),
    };
    assert_eq!(c.len(), rules.len());
    assert_eq!(c.is_empty(), rules.is_empty());
    while !u.is_empty() {
        let port = usize::from(u.int_in_range(0..=PORTS - 1)?);
        let (f, exp) = frame(u)?;
        // As `Worker::rx_burst_to_vrs` keys a frame.
        let Some(key) = FlowKey::extract(&f)
            .ok()
            .or_else(|| FlowKey::extract_l2(&f))
        else {
            let vlan = f.len() >= 14 && f[12..14] == [0x81, 0x00];
            assert!(
                f.len() < 14 || (vlan && f.len() < 18),
                "no key for {f:02x?}"
            );
            continue;
        };
        if let Some(e) = exp {
            let want = (e.vlan, e.ethertype, e.src, e.dst, e.protocol, e.dport);
            let got = (
                key.vlan,
                key.ethertype.0,
                key.src,
                key.dst,
                key.protocol,
                key.dport,
            );
            assert_eq!(got, want, "key of {f:02x?}");
        }
        assert_eq!(
            c.classify(port, &key),
            reference(&rules, port, &key),
            "port {port}, key {key:?}, rules {rules:#?}"
        );
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
