//! ICMPv6 in the router (RFC 4443): echo replies and errors, written in
//! place of the packet (see the module docs of [`super`], "IPv6").

use vrhost_packet::MacAddr;
use vrhost_packet::ethernet::{self, EtherType, EthernetFrame, EthernetRepr};
use vrhost_packet::icmpv6::{self, Icmpv6Packet, Icmpv6Repr, msg};
use vrhost_packet::ipv6::{self, Ipv6Packet, Ipv6Repr, next_header};

use super::icmp::{back_over, make_room_for_error};
use super::ipv6::L3;
use super::{Hop, Router, counters};
use vrhost_sdk::{DropReason, Packet, Verdict};

/// Hop limit of what the router sends, but ND (Linux's `hop_limit` 64).
const HOP_LIMIT: u8 = 64;
/// Room an error needs before the quoted packet: IPv6 and ICMPv6 headers.
const ERROR_GROWTH: usize = ipv6::HEADER_LEN + icmpv6::HEADER_LEN;
/// RFC 4443 2.4 (c): an error carries "as much of invoking packet as
/// possible without the ICMPv6 packet exceeding the minimum IPv6 MTU"
/// (1280, RFC 8200 5).
const MAX_QUOTE: usize = 1280 - ERROR_GROWTH;
/// Traffic class of errors: class selector 6, as IPv4's.
const TC_CONTROL: u8 = 0xc0;

impl Router {
    /// ICMPv6 time exceeded (hop limit) in place of `pkt`, or a drop.
    #[cold]
    #[inline(never)]
    pub(super) fn time_exceeded6(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        self.icmp6_error(
            pkt,
            msg::TIME_EXCEEDED,
            icmpv6::time_exceeded::HOP_LIMIT,
            0,
            DropReason::TtlExpired,
            counters::ICMP6_TIME_EXCEEDED,
        )
    }

    /// ICMPv6 destination unreachable, no route, in place of `pkt`.
    #[cold]
    #[inline(never)]
    pub(super) fn no_route6(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        self.icmp6_error(
            pkt,
            msg::DST_UNREACHABLE,
            icmpv6::unreachable::NO_ROUTE,
            0,
            DropReason::NoRoute,
            counters::ICMP6_NO_ROUTE,
        )
    }

    /// ICMPv6 destination unreachable, address unreachable (neighbour
    /// discovery failed), in place of `pkt`.
    #[cold]
    #[inline(never)]
    pub(super) fn addr_unreachable6(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        self.icmp6_error(
            pkt,
            msg::DST_UNREACHABLE,
            icmpv6::unreachable::ADDRESS,
            0,
            DropReason::HostUnreachable,
            counters::ICMP6_ADDR_UNREACHABLE,
        )
    }

    /// ICMPv6 packet too big (RFC 4443 3.2), the out vNIC's `mtu` in it,
    /// in place of `pkt`; a drop (`Other`: no reason says "too big") when
    /// none may be sent.
    #[cold]
    #[inline(never)]
    pub(super) fn packet_too_big6(&mut self, pkt: &mut Packet<'_>, mtu: u16) -> Verdict {
        self.icmp6_error(
            pkt,
            msg::PACKET_TOO_BIG,
            0,
            u32::from(mtu),
            DropReason::Other,
            counters::ICMP6_PACKET_TOO_BIG,
        )
    }

    /// Rewrite `pkt` (a checked IPv6 frame) into an ICMPv6 error about it
    /// (`rest`: the 4 bytes after the checksum), to its source;
    /// `Drop(otherwise)` when no error may or can be sent.
    fn icmp6_error(
        &mut self,
        pkt: &mut Packet<'_>,
        msg_type: u8,
        code: u8,
        rest: u32,
        otherwise: DropReason,
        counter: usize,
    ) -> Verdict {
        let d = pkt.data();
        let frame_src = EthernetFrame::new_unchecked(d).src_addr();
        let ip = Ipv6Packet::new_unchecked(&d[L3..]);
        let src = ip.src_u128();
        // RFC 4443 2.4 (e): never about an ICMPv6 error, nor to a source
        // that does not identify a single node; link-local sources were
        // refused before forwarding.
        if src == ipv6::UNSPECIFIED || ipv6::is_multicast(src) || ipv6::is_link_local(src) {
            return Verdict::Drop(otherwise);
        }
        if let Ok(u) = ip.upper_layer()
            && u.protocol == next_header::ICMPV6
            && !u.later_fragment
            && ip
                .packet()
                .get(u.offset)
                .is_none_or(|&t| icmpv6::is_error(t))
        {
            return Verdict::Drop(otherwise);
        }
        let quote = ip.total_len().min(MAX_QUOTE);
        let Some((out, mac)) = self.way_back6(src, pkt.rx_vnic(), frame_src) else {
            return Verdict::Drop(otherwise);
        };
        let Some(from) = self.source_addr6(out, src) else {
            return Verdict::Drop(otherwise);
        };
        let now = self.now();
        if !self.bucket6.take(now) {
            self.counters[counters::ICMP6_RATE_LIMITED] += 1;
            return Verdict::Drop(otherwise);
        }
        // [eth][IPv6 ...] becomes [eth][IPv6'][ICMPv6][IPv6 ... quoted].
        if !make_room_for_error(pkt, ERROR_GROWTH, quote) {
            return Verdict::Drop(otherwise);
        }
        let d = pkt.data_mut();
        self.emit_ip6_eth(
            d,
            out,
            mac,
            from,
            src,
            TC_CONTROL,
            icmpv6::HEADER_LEN + quote,
        );
        Icmpv6Repr {
            msg_type,
            code,
            rest_of_header: rest,
        }
        .emit(&mut d[L3 + ipv6::HEADER_LEN..], from, src);
        self.counters[counter] += 1;
        Verdict::Forward(out)
    }

