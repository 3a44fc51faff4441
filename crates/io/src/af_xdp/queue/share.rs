//! Frames passed between the queues of ports that share one UMEM
//! (`XDP_SHARED_UMEM` across devices): a frame one port received and lent
//! is sent by another with no copy, and once that port's completion ring
//! returns it, it goes home to the queue it came from (its free stack,
//! and from there its fill ring). Each frame is held by exactly one queue
//! or is on its way home from exactly one: a queue marks every frame it
//! does not hold as away, and takes one only from the queue that holds it.

use super::{Owner, Queue};

impl Queue {
    /// Take lent frame `frame` over from `from` (a queue of the same
    /// UMEM), lent now by this queue; false, and nothing done, if `from`
    /// has not lent it or this queue does not record it away.
    pub(in super::super) fn adopt_lent(&mut self, from: &mut Queue, frame: u32) -> bool {
        let i = frame as usize;
        if !from.is_lent(frame) || self.owner.get(i) != Some(&Owner::Away) {
            return false;
        }
        from.owner[i] = Owner::Away;
        from.lent -= 1;
        self.owner[i] = Owner::Lent;
        self.lent += 1;
        true
    }

    /// Send home to `home` (a queue of the same UMEM) the frames of its
    /// home range that this queue completed; returns how many. They go to
    /// its free stack, and to its fill ring at its next rx burst.
    pub(in super::super) fn send_home(&mut self, home: &mut Queue) -> u32 {
        let mut n = 0;
        let mut i = 0;
        while i < self.returning_len {
            let f = self.returning[i];
            if home.home.contains(&f) && home.owner[f as usize] == Owner::Away {
                home.put_free(f);
                self.returning_len -= 1;
                self.returning[i] = self.returning[self.returning_len];
                n += 1;
            } else {
                i += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::ring::fake::FakeRing;
    use super::super::super::sys::XdpDesc;
    use super::super::{FrameCounts, LentFrame};
    use super::*;

    const FS: u32 = 2048;
    const N: u32 = 32;

    /// One socket's rings, with the test playing the kernel.
    struct Rings {
        fill: FakeRing<u64>,
        comp: FakeRing<u64>,
        rx: FakeRing<XdpDesc>,
        tx: FakeRing<XdpDesc>,
    }

    impl Rings {
        fn new() -> Rings {
            Rings {
                fill: FakeRing::new(16),
                comp: FakeRing::new(64),
                rx: FakeRing::new(16),
                tx: FakeRing::new(16),
            }
        }
    }

    /// Two queues over one UMEM of `N` frames, the first with frames
    /// `0..N/2`, the second with the rest. The queues are dropped first.
    struct Pair {
        q: Option<(Queue, Queue)>,
        r: [Rings; 2],
        _umem: Vec<u8>,
    }

    impl Drop for Pair {
        fn drop(&mut self) {
            self.q = None;
        }
    }

    fn pair() -> Box<Pair> {
        let mut p = Box::new(Pair {
            q: None,
            r: [Rings::new(), Rings::new()],
            _umem: vec![0u8; (N * FS) as usize],
        });
        let umem = p._umem.as_mut_ptr();
        let mk = |r: &mut Rings, home| {
            // SAFETY: the pair owns the UMEM and the rings and drops the
            // queues first; heap buffers do not move.
            unsafe {
                Queue::new(
                    umem,
                    FS,
                    N,
                    home,
                    8,
                    r.fill.mem(),
                    r.comp.mem(),
                    r.rx.mem(),
                    r.tx.mem(),
                )
            }
        };
        let [r0, r1] = &mut p.r;
        let q = (mk(r0, 0..N / 2), mk(r1, N / 2..N));
        p.q = Some(q);
        p
    }

    fn sum(a: FrameCounts, b: FrameCounts) -> u32 {
        a.total + b.total + a.returning + b.returning
    }

    #[test]
    fn a_frame_lent_by_one_port_and_sent_by_the_other_goes_home_once() {
        let mut p = pair();
        let addrs = p.r[0].fill.kernel_take();
        assert_eq!(addrs.len(), 8);
        assert!(addrs.iter().all(|a| *a < u64::from(N / 2 * FS)));
        p.r[0].rx.kernel_put(&[
            XdpDesc {
                addr: addrs[0] + 256,
                len: 100,
                options: 0,
            },
            XdpDesc {
                addr: addrs[1] + 256,
                len: 1500,
                options: 0,
            },
        ]);
        let (q0, q1) = p.q.as_mut().unwrap();
        let mut out = [LentFrame::default(); 4];
        assert_eq!(q0.lend(&mut out), 2);
        let (a, b) = (out[0], out[1]);
        // The second port's own frames and frames not lent are not adopted.
        assert!(!q1.adopt_lent(q0, N / 2), "a frame of q1's own");
        assert!(!q1.adopt_lent(q0, 5), "a frame q0 has not lent");
        assert!(!q1.adopt_lent(q0, N), "past the UMEM");
        assert!(q1.adopt_lent(q0, a.frame));
        assert!(!q1.adopt_lent(q0, a.frame), "adopted once only");
        assert!(!q0.give_back(a.frame), "no longer q0's to give back");
        assert_eq!(q1.send_lent(&[a]), 1);
        assert_eq!(sum(q0.frame_counts(), q1.frame_counts()), N);
        // Sent on q1's tx ring, at q0's frame, no copy.
        let sent = p.r[1].tx.kernel_take();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].addr, u64::from(a.frame * FS) + 256);
        // q1's completion ring returns it, twice (the second is refused).
        p.r[1].comp.kernel_put(&[sent[0].addr, sent[0].addr]);
        let (q0, q1) = p.q.as_mut().unwrap();
        q1.reclaim();
        assert_eq!(q1.c.comp_refused, 1);
        let c1 = q1.frame_counts();
        assert_eq!((c1.returning, c1.tx, c1.total), (1, 0, N / 2));
        assert_eq!(sum(q0.frame_counts(), c1), N);
        // Home to q0 once, and to its fill ring at its next burst.
        assert_eq!(q1.send_home(q0), 1);
        assert_eq!(q1.send_home(q0), 0, "nothing left to send home");
        let c0 = q0.frame_counts();
        assert_eq!((c0.total, c0.lent, c0.returning), (N / 2, 1, 0));
        assert!(q0.give_back(b.frame));
        q0.recycle();
        let c0 = q0.frame_counts();
        assert_eq!((c0.fill, c0.total), (8, N / 2));
        assert_eq!(sum(c0, q1.frame_counts()), N);
    }

    #[test]
    fn an_adopted_frame_the_ring_refuses_goes_home_too() {
        let mut p = pair();
        let addrs = p.r[0].fill.kernel_take();
        p.r[0].rx.kernel_put(&[XdpDesc {
            addr: addrs[0],
            len: 60,
            options: 0,
        }]);
        let (q0, q1) = p.q.as_mut().unwrap();
        let mut out = [LentFrame::default(); 1];
        assert_eq!(q0.lend(&mut out), 1);
        assert!(q1.adopt_lent(q0, out[0].frame));
        // A runt: taken back by q1, counted, and on its way home.
        let runt = LentFrame { len: 3, ..out[0] };
        assert_eq!(q1.send_lent(&[runt]), 0);
        assert_eq!(q1.c.tx_dropped, 1);
        assert_eq!(q1.frame_counts().returning, 1);
        assert_eq!(q1.send_home(q0), 1);
        let (c0, c1) = (q0.frame_counts(), q1.frame_counts());
        assert_eq!(
            (c0.total, c0.free, c1.total, sum(c0, c1)),
            (N / 2, 9, N / 2, N)
        );
    }

    #[test]
    fn a_lent_frame_copied_out_is_given_back_at_once_and_bad_ones_are_refused() {
        let mut p = pair();
        let addrs = p.r[0].fill.kernel_take();
        for (k, a) in addrs[..3].iter().enumerate() {
            let at = *a as usize + 256;
            p._umem[at..at + 100].fill(k as u8 + 1);
        }
        let desc = |a: u64, len| XdpDesc {
            addr: a + 256,
            len,
            options: 0,
        };
        p.r[0]
            .rx
            .kernel_put(&[desc(addrs[0], 100), desc(addrs[1], 100), desc(addrs[2], 60)]);
        let (q0, q1) = p.q.as_mut().unwrap();
        let mut out = [LentFrame::default(); 4];
        assert_eq!(q0.lend(&mut out), 3);
        let (a, b, c) = (out[0], out[1], out[2]);
        // `b` is sent by the sibling port, which adopts it first.
        assert!(q1.adopt_lent(q0, b.frame));
        let not_lent = LentFrame { frame: 5, ..a };
        let runt = LentFrame { len: 3, ..c };
        let mut copied = Vec::new();
        let mut copy = |at: *const u8, len: usize| {
            // SAFETY: `copy_lent` passes an extent inside the UMEM.
            copied.push(unsafe { std::slice::from_raw_parts(at, len) }.to_vec());
            Some(true)
        };
        assert_eq!(q0.copy_lent(&[a, not_lent, runt], &mut copy), (1, 3));
        assert_eq!(q1.copy_lent(&[b], &mut copy), (1, 1));
        assert_eq!(copied, [vec![1u8; 100], vec![2u8; 100]]);
        assert_eq!((q0.c.tx_refused, q0.c.tx_dropped), (1, 1));
        assert!(!q0.give_back(a.frame), "given back once only");
        // Nothing waits in a tx ring: q0's frames are free but `b`, on its
        // way home from q1.
        assert!(p.r[0].tx.kernel_take().is_empty() && p.r[1].tx.kernel_take().is_empty());
        let (q0, q1) = p.q.as_mut().unwrap();
        let (c0, c1) = (q0.frame_counts(), q1.frame_counts());
        assert_eq!((c0.lent, c0.tx, c1.returning), (0, 0, 1));
        assert_eq!(q1.send_home(q0), 1);
        assert_eq!(sum(q0.frame_counts(), q1.frame_counts()), N);
        // A transmit that takes no more stops the walk: the frame it
        // stopped at stays lent, for the caller to send otherwise.
        p.r[0].rx.kernel_put(&[desc(addrs[3], 100)]);
        let (q0, _) = p.q.as_mut().unwrap();
        assert_eq!(q0.lend(&mut out), 1);
        assert_eq!(q0.copy_lent(&out[..1], |_, _| None), (0, 0));
        assert!(q0.is_lent(out[0].frame));
    }
}
