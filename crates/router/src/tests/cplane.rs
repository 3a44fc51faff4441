//! Local delivery to a control plane: control vNICs 2 and 3 for vNICs 0
//! and 1.

use super::*;

fn ctl_router() -> Router {
    router_with(&RouterConfig {
        control_vnics: vec![2, 3],
        ..cfg()
    })
}

#[test]
fn frames_for_the_router_it_does_not_handle_go_to_the_control_vnic() {
    let us = Ipv4Addr::new(10, 1, 0, 1);
    let cases = [
        udp_ttl(H0, R0, H0_IP, us, 64), // UDP to us (BFD, ...)
        udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(224, 0, 0, 5), 1), // OSPF's group
        udp_ttl(H0, R0, H0_IP, Ipv4Addr::BROADCAST, 64), // broadcast
    ];
    for run in [run, run_one] {
        let mut r = ctl_router();
        for f in &cases {
            let (v, out) = run(&mut r, 0, f);
            assert_eq!(v, Verdict::Forward(2));
            assert_eq!(&out, f, "handed on unchanged");
        }
        // On vNIC 1: its own control vNIC.
        let f = udp_ttl(GW, R1, GW_IP, Ipv4Addr::new(10, 1, 1, 1), 64);
        assert_eq!(run(&mut r, 1, &f).0, Verdict::Forward(3));
        // Echo is still the router's own.
        let (v, _) = run(&mut r, 0, &echo(H0, R0, H0_IP, us, 64));
        assert_eq!(v, Verdict::Forward(0));
        assert_eq!(c(&r, counters::TO_CONTROL), 4);
    }
}

#[test]
fn what_the_control_plane_sends_leaves_unchanged_by_its_vnic() {
    let mut r = ctl_router();
    // The control namespace's kernel: an ARP request of its own and a
    // TCP-like UDP segment to the peer, both from the vNIC's MAC.
    let ask = arp_request(R1, Ipv4Addr::new(10, 1, 1, 1), GW_IP);
    let seg = udp_ttl(R1, GW, Ipv4Addr::new(10, 1, 1, 1), GW_IP, 64);
    let out = run_burst(
        &mut r,
        &[(3, ask.clone()), (3, seg.clone()), (2, seg.clone())],
    );
    assert_eq!(out[0], (Verdict::Forward(1), ask));
    assert_eq!(out[1], (Verdict::Forward(1), seg.clone()));
    assert_eq!(out[2], (Verdict::Forward(0), seg));
    assert_eq!(c(&r, counters::FROM_CONTROL), 3);
    assert_eq!(c(&r, counters::ARP_REQUESTS), 0, "not the router's");
}

#[test]
fn arp_replies_to_the_router_are_learned_then_handed_on() {
    let mut r = ctl_router();
    let reply = gw_reply(GW);
    // Nothing waits for the gateway: the router learns, the kernel gets it.
    let (v, out) = run(&mut r, 1, &reply);
    assert_eq!(v, Verdict::Forward(3));
    assert_eq!(out, reply);
    assert_eq!(c(&r, counters::ARP_LEARNED), 1);
    // A request for the router's address is answered, not handed on.
    let ask = arp_request(H0, H0_IP, Ipv4Addr::new(10, 1, 0, 1));
    assert_eq!(run(&mut r, 0, &ask).0, Verdict::Forward(0));
    assert_eq!(c(&r, counters::TO_CONTROL), 1);
}

#[test]
fn without_control_vnics_local_frames_are_dropped_as_before() {
    let mut r = router();
    let f = udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(10, 1, 0, 1), 64);
    assert_eq!(
        run(&mut r, 0, &f).0,
        Verdict::Drop(DropReason::LocalUnsupported)
    );
    assert!(!matches!(run(&mut r, 2, &f).0, Verdict::Forward(_)));
}

#[test]
fn bad_control_vnics_are_refused() {
    for (ctl, want) in [
        (vec![2], "1 entries for 2 vNICs"),
        (vec![1, 2], "is a data vNIC"),
        (vec![2, 2], "given twice"),
    ] {
        let e = Router::new(&RouterConfig {
            control_vnics: ctl,
            ..cfg()
        })
        .unwrap_err();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn ipv6_for_the_router_and_advertisements_to_it_go_to_the_control_vnic() {
    use super::ipv6::{R0_6, R0_LL, WORLD, cfg6, gw6_advert, udp6_from_h0};
    let mut r = router_with(&RouterConfig {
        control_vnics: vec![2, 3],
        ..cfg6()
    });
    // UDP (as BGP's TCP or BFD) to its global and link-local addresses.
    for dst in [R0_6, R0_LL] {
        let f = udp6_from_h0(dst);
        assert_eq!(run(&mut r, 0, &f), (Verdict::Forward(2), f));
    }
    // An advertisement answering the control plane's solicitation: the
    // router learns the gateway, its kernel gets the advertisement too.
    let na = gw6_advert(GW);
    assert_eq!(run(&mut r, 1, &na), (Verdict::Forward(3), na));
    assert_eq!(c(&r, counters::TO_CONTROL), 3);
    assert_eq!(c(&r, counters::ND_LEARNED), 1);
    // Through it: routed as before, not handed to the control plane.
    let (v, _) = run(&mut r, 0, &udp6_from_h0(WORLD));
    assert_eq!(v, Verdict::Forward(1));
    assert_eq!(c(&r, counters::TO_CONTROL), 3);
}

#[test]
fn with_control_all_every_frame_goes_to_the_control_vnic_untouched() {
    let mut r = router_with(&RouterConfig {
        control_vnics: vec![2, 3],
        control_all: true,
        ..cfg()
    });
    let us = Ipv4Addr::new(10, 1, 0, 1);
    // What the router would forward, answer or drop: all handed on as is.
    let cases = [
        (0, udp_from_h0(Ipv4Addr::new(192, 0, 2, 9))),
        (0, echo(H0, R0, H0_IP, us, 64)),
        (0, arp_request(H0, H0_IP, us)),
        (0, udp_ttl(H0, R0, H0_IP, Ipv4Addr::new(192, 0, 2, 9), 1)),
        (1, gw_reply(GW)),
        (1, vec![0u8; 20]),
    ];
    let out = run_burst(&mut r, &cases);
    for ((rx, f), (v, o)) in cases.iter().zip(&out) {
        assert_eq!(*v, Verdict::Forward(rx + 2), "{f:?}");
        assert_eq!(o, f, "untouched");
    }
    assert_eq!(run_one(&mut r, 0, &cases[0].1).0, Verdict::Forward(2));
    // And back, as without control_all.
    let seg = udp_ttl(R1, GW, Ipv4Addr::new(10, 1, 1, 1), GW_IP, 64);
    assert_eq!(run(&mut r, 3, &seg), (Verdict::Forward(1), seg));
    assert_eq!(c(&r, counters::TO_CONTROL), 7);
    assert_eq!(c(&r, counters::FROM_CONTROL), 1);
    assert_eq!(
        c(&r, counters::ARP_REPLIES) + c(&r, counters::ICMP_ECHO_REPLIES),
        0
    );
    // Not without control vNICs.
    let e = Router::new(&RouterConfig {
        control_all: true,
        ..cfg()
    })
    .unwrap_err();
    assert!(e.contains("control_all needs control_vnics"), "{e}");
}
