//! A hostile VR process (`vrhost-testvr vr-hostile`) beside an honest router VR in
//! a real daemon, with quarantine off: the hostile VR scribbles on its
//! region at full rate (out-of-range and unowned indexes, double returns,
//! bad states and extents, ring indexes moved backwards and beyond, ring
//! resets, states flipped under the host) while a paced generator sends
//! frames to both. The daemon stays up and counts the violations by kind;
//! every frame classified to the honest VR comes out (or was dropped at
//! ingress for want of room, which depends on scheduling); the host's
//! counters of the hostile VR add up; and the daemon's shutdown, which
//! checks every VR's slot accounting, succeeds.
//!
//! No speed is asserted: the waits are bounds against a hung test.

mod common;

use std::time::Duration;

use common::{Daemon, Lab, TempDir, count, vr};
use serde_json::{Value, json};
use vrhost_api::VrSpec;

/// Frames the generator sends in all, at `PPS` (half to each VR).
const FRAMES: u64 = 20_000;
const PPS: u64 = 5_000;

/// VR a on network 1 and the hostile VR `evil` on network 4 (quarantine
/// off), which writes its report to `report`; paced.
fn config(report: &std::path::Path) -> String {
    let evil = VrSpec {
        quarantine_after: Some(0),
        ..Lab::program(
            "evil",
            "vr-hostile",
            128,
            json!({ "seed": 7, "report_file": report.display().to_string() }),
        )
    };
    Lab::one_vr()
        .with_vr(evil, 4)
        .paced(PPS)
        .limit(FRAMES)
        .to_toml()
}

fn map(stats: &Value, name: &str, field: &str) -> serde_json::Map<String, Value> {
    vr(stats, name)["stats"][field]
        .as_object()
        .cloned()
        .unwrap_or_else(|| panic!("{name}: no {field}"))
}

fn at(m: &serde_json::Map<String, Value>, k: &str) -> u64 {
    m.get(k).and_then(Value::as_u64).unwrap_or(0)
}

#[test]
fn hostile_vr_process_is_contained() {
    let reports = TempDir::new("hostile-report");
    let report = reports.path().join("hostile.json");
    // The confined VR runs as another user: a file it may write.
    std::fs::write(&report, b"").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&report, std::fs::Permissions::from_mode(0o666)).unwrap();
    }
    let mut d = Daemon::start("hostile", &config(&report));

    let drained = |s: &Value| {
        let port = s["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "gen")
            .unwrap();
        // The slot counts are read between two rounds of the worker, the
        // counters a moment later: a frame in flight at the first reading
        // can be counted out by the second. Drained: both agree.
        port["rx_packets"].as_u64().unwrap() >= FRAMES
            && count(s, "a", "rx_packets")
                == count(s, "a", "tx_packets")
                    + count(s, "a", "vr_dropped")
                    + count(s, "a", "port_dropped")
            && count(s, "a", "free_slots") == count(s, "a", "pool_slots")
    };
    let s = d.wait_for(
        "the generator's frames through the honest VR",
        Duration::from_secs(300),
        drained,
    );

    // The daemon still answers.
    let health = d.json(&["health"]);
    assert_eq!(health["vrs"], 2, "{health:#}");

    // The hostile VR's violations, by kind.
    let v = map(&s, "evil", "violations");
    for kind in [
        "slot_index",
        "slot_not_owned",
        "slot_state",
        "extent",
        "tx_ring_index",
        "rx_ring_index",
    ] {
        assert!(at(&v, kind) > 0, "no {kind} violation counted: {v:?}");
    }
    assert_eq!(vr(&s, "evil")["state"], "running", "not quarantined");
    assert_eq!(count(&s, "evil", "exits"), 0, "the hostile VR did not die");
    assert!(
        count(&s, "evil", "tx_packets") > 0,
        "its honest share is forwarded"
    );

    // The honest VR: no violation, and every frame classified to it came
    // out, or was dropped at ingress for want of room.
    assert!(map(&s, "a", "violations").values().all(|x| x == 0));
    let ing = map(&s, "a", "ingress_drops");
    for (k, x) in &ing {
        if k != "ring_full" && k != "pool_empty" {
            assert_eq!(x, 0, "honest VR ingress drop {k}");
        }
    }
    let a_in = count(&s, "a", "rx_packets");
    let a_classified = a_in + ing.values().filter_map(Value::as_u64).sum::<u64>();
    assert!(a_in > 0);
    assert_eq!(
        count(&s, "a", "tx_packets"),
        a_in,
        "every frame in came out"
    );
    assert_eq!(count(&s, "a", "vr_dropped"), 0);
    assert_eq!(count(&s, "a", "port_dropped"), 0);
    assert_eq!(
        count(&s, "a", "tx_packets") + at(&ing, "ring_full") + at(&ing, "pool_empty"),
        a_classified
    );
    assert_eq!(
        count(&s, "a", "free_slots"),
        count(&s, "a", "pool_slots"),
        "the honest VR holds no slot"
    );

    // The hostile VR's counters add up: every slot given to it is back
    // (forwarded, dropped, refused for its state or extent) or still held
    // by it; a slot given and refused by its scribbled rx ring is counted
    // both in rx_packets and ring_full.
    let e_ing = map(&s, "evil", "ingress_drops");
    let e_in = count(&s, "evil", "rx_packets");
    let held = count(&s, "evil", "pool_slots") - count(&s, "evil", "free_slots");
    let back = count(&s, "evil", "tx_packets")
        + count(&s, "evil", "port_dropped")
        + count(&s, "evil", "vr_dropped")
        + at(&v, "slot_state")
        + at(&v, "extent");
    assert!(back + held <= e_in, "{back} + {held} > {e_in}");
    assert!(
        back + held + at(&e_ing, "ring_full") >= e_in,
        "{back} + {held} + {} < {e_in}",
        at(&e_ing, "ring_full")
    );

    // Shutdown checks every VR's slot accounting (a slot free twice, or
    // neither free nor held, fails the daemon) and stops the hostile VR,
    // which writes its report.
    let pid = rustix::process::Pid::from_child(&d.child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = d.child.wait().unwrap();
    assert!(status.success(), "daemon shutdown: {status}");
    let rep: Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).expect("the hostile VR's report");
    assert!(rep["rounds"].as_u64().unwrap() > 0, "{rep:#}");
    assert!(rep["bad_writes"].as_u64().unwrap() > 0, "{rep:#}");
    assert_eq!(rep["regions_mapped"], 1, "it sees its own region only");
    assert_eq!(rep["region_fds"], 1, "{rep:#}");
}
