//! VLAN sub-interfaces end to end (needs root, `ip`, `tcpdump`, `tshark`):
//! two tenants on one port, told apart by their 802.1Q tag (`rules[].vlan`),
//! each VR's vNIC a sub-interface (`vnics[].vlan`): the VRs see their
//! frames untagged and send them tagged.
//!
//! ns-a (a0) --- r0 [vrhost in ns-r] r1 --- b0 (ns-b)
//!
//! VR `r` has vNIC 0 on VLAN 100 of r0 (10.1.0.1/24) and vNIC 1 on r1
//! (10.2.0.1/24, b0 behind it); VR `s` has vNIC 0 on VLAN 200 of r0, with
//! the same address as `r`'s: only the tag tells them apart. The test
//! kernel has no 802.1Q devices, so a0's tagged frames are hand-built and
//! sent raw, and what comes back is captured and decoded by tshark.

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use common::line::{LineMacs, bare_line};
use vrhost_lab::Netns;
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;
use vrhost_packet::checksum;

const A0_MAC: &str = "02:7e:00:00:03:0a";
const R0_MAC: &str = "02:7e:00:00:03:10";
const R1_MAC: &str = "02:7e:00:00:03:11";
const B0_MAC: &str = "02:7e:00:00:03:0b";
/// VR `r`'s vNIC on VLAN 100, and VR `s`'s on VLAN 200.
const R_V100: &str = "02:7e:00:00:03:64";
const S_V200: &str = "02:7e:00:00:03:c8";
/// A bound against a hung test, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(30);

fn mac(s: &str) -> [u8; 6] {
    s.parse::<MacAddr>().unwrap().0
}

fn config() -> String {
    format!(
        r#"
[[ports]]
name = "trunk"
driver = "af_packet"
interface = "r0"

[[ports]]
name = "lan"
driver = "af_packet"
interface = "r1"

[[vrs]]
name = "r"
vnics = [
  {{ port = "trunk", vlan = 100, mac = "{R_V100}", addrs = ["10.1.0.1/24"] }},
  {{ port = "lan", mac = "{R1_MAC}", addrs = ["10.2.0.1/24"] }},
]
[vrs.router]
neighbours = [{{ ip = "10.1.0.2", mac = "{A0_MAC}", vnic = 0 }}]

[[vrs]]
name = "s"
vnics = [{{ port = "trunk", vlan = 200, mac = "{S_V200}", addrs = ["10.1.0.1/24"] }}]
[vrs.router]
neighbours = [{{ ip = "10.1.0.2", mac = "{A0_MAC}", vnic = 0 }}]

[[rules]]
port = "trunk"
vlan = 100
vr = "r"

[[rules]]
port = "trunk"
vlan = 200
vr = "s"

[[rules]]
port = "lan"
vr = "r"
vnic = 1
"#
    )
}

/// `f` with an 802.1Q tag of VLAN `id` after its MAC addresses.
fn tagged(f: &[u8], id: u16) -> Vec<u8> {
    let mut t = f[..12].to_vec();
    t.extend_from_slice(&[0x81, 0x00]);
    t.extend_from_slice(&id.to_be_bytes());
    t.extend_from_slice(&f[12..]);
    t
}

/// A UDP datagram from a0 (10.1.0.2:7777) to b0 (10.2.0.2:7778), to `vnic`.
fn udp_to_b0(vnic: &str) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr(mac(vnic)),
        src_mac: MacAddr(mac(A0_MAC)),
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

/// An ICMP echo request from a0 (10.1.0.2) to 10.1.0.1, to `vnic`.
fn echo_to(vnic: &str) -> Vec<u8> {
    let mut f = mac(vnic).to_vec();
    f.extend_from_slice(&mac(A0_MAC));
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = vec![
        0x45, 0, 0, 36, 0, 1, 0, 0, 64, 1, 0, 0, 10, 1, 0, 2, 10, 1, 0, 1,
    ];
    let c = !checksum::fold(checksum::sum(&ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8];
    let c = !checksum::fold(checksum::sum(&icmp));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&icmp);
    f
}

