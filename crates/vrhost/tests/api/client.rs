//! The test's HTTP client of the daemon's API and its contract: every
//! answer validated against `api/openapi.yaml`, every operation called noted.

use std::path::PathBuf;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::Value;

/// Where an [`Http`] client connects.
pub(crate) enum Target {
    /// The daemon's API socket.
    Unix(PathBuf),
    /// Its API on 127.0.0.1 at this port.
    Tcp(u16),
}

/// `req` on a new HTTP/1 connection over `stream`.
pub(crate) async fn exchange<S>(
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
pub(crate) struct Http {
    to: Target,
    rt: tokio::runtime::Runtime,
}

impl Http {
    pub(crate) fn new(to: Target) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Self { to, rt }
    }

    /// One request with `headers`; returns status, Content-Type and body
    /// bytes.
    pub(crate) fn send(
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
    pub(crate) fn raw(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> (u16, Vec<u8>) {
        let (st, _, b) = self.typed(method, path, Some("application/json"), body);
        (st, b)
    }

    /// One request with a body of type `content_type` (none: no
    /// Content-Type); returns status, Content-Type and body bytes.
    pub(crate) fn typed(
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

    pub(crate) fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
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
pub(crate) struct Contract {
    pub(crate) doc: Value,
}

impl Contract {
    pub(crate) fn load() -> Self {
        Self {
            doc: vrhost_daemon::contract::document().clone(),
        }
    }

    /// The response schema of an operation for a status, if it has JSON.
    pub(crate) fn schema(&self, path: &str, method: &str, status: u16) -> Option<Value> {
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
    pub(crate) fn check(&self, path: &str, method: &str, status: u16, body: &Value) {
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
pub(crate) struct Api<'a> {
    pub(crate) http: &'a Http,
    pub(crate) c: &'a Contract,
    pub(crate) hit: std::cell::RefCell<std::collections::BTreeSet<(String, String)>>,
}

impl Api<'_> {
    pub(crate) fn call(
        &self,
        method: &str,
        template: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let (st, v) = self.http.call(method, path, body);
        let m = method.to_lowercase();
        self.c.check(template, &m, st, &v);
        self.hit.borrow_mut().insert((m, template.to_string()));
        (st, v)
    }

    pub(crate) fn ok(
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

    pub(crate) fn refused(
        &self,
        method: &str,
        template: &str,
        path: &str,
        body: Option<Value>,
        want: u16,
    ) {
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
