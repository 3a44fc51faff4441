//! Neighbours shared among the instances of the router (see the module
//! docs of [`super`], "Instances", for the behaviour).
//!
//! The host's balancer hands an ARP reply to whichever instance its hash
//! picks, not always the instance that asked. So an instance that
//! learns a neighbour's MAC from ARP tells its peers
//! ([`crate::peer`], through [`Vr::peers`](vrhost_sdk::Vr::peers)), and an
//! instance told installs it as if the reply had come to it.
//!
//! # Wire format
//!
//! One [`NeighMsg`] per peer message, [`MSG_LEN`] bytes, network order:
//!
//! ```text
//! byte 0      kind and version: NEIGH_V1 (0x01); another layout takes
//!             another value
//! bytes 1..3  vNIC
//! bytes 3..7  IPv4 address
//! bytes 7..13 MAC address
//! ```
//!
//! A peer is another process of the same tenant: its bytes are untrusted.
//! A message of another length or kind, for a vNIC the router does not
//! have, for an address no neighbour may have (0.0.0.0, group, broadcast,
//! one of the router's own) or with a group or zero MAC is counted
//! ([`counters::PEER_NEIGH_BAD`]) and ignored; nothing here can panic.
//!
//! # Capacity
//!
//! Messages wait to be sent in a queue of [`TELL_MAX`] (one per
//! neighbour: a newer MAC for the same neighbour replaces the queued one);
//! a message that finds it full is counted ([`counters::PEER_NEIGH_UNSENT`])
//! and lost, and the peer that needed it asks again. At most [`RECV_MAX`]
//! messages are read per round. Packets released by a peer's message wait
//! for a free slot in a list as long as the pending pool.

use std::collections::VecDeque;

use vrhost_packet::MacAddr;

use super::neigh::NONE;
use super::{Router, counters};
use vrhost_sdk::peer::{MAX_PAYLOAD, PeerDest, PeerError, Peers};
use vrhost_sdk::{DropReason, Packet, Verdict};

/// Kind and version of a neighbour message.
pub(super) const NEIGH_V1: u8 = 0x01;

/// Length of a neighbour message.
pub(super) const MSG_LEN: usize = 13;
const _: () = assert!(MSG_LEN <= MAX_PAYLOAD);

/// Neighbour messages waiting to be sent, at most.
pub(super) const TELL_MAX: usize = 64;

/// Messages read per round, at most (a full control ring of the default
/// size); the rest wait for the next round.
pub(super) const RECV_MAX: usize = 64;

/// Byte ranges of a neighbour message.
mod field {
    use std::ops::Range;

    /// Kind and version.
    pub const KIND: usize = 0;
    /// vNIC.
    pub const VNIC: Range<usize> = 1..3;
    /// IPv4 address.
    pub const IP: Range<usize> = 3..7;
    /// MAC address.
    pub const MAC: Range<usize> = 7..13;
}

/// A neighbour learned from ARP: `ip` on `vnic` is at `mac`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NeighMsg {
    /// The vNIC it was learned on.
    pub vnic: u16,
    /// Its address.
    pub ip: u32,
    /// Its MAC address.
    pub mac: [u8; 6],
}

impl NeighMsg {
    /// Read a message: `None` unless `b` is exactly [`MSG_LEN`] bytes of
    /// kind [`NEIGH_V1`]. The fields are not checked against the router.
    pub fn parse(b: &[u8]) -> Option<Self> {
        let b: &[u8; MSG_LEN] = b.try_into().ok()?;
        if b[field::KIND] != NEIGH_V1 {
            return None;
        }
        let mut vnic = [0; 2];
        vnic.copy_from_slice(&b[field::VNIC]);
        let mut ip = [0; 4];
        ip.copy_from_slice(&b[field::IP]);
        let mut mac = [0; 6];
        mac.copy_from_slice(&b[field::MAC]);
        Some(Self {
            vnic: u16::from_be_bytes(vnic),
            ip: u32::from_be_bytes(ip),
            mac,
        })
    }

