//! Control namespaces: made when a VR's control TAP ports open, owned by
//! the daemon that made them (its pid in the run directory's `owner`
//! file), removed with the VR or when the daemon stops, and removed at
//! the next start when the daemon that owned them is gone (a daemon that
//! was killed leaves them, and the control plane processes in them).
//!
//! Each control namespace has a run directory,
//! `/run/vrhost/ctl/<namespace>/`: the owner file, the control plane's
//! config copy, its socket (`bird.ctl`) and its log.

use std::path::{Path, PathBuf};
use std::process::Command;

use vrhost_host::config::{CONTROL_NETNS_PREFIX, ControlTap};

/// Where the run directories of the control namespaces are.
pub const RUN_ROOT: &str = "/run/vrhost/ctl";

/// The run directory of control namespace `ns`.
pub fn run_dir(ns: &str) -> PathBuf {
    Path::new(RUN_ROOT).join(ns)
}

/// Run `ip ARGS...`; its error output on failure.
pub(crate) fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

/// The pid of the daemon that owns `ns`, if it says.
fn owner(ns: &str) -> Option<u32> {
    let s = std::fs::read_to_string(run_dir(ns).join("owner")).ok()?;
    s.trim().parse().ok()
}

fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Make control namespace `ns` for this daemon, with `lo` up, unless it
/// is this daemon's already.
///
/// # Errors
/// It belongs to another running daemon, or `ip` failed.
pub fn ensure(ns: &str) -> Result<(), String> {
    let me = std::process::id();
    if exists(ns) {
        match owner(ns) {
            Some(p) if p == me => return Ok(()),
            Some(p) if alive(p) => {
                return Err(format!(
                    "control namespace {ns}: in use by the vrhost daemon of pid {p}"
                ));
            }
            _ => remove(ns),
        }
    }
    // The owner first: another daemon's sweep then leaves it alone.
    let dir = run_dir(ns);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join("owner"), me.to_string())
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    ip(&["netns", "add", ns])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    Ok(())
}

/// Give each TAP of a control namespace its vNIC's MAC and addresses,
/// and bring it up.
///
/// # Errors
/// The `ip` command that failed.
pub fn configure(ns: &str, taps: &[ControlTap]) -> Result<(), String> {
    for t in taps {
        let dev = t.ifname.as_str();
        if !t.mac.is_empty() {
            ip(&["-n", ns, "link", "set", "dev", dev, "address", &t.mac])?;
        }
        for a in &t.addrs {
            // `nodad`: the address is the VR's, already in use on the link.
            let mut args = vec!["-n", ns, "addr", "replace", a.as_str(), "dev", dev];
            if a.contains(':') {
                args.push("nodad");
            }
            ip(&args)?;
        }
        ip(&["-n", ns, "link", "set", "dev", dev, "up"])?;
    }
    Ok(())
}

/// Turn IPv4 and IPv6 forwarding on in `ns` (a tap VR's namespace, its
/// data plane).
pub fn forwarding_on(ns: &str) -> Result<(), String> {
    for key in ["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"] {
        ip(&["netns", "exec", ns, "sysctl", "-qw", key])?;
    }
    Ok(())
}

/// Kill every process left in `ns`, delete it and its run directory
/// (what fails is logged: this runs on the way out).
pub fn remove(ns: &str) {
    if let Ok(pids) = ip(&["netns", "pids", ns]) {
        for p in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            if let Some(pid) = rustix::process::Pid::from_raw(p) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
    if exists(ns)
        && let Err(e) = ip(&["netns", "delete", ns])
    {
        tracing::warn!("control namespace {ns}: {e}");
    }
    let _ = std::fs::remove_dir_all(run_dir(ns));
}

/// Remove the control namespaces whose daemon is gone (at start).
/// Returns their names.
pub fn sweep() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let mut gone = Vec::new();
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(CONTROL_NETNS_PREFIX) {
            continue;
        }
        if owner(&name).is_some_and(alive) {
            continue;
        }
        remove(&name);
        gone.push(name);
    }
    gone
}

/// Run `f` on a thread of its own inside namespace `ns` (a TAP device
/// opened there belongs to it; its descriptor works anywhere).
///
/// # Errors
/// The namespace cannot be entered.
pub fn run_in<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> Result<T, String> {
    let path = Path::new("/run/netns").join(ns);
    std::thread::scope(|s| {
        s.spawn(|| {
            let file =
                std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&file),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .map_err(|e| format!("setns {}: {e}", path.display()))?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
