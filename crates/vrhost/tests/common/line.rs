//! Three namespaces in a line, `a - r - b`, as the fast-path tests draw
//! them: `a0` (10.0.1.2) to `r0`, `r1` to `b0` (10.0.2.2), the router's
//! addresses 10.0.1.1 and 10.0.2.1 (the daemon in `r` takes `r0`/`r1`).

use vrhost_lab::{Netns, veth};

/// The four ends' MACs (each test its own, so a leftover of one test is
/// never mistaken for another's frames).
pub struct LineMacs {
    pub a0: &'static str,
    pub r0: &'static str,
    pub r1: &'static str,
    pub b0: &'static str,
}

/// The namespaces (named from `prefix`) and their two veths, nothing
/// else but IPv6 off before the veths exist (no neighbour discovery or
/// MLD beside the test's own frames).
pub fn bare_line(prefix: &str, m: &LineMacs) -> [Netns; 3] {
    let na = Netns::unique(&format!("{prefix}-a")).expect("ns-a");
    let nr = Netns::unique(&format!("{prefix}-r")).expect("ns-r");
    let nb = Netns::unique(&format!("{prefix}-b")).expect("ns-b");
    for n in [&na, &nr, &nb] {
        n.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
        n.sysctl("net.ipv6.conf.default.disable_ipv6", "1").unwrap();
    }
    veth(&na, "a0", Some(m.a0), &nr, "r0", Some(m.r0)).expect("a0-r0");
    veth(&nr, "r1", Some(m.r1), &nb, "b0", Some(m.b0)).expect("r1-b0");
    [na, nr, nb]
}

/// [`bare_line`] with the ends' addresses and routes: the router's MAC
/// known in `a` (no ARP in the test's counts), no forwarding in `r`,
/// `a0`'s tx checksum offload off (a UDP checksum left partial would reach
/// an AF_XDP socket) and GRO on `b0` (a veth takes XDP-forwarded frames
/// only with it).
pub fn line(prefix: &str, m: &LineMacs) -> [Netns; 3] {
    let [na, nr, nb] = bare_line(prefix, m);
    na.ip(&["addr", "add", "10.0.1.2/24", "dev", "a0"]).unwrap();
    nb.ip(&["addr", "add", "10.0.2.2/24", "dev", "b0"]).unwrap();
    na.ip(&["route", "add", "default", "via", "10.0.1.1"])
        .unwrap();
    nb.ip(&["route", "add", "default", "via", "10.0.2.1"])
        .unwrap();
    na.ip(&[
        "neigh",
        "replace",
        "10.0.1.1",
        "lladdr",
        m.r0,
        "dev",
        "a0",
        "nud",
        "permanent",
    ])
    .unwrap();
    nr.sysctl("net.ipv4.ip_forward", "0").unwrap();
    na.exec("ethtool", &["-K", "a0", "tx", "off"])
        .expect("a0 tx checksum off");
    nb.exec("ethtool", &["-K", "b0", "gro", "on"])
        .expect("b0 gro on");
    [na, nr, nb]
}

/// The daemon's config for [`line`]'s `r`: a fast path on `r0` and `r1`
/// (ports `p0`, `p1`, `af_xdp`), VR `r` on `path` with vNIC 0 on `p0`
/// (10.0.1.1/24) and vNIC 1 on `p1` (10.0.2.1/24), its `[vrs.router]`
/// table's body `router`, each vNIC's frames sent to it by its MAC.
pub fn line_config(m: &LineMacs, path: &str, router: &str) -> String {
    let (r0, r1) = (m.r0, m.r1);
    format!(
        r#"
[host]
fast_path = true

[[ports]]
name = "p0"
driver = "af_xdp"
interface = "r0"

[[ports]]
name = "p1"
driver = "af_xdp"
interface = "r1"

[[vrs]]
name = "r"
path = "{path}"
vnics = [
  {{ port = "p0", mac = "{r0}", addrs = ["10.0.1.1/24"] }},
  {{ port = "p1", mac = "{r1}", addrs = ["10.0.2.1/24"] }},
]
[vrs.router]
{router}

[[rules]]
port = "p0"
dst_mac = "{r0}"
vr = "r"
vnic = 0

[[rules]]
port = "p1"
dst_mac = "{r1}"
vr = "r"
vnic = 1
"#
    )
}
