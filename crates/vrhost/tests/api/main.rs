//! The daemon's API against its contract (`api/openapi.yaml`), with a real
//! daemon forwarding in memory (a paced `mem` generator port into two
//! router VRs, out to a `null` port): every documented operation is called,
//! every JSON answer is validated against the document's schema, hostile
//! requests get a 4xx JSON error and change nothing, the metrics pass
//! `promtool check metrics`, and the VRs a change does not touch lose no
//! packet while VRs are added, changed and removed beside them.

mod client;
#[path = "../common/mod.rs"]
mod common;
mod hostile;
mod slips;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use client::{Api, Contract, Http, Target};
use common::daemon::run;
use common::{Daemon, Lab, TempDir, vr, wait_drained};
use serde_json::{Value, json};

/// Frames the generator sends in all (at `PPS`, about 6 s).
const FRAMES: u64 = 60_000;
const PPS: u64 = 10_000;

/// VRs a and b, paced.
fn config() -> String {
    Lab::two_vrs().paced(PPS).limit(FRAMES).to_toml()
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
    traffic_flows(&api);
    let spec = vr_beside(&api);
    vnics(&api);
    rules(&api);
    routes(&api);
    hostile::changes_nothing(&http, &api, &spec);
    apply_restart_move(&api, &d, &spec);
    metrics_and_document(&http, &api, &c);
    every_operation_called(&api, &c);
    nothing_lost(&api);
}

/// The cluster and health answers, and traffic through both VRs.
fn traffic_flows(api: &Api) {
    let cl = api.ok("GET", "/v1/cluster", "/v1/cluster", None, 200);
    assert_eq!(cl["role"], json!("none"), "{cl}");
    // No dispatcher with etcd here: a change of the cluster's desired
    // state is refused (the netns tests of `cluster_etcd.rs` take one).
    let rate = "/v1/cluster/vrs/{name}/rate";
    let e = api.ok(
        "POST",
        rate,
        "/v1/cluster/vrs/r/rate",
        Some(json!({"rate": 1000.0})),
        409,
    );
    assert!(
        e["error"]["message"].as_str().unwrap().contains("etcd"),
        "{e}"
    );
    api.ok(
        "POST",
        rate,
        "/v1/cluster/vrs/r/rate",
        Some(json!({"pps": 1})),
        400,
    );
    // No dispatcher: remote VRs are neither added nor removed (the netns
    // test `cluster_runtime.rs` takes one).
    let q = json!({"name": "q", "id": 8, "ports": ["p0"], "engines": ["e1"]});
    let e = api.ok("POST", "/v1/cluster/vrs", "/v1/cluster/vrs", Some(q), 409);
    let says = |e: &Value| {
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no cluster dispatcher")
    };
    assert!(says(&e), "{e}");
    let bad = json!({"name": "q", "id": 0, "ports": ["p0"]});
    api.ok("POST", "/v1/cluster/vrs", "/v1/cluster/vrs", Some(bad), 400);
    let one = "/v1/cluster/vrs/{name}";
    let e = api.ok("DELETE", one, "/v1/cluster/vrs/q", None, 409);
    assert!(says(&e), "{e}");
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
}

/// A VR beside the running ones: add, show, change. Its spec.
fn vr_beside(api: &Api) -> Value {
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
    spec
}

/// c's vNICs: add, refuse to remove one in use, remove, not found.
fn vnics(api: &Api) {
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
}

/// Rules: list, add at a position, change, remove.
fn rules(api: &Api) {
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
}

/// Routes: one, in bulk, a page of them, a bulk request with one bad route
/// (none applied), delete.
fn routes(api: &Api) {
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
}

/// Apply the whole file (a dry run, then for real: c goes away), add c
/// again, restart it, move it where it is, remove it.
fn apply_restart_move(api: &Api, d: &Daemon, spec: &Value) {
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
}

/// Metrics a real parser accepts, and the API document served.
fn metrics_and_document(http: &Http, api: &Api, c: &Contract) {
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
}

/// Every documented operation was called (capture is tested apart).
fn every_operation_called(api: &Api, c: &Contract) {
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
}

/// The VRs nobody touched lost nothing: once the generator is done and
/// the rings are empty, everything given to them came out.
fn nothing_lost(api: &Api) {
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
