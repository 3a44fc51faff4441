//! An mmapable BPF array map's values seen from user space ([`Mapped`]):
//! the fast path's FIB arrays (`crate::fib`), which user space writes with
//! atomic stores while the program reads them.
//!
//! The one module of the crate with raw system calls (`mmap`, `munmap`)
//! and a slice made from a pointer, hence unsafe code.
#![allow(
    unsafe_code,
    reason = "mmap of a map's values, and the slice of atomics over it"
)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// The values of a `BPF_F_MMAPABLE` array map of `u32`, mapped shared
/// into this process: stores here are what the program loads. Unmapped
/// when dropped (the kernel keeps the map while a mapping holds it).
pub(crate) struct Mapped {
    ptr: NonNull<AtomicU32>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory reached only as atomics;
// nothing in it is tied to a thread.
unsafe impl Send for Mapped {}
// SAFETY: as above: `&Mapped` only gives `&[AtomicU32]`.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Map the `len` `u32` values of the array map `fd` (its
    /// `max_entries`; the map must be mmapable).
    pub(crate) fn new(fd: BorrowedFd<'_>, len: usize) -> io::Result<Self> {
        let bytes = len
            .checked_mul(4)
            .filter(|b| *b > 0)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a fresh shared mapping of the map's values (offset 0,
        // `bytes` within the map's size); the kernel picks the address,
        // so no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<AtomicU32>())
            .ok_or_else(|| io::Error::from(io::ErrorKind::AddrNotAvailable))?;
        Ok(Mapped { ptr, len })
    }

    /// The values, as atomics (the program reads them concurrently).
    pub(crate) fn values(&self) -> &[AtomicU32] {
        // SAFETY: `ptr` is a live mapping of `len` u32 values (page
        // aligned, so aligned for AtomicU32), readable and writable, for
        // as long as `self`; all access goes through atomics.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The values as 8-byte atomics (`len / 2` of them), for a map whose
    /// value holds `u64` fields at 8-byte offsets.
    pub(crate) fn values64(&self) -> &[AtomicU64] {
        // SAFETY: as in `values`: the same live mapping, page aligned and
        // so aligned for AtomicU64, `len / 2` of them fit in its
        // `len * 4` bytes; all access goes through atomics (a word is
        // never also reached as two halves: callers use one view per
        // field).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<AtomicU64>(), self.len / 2) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of this length; no reference
        // into it outlives `self` (`values` borrows `self`).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len * 4);
        }
    }
}
