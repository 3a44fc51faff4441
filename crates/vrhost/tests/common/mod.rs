//! A real `vrhost daemon` for integration tests: started on a config text
//! with its own API socket in its own directory, killed when dropped, and
//! reached through the `vrhost` CLI.

#![allow(
    dead_code,
    reason = "each test binary includes this module and uses a part of it"
)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use vrhost_router::{NextHopConfig, RouteConfig, RouterConfig, VnicConfig};

/// The `vrhost-testvr` program (the tests' VRs: probe, hostile), beside
/// the `vrhost` binary under test.
pub fn testvr() -> PathBuf {
    let vrhost = Path::new(env!("CARGO_BIN_EXE_vrhost"));
    vrhost_testvr::beside(vrhost).unwrap_or_else(|| {
        panic!(
            "no vrhost-testvr beside {}: `cargo test --workspace` builds it, or `cargo build -p vrhost-testvr`",
            vrhost.display()
        )
    })
}

/// A temporary directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new directory under the system's temporary directory.
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "vrhost-{tag}-{}-{:?}",
            std::process::id(),
            Instant::now()
        ));
        let p = PathBuf::from(p.to_string_lossy().replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '/' && c != '-',
            "",
        ));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The daemon, killed when dropped.
pub struct Daemon {
    pub child: Child,
    pub sock: PathBuf,
    /// Every line it has logged so far.
    pub log: Arc<Mutex<Vec<String>>>,
    _dir: TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// Start `vrhost daemon` on `config` (TOML text) and wait for its
    /// readiness line; its log goes to the test's stderr.
    pub fn start(tag: &str, config: &str) -> Self {
        Self::start_under(tag, config, &[])
    }

    /// As [`Daemon::start`], but started by the command `wrapper` (such as
    /// `ip netns exec NS`), which is given the daemon's command line.
    pub fn start_under(tag: &str, config: &str, wrapper: &[&str]) -> Self {
        let dir = TempDir::new(tag);
        let sock = dir.path().join("api.sock");
        let cfg = dir.path().join("daemon.toml");
        std::fs::write(&cfg, config).unwrap();
        let exe = env!("CARGO_BIN_EXE_vrhost");
        let mut cmd = match wrapper.split_first() {
            None => Command::new(exe),
            Some((w, args)) => {
                let mut c = Command::new(w);
                c.args(args).arg(exe);
                c
            }
        };
        let mut child = cmd
            .args(["daemon", "--stats-secs", "0", "--api"])
            .arg(&sock)
            .arg("--config")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("daemon: {l}");
                if l.starts_with("vrhost daemon:") {
                    let _ = tx.send(());
                }
                lines.lock().unwrap().push(l);
            }
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the daemon did not start");
        Self {
            child,
            sock,
            log,
            _dir: dir,
        }
    }

    /// The first line of its log that contains every one of `words`.
    pub fn logged(&self, words: &[&str]) -> Option<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .find(|l| words.iter().all(|w| l.contains(w)))
            .cloned()
    }

    /// `vrhost ARGS --api SOCK`, not yet started.
    pub fn cli(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vrhost"));
        c.args(args).arg("--api").arg(&self.sock);
        c
    }

    /// `vrhost ARGS -o json`, which must succeed.
    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.cli(args).args(["-o", "json"]).output().unwrap();
        assert!(
            out.status.success(),
            "vrhost {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `/v1/stats`.
    pub fn stats(&self) -> Value {
        self.json(&["stats"])
    }

    /// Poll the stats until `f` holds (up to `within`, a bound against a
    /// hung test, not a speed limit); returns the stats that satisfied it.
    pub fn wait_for(&self, what: &str, within: Duration, f: impl Fn(&Value) -> bool) -> Value {
        let t = Instant::now();
        loop {
            let s = self.stats();
            if f(&s) {
                return s;
            }
            assert!(t.elapsed() < within, "waited {within:?} for {what}: {s:#}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The VR named `name` in a stats document.
pub fn vr<'a>(stats: &'a Value, name: &str) -> &'a Value {
    stats["vrs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no VR {name} in {stats:#}"))
}

/// A counter of a VR's stats.
pub fn count(stats: &Value, vr_name: &str, field: &str) -> u64 {
    vr(stats, vr_name)["stats"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {field}"))
}

/// The built-in router of the data path tests: vNIC 0 in, 10.0.0.0/8 out
/// of vNIC 1 to the sink's MAC 02:00:00:00:00:02.
pub fn router_config() -> RouterConfig {
    RouterConfig {
        vnics: vec![
            VnicConfig {
                mac: "02:00:00:00:10:00".into(),
                ..VnicConfig::default()
            },
            VnicConfig {
                mac: "02:00:00:00:10:01".into(),
                ..VnicConfig::default()
            },
        ],
        nexthops: vec![NextHopConfig {
            vnic: 1,
            mac: "02:00:00:00:00:02".into(),
            ..NextHopConfig::default()
        }],
        routes: vec![RouteConfig {
            prefix: "10.0.0.0/8".into(),
            nexthop: Some(0),
            ..RouteConfig::default()
        }],
        ..RouterConfig::default()
    }
}