    /// An echo request to one of the router's unicast addresses: answered
    /// in place, extension headers dropped. `off` is the ICMPv6 header's
    /// offset from the IPv6 header.
    pub(super) fn echo6(&mut self, pkt: &mut Packet<'_>, off: usize) -> Verdict {
        let d = pkt.data();
        let frame_src = EthernetFrame::new_unchecked(d).src_addr();
        let ip = Ipv6Packet::new_unchecked(&d[L3..]);
        let (src, dst, tc) = (ip.src_u128(), ip.dst_u128(), ip.traffic_class());
        let Ok(req) = Icmpv6Packet::new_checked(&ip.packet()[off..]) else {
            return Verdict::Drop(DropReason::BadHeader);
        };
        if !req.verify_checksum(src, dst) {
            return Verdict::Drop(DropReason::BadChecksum);
        }
        if src == ipv6::UNSPECIFIED {
            return Verdict::Drop(DropReason::BadHeader);
        }
        let icmp_len = req.into_inner().len();
        let Some((out, mac)) = self.way_back6(src, pkt.rx_vnic(), frame_src) else {
            return Verdict::Drop(DropReason::NoRoute);
        };
        let d = pkt.data_mut();
        let at = L3 + ipv6::HEADER_LEN;
        if off > ipv6::HEADER_LEN {
            d.copy_within(L3 + off..L3 + off + icmp_len, at);
        }
        // Swapping the addresses keeps the pseudo-header's sum: only the
        // type changes.
        Icmpv6Packet::new_unchecked(&mut d[at..at + icmp_len])
            .set_type_code_update_checksum(msg::ECHO_REPLY, 0);
        self.emit_ip6_eth(d, out, mac, dst, src, tc, icmp_len);
        pkt.set_len(at + icmp_len);
        self.counters[counters::ICMP6_ECHO_REPLIES] += 1;
        Verdict::Forward(out)
    }

    /// Write the Ethernet and IPv6 headers of an ICMPv6 message the router
    /// sends: `from` -> `to`, `payload` bytes of ICMPv6, out of `out` to
    /// `mac`.
    #[expect(clippy::too_many_arguments, reason = "the fields of two headers")]
    fn emit_ip6_eth(
        &self,
        d: &mut [u8],
        out: u16,
        mac: MacAddr,
        from: u128,
        to: u128,
        tc: u8,
        payload: usize,
    ) {
        EthernetRepr {
            dst: mac,
            src: MacAddr(self.vnics[usize::from(out)].mac),
            vlan_tci: None,
            ethertype: EtherType::IPV6,
        }
        .emit(d);
        Ipv6Repr {
            src: from.into(),
            dst: to.into(),
            next_header: next_header::ICMPV6,
            hop_limit: HOP_LIMIT,
            // At most a 1280-byte packet, or an echo that came in one
            // frame: fits.
            payload_len: payload as u16,
            traffic_class: tc,
            flow_label: 0,
        }
        .emit(&mut d[ethernet::HEADER_LEN..]);
    }

    /// The vNIC and next-hop MAC toward `to`: on the vNIC the packet came
    /// in by (`rx`), the frame's source; elsewhere a next hop whose MAC is
    /// known. A link-local `to` is on `rx`.
    pub(super) fn way_back6(
        &self,
        to: u128,
        rx: u16,
        frame_src: MacAddr,
    ) -> Option<(u16, MacAddr)> {
        if ipv6::is_link_local(to) {
            let known = usize::from(rx) < self.vnics.len() && frame_src.is_unicast();
            return known.then_some((rx, frame_src));
        }
        let hop = *self.hops.get(self.fib6.lookup(to)? as usize)?;
        let (vnic, known) = match hop {
            Hop::Static { vnic, dst, .. } => (vnic, Some(dst)),
            Hop::Gateway6 { vnic, neigh } => (vnic, self.neigh6.known_mac(neigh as usize)),
            Hop::Connected6 { vnic } => (vnic, self.neigh6.known_mac_of(to, vnic)),
            _ => return None,
        };
        back_over(vnic, known, rx, frame_src)
    }

    /// The source address of what the router sends out of `out` to `to`:
    /// the vNIC's address in `to`'s subnet, else its first global one,
    /// else the router's first global one (RFC 4443 2.2: an address that
    /// belongs to the router; link-local only to a link-local `to`).
    pub(super) fn source_addr6(&self, out: u16, to: u128) -> Option<u128> {
        let v = self.vnics.get(usize::from(out))?;
        let global = |a: &&super::Iface6| !ipv6::is_link_local(a.addr);
        v.addrs6
            .iter()
            .find(|a| a.contains(to))
            .or_else(|| v.addrs6.iter().find(global))
            .or_else(|| self.vnics.iter().find_map(|v| v.addrs6.iter().find(global)))
            .map(|a| a.addr)
    }
}
