//! The checks of the `[[tunnels]]` tables into [`Tunnel`]s: a kind, an
//! underlay port of the config, local and remote IPv4 addresses, the UDP
//! port and VNI the kind needs, and the outer MACs. Which vNIC each tunnel
//! feeds is the VRs' check (`vrs`); that no tunnel feeds two is checked
//! here ([`tunnel_table`]).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use vrhost_packet::tunnel::{VNI_MAX, VXLAN_PORT};

use super::plan::VrPlan;
use super::schema::{PortConfig, TunnelConf};
use super::{ConfigError, Source, parse_mac};
use crate::tunnel::{Tunnel, TunnelKind, TunnelTable};

/// The checked tunnels by name: their index and value (`inner_mac` left
/// as broadcast: the vNIC's MAC is the VR check's to set).
pub(super) type TunnelIx = BTreeMap<String, (usize, Tunnel)>;

/// Check every tunnel, in order.
pub(super) fn check_tunnels(
    tunnels: &[TunnelConf],
    ports: &[PortConfig],
    port_ix: &BTreeMap<String, usize>,
    at: &Source,
) -> Result<TunnelIx, ConfigError> {
    let mut ix = TunnelIx::new();
    for (i, c) in tunnels.iter().enumerate() {
        let t = check_tunnel(i, c, ports, port_ix, at)?;
        let n = c.name.get_ref();
        if let Some((j, _)) = ix.values().find(|(_, o)| clash(o, &t)) {
            let msg = format!(
                "its frames cannot be told from tunnels[{j}]'s: same underlay port, local address \
                 and UDP port, and another kind, or the same remote and VNI"
            );
            return Err(at.err(c.name.span(), format!("tunnels[{i}]"), msg));
        }
        if n.is_empty() || ix.insert(n.clone(), (i, t)).is_some() {
            let msg = format!("{n:?}: empty or defined twice");
            return Err(at.err(c.name.span(), format!("tunnels[{i}].name"), msg));
        }
    }
    Ok(ix)
}

/// Whether frames of `a` and `b` could not be told apart: the same
/// underlay port, local address and UDP port (0 for IP-in-IP) with
/// another kind (a `udp` and a `vxlan` tunnel on one UDP port), or with the
/// same kind, remote and VNI.
fn clash(a: &Tunnel, b: &Tunnel) -> bool {
    a.port == b.port
        && a.local == b.local
        && a.udp_port == b.udp_port
        && (a.kind != b.kind || (a.remote == b.remote && a.vni == b.vni))
}

fn check_tunnel(
    i: usize,
    c: &TunnelConf,
    ports: &[PortConfig],
    port_ix: &BTreeMap<String, usize>,
    at: &Source,
) -> Result<Tunnel, ConfigError> {
    let field = |f: &str| format!("tunnels[{i}].{f}");
    let kind = match c.kind.get_ref().as_str() {
        "vxlan" => TunnelKind::Vxlan,
        "udp" => TunnelKind::Udp,
        "ipip" => TunnelKind::Ipip,
        k => {
            let msg = format!("{k:?}: must be \"vxlan\", \"udp\" or \"ipip\"");
            return Err(at.err(c.kind.span(), field("kind"), msg));
        }
    };
    let Some(&port) = port_ix.get(c.port.get_ref()) else {
        let msg = format!("no port {:?}", c.port.get_ref());
        return Err(at.err(c.port.span(), field("port"), msg));
    };
    let addr = |s: &toml::Spanned<String>, f: &str| -> Result<Ipv4Addr, ConfigError> {
        match s.get_ref().parse::<Ipv4Addr>() {
            Ok(a) if !a.is_unspecified() && !a.is_broadcast() && !a.is_multicast() => Ok(a),
            _ => Err(at.err(
                s.span(),
                field(f),
                format!("{:?}: not a unicast IPv4 address", s.get_ref()),
            )),
        }
    };
    let (local, remote) = (addr(&c.local, "local")?, addr(&c.remote, "remote")?);
    let (udp_port, vni) = udp_port_vni(i, c, kind, at)?;
    let mac = |s: &toml::Spanned<String>, f: &str| {
        parse_mac(s.get_ref()).map_err(|m| at.err(s.span(), field(f), m))
    };
    let local_mac = match &c.local_mac {
        Some(m) => mac(m, "local_mac")?,
        None => {
            interface_mac(&ports[port]).map_err(|m| at.err(c.port.span(), field("local_mac"), m))?
        }
    };
    let remote_mac = c
        .remote_mac
        .as_ref()
        .map(|m| mac(m, "remote_mac"))
        .transpose()?;
    Ok(Tunnel {
        kind,
        port,
        local,
        remote,
        udp_port,
        vni,
        local_mac,
        remote_mac,
        inner_mac: [0xff; 6],
    })
}

