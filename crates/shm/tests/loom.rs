//! Model checks of the ring, the slot state machine and the wakeup handshake.
//! Run with: RUSTFLAGS="--cfg loom" cargo test -p vrhost-shm --test loom --release
//! (in its own target dir, e.g. CARGO_TARGET_DIR=target-loom).
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::thread;
use vrhost_shm::{
    SlotMeta, SlotState, cancel_sleep, heap_ring, needs_kick, prepare_sleep, take_kick,
};

/// Items arrive in order, once each, and what the producer wrote before
/// pushing an index is visible to the consumer after popping it.
#[test]
fn ring_publishes_payload_in_order() {
    loom::model(|| {
        let mem = heap_ring(2);
        let payload: Arc<[AtomicU32; 3]> =
            Arc::new([AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)]);
        let mut p = mem.clone().producer();
        let mut c = mem.consumer();
        let pl = payload.clone();
        let t = thread::spawn(move || {
            let mut next = 0u32;
            while next < 3 {
                // Relaxed on purpose: the ring's Release must publish it.
                pl[next as usize].store(100 + next, Ordering::Relaxed);
                if p.push(&[next]).unwrap() == 1 {
                    next += 1;
                } else {
                    thread::yield_now();
                }
            }
        });
        let mut seen = 0u32;
        let mut out = [0u32; 2];
        while seen < 3 {
            let n = c.pop(&mut out).unwrap();
            for &i in &out[..n] {
                assert_eq!(i, seen);
                assert_eq!(payload[i as usize].load(Ordering::Relaxed), 100 + i);
                seen += 1;
            }
            if n == 0 {
                thread::yield_now();
            }
        }
        t.join().unwrap();
    });
}

/// The host fills a slot and hands it over an rx ring; the VR processes it and
/// returns it over a tx ring. Each side sees the other's writes and the state
/// it expects, with no step of the protocol skipped.
#[test]
fn slot_round_trip_between_host_and_vr() {
    loom::model(|| {
        let rx = heap_ring(2);
        let tx = heap_ring(2);
        let meta = Arc::new(SlotMeta::new());
        let packet = Arc::new(AtomicU32::new(0));
        let (m, pk) = (meta.clone(), packet.clone());
        let (mut rx_c, mut tx_p) = (rx.clone().consumer(), tx.clone().producer());
        let vr = thread::spawn(move || {
            let mut out = [0u32; 1];
            while rx_c.pop(&mut out).unwrap() == 0 {
                thread::yield_now();
            }
            assert_eq!(m.state_raw(), SlotState::Filled as u32);
            assert_eq!(pk.load(Ordering::Relaxed), 64, "packet bytes visible");
            assert_eq!(m.extent(), (128, 64));
            pk.store(63, Ordering::Relaxed); // process in place (TTL-1)
            m.transition(SlotState::Filled, SlotState::Processed)
                .unwrap();
            assert_eq!(tx_p.push(&out).unwrap(), 1);
        });
        let (mut rx_p, mut tx_c) = (rx.producer(), tx.consumer());
        packet.store(64, Ordering::Relaxed);
        meta.set_extent(128, 64);
        meta.transition(SlotState::Empty, SlotState::Filled)
            .unwrap();
        assert_eq!(rx_p.push(&[0]).unwrap(), 1);
        let mut out = [0u32; 1];
        while tx_c.pop(&mut out).unwrap() == 0 {
            thread::yield_now();
        }
        assert_eq!(packet.load(Ordering::Relaxed), 63, "VR's write visible");
        meta.transition(SlotState::Processed, SlotState::Empty)
            .unwrap();
        vr.join().unwrap();
    });
}

/// A slot whose state a hostile VR flips concurrently: the host's
/// compare-and-swap either succeeds from the expected state or reports what it
/// found; it never succeeds from a state the protocol forbids.
#[test]
fn slot_cas_under_hostile_flips() {
    loom::model(|| {
        let meta = Arc::new(SlotMeta::new());
        meta.transition(SlotState::Empty, SlotState::Filled)
            .unwrap();
        let m = meta.clone();
        let evil = thread::spawn(move || {
            m.set(SlotState::Empty);
            m.set(SlotState::Processed);
        });
        match meta.transition(SlotState::Processed, SlotState::Empty) {
            Ok(()) => {}
            Err(e) => assert!(matches!(e, vrhost_shm::TransitionError::WrongState { .. })),
        }
        evil.join().unwrap();
    });
}

/// A sleeper that raises its flag and looks at its ring once, racing a
/// producer thread that runs `produce` (pushes and kicks) on a 2-entry
/// ring: whether the sleeper saw work (and stayed awake), and what
/// `produce` returned.
fn race<R: Send + 'static>(
    produce: impl FnOnce(&mut vrhost_shm::Producer, &AtomicU32) -> R + Send + 'static,
) -> (bool, R) {
    let mem = heap_ring(2);
    let flag = Arc::new(AtomicU32::new(0));
    let f = flag.clone();
    let mut p = mem.clone().producer();
    let producer = thread::spawn(move || produce(&mut p, &f));
    let mut c = mem.consumer();
    prepare_sleep(&flag);
    let work = c.ready().unwrap() > 0;
    if work {
        cancel_sleep(&flag);
    }
    (work, producer.join().unwrap())
}

/// No lost wakeup: if the sleeper decides to sleep, the producer sees its flag
/// and kicks.
#[test]
fn need_wakeup_never_loses_a_wakeup() {
    loom::model(|| {
        let (work, kicked) = race(|p, f| {
            p.push(&[7]).unwrap();
            needs_kick(f)
        });
        assert!(work || kicked, "sleeper slept and producer did not kick");
    });
}

/// Taking the flag (one ring per sleep) loses no wakeup either: of two
/// pushes each followed by `take_kick`, a sleeper that saw no work is rung
/// by one of them, and by at most one.
#[test]
fn take_kick_rings_a_sleep_once_and_never_loses_it() {
    loom::model(|| {
        let (work, (first, second)) = race(|p, f| {
            p.push(&[7]).unwrap();
            let first = take_kick(f);
            p.push(&[8]).unwrap();
            (first, take_kick(f))
        });
        assert!(work || first || second, "sleeper slept and was not rung");
        assert!(!(first && second), "one sleep rung twice");
    });
}
