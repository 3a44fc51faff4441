//! The forwarding benches' generators: trafgen (netsniff-ng, the skb path
//! real senders use, paced by a tbf qdisc) and the live-frames generator
//! (`vrhost_fast::LiveGen`, XDP frames from the kernel's test run, paced
//! by its own token bucket), behind one start/stop, on the generator's
//! `eth0` and core.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;

use serde::Serialize;
use vrhost_fast::{LiveGen, LiveGenConfig, LiveSender, SendOn};
use vrhost_lab::Lab;

use super::{Family, GEN_MAC, GEN6, P0_MAC, SINK6};
use crate::{Context, Result, bail};

/// Which generator sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GeneratorKind {
    /// trafgen (netsniff-ng): skbs through the generator's veth.
    Trafgen,
    /// The XDP live-frames generator: xdp_frames into the node's `p0`,
    /// whose receive side (the veth's NAPI, the forwarder behind it) runs
    /// on the generator's core.
    Live,
    /// The live-frames generator handing its frames to the forwarder's
    /// core through a cpumap: `p0`'s receive side and the forward run
    /// there, and the generator keeps its core to itself.
    #[value(name = "live-split")]
    #[serde(rename = "live-split")]
    LiveSplit,
}

impl GeneratorKind {
    /// The name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Trafgen => "trafgen",
            Self::Live => "live",
            Self::LiveSplit => "live-split",
        }
    }

    /// One of the live-frames generators.
    pub fn is_live(self) -> bool {
        self != Self::Trafgen
    }
}

/// A generator set up for one frame size and table: trafgen's config
/// file, or the loaded live generator.
pub(crate) enum Generator {
    Trafgen(PathBuf),
    Live(Arc<LiveGen>),
}

/// Options of the live generator.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LiveOptions {
    /// Flows it numbers.
    pub flows: u32,
    /// Program runs per `BPF_PROG_RUN` call.
    pub repeat: u32,
    /// The forwarder's core, which `live-split` hands its frames to.
    pub fwd_cpu: usize,
    /// Frames per batch in the kernel's test run (its page pool holds as
    /// many pages, which bounds what it recycles when frames come back
    /// from another CPU).
    pub batch: u32,
}

impl Generator {
    /// Set up `kind` for `frame_bytes` frames of `family`, to one
    /// destination or (a full table, IPv4) to random ones; trafgen's
    /// config is written in `dir`.
    pub(crate) fn new(
        kind: GeneratorKind,
        dir: &Path,
        frame_bytes: usize,
        random_dst: bool,
        live: LiveOptions,
        family: Family,
    ) -> Result<Self> {
        match (kind, family) {
            (GeneratorKind::Trafgen, Family::Ipv4) => {
                let conf = dir.join(format!("trafgen-{frame_bytes}-{random_dst}.cfg"));
                std::fs::write(&conf, trafgen_conf(frame_bytes, random_dst))?;
                Ok(Self::Trafgen(conf))
            }
            (GeneratorKind::Trafgen, Family::Ipv6) => {
                if random_dst {
                    bail!("IPv6 frames go to one destination (table `2`)");
                }
                let conf = dir.join(format!("trafgen6-{frame_bytes}.cfg"));
                std::fs::write(&conf, trafgen_conf6(frame_bytes)?)?;
                Ok(Self::Trafgen(conf))
            }
            (GeneratorKind::Live | GeneratorKind::LiveSplit, Family::Ipv6) => {
                bail!("the live generator sends IPv4 only")
            }
            (GeneratorKind::Live | GeneratorKind::LiveSplit, Family::Ipv4) => {
                let frame = vrhost_fast::udp_frame(
                    mac(GEN_MAC),
                    mac(P0_MAC),
                    Ipv4Addr::new(10, 1, 0, 2),
                    Ipv4Addr::new(10, 1, 1, 2),
                    frame_bytes,
                );
                let g = LiveGen::load(&LiveGenConfig {
                    frame,
                    flows: live.flows,
                    random_dst,
                    repeat: live.repeat,
                    via_cpu: (kind == GeneratorKind::LiveSplit).then_some(live.fwd_cpu as u32),
                    batch: live.batch,
                    ..LiveGenConfig::default()
                })
                .context("load the live-frames generator")?;
                split_priority(&g)?;
                Ok(Self::Live(Arc::new(g)))
            }
        }
    }

    /// The live generator, if this is it.
    pub(crate) fn live(&self) -> Option<&Arc<LiveGen>> {
        match self {
            Self::Live(g) => Some(g),
            Self::Trafgen(_) => None,
        }
    }

