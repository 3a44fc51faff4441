//! The daemon's control plane: the config in force and changing it while
//! the data path runs ([`control`], which carries out the changes
//! [`diff`] computes from the old plan and the new), the cores of VR instances it places
//! ([`cores`]), the process limits many VRs need ([`limits`]), the XDP
//! fast path's maps kept in step with the plan ([`fast`]), the counters as the API and metrics
//! show them ([`view`]), the HTTP API ([`api`]) and its document as the check
//! of request bodies ([`contract`]), packet capture to a pcap
//! stream ([`capture`]), the Prometheus exposition ([`metrics`]),
//! restarting VRs that go down ([`supervise`]), the VRs' control
//! planes: their namespaces, routing daemons and routes ([`cplane`]), and
//! (feature `etcd`) the cluster's agents of the desired state in etcd
//! (`etcd`).
//!
//! It does not own the data path (`vrhost-host`'s worker runs it on its own
//! thread; the control plane reaches it through the worker's mailbox) nor
//! the command line (the `vrhost` binary).

#![forbid(unsafe_code)]

pub mod api;
pub mod capture;
pub mod cluster;
pub mod contract;
pub mod control;
pub mod cores;
pub mod cplane;
pub mod diff;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod fast;
pub mod fast_routes;
mod fast_tunnels;
pub mod limits;
pub mod metrics;
pub mod pool;
pub mod supervise;
pub mod view;

pub use control::{ApplyResult, ControlError, Controller};
