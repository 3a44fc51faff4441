//! Routes from a control namespace's kernel table to its VR: a thread per
//! watch takes the watch's batches (everything waiting at once), takes
//! the controller and sends the net change per prefix to every instance
//! of the VR as route changes, the messages API routes use
//! (`control/routes.rs`), at most [`SLICE`] of them per hold of the
//! controller's lock (a full table in slices: the supervisor restarting
//! a VR that went down, or an API call, waits for one slice, not for the
//! table); the routes are kept with the control plane, given again to
//! the VR when it restarts, and listed with origin `control-plane`.
//!
//! The thread reaches the controller through a [`SyncHook`] the daemon
//! sets once the controller is shared; the controller never waits for
//! the thread (it only stops the watch, which ends the thread), so a
//! thread waiting for the controller's lock cannot deadlock it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::Instant;

use vrhost_netlink::{RouteBatch, RouterSync};
use vrhost_proto::CONTROL_CHUNK;
use vrhost_router::RouteConfig;

use super::{ControlPlane, Tick};
use crate::control::{ControlError, Controller};

/// Runs a function on the controller, under its lock; false once the
/// daemon is gone.
pub type SyncHook = Arc<dyn Fn(&mut dyn FnMut(&mut Controller)) -> bool + Send + Sync>;

/// What the VR was sent for one sync: adds and deletes.
type Change = (Vec<RouteConfig>, Vec<String>);

/// Route changes sent to the VR under one hold of the controller's lock
/// (a full table comes in many: a VR that goes down meanwhile, or an API
/// call, waits for one slice, not for the whole table).
const SLICE: usize = 8 * CONTROL_CHUNK;

/// What [`Controller::apply_control`] leaves to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The watch is no longer current: the thread stops.
    Stop,
    /// Everything sent.
    Done,
    /// More changes wait: call again (after letting go of the lock).
    More,
}

/// Add `batches`, converted by `sync`, to `unsent`: per prefix the last
/// word (a route, or a withdrawal).
fn merge(
    sync: &mut RouterSync,
    unsent: &mut BTreeMap<String, Option<RouteConfig>>,
    batches: &[RouteBatch],
) {
    for b in batches {
        let ch = sync.convert(b);
        for p in ch.del {
            unsent.insert(p, None);
        }
        for r in ch.add {
            unsent.insert(r.prefix.clone(), Some(r));
        }
    }
}

/// Take up to `n` changes of `unsent` that change what the VR holds from
/// the control plane (`routes`): new or changed routes, withdrawals of
/// routes it holds.
fn take_slice(
    unsent: &mut BTreeMap<String, Option<RouteConfig>>,
    routes: &BTreeMap<String, RouteConfig>,
    n: usize,
) -> Change {
    let mut change: Change = (Vec::new(), Vec::new());
    while change.0.len() + change.1.len() < n {
        let Some((p, r)) = unsent.pop_first() else {
            break;
        };
        match r {
            Some(r) if routes.get(&p) != Some(&r) => change.0.push(r),
            None if routes.contains_key(&p) => change.1.push(p),
            _ => {}
        }
    }
    change
}

impl Controller {
    /// Let the control planes' sync threads reach the controller, and
    /// start those of the control planes already running.
    pub fn set_sync_hook(&mut self, hook: SyncHook) {
        self.sync_hook = Some(hook);
        let names: Vec<String> = self.vrs.keys().cloned().collect();
        for n in names {
            self.spawn_sync(&n);
        }
    }

    /// Start the sync thread of VR `vr`'s control plane's current watch,
    /// if it has one waiting and the hook is set.
    pub(crate) fn spawn_sync(&mut self, vr: &str) {
        let Some(hook) = self.sync_hook.clone() else {
            return;
        };
        let Some(cp) = self.vrs.get_mut(vr).and_then(|e| e.control.as_mut()) else {
            return;
        };
        let Some(rx) = cp.pending.take() else { return };
        let (name, token) = (vr.to_string(), cp.token);
        let spawned = std::thread::Builder::new()
            .name(format!("vrhost-sync-{vr}"))
            .spawn(move || sync_thread(&name, token, &rx, &hook));
        if let Err(e) = spawned {
            tracing::error!(vr, "control plane route sync: cannot start its thread: {e}");
        }
    }

