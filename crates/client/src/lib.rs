//! vrhost-client: the daemon API client, HTTP/1.1 (hyper) over the daemon's
//! unix socket or over TCP, with an optional bearer token, on a current-thread tokio
//! runtime the client owns, so the commands above it stay synchronous.
//!
//! One connection per request: the CLI makes a handful of requests (a bulk
//! route load some fifty, `top` one a second), and a fresh connection means
//! a daemon restarted between two of them is simply reconnected to.
//!
//! Errors keep what a person needs: the server's `{"error": {...}}` becomes
//! `<message> (<code>, HTTP <status>)`; a missing or dead socket says the
//! daemon is not running and where the client looked.
//!
//! What it owns: the transport ([`Client`], [`Endpoint`]), its errors
//! ([`ClientError`], from the API's error body when the daemon sent one)
//! and URL helpers. What it does not own: the commands that use it (the
//! `vrhost` CLI, the benches) and the API's types (`vrhost-api`).

#![forbid(unsafe_code)]

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde::de::DeserializeOwned;
use vrhost_api::ErrorBody;

/// The request methods of [`Client::call`].
pub use hyper::Method;

/// Where the daemon's API is when neither `--api` nor `VRHOST_API` says.
pub const DEFAULT_SOCKET: &str = "/run/vrhost/api.sock";

/// A failed API call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// `--api` is neither a socket path nor `http://HOST:PORT`.
    #[error("bad API address {addr:?}: {why}")]
    BadAddress {
        /// What was given.
        addr: String,
        /// Why it is refused.
        why: &'static str,
    },
    /// No socket at the path.
    #[error(
        "the daemon is not running: no API socket at {} (start `vrhost daemon`, or give its address with --api or VRHOST_API)",
        path.display()
    )]
    NoSocket {
        /// Where the client looked.
        path: PathBuf,
    },
    /// A socket file nobody listens on (left by a daemon that stopped).
    #[error(
        "the daemon is not running: nothing listens on {} (a socket left by a daemon that stopped?)",
        path.display()
    )]
    DeadSocket {
        /// The socket.
        path: PathBuf,
    },
    /// Any other connection failure.
    #[error("cannot connect to the daemon at {addr}: {err}")]
    Connect {
        /// The endpoint.
        addr: String,
        /// The OS error (in the message, so not a `source` too).
        err: io::Error,
    },
    /// The server refused the request with the API's error JSON.
    #[error("{message} ({code}, HTTP {status})")]
    Api {
        /// HTTP status.
        status: u16,
        /// The error's `code`.
        code: String,
        /// The error's `message`.
        message: String,
    },
    /// The server failed without the API's error JSON (a proxy, a crash).
    #[error("HTTP {status} from the daemon: {body}")]
    Http {
        /// HTTP status.
        status: u16,
        /// The start of the body, or the status's reason.
        body: String,
    },
    /// The request could not be built (a token with control characters).
    #[error("bad request: {0}")]
    Request(String),
    /// HTTP failed on an open connection.
    #[error("talking to the daemon at {addr}: {err}")]
    Transport {
        /// The endpoint.
        addr: String,
        /// What hyper saw.
        err: hyper::Error,
    },
    /// No answer in time.
    #[error("no answer from the daemon at {addr} within {secs} s")]
    Timeout {
        /// The endpoint.
        addr: String,
        /// The limit.
        secs: f64,
    },
    /// A 2xx answer that is not the JSON the schema promises.
    #[error("the daemon's answer to {what} is not the expected JSON: {err}")]
    Decode {
        /// The request.
        what: String,
        /// The decoder's error.
        err: serde_json::Error,
    },
    /// Writing a streamed body failed (a closed pipe, a full disk).
    #[error("writing the stream: {0}")]
    Write(io::Error),
    /// The runtime could not be started.
    #[error("starting the API client: {0}")]
    Runtime(io::Error),
}

