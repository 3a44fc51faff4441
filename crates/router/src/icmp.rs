//! ICMP in the router: echo replies and errors, written in place of the
//! packet (see the module docs of [`super`] for the behaviour).

use vrhost_packet::MacAddr;
use vrhost_packet::ethernet::{self, EtherType, EthernetFrame, EthernetRepr};
use vrhost_packet::icmp::{self, Icmpv4Packet, Icmpv4Repr, msg};
use vrhost_packet::ipv4::{self, Ipv4Packet, Ipv4Repr, proto};

use super::{Hop, Router, counters};
use vrhost_sdk::{DropReason, Packet, Verdict};

/// TTL of what the router sends (Linux's `ip_default_ttl`).
const TTL: u8 = 64;
/// Room an error needs before the quoted header: IPv4 and ICMP headers.
const ERROR_GROWTH: usize = ipv4::HEADER_LEN + icmp::HEADER_LEN;
/// Bytes of data quoted after the IP header (RFC 792: 64 bits).
const QUOTED_DATA: usize = 8;
/// DSCP of errors: class selector 6, "internetwork control" (Linux's
/// `IPTOS_PREC_INTERNETCONTROL`).
const DSCP_CONTROL: u8 = 0x30;

/// A token bucket in thousandths of a token: `rate` tokens per second,
/// at most `burst` saved.
#[derive(Debug, Clone, Copy)]
pub(super) struct TokenBucket {
    milli: u64,
    cap: u64,
    rate: u64,
    last: u64,
}

impl TokenBucket {
    /// Full at first.
    pub fn new(rate: u32, burst: u32) -> Self {
        let cap = u64::from(burst) * 1000;
        Self {
            milli: cap,
            cap,
            rate: u64::from(rate),
            last: 0,
        }
    }

    /// Take a token at `now` (milliseconds); false if none is left.
    pub fn take(&mut self, now: u64) -> bool {
        let elapsed = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        // One millisecond adds `rate` thousandths.
        self.milli = self
            .milli
            .saturating_add(elapsed.saturating_mul(self.rate))
            .min(self.cap);
        if self.milli < 1000 {
            return false;
        }
        self.milli -= 1000;
        true
    }
}

impl Router {
    /// ICMP time exceeded in place of `pkt`, or a drop.
    #[cold]
    #[inline(never)]
    pub(super) fn time_exceeded(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        self.icmp_error(
            pkt,
            msg::TIME_EXCEEDED,
            icmp::time_exceeded::TTL,
            DropReason::TtlExpired,
            counters::ICMP_TIME_EXCEEDED,
        )
    }

    /// ICMP net unreachable in place of `pkt`, or a drop.
    #[cold]
    #[inline(never)]
    pub(super) fn net_unreachable(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        self.icmp_error(
            pkt,
            msg::DST_UNREACHABLE,
            icmp::unreachable::NET,
            DropReason::NoRoute,
            counters::ICMP_NET_UNREACHABLE,
        )
    }

    /// ICMP host unreachable in place of `pkt`, or a drop.
    #[cold]
    #[inline(never)]
    pub(super) fn host_unreachable(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        self.icmp_error(
            pkt,
            msg::DST_UNREACHABLE,
            icmp::unreachable::HOST,
            DropReason::HostUnreachable,
            counters::ICMP_HOST_UNREACHABLE,
        )
    }

