//! Starting a VR: its region, its instances' processes on their cores,
//! and the command each is started with.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use vrhost_host::alloc::Scaler;
use vrhost_host::config::{Plan, VrPlan};
use vrhost_host::{Backend, PathSpec, VrCommand, VrControl, VrPath, VrProcess};
use vrhost_proto::PollConfig;
use vrhost_router::RouteConfig;
use vrhost_shm::{Doorbell, Region};

use super::{ControlError, Controller, Instances, Started, VrEntry, send_routes};

/// The back-off of a VR instance on `cpu` (`None`: unpinned), with the
/// worker on `worker_cpu` and `sharers` instances pinned to `cpu` in the
/// config.
///
/// A VR on the worker's core sleeps as soon as its rings are empty (the
/// worker never yields); one on a core that only VRs share ends its turn
/// as `[host.poll] turns` says ([`PollConfig::beside_vrs`]: by default it
/// yields to them first); one on a core of its own spins first. An unpinned VR sleeps at
/// once too, because what else runs where it runs is not known. Yielding
/// there was tried (2026-11-24): two busy `mem` VRs beside a worker on CPU
/// 1 went from 13.6 to 20-23.5 Mfps (sleeping, they cost the worker a
/// doorbell write per burst, 38% of its time in the kernel), but in `bench
/// forward`, where the generator shares that core, `af_xdp` fell from
/// 1.28-1.31 to 1.04-1.05 Mpps and TCP from 4.6-5.0 to 4.1-4.2 Gbit/s.
/// Pin VRs that share a core (`cpu`) to get the yielding.
pub(super) fn instance_poll(
    poll: PollConfig,
    cpu: Option<usize>,
    worker_cpu: Option<usize>,
    sharers: usize,
) -> PollConfig {
    match cpu {
        None => poll.beside_worker(),
        Some(c) if Some(c) == worker_cpu => poll.beside_worker(),
        Some(_) if sharers > 1 => poll.beside_vrs(),
        Some(_) => poll,
    }
}

/// Why a VR process starts, which decides how it shares its core while it
/// does (see [`VrCommand::idle_start`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Start {
    /// An operator's change (config, API): on the time its core's VRs
    /// leave, for up to `[host] start_idle_ms`, so they lose nothing to it.
    Change,
    /// A VR that went down, or an instance its load asks for: at once.
    Urgent,
}

impl Controller {
    /// Start one VR (region, process) and give it `routes`.
    pub(super) fn start_vr(
        &mut self,
        plan: &Plan,
        vr: &VrPlan,
        routes: &BTreeMap<(u32, u8), RouteConfig>,
    ) -> Result<Started, ControlError> {
        let spec = PathSpec {
            pages: plan.host.hugepages,
            ..vr.path_spec()
        };
        let region = spec
            .create_region()
            .map_err(|e| ControlError::Internal(format!("VR {}: region: {e}", vr.name)))?;
        let cpus = self.first_cores(vr, vr.placed)?;
        let (procs, bells, controls) =
            self.start_instances(plan, vr, &region, &cpus, Start::Change)?;
        let second = region
            .fd()
            .try_clone_to_owned()
            .map_err(|e| e.to_string())
            .and_then(|fd| Region::attach(fd).map_err(|e| e.to_string()))
            .map_err(|e| ControlError::Internal(format!("VR {}: region: {e}", vr.name)))?;
        let path = VrPath::assemble(&spec, region, Backend::Process(procs), bells);
        let mut entry = VrEntry {
            id: path.id(),
            region: second,
            stats: path.stats().clone(),
            controls,
            api_routes: BTreeMap::new(),
            slots: vr.instance_slots(),
            placed: vr.placed,
            scaler: Scaler::new(vr.scale).map_err(|e| ControlError::Invalid(e.to_string()))?,
            decided: (Instant::now(), 0),
            control: None,
        };
        if !routes.is_empty() {
            let add: Vec<RouteConfig> = routes.values().cloned().collect();
            send_routes(&mut entry.controls, &vr.name, &add, &[]).map_err(|e| match e {
                ControlError::Invalid(m) => ControlError::Invalid(format!(
                    "VR {}: its API routes do not fit the new definition: {m}",
                    vr.name
                )),
                other => other,
            })?;
            entry.api_routes = routes.clone();
        }
        entry.control = self.control_for(vr, &mut entry)?;
        Ok(Started { path, entry })
    }

