//! What the router's integration tests share: a test frame, and a slot
//! filled with it.

use std::net::Ipv4Addr;

use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;
use vrhost_shm::Region;

/// A 64-byte UDP frame from `src_mac` (10.1.0.7) to the router's vNIC 0
/// (`02:00:00:00:10:00`), for `dst`.
pub fn udp64(src_mac: [u8; 6], dst: Ipv4Addr, ttl: u8) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr([2, 0, 0, 0, 0x10, 0]),
        src_mac: MacAddr(src_mac),
        src_ip: Ipv4Addr::new(10, 1, 0, 7),
        dst_ip: dst,
        sport: 1,
        dport: 2,
        ttl,
        frame_bytes: 64,
    }
    .write(&mut f)
    .unwrap();
    f
}

/// Write `frame` into `slot` after the headroom and set its extent (the
/// slot's state is the caller's).
pub fn fill(region: &Region, slot: u32, frame: &[u8]) {
    let h = region.layout().cfg.headroom;
    assert!(region.write_slot(slot, h, frame));
    region
        .meta(slot)
        .unwrap()
        .set_extent(h as u16, frame.len() as u16);
}
