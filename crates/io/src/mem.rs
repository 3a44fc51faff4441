//! `MemPort`: an in-memory frame generator, LVRM's main-memory adapter.
//!
//! All frames are built when the port is created, from a [`MemPortConfig`],
//! into one contiguous buffer of `templates` frames (at most
//! [`MAX_TEMPLATE_BYTES`] in total). [`Port::rx_burst`] then hands out
//! the next templates cyclically, as borrowed slices: no copy, no random
//! number and no checksum per frame, so a benchmark measures the path under
//! test, not the generator. The only per-frame work is optional: with
//! [`MemPortConfig::stamp_sequence`] each frame gets a sequence number
//! written into its UDP payload as it is handed out.
//!
//! Destinations follow [`DstMode`]: one address, addresses drawn uniformly
//! from a set of prefixes (a prefix uniformly, then a host inside it), or
//! Europa's random class-C-style addresses. Sources cycle over
//! [`MemPortConfig::src_ips`] (template `i` uses `src_ips[i % len]`), so
//! each source gets an equal share of the frames, and a classifier keyed
//! on source can fan the stream out to several VRs.
//!
//! With an IPv6 destination mode ([`DstMode::Fixed6`],
//! [`DstMode::Prefixes6`]) the frames are UDP over IPv6 (no extension
//! header, checksum filled), from the source addresses mapped into
//! `fd00::/96` ([`source6`]), with `ttl` as the hop limit.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vrhost_packet::MacAddr;
use vrhost_packet::build::{
    self, BuildError, BuildOptions, PayloadFill, Udp6FrameSpec, UdpFrameSpec,
};

use crate::{Port, PortStats};

/// Cap on the memory of all templates together: 16 MiB. A config asking
/// for more gets `MAX_TEMPLATE_BYTES / frame_bytes` templates.
pub const MAX_TEMPLATE_BYTES: usize = 16 << 20;

/// Default number of templates: enough distinct destinations to defeat a
/// route cache, few enough to stay in L2/L3 at small frame sizes.
pub const DEFAULT_TEMPLATES: usize = 4096;

/// Where the generated frames go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DstMode {
    /// Every frame to one address.
    Fixed(Ipv4Addr),
    /// A prefix chosen uniformly from the list, then a uniformly random
    /// address inside it. Prefixes are `(address as host-order u32, length)`;
    /// bits past the length are ignored.
    Prefixes(Vec<(u32, u8)>),
    /// Europa's experiment: `a.b.c.x` with `a` in 1..=223 except 127 (the
    /// old class A, B and C space), `b`, `c` uniform, and `x` in 1..=254
    /// (no network or broadcast address of the /24).
    RandomClassC,
    /// IPv6: every frame to one address.
    Fixed6(Ipv6Addr),
    /// IPv6: a prefix chosen uniformly, then a random address inside it.
    /// Prefixes are `(address as u128, length)`.
    Prefixes6(Vec<(u128, u8)>),
}

impl DstMode {
    /// True if the frames are IPv6.
    pub fn is_ipv6(&self) -> bool {
        matches!(self, DstMode::Fixed6(_) | DstMode::Prefixes6(_))
    }

    /// Longest prefix length of the family.
    fn max_len(&self) -> u8 {
        if self.is_ipv6() { 128 } else { 32 }
    }
}

/// The IPv6 source of IPv4 source `a` in IPv6 frames: `fd00::a.b.c.d`
/// (a unique local address; the IPv4 address in its last 32 bits).
pub fn source6(a: Ipv4Addr) -> Ipv6Addr {
    Ipv6Addr::from((0xfd00u128 << 112) | u128::from(u32::from(a)))
}

/// A [`MemPort`]'s configuration. [`Default`] gives 64-byte frames from
/// 10.0.0.1:1024 to 10.1.2.3:1024, 4096 templates, endless.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemPortConfig {
    /// Frame length as stored, without FCS: 64..=1518.
    pub frame_bytes: usize,
    /// Destination addresses.
    pub dst: DstMode,
    /// Source addresses, used in turn (at least one).
    pub src_ips: Vec<Ipv4Addr>,
    /// Ethernet source.
    pub src_mac: MacAddr,
    /// Ethernet destination (the host's or the VR's vNIC MAC).
    pub dst_mac: MacAddr,
    /// UDP source port.
    pub sport: u16,
    /// UDP destination port.
    pub dport: u16,
    /// IPv4 TTL.
    pub ttl: u8,
    /// Number of distinct pre-built frames (capped by [`MAX_TEMPLATE_BYTES`]).
    pub templates: usize,
    /// Seed of the generator that picks destinations: same seed, same frames.
    pub seed: u64,
    /// Stop after this many frames (`None`: endless).
    pub limit: Option<u64>,
    /// Write a big-endian u64 sequence number (0, 1, 2, ...) into the first
    /// 8 bytes of each frame's UDP payload as it is handed out, for
    /// reordering and loss measurements. The UDP checksum is then 0.
    pub stamp_sequence: bool,
    /// Hand out at most this many frames per second, counted from the
    /// first `rx_burst` (`None`: as fast as asked).
    pub pps: Option<u64>,
}

