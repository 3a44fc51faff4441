//! An etcd server for a lab or a test (Debian's `etcd-server`): started in
//! a namespace on one address, with a data directory of its own, and
//! killed (its directory removed) on drop. A cluster's desired state lives
//! there (`docs/cluster.md`).

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::netns::{CmdError, Netns};

/// The client port etcd listens on.
pub const CLIENT_PORT: u16 = 2379;

/// A running etcd, killed on drop.
#[derive(Debug)]
pub struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    endpoint: String,
}

impl Etcd {
    /// Start etcd in `ns` on `addr`:[`CLIENT_PORT`] (its peer port on the
    /// namespace's loopback), and wait until it accepts connections.
    ///
    /// # Errors
    /// No `etcd` program, or it did not answer within 20 s.
    pub fn start(ns: &Netns, addr: Ipv4Addr) -> Result<Self, CmdError> {
        let dir =
            std::env::temp_dir().join(format!("vrhost-etcd-{}-{}", ns.name(), std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| err(format!("{}: {e}", dir.display())))?;
        Self::spawn(ns, addr, dir)
    }

    /// Kill it, keeping its data (for [`Etcd::restart`]): etcd is then
    /// unreachable.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again in `ns` on `addr` (as it was) on its kept data.
    ///
    /// # Errors
    /// As [`Etcd::start`].
    pub fn restart(&mut self, ns: &Netns, addr: Ipv4Addr) -> Result<(), CmdError> {
        self.kill();
        let dir = std::mem::take(&mut self.dir);
        *self = Self::spawn(ns, addr, dir)?;
        Ok(())
    }

    fn spawn(ns: &Netns, addr: Ipv4Addr, dir: PathBuf) -> Result<Self, CmdError> {
        let endpoint = format!("http://{addr}:{CLIENT_PORT}");
        let log = std::fs::File::create(dir.join("etcd.log"))
            .map_err(|e| err(format!("etcd.log: {e}")))?;
        let child = Command::new("ip")
            .args(["netns", "exec", ns.name(), "etcd", "--name", "lab"])
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--listen-client-urls", &endpoint])
            .args(["--advertise-client-urls", &endpoint])
            .args(["--listen-peer-urls", "http://127.0.0.1:2380"])
            .args(["--initial-advertise-peer-urls", "http://127.0.0.1:2380"])
            .args(["--initial-cluster", "lab=http://127.0.0.1:2380"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| err(format!("etcd (Debian package etcd-server): {e}")))?;
        let mut me = Self {
            child: Some(child),
            dir,
            endpoint,
        };
        let to = SocketAddr::from((addr, CLIENT_PORT));
        let t0 = Instant::now();
        loop {
            let up =
                ns.run(|| TcpStream::connect_timeout(&to, Duration::from_millis(200)).is_ok())?;
            if up {
                return Ok(me);
            }
            let exited = me.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || t0.elapsed() > Duration::from_secs(20) {
                let log = std::fs::read_to_string(me.dir.join("etcd.log")).unwrap_or_default();
                return Err(err(format!("etcd did not start: {log}")));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Its client endpoint, `http://ADDR:2379`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

fn err(m: String) -> CmdError {
    CmdError::Failed {
        cmd: "etcd".into(),
        code: -1,
        stderr: m,
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // `ip netns exec` execs etcd: the child is etcd itself.
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