    /// The control plane of `vr`, for its new `entry` (a new VR, or a new
    /// definition of one). A changed VR whose old definition runs the same
    /// control plane keeps it: `None` here, the new process given its
    /// routes, and the running one moved to the new entry once the change
    /// is in ([`Controller::inherit_control`]), so a change that fails
    /// leaves it where it was. Otherwise the old one (if any) is stopped
    /// first (one routing daemon per namespace) and a new one started.
    fn control_for(
        &mut self,
        vr: &VrPlan,
        entry: &mut VrEntry,
    ) -> Result<Option<crate::cplane::ControlPlane>, ControlError> {
        let Some(plan) = &vr.control else {
            return Ok(None);
        };
        let old = self.vrs.get_mut(&vr.name).and_then(|e| e.control.as_ref());
        if let Some(cp) = old.filter(|cp| cp.plan() == plan) {
            let add: Vec<RouteConfig> = cp.routes().values().cloned().collect();
            if !add.is_empty() {
                send_routes(&mut entry.controls, &vr.name, &add, &[])?;
            }
            return Ok(None);
        }
        drop(self.vrs.get_mut(&vr.name).and_then(|e| e.control.take()));
        let cp = crate::cplane::ControlPlane::start(vr, plan).map_err(ControlError::Invalid)?;
        Ok(Some(cp))
    }

    /// Move the control plane of the running entry of VR `name` to its
    /// new entry `e`, when `e` has none and the new `plan` wants one (see
    /// `control_for`).
    pub(super) fn inherit_control(&mut self, plan: &Plan, name: &str, e: &mut VrEntry) {
        let wants = (plan.vrs.iter()).any(|v| v.name == name && v.control.is_some());
        if e.control.is_some() || !wants {
            return;
        }
        e.control = self.vrs.get_mut(name).and_then(|old| old.control.take());
    }

    /// The core of each instance `vr` starts with (slots `0..instances`):
    /// held from the host's budget for a placed VR (which gives back any
    /// other), as the config pins them otherwise.
    pub(super) fn first_cores(
        &mut self,
        vr: &VrPlan,
        placed: bool,
    ) -> Result<Vec<Option<usize>>, ControlError> {
        if !placed {
            return Ok(vr
                .instance_cpus
                .iter()
                .take(vr.instances.into())
                .copied()
                .collect());
        }
        let held = self.cores.hold_first(&vr.name, vr.instances).map_err(|e| {
            ControlError::Conflict(format!(
                "VR {}: cores for its instances: {e} (scaled VRs hold cores above their minimum)",
                vr.name
            ))
        })?;
        Ok(held.into_values().map(Some).collect())
    }

    /// Start instances `0..` of `vr` on `region`, one per entry of `cpus`
    /// (its core), and return them (see [`Instances`]). On an error the
    /// ones started are dropped (killed).
    pub(super) fn start_instances(
        &self,
        plan: &Plan,
        vr: &VrPlan,
        region: &Region,
        cpus: &[Option<usize>],
        how: Start,
    ) -> Result<Instances, ControlError> {
        let mut out = (Vec::new(), Vec::new(), BTreeMap::new());
        for (k, &cpu) in cpus.iter().enumerate() {
            let (p, bell, control) = self.start_instance(plan, vr, region, k as u16, cpu, how)?;
            out.0.push(p);
            out.1.push(bell);
            out.2.insert(k as u16, control);
        }
        Ok(out)
    }

