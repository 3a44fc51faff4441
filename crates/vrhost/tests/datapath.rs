//! End-to-end tests of the data path: the host worker with real VR
//! processes (the `vrhost vr-run` built-in router and the example custom VR),
//! frames from pcap or memory ports, and VRs that crash or cheat.

mod common;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::datapath::{
    region, router_path, run_until, run_until_both_forward, spec, two_tenant_worker,
};
use vrhost_host::{
    Backend, Classifier, Match, Rule, Violation, VrCommand, VrPath, VrProcess, Worker,
};
use vrhost_io::Port;
use vrhost_io::pcap::{PcapRxPort, PcapTxPort};
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;
use vrhost_packet::ipv4::Ipv4Packet;
use vrhost_proto::{PollConfig, counter};
use vrhost_sdk::DropReason;
use vrhost_shm::{Region, RingId, SlotState};

/// The built-in router on the tests' config, unconfined.
fn router_cmd() -> VrCommand {
    common::datapath::router_cmd(&common::router_config(), vrhost_host::Confine::default())
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("vrhost-test-{}-{name}", std::process::id()))
}

fn udp(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    UdpFrameSpec {
        dst_mac: MacAddr([2, 0, 0, 0, 0x10, 0]),
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        src_ip: src,
        dst_ip: dst,
        sport: 1000,
        dport: 2000,
        ttl,
        frame_bytes: len,
    }
    .write(&mut f)
    .unwrap();
    f
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut p = PcapTxPort::create(path).unwrap();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    assert_eq!(p.tx_burst(&refs), frames.len());
    p.flush().unwrap();
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let mut p = PcapRxPort::open(path, Some(1)).unwrap();
    let mut all = vec![];
    loop {
        let mut out: [&[u8]; 32] = [&[]; 32];
        let n = p.rx_burst(&mut out);
        if n == 0 {
            break;
        }
        all.extend(out[..n].iter().map(|f| f.to_vec()));
    }
    all
}

fn one_rule_to(vr: usize) -> Classifier {
    Classifier::new(&[Rule {
        m: Match {
            in_port: Some(0),
            ..Match::default()
        },
        vr,
        vnic: 0,
    }])
    .unwrap()
}