/// Where the API is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A unix socket.
    Unix(PathBuf),
    /// TCP; `authority` is `HOST:PORT` as given (the `Host` header).
    Tcp {
        /// Host name or address (IPv6 without brackets).
        host: String,
        /// Port.
        port: u16,
        /// `HOST:PORT` as written.
        authority: String,
    },
}

impl Endpoint {
    /// Parse an API address: a socket path (`/run/vrhost/api.sock`,
    /// `./api.sock`, `unix:PATH`) or `http://HOST:PORT` (`[V6]:PORT` too;
    /// the port defaults to 80), or `HOST:PORT` alone (what the daemon's
    /// `--api-tcp` takes).
    ///
    /// # Errors
    /// [`ClientError::BadAddress`]: https, an empty host, a bad port, or
    /// something that is neither form.
    pub fn parse(addr: &str) -> Result<Self, ClientError> {
        let bad = |why| ClientError::BadAddress {
            addr: addr.to_owned(),
            why,
        };
        if let Some(path) = addr
            .strip_prefix("unix://")
            .or_else(|| addr.strip_prefix("unix:"))
        {
            if path.is_empty() {
                return Err(bad("no socket path after unix:"));
            }
            return Ok(Endpoint::Unix(path.into()));
        }
        if addr.starts_with('/') || addr.starts_with("./") || addr.starts_with("../") {
            return Ok(Endpoint::Unix(addr.into()));
        }
        if addr.starts_with("https://") {
            return Err(bad(
                "https is not supported: the daemon serves plain HTTP (tunnel it, or use its unix socket)",
            ));
        }
        let rest = match addr.strip_prefix("http://") {
            Some(rest) => rest,
            None if is_host_port(addr) => addr,
            None => return Err(bad("give a socket path, HOST:PORT or http://HOST:PORT")),
        };
        let authority = rest.trim_end_matches('/');
        if authority.contains('/') {
            return Err(bad("give http://HOST:PORT without a path"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("unclosed [ in host"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => p.parse().map_err(|_| bad("bad port"))?,
                None if after.is_empty() => 80,
                None => return Err(bad("bad port")),
            };
            (h.to_owned(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), p.parse().map_err(|_| bad("bad port"))?),
                None => (authority.to_owned(), 80),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Endpoint::Tcp {
            host,
            port,
            authority: authority.to_owned(),
        })
    }

    /// How errors name it.
    pub fn describe(&self) -> String {
        match self {
            Endpoint::Unix(p) => p.display().to_string(),
            Endpoint::Tcp { authority, .. } => format!("http://{authority}"),
        }
    }

    fn host_header(&self) -> &str {
        match self {
            Endpoint::Unix(_) => "localhost",
            Endpoint::Tcp { authority, .. } => authority,
        }
    }
}

/// Whether `addr` is a bare `HOST:PORT` (or `[V6]:PORT`): a port of digits
/// after the last colon, and no path.
fn is_host_port(addr: &str) -> bool {
    addr.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty()
            && !addr.contains('/')
            && !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit())
    })
}

/// A client of one daemon. Blocking: each call runs on the client's own
/// current-thread runtime.
#[derive(Debug)]
pub struct Client {
    endpoint: Endpoint,
    token: Option<String>,
    timeout: Option<Duration>,
    rt: tokio::runtime::Runtime,
}

