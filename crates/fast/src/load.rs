//! Loading the object and attaching its programs; [`PeerPass`].

use std::os::fd::AsFd;

use aya::programs::{ProgramError, Xdp};
use aya::{Ebpf, EbpfLoader};
use vrhost_io::af_xdp::XdpLink;

use crate::{
    ADDRS, AttachMode, COUNTERS, FastConfig, FastError, NEIGHBOURS, OUT_PORTS, SELECT, SRC_TABLES,
    VRS, XSK_PORTS, XSKS,
};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_router.o"));

/// The pass-through program for veth peers ([`PeerPass`]).
const PASS_PROGRAM: &str = "xdp_pass";

/// The index of interface `ifname` in the calling thread's network
/// namespace.
///
/// # Errors
/// [`FastError::NoSuchInterface`], or [`FastError::Os`] if no socket
/// could be made to ask.
pub fn ifindex(ifname: &str) -> Result<u32, FastError> {
    use rustix::net::{AddressFamily, SocketType, netdevice, socket};
    let s = socket(AddressFamily::INET, SocketType::DGRAM, None).map_err(|e| FastError::Os {
        call: "socket",
        source: e.into(),
    })?;
    netdevice::name_to_index(&s, ifname).map_err(|_| FastError::NoSuchInterface {
        ifname: ifname.to_string(),
    })
}

pub(crate) fn load_object(cfg: &FastConfig) -> Result<Ebpf, FastError> {
    if cfg.max_vrs == 0 || cfg.max_routes == 0 || cfg.max_select == 0 {
        return Err(FastError::Config {
            why: "max_vrs, max_routes and max_select must be > 0",
        });
    }
    crate::fib::Fib::check(cfg)?;
    let sizes = [
        (SELECT, cfg.max_select),
        (VRS, cfg.max_vrs),
        (ADDRS, cfg.max_addrs.max(1)),
        (SRC_TABLES, cfg.max_source_tables.max(1)),
        (NEIGHBOURS, cfg.max_neighbours.max(1)),
        (OUT_PORTS, cfg.max_ports.max(1)),
        (XSK_PORTS, cfg.max_ports.max(1)),
        (
            XSKS,
            cfg.max_ports.max(1).saturating_mul(cfg.max_queues.max(1)),
        ),
        (COUNTERS, cfg.max_vrs),
    ];
    let mut loader = EbpfLoader::new();
    for (name, n) in sizes.into_iter().chain(crate::fib::Fib::sizes(cfg)) {
        loader.map_max_entries(name, n);
    }
    loader.load(OBJECT).map_err(|e| FastError::Load {
        source: Box::new(e),
    })
}

pub(crate) fn program<'a>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut Xdp, FastError> {
    let err = |step, source| FastError::Program {
        program: name,
        step,
        source: Box::new(source),
    };
    ebpf.program_mut(name)
        .ok_or_else(|| {
            err(
                "find",
                ProgramError::InvalidName {
                    name: name.to_string(),
                },
            )
        })?
        .try_into()
        .map_err(|e| err("find", e))
}

/// Load `prog` (named `name`) into the kernel: the verifier's refusal,
/// with its log, is [`FastError::Program`] at step `load`.
pub(crate) fn load_xdp(prog: &mut Xdp, name: &'static str) -> Result<(), FastError> {
    prog.load().map_err(|source| FastError::Program {
        program: name,
        step: "load",
        source: Box::new(source),
    })
}

/// Find the program `name` in `ebpf` and load it ([`load_xdp`]).
pub(crate) fn load_program<'a>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut Xdp, FastError> {
    let prog = program(ebpf, name)?;
    load_xdp(prog, name)?;
    Ok(prog)
}

/// A descriptor of the loaded program `name` of its own (a cpumap or
/// devmap entry takes the program's descriptor, not its id).
pub(crate) fn program_fd(
    ebpf: &mut Ebpf,
    name: &'static str,
) -> Result<aya::programs::ProgramFd, FastError> {
    program(ebpf, name)?
        .fd()
        .map_err(|source| FastError::Program {
            program: name,
            step: "fd",
            source: Box::new(source),
        })?
        .try_clone()
        .map_err(|e| FastError::Os {
            call: "dup",
            source: e,
        })
}

/// The CPUs online now.
///
/// # Errors
/// [`FastError::Os`].
pub fn online_cpus() -> Result<Vec<u32>, FastError> {
    aya::util::online_cpus().map_err(|(_, e)| FastError::Os {
        call: "read /sys/devices/system/cpu/online",
        source: e,
    })
}

/// Attach the loaded `prog` to `ifindex`: native, else generic, through
/// an [`XdpLink`], which detaches it with `BPF_LINK_DETACH` when dropped
/// (aya's own links detach only when the last copy of their descriptor
/// is closed, and a child forked by another thread keeps one).
pub(crate) fn attach_either(
    prog: &mut Xdp,
    name: &'static str,
    ifname: &str,
    ifindex: u32,
) -> Result<XdpLink, FastError> {
    let fd = prog.fd().map_err(|source| FastError::Program {
        program: name,
        step: "attach",
        source: Box::new(source),
    })?;
    XdpLink::attach_native_else_generic(fd.as_fd(), ifindex).map_err(|(native, source)| {
        FastError::Attach {
            ifname: ifname.to_string(),
            native,
            source,
        }
    })
}

/// An XDP program that passes every frame, for the peer of a veth the
/// fast path redirects into: a veth delivers frames redirected to it
/// (`ndo_xdp_xmit`) only when its peer has an XDP program attached (or
/// GRO on, which gives it NAPI); otherwise the redirect fails and the
/// frame is dropped. Detached when dropped.
pub struct PeerPass {
    // Field order is drop order: detached, then unloaded.
    link: XdpLink,
    _ebpf: Ebpf,
}

impl std::fmt::Debug for PeerPass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerPass")
            .field("mode", &self.link.mode())
            .finish()
    }
}

impl PeerPass {
    /// Load `xdp_pass` and attach it to `ifname` (in the calling thread's
    /// namespace), native first.
    ///
    /// # Errors
    /// As [`crate::FastPath::load`] and [`crate::FastPath::attach`].
    pub fn attach(ifname: &str) -> Result<PeerPass, FastError> {
        let idx = ifindex(ifname)?;
        // The object's maps are created with it; keep them small.
        let cfg = FastConfig {
            max_vrs: 1,
            max_routes: 1,
            max_route_tables: 1,
            max_route_groups: 1,
            max_route_hops: 1,
            max_source_tables: 1,
            max_neighbours: 1,
            max_addrs: 1,
            max_select: 1,
            max_ports: 1,
            max_queues: 1,
        };
        let mut ebpf = load_object(&cfg)?;
        let prog = load_program(&mut ebpf, PASS_PROGRAM)?;
        let link = attach_either(prog, PASS_PROGRAM, ifname, idx)?;
        Ok(PeerPass { link, _ebpf: ebpf })
    }

    /// The mode obtained.
    pub fn mode(&self) -> AttachMode {
        self.link.mode()
    }
}
