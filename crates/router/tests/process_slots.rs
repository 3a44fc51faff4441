//! The SDK's per-batch work ([`process_slots`]) driving the built-in router:
//! verdicts staged for the tx rings and counted, bursts, the router's own
//! counters published. (In this crate because the SDK cannot link the
//! router it serves.)

use std::net::Ipv4Addr;

use vrhost_proto::counter;
use vrhost_router::{Router, RouterConfig, counters as rc};
use vrhost_sdk::runtime::{BATCH, TxStage, VrCounters, process_slots};
use vrhost_sdk::{DropReason, Vr};
use vrhost_shm::{Region, RegionConfig, SlotState};

mod common;
use common::fill;

/// A frame from a host on vNIC 0.
fn udp(dst: Ipv4Addr, ttl: u8) -> Vec<u8> {
    common::udp64([2, 0, 0, 0, 0, 1], dst, ttl)
}

fn router(burst: bool) -> Router {
    let cfg: RouterConfig = serde_json::from_value(serde_json::json!({
        "vnics": [{"mac": "02:00:00:00:10:00"}, {"mac": "02:00:00:00:10:01"}],
        "nexthops": [{"vnic": 1, "mac": "02:00:00:00:00:02"}],
        "routes": [{"prefix": "10.2.0.0/16", "nexthop": 0}],
        "burst_lookup": burst,
    }))
    .unwrap();
    let r = Router::new(&cfg).unwrap();
    assert_eq!(r.prefers_burst(), burst);
    r
}

fn state(region: &Region, slot: u32) -> u32 {
    region.meta(slot).unwrap().state_raw()
}

#[test]
fn verdicts_stage_and_count() {
    for burst in [false, true] {
        let region = Region::create("rt", RegionConfig::default()).unwrap();
        fill(&region, 0, &udp(Ipv4Addr::new(10, 2, 0, 1), 64));
        fill(&region, 1, &udp(Ipv4Addr::new(10, 2, 0, 1), 1));
        fill(&region, 2, &[0x55; 20]);
        let mut r = router(burst);
        let mut stage = TxStage::new(2);
        let mut c = VrCounters::default();
        // Slot 1 twice and one slot out of range. In bursts the second
        // 1 is refused (two packets in one slot would alias); one by
        // one it is processed again and the host refuses its second
        // return (slot_not_owned), as it always did.
        process_slots(
            &mut r,
            &region,
            0,
            &[0, 1, 2, 1, 99_999],
            &mut stage,
            &mut c,
        );
        assert_eq!(stage.vnic(1), &[0]);
        let (dropped, bad, rx): (&[u32], _, _) = if burst {
            (&[1, 2], 2, 3)
        } else {
            (&[1, 2, 1], 1, 4)
        };
        assert_eq!(stage.vnic(0), dropped);
        assert_eq!(state(&region, 0), SlotState::Processed as u32);
        assert_eq!(state(&region, 1), SlotState::Dropped as u32);
        let drop = |r: DropReason| c.v[counter::DROP_BASE + r as usize];
        assert_eq!((c.v[counter::RX], c.v[counter::TX]), (rx, 1));
        assert_eq!(drop(DropReason::TtlExpired), rx - 2);
        assert_eq!(drop(DropReason::Unsupported), 1, "EtherType 0x5555");
        assert_eq!(c.v[counter::BAD_SLOT], bad);
        // The forwarded packet's bytes, in place.
        let h = region.layout().cfg.headroom;
        // SAFETY: the test owns the region; nothing else touches slot 0.
        let out = unsafe { region.slot_bytes_at(0, h, 64) }.unwrap();
        assert_eq!(&out[0..6], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(out[22], 63);
        // The bitmap is clear again: the same slots are taken next time.
        stage.vnic(0).clear();
        stage.vnic(1).clear();
        process_slots(&mut r, &region, 0, &[1, 2], &mut stage, &mut c);
        assert_eq!(c.v[counter::BAD_SLOT], bad);
        assert_eq!(stage.vnic(0), &[1, 2]);
    }
}

#[test]
fn long_runs_go_in_bursts_and_vr_counters_are_published() {
    let cfg = RegionConfig {
        slot_count: 512,
        ring_entries: 512,
        ..RegionConfig::default()
    };
    let region = Region::create("rt2", cfg).unwrap();
    let n = 3 * BATCH as u32 + 7;
    for s in 0..n {
        fill(&region, s, &udp(Ipv4Addr::new(10, 2, 0, s as u8), 64));
    }
    let mut r: Router = serde_json::from_value::<RouterConfig>(serde_json::json!({
        "vnics": [{"mac": "02:00:00:00:10:00", "addrs": ["10.1.0.1/24"]},
                  {"mac": "02:00:00:00:10:01"}],
        "nexthops": [{"vnic": 1, "mac": "02:00:00:00:00:02"}],
        "routes": [{"prefix": "10.2.0.0/16", "nexthop": 0}],
        "burst_lookup": true,
    }))
    .map(|c| Router::new(&c).unwrap())
    .unwrap();
    // The last one pings the router.
    let mut ping = udp(Ipv4Addr::new(10, 1, 0, 1), 64);
    ping[23] = 1; // ICMP
    ping[34..38].copy_from_slice(&[8, 0, 0, 0]);
    let icmp_len = 64 - 34;
    vrhost_packet::icmp::Icmpv4Packet::new_unchecked(&mut ping[34..34 + icmp_len]).fill_checksum();
    vrhost_packet::ipv4::Ipv4Packet::new_unchecked(&mut ping[14..]).fill_checksum();
    fill(&region, n, &ping);
    let idxs: Vec<u32> = (0..=n).collect();
    let mut stage = TxStage::new(2);
    let mut c = VrCounters::default();
    process_slots(&mut r, &region, 0, &idxs, &mut stage, &mut c);
    assert_eq!(c.v[counter::TX], u64::from(n) + 1);
    assert_eq!(stage.vnic(1).len(), n as usize);
    assert_eq!(stage.vnic(0), &[n], "the echo reply");
    assert_eq!(c.v[counter::VR_BASE + rc::ICMP_ECHO_REPLIES], 1);
}
