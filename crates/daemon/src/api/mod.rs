//! The HTTP/JSON API (`api/openapi.yaml` is its contract).
//!
//! Served on a unix socket, and optionally on TCP where every request must
//! carry the bearer token. Every handler that changes something builds the
//! changed config document and hands it to [`Controller::apply_doc`], which
//! checks it whole before anything changes; changes are serialized by the
//! controller's lock. Request bodies, paths and queries are read by this
//! module (not by extractors whose refusals are plain text), so every
//! refusal is a JSON error with a code. A JSON body must come as
//! `application/json` (else 415) and fit its schema in the API document
//! ([`crate::contract`], else 400 naming the field); what fits the document
//! but not the config is a 422.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::control::{ControlError, Controller};
use crate::view;
use vrhost_api::{ApplyRequest, ConfigDoc, Health, VrCounters, VrStatus};

pub use crate::contract::OPENAPI;

mod cluster_vrs;
mod routes;
mod rules;
mod vrs;

use cluster_vrs::*;
use routes::*;
use rules::*;
use vrs::*;

/// Largest request body, except bulk route changes.
pub const MAX_BODY: usize = 1 << 20;
/// Largest bulk route request (about 100,000 routes of JSON).
pub const MAX_BULK_BODY: usize = 16 << 20;
/// Most routes one bulk request may carry.
pub const MAX_BULK_ROUTES: usize = 100_000;
/// Largest `offset` of a page of routes (the document's `maximum`).
pub const MAX_OFFSET: usize = u32::MAX as usize;

/// What the handlers share.
pub struct ApiState {
    /// The control plane; its lock serializes changes.
    pub ctl: Mutex<Controller>,
    /// Bearer token required on TCP.
    pub token: Option<String>,
}

/// An API error: a status and a JSON body `{"error":{"code","message"}}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> Self {
        let status = match e {
            ControlError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ControlError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ControlError::NotFound(_) => StatusCode::NOT_FOUND,
            ControlError::Conflict(_) => StatusCode::CONFLICT,
            ControlError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ControlError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, e.code(), e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code, "message": self.message } });
        (self.status, axum::Json(body)).into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The API's routes over `state` (no authentication: see [`tcp_router`]).
pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/config", get(get_config))
        .route("/v1/apply", post(apply))
        .route("/v1/vrs", get(list_vrs).post(create_vr))
        .route(
            "/v1/vrs/{name}",
            get(get_vr).put(update_vr).delete(delete_vr),
        )
        .route("/v1/vrs/{name}/restart", post(restart_vr))
        .route("/v1/vrs/{name}/move", post(move_vr))
        .route("/v1/vrs/{name}/vnics", get(list_vnics).post(add_vnic))
        .route(
            "/v1/vrs/{name}/vnics/{index}",
            axum::routing::delete(delete_vnic),
        )
        .route("/v1/rules", get(list_rules).post(add_rule))
        .route(
            "/v1/rules/{index}",
            axum::routing::put(update_rule).delete(delete_rule),
        )
        .route(
            "/v1/vrs/{name}/routes",
            get(list_routes).post(add_route).delete(delete_route),
        )
        .route("/v1/vrs/{name}/routes/bulk", post(bulk_routes))
        .route("/v1/vrs/{name}/capture", get(capture))
        .route("/v1/stats", get(stats))
        .route("/v1/cluster", get(cluster))
        .route("/v1/cluster/vrs", post(add_cluster_vr))
        .route(
            "/v1/cluster/vrs/{name}",
            axum::routing::delete(remove_cluster_vr),
        )
        .route("/v1/cluster/vrs/{name}/rate", post(cluster_rate))
        .route("/metrics", get(metrics))
        .route("/v1/openapi.yaml", get(openapi))
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "bad_request",
                "method not allowed on this endpoint",
            )
        })
        .with_state(state)
}

/// [`router`] behind a bearer-token check, for TCP.
pub fn tcp_router(state: Arc<ApiState>) -> Router {
    let token = state.token.clone();
    router(state).layer(axum::middleware::from_fn(
        move |req: Request, next: Next| {
            let want = token.clone();
            async move {
                let got = req
                    .headers()
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "));
                match (want, got) {
                    (Some(w), Some(g)) if constant_time_eq(w.as_bytes(), g.as_bytes()) => {
                        next.run(req).await
                    }
                    (_, Some(_)) => ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "unauthorized",
                        "wrong bearer token",
                    )
                    .into_response(),
                    (_, None) => ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "unauthorized",
                        "a bearer token is required (Authorization: Bearer ...)",
                    )
                    .into_response(),
                }
            }
        },
    ))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The nice value of the control plane's work (the data path's threads
