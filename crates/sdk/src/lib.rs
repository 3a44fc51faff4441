//! vrhost-sdk: what a tenant links to write a VR.
//!
//! A VR is a process that owns nothing of the host but its region: it polls
//! its rx rings, processes packets in place, and hands them back on tx rings.
//! This crate gives a tenant everything to write one: implement [`Vr::process`]
//! (and [`Vr::process_burst`] to see a whole burst at once, [`Vr::control`]
//! to take changes from the host while running, [`Vr::peers`] to exchange
//! small messages with the VR's other instances, see [`peer`]) and call
//! [`runtime::main`] (see `examples/` for a custom VR).
//!
//! It owns the VR side of the protocol: the runtime that attaches to the
//! region and runs the poll loop ([`runtime`], also run by the host for VRs
//! called in its own thread), the idle back-off ([`backoff`], which the
//! host's worker uses too) and the instance's end of peer messages
//! ([`peer`]). What it does not own: the protocol itself (`vrhost-proto`,
//! re-exported as [`proto`]), the region (`vrhost-shm`), the host side
//! (`vrhost-host`), and the built-in IPv4 router (`vrhost-router`, one VR
//! written with this SDK among others).

// `deny`, not `forbid`: the runtime opts in below.
#![deny(unsafe_code)]

pub mod backoff;
pub mod peer;
#[expect(
    unsafe_code,
    reason = "the runtime takes its control socket from a descriptor and hands the VR the slots the host gave it"
)]
pub mod runtime;
mod sdk;

pub use sdk::{Packet, Verdict, Vr};
pub use vrhost_proto::{self as proto, DropReason};
