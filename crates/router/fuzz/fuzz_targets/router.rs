//! The built-in router on whatever a network can send it, and on route
//! changes from the host.
//!
//! Two routers are built from the same config (2 vNICs with addresses,
//! next hops by MAC and by ARP, routes by index and by gateway, static
//! neighbours; the first input byte picks normal or tiny tables). Every
//! frame goes to router A through `Vr::process`, one by one, and to router
//! B through `Vr::process_burst`, in bursts the input delimits. Route
//! changes (`Router::change_routes`, and control JSON through
//! `Vr::control`) go to both.
//!
//! Checked: nothing panics; a forwarded packet lies inside its buffer,
//! leaves by one of the router's vNICs with that vNIC's MAC as source, is
//! at least an Ethernet header long, and is a valid IPv4 packet (header
//! checksum verifies), a 42-byte Ethernet/IPv4 ARP packet, or an IPv6
//! packet whose header and extension header chain parse; a refused or
//! dry-run route change leaves the table as it was. While the coarse
//! clock the router reads has not moved since the input began (both
//! routers then saw the same time), A and B agree on every verdict and
//! byte and on every route change: a burst does what its packets one by
//! one would (`Vr::process_burst`'s contract).
//!
//! Input: one config byte, then records `kind flags len:u16be payload`:
//! - `kind >> 6` 0 or 1, a frame: `kind & 3` the rx vNIC (3: vNIC 2,
//!   which the router does not have); `flags` bit 0 fixes the IPv4 header
//!   checksum, bit 1 the ICMP checksum, bit 2 the IPv4 total length, bit 3
//!   ends the burst, bits 4-6 pick the headroom, bit 7 leaves no tailroom;
//! - 2, control JSON (the payload) through `Vr::control`;
//! - 3, route changes, 8 bytes each (see `route_changes`), `flags` bit 0
//!   a dry run.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vrhost_packet::arp::ArpPacket;
use vrhost_packet::checksum;
use vrhost_packet::icmp::Icmpv4Packet;
use vrhost_packet::ipv4::Ipv4Packet;
use vrhost_packet::ipv6::Ipv6Packet;
use vrhost_router::{
    ArpConfig, IcmpConfig, NeighbourConfig, NextHopConfig, RouteChanges, RouteConfig, Router,
    RouterConfig, VnicConfig,
};
use vrhost_sdk::{Packet, Verdict, Vr};

const MACS: [[u8; 6]; 2] = [[2, 0, 0, 0, 0x10, 0], [2, 0, 0, 0, 0x10, 1]];
/// Bytes before the frame in its buffer.
const HEADROOM: [usize; 8] = [128, 0, 1, 14, 28, 64, 256, 2];
/// A slot of the default region.
const SLOT: usize = 2048;
/// Frames in one burst at most (the runtime's batch).
const MAX_BURST: usize = 64;

fn mac_str(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

fn config(tiny: bool) -> RouterConfig {
    let vnic = |mac, addrs: &[&str]| VnicConfig {
        mac: mac_str(mac),
        addrs: addrs.iter().map(|s| s.to_string()).collect(),
        mtu: None,
    };
    let route = |prefix: &str, nexthop: Option<u32>, via: Option<&str>| RouteConfig {
        prefix: prefix.into(),
        nexthop,
        via: via.map(Into::into),
        vnic: None,
    };
    RouterConfig {
        vnics: vec![
            vnic(MACS[0], &["10.1.0.1/24", "10.1.2.1/31", "2001:db8::1/64", "fe80::1/64"]),
            vnic(MACS[1], &["10.1.1.1/24", "10.9.0.1/16", "2001:db8:1::1/64"]),
        ],
        nexthops: vec![
            NextHopConfig {
                vnic: 1,
                mac: "02:00:00:00:00:02".into(),
                via: None,
            },
            // Resolved by ARP.
            NextHopConfig {
                vnic: 0,
                mac: String::new(),
                via: Some("10.1.0.5".into()),
            },
        ],
        // No default route: a short prefix costs its share of the FIB's
        // 65,536 root entries on every build, which would halve the
        // executions per second; 10/8 is cheap and covers the palettes.
        routes: vec![
            route("10.0.0.0/8", None, Some("10.1.1.2")),
            route("172.16.0.0/12", Some(0), None),
            route("192.0.2.0/24", Some(0), None),
            route("198.51.100.0/24", Some(1), None),
            route("203.0.113.0/24", None, Some("10.1.0.9")),
            route("2001:db8:8000::/33", None, Some("2001:db8:1::2")),
            route("2001:db8:99::/48", Some(0), None),
        ],
        neighbours: vec![
            NeighbourConfig {
                ip: "10.1.0.9".into(),
                mac: "02:00:00:00:30:09".into(),
                vnic: None,
            },
            NeighbourConfig {
                ip: "10.1.1.3".into(),
                mac: "02:00:00:00:30:03".into(),
                vnic: Some(1),
            },
            NeighbourConfig {
                ip: "2001:db8::9".into(),
                mac: "02:00:00:00:30:19".into(),
                vnic: None,
            },
        ],
        arp: if tiny {
            ArpConfig {
                neighbours: 8,
                pending: 2,
                ..ArpConfig::default()
            }
        } else {
            ArpConfig::default()
        },
        icmp: if tiny {
            IcmpConfig { rate: 1, burst: 3 }
        } else {
            IcmpConfig::default()
        },
        ..RouterConfig::default()
    }
}

/// The time as the router reads it (`CLOCK_MONOTONIC_COARSE`, ms).
fn coarse_ms() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    (ts.tv_sec as u64) * 1000 + (ts.tv_nsec as u64) / 1_000_000
}

