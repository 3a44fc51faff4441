//! Hostile requests: each a clear 4xx, and nothing changes.

use serde_json::{Value, json};

use crate::client::{Api, Http};
use crate::slips::contract_slips;

/// Every hostile request refused as documented, and the config as it was.
pub fn changes_nothing(http: &Http, api: &Api, spec: &Value) {
    let before = api.ok("GET", "/v1/config", "/v1/config", None, 200);
    for (m, t, p, b, want) in vr_cases(spec).into_iter().chain(rule_and_route_cases()) {
        api.refused(m, t, p, b, want);
    }
    // A huge body.
    let (st, v) = http.raw("POST", "/v1/vrs", Some(vec![b' '; 4 << 20]));
    assert!(st == 413 || st == 0, "{st} {}", String::from_utf8_lossy(&v));
    let (st, v) = http.raw("POST", "/v1/vrs", Some(vec![b' '; (1 << 20) + 10]));
    assert!(st == 413 || st == 0, "{st} {}", String::from_utf8_lossy(&v));
    let (st, _) = http.raw("POST", "/v1/vrs", Some(b"{\"name\": \"\xff\"}".to_vec()));
    assert_eq!(st, 400);
    let after = api.ok("GET", "/v1/config", "/v1/config", None, 200);
    assert_eq!(before, after, "refused requests changed the config");
    contract_slips(http, api);
    let after = api.ok("GET", "/v1/config", "/v1/config", None, 200);
    assert_eq!(before["toml"], after["toml"]);
}

/// A refused request: method, path template, path, body, status.
type Case = (&'static str, &'static str, &'static str, Option<Value>, u16);

/// Requests about VRs.
fn vr_cases(spec: &Value) -> Vec<Case> {
    let mut unnamed = spec.clone();
    unnamed.as_object_mut().unwrap().remove("name");
    vec![
        ("POST", "/v1/vrs", "/v1/vrs", Some(json!([1, 2])), 400),
        (
            "POST",
            "/v1/vrs",
            "/v1/vrs",
            Some(json!({ "name": 7, "vnics": [] })),
            400,
        ),
        (
            "POST",
            "/v1/vrs",
            "/v1/vrs",
            Some(json!({ "name": "x", "vnics": [{ "port": "nope" }] })),
            422,
        ),
        (
            "POST",
            "/v1/vrs",
            "/v1/vrs",
            Some(
                json!({ "name": "x", "vnics": [{ "port": "out", "mac": "02:00:00:00:00:09" }], "bogus": 1 }),
            ),
            400,
        ),
        (
            "POST",
            "/v1/vrs",
            "/v1/vrs",
            Some(
                json!({ "name": "../../etc", "vnics": [{ "port": "out", "mac": "02:00:00:00:00:09" }] }),
            ),
            400,
        ),
        (
            "POST",
            "/v1/vrs",
            "/v1/vrs",
            Some(
                json!({ "name": "x", "slots": -1, "vnics": [{ "port": "out", "mac": "02:00:00:00:00:09" }] }),
            ),
            400,
        ),
        (
            "PUT",
            "/v1/vrs/{name}",
            "/v1/vrs/nosuch",
            Some(unnamed),
            404,
        ),
        (
            "PUT",
            "/v1/vrs/{name}",
            "/v1/vrs/a",
            Some(spec.clone()),
            422,
        ),
        ("DELETE", "/v1/vrs/{name}", "/v1/vrs/nosuch", None, 404),
        (
            "POST",
            "/v1/vrs/{name}/restart",
            "/v1/vrs/nosuch/restart",
            None,
            404,
        ),
        (
            "POST",
            "/v1/vrs/{name}/move",
            "/v1/vrs/nosuch/move",
            Some(json!({ "path": "fast" })),
            404,
        ),
        (
            "POST",
            "/v1/vrs/{name}/move",
            "/v1/vrs/a/move",
            Some(json!({ "path": "kernel" })),
            400,
        ),
        // This daemon has no fast path.
        (
            "POST",
            "/v1/vrs/{name}/move",
            "/v1/vrs/a/move",
            Some(json!({ "path": "fast" })),
            422,
        ),
        ("GET", "/v1/vrs/{name}", "/v1/vrs/nosuch", None, 404),
    ]
}

/// Requests about rules, routes and whole configs.
fn rule_and_route_cases() -> Vec<Case> {
    vec![
        (
            "POST",
            "/v1/rules",
            "/v1/rules",
            Some(json!({ "dst": "10.0.0.0/40", "vr": "a" })),
            400,
        ),
        (
            "POST",
            "/v1/rules",
            "/v1/rules",
            Some(json!({ "dst": "10.0.0.0/8", "vr": "nosuch" })),
            422,
        ),
        (
            "POST",
            "/v1/rules",
            "/v1/rules",
            Some(json!({ "vr": "a", "position": 99 })),
            422,
        ),
        (
            "PUT",
            "/v1/rules/{index}",
            "/v1/rules/99",
            Some(json!({ "vr": "a" })),
            404,
        ),
        ("DELETE", "/v1/rules/{index}", "/v1/rules/x", None, 404),
        (
            "POST",
            "/v1/vrs/{name}/routes",
            "/v1/vrs/a/routes",
            Some(json!({ "prefix": "1.2.3.4/99", "via": "10.9.1.2" })),
            400,
        ),
        (
            "POST",
            "/v1/vrs/{name}/routes",
            "/v1/vrs/a/routes",
            Some(json!({ "prefix": "1.2.3.0/24" })),
            422,
        ),
        (
            "POST",
            "/v1/vrs/{name}/routes",
            "/v1/vrs/a/routes",
            Some(json!({ "prefix": 5 })),
            400,
        ),
        (
            "POST",
            "/v1/vrs/{name}/routes",
            "/v1/vrs/nosuch/routes",
            Some(json!({ "prefix": "1.2.3.0/24", "via": "10.9.1.2" })),
            404,
        ),
        (
            "DELETE",
            "/v1/vrs/{name}/routes",
            "/v1/vrs/a/routes?prefix=10.1.0.0/16",
            None,
            404,
        ),
        (
            "DELETE",
            "/v1/vrs/{name}/routes",
            "/v1/vrs/a/routes",
            None,
            400,
        ),
        (
            "GET",
            "/v1/vrs/{name}/routes",
            "/v1/vrs/a/routes?limit=abc",
            None,
            400,
        ),
        (
            "POST",
            "/v1/apply",
            "/v1/apply",
            Some(json!({ "toml": "[[vrs]]\nname = 3" })),
            422,
        ),
        (
            "POST",
            "/v1/apply",
            "/v1/apply",
            Some(json!({ "toml": "x", "extra": 1 })),
            400,
        ),
    ]
}
