//! Core allocation for VR instances: the CPUs and how close they are to the
//! host worker ([`Topology`]), how many instances a VR wants ([`Scaler`]),
//! which cores they get ([`CoreBudget`]), and capacity placement over
//! forwarding engines ([`Placement`]).
//!
//! Pure logic: no threads, no pinning ([`crate::cpu`]), no processes
//! ([`crate::spawn`]); the only I/O, [`Topology::read`], goes through one
//! fakeable reader. Papers: PdP's Algorithm 1 (*SliceAlloc*, best-fit slicing
//! of forwarding engines: [`Placement`], implemented and tested here but not
//! yet called by the daemon, whose instances take whole cores from the
//! [`CoreBudget`]) and LVRM (one instance per core, sibling cores first,
//! thresholds on an EWMA of the arrival rate checked every second).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::confine::parse_cpu_list;

/// Errors of core allocation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AllocError {
    /// A demand that is NaN, infinite, zero or negative.
    #[error("VR {vr}: demand {demand} must be a finite number > 0")]
    InvalidDemand { vr: usize, demand: f64 },
    /// An engine capacity that is NaN, infinite, zero or negative.
    #[error("engine {engine}: capacity {capacity} must be a finite number > 0")]
    InvalidCapacity { engine: usize, capacity: f64 },
    /// No idle engine for a whole slice, or no engine with `rest` free.
    #[error("VR {vr}: cannot place {demand}: {rest} of it needs an idle engine or that much free")]
    NoFit { vr: usize, demand: f64, rest: f64 },
    /// `vr` wants `wanted` cores in all, but only `free` more are free.
    #[error("VR {vr}: wants {wanted} cores, but only {free} more are free")]
    CoresExhausted { vr: usize, wanted: u16, free: usize },
    /// Nothing but the host worker's CPU, and sharing it was not allowed.
    #[error("no CPU for VR instances but the host worker's CPU {host_cpu} (see allow_shared)")]
    NoCores { host_cpu: usize },
    /// A configured budget larger than the CPUs there are.
    #[error("a budget of {limit} cores, but only {available} CPUs besides the host worker's")]
    BudgetTooLarge { limit: usize, available: usize },
    /// A scaling policy field out of range.
    #[error("scaling policy: {field}: {msg}")]
    Policy { field: &'static str, msg: String },
}

/// The L3 of a CPU whose cache files are missing: all such CPUs count as
/// sharing one L3.
pub const UNKNOWN_L3: usize = usize::MAX;

/// One online CPU and what it shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuInfo {
    /// The CPU number.
    pub cpu: usize,
    /// Its `physical_package_id` (socket).
    pub package: usize,
    /// Its L3, named by the lowest CPU sharing it (or [`UNKNOWN_L3`]).
    pub l3: usize,
}

/// The machine's online CPUs, sorted by number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    cpus: Vec<CpuInfo>,
}

impl Topology {
    /// A topology given by hand (a CPU given twice keeps one entry).
    pub fn from_cpus(mut cpus: Vec<CpuInfo>) -> Self {
        cpus.sort_by_key(|c| c.cpu);
        cpus.dedup_by_key(|c| c.cpu);
        Self { cpus }
    }

    /// This machine's topology, from `/sys/devices/system/cpu`.
    pub fn read() -> Self {
        Self::read_with(|p| std::fs::read_to_string(format!("/sys/devices/system/cpu/{p}")).ok())
    }

