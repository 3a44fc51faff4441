//! The kernel-facing ports (AF_PACKET mmap rings, raw socket, TAP) against
//! a real kernel: veth pairs and TAP devices in throwaway network
//! namespaces, deleted when a test ends, pass or fail. Run as root.
//!
//! Traffic only flows inside namespaces these tests create. No test has a
//! speed limit: `PATIENCE` only bounds how long a test waits for frames
//! that should come before it calls itself failed, and `pps_sanity` prints
//! rates for a human to read (`cargo test --release -p vrhost-io --test
//! kernel_ports pps -- --nocapture`; `VRHOST_IO_PPS_FRAMES=N` for more
//! frames).

use std::net::Ipv4Addr;
use std::os::fd::BorrowedFd;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use vrhost_io::Port;
use vrhost_io::af_packet::{AfPacketConfig, AfPacketPort, RxMode, TxVersion};
use vrhost_io::socket::{SocketConfig, SocketPort};
use vrhost_io::tap::{TapConfig, TapPort};
use vrhost_lab::{Netns, veth};
use vrhost_packet::MacAddr;
use vrhost_packet::build::{BuildOptions, PayloadFill, UdpFrameSpec};
use vrhost_packet::checksum::checksum;

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0x0a, 0x01];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0x0b, 0x01];
/// The (imaginary) host behind a TAP device.
const MAC_PEER: [u8; 6] = [0x02, 0, 0, 0, 0x77, 0x01];
/// The TAP device's own MAC.
const MAC_TAP: [u8; 6] = [0x02, 0, 0, 0, 0x77, 0xfe];

/// How long to wait for frames that should arrive: a bound on a hang, not
/// a speed requirement.
const PATIENCE: Duration = Duration::from_secs(10);

fn mac_str(m: [u8; 6]) -> String {
    m.map(|b| format!("{b:02x}")).join(":")
}

/// A namespace whose interfaces send nothing on their own (no IPv6: no
/// router solicitations, DAD or MLD).
fn quiet_ns() -> Netns {
    let ns = Netns::unique("vrh-io").expect("create a network namespace (run as root)");
    ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
    ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
        .unwrap();
    ns
}

/// Two quiet namespaces joined by a veth pair: `a0` (MAC_A) in `a`, `b0`
/// (MAC_B) in `b`.
struct Pair {
    a: Netns,
    b: Netns,
}

fn pair() -> Pair {
    let (a, b) = (quiet_ns(), quiet_ns());
    veth(
        &a,
        "a0",
        Some(&mac_str(MAC_A)),
        &b,
        "b0",
        Some(&mac_str(MAC_B)),
    )
    .unwrap();
    Pair { a, b }
}