/// Frames through a router VR process: forwarded ones have TTL - 1, a valid
/// checksum and rewritten MACs; bad ones are counted drops by reason.
#[test]
fn router_vr_forwards_and_counts_bad_frames() {
    let good: Vec<Vec<u8>> = (0..200u8)
        .map(|i| {
            udp(
                Ipv4Addr::new(192, 168, 0, 1),
                Ipv4Addr::new(10, 0, 0, i),
                64,
                64 + usize::from(i),
            )
        })
        .collect();
    let mut bad = vec![];
    bad.push(good[0][..20].to_vec()); // truncated IPv4 header
    let mut f = good[1].clone();
    f[14] = 0x44; // IHL 4
    bad.push(f);
    let mut f = good[2].clone();
    f[24] ^= 0xff; // checksum
    bad.push(f);
    let mut f = good[3].clone();
    f[12] = 0x86;
    f[13] = 0xdd; // IPv6 EtherType, IPv4 inside: a bad IPv6 header
    bad.push(f);
    let mut f = good[4].clone();
    f[12] = 0x88;
    f[13] = 0xcc; // LLDP: an EtherType the router does not serve
    bad.push(f);
    bad.push(udp(
        Ipv4Addr::new(192, 168, 0, 1),
        Ipv4Addr::new(10, 0, 0, 9),
        1,
        64,
    )); // TTL 1
    bad.push(udp(
        Ipv4Addr::new(192, 168, 0, 1),
        Ipv4Addr::new(11, 0, 0, 9),
        64,
        64,
    )); // no route
    let input: Vec<Vec<u8>> = good.iter().chain(&bad).cloned().collect();
    let (inp, out) = (tmp("in.pcap"), tmp("out.pcap"));
    write_pcap(&inp, &input);

    let ports: Vec<Box<dyn Port>> = vec![
        Box::new(PcapRxPort::open(&inp, Some(1)).unwrap()),
        Box::new(PcapTxPort::create(&out).unwrap()),
    ];
    let mut worker = Worker::new(ports, one_rule_to(0), PollConfig::default()).unwrap();
    // Room for every frame at once: the pcap port reads as fast as it can,
    // and a full pool would (rightly) drop at ingress.
    let region = region("t1", 256);
    let (proc_, bell) = VrProcess::start("t1", 0, &region, worker.bell(), &router_cmd()).unwrap();
    worker.add_vr(VrPath::assemble(
        &spec("t1", 256),
        region.clone(),
        Backend::Process(vec![proc_]),
        vec![bell],
    ));
    let stats = worker.vrs()[0].stats().clone();
    run_until(&mut worker, Duration::from_secs(20), |_| {
        stats.tx_packets.get() + stats.vr_dropped.get() == input.len() as u64
    });
    worker.shutdown();
    drop(worker);

    assert_eq!(stats.tx_packets.get(), good.len() as u64);
    assert_eq!(stats.vr_dropped.get(), bad.len() as u64);
    assert_eq!(stats.violations_total(), 0);
    let vr = region.instance(0).unwrap();
    let c = |r: DropReason| vr.vr_counters[counter::DROP_BASE + r as usize].load(Ordering::Relaxed);
    assert_eq!(c(DropReason::BadHeader), 3);
    assert_eq!(c(DropReason::BadChecksum), 1);
    assert_eq!(c(DropReason::Unsupported), 1);
    assert_eq!(c(DropReason::TtlExpired), 1);
    assert_eq!(c(DropReason::NoRoute), 1);

    let sent = read_pcap(&out);
    assert_eq!(sent.len(), good.len());
    for (o, i) in sent.iter().zip(&good) {
        assert_eq!(o.len(), i.len());
        assert_eq!(&o[0..6], &[2, 0, 0, 0, 0, 2], "dst MAC = next hop");
        assert_eq!(&o[6..12], &[2, 0, 0, 0, 0x10, 1], "src MAC = out vNIC");
        let ip = Ipv4Packet::new_checked(&o[14..]).unwrap();
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
        assert_eq!(&o[34..], &i[34..], "payload untouched");
    }
    let _ = std::fs::remove_file(&inp);
    let _ = std::fs::remove_file(&out);
}

/// A VR killed with SIGKILL under load: the host notices, takes back every
/// slot, and the other VR keeps forwarding.
#[test]
fn killed_vr_is_reclaimed_and_others_keep_forwarding() {
    let mut worker = two_tenant_worker();
    for name in ["a", "b"] {
        let path = router_path(&worker, name, 256, &router_cmd());
        worker.add_vr(path);
    }
    let (sa, sb) = run_until_both_forward(&mut worker, 10_000);
    assert!(
        sa.tx_packets.get() > 10_000 && sb.tx_packets.get() > 10_000,
        "both forward"
    );

    worker.vrs_mut()[0].kill();
    run_until(&mut worker, Duration::from_secs(10), |w| {
        !w.vrs()[0].is_up()
    });
    assert!(!worker.vrs()[0].is_up(), "exit noticed");
    assert_eq!(sa.exits.get(), 1);
    worker.vrs()[0].check_slot_accounting().unwrap();
    assert_eq!(worker.vrs()[0].free_slots(), 256, "every slot reclaimed");

    let before = sb.tx_packets.get();
    run_until(&mut worker, Duration::from_secs(20), |_| {
        sb.tx_packets.get() > before + 10_000
    });
    assert!(
        sb.tx_packets.get() > before + 10_000,
        "the other VR keeps forwarding"
    );
    assert!(sa.ingress_drops[vrhost_host::IngressDrop::VrDown as usize].get() > 0);
    worker.shutdown();
}

/// A [`two_tenant_worker`] with the honest router VR (VR 0); the path of
/// the hostile VR beside it (VR 1, not added yet), which the test plays:
/// a thread that maps its region (the view returned) and scribbles on it.
fn honest_and_evil() -> (Worker, VrPath, Region) {
    let mut worker = two_tenant_worker();
    let honest = router_path(&worker, "honest", 128, &router_cmd());
    worker.add_vr(honest);
    let evil_spec = spec("evil", 128);
    let evil = evil_spec.create_region().unwrap();
    let view = Region::attach(evil.fd().try_clone_to_owned().unwrap()).unwrap();
    let path = VrPath::assemble(&evil_spec, evil, Backend::External, vec![]);
    (worker, path, view)
}

