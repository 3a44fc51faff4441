//! Counters of the host data path: single writer (the worker), any reader.

use std::sync::atomic::{AtomicU64, Ordering};

/// A counter written by one thread and read by any.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Add `n`. Only the owning worker calls this, so load + store is exact
    /// and avoids a locked instruction.
    #[inline]
    pub fn add(&self, n: u64) {
        // Relaxed: single writer; readers want a recent value, not an order.
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// Current value.
    pub fn get(&self) -> u64 {
        // Relaxed: a monotonic display value.
        self.0.load(Ordering::Relaxed)
    }
}

macro_rules! reasons {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $v,)* }
        impl $name {
            /// Every value, in counter order.
            pub const ALL: &[$name] = &[$($name::$v,)*];
            /// Number of values.
            pub const COUNT: usize = $name::ALL.len();
            /// Name used in stats, JSON and metrics.
            pub fn name(self) -> &'static str { match self { $($name::$v => $s,)* } }
        }
    };
}

reasons! {
    /// Why the host dropped a frame on its way into a VR.
    IngressDrop {
        /// Too short to hold the headers the classifier reads.
        Malformed = "malformed",
        /// No classifier rule matched.
        NoMatch = "no_match",
        /// The VR is not running.
        VrDown = "vr_down",
        /// The VR's pool had no free slot.
        PoolEmpty = "pool_empty",
        /// The vNIC's rx ring was full.
        RingFull = "ring_full",
        /// The frame does not fit a slot.
        TooBig = "too_big",
        /// Over the VR's rate limit (its token bucket was empty).
        RateLimited = "rate_limited",
        /// A tunnel frame too short for its outer headers, or with a bad
        /// outer IPv4 or UDP length, or an inner frame too short.
        TunnelMalformed = "tunnel_malformed",
        /// A tunnel frame whose outer IPv4 checksum does not verify.
        TunnelChecksum = "tunnel_checksum",
        /// A tunnel frame whose outer IPv4 packet is a fragment (not
        /// reassembled).
        TunnelFragment = "tunnel_fragment",
        /// A VXLAN frame without the I flag (no valid VNI).
        TunnelBadHeader = "tunnel_bad_header",
        /// A tunnel frame of no configured tunnel: an unknown VNI, or
        /// unknown outer addresses.
        TunnelUnknown = "tunnel_unknown",
        /// A frame for a VLAN sub-interface without that VLAN's tag.
        VlanMismatch = "vlan_mismatch",
        /// A frame on its way into a tap VR's namespace while the frames
        /// in flight through it already hold their share of the VR's pool
        /// (the rest is kept for the frames coming back from its TAPs).
        TapBacklog = "tap_backlog",
    }
}

reasons! {
    /// Why the host dropped a frame a VR sent, before its port.
    EgressDrop {
        /// A tunnel vNIC's peer MAC is not known yet (no `remote_mac`, and
        /// no valid frame from the remote so far).
        TunnelNoMac = "tunnel_no_mac",
        /// An IP-in-IP tunnel vNIC sent a frame that is not untagged IPv4.
        TunnelNotIpv4 = "tunnel_not_ipv4",
        /// A tunnel vNIC's frame leaves no room for the outer headers
        /// before it in its slot (the VR moved it to the slot's start).
        TunnelHeadroom = "tunnel_headroom",
        /// The encapsulated packet would exceed 65535 bytes.
        TunnelTooBig = "tunnel_too_big",
        /// A VLAN sub-interface's frame that is tagged already, or too
        /// short for an Ethernet header.
        VlanTagged = "vlan_tagged",
        /// A VLAN sub-interface's frame with no room before it in its slot
        /// for the tag (the VR moved it to the slot's start).
        VlanHeadroom = "vlan_headroom",
    }
}

reasons! {
    /// A rule of the region protocol a VR broke. Counted, never followed.
    Violation {
        /// The consumer index of an rx ring moved backwards or past the head.
        RxRingIndex = "rx_ring_index",
        /// The producer index of a tx ring moved backwards or overfilled.
        TxRingIndex = "tx_ring_index",
        /// A slot index out of range.
        SlotIndex = "slot_index",
        /// A slot the instance does not hold (or returned twice).
        SlotNotOwned = "slot_not_owned",
        /// A slot returned in a state other than PROCESSED or DROPPED.
        SlotState = "slot_state",
        /// A packet offset or length outside the slot, or too short.
        Extent = "extent",
        /// A control message to a peer instance that is not one
        /// ([`crate::relay`]).
        CtrlMessage = "ctrl_message",
    }
}

