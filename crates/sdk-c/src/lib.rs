//! vrhost-sdk-c: the VR SDK for C. A tenant who does not write Rust writes
//! a VR in C against `include/vrhost_sdk.h` and links `libvrhost_sdk_c.a`
//! (this crate's static library): the same runtime, region, rings,
//! back-off and control channel as a Rust VR (`vrhost-sdk`), behind a C
//! ABI of a few functions.
//!
//! What it owns: the C ABI ([`VrhostVr`], the table of a VR's callbacks,
//! [`vrhost_main`], the packet accessors `vrhost_packet_*`, the verdict
//! codes `VRHOST_DROP_*`) and the header generated from it by cbindgen
//! (`tests/header.rs` checks that the committed header is current). An
//! example VR in C is `examples/c/udp_filter_bridge.c`; the tests build it
//! with the system's C compiler and run it as a VR of a daemon.
//!
//! The contract, as the header says it: `init` is called once with the
//! VR's config (JSON) and returns the VR's state; `process` (or
//! `process_burst`) is called for packets in place, and returns a
//! verdict: a vNIC index (`>= 0`) to send the packet out of, or a negative
//! `VRHOST_DROP_*` code; a `VrhostPacket` pointer is valid only during the
//! call it is given to. Nothing a callback returns is trusted: an
//! out-of-range vNIC is the host's to refuse (counted there, as for a Rust
//! VR), an unknown negative code is a drop as `other`.

use std::ffi::{CString, c_char, c_void};

use vrhost_sdk::{DropReason, Packet, Verdict, Vr};

mod abi;

pub use abi::*;

/// A VR whose callbacks are C functions.
struct CVr {
    state: *mut c_void,
    process: ProcessFn,
    process_burst: Option<BurstFn>,
    control: Option<ControlFn>,
    /// The reply buffer of `control`.
    reply: Vec<u8>,
}

type ProcessFn = unsafe extern "C" fn(*mut c_void, *mut VrhostPacket) -> i32;
type BurstFn = unsafe extern "C" fn(*mut c_void, *const *mut VrhostPacket, *mut i32, usize);
type ControlFn = unsafe extern "C" fn(*mut c_void, *const c_char, *mut c_char, usize) -> i32;

/// Most bytes a control reply may have (with its NUL).
const REPLY_BYTES: usize = 64 * 1024;

/// The verdict of a C callback's return value.
fn verdict(code: i32) -> Verdict {
    match u16::try_from(code) {
        Ok(vnic) => Verdict::Forward(vnic),
        Err(_) if code >= 0 => Verdict::Drop(DropReason::Other),
        Err(_) => {
            let i = usize::try_from(-(i64::from(code)) - 1).unwrap_or(usize::MAX);
            Verdict::Drop(DropReason::ALL.get(i).copied().unwrap_or(DropReason::Other))
        }
    }
}

fn packet_ptr(p: &mut Packet<'_>) -> *mut VrhostPacket {
    std::ptr::from_mut(p).cast()
}

impl Vr for CVr {
    fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
        // SAFETY: `process` came from the C VR's table (checked non-null by
        // `vrhost_main`); the packet pointer is valid for the call, as the
        // header's contract says, and `state` is what its `init` returned.
        verdict(unsafe { (self.process)(self.state, packet_ptr(pkt)) })
    }

    fn process_burst(&mut self, pkts: &mut [Packet<'_>], verdicts: &mut [Verdict]) {
        let Some(burst) = self.process_burst else {
            for (p, v) in pkts.iter_mut().zip(verdicts.iter_mut()) {
                *v = self.process(p);
            }
            return;
        };
        const CHUNK: usize = 64;
        for (pkts, verdicts) in pkts.chunks_mut(CHUNK).zip(verdicts.chunks_mut(CHUNK)) {
            let n = pkts.len().min(verdicts.len());
            let mut ptrs = [std::ptr::null_mut::<VrhostPacket>(); CHUNK];
            let mut codes = [0i32; CHUNK];
            for (slot, p) in ptrs.iter_mut().zip(pkts.iter_mut()) {
                *slot = packet_ptr(p);
            }
            // SAFETY: as in `process`; `ptrs` and `codes` hold `n` valid
            // entries each, alive for the call.
            unsafe { burst(self.state, ptrs.as_ptr(), codes.as_mut_ptr(), n) };
            for (v, &c) in verdicts.iter_mut().zip(&codes[..n]) {
                *v = verdict(c);
            }
        }
    }

    fn prefers_burst(&self) -> bool {
        self.process_burst.is_some()
    }

    fn control(&mut self, body: &serde_json::Value) -> Result<serde_json::Value, String> {
        let Some(control) = self.control else {
            return Err("this VR takes no control messages".into());
        };
        let body = CString::new(body.to_string()).map_err(|e| format!("control body: {e}"))?;
        self.reply.clear();
        self.reply.resize(REPLY_BYTES, 0);
        // SAFETY: as in `process`; `body` is NUL-terminated, the reply
        // buffer is `REPLY_BYTES` long and the callback is told so.
        let rc = unsafe {
            control(
                self.state,
                body.as_ptr(),
                self.reply.as_mut_ptr().cast(),
                REPLY_BYTES,
            )
        };
        let text = nul_terminated(&self.reply);
        match rc {
            0 if text.trim().is_empty() => Ok(serde_json::Value::Null),
            0 => serde_json::from_str(&text).map_err(|e| format!("control reply is not JSON: {e}")),
            _ => Err(text),
        }
    }
}

/// The text of a buffer a C function wrote a NUL-terminated string into
/// (up to its end if it wrote no NUL), lossily decoded.
fn nul_terminated(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Build the C VR from its table and the host's hello.
fn build(table: &VrhostVr, config: &serde_json::Value) -> Result<CVr, String> {
    let (Some(init), Some(process)) = (table.init, table.process) else {
        return Err("the VR's table needs init and process".into());
    };
    let config = CString::new(config.to_string()).map_err(|e| format!("config: {e}"))?;
    let mut err = [0u8; 512];
    // SAFETY: `init` is the C VR's own function; `config` is
    // NUL-terminated and `err` is as long as the call is told.
    let state = unsafe { init(config.as_ptr(), err.as_mut_ptr().cast(), err.len()) };
    if state.is_null() {
        let e = nul_terminated(&err);
        return Err(if e.is_empty() {
            "init failed".into()
        } else {
            e
        });
    }
    Ok(CVr {
        state,
        process,
        process_burst: table.process_burst,
        control: table.control,
        reply: Vec::new(),
    })
}

/// Run a VR written in C: attach to the region the host gave this process,
/// call `vr->init` with the VR's config, report ready, and poll until the
/// host stops the VR. Returns 0 when the host stopped it, 1 on an error
/// (printed on stderr and reported to the host).
///
/// # Safety
/// `vr` points to a valid `VrhostVr` whose non-null members are functions
/// that keep the header's contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn vrhost_main(vr: *const VrhostVr) -> i32 {
    // SAFETY: the caller's contract: `vr` is null or valid.
    let Some(table) = (unsafe { vr.as_ref() }) else {
        eprintln!("vrhost VR: vrhost_main(NULL)");
        return 1;
    };
    let table = *table;
    let run = vrhost_sdk::runtime::run(|hello| build(&table, &hello.config));
    match run {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("vrhost VR: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests;
