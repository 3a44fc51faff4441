//! Control messages to a running instance over a real region and a real
//! `SOCK_SEQPACKET` pair, the test playing the host: route changes while
//! the instance sleeps and while packets keep it busy, malformed messages,
//! and packets following the changed table.

use std::net::Ipv4Addr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::AtomicBool;

use serde_json::json;
use vrhost_packet::MacAddr;
use vrhost_proto::{HostMsg, MAX_MSG, PollConfig, VrReply, counter};
use vrhost_router::{Router, RouterConfig};
use vrhost_sdk::DropReason;
use vrhost_sdk::runtime::{Instance, VrCounters};
use vrhost_shm::fdpass::{recv_with_fds, send_with_fds, seqpacket_pair};
use vrhost_shm::{
    Consumer, Doorbell, Producer, Region, RegionConfig, RingId, SlotState, needs_kick,
};

mod common;

const SINK: [u8; 6] = [2, 0, 0, 0, 0, 2];
const NEIGH: [u8; 6] = [2, 0, 0, 0, 0x30, 0x50];
const SLOTS: u32 = 256;

/// The host's side: rings, doorbell, control socket.
struct Host {
    region: Region,
    rx: Vec<Producer>,
    tx: Vec<Consumer>,
    vr_bell: Doorbell,
    ctrl: OwnedFd,
    /// Slots not with the instance.
    free: Vec<u32>,
    next_id: u64,
}

/// Where a packet went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    /// Out of vNIC 1 to this MAC.
    Sent([u8; 6]),
    /// Dropped.
    Dropped,
}

impl Host {
    fn control(&mut self, body: serde_json::Value) -> u64 {
        self.next_id += 1;
        let msg = HostMsg::Control {
            id: self.next_id,
            body,
        };
        self.send_raw(&serde_json::to_vec(&msg).unwrap());
        self.next_id
    }

    fn send_raw(&self, msg: &[u8]) {
        send_with_fds(self.ctrl.as_fd(), msg, &[]).unwrap();
    }

    /// The next reply, if one came (`wait`: within 10 s, or panic).
    fn reply(&self, wait: bool) -> Option<(u64, Result<serde_json::Value, String>)> {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let ts = Timespec {
            tv_sec: if wait { 10 } else { 0 },
            tv_nsec: 0,
        };
        let mut fds = [PollFd::new(&self.ctrl, PollFlags::IN)];
        if rustix::event::poll(&mut fds, Some(&ts)).unwrap() == 0 {
            assert!(!wait, "no reply within 10 s");
            return None;
        }
        let mut buf = vec![0; MAX_MSG];
        let (n, _) = recv_with_fds(self.ctrl.as_fd(), &mut buf).unwrap();
        match serde_json::from_slice(&buf[..n]).unwrap() {
            VrReply::Control { id, result } => Some((id, result)),
            r => panic!("not a control reply: {r:?}"),
        }
    }

    /// Hand the instance up to `n` packets to `dst` on vNIC 0 (fewer if
    /// the slots are out); the slots given.
    fn feed(&mut self, dst: Ipv4Addr, n: usize) -> Vec<u32> {
        let take = n.min(self.free.len());
        let slots: Vec<u32> = self.free.drain(..take).collect();
        let frame = common::udp64([2, 0, 0, 0, 0xa0, 7], dst, 64);
        for &s in &slots {
            common::fill(&self.region, s, &frame);
            self.region.meta(s).unwrap().set(SlotState::Filled);
        }
        let pushed = self.rx[0].push(&slots).unwrap();
        assert_eq!(pushed, slots.len(), "the ring holds every slot");
        if needs_kick(&self.region.instance(0).unwrap().vr_sleeping) {
            self.vr_bell.ring();
        }
        slots
    }

    /// Take back what the instance is done with: (slot, where it went).
    fn collect(&mut self) -> Vec<(u32, Out)> {
        let mut done = Vec::new();
        let mut idx = [0u32; SLOTS as usize];
        for v in 0..2 {
            let n = self.tx[v].pop(&mut idx).unwrap();
            for &s in &idx[..n] {
                let meta = self.region.meta(s).unwrap();
                let out = if meta.state_raw() == SlotState::Dropped as u32 {
                    assert_eq!(v, 0, "dropped slots come back on the rx vNIC's ring");
                    Out::Dropped
                } else {
                    assert_eq!(meta.state_raw(), SlotState::Processed as u32);
                    assert_eq!(v, 1, "every route leaves by vNIC 1");
                    let (off, _) = meta.extent();
                    // SAFETY: the instance gave the slot back through a tx
                    // ring and no longer touches it; nothing else writes it.
                    let b = unsafe { self.region.slot_bytes_at(s, off.into(), 6) }.unwrap();
                    Out::Sent(b.try_into().unwrap())
                };
                done.push((s, out));
                self.free.push(s);
            }
        }
        done
    }