    /// The message's bytes.
    pub fn emit(&self) -> [u8; MSG_LEN] {
        let mut b = [0; MSG_LEN];
        b[field::KIND] = NEIGH_V1;
        b[field::VNIC].copy_from_slice(&self.vnic.to_be_bytes());
        b[field::IP].copy_from_slice(&self.ip.to_be_bytes());
        b[field::MAC].copy_from_slice(&self.mac);
        b
    }
}

/// What the router keeps for its peers.
#[derive(Debug)]
pub(super) struct PeerState {
    /// Instances of the VR, as [`Peers::instances`] last said (0 before
    /// the first round, and in a host that never calls the hook): below 2
    /// nothing is queued.
    instances: u16,
    /// Messages to send to every other instance, oldest first.
    tell: VecDeque<NeighMsg>,
    /// Neighbour slots whose waiting packet a peer's message released,
    /// to leave in the next free slot (oldest first).
    releases: VecDeque<u32>,
    /// Most entries of `releases` (the pending pool's size).
    releases_max: usize,
}

impl PeerState {
    /// Nothing to tell yet; room for `pending` releases.
    pub fn new(pending: usize) -> Self {
        Self {
            instances: 0,
            tell: VecDeque::with_capacity(TELL_MAX),
            releases: VecDeque::with_capacity(pending),
            releases_max: pending,
        }
    }

    /// Whether the VR may have other instances: more than one, or not
    /// known yet.
    #[inline]
    pub fn has_peers(&self) -> bool {
        self.instances != 1
    }

    /// Whether a packet released by a peer waits for a free slot.
    #[inline(always)]
    pub fn has_releases(&self) -> bool {
        !self.releases.is_empty()
    }

    /// The messages waiting to be sent (tests).
    #[cfg(test)]
    pub fn queued(&self) -> impl Iterator<Item = &NeighMsg> {
        self.tell.iter()
    }
}

impl Router {
    /// [`Vr::peers`](vrhost_sdk::Vr::peers): note the instance count; with
    /// peers, read their messages, then send ours.
    #[inline]
    pub(super) fn serve_peers(&mut self, peers: &mut Peers<'_>) {
        self.peer.instances = peers.instances();
        if self.peer.instances > 1 {
            self.exchange(peers);
        }
    }

    /// Read up to [`RECV_MAX`] messages, then send what is queued until
    /// the ring is full (the rest goes on a later round).
    #[inline(never)]
    fn exchange(&mut self, peers: &mut Peers<'_>) {
        self.now = None;
        let mut buf = [0u8; MAX_PAYLOAD];
        for _ in 0..RECV_MAX {
            let Some((_, len)) = peers.recv(&mut buf) else {
                break;
            };
            self.apply(&buf[..len.min(MAX_PAYLOAD)]);
        }
        while let Some(m) = self.peer.tell.front() {
            match peers.send(PeerDest::All, &m.emit()) {
                Err(PeerError::Full) => break,
                Ok(()) => self.counters[counters::PEER_NEIGH_SENT] += 1,
                Err(_) => self.counters[counters::PEER_NEIGH_UNSENT] += 1,
            }
            self.peer.tell.pop_front();
        }
    }

    /// Queue `ip` on `vnic` at `mac` for the other instances, if there
    /// are any; a message for the same neighbour still queued takes the
    /// new MAC instead.
    pub(super) fn tell(&mut self, vnic: u16, ip: u32, mac: [u8; 6]) {
        if self.peer.instances < 2 {
            return;
        }
        let tell = &mut self.peer.tell;
        if let Some(m) = tell.iter_mut().find(|m| m.ip == ip && m.vnic == vnic) {
            m.mac = mac;
        } else if tell.len() < TELL_MAX {
            tell.push_back(NeighMsg { vnic, ip, mac });
        } else {
            self.counters[counters::PEER_NEIGH_UNSENT] += 1;
        }
    }

