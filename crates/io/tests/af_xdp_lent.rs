//! An AF_XDP port whose UMEM is a shared memfd mapping lent by the caller
//! (what a dedicated port does with its VR's packet pool), on a veth pair
//! between two throwaway network namespaces (run as root). The port opens
//! `a0` in namespace A over the memfd; a second mapping of the same memfd
//! plays the VR, which reads each received frame where the kernel wrote it
//! and writes its reply there; the peer `b0` in namespace B sends and
//! receives with a plain socket port.
//!
//! The namespaces are deleted on drop, also when a test fails.

use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vrhost_io::Port;
use vrhost_io::af_xdp::{AfXdpConfig, AfXdpPort, LentFrame, TxPath, UmemArea};
use vrhost_io::socket::{SocketConfig, SocketPort};
use vrhost_lab::{Netns, veth};

const FRAME: u32 = 2048;
const FRAMES: u32 = 256;
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
/// Guard against a hang, never a performance bound.
const PATIENCE: Duration = Duration::from_secs(10);

/// A shared mapping of a memfd, unmapped on drop.
struct Shared {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain shared memory; the test reaches it through raw pointers.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    fn map(fd: &OwnedFd, len: usize) -> Shared {
        use rustix::mm::{MapFlags, ProtFlags, mmap};
        // SAFETY: a new shared mapping of a memfd of `len` bytes at an
        // address of the kernel's choosing aliases no Rust object.
        let p = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )
        }
        .expect("mmap memfd");
        Shared {
            ptr: NonNull::new(p.cast()).unwrap(),
            len,
        }
    }

    /// A copy of `len` bytes at `at`.
    fn read(&self, at: usize, len: usize) -> Vec<u8> {
        assert!(at + len <= self.len);
        let mut v = vec![0; len];
        // SAFETY: inside the mapping (checked); raw copy, no reference.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(at), v.as_mut_ptr(), len) };
        v
    }

    fn write(&self, at: usize, data: &[u8]) {
        assert!(at + data.len() <= self.len);
        // SAFETY: inside the mapping (checked); raw copy, no reference.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(at), data.len())
        };
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: our own mapping, not used after this.
        unsafe {
            let _ = rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// The memfd, the port's area over a first mapping of it, and a second
/// mapping: the VR's view.
fn pool() -> (UmemArea, Shared) {
    let (host, vr) = pool_of(FRAMES);
    (area_on(&host), vr)
}

/// A memfd of `frames` frames: the host's mapping of it (to make areas
/// of) and the VR's.
fn pool_of(frames: u32) -> (Arc<Shared>, Shared) {
    let len = (frames * FRAME) as usize;
    let fd = rustix::fs::memfd_create("vrhost-umem-test", rustix::fs::MemfdFlags::CLOEXEC)
        .expect("memfd_create");
    rustix::fs::ftruncate(&fd, len as u64).unwrap();
    (Arc::new(Shared::map(&fd, len)), Shared::map(&fd, len))
}

/// An area over all of `host`'s mapping, which it keeps mapped.
fn area_on(host: &Arc<Shared>) -> UmemArea {
    // SAFETY: page aligned (mmap), read-write and shared, kept mapped by
    // the clone of `host` the area owns; this test makes no reference into
    // it.
    unsafe { UmemArea::new(host.ptr, host.len, Box::new(host.clone())) }
}

fn lab() -> (Netns, Netns) {
    lab_of(1)
}

/// Namespaces A and B joined by `pairs` veth pairs `aI` - `bI`.
fn lab_of(pairs: u32) -> (Netns, Netns) {
    let a = Netns::unique("vrh-xzc").unwrap();
    let b = Netns::unique("vrh-xzc").unwrap();
    for ns in [&a, &b] {
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
            .unwrap();
    }
    for i in 0..pairs {
        veth(&a, &format!("a{i}"), None, &b, &format!("b{i}"), None).unwrap();
    }
    (a, b)
}

fn cfg() -> AfXdpConfig {
    AfXdpConfig {
        frames: FRAMES,
        frame_size: FRAME,
        ring_size: 128,
        queues: Some(1),
        ..AfXdpConfig::default()
    }
}

/// Test frame `seq` of `len` bytes: broadcast, EtherType 0x88b5, the
/// sequence number, then a pattern.
fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0xb0, 1]);
    f.extend_from_slice(&ETHERTYPE);
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((seq as usize + f.len()) as u8);
    }
    f
}

fn seq_of(f: &[u8]) -> Option<u32> {
    (f.len() >= 18 && f[12..14] == ETHERTYPE)
        .then(|| u32::from_be_bytes(f[14..18].try_into().unwrap()))
}

