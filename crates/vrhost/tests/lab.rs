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
