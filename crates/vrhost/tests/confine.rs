//! Confinement of VR processes, proved from inside them: real VR processes
//! (the `vrhost-testvr vr-probe` bridge VR, and the built-in router) are started
//! confined, and the probe reports what it could reach. Needs root (the
//! tests say so and pass without checking anything otherwise).
//!
//! Every test cleans up after itself, also when it fails: processes are
//! stopped by a guard (which removes their cgroups), directories are
//! removed by a guard; network namespaces go with their processes.

mod common;

use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::datapath::{router_cmd, router_path, run_until_both_forward, two_tenant_worker};
use serde_json::{Value, json};
use vrhost_host::confine::{Confine, Ids};
use vrhost_host::spawn::SpawnError;
use vrhost_host::{Hurry, VrCommand, VrProcess};
use vrhost_proto::PollConfig;
use vrhost_shm::{Doorbell, Region, RegionConfig};

fn is_root() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    eprintln!("skipped: confinement tests need root");
    false
}

/// A root-only directory under /run, removed on drop.
struct TestDir(PathBuf);

impl TestDir {
    fn new(name: &str) -> Self {
        let p = PathBuf::from(format!("/run/vrhost-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
        Self(p)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A unix socket and a loopback TCP listener of the host: what a VR must
/// not reach.
struct HostSockets {
    /// The unix socket, in a root-only directory.
    sock: PathBuf,
    /// The TCP listener's address.
    tcp_addr: String,
    _unix: UnixListener,
    _tcp: TcpListener,
    _dir: TestDir,
}

impl HostSockets {
    fn new(tag: &str) -> Self {
        let dir = TestDir::new(tag);
        let sock = dir.0.join("api.sock");
        let unix = UnixListener::bind(&sock).unwrap();
        let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        Self {
            sock,
            tcp_addr: tcp.local_addr().unwrap().to_string(),
            _unix: unix,
            _tcp: tcp,
            _dir: dir,
        }
    }
}

/// VR processes, stopped on drop (which also removes their cgroups).
#[derive(Default)]
struct Procs(Vec<VrProcess>);

impl Drop for Procs {
    fn drop(&mut self) {
        for p in &mut self.0 {
            p.stop();
        }
    }
}

fn probe_cmd(confine: Confine) -> VrCommand {
    VrCommand {
        program: common::testvr(),
        args: vec!["vr-probe".into()],
        cpu: None,
        poll: PollConfig::default(),
        config: json!({}),
        ready_timeout: Duration::from_secs(30),
        idle_start: Duration::ZERO,
        confine,
        hurry: Default::default(),
    }
}

fn region(name: &str) -> Region {
    Region::create(
        name,
        RegionConfig {
            slot_count: 64,
            ring_entries: 64,
            ..Default::default()
        },
    )
    .unwrap()
}

/// One probe VR under `confine`, in a region of its own; stopped on drop.
struct Probe {
    _vr_bell: Doorbell,
    procs: Procs,
    /// Its region (the host's mapping).
    region: Region,
    _bell: Doorbell,
}

impl Probe {
    fn start(name: &str, confine: Confine) -> Self {
        let bell = Doorbell::new().unwrap();
        let region = region(name);
        let (p, vr_bell) = VrProcess::start(name, 0, &region, &bell, &probe_cmd(confine)).unwrap();
        Self {
            _vr_bell: vr_bell,
            procs: Procs(vec![p]),
            region,
            _bell: bell,
        }
    }

    /// Its process.
    fn process(&self) -> &VrProcess {
        &self.procs.0[0]
    }

    /// Its process, to ask how it ended.
    fn process_mut(&mut self) -> &mut VrProcess {
        &mut self.procs.0[0]
    }
}

fn ask(p: &VrProcess, req: Value) -> Value {
    p.control()
        .unwrap()
        .request(&req, Duration::from_secs(20))
        .unwrap()
}

/// Limits the tests give: half a core, CPU 0, 64 MiB.
fn limited() -> Confine {
    Confine {
        cpu_quota: Some(0.5),
        cpus: Some(vec![0]),
        memory: Some(64 << 20),
        ..Confine::strict()
    }
}

fn errno_of(report: &Value, kind: &str, key: &str) -> i64 {
    report[kind][key]
        .as_i64()
        .unwrap_or_else(|| panic!("no {kind}.{key} in {report:#}"))
}

/// The descriptor of the region in a probe's report.
fn region_fd(report: &Value) -> String {
    report["fds"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, what)| what.as_str().unwrap_or("").starts_with("/memfd:"))
        .map(|(fd, _)| fd.clone())
        .unwrap_or_else(|| panic!("no region in {report:#}"))
}

/// Two confined VRs beside a host with a unix socket and a TCP listener:
/// from inside, a VR reaches neither the other VR's region nor the host's
/// (through /proc), nor the host's sockets, nor anything but descriptors
/// 0-3 and what the hello gave it; it runs as nobody, with no capability,
/// no new privileges and the filter, alone in its network namespace and in
/// cgroups of its own holding the limits; forbidden system calls fail with
/// EPERM; and the cgroups go when the VRs stop.
#[test]
fn a_confined_vr_reaches_nothing_but_its_own() {
    if !is_root() {
        return;
    }
    let host_sockets = HostSockets::new("host-sockets");
    let (sock, tcp_addr) = (&host_sockets.sock, &host_sockets.tcp_addr);
    std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o600)).unwrap();

    let probes = [
        Probe::start("probe-a", limited()),
        Probe::start("probe-b", limited()),
    ];
    let (ra, rb) = (&probes[0].region, &probes[1].region);
    let (a, b) = (probes[0].process(), probes[1].process());
    let rep_b = ask(b, json!({}));
    let host = std::process::id();
    let opens = [
        format!("/proc/{host}/fd/{}", ra.fd().as_raw_fd()),
        format!("/proc/{host}/fd/{}", rb.fd().as_raw_fd()),
        format!("/proc/{host}/mem"),
        format!("/proc/{}/fd/{}", b.pid(), region_fd(&rep_b)),
        format!("/proc/{}/mem", b.pid()),
        format!("/proc/{}/environ", b.pid()),
    ];
    let rep = ask(
        a,
        json!({
            "open": opens,
            "unix": [sock],
            "tcp": [tcp_addr],
            "syscalls": true,
        }),
    );
    eprintln!("probe-a: {rep:#}");

    // Other processes' descriptors and memory: refused.
    for o in &opens {
        assert_eq!(errno_of(&rep, "open", o), libc::EACCES as i64, "open {o}");
    }
    // The host's sockets: no socket can even be made.
    assert_eq!(
        errno_of(&rep, "unix", sock.to_str().unwrap()),
        libc::EPERM as i64
    );
    assert_eq!(errno_of(&rep, "tcp", tcp_addr), libc::EPERM as i64);

    // Descriptors: stdio, the control socket, then the hello's region and
    // two doorbells; nothing of the host's.
    let fds = rep["fds"].as_object().unwrap();
    let nums: Vec<&str> = fds.keys().map(String::as_str).collect();
    assert_eq!(nums, ["0", "1", "2", "3", "4", "5", "6"], "{fds:#?}");
    assert_eq!(fds["0"], "/dev/null");
    assert!(fds["3"].as_str().unwrap().starts_with("socket:"));
    assert!(fds["4"].as_str().unwrap().starts_with("/memfd:"));
    assert_eq!(fds["5"], "anon_inode:[eventfd]");
    assert_eq!(fds["6"], "anon_inode:[eventfd]");

    // Who it is.
    let st = &rep["status"];
    assert_eq!(st["Uid"], "65534 65534 65534 65534");
    assert_eq!(st["Gid"], "65534 65534 65534 65534");
    assert_eq!(st["Groups"], "");
    assert_eq!(st["CapEff"], "0000000000000000");
    assert_eq!(st["CapPrm"], "0000000000000000");
    assert_eq!(st["NoNewPrivs"], "1");
    assert_eq!(st["Seccomp"], "2", "filter mode");

    // Its own network namespace, with only lo.
    let host_ns = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert_ne!(rep["netns"], host_ns.display().to_string());
    assert_eq!(rep["net_devs"], json!(["lo"]));

    // Forbidden system calls fail with EPERM; its own threads work.
    let sc = &rep["syscalls"];
    for k in [
        "socket_inet",
        "socket_unix",
        "ptrace_peek_host",
        "mount",
        "setuid_0",
        "kill_other",
        "prlimit_other",
        "setaffinity_other",
        "mlock",
        "memfd_create",
        "fork",
        "unshare_user",
    ] {
        assert_eq!(sc[k], libc::EPERM, "{k}: {sc:#}");
    }
    assert_eq!(sc["thread"], 0, "threads are allowed: {sc:#}");
    assert_eq!(sc["getaffinity_self"], 0);

    // Its cgroups: its own, with the limits.
    let dirs = a.cgroups().to_vec();
    assert!(!dirs.is_empty());
    let cg = rep["cgroup"].as_str().unwrap();
    for d in &dirs {
        assert!(d.exists());
        let tail = format!("/vrhost/{}", d.file_name().unwrap().to_str().unwrap());
        assert!(tail.starts_with("/vrhost/probe-a.0"), "{tail}");
        assert!(cg.lines().any(|l| l.ends_with(&tail)), "{tail} not in {cg}");
        let read = |f: &str| {
            std::fs::read_to_string(d.join(f))
                .ok()
                .map(|s| s.trim().to_string())
        };
        if let Some(q) = read("cpu.cfs_quota_us") {
            assert_eq!(q, "50000");
            assert_eq!(read("cpu.cfs_period_us").unwrap(), "100000");
        }
        if let Some(m) = read("cpu.max") {
            assert_eq!(m, "50000 100000");
        }
        if let Some(c) = read("cpuset.cpus") {
            assert_eq!(c, "0");
        }
        if let Some(m) = read("memory.limit_in_bytes").or_else(|| read("memory.max")) {
            assert_eq!(m, (64u64 << 20).to_string());
        }
    }
    let joined: String = dirs.iter().map(|d| d.display().to_string()).collect();
    for ctl in ["cpu", "cpuset", "memory"] {
        assert!(joined.contains(ctl), "a {ctl} cgroup in {joined}");
    }
    drop(probes);
    for d in &dirs {
        assert!(!d.exists(), "{} removed with the VR", d.display());
    }
}

/// Each wall holds without the filter too: a VR with its own namespace
/// and user but no seccomp cannot connect to the host's unix socket (the
/// directory is the host's) nor its loopback (another namespace), nor open
/// the other VR's region (the runtime made that process non-dumpable) or
/// the host's (root).
#[test]
fn each_wall_holds_without_the_filter() {
    if !is_root() {
        return;
    }
    let host_sockets = HostSockets::new("walls");
    let (sock, tcp_addr) = (&host_sockets.sock, &host_sockets.tcp_addr);
    let no_filter = Confine {
        seccomp: false,
        no_new_privs: false,
        ..Confine::strict()
    };
    let probes = [
        Probe::start("walls-a", no_filter.clone()),
        Probe::start("walls-b", no_filter),
    ];
    let ra = &probes[0].region;
    let (a, b) = (probes[0].process(), probes[1].process());
    let rep_b = ask(b, json!({}));
    let other = format!("/proc/{}/fd/{}", b.pid(), region_fd(&rep_b));
    let host = format!("/proc/{}/fd/{}", std::process::id(), ra.fd().as_raw_fd());
    let rep = ask(
        a,
        json!({"open": [&other, &host], "unix": [&sock], "tcp": [&tcp_addr]}),
    );
    eprintln!("walls-a: {rep:#}");
    assert_eq!(rep["status"]["Seccomp"], "0");
    assert_eq!(errno_of(&rep, "open", &other), libc::EACCES as i64);
    assert_eq!(errno_of(&rep, "open", &host), libc::EACCES as i64);
    assert_eq!(
        errno_of(&rep, "unix", sock.to_str().unwrap()),
        libc::EACCES as i64
    );
    assert_eq!(errno_of(&rep, "tcp", tcp_addr), libc::ENETUNREACH as i64);

    // And an unconfined VR does reach them (the probe sees what it claims).
    let free = Probe::start("walls-free", Confine::default());
    let rep = ask(free.process(), json!({"unix": [&sock], "tcp": [&tcp_addr]}));
    assert_eq!(errno_of(&rep, "unix", sock.to_str().unwrap()), 0);
    assert_eq!(errno_of(&rep, "tcp", tcp_addr), 0);
}

/// The limits are enforced, not only written: a VR held to half a core
/// gets about half of the wall time it spins, and one that allocates past
/// its memory limit is killed by the kernel while the host goes on.
#[test]
fn the_cgroup_limits_hold() {
    if !is_root() {
        return;
    }
    let mut probe = Probe::start("limits", limited());
    let p = probe.process_mut();
    let rep = ask(p, json!({"spin_ms": 1000}));
    let (cpu, wall) = (
        rep["spin"]["cpu_ms"].as_u64().unwrap(),
        rep["spin"]["wall_ms"].as_u64().unwrap(),
    );
    assert!(
        cpu * 100 <= wall * 65,
        "half a core: {cpu} ms of CPU in {wall} ms"
    );
    // Within the limit: fine.
    ask(p, json!({"alloc": 16u64 << 20}));
    // Past it: the kernel kills it.
    let e = p
        .control()
        .unwrap()
        .request(&json!({"alloc": 128u64 << 20}), Duration::from_secs(20));
    assert!(e.is_err(), "allocated past its limit: {e:?}");
    let t = Instant::now();
    while !p.has_exited() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(p.has_exited());
    assert!(p.exit_status().contains("SIGKILL"), "{}", p.exit_status());
}

/// The built-in router forwards as before when confined (two tenants, a
/// generator and a sink in memory).
#[test]
fn a_confined_router_forwards() {
    if !is_root() {
        return;
    }
    let mut worker = two_tenant_worker();
    let confine = Confine {
        cpu_quota: Some(1.0),
        memory: Some(256 << 20),
        ..Confine::strict()
    };
    for name in ["conf-a", "conf-b"] {
        let cmd = router_cmd(&common::router_config(), confine.clone());
        let path = router_path(&worker, name, 256, &cmd);
        assert!(!path.processes()[0].cgroups().is_empty());
        worker.add_vr(path);
    }
    let (sa, sb) = run_until_both_forward(&mut worker, 10_000);
    let (a, b) = (sa.tx_packets.get(), sb.tx_packets.get());
    worker.shutdown();
    assert!(a > 10_000 && b > 10_000, "both forward: {a} {b}");
}

/// A confined router loads a real route table (the gzip'd ipasn dump in
/// `../shared/data/fib`, half a million routes): the file is readable by
/// nobody, the filter allows what reading it takes, and the table fits the
/// memory limit.
#[test]
fn a_confined_router_loads_a_real_route_file() {
    if !is_root() {
        return;
    }
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let files: Vec<PathBuf> = std::fs::read_dir(data.join("fib"))
        .into_iter()
        .flat_map(|rd| rd.flatten().map(|e| e.path()))
        .collect();
    if files.is_empty() {
        eprintln!("skipped: no route files in {}", data.display());
        return;
    }
    let bell = Doorbell::new().unwrap();
    let r = region("real-routes");
    for f in files {
        vrhost_host::confine::check_access(&f, Ids::NOBODY, false).unwrap();
        let mut cfg = common::router_config();
        cfg.route_file = Some(f.display().to_string());
        let mut procs = Procs::default();
        let confine = Confine {
            memory: Some(512 << 20),
            ..Confine::strict()
        };
        let cmd = router_cmd(&cfg, confine);
        let (p, _bell) = VrProcess::start("real-routes", 0, &r, &bell, &cmd)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        procs.0.push(p);
    }
}

/// What cannot work fails at once with a message that says what: a limit
/// the kernel refuses, a program the VR's user cannot reach, a route file
/// it cannot read. Nothing is left behind.
#[test]
fn confinement_failures_are_clear() {
    if !is_root() {
        return;
    }
    let bell = Doorbell::new().unwrap();
    let r = region("fail");
    // A CPU the cpuset refuses (the config check would have said so).
    let bad_cpu = Confine {
        cpus: Some(vec![4000]),
        ..Confine::strict()
    };
    let e = VrProcess::start("fail-cpuset", 0, &r, &bell, &probe_cmd(bad_cpu))
        .map(drop)
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, SpawnError::Confine { .. }), "{msg}");
    assert!(
        msg.contains("VR fail-cpuset: confinement:") && msg.contains("cpuset.cpus"),
        "{msg}"
    );
    let leftovers = find_cgroups("fail-cpuset.0");
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A program in a directory only root may enter (a build under /root)
    // starts as nobody: the host opens it, the VR executes the descriptor.
    let dir = TestDir::new("closed");
    let link = dir.0.join("vrhost-testvr");
    std::os::unix::fs::symlink(common::testvr(), &link).unwrap();
    let mut cmd = probe_cmd(Confine::strict());
    cmd.program = link.clone();
    let mut procs = Procs::default();
    procs.0.push(
        VrProcess::start("closed-exec", 0, &r, &bell, &cmd)
            .unwrap()
            .0,
    );
    drop(procs);
    // A program nobody may not execute is refused, naming it.
    let own = dir.0.join("own-only");
    std::fs::write(&own, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o700)).unwrap();
    cmd.program = own.clone();
    let msg = VrProcess::start("fail-exec", 0, &r, &bell, &cmd)
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("cannot be executed by uid 65534") && msg.contains(own.to_str().unwrap()),
        "{msg}"
    );

    // A route file the router, as nobody, cannot read: the VR says so.
    let routes = dir.0.join("routes.txt");
    std::fs::write(&routes, "10.9.0.0/16\n").unwrap();
    let mut cfg = common::router_config();
    cfg.route_file = Some(routes.display().to_string());
    let t = Instant::now();
    let e = VrProcess::start(
        "fail-routes",
        0,
        &r,
        &bell,
        &router_cmd(&cfg, Confine::strict()),
    )
    .map(drop)
    .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, SpawnError::Refused { .. }), "{msg}");
    assert!(
        msg.contains("route_file") && msg.contains("Permission denied"),
        "{msg}"
    );
    assert!(t.elapsed() < Duration::from_secs(10), "no hang");
    assert!(find_cgroups("fail-routes.0").is_empty());
}