fn open_af(ns: &Netns, ifname: &str, cfg: AfPacketConfig) -> AfPacketPort {
    ns.run(|| AfPacketPort::open(ifname, cfg))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn open_sock(ns: &Netns, ifname: &str, cfg: SocketConfig) -> SocketPort {
    ns.run(|| SocketPort::open(ifname, cfg))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn open_tap(ns: &Netns, name: &str, cfg: TapConfig) -> TapPort {
    ns.run(|| TapPort::open(name, cfg))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The message of the error `open` must fail with, run in `ns`.
fn open_error<P, E: std::fmt::Display>(
    ns: &Netns,
    open: impl FnOnce() -> Result<P, E> + Send,
) -> String {
    ns.run(move || open().map(drop).unwrap_err().to_string())
        .unwrap()
}

/// A UDP/IPv4 frame of `len` bytes (64..=1518) carrying `seq` first in its
/// payload.
fn udp_ip(seq: u32, len: usize, dst: [u8; 6], src: [u8; 6], ips: (Ipv4Addr, Ipv4Addr)) -> Vec<u8> {
    let mut f = vec![0u8; len];
    UdpFrameSpec {
        dst_mac: MacAddr(dst),
        src_mac: MacAddr(src),
        src_ip: ips.0,
        dst_ip: ips.1,
        sport: 0x5e5e,
        dport: 0x5e5e,
        ttl: 64,
        frame_bytes: len,
    }
    .write_with(
        &mut f,
        BuildOptions {
            udp_checksum: false,
            payload: PayloadFill::Pattern,
        },
    )
    .unwrap();
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    f
}

fn udp(seq: u32, len: usize, dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    udp_ip(
        seq,
        len,
        dst,
        src,
        (Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1)),
    )
}

/// `n` frames from `src` to `dst`: UDP frames of sizes from 64 to 1514
/// bytes, with now and then a 14-byte header-only frame and an
/// 802.1Q-tagged one (whose tag the kernel strips on receive and the ports
/// must put back).
fn mixed(n: usize, dst: [u8; 6], src: [u8; 6]) -> Vec<Vec<u8>> {
    const SIZES: [usize; 6] = [64, 65, 128, 511, 1000, 1514];
    (0..n)
        .map(|i| match i % 50 {
            7 => {
                let mut f = [dst, src].concat();
                f.extend_from_slice(&[0x88, 0xb5]);
                f
            }
            9 => {
                let u = udp(i as u32, 64, dst, src);
                let mut f = u[..12].to_vec();
                f.extend_from_slice(&[0x81, 0x00, 0x20, 0x64]);
                f.extend_from_slice(&u[12..]);
                f
            }
            _ => udp(i as u32, SIZES[i % SIZES.len()], dst, src),
        })
        .collect()
}

fn bytes(frames: &[Vec<u8>]) -> u64 {
    frames.iter().map(|f| f.len() as u64).sum()
}

/// Offer every frame, 32 at a time, flushing after each burst; all must
/// be accepted.
fn send_all(p: &mut dyn Port, frames: &[Vec<u8>]) {
    for chunk in frames.chunks(32) {
        let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        let n = p.tx_burst(&refs);
        assert_eq!(
            n,
            refs.len(),
            "{}: tx_burst refused frames: {:?}",
            p.name(),
            p.stats()
        );
        p.flush().unwrap();
    }
}

/// Send `frames` from `from` to `to`, `chunk` at a time, each chunk
/// received before the next is sent; all must arrive, in order.
#[track_caller]
fn relay_in_chunks(from: &mut dyn Port, to: &mut dyn Port, frames: &[Vec<u8>], chunk: usize) {
    let mut got = Vec::new();
    for chunk in frames.chunks(chunk) {
        send_all(from, chunk);
        got.extend(recv(to, chunk.len()));
    }
    assert_frames_eq(&got, frames);
}

/// Whether `fd` is ready (readable or in error) within `timeout`.
fn ready(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    let ts = Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
    poll(&mut fds, Some(&ts)).unwrap() > 0
}

/// Take frames from `p` until `want` have come or `patience` has passed,
/// sleeping on its `wait_fd` when it has none.
fn recv_for(p: &mut dyn Port, want: usize, patience: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let end = Instant::now() + patience;
    while got.len() < want && Instant::now() < end {
        let mut out: [&[u8]; 32] = [&[]; 32];
        let n = p.rx_burst(&mut out);
        got.extend(out[..n].iter().map(|f| f.to_vec()));
        if n == 0 {
            ready(p.wait_fd().unwrap(), Duration::from_millis(20));
        }
    }
    got
}

fn recv(p: &mut dyn Port, want: usize) -> Vec<Vec<u8>> {
    recv_for(p, want, PATIENCE)
}

/// Nothing more arrives on `p` for a while (longer than a block timeout).
fn assert_quiet(p: &mut dyn Port) {
    let extra = recv_for(p, 1, Duration::from_millis(100));
    assert!(
        extra.is_empty(),
        "{}: unexpected frames: {extra:02x?}",
        p.name()
    );
}

/// The first frame on `p` that `pred` accepts; others are skipped.
fn recv_matching(p: &mut dyn Port, what: &str, pred: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    let end = Instant::now() + PATIENCE;
    while Instant::now() < end {
        for f in recv_for(p, 1, Duration::from_millis(100)) {
            if pred(&f) {
                return f;
            }
        }
    }
    panic!("{}: no {what} within {PATIENCE:?}", p.name());
}

#[track_caller]
fn assert_frames_eq(got: &[Vec<u8>], want: &[Vec<u8>]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g == w, "frame {i} differs:\n got  {g:02x?}\n want {w:02x?}");
    }
    assert_eq!(got.len(), want.len(), "number of frames");
}

// --- AF_PACKET -----------------------------------------------------------

#[test]
fn ports_are_send() {
    fn send<T: Send>() {}
    send::<AfPacketPort>();
    send::<SocketPort>();
    send::<TapPort>();
}

/// Both rx ring formats; `Frames` with a block timeout that would show if
/// it were used (it is not: each frame is handed over at once).
const RX_MODES: [AfPacketConfig; 2] = {
    let d = AfPacketConfig::DEFAULT;
    [
        d,
        AfPacketConfig {
            rx_mode: RxMode::Frames,
            block_timeout_ms: 60_000,
            ..d
        },
    ]
};

#[test]
fn af_packet_receives_what_the_peer_sends() {
    for cfg in RX_MODES {
        af_packet_receives(cfg);
    }
}

