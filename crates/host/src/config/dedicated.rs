//! The check of `ports[].dedicated`: an `af_xdp` port that belongs to one
//! VR, whose pool becomes the port's UMEM (see `crate::vrpath::lent`).
//! Only a port no other tenant uses may be: the VR reads and writes that
//! memory, so a second VR on the port, or a rule sending its frames
//! elsewhere, is refused. A VR may have several dedicated ports: they
//! share its pool as one UMEM, each with its own frames, and together
//! take fewer frames than it has slots.

use std::collections::BTreeMap;

use super::plan::VrPlan;
use super::schema::{Driver, PortConfig, port_rings};
use super::{ConfigError, Source};
use crate::classify::Rule;

/// The VR each port is dedicated to (by index into `vrs`), or `None`.
pub(super) fn check_dedicated(
    ports: &[PortConfig],
    vrs: &[VrPlan],
    rules: &[Rule],
    fast_path: bool,
    at: &Source,
) -> Result<Vec<Option<usize>>, ConfigError> {
    let vr_ix: BTreeMap<&str, usize> = vrs
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.as_str(), i))
        .collect();
    let mut out = vec![None; ports.len()];
    for (i, p) in ports.iter().enumerate() {
        let Some(d) = &p.dedicated else { continue };
        let refuse = |msg: String| Err(at.err(d.span(), format!("ports[{i}].dedicated"), msg));
        let name = d.get_ref();
        let Some(&v) = vr_ix.get(name.as_str()) else {
            return refuse(format!("{name:?}: no such VR"));
        };
        if p.driver != Driver::AfXdp {
            return refuse("only an af_xdp port can be dedicated".into());
        }
        if fast_path {
            return refuse("a host with a fast path owns its ports' XDP programs".into());
        }
        if let Some(why) = why_not(i, v, vrs, rules) {
            return refuse(format!("{name:?}: {why}"));
        }
        // Its dedicated ports share its pool as one UMEM, each its frames.
        let before: u64 = (0..i)
            .filter(|&q| out[q] == Some(v))
            .map(|q| u64::from(port_rings(&ports[q]).af_xdp().frames))
            .sum();
        let frames = port_rings(p).af_xdp().frames;
        if before + u64::from(frames) >= u64::from(vrs[v].slots) {
            return refuse(format!(
                "{name:?} has {} slots: the {} frames of its dedicated ports (ports[].frames) \
                 must be fewer, the rest take the frames of its other ports",
                vrs[v].slots,
                before + u64::from(frames)
            ));
        }
        out[i] = Some(v);
    }
    Ok(out)
}

/// Why port `p` cannot be dedicated to VR `v`, if it cannot.
fn why_not(p: usize, v: usize, vrs: &[VrPlan], rules: &[Rule]) -> Option<String> {
    let on_port = |vr: &VrPlan| vr.vnic_ports.iter().filter(|&&q| q == p).count();
    if on_port(&vrs[v]) != 1 {
        return Some("exactly one of its vNICs must be on the port".into());
    }
    if let Some(other) = vrs
        .iter()
        .enumerate()
        .find(|&(i, vr)| i != v && on_port(vr) > 0)
    {
        return Some(format!("VR {:?} has a vNIC on the port too", other.1.name));
    }
    let k = vrs[v].vnic_ports.iter().position(|&q| q == p)?;
    if vrs[v].vnic_vlans.get(k).copied().flatten().is_some()
        || vrs[v].vnic_tunnels.get(k).copied().flatten().is_some()
    {
        return Some("its vNIC on the port has a VLAN or a tunnel".into());
    }
    if let Some(r) = rules.iter().find(|r| r.m.in_port == Some(p) && r.vr != v) {
        return Some(format!(
            "a rule sends the port's frames to VR {:?}",
            vrs[r.vr].name
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{GOOD, assert_refused, parse};

    /// GOOD's ports on af_xdp, port p0 dedicated to `vr` with `frames`.
    fn with(vr: &str, frames: u32) -> String {
        GOOD.replace("driver = \"af_packet\"", "driver = \"af_xdp\"")
            .replacen(
                "name = \"p0\"",
                &format!("name = \"p0\"\ndedicated = \"{vr}\"\nframes = {frames}"),
                1,
            )
    }

    #[test]
    fn a_port_one_vr_alone_uses_is_dedicated_to_it() {
        let p = parse(&with("tenant-a", 256)).unwrap();
        assert_eq!(p.dedicated, [Some(0), None]);
    }

    #[test]
    fn what_cannot_be_dedicated_is_refused_by_name() {
        let refused = |src: &str, want: &str| {
            let res = parse(src);
            assert_refused(res.clone(), "ports[0].dedicated", want);
            assert_refused(res, want, src);
        };
        refused(&with("nosuch", 256), "no such VR");
        refused(&with("tenant-a", 1024), "must be fewer");
        let packet = with("tenant-a", 256)
            .replacen("driver = \"af_xdp\"", "driver = \"af_packet\"", 1)
            .replace("frames = 256\n", "");
        refused(&packet, "only an af_xdp port");
        let fast = with("tenant-a", 256).replace("[host]\n", "[host]\nfast_path = true\n");
        refused(&fast, "fast path");
        // A second tenant on the port.
        let two = format!(
            "{}\n[[vrs]]\nname = \"b\"\nvnics = [{{ port = \"p0\", mac = \"02:00:00:00:03:01\" }}]\n",
            with("tenant-a", 256)
        );
        refused(&two, "has a vNIC on the port too");
    }

    /// GOOD with both ports dedicated to tenant-a (p0 with 256 frames, p1
    /// with `frames`).
    fn both(frames: u32) -> String {
        with("tenant-a", 256).replacen(
            "name = \"p1\"",
            &format!("name = \"p1\"\ndedicated = \"tenant-a\"\nframes = {frames}"),
            1,
        )
    }

    #[test]
    fn a_vr_s_dedicated_ports_share_its_pool_and_take_fewer_frames_than_it_has() {
        let p = parse(&both(256)).unwrap();
        assert_eq!(p.dedicated, [Some(0), Some(0)]);
        // 256 + 768 of 1024 slots: none left for its other ports.
        assert_refused(parse(&both(768)), "ports[1].dedicated", "must be fewer");
        // Another VR's vNIC on the second port still refuses it.
        let shared = format!(
            "{}\n[[vrs]]\nname = \"b\"\nvnics = [{{ port = \"p1\", mac = \"02:00:00:00:03:01\" }}]\n",
            both(256)
        );
        assert_refused(parse(&shared), "ports[1].dedicated", "on the port too");
    }
}
