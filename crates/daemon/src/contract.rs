//! The API document (`api/openapi.yaml`) as the check of request bodies.
//!
//! Every JSON body is checked against its schema in the document before the
//! server reads it, so the document and the server cannot disagree on what
//! a body may hold: its fields, their types, their bounds, and which may be
//! `null` (OpenAPI's `nullable`, which stands for an absent field). A body
//! the document refuses is a 400 naming the JSON field at fault; a body it
//! accepts may still be refused by the config's own checks (a 422).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::{Map, Value, json};

/// The API document served at `/v1/openapi.yaml`.
pub const OPENAPI: &str = include_str!("../../../api/openapi.yaml");

/// The document as JSON, with OpenAPI 3.0's `nullable` made JSON Schema
/// (a type list, or an `anyOf` with `null` where no type is given).
///
/// # Panics
/// If the document is not YAML (a unit test reads it).
pub fn document() -> &'static Value {
    static DOC: LazyLock<Value> = LazyLock::new(|| {
        let mut doc: Value = serde_yaml::from_str(OPENAPI).expect("api/openapi.yaml is YAML");
        denull(&mut doc);
        doc
    });
    &DOC
}

/// Make OpenAPI 3.0's `nullable: true` plain JSON Schema, in place.
pub fn denull(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.values_mut().for_each(denull);
            if o.remove("nullable") != Some(Value::Bool(true)) {
                return;
            }
            match o.get("type").cloned() {
                Some(Value::String(t)) => {
                    o.insert("type".into(), json!([t, "null"]));
                    // An `enum` lists the values allowed: null too.
                    if let Some(Value::Array(e)) = o.get_mut("enum") {
                        e.push(Value::Null);
                    }
                }
                _ => {
                    let inner = Value::Object(std::mem::take(o));
                    o.insert("anyOf".into(), json!([{ "type": "null" }, inner]));
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(denull),
        _ => {}
    }
}

/// Compile the document's validators now rather than on the first request
/// with a body: that takes tens of milliseconds of CPU (36 ms on an idle
/// machine), and done by the API at nice 10 beside a busy data path it
/// took a daemon's first `vr move` about a second.
pub fn warm() {
    LazyLock::force(&VALIDATORS);
}

/// One validator per schema of the document (`#/components/schemas/NAME`).
static VALIDATORS: LazyLock<BTreeMap<String, jsonschema::Validator>> = LazyLock::new(|| {
    let doc = document();
    doc["components"]["schemas"]
        .as_object()
        .expect("the document has schemas")
        .keys()
        .map(|name| {
            let root = json!({
                "$ref": format!("#/components/schemas/{name}"),
                "components": doc["components"],
            });
            let v = jsonschema::validator_for(&root)
                .unwrap_or_else(|e| panic!("schema {name} of api/openapi.yaml: {e}"));
            (name.clone(), v)
        })
        .collect()
});

/// The validator of schema `name` of the document.
fn validator(name: &str) -> &'static jsonschema::Validator {
    VALIDATORS
        .get(name)
        .unwrap_or_else(|| panic!("no schema {name} in api/openapi.yaml"))
}

/// Check `body` against schema `name` of the document.
///
/// # Errors
/// The first of the document's objections, naming the field at fault
/// (`vnics[0].port: ...`).
///
/// # Panics
/// If the document has no schema `name` (a bug of the caller).
pub fn check(name: &str, body: &Value) -> Result<(), String> {
    match validator(name).iter_errors(body).next() {
        None => Ok(()),
        Some(e) => {
            let (pointer, message) = explain(&e);
            Err(format!("{}: {message}", field_path(body, &pointer)))
        }
    }
}

/// Where an error is and what it says; for "valid under none of `anyOf`"
/// (a `nullable` field, a union), what its most telling branch says: the
/// one that got deepest into the value, not the `null` one.
fn explain(e: &jsonschema::ValidationError<'_>) -> (String, String) {
    use jsonschema::error::ValidationErrorKind as K;
    if let K::AnyOf { context } | K::OneOfNotValid { context } = &e.kind {
        let best = context
            .iter()
            .filter_map(|branch| branch.first())
            .filter(|b| !b.to_string().ends_with("is not of type \"null\""))
            .max_by_key(|b| b.instance_path.as_str().len());
        if let Some(b) = best {
            return explain(b);
        }
    }
    (e.instance_path.as_str().to_string(), e.to_string())
}

/// A JSON pointer into `body` as a field path: `vnics[0].port`, or `body`
/// for the whole.
fn field_path(body: &Value, pointer: &str) -> String {
    let mut out = String::new();
    let mut at = body;
    for seg in pointer.split('/').skip(1) {
        let key = seg.replace("~1", "/").replace("~0", "~");
        match at {
            Value::Array(a) => {
                out.push_str(&format!("[{key}]"));
                at = key
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| a.get(i))
                    .unwrap_or(&Value::Null);
            }
            _ => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&key);
                at = at.get(&key).unwrap_or(&Value::Null);
            }
        }
    }
    if out.is_empty() { "body".into() } else { out }
}

/// Remove every object member whose value is `null`, at every depth: the
/// document's `nullable` fields, which `null` leaves unset.
pub fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.retain(|_, x| !x.is_null());
            o.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// A checked request body: the document's schema `name` holds for it, and
