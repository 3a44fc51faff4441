//! How a VR's instances run: their count (`instances`, or the `scale`
//! table), their cores (`cpus`, `cpu`, or the host's budget) and how frames
//! are shared among them (`balance`); and the host's core budget, which the
//! VRs' instances must fit.

use toml::Spanned;

use super::schema::{HostConf, ScaleConf, VrConf};
use super::{ConfigError, FieldError, Source};

/// How a VR's instances run: their count, scaling, cores and balancing.
/// Two instances never share a core: several instances (or a scaling
/// VR's) take their cores from `cpus`, one each, or else from the
/// host's core budget.
pub(super) fn vr_instances(v: &VrConf) -> Result<InstancePlan, FieldError> {
    use crate::alloc::ScalePolicy;
    let most = vrhost_shm::layout::MAX_INSTANCES;
    let span = || v.instances.as_ref().map_or(0..0, Spanned::span);
    // Checked here, not when its cgroup or affinity is written: the error
    // then names the field, not a file of the host.
    let ncpu = crate::confine::online_cpus();
    if let Some(c) = v.cpu.filter(|&c| c >= ncpu) {
        let msg = format!("CPU {c}: this host has {ncpu} (0..={})", ncpu - 1);
        return Err((v.name.span(), "cpu", msg));
    }
    let scale = match (&v.scale, &v.instances) {
        (Some(_), Some(i)) => {
            let msg = "a VR with a `scale` table runs scale.min..=scale.max instances".into();
            return Err((i.span(), "instances", msg));
        }
        (Some(sc), None) => ScalePolicy::Dynamic(vr_scale(sc)?),
        (None, i) => {
            let n = i.as_ref().map_or(1, |s| *s.get_ref());
            if !(1..=most).contains(&n) {
                return Err((span(), "instances", format!("{n}: must be 1..={most}")));
            }
            ScalePolicy::Fixed(n)
        }
    };
    let (start, slots) = match scale {
        ScalePolicy::Fixed(n) => (n, n),
        ScalePolicy::Dynamic(d) => (d.min, d.max),
    };
    let balance = match &v.balance {
        None => crate::balance::Policy::default(),
        Some(s) => s
            .get_ref()
            .parse()
            .map_err(|e: crate::balance::UnknownPolicy| (s.span(), "balance", e.to_string()))?,
    };
    let several = slots > 1 || v.scale.is_some();
    let (placed, cpus) = match &v.cpus {
        Some(c) if several => {
            let mut d = c.get_ref().clone();
            d.sort_unstable();
            d.dedup();
            if d.len() < usize::from(slots) {
                let msg = format!(
                    "{} distinct cores for {slots} instances: each instance needs its own",
                    d.len()
                );
                return Err((c.span(), "cpus", msg));
            }
            let pinned = c.get_ref().iter().take(slots.into()).map(|&c| Some(c));
            (false, pinned.collect())
        }
        _ if several && v.cpu.is_some() => {
            let msg = format!(
                "{slots} instances cannot all be pinned to `cpu`; list their cores in `cpus`, or leave both out to take cores from the host's budget"
            );
            return Err((span(), "instances", msg));
        }
        _ if several => (true, vec![None; usize::from(slots)]),
        _ => (false, vec![v.cpu]),
    };
    Ok(InstancePlan {
        start,
        scale,
        placed,
        cpus,
        balance,
    })
}

/// A VR's `scale` table as a checked policy; an error names the field.
fn vr_scale(sc: &ScaleConf) -> Result<crate::alloc::DynamicPolicy, FieldError> {
    let d = crate::alloc::DynamicPolicy {
        up_pps: *sc.up_pps.get_ref() as f64,
        down_pps: *sc.down_pps.get_ref() as f64,
        period: std::time::Duration::from_millis(
            sc.period_ms.as_ref().map_or(1000, |p| *p.get_ref()),
        ),
        min: sc.min.as_ref().map_or(1, |m| *m.get_ref()),
        max: *sc.max.get_ref(),
    };
    let most = vrhost_shm::layout::MAX_INSTANCES.min(crate::alloc::MAX_INSTANCES);
    let (field, msg) = match d.validate() {
        Ok(()) if d.max <= most => return Ok(d),
        Ok(()) => ("max", format!("{}: must be {}..={most}", d.max, d.min)),
        Err(crate::alloc::AllocError::Policy { field, msg }) => (field, msg),
        Err(e) => ("max", e.to_string()),
    };
    let span = |s: Option<std::ops::Range<usize>>| s.unwrap_or_else(|| sc.max.span());
    Err(match field {
        "up_pps" => (sc.up_pps.span(), "scale.up_pps", msg),
        "down_pps" => (sc.down_pps.span(), "scale.down_pps", msg),
        "period" => {
            let msg = format!("{}: must be >= 1", d.period.as_millis());
            (
                span(sc.period_ms.as_ref().map(Spanned::span)),
                "scale.period_ms",
                msg,
            )
        }
        "min" => (span(sc.min.as_ref().map(Spanned::span)), "scale.min", msg),
        _ => (sc.max.span(), "scale.max", msg),
    })
}

/// How a VR's instances run (see [`vr_instances`]).
pub(super) struct InstancePlan {
    /// Instances started.
    pub(super) start: u16,
    pub(super) scale: crate::alloc::ScalePolicy,
    /// Cores from the host's budget.
    pub(super) placed: bool,
    /// Core of each instance slot, when pinned by the config.
    pub(super) cpus: Vec<Option<usize>>,
    pub(super) balance: crate::balance::Policy,
}

/// The instance cores the VRs of a config take from the host's budget: the
/// VRs' starting instances must fit, and a scaling VR's maximum too.
pub(super) struct BudgetCheck {
    /// The budget's cores, or why there is none.
    cpus: Result<Vec<usize>, String>,
    /// Cores the VRs checked so far start with.
    taken: usize,
}

