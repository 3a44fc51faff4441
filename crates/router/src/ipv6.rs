//! IPv6 forwarding: the checks, the lookup and the hop (see the module
//! docs of [`super`], "IPv6"). Out of line from the IPv4 path: IPv4 frames
//! never reach this file.

use vrhost_packet::ethernet;
use vrhost_packet::icmpv6::msg;
use vrhost_packet::ipv6::{self, Ipv6Packet, UpperLayer, next_header};

use super::resolve::Nd;
use super::{Hop, Router, counters};
use vrhost_sdk::{DropReason, Packet, Verdict};

/// Offset of the IPv6 header in an (untagged) frame.
pub(super) const L3: usize = ethernet::HEADER_LEN;

impl Router {
    /// An IPv6 frame: check it, answer it if it is for the router, else
    /// forward it by the IPv6 table.
    #[inline(never)]
    pub(super) fn ipv6_in(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        let d = pkt.data();
        let Ok(ip) = Ipv6Packet::new_checked(&d[L3..]) else {
            return Verdict::Drop(DropReason::BadHeader);
        };
        let (src, dst) = (ip.src_u128(), ip.dst_u128());
        // RFC 4291 2.7: "Multicast addresses must not be used as source
        // addresses in IPv6 packets".
        if ipv6::is_multicast(src) {
            return Verdict::Drop(DropReason::BadHeader);
        }
        let Ok(up) = ip.upper_layer() else {
            return Verdict::Drop(DropReason::BadHeader);
        };
        let rx = pkt.rx_vnic();
        if ipv6::is_multicast(dst) {
            // Neighbour discovery comes to the solicited-node groups and
            // to all-nodes; nothing multicast is forwarded.
            return self.local6_in(pkt, up, true);
        }
        if d[0] & 1 != 0 {
            // A unicast packet in a group frame is not for a router to
            // forward (as IPv4, RFC 1812 5.3.4).
            return Verdict::Drop(DropReason::Multicast);
        }
        if ipv6::is_link_local(dst) {
            let ours = self
                .vnics
                .get(usize::from(rx))
                .is_some_and(|v| v.addrs6.iter().any(|a| a.addr == dst));
            if ours {
                return self.local6_in(pkt, up, false);
            }
            return Verdict::Drop(DropReason::LinkLocal);
        }
        let id = self.fib6.lookup(dst);
        // By reference: a copy of the hop, compared whole, went through
        // the stack and was read back in pieces (perf annotate).
        let hop = id.and_then(|id| self.hops.get(id as usize));
        if matches!(hop, Some(Hop::Local6)) {
            return self.local6_in(pkt, up, false);
        }
        if up.ext_headers > 0 && self.drop_ext_headers {
            return Verdict::Drop(DropReason::ExtHeader);
        }
        // RFC 4291 2.5.6: "Routers must not forward any packets with
        // Link-Local source or destination addresses to other links."
        // RFC 4291 2.5.2: the unspecified address is never forwarded.
        if ipv6::is_link_local(src) {
            return Verdict::Drop(DropReason::LinkLocal);
        }
        if src == ipv6::UNSPECIFIED {
            return Verdict::Drop(DropReason::BadHeader);
        }
        let Some(hop) = hop else {
            return self.no_route6(pkt);
        };
        // Field by field, as IPv4's `route` reads its hop.
        match *hop {
            Hop::Static { vnic, dst, src } => self.route6(pkt, vnic, (dst, src)),
            other => self.route6_other(pkt, other),
        }
    }