/// its `null` members are gone.
///
/// # Errors
/// As [`check`].
pub fn body(name: &str, mut v: Value) -> Result<Map<String, Value>, String> {
    check(name, &v)?;
    drop_nulls(&mut v);
    match v {
        Value::Object(o) => Ok(o),
        _ => Err(format!("body: schema {name} is not an object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields a struct's `Deserialize` asks for (serde passes them to
    /// `deserialize_struct`), read without a value.
    fn fields_of<T: serde::de::DeserializeOwned>() -> Vec<&'static str> {
        use serde::de::{Error, Visitor, value};
        struct Probe<'a>(&'a mut Vec<&'static str>);
        impl<'de> serde::Deserializer<'de> for Probe<'_> {
            type Error = value::Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
                Err(Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                self.0.extend(fields);
                Err(Error::custom("probed"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
                bytes byte_buf option unit unit_struct newtype_struct seq tuple
                tuple_struct map enum identifier ignored_any
            }
        }
        let mut out = Vec::new();
        let _ = T::deserialize(Probe(&mut out));
        out.sort_unstable();
        out
    }

    /// The properties of a schema of the document (a pointer into it).
    fn properties(pointer: &str) -> Vec<String> {
        let mut p: Vec<String> = document()
            .pointer(pointer)
            .and_then(|s| s["properties"].as_object())
            .unwrap_or_else(|| panic!("{pointer}: no properties"))
            .keys()
            .cloned()
            .collect();
        p.sort_unstable();
        p
    }

    /// The API's types (`vrhost-api`, which the daemon answers with and
    /// the CLI reads) have the fields of their schemas, no more, no fewer.
    #[test]
    fn the_api_types_are_the_documents_schemas() {
        use vrhost_api as api;
        let s = |name: &str| format!("/components/schemas/{name}");
        let pairs: Vec<(Vec<&str>, String)> = vec![
            (fields_of::<api::ErrorBody>(), s("Error")),
            (
                fields_of::<api::ErrorDetail>(),
                s("Error") + "/properties/error",
            ),
            (fields_of::<api::Health>(), s("Health")),
            (fields_of::<api::ConfigDoc>(), s("ConfigDoc")),
            (fields_of::<api::ApplyRequest>(), s("ApplyRequest")),
            (fields_of::<api::ApplyResult>(), s("ApplyResult")),
            (fields_of::<api::Vnic>(), s("Vnic")),
            (fields_of::<api::Rule>(), s("Rule")),
            (fields_of::<api::VrSpec>(), s("VrSpec")),
            (fields_of::<api::InstanceStatus>(), s("InstanceStatus")),
            (fields_of::<api::VnicStats>(), s("VnicStats")),
            (fields_of::<api::VrStats>(), s("VrStats")),
            (fields_of::<api::VrStatus>(), s("VrStatus")),
            (fields_of::<api::PortStats>(), s("PortStats")),
            (fields_of::<api::HostStats>(), s("HostStats")),
            (fields_of::<api::Stats>(), s("Stats")),
            (
                fields_of::<api::VrCounters>(),
                s("Stats") + "/properties/vrs/items",
            ),
            (fields_of::<api::Route>(), s("Route")),
            (fields_of::<api::RouteResult>(), s("RouteResult")),
            (fields_of::<api::RoutePage>(), s("RoutePage")),
        ];
        for (fields, pointer) in pairs {
            assert_eq!(fields, properties(&pointer), "{pointer}");
        }
        // The one type that is only written: its fields, by value.
        let bulk = api::RouteBulk {
            add: &[api::Route::default()],
            del: &[String::new()],
        };
        let v = serde_json::to_value(bulk).unwrap();
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort_unstable();
        assert_eq!(keys, properties(&s("RouteBulk")));
    }

    #[test]
    fn the_document_compiles_and_names_fields() {
        for name in document()["components"]["schemas"]
            .as_object()
            .unwrap()
            .keys()
        {
            validator(name);
        }
        let vr = json!({ "name": "a", "slots": -1, "vnics": [{ "port": "p" }] });
        let e = check("VrSpec", &vr).unwrap_err();
        assert!(
            e.starts_with("slots: -1 is less than the minimum of 2"),
            "{e}"
        );
        let vr = json!({ "name": "a", "vnics": [{ "port": 7 }] });
        assert!(
            check("VrSpec", &vr)
                .unwrap_err()
                .starts_with("vnics[0].port: 7")
        );
        assert!(
            check("VrSpec", &json!([1]))
                .unwrap_err()
                .starts_with("body: ")
        );
        assert!(check("ApplyRequest", &json!(["x", true])).is_err());
    }

    #[test]
    fn nullable_fields_read_as_absent() {
        let vr = json!({
            "name": "a", "vnics": [{ "port": "p", "mac": null }],
            "router": null, "config": null, "memory": null, "user": null, "cpu": null,
        });
        let o = body("VrSpec", vr).unwrap();
        assert_eq!(
            Value::Object(o),
            json!({ "name": "a", "vnics": [{ "port": "p" }] })
        );
        // A required field is not nullable.
        let e = check(
            "VrSpec",
            &json!({ "name": null, "vnics": [{ "port": "p" }] }),
        );
        assert!(e.unwrap_err().starts_with("name: null"));
        let e = check(
            "Route",
            &json!({ "prefix": "10.0.0.0/8", "nexthop": null, "via": 5 }),
        );
        assert!(e.unwrap_err().starts_with("via: 5"));
        // The config has no null: a member of an open table may be null
        // (left out), an element of an array may not.
        let vr = json!({ "name": "a", "vnics": [{ "port": "p" }], "config": { "x": null } });
        assert!(check("VrSpec", &vr).is_ok());
        let vr = json!({ "name": "a", "vnics": [{ "port": "p" }], "config": { "x": [1, null] } });
        let e = check("VrSpec", &vr).unwrap_err();
        assert!(e.starts_with("config.x[1]: null"), "{e}");
    }
}
