//! The default lab with real tools: vrhost (each driver) forwards between
//! namespaces; ping, tcpdump/tshark, iperf3 and the kernels' neighbour
//! tables check what it does. Root only (namespaces); every lab gets its own
//! prefix and is removed even when a check fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vrhost_lab::Lab;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The default lab and daemon config, with prefix `prefix` and every port
/// on `driver`, written to a temporary directory.
struct TestLab {
    lab: Lab,
    dir: PathBuf,
    daemon: Option<Child>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl TestLab {
    fn new(prefix: &str, driver: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("vrhost-test-{prefix}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lab_src = std::fs::read_to_string(repo().join("lab/default.toml"))
            .unwrap()
            .replace("prefix = \"vrh\"", &format!("prefix = \"{prefix}\""));
        let cfg_src = std::fs::read_to_string(repo().join("lab/default-vrhost.toml"))
            .unwrap()
            .replace("driver = \"af_xdp\"", &format!("driver = \"{driver}\""));
        std::fs::write(dir.join("default.toml"), lab_src).unwrap();
        std::fs::write(dir.join("default-vrhost.toml"), cfg_src).unwrap();
        let lab = Lab::load(&dir.join("default.toml")).unwrap();
        lab.down();
        lab.up().unwrap();
        Self {
            lab,
            dir,
            daemon: None,
            stderr: Default::default(),
        }
    }

    fn start_vrhost(&mut self) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vrhost"))
            .args(["daemon", "--stats-secs", "0", "--netns"])
            .arg(self.lab.ns_name("node"))
            // Each test its own API socket: the tests run side by side.
            .arg("--api")
            .arg(self.dir.join("api.sock"))
            .arg("--config")
            .arg(self.dir.join("default-vrhost.toml"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Ready when it says so on stderr; stderr is drained to the end so
        // the daemon never writes into a closed pipe.
        let err = child.stderr.take().unwrap();
        let seen = self.stderr.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                seen.lock().unwrap().push_str(&(l + "\n"));
            }
        });
        let t = Instant::now();
        while !self.stderr.lock().unwrap().contains("vrhost daemon:")
            && t.elapsed() < Duration::from_secs(30)
            && child.try_wait().unwrap().is_none()
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let seen = self.stderr.lock().unwrap().clone();
        assert!(
            seen.contains("vrhost daemon:"),
            "daemon did not start: {seen}"
        );
        self.daemon = Some(child);
    }

    /// Stop vrhost and return its stdout (the final counters).
    fn stop_vrhost(&mut self) -> String {
        let child = self.daemon.take().unwrap();
        let pid = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = self.stderr.lock().unwrap().clone();
        assert!(out.status.success(), "daemon failed: {stdout} {stderr}");
        stdout
    }
}

