//! Port drivers: where frames enter and leave the host.
//!
//! A [`Port`] moves frames in bursts. This crate owns the driver trait and
//! every driver: the real-interface ones, `af_xdp` (AF_XDP sockets fed by an
//! XDP program: its own, or another's such as the fast path's, which then
//! takes the port's sockets into its XSKMAP), `af_packet` (TPACKET_V3 mmap rings), `socket` (a system
//! call per frame) and `tap` (a TAP device); and those that need no
//! interface: `mem` (an in-memory frame generator, LVRM's main-memory
//! adapter), `null` (a counting sink), `order` (a counting sink that checks
//! per-flow order) and `pcap` (frames from and to pcap files).
//!
//! It does not own packet formats (`vrhost-packet`), classification or
//! dispatch (`vrhost-host`). Errors belong to setup only: a driver's
//! constructor validates its config and resources ([`PortError`] for the
//! cases `af_packet`, `socket` and `tap` share, a thiserror enum of its own
//! for a driver's other cases); on the data path a driver counts and drops,
//! it never fails.

// `deny`, not `forbid`: the modules that share memory with the kernel opt in
// with `#[expect(unsafe_code, reason = ...)]` and `// SAFETY:` comments:
// `af_xdp` below, `af_packet` and `packet_sys` at their tops.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod af_packet;
#[expect(
    unsafe_code,
    reason = "AF_XDP: sockets, ring and UMEM mappings shared with the kernel"
)]
pub mod af_xdp;
mod error;
pub mod mem;
pub mod null;
pub mod order;
mod packet_sys;
pub mod pcap;
mod per_frame;
pub mod socket;
pub mod tap;

#[cfg(test)]
mod conformance;

pub use error::{Driver, PortError};
pub use order::{OrderCounters, OrderSink};

/// Counters every port keeps. Read with [`Port::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames handed to the host by `rx_burst`.
    pub rx_packets: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames lost on receive: dropped by the kernel before the driver saw
    /// them (a full ring), or refused by the driver (truncated, runt or
    /// larger than its buffers).
    pub rx_dropped: u64,
    /// Frames accepted by `tx_burst`.
    pub tx_packets: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Frames refused by `tx_burst` (queue full, too long, write error).
    pub tx_dropped: u64,
    /// Times the port's transmit fell back from xdp_frames to its socket
    /// (`af_xdp`, `tx = "auto"`: the driver took none of a run's frames).
    pub tx_fallbacks: u64,
    /// System calls that sent frames: `af_xdp`'s `BPF_PROG_RUN` calls
    /// (`tx = "xdp"`) and tx kicks (`sendto`); 0 for drivers that do not
    /// count them. `tx_packets / tx_runs` is the frames a call carried.
    pub tx_runs: u64,
}

/// A source and sink of Ethernet frames, driven in bursts by one host worker.
///
/// No method allocates, locks or blocks on the data path.
pub trait Port: Send {
    /// Short name for logs and stats (`mem0`, `veth1`, ...).
    fn name(&self) -> &str;

    /// Receive up to `out.len()` frames into `out`, returning how many were
    /// written. The frames borrow the port and stay valid until the next call
    /// on it; the caller copies what it keeps.
    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize;

    /// Send `frames`, returning how many were accepted. The port copies each
    /// frame before it returns; frames it refuses are counted in `tx_dropped`.
    /// A ring-based driver may only queue them until [`Port::flush`].
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize;

    /// Flush anything buffered (a pcap writer's buffer, a tx ring kick). The
    /// host worker calls it once per round in which it sent frames, so it
    /// must return at once when nothing is queued.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    /// Frames `tx_burst` took that wait for [`Port::flush`], on a port
    /// whose flush costs about as much for one frame as for a batch (`af_xdp`
    /// with `tx = "xdp"`: one `BPF_PROG_RUN`, whose page pool the kernel
    /// builds and destroys), so that the worker may hold them for a fuller
    /// batch while more frames are coming. 0 for every other port (the
    /// default): the worker flushes it after every round that sent.
    fn tx_batched(&self) -> usize {
        0
    }

    /// The port's counters.
    fn stats(&self) -> PortStats;

    /// A descriptor that becomes readable when `rx_burst` has frames, for a
    /// worker that sleeps when idle. `None`: the port never has frames to
    /// wait for (a sink) or always has them (a generator).
    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    /// Add to `by_cpu[c]` the frames the port has received so far on CPU
    /// `c` (where the kernel ran its receive: the core a wakeup for them
    /// comes from), for a worker that follows light traffic to its CPU.
    /// Returns false, adding nothing, if the port cannot tell. A system
    /// call or more: for a worker about to sleep, not the data path.
    fn rx_by_cpu(&self, by_cpu: &mut [u64]) -> bool {
        let _ = by_cpu;
        false
    }

    /// The port's lending side if its buffers are the pool of the one VR
    /// it serves (an AF_XDP port opened with
    /// [`af_xdp::AfXdpPort::open_on`]); `None` for every other port.
    fn lender(&mut self) -> Option<&mut dyn Lender> {
        None
    }
}

pub use af_xdp::LentFrame;

/// A port whose frame buffers are its VR's pool: frame `i` is slot `i` of
/// that pool, so a received frame is lent to the VR where it lies and sent
/// from there, with no copy. Every index passed in is checked against the
/// port's own record of what it lent; a wrong one is refused and counted.
pub trait Lender {
    /// Frames of the pool that are the port's (slots `0..frames()`).
    fn frames(&self) -> u32;

    /// Take up to `out.len()` received frames and lend them; returns how
    /// many.
    fn rx_lend(&mut self, out: &mut [LentFrame]) -> usize;

    /// Take lent frame `frame` back; false if it is not lent.
    fn give_back(&mut self, frame: u32) -> bool;

    /// Send lent frames where they lie; every lent frame passed is the
    /// port's again (sent, or refused and counted). Returns how many were
    /// queued.
    fn tx_lent(&mut self, frames: &[LentFrame]) -> usize;

    /// Take over, lent now by this port, those of `frames` that `from` lent
    /// when both ports share one UMEM (a VR with several dedicated ports),
    /// so that [`Lender::tx_lent`] sends them from where they lie; returns
    /// how many. None from a port on another UMEM, and none `from` did not
    /// lend.
    fn take_lent_from(&mut self, from: &mut dyn Lender, frames: &[LentFrame]) -> usize;

    /// Take completed tx frames back and hand `home` (a port sharing this
    /// port's UMEM) those of its own frames this port sent; returns how
    /// many went home.
    fn return_frames(&mut self, home: &mut dyn Lender) -> usize;

    /// The port itself, for [`Lender::take_lent_from`] and
    /// [`Lender::return_frames`] to see whether the other one is of their
    /// kind.
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

/// The benchmark sink's XDP program (`ebpf/xdp_sink.c`, compiled by clang
/// at build time): drops IPv4 UDP to port 9, passes everything else. Load
/// it with `ip link set dev IF xdp obj FILE sec xdp`.
pub static XDP_SINK_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xdp_sink.o"));
