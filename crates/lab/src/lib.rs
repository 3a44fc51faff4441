//! Network namespaces, veth links and lab topologies.
//!
//! This crate owns everything vrhost does to the kernel's network
//! configuration outside its own ports: creating and deleting namespaces,
//! veth pairs, addresses and routes (through iproute2's `ip`, the tool an
//! operator would use and read in logs), and entering a namespace from a
//! thread so sockets opened there belong to it. Tests use [`netns`] to build
//! throwaway topologies that are deleted on drop, even when a test fails.
//! A lab's `vrhost daemon` runs as a [`Daemon`] child process, and a
//! cluster's etcd as an [`Etcd`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod claim;
pub mod daemon;
pub mod etcd;
pub mod netns;
pub mod tools;
pub mod topology;

pub use claim::Claim;
pub use daemon::{Daemon, DaemonError};
pub use etcd::Etcd;
pub use netns::{CmdError, Netns, NsGuard, cmd, veth};
pub use topology::{Lab, LabError, Up};
