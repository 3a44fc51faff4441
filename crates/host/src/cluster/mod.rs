//! The cluster's data-path pieces (PdP, issue 23): a dispatcher vrhost
//! classifies frames and sends a remote VR's frames to engine vrhosts over
//! VXLAN, tagged; engines hand them back the same way.
//!
//! This module owns the tag carried in the VXLAN VNI ([`tag`]), the choice
//! of an engine for a frame by the VR's policy over the live engines
//! ([`engines`]), the engines' liveness from heartbeats ([`heartbeat`]),
//! where a VR that asks for a rate is placed by PdP's Algorithm 1
//! ([`place`](mod@place)), the dispatcher's data path ([`dispatch`]) and
//! the desired state's schema in etcd ([`desired`]) and the dispatcher's
//! engines joined by those registered there ([`members`]).
//! It does not own the tunnels' encapsulation ([`crate::tunnel`]), the
//! classifier, or the placement of instances ([`crate::alloc`]).
//! The format and the protocol are written down in `docs/cluster.md`.

#![forbid(unsafe_code)]

pub mod desired;
pub mod dispatch;
pub mod engines;
pub mod heartbeat;
pub mod members;
pub mod place;
pub mod tag;

pub use dispatch::{DispatchSpec, DispatchStats, Dispatcher, EngineLink, RemoteVr};
pub use engines::{ClusterPolicy, EngineSet, MAX_ENGINES};
pub use heartbeat::{Beacon, EngineState, Liveness, Responder};
pub use place::{Placed, place};
pub use tag::{Tag, TagError};
