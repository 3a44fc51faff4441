//! Moving lightly loaded VRs onto the worker's core, and back.
//!
//! Waking a VR that sleeps on another core takes an interrupt to that core
//! (50-90 us on a VM whose vCPU halted); waking one on the worker's own core
//! is a local switch, taken when the worker naps or sleeps. So an unpinned
//! VR whose arrival rate is below [`vrhost_proto::PollConfig::colocate_pps`]
//! runs on the worker's core, and one above twice that goes back to the
//! affinity it had (the daemon keeps VR processes off the worker's core),
//! where it no longer takes the worker's time. Pinned VRs are never moved.
//! The decision is taken when the worker supervises its VRs (every
//! [`super::REAP_EVERY`] while busy, after each sleep's timeout while idle),
//! on the load estimate sampled then; a move is one `sched_setaffinity`.

use rustix::process::Pid;
use rustix::thread::CpuSet;

use crate::spawn::VrProcess;

/// The processes moved onto the worker's core, with where they came from.
#[derive(Debug)]
pub(super) struct Colocate {
    cpu: usize,
    below_pps: u64,
    /// (pid, its affinity before the move, seen in this sweep).
    moved: Vec<(u32, CpuSet, bool)>,
    /// Processes whose affinity could not be changed (a cpuset that
    /// excludes the worker's core): not tried again.
    refused: Vec<(u32, bool)>,
}

impl Colocate {
    /// Move VRs below `below_pps` onto `cpu`.
    pub(super) fn new(cpu: usize, below_pps: u32) -> Self {
        Self {
            cpu,
            below_pps: below_pps.into(),
            moved: Vec::new(),
            refused: Vec::new(),
        }
    }

    /// Start a sweep: what [`Colocate::place`] does not see until
    /// [`Colocate::end`] is forgotten (its process is gone).
    pub(super) fn begin(&mut self) {
        self.moved.iter_mut().for_each(|m| m.2 = false);
        self.refused.iter_mut().for_each(|r| r.1 = false);
    }

    /// Forget the processes the sweep did not see.
    pub(super) fn end(&mut self) {
        self.moved.retain(|m| m.2);
        self.refused.retain(|r| r.1);
    }

    /// Place the running, unpinned processes of a VR offered `pps`
    /// frames/s; returns how many moved.
    pub(super) fn place(&mut self, procs: &[VrProcess], pps: u64) -> u64 {
        let pids = procs.iter().filter(|p| !p.reaped && !p.pinned());
        self.place_pids(pids.map(VrProcess::pid), pps)
    }

    /// Place the processes `pids` of a VR offered `pps` frames/s.
    fn place_pids(&mut self, pids: impl Iterator<Item = u32>, pps: u64) -> u64 {
        let mut n = 0;
        for pid in pids {
            if let Some(r) = self.refused.iter_mut().find(|r| r.0 == pid) {
                r.1 = true;
                continue;
            }
            match self.moved.iter().position(|m| m.0 == pid) {
                Some(i) if pps > 2 * self.below_pps => {
                    let (_, home, _) = self.moved.swap_remove(i);
                    // A process that cannot go back stays where it is (and
                    // is tried again next sweep).
                    match set_affinity(pid, &home) {
                        Ok(()) => n += 1,
                        Err(_) => self.moved.push((pid, home, true)),
                    }
                }
                Some(i) => self.moved[i].2 = true,
                None if pps < self.below_pps => match self.move_here(pid) {
                    Ok(home) => {
                        self.moved.push((pid, home, true));
                        n += 1;
                    }
                    Err(_) => self.refused.push((pid, true)),
                },
                None => {}
            }
        }
        n
    }

    /// The worker now runs on `cpu` (it followed its frames there, or went
    /// home): the processes moved onto its core go with it. Returns how
    /// many moved (one that cannot is left where it is).
    pub(super) fn retarget(&mut self, cpu: usize) -> u64 {
        if cpu == self.cpu {
            return 0;
        }
        self.cpu = cpu;
        let mut here = CpuSet::new();
        here.set(cpu);
        let moved = self
            .moved
            .iter()
            .filter(|m| set_affinity(m.0, &here).is_ok());
        moved.count() as u64
    }