impl Default for MemPortConfig {
    fn default() -> Self {
        MemPortConfig {
            frame_bytes: 64,
            dst: DstMode::Fixed(Ipv4Addr::new(10, 1, 2, 3)),
            src_ips: vec![Ipv4Addr::new(10, 0, 0, 1)],
            src_mac: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
            dst_mac: MacAddr([0x02, 0, 0, 0, 0, 0x02]),
            sport: 1024,
            dport: 1024,
            ttl: 64,
            templates: DEFAULT_TEMPLATES,
            seed: 0x5eed,
            limit: None,
            stamp_sequence: false,
            pps: None,
        }
    }
}

/// A [`MemPortConfig`] that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemPortError {
    /// `frame_bytes` outside 64..=1518.
    #[error("frame size {frame_bytes} bytes outside 64..=1518")]
    FrameSize {
        /// The size asked for.
        frame_bytes: usize,
    },
    /// `templates` is 0.
    #[error("at least one template is needed")]
    NoTemplates,
    /// `src_ips` is empty.
    #[error("at least one source address is needed")]
    NoSources,
    /// `DstMode::Prefixes` with an empty list.
    #[error("destination prefix list is empty")]
    NoPrefixes,
    /// A prefix length above 32 (IPv6: 128).
    #[error("destination prefix #{index} has length {len}, longer than an address")]
    PrefixLen {
        /// Position in the list.
        index: usize,
        /// The length given.
        len: u8,
    },
    /// `stamp_sequence` with IPv6 frames: their UDP checksum is mandatory,
    /// and a stamp would break it.
    #[error("sequence stamps are for IPv4 frames only (an IPv6 UDP checksum cannot be 0)")]
    StampIpv6,
    /// The frame builder refused the frame (not expected after validation).
    #[error("building a template: {0}")]
    Build(#[from] BuildError),
}

impl MemPortConfig {
    /// Check the config as a whole.
    ///
    /// # Errors
    /// The first problem found, as a [`MemPortError`].
    pub fn validate(&self) -> Result<(), MemPortError> {
        if !build::FRAME_BYTES.contains(&self.frame_bytes) {
            return Err(MemPortError::FrameSize {
                frame_bytes: self.frame_bytes,
            });
        }
        if self.templates == 0 {
            return Err(MemPortError::NoTemplates);
        }
        if self.src_ips.is_empty() {
            return Err(MemPortError::NoSources);
        }
        let max = self.dst.max_len();
        let lens: Vec<u8> = match &self.dst {
            DstMode::Prefixes(p) => p.iter().map(|&(_, l)| l).collect(),
            DstMode::Prefixes6(p) => p.iter().map(|&(_, l)| l).collect(),
            _ => vec![max],
        };
        if lens.is_empty() {
            return Err(MemPortError::NoPrefixes);
        }
        if let Some((index, &len)) = lens.iter().enumerate().find(|(_, l)| **l > max) {
            return Err(MemPortError::PrefixLen { index, len });
        }
        if self.stamp_sequence && self.dst.is_ipv6() {
            return Err(MemPortError::StampIpv6);
        }
        Ok(())
    }

    /// The number of templates a port built from this config holds:
    /// `templates`, capped so that they fit in [`MAX_TEMPLATE_BYTES`].
    pub fn effective_templates(&self) -> usize {
        self.templates
            .min((MAX_TEMPLATE_BYTES / self.frame_bytes.max(1)).max(1))
    }
}

fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

