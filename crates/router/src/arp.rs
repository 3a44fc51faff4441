//! ARP in the router: answering, learning, resolving next hops (see the
//! module docs of [`super`] for the behaviour).

use vrhost_packet::arp::{ArpOperation, ArpPacket, ArpRepr};
use vrhost_packet::ethernet::{self, EtherType, EthernetRepr};
use vrhost_packet::{MacAddr, ParseError};

use super::neigh::{NONE, Release, State};
use super::{Router, counters};
use vrhost_sdk::{DropReason, Packet, Verdict};

/// Length of an ARP frame as the router sends it (no padding: the port
/// pads to the minimum size, as Linux leaves it to the driver).
const ARP_FRAME: usize = ethernet::HEADER_LEN + vrhost_packet::arp::PACKET_LEN;

impl Router {
    /// An ARP frame arrived: answer a request for one of the vNIC's
    /// addresses, learn the sender, release a packet waiting for it.
    #[cold]
    #[inline(never)]
    pub(super) fn arp_in(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        let rx = pkt.rx_vnic();
        let Some(vnic) = self.vnics.get(usize::from(rx)) else {
            return Verdict::Drop(DropReason::Unsupported);
        };
        let arp = match ArpPacket::new_checked(&pkt.data()[ethernet::HEADER_LEN..]) {
            Ok(a) => a,
            Err(ParseError::Unsupported) => return Verdict::Drop(DropReason::Unsupported),
            Err(_) => return Verdict::Drop(DropReason::BadHeader),
        };
        let op = arp.operation();
        if let ArpOperation::Unknown(_) = op {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let sha = arp.sender_hardware_addr();
        if !sha.is_unicast() || sha == MacAddr::ZERO {
            return Verdict::Drop(DropReason::BadHeader);
        }
        let (spa, tpa) = (arp.sender_protocol_u32(), arp.target_protocol_u32());
        let our_mac = MacAddr(vnic.mac);
        let for_us = op == ArpOperation::Request && vnic.addrs.iter().any(|a| a.addr == tpa);
        let on_link = vnic.addrs.iter().any(|a| a.contains(spa));
        // A reply to our MAC answers a request of ours, maybe another
        // instance's (the host's balancer picks by MAC, not by asker).
        let solicited = op == ArpOperation::Reply && arp.target_hardware_addr() == our_mac;
        // Learn from a sender that may be a neighbour: not 0.0.0.0 (an
        // RFC 5227 probe), no group address, none of ours.
        let mut release = None;
        if spa.wrapping_sub(1) < 0xdfff_ffff && !self.is_ours(spa) {
            let slot = if for_us && on_link {
                self.neigh.insert(spa, rx).map(|(i, discarded)| {
                    self.counters[counters::ARP_UNRES_DISCARDS] += discarded;
                    i
                })
            } else {
                self.neigh.find(spa, rx)
            };
            match slot {
                Some(i) if self.neigh.get(i).state != State::Static => {
                    let new_mac = self.learn(i, sha.0);
                    self.counters[counters::ARP_LEARNED] += 1;
                    // Peers hear of a new MAC, and of every answer to a
                    // request (theirs, perhaps); not of the neighbour's
                    // own requests repeating what they know.
                    if new_mac || solicited {
                        self.tell(rx, spa, sha.0);
                    }
                    if self.neigh.get(i).pending != NONE {
                        release = Some(i);
                    }
                }
                None if solicited => self.tell(rx, spa, sha.0),
                _ => {}
            }
        }
        if for_us {
            // RFC 826: swap sender and target, our MAC as sender, op reply.
            let reply = ArpRepr {
                operation: ArpOperation::Reply,
                sender_hardware_addr: our_mac,
                sender_protocol_addr: tpa.into(),
                target_hardware_addr: sha,
                target_protocol_addr: spa.into(),
            };
            let off = pkt.offset();
            if !pkt.set_extent(off, ARP_FRAME) && !pkt.set_extent(0, ARP_FRAME) {
                return Verdict::Drop(DropReason::Other);
            }
            let d = pkt.data_mut();
            EthernetRepr {
                dst: sha,
                src: our_mac,
                vlan_tci: None,
                ethertype: EtherType::ARP,
            }
            .emit(d);
            reply.emit(&mut d[ethernet::HEADER_LEN..]);
            self.counters[counters::ARP_REPLIES] += 1;
            return Verdict::Forward(rx);
        }
        if let Some(i) = release {
            return self.release(pkt, i);
        }
        self.consumed(pkt)
    }

    /// Whether `ip` is one of the router's addresses or subnet broadcasts.
    pub(super) fn is_ours(&self, ip: u32) -> bool {
        self.vnics.iter().any(|v| {
            v.addrs
                .iter()
                .any(|a| a.addr == ip || (a.len <= 30 && a.broadcast() == ip))
        })
    }

    /// Neighbour `i` confirmed at `mac` now (from ARP, or from a peer that
    /// saw it): reachable, probes reset. Returns whether the MAC is new
    /// (the entry had none, or another).
    pub(super) fn learn(&mut self, i: usize, mac: [u8; 6]) -> bool {
        let now = self.now();
        let e = self.neigh.get_mut(i);
        let new_mac = !e.has_mac() || e.mac != mac;
        e.mac = mac;
        e.state = State::Reachable;
        e.since = now;
        e.probes = 0;
        new_mac
    }

    /// Put the packet waiting for neighbour `i` (now resolved) in `pkt`'s
    /// slot, MAC addresses set.
    pub(super) fn release(&mut self, pkt: &mut Packet<'_>, i: usize) -> Verdict {
        let src = self.vnics[usize::from(self.neigh.get(i).vnic)].mac;
        let r = self.neigh.release_into(i, pkt, src);
        self.count_release(r, counters::ARP_RELEASED, counters::ARP_UNRES_DISCARDS)
    }

    /// The verdict on a [`Release`] of a waiting packet (ARP's or ND's),
    /// counted in `released` or `discarded`.
    pub(super) fn count_release(
        &mut self,
        r: Release,
        released: usize,
        discarded: usize,
    ) -> Verdict {
        match r {
            Release::Out(vnic) => {
                self.counters[released] += 1;
                Verdict::Forward(vnic)
            }
            Release::NoneWaiting => Verdict::Drop(DropReason::Consumed),
            Release::Discarded => {
                self.counters[discarded] += 1;
                Verdict::Drop(DropReason::Consumed)
            }
        }
    }

    /// Rewrite `pkt`'s slot into a broadcast request for `target` out of
    /// `vnic`, from the vNIC's address in `target`'s subnet (else its
    /// first, else 0.0.0.0).
    pub(super) fn request_into(&mut self, pkt: &mut Packet<'_>, vnic: u16, target: u32) -> Verdict {
        let v = &self.vnics[usize::from(vnic)];
        let spa = v
            .addrs
            .iter()
            .find(|a| a.contains(target))
            .or(v.addrs.first())
            .map_or(0, |a| a.addr);
        let mac = MacAddr(v.mac);
        let off = pkt.offset();
        if !pkt.set_extent(off, ARP_FRAME) && !pkt.set_extent(0, ARP_FRAME) {
            return Verdict::Drop(DropReason::Other);
        }
        let d = pkt.data_mut();
        EthernetRepr {
            dst: MacAddr::BROADCAST,
            src: mac,
            vlan_tci: None,
            ethertype: EtherType::ARP,
        }
        .emit(d);
        ArpRepr {
            operation: ArpOperation::Request,
            sender_hardware_addr: mac,
            sender_protocol_addr: spa.into(),
            target_hardware_addr: MacAddr::ZERO,
            target_protocol_addr: target.into(),
        }
        .emit(&mut d[ethernet::HEADER_LEN..]);
        self.counters[counters::ARP_REQUESTS] += 1;
        Verdict::Forward(vnic)
    }
}
