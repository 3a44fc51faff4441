//! `bench cluster`'s `rtt` experiment: ping from the generator to the sink
//! through the dispatcher and one engine, against the same VR run locally
//! on the dispatcher's host, with the daemons' default polling and with
//! busy polling; ping's average (as ping reports it) and the median of
//! its per-reply times.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use vrhost_host::cluster::ClusterPolicy;
use vrhost_lab::Daemon;

use super::{Bench, ClusterRecord, Point};
use crate::{Context, Result, bail};

/// What one ping run gave, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Pinged {
    /// Ping's own average (its summary line).
    pub avg_us: f64,
    /// The median of the per-reply times.
    pub p50_us: f64,
    /// Replies.
    pub replies: usize,
}

impl Bench<'_> {
    /// Ping through the cluster (one engine), then through the same VR
    /// run locally on the dispatcher's host (its config: the dispatcher's
    /// ports, the engine's VR with a port in place of each tunnel).
    pub(super) fn rtt(&self, busy: bool) -> Result<ClusterRecord> {
        let through = {
            let _d = self.start(Point {
                busy,
                ..Point::engines(1)
            })?;
            self.ping()?
        };
        let cfg = self.local_config(busy)?;
        let local = {
            let ns = self.lab.ns_name(&self.nodes[0].0);
            let _d = Daemon::start(&cfg, Some(&ns), 0, "none")?;
            self.ping()?
        };
        Ok(ClusterRecord {
            experiment: "rtt",
            engines: 1,
            policy: ClusterPolicy::Flow.name(),
            poll: Some(if busy { "busy" } else { "default" }),
            busy_engines: busy.then_some(self.args.busy_engines),
            busy_cpus: busy.then(|| self.args.busy_cpus.to_string()),
            pings: Some(through.replies.min(local.replies)),
            rtt_us_avg: Some(through.avg_us),
            local_rtt_us_avg: Some(local.avg_us),
            added_us_avg: Some(through.avg_us - local.avg_us),
            rtt_us_p50: Some(through.p50_us),
            local_rtt_us_p50: Some(local.p50_us),
            added_us_p50: Some(through.p50_us - local.p50_us),
            ..ClusterRecord::default()
        })
    }

    /// The local run's config: the dispatcher's without `[cluster]`, the
    /// engine's VR on the dispatcher's ports, every frame of each port to
    /// the VR's vNIC on it.
    fn local_config(&self, busy: bool) -> Result<PathBuf> {
        let mut doc = self.nodes[0].1.clone();
        self.set_poll(&mut doc, busy, 0);
        let ports = (doc.remove("cluster").and_then(|c| c.get("vrs").cloned()))
            .and_then(|v| v.get(0).and_then(|v| v.get("ports")).cloned());
        let vr = (self.nodes[1].1.get("vrs").and_then(|v| v.get(0)).cloned())
            .and_then(|v| v.as_table().cloned());
        let (Some(toml::Value::Array(ports)), Some(mut vr)) = (ports, vr) else {
            bail!("the lab's configs have no remote VR with ports and engine VR");
        };
        let name: toml::Value = vr.get("name").cloned().unwrap_or_else(|| "r".into());
        let mut rules = Vec::new();
        if let Some(toml::Value::Array(vnics)) = vr.get_mut("vnics") {
            for (k, (v, p)) in vnics.iter_mut().zip(ports).enumerate() {
                if let Some(t) = v.as_table_mut() {
                    t.remove("tunnel");
                    t.insert("port".into(), p.clone());
                }
                let mut rule = toml::Table::new();
                rule.insert("port".into(), p);
                rule.insert("vr".into(), name.clone());
                rule.insert("vnic".into(), (k as i64).into());
                rules.push(toml::Value::Table(rule));
            }
        }
        doc.insert("vrs".into(), toml::Value::Array(vec![vr.into()]));
        doc.insert("rules".into(), toml::Value::Array(rules));
        let cfg = self.dir.join("local.toml");
        std::fs::write(&cfg, toml::to_string(&doc).context("a config")?)?;
        Ok(cfg)
    }

    /// Ping from the generator to the sink (`--pings` at
    /// `--ping-interval-ms`), after a warm-up (the engines' heartbeats,
    /// the first frames).
    fn ping(&self) -> Result<Pinged> {
        let generator = self.lab.ns("gen");
        let t0 = Instant::now();
        while generator
            .exec("ping", &["-c", "1", "-W", "1", "10.2.0.2"])
            .is_err()
        {
            if t0.elapsed() > Duration::from_secs(30) {
                bail!("rtt: no answer through the path in 30 s");
            }
        }
        let count = self.args.pings.max(1).to_string();
        let interval = format!("{:.3}", self.args.ping_interval_ms / 1e3);
        let out = generator.exec("ping", &["-c", &count, "-i", &interval, "10.2.0.2"])?;
        parse_ping(&out)
    }

    /// Node `node`'s `[host]` for a point (0: the dispatcher, or the
    /// local daemon; else an engine). With `busy`: `[host.poll]
    /// busy_poll_us` on the dispatcher (on the engines too with
    /// `--busy-engines`), and each worker pinned as `--busy-cpus` says
    /// (`host.cpu`: its VR, unpinned, then runs on the worker's core by
    /// `colocate_pps`).
    pub(super) fn set_poll(&self, doc: &mut toml::Table, busy: bool, node: usize) {
        if !busy {
            return;
        }
        let host = doc
            .entry("host")
            .or_insert_with(|| toml::Table::new().into());
        let Some(host) = host.as_table_mut() else {
            return;
        };
        let cpu = match node {
            0 => self.args.busy_cpus.dispatcher,
            _ => self.args.busy_cpus.engine,
        };
        if let Some(cpu) = cpu {
            host.insert("cpu".into(), i64::from(cpu).into());
        }
        if node != 0 && !self.args.busy_engines {
            return;
        }
        let poll = host
            .entry("poll")
            .or_insert_with(|| toml::Table::new().into());
        if let Some(poll) = poll.as_table_mut() {
            poll.insert(
                "busy_poll_us".into(),
                i64::from(self.args.busy_poll_us).into(),
            );
        }
    }
}

