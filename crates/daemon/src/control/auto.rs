//! `path = "auto"` (`vrhost_host::config::AutoPath`): the supervisor's
//! tick feeds each such VR's EWMA with the rate the fast path's select
//! table sees for it (`rx`: every frame of the VR at the port, on either
//! path, so the figure does not change when the VR moves) and moves the VR
//! when the average crosses a threshold: to fast above `up_pps`, back to
//! slow below `down_pps`, never twice within `dwell`. A move is what `vrhost
//! vr move` makes of a changed `path`: the plan's path changed, then the
//! same reconcile of the fast path's maps (routes and neighbours are
//! already there; one select update per key). The config keeps `"auto"`;
//! an apply keeps where the VR is ([`carry_auto`]). Each move is logged and
//! counted (`fast.auto_moves` in the VR's stats,
//! `vrhost_vr_fast_auto_moves`). A VR the fast path cannot carry is not
//! sampled: it stays slow, and `vr show` says why (`fast_unavailable`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use vrhost_host::alloc::Ewma;
use vrhost_host::config::{AutoPath, DataPath, Plan};

use super::{ControlError, Controller};

/// One auto VR's load and moves.
#[derive(Debug, Clone)]
pub struct AutoState {
    rate: Ewma,
    /// When and at which `rx` count the last sample was taken.
    sampled: Option<(Instant, u64)>,
    /// The last move, or when the VR was first seen.
    since: Instant,
    /// Moves made to fast and to slow.
    pub moves: (u64, u64),
}

impl AutoState {
    fn new(policy: &AutoPath, now: Instant) -> Self {
        Self {
            rate: Ewma::new(policy.tau),
            sampled: None,
            since: now,
            moves: (0, 0),
        }
    }

    /// The EWMA of the VR's rate, frames/s.
    pub fn rate_pps(&self) -> f64 {
        self.rate.value()
    }

    /// Moves by direction, for the stats: `to_fast`, `to_slow`.
    pub fn moves_map(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([
            ("to_fast".to_string(), self.moves.0),
            ("to_slow".to_string(), self.moves.1),
        ])
    }
}

/// Where a VR on `path` should go with its rate's average at `rate`, the
/// last move `since` ago: the hysteresis of `policy`.
pub fn decide(path: DataPath, rate: f64, since: Duration, policy: &AutoPath) -> Option<DataPath> {
    if since < policy.dwell {
        return None;
    }
    match path {
        DataPath::Slow if rate > policy.up_pps => Some(DataPath::Fast),
        DataPath::Fast if rate < policy.down_pps => Some(DataPath::Slow),
        _ => None,
    }
}

/// In a new plan, each auto VR that was auto in `old` stays where it is
/// (a plan starts an auto VR slow).
pub fn carry_auto(old: &Plan, new: &mut Plan) {
    for v in new.vrs.iter_mut().filter(|v| v.auto.is_some()) {
        let was = old.vrs.iter().find(|o| o.name == v.name);
        if let Some(o) = was.filter(|o| o.auto.is_some() && v.fast.is_ok()) {
            v.path = o.path;
        }
    }
}

impl Controller {
    /// Sample every auto VR the fast path carries and make the moves its
    /// policy asks for (nothing without a fast path).
    ///
    /// # Errors
    /// A move's map update failed: the VR is put back where it was.
    pub fn auto_tick(&mut self) -> Result<(), ControlError> {
        let Some(fast) = self.fast.as_ref() else {
            return Ok(());
        };
        let now = Instant::now();
        let mut moves = Vec::new();
        for (i, v) in self.plan.vrs.iter().enumerate() {
            let Some(policy) = v.auto.filter(|_| v.fast.is_ok()) else {
                continue;
            };
            let Some(rx) = fast.counters(&v.name).map(|c| c.rx) else {
                continue;
            };
            let st =
                (self.auto.entry(v.name.clone())).or_insert_with(|| AutoState::new(&policy, now));
            if let Some((t, n)) = st.sampled {
                let dt = now.duration_since(t);
                let sample = rx.wrapping_sub(n) as f64 / dt.as_secs_f64().max(1e-3);
                st.rate.update(sample, dt);
            }
            st.sampled = Some((now, rx));
            let since = now.duration_since(st.since);
            if let Some(to) = decide(v.path, st.rate_pps(), since, &policy) {
                moves.push((i, to, st.rate_pps()));
            }
        }
        let names: Vec<&str> = self.plan.vrs.iter().map(|v| v.name.as_str()).collect();
        self.auto.retain(|n, _| names.contains(&n.as_str()));
        for (i, to, rate_pps) in moves {
            self.auto_move(i, to, rate_pps, now)?;
        }
        Ok(())
    }

    /// Move VR `i` of the plan to `to` as a `path` change does.
    fn auto_move(
        &mut self,
        i: usize,
        to: DataPath,
        rate_pps: f64,
        now: Instant,
    ) -> Result<(), ControlError> {
        let from = self.plan.vrs[i].path;
        let name = self.plan.vrs[i].name.clone();
        let result = match to {
            DataPath::Fast => self.neighbours_before_move(std::slice::from_ref(&name)),
            DataPath::Slow => Ok(()),
        };
        self.plan.vrs[i].path = to;
        let result = result.and_then(|()| self.sync_fast());
        // A failed move is not tried again before the dwell time either.
        let st = self.auto.get_mut(&name).expect("sampled above");
        st.since = now;
        if let Err(e) = result {
            self.plan.vrs[i].path = from;
            let _ = self.sync_fast();
            tracing::warn!(vr = %name, to = to.name(), "auto move failed: {e}");
            return Err(e);
        }
        match to {
            DataPath::Fast => st.moves.0 += 1,
            DataPath::Slow => st.moves.1 += 1,
        }
        tracing::info!(vr = %name, from = from.name(), to = to.name(), rate_pps, "auto: VR moved");
        Ok(())
    }

    /// An auto VR's state (its rate's average and moves).
    pub fn auto_state(&self, name: &str) -> Option<&AutoState> {
        self.auto.get(name)
    }

    /// Why the fast path cannot carry VR `name` (`None`: it can, or there
    /// is no such VR).
    pub fn fast_unavailable(&self, name: &str) -> Option<String> {
        let v = self.plan.vrs.iter().find(|v| v.name == name)?;
        v.fast.as_ref().err().cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> AutoPath {
        AutoPath {
            up_pps: 1000.0,
            down_pps: 200.0,
            dwell: Duration::from_secs(2),
            tau: Duration::from_secs(1),
        }
    }

    #[test]
    fn two_thresholds_and_a_dwell_time() {
        let p = policy();
        let long = Duration::from_secs(3);
        assert_eq!(
            decide(DataPath::Slow, 1500.0, long, &p),
            Some(DataPath::Fast)
        );
        // Between the thresholds: where it is.
        assert_eq!(decide(DataPath::Slow, 500.0, long, &p), None);
        assert_eq!(decide(DataPath::Fast, 500.0, long, &p), None);
        assert_eq!(
            decide(DataPath::Fast, 100.0, long, &p),
            Some(DataPath::Slow)
        );
        assert_eq!(decide(DataPath::Slow, 100.0, long, &p), None);
        // Within the dwell time: no move at all.
        let short = Duration::from_secs(1);
        assert_eq!(decide(DataPath::Slow, 1e9, short, &p), None);
        assert_eq!(decide(DataPath::Fast, 0.0, short, &p), None);
    }
}
