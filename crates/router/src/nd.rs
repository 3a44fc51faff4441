//! IPv6 neighbour discovery in the router (RFC 4861): answering
//! solicitations for its addresses, learning from solicitations and
//! advertisements, resolving next hops. The states and timers are ARP's
//! (`arp.rs`, `neigh.rs`), on the IPv6 sibling table.
//!
//! Simplifications, each on the side of asking again: there is no STALE
//! state (an unsolicited advertisement with a new MAC updates the MAC and
//! leaves the entry's age alone, so it is confirmed when its reachable
//! time runs out), and an advertisement with Override clear whose MAC
//! differs from the entry's is ignored (RFC 4861 7.2.5 would mark the
//! entry STALE).

use vrhost_packet::MacAddr;
use vrhost_packet::ethernet::{self, EtherType, EthernetFrame, EthernetRepr};
use vrhost_packet::ipv6::{self, Ipv6Packet, Ipv6Repr, next_header};
use vrhost_packet::ndisc::{self, NA_OVERRIDE, NA_ROUTER, NA_SOLICITED, NdPacket, NdRepr};

use super::ipv6::L3;
use super::neigh::{NONE, State};
use super::{Router, counters};
use vrhost_sdk::{DropReason, Packet, Verdict};

/// Length of the solicitations and advertisements the router sends: one
/// link-layer address option each.
const ND_FRAME: usize = L3 + ipv6::HEADER_LEN + ndisc::ND_LEN + ndisc::LL_OPTION_LEN;
/// RFC 4861 7.1: ND messages are sent, and accepted, with hop limit 255
/// only (proof that they come from the link).
const ND_HOP_LIMIT: u8 = 255;

