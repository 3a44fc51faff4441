//! Several instance processes of one router VR: they share the traffic,
//! one that crashes is taken out alone while the others forward, a new one
//! is added under load and a retired one drains before it stops; every
//! frame given to the VR is forwarded or counted.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use vrhost_host::balance::Policy;
use vrhost_host::{
    Backend, Classifier, InstanceState, Match, Rule, VrCommand, VrPath, VrProcess, Worker,
};
use vrhost_io::Port;
use vrhost_io::mem::{DstMode, MemPort, MemPortConfig};
use vrhost_io::null::NullPort;
use vrhost_packet::MacAddr;
use vrhost_shm::{Region, RegionConfig};
use vrhost_vr::proto::PollConfig;
use vrhost_vr::router::{NextHopConfig, RouteConfig, RouterConfig, VnicConfig};

fn router_cmd() -> VrCommand {
    let cfg = RouterConfig {
        vnics: vec![
            VnicConfig {
                mac: "02:00:00:00:10:00".into(),
                ..VnicConfig::default()
            },
            VnicConfig {
                mac: "02:00:00:00:10:01".into(),
                ..VnicConfig::default()
            },
        ],
        nexthops: vec![NextHopConfig {
            vnic: 1,
            mac: "02:00:00:00:00:02".into(),
            ..NextHopConfig::default()
        }],
        routes: vec![RouteConfig {
            prefix: "10.0.0.0/8".into(),
            nexthop: Some(0),
            ..RouteConfig::default()
        }],
        ..RouterConfig::default()
    };
    VrCommand {
        program: PathBuf::from(env!("CARGO_BIN_EXE_vrhost")),
        args: vec!["vr-run".into()],
        cpu: None,
        poll: PollConfig::default().beside_worker(),
        config: serde_json::to_value(cfg).unwrap(),
        ready_timeout: Duration::from_secs(30),
        confine: vrhost_host::Confine::default(),
    }
}

fn run_until(worker: &mut Worker, deadline: Duration, mut done: impl FnMut(&Worker) -> bool) {
    let t = Instant::now();
    while t.elapsed() < deadline && !done(worker) {
        if worker.poll_once() == 0 {
            std::thread::yield_now();
        }
    }
}

#[test]
fn instances_share_survive_a_crash_grow_and_retire_without_losing_a_frame() {
    // Many flows (random addresses in 10/8), a bounded count of frames.
    let gen_port = MemPort::new(
        "mem",
        MemPortConfig {
            dst: DstMode::Prefixes(vec![(u32::from(Ipv4Addr::new(10, 0, 0, 0)), 8)]),
            dst_mac: MacAddr([2, 0, 0, 0, 0x10, 0]),
            templates: 1021,
            limit: Some(2_000_000),
            pps: Some(200_000),
            ..MemPortConfig::default()
        },
    )
    .unwrap();
    let ports: Vec<Box<dyn Port>> = vec![Box::new(gen_port), Box::new(NullPort::new("null"))];
    let rules = Classifier::new(&[Rule {
        m: Match {
            in_port: Some(0),
            ..Match::default()
        },
        vr: 0,
        vnic: 0,
    }])
    .unwrap();
    let mut worker = Worker::new(ports, rules, PollConfig::default()).unwrap();
    let region = Region::create(
        "inst",
        RegionConfig {
            slot_count: 1024,
            ring_entries: 1024,
            instance_count: 3,
            ..Default::default()
        },
    )
    .unwrap();
    let mut procs = Vec::new();
    let mut bells = Vec::new();
    for i in 0..2 {
        let (p, b) = VrProcess::start("inst", i, &region, worker.bell(), &router_cmd()).unwrap();
        procs.push(p);
        bells.push(b);
    }
    let again = Region::attach(region.fd().try_clone_to_owned().unwrap()).unwrap();
    let mut vp = VrPath::new("inst", region, vec![0, 1], Backend::Process(procs), bells);
    vp.set_balance(Policy::Flow);
    let st = vp.stats().clone();
    worker.add_vr(vp);

    // Both take a share.
    run_until(&mut worker, Duration::from_secs(20), |_| {
        st.instances[0].returned.get() > 5_000 && st.instances[1].returned.get() > 5_000
    });
    assert!(
        st.instances[0].returned.get() > 5_000,
        "instance 0 forwards"
    );
    assert!(
        st.instances[1].returned.get() > 5_000,
        "instance 1 forwards"
    );

    // Instance 1 crashes: taken out alone, its slots reclaimed.
    worker.vrs_mut()[0].kill_instance(1);
    run_until(&mut worker, Duration::from_secs(10), |_| {
        st.instance_exits.get() == 1
    });
    assert_eq!(st.instance_exits.get(), 1, "the exit is seen");
    assert_eq!(st.exits.get(), 0, "the VR did not go down");
    let vr = &worker.vrs()[0];
    assert!(vr.is_up());
    assert_eq!(vr.live_instances(), 1);
    vr.check_slot_accounting().unwrap();
    let before = st.tx_packets.get();
    run_until(&mut worker, Duration::from_secs(20), |_| {
        st.tx_packets.get() > before + 10_000
    });
    assert!(st.tx_packets.get() > before + 10_000, "instance 0 goes on");

    // A new instance on the vacant slot takes a share.
    let slot = worker.vrs()[0].vacant_instance().expect("a vacant slot");
    let (p, b) = VrProcess::start("inst", slot, &again, worker.bell(), &router_cmd()).unwrap();
    worker.vrs_mut()[0].add_instance(p, b).ok().unwrap();
    let s = usize::from(slot);
    run_until(&mut worker, Duration::from_secs(20), |_| {
        st.instances[s].returned.get() > 5_000
    });
    assert!(
        st.instances[s].returned.get() > 5_000,
        "the new instance forwards"
    );

    // Retired: drained, stopped, its slot vacant again; nothing lost.
    assert!(worker.vrs_mut()[0].retire_instance(slot));
    run_until(&mut worker, Duration::from_secs(10), |w| {
        w.vrs()[0].instance_states()[s] == InstanceState::Off
    });
    assert_eq!(worker.vrs()[0].instance_states()[s], InstanceState::Off);
    assert_eq!(worker.vrs()[0].live_instances(), 1);
    worker.drain();
    let vr = &worker.vrs()[0];
    vr.check_slot_accounting().unwrap();
    assert!(vr.is_drained());
    // Every frame given was forwarded, dropped by the VR or port (counted),
    // or reclaimed from the crashed instance (counted).
    assert_eq!(
        st.rx_packets.get(),
        st.tx_packets.get() + st.vr_dropped.get() + st.port_dropped.get() + st.reclaimed.get(),
        "frames given = forwarded + counted"
    );
    assert_eq!(st.violations_total(), 0);
    worker.shutdown();
}
