//! `docs/config.md` documents every key of the daemon's TOML config, and
//! only those: the keys the code accepts are read from the config types
//! themselves, by a deserializer that records the field names serde hands
//! to each `deserialize_struct` while it walks them, so a field added to
//! (or removed from) a config struct fails this test until the reference
//! says so.
//!
//! The defaults the reference gives for scalar keys are checked against the
//! code's too (`documented_defaults_are_the_codes`), from the config types'
//! `Default`s and from what a config that leaves the keys out is planned as.
//!
//! A key is written as its path: `host.poll.sleep_ms`, `ports[].frames`,
//! `vrs[].router.arp.probes` (`[]`: each element of an array of tables).
//! The reference lists each key as the first cell of a table row, in
//! backquotes.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde::de::value::{BorrowedStrDeserializer, Error};
use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use vrhost_host::config::Config;
// The built-in router's config type: the `[vrs.router]` table of a VR is
// kept as TOML by the host's config and read into this type when the
// config is checked (`Config::router_config`).
use vrhost_router::RouterConfig;

/// Records the path of every field of every struct it is asked for.
struct Recorder<'a> {
    path: String,
    keys: &'a mut BTreeSet<String>,
}

impl<'a> Recorder<'a> {
    fn at(&mut self, path: String) -> Recorder<'_> {
        Recorder {
            path,
            keys: self.keys,
        }
    }
}

/// The path of key `field` of the table at `parent`.
fn join(parent: &str, field: &str) -> String {
    if parent.is_empty() {
        field.to_string()
    } else {
        format!("{parent}.{field}")
    }
}

/// Wrappers that serde crates pass through a struct with private field
/// names (toml's `Spanned`): not keys; their value field holds the key's
/// value.
fn is_private(name: &str) -> bool {
    name.starts_with("$__")
}

/// `Deserializer` methods that hand their visitor one fixed value:
/// `deserialize_u8 => visit_u64(0)` writes `deserialize_u8` as
/// `v.visit_u64(0)`.
macro_rules! scalars {
    ($($method:ident => $visit:ident($value:expr)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
                v.$visit($value)
            }
        )*
    };
}

impl<'de, 'a> de::Deserializer<'de> for Recorder<'a> {
    type Error = Error;

    // `toml::Value` (a key whose value may be of several types, or a table
    // passed on whole): an empty table.
    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_map(de::value::MapDeserializer::new(std::iter::empty::<(
            String,
            String,
        )>()))
    }

    // Scalars: each method visits this value of its kind.
    scalars! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_u64(0),
        deserialize_i16 => visit_u64(0),
        deserialize_i32 => visit_u64(0),
        deserialize_i64 => visit_u64(0),
        deserialize_u8 => visit_u64(0),
        deserialize_u16 => visit_u64(0),
        deserialize_u32 => visit_u64(0),
        deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f64(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char('x'),
        deserialize_str => visit_str(""),
        deserialize_string => visit_str(""),
        deserialize_bytes => visit_bytes(&[]),
        deserialize_byte_buf => visit_bytes(&[]),
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_some(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_newtype_struct(self)
    }

    /// One element, whose keys are recorded under `path[]`.
    fn deserialize_seq<V: Visitor<'de>>(mut self, v: V) -> Result<V::Value, Error> {
        let path = format!("{}[]", self.path);
        v.visit_seq(OneElement(Some(self.at(path))))
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, v: V) -> Result<V::Value, Error> {
        self.deserialize_seq(v)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        v: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_any(v)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        let private = is_private(name);
        if !private {
            for f in fields {
                self.keys.insert(join(&self.path, f));
            }
        }
        v.visit_map(Fields {
            fields: fields.iter(),
            private,
            keys: self.keys,
            parent: self.path,
            field: "",
        })
    }

    /// The first variant, as a unit variant (the config's enums are names).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_enum(variants[0].into_deserializer())
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_str(v)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_unit()
    }
}

/// A sequence of one element.
struct OneElement<'a>(Option<Recorder<'a>>);

impl<'de> de::SeqAccess<'de> for OneElement<'_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0.take().map(|r| seed.deserialize(r)).transpose()
    }
}

