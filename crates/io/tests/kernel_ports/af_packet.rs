//! The AF_PACKET port (mmap rings, both rx formats) against a real kernel.

use super::*;

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

#[test]
fn af_packet_wait_fd_wakes_on_a_frame() {
    for cfg in RX_MODES {
        let l = pair();
        let mut rx = open_af(&l.a, "a0", cfg);
        let mut peer = open_sock(&l.b, "b0", SocketConfig::default());
        wait_fd_wakes(&mut rx, &mut peer, udp(1, 64, MAC_A, MAC_B));
    }
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
