//! The AF_XDP port on a veth pair between two throwaway network namespaces
//! (run as root). The port opens `a0` in namespace A; the peer `b0` in
//! namespace B sends and receives test frames with a plain AF_PACKET
//! socket. Test frames carry the local experimental EtherType 0x88b5, a
//! magic and a sequence number, so stray frames are told apart.
//!
//! Every namespace (and so every interface and XDP program in it) is
//! deleted on drop, also when a test fails.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use aya::maps::{MapData, PerCpuArray, XskMap};
use aya::programs::Xdp;
use aya::{Ebpf, EbpfLoader};
use vrhost_io::Port;
use vrhost_io::af_xdp::{
    AfXdpConfig, AfXdpError, AfXdpPort, AttachMode, BindMode, XdpLink, XdpProgram,
};
use vrhost_lab::{Netns, veth};

mod programs;
mod queues;
mod txlive;

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0xa0, 0x01];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0xb0, 0x01];
const ETHERTYPE: u16 = 0x88b5;
const MAGIC: &[u8; 4] = b"VRHX";
/// Guard against a hang, never a performance bound.
const PATIENCE: Duration = Duration::from_secs(10);

fn mac_str(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Namespaces A and B joined by veth `a0` (A) -- `b0` (B), IPv6 off so the
/// link stays quiet.
fn lab() -> (Netns, Netns) {
    let a = Netns::unique("vrh-xdp").unwrap();
    let b = Netns::unique("vrh-xdp").unwrap();
    for ns in [&a, &b] {
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
            .unwrap();
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
    }
    veth(
        &a,
        "a0",
        Some(&mac_str(&MAC_A)),
        &b,
        "b0",
        Some(&mac_str(&MAC_B)),
    )
    .unwrap();
    (a, b)
}

/// Test frame `seq` of `len` bytes (at least 22) from `src` to `dst`.
fn frame(seq: u32, len: usize, src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((seq as usize).wrapping_add(f.len()) as u8);
    }
    f
}

/// The sequence number of a test frame, `None` for anything else.
fn seq_of(f: &[u8]) -> Option<u32> {
    (f.len() >= 22 && f[12..14] == ETHERTYPE.to_be_bytes() && &f[14..18] == MAGIC)
        .then(|| u32::from_be_bytes(f[18..22].try_into().unwrap()))
}

/// A length between 60 and 1514 that varies with `seq`.
fn len_of(seq: u32) -> usize {
    60 + (seq as usize * 97) % (1514 - 60 + 1)
}

/// A plain AF_PACKET socket on one interface: the peer's side.
struct Raw {
    fd: OwnedFd,
}

impl Raw {
    /// Open on `ifname` in the calling thread's namespace.
    fn open(ifname: &str) -> Raw {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: socket(2) takes no pointers.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                proto.into(),
            )
        };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let name = CString::new(ifname).unwrap();
        // SAFETY: a valid NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert!(ifindex > 0, "{ifname} not found");
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a live sockaddr_ll of the length passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        let raw = Raw { fd };
        // Room for every frame a test sends before reading; our own
        // outgoing frames are not wanted.
        raw.set_int(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 16 << 20);
        raw.set_int(libc::SOL_PACKET, 23 /* PACKET_IGNORE_OUTGOING */, 1);
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 200_000,
        };
        // SAFETY: `tv` is a live timeval of the length passed.
        let r = unsafe {
            libc::setsockopt(
                raw.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as u32,
            )
        };
        assert_eq!(r, 0);
        raw
    }

    fn set_int(&self, level: i32, opt: i32, v: i32) {
        // SAFETY: `v` is a live int of the length passed.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                opt,
                (&v as *const i32).cast(),
                4,
            )
        };
        assert_eq!(
            r,
            0,
            "setsockopt {opt}: {}",
            std::io::Error::last_os_error()
        );
    }

    fn send(&self, f: &[u8]) {
        // SAFETY: `f` is a live buffer of the length passed.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), f.as_ptr().cast(), f.len(), 0) };
        assert_eq!(
            r,
            f.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// The next frame, `None` after the 200 ms receive timeout.
    fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: `buf` is a live, writable buffer of the length passed.
        let r = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        (r >= 0).then_some(r as usize)
    }
}

/// A counter of `dev` in namespace `ns` (`ip netns exec` mounts that
/// namespace's sysfs).
fn counter(ns: &Netns, dev: &str, name: &str) -> u64 {
    let path = format!("/sys/class/net/{dev}/statistics/{name}");
    ns.exec("cat", &[&path]).unwrap().trim().parse().unwrap()
}