/// Counters of one VR as the host sees it.
#[derive(Debug, Default)]
pub struct VrStats {
    /// Frames put into the VR's rx rings.
    pub rx_packets: Counter,
    /// Their bytes.
    pub rx_bytes: Counter,
    /// Frames the VR sent that the host passed to a port.
    pub tx_packets: Counter,
    /// Their bytes.
    pub tx_bytes: Counter,
    /// Frames the VR returned as DROPPED.
    pub vr_dropped: Counter,
    /// Frames refused by the out port.
    pub port_dropped: Counter,
    /// Frames received on its dedicated port and staged for it where the
    /// kernel wrote them, in its own pool: no copy by the host.
    pub lent_in: Counter,
    /// Frames sent on its dedicated port from where it left them: no copy
    /// by the host.
    pub lent_out: Counter,
    /// Host drops on the way in, by [`IngressDrop`].
    pub ingress_drops: [Counter; IngressDrop::COUNT],
    /// Protocol violations, by [`Violation`].
    pub violations: [Counter; Violation::COUNT],
    /// Host drops of what it sent, by [`EgressDrop`].
    pub egress_drops: [Counter; EgressDrop::COUNT],
    /// Times a VR process exited and its slots were reclaimed.
    pub exits: Counter,
    /// Slots reclaimed from exited instances.
    pub reclaimed: Counter,
    /// Doorbell rings (wakeups of a sleeping VR).
    pub kicks: Counter,
    /// Frames a capture could not keep up with (not copied; still forwarded).
    pub capture_dropped: Counter,
    /// Times its processes were started again after an exit, a hang or a
    /// crash (not counting a restart by a changed definition).
    pub restarts: Counter,
    /// Times the watchdog found it stuck (frames waiting, no progress) and
    /// killed it.
    pub hangs: Counter,
    /// Times it was quarantined for too many violations.
    pub quarantines: Counter,
    /// Nanoseconds the host worker spent on it: its share of classifying
    /// and copying frames in, serving its tx rings, sending.
    pub host_ns: Counter,
    /// Nanoseconds from the last exit the host saw to the first frame the
    /// restarted VR sent (0 until it happened once).
    pub last_recovery_ns: Gauge,
    /// CLOCK_MONOTONIC time, in nanoseconds, when the host saw its last
    /// exit (0: never).
    pub last_exit_mono_ns: Gauge,
    /// CLOCK_MONOTONIC time, in nanoseconds, of the first frame sent after
    /// the last restart (0: not yet).
    pub last_recovered_mono_ns: Gauge,
    /// Per vNIC, in index order.
    pub vnics: Vec<VnicStats>,
    /// Per instance slot of the region, in index order.
    pub instances: Vec<InstanceStats>,
    /// Instances that exited while others of the VR went on forwarding.
    pub instance_exits: Counter,
    /// Changes of the set of instances fed (one added, one retired, one
    /// gone).
    pub rebalances: Counter,
    /// Control messages relayed between the VR's instances.
    pub ctrl_relayed: Counter,
    /// Control messages dropped: the peer's control ring was full or the
    /// peer did not run.
    pub ctrl_dropped: Counter,
    /// Instances the control plane started beside running ones (scaling
    /// up, or replacing one that exited).
    pub instances_added: Counter,
    /// Instances the control plane retired (scaling down).
    pub instances_retired: Counter,
    /// Instances wanted but not started: no core left in the host's
    /// budget, or the process failed to start.
    pub instances_refused: Counter,
    /// Frames/s offered to the VR (given or dropped at its ingress): an
    /// EWMA over [`LOAD_TAU`], sampled as the worker supervises.
    pub arrival_pps: Gauge,
    /// Pool slots in use: all of them, or, for a pool that grows with its
    /// load, those grown so far (0 until the path reports it).
    pub pool_usable: Gauge,
    /// Steps its pool grew by.
    pub pool_grows: Counter,
    /// Steps of its pool's growth refused (its memory limit).
    pub pool_grow_refused: Counter,
}

/// Time constant of the load estimates ([`VrStats::arrival_pps`],
/// [`InstanceStats::rx_fill_milli`], [`InstanceStats::capacity_pps`]).
pub const LOAD_TAU: std::time::Duration = std::time::Duration::from_millis(100);

/// Counters of one instance of a VR as the host sees it.
#[derive(Debug, Default)]
pub struct InstanceStats {
    /// Frames given to it.
    pub rx_packets: Counter,
    /// Frames it handed back (sent or not).
    pub returned: Counter,
    /// Slots it holds now (given and not handed back): its backlog.
    pub held: Gauge,
    /// Entries waiting in its rx rings, an EWMA (LVRM's VRI load), in
    /// thousandths of an entry.
    pub rx_fill_milli: Gauge,
    /// Frames/s it handed back while it had a backlog: what it can take
    /// (an EWMA; 0 until measured).
    pub capacity_pps: Gauge,
}

