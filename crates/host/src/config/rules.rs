//! The checks of the `[[rules]]` tables into the classifier's rules: a
//! rule's VR, vNIC and port exist, and its match fields parse.

use std::collections::BTreeMap;

use toml::Spanned;

use super::plan::VrPlan;
use super::schema::RuleConf;
use super::{AnyPrefix, ConfigError, Source, parse_any_prefix, parse_mac};
use crate::classify::{Match, Rule};

/// Check every rule against the checked VRs and the ports (`port_ix`:
/// each port's index by name).
pub(super) fn check_rules(
    rules: &[RuleConf],
    port_ix: &BTreeMap<String, usize>,
    vrs: &[VrPlan],
    at: &Source,
) -> Result<Vec<Rule>, ConfigError> {
    rules
        .iter()
        .enumerate()
        .map(|(i, r)| check_rule(i, r, port_ix, vrs, at))
        .collect()
}

/// Rule `i` (`r`), in the order its fields were always checked: `vr`,
/// `vnic`, `proto`, `port`, `dst_mac`, `dst`, `src`, `vlan`.
fn check_rule(
    i: usize,
    r: &RuleConf,
    port_ix: &BTreeMap<String, usize>,
    vrs: &[VrPlan],
    at: &Source,
) -> Result<Rule, ConfigError> {
    let f = |x: &str| format!("rules[{i}].{x}");
    let name = r.vr.get_ref();
    let Some(vr) = vrs.iter().position(|v| v.name == *name) else {
        return Err(at.err(r.vr.span(), f("vr"), format!("no VR {name:?}")));
    };
    let vnic = *r.vnic.get_ref();
    let vnics = vrs[vr].vnic_ports.len();
    if usize::from(vnic) >= vnics {
        let msg = format!("VR {name:?} has {vnics} vNICs");
        return Err(at.err(r.vnic.span(), f("vnic"), msg));
    }
    if let (Some(_), Some(p)) = (r.udp_dport, r.proto)
        && p != 17
    {
        let msg = format!("{p}: udp_dport matches UDP only (proto 17 or none)");
        return Err(at.err(r.vr.span(), f("proto"), msg));
    }
    let in_port =
        match &r.port {
            None => None,
            Some(p) => Some(*port_ix.get(p.get_ref()).ok_or_else(|| {
                at.err(p.span(), f("port"), format!("no port {:?}", p.get_ref()))
            })?),
        };
    let pfx = |p: &Option<Spanned<String>>, name: &str| {
        p.as_ref()
            .map(|s| parse_any_prefix(s.get_ref()).map_err(|m| at.err(s.span(), f(name), m)))
            .transpose()
    };
    let dst_mac = r
        .dst_mac
        .as_ref()
        .map(|s| parse_mac(s.get_ref()).map_err(|m| at.err(s.span(), f("dst_mac"), m)))
        .transpose()?;
    let (dst, src) = (pfx(&r.dst, "dst")?, pfx(&r.src, "src")?);
    let v4 = |p: Option<AnyPrefix>| match p {
        Some(AnyPrefix::V4(a, l)) => Some((a, l)),
        _ => None,
    };
    let v6 = |p: Option<AnyPrefix>| match p {
        Some(AnyPrefix::V6(a, l)) => Some((a, l)),
        _ => None,
    };
    if (v4(dst).is_some() || v4(src).is_some()) && (v6(dst).is_some() || v6(src).is_some()) {
        let msg = "an IPv4 and an IPv6 prefix can never match the same frame";
        let span = r.src.as_ref().map_or(r.vr.span(), |s| s.span());
        return Err(at.err(span, f("src"), msg.into()));
    }
    let vlan = match &r.vlan {
        Some(v) if *v.get_ref() > 4095 => {
            let msg = format!("{}: must be 0..=4095", v.get_ref());
            return Err(at.err(v.span(), f("vlan"), msg));
        }
        v => v.as_ref().map(|v| *v.get_ref()),
    };
    Ok(Rule {
        m: Match {
            in_port,
            dst: v4(dst),
            src: v4(src),
            dst6: v6(dst),
            src6: v6(src),
            dst_mac,
            vlan,
            proto: r.proto,
            udp_dport: r.udp_dport,
        },
        vr,
        vnic,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::{GOOD, assert_refused, parse};

    /// The rules of `src` checked against one VR `a` with two vNICs and
    /// ports `p0` and `p1`.
    fn check(src: &str) -> Result<Vec<Rule>, String> {
        #[derive(serde::Deserialize)]
        struct Rules {
            rules: Vec<RuleConf>,
        }
        let r: Rules = toml::from_str(src).expect("the schema");
        let mut vr = parse(GOOD).expect("good").vrs.remove(0);
        vr.name = "a".into();
        let ports = BTreeMap::from([("p0".to_string(), 0), ("p1".to_string(), 1)]);
        let at = Source {
            src,
            file: "r.toml",
        };
        check_rules(&r.rules, &ports, &[vr], &at).map_err(|e| e.to_string())
    }

    const RULE: &str = r#"
[[rules]]
port = "p1"
dst = "10.0.0.0/8"
src = "192.168.1.0/24"
dst_mac = "02:00:00:00:00:01"
vlan = 7
proto = 17
udp_dport = 4789
vr = "a"
vnic = 1
"#;

    #[test]
    fn a_rule_with_every_field() {
        let r = check(RULE).unwrap();
        let m = &r[0].m;
        assert_eq!((r[0].vr, r[0].vnic, m.in_port), (0, 1, Some(1)));
        assert_eq!(m.dst, Some(("10.0.0.0".parse().unwrap(), 8)));
        assert_eq!(m.src, Some(("192.168.1.0".parse().unwrap(), 24)));
        assert_eq!(m.dst_mac, Some([2, 0, 0, 0, 0, 1]));
        assert_eq!(
            (m.vlan, m.proto, m.udp_dport),
            (Some(7), Some(17), Some(4789))
        );
        let bare = check("[[rules]]\nvr = \"a\"").unwrap();
        assert_eq!(bare[0].m, Match::default());
        let v6 = RULE
            .replace("10.0.0.0/8", "2001:db8:1::/48")
            .replace("192.168.1.0/24", "fd00::/8");
        let m = &check(&v6).unwrap()[0].m;
        assert_eq!((m.dst, m.src), (None, None));
        assert_eq!(m.dst6, Some(("2001:db8:1::".parse().unwrap(), 48)));
        assert_eq!(m.src6, Some(("fd00::".parse().unwrap(), 8)));
    }

    #[test]
    fn each_error_names_its_rule_and_key() {
        for (from, to, want) in [
            (
                "vr = \"a\"",
                "vr = \"b\"",
                "r.toml:10: rules[0].vr: no VR \"b\"",
            ),
            (
                "vnic = 1",
                "vnic = 2",
                "r.toml:11: rules[0].vnic: VR \"a\" has 2 vNICs",
            ),
            (
                "proto = 17",
                "proto = 6",
                "r.toml:10: rules[0].proto: 6: udp_dport matches UDP only",
            ),
            (
                "\"p1\"",
                "\"p7\"",
                "r.toml:3: rules[0].port: no port \"p7\"",
            ),
            (
                "02:00:00:00:00:01",
                "02:00",
                "r.toml:6: rules[0].dst_mac: \"02:00\"",
            ),
            ("10.0.0.0/8", "10.0.0.0/33", "r.toml:4: rules[0].dst: "),
            ("192.168.1.0/24", "192.168.1/24", "r.toml:5: rules[0].src: "),
            (
                "192.168.1.0/24",
                "2001:db8::/32",
                "r.toml:5: rules[0].src: an IPv4 and an IPv6 prefix can never match",
            ),
            ("10.0.0.0/8", "2001:db8::/129", "r.toml:4: rules[0].dst: "),
            (
                "vlan = 7",
                "vlan = 4096",
                "r.toml:7: rules[0].vlan: 4096: must be 0..=4095",
            ),
        ] {
            let src = RULE.replacen(from, to, 1);
            assert_refused(check(&src), want, &src);
        }
    }
}
