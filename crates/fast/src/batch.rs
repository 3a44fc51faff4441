//! Map updates and deletes by the batch (`BPF_MAP_UPDATE_BATCH`,
//! `BPF_MAP_DELETE_BATCH`): one `bpf(2)` call for many entries, which aya
//! does not offer. The kernel loops over the entries itself
//! (`generic_map_update_batch`, the LPM trie's since Linux 5.6), so a full
//! table goes in with a few calls instead of one per route.
//!
//! The one module of the crate with a raw system call, hence unsafe code.
#![allow(
    unsafe_code,
    reason = "the bpf(2) system call: libc::syscall with a bpf_attr it reads"
)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `BPF_MAP_UPDATE_BATCH` (`enum bpf_cmd`).
const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;
/// `BPF_MAP_DELETE_BATCH`.
const BPF_MAP_DELETE_BATCH: libc::c_long = 27;

/// `union bpf_attr`'s `batch` member (the kernel zero-extends a shorter
/// attr, and checks that what it does not know is zero).
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// What a batch call did: how many entries it processed, and the error
/// that stopped it, if any.
pub(crate) struct Done {
    pub(crate) count: usize,
    pub(crate) err: Option<io::Error>,
}

fn call(cmd: libc::c_long, mut attr: BatchAttr) -> Done {
    let want = attr.count as usize;
    // SAFETY: `attr` is a valid `bpf_attr` batch member of the size
    // passed; the key and value pointers in it point at `count` entries
    // each of the map's key and value sizes (the callers' slices, alive
    // for the call), which the kernel only reads. `count` is written
    // back into `attr`, which lives until after the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            std::ptr::from_mut(&mut attr),
            size_of::<BatchAttr>() as libc::c_uint,
        )
    };
    if r == 0 {
        Done {
            count: want,
            err: None,
        }
    } else {
        Done {
            count: (attr.count as usize).min(want),
            err: Some(io::Error::last_os_error()),
        }
    }
}

/// Update the entries `keys[i]` -> `values[i]` of map `fd` in one call.
/// `K` and `V` must be the map's key and value layouts (plain data).
pub(crate) fn update<K: Copy, V: Copy>(fd: BorrowedFd<'_>, keys: &[K], values: &[V]) -> Done {
    assert_eq!(keys.len(), values.len(), "one value per key");
    call(
        BPF_MAP_UPDATE_BATCH,
        BatchAttr {
            keys: keys.as_ptr() as u64,
            values: values.as_ptr() as u64,
            count: keys.len() as u32,
            map_fd: fd.as_raw_fd() as u32,
            ..BatchAttr::default()
        },
    )
}

/// Delete the entries `keys` of map `fd` in one call (it stops at the
/// first key that is not there: `ENOENT`, with the count before it).
pub(crate) fn delete<K: Copy>(fd: BorrowedFd<'_>, keys: &[K]) -> Done {
    call(
        BPF_MAP_DELETE_BATCH,
        BatchAttr {
            keys: keys.as_ptr() as u64,
            count: keys.len() as u32,
            map_fd: fd.as_raw_fd() as u32,
            ..BatchAttr::default()
        },
    )
}

/// Whether the kernel lacks the batch operation for the map (then the
/// caller goes entry by entry).
pub(crate) fn unsupported(e: &io::Error) -> bool {
    // ENOTSUPP (524) is the kernel's own, not in libc.
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EOPNOTSUPP | 524)
    )
}