    /// Start sending at `pps` frames/s (None: unpaced) from `cpu`.
    pub(crate) fn start(
        &self,
        lab: &Lab,
        pps: Option<f64>,
        frame_bytes: usize,
        cpu: usize,
    ) -> Result<Running> {
        match self {
            Self::Trafgen(conf) => {
                pace(lab, pps, frame_bytes)?;
                Ok(Running::Trafgen(Trafgen::start(lab, conf, cpu)?))
            }
            Self::Live(g) => {
                g.set_rate(pps.map_or(0, |p| p.max(1.0) as u64))?;
                let s = LiveSender::start(
                    g.clone(),
                    SendOn {
                        netns: Some(format!("/run/netns/{}", lab.ns("gen").name()).into()),
                        ifname: "eth0".into(),
                        cpu: Some(cpu),
                        hold: Some(live_hold(lab)?),
                    },
                )
                .context("start the live-frames generator")?;
                Ok(Running::Live(s))
            }
        }
    }

    /// Frames the live generator has sent (its own counter).
    pub(crate) fn live_sent(&self) -> Result<Option<u64>> {
        match self {
            Self::Live(g) => Ok(Some(g.counters()?.sent)),
            Self::Trafgen(_) => Ok(None),
        }
    }
}

/// The interface of the generator's namespace the live generator holds
/// its program on (`vrhost_fast::LiveGen::hold`), made if missing: one
/// end of a veth pair left down (the kernel may have no `dummy`), so no
/// frame reaches it. Without it every `BPF_PROG_RUN` call of
/// the generator starts and ends with a `synchronize_rcu()` in which it
/// sends nothing (6-40 ms here: the moves to slow whose first frame came
/// after 10 ms, `docs/results.md`).
pub(crate) fn live_hold(lab: &Lab) -> Result<String> {
    const HOLD: &str = "lghold";
    let ns = lab.ns("gen");
    if ns.exec("ip", &["link", "show", HOLD]).is_err() {
        ns.exec(
            "ip",
            &[
                "link", "add", HOLD, "type", "veth", "peer", "name", "lghold1",
            ],
        )
        .context("the live generator's hold interface")?;
    }
    Ok(HOLD.into())
}

/// `live-split`: its cpumap kthread, where the forwarder's receive side
/// runs, at nice -20, as the softirq it stands in for would preempt the
/// forwarder core's tasks (a warning if it is not found).
pub(crate) fn split_priority(g: &LiveGen) -> Result<()> {
    if g.raise_forwarding_priority()? {
        return Ok(());
    }
    if g.via_cpu().is_some() {
        eprintln!("live-split: no cpumap kthread found; its priority stays as it was");
    }
    Ok(())
}

/// `s` (`xx:xx:xx:xx:xx:xx`, a constant) as bytes.
pub(crate) fn mac(s: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (b, x) in m.iter_mut().zip(s.split(':')) {
        *b = u8::from_str_radix(x, 16).unwrap_or(0);
    }
    m
}

/// A running generator, stopped on drop.
pub(crate) enum Running {
    Trafgen(Trafgen),
    Live(LiveSender),
}

impl Running {
    /// An error if it has stopped.
    pub(crate) fn check_running(&mut self) -> Result<()> {
        match self {
            Self::Trafgen(t) => t.check_running(),
            Self::Live(s) => {
                if !s.check()? {
                    bail!("the live-frames generator stopped");
                }
                Ok(())
            }
        }
    }

    /// Stop it (and its pacing).
    pub(crate) fn stop(self, lab: &Lab, frame_bytes: usize) -> Result<()> {
        match self {
            Self::Trafgen(t) => {
                drop(t);
                pace(lab, None, frame_bytes)
            }
            Self::Live(mut s) => {
                s.stop()?;
                Ok(())
            }
        }
    }
}