/// Lend the next test frame from `port`, waiting for it.
fn next_lent(port: &mut AfXdpPort, vr: &Shared) -> (LentFrame, Vec<u8>) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        assert!(Instant::now() < deadline, "no frame arrived");
        let mut out = [LentFrame::default(); 1];
        if port.rx_lend(&mut out) == 1 {
            let l = out[0];
            let bytes = vr.read((l.frame * FRAME + l.offset) as usize, l.len as usize);
            if seq_of(&bytes).is_some() {
                return (l, bytes);
            }
            assert!(port.give_back(l.frame));
        }
    }
}

/// The next test frame the peer receives.
fn peer_rx(peer: &mut SocketPort) -> Vec<u8> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        assert!(Instant::now() < deadline, "the peer got nothing");
        let mut out: [&[u8]; 8] = [&[]; 8];
        let n = peer.rx_burst(&mut out);
        if let Some(f) = out[..n].iter().find(|f| seq_of(f).is_some()) {
            return f.to_vec();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The lab, the VR's view of the pool, the port on `a0` over the pool, and
/// the peer's port on `b0`.
fn open_pair() -> ((Netns, Netns), Shared, AfXdpPort, SocketPort) {
    let (a, b) = lab();
    let (area, vr) = pool();
    let port = a
        .run(|| AfXdpPort::open_on("a0", &cfg(), area))
        .unwrap()
        .expect("XDP_UMEM_REG takes a shared memfd mapping");
    let peer = b
        .run(|| SocketPort::open("b0", SocketConfig::default()))
        .unwrap()
        .unwrap();
    ((a, b), vr, port, peer)
}

#[test]
fn frames_are_read_and_sent_where_the_kernel_wrote_them() {
    let (_lab, vr, mut port, mut peer) = open_pair();
    // More frames than the UMEM has, so lent frames given back are reused.
    for seq in 0..(2 * FRAMES) {
        let len = [60, 128, 512, 1000, 1500, 1514][seq as usize % 6];
        let sent = frame(seq, len);
        assert_eq!(peer.tx_burst(&[&sent]), 1);
        let (l, got) = next_lent(&mut port, &vr);
        assert_eq!(got, sent, "frame {seq} read intact from the VR's mapping");
        assert!(l.frame < FRAMES);
        if seq % 2 == 0 {
            // The VR's reply, written in place, sent from there.
            let mut reply = got.clone();
            reply[0..6].copy_from_slice(&[2, 0, 0, 0, 0xb0, 1]);
            reply[18] = !reply[18];
            vr.write((l.frame * FRAME + l.offset) as usize, &reply);
            assert_eq!(port.tx_lent(&[l]), 1);
            port.flush().unwrap();
            assert!(!port.is_lent(l.frame), "a sent frame is the port's again");
            assert_eq!(peer_rx(&mut peer), reply, "reply {seq} intact");
        } else {
            assert!(port.give_back(l.frame));
        }
    }
    let deadline = Instant::now() + PATIENCE;
    while port.frame_counts().tx > 0 {
        assert!(Instant::now() < deadline, "completions never came");
        port.reclaim_tx();
    }
    let c = port.frame_counts();
    assert_eq!((c.total, c.lent, c.tx), (FRAMES, 0, 0));
    assert_eq!(c.free + c.fill + c.rx_held, FRAMES);
}

#[test]
fn frames_not_lent_or_outside_their_frame_are_refused() {
    let (_lab, vr, mut port, mut peer) = open_pair();
    // Nothing lent yet: every index is refused, in range or not.
    for f in [0, 1, FRAMES - 1, FRAMES, u32::MAX] {
        assert!(!port.give_back(f), "give_back({f}) of a frame not lent");
        let bogus = LentFrame {
            frame: f,
            offset: 256,
            len: 64,
        };
        assert_eq!(port.tx_lent(&[bogus]), 0);
    }
    assert_eq!(port.refused_lent(), 5);
    // A lent frame sent with bytes past its end is taken back, not sent.
    assert_eq!(peer.tx_burst(&[&frame(7, 100)]), 1);
    let (l, _) = next_lent(&mut port, &vr);
    let past = LentFrame {
        offset: FRAME - 10,
        len: 64,
        ..l
    };
    let before = port.stats().tx_dropped;
    assert_eq!(port.tx_lent(&[past]), 0);
    assert_eq!(port.stats().tx_dropped, before + 1);
    assert!(!port.is_lent(l.frame));
    assert!(!port.give_back(l.frame), "taken back once only");
    let c = port.frame_counts();
    assert_eq!((c.lent, c.tx, c.total), (0, 0, FRAMES));
}

#[test]
fn an_area_too_small_is_refused_by_name() {
    let e = refused_on_area(AfXdpConfig {
        frames: 2 * FRAMES,
        ..cfg()
    });
    assert!(e.contains("UMEM area"), "{e}");
}

/// Why opening `a0` on a VR's pool with `cfg` fails.
fn refused_on_area(cfg: AfXdpConfig) -> String {
    let (a, _b) = lab();
    let (area, _vr) = pool();
    a.run(|| AfXdpPort::open_on("a0", &cfg, area))
        .unwrap()
        .unwrap_err()
        .to_string()
}

#[test]
fn tx_xdp_on_an_area_copies_a_lent_frame_out_and_gives_it_back_at_once() {
    let (a, b) = lab();
    // A veth takes xdp_frames only when its peer has NAPI: GRO gives it.
    b.exec("ethtool", &["-K", "b0", "gro", "on"]).unwrap();
    let (area, vr) = pool();
    let cfg = AfXdpConfig {
        tx: TxPath::Xdp,
        ..cfg()
    };
    let mut port = a
        .run(|| AfXdpPort::open_on("a0", &cfg, area))
        .unwrap()
        .expect("tx xdp on a VR's pool");
    assert_eq!(port.tx_path(), TxPath::Xdp);
    let mut peer = b
        .run(|| SocketPort::open("b0", SocketConfig::default()))
        .unwrap()
        .unwrap();
    for seq in 0..4 {
        assert_eq!(peer.tx_burst(&[&frame(seq, 1000)]), 1);
        let (l, got) = next_lent(&mut port, &vr);
        let mut reply = got.clone();
        reply[0..6].copy_from_slice(&[2, 0, 0, 0, 0xb0, 1]);
        reply[18] = !reply[18];
        vr.write((l.frame * FRAME + l.offset) as usize, &reply);
        assert_eq!(port.tx_lent(&[l]), 1);
        // Copied out: the frame is the port's again before any send, and
        // nothing waits on the socket's tx ring.
        assert!(!port.is_lent(l.frame));
        assert_eq!(port.frame_counts().tx, 0);
        // The test run names the interface in the caller's namespace.
        a.run(|| port.flush()).unwrap().unwrap();
        assert_eq!(peer_rx(&mut peer), reply, "reply {seq} intact");
    }
    let c = port.frame_counts();
    assert_eq!((c.total, c.lent, c.tx), (FRAMES, 0, 0));
    assert_eq!(port.stats().tx_packets, 4);
}

/// Two ports on one UMEM (a VR with two dedicated ports), `a0` and `a1`,
/// and the peers' ports on `b0` and `b1`.
fn open_shared() -> ((Netns, Netns), Shared, [AfXdpPort; 2], [SocketPort; 2]) {
    let (lab, vr, ports, peers) = open_chain(2);
    let (Ok(ports), Ok(peers)) = (ports.try_into(), peers.try_into()) else {
        unreachable!("two of each");
    };
    (lab, vr, ports, peers)
}

/// `n` ports on one UMEM, `a0` .. `a{n-1}`, each after the first bound on
/// the one before it (as the daemon opens a VR's dedicated ports), and the
/// peers' ports on `b0` ..
fn open_chain(n: u32) -> ((Netns, Netns), Shared, Vec<AfXdpPort>, Vec<SocketPort>) {
    let (a, b) = lab_of(n);
    let (host, vr) = pool_of(n * FRAMES);
    let p0 = a
        .run(|| AfXdpPort::open_on("a0", &cfg(), area_on(&host)))
        .unwrap()
        .expect("the first port registers the UMEM");
    let mut ports = vec![p0];
    for i in 1..n {
        let area = area_on(&host);
        // The port is Send, not Sync: the ports go into the namespace's
        // thread and come back.
        let (back, p) = a
            .run(move || {
                let p = AfXdpPort::open_sharing(
                    &format!("a{i}"),
                    &cfg(),
                    area,
                    &ports[ports.len() - 1],
                );
                (ports, p)
            })
            .unwrap();
        ports = back;
        ports.push(p.expect("a veth binds on the UMEM of the one before (XDP_SHARED_UMEM)"));
    }
    let peers = (0..n)
        .map(|i| {
            b.run(|| SocketPort::open(&format!("b{i}"), SocketConfig::default()))
                .unwrap()
                .unwrap()
        })
        .collect();
    ((a, b), vr, ports, peers)
}

#[test]
fn three_ports_on_one_umem_send_each_other_s_frames_and_each_goes_home() {
    let (_lab, vr, mut ports, mut peers) = open_chain(3);
    for (i, p) in ports.iter().enumerate() {
        let i = i as u32;
        assert_eq!(p.lent_frames(), Some(i * FRAMES..(i + 1) * FRAMES));
    }
    // Round the ring a0 -> a2 -> a1 -> a0, more frames than the UMEM has.
    for seq in 0..(4 * FRAMES) {
        let (rx, tx) = [(0, 2), (2, 1), (1, 0)][seq as usize % 3];
        let sent = frame(seq, [60, 700, 1514][seq as usize % 3]);
        assert_eq!(peers[rx].tx_burst(&[&sent]), 1);
        let (l, got) = next_lent(&mut ports[rx], &vr);
        assert_eq!(got, sent, "frame {seq} read where the kernel wrote it");
        let [from, to, third] = ports.get_disjoint_mut([rx, tx, 3 - rx - tx]).unwrap();
        // Taken over from the port that lent it only.
        assert_eq!(to.take_lent_from(third, &[l]), 0);
        assert_eq!(to.take_lent_from(from, &[l]), 1);
        assert_eq!(to.tx_lent(&[l]), 1, "frame {seq} sent as it lies");
        to.flush().unwrap();
        assert_eq!(peer_rx(&mut peers[tx]), sent, "frame {seq} intact");
        to.reclaim_tx();
        to.return_frames(from);
    }
    let deadline = Instant::now() + PATIENCE;
    loop {
        for (a, b) in [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)] {
            let [a, b] = ports.get_disjoint_mut([a, b]).unwrap();
            a.reclaim_tx();
            a.return_frames(b);
        }
        let c: Vec<_> = ports.iter().map(AfXdpPort::frame_counts).collect();
        if c.iter().all(|c| c.tx + c.returning == 0) {
            for c in &c {
                assert_eq!((c.total, c.lent), (FRAMES, 0), "every frame home once");
            }
            break;
        }
        assert!(Instant::now() < deadline, "completions never came");
    }
    assert_eq!(ports.iter().map(AfXdpPort::refused_lent).sum::<u64>(), 0);
}

