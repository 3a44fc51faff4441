//! The daemon's API against its contract (`api/openapi.yaml`), with a real
//! daemon forwarding in memory (a paced `mem` generator port into two
//! router VRs, out to a `null` port): every documented operation is called,
//! every JSON answer is validated against the document's schema, hostile
//! requests get a 4xx JSON error and change nothing, the metrics pass
//! `promtool check metrics`, and the VRs a change does not touch lose no
//! packet while VRs are added, changed and removed beside them.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::daemon::run;
use common::{Daemon, Lab, TempDir, vr, wait_drained};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};

/// Frames the generator sends in all (at `PPS`, about 6 s).
const FRAMES: u64 = 60_000;
const PPS: u64 = 10_000;

/// VRs a and b, paced.
fn config() -> String {
    Lab::two_vrs().paced(PPS).limit(FRAMES).to_toml()
}

/// Where an [`Http`] client connects.
enum Target {
    /// The daemon's API socket.
    Unix(PathBuf),
    /// Its API on 127.0.0.1 at this port.
    Tcp(u16),
}

/// `req` on a new HTTP/1 connection over `stream`.
async fn exchange<S>(
    stream: S,
    req: hyper::Request<Full<Bytes>>,
) -> hyper::Result<hyper::Response<hyper::body::Incoming>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    send.send_request(req).await
}

/// An HTTP/1 client of the daemon's API, a connection per request.
struct Http {
    to: Target,
    rt: tokio::runtime::Runtime,
}

impl Http {
    fn new(to: Target) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Self { to, rt }
    }

    /// One request with `headers`; returns status, Content-Type and body
    /// bytes.
    fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> (u16, String, Vec<u8>) {
        self.rt.block_on(async {
            let host = match &self.to {
                Target::Unix(_) => "localhost".to_string(),
                Target::Tcp(port) => format!("127.0.0.1:{port}"),
            };
            let mut req = hyper::Request::builder()
                .method(method)
                .uri(format!("http://{host}{path}"));
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            let req = req
                .body(Full::new(Bytes::from(body.unwrap_or_default())))
                .unwrap();
            let resp = match &self.to {
                Target::Unix(sock) => {
                    exchange(tokio::net::UnixStream::connect(sock).await.unwrap(), req).await
                }
                Target::Tcp(port) => {
                    let s = tokio::net::TcpStream::connect(("127.0.0.1", *port));
                    exchange(s.await.unwrap(), req).await
                }
            };
            // A server that refuses a huge body may answer and close
            // before the client has written it all: status 0.
            let Ok(resp) = resp else {
                return (0, String::new(), Vec::new());
            };
            let status = resp.status().as_u16();
            let ct = resp
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            (status, ct, bytes.to_vec())
        })
    }

    /// One request; returns status and body bytes.
    fn raw(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> (u16, Vec<u8>) {
        let (st, _, b) = self.typed(method, path, Some("application/json"), body);
        (st, b)
    }

    /// One request with a body of type `content_type` (none: no
    /// Content-Type); returns status, Content-Type and body bytes.
    fn typed(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> (u16, String, Vec<u8>) {
        let headers: Vec<_> = content_type
            .map(|t| ("content-type", t))
            .into_iter()
            .collect();
        self.send(method, path, &headers, body)
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let (st, b) = self.raw(method, path, body.map(|v| v.to_string().into_bytes()));
        let v = if b.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&b).unwrap_or_else(|e| {
                panic!(
                    "{method} {path}: not JSON ({e}): {}",
                    String::from_utf8_lossy(&b)
                )
            })
        };
        (st, v)
    }
}

/// The API document with its schemas made plain JSON Schema (OpenAPI 3.0's
/// `nullable` made a type list), as the daemon reads it.
struct Contract {
    doc: Value,
}

impl Contract {
    fn load() -> Self {
        Self {
            doc: vrhost_daemon::contract::document().clone(),
        }
    }

    /// The response schema of an operation for a status, if it has JSON.
    fn schema(&self, path: &str, method: &str, status: u16) -> Option<Value> {
        let op = &self.doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path}: not in the API document");
        let resp = &op["responses"][status.to_string()];
        assert!(
            resp.is_object(),
            "{method} {path}: status {status} not documented"
        );
        let resp = match resp.get("$ref").and_then(Value::as_str) {
            Some(r) => &self.doc["components"]["responses"][r.rsplit('/').next().unwrap()],
            None => resp,
        };
        let s = resp["content"]["application/json"]["schema"].clone();
        (!s.is_null()).then_some(s)
    }

    /// Check `body` against the documented answer.
    fn check(&self, path: &str, method: &str, status: u16, body: &Value) {
        let Some(schema) = self.schema(path, method, status) else {
            return;
        };
        let mut root = schema;
        root["components"] = self.doc["components"].clone();
        let v = jsonschema::validator_for(&root).unwrap();
        let errors: Vec<String> = v
            .iter_errors(body)
            .map(|e| format!("{e} at {}", e.instance_path))
            .collect();
        assert!(
            errors.is_empty(),
            "{method} {path} {status}: answer does not match the API document: {errors:?}\n{body}"
        );
    }
}

