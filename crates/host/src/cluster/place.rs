//! Where a remote VR's traffic goes when it asks for a rate: PdP's
//! Algorithm 1 ([`Placement`]) over the live engines' capacities.
//!
//! The VRs that give a rate are placed in config order on the engines that
//! are up; each gets the engines of its slices, and `proportional` shares
//! by slice size. When an engine goes down or comes back the placement is
//! made again from scratch (the same inputs give the same placement, so
//! the worker and the API compute it alike). A VR that no longer fits is
//! reported with how much is free, and its frames go to every live engine
//! (best effort) rather than nowhere.

use crate::alloc::{Placement, Slice};

/// One VR's placement.
#[derive(Debug, Clone, PartialEq)]
pub enum Placed {
    /// It gives no rate: its configured engines.
    Unplaced,
    /// Its slices (engine indexes of the cluster, amounts in pps).
    Slices(Vec<Slice>),
    /// It did not fit: why, and the free capacity of the live engines.
    NoFit {
        /// Algorithm 1's refusal.
        why: String,
        /// Free capacity left on the live engines, pps.
        free: f64,
    },
}

impl Placed {
    /// The engines it uses, one bit each (`None`: not placed by rate).
    pub fn mask(&self, live: u64) -> Option<u64> {
        match self {
            Placed::Unplaced => None,
            Placed::Slices(s) => Some(s.iter().fold(0, |m, s| m | 1 << s.engine)),
            Placed::NoFit { .. } => Some(live),
        }
    }
}

/// Place every VR with a rate (`rates[v]`, pps) on the live engines (`live`,
/// one bit each) of capacities `capacity` (pps), in order.
pub fn place(capacity: &[u64], live: u64, rates: &[Option<f64>]) -> Vec<Placed> {
    let engines: Vec<usize> = (0..capacity.len().min(64))
        .filter(|&e| live & (1 << e) != 0)
        .collect();
    let caps: Vec<f64> = engines.iter().map(|&e| capacity[e] as f64).collect();
    // Capacities are >= 1 (the config's check): `None` only for a spec
    // built otherwise, whose rated VRs then fit nowhere.
    let mut p = Placement::new(caps).ok();
    rates
        .iter()
        .enumerate()
        .map(|(v, r)| {
            let Some(rate) = r else {
                return Placed::Unplaced;
            };
            let free = |p: &Option<Placement>| p.as_ref().map_or(0.0, |p| p.free().iter().sum());
            let Some(pl) = p.as_mut() else {
                let why = "an engine capacity is not > 0".to_string();
                return Placed::NoFit { why, free: 0.0 };
            };
            match pl.place(v, *rate) {
                Ok(s) => Placed::Slices(
                    s.into_iter()
                        .map(|s| Slice {
                            engine: engines[s.engine],
                            amount: s.amount,
                        })
                        .collect(),
                ),
                Err(e) => Placed::NoFit {
                    why: e.to_string(),
                    free: free(&p),
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engines(p: &Placed) -> Vec<(usize, f64)> {
        match p {
            Placed::Slices(s) => s.iter().map(|s| (s.engine, s.amount)).collect(),
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn vrs_with_a_rate_are_placed_best_fit_and_the_others_are_not() {
        // Three engines of 100 kpps; VR 0 wants 150, VR 1 nothing said,
        // VR 2 wants 40.
        let p = place(
            &[100_000; 3],
            0b111,
            &[Some(150_000.0), None, Some(40_000.0)],
        );
        assert_eq!(engines(&p[0]), [(0, 100_000.0), (1, 50_000.0)]);
        assert_eq!(p[1], Placed::Unplaced);
        // Best fit: the engine with 50 free, not the idle one.
        assert_eq!(engines(&p[2]), [(1, 40_000.0)]);
        assert_eq!(p[0].mask(0b111), Some(0b011));
        assert_eq!(p[1].mask(0b111), None);
    }

    #[test]
    fn an_engine_down_re_places_on_the_others_and_what_does_not_fit_says_what_is_free() {
        let rates = [Some(150_000.0), Some(40_000.0)];
        let p = place(&[100_000; 3], 0b101, &rates);
        assert_eq!(engines(&p[0]), [(0, 100_000.0), (2, 50_000.0)]);
        assert_eq!(engines(&p[1]), [(2, 40_000.0)]);
        let p = place(&[100_000; 3], 0b001, &rates);
        match &p[0] {
            Placed::NoFit { why, free } => {
                assert_eq!(*free, 100_000.0);
                assert!(why.contains("cannot place"), "{why}");
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(
            p[0].mask(0b001),
            Some(0b001),
            "best effort: every live engine"
        );
        assert_eq!(engines(&p[1]), [(0, 40_000.0)]);
        let p = place(&[100_000; 3], 0, &rates);
        assert!(matches!(p[0], Placed::NoFit { free: 0.0, .. }));
    }
}
