//! The worker's receive side: a port's burst classified and staged in its VRs' pools, or a dedicated port's frames lent to its VR.

use vrhost_io::LentFrame;
use vrhost_packet::FlowKey;

use super::{ARP_REPLIES, BURST, Worker};
use crate::stats::IngressDrop;
use crate::tunnel::{ARP_REPLY_LEN, Decap};
use crate::vrpath::VrPath;

impl Worker {
    /// Take up to `want` frames from port `p`, classify each and stage it in
    /// its VR's pool. Returns frames taken, and whether a VR had no room.
    pub(super) fn rx_burst_to_vrs(&mut self, p: usize, want: usize) -> (usize, bool) {
        let mut full = false;
        let mut frames: [&[u8]; BURST] = [&[]; BURST];
        let n = self.ports[p].rx_burst(&mut frames[..want]);
        self.stats.rx_packets.add(n as u64);
        let tunnels = self.classifier.tunnels();
        // Replies to ARP for a tunnel's local address, sent after the burst.
        let mut arp = [[0u8; ARP_REPLY_LEN]; ARP_REPLIES];
        let mut n_arp = 0;
        for f in &frames[..n] {
            // A tunnel's frame goes to its vNIC, decapsulated.
            if !tunnels.is_empty() {
                if n_arp < ARP_REPLIES && tunnels.arp_reply(p, f, &mut arp[n_arp]) {
                    n_arp += 1;
                    continue;
                }
                match tunnels.decap(p, f) {
                    Decap::NotTunnel => {}
                    Decap::Drop(why) => {
                        self.stats.ingress_drops[why as usize].add(1);
                        continue;
                    }
                    Decap::Inner {
                        vr,
                        vnic,
                        head,
                        body,
                        peer_mac,
                    } => {
                        let Some(path) = self.vrs.get_mut(vr) else {
                            self.stats.ingress_drops[IngressDrop::NoMatch as usize].add(1);
                            continue;
                        };
                        let first = path.staged() == 0;
                        let head = head.as_ref().map_or(&[][..], |h| &h[..]);
                        match path.stage_tunneled(vnic, head, body, peer_mac) {
                            Ok(()) if first => self.staging.push(vr),
                            Ok(()) => self.burst_staged |= path.staged() >= BURST,
                            Err(why) => {
                                full |=
                                    matches!(why, IngressDrop::RingFull | IngressDrop::PoolEmpty);
                                path.stats().drop_in(why, 1);
                            }
                        }
                        continue;
                    }
                }
            }
            // A frame whose IPv4 header is broken can still match a rule on
            // its port, MAC or VLAN; its VR then counts the bad header.
            let Some(key) = FlowKey::extract(f).ok().or_else(|| FlowKey::extract_l2(f)) else {
                self.stats.ingress_drops[IngressDrop::Malformed as usize].add(1);
                continue;
            };
            let Some((vr, vnic)) = self.classifier.classify_frame(p, &key, f) else {
                match crate::cluster::heartbeat::is_heartbeat_frame(f) {
                    true => self.stats.heartbeats.add(1),
                    false => self.stats.ingress_drops[IngressDrop::NoMatch as usize].add(1),
                }
                continue;
            };
            if vr >= self.vrs.len() {
                self.stats.ingress_drops[IngressDrop::NoMatch as usize].add(1);
                continue;
            }
            full |= stage(
                &mut self.vrs[vr],
                &mut self.staging,
                &mut self.burst_staged,
                vr,
                vnic,
                f,
                &key,
            );
        }
        if n_arp > 0 {
            let mut replies: [&[u8]; ARP_REPLIES] = [&[]; ARP_REPLIES];
            for (r, a) in replies.iter_mut().zip(&arp[..n_arp]) {
                *r = a;
            }
            self.ports[p].tx_burst(&replies[..n_arp]);
        }
        (n, full)
    }

    /// Take up to `want` frames from port `p`, dedicated to VR `vr`, and
    /// stage them for it where they lie; hand the port back the frames the
    /// VR released. Returns frames taken, and whether the VR had no room.
    pub(super) fn rx_lent_to_vr(&mut self, p: usize, vr: usize, want: usize) -> (usize, bool) {
        if let Some(path) = self.vrs.get_mut(vr) {
            path.bring_home(p, &mut self.ports);
        }
        let (Some(port), Some(path)) = (self.ports[p].lender(), self.vrs.get_mut(vr)) else {
            return self.rx_burst_to_vrs(p, want);
        };
        path.give_back(p, port);
        let mut lent = [LentFrame::default(); BURST];
        let n = port.rx_lend(&mut lent[..want]);
        self.stats.rx_packets.add(n as u64);
        let mut full = false;
        for l in &lent[..n] {
            let first = path.staged() == 0;
            match path.adopt(p, *l) {
                Ok(()) if first => self.staging.push(vr),
                Ok(()) => self.burst_staged |= path.staged() >= BURST,
                Err(why) => {
                    full |= matches!(why, IngressDrop::RingFull | IngressDrop::PoolEmpty);
                    path.stats().drop_in(why, 1);
                    port.give_back(l.frame);
                }
            }
        }
        (n, full)
    }
}

/// Stage frame `f` (key `key`) for `vnic` of VR `vr` (`path`), recording
/// the VR in `staging` at its first staged frame and in `burst_staged`
/// when it holds a burst. Returns whether the VR had no room (a ring or
/// its pool full); a refusal is counted as the VR's drop.
#[inline(always)]
fn stage(
    path: &mut VrPath,
    staging: &mut Vec<usize>,
    burst_staged: &mut bool,
    vr: usize,
    vnic: u16,
    f: &[u8],
    key: &FlowKey,
) -> bool {
    let first = path.staged() == 0;
    match path.stage_key(vnic, f, key) {
        Ok(()) if first => staging.push(vr),
        Ok(()) => *burst_staged |= path.staged() >= BURST,
        Err(why) => {
            path.stats().drop_in(why, 1);
            return matches!(why, IngressDrop::RingFull | IngressDrop::PoolEmpty);
        }
    }
    false
}
