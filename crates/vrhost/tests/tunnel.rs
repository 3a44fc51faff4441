//! Tunnel vNICs against Linux, between network namespaces (root only;
//! needs `ip`, `ping`, `ethtool`, `tcpdump` and `tshark`).
//!
//! ```text
//!  ns-a (the peer)                  ns-r: vrhost daemon                 ns-b
//!  vx0 10.1.0.2 (vxlan id 42)
//!  a0 192.0.2.1 ------------------- r0 [under]  VR "r"  [lan] r1 ------ b0 10.2.0.2
//!                                   tunnel vnic 0 10.1.0.1  vnic 1 10.2.0.1
//! ```
//!
//! VXLAN: a Linux kernel VXLAN device in ns-a is the real peer of the VR's
//! VXLAN vNIC: ns-a pings b0 through the tunnel, routed by the VR to its
//! plain vNIC and back (ARP inside the tunnel included); a second Linux
//! VXLAN device on an unknown VNI, and a frame with a broken outer
//! checksum, are counted drops by reason. The peer's MAC is learned. A
//! config applied live moves the tunnel to the other VNI.
//!
//! The same VR on the XDP fast path (`af_xdp` ports, `path = "fast"`):
//! the Linux VXLAN device pings b0 through it, and once the VR's
//! neighbours are in the fast path's maps each echo request is
//! decapsulated and each reply encapsulated in XDP (counted there); a
//! frame with a broken outer checksum still reaches the host's count.
//!
//! IP-in-IP (the test kernel has no IPIP device) and UDP encapsulation (an
//! Ethernet frame in UDP, no VXLAN header), on frames: a hand-built frame
//! from a0 carrying a UDP datagram for b0 is decapsulated and routed to
//! b0; b0's answer to 10.1.0.2 leaves the VR's tunnel vNIC encapsulated, is
//! captured on a0 by tcpdump and decoded by `tshark -V`, which must show
//! the outer and the inner IPv4 headers and the datagram.
//!
//! In the VXLAN test ns-a finds the tunnel's local address by ARP, which
//! vrhost answers; the frame tests give ns-a a static neighbour for it
//! (the frames are sent raw). Namespaces are deleted by their guards
//! even when a check fails; the daemon is killed by its own.

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use common::line::{LineMacs, bare_line};
use serde_json::Value;
use vrhost_lab::Netns;
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;
use vrhost_packet::tunnel::{EncapKind, EncapRepr};

const A0_MAC: &str = "02:7e:00:00:00:0a";
const R0_MAC: &str = "02:7e:00:00:00:10";
const R1_MAC: &str = "02:7e:00:00:00:11";
const B0_MAC: &str = "02:7e:00:00:00:0b";
const VNIC0_MAC: &str = "02:7e:00:00:01:01";
/// The `udp` tunnel's port.
const UDP_PORT: u16 = 6000;
/// A bound against a hung test, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(30);

fn mac(s: &str) -> [u8; 6] {
    s.parse::<MacAddr>().unwrap().0
}

/// The daemon's config: VR `r` with vNIC 0 on the tunnel `t` (its
/// `tunnel` table lines), vNIC 1 on `lan`; `router` is its router table.
fn config(tunnel: &str, router: &str) -> String {
    format!(
        r#"
[[ports]]
name = "under"
driver = "af_packet"
interface = "r0"

[[ports]]
name = "lan"
driver = "af_packet"
interface = "r1"

[[tunnels]]
name = "t"
port = "under"
local = "192.0.2.2"
remote = "192.0.2.1"
{tunnel}

[[vrs]]
name = "r"
vnics = [
  {{ tunnel = "t", mac = "{VNIC0_MAC}", addrs = ["10.1.0.1/24"] }},
  {{ port = "lan", mac = "{R1_MAC}", addrs = ["10.2.0.1/24"] }},
]
[vrs.router]
{router}

[[rules]]
port = "lan"
vr = "r"
vnic = 1
"#
    )
}