fn af_packet_receives(cfg: AfPacketConfig) {
    let l = pair();
    let mut rx = open_af(&l.a, "a0", cfg);
    assert_eq!(rx.name(), "a0");
    let mut peer = open_sock(&l.b, "b0", SocketConfig::default());
    let frames = mixed(300, MAC_A, MAC_B);
    send_all(&mut peer, &frames);
    assert_frames_eq(&recv(&mut rx, frames.len()), &frames);
    let s = rx.stats();
    assert_eq!(
        (s.rx_packets, s.rx_bytes, s.rx_dropped),
        (300, bytes(&frames), 0)
    );
    assert_eq!((s.tx_packets, s.tx_dropped), (0, 0));
    assert_quiet(&mut rx);
}

fn af_packet_sends(version: TxVersion) {
    let l = pair();
    let cfg = AfPacketConfig {
        tx_version: version,
        ..AfPacketConfig::default()
    };
    let mut tx = open_af(&l.a, "a0", cfg);
    let mut peer = open_sock(&l.b, "b0", SocketConfig::default());
    let frames = mixed(1000, MAC_B, MAC_A);
    relay_in_chunks(&mut tx, &mut peer, &frames, 100);
    let s = tx.stats();
    assert_eq!(
        (s.tx_packets, s.tx_bytes, s.tx_dropped),
        (1000, bytes(&frames), 0),
        "{version:?}"
    );
    assert_eq!(peer.stats().rx_dropped, 0);
    // Nothing queued: flush returns at once.
    tx.flush().unwrap();
    // The port does not see what it sent (PACKET_IGNORE_OUTGOING, also
    // for V2's separate send socket), and the peer got nothing twice.
    assert_quiet(&mut tx);
    assert_eq!(tx.stats().rx_packets, 0);
    assert_quiet(&mut peer);
}

#[test]
fn af_packet_sends_to_the_peer_v3() {
    af_packet_sends(TxVersion::V3);
}

#[test]
fn af_packet_sends_to_the_peer_v2() {
    af_packet_sends(TxVersion::V2);
}

#[test]
fn af_packet_ring_wraps_many_times() {
    // A small ring (8 blocks of one page, about 14 of these frames each)
    // read and refilled over and over: 2000 frames wrap it about 18 times.
    // The blocks a burst read stay held until the next call, so each round
    // sends less than a few blocks' worth.
    let l = pair();
    let cfg = AfPacketConfig {
        block_bytes: 4096,
        block_count: 8,
        frame_bytes: 2048,
        tx_frames: 8,
        ..AfPacketConfig::default()
    };
    let mut rx = open_af(&l.a, "a0", cfg);
    let mut tx = open_af(&l.b, "b0", cfg);
    let frames: Vec<Vec<u8>> = (0..2000)
        .map(|i| udp(i, 64 + (i as usize % 200), MAC_A, MAC_B))
        .collect();
    // 8 frames fill the tx ring: each burst of 32 kicks it on the way.
    relay_in_chunks(&mut tx, &mut rx, &frames, 32);
    assert_eq!((rx.stats().rx_dropped, tx.stats().tx_dropped), (0, 0));
}

#[test]
fn af_packet_counts_kernel_drops_of_a_full_ring() {
    let l = pair();
    // Two one-page blocks hold about 50 small frames.
    let cfg = AfPacketConfig {
        block_bytes: 4096,
        block_count: 2,
        ..AfPacketConfig::default()
    };
    let mut rx = open_af(&l.a, "a0", cfg);
    let mut peer = open_af(&l.b, "b0", AfPacketConfig::default());
    counts_kernel_drops(&mut rx, &mut peer);
    // Once drained, the ring takes frames again.
    let f = udp(999, 64, MAC_A, MAC_B);
    send_all(&mut peer, std::slice::from_ref(&f));
    assert_frames_eq(&recv(&mut rx, 1), &[f]);
}

/// `peer` floods `rx` with 300 frames, more than it holds: every one is
/// either received or counted as dropped, and some are dropped.
fn counts_kernel_drops(rx: &mut dyn Port, peer: &mut dyn Port) {
    let frames: Vec<Vec<u8>> = (0..300).map(|i| udp(i, 64, MAC_A, MAC_B)).collect();
    send_all(peer, &frames);
    let (got, s) = drain_counting(rx, 300);
    assert!(s.rx_dropped > 0, "{s:?}");
    assert_eq!(s.rx_packets + s.rx_dropped, 300, "{s:?}");
    assert_eq!(got, s.rx_packets);
}

