//! The token bucket's arithmetic in the program, checked on its state:
//! each test writes a bucket's raw state (tokens, refill time against
//! `CLOCK_MONOTONIC`, the clock of `bpf_ktime_get_ns`), runs one frame
//! with `BPF_PROG_TEST_RUN`, and reads the state back. Each fails with a
//! bucket that loses fractions of a token, does not cap at its burst,
//! overflows, takes a clock read older than the refill time for a second
//! idle, keeps its state per CPU, or is reset by an update.

use super::abi;
use super::testkit::{entry, load_on_lo};
use super::*;
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;

const VR: u32 = 1;
const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MS: u64 = 1_000_000;

fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn key() -> SelectKey {
    SelectKey {
        ifindex: ifindex("lo").expect("loopback"),
        vlan: None,
        dst_mac: Some(MAC),
    }
}

/// VR 1 on the loopback, slow path (the bucket comes before the path:
/// an admitted frame is `XDP_PASS` here, a refused one `XDP_DROP`).
fn rig() -> FastPath {
    let mut fp = load_on_lo(4, 16, MAC, VR, RoutingMode::Dst, vec![]);
    fp.set_select(key(), entry(VR, Path::Slow)).expect("select");
    fp
}

fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr(MAC),
        src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
        src_ip: Ipv4Addr::new(10, 1, 0, 5),
        dst_ip: Ipv4Addr::new(10, 2, 0, 5),
        sport: 1,
        dport: 2,
        ttl: 64,
        frame_bytes: 64,
    }
    .write(&mut f)
    .expect("frame");
    f
}

fn admitted(fp: &mut FastPath) -> bool {
    match fp.test_run(&frame()).expect("test run").0 {
        Action::Pass => true,
        Action::Drop => false,
        other => panic!("{other:?}"),
    }
}

/// The bucket's state set to `tokens` and `last_ns`.
fn put(fp: &mut FastPath, rate_pps: u64, burst: u64, tokens: u64, last_ns: u64) {
    let v = abi::SelectValue {
        vr: VR,
        path: abi::PATH_SLOW,
        rate_pps,
        burst,
        tokens,
        last_ns,
    };
    fp.put_select_raw(&key(), v);
}

fn state(fp: &FastPath) -> abi::SelectValue {
    fp.select_raw(&key()).expect("entry")
}

#[test]
fn refill_adds_whole_tokens_and_keeps_the_fraction() {
    let mut fp = rig();
    // 1000 pps: a token per ms; empty, last refilled 2.5 ms ago.
    let last = now_ns() - 2 * MS - MS / 2;
    put(&mut fp, 1000, 1000, 0, last);
    assert!(admitted(&mut fp));
    let s = state(&fp);
    let added = s.tokens + 1;
    assert!(added >= 2, "at least 2 tokens in 2.5 ms: {s:?}");
    // The refill time moved by the whole tokens' time, not to now: the
    // half token is kept for the next refill.
    assert_eq!(s.last_ns - last, added * MS, "{s:?}");
}

#[test]
fn refill_stops_at_the_burst() {
    let mut fp = rig();
    // 500 ms at 1000 pps would be 500 tokens; the bucket holds 10.
    put(&mut fp, 1000, 10, 0, now_ns() - 500 * MS);
    assert!(admitted(&mut fp));
    assert_eq!(state(&fp).tokens, 9);
}

#[test]
fn a_long_idle_at_the_highest_rate_does_not_overflow() {
    let mut fp = rig();
    // 5 s at 10^10 pps: 5 * 10^19 would wrap in 64 bits; past a second
    // the bucket is simply full, refilled now.
    let before = now_ns();
    put(&mut fp, MAX_RATE_PPS, 1000, 0, before - 5000 * MS);
    assert!(admitted(&mut fp));
    let s = state(&fp);
    assert_eq!(s.tokens, 999);
    assert!(s.last_ns >= before && s.last_ns <= now_ns(), "{s:?}");
    // Just under a second at the same rate: 9 * 10^18 fits, capped.
    put(&mut fp, MAX_RATE_PPS, 1000, 0, now_ns() - 900 * MS);
    assert!(admitted(&mut fp));
    assert_eq!(state(&fp).tokens, 999);
}