    /// Rewrite `pkt` (a checked IPv4 frame) into an ICMP error about it, to
    /// its source; `Drop(otherwise)` when no error may or can be sent.
    fn icmp_error(
        &mut self,
        pkt: &mut Packet<'_>,
        msg_type: u8,
        code: u8,
        otherwise: DropReason,
        counter: usize,
    ) -> Verdict {
        let d = pkt.data();
        let frame_src = EthernetFrame::new_unchecked(d).src_addr();
        let ip = Ipv4Packet::new_unchecked(&d[ethernet::HEADER_LEN..]);
        // Never about a fragment other than the first, nor about an ICMP
        // error (RFC 1812 4.3.2.7); ingress already refused group
        // destinations and impossible sources.
        if ip.frag_offset() != 0 {
            return Verdict::Drop(otherwise);
        }
        if ip.protocol() == proto::ICMP && ip.payload().first().is_none_or(|&t| icmp::is_error(t)) {
            return Verdict::Drop(otherwise);
        }
        let src = ip.src_u32();
        let hl = ip.header_len();
        let quote = hl + QUOTED_DATA.min(usize::from(ip.total_len()) - hl);
        if self.is_ours(src) {
            return Verdict::Drop(otherwise);
        }
        let Some((out, mac)) = self.way_back(src, pkt.rx_vnic(), frame_src) else {
            return Verdict::Drop(otherwise);
        };
        let Some(from) = self.source_addr(out, src) else {
            return Verdict::Drop(otherwise);
        };
        let now = self.now();
        if !self.bucket.take(now) {
            self.counters[counters::ICMP_RATE_LIMITED] += 1;
            return Verdict::Drop(otherwise);
        }
        // [eth][IP][rest] becomes [eth][IP'][ICMP][IP + 8 bytes of rest].
        if !make_room_for_error(pkt, ERROR_GROWTH, quote) {
            return Verdict::Drop(otherwise);
        }
        let d = pkt.data_mut();
        self.emit_ip_eth(
            d,
            out,
            mac,
            from,
            src,
            DSCP_CONTROL,
            0,
            icmp::HEADER_LEN + quote,
        );
        Icmpv4Repr {
            msg_type,
            code,
            rest_of_header: 0,
        }
        .emit(&mut d[ethernet::HEADER_LEN + ipv4::HEADER_LEN..]);
        self.counters[counter] += 1;
        Verdict::Forward(out)
    }

    /// A packet to one of the router's addresses: answer an echo request,
    /// drop anything else (no local delivery yet).
    #[cold]
    #[inline(never)]
    pub(super) fn local_in(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        let d = pkt.data();
        let frame_src = EthernetFrame::new_unchecked(d).src_addr();
        let ip = Ipv4Packet::new_unchecked(&d[ethernet::HEADER_LEN..]);
        if ip.protocol() != proto::ICMP || ip.is_fragment() {
            return Verdict::Drop(DropReason::LocalUnsupported);
        }
        let Ok(req) = Icmpv4Packet::new_checked(ip.payload()) else {
            return Verdict::Drop(DropReason::BadHeader);
        };
        if req.msg_type() != msg::ECHO_REQUEST {
            return Verdict::Drop(DropReason::LocalUnsupported);
        }
        if !req.verify_checksum() {
            return Verdict::Drop(DropReason::BadChecksum);
        }
        let (src, dst) = (ip.src_u32(), ip.dst_u32());
        let (hl, icmp_len, dscp, ident) = (
            ip.header_len(),
            req.into_inner().len(),
            ip.dscp(),
            ip.ident(),
        );
        let Some((out, mac)) = self.way_back(src, pkt.rx_vnic(), frame_src) else {
            return Verdict::Drop(DropReason::NoRoute);
        };
        let d = pkt.data_mut();
        let at = ethernet::HEADER_LEN + ipv4::HEADER_LEN;
        if hl > ipv4::HEADER_LEN {
            // The reply carries no options: the message moves up.
            let from = ethernet::HEADER_LEN + hl;
            d.copy_within(from..from + icmp_len, at);
        }
        Icmpv4Packet::new_unchecked(&mut d[at..at + icmp_len])
            .set_type_code_update_checksum(msg::ECHO_REPLY, 0);
        self.emit_ip_eth(d, out, mac, dst, src, dscp, ident, icmp_len);
        pkt.set_len(at + icmp_len);
        self.counters[counters::ICMP_ECHO_REPLIES] += 1;
        Verdict::Forward(out)
    }

    /// Write the Ethernet and IPv4 headers of an ICMP message the router
    /// sends: `from` -> `to`, `payload` bytes of ICMP, out of `out` to `mac`.
    #[expect(clippy::too_many_arguments, reason = "the fields of two headers")]
    fn emit_ip_eth(
        &self,
        d: &mut [u8],
        out: u16,
        mac: MacAddr,
        from: u32,
        to: u32,
        dscp: u8,
        ident: u16,
        payload: usize,
    ) {
        EthernetRepr {
            dst: mac,
            src: MacAddr(self.vnics[usize::from(out)].mac),
            vlan_tci: None,
            ethertype: EtherType::IPV4,
        }
        .emit(d);
        Ipv4Repr {
            src: from.into(),
            dst: to.into(),
            protocol: proto::ICMP,
            ttl: TTL,
            // At most an IPv4 packet: fits.
            payload_len: payload as u16,
            dscp,
            ecn: 0,
            ident,
            dont_frag: false,
        }
        .emit(&mut d[ethernet::HEADER_LEN..]);
    }