fn topology() -> [Netns; 3] {
    let macs = LineMacs {
        a0: A0_MAC,
        r0: R0_MAC,
        r1: R1_MAC,
        b0: B0_MAC,
    };
    let [na, nr, nb] = bare_line("vlan", &macs);
    let ip = |n: &Netns, args: &[&str]| n.ip(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    ip(&nb, &["addr", "add", "10.2.0.2/24", "dev", "b0"]);
    ip(&nb, &["route", "add", "default", "via", "10.2.0.1"]);
    // b0's UDP checksums complete in the frame (no offload to finish them
    // after vrhost read the frame raw).
    let _ = nb.exec("ethtool", &["-K", "b0", "tx", "off"]);
    [na, nr, nb]
}

#[test]
fn two_tenants_on_one_port_are_served_by_their_vlan() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces: run as root"
    );
    let [na, nr, nb] = topology();
    let d = common::Daemon::start_under("vlan", &config(), &["ip", "netns", "exec", nr.name()]);
    let rx = nb
        .run(|| {
            let s = UdpSocket::bind((Ipv4Addr::new(10, 2, 0, 2), 7778)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            s
        })
        .unwrap();

    // Tagged 100: VR r routes it to b0 untagged (the VR resolves b0 by
    // ARP first, so send until it arrives).
    let t0 = Instant::now();
    let from = loop {
        common::wire::send_raw(&na, "a0", &tagged(&udp_to_b0(R_V100), 100));
        let mut buf = [0u8; 64];
        if let Ok((_, from)) = rx.recv_from(&mut buf) {
            break from;
        }
        assert!(
            t0.elapsed() < PATIENCE,
            "nothing reached b0: {:#}",
            d.stats()
        );
    };
    assert_eq!(from.to_string(), "10.1.0.2:7777");

    // b0's answer leaves r's vNIC 0 tagged 100.
    let text = common::wire::capture(&na, "a0", "vlan 100 and udp", &[], || {
        rx.send_to(b"vrhost-vlan-reply", "10.1.0.2:7777").unwrap();
    });
    for want in [
        "802.1Q Virtual LAN, PRI: 0, DEI: 0, ID: 100",
        "Internet Protocol Version 4, Src: 10.2.0.2, Dst: 10.1.0.2",
        "User Datagram Protocol, Src Port: 7778, Dst Port: 7777",
        &format!("Source: {R_V100}"),
    ] {
        assert!(text.contains(want), "tshark shows no {want:?}:\n{text}");
    }

    // Tagged 200: the same address, VR s answers the echo, tagged 200.
    let text = common::wire::capture(&na, "a0", "vlan 200 and icmp", &[], || {
        common::wire::send_raw(&na, "a0", &tagged(&echo_to(S_V200), 200));
    });
    for want in [
        "802.1Q Virtual LAN, PRI: 0, DEI: 0, ID: 200",
        "Internet Protocol Version 4, Src: 10.1.0.1, Dst: 10.1.0.2",
        "Type: 0 (Echo (ping) reply)",
        &format!("Source: {S_V200}"),
    ] {
        assert!(text.contains(want), "tshark shows no {want:?}:\n{text}");
    }
    let s = d.stats();
    assert!(
        common::vr_stats(&s, "s")["tx_packets"].as_u64().unwrap() >= 1,
        "{s:#}"
    );

    // Untagged, or tagged with nobody's VLAN: no rule takes it.
    let no_match =
        |s: &serde_json::Value| s["host"]["ingress_drops"]["no_match"].as_u64().unwrap_or(0);
    let before = no_match(&d.stats());
    common::wire::send_raw(&na, "a0", &udp_to_b0(R_V100));
    common::wire::send_raw(&na, "a0", &tagged(&udp_to_b0(R_V100), 300));
    d.wait_for("two no_match drops", PATIENCE, |s| {
        no_match(s) >= before + 2
    });
}
