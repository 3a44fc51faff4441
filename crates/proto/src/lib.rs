//! vrhost-proto: what the host and a VR instance agree on, and nothing else.
//!
//! What it owns: the messages on the control socket ([`Hello`], [`HostMsg`],
//! [`VrReply`]) and their limits, the idle back-off settings the host hands
//! a VR ([`PollConfig`]), the positions of the counters a VR publishes in its
//! region ([`counter`], [`DropReason`]), and the wire format of peer messages
//! between the instances of one VR ([`peer`]). What it does not own: the
//! region's memory layout (`vrhost-shm`), the VR side's runtime that speaks
//! this protocol (`vrhost-sdk`), the host side (`vrhost-host`). It is small
//! on purpose: both sides link it, and a tenant's VR links it through the SDK.
//!
//! # The control socket
//!
//! The socket is a `SOCK_SEQPACKET` pair; the host's first message is a
//! [`Hello`] carrying, as SCM_RIGHTS descriptors in this order, the region
//! memfd, the VR's doorbell (the host rings it) and the host's doorbell (the
//! VR rings it). The VR answers with a [`VrReply`]. Messages are JSON.
//!
//! After that the host sends [`HostMsg`]s:
//! - [`HostMsg::Stop`]: the instance finishes its batch and exits, without
//!   a reply (closing the socket does the same);
//! - [`HostMsg::Control`]: a change to the running VR (for the built-in
//!   router, route changes: `vrhost_router::RouterControl`), handed to
//!   the SDK's `Vr::control` between two batches, never in the
//!   middle of one.
//!
//! Control messages are answered in order, exactly one
//! [`VrReply::Control`] per message that is not `Stop`, carrying the
//! message's `id`. A message that cannot be read (longer than [`MAX_MSG`],
//! not JSON, an unknown variant or field) is answered too, with an error
//! and the id it had if one can be found in it, else 0; the instance
//! carries on. The instance serves the socket at once when it wakes it
//! from sleep, and about once per millisecond while it is busy (see
//! the SDK's `runtime::Instance::run`), so a reply comes within a few
//! milliseconds plus the time the change takes. A host that sends more
//! messages before reading the replies gets them served in turn; one that
//! stops reading replies stops getting messages served (its sends block
//! when the socket is full), it never loses a reply.
//!
//! # Size of a message
//!
//! A message is at most [`MAX_MSG`] bytes, and on Linux a `SOCK_SEQPACKET`
//! message above the sender's `SO_SNDBUF` (212,992 bytes by default,
//! `net.core.wmem_default`) is refused with `EMSGSIZE` unless the sender
//! raises it. Packets wait while a control message is applied, so bulk
//! changes go in chunks: [`CONTROL_CHUNK`] routes per message keeps both
//! the message well under the limits (1000 routes are 40 to 46 KB of JSON;
//! 10,000 would be 400 to 460 KB, too long) and the pause in forwarding
//! short: measured with `examples/route_control_cost.rs` on a 500K-route
//! table, 1000 route changes take 0.1 to 0.3 ms to decode and 0.4 to
//! 0.9 ms to apply (10,000: about 2 ms and 7 to 11 ms). A message whose
//! adds make the FIB grow its group pool pays for a copy of the table
//! (about 5 ms at 500K routes), once per 1.5x of growth. A full BGP table
//! (512K routes) is about 520 messages; an instance busy with packets
//! takes up to a millisecond of them per look, so forwarding goes on
//! meanwhile.

#![forbid(unsafe_code)]

pub mod peer;

use serde::{Deserialize, Serialize};

/// Environment variable naming the control socket's descriptor number in a
/// VR process (the host places it at 3).
pub const CTRL_FD_ENV: &str = "VRHOST_CTRL_FD";

/// Largest control message.
pub const MAX_MSG: usize = 256 * 1024;

/// Routes per control message recommended for bulk changes (see
/// [Size of a message](self#size-of-a-message)).
pub const CONTROL_CHUNK: usize = 1000;

