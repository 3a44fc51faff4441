use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use vrhost_io::{Port, PortStats};
use vrhost_packet::tunnel::{OuterV4, VXLAN_OVERHEAD, VxlanHeader};

use super::*;

const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const LOCAL_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn engine_addr(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 9, 0, 10 + i)
}

fn engine_mac(i: u8) -> [u8; 6] {
    [2, 0, 0, 0, 1, i]
}

/// A port fed by the test and keeping what it is sent.
#[derive(Clone, Default)]
struct Wire {
    rx: Arc<Mutex<VecDeque<Vec<u8>>>>,
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
}

struct WirePort {
    w: Wire,
    burst: Vec<Vec<u8>>,
}

impl Port for WirePort {
    fn name(&self) -> &str {
        "wire"
    }
    fn rx_burst<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        let mut q = self.w.rx.lock().unwrap();
        let n = out.len().min(q.len());
        self.burst = q.drain(..n).collect();
        for (o, f) in out.iter_mut().zip(&self.burst) {
            *o = f;
        }
        n
    }
    fn tx_burst(&mut self, frames: &[&[u8]]) -> usize {
        let mut s = self.w.sent.lock().unwrap();
        s.extend(frames.iter().map(|f| f.to_vec()));
        frames.len()
    }
    fn stats(&self) -> PortStats {
        PortStats::default()
    }
}

/// Ports 0 (in), 1 (out) and 2 (underlay); VR 7 owns 0 and 1 and runs on
/// three engines (the third's MAC learned), all up.
fn setup(policy: ClusterPolicy) -> (Dispatcher, Vec<Box<dyn Port>>, [Wire; 3]) {
    let wires: [Wire; 3] = Default::default();
    let ports: Vec<Box<dyn Port>> = wires
        .iter()
        .map(|w| {
            Box::new(WirePort {
                w: w.clone(),
                burst: Vec::new(),
            }) as Box<dyn Port>
        })
        .collect();
    let engines = (0..3u8)
        .map(|i| EngineLink {
            name: format!("e{i}"),
            remote: engine_addr(i),
            udp_port: 4789,
            remote_mac: (i < 2).then(|| engine_mac(i)),
            capacity: 1,
        })
        .collect();
    let spec = DispatchSpec {
        underlay: 2,
        local: LOCAL,
        local_mac: LOCAL_MAC,
        engines,
        vrs: vec![RemoteVr {
            name: "r".into(),
            id: 7,
            ports: vec![0, 1],
            engines: vec![0, 1, 2],
            policy,
            rate: None,
            vr: None,
        }],
    };
    let l = Arc::new(Liveness::new(3));
    l.force(0b111);
    (Dispatcher::new(spec, l).unwrap(), ports, wires)
}

fn flow(i: u16) -> Vec<u8> {
    crate::testkit::udp(
        Ipv4Addr::new(192, 168, 1, 1),
        1000 + i,
        Ipv4Addr::new(192, 168, 2, 1),
        9,
    )
}

/// The engine (by outer destination), VNI and inner frame of a frame sent
/// on the underlay.
fn outer(f: &[u8]) -> (Ipv4Addr, u32, Vec<u8>) {
    let o = OuterV4::parse(f).unwrap();
    let (_, dport, body) = o.udp(f).unwrap();
    assert_eq!((o.src, dport), (LOCAL, 4789));
    let v = VxlanHeader::new_checked(&f[body.clone()]).unwrap();
    (o.dst, v.vni(), f[body.start + 8..].to_vec())
}

/// A frame from engine `i` with VNI `vni` around `inner`.
fn from_engine(i: u8, vni: u32, inner: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; VXLAN_OVERHEAD + inner.len()];
    EncapRepr {
        kind: EncapKind::Vxlan(vni),
        dst_mac: LOCAL_MAC,
        src_mac: engine_mac(i),
        src: engine_addr(i),
        dst: LOCAL,
        ident: 1,
        ttl: 64,
        src_port: 5000,
        dst_port: 4789,
    }
    .emit(&mut f[..VXLAN_OVERHEAD], inner.len())
    .unwrap();
    f[VXLAN_OVERHEAD..].copy_from_slice(inner);
    f
}

fn run(d: &mut Dispatcher, ports: &mut [Box<dyn Port>], p: usize) {
    while d.rx_burst(p, ports, 64) > 0 {}
}

