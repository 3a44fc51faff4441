//! Several instance processes of one router VR: they share the traffic,
//! one that crashes is taken out alone while the others forward, a new one
//! is added under load and a retired one drains before it stops; every
//! frame given to the VR is forwarded or counted.

mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::datapath::run_until;
use vrhost_api::VrSpec;

use vrhost_host::balance::Policy;
use vrhost_host::{
    Backend, Classifier, InstanceState, Match, PathSpec, Rule, VrCommand, VrPath, VrProcess, Worker,
};
use vrhost_io::Port;
use vrhost_io::mem::{DstMode, MemPort, MemPortConfig};
use vrhost_io::null::NullPort;
use vrhost_packet::MacAddr;
use vrhost_proto::PollConfig;
use vrhost_shm::{Region, RegionConfig};

fn router_cmd() -> VrCommand {
    router_cmd_with(&common::router_config())
}

/// The built-in router on `cfg`, polling as a VR beside the worker does.
fn router_cmd_with(cfg: &vrhost_router::RouterConfig) -> VrCommand {
    VrCommand {
        poll: PollConfig::default().beside_worker(),
        ..common::datapath::router_cmd(cfg, vrhost_host::Confine::default())
    }
}

/// Whether the host has a second core for an instance (a test without
/// one says it skipped).
fn second_core() -> bool {
    let two = vrhost_host::cpu::cpus() >= 2;
    if !two {
        eprintln!("skipped: one CPU, no second core for an instance");
    }
    two
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
    let spec = PathSpec {
        instances: 3,
        balance: Policy::Flow,
        ..PathSpec::new("inst", vec![0, 1], 1024)
    };
    let region = spec.create_region().unwrap();
    let mut procs = Vec::new();
    let mut bells = Vec::new();
    for i in 0..2 {
        let (p, b) = VrProcess::start("inst", i, &region, worker.bell(), &router_cmd()).unwrap();
        procs.push(p);
        bells.push(b);
    }
    let again = Region::attach(region.fd().try_clone_to_owned().unwrap()).unwrap();
    let vp = VrPath::assemble(&spec, region, Backend::Process(procs), bells);
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

/// The daemon runs a VR with `instances = 2`, each instance pinned to its
/// core from `cpus` and fed by the configured policy, and shows both in
/// its stats and metrics.
#[test]
fn the_daemon_runs_the_instances_its_config_asks_for() {
    let cpus = vrhost_host::cpu::cpus();
    let config = one_vr_config(100_000, 2_000_000, |a| {
        a.instances = Some(2);
        a.balance = Some("rr".into());
        if cpus >= 2 {
            a.cpus = Some(vec![1, 0]);
        }
    });
    let d = common::Daemon::start("instances", &config);
    // Frames an instance was given are counted as forwarded only once it
    // hands them back, so wait for both counts rather than sample one.
    let s = d.wait_for("both instances to forward", Duration::from_secs(30), |s| {
        common::vr(s, "a")["instances"].as_array().is_some_and(|i| {
            i.len() == 2 && i.iter().all(|i| i["rx_packets"].as_u64() > Some(1000))
        }) && common::count(s, "a", "tx_packets") > 2000
    });
    let a = common::vr(&s, "a");
    let inst = a["instances"].as_array().unwrap();
    assert!(inst.iter().all(|i| i["running"] == true), "{a:#}");
    if cpus >= 2 {
        assert_eq!(inst[0]["cpu"], 1);
        assert_eq!(inst[1]["cpu"], 0);
    }
    assert_ne!(inst[0]["pid"], inst[1]["pid"], "two processes");
    assert!(common::count(&s, "a", "tx_packets") > 2000);
    assert!(common::count(&s, "a", "arrival_pps") > 0);
    // The metrics, over the API socket (HTTP/1.0: the server closes).
    use std::io::{Read, Write};
    let mut c = std::os::unix::net::UnixStream::connect(&d.sock).unwrap();
    c.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    for i in ["0", "1"] {
        assert!(
            text.contains(&format!(
                "vrhost_instance_rx_packets_total{{instance=\"{i}\",vr=\"a\"}}"
            )),
            "{text}"
        );
    }
    assert!(text.contains("vrhost_vr_arrival_pps{vr=\"a\"}"), "{text}");
}

/// VR a (1024 slots) given `pps` frames/s, `limit` frames in all, to a
/// null port, changed by `edit`.
fn one_vr_config(pps: u64, limit: u64, edit: impl FnOnce(&mut VrSpec)) -> String {
    common::Lab::one_vr()
        .paced(pps)
        .limit(limit)
        .edit_vr("a", |a| {
            a.slots = Some(1024);
            edit(a);
        })
        .to_toml()
}

/// Frames VR `a` did not take at its ingress (counted, by reason).
fn ingress_drops(s: &serde_json::Value) -> u64 {
    let d = common::vr(s, "a")["stats"]["ingress_drops"]
        .as_object()
        .cloned();
    d.unwrap_or_default()
        .values()
        .filter_map(|v| v.as_u64())
        .sum()
}

/// The running instances of VR `a`: (index, pid, cpu).
fn running(s: &serde_json::Value) -> Vec<(u64, u64, Option<u64>)> {
    let inst = common::vr(s, "a")["instances"].as_array().cloned();
    inst.unwrap_or_default()
        .iter()
        .filter(|i| i["running"] == true)
        .map(|i| {
            let n = |k: &str| i[k].as_u64();
            (n("index").unwrap(), n("pid").unwrap_or(0), n("cpu"))
        })
        .collect()
}

/// Under the `dynamic` policy the daemon starts a second instance when
/// the arrival rate passes the threshold, on a core of its own from the
/// host's budget, and retires it when the traffic stops: every frame
/// given to the VR comes out or is counted.
#[test]
fn the_daemon_scales_a_vr_with_its_load() {
    if !second_core() {
        return;
    }
    // 3 s of traffic at 5 x the threshold, then none.
    let scale =
        serde_json::json!({ "up_pps": 10000, "down_pps": 5000, "period_ms": 200, "max": 2 });
    let config = one_vr_config(50_000, 150_000, |a| a.scale = Some(scale));
    let d = common::Daemon::start("scale", &config);
    let s = d.wait_for("a second instance", Duration::from_secs(30), |s| {
        running(s).len() == 2 && common::count(s, "a", "instances_added") == 1
    });
    let two = running(&s);
    assert!(two.iter().all(|i| i.2.is_some()), "pinned: {two:?}");
    assert_ne!(two[0].2, two[1].2, "one core each: {two:?}");
    assert_ne!(two[0].1, two[1].1, "two processes");
    d.wait_for(
        "the traffic to end and one instance to go",
        Duration::from_secs(60),
        |s| {
            common::count(s, "a", "instances_retired") == 1
                && running(s).len() == 1
                && common::count(s, "a", "rx_packets") + ingress_drops(s) >= 150_000
        },
    );
    let s = d.wait_for("every frame handed back", Duration::from_secs(10), |s| {
        let a = &common::vr(s, "a")["stats"];
        a["free_slots"] == a["pool_slots"]
    });
    let n = |f: &str| common::count(&s, "a", f);
    let given = n("rx_packets");
    assert!(given > 100_000, "{s:#}");
    assert_eq!(
        n("tx_packets") + n("vr_dropped") + n("port_dropped"),
        given,
        "{s:#}"
    );
    assert_eq!((n("instances_refused"), n("instance_exits")), (0, 0));
    assert_eq!(running(&s)[0].0, 0, "the first instance stays");
}

/// A VR with two instances and no `cpus` gets two cores of the host's
/// budget; an instance killed is started again beside the other.
#[test]
fn the_daemon_starts_a_fixed_vrs_instance_again_where_one_exited() {
    if !second_core() {
        return;
    }
    let config = one_vr_config(20_000, 100_000_000, |a| a.instances = Some(2));
    let d = common::Daemon::start("fixed", &config);
    let s = d.wait_for("two instances", Duration::from_secs(30), |s| {
        running(s).len() == 2
    });
    let two = running(&s);
    assert!(
        two[0].2.is_some() && two[0].2 != two[1].2,
        "one core each: {two:?}"
    );
    let status = std::process::Command::new("kill")
        .args(["-9", &two[1].1.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let s = d.wait_for("instance 1 again", Duration::from_secs(30), |s| {
        let r = running(s);
        r.len() == 2 && r[1].1 != two[1].1 && common::count(s, "a", "instances_added") == 1
    });
    assert_eq!(common::count(&s, "a", "instance_exits"), 1);
    assert_eq!(running(&s)[1].2, two[1].2, "on the core it had");
    assert_eq!(running(&s)[0].1, two[0].1, "the other went on");
}

/// Changing a VR's instance count or balancing changes it in place: the
/// apply reports it `rescaled`, instances are retired or started beside
/// the first one, which keeps forwarding in the same process.
#[test]
fn an_apply_changes_a_vrs_instances_in_place() {
    if !second_core() {
        return;
    }
    // VR a with `instances`, `balance` and `cpus` as given.
    let config = |instances: u16, balance: Option<&str>, cpus: Option<Vec<u32>>| {
        one_vr_config(20_000, 100_000_000, |a| {
            a.instances = Some(instances);
            a.balance = balance.map(String::from);
            a.cpus = cpus;
        })
    };
    let d = common::Daemon::start("rescale", &config(2, None, None));
    let s = d.wait_for("two instances", Duration::from_secs(30), |s| {
        running(s).len() == 2
    });
    let first = running(&s)[0];
    let dir = common::TempDir::new("rescale-cfg");
    let apply = |config: String| {
        let f = dir.path().join("v.toml");
        std::fs::write(&f, config).unwrap();
        d.json(&["apply", f.to_str().unwrap()])
    };
    let r = apply(config(1, Some("rr"), None));
    assert_eq!(r["rescaled"], serde_json::json!(["a"]), "{r:#}");
    assert_eq!(r["restarted"], serde_json::json!([]), "{r:#}");
    d.wait_for("one instance", Duration::from_secs(30), |s| {
        running(s).len() == 1 && common::count(s, "a", "instances_retired") == 1
    });
    let r = apply(config(2, Some("rr"), None));
    assert_eq!(r["rescaled"], serde_json::json!(["a"]), "{r:#}");
    let s = d.wait_for("two instances again", Duration::from_secs(30), |s| {
        running(s).len() == 2 && common::count(s, "a", "instances_added") == 1
    });
    assert_eq!(running(&s)[0], first, "instance 0 went on in its process");
    let r = apply(config(2, None, Some(vec![1, 0])));
    assert_eq!(
        r["restarted"],
        serde_json::json!(["a"]),
        "cores of its own: restarted"
    );
    let n = |f: &str| common::count(&s, "a", f);
    assert_eq!(n("instances_refused") + n("instance_exits"), 0);
}

/// Frames of two sides of a router, scripted: hosts behind vNIC 0 send UDP
/// flows; the gateway behind vNIC 1 answers the router's ARP requests and
/// counts, per flow, the frames that reach it.
mod lan {
    use std::collections::{HashMap, VecDeque};
    use std::net::Ipv4Addr;
    use std::sync::{Arc, Mutex};

    use vrhost_io::{Port, PortStats};
    use vrhost_packet::MacAddr;
    use vrhost_packet::build::UdpFrameSpec;

    /// The router's vNIC MACs.
    pub const R0: [u8; 6] = [2, 0, 0, 0, 0x10, 0];
    pub const R1: [u8; 6] = [2, 0, 0, 0, 0x10, 1];
    /// The gateway, 10.9.1.2 on vNIC 1.
    pub const GW: [u8; 6] = [2, 0, 0, 0, 0x99, 2];
    pub const GW_IP: Ipv4Addr = Ipv4Addr::new(10, 9, 1, 2);

    /// What both sides saw and have to send.
    #[derive(Default)]
    pub struct Lan {
        /// Frames each side (port) hands to the router next.
        pub to_send: [VecDeque<Vec<u8>>; 2],
        /// ARP requests for the gateway answered.
        pub arp_answered: u64,
        /// Frames that reached the gateway with its MAC, by flow (source
        /// port).
        pub got: HashMap<u16, u64>,
        /// Frames that reached the gateway with another MAC.
        pub wrong_mac: u64,
    }

    impl Lan {
        /// One UDP frame per flow, flows `0..flows`, to hosts behind the
        /// gateway.
        pub fn wave(&mut self, flows: u16) {
            for f in 0..flows {
                let mut b = vec![0u8; 64];
                UdpFrameSpec {
                    dst_mac: MacAddr(R0),
                    src_mac: MacAddr([2, 0, 0, 0, 0xa0, 7]),
                    src_ip: Ipv4Addr::new(10, 1, 0, 7),
                    dst_ip: Ipv4Addr::new(10, 2, (f >> 8) as u8, f as u8),
                    sport: 1000 + f,
                    dport: 9,
                    ttl: 64,
                    frame_bytes: 64,
                }
                .write(&mut b)
                .unwrap();
                self.to_send[0].push_back(b);
            }
        }

        /// Frames that reached the gateway, all flows.
        pub fn got_total(&self) -> u64 {
            self.got.values().sum()
        }

        /// A frame the router sent on side 1: answer an ARP request for the
        /// gateway, count a UDP frame.
        fn sent_to_gateway(&mut self, f: &[u8]) {
            match f.get(12..14) {
                Some([0x08, 0x06])
                    if f.len() >= 42 && f[21] == 1 && f[38..42] == GW_IP.octets() =>
                {
                    let mut r = Vec::with_capacity(42);
                    r.extend_from_slice(&R1);
                    r.extend_from_slice(&GW);
                    r.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
                    r.extend_from_slice(&GW);
                    r.extend_from_slice(&GW_IP.octets());
                    r.extend_from_slice(&f[22..32]); // the asker's MAC and address
                    self.to_send[1].push_back(r);
                    self.arp_answered += 1;
                }
                Some([0x08, 0x00]) if f.len() >= 36 => {
                    if f[0..6] == GW {
                        let sport = u16::from_be_bytes([f[34], f[35]]);
                        *self.got.entry(sport - 1000).or_default() += 1;
                    } else {
                        self.wrong_mac += 1;
                    }
                }
                _ => {}
            }
        }
    }

    /// One side of [`Lan`] as a port.
    pub struct Side {
        pub name: String,
        pub side: usize,
        pub lan: Arc<Mutex<Lan>>,
        pub rx: Vec<Vec<u8>>,
        pub stats: PortStats,
    }

    impl Port for Side {
        fn name(&self) -> &str {
            &self.name
        }

        fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
            self.rx.clear();
            let mut lan = self.lan.lock().unwrap();
            while self.rx.len() < out.len().min(32) {
                match lan.to_send[self.side].pop_front() {
                    Some(f) => self.rx.push(f),
                    None => break,
                }
            }
            drop(lan);
            for (o, f) in out.iter_mut().zip(&self.rx) {
                *o = f;
            }
            self.stats.rx_packets += self.rx.len() as u64;
            self.rx.len()
        }

        fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
            if self.side == 1 {
                let mut lan = self.lan.lock().unwrap();
                for f in frames {
                    lan.sent_to_gateway(f);
                }
            }
            self.stats.tx_packets += frames.len() as u64;
            frames.len()
        }

        fn stats(&self) -> PortStats {
            self.stats
        }
    }
}

/// Two instances of the built-in router, no static neighbour: the gateway's
/// ARP reply reaches one instance (the balancer hashes ARP by MAC), which
/// tells the other, so both forward their flows with the gateway's MAC
/// and none keeps dropping packets as `arp_unresolved`.
#[test]
fn instances_share_the_neighbours_they_learn_by_arp() {
    use std::sync::{Arc, Mutex};

    use vrhost_proto::counter;
    use vrhost_router::{RouteConfig, RouterConfig, VnicConfig};
    use vrhost_sdk::DropReason;

    const FLOWS: u16 = 128;
    let lan = Arc::new(Mutex::new(lan::Lan::default()));
    let side = |side: usize| -> Box<dyn Port> {
        Box::new(lan::Side {
            name: format!("side{side}"),
            side,
            lan: Arc::clone(&lan),
            rx: Vec::new(),
            stats: Default::default(),
        })
    };
    let rule = |port: usize| Rule {
        m: Match {
            in_port: Some(port),
            ..Match::default()
        },
        vr: 0,
        vnic: port as u16,
    };
    let rules = Classifier::new(&[rule(0), rule(1)]).unwrap();
    let mut worker = Worker::new(vec![side(0), side(1)], rules, PollConfig::default()).unwrap();
    let vnic = |mac: [u8; 6], addr: &str| VnicConfig {
        mac: MacAddr(mac).to_string(),
        addrs: vec![addr.into()],
        mtu: None,
    };
    let cfg = RouterConfig {
        vnics: vec![vnic(lan::R0, "10.1.0.1/24"), vnic(lan::R1, "10.9.1.1/24")],
        routes: vec![RouteConfig {
            prefix: "10.2.0.0/16".into(),
            via: Some(lan::GW_IP.to_string()),
            ..RouteConfig::default()
        }],
        ..RouterConfig::default()
    };
    let region = Region::create(
        "share",
        RegionConfig {
            slot_count: 1024,
            ring_entries: 1024,
            instance_count: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let (mut procs, mut bells) = (Vec::new(), Vec::new());
    for i in 0..2 {
        let (p, b) =
            VrProcess::start("share", i, &region, worker.bell(), &router_cmd_with(&cfg)).unwrap();
        procs.push(p);
        bells.push(b);
    }
    let mut vp = VrPath::new("share", region, vec![0, 1], Backend::Process(procs), bells);
    vp.set_balance(Policy::Flow);
    worker.add_vr(vp);
    // Per instance: frames sent on, and dropped as arp_unresolved.
    let counts = |w: &Worker| -> Vec<(u64, u64)> {
        let unres = counter::DROP_BASE + DropReason::ArpUnresolved as usize;
        w.vrs()[0]
            .instance_info()
            .iter()
            .map(|i| (i.vr_counters[counter::TX], i.vr_counters[unres]))
            .collect()
    };

    // Waves of one frame per flow until every flow has reached the
    // gateway (the first frames of a flow wait for ARP, or are dropped
    // while it resolves).
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        let mut l = lan.lock().unwrap();
        if l.got.len() == usize::from(FLOWS) {
            break;
        }
        if l.to_send[0].is_empty() {
            l.wave(FLOWS);
        }
        drop(l);
        if worker.poll_once() == 0 {
            std::thread::yield_now();
        }
    }
    let got = lan.lock().unwrap().got.len();
    assert_eq!(
        got,
        usize::from(FLOWS),
        "flows that reached the gateway: {got} of {FLOWS}; per instance (sent, arp_unresolved) {:?}",
        counts(&worker)
    );

    // Everything given to the VR handed back: none of those frames is
    // still on its way.
    run_until(&mut worker, Duration::from_secs(10), |w| {
        let vr = &w.vrs()[0];
        lan.lock().unwrap().to_send.iter().all(|q| q.is_empty())
            && vr.free_slots() == vr.pool_slots()
    });

    // Resolved everywhere: waves of every flow, each wave after the last
    // has arrived whole; every frame forwarded with the gateway's MAC, by
    // both instances, and no more arp_unresolved drops.
    let before = counts(&worker);
    const WAVES: u64 = 5;
    let (start, total) = {
        let l = lan.lock().unwrap();
        (l.got.clone(), l.got_total())
    };
    let (mut pushed, t) = (0, Instant::now());
    while t.elapsed() < Duration::from_secs(20) {
        let mut l = lan.lock().unwrap();
        let arrived = l.got_total() - total;
        if arrived >= WAVES * u64::from(FLOWS) {
            break;
        }
        if arrived >= pushed * u64::from(FLOWS) && pushed < WAVES {
            l.wave(FLOWS);
            pushed += 1;
        }
        drop(l);
        if worker.poll_once() == 0 {
            std::thread::yield_now();
        }
    }
    let after = counts(&worker);
    let l = lan.lock().unwrap();
    for f in 0..FLOWS {
        let n = l.got.get(&f).copied().unwrap_or(0) - start.get(&f).copied().unwrap_or(0);
        assert_eq!(
            n, WAVES,
            "flow {f}: every frame of {WAVES} waves arrives; (sent, arp_unresolved) per instance before {before:?} after {after:?}"
        );
    }
    assert_eq!(l.wrong_mac, 0, "every frame to the gateway's MAC");
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        assert!(a.0 > b.0, "instance {i} forwards: {before:?} {after:?}");
        assert_eq!(a.1, b.1, "instance {i}: no more arp_unresolved drops");
    }
    assert!(l.arp_answered >= 1);
    drop(l);
    worker.shutdown();
}
