//! [`FastError`]: what can fail when the fast path is loaded, attached or
//! configured. The data path itself never errors: it counts
//! ([`crate::FastCounters`]).

use std::io;

/// A failed setup or map operation, naming the map or step.
#[derive(Debug, thiserror::Error)]
pub enum FastError {
    /// The object could not be loaded (a map the kernel refused, ...).
    #[error("fast path: loading ebpf/xdp_router.c: {source}")]
    Load {
        /// aya's error.
        #[source]
        source: Box<aya::EbpfError>,
    },
    /// A benchmark object (`ebpf/xdp_livegen.c`, `ebpf/xdp_seqsink.c`)
    /// could not be loaded.
    #[error("loading ebpf/{object}: {source}")]
    LoadObject {
        /// The source file's name.
        object: &'static str,
        /// aya's error.
        #[source]
        source: Box<aya::EbpfError>,
    },
    /// The program could not be found, loaded (the verifier's log is in
    /// the source) or run.
    #[error("fast path: program {program}: {step}: {source}")]
    Program {
        /// The program's name in the object.
        program: &'static str,
        /// What was being done.
        step: &'static str,
        /// aya's error.
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    /// No interface of that name in the calling thread's namespace.
    #[error("fast path: no interface {ifname}")]
    NoSuchInterface {
        /// The name asked for.
        ifname: String,
    },
    /// Neither native nor generic XDP could be attached.
    #[error("fast path: attaching to {ifname}: native: {native}; generic: {source}")]
    Attach {
        /// The interface.
        ifname: String,
        /// Why native (driver) mode failed: the OS error of
        /// `bpf(BPF_LINK_CREATE)` (`EBUSY`: another program is attached).
        native: io::Error,
        /// Why generic (skb) mode failed.
        #[source]
        source: io::Error,
    },
    /// A map operation failed.
    #[error("fast path: map {map}: {op}: {source}")]
    Map {
        /// The map's name in the object.
        map: &'static str,
        /// The operation.
        op: &'static str,
        /// aya's error.
        #[source]
        source: Box<aya::maps::MapError>,
    },
    /// A DEVMAP update failed.
    #[error("fast path: map {map}: {op}: {source}")]
    XdpMap {
        /// The map's name in the object.
        map: &'static str,
        /// The operation.
        op: &'static str,
        /// aya's error.
        #[source]
        source: Box<aya::maps::xdp::XdpMapError>,
    },
    /// A VR id at or past the configured maximum.
    #[error("fast path: VR id {vr} out of range (max_vrs {max})")]
    VrRange {
        /// The id.
        vr: u32,
        /// The configured number of VRs.
        max: u32,
    },
    /// A prefix length above 32.
    #[error("fast path: prefix length {len} > 32")]
    PrefixLen {
        /// The length.
        len: u8,
    },
    /// A configuration value the program cannot use.
    #[error("fast path: config: {why}")]
    Config {
        /// What is wrong.
        why: &'static str,
    },
    /// A write of many routes failed part way (`cause`), and taking back
    /// what it had written failed too: the VR's fast-path routes are
    /// partly the new ones (`failed` routes could not be put back).
    #[error(
        "fast path: {cause}; taking back the routes written before it failed for {failed} of them, \
         the VR's fast-path routes are partly the new ones: {undo}"
    )]
    Undo {
        /// Why the write stopped.
        cause: Box<FastError>,
        /// Routes that could not be put back.
        failed: usize,
        /// The first error taking back.
        #[source]
        undo: Box<FastError>,
    },
    /// An OS call outside aya failed.
    #[error("fast path: {call}: {source}")]
    Os {
        /// The call.
        call: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}