    /// The topology as `read` shows it (a path under `/sys/devices/system/cpu`
    /// to its contents). Missing files fall back: the online CPUs to
    /// `0..available_parallelism`, a package to 0, an L3 to [`UNKNOWN_L3`];
    /// so without topology files the machine is one package with one L3.
    pub fn read_with(read: impl Fn(&str) -> Option<String>) -> Self {
        let online = read("online").and_then(|s| parse_cpu_list(s.trim()));
        let online = online.filter(|v| !v.is_empty()).unwrap_or_else(|| {
            (0..std::thread::available_parallelism().map_or(1, usize::from)).collect()
        });
        let cpus = online.into_iter().map(|cpu| CpuInfo {
            cpu,
            package: read(&format!("cpu{cpu}/topology/physical_package_id"))
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0),
            l3: l3_of(&read, cpu).unwrap_or(UNKNOWN_L3),
        });
        Self::from_cpus(cpus.collect())
    }

    /// The online CPUs.
    pub fn cpus(&self) -> &[CpuInfo] {
        &self.cpus
    }

    /// The order to hand cores to VR instances when the host worker runs on
    /// `host_cpu` (LVRM: sibling cores first): the CPUs sharing its L3, then
    /// the rest of its package, then the others, each group ascending; then
    /// `host_cpu` itself, for when nothing else is free. If `host_cpu` is not
    /// online, all CPUs ascending.
    pub fn affinity_order(&self, host_cpu: usize) -> Vec<usize> {
        let host = self.cpus.iter().find(|c| c.cpu == host_cpu);
        let group = |c: &CpuInfo| match host {
            Some(h) if c.l3 == h.l3 => 0,
            Some(h) if c.package == h.package => 1,
            _ => 2,
        };
        let mut others: Vec<&CpuInfo> = self.cpus.iter().filter(|c| c.cpu != host_cpu).collect();
        others.sort_by_key(|c| (group(c), c.cpu));
        others
            .iter()
            .chain(host.as_slice())
            .map(|c| c.cpu)
            .collect()
    }
}

/// The lowest CPU of the `shared_cpu_list` of `cpu`'s level-3 cache. Cache
/// indexes have no gaps, so the first missing one ends the search.
fn l3_of(read: &impl Fn(&str) -> Option<String>, cpu: usize) -> Option<usize> {
    for i in 0..16 {
        let dir = format!("cpu{cpu}/cache/index{i}");
        if read(&format!("{dir}/level"))?.trim() == "3" {
            let shared = parse_cpu_list(read(&format!("{dir}/shared_cpu_list"))?.trim())?;
            return shared.into_iter().min();
        }
    }
    None
}

/// Free capacity below this is none, and a demand must exceed it (capacities
/// are cores or Mpps, where 1e-9 is nothing).
const EPS: f64 = 1e-9;

/// Part of a VR's demand placed on one engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slice {
    /// The engine's index.
    pub engine: usize,
    /// How much of its capacity this slice holds.
    pub amount: f64,
}

/// Engines (CPU cores, or later a cluster's hosts) shared out among VRs by
/// PdP's Algorithm 1, with release.
///
/// Nothing outside this module's tests calls it yet: the daemon gives each
/// instance a whole core from the [`CoreBudget`].
///
/// For a demand `R = kC + r` on engines of capacity `C`, Algorithm 1 gives
/// the VR `k` idle engines whole (lines 3-4), then puts `r` on the engine
/// whose free capacity is the smallest that holds it (best fit, lines 5-11):
/// `ceil(R / C)` slices, the fewest possible (the paper's aim: few slices,
/// little reordering). Where we read it:
/// - line 7 wants free `> r`; we take `>= r`, so an exact fit is the best;
/// - with `r = 0`, no empty remainder slice;
/// - the paper assumes enough engines: with no idle engine for a whole slice
///   or no engine for `r`, we refuse ([`AllocError::NoFit`]) and change
///   nothing, rather than spread `r` over partly used engines (the
///   fragmentation the paper avoids);
/// - engines may differ in capacity: "best-fit the rest if one engine holds
///   it, else take the largest idle engine whole", which is Algorithm 1 when
///   they don't;
/// - a VR never has two slices on one engine, even across calls: asking for
///   `k * C` gives `k` whole engines, never two instances on one core.
#[derive(Debug, Clone)]
pub struct Placement {
    capacity: Vec<f64>,
    free: Vec<f64>,
    /// Slices on each engine; an engine with none is idle.
    slices_on: Vec<u32>,
    vrs: BTreeMap<usize, Vec<Slice>>,
}

impl Placement {
    /// Engines with these capacities, all free.
    ///
    /// # Errors
    /// [`AllocError::InvalidCapacity`] for a capacity not finite and > 0.
    pub fn new(capacity: Vec<f64>) -> Result<Self, AllocError> {
        if let Some(engine) = capacity.iter().position(|c| !(c.is_finite() && *c > EPS)) {
            let capacity = capacity[engine];
            return Err(AllocError::InvalidCapacity { engine, capacity });
        }
        let (free, slices_on, vrs) = (capacity.clone(), vec![0; capacity.len()], BTreeMap::new());
        Ok(Self {
            capacity,
            free,
            slices_on,
            vrs,
        })
    }

