//! Ports that share one UMEM: a VR with two (or more) dedicated ports
//! gives them all its pool. The first port registers the pool
//! ([`AfXdpPort::open_on`]); each other one binds on it with
//! `XDP_SHARED_UMEM` ([`AfXdpPort::open_sharing`]), with its own fill and
//! completion rings and its own range of the frames. A frame one port
//! lent is sent by another from where it lies
//! ([`AfXdpPort::tx_lent_from`]), and once the sending port's completion
//! ring returns it, it goes home ([`AfXdpPort::return_frames`]). Every
//! index is checked against both ports' ownership records, as for one
//! port's lent frames.

use std::os::fd::AsFd;

use super::socket::ShareUmem;
use super::{AfXdpConfig, AfXdpError, AfXdpPort, LentFrame, UmemArea};

impl AfXdpPort {
    /// Open interface `ifname` on the UMEM of `first` (a port opened with
    /// [`AfXdpPort::open_on`] or this function): `area` is the same area
    /// again (same start and length, kept mapped by its own owner), and
    /// this port's frames are the `cfg.frames` that follow `first`'s in
    /// it. The socket binds with `XDP_SHARED_UMEM` and its own fill and
    /// completion rings (kernel 5.10+ across devices); copy or zero-copy
    /// and need-wakeup follow `first`'s (`cfg.bind` and `cfg.need_wakeup`
    /// are not used). One rx queue, as `open_on`.
    ///
    /// # Errors
    /// As [`AfXdpPort::open_on`]; [`AfXdpError::Config`] if `first` is not
    /// on a lent area or `area` is not the same one; [`AfXdpError::Bind`]
    /// (mode `shared UMEM`) if the kernel refuses to share.
    pub fn open_sharing(
        ifname: &str,
        cfg: &AfXdpConfig,
        area: UmemArea,
        first: &AfXdpPort,
    ) -> Result<AfXdpPort, AfXdpError> {
        let refuse = |why: &str| AfXdpError::Config {
            ifname: ifname.to_string(),
            why: why.to_string(),
        };
        let Some((at, len, end)) = first.lent_at else {
            return Err(refuse(
                "shares the UMEM of a port that is not on a lent area",
            ));
        };
        if (area.ptr() as usize, area.len()) != (at, len) {
            return Err(refuse(
                "shares a UMEM over another area than its first port's",
            ));
        }
        if first.socks.len() != 1 || first.socks[0].q.max_frame() != cfg.frame_size {
            return Err(refuse("shares a UMEM of another frame size"));
        }
        let share = ShareUmem {
            with: first.socks[0].fd.as_fd(),
            first_frame: end,
        };
        Self::open_with(ifname, cfg, Some(area), Some(share))
    }

    /// [`AfXdpPort::tx_lent`] for frames lent by this port or by `from`, a
    /// port sharing its UMEM: `from`'s are taken over and sent from where
    /// they lie, no copy. An index lent by neither is counted (see
    /// [`AfXdpPort::refused_lent`]) and left alone. Completed, `from`'s
    /// frames wait here for [`AfXdpPort::return_frames`].
    pub fn tx_lent_from(&mut self, from: &mut AfXdpPort, frames: &[LentFrame]) -> usize {
        self.take_lent_from(from, frames);
        self.tx_lent(frames)
    }

    /// Take over, lent now by this port, those of `frames` that `from` (a
    /// port sharing this port's UMEM) lent; returns how many. The others
    /// are left alone: a port on another UMEM gives none. What
    /// [`AfXdpPort::tx_lent_from`] does before it sends, for frames lent
    /// by several ports.
    pub fn take_lent_from(&mut self, from: &mut AfXdpPort, frames: &[LentFrame]) -> usize {
        if !self.same_umem(from) {
            return 0;
        }
        let (to, fr) = (&mut self.socks[0].q, &mut from.socks[0].q);
        let mut n = 0;
        for f in frames {
            if !to.is_lent(f.frame) && to.adopt_lent(fr, f.frame) {
                n += 1;
            }
        }
        n
    }

    /// Send `home`'s frames this port sent and completed back to it (to its
    /// free stack, and its fill ring at its next rx burst); returns how
    /// many. Call after a tx burst or [`AfXdpPort::reclaim_tx`].
    pub fn return_frames(&mut self, home: &mut AfXdpPort) -> usize {
        if !self.same_umem(home) {
            return 0;
        }
        self.socks[0].q.send_home(&mut home.socks[0].q) as usize
    }

    /// Whether `other` is on the same lent area (so shares the UMEM).
    fn same_umem(&self, other: &AfXdpPort) -> bool {
        match (self.lent_at, other.lent_at) {
            (Some(a), Some(b)) => (a.0, a.1) == (b.0, b.1),
            _ => false,
        }
    }

    /// This port's frames in its lent area (`None` on its own UMEM): the
    /// first, and one past the last.
    pub fn lent_frames(&self) -> Option<std::ops::Range<u32>> {
        let (_, _, end) = self.lent_at?;
        Some(end - self.lent_area.unwrap_or(0)..end)
    }
}
