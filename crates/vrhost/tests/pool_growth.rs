//! A VR with a memory limit: its packet pool grows with its load, each
//! step populated in the VR's own memory cgroup (so the pool counts
//! against the VR's limit, not the daemon's), and a step the limit has no
//! room for is refused and counted; the VR and the host go on, and the
//! frames beyond the pool are counted drops.

mod common;

use std::time::Duration;

use common::{Daemon, Lab, memory_cgroup, vr, vr_stats};
use serde_json::json;

/// Bytes charged to cgroup `dir`.
fn charged(dir: &std::path::Path) -> u64 {
    let f = ["memory.current", "memory.usage_in_bytes"]
        .into_iter()
        .map(|f| dir.join(f))
        .find(|p| p.exists())
        .expect("a memory usage file");
    std::fs::read_to_string(&f).unwrap().trim().parse().unwrap()
}

#[test]
fn a_pool_grows_in_the_vr_s_cgroup_until_its_memory_limit_refuses_a_step() {
    // A VR slower than its traffic (50 us a frame against 100,000 frames/s):
    // frames wait in its rings, its pool fills and asks to grow. 16,384
    // slots of 2 KiB (32 MiB) do not fit its 24 MiB.
    let mut slow = Lab::program("slow", "vr-spin", 16384, json!({ "cost_ns": 50_000 }));
    slow.memory = Some(json!("24M"));
    let config = Lab::ports().paced(100_000).with_vr(slow, 1).to_toml();
    let d = Daemon::start("pool-growth", &config);
    let s = d.wait_for("a refused step", Duration::from_secs(60), |s| {
        let st = vr_stats(s, "slow");
        st["pool_grow_refused"].as_u64() > Some(0) && st["pool_grows"].as_u64() > Some(1)
    });
    let st = vr_stats(&s, "slow");
    let usable = st["pool_usable"].as_u64().unwrap();
    assert!((2048..16384).contains(&usable), "{st:#}");
    assert!(
        st["ingress_drops"]["pool_empty"].as_u64() > Some(0),
        "frames beyond the pool are counted: {st:#}"
    );
    // The pool's pages are the VR's: its cgroup holds at least them.
    let pid = vr(&s, "slow")["instances"][0]["pid"]
        .as_u64()
        .expect("a pid") as u32;
    let dir = memory_cgroup(pid);
    let pool_bytes = usable * 2048;
    assert!(
        charged(&dir) >= pool_bytes,
        "{} charged to {}, pool {pool_bytes}",
        charged(&dir),
        dir.display()
    );
    // The VR and the host go on: nothing restarted, frames still flow.
    let tx = st["tx_packets"].as_u64().unwrap();
    let s = d.wait_for("more frames out", Duration::from_secs(30), |s| {
        vr_stats(s, "slow")["tx_packets"].as_u64() > Some(tx)
    });
    let st = vr_stats(&s, "slow");
    assert_eq!(
        (st["exits"].as_u64(), st["restarts"].as_u64()),
        (Some(0), Some(0)),
        "{st:#}"
    );
    assert_eq!(vr(&s, "slow")["state"], "running");
    let (ok, out, err) = common::daemon::run(&d.sock, &["vr", "show", "slow"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("grown to") && out.contains("refused (memory limit)"),
        "{out}"
    );
}
