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

mod af_packet;
mod pps;
mod tap;

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
