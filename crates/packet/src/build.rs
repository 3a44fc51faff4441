//! Building Ethernet + IPv4 + UDP frames, for generators and tests.
//!
//! [`UdpFrameSpec::write`] fills a buffer of exactly `frame_bytes` bytes
//! (64..=1518, the frame as stored, without FCS) with a valid untagged
//! frame: IPv4 without options, DF set, checksum filled; UDP checksum filled
//! (or zero, with [`BuildOptions`]); the payload zeroed or patterned.
//! [`set_dst_ip_in_place`] retargets a built frame without rewriting it.

use core::net::Ipv4Addr;
use core::ops::RangeInclusive;

use crate::ParseError;
use crate::checksum;
use crate::ethernet::{self, EtherType, EthernetFrame, EthernetRepr};
use crate::ipv4::{self, Ipv4Packet, Ipv4Repr, proto};
use crate::mac::MacAddr;
use crate::udp::{self, UdpPacket, UdpRepr};

/// Frame sizes the builder accepts: minimum to maximum untagged Ethernet
/// frame in the customary benchmark sense (RFC 2544 sizes, 64 to 1518).
pub const FRAME_BYTES: RangeInclusive<usize> = 64..=1518;

/// Offset of the UDP payload in a built frame (14 + 20 + 8).
pub const PAYLOAD_OFFSET: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;

/// What frame to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpFrameSpec {
    /// Ethernet destination.
    pub dst_mac: MacAddr,
    /// Ethernet source.
    pub src_mac: MacAddr,
    /// IPv4 source.
    pub src_ip: Ipv4Addr,
    /// IPv4 destination.
    pub dst_ip: Ipv4Addr,
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
    /// IPv4 time to live.
    pub ttl: u8,
    /// Frame length as stored, without FCS; within [`FRAME_BYTES`].
    pub frame_bytes: usize,
}

/// How to fill the UDP payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PayloadFill {
    /// All zeros.
    #[default]
    Zero,
    /// Byte `i` of the payload is `i as u8`: easy to spot in a capture.
    Pattern,
}

/// Options of [`UdpFrameSpec::write_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BuildOptions {
    /// Fill the UDP checksum (else 0, "none").
    pub udp_checksum: bool,
    /// Payload contents.
    pub payload: PayloadFill,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            udp_checksum: true,
            payload: PayloadFill::Zero,
        }
    }
}

/// Why a frame was not built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// `frame_bytes` outside [`FRAME_BYTES`].
    #[error("frame size {frame_bytes} bytes outside 64..=1518")]
    FrameSize {
        /// The size asked for.
        frame_bytes: usize,
    },
    /// The buffer is not exactly `frame_bytes` long.
    #[error("buffer is {got} bytes, frame is {expected}")]
    BufferLength {
        /// `frame_bytes`.
        expected: usize,
        /// The buffer's length.
        got: usize,
    },
}

/// A frame of `frame_bytes` into a buffer of `buf_len` bytes: the length
/// within [`FRAME_BYTES`], the buffer exactly that long.
fn check_frame_len(frame_bytes: usize, buf_len: usize) -> Result<(), BuildError> {
    if !FRAME_BYTES.contains(&frame_bytes) {
        return Err(BuildError::FrameSize { frame_bytes });
    }
    if buf_len != frame_bytes {
        return Err(BuildError::BufferLength {
            expected: frame_bytes,
            got: buf_len,
        });
    }
    Ok(())
}

/// The test payload pattern: byte `i` is `i as u8`.
fn fill_pattern(payload: &mut [u8]) {
    payload
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = i as u8);
}

impl UdpFrameSpec {
    /// Write the frame with default options (UDP checksum filled, zero
    /// payload) into `buf`, which must be exactly `frame_bytes` long.
    ///
    /// # Errors
    /// [`BuildError::FrameSize`], [`BuildError::BufferLength`].
    pub fn write(&self, buf: &mut [u8]) -> Result<(), BuildError> {
        self.write_with(buf, BuildOptions::default())
    }

