//! A port's burst staged VR by VR ([`PollConfig::rx_group`]).
//!
//! With many busy VRs each frame of a burst goes to another VR than the
//! one before, and that VR's host state (its `VrPath`, its staging queue,
//! the top of its free list and the ledger's line of the slot it gives)
//! has left the worker's L1 since its last frame, about as many frames
//! ago as VRs are busy: callgrind counted 17 L1 misses a frame at 100
//! busy VRs against 3 at one, most of them there. Staging a burst in
//! arrival order fetches those lines once a frame; staging it VR by VR
//! fetches them once a VR and burst, and the larger the burst the more
//! frames share them (256 frames over 100 VRs: 2.6 a VR).
//!
//! The burst is classified first, each frame chained behind the last of
//! its VR; then each VR's chain is staged, in order. A VR's frames keep
//! the order they came in; frames of different VRs go to different rings,
//! so their order against each other is no one's to see.
//!
//! [`PollConfig::rx_group`]: vrhost_proto::PollConfig::rx_group

use vrhost_packet::FlowKey;

use super::{BURST, Worker};
use crate::classify::Classifier;
use crate::stats::{HostStats, IngressDrop};
use crate::vrpath::RX_BURST_MAX;

/// The largest port burst staged VR by VR: as much as a VR's staging
/// queues take on top of what they hold after a burst.
pub(super) const GROUP_MAX: usize = RX_BURST_MAX;

/// Busy VRs from which the worker takes its bursts grouped: with fewer,
/// their host state stays in the L1 between a VR's frames (10 busy VRs:
/// 6 L1 misses a frame against 4 with one), and the second pass would
/// only cost.
pub(super) const GROUP_VRS: usize = 16;

/// No frame: the end of a chain, or a VR with none in the burst.
const NONE: u16 = u16::MAX;

/// A frame of a burst as the first pass classified it.
#[derive(Debug, Clone, Copy, Default)]
struct Classified {
    /// Its place in the burst.
    at: u16,
    /// The next frame of its VR in the burst ([`NONE`]: none).
    next: u16,
    vnic: u16,
    /// Its key, which the VR's admission reads.
    key: FlowKey,
}

/// The worker's buffers for grouped bursts (kept: nothing is cleared or
/// allocated for a burst).
#[derive(Debug)]
pub(super) struct Groups {
    todo: [Classified; GROUP_MAX],
    /// The burst's VRs in the order of their first frame, with that frame.
    heads: [(u32, u16); GROUP_MAX],
    /// For each of the worker's VRs, its last frame so far in the burst
    /// ([`NONE`]: none); back to [`NONE`] once its frames are staged.
    last: Vec<u16>,
}

impl Groups {
    pub(super) fn new() -> Box<Self> {
        Box::new(Self {
            todo: [Classified::default(); GROUP_MAX],
            heads: [(0, 0); GROUP_MAX],
            last: Vec::new(),
        })
    }
}

impl Worker {
    /// Take up to `want` frames (at most [`GROUP_MAX`]) from port `p`,
    /// classify them all, then stage them VR by VR, each VR's in the order
    /// they came (see the module's doc). A host with a tunnel stages in
    /// arrival order ([`Worker::rx_burst_to_vrs`]). Returns frames taken,
    /// and whether a VR had no room.
    pub(super) fn rx_burst_grouped(&mut self, p: usize, want: usize) -> (usize, bool) {
        if !self.classifier.tunnels().is_empty() {
            return self.rx_burst_to_vrs(p, want.min(BURST));
        }
        let mut frames: [&[u8]; GROUP_MAX] = [&[]; GROUP_MAX];
        let n = self.ports[p].rx_burst(&mut frames[..want.min(GROUP_MAX)]);
        self.stats.rx_packets.add(n as u64);
        let g = &mut *self.groups;
        if g.last.len() != self.vrs.len() {
            // Only when VRs come or go: a round never allocates otherwise.
            g.last = vec![NONE; self.vrs.len()];
        }
        let (mut m, mut nv) = (0, 0);
        for (i, f) in frames[..n].iter().enumerate() {
            let Some((vr, vnic, key)) =
                classify(&self.classifier, &self.stats, self.vrs.len(), p, f)
            else {
                continue;
            };
            // At most GROUP_MAX frames: indexes fit in 16 bits, below NONE.
            g.todo[m] = Classified {
                at: i as u16,
                next: NONE,
                vnic,
                key,
            };
            match g.last[vr] {
                NONE => {
                    // A VR index fits in 32 bits (the classifier's).
                    g.heads[nv] = (vr as u32, m as u16);
                    nv += 1;
                }
                l => g.todo[usize::from(l)].next = m as u16,
            }
            g.last[vr] = m as u16;
            m += 1;
        }
        let mut full = false;
        for &(vr, first) in &g.heads[..nv] {
            let vr = vr as usize;
            g.last[vr] = NONE;
            let path = &mut self.vrs[vr];
            // In the staging list already if it holds staged frames.
            let mut listed = path.staged() > 0;
            let mut k = first;
            while k != NONE {
                let c = &g.todo[usize::from(k)];
                match path.stage_key(c.vnic, frames[usize::from(c.at)], &c.key) {
                    Ok(()) if !listed => {
                        self.staging.push(vr);
                        listed = true;
                    }
                    Ok(()) => {}
                    Err(why) => {
                        path.stats().drop_in(why, 1);
                        full |= matches!(why, IngressDrop::RingFull | IngressDrop::PoolEmpty);
                    }
                }
                k = c.next;
            }
            self.burst_staged |= path.staged() >= BURST;
        }
        (n, full)
    }
}

/// The VR (an index below `vrs`), vNIC and key of frame `f` from port `p`
/// by `classifier`; `None`, counted in `stats`, if it is malformed or no
/// VR's.
#[inline(always)]
fn classify(
    classifier: &Classifier,
    stats: &HostStats,
    vrs: usize,
    p: usize,
    f: &[u8],
) -> Option<(usize, u16, FlowKey)> {
    // A frame whose IPv4 header is broken can still match a rule on its
    // port, MAC or VLAN; its VR then counts the bad header.
    let Some(key) = FlowKey::extract(f).ok().or_else(|| FlowKey::extract_l2(f)) else {
        stats.ingress_drops[IngressDrop::Malformed as usize].add(1);
        return None;
    };
    let Some((vr, vnic)) = classifier.classify_frame(p, &key, f) else {
        match crate::cluster::heartbeat::is_heartbeat_frame(f) {
            true => stats.heartbeats.add(1),
            false => stats.ingress_drops[IngressDrop::NoMatch as usize].add(1),
        }
        return None;
    };
    if vr >= vrs {
        stats.ingress_drops[IngressDrop::NoMatch as usize].add(1);
        return None;
    }
    Some((vr, vnic, key))
}