    /// The vNIC and next-hop MAC toward `to`, by the route back: on the
    /// vNIC the packet came in by (`rx`), the frame's source (`frame_src`,
    /// the previous hop, so no ARP is needed); elsewhere, a next hop whose
    /// MAC is known. `None` without a route or a known MAC.
    fn way_back(&self, to: u32, rx: u16, frame_src: MacAddr) -> Option<(u16, MacAddr)> {
        let hop = *self.hops.get(self.fib.lookup(to)? as usize)?;
        let (vnic, known) = match hop {
            Hop::Static { vnic, dst, .. } => (vnic, Some(dst)),
            Hop::Gateway { vnic, neigh } => (vnic, self.neigh.known_mac(neigh as usize)),
            Hop::Connected { vnic } => (vnic, self.neigh.known_mac_of(to, vnic)),
            Hop::Local | Hop::Broadcast => return None,
            Hop::Gateway6 { .. } | Hop::Connected6 { .. } | Hop::Local6 => return None,
        };
        back_over(vnic, known, rx, frame_src)
    }

    /// The source address of what the router sends out of `out` to `to`:
    /// the vNIC's address in `to`'s subnet, else its first, else the
    /// router's first.
    fn source_addr(&self, out: u16, to: u32) -> Option<u32> {
        let v = self.vnics.get(usize::from(out))?;
        v.addrs
            .iter()
            .find(|a| a.contains(to))
            .or(v.addrs.first())
            .or_else(|| self.vnics.iter().find_map(|v| v.addrs.first()))
            .map(|a| a.addr)
    }
}

/// Make room for an error's headers (`growth` bytes) between the Ethernet
/// header of `pkt` and the first `quote` bytes of its IP packet, which then
/// end it: [eth][IP ...] becomes [eth][`growth`][IP ... quoted]. With
/// headroom the quote stays where it is; without, it moves back. False if
/// the slot is too small.
pub(super) fn make_room_for_error(pkt: &mut Packet<'_>, growth: usize, quote: usize) -> bool {
    let len = ethernet::HEADER_LEN + growth + quote;
    if pkt.push_front(growth).is_some() {
        pkt.set_len(len);
    } else {
        let keep = pkt.len();
        if !pkt.set_len(keep.max(len)) {
            return false;
        }
        let at = ethernet::HEADER_LEN;
        pkt.data_mut().copy_within(at..at + quote, at + growth);
        pkt.set_len(len);
    }
    true
}

/// The way back out of `vnic`, whose next hop's MAC is `known`: on the
/// vNIC the packet came in by (`rx`), the frame's source (`frame_src`, the
/// previous hop, so no ARP or ND is needed); elsewhere the known MAC.
pub(super) fn back_over(
    vnic: u16,
    known: Option<[u8; 6]>,
    rx: u16,
    frame_src: MacAddr,
) -> Option<(u16, MacAddr)> {
    if vnic == rx && frame_src.is_unicast() {
        return Some((vnic, frame_src));
    }
    known.map(|m| (vnic, MacAddr(m)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket() {
        let mut b = TokenBucket::new(100, 10);
        let t0 = 5_000_000;
        assert_eq!((0..20).filter(|_| b.take(t0)).count(), 10);
        // 100/s: one every 10 ms.
        assert!(!b.take(t0 + 9));
        assert!(b.take(t0 + 10));
        assert!(!b.take(t0 + 10));
        assert_eq!((0..20).filter(|_| b.take(t0 + 60)).count(), 5);
        // A long pause refills the burst only.
        assert_eq!((0..20).filter(|_| b.take(t0 + 100_000)).count(), 10);
        // The clock going back does not mint tokens.
        assert!(!b.take(t0));
        let mut none = TokenBucket::new(0, 0);
        assert!(!none.take(u64::MAX));
    }
}
