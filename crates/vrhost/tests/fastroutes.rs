//! A VR with a route file in the fast path (root only; needs `ip` and
//! `ethtool`): started slow, moved to fast, and forwarding there by a
//! route only its route file has, first a small file the test writes,
//! then the real table of `../shared/data/fib` (half a million routes;
//! that part is skipped, with a message, where the data is not found);
//! and a VR in routing mode src-dst whose route added through the API
//! forwards on both paths.
//!
//! ```text
//!  ns-a            ns-r: vrhost daemon, fast_path = true          ns-b
//!  a0 10.0.1.2 --- r0 [p0 af_xdp]  VR "r"  [p1 af_xdp] r1 --- b0 10.0.2.2
//! ```
//!
//! Every route of the file goes to next hop 0, 10.0.2.2 (b0, a static
//! neighbour); b0 owns one address under a route of the file, which the
//! config and the API do not name. Datagrams from ns-a to it arrive, and
//! the fast path counts them forwarded: the route is in its trie. The
//! namespaces (named with the process id) are deleted by their guards,
//! the daemon killed by its own, the file's directory removed by its.

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::line::{LineMacs, line};
use serde_json::Value;
use vrhost_lab::Netns;

const R0_MAC: &str = "02:fc:00:00:00:10";
const R1_MAC: &str = "02:fc:00:00:00:11";
const PORT: u16 = 5557;
/// A bound against a hung test, not a speed limit (a debug build reads
/// and writes a full table in both the router and the daemon).
const PATIENCE: Duration = Duration::from_secs(300);
/// Datagrams sent to the route file's destination.
const N: u64 = 200;

const MACS: LineMacs = LineMacs {
    a0: "02:fc:00:00:00:0a",
    r0: R0_MAC,
    r1: R1_MAC,
    b0: "02:fc:00:00:00:0b",
};

fn config(path: &str, route_file: &Path) -> String {
    let router = format!(
        "route_file = {:?}\n\
         nexthops = [{{ vnic = 1, via = \"10.0.2.2\" }}]\n\
         neighbours = [{{ ip = \"10.0.2.2\", mac = \"{}\" }}]",
        route_file.display().to_string(),
        MACS.b0
    );
    common::line::line_config(&MACS, path, &router)
}

fn fwd(stats: &Value) -> u64 {
    common::vr_stats(stats, "r")["fast"]["forwarded"]
        .as_u64()
        .expect("fast.forwarded")
}

/// Send [`N`] datagrams from ns-a to `dst` (an address of b0's) and
/// receive them all in ns-b; returns the fast path's forwarded count
/// before and after (once it counts them all).
fn through(d: &common::Daemon, na: &Netns, nb: &Netns, dst: Ipv4Addr) -> (u64, u64) {
    let before = fwd(&d.stats());
    receive_all(d, na, nb, dst);
    let end = d.wait_for("the fast path's count", PATIENCE, |s| fwd(s) >= before + N);
    (before, fwd(&end))
}

/// Send [`N`] datagrams from ns-a to `dst`, made an address of b0's, and
/// wait until ns-b has received them all.
fn receive_all(d: &common::Daemon, na: &Netns, nb: &Netns, dst: Ipv4Addr) {
    let _ = nb.ip(&["addr", "add", &format!("{dst}/32"), "dev", "b0"]);
    let rx = nb
        .run(|| {
            let s = UdpSocket::bind((dst, PORT)).expect("bind in ns-b");
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            s
        })
        .unwrap();
    let tx = na
        .run(|| UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("bind in ns-a"))
        .unwrap();
    let (t0, mut got, mut buf) = (Instant::now(), 0u64, [0u8; 64]);
    for k in 0..N {
        tx.send_to(&k.to_be_bytes(), (dst, PORT)).expect("send");
        std::thread::sleep(Duration::from_micros(500));
    }
    while got < N {
        if rx.recv(&mut buf).is_ok() {
            got += 1;
        }
        assert!(
            t0.elapsed() < PATIENCE,
            "to {dst}: {got} of {N} arrived: {:#}",
            d.stats()
        );
    }
}

/// A destination under a route of `file` (its first route of length 8 to
/// 24 outside the private, loopback and multicast ranges, host 1).
fn destination_in(file: &Path) -> Option<Ipv4Addr> {
    let set = vrhost_fib::import::read_routes(file, &Default::default()).ok()?;
    set.ipv4()
        .find(|r| {
            let a = Ipv4Addr::from(r.prefix);
            (8..=24).contains(&r.len) && !a.is_private() && !a.is_loopback() && a.octets()[0] < 224
        })
        .map(|r| Ipv4Addr::from(r.prefix + 1))
}

