//! The integration tests' kit: a real `vrhost daemon` ([`daemon`]), the
//! configs it is started on ([`config`]), the cluster tests' lab
//! ([`cluster`]), an in-process data path
//! ([`datapath`]), three namespaces in a line ([`line`]), frames on the wire ([`wire`]), temporary directories,
//! the tests' VR program and readers of the daemon's stats.

#![allow(
    dead_code,
    unused_imports,
    reason = "each test binary includes this module and uses a part of it"
)]

pub mod cluster;
pub mod config;
pub mod daemon;
pub mod datapath;
pub mod line;
pub mod wire;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use vrhost_router::{NextHopConfig, RouteConfig, RouterConfig, VnicConfig};

pub use config::Lab;
pub use daemon::Daemon;

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

/// The VR named `name` in a stats document.
pub fn vr<'a>(stats: &'a Value, name: &str) -> &'a Value {
    stats["vrs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no VR {name} in {stats:#}"))
}

/// The counters of the VR named `name` in a stats document.
pub fn vr_stats<'a>(stats: &'a Value, name: &str) -> &'a Value {
    &vr(stats, name)["stats"]
}

/// Poll `stats` until the generator (port 0) has sent `frames` and each VR
/// of `vrs` has sent every frame it was given (up to 60 s, a bound against
/// a hung test, not a speed limit); returns those stats.
pub fn wait_drained(vrs: &[&str], frames: u64, mut stats: impl FnMut() -> Value) -> Value {
    let t = Instant::now();
    loop {
        let s = stats();
        let gen_done = s["ports"][0]["rx_packets"].as_u64() == Some(frames);
        let drained = vrs.iter().all(|name| {
            let v = vr_stats(&s, name);
            v["rx_packets"] == v["tx_packets"]
        });
        if gen_done && drained {
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "generator never finished: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A counter of a VR's stats.
pub fn count(stats: &Value, vr_name: &str, field: &str) -> u64 {
    vr_stats(stats, vr_name)[field]
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

/// A daemon config of two ports `p0` and `p1` on `driver` over the
/// interfaces `ifs`, each feeding vNIC 0 and 1 of VR `vr`, whose
/// `[[vrs]]` table has `vr_body` after its name.
pub fn two_port_config(driver: &str, ifs: [&str; 2], vr: &str, vr_body: &str) -> String {
    let mut s = String::new();
    for (i, ifname) in ifs.iter().enumerate() {
        s += &format!(
            "[[ports]]\nname = \"p{i}\"\ndriver = \"{driver}\"\ninterface = \"{ifname}\"\n\n"
        );
    }
    s += &format!("[[vrs]]\nname = \"{vr}\"\n{vr_body}\n");
    for i in 0..ifs.len() {
        s += &format!("\n[[rules]]\nport = \"p{i}\"\nvr = \"{vr}\"\nvnic = {i}\n");
    }
    s
}

/// Removes a VR's control namespace (`vrctl-<vr>`) the daemon left (it is
/// killed, not stopped), with what runs in it.
pub struct CtlNs(pub String);

impl Drop for CtlNs {
    fn drop(&mut self) {
        use std::process::Command;
        if let Ok(out) = Command::new("ip").args(["netns", "pids", &self.0]).output() {
            for p in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-9", p]).status();
            }
        }
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
        let _ = std::fs::remove_dir_all(Path::new("/run/vrhost/ctl").join(&self.0));
    }
}

/// The memory cgroup directory of process `pid`, as this test sees it.
pub fn memory_cgroup(pid: u32) -> std::path::PathBuf {
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = cg
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            (ctrls.split(',').any(|c| c == "memory") || ctrls.is_empty()).then(|| path.to_string())
        })
        .unwrap_or_else(|| panic!("no memory cgroup in {cg}"));
    let rel = path.trim_start_matches('/');
    let v1 = std::path::PathBuf::from("/sys/fs/cgroup/memory").join(rel);
    if v1.exists() {
        v1
    } else {
        std::path::PathBuf::from("/sys/fs/cgroup").join(rel)
    }
}
