//! Tests of the worker: the round, its service order and its active set.

use std::net::Ipv4Addr;

use vrhost_shm::SlotState;

use super::*;
use crate::classify::{Match, Rule};
use crate::stats::IngressDrop;
use crate::vrpath::Sched;
use crate::vrpath::testkit::{Instance, Kit, Sent, Sink, Source, frame, slot_frame};

/// A worker whose port 0 is `rx` and port 1 a sink of `room` frames,
/// and VRs of one vNIC each (out on port 1) with the scheduling given,
/// each holding `backlog` processed frames in its tx ring. Returns the
/// worker, the VRs' instance sides and the frames port 1 was sent.
fn worker(
    rx: Source,
    room: usize,
    scheds: &[Sched],
    backlog: usize,
) -> (Worker, Vec<Instance>, Sent) {
    let sent = Sent::default();
    let ports: Vec<Box<dyn Port>> = vec![
        Box::new(rx),
        Box::new(Sink {
            sent: sent.clone(),
            room,
        }),
    ];
    let mut w = Worker::new(ports, Classifier::default(), PollConfig::default()).unwrap();
    let mut inst = Vec::new();
    for (v, s) in scheds.iter().enumerate() {
        let mut k = Kit::new(1, 1, 4096, 4096);
        for t in 0..backlog {
            k.give(0, &frame(v as u8 + 10 * (t == 0) as u8));
        }
        let slots = k.take(0, 0);
        k.hand_back(0, 0, &slots, SlotState::Processed);
        k.vp.set_vnic_ports(vec![1]);
        k.vp.set_sched(*s);
        w.add_vr(k.vp);
        inst.extend(k.inst);
    }
    (w, inst, sent)
}

fn tx(w: &Worker) -> Vec<u64> {
    w.vrs().iter().map(|v| v.stats().tx_packets.get()).collect()
}

#[test]
fn each_vr_sends_its_weights_share_of_a_round() {
    let weight = |weight| Sched {
        weight,
        ..Sched::default()
    };
    let (mut w, _inst, _) = worker(Source::new([]), usize::MAX, &[weight(1), weight(3)], 2000);
    assert_eq!(w.poll_once(), TX_QUANTUM * 4);
    assert_eq!(tx(&w), [TX_QUANTUM as u64, 3 * TX_QUANTUM as u64]);
    w.poll_once();
    assert_eq!(tx(&w), [2 * TX_QUANTUM as u64, 6 * TX_QUANTUM as u64]);
}

#[test]
fn a_high_priority_vr_is_served_first_and_without_a_budget() {
    let high = Sched {
        high_priority: true,
        ..Sched::default()
    };
    // Room for 2100 frames: the high-priority VR (added last) sends its
    // 2000 first, the first normal VR the 100 left, the second none.
    let (mut w, _inst, sent) = worker(
        Source::new([]),
        2100,
        &[Sched::default(), Sched::default(), high],
        2000,
    );
    w.poll_once();
    assert_eq!(tx(&w), [100, 0, 2000]);
    assert_eq!(
        sent.lock().unwrap()[0][0],
        12,
        "its first frame went out first"
    );
    let dropped: Vec<u64> = w
        .vrs()
        .iter()
        .map(|v| v.stats().port_dropped.get())
        .collect();
    assert_eq!(dropped, [TX_QUANTUM as u64 - 100, TX_QUANTUM as u64, 0]);
}

fn udp(dst: Ipv4Addr) -> Vec<u8> {
    crate::testkit::udp(Ipv4Addr::new(10, 0, 0, 1), 1000, dst, 2000)
}

/// `n` VRs of one vNIC (out on port 1), frames to 10.`v`.0.0/16
/// going to VR `v`, and `frames` waiting on port 0; no sweep unless a
/// test asks for one (`reap`).
fn many(n: usize, frames: Vec<Vec<u8>>) -> (Worker, Vec<Instance>, Sent) {
    let (mut w, inst, sent) = worker(
        Source::new(frames),
        usize::MAX,
        &vec![Sched::default(); n],
        0,
    );
    let rules: Vec<Rule> = (0..n)
        .map(|v| Rule {
            m: Match {
                in_port: Some(0),
                dst: Some((Ipv4Addr::new(10, v as u8, 0, 0), 16)),
                ..Match::default()
            },
            vr: v,
            vnic: 0,
        })
        .collect();
    w.set_classifier(Classifier::new(&rules).unwrap());
    w.last_reap = Instant::now() + Duration::from_secs(3600);
    (w, inst, sent)
}

