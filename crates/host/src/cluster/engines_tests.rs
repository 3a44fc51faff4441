use super::*;

fn hashes(n: u32) -> impl Iterator<Item = u32> {
    (0..n).map(|i| i.wrapping_mul(0x9e37_79b1) ^ (i >> 3))
}

#[test]
fn flow_keeps_each_flow_on_one_engine_and_spreads_them() {
    let mut s = EngineSet::new(ClusterPolicy::Flow, &["e1", "e2", "e3"], &[]);
    let mut per = [0usize; 3];
    for h in hashes(30_000) {
        let e = s.pick(h).unwrap();
        assert_eq!(s.pick(h), Some(e), "flow {h} moved");
        per[e] += 1;
    }
    for (e, n) in per.iter().enumerate() {
        assert!((9_000..11_000).contains(n), "engine {e}: {n} of 30000");
    }
}

#[test]
fn when_an_engine_leaves_only_its_flows_move_and_they_come_back() {
    let mut s = EngineSet::new(ClusterPolicy::Flow, &["e1", "e2", "e3"], &[]);
    let before: Vec<usize> = hashes(10_000).map(|h| s.pick(h).unwrap()).collect();
    s.set_live(0b101);
    let mut moved_to = [0usize; 3];
    for (h, &b) in hashes(10_000).zip(&before) {
        let a = s.pick(h).unwrap();
        assert_ne!(a, 1, "no frame to the dead engine");
        if b != 1 {
            assert_eq!(a, b, "flow {h} of a live engine moved");
        } else {
            moved_to[a] += 1;
        }
    }
    // The dead engine's flows are shared by both others.
    assert!(moved_to[0] > 1_000 && moved_to[2] > 1_000, "{moved_to:?}");
    s.set_live(0b111);
    let after: Vec<usize> = hashes(10_000).map(|h| s.pick(h).unwrap()).collect();
    assert_eq!(before, after);
}

#[test]
fn the_same_names_give_the_same_choice_on_any_dispatcher_in_any_order() {
    let mut a = EngineSet::new(ClusterPolicy::Flow, &["x", "y", "z"], &[]);
    let mut b = EngineSet::new(ClusterPolicy::Flow, &["z", "x", "y"], &[]);
    let name_a = ["x", "y", "z"];
    let name_b = ["z", "x", "y"];
    for h in hashes(2_000) {
        assert_eq!(name_a[a.pick(h).unwrap()], name_b[b.pick(h).unwrap()]);
    }
}

#[test]
fn round_robin_takes_the_live_engines_in_turn() {
    let mut s = EngineSet::new(ClusterPolicy::Rr, &["a", "b", "c"], &[]);
    let got: Vec<usize> = (0..6).map(|_| s.pick(0).unwrap()).collect();
    assert_eq!(got, [0, 1, 2, 0, 1, 2]);
    s.set_live(0b110);
    let got: Vec<usize> = (0..4).map(|_| s.pick(0).unwrap()).collect();
    assert_eq!(got, [1, 2, 1, 2]);
    s.set_live(0);
    assert_eq!(s.pick(0), None);
}

#[test]
fn proportional_gives_each_engine_its_capacity_s_share() {
    let mut s = EngineSet::new(ClusterPolicy::Proportional, &["a", "b", "c"], &[1, 2, 5]);
    let mut per = [0usize; 3];
    for _ in 0..800 {
        per[s.pick(0).unwrap()] += 1;
    }
    assert_eq!(per, [100, 200, 500]);
    // Smooth: within any 8 frames, every engine with a share is seen.
    let w: Vec<usize> = (0..8).map(|_| s.pick(0).unwrap()).collect();
    assert!(w.contains(&0) && w.contains(&1), "{w:?}");
    s.set_live(0b011);
    let mut per = [0usize; 3];
    for _ in 0..300 {
        per[s.pick(0).unwrap()] += 1;
    }
    assert_eq!(per, [100, 200, 0]);
}

#[test]
fn policies_parse_from_their_names_and_refuse_others() {
    for p in [
        ClusterPolicy::Flow,
        ClusterPolicy::Rr,
        ClusterPolicy::Proportional,
    ] {
        assert_eq!(p.name().parse::<ClusterPolicy>(), Ok(p));
    }
    assert!("hash".parse::<ClusterPolicy>().is_err());
}
