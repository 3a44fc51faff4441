//! A VR's region: a sealed memfd mapped shared, with typed access to its parts.
//!
//! The host creates the region ([`Region::create`]): a memfd sized to the
//! layout, sealed against shrinking and growing (so a VR cannot truncate it
//! and make the host fault on access), mapped, with the header written. The
//! VR receives the fd and maps it ([`Region::attach`]), refusing a header of
//! another layout version.
//!
//! A region may instead live in reserved huge pages
//! ([`Region::create_huge`]: a `MFD_HUGETLB` memfd, its size rounded up to
//! whole 2 MiB pages), so that the host and the VR each reach a whole pool
//! through one or two TLB entries instead of one per 4 KiB page; the VR's
//! [`Region::attach`] is the same for both.
//!
//! This is one of the few modules with `unsafe`: it turns offsets into
//! pointers. Every offset comes from a [`Layout`] checked against the mapped
//! size, and every slot index passed in is bounds-checked here, so no caller
//! can reach outside the mapping whatever the peer writes into the region.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

use crate::layout::{Header, InstanceBlock, Layout, LayoutError, RegionConfig, RingId};
use crate::ring::RingMem;
use crate::slot::SlotMeta;
use crate::sync::AtomicU32;

/// Setting up or attaching a region failed.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    /// The layout is invalid or the header does not match.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A system call failed.
    #[error("{call} failed: {source}")]
    Syscall {
        /// The call.
        call: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// No huge page could back the region (none reserved, too few free,
    /// or a kernel without hugetlbfs).
    #[error(
        "no huge pages for a region of {bytes} bytes: {reason} (reserve them in /proc/sys/vm/nr_hugepages)"
    )]
    NoHugePages {
        /// The region's size, rounded up to whole huge pages.
        bytes: u64,
        /// What the kernel said.
        reason: std::io::Error,
    },
    /// The region is smaller than a header.
    #[error("region of {0} bytes is too small to hold a header")]
    TooSmall(u64),
}

fn sys<T>(call: &'static str, r: rustix::io::Result<T>) -> Result<T, RegionError> {
    r.map_err(|e| RegionError::Syscall {
        call,
        source: e.into(),
    })
}

/// The size of the huge pages [`Region::create_huge`] asks for (the
/// kernel's default on x86-64 and arm64 with 4 KiB base pages).
pub const HUGE_PAGE_BYTES: u64 = 2 << 20;

