//! Restarting VRs that go down, and scaling VRs with their load.
//!
//! The worker reports every VR of the data path that goes down (its
//! process exited or crashed, the watchdog killed it, or it was
//! quarantined) as soon as it sees it: it has already taken the VR out of
//! the data path and reclaimed its slots. The supervisor, on its own
//! thread, starts it again through [`Controller::restart_after`]: at once
//! the first time, then, if it keeps going down within [`FLAPPING`] of its
//! restart, after a delay that doubles up to [`MAX_DELAY`], so a VR that
//! crashes on every packet does not take the control plane's time. A
//! quarantined VR is not restarted (`vrhost vr restart` does that).
//!
//! Between reports, at least every 100 ms, it has the controller decide
//! the instance count of the VRs that run several instances
//! ([`Controller::scale_tick`]: each at its own period), and has the
//! fast path learn the neighbours the VRs' routers resolved
//! ([`Controller::fast_tick`]), moves `path = "auto"` VRs by their
//! load ([`Controller::auto_tick`]), and restarts the VRs' control planes
//! that went down ([`Controller::control_tick`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use vrhost_host::{DownReason, ExitEvent, Hurry};

use crate::control::Controller;

/// A VR that goes down again within this time of its restart is flapping:
/// its next restart waits.
pub const FLAPPING: Duration = Duration::from_secs(1);
/// First delay of a flapping VR's restart.
pub const FIRST_DELAY: Duration = Duration::from_millis(50);
/// Longest delay of a flapping VR's restart.
pub const MAX_DELAY: Duration = Duration::from_secs(5);

/// One restart done (or refused), for logs and benchmarks.
#[derive(Debug, Clone)]
pub struct Restart {
    /// The report it answers.
    pub event: ExitEvent,
    /// `Ok(true)`: forwarding again; `Ok(false)`: nothing to do
    /// (removed, replaced, quarantined, `restart = false`); `Err`: why the
    /// new process failed.
    pub result: Result<bool, String>,
    /// From the report to the VR back in the data path.
    pub took: Duration,
}

/// Restarts VRs the worker reports down.
pub struct Supervisor {
    rx: mpsc::Receiver<ExitEvent>,
    /// Reports waiting for their restart time.
    due: Vec<(Instant, ExitEvent)>,
    /// Per VR: when it was last restarted and the delay it got.
    history: BTreeMap<String, (Instant, Duration)>,
    /// Raised while a restart is due ([`Controller::hurry`]): an operator's
    /// change holding the controller while its new VR starts (or an old one
    /// exits) in the idle class would otherwise keep a VR that went down
    /// waiting for all of it.
    hurry: Hurry,
}

impl Supervisor {
    /// A supervisor of the reports on `rx` (see
    /// [`Controller::take_exits`]) that raises `hurry` ([`Controller::hurry`])
    /// while a restart is due.
    pub fn new(rx: mpsc::Receiver<ExitEvent>, hurry: Hurry) -> Self {
        Self {
            rx,
            due: Vec::new(),
            history: BTreeMap::new(),
            hurry,
        }
    }

    /// Serve reports and scale VRs until `stop` is set or the worker is
    /// gone.
    pub fn run(mut self, ctl: &Mutex<Controller>, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            if self.step(ctl, Duration::from_millis(100)).is_none() {
                return;
            }
            // Not while a change holds the controller: waiting for it here
            // would leave a VR that goes down meanwhile unseen, and unable to
            // hurry the change (see `step`).
            let mut c = match ctl.try_lock() {
                Ok(c) => c,
                Err(std::sync::TryLockError::WouldBlock) => continue,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            };
            if let Err(e) = c.scale_tick() {
                tracing::warn!("scaling: {e}");
            }
            if let Err(e) = c.fast_tick() {
                tracing::warn!("fast path neighbours: {e}");
            }
            if let Err(e) = c.auto_tick() {
                tracing::warn!("fast path auto moves: {e}");
            }
            c.control_tick();
        }
    }

    /// Wait up to `wait` for a report, then do the restarts that are due;
    /// `None` once the worker is gone (no more reports will come).
    pub fn step(&mut self, ctl: &Mutex<Controller>, wait: Duration) -> Option<Vec<Restart>> {
        let wait = self
            .due
            .iter()
            .map(|(t, _)| t.saturating_duration_since(Instant::now()))
            .min()
            .map_or(wait, |d| d.min(wait));
        match self.rx.recv_timeout(wait) {
            Ok(ev) => self.schedule(ev),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) if self.due.is_empty() => return None,
            Err(mpsc::RecvTimeoutError::Disconnected) => {}
        }
        while let Ok(ev) = self.rx.try_recv() {
            self.schedule(ev);
        }
        let now = Instant::now();
        let mut done = Vec::new();
        let mut i = 0;
        while i < self.due.len() {
            if self.due[i].0 > now {
                i += 1;
                continue;
            }
            let (_, ev) = self.due.swap_remove(i);
            // Before waiting for the controller, which a change may hold.
            self.hurry.set(true);
            done.push(self.restart(ctl, ev));
        }
        self.hurry.set(false);
        Some(done)
    }

    fn schedule(&mut self, ev: ExitEvent) {
        if ev.reason == DownReason::Quarantined {
            tracing::warn!(vr = %ev.vr, "VR {}: not fed any more; `vrhost vr restart {}` starts it again", ev.reason, ev.vr);
            return;
        }
        let delay = match self.history.get(&ev.vr) {
            Some((last, d)) if last.elapsed() < FLAPPING => (*d * 2).clamp(FIRST_DELAY, MAX_DELAY),
            _ => Duration::ZERO,
        };
        tracing::warn!(vr = %ev.vr, delay_ms = delay.as_millis() as u64, "VR {}: restarting", ev.reason);
        let at = ev.at + delay;
        self.history.insert(ev.vr.clone(), (at, delay));
        self.due.push((at, ev));
    }

    fn restart(&mut self, ctl: &Mutex<Controller>, ev: ExitEvent) -> Restart {
        let mut c = ctl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tracing::debug!(vr = %ev.vr, lock_ms = ev.at.elapsed().as_secs_f64() * 1e3, "restart: controller taken");
        let result = c.restart_after(&ev).map_err(|e| e.to_string());
        drop(c);
        let took = ev.at.elapsed();
        match &result {
            Ok(true) => {
                tracing::info!(vr = %ev.vr, ms = took.as_secs_f64() * 1e3, "VR restarted");
            }
            Ok(false) => {}
            Err(e) => {
                // Try again later (the delay grows while it keeps failing).
                tracing::error!(vr = %ev.vr, "VR restart failed: {e}");
                self.schedule(ExitEvent {
                    at: Instant::now(),
                    ..ev.clone()
                });
            }
        }
        Restart {
            event: ev,
            result,
            took,
        }
    }
}