/// Read `p` until received + dropped reaches `total` and a burst comes
/// back empty (which hands every block read back to the kernel, as a
/// worker's next round does); returns frames read and the final stats.
fn drain_counting(p: &mut dyn Port, total: u64) -> (u64, vrhost_io::PortStats) {
    let end = Instant::now() + PATIENCE;
    let mut got = 0;
    loop {
        let mut out: [&[u8]; 32] = [&[]; 32];
        let n = p.rx_burst(&mut out);
        got += n as u64;
        let s = p.stats();
        if n == 0 {
            if s.rx_packets + s.rx_dropped >= total || Instant::now() > end {
                return (got, s);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[test]
fn af_packet_wait_fd_wakes_on_a_frame() {
    for cfg in RX_MODES {
        let l = pair();
        let mut rx = open_af(&l.a, "a0", cfg);
        let mut peer = open_sock(&l.b, "b0", SocketConfig::default());
        wait_fd_wakes(&mut rx, &mut peer, udp(1, 64, MAC_A, MAC_B));
    }
}

fn wait_fd_wakes(port: &mut dyn Port, peer: &mut dyn Port, frame: Vec<u8>) {
    assert!(
        !ready(port.wait_fd().unwrap(), Duration::ZERO),
        "{}: ready before any frame",
        port.name()
    );
    send_all(peer, std::slice::from_ref(&frame));
    assert!(
        ready(port.wait_fd().unwrap(), PATIENCE),
        "{}: wait_fd not readable after a frame",
        port.name()
    );
    assert_frames_eq(&recv(port, 1), &[frame]);
}

/// `port` refuses frames longer than `limit` both ways and shorter than a
/// header on send; `peer` is its other end; `to_port` the MACs of frames
/// toward it.
fn runts_and_oversize(
    port: &mut dyn Port,
    limit: usize,
    peer: &mut dyn Port,
    to_port: ([u8; 6], [u8; 6]),
) {
    let (dst, src) = to_port;
    let a = udp(1, 64, dst, src);
    let b = udp(2, 100, dst, src);
    let big = udp(3, 1000, dst, src);
    assert!(big.len() > limit);
    send_all(peer, &[a.clone(), big, b.clone()]);
    assert_frames_eq(&recv(port, 2), &[a, b]);
    let s = port.stats();
    assert_eq!(
        (s.rx_packets, s.rx_dropped),
        (2, 1),
        "{}: {s:?}",
        port.name()
    );

    let good = udp(4, 64, src, dst);
    let mut over = udp(5, 64, src, dst);
    over.resize(limit + 1, 0);
    let offered: [&[u8]; 5] = [&[], &[0u8; 5], &[0u8; 13], &over, &good];
    assert_eq!(port.tx_burst(&offered), 1, "{}", port.name());
    port.flush().unwrap();
    let s = port.stats();
    assert_eq!(
        (s.tx_packets, s.tx_bytes, s.tx_dropped),
        (1, 64, 4),
        "{}: {s:?}",
        port.name()
    );
    assert_frames_eq(&recv(peer, 1), &[good]);
    assert_quiet(peer);
}

#[test]
fn af_packet_runts_and_oversize_frames() {
    let l = pair();
    let cfg = AfPacketConfig {
        frame_bytes: 512,
        ..AfPacketConfig::default()
    };
    let mut port = open_af(&l.a, "a0", cfg);
    assert_eq!(port.max_frame_len(), 464);
    let mut peer = open_sock(&l.b, "b0", SocketConfig::default());
    runts_and_oversize(&mut port, 464, &mut peer, (MAC_A, MAC_B));
    // A frame over the link's MTU (1500 + 14) but within the ring frame is
    // refused too: the kernel would drop it silently.
    let mut wide = open_af(&l.a, "a0", AfPacketConfig::default());
    let mut f = udp(6, 64, MAC_B, MAC_A);
    f.resize(1515, 0);
    assert_eq!(wide.tx_burst(&[&f]), 0);
    assert_eq!(wide.stats().tx_dropped, 1);
}

#[test]
fn af_packet_errors_name_the_interface() {
    let ns = quiet_ns();
    let open = |name: &'static str, cfg| open_error(&ns, move || AfPacketPort::open(name, cfg));
    assert_eq!(
        open("nosuch0", AfPacketConfig::default()),
        "interface \"nosuch0\": no such device"
    );
    let e = open("a-name-much-too-long", AfPacketConfig::default());
    assert!(
        e.starts_with("interface \"a-name-much-too-long\": invalid name"),
        "{e}"
    );
    let e = open(
        "lo",
        AfPacketConfig {
            frame_bytes: 100,
            ..AfPacketConfig::default()
        },
    );
    assert!(
        e.starts_with("interface \"lo\": invalid AF_PACKET config: frame_bytes"),
        "{e}"
    );
    // The same name in the test's own namespace may exist; in the fresh one
    // it does not.
    let e = open("a0", AfPacketConfig::default());
    assert_eq!(e, "interface \"a0\": no such device");
}

#[test]
fn af_packet_recovers_from_a_link_flap() {
    let l = pair();
    let mut rx = open_af(&l.a, "a0", AfPacketConfig::default());
    let mut peer = open_sock(&l.b, "b0", SocketConfig::default());
    l.a.ip(&["link", "set", "a0", "down"]).unwrap();
    l.a.ip(&["link", "set", "a0", "up"]).unwrap();
    // The socket now holds ENETDOWN and poll() reports it at once; a
    // worker sleeping on it would spin. Idle bursts clear it.
    assert!(ready(rx.wait_fd().unwrap(), Duration::ZERO));
    for _ in 0..2048 {
        let mut out: [&[u8]; 4] = [&[]; 4];
        assert_eq!(rx.rx_burst(&mut out), 0);
    }
    assert!(
        !ready(rx.wait_fd().unwrap(), Duration::ZERO),
        "wait_fd still ready after idle bursts"
    );
    // And frames flow again.
    let frames = mixed(60, MAC_A, MAC_B);
    send_all(&mut peer, &frames);
    assert_frames_eq(&recv(&mut rx, frames.len()), &frames);
}

// --- raw socket ----------------------------------------------------------

#[test]
fn socket_receives_what_the_peer_sends() {
    let l = pair();
    let mut rx = open_sock(&l.a, "a0", SocketConfig::default());
    let mut peer = open_af(&l.b, "b0", AfPacketConfig::default());
    let frames = mixed(300, MAC_A, MAC_B);
    relay_in_chunks(&mut peer, &mut rx, &frames, 50);
    let s = rx.stats();
    assert_eq!(
        (s.rx_packets, s.rx_bytes, s.rx_dropped),
        (300, bytes(&frames), 0)
    );
    assert_quiet(&mut rx);
}

#[test]
fn socket_sends_to_the_peer() {
    let l = pair();
    let mut tx = open_sock(&l.a, "a0", SocketConfig::default());
    let mut peer = open_af(&l.b, "b0", AfPacketConfig::default());
    let frames = mixed(300, MAC_B, MAC_A);
    send_all(&mut tx, &frames);
    assert_frames_eq(&recv(&mut peer, frames.len()), &frames);
    let s = tx.stats();
    assert_eq!(
        (s.tx_packets, s.tx_bytes, s.tx_dropped),
        (300, bytes(&frames), 0)
    );
    assert_quiet(&mut tx);
    assert_eq!(tx.stats().rx_packets, 0);
}

#[test]
fn socket_counts_kernel_drops_of_a_full_buffer() {
    let l = pair();
    // The smallest receive buffer the kernel allows: a few frames.
    let cfg = SocketConfig {
        rcvbuf_bytes: Some(0),
        ..SocketConfig::default()
    };
    let mut rx = open_sock(&l.a, "a0", cfg);
    let mut peer = open_af(&l.b, "b0", AfPacketConfig::default());
    counts_kernel_drops(&mut rx, &mut peer);
}

#[test]
fn socket_wait_fd_wakes_on_a_frame() {
    let l = pair();
    let mut rx = open_sock(&l.a, "a0", SocketConfig::default());
    let mut peer = open_af(&l.b, "b0", AfPacketConfig::default());
    wait_fd_wakes(&mut rx, &mut peer, udp(1, 64, MAC_A, MAC_B));
}

#[test]
fn socket_runts_and_oversize_frames() {
    let l = pair();
    let cfg = SocketConfig {
        max_frame_bytes: 512,
        ..SocketConfig::default()
    };
    let mut port = open_sock(&l.a, "a0", cfg);
    let mut peer = open_af(&l.b, "b0", AfPacketConfig::default());
    runts_and_oversize(&mut port, 512, &mut peer, (MAC_A, MAC_B));
}

#[test]
fn socket_errors_name_the_interface() {
    let ns = quiet_ns();
    let open = |name: &'static str, cfg| open_error(&ns, move || SocketPort::open(name, cfg));
    assert_eq!(
        open("nosuch0", SocketConfig::default()),
        "interface \"nosuch0\": no such device"
    );
    let e = open("bad/name", SocketConfig::default());
    assert!(e.starts_with("interface \"bad/name\": invalid name"), "{e}");
    let e = open(
        "lo",
        SocketConfig {
            burst: 0,
            ..SocketConfig::default()
        },
    );
    assert!(
        e.starts_with("interface \"lo\": invalid socket port config: burst"),
        "{e}"
    );
}

// --- TAP -----------------------------------------------------------------

/// A quiet namespace with TAP device `vt0` (MAC_TAP), up, and a packet
/// socket on it standing for the kernel's side of the link.
fn tap_lab(cfg: TapConfig) -> (Netns, TapPort, SocketPort) {
    let ns = quiet_ns();
    let tap = tap_up(&ns, cfg);
    assert_eq!(tap.ifname(), "vt0");
    let kernel_side = open_sock(&ns, "vt0", SocketConfig::default());
    (ns, tap, kernel_side)
}

/// A port on TAP device `vt0` in `ns`, with MAC_TAP, up.
fn tap_up(ns: &Netns, cfg: TapConfig) -> TapPort {
    let tap = open_tap(ns, "vt0", cfg);
    ns.ip(&["link", "set", "vt0", "address", &mac_str(MAC_TAP)])
        .unwrap();
    ns.ip(&["link", "set", "vt0", "up"]).unwrap();
    tap
}

#[test]
fn tap_frames_both_ways() {
    let (_ns, mut tap, mut kernel) = tap_lab(TapConfig::default());
    // Out of the interface: into the port.
    let out = mixed(300, MAC_PEER, MAC_TAP);
    send_all(&mut kernel, &out);
    assert_frames_eq(&recv(&mut tap, out.len()), &out);
    // From the port: into the interface.
    let inn = mixed(300, MAC_TAP, MAC_PEER);
    relay_in_chunks(&mut tap, &mut kernel, &inn, 50);
    let s = tap.stats();
    assert_eq!(
        (s.rx_packets, s.rx_bytes, s.tx_packets, s.tx_bytes),
        (300, bytes(&out), 300, bytes(&inn))
    );
    assert_eq!((s.rx_dropped, s.tx_dropped), (0, 0));
    assert_quiet(&mut tap);
}

#[test]
fn tap_wait_fd_wakes_on_a_frame() {
    let (_ns, mut tap, mut kernel) = tap_lab(TapConfig::default());
    wait_fd_wakes(&mut tap, &mut kernel, udp(1, 64, MAC_PEER, MAC_TAP));
}

#[test]
fn tap_runts_and_oversize_frames() {
    let cfg = TapConfig {
        max_frame_bytes: 512,
        ..TapConfig::default()
    };
    let (_ns, mut tap, mut kernel) = tap_lab(cfg);
    runts_and_oversize(&mut tap, 512, &mut kernel, (MAC_PEER, MAC_TAP));
}

/// Kills (by its own pid) and reaps a child process on drop.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn arp_reply(sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut f = [tha, sha].concat();
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 2]);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa);
    f.extend_from_slice(&tha);
    f.extend_from_slice(&tpa);
    f
}

