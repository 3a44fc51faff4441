//! IPv6 end to end through a built-in router VR with standard tools (root
//! only; needs `ip`, `ethtool`, `ping`, `iperf3`): `ping -6` and `iperf3 -6`
//! (TCP) between two namespaces through a VR on `af_xdp` ports; the hosts'
//! kernels find the VR by neighbour discovery and the VR finds them the
//! same way; hop limit 1 gets time exceeded, an unknown prefix
//! destination unreachable, and a packet larger than vNIC 1's MTU packet
//! too big, which the sender's kernel takes into its route cache.
//!
//! ```text
//!  ns-a                     ns-r: vrhost daemon (nsenter --net)        ns-b
//!  a0 2001:db8:1::2 --- r0 [p0 af_xdp] VR [p1 af_xdp] r1 --- b0 2001:db8:2::2
//!                       2001:db8:1::1     2001:db8:2::1, mtu 1280
//! ```

mod common;

use std::time::{Duration, Instant};

use vrhost_lab::{Netns, veth};

const R0_MAC: &str = "02:cc:00:00:06:10";
const R1_MAC: &str = "02:cc:00:00:06:11";
const A: &str = "2001:db8:1::2";
const B: &str = "2001:db8:2::2";
/// A bound against a hung test, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(30);

/// Offloads off on a veth end: an XDP port hands frames on as they are,
/// so segments must be whole and their checksums filled in.
fn offloads_off(ns: &Netns, dev: &str) {
    ns.exec(
        "ethtool",
        &[
            "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off",
        ],
    )
    .unwrap_or_else(|e| panic!("offloads off on {dev}: {e}"));
}

/// ns-a, ns-r, ns-b with their veths and addresses (no DAD: the
/// addresses are usable at once).
fn topology() -> [Netns; 3] {
    let na = Netns::unique("v6-a").expect("ns-a");
    let nr = Netns::unique("v6-r").expect("ns-r");
    let nb = Netns::unique("v6-b").expect("ns-b");
    // The daemon's namespace has no IPv6 of its own on r0 and r1.
    nr.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
    nr.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
        .unwrap();
    veth(&na, "a0", None, &nr, "r0", Some(R0_MAC)).expect("a0-r0");
    veth(&nr, "r1", Some(R1_MAC), &nb, "b0", None).expect("r1-b0");
    for (ns, dev, addr, gw) in [
        (&na, "a0", "2001:db8:1::2/64", "2001:db8:1::1"),
        (&nb, "b0", "2001:db8:2::2/64", "2001:db8:2::1"),
    ] {
        ns.ip(&["-6", "addr", "add", addr, "dev", dev, "nodad"])
            .unwrap();
        ns.ip(&["-6", "route", "add", "default", "via", gw])
            .unwrap();
        offloads_off(ns, dev);
    }
    offloads_off(&nr, "r0");
    offloads_off(&nr, "r1");
    [na, nr, nb]
}

fn config(vr: &str) -> String {
    let vnics = format!(
        r#"vnics = [
  {{ port = "p0", mac = "{R0_MAC}", addrs = ["2001:db8:1::1/64"] }},
  {{ port = "p1", mac = "{R1_MAC}", addrs = ["2001:db8:2::1/64"], mtu = 1280 }},
]"#
    );
    common::two_port_config("af_xdp", ["r0", "r1"], vr, &vnics)
}

/// `ping -6` from `ns` with `args`; its output, whether it succeeded or
/// not.
fn ping6(ns: &Netns, args: &[&str]) -> (bool, String) {
    let out = ns.command("ping").arg("-6").args(args).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Wait (up to [`PATIENCE`]) until `f` holds.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < PATIENCE, "waited {PATIENCE:?} for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn ping6_and_iperf3_pass_through_the_vr_with_its_icmpv6_errors() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: needs root");
        return;
    }
    let vr = format!("v6{}", std::process::id());
    let [na, nr, nb] = topology();
    let net = format!("--net=/run/netns/{}", nr.name());
    let d = common::daemon::Daemon::start_under("v6", &config(&vr), &["nsenter", &net]);

    // Through the VR (the first may be lost while the VR resolves B).
    until("a ping -6 through the VR", || {
        ping6(&na, &["-c", "1", "-W", "1", B]).0
    });
    let (ok, out) = ping6(&na, &["-c", "3", "-i", "0.2", "-W", "2", B]);
    assert!(ok && out.contains("3 received"), "{out}");
    // The VR answered the hosts' solicitations for its addresses...
    let n = na.ip(&["-6", "neigh", "show", "2001:db8:1::1"]).unwrap();
    assert!(n.contains(R0_MAC), "ns-a's neighbour entry: {n}");
    let n = nb.ip(&["-6", "neigh", "show", "2001:db8:2::1"]).unwrap();
    assert!(n.contains(R1_MAC), "ns-b's neighbour entry: {n}");
    // ... and answers echo itself.
    let (ok, out) = ping6(&na, &["-c", "1", "-W", "2", "2001:db8:1::1"]);
    assert!(ok, "{out}");
    let (ok, out) = ping6(&nb, &["-c", "1", "-W", "2", "2001:db8:2::1"]);
    assert!(ok, "{out}");

    // TCP over IPv6, both ways through the VR.
    let gbps = vrhost_lab::tools::iperf3_ns(&nb, &na, B, 1).expect("iperf3 -6");
    assert!(gbps > 0.0, "{gbps}");

    // Hop limit 1: time exceeded from the VR's address on A's side.
    let (ok, out) = ping6(&na, &["-c", "1", "-W", "2", "-t", "1", B]);
    assert!(!ok && out.contains("Time exceeded"), "{out}");
    assert!(out.contains("From 2001:db8:1::1"), "{out}");
    // No route: destination unreachable.
    let (ok, out) = ping6(&na, &["-c", "1", "-W", "2", "2001:db8:99::1"]);
    assert!(!ok && out.contains("Destination unreachable"), "{out}");

    // Larger than vNIC 1's MTU: packet too big, which A's kernel keeps
    // as the path's MTU; then a packet that fits passes.
    let (ok, out) = ping6(&na, &["-c", "1", "-W", "2", "-M", "do", "-s", "1400", B]);
    assert!(!ok, "{out}");
    let route = na.ip(&["-6", "route", "get", B]).unwrap();
    assert!(
        route.contains("mtu 1280"),
        "A's route after the error: {route}"
    );
    let (ok, out) = ping6(&na, &["-c", "1", "-W", "2", "-M", "do", "-s", "1200", B]);
    assert!(ok, "{out}");
    // B's side has no MTU: a large packet from B reaches A.
    let (ok, out) = ping6(&nb, &["-c", "1", "-W", "2", "-s", "1400", A]);
    assert!(ok, "{out}");
    drop(d);
}
