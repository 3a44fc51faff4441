//! Zero-copy packet views for vrhost's data path.
//!
//! This crate owns the wire formats the host and the VRs touch per packet:
//! Ethernet (with one 802.1Q tag), ARP (Ethernet/IPv4), IPv4, ICMP and UDP
//! header views over borrowed byte buffers, the internet checksum and its incremental update
//! (RFC 1071, RFC 1624), the classifier's [`FlowKey`], and a builder for
//! test and generator frames ([`build`]). It owns no buffers, performs no
//! allocation and contains no `unsafe`.
//!
//! IPv6 ([`ipv6`], with its extension header walk), ICMPv6 ([`icmpv6`]) and
//! neighbour solicitation and advertisement ([`ndisc`]) have views too;
//! [`FlowKey`] is IPv4 only.
//!
//! Real captured frames for tests live in `testdata` (for this crate's tests,
//! and other crates' with the `testdata` feature).
//!
//! Tunnel encapsulations (VXLAN, plain UDP, IP-in-IP) have views and an
//! emitter in [`tunnel`].
//!
//! It does not own: TCP beyond its port numbers, or any I/O (see `vrhost-io`).
//!
//! # Views
//!
//! The views follow smoltcp's `wire` module: a view `Foo<T: AsRef<[u8]>>`
//! wraps a buffer; [`new_checked`](ipv4::Ipv4Packet::new_checked) validates
//! the lengths and fields that the accessors rely on, after which no getter
//! can panic; getters need `AsRef<[u8]>`, setters `AsMut<[u8]>`; byte ranges
//! are named constants in a private `mod field`. A small `Copy` `Repr` per
//! header offers `parse` / `emit` / `buffer_len` for code that prefers values
//! to views.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod build;
mod bytes;
pub mod checksum;
mod error;
pub mod ethernet;
mod flow;
pub mod icmp;
mod icmp_header;
pub mod ipv4;
mod mac;
#[cfg(any(test, feature = "testdata"))]
pub mod testdata;
pub mod tunnel;
pub mod udp;

pub use error::ParseError;
pub use flow::FlowKey;
pub use mac::{MacAddr, MacParseError};

pub mod icmpv6;
pub mod ipv6;
pub mod ndisc;
