//! The API's classifier rules: list, add, replace, delete.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::{
    ApiError, ApiResult, ApiState, MAX_BODY, array, created, index, json_object, rules_of, to_toml,
    typed, with_ctl,
};

pub(super) async fn list_rules(State(st): State<Arc<ApiState>>) -> ApiResult<Response> {
    with_ctl(&st, |c| Ok(axum::Json(rules_of(c.doc())).into_response())).await
}

/// A rule from a request body (which fits the `Rule` schema): `position`
/// and `index` taken out.
pub(super) fn rule_body(mut obj: Map<String, Value>) -> ApiResult<(toml::Value, Option<usize>)> {
    obj.remove("index");
    let position = obj.remove("position").map(typed::<usize>).transpose()?;
    Ok((to_toml(Value::Object(obj), "")?, position))
}

pub(super) async fn add_rule(State(st): State<Arc<ApiState>>, req: Request) -> ApiResult<Response> {
    let body = json_object(req, MAX_BODY, "Rule").await?;
    let (rule, position) = rule_body(body)?;
    with_ctl(&st, move |c| {
        let mut doc = c.doc().clone();
        let rs = array(&mut doc, "rules");
        let at = position.unwrap_or(rs.len());
        if at > rs.len() {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                format!("position {at}: there are {} rules", rs.len()),
            ));
        }
        rs.insert(at, rule);
        c.apply_doc(doc, false)?;
        Ok(created(
            format!("/v1/rules/{at}"),
            axum::Json(rules_of(c.doc())),
        ))
    })
    .await
}

pub(super) async fn update_rule(
    State(st): State<Arc<ApiState>>,
    Path(ix): Path<String>,
    req: Request,
) -> ApiResult<Response> {
    let ix = index(&ix)?;
    let body = json_object(req, MAX_BODY, "Rule").await?;
    let (rule, _) = rule_body(body)?;
    with_ctl(&st, move |c| {
        let mut doc = c.doc().clone();
        let rs = array(&mut doc, "rules");
        let slot = rs
            .get_mut(ix)
            .ok_or_else(|| ApiError::not_found(format!("no rule {ix}")))?;
        *slot = rule;
        c.apply_doc(doc, false)?;
        Ok(axum::Json(rules_of(c.doc())).into_response())
    })
    .await
}

pub(super) async fn delete_rule(
    State(st): State<Arc<ApiState>>,
    Path(ix): Path<String>,
) -> ApiResult<Response> {
    let ix = index(&ix)?;
    with_ctl(&st, move |c| {
        let mut doc = c.doc().clone();
        let rs = array(&mut doc, "rules");
        if ix >= rs.len() {
            return Err(ApiError::not_found(format!("no rule {ix}")));
        }
        rs.remove(ix);
        c.apply_doc(doc, false)?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}
