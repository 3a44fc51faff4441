//! The options of `vrhost bench forward`.

use std::path::PathBuf;

use super::tcp::{TcpGro, TcpPlacement, TcpQdisc};
use super::{Family, GeneratorKind};

/// Options of `vrhost bench forward`.
#[derive(Debug, Clone, clap::Args)]
pub struct ForwardArgs {
    /// Forwarders: kernel (RPS to the forwarder's core), kernel_norps
    /// (in the receiving core's softirq), af_xdp, af_xdp_dedicated (af_xdp
    /// with p0 and p1 dedicated to the VR: their UMEM is the VR's pool),
    /// af_xdp_txlive (af_xdp whose ports send through the kernel's XDP
    /// test run with live frames, `ports[].tx = "xdp"`: no skb per frame),
    /// af_xdp_dedicated_txlive (both: a frame copied from the VR's pool
    /// into the test run's array), af_packet, socket,
    /// fast (vrhost's XDP fast path, the VR's slow path on af_xdp ports),
    /// tap (a `kind = "tap"` VR on af_xdp ports: Linux forwarding in its
    /// namespace behind TAPs).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "kernel,af_xdp,af_packet,socket"
    )]
    pub forwarders: Vec<String>,
    /// Frame sizes on the wire, bytes (with FCS).
    #[arg(long, value_delimiter = ',', default_value = "64")]
    pub frame_bytes: Vec<usize>,
    /// Address families of the frames: ipv4, ipv6 (UDP over IPv6 without
    /// extension headers, at least 66 bytes; trafgen, table `2`, not the
    /// fast forwarder: the live generator and the fast path are IPv4
    /// only).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "ipv4")]
    pub family: Vec<Family>,
    /// Offered loads as fractions of the generator's maximum (1 = unpaced).
    #[arg(long, value_delimiter = ',', default_value = "0.25,0.5,0.75,0.9,1")]
    pub loads: Vec<f64>,
    /// Route tables: `2` (two connected routes, one destination) or a
    /// route file (full table, random class-C destinations). Repeatable.
    #[arg(long, default_value = "2")]
    pub table: Vec<String>,
    /// Generators, each measured in turn: trafgen (skbs through the
    /// veth), live (the XDP live-frames generator, about ten times
    /// trafgen's rate on veth; p0's receive side runs on its core) or
    /// live-split (the same, handing its frames to the forwarder's core).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "trafgen")]
    pub generator: Vec<GeneratorKind>,
    /// The live generator: program runs per `BPF_PROG_RUN` call (larger
    /// keeps its core busier; the generator stops within one call).
    #[arg(long, default_value_t = 1 << 22)]
    pub live_repeat: u32,
    /// The live generator: frames per batch (1..=256).
    #[arg(long, default_value_t = 64)]
    pub live_batch: u32,
    /// Measurement window per point, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Warm-up before each window, seconds.
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// Core of the generator.
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    /// Core of the forwarder (kernel RPS target; vrhost host worker).
    #[arg(long, default_value_t = 1)]
    pub fwd_cpu: usize,
    /// The fast forwarder: CPUs its forwarding is spread over through a
    /// cpumap (`[host.fast] cpus`; default none: on the receiving CPU,
    /// on veth the generator's).
    #[arg(long, value_delimiter = ',')]
    pub fast_cpus: Vec<u32>,
    /// Core of the VR process (default: not pinned; the scheduler places
    /// it, which on two cores beat pinning it beside the host worker).
    #[arg(long)]
    pub vr_cpu: Option<usize>,
    /// vrhost: the VR's pool slots. It must hold what arrives while the
    /// VR waits for its core (up to a 4 ms tick behind the generator):
    /// 4,096 lost 0.1-0.3% at 0.5-0.9 x the generator's rate here.
    #[arg(long, default_value_t = 16384)]
    pub slots: u32,
    /// vrhost `af_xdp` ports: descriptors per socket ring. The fill ring
    /// must outlast a stall of the host worker (the VR preempting it, when
    /// the scheduler puts it there): 2,048 lost up to 0.3%.
    #[arg(long, default_value_t = 8192)]
    pub xdp_ring: u32,
    /// vrhost `af_xdp` ports: UMEM frames per queue (half for receiving).
    #[arg(long, default_value_t = 16384)]
    pub xdp_frames: u32,
    /// vrhost: `ports[].tx` of the `af_xdp` forwarder's ports (socket,
    /// xdp, auto; default: the daemon's, socket); `af_xdp_txlive` is
    /// always xdp.
    #[arg(long)]
    pub af_xdp_tx: Option<String>,
    /// vrhost: `[host.poll] busy_poll_us`, how long the worker (and a VR
    /// with a core of its own, `--vr-cpu`) polls after its last frame
    /// before it sleeps (0: the default back-off).
    #[arg(long, default_value_t = 0)]
    pub busy_poll_us: u32,
    /// vrhost: `[host.poll] nap_us` (default: the daemon's).
    #[arg(long)]
    pub nap_us: Option<u32>,
    /// vrhost: `[host.poll] spin_rounds` (default: the daemon's).
    #[arg(long)]
    pub spin_rounds: Option<u32>,
    /// vrhost: `[host.poll] spin_yield_every` (default: the daemon's, 16;
    /// 0: the worker spins without yielding, as before 2026-11-26).
    #[arg(long)]
    pub spin_yield_every: Option<u32>,
    /// vrhost: `[host.poll] tx_batch`, the batch a `tx = "xdp"` port
    /// holds for while more frames are coming (default: the daemon's, 0:
    /// a run after every round that sent).
    #[arg(long)]
    pub tx_batch: Option<u32>,
    /// vrhost: `[host.poll] tx_wait_us`, the longest a held batch waits
    /// (default: the daemon's).
    #[arg(long)]
    pub tx_wait_us: Option<u32>,
    /// vrhost: `[host.poll] colocate_pps` (default: the daemon's).
    #[arg(long)]
    pub colocate_pps: Option<u32>,
    /// vrhost: `[host.poll] follow_rx` (default: the daemon's, true: while
    /// light, the worker and the VRs on its core follow the CPU its frames
    /// arrive on; false: it stays on `--fwd-cpu`, as before 2026-11-26).
    #[arg(long)]
    pub follow_rx: Option<bool>,
    /// vrhost: `[host.poll] hand_over` (default: the daemon's, true: the
    /// worker sleeps to hand its core to a VR on it that holds frames;
    /// false: it spins and yields meanwhile, as before 2026-11-27).
    #[arg(long)]
    pub hand_over: Option<bool>,
    /// vrhost: `[host.poll] flow_us` (default: the daemon's, 0: a VR
    /// beside the worker sleeps as soon as it is idle).
    #[arg(long)]
    pub flow_us: Option<u32>,
    /// Steer the end hosts' receive processing (gen's and sink's `eth0`,
    /// with RPS) to this CPU, for every forwarder: on veth a frame is
    /// received on the CPU that sent it, so without it the sink's TCP
    /// stack runs on the forwarder's core.
    #[arg(long)]
    pub endpoint_rps_cpu: Option<usize>,
    /// vrhost: run the node's veth NAPI polls (p0 and p1) in kernel
    /// threads pinned to `--fwd-cpu`, so the XDP program and the copies
    /// into the AF_XDP sockets leave the sending end host's core.
    #[arg(long)]
    pub threaded_napi: bool,
    /// Pings per RTT measurement (0: skip).
    #[arg(long, default_value_t = 40)]
    pub pings: u32,
    /// Seconds between pings.
    #[arg(long, default_value_t = 0.05)]
    pub ping_interval: f64,
    /// Pings a second apart, each the first frame after an idle second
    /// (`rtt_idle_us_p99`; 0: skip).
    #[arg(long, default_value_t = 10)]
    pub idle_pings: u32,
    /// Core of the pinging process (none: where the scheduler puts it). On
    /// veth the sender's core runs the frame's receive side, as the core
    /// of a NIC's interrupt does: with the worker's core, a wakeup of the
    /// worker is a local switch.
    #[arg(long)]
    pub ping_cpu: Option<usize>,
    /// Seconds of iperf3 TCP (0: skip).
    #[arg(long, default_value_t = 3)]
    pub tcp_seconds: u64,
    /// Cores of the iperf3 server (on the sink) and client (on the
    /// generator), `SERVER,CLIENT` (default: the server on `--fwd-cpu`,
    /// the client on `--gen-cpu`, as the generator and the forwarder are
    /// placed for UDP).
    #[arg(long, value_delimiter = ',')]
    pub tcp_cpus: Vec<usize>,
    /// The placements of iperf3 each forwarder is measured in, the best
    /// kept as `tcp_gbps` (both reported): pinned (`--tcp-cpus`) and
    /// unpinned (where the scheduler puts it). The kernel's best is
    /// unpinned on two cores (pinned, its RPS forwarding shares the
    /// forwarder's core with the server), vrhost's pinned.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "pinned,unpinned"
    )]
    pub tcp_placements: Vec<TcpPlacement>,
    /// Unpinned only (`--tcp-placements unpinned`; the placement before
    /// `--tcp-cpus`).
    #[arg(long, conflicts_with = "tcp_cpus")]
    pub tcp_unpinned: bool,
    /// The end hosts' GRO during the TCP test: ends (both end hosts'
    /// `eth0`, the sink's XDP program off meanwhile: the kernel at its
    /// best, every forwarder alike), gen (on the generator's `eth0` only,
    /// where the ACKs arrive, the sink's XDP program left on, which copies
    /// every skb arriving there: the setting before 2026-11-27), needed
    /// (only for the forwarders that need it: not like for like).
    #[arg(long, value_enum, default_value = "ends")]
    pub tcp_gro: TcpGro,
    /// The end hosts' root qdisc during the TCP test: pfifo-fast (as a real
    /// host's NIC has; a veth whose peer's ring is full then holds the
    /// segment in it instead of dropping it), none (a veth's `noqueue`:
    /// the setting before 2026-11-27).
    #[arg(long, value_enum, default_value = "pfifo-fast")]
    pub tcp_qdisc: TcpQdisc,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write a PNG plot of forwarded vs offered rate (scripts/plot-forward,
    /// run from the repository root).
    #[arg(long)]
    pub plot: Option<PathBuf>,
}