fn to_vr(v: usize, tag: u8) -> Vec<u8> {
    let mut f = udp(Ipv4Addr::new(10, v as u8, 0, 5));
    // A tag in the last byte of the payload, to tell frames apart.
    *f.last_mut().unwrap() = tag;
    f
}

/// Instance `inst` takes what its rx ring holds and hands it all back
/// processed; returns how many.
fn echo(w: &Worker, inst: &mut Instance, v: usize) -> usize {
    let mut idx = [0u32; 64];
    let n = inst.rx[0].pop(&mut idx).unwrap();
    let region = w.vrs()[v].region();
    for &s in &idx[..n] {
        region.meta(s).unwrap().set(SlotState::Processed);
    }
    assert_eq!(inst.tx[0].push(&idx[..n]).unwrap(), n);
    n
}

#[test]
fn a_hundred_vrs_each_get_their_frames_and_send_them_back_out() {
    let frames: Vec<Vec<u8>> = (0..100).flat_map(|v| [to_vr(v, 1), to_vr(v, 2)]).collect();
    let (mut w, mut inst, sent) = many(100, frames);
    assert_eq!(w.poll_once(), 200);
    for (v, i) in inst.iter_mut().enumerate() {
        assert_eq!(echo(&w, i, v), 2, "VR {v}");
    }
    assert_eq!(w.poll_once(), 200);
    assert_eq!(sent.lock().unwrap().len(), 200);
    assert!(tx(&w).iter().all(|&n| n == 2), "{:?}", tx(&w));
    // Everything came back: no VR is left to visit.
    assert_eq!(w.active.ranks(), Vec::<usize>::new());
    for v in w.vrs() {
        v.check_slot_accounting().unwrap();
    }
}

#[test]
fn a_round_visits_the_vrs_with_work_and_the_sweep_the_others() {
    let (mut w, mut inst, sent) = many(100, vec![to_vr(3, 0), to_vr(70, 0)]);
    // The first round sweeps all; the VRs given a frame stay.
    assert_eq!(w.poll_once(), 2);
    assert_eq!(w.active.ranks(), [3, 70]);
    // A frame idle VR 50 never held, put in its tx ring: nothing looks
    // at it until the sweep.
    inst[50].tx[0].push(&[0]).unwrap();
    let bad = |w: &Worker| w.vrs()[50].stats().violations_total();
    echo(&w, &mut inst[70], 70);
    assert_eq!(w.poll_once(), 1, "VR 70's frame, not VR 50's index");
    assert_eq!(bad(&w), 0);
    assert_eq!(sent.lock().unwrap().len(), 1);
    assert_eq!(w.active.ranks(), [3], "VR 70 handed everything back");
    w.reap();
    w.last_reap = Instant::now() + Duration::from_secs(3600);
    assert_eq!(w.poll_once(), 1, "the sweep took VR 50's index");
    assert_eq!(bad(&w), 1);
    assert_eq!(w.active.ranks(), [3]);
    // VR 3 still holds its frame, and is visited each round until it
    // hands it back.
    echo(&w, &mut inst[3], 3);
    assert_eq!(w.poll_once(), 1);
    assert_eq!(w.active.ranks(), Vec::<usize>::new());
    assert_eq!(sent.lock().unwrap().len(), 2);
}

