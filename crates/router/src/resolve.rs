//! Resolving a next hop's MAC address: one state machine for ARP (IPv4)
//! and neighbour discovery (IPv6). The timers, the retries, giving up
//! (RFC 1122 2.3.2.1, RFC 4861 7.3.3) and the one packet kept per
//! neighbour are the same for both; a [`Resolver`] supplies what differs:
//! the table, the probe (an ARP request or a neighbour solicitation), the
//! error to the source and the counters.

use vrhost_packet::ethernet;
use vrhost_packet::ipv4::Ipv4Packet;

use super::ipv6::L3;
use super::neigh::{NONE, NeighAddr, NeighTable, State};
use super::{Router, counters};
use vrhost_sdk::{DropReason, Packet, Verdict};

/// What ARP and neighbour discovery do differently while resolving.
pub(super) trait Resolver {
    /// The address family's address.
    type Addr: NeighAddr;
    /// Counter of waiting packets discarded.
    const UNRES_DISCARDS: usize;
    /// Counter of resolutions given up.
    const FAILED: usize;

    /// The family's neighbour table.
    fn table(r: &mut Router) -> &mut NeighTable<Self::Addr>;
    /// Forward `pkt` to `mac` out of `vnic` (TTL or hop limit, MACs).
    fn send(r: &mut Router, pkt: &mut Packet<'_>, vnic: u16, mac: [u8; 6]) -> Verdict;
    /// Lower the TTL or hop limit of a frame about to be kept: it leaves
    /// when its neighbour answers.
    fn age(frame: &mut [u8]);
    /// Rewrite `pkt`'s slot into a probe for `target` out of `vnic`.
    fn probe_into(r: &mut Router, pkt: &mut Packet<'_>, vnic: u16, target: Self::Addr) -> Verdict;
    /// The error to the source of a packet whose neighbour failed.
    fn unreachable(r: &mut Router, pkt: &mut Packet<'_>) -> Verdict;
    /// The verdict on the slot of a packet kept while a probe is out.
    fn kept(r: &mut Router, pkt: &mut Packet<'_>) -> Verdict;
}

/// IPv4 next hops, by ARP.
pub(super) struct Arp;

/// IPv6 next hops, by neighbour discovery.
pub(super) struct Nd;

impl Resolver for Arp {
    type Addr = u32;
    const UNRES_DISCARDS: usize = counters::ARP_UNRES_DISCARDS;
    const FAILED: usize = counters::ARP_FAILED;

    fn table(r: &mut Router) -> &mut NeighTable<u32> {
        &mut r.neigh
    }
    fn send(r: &mut Router, pkt: &mut Packet<'_>, vnic: u16, mac: [u8; 6]) -> Verdict {
        r.send_to(pkt, vnic, mac)
    }
    fn age(frame: &mut [u8]) {
        Ipv4Packet::new_unchecked(&mut frame[ethernet::HEADER_LEN..]).decrement_ttl();
    }
    fn probe_into(r: &mut Router, pkt: &mut Packet<'_>, vnic: u16, target: u32) -> Verdict {
        r.request_into(pkt, vnic, target)
    }
    /// RFC 1122 2.3.2.1: an ICMP host unreachable.
    fn unreachable(r: &mut Router, pkt: &mut Packet<'_>) -> Verdict {
        r.host_unreachable(pkt)
    }
    /// The slot may carry a packet a peer's message released.
    fn kept(r: &mut Router, pkt: &mut Packet<'_>) -> Verdict {
        r.consumed(pkt)
    }
}

impl Resolver for Nd {
    type Addr = u128;
    const UNRES_DISCARDS: usize = counters::ND_UNRES_DISCARDS;
    const FAILED: usize = counters::ND_FAILED;

    fn table(r: &mut Router) -> &mut NeighTable<u128> {
        &mut r.neigh6
    }
    fn send(r: &mut Router, pkt: &mut Packet<'_>, vnic: u16, mac: [u8; 6]) -> Verdict {
        r.send6(pkt, vnic, mac)
    }
    fn age(frame: &mut [u8]) {
        frame[L3 + 7] = frame[L3 + 7].saturating_sub(1);
    }
    fn probe_into(r: &mut Router, pkt: &mut Packet<'_>, vnic: u16, target: u128) -> Verdict {
        r.solicit_into(pkt, vnic, target)
    }
    /// RFC 4443 3.1: an ICMPv6 address unreachable.
    fn unreachable(r: &mut Router, pkt: &mut Packet<'_>) -> Verdict {
        r.addr_unreachable6(pkt)
    }
    /// No peer messages for IPv6: nothing to put in the slot.
    fn kept(_: &mut Router, _: &mut Packet<'_>) -> Verdict {
        Verdict::Drop(DropReason::Consumed)
    }
}

impl Router {
    /// Forward `pkt` to neighbour `i` out of `vnic`: to its MAC while that
    /// is static or fresh, else through [`resolve`](Self::resolve).
    #[inline]
    pub(super) fn send_to_neighbour<F: Resolver>(
        &mut self,
        pkt: &mut Packet<'_>,
        vnic: u16,
        i: usize,
    ) -> Verdict {
        let e = *F::table(self).get(i);
        match e.state {
            State::Static => F::send(self, pkt, vnic, e.mac),
            State::Reachable if self.now().saturating_sub(e.since) < self.timers.reachable_ms => {
                F::send(self, pkt, vnic, e.mac)
            }
            _ => self.resolve::<F>(pkt, vnic, i),
        }
    }

    /// A packet to neighbour `i` (out of `vnic`) that has no usable MAC:
    /// start, continue or give up resolving it.
    #[cold]
    #[inline(never)]
    pub(super) fn resolve<F: Resolver>(
        &mut self,
        pkt: &mut Packet<'_>,
        vnic: u16,
        i: usize,
    ) -> Verdict {
        let now = self.now();
        let t = self.timers;
        let e = *F::table(self).get(i);
        let due = now.saturating_sub(e.since) >= t.retrans_ms;
        match e.state {
            State::Static => F::send(self, pkt, vnic, e.mac),
            State::Reachable => {
                // Reachable time over: confirm with a probe, in this
                // packet's slot, while later packets go to the known MAC.
                // A packet left waiting (learned from a request while one
                // waited for the reply) is stale by now.
                self.discard_waiting::<F>(i);
                if !F::table(self).can_park(pkt.len()) {
                    // Nowhere to keep it: send it, confirm with a later one.
                    return F::send(self, pkt, vnic, e.mac);
                }
                self.park::<F>(pkt, i);
                Self::start::<F>(F::table(self), i, State::Probe, now);
                F::probe_into(self, pkt, vnic, e.ip)
            }
            State::Probe if !due => F::send(self, pkt, vnic, e.mac),
            State::Failed if now.saturating_sub(e.since) < t.failed_ms => F::unreachable(self, pkt),
            State::Incomplete if !due => {
                if e.pending == NONE && F::table(self).can_park(pkt.len()) {
                    self.park::<F>(pkt, i);
                    return F::kept(self, pkt);
                }
                Verdict::Drop(DropReason::ArpUnresolved)
            }
            State::Incomplete | State::Probe if e.probes >= t.probes => {
                // Give up, with an error to the source.
                self.discard_waiting::<F>(i);
                let n = F::table(self).get_mut(i);
                n.state = State::Failed;
                n.since = now;
                self.counters[F::FAILED] += 1;
                F::unreachable(self, pkt)
            }
            State::Incomplete | State::Probe => {
                // Retry in this packet's slot; it takes the older one's
                // place in the pending buffer (Linux drops the oldest too).
                self.discard_waiting::<F>(i);
                self.park::<F>(pkt, i);
                let n = F::table(self).get_mut(i);
                n.probes += 1;
                n.since = now;
                F::probe_into(self, pkt, vnic, e.ip)
            }
            State::Empty | State::Failed | State::Unused => {
                self.park::<F>(pkt, i);
                Self::start::<F>(F::table(self), i, State::Incomplete, now);
                F::probe_into(self, pkt, vnic, e.ip)
            }
        }
    }

    /// A resolution begins: one probe sent now.
    fn start<F: Resolver>(table: &mut NeighTable<F::Addr>, i: usize, state: State, now: u64) {
        let e = table.get_mut(i);
        e.state = state;
        e.probes = 1;
        e.since = now;
    }

    /// Drop the packet waiting for neighbour `i`, if any, counted.
    fn discard_waiting<F: Resolver>(&mut self, i: usize) {
        if F::table(self).drop_pending(i) {
            self.counters[F::UNRES_DISCARDS] += 1;
        }
    }

    /// Keep the packet for neighbour `i` (aged, as it will leave); counted
    /// as discarded if it cannot be kept.
    fn park<F: Resolver>(&mut self, pkt: &mut Packet<'_>, i: usize) {
        if !F::table(self).can_park(pkt.len()) {
            self.counters[F::UNRES_DISCARDS] += 1;
            return;
        }
        let d = pkt.data_mut();
        F::age(d);
        F::table(self).park(i, d);
    }
}