/// The UDP port and VNI of tunnel `i`: what its kind needs, and nothing it
/// does not.
fn udp_port_vni(
    i: usize,
    c: &TunnelConf,
    kind: TunnelKind,
    at: &Source,
) -> Result<(u16, u32), ConfigError> {
    let field = |f: &str| format!("tunnels[{i}].{f}");
    let udp_port = c.udp_port.as_ref().map(|p| (*p.get_ref(), p.span()));
    let vni = c.vni.as_ref().map(|v| (*v.get_ref(), v.span()));
    let needs = |what: &str| {
        at.err(
            c.name.span(),
            field(what),
            format!("a {} tunnel needs `{what}`", kind.name()),
        )
    };
    let not_for = |what: &str, span| {
        at.err(
            span,
            field(what),
            format!("not for a {} tunnel", kind.name()),
        )
    };
    let port = match (kind, udp_port) {
        (TunnelKind::Ipip, Some((_, span))) => return Err(not_for("udp_port", span)),
        (TunnelKind::Ipip, None) => 0,
        (_, Some((0, span))) => {
            return Err(at.err(span, field("udp_port"), "0: must be 1..=65535".into()));
        }
        (_, Some((p, _))) => p,
        (TunnelKind::Vxlan, None) => VXLAN_PORT,
        (TunnelKind::Udp, None) => return Err(needs("udp_port")),
    };
    let vni = match (kind, vni) {
        (TunnelKind::Vxlan, Some((v, span))) if v > VNI_MAX => {
            return Err(at.err(span, field("vni"), format!("{v}: must be 0..={VNI_MAX}")));
        }
        (TunnelKind::Vxlan, Some((v, _))) => v,
        (TunnelKind::Vxlan, None) => return Err(needs("vni")),
        (_, Some((_, span))) => return Err(not_for("vni", span)),
        (_, None) => 0,
    };
    Ok((port, vni))
}

/// The MAC address of port `p`'s interface, from sysfs.
pub(super) fn interface_mac(p: &PortConfig) -> Result<[u8; 6], String> {
    let Some(ifname) = p.interface.as_ref().map(|i| i.get_ref()) else {
        return Err(format!(
            "port {:?} has no interface: give `local_mac`",
            p.name.get_ref()
        ));
    };
    // Not a name Linux gives an interface: no path to look at.
    if ifname.contains('/') || ifname == "." || ifname == ".." {
        return Err(format!("not given, and {ifname:?} is no interface name"));
    }
    let path = format!("/sys/class/net/{ifname}/address");
    let s = std::fs::read_to_string(&path).map_err(|e| format!("not given, and {path}: {e}"))?;
    parse_mac(s.trim()).map_err(|e| format!("not given, and {path}: {e}"))
}

