//! A daemon with 100 VRs, each its own process, region and cgroup: all
//! come up, a few forward, the idle ones cost the host nothing it can
//! see, and all stop with the daemon.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{Daemon, Lab, count, wait_drained};

/// VRs in the config.
const VRS: u8 = 100;
/// Of which the generator sends to the first ones only.
const BUSY: u8 = 3;
/// Frames the generator sends in all.
const FRAMES: u64 = 30_000;

/// The VRs' processes, from `vr list`: every VR must be running.
fn running_pids(d: &Daemon) -> Vec<u32> {
    let list = d.json(&["vr", "list"]);
    let vrs = list.as_array().expect("a list of VRs");
    assert_eq!(vrs.len(), usize::from(VRS), "{list:#}");
    vrs.iter()
        .flat_map(|v| {
            assert_eq!(v["state"], "running", "{v:#}");
            let inst = v["instances"].as_array().expect("instances");
            assert!(!inst.is_empty(), "{v:#}");
            inst.iter().map(move |i| {
                assert_eq!(i["running"], true, "{v:#}");
                i["pid"].as_u64().expect("a pid") as u32
            })
        })
        .collect()
}

/// The directories of the cgroups process `pid` (or `self`) is in, one
/// per hierarchy (v2: `0::PATH`; v1: `N:CONTROLLERS:PATH`, under the
/// first controller's mount).
fn cgroup_dirs(pid: &str) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            let root = match ctrls.split(',').next() {
                // v2 beside v1 (a hybrid machine) is mounted at `unified`.
                Some("") | None if std::path::Path::new("/sys/fs/cgroup/unified").exists() => {
                    "/sys/fs/cgroup/unified".to_string()
                }
                Some("") | None => "/sys/fs/cgroup".to_string(),
                Some(c) => format!("/sys/fs/cgroup/{}", c.trim_start_matches("name=")),
            };
            Some(PathBuf::from(format!("{root}{path}")))
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    // A zombie is gone for this purpose: it runs nothing and holds no
    // memory (its parent, the daemon, is gone too and init reaps it).
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

