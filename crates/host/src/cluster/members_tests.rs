use super::*;
use crate::cluster::desired::tests::{ad, spec};

fn members() -> Members {
    let s = spec(Some(150_000.0));
    let beats = (s.engines.iter())
        .map(|e| (e.name.clone(), SocketAddr::new(e.remote.into(), 4790)))
        .collect();
    Members {
        base: s,
        beats,
        via: None,
    }
}

#[test]
fn registered_engines_join_after_the_configured_ones_by_name_with_their_registration() {
    let m = members();
    let mut e9 = ad("e9", 19);
    e9.local_mac = Some("02:00:00:00:09:19".into());
    e9.heartbeat_port = Some(5000);
    // e1 is configured: its registration does not change its link.
    let j = m.join(&[e9.clone(), ad("e1", 99), ad("e5", 15)], &BTreeMap::new());
    let names: Vec<&str> = j.spec.engines.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["e1", "e2", "e5", "e9"]);
    assert_eq!(j.spec.engines[0], m.base.engines[0]);
    let e = &j.spec.engines[3];
    assert_eq!(e.remote.to_string(), "10.9.0.19");
    assert_eq!(e.remote_mac, Some([2, 0, 0, 0, 9, 0x19]));
    assert_eq!(e.capacity, 100_000);
    assert_eq!(j.beats[3].1.to_string(), "10.9.0.19:5000");
    assert_eq!(j.beats[2].1.to_string(), "10.9.0.15:4790");
    assert_eq!(j.spec.vrs[0].engines, [0, 1, 2, 3], "placed over all");
    assert_eq!(
        carried_from(
            &j.spec.engines,
            &m.join(&[e9], &BTreeMap::new()).spec.engines
        ),
        [Some(0), Some(1), Some(3)]
    );
    // A next hop for registered engines replaces their own MAC.
    let via = Members {
        via: Some([2, 0, 0, 0, 0, 0xfe]),
        ..m.clone()
    };
    assert_eq!(
        via.join(&[ad("e5", 15)], &BTreeMap::new()).spec.engines[2].remote_mac,
        Some([2, 0, 0, 0, 0, 0xfe])
    );
    // No registration: the configured engines alone.
    assert_eq!(m.join(&[], &BTreeMap::new()).spec, m.base);
}

#[test]
fn no_more_than_64_engines_and_no_engine_without_capacity() {
    let m = members();
    let mut ads: Vec<EngineAd> = (0..70).map(|i| ad(&format!("x{i:02}"), 1)).collect();
    ads[0].cores = 0;
    let j = m.join(&ads, &BTreeMap::new());
    assert_eq!(j.spec.engines.len(), MAX_ENGINES);
    assert!(!j.spec.engines.iter().any(|e| e.name == "x00"));
    assert_eq!(j.left_out.len(), 69 - 62);
}

#[test]
fn a_rate_is_taken_from_the_desired_state_and_one_that_does_not_fit_says_what_is_free() {
    let m = members();
    let rates = BTreeMap::from([("r".to_string(), 120_000.0)]);
    assert_eq!(m.join(&[], &rates).spec.vrs[0].rate, Some(120_000.0));
    // Two engines of 100 kpps, both leased.
    let s = &m.base;
    assert_eq!(check_rate(s, &[100_000; 2], 0b11, "r", 200_000.0), Ok(()));
    match check_rate(s, &[100_000; 2], 0b11, "r", 250_000.0) {
        Err(RateRefused::NoFit { vr, free, .. }) => {
            assert_eq!((vr.as_str(), free), ("r", 200_000.0));
        }
        o => panic!("{o:?}"),
    }
    // One engine leased: 100 kpps free.
    let e = check_rate(s, &[100_000; 2], 0b01, "r", 150_000.0).unwrap_err();
    assert!(e.to_string().contains("100000 pps free"), "{e}");
    assert_eq!(
        check_rate(s, &[100_000; 2], 0b11, "x", 1.0),
        Err(RateRefused::NoVr("x".into()))
    );
    assert!(matches!(
        check_rate(s, &[100_000; 2], 0b11, "r", f64::NAN),
        Err(RateRefused::Bad(_))
    ));
    let mut named = s.clone();
    named.vrs[0].rate = None;
    assert!(matches!(
        check_rate(&named, &[100_000; 2], 0b11, "r", 1.0),
        Err(RateRefused::NotByRate(_))
    ));
}
