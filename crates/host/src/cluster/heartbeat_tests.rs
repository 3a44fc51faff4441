use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use super::*;

const ANY: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// Wait up to `limit` for `f`; how long it took.
fn within(limit: Duration, f: impl Fn() -> bool) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

#[test]
fn heartbeats_parse_back_and_garbage_does_not() {
    assert_eq!(parse(&beat(PING, 7, 99)), Some((PING, 7, 99)));
    assert_eq!(parse(&beat(PONG, 0, 1)), Some((PONG, 0, 1)));
    let mut b = beat(PING, 1, 1);
    b[5] = 3;
    assert_eq!(parse(&b), None);
    let mut b = beat(PING, 1, 1);
    b[13] = 1;
    assert_eq!(parse(&b), None);
    assert_eq!(parse(b"VRHB"), None);
    assert_eq!(parse(&[0u8; BEAT_LEN]), None);
}

#[test]
fn an_engine_that_stops_answering_is_down_after_three_periods_and_up_when_it_answers_again() {
    let r1 = Responder::start(ANY).unwrap();
    let r2 = Responder::start(ANY).unwrap();
    let a2 = r2.addr();
    let b = Beacon::start(
        ANY,
        vec![("e1".into(), r1.addr()), ("e2".into(), a2)],
        INTERVAL,
        MISSES,
    )
    .unwrap();
    let l = b.liveness().clone();
    assert!(within(Duration::from_secs(2), || l.live() == 0b11).is_some());
    assert_eq!(l.state(1), EngineState::Up);
    drop(r2);
    let took = within(Duration::from_secs(2), || l.live() == 0b01).expect("e2 marked down");
    // Down after 3 missed periods, not before, and within 1 s.
    assert!(took >= Duration::from_millis(150), "{took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(l.state(0), EngineState::Up);
    let e2 = l.engine(1).unwrap();
    assert_eq!(e2.downs.load(Ordering::Relaxed), 1);
    // It comes back on the same address.
    let _r2 = Responder::start(a2).unwrap();
    assert!(within(Duration::from_secs(2), || l.live() == 0b11).is_some());
    assert_eq!(e2.ups.load(Ordering::Relaxed), 2);
    assert!(l.since_heard(1).unwrap() < Duration::from_secs(1));
}

#[test]
fn a_pong_from_another_address_is_counted_and_keeps_the_engine_down() {
    let engine = UdpSocket::bind(ANY).unwrap();
    let forger = UdpSocket::bind(ANY).unwrap();
    let b = Beacon::start(
        ANY,
        vec![("e1".into(), engine.local_addr().unwrap())],
        Duration::from_millis(20),
        MISSES,
    )
    .unwrap();
    let l = b.liveness().clone();
    let mut buf = [0u8; 64];
    let (n, beacon) = engine.recv_from(&mut buf).unwrap();
    let (kind, i, seq) = parse(&buf[..n]).unwrap();
    assert_eq!((kind, i), (PING, 0));
    for _ in 0..5 {
        forger.send_to(&beat(PONG, 0, seq), beacon).unwrap();
    }
    engine.send_to(b"garbage", beacon).unwrap();
    assert!(
        within(Duration::from_secs(1), || l.bad.load(Ordering::Relaxed)
            >= 6)
        .is_some()
    );
    assert_eq!(l.live(), 0);
    assert_eq!(l.since_heard(0), None);
    // The engine's own pong: up.
    engine.send_to(&beat(PONG, 0, seq), beacon).unwrap();
    assert!(within(Duration::from_secs(1), || l.live() == 1).is_some());
}

/// A heartbeat in an Ethernet frame (IPv4, UDP to port 4790).
fn beat_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + 8 + payload.len()) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[36..38].copy_from_slice(&4790u16.to_be_bytes());
    f[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn a_heartbeat_frame_is_told_from_other_frames() {
    assert!(is_heartbeat_frame(&beat_frame(&beat(PING, 2, 9))));
    assert!(is_heartbeat_frame(&beat_frame(&beat(PONG, 2, 9))));
    // Garbage in the payload, another length, TCP, not IPv4, truncated.
    let mut bad = beat(PING, 2, 9);
    bad[0] = b'X';
    assert!(!is_heartbeat_frame(&beat_frame(&bad)));
    assert!(!is_heartbeat_frame(&beat_frame(&[0u8; 20])));
    let mut tcp = beat_frame(&beat(PING, 2, 9));
    tcp[23] = 6;
    assert!(!is_heartbeat_frame(&tcp));
    let mut v6 = beat_frame(&beat(PING, 2, 9));
    v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    assert!(!is_heartbeat_frame(&v6));
    let f = beat_frame(&beat(PING, 2, 9));
    for n in 0..f.len() {
        assert!(!is_heartbeat_frame(&f[..n]), "{n} bytes");
    }
}
