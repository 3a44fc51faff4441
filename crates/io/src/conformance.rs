//! One test, every driver: the contract of [`Port`] that all of them keep,
//! and the lab the drivers on kernel interfaces run it in (throwaway
//! network namespaces: run as root).

use std::os::fd::BorrowedFd;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use vrhost_lab::{Netns, veth};

use crate::Port;
use crate::socket::{SocketConfig, SocketPort};

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

/// A port on a kernel interface: `peer`, on the other end of its link,
/// sends [`frames`], which the port must then hand out as a source; then
/// the port as a sink.
pub(crate) fn check_kernel_port(port: &mut dyn Port, peer: &mut dyn Port) {
    let frames = frames();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    assert_eq!(peer.tx_burst(&refs), refs.len());
    assert!(readable(port.wait_fd().unwrap()));
    check_source(port);
    check_sink(port);
}

/// The port `open` makes when run in `ns` (drivers look interfaces up in
/// the calling thread's namespace).
pub(crate) fn open_in<P: Send, E: Send + std::fmt::Debug>(
    ns: &Netns,
    open: impl FnOnce() -> Result<P, E> + Send,
) -> P {
    ns.run(open).unwrap().unwrap()
}

/// A default [`SocketPort`] on interface `ifname` of `ns`: the peer that
/// sends a port under test its frames.
pub(crate) fn socket_on(ns: &Netns, ifname: &str) -> SocketPort {
    open_in(ns, || SocketPort::open(ifname, SocketConfig::default()))
}

/// A namespace whose interfaces send nothing on their own (no IPv6).
pub(crate) fn quiet_ns() -> Netns {
    let ns = Netns::unique("vrh-iou").expect("create a network namespace (run as root)");
    ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1").unwrap();
    ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")
        .unwrap();
    ns
}

/// Two quiet namespaces joined by a veth pair, `c0` in the first and
/// `c1` in the second.
pub(crate) fn veth_pair() -> (Netns, Netns) {
    let (a, b) = (quiet_ns(), quiet_ns());
    veth(&a, "c0", None, &b, "c1", None).unwrap();
    (a, b)
}

/// Whether `fd` becomes ready within 10 s.
fn readable(fd: BorrowedFd<'_>) -> bool {
    let t = Duration::from_secs(10);
    let ts = Timespec {
        tv_sec: t.as_secs() as i64,
        tv_nsec: 0,
    };
    let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
    poll(&mut fds, Some(&ts)).unwrap() > 0
}

/// 40 frames for a source port to hand out in `check_source`.
fn frames() -> Vec<Vec<u8>> {
    (0..40u8)
        .map(|i| {
            let mut f = vec![i; 60 + usize::from(i)];
            f[12..14].copy_from_slice(&[0x88, 0xb5]);
            f
        })
        .collect()
}