/// run at 0): the daemon's main thread, and the controller's work for the
/// API but a move's, and a large body's parse ([`in_background`]). The
/// API's own threads run at 0 and do little but read requests and wait,
/// so that a request is not kept waiting a scheduler slice (3.5 ms
/// measured) behind a busy data path before its work starts.
pub const CONTROL_NICE: i32 = 10;

/// Run `f` on the controller, off the async threads (it waits for the
/// worker and for VR processes), at [`CONTROL_NICE`]: the control plane
/// yields to the data path.
async fn with_ctl<T, F>(st: &Arc<ApiState>, f: F) -> ApiResult<T>
where
    T: Send + 'static,
    F: FnOnce(&mut Controller) -> ApiResult<T> + Send + 'static,
{
    run_ctl(st, CONTROL_NICE, f).await
}

/// As [`with_ctl`], at the data path's priority (nice 0), for a change
/// the data path waits on: a move, whose switch comes after the config is
/// parsed and diffed. At nice 10 beside a saturated slow path that work
/// (half a millisecond of CPU) took 8-9 ms of a move's switch-over.
async fn with_ctl_urgent<T, F>(st: &Arc<ApiState>, f: F) -> ApiResult<T>
where
    T: Send + 'static,
    F: FnOnce(&mut Controller) -> ApiResult<T> + Send + 'static,
{
    run_ctl(st, 0, f).await
}

async fn run_ctl<T, F>(st: &Arc<ApiState>, nice: i32, f: F) -> ApiResult<T>
where
    T: Send + 'static,
    F: FnOnce(&mut Controller) -> ApiResult<T> + Send + 'static,
{
    let st = st.clone();
    off_thread(nice, move || {
        let mut c = st
            .ctl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut c)
    })
    .await
}

/// Run `f` on a blocking thread at nice value `nice`.
async fn off_thread<T, F>(nice: i32, f: F) -> ApiResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> ApiResult<T> + Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        // Best effort: without CAP_SYS_NICE the thread keeps its own.
        let _nice = vrhost_host::cpu::NiceFor::set(nice);
        f()
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
}

/// Read a JSON body of at most `limit` bytes, sent as `application/json`.
async fn json_value(req: Request, limit: usize) -> ApiResult<Value> {
    let bytes = json_bytes(req, limit).await?;
    parse_json(&bytes)
}

/// The bytes of a body of at most `limit` bytes, sent as
/// `application/json`, not parsed yet.
async fn json_bytes(req: Request, limit: usize) -> ApiResult<Bytes> {
    let (parts, body) = req.into_parts();
    let media = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim());
    if !media.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "the body must be sent as Content-Type: application/json, not {}",
                media.map_or("none".into(), |m| format!("{m:?}"))
            ),
        ));
    }
    axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("request body larger than {limit} bytes"),
        )
    })
}

fn parse_json(bytes: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad(format!("body: {e}")))
}

/// Run `f` off the async thread at [`CONTROL_NICE`], without the
/// controller: for the work of a large body (a bulk of 100,000 routes is
/// 134 ms of CPU to parse and check), which must yield to the data path
/// as the controller's work does.
async fn in_background<T, F>(f: F) -> ApiResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> ApiResult<T> + Send + 'static,
{
    off_thread(CONTROL_NICE, f).await
}

/// A JSON body that fits schema `schema` of the API document, its `null`
/// members dropped (see [`crate::contract`]).
async fn json_object(req: Request, limit: usize, schema: &str) -> ApiResult<Map<String, Value>> {
    let v = json_value(req, limit).await?;
    crate::contract::body(schema, v).map_err(ApiError::bad)
}

/// A JSON body as `T`, once it fits schema `schema` of the API document.
async fn json_body<T: DeserializeOwned>(req: Request, limit: usize, schema: &str) -> ApiResult<T> {
    let o = json_object(req, limit, schema).await?;
    typed(Value::Object(o))
}

