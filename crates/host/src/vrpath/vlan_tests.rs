//! VLAN sub-interfaces: a tagged vNIC's frames reach the VR without their
//! tag and leave with it; frames without its tag, and tagged frames from
//! the VR, are counted drops.

use vrhost_shm::SlotState;

use super::Class;
use super::testkit::{Kit, frame};
use crate::stats::{EgressDrop, IngressDrop};

/// `f` with an 802.1Q tag of VLAN `id` after its MAC addresses.
fn tagged(f: &[u8], id: u16) -> Vec<u8> {
    let mut t = f[..12].to_vec();
    t.extend_from_slice(&[0x81, 0x00]);
    t.extend_from_slice(&id.to_be_bytes());
    t.extend_from_slice(&f[12..]);
    t
}

#[test]
fn a_vlan_vnic_takes_its_tag_off_and_puts_it_back() {
    // vNIC 0: VLAN 100 of port 0; vNIC 1: untagged on port 1.
    let mut k = Kit::new(2, 1, 64, 64);
    k.vp.set_vlans(&[Some(100)]);
    assert_eq!(k.vp.vlans(), vec![Some(100), None]);
    let plain = frame(7);
    k.give(0, &tagged(&plain, 100));
    let got = k.take(0, 0);
    assert_eq!(k.bytes(got[0]), plain, "the VR sees the frame untagged");
    // Out of vNIC 0 tagged again, out of vNIC 1 as it is.
    k.hand_back(0, 0, &got, SlotState::Processed);
    k.give(0, &tagged(&plain, 100));
    let got = k.take(0, 0);
    k.hand_back(0, 1, &got, SlotState::Processed);
    k.vp.poll_tx(&mut k.ports);
    assert_eq!(k.sent(0), vec![tagged(&plain, 100)]);
    assert_eq!(k.sent(1), vec![plain]);
    assert!(k.vp.is_drained());
    k.vp.check_slot_accounting().unwrap();
}

#[test]
fn frames_without_the_vnics_tag_are_counted_drops() {
    let mut k = Kit::new(1, 1, 64, 64);
    k.vp.set_vlans(&[Some(100)]);
    let plain = frame(1);
    for f in [plain.clone(), tagged(&plain, 200), plain[..13].to_vec()] {
        let r = k.vp.stage(0, &f, || Class::Data);
        assert_eq!(r, Err(IngressDrop::VlanMismatch), "{f:02x?}");
    }
    // The VLAN id is the tag's low 12 bits: a priority does not matter.
    let mut prio = tagged(&plain, 100);
    prio[14] |= 0xe0;
    assert_eq!(k.vp.stage(0, &prio, || Class::Data), Ok(()));
    k.vp.set_vlans(&[None]);
    assert_eq!(k.vp.vlans(), vec![None]);
    assert_eq!(
        k.vp.stage(0, &tagged(&plain, 200), || Class::Data),
        Ok(()),
        "untagged vNIC: as it is"
    );
}

#[test]
fn a_tagged_frame_or_no_headroom_from_the_vr_is_a_counted_drop() {
    let mut k = Kit::new(1, 1, 64, 64);
    k.vp.set_vlans(&[Some(5)]);
    // The VR sends a frame tagged already.
    let slots = {
        k.give(0, &tagged(&frame(1), 5));
        k.take(0, 0)
    };
    let r = k.vp.region();
    let (off, len) = r.meta(slots[0]).unwrap().extent();
    r.write_slot(slots[0], u32::from(off) + 12, &[0x81, 0x00, 0, 9]);
    k.hand_back(0, 0, &slots, SlotState::Processed);
    // And one moved to the start of its slot.
    let slots = {
        k.give(0, &tagged(&frame(2), 5));
        k.take(0, 0)
    };
    k.vp.region().meta(slots[0]).unwrap().set_extent(2, len);
    k.hand_back(0, 0, &slots, SlotState::Processed);
    k.vp.poll_tx(&mut k.ports);
    assert!(k.sent(0).is_empty());
    let drops = &k.vp.stats().egress_drops;
    assert_eq!(drops[EgressDrop::VlanTagged as usize].get(), 1);
    assert_eq!(drops[EgressDrop::VlanHeadroom as usize].get(), 1);
    assert!(k.vp.is_drained());
}