    /// Write the frame with `opts` into `buf`, which must be exactly
    /// `frame_bytes` long.
    ///
    /// # Errors
    /// [`BuildError::FrameSize`], [`BuildError::BufferLength`].
    pub fn write_with(&self, buf: &mut [u8], opts: BuildOptions) -> Result<(), BuildError> {
        check_frame_len(self.frame_bytes, buf.len())?;
        let ip_len = self.frame_bytes - ethernet::HEADER_LEN;
        // 1518 - 14 - 20 - 8 fits u16 with room to spare.
        let udp_payload = (ip_len - ipv4::HEADER_LEN - udp::HEADER_LEN) as u16;
        EthernetRepr {
            dst: self.dst_mac,
            src: self.src_mac,
            vlan_tci: None,
            ethertype: EtherType::IPV4,
        }
        .emit(buf);
        let payload = &mut buf[PAYLOAD_OFFSET..];
        match opts.payload {
            PayloadFill::Zero => payload.fill(0),
            PayloadFill::Pattern => fill_pattern(payload),
        }
        let l3 = &mut buf[ethernet::HEADER_LEN..];
        Ipv4Repr {
            src: self.src_ip,
            dst: self.dst_ip,
            protocol: proto::UDP,
            ttl: self.ttl,
            payload_len: udp_payload + udp::HEADER_LEN as u16,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
        }
        .emit(l3);
        UdpRepr {
            src_port: self.sport,
            dst_port: self.dport,
            payload_len: udp_payload,
        }
        .emit(
            &mut l3[ipv4::HEADER_LEN..],
            self.src_ip,
            self.dst_ip,
            opts.udp_checksum,
        );
        Ok(())
    }
}

/// Rewrite the IPv4 destination of an Ethernet (optionally VLAN-tagged)
/// IPv4 frame, updating the header checksum incrementally (RFC 1624) and,
/// for an unfragmented UDP datagram with a checksum, the UDP checksum too
/// (the pseudo-header covers the destination). Costs a few adds per frame:
/// generators use it to vary destinations in place.
///
/// # Errors
/// [`ParseError::WrongEtherType`] for a non-IPv4 frame, or the errors of
/// [`EthernetFrame::new_checked`] and [`Ipv4Packet::new_checked`].
pub fn set_dst_ip_in_place(frame: &mut [u8], ip: Ipv4Addr) -> Result<(), ParseError> {
    let mut eth = EthernetFrame::new_checked(frame)?;
    if eth.inner_ethertype() != EtherType::IPV4 {
        return Err(ParseError::WrongEtherType);
    }
    let mut pkt = Ipv4Packet::new_checked(eth.payload_mut())?;
    let (old, new) = (pkt.dst_u32(), ip.to_bits());
    pkt.set_dst_u32_update_checksum(new);
    if pkt.protocol() == proto::UDP && !pkt.is_fragment() {
        let l4 = pkt.payload_mut();
        if l4.len() >= udp::HEADER_LEN {
            let mut u = UdpPacket::new_unchecked(l4);
            let c = u.checksum();
            if c != 0 {
                // A computed zero is sent as 0xffff (RFC 768).
                let c = match checksum::update32(c, old, new) {
                    0 => 0xffff,
                    c => c,
                };
                u.set_checksum(c);
            }
        }
    }
    Ok(())
}

