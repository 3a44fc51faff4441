//! Frames on a namespace's interface: sent as they are through a raw
//! socket, and captured by tcpdump then decoded by `tshark -V`, for the
//! tests that check what vrhost puts on the wire (tunnels, VLANs).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vrhost_io::Port;
use vrhost_io::socket::{SocketConfig, SocketPort};
use vrhost_lab::Netns;

/// A bound against a hung test, not a speed limit.
const PATIENCE: Duration = Duration::from_secs(30);

/// Send `frame` out of interface `dev` of `ns` as it is.
pub fn send_raw(ns: &Netns, dev: &str, frame: &[u8]) {
    let (frame, dev) = (frame.to_vec(), dev.to_string());
    ns.run(move || {
        let mut p = SocketPort::open(&dev, SocketConfig::default()).expect("a raw socket");
        assert_eq!(p.tx_burst(&[&frame]), 1, "sent");
    })
    .unwrap();
}

/// One frame received on `dev` of `ns` that `filter` matches, captured by
/// tcpdump while `send` is called every 100 ms, as `tshark -V` (with
/// `decode`, and checksums checked) decodes it.
pub fn capture(ns: &Netns, dev: &str, filter: &str, decode: &[&str], send: impl Fn()) -> String {
    let pcap = super::TempDir::new("wire-pcap");
    let file = pcap.path().join("in.pcap");
    let mut dump = ns
        .command("tcpdump")
        .args(["-i", dev, "-Q", "in", "-U", "-c", "1", "-w"])
        .arg(&file)
        .arg(filter)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tcpdump");
    let t0 = Instant::now();
    while dump.try_wait().unwrap().is_none() {
        send();
        std::thread::sleep(Duration::from_millis(100));
        if t0.elapsed() > PATIENCE {
            let _ = dump.kill();
            let _ = dump.wait();
            panic!("no frame on {dev} matched {filter:?}");
        }
    }
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&file)
        .args([
            "-V",
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
        ])
        .args(decode)
        .output()
        .expect("tshark");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    text
}
