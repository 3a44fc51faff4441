//! The one-port fairness experiment on real ports, with the XDP fast path
//! and each tenant's `rate_limit_pps` as a token bucket in its select
//! entry (`one_port_xdp`), beside the `mem`-port run of `overload.rs`.
//!
//! Topology (namespaces `vrhf-*`, veth links):
//!
//! ```text
//!  gen eth0 ── p0 [node: vrhost, fast_path = true] p1 ── eth0 sink (XDP drop)
//! ```
//!
//! Two router VRs share port p0, told apart by destination MAC (one
//! select-table key each): t0, the quiet tenant, and t1, the noisy one,
//! both on `--fairness-xdp`'s path (`slow`: their user-space instances,
//! where a flood fills the port's receive ring; `fast`: the XDP router).
//! The generator (`--fairness-generator`: the XDP live-frames generator,
//! `vrhost_fast::LiveGen`, by default, or trafgen) on the generator's core
//! sends UDP frames to the two MACs, paced by its own token bucket (live)
//! or a tbf qdisc (trafgen). trafgen (and live with `mix_turn`) mixes them
//! 1 to t0, k-1 to t1 in turn, so t0 gets a k-th of whatever the
//! generator manages; live by default takes t0's frames from a second
//! bucket at t0's pace and gives t1 the rest, so t0 is offered its pace
//! whatever t1's. A tenant's sent rate is the live generator's own count
//! of its frames (trafgen: its share, 1/k for t0), its arrival rate what
//! the select table gave it (`fast.rx_packets`, before the bucket), its
//! forwarded rate its `tx_packets`.
//!
//! Runs: `capacity` (t0 alone, unpaced, no limits: C, what t0 forwards,
//! and G, what the generator offers); `alone` (limits on, only t0's frames,
//! paced at q = `--quiet-load` x C); `with_noise` (limits on, the port paced
//! at 2 x C, with trafgen at most G, k = that / q); `with_noise_unlimited` (the same
//! without limits: what the buckets fix). Limits: t0 1.25 x q, t1 0.8 x C
//! minus t0's, so the admitted total stays below C. quiet_ratio = the
//! share of t0's sent frames it forwards with noise / the same share
//! alone (its frames the generator could not send at the pace are not
//! counted against the host); `overload` = the generator's sent rate / C
//! (below 2 when the generator cannot offer 2 x C, as trafgen on veth
//! cannot here, nor `live` while the fast path's XDP runs on its core:
//! reported, not hidden). `live-split` hands its frames to the host
//! worker's core through a cpumap, where p0's receive side and the fast
//! path then run: the generator keeps its core, and C is what that other
//! core forwards.

use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use vrhost_client::{Client, Endpoint};
use vrhost_fast::{LiveGen, LiveGenConfig, LiveSender, SendOn};
use vrhost_lab::{Daemon, Lab};

use super::hops::{FairHops, Snapshot, hops};
use super::{FairnessRecord, forwarded, ratio, u, vr};
use crate::forward::generator::{GeneratorKind, Running, Trafgen, WmemDefault, mac, pace};
use crate::forward::node::pin_napi_threads;
use crate::{Context, Result, bail};

const GEN_MAC: &str = "02:00:00:00:f0:10";
const SINK_MAC: &str = "02:00:00:00:f0:20";
/// The tenants' MACs on p0 and p1.
const T_MAC: [[&str; 2]; 2] = [
    ["02:00:00:00:f1:00", "02:00:00:00:f1:01"],
    ["02:00:00:00:f2:00", "02:00:00:00:f2:01"],
];

const LAB: &str = r#"
prefix = "vrhf"
[[hosts]]
name = "gen"
[[hosts]]
name = "node"
[[hosts]]
name = "sink"
[[links]]
a = { host = "gen", iface = "eth0", mac = "02:00:00:00:f0:10", addrs = ["10.1.0.2/24"] }
b = { host = "node", iface = "p0" }
[[links]]
a = { host = "node", iface = "p1" }
b = { host = "sink", iface = "eth0", mac = "02:00:00:00:f0:20", addrs = ["10.2.0.2/24"] }
"#;

