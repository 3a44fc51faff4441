//! Local delivery to a control plane (issue 22, item 3): a VR with a
//! control plane has one control vNIC per data vNIC, whose port is a TAP
//! interface in the VR's control namespace (the host opens it and feeds
//! it like any port; the router never sees the namespace).
//!
//! - A frame that comes in on a control vNIC is what the control plane
//!   (BIRD, FRR, sshd...) sends out of its TAP: it leaves by the matching
//!   data vNIC unchanged (`from_control`).
//! - A frame for the router itself that the router does not handle
//!   (what would be dropped as [`DropReason::LocalUnsupported`]: TCP and
//!   UDP to its addresses (BGP, BFD, SSH), OSPF (IP protocol 89 to its
//!   address or 224.0.0.5/6), other IPv4 multicast and broadcast, IPv6 to
//!   its addresses beyond echo and neighbour discovery, and IPv6
//!   multicast it does not take ([`DropReason::Multicast`]) goes to the
//!   control vNIC of the vNIC it came in on, unchanged (`to_control`).
//! - ARP replies and neighbour advertisements sent to the router's MAC
//!   are learned by the router, then go to the control vNIC too, so the
//!   control namespace's kernel resolves the neighbours it asked for
//!   itself (its requests go out unchanged). Requests for the router's
//!   addresses are answered by the router and not copied: the slot holds
//!   the reply, and the kernel asks for what it needs. An answer whose
//!   slot carries a packet that waited for that neighbour (the router
//!   resolved it too) is not handed on: the kernel's next request is.
//!
//! - With `control_all` (a `kind = "tap"` VR), every frame of a data
//!   vNIC goes to its control vNIC untouched (`to_control`): the router
//!   forwards nothing itself, the control namespace's kernel (or what the
//!   tenant runs there) is the data plane.
//!
//! A VR without a control plane pays one bounds check per packet.

use vrhost_packet::ethernet::{self, EtherType, EthernetFrame};
use vrhost_sdk::{DropReason, Packet, Verdict};

use super::{Router, counters};

/// EtherType of ARP, ARP's reply opcode.
const ARP_REPLY: u16 = 2;
/// ICMPv6 neighbour advertisement.
const NEIGHBOR_ADVERT: u8 = 136;

/// Which vNIC is whose control vNIC.
#[derive(Debug, Clone, Default)]
pub(super) struct Cplane {
    /// Data vNIC -> its control vNIC (empty: no control plane).
    to_ctl: Box<[u16]>,
    /// vNIC -> the data vNIC whose control vNIC it is.
    from_ctl: Box<[Option<u16>]>,
    /// Every frame of a data vNIC goes to its control vNIC (`control_all`).
    all: bool,
}

impl Cplane {
    /// From the config's `control_vnics` (empty, or one per data vNIC:
    /// not a data vNIC, each once) and `control_all`.
    pub(super) fn new(control_vnics: &[u16], data_vnics: usize, all: bool) -> Result<Self, String> {
        if control_vnics.is_empty() {
            if all {
                return Err("control_all needs control_vnics".into());
            }
            return Ok(Self::default());
        }
        if control_vnics.len() != data_vnics {
            return Err(format!(
                "control_vnics: {} entries for {data_vnics} vNICs (one per vNIC)",
                control_vnics.len()
            ));
        }
        let top = control_vnics.iter().copied().max().unwrap_or(0);
        let mut from_ctl = vec![None; usize::from(top) + 1];
        for (i, &c) in control_vnics.iter().enumerate() {
            if usize::from(c) < data_vnics {
                return Err(format!("control_vnics[{i}]: {c} is a data vNIC"));
            }
            if from_ctl[usize::from(c)].is_some() {
                return Err(format!("control_vnics[{i}]: {c} given twice"));
            }
            from_ctl[usize::from(c)] = Some(i as u16);
        }
        Ok(Self {
            to_ctl: control_vnics.into(),
            from_ctl: from_ctl.into(),
            all,
        })
    }

    /// Where a frame received on `rx` goes without the router looking at
    /// it: from a control vNIC to its data vNIC; with `control_all`, from
    /// a data vNIC to its control vNIC.
    #[inline(always)]
    pub(super) fn bypass(&self, rx: u16) -> Option<u16> {
        match self.data_vnic_of(rx) {
            Some(out) => Some(out),
            None if self.all => self.to_ctl.get(usize::from(rx)).copied(),
            None => None,
        }
    }

    /// The data vNIC a frame received on `rx` leaves by, if `rx` is a
    /// control vNIC.
    #[inline(always)]
    pub(super) fn data_vnic_of(&self, rx: u16) -> Option<u16> {
        self.from_ctl.get(usize::from(rx)).copied().flatten()
    }

    /// Whether the router has a control plane.
    #[inline(always)]
    pub(super) fn is_on(&self) -> bool {
        !self.to_ctl.is_empty()
    }
}

impl Router {
    /// Turn the verdicts of a burst whose frames the control plane should
    /// see into forwards to it, and count the frames each way.
    #[cold]
    #[inline(never)]
    pub(super) fn hand_to_control(&mut self, pkts: &[Packet<'_>], verdicts: &mut [Verdict]) {
        for (p, v) in pkts.iter().zip(verdicts.iter_mut()) {
            let rx = p.rx_vnic();
            if self.cplane.data_vnic_of(rx).is_some() {
                self.counters[counters::FROM_CONTROL] += 1;
                continue;
            }
            let Some(&ctl) = self.cplane.to_ctl.get(usize::from(rx)) else {
                continue;
            };
            let take = self.cplane.all
                || match *v {
                    Verdict::Drop(DropReason::LocalUnsupported | DropReason::Multicast) => true,
                    Verdict::Drop(DropReason::Consumed) => is_answer(p.data()),
                    _ => false,
                };
            if take {
                *v = Verdict::Forward(ctl);
                self.counters[counters::TO_CONTROL] += 1;
            }
        }
    }
}

/// Whether `d` is an ARP reply or an ICMPv6 neighbour advertisement
/// (without extension headers): an answer the control plane's kernel may
/// be waiting for.
fn is_answer(d: &[u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(d) else {
        return false;
    };
    let l3 = &d[ethernet::HEADER_LEN..];
    match eth.ethertype() {
        // ARP: the opcode is bytes 6..8.
        EtherType::ARP => l3.get(6..8) == Some(&ARP_REPLY.to_be_bytes()[..]),
        // IPv6: next header 58 at byte 6, ICMPv6 type after the 40 bytes.
        EtherType::IPV6 => l3.get(6) == Some(&58) && l3.get(40) == Some(&NEIGHBOR_ADVERT),
        _ => false,
    }
}