/// The XDP attachment `ip link show a0` reports in `ns`: `"xdp"` (native),
/// `"xdpgeneric"`, or `None`.
fn xdp_on_a0(ns: &Netns) -> Option<String> {
    let out = ns.ip(&["link", "show", "a0"]).unwrap();
    out.split_whitespace()
        .find(|t| matches!(*t, "xdp" | "xdpgeneric" | "xdpoffload" | "xdpmulti"))
        .map(str::to_string)
        .or_else(|| out.contains("prog/xdp").then(|| "prog/xdp".to_string()))
}

/// What descriptor `fd` of this process is (`socket:[INODE]`), if open.
fn fd_target(fd: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Mappings of this process backed by `target` (a socket's rings).
fn mappings_of(target: &str) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().filter(|l| l.ends_with(target)).count()
}

fn open(ns: &Netns, cfg: &AfXdpConfig) -> AfXdpPort {
    ns.run(|| AfXdpPort::open("a0", cfg)).unwrap().unwrap()
}

/// Read test frames `seqs` from the port, in order, checking each against
/// what was sent (other frames are skipped).
fn expect_rx(port: &mut AfXdpPort, seqs: std::ops::Range<u32>) {
    let mut next = seqs.start;
    let deadline = Instant::now() + PATIENCE;
    while next < seqs.end {
        assert!(
            Instant::now() < deadline,
            "only {} of {:?} arrived",
            next - seqs.start,
            seqs
        );
        let mut out: [&[u8]; 32] = [&[]; 32];
        let n = port.rx_burst(&mut out);
        for f in &out[..n] {
            let Some(seq) = seq_of(f) else { continue };
            assert_eq!(seq, next, "frames in order, none lost");
            assert_eq!(
                *f,
                &frame(seq, len_of(seq), MAC_B, MAC_A)[..],
                "frame {seq} intact"
            );
            next += 1;
        }
    }
}

/// Read test frames from the peer until every one of `frames` (numbered
/// from 0) arrived, in order and intact (other frames are skipped).
fn expect_at_peer(peer: &Raw, frames: &[Vec<u8>]) {
    expect_at_peer_from(peer, frames, 0);
}

/// [`expect_at_peer`] for `frames[first..]` (numbered from `first`).
fn expect_at_peer_from(peer: &Raw, frames: &[Vec<u8>], first: u32) {
    let mut buf = vec![0u8; 4096];
    let mut next = first;
    while (next as usize) < frames.len() {
        let n = peer
            .recv(&mut buf)
            .unwrap_or_else(|| panic!("peer got {next} of {}", frames.len()));
        if let Some(seq) = seq_of(&buf[..n]) {
            assert_eq!(seq, next, "in order, none lost");
            assert_eq!(&buf[..n], &frames[seq as usize][..], "frame {seq} intact");
            next += 1;
        }
    }
}

#[test]
fn rx_frames_arrive_intact() {
    let (a, b) = lab();
    let mut port = open(&a, &AfXdpConfig::default());
    let mode = port.mode();
    println!("AF_XDP on veth: {mode:?}, {} queue(s)", port.queues());
    assert_eq!(mode.attach, AttachMode::Native, "veth has native XDP");
    assert_eq!(mode.bind, BindMode::Copy, "veth has no zero-copy AF_XDP");
    assert_eq!(port.name(), "a0");
    assert!(port.wait_fd().is_some());
    assert_eq!(xdp_on_a0(&a).as_deref(), Some("xdp"), "program attached");

    let peer = b.run(|| Raw::open("b0")).unwrap();
    for seq in 0..1000 {
        peer.send(&frame(seq, len_of(seq), MAC_B, MAC_A));
    }
    expect_rx(&mut port, 0..1000);
    let s = port.stats();
    assert!(s.rx_packets >= 1000, "{s:?}");
    let redirected = port.redirected().expect("own program").unwrap();
    assert!(redirected >= 1000);
    // Per CPU (where the receive ran: the sender's, on veth), the same sum.
    let mut by_cpu = vec![0; 1024];
    assert!(port.rx_by_cpu(&mut by_cpu), "own program: it can tell");
    assert_eq!(by_cpu.iter().sum::<u64>(), redirected, "{by_cpu:?}");
    let k = port.refresh_kernel_stats().unwrap();
    assert_eq!((k.rx_dropped, k.rx_ring_full), (0, 0), "{k:?}");
    assert_eq!(port.stats().rx_dropped, 0);
    assert_eq!(port.refused_from_kernel(), 0);
}

#[test]
fn tx_frames_arrive_at_the_peer() {
    let (a, b) = lab();
    let mut port = open(&a, &AfXdpConfig::default());
    let peer = b.run(|| Raw::open("b0")).unwrap();
    let before = counter(&b, "b0", "rx_packets");

    let frames: Vec<Vec<u8>> = (0..1000)
        .map(|s| frame(s, len_of(s), MAC_A, MAC_B))
        .collect();
    for chunk in frames.chunks(32) {
        let burst: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        assert_eq!(port.tx_burst(&burst), burst.len());
        port.flush().unwrap();
    }
    expect_at_peer(&peer, &frames);
    assert!(counter(&b, "b0", "rx_packets") - before >= 1000);
    let s = port.stats();
    assert_eq!((s.tx_packets, s.tx_dropped), (1000, 0), "{s:?}");
    assert_eq!(
        s.tx_bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );

    // Frames the port cannot send are refused and counted, not queued.
    let too_long = vec![0u8; port.max_tx_frame() + 1];
    assert_eq!(port.tx_burst(&[&too_long, &[0u8; 10]]), 0);
    assert_eq!(port.stats().tx_dropped, 2);
    // Nothing queued: flush returns at once.
    port.flush().unwrap();
}

#[test]
fn frames_are_recycled_far_beyond_the_umem() {
    let (a, b) = lab();
    // 256 frames: 128 for rx (one ring), 128 for tx.
    let cfg = AfXdpConfig {
        frames: 256,
        ring_size: 128,
        ..AfXdpConfig::default()
    };
    let mut port = open(&a, &cfg);
    let c = port.frame_counts();
    assert_eq!((c.total, c.fill, c.free), (256, 128, 128), "{c:?}");
    let peer = b.run(|| Raw::open("b0")).unwrap();

    // 10,000 frames in, in chunks smaller than the rx ring: 78 times the
    // rx share of the UMEM.
    for chunk in 0..100u32 {
        let seqs = chunk * 100..(chunk + 1) * 100;
        for seq in seqs.clone() {
            peer.send(&frame(seq, len_of(seq), MAC_B, MAC_A));
        }
        expect_rx(&mut port, seqs);
    }
    // 10,000 frames out in bursts of 64 with one kick each.
    let f = frame(0, 128, MAC_A, MAC_B);
    let burst = vec![&f[..]; 64];
    let mut sent = 0;
    let deadline = Instant::now() + PATIENCE;
    while sent < 10_000 {
        assert!(
            Instant::now() < deadline,
            "tx stalled at {sent}: {:?}",
            port.frame_counts()
        );
        sent += port.tx_burst(&burst[..64.min(10_000 - sent)]);
        port.flush().unwrap();
    }
    // Every frame comes back: completions reclaimed, the last rx burst
    // recycled by an empty one.
    let deadline = Instant::now() + PATIENCE;
    while port.frame_counts().tx > 0 {
        assert!(
            Instant::now() < deadline,
            "completions missing: {:?}",
            port.frame_counts()
        );
        port.reclaim_tx();
        port.flush().unwrap();
    }
    port.rx_burst(&mut []);
    let c = port.frame_counts();
    assert_eq!(
        (c.total, c.fill, c.free, c.rx_held, c.tx),
        (256, 128, 128, 0, 0),
        "{c:?}"
    );
    let s = port.stats();
    assert_eq!((s.rx_dropped, s.tx_dropped), (0, 0), "{s:?}");
    assert_eq!(s.tx_packets, 10_000);
    assert!(counter(&b, "b0", "rx_packets") >= 10_000);
}

#[test]
fn a_missing_interface_is_named() {
    let (a, _b) = lab();
    let e = a
        .run(|| AfXdpPort::open("nosuchif0", &AfXdpConfig::default()))
        .unwrap()
        .unwrap_err();
    assert!(matches!(e, AfXdpError::NoSuchInterface { .. }), "{e:?}");
    assert!(e.to_string().contains("nosuchif0"), "{e}");
    // A bad config names the interface and the field.
    let bad = AfXdpConfig {
        frame_size: 3000,
        ..AfXdpConfig::default()
    };
    let e = a.run(|| AfXdpPort::open("a0", &bad)).unwrap().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("a0") && msg.contains("frame_size"), "{msg}");
    // Nothing was attached by the failed opens.
    assert_eq!(xdp_on_a0(&a), None);
    // veth has no zero-copy AF_XDP: forcing it fails at bind, with the
    // errno, after the program was attached, and the program goes again.
    let zc = AfXdpConfig {
        bind: Some(BindMode::ZeroCopy),
        ..AfXdpConfig::default()
    };
    let e = a.run(|| AfXdpPort::open("a0", &zc)).unwrap().unwrap_err();
    assert!(matches!(e, AfXdpError::Bind { queue: 0, .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("a0") && msg.contains("zero-copy") && msg.contains("os error"),
        "{msg}"
    );
    println!("{msg}");
    assert_eq!(xdp_on_a0(&a), None, "program left behind by a failed open");
}

#[test]
fn drop_detaches_the_program_and_closes_everything() {
    let (a, b) = lab();
    for attach in [AttachMode::Native, AttachMode::Generic] {
        let cfg = AfXdpConfig {
            attach: Some(attach),
            ..AfXdpConfig::default()
        };
        let port = open(&a, &cfg);
        assert_eq!(port.mode().attach, attach);
        let tag = match attach {
            AttachMode::Native => "xdp",
            AttachMode::Generic => "xdpgeneric",
        };
        assert_eq!(
            xdp_on_a0(&a).as_deref(),
            Some(tag),
            "{attach} program attached"
        );
        // (CONFIG_XDP_SOCKETS_DIAG is off here, so no `ss --xdp`: look at
        // the socket's descriptor and its ring mappings instead.)
        let fd = port.wait_fd().unwrap().as_raw_fd();
        let sock = fd_target(fd).unwrap();
        assert!(sock.starts_with("socket:"), "{sock}");
        assert_eq!(
            mappings_of(&sock),
            4,
            "fill, completion, rx and tx rings of {sock}"
        );
        drop(port);
        assert_eq!(xdp_on_a0(&a), None, "program left behind");
        assert_ne!(fd_target(fd).as_ref(), Some(&sock), "socket left open");
        assert_eq!(mappings_of(&sock), 0, "rings left mapped");
    }
    // A second port can take the interface over once the first is gone,
    // and frames reach it (the generic mode path).
    let cfg = AfXdpConfig {
        attach: Some(AttachMode::Generic),
        ..AfXdpConfig::default()
    };
    let mut port = open(&a, &cfg);
    assert_eq!(port.mode().bind, BindMode::Copy);
    let peer = b.run(|| Raw::open("b0")).unwrap();
    for seq in 0..100 {
        peer.send(&frame(seq, len_of(seq), MAC_B, MAC_A));
    }
    expect_rx(&mut port, 0..100);
    // While a port holds the interface, a second one cannot attach.
    let e = a.run(|| AfXdpPort::open("a0", &cfg)).unwrap().unwrap_err();
    assert!(
        e.to_string().contains("a0") && e.to_string().contains("generic"),
        "{e}"
    );
    drop(port);
    assert_eq!(xdp_on_a0(&a), None);
}

#[test]
fn port_to_port_across_a_veth_pair() {
    // Both ends AF_XDP: the peer's native XDP program runs on frames the
    // first port transmits (veth_xmit hands them to the peer's NAPI).
    let (a, b) = lab();
    let mut pa = open(&a, &AfXdpConfig::default());
    let mut pb = b
        .run(|| AfXdpPort::open("b0", &AfXdpConfig::default()))
        .unwrap()
        .unwrap();
    let frames: Vec<Vec<u8>> = (0..1000)
        .map(|s| frame(s, len_of(s), MAC_A, MAC_B))
        .collect();
    let mut next = 0u32;
    let deadline = Instant::now() + PATIENCE;
    for (i, chunk) in frames.chunks(32).enumerate() {
        let burst: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        assert_eq!(pa.tx_burst(&burst), burst.len());
        pa.flush().unwrap();
        let want = (i * 32 + chunk.len()) as u32;
        while next < want {
            assert!(Instant::now() < deadline, "port B got {next} of {want}");
            let mut out: [&[u8]; 32] = [&[]; 32];
            let n = pb.rx_burst(&mut out);
            for f in &out[..n] {
                let Some(seq) = seq_of(f) else { continue };
                assert_eq!(seq, next, "in order, none lost");
                assert_eq!(*f, &frames[seq as usize][..], "frame {seq} intact");
                next += 1;
            }
        }
    }
    assert_eq!(next, 1000);
    assert_eq!(pb.stats().rx_dropped, 0);
}

/// Pin the calling thread to `cpu`.
fn pin_to(cpu: usize) {
    // SAFETY: all-zero is a valid (empty) cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live cpu_set_t; CPU_SET only checks and sets a bit.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live cpu_set_t of the size passed; 0 is this thread.
    let r = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(
        r,
        0,
        "sched_setaffinity: {}",
        std::io::Error::last_os_error()
    );
}

/// Whether `fd` polls readable within `ms` milliseconds.
fn readable(fd: std::os::fd::BorrowedFd<'_>, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd, as the count says.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    r == 1 && p.revents & libc::POLLIN != 0
}
