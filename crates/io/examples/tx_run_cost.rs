//! The cost of one transmit run of an `af_xdp` port with `tx = "xdp"`, as
//! a function of the frames it carries: the test run (`BPF_PROG_RUN`
//! with live frames, a page pool a call) against the socket (`sendto`,
//! an skb a frame), the two paths `tx_socket_below` chooses between.
//!
//! Run as root: `cargo run --release -p vrhost-io --example tx_run_cost
//! [calls] [frame bytes...]`. It makes two throwaway network namespaces
//! joined by a veth pair (GRO on the peer, so it takes xdp_frames; the
//! frames are of an unknown EtherType, dropped by the peer's stack after
//! GRO), deleted on exit, and prints one line per frame size, path and
//! run length: wall and CPU time of this thread a call and a frame
//! (veth runs the peer's receive inside the call, so both count it).

use std::time::Instant;

use vrhost_io::Port;
use vrhost_io::af_xdp::{AfXdpConfig, AfXdpPort, TxPath};
use vrhost_lab::{Netns, veth};

const RUNS: [usize; 12] = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 160];

fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let calls: usize = args.next().map_or(Ok(4000), |a| a.parse())?;
    let sizes: Vec<usize> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    let sizes = if sizes.is_empty() {
        vec![66, 1514]
    } else {
        sizes
    };
    let a = Netns::unique("vrh-txcost")?;
    let b = Netns::unique("vrh-txcost")?;
    veth(
        &a,
        "a0",
        Some("02:00:00:00:a0:01"),
        &b,
        "b0",
        Some("02:00:00:00:b0:01"),
    )?;
    b.exec("ethtool", &["-K", "b0", "gro", "on"])?;
    println!("frame_bytes path run_frames ns_call cpu_ns_call ns_frame cpu_ns_frame");
    for &len in &sizes {
        let mut f = vec![0u8; len.max(14)];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0xb0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0xa0, 1]);
        f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        for (path, below) in [("xdp", 0), ("socket", 32)] {
            let cfg = AfXdpConfig {
                tx: TxPath::Xdp,
                tx_socket_below: below,
                ..AfXdpConfig::default()
            };
            let mut port = a.run(|| AfXdpPort::open("a0", &cfg))??;
            for &n in &RUNS {
                if path == "socket" && n >= below as usize {
                    continue;
                }
                let burst: Vec<&[u8]> = vec![&f[..]; n];
                let (wall, cpu) = a.run(|| {
                    let mut once = || {
                        port.tx_burst(&burst);
                        let _ = port.flush();
                    };
                    for _ in 0..calls / 10 {
                        once();
                    }
                    let (t0, c0) = (Instant::now(), thread_cpu_ns());
                    for _ in 0..calls {
                        once();
                    }
                    (t0.elapsed().as_nanos() as u64, thread_cpu_ns() - c0)
                })?;
                let c = calls as u64;
                println!(
                    "{len} {path} {n} {} {} {} {}",
                    wall / c,
                    cpu / c,
                    wall / c / n as u64,
                    cpu / c / n as u64
                );
            }
            let s = port.stats();
            eprintln!("{len} {path}: {s:?} short runs {}", port.short_runs());
        }
    }
    Ok(())
}