/// Cgroup directories named `name` (or `name-N`) under any `vrhost`
/// directory of the cgroup mounts.
/// A start that may wait for idle time (an operator's change) runs in the
/// idle class, its threads and its cgroup, until the VR is ready; then in
/// the normal class; and in the idle class again once asked to stop. A
/// start that waits past `idle_start` is put in the normal class then. Its
/// task is named after the VR.
#[test]
fn a_vr_starts_and_stops_in_the_idle_class() {
    if !is_root() {
        return;
    }
    let cpu_idle = |p: &VrProcess| -> Vec<String> {
        p.cgroups()
            .iter()
            .filter_map(|d| std::fs::read_to_string(d.join("cpu.idle")).ok())
            .map(|s| s.trim().to_string())
            .collect()
    };
    let bell = Doorbell::new().unwrap();
    let mut procs = Procs::default();
    for (name, wait) in [("idle-a", 20_000), ("idle-b", 1)] {
        let r = region(name);
        let cmd = VrCommand {
            idle_start: Duration::from_millis(wait),
            ..probe_cmd(Confine::strict())
        };
        let (p, _bell) = VrProcess::start(name, 0, &r, &bell, &cmd).unwrap();
        procs.0.push(p);
        let p = procs.0.last().unwrap();
        let rep = ask(p, json!({}));
        if wait > 1 {
            assert_eq!(rep["policy_at_start"], libc::SCHED_IDLE, "{rep:#}");
        }
        assert_eq!(rep["policy"], libc::SCHED_OTHER, "{rep:#}");
        // Named after its VR (not the descriptor it was started through).
        assert_eq!(rep["comm"], format!("{name}.0"), "{rep:#}");
        let v = cpu_idle(p);
        assert!(v.iter().all(|v| v == "0"), "{name} ready: cpu.idle {v:?}");
        p.ask_stop();
        let v = cpu_idle(p);
        assert!(
            v.iter().all(|v| v == "1"),
            "{name} stopping: cpu.idle {v:?}"
        );
    }
    // A start that may not wait stays in the normal class (at nice 19).
    let r = region("idle-c");
    let (p, _bell) =
        VrProcess::start("idle-c", 0, &r, &bell, &probe_cmd(Confine::strict())).unwrap();
    procs.0.push(p);
    let rep = ask(procs.0.last().unwrap(), json!({}));
    assert_eq!(rep["policy_at_start"], libc::SCHED_OTHER, "{rep:#}");
    assert_eq!(
        cpu_idle(procs.0.last().unwrap())
            .iter()
            .filter(|v| *v == "1")
            .count(),
        0
    );
}