fn mask6(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

fn pick_dst(mode: &DstMode, rng: &mut SmallRng) -> IpAddr {
    match mode {
        DstMode::Fixed(a) => IpAddr::V4(*a),
        DstMode::Fixed6(a) => IpAddr::V6(*a),
        DstMode::Prefixes(p) => {
            let (net, len) = p[rng.random_range(0..p.len())];
            let m = mask(len);
            IpAddr::V4(Ipv4Addr::from((net & m) | (rng.random::<u32>() & !m)))
        }
        DstMode::Prefixes6(p) => {
            let (net, len) = p[rng.random_range(0..p.len())];
            let m = mask6(len);
            IpAddr::V6(Ipv6Addr::from((net & m) | (rng.random::<u128>() & !m)))
        }
        DstMode::RandomClassC => {
            let a = loop {
                let a = rng.random_range(1..=223u8);
                if a != 127 {
                    break a;
                }
            };
            IpAddr::V4(Ipv4Addr::new(
                a,
                rng.random(),
                rng.random(),
                rng.random_range(1..=254),
            ))
        }
    }
}

/// Write template `i` of `cfg` into `frame`.
fn write_template(
    cfg: &MemPortConfig,
    i: usize,
    rng: &mut SmallRng,
    opts: BuildOptions,
    frame: &mut [u8],
) -> Result<(), BuildError> {
    let src = cfg.src_ips[i % cfg.src_ips.len()];
    match pick_dst(&cfg.dst, rng) {
        IpAddr::V4(dst_ip) => UdpFrameSpec {
            dst_mac: cfg.dst_mac,
            src_mac: cfg.src_mac,
            src_ip: src,
            dst_ip,
            sport: cfg.sport,
            dport: cfg.dport,
            ttl: cfg.ttl,
            frame_bytes: frame.len(),
        }
        .write_with(frame, opts),
        IpAddr::V6(dst_ip) => Udp6FrameSpec {
            dst_mac: cfg.dst_mac,
            src_mac: cfg.src_mac,
            src_ip: source6(src),
            dst_ip,
            sport: cfg.sport,
            dport: cfg.dport,
            hop_limit: cfg.ttl,
            frame_bytes: frame.len(),
        }
        .write(frame),
    }
}

/// The in-memory generator port. See the [module docs](self).
#[derive(Debug)]
pub struct MemPort {
    name: String,
    /// `count` frames of `frame_bytes` each, back to back.
    frames: Vec<u8>,
    frame_bytes: usize,
    count: usize,
    /// Index of the next template to hand out.
    next: usize,
    /// Frames handed out so far (also the next sequence number).
    sent: u64,
    limit: Option<u64>,
    stamp_sequence: bool,
    pps: Option<u64>,
    /// When the first frame was asked for (pacing starts there).
    start: Option<std::time::Instant>,
    stats: PortStats,
}

impl MemPort {
    /// Validate `cfg` and build every template.
    ///
    /// # Errors
    /// [`MemPortError`] when the config is invalid.
    pub fn new(name: impl Into<String>, cfg: MemPortConfig) -> Result<MemPort, MemPortError> {
        cfg.validate()?;
        let count = cfg.effective_templates();
        let fb = cfg.frame_bytes;
        let mut frames = vec![0u8; count * fb];
        let mut rng = SmallRng::seed_from_u64(cfg.seed);
        let opts = BuildOptions {
            udp_checksum: !cfg.stamp_sequence,
            payload: PayloadFill::Zero,
        };
        for (i, frame) in frames.chunks_exact_mut(fb).enumerate() {
            write_template(&cfg, i, &mut rng, opts, frame)?;
        }
        Ok(MemPort {
            name: name.into(),
            frames,
            frame_bytes: fb,
            count,
            next: 0,
            sent: 0,
            limit: cfg.limit,
            stamp_sequence: cfg.stamp_sequence,
            pps: cfg.pps,
            start: None,
            stats: PortStats::default(),
        })
    }

    /// Number of templates (after the memory cap).
    pub fn templates(&self) -> usize {
        self.count
    }

    /// Length of every frame.
    pub fn frame_bytes(&self) -> usize {
        self.frame_bytes
    }

    /// Template `i` as it is now (with the last sequence number stamped).
    ///
    /// # Panics
    /// If `i >= self.templates()`.
    pub fn template(&self, i: usize) -> &[u8] {
        &self.frames[i * self.frame_bytes..(i + 1) * self.frame_bytes]
    }

    /// Frames handed out so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Whether the `limit` has been reached (never, without one).
    pub fn is_done(&self) -> bool {
        self.limit.is_some_and(|l| self.sent >= l)
    }
}

impl Port for MemPort {
    fn name(&self) -> &str {
        &self.name
    }

    /// The next `out.len()` templates (fewer when the limit is near; at most
    /// one pass over the templates per call when stamping, so that no frame
    /// appears twice in a burst with two numbers).
    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        let mut n = out.len();
        if let Some(limit) = self.limit {
            n = n.min(usize::try_from(limit.saturating_sub(self.sent)).unwrap_or(usize::MAX));
        }
        if self.stamp_sequence {
            n = n.min(self.count);
        }
        if let Some(pps) = self.pps {
            // Frames due by now at `pps`: exact over time, one clock read
            // per burst.
            let start = *self.start.get_or_insert_with(std::time::Instant::now);
            let due = (start.elapsed().as_nanos() * u128::from(pps) / 1_000_000_000) as u64;
            n = n.min(usize::try_from(due.saturating_sub(self.sent)).unwrap_or(usize::MAX));
        }
        if n == 0 {
            return 0;
        }
        let fb = self.frame_bytes;
        if self.stamp_sequence {
            let mut i = self.next;
            for k in 0..n as u64 {
                let at = i * fb + build::PAYLOAD_OFFSET;
                self.frames[at..at + 8].copy_from_slice(&(self.sent + k).to_be_bytes());
                i += 1;
                if i == self.count {
                    i = 0;
                }
            }
        }
        self.sent += n as u64;
        self.stats.rx_packets += n as u64;
        self.stats.rx_bytes += (n * fb) as u64;
        let mut i = self.next;
        self.next = (self.next + n) % self.count;
        let frames: &'a [u8] = &self.frames;
        for slot in &mut out[..n] {
            *slot = &frames[i * fb..(i + 1) * fb];
            i += 1;
            if i == self.count {
                i = 0;
            }
        }
        n
    }

    /// Accepts and discards frames, counting them as sent: the memory
    /// adapter is a sink too, like [`NullPort`](crate::null::NullPort).
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        self.stats.tx_packets += frames.len() as u64;
        self.stats.tx_bytes += frames.iter().map(|f| f.len() as u64).sum::<u64>();
        frames.len()
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vrhost_packet::FlowKey;
    use vrhost_packet::ipv4::Ipv4Packet;
    use vrhost_packet::udp::UdpPacket;

    fn port(cfg: MemPortConfig) -> MemPort {
        MemPort::new("mem0", cfg).unwrap()
    }

    fn drain(p: &mut MemPort, bursts: usize, burst: usize) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        for _ in 0..bursts {
            let mut out: Vec<&[u8]> = vec![&[]; burst];
            let n = p.rx_burst(&mut out);
            all.extend(out[..n].iter().map(|f| f.to_vec()));
        }
        all
    }

    #[test]
    fn validation() {
        let bad = |c: MemPortConfig| MemPort::new("m", c).unwrap_err();
        let d = MemPortConfig::default;
        assert_eq!(
            bad(MemPortConfig {
                frame_bytes: 63,
                ..d()
            }),
            MemPortError::FrameSize { frame_bytes: 63 }
        );
        assert_eq!(
            bad(MemPortConfig {
                frame_bytes: 1519,
                ..d()
            }),
            MemPortError::FrameSize { frame_bytes: 1519 }
        );
        assert_eq!(
            bad(MemPortConfig {
                templates: 0,
                ..d()
            }),
            MemPortError::NoTemplates
        );
        assert_eq!(
            bad(MemPortConfig {
                src_ips: vec![],
                ..d()
            }),
            MemPortError::NoSources
        );
        assert_eq!(
            bad(MemPortConfig {
                dst: DstMode::Prefixes(vec![]),
                ..d()
            }),
            MemPortError::NoPrefixes
        );
        assert_eq!(
            bad(MemPortConfig {
                dst: DstMode::Prefixes(vec![(0, 8), (0, 33)]),
                ..d()
            }),
            MemPortError::PrefixLen { index: 1, len: 33 }
        );
        assert!(
            bad(MemPortConfig {
                templates: 0,
                ..d()
            })
            .to_string()
            .contains("template")
        );
    }

    #[test]
    fn templates_are_valid_frames() {
        let srcs = vec![
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            Ipv4Addr::new(10, 0, 0, 3),
        ];
        for fb in [64, 65, 512, 1518] {
            let p = port(MemPortConfig {
                frame_bytes: fb,
                dst: DstMode::RandomClassC,
                src_ips: srcs.clone(),
                templates: 300,
                ..MemPortConfig::default()
            });
            assert_eq!(p.templates(), 300);
            for i in 0..p.templates() {
                let f = p.template(i);
                assert_eq!(f.len(), fb);
                let k = FlowKey::extract(f).unwrap();
                assert_eq!(k.src, srcs[i % 3].to_bits());
                let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
                assert!(ip.verify_checksum());
                let u = UdpPacket::new_checked(ip.payload()).unwrap();
                assert_ne!(u.checksum(), 0);
                assert!(u.verify_checksum(ip.src_addr(), ip.dst_addr()));
            }
        }
    }

    #[test]
    fn ipv6_templates() {
        use vrhost_packet::checksum;
        use vrhost_packet::ipv6::Ipv6Packet;
        let srcs = vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)];
        let net = u128::from("2001:db8:100::".parse::<Ipv6Addr>().unwrap());
        for fb in [64, 1518] {
            let p = port(MemPortConfig {
                frame_bytes: fb,
                dst: DstMode::Prefixes6(vec![(net, 40)]),
                src_ips: srcs.clone(),
                templates: 200,
                ttl: 9,
                ..MemPortConfig::default()
            });
            for i in 0..p.templates() {
                let f = p.template(i);
                assert_eq!((f.len(), &f[12..14]), (fb, &[0x86, 0xdd][..]));
                let ip = Ipv6Packet::new_checked(&f[14..]).unwrap();
                assert_eq!(ip.src_addr(), source6(srcs[i % 2]));
                assert_eq!(ip.dst_u128() >> 88, net >> 88, "inside the /40");
                assert_eq!((ip.hop_limit(), ip.next_header()), (9, 17));
                let ph = checksum::pseudo_header_v6(
                    ip.src_u128(),
                    ip.dst_u128(),
                    17,
                    u32::from(ip.payload_len()),
                );
                let sum = checksum::fold(checksum::add(ph, checksum::sum(ip.payload())));
                assert_eq!(sum, 0xffff, "UDP checksum of template {i}");
            }
        }
        let fixed = DstMode::Fixed6(Ipv6Addr::LOCALHOST);
        let p = port(MemPortConfig {
            dst: fixed.clone(),
            templates: 3,
            ..MemPortConfig::default()
        });
        assert_eq!(&p.template(2)[38..54], &Ipv6Addr::LOCALHOST.octets());
        let bad = |dst, stamp_sequence| {
            MemPort::new(
                "m",
                MemPortConfig {
                    dst,
                    stamp_sequence,
                    ..MemPortConfig::default()
                },
            )
            .unwrap_err()
        };
        assert_eq!(bad(fixed, true), MemPortError::StampIpv6);
        assert_eq!(
            bad(DstMode::Prefixes6(vec![(0, 129)]), false),
            MemPortError::PrefixLen { index: 0, len: 129 }
        );
        assert_eq!(
            bad(DstMode::Prefixes6(vec![]), false),
            MemPortError::NoPrefixes
        );
        assert_eq!(
            bad(DstMode::Prefixes(vec![(0, 100)]), false),
            MemPortError::PrefixLen { index: 0, len: 100 }
        );
    }

    #[test]
    fn dst_modes() {
        let fixed = port(MemPortConfig {
            templates: 50,
            ..MemPortConfig::default()
        });
        assert!((0..50).all(|i| FlowKey::extract(fixed.template(i)).unwrap().dst == 0x0a01_0203));

        let cc = port(MemPortConfig {
            dst: DstMode::RandomClassC,
            templates: 4096,
            ..MemPortConfig::default()
        });
        let dsts: Vec<Ipv4Addr> = (0..4096)
            .map(|i| FlowKey::extract(cc.template(i)).unwrap().dst.into())
            .collect();
        assert!(dsts.iter().all(|d| {
            let [a, _, _, x] = d.octets();
            (1..=223).contains(&a) && a != 127 && (1..=254).contains(&x)
        }));
        let distinct: std::collections::HashSet<_> = dsts.iter().collect();
        assert!(distinct.len() > 4000, "{} distinct", distinct.len());

        // 10.0.0.0/8, 192.168.1.0/24 (host bits in the prefix ignored), a /32, and /0.
        let prefixes = vec![(0x0a00_0000, 8), (0xc0a8_01ff, 24), (0x0102_0304, 32)];
        let p = port(MemPortConfig {
            dst: DstMode::Prefixes(prefixes.clone()),
            ..MemPortConfig::default()
        });
        let mut hits = [0usize; 3];
        for i in 0..p.templates() {
            let d = FlowKey::extract(p.template(i)).unwrap().dst;
            let j = prefixes
                .iter()
                .position(|&(n, l)| d & mask(l) == n & mask(l))
                .expect("dst outside prefixes");
            hits[j] += 1;
        }
        // Uniform over prefixes: ~1365 each.
        assert!(hits.iter().all(|&h| (1100..1650).contains(&h)), "{hits:?}");
        let any = port(MemPortConfig {
            dst: DstMode::Prefixes(vec![(0, 0)]),
            templates: 10,
            ..MemPortConfig::default()
        });
        assert!(FlowKey::extract(any.template(0)).is_ok());
    }

    #[test]
    fn seeded() {
        let c = MemPortConfig {
            dst: DstMode::RandomClassC,
            templates: 64,
            ..MemPortConfig::default()
        };
        let (a, b) = (port(c.clone()), port(c.clone()));
        assert_eq!(a.frames, b.frames);
        let other = port(MemPortConfig { seed: 1, ..c });
        assert_ne!(a.frames, other.frames);
    }

    #[test]
    fn cyclic_zero_copy() {
        let mut p = port(MemPortConfig {
            templates: 5,
            ..MemPortConfig::default()
        });
        let burst = |p: &mut MemPort, n: usize| -> Vec<*const u8> {
            let mut out: Vec<&[u8]> = vec![&[]; n];
            let got = p.rx_burst(&mut out);
            out[..got].iter().map(|f| f.as_ptr()).collect()
        };
        let ptrs = burst(&mut p, 7);
        assert_eq!(ptrs.len(), 7);
        assert_eq!(
            ptrs[0], ptrs[5],
            "template 0 again after 5 frames, same memory"
        );
        assert_eq!(ptrs[1], ptrs[6]);
        assert_eq!(ptrs[0], p.template(0).as_ptr());
        assert_eq!(burst(&mut p, 3).len(), 3);
        // 7 + 3 = 10 frames: next is template 0.
        assert_eq!(burst(&mut p, 1), vec![p.template(0).as_ptr()]);
        assert_eq!(p.stats().rx_packets, 11);
        assert_eq!(p.stats().rx_bytes, 11 * 64);
        assert_eq!(p.rx_burst(&mut []), 0);
    }

    #[test]
    fn limit() {
        let mut p = port(MemPortConfig {
            templates: 4,
            limit: Some(10),
            ..MemPortConfig::default()
        });
        assert_eq!(drain(&mut p, 5, 3).len(), 10);
        assert!(p.is_done());
        assert_eq!(p.stats().rx_packets, 10);
        let mut p = port(MemPortConfig {
            limit: Some(0),
            ..MemPortConfig::default()
        });
        assert!(drain(&mut p, 2, 8).is_empty());
    }

    #[test]
    fn stamp_sequence() {
        let mut p = port(MemPortConfig {
            templates: 3,
            stamp_sequence: true,
            frame_bytes: 64,
            ..MemPortConfig::default()
        });
        // Bursts larger than the template count are cut to one pass.
        let frames = drain(&mut p, 4, 5);
        assert_eq!(frames.len(), 12);
        for (i, f) in frames.iter().enumerate() {
            let seq = u64::from_be_bytes(f[42..50].try_into().unwrap());
            assert_eq!(seq, i as u64);
            assert_eq!(&f[40..42], &[0, 0], "UDP checksum off when stamping");
            assert!(Ipv4Packet::new_checked(&f[14..]).unwrap().verify_checksum());
        }
    }

    #[test]
    fn memory_cap() {
        let c = MemPortConfig {
            frame_bytes: 1518,
            templates: 1 << 20,
            ..MemPortConfig::default()
        };
        assert_eq!(c.effective_templates(), MAX_TEMPLATE_BYTES / 1518);
        let p = port(c);
        assert!(p.templates() * p.frame_bytes() <= MAX_TEMPLATE_BYTES);
    }

    #[test]
    fn tx_counts() {
        let mut p = port(MemPortConfig::default());
        assert_eq!(p.tx_burst(&[&[0u8; 60], &[0u8; 70]]), 2);
        assert_eq!((p.stats().tx_packets, p.stats().tx_bytes), (2, 130));
    }

    #[test]
    fn conformance() {
        crate::conformance::check_source(&mut port(MemPortConfig {
            templates: 8,
            ..MemPortConfig::default()
        }));
    }
}
