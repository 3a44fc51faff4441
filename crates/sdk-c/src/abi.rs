//! The C ABI's types and the packet accessors: what the header declares.

use std::ffi::{c_char, c_void};

use vrhost_sdk::Packet;

/// A packet in its slot, as a C VR sees it: opaque, read and changed
/// through the `vrhost_packet_*` functions, valid only during the
/// callback it was given to.
pub struct VrhostPacket {
    _opaque: (),
}

/// A VR written in C: its callbacks, given to `vrhost_main`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct VrhostVr {
    /// Called once, before any packet, with the VR's config (JSON text,
    /// NUL-terminated; `null` when it has none). Returns the VR's state,
    /// handed back to every other callback, or NULL on an error, with a
    /// message written into `err` (`err_len` bytes, NUL included).
    pub init: Option<
        unsafe extern "C" fn(
            config_json: *const c_char,
            err: *mut c_char,
            err_len: usize,
        ) -> *mut c_void,
    >,
    /// Called for each packet, to change it in place: returns the vNIC to
    /// send it out of (`>= 0`) or a `VRHOST_DROP_*` code (`< 0`).
    pub process: Option<unsafe extern "C" fn(state: *mut c_void, pkt: *mut VrhostPacket) -> i32>,
    /// Optional (NULL: `process` for each packet): called with a whole
    /// burst of `n` packets (at most 64), to write each one's verdict into
    /// `verdicts[i]`, as `process` returns it.
    pub process_burst: Option<
        unsafe extern "C" fn(
            state: *mut c_void,
            pkts: *const *mut VrhostPacket,
            verdicts: *mut i32,
            n: usize,
        ),
    >,
    /// Optional (NULL: the VR takes no control messages): a control
    /// message from the host (JSON text, NUL-terminated). Writes its reply
    /// (JSON, NUL-terminated; empty: `null`) into `reply` (`reply_len`
    /// bytes) and returns 0, or writes an error message and returns
    /// non-zero.
    pub control: Option<
        unsafe extern "C" fn(
            state: *mut c_void,
            body_json: *const c_char,
            reply: *mut c_char,
            reply_len: usize,
        ) -> i32,
    >,
}

/// Drop: a malformed header.
pub const VRHOST_DROP_BAD_HEADER: i32 = -1;
/// Drop: a bad checksum.
pub const VRHOST_DROP_BAD_CHECKSUM: i32 = -2;
/// Drop: a protocol the VR does not handle.
pub const VRHOST_DROP_UNSUPPORTED: i32 = -3;
/// Drop: TTL or hop limit expired.
pub const VRHOST_DROP_TTL_EXPIRED: i32 = -4;
/// Drop: no route.
pub const VRHOST_DROP_NO_ROUTE: i32 = -5;
/// Drop: filtered by the VR's policy.
pub const VRHOST_DROP_FILTERED: i32 = -6;
/// Drop: any other reason (also what an unknown code counts as).
pub const VRHOST_DROP_OTHER: i32 = -7;
/// Drop: the next hop's address is not resolved yet.
pub const VRHOST_DROP_ARP_UNRESOLVED: i32 = -8;
/// Drop: the next hop could not be resolved.
pub const VRHOST_DROP_HOST_UNREACHABLE: i32 = -9;
/// Drop: addressed to the VR itself, and not something it answers.
pub const VRHOST_DROP_LOCAL_UNSUPPORTED: i32 = -10;
/// Not an error: the VR took what it needed and has nothing to send.
pub const VRHOST_DROP_CONSUMED: i32 = -11;
/// Drop: multicast a router does not forward.
pub const VRHOST_DROP_MULTICAST: i32 = -12;
/// Drop: a link-local address that would leave its link.
pub const VRHOST_DROP_LINK_LOCAL: i32 = -13;
/// Drop: IPv6 extension headers the VR is configured to drop.
pub const VRHOST_DROP_EXT_HEADER: i32 = -14;

/// The packet behind a C pointer.
///
/// # Safety
/// `pkt` is a pointer the runtime gave the current callback.
unsafe fn packet<'a>(pkt: *mut VrhostPacket) -> Option<&'a mut Packet<'a>> {
    // SAFETY: the caller's contract: null or a `Packet` of the current
    // burst, alive and not otherwise borrowed during the callback.
    unsafe { pkt.cast::<Packet<'a>>().as_mut() }
}

/// The packet's bytes (`*len` set to its length). NULL for a NULL packet.
///
/// # Safety
/// `pkt` was given to the current callback; `len` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vrhost_packet_data(pkt: *mut VrhostPacket, len: *mut usize) -> *mut u8 {
    // SAFETY: the caller's contract.
    let Some(p) = (unsafe { packet(pkt) }) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's contract: `len` is NULL or writable.
    if let Some(l) = unsafe { len.as_mut() } {
        *l = p.len();
    }
    p.data_mut().as_mut_ptr()
}

/// The packet's length in bytes (0 for a NULL packet).
///
/// # Safety
/// `pkt` was given to the current callback.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vrhost_packet_len(pkt: *mut VrhostPacket) -> usize {
    // SAFETY: the caller's contract.
    unsafe { packet(pkt) }.map_or(0, |p| p.len())
}

/// The vNIC the packet arrived on.
///
/// # Safety
/// `pkt` was given to the current callback.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vrhost_packet_rx_vnic(pkt: *mut VrhostPacket) -> u16 {
    // SAFETY: the caller's contract.
    unsafe { packet(pkt) }.map_or(0, |p| p.rx_vnic())
}

/// Grow the packet by `n` bytes at the front (an encapsulation header):
/// returns the new first byte, or NULL if the headroom is too small.
///
/// # Safety
/// `pkt` was given to the current callback.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vrhost_packet_push_front(pkt: *mut VrhostPacket, n: usize) -> *mut u8 {
    // SAFETY: the caller's contract.
    unsafe { packet(pkt) }
        .and_then(|p| p.push_front(n))
        .map_or(std::ptr::null_mut(), <[u8]>::as_mut_ptr)
}

/// Drop `n` bytes from the front (a decapsulation); false if the packet
/// is shorter.
///
/// # Safety
/// `pkt` was given to the current callback.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vrhost_packet_pull_front(pkt: *mut VrhostPacket, n: usize) -> bool {
    // SAFETY: the caller's contract.
    unsafe { packet(pkt) }.is_some_and(|p| p.pull_front(n))
}

/// Set the packet's length (within its slot); false if it does not fit.
///
/// # Safety
/// `pkt` was given to the current callback.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vrhost_packet_set_len(pkt: *mut VrhostPacket, len: usize) -> bool {
    // SAFETY: the caller's contract.
    unsafe { packet(pkt) }.is_some_and(|p| p.set_len(len))
}

/// Bytes in the packet's slot: headroom, packet and tailroom.
///
/// # Safety
/// `pkt` was given to the current callback.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vrhost_packet_capacity(pkt: *mut VrhostPacket) -> usize {
    // SAFETY: the caller's contract.
    unsafe { packet(pkt) }.map_or(0, |p| p.capacity())
}
