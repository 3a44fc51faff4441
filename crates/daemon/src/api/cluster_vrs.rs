//! The API's remote VRs of a running dispatcher: added
//! (`POST /v1/cluster/vrs`) and removed (`DELETE /v1/cluster/vrs/{name}`)
//! as config changes (see `Controller::cluster_add`).

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{ApiError, ApiResult, ApiState, MAX_BODY, created, json_object, to_toml, with_ctl};

pub(super) async fn add_cluster_vr(
    State(st): State<Arc<ApiState>>,
    req: Request,
) -> ApiResult<Response> {
    let body = json_object(req, MAX_BODY, "ClusterVrSpec").await?;
    let toml::Value::Table(table) = to_toml(Value::Object(body), "body")? else {
        return Err(ApiError::bad("body: not an object"));
    };
    with_ctl(&st, move |c| {
        let status = c.cluster_add(table)?;
        let at = format!("/v1/cluster/vrs/{}", status.name);
        Ok(created(at, axum::Json(status)))
    })
    .await
}

pub(super) async fn remove_cluster_vr(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    with_ctl(&st, move |c| {
        c.cluster_remove(&name)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}
