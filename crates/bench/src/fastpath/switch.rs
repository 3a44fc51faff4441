//! The switch-over time of a move, to the first frame on the new path:
//! the fast path's counters of the moved VR read straight from the
//! kernel's map ([`vrhost_fast::CounterProbe`], through the program
//! attached to the node's `p0`), polled from the move request on. To
//! fast: until the fast path has forwarded a frame (`fwd`); to slow:
//! until it has handed the select table's first frame to the slow path
//! (`to_slow_select`), which the user-space VR then forwards.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::Serialize;
use vrhost_fast::{CounterProbe, FastCounters};
use vrhost_lab::Lab;

use crate::{Context, Result, bail};

/// Between two reads of the counters (one map lookup each).
const POLL: Duration = Duration::from_micros(50);

/// The moved VR's counters.
pub(super) struct Watch {
    probe: CounterProbe,
    vr: u32,
}

impl Watch {
    /// The counters of the one VR with frames on the fast path's program
    /// attached to the node's `p0` (call with traffic flowing).
    pub(super) fn new(lab: &Lab) -> Result<Self> {
        let out = lab.ns("node").exec("ip", &["-j", "link", "show", "p0"])?;
        let id = xdp_prog_id(&out).context("the XDP program on the node's p0")?;
        let probe = CounterProbe::of_program(id)?;
        let active = probe.active(u32::from(u16::MAX))?;
        match active[..] {
            [vr] => Ok(Self { probe, vr }),
            _ => bail!(
                "the fast path has {} VRs with frames, not one",
                active.len()
            ),
        }
    }

    /// Run `request` (the move) and give its own time and the trace of
    /// the switch (see [`Switch`]), polled until the first frame on the
    /// new path or `wait` after the request's answer.
    pub(super) fn time<T>(
        &self,
        to_fast: bool,
        wait: Duration,
        request: impl FnOnce() -> Result<T>,
    ) -> Result<(T, Switch)> {
        let new = |c: &FastCounters| if to_fast { c.fwd } else { c.to_slow_select };
        let old = |c: &FastCounters| if to_fast { c.to_slow_select } else { c.fwd };
        let first = self.probe.counters(self.vr)?;
        let unselected = self.probe.unselected()?;
        let answered = OnceLock::<Instant>::new();
        let t0 = Instant::now();
        std::thread::scope(|s| {
            let seen = s.spawn(|| -> Result<Switch> {
                // Ahead of the generator and the forwarders on its CPU:
                // at nice 0 it was kept off it for up to 11 ms in a move
                // (`read_gap_ms`), and saw a switch that much late. Its
                // work (a map read every POLL) is the same either way.
                let _ = vrhost_host::cpu::set_current_thread_nice(-10);
                let ms = || t0.elapsed().as_secs_f64() * 1e3;
                let mut out = Switch::default();
                let mut last = first;
                let (mut rx_at, mut read_at) = (0.0, 0.0);
                // The old path's count at the first read after the answer.
                let mut old_at_answer = None;
                while answered.get().is_none_or(|a| a.elapsed() < wait) {
                    let done = answered.get().is_some();
                    let c = self.probe.counters(self.vr)?;
                    if done && old_at_answer.is_none() {
                        old_at_answer = Some(old(&c));
                    }
                    let now = ms();
                    out.read_gap_ms = out.read_gap_ms.max(now - read_at);
                    read_at = now;
                    if c.rx > last.rx {
                        out.first_rx_ms.get_or_insert(now);
                        out.rx_gap_ms = out.rx_gap_ms.max(now - rx_at);
                        rx_at = now;
                    }
                    if old(&c) > old(&last) {
                        out.last_old_ms = Some(now);
                    }
                    if let Some(o) = old_at_answer {
                        out.old_after_answer = old(&c) - o;
                    }
                    last = c;
                    if new(&c) > new(&first) {
                        out.unselected = self.probe.unselected()?.wrapping_sub(unselected);
                        out.switch_ms = Some(now);
                        break;
                    }
                    std::thread::sleep(POLL);
                }
                Ok(out)
            });
            let r = request();
            let _ = answered.set(Instant::now());
            let trace = seen
                .join()
                .map_err(|_| crate::BenchError::Failed("the switch watcher panicked".into()))??;
            Ok((r?, trace))
        })
    }
}

/// What the watcher saw of one move, ms from the request (each read is
/// [`POLL`] apart, so each figure is late by up to that and a read).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Switch {
    /// The first frame on the new path: to fast, the first the fast path
    /// forwarded; to slow, the first it handed to the slow path (`None`:
    /// none within the wait, `--move-settle`).
    pub switch_ms: Option<f64>,
    /// The first frame the VR's select entries took after the request,
    /// whatever its path.
    pub first_rx_ms: Option<f64>,
    /// The longest span without a frame at the select table, from the
    /// request to the first frame on the new path: a generator that did
    /// not send, against a switch that came late.
    pub rx_gap_ms: f64,
    /// The last frame on the old path seen after the request.
    pub last_old_ms: Option<f64>,
    /// The longest span between two reads of the counters: a watcher
    /// kept off its CPU sees the switch that late.
    pub read_gap_ms: f64,
    /// Frames the old path took after the API's answer (from the
    /// watcher's first read after it), until the first on the new path:
    /// 0 says the select table had switched by the answer, so a late
    /// first frame on the new path is a gap in the offered frames.
    pub old_after_answer: u64,
    /// Frames the port's program found no select entry for, from the
    /// request to the first frame on the new path (the slow path takes
    /// them, outside the VR's counters): frames that went on while its
    /// entries were missing.
    pub unselected: u64,
}

/// The id of the XDP program in `ip -j link show`'s output (one link):
/// `xdp.prog.id`, or the first of `xdp.attached[].prog.id`.
fn xdp_prog_id(json: &str) -> Result<u32> {
    let v: serde_json::Value = serde_json::from_str(json)?;
    let xdp = &v[0]["xdp"];
    let id = xdp["prog"]["id"]
        .as_u64()
        .or_else(|| xdp["attached"][0]["prog"]["id"].as_u64())
        .and_then(|id| u32::try_from(id).ok());
    match id {
        Some(id) => Ok(id),
        None => bail!("no XDP program attached: {json}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_id_is_read_in_both_forms() {
        let one = r#"[{"ifname":"p0","xdp":{"mode":1,"prog":{"id":42,"tag":"x","jited":1}}}]"#;
        assert_eq!(xdp_prog_id(one).unwrap(), 42);
        let many = r#"[{"ifname":"p0","xdp":{"attached":[{"mode":2,"prog":{"id":7}}]}}]"#;
        assert_eq!(xdp_prog_id(many).unwrap(), 7);
        assert!(xdp_prog_id(r#"[{"ifname":"p0"}]"#).is_err());
    }
}
