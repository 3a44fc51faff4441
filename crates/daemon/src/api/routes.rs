//! The API's routes of a VR: list (paged), add, delete, bulk changes.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;
use vrhost_api::{Route, RoutePage};
use vrhost_router::RouteConfig;

use super::{
    ApiError, ApiResult, ApiState, MAX_BODY, MAX_BULK_BODY, MAX_BULK_ROUTES, MAX_OFFSET,
    in_background, json_body, json_bytes, parse_json, query, query_num, typed, with_ctl,
};

pub(super) fn route_of(r: &RouteConfig) -> Route {
    Route {
        prefix: r.prefix.clone(),
        via: r.via.clone(),
        vnic: r.vnic,
        nexthop: r.nexthop,
        origin: None,
    }
}

pub(super) async fn list_routes(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let q = query(q);
    let offset = query_num(&q, "offset", 0, 0..=MAX_OFFSET)?;
    let limit = query_num(&q, "limit", 1000, 1..=100_000)?;
    let origin = q.get("origin").map_or("runtime", String::as_str);
    let want: &[&str] = match origin {
        "runtime" => &["api", "control-plane"],
        "all" => &["config", "api", "control-plane"],
        "config" => &["config"],
        "api" => &["api"],
        "control-plane" => &["control-plane"],
        o => {
            return Err(ApiError::bad(format!(
                "origin {o:?}: runtime, all, config, api or control-plane"
            )));
        }
    };
    with_ctl(&st, move |c| {
        let (total, routes) = c
            .routes_by_origin(&name, want, offset, limit)
            .ok_or_else(|| ApiError::not_found(format!("no VR {name:?}")))?;
        let page = RoutePage {
            total: total as u64,
            offset: offset as u64,
            routes: (routes.into_iter())
                .map(|(origin, r)| Route {
                    origin: Some(origin.into()),
                    ..route_of(&r)
                })
                .collect(),
        };
        Ok(axum::Json(page).into_response())
    })
    .await
}

pub(super) async fn add_route(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
    req: Request,
) -> ApiResult<Response> {
    let r: RouteConfig = json_body(req, MAX_BODY, "Route").await?;
    with_ctl(&st, move |c| {
        let res = c.change_routes(&name, vec![r], Vec::new())?;
        Ok((StatusCode::CREATED, axum::Json(res)).into_response())
    })
    .await
}

pub(super) async fn delete_route(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let prefix = query(q)
        .remove("prefix")
        .ok_or_else(|| ApiError::bad("query parameter `prefix` is required"))?;
    with_ctl(&st, move |c| {
        let res = c.change_routes(&name, Vec::new(), vec![prefix])?;
        Ok(axum::Json(res).into_response())
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Bulk {
    #[serde(default)]
    add: Vec<RouteConfig>,
    #[serde(default)]
    del: Vec<String>,
}

pub(super) async fn bulk_routes(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
    req: Request,
) -> ApiResult<Response> {
    let bytes = json_bytes(req, MAX_BULK_BODY).await?;
    let b = in_background(move || bulk_body(&bytes)).await?;
    with_ctl(&st, move |c| {
        let res = c.change_routes(&name, b.add, b.del)?;
        Ok(axum::Json(res).into_response())
    })
    .await
}

/// A bulk body parsed and checked against its schema.
fn bulk_body(bytes: &[u8]) -> ApiResult<Bulk> {
    let v = parse_json(bytes)?;
    let n: usize = ["add", "del"]
        .iter()
        .filter_map(|k| v.get(k).and_then(Value::as_array).map(Vec::len))
        .sum();
    if n > MAX_BULK_ROUTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("{n} routes in one request: at most {MAX_BULK_ROUTES}"),
        ));
    }
    typed(Value::Object(
        crate::contract::body("RouteBulk", v).map_err(ApiError::bad)?,
    ))
}
