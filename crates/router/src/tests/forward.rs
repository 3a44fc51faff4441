//! Forwarding, configuration, bursts, random input.

use proptest::prelude::*;

use super::*;

#[test]
fn the_original_form_forwards_as_before() {
    let json = r#"{"vnics":[{"mac":"02:00:00:00:10:00"},{"mac":"02:00:00:00:10:01"}],
        "nexthops":[{"vnic":1,"mac":"02:00:00:00:00:02"}],
        "routes":[{"prefix":"10.0.0.0/8","nexthop":0}],"route_file":null}"#;
    let c: RouterConfig = serde_json::from_str(json).unwrap();
    let mut r = router_with(&c);
    assert_eq!(r.routes(), 1);
    let pkt = udp_ttl(
        H0,
        R0,
        Ipv4Addr::new(192, 168, 0, 1),
        Ipv4Addr::new(10, 0, 0, 9),
        64,
    );
    let (v, out) = run(&mut r, 0, &pkt);
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!((&out[0..6], &out[6..12], out[22]), (&SINK[..], &R1[..], 63));
    assert!(
        vrhost_packet::ipv4::Ipv4Packet::new_checked(&out[14..])
            .unwrap()
            .verify_checksum()
    );
    assert_eq!((&out[12..22], out[23]), (&pkt[12..22], pkt[23]));
    assert_eq!(&out[26..], &pkt[26..]);
    // An IPv4 packet in a frame that says IPv6: version 4, a bad header.
    let mut v6 = pkt.clone();
    v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    assert_eq!(run(&mut r, 0, &v6).0, Verdict::Drop(DropReason::BadHeader));
    let mut other = pkt.clone();
    other[12..14].copy_from_slice(&[0x88, 0xb5]);
    assert_eq!(
        run(&mut r, 0, &other).0,
        Verdict::Drop(DropReason::Unsupported)
    );
    assert_eq!(
        run(&mut r, 0, &pkt[..20]).0,
        Verdict::Drop(DropReason::BadHeader)
    );
    let mut bad = pkt.clone();
    bad[24] ^= 1;
    assert_eq!(
        run(&mut r, 0, &bad).0,
        Verdict::Drop(DropReason::BadChecksum)
    );
    assert_eq!(
        run(&mut r, 0, &pkt[..13]).0,
        Verdict::Drop(DropReason::BadHeader)
    );
    // Its JSON is what it was: new fields are skipped when empty.
    let back = serde_json::to_value(&c).unwrap();
    assert_eq!(
        back["vnics"][0],
        serde_json::json!({"mac": "02:00:00:00:10:00"})
    );
    assert_eq!(
        back["routes"][0],
        serde_json::json!({"prefix": "10.0.0.0/8", "nexthop": 0})
    );
}

#[test]
fn a_toml_config_in_the_new_form() {
    let c: RouterConfig = toml::from_str(
        r#"
        vnics = [
          { mac = "02:00:00:00:10:00", addrs = ["10.1.0.1/24"] },
          { mac = "02:00:00:00:10:01", addrs = ["10.1.1.1/24"] },
        ]
        routes = [{ prefix = "0.0.0.0/0", via = "10.1.1.2" }]
        neighbours = [{ ip = "10.1.0.9", mac = "02:00:00:00:30:09" }]
        arp = { reachable_ms = 5000 }
        icmp = { rate = 10, burst = 2 }
        "#,
    )
    .unwrap();
    assert_eq!(c.arp.reachable_ms, 5000);
    assert_eq!(c.arp.retrans_ms, ArpConfig::default().retrans_ms);
    let r = Router::new(&c).unwrap();
    // Default, two connected subnets, two local addresses, two broadcasts.
    assert_eq!(r.routes(), 7);
}