/// A hostile "VR" (a thread writing garbage into its region while the host
/// forwards): every violation is counted, nothing escapes the region, the
/// honest VR beside it forwards everything, and the slot accounting holds.
#[test]
fn hostile_vr_is_contained() {
    let (mut worker, evil, evil_view) = honest_and_evil();
    worker.add_vr(evil);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let scribbler = std::thread::spawn(move || {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let tx = evil_view.ring(0, RingId::Tx(1)).unwrap();
        let rx = evil_view.ring(0, RingId::Rx(0)).unwrap();
        // Where the host expects this VR's ring indexes to be; the other
        // cases scribble over them and the host must recover when they are
        // right again.
        let (mut rx_tail, mut tx_head) = (0u32, 0u32);
        let mut doubled = 0usize;
        let mut rounds = 0u64;
        while !st.load(Ordering::Relaxed) {
            let r = rnd();
            // First only the double return, with the rings intact, so it
            // surely reaches the host; then everything at random.
            let case = if doubled < 1000 { 0 } else { r % 6 };
            match case {
                // Take what the host gave, where the rings really are, and
                // return each slot twice (in one batch and across batches).
                0 => {
                    let mut c = rx.clone().consumer_at(rx_tail, rx.indexes().0);
                    let mut idx = [0u32; 32];
                    let n = c.pop(&mut idx).unwrap_or(0);
                    rx_tail = c.tail();
                    for &s in &idx[..n] {
                        if let Some(m) = evil_view.meta(s) {
                            m.set(SlotState::Processed);
                        }
                    }
                    let mut p = tx.clone().producer_at(tx_head, tx.indexes().1);
                    let _ = p.push(&idx[..n]);
                    let _ = p.push(&idx[..n]);
                    tx_head = p.head();
                    doubled += n;
                }
                // Out-of-range and unowned indexes.
                1 => {
                    let mut p = tx.clone().producer_at((r >> 8) as u32, (r >> 8) as u32);
                    let _ = p.push(&[u32::MAX, 128, (r >> 40) as u32 % 128]);
                }
                // Random slot states and extents (huge lengths, offsets).
                2 => {
                    for s in 0..128 {
                        if let Some(m) = evil_view.meta(s) {
                            m.set(
                                SlotState::from_raw((rnd() % 5) as u32)
                                    .unwrap_or(SlotState::Processed),
                            );
                            m.set_extent(rnd() as u16, rnd() as u16);
                        }
                    }
                }
                // Ring indexes moved backwards / beyond.
                3 => {
                    let mut p = tx.clone().producer_at(r as u32, 0);
                    let _ = p.push(&[1]);
                }
                4 => {
                    let mut c = rx.clone().consumer_at((r >> 3) as u32, 0);
                    let mut idx = [0u32; 4];
                    let _ = c.pop(&mut idx);
                }
                _ => rx.reset(),
            }
            rounds += 1;
        }
        rounds
    });
    let hs = worker.vrs()[0].stats().clone();
    let es = worker.vrs()[1].stats().clone();
    let not_owned = es.clone();
    run_until(&mut worker, Duration::from_secs(30), |_| {
        hs.tx_packets.get() > 50_000
            && es.violations_total() > 1000
            && not_owned.violations[Violation::SlotNotOwned as usize].get() > 0
    });
    stop.store(true, Ordering::Relaxed);
    let rounds = scribbler.join().unwrap();
    assert!(rounds > 0);
    assert!(hs.tx_packets.get() > 50_000, "honest VR forwards");
    assert_eq!(hs.violations_total(), 0, "honest VR has no violations");
    let v = |k: Violation| es.violations[k as usize].get();
    assert!(es.violations_total() > 1000, "violations counted");
    assert!(v(Violation::SlotIndex) > 0 || v(Violation::TxRingIndex) > 0);
    assert!(v(Violation::SlotNotOwned) > 0);
    for vr in worker.vrs() {
        vr.check_slot_accounting().unwrap();
    }
    worker.shutdown();
    for vr in worker.vrs() {
        vr.check_slot_accounting().unwrap();
    }
}