    /// Take `batches` of VR `vr`'s control plane's watch `token`, and send
    /// the VR a slice of what waits.
    fn apply_control(&mut self, vr: &str, token: u64, batches: &[RouteBatch]) -> Step {
        let Some(e) = self.vrs.get_mut(vr) else {
            return Step::Stop;
        };
        let Some(cp) = e.control.as_mut() else {
            return Step::Stop;
        };
        if cp.token != token {
            return Step::Stop;
        }
        merge(&mut cp.sync, &mut cp.unsent, batches);
        let (add, del) = take_slice(&mut cp.unsent, &cp.routes, SLICE);
        let more = match cp.unsent.is_empty() {
            true => Step::Done,
            false => Step::More,
        };
        if add.is_empty() && del.is_empty() {
            return more;
        }
        let t = Instant::now();
        // One message each (no dry run: the VR checks a message whole,
        // and the routes of different messages do not depend on each
        // other), deletes first.
        for c in del.chunks(CONTROL_CHUNK) {
            send_chunk(cp, &mut e.controls, vr, Vec::new(), c.to_vec());
        }
        for c in add.chunks(CONTROL_CHUNK) {
            send_chunk(cp, &mut e.controls, vr, c.to_vec(), Vec::new());
        }
        tracing::debug!(
            vr,
            ms = t.elapsed().as_secs_f64() * 1e3,
            "control plane routes synced"
        );
        more
    }

    /// Stop every control plane and remove its namespace (the daemon
    /// stops).
    pub fn stop_control_planes(&mut self) {
        for e in self.vrs.values_mut() {
            if let Some(mut cp) = e.control.take() {
                cp.stop();
                super::netns::remove(&cp.plan().netns);
            }
        }
    }

    /// The control plane of VR `name`, if it has one.
    pub fn control_plane(&self, name: &str) -> Option<&ControlPlane> {
        self.vrs.get(name)?.control.as_ref()
    }

    /// Restart the control planes that went down, withdraw the routes of
    /// those down past their hold time (the supervisor's tick).
    pub fn control_tick(&mut self) {
        let now = Instant::now();
        let mut resynced = Vec::new();
        for (name, e) in self.vrs.iter_mut() {
            let Some(cp) = e.control.as_mut() else {
                continue;
            };
            match cp.tick(now) {
                Tick::HoldExpired => {
                    let del: Vec<String> = cp.routes.keys().cloned().collect();
                    tracing::warn!(vr = %name, routes = del.len(), "control plane down past its hold time: its routes are withdrawn");
                    if let Err(err) = crate::control::send_routes(&mut e.controls, name, &[], &del)
                    {
                        tracing::warn!(vr = %name, "withdrawing control plane routes: {err}");
                    }
                    cp.routes.clear();
                }
                Tick::Resynced => resynced.push(name.clone()),
                Tick::Quiet | Tick::Exited(_) | Tick::Restarted => {}
            }
        }
        for n in resynced {
            self.spawn_sync(&n);
        }
    }
}

/// Send one message of changes and keep what the VR took: a refused
/// message again route by route (one bad route does not keep the others
/// out); a VR that is down or does not answer gets them all when it
/// restarts.
fn send_chunk(
    cp: &mut ControlPlane,
    controls: &mut BTreeMap<u16, vrhost_host::VrControl>,
    vr: &str,
    add: Vec<RouteConfig>,
    del: Vec<String>,
) {
    match crate::control::send_routes(controls, vr, &add, &del) {
        Ok(_) => cp.applied += (add.len() + del.len()) as u64,
        Err(ControlError::Invalid(msg)) => {
            tracing::warn!(vr, "control plane routes refused ({msg}); one by one");
            return one_by_one(cp, controls, vr, add, del);
        }
        Err(err) => tracing::warn!(vr, "control plane routes: {err}"),
    }
    for p in &del {
        cp.routes.remove(p);
    }
    for r in add {
        cp.routes.insert(r.prefix.clone(), r);
    }
}

/// Send the changes one message each, keeping those the VR takes.
fn one_by_one(
    cp: &mut ControlPlane,
    controls: &mut BTreeMap<u16, vrhost_host::VrControl>,
    vr: &str,
    add: Vec<RouteConfig>,
    del: Vec<String>,
) {
    for p in del {
        match crate::control::send_routes(controls, vr, &[], std::slice::from_ref(&p)) {
            Ok(_) => {
                cp.routes.remove(&p);
                cp.applied += 1;
            }
            Err(_) => cp.refused += 1,
        }
    }
    for r in add {
        match crate::control::send_routes(controls, vr, std::slice::from_ref(&r), &[]) {
            Ok(_) => {
                cp.routes.insert(r.prefix.clone(), r);
                cp.applied += 1;
            }
            Err(e) => {
                tracing::warn!(vr, "control plane route {} refused: {e}", r.prefix);
                cp.refused += 1;
            }
        }
    }
}

