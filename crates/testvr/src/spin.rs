//! `vrhost-testvr vr-spin`: a VR with a dummy per-packet cost (hidden), for
//! LVRM-style experiments where the VR, not the host, is the bottleneck.
//!
//! Its config (the host's `hello.config`, JSON) is
//! `{"cost_ns": u64, "out_vnic": u16}`: busy work per packet (default 0,
//! at most [`MAX_COST_NS`]) and the vNIC every packet is forwarded to
//! (default 1); and, for the latency of control messages between
//! instances, `"peers": true` (record the latency of each message
//! received, read back with the control message `{"latencies": true}`),
//! `"ping_us"` and `"ping_to"` (send a timestamp to that instance every so
//! many µs). Unknown fields are refused, so that a misspelt cost is not
//! silently 0. It does not look at or change the packets, and counts
//! nothing of its own: the SDK counts packets.
//!
//! # How the cost is spent, and how accurately
//!
//! Each packet adds `cost_ns` to a debt; once the debt reaches
//! [`PAY_MIN_NS`] (200 ns) it is paid by polling `Instant::now()` in a loop
//! until that much time has passed since the first read, and any time
//! measured beyond the debt (the overshoot: the last loop step, or a
//! preemption) is credited to the next payment, up to [`PAY_MIN_NS`]. So:
//!
//! - `cost_ns >= 200`: every packet spins for its cost, less the previous
//!   packet's overshoot.
//! - `0 < cost_ns < 200`: too short to time one by one with a clock that
//!   takes tens of ns to read; packets pay in lumps of 200 to 400 ns,
//!   every `ceil(200 / cost_ns)` packets.
//! - `cost_ns == 0`: nothing, not even a clock read.
//!
//! Over `n` packets the time spent is at least `n * cost_ns - 200 ns` (the
//! unpaid debt): only measured time is credited, and a payment takes at
//! least what it measured. It is more by the part of the first and last
//! clock reads outside the measured span (about one clock read per
//! payment), by preemption during a spin (wall time is what is spent, as
//! with LVRM's dummy VR; the credit cap keeps a preempted spin from making
//! later packets free), and by the call itself. Measured in a release
//! build on the machine this was written on, per packet: +9 % at 100 ns,
//! +7 % at 200 ns, +3.5 % at 1 µs, +1.7 % at 16.7 µs; more, relatively,
//! at a few ns (+40 % at 1 ns: the add and compare alone).
//!
//! A fixed number of arithmetic steps calibrated at start would spread
//! short costs more evenly, but on that machine the speed of a dependent
//! multiply-add chain varied 2x with the step count (60 steps took 60 ns,
//! 70 took 30), so calibrated costs came out up to 60 % short or 50 %
//! long; the clock does not depend on clock speed or code alignment.

use std::time::{Duration, Instant};

use serde::Deserialize;
use vrhost_sdk::peer::{MAX_PAYLOAD, PeerDest, Peers};
use vrhost_sdk::{Packet, Verdict, Vr};

/// Debt paid in one spin: at least this much, timed with the clock.
pub(crate) const PAY_MIN_NS: u64 = 200;

/// Largest cost accepted: one second. More would stall the instance's
/// control messages (handled between batches) for minutes.
pub(crate) const MAX_COST_NS: u64 = 1_000_000_000;

/// The VR's config. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct SpinConfig {
    cost_ns: u64,
    out_vnic: u16,
    /// Exchange control messages with the other instances: record the
    /// latency of each one received, and send one every `ping_us` µs (0:
    /// never) to instance `ping_to`.
    peers: bool,
    ping_us: u32,
    ping_to: u16,
}

impl Default for SpinConfig {
    fn default() -> Self {
        SpinConfig {
            cost_ns: 0,
            out_vnic: 1,
            peers: false,
            ping_us: 0,
            ping_to: 1,
        }
    }
}

/// Latencies kept before the bench reads them.
const MAX_SAMPLES: usize = 1 << 20;

/// The control-message side of the spinning VR (`vrhost bench monitor`'s
/// `control` experiment): a CLOCK_MONOTONIC stamp sent to a peer, the
/// receiver's clock minus the stamp recorded.
#[derive(Debug)]
struct Pinger {
    every: Option<Duration>,
    to: u16,
    next: Instant,
    samples: Vec<u64>,
}