/// The echo reply to an Ethernet/IPv4 (no options)/ICMP echo request.
fn echo_reply(req: &[u8]) -> Vec<u8> {
    let mut r = req.to_vec();
    r[0..6].copy_from_slice(&req[6..12]);
    r[6..12].copy_from_slice(&req[0..6]);
    r[26..30].copy_from_slice(&req[30..34]);
    r[30..34].copy_from_slice(&req[26..30]);
    let end = 14 + usize::from(u16::from_be_bytes([req[16], req[17]]));
    r[34] = 0;
    r[36..38].fill(0);
    let c = checksum(&r[34..end]);
    r[36..38].copy_from_slice(&c.to_be_bytes());
    assert_eq!(checksum(&r[34..end]), 0, "ICMP checksum");
    r
}

#[test]
fn tap_answers_the_kernels_arp_and_ping() {
    let (ns, mut tap, _kernel) = tap_lab(TapConfig::default());
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "vt0"])
        .unwrap();
    let mut ping = ns.command("ping");
    ping.args(["-n", "-c", "1", "-W", "10", "10.77.0.2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut ping = ChildGuard(ping.spawn().expect("run ping"));

    // The kernel asks who has 10.77.0.2 ...
    let req = recv_matching(&mut tap, "ARP request for 10.77.0.2", |f| {
        f.len() >= 42 && f[12..14] == [8, 6] && f[20..22] == [0, 1] && f[38..42] == [10, 77, 0, 2]
    });
    assert_eq!(&req[0..6], &[0xff; 6], "broadcast");
    assert_eq!(&req[6..12], &MAC_TAP);
    assert_eq!(&req[28..32], &[10, 77, 0, 1]);
    // ... the port answers ...
    let reply = arp_reply(MAC_PEER, [10, 77, 0, 2], MAC_TAP, [10, 77, 0, 1]);
    assert_eq!(tap.tx_burst(&[&reply]), 1);
    // ... and the echo request that waited for the answer comes out,
    // addressed to the MAC the kernel learnt.
    let echo = recv_matching(&mut tap, "ICMP echo request", |f| {
        f.len() >= 42 && f[12..14] == [8, 0] && f[23] == 1 && f[34] == 8
    });
    assert_eq!(&echo[0..6], &MAC_PEER);
    let neigh = ns
        .ip(&["neigh", "show", "10.77.0.2", "dev", "vt0"])
        .unwrap();
    assert!(
        neigh.contains(&format!("lladdr {}", mac_str(MAC_PEER))),
        "neighbour table: {neigh}"
    );
    // Answering the echo makes ping succeed.
    assert_eq!(tap.tx_burst(&[&echo_reply(&echo)]), 1);
    let status = ping.0.wait().unwrap();
    assert!(status.success(), "ping: {status}");
    let s = tap.stats();
    assert_eq!((s.tx_packets, s.tx_dropped, s.rx_dropped), (2, 0, 0));
}

#[test]
fn tap_errors_name_the_interface() {
    let ns = quiet_ns();
    let open =
        |name: &'static str| open_error(&ns, move || TapPort::open(name, TapConfig::default()));
    assert_eq!(
        open("lo"),
        "interface \"lo\": exists and is not a single-queue TAP device"
    );
    let first = open_tap(&ns, "vt1", TapConfig::default());
    assert_eq!(
        open("vt1"),
        "interface \"vt1\": TAP device busy (attached elsewhere)"
    );
    let e = open("no spaces");
    assert!(
        e.starts_with("interface \"no spaces\": invalid name"),
        "{e}"
    );
    // A name the kernel picks from a pattern.
    let auto = open_tap(&ns, "vrt%d", TapConfig::default());
    assert!(
        auto.ifname().starts_with("vrt") && auto.ifname() != "vrt%d",
        "{}",
        auto.ifname()
    );
    // A device the port created goes with it (once the last reference to
    // the descriptor is gone: a child that a parallel test forks holds a
    // copy until it execs, so allow a moment).
    assert!(ns.ip(&["link", "show", "vt1"]).is_ok());
    drop(first);
    let end = Instant::now() + PATIENCE;
    while ns.ip(&["link", "show", "vt1"]).is_ok() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        ns.ip(&["link", "show", "vt1"]).is_err(),
        "vt1 outlived its port"
    );
}