/// A shared mapping of a region's memfd, unmapped (and the fd closed) on
/// drop.
#[derive(Debug)]
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory; all access to it goes through
// atomics or raw-pointer copies that tolerate concurrent writers.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(fd: OwnedFd, len: usize) -> Result<Self, RegionError> {
        // SAFETY: a fresh mapping chosen by the kernel (null hint), so it
        // aliases no Rust object; the fd is a memfd of at least `len` bytes
        // that is sealed against shrinking (by us, or checked by the caller).
        let ptr = sys("mmap", unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        })?;
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(RegionError::TooSmall(0))?;
        Ok(Self { ptr, len, fd })
    }

    /// Pointer to `T` at `offset`.
    ///
    /// Callers pass offsets from a [`Layout`] validated against `len`;
    /// the debug assertion restates that.
    fn at<T>(&self, offset: u64) -> NonNull<T> {
        debug_assert!(offset as usize + size_of::<T>() <= self.len);
        debug_assert!((offset as usize).is_multiple_of(align_of::<T>()));
        // SAFETY: offset + size_of::<T>() <= len (layout invariant), so the
        // result stays inside the mapping.
        unsafe { self.ptr.add(offset as usize).cast() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we mapped exactly this range and nothing borrows it any
        // more: every borrower holds an Arc to us.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One VR's mapped region.
///
/// The mapping's address is kept in the region itself as well as in the
/// shared [`Mapping`]: every slot access starts from it, and
/// with many VRs a worker that had to follow the `Arc` first would miss one
/// more cache line per frame (the `Mapping` of each VR lies elsewhere on
/// the heap).
#[derive(Debug, Clone)]
pub struct Region {
    /// The mapping's first byte (`map.ptr`).
    base: NonNull<u8>,
    layout: Layout,
    map: Arc<Mapping>,
}

// SAFETY: `base` is a copy of `map`'s pointer, which is Send and Sync
// (plain shared memory reached through atomics or raw-pointer copies); the
// Arc keeps the mapping alive as long as the region.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    fn of(map: Mapping, layout: Layout) -> Self {
        Self {
            base: map.ptr,
            layout,
            map: Arc::new(map),
        }
    }

    /// Pointer to `T` at `offset` of the mapping, as [`Mapping::at`]
    /// without following the `Arc`.
    #[inline(always)]
    fn at<T>(&self, offset: u64) -> NonNull<T> {
        debug_assert!(offset as usize + size_of::<T>() <= self.map.len);
        debug_assert!((offset as usize).is_multiple_of(align_of::<T>()));
        // SAFETY: offset + size_of::<T>() <= len (layout invariant, as in
        // `Mapping::at`), so the result stays inside the mapping, which
        // `self.map` keeps alive.
        unsafe { self.base.add(offset as usize).cast() }
    }

    /// Create a region for `cfg` (host side). `name` shows in
    /// `/proc/PID/maps` and `/proc/PID/fd` as `memfd:vrhost-NAME`.
    ///
    /// # Errors
    /// [`RegionError::Layout`] for an invalid config, [`RegionError::Syscall`]
    /// if the memfd cannot be created, sized, sealed or mapped.
    pub fn create(name: &str, cfg: RegionConfig) -> Result<Self, RegionError> {
        let layout = Layout::new(cfg)?;
        let fd = sys(
            "memfd_create",
            rustix::fs::memfd_create(
                format!("vrhost-{name}"),
                MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
            ),
        )?;
        Self::finish(fd, layout.region_bytes, layout)
    }

    /// As [`Region::create`], in huge pages of [`HUGE_PAGE_BYTES`] taken
    /// from the kernel's reserved pool (`/proc/sys/vm/nr_hugepages`): the
    /// whole region is reserved when it is mapped here, so a pool short of
    /// pages fails now, not at a later fault. The memfd is its size
    /// rounded up to whole huge pages; the layout is unchanged.
    ///
    /// # Errors
    /// As [`Region::create`]; [`RegionError::NoHugePages`] when the kernel
    /// has no hugetlbfs or too few free huge pages.
    pub fn create_huge(name: &str, cfg: RegionConfig) -> Result<Self, RegionError> {
        let layout = Layout::new(cfg)?;
        let bytes = layout.region_bytes.next_multiple_of(HUGE_PAGE_BYTES);
        let no_pages = |e: rustix::io::Errno| RegionError::NoHugePages {
            bytes,
            reason: e.into(),
        };
        let fd = rustix::fs::memfd_create(
            format!("vrhost-{name}"),
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING | MemfdFlags::HUGETLB,
        )
        .map_err(no_pages)?;
        match Self::finish(fd, bytes, layout) {
            Err(RegionError::Syscall {
                call: "mmap",
                source,
            }) => Err(RegionError::NoHugePages {
                bytes,
                reason: source,
            }),
            other => other,
        }
    }

    /// Size `fd` to `bytes`, seal it, map it and write the header.
    fn finish(fd: OwnedFd, bytes: u64, layout: Layout) -> Result<Self, RegionError> {
        sys("ftruncate", rustix::fs::ftruncate(&fd, bytes))?;
        sys(
            "fcntl(F_ADD_SEALS)",
            rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL),
        )?;
        let map = Mapping::new(fd, bytes as usize)?;
        // SAFETY: offset 0 holds a Header (layout invariant), the memory is
        // fresh and nobody else has the fd yet.
        unsafe { map.at::<Header>(0).as_ptr().write(layout.header()) };
        // A fresh memfd is zero-filled: every slot is EMPTY (0), every ring
        // index 0, every instance flag clear.
        Ok(Self::of(map, layout))
    }

    /// Map a region received from the host (VR side) and check its header.
    ///
    /// # Errors
    /// [`RegionError::Layout`] if the header is of another version
    /// (naming both) or inconsistent; [`RegionError::Syscall`] if the fd
    /// cannot be inspected or mapped.
    pub fn attach(fd: OwnedFd) -> Result<Self, RegionError> {
        let stat = sys("fstat", rustix::fs::fstat(&fd))?;
        let size = stat.st_size as u64;
        if size < size_of::<Header>() as u64 {
            return Err(RegionError::TooSmall(size));
        }
        let seals = sys("fcntl(F_GET_SEALS)", rustix::fs::fcntl_get_seals(&fd))?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(RegionError::Layout(LayoutError::Inconsistent(
                "region is not sealed against shrinking",
            )));
        }
        let map = Mapping::new(fd, size as usize)?;
        // SAFETY: the mapping holds at least a Header (checked above); a
        // volatile read copies it out whatever the other side does.
        let header = unsafe { map.at::<Header>(0).as_ptr().read_volatile() };
        // A region in huge pages is its layout rounded up to whole pages
        // (hugetlbfs reports the page size as the block size).
        let page = match stat.st_blksize as u64 {
            b if b > 4096 => b,
            _ => 1,
        };
        let layout = Layout::from_header_padded(&header, size, page)?;
        Ok(Self::of(map, layout))
    }

    /// Whether the region lives in huge pages (its memfd is on hugetlbfs).
    /// Not for the hot path: it asks the kernel.
    pub fn huge_pages(&self) -> bool {
        rustix::fs::fstat(&self.map.fd).is_ok_and(|s| s.st_blksize as u64 >= HUGE_PAGE_BYTES)
    }

    /// The region's memfd, to pass to a VR process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.map.fd.as_fd()
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Number of slots.
    pub fn slot_count(&self) -> u32 {
        self.layout.cfg.slot_count
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> u32 {
        self.layout.cfg.slot_bytes
    }

    /// Metadata of `slot`, or `None` if the index is out of range.
    #[inline]
    pub fn meta(&self, slot: u32) -> Option<&SlotMeta> {
        if slot >= self.layout.cfg.slot_count {
            return None;
        }
        let off = self.layout.meta_offset + u64::from(slot) * size_of::<SlotMeta>() as u64;
        // SAFETY: slot < slot_count, so the SlotMeta lies in the meta array
        // inside the mapping; it is made of atomics, valid for any bits, and
        // lives as long as `self.map`.
        Some(unsafe { self.at::<SlotMeta>(off).as_ref() })
    }

    /// The shared block of `instance`, or `None` if out of range.
    pub fn instance(&self, instance: u16) -> Option<&InstanceBlock> {
        if instance >= self.layout.cfg.instance_count {
            return None;
        }
        // SAFETY: in range, so inside the instance array of the mapping; the
        // block is atomics and padding, valid for any bits.
        Some(unsafe {
            self.at::<InstanceBlock>(self.layout.instance_offset(instance))
                .as_ref()
        })
    }

    /// The words of a ring, or `None` if the instance or vNIC is out of range.
    pub fn ring(&self, instance: u16, id: RingId) -> Option<RingMem> {
        let c = &self.layout.cfg;
        let vnic_ok = match id {
            RingId::Rx(v) | RingId::Tx(v) => v < c.vnic_count,
            RingId::CtrlIn | RingId::CtrlOut => true,
        };
        if instance >= c.instance_count || !vnic_ok {
            return None;
        }
        let (off, entries) = self.layout.ring_offset(instance, id);
        let prod = self.at::<AtomicU32>(off);
        let cons = self.at::<AtomicU32>(off + Layout::RING_CONS_AT);
        let first = self.at::<AtomicU32>(off + Layout::RING_ENTRIES_AT);
        // SAFETY: the layout places prod, cons and `entries` u32 words inside
        // the mapping, 4-byte aligned; the Arc keeps the mapping alive as long
        // as the ring.
        Some(unsafe { RingMem::new(prod, cons, first, entries, self.map.clone()) })
    }

    /// Pointer to the first byte of `slot`, or `None` if out of range.
    #[inline]
    pub fn slot_ptr(&self, slot: u32) -> Option<NonNull<u8>> {
        (slot < self.layout.cfg.slot_count).then(|| self.at::<u8>(self.layout.slot_offset(slot)))
    }

    /// Hint the CPU to bring the metadata of `slot` and the cache line at
    /// `offset` in it into cache, so the misses of a batch overlap instead
    /// of coming one after the other. Out-of-range arguments do nothing;
    /// nothing is read or written.
    #[inline(always)]
    pub fn prefetch(&self, slot: u32, offset: u32) {
        #[cfg(target_arch = "x86_64")]
        if slot < self.layout.cfg.slot_count && offset < self.layout.cfg.slot_bytes {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let meta = self.layout.meta_offset + u64::from(slot) * size_of::<SlotMeta>() as u64;
            let data = self.layout.slot_offset(slot) + u64::from(offset);
            // SAFETY: both offsets lie inside the mapping (slot and offset
            // checked above, layout validated against the mapped size); a
            // prefetch never faults and touches no Rust-visible memory.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(self.at::<u8>(meta).as_ptr().cast());
                _mm_prefetch::<_MM_HINT_T0>(self.at::<u8>(data).as_ptr().cast());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (slot, offset);
    }

    /// Copy `data` into `slot` at `offset` (host, filling a slot it owns).
    /// Returns false, copying nothing, if it would not fit in the slot.
    #[inline]
    pub fn write_slot(&self, slot: u32, offset: u32, data: &[u8]) -> bool {
        let Some(base) = self.slot_ptr(slot) else {
            return false;
        };
        if offset as usize + data.len() > self.layout.cfg.slot_bytes as usize {
            return false;
        }
        // SAFETY: the range [offset, offset + len) is inside the slot (checked
        // above), hence inside the mapping; `data` is ordinary memory so the
        // ranges cannot overlap. A hostile VR writing the slot at the same time
        // can only garble its own packet.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                base.as_ptr().add(offset as usize),
                data.len(),
            );
        }
        true
    }

    /// Copy `frame` into `slot` at the region's headroom and record its extent
    /// in the slot's metadata (host, filling a slot it owns), as a VR expects
    /// a received packet. The slot's state is left to the caller. Returns
    /// false, writing nothing, if the slot index is bad or the frame does not
    /// fit after the headroom.
    #[inline]
    pub fn put_frame(&self, slot: u32, frame: &[u8]) -> bool {
        let headroom = self.layout.cfg.headroom;
        let (Ok(offset), Ok(len)) = (u16::try_from(headroom), u16::try_from(frame.len())) else {
            return false;
        };
        let Some(meta) = self.meta(slot) else {
            return false;
        };
        if !self.write_slot(slot, headroom, frame) {
            return false;
        }
        meta.set_extent(offset, len);
        true
    }

    /// The bytes `[offset, offset + len)` of `slot`, or `None` if they are not
    /// inside the slot.
    ///
    /// # Safety
    /// The caller must own the slot by the protocol and only copy the bytes
    /// out: a hostile VR may still write them concurrently, so the caller must
    /// not read them twice and expect the same value.
    #[inline]
    pub unsafe fn slot_bytes_at(&self, slot: u32, offset: u32, len: u32) -> Option<&[u8]> {
        let base = self.slot_ptr(slot)?;
        if u64::from(offset) + u64::from(len) > u64::from(self.layout.cfg.slot_bytes) {
            return None;
        }
        // SAFETY: in bounds (checked above); validity of the bytes under
        // concurrent writes is the caller's contract.
        Some(unsafe {
            std::slice::from_raw_parts(base.as_ptr().add(offset as usize), len as usize)
        })
    }

    /// The whole of `slot`, mutable (VR side, processing a packet in place).
    ///
    /// # Safety
    /// The caller must own the slot by the protocol (popped it from an rx
    /// ring and not yet pushed it to a tx ring) and hold no other reference
    /// to it.
    #[inline]
    #[expect(
        clippy::mut_from_ref,
        reason = "the bytes are shared memory, not part of self; exclusivity is the slot protocol's"
    )]
    pub unsafe fn slot_mut(&self, slot: u32) -> Option<&mut [u8]> {
        let base = self.slot_ptr(slot)?;
        // SAFETY: the slot lies inside the mapping; exclusivity is the
        // caller's contract.
        Some(unsafe {
            std::slice::from_raw_parts_mut(base.as_ptr(), self.layout.cfg.slot_bytes as usize)
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::slot::SlotState;

    #[test]
    fn put_frame_writes_at_the_headroom_and_records_the_extent() {
        let host = Region::create("pf", RegionConfig::default()).unwrap();
        let h = host.layout().cfg.headroom;
        assert!(host.put_frame(2, b"frame"));
        assert_eq!(host.meta(2).unwrap().extent(), (h as u16, 5));
        // SAFETY: test owns the slot; no concurrent writer.
        assert_eq!(unsafe { host.slot_bytes_at(2, h, 5) }.unwrap(), b"frame");
        let slot_bytes = host.layout().cfg.slot_bytes as usize;
        assert!(!host.put_frame(3, &vec![0; slot_bytes - h as usize + 1]));
        assert_eq!(host.meta(3).unwrap().extent(), (0, 0), "nothing written");
        assert!(!host.put_frame(host.slot_count(), b"frame"));
    }

    #[test]
    fn create_attach_share() {
        let host = Region::create("t", RegionConfig::default()).unwrap();
        let dup = host.fd().try_clone_to_owned().unwrap();
        let vr = Region::attach(dup).unwrap();
        assert_eq!(vr.layout(), host.layout());
        // Two mappings of the same memory at different addresses.
        assert!(host.write_slot(5, 128, b"hello"));
        // SAFETY: test owns the slot; no concurrent writer.
        let got = unsafe { vr.slot_bytes_at(5, 128, 5) }.unwrap();
        assert_eq!(got, b"hello");
        host.meta(5)
            .unwrap()
            .transition(SlotState::Empty, SlotState::Filled)
            .unwrap();
        assert_eq!(vr.meta(5).unwrap().state_raw(), SlotState::Filled as u32);
        let mut p = host.ring(0, RingId::Rx(1)).unwrap().producer();
        let mut c = vr.ring(0, RingId::Rx(1)).unwrap().consumer();
        p.push(&[5]).unwrap();
        let mut out = [0; 4];
        assert_eq!(c.pop(&mut out).unwrap(), 1);
        assert_eq!(out[0], 5);
    }

    #[test]
    fn out_of_range_accessors() {
        let r = Region::create(
            "t",
            RegionConfig {
                slot_count: 4,
                ring_entries: 4,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(r.meta(4).is_none());
        assert!(r.slot_ptr(u32::MAX).is_none());
        assert!(r.ring(1, RingId::Rx(0)).is_none());
        assert!(r.ring(0, RingId::Tx(2)).is_none());
        assert!(!r.write_slot(0, 2040, &[0; 16]));
        // SAFETY: bounds are refused before any access.
        assert!(unsafe { r.slot_bytes_at(0, 2000, 100) }.is_none());
    }

    /// Free huge pages of the default size, from `/proc/meminfo`.
    fn free_huge_pages() -> u64 {
        let info = std::fs::read_to_string("/proc/meminfo").unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("HugePages_Free:"))
            .map_or(0, |v| v.trim().parse().unwrap())
    }

    #[test]
    fn a_huge_region_attaches_like_any_or_says_no_pages_are_reserved() {
        let cfg = RegionConfig::default();
        let free = free_huge_pages();
        let host = match Region::create_huge("huge", cfg) {
            Ok(r) => r,
            Err(RegionError::NoHugePages { bytes, reason }) => {
                assert!(free < bytes / HUGE_PAGE_BYTES, "{free} free: {reason}");
                assert!(!Region::create("small", cfg).unwrap().huge_pages());
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert!(host.huge_pages());
        let size = rustix::fs::fstat(host.fd()).unwrap().st_size as u64;
        assert_eq!(
            size,
            host.layout().region_bytes.next_multiple_of(HUGE_PAGE_BYTES)
        );
        let vr = Region::attach(host.fd().try_clone_to_owned().unwrap()).unwrap();
        assert_eq!(vr.layout(), host.layout());
        assert!(host.put_frame(1023, b"last slot"));
        let h = host.layout().cfg.headroom;
        // SAFETY: test owns the slot; no concurrent writer.
        let got = unsafe { vr.slot_bytes_at(1023, h, 9) }.unwrap();
        assert_eq!(got, b"last slot");
        assert!(
            rustix::fs::ftruncate(host.fd(), size * 2).is_err(),
            "sealed"
        );
    }

    #[test]
    fn sealed_against_resize() {
        let r = Region::create("t", RegionConfig::default()).unwrap();
        assert!(rustix::fs::ftruncate(r.fd(), 4096).is_err());
        assert!(rustix::fs::ftruncate(r.fd(), r.layout().region_bytes * 2).is_err());
    }

    #[test]
    fn attach_refuses_other_version() {
        let r = Region::create("t", RegionConfig::default()).unwrap();
        // Overwrite the version field in the header.
        let p = r.map.at::<Header>(0).as_ptr();
        // SAFETY: the header is at offset 0 of our own mapping; no other user.
        unsafe { (*p).version = 7 };
        let e = Region::attach(r.fd().try_clone_to_owned().unwrap()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("version 7")
                && msg.contains(&format!("layout version {}", crate::LAYOUT_VERSION)),
            "{msg}"
        );
    }
}
