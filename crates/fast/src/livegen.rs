//! The benchmarks' generator in XDP: [`LiveGen`], built on the kernel's
//! XDP test run with live frames (`ebpf/xdp_livegen.c`), and
//! [`LiveSender`], the thread that runs it on one core inside a network
//! namespace until stopped. Its counting sink is [`crate::SeqSink`].
//!
//! `BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES` runs the program
//! `repeat` times on frames built from a template, with the generator's
//! veth as the ingress device: each frame the program returns `XDP_TX` for
//! leaves by that veth and enters its peer as an xdp_frame, without an skb
//! or a copy (about ten times what trafgen offers on veth; see
//! BENCHMARKING.md, "A generator that does not cap the forwarder"). The
//! program numbers each frame per flow and can pace itself (a token bucket
//! that drops the frames beyond the rate before they are sent). It writes
//! the headers again on every run: the kernel recycles a frame's page with
//! what the receiver left in it, and a forwarder in XDP rewrites frames in
//! place (TTL, MACs).
//!
//! Between two calls: the kernel adds the program to its XDP dispatcher
//! when a `BPF_PROG_RUN` call starts and removes it when the call ends,
//! each a `synchronize_rcu()` (`bpf_dispatcher_change_prog`) in which the
//! sending thread sleeps and sends nothing: 6-40 ms a call here, a gap in
//! the offer every call. With [`SendOn::hold`] the program is also
//! attached (generic XDP) to an interface no frame reaches while the
//! generator lives, so it stays in the dispatcher and a call's start and
//! end change nothing there (the dispatcher counts its users).
//!
//! What a veth needs: its peer takes such frames only when the peer runs
//! an XDP program or has GRO on; otherwise they vanish without a counter.
//! The interface is looked up, and the test run made, in the sending
//! thread's namespace.
//!
//! Where the receiver runs: a veth schedules its peer's NAPI on the CPU
//! that hands it the frame, so with `XDP_TX` the receiver's XDP program
//! and the whole forward behind it run on the generator's core, which then
//! offers only what is left of it. With [`LiveGenConfig::via_cpu`] the
//! program redirects each frame into a cpumap entry of another CPU instead,
//! whose program (`xdp_livegen_out`, attach type cpumap) redirects it into
//! the generator's veth (a devmap): the veth's transmit, the peer's NAPI
//! and the forward run on that CPU, and the generator keeps its own.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use aya::maps::{Array, CpuMap, DevMap, MapData};
use aya::programs::{TestRun, TestRunAttrs, TestRunOptions, Xdp, XdpMode};
use aya::{Ebpf, EbpfLoader};

use crate::abi::{LiveGenConf, LiveGenState};
use crate::{FastError, ifindex, map_err, take};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_livegen.o"));

const PROGRAM: &str = "xdp_livegen";
const CONF: &str = "livegen_conf";
const STATE: &str = "livegen_state";
const CPUS: &str = "livegen_cpus";
const OUT: &str = "livegen_out";
/// The cpumap entry's program: into the generator's veth.
const OUT_PROGRAM: &str = "xdp_livegen_out";
/// Frames the cpumap entry's queue holds: a few of the generator's
/// batches, so a short stall of the forwarding CPU loses nothing.
const CPU_QUEUE: u32 = 8192;

/// Flows the generator can number (the sink's table has as many).
pub const MAX_FLOWS: u32 = 256;
/// Where the mark {magic, flow, sequence} starts in a frame (the UDP
/// payload of an option-less IPv4 header).
pub const MARK_OFFSET: usize = 42;
/// The largest batch the kernel takes (`TEST_XDP_MAX_BATCH`).
pub const MAX_BATCH: u32 = 256;