    /// Whether process `pid` was moved onto the worker's core (and is
    /// there now, or follows it: see [`Colocate::retarget`]).
    pub(super) fn holds(&self, pid: u32) -> bool {
        self.moved.iter().any(|m| m.0 == pid)
    }

    /// Whether any process is on the worker's core.
    pub(super) fn any(&self) -> bool {
        !self.moved.is_empty()
    }

    /// Pin `pid` to the worker's core; returns its affinity before.
    fn move_here(&self, pid: u32) -> rustix::io::Result<CpuSet> {
        let home = rustix::thread::sched_getaffinity(Some(to_pid(pid)?))?;
        let mut here = CpuSet::new();
        here.set(self.cpu);
        set_affinity(pid, &here)?;
        Ok(home)
    }
}

fn to_pid(pid: u32) -> rustix::io::Result<Pid> {
    i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or(rustix::io::Errno::SRCH)
}

fn set_affinity(pid: u32, set: &CpuSet) -> rustix::io::Result<()> {
    rustix::thread::sched_setaffinity(Some(to_pid(pid)?), set)
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};

    use super::Colocate;

    /// The CPUs a process may run on, as /proc shows them.
    fn allowed(pid: u32) -> String {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap();
        line.split_whitespace().nth(1).unwrap().to_string()
    }

    /// Kills its child on drop, so a failed test leaves no process.
    struct Kid(Child);

    impl Drop for Kid {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_light_process_moves_to_the_workers_core_and_back_when_loaded() {
        let kid = Kid(Command::new("sleep").arg("30").spawn().unwrap());
        let pid = kid.0.id();
        let home = allowed(pid);
        let cpu = crate::cpu::cpus() - 1;
        let mut c = Colocate::new(cpu, 1000);
        let sweep = |c: &mut Colocate, pps| {
            c.begin();
            let n = c.place_pids([pid].into_iter(), pps);
            c.end();
            n
        };
        assert_eq!(sweep(&mut c, 10), 1, "light: moved");
        assert_eq!(allowed(pid), cpu.to_string());
        assert!(c.holds(pid) && c.any());
        assert!(!c.holds(pid + 1));
        // Between the thresholds nothing moves; nor while still light.
        assert_eq!(sweep(&mut c, 1500), 0);
        assert_eq!(sweep(&mut c, 0), 0);
        assert_eq!(allowed(pid), cpu.to_string());
        // The worker follows its frames to another core: the process too.
        let other = cpu.saturating_sub(1);
        assert_eq!(c.retarget(other), u64::from(other != cpu));
        assert_eq!(allowed(pid), other.to_string());
        assert_eq!(c.retarget(other), 0, "already there");
        assert_eq!(sweep(&mut c, 2001), 1, "loaded: moved back");
        assert_eq!(allowed(pid), home);
        assert!(!c.holds(pid) && !c.any());
        assert_eq!(sweep(&mut c, 2001), 0);
        // A process the sweep no longer sees is forgotten.
        assert_eq!(sweep(&mut c, 10), 1);
        c.begin();
        c.end();
        assert!(c.moved.is_empty());
    }

    #[test]
    fn a_gone_process_is_refused_once_and_not_tried_again() {
        let mut kid = Kid(Command::new("true").spawn().unwrap());
        kid.0.wait().unwrap();
        let pid = kid.0.id();
        let mut c = Colocate::new(0, 1000);
        c.begin();
        assert_eq!(c.place_pids([pid].into_iter(), 0), 0);
        assert_eq!(c.refused.len(), 1);
        assert_eq!(c.place_pids([pid].into_iter(), 0), 0);
        c.end();
        assert_eq!(c.refused.len(), 1, "seen in this sweep");
        c.begin();
        c.end();
        assert!(c.refused.is_empty());
    }
}