/// An idle start stops waiting when the control plane hurries it (a VR
/// that went down waits behind it): a VR that can get ready only in the
/// normal class starts then, and without the hurry runs out of its ready
/// timeout in the idle class.
#[test]
fn a_hurried_idle_start_takes_a_normal_share_at_once() {
    if !is_root() {
        return;
    }
    let bell = Doorbell::new().unwrap();
    let mut procs = Procs::default();
    let cmd = |hurry: &Hurry| VrCommand {
        idle_start: Duration::from_secs(600),
        ready_timeout: Duration::from_secs(3),
        config: json!({ "ready_when_normal": true }),
        hurry: hurry.clone(),
        ..probe_cmd(Confine::strict())
    };
    let r = region("hurry-a");
    let Err(err) = VrProcess::start("hurry-a", 0, &r, &bell, &cmd(&Hurry::default())) else {
        panic!("ready while idle");
    };
    assert!(err.to_string().contains("no answer"), "{err}");
    // Raised while it waits.
    let hurry = Hurry::default();
    let raise = {
        let h = hurry.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            h.set(true);
        })
    };
    let r = region("hurry-b");
    let (p, _bell) = VrProcess::start("hurry-b", 0, &r, &bell, &cmd(&hurry)).unwrap();
    raise.join().unwrap();
    procs.0.push(p);
    let rep = ask(procs.0.last().unwrap(), json!({}));
    assert_eq!(rep["policy_at_start"], libc::SCHED_IDLE, "{rep:#}");
    assert_eq!(rep["policy"], libc::SCHED_OTHER, "{rep:#}");
}

