//! What unit tests across the crate share: real frames to classify,
//! hash, stage and forward.

use std::net::Ipv4Addr;

use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;

/// A 64-byte Ethernet/IPv4/UDP frame from `src:sport` to `dst:dport`
/// (MACs `02:00:00:00:00:09` to `02:00:00:00:00:01`, TTL 64).
pub(crate) fn udp(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
        src_ip: src,
        dst_ip: dst,
        sport,
        dport,
        ttl: 64,
        frame_bytes: 64,
    }
    .write(&mut f)
    .expect("a 64-byte buffer holds a 64-byte frame");
    f
}