    /// A peer's message: install or refresh the neighbour as if its ARP
    /// reply had come here (never told on: the sender told everyone), and
    /// queue the release of a packet waiting for it. A neighbour not in
    /// the table is not added (nothing here waits for it; an ARP reply
    /// would not add it either).
    pub(super) fn apply(&mut self, bytes: &[u8]) {
        let Some(m) = NeighMsg::parse(bytes).filter(|m| self.plausible(m)) else {
            self.counters[counters::PEER_NEIGH_BAD] += 1;
            return;
        };
        let Some(i) = self.neigh.find(m.ip, m.vnic) else {
            return;
        };
        if self.neigh.get(i).state == super::neigh::State::Static {
            return;
        }
        self.learn(i, m.mac);
        self.counters[counters::PEER_NEIGH_APPLIED] += 1;
        let waiting = &mut self.peer.releases;
        if self.neigh.get(i).pending != NONE
            && waiting.len() < self.peer.releases_max
            && !waiting.contains(&(i as u32))
        {
            waiting.push_back(i as u32);
        }
    }

    /// Whether a message names a neighbour the router may have: one of
    /// its vNICs, an address of a host other than the router, a unicast
    /// MAC (what [`Router::arp_in`] asks of an ARP sender).
    pub(super) fn plausible(&self, m: &NeighMsg) -> bool {
        let mac = MacAddr(m.mac);
        usize::from(m.vnic) < self.vnics.len()
            && m.ip.wrapping_sub(1) < 0xdfff_ffff
            && !self.is_ours(m.ip)
            && mac.is_unicast()
            && mac != MacAddr::ZERO
    }

    /// The router consumed `pkt` (an ARP frame, a packet kept for its
    /// next hop): its slot is free for a packet released by a peer's
    /// message, if one waits.
    #[inline]
    pub(super) fn consumed(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        if self.peer.has_releases() {
            return self.release_into(pkt);
        }
        Verdict::Drop(DropReason::Consumed)
    }

    /// Put the oldest packet released by a peer's message in `pkt`'s
    /// slot, which the router has no use for; packets released too long
    /// ago (over `retrans_ms x probes`, as long as a resolution may take)
    /// are discarded on the way. `Drop(Consumed)` if none is left.
    #[cold]
    #[inline(never)]
    fn release_into(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        let window = self
            .timers
            .retrans_ms
            .saturating_mul(u64::from(self.timers.probes));
        while let Some(i) = self.peer.releases.pop_front() {
            let i = i as usize;
            let e = *self.neigh.get(i);
            if e.pending == NONE || !e.has_mac() {
                continue; // sent, evicted or resolving again meanwhile
            }
            if self.now().saturating_sub(e.since) >= window {
                self.neigh.drop_pending(i);
                self.counters[counters::ARP_UNRES_DISCARDS] += 1;
                continue;
            }
            return self.release(pkt, i);
        }
        Verdict::Drop(DropReason::Consumed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_as_documented() {
        let m = NeighMsg {
            vnic: 0x0102,
            ip: 0x0a01_0102,
            mac: [2, 0, 0, 0, 0xb0, 2],
        };
        let b = m.emit();
        assert_eq!(b, [1, 1, 2, 10, 1, 1, 2, 2, 0, 0, 0, 0xb0, 2]);
        assert_eq!(NeighMsg::parse(&b), Some(m));
    }

    #[test]
    fn other_lengths_and_kinds_are_refused() {
        let b = NeighMsg {
            vnic: 1,
            ip: 1,
            mac: [2; 6],
        }
        .emit();
        assert_eq!(NeighMsg::parse(&b[..12]), None);
        assert_eq!(NeighMsg::parse(&[b.as_slice(), &[0]].concat()), None);
        assert_eq!(NeighMsg::parse(&[]), None);
        let mut k = b;
        k[0] = 2;
        assert_eq!(NeighMsg::parse(&k), None);
    }
}
