//! Follows one network namespace's kernel routing table over netlink and
//! hands its changes on as batches, for a VR's FIB (issue 22, item 4:
//! routes from a control plane such as BIRD or FRR, running in the VR's
//! control namespace, to the VR).
//!
//! ```no_run
//! use vrhost_netlink::{NetnsRef, RouteWatch, RouterSync, WatchFilter, WatchOptions};
//!
//! let (watch, batches) = RouteWatch::channel(
//!     NetnsRef::named("vr1-ctl"),
//!     WatchFilter::default(),
//!     WatchOptions::default(),
//!     64,
//! )?;
//! let mut sync = RouterSync::new([("tap0".to_string(), 0)].into());
//! for b in batches.iter().take(1) {
//!     let changes = sync.convert(&b); // send to the VR as `{"routes": ...}`
//!     println!("{} routes, {} deletes", changes.add.len(), changes.del.len());
//! }
//! println!("{:?}", watch.stop()?);
//! # Ok::<(), vrhost_netlink::WatchError>(())
//! ```
//!
//! What it owns: a thread per watch that enters the namespace (`setns`),
//! opens a `NETLINK_ROUTE` socket there (a netlink socket belongs to the
//! namespace it was created in), dumps links and routes once, hands the
//! table on as the first batches ([`WatchStats::synced`]), then follows
//! `RTM_NEWROUTE`/`RTM_DELROUTE` (and link names). Changes are gathered
//! for [`WatchOptions::window`] after the first one (20 ms), at most
//! [`WatchOptions::max_routes`] to a batch; per prefix only the net change
//! goes out (added and withdrawn within a window: nothing; replaced: one
//! add). Several kernel routes of one prefix (different metrics): the
//! lowest metric is handed on, and its withdrawal brings the next back.
//! If the kernel drops events (the socket's buffer,
//! [`WatchOptions::socket_buffer`], 32 MiB by default, overflows:
//! `ENOBUFS`) or says a dump was inconsistent, the watch dumps again and
//! hands on the difference ([`WatchStats::overruns`]); a dump request
//! refused or lost for want of buffer is asked again
//! ([`WatchStats::dump_retries`]). The tests check this with an 8 KiB
//! buffer and a slow consumer.
//!
//! The tests (root; each in a namespace of its own, removed on drop even
//! when the test fails) drive a real kernel table with `ip route`,
//! `ip -batch`, `ip nexthop`, and BIRD 2 where it is installed (Debian
//! `bird2`; the test says SKIPPED otherwise).
//!
//! What it does not own: applying routes. [`RouterSync`] turns batches
//! into the built-in router's control messages (IPv4 and IPv6, by gateway), and
//! the daemon sends them (see `daemon/src/control/routes.rs`).
//!
//! Route kinds and limits, as the [`Route`] type says:
//! - blackhole, unreachable and prohibit routes are represented
//!   ([`RouteKind`]); the router does not take them yet ([`ConvertStats`]);
//! - ECMP (multipath) routes: the first next hop is handed on, the others
//!   are counted ([`Route::dropped_nexthops`],
//!   [`WatchStats::multipath_truncated`]). IPv6 removes one next hop of
//!   such a route at a time and announces it as a delete of that next hop
//!   alone: the watch then dumps the table again to learn what is left
//!   ([`WatchStats::sibling_deletes`]);
//! - nexthop objects (`RTA_NH_ID`, FRR 8's routes): the watch does not
//!   follow `RTM_NEWNEXTHOP` (netlink-packet-route 0.34 does not parse
//!   it). With `net.ipv4.nexthop_compat_mode` = 1 (the kernel's default)
//!   the kernel puts the object's gateway and interface in the route
//!   message, and announces the object's routes again when the object is
//!   replaced, so such routes are taken and kept current (tested with
//!   `ip nexthop`); with compat mode off they carry only the id and are
//!   skipped ([`Skip::NexthopObject`]). A nexthop *group* object is taken
//!   as a multipath route (first next hop);
//! - source-specific and TOS routes, cached clones, local/broadcast/
//!   multicast routes are skipped, each counted ([`SkipCounts`]).
//!
//! The socket is rustix's (already in the workspace, safe wrappers), the
//! messages are parsed and built with `netlink-packet-route` 0.34 (MIT):
//! a blocking socket on one thread, with `poll` for the window and the
//! stop event, needs no async runtime (`rtnetlink` would bring tokio and
//! futures for one socket).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod route;
mod router;
mod sys;
mod table;
mod watch;

pub use route::{
    Oif, Protocols, Route, RouteKind, Skip, SkipCounts, TABLE_MAIN, WatchFilter, proto,
};
pub use router::{ConvertStats, RouterSync};
pub use sys::NetnsRef;
pub use table::RouteBatch;
pub use watch::{RouteWatch, WatchOptions, WatchStats};

/// Starting or running a [`RouteWatch`] failed.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The namespace file cannot be opened.
    #[error("network namespace {netns}: {source}")]
    Netns {
        /// Its path.
        netns: String,
        /// Why.
        source: std::io::Error,
    },
    /// A system call failed.
    #[error("{call}: {source}")]
    Sys {
        /// The call (`setns`, `socket`, `bind`, `recv`, ...).
        call: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The kernel refused a dump request.
    #[error("netlink dump refused: {message}")]
    Dump {
        /// The kernel's error.
        message: String,
    },
    /// The thread could not be started.
    #[error("cannot start the watch thread: {source}")]
    Thread {
        /// Why.
        source: std::io::Error,
    },
    /// The thread ended before saying whether it started.
    #[error("the watch thread ended while starting")]
    Ended,
    /// The thread panicked (in the batch callback, most likely).
    #[error("the watch thread panicked")]
    Panicked,
}