fn find_cgroups(name: &str) -> Vec<PathBuf> {
    fn walk(d: &Path, name: &str, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let f = e.file_name().to_string_lossy().into_owned();
            let in_vrhost = d.file_name().is_some_and(|n| n == "vrhost");
            if in_vrhost && (f == name || f.starts_with(&format!("{name}-"))) {
                out.push(p.clone());
            }
            if depth < 6 {
                walk(&p, name, depth + 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), name, 0, &mut out);
    out
}

/// A VR given its own user runs as that user.
#[test]
fn a_vr_runs_as_its_own_user() {
    if !is_root() {
        return;
    }
    let c = Confine {
        user: Some(Ids {
            uid: 4_000_123,
            gid: 4_000_124,
        }),
        ..Confine::strict()
    };
    let probe = Probe::start("own-user", c);
    let rep = ask(probe.process(), json!({}));
    assert_eq!(rep["status"]["Uid"], "4000123 4000123 4000123 4000123");
    assert_eq!(rep["status"]["Gid"], "4000124 4000124 4000124 4000124");
}

/// A network namespace of a test, removed on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Self {
        let name = format!("vrh-{tag}-{}", std::process::id());
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &name])
            .output();
        let out = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .unwrap();
        assert!(out.status.success(), "ip netns add {name}: {out:?}");
        Self(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .output();
    }
}

