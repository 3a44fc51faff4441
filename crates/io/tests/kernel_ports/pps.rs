//! Rates for a human to read (`pps_sanity`), not limits.

use super::tap::tap_up;
use super::*;

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
