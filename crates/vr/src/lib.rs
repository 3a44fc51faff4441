//! The VR SDK and the built-in router.
//!
//! A VR is a process that owns nothing of the host but its region: it polls
//! its rx rings, processes packets in place, and hands them back on tx rings.
//! This crate gives a tenant everything to write one: implement [`Vr::process`]
//! (and [`Vr::process_burst`] to see a whole burst at once, [`Vr::control`]
//! to take changes from the host while running, [`Vr::peers`] to exchange
//! small messages with the VR's other instances, see [`peer`]) and call
//! [`runtime::main`] (see `examples/` for a custom VR). It also holds the
//! built-in VR, an IPv4 [`router::Router`] with ARP and ICMP, which Linux
//! hosts can use as their gateway. IPv6 (and its neighbour discovery) is
//! not in the router yet.
//!
//! It owns the VR side of the protocol ([`runtime`], [`proto`]); the region
//! itself is `vrhost-shm`'s, the host side is `vrhost-host`'s.

pub mod backoff;
pub mod peer;
pub mod proto;
pub mod router;
pub mod runtime;
mod sdk;

pub use sdk::{DropReason, Packet, Verdict, Vr};
