//! A VR's VXLAN vNIC from its config to the fast path's maps, checked on
//! frames with `BPF_PROG_TEST_RUN` (needs root): the loopback is both the
//! underlay port and the plain vNIC's port. The frames out are compared
//! byte for byte with what the user-space tunnel path writes
//! (`vrhost_host::tunnel::Encap`).

use std::net::Ipv4Addr;
use std::path::Path as FsPath;

use vrhost_fast::Action;
use vrhost_host::Tunnel;
use vrhost_host::config::Config;
use vrhost_host::tunnel::Encap;
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;
use vrhost_packet::ipv4::Ipv4Packet;

use super::*;

const TUN_MAC: [u8; 6] = [2, 0, 0, 0, 1, 1];
const PLAIN_MAC: [u8; 6] = [2, 0, 0, 0, 1, 2];
const FAR_MAC: [u8; 6] = [2, 0, 0, 0, 7, 2];
const NEAR_MAC: [u8; 6] = [2, 0, 0, 0, 8, 2];
const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

/// VR `a`: vNIC 0 on VXLAN tunnel `vx` (VNI 42) over the loopback, with
/// 10.1.0.2 behind it; vNIC 1 on the loopback (its MAC's frames), with
/// 10.2.0.2. Without `vr`: no VR.
fn config(vr: bool) -> String {
    let head = r#"
ports = [{ name = "p0", driver = "af_xdp", interface = "lo" }]
[host]
fast_path = true

[[tunnels]]
name = "vx"
kind = "vxlan"
port = "p0"
local = "192.0.2.2"
remote = "192.0.2.1"
vni = 42
local_mac = "02:00:00:00:00:0b"
remote_mac = "02:00:00:00:00:0a"
"#;
    let vr_part = r#"
[[vrs]]
name = "a"
path = "fast"
vnics = [
  { tunnel = "vx", mac = "02:00:00:00:01:01", addrs = ["10.1.0.1/24"] },
  { port = "p0", mac = "02:00:00:00:01:02", addrs = ["10.2.0.1/24"] },
]
[vrs.router]
neighbours = [
  { ip = "10.1.0.2", mac = "02:00:00:00:07:02" },
  { ip = "10.2.0.2", mac = "02:00:00:00:08:02" },
]

[[rules]]
port = "p0"
dst_mac = "02:00:00:00:01:02"
vr = "a"
vnic = 1
"#;
    match vr {
        true => format!("{head}{vr_part}"),
        false => head.to_string(),
    }
}

fn frame(dst_mac: [u8; 6], dst: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr(dst_mac),
        src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
        src_ip: Ipv4Addr::new(10, 3, 0, 5),
        dst_ip: dst,
        sport: 1000,
        dport: 2000,
        ttl: 64,
        frame_bytes: 64,
    }
    .write(&mut f)
    .expect("frame");
    f
}

/// `f` as the router forwards it to `mac` from `src`.
fn routed(f: &[u8], mac: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    let mut r = f.to_vec();
    r[0..6].copy_from_slice(&mac);
    r[6..12].copy_from_slice(&src);
    let mut ip = Ipv4Packet::new_unchecked(&mut r[14..34]);
    ip.set_ttl(ip.ttl() - 1);
    ip.fill_checksum();
    r
}

fn with_outer(e: &mut Encap, inner: &[u8]) -> Vec<u8> {
    let h = e.header(inner).expect("outer headers");
    let mut f = h.hdr[..h.len].to_vec();
    f.extend_from_slice(&inner[h.strip..]);
    f
}

fn load(plan: &Plan) -> FastState {
    let mut st = FastState::load(&FastConf::default()).expect("load (needs root)");
    let lo = vrhost_fast::ifindex("lo").expect("loopback");
    st.ifindex.insert("lo".into(), lo);
    st.fp.add_port(lo).expect("out port");
    st.reconcile(plan, &|_| None).expect("reconcile");
    st
}

#[test]
fn a_vxlan_vnic_of_the_config_is_decapsulated_and_encapsulated_in_xdp() {
    let (_, plan) = Config::parse(&config(true), "t", FsPath::new(".")).expect("config");
    let ours = plan.vrs[0].vnic_tunnels[0].expect("a tunnel");
    let mut st = load(&plan);
    // Out: from the plain vNIC to 10.1.0.2, behind the tunnel.
    let f = frame(PLAIN_MAC, Ipv4Addr::new(10, 1, 0, 2));
    let (act, out) = st.fp.test_run(&f).expect("test run");
    assert_eq!(act, Action::Redirect, "encapsulated");
    let inner = routed(&f, FAR_MAC, TUN_MAC);
    assert_eq!(out, with_outer(&mut Encap::new(ours), &inner));
    // In: from the peer to 10.2.0.2, on the plain vNIC.
    let peer = Tunnel {
        local: REMOTE,
        remote: LOCAL,
        local_mac: PEER_MAC,
        remote_mac: Some(OUR_MAC),
        ..ours
    };
    let f = frame(TUN_MAC, Ipv4Addr::new(10, 2, 0, 2));
    let outer = with_outer(&mut Encap::new(peer), &f);
    let (act, out) = st.fp.test_run(&outer).expect("test run");
    assert_eq!(act, Action::Redirect, "decapsulated and routed");
    assert_eq!(out, routed(&f, NEAR_MAC, PLAIN_MAC));
    assert_eq!(st.counters("a").expect("counters").fwd, 2);
    // The VR gone: its tunnel too; the frame is the slow path's, as it came.
    let (_, none) = Config::parse(&config(false), "t", FsPath::new(".")).expect("config");
    st.reconcile(&none, &|_| None).expect("reconcile");
    let (act, out) = st.fp.test_run(&outer).expect("test run");
    assert_eq!((act, out), (Action::Pass, outer));
}
