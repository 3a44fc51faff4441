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

mod budget;
mod placement;
mod scale;
mod topology;

pub use budget::CoreBudget;
pub use placement::{Placement, Slice};
pub use scale::{DynamicPolicy, Ewma, MAX_INSTANCES, ScalePolicy, Scaler};
pub use topology::{CpuInfo, Topology, UNKNOWN_L3};

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