#[test]
fn frames_from_a_port_go_to_the_vr_their_rule_names() {
    let frames = [
        udp(Ipv4Addr::new(10, 1, 0, 5)),
        udp(Ipv4Addr::new(10, 2, 0, 5)),
        udp(Ipv4Addr::new(10, 2, 0, 6)),
        udp(Ipv4Addr::new(192, 0, 2, 1)),
        vec![0u8; 10],
    ];
    let (mut w, mut inst, _) = worker(Source::new(frames), usize::MAX, &[Sched::default(); 2], 0);
    let rule = |a, vr| Rule {
        m: Match {
            in_port: Some(0),
            dst: Some((Ipv4Addr::new(10, a, 0, 0), 16)),
            ..Match::default()
        },
        vr,
        vnic: 0,
    };
    w.set_classifier(Classifier::new(&[rule(1, 0), rule(2, 1)]).unwrap());
    assert_eq!(w.poll_once(), 5);
    let mut idx = [0u32; 8];
    assert_eq!(inst[0].rx[0].pop(&mut idx).unwrap(), 1);
    assert_eq!(inst[1].rx[0].pop(&mut idx).unwrap(), 2);
    let st = w.stats();
    assert_eq!(st.rx_packets.get(), 5);
    assert_eq!(st.ingress_drops[IngressDrop::NoMatch as usize].get(), 1);
    assert_eq!(st.ingress_drops[IngressDrop::Malformed as usize].get(), 1);
}

#[test]
fn a_round_takes_a_share_of_frames_for_each_vr_the_last_one_fed() {
    // 50 frames for each of 20 VRs, interleaved as tenants' traffic is.
    let frames = || -> Vec<Vec<u8>> {
        (0..50)
            .flat_map(|t| (0..20).map(move |v| to_vr(v, t)))
            .collect()
    };
    let (mut w, _inst, _) = many(20, frames());
    let per_vr = w.poll.round_per_vr as usize;
    assert!(per_vr * 20 > 256, "the default gives 20 VRs more than 256");
    // The first round knows of no busy VR: 256 frames, to all 20.
    assert_eq!(w.poll_once(), 256);
    assert_eq!(w.poll_once(), per_vr * 20);
    for v in w.vrs() {
        v.check_slot_accounting().unwrap();
    }
    // 0: 256 frames a round, however many VRs.
    let (mut w, _inst, _) = many(20, frames());
    w.poll.round_per_vr = 0;
    assert_eq!(w.poll_once(), 256);
    assert_eq!(w.poll_once(), 256);
}

/// The tags (last bytes) of the frames each VR's rx ring holds, in order.
fn received(w: &Worker, inst: &mut [Instance]) -> Vec<Vec<u8>> {
    inst.iter_mut()
        .enumerate()
        .map(|(v, i)| {
            let mut idx = [0u32; 256];
            let n = i.rx[0].pop(&mut idx).unwrap();
            let region = w.vrs()[v].region();
            idx[..n]
                .iter()
                .map(|&s| *slot_frame(region, s).last().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn a_burst_gives_each_vr_its_frames_in_order() {
    // 12 frames for each of 20 VRs, interleaved, a few to no VR and a
    // few too short to classify, and a run of one VR's frames.
    let mut frames: Vec<Vec<u8>> = (0..12)
        .flat_map(|t| (0..20).map(move |v| to_vr(v, t)))
        .collect();
    frames.insert(5, udp(Ipv4Addr::new(192, 0, 2, 1)));
    frames.insert(40, vec![0u8; 10]);
    frames.extend((12..40).map(|t| to_vr(7, t)));
    let (mut w, mut inst, _) = many(20, frames.clone());
    w.poll.round_per_vr = 0;
    let mut moved = 0;
    while moved < frames.len() {
        let n = w.poll_once();
        assert!(n > 0, "the port's frames are taken");
        moved += n;
    }
    for v in w.vrs() {
        v.check_slot_accounting().unwrap();
    }
    let st = w.stats();
    let drops = (
        st.ingress_drops[IngressDrop::NoMatch as usize].get(),
        st.ingress_drops[IngressDrop::Malformed as usize].get(),
    );
    assert_eq!(drops, (1, 1));
    for (v, tags) in received(&w, &mut inst).iter().enumerate() {
        let want: Vec<u8> = match v {
            7 => (0..40).collect(),
            _ => (0..12).collect(),
        };
        assert_eq!(tags, &want, "VR {v}");
    }
}