/// What the generator sends.
#[derive(Debug, Clone)]
pub struct LiveGenConfig {
    /// The template frame (Ethernet, IPv4 without options, UDP to port 9,
    /// at least `MARK_OFFSET + 16` bytes): [`udp_frame`].
    pub frame: Vec<u8>,
    /// Flows, numbered round robin (1..=[`MAX_FLOWS`]).
    pub flows: u32,
    /// A random destination per frame (first octet 1..=223 but 10 and
    /// 127), for a full routing table.
    pub random_dst: bool,
    /// Frames/s (0: as fast as the core goes).
    pub rate_pps: u64,
    /// Depth of the token bucket, frames (with `rate_pps`).
    pub burst: u64,
    /// Program runs per `BPF_PROG_RUN` call: large keeps the core busy
    /// (65,536 left it 70% idle here), small stops sooner.
    pub repeat: u32,
    /// Frames per batch in the kernel (1..=[`MAX_BATCH`]).
    pub batch: u32,
    /// Two destinations: `(k, mac)` sends one frame in `k` to the
    /// template's destination MAC and the `k - 1` others to `mac`, in
    /// turn (two tenants on one port).
    pub mix: Option<(u32, [u8; 6])>,
    /// With `mix`: frames/s to the template's destination, from a token
    /// bucket of its own, the other destination getting the rest (0: one
    /// frame in `k`). Its tenant is then offered its rate whatever the
    /// other's, as long as the generator makes that many frames at all.
    pub mix_first_pps: u64,
    /// Hand each frame to this CPU's cpumap kthread, which sends it into
    /// the veth (None: `XDP_TX` on the generator's own CPU). The receiver
    /// then runs on this CPU, not the generator's.
    pub via_cpu: Option<u32>,
}

impl Default for LiveGenConfig {
    fn default() -> Self {
        Self {
            frame: Vec::new(),
            flows: 1,
            random_dst: false,
            rate_pps: 0,
            burst: 32,
            repeat: 1 << 22,
            batch: 64,
            mix: None,
            mix_first_pps: 0,
            via_cpu: None,
        }
    }
}

/// The generator's own counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveGenCounters {
    /// Frames returned `XDP_TX` (sent to the veth; the veth may still
    /// drop them when its peer's ring is full: its `ethtool -S` counters).
    pub sent: u64,
    /// Frames the pacing dropped before sending.
    pub paced_out: u64,
    /// Of `sent`, those to the template's destination MAC (all of them
    /// without a mix).
    pub first_sent: u64,
}

/// The loaded generator program and its maps. Shared by the sending
/// thread and whoever reads the counters or changes the rate.
pub struct LiveGen {
    conf: Mutex<Array<MapData, LiveGenConf>>,
    state: Array<MapData, LiveGenState>,
    /// With `via_cpu`: the devmap of the generator's veth (set by the
    /// sending thread, in its namespace), and the cpumap, kept open.
    out: Option<(Mutex<DevMap<MapData>>, CpuMap<MapData>)>,
    via_cpu: Option<u32>,
    frame: Vec<u8>,
    repeat: u32,
    batch: u32,
    /// The object; locked by the sending thread for each call (no one
    /// else runs the program) and by [`LiveGen::hold`].
    ebpf: Mutex<Ebpf>,
    /// The interface the program is held on ([`LiveGen::hold`]), once
    /// attached: the link lives in `ebpf` and detaches when it drops.
    held: Mutex<Option<u32>>,
}

impl std::fmt::Debug for LiveGen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveGen")
            .field("frame_len", &self.frame.len())
            .field("repeat", &self.repeat)
            .field("batch", &self.batch)
            .field("via_cpu", &self.via_cpu)
            .finish_non_exhaustive()
    }
}

fn prog_err(step: &'static str) -> impl FnOnce(aya::programs::ProgramError) -> FastError {
    move |e| FastError::Program {
        program: PROGRAM,
        step,
        source: Box::new(e),
    }
}

impl LiveGen {
    /// Load the program and set its configuration.
    ///
    /// # Errors
    /// [`FastError::Config`] for a frame too short for the mark, flows,
    /// batch or repeat out of range; else loading errors.
    pub fn load(cfg: &LiveGenConfig) -> Result<Self, FastError> {
        if cfg.frame.len() < MARK_OFFSET + 16 {
            return Err(FastError::Config {
                why: "live generator: the template frame is shorter than 58 bytes",
            });
        }
        if !(1..=MAX_FLOWS).contains(&cfg.flows) {
            return Err(FastError::Config {
                why: "live generator: flows must be 1..=256",
            });
        }
        if cfg.repeat == 0 || !(1..=MAX_BATCH).contains(&cfg.batch) {
            return Err(FastError::Config {
                why: "live generator: repeat must be > 0 and batch 1..=256",
            });
        }
        let mut ebpf = EbpfLoader::new()
            .load(OBJECT)
            .map_err(|e| FastError::LoadObject {
                object: "xdp_livegen.c",
                source: Box::new(e),
            })?;
        crate::load::program(&mut ebpf, PROGRAM)?
            .load()
            .map_err(prog_err("load"))?;
        let conf = take(&mut ebpf, CONF)?;
        let state = take(&mut ebpf, STATE)?;
        let out = match cfg.via_cpu {
            Some(cpu) => Some(via_cpu(&mut ebpf, cpu)?),
            None => None,
        };
        let g = Self {
            conf: Mutex::new(conf),
            state,
            out,
            via_cpu: cfg.via_cpu,
            frame: cfg.frame.clone(),
            repeat: cfg.repeat,
            batch: cfg.batch,
            ebpf: Mutex::new(ebpf),
            held: Mutex::new(None),
        };
        let mut hdr = [0u8; 48];
        hdr[..MARK_OFFSET].copy_from_slice(&cfg.frame[..MARK_OFFSET]);
        let (mix, mac) = cfg.mix.unwrap_or_default();
        let mut alt_dst = [0u8; 8];
        alt_dst[..6].copy_from_slice(&mac);
        g.write_conf(LiveGenConf {
            flows: cfg.flows,
            random_dst: u32::from(cfg.random_dst),
            rate_pps: cfg.rate_pps,
            burst: cfg.burst.max(1),
            hdr,
            mix,
            via_cpu: cfg.via_cpu.map_or(0, |c| c + 1),
            alt_dst,
            first_pps: cfg.mix_first_pps,
        })?;
        Ok(g)
    }