/// Every field of a struct, each with a value from a recorder at its path
/// (a private wrapper's value field: at the wrapper's own path; its other
/// fields, toml's span bounds, are numbers).
struct Fields<'a> {
    fields: std::slice::Iter<'static, &'static str>,
    private: bool,
    keys: &'a mut BTreeSet<String>,
    parent: String,
    field: &'static str,
}

impl<'de> de::MapAccess<'de> for Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some(&f) = self.fields.next() else {
            return Ok(None);
        };
        self.field = f;
        seed.deserialize(BorrowedStrDeserializer::new(f)).map(Some)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        let path = if !self.private {
            join(&self.parent, self.field)
        } else if self.field.ends_with("value") {
            self.parent.clone()
        } else {
            return seed.deserialize(0u64.into_deserializer());
        };
        seed.deserialize(Recorder {
            path,
            keys: self.keys,
        })
    }
}

/// The keys type `T` accepts, under `path`.
fn keys_of<'de, T: Deserialize<'de>>(path: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let rec = Recorder {
        path: path.to_string(),
        keys: &mut keys,
    };
    T::deserialize(rec).unwrap_or_else(|e| panic!("walking the config types: {e}"));
    keys
}

/// Every key the daemon's config accepts.
fn code_keys() -> BTreeSet<String> {
    let mut keys = keys_of::<Config>("");
    // `[vrs.router]` is kept as a TOML table by the host and read as the
    // router's config, whose `vnics`, `control_vnics` and `control_all`
    // the host fills from the VR's own `vnics`, control plane and kind
    // (and refuses in the table: checked below).
    let router = keys_of::<RouterConfig>("vrs[].router");
    let host_filled = |k: &String| {
        [
            "vrs[].router.vnics",
            "vrs[].router.control_vnics",
            "vrs[].router.control_all",
        ]
        .iter()
        .any(|f| k == f || k.starts_with(&format!("{f}[]")))
    };
    keys.extend(router.into_iter().filter(|k| !host_filled(k)));
    keys
}

/// The text of `docs/config.md`.
fn config_md() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/config.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The keys `docs/config.md` documents: the first cell of each table row,
/// when it is in backquotes.
fn documented_keys() -> BTreeSet<String> {
    let text = config_md();
    let mut keys = BTreeSet::new();
    for line in text.lines() {
        let Some(row) = line.strip_prefix("| `") else {
            continue;
        };
        let key = row.split('`').next().unwrap_or_default();
        assert!(keys.insert(key.to_string()), "{key} documented twice");
    }
    keys
}

#[test]
fn the_recorder_sees_nested_tables_arrays_and_spanned_fields() {
    let keys = code_keys();
    for k in [
        "host",
        "host.poll.sleep_ms",
        "ports[].name",
        "ports[].traffic.frame_bytes",
        "vrs[].vnics[].port",
        "vrs[].scale.up_pps",
        "vrs[].router.arp.probes",
        "rules[].vr",
    ] {
        assert!(keys.contains(k), "{k} not recorded: {keys:#?}");
    }
    assert!(!keys.iter().any(|k| k.contains("$__")), "{keys:#?}");
    assert!(!keys.contains("dir"), "a skipped field is no key");
}

#[test]
fn a_router_table_may_not_set_vnics() {
    let src = r#"
[[ports]]
name = "p0"
driver = "null"

[[vrs]]
name = "r"
vnics = [{ port = "p0", mac = "02:00:00:00:00:01" }]
[vrs.router]
vnics = [{ mac = "02:00:00:00:00:01" }]
"#;
    let e = Config::parse(src, "v.toml", std::path::Path::new("."))
        .map(|_| ())
        .unwrap_err();
    assert!(e.to_string().contains("vnics"), "{e}");
}

#[test]
fn docs_config_md_documents_every_key_and_no_other() {
    let code = code_keys();
    let docs = documented_keys();
    let missing: Vec<_> = code.difference(&docs).collect();
    let unknown: Vec<_> = docs.difference(&code).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "docs/config.md is out of date.\n  keys the config accepts that it does not document: \
         {missing:?}\n  keys it documents that the config does not accept: {unknown:?}"
    );
}

