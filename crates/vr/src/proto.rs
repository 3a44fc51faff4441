//! Messages on the control socket between the host and a VR instance.
//!
//! The socket is a `SOCK_SEQPACKET` pair; the host's first message is a
//! [`Hello`] carrying, as SCM_RIGHTS descriptors in this order, the region
//! memfd, the VR's doorbell (the host rings it) and the host's doorbell (the
//! VR rings it). The VR answers with a [`VrReply`]. Messages are JSON.

use serde::{Deserialize, Serialize};

/// Environment variable naming the control socket's descriptor number in a
/// VR process (the host places it at 3).
pub const CTRL_FD_ENV: &str = "VRHOST_CTRL_FD";

/// Largest control message.
pub const MAX_MSG: usize = 256 * 1024;

/// How an idle VR instance backs off: spin, then yield, then sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PollConfig {
    /// Empty polls spent spinning before yielding.
    pub spin_rounds: u32,
    /// Microseconds of yielding before sleeping on the doorbell.
    pub yield_us: u32,
    /// Longest sleep, in milliseconds, before looking at the control socket
    /// again even without a kick.
    pub sleep_ms: u32,
}

impl Default for PollConfig {
    fn default() -> Self {
        Self {
            spin_rounds: 512,
            yield_us: 2000,
            sleep_ms: 200,
        }
    }
}

/// First message from the host to a VR instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The host's region layout version (the region header says it too).
    pub layout_version: u32,
    /// VR name.
    pub vr: String,
    /// Which instance this process is.
    pub instance: u16,
    /// CPU to pin to, if any.
    pub cpu: Option<usize>,
    /// Idle back-off.
    pub poll: PollConfig,
    /// The VR's own configuration (for the built-in router: [`crate::router::RouterConfig`]).
    pub config: serde_json::Value,
}

/// The VR's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum VrReply {
    /// Attached and polling.
    Ready {
        /// The instance's process id.
        pid: u32,
    },
    /// Could not start; the message says why.
    Error {
        /// What went wrong.
        message: String,
    },
}

/// Later messages from the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostMsg {
    /// Finish the current batch and exit.
    Stop,
}

/// Counter positions in [`vrhost_shm::InstanceBlock::vr_counters`], as the
/// SDK publishes them (region layout version 2: 32 counters).
pub mod counter {
    use vrhost_shm::layout::VR_COUNTERS;

    /// Packets taken from rx rings.
    pub const RX: usize = 0;
    /// Packets pushed to tx rings to be sent.
    pub const TX: usize = 1;
    /// First of the per-[`crate::DropReason`] drop counters: reason `r` is
    /// at `DROP_BASE + r as usize`.
    pub const DROP_BASE: usize = 2;
    /// Room for drop reasons (the SDK defines [`crate::DropReason::COUNT`]).
    pub const DROP_SLOTS: usize = 16;
    /// Slot indexes from the host that were out of range, or given twice in
    /// one batch (never expected).
    pub const BAD_SLOT: usize = DROP_BASE + DROP_SLOTS;
    /// Times the instance went to sleep.
    pub const SLEEPS: usize = BAD_SLOT + 1;
    /// First of the VR's own counters ([`crate::Vr::counters`]).
    pub const VR_BASE: usize = SLEEPS + 1;
    /// Room for the VR's own counters.
    pub const VR_SLOTS: usize = VR_COUNTERS - VR_BASE;

    const _: () = assert!(crate::DropReason::COUNT <= DROP_SLOTS);
    const _: () = assert!(VR_BASE < VR_COUNTERS);
}