impl BudgetCheck {
    fn new(host: &HostConf) -> Self {
        let cpus = host
            .core_budget()
            .map(|b| b.cpus().to_vec())
            .map_err(|e| e.to_string());
        Self { cpus, taken: 0 }
    }

    /// Take the cores of a placed VR's `start` instances, of at most
    /// `slots`; an error says what is missing.
    fn take(&mut self, start: u16, slots: u16, dynamic: bool) -> Result<(), (bool, String)> {
        let hint = "see host.instance_cores and host.share_worker_core";
        let cpus = self
            .cpus
            .as_ref()
            .map_err(|e| (false, format!("no cores for instances: {e}; {hint}")))?;
        let list = cpus
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let size = cpus.len();
        if dynamic && usize::from(slots) > size {
            let msg = format!(
                "{slots}: more instances than the {size} cores of the host's budget (CPUs {list}); {hint}"
            );
            return Err((true, msg));
        }
        if self.taken + usize::from(start) > size {
            let left = size - self.taken;
            let msg = format!(
                "{start} instances need a core each, but {left} of the {size} cores of the host's budget (CPUs {list}) are left; {hint}"
            );
            return Err((false, msg));
        }
        self.taken += usize::from(start);
        Ok(())
    }
}

impl BudgetCheck {
    /// The budget of `host`; an error if it sets `instance_cores` and the
    /// machine cannot give them.
    pub(super) fn of_host(host: &HostConf, at: &Source) -> Result<Self, ConfigError> {
        let budget = Self::new(host);
        if let (Some(c), Err(e)) = (&host.instance_cores, &budget.cpus) {
            return Err(at.err(c.span(), "host.instance_cores".into(), e.clone()));
        }
        Ok(budget)
    }

    /// Take the cores VR `i` (`v`) starts with, if they come from the
    /// budget; an error names the field that asks for too many.
    pub(super) fn take_for(
        &mut self,
        i: usize,
        v: &VrConf,
        inst: &InstancePlan,
        at: &Source,
    ) -> Result<(), ConfigError> {
        if !inst.placed {
            return Ok(());
        }
        let slots = inst.cpus.len() as u16;
        self.take(inst.start, slots, v.scale.is_some())
            .map_err(|(at_max, msg)| {
                let (span, field) = match (&v.scale, &v.instances) {
                    (Some(sc), _) if at_max || sc.min.is_none() => (sc.max.span(), "scale.max"),
                    (Some(sc), _) => (sc.min.as_ref().map_or(0..0, Spanned::span), "scale.min"),
                    (None, n) => (n.as_ref().map_or(0..0, Spanned::span), "instances"),
                };
                at.err(span, format!("vrs[{i}].{field}"), msg)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::vr_conf;

    /// A budget of these cores, none taken.
    fn budget(cpus: &[usize]) -> BudgetCheck {
        BudgetCheck {
            cpus: Ok(cpus.to_vec()),
            taken: 0,
        }
    }

    /// Take VR 1's cores (`fields`) from `b`; the error as text.
    fn take(b: &mut BudgetCheck, fields: &str) -> Result<(), String> {
        let v = vr_conf(fields);
        let inst = vr_instances(&v).map_err(|(_, f, m)| format!("{f}: {m}"))?;
        let at = Source {
            src: "",
            file: "v.toml",
        };
        b.take_for(1, &v, &inst, &at).map_err(|e| e.to_string())
    }

    #[test]
    fn placed_instances_take_a_core_each_until_none_is_left() {
        let mut b = budget(&[2, 3, 4]);
        take(&mut b, "instances = 2").unwrap();
        take(&mut b, "cpus = [0, 1]\ninstances = 2").unwrap();
        take(&mut b, "").unwrap();
        assert_eq!(b.taken, 2, "only the budget's VRs count");
        let e = take(&mut b, "instances = 2").unwrap_err();
        assert!(
            e.contains(
                "vrs[1].instances: 2 instances need a core each, but 1 of the 3 cores of the host's budget (CPUs 2,3,4) are left"
            ),
            "{e}"
        );
        take(&mut b, "scale = { up_pps = 10, down_pps = 5, max = 3 }").unwrap();
        assert_eq!(b.taken, 3, "a scaling VR starts with its minimum");
    }

    #[test]
    fn a_scaling_vr_names_the_bound_that_does_not_fit() {
        let scale = |extra: &str| format!("scale = {{ up_pps = 10, down_pps = 5, {extra} }}");
        let e = take(&mut budget(&[2, 3]), &scale("max = 3")).unwrap_err();
        assert!(
            e.contains("vrs[1].scale.max: 3: more instances than the 2 cores"),
            "{e}"
        );
        let mut b = budget(&[2, 3]);
        b.taken = 1;
        let e = take(&mut b, &scale("min = 2, max = 2")).unwrap_err();
        assert!(
            e.contains("vrs[1].scale.min: 2 instances need a core each"),
            "{e}"
        );
        b.taken = 2;
        let e = take(&mut b, &scale("max = 2")).unwrap_err();
        assert!(e.contains("vrs[1].scale.max: 1 instances need"), "{e}");
    }

    #[test]
    fn no_budget_is_an_error_for_a_placed_vr_only() {
        let mut b = BudgetCheck {
            cpus: Err("a budget of 9 cores, but only 1 CPUs".into()),
            taken: 0,
        };
        take(&mut b, "cpu = 1").unwrap();
        let e = take(&mut b, "instances = 2").unwrap_err();
        assert!(
            e.contains("vrs[1].instances: no cores for instances: a budget of 9 cores"),
            "{e}"
        );
    }
}