#[test]
fn frames_go_to_engines_tagged_each_flow_to_one_engine() {
    let (mut d, mut ports, w) = setup(ClusterPolicy::Flow);
    // 200 flows, 3 frames each, interleaved.
    for _ in 0..3 {
        w[0].rx.lock().unwrap().extend((0..200).map(flow));
    }
    // Engine 2's MAC is not known yet: its frames are counted drops.
    run(&mut d, &mut ports, 0);
    let sent = w[2].sent.lock().unwrap().clone();
    let mut engine_of: HashMap<Vec<u8>, Ipv4Addr> = HashMap::new();
    for f in &sent {
        let (to, vni, inner) = outer(f);
        assert_eq!(Tag::from_vni(vni).unwrap().vr, 7);
        assert_eq!(vni, 0x07_00_00, "tag: VR 7, in by port 0, instance 0");
        assert_eq!(*engine_of.entry(inner).or_insert(to), to, "a flow moved");
    }
    let s = d.stats();
    let per: Vec<u64> = s.engines.iter().map(|e| e.tx_frames.get()).collect();
    assert_eq!(per[2], 0);
    assert_eq!(per[0] + per[1] + s.no_mac.get(), 600);
    assert!(per[0] > 90 && per[1] > 90 && s.no_mac.get() > 90, "{per:?}");
    assert_eq!(engine_of.len() as u64, (per[0] + per[1]) / 3);
}

#[test]
fn what_an_engine_sends_back_leaves_by_the_tagged_port_and_teaches_its_mac() {
    let (mut d, mut ports, w) = setup(ClusterPolicy::Flow);
    let inner = flow(1);
    w[2].rx
        .lock()
        .unwrap()
        .push_back(from_engine(2, 0x07_01_00, &inner));
    run(&mut d, &mut ports, 2);
    assert_eq!(*w[1].sent.lock().unwrap(), vec![inner.clone()]);
    assert_eq!(d.peer_macs()[2], Some(engine_mac(2)));
    let e = &d.stats().engines[2];
    assert_eq!(
        (e.rx_frames.get(), e.rx_bytes.get()),
        (1, inner.len() as u64)
    );
}

#[test]
fn forged_tags_and_strangers_are_counted_drops_never_forwarded() {
    let (mut d, mut ports, w) = setup(ClusterPolicy::Flow);
    let inner = flow(1);
    let bad = [
        from_engine(0, 0x08_01_00, &inner), // a VR it does not dispatch
        from_engine(0, 0x07_02_00, &inner), // a port not the VR's (the underlay)
        from_engine(0, 0x07_05_00, &inner), // no such port
        from_engine(0, 0x07_01_03, &inner), // an instance not run
        from_engine(0, 0x07_01_80, &inner), // local delivery with a port
        from_engine(9, 0x07_01_00, &inner), // no engine's address
    ];
    w[2].rx.lock().unwrap().extend(bad);
    run(&mut d, &mut ports, 2);
    assert!(w[0].sent.lock().unwrap().is_empty());
    assert!(w[1].sent.lock().unwrap().is_empty());
    assert_eq!(d.stats().bad_tag.get(), 6);
}

#[test]
fn a_dead_engine_gets_nothing_and_only_its_flows_move() {
    let (mut d, mut ports, w) = setup(ClusterPolicy::Flow);
    // All three MACs known.
    w[2].rx
        .lock()
        .unwrap()
        .push_back(from_engine(2, 0x07_01_00, &flow(0)));
    run(&mut d, &mut ports, 2);
    let send_all = |d: &mut Dispatcher, ports: &mut [Box<dyn Port>]| {
        w[2].sent.lock().unwrap().clear();
        w[0].rx.lock().unwrap().extend((0..300).map(flow));
        run(d, ports, 0);
        let sent = w[2].sent.lock().unwrap();
        sent.iter()
            .map(|f| {
                let (to, _, inner) = outer(f);
                (inner, to)
            })
            .collect::<HashMap<_, _>>()
    };
    let before = send_all(&mut d, &mut ports);
    assert_eq!(before.len(), 300);
    d.liveness().force(0b101);
    let after = send_all(&mut d, &mut ports);
    assert_eq!(after.len(), 300);
    let mut moved = 0;
    for (f, to) in &before {
        assert_ne!(after[f], engine_addr(1));
        if *to == engine_addr(1) {
            moved += 1;
        } else {
            assert_eq!(after[f], *to, "a flow of a live engine moved");
        }
    }
    assert!(moved > 50, "{moved}");
    d.liveness().force(0);
    w[0].rx.lock().unwrap().push_back(flow(1));
    run(&mut d, &mut ports, 0);
    assert_eq!(d.stats().no_engine.get(), 1);
}