/// A VR past its violation budget is quarantined: no longer fed nor read,
/// its slots taken back, counted; the honest VR beside it keeps forwarding.
#[test]
fn hostile_vr_is_quarantined() {
    let (mut worker, mut path, evil_view) = honest_and_evil();
    path.set_guard(vrhost_host::Guard {
        quarantine_after: Some(500),
        watchdog: None,
    });
    worker.add_vr(path);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    // Out-of-range slot indexes on its tx ring, over and over.
    let scribbler = std::thread::spawn(move || {
        let tx = evil_view.ring(0, RingId::Tx(1)).unwrap();
        let mut head = 0u32;
        while !st.load(Ordering::Relaxed) {
            let mut p = tx.clone().producer_at(head, tx.indexes().1);
            if p.push(&[u32::MAX, 1000, 129]).unwrap_or(0) == 0 {
                std::thread::yield_now();
            }
            head = p.head();
        }
    });
    let hs = worker.vrs()[0].stats().clone();
    let es = worker.vrs()[1].stats().clone();
    run_until(&mut worker, Duration::from_secs(30), |w| {
        w.vrs()[1].is_quarantined()
    });
    assert!(worker.vrs()[1].is_quarantined(), "quarantined");
    let (honest_then, violations_then) = (hs.tx_packets.get(), es.violations_total());
    let down_then = es.ingress_drops[vrhost_host::IngressDrop::VrDown as usize].get();
    run_until(&mut worker, Duration::from_secs(30), |_| {
        hs.tx_packets.get() > honest_then + 20_000
    });
    stop.store(true, Ordering::Relaxed);
    scribbler.join().unwrap();
    assert_eq!(es.quarantines.get(), 1);
    assert!(violations_then >= 500, "{violations_then}");
    // Its rings are no longer read: what it writes now is not even seen.
    assert_eq!(es.violations_total(), violations_then);
    // Its frames are refused at the door, counted.
    assert!(es.ingress_drops[vrhost_host::IngressDrop::VrDown as usize].get() > down_then);
    assert!(!worker.vrs()[1].is_up());
    assert_eq!(worker.vrs()[1].free_slots(), worker.vrs()[1].pool_slots());
    assert!(
        hs.tx_packets.get() > honest_then + 20_000,
        "honest VR forwards"
    );
    assert_eq!(hs.violations_total(), 0);
    for vr in worker.vrs() {
        vr.check_slot_accounting().unwrap();
    }
    worker.shutdown();
}

/// A rate-limited VR admits no more than its token bucket allows (rate x
/// time + depth), drops the excess at ingress, counted, and the VR beside
/// it is not limited; the worker accounts its time per VR.
#[test]
fn rate_limit_admits_at_most_the_bucket() {
    let mut worker = two_tenant_worker();
    let mut stats = Vec::new();
    for (name, rate) in [("limited", Some(2000u64)), ("free", None)] {
        let mut path = router_path(&worker, name, 256, &router_cmd());
        path.set_sched(vrhost_host::Sched {
            rate_pps: rate,
            rate_burst: 100,
            ..Default::default()
        });
        stats.push(path.stats().clone());
        worker.add_vr(path);
    }
    let t = Instant::now();
    run_until(&mut worker, Duration::from_secs(30), |_| {
        stats[1].tx_packets.get() > 50_000 && t.elapsed() > Duration::from_millis(300)
    });
    let elapsed = t.elapsed().as_secs_f64();
    let (lim, free) = (&stats[0], &stats[1]);
    let limited = lim.ingress_drops[vrhost_host::IngressDrop::RateLimited as usize].get();
    // Admitted = put into its ring, or refused after the bucket (ring full).
    let admitted = lim.rx_packets.get() + lim.ingress_drops_total() - limited;
    assert!(
        admitted as f64 <= 2000.0 * elapsed + 100.0 + 1.0,
        "admitted {admitted} in {elapsed:.3} s"
    );
    assert!(limited > 0, "the generator offers far more than 2000/s");
    assert_eq!(
        free.ingress_drops[vrhost_host::IngressDrop::RateLimited as usize].get(),
        0
    );
    assert!(free.tx_packets.get() > 50_000);
    assert!(lim.host_ns.get() > 0 && free.host_ns.get() > 0);
    for vr in worker.vrs() {
        vr.check_slot_accounting().unwrap();
    }
    worker.shutdown();
}
