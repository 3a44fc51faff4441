//! Several instances of one VR, host side: each frame goes to one live
//! instance by the balancer, a flow stays on its instance, a retired
//! instance gets no new frames, and the slot accounting holds throughout.
//! The instances are played by this test (an external backend).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use vrhost_host::balance::Policy;
use vrhost_host::{Backend, Class, InstanceState, PathSpec, VrPath};
use vrhost_io::Port;
use vrhost_packet::MacAddr;
use vrhost_packet::build::UdpFrameSpec;
use vrhost_shm::{Consumer, Doorbell, RingId};

fn frame(flow: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    UdpFrameSpec {
        dst_mac: MacAddr([2, 0, 0, 0, 0x10, 0]),
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        src_ip: Ipv4Addr::new(10, 0, 0, 1),
        dst_ip: Ipv4Addr::new(10, 1, (flow >> 8) as u8, flow as u8),
        sport: 1000 + flow,
        dport: 2000,
        ttl: 64,
        frame_bytes: 64,
    }
    .write(&mut f)
    .unwrap();
    f
}

/// A VR with `n` instances played by the test.
fn vr(n: u16, policy: Policy) -> (VrPath, Vec<Consumer>) {
    let spec = PathSpec {
        instances: 4,
        balance: policy,
        ..PathSpec::new("instances", vec![0, 1], 4096)
    };
    let region = spec.create_region().unwrap();
    let rx = (0..n)
        .map(|i| region.ring(i, RingId::Rx(0)).unwrap().consumer())
        .collect();
    let bells = (0..n).map(|_| Doorbell::new().unwrap()).collect();
    let vp = VrPath::assemble(&spec, region, Backend::External, bells);
    (vp, rx)
}

/// Stage one frame of each flow in `flows`, `rounds` times, publish, and
/// say which instances each flow's frames reached.
fn send(
    vp: &mut VrPath,
    rx: &mut [Consumer],
    flows: std::ops::Range<u16>,
    rounds: usize,
) -> BTreeMap<u16, Vec<u16>> {
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    let mut seen: BTreeMap<u16, Vec<u16>> = BTreeMap::new();
    for _ in 0..rounds {
        for flow in flows.clone() {
            vp.stage(0, &frame(flow), || Class::Data).unwrap();
            vp.flush_rx(&mut ports);
            for (i, c) in rx.iter_mut().enumerate() {
                let mut idx = [0u32; 1];
                if c.pop(&mut idx).unwrap() == 1 {
                    let at = seen.entry(flow).or_default();
                    if !at.contains(&(i as u16)) {
                        at.push(i as u16);
                    }
                }
            }
        }
    }
    seen
}

#[test]
fn a_flow_stays_on_one_instance_and_flows_spread() {
    let (mut vp, mut rx) = vr(2, Policy::Flow);
    assert_eq!(vp.live_instances(), 2);
    let seen = send(&mut vp, &mut rx, 0..200, 5);
    assert_eq!(seen.len(), 200, "every frame reached an instance");
    assert!(
        seen.values().all(|at| at.len() == 1),
        "a flow on one instance: {seen:?}"
    );
    let on1 = seen.values().filter(|at| at[0] == 1).count();
    assert!(
        (50..=150).contains(&on1),
        "{on1} of 200 flows on instance 1"
    );
    let st = vp.stats();
    assert_eq!(
        st.instances[0].rx_packets.get() + st.instances[1].rx_packets.get(),
        1000
    );
    vp.check_slot_accounting().unwrap();
}

#[test]
fn round_robin_spreads_each_flow() {
    let (mut vp, mut rx) = vr(2, Policy::RoundRobin);
    // An odd number of flows, so that turns do not line up with flows.
    let seen = send(&mut vp, &mut rx, 0..9, 4);
    assert!(seen.values().all(|at| at.len() == 2), "{seen:?}");
}

#[test]
fn a_retired_instance_gets_no_new_frames() {
    let (mut vp, mut rx) = vr(2, Policy::Flow);
    send(&mut vp, &mut rx, 0..100, 1);
    assert!(vp.retire_instance(1));
    assert_eq!(
        vp.instance_states()[..2],
        [InstanceState::Live, InstanceState::Draining]
    );
    assert!(!vp.retire_instance(0), "the last live instance stays");
    let before = vp.stats().instances[1].rx_packets.get();
    let seen = send(&mut vp, &mut rx, 0..100, 2);
    assert!(seen.values().all(|at| at == &[0]), "{seen:?}");
    assert_eq!(vp.stats().instances[1].rx_packets.get(), before);
    assert_eq!(vp.stats().rebalances.get(), 1);
    vp.check_slot_accounting().unwrap();
}