/// `--busy-cpus`: the CPUs the dispatcher's worker (and the local
/// daemon's) and the engine's worker are pinned to in `rtt`'s busy run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BusyCpus {
    /// The dispatcher's (and the local daemon's) worker.
    pub dispatcher: Option<u16>,
    /// The engine's worker.
    pub engine: Option<u16>,
}

impl std::fmt::Display for BusyCpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.dispatcher, self.engine) {
            (Some(d), Some(e)) => write!(f, "{d},{e}"),
            _ => f.write_str("none"),
        }
    }
}

impl std::str::FromStr for BusyCpus {
    type Err = String;

    /// `none` (unpinned), or `D,E` (the dispatcher's CPU, the engine's).
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "none" {
            return Ok(Self::default());
        }
        let cpu = |v: &str| v.trim().parse::<u16>().map_err(|e| format!("{v:?}: {e}"));
        match s.split_once(',') {
            Some((d, e)) => Ok(Self {
                dispatcher: Some(cpu(d)?),
                engine: Some(cpu(e)?),
            }),
            None => Err(format!("{s:?}: expected none or D,E (two CPU numbers)")),
        }
    }
}

/// Ping's output: its average (the summary line, `rtt min/avg/max/mdev =
/// 0.041/0.052/0.071/0.008 ms`) and the median of its reply lines
/// (`... icmp_seq=3 ttl=63 time=0.052 ms`).
pub(super) fn parse_ping(out: &str) -> Result<Pinged> {
    let avg = (out.lines().find(|l| l.contains("min/avg")))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').nth(1))
        .and_then(|v| v.parse::<f64>().ok());
    let mut times: Vec<f64> = (out.lines().filter(|l| l.contains("icmp_seq=")))
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .collect();
    let Some(avg) = avg.filter(|_| !times.is_empty()) else {
        bail!("rtt: ping said {out:?}");
    };
    times.sort_by(f64::total_cmp);
    let n = times.len();
    let p50 = if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2.0
    };
    Ok(Pinged {
        avg_us: avg * 1e3,
        p50_us: p50 * 1e3,
        replies: n,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_ping;

    #[test]
    fn busy_cpus_are_none_or_two_cpus() {
        use super::BusyCpus;
        assert_eq!("none".parse::<BusyCpus>(), Ok(BusyCpus::default()));
        let b: BusyCpus = "0,1".parse().unwrap();
        assert_eq!((b.dispatcher, b.engine), (Some(0), Some(1)));
        assert_eq!(b.to_string(), "0,1");
        assert_eq!(BusyCpus::default().to_string(), "none");
        assert!("1".parse::<BusyCpus>().is_err());
        assert!("a,1".parse::<BusyCpus>().is_err());
    }

    #[test]
    fn ping_gives_its_average_and_the_median_of_its_replies() {
        let out = "PING 10.2.0.2 (10.2.0.2) 56(84) bytes of data.\n\
            64 bytes from 10.2.0.2: icmp_seq=1 ttl=63 time=0.140 ms\n\
            64 bytes from 10.2.0.2: icmp_seq=2 ttl=63 time=0.100 ms\n\
            64 bytes from 10.2.0.2: icmp_seq=3 ttl=63 time=1.90 ms\n\
            64 bytes from 10.2.0.2: icmp_seq=4 ttl=63 time=0.120 ms\n\
            \n--- 10.2.0.2 ping statistics ---\n\
            4 packets transmitted, 4 received, 0% packet loss, time 60ms\n\
            rtt min/avg/max/mdev = 0.100/0.565/1.900/0.771 ms\n";
        let p = parse_ping(out).unwrap();
        assert!((p.avg_us - 565.0).abs() < 1e-6, "{p:?}");
        assert!((p.p50_us - 130.0).abs() < 1e-6, "{p:?}");
        assert_eq!(p.replies, 4);
        let odd = out.replace(
            "64 bytes from 10.2.0.2: icmp_seq=4 ttl=63 time=0.120 ms\n",
            "",
        );
        assert!((parse_ping(&odd).unwrap().p50_us - 140.0).abs() < 1e-6);
        // No reply lines, or no summary: an error, not a figure.
        assert!(parse_ping("rtt min/avg/max/mdev = 0.1/0.2/0.3/0.0 ms").is_err());
        assert!(parse_ping("64 bytes from x: icmp_seq=1 ttl=1 time=0.1 ms").is_err());
        assert!(parse_ping("").is_err());
    }
}
