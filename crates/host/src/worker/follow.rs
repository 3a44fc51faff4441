//! The worker following the CPU its light traffic arrives on.
//!
//! On veth (and on a NIC whose interrupt goes to one core) a frame's
//! receive, the XDP redirect into the port's socket and so the wakeup of a
//! worker sleeping on it run on the CPU that sent it (or took the
//! interrupt). A worker pinned elsewhere is woken by an interrupt to its
//! core, and its reply wakes the sender by an interrupt back (50-90 us
//! each on a VM whose vCPU halted); the kernel's own forwarding stays on
//! the sender's CPU. So, with [`vrhost_proto::PollConfig::follow_rx`],
//! before it sleeps the worker reads where its ports' receive ran since
//! its last sleep (an AF_XDP port's per-CPU redirect counter, one map read
//! per port) and, while its VRs are offered less than `colocate_pps`,
//! moves itself and the VRs on its core (`colocate`) to the CPU the frames
//! came from: one `sched_setaffinity` each per move, never per frame. It
//! goes back to its own core (`host.cpu`) when the VRs are offered twice
//! that. This module holds the counters and the choice; the worker moves.
//!
//! It moves only when two looks with frames in a row name the same other
//! CPU. A sender the scheduler places (an unpinned `ping` on veth) is
//! woken for its reply on the CPU that sent the reply, the worker's: had
//! the worker moved after the first look, the sender's next frame came
//! from the CPU the worker had just left, and the two swapped CPUs at
//! every frame, each wakeup an interrupt to the other core (traced
//! 2026-11-27). Left where it is, the worker draws such a sender to its
//! own core; a sender that stays put (a NIC's interrupt CPU) is followed
//! one look later.

use vrhost_io::Port;

use super::Worker;

/// CPUs whose receive counts are looked at (the kernel's per-CPU map has
/// one slot per possible CPU; those above this are not followed).
const CPUS: usize = 256;

/// Where the worker is, and the receive counts of its last look.
#[derive(Debug)]
pub(super) struct Follow {
    /// The worker's own core (`host.cpu`).
    home: usize,
    /// The core it runs on now.
    at: usize,
    /// Frames received per CPU at the last look, summed over the ports.
    seen: Vec<u64>,
    /// The other CPU the last look with frames named, if it named one: a
    /// second look naming it moves the worker there.
    named: Option<usize>,
    /// The counts read now (kept to read into without allocating).
    now: Vec<u64>,
}

impl Follow {
    /// A worker pinned to `home`.
    pub(super) fn new(home: usize) -> Self {
        Self {
            home,
            at: home,
            seen: vec![0; CPUS],
            now: vec![0; CPUS],
            named: None,
        }
    }

    /// The worker's own core.
    pub(super) fn home(&self) -> usize {
        self.home
    }

    /// The core the worker runs on now.
    pub(super) fn at(&self) -> usize {
        self.at
    }

    /// The worker now runs on `cpu`.
    pub(super) fn moved_to(&mut self, cpu: usize) {
        self.at = cpu;
        self.named = None;
    }

    /// Read the ports' receive counts; returns the CPU the frames received
    /// since the last look came from, if it is not the worker's and the
    /// last look with frames named it too (`None` also when no port can
    /// tell).
    pub(super) fn look(&mut self, ports: &[Box<dyn Port>]) -> Option<usize> {
        self.now.fill(0);
        let mut told = false;
        for p in ports {
            told |= p.rx_by_cpu(&mut self.now);
        }
        if !told {
            return None;
        }
        let seen = pick(&self.seen, &self.now, self.at);
        std::mem::swap(&mut self.seen, &mut self.now);
        self.decide(seen)
    }

    /// After a look that saw `seen`: the CPU to move to, if the last look
    /// with frames named the same one.
    fn decide(&mut self, seen: Seen) -> Option<usize> {
        match seen {
            Seen::Nothing => None,
            Seen::Here => {
                self.named = None;
                None
            }
            Seen::There(cpu) if self.named == Some(cpu) => Some(cpu),
            Seen::There(cpu) => {
                self.named = Some(cpu);
                None
            }
        }
    }
}

impl Worker {
    /// Before a sleep: if the frames since the last sleep came from
    /// another CPU and the VRs are offered less than `colocate_pps`, move
    /// the worker and the VRs on its core there.
    pub(super) fn follow_rx(&mut self) {
        let Some(f) = self.follow.as_mut() else {
            return;
        };
        let Some(cpu) = f.look(&self.ports) else {
            return;
        };
        if self.offered_pps() < u64::from(self.poll.colocate_pps) {
            self.move_to(cpu);
        }
    }

    /// When the VRs are supervised: back to its own core once they are
    /// offered twice `colocate_pps` (while lighter, the worker stays where
    /// it followed its frames).
    pub(super) fn follow_home(&mut self) {
        let Some(f) = self.follow.as_ref() else {
            return;
        };
        let home = f.home();
        if f.at() != home && self.offered_pps() > 2 * u64::from(self.poll.colocate_pps) {
            self.move_to(home);
        }
    }

