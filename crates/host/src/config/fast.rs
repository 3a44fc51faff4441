//! The fast path's part of the config: where each VR's frames go
//! (`vrs[].path`), and whether the XDP fast path can carry the VR at all,
//! that is whether its classifier rules can be written as select-table
//! keys ({ingress port, VLAN, destination MAC}: `vrhost_fast::SelectKey`).
//!
//! A VR can run in the fast path when the host loads one
//! (`host.fast_path`), it is a built-in router (its routes, those of its
//! config, its route file and the API, go to the fast path too), and
//! every rule that sends it frames matches on `port`, `vlan` and
//! `dst_mac` only, on `af_xdp` ports (where the fast path is attached),
//! and no rule of another VR may match the same frames: the select table
//! looks a key up exactly, then without its MAC, so it cannot keep the
//! classifier's first-match order between overlapping rules of different
//! VRs. A VR that cannot is still planned, with the reason: a move to
//! fast is refused with it.
//!
//! Rate limits: a VR's `rate_limit_pps` (and `rate_burst`) is applied
//! where its frames first arrive. On a host with a fast path, for a VR
//! the fast path carries (fast or slow), that is the token bucket of its
//! select entries ([`PortLimit`]): the XDP program at the port drops the
//! excess before the frame reaches the port's receive ring, so a tenant
//! flooding a shared port cannot crowd out the others there. The worker's
//! limit is then dropped, unless a rule of the VR names no port and the
//! host has ports that are not `af_xdp` (its frames from those do not
//! meet the XDP program: the worker limits them too). Everywhere else
//! (no fast path, a VR the fast path cannot carry) the worker applies the
//! limit, as before.

use toml::Spanned;

use super::auto::AutoPath;
use super::plan::VrPlan;
use super::schema::{Config, Driver, VrConf, VrKind};
use super::{ConfigError, FieldError, Source};
use crate::classify::{Match, Rule};

/// Where a VR's frames go when the host has a fast path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DataPath {
    /// Its user-space instances (the AF_XDP socket, the worker, its
    /// rings): every VR's path without a fast path.
    #[default]
    Slow,
    /// The XDP fast path, which hands what it cannot do to the slow path.
    Fast,
}

impl DataPath {
    /// The name used in the config and the API.
    pub fn name(self) -> &'static str {
        match self {
            DataPath::Slow => "slow",
            DataPath::Fast => "fast",
        }
    }

    /// The path named `s`.
    ///
    /// # Errors
    /// Neither `slow` nor `fast`.
    pub fn parse(s: &str) -> Result<DataPath, String> {
        match s {
            "slow" => Ok(DataPath::Slow),
            "fast" => Ok(DataPath::Fast),
            other => Err(format!("{other:?}: \"slow\" or \"fast\"")),
        }
    }
}

/// A VR's rate limit as its select entries' token bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortLimit {
    /// Frames per second (`rate_limit_pps`).
    pub rate_pps: u64,
    /// Bucket size in frames (`rate_burst`, or its default).
    pub burst: u64,
}

/// The highest rate and burst the fast path's token bucket takes
/// (`vrhost_fast::MAX_RATE_PPS`).
const MAX_BUCKET: u64 = 10_000_000_000;

/// One select-table key of a VR, with the port as its index in the plan
/// (the daemon turns it into an interface index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FastKey {
    /// Ingress port (an `af_xdp` port).
    pub port: usize,
    /// VLAN id; `None`: untagged.
    pub vlan: Option<u16>,
    /// Destination MAC; `None`: any.
    pub dst_mac: Option<[u8; 6]>,
}

/// `vrs[].path`: `slow` unless given; `auto` starts slow, with its
/// policy.
pub(super) fn vr_path(v: &VrConf) -> Result<(DataPath, Option<AutoPath>), FieldError> {
    let path = match &v.path {
        None => DataPath::Slow,
        Some(p) if p.get_ref() == "auto" => DataPath::Slow,
        Some(p) => DataPath::parse(p.get_ref()).map_err(|_| {
            let msg = format!("{:?}: \"slow\", \"fast\" or \"auto\"", p.get_ref());
            (p.span(), "path", msg)
        })?,
    };
    let auto = v.path.as_ref().is_some_and(|p| p.get_ref() == "auto");
    Ok((path, super::auto::vr_auto(v, auto)?))
}

