//! The classifier: which VR and vNIC a received frame belongs to.
//!
//! An ordered list of rules; the first whose every given field matches wins
//! (as Europa's "classify" element and PdP's dispatcher). A rule matches on
//! any of: the port the frame came in on, destination or source IPv4
//! prefix, destination MAC, VLAN id, IP protocol, UDP destination port.
//! Prefix rules match IPv4 packets and ARP packets (by target and sender
//! protocol address), so a tenant's ARP reaches the VR that routes its
//! prefix; protocol and port rules match IPv4 only, unless the rule has an
//! IPv6 prefix (`dst6`, `src6`: IPv6 frames, neighbour discovery by its
//! target, [`Classifier::classify_frame`]; see `v6`). Rules are compiled
//! into a tuple-space search (see [`Classifier`]), so the cost of a frame
//! grows with the kinds of rules, not with the number of tenants.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use vrhost_packet::FlowKey;
use vrhost_packet::ethernet::EtherType;

use crate::tunnel::TunnelTable;

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
    /// Destination IPv6 prefix (neighbour solicitations and advertisements:
    /// of the target address). Not with `dst` or `src`.
    pub dst6: Option<(Ipv6Addr, u8)>,
    /// Source IPv6 prefix. Not with `dst` or `src`.
    pub src6: Option<(Ipv6Addr, u8)>,
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
    /// An IPv4 and an IPv6 prefix in one rule: it could never match.
    #[error("rule {rule}: an IPv4 and an IPv6 prefix can never match the same frame")]
    MixedFamilies {
        /// Rule position.
        rule: usize,
    },
    /// Prefix length above 32 (IPv6: 128).
    #[error("rule {rule}: prefix length {len} is longer than the address")]
    PrefixLen {
        /// Rule position.
        rule: usize,
        /// The length.
        len: u8,
    },
    /// A rule position or VR index past `u32::MAX`.
    #[error("rule {rule}: its position or VR index does not fit in 32 bits")]
    TooLarge {
        /// Rule position.
        rule: usize,
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

/// A frame's fields packed into three words, so a group's view of them is
/// three ANDs: `[dst | src << 32, dst_mac | dport << 48,
/// in_port | vlan << 32 | proto << 48]`. An untagged frame's VLAN is
/// 0xffff, which no rule can name (ids are at most 4095).
type Words = [u64; 3];

/// Pack fields as [`Words`] (a frame's, a rule's values, or a rule's
/// masks with the fields it looks at all ones).
#[inline]
fn pack(dst: u32, src: u32, mac: [u8; 6], dport: u16, port: u32, vlan: u16, proto: u8) -> Words {
    let m = mac;
    [
        u64::from(dst) | u64::from(src) << 32,
        u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]) | u64::from(dport) << 48,
        u64::from(port) | u64::from(vlan) << 32 | u64::from(proto) << 48,
    ]
}

/// Port indexes as packed: indexes into the worker's port list; one past
/// u32 range would alias u32::MAX, which no host reaches.
fn port32(port: usize) -> u32 {
    u32::try_from(port).unwrap_or(u32::MAX)
}

#[inline]
fn words(port: usize, key: &FlowKey) -> Words {
    pack(
        key.dst,
        key.src,
        key.dst_mac.0,
        key.dport,
        port32(port),
        key.vlan.unwrap_or(0xffff),
        key.protocol,
    )
}

/// Where a rule sends what it matches, and its position (first match wins).
///
/// Narrow fields, so that `Option<Hit>` (16 bytes) comes back from a
/// lookup in two registers: with `usize` fields it came back through
/// memory, and the worker stalled on reloading it (perf: a third of
/// `Classifier::best`'s samples on that reload with 101 tenants).
#[derive(Debug, Clone, Copy)]
struct Hit {
    pos: u32,
    vr: u32,
    vnic: u16,
}

/// The rules that look at the same fields with the same prefix lengths:
/// one lookup of the frame's fields under `mask` finds the first of them
/// that matches.
#[derive(Debug, Clone)]
struct Group {
    mask: Words,
    /// The frame must be IPv4 or ARP (a rule of the group has a prefix).
    needs_addr: bool,
    /// The frame must be IPv4 (a rule of the group has a protocol or port).
    needs_ip: bool,
    /// Position of the group's first rule.
    first: u32,
    table: Table,
}

