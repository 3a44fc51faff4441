//! The fast path's part of `/metrics`: a VR's `vrhost_vr_fast_*`
//! families, and those of its tunnel vNICs (`vrhost_vr_fast_tunnel_*`).

use super::Reg;

/// The XDP fast path's counters of VR `vr` (already added to its
/// `vr_rx_packets` and `vr_tx_packets`).
pub(super) fn fast(m: &mut Reg, vr: &str, f: &vrhost_api::FastStats) {
    let l = || vec![("vr", vr.to_string())];
    m.counter(
        "vr_fast_rx_packets",
        "Frames the fast path's select table gave a VR, on either path",
        l(),
        f.rx_packets,
    );
    m.counter(
        "vr_fast_forwarded",
        "Frames of a VR the fast path forwarded",
        l(),
        f.forwarded,
    );
    for (what, by, help) in [
        (
            "vr_fast_to_slow",
            &f.to_slow,
            "Frames of a VR the fast path handed to its user-space instances, by reason",
        ),
        (
            "vr_fast_drops",
            &f.drops,
            "Frames of a VR the fast path dropped, by reason",
        ),
    ] {
        for (reason, n) in by {
            m.counter(
                what,
                help,
                vec![("vr", vr.to_string()), ("reason", reason.clone())],
                *n,
            );
        }
    }
    for (to, n) in &f.auto_moves {
        let to = to.strip_prefix("to_").unwrap_or(to).to_string();
        m.counter(
            "vr_fast_auto_moves",
            "Moves of a path = \"auto\" VR between the paths, by where it went",
            vec![("vr", vr.to_string()), ("to", to)],
            *n,
        );
    }
    for (vnic, t) in &f.tunnels {
        tunnel(m, vr, vnic, t);
    }
}

/// The fast path's counters of VR `vr`'s tunnel vNIC `vnic`.
fn tunnel(m: &mut Reg, vr: &str, vnic: &str, t: &vrhost_api::FastTunnelStats) {
    let l = |k: &'static str, v: &str| {
        vec![
            ("vr", vr.to_string()),
            ("vnic", vnic.to_string()),
            (k, v.to_string()),
        ]
    };
    let help = "Frames of a VR's tunnel vNIC the fast path decapsulated or encapsulated";
    for (what, n) in [
        ("decapsulated", t.decapsulated),
        ("encapsulated", t.encapsulated),
    ] {
        m.counter("vr_fast_tunnel_frames", help, l("what", what), n);
    }
    for (reason, n) in &t.to_slow {
        let help = "Frames of a VR's tunnel vNIC the fast path handed to the slow path, by reason";
        m.counter("vr_fast_tunnel_to_slow", help, l("reason", reason), *n);
    }
    for (reason, n) in &t.drops {
        let help = "Frames of a VR's tunnel vNIC the fast path dropped, by reason";
        m.counter("vr_fast_tunnel_drops", help, l("reason", reason), *n);
    }
}
