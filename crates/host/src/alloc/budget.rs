//! The cores VR instances may use, one instance per core, nearest the
//! host worker first.

use super::AllocError;
use super::placement::{EPS, Placement};
use super::topology::Topology;

/// The cores VR instances may use, one instance per core (LVRM: "associate a
/// CPU core with only one VRI"), handed out in the host worker's
/// [`Topology::affinity_order`].
///
/// The budget is every online CPU but the host worker's, or the first
/// `limit` of them. With `allow_shared` the host worker's CPU is one more
/// core, handed out last, its instance sharing it with the worker. So on a
/// 2-CPU machine (worker on 0) the budget is CPU 1, one instance in all;
/// with `allow_shared` a bench can run two, on CPUs 1 and 0. A 1-CPU machine
/// needs `allow_shared` ([`AllocError::NoCores`]).
///
/// It is a [`Placement`] over the cores in that order, capacity 1 each, an
/// instance asking for 1: best fit takes the first free core, and no core
/// ever holds two instances.
#[derive(Debug, Clone)]
pub struct CoreBudget {
    /// The CPU of each engine of `cores`.
    cpus: Vec<usize>,
    cores: Placement,
}

impl CoreBudget {
    /// The budget of a machine whose host worker runs on `host_cpu` (`None`:
    /// not pinned, so every CPU is in the budget).
    ///
    /// # Errors
    /// [`AllocError::BudgetTooLarge`] if `limit` exceeds the CPUs besides the
    /// host's; [`AllocError::NoCores`] if the budget is empty.
    pub fn new(
        topology: &Topology,
        host_cpu: Option<usize>,
        limit: Option<usize>,
        allow_shared: bool,
    ) -> Result<Self, AllocError> {
        // No CPU has this number: the order then starts at CPU 0.
        let host_cpu = host_cpu.unwrap_or(usize::MAX);
        let order = topology.affinity_order(host_cpu);
        let mut cpus: Vec<usize> = order.iter().copied().filter(|&c| c != host_cpu).collect();
        if let Some(limit) = limit {
            let available = cpus.len();
            if limit > available {
                return Err(AllocError::BudgetTooLarge { limit, available });
            }
            cpus.truncate(limit);
        }
        if allow_shared && order.contains(&host_cpu) {
            cpus.push(host_cpu);
        }
        if cpus.is_empty() {
            return Err(AllocError::NoCores { host_cpu });
        }
        let cores = Placement::uniform(cpus.len(), 1.0)?;
        Ok(Self { cpus, cores })
    }

    /// Give `vr` exactly `wanted` cores; returns the cores it holds, in
    /// handout order. Growing takes the first free cores, shrinking gives
    /// back the farthest. All or nothing: a dynamic VR refused one more
    /// instance keeps what it has.
    ///
    /// # Errors
    /// [`AllocError::CoresExhausted`], nothing changed, if too few are free;
    /// the caller counts it.
    pub fn grant(&mut self, vr: usize, wanted: u16) -> Result<Vec<usize>, AllocError> {
        let mut engines: Vec<usize> = self.cores.slices(vr).iter().map(|s| s.engine).collect();
        let held = engines.len();
        if usize::from(wanted) > held {
            let more = (usize::from(wanted) - held) as f64;
            let free = self.free();
            let err = |_| AllocError::CoresExhausted { vr, wanted, free };
            self.cores.place(vr, more).map_err(err)?;
        }
        engines.sort_unstable();
        for &e in engines.iter().skip(wanted.into()) {
            self.cores.release_slice(vr, e);
        }
        Ok(self.held(vr))
    }

    /// One more core for `vr`: the first free one in handout order.
    ///
    /// # Errors
    /// [`AllocError::CoresExhausted`] if none is free (nothing changed).
    pub fn take(&mut self, vr: usize) -> Result<usize, AllocError> {
        let wanted = u16::try_from(self.cores.slices(vr).len() + 1).unwrap_or(u16::MAX);
        let free = self.free();
        let slices = self
            .cores
            .place(vr, 1.0)
            .map_err(|_| AllocError::CoresExhausted { vr, wanted, free })?;
        Ok(self.cpus[slices[0].engine])
    }

    /// Give back `vr`'s core `cpu`; false if `vr` does not hold it.
    pub fn give_back(&mut self, vr: usize, cpu: usize) -> bool {
        let Some(e) = self.cpus.iter().position(|&c| c == cpu) else {
            return false;
        };
        self.cores.release_slice(vr, e).is_some()
    }

    /// Give back all of `vr`'s cores; returns them.
    pub fn release(&mut self, vr: usize) -> Vec<usize> {
        let held = self.held(vr);
        self.cores.release(vr);
        held
    }

