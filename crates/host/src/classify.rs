//! The classifier: which VR and vNIC a received frame belongs to.
//!
//! An ordered list of rules; the first whose every given field matches wins
//! (as Europa's "classify" element and PdP's dispatcher). A rule matches on
//! any of: the port the frame came in on, destination or source IPv4
//! prefix, destination MAC, VLAN id, IP protocol, UDP destination port. Rules
//! are compiled into masks so a match is a few compares; with the handful of
//! rules a host has per port, a linear scan beats any index.

use std::net::Ipv4Addr;

use vrhost_packet::FlowKey;

const IPPROTO_UDP: u8 = 17;

/// What a rule matches. Unset fields match anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Match {
    /// Ingress port index.
    pub in_port: Option<usize>,
    /// Destination IPv4 prefix.
    pub dst: Option<(Ipv4Addr, u8)>,
    /// Source IPv4 prefix.
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
    /// Whether the rule looks at IPv4 fields (then non-IPv4 frames miss).
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
                needs_ip: r.m.dst.is_some()
                    || r.m.src.is_some()
                    || r.m.proto.is_some()
                    || r.m.udp_dport.is_some(),
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
        let is_ip = key.ethertype == vrhost_packet::ethernet::EtherType::IPV4;
        self.rules
            .iter()
            .find(|r| {
                (r.in_port == usize::MAX || r.in_port == port)
                    && (!r.needs_ip || is_ip)
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
