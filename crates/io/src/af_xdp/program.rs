//! The port's own XDP program (`ebpf/xdp_redirect.c`): loading it with
//! maps sized for the port, attaching it to the interface (native, else
//! generic), and taking out the maps the port keeps (the XSKMAP, the
//! redirect counter).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use aya::maps::{MapData, PerCpuArray, XskMap};
use aya::programs::{ProgramError, Xdp};
use aya::{Ebpf, EbpfLoader};

use super::config::{AfXdpError, AttachMode};
use super::sys::XdpLink;
use super::{sys, txlive};

/// The XDP program, compiled from `ebpf/xdp_redirect.c` by `build.rs`.
static XDP_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_redirect.o"));
/// Its program (section `xdp`) and maps.
pub(super) const PROGRAM: &str = "xdp_redirect_xsk";
const XSK_MAP: &str = "xsks";
const COUNTER_MAP: &str = "redirected";

/// The port's own XDP program ([`XdpProgram::Own`]). Field order is drop
/// order: the link (the attachment to the interface) goes first, so no
/// frame is redirected to a closing socket, then the program and its maps.
pub(super) struct OwnProgram {
    _link: XdpLink,
    pub(super) bpf: Ebpf,
    pub(super) xsks: XskMap<MapData>,
    pub(super) counter: PerCpuArray<MapData, u64>,
}

impl OwnProgram {
    /// Load `ebpf/xdp_redirect.c` with an XSKMAP of `queues` entries and
    /// attach it to `ifindex` in mode `want` (`None`: native, else
    /// generic). Returns it and the mode obtained.
    pub(super) fn attach(
        ifname: &str,
        ifindex: u32,
        (queues, slots): (u32, u32),
        want: Option<AttachMode>,
    ) -> Result<(OwnProgram, AttachMode), AfXdpError> {
        let mut bpf = load_program(ifname, queues, slots)?;
        let prog_fd = program_fd(&mut bpf, ifname, PROGRAM)?;
        let link = attach(prog_fd, ifindex, want, ifname)?;
        let attach = link.mode();
        let (xsks, counter) = take_maps(&mut bpf, ifname)?;
        let own = OwnProgram {
            _link: link,
            bpf,
            xsks,
            counter,
        };
        Ok((own, attach))
    }
}

/// The XDP program and its maps, loaded into the kernel with an XSKMAP of
/// `queues` entries and `slots` transmit slots (not yet attached).
fn load_program(ifname: &str, queues: u32, slots: u32) -> Result<Ebpf, AfXdpError> {
    EbpfLoader::new()
        .map_max_entries(XSK_MAP, queues)
        .map_max_entries(txlive::FRAMES_MAP, slots)
        .load(XDP_OBJECT)
        .map_err(|e| AfXdpError::Load {
            ifname: ifname.to_string(),
            source: Box::new(e),
        })
}

/// The descriptor of `bpf`'s XDP program `name`, verified and loaded.
fn program_fd<'a>(
    bpf: &'a mut Ebpf,
    ifname: &str,
    name: &str,
) -> Result<BorrowedFd<'a>, AfXdpError> {
    let load_err = |e: ProgramError| AfXdpError::Load {
        ifname: ifname.to_string(),
        source: Box::new(e.into()),
    };
    let prog: &mut Xdp = bpf
        .program_mut(name)
        .ok_or_else(|| load_err(ProgramError::InvalidName { name: name.into() }))?
        .try_into()
        .map_err(load_err)?;
    prog.load().map_err(load_err)?;
    Ok(prog.fd().map_err(load_err)?.as_fd())
}

/// The program's XSKMAP and per-CPU redirect counter, taken out of `bpf`.
fn take_maps(
    bpf: &mut Ebpf,
    ifname: &str,
) -> Result<(XskMap<MapData>, PerCpuArray<MapData, u64>), AfXdpError> {
    let missing = |m: &str| aya::maps::MapError::InvalidName {
        name: m.to_string(),
    };
    let xsks: XskMap<MapData> = bpf
        .take_map(XSK_MAP)
        .ok_or_else(|| missing(XSK_MAP))
        .and_then(TryInto::try_into)
        .map_err(|e| map_error(ifname, e))?;
    let counter: PerCpuArray<MapData, u64> = bpf
        .take_map(COUNTER_MAP)
        .ok_or_else(|| missing(COUNTER_MAP))
        .and_then(TryInto::try_into)
        .map_err(|e| map_error(ifname, e))?;
    Ok((xsks, counter))
}

/// [`AfXdpError::Map`] for interface `ifname`.
pub(super) fn map_error(ifname: &str, e: aya::maps::MapError) -> AfXdpError {
    AfXdpError::Map {
        ifname: ifname.to_string(),
        source: Box::new(e),
    }
}

/// Attach the loaded program `prog` to `ifindex` in the mode asked for,
/// or native then generic, through an [`XdpLink`] (which detaches it for
/// good when the port drops it; see its docs for why not aya's link).
fn attach(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    want: Option<AttachMode>,
    ifname: &str,
) -> Result<XdpLink, AfXdpError> {
    match want {
        Some(mode) => XdpLink::attach(prog, ifindex, mode).map_err(|source| AfXdpError::Attach {
            ifname: ifname.to_string(),
            mode,
            source,
        }),
        None => XdpLink::attach_native_else_generic(prog, ifindex).map_err(|(native, source)| {
            AfXdpError::AttachEither {
                ifname: ifname.to_string(),
                native,
                source,
            }
        }),
    }
}

/// The rx queue count of `ifname`: ethtool's channels, else
/// `/sys/class/net/IF/queues` when this thread's namespace is the
/// process's (a thread that entered another namespace still sees the
/// sysfs of the one that mounted it), else 1.
pub(super) fn rx_queues(ifname: &str, cname: &CString) -> io::Result<u32> {
    match sys::rx_queue_count(cname) {
        Ok(n) if n > 0 => return Ok(n),
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
        Err(e) => return Err(e),
    }
    use std::os::unix::fs::MetadataExt;
    let ns = |p: &str| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    let own_sysfs = ns("/proc/self/ns/net").is_some()
        && ns("/proc/self/ns/net") == ns("/proc/thread-self/ns/net");
    let n = match std::fs::read_dir(format!("/sys/class/net/{ifname}/queues")) {
        Ok(dir) if own_sysfs => dir
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
            .count() as u32,
        _ => 0,
    };
    Ok(n.max(1))
}