/// How an idle VR instance backs off: spin, then yield, then sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PollConfig {
    /// Empty polls spent spinning before yielding.
    pub spin_rounds: u32,
    /// While spinning (`spin_rounds`, `busy_poll_us`) after sparse
    /// traffic, give the CPU away once every this many empty polls (0:
    /// never, the behaviour before 2026-11-26). A spinning side otherwise
    /// keeps a task it has just woken on its own core waiting until the
    /// spin ends: the host worker's 512 rounds held a ping woken by its
    /// `sendto` 57-96 us (traced 2026-11-26), and a VR woken on the
    /// worker's core (`colocate_pps`) that did not preempt it. A yield
    /// with nothing else to run returns at once. Sparse: fewer than 64
    /// busy rounds since the side's last gap longer than its spin; dense
    /// traffic spins as before (a yield on a shared core would hand it
    /// away for a time slice between two bursts).
    pub spin_yield_every: u32,
    /// Microseconds of yielding before sleeping on the doorbell.
    pub yield_us: u32,
    /// Microseconds after its last work that a side goes on polling
    /// before it yields and sleeps (0: only `spin_rounds`). Sparse traffic
    /// then finds it awake: a wakeup costs 50 µs or more on a VM. Costs a
    /// core while traffic keeps coming at least this often. Only the
    /// worker and VRs with a core of their own poll so.
    pub busy_poll_us: u32,
    /// Microseconds of each nap (0: none). With naps, the yield phase
    /// (`yield_us` long) naps instead of yielding: a side sleeps on its
    /// doorbell alone, with its flag raised, for up to this long, then
    /// polls once. Frames that arrive at its ports meanwhile wait for the
    /// nap's end and are taken in one batch (Linux's
    /// `napi_defer_hard_irqs` with `gro_flush_timeout`), while a peer
    /// that hands it work wakes it at once: the CPU that spinning or
    /// yielding would burn between sparse frames is left idle.
    pub nap_us: u32,
    /// Microseconds after its last work that a side which would sleep at
    /// once (a VR beside the worker or unpinned) goes on polling,
    /// yielding its core between looks, so that the reply to a frame it
    /// just passed on (tens of microseconds later) finds it awake instead
    /// of paying a wakeup (0, the default: off). Unlike `busy_poll_us` it
    /// is bounded in CPU: the window is paid from a credit that grows by
    /// 1/[`FLOW_SHARE`] of the time passing, so a side never spends more
    /// than that share of a core on it, however dense its traffic; an
    /// idle side spends nothing. Not for a VR on the worker's core
    /// (`colocate_pps`): there its `sched_yield` does not hand the core
    /// to the worker (EEVDF), which then waits for the window's end
    /// (measured 2026-11-26: ping 600 us against 200 without).
    pub flow_us: u32,
    /// Frames/s below which the host moves an unpinned VR's process onto
    /// the worker's core (0: never), and twice which it moves it back to
    /// where it came from: waking a VR that sleeps on another core takes
    /// an interrupt to that core, one on the worker's own core a local
    /// switch. Only with a pinned worker (`host.cpu`). Set by the host;
    /// the VR does not use it.
    pub colocate_pps: u32,
    /// With `colocate_pps`: while the traffic is light, the worker (and
    /// the VRs on its core) follow the CPU its frames arrive on. Before it
    /// sleeps, the worker reads where its ports' receive ran since its last
    /// sleep (an AF_XDP port's per-CPU redirect counter) and, if frames
    /// came from another CPU at two such looks in a row, moves itself and
    /// its co-located VRs there
    /// (one `sched_setaffinity` each, per move), so the next frame's
    /// wakeups and the reply's wakeup of its sender are local switches,
    /// as the kernel's own forwarding is on veth; it goes back to its own
    /// core (`host.cpu`) when the VRs are offered twice `colocate_pps`.
    /// false: the worker stays on `host.cpu` (the behaviour before
    /// 2026-11-26). Set by the host; the VR does not use it.
    pub follow_rx: bool,
    /// With `colocate_pps`: when a VR on the worker's core holds frames
    /// the worker handed it, the worker stops polling and sleeps on its
    /// doorbell and its ports (with its flag raised, so the VR rings it
    /// when it hands them back) until either has work, at most
    /// `yield_us`, so that the woken VR gets the core at once. Spinning or
    /// yielding instead leaves it waiting: `sched_yield` does not hand
    /// the core to a task of another cgroup (EEVDF picks the worker's
    /// group again), and a woken VR that did not preempt the worker waited
    /// for the worker's sleep or the next tick (traced 2026-11-27: 1-4 ms,
    /// 20 of 49 pings on a busy VM). false: spin and yield as before.
    /// Set by the host; the VR does not use it.
    pub hand_over: bool,
    /// Longest sleep, in milliseconds, before looking at the control socket
    /// again even without a kick (the host worker; a VR process that has a
    /// control socket sleeps on it and its doorbell with no timeout).
    pub sleep_ms: u32,
    /// Time slice the host asks of the kernel for each VR process, in
    /// microseconds (0: the kernel's default; Linux 6.12+ clamps it to
    /// 100..=100,000). A short slice keeps a VR that shares its core with
    /// a busy one from waiting whole default slices for it. Set by the
    /// host; the VR does not use it.
    pub slice_us: u32,
    /// How a VR that shares its core only with other VRs ends its turn on
    /// the core when its rings are empty (see [`PollConfig::beside_vrs`]).
    /// Set by the host.
    pub turns: Turns,
    /// With [`Turns::Spin`]: microseconds such a VR goes on polling its
    /// empty rings before it sleeps.
    pub turn_us: u32,
    /// Frames the worker gives a sleeping VR instance before it rings its
    /// doorbell, while the worker has other work (0 or 1: at once). The
    /// instance then wakes to a batch rather than to one burst's few
    /// frames, so VRs that share a core take long turns. Bounded by
    /// `kick_wait_us`; the worker rings every deferred doorbell as soon as
    /// it runs out of work, so a lone frame (a ping) waits for nothing.
    /// Used by the worker only. Off (0) by default: measured on the quiet
    /// AMD VM, 256 gave 10 and 100 busy VRs no more frames per second
    /// (32.7 and 14.0 Mpps against 33.0 and 14.4 without), and a quiet VR
    /// beside busy ones may wait `kick_wait_us` for its doorbell.
    pub kick_batch: u32,
    /// Longest wait, in microseconds, of a frame for its sleeping VR's
    /// doorbell under `kick_batch` while the worker is busy.
    pub kick_wait_us: u32,
    /// Frames the worker takes from a port in one round, per VR it handed
    /// frames to in the round before (at least 256 a round, at most
    /// 8,192). Each visit of a VR costs the worker the same few cache
    /// lines (its rings' indexes, its doorbell flag, its structs) however
    /// many frames it carries; a round of 256 frames spread over 100
    /// VRs gives each 2 or 3 frames a visit. 0: 256 frames a round,
    /// however many VRs they go to (the behaviour before 2026-11-26).
    /// Used by the worker only.
    pub round_per_vr: u32,
    /// Frames a port that sends batches at a cost mostly fixed per batch
    /// (`af_xdp` with `tx = "xdp"`: one `BPF_PROG_RUN` a batch, whose
    /// page pool the kernel builds and destroys) holds after a round
    /// while more are coming: the worker sends its batch once it holds
    /// this many, once no VR holds a frame (nothing more is coming: a lone
    /// frame waits for nothing), once the batch has waited `tx_wait_us`,
    /// and before the worker yields or sleeps. 0 or 1 (the default): after
    /// every round that sent frames, as before 2026-11-26's eighth
    /// session, where under TCP a run already carried 160-190 frames of
    /// data (busy machine; 64 made it 166, 256 with 100 us 187, with no
    /// rate measurably gained), so holding is opt-in. Used by the worker
    /// only.
    pub tx_batch: u32,
    /// Longest wait, in microseconds, of a batch held under `tx_batch`.
    pub tx_wait_us: u32,
}

