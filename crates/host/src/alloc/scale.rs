//! How many instances a VR runs: a fixed count, or LVRM's dynamic policy
//! (thresholds on an EWMA of the arrival rate, with hysteresis).

use std::time::Duration;

use super::AllocError;

/// Most instances one VR may run.
pub const MAX_INSTANCES: u16 = 64;

/// How many instances a VR runs (LVRM's fixed and dynamic allocation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScalePolicy {
    /// Always this many.
    Fixed(u16),
    /// Follow the arrival rate.
    Dynamic(DynamicPolicy),
}

/// With `n` instances, add one when the arrival rate's EWMA exceeds
/// `n * up_pps`; remove one when it falls below `(n - 1) * down_pps`, what
/// one fewer would carry at `down_pps` each. `down_pps < up_pps` leaves a
/// band between, so a rate near a threshold does not flap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DynamicPolicy {
    /// Packets per second one instance is meant to carry.
    pub up_pps: f64,
    /// Per-instance rate below which one fewer will do.
    pub down_pps: f64,
    /// How often to decide, and the EWMA's time constant (LVRM: 1 s).
    pub period: Duration,
    /// Fewest instances (default 1).
    pub min: u16,
    /// Most instances.
    pub max: u16,
}

impl DynamicPolicy {
    /// These thresholds and maximum, a period of 1 s and a minimum of 1.
    pub fn new(up_pps: f64, down_pps: f64, max: u16) -> Self {
        Self {
            up_pps,
            down_pps,
            period: Duration::from_secs(1),
            min: 1,
            max,
        }
    }

    /// Check the fields: rates finite and > 0, `down_pps < up_pps`,
    /// `1 <= min <= max <= MAX_INSTANCES`, `period >= 1 ms`.
    ///
    /// # Errors
    /// [`AllocError::Policy`] naming the first bad field.
    pub fn validate(&self) -> Result<(), AllocError> {
        let (up, down, min, max) = (self.up_pps, self.down_pps, self.min, self.max);
        let bad_rate = |v: f64| !(v.is_finite() && v > 0.0);
        let (field, msg) = if bad_rate(up) {
            ("up_pps", format!("{up}: must be a finite rate > 0"))
        } else if bad_rate(down) {
            ("down_pps", format!("{down}: must be a finite rate > 0"))
        } else if down >= up {
            ("down_pps", format!("{down}: must be below up_pps ({up})"))
        } else if !(1..=MAX_INSTANCES).contains(&min) {
            ("min", format!("{min}: must be 1..={MAX_INSTANCES}"))
        } else if !(min..=MAX_INSTANCES).contains(&max) {
            ("max", format!("{max}: must be {min}..={MAX_INSTANCES}"))
        } else if self.period < Duration::from_millis(1) {
            ("period", format!("{:?}: must be >= 1ms", self.period))
        } else {
            return Ok(());
        };
        Err(AllocError::Policy { field, msg })
    }
}

impl ScalePolicy {
    /// Check the policy: a fixed count is `1..=MAX_INSTANCES`; see also
    /// [`DynamicPolicy::validate`].
    ///
    /// # Errors
    /// [`AllocError::Policy`] naming the bad field.
    pub fn validate(&self) -> Result<(), AllocError> {
        match *self {
            Self::Fixed(n) if !(1..=MAX_INSTANCES).contains(&n) => {
                let msg = format!("{n}: must be 1..={MAX_INSTANCES}");
                Err(AllocError::Policy {
                    field: "instances",
                    msg,
                })
            }
            Self::Fixed(_) => Ok(()),
            Self::Dynamic(d) => d.validate(),
        }
    }

    fn period(&self) -> Duration {
        match self {
            Self::Dynamic(d) => d.period,
            Self::Fixed(_) => Duration::from_secs(1),
        }
    }
}

/// An exponentially weighted moving average of irregular samples: a sample
/// `dt` after the last one has weight `1 - exp(-dt / tau)`, so the past fades
/// with time, not with the number of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ewma {
    tau: Duration,
    value: Option<f64>,
}

impl Ewma {
    /// An empty average with time constant `tau` (zero: the last sample).
    pub fn new(tau: Duration) -> Self {
        Self { tau, value: None }
    }

    /// Add `sample`, taken `dt` after the last one; returns the average. The
    /// first sample sets it; NaN, infinite and negative samples are ignored.
    pub fn update(&mut self, sample: f64, dt: Duration) -> f64 {
        if sample.is_finite() && sample >= 0.0 {
            let alpha = if self.tau.is_zero() {
                1.0
            } else {
                1.0 - (-dt.as_secs_f64() / self.tau.as_secs_f64()).exp()
            };
            self.value = Some(self.value.map_or(sample, |v| v + alpha * (sample - v)));
        }
        self.value()
    }

    /// The average (0 before any sample).
    pub fn value(&self) -> f64 {
        self.value.unwrap_or(0.0)
    }
}

/// One VR's scaling: fed its arrival rate every period, it says how many
/// instances to run, one step from the current count at a time.
#[derive(Debug, Clone)]
pub struct Scaler {
    policy: ScalePolicy,
    rate: Ewma,
}