#[test]
fn round_robin_spreads_one_flow_over_the_engines() {
    let (mut d, mut ports, w) = setup(ClusterPolicy::Rr);
    w[2].rx
        .lock()
        .unwrap()
        .push_back(from_engine(2, 0x07_01_00, &flow(0)));
    run(&mut d, &mut ports, 2);
    w[0].rx.lock().unwrap().extend((0..30).map(|_| flow(5)));
    run(&mut d, &mut ports, 0);
    let per: Vec<u64> = d
        .stats()
        .engines
        .iter()
        .map(|e| e.tx_frames.get())
        .collect();
    assert_eq!(per, [10, 10, 10]);
}

#[test]
fn arp_for_the_local_address_is_answered_on_the_underlay() {
    let (mut d, mut ports, w) = setup(ClusterPolicy::Flow);
    let mut req = vec![0u8; 42];
    req[0..6].copy_from_slice(&[0xff; 6]);
    req[6..12].copy_from_slice(&engine_mac(0));
    req[12..14].copy_from_slice(&[0x08, 0x06]);
    req[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    req[22..28].copy_from_slice(&engine_mac(0));
    req[28..32].copy_from_slice(&engine_addr(0).octets());
    req[38..42].copy_from_slice(&LOCAL.octets());
    w[2].rx.lock().unwrap().push_back(req);
    run(&mut d, &mut ports, 2);
    let sent = w[2].sent.lock().unwrap();
    assert_eq!(sent.len(), 1);
    assert_eq!(&sent[0][6..12], &LOCAL_MAC);
}

#[test]
fn a_spec_that_cannot_work_is_refused() {
    let (d, _, _) = setup(ClusterPolicy::Flow);
    let l = || Arc::new(Liveness::new(3));
    let mut s = d.spec().clone();
    s.vrs[0].id = 0;
    assert!(Dispatcher::new(s, l()).is_err());
    let mut s = d.spec().clone();
    s.vrs[0].ports.push(2);
    assert!(Dispatcher::new(s, l()).is_err());
    let mut s = d.spec().clone();
    s.vrs[0].engines.push(3);
    assert!(Dispatcher::new(s, l()).is_err());
    let mut s = d.spec().clone();
    let mut other = s.vrs[0].clone();
    other.id = 8;
    other.ports = vec![1];
    s.vrs.push(other);
    assert!(Dispatcher::new(s, l()).is_err());
}

#[test]
fn a_vr_with_a_rate_goes_only_to_the_engines_of_its_slices_and_is_placed_again_when_one_fails() {
    let (d, mut ports, w) = setup(ClusterPolicy::Proportional);
    let mut spec = d.spec().clone();
    for e in &mut spec.engines {
        (e.capacity, e.remote_mac) = (100, Some([2, 0, 0, 0, 9, 9]));
    }
    // 150 pps on engines of 100: engine 0 whole, 50 on engine 1.
    spec.vrs[0].rate = Some(150.0);
    let l = Arc::new(Liveness::new(3));
    l.force(0b111);
    let mut d = Dispatcher::new(spec, l).unwrap();
    w[0].rx.lock().unwrap().extend((0..300).map(flow));
    run(&mut d, &mut ports, 0);
    let per: Vec<u64> = d
        .stats()
        .engines
        .iter()
        .map(|e| e.tx_frames.get())
        .collect();
    assert_eq!(per, [200, 100, 0], "by slice: 100 and 50");
    // Engine 0 fails: 100 whole on engine 1, 50 on engine 2.
    d.liveness().force(0b110);
    w[0].rx.lock().unwrap().extend((0..300).map(flow));
    run(&mut d, &mut ports, 0);
    let per: Vec<u64> = d
        .stats()
        .engines
        .iter()
        .map(|e| e.tx_frames.get())
        .collect();
    assert_eq!(per, [200, 300, 100]);
    match &d.placement(0b010)[0] {
        crate::cluster::Placed::NoFit { free, .. } => assert_eq!(*free, 100.0),
        o => panic!("{o:?}"),
    }
}