/// How a VR beside other VRs on its core ends its turn when its rings are
/// empty ([`PollConfig::beside_vrs`]). In TOML and JSON: `"yield"`,
/// `"sleep"`, `"spin"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Turns {
    /// Yield the core for up to [`BESIDE_VRS_YIELD_US`], then sleep on the
    /// doorbell: a yield hands the core to another VR, usually one with
    /// as little to do, so turns are short (the back-off before
    /// 2026-11-26).
    #[default]
    Yield,
    /// Sleep on the doorbell at once: the core goes to a VR with work, and
    /// the VR comes back when the host rings, once per sleep, with what
    /// came meanwhile.
    Sleep,
    /// Poll the empty rings (spin-loop hints, no yield) for up to
    /// [`PollConfig::turn_us`] after the last work, then sleep: the turn
    /// lasts while the host keeps refilling the rings, up to the kernel's
    /// time slice.
    Spin,
}

impl std::fmt::Display for Turns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Yield => "yield",
            Self::Sleep => "sleep",
            Self::Spin => "spin",
        })
    }
}

impl std::str::FromStr for Turns {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "yield" => Ok(Self::Yield),
            "sleep" => Ok(Self::Sleep),
            "spin" => Ok(Self::Spin),
            _ => Err(format!("{s:?}: expected yield, sleep or spin")),
        }
    }
}