/// Whether `frame`, an Ethernet (optionally VLAN-tagged) IPv4 UDP frame
/// such as [`UdpFrameSpec::write`] builds, carries an IPv4 header checksum
/// that verifies and a UDP checksum that is present (not 0, "none") and
/// verifies. For tests and generators checking the frames they built: it
/// parses the whole frame and sums the datagram.
pub fn udp_checksums_valid(frame: &[u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return false;
    };
    if eth.inner_ethertype() != EtherType::IPV4 {
        return false;
    }
    let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else {
        return false;
    };
    if ip.protocol() != proto::UDP || !ip.verify_checksum() {
        return false;
    }
    let Ok(u) = UdpPacket::new_checked(ip.payload()) else {
        return false;
    };
    u.checksum() != 0 && u.verify_checksum(ip.src_addr(), ip.dst_addr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FlowKey;
    use proptest::prelude::*;

    fn spec(frame_bytes: usize) -> UdpFrameSpec {
        UdpFrameSpec {
            dst_mac: MacAddr([2, 0, 0, 0, 0x10, 0]),
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 1, 2, 3),
            sport: 1024,
            dport: 5001,
            ttl: 64,
            frame_bytes,
        }
    }

    #[test]
    fn known_64_byte_frame() {
        let mut f = [0u8; 64];
        spec(64).write(&mut f).unwrap();
        // Checksums computed by hand: IPv4 sum 0xdb48 -> 0x24b7; UDP
        // pseudo-header 0x1634 + header 0x17a7 = 0x2ddb -> 0xd224.
        let expected_head: [u8; 42] = [
            0x02, 0x00, 0x00, 0x00, 0x10, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08,
            0x00, // eth
            0x45, 0x00, 0x00, 0x32, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x24, 0xb7, 0x0a, 0x00,
            0x00, 0x01, 0x0a, 0x01, 0x02, 0x03, // ip: total 50
            0x04, 0x00, 0x13, 0x89, 0x00, 0x1e, 0xd2, 0x24, // udp: length 30
        ];
        assert_eq!(f[..42], expected_head);
        assert!(f[42..].iter().all(|&b| b == 0));
        assert!(udp_checksums_valid(&f));
        let mut bad = f;
        bad[63] ^= 1;
        assert!(!udp_checksums_valid(&bad), "a payload bit flipped");
        let mut none = f;
        none[40..42].fill(0);
        assert!(!udp_checksums_valid(&none), "no UDP checksum");
        assert!(!udp_checksums_valid(&f[..40]), "truncated");
    }

    #[test]
    fn size_errors() {
        let mut f = [0u8; 63];
        assert_eq!(
            spec(63).write(&mut f),
            Err(BuildError::FrameSize { frame_bytes: 63 })
        );
        let mut f = vec![0u8; 1519];
        assert_eq!(
            spec(1519).write(&mut f),
            Err(BuildError::FrameSize { frame_bytes: 1519 })
        );
        assert_eq!(
            spec(100).write(&mut f),
            Err(BuildError::BufferLength {
                expected: 100,
                got: 1519
            })
        );
        assert!(spec(1518).write(&mut f[..1518]).is_ok());
    }

    #[test]
    fn options() {
        let mut f = [0u8; 128];
        spec(128)
            .write_with(
                &mut f,
                BuildOptions {
                    udp_checksum: false,
                    payload: PayloadFill::Pattern,
                },
            )
            .unwrap();
        assert_eq!(&f[40..42], &[0, 0]);
        assert_eq!(&f[42..46], &[0, 1, 2, 3]);
        assert_eq!(f[127], 85);
    }

    proptest! {
        #[test]
        fn parse_emit(size in 64usize..=1518, src: u32, dst: u32, sport: u16, dport: u16, ttl: u8, csum: bool, pattern: bool) {
            let s = UdpFrameSpec { src_ip: src.into(), dst_ip: dst.into(), sport, dport, ttl, ..spec(size) };
            let mut f = vec![0xeeu8; size];
            let opts = BuildOptions { udp_checksum: csum, payload: if pattern { PayloadFill::Pattern } else { PayloadFill::Zero } };
            s.write_with(&mut f, opts).unwrap();
            let eth = EthernetFrame::new_checked(&f[..]).unwrap();
            prop_assert_eq!(eth.dst_addr(), s.dst_mac);
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            let r = Ipv4Repr::parse(&ip).unwrap();
            prop_assert_eq!((r.src, r.dst, r.ttl, r.protocol), (s.src_ip, s.dst_ip, ttl, 17));
            prop_assert_eq!(usize::from(ip.total_len()), size - 14);
            let u = UdpPacket::new_checked(ip.payload()).unwrap();
            let ur = UdpRepr::parse(&u, s.src_ip, s.dst_ip).unwrap();
            prop_assert_eq!((ur.src_port, ur.dst_port, usize::from(ur.payload_len)), (sport, dport, size - PAYLOAD_OFFSET));
            prop_assert_eq!(u.checksum() != 0, csum);
            let k = FlowKey::extract(&f).unwrap();
            prop_assert_eq!((k.src, k.dst, k.sport, k.dport), (src, dst, sport, dport));
        }

        #[test]
        fn set_dst_matches_rebuild(size in 64usize..=300, dst: u32, new_dst: u32, csum: bool) {
            let s = UdpFrameSpec { dst_ip: dst.into(), ..spec(size) };
            let opts = BuildOptions { udp_checksum: csum, payload: PayloadFill::Pattern };
            let mut f = vec![0u8; size];
            s.write_with(&mut f, opts).unwrap();
            set_dst_ip_in_place(&mut f, new_dst.into()).unwrap();
            let mut g = vec![0u8; size];
            UdpFrameSpec { dst_ip: new_dst.into(), ..s }.write_with(&mut g, opts).unwrap();
            prop_assert_eq!(f, g);
        }
    }

    #[test]
    fn set_dst_rejects_non_ip() {
        let mut f = [0u8; 64];
        spec(64).write(&mut f).unwrap();
        f[12] = 0x86;
        f[13] = 0xdd;
        assert_eq!(
            set_dst_ip_in_place(&mut f, Ipv4Addr::LOCALHOST),
            Err(ParseError::WrongEtherType)
        );
        assert_eq!(
            set_dst_ip_in_place(&mut f[..10], Ipv4Addr::LOCALHOST),
            Err(ParseError::Truncated)
        );
    }
}