impl Client {
    /// A client of the API at `endpoint`, sending `token` as a bearer token
    /// if given.
    ///
    /// # Errors
    /// [`ClientError::Runtime`].
    pub fn new(endpoint: Endpoint, token: Option<String>) -> Result<Self, ClientError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(ClientError::Runtime)?;
        Ok(Client {
            endpoint,
            token: token.filter(|t| !t.is_empty()),
            timeout: None,
            rt,
        })
    }

    /// Give up on a request (connecting, sending, reading the whole answer;
    /// for a stream, until its headers) after `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// `GET path`, decoded.
    ///
    /// # Errors
    /// As [`Client::call`], or [`ClientError::Decode`].
    pub fn get_as<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.get(path)?.decode()
    }

    /// `GET path`.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn get(&self, path: &str) -> Result<Answer, ClientError> {
        self.call(Method::GET, path, None::<&()>)
    }

    /// A request with an optional JSON body; the answer's JSON as sent
    /// (empty for a 204).
    ///
    /// # Errors
    /// The daemon cannot be reached ([`ClientError::NoSocket`],
    /// [`ClientError::DeadSocket`], [`ClientError::Connect`]), refuses the
    /// request ([`ClientError::Api`], [`ClientError::Http`]), the exchange
    /// fails or times out, or the answer is not JSON.
    pub fn call<B: Serialize + ?Sized>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Answer, ClientError> {
        let body = match body {
            Some(b) => {
                Some(serde_json::to_vec(b).map_err(|e| ClientError::Request(e.to_string()))?)
            }
            None => None,
        };
        let req = self.request(method.clone(), path, body)?;
        let raw = self.run(async {
            let resp = self.send(req).await?;
            let status = resp.status();
            let bytes = self.read_body(resp).await?;
            if !status.is_success() {
                return Err(error_from(status, &bytes));
            }
            Ok(bytes)
        })?;
        let answer = Answer {
            raw,
            what: format!("{method} {path}"),
        };
        if !answer.is_empty() {
            // Refuse a 2xx that is not JSON here, not in each command.
            answer.decode::<serde::de::IgnoredAny>()?;
        }
        Ok(answer)
    }

    /// `GET path` and copy the answer's body to `out` as it arrives (a
    /// capture's pcap stream), flushing after each piece, until the server
    /// ends it. Returns the bytes written.
    ///
    /// # Errors
    /// As [`Client::call`] (an error answer is decoded, not written), or
    /// [`ClientError::Write`].
    pub fn stream_to(&self, path: &str, out: &mut dyn Write) -> Result<u64, ClientError> {
        let req = self.request(Method::GET, path, None)?;
        let resp = self.run(self.send(req))?;
        let status = resp.status();
        self.rt.block_on(async {
            if !status.is_success() {
                let bytes = self.read_body(resp).await?;
                return Err(error_from(status, &bytes));
            }
            let mut body = resp.into_body();
            let mut written = 0u64;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| self.transport(e))?;
                if let Ok(data) = frame.into_data() {
                    out.write_all(&data).map_err(ClientError::Write)?;
                    out.flush().map_err(ClientError::Write)?;
                    written += data.len() as u64;
                }
            }
            Ok(written)
        })
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Request<Full<Bytes>>, ClientError> {
        let mut b = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, self.endpoint.host_header())
            .header(
                header::USER_AGENT,
                concat!("vrhost/", env!("CARGO_PKG_VERSION")),
            )
            .header(header::ACCEPT, "application/json");
        if let Some(t) = &self.token {
            b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if body.is_some() {
            b = b.header(header::CONTENT_TYPE, "application/json");
        }
        b.body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| ClientError::Request(e.to_string()))
    }

    /// Run `fut` on the runtime, within the timeout if one is set.
    fn run<T>(&self, fut: impl Future<Output = Result<T, ClientError>>) -> Result<T, ClientError> {
        self.rt.block_on(async {
            match self.timeout {
                Some(t) => {
                    tokio::time::timeout(t, fut)
                        .await
                        .map_err(|_| ClientError::Timeout {
                            addr: self.endpoint.describe(),
                            secs: t.as_secs_f64(),
                        })?
                }
                None => fut.await,
            }
        })
    }

    async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, ClientError> {
        match &self.endpoint {
            Endpoint::Unix(path) => {
                let s =
                    tokio::net::UnixStream::connect(path)
                        .await
                        .map_err(|e| match e.kind() {
                            io::ErrorKind::NotFound => ClientError::NoSocket { path: path.clone() },
                            io::ErrorKind::ConnectionRefused => {
                                ClientError::DeadSocket { path: path.clone() }
                            }
                            _ => self.connect_error(e),
                        })?;
                self.exchange(TokioIo::new(s), req).await
            }
            Endpoint::Tcp { host, port, .. } => {
                let s = tokio::net::TcpStream::connect((host.as_str(), *port))
                    .await
                    .map_err(|e| self.connect_error(e))?;
                // Small requests and answers: don't wait for Nagle.
                let _ = s.set_nodelay(true);
                self.exchange(TokioIo::new(s), req).await
            }
        }
    }

    async fn exchange<T>(
        &self,
        io: T,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, ClientError>
    where
        T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| self.transport(e))?;
        // The connection task moves the bytes; its error, if any, is also
        // the error of the request or of the body read.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        sender
            .send_request(req)
            .await
            .map_err(|e| self.transport(e))
    }

    async fn read_body(&self, resp: Response<Incoming>) -> Result<Bytes, ClientError> {
        Ok(resp
            .into_body()
            .collect()
            .await
            .map_err(|e| self.transport(e))?
            .to_bytes())
    }

    fn connect_error(&self, err: io::Error) -> ClientError {
        ClientError::Connect {
            addr: self.endpoint.describe(),
            err,
        }
    }

    fn transport(&self, err: hyper::Error) -> ClientError {
        ClientError::Transport {
            addr: self.endpoint.describe(),
            err,
        }
    }
}