    /// With `via_cpu`, send into `ifindex` (of the calling thread's
    /// namespace: a devmap entry names an interface of the writer's) from
    /// the forwarding CPU; without, nothing to do.
    ///
    /// # Errors
    /// [`FastError::XdpMap`] (an interface that cannot take redirected
    /// frames).
    pub fn route_out(&self, ifindex: u32) -> Result<(), FastError> {
        let Some((out, _)) = &self.out else {
            return Ok(());
        };
        let mut m = out.lock().unwrap_or_else(|p| p.into_inner());
        m.set(0, ifindex, None, 0).map_err(|e| FastError::XdpMap {
            map: OUT,
            op: "set",
            source: Box::new(e),
        })
    }

    fn write_conf(&self, c: LiveGenConf) -> Result<(), FastError> {
        let mut m = self.conf.lock().unwrap_or_else(|p| p.into_inner());
        m.set(0, c, 0).map_err(map_err(CONF, "set"))
    }

    /// Change the rate (frames/s, 0: unpaced), also while sending; the
    /// bucket is made at least 4 ms of the rate deep.
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn set_rate(&self, rate_pps: u64) -> Result<(), FastError> {
        let mut c = {
            let m = self.conf.lock().unwrap_or_else(|p| p.into_inner());
            m.get(&0, 0).map_err(map_err(CONF, "get"))?
        };
        c.rate_pps = rate_pps;
        // Room for a 4 ms stall of the sending thread (a tick at HZ=250):
        // the tokens it would have spent meanwhile are not lost.
        c.burst = c.burst.max(rate_pps / 250);
        self.write_conf(c)
    }

    /// The CPU frames are handed to (`via_cpu`), if any.
    pub fn via_cpu(&self) -> Option<u32> {
        self.via_cpu
    }