/// Options of the XDP fairness experiment.
#[derive(Debug, Clone)]
pub struct FairXdp {
    /// The tenants' path: "slow" or "fast".
    pub path: String,
    /// Seconds of each measuring window (after 0.5 s of warm-up).
    pub seconds: f64,
    /// The quiet tenant's rate, as a fraction of the capacity.
    pub quiet_load: f64,
    /// Core of the host worker; the VRs get another, trafgen a third if
    /// there is one (else the VRs').
    pub cpu: usize,
    /// Slots in each VR's pool.
    pub slots: u32,
    /// `host.confine = false`.
    pub unconfined: bool,
    /// The generator: the live-frames generator reaches 2 x the capacity,
    /// trafgen on veth does not.
    pub generator: GeneratorKind,
    /// Run p0's NAPI (its receive queue and XDP program, the whole fast
    /// path) in a kernel thread pinned to the worker's core, off the
    /// generator's: with the live generator (`XDP_TX`) the generator's
    /// core then only builds frames and puts them in p0's ring.
    pub napi_thread: bool,
    /// The live generator's mix as before: one frame to the quiet tenant
    /// in k, in turn, so that it is offered less when the generator
    /// cannot keep the port's pace (default: the quiet tenant's frames
    /// from a token bucket of their own at its pace, the noisy tenant the
    /// rest: `LiveGenConfig::mix_first_pps`).
    pub mix_turn: bool,
    /// Frame size on the wire, bytes (with FCS), of every run; `None`:
    /// chosen in the run ([`AUTO_BYTES`]): the smallest whose capacity
    /// run shows the generator offering [`AUTO_OVERLOAD`] x the capacity
    /// (the slow path's capacity falls with the frame size, its copies,
    /// while the live generator's offer hardly does), else the one that
    /// reached the most.
    pub frame_bytes: Option<usize>,
}

/// The overload the `with_noise` runs ask the generator to send: what it
/// sent / the capacity.
pub const OVERLOAD: f64 = 2.0;
/// `with_noise` runs at most, the rate asked raised in proportion after
/// each that sent under 0.95 x [`OVERLOAD`].
pub const OVERLOAD_TRIES: u32 = 3;

/// The frame sizes `FairXdp::frame_bytes = None` tries, in order.
pub const AUTO_BYTES: [usize; 4] = [64, 512, 1024, 1500];
/// The generator's offer over the capacity at which the choice stops: 2 x
/// and a margin for the offer's jitter between the capacity run and the
/// run with noise.
pub const AUTO_OVERLOAD: f64 = 2.1;

impl Default for FairXdp {
    fn default() -> Self {
        Self {
            path: "slow".into(),
            seconds: 3.0,
            quiet_load: 0.1,
            cpu: 1,
            slots: 16_384,
            unconfined: false,
            generator: GeneratorKind::Live,
            napi_thread: false,
            mix_turn: false,
            frame_bytes: Some(64),
        }
    }
}

/// What `vrhost bench fastpath`'s `fairness` record says of the
/// `with_noise` run (and of the `alone` run it is compared with).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FairFast {
    /// The tenants' path: `fast` or `slow`.
    pub path: String,
    /// The generator (`live`, `live-split`, `trafgen`).
    pub generator: &'static str,
    /// Where p0's XDP program ran: `sender` or `thread:CPU`
    /// ([`FairXdp::napi_thread`]).
    pub port_napi: String,
    /// Frame size on the wire of every run, bytes (with FCS).
    pub frame_bytes: usize,
    /// `fixed` (asked for) or `auto` (chosen in the run, [`AUTO_BYTES`]).
    pub frame_bytes_from: &'static str,
    /// What the generator offered unpaced in the capacity run (the quiet
    /// tenant alone) / the capacity: the most overload it can make at
    /// this size.
    pub offer_over_capacity: f64,
    /// The generator's unpaced offer in the capacity run, frames/s.
    pub gen_offer_pps: f64,
    /// The quiet tenant's forwarded share with noise / alone (the share of
    /// the frames the generator sent it).
    pub quiet_ratio: f64,
    /// Its forwarded rate with noise / alone.
    pub quiet_rate_ratio: f64,
    /// What the generator sent / the capacity (with noise): the
    /// overload reached.
    pub overload: f64,
    /// `with_noise` runs made to reach it (the rate asked raised after
    /// each that sent too little: [`OVERLOAD_TRIES`]).
    pub overload_tries: u32,
    /// What reached the select table (both tenants) / the capacity: the
    /// overload the port saw.
    pub port_overload: f64,
    /// The capacity: what the quiet tenant forwards alone, unpaced.
    pub capacity_pps: f64,
    /// The quiet tenant's rate asked of the generator, alone and with noise.
    pub quiet_asked_pps: f64,
    /// What the generator sent it alone.
    pub quiet_sent_alone_pps: f64,
    /// What it sent it with noise.
    pub quiet_sent_pps: f64,
    /// What reached the select table for it, alone.
    pub quiet_at_port_alone_pps: f64,
    /// What reached the select table for it, with noise.
    pub quiet_at_port_pps: f64,
    /// What it forwarded alone.
    pub quiet_forwarded_alone_pps: f64,
    /// What it forwarded with noise.
    pub quiet_forwarded_pps: f64,
    /// The noisy tenant's rate asked of the generator.
    pub noisy_asked_pps: f64,
    /// What the generator sent it.
    pub noisy_sent_pps: f64,
    /// What reached the select table for it.
    pub noisy_at_port_pps: f64,
    /// What its bucket dropped.
    pub noisy_rate_limited_pps: f64,
    /// What it forwarded.
    pub noisy_forwarded_pps: f64,
    /// Its excess: sent and not forwarded.
    pub noisy_excess_pps: f64,
    /// The share of that excess its bucket in the select table dropped
    /// (the rest went at the generator's veth, p0's queue or ring, or
    /// the VR).
    pub noisy_excess_at_bucket: f64,
    /// The quiet tenant's frames its own bucket dropped, with noise.
    pub quiet_rate_limited_pps: f64,
    /// The quiet tenant's `rate_limit_pps` (the rule: 1.25 x its pace).
    pub quiet_limit_pps: u64,
    /// The noisy tenant's (the rule: 0.8 x the capacity minus the quiet
    /// tenant's).
    pub noisy_limit_pps: u64,
    /// With noise: frames the generator's veth refused (p0's ring full),
    /// before any tenant is known.
    pub gen_refused_pps: f64,
    /// With noise: frames p0's receive queue dropped, before its XDP
    /// program (tenant-blind).
    pub port_rx_drops_pps: f64,
    /// With noise: frames p0's AF_XDP ring refused (the slow path, after
    /// the buckets).
    pub port_ring_dropped_pps: f64,
    /// The same run without the buckets: the quiet tenant's `quiet_ratio`
    /// (what the buckets fix).
    pub quiet_ratio_no_buckets: f64,
    /// Its overload reached.
    pub overload_no_buckets: f64,
}