    /// `engines` engines of one `capacity` (the paper's `C`).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn uniform(engines: usize, capacity: f64) -> Result<Self, AllocError> {
        Self::new(vec![capacity; engines])
    }

    /// Place `demand` more for `vr`; returns the new slices. Nothing changes
    /// on error.
    ///
    /// # Errors
    /// [`AllocError::InvalidDemand`] for a demand not finite and > 0,
    /// [`AllocError::NoFit`] when Algorithm 1 finds no engines for it.
    pub fn place(&mut self, vr: usize, demand: f64) -> Result<Vec<Slice>, AllocError> {
        if !(demand.is_finite() && demand > EPS) {
            return Err(AllocError::InvalidDemand { vr, demand });
        }
        let mut taken = vec![false; self.capacity.len()];
        self.slices(vr).iter().for_each(|s| taken[s.engine] = true);
        let (mut plan, mut rest) = (Vec::new(), demand);
        while rest > EPS {
            // min_by keeps the first of equals: ties go to the lowest index.
            let fits = (0..taken.len()).filter(|&e| !taken[e] && self.free[e] >= rest - EPS);
            if let Some(engine) = fits.min_by(|&a, &b| self.free[a].total_cmp(&self.free[b])) {
                let amount = rest.min(self.free[engine]);
                plan.push(Slice { engine, amount });
                break;
            }
            let idle = (0..taken.len()).filter(|&e| !taken[e] && self.slices_on[e] == 0);
            let largest = idle.min_by(|&a, &b| self.capacity[b].total_cmp(&self.capacity[a]));
            let Some(engine) = largest else {
                return Err(AllocError::NoFit { vr, demand, rest });
            };
            let amount = self.capacity[engine];
            plan.push(Slice { engine, amount });
            taken[engine] = true;
            rest -= amount;
        }
        for s in &plan {
            self.free[s.engine] = (self.free[s.engine] - s.amount).max(0.0);
            self.slices_on[s.engine] += 1;
        }
        self.vrs.entry(vr).or_default().extend_from_slice(&plan);
        Ok(plan)
    }

    /// Give back all of `vr`'s capacity; returns the slices it held.
    pub fn release(&mut self, vr: usize) -> Vec<Slice> {
        let slices = self.vrs.remove(&vr).unwrap_or_default();
        slices.iter().for_each(|&s| self.give_back(s));
        slices
    }

    /// Give back `vr`'s slice on `engine`, if it has one.
    pub fn release_slice(&mut self, vr: usize, engine: usize) -> Option<Slice> {
        let slices = self.vrs.get_mut(&vr)?;
        let s = slices.remove(slices.iter().position(|s| s.engine == engine)?);
        if slices.is_empty() {
            self.vrs.remove(&vr);
        }
        self.give_back(s);
        Some(s)
    }

    fn give_back(&mut self, s: Slice) {
        let e = s.engine;
        self.slices_on[e] -= 1;
        // An idle engine gets its capacity back exactly: no rounding creep.
        self.free[e] = match self.slices_on[e] {
            0 => self.capacity[e],
            _ => (self.free[e] + s.amount).min(self.capacity[e]),
        };
    }

    /// The slices `vr` holds, in the order they were placed.
    pub fn slices(&self, vr: usize) -> &[Slice] {
        self.vrs.get(&vr).map_or(&[], Vec::as_slice)
    }

    /// Free capacity of each engine.
    pub fn free(&self) -> &[f64] {
        &self.free
    }
}

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
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn cpu(cpu: usize, package: usize, l3: usize) -> CpuInfo {
        CpuInfo { cpu, package, l3 }
    }

    /// Two packages of two L3s of two CPUs each.
    fn two_sockets() -> Topology {
        Topology::from_cpus((0..8).map(|c| cpu(c, c / 4, c / 2 * 2)).collect())
    }

    #[test]
    fn topology_from_sysfs_and_affinity_order() {
        let t = two_sockets();
        assert_eq!(t.affinity_order(0), [1, 2, 3, 4, 5, 6, 7, 0]);
        assert_eq!(t.affinity_order(5), [4, 6, 7, 0, 1, 2, 3, 5]);
        assert_eq!(t.affinity_order(9), [0, 1, 2, 3, 4, 5, 6, 7]);
        let files = HashMap::from([
            ("online", "0-2\n"),
            ("cpu1/topology/physical_package_id", "1\n"),
            ("cpu0/cache/index0/level", "1"),
            ("cpu0/cache/index1/level", "3"),
            ("cpu0/cache/index1/shared_cpu_list", "0,2"),
            ("cpu1/cache/index0/level", "3"),
            ("cpu1/cache/index0/shared_cpu_list", "1"),
        ]);
        let t = Topology::read_with(|p| files.get(p).map(|s| s.to_string()));
        let want = [cpu(0, 0, 0), cpu(1, 1, 1), cpu(2, 0, UNKNOWN_L3)];
        assert_eq!(t.cpus(), want);
        let bare = Topology::read_with(|_| None).cpus().to_vec();
        assert!(!bare.is_empty() && bare.iter().all(|c| (c.package, c.l3) == (0, UNKNOWN_L3)));
        assert!(!Topology::read().cpus().is_empty());
    }

    fn engines(slices: &[Slice]) -> Vec<usize> {
        slices.iter().map(|s| s.engine).collect()
    }

    #[test]
    fn algorithm_1_whole_engines_then_best_fit() {
        let mut p = Placement::uniform(4, 1.0).unwrap();
        assert_eq!(engines(&p.place(1, 0.5).unwrap()), [0]);
        assert_eq!(engines(&p.place(2, 0.75).unwrap()), [1]);
        // 2.25 = 2C + 0.25: two idle engines, then engine 1 (0.25 free, the
        // tightest fit; engine 0 has 0.5).
        assert_eq!(engines(&p.place(3, 2.25).unwrap()), [2, 3, 1]);
        assert_eq!(p.free(), [0.5, 0.0, 0.0, 0.0]);
        let err = p.place(4, 0.75).unwrap_err();
        assert!(matches!(err, AllocError::NoFit { vr: 4, .. }));
        assert_eq!(p.free(), [0.5, 0.0, 0.0, 0.0], "refused: unchanged");
        assert_eq!(p.release(3).len(), 3);
        assert_eq!(p.free(), [0.5, 0.25, 1.0, 1.0]);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-12] {
            let err = p.place(5, bad).unwrap_err();
            assert!(matches!(err, AllocError::InvalidDemand { vr: 5, .. }));
        }
        assert!(Placement::new(vec![1.0, f64::NAN]).is_err());
        // One slice per engine per VR: engine 0 fits best but is taken.
        let mut p = Placement::uniform(2, 1.0).unwrap();
        p.place(1, 0.25).unwrap();
        assert_eq!(engines(&p.place(1, 0.5).unwrap()), [1]);
        assert!(p.place(1, 0.1).is_err());
    }

    /// The fewest engines of capacity 1 any assignment of the requests, each
    /// whole, uses (tries all `engines^n`).
    fn opt_engines(demands: &[f64], engines: usize) -> usize {
        let n = demands.len() as u32;
        let used = |code: usize| {
            let mut load = vec![0.0; engines];
            for (i, d) in demands.iter().enumerate() {
                load[code / engines.pow(i as u32) % engines] += d;
            }
            let fits = load.iter().all(|&l| l <= 1.0 + EPS);
            fits.then(|| load.iter().filter(|&&l| l > 0.0).count())
        };
        (0..engines.pow(n))
            .filter_map(used)
            .min()
            .unwrap_or(usize::MAX)
    }

    /// The largest demand Algorithm 1 could place next on engines of
    /// capacity 1 with these free capacities: every idle engine whole, plus
    /// the most free on one used engine.
    fn room(free: &[f64]) -> f64 {
        let idle = free.iter().filter(|&&f| f == 1.0).count() as f64;
        idle + free
            .iter()
            .filter(|&&f| f < 1.0)
            .fold(0.0, |a, &f| f.max(a))
    }

    /// Exhaustive, over every sequence of 1 to 4 requests with demands k/8
    /// (k = 1..=8: exact fits and ties occur) on 4 engines of capacity 1, no
    /// releases:
    /// 1. each request is placed whole, and the engines used are at most
    ///    floor(1.7 OPT), OPT the fewest any assignment uses (all 4^n tried):
    ///    best fit's absolute bound (Dósa and Sgall 2014); for n <= 4 it
    ///    says OPT = 1 => one engine, OPT = 2 => at most three;
    /// 2. after each request, the largest demand Algorithm 1 could still
    ///    place ([`room`]) is the largest that putting the request on any
    ///    engine it fits could leave: best fit spends no room it need not.
    ///
    /// Worst fit (the roomiest engine) fails 1 and 2; first fit fails 2.
    #[test]
    fn best_fit_against_exhaustive_search() {
        let mut seqs: Vec<Vec<f64>> = vec![vec![]];
        for _ in 0..4 {
            let next = |s: &[f64], k| [s, &[f64::from(k) / 8.0]].concat();
            seqs = seqs
                .iter()
                .flat_map(|s| (1..=8).map(|k| next(s, k)))
                .collect();
            for seq in &seqs {
                let mut p = Placement::uniform(4, 1.0).unwrap();
                for (vr, &d) in seq.iter().enumerate() {
                    let before = p.free().to_vec();
                    let room_if = |e: usize| {
                        let mut f = before.clone();
                        f[e] -= d;
                        room(&f)
                    };
                    let fits = (0..4).filter(|&e| before[e] >= d);
                    let best = fits.map(room_if).fold(0.0, f64::max);
                    let s = p.place(vr, d).unwrap_or_else(|e| panic!("{seq:?}: {e}"));
                    assert_eq!(s.len(), 1, "{seq:?}: sliced a request that fits");
                    let room = room(p.free());
                    assert!(room >= best - EPS, "{seq:?}: {vr}: room {room} < {best}");
                }
                let used = p.free().iter().filter(|&&f| f < 1.0).count();
                let opt = opt_engines(seq, 4);
                assert!(used * 10 <= opt * 17, "{seq:?}: {used} engines, OPT {opt}");
            }
        }
    }

    fn demand() -> impl Strategy<Value = f64> {
        let odd = prop::sample::select(vec![0.0, -1.0, f64::NAN, f64::INFINITY, 1.0, 2.0]);
        prop_oneof![4 => 0.01f64..3.5, 1 => odd]
    }

    proptest! {
        /// Any places and releases: no engine over capacity; a VR's slices
        /// are on distinct engines and sum to what it asked; with one
        /// capacity, a first request gets ceil(demand) slices; releasing all
        /// restores every engine exactly.
        #[test]
        fn placement_invariants(
            caps in prop::collection::vec(0.5f64..2.0, 0..5),
            uniform: bool,
            ops in prop::collection::vec((0..5usize, demand(), any::<bool>()), 0..40),
        ) {
            let caps = if uniform { vec![1.0; caps.len()] } else { caps };
            let mut p = Placement::new(caps.clone()).unwrap();
            let mut asked: HashMap<usize, f64> = HashMap::new();
            for (vr, d, release) in ops {
                if release {
                    p.release(vr);
                    asked.remove(&vr);
                } else if let Ok(s) = p.place(vr, d) {
                    if uniform && !asked.contains_key(&vr) {
                        prop_assert_eq!(s.len(), (d - EPS).ceil() as usize);
                    }
                    *asked.entry(vr).or_default() += d;
                }
                for (e, &f) in p.free().iter().enumerate() {
                    prop_assert!((0.0..=caps[e]).contains(&f));
                }
                for (&vr, &total) in &asked {
                    let mut on = engines(p.slices(vr));
                    on.sort_unstable();
                    on.dedup();
                    prop_assert_eq!(on.len(), p.slices(vr).len());
                    let sum: f64 = p.slices(vr).iter().map(|s| s.amount).sum();
                    prop_assert!((sum - total).abs() < 1e-6);
                }
            }
            (0..5).for_each(|vr| { p.release(vr); });
            prop_assert_eq!(p.free(), &caps[..]);
        }
    }

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
