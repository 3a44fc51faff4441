//! The client against a real HTTP/1.1 server (hyper's) on a unix socket in a
//! temporary directory: transport, bearer header, error JSON, empty answers,
//! streaming and the timeout.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Channel, Either, Full};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::*;

type Body = Either<Full<Bytes>, Channel<Bytes>>;

/// A test server on a unix socket, on its own thread and runtime.
struct Server {
    dir: PathBuf,
    sock: PathBuf,
    /// Set by the test once it has seen the stream's first piece.
    first_seen: Arc<AtomicBool>,
    /// Set by the server when it saw `first_seen` before sending the rest.
    waited: Arc<AtomicBool>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn temp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "vrhost-client-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn json(status: StatusCode, v: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Either::Left(Full::new(Bytes::from(v.to_owned()))))
        .unwrap()
}

async fn handle(
    req: Request<Incoming>,
    first_seen: Arc<AtomicBool>,
    waited: Arc<AtomicBool>,
) -> Result<Response<Body>, Infallible> {
    let auth = req
        .headers()
        .get("authorization")
        .map(|h| h.to_str().unwrap().to_owned());
    let host = req
        .headers()
        .get("host")
        .map(|h| h.to_str().unwrap().to_owned());
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let resp = match (req.method().as_str(), path.as_str()) {
        ("GET", "/v1/health") => json(
            StatusCode::OK,
            &serde_json::json!({"status": "ok", "vrs": 2, "auth": auth, "host": host}).to_string(),
        ),
        ("GET", "/v1/vrs/nope") => json(
            StatusCode::NOT_FOUND,
            r#"{"error":{"code":"not_found","message":"no VR \"nope\""}}"#,
        ),
        ("GET", "/v1/plain") => Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Either::Left(Full::new(Bytes::from("upstream went away\n"))))
            .unwrap(),
        ("DELETE", "/v1/vrs/a") => Response::builder()
            .status(StatusCode::NO_CONTENT)
            .body(Either::Left(Full::new(Bytes::new())))
            .unwrap(),
        ("POST", "/v1/echo") => {
            let ct = req
                .headers()
                .get("content-type")
                .map(|h| h.to_str().unwrap().to_owned());
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let got: serde_json::Value = serde_json::from_slice(&body).unwrap();
            json(
                StatusCode::CREATED,
                &serde_json::json!({"got": got, "content_type": ct}).to_string(),
            )
        }
        ("GET", "/v1/slow") => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            json(StatusCode::OK, "{}")
        }
        ("GET", p) if p.starts_with("/v1/stream") => {
            let (mut tx, body) = Channel::<Bytes>::new(4);
            tokio::spawn(async move {
                let _ = tx.send(Frame::data(Bytes::from_static(b"first;"))).await;
                // The rest only once the client has written the first
                // piece out (or after 5 s): proves the body is streamed,
                // not collected.
                for _ in 0..500 {
                    if first_seen.load(Ordering::Acquire) {
                        waited.store(true, Ordering::Release);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let _ = tx.send(Frame::data(Bytes::from_static(b"second;"))).await;
                let _ = tx.send(Frame::data(Bytes::from_static(b"third"))).await;
            });
            Response::builder()
                .header("content-type", "application/vnd.tcpdump.pcap")
                .body(Either::Right(body))
                .unwrap()
        }
        _ => json(
            StatusCode::NOT_FOUND,
            r#"{"error":{"code":"not_found","message":"no such path"}}"#,
        ),
    };
    Ok(resp)
}

