//! The burst loops of the drivers that make one system call per frame
//! ([`SocketPort`](crate::socket::SocketPort) and
//! [`TapPort`](crate::tap::TapPort)): how a received burst is handed out
//! and counted, and which frames a send burst refuses. The system calls
//! themselves stay with each driver.

use crate::PortStats;
use crate::packet_sys::ETH_HLEN;

/// What became of one frame given to the kernel.
pub(crate) enum SendOutcome {
    /// Sent whole.
    Sent,
    /// Not sent; the next frame may be.
    Dropped,
    /// Not sent, and the rest of the burst would not be either (the
    /// socket or link is busy or gone): refuse it without calls.
    Stop,
}

/// Send `frames` with one call of `send` each, counting in `stats`;
/// returns how many were sent. Frames shorter than an Ethernet header or
/// longer than `limit(frame)` are refused without a call, and so is the
/// rest of the burst after a [`SendOutcome::Stop`].
pub(crate) fn send_each(
    frames: &[&[u8]],
    stats: &mut PortStats,
    limit: impl Fn(&[u8]) -> usize,
    mut send: impl FnMut(&[u8]) -> SendOutcome,
) -> usize {
    let mut sent = 0;
    let mut stop = false;
    for f in frames {
        if stop || f.len() < ETH_HLEN || f.len() > limit(f) {
            stats.tx_dropped += 1;
            continue;
        }
        match send(f) {
            SendOutcome::Sent => {
                sent += 1;
                stats.tx_packets += 1;
                stats.tx_bytes += f.len() as u64;
            }
            SendOutcome::Dropped => stats.tx_dropped += 1,
            SendOutcome::Stop => {
                stats.tx_dropped += 1;
                stop = true;
            }
        }
    }
    sent
}

/// Point `out` at the frames received into `bufs`, one `(start, length)`
/// span each, and count them in `stats`; returns how many.
pub(crate) fn hand_out<'a>(
    bufs: &'a [u8],
    spans: impl Iterator<Item = (usize, usize)>,
    out: &mut [&'a [u8]],
    stats: &mut PortStats,
) -> usize {
    let mut n = 0;
    for (o, (at, len)) in out.iter_mut().zip(spans) {
        *o = &bufs[at..at + len];
        stats.rx_bytes += len as u64;
        n += 1;
    }
    stats.rx_packets += n as u64;
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_each_refuses_runts_oversize_and_the_rest_after_stop() {
        let mut stats = PortStats::default();
        let (ok, runt, big) = ([0u8; 60], [0u8; 13], [0u8; 101]);
        let frames: [&[u8]; 6] = [&ok, &runt, &big, &ok, &ok, &ok];
        // The first call sends, the second drops, the third stops the burst.
        let mut calls = 0;
        let sent = send_each(
            &frames,
            &mut stats,
            |_| 100,
            |_| {
                calls += 1;
                match calls {
                    2 => SendOutcome::Dropped,
                    3 => SendOutcome::Stop,
                    _ => SendOutcome::Sent,
                }
            },
        );
        assert_eq!((sent, calls), (1, 3));
        assert_eq!(
            (stats.tx_packets, stats.tx_bytes, stats.tx_dropped),
            (1, 60, 5)
        );
    }

    #[test]
    fn hand_out_points_at_the_spans_and_counts() {
        let bufs = [1u8, 2, 3, 4, 5, 6];
        let mut stats = PortStats::default();
        let mut out: [&[u8]; 3] = [&[]; 3];
        let n = hand_out(&bufs, [(0, 2), (3, 3)].into_iter(), &mut out, &mut stats);
        assert_eq!(n, 2);
        assert_eq!((out[0], out[1]), (&[1u8, 2][..], &[4u8, 5, 6][..]));
        assert_eq!((stats.rx_packets, stats.rx_bytes), (2, 5));
    }
}
