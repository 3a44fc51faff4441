//! Routes added and removed through the API: kept by the control plane
//! (given to a VR again when it restarts) and sent to every instance of
//! the VR over its control socket.

use std::collections::BTreeMap;
use std::time::Instant;

use vrhost_api::RouteResult;
use vrhost_host::VrControl;
use vrhost_proto::CONTROL_CHUNK;
use vrhost_router::RouteConfig;

use super::{CONTROL_TIMEOUT, ControlError, Controller};

impl Controller {
    /// A page of the routes of VR `name` whose origin is in `want`, in
    /// order: its config's (`config`), those added through the API
    /// (`api`), its control plane's (`control-plane`); with the count of
    /// them all. Only the page is copied. `None`: no such VR.
    pub fn routes_by_origin(
        &self,
        name: &str,
        want: &[&str],
        offset: usize,
        limit: usize,
    ) -> Option<(usize, Vec<(&'static str, RouteConfig)>)> {
        let plan = self.plan.vrs.iter().find(|v| v.name == name)?;
        let e = self.vrs.get(name)?;
        let config: Vec<RouteConfig> = match want.contains(&"config") {
            true => (plan.config.get("routes").and_then(|r| r.as_array()))
                .into_iter()
                .flatten()
                .filter_map(|r| serde_json::from_value(r.clone()).ok())
                .collect(),
            false => Vec::new(),
        };
        let api = want.contains(&"api").then_some(&e.api_routes);
        let cp = (e.control.as_ref()).filter(|_| want.contains(&"control-plane"));
        let total = config.len() + api.map_or(0, |a| a.len()) + cp.map_or(0, |c| c.routes().len());
        let all = (config.iter().map(|r| ("config", r)))
            .chain(api.into_iter().flat_map(|a| a.values().map(|r| ("api", r))))
            .chain(
                cp.into_iter()
                    .flat_map(|c| c.routes().values().map(|r| ("control-plane", r))),
            );
        let page = all
            .skip(offset)
            .take(limit)
            .map(|(o, r)| (o, r.clone()))
            .collect();
        Some((total, page))
    }

    /// Change the routes a VR got through the API: add (or replace) `add`,
    /// delete `del` (which must be API routes). All or nothing: the VR
    /// checks every message before the first is applied.
    ///
    /// # Errors
    /// Unknown VR, a VR that is not a router, a bad route, or a VR that
    /// did not answer.
    pub fn change_routes(
        &mut self,
        vr: &str,
        add: Vec<RouteConfig>,
        del: Vec<String>,
    ) -> Result<RouteResult, ControlError> {
        let plan = self
            .plan
            .vrs
            .iter()
            .find(|v| v.name == vr)
            .ok_or_else(|| ControlError::NotFound(format!("no VR {vr:?}")))?;
        if plan.program.is_some() {
            return Err(ControlError::Conflict(format!(
                "VR {vr:?} is a custom program; routes are for the built-in router"
            )));
        }
        let entry = self.vrs.get_mut(vr).expect("every planned VR has an entry");
        let mut add_keys = Vec::with_capacity(add.len());
        for (i, r) in add.iter().enumerate() {
            let k = vrhost_router::parse_prefix(&r.prefix)
                .map_err(|e| ControlError::Invalid(format!("add[{i}]: {e}")))?;
            add_keys.push(k);
        }
        let mut del_keys = Vec::with_capacity(del.len());
        for (i, p) in del.iter().enumerate() {
            let k = vrhost_router::parse_prefix(p)
                .map_err(|e| ControlError::Invalid(format!("del[{i}]: {e}")))?;
            if !entry.api_routes.contains_key(&k) {
                return Err(ControlError::NotFound(format!(
                    "del[{i}] {p:?}: no route added through the API"
                )));
            }
            del_keys.push(k);
        }
        let t = Instant::now();
        let routes = send_routes(&mut entry.controls, vr, &add, &del)?;
        let seconds = t.elapsed().as_secs_f64();
        for k in &del_keys {
            entry.api_routes.remove(k);
        }
        let (added, deleted) = (add.len() as u64, del_keys.len() as u64);
        for (k, r) in add_keys.into_iter().zip(add) {
            entry.api_routes.insert(k, r);
        }
        let api_routes = entry.api_routes.len() as u64;
        // The fast path's copy of the VR's routes.
        self.sync_fast()?;
        Ok(RouteResult {
            added,
            deleted,
            routes,
            api_routes,
            seconds,
            routes_per_second: if seconds > 0.0 {
                (added + deleted) as f64 / seconds
            } else {
                0.0
            },
        })
    }
}

/// Send route changes to every instance of a VR (`controls`), in messages of
/// [`CONTROL_CHUNK`] routes: first every message as a dry run (the VR
/// checks it), then for real, so a refused route changes nothing (a
/// change of one message goes once: the VR checks it whole before it
/// applies it). Returns the routes in the VR's table afterwards.
pub(crate) fn send_routes(
    controls: &mut BTreeMap<u16, VrControl>,
    vr: &str,
    add: &[RouteConfig],
    del: &[String],
) -> Result<u64, ControlError> {
    let mut msgs = Vec::new();
    for c in add.chunks(CONTROL_CHUNK) {
        msgs.push(serde_json::json!({ "add": c, "del": [] }));
    }
    for c in del.chunks(CONTROL_CHUNK) {
        msgs.push(serde_json::json!({ "add": [], "del": c }));
    }
    let mut routes = 0;
    // One message is checked whole by the VR before it applies any of it:
    // the dry run is for changes of several.
    let passes: &[bool] = match msgs.len() {
        0 | 1 => &[false],
        _ => &[true, false],
    };
    for &dry_run in passes {
        for (m, chunk) in msgs.iter().enumerate() {
            let mut body = chunk.clone();
            body["dry_run"] = dry_run.into();
            let body = serde_json::json!({ "routes": body });
            for c in controls.values_mut() {
                let reply = c.request(&body, CONTROL_TIMEOUT).map_err(|e| match e {
                    vrhost_host::ControlError::Refused(msg) => {
                        // The VR numbers entries within its message.
                        ControlError::Invalid(format!(
                            "VR {vr}: {msg} (in message {} of {}, {CONTROL_CHUNK} routes each)",
                            m + 1,
                            msgs.len()
                        ))
                    }
                    other => ControlError::Unavailable(format!("VR {vr}: {other}")),
                })?;
                routes = reply
                    .get("routes")
                    .and_then(|v| v.as_u64())
                    .unwrap_or(routes);
            }
        }
    }
    Ok(routes)
}
