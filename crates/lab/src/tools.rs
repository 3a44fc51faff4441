//! Standard tools run inside lab hosts: iperf3 and ping, with their output
//! parsed into figures.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::netns::Netns;
use crate::topology::Lab;

/// One iperf3 TCP test of `seconds` from host `client` to `addr`, served
/// on host `server`; returns the receiver's Gbit/s.
///
/// # Errors
/// A message saying which step failed (server, client, output).
pub fn iperf3(
    lab: &Lab,
    server: &str,
    client: &str,
    addr: &str,
    seconds: u64,
) -> Result<f64, String> {
    iperf3_ns(&lab.ns(server), &lab.ns(client), addr, seconds)
}

/// As [`iperf3`], between two namespaces of any origin: served in
/// `server` on `addr` (IPv4 or IPv6), run from `client`.
///
/// # Errors
/// A message saying which step failed (server, client, output).
pub fn iperf3_ns(server: &Netns, client: &Netns, addr: &str, seconds: u64) -> Result<f64, String> {
    let mut srv = server
        .command("iperf3")
        .args(["-s", "-1", "-B", addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start iperf3 server: {e}"))?;
    // The server needs a moment to listen: retry a refused connection.
    let t = Instant::now();
    let secs = seconds.to_string();
    let result = loop {
        let out = client
            .command("iperf3")
            .args(["-c", addr, "-t", &secs, "-J", "--connect-timeout", "3000"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("run iperf3: {e}"));
        let v = out.and_then(|o| {
            serde_json::from_slice::<serde_json::Value>(&o.stdout)
                .map_err(|e| format!("iperf3 -J output: {e}"))
        });
        match v {
            Ok(v) => match v["error"].as_str() {
                Some(e) if e.contains("refused") && t.elapsed() < Duration::from_secs(3) => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Some(e) => break Err(format!("iperf3: {e}")),
                None => {
                    break v["end"]["sum_received"]["bits_per_second"]
                        .as_f64()
                        .map(|b| b / 1e9)
                        .ok_or_else(|| "iperf3 reported no received rate".to_string());
                }
            },
            Err(e) => break Err(e),
        }
    };
    let _ = srv.kill();
    let _ = srv.wait();
    result
}

/// Round-trip times (µs) of `n` pings every `interval_s` from host `from`
/// to `addr`, sorted.
///
/// # Errors
/// The failing ping, or no reply at all.
pub fn ping_rtts(
    lab: &Lab,
    from: &str,
    addr: &str,
    n: u32,
    interval_s: f64,
) -> Result<Vec<f64>, String> {
    ping_rtts_on(lab, from, addr, n, interval_s, None)
}

/// [`ping_rtts`] with `ping` pinned to `cpu` (`taskset`): on veth the
/// sender's CPU is where the frame's receive side runs, as the CPU of a
/// NIC's interrupt is on a real port.
pub fn ping_rtts_on(
    lab: &Lab,
    from: &str,
    addr: &str,
    n: u32,
    interval_s: f64,
    cpu: Option<usize>,
) -> Result<Vec<f64>, String> {
    let (n, interval) = (n.to_string(), interval_s.to_string());
    let ping = ["ping", "-c", &n, "-i", &interval, "-W", "1", addr];
    let cpu = cpu.map(|c| c.to_string());
    let out = match &cpu {
        Some(c) => lab
            .ns(from)
            .exec("taskset", &[&["-c", c.as_str()], &ping[..]].concat()),
        None => lab.ns(from).exec(ping[0], &ping[1..]),
    }
    .map_err(|e| e.to_string())?;
    let mut v: Vec<f64> = out
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ms| ms * 1000.0)
        .collect();
    if v.is_empty() {
        return Err(format!("no ping replies from {addr}"));
    }
    v.sort_by(f64::total_cmp);
    Ok(v)
}