impl Default for PollConfig {
    fn default() -> Self {
        Self {
            spin_rounds: 512,
            spin_yield_every: DEFAULT_SPIN_YIELD_EVERY,
            yield_us: 2000,
            busy_poll_us: 0,
            nap_us: 0,
            flow_us: 0,
            colocate_pps: DEFAULT_COLOCATE_PPS,
            follow_rx: true,
            hand_over: true,
            sleep_ms: 200,
            slice_us: 100,
            turns: Turns::default(),
            turn_us: DEFAULT_TURN_US,
            kick_batch: 0,
            kick_wait_us: 100,
            round_per_vr: DEFAULT_ROUND_PER_VR,
            tx_batch: DEFAULT_TX_BATCH,
            tx_wait_us: DEFAULT_TX_WAIT_US,
        }
    }
}

/// Default [`PollConfig::tx_batch`]: off (a run after every round that
/// sent). 64, the frames the kernel's XDP test run hands the driver at a
/// time, is the value to try.
pub const DEFAULT_TX_BATCH: u32 = 0;

/// Default [`PollConfig::tx_wait_us`].
pub const DEFAULT_TX_WAIT_US: u32 = 50;

/// Default [`PollConfig::spin_yield_every`]: a task woken on a spinning
/// side's core waits at most a few microseconds (the worker's empty round
/// takes 0.1-0.2 µs on the VMs), and a side alone on its core pays one
/// `sched_yield` (under a microsecond) per that many empty rounds.
pub const DEFAULT_SPIN_YIELD_EVERY: u32 = 16;

/// Default [`PollConfig::round_per_vr`]: half a host burst per busy VR
/// and round.
pub const DEFAULT_ROUND_PER_VR: u32 = 32;

/// Default [`PollConfig::colocate_pps`], frames/s: an idle or lightly
/// loaded VR runs on the worker's core (a local wakeup instead of an
/// interrupt to a halted core, 50-90 µs on the VMs), and one offered twice
/// this goes back to its own cores, where it does not take the worker's
/// time (issue 24 item 4; 0 before 2026-11-26).
pub const DEFAULT_COLOCATE_PPS: u32 = 20_000;

/// The share of a core a side's [`PollConfig::flow_us`] windows may take
/// in the long run: 1/16 (6%). The credit holds at most four windows, so
/// sparse flows (pings) always get theirs and a dense one (which keeps
/// the side awake anyway) soon finds it spent and sleeps as before.
pub const FLOW_SHARE: u32 = 16;

/// Default [`PollConfig::turn_us`], µs: about the host's round with 100
/// busy VRs (about 20 µs in a release build), so that the host refills a
/// spinning VR's rings before its turn ends.
pub const DEFAULT_TURN_US: u32 = 50;

/// Longest yielding phase of a VR beside other VRs with [`Turns::Yield`],
/// µs. Measured with 4
/// daemon VRs on one core (`vrhost bench control`): sleeping at once gave
/// 15 Mpps of capacity, yielding 24-25 Mpps; with 2 ms of yielding, VRs
/// lost 0.06% of 3 Mpps while processes started beside them, with 50 µs
/// none. `vrhost bench memory`, 10 VRs: 27 Mpps either way, 15.5 sleeping
/// at once.
pub const BESIDE_VRS_YIELD_US: u32 = 50;