/// A request and the documented path template it exercises.
struct Api<'a> {
    http: &'a Http,
    c: &'a Contract,
    hit: std::cell::RefCell<std::collections::BTreeSet<(String, String)>>,
}

impl Api<'_> {
    fn call(&self, method: &str, template: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let (st, v) = self.http.call(method, path, body);
        let m = method.to_lowercase();
        self.c.check(template, &m, st, &v);
        self.hit.borrow_mut().insert((m, template.to_string()));
        (st, v)
    }

    fn ok(
        &self,
        method: &str,
        template: &str,
        path: &str,
        body: Option<Value>,
        want: u16,
    ) -> Value {
        let (st, v) = self.call(method, template, path, body);
        assert_eq!(st, want, "{method} {path}: {v}");
        v
    }

    fn refused(&self, method: &str, template: &str, path: &str, body: Option<Value>, want: u16) {
        let (st, v) = self.call(method, template, path, body);
        assert_eq!(st, want, "{method} {path}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{v}"
        );
    }
}

#[test]
fn api_matches_its_document_refuses_bad_input_and_changes_lose_nothing() {
    let d = Daemon::start("api-contract", &config());
    let http = Http::new(Target::Unix(d.sock.clone()));
    let c = Contract::load();
    let api = Api {
        http: &http,
        c: &c,
        hit: Default::default(),
    };

    let cl = api.ok("GET", "/v1/cluster", "/v1/cluster", None, 200);
    assert_eq!(cl["role"], json!("none"), "{cl}");
    let h = api.ok("GET", "/v1/health", "/v1/health", None, 200);
    assert_eq!(h["status"], "ok");
    assert_eq!(h["vrs"], 2);
    // Traffic flows through both VRs.
    let t = Instant::now();
    loop {
        let s = api.ok("GET", "/v1/stats", "/v1/stats", None, 200);
        if vr(&s, "a")["stats"]["tx_packets"].as_u64() > Some(100)
            && vr(&s, "b")["stats"]["tx_packets"].as_u64() > Some(100)
        {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no traffic: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // VRs beside the running ones: add, show, change, remove.
    let spec = json!({
        "name": "c", "slots": 256,
        "vnics": [
            { "port": "gen", "mac": "02:00:00:0c:00:01", "addrs": ["10.3.0.1/24"] },
            { "port": "out", "mac": "02:00:00:0c:01:01", "addrs": ["10.9.3.1/24"] }
        ],
        "router": { "neighbours": [{ "ip": "10.9.3.2", "mac": "02:00:00:00:99:04" }] },
        "rules": [{ "port": "gen", "dst": "10.3.0.0/16" }]
    });
    let v = api.ok("POST", "/v1/vrs", "/v1/vrs", Some(spec.clone()), 201);
    assert_eq!(v["state"], "running");
    assert_eq!(v["spec"]["rules"][0]["vr"], "c");
    api.refused("POST", "/v1/vrs", "/v1/vrs", Some(spec.clone()), 409);
    let list = api.ok("GET", "/v1/vrs", "/v1/vrs", None, 200);
    assert_eq!(list.as_array().unwrap().len(), 3);
    api.ok("GET", "/v1/vrs/{name}", "/v1/vrs/c", None, 200);
    let mut changed = spec.clone();
    changed["slots"] = json!(128);
    let v = api.ok("PUT", "/v1/vrs/{name}", "/v1/vrs/c", Some(changed), 200);
    assert_eq!(v["stats"]["pool_slots"], 128);

    // vNICs.
    let v = api.ok("GET", "/v1/vrs/{name}/vnics", "/v1/vrs/c/vnics", None, 200);
    assert_eq!(v.as_array().unwrap().len(), 2);
    api.ok(
        "POST",
        "/v1/vrs/{name}/vnics",
        "/v1/vrs/c/vnics",
        Some(json!({ "port": "out", "mac": "02:00:00:0c:02:01" })),
        201,
    );
    api.refused(
        "DELETE",
        "/v1/vrs/{name}/vnics/{index}",
        "/v1/vrs/c/vnics/0",
        None,
        409,
    );
    api.ok(
        "DELETE",
        "/v1/vrs/{name}/vnics/{index}",
        "/v1/vrs/c/vnics/2",
        None,
        204,
    );
    api.refused(
        "DELETE",
        "/v1/vrs/{name}/vnics/{index}",
        "/v1/vrs/c/vnics/9",
        None,
        404,
    );

    // Rules.
    let rules = api.ok("GET", "/v1/rules", "/v1/rules", None, 200);
    assert_eq!(rules.as_array().unwrap().len(), 3);
    let r = api.ok(
        "POST",
        "/v1/rules",
        "/v1/rules",
        Some(json!({ "port": "gen", "dst": "10.4.0.0/16", "vr": "c", "position": 0 })),
        201,
    );
    assert_eq!(r[0]["dst"], "10.4.0.0/16");
    api.ok(
        "PUT",
        "/v1/rules/{index}",
        "/v1/rules/0",
        Some(json!({ "port": "gen", "dst": "10.5.0.0/16", "vr": "c" })),
        200,
    );
    api.ok("DELETE", "/v1/rules/{index}", "/v1/rules/0", None, 204);

    // Routes.
    let r = api.ok(
        "POST",
        "/v1/vrs/{name}/routes",
        "/v1/vrs/c/routes",
        Some(json!({ "prefix": "192.0.2.0/24", "via": "10.9.3.2" })),
        201,
    );
    assert_eq!(r["api_routes"], 1);
    let bulk: Vec<Value> = (0..3000)
        .map(|i| json!({ "prefix": format!("172.{}.{}.0/24", 16 + i / 256, i % 256), "via": "10.9.3.2" }))
        .collect();
    let r = api.ok(
        "POST",
        "/v1/vrs/{name}/routes/bulk",
        "/v1/vrs/c/routes/bulk",
        Some(json!({ "add": bulk })),
        200,
    );
    assert_eq!(r["added"], 3000);
    assert_eq!(r["api_routes"], 3001);
    let page = api.ok(
        "GET",
        "/v1/vrs/{name}/routes",
        "/v1/vrs/c/routes?offset=10&limit=5",
        None,
        200,
    );
    assert_eq!(page["total"], 3001);
    assert_eq!(page["routes"].as_array().unwrap().len(), 5);
    // A bad route in a bulk request: none of it is applied.
    let mut bad: Vec<Value> = (0..1500)
        .map(|i| json!({ "prefix": format!("198.18.{}.{}/32", i / 256, i % 256), "via": "10.9.3.2" }))
        .collect();
    bad.push(json!({ "prefix": "198.19.0.0/16", "via": "10.77.0.1" }));
    api.refused(
        "POST",
        "/v1/vrs/{name}/routes/bulk",
        "/v1/vrs/c/routes/bulk",
        Some(json!({ "add": bad })),
        422,
    );
    let page = api.ok(
        "GET",
        "/v1/vrs/{name}/routes",
        "/v1/vrs/c/routes",
        None,
        200,
    );
    assert_eq!(
        page["total"], 3001,
        "a refused bulk request changed nothing"
    );
    let r = api.ok(
        "DELETE",
        "/v1/vrs/{name}/routes",
        "/v1/vrs/c/routes?prefix=192.0.2.0/24",
        None,
        200,
    );
    assert_eq!(r["deleted"], 1);

    // Hostile input: a clear 4xx, nothing changes.
    let before = api.ok("GET", "/v1/config", "/v1/config", None, 200);
    let mut unnamed = spec.clone();
    unnamed.as_object_mut().unwrap().remove("name");
    let cases: Vec<(&str, &str, &str, Option<Value>, u16)> = vec![
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
    ];
    for (m, t, p, b, want) in cases {
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
    contract_slips(&http, &api);
    let after = api.ok("GET", "/v1/config", "/v1/config", None, 200);
    assert_eq!(before["toml"], after["toml"]);

    // Apply the whole file: dry run, then for real; c goes away.
    let file = std::fs::read_to_string(d.config_file()).unwrap();
    let r = api.ok(
        "POST",
        "/v1/apply",
        "/v1/apply",
        Some(json!({ "toml": file, "dry_run": true })),
        200,
    );
    assert_eq!(r["removed"], json!(["c"]));
    assert_eq!(r["unchanged"], json!(["a", "b"]));
    api.ok("GET", "/v1/vrs/{name}", "/v1/vrs/c", None, 200);
    api.ok(
        "POST",
        "/v1/apply",
        "/v1/apply",
        Some(json!({ "toml": file })),
        200,
    );
    api.refused("GET", "/v1/vrs/{name}", "/v1/vrs/c", None, 404);
    api.ok("POST", "/v1/vrs", "/v1/vrs", Some(spec.clone()), 201);
    // A restart: a new process takes over, nothing else changes.
    let r = api.ok(
        "POST",
        "/v1/vrs/{name}/restart",
        "/v1/vrs/c/restart",
        None,
        200,
    );
    assert_eq!(r["restarted"], json!(["c"]));
    // A move to where it is: applied, nothing moved.
    let r = api.ok(
        "POST",
        "/v1/vrs/{name}/move",
        "/v1/vrs/c/move",
        Some(json!({ "path": "slow" })),
        200,
    );
    assert_eq!(r["moved"], json!([]), "{r}");
    let h = api.ok("GET", "/v1/health", "/v1/health", None, 200);
    assert_eq!(h["slot_accounting"], json!([]), "{h:#}");
    api.ok("DELETE", "/v1/vrs/{name}", "/v1/vrs/c", None, 204);

    // Metrics: a real parser accepts them.
    let (st, m) = http.raw("GET", "/metrics", None);
    assert_eq!(st, 200);
    api.hit
        .borrow_mut()
        .insert(("get".into(), "/metrics".into()));
    let m = String::from_utf8(m).unwrap();
    assert!(m.contains("vrhost_vr_tx_packets_total{vr=\"a\"}"), "{m}");
    promtool_check(&m);
    let (st, ct, doc) = http.typed("GET", "/v1/openapi.yaml", None, None);
    assert_eq!(st, 200);
    assert_eq!(ct, "application/yaml");
    let doc: Value = serde_yaml::from_slice(&doc).unwrap();
    let schema = &c.doc["paths"]["/v1/openapi.yaml"]["get"]["responses"]["200"]["content"]["application/yaml"]
        ["schema"];
    assert!(
        jsonschema::is_valid(schema, &doc),
        "the document does not fit its own description: {schema}"
    );
    api.hit
        .borrow_mut()
        .insert(("get".into(), "/v1/openapi.yaml".into()));

    // Every documented operation was called (capture is tested apart).
    for (path, ops) in c.doc["paths"].as_object().unwrap() {
        for m in ops
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "parameters")
        {
            if path.ends_with("/capture") {
                continue;
            }
            assert!(
                api.hit.borrow().contains(&(m.clone(), path.clone())),
                "{m} {path} not tested"
            );
        }
    }

    // The VRs nobody touched lost nothing: once the generator is done and
    // the rings are empty, everything given to them came out.
    let s = wait_drained(&["a", "b"], FRAMES, || {
        api.ok("GET", "/v1/stats", "/v1/stats", None, 200)
    });
    // Everything the VRs accepted came out (the loop above waited for
    // rx == tx), nothing was dropped inside or at the out port, and every
    // generated frame is accounted for. Frames the host could not hand to
    // a VR in time (ring full: the VR was not scheduled, e.g. on a busy
    // machine) are counted drops, not losses of the change mechanism;
    // `vrhost bench control` measures those.
    let mut total = 0;
    for name in ["a", "b"] {
        let st = &vr(&s, name)["stats"];
        let drops: u64 = st["ingress_drops"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        let full = st["ingress_drops"]["ring_full"].as_u64().unwrap()
            + st["ingress_drops"]["pool_empty"].as_u64().unwrap();
        assert_eq!(
            drops, full,
            "VR {name}: drops other than a full ring or pool: {st}"
        );
        assert_eq!(st["vr_dropped"], 0, "{st}");
        assert_eq!(st["port_dropped"], 0, "{st}");
        total += st["rx_packets"].as_u64().unwrap() + drops;
    }
    // The generator sends only to a's and b's prefixes.
    assert_eq!(total, FRAMES, "{s}");
}

/// The slips of issue 25: each refused with a 4xx whose message names the
/// JSON field (never the daemon's TOML rendering or a host path), or taken
/// as the document says. Leaves the config as it found it.
fn contract_slips(http: &Http, api: &Api) {
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

    let vr = |extra: Value| {
        let mut v = json!({
            "name": "n", "slots": 256,
            "vnics": [{ "port": "out", "mac": "02:00:00:0e:00:01", "addrs": ["10.9.9.1/24"] }],
        });
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    // Type errors and bounds name the JSON field and the real bound.
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

/// On TCP the API wants the bearer token; without a token file the daemon
/// refuses to serve TCP at all.
#[test]
fn tcp_needs_a_bearer_token() {
    let dir = TempDir::new("api-tcp-refused");
    let cfg = dir.path().join("daemon.toml");
    std::fs::write(&cfg, config()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
        .args([
            "daemon",
            "--api",
            "none",
            "--api-tcp",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--token-file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    const TOKEN: &str = "s3cret-token-of-enough-length";
    let d = Daemon::start_tcp("api-tcp", &config(), TOKEN);
    let port = d.tcp_port.unwrap();
    let http = Http::new(Target::Tcp(port));
    let get = |auth: Option<&str>| -> (u16, String) {
        let headers: Vec<_> = auth.map(|a| ("authorization", a)).into_iter().collect();
        let (st, _, b) = http.send("GET", "/v1/health", &headers, None);
        (st, String::from_utf8_lossy(&b).into_owned())
    };
    let (st, body) = get(None);
    assert_eq!(st, 401, "{body}");
    assert!(body.contains("unauthorized"), "{body}");
    let (st, body) = get(Some("Bearer wrong"));
    assert_eq!(st, 401, "{body}");
    let (st, body) = get(Some(&format!("Bearer {TOKEN}")));
    assert_eq!(st, 200, "{body}");
    // The CLI takes the address as --api-tcp does, with or without the
    // scheme.
    for api in [
        format!("127.0.0.1:{port}"),
        format!("http://127.0.0.1:{port}"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_vrhost"))
            .args(["health", "--api", &api, "--token", TOKEN])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "--api {api}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn promtool_check(text: &str) {
    use std::io::Write;
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus, installed by scripts/install)");
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The CLI is a client of the API: tables, `-o json`, route import in
/// bulk, and a non-zero exit with the daemon's message on a refusal.
#[test]
fn cli_drives_a_running_daemon() {
    let d = Daemon::start("api-cli", &config());
    let s = d.sock.clone();

    let (ok, out, err) = run(&s, &["vr", "list"]);
    assert!(ok, "{err}");
    assert!(
        out.lines().any(|l| l.starts_with("a ")) && out.lines().any(|l| l.starts_with("b ")),
        "{out}"
    );
    let (ok, _, err) = run(&s, &["vr", "show", "nosuch"]);
    assert!(!ok);
    assert!(err.contains("no VR") && err.contains("not_found"), "{err}");

    let (ok, _, err) = run(
        &s,
        &["route", "add", "a", "192.0.2.0/24", "via", "10.9.1.2"],
    );
    assert!(ok, "{err}");
    let (ok, _, err) = run(
        &s,
        &["route", "add", "a", "198.51.100.0/24", "via", "10.77.0.1"],
    );
    assert!(!ok, "a gateway in no subnet is refused");
    assert!(err.contains("no connected subnet"), "{err}");

    // A route file of 25,000 routes, in three bulk requests.
    let file = d.dir().join("routes.txt");
    let text: String = (0..25_000u32)
        .map(|i| {
            format!(
                "{}.{}.{}.0/24\n",
                100 + i / 65_536,
                (i / 256) % 256,
                i % 256
            )
        })
        .collect();
    std::fs::write(&file, text).unwrap();
    let (ok, out, err) = run(
        &s,
        &[
            "route",
            "import",
            "a",
            file.to_str().unwrap(),
            "--via",
            "10.9.1.2",
            "-o",
            "json",
        ],
    );
    assert!(ok, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["routes"], 25_000, "{r}");
    assert_eq!(r["api_routes"], 25_001, "{r}");
    assert!(r["routes_per_second"].as_f64().unwrap() > 0.0, "{r}");

    let (ok, out, err) = run(&s, &["route", "list", "a", "-o", "json", "--limit", "3"]);
    assert!(ok, "{err}");
    let page: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(page["total"], 25_001);
    let (ok, _, err) = run(&s, &["route", "del", "a", "192.0.2.0/24"]);
    assert!(ok, "{err}");

    let (ok, out, err) = run(&s, &["stats", "-o", "json"]);
    assert!(ok, "{err}");
    let st: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(st["vrs"].as_array().unwrap().len(), 2);
    let (ok, out, err) = run(
        &s,
        &["apply", d.config_file().to_str().unwrap(), "--dry-run"],
    );
    assert!(ok, "{err}");
    assert!(out.contains('a') && out.contains('b'), "{out}");
    let (ok, out, _) = run(&s, &["top", "--once"]);
    assert!(ok);
    assert!(out.contains('a'), "{out}");
    drop(d);
    let (ok, _, err) = run(&s, &["health"]);
    assert!(!ok);
    assert!(
        err.contains("not running") || err.contains("nothing listens"),
        "{err}"
    );
}