/// The default column of each documented key: the row's third cell.
fn documented_defaults() -> std::collections::BTreeMap<String, String> {
    let text = config_md();
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let key = cells[0].trim_start_matches("| ").trim_matches('`');
            (key.to_string(), cells[2].to_string())
        })
        .collect()
}

/// A documented default as the code would print it: its first word, without
/// backquotes (`"flow"`, `24301 (0x5eed)`, `["10.1.2.3/32"]`).
fn first_word(cell: &str) -> String {
    let cell = cell.trim();
    match cell.strip_prefix('`').and_then(|c| c.split_once('`')) {
        Some((quoted, _)) => quoted.to_string(),
        None => cell
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string(),
    }
}

#[test]
fn documented_defaults_are_the_codes() {
    use serde_json::{Value, json};
    use vrhost_host::config::{GenConf, HostConf, PortRings};
    let mut code: Vec<(String, Value)> = Vec::new();
    let mut under = |prefix: &str, v: Value| {
        for (k, v) in v.as_object().expect("a struct") {
            if !v.is_object() && !v.is_null() && !v.as_array().is_some_and(Vec::is_empty) {
                code.push((format!("{prefix}.{k}"), v.clone()));
            }
        }
    };
    let host = HostConf::default();
    under(
        "host",
        json!({
            "quarantine_after": host.quarantine_after,
            "watchdog_ms": host.watchdog_ms,
            "start_idle_ms": host.start_idle_ms,
            "confine": host.confine,
            "share_worker_core": host.share_worker_core,
        }),
    );
    under("host.poll", serde_json::to_value(host.poll).unwrap());
    let xdp = PortRings::default().af_xdp();
    under(
        "ports[]",
        json!({ "ring_size": xdp.ring_size, "frames": xdp.frames }),
    );
    let g = GenConf::default();
    under(
        "ports[].traffic",
        json!({
            "frame_bytes": g.frame_bytes, "dst": g.dst, "src": g.src,
            "dst_mac": g.dst_mac, "seed": g.seed,
        }),
    );
    let router = serde_json::to_value(RouterConfig::default()).unwrap();
    under("vrs[].router.arp", router["arp"].clone());
    under("vrs[].router.icmp", router["icmp"].clone());
    // What a VR, a scaling VR and a rule get when they leave keys out.
    let src = r#"
[[ports]]
name = "p0"
driver = "null"

[[vrs]]
name = "a"
vnics = [{ port = "p0", mac = "02:00:00:00:00:01" }]

[[vrs]]
name = "b"
vnics = [{ port = "p0", mac = "02:00:00:00:00:02" }]
cpus = [0]
scale = { up_pps = 2, down_pps = 1, max = 1 }

[[rules]]
vr = "a"
"#;
    let (cfg, plan) = Config::parse(src, "v.toml", std::path::Path::new(".")).unwrap();
    let (v, p) = (&cfg.vrs[0], &plan.vrs[0]);
    let vrhost_host::alloc::ScalePolicy::Dynamic(d) = plan.vrs[1].scale else {
        panic!("vr b scales");
    };
    under(
        "vrs[]",
        json!({
            "kind": match v.kind { vrhost_host::config::VrKind::Router => "router", _ => "program" },
            "slots": *v.slots.get_ref(),
            "instances": p.instances,
            "balance": p.balance.to_string(),
            "restart": v.restart,
            "weight": p.sched.weight,
            "priority": if p.sched.high_priority { "high" } else { "normal" },
        }),
    );
    under(
        "vrs[].scale",
        json!({ "period_ms": d.period.as_millis() as u64, "min": d.min }),
    );
    under("rules[]", json!({ "vnic": *cfg.rules[0].vnic.get_ref() }));

    let docs = documented_defaults();
    let mut wrong = Vec::new();
    for (key, value) in &code {
        let want = match value {
            Value::String(s) => format!("\"{s}\""),
            v => v.to_string(),
        };
        match docs.get(key) {
            Some(cell) if first_word(cell) == want => {}
            Some(cell) => wrong.push(format!("{key}: documented {cell:?}, the code's {want}")),
            None => wrong.push(format!("{key}: not documented")),
        }
    }
    assert!(code.len() >= 30, "{code:?}");
    assert!(
        wrong.is_empty(),
        "docs/config.md defaults:\n{}",
        wrong.join("\n")
    );
}