/// Offset of the UDP payload in a built IPv6 frame (14 + 40 + 8).
pub const PAYLOAD_OFFSET_V6: usize =
    ethernet::HEADER_LEN + crate::ipv6::HEADER_LEN + udp::HEADER_LEN;

/// An Ethernet + IPv6 + UDP frame to build (no extension headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Udp6FrameSpec {
    /// Ethernet destination.
    pub dst_mac: MacAddr,
    /// Ethernet source.
    pub src_mac: MacAddr,
    /// IPv6 source.
    pub src_ip: core::net::Ipv6Addr,
    /// IPv6 destination.
    pub dst_ip: core::net::Ipv6Addr,
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
    /// Hop limit.
    pub hop_limit: u8,
    /// Frame length as stored, without FCS; within [`FRAME_BYTES`].
    pub frame_bytes: usize,
}

impl Udp6FrameSpec {
    /// Write the frame into `buf`, exactly `frame_bytes` long: payload
    /// byte `i` is `i as u8`, UDP checksum filled (mandatory over IPv6,
    /// RFC 8200 8.1).
    ///
    /// # Errors
    /// [`BuildError::FrameSize`], [`BuildError::BufferLength`].
    pub fn write(&self, buf: &mut [u8]) -> Result<(), BuildError> {
        check_frame_len(self.frame_bytes, buf.len())?;
        EthernetRepr {
            dst: self.dst_mac,
            src: self.src_mac,
            vlan_tci: None,
            ethertype: EtherType::IPV6,
        }
        .emit(buf);
        // At most 1518 - 14 - 40: fits u16.
        let udp_len = (self.frame_bytes - ethernet::HEADER_LEN - crate::ipv6::HEADER_LEN) as u16;
        crate::ipv6::Ipv6Repr {
            src: self.src_ip,
            dst: self.dst_ip,
            next_header: crate::ipv6::next_header::UDP,
            hop_limit: self.hop_limit,
            payload_len: udp_len,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut buf[ethernet::HEADER_LEN..]);
        let u = &mut buf[ethernet::HEADER_LEN + crate::ipv6::HEADER_LEN..];
        u[0..2].copy_from_slice(&self.sport.to_be_bytes());
        u[2..4].copy_from_slice(&self.dport.to_be_bytes());
        u[4..6].copy_from_slice(&udp_len.to_be_bytes());
        u[6..8].fill(0);
        fill_pattern(&mut u[8..]);
        let ph = checksum::pseudo_header_v6(
            self.src_ip.to_bits(),
            self.dst_ip.to_bits(),
            crate::ipv6::next_header::UDP,
            u32::from(udp_len),
        );
        // A computed zero is sent as 0xffff (RFC 8200 8.1).
        let c = match !checksum::fold(checksum::add(ph, checksum::sum(u))) {
            0 => 0xffff,
            c => c,
        };
        u[6..8].copy_from_slice(&c.to_be_bytes());
        Ok(())
    }
}

