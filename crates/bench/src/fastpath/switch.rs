//! The switch-over time of a move, to the first frame on the new path:
//! the fast path's counters of the moved VR read straight from the
//! kernel's map ([`vrhost_fast::CounterProbe`], through the program
//! attached to the node's `p0`), polled from the move request on. To
//! fast: until the fast path has forwarded a frame (`fwd`); to slow:
//! until it has handed the select table's first frame to the slow path
//! (`to_slow_select`), which the user-space VR then forwards.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

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

    /// Run `request` (the move) and give its own time and the ms from its
    /// start to the first frame on the new path (`to_fast`: forwarded by
    /// the fast path; else handed to the slow path), `None` if none
    /// within `wait` after the request's answer.
    pub(super) fn time<T>(
        &self,
        to_fast: bool,
        wait: Duration,
        request: impl FnOnce() -> Result<T>,
    ) -> Result<(T, Option<f64>)> {
        let key = |c: &FastCounters| if to_fast { c.fwd } else { c.to_slow_select };
        let before = key(&self.probe.counters(self.vr)?);
        let answered = OnceLock::<Instant>::new();
        let t0 = Instant::now();
        std::thread::scope(|s| {
            let seen = s.spawn(|| -> Result<Option<f64>> {
                while answered.get().is_none_or(|a| a.elapsed() < wait) {
                    if key(&self.probe.counters(self.vr)?) > before {
                        return Ok(Some(t0.elapsed().as_secs_f64() * 1e3));
                    }
                    std::thread::sleep(POLL);
                }
                Ok(None)
            });
            let r = request();
            let _ = answered.set(Instant::now());
            let ms = seen
                .join()
                .map_err(|_| crate::BenchError::Failed("the switch watcher panicked".into()))??;
            Ok((r?, ms))
        })
    }
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
