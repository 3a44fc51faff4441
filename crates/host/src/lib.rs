//! The host: everything between the ports and the VRs' regions.
//!
//! It owns the classifier ([`classify`]), the host side of each VR's region
//! with its validation of everything a VR hands back ([`vrpath`]), the worker
//! loop ([`worker`]), the capture taps it copies a VR's frames into
//! ([`capture`]), and starting, confining ([`confine`]) and watching VR
//! processes ([`spawn`]); how frames are shared among a VR's instances
//! ([`balance`]), the control messages relayed between them ([`relay`]),
//! and how many instances a VR gets on which cores ([`alloc`]); tunnels
//! as vNIC endpoints, decapsulated on the way in and encapsulated on the
//! way out ([`tunnel`]); a cluster dispatcher's data path to engine
//! vrhosts, their heartbeats and placement ([`cluster`]).
//! It does not own the region layout (`vrhost-shm`), packet formats
//! (`vrhost-packet`), port drivers (`vrhost-io`) or what a VR does with a
//! packet (`vrhost-sdk`, `vrhost-router`; the protocol with a VR is
//! `vrhost-proto`'s).
//!
//! `unsafe` is allowed only in the modules that make raw system calls
//! ([`confine`], [`cpu`], `spawn`'s fork and scheduling class) and where
//! [`vrpath`] reads slot bytes out of a VR's region.

#![deny(unsafe_code)]

pub mod alloc;
pub mod balance;
pub mod capture;
pub mod classify;
pub mod cluster;
pub mod config;
#[expect(
    unsafe_code,
    reason = "the child's confinement steps between fork and exec (pre_exec), and getpwnam_r, \
              pipe2, read: raw libc"
)]
pub mod confine;
#[expect(unsafe_code, reason = "sched_setscheduler(SCHED_IDLE): raw libc")]
pub mod cpu;
pub mod hugepages;
pub mod pool;
pub mod relay;
pub mod spawn;
pub mod stats;
#[cfg(test)]
pub(crate) mod testkit;
pub mod tunnel;
pub mod vrpath;
pub mod worker;

pub use capture::{Direction, Record, Tap, TapConfig, TapReader};
pub use classify::{Classifier, Match, Rule};
pub use confine::Confine;
pub use spawn::{ControlError, Hurry, VrCommand, VrControl, VrProcess};
pub use stats::{
    EgressDrop, Gauge, HostStats, IngressDrop, InstanceStats, Violation, VnicStats, VrStats,
    mono_ns,
};
pub use tunnel::{Tunnel, TunnelKind, TunnelTable};
pub use vrpath::{
    Backend, Class, DownReason, ExitEvent, Guard, InstanceInfo, InstanceState, PathSpec, Sched,
    VrPath, open_dedicated, open_dedicated_sharing,
};
pub use worker::{CaptureRefused, Keep, Mailbox, MailboxError, Reconfig, Worker};