impl Scaler {
    /// A scaler for a valid `policy`; its EWMA's time constant is the period.
    ///
    /// # Errors
    /// As [`ScalePolicy::validate`].
    pub fn new(policy: ScalePolicy) -> Result<Self, AllocError> {
        policy.validate()?;
        let rate = Ewma::new(policy.period());
        Ok(Self { policy, rate })
    }

    /// How often to call [`tick`](Self::tick).
    pub fn period(&self) -> Duration {
        self.policy.period()
    }

    /// The smoothed arrival rate, packets per second.
    pub fn rate(&self) -> f64 {
        self.rate.value()
    }

    /// Feed the arrival rate measured over the last `dt`; returns the count
    /// wanted next, given that `current` instances run now (what actually
    /// runs, so a refused grant keeps the scaler in step). A dynamic VR
    /// moves by one, first into `min..=max`; a fixed one gets its count.
    pub fn tick(&mut self, arrival_pps: f64, dt: Duration, current: u16) -> u16 {
        let rate = self.rate.update(arrival_pps, dt);
        let d = match self.policy {
            ScalePolicy::Fixed(n) => return n,
            ScalePolicy::Dynamic(d) => d,
        };
        let n = current;
        if n < d.min || (n < d.max && rate > f64::from(n) * d.up_pps) {
            n + 1
        } else if n > d.max || (n > d.min && rate < f64::from(n - 1) * d.down_pps) {
            n - 1
        } else {
            n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_validation_names_the_field() {
        let ok = DynamicPolicy::new(60_000.0, 50_000.0, 6);
        let msg = |p: DynamicPolicy| ScalePolicy::Dynamic(p).validate().unwrap_err().to_string();
        assert_eq!(ok.validate(), Ok(()));
        let cases = [
            (
                DynamicPolicy::new(f64::NAN, 5e4, 6),
                "up_pps: NaN: must be a finite rate > 0",
            ),
            (
                DynamicPolicy::new(6e4, -1.0, 6),
                "down_pps: -1: must be a finite rate > 0",
            ),
            (
                DynamicPolicy::new(6e4, 6e4, 6),
                "down_pps: 60000: must be below up_pps (60000)",
            ),
            (DynamicPolicy { min: 0, ..ok }, "min: 0: must be 1..=64"),
            (DynamicPolicy { min: 7, ..ok }, "max: 6: must be 7..=64"),
            (DynamicPolicy { max: 65, ..ok }, "max: 65: must be 1..=64"),
        ];
        for (p, want) in cases {
            assert_eq!(msg(p), format!("scaling policy: {want}"));
        }
        let mut p = ok;
        p.period = Duration::ZERO;
        assert_eq!(msg(p), "scaling policy: period: 0ns: must be >= 1ms");
        assert!(ScalePolicy::Fixed(0).validate().is_err());
        assert!(Scaler::new(ScalePolicy::Fixed(65)).is_err());
    }

    #[test]
    fn ewma_decays_with_time() {
        let (mut e, s) = (Ewma::new(Duration::from_secs(1)), Duration::from_secs(1));
        assert_eq!(
            (e.value(), e.update(100.0, s)),
            (0.0, 100.0),
            "first sample"
        );
        let v = e.update(0.0, s);
        assert!((v - 100.0 * (-1.0f64).exp()).abs() < 1e-9);
        for bad in [f64::NAN, -5.0, f64::INFINITY] {
            assert_eq!(e.update(bad, s), v);
        }
        assert_eq!(e.update(7.0, Duration::ZERO), v, "no time, no weight");
        assert_eq!(Ewma::new(Duration::ZERO).update(7.0, Duration::ZERO), 7.0);
    }

    /// LVRM experiment 2c's shape: 60 Kfps per instance, the rate stepping
    /// up to 390 Kfps and back, 5 s a step. Coming down, 330 Kfps keeps 7
    /// instances: 6 would carry 55 Kfps each, above down_pps.
    #[test]
    fn scaler_steps_with_hysteresis() {
        let policy = DynamicPolicy::new(60_000.0, 50_000.0, 8);
        let mut s = Scaler::new(ScalePolicy::Dynamic(policy)).unwrap();
        let (mut n, mut seen, dt) = (1u16, vec![], s.period());
        for k in (1..=6).chain((1..=5).rev()) {
            for _ in 0..5 {
                let next = s.tick((f64::from(k) + 0.5) * 60_000.0, dt, n);
                assert!(next.abs_diff(n) <= 1);
                n = next;
            }
            seen.push(n);
        }
        assert_eq!(seen, [2, 3, 4, 5, 6, 7, 7, 6, 5, 4, 2]);
        assert_eq!(
            (s.tick(0.0, dt, 0), s.tick(0.0, dt, 20)),
            (1, 19),
            "into min..=max"
        );
        let mut fixed = Scaler::new(ScalePolicy::Fixed(3)).unwrap();
        assert_eq!(fixed.tick(1e9, dt, 1), 3);
    }
}
