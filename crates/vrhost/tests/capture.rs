//! `vrhost capture` against a real daemon forwarding in memory (a paced
//! `mem` generator port into two router VRs, out to a `null` port), read by
//! a real `tcpdump -r -`: the filter runs in the daemon, `-c` stops the
//! stream, a capture whose client goes away is detached, refusals are
//! clear, the client's summary counts what it wrote, and the VR beside the
//! captured one is not touched. What a full-rate capture costs the VR
//! beside it is measured by `vrhost bench capture`.

mod common;

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Daemon, Lab, vr_stats, wait_drained};
use serde_json::Value;

/// Frames the generator sends in all (at `PPS`, about 10 s).
const FRAMES: u64 = 100_000;
const PPS: u64 = 10_000;

/// Two router VRs: a gets 10.1.128.0/17, b 10.2.128.0/17, both on core 0,
/// the host worker on core 1.
fn config() -> String {
    let mut lab = Lab::two_vrs().paced(PPS).limit(FRAMES).with_host_cpu(1);
    for vr in &mut lab.vrs {
        vr.cpu = Some(0);
    }
    lab.to_toml()
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn drops(st: &Value) -> u64 {
    st["ingress_drops"]
        .as_object()
        .unwrap()
        .values()
        .map(n)
        .sum::<u64>()
        + n(&st["vr_dropped"])
        + n(&st["port_dropped"])
}

/// Wait for `child` to exit, killing it (and failing) after `limit`.
fn wait(mut child: Child, limit: Duration, what: &str) -> Output {
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Run a capture command that must be refused; returns its stderr.
fn refused(d: &Daemon, args: &[&str]) -> String {
    let child = d
        .cli(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait(child, Duration::from_secs(30), &args.join(" "));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} was accepted");
    err
}

/// The destination address of a line of `tcpdump -nn -r -`.
fn dst(line: &str) -> std::net::Ipv4Addr {
    let after = line.split(" > ").nth(1).unwrap_or_else(|| panic!("{line}"));
    let addr_port = after.split(':').next().unwrap();
    let mut parts: Vec<&str> = addr_port.split('.').collect();
    parts.truncate(4);
    parts.join(".").parse().unwrap_or_else(|_| panic!("{line}"))
}

#[test]
fn capture_filters_counts_detaches_and_leaves_the_other_vr_alone() {
    let d = Daemon::start("capture", &config());
    let dir = d.dir().to_path_buf();
    let t = Instant::now();
    loop {
        let s = d.stats();
        if n(&vr_stats(&s, "a")["tx_packets"]) > 100 && n(&vr_stats(&s, "b")["tx_packets"]) > 100 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no traffic: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Twenty frames of a that the filter passes, read by tcpdump: into a
    // (dst 10.1.192.0/18 on vNIC 0) and out of it (the same frames
    // forwarded on vNIC 1); none of the other half of a's prefix.
    let mut cap = d
        .cli(&[
            "capture",
            "a",
            "-c",
            "20",
            "--filter",
            "udp and dst net 10.1.192.0/18",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tcpdump = Command::new("tcpdump")
        .args(["-nn", "-r", "-"])
        .stdin(Stdio::from(cap.stdout.take().unwrap()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump (Debian package tcpdump, installed by scripts/install)");
    let out = wait(tcpdump, Duration::from_secs(30), "tcpdump -r -");
    let mut err = String::new();
    cap.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(cap.wait().unwrap().success(), "vrhost capture: {err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tcpdump: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 20, "{text}");
    for l in &lines {
        assert!(l.contains(" UDP, length "), "{l}");
        let a = dst(l).octets();
        assert!(a[0] == 10 && a[1] == 1 && a[2] >= 192, "{l}");
    }

    // Ctrl-C ends a capture with its summary, which counts what the file
    // holds.
    let file = dir.join("interrupted.pcap");
    let mut child = d
        .cli(&["capture", "b", "-w", file.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let mut said = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{said}");
    let written: u64 = said
        .lines()
        .find_map(|l| l.strip_suffix(" frames captured")?.parse().ok())
        .unwrap_or_else(|| panic!("no summary: {said}"));
    assert!(written > 0, "{said}");
    let out = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count() as u64,
        written,
        "{said}"
    );

    // One vNIC: vNIC 0 is the generator's side (frames into a, from the
    // generator's MAC), vNIC 1 the sink's (frames out of a, from a's vNIC 1
    // MAC); the snaplen reaches the file's header.
    for (vnic, src_mac) in [
        ("a:0", "02:00:00:00:00:01 >"),
        ("a:1", "02:00:00:0a:01:01 >"),
    ] {
        let file = dir.join("one-vnic.pcap");
        let child = d
            .cli(&[
                "capture",
                vnic,
                "-c",
                "5",
                "-s",
                "64",
                "-w",
                file.to_str().unwrap(),
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait(child, Duration::from_secs(30), vnic);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        // Its summary, as tcpdump's.
        assert!(said.contains("5 frames captured\n"), "{said}");
        assert!(
            said.contains("frames of a not kept by the daemon"),
            "{said}"
        );
        let out = Command::new("tcpdump")
            .args(["-nn", "-e", "-r"])
            .arg(&file)
            .output()
            .unwrap();
        let (text, err) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(err.contains("snapshot length 64"), "{err}");
        assert_eq!(text.lines().count(), 5, "{vnic}: {text}");
        for l in text.lines() {
            assert!(l.contains(src_mac), "{vnic}: {l}");
        }
    }

    // A filter that matches nothing: no frame, the stream stays open
    // until the client goes away; then the capture is detached.
    let quiet = dir.join("quiet.pcap");
    let mut q = d
        .cli(&[
            "capture",
            "a",
            "-c",
            "5",
            "--filter",
            "tcp",
            "-w",
            quiet.to_str().unwrap(),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(q.try_wait().unwrap().is_none(), "it ended without frames");
    assert_eq!(
        std::fs::metadata(&quiet).map(|m| m.len()).unwrap_or(0),
        24,
        "only the pcap header"
    );
    // Meanwhile a second capture of a is refused; b can be captured.
    let err = refused(&d, &["capture", "a", "-w", "/dev/null"]);
    assert!(
        err.contains("already being captured") && err.contains("409"),
        "{err}"
    );
    let child = d
        .cli(&["capture", "b", "-c", "3", "-w", "/dev/null"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait(child, Duration::from_secs(30), "capture b");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    q.kill().unwrap();
    q.wait().unwrap();
    // The daemon sees the closed connection and detaches.
    let t = Instant::now();
    loop {
        let child = d
            .cli(&["capture", "a", "-c", "1", "-w", "/dev/null"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait(child, Duration::from_secs(30), "capture a after a kill");
        if out.status.success() {
            break;
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("409"), "{err}");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the killed client's capture was not detached: {err}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Refusals: clear messages, non-zero exit, nothing written.
    let bad = dir.join("bad.pcap");
    let err = refused(
        &d,
        &[
            "capture",
            "a",
            "--filter",
            "udp and nonsense",
            "-w",
            bad.to_str().unwrap(),
        ],
    );
    assert!(
        err.contains("filter") && err.contains("syntax error") && err.contains("400"),
        "{err}"
    );
    assert!(!bad.exists(), "a refused capture left a file");
    let err = refused(&d, &["capture", "nosuch", "-w", "/dev/null"]);
    assert!(
        err.contains("no VR \"nosuch\"") && err.contains("404"),
        "{err}"
    );
    let err = refused(&d, &["capture", "a:5", "-w", "/dev/null"]);
    assert!(err.contains("has 2 vNICs") && err.contains("400"), "{err}");
    let err = refused(&d, &["capture", "a", "-s", "10"]);
    assert!(err.contains("64..=65535"), "{err}");

    // A capture of all of b's frames while the generator runs on: once it
    // is done, every frame of a and b came out and nothing was dropped on
    // the data path. The capture thread runs in the idle class on the
    // worker's core, so whether it keeps up depends on the machine; what
    // must hold anyway is its accounting: each frame of b it was offered
    // is written or counted as not kept, and the client and the daemon
    // agree on that count.
    let before = d.stats();
    let all_b = d
        .cli(&["capture", "b", "-w", "/dev/null"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let s = wait_drained(&["a", "b"], FRAMES, || d.stats());
    // Ctrl-C: the client prints its summary and exits.
    let st = Command::new("kill")
        .args(["-INT", &all_b.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = wait(all_b, Duration::from_secs(30), "capture b after Ctrl-C");
    let err = String::from_utf8_lossy(&out.stderr);
    let count = |suffix: &str| {
        err.lines()
            .find_map(|l| l.strip_suffix(suffix)?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no \"N{suffix}\" in: {err}"))
    };
    let written = count(" frames captured");
    let not_kept = count(" frames of b not kept by the daemon (no free capture buffer)");
    let (b0, b1) = (vr_stats(&before, "b"), vr_stats(&s, "b"));
    let offered = 2 * (n(&b1["tx_packets"]) - n(&b0["tx_packets"]));
    assert!(written > 0, "the capture of b wrote nothing: {err}");
    assert_eq!(
        not_kept,
        n(&b1["capture_dropped"]) - n(&b0["capture_dropped"]),
        "client and daemon disagree on what was not kept: {err}"
    );
    assert!(
        written + not_kept <= offered,
        "{written} written + {not_kept} not kept > {offered} frames of b in and out"
    );
    let (a0, a1) = (vr_stats(&before, "a"), vr_stats(&s, "a"));
    assert!(
        n(&a1["tx_packets"]) > n(&a0["tx_packets"]),
        "a forwarded during b's capture"
    );
    let mut total = 0;
    for name in ["a", "b"] {
        let st = vr_stats(&s, name);
        assert_eq!(drops(st), 0, "VR {name} dropped frames: {st}");
        total += n(&st["tx_packets"]);
    }
    assert_eq!(total, FRAMES, "{s}");
}