/// Most keys a group scans; above, it looks them up in an exact-match
/// table. Measured with `bench memory --modes inproc`: a general hash
/// lookup cost about as much as scanning 30 keys.
const FEW: usize = 24;

/// A group's rules by their masked fields (the first rule of each key).
#[derive(Debug, Clone)]
enum Table {
    /// Up to [`FEW`] keys, in rule order: a scan beats hashing.
    Few(Vec<(Words, Hit)>),
    Many(exact::Exact),
}

impl Group {
    #[inline]
    fn find(&self, w: &Words) -> Option<Hit> {
        let m = &self.mask;
        let k = [w[0] & m[0], w[1] & m[1], w[2] & m[2]];
        match &self.table {
            // Word by word: a wide compare of a key just stored word by
            // word stalls on store forwarding.
            Table::Few(list) => list
                .iter()
                .find(|(key, _)| (key[0] ^ k[0]) | (key[1] ^ k[1]) | (key[2] ^ k[2]) == 0)
                .map(|(_, hit)| *hit),
            Table::Many(t) => t.get(&k),
        }
    }
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// Compiled rules, first match wins.
///
/// A tuple-space search, as in Open vSwitch's classifier: rules with the
/// same shape (which fields, which prefix lengths) form a group, and a
/// group answers with one hash lookup of the frame's fields under its
/// masks, however many tenants it holds. Groups are tried in the order of
/// their first rule, and once a match is found no group whose first rule
/// comes later is looked at; the answer is the matching rule with the
/// lowest position. A host whose tenants are told apart by one kind of
/// field (a source prefix, a MAC, a VLAN) has one group: one lookup per
/// frame instead of a scan whose length grows with the tenants.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    groups: Vec<Group>,
    /// Rules with an IPv6 prefix.
    groups6: v6::Group6s,
    rules: usize,
    /// The tunnels, asked before the rules (see [`crate::tunnel`]).
    tunnels: TunnelTable,
}

mod exact;
mod v6;