#[test]
fn a_clock_read_older_than_the_refill_time_adds_nothing() {
    let mut fp = rig();
    // Another CPU moved last_ns past this CPU's clock read (here: into
    // the future): empty stays empty, no wrapped "second idle".
    let ahead = now_ns() + 1000 * MS;
    put(&mut fp, 1000, 10, 0, ahead);
    assert!(!admitted(&mut fp));
    let s = state(&fp);
    assert_eq!((s.tokens, s.last_ns), (0, ahead));
    let c = fp.counters(VR).expect("counters");
    assert_eq!(c.drop_rate_limit, 1);
}

#[test]
fn the_bucket_is_shared_by_the_cpus() {
    use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
    let allowed = sched_getaffinity(None).expect("affinity");
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
        .filter(|&c| allowed.is_set(c))
        .take(2)
        .collect();
    if cpus.len() < 2 {
        eprintln!("one CPU: the bucket cannot be seen from a second");
        return;
    }
    let pin = |c: usize| {
        let mut s = CpuSet::new();
        s.set(c);
        sched_setaffinity(None, &s).expect("pin");
    };
    let mut fp = rig();
    let mut limited = entry(VR, Path::Slow);
    limited.limit = Some(TokenBucket {
        rate_pps: 1,
        burst: 3,
    });
    fp.set_select(key(), limited).expect("select");
    pin(cpus[0]);
    let first: Vec<bool> = (0..4).map(|_| admitted(&mut fp)).collect();
    // The burst taken on one CPU is gone on the other (a per-CPU bucket
    // would admit 3 more there).
    pin(cpus[1]);
    let second: Vec<bool> = (0..3).map(|_| admitted(&mut fp)).collect();
    sched_setaffinity(None, &allowed).expect("unpin");
    assert_eq!(first, [true, true, true, false]);
    assert_eq!(second, [false, false, false]);
}

#[test]
fn an_update_keeps_the_bucket_s_state() {
    let mut fp = rig();
    let limited = |rate_pps, burst, path| SelectEntry {
        limit: Some(TokenBucket { rate_pps, burst }),
        ..entry(VR, path)
    };
    fp.set_select(key(), limited(1, 5, Path::Slow))
        .expect("select");
    assert!((0..5).all(|_| admitted(&mut fp)), "the burst");
    assert!(!admitted(&mut fp));
    // A new rate, then a move: the bucket stays empty (a reset would
    // hand out a fresh burst at every change).
    fp.set_select(key(), limited(2, 5, Path::Slow))
        .expect("rate");
    assert!(!admitted(&mut fp));
    fp.set_select(key(), limited(2, 5, Path::Drop))
        .expect("path");
    assert!(!admitted(&mut fp));
    assert_eq!(fp.counters(VR).expect("counters").drop_select, 0);
    // A smaller burst caps what is left; no bucket, then one: full.
    put(&mut fp, 2, 5, 5, now_ns());
    fp.set_select(key(), limited(2, 2, Path::Slow))
        .expect("burst");
    assert_eq!(state(&fp).tokens, 2);
    fp.set_select(key(), entry(VR, Path::Slow))
        .expect("no limit");
    fp.set_select(key(), limited(1, 4, Path::Slow))
        .expect("again");
    assert_eq!(state(&fp).tokens, 4);
}

#[test]
fn buckets_the_program_cannot_run_are_refused() {
    let mut fp = rig();
    for (rate_pps, burst) in [(0, 1), (MAX_RATE_PPS + 1, 1), (1, 0), (1, MAX_BURST + 1)] {
        let e = SelectEntry {
            limit: Some(TokenBucket { rate_pps, burst }),
            ..entry(VR, Path::Slow)
        };
        assert!(
            matches!(fp.set_select(key(), e), Err(FastError::Config { .. })),
            "{rate_pps} {burst}"
        );
    }
}