/// `v` (which fits its schema) as `T`; an error names the field.
fn typed<T: DeserializeOwned>(v: Value) -> ApiResult<T> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        ApiError::bad(format!("{path}: {}", e.inner()))
    })
}

fn query(q: Option<String>) -> BTreeMap<String, String> {
    form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

fn query_num(
    q: &BTreeMap<String, String>,
    key: &str,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> ApiResult<usize> {
    match q.get(key) {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(ApiError::bad(format!(
                "{key}={v:?}: expected an integer {}..={}",
                range.start(),
                range.end()
            ))),
        },
    }
}

fn index(s: &str) -> ApiResult<usize> {
    s.parse()
        .map_err(|_| ApiError::not_found(format!("{s:?}: not an index")))
}

// ---- config document editing ----

fn array<'a>(doc: &'a mut toml::Table, key: &str) -> &'a mut Vec<toml::Value> {
    let v = doc
        .entry(key.to_string())
        .or_insert_with(|| toml::Value::Array(Vec::new()));
    if !v.is_array() {
        *v = toml::Value::Array(Vec::new());
    }
    v.as_array_mut().expect("made an array")
}

fn str_field<'a>(v: &'a toml::Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(toml::Value::as_str)
}

fn vr_pos(doc: &toml::Table, name: &str) -> Option<usize> {
    doc.get("vrs")?
        .as_array()?
        .iter()
        .position(|v| str_field(v, "name") == Some(name))
}

/// The position of VR `name` in the document's `vrs`, or a 404.
fn find_vr(doc: &toml::Table, name: &str) -> ApiResult<usize> {
    vr_pos(doc, name).ok_or_else(|| ApiError::not_found(format!("no VR {name:?}")))
}

/// The table of the VR at `pos` (from [`find_vr`]), to change.
fn vr_table_mut(doc: &mut toml::Table, pos: usize) -> ApiResult<&mut toml::Table> {
    array(doc, "vrs")[pos]
        .as_table_mut()
        .ok_or_else(|| ApiError::bad("the VR's entry is not a table"))
}

/// A value that fits the document but not the TOML config.
fn unrepresentable(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message)
}

/// A JSON value (which fits its schema, `null` members dropped) as TOML;
/// an error names the field at `path`.
fn to_toml(v: Value, path: &str) -> ApiResult<toml::Value> {
    Ok(match v {
        Value::Null => {
            return Err(unrepresentable(format!(
                "{path}: null: the config has no null (leave the member out)"
            )));
        }
        Value::Bool(b) => toml::Value::Boolean(b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => toml::Value::Integer(i),
            (None, Some(u), _) => {
                return Err(unrepresentable(format!(
                    "{path}: {u}: at most {} (the largest integer of the config)",
                    i64::MAX
                )));
            }
            (None, None, f) => toml::Value::Float(f.unwrap_or(f64::NAN)),
        },
        Value::String(s) => toml::Value::String(s),
        Value::Array(a) => toml::Value::Array(
            a.into_iter()
                .enumerate()
                .map(|(i, x)| to_toml(x, &format!("{path}[{i}]")))
                .collect::<ApiResult<_>>()?,
        ),
        Value::Object(o) => toml::Value::Table(
            o.into_iter()
                .map(|(k, x)| {
                    let at = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    Ok((k, to_toml(x, &at)?))
                })
                .collect::<ApiResult<_>>()?,
        ),
    })
}