/// The table of the tunnels the VRs' vNICs use (`vrs[i].vnic_tunnels`);
/// a tunnel used by two vNICs is refused.
pub(super) fn tunnel_table(
    vrs: &[VrPlan],
    cfg: &[super::VrConf],
    at: &Source,
) -> Result<TunnelTable, ConfigError> {
    let mut table = TunnelTable::default();
    let mut used: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (i, (v, c)) in vrs.iter().zip(cfg).enumerate() {
        for (j, t) in v.vnic_tunnels.iter().enumerate() {
            let (Some(t), Some(name)) = (t, c.vnics.get_ref()[j].tunnel.as_ref()) else {
                continue;
            };
            if let Some((a, b)) = used.insert(name.get_ref().clone(), (i, j)) {
                let msg = format!(
                    "tunnel {:?} is vrs[{a}].vnics[{b}]'s already",
                    name.get_ref()
                );
                return Err(at.err(name.span(), format!("vrs[{i}].vnics[{j}].tunnel"), msg));
            }
            table.add(*t, i, j as u16);
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{assert_refused, parse};
    use crate::tunnel::TunnelKind;

    /// A VR whose vNIC 0 is the VXLAN tunnel `vx` (fields `extra` added to
    /// the tunnel) and vNIC 1 port `p1`.
    fn cfg(extra: &str) -> String {
        format!(
            r#"
[[ports]]
name = "p0"
driver = "af_packet"
interface = "veth0"

[[ports]]
name = "p1"
driver = "af_packet"
interface = "veth1"

[[tunnels]]
name = "vx"
kind = "vxlan"
port = "p0"
local = "192.0.2.2"
remote = "192.0.2.1"
local_mac = "02:00:00:00:00:0b"
{extra}

[[vrs]]
name = "a"
vnics = [
  {{ tunnel = "vx", mac = "02:00:00:00:01:01", addrs = ["10.1.0.1/24"] }},
  {{ port = "p1", mac = "02:00:00:00:01:02", addrs = ["10.2.0.1/24"] }},
]
"#
        )
    }

    #[test]
    fn a_vxlan_vnic_is_planned_on_its_underlay_port() {
        let p = parse(&cfg("vni = 42")).unwrap();
        let v = &p.vrs[0];
        assert_eq!(v.vnic_ports, vec![0, 1]);
        let t = v.vnic_tunnels[0].unwrap();
        assert_eq!(
            (t.kind, t.port, t.udp_port, t.vni),
            (TunnelKind::Vxlan, 0, 4789, 42)
        );
        assert_eq!(t.remote_mac, None, "learned");
        assert_eq!(t.inner_mac, [2, 0, 0, 0, 1, 1], "the vNIC's MAC");
        assert_eq!(v.vnic_tunnels[1], None);
        assert_eq!(v.path_spec().tunnels, v.vnic_tunnels);
        assert!(!p.classifier.tunnels().is_empty());
        let fast = parse(&format!("[host]\nfast_path = true\n{}", cfg("vni = 42"))).unwrap();
        let why = fast.vrs[0].fast.clone().unwrap_err();
        assert!(why.contains("a tunnel vNIC"), "{why}");
        let p = parse(&cfg(
            "vni = 7\nudp_port = 8472\nremote_mac = \"02:00:00:00:00:0a\"",
        ))
        .unwrap();
        let t = p.vrs[0].vnic_tunnels[0].unwrap();
        assert_eq!(
            (t.udp_port, t.remote_mac),
            (8472, Some([2, 0, 0, 0, 0, 0x0a]))
        );
    }

    #[test]
    fn bad_tunnels_are_refused_naming_the_field() {
        for (extra, want) in [
            ("", "tunnels[0].vni: a vxlan tunnel needs `vni`"),
            (
                "vni = 16777216",
                "tunnels[0].vni: 16777216: must be 0..=16777215",
            ),
            (
                "vni = 1\nudp_port = 0",
                "tunnels[0].udp_port: 0: must be 1..=65535",
            ),
            (
                "vni = 1\nremote_mac = \"02:00\"",
                "tunnels[0].remote_mac: \"02:00\"",
            ),
            ("vni = 1\nmtu = 3", "unknown field `mtu`"),
        ] {
            assert_refused(parse(&cfg(extra)), want, extra);
        }
        let good = cfg("vni = 1");
        for (from, to, want) in [
            (
                "kind = \"vxlan\"",
                "kind = \"gre\"",
                "tunnels[0].kind: \"gre\": must be",
            ),
            (
                "port = \"p0\"",
                "port = \"p9\"",
                "tunnels[0].port: no port \"p9\"",
            ),
            (
                "remote = \"192.0.2.1\"",
                "remote = \"192.0.2\"",
                "tunnels[0].remote: \"192.0.2\": not a unicast",
            ),
            (
                "local = \"192.0.2.2\"",
                "local = \"224.0.0.1\"",
                "tunnels[0].local: \"224.0.0.1\"",
            ),
            (
                "tunnel = \"vx\"",
                "tunnel = \"vy\"",
                "vrs[0].vnics[0].tunnel: no tunnel \"vy\"",
            ),
            (
                "tunnel = \"vx\"",
                "tunnel = \"vx\", port = \"p0\"",
                "vrs[0].vnics[0].port: a port or a tunnel, not both",
            ),
            (
                "tunnel = \"vx\", ",
                "",
                "vrs[0].vnics[0]: needs a `port` or a `tunnel`",
            ),
            (
                "kind = \"vxlan\"",
                "kind = \"ipip\"",
                "tunnels[0].vni: not for a ipip tunnel",
            ),
            (
                "kind = \"vxlan\"",
                "kind = \"udp\"",
                "tunnels[0].udp_port: a udp tunnel needs `udp_port`",
            ),
            (
                "local_mac = \"02:00:00:00:00:0b\"\n",
                "",
                "tunnels[0].local_mac: not given, and /sys/class/net/veth0/address",
            ),
            (
                "port = \"p1\", mac = \"02:00:00:00:01:02\"",
                "tunnel = \"vx\", mac = \"02:00:00:00:01:02\"",
                "vrs[0].vnics[1].tunnel: tunnel \"vx\" is vrs[0].vnics[0]'s already",
            ),
        ] {
            assert!(good.contains(from), "{from}");
            assert_refused(parse(&good.replacen(from, to, 1)), want, to);
        }
    }

    #[test]
    fn an_underlay_without_an_interface_name_needs_a_local_mac() {
        let c = cfg("vni = 1")
            .replace("interface = \"veth0\"", "interface = \"..\"")
            .replace("local_mac = \"02:00:00:00:00:0b\"\n", "");
        let want = "tunnels[0].local_mac: not given, and \"..\" is no interface name";
        assert_refused(parse(&c), want, "..");
    }

    #[test]
    fn two_tunnels_that_frames_cannot_tell_apart_are_refused() {
        let second = |lines: &str| {
            let t = format!(
                "[[tunnels]]\nname = \"vy\"\nport = \"p0\"\nlocal = \"192.0.2.2\"\n\
                 local_mac = \"02:00:00:00:00:0b\"\n{lines}\n\n[[vrs]]"
            );
            cfg("vni = 1").replacen("[[vrs]]", &t, 1)
        };
        let same = "tunnels[1]: its frames cannot be told from tunnels[0]'s";
        let vx = |vni: u32| format!("kind = \"vxlan\"\nremote = \"192.0.2.1\"\nvni = {vni}");
        assert_refused(parse(&second(&vx(1))), same, "same VNI");
        parse(&second(&vx(2))).unwrap();
        // A udp tunnel on the VXLAN port, even to another remote.
        let udp = |port: u16| format!("kind = \"udp\"\nremote = \"192.0.2.9\"\nudp_port = {port}");
        assert_refused(parse(&second(&udp(4789))), same, "udp on 4789");
        parse(&second(&udp(4790))).unwrap();
    }
}