/// Make a frame routable on request: IPv4 total length, ICMP checksum,
/// IPv4 header checksum (in that order).
fn fix_up(f: &mut [u8], flags: u8) {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] {
        return;
    }
    let ip = &mut f[14..];
    if flags & 4 != 0 {
        let total = ip.len().min(usize::from(u16::MAX)) as u16;
        Ipv4Packet::new_unchecked(&mut *ip).set_total_len(total);
    }
    let hl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if hl < 20 || hl > ip.len() {
        return;
    }
    if flags & 2 != 0 && ip[9] == 1 && total >= hl + 4 && total <= ip.len() {
        Icmpv4Packet::new_unchecked(&mut ip[hl..total]).fill_checksum();
    }
    if flags & 1 != 0 {
        ip[10..12].fill(0);
        let c = checksum::checksum(&ip[..hl]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
}

/// A frame in its buffer.
#[derive(Clone)]
struct Frame {
    buf: Vec<u8>,
    off: usize,
    len: usize,
    rx: u16,
}

/// What became of a frame: the verdict and the packet's place and bytes.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    verdict: Verdict,
    off: usize,
    data: Vec<u8>,
}

fn outcome(p: &Packet<'_>, verdict: Verdict) -> Outcome {
    assert!(
        p.offset() + p.len() <= p.capacity(),
        "{p:?} past its buffer"
    );
    if let Verdict::Forward(v) = verdict {
        check_forwarded(p.data(), v);
    }
    Outcome {
        verdict,
        off: p.offset(),
        data: p.data().to_vec(),
    }
}

/// What every frame the router sends must be.
fn check_forwarded(d: &[u8], vnic: u16) {
    let Some(mac) = MACS.get(usize::from(vnic)) else {
        panic!("forwarded to vNIC {vnic}");
    };
    assert!(d.len() >= 14, "forwarded {} bytes", d.len());
    assert_eq!(&d[6..12], mac, "source MAC of a frame out of vNIC {vnic}");
    match [d[12], d[13]] {
        [0x08, 0x00] => {
            let ip = Ipv4Packet::new_checked(&d[14..]).expect("forwarded IPv4 parses");
            assert!(ip.verify_checksum(), "forwarded IPv4 with a bad checksum");
        }
        [0x08, 0x06] => {
            assert_eq!(d.len(), 42, "forwarded ARP");
            ArpPacket::new_checked(&d[14..]).expect("forwarded ARP parses");
        }
        [0x86, 0xdd] => {
            let ip = Ipv6Packet::new_checked(&d[14..]).expect("forwarded IPv6 parses");
            ip.upper_layer().expect("forwarded IPv6 extension headers parse");
        }
        t => panic!("forwarded a frame of EtherType {t:02x?}"),
    }
}

/// Route changes from 8-byte entries `op len a b c d via vnic`: `op & 3`
/// 0 deletes `a.b.c.d/len`, 1 adds it by gateway, 2 by next hop `vnic`,
/// 3 by gateway out of vNIC `vnic`. The gateway is picked by `via` among
/// neighbours on either vNIC, the router's own address, one in no
/// subnet, or anything.
fn route_changes(p: &[u8], dry_run: bool) -> RouteChanges {
    let mut ch = RouteChanges {
        dry_run,
        ..RouteChanges::default()
    };
    for e in p.chunks_exact(8) {
        let len = if e[1] < 0xf0 { e[1] % 33 } else { e[1] }; // sometimes > 32
        let prefix = format!("{}.{}.{}.{}/{len}", e[2], e[3], e[4], e[5]);
        let via = match e[6] % 6 {
            0 => "10.1.1.2".to_string(),
            1 => format!("10.1.0.{}", e[7]),
            2 => format!("10.9.{}.{}", e[7] >> 4, e[7]),
            3 => "10.1.0.1".to_string(),
            4 => format!("172.16.0.{}", e[7]),
            _ => format!("{}.{}.{}.{}", e[7], e[6], e[5], e[4]),
        };
        let mut r = RouteConfig {
            prefix: prefix.clone(),
            ..RouteConfig::default()
        };
        match e[0] & 3 {
            0 => {
                ch.del.push(prefix);
                continue;
            }
            1 => r.via = Some(via),
            2 => r.nexthop = Some(u32::from(e[7] % 4)),
            _ => {
                r.via = Some(via);
                r.vnic = Some(u16::from(e[7] % 3));
            }
        }
        ch.add.push(r);
    }
    ch
}

