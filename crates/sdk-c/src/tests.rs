//! The verdict codes and the packet accessors, called as C calls them.

use super::*;

#[test]
fn drop_codes_follow_the_reasons_in_counter_order() {
    let codes = [
        (VRHOST_DROP_BAD_HEADER, "bad_header"),
        (VRHOST_DROP_BAD_CHECKSUM, "bad_checksum"),
        (VRHOST_DROP_UNSUPPORTED, "unsupported"),
        (VRHOST_DROP_TTL_EXPIRED, "ttl_expired"),
        (VRHOST_DROP_NO_ROUTE, "no_route"),
        (VRHOST_DROP_FILTERED, "filtered"),
        (VRHOST_DROP_OTHER, "other"),
        (VRHOST_DROP_ARP_UNRESOLVED, "arp_unresolved"),
        (VRHOST_DROP_HOST_UNREACHABLE, "host_unreachable"),
        (VRHOST_DROP_LOCAL_UNSUPPORTED, "local_unsupported"),
        (VRHOST_DROP_CONSUMED, "consumed"),
        (VRHOST_DROP_MULTICAST, "multicast"),
        (VRHOST_DROP_LINK_LOCAL, "link_local"),
        (VRHOST_DROP_EXT_HEADER, "ext_header"),
    ];
    assert_eq!(codes.len(), DropReason::COUNT, "a reason without a C code");
    for (code, name) in codes {
        match verdict(code) {
            Verdict::Drop(r) => assert_eq!(r.name(), name, "code {code}"),
            v => panic!("code {code}: {v:?}"),
        }
    }
}

#[test]
fn verdicts_of_any_return_value() {
    assert_eq!(verdict(0), Verdict::Forward(0));
    assert_eq!(verdict(65_535), Verdict::Forward(65_535));
    assert_eq!(verdict(65_536), Verdict::Drop(DropReason::Other));
    assert_eq!(verdict(i32::MAX), Verdict::Drop(DropReason::Other));
    assert_eq!(verdict(-15), Verdict::Drop(DropReason::Other), "unknown");
    assert_eq!(verdict(i32::MIN), Verdict::Drop(DropReason::Other));
}

#[test]
fn packet_accessors_as_c_calls_them() {
    let mut buf = [0u8; 256];
    buf[64..68].copy_from_slice(&[1, 2, 3, 4]);
    let mut p = Packet::new(&mut buf, 64, 4, 3).unwrap();
    let c = packet_ptr(&mut p);
    // SAFETY: `c` points to `p`, alive and not otherwise used until the
    // last call below, as during a callback.
    unsafe {
        let mut len = 0usize;
        let data = vrhost_packet_data(c, &mut len);
        assert_eq!(std::slice::from_raw_parts(data, len), &[1, 2, 3, 4]);
        assert_eq!((vrhost_packet_len(c), vrhost_packet_rx_vnic(c)), (4, 3));
        assert_eq!(vrhost_packet_capacity(c), 256);
        let front = vrhost_packet_push_front(c, 2);
        assert!(!front.is_null());
        *front = 9;
        assert!(
            vrhost_packet_push_front(c, 63).is_null(),
            "62 bytes of headroom left"
        );
        assert_eq!(vrhost_packet_len(c), 6);
        assert!(vrhost_packet_pull_front(c, 1));
        assert!(!vrhost_packet_pull_front(c, 6));
        assert!(vrhost_packet_set_len(c, 100));
        assert!(!vrhost_packet_set_len(c, 200), "past the slot");
        assert_eq!(vrhost_packet_len(c), 100);
        let null = std::ptr::null_mut();
        assert!(vrhost_packet_data(null, &mut len).is_null());
        assert!(!vrhost_packet_set_len(null, 1));
        assert_eq!(vrhost_main(std::ptr::null()), 1);
    }
    assert_eq!(p.data()[..4], [0, 1, 2, 3], "pushed byte, then pulled");
}