    /// Frames/s the VRs are offered, as last sampled.
    fn offered_pps(&self) -> u64 {
        self.vrs.iter().map(|v| v.stats().arrival_pps.get()).sum()
    }

    /// Pin the worker to `cpu` and take the VRs on its core with it. A
    /// worker that cannot move (a cpuset without `cpu`) stays.
    fn move_to(&mut self, cpu: usize) {
        if let Err(e) = crate::cpu::pin_current_thread(cpu) {
            tracing::debug!("worker: not moved to CPU {cpu}: {e}");
            return;
        }
        if let Some(f) = self.follow.as_mut() {
            f.moved_to(cpu);
        }
        if let Some(c) = self.colocate.as_mut() {
            self.stats.colocations.add(c.retarget(cpu));
        }
        self.stats.follows.add(1);
    }
}

/// What one look saw (see [`pick`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// No frame received since the last look.
    Nothing,
    /// Most frames received on the worker's own CPU.
    Here,
    /// Most frames (at least as many as on the worker's) received on
    /// this other CPU.
    There(usize),
}

/// The CPU other than `at` on which the most frames were received between
/// counts `seen` and `now`, if any were and at least as many as on `at`.
/// Frames received on the worker's own core while it sent (the replies
/// its own transmit brings back, whose receive runs inside its `sendto`)
/// are no reason to stay: a ping's request from another CPU and its reply
/// on the worker's one tie, and the tie moves it.
fn pick(seen: &[u64], now: &[u64], at: usize) -> Seen {
    let grew = |c: usize| now[c].saturating_sub(seen[c]);
    let own = if at < now.len() { grew(at) } else { 0 };
    let other = (0..now.len().min(seen.len()))
        .filter(|&c| c != at)
        .map(|c| (c, grew(c)))
        .max_by_key(|&(c, n)| (n, std::cmp::Reverse(c)));
    match other {
        Some((cpu, n)) if n > 0 && n >= own => Seen::There(cpu),
        _ if own > 0 => Seen::Here,
        _ => Seen::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::{Follow, Seen, pick};

    #[test]
    fn frames_from_another_cpu_name_it() {
        // A ping's request received on CPU 0, its reply on the worker's 1.
        assert_eq!(pick(&[5, 5, 0], &[6, 6, 0], 1), Seen::There(0));
        // Once there, both arrive there.
        assert_eq!(pick(&[6, 6, 0], &[8, 6, 0], 0), Seen::Here);
        // Most frames on its own core.
        assert_eq!(pick(&[0, 0, 0], &[1, 3, 0], 1), Seen::Here);
        // The busiest other CPU; the lowest of equals.
        assert_eq!(pick(&[0, 0, 0, 0], &[1, 0, 4, 4], 1), Seen::There(2));
        // Nothing received.
        assert_eq!(pick(&[3, 3], &[3, 3], 0), Seen::Nothing);
        // A counter that went back (a port replaced): not a frame.
        assert_eq!(pick(&[9, 0], &[2, 0], 1), Seen::Nothing);
        // The worker on a CPU the counts do not cover.
        assert_eq!(pick(&[0, 0], &[0, 2], 7), Seen::There(1));
    }

    #[test]
    fn a_sender_that_stays_put_is_followed_at_the_second_look() {
        let mut f = Follow::new(1);
        assert_eq!(f.decide(Seen::There(0)), None);
        // Sleeps that saw nothing in between (pings a second apart, the
        // worker's sleeps shorter) do not forget it.
        assert_eq!(f.decide(Seen::Nothing), None);
        assert_eq!(f.decide(Seen::There(0)), Some(0));
        f.moved_to(0);
        assert_eq!(f.decide(Seen::Here), None);
        // Another CPU later: again two looks.
        assert_eq!(f.decide(Seen::There(1)), None);
        assert_eq!(f.decide(Seen::There(1)), Some(1));
    }

    #[test]
    fn a_sender_drawn_to_the_worker_s_core_does_not_move_it() {
        // The first frame from CPU 0; the reply woke the sender on the
        // worker's core 1, and its next frames come from there.
        let mut f = Follow::new(1);
        assert_eq!(f.decide(Seen::There(0)), None);
        assert_eq!(f.decide(Seen::Here), None);
        assert_eq!(f.decide(Seen::There(0)), None, "named once since");
        assert_eq!(f.decide(Seen::Here), None);
        // Two CPUs in turn name neither.
        let mut g = Follow::new(2);
        assert_eq!(g.decide(Seen::There(0)), None);
        assert_eq!(g.decide(Seen::There(1)), None);
        assert_eq!(g.decide(Seen::There(0)), None);
    }
}