/// ns-a, ns-r, ns-b and their veths; b0 routes back through the VR. a0
/// learns r0's MAC for the tunnel's local address by ARP (vrhost answers
/// it) when `static_neigh` is false.
fn topology(static_neigh: bool) -> [Netns; 3] {
    let macs = LineMacs {
        a0: A0_MAC,
        r0: R0_MAC,
        r1: R1_MAC,
        b0: B0_MAC,
    };
    let [na, nr, nb] = bare_line("tun", &macs);
    let ip = |n: &Netns, args: &[&str]| n.ip(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    ip(&na, &["addr", "add", "192.0.2.1/24", "dev", "a0"]);
    if static_neigh {
        ip(
            &na,
            &["neigh", "add", "192.0.2.2", "lladdr", R0_MAC, "dev", "a0"],
        );
    }
    ip(&nb, &["addr", "add", "10.2.0.2/24", "dev", "b0"]);
    ip(&nb, &["route", "add", "default", "via", "10.2.0.1"]);
    // b0's UDP checksums complete in the frame (no offload to finish them
    // after vrhost read the frame raw).
    let _ = nb.exec("ethtool", &["-K", "b0", "tx", "off"]);
    [na, nr, nb]
}

/// A Linux VXLAN device `name` with VNI `vni` in ns-a, address `addr`.
fn vxlan_dev(na: &Netns, name: &str, vni: &str, addr: &str) {
    na.ip(&[
        "link",
        "add",
        name,
        "type",
        "vxlan",
        "id",
        vni,
        "local",
        "192.0.2.1",
        "remote",
        "192.0.2.2",
        "dstport",
        "4789",
        "dev",
        "a0",
    ])
    .expect("a vxlan device (the test kernel has VXLAN)");
    na.ip(&["addr", "add", addr, "dev", name]).unwrap();
    na.ip(&["link", "set", name, "up"]).unwrap();
}

fn ping(na: &Netns, dst: &str, count: &str) -> (bool, String) {
    let out = na
        .command("ping")
        .args(["-c", count, "-i", "0.2", "-W", "1", dst])
        .output()
        .expect("ping");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn host_drop(stats: &Value, reason: &str) -> u64 {
    stats["host"]["ingress_drops"][reason].as_u64().unwrap_or(0)
}

fn vnic(stats: &Value, i: usize, field: &str) -> u64 {
    common::vr_stats(stats, "r")["vnics"][i][field]
        .as_u64()
        .unwrap_or_else(|| panic!("vnics[{i}].{field} in {stats:#}"))
}

#[test]
fn a_linux_vxlan_device_pings_through_a_vr_s_vxlan_vnic() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let [na, nr, _nb] = topology(false);
    vxlan_dev(&na, "vx0", "42", "10.1.0.2/24");
    na.ip(&["route", "add", "10.2.0.0/24", "via", "10.1.0.1"])
        .unwrap();
    let d = common::Daemon::start_under(
        "tunnel",
        &config("kind = \"vxlan\"\nvni = 42", ""),
        &["ip", "netns", "exec", nr.name()],
    );
    // Until the first reply (ARP inside the tunnel, then the VR's ARP for
    // b0), then every ping answered.
    let t0 = Instant::now();
    while !ping(&na, "10.2.0.2", "1").0 {
        assert!(
            t0.elapsed() < PATIENCE,
            "no ping answered through the tunnel: {:#}",
            d.stats()
        );
    }
    let (ok, out) = ping(&na, "10.2.0.2", "5");
    assert!(ok && out.contains("5 received"), "{out}");
    // The kernel's VXLAN device found the tunnel's local address by ARP,
    // answered by vrhost with r0's MAC.
    let neigh = na.ip(&["neigh", "show", "192.0.2.2", "dev", "a0"]).unwrap();
    assert!(
        neigh.contains(R0_MAC) && !neigh.contains("PERMANENT"),
        "{neigh}"
    );
    let s = d.stats();
    // 6 echo requests at least in through the tunnel, their replies out.
    assert!(vnic(&s, 0, "rx_packets") >= 6, "{s:#}");
    assert!(vnic(&s, 0, "tx_packets") >= 6, "{s:#}");
    assert!(vnic(&s, 1, "tx_packets") >= 6, "{s:#}");
    for r in ["tunnel_malformed", "tunnel_checksum", "tunnel_unknown"] {
        assert_eq!(host_drop(&s, r), 0, "{r}: {s:#}");
    }

    // An unknown VNI: a Linux device on VNI 43 (ARP for 10.9.0.1).
    vxlan_dev(&na, "vx1", "43", "10.9.0.2/24");
    let _ = ping(&na, "10.9.0.1", "2");
    let s = d.wait_for("tunnel_unknown", PATIENCE, |s| {
        host_drop(s, "tunnel_unknown") > 0
    });
    assert_eq!(host_drop(&s, "tunnel_malformed"), 0, "{s:#}");

    // A VXLAN frame with a broken outer IPv4 checksum, sent raw.
    let mut f = encapsulated(EncapKind::Vxlan(42), &inner_udp(), mac(R0_MAC));
    f[24] ^= 0x10;
    send_raw(&na, &f);
    d.wait_for("tunnel_checksum", PATIENCE, |s| {
        host_drop(s, "tunnel_checksum") == 1
    });

    // A live change (`vrhost apply`): the tunnel moves to VNI 43 and the
    // vNIC to 10.9.0.1/24; vx1 (VNI 43) now reaches the VR.
    let dir = common::TempDir::new("tunnel-apply");
    let file = dir.path().join("v.toml");
    let moved = config("kind = \"vxlan\"\nvni = 43", "").replace("10.1.0.1/24", "10.9.0.1/24");
    std::fs::write(&file, moved).unwrap();
    let r = d.json(&["apply", file.to_str().unwrap()]);
    assert_eq!(r["restarted"], serde_json::json!(["r"]), "{r:#}");
    let t0 = Instant::now();
    while !ping(&na, "10.9.0.1", "1").0 {
        assert!(
            t0.elapsed() < PATIENCE,
            "no ping answered on VNI 43: {:#}",
            d.stats()
        );
    }
}

/// [`config`] on a host with the XDP fast path: `af_xdp` ports, the VR
/// on `path = "fast"`.
fn fast_config(tunnel: &str) -> String {
    let c = config(tunnel, "")
        .replace("driver = \"af_packet\"", "driver = \"af_xdp\"")
        .replace("name = \"r\"\n", "name = \"r\"\npath = \"fast\"\n");
    format!("[host]\nfast_path = true\n{c}")
}

/// The fast path's counters of VR `r`'s tunnel vNIC 0: decapsulated,
/// encapsulated.
fn fast_tunnel(stats: &Value) -> (u64, u64) {
    let t = &common::vr_stats(stats, "r")["fast"]["tunnels"]["0"];
    let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{k} in {t}"));
    (n("decapsulated"), n("encapsulated"))
}

/// The fast path's `forwarded` count of VR `r`.
fn fast_forwarded(stats: &Value) -> u64 {
    common::vr_stats(stats, "r")["fast"]["forwarded"]
        .as_u64()
        .unwrap_or_else(|| panic!("fast.forwarded in {stats:#}"))
}

#[test]
fn a_linux_vxlan_device_pings_through_a_fast_vr_s_vxlan_vnic() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let [na, nr, nb] = topology(false);
    // Frames the fast path redirects into a veth are delivered when its
    // peer has NAPI (GRO on).
    na.exec("ethtool", &["-K", "a0", "gro", "on"])
        .expect("a0 gro on");
    nb.exec("ethtool", &["-K", "b0", "gro", "on"])
        .expect("b0 gro on");
    vxlan_dev(&na, "vx0", "42", "10.1.0.2/24");
    na.ip(&["route", "add", "10.2.0.0/24", "via", "10.1.0.1"])
        .unwrap();
    let d = common::Daemon::start_under(
        "tunnel-fast",
        &fast_config("kind = \"vxlan\"\nvni = 42"),
        &["ip", "netns", "exec", nr.name()],
    );
    // The first replies take the slow path (ARP inside and outside the
    // tunnel, then the VR's ARP for b0); once the daemon has written the
    // neighbours the VR resolved, the echo requests are decapsulated and
    // the replies encapsulated in XDP: both counted as forwarded there.
    // The tunnel's own counters (API, /metrics, `vr show`) say the same:
    // each request decapsulated, each reply encapsulated, in XDP.
    let t0 = Instant::now();
    loop {
        let s0 = d.stats();
        let (before, tun0) = (fast_forwarded(&s0), fast_tunnel(&s0));
        let (ok, out) = ping(&na, "10.2.0.2", "5");
        let s1 = d.stats();
        let fast = fast_forwarded(&s1) - before;
        let tun = fast_tunnel(&s1);
        if ok && out.contains("5 received") && fast >= 10 {
            assert!(
                tun.0 >= tun0.0 + 5 && tun.1 >= tun0.1 + 5,
                "{tun0:?} -> {tun:?}"
            );
            let m = d.metrics();
            let decap =
                r#"vrhost_vr_fast_tunnel_frames_total{vnic="0",vr="r",what="decapsulated"}"#;
            assert!(m.contains(decap), "{m}");
            let show = d.ok(&["vr", "show", "r"]);
            assert!(show.contains("; tunnel vNIC 0: decapsulated "), "{show}");
            break;
        }
        assert!(
            t0.elapsed() < PATIENCE,
            "pings not forwarded in XDP both ways ({fast} of 10; {out}): {:#}",
            d.stats()
        );
    }
    let s = d.stats();
    for r in ["tunnel_malformed", "tunnel_checksum", "tunnel_unknown"] {
        assert_eq!(host_drop(&s, r), 0, "{r}: {s:#}");
    }
    // A broken outer checksum: XDP hands the frame to the slow path as it
    // came, where the host counts and drops it; nothing is forwarded.
    let mut f = encapsulated(EncapKind::Vxlan(42), &inner_udp(), mac(R0_MAC));
    f[24] ^= 0x10;
    let forwarded = fast_forwarded(&s);
    send_raw(&na, &f);
    let s = d.wait_for("tunnel_checksum", PATIENCE, |s| {
        host_drop(s, "tunnel_checksum") == 1
    });
    assert_eq!(fast_forwarded(&s), forwarded, "{s:#}");
}