fn start_server() -> Server {
    let dir = temp_dir();
    let sock = dir.join("api.sock");
    let first_seen = Arc::new(AtomicBool::new(false));
    let waited = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (s, f, w) = (sock.clone(), first_seen.clone(), waited.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::UnixListener::bind(&s).unwrap();
            ready_tx.send(()).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (f, w) = (f.clone(), w.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req| handle(req, f.clone(), w.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
    });
    ready_rx.recv().unwrap();
    Server {
        dir,
        sock,
        first_seen,
        waited,
    }
}

fn client(server: &Server, token: Option<&str>) -> Client {
    Client::new(
        Endpoint::Unix(server.sock.clone()),
        token.map(str::to_owned),
    )
    .unwrap()
}

#[test]
fn get_over_unix_socket_with_bearer_token() {
    let server = start_server();
    let c = client(&server, Some("s3cret"));
    let v = c
        .get("/v1/health")
        .unwrap()
        .decode::<serde_json::Value>()
        .unwrap();
    assert_eq!(v["status"], "ok");
    assert_eq!(v["auth"], "Bearer s3cret");
    assert_eq!(v["host"], "localhost");
    #[derive(serde::Deserialize)]
    struct Health {
        vrs: u64,
    }
    let h: Health = c.get_as("/v1/health").unwrap();
    assert_eq!(h.vrs, 2);
}

#[test]
fn no_token_sends_no_authorization() {
    let server = start_server();
    let v = client(&server, None)
        .get("/v1/health")
        .unwrap()
        .decode::<serde_json::Value>()
        .unwrap();
    assert_eq!(v["auth"], serde_json::Value::Null);
    // An empty token (VRHOST_TOKEN= ) is no token.
    let v = client(&server, Some(""))
        .get("/v1/health")
        .unwrap()
        .decode::<serde_json::Value>()
        .unwrap();
    assert_eq!(v["auth"], serde_json::Value::Null);
}

#[test]
fn api_error_json_becomes_the_message() {
    let server = start_server();
    let e = client(&server, None).get("/v1/vrs/nope").unwrap_err();
    assert!(
        matches!(&e, ClientError::Api { status: 404, code, .. } if code == "not_found"),
        "{e:?}"
    );
    assert_eq!(e.to_string(), r#"no VR "nope" (not_found, HTTP 404)"#);
}

#[test]
fn non_json_error_keeps_status_and_body() {
    let server = start_server();
    let e = client(&server, None).get("/v1/plain").unwrap_err();
    assert_eq!(
        e.to_string(),
        "HTTP 502 from the daemon: upstream went away"
    );
}

#[test]
fn post_sends_json_and_empty_answer_is_null() {
    let server = start_server();
    let c = client(&server, None);
    let v = c
        .call(
            Method::POST,
            "/v1/echo",
            Some(&serde_json::json!({"name": "a", "vnics": [{"port": "p0"}]})),
        )
        .unwrap();
    let v = v.decode::<serde_json::Value>().unwrap();
    assert_eq!(v["got"]["vnics"][0]["port"], "p0");
    assert_eq!(v["content_type"], "application/json");
    let a = c.call(Method::DELETE, "/v1/vrs/a", None::<&()>).unwrap();
    assert!(a.is_empty());
    assert_eq!(a.pretty(), "");
}

/// A writer that tells the server when it has seen the first piece.
struct Probe {
    buf: Vec<u8>,
    first_seen: Arc<AtomicBool>,
    flushes: usize,
}

impl Write for Probe {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.flushes += 1;
        if self.buf.starts_with(b"first;") {
            self.first_seen.store(true, Ordering::Release);
        }
        Ok(())
    }
}

#[test]
fn stream_writes_pieces_as_they_arrive() {
    let server = start_server();
    let mut probe = Probe {
        buf: Vec::new(),
        first_seen: server.first_seen.clone(),
        flushes: 0,
    };
    let n = client(&server, Some("t"))
        .stream_to("/v1/stream?vnic=0&count=3", &mut probe)
        .unwrap();
    assert_eq!(probe.buf, b"first;second;third");
    assert_eq!(n, probe.buf.len() as u64);
    assert!(probe.flushes >= 2);
    assert!(
        server.waited.load(Ordering::Acquire),
        "the first piece was not written before the rest was sent"
    );
}

#[test]
fn stream_error_is_decoded_not_written() {
    let server = start_server();
    let mut out = Vec::new();
    let e = client(&server, None)
        .stream_to("/v1/vrs/nope", &mut out)
        .unwrap_err();
    assert!(matches!(e, ClientError::Api { status: 404, .. }));
    assert!(out.is_empty());
}

#[test]
fn timeout_gives_up() {
    let server = start_server();
    let c = client(&server, None).with_timeout(Duration::from_millis(200));
    let e = c.get("/v1/slow").unwrap_err();
    assert!(matches!(e, ClientError::Timeout { .. }), "{e:?}");
}

#[test]
fn missing_socket_says_the_daemon_is_not_running() {
    let dir = temp_dir();
    let path = dir.join("api.sock");
    let c = Client::new(Endpoint::Unix(path.clone()), None).unwrap();
    let e = c.get("/v1/health").unwrap_err();
    assert!(matches!(e, ClientError::NoSocket { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("the daemon is not running"), "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");

    // A socket file nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let e = c.get("/v1/health").unwrap_err();
    assert!(matches!(e, ClientError::DeadSocket { .. }), "{e:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn endpoint_parsing() {
    assert_eq!(
        Endpoint::parse("/run/vrhost/api.sock").unwrap(),
        Endpoint::Unix("/run/vrhost/api.sock".into())
    );
    assert_eq!(
        Endpoint::parse("unix:./a.sock").unwrap(),
        Endpoint::Unix("./a.sock".into())
    );
    assert_eq!(
        Endpoint::parse("http://127.0.0.1:8080").unwrap(),
        Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port: 8080,
            authority: "127.0.0.1:8080".into()
        }
    );
    assert_eq!(
        Endpoint::parse("http://[::1]:9/").unwrap(),
        Endpoint::Tcp {
            host: "::1".into(),
            port: 9,
            authority: "[::1]:9".into()
        }
    );
    assert!(matches!(
        Endpoint::parse("http://localhost").unwrap(),
        Endpoint::Tcp { port: 80, .. }
    ));
    // The daemon's --api-tcp form, without the scheme.
    assert_eq!(
        Endpoint::parse("127.0.0.1:18080").unwrap(),
        Endpoint::parse("http://127.0.0.1:18080").unwrap()
    );
    assert_eq!(
        Endpoint::parse("[::1]:9").unwrap(),
        Endpoint::parse("http://[::1]:9").unwrap()
    );
    assert!(matches!(
        Endpoint::parse("localhost:80").unwrap(),
        Endpoint::Tcp { port: 80, .. }
    ));
    for bad in [
        "https://h:1",
        "h",
        "h:",
        ":1",
        "h:1/v1",
        "api.sock",
        "http://:1",
        "http://h:x",
        "http://h:1/v1",
        "unix:",
    ] {
        assert!(Endpoint::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn query_encoding() {
    assert_eq!(
        with_query(
            "/v1/vrs/a/routes",
            &[("prefix", Some("192.0.2.0/24".into())), ("x", None)]
        ),
        "/v1/vrs/a/routes?prefix=192.0.2.0%2F24"
    );
    assert_eq!(encode("udp and port 53"), "udp%20and%20port%2053");
    assert_eq!(encode("tenant-a_1"), "tenant-a_1");
}

#[test]
fn error_from_bodies() {
    let e = error_from(
        StatusCode::CONFLICT,
        br#"{"error":{"code":"conflict","message":"VR a exists"}}"#,
    );
    assert_eq!(e.to_string(), "VR a exists (conflict, HTTP 409)");
    let e = error_from(StatusCode::SERVICE_UNAVAILABLE, b"");
    assert_eq!(
        e.to_string(),
        "HTTP 503 from the daemon: Service Unavailable"
    );
}

#[test]
fn pretty_keeps_the_servers_order_and_numbers() {
    let a = Answer::from_json(
        "GET /x",
        r#"{"zeta":1,"alpha":{"b":2,"a":18446744073709551615},"rate":4994.580879745476}"#,
    );
    assert_eq!(
        a.pretty(),
        "{\n  \"zeta\": 1,\n  \"alpha\": {\n    \"b\": 2,\n    \"a\": 18446744073709551615\n  },\n  \"rate\": 4994.580879745476\n}"
    );
    let e = a.decode::<Vec<u32>>().unwrap_err();
    assert!(
        e.to_string()
            .starts_with("the daemon's answer to GET /x is not the expected JSON"),
        "{e}"
    );
}

#[test]
fn a_2xx_that_is_not_json_is_an_error() {
    let server = start_server();
    // The stream answer is 200 with pcap bytes, not JSON.
    server.first_seen.store(true, Ordering::Release);
    let e = client(&server, None).get("/v1/stream").unwrap_err();
    assert!(matches!(e, ClientError::Decode { .. }), "{e:?}");
}

#[test]
fn refused_tcp_is_named_once() {
    // Port 1 on loopback: nothing listens there.
    let c = Client::new(Endpoint::parse("http://127.0.0.1:1").unwrap(), None).unwrap();
    let e = c.get("/v1/health").unwrap_err();
    assert!(matches!(e, ClientError::Connect { .. }), "{e:?}");
    // As the binary prints it (anyhow's `{:#}`): each source after a colon.
    let chain: Vec<String> =
        std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source())
            .map(ToString::to_string)
            .collect();
    let msg = chain.join(": ");
    assert!(
        msg.starts_with("cannot connect to the daemon at http://127.0.0.1:1: "),
        "{msg}"
    );
    assert_eq!(msg.matches("refused").count(), 1, "{msg}");
}