#[test]
fn config_errors_name_the_field() {
    let bad = |f: fn(&mut RouterConfig), want: &str| {
        let mut c = cfg();
        f(&mut c);
        let e = Router::new(&c).unwrap_err();
        assert!(e.contains(want), "{e:?} should name {want:?}");
    };
    bad(
        |c| c.vnics[0].addrs = vec!["10.1.0.1".into()],
        "vnics[0].addrs[0]",
    );
    bad(
        |c| c.vnics[1].addrs[1] = "10.9.255.255/16".into(),
        "vnics[1].addrs[1]",
    );
    bad(
        |c| c.vnics[1].addrs[1] = "224.0.0.1/4".into(),
        "vnics[1].addrs[1]",
    );
    bad(|c| c.vnics[1].addrs[1] = "10.1.0.1/24".into(), "twice");
    bad(
        |c| c.vnics[0].mac = "01:00:5e:00:00:01".into(),
        "vnics[0].mac",
    );
    bad(
        |c| c.routes[0].via = Some("10.77.0.1".into()),
        "routes[0].via",
    );
    bad(
        |c| c.routes[0].via = Some("10.1.1.1".into()),
        "routes[0].via",
    );
    bad(|c| c.routes[0].via = Some("nope".into()), "routes[0].via");
    bad(|c| c.routes[0].vnic = Some(2), "routes[0].vnic");
    bad(|c| c.routes[1].vnic = Some(1), "routes[1].vnic");
    bad(|c| c.routes[1].via = Some("10.1.1.9".into()), "routes[1]");
    bad(|c| c.routes[1].nexthop = Some(1), "routes[1].nexthop");
    bad(|c| c.routes[1].nexthop = None, "routes[1]");
    bad(|c| c.nexthops[0].mac = String::new(), "nexthops[0]");
    bad(|c| c.nexthops[0].vnic = 5, "nexthops[0].vnic");
    bad(
        |c| {
            c.neighbours = vec![NeighbourConfig {
                ip: "172.16.0.1".into(),
                mac: "02:00:00:00:00:09".into(),
                vnic: None,
            }]
        },
        "neighbours[0].ip",
    );
    bad(
        |c| {
            c.neighbours = vec![NeighbourConfig {
                ip: "10.1.0.9".into(),
                mac: "ff:ff:ff:ff:ff:ff".into(),
                vnic: None,
            }]
        },
        "neighbours[0].mac",
    );
    bad(|c| c.arp.neighbours = 0, "arp.neighbours");
    bad(|c| c.arp.probes = 0, "arp.probes");
    // A table too small for its gateways and static neighbours.
    bad(
        |c| {
            c.arp.neighbours = 8;
            c.neighbours = (0..9)
                .map(|i| NeighbourConfig {
                    ip: format!("10.1.0.{}", 10 + i),
                    mac: "02:00:00:00:00:09".into(),
                    vnic: None,
                })
                .collect();
        },
        "neighbours[8]",
    );
    // Unknown fields are refused by name.
    let e = serde_json::from_str::<RouterConfig>(r#"{"vnics":[],"routs":[]}"#).unwrap_err();
    assert!(e.to_string().contains("routs"), "{e}");
    let e =
        serde_json::from_str::<RouterConfig>(r#"{"vnics":[],"arp":{"retry_ms":1}}"#).unwrap_err();
    assert!(e.to_string().contains("retry_ms"), "{e}");
    // `vnic` given: `via` need not be on a connected subnet (onlink).
    let mut c = cfg();
    c.routes[0].via = Some("10.77.0.1".into());
    c.routes[0].vnic = Some(1);
    assert!(Router::new(&c).is_ok());
}

#[test]
fn waiting_neighbours_are_evicted_pinned_ones_never() {
    let small = ArpConfig {
        neighbours: 8,
        pending: 1,
        ..ArpConfig::default()
    };
    // 8 entries, one the gateway's (pinned): 20 connected hosts take turns
    // in the other 7, each packet a request; only one waits in the only
    // buffer at a time, the others are lost (counted).
    let mut r = router_with(&RouterConfig {
        arp: small,
        ..cfg()
    });
    for i in 0..20u8 {
        let (v, out) = run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(10, 1, 1, 100 + i)));
        assert_eq!(v, Verdict::Forward(1));
        assert_eq!(out[41], 100 + i, "a request for it");
    }
    assert_eq!(c(&r, counters::ARP_REQUESTS), 20);
    assert!(c(&r, counters::ARP_UNRES_DISCARDS) >= 19);
    assert_eq!(c(&r, counters::NEIGH_TABLE_FULL), 0);
    // The gateway is still there and resolves.
    let (v, out) = run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(8, 8, 8, 8)));
    assert_eq!(
        (v, out),
        (
            Verdict::Forward(1),
            request_bytes(R1, Ipv4Addr::new(10, 1, 1, 1), GW_IP)
        )
    );

    // All pinned (the gateway and 7 static neighbours): a new neighbour
    // finds no room, a counted drop; the static ones still work.
    let mut r = router_with(&RouterConfig {
        arp: small,
        neighbours: (0..7)
            .map(|i| NeighbourConfig {
                ip: format!("10.1.0.{}", 10 + i),
                mac: "02:00:00:00:00:09".into(),
                vnic: None,
            })
            .collect(),
        ..cfg()
    });
    let (v, _) = run(&mut r, 0, &udp_from_h0(Ipv4Addr::new(10, 1, 1, 100)));
    assert_eq!(v, Verdict::Drop(DropReason::ArpUnresolved));
    assert_eq!(c(&r, counters::NEIGH_TABLE_FULL), 1);
    let (v, out) = run(
        &mut r,
        1,
        &udp_ttl(GW, R1, GW_IP, Ipv4Addr::new(10, 1, 0, 12), 9),
    );
    assert_eq!(
        (v, &out[0..6]),
        (Verdict::Forward(0), &[2, 0, 0, 0, 0, 9][..])
    );
}