// --- throughput sanity ----------------------------------------------------

/// Read bursts of 32 from `p` until one comes back empty; returns how many
/// frames came.
fn read_until_empty(p: &mut dyn Port) -> usize {
    let mut got = 0;
    loop {
        let mut out: [&[u8]; 32] = [&[]; 32];
        let k = p.rx_burst(&mut out);
        if k == 0 {
            return got;
        }
        got += k;
    }
}

fn pps(n: usize, t: Duration) -> String {
    format!("{:.3} Mpps", n as f64 / t.as_secs_f64() / 1e6)
}

/// Prints rates; asserts only that every frame arrived (or was counted as
/// dropped). Small by default: a sanity check, not a benchmark.
#[test]
fn pps_sanity() {
    let n: usize = std::env::var("VRHOST_IO_PPS_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let l = pair();
    let frames: Vec<Vec<u8>> = (0..n).map(|i| udp(i as u32, 64, MAC_A, MAC_B)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();

    pps_af_packet(&l, &refs);
    pps_socket(&l, &refs);
    drop(l);
    pps_tap_forwarding(n);
}

/// AF_PACKET -> AF_PACKET, the two tx ring versions alternated, rounds of 256
/// frames sent then read, as a worker does. On veth the receiver's ring is
/// filled inside the sender's sendto, so the tx time is the whole kernel path;
/// the rx time is the ring walk.
fn pps_af_packet(l: &Pair, refs: &[&[u8]]) {
    let n = refs.len();
    for version in [TxVersion::V3, TxVersion::V2, TxVersion::V3, TxVersion::V2] {
        let mut rx = open_af(&l.a, "a0", AfPacketConfig::default());
        let cfg = AfPacketConfig {
            tx_version: version,
            ..AfPacketConfig::default()
        };
        let mut tx = open_af(&l.b, "b0", cfg);
        let (mut t_tx, mut t_rx, mut got) = (Duration::ZERO, Duration::ZERO, 0);
        let mut drain = |rx: &mut AfPacketPort| {
            let t = Instant::now();
            got += read_until_empty(rx);
            t_rx += t.elapsed();
        };
        for round in refs.chunks(256) {
            let t = Instant::now();
            for burst in round.chunks(32) {
                tx.tx_burst(burst);
            }
            tx.flush().unwrap();
            t_tx += t.elapsed();
            drain(&mut rx);
        }
        // The last blocks are handed over at their timeout.
        std::thread::sleep(Duration::from_millis(20));
        drain(&mut rx);
        let s = rx.stats();
        println!(
            "af_packet {version:?} tx -> af_packet rx, {n} x 64 B: tx {}, rx {}, both {}, received {got}, dropped {}, tx refused {}",
            pps(n, t_tx),
            pps(got, t_rx),
            pps(got, t_tx + t_rx),
            s.rx_dropped,
            tx.stats().tx_dropped
        );
        assert_eq!(got as u64 + s.rx_dropped + tx.stats().tx_dropped, n as u64);
    }
}

/// Raw socket -> raw socket: one system call per frame each way, interleaved so
/// the receive buffer never overflows.
fn pps_socket(l: &Pair, refs: &[&[u8]]) {
    let n = refs.len();
    let mut rx = open_sock(
        &l.a,
        "a0",
        SocketConfig {
            rcvbuf_bytes: Some(64 << 20),
            ..SocketConfig::default()
        },
    );
    let mut tx = open_sock(&l.b, "b0", SocketConfig::default());
    let (mut t_tx, mut t_rx, mut got) = (Duration::ZERO, Duration::ZERO, 0);
    for round in refs.chunks(256) {
        let t0 = Instant::now();
        for burst in round.chunks(32) {
            tx.tx_burst(burst);
        }
        let t1 = Instant::now();
        got += read_until_empty(&mut rx);
        t_tx += t1 - t0;
        t_rx += t1.elapsed();
    }
    let s = rx.stats();
    println!(
        "socket tx -> socket rx, {n} x 64 B: tx {} , rx {}, both {}, received {got}, dropped {}",
        pps(n, t_tx),
        pps(got, t_rx),
        pps(got, t_tx + t_rx),
        s.rx_dropped
    );
    assert_eq!(got as u64 + s.rx_dropped + tx.stats().tx_dropped, n as u64);
}

/// TAP -> kernel IPv4 forwarding -> TAP, 32 frames at a time.
fn pps_tap_forwarding(n: usize) {
    let ns = quiet_ns();
    for (k, v) in [
        ("net.ipv4.ip_forward", "1"),
        ("net.ipv4.conf.all.send_redirects", "0"),
        ("net.ipv4.conf.default.send_redirects", "0"),
        ("net.ipv4.conf.all.rp_filter", "0"),
        ("net.ipv4.conf.default.rp_filter", "0"),
    ] {
        ns.sysctl(k, v).unwrap();
    }
    let mut tap = tap_up(&ns, TapConfig::default());
    ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "vt0"])
        .unwrap();
    ns.ip(&[
        "neigh",
        "add",
        "10.77.0.2",
        "lladdr",
        &mac_str(MAC_PEER),
        "nud",
        "permanent",
        "dev",
        "vt0",
    ])
    .unwrap();
    ns.ip(&["route", "add", "10.78.0.0/24", "via", "10.77.0.2"])
        .unwrap();
    let ips = (Ipv4Addr::new(10, 77, 0, 2), Ipv4Addr::new(10, 78, 0, 5));
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| udp_ip(i as u32, 64, MAC_TAP, MAC_PEER, ips))
        .collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let mut forwarded = Vec::with_capacity(n);
    let t0 = Instant::now();
    for burst in refs.chunks(32) {
        tap.tx_burst(burst);
        let mut out: [&[u8]; 64] = [&[]; 64];
        let k = tap.rx_burst(&mut out);
        forwarded.extend(out[..k].iter().map(|f| f.to_vec()));
    }
    let t = t0.elapsed();
    forwarded.extend(recv(&mut tap, n - forwarded.len()));
    println!(
        "tap tx -> kernel forwarding -> tap rx, {n} x 64 B: {} round trip, forwarded {}",
        pps(n, t),
        forwarded.len()
    );
    // Forwarded as the kernel should: to the next hop, TTL one less, the
    // rest intact (the IPv4 checksum changes with the TTL).
    assert_eq!(forwarded.len(), n);
    for (i, (f, sent)) in forwarded.iter().zip(&frames).enumerate() {
        assert_eq!(&f[0..12], &[MAC_PEER, MAC_TAP].concat()[..], "frame {i}");
        assert_eq!(f[22], 63, "frame {i}: TTL");
        assert_eq!(&f[26..], &sent[26..], "frame {i}");
    }
}
