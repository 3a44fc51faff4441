//! The key and value layouts of `ebpf/xdp_router.c`'s maps, `#[repr(C)]`
//! field for field (the C structs of the same names). Sizes are asserted
//! here and by `_Static_assert` in the C file with the same numbers, and
//! aya checks them against the object's map definitions when
//! [`crate::FastPath`] opens each map (a mismatch is a load error).
//!
//! aya reads and writes map entries as plain bytes of types marked
//! [`aya::Pod`], an unsafe trait: the one reason this module allows
//! unsafe code.
#![allow(
    unsafe_code,
    reason = "aya::Pod is an unsafe marker trait; every impl below is on plain data"
)]

/// `PATH_SLOW`: the VR's user-space instance (the AF_XDP socket).
pub const PATH_SLOW: u32 = 0;
/// `PATH_FAST`: forwarded by the XDP program.
pub const PATH_FAST: u32 = 1;
/// `PATH_DROP`: dropped at the port.
pub const PATH_DROP: u32 = 2;

/// `MODE_DST`.
pub const MODE_DST: u32 = 0;
/// `MODE_SRC`.
pub const MODE_SRC: u32 = 1;
/// `MODE_SRC_DST`.
pub const MODE_SRC_DST: u32 = 2;

/// `VLAN_NONE`: the select key's VLAN of an untagged frame.
pub const VLAN_NONE: u16 = 0xffff;
/// `ROUTE_CONNECTED`: the route's destination is its own next hop.
pub const ROUTE_CONNECTED: u32 = 1;
/// The LPM keys' fixed part (vr and table), always matched whole.
pub const LPM_FIXED_BITS: u32 = 64;

/// `struct select_key`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SelectKey {
    pub ifindex: u32,
    pub vlan: u16,
    pub dst_mac: [u8; 6],
}

/// `struct select_entry`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectValue {
    pub vr: u32,
    pub path: u32,
    pub rate_pps: u64,
    pub burst: u64,
    pub tokens: u64,
    pub last_ns: u64,
}

/// Own addresses a [`VrConf`] holds (`VR_INLINE_ADDRS`).
pub const VR_INLINE_ADDRS: usize = 5;

/// `struct vr_conf`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VrConf {
    pub mode: u32,
    pub fast: u32,
    /// 1 + the FIB's table slot of the VR's table 0 (0: none); written
    /// by the FIB alone (`crate::vrconf`).
    pub table: u32,
    /// The VR's own addresses; up to [`VR_INLINE_ADDRS`] all in `addr`
    /// (the program then skips the `addrs` map), more only in `addrs`.
    pub naddrs: u32,
    /// Network byte order.
    pub addr: [[u8; 4]; VR_INLINE_ADDRS],
    pub pad: u32,
}

/// `struct lpm_key` without its `prefixlen`, which aya's
/// [`aya::maps::lpm_trie::Key`] adds in front.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LpmData {
    pub vr: u32,
    pub table: u32,
    /// Network byte order.
    pub addr: [u8; 4],
}

/// `struct route_val`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteValue {
    /// Network byte order.
    pub gateway: [u8; 4],
    pub flags: u32,
}

/// `struct vr_ip`: the key of `addrs` and `neighbours`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VrIp {
    pub vr: u32,
    /// Network byte order.
    pub addr: [u8; 4],
}

/// `struct neigh_val`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighValue {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub ifindex: u32,
}

/// `struct xsk_slot`: a port's indexes in the XSKMAP.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XskSlot {
    pub base: u32,
    pub queues: u32,
}

/// Fields of `struct fast_counters`, in order.
pub const COUNTERS: usize = 16;

/// `struct fast_counters`, as its [`COUNTERS`] words.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CountersValue(pub [u64; COUNTERS]);

