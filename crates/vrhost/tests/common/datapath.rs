//! An in-process data path, for the tests that drive a host [`Worker`]
//! themselves: the built-in router VR's command, router VRs with regions of
//! their own, a generator of two tenants' traffic and a poll loop.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vrhost_host::{
    Backend, Classifier, Confine, Match, PathSpec, Rule, VrCommand, VrPath, VrProcess, VrStats,
    Worker,
};
use vrhost_io::Port;
use vrhost_io::mem::{DstMode, MemPort, MemPortConfig};
use vrhost_io::null::NullPort;
use vrhost_proto::PollConfig;
use vrhost_router::RouterConfig;
use vrhost_shm::Region;

/// The built-in router (`vrhost vr-run`) on `config`, confined by
/// `confine`.
pub fn router_cmd(config: &RouterConfig, confine: Confine) -> VrCommand {
    VrCommand {
        program: PathBuf::from(env!("CARGO_BIN_EXE_vrhost")),
        args: vec!["vr-run".into()],
        cpu: None,
        poll: PollConfig::default(),
        config: serde_json::to_value(config).unwrap(),
        ready_timeout: Duration::from_secs(30),
        idle_start: Duration::ZERO,
        confine,
        hurry: Default::default(),
    }
}

/// The spec of a VR `name` of `slots` slots, its vNICs 0 and 1 on the
/// worker's ports 0 and 1.
pub fn spec(name: &str, slots: u32) -> PathSpec {
    PathSpec::new(name, vec![0, 1], slots)
}

/// The region of a [`spec`].
pub fn region(name: &str, slots: u32) -> Region {
    spec(name, slots).create_region().unwrap()
}

/// VR `name` of the worker: `cmd` started in a [`region`] of `slots`, its
/// vNICs 0 and 1 on the worker's ports 0 and 1.
pub fn router_path(worker: &Worker, name: &str, slots: u32, cmd: &VrCommand) -> VrPath {
    let spec = spec(name, slots);
    let region = spec.create_region().unwrap();
    let (p, bell) = VrProcess::start(name, 0, &region, worker.bell(), cmd).unwrap();
    VrPath::assemble(&spec, region, Backend::Process(vec![p]), vec![bell])
}

/// The two tenants' source addresses: tenant `i`'s frames go to VR `i`.
pub const TENANTS: [Ipv4Addr; 2] = [Ipv4Addr::new(192, 168, 0, 1), Ipv4Addr::new(192, 168, 0, 2)];

/// A generator port `mem0` of 64-byte frames to 10.1.1.1 from `srcs`.
pub fn mem_port(srcs: Vec<Ipv4Addr>) -> MemPort {
    MemPort::new(
        "mem0",
        MemPortConfig {
            frame_bytes: 64,
            dst: DstMode::Fixed(Ipv4Addr::new(10, 1, 1, 1)),
            src_ips: srcs,
            ..MemPortConfig::default()
        },
    )
    .unwrap()
}

/// A worker over a generator of two tenants' traffic (told apart by
/// source address, [`TENANTS`]) on port 0 and a sink on port 1; its VRs
/// are the test's to add.
pub fn two_tenant_worker() -> Worker {
    let rules: Vec<Rule> = (0..2)
        .map(|i| Rule {
            m: Match {
                src: Some((TENANTS[i], 32)),
                ..Match::default()
            },
            vr: i,
            vnic: 0,
        })
        .collect();
    let ports: Vec<Box<dyn Port>> = vec![
        Box::new(mem_port(TENANTS.to_vec())),
        Box::new(NullPort::new("null")),
    ];
    Worker::new(
        ports,
        Classifier::new(&rules).unwrap(),
        PollConfig::default(),
    )
    .unwrap()
}

/// Run the worker until `done` says so or the deadline passes.
pub fn run_until(worker: &mut Worker, deadline: Duration, mut done: impl FnMut(&Worker) -> bool) {
    let t = Instant::now();
    while t.elapsed() < deadline && !done(worker) {
        if worker.poll_once() == 0 {
            std::thread::yield_now();
        }
    }
}

/// Run the worker until its VRs 0 and 1 have each sent more than `frames`
/// (up to 20 s, a bound against a hung test, not a speed limit); returns
/// their stats, for the test to check.
pub fn run_until_both_forward(worker: &mut Worker, frames: u64) -> (Arc<VrStats>, Arc<VrStats>) {
    let (sa, sb) = (
        worker.vrs()[0].stats().clone(),
        worker.vrs()[1].stats().clone(),
    );
    run_until(worker, Duration::from_secs(20), |_| {
        sa.tx_packets.get() > frames && sb.tx_packets.get() > frames
    });
    (sa, sb)
}
