//! Waking on frames, one socket per rx queue, and a rate for a human to read.

use super::*;

#[test]
fn wait_fd_wakes_on_frames() {
    let (a, b) = lab();
    let mut port = open(&a, &AfXdpConfig::default());
    assert!(
        !readable(port.wait_fd().unwrap(), 0),
        "idle port is not readable"
    );
    let peer = b.run(|| Raw::open("b0")).unwrap();
    peer.send(&frame(0, 60, MAC_B, MAC_A));
    assert!(
        readable(port.wait_fd().unwrap(), 5000),
        "a frame makes it readable"
    );
    expect_rx(&mut port, 0..1);
    assert!(!readable(port.wait_fd().unwrap(), 0), "drained");
}

#[test]
fn every_rx_queue_gets_a_socket() {
    let a = Netns::unique("vrh-xdp").unwrap();
    let b = Netns::unique("vrh-xdp").unwrap();
    for ns in [&a, &b] {
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
            .unwrap();
    }
    let (ma, mb) = (mac_str(&MAC_A), mac_str(&MAC_B));
    #[rustfmt::skip]
    vrhost_lab::cmd("ip", &[
        "link", "add", "a0", "netns", a.name(), "address", &ma, "numtxqueues", "2", "numrxqueues", "2",
        "type", "veth", "peer", "name", "b0", "netns", b.name(), "address", &mb,
        "numtxqueues", "2", "numrxqueues", "2",
    ])
    .unwrap();
    a.ip(&["link", "set", "a0", "up"]).unwrap();
    b.ip(&["link", "set", "b0", "up"]).unwrap();
    // b0's tx queue N is used by CPU N; veth delivers on a0's rx queue N.
    b.exec(
        "sh",
        &["-c", "echo 1 > /sys/class/net/b0/queues/tx-0/xps_cpus && echo 2 > /sys/class/net/b0/queues/tx-1/xps_cpus"],
    )
    .unwrap();

    let mut port = open(&a, &AfXdpConfig::default());
    assert_eq!(port.queues(), 2, "one socket per rx queue");
    assert_eq!(port.frame_counts().total, 2 * 4096);
    assert!(!readable(port.wait_fd().unwrap(), 0));
    for cpu in 0..2u32 {
        b.run(|| {
            pin_to(cpu as usize);
            let peer = Raw::open("b0");
            for seq in cpu * 100..cpu * 100 + 100 {
                peer.send(&frame(seq, len_of(seq), MAC_B, MAC_A));
            }
        })
        .unwrap();
    }
    // The epoll descriptor over both sockets wakes.
    assert!(readable(port.wait_fd().unwrap(), 5000));
    let mut seen = [false; 200];
    let deadline = Instant::now() + PATIENCE;
    while seen.iter().any(|s| !s) {
        assert!(Instant::now() < deadline, "missing frames");
        let mut out: [&[u8]; 32] = [&[]; 32];
        let n = port.rx_burst(&mut out);
        for f in &out[..n] {
            let Some(seq) = seq_of(f) else { continue };
            assert_eq!(*f, &frame(seq, len_of(seq), MAC_B, MAC_A)[..]);
            assert!(
                !std::mem::replace(&mut seen[seq as usize], true),
                "{seq} twice"
            );
        }
    }
    let per_queue: Vec<u64> = port.rx_packets_per_queue().collect();
    println!("rx per queue: {per_queue:?}");
    assert!(
        per_queue.iter().all(|&n| n >= 100),
        "both queues served: {per_queue:?}"
    );
}

/// Throughput sanity: prints rates, asserts only that frames moved.
#[test]
fn throughput_sanity() {
    const N: u32 = 20_000;
    let (a, b) = lab();
    let mut port = open(&a, &AfXdpConfig::default());

    // Rx: the peer sends 64-byte frames as fast as one AF_PACKET socket
    // can, while this thread drains the port.
    let (got, secs) = std::thread::scope(|s| {
        let sender = s.spawn(|| {
            b.run(|| {
                let peer = Raw::open("b0");
                let f = frame(0, 64, MAC_B, MAC_A);
                for _ in 0..N {
                    peer.send(&f);
                }
            })
            .unwrap();
        });
        let mut got = 0u64;
        let mut first = None;
        let mut last = Instant::now();
        let deadline = Instant::now() + PATIENCE;
        loop {
            let mut out: [&[u8]; 32] = [&[]; 32];
            let n = port.rx_burst(&mut out);
            if n > 0 {
                last = Instant::now();
                first.get_or_insert(last);
                got += out[..n].iter().filter(|f| seq_of(f).is_some()).count() as u64;
            } else if (sender.is_finished() && last.elapsed() > Duration::from_millis(200))
                || Instant::now() > deadline
            {
                break;
            }
        }
        let secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
        (got, secs)
    });
    let k = port.refresh_kernel_stats().unwrap();
    println!(
        "AF_XDP rx on veth ({:?}): {got} of {N} frames in {:.1} ms = {:.0} pps (kernel drops {}, ring full {})",
        port.mode(),
        secs * 1e3,
        got as f64 / secs.max(1e-9),
        k.rx_dropped,
        k.rx_ring_full
    );
    assert!(got > 0);

    // Tx: bursts of 32 with one flush each, until every completion is back.
    let before = counter(&b, "b0", "rx_packets");
    let f = frame(0, 64, MAC_A, MAC_B);
    let burst = [&f[..]; 32];
    let t = Instant::now();
    let mut sent = 0u32;
    let deadline = Instant::now() + PATIENCE;
    while sent < N && Instant::now() < deadline {
        sent += port.tx_burst(&burst[..32.min((N - sent) as usize)]) as u32;
        port.flush().unwrap();
    }
    while port.frame_counts().tx > 0 && Instant::now() < deadline {
        port.reclaim_tx();
        port.flush().unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    let arrived = counter(&b, "b0", "rx_packets") - before;
    println!(
        "AF_XDP tx on veth: {sent} frames queued, {arrived} counted at the peer, in {:.1} ms = {:.0} pps",
        secs * 1e3,
        f64::from(sent) / secs
    );
    assert!(arrived > 0);
}
