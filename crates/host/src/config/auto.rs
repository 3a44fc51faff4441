//! `path = "auto"`: a VR the daemon moves between the slow and the fast
//! path by its load, with the thresholds of its `[vrs.auto]` table
//! ([`AutoPath`]). The daemon feeds an EWMA (`crate::alloc::Ewma`, the
//! scaler's) with the rate the fast path's select table sees for the VR
//! (every frame of it, on either path), moves it to fast when the average
//! rises above `up_pps` and back to slow when it falls below `down_pps`,
//! and not twice within `dwell_ms`. A VR the fast path cannot carry stays
//! slow (its plan says why).

use std::time::Duration;

use toml::Spanned;

use super::FieldError;
use super::schema::VrConf;

/// A VR's load policy between the paths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoPath {
    /// Move to fast when the rate's EWMA rises above this, frames/s.
    pub up_pps: f64,
    /// Move back to slow when it falls below this (< `up_pps`).
    pub down_pps: f64,
    /// No move within this time of the last one (or of the start).
    pub dwell: Duration,
    /// The EWMA's time constant.
    pub tau: Duration,
}

/// `[vrs.auto]`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoConf {
    /// Frames/s above which the VR moves to fast.
    pub up_pps: Spanned<u64>,
    /// Frames/s below which it moves back to slow.
    pub down_pps: Spanned<u64>,
    /// Least time between two moves, ms (default 5000).
    #[serde(default)]
    pub dwell_ms: Option<Spanned<u64>>,
    /// The EWMA's time constant, ms (default 1000).
    #[serde(default)]
    pub period_ms: Option<Spanned<u64>>,
}

/// `vrs[].auto` checked: required with `path = "auto"`, unused (and not
/// checked) with another path.
pub(super) fn vr_auto(v: &VrConf, auto: bool) -> Result<Option<AutoPath>, FieldError> {
    let a = match (&v.auto, auto) {
        (None, false) => return Ok(None),
        // Kept for a later `path = "auto"` (`vrhost vr move` sets an
        // explicit path and leaves the table).
        (Some(_), false) => return Ok(None),
        (None, true) => {
            let span = v.path.as_ref().map_or(0..0, Spanned::span);
            let msg = "\"auto\" needs a [vrs.auto] table (up_pps, down_pps)".into();
            return Err((span, "path", msg));
        }
        (Some(a), true) => a,
    };
    let (up, down) = (*a.up_pps.get_ref(), *a.down_pps.get_ref());
    if up == 0 {
        return Err((a.up_pps.span(), "auto.up_pps", "0: must be above 0".into()));
    }
    if down >= up {
        let msg = format!("{down}: must be below up_pps ({up})");
        return Err((a.down_pps.span(), "auto.down_pps", msg));
    }
    let ms = |f: &Option<Spanned<u64>>, default| f.as_ref().map_or(default, |s| *s.get_ref());
    let period = ms(&a.period_ms, 1000);
    if !(10..=600_000).contains(&period) {
        let span = a.period_ms.as_ref().map_or(0..0, Spanned::span);
        let msg = format!("{period}: must be 10..=600000");
        return Err((span, "auto.period_ms", msg));
    }
    let dwell = ms(&a.dwell_ms, 5000);
    if dwell > 3_600_000 {
        let span = a.dwell_ms.as_ref().map_or(0..0, Spanned::span);
        return Err((span, "auto.dwell_ms", format!("{dwell}: at most 3600000")));
    }
    Ok(Some(AutoPath {
        up_pps: up as f64,
        down_pps: down as f64,
        dwell: Duration::from_millis(dwell),
        tau: Duration::from_millis(period),
    }))
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{assert_refused, parse};

    const BASE: &str = r#"
[host]
fast_path = true

[[ports]]
name = "p0"
driver = "af_xdp"
interface = "veth0"

[[vrs]]
name = "a"
vnics = [{ port = "p0", mac = "02:00:00:00:01:01", addrs = ["10.0.1.1/24"] }]
"#;

    fn with(vr: &str, rules: &str) -> String {
        format!("{BASE}{vr}\n{rules}")
    }

    const RULE: &str = "[[rules]]\nport = \"p0\"\nvr = \"a\"\n";

    #[test]
    fn auto_takes_its_thresholds_and_starts_slow() {
        let src = with(
            "path = \"auto\"\n[vrs.auto]\nup_pps = 2000\ndown_pps = 500\ndwell_ms = 300",
            RULE,
        );
        let p = parse(&src).unwrap();
        let a = p.vrs[0].auto.expect("auto");
        assert_eq!((a.up_pps, a.down_pps), (2000.0, 500.0));
        assert_eq!(a.dwell.as_millis(), 300);
        assert_eq!(a.tau.as_millis(), 1000);
        assert_eq!(p.vrs[0].path, super::super::DataPath::Slow);
        assert!(p.vrs[0].fast.is_ok());
        // An explicit path leaves the table unused.
        let src = with(
            "path = \"fast\"\n[vrs.auto]\nup_pps = 2\ndown_pps = 1",
            RULE,
        );
        assert!(parse(&src).unwrap().vrs[0].auto.is_none());
    }

    #[test]
    fn an_auto_vr_the_fast_path_cannot_carry_is_planned_slow_with_the_reason() {
        // No rule: nothing to key the select table with.
        let src = with(
            "path = \"auto\"\n[vrs.auto]\nup_pps = 2000\ndown_pps = 500",
            "",
        );
        let p = parse(&src).unwrap();
        assert!(p.vrs[0].auto.is_some());
        assert_refused(p.vrs[0].fast.clone(), "no rule sends it frames", "auto");
    }

    #[test]
    fn bad_auto_tables_are_refused() {
        let cases = [
            ("path = \"auto\"", "needs a [vrs.auto] table"),
            (
                "path = \"auto\"\n[vrs.auto]\nup_pps = 10\ndown_pps = 10",
                "auto.down_pps: 10: must be below up_pps (10)",
            ),
            (
                "path = \"auto\"\n[vrs.auto]\nup_pps = 0\ndown_pps = 0",
                "auto.up_pps: 0: must be above 0",
            ),
            (
                "path = \"auto\"\n[vrs.auto]\nup_pps = 10\ndown_pps = 5\nperiod_ms = 1",
                "auto.period_ms: 1: must be 10..=600000",
            ),
        ];
        for (vr, want) in cases {
            assert_refused(parse(&with(vr, RULE)), want, vr);
        }
    }
}