/// Length of a neighbour solicitation frame with a source link-layer
/// option: 14 + 40 + 24 + 8.
pub const NS_FRAME_LEN: usize = ethernet::HEADER_LEN + crate::ipv6::HEADER_LEN + 32;

/// A neighbour solicitation from `src_mac`/`src_ip` for `target`, to the
/// target's solicited-node address and its multicast MAC, hop limit 255,
/// with a source link-layer address option (RFC 4861 7.2.2).
pub fn neighbor_solicit_frame(
    src_mac: MacAddr,
    src_ip: core::net::Ipv6Addr,
    target: core::net::Ipv6Addr,
) -> [u8; NS_FRAME_LEN] {
    use crate::ipv6;
    let mut f = [0u8; NS_FRAME_LEN];
    let dst = ipv6::solicited_node(target.to_bits());
    EthernetRepr {
        dst: ipv6::multicast_mac(dst),
        src: src_mac,
        vlan_tci: None,
        ethertype: EtherType::IPV6,
    }
    .emit(&mut f);
    ipv6::Ipv6Repr {
        src: src_ip,
        dst: dst.into(),
        next_header: ipv6::next_header::ICMPV6,
        hop_limit: 255,
        payload_len: 32,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut f[ethernet::HEADER_LEN..]);
    crate::ndisc::NdRepr {
        solicit: true,
        flags: 0,
        target: target.to_bits(),
        ll_addr: Some(src_mac),
    }
    .emit(
        &mut f[ethernet::HEADER_LEN + ipv6::HEADER_LEN..],
        src_ip.to_bits(),
        dst,
    );
    f
}

#[cfg(test)]
mod tests_v6 {
    use super::*;
    use crate::ipv6::Ipv6Packet;
    use crate::ndisc::{NdPacket, NdRepr};
    use core::net::Ipv6Addr;

    #[test]
    fn udp6_frame() {
        let s = Udp6FrameSpec {
            dst_mac: MacAddr([2, 0, 0, 0, 0x10, 0]),
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            src_ip: "2001:db8::1".parse().unwrap(),
            dst_ip: "2001:db8:1::2".parse().unwrap(),
            sport: 1024,
            dport: 5001,
            hop_limit: 64,
            frame_bytes: 100,
        };
        let mut f = [0u8; 100];
        s.write(&mut f).unwrap();
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(
            (ip.payload_len(), ip.hop_limit(), ip.next_header()),
            (46, 64, 17)
        );
        let u = ip.payload();
        let ph = checksum::pseudo_header_v6(ip.src_u128(), ip.dst_u128(), 17, 46);
        assert_eq!(checksum::fold(checksum::add(ph, checksum::sum(u))), 0xffff);
        assert_eq!(f[PAYLOAD_OFFSET_V6 + 3], 3);
        assert!(s.write(&mut f[..99]).is_err());
    }

    #[test]
    fn ns_frame() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let src: Ipv6Addr = "2001:db8::7".parse().unwrap();
        let target: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let f = neighbor_solicit_frame(mac, src, target);
        assert_eq!(&f[0..6], &[0x33, 0x33, 0xff, 0, 0, 1]);
        let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.hop_limit(), 255);
        assert_eq!(ip.dst_addr(), "ff02::1:ff00:1".parse::<Ipv6Addr>().unwrap());
        let n = NdPacket::new_checked(ip.payload()).unwrap();
        let r = NdRepr::parse(&n, ip.src_u128(), ip.dst_u128()).unwrap();
        assert_eq!((r.target, r.ll_addr), (target.to_bits(), Some(mac)));
    }
}
