//! `tx = "xdp"` (`TxPath::Xdp`): the port sends through the kernel's XDP
//! test run with live frames instead of its socket's tx ring. The run
//! finds the interface in the calling thread's namespace, so every flush
//! here runs inside namespace A. A veth's peer takes such frames only
//! with GRO on (or an XDP program), so the lab turns GRO on at `b0`;
//! `tx = "auto"` (`TxPath::Auto`) is tried with and without it.

use vrhost_io::Port;
use vrhost_io::af_xdp::{AfXdpConfig, AfXdpPort, TxPath};
use vrhost_lab::Netns;

use super::{MAC_A, MAC_B, Raw, counter, frame, lab, len_of, seq_of};

fn xdp_tx() -> AfXdpConfig {
    with_tx(TxPath::Xdp)
}

fn with_tx(tx: TxPath) -> AfXdpConfig {
    AfXdpConfig {
        tx,
        ..AfXdpConfig::default()
    }
}

/// Send `frames` in bursts of `chunk`, each burst flushed, inside `ns`.
fn send_in(ns: &Netns, port: &mut AfXdpPort, frames: &[Vec<u8>], chunk: usize) {
    ns.run(|| {
        for c in frames.chunks(chunk) {
            let burst: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            assert_eq!(port.tx_burst(&burst), burst.len());
            port.flush().unwrap();
        }
    })
    .unwrap();
}

#[test]
fn tx_xdp_frames_arrive_at_the_peer_intact_and_in_order() {
    let (a, b) = lab();
    b.exec("ethtool", &["-K", "b0", "gro", "on"]).unwrap();
    let mut port = super::open(&a, &xdp_tx());
    let peer = b.run(|| Raw::open("b0")).unwrap();

    // 3,000 frames of every length 60..=1514: bursts of 100 (one run
    // each), then one burst of 2,500 (more than the array's 1,024 slots:
    // runs of its own before the flush).
    let frames: Vec<Vec<u8>> = (0..3000)
        .map(|s| frame(s, len_of(s), MAC_A, MAC_B))
        .collect();
    send_in(&a, &mut port, &frames[..500], 100);
    send_in(&a, &mut port, &frames[500..], 2500);
    super::expect_at_peer(&peer, &frames);
    let s = port.stats();
    assert_eq!((s.tx_packets, s.tx_dropped), (3000, 0), "{s:?}");
    assert_eq!(
        s.tx_bytes,
        frames.iter().map(|f| f.len() as u64).sum::<u64>()
    );
    // The socket's own path sent nothing: no tx descriptor was queued.
    assert_eq!(port.frame_counts().tx, 0);

    // Receiving is the socket's as before.
    for seq in 0..100 {
        peer.send(&frame(seq, len_of(seq), MAC_B, MAC_A));
    }
    super::expect_rx(&mut port, 0..100);
}

/// Frames `tx_burst` takes wait in the array until the flush
/// (`tx_batched` says how many, for the worker to hold a batch for more),
/// and one `BPF_PROG_RUN` sends them all: `tx_runs` counts the calls. A
/// full array (1,024 frames) runs by itself.
#[test]
fn tx_xdp_holds_frames_until_the_flush_and_counts_its_runs() {
    let (a, b) = lab();
    b.exec("ethtool", &["-K", "b0", "gro", "on"]).unwrap();
    let mut port = super::open(&a, &xdp_tx());
    let peer = b.run(|| Raw::open("b0")).unwrap();
    let frames: Vec<Vec<u8>> = (0..1300)
        .map(|s| frame(s, len_of(s), MAC_A, MAC_B))
        .collect();
    a.run(|| {
        for c in frames[..200].chunks(20) {
            let burst: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            assert_eq!(port.tx_burst(&burst), burst.len());
        }
        assert_eq!((port.tx_batched(), port.stats().tx_runs), (200, 0));
        port.flush().unwrap();
        assert_eq!((port.tx_batched(), port.stats().tx_runs), (0, 1));
        // Nothing queued: no run.
        port.flush().unwrap();
        assert_eq!(port.stats().tx_runs, 1);
        let burst: Vec<&[u8]> = frames[200..].iter().map(Vec::as_slice).collect();
        assert_eq!(port.tx_burst(&burst), burst.len());
        assert_eq!((port.tx_batched(), port.stats().tx_runs), (1100 - 1024, 2));
        port.flush().unwrap();
        assert_eq!((port.tx_batched(), port.stats().tx_runs), (0, 3));
    })
    .unwrap();
    super::expect_at_peer(&peer, &frames);
    let s = port.stats();
    assert_eq!(
        (s.tx_packets, s.tx_dropped, s.tx_runs),
        (1300, 0, 3),
        "{s:?}"
    );
}