    /// With `via_cpu`: give the cpumap kthread that forwards the frames
    /// (`cpumap/CPU/map:ID`) the highest nice level, -20. The receive
    /// side it stands in for, NAPI in softirq, preempts every task of its
    /// CPU; a kthread of ordinary weight would share the CPU with them (a
    /// forwarder's own worker thread pinned there, say). Returns whether
    /// it was found (false without `via_cpu`).
    ///
    /// # Errors
    /// [`FastError::Os`]: /proc unreadable, or the priority refused.
    pub fn raise_forwarding_priority(&self) -> Result<bool, FastError> {
        use aya::maps::IterableMap;
        let Some((_, cpus)) = &self.out else {
            return Ok(false);
        };
        let id = cpus.map().info().map_err(map_err(CPUS, "info"))?.id();
        let os = |call| move |e| FastError::Os { call, source: e };
        let suffix = format!("/map:{id}");
        for entry in std::fs::read_dir("/proc").map_err(os("read /proc"))? {
            let path = entry.map_err(os("read /proc"))?.path();
            let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
                continue;
            };
            let comm = comm.trim_end();
            if !(comm.starts_with("cpumap/") && comm.ends_with(&suffix)) {
                continue;
            }
            let pid = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse().ok())
                .and_then(rustix::process::Pid::from_raw);
            if let Some(pid) = pid {
                rustix::process::setpriority_process(Some(pid), -20).map_err(|e| {
                    FastError::Os {
                        call: "setpriority of the cpumap kthread",
                        source: e.into(),
                    }
                })?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The counters so far.
    ///
    /// # Errors
    /// [`FastError::Map`].
    pub fn counters(&self) -> Result<LiveGenCounters, FastError> {
        let s = self.state.get(&0, 0).map_err(map_err(STATE, "get"))?;
        Ok(LiveGenCounters {
            sent: s.sent,
            paced_out: s.paced_out,
            first_sent: s.first_sent,
        })
    }

    /// Keep the program in the kernel's XDP dispatcher while this
    /// generator lives: attach it (generic XDP) to `ifindex` (of the
    /// calling thread's namespace), an interface no frame reaches (a
    /// veth left down). Without it each [`LiveGen::send`] adds the
    /// program to the dispatcher and removes it, two `synchronize_rcu()`
    /// in which nothing is sent (see the module docs). Once: a second
    /// call with the same interface does nothing.
    ///
    /// # Errors
    /// [`FastError::Config`] for another interface than the one held;
    /// [`FastError::Program`] (the attach failed: no such interface, a
    /// program already there).
    pub fn hold(&self, ifindex: u32) -> Result<(), FastError> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        match *held {
            Some(i) if i == ifindex => return Ok(()),
            Some(_) => {
                return Err(FastError::Config {
                    why: "live generator: already held on another interface",
                });
            }
            None => {}
        }
        let mut ebpf = self.ebpf.lock().unwrap_or_else(|p| p.into_inner());
        let prog: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .ok_or(FastError::Config {
                why: "live generator: program missing",
            })?
            .try_into()
            .map_err(prog_err("find"))?;
        // The link stays in the program's links: detached when the
        // object drops with this generator.
        prog.attach_to_if_index(ifindex, XdpMode::Skb)
            .map_err(prog_err("attach to the hold interface"))?;
        *held = Some(ifindex);
        Ok(())
    }

    /// One `BPF_PROG_RUN` call: `repeat` runs of the program with
    /// `ifindex` (of the calling thread's namespace) as the ingress
    /// device, rx queue 0. Returns when they are done, or when a signal
    /// cut the call short (not an error: call again).
    ///
    /// # Errors
    /// [`FastError::Program`] (an unknown ifindex is `ENODEV`).
    pub fn send(&self, ifindex: u32) -> Result<(), FastError> {
        let ebpf = self.ebpf.lock().unwrap_or_else(|p| p.into_inner());
        let prog: &Xdp = ebpf
            .program(PROGRAM)
            .ok_or(FastError::Config {
                why: "live generator: program missing",
            })?
            .try_into()
            .map_err(prog_err("find"))?;
        let ctx = xdp_md(ifindex, self.frame.len());
        let r = prog.test_run(TestRunOptions {
            data_in: Some(&self.frame),
            ctx_in: Some(&ctx),
            repeat: self.repeat,
            attrs: TestRunAttrs::new().xdp_live_frames(self.batch),
            ..TestRunOptions::default()
        });
        match r {
            Ok(_) => Ok(()),
            // A signal for the process (a child's SIGCHLD, ...) delivered
            // to this thread ends the run early: what was sent is sent.
            Err(aya::programs::ProgramError::SyscallError(e))
                if e.io_error.raw_os_error() == Some(rustix::io::Errno::INTR.raw_os_error()) =>
            {
                Ok(())
            }
            Err(e) => Err(prog_err("live test run")(e)),
        }
    }
}

/// Load the cpumap program and point `cpu`'s entry of the cpumap at it;
/// the devmap it sends into, and the cpumap.
fn via_cpu(
    ebpf: &mut Ebpf,
    cpu: u32,
) -> Result<(Mutex<DevMap<MapData>>, CpuMap<MapData>), FastError> {
    if !crate::load::online_cpus()?.contains(&cpu) {
        return Err(FastError::Config {
            why: "live generator: via_cpu is not an online CPU",
        });
    }
    crate::load::load_program(ebpf, OUT_PROGRAM)?;
    let fd = crate::load::program_fd(ebpf, OUT_PROGRAM)?;
    let mut cpus: CpuMap<MapData> = take(ebpf, CPUS)?;
    if cpu >= cpus.len() {
        return Err(FastError::Config {
            why: "live generator: via_cpu above the cpumap's 64 entries",
        });
    }
    cpus.set(cpu, CPU_QUEUE, Some(&fd), 0)
        .map_err(|e| FastError::XdpMap {
            map: CPUS,
            op: "set",
            source: Box::new(e),
        })?;
    let out = take(ebpf, OUT)?;
    Ok((Mutex::new(out), cpus))
}

