//! Where a port's UMEM lives: its own anonymous mapping, or an area the
//! caller lends it ([`UmemArea`]), such as the packet pool of the one VR a
//! dedicated port serves, so that the kernel writes a received frame where
//! that VR reads it and sends a frame from where the VR wrote it.

use std::fmt;
use std::ptr::NonNull;

use super::sys::Mmap;

/// Memory the caller lends a port as its UMEM (see
/// [`super::AfXdpPort::open_on`]): `len` bytes at `ptr`, kept mapped by
/// `keep` (the owner of the mapping, such as a clone of a VR's region)
/// for as long as the port lives.
pub struct UmemArea {
    ptr: NonNull<u8>,
    len: usize,
    _keep: Box<dyn Send + Sync>,
}

impl fmt::Debug for UmemArea {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UmemArea")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

// SAFETY: the area is plain memory that `keep` (Send + Sync) keeps
// mapped; the port reaches it only through raw pointers.
unsafe impl Send for UmemArea {}

impl UmemArea {
    /// The area of `len` bytes at `ptr`, kept mapped by `keep`.
    ///
    /// # Safety
    /// `ptr..ptr + len` is a page-aligned, read-write, shared or private
    /// mapping that stays mapped while `keep` lives, and that no Rust
    /// reference of this process points into while the port lives (other
    /// processes may write it: the port hands frames out as copies or as
    /// frame indexes, and what it reads from the area it checks).
    pub unsafe fn new(ptr: NonNull<u8>, len: usize, keep: Box<dyn Send + Sync>) -> UmemArea {
        UmemArea {
            ptr,
            len,
            _keep: keep,
        }
    }

    /// Start of the area.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A socket's UMEM: its own mapping, or a lent area.
#[derive(Debug)]
pub(super) enum Umem {
    /// An anonymous mapping the socket made.
    Own(Mmap),
    /// The caller's area.
    Lent(UmemArea),
}

impl Umem {
    /// Start of the UMEM.
    pub(super) fn ptr(&self) -> *mut u8 {
        match self {
            Umem::Own(m) => m.ptr(),
            Umem::Lent(a) => a.ptr(),
        }
    }
}