#[test]
fn tx_xdp_refuses_garbage_and_counts_it() {
    let (a, b) = lab();
    b.exec("ethtool", &["-K", "b0", "gro", "on"]).unwrap();
    let mut port = super::open(&a, &xdp_tx());
    assert!(port.max_tx_frame() >= 1514);
    let before = counter(&b, "b0", "rx_packets");

    // Too short, empty, too long: refused at once, counted, never sent.
    let too_long = vec![0xabu8; port.max_tx_frame() + 1];
    let huge = vec![0u8; 65536];
    let bad: [&[u8]; 4] = [&[0u8; 13], &[], &too_long, &huge];
    a.run(|| {
        assert_eq!(port.tx_burst(&bad), 0);
        // Nothing queued: the flush makes no run.
        port.flush().unwrap();
    })
    .unwrap();
    let s = port.stats();
    assert_eq!((s.tx_packets, s.tx_dropped), (0, 4), "{s:?}");

    // Bytes that are no frame at all, of a length the port takes (the
    // smallest one: an Ethernet header), go out as they are: the port
    // does not parse what it sends.
    let peer = b.run(|| Raw::open("b0")).unwrap();
    let mut junk = frame(7, 60, MAC_A, MAC_B);
    for (i, x) in junk[22..].iter_mut().enumerate() {
        *x = (i * 151) as u8;
    }
    let burst: [&[u8]; 3] = [&junk, &[1u8; 5], &junk[..14]];
    a.run(|| {
        assert_eq!(port.tx_burst(&burst), 2, "the 5-byte one is refused");
        port.flush().unwrap();
    })
    .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = loop {
        let n = peer.recv(&mut buf).expect("the junk frame arrives");
        if seq_of(&buf[..n]) == Some(7) {
            break n;
        }
    };
    assert_eq!(&buf[..n], &junk[..]);
    let s = port.stats();
    assert_eq!((s.tx_packets, s.tx_dropped), (2, 5), "{s:?}");
    assert!(counter(&b, "b0", "rx_packets") - before >= 2);
}

/// `tx = "auto"` against a peer with GRO: the driver's counters show the
/// frames taken, so the port keeps sending xdp_frames (the socket sends
/// none) and never falls back; then, the peer's GRO turned off, the next
/// check (around run 1,024) sees a run refused, and the port
/// falls back, sending that run again through the socket: nothing lost.
#[test]
fn tx_auto_keeps_xdp_frames_while_the_peer_takes_them() {
    let (a, b) = lab();
    b.exec("ethtool", &["-K", "b0", "gro", "on"]).unwrap();
    let mut port = super::open(&a, &with_tx(TxPath::Auto));
    let peer = b.run(|| Raw::open("b0")).unwrap();
    let frames: Vec<Vec<u8>> = (0..2000)
        .map(|s| frame(s, len_of(s), MAC_A, MAC_B))
        .collect();
    send_in(&a, &mut port, &frames[..1000], 10);
    super::expect_at_peer(&peer, &frames[..1000]);
    let s = port.stats();
    assert_eq!(
        (s.tx_packets, s.tx_dropped, s.tx_fallbacks),
        (1000, 0, 0),
        "{s:?}"
    );
    assert_eq!(port.frame_counts().tx, 0, "the socket sent nothing");

    // 100 runs so far; the next check is run 1,024's.
    b.exec("ethtool", &["-K", "b0", "gro", "off"]).unwrap();
    let one: Vec<Vec<u8>> = (0..1).map(|_| frame(5000, 60, MAC_A, MAC_B)).collect();
    for _ in 100..1023 {
        send_in(&a, &mut port, &one, 1);
    }
    assert_eq!(port.stats().tx_fallbacks, 0);
    send_in(&a, &mut port, &frames[1000..], 1000);
    let s = port.stats();
    assert_eq!(s.tx_fallbacks, 1, "{s:?}");
    // The 923 runs between the checks went unseen: lost, and counted.
    assert_eq!((s.tx_packets, s.tx_dropped), (2000, 923), "{s:?}");
    // The run the check refused went again through the socket.
    super::expect_at_peer_from(&peer, &frames, 1000);
}

/// `tx = "auto"` against a peer with neither GRO nor an XDP program: the
/// first run's frames are not counted by the driver, so the port falls
/// back to its socket, sends that run again through it, and sends the
/// rest there: every frame arrives, in order, and the fallback is counted
/// once.
#[test]
fn tx_auto_falls_back_to_the_socket_when_the_peer_refuses() {
    let (a, b) = lab();
    b.exec("ethtool", &["-K", "b0", "gro", "off"]).unwrap();
    let mut port = super::open(&a, &with_tx(TxPath::Auto));
    let peer = b.run(|| Raw::open("b0")).unwrap();
    let frames: Vec<Vec<u8>> = (0..1500)
        .map(|s| frame(s, len_of(s), MAC_A, MAC_B))
        .collect();
    // A first burst of 1,200: the array's 1,024 make the refused run,
    // inside `tx_burst`; then bursts of 100, each flushed.
    send_in(&a, &mut port, &frames[..1200], 1200);
    send_in(&a, &mut port, &frames[1200..], 100);
    super::expect_at_peer(&peer, &frames);
    let s = port.stats();
    assert_eq!(
        (s.tx_packets, s.tx_dropped, s.tx_fallbacks),
        (1500, 0, 1),
        "{s:?}"
    );
    // On the socket now: its largest frame, no longer the array's.
    assert!(port.max_tx_frame() > 2040, "{}", port.max_tx_frame());
}
