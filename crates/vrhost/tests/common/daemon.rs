//! A real `vrhost daemon`: started on a config text with its API in its own
//! temporary directory, killed when dropped, and reached through the
//! `vrhost` CLI.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::TempDir;

/// The daemon, killed when dropped.
pub struct Daemon {
    pub child: Child,
    /// Its API socket (unused when it serves the API on TCP only).
    pub sock: PathBuf,
    /// The port of its API on 127.0.0.1, if started by
    /// [`Daemon::start_tcp`].
    pub tcp_port: Option<u16>,
    /// Every line it has logged so far.
    pub log: Arc<Mutex<Vec<String>>>,
    dir: TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How its API is served.
enum Api<'a> {
    /// On the socket `api.sock` in its directory.
    Unix,
    /// Only on TCP at 127.0.0.1, with this bearer token.
    Tcp { token: &'a str },
}

impl Daemon {
    /// Start `vrhost daemon` on `config` (TOML text) and wait for its
    /// readiness line; its log goes to the test's stderr.
    pub fn start(tag: &str, config: &str) -> Self {
        Self::launch(tag, config, &[], Api::Unix)
    }

    /// As [`Daemon::start`], but started by the command `wrapper` (such as
    /// `ip netns exec NS`), which is given the daemon's command line.
    pub fn start_under(tag: &str, config: &str, wrapper: &[&str]) -> Self {
        Self::launch(tag, config, wrapper, Api::Unix)
    }

    /// As [`Daemon::start`], but with its API only on TCP at 127.0.0.1 (a
    /// free port, in [`Daemon::tcp_port`]), wanting the bearer `token`.
    pub fn start_tcp(tag: &str, config: &str, token: &str) -> Self {
        Self::launch(tag, config, &[], Api::Tcp { token })
    }

    fn launch(tag: &str, config: &str, wrapper: &[&str], api: Api) -> Self {
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
        cmd.args(["daemon", "--stats-secs", "0", "--api"]);
        let tcp_port = match api {
            Api::Unix => {
                cmd.arg(&sock);
                None
            }
            Api::Tcp { token } => {
                let port = free_tcp_port();
                let file = dir.path().join("token");
                std::fs::write(&file, format!("{token}\n")).unwrap();
                cmd.args(["none", "--api-tcp"])
                    .arg(format!("127.0.0.1:{port}"))
                    .arg("--token-file")
                    .arg(&file);
                Some(port)
            }
        };
        let mut child = cmd
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
            tcp_port,
            log,
            dir,
        }
    }

    /// Its temporary directory (removed when it is dropped): a place for
    /// the test's files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The config file it was started on.
    pub fn config_file(&self) -> PathBuf {
        self.dir().join("daemon.toml")
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
        cli(&self.sock, args)
    }

    /// Run `vrhost ARGS --api SOCK`: exit status, stdout, stderr.
    pub fn run(&self, args: &[&str]) -> (bool, String, String) {
        run(&self.sock, args)
    }

    /// Run `vrhost ARGS --api SOCK`, which must succeed; returns its
    /// stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(ok, "vrhost {args:?}: {err}");
        out
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

    /// Its metrics, over its API socket (HTTP/1.0: the server closes).
    pub fn metrics(&self) -> String {
        use std::io::{Read, Write};
        let mut c = std::os::unix::net::UnixStream::connect(&self.sock).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        c.read_to_string(&mut text).unwrap();
        text
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

/// `vrhost ARGS --api SOCK`, not yet started (also for a daemon that is
/// gone).
pub fn cli(sock: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vrhost"));
    c.args(args).arg("--api").arg(sock);
    c
}

/// Run `vrhost ARGS --api SOCK`: exit status, stdout, stderr.
pub fn run(sock: &Path, args: &[&str]) -> (bool, String, String) {
    let out = cli(sock, args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
fn free_tcp_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}