impl Drop for TestLab {
    fn drop(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.lab.down();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn forwarding_with_real_tools(prefix: &str, driver: &str) {
    let mut t = TestLab::new(prefix, driver);
    t.start_vrhost();
    let genh = t.lab.ns("gen");
    let sink = t.lab.ns("sink");

    // Capture at the sink while pinging through tenant A's VR.
    let pcap = t.dir.join("sink.pcap");
    let mut dump = sink
        .command("tcpdump")
        .args(["-i", "eth0", "-U", "-n", "-w"])
        .arg(&pcap)
        .args(["icmp", "and", "dst", "host", "10.1.1.2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Capturing once it says it listens (a loaded machine starts it late).
    {
        use std::io::BufRead;
        let err = dump.stderr.take().unwrap();
        let mut lines = std::io::BufReader::new(err).lines();
        let ready = lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.contains("listening on"));
        assert!(ready, "tcpdump did not start");
        std::thread::spawn(move || lines.for_each(drop));
    }
    let ping = genh.exec("ping", &["-c", "5", "-i", "0.2", "-W", "2", "10.1.1.2"]);
    // Tenant B through its own VR.
    let ping_b = genh.exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", "10.2.1.2"]);
    std::thread::sleep(Duration::from_millis(300));
    let pid = rustix::process::Pid::from_child(&dump);
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    let _ = dump.wait();
    let ping = ping.unwrap();
    assert!(!ping.contains(" 0 received"), "{ping}");
    assert!(!ping_b.unwrap().contains(" 0 received"));

    // What arrived at the sink: TTL 63 (gen sends 64), valid checksums,
    // source MAC = tenant A's vNIC on p1, destination = the sink.
    let fields = vrhost_lab::cmd(
        "tshark",
        &[
            "-r",
            &pcap.display().to_string(),
            "-o",
            "ip.check_checksum:TRUE",
            "-T",
            "fields",
            "-e",
            "ip.ttl",
            "-e",
            "ip.checksum.status",
            "-e",
            "eth.src",
            "-e",
            "eth.dst",
        ],
    )
    .unwrap();
    let lines: Vec<&str> = fields.lines().filter(|l| !l.trim().is_empty()).collect();
    // Every request that reached the sink is checked; under load a ping
    // may be lost, so at least one must be there.
    assert!(
        !lines.is_empty(),
        "sink saw {} echo requests: {fields}",
        lines.len()
    );
    for l in &lines {
        let f: Vec<&str> = l.split('\t').collect();
        assert_eq!(f[0], "63", "TTL not decremented: {l}");
        assert_eq!(f[1], "1", "IP checksum not good (1 = good): {l}");
        assert_eq!(f[2], "02:00:00:0a:01:01", "source MAC not rewritten: {l}");
        assert_eq!(f[3], "02:00:00:00:00:20", "destination MAC: {l}");
    }

    // ARP both ways: the hosts learned the VRs' MACs (they asked), and the
    // VR asked the sink (the sink's kernel learned the VR from its request).
    let gen_neigh = genh.ip(&["neigh", "show", "10.1.0.1"]).unwrap();
    assert!(gen_neigh.contains("02:00:00:0a:00:01"), "{gen_neigh}");
    let sink_neigh = sink.ip(&["neigh", "show", "10.1.1.1"]).unwrap();
    assert!(sink_neigh.contains("02:00:00:0a:01:01"), "{sink_neigh}");

    // The VR answers ping to its own address.
    let own = genh
        .exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", "10.1.0.1"])
        .unwrap();
    assert!(!own.contains(" 0 received"), "{own}");

    // TCP through the VR completes.
    let gbps = vrhost_lab::tools::iperf3(&t.lab, "sink", "gen", "10.1.1.2", 1).unwrap();
    assert!(gbps > 0.0);

    let summary = t.stop_vrhost();
    // Both VRs forwarded, and nothing they handed back was refused.
    for vr in ["tenant-a", "tenant-b"] {
        let line = summary
            .lines()
            .find(|l| l.starts_with(&format!("vr {vr} ")))
            .unwrap_or_else(|| panic!("no summary of {vr}: {summary}"));
        let num = |key: &str| -> u64 {
            let rest = &line[line.find(key).unwrap() + key.len()..];
            rest.split_whitespace().next().unwrap().parse().unwrap()
        };
        assert!(num(" out ") > 0, "{line}");
        assert_eq!(num("violations "), 0, "{line}");
    }
}

#[test]
fn af_xdp_forwards_with_real_tools() {
    forwarding_with_real_tools("vrtx", "af_xdp");
}

#[test]
fn af_packet_forwards_with_real_tools() {
    forwarding_with_real_tools("vrtp", "af_packet");
}

#[test]
fn socket_forwards_with_real_tools() {
    forwarding_with_real_tools("vrts", "socket");
}

#[test]
fn a_bad_config_is_refused_and_leaves_nothing_running() {
    let t = TestLab::new("vrtb", "af_packet");
    let cfg = t.dir.join("bad.toml");
    let src = std::fs::read_to_string(t.dir.join("default-vrhost.toml"))
        .unwrap()
        .replace("interface = \"p1\"", "interface = \"nosuch0\"");
    std::fs::write(&cfg, src).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args(["daemon", "--netns"])
        .arg(t.lab.ns_name("node"))
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("nosuch0"), "{err}");
    // The af_packet port p0 it had opened is closed again: nothing else
    // holds the interface (no leftover XDP program either).
    let link = t.lab.ns("node").ip(&["link", "show", "p0"]).unwrap();
    assert!(!link.contains("xdp"), "{link}");
}

/// CPU time (user + system, all threads) of process `pid`, in clock
/// ticks, from /proc (0 once it is gone).
fn proc_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the line, the 12th and 13th after it.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    f.iter().sum()
}

/// The daemon's stats, through its API.
fn stats(api: &vrhost_client::Client) -> serde_json::Value {
    api.get("/v1/stats").unwrap().decode().unwrap()
}

/// VR `tenant-a`'s stats in `s`.
fn vr_a(s: &serde_json::Value) -> serde_json::Value {
    s["vrs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "tenant-a")
        .unwrap()
        .clone()
}

/// The CPUs a thread or process may run on (`Cpus_allowed_list` of the
/// status file under `dir`, a /proc entry).
fn cpus_allowed(dir: &Path) -> String {
    let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:"));
    line.and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_string()
}

/// The CPUs the daemon's worker thread may run on.
fn worker_cpus(t: &TestLab) -> String {
    let daemon = t.daemon.as_ref().unwrap().id();
    let tasks = std::fs::read_dir(format!("/proc/{daemon}/task")).unwrap();
    let worker = tasks.flatten().map(|e| e.path()).find(|p| {
        std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim() == "vrhost-worker")
    });
    cpus_allowed(&worker.expect("the daemon's worker thread"))
}

/// The CPUs process `pid` may run on.
fn proc_cpus(pid: u32) -> String {
    cpus_allowed(Path::new(&format!("/proc/{pid}")))
}

/// Start the default lab's daemon with `poll` added to `[host.poll]`,
/// resolve the neighbours with a few pings, and wait for tenant-a's idle
/// process to be moved onto the worker's core (host.cpu = 1, or where the
/// worker followed the pings' frames: `follow_rx`) when the worker
/// supervises it; returns the API and tenant-a's pid.
fn idle_vr_on_the_workers_core(t: &mut TestLab, poll: &str) -> (vrhost_client::Client, u32) {
    let cfg = t.dir.join("default-vrhost.toml");
    let src = std::fs::read_to_string(&cfg).unwrap();
    assert!(src.contains("busy_poll_us = 0\n"));
    let src = src.replace("busy_poll_us = 0\n", &format!("busy_poll_us = 0\n{poll}"));
    std::fs::write(&cfg, src).unwrap();
    t.start_vrhost();
    let api =
        vrhost_client::Client::new(vrhost_client::Endpoint::Unix(t.dir.join("api.sock")), None)
            .unwrap();
    let warm = t
        .lab
        .ns("gen")
        .exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", "10.1.1.2"])
        .unwrap();
    assert!(!warm.contains(" 0 received"), "{warm}");
    let t0 = Instant::now();
    let pid = loop {
        let s = stats(&api);
        let pid = vr_a(&s)["instances"][0]["pid"].as_u64().unwrap() as u32;
        let (vr, worker) = (proc_cpus(pid), worker_cpus(t));
        if s["host"]["colocations"].as_u64().unwrap() >= 1 && vr == worker && !vr.contains('-') {
            break pid;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "tenant-a not moved to the worker's core: {s} VR on {vr}, worker on {worker}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    (api, pid)
}

/// After an idle second, one ping through tenant-a, answered; returns
/// the stats before and 100 ms after it.
fn one_ping_after_an_idle_second(
    t: &TestLab,
    api: &vrhost_client::Client,
) -> (serde_json::Value, serde_json::Value) {
    std::thread::sleep(Duration::from_secs(1));
    let before = stats(api);
    let ping = t
        .lab
        .ns("gen")
        .exec("ping", &["-c", "1", "-W", "2", "10.1.1.2"])
        .unwrap();
    assert!(ping.contains(" 1 received"), "{ping}");
    std::thread::sleep(Duration::from_millis(100));
    (before, stats(api))
}

/// Share of a core the daemon (every thread) and the VRs use over an
/// idle second, after half a second's rest.
fn idle_cpu(t: &TestLab, api: &vrhost_client::Client) -> f64 {
    std::thread::sleep(Duration::from_millis(500));
    let daemon = t.daemon.as_ref().unwrap().id();
    let s = stats(api);
    let pids: Vec<u32> = std::iter::once(daemon)
        .chain(
            s["vrs"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|v| v["instances"][0]["pid"].as_u64().map(|p| p as u32)),
        )
        .collect();
    let ticks = || pids.iter().map(|&p| proc_ticks(p)).sum::<u64>();
    let (a, t1) = (ticks(), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    (ticks() - a) as f64 / 100.0 / t1.elapsed().as_secs_f64()
}

/// Process `pid` stayed on the worker's core, and the idle daemon and VRs
/// use next to no CPU; then stop the daemon.
fn stays_and_idles_for_free(t: &mut TestLab, api: &vrhost_client::Client, pid: u32) {
    assert_eq!(
        proc_cpus(pid),
        worker_cpus(t),
        "the VR on the worker's core"
    );
    // Generous: a spinning worker or VR takes most of a core, even on a
    // busy machine a good share of one; an idle one about nothing.
    let used = idle_cpu(t, api);
    assert!(
        used < 0.05,
        "idle daemon and VRs used {:.1}% of a core",
        used * 100.0
    );
    t.stop_vrhost();
}

fn inst(s: &serde_json::Value, k: &str) -> u64 {
    vr_a(s)["instances"][0][k].as_u64().unwrap()
}

fn host(s: &serde_json::Value, k: &str) -> u64 {
    s["host"][k].as_u64().unwrap()
}

/// A ping through an idle VR with naps and co-location on: the VR's
/// process was moved onto the worker's core (its affinity says so), a
/// ping after an idle second is answered, the worker napped while the VR
/// turned it around and the VR slept again after it; and the idle daemon
/// and VR use next to no CPU (nothing spins while idle).
#[test]
fn an_idle_vr_on_the_workers_core_answers_the_first_ping_and_idles_for_free() {
    let mut t = TestLab::new("vrti", "af_xdp");
    let (api, pid) = idle_vr_on_the_workers_core(
        &mut t,
        "nap_us = 50\ncolocate_pps = 1000\nfollow_rx = false\n",
    );
    let (before, after) = one_ping_after_an_idle_second(&t, &api);
    // Without `follow_rx` the worker stays on its core whatever CPU the
    // pings came from.
    assert_eq!(worker_cpus(&t), "1");
    assert_eq!(host(&after, "follows"), 0, "{after}");
    // The request and the reply went through tenant-a, which went back
    // to sleep after each; the worker napped meanwhile.
    assert_eq!(inst(&after, "rx_packets") - inst(&before, "rx_packets"), 2);
    assert!(inst(&after, "sleeps") > inst(&before, "sleeps"), "{after}");
    assert!(host(&after, "naps") > host(&before, "naps"), "{after}");
    stays_and_idles_for_free(&mut t, &api, pid);
}

/// With the default `[host.poll]` (co-location on, no extra key), the
/// idle VR is moved onto the worker's core; a ping after an idle second
/// goes through it, the worker ringing it for the request and again for
/// the reply (it sleeps in between: no core polls for it), and the
/// idle daemon and VRs use next to no CPU.
#[test]
fn with_the_defaults_an_idle_vr_runs_on_the_workers_core_and_sleeps_between_frames() {
    let mut t = TestLab::new("vrtf", "af_xdp");
    let (api, pid) = idle_vr_on_the_workers_core(&mut t, "");
    let (before, after) = one_ping_after_an_idle_second(&t, &api);
    assert_eq!(inst(&after, "rx_packets") - inst(&before, "rx_packets"), 2);
    let kicks = |s: &serde_json::Value| vr_a(s)["stats"]["kicks"].as_u64().unwrap();
    // Twice, unless the reply came before it was back to sleep.
    let rung = kicks(&after) - kicks(&before);
    assert!((1..=2).contains(&rung), "{before} {after}");
    assert!(
        inst(&after, "sleeps") >= inst(&before, "sleeps") + rung,
        "{after}"
    );
    stays_and_idles_for_free(&mut t, &api, pid);
}

/// Ping from `cpu` in the generator's namespace: `args` then the
/// destination (tenant-a's sink side).
fn ping_from(t: &TestLab, cpu: &str, args: &[&str]) -> String {
    let a = [&["-c", cpu, "ping"], args, &["10.1.1.2"]].concat();
    t.lab.ns("gen").exec("taskset", &a).unwrap()
}

/// Wait (bounded) until the worker and process `pid` both run on `cpu`
/// and the worker has followed its frames `follows` times or more.
fn wait_on(t: &TestLab, api: &vrhost_client::Client, pid: u32, cpu: &str, follows: u64) {
    let t0 = Instant::now();
    loop {
        let s = stats(api);
        let (w, v) = (worker_cpus(t), proc_cpus(pid));
        if w == cpu && v == cpu && host(&s, "follows") >= follows {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "worker on {w}, VR on {v}, want {cpu} and {follows} follows: {}",
            s["host"]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// With the defaults (`follow_rx`), pings sent from CPU 0 draw the worker
/// (host.cpu = 1) and the idle VR on its core to CPU 0, where the pings'
/// frames are received (veth runs a frame's receive on the sender's CPU);
/// a flood of pings, offered more than twice `colocate_pps` (lowered to
/// 100 here), sends the worker back to its own core while it lasts, and
/// once it is over the next sleep follows the frames to CPU 0 again. The
/// idle daemon and VR still use next to no CPU.
#[test]
fn a_light_flow_draws_the_worker_and_its_vr_to_the_cpu_its_frames_arrive_on() {
    let mut t = TestLab::new("vrtw", "af_xdp");
    let (api, pid) = idle_vr_on_the_workers_core(&mut t, "colocate_pps = 100\n");
    let ping = ping_from(&t, "0", &["-c", "5", "-i", "0.1", "-W", "2"]);
    assert!(ping.contains(" 5 received"), "{ping}");
    wait_on(&t, &api, pid, "0", 1);
    let before = host(&stats(&api), "follows");
    // Flood: one ping in flight at a time, thousands a second (a few may
    // be lost, which makes ping exit with 1: its output is what counts).
    let flood = t
        .lab
        .ns("gen")
        .command("taskset")
        .args([
            "-c", "0", "ping", "-f", "-c", "3000", "-w", "20", "10.1.1.2",
        ])
        .output()
        .unwrap();
    let flood = String::from_utf8_lossy(&flood.stdout);
    assert!(
        flood.contains(" received") && !flood.contains(" 0 received"),
        "{flood}"
    );
    // Light again once the load estimate (a 100 ms EWMA) has fallen.
    let ping = ping_from(&t, "0", &["-c", "10", "-i", "0.2", "-W", "2"]);
    assert!(ping.contains(" 10 received"), "{ping}");
    wait_on(&t, &api, pid, "0", before + 2);
    stays_and_idles_for_free(&mut t, &api, pid);
}