fn mask6(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

impl Classifier {
    /// Compile `rules`. Prefix host bits are masked off.
    ///
    /// # Errors
    /// [`RuleError`] naming the rule.
    pub fn new(rules: &[Rule]) -> Result<Self, RuleError> {
        let mut groups: Vec<Group> = Vec::new();
        // (group, key) of the rules taken: the first rule of a key wins.
        let mut seen: HashSet<(usize, Words)> = HashSet::new();
        let mut groups6 = v6::Group6s::default();
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
            let pfx6 = |p: Option<(Ipv6Addr, u8)>| -> Result<(u128, u128), RuleError> {
                match p {
                    None => Ok((0, 0)),
                    Some((_, len)) if len > 128 => Err(RuleError::PrefixLen { rule: i, len }),
                    Some((a, len)) => Ok((mask6(len), u128::from(a) & mask6(len))),
                }
            };
            let (dst6, src6) = (pfx6(r.m.dst6)?, pfx6(r.m.src6)?);
            let is6 = r.m.dst6.is_some() || r.m.src6.is_some();
            if is6 && (r.m.dst.is_some() || r.m.src.is_some()) {
                return Err(RuleError::MixedFamilies { rule: i });
            }
            if let Some(v) = r.m.vlan.filter(|v| *v > 4095) {
                return Err(RuleError::Vlan { rule: i, vlan: v });
            }
            if let (Some(_), Some(p)) = (r.m.udp_dport, r.m.proto)
                && p != IPPROTO_UDP
            {
                return Err(RuleError::PortNotUdp { rule: i, proto: p });
            }
            let proto = r.m.proto.or(r.m.udp_dport.map(|_| IPPROTO_UDP));
            let all = |set: bool| if set { u64::MAX } else { 0 };
            let mask = pack(
                dst_mask,
                src_mask,
                [all(r.m.dst_mac.is_some()) as u8; 6],
                all(r.m.udp_dport.is_some()) as u16,
                all(r.m.in_port.is_some()) as u32,
                all(r.m.vlan.is_some()) as u16,
                all(proto.is_some()) as u8,
            );
            let needs_addr = r.m.dst.is_some() || r.m.src.is_some();
            let needs_ip = proto.is_some();
            // The rule's values, packed as a frame's would be.
            let key = pack(
                dst_val,
                src_val,
                r.m.dst_mac.unwrap_or_default(),
                r.m.udp_dport.unwrap_or(0),
                port32(r.m.in_port.unwrap_or(0)),
                r.m.vlan.unwrap_or(0),
                proto.unwrap_or(0),
            );
            let (Ok(pos), Ok(vr)) = (u32::try_from(i), u32::try_from(r.vr)) else {
                return Err(RuleError::TooLarge { rule: i });
            };
            let hit = Hit {
                pos,
                vr,
                vnic: r.vnic,
            };
            if is6 {
                groups6.add(v6::Rule6 {
                    mask,
                    value: key,
                    dst: dst6,
                    src: src6,
                    hit,
                });
                continue;
            }
            let same =
                |g: &Group| g.mask == mask && g.needs_addr == needs_addr && g.needs_ip == needs_ip;
            match groups.iter().position(same) {
                None => {
                    seen.insert((groups.len(), key));
                    groups.push(Group {
                        mask,
                        needs_addr,
                        needs_ip,
                        first: pos,
                        table: Table::Few(vec![(key, hit)]),
                    });
                }
                // An earlier rule with the same fields shadows this one.
                Some(g) if !seen.insert((g, key)) => {}
                Some(g) => {
                    if let Table::Few(list) = &mut groups[g].table {
                        list.push((key, hit));
                    }
                }
            }
        }
        // Large groups are looked up, not scanned.
        for g in &mut groups {
            if let Table::Few(list) = &g.table
                && list.len() > FEW
            {
                g.table = Table::Many(exact::Exact::new(list));
            }
        }
        // Already in order of their first rule: a group is made by its
        // first rule, and rules are taken in order.
        Ok(Self {
            groups,
            groups6,
            rules: rules.len(),
            tunnels: TunnelTable::default(),
        })
    }

    /// Set the tunnels whose frames are decapsulated before the rules.
    pub fn set_tunnels(&mut self, t: TunnelTable) {
        self.tunnels = t;
    }

    /// The tunnels.
    #[inline]
    pub fn tunnels(&self) -> &TunnelTable {
        &self.tunnels
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules
    }

    /// True without rules.
    pub fn is_empty(&self) -> bool {
        self.rules == 0
    }

    /// Number of groups of rules with the same shape: the most hash lookups
    /// a frame costs.
    pub fn groups(&self) -> usize {
        self.groups.len() + self.groups6.0.len()
    }

    /// The (VR, vNIC) of the first rule matching a frame from `port`, by
    /// its key alone: rules with an IPv6 prefix match nothing here (see
    /// [`Classifier::classify_frame`]).
    #[inline]
    pub fn classify(&self, port: usize, key: &FlowKey) -> Option<(usize, u16)> {
        self.best(port, key).map(|h| (h.vr as usize, h.vnic))
    }

    /// As [`Classifier::classify`], with the frame (`key` is its key) for
    /// the rules with an IPv6 prefix.
    #[inline]
    pub fn classify_frame(&self, port: usize, key: &FlowKey, frame: &[u8]) -> Option<(usize, u16)> {
        if self.groups6.0.is_empty() || key.ethertype != EtherType::IPV6 {
            return self.classify(port, key);
        }
        let best = self.best(port, key);
        let Some(f) = v6::fields(frame, key.vlan.is_some()) else {
            return best.map(|h| (h.vr as usize, h.vnic));
        };
        let w = pack(
            0,
            0,
            key.dst_mac.0,
            f.dport,
            port32(port),
            key.vlan.unwrap_or(0xffff),
            f.next,
        );
        self.groups6
            .find(&w, &f, best)
            .map(|h| (h.vr as usize, h.vnic))
    }

    /// The first IPv4, ARP or link-layer rule matching a frame's key.
    /// Always inlined, as `FlowKey::extract` is: called out of line it
    /// reads the key the worker has just written in narrower pieces, and
    /// each frame stalls on store forwarding (16.8% of `bench memory
    /// --modes inproc`'s time in this function, in `perf annotate` on its
    /// first loads).
    #[inline(always)]
    fn best(&self, port: usize, key: &FlowKey) -> Option<Hit> {
        let is_ip = key.ethertype == EtherType::IPV4;
        let has_addr = is_ip || key.ethertype == EtherType::ARP;
        let w = words(port, key);
        let admits = |g: &Group| (is_ip || !g.needs_ip) && (has_addr || !g.needs_addr);
        // One kind of rule (the common host): its first match.
        if let [g] = self.groups.as_slice() {
            return admits(g).then(|| g.find(&w)).flatten();
        }
        let mut best: Option<Hit> = None;
        for g in &self.groups {
            if best.is_some_and(|b| b.pos < g.first) {
                break;
            }
            if !admits(g) {
                continue;
            }
            if let Some(h) = g.find(&w)
                && best.is_none_or(|b| h.pos < b.pos)
            {
                best = Some(h);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
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
        crate::testkit::udp(src, 1, dst, dport)
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

    /// A classifier of one rule: `m` to vNIC `vnic` of VR `vr`.
    fn one_rule(m: Match, vr: usize, vnic: u16) -> Classifier {
        Classifier::new(&[Rule { m, vr, vnic }]).unwrap()
    }

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
        let port0 = one_rule(
            Match {
                udp_dport: Some(0),
                ..Match::default()
            },
            5,
            0,
        );
        assert_eq!(port0.classify(0, &key(&arp(1, H, A))), None);
        let proto0 = one_rule(
            Match {
                proto: Some(0),
                ..Match::default()
            },
            5,
            0,
        );
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
        let all = one_rule(
            Match {
                in_port: Some(0),
                ..Match::default()
            },
            3,
            1,
        );
        assert_eq!(all.classify(0, &key(&bad)), Some((3, 1)));
        assert_eq!(all.classify(1, &key(&bad)), None);
    }

    /// Rule `m` on a frame from `port`, field by field as `Match` says.
    fn reference_match(m: &Match, port: usize, k: &FlowKey) -> bool {
        let is_ip = k.ethertype == EtherType::IPV4;
        let has_addr = is_ip || k.ethertype == EtherType::ARP;
        let in_pfx = |p: Option<(Ipv4Addr, u8)>, a: u32| {
            p.is_none_or(|(net, len)| {
                has_addr && (len == 0 || (u32::from(net) ^ a) >> (32 - u32::from(len)) == 0)
            })
        };
        m.in_port.is_none_or(|p| p == port)
            && in_pfx(m.dst, k.dst)
            && in_pfx(m.src, k.src)
            && m.dst_mac.is_none_or(|mac| mac == k.dst_mac.0)
            && m.vlan.is_none_or(|v| k.vlan == Some(v))
            && m.proto.is_none_or(|p| is_ip && k.protocol == p)
            && m.udp_dport
                .is_none_or(|d| is_ip && k.protocol == IPPROTO_UDP && k.dport == d)
    }

    fn reference(rules: &[Rule], port: usize, k: &FlowKey) -> Option<(usize, u16)> {
        rules
            .iter()
            .find(|r| reference_match(&r.m, port, k))
            .map(|r| (r.vr, r.vnic))
    }

    // Small palettes, so rules overlap, share shapes and match often.
    fn pal_addr() -> impl Strategy<Value = u32> {
        (0u32..4, 0u32..4, any::<u8>())
            .prop_map(|(a, b, h)| 0x0a00_0000 | a << 16 | b << 8 | u32::from(h % 4))
    }

    fn pal_prefix() -> impl Strategy<Value = (Ipv4Addr, u8)> {
        (
            pal_addr(),
            prop::sample::select(vec![0u8, 8, 16, 24, 30, 32]),
        )
            .prop_map(|(a, l)| (Ipv4Addr::from(a), l))
    }

    fn arb_rule() -> impl Strategy<Value = Rule> {
        (
            (
                prop::option::weighted(0.3, 0usize..3),
                prop::option::weighted(0.4, pal_prefix()),
                prop::option::weighted(0.4, pal_prefix()),
                prop::option::weighted(0.2, (0u8..3).prop_map(|b| [2, 0, 0, 0, 0, b])),
            ),
            (
                prop::option::weighted(0.2, 0u16..3),
                prop::option::weighted(0.2, prop::sample::select(vec![1u8, 6, 17])),
                prop::option::weighted(0.2, prop::sample::select(vec![53u16, 80])),
                0usize..20,
                0u16..2,
            ),
        )
            .prop_map(
                |((in_port, dst, src, dst_mac), (vlan, proto, udp_dport, vr, vnic))| Rule {
                    m: Match {
                        in_port,
                        dst,
                        src,
                        dst_mac,
                        vlan,
                        // A port rule with another protocol is refused; tested above.
                        proto: if udp_dport.is_some() { None } else { proto },
                        udp_dport,
                        ..Match::default()
                    },
                    vr,
                    vnic,
                },
            )
    }

    fn arb_key() -> impl Strategy<Value = FlowKey> {
        (
            (pal_addr(), pal_addr(), 0u8..3, prop::option::of(0u16..3)),
            (
                prop::sample::select(vec![EtherType::IPV4, EtherType::ARP, EtherType(0x86dd)]),
                prop::sample::select(vec![1u8, 6, 17]),
                prop::sample::select(vec![53u16, 80, 7]),
            ),
        )
            .prop_map(|((dst, src, mac, vlan), (ethertype, protocol, dport))| {
                let ip = ethertype == EtherType::IPV4;
                let addr = ip || ethertype == EtherType::ARP;
                FlowKey {
                    dst_mac: MacAddr([2, 0, 0, 0, 0, mac]),
                    vlan,
                    ethertype,
                    src: if addr { src } else { 0 },
                    dst: if addr { dst } else { 0 },
                    protocol: if ip { protocol } else { 0 },
                    dport: if ip { dport } else { 0 },
                    ..FlowKey::default()
                }
            })
    }

    proptest! {
        /// The tuple-space search gives the first matching rule, as a scan
        /// of the rules in order would.
        #[test]
        fn first_match_as_a_linear_scan(
            rules in prop::collection::vec(arb_rule(), 0..24),
            frames in prop::collection::vec((0usize..3, arb_key()), 1..64),
        ) {
            let c = Classifier::new(&rules).unwrap();
            prop_assert_eq!(c.len(), rules.len());
            for (port, key) in &frames {
                prop_assert_eq!(c.classify(*port, key), reference(&rules, *port, key));
            }
        }
    }

    /// Tenants by source address, more than a group scans, between other
    /// rules: looked up as a scan of the rules in order would answer.
    fn tenant_rule() -> impl Strategy<Value = Rule> {
        (0u32..64, 0usize..2, 0usize..100).prop_map(|(a, port, vr)| Rule {
            m: Match {
                in_port: Some(port),
                src: Some((Ipv4Addr::from(0x0a00_0000 | a), 32)),
                ..Match::default()
            },
            vr,
            vnic: 0,
        })
    }

    proptest! {
        #[test]
        fn a_large_group_matches_as_a_linear_scan(
            before in prop::collection::vec(arb_rule(), 0..4),
            tenants in prop::collection::vec(tenant_rule(), 25..120),
            after in prop::collection::vec(arb_rule(), 0..4),
            srcs in prop::collection::vec((0usize..3, 0u32..80, arb_key()), 1..64),
        ) {
            let rules: Vec<Rule> = before.into_iter().chain(tenants).chain(after).collect();
            let c = Classifier::new(&rules).unwrap();
            for (port, a, key) in &srcs {
                let key = FlowKey {
                    src: 0x0a00_0000 | a,
                    ethertype: EtherType::IPV4,
                    ..*key
                };
                prop_assert_eq!(c.classify(*port, &key), reference(&rules, *port, &key));
            }
        }
    }

    #[test]
    fn many_tenants_make_one_group() {
        // 1000 tenants told apart by source address, plus a catch-all.
        let mut rules: Vec<Rule> = (0..1000u32)
            .map(|i| Rule {
                m: Match {
                    in_port: Some(0),
                    src: Some((Ipv4Addr::from(0x0a00_0000 + i), 32)),
                    ..Match::default()
                },
                vr: i as usize,
                vnic: 0,
            })
            .collect();
        rules.push(Rule {
            m: Match::default(),
            vr: 5000,
            vnic: 1,
        });
        let c = Classifier::new(&rules).unwrap();
        assert_eq!(c.groups(), 2);
        for i in [0u32, 1, 499, 999] {
            let k = key(&udp(Ipv4Addr::from(0x0a00_0000 + i), A, 9));
            assert_eq!(c.classify(0, &k), Some((i as usize, 0)));
            // Another port: only the catch-all.
            assert_eq!(c.classify(1, &k), Some((5000, 1)));
        }
        let k = key(&udp(Ipv4Addr::from(0x0a00_0000 + 1000), A, 9));
        assert_eq!(c.classify(0, &k), Some((5000, 1)));
    }
}
