//! IPv6 prefix rules (`Match::dst6`, `Match::src6`): the same tuple-space
//! search as IPv4's, over a frame's IPv6 addresses. Rules of one shape
//! (which fields, which prefix lengths) form a group answered by one
//! lookup; a neighbour solicitation or advertisement is matched by its
//! target address as destination (as ARP is by its target), so a tenant's
//! neighbour discovery reaches the VR that holds its prefix. Protocol and
//! UDP port fields of an IPv6 rule look at the next header after the fixed
//! header (a frame with extension headers matches no protocol or port).

use std::collections::HashMap;

use super::{FEW, Hit, Words};

/// ICMPv6, and its neighbour solicitation and advertisement types.
const ICMPV6: u8 = 58;
const ND_NS: u8 = 135;
const ND_NA: u8 = 136;

/// What an IPv6 rule looks at in a frame beyond the link layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fields {
    pub dst: u128,
    pub src: u128,
    /// The fixed header's next header.
    pub next: u8,
    /// The UDP or TCP destination port (0 otherwise).
    pub dport: u16,
}

fn u128_at(f: &[u8], at: usize) -> Option<u128> {
    Some(u128::from_be_bytes(*f.get(at..)?.first_chunk::<16>()?))
}

/// The IPv6 fields of `frame` (its network header at 14, or 18 after a
/// VLAN tag), or `None` if the fixed header is cut short.
#[inline]
pub(super) fn fields(frame: &[u8], tagged: bool) -> Option<Fields> {
    let l3 = if tagged { 18 } else { 14 };
    // One bounds check for the fixed header.
    let h = frame.get(l3..)?.first_chunk::<40>()?;
    let next = h[6];
    let (src, mut dst) = (u128_at(h, 8)?, u128_at(h, 24)?);
    let l4 = l3 + 40;
    let be16 = |at: usize| {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let dport = match next {
        6 | 17 => be16(l4 + 2).unwrap_or(0),
        _ => 0,
    };
    if next == ICMPV6
        && matches!(frame.get(l4), Some(&(ND_NS | ND_NA)))
        && let Some(target) = u128_at(frame, l4 + 8)
    {
        dst = target;
    }
    Some(Fields {
        dst,
        src,
        next,
        dport,
    })
}

/// A frame's key under a group's masks: its link-layer and port words,
/// then destination and source.
type Key6 = [u64; 7];

#[inline(always)]
fn key(w: &Words, dst: u128, src: u128) -> Key6 {
    [
        w[0],
        w[1],
        w[2],
        (dst >> 64) as u64,
        dst as u64,
        (src >> 64) as u64,
        src as u64,
    ]
}

/// Whether two keys are equal, word by word (as IPv4's `Group::find`
/// compares): no `bcmp` over a key just written in words.
#[inline(always)]
fn same(a: &Key6, b: &Key6) -> bool {
    let d = |i: usize| a[i] ^ b[i];
    d(0) | d(1) | d(2) | d(3) | d(4) | d(5) | d(6) == 0
}

/// IPv6 rules of one shape.
#[derive(Debug, Clone)]
pub(super) struct Group6 {
    /// Masks of the non-address fields, packed as IPv4's (address words 0).
    mask: Words,
    dst_mask: u128,
    src_mask: u128,
    /// Position of the group's first rule.
    pub first: u32,
    table: Table6,
}

#[derive(Debug, Clone)]
enum Table6 {
    Few(Vec<(Key6, Hit)>),
    Many(HashMap<Key6, Hit, foldhash::fast::RandomState>),
}

/// A rule's masks and values, as [`Group6s::add`] takes them.
pub(super) struct Rule6 {
    pub mask: Words,
    pub value: Words,
    pub dst: (u128, u128),
    pub src: (u128, u128),
    pub hit: Hit,
}

/// The IPv6 groups, in the order of their first rule.
#[derive(Debug, Clone, Default)]
pub(super) struct Group6s(pub Vec<Group6>);

impl Group6s {
    /// Add a rule (masks, values with host bits cleared).
    pub fn add(&mut self, r: Rule6) {
        let (dst_mask, src_mask) = (r.dst.0, r.src.0);
        let k = key(&r.value, r.dst.1 & dst_mask, r.src.1 & src_mask);
        let same =
            |g: &&mut Group6| (g.mask, g.dst_mask, g.src_mask) == (r.mask, dst_mask, src_mask);
        let Some(g) = self.0.iter_mut().find(same) else {
            self.0.push(Group6 {
                mask: r.mask,
                dst_mask,
                src_mask,
                first: r.hit.pos,
                table: Table6::Few(vec![(k, r.hit)]),
            });
            return;
        };
        match &mut g.table {
            // An earlier rule with the same fields shadows this one.
            Table6::Few(list) if list.iter().any(|(x, _)| *x == k) => {}
            Table6::Few(list) if list.len() < FEW => list.push((k, r.hit)),
            Table6::Few(list) => {
                let mut map = HashMap::with_hasher(foldhash::fast::RandomState::default());
                map.extend(list.iter().copied());
                map.insert(k, r.hit);
                g.table = Table6::Many(map);
            }
            Table6::Many(map) => {
                map.entry(k).or_insert(r.hit);
            }
        }
    }

    /// The first rule (lowest position) matching a frame's words `w` and
    /// IPv6 fields `f`, if it comes before `best`.
    ///
    /// Always inlined, as `Classifier::best` is: out of line, `best` came
    /// back through memory, and the key went to the stack for a `bcmp`
    /// that read back in wide loads what had just been stored in words
    /// (a store-forwarding stall per frame; callgrind: 127 instructions
    /// a frame here with one rule, see `docs/decisions.md`).
    #[inline(always)]
    pub fn find(&self, w: &Words, f: &Fields, mut best: Option<Hit>) -> Option<Hit> {
        for g in &self.0 {
            if best.is_some_and(|b| b.pos < g.first) {
                break;
            }
            let m = &g.mask;
            let masked = [w[0] & m[0], w[1] & m[1], w[2] & m[2]];
            let k = key(&masked, f.dst & g.dst_mask, f.src & g.src_mask);
            let hit = match &g.table {
                Table6::Few(list) => list.iter().find(|(x, _)| same(x, &k)).map(|(_, h)| *h),
                Table6::Many(map) => map.get(&k).copied(),
            };
            if let Some(h) = hit
                && best.is_none_or(|b| h.pos < b.pos)
            {
                best = Some(h);
            }
        }
        best
    }
}

#[cfg(test)]
mod tests;