/// `struct xdp_md` as the test run takes it: data 0, data_end the frame's
/// length, no metadata, the ingress device and rx queue 0.
fn xdp_md(ifindex: u32, len: usize) -> [u8; 24] {
    let mut md = [0u8; 24];
    md[4..8].copy_from_slice(&(len as u32).to_ne_bytes());
    md[12..16].copy_from_slice(&ifindex.to_ne_bytes());
    md
}

/// A 64-byte (or `frame_bytes` on the wire, FCS included) UDP/IPv4 frame
/// from `src` to `dst`'s discard port, with a valid header checksum and no
/// UDP checksum: the generator's template.
///
/// # Panics
/// If `frame_bytes` is not 64..=1518 (a caller's constant).
pub fn udp_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    frame_bytes: usize,
) -> Vec<u8> {
    assert!(
        (64..=1518).contains(&frame_bytes),
        "frame size {frame_bytes}"
    );
    let len = frame_bytes - 4;
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&src_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (len - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let sum = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum::<u32>();
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&4000u16.to_be_bytes());
    udp[2..4].copy_from_slice(&9u16.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// The thread that runs a [`LiveGen`] until stopped (or dropped).
#[derive(Debug)]
pub struct LiveSender {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<u64, FastError>>>,
}

/// Where a [`LiveSender`] runs.
#[derive(Debug, Clone, Default)]
pub struct SendOn {
    /// The namespace file to enter (`/run/netns/NAME`), or the caller's.
    pub netns: Option<PathBuf>,
    /// The generator's interface there.
    pub ifname: String,
    /// The core to pin the thread to.
    pub cpu: Option<usize>,
    /// An interface of that namespace no frame reaches (a veth, down) to
    /// hold the program on ([`LiveGen::hold`]), so that no call waits for
    /// the dispatcher; None: each call does.
    pub hold: Option<String>,
}

impl LiveSender {
    /// Start sending from a new thread: it enters the namespace, pins
    /// itself, finds the interface, and calls [`LiveGen::send`] until
    /// stopped. Returns once it has started (or with the error that
    /// stopped it from starting).
    ///
    /// # Errors
    /// [`FastError::Os`] (namespace, affinity), [`FastError::NoSuchInterface`],
    /// or the first send's error.
    pub fn start(generator: Arc<LiveGen>, on: SendOn) -> Result<Self, FastError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("livegen".into())
            .spawn(move || {
                let ready = prepare(&on).and_then(|i| {
                    generator.route_out(i)?;
                    if let Some(h) = &on.hold {
                        generator.hold(ifindex(h)?)?;
                    }
                    Ok(i)
                });
                let idx = match ready {
                    Ok(i) => i,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return Ok(0);
                    }
                };
                let first = generator.send(idx);
                let failed = first.is_err();
                let _ = tx.send(first);
                if failed {
                    return Ok(0);
                }
                let mut calls = 1u64;
                // Relaxed: a stop flag (pairs with the store in `stop`);
                // no data is handed over through it, and the join after
                // the store is what synchronizes.
                while !flag.load(Ordering::Relaxed) {
                    generator.send(idx)?;
                    calls += 1;
                }
                Ok(calls)
            })
            .map_err(|e| FastError::Os {
                call: "spawn the generator's thread",
                source: e,
            })?;
        let mut s = Self {
            stop,
            thread: Some(thread),
        };
        match rx.recv() {
            Ok(Ok(())) => Ok(s),
            Ok(Err(e)) => {
                s.halt();
                Err(e)
            }
            Err(_) => s.stop().and(Err(FastError::Config {
                why: "live generator: its thread ended before sending",
            })),
        }
    }

    /// Whether the thread still sends; its error if it stopped on one.
    ///
    /// # Errors
    /// The error the thread stopped with.
    pub fn check(&mut self) -> Result<bool, FastError> {
        if self.thread.as_ref().is_some_and(JoinHandle::is_finished) {
            self.stop()?;
            return Ok(false);
        }
        Ok(self.thread.is_some())
    }

    /// Stop after the call in progress and wait for it; the number of
    /// `BPF_PROG_RUN` calls made.
    ///
    /// # Errors
    /// The error the thread stopped with.
    pub fn stop(&mut self) -> Result<u64, FastError> {
        // Relaxed: see the load in the thread.
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            None => Ok(0),
        }
    }

    fn halt(&mut self) {
        let _ = self.stop();
    }
}

