//! Tests of the hostile VR's behaviours against a real region.

use super::*;

#[test]
fn weights_default_named_and_refused() {
    let c = HostileConfig::default();
    let w = c.weights().unwrap();
    assert_eq!(w.len(), Case::ALL.len());
    assert!(w.iter().all(|&x| x > 0));
    let c: HostileConfig =
        serde_json::from_value(serde_json::json!({"weights": {"honest": 0, "flood": 9}})).unwrap();
    let w = c.weights().unwrap();
    assert_eq!(w[Case::Honest as usize], 0);
    assert_eq!(w[Case::Flood as usize], 9);
    let c: HostileConfig =
        serde_json::from_value(serde_json::json!({"weights": {"nope": 1}})).unwrap();
    assert!(c.weights().unwrap_err().contains("no case \"nope\""));
    let all_off: BTreeMap<String, u32> = Case::ALL
        .iter()
        .map(|c| (c.name().to_string(), 0))
        .collect();
    let c = HostileConfig {
        weights: all_off,
        ..HostileConfig::default()
    };
    assert!(c.weights().is_err());
    assert!(serde_json::from_value::<HostileConfig>(serde_json::json!({"bogus": 1})).is_err());
}

#[test]
fn pick_follows_weights() {
    let mut w = vec![0u32; Case::ALL.len()];
    w[Case::OutOfRange as usize] = 1;
    w[Case::Flood as usize] = 3;
    let cum: Vec<u64> = w
        .iter()
        .scan(0u64, |a, &x| {
            *a += u64::from(x);
            Some(*a)
        })
        .collect();
    let mut rng = Rng::new(7);
    let mut n = [0u32; 2];
    for _ in 0..4000 {
        match pick(&mut rng, &cum) {
            Case::OutOfRange => n[0] += 1,
            Case::Flood => n[1] += 1,
            c => panic!("case {c:?} has weight 0"),
        }
    }
    assert!(n[1] > 2 * n[0], "{n:?}");
}

/// A hostile instance against a region with no host: every case runs
/// on a region whose rings hold slots, nothing panics, and the ring
/// indexes are where they should be after an honest round.
#[test]
fn every_case_runs_and_honest_rounds_repair_the_rings() {
    use vrhost_shm::RegionConfig;
    let region = Region::create(
        "hostile-unit",
        RegionConfig {
            slot_count: 64,
            ring_entries: 64,
            ..RegionConfig::default()
        },
    )
    .unwrap();
    let host_bell = Doorbell::new().unwrap();
    let ring = |v| region.ring(0, RingId::Rx(v)).unwrap();
    let vnics = region.layout().cfg.vnic_count;
    let tx = |v| region.ring(0, RingId::Tx(v)).unwrap();
    let mut h = Hostile {
        region: region.clone(),
        instance: 0,
        vnics,
        slot_count: 64,
        slot_bytes: region.slot_bytes(),
        ring_size: ring(0).size(),
        rx: (0..vnics).map(ring).collect(),
        tx: (0..vnics).map(tx).collect(),
        rx_tail: vec![0; usize::from(vnics)],
        tx_head: vec![0; usize::from(vnics)],
        tx_shadow: vec![vec![0; 64]; usize::from(vnics)],
        rx_prod_seen: vec![0; usize::from(vnics)],
        tx_cons_seen: vec![0; usize::from(vnics)],
        pending: Vec::new(),
        host_bell: Doorbell::from_fd(host_bell.fd().try_clone_to_owned().unwrap()),
        rng: Rng::new(1),
        report: HostileReport::default(),
    };
    // The "host": slots 0..8 into rx ring 0.
    let mut hp = ring(0).producer();
    assert_eq!(hp.push(&[0, 1, 2, 3, 4, 5, 6, 7]).unwrap(), 8);
    for &c in Case::ALL {
        for _ in 0..20 {
            h.round(c);
        }
    }
    h.round(Case::Honest);
    for v in 0..usize::from(vnics) {
        assert_eq!(h.rx[v].indexes().1, h.rx_tail[v], "rx {v} cons put back");
        assert_eq!(h.tx[v].indexes().0, h.tx_head[v], "tx {v} prod put back");
    }
    assert!(h.report.taken >= 8);
    assert!(h.report.bad_writes > 0);
}
