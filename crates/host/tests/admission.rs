//! Admission at a VR's door: when data fills a VR that does not keep up,
//! its control traffic (ARP, routing protocols) still gets in, into the
//! room of its rx ring and pool that data frames may not take.

use vrhost_host::{Backend, Class, IngressDrop, PathSpec, VrPath};
use vrhost_io::Port;

/// The room kept for control frames out of `n` entries, as documented on
/// [`Class::Control`]: 1/16, at most one burst of 64.
fn reserve(n: u32) -> u32 {
    (n / 16).min(64)
}

/// Stage frames of `class` one at a time (each flushed to the ring) until
/// one is refused; returns how many got in and why the next did not.
fn fill(vp: &mut VrPath, class: Class) -> (u32, IngressDrop) {
    let frame = [0u8; 64];
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    let mut n = 0;
    loop {
        match vp.stage(0, &frame, || class) {
            Ok(()) => {
                assert_eq!(vp.flush_rx(&mut ports), 1);
                n += 1;
            }
            Err(why) => return (n, why),
        }
    }
}

#[test]
fn control_frames_get_into_a_full_vr() {
    // A VR bounded by its pool, one bounded by its ring, and one whose
    // ring and pool run out together (a control frame passes both checks).
    for (slots, ring, bound) in [
        (512, 1024, IngressDrop::PoolEmpty),
        (2048, 256, IngressDrop::RingFull),
        (256, 256, IngressDrop::RingFull),
    ] {
        let spec = PathSpec {
            ring_entries: ring,
            ..PathSpec::new("admission", vec![0, 1], slots)
        };
        let region = spec.create_region().unwrap();
        // Nobody consumes: a VR that has stopped keeping up.
        let mut vp = VrPath::assemble(&spec, region, Backend::External, vec![]);
        let room = slots.min(ring);
        let kept = reserve(room);
        let (data, why) = fill(&mut vp, Class::Data);
        assert_eq!(
            (data, why),
            (room - kept, bound),
            "{slots} slots, ring {ring}"
        );
        let (control, why) = fill(&mut vp, Class::Control);
        assert_eq!((control, why), (kept, bound), "{slots} slots, ring {ring}");
        // Once full, data stays out.
        assert_eq!(fill(&mut vp, Class::Data), (0, bound));
        vp.check_slot_accounting().unwrap();
    }
}

#[test]
fn a_tiny_pool_keeps_no_room() {
    let spec = PathSpec::new("admission-tiny", vec![0, 1], 8);
    let region = spec.create_region().unwrap();
    let mut vp = VrPath::assemble(&spec, region, Backend::External, vec![]);
    assert_eq!(fill(&mut vp, Class::Data).0, 8);
    assert_eq!(fill(&mut vp, Class::Control).0, 0);
}