/// `ip netns exec NS vrhost daemon ...`, the usual way to start a program
/// in a namespace, mounts a new sysfs on `/sys` in a mount namespace of its
/// own, which hides the cgroup hierarchies mounted under `/sys/fs/cgroup`.
/// The daemon finds them through PID 1's mount table, and its confined VR
/// runs in cgroups of its own with its limits.
#[test]
fn a_daemon_started_by_ip_netns_exec_confines_its_vrs() {
    if !is_root() {
        return;
    }
    let ns = Netns::new("nsx");
    let limited = vrhost_api::VrSpec {
        slots: Some(256),
        memory: Some("64M".into()),
        cpu_quota: Some(0.5),
        ..common::Lab::router("limited", 1)
    };
    let config = common::Lab::ports()
        .with_vr(limited, 1)
        .paced(1000)
        .limit(1000)
        .to_toml();
    let d = common::Daemon::start_under("nsexec", &config, &["ip", "netns", "exec", &ns.0]);
    // It runs in the namespace.
    let netns_of = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    let named = std::fs::metadata(format!("/run/netns/{}", ns.0)).unwrap();
    use std::os::unix::fs::MetadataExt;
    let daemon_ns = std::fs::metadata(format!("/proc/{}/ns/net", d.child.id())).unwrap();
    assert_eq!(
        (daemon_ns.dev(), daemon_ns.ino()),
        (named.dev(), named.ino()),
        "the daemon is not in {}: {:?}",
        ns.0,
        netns_of(d.child.id())
    );
    let s = d.wait_for("the VR to run", Duration::from_secs(60), |s| {
        common::vr(s, "limited")["state"] == "running"
    });
    let pid = common::vr(&s, "limited")["instances"][0]["pid"]
        .as_u64()
        .expect("a pid") as u32;
    // Its memory cgroup, seen from the test's own mount namespace, holds
    // it and has its limit.
    let dir = common::memory_cgroup(pid);
    assert!(dir.ends_with("vrhost/limited.0"), "{}", dir.display());
    let limit = ["memory.limit_in_bytes", "memory.max"]
        .into_iter()
        .find_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .expect("a memory limit file");
    assert_eq!(limit.trim(), (64u64 << 20).to_string());
    drop(d);
}
