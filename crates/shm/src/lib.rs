//! The shared memory between the host and one VR: its layout, the slot state
//! machine, the SPSC rings of slot indexes, the wakeup handshake, and fd
//! passing to hand a region to a VR process.
//!
//! One region per VR (Europa's packet pool, section 3.2 of
//! `../shared/seeds/000_*.txt`): a sealed memfd the host creates and passes
//! over a unix socket. It holds a versioned [`Header`], a block per instance,
//! one [`SlotMeta`] per slot, an rx and a tx ring per vNIC per instance, a
//! control ring pair per instance, and the packet slots. See [`layout`].
//!
//! Nothing read from the region is trusted by the host: ring indexes are
//! validated by [`ring`], slot indexes bounds-checked by [`Region`], slot
//! states changed by compare-and-swap. This crate does not decide what to do
//! about a violation; the host counts it.
//!
//! `unsafe` is confined to [`region`] (offsets to pointers) and [`ring`]
//! (pointers to atomics); both are loom-tested under `--cfg loom`.

#![deny(unsafe_code)]

pub mod fdpass;
pub mod layout;
#[cfg(not(loom))]
#[expect(
    unsafe_code,
    reason = "offsets into the shared mapping become pointers and references"
)]
pub mod region;
#[expect(
    unsafe_code,
    reason = "a ring's indexes and entries are atomics in shared memory, reached by pointer"
)]
pub mod ring;
pub mod slot;
mod sync;
pub mod wake;

pub use layout::{
    Header, InstanceBlock, LAYOUT_VERSION, Layout, LayoutError, RegionConfig, RingId,
};
#[cfg(not(loom))]
pub use region::{HUGE_PAGE_BYTES, Region, RegionError};
pub use ring::{Consumer, Producer, RingError, RingMem, heap_ring};
pub use slot::{SlotMeta, SlotState, TransitionError};
#[cfg(not(loom))]
pub use wake::Doorbell;
pub use wake::{cancel_sleep, needs_kick, prepare_sleep, take_kick};
