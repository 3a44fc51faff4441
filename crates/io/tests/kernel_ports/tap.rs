//! The TAP port against a real kernel.

use super::*;

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
pub(super) fn tap_up(ns: &Netns, cfg: TapConfig) -> TapPort {
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