#[test]
fn a_frame_crosses_from_one_shared_port_to_the_other_with_no_copy() {
    let (_lab, vr, ports, mut peers) = open_shared();
    let [mut p0, mut p1] = ports;
    assert_eq!(p0.lent_frames(), Some(0..FRAMES));
    assert_eq!(p1.lent_frames(), Some(FRAMES..2 * FRAMES));
    // Frames neither port lent, its own or the other's, are refused and
    // left alone.
    for frame in [0, FRAMES, 2 * FRAMES, u32::MAX] {
        let bogus = LentFrame {
            frame,
            offset: 256,
            len: 64,
        };
        assert_eq!(p1.tx_lent_from(&mut p0, &[bogus]), 0);
    }
    assert_eq!(p1.refused_lent(), 4);
    // Both ways, more frames than the UMEM has, so frames must go home.
    for seq in 0..(3 * FRAMES) {
        let len = [60, 128, 512, 1000, 1500, 1514][seq as usize % 6];
        let sent = frame(seq, len);
        let (rx, tx, from, to) = if seq % 2 == 0 {
            (0, 1, &mut p0, &mut p1)
        } else {
            (1, 0, &mut p1, &mut p0)
        };
        assert_eq!(peers[rx].tx_burst(&[&sent]), 1);
        let (l, got) = next_lent(from, &vr);
        assert_eq!(got, sent, "frame {seq} read where the kernel wrote it");
        assert!(from.lent_frames().unwrap().contains(&l.frame));
        assert_eq!(
            to.tx_lent_from(from, &[l]),
            1,
            "frame {seq} sent as it lies"
        );
        to.flush().unwrap();
        assert!(!from.is_lent(l.frame) && !to.is_lent(l.frame));
        assert!(!from.give_back(l.frame), "sent: no longer lent");
        assert_eq!(
            peer_rx(&mut peers[tx]),
            sent,
            "frame {seq} intact out of port {tx}"
        );
        to.reclaim_tx();
        to.return_frames(from);
    }
    let deadline = Instant::now() + PATIENCE;
    loop {
        p0.reclaim_tx();
        p0.return_frames(&mut p1);
        p1.reclaim_tx();
        p1.return_frames(&mut p0);
        let (c0, c1) = (p0.frame_counts(), p1.frame_counts());
        if c0.tx + c1.tx + c0.returning + c1.returning == 0 {
            // Every frame back home, none twice.
            assert_eq!((c0.total, c1.total), (FRAMES, FRAMES));
            assert_eq!((c0.lent, c1.lent), (0, 0));
            break;
        }
        assert!(Instant::now() < deadline, "completions never came");
    }
    assert_eq!(
        p0.refused_lent() + p1.refused_lent(),
        4,
        "no good frame refused"
    );
}
