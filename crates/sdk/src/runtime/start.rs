//! A VR process's start: its handshake with the host over the control
//! socket, its name and core, its panic report, and [`run`]/[`main`].

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use vrhost_shm::fdpass::{recv_with_fds, send_with_fds};
use vrhost_shm::{Doorbell, LAYOUT_VERSION, Region};

use super::{Instance, RuntimeError};
use crate::proto::{CTRL_FD_ENV, Hello, MAX_MSG, VrReply};
use crate::sdk::Vr;

pub(super) fn pin_to(cpu: usize) -> Result<(), RuntimeError> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| RuntimeError::Setup(format!("pin to CPU {cpu}: {e}")))
}

/// What a VR process has once the host has said hello: the hello itself,
/// the mapped region, the two doorbells and the control socket. The
/// process answers on [`Handshake::ctrl`] with [`CtrlSocket::ready`] or
/// [`CtrlSocket::reply_error`], then serves the socket as it likes (the
/// SDK's loop: [`Instance::run`]).
#[derive(Debug)]
pub struct Handshake {
    /// The host's hello.
    pub hello: Hello,
    /// The region, mapped and its header checked.
    pub region: Region,
    /// The doorbell the host rings to wake this instance.
    pub vr_bell: Doorbell,
    /// The host's doorbell (rung when the host sleeps and there is work).
    pub host_bell: Doorbell,
    /// Our end of the control socket.
    pub ctrl: CtrlSocket,
}

/// A VR instance's end of its control socket (blocking until
/// [`CtrlSocket::ready`]).
#[derive(Debug)]
pub struct CtrlSocket(OwnedFd);

impl CtrlSocket {
    /// The descriptor, to poll or to read [`crate::proto::HostMsg`]s from.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    fn reply(&self, r: &VrReply) {
        let _ = send_with_fds(
            self.0.as_fd(),
            &serde_json::to_vec(r).unwrap_or_default(),
            &[],
        );
    }

    /// Tell the host this instance is attached and polling, and make the
    /// socket non-blocking (an instance looks at it between rounds and
    /// must never wait on it).
    pub fn ready(&self) {
        self.reply(&VrReply::Ready {
            pid: rustix::process::getpid().as_raw_nonzero().get() as u32,
        });
        let _ = rustix::io::ioctl_fionbio(&self.0, true);
    }

    /// Tell the host this instance cannot start, and why.
    pub fn reply_error(&self, e: &RuntimeError) {
        self.reply(&VrReply::Error {
            message: e.to_string(),
        });
    }

    /// From now on a panic anywhere in the process is also told to the
    /// host ([`VrReply::Panicked`]: where and what) before the previous
    /// hook runs (the default one prints it on stderr) and the process
    /// dies. The host names it in its log with the VR's exit. The hook
    /// writes to this socket's own descriptor while the socket lives (no
    /// copy: a VR holds no descriptor but those the host gave it).
    pub fn report_panics(&self) {
        PANIC_FD.store(self.0.as_raw_fd(), Ordering::Release);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            report_panic(info);
            previous(info);
        }));
    }
}