/// `struct livegen_conf` of `ebpf/xdp_livegen.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveGenConf {
    pub flows: u32,
    pub random_dst: u32,
    pub rate_pps: u64,
    pub burst: u64,
    /// The template's headers (42 bytes used).
    pub hdr: [u8; 48],
    /// Frames not 0 modulo `mix` go to `alt_dst` (<= 1: none).
    pub mix: u32,
    /// 0: the frames leave by `XDP_TX`; CPU c + 1: through CPU c's entry
    /// of the generator's cpumap.
    pub via_cpu: u32,
    /// The other destination MAC (6 bytes used).
    pub alt_dst: [u8; 8],
    /// With `mix` > 1: frames/s to the template's MAC, from a bucket of
    /// its own (0: one frame in `mix`).
    pub first_pps: u64,
}

impl Default for LiveGenConf {
    fn default() -> Self {
        Self {
            flows: 1,
            random_dst: 0,
            rate_pps: 0,
            burst: 1,
            hdr: [0; 48],
            mix: 0,
            via_cpu: 0,
            alt_dst: [0; 8],
            first_pps: 0,
        }
    }
}

/// CPUs in `struct fast_switch`.
pub const MAX_FAST_CPUS: usize = 15;

/// `struct fast_switch` of `ebpf/xdp_router.c`: never written whole, each
/// field stored on its own through the array's mapping
/// (`crate::cache::Switch`), at its `offset_of!`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastSwitch {
    /// The select table's and the neighbours' generations.
    pub generation: [u64; 2],
    /// How many tunnels are set.
    pub tunnels: u32,
    /// How many of `cpu` the forwarding is spread over.
    pub ncpus: u32,
    pub cpu: [u32; MAX_FAST_CPUS],
    pub pad: u32,
}

/// `struct livegen_state` of `ebpf/xdp_livegen.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveGenState {
    pub seq: u64,
    pub sent: u64,
    pub paced_out: u64,
    pub tokens: u64,
    pub last_ns: u64,
    pub first_sent: u64,
    pub first_tokens: u64,
    pub first_last_ns: u64,
}

/// `struct flow_state` of `ebpf/xdp_seqsink.c`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowState {
    pub received: u64,
    pub next: u64,
    pub lost: u64,
    pub reordered: u64,
}

/// `struct tun_local_key` of `ebpf/xdp_tunnel.h`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TunLocalKey {
    pub ifindex: u32,
    /// Network order.
    pub local: [u8; 4],
    pub udp_port: u16,
    pub pad: u16,
}

/// `struct tun_in_key` of `ebpf/xdp_tunnel.h`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TunInKey {
    pub ifindex: u32,
    /// Network order.
    pub local: [u8; 4],
    /// Network order.
    pub remote: [u8; 4],
    pub udp_port: u16,
    pub pad: u16,
    pub vni: u32,
}

/// `struct tunnel` of `ebpf/xdp_tunnel.h`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TunnelValue {
    pub kind: u32,
    pub vni: u32,
    /// Network order.
    pub local: [u8; 4],
    /// Network order.
    pub remote: [u8; 4],
    pub ifindex: u32,
    pub udp_port: u16,
    pub local_mac: [u8; 6],
    pub peer_mac: [u8; 6],
    pub flags: u16,
    pub ident: u32,
    pub inner_mac: [u8; 6],
    pub pad: u16,
}

/// `TUN_KIND_VXLAN`.
pub const TUN_KIND_VXLAN: u32 = 1;
/// `TUN_KIND_UDP`.
pub const TUN_KIND_UDP: u32 = 2;
/// `TUN_KIND_IPIP`.
pub const TUN_KIND_IPIP: u32 = 3;
/// `TUN_PEER_KNOWN`: `peer_mac` is set.
pub const TUN_PEER_KNOWN: u16 = 1;
/// `TUN_LEARN`: take `peer_mac` from the frames received.
pub const TUN_LEARN: u16 = 2;
/// `TUN_IFINDEX`: a tunnel vNIC's port is this | its id.
pub const TUN_IFINDEX: u32 = 0x8000_0000;
/// `TUN_MAX`: tunnel ids are below it.
pub const TUN_MAX: u32 = 4096;

/// Fields of `struct tun_counters`, in order.
pub const TUN_COUNTERS: usize = 8;

/// `struct tun_counters`, as its [`TUN_COUNTERS`] words.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TunCountersValue(pub [u64; TUN_COUNTERS]);