/// A watch's batches to the VR, until the watch ends, is replaced, or
/// the daemon is gone.
fn sync_thread(vr: &str, token: u64, rx: &Receiver<RouteBatch>, hook: &SyncHook) {
    let mut step = Step::Done;
    loop {
        let mut batches = Vec::new();
        if step == Step::Done {
            // Nothing waits: block for the next batch.
            match rx.recv() {
                Ok(b) => batches.push(b),
                Err(_) => return,
            }
        }
        while let Ok(b) = rx.try_recv() {
            batches.push(b);
        }
        let alive = hook(&mut |c: &mut Controller| step = c.apply_control(vr, token, &batches));
        if !alive || step == Step::Stop {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vrhost_netlink::{Oif, Route, RouteKind};

    fn route(p: &str, via: &str) -> Route {
        Route {
            prefix: p.parse().unwrap(),
            kind: RouteKind::Unicast,
            via: Some(via.parse().unwrap()),
            oif: Some(Oif {
                index: 3,
                name: Some("vnic1".into()),
            }),
            protocol: 12,
            metric: 32,
            dropped_nexthops: 0,
        }
    }

    fn batch(add: &[Route], del: &[&str]) -> RouteBatch {
        RouteBatch {
            add: add.to_vec(),
            del: del.iter().map(|p| p.parse().unwrap()).collect(),
        }
    }

    /// Every change of `batches` against `held`.
    fn net_change(
        sync: &mut RouterSync,
        held: &BTreeMap<String, RouteConfig>,
        batches: &[RouteBatch],
    ) -> Change {
        let mut unsent = BTreeMap::new();
        merge(sync, &mut unsent, batches);
        take_slice(&mut unsent, held, usize::MAX)
    }

    #[test]
    fn slices_take_what_changes_and_leave_the_rest() {
        let mut sync = RouterSync::new([("vnic1".to_string(), 1)].into());
        let routes: Vec<Route> = (0..5)
            .map(|i| route(&format!("192.0.{i}.0/24"), "10.0.2.2"))
            .collect();
        let mut unsent = BTreeMap::new();
        merge(&mut sync, &mut unsent, &[batch(&routes, &[])]);
        let mut held = BTreeMap::new();
        held.insert("192.0.0.0/24".to_string(), sync_route("192.0.0.0/24"));
        let (add, _) = take_slice(&mut unsent, &held, 2);
        let got: Vec<&str> = add.iter().map(|r| r.prefix.as_str()).collect();
        assert_eq!(
            got,
            ["192.0.1.0/24", "192.0.2.0/24"],
            "the held one skipped"
        );
        assert_eq!(unsent.len(), 2);
        let (add, _) = take_slice(&mut unsent, &held, 10);
        assert_eq!((add.len(), unsent.len()), (2, 0));
    }

    fn sync_route(p: &str) -> RouteConfig {
        RouteConfig {
            prefix: p.into(),
            via: Some("10.0.2.2".into()),
            vnic: Some(1),
            nexthop: None,
        }
    }

    #[test]
    fn batches_become_the_net_change_against_what_the_vr_holds() {
        let mut sync = RouterSync::new([("vnic1".to_string(), 1)].into());
        let mut held = BTreeMap::new();
        let a = route("192.0.2.0/24", "10.0.2.2");
        let b = route("2001:db8:9::/48", "2001:db8::2");
        // Added then withdrawn in two batches of one sync: nothing; b stays.
        let (add, del) = net_change(
            &mut sync,
            &held,
            &[
                batch(&[a.clone(), b.clone()], &[]),
                batch(&[], &["192.0.2.0/24"]),
            ],
        );
        assert_eq!(
            add.iter().map(|r| r.prefix.as_str()).collect::<Vec<_>>(),
            ["2001:db8:9::/48"]
        );
        assert!(del.is_empty(), "{del:?}");
        for r in add {
            held.insert(r.prefix.clone(), r);
        }
        // The same route again (a re-dump): nothing to send.
        let (add, del) = net_change(&mut sync, &held, &[batch(std::slice::from_ref(&b), &[])]);
        assert!(add.is_empty() && del.is_empty());
        // A new gateway: a replace; a withdrawal of a route the VR holds.
        let mut b2 = b.clone();
        b2.via = Some("2001:db8::3".parse().unwrap());
        let (add, _) = net_change(&mut sync, &held, &[batch(&[b2], &[])]);
        assert_eq!(add[0].via.as_deref(), Some("2001:db8::3"));
        let (add, del) = net_change(&mut sync, &held, &[batch(&[], &["2001:db8:9::/48"])]);
        assert_eq!((add.len(), del), (0, vec!["2001:db8:9::/48".to_string()]));
    }
}