/// A 2xx answer: its JSON exactly as the server sent it (nothing for a
/// 204), so `-o json` shows the server's fields in the server's order.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    raw: Bytes,
    /// The request, for decoding errors.
    what: String,
}

impl Answer {
    /// An answer of these bytes (for tests and for answers built here).
    pub fn from_json(what: &str, raw: impl Into<Bytes>) -> Self {
        Answer {
            raw: raw.into(),
            what: what.to_owned(),
        }
    }

    /// Whether the body is empty (a 204).
    pub fn is_empty(&self) -> bool {
        self.raw.iter().all(u8::is_ascii_whitespace)
    }

    /// The body decoded into `T`.
    ///
    /// # Errors
    /// [`ClientError::Decode`], naming the request.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, ClientError> {
        serde_json::from_slice(&self.raw).map_err(|err| ClientError::Decode {
            what: self.what.clone(),
            err,
        })
    }

    /// The body pretty-printed, fields in the order sent, numbers as sent
    /// (empty if the body is).
    pub fn pretty(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let mut out = Vec::new();
        let mut de = serde_json::Deserializer::from_slice(&self.raw);
        let mut ser = serde_json::Serializer::pretty(&mut out);
        match serde_transcode::transcode(&mut de, &mut ser) {
            Ok(()) => String::from_utf8(out).unwrap_or_default(),
            // Not JSON after all (call() checks): show it as it came.
            Err(_) => String::from_utf8_lossy(&self.raw).into_owned(),
        }
    }
}

/// The error for a non-2xx answer: the API's error JSON if the body is one,
/// otherwise the start of the body (or the status's reason).
pub fn error_from(status: StatusCode, body: &[u8]) -> ClientError {
    if let Ok(e) = serde_json::from_slice::<ErrorBody>(body)
        && !e.error.message.is_empty()
    {
        return ClientError::Api {
            status: status.as_u16(),
            code: e.error.code,
            message: e.error.message,
        };
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let body = if text.is_empty() {
        status.canonical_reason().unwrap_or("no reason").to_owned()
    } else {
        text.chars().take(300).collect()
    };
    ClientError::Http {
        status: status.as_u16(),
        body,
    }
}

/// Percent-encode `s` for a path segment or a query value (RFC 3986:
/// everything but the unreserved characters).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `path?k=v&...` with the values encoded; pairs whose value is `None` are
/// left out.
pub fn with_query(path: &str, pairs: &[(&str, Option<String>)]) -> String {
    let mut out = path.to_owned();
    let mut sep = '?';
    for (k, v) in pairs {
        if let Some(v) = v {
            out.push(sep);
            out.push_str(k);
            out.push('=');
            out.push_str(&encode(v));
            sep = '&';
        }
    }
    out
}

#[cfg(test)]
mod tests;