    /// Feed `n` packets to `dst` and wait for all of them.
    fn roundtrip(&mut self, dst: Ipv4Addr, n: usize) -> Vec<Out> {
        let mut slots = self.feed(dst, n);
        assert_eq!(slots.len(), n);
        let mut outs = Vec::new();
        while !slots.is_empty() {
            for (s, out) in self.collect() {
                slots.retain(|&x| x != s);
                outs.push(out);
            }
            std::thread::yield_now();
        }
        outs
    }
}

/// An instance of the router in a thread, and the host's side of it.
/// The thread returns the instance's counters and its count of unreadable
/// control messages.
/// `spin_rounds` of 2^30 keep it from ever sleeping in a test.
fn start(spin_rounds: u32) -> (Host, std::thread::JoinHandle<(VrCounters, u64)>) {
    let region = Region::create(
        "ctl",
        RegionConfig {
            slot_count: SLOTS,
            ring_entries: SLOTS,
            ..RegionConfig::default()
        },
    )
    .unwrap();
    let cfg: RouterConfig = serde_json::from_value(json!({
        "vnics": [{"mac": "02:00:00:00:10:00", "addrs": ["10.1.0.1/24"]},
                  {"mac": "02:00:00:00:10:01", "addrs": ["10.1.1.1/24"]}],
        "nexthops": [{"vnic": 1, "mac": MacAddr(SINK).to_string()}],
        "routes": [{"prefix": "198.51.100.0/24", "nexthop": 0}],
        "neighbours": [{"ip": "10.1.1.50", "mac": MacAddr(NEIGH).to_string()}],
        // No ICMP errors: a packet without a route is a plain drop.
        "icmp": {"rate": 0, "burst": 0},
    }))
    .unwrap();
    let mut router = Router::new(&cfg).unwrap();
    let vr_bell = Doorbell::new().unwrap();
    let vr_bell2 = Doorbell::from_fd(rustix::io::dup(vr_bell.fd()).unwrap());
    let (host_end, vr_end) = seqpacket_pair().unwrap();
    rustix::io::ioctl_fionbio(&vr_end, true).unwrap();
    let mut inst = Instance::new(
        region.clone(),
        0,
        vr_bell2,
        Doorbell::new().unwrap(),
        PollConfig {
            spin_rounds,
            yield_us: 0,
            sleep_ms: 50,
            ..PollConfig::default()
        },
    )
    .unwrap();
    let thread = std::thread::spawn(move || {
        // Only the control socket stops it.
        let stop = AtomicBool::new(false);
        inst.run(&mut router, Some(vr_end.as_fd()), &stop).unwrap();
        (inst.counters(), inst.bad_ctrl_messages())
    });
    let ring = |id| region.ring(0, id).unwrap();
    let host = Host {
        rx: (0..2).map(|v| ring(RingId::Rx(v)).producer()).collect(),
        tx: (0..2).map(|v| ring(RingId::Tx(v)).consumer()).collect(),
        region,
        vr_bell,
        ctrl: host_end,
        free: (0..SLOTS).collect(),
        next_id: 0,
    };
    (host, thread)
}

const OLD: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 9);
const NEW: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 5);
const LATER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

impl Host {
    /// Wait until the instance sleeps on its doorbell.
    fn until_asleep(&self) {
        while !needs_kick(&self.region.instance(0).unwrap().vr_sleeping) {
            std::thread::yield_now();
        }
    }

    fn stop(&self) {
        self.send_raw(&serde_json::to_vec(&HostMsg::Stop).unwrap());
    }
}

fn sleeps(c: &VrCounters) -> u64 {
    c.v[counter::SLEEPS]
}

