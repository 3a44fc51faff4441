//! The cores of VR instances the daemon places itself: those of VRs that
//! run several instances or scale with their load and name no `cpus` of
//! their own. Each such instance slot holds one core of the host's
//! [`CoreBudget`] (nearest the worker's core first, never two instances on
//! one), kept by VR name so a VR whose definition changes hands its cores
//! to the new process.

use std::collections::BTreeMap;

use vrhost_host::alloc::{AllocError, CoreBudget};

/// The budget and who holds what.
#[derive(Debug, Default)]
pub struct Cores {
    /// `None` when the host has no budget (then no VR is placed: the
    /// config check refuses one).
    budget: Option<CoreBudget>,
    /// By VR name: its key in the budget, and the core of each instance
    /// slot that holds one.
    held: BTreeMap<String, (usize, BTreeMap<u16, usize>)>,
    next_key: usize,
}

impl Cores {
    /// Nothing held of `budget`.
    pub fn new(budget: Option<CoreBudget>) -> Self {
        Self {
            budget,
            ..Self::default()
        }
    }

    fn key(&mut self, vr: &str) -> usize {
        if let Some((k, _)) = self.held.get(vr) {
            return *k;
        }
        let k = self.next_key;
        self.next_key += 1;
        self.held.insert(vr.to_string(), (k, BTreeMap::new()));
        k
    }

    /// Make `vr` hold cores for exactly its slots `0..n`: it keeps those
    /// it holds there, gives back the others, takes what is missing. All
    /// or nothing.
    ///
    /// # Errors
    /// Too few cores are free (nothing changed).
    pub fn hold_first(&mut self, vr: &str, n: u16) -> Result<BTreeMap<u16, usize>, AllocError> {
        let key = self.key(vr);
        let budget = self.budget.as_mut().ok_or(AllocError::NoCores {
            host_cpu: usize::MAX,
        })?;
        let slots = &mut self.held.get_mut(vr).expect("key() made it").1;
        let mut taken = Vec::new();
        for slot in (0..n).filter(|s| !slots.contains_key(s)) {
            match budget.take(key) {
                Ok(cpu) => taken.push((slot, cpu)),
                Err(e) => {
                    for (_, cpu) in taken {
                        budget.give_back(key, cpu);
                    }
                    return Err(e);
                }
            }
        }
        slots.extend(taken);
        for (_, cpu) in slots.split_off(&n) {
            budget.give_back(key, cpu);
        }
        Ok(slots.clone())
    }

    /// One core for slot `slot` of `vr` (the one it holds there, if any).
    ///
    /// # Errors
    /// No core is free.
    pub fn take(&mut self, vr: &str, slot: u16) -> Result<usize, AllocError> {
        if let Some(cpu) = self.of(vr, slot) {
            return Ok(cpu);
        }
        let key = self.key(vr);
        let budget = self.budget.as_mut().ok_or(AllocError::NoCores {
            host_cpu: usize::MAX,
        })?;
        let cpu = budget.take(key)?;
        self.held
            .get_mut(vr)
            .expect("key() made it")
            .1
            .insert(slot, cpu);
        Ok(cpu)
    }

    /// Give back the core of slot `slot` of `vr`, if it holds one.
    pub fn give_back(&mut self, vr: &str, slot: u16) {
        if let (Some((key, slots)), Some(budget)) = (self.held.get_mut(vr), self.budget.as_mut())
            && let Some(cpu) = slots.remove(&slot)
        {
            budget.give_back(*key, cpu);
        }
    }

    /// Give back every core of `vr`.
    pub fn release(&mut self, vr: &str) {
        if let Some((key, _)) = self.held.remove(vr)
            && let Some(b) = self.budget.as_mut()
        {
            b.release(key);
        }
    }

    /// The core of slot `slot` of `vr`.
    pub fn of(&self, vr: &str, slot: u16) -> Option<usize> {
        self.held.get(vr)?.1.get(&slot).copied()
    }

    /// The slots of `vr` that hold a core.
    pub fn slots(&self, vr: &str) -> Vec<u16> {
        self.held
            .get(vr)
            .map_or_else(Vec::new, |h| h.1.keys().copied().collect())
    }

    /// Cores no instance holds.
    pub fn free(&self) -> usize {
        self.budget.as_ref().map_or(0, CoreBudget::free)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vrhost_host::alloc::{CpuInfo, Topology};

    fn cores(n: usize) -> Cores {
        let cpus = (0..n).map(|cpu| CpuInfo {
            cpu,
            package: 0,
            l3: 0,
        });
        let t = Topology::from_cpus(cpus.collect());
        Cores::new(Some(CoreBudget::new(&t, Some(0), None, false).unwrap()))
    }

    #[test]
    fn vrs_hold_their_slots_cores_by_name() {
        let mut c = cores(5);
        let want = |v: &[(u16, usize)]| v.iter().copied().collect::<BTreeMap<_, _>>();
        assert_eq!(c.hold_first("a", 2), Ok(want(&[(0, 1), (1, 2)])));
        assert_eq!(c.take("b", 3), Ok(3));
        assert_eq!(c.take("b", 3), Ok(3), "already held");
        assert!(c.hold_first("b", 3).is_err(), "needs 3 more, 1 free");
        assert_eq!((c.slots("b"), c.free()), (vec![3], 1), "unchanged");
        assert_eq!(
            c.hold_first("b", 1),
            Ok(want(&[(0, 4)])),
            "slot 3 given back"
        );
        assert_eq!(c.free(), 1);
        c.give_back("a", 0);
        assert_eq!((c.of("a", 0), c.of("a", 1), c.free()), (None, Some(2), 2));
        assert_eq!(
            c.hold_first("a", 2),
            Ok(want(&[(0, 1), (1, 2)])),
            "kept slot 1"
        );
        c.release("a");
        assert_eq!((c.slots("a"), c.free()), (vec![], 3));
        let mut none = Cores::new(None);
        assert!(none.take("a", 0).is_err() && none.hold_first("a", 1).is_err());
        none.release("a");
    }
}