/// A value written by one thread and read by any.
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// Set it.
    pub fn set(&self, v: u64) {
        // Relaxed: a display value with a single writer.
        self.0.store(v, Ordering::Relaxed);
    }

    /// Current value.
    pub fn get(&self) -> u64 {
        // Relaxed: see `set`.
        self.0.load(Ordering::Relaxed)
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds: comparable across processes (a
/// benchmark that kills a VR and the host that sees it exit).
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Counters of one vNIC of a VR as the host sees it.
#[derive(Debug, Default)]
pub struct VnicStats {
    /// Frames put into the vNIC's rx ring.
    pub rx_packets: Counter,
    /// Their bytes.
    pub rx_bytes: Counter,
    /// Frames sent from the vNIC's tx ring to its port.
    pub tx_packets: Counter,
    /// Their bytes.
    pub tx_bytes: Counter,
}

impl VrStats {
    /// Counters of a VR with `vnics` vNICs and one instance.
    pub fn with_vnics(vnics: usize) -> Self {
        Self::with_shape(vnics, 1)
    }

    /// Counters of a VR with `vnics` vNICs and `instances` instance slots.
    pub fn with_shape(vnics: usize, instances: usize) -> Self {
        Self {
            vnics: (0..vnics).map(|_| VnicStats::default()).collect(),
            instances: (0..instances).map(|_| InstanceStats::default()).collect(),
            ..Self::default()
        }
    }

    /// Count an ingress drop.
    #[inline]
    pub fn drop_in(&self, why: IngressDrop, n: u64) {
        self.ingress_drops[why as usize].add(n);
    }

    /// Count an egress drop.
    #[inline]
    pub fn drop_out(&self, why: EgressDrop) {
        self.egress_drops[why as usize].add(1);
    }

    /// Count a violation.
    #[inline]
    pub fn violation(&self, what: Violation) {
        self.violations[what as usize].add(1);
    }

    /// Sum of all violations.
    pub fn violations_total(&self) -> u64 {
        self.violations.iter().map(Counter::get).sum()
    }

    /// Sum of all ingress drops.
    pub fn ingress_drops_total(&self) -> u64 {
        self.ingress_drops.iter().map(Counter::get).sum()
    }
}

/// Counters of the host that belong to no VR.
#[derive(Debug, Default)]
pub struct HostStats {
    /// Frames received from ports.
    pub rx_packets: Counter,
    /// Frames that matched no rule or could not be parsed, by [`IngressDrop`].
    pub ingress_drops: [Counter; IngressDrop::COUNT],
    /// Times the worker slept.
    pub sleeps: Counter,
    /// Times the worker napped ([`vrhost_proto::PollConfig::nap_us`]).
    pub naps: Counter,
    /// Times the worker moved a VR process onto its own core or back
    /// ([`vrhost_proto::PollConfig::colocate_pps`]).
    pub colocations: Counter,
    /// Times the worker moved itself (and the VRs on its core) to the CPU
    /// its frames arrive on, or back to its own
    /// ([`vrhost_proto::PollConfig::follow_rx`]).
    pub follows: Counter,
    /// Times the worker slept to hand its core to a VR on it that held
    /// frames ([`vrhost_proto::PollConfig::hand_over`]).
    pub hand_overs: Counter,
    /// Cluster heartbeats (pings and pongs, `docs/cluster.md`) a port
    /// received that no rule took: the kernel's heartbeat sockets get
    /// them, so they are counted here, not as `no_match` drops.
    pub heartbeats: Counter,
    /// Rounds the worker ran (`Worker::poll_once`), with or without work:
    /// the host's CPU per round is its thread's CPU over this.
    pub rounds: Counter,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_counted_apart_and_summed() {
        let s = VrStats::with_shape(2, 3);
        assert_eq!((s.vnics.len(), s.instances.len()), (2, 3));
        s.drop_in(IngressDrop::RingFull, 5);
        s.drop_in(IngressDrop::NoMatch, 2);
        s.violation(Violation::Extent);
        s.violation(Violation::Extent);
        s.violation(Violation::SlotIndex);
        assert_eq!(s.ingress_drops[IngressDrop::RingFull as usize].get(), 5);
        assert_eq!(s.ingress_drops_total(), 7);
        assert_eq!(s.violations[Violation::Extent as usize].get(), 2);
        assert_eq!(s.violations_total(), 3);
    }

    #[test]
    fn every_reason_has_its_own_name_in_counter_order() {
        let names: Vec<&str> = Violation::ALL.iter().map(|v| v.name()).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), Violation::COUNT);
        for (i, v) in IngressDrop::ALL.iter().enumerate() {
            assert_eq!(*v as usize, i, "{}", v.name());
        }
        assert_eq!(IngressDrop::PoolEmpty.name(), "pool_empty");
    }

    #[test]
    fn a_counter_wraps_and_a_gauge_holds_the_last_value() {
        let c = Counter::default();
        c.add(u64::MAX);
        c.add(2);
        assert_eq!(c.get(), 1);
        let g = Gauge::default();
        g.set(7);
        g.set(3);
        assert_eq!(g.get(), 3);
    }

    #[test]
    fn the_monotonic_clock_does_not_go_back() {
        let a = mono_ns();
        let b = mono_ns();
        assert!(b >= a && a > 0);
    }
}