/// The quiet tenant's forwarded rate with noise / alone at 2 x overload of
/// one shared port, with the fast path's per-tenant buckets, and the
/// overload reached (for `vrhost bench fastpath`'s
/// `{"experiment":"fairness",...}`). Needs root (and trafgen with it).
///
/// # Errors
/// The lab, the daemon or the generator failed.
pub fn fairness_fast(o: &FairXdp) -> Result<FairFast> {
    let recs = fairness_xdp(o)?;
    let find = |run: &str| {
        recs.iter()
            .find(|r| r.run == run)
            .cloned()
            .unwrap_or_default()
    };
    let (cap, alone, with, open) = (
        find("capacity"),
        find("alone"),
        find("with_noise"),
        find("with_noise_unlimited"),
    );
    let c = cap.quiet_forwarded_pps;
    let g = cap.quiet_sent_pps.unwrap_or(0.0);
    let (ha, hw) = (
        alone.hops.as_deref().cloned().unwrap_or_default(),
        with.hops.as_deref().cloned().unwrap_or_default(),
    );
    let noisy_excess = (hw.noisy_sent_pps - with.noisy_forwarded_pps).max(0.0);
    Ok(FairFast {
        path: o.path.clone(),
        generator: o.generator.name(),
        port_napi: hw.port_napi.clone(),
        frame_bytes: cap.frame_bytes.unwrap_or(0),
        frame_bytes_from: if o.frame_bytes.is_some() {
            "fixed"
        } else {
            "auto"
        },
        offer_over_capacity: ratio(g, c),
        gen_offer_pps: g,
        quiet_ratio: with.quiet_ratio,
        quiet_rate_ratio: hw.quiet_rate_ratio.unwrap_or(0.0),
        overload: with.overload.unwrap_or(0.0),
        overload_tries: with.overload_tries.unwrap_or(1),
        port_overload: ratio(with.quiet_classified_pps + with.noisy_classified_pps, c),
        capacity_pps: c,
        quiet_asked_pps: hw.quiet_asked_pps.unwrap_or(0.0),
        quiet_sent_alone_pps: alone.quiet_sent_pps.unwrap_or(0.0),
        quiet_sent_pps: with.quiet_sent_pps.unwrap_or(0.0),
        quiet_at_port_alone_pps: alone.quiet_classified_pps,
        quiet_at_port_pps: with.quiet_classified_pps,
        quiet_forwarded_alone_pps: alone.quiet_forwarded_pps,
        quiet_forwarded_pps: with.quiet_forwarded_pps,
        noisy_asked_pps: hw.noisy_asked_pps.unwrap_or(0.0),
        noisy_sent_pps: hw.noisy_sent_pps,
        noisy_at_port_pps: with.noisy_classified_pps,
        noisy_rate_limited_pps: hw.noisy_rate_limited_pps,
        noisy_forwarded_pps: with.noisy_forwarded_pps,
        noisy_excess_pps: noisy_excess,
        noisy_excess_at_bucket: ratio(hw.noisy_rate_limited_pps, noisy_excess),
        quiet_rate_limited_pps: hw.quiet_rate_limited_pps,
        quiet_limit_pps: with.quiet_limit_pps.unwrap_or(0),
        noisy_limit_pps: with.noisy_limit_pps.unwrap_or(0),
        gen_refused_pps: hw.gen_refused_pps,
        port_rx_drops_pps: hw.port_rx_drops_pps,
        port_ring_dropped_pps: hw.port_ring_dropped_pps,
        quiet_ratio_no_buckets: open.quiet_ratio,
        overload_no_buckets: open.overload.unwrap_or(0.0),
    }
    .with_alone_check(&ha))
}