/// The spinning VR: spends its cost, then forwards to `out_vnic`.
#[derive(Debug)]
pub(crate) struct Spin {
    cost_ns: i64,
    /// Time owed, ns; negative: a credit (at most [`PAY_MIN_NS`]).
    owed_ns: i64,
    out_vnic: u16,
    pinger: Option<Pinger>,
}

impl Spin {
    /// A VR that spends `cost_ns` per packet (capped at [`MAX_COST_NS`])
    /// and forwards every packet to `out_vnic`.
    pub(crate) fn new(cost_ns: u64, out_vnic: u16) -> Spin {
        Spin {
            // Fits: at most 1e9.
            cost_ns: cost_ns.min(MAX_COST_NS) as i64,
            owed_ns: 0,
            out_vnic,
            pinger: None,
        }
    }

    /// The VR its `hello.config` describes (`null` means every default).
    ///
    /// # Errors
    /// A message naming the fault: an unknown field, a value of the wrong
    /// type or range, a cost above [`MAX_COST_NS`].
    pub(crate) fn from_config(config: &serde_json::Value) -> Result<Spin, String> {
        let cfg = match config {
            serde_json::Value::Null => SpinConfig::default(),
            // Only an object: serde would also take `[cost, vnic]`.
            serde_json::Value::Object(_) => {
                SpinConfig::deserialize(config).map_err(|e| format!("vr-spin config: {e}"))?
            }
            other => {
                return Err(format!(
                    "vr-spin config: expected an object {{\"cost_ns\": .., \"out_vnic\": ..}}, got {other}"
                ));
            }
        };
        if cfg.cost_ns > MAX_COST_NS {
            return Err(format!(
                "vr-spin config: cost_ns {} is above the limit of {MAX_COST_NS} (1 s)",
                cfg.cost_ns
            ));
        }
        let mut spin = Spin::new(cfg.cost_ns, cfg.out_vnic);
        if cfg.peers || cfg.ping_us > 0 {
            spin.pinger = Some(Pinger {
                every: (cfg.ping_us > 0).then(|| Duration::from_micros(cfg.ping_us.into())),
                to: cfg.ping_to,
                next: Instant::now(),
                samples: Vec::new(),
            });
        }
        Ok(spin)
    }

    /// Spend one packet's cost (see the [module docs](self)).
    #[inline]
    fn spend(&mut self) {
        self.owed_ns += self.cost_ns;
        if self.owed_ns < PAY_MIN_NS as i64 {
            return;
        }
        // At least PAY_MIN_NS here, and below 2 s.
        let owed = Duration::from_nanos(self.owed_ns as u64);
        let start = Instant::now();
        let mut spent = start.elapsed();
        while spent < owed {
            spent = start.elapsed();
        }
        let spent_ns = i64::try_from(spent.as_nanos()).unwrap_or(i64::MAX);
        self.owed_ns = self
            .owed_ns
            .saturating_sub(spent_ns)
            .max(-(PAY_MIN_NS as i64));
    }
}

impl Vr for Spin {
    #[inline]
    fn process(&mut self, _pkt: &mut Packet<'_>) -> Verdict {
        self.spend();
        Verdict::Forward(self.out_vnic)
    }

    fn uses_peers(&self) -> bool {
        self.pinger.is_some()
    }

    fn peers(&mut self, peers: &mut Peers<'_>) {
        let Some(p) = &mut self.pinger else {
            return;
        };
        let mut buf = [0u8; MAX_PAYLOAD];
        while let Some((_, len)) = peers.recv(&mut buf) {
            if let Ok(stamp) = <[u8; 8]>::try_from(&buf[..len.min(8)]) {
                let sent = u64::from_le_bytes(stamp);
                if p.samples.len() < MAX_SAMPLES {
                    p.samples.push(vrhost_host::mono_ns().saturating_sub(sent));
                }
            }
        }
        if let Some(every) = p.every {
            let now = Instant::now();
            if now >= p.next {
                p.next = now + every;
                // A full ring: this ping is skipped (the host counts
                // nothing; the bench counts what arrived).
                let _ = peers.send(
                    PeerDest::Instance(p.to),
                    &vrhost_host::mono_ns().to_le_bytes(),
                );
            }
        }
    }