fn to_json(v: &toml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Split a VR spec (JSON) into its `[[vrs]]` table and its rules.
fn vr_spec(
    mut obj: Map<String, Value>,
    name: Option<&str>,
) -> ApiResult<(String, toml::Value, Vec<toml::Value>, bool)> {
    let vr_name = match (obj.get("name"), name) {
        (None, Some(n)) => {
            obj.insert("name".into(), n.into());
            n.to_string()
        }
        (Some(Value::String(s)), Some(n)) if s != n => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                format!("name {s:?} in the body differs from {n:?} in the path"),
            ));
        }
        (Some(Value::String(s)), _) => s.clone(),
        (Some(_), _) => return Err(ApiError::bad("name: expected a string")),
        (None, None) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                "name: a new VR needs one",
            ));
        }
    };
    let has_rules = obj.contains_key("rules");
    let rules = match obj.remove("rules") {
        None => Vec::new(),
        Some(Value::Array(rs)) => {
            let mut out = Vec::new();
            for (i, mut r) in rs.into_iter().enumerate() {
                let ro = r
                    .as_object_mut()
                    .ok_or_else(|| ApiError::bad(format!("rules[{i}]: expected an object")))?;
                // As a GET shows it; ignored on input.
                ro.remove("index");
                if ro.contains_key("position") {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "invalid",
                        format!(
                            "rules[{i}].position: a VR's rules are appended in order; `position` is for POST /v1/rules"
                        ),
                    ));
                }
                match ro.get("vr") {
                    None => {
                        ro.insert("vr".into(), vr_name.clone().into());
                    }
                    Some(Value::String(s)) if *s == vr_name => {}
                    Some(_) => {
                        return Err(ApiError::new(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "invalid",
                            format!("rules[{i}].vr: a VR's rules must point at it"),
                        ));
                    }
                }
                out.push(to_toml(r, &format!("rules[{i}]"))?);
            }
            out
        }
        Some(_) => return Err(ApiError::bad("rules: expected an array")),
    };
    let table = to_toml(Value::Object(obj), "")?;
    Ok((vr_name, table, rules, has_rules))
}

/// An error of a change to the VR at `pos` of the config, its fields named
/// as in the request's body (`slots: ...`, not `vrs[3].slots: ...`).
fn in_vr(e: ControlError, pos: usize) -> ApiError {
    let prefix = format!("vrs[{pos}].");
    match e {
        ControlError::Invalid(m) if m.starts_with(&prefix) => {
            ControlError::Invalid(m[prefix.len()..].to_string()).into()
        }
        e => e.into(),
    }
}

fn rule_json(i: usize, r: &toml::Value) -> Value {
    let mut v = to_json(r);
    if let Some(o) = v.as_object_mut() {
        o.insert("index".into(), i.into());
    }
    v
}

fn rules_of(doc: &toml::Table) -> Vec<Value> {
    doc.get("rules")
        .and_then(toml::Value::as_array)
        .map(|rs| {
            rs.iter()
                .enumerate()
                .map(|(i, r)| rule_json(i, r))
                .collect()
        })
        .unwrap_or_default()
}

/// The VR as `GET /v1/vrs/{name}` shows it.
fn vr_status(c: &Controller, stats: Option<&VrCounters>, name: &str) -> ApiResult<VrStatus> {
    let doc = c.doc();
    let pos = find_vr(doc, name)?;
    let table = &doc["vrs"].as_array().expect("found in it")[pos];
    let mut spec = to_json(table);
    let rules: Vec<Value> = rules_of(doc)
        .into_iter()
        .filter(|r| r["vr"] == name)
        .collect();
    spec["rules"] = Value::Array(rules);
    let kind = str_field(table, "kind").unwrap_or("router");
    let owned;
    let stats = match stats {
        Some(s) => s,
        None => {
            owned = view::snapshot(c)?
                .vrs
                .into_iter()
                .find(|v| v.name == name)
                .ok_or_else(|| ApiError::not_found(format!("no VR {name:?}")))?;
            &owned
        }
    };
    Ok(VrStatus {
        name: name.to_string(),
        kind: kind.to_string(),
        state: stats.state.clone(),
        spec: typed(spec)?,
        stats: stats.stats.clone(),
        instances: stats.instances.clone(),
        api_routes: c.api_routes(name).map_or(0, BTreeMap::len) as u64,
        path: c.vr_path(name).name().to_string(),
        auto: c
            .plan()
            .vrs
            .iter()
            .any(|v| v.name == name && v.auto.is_some()),
        fast_unavailable: c
            .has_fast_path()
            .then(|| c.fast_unavailable(name))
            .flatten(),
    })
}

