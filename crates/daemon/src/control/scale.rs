//! Scaling a VR's instances while it runs (LVRM's dynamic policy), and
//! collecting what retired instances and drained VRs leave behind.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use vrhost_host::worker::DRAIN_TIMEOUT;
use vrhost_host::{InstanceState, VrPath, Worker};
use vrhost_router::RouteConfig;

use super::{ControlError, Controller, ScaleChange, Start, VrEntry, WORKER_TIMEOUT, send_routes};

impl Controller {
    /// One decision for every VR whose instance count can change (more
    /// than one instance slot) and whose scaling period is up: its scaler
    /// gets the VR's arrival rate since the last decision, then one
    /// instance is started or retired (fixed VRs: started again where one
    /// exited). Instances that are gone first give back their cores and
    /// control sockets. A VR that is down is left to the supervisor.
    /// Returns the changes made; a refusal (no core, a process that does
    /// not start) is counted (`instances_refused`) and logged.
    ///
    /// # Errors
    /// The worker did not answer.
    pub fn scale_tick(&mut self) -> Result<Vec<ScaleChange>, ControlError> {
        let now = Instant::now();
        let due: Vec<(usize, u64)> = (self.plan.vrs.iter().enumerate())
            .filter_map(|(i, v)| {
                let e = self.vrs.get(&v.name).filter(|e| e.slots > 1)?;
                (now.duration_since(e.decided.0) >= e.scaler.period()).then_some((i, e.id))
            })
            .collect();
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<u64> = due.iter().map(|d| d.1).collect();
        let states = self.mailbox.call(WORKER_TIMEOUT, move |w: &mut Worker| {
            let find = |id| w.vrs().iter().find(|v| v.id() == id);
            let of = |v: &VrPath| (v.is_up(), v.instance_states());
            ids.into_iter()
                .map(|id| find(id).map(of))
                .collect::<Vec<_>>()
        })?;
        let mut changes = Vec::new();
        for ((i, id), st) in due.into_iter().zip(states) {
            let Some((up, states)) = st else {
                continue;
            };
            let name = self.plan.vrs[i].name.clone();
            let mut e = self.vrs.remove(&name).expect("due VRs have an entry");
            let change = self.scale_vr(i, &mut e, id, up, &states, now);
            self.vrs.insert(name, e);
            changes.extend(change?);
        }
        Ok(changes)
    }

    /// [`Controller::scale_tick`] for VR `i` of the plan (its entry `e`,
    /// taken out of the map meanwhile).
    pub(super) fn scale_vr(
        &mut self,
        i: usize,
        e: &mut VrEntry,
        id: u64,
        up: bool,
        states: &[InstanceState],
        now: Instant,
    ) -> Result<Option<ScaleChange>, ControlError> {
        let vr = &self.plan.vrs[i];
        let offered = e.stats.rx_packets.get() + e.stats.ingress_drops_total();
        let dt = now.duration_since(e.decided.0);
        let rate_pps = offered.wrapping_sub(e.decided.1) as f64 / dt.as_secs_f64().max(1e-3);
        e.decided = (now, offered);
        if !up {
            return Ok(None);
        }
        for (slot, _) in (0u16..)
            .zip(states)
            .filter(|(_, s)| **s == InstanceState::Off)
        {
            if e.placed {
                self.cores.give_back(&vr.name, slot);
            }
            e.controls.remove(&slot);
        }
        let live = states.iter().filter(|s| **s == InstanceState::Live).count() as u16;
        let want = e.scaler.tick(rate_pps, dt, live);
        let change = ScaleChange {
            vr: vr.name.clone(),
            from: live,
            to: want,
            rate_pps,
        };
        if want < live {
            let slot = states.iter().rposition(|s| *s == InstanceState::Live);
            let slot = slot.expect("live > 0") as u16;
            let retire = move |w: &mut Worker| {
                let v = w.vrs_mut().iter_mut().find(|v| v.id() == id);
                v.is_some_and(|v| v.retire_instance(slot))
            };
            if !self.mailbox.call(WORKER_TIMEOUT, retire)? {
                return Ok(None);
            }
            e.stats.instances_retired.add(1);
            tracing::info!(vr = %vr.name, instance = slot, rate_pps, "instance retired");
            return Ok(Some(change));
        }
        if want == live {
            return Ok(None);
        }
        let Some(slot) = states.iter().position(|s| *s == InstanceState::Off) else {
            return Ok(None);
        };
        let slot = slot as u16;
        match self.add_instance(i, e, id, slot) {
            Ok(()) => {
                e.stats.instances_added.add(1);
                tracing::info!(vr = %change.vr, instance = slot, rate_pps, "instance started");
                Ok(Some(change))
            }
            Err(ControlError::Unavailable(m)) => Err(ControlError::Unavailable(m)),
            Err(err) => {
                e.stats.instances_refused.add(1);
                self.cores.give_back(&change.vr, slot);
                tracing::warn!(vr = %change.vr, instance = slot, rate_pps, "instance not started: {err}");
                Ok(None)
            }
        }
    }

    /// Start instance `slot` of VR `i` of the plan (entry `e`, worker id
    /// `id`) on a core, give it the VR's API routes and have the worker
    /// feed it.
    pub(super) fn add_instance(
        &mut self,
        i: usize,
        e: &mut VrEntry,
        id: u64,
        slot: u16,
    ) -> Result<(), ControlError> {
        let vr = &self.plan.vrs[i];
        let cpu = if e.placed {
            let cpu = self.cores.take(&vr.name, slot);
            Some(cpu.map_err(|err| ControlError::Conflict(err.to_string()))?)
        } else {
            vr.instance_cpus.get(usize::from(slot)).copied().flatten()
        };
        let (p, bell, control) =
            self.start_instance(&self.plan, vr, &e.region, slot, cpu, Start::Urgent)?;
        let mut controls = BTreeMap::from([(slot, control)]);
        if !e.api_routes.is_empty() {
            let add: Vec<RouteConfig> = e.api_routes.values().cloned().collect();
            send_routes(&mut controls, &vr.name, &add, &[])
                .map_err(|err| ControlError::Internal(err.to_string()))?;
        }
        let add = move |w: &mut Worker| match w.vrs_mut().iter_mut().find(|v| v.id() == id) {
            Some(v) => v.add_instance(p, bell),
            None => Err(Box::new((p, bell))),
        };
        if let Err(refused) = self.mailbox.call(WORKER_TIMEOUT, add)? {
            let (mut p, _) = *refused;
            p.stop();
            return Err(ControlError::Conflict(
                "the worker refused it (the VR went down)".into(),
            ));
        }
        e.controls.extend(controls);
        Ok(())
    }

    /// Stop the VRs the worker has finished draining (waits for them up to
    /// the drain timeout).
    pub(super) fn reap_drained(&mut self) -> Result<(), ControlError> {
        let until = Instant::now() + DRAIN_TIMEOUT + Duration::from_millis(200);
        loop {
            let (done, left) = self.mailbox.call(WORKER_TIMEOUT, |w: &mut Worker| {
                (w.take_drained(), w.draining())
            })?;
            // Stopping a process waits for it: done here, not in the worker.
            for mut vr in done {
                vr.shutdown();
            }
            if left == 0 || Instant::now() >= until {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
