//! One test, every driver: the contract of [`Port`] that all of them keep.

use crate::Port;

/// A source: an empty `out` gives 0; the stats count exactly the frames
/// and bytes handed out; frames are non-empty.
pub(crate) fn check_source(p: &mut dyn Port) {
    assert_eq!(p.rx_burst(&mut []), 0, "{}: empty out", p.name());
    let before = p.stats();
    let mut got = (0u64, 0u64);
    for burst in [1usize, 7, 32] {
        let mut out: Vec<&[u8]> = vec![&[]; burst];
        let n = p.rx_burst(&mut out);
        assert!(n <= burst);
        for f in &out[..n] {
            assert!(!f.is_empty());
            got.1 += f.len() as u64;
        }
        got.0 += n as u64;
    }
    let after = p.stats();
    assert_eq!(
        after.rx_packets - before.rx_packets,
        got.0,
        "{}: rx_packets",
        p.name()
    );
    assert_eq!(
        after.rx_bytes - before.rx_bytes,
        got.1,
        "{}: rx_bytes",
        p.name()
    );
    assert!(p.flush().is_ok());
}

/// A sink: accepted + dropped == offered, bytes of the accepted counted.
pub(crate) fn check_sink(p: &mut dyn Port) {
    let before = p.stats();
    let a = [0x11u8; 64];
    let b = [0x22u8; 300];
    let offered: [&[u8]; 3] = [&a, &b, &a];
    let n = p.tx_burst(&offered);
    assert_eq!(p.tx_burst(&[]), 0);
    let after = p.stats();
    assert_eq!(
        after.tx_packets - before.tx_packets,
        n as u64,
        "{}: tx_packets",
        p.name()
    );
    assert_eq!(
        (after.tx_packets - before.tx_packets) + (after.tx_dropped - before.tx_dropped),
        3,
        "{}: accepted + dropped",
        p.name()
    );
    if n == 3 {
        assert_eq!(after.tx_bytes - before.tx_bytes, 428);
    }
    assert!(p.flush().is_ok());
}
