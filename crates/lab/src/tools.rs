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
    iperf3_run(server, client, addr, seconds, [None, None]).map(|r| r.gbps)
}

/// What one iperf3 TCP test measured, from its JSON (`-J`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpRun {
    /// The receiver's Gbit/s.
    pub gbps: f64,
    /// Segments the sender retransmitted (`end.sum_sent.retransmits`).
    pub retransmits: Option<u64>,
    /// The sender's smoothed RTT, mean over the test (µs; the first
    /// stream's `mean_rtt`).
    pub mean_rtt_us: Option<f64>,
    /// The sender's largest congestion window (bytes; `max_snd_cwnd`).
    pub max_cwnd_bytes: Option<u64>,
}

impl TcpRun {
    /// The figures of an iperf3 client's JSON report.
    ///
    /// # Errors
    /// The report's own error, or no received rate in it.
    pub fn parse(v: &serde_json::Value) -> Result<Self, String> {
        if let Some(e) = v["error"].as_str() {
            return Err(format!("iperf3: {e}"));
        }
        let end = &v["end"];
        let gbps = end["sum_received"]["bits_per_second"]
            .as_f64()
            .map(|b| b / 1e9)
            .ok_or_else(|| "iperf3 reported no received rate".to_string())?;
        let sender = &end["streams"][0]["sender"];
        Ok(Self {
            gbps,
            retransmits: end["sum_sent"]["retransmits"].as_u64(),
            mean_rtt_us: sender["mean_rtt"].as_f64(),
            max_cwnd_bytes: sender["max_snd_cwnd"].as_u64(),
        })
    }
}

/// As [`iperf3_ns`], with the server and the client pinned to the CPUs
/// of `cpus` (`taskset`; `None`: where the scheduler puts it), returning
/// all it measured.
///
/// # Errors
/// A message saying which step failed (server, client, output).
pub fn iperf3_run(
    server: &Netns,
    client: &Netns,
    addr: &str,
    seconds: u64,
    cpus: [Option<usize>; 2],
) -> Result<TcpRun, String> {
    let pinned = |ns: &Netns, cpu: Option<usize>| match cpu {
        Some(c) => {
            let mut cmd = ns.command("taskset");
            cmd.args(["-c", &c.to_string(), "iperf3"]);
            cmd
        }
        None => ns.command("iperf3"),
    };
    let mut srv = pinned(server, cpus[0])
        .args(["-s", "-1", "-B", addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("start iperf3 server: {e}"))?;
    // The server needs a moment to listen: retry a refused connection.
    let t = Instant::now();
    let secs = seconds.to_string();
    let result = loop {
        let out = pinned(client, cpus[1])
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
                _ => break TcpRun::parse(&v),
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

#[cfg(test)]
mod tests {
    use super::TcpRun;

    #[test]
    fn tcp_run_reads_rate_retransmits_rtt_and_cwnd_of_an_iperf3_report() {
        let v = serde_json::json!({"end": {
            "streams": [{"sender": {"max_snd_cwnd": 1_448_000, "mean_rtt": 310}}],
            "sum_sent": {"retransmits": 42},
            "sum_received": {"bits_per_second": 2.5e9},
        }});
        let r = TcpRun::parse(&v).unwrap();
        assert_eq!(
            r,
            TcpRun {
                gbps: 2.5,
                retransmits: Some(42),
                mean_rtt_us: Some(310.0),
                max_cwnd_bytes: Some(1_448_000),
            }
        );
        let failed = serde_json::json!({"error": "unable to connect to server"});
        assert!(
            TcpRun::parse(&failed)
                .unwrap_err()
                .contains("unable to connect")
        );
        let empty = serde_json::json!({"end": {}});
        assert!(TcpRun::parse(&empty).is_err());
    }
}
