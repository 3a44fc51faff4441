//! The classifier: which VR and vNIC a received frame belongs to.
//!
//! An ordered list of rules; the first whose every given field matches wins
//! (as Europa's "classify" element and PdP's dispatcher). A rule matches on
//! any of: the port the frame came in on, destination or source IPv4
//! prefix, destination MAC, VLAN id, IP protocol, UDP destination port.
//! Prefix rules match IPv4 packets and ARP packets (by target and sender
//! protocol address), so a tenant's ARP reaches the VR that routes its
//! prefix; protocol and port rules match IPv4 only. Rules
//! are compiled into masks so a match is a few compares; with the handful of
//! rules a host has per port, a linear scan beats any index.

use std::net::Ipv4Addr;

use vrhost_packet::FlowKey;
use vrhost_packet::ethernet::EtherType;

const IPPROTO_UDP: u8 = 17;

/// What a rule matches. Unset fields match anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Match {
    /// Ingress port index.
    pub in_port: Option<usize>,
    /// Destination IPv4 prefix (ARP: of the target protocol address).
    pub dst: Option<(Ipv4Addr, u8)>,
    /// Source IPv4 prefix (ARP: of the sender protocol address).
    pub src: Option<(Ipv4Addr, u8)>,
    /// Destination MAC.
    pub dst_mac: Option<[u8; 6]>,
    /// VLAN id (802.1Q).
    pub vlan: Option<u16>,
    /// IP protocol number.
    pub proto: Option<u8>,
    /// UDP destination port.
    pub udp_dport: Option<u16>,
}

/// A rule: a match and where matching frames go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The match.
    pub m: Match,
    /// VR index.
    pub vr: usize,
    /// vNIC of that VR.
    pub vnic: u16,
}

/// A rule that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// A UDP port with a protocol other than UDP (17): it could never
    /// match.
    #[error("rule {rule}: udp_dport matches UDP only, but proto is {proto}")]
    PortNotUdp {
        /// Rule position.
        rule: usize,
        /// The protocol given.
        proto: u8,
    },
    /// Prefix length above 32.
    #[error("rule {rule}: prefix length {len} > 32")]
    PrefixLen {
        /// Rule position.
        rule: usize,
        /// The length.
        len: u8,
    },
    /// VLAN id above 4095.
    #[error("rule {rule}: VLAN id {vlan} > 4095")]
    Vlan {
        /// Rule position.
        rule: usize,
        /// The id.
        vlan: u16,
    },
}

#[derive(Debug, Clone, Copy)]
struct Compiled {
    in_port: usize, // usize::MAX = any
    dst_mask: u32,
    dst_val: u32,
    src_mask: u32,
    src_val: u32,
    mac: Option<[u8; 6]>,
    vlan: Option<u16>,
    proto: Option<u8>,
    dport: Option<u16>,
    /// Whether the rule looks at addresses (then frames that are neither
    /// IPv4 nor ARP miss).
    needs_addr: bool,
    /// Whether the rule looks at the IP protocol or ports (then non-IPv4
    /// frames miss).
    needs_ip: bool,
    vr: usize,
    vnic: u16,
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// Compiled rules, first match wins.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    rules: Vec<Compiled>,
}

