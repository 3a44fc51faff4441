//! Starting a VR's control plane (BIRD, or the tenant's command) inside
//! its control namespace, confined: the namespace's network only (entered
//! with `setns` between fork and exec), a cgroup of its own under the
//! daemon's (`…/vrhost/<vr>.ctl`), and, with a user, that user and its
//! group without supplementary groups, keeping only the capabilities a
//! routing daemon needs on its own network (`CAP_NET_ADMIN` to program
//! the namespace's routes, `CAP_NET_BIND_SERVICE` for BGP's port 179,
//! `CAP_NET_RAW` for OSPF and BFD sockets, `CAP_NET_BROADCAST`) as
//! ambient capabilities, so an unmodified program keeps them across
//! `exec`. It sees no other namespace than its own: it cannot reach the
//! VRs' regions, the host's sockets or another tenant's network.
//!
//! Unlike a VR process it has no seccomp filter (a routing daemon makes
//! system calls the VR allowlist refuses) and keeps its descriptors 0-2
//! (its output goes to a log file the caller opens).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::{Cgroups, ConfineError, Ids, Limits, detect, os};

/// Capabilities kept by a control plane run as a user.
const CAPS: [u32; 4] = [
    10, // CAP_NET_BIND_SERVICE
    11, // CAP_NET_BROADCAST
    12, // CAP_NET_ADMIN
    13, // CAP_NET_RAW
];

/// `_LINUX_CAPABILITY_VERSION_3`.
const CAP_V3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// How to start a control plane.
#[derive(Debug)]
pub struct ControlSpawn<'a> {
    /// Program and arguments.
    pub command: &'a [String],
    /// The namespace file (`/run/netns/NAME`).
    pub netns: &'a Path,
    /// Run as this user (`None`: as the daemon's).
    pub user: Option<Ids>,
    /// A cgroup of its own, named `<name>` under the daemon's (`None`: none).
    pub cgroup: Option<&'a str>,
    /// Its working directory (its run directory).
    pub dir: &'a Path,
    /// Where its standard output and error go.
    pub log: File,
}

/// Start the control plane `s` describes.
///
/// # Errors
/// The namespace, cgroup or log cannot be opened, or a step before
/// `exec` failed (the message names it).
pub fn spawn_control(s: ControlSpawn<'_>) -> Result<(Child, Option<Cgroups>), ConfineError> {
    let Some((prog, args)) = s.command.split_first() else {
        return Err(ConfineError::Unsupported("an empty command".into()));
    };
    let ns: OwnedFd = File::open(s.netns)
        .map_err(os(format!("open {}", s.netns.display())))?
        .into();
    let cg = match s.cgroup {
        Some(name) => Some(Cgroups::create(&detect()?, name, &Limits::default())?),
        None => None,
    };
    let mut procs: Vec<OwnedFd> = Vec::new();
    for d in cg.iter().flat_map(|c| c.dirs()) {
        let p = d.join("cgroup.procs");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .map_err(os(format!("open {}", p.display())))?;
        procs.push(f.into());
    }
    let err = s.log.try_clone().map_err(os("dup the log"))?;
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .current_dir(s.dir)
        .stdin(Stdio::null())
        .stdout(s.log)
        .stderr(err)
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        );
    let user = s.user;
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: it makes raw system calls
    // (setns, write, prctl, setgroups, setresgid, setresuid, capset) on
    // descriptors and values prepared before the fork, and allocates
    // nothing (its errors are `io::Error::last_os_error`, no allocation).
    unsafe {
        cmd.pre_exec(move || in_child(&ns, &procs, user));
    }
    let child = cmd.spawn().map_err(|e| ConfineError::Child {
        step: format!("start {prog}"),
        source: e,
    })?;
    Ok((child, cg))
}

/// Between fork and exec: enter the namespace and the cgroup, then drop
/// to `user` with the network capabilities as ambient ones.
fn in_child(ns: &OwnedFd, procs: &[OwnedFd], user: Option<Ids>) -> io::Result<()> {
    // SAFETY: `ns` is an open namespace file; setns only reads it.
    check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) })?;
    for p in procs {
        // "0": the writing process (cgroup v1 and v2).
        // SAFETY: a valid descriptor and a 1-byte buffer that lives here.
        let n = unsafe { libc::write(p.as_raw_fd(), b"0".as_ptr().cast(), 1) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let Some(ids) = user else { return Ok(()) };
    // SAFETY: prctl with integer arguments only.
    check(unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) })?;
    // SAFETY: an empty list: no pointer is read.
    check(unsafe { libc::setgroups(0, std::ptr::null()) })?;
    // SAFETY: integer arguments only.
    check(unsafe { libc::setresgid(ids.gid, ids.gid, ids.gid) })?;
    // SAFETY: integer arguments only.
    check(unsafe { libc::setresuid(ids.uid, ids.uid, ids.uid) })?;
    let mask = CAPS.iter().fold(0u32, |m, &c| m | 1 << c);
    let hdr = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let data = [
        CapData {
            effective: mask,
            permitted: mask,
            inheritable: mask,
        },
        CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // SAFETY: capset reads one header and two data structs (version 3),
    // both live on this frame with the kernel's layout (`#[repr(C)]`).
    let r = unsafe { libc::syscall(libc::SYS_capset, &hdr as *const CapHeader, data.as_ptr()) };
    check(r as i32)?;
    for c in CAPS {
        // SAFETY: prctl with integer arguments only.
        check(unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                c as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        })?;
    }
    Ok(())
}

fn check(r: i32) -> io::Result<()> {
    match r {
        -1 => Err(io::Error::last_os_error()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A namespace of the test's own, deleted on drop.
    struct Ns(String);

    impl Drop for Ns {
        fn drop(&mut self) {
            let _ = Command::new("ip")
                .args(["netns", "delete", &self.0])
                .status();
        }
    }

    #[test]
    fn the_control_plane_runs_in_its_namespace_as_its_user_with_network_caps() {
        if rustix::process::geteuid().as_raw() != 0 {
            eprintln!("SKIPPED: needs root");
            return;
        }
        let ns = Ns(format!("vrhost-ctlproc-{}", std::process::id()));
        let ok = Command::new("ip").args(["netns", "add", &ns.0]).status();
        assert!(ok.unwrap().success());
        let dir = std::env::temp_dir();
        let log_path = dir.join(format!("{}.log", ns.0));
        let log = File::create(&log_path).unwrap();
        let cmd: Vec<String> = [
            "/bin/sh",
            "-c",
            "id -u; grep CapAmb /proc/self/status; grep -c : /proc/self/net/dev",
        ]
        .map(String::from)
        .into();
        let netns = Path::new("/run/netns").join(&ns.0);
        let name = format!("unit-test-ctl-{}", std::process::id());
        let (mut child, mut cg) = spawn_control(ControlSpawn {
            command: &cmd,
            netns: &netns,
            user: Some(Ids::NOBODY),
            cgroup: Some(&name),
            dir: &dir,
            log,
        })
        .unwrap();
        assert!(child.wait().unwrap().success());
        if let Some(cg) = cg.as_mut() {
            cg.remove();
        }
        let out = std::fs::read_to_string(&log_path).unwrap();
        let _ = std::fs::remove_file(&log_path);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "65534", "{out}");
        assert_eq!(
            lines[1].split_whitespace().nth(1),
            Some("0000000000003c00"),
            "{out}"
        );
        assert_eq!(lines[2], "1", "only the namespace's lo: {out}");
    }
}