impl Drop for LiveSender {
    fn drop(&mut self) {
        self.halt();
    }
}

/// In the sending thread: enter the namespace, pin, find the interface.
fn prepare(on: &SendOn) -> Result<u32, FastError> {
    use rustix::thread::{CpuSet, LinkNameSpaceType, move_into_link_name_space};
    if let Some(ns) = &on.netns {
        let f = std::fs::File::open(ns).map_err(|e| FastError::Os {
            call: "open the generator's namespace",
            source: e,
        })?;
        move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&f),
            Some(LinkNameSpaceType::Network),
        )
        .map_err(|e| FastError::Os {
            call: "setns into the generator's namespace",
            source: e.into(),
        })?;
    }
    if let Some(cpu) = on.cpu {
        let mut set = CpuSet::new();
        set.set(cpu);
        rustix::thread::sched_setaffinity(None, &set).map_err(|e| FastError::Os {
            call: "pin the generator's thread",
            source: e.into(),
        })?;
    }
    ifindex(&on.ifname)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One run of the program on the template with a plain test run (no
    /// frame sent): its return value and the frame it made.
    fn run_once(g: &LiveGen) -> (u32, Vec<u8>) {
        let ebpf = g.ebpf.lock().expect("not poisoned");
        let prog: &Xdp = ebpf
            .program(PROGRAM)
            .expect("program")
            .try_into()
            .expect("xdp");
        let mut out = vec![0u8; g.frame.len()];
        let r = prog
            .test_run(TestRunOptions {
                data_in: Some(&g.frame),
                data_out: Some(&mut out),
                ..TestRunOptions::default()
            })
            .expect("test run (root)");
        (r.return_value, out)
    }

    /// Two destination MACs and a template frame to the first.
    fn two_macs() -> ([u8; 6], [u8; 6], Vec<u8>) {
        let (a, b) = ([2, 0, 0, 0, 0, 0xa], [2, 0, 0, 0, 0, 0xb]);
        let frame = udp_frame(
            [2, 0, 0, 0, 0, 1],
            a,
            Ipv4Addr::new(10, 1, 0, 2),
            Ipv4Addr::new(10, 9, 0, 2),
            64,
        );
        (a, b, frame)
    }

    /// With a mix of 3, frames 0, 3, 6, ... keep the template's
    /// destination MAC and the others get the other one; without a mix
    /// every frame keeps it. Each is still numbered.
    #[test]
    fn a_mix_sends_one_frame_in_k_to_the_template_s_mac() {
        let (a, b, frame) = two_macs();
        for (mix, want) in [(Some((3, b)), [a, b, b, a, b, b, a]), (None, [a; 7])] {
            let g = LiveGen::load(&LiveGenConfig {
                frame: frame.clone(),
                mix,
                ..LiveGenConfig::default()
            })
            .expect("load (root)");
            for (i, mac) in want.iter().enumerate() {
                let (act, out) = run_once(&g);
                assert_eq!(act, 3, "XDP_TX");
                assert_eq!(&out[0..6], mac, "frame {i} with {mix:?}");
                assert_eq!(&out[6..12], &frame[6..12], "source MAC kept");
                let seq = u64::from_ne_bytes(out[50..58].try_into().expect("8 bytes"));
                assert_eq!(seq, i as u64, "numbered");
            }
        }
    }
    /// With `mix_first_pps`, the template's MAC gets frames from a bucket
    /// of its own (4 ms of its rate deep, full at the start: 2 frames at
    /// 250/s) and the other MAC every other frame, so that it keeps its
    /// rate however fast the generator goes; counted in `first_sent`.
    #[test]
    fn a_mix_by_rate_gives_the_first_mac_its_own_bucket() {
        let (a, b, frame) = two_macs();
        let g = LiveGen::load(&LiveGenConfig {
            frame,
            mix: Some((20, b)),
            mix_first_pps: 250,
            ..LiveGenConfig::default()
        })
        .expect("load (root)");
        let macs: Vec<[u8; 6]> = (0..7)
            .map(|_| run_once(&g).1[0..6].try_into().expect("6 bytes"))
            .collect();
        // 4 ms per token: the seven runs take far less.
        assert_eq!(macs, [a, a, b, b, b, b, b]);
        let c = g.counters().expect("counters");
        assert_eq!((c.sent, c.first_sent), (7, 2));
    }
}