    /// Forward a checked packet out of `vnic` to a next hop with a
    /// configured MAC (`(dst, src)`: the frame's new MAC addresses), inline
    /// as IPv4's [`Router::route`]; other hops go to
    /// [`Router::route6_other`].
    #[inline(always)]
    fn route6(
        &mut self,
        pkt: &mut Packet<'_>,
        vnic: u16,
        (dst, src): ([u8; 6], [u8; 6]),
    ) -> Verdict {
        let d = pkt.data_mut();
        let ip = Ipv6Packet::new_unchecked(&d[L3..]);
        if ip.hop_limit() <= 1 {
            return self.time_exceeded6(pkt);
        }
        if let Some(v) = self.vnics.get(usize::from(vnic))
            && ip.total_len() > usize::from(v.mtu)
        {
            let mtu = v.mtu;
            return self.packet_too_big6(pkt, mtu);
        }
        d[L3 + 7] -= 1;
        d[0..6].copy_from_slice(&dst);
        d[6..12].copy_from_slice(&src);
        Verdict::Forward(vnic)
    }

    /// Forward a checked packet by a hop other than [`Hop::Static`].
    #[inline(never)]
    fn route6_other(&mut self, pkt: &mut Packet<'_>, hop: Hop) -> Verdict {
        let d = pkt.data();
        let ip = Ipv6Packet::new_unchecked(&d[L3..]);
        if ip.hop_limit() <= 1 {
            return self.time_exceeded6(pkt);
        }
        let dst = ip.dst_u128();
        if let Hop::Gateway6 { vnic, .. } | Hop::Connected6 { vnic } = hop
            && let Some(v) = self.vnics.get(usize::from(vnic))
            && ip.total_len() > usize::from(v.mtu)
        {
            let mtu = v.mtu;
            return self.packet_too_big6(pkt, mtu);
        }
        let (vnic, i) = match hop {
            Hop::Gateway6 { vnic, neigh } => (vnic, neigh as usize),
            Hop::Connected6 { vnic } => match self.neigh6.insert(dst, vnic) {
                Some((i, discarded)) => {
                    self.counters[counters::ND_UNRES_DISCARDS] += discarded;
                    (vnic, i)
                }
                None => {
                    self.counters[counters::NEIGH_TABLE_FULL] += 1;
                    return Verdict::Drop(DropReason::ArpUnresolved);
                }
            },
            // IPv4 hops are never in the IPv6 table; Local6 was handled,
            // Static is routed inline.
            _ => return Verdict::Drop(DropReason::Other),
        };
        self.send_to_neighbour::<Nd>(pkt, vnic, i)
    }

    /// Forward to `mac` out of `vnic`: hop limit (no checksum in IPv6),
    /// MAC addresses.
    #[inline]
    pub(super) fn send6(&mut self, pkt: &mut Packet<'_>, vnic: u16, mac: [u8; 6]) -> Verdict {
        let d = pkt.data_mut();
        d[L3 + 7] = d[L3 + 7].saturating_sub(1);
        d[0..6].copy_from_slice(&mac);
        d[6..12].copy_from_slice(&self.vnics[usize::from(vnic)].mac);
        Verdict::Forward(vnic)
    }

    /// A packet for the router (one of its addresses, or a group it is in
    /// when `group`): ICMPv6 echo and neighbour discovery are answered,
    /// the rest dropped.
    #[cold]
    fn local6_in(&mut self, pkt: &mut Packet<'_>, up: UpperLayer, group: bool) -> Verdict {
        let unsupported = if group {
            DropReason::Multicast
        } else {
            DropReason::LocalUnsupported
        };
        if up.protocol != next_header::ICMPV6 || up.later_fragment {
            return Verdict::Drop(unsupported);
        }
        let ip = Ipv6Packet::new_unchecked(&pkt.data()[L3..]);
        let Some(&t) = ip.packet().get(up.offset) else {
            return Verdict::Drop(DropReason::BadHeader);
        };
        match t {
            msg::ECHO_REQUEST if !group => self.echo6(pkt, up.offset),
            msg::NEIGHBOR_SOLICIT | msg::NEIGHBOR_ADVERT => self.nd_in(pkt, up.offset),
            // RFC 4861 6.2.6: only an advertising interface answers
            // solicitations; this router advertises nothing.
            msg::ROUTER_SOLICIT => Verdict::Drop(DropReason::LocalUnsupported),
            _ => Verdict::Drop(unsupported),
        }
    }
}
