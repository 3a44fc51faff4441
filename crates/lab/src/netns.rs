//! Named network namespaces (`ip netns`), veth pairs, and running commands
//! or threads inside a namespace.

use std::fs::File;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

/// A command failed to start or exited non-zero.
#[derive(Debug, thiserror::Error)]
pub enum CmdError {
    /// The program could not be started.
    #[error("{cmd}: cannot run: {err}")]
    Spawn {
        /// The command line.
        cmd: String,
        /// Why.
        err: std::io::Error,
    },
    /// The program ran and failed.
    #[error("{cmd}: exit {code}: {stderr}")]
    Failed {
        /// The command line.
        cmd: String,
        /// Its exit code (-1 if killed by a signal).
        code: i32,
        /// What it printed on stderr, trimmed.
        stderr: String,
    },
    /// Entering a namespace failed.
    #[error("namespace {ns}: {err}")]
    Setns {
        /// The namespace.
        ns: String,
        /// Why.
        err: std::io::Error,
    },
}

/// Run `prog args...`, returning its stdout; a non-zero exit is an error
/// carrying stderr.
///
/// # Errors
/// [`CmdError`] with the whole command line.
pub fn cmd(prog: &str, args: &[&str]) -> Result<String, CmdError> {
    let line = || format!("{prog} {}", args.join(" "));
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| CmdError::Spawn { cmd: line(), err })?;
    if !out.status.success() {
        return Err(CmdError::Failed {
            cmd: line(),
            code: out.status.code().unwrap_or(-1),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A named network namespace. Created by [`Netns::create`] it is deleted on
/// drop (with every interface inside it); [`Netns::existing`] only refers to
/// one.
#[derive(Debug)]
pub struct Netns {
    name: String,
    owned: bool,
}

impl Netns {
    /// Create namespace `name` (a stale one of that name is deleted first)
    /// with its loopback up.
    ///
    /// # Errors
    /// The failing `ip` command.
    pub fn create(name: &str) -> Result<Self, CmdError> {
        if Self::exists(name) {
            let _ = cmd("ip", &["netns", "delete", name]);
        }
        cmd("ip", &["netns", "add", name])?;
        let ns = Self {
            name: name.to_string(),
            owned: true,
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Create a namespace with a name unique to this process: `PREFIX-PID-N`
    /// (for tests running in parallel).
    ///
    /// # Errors
    /// The failing `ip` command.
    pub fn unique(prefix: &str) -> Result<Self, CmdError> {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        Self::create(&format!("{prefix}-{}-{n}", std::process::id()))
    }

    /// Refer to an existing namespace without owning it.
    pub fn existing(name: &str) -> Self {
        Self {
            name: name.to_string(),
            owned: false,
        }
    }

    /// Delete namespace `name` (processes inside keep running, interfaces
    /// go).
    ///
    /// # Errors
    /// The failing `ip` command.
    pub fn delete(name: &str) -> Result<(), CmdError> {
        cmd("ip", &["netns", "delete", name]).map(drop)
    }

    /// Whether namespace `name` exists.
    pub fn exists(name: &str) -> bool {
        std::path::Path::new("/run/netns").join(name).exists()
    }

    /// Keep the namespace after drop (the lab's `up` leaves it for `down`).
    pub fn leak(mut self) -> String {
        self.owned = false;
        std::mem::take(&mut self.name)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n NAME args...`.
    ///
    /// # Errors
    /// The failing command.
    pub fn ip(&self, args: &[&str]) -> Result<String, CmdError> {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        cmd("ip", &a)
    }

    /// `ip netns exec NAME prog args...`.
    ///
    /// # Errors
    /// The failing command.
    pub fn exec(&self, prog: &str, args: &[&str]) -> Result<String, CmdError> {
        let mut a = vec!["netns", "exec", self.name.as_str(), prog];
        a.extend_from_slice(args);
        cmd("ip", &a)
    }

    /// A [`Command`] that runs `prog` inside the namespace (for processes
    /// the caller keeps running, such as a traffic generator).
    pub fn command(&self, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.name.as_str(), prog]);
        c
    }

    /// Write a sysctl inside the namespace (`net.ipv4.ip_forward`, ...).
    ///
    /// # Errors
    /// The failing command.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), CmdError> {
        self.exec("sysctl", &["-qw", &format!("{key}={value}")])
            .map(drop)
    }

    /// Move the calling thread into the namespace until the guard drops.
    /// Sockets created meanwhile belong to the namespace for good.
    ///
    /// # Errors
    /// [`CmdError::Setns`] if a namespace file cannot be opened or entered.
    pub fn enter(&self) -> Result<NsGuard, CmdError> {
        let err = |err| CmdError::Setns {
            ns: self.name.clone(),
            err,
        };
        let back = File::open("/proc/thread-self/ns/net").map_err(err)?;
        let target = File::open(format!("/run/netns/{}", self.name)).map_err(err)?;
        move_into_link_name_space(target.as_fd_ref(), Some(LinkNameSpaceType::Network))
            .map_err(|e| err(e.into()))?;
        Ok(NsGuard { back })
    }

    /// Run `f` on a new thread inside the namespace and return its result.
    ///
    /// # Errors
    /// [`CmdError::Setns`] if the namespace cannot be entered.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T, CmdError> {
        std::thread::scope(|s| {
            s.spawn(|| {
                let _g = self.enter()?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

trait AsFdRef {
    fn as_fd_ref(&self) -> std::os::fd::BorrowedFd<'_>;
}

impl AsFdRef for File {
    fn as_fd_ref(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if self.owned && !self.name.is_empty() {
            let _ = cmd("ip", &["netns", "delete", &self.name]);
        }
    }
}

/// Puts the thread back in its previous namespace on drop.
#[derive(Debug)]
pub struct NsGuard {
    back: File,
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        let _ = move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&self.back),
            Some(LinkNameSpaceType::Network),
        );
    }
}

/// Create a veth pair: `a` in namespace `a_ns`, `b` in `b_ns`, both up, with
/// MAC addresses if given. Deleted with either namespace.
///
/// # Errors
/// The failing `ip` command.
pub fn veth(
    a_ns: &Netns,
    a: &str,
    a_mac: Option<&str>,
    b_ns: &Netns,
    b: &str,
    b_mac: Option<&str>,
) -> Result<(), CmdError> {
    let mut args = vec!["link", "add", a, "netns", a_ns.name()];
    if let Some(m) = a_mac {
        args.extend(["address", m]);
    }
    args.extend(["type", "veth", "peer", "name", b, "netns", b_ns.name()]);
    if let Some(m) = b_mac {
        args.extend(["address", m]);
    }
    cmd("ip", &args)?;
    a_ns.ip(&["link", "set", a, "up"])?;
    b_ns.ip(&["link", "set", b, "up"])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_and_veth_are_created_and_removed() {
        let a = Netns::unique("vrh-t").unwrap();
        let b = Netns::unique("vrh-t").unwrap();
        veth(&a, "va", Some("02:00:00:00:00:0a"), &b, "vb", None).unwrap();
        a.ip(&["addr", "add", "10.9.0.1/24", "dev", "va"]).unwrap();
        b.ip(&["addr", "add", "10.9.0.2/24", "dev", "vb"]).unwrap();
        let out = a.exec("ping", &["-c1", "-W2", "10.9.0.2"]).unwrap();
        assert!(out.contains("1 received"), "{out}");
        // A socket opened on a thread inside `a` sees `va`.
        let names = a
            .run(|| std::fs::read_dir("/sys/class/net").map(|d| d.count()))
            .unwrap();
        assert!(names.is_ok());
        let link = a.ip(&["link", "show", "va"]).unwrap();
        assert!(link.contains("02:00:00:00:00:0a"), "{link}");
        let name = a.name().to_string();
        drop(a);
        assert!(!Netns::exists(&name));
        // A failing command names itself and says why.
        let e = b.ip(&["link", "show", "nosuchif"]).unwrap_err().to_string();
        assert!(e.contains("nosuchif"), "{e}");
    }
}