/// Whether two rules' layer-2 fields can match one frame.
fn overlaps(a: &Match, b: &Match) -> bool {
    fn meet<T: PartialEq>(x: Option<T>, y: Option<T>) -> bool {
        match (x, y) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
    }
    meet(a.in_port, b.in_port) && meet(a.vlan, b.vlan) && meet(a.dst_mac, b.dst_mac)
}

/// The select keys of VR `vr` (`v`), or why the fast path cannot carry
/// it.
fn fast_keys(cfg: &Config, vr: usize, v: &VrConf, rules: &[Rule]) -> Result<Vec<FastKey>, String> {
    if !cfg.host.fast_path {
        return Err("the host has no fast path (`[host] fast_path = true`)".into());
    }
    if v.kind != VrKind::Router {
        return Err(
            "a custom program cannot run in the fast path (it is the built-in router's)".into(),
        );
    }
    tunnel_vnics(cfg, v)?;
    if v.control_plane.is_some() {
        return Err("a control plane: the fast path does not take its routes yet".into());
    }
    if v.vnics.get_ref().iter().any(|n| n.vlan.is_some()) {
        return Err("a VLAN vNIC: the fast path does not tag or untag frames yet".into());
    }
    if v.rate_limit_pps
        .as_ref()
        .is_some_and(|r| *r.get_ref() > MAX_BUCKET)
        || v.rate_burst
            .as_ref()
            .is_some_and(|b| *b.get_ref() > MAX_BUCKET)
    {
        return Err(
            "rate_limit_pps or rate_burst above 10^10: the select table's bucket holds less".into(),
        );
    }
    let xdp: Vec<usize> = (cfg.ports.iter().enumerate())
        .filter(|(_, p)| p.driver == Driver::AfXdp)
        .map(|(i, _)| i)
        .collect();
    let mut keys = Vec::new();
    for (k, r) in rules.iter().enumerate().filter(|(_, r)| r.vr == vr) {
        let m = &r.m;
        let field = [
            (m.dst.is_some() || m.dst6.is_some(), "dst"),
            (m.src.is_some() || m.src6.is_some(), "src"),
            (m.proto.is_some(), "proto"),
            (m.udp_dport.is_some(), "udp_dport"),
        ]
        .into_iter()
        .find_map(|(set, f)| set.then_some(f));
        if let Some(f) = field {
            return Err(format!(
                "rules[{k}] matches on `{f}`: the select table keys frames by port, vlan and dst_mac only"
            ));
        }
        let ports = match m.in_port {
            Some(p) if xdp.contains(&p) => vec![p],
            Some(p) => {
                let name = cfg.ports[p].name.get_ref();
                return Err(format!(
                    "rules[{k}]: port {name:?} is not an af_xdp port (the fast path runs on af_xdp ports only)"
                ));
            }
            None if xdp.is_empty() => {
                return Err(format!("rules[{k}]: the config has no af_xdp port"));
            }
            None => xdp.clone(),
        };
        if let Some((j, o)) =
            (rules.iter().enumerate()).find(|(_, o)| o.vr != vr && overlaps(m, &o.m))
        {
            let other = cfg.vrs[o.vr].name.get_ref();
            return Err(format!(
                "rules[{k}] and rules[{j}] (VR {other:?}) may match the same frames: the select table cannot keep the classifier's order between them"
            ));
        }
        keys.extend(ports.into_iter().map(|port| FastKey {
            port,
            vlan: m.vlan,
            dst_mac: m.dst_mac,
        }));
    }
    // A tunnel vNIC's frames come through its tunnel, not a rule.
    if keys.is_empty() && !v.vnics.get_ref().iter().any(|n| n.tunnel.is_some()) {
        return Err("no rule sends it frames".into());
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// vNICs a VR may have per tunnel id block in the fast path
/// (`vrhost_daemon::fast`: tunnel id = VR id x 16 + vNIC).
pub const FAST_TUNNEL_VNICS: usize = 16;

/// Whether the fast path can carry VR `v`'s tunnel vNICs: tunnels (of any
/// kind) on an `af_xdp` underlay port, on one of its first
/// [`FAST_TUNNEL_VNICS`] vNICs.
fn tunnel_vnics(cfg: &Config, v: &VrConf) -> Result<(), String> {
    for (j, n) in v.vnics.get_ref().iter().enumerate() {
        let Some(name) = &n.tunnel else { continue };
        let Some(t) = cfg
            .tunnels
            .iter()
            .find(|t| t.name.get_ref() == name.get_ref())
        else {
            continue;
        };
        let xdp = cfg
            .ports
            .iter()
            .any(|p| p.name.get_ref() == t.port.get_ref() && p.driver == Driver::AfXdp);
        if !xdp {
            return Err(format!(
                "a tunnel vNIC whose underlay port {:?} is not an af_xdp port",
                t.port.get_ref()
            ));
        }
        if j >= FAST_TUNNEL_VNICS {
            return Err(format!(
                "a tunnel vNIC past the first {FAST_TUNNEL_VNICS} vNICs (vnics[{j}])"
            ));
        }
    }
    Ok(())
}

/// Whether every frame VR `vr` gets arrives through the XDP program: each
/// of its rules names a port (an `af_xdp` one: [`fast_keys`] checked), or
/// every port is `af_xdp`.
fn all_at_the_port(cfg: &Config, vr: usize, rules: &[Rule]) -> bool {
    let all_xdp = cfg.ports.iter().all(|p| p.driver == Driver::AfXdp);
    all_xdp || (rules.iter().filter(|r| r.vr == vr)).all(|r| r.m.in_port.is_some())
}

/// Fill in each VR's select keys (or why it has none), and refuse a VR
/// whose `path` is `fast` but that the fast path cannot carry.
pub(super) fn check_fast(
    cfg: &Config,
    vrs: &mut [VrPlan],
    rules: &[Rule],
    at: &Source,
) -> Result<(), ConfigError> {
    for (i, (plan, v)) in vrs.iter_mut().zip(&cfg.vrs).enumerate() {
        plan.fast = fast_keys(cfg, i, v, rules);
        if let (Ok(_), Some(rate_pps)) = (&plan.fast, plan.sched.rate_pps) {
            plan.port_limit = Some(PortLimit {
                rate_pps,
                burst: plan.sched.rate_burst,
            });
            if all_at_the_port(cfg, i, rules) {
                plan.sched.rate_pps = None;
                plan.sched.rate_burst = 0;
            }
        }
        if let (DataPath::Fast, Err(why)) = (plan.path, &plan.fast) {
            let span = v.path.as_ref().map_or(0..0, Spanned::span);
            let msg = format!("\"fast\": this VR cannot run in the fast path: {why}");
            return Err(at.err(span, format!("vrs[{i}].path"), msg));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{assert_refused, parse};

    use super::*;

    /// Two af_xdp ports and a router VR `a` with a vNIC on each, a rule
    /// per port; `host` and `extra` added.
    fn src(host: &str, path: &str, extra: &str) -> String {
        format!(
            r#"
[host]
{host}

[[ports]]
name = "p0"
driver = "af_xdp"
interface = "veth0"

[[ports]]
name = "p1"
driver = "af_xdp"
interface = "veth1"

[[ports]]
name = "p2"
driver = "af_packet"
interface = "veth2"

[[vrs]]
name = "a"
{path}
vnics = [
  {{ port = "p0", mac = "02:00:00:00:01:01", addrs = ["10.0.1.1/24"] }},
  {{ port = "p1", mac = "02:00:00:00:01:02", addrs = ["10.0.2.1/24"] }},
]

[[vrs]]
name = "b"
vnics = [{{ port = "p2", mac = "02:00:00:00:02:01" }}]

[[rules]]
port = "p0"
dst_mac = "02:00:00:00:01:01"
vr = "a"

[[rules]]
port = "p1"
vr = "a"
vnic = 1
{extra}
"#
        )
    }

    #[test]
    fn a_fast_vr_gets_the_select_keys_of_its_rules() {
        let p = parse(&src("fast_path = true", "path = \"fast\"", "")).unwrap();
        let a = &p.vrs[0];
        assert_eq!(a.path, DataPath::Fast);
        let mac = [2, 0, 0, 0, 1, 1];
        assert_eq!(
            a.fast.as_deref().unwrap(),
            [
                FastKey {
                    port: 0,
                    vlan: None,
                    dst_mac: Some(mac)
                },
                FastKey {
                    port: 1,
                    vlan: None,
                    dst_mac: None
                }
            ]
        );
        // Slow by default; the keys are there for a move.
        let p = parse(&src("fast_path = true", "", "")).unwrap();
        assert_eq!(p.vrs[0].path, DataPath::Slow);
        assert!(p.vrs[0].fast.is_ok());
        // b has no rule.
        assert_refused(p.vrs[1].fast.clone(), "no rule sends it frames", "b");
    }

    #[test]
    fn a_fast_vr_the_select_table_cannot_carry_is_refused_with_the_reason() {
        let cases = [
            ("", "", "the host has no fast path"),
            (
                "fast_path = true",
                "[[rules]]\nport = \"p0\"\ndst = \"10.9.0.0/16\"\nvr = \"a\"",
                "rules[2] matches on `dst`",
            ),
            (
                "fast_path = true",
                "[[rules]]\nport = \"p2\"\nvr = \"a\"",
                "port \"p2\" is not an af_xdp port",
            ),
            (
                "fast_path = true",
                "[[rules]]\nport = \"p1\"\nproto = 17\nvr = \"b\"",
                "rules[1] and rules[2] (VR \"b\") may match the same frames",
            ),
        ];
        for (host, extra, want) in cases {
            let e = parse(&src(host, "path = \"fast\"", extra));
            assert_refused(e, want, extra);
            // Slow, the same VR is fine.
            parse(&src(host, "path = \"slow\"", extra)).unwrap();
        }
        assert_refused(
            parse(&src("fast_path = true", "path = \"kernel\"", "")),
            "\"kernel\": \"slow\", \"fast\" or \"auto\"",
            "bad path",
        );
        let limited = "path = \"fast\"\nrate_limit_pps = 20000000000";
        assert_refused(
            parse(&src("fast_path = true", limited, "")),
            "rate_limit_pps or rate_burst above 10^10",
            "rate limit",
        );
    }

    #[test]
    fn a_carried_vr_s_rate_limit_is_its_select_bucket() {
        let bucket = |rate_pps, burst| Some(PortLimit { rate_pps, burst });
        // Fast or slow: the bucket at the port; the worker's limit gone
        // (both rules of `a` name an af_xdp port).
        for path in ["path = \"fast\"", ""] {
            let limited = format!("{path}\nrate_limit_pps = 1000\nrate_burst = 50");
            let p = parse(&src("fast_path = true", &limited, "")).unwrap();
            assert_eq!(p.vrs[0].port_limit, bucket(1000, 50), "{path}");
            assert_eq!(p.vrs[0].sched.rate_pps, None, "{path}");
        }
        // Default burst: the worker's (10 ms of the rate, at least 64).
        let p = parse(&src("fast_path = true", "rate_limit_pps = 100000", "")).unwrap();
        assert_eq!(p.vrs[0].port_limit, bucket(100_000, 1000));
        // No fast path: the worker's limit, no bucket.
        let p = parse(&src("", "rate_limit_pps = 1000", "")).unwrap();
        assert_eq!(
            (p.vrs[0].port_limit, p.vrs[0].sched.rate_pps),
            (None, Some(1000))
        );
        // A rule without a port while p2 is af_packet: the frames from
        // p2 skip the XDP program, so the worker limits too.
        let extra = "[[rules]]\ndst_mac = \"02:00:00:00:01:09\"\nvr = \"a\"";
        let p = parse(&src("fast_path = true", "rate_limit_pps = 1000", extra)).unwrap();
        assert_eq!(p.vrs[0].port_limit, bucket(1000, 64));
        assert_eq!(p.vrs[0].sched.rate_pps, Some(1000));
    }

    #[test]
    fn overlap_is_on_every_layer_2_field() {
        let m = |in_port, vlan, dst_mac| Match {
            in_port,
            vlan,
            dst_mac,
            ..Match::default()
        };
        assert!(overlaps(&m(Some(0), None, None), &m(None, Some(5), None)));
        assert!(!overlaps(&m(Some(0), None, None), &m(Some(1), None, None)));
        assert!(!overlaps(
            &m(None, None, Some([2; 6])),
            &m(None, None, Some([3; 6]))
        ));
    }
}
