//! Routes from a control namespace's kernel table to its VR: a thread per
//! watch takes the watch's batches (everything waiting at once), takes
//! the controller and sends the net change per prefix to every instance
//! of the VR as route changes, the messages API routes use
//! (`control/routes.rs`); the routes are kept with the control plane,
//! given again to the VR when it restarts, and listed with origin
//! `control-plane`.
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
use vrhost_router::RouteConfig;

use super::{ControlPlane, Tick};
use crate::control::{ControlError, Controller};

/// Runs a function on the controller, under its lock; false once the
/// daemon is gone.
pub type SyncHook = Arc<dyn Fn(&mut dyn FnMut(&mut Controller)) -> bool + Send + Sync>;

/// What the VR was sent for one sync: adds and deletes.
type Change = (Vec<RouteConfig>, Vec<String>);

/// The net change of `batches` against `routes`, the routes the VR holds
/// from the control plane: per prefix the last word (a route, or a
/// withdrawal of one the VR holds); `sync` converts them.
fn net_change(
    sync: &mut RouterSync,
    routes: &BTreeMap<String, RouteConfig>,
    batches: &[RouteBatch],
) -> Change {
    let mut last: BTreeMap<String, Option<RouteConfig>> = BTreeMap::new();
    for b in batches {
        let ch = sync.convert(b);
        for p in ch.del {
            last.insert(p, None);
        }
        for r in ch.add {
            last.insert(r.prefix.clone(), Some(r));
        }
    }
    let mut change: Change = (Vec::new(), Vec::new());
    for (p, r) in last {
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

    /// Apply `batches` of VR `vr`'s control plane's watch `token`; false
    /// when that watch is no longer current (the thread then stops).
    fn apply_control(&mut self, vr: &str, token: u64, batches: &[RouteBatch]) -> bool {
        let Some(e) = self.vrs.get_mut(vr) else {
            return false;
        };
        let Some(cp) = e.control.as_mut() else {
            return false;
        };
        if cp.token != token {
            return false;
        }
        let (add, del) = net_change(&mut cp.sync, &cp.routes, batches);
        if add.is_empty() && del.is_empty() {
            return true;
        }
        let t = Instant::now();
        let sent = crate::control::send_routes(&mut e.controls, vr, &add, &del);
        match sent {
            Ok(_) => {
                cp.applied += (add.len() + del.len()) as u64;
                for p in &del {
                    cp.routes.remove(p);
                }
                for r in add {
                    cp.routes.insert(r.prefix.clone(), r);
                }
            }
            Err(ControlError::Invalid(msg)) => {
                tracing::warn!(
                    vr,
                    "control plane routes refused as a batch ({msg}); one by one"
                );
                one_by_one(cp, &mut e.controls, vr, add, del);
            }
            Err(err) => {
                // The VR is down or did not answer: keep them for its
                // restart, which gives it every route kept here.
                tracing::warn!(vr, "control plane routes: {err}");
                for p in &del {
                    cp.routes.remove(p);
                }
                for r in add {
                    cp.routes.insert(r.prefix.clone(), r);
                }
            }
        }
        tracing::debug!(
            vr,
            ms = t.elapsed().as_secs_f64() * 1e3,
            "control plane routes synced"
        );
        true
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
    while let Ok(first) = rx.recv() {
        let mut batches = vec![first];
        while let Ok(b) = rx.try_recv() {
            batches.push(b);
        }
        let mut go_on = false;
        let alive = hook(&mut |c: &mut Controller| go_on = c.apply_control(vr, token, &batches));
        if !alive || !go_on {
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