impl Router {
    /// A neighbour solicitation or advertisement (to the router or a group
    /// it is in); `off` is the ICMPv6 header's offset from the IPv6 header.
    #[cold]
    #[inline(never)]
    pub(super) fn nd_in(&mut self, pkt: &mut Packet<'_>, off: usize) -> Verdict {
        let rx = pkt.rx_vnic();
        if usize::from(rx) >= self.vnics.len() {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let d = pkt.data();
        let frame_src = EthernetFrame::new_unchecked(d).src_addr();
        let ip = Ipv6Packet::new_unchecked(&d[L3..]);
        let (src, dst) = (ip.src_u128(), ip.dst_u128());
        // RFC 4861 7.1.1 and 7.1.2: hop limit 255, code 0, a valid
        // checksum, 24 bytes or more, options of non-zero length, a target
        // that is not multicast.
        if ip.hop_limit() != ND_HOP_LIMIT {
            return Verdict::Drop(DropReason::BadHeader);
        }
        let body = &ip.packet()[off..];
        let Ok(nd) = NdPacket::new_checked(body) else {
            return Verdict::Drop(DropReason::BadHeader);
        };
        if body[1] != 0 {
            return Verdict::Drop(DropReason::BadHeader);
        }
        let Ok(r) = NdRepr::parse(&nd, src, dst) else {
            return Verdict::Drop(DropReason::BadChecksum);
        };
        if ipv6::is_multicast(r.target) {
            return Verdict::Drop(DropReason::BadHeader);
        }
        let flags = nd.flags();
        if r.solicit {
            self.ns_in(
                pkt,
                rx,
                src,
                dst,
                r.target,
                r.ll_addr.unwrap_or(frame_src),
                r.ll_addr,
            )
        } else {
            self.na_in(pkt, rx, dst, flags, r.target, r.ll_addr)
        }
    }

    /// A solicitation: learn its sender, answer it if the target is ours.
    #[expect(clippy::too_many_arguments, reason = "the fields of the message")]
    fn ns_in(
        &mut self,
        pkt: &mut Packet<'_>,
        rx: u16,
        src: u128,
        dst: u128,
        target: u128,
        reply_mac: MacAddr,
        sll: Option<MacAddr>,
    ) -> Verdict {
        // RFC 4861 7.1.1: from `::` (duplicate address detection) only to
        // a solicited-node group, and without a source link-layer option.
        if src == ipv6::UNSPECIFIED && (sll.is_some() || !ipv6::is_multicast(dst)) {
            return Verdict::Drop(DropReason::BadHeader);
        }
        let ours = self.vnics[usize::from(rx)]
            .addrs6
            .iter()
            .any(|a| a.addr == target);
        let mut release = None;
        if let Some(mac) = sll
            && mac.is_unicast()
            && mac != MacAddr::ZERO
            && src != ipv6::UNSPECIFIED
        {
            // RFC 4861 7.2.3: a solicitation for us creates or updates the
            // sender's entry; one for another target updates only.
            let slot = if ours {
                self.neigh6.insert(src, rx).map(|(i, discarded)| {
                    self.counters[counters::ND_UNRES_DISCARDS] += discarded;
                    i
                })
            } else {
                self.neigh6.find(src, rx)
            };
            if let Some(i) = slot
                && self.neigh6.get(i).state != State::Static
            {
                self.learn6(i, mac.0, true);
                if self.neigh6.get(i).pending != NONE {
                    release = Some(i);
                }
            }
        }
        if ours {
            return self.advert_into(pkt, rx, target, src, reply_mac);
        }
        if let Some(i) = release {
            return self.release6(pkt, i);
        }
        Verdict::Drop(DropReason::Consumed)
    }

    /// An advertisement: update the entry of its target, if there is one
    /// (RFC 4861 7.2.5: none is created), and release what waited for it.
    fn na_in(
        &mut self,
        pkt: &mut Packet<'_>,
        rx: u16,
        dst: u128,
        flags: u8,
        target: u128,
        tll: Option<MacAddr>,
    ) -> Verdict {
        // RFC 4861 7.1.2: "If the IP Destination Address is a multicast
        // address the Solicited flag is zero."
        if ipv6::is_multicast(dst) && flags & NA_SOLICITED != 0 {
            return Verdict::Drop(DropReason::BadHeader);
        }
        let Some(i) = self.neigh6.find(target, rx) else {
            return Verdict::Drop(DropReason::Consumed);
        };
        let e = *self.neigh6.get(i);
        if e.state == State::Static {
            return Verdict::Drop(DropReason::Consumed);
        }
        let solicited = flags & NA_SOLICITED != 0;
        match tll {
            Some(mac) if !mac.is_unicast() || mac == MacAddr::ZERO => {
                return Verdict::Drop(DropReason::BadHeader);
            }
            Some(mac) if !e.has_mac() || flags & NA_OVERRIDE != 0 || mac.0 == e.mac => {
                self.learn6(i, mac.0, solicited || !e.has_mac());
            }
            // Without a MAC an advertisement confirms the one known.
            None if e.has_mac() && solicited => {
                let mac = e.mac;
                self.learn6(i, mac, true);
            }
            _ => return Verdict::Drop(DropReason::Consumed),
        }
        if self.neigh6.get(i).pending != NONE {
            return self.release6(pkt, i);
        }
        Verdict::Drop(DropReason::Consumed)
    }

    /// Neighbour `i` is at `mac`; `confirmed`: reachable from now on (else
    /// the MAC only changes, the entry's age stays).
    fn learn6(&mut self, i: usize, mac: [u8; 6], confirmed: bool) {
        let now = self.now();
        let e = self.neigh6.get_mut(i);
        e.mac = mac;
        if confirmed || !e.has_mac() {
            e.state = State::Reachable;
            e.since = now;
            e.probes = 0;
        }
        self.counters[counters::ND_LEARNED] += 1;
    }

    /// Rewrite `pkt`'s slot into the advertisement of `target` (ours, on
    /// `vnic`) answering a solicitation from `to` (`::`: to all nodes).
    fn advert_into(
        &mut self,
        pkt: &mut Packet<'_>,
        vnic: u16,
        target: u128,
        to: u128,
        mac: MacAddr,
    ) -> Verdict {
        // RFC 4861 7.2.4: to the solicitation's source, Solicited set;
        // to all-nodes, Solicited clear, if that was `::`. Override set:
        // the target is ours, not an anycast address.
        let (dst, dst_mac, flags) = if to == ipv6::UNSPECIFIED {
            (
                ipv6::ALL_NODES,
                ipv6::multicast_mac(ipv6::ALL_NODES),
                NA_ROUTER | NA_OVERRIDE,
            )
        } else {
            (to, mac, NA_ROUTER | NA_SOLICITED | NA_OVERRIDE)
        };
        let own_mac = MacAddr(self.vnics[usize::from(vnic)].mac);
        if !self.nd_frame(pkt, vnic, dst_mac, target, dst) {
            return Verdict::Drop(DropReason::Other);
        }
        NdRepr {
            solicit: false,
            flags,
            target,
            ll_addr: Some(own_mac),
        }
        .emit(&mut pkt.data_mut()[L3 + ipv6::HEADER_LEN..], target, dst);
        self.counters[counters::ND_ADVERTS] += 1;
        Verdict::Forward(vnic)
    }

    /// Size `pkt`'s slot for an ND message and write its Ethernet and IPv6
    /// headers; false if the slot cannot hold it.
    fn nd_frame(
        &self,
        pkt: &mut Packet<'_>,
        vnic: u16,
        dst_mac: MacAddr,
        src: u128,
        dst: u128,
    ) -> bool {
        let off = pkt.offset();
        if !pkt.set_extent(off, ND_FRAME) && !pkt.set_extent(0, ND_FRAME) {
            return false;
        }
        let d = pkt.data_mut();
        EthernetRepr {
            dst: dst_mac,
            src: MacAddr(self.vnics[usize::from(vnic)].mac),
            vlan_tci: None,
            ethertype: EtherType::IPV6,
        }
        .emit(d);
        Ipv6Repr {
            src: src.into(),
            dst: dst.into(),
            next_header: next_header::ICMPV6,
            hop_limit: ND_HOP_LIMIT,
            payload_len: (ND_FRAME - L3 - ipv6::HEADER_LEN) as u16,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut d[ethernet::HEADER_LEN..]);
        true
    }

    /// Put the packet waiting for neighbour `i` (now resolved) in `pkt`'s
    /// slot, MAC addresses set.
    fn release6(&mut self, pkt: &mut Packet<'_>, i: usize) -> Verdict {
        let src = self.vnics[usize::from(self.neigh6.get(i).vnic)].mac;
        let r = self.neigh6.release_into(i, pkt, src);
        self.count_release(r, counters::ND_RELEASED, counters::ND_UNRES_DISCARDS)
    }

    /// Rewrite `pkt`'s slot into a solicitation for `target` out of
    /// `vnic`, to its solicited-node group (RFC 4861 7.2.2), from the
    /// vNIC's address in `target`'s subnet (else a link-local one for a
    /// link-local target, else as errors choose).
    pub(super) fn solicit_into(
        &mut self,
        pkt: &mut Packet<'_>,
        vnic: u16,
        target: u128,
    ) -> Verdict {
        let v = &self.vnics[usize::from(vnic)];
        let src = v
            .addrs6
            .iter()
            .find(|a| a.contains(target) && !ipv6::is_link_local(a.addr))
            .or_else(|| {
                v.addrs6
                    .iter()
                    .find(|a| ipv6::is_link_local(a.addr) && ipv6::is_link_local(target))
            })
            .map(|a| a.addr)
            .or_else(|| self.source_addr6(vnic, target));
        let Some(src) = src else {
            return Verdict::Drop(DropReason::ArpUnresolved);
        };
        let group = ipv6::solicited_node(target);
        let own_mac = MacAddr(v.mac);
        if !self.nd_frame(pkt, vnic, ipv6::multicast_mac(group), src, group) {
            return Verdict::Drop(DropReason::Other);
        }
        NdRepr {
            solicit: true,
            flags: 0,
            target,
            ll_addr: Some(own_mac),
        }
        .emit(&mut pkt.data_mut()[L3 + ipv6::HEADER_LEN..], src, group);
        self.counters[counters::ND_SOLICITS] += 1;
        Verdict::Forward(vnic)
    }
}