/// A UDP datagram 10.1.0.2:7777 -> 10.2.0.2:7778 in an Ethernet frame to
/// the VR's vNIC 0.
fn inner_udp() -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr(mac(VNIC0_MAC)),
        src_mac: MacAddr([2, 0x7e, 0, 0, 1, 2]),
        src_ip: Ipv4Addr::new(10, 1, 0, 2),
        dst_ip: Ipv4Addr::new(10, 2, 0, 2),
        sport: 7777,
        dport: 7778,
        ttl: 64,
        frame_bytes: 64,
    }
    .write(&mut f)
    .unwrap();
    f
}

/// `inner` (an Ethernet frame) encapsulated from a0 to the tunnel's
/// local address, as ns-a's kernel would send it.
fn encapsulated(kind: EncapKind, inner: &[u8], dst_mac: [u8; 6]) -> Vec<u8> {
    let strip = if kind == EncapKind::Ipip { 14 } else { 0 };
    let (dst_port, src_port) = match kind {
        EncapKind::Ipip => (0, 0),
        EncapKind::Udp => (UDP_PORT, 40000),
        EncapKind::Vxlan(_) => (4789, 40000),
    };
    let r = EncapRepr {
        kind,
        dst_mac,
        src_mac: mac(A0_MAC),
        src: Ipv4Addr::new(192, 0, 2, 1),
        dst: Ipv4Addr::new(192, 0, 2, 2),
        ident: 1,
        ttl: 64,
        src_port,
        dst_port,
    };
    let mut f = vec![0u8; kind.overhead()];
    r.emit(&mut f, inner.len() - strip).unwrap();
    f.extend_from_slice(&inner[strip..]);
    f
}