// SAFETY (each impl below): a `#[repr(C)]` struct of integers and byte
// arrays whose fields leave no padding (the size assertions in the tests
// prove it: each size is the sum of its fields), so every byte pattern is
// a valid value and no uninitialized byte is ever written to a map.
// SAFETY: see above.
unsafe impl aya::Pod for SelectKey {}
// SAFETY: see above.
unsafe impl aya::Pod for SelectValue {}
// SAFETY: see above.
unsafe impl aya::Pod for VrConf {}
// SAFETY: see above.
unsafe impl aya::Pod for LpmData {}
// SAFETY: see above.
unsafe impl aya::Pod for RouteValue {}
// SAFETY: see above.
unsafe impl aya::Pod for VrIp {}
// SAFETY: see above.
unsafe impl aya::Pod for NeighValue {}
// SAFETY: see above.
unsafe impl aya::Pod for XskSlot {}
// SAFETY: see above.
unsafe impl aya::Pod for CountersValue {}
// SAFETY: see above.
unsafe impl aya::Pod for LiveGenConf {}
// SAFETY: see above.
unsafe impl aya::Pod for LiveGenState {}
// SAFETY: see above.
unsafe impl aya::Pod for FlowState {}
// SAFETY: see above.
unsafe impl aya::Pod for TunLocalKey {}
// SAFETY: see above.
unsafe impl aya::Pod for TunInKey {}
// SAFETY: see above.
unsafe impl aya::Pod for TunnelValue {}
// SAFETY: see above.
unsafe impl aya::Pod for TunCountersValue {}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    /// The sizes `_Static_assert`ed in ebpf/xdp_router.c, each also the
    /// sum of the fields (no padding).
    #[test]
    fn sizes_match_the_c_program() {
        assert_eq!(size_of::<SelectKey>(), 12);
        assert_eq!(size_of::<SelectKey>(), 4 + 2 + 6);
        assert_eq!(size_of::<SelectValue>(), 40);
        assert_eq!(size_of::<SelectValue>(), 4 + 4 + 4 * 8);
        assert_eq!(size_of::<VrConf>(), 40);
        assert_eq!(size_of::<VrConf>(), 4 * 4 + 5 * 4 + 4);
        assert_eq!(size_of::<aya::maps::lpm_trie::Key<LpmData>>(), 16);
        assert_eq!(size_of::<LpmData>(), 4 + 4 + 4);
        assert_eq!(size_of::<RouteValue>(), 8);
        assert_eq!(size_of::<VrIp>(), 8);
        assert_eq!(size_of::<NeighValue>(), 6 + 6 + 4);
        assert_eq!(size_of::<XskSlot>(), 8);
        assert_eq!(size_of::<CountersValue>(), 128);
        assert_eq!(size_of::<LiveGenConf>(), 96);
        assert_eq!(size_of::<LiveGenConf>(), 4 + 4 + 8 + 8 + 48 + 4 + 4 + 8 + 8);
        assert_eq!(size_of::<LiveGenState>(), 8 * 8);
        assert_eq!(size_of::<FastSwitch>(), 88);
        assert_eq!(size_of::<FastSwitch>(), 2 * 8 + 4 + 4 + 15 * 4 + 4);
        assert_eq!(core::mem::offset_of!(FastSwitch, tunnels), 16);
        assert_eq!(core::mem::offset_of!(FastSwitch, ncpus), 20);
        assert_eq!(core::mem::offset_of!(FastSwitch, cpu), 24);
        assert_eq!(size_of::<FlowState>(), 4 * 8);
        assert_eq!(size_of::<TunLocalKey>(), 12);
        assert_eq!(size_of::<TunLocalKey>(), 4 + 4 + 2 + 2);
        assert_eq!(size_of::<TunInKey>(), 20);
        assert_eq!(size_of::<TunInKey>(), 4 + 4 + 4 + 2 + 2 + 4);
        assert_eq!(size_of::<TunnelValue>(), 48);
        assert_eq!(
            size_of::<TunnelValue>(),
            4 + 4 + 4 + 4 + 4 + 2 + 6 + 6 + 2 + 4 + 6 + 2
        );
        assert_eq!(size_of::<TunCountersValue>(), 64);
    }
}