/// The real table, if this checkout has `../shared/data/fib` beside it.
fn real_table() -> Option<PathBuf> {
    let fib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/fib");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&fib)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files.into_iter().next()?.canonicalize().ok()
}

#[test]
fn a_vr_with_a_route_file_moves_to_fast_and_forwards_by_its_routes() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test makes namespaces and loads XDP programs: run as root"
    );
    let [na, nr, nb] = line("fr", &MACS);
    let files = common::TempDir::new("fastroutes");
    // A small table: 2,000 /24s of 172.16/12, and the one the test uses.
    let small = files.path().join("small.ipasn");
    let mut text: String = (0..2000u32)
        .map(|i| format!("172.{}.{}.0/24\t{}\n", 16 + i / 256, i % 256, 64500 + i))
        .collect();
    text.push_str("198.18.0.0/15\t64512\n");
    std::fs::write(&small, text).expect("write the route file");
    let d = common::Daemon::start_under(
        "fastroutes",
        &config("slow", &small),
        &["ip", "netns", "exec", nr.name()],
    );
    assert_eq!(d.json(&["vr", "show", "r"])["path"], "slow");
    let out = d.ok(&["vr", "move", "r", "fast"]);
    assert!(out.contains("moved VR r to the fast path"), "{out}");
    let (before, after) = through(&d, &na, &nb, Ipv4Addr::new(198, 19, 7, 9));
    assert!(after >= before + N, "forwarded fast: {before} -> {after}");
    eprintln!(
        "small route file: {N} datagrams, {} forwarded fast",
        after - before
    );

    let Some(real) = real_table() else {
        eprintln!("skipped the real table: no route file in ../shared/data/fib");
        return;
    };
    let dst = destination_in(&real).expect("a route in the real table");
    let cfg = d.dir().join("real.toml");
    std::fs::write(&cfg, config("fast", &real)).expect("write the config");
    let t = Instant::now();
    d.ok(&["apply", cfg.to_str().unwrap()]);
    eprintln!(
        "real table {}: applied in {:.1} s (debug build; {})",
        real.display(),
        t.elapsed().as_secs_f64(),
        d.logged(&["routes written"]).unwrap_or_default()
    );
    assert_eq!(d.json(&["vr", "show", "r"])["path"], "fast");
    let (before, after) = through(&d, &na, &nb, dst);
    assert!(after >= before + N, "forwarded fast: {before} -> {after}");
    eprintln!("real table: {N} datagrams to {dst}, forwarded fast");
    drop(d);
    drop((na, nb));
}

/// Routing mode src-dst: a route added through the API (the table of
/// source `0.0.0.0/0`, where `routes` go) forwards on both paths, fast
/// first, then slow after a move; the VR has no route there before.
#[test]
fn an_api_route_of_a_src_dst_vr_forwards_on_both_paths() {
    assert!(rustix::process::geteuid().is_root(), "run as root");
    let [na, nr, nb] = line("fm", &MACS);
    let router = format!(
        "mode = \"src-dst\"\nneighbours = [{{ ip = \"10.0.2.2\", mac = \"{}\" }}]",
        MACS.b0
    );
    let cfg = common::line::line_config(&MACS, "fast", &router);
    let d = common::Daemon::start_under("fastmode", &cfg, &["ip", "netns", "exec", nr.name()]);
    let far = Ipv4Addr::new(10, 9, 0, 1);
    let no_route = |s: &Value| {
        common::vr_stats(s, "r")["fast"]["to_slow"]["no_route"]
            .as_u64()
            .expect("to_slow.no_route")
    };
    // No route yet: the fast path hands a datagram over, the router has
    // none either.
    let before = no_route(&d.stats());
    let tx = na
        .run(|| UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).expect("bind in ns-a"))
        .unwrap();
    tx.send_to(b"no route", (far, PORT)).expect("send");
    d.wait_for("to_slow.no_route", PATIENCE, |s| no_route(s) > before);
    d.ok(&["route", "add", "r", "10.9.0.0/16", "via", "10.0.2.2"]);
    let (b, a) = through(&d, &na, &nb, far);
    assert!(a >= b + N, "forwarded fast: {b} -> {a}");
    d.ok(&["vr", "move", "r", "slow"]);
    let at_slow = fwd(&d.stats());
    receive_all(&d, &na, &nb, far);
    assert_eq!(fwd(&d.stats()), at_slow, "the slow path forwarded them");
    eprintln!("src-dst API route: {N} datagrams fast, {N} slow");
    drop(d);
    drop((na, nb));
}