/// The trafgen config: UDP to port 9, 10.1.0.2 -> 10.1.1.2, or (full
/// table) to random addresses, one template per first octet 1..=223 but
/// 10 and 127, with the other three octets random per frame.
fn trafgen_conf(frame_bytes: usize, random_dst: bool) -> String {
    let ip_len = frame_bytes - 4 - 14;
    let udp_len = ip_len - 20;
    let payload = udp_len - 8;
    let mac = |m: &str| {
        m.split(':')
            .map(|b| format!("0x{b}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let one = |dst: &str| {
        format!(
            "{{ {}, {}, 0x08, 0x00,\n  0x45, 0x00, const16({ip_len}), const16(0), 0x40, 0x00, 64, 17, csumip(14, 33),\n  10, 1, 0, 2, {dst},\n  const16(4000), const16(9), const16({udp_len}), const16(0),\n  fill(0x00, {payload}) }}\n",
            mac(P0_MAC),
            mac(GEN_MAC)
        )
    };
    if random_dst {
        (1..=223u8)
            .filter(|o| *o != 10 && *o != 127)
            .map(|o| one(&format!("{o}, drnd(3)")))
            .collect()
    } else {
        one("10, 1, 1, 2")
    }
}

/// The trafgen config of IPv6 frames: UDP to port 9, GEN6 -> SINK6, its
/// checksum computed by trafgen.
fn trafgen_conf6(frame_bytes: usize) -> Result<String> {
    let Some(udp_len) = frame_bytes.checked_sub(4 + 14 + 40).filter(|l| *l >= 8) else {
        bail!("{frame_bytes} B: an IPv6 UDP frame needs at least 66 bytes");
    };
    let bytes = |m: &str, sep: char, radix: &str| {
        m.split(sep)
            .map(|b| format!("{radix}{b}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ip6 = |a: &str| -> Result<String> {
        let a: std::net::Ipv6Addr = a.parse().context("an IPv6 address")?;
        Ok(a.octets().map(|o| o.to_string()).join(", "))
    };
    Ok(format!(
        "{{ {}, {}, 0x86, 0xdd,\n  0x60, 0x00, 0x00, 0x00, const16({udp_len}), 17, 64,\n  {},\n  {},\n  const16(4000), const16(9), const16({udp_len}), csumudp6(14, 54),\n  fill(0x00, {}) }}\n",
        bytes(P0_MAC, ':', "0x"),
        bytes(GEN_MAC, ':', "0x"),
        ip6(GEN6)?,
        ip6(SINK6)?,
        udp_len - 8
    ))
}

/// A running trafgen, stopped on drop.
pub(crate) struct Trafgen(Child);

impl Trafgen {
    /// trafgen on `cpu` of the lab's `gen`, sending `conf` out of `eth0`.
    pub(crate) fn start(lab: &Lab, conf: &Path, cpu: usize) -> Result<Self> {
        use std::os::unix::process::CommandExt;
        let child = lab
            .ns("gen")
            .command("taskset")
            // Its own process group: trafgen forks a sender per CPU, which
            // outlives a signal sent to the parent alone.
            .process_group(0)
            .args([
                "-c",
                &cpu.to_string(),
                "trafgen",
                "--dev",
                "eth0",
                "--cpus",
                "1",
                "-q",
                "--conf",
            ])
            .arg(conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("start trafgen")?;
        Ok(Self(child))
    }

    /// An error (with its stderr) if it has exited.
    pub(crate) fn check_running(&mut self) -> Result<()> {
        if let Some(st) = self.0.try_wait()? {
            let mut err = String::new();
            if let Some(mut e) = self.0.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            bail!("trafgen exited ({st}): {}", err.trim());
        }
        Ok(())
    }
}

impl Drop for Trafgen {
    fn drop(&mut self) {
        // The whole group (parent and its forked senders), at once: the
        // senders do not stop on SIGINT.
        let pid = rustix::process::Pid::from_child(&self.0);
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = self.0.wait();
    }
}

/// Pace the generator's interface at `pps` frames/s (None: unpaced).
pub(crate) fn pace(lab: &Lab, pps: Option<f64>, frame_bytes: usize) -> Result<()> {
    let gen_ns = lab.ns("gen");
    let _ = gen_ns.exec("tc", &["qdisc", "del", "dev", "eth0", "root"]);
    if let Some(pps) = pps {
        let bytes = (frame_bytes - 4) as f64;
        let rate = format!("{}bit", (pps * bytes * 8.0) as u64);
        let burst = format!("{}", (bytes as usize) * 32);
        let limit = format!("{}", (bytes as usize) * 256);
        gen_ns.exec(
            "tc",
            &[
                "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", &rate, "burst", &burst,
                "limit", &limit,
            ],
        )?;
    }
    Ok(())
}

/// Raises `net.core.wmem_default` (host-wide) and restores it on drop.
/// The value it found is kept in [`WmemDefault::SAVED`] meanwhile, so a
/// run killed before its drop (SIGKILL, a timeout) leaves what the next
/// run restores, rather than a raised default for every socket of the
/// host.
pub(crate) struct WmemDefault(String);

impl WmemDefault {
    const PATH: &str = "/proc/sys/net/core/wmem_default";
    const SAVED: &str = "/run/vrhost-bench-wmem_default";

    pub(crate) fn raise(bytes: u64) -> Result<Self> {
        let old = match std::fs::read_to_string(Self::SAVED) {
            // A run that did not restore it: its value is the host's.
            Ok(saved) => saved.trim().to_string(),
            Err(_) => {
                let now = std::fs::read_to_string(Self::PATH)?.trim().to_string();
                std::fs::write(Self::SAVED, &now).context("keep net.core.wmem_default")?;
                now
            }
        };
        std::fs::write(Self::PATH, bytes.to_string()).context("raise net.core.wmem_default")?;
        Ok(Self(old))
    }
}

impl Drop for WmemDefault {
    fn drop(&mut self) {
        if std::fs::write(Self::PATH, &self.0).is_ok() {
            let _ = std::fs::remove_file(Self::SAVED);
        }
    }
}