    /// Start instance `k` of `vr` on `region`, on `cpu`.
    pub(super) fn start_instance(
        &self,
        plan: &Plan,
        vr: &VrPlan,
        region: &Region,
        k: u16,
        cpu: Option<usize>,
        how: Start,
    ) -> Result<(VrProcess, Doorbell, VrControl), ControlError> {
        let cmd = self.vr_command(plan, vr, cpu, how);
        let (p, bell) = VrProcess::start(&vr.name, k, region, &self.host_bell, &cmd)
            .map_err(|e| ControlError::Invalid(e.to_string()))?;
        let control = p
            .control()
            .map_err(|e| ControlError::Internal(format!("VR {}: {e}", vr.name)))?;
        Ok((p, bell, control))
    }

    /// How to start an instance of `vr` on `cpu`.
    pub(super) fn vr_command(
        &self,
        plan: &Plan,
        vr: &VrPlan,
        cpu: Option<usize>,
        how: Start,
    ) -> VrCommand {
        let (program, args) = match &vr.program {
            Some((p, a)) => (p.clone(), a.clone()),
            None => (self.exe.clone(), vec!["vr-run".to_string()]),
        };
        let sharers = plan
            .vrs
            .iter()
            .flat_map(|v| &v.instance_cpus)
            .filter(|&&c| c.is_some() && c == cpu)
            .count();
        let poll = instance_poll(plan.host.poll, cpu, plan.host.cpu, sharers);
        VrCommand {
            program,
            args,
            cpu,
            poll,
            config: vr.config.clone(),
            ready_timeout: Duration::from_secs(60),
            idle_start: match how {
                Start::Change => Duration::from_millis(plan.host.start_idle_ms),
                Start::Urgent => Duration::ZERO,
            },
            confine: vr.confine.clone(),
            hurry: self.hurry.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use vrhost_proto::Turns;

    use super::*;

    #[test]
    pub(super) fn instances_back_off_by_what_shares_their_core() {
        let p = PollConfig {
            busy_poll_us: 100_000,
            nap_us: 50,
            ..PollConfig::default()
        };
        let at = |cpu, worker, sharers| instance_poll(p, cpu, worker, sharers);
        let worker = p.beside_worker();
        assert_eq!(at(Some(1), Some(1), 1), worker, "on the worker's core");
        assert_eq!(at(None, None, 0), worker, "anywhere, worker too");
        assert_eq!(at(None, Some(1), 0), worker, "unpinned: co-runners unknown");
        assert_eq!(at(Some(0), Some(1), 2), p.beside_vrs(), "a core VRs share");
        assert_eq!(at(Some(0), Some(1), 1), p, "a core of its own");
        assert_ne!(p.beside_vrs(), p.beside_worker());
        // Only a VR with a core of its own busy-polls for `busy_poll_us`.
        assert_eq!(at(Some(0), Some(1), 1).busy_poll_us, 100_000);
        for shared in [
            at(Some(0), Some(1), 2),
            at(None, Some(1), 0),
            at(Some(1), Some(1), 1),
        ] {
            assert_eq!(shared.busy_poll_us, 0, "{shared:?}");
            assert_eq!(shared.nap_us, 0, "only a core of its own naps: {shared:?}");
        }
        // Beside other VRs, by `turns`: a short yield, sleeping at once, or
        // spinning for `turn_us` (never for `busy_poll_us`).
        let beside = |turns| instance_poll(PollConfig { turns, ..p }, Some(0), Some(1), 2);
        let shape = |q: PollConfig| (q.spin_rounds, q.yield_us, q.busy_poll_us, q.nap_us);
        assert_eq!(shape(beside(Turns::Yield)), (0, 50, 0, 0));
        assert_eq!(shape(beside(Turns::Sleep)), (0, 0, 0, 0));
        assert_eq!(shape(beside(Turns::Spin)), (0, 0, p.turn_us, 0));
    }
}
