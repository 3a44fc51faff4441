//! The minimal XDP router (`ebpf/xdp_minrouter.c`): one next hop for
//! every IPv4 frame, no select table, no route lookup, no counters. The
//! reference the fast path is measured against: its cost per frame in a
//! test run ([`crate::measure_cost`]), and on a live port
//! ([`MinimalRouter::attach`]; `vrhost bench fastpath --forwarders
//! minimal`), where it shows what any XDP forwarder gets from the lab's
//! veths (the copies and NAPI hops between an skb and an xdp_frame), so
//! that the fast path's gap to the kernel can be told apart from its
//! router's own cost.

use aya::maps::{Array, DevMap, MapData};
use aya::{Ebpf, EbpfLoader};
use vrhost_io::af_xdp::XdpLink;

use crate::load::{attach_either, load_program, program};
use crate::{AttachMode, FastError, ifindex, map_err, take};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_minrouter.o"));
pub(crate) const PROGRAM: &str = "xdp_minrouter";
const HOP: &str = "minr_hop";
const OUT: &str = "minr_out";

/// Load the minimal router with its one next hop: frames leave through
/// `out_ifindex` to `dst_mac` from `src_mac`.
pub(crate) fn load(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    out_ifindex: u32,
) -> Result<Ebpf, FastError> {
    let mut ebpf = EbpfLoader::new()
        .load(OBJECT)
        .map_err(|e| FastError::LoadObject {
            object: "xdp_minrouter.c",
            source: Box::new(e),
        })?;
    // Before the maps are taken (and closed when done with): the program
    // holds them from here on.
    load_program(&mut ebpf, PROGRAM)?;
    let mut hop: Array<MapData, [u8; 16]> = take(&mut ebpf, HOP)?;
    let mut v = [0u8; 16];
    v[0..6].copy_from_slice(&dst_mac);
    v[6..12].copy_from_slice(&src_mac);
    v[12..16].copy_from_slice(&out_ifindex.to_ne_bytes());
    hop.set(0, v, 0).map_err(map_err(HOP, "set"))?;
    let mut out: DevMap<MapData> = take(&mut ebpf, OUT)?;
    out.set(0, out_ifindex, None, 0)
        .map_err(|e| FastError::XdpMap {
            map: OUT,
            op: "set",
            source: Box::new(e),
        })?;
    Ok(ebpf)
}

/// The minimal router attached to a port, forwarding every IPv4 frame
/// that arrives there to one next hop; detached when dropped.
pub struct MinimalRouter {
    link: XdpLink,
    _ebpf: Ebpf,
}

impl std::fmt::Debug for MinimalRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MinimalRouter")
            .field("mode", &self.link.mode())
            .finish_non_exhaustive()
    }
}

impl MinimalRouter {
    /// Load it and attach it to `ifname` (in the calling thread's
    /// namespace), native first: frames arriving there leave through
    /// `out_ifname` to `dst_mac` from `src_mac`. Anything but an untagged,
    /// option-less IPv4 frame with TTL > 1 is passed to the kernel.
    ///
    /// # Errors
    /// Loading or attaching errors, [`FastError::NoSuchInterface`].
    pub fn attach(
        ifname: &str,
        out_ifname: &str,
        dst_mac: [u8; 6],
        src_mac: [u8; 6],
    ) -> Result<Self, FastError> {
        let idx = ifindex(ifname)?;
        let mut ebpf = load(dst_mac, src_mac, ifindex(out_ifname)?)?;
        let link = attach_either(program(&mut ebpf, PROGRAM)?, PROGRAM, ifname, idx)?;
        Ok(Self { link, _ebpf: ebpf })
    }

    /// The attach mode obtained.
    pub fn mode(&self) -> AttachMode {
        self.link.mode()
    }
}