impl FairFast {
    /// Warn when the generator did not keep the quiet tenant's pace alone
    /// (the ratio's reference is then what it could send, not what was
    /// asked).
    fn with_alone_check(self, alone: &FairHops) -> Self {
        let asked = alone.quiet_asked_pps.unwrap_or(0.0);
        if asked > 0.0 && self.quiet_sent_alone_pps < 0.95 * asked {
            eprintln!(
                "fairness ({}): the generator sent the quiet tenant {:.0} of the {:.0} frames/s asked, alone: a generator limit",
                self.path, self.quiet_sent_alone_pps, asked
            );
        }
        self
    }
}

/// Every run of the experiment (see the module doc), as the isolation
/// bench's fairness records (variant `one_port_xdp`).
///
/// # Errors
/// As [`fairness_fast`].
pub fn fairness_xdp(o: &FairXdp) -> Result<Vec<FairnessRecord>> {
    if !["slow", "fast"].contains(&o.path.as_str()) {
        bail!("--fairness-xdp {:?}: slow, fast or off", o.path);
    }
    if let Some(b) = o.frame_bytes.filter(|b| !(64..=1518).contains(b)) {
        bail!("--fairness-bytes {b}: 64..=1518 or auto");
    }
    if !(o.quiet_load > 0.0 && o.quiet_load < 0.5) {
        bail!("--quiet-load {}: in (0, 0.5) for the XDP run", o.quiet_load);
    }
    if !rustix::process::geteuid().is_root() {
        bail!(
            "the XDP fairness run makes namespaces and loads XDP: run as root (or --fairness-xdp off)"
        );
    }
    let lab = Lab::parse(LAB, "bench isolation xdp")?;
    // Fixed namespace names: a second run waits for this one.
    let _claim = lab.claim()?;
    lab.down();
    lab.up()?;
    let dir = std::env::temp_dir().join(format!("vrhost-bench-fairxdp-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    super::set_mode(&dir, 0o755)?;
    let r = runs(o, &lab, &dir);
    lab.down();
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn runs(o: &FairXdp, lab: &Lab, dir: &Path) -> Result<Vec<FairnessRecord>> {
    let sink = dir.join("xdp_sink.o");
    std::fs::write(&sink, vrhost_io::XDP_SINK_OBJ)?;
    let obj = sink.display().to_string();
    lab.ns("sink")
        .ip(&[
            "link", "set", "dev", "eth0", "xdp", "obj", &obj, "sec", "xdp",
        ])
        .context("attach the XDP sink")?;
    // trafgen's socket buffer is net.core.wmem_default (not per namespace).
    let _wmem = WmemDefault::raise(4 << 20)?;
    let (bytes, cap) = capacity(o, lab, dir)?;
    let run = |name: &'static str, limits: Option<(u64, u64)>, k: usize, pps: Option<u64>| {
        one_run(o, lab, dir, (name, limits, bytes), k, pps)
    };
    let c = cap.quiet_forwarded_pps;
    let g = cap.quiet_classified_pps;
    if c < 1000.0 {
        bail!("capacity run: t0 forwarded {c:.0} frames/s (offered {g:.0}): nothing to measure");
    }
    let q = (c * o.quiet_load) as u64;
    let l0 = q + q / 4;
    let l1 = ((0.8 * c) as u64).saturating_sub(l0).max(1000);
    let limits = Some((l0, l1));
    let alone = run("alone", limits, 1, Some(q))?;
    // trafgen's maximum is G (what it offered t0 alone); the live
    // generator's is not (unpaced, t0's forwarding shares its core on
    // veth), so it is asked for 2 x C and its sent rate says what it did.
    let mut port = match o.generator {
        GeneratorKind::Trafgen => (2.0 * c).min(g),
        GeneratorKind::Live | GeneratorKind::LiveSplit => 2.0 * c,
    } as u64;
    let mix = |port: u64| ((port as f64 / q as f64).round() as usize).max(2);
    let sent = |r: &FairnessRecord| {
        r.quiet_sent_pps.unwrap_or(0.0) + r.hops.as_ref().map_or(0.0, |h| h.noisy_sent_pps)
    };
    let mut with = run("with_noise", limits, mix(port), Some(port))?;
    // The live generator paces by dropping what its token bucket (a few
    // ms deep) has no token for, so when its core is shared (the VRs on
    // it, another task) it sends less than asked. Ask again for more, in
    // proportion, until what it sent is 2 x C (`overload_tries`).
    let mut tries = 1;
    while o.generator != GeneratorKind::Trafgen
        && tries < OVERLOAD_TRIES
        && sent(&with) < 0.95 * OVERLOAD * c
    {
        let scale = OVERLOAD * c / sent(&with).max(1.0);
        eprintln!(
            "fairness xdp ({}): the generator sent {:.2} x C of the {:.2} x asked: asking {scale:.2} x as much",
            o.path,
            sent(&with) / c,
            port as f64 / c
        );
        port = (port as f64 * scale.min(4.0)) as u64;
        with = run("with_noise", limits, mix(port), Some(port))?;
        tries += 1;
    }
    let mut open = run("with_noise_unlimited", None, mix(port), Some(port))?;
    with.overload_tries = Some(tries);
    // What share of the frames sent to it the quiet tenant gets through:
    // the generator may not keep the pace (trafgen on veth tops out
    // near C), and the quiet frames it does not send are not the host's.
    let share = |r: &FairnessRecord| ratio(r.quiet_forwarded_pps, r.quiet_sent_pps.unwrap_or(0.0));
    for r in [&mut with, &mut open] {
        r.quiet_ratio = ratio(share(r), share(&alone));
        let noisy_sent = r.hops.as_ref().map_or(0.0, |h| h.noisy_sent_pps);
        r.overload = Some(ratio(r.quiet_sent_pps.unwrap_or(0.0) + noisy_sent, c));
        let rate_ratio = ratio(r.quiet_forwarded_pps, alone.quiet_forwarded_pps);
        if let Some(h) = r.hops.as_mut() {
            h.quiet_rate_ratio = Some(rate_ratio);
        }
    }
    Ok(vec![cap, alone, with, open])
}

/// The capacity run at `o.frame_bytes`, or at each of [`AUTO_BYTES`] in
/// turn until the generator's unpaced offer reaches [`AUTO_OVERLOAD`] x
/// what t0 forwards (else at the size that reached the most): the frame
/// size and that run.
fn capacity(o: &FairXdp, lab: &Lab, dir: &Path) -> Result<(usize, FairnessRecord)> {
    let one = |b: usize| one_run(o, lab, dir, ("capacity", None, b), 1, None);
    if let Some(b) = o.frame_bytes {
        return Ok((b, one(b)?));
    }
    let mut best: Option<(f64, usize, FairnessRecord)> = None;
    for b in AUTO_BYTES {
        let r = one(b)?;
        let reach = ratio(r.quiet_sent_pps.unwrap_or(0.0), r.quiet_forwarded_pps);
        eprintln!(
            "fairness xdp ({}): {b} B: the generator offers {:.0} frames/s unpaced, t0 forwards {:.0}: {reach:.2} x",
            o.path,
            r.quiet_sent_pps.unwrap_or(0.0),
            r.quiet_forwarded_pps
        );
        if reach >= AUTO_OVERLOAD {
            return Ok((b, r));
        }
        if best.as_ref().is_none_or(|(m, ..)| reach > *m) {
            best = Some((reach, b, r));
        }
    }
    let (reach, b, r) = best.context("no frame size tried")?;
    eprintln!(
        "fairness xdp ({}): no size reached {AUTO_OVERLOAD} x; {b} B reached the most, {reach:.2} x",
        o.path
    );
    Ok((b, r))
}

/// One run: the daemon with `limits` (t0's, t1's rate), the generator
/// sending `bytes`-byte frames, 1 to t0 for k-1 to t1, at `pps` (None:
/// unpaced).
fn one_run(
    o: &FairXdp,
    lab: &Lab,
    dir: &Path,
    (run, limits, bytes): (&'static str, Option<(u64, u64)>, usize),
    k: usize,
    pps: Option<u64>,
) -> Result<FairnessRecord> {
    let cfg = dir.join(format!("{run}.toml"));
    std::fs::write(&cfg, daemon_config(o, limits))?;
    let sock = dir.join(format!("{run}.sock"));
    let daemon = Daemon::start(
        &cfg,
        Some(&lab.ns_name("node")),
        0,
        &sock.display().to_string(),
    )
    .with_context(|| format!("fairness xdp {run}: start the daemon"))?;
    let api = Client::new(Endpoint::Unix(sock), None)?.with_timeout(Duration::from_secs(10));
    let napi = if o.napi_thread {
        napi_thread(lab, o.cpu)?
    } else {
        "sender".into()
    };
    let mut tg = FairGen::start(o, lab, dir, (run, bytes), k, pps, gen_cpu(o.cpu))?;
    std::thread::sleep(Duration::from_millis(500));
    let sent_a = tg.sent(lab, k)?;
    let hop_a = Snapshot::read(lab)?;
    let a: Value = api.get("/v1/stats")?.decode()?;
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(o.seconds));
    let b: Value = api.get("/v1/stats")?.decode()?;
    let hop_b = Snapshot::read(lab)?;
    let dt = t.elapsed().as_secs_f64();
    let sent_b = tg.sent(lab, k)?;
    let sent = sent_b.0.saturating_sub(sent_a.0) as f64 / dt;
    let quiet_sent = sent_b.1.saturating_sub(sent_a.1) as f64 / dt;
    tg.0.check_running()?;
    tg.0.stop(lab, 64)?;
    daemon.stop()?;
    let rate = |f: &dyn Fn(&Value) -> u64| f(&b).saturating_sub(f(&a)) as f64 / dt;
    let offered = |n: &'static str| move |s: &Value| u(&vr(s, n)["fast"]["rx_packets"]);
    let rec = FairnessRecord {
        experiment: "fairness",
        variant: "one_port_xdp",
        run,
        offered_pps: pps.unwrap_or(0),
        quiet_classified_pps: rate(&offered("t0")),
        quiet_forwarded_pps: rate(&|s| forwarded(s, "t0")),
        quiet_lost_pps: rate(&|s| offered("t0")(s).saturating_sub(forwarded(s, "t0"))),
        quiet_ratio: 0.0,
        noisy_classified_pps: rate(&offered("t1")),
        noisy_forwarded_pps: rate(&|s| forwarded(s, "t1")),
        overload: None,
        quiet_sent_pps: Some(quiet_sent),
        quiet_limit_pps: limits.map(|l| l.0),
        noisy_limit_pps: limits.map(|l| l.1),
        frame_bytes: Some(bytes),
        overload_tries: None,
        hops: Some(Box::new(FairHops {
            quiet_asked_pps: pps.map(|p| p as f64 / k as f64),
            noisy_asked_pps: pps.map(|p| p as f64 * (k - 1) as f64 / k as f64),
            noisy_sent_pps: sent - quiet_sent,
            port_napi: napi,
            ..hops((&hop_a, &hop_b), (&a, &b), dt)
        })),
    };
    let h = rec.hops.as_deref().cloned().unwrap_or_default();
    eprintln!(
        "fairness xdp {run} ({bytes} B): quiet asked {:.0} sent {:.0} at the table {:.0} bucket drops {:.0} forwarded {:.0}; \
         noisy asked {:.0} sent {:.0} at the table {:.0} bucket drops {:.0} forwarded {:.0}; \
         gen veth refused {:.0}, p0 XDP ran on {:.0}, p0 ring drops {:.0} (limits {limits:?}, NAPI {})",
        h.quiet_asked_pps.unwrap_or(0.0),
        quiet_sent,
        rec.quiet_classified_pps,
        h.quiet_rate_limited_pps,
        rec.quiet_forwarded_pps,
        h.noisy_asked_pps.unwrap_or(0.0),
        h.noisy_sent_pps,
        rec.noisy_classified_pps,
        h.noisy_rate_limited_pps,
        rec.noisy_forwarded_pps,
        h.gen_refused_pps,
        h.port_xdp_pps,
        h.port_ring_dropped_pps,
        h.port_napi,
    );
    Ok(rec)
}

/// Run p0's NAPI in a kernel thread on `cpu` at the highest nice level
/// (as `live-split` raises its cpumap kthread: the receive side is the
/// forwarder here, not a task beside it); its `port_napi` name.
fn napi_thread(lab: &Lab, cpu: usize) -> Result<String> {
    // veth has NAPI once the daemon's XDP program is on p0.
    lab.ns("node")
        .exec("sh", &["-c", "echo 1 > /sys/class/net/p0/threaded"])
        .context("threaded NAPI on p0")?;
    for pid in pin_napi_threads(&["p0"], cpu)? {
        let pid = rustix::process::Pid::from_raw(pid as i32).context("NAPI thread pid")?;
        rustix::process::setpriority_process(Some(pid), -20)
            .map_err(std::io::Error::from)
            .context("setpriority of p0's NAPI thread")?;
    }
    Ok(format!("thread:{cpu}"))
}

/// trafgen's core: one the worker and the VRs do not use if there is one.
fn gen_cpu(worker: usize) -> usize {
    let n = vrhost_host::cpu::cpus();
    let vr = if worker == 0 { 1 } else { 0 };
    (0..n).find(|c| *c != worker && *c != vr).unwrap_or(vr)
}

/// The daemon's config: t0 and t1 on p0 by MAC, out of p1 to the sink.
fn daemon_config(o: &FairXdp, limits: Option<(u64, u64)>) -> String {
    let vr_cpu = if o.cpu == 0 { 1 } else { 0 };
    let mut s = format!(
        "[host]\ncpu = {}\nfast_path = true\n{}",
        o.cpu,
        if o.unconfined {
            "confine = false\n"
        } else {
            ""
        }
    );
    for p in ["p0", "p1"] {
        s += &format!("\n[[ports]]\nname = \"{p}\"\ndriver = \"af_xdp\"\ninterface = \"{p}\"\n");
    }
    for (i, [m0, m1]) in T_MAC.iter().enumerate() {
        let limit = limits.map_or(String::new(), |l| {
            format!("rate_limit_pps = {}\n", if i == 0 { l.0 } else { l.1 })
        });
        s += &format!(
            "\n[[vrs]]\nname = \"t{i}\"\npath = \"{path}\"\ncpu = {vr_cpu}\nslots = {slots}\n{limit}\
             vnics = [\n  {{ port = \"p0\", mac = \"{m0}\", addrs = [\"10.1.0.1/24\"] }},\n  \
             {{ port = \"p1\", mac = \"{m1}\", addrs = [\"10.2.0.1/24\"] }},\n]\n[vrs.router]\n\
             neighbours = [{{ ip = \"10.2.0.2\", mac = \"{SINK_MAC}\" }}, {{ ip = \"10.1.0.2\", mac = \"{GEN_MAC}\" }}]\n\
             routes = [{{ prefix = \"10.9.0.0/16\", via = \"10.2.0.2\" }}]\n",
            path = o.path,
            slots = o.slots,
        );
    }
    for (i, macs) in T_MAC.iter().enumerate() {
        for (j, (p, m)) in ["p0", "p1"].iter().zip(macs).enumerate() {
            s += &format!(
                "\n[[rules]]\nport = \"{p}\"\ndst_mac = \"{m}\"\nvr = \"t{i}\"\nvnic = {j}\n"
            );
        }
    }
    s
}

/// trafgen's config: `bytes`-byte UDP frames (on the wire, with FCS)
/// 10.1.0.2 -> 10.9.0.2, one to t0 then `k - 1` to t1, in turn.
fn trafgen_conf(k: usize, bytes: usize) -> String {
    let ip_len = bytes - 4 - 14;
    let mac = |m: &str| {
        m.split(':')
            .map(|b| format!("0x{b}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let one = |dst: &str| {
        format!(
            "{{ {}, {}, 0x08, 0x00,\n  0x45, 0x00, const16({ip_len}), const16(0), 0x40, 0x00, 64, 17, csumip(14, 33),\n  10, 1, 0, 2, 10, 9, 0, 2,\n  const16(4000), const16(9), const16({}), const16(0),\n  fill(0x00, {}) }}\n",
            mac(dst),
            mac(GEN_MAC),
            ip_len - 20,
            ip_len - 28,
        )
    };
    let mut s = one(T_MAC[0][0]);
    for _ in 1..k {
        s += &one(T_MAC[1][0]);
    }
    s
}

/// The generator of a run: one frame to t0 for k - 1 to t1. The live
/// generator is kept for its counter.
struct FairGen(Running, Option<Arc<LiveGen>>);

impl FairGen {
    /// Start `o.generator` sending the mix of `k` at `pps` (None: unpaced)
    /// on `cpu`; trafgen's config goes to `dir`.
    fn start(
        o: &FairXdp,
        lab: &Lab,
        dir: &Path,
        (run, bytes): (&str, usize),
        k: usize,
        pps: Option<u64>,
        cpu: usize,
    ) -> Result<Self> {
        match o.generator {
            GeneratorKind::Trafgen => {
                let conf = dir.join(format!("trafgen-{run}.cfg"));
                std::fs::write(&conf, trafgen_conf(k, bytes))?;
                pace(lab, pps.map(|p| p as f64), bytes)?;
                Ok(Self(
                    Running::Trafgen(Trafgen::start(lab, &conf, cpu)?),
                    None,
                ))
            }
            GeneratorKind::Live | GeneratorKind::LiveSplit => {
                let frame = vrhost_fast::udp_frame(
                    mac(GEN_MAC),
                    mac(T_MAC[0][0]),
                    Ipv4Addr::new(10, 1, 0, 2),
                    Ipv4Addr::new(10, 9, 0, 2),
                    bytes,
                );
                let g = Arc::new(LiveGen::load(&LiveGenConfig {
                    frame,
                    mix: (k > 1).then(|| (k as u32, mac(T_MAC[1][0]))),
                    // The quiet tenant's own pace, the noisy one the rest
                    // (or one frame in k with `mix_turn`).
                    mix_first_pps: match (k > 1 && !o.mix_turn, pps) {
                        (true, Some(p)) => p / k as u64,
                        _ => 0,
                    },
                    via_cpu: (o.generator == GeneratorKind::LiveSplit).then_some(o.cpu as u32),
                    ..LiveGenConfig::default()
                })?);
                crate::forward::generator::split_priority(&g)?;
                g.set_rate(pps.unwrap_or(0))?;
                let on = SendOn {
                    netns: Some(format!("/run/netns/{}", lab.ns("gen").name()).into()),
                    ifname: "eth0".into(),
                    cpu: Some(cpu),
                    hold: Some(crate::forward::generator::live_hold(lab)?),
                };
                let s =
                    LiveSender::start(g.clone(), on).context("start the live-frames generator")?;
                Ok(Self(Running::Live(s), Some(g)))
            }
        }
    }

    /// Frames sent so far, and of them to the quiet tenant: the
    /// generator's own counters (live: its frames are no skbs), else the
    /// generator interface's tx counter (and a k-th of it).
    fn sent(&self, lab: &Lab, k: usize) -> Result<(u64, u64)> {
        if let Some(g) = &self.1 {
            let c = g.counters()?;
            return Ok((c.sent, c.first_sent));
        }
        let v = (lab.ns("gen")).exec("cat", &["/sys/class/net/eth0/statistics/tx_packets"])?;
        let n: u64 = v.trim().parse()?;
        Ok((n, n / k as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The daemon accepts the configs, and both tenants are carried by
    /// the fast path with their limits as select buckets.
    #[test]
    fn configs_parse_with_buckets() {
        let dir = std::env::temp_dir();
        for path in ["slow", "fast"] {
            let o = FairXdp {
                path: path.into(),
                ..FairXdp::default()
            };
            for limits in [None, Some((1000, 9000))] {
                let src = daemon_config(&o, limits);
                let (_, plan) = vrhost_host::config::Config::parse(&src, "bench", &dir)
                    .unwrap_or_else(|e| panic!("{e}\n{src}"));
                for v in &plan.vrs {
                    assert!(v.fast.is_ok(), "{}: {:?}", v.name, v.fast);
                }
                let l = plan.vrs.iter().map(|v| v.port_limit.map(|b| b.rate_pps));
                let want = match limits {
                    None => vec![None, None],
                    Some((a, b)) => vec![Some(a), Some(b)],
                };
                assert_eq!(l.collect::<Vec<_>>(), want);
            }
        }
    }

    #[test]
    fn the_mix_is_one_quiet_frame_to_k_minus_one_noisy() {
        let c = trafgen_conf(4, 64);
        assert_eq!(c.matches("0xf1, 0x00").count(), 1);
        assert_eq!(c.matches("0xf2, 0x00").count(), 3);
        assert_eq!(c.matches("const16(46)").count(), 4, "{c}");
        assert_eq!(c.matches("const16(26)").count(), 4, "{c}");
        assert_eq!(c.matches("fill(0x00, 18)").count(), 4, "{c}");
        let c = trafgen_conf(2, 1500);
        assert_eq!(c.matches("const16(1482)").count(), 2, "{c}");
        assert_eq!(c.matches("const16(1462)").count(), 2, "{c}");
        assert_eq!(c.matches("fill(0x00, 1454)").count(), 2, "{c}");
    }
}
