//! Where the one-port XDP fairness run's frames go, hop by hop
//! (`one_port_xdp` records): what the generator was asked for and sent per
//! tenant, what the generator's veth refused (p0's ring full: before any
//! tenant is known), what p0's XDP program saw, what each tenant's bucket
//! dropped and what the port's AF_XDP ring refused (the slow path).
//! Read from the veths' `ethtool -S` counters and the daemon's stats.
//! Also the fairness experiment's record, which carries them.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use vrhost_lab::Lab;

use super::{port, u, vr};
use crate::Result;

/// One run of the fairness experiment.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FairnessRecord {
    /// "fairness".
    pub experiment: &'static str,
    /// `two_ports` or `one_port`.
    pub variant: &'static str,
    /// `alone` or `with_noise`.
    pub run: &'static str,
    /// The quiet tenant's pace, frames/s (two ports), or the port's pace
    /// (one port).
    pub offered_pps: u64,
    /// Frames classified to the quiet tenant, per second.
    pub quiet_classified_pps: f64,
    /// Frames it forwarded, per second.
    pub quiet_forwarded_pps: f64,
    /// Classified to it and not forwarded, per second.
    pub quiet_lost_pps: f64,
    /// Quiet forwarded with noise / alone (with_noise runs).
    pub quiet_ratio: f64,
    /// Frames classified to the noisy tenant, per second.
    pub noisy_classified_pps: f64,
    /// Frames it forwarded, per second.
    pub noisy_forwarded_pps: f64,
    /// The port's offered rate / the capacity (`one_port_xdp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overload: Option<f64>,
    /// Frames sent to the quiet tenant by the generator, per second
    /// (`one_port_xdp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quiet_sent_pps: Option<f64>,
    /// The quiet tenant's `rate_limit_pps` (`one_port_xdp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quiet_limit_pps: Option<u64>,
    /// The noisy tenant's `rate_limit_pps` (`one_port_xdp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noisy_limit_pps: Option<u64>,
    /// `with_noise` runs made to reach the overload asked, this one the
    /// last (`one_port_xdp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overload_tries: Option<u32>,
    /// Frame size on the wire, bytes with FCS (`one_port_xdp`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_bytes: Option<usize>,
    /// Where the frames went, hop by hop (`one_port_xdp`).
    #[serde(flatten)]
    pub hops: Option<Box<FairHops>>,
}

/// The per-hop figures of one run, frames/s over its window.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FairHops {
    /// The quiet tenant's rate the run asked the generator for (none:
    /// unpaced).
    pub quiet_asked_pps: Option<f64>,
    /// The noisy tenant's rate it asked for.
    pub noisy_asked_pps: Option<f64>,
    /// What the generator sent to the noisy tenant.
    pub noisy_sent_pps: f64,
    /// Frames the generator's veth handed to p0 (`tx_queue_0_xdp_xmit`;
    /// 0 for trafgen, whose frames are skbs).
    pub gen_xmit_pps: f64,
    /// Frames the generator's veth refused, p0's ring full
    /// (`tx_queue_0_xdp_xmit_errors`): lost before any tenant is known.
    pub gen_refused_pps: f64,
    /// Frames p0's XDP program ran on (`rx_queue_0_xdp_packets`).
    pub port_xdp_pps: f64,
    /// Frames p0's receive queue dropped (`rx_queue_0_drops`).
    pub port_rx_drops_pps: f64,
    /// The quiet tenant's frames its bucket dropped.
    pub quiet_rate_limited_pps: f64,
    /// The noisy tenant's frames its bucket dropped.
    pub noisy_rate_limited_pps: f64,
    /// Frames the daemon's port p0 dropped on receive (its AF_XDP rx ring
    /// full: the slow path).
    pub port_ring_dropped_pps: f64,
    /// Where p0's NAPI (its XDP program) ran: `sender` (the generator's
    /// core, or the cpumap's with `live-split`) or `thread:CPU` (a kernel
    /// thread pinned there).
    pub port_napi: String,
    /// The quiet tenant's forwarded rate here over its forwarded rate in
    /// the `alone` run (`quiet_ratio` is the same of its share of what the
    /// generator sent it: the two differ when the generator falls behind
    /// its pace).
    pub quiet_rate_ratio: Option<f64>,
}

/// The counters read at each end of a window.
pub(super) struct Snapshot {
    sender: BTreeMap<String, u64>,
    p0: BTreeMap<String, u64>,
}

/// `ethtool -S DEV` in `host`'s namespace as name -> value.
fn ethtool_stats(lab: &Lab, host: &str, dev: &str) -> Result<BTreeMap<String, u64>> {
    let out = lab.ns(host).exec("ethtool", &["-S", dev])?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_string(), v.trim().parse().ok()?))
        })
        .collect())
}

impl Snapshot {
    pub(super) fn read(lab: &Lab) -> Result<Self> {
        Ok(Self {
            sender: ethtool_stats(lab, "gen", "eth0")?,
            p0: ethtool_stats(lab, "node", "p0")?,
        })
    }
}

/// The figures between snapshots `a` and `b` (with the daemon's stats
/// `sa`, `sb`) over `dt` seconds.
pub(super) fn hops(
    (a, b): (&Snapshot, &Snapshot),
    (sa, sb): (&Value, &Value),
    dt: f64,
) -> FairHops {
    let d = |m: fn(&Snapshot) -> &BTreeMap<String, u64>, k: &str| {
        let g = |s: &Snapshot| m(s).get(k).copied().unwrap_or(0);
        g(b).saturating_sub(g(a)) as f64 / dt
    };
    let api = |f: &dyn Fn(&Value) -> u64| f(sb).saturating_sub(f(sa)) as f64 / dt;
    let limited = |n: &'static str| move |s: &Value| u(&vr(s, n)["fast"]["drops"]["rate_limit"]);
    FairHops {
        gen_xmit_pps: d(|s| &s.sender, "tx_queue_0_xdp_xmit"),
        gen_refused_pps: d(|s| &s.sender, "tx_queue_0_xdp_xmit_errors"),
        port_xdp_pps: d(|s| &s.p0, "rx_queue_0_xdp_packets"),
        port_rx_drops_pps: d(|s| &s.p0, "rx_queue_0_drops"),
        quiet_rate_limited_pps: api(&limited("t0")),
        noisy_rate_limited_pps: api(&limited("t1")),
        port_ring_dropped_pps: api(&|s| u(&port(s, "p0")["rx_dropped"])),
        ..FairHops::default()
    }
}