#[test]
fn routes_change_while_idle() {
    let (mut host, thread) = start(64);
    assert_eq!(host.roundtrip(OLD, 8), vec![Out::Sent(SINK); 8]);
    assert_eq!(
        host.roundtrip(NEW, 8),
        vec![Out::Dropped; 8],
        "no route yet"
    );

    // A route by gateway (a static neighbour on vNIC 1), sent to the
    // sleeping instance.
    host.until_asleep();
    let id = host
        .control(json!({"routes": {"add": [{"prefix": "203.0.113.0/24", "via": "10.1.1.50"}]}}));
    let (got, result) = host.reply(true).unwrap();
    assert_eq!(got, id);
    assert_eq!(result.unwrap()["added"], 1);
    assert_eq!(host.roundtrip(NEW, 8), vec![Out::Sent(NEIGH); 8]);

    // A malformed message and a refused one: answered, the instance lives.
    host.until_asleep();
    host.send_raw(b"{\"Control\": 17");
    let (got, result) = host.reply(true).unwrap();
    assert_eq!(got, 0);
    assert!(result.unwrap_err().starts_with("bad control message"));
    let id = host.control(json!({"routes": {"del": ["10.0.0.0/8"]}}));
    assert_eq!(
        host.reply(true).unwrap(),
        (id, Err("del[0] \"10.0.0.0/8\": no such route".into()))
    );
    assert_eq!(host.roundtrip(NEW, 8), vec![Out::Sent(NEIGH); 8]);
    host.stop();
    let (c, bad) = thread.join().unwrap();
    assert_eq!(bad, 1);
    assert!(sleeps(&c) >= 2);
    assert_eq!(c.v[counter::DROP_BASE + DropReason::NoRoute as usize], 8);
}

#[test]
fn routes_change_while_busy() {
    // Never asleep: every message is served between two rounds.
    let (mut host, thread) = start(1 << 30);
    let id = host
        .control(json!({"routes": {"add": [{"prefix": "203.0.113.0/24", "via": "10.1.1.50"}]}}));
    let (got, result) = host.reply(true).unwrap();
    assert_eq!(got, id);
    let routes = result.unwrap()["routes"].as_u64().unwrap();
    assert_eq!(host.roundtrip(NEW, 8), vec![Out::Sent(NEIGH); 8]);

    // Packets to all three prefixes keep coming while the change (and a
    // malformed message) goes in. Packets handed over after the reply
    // came must see the new table; earlier ones either.
    let mut after_reply = vec![false; SLOTS as usize];
    let mut dst_of = vec![OLD; SLOTS as usize];
    let mut seen_after = 0;
    let mut sent = false;
    let mut replied = false;
    let mut rounds = 0u64;
    let mut dropped = 0;
    let mut kinds = [0u64; 3];
    while seen_after < 3000 || kinds.contains(&0) {
        rounds += 1;
        for dst in [OLD, NEW, LATER] {
            for s in host.feed(dst, 16) {
                dst_of[s as usize] = dst;
                after_reply[s as usize] = replied;
            }
        }
        if !sent && rounds > 20 {
            host.send_raw(
                br#"{"Control": {"id": 99, "body": {"routes": {"add": "x"}}, "extra": 1}}"#,
            );
            host.control(json!({"routes": {
                "del": ["198.51.100.0/24"],
                "add": [{"prefix": "192.0.2.0/24", "nexthop": 0}],
            }}));
            sent = true;
        }
        if sent
            && !replied
            && let Some((got, result)) = host.reply(false)
        {
            if got == 99 {
                assert!(result.unwrap_err().contains("unknown field `extra`"));
            } else {
                assert_eq!(got, host.next_id);
                let r = result.unwrap();
                assert_eq!(
                    r,
                    json!({"added": 1, "replaced": 0, "deleted": 1, "routes": routes})
                );
                replied = true;
            }
        }
        for (s, out) in host.collect() {
            let s = s as usize;
            dropped += u64::from(out == Out::Dropped);
            if !after_reply[s] {
                continue;
            }
            seen_after += 1;
            let (kind, want) = if dst_of[s] == OLD {
                (0, Out::Dropped)
            } else if dst_of[s] == NEW {
                (1, Out::Sent(NEIGH))
            } else {
                (2, Out::Sent(SINK))
            };
            kinds[kind] += 1;
            assert_eq!(out, want, "to {}", dst_of[s]);
        }
    }

    // Stop: the thread ends, having counted the drops.
    host.stop();
    let (c, bad) = thread.join().unwrap();
    assert_eq!(bad, 1);
    assert_eq!(sleeps(&c), 0);
    assert!(c.v[counter::DROP_BASE + DropReason::NoRoute as usize] >= dropped);
    assert!(c.v[counter::TX] >= kinds[1] + kinds[2]);
}

#[test]
fn a_closed_socket_stops_the_instance() {
    let (host, thread) = start(64);
    host.send_raw(b"]");
    drop(host);
    // The answer to "]" cannot go: the instance stops.
    assert_eq!(thread.join().unwrap().1, 1);
}
