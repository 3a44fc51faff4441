//! How the worker serves a VR: its `weight`, `priority` and rate limit
//! (`rate_limit_pps`, `rate_burst`).

use super::FieldError;
use super::schema::VrConf;
use crate::vrpath::Sched;

/// A VR's scheduling: weight, priority, rate limit.
pub(super) fn vr_sched(v: &VrConf) -> Result<Sched, FieldError> {
    let weight = match &v.weight {
        None => 1,
        Some(w) if (1..=100).contains(w.get_ref()) => *w.get_ref(),
        Some(w) => {
            return Err((
                w.span(),
                "weight",
                format!("{}: must be 1..=100", w.get_ref()),
            ));
        }
    };
    let high_priority = match &v.priority {
        None => false,
        Some(p) if p.get_ref() == "normal" => false,
        Some(p) if p.get_ref() == "high" => true,
        Some(p) => {
            return Err((
                p.span(),
                "priority",
                format!("{:?}: must be \"normal\" or \"high\"", p.get_ref()),
            ));
        }
    };
    let rate_pps = match &v.rate_limit_pps {
        Some(r) if *r.get_ref() == 0 => {
            return Err((r.span(), "rate_limit_pps", "0: must be above 0".into()));
        }
        r => r.as_ref().map(|r| *r.get_ref()),
    };
    let rate_burst = match (&v.rate_burst, rate_pps) {
        (Some(b), None) => {
            return Err((b.span(), "rate_burst", "needs rate_limit_pps".into()));
        }
        (Some(b), Some(_)) if *b.get_ref() == 0 => {
            return Err((b.span(), "rate_burst", "0: must be above 0".into()));
        }
        (Some(b), Some(_)) => *b.get_ref(),
        (None, Some(r)) => (r / 100).max(64),
        (None, None) => 0,
    };
    Ok(Sched {
        weight,
        high_priority,
        rate_pps,
        rate_burst,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::vr_conf;

    /// The schedule of a VR with these fields, or the field at fault and
    /// its message.
    fn sched(fields: &str) -> Result<Sched, String> {
        vr_sched(&vr_conf(fields)).map_err(|(_, field, msg)| format!("{field}: {msg}"))
    }

    #[test]
    fn defaults_and_a_full_schedule() {
        let s = sched("").unwrap();
        assert_eq!(
            (s.weight, s.high_priority, s.rate_pps, s.rate_burst),
            (1, false, None, 0)
        );
        let s = sched("weight = 100\npriority = \"high\"\nrate_limit_pps = 1000").unwrap();
        assert_eq!(
            (s.weight, s.high_priority, s.rate_pps, s.rate_burst),
            (100, true, Some(1000), 64),
            "the burst: 10 ms of the rate, at least 64"
        );
        let s = sched("priority = \"normal\"\nrate_limit_pps = 100000\nrate_burst = 5").unwrap();
        assert_eq!(
            (s.high_priority, s.rate_pps, s.rate_burst),
            (false, Some(100_000), 5)
        );
        assert_eq!(sched("rate_limit_pps = 100000").unwrap().rate_burst, 1000);
    }

    #[test]
    fn each_error_names_its_key() {
        for (fields, want) in [
            ("weight = 0", "weight: 0: must be 1..=100"),
            ("weight = 101", "weight: 101: must be 1..=100"),
            (
                "priority = \"low\"",
                "priority: \"low\": must be \"normal\" or \"high\"",
            ),
            ("rate_limit_pps = 0", "rate_limit_pps: 0: must be above 0"),
            ("rate_burst = 10", "rate_burst: needs rate_limit_pps"),
            (
                "rate_limit_pps = 10\nrate_burst = 0",
                "rate_burst: 0: must be above 0",
            ),
        ] {
            assert_eq!(sched(fields).unwrap_err(), want, "{fields}");
        }
    }
}