struct Run {
    a: Router,
    b: Router,
    burst: Vec<Frame>,
    /// The time when the input began; while the clock says the same, A
    /// and B are compared.
    t0: u64,
    same_time: bool,
}

impl Run {
    fn stable(&mut self) -> bool {
        self.same_time &= coarse_ms() == self.t0;
        self.same_time
    }

    /// The burst through A one by one and through B at once.
    fn flush(&mut self) {
        if self.burst.is_empty() {
            return;
        }
        let mut one_by_one = Vec::with_capacity(self.burst.len());
        for f in &self.burst {
            let mut buf = f.buf.clone();
            let mut p = Packet::new(&mut buf, f.off, f.len, f.rx).expect("in its buffer");
            let v = self.a.process(&mut p);
            one_by_one.push(outcome(&p, v));
        }
        let mut bufs: Vec<Frame> = std::mem::take(&mut self.burst);
        let mut pkts: Vec<Packet<'_>> = bufs
            .iter_mut()
            .map(|f| Packet::new(&mut f.buf, f.off, f.len, f.rx).expect("in its buffer"))
            .collect();
        let mut verdicts = vec![Verdict::Drop(vrhost_sdk::DropReason::Other); pkts.len()];
        self.b.process_burst(&mut pkts, &mut verdicts);
        let at_once: Vec<Outcome> = pkts
            .iter()
            .zip(&verdicts)
            .map(|(p, &v)| outcome(p, v))
            .collect();
        if self.stable() {
            for (i, (x, y)) in one_by_one.iter().zip(&at_once).enumerate() {
                assert_eq!(x, y, "packet {i} of the burst: one by one vs burst");
            }
        }
    }

    fn change(&mut self, ch: &RouteChanges) {
        let (before_a, before_b) = (self.a.routes(), self.b.routes());
        let ra = self.a.change_routes(ch);
        let rb = self.b.change_routes(ch);
        for (r, before, after) in [
            (&ra, before_a, self.a.routes()),
            (&rb, before_b, self.b.routes()),
        ] {
            match r {
                Ok(reply) => {
                    assert_eq!(reply.routes, after);
                    assert_eq!(reply.added, ch.add.len());
                    assert_eq!(reply.deleted, ch.del.len());
                    if ch.dry_run {
                        assert_eq!(after, before, "a dry run changed the table");
                    }
                }
                Err(e) => assert_eq!(after, before, "refused ({e}) but changed"),
            }
        }
        if self.stable() {
            assert_eq!(ra, rb);
        }
    }

    fn control(&mut self, body: &serde_json::Value) {
        let (before_a, before_b) = (self.a.routes(), self.b.routes());
        let ra = self.a.control(body);
        let rb = self.b.control(body);
        if ra.is_err() {
            assert_eq!(self.a.routes(), before_a);
        }
        if rb.is_err() {
            assert_eq!(self.b.routes(), before_b);
        }
        if self.stable() {
            assert_eq!(ra, rb);
        }
    }
}

fuzz_target!(
    init: {
        // Two routers per input, each with a 256 KiB FIB root: above
        // glibc's mmap threshold, every one would be fresh pages (page
        // faults, half the run time). Keep them on the heap instead.
        // SAFETY: mallopt only changes allocator parameters.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        }
    },
    |data: &[u8]| {
    let Some((&cfg_byte, mut rest)) = data.split_first() else {
        return;
    };
    let cfg = config(cfg_byte & 1 != 0);
    let mut run = Run {
        t0: coarse_ms(),
        a: Router::new(&cfg).expect("the config is valid"),
        b: Router::new(&cfg).expect("the config is valid"),
        burst: Vec::new(),
        same_time: true,
    };
    while rest.len() >= 4 {
        let (kind, flags) = (rest[0], rest[1]);
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        let payload = &rest[4..(4 + len).min(rest.len())];
        rest = &rest[4 + payload.len()..];
        match kind >> 6 {
            0 | 1 => {
                let rx = if kind & 3 == 3 { 2 } else { u16::from(kind & 1) };
                let off = HEADROOM[usize::from(flags >> 4 & 7)];
                let cap = if flags & 0x80 != 0 {
                    off + payload.len()
                } else {
                    (off + payload.len()).max(SLOT)
                };
                let mut buf = vec![0u8; cap];
                let frame = &mut buf[off..off + payload.len()];
                frame.copy_from_slice(payload);
                fix_up(frame, flags);
                run.burst.push(Frame {
                    buf,
                    off,
                    len: payload.len(),
                    rx,
                });
                if flags & 8 != 0 || run.burst.len() == MAX_BURST {
                    run.flush();
                }
            }
            2 => {
                run.flush();
                if let Ok(body) = serde_json::from_slice::<serde_json::Value>(payload) {
                    run.control(&body);
                }
            }
            _ => {
                run.flush();
                run.change(&route_changes(payload, flags & 1 != 0));
            }
        }
    }
    run.flush();
});
