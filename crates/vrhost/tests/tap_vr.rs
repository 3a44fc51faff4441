//! A `kind = "tap"` VR (root only; needs `ip`, `ethtool`, `ping`,
//! `iperf3`): its vNICs are TAPs in its namespace `vrctl-<vr>`, whose
//! Linux forwarding is the data plane; vrhost moves the frames between
//! the ports and the TAPs. Pings and TCP pass from ns-a to ns-b through
//! it, with the TTL the namespace's kernel decremented; forwarding off
//! in the namespace stops them. What its `control_plane` command names
//! runs in the namespace, and its status is the VR's.
//!
//! ```text
//!  ns-a                   ns-r: vrhost daemon (nsenter --net)          ns-b
//!  a0 10.0.1.2 --- r0 [p0 af_packet] VR [p1 af_packet] r1 --- b0 10.0.2.2
//!                                    |
//!                 vrctl-<vr>: vnic0 10.0.1.1, vnic1 10.0.2.1 (TAPs), ip_forward
//! ```

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::CtlNs;
use vrhost_lab::{Netns, veth};

const R0_MAC: &str = "02:cc:00:00:0a:10";
const R1_MAC: &str = "02:cc:00:00:0a:11";
const B: &str = "10.0.2.2";
/// A bound against a hung test, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(30);

/// ns-a, ns-r, ns-b with their veths and addresses.
fn topology() -> [Netns; 3] {
    let na = Netns::unique("tap-a").expect("ns-a");
    let nr = Netns::unique("tap-r").expect("ns-r");
    let nb = Netns::unique("tap-b").expect("ns-b");
    for n in [&na, &nr, &nb] {
        n.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
        n.sysctl("net.ipv6.conf.default.disable_ipv6", "1").unwrap();
    }
    veth(&na, "a0", None, &nr, "r0", Some(R0_MAC)).expect("a0-r0");
    veth(&nr, "r1", Some(R1_MAC), &nb, "b0", None).expect("r1-b0");
    for (ns, dev, addr, gw) in [
        (&na, "a0", "10.0.1.2/24", "10.0.1.1"),
        (&nb, "b0", "10.0.2.2/24", "10.0.2.1"),
    ] {
        ns.ip(&["addr", "add", addr, "dev", dev]).unwrap();
        ns.ip(&["route", "add", "default", "via", gw]).unwrap();
        // An af_packet port hands TCP segments on with their checksums
        // unfinished: the namespace's kernel would drop them.
        ns.exec("ethtool", &["-K", dev, "tx", "off"])
            .unwrap_or_else(|e| panic!("{dev} tx off: {e}"));
    }
    nr.sysctl("net.ipv4.ip_forward", "0").unwrap();
    [na, nr, nb]
}

fn ping(ns: &Netns, args: &[&str]) -> (bool, String) {
    let out = ns.command("ping").args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success(), text)
}

fn in_vr_ns(ns: &str, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn linux_forwarding_in_a_tap_vr_carries_ping_and_tcp() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let vr = format!("tv{}", std::process::id());
    let ns = format!("vrctl-{vr}");
    let _ctl = CtlNs(ns.clone());
    let [na, nr, nb] = topology();
    let vnics = format!(
        r#"kind = "tap"
control_plane = {{ command = ["/bin/sleep", "1000"] }}
vnics = [
  {{ port = "p0", mac = "{R0_MAC}", addrs = ["10.0.1.1/24"] }},
  {{ port = "p1", mac = "{R1_MAC}", addrs = ["10.0.2.1/24"] }},
]"#
    );
    let cfg = common::two_port_config("af_packet", ["r0", "r1"], &vr, &vnics);
    let net = format!("--net=/run/netns/{}", nr.name());
    let d = common::daemon::Daemon::start_under("tap", &cfg, &["nsenter", &net]);

    // The namespace: its TAPs with the vNICs' MACs and addresses,
    // forwarding on.
    let link = in_vr_ns(&ns, &["ip", "addr", "show", "vnic1"]);
    assert!(
        link.contains(R1_MAC) && link.contains("10.0.2.1/24"),
        "{link}"
    );
    let fwd = in_vr_ns(&ns, &["sysctl", "-n", "net.ipv4.ip_forward"]);
    assert_eq!(fwd.trim(), "1");

    let t = Instant::now();
    while !ping(&na, &["-c", "1", "-W", "1", B]).0 {
        assert!(t.elapsed() < PATIENCE, "no ping through the tap VR");
    }
    let (ok, out) = ping(&na, &["-c", "3", "-i", "0.2", "-W", "2", B]);
    assert!(ok && out.contains("3 received"), "{out}");
    // The namespace's kernel routed them: TTL 64 - 1 at B, as the reply
    // at A.
    assert!(out.contains("ttl=63"), "{out}");
    // The namespace's neighbour table learnt both hosts by ARP.
    let neigh = in_vr_ns(&ns, &["ip", "neigh", "show"]);
    assert!(
        neigh.contains("10.0.1.2") && neigh.contains("10.0.2.2"),
        "{neigh}"
    );
    // The VR's process looked at none of the frames: all handed to the
    // TAPs (its ctl ports' tx) and back.
    let stats = d.stats();
    let port = |name: String| {
        stats["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no port {name} in {stats}"))
    };
    for i in 0..2 {
        let p = port(format!("ctl:{vr}:{i}"));
        assert!(p["tx_packets"].as_u64() >= Some(3), "{p}");
        assert!(p["rx_packets"].as_u64() >= Some(3), "{p}");
    }
    let gbps = vrhost_lab::tools::iperf3_ns(&nb, &na, B, 1).expect("iperf3");
    assert!(gbps > 0.0);
    // The command runs in the namespace, as its status says.
    let pids = Command::new("ip")
        .args(["netns", "pids", &ns])
        .output()
        .unwrap();
    let pid = String::from_utf8_lossy(&pids.stdout).trim().to_string();
    let cp = d.json(&["vr", "show", &vr])["stats"]["control_plane"].clone();
    assert_eq!(cp["running"], true, "{cp}");
    assert_eq!(cp["pid"].to_string(), pid, "{cp}");

    // Forwarding off in the namespace: nothing passes.
    in_vr_ns(&ns, &["sysctl", "-qw", "net.ipv4.ip_forward=0"]);
    let (ok, out) = ping(&na, &["-c", "2", "-i", "0.2", "-W", "1", B]);
    assert!(!ok, "forwarded with ip_forward off: {out}");
    drop(d);
}