impl PollConfig {
    /// The back-off of a VR that shares its core with the host worker (or
    /// may run anywhere): no spinning or yielding, since the worker never
    /// yields and a VR spinning or yielding beside it only delays it; the
    /// VR sleeps on its doorbell as soon as its rings are empty, except in
    /// its [`PollConfig::flow_us`] window after work (yielding, within its
    /// credit).
    #[must_use]
    pub fn beside_worker(self) -> Self {
        Self {
            spin_rounds: 0,
            yield_us: 0,
            busy_poll_us: 0,
            nap_us: 0,
            ..self
        }
    }

    /// The back-off of a VR that shares its core only with other VRs: by
    /// [`PollConfig::turns`], never napping (a nap raises the flag and
    /// costs the host a doorbell for frames a yielding or spinning VR
    /// would take anyway).
    ///
    /// - [`Turns::Yield`]: no spinning (that would hold the core from the
    ///   others for a whole time slice), but yielding for up to
    ///   [`BESIDE_VRS_YIELD_US`] before sleeping, which hands the core to a
    ///   VR with work and spares the host a doorbell write per burst.
    /// - [`Turns::Sleep`]: sleeping as soon as the rings are empty, as
    ///   [`PollConfig::beside_worker`].
    /// - [`Turns::Spin`]: polling the empty rings for up to `turn_us` after
    ///   the last work (without the yields of `spin_yield_every`), then
    ///   sleeping.
    #[must_use]
    pub fn beside_vrs(self) -> Self {
        let base = Self {
            spin_rounds: 0,
            yield_us: 0,
            busy_poll_us: 0,
            nap_us: 0,
            flow_us: 0,
            ..self
        };
        match self.turns {
            Turns::Yield => Self {
                yield_us: self.yield_us.min(BESIDE_VRS_YIELD_US),
                ..base
            },
            Turns::Sleep => base,
            // Its turn is the spin: yielding would end it.
            Turns::Spin => Self {
                busy_poll_us: self.turn_us,
                spin_yield_every: 0,
                ..base
            },
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
    /// The VR's own configuration (for the built-in router: `vrhost_router::RouterConfig`).
    pub config: serde_json::Value,
}

/// The VR's answer to [`Hello`] and to each [`HostMsg::Control`].
///
/// In JSON: `{"Ready":{"pid":42}}`, `{"Error":{"message":"..."}}`,
/// `{"Control":{"id":7,"result":{"Ok":{...}}}}` or
/// `{"Control":{"id":7,"result":{"Err":"..."}}}`.
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
    /// The process panicked: sent by the SDK's panic hook just before the
    /// process dies, so the host can say why it went down.
    Panicked {
        /// Where and what (`panicked at src/x.rs:10:5: message`).
        message: String,
    },
    /// The answer to [`HostMsg::Control`] `id`.
    Control {
        /// The message's id (0 for a message whose id could not be read).
        id: u64,
        /// What the SDK's `Vr::control` returned, or why the
        /// message could not be read.
        result: Result<serde_json::Value, String>,
    },
}

/// Later messages from the host.
///
/// In JSON: `"Stop"`, or `{"Control":{"id":7,"body":{...}}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum HostMsg {
    /// Finish the current batch and exit.
    Stop,
    /// A change to the running VR, for the SDK's `Vr::control`;
    /// answered by [`VrReply::Control`] with the same `id`.
    Control {
        /// Chosen by the host to match the reply (replies come in order
        /// anyway); 0 is best avoided, as it also answers unreadable
        /// messages.
        id: u64,
        /// What to change; its form is the VR's (the built-in router's:
        /// `vrhost_router::RouterControl`).
        body: serde_json::Value,
    },
}

/// Counter positions in [`vrhost_shm::InstanceBlock::vr_counters`], as the
/// SDK publishes them (32 counters since region layout version 2).
pub mod counter {
    use vrhost_shm::layout::VR_COUNTERS;