    /// The cores `vr` holds, in handout order.
    pub fn held(&self, vr: usize) -> Vec<usize> {
        let mut engines: Vec<usize> = self.cores.slices(vr).iter().map(|s| s.engine).collect();
        engines.sort_unstable();
        engines.into_iter().map(|e| self.cpus[e]).collect()
    }

    /// The cores of the budget, in handout order.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// How many cores no instance holds.
    pub fn free(&self) -> usize {
        self.cores.free().iter().filter(|&&f| f > EPS).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::topology::tests::{cpu, two_sockets};
    use proptest::prelude::*;

    #[test]
    fn budget_hands_out_near_cores_first() {
        let mut b = CoreBudget::new(&two_sockets(), Some(0), None, false).unwrap();
        assert_eq!(b.grant(1, 2).unwrap(), [1, 2]);
        assert_eq!(b.grant(2, 3).unwrap(), [3, 4, 5]);
        let refused = AllocError::CoresExhausted {
            vr: 1,
            wanted: 5,
            free: 2,
        };
        assert_eq!(b.grant(1, 5), Err(refused));
        assert_eq!(b.held(1), [1, 2], "refused: unchanged");
        assert_eq!(b.grant(1, 3).unwrap(), [1, 2, 6]);
        assert_eq!(b.grant(2, 1).unwrap(), [3], "shrinks from the far end");
        assert_eq!(b.grant(1, 4).unwrap(), [1, 2, 4, 6]);
        assert_eq!(b.release(1), [1, 2, 4, 6]);
        assert_eq!((b.free(), b.grant(2, 0).unwrap()), (6, vec![]));
        // Small machines and limits.
        let two = Topology::from_cpus(vec![cpu(0, 0, 0), cpu(1, 0, 0)]);
        let mut b = CoreBudget::new(&two, Some(0), None, false).unwrap();
        assert_eq!(b.grant(1, 1).unwrap(), [1]);
        assert!(b.grant(2, 1).is_err());
        let mut b = CoreBudget::new(&two, Some(0), None, true).unwrap();
        assert_eq!(b.grant(1, 2).unwrap(), [1, 0], "the host's core last");
        let one = Topology::from_cpus(vec![cpu(0, 0, 0)]);
        let err = CoreBudget::new(&one, Some(0), None, false).unwrap_err();
        assert_eq!(err, AllocError::NoCores { host_cpu: 0 });
        assert_eq!(
            CoreBudget::new(&one, Some(0), None, true).unwrap().cpus(),
            [0]
        );
        let t = two_sockets();
        let cpus =
            |limit, shared| CoreBudget::new(&t, Some(4), Some(limit), shared).map(|b| b.cpus);
        assert_eq!(
            (cpus(3, false), cpus(0, true)),
            (Ok(vec![5, 6, 7]), Ok(vec![4]))
        );
        let too_many = AllocError::BudgetTooLarge {
            limit: 8,
            available: 7,
        };
        assert_eq!(cpus(8, false), Err(too_many));
        let floating = CoreBudget::new(&t, None, None, false).unwrap();
        assert_eq!(floating.cpus(), [0, 1, 2, 3, 4, 5, 6, 7], "no worker core");
    }

    #[test]
    fn budget_takes_and_gives_back_single_cores() {
        let mut b = CoreBudget::new(&two_sockets(), Some(0), Some(3), false).unwrap();
        assert_eq!((b.take(1), b.take(2), b.take(1)), (Ok(1), Ok(2), Ok(3)));
        let refused = AllocError::CoresExhausted {
            vr: 2,
            wanted: 2,
            free: 0,
        };
        assert_eq!(b.take(2), Err(refused));
        assert!(!b.give_back(2, 1), "not its core");
        assert!(!b.give_back(1, 0), "not in the budget");
        assert!(b.give_back(1, 1));
        assert_eq!((b.held(1), b.free()), (vec![3], 1));
        assert_eq!(b.take(2), Ok(1), "the freed core is first again");
    }

    proptest! {
        /// Any grants and releases: a granted VR holds what it asked for, no
        /// core is held twice, and held + free is the budget.
        #[test]
        fn budget_never_oversubscribes(
            ops in prop::collection::vec((0..4usize, 0..6u16, any::<bool>()), 0..40),
        ) {
            let mut b = CoreBudget::new(&two_sockets(), Some(0), None, true).unwrap();
            for (vr, n, release) in ops {
                if release {
                    b.release(vr);
                } else if let Ok(cores) = b.grant(vr, n) {
                    prop_assert_eq!(cores.len(), usize::from(n));
                }
                let mut all: Vec<usize> = (0..4).flat_map(|v| b.held(v)).collect();
                let held = all.len();
                all.sort_unstable();
                all.dedup();
                prop_assert_eq!((all.len(), held + b.free()), (held, b.cpus().len()));
            }
        }
    }
}