/// A 201 answer whose `Location` is what was made (VR names are URL-safe).
fn created(location: String, body: impl IntoResponse) -> Response {
    let mut r = (StatusCode::CREATED, body).into_response();
    if let Ok(v) = HeaderValue::from_str(&location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

// ---- handlers ----

async fn health(State(st): State<Arc<ApiState>>) -> ApiResult<Response> {
    with_ctl(&st, |c| {
        let s = view::snapshot(c)?;
        let slots = c.check_slot_accounting()?;
        let up = s.vrs.iter().filter(|v| v.state == "running").count();
        let ok = up == s.vrs.len() && slots.is_empty();
        Ok(axum::Json(Health {
            status: if ok { "ok" } else { "degraded" }.into(),
            slot_accounting: slots,
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_s: s.uptime_s,
            generation: s.generation,
            vrs_up: up as u64,
            vrs: s.vrs.len() as u64,
        })
        .into_response())
    })
    .await
}

async fn get_config(State(st): State<Arc<ApiState>>) -> ApiResult<Response> {
    with_ctl(&st, |c| {
        let doc = ConfigDoc {
            generation: c.generation(),
            toml: c.toml().to_string(),
        };
        Ok(axum::Json(doc).into_response())
    })
    .await
}

async fn apply(State(st): State<Arc<ApiState>>, req: Request) -> ApiResult<Response> {
    let req: ApplyRequest = json_body(req, MAX_BODY, "ApplyRequest").await?;
    with_ctl(&st, move |c| {
        let r = c.apply_toml(&req.toml, req.dry_run)?;
        Ok(axum::Json(r).into_response())
    })
    .await
}

/// Stream a VR's frames as pcap (see [`crate::capture`]). Every refusal
/// comes before the first byte; the controller is needed only to attach
/// (its lock is not held while streaming), and the capture thread detaches.
async fn capture(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let params = crate::capture::CaptureParams::from_query(&query(q))?;
    let chunks = with_ctl(&st, move |c| {
        if !c.plan().vrs.iter().any(|v| v.name == name) {
            return Err(ApiError::not_found(format!("no VR {name:?}")));
        }
        let filter = params
            .filter
            .as_deref()
            .map(crate::capture::compile_filter)
            .transpose()?;
        let worker_cpu = c.plan().host.cpu;
        Ok(crate::capture::start(
            c.mailbox(),
            worker_cpu,
            &name,
            params,
            filter,
        )?)
    })
    .await?;
    let body = futures_util::stream::unfold(chunks, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, std::convert::Infallible>(chunk), rx))
    });
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/vnd.tcpdump.pcap"),
        )],
        Body::from_stream(body),
    )
        .into_response())
}

async fn stats(State(st): State<Arc<ApiState>>) -> ApiResult<Response> {
    with_ctl(&st, |c| Ok(axum::Json(view::snapshot(c)?).into_response())).await
}

async fn cluster(State(st): State<Arc<ApiState>>) -> ApiResult<Response> {
    with_ctl(&st, |c| Ok(axum::Json(c.cluster_status()).into_response())).await
}

/// Change a remote VR's rate in the cluster's desired state (etcd): checked
/// against the registered engines' capacity, refused while etcd is down.
async fn cluster_rate(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
    req: Request,
) -> ApiResult<Response> {
    let body: vrhost_api::ClusterRateRequest =
        json_body(req, MAX_BODY, "ClusterRateRequest").await?;
    let vr = name.clone();
    let (etcd, lease) = with_ctl(&st, move |c| Ok(c.cluster_rate_check(&vr, body.rate)?)).await?;
    write_rate(&etcd, lease, &name, body.rate)
        .await
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", e))?;
    Ok(axum::Json(vrhost_api::ClusterRateResult {
        vr: name,
        rate_pps: body.rate,
    })
    .into_response())
}

#[cfg(feature = "etcd")]
async fn write_rate(
    etcd: &vrhost_host::cluster::desired::EtcdPlan,
    lease: i64,
    vr: &str,
    rate: f64,
) -> Result<(), String> {
    crate::etcd::write_rate(etcd, lease, vr, rate)
        .await
        .map_err(|e| {
            format!("etcd: {e}: the change is not made; the data path forwards with its last state")
        })
}

#[cfg(not(feature = "etcd"))]
async fn write_rate(
    _: &vrhost_host::cluster::desired::EtcdPlan,
    _: i64,
    _: &str,
    _: f64,
) -> Result<(), String> {
    Err("this vrhost is built without etcd".into())
}

async fn metrics(State(st): State<Arc<ApiState>>) -> ApiResult<Response> {
    with_ctl(&st, |c| {
        let s = view::snapshot(c)?;
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
        );
        Ok((h, crate::metrics::render(&s, &c.cluster_status())).into_response())
    })
    .await
}

async fn openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/yaml"),
        )],
        OPENAPI,
    )
        .into_response()
}