impl Classifier {
    /// Compile `rules`. Prefix host bits are masked off.
    ///
    /// # Errors
    /// [`RuleError`] naming the rule.
    pub fn new(rules: &[Rule]) -> Result<Self, RuleError> {
        let mut out = Vec::with_capacity(rules.len());
        for (i, r) in rules.iter().enumerate() {
            let pfx = |p: Option<(Ipv4Addr, u8)>| -> Result<(u32, u32), RuleError> {
                match p {
                    None => Ok((0, 0)),
                    Some((_, len)) if len > 32 => Err(RuleError::PrefixLen { rule: i, len }),
                    Some((a, len)) => Ok((mask(len), u32::from(a) & mask(len))),
                }
            };
            let (dst_mask, dst_val) = pfx(r.m.dst)?;
            let (src_mask, src_val) = pfx(r.m.src)?;
            if let Some(v) = r.m.vlan.filter(|v| *v > 4095) {
                return Err(RuleError::Vlan { rule: i, vlan: v });
            }
            if let (Some(_), Some(p)) = (r.m.udp_dport, r.m.proto)
                && p != IPPROTO_UDP
            {
                return Err(RuleError::PortNotUdp { rule: i, proto: p });
            }
            out.push(Compiled {
                in_port: r.m.in_port.unwrap_or(usize::MAX),
                dst_mask,
                dst_val,
                src_mask,
                src_val,
                mac: r.m.dst_mac,
                vlan: r.m.vlan,
                proto: r.m.proto.or(r.m.udp_dport.map(|_| IPPROTO_UDP)),
                dport: r.m.udp_dport,
                needs_addr: r.m.dst.is_some() || r.m.src.is_some(),
                needs_ip: r.m.proto.is_some() || r.m.udp_dport.is_some(),
                vr: r.vr,
                vnic: r.vnic,
            });
        }
        Ok(Self { rules: out })
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True without rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The (VR, vNIC) of the first rule matching a frame from `port`.
    #[inline]
    pub fn classify(&self, port: usize, key: &FlowKey) -> Option<(usize, u16)> {
        let is_ip = key.ethertype == EtherType::IPV4;
        let has_addr = is_ip || key.ethertype == EtherType::ARP;
        self.rules
            .iter()
            .find(|r| {
                (r.in_port == usize::MAX || r.in_port == port)
                    && (!r.needs_ip || is_ip)
                    && (!r.needs_addr || has_addr)
                    && key.dst & r.dst_mask == r.dst_val
                    && key.src & r.src_mask == r.src_val
                    && r.mac.is_none_or(|m| m == key.dst_mac.0)
                    && r.vlan.is_none_or(|v| key.vlan == Some(v))
                    && r.proto.is_none_or(|p| p == key.protocol)
                    && r.dport.is_none_or(|d| d == key.dport)
            })
            .map(|r| (r.vr, r.vnic))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vrhost_packet::MacAddr;

    /// An Ethernet/IPv4 ARP frame: `op` 1 request, 2 reply.
    fn arp(op: u8, sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x06]);
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, op, 2, 0, 0, 0, 0, 9]);
        f.extend_from_slice(&sender.octets());
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&target.octets());
        f
    }

    fn udp(src: Ipv4Addr, dst: Ipv4Addr, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        vrhost_packet::build::UdpFrameSpec {
            dst_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
            src_ip: src,
            dst_ip: dst,
            sport: 1,
            dport,
            ttl: 64,
            frame_bytes: 64,
        }
        .write(&mut f)
        .unwrap();
        f
    }

    fn key(f: &[u8]) -> FlowKey {
        FlowKey::extract(f)
            .ok()
            .or_else(|| FlowKey::extract_l2(f))
            .unwrap()
    }

    const A: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 1);
    const H: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 7);

    fn tenants() -> Classifier {
        let rule = |m: Match, vr| Rule { m, vr, vnic: 0 };
        Classifier::new(&[
            rule(
                Match {
                    udp_dport: Some(53),
                    ..Match::default()
                },
                9,
            ),
            rule(
                Match {
                    dst: Some((Ipv4Addr::new(10, 1, 0, 0), 16)),
                    ..Match::default()
                },
                0,
            ),
            rule(
                Match {
                    src: Some((Ipv4Addr::new(10, 2, 0, 0), 16)),
                    ..Match::default()
                },
                1,
            ),
        ])
        .unwrap()
    }

    #[test]
    fn arp_follows_its_addresses() {
        let c = tenants();
        // A host of tenant 0 asks for its router: target in 10.1/16.
        assert_eq!(c.classify(0, &key(&arp(1, H, A))), Some((0, 0)));
        // Tenant 1's router answers from 10.2/16 to 10.9.0.1: by sender.
        let reply = arp(2, B, Ipv4Addr::new(10, 9, 0, 1));
        assert_eq!(c.classify(0, &key(&reply)), Some((1, 0)));
        // Neither tenant's.
        let other = arp(
            1,
            Ipv4Addr::new(172, 16, 0, 1),
            Ipv4Addr::new(172, 16, 0, 2),
        );
        assert_eq!(c.classify(0, &key(&other)), None);
    }

    #[test]
    fn port_and_protocol_rules_match_ipv4_only() {
        let c = tenants();
        // The DNS rule comes first; an ARP frame must not fall into it
        // (its "port" is 0, and a port-0 rule must not catch it either).
        assert_eq!(c.classify(0, &key(&udp(H, B, 53))), Some((9, 0)));
        let port0 = Classifier::new(&[Rule {
            m: Match {
                udp_dport: Some(0),
                ..Match::default()
            },
            vr: 5,
            vnic: 0,
        }])
        .unwrap();
        assert_eq!(port0.classify(0, &key(&arp(1, H, A))), None);
        let proto0 = Classifier::new(&[Rule {
            m: Match {
                proto: Some(0),
                ..Match::default()
            },
            vr: 5,
            vnic: 0,
        }])
        .unwrap();
        assert_eq!(proto0.classify(0, &key(&arp(1, H, A))), None);
        assert_eq!(c.classify(0, &key(&udp(H, A, 80))), Some((0, 0)));
    }

    #[test]
    fn other_frames_miss_address_rules() {
        let c = tenants();
        // A broken ARP (16-byte protocol addresses) gets the link-layer key.
        let mut bad = arp(1, H, A);
        bad[19] = 16;
        assert_eq!(c.classify(0, &key(&bad)), None);
        // IPv6 EtherType: no addresses.
        let mut v6 = udp(H, A, 80);
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(c.classify(0, &key(&v6)), None);
        // A catch-all rule still takes them.
        let all = Classifier::new(&[Rule {
            m: Match {
                in_port: Some(0),
                ..Match::default()
            },
            vr: 3,
            vnic: 1,
        }])
        .unwrap();
        assert_eq!(all.classify(0, &key(&bad)), Some((3, 1)));
        assert_eq!(all.classify(1, &key(&bad)), None);
    }
}
