//! The neighbours the fast path learns from the VRs' routers: the fast
//! path does no ARP, so a neighbour a router resolved reaches it by
//! polling. Every [`NEIGH_POLL`] the supervisor's tick asks each instance
//! of every VR the fast path carries for the neighbours it resolved
//! (`{"neighbours": true}`, `vrhost_router::ResolvedNeighbours`), and the
//! new ones are written; but only a VR whose slow path was handed frames
//! since (`FastState::neighbours_due`): a router learns only from frames,
//! and an idle VR's process is not woken by the poll. Until then frames to such a neighbour are passed
//! to the slow path (counted `to_slow.no_neighbour`), which forwards them:
//! the poll costs latency to the fast path, never correctness. A MAC that
//! changes or ages out in the router follows at the next poll. A VR about
//! to move to the fast path whose router has not told its neighbours
//! yet is asked at once, before its select entries change
//! ([`Controller::neighbours_before_move`]), so that a VR moved right
//! after its first frames finds its next hops in the maps; a VR already
//! asked is not asked again for the move (a round trip to the VR's
//! process, 5-30 ms at 50,000 frames/s, which every move paid when it
//! was asked each time), and what its router resolved within the last
//! poll's second follows at the next poll.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use vrhost_router::ResolvedNeighbours;

use super::{ControlError, Controller};
use crate::fast::Learned;

/// How often the routers are asked.
pub const NEIGH_POLL: Duration = Duration::from_secs(1);
/// How long one instance may take to answer, the controller held
/// meanwhile (API requests and moves wait). A router answers in 0.1-1.5
/// ms beside the live generator's maximum; one that does not (stopped,
/// starved) is asked again at the next poll, and a move goes on without
/// its answer: its frames to neighbours the fast path does not know yet
/// take the slow path until a poll reads them. At 500 ms a stopped VR's
/// move took 506 ms.
const ASK_TIMEOUT: Duration = Duration::from_millis(20);

/// The neighbours of one reply, those that read.
fn learned(reply: serde_json::Value) -> Vec<Learned> {
    let Ok(r) = serde_json::from_value::<ResolvedNeighbours>(reply) else {
        return Vec::new();
    };
    (r.neighbours.iter())
        .filter_map(|n| {
            let ip: Ipv4Addr = n.ip.parse().ok()?;
            let mac = n.mac.parse::<vrhost_packet::MacAddr>().ok()?;
            Some((ip, mac.0, n.vnic))
        })
        .collect()
}

impl Controller {
    /// Ask the routers of the VRs the fast path carries for the neighbours
    /// they resolved, if [`NEIGH_POLL`] has passed since the last time,
    /// and write what changed into the fast path. Nothing without a fast
    /// path.
    ///
    /// # Errors
    /// A map update failed.
    pub fn fast_tick(&mut self) -> Result<(), ControlError> {
        let Some(fast) = self.fast.as_ref() else {
            return Ok(());
        };
        if self.fast_polled.is_some_and(|t| t.elapsed() < NEIGH_POLL) {
            return Ok(());
        }
        self.fast_polled = Some(Instant::now());
        let names: Vec<String> = fast.vrs().map(String::from).collect();
        let mut changed = false;
        for name in names {
            if self.fast.as_mut().is_some_and(|f| f.neighbours_due(&name)) {
                changed |= self.ask_neighbours(&name);
            }
        }
        if changed {
            self.sync_fast()?;
        }
        Ok(())
    }

    /// Before VRs `names` move to the fast path: ask the routers of those
    /// that have not answered such a question yet for the neighbours they
    /// resolved, now, whatever the poll's schedule, and write what changed
    /// into the maps (with the plan still in force, so no select entry
    /// changes), so that the switch that follows finds them there. A
    /// router that does not answer within [`ASK_TIMEOUT`] leaves its
    /// VR's frames to unknown neighbours on the slow path until a poll
    /// reads them, as before.
    ///
    /// # Errors
    /// A map update failed.
    pub(crate) fn neighbours_before_move(&mut self, names: &[String]) -> Result<(), ControlError> {
        if self.fast.is_none() {
            return Ok(());
        }
        let mut changed = false;
        for name in names {
            if !self.fast.as_ref().is_some_and(|f| f.has_learned(name)) {
                changed |= self.ask_neighbours(name);
            }
        }
        if changed {
            self.sync_fast()?;
        }
        Ok(())
    }

    /// Ask every instance of VR `name` for the neighbours its router
    /// resolved and record them, if one answered (a VR none of whose
    /// instances answered stays unasked for its next move); whether they
    /// changed (then a reconcile writes them).
    fn ask_neighbours(&mut self, name: &str) -> bool {
        let Some(e) = self.vrs.get_mut(name) else {
            return false;
        };
        let (mut found, mut answered) = (Vec::new(), false);
        for c in e.controls.values_mut() {
            match c.request(&serde_json::json!({"neighbours": true}), ASK_TIMEOUT) {
                Ok(reply) => {
                    answered = true;
                    found.extend(learned(reply));
                }
                Err(err) => tracing::debug!(vr = %name, %err, "neighbours not read"),
            }
        }
        found.sort_unstable();
        found.dedup();
        answered && self.fast.as_mut().is_some_and(|f| f.learn(name, found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_s_neighbours_are_read_and_bad_ones_skipped() {
        let reply = serde_json::json!({"neighbours": [
            {"ip": "10.0.1.7", "mac": "02:00:00:00:07:07", "vnic": 1},
            {"ip": "10.0.1", "mac": "02:00:00:00:07:08", "vnic": 0},
        ]});
        assert_eq!(
            learned(reply),
            [(Ipv4Addr::new(10, 0, 1, 7), [2, 0, 0, 0, 7, 7], 1)]
        );
        assert!(learned(serde_json::json!({"routes": 3})).is_empty());
    }
}