#[test]
fn a_hundred_vrs_start_forward_and_stop() {
    let t = Instant::now();
    let config = Lab::many_vrs(VRS, BUSY, Some(64))
        .paced(100_000)
        .limit(FRAMES)
        .to_toml();
    // Started with a soft limit of 512 open files (a shell's or a service
    // manager's is often 1,024), below the 600 or so it needs for 100 VRs:
    // it raises its own to the hard limit.
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .maximum
        .map_or("unlimited".to_string(), |m| m.to_string());
    let nofile = format!("--nofile=512:{hard}");
    let mut d = if std::path::Path::new("/usr/bin/prlimit").exists() {
        Daemon::start_under("scale-100", &config, &["/usr/bin/prlimit", &nofile])
    } else {
        Daemon::start("scale-100", &config)
    };
    let started = t.elapsed();
    let pids = running_pids(&d);
    assert_eq!(pids.len(), usize::from(VRS));
    // Each VR in cgroups of its own (the memory limit asks for them): the
    // directories of its cgroups that are not the test's own, none shared.
    let own = cgroup_dirs("self");
    let mut cgroups = BTreeSet::new();
    for p in &pids {
        let dirs: Vec<PathBuf> = cgroup_dirs(&p.to_string())
            .into_iter()
            .filter(|d| !own.contains(d))
            .collect();
        assert!(!dirs.is_empty(), "VR process {p} has no cgroup of its own");
        for d in dirs {
            assert!(cgroups.insert(d.clone()), "{d:?} shared by two VRs");
        }
    }

    let fds = std::fs::read_dir(format!("/proc/{}/fd", d.child.id()))
        .map(|d| d.count())
        .unwrap_or(0);

    let busy: Vec<String> = (1..=BUSY).map(|n| format!("vr{n}")).collect();
    let names: Vec<&str> = busy.iter().map(String::as_str).collect();
    let s: Value = wait_drained(&names, FRAMES, || d.stats());
    let sent: u64 = names.iter().map(|n| count(&s, n, "tx_packets")).sum();
    let dropped: u64 = names
        .iter()
        .map(|n| count(&s, n, "vr_dropped") + count(&s, n, "port_dropped"))
        .sum();
    assert!(
        sent > 0 && sent + dropped <= FRAMES,
        "sent {sent}, dropped {dropped}"
    );
    for n in names.iter() {
        assert!(count(&s, n, "tx_packets") > 0, "{n} forwarded nothing");
    }
    for n in BUSY + 1..=VRS {
        let name = format!("vr{n}");
        assert_eq!(count(&s, &name, "rx_packets"), 0, "{name} was idle");
    }
    let forwarded = t.elapsed();

    let pid = rustix::process::Pid::from_child(&d.child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = d.child.wait().unwrap();
    assert!(status.success(), "daemon shutdown: {status}");
    let stopped = t.elapsed();
    // The VR processes were the daemon's children: they go with it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "VR processes left running: {left:?}");
    let kept: Vec<&PathBuf> = cgroups.iter().filter(|d| d.exists()).collect();
    assert!(kept.is_empty(), "VR cgroups left behind: {kept:?}");
    eprintln!(
        "{VRS} VRs ({} cgroup directories of their own, the daemon holding {fds} file descriptors): up in {:.1} s, traffic through {BUSY} done at {:.1} s, stopped at {:.1} s",
        cgroups.len(),
        started.as_secs_f64(),
        forwarded.as_secs_f64(),
        stopped.as_secs_f64()
    );
}

/// A `kB` field of a `/proc` file of `key: value kB` lines, in bytes.
fn kb(file: &str, key: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .find_map(|l| {
            l.strip_prefix(key)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0)
        * 1024
}

const MIB: f64 = 1024.0 * 1024.0;

/// 100 VRs with the default pool (2,048 slots of 2 KiB each: 4 MiB of
/// packet memory per VR, 400 MiB configured) that see no traffic hold
/// only the pages they touched: the host writes a slot's bytes when it
/// copies a frame in, and nothing writes an idle VR's slots.
#[test]
fn a_hundred_idle_vrs_hold_little_memory() {
    let shmem0 = kb("/proc/meminfo", "Shmem:");
    // One frame for vr1, so the generator has a destination.
    let config = Lab::many_vrs(VRS, 1, None).limit(1).to_toml();
    let d = Daemon::start("scale-mem", &config);
    let pids = running_pids(&d);
    std::thread::sleep(Duration::from_millis(500));
    let rollup = |pid: u32, key: &str| kb(&format!("/proc/{pid}/smaps_rollup"), key);
    let daemon = d.child.id();
    let (d_rss, d_pss) = (rollup(daemon, "Rss:"), rollup(daemon, "Pss:"));
    let d_shmem = rollup(daemon, "Pss_Shmem:");
    let vr_pss: u64 = pids.iter().map(|&p| rollup(p, "Pss:")).sum();
    let vr_shmem: u64 = pids.iter().map(|&p| rollup(p, "Pss_Shmem:")).sum();
    let shmem = kb("/proc/meminfo", "Shmem:").saturating_sub(shmem0);
    let total = d_pss + vr_pss;
    eprintln!(
        "{VRS} idle VRs, default pool: daemon RSS {:.1} MiB (PSS {:.1}, of it shared memory {:.1}); \
         VR processes PSS {:.1} MiB in all ({:.2} each; shared memory {:.1}); \
         daemon + VRs PSS {:.1} MiB; machine Shmem +{:.1} MiB (other users' changes included)",
        d_rss as f64 / MIB,
        d_pss as f64 / MIB,
        d_shmem as f64 / MIB,
        vr_pss as f64 / MIB,
        vr_pss as f64 / MIB / f64::from(VRS),
        vr_shmem as f64 / MIB,
        total as f64 / MIB,
        shmem as f64 / MIB,
    );
    assert!(
        total < 1 << 30,
        "100 idle VRs and the daemon hold {:.0} MiB",
        total as f64 / MIB
    );
}