impl Drop for CtrlSocket {
    fn drop(&mut self) {
        // Before the descriptor closes (the field drops after this): the
        // hook must not write to a number the process may reuse.
        let _ =
            PANIC_FD.compare_exchange(self.0.as_raw_fd(), -1, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// The control socket's descriptor while a [`CtrlSocket`] that reports
/// panics lives; -1 otherwise.
static PANIC_FD: AtomicI32 = AtomicI32::new(-1);

/// Send `info` to the host as [`VrReply::Panicked`], if a control socket
/// is there.
pub(super) fn report_panic(info: &std::panic::PanicHookInfo<'_>) {
    let fd = PANIC_FD.load(Ordering::Acquire);
    if fd < 0 {
        return;
    }
    let what = info.payload_as_str().unwrap_or("Box<dyn Any>");
    let mut message = match info.location() {
        Some(l) => format!("panicked at {l}: {what}"),
        None => format!("panicked: {what}"),
    };
    // One control message; keep room for the JSON around it.
    if message.len() > MAX_MSG / 2 {
        let mut end = MAX_MSG / 2;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    let msg = serde_json::to_vec(&VrReply::Panicked { message }).unwrap_or_default();
    // SAFETY: `fd` is the descriptor of a live `CtrlSocket`: it is stored
    // by `report_panics` and taken back (-1) in `CtrlSocket::drop` before
    // the descriptor is closed; the borrow ends with this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let _ = send_with_fds(fd, &msg, &[]);
}

/// The first half of a VR process's life: take the control socket from the
/// environment, receive the hello with the region and the doorbells, check
/// the layout version, map the region, pin to the hello's CPU. A hello that
/// cannot be used is answered with an error here; the caller answers the
/// rest ([`CtrlSocket::ready`] or [`CtrlSocket::reply_error`]).
///
/// # Errors
/// [`RuntimeError`] saying what failed (the host is told too when it can be).
pub fn handshake() -> Result<Handshake, RuntimeError> {
    // Before the region arrives: other processes of our uid (other VRs run
    // as `nobody` too) must not reach it through /proc/<pid>/fd, nor our
    // memory through /proc/<pid>/mem or ptrace.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    let raw: i32 = std::env::var(CTRL_FD_ENV)
        .map_err(|_| RuntimeError::NoCtrl(format!("{CTRL_FD_ENV} is not set")))?
        .parse()
        .map_err(|_| RuntimeError::NoCtrl(format!("{CTRL_FD_ENV} is not a number")))?;
    if rustix::io::fcntl_getfd(
        // SAFETY: probing an fd number for validity; the borrow ends here.
        unsafe { BorrowedFd::borrow_raw(raw) },
    )
    .is_err()
    {
        return Err(RuntimeError::NoCtrl(format!(
            "descriptor {raw} is not open"
        )));
    }
    // SAFETY: the host placed our end of the control socket at `raw` for us
    // alone (checked open above); we take ownership once.
    let ctrl = CtrlSocket(unsafe { OwnedFd::from_raw_fd(raw) });
    let mut buf = vec![0u8; MAX_MSG];
    let (n, mut fds) = recv_with_fds(ctrl.fd(), &mut buf)?;
    let result = (|| {
        let hello: Hello =
            serde_json::from_slice(&buf[..n]).map_err(|e| RuntimeError::BadHello(e.to_string()))?;
        if hello.layout_version != LAYOUT_VERSION {
            return Err(RuntimeError::Version {
                host: hello.layout_version,
                ours: LAYOUT_VERSION,
            });
        }
        if fds.len() != 3 {
            return Err(RuntimeError::BadHello(format!(
                "expected 3 descriptors, got {}",
                fds.len()
            )));
        }
        let host_bell = Doorbell::from_fd(fds.pop().expect("3 fds"));
        let vr_bell = Doorbell::from_fd(fds.pop().expect("3 fds"));
        let region = Region::attach(fds.pop().expect("3 fds"))?;
        if let Some(cpu) = hello.cpu {
            pin_to(cpu)?;
        }
        // The host starts us through a descriptor, so the kernel named us
        // after its number; `ps`, `top` and `perf` should show the VR.
        let _ = rustix::thread::set_name(&task_name(&hello.vr, hello.instance));
        Ok((hello, region, vr_bell, host_bell))
    })();
    match result {
        Ok((hello, region, vr_bell, host_bell)) => Ok(Handshake {
            hello,
            region,
            vr_bell,
            host_bell,
            ctrl,
        }),
        Err(e) => {
            ctrl.reply_error(&e);
            Err(e)
        }
    }
}

/// The task name of instance `instance` of VR `vr`: `vr.instance`, cut to
/// the kernel's 15 bytes (keeping the instance, at a character boundary).
pub(super) fn task_name(vr: &str, instance: u16) -> std::ffi::CString {
    let suffix = format!(".{instance}");
    let mut cut = 15usize.saturating_sub(suffix.len()).min(vr.len());
    while !vr.is_char_boundary(cut) {
        cut -= 1;
    }
    let name: String = vr[..cut].chars().filter(|&c| c != '\0').collect();
    std::ffi::CString::new(name + &suffix).expect("no NUL left")
}

/// The whole life of a VR process: [`handshake`] with the host, build the
/// VR with `build`, report ready, poll until told to stop. A custom VR's
/// `main` is one call:
///
/// ```no_run
/// # use vrhost_sdk::{Packet, Verdict, Vr};
/// struct Bridge;
/// impl Vr for Bridge {
///     fn process(&mut self, pkt: &mut Packet<'_>) -> Verdict {
///         Verdict::Forward(pkt.rx_vnic() ^ 1)
///     }
/// }
/// fn main() -> std::process::ExitCode {
///     vrhost_sdk::runtime::main(|_hello| Ok(Bridge))
/// }
/// ```
///
/// # Errors
/// [`RuntimeError`] saying what failed; the host is told too when it can be.
pub fn run<V, F>(build: F) -> Result<(), RuntimeError>
where
    V: Vr,
    F: FnOnce(&Hello) -> Result<V, String>,
{
    let Handshake {
        hello,
        region,
        vr_bell,
        host_bell,
        ctrl,
    } = handshake()?;
    ctrl.report_panics();
    let built = build(&hello).map_err(RuntimeError::Setup).and_then(|vr| {
        let inst = Instance::new(region, hello.instance, vr_bell, host_bell, hello.poll)?;
        Ok((vr, inst))
    });
    let (mut vr, mut inst) = match built {
        Ok(v) => v,
        Err(e) => {
            ctrl.reply_error(&e);
            return Err(e);
        }
    };
    ctrl.ready();
    let stop = AtomicBool::new(false);
    inst.run(&mut vr, Some(ctrl.fd()), &stop)
}

/// [`run`] as a process `main`: prints the error and exits non-zero.
pub fn main<V, F>(build: F) -> std::process::ExitCode
where
    V: Vr,
    F: FnOnce(&Hello) -> Result<V, String>,
{
    match run(build) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vrhost VR: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
