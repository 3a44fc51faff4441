//! The slips of issue 25.

use serde_json::{Value, json};

use crate::client::{Api, Http};

/// The slips of issue 25: each refused with a 4xx whose message names the
/// JSON field (never the daemon's TOML rendering or a host path), or taken
/// as the document says. Leaves the config as it found it.
pub(crate) fn contract_slips(http: &Http, api: &Api) {
    not_json(http, api);
    field_errors(api);
    bounds_and_nulls(api);
}

/// A body that is not a JSON object of the request's kind.
fn not_json(http: &Http, api: &Api) {
    // A body that is not sent as JSON is refused, whatever it holds (an
    // apply of `{"toml": ""}` as text/plain wiped the config).
    for ct in [
        Some("text/plain"),
        Some("multipart/form-data; boundary=x"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let (st, _, b) = http.typed("POST", "/v1/apply", ct, Some(br#"{"toml":""}"#.to_vec()));
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(st, 415, "{ct:?}: {v}");
        assert_eq!(v["error"]["code"], "unsupported_media_type", "{v}");
        api.c.check("/v1/apply", "post", st, &v);
    }
    let (st, _, _) = http.typed(
        "POST",
        "/v1/apply",
        Some("application/json; charset=utf-8"),
        Some(br#"{"toml":"x","dry_run":true,"y":1}"#.to_vec()),
    );
    assert_eq!(
        st, 400,
        "a charset parameter is fine; the extra field is not"
    );
    // A JSON array is not an apply request (serde reads a struct from one).
    let msg = refused_with(
        api,
        "POST",
        "/v1/apply",
        "/v1/apply",
        json!(["", true]),
        400,
    );
    assert!(msg.starts_with("body: "), "{msg}");
}

/// Type errors and bounds name the JSON field and the real bound.
fn field_errors(api: &Api) {
    for (extra, field, words) in [
        (
            json!({ "slots": "many" }),
            "slots",
            vec!["\"many\"", "integer"],
        ),
        (json!({ "slots": -1 }), "slots", vec!["minimum of 2"]),
        (json!({ "cpu": 1e30 }), "cpu", vec!["maximum of 8191"]),
        (json!({ "memory": 5 }), "memory", vec![]),
        (json!({ "user": [] }), "user", vec![]),
        (json!({ "router": 3 }), "router", vec!["object"]),
        (
            json!({ "vnics": [{ "port": 5 }] }),
            "vnics[0].port",
            vec!["string"],
        ),
        (
            json!({ "scale": { "up_pps": 0, "down_pps": 1, "max": 2 } }),
            "scale.up_pps",
            vec!["minimum of 1"],
        ),
    ] {
        let msg = refused_with(api, "POST", "/v1/vrs", "/v1/vrs", vr(extra.clone()), 400);
        assert!(msg.starts_with(&format!("{field}: ")), "{extra}: {msg}");
        for w in words {
            assert!(msg.contains(w), "{extra}: {w:?} not in {msg}");
        }
        assert!(!msg.contains("line"), "{extra}: {msg}");
    }
    let msg = refused_with(
        api,
        "POST",
        "/v1/rules",
        "/v1/rules",
        json!({ "vr": "a", "position": 18446744073709551616u128 as f64 }),
        400,
    );
    assert!(
        msg.starts_with("position: ") && msg.contains("maximum"),
        "{msg}"
    );
    let msg = refused_with(
        api,
        "POST",
        "/v1/rules",
        "/v1/rules",
        json!({ "vr": "a", "vlan": 4096 }),
        400,
    );
    assert!(msg.starts_with("vlan: ") && msg.contains("4095"), "{msg}");
}

/// A CPU this host does not have, the bounds on queries, nulls.
fn bounds_and_nulls(api: &Api) {
    // A CPU this host does not have: refused up front, no host path.
    let msg = refused_with(
        api,
        "POST",
        "/v1/vrs",
        "/v1/vrs",
        vr(json!({ "cpu": 4096 })),
        422,
    );
    assert!(msg.starts_with("cpu: CPU 4096: this host has"), "{msg}");
    assert!(!msg.contains("/sys"), "{msg}");
    // The document's bounds on queries.
    api.refused(
        "GET",
        "/v1/vrs/{name}/routes",
        "/v1/vrs/a/routes?limit=0",
        None,
        400,
    );
    // null is absent where a field may be left out (and not where it
    // may not).
    let nulls = vr(json!({
        "router": null, "config": null, "memory": null, "user": null, "cpu": null,
        "kind": null, "scale": null, "rules": null, "restart": null,
    }));
    let v = api.ok("POST", "/v1/vrs", "/v1/vrs", Some(nulls), 201);
    assert_eq!(v["state"], "running", "{v}");
    api.ok("DELETE", "/v1/vrs/{name}", "/v1/vrs/n", None, 204);
    let msg = refused_with(
        api,
        "POST",
        "/v1/vrs",
        "/v1/vrs",
        vr(json!({ "vnics": null })),
        400,
    );
    assert!(msg.starts_with("vnics: null"), "{msg}");
    let r = api.ok(
        "POST",
        "/v1/vrs/{name}/routes",
        "/v1/vrs/a/routes",
        Some(json!({ "prefix": "198.51.100.0/24", "via": "10.9.1.2", "nexthop": null, "vnic": null })),
        201,
    );
    assert_eq!(r["added"], 1);
    api.ok(
        "DELETE",
        "/v1/vrs/{name}/routes",
        "/v1/vrs/a/routes?prefix=198.51.100.0/24",
        None,
        200,
    );
    let msg = refused_with(
        api,
        "POST",
        "/v1/vrs/{name}/routes",
        "/v1/vrs/a/routes",
        json!({ "prefix": "198.51.100.0/24", "nexthop": "x" }),
        400,
    );
    assert!(msg.starts_with("nexthop: "), "{msg}");
}

/// A refused request's message.
fn refused_with(
    api: &Api,
    method: &str,
    template: &str,
    path: &str,
    body: Value,
    want: u16,
) -> String {
    let (st, v) = api.call(method, template, path, Some(body.clone()));
    assert_eq!(st, want, "{method} {path} {body}: {v}");
    v["error"]["message"].as_str().unwrap().to_string()
}

/// A VR spec with `extra` fields.
fn vr(extra: Value) -> Value {
    let mut v = json!({
        "name": "n", "slots": 256,
        "vnics": [{ "port": "out", "mac": "02:00:00:0e:00:01", "addrs": ["10.9.9.1/24"] }],
    });
    v.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    v
}