fn send_raw(na: &Netns, frame: &[u8]) {
    common::wire::send_raw(na, "a0", frame);
}

#[test]
fn ipip_frames_are_decapsulated_and_encapsulated_as_tshark_reads_them() {
    decap_then_encap(
        "kind = \"ipip\"",
        EncapKind::Ipip,
        "ip proto 4",
        &[],
        &["Protocol: IPIP (4)"],
    );
}

#[test]
fn udp_tunnel_frames_are_decapsulated_and_encapsulated_as_tshark_reads_them() {
    decap_then_encap(
        &format!("kind = \"udp\"\nudp_port = {UDP_PORT}"),
        EncapKind::Udp,
        &format!("udp dst port {UDP_PORT}"),
        &["-d", &format!("udp.port=={UDP_PORT},eth")],
        // The inner Ethernet header, the VR's: from vNIC 0 to its next hop.
        &[
            &format!("Dst Port: {UDP_PORT}"),
            "Destination: 02:7e:00:00:01:02",
            &format!("Source: {VNIC0_MAC}"),
        ],
    );
}

/// The tunnel `tunnel` (its kind lines), whose frames are `kind`'s: a
/// hand-built one from a0 carrying a UDP datagram for b0 reaches b0; b0's
/// answer is captured on a0 (`filter`) and decoded by `tshark -V` (with
/// `decode`), which must show the outer and inner headers and `wants`.
fn decap_then_encap(tunnel: &str, kind: EncapKind, filter: &str, decode: &[&str], wants: &[&str]) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let [na, nr, nb] = topology(true);
    // The VR's next hop on the tunnel vNIC (for IP-in-IP any MAC: its
    // Ethernet header is stripped).
    let router = "neighbours = [{ ip = \"10.1.0.2\", mac = \"02:7e:00:00:01:02\", vnic = 0 }]";
    let d = common::Daemon::start_under(
        "tunnel-frames",
        &config(tunnel, router),
        &["ip", "netns", "exec", nr.name()],
    );
    let rx = nb
        .run(|| {
            let s = UdpSocket::bind((Ipv4Addr::new(10, 2, 0, 2), 7778)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            s
        })
        .unwrap();
    // A hand-built frame, until b0 has its datagram (the VR resolves b0
    // by ARP first).
    let frame = encapsulated(kind, &inner_udp(), mac(R0_MAC));
    let t0 = Instant::now();
    let from = loop {
        send_raw(&na, &frame);
        let mut buf = [0u8; 64];
        if let Ok((_, from)) = rx.recv_from(&mut buf) {
            break from;
        }
        assert!(
            t0.elapsed() < PATIENCE,
            "nothing decapsulated to b0: {:#}",
            d.stats()
        );
    };
    assert_eq!(from.to_string(), "10.1.0.2:7777");

    // b0 answers; the VR encapsulates it to a0 (the MAC it learned).
    let text = capture_on_a0(&na, filter, decode, || {
        rx.send_to(b"vrhost-tunnel-reply", "10.1.0.2:7777").unwrap();
    });
    let common = [
        "Internet Protocol Version 4, Src: 192.0.2.2, Dst: 192.0.2.1",
        "Internet Protocol Version 4, Src: 10.2.0.2, Dst: 10.1.0.2",
        "User Datagram Protocol, Src Port: 7778, Dst Port: 7777",
        "[Header checksum status: Good]",
    ];
    for want in common.iter().chain(wants) {
        assert!(text.contains(want), "tshark shows no {want:?}:\n{text}");
    }
    assert!(!text.contains("status: Bad"), "a bad checksum:\n{text}");
    assert!(
        text.contains(&format!("Destination: {A0_MAC}")),
        "to a0's MAC, learned:\n{text}"
    );
    let s = d.stats();
    let drops = &common::vr_stats(&s, "r")["egress_drops"];
    assert_eq!(drops["tunnel_no_mac"], 0, "{s:#}");
}

fn capture_on_a0(na: &Netns, filter: &str, decode: &[&str], send: impl Fn()) -> String {
    common::wire::capture(na, "a0", filter, decode, send)
}
