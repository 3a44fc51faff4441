//! A VR's tunnel vNICs in the fast path ([`crate::fast`]): which of its
//! tunnels the program carries (those on an attached underlay port) and
//! the tunnel ids they get.
//!
//! A tunnel's id is the VR's fast-path id x [`FAST_TUNNEL_VNICS`] + its
//! vNIC, so ids stay the VR's as long as its own id does. What the daemon
//! computes for a VR ([`crate::fast::Desired`]) does not know that id yet:
//! there a tunnel vNIC's port is [`vnic_port`]`(vnic)`, which [`real_port`]
//! turns into the program's port for the tunnel when it is written.

use std::collections::BTreeMap;

use vrhost_fast::{FastTunnel, FastTunnelKind, tunnel_ifindex};
use vrhost_host::TunnelKind;
use vrhost_host::config::{FAST_TUNNEL_VNICS, Plan, VrPlan};

/// The fast path's tunnels of VR `vr`, by vNIC: those on an attached
/// underlay port (`ifindex`: by interface).
pub(crate) fn tunnels_of(
    plan: &Plan,
    vr: &VrPlan,
    ifindex: &BTreeMap<String, u32>,
) -> BTreeMap<u16, FastTunnel> {
    let mut m = BTreeMap::new();
    for (j, t) in vr.vnic_tunnels.iter().enumerate() {
        let Some(t) = t else { continue };
        let kind = match t.kind {
            TunnelKind::Vxlan => FastTunnelKind::Vxlan(t.vni),
            TunnelKind::Udp => FastTunnelKind::Udp,
            TunnelKind::Ipip => FastTunnelKind::Ipip,
        };
        let Some(&ifx) = plan.ports.get(t.port).and_then(|p| ifindex.get(&p.2)) else {
            continue;
        };
        if j >= FAST_TUNNEL_VNICS {
            continue;
        }
        let ft = FastTunnel {
            kind,
            ifindex: ifx,
            local: t.local,
            remote: t.remote,
            udp_port: t.udp_port,
            local_mac: t.local_mac,
            peer_mac: t.remote_mac,
            inner_mac: t.inner_mac,
        };
        m.insert(j as u16, ft);
    }
    m
}

/// The port standing for tunnel vNIC `vnic` before the VR has an id.
pub(crate) fn vnic_port(vnic: u16) -> u32 {
    tunnel_ifindex(u32::from(vnic))
}

/// The tunnel id of VR id `vr`'s vNIC `vnic`.
pub(crate) fn tunnel_id(vr: u32, vnic: u16) -> u32 {
    vr * FAST_TUNNEL_VNICS as u32 + u32::from(vnic)
}

/// The program's port for `ifx` of VR id `vr`: a [`vnic_port`] becomes
/// its tunnel's, any other is left as it is.
pub(crate) fn real_port(vr: u32, ifx: u32) -> u32 {
    let flag = tunnel_ifindex(0);
    if ifx & flag == 0 {
        return ifx;
    }
    tunnel_ifindex(tunnel_id(vr, (ifx & !flag) as u16))
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::path::Path as FsPath;

    use vrhost_fast::Neighbour;
    use vrhost_host::config::Config;

    use super::*;
    use crate::fast::desired;

    /// VR `a`: vNIC 0 on tunnel `vx` (`kind`, with `extra`) over port p0,
    /// vNIC 1 on p1.
    fn cfg(kind: &str, extra: &str) -> String {
        format!(
            r#"
[host]
fast_path = true

[[ports]]
name = "p0"
driver = "af_xdp"
interface = "veth0"

[[ports]]
name = "p1"
driver = "af_xdp"
interface = "veth1"

[[tunnels]]
name = "vx"
kind = "{kind}"
port = "p0"
local = "192.0.2.2"
remote = "192.0.2.1"
local_mac = "02:00:00:00:00:0b"
remote_mac = "02:00:00:00:00:0a"
{extra}

[[vrs]]
name = "a"
path = "fast"
vnics = [
  {{ tunnel = "vx", mac = "02:00:00:00:01:01", addrs = ["10.1.0.1/24"] }},
  {{ port = "p1", mac = "02:00:00:00:01:02", addrs = ["10.2.0.1/24"] }},
]
[vrs.router]
neighbours = [{{ ip = "10.1.0.2", mac = "02:00:00:00:07:02" }}]

[[rules]]
port = "p1"
vr = "a"
vnic = 1
"#
        )
    }

    #[test]
    fn a_vxlan_vnic_is_a_tunnel_with_its_select_key_and_neighbours() {
        let (_, plan) = Config::parse(&cfg("vxlan", "vni = 42"), "t", FsPath::new(".")).unwrap();
        let ifx = BTreeMap::from([("veth0".to_string(), 7), ("veth1".to_string(), 8)]);
        let d = desired(&plan, &plan.vrs[0], &BTreeMap::new(), &[], &ifx).unwrap();
        let t = FastTunnel {
            kind: FastTunnelKind::Vxlan(42),
            ifindex: 7,
            local: Ipv4Addr::new(192, 0, 2, 2),
            remote: Ipv4Addr::new(192, 0, 2, 1),
            udp_port: 4789,
            local_mac: [2, 0, 0, 0, 0, 0x0b],
            peer_mac: Some([2, 0, 0, 0, 0, 0x0a]),
            inner_mac: [2, 0, 0, 0, 1, 1],
        };
        assert_eq!(d.tunnels, BTreeMap::from([(0, t)]));
        let n = Neighbour {
            mac: [2, 0, 0, 0, 7, 2],
            src_mac: [2, 0, 0, 0, 1, 1],
            ifindex: vnic_port(0),
        };
        assert_eq!(d.neighbours.get(&Ipv4Addr::new(10, 1, 0, 2)), Some(&n));
        let keys: Vec<_> = d.selects.keys().copied().collect();
        assert_eq!(keys, [(8, None, None), (vnic_port(0), None, None)]);
        // Written for VR id 3: tunnel 48, and plain ports stay.
        assert_eq!(real_port(3, vnic_port(0)), tunnel_ifindex(48));
        assert_eq!(real_port(3, 8), 8);
        // Not attached: no tunnel, and its neighbours are left out.
        let only_p1 = BTreeMap::from([("veth1".to_string(), 8)]);
        let d = desired(&plan, &plan.vrs[0], &BTreeMap::new(), &[], &only_p1).unwrap();
        assert!(d.tunnels.is_empty());
        assert!(d.neighbours.is_empty());
    }

    #[test]
    fn every_kind_is_carried_on_an_af_xdp_underlay_only() {
        for (kind, extra) in [("udp", "udp_port = 6000"), ("ipip", "")] {
            let (_, plan) = Config::parse(&cfg(kind, extra), "t", FsPath::new(".")).unwrap();
            assert!(plan.vrs[0].fast.is_ok(), "{kind}: {:?}", plan.vrs[0].fast);
        }
        let src = cfg("ipip", "")
            .replacen("driver = \"af_xdp\"", "driver = \"af_packet\"", 1)
            .replace("path = \"fast\"\n", "");
        let (_, plan) = Config::parse(&src, "t", FsPath::new(".")).unwrap();
        let why = plan.vrs[0].fast.clone().unwrap_err();
        assert!(why.contains("not an af_xdp port"), "{why}");
    }
}