/// A mix of every kind of frame above.
fn mix() -> Vec<(u16, Vec<u8>)> {
    let us = Ipv4Addr::new(10, 1, 0, 1);
    vec![
        (0, udp_from_h0(Ipv4Addr::new(192, 0, 2, 1))),
        (0, udp_from_h0(Ipv4Addr::new(8, 8, 8, 8))),
        (0, echo(H0, R0, H0_IP, us, 64)),
        (0, arp_request(H0, H0_IP, us)),
        (1, gw_reply(GW)),
        (0, udp_from_h0(Ipv4Addr::new(8, 8, 4, 4))),
        (0, udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(192, 0, 2, 1), 1)),
        (1, udp_ttl(GW, R1, Ipv4Addr::new(1, 1, 1, 1), H0_IP, 30)),
        (0, udp_from_h0(Ipv4Addr::new(10, 1, 1, 77))),
        (0, udp_from_h0(Ipv4Addr::new(224, 1, 1, 1))),
        (0, vec![0u8; 10]),
    ]
}

#[test]
fn a_burst_does_what_single_packets_do() {
    let frames = mix();
    let mut one = router();
    let singles = run_each(&mut one, &frames);
    // Several bursts of the runtime's size, frames repeated.
    let mut burst = router();
    let n = 3 * BURST + 5;
    let repeated: Vec<(u16, Vec<u8>)> = (0..n).map(|i| frames[i % frames.len()].clone()).collect();
    let got = run_burst(&mut burst, &repeated);
    // ARP is handled in order with the rest, so the burst sees the same
    // states as the single packets: the same verdicts and bytes.
    for (i, (rx, f)) in repeated.iter().enumerate() {
        if i >= frames.len() {
            // The singles again, on the state the first round left.
            assert_eq!(got[i], run_one(&mut one, *rx, f), "frame {i}");
        } else {
            assert_eq!(got[i], singles[i], "frame {i}");
        }
    }
    assert_eq!(burst.counters, one.counters);
    assert!(burst.counters[counters::ARP_RELEASED] > 0);
    assert!(burst.counters[counters::ICMP_TIME_EXCEEDED] > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Whatever the bytes, the router neither panics nor names a vNIC it
    /// does not have.
    #[test]
    fn random_bytes_never_panic(
        frames in proptest::collection::vec(
            (0u16..3, proptest::collection::vec(any::<u8>(), 0..120), 0u8..4, 0usize..140),
            1..70,
        ),
        ms in 0u64..100_000,
    ) {
        let mut r = router();
        at(&mut r, ms);
        let mut bufs: Vec<Vec<u8>> = frames.iter().map(|_| vec![0u8; 512]).collect();
        let mut pkts = vec![];
        for ((rx, bytes, kind, off), b) in frames.iter().zip(bufs.iter_mut()) {
            let mut f = bytes.clone();
            // Bias towards what the router parses deeper.
            if f.len() >= 34 {
                match kind {
                    0 => f[12..14].copy_from_slice(&[8, 0]),
                    1 => {
                        f[12..16].copy_from_slice(&[8, 6, 0, 1]);
                        let op = 1 + (f[21] & 1);
                        f[16..22].copy_from_slice(&[8, 0, 6, 4, 0, op]);
                    }
                    2 => {
                        f[12..15].copy_from_slice(&[8, 0, 0x45]);
                        let len = (f.len() - 14) as u16;
                        f[16..18].copy_from_slice(&len.to_be_bytes());
                        f[26..30].copy_from_slice(&H0_IP.octets());
                        if f[0] & 1 == 0 { f[30] = 10; f[31] = 1; }
                        vrhost_packet::ipv4::Ipv4Packet::new_unchecked(&mut f[14..]).fill_checksum();
                    }
                    _ => {}
                }
            }
            let off = (*off).min(512 - f.len());
            b[off..off + f.len()].copy_from_slice(&f);
            pkts.push(Packet::new(b, off, f.len(), *rx).unwrap());
        }
        let mut verdicts = vec![Verdict::Drop(DropReason::Other); pkts.len()];
        r.process_burst(&mut pkts, &mut verdicts);
        for (p, v) in pkts.iter().zip(&verdicts) {
            if let Verdict::Forward(o) = v {
                prop_assert!(*o < 2, "out vNIC {o}");
                prop_assert!(p.len() >= 14 && p.offset() + p.len() <= p.capacity());
            }
        }
        // And one by one.
        for p in pkts.iter_mut() {
            if let Verdict::Forward(o) = r.process(p) {
                prop_assert!(o < 2);
            }
        }
    }
}

#[test]
fn bursts_by_default_only_for_tables_beyond_the_caches() {
    assert!(!router().prefers_burst(), "a few routes: one by one");
    // 1100 /24s in distinct /16s: 1100 groups of 1 KiB.
    let big = RouterConfig {
        routes: (0..1100u32)
            .map(|i| route_to(&format!("{}.{}.7.0/24", 1 + i / 256, i % 256), 0))
            .collect(),
        ..cfg()
    };
    assert!(router_with(&big).prefers_burst());
    let forced = |b| RouterConfig {
        burst_lookup: Some(b),
        ..cfg()
    };
    assert!(router_with(&forced(true)).prefers_burst());
    assert!(
        !router_with(&RouterConfig {
            burst_lookup: Some(false),
            ..big
        })
        .prefers_burst()
    );
    assert!(!router_with(&forced(false)).prefers_burst());
}
