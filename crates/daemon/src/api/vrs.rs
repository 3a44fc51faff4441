//! The API's VRs and their vNICs: list, read, create, replace, delete,
//! restart.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::view;

use super::{
    ApiError, ApiResult, ApiState, MAX_BODY, array, created, find_vr, in_vr, index, json_body,
    json_object, rules_of, str_field, to_json, to_toml, vr_pos, vr_spec, vr_status, vr_table_mut,
    with_ctl, with_ctl_urgent,
};

pub(super) async fn list_vrs(State(st): State<Arc<ApiState>>) -> ApiResult<Response> {
    with_ctl(&st, |c| {
        let s = view::snapshot(c)?;
        let out = s
            .vrs
            .iter()
            .map(|v| vr_status(c, Some(v), &v.name))
            .collect::<ApiResult<Vec<_>>>()?;
        Ok(axum::Json(out).into_response())
    })
    .await
}

pub(super) async fn get_vr(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    with_ctl(&st, move |c| {
        Ok(axum::Json(vr_status(c, None, &name)?).into_response())
    })
    .await
}

pub(super) async fn create_vr(
    State(st): State<Arc<ApiState>>,
    req: Request,
) -> ApiResult<Response> {
    let body = json_object(req, MAX_BODY, "VrSpec").await?;
    let (name, table, rules, _) = vr_spec(body, None)?;
    with_ctl(&st, move |c| {
        let mut doc = c.doc().clone();
        if vr_pos(&doc, &name).is_some() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!("VR {name:?} exists"),
            ));
        }
        let pos = array(&mut doc, "vrs").len();
        array(&mut doc, "vrs").push(table);
        array(&mut doc, "rules").extend(rules);
        c.apply_doc(doc, false).map_err(|e| in_vr(e, pos))?;
        let status = vr_status(c, None, &name)?;
        Ok(created(format!("/v1/vrs/{name}"), axum::Json(status)))
    })
    .await
}

pub(super) async fn update_vr(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
    req: Request,
) -> ApiResult<Response> {
    let body = json_object(req, MAX_BODY, "VrSpecUpdate").await?;
    let (name, table, rules, has_rules) = vr_spec(body, Some(&name))?;
    with_ctl(&st, move |c| {
        let mut doc = c.doc().clone();
        let pos = find_vr(&doc, &name)?;
        array(&mut doc, "vrs")[pos] = table;
        if has_rules {
            let rs = array(&mut doc, "rules");
            rs.retain(|r| str_field(r, "vr") != Some(name.as_str()));
            rs.extend(rules);
        }
        c.apply_doc(doc, false).map_err(|e| in_vr(e, pos))?;
        Ok(axum::Json(vr_status(c, None, &name)?).into_response())
    })
    .await
}

pub(super) async fn delete_vr(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    with_ctl(&st, move |c| {
        let mut doc = c.doc().clone();
        let pos = find_vr(&doc, &name)?;
        array(&mut doc, "vrs").remove(pos);
        array(&mut doc, "rules").retain(|r| str_field(r, "vr") != Some(name.as_str()));
        c.apply_doc(doc, false)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

pub(super) async fn restart_vr(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    with_ctl(&st, move |c| {
        let r = c.restart_vr(&name)?;
        Ok(axum::Json(r).into_response())
    })
    .await
}

/// `POST /v1/vrs/{name}/move`: the VR's `path` set in the config in
/// force, applied as a diff (a move: its select entries switched, its
/// processes kept).
pub(super) async fn move_vr(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
    req: Request,
) -> ApiResult<Response> {
    let body: vrhost_api::MoveRequest = json_body(req, MAX_BODY, "MoveRequest").await?;
    with_ctl_urgent(&st, move |c| {
        let mut doc = c.doc().clone();
        let pos = find_vr(&doc, &name)?;
        let t = vr_table_mut(&mut doc, pos)?;
        t.insert("path".into(), toml::Value::String(body.path));
        let r = c.apply_doc(doc, false).map_err(|e| in_vr(e, pos))?;
        Ok(axum::Json(r).into_response())
    })
    .await
}

pub(super) async fn list_vnics(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    with_ctl(&st, move |c| {
        let doc = c.doc();
        let pos = find_vr(doc, &name)?;
        let vnics = doc["vrs"][pos]
            .get("vnics")
            .map(to_json)
            .unwrap_or(json!([]));
        Ok(axum::Json(vnics).into_response())
    })
    .await
}

pub(super) async fn add_vnic(
    State(st): State<Arc<ApiState>>,
    Path(name): Path<String>,
    req: Request,
) -> ApiResult<Response> {
    let body = json_object(req, MAX_BODY, "Vnic").await?;
    let vnic = to_toml(Value::Object(body), "")?;
    with_ctl(&st, move |c| {
        let mut doc = c.doc().clone();
        let pos = find_vr(&doc, &name)?;
        let vr = vr_table_mut(&mut doc, pos)?;
        let vnics = array(vr, "vnics");
        vnics.push(vnic);
        let ix = vnics.len() - 1;
        c.apply_doc(doc, false).map_err(|e| in_vr(e, pos))?;
        let status = vr_status(c, None, &name)?;
        Ok(created(
            format!("/v1/vrs/{name}/vnics/{ix}"),
            axum::Json(status),
        ))
    })
    .await
}

pub(super) async fn delete_vnic(
    State(st): State<Arc<ApiState>>,
    Path((name, ix)): Path<(String, String)>,
) -> ApiResult<Response> {
    let ix = index(&ix)?;
    with_ctl(&st, move |c| {
        let mut doc = c.doc().clone();
        let pos = find_vr(&doc, &name)?;
        let used = rules_of(&doc).iter().any(|r| {
            r["vr"] == name.as_str()
                && r.get("vnic").and_then(Value::as_u64).unwrap_or(0) == ix as u64
        });
        let vr = vr_table_mut(&mut doc, pos)?;
        let vnics = array(vr, "vnics");
        if ix >= vnics.len() {
            return Err(ApiError::not_found(format!("VR {name:?} has no vNIC {ix}")));
        }
        if ix + 1 != vnics.len() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!(
                    "only the last vNIC ({}) can be removed: the others' numbers must not change",
                    vnics.len() - 1
                ),
            ));
        }
        if used {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!("a rule sends frames to vNIC {ix} of {name:?}: remove it first"),
            ));
        }
        vnics.pop();
        c.apply_doc(doc, false)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}