    /// Packets taken from rx rings.
    pub const RX: usize = 0;
    /// Packets pushed to tx rings to be sent.
    pub const TX: usize = 1;
    /// First of the per-[`crate::DropReason`] drop counters: reason `r` is
    /// at `DROP_BASE + r as usize`.
    pub const DROP_BASE: usize = 2;
    /// Room for drop reasons ([`crate::DropReason::COUNT`] of them are used).
    pub const DROP_SLOTS: usize = 16;
    /// Slot indexes from the host that were out of range, or given twice in
    /// one batch (never expected).
    pub const BAD_SLOT: usize = DROP_BASE + DROP_SLOTS;
    /// Times the instance went to sleep.
    pub const SLEEPS: usize = BAD_SLOT + 1;
    /// First of the VR's own counters (the SDK's `Vr::counters`).
    pub const VR_BASE: usize = SLEEPS + 1;
    /// Room for the VR's own counters.
    pub const VR_SLOTS: usize = VR_COUNTERS - VR_BASE;

    const _: () = assert!(crate::DropReason::COUNT <= DROP_SLOTS);
    const _: () = assert!(VR_BASE < VR_COUNTERS);
}

/// Why a VR dropped a packet. Each reason has its own counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DropReason {
    /// Ethernet or IP header invalid (truncated, bad IHL, bad length).
    BadHeader = 0,
    /// A checksum the VR verifies is wrong (IPv4 header; ICMP, ICMPv6 to
    /// the VR).
    BadChecksum = 1,
    /// Not a protocol this VR handles.
    Unsupported = 2,
    /// TTL expired.
    TtlExpired = 3,
    /// No route to the destination.
    NoRoute = 4,
    /// Refused by the VR's policy (a filter).
    Filtered = 5,
    /// Anything else.
    Other = 6,
    /// The next hop's MAC address is being resolved (ARP or IPv6 neighbour
    /// discovery) and the packet
    /// could not wait for it: the neighbour's pending buffer is taken, or
    /// the neighbour table is full.
    ArpUnresolved = 7,
    /// Resolving the next hop failed (no ARP reply, no neighbour
    /// advertisement) and no ICMP host unreachable (ICMPv6 address
    /// unreachable) was sent in the packet's place.
    HostUnreachable = 8,
    /// Addressed to the VR itself (one of its addresses, a broadcast or a
    /// multicast group) but not something it answers: there is no local
    /// delivery to a control plane yet.
    LocalUnsupported = 9,
    /// Not an error: the VR took what it needed from the packet and has
    /// nothing to send in its slot (an ARP reply learned, an ARP request
    /// for another host, a packet copied to wait for its next hop).
    Consumed = 10,
    /// A packet to a multicast group that a router does not forward
    /// (IPv6 `ff00::/8`; IPv4 multicast is counted as `LocalUnsupported`).
    Multicast = 11,
    /// An IPv6 packet from or to a link-local address (`fe80::/10`) that
    /// would have to leave its link (RFC 4291 2.5.6).
    LinkLocal = 12,
    /// An IPv6 packet carrying extension headers, dropped because the VR
    /// is configured to.
    ExtHeader = 13,
}

impl DropReason {
    /// Number of reasons.
    pub const COUNT: usize = 14;

    /// Every reason, in counter order.
    pub const ALL: [DropReason; Self::COUNT] = [
        Self::BadHeader,
        Self::BadChecksum,
        Self::Unsupported,
        Self::TtlExpired,
        Self::NoRoute,
        Self::Filtered,
        Self::Other,
        Self::ArpUnresolved,
        Self::HostUnreachable,
        Self::LocalUnsupported,
        Self::Consumed,
        Self::Multicast,
        Self::LinkLocal,
        Self::ExtHeader,
    ];

    /// Name used in stats and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::BadHeader => "bad_header",
            Self::BadChecksum => "bad_checksum",
            Self::Unsupported => "unsupported",
            Self::TtlExpired => "ttl_expired",
            Self::NoRoute => "no_route",
            Self::Filtered => "filtered",
            Self::Other => "other",
            Self::ArpUnresolved => "arp_unresolved",
            Self::HostUnreachable => "host_unreachable",
            Self::LocalUnsupported => "local_unsupported",
            Self::Consumed => "consumed",
            Self::Multicast => "multicast",
            Self::LinkLocal => "link_local",
            Self::ExtHeader => "ext_header",
        }
    }
}