    /// `{"latencies": true}`: the control-message latencies recorded since
    /// the last such request, `{"ns": [...]}`.
    fn control(&mut self, body: &serde_json::Value) -> Result<serde_json::Value, String> {
        if body.get("latencies") != Some(&serde_json::Value::Bool(true)) {
            return Err("vr-spin takes only {\"latencies\": true}".into());
        }
        let ns = self
            .pinger
            .as_mut()
            .map(|p| std::mem::take(&mut p.samples))
            .unwrap_or_default();
        Ok(serde_json::json!({ "ns": ns }))
    }
}

/// Run the spinning VR (the host starts it with its control socket).
pub fn main() -> std::process::ExitCode {
    vrhost_sdk::runtime::main(|hello| Spin::from_config(&hello.config))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Run `n` packets through `vr` and return how long that took.
    fn run(vr: &mut Spin, n: usize) -> Duration {
        let mut buf = [0u8; 128];
        let t = Instant::now();
        for _ in 0..n {
            let mut p = Packet::new(&mut buf, 0, 64, 0).unwrap();
            assert_eq!(vr.process(&mut p), Verdict::Forward(vr.out_vnic));
        }
        t.elapsed()
    }

    #[test]
    fn vr_spin_cost_is_a_lower_bound() {
        let mut vr = Spin::from_config(&json!({"cost_ns": 20_000, "out_vnic": 3})).unwrap();
        assert_eq!(vr.out_vnic, 3);
        let took = run(&mut vr, 1000);
        assert!(took >= Duration::from_millis(20), "{took:?}");
    }

    #[test]
    fn vr_spin_total_cost_is_a_lower_bound_below_200_ns_too() {
        // About 2 ms of cost each, spent packet by packet.
        for cost in [1u64, 7, 150, 199, 200, 333] {
            let mut vr = Spin::new(cost, 1);
            let n = 2_000_000 / cost;
            let t = Instant::now();
            for _ in 0..n {
                vr.spend();
                // Never more than one payment owed or credited.
                assert!((-(PAY_MIN_NS as i64)..PAY_MIN_NS as i64).contains(&vr.owed_ns));
            }
            let took = t.elapsed();
            let want = Duration::from_nanos(n * cost - PAY_MIN_NS);
            assert!(took >= want, "cost {cost}: {n} packets took {took:?}");
        }
    }

    #[test]
    fn vr_spin_zero_cost_spends_nothing() {
        let mut vr = Spin::new(0, 2);
        run(&mut vr, 1000);
        assert_eq!(vr.owed_ns, 0);
        assert_eq!(Spin::new(u64::MAX, 1).cost_ns, MAX_COST_NS as i64);
    }

    #[test]
    fn vr_spin_config() {
        let ok = |v| Spin::from_config(&v).unwrap();
        let vr = ok(json!({}));
        assert_eq!((vr.cost_ns, vr.out_vnic), (0, 1));
        let vr = ok(json!(null));
        assert_eq!((vr.cost_ns, vr.out_vnic), (0, 1));
        let vr = ok(json!({"cost_ns": 16_667}));
        assert_eq!((vr.cost_ns, vr.out_vnic), (16_667, 1));
        let vr = ok(json!({"out_vnic": 0, "cost_ns": MAX_COST_NS}));
        assert_eq!((vr.cost_ns, vr.out_vnic), (MAX_COST_NS as i64, 0));

        let bad = |v| Spin::from_config(&v).unwrap_err();
        let e = bad(json!({"cost_ns": 5, "cost": 100}));
        assert!(e.contains("unknown field `cost`"), "{e}");
        assert!(e.starts_with("vr-spin config"), "{e}");
        let e = bad(json!({"cost_ns": -1}));
        assert!(e.contains("cost_ns") || e.contains("invalid value"), "{e}");
        let e = bad(json!({"out_vnic": 70_000}));
        assert!(e.contains("u16") || e.contains("invalid value"), "{e}");
        let e = bad(json!({"cost_ns": "20us"}));
        assert!(e.contains("invalid type"), "{e}");
        let e = bad(json!({"cost_ns": MAX_COST_NS + 1}));
        assert!(e.contains("limit"), "{e}");
        let e = bad(json!([1, 2]));
        assert!(e.contains("expected an object"), "{e}");
    }
}
