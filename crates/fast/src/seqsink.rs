//! The benchmarks' counting sink in XDP: [`SeqSink`] (`ebpf/xdp_seqsink.c`)
//! drops UDP frames to the discard port on the interface it is attached
//! to and counts the [`crate::LiveGen`]'s frames per flow from their
//! sequence numbers: received, lost (sequence numbers that never came)
//! and reordered (a frame after a later one of its flow). Other frames to
//! port 9 (trafgen's) are counted apart; everything else passes. Each
//! CPU's count of the frames it received says where the receive side ran
//! ([`SeqSink::per_cpu`]).

use aya::maps::{Array, MapData, PerCpuArray};
use aya::{Ebpf, EbpfLoader};
use vrhost_io::af_xdp::XdpLink;

use crate::abi::FlowState;
use crate::load::{attach_either, load_program};
use crate::{AttachMode, FastError, MAX_FLOWS, ifindex, map_err, take};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_seqsink.o"));

const PROGRAM: &str = "xdp_seqsink";
const FLOWS: &str = "seqsink_flows";
const OTHER: &str = "seqsink_other";
const CPUS: &str = "seqsink_cpus";

/// What the sink counted (one flow, or all added).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkCounts {
    /// The generator's frames received.
    pub received: u64,
    /// Sequence numbers skipped and not received since (late frames are
    /// taken back from it).
    pub lost: u64,
    /// Frames that came after a later frame of their flow.
    pub reordered: u64,
    /// Frames to port 9 without the generator's mark.
    pub other: u64,
}

impl SinkCounts {
    /// What was counted between `before` and `self`. `lost` goes down
    /// when late frames arrive: a span in which more late frames came
    /// than were skipped reads 0 lost.
    #[must_use]
    pub fn since(&self, before: &SinkCounts) -> SinkCounts {
        SinkCounts {
            received: self.received.wrapping_sub(before.received),
            lost: self.lost.saturating_sub(before.lost),
            reordered: self.reordered.wrapping_sub(before.reordered),
            other: self.other.wrapping_sub(before.other),
        }
    }
}

/// The sink attached to one interface; detached when dropped.
pub struct SeqSink {
    // Field order is drop order: detached, then unloaded.
    link: XdpLink,
    flows: Array<MapData, FlowState>,
    other: Array<MapData, u64>,
    cpus: PerCpuArray<MapData, u64>,
    _ebpf: Ebpf,
}

impl std::fmt::Debug for SeqSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeqSink")
            .field("mode", &self.link.mode())
            .finish_non_exhaustive()
    }
}

impl SeqSink {
    /// Load the sink and attach it to `ifname` (in the calling thread's
    /// namespace), native first.
    ///
    /// # Errors
    /// Loading or attaching errors, [`FastError::NoSuchInterface`].
    pub fn attach(ifname: &str) -> Result<Self, FastError> {
        let idx = ifindex(ifname)?;
        let mut ebpf = EbpfLoader::new()
            .load(OBJECT)
            .map_err(|e| FastError::LoadObject {
                object: "xdp_seqsink.c",
                source: Box::new(e),
            })?;
        let prog = load_program(&mut ebpf, PROGRAM)?;
        let link = attach_either(prog, PROGRAM, ifname, idx)?;
        let flows = take(&mut ebpf, FLOWS)?;
        let other = take(&mut ebpf, OTHER)?;
        let cpus = take(&mut ebpf, CPUS)?;
        Ok(Self {
            link,
            flows,
            other,
            cpus,
            _ebpf: ebpf,
        })
    }

    /// The attach mode obtained.
    pub fn mode(&self) -> AttachMode {
        self.link.mode()
    }

    /// Counts of flow `flow`.
    ///
    /// # Errors
    /// [`FastError::Map`] (a flow beyond [`MAX_FLOWS`]).
    pub fn flow(&self, flow: u32) -> Result<SinkCounts, FastError> {
        let f = self.flows.get(&flow, 0).map_err(map_err(FLOWS, "get"))?;
        Ok(SinkCounts {
            received: f.received,
            lost: f.lost,
            reordered: f.reordered,
            other: 0,
        })
    }

    /// Forget every flow (counts and expected sequence numbers), for a
    /// generator that numbers from 0 again. Not while frames arrive.
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn reset(&mut self) -> Result<(), FastError> {
        for i in 0..MAX_FLOWS {
            self.flows
                .set(i, FlowState::default(), 0)
                .map_err(map_err(FLOWS, "set"))?;
        }
        self.other.set(0, 0, 0).map_err(map_err(OTHER, "set"))
    }

    /// Discard-port frames received so far on each possible CPU (index:
    /// the CPU), whoever sent them.
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn per_cpu(&self) -> Result<Vec<u64>, FastError> {
        let v = self.cpus.get(&0, 0).map_err(map_err(CPUS, "get"))?;
        Ok(v.iter().copied().collect())
    }

    /// Counts of the first `flows` flows added, and the unmarked frames.
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn counts(&self, flows: u32) -> Result<SinkCounts, FastError> {
        let mut c = SinkCounts {
            other: self.other.get(&0, 0).map_err(map_err(OTHER, "get"))?,
            ..SinkCounts::default()
        };
        for i in 0..flows.min(MAX_FLOWS) {
            let f = self.flow(i)?;
            c.received += f.received;
            c.lost += f.lost;
            c.reordered += f.reordered;
        }
        Ok(c)
    }
}
