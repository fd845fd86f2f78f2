//! One request → one [`RequestRecord`].
//!
//! Owns the HTTP/1.1 keep-alive connection to the server ([`Connection`], plain or TLS:
//! rustls over the kernel-stamped socket, see [`Tls`]), where requests go ([`Target`]: Host
//! header, path prefix, bearer credential that is never printed), the readiness probe
//! (`GET /v1/models`), the interpretation of a non-streamed JSON completion (its arrival is
//! its only content event: only E2E and throughput are defined), and the interpretation of
//! an OpenAI-compatible SSE stream:
//!
//! * a content event is a `data:` JSON object with a choice whose `delta.content`,
//!   `delta.reasoning_content`, `delta.reasoning` (chat) or `text` (completions) is a
//!   non-empty string; role-only, finish-only and usage-only events are not content;
//! * an event of type `error`, or a payload with a non-null `error` member, fails the
//!   request (an error-terminated stream is never a success);
//! * success needs HTTP 200, a `text/event-stream` body, `data: [DONE]` (unless explicitly
//!   waived), ≥ 1 content event, exactly one finish reason, at most one usage record, and a
//!   token count: `usage.completion_tokens` (source `server_usage`), or — only when usage is
//!   allowed to be missing — the content-event count (source `client_count`);
//! * a server's token claim is bounded by what the client received ([`crate::claims`]): a
//!   `usage.completion_tokens` above the request's `max_tokens`, above both the received
//!   text's UTF-8 bytes and [`crate::claims::TOKENS_PER_EVENT`] × its content events, or (with a tokenizer)
//!   above 1.5 × the tokenizer's count of that text + [`crate::claims::SPECIAL_TOKEN_ALLOWANCE`] fails the
//!   request by name; the record keeps the claim (`usage`) and the client's side
//!   (`client_tokens`).
//!
//! Every event is stamped with the arrival time of the read that completed it: the kernel's
//! receive timestamp of that read where the kernel gives one ([`crate::rxclock`]), else the
//! time the read returned; the record names the clock, keeps each event's read lag and
//! counts content events that shared a read with a later one. hyper hands the body over one
//! frame at a time and reads the socket again only after the previous frame was taken, so
//! the connection's latest read is the read that delivered the frame in hand. Invariant: the
//! requested `max_tokens` is never used as a count — only as a bound: [`StreamLimits`]
//! caps the events and bytes one response may carry, so an endless or bloated stream fails
//! that request and cannot fill memory or the evidence file. A request holds only what it
//! actually received (content and reasoning text for the output digest, one timestamp per
//! content event, and the event being parsed), never more than its limits.

use crate::claims::{check_claim, claim_bound};
use crate::io::FullBody;
use crate::record::{Outcome, RequestRecord, TokenCount, TokenSource, Usage};
use crate::rxclock::{ClockSource, ReadLog, ReadStamp, StampedStream};
use crate::sse::{PushError, SseEvent, SseParser};
use hyper::body::{Body, Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use serde::Deserialize;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An open HTTP/1.1 connection.
pub struct Connection {
    sender: SendRequest<FullBody>,
    first_write: Arc<AtomicU64>,
    reads: ReadLog,
}

/// Opens a connection (TCP_NODELAY) and drives it on the current tokio runtime.
pub async fn connect(addr: SocketAddr) -> std::io::Result<Connection> {
    let (io, first_write, reads) = stamped_tcp(addr).await?;
    drive(io, first_write, reads).await
}

/// Opens a connection to `target`: plain TCP, or TLS when the target has TLS settings.
pub async fn connect_to(addr: SocketAddr, target: &Target) -> std::io::Result<Connection> {
    let Some(tls) = &target.tls else {
        return connect(addr).await;
    };
    let (io, first_write, reads) = stamped_tcp(addr).await?;
    let tls_stream = tokio_rustls::TlsConnector::from(tls.config.clone())
        .connect(tls.server_name.clone(), io)
        .await?;
    drive(crate::io::TokioIo::new(tls_stream), first_write, reads).await
}

/// A TCP connection (TCP_NODELAY) whose reads are stamped by the kernel receive clock.
async fn stamped_tcp(
    addr: SocketAddr,
) -> std::io::Result<(StampedStream, Arc<AtomicU64>, ReadLog)> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let first_write = Arc::new(AtomicU64::new(0));
    let (io, reads, _kernel) = StampedStream::new(stream, first_write.clone());
    Ok((io, first_write, reads))
}

/// The HTTP/1.1 handshake over `io`, the connection task spawned on the current runtime.
async fn drive<I>(io: I, first_write: Arc<AtomicU64>, reads: ReadLog) -> std::io::Result<Connection>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    // Let the connection task run once so it is parked on its socket before the first
    // request is handed to it.
    tokio::task::yield_now().await;
    Ok(Connection {
        sender,
        first_write,
        reads,
    })
}

/// TLS settings of a target: rustls (ring provider, TLS 1.2 and 1.3) trusting the operating
/// system's roots plus, optionally, the certificates of a PEM bundle (`--ca-cert`).
#[derive(Clone)]
pub struct Tls {
    config: Arc<tokio_rustls::rustls::ClientConfig>,
    server_name: tokio_rustls::rustls::pki_types::ServerName<'static>,
}

impl Tls {
    /// TLS to `host` (a DNS name or an IP address), trusting the system roots and the PEM
    /// certificates of `ca_cert`.
    pub fn new(host: &str, ca_cert: Option<&std::path::Path>) -> Result<Tls, String> {
        use rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls;
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(c);
        }
        if let Some(p) = ca_cert {
            let bytes = qual_json::read_file_limited(p, 16 * 1024 * 1024)
                .map_err(|e| format!("read the ca certificate: {e}"))?;
            let mut added = 0;
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&bytes) {
                let cert = cert.map_err(|e| format!("read the ca certificate: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("add the ca certificate: {e}"))?;
                added += 1;
            }
            if added == 0 {
                return Err("the ca certificate file holds no PEM certificate".into());
            }
        }
        if roots.is_empty() {
            return Err("no trusted root certificate: none on this system and no --ca-cert".into());
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("configure tls: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let server_name =
            rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|_| {
                format!(
                    "{} is not a valid tls server name",
                    qual_json::escape_text(host)
                )
            })?;
        Ok(Tls {
            config: Arc::new(config),
            server_name,
        })
    }
}

impl Connection {
    /// Whether the connection can take another request.
    pub fn is_usable(&self) -> bool {
        !self.sender.is_closed()
    }
}

async fn next_frame(
    body: &mut Incoming,
) -> Option<Result<hyper::body::Frame<Bytes>, hyper::Error>> {
    std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await
}

/// What a readiness probe saw.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// A JSON object whose `data` lists model objects with string ids.
    Ready {
        /// The body bytes (digested into the evidence).
        body: Vec<u8>,
        /// The served model ids.
        ids: Vec<String>,
    },
    /// Anything else, with a lowercase reason.
    NotReady(String),
}

/// `GET /v1/models` once, bounded by `timeout`.
pub async fn probe_models(addr: SocketAddr, timeout: Duration) -> Probe {
    probe_models_at(addr, &Target::plain(addr), timeout).await
}

/// `GET <prefix>/v1/models` once on `target` (its Host header and credential), bounded by
/// `timeout`.
pub async fn probe_models_at(addr: SocketAddr, target: &Target, timeout: Duration) -> Probe {
    let fut = async {
        let mut conn = connect_to(addr, target)
            .await
            .map_err(|e| format!("connect: {}", qual_json::show::io_error(&e)))?;
        let builder = target.decorate(
            hyper::Request::get(format!("{}/v1/models", target.base_path))
                .header(hyper::header::HOST, target.host.as_str()),
        );
        let req = builder
            .body(FullBody::default())
            .map_err(|e| e.to_string())?;
        let resp = conn
            .sender
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = resp.status();
        let mut body = resp.into_body();
        let mut bytes = Vec::new();
        while let Some(f) = next_frame(&mut body).await {
            let f = f.map_err(|e| format!("read body: {e}"))?;
            if let Ok(d) = f.into_data() {
                bytes.extend_from_slice(&d);
                if bytes.len() > 4 * 1024 * 1024 {
                    return Err("/v1/models body is larger than 4 MiB".to_string());
                }
            }
        }
        Ok::<_, String>((status, bytes))
    };
    let (status, bytes) = match tokio::time::timeout(timeout, fut).await {
        Err(_) => return Probe::NotReady("probe timed out".into()),
        Ok(Err(e)) => return Probe::NotReady(e),
        Ok(Ok(x)) => x,
    };
    if status != hyper::StatusCode::OK {
        return Probe::NotReady(format!("/v1/models answered http {}", status.as_u16()));
    }
    let v: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return Probe::NotReady(format!("/v1/models body is not JSON: {e}")),
    };
    let Some(data) = v.get("data").and_then(|d| d.as_array()) else {
        return Probe::NotReady("/v1/models response omits data array".into());
    };
    let ids: Vec<String> = data
        .iter()
        .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_string))
        .collect();
    if ids.is_empty() {
        return Probe::NotReady("/v1/models returned no model identifiers".into());
    }
    if ids.iter().any(|i| target.redact(i) != i.as_str()) {
        return Probe::NotReady(
            "/v1/models serves a model id that contains the api key; it is not recorded".into(),
        );
    }
    Probe::Ready { body: bytes, ids }
}

/// Sends one non-streamed `GET` on `conn` and reads the whole body; returns the status and
/// the body length. Used by the client-headroom benchmark (the same request `wrk` sends).
pub async fn unary_get(
    conn: &mut Connection,
    addr: SocketAddr,
    path: &str,
) -> Result<(u16, usize), String> {
    let req = hyper::Request::get(path)
        .header(hyper::header::HOST, addr.to_string())
        .body(FullBody::default())
        .map_err(|e| e.to_string())?;
    conn.sender
        .ready()
        .await
        .map_err(|e| format!("connection not ready: {e}"))?;
    let resp = conn
        .sender
        .send_request(req)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut n = 0;
    while let Some(f) = next_frame(&mut body).await {
        if let Ok(d) = f.map_err(|e| format!("read body: {e}"))?.into_data() {
            n += d.len();
        }
    }
    Ok((status, n))
}

/// The most one streamed response may carry, derived from the request's `max_tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    /// The request's `max_tokens`: the most completion tokens a server may claim.
    pub max_tokens: u64,
    /// SSE events (content or not): `2 × max_tokens + 64`.
    pub max_events: u64,
    /// Body bytes: `64 KiB + 4 KiB × max_events`.
    pub max_bytes: u64,
}

/// The largest single SSE event accepted (a chunk is a few hundred bytes).
pub const MAX_EVENT_BYTES: usize = 256 * 1024;

impl StreamLimits {
    /// The limits of a request asking for `max_tokens` tokens.
    pub fn for_max_tokens(max_tokens: u64) -> StreamLimits {
        let max_events = max_tokens.saturating_mul(2).saturating_add(64);
        StreamLimits {
            max_tokens,
            max_events,
            max_bytes: max_events.saturating_mul(4096).saturating_add(64 * 1024),
        }
    }
}

/// Stream acceptance switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamRules {
    /// Accept a stream without a usage record (count content events instead).
    pub allow_missing_usage: bool,
    /// Accept a stream that ends without `data: [DONE]`.
    pub allow_missing_done: bool,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Option<smallvec::SmallVec<[Choice<'a>; 1]>>,
    #[serde(default)]
    usage: Option<serde_json::Value>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    text: Option<Text<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Text<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning: Option<Text<'a>>,
}

/// A JSON string of a stream event: borrowed from the event when it has no escapes, owned
/// otherwise. (serde's own `Cow` always allocates when it sits inside an `Option`, and this
/// runs once per streamed token.)
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Text<'a>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Cow<'de, str>, E> {
                Ok(Cow::Owned(v))
            }
        }
        d.deserialize_str(V).map(Text)
    }
}

#[derive(Default)]
struct StreamState {
    done: bool,
    finish: Vec<String>,
    usage: Vec<serde_json::Value>,
    content: String,
    reasoning: String,
}

fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(200).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// Handles one event; `Err` is the failure reason.
fn on_event(
    ev: &SseEvent,
    (t, lower): (u64, u64),
    rec: &mut RequestRecord,
    st: &mut StreamState,
) -> Result<(), String> {
    if ev.event.as_deref() == Some("error") {
        return Err(format!("in-band error event: {}", clip(&ev.data)));
    }
    if st.done {
        return Err("stream carried an event after data: [DONE]".into());
    }
    if ev.data == "[DONE]" {
        st.done = true;
        rec.done_ns = Some(t);
        return Ok(());
    }
    let chunk: Chunk = serde_json::from_str(&ev.data)
        .map_err(|e| format!("stream event is not a JSON object: {e}"))?;
    if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
        let msg = err
            .get("message")
            .and_then(|m| m.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| err.to_string());
        return Err(format!("in-band error event: {}", clip(&msg)));
    }
    let mut is_content = false;
    for c in chunk.choices.unwrap_or_default() {
        if let Some(d) = c.delta {
            if let Some(s) = d.content.filter(|s| !s.0.is_empty()) {
                st.content.push_str(&s.0);
                is_content = true;
            }
            for r in [d.reasoning_content, d.reasoning].into_iter().flatten() {
                if !r.0.is_empty() {
                    st.reasoning.push_str(&r.0);
                    is_content = true;
                }
            }
        }
        if let Some(s) = c.text.filter(|s| !s.0.is_empty()) {
            st.content.push_str(&s.0);
            is_content = true;
        }
        if let Some(f) = c.finish_reason {
            st.finish.push(f.0.into_owned());
        }
    }
    if is_content {
        rec.content_event_ns.push(t);
        // Arrival is monotone: an event arrived no earlier than the one before it.
        let floor = rec
            .content_event_ns
            .len()
            .checked_sub(2)
            .and_then(|i| rec.content_event_lower(i))
            .unwrap_or(0);
        rec.content_event_width_ns.push(t - lower.max(floor).min(t));
    }
    if let Some(u) = chunk.usage.filter(|u| !u.is_null()) {
        st.usage.push(u);
    }
    Ok(())
}

fn parse_usage(u: &serde_json::Value) -> Result<Usage, String> {
    let f = |k: &str| {
        u.get(k)
            .and_then(|x| x.as_u64())
            .ok_or(format!("usage record lacks a non-negative integer {k}"))
    };
    let usage = Usage {
        prompt_tokens: f("prompt_tokens")?,
        completion_tokens: f("completion_tokens")?,
        total_tokens: f("total_tokens")?,
        cached_tokens: u
            .get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens"))
            .and_then(|c| c.as_u64()),
    };
    if usage.prompt_tokens.checked_add(usage.completion_tokens) != Some(usage.total_tokens) {
        return Err("usage record has total_tokens != prompt_tokens + completion_tokens".into());
    }
    Ok(usage)
}

/// How [`stream_request`] left the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// The exchange happened (successfully or not); whether the connection may be reused.
    Exchanged {
        /// The connection can take another request.
        reusable: bool,
    },
    /// The server had closed the keep-alive connection before any response arrived (the
    /// keep-alive race): the request can be retried on a fresh connection.
    Stale,
}

/// One streaming request to send: the endpoint path, the JSON body and the response limits.
#[derive(Clone, Debug)]
pub struct StreamCall<'a> {
    /// `/v1/chat/completions` or `/v1/completions`.
    pub path: &'a str,
    /// The request body.
    pub body: Bytes,
    /// What the response may carry.
    pub limits: StreamLimits,
}

/// Where requests go beyond the socket address: the `Host` header, a path prefix and the
/// `Authorization` header. The credential is never printed: `Debug` shows only whether one
/// is set, and nothing serializes it.
#[derive(Clone)]
pub struct Target {
    /// The `Host` header value (`host[:port]`).
    pub host: String,
    /// Prepended to every request path (`""` or `/prefix`, no trailing slash).
    pub base_path: String,
    authorization: Option<hyper::header::HeaderValue>,
    /// Extra request headers (`bench --header NAME:VALUE`), sent on every request.
    headers: Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
    /// The bare key, kept only to redact it from what the server sends back ([`Target::redact`]).
    secret: Option<Arc<str>>,
    tls: Option<Tls>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("host", &self.host)
            .field("base_path", &self.base_path)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Target {
    /// A target addressed by its socket address (`Host: ip:port`, no prefix, no credential).
    pub fn plain(addr: SocketAddr) -> Target {
        Target {
            host: addr.to_string(),
            base_path: String::new(),
            authorization: None,
            headers: Vec::new(),
            secret: None,
            tls: None,
        }
    }

    /// Adds the header `name: value` to every request (marked sensitive: a value may be a
    /// credential). Refused: the headers the client sets itself (`host`, `content-type`,
    /// `content-length`, `transfer-encoding`, `connection`, `accept`, `user-agent`) and
    /// `authorization` (`--api-key-env` sends it and keeps it out of every record); an
    /// invalid name or value. The message never contains the value.
    pub fn with_header(mut self, name: &str, value: &str) -> Result<Target, String> {
        let n = hyper::header::HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| format!("{name:?} is not a valid http header name"))?;
        const OWN: [&str; 7] = [
            "host",
            "content-type",
            "content-length",
            "transfer-encoding",
            "connection",
            "accept",
            "user-agent",
        ];
        if n == hyper::header::AUTHORIZATION {
            return Err("the authorization header is sent by --api-key-env, which keeps the key out of every record; use that".into());
        }
        if OWN.contains(&n.as_str()) {
            return Err(format!("the client sets the {} header itself", n.as_str()));
        }
        let mut v = hyper::header::HeaderValue::from_str(value.trim_start()).map_err(|_| {
            format!(
                "the value of header {} is not a valid http header value",
                n.as_str()
            )
        })?;
        v.set_sensitive(true);
        self.headers.push((n, v));
        Ok(self)
    }

    /// The extra headers' names, in order (their values are never shown).
    pub fn header_names(&self) -> Vec<String> {
        self.headers
            .iter()
            .map(|(n, _)| n.as_str().to_string())
            .collect()
    }

    /// `builder` with the credential and the extra headers.
    fn decorate(
        &self,
        mut builder: hyper::http::request::Builder,
    ) -> hyper::http::request::Builder {
        if let Some(auth) = &self.authorization {
            builder = builder.header(hyper::header::AUTHORIZATION, auth.clone());
        }
        for (n, v) in &self.headers {
            builder = builder.header(n, v.clone());
        }
        builder
    }

    /// Speaks TLS to the server.
    pub fn with_tls(mut self, tls: Tls) -> Target {
        self.tls = Some(tls);
        self
    }

    /// Whether requests go over TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Adds `Authorization: Bearer <key>` (marked sensitive for hyper). `Err` when the key
    /// is empty or not a valid header value (the message never contains the key).
    pub fn with_bearer(mut self, key: &str) -> Result<Target, String> {
        if key.is_empty() {
            return Err("the api key is empty".into());
        }
        let mut v = hyper::header::HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|_| "the api key is not a valid http header value".to_string())?;
        v.set_sensitive(true);
        self.authorization = Some(v);
        self.secret = Some(key.into());
        Ok(self)
    }

    /// `text` without the api key ([`crate::claims::redact`]). Everything a server sends that
    /// the records keep passes through here, so an echoed `Authorization` header cannot put
    /// the key into evidence.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.secret.as_deref() {
            Some(key) => crate::claims::redact(key, text),
            None => Cow::Borrowed(text),
        }
    }

    /// [`Target::redact`] applied to everything of `rec` that came from the server's text.
    pub fn redact_record(&self, rec: &mut RequestRecord) {
        if let Some(key) = self.secret.as_deref() {
            crate::claims::redact_record(key, rec);
        }
    }

    /// Whether an `Authorization` header is sent.
    pub fn has_authorization(&self) -> bool {
        self.authorization.is_some()
    }
}

/// What replaces an api key in anything the client keeps.
pub const REDACTED: &str = "<redacted api key>";

/// One request to send with [`exchange`]: streamed (SSE) or not.
#[derive(Clone, Debug)]
pub struct Exchange<'a> {
    /// Host header, path prefix, credential.
    pub target: &'a Target,
    /// `/v1/chat/completions` or `/v1/completions` (the target's prefix is prepended).
    pub path: &'a str,
    /// The request body.
    pub body: Bytes,
    /// What the response may carry.
    pub limits: StreamLimits,
    /// Whether the body asks for a stream (`"stream": true`).
    pub stream: bool,
}

/// Sends one streaming request on `conn` and fills `rec`. `epoch` is the campaign clock's
/// origin. `rec.send_ns` becomes the instant the request's first byte was written to the
/// socket (so client-side queueing shows up as schedule lag, never as server latency).
/// Returns how the connection was left.
pub async fn stream_request(
    conn: &mut Connection,
    addr: SocketAddr,
    call: StreamCall<'_>,
    epoch: Instant,
    rules: StreamRules,
    rec: &mut RequestRecord,
) -> SendOutcome {
    let target = Target::plain(addr);
    let x = Exchange {
        target: &target,
        path: call.path,
        body: call.body,
        limits: call.limits,
        stream: true,
    };
    exchange(conn, x, epoch, rules, rec, None).await
}

/// Sends one request on `conn` and fills `rec` (see [`stream_request`]). A streamed
/// response is read as SSE; a non-streamed one (`stream: false`) must be one JSON
/// completion object, whose arrival (the end of the body) is recorded as its only content
/// event: for such a request only E2E and throughput are defined. When `capture` is given,
/// the response's content text is appended to it (multi-turn history, client-side token
/// counting).
pub async fn exchange(
    conn: &mut Connection,
    call: Exchange<'_>,
    epoch: Instant,
    rules: StreamRules,
    rec: &mut RequestRecord,
    capture: Option<&mut String>,
) -> SendOutcome {
    let target = call.target;
    let out = exchange_raw(conn, call, epoch, rules, rec, capture).await;
    target.redact_record(rec);
    out
}

async fn exchange_raw(
    conn: &mut Connection,
    call: Exchange<'_>,
    epoch: Instant,
    rules: StreamRules,
    rec: &mut RequestRecord,
    capture: Option<&mut String>,
) -> SendOutcome {
    let ns = |epoch: Instant| Instant::now().saturating_duration_since(epoch).as_nanos() as u64;
    let resp = match send(conn, &call, epoch, rec).await {
        Ok(r) => r,
        Err(outcome) => return outcome,
    };
    rec.response_head_ns = Some(ns(epoch));
    let status = resp.status();
    rec.http_status = Some(status.as_u16());
    let want = if call.stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    let type_ok = resp
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains(want));
    let mut body = resp.into_body();
    if status != hyper::StatusCode::OK || !type_ok {
        let mut snippet = Vec::new();
        let mut ok = true;
        while let Some(f) = next_frame(&mut body).await {
            match f {
                Ok(f) => {
                    if let Ok(d) = f.into_data() {
                        if snippet.len() < 1024 {
                            snippet.extend_from_slice(&d[..d.len().min(1024 - snippet.len())]);
                        }
                    }
                }
                Err(_) => {
                    ok = false;
                    break;
                }
            }
        }
        rec.end_ns = Some(ns(epoch));
        let text = String::from_utf8_lossy(&snippet);
        let text = call.target.redact(&text);
        rec.outcome = Outcome::Failed {
            reason: if status != hyper::StatusCode::OK {
                format!("http status {}: {}", status.as_u16(), clip(&text))
            } else {
                format!("response is not {want}")
            },
        };
        return SendOutcome::Exchanged { reusable: ok };
    }
    if call.stream {
        read_stream(conn, body, call.limits, epoch, rules, rec, capture).await
    } else {
        read_whole(conn, body, call.limits, epoch, rules, rec, capture).await
    }
}

/// Builds and sends the request; `Err` is how the connection was left when no response
/// head arrived.
async fn send(
    conn: &mut Connection,
    call: &Exchange<'_>,
    epoch: Instant,
    rec: &mut RequestRecord,
) -> Result<hyper::Response<Incoming>, SendOutcome> {
    let ns = |epoch: Instant| Instant::now().saturating_duration_since(epoch).as_nanos() as u64;
    let uri = format!("{}{}", call.target.base_path, call.path);
    let mut builder = hyper::Request::post(uri.as_str())
        .header(hyper::header::HOST, call.target.host.as_str())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(
            hyper::header::ACCEPT,
            if call.stream {
                "text/event-stream"
            } else {
                "application/json"
            },
        )
        .header(
            hyper::header::USER_AGENT,
            concat!("kiln-qual/", env!("CARGO_PKG_VERSION")),
        );
    builder = call.target.decorate(builder);
    let req = match builder.body(FullBody::new(call.body.clone())) {
        Ok(r) => r,
        Err(e) => {
            rec.outcome = Outcome::Failed {
                reason: format!("build request: {e}"),
            };
            return Err(SendOutcome::Exchanged { reusable: false });
        }
    };
    if let Err(e) = conn.sender.ready().await {
        rec.end_ns = Some(ns(epoch));
        rec.outcome = Outcome::Failed {
            reason: format!("connection not ready: {e}"),
        };
        return Err(SendOutcome::Stale);
    }
    conn.first_write.store(0, Ordering::Release);
    let sent = conn.sender.send_request(req).await;
    let wire = conn.first_write.load(Ordering::Acquire);
    if wire != 0 {
        rec.send_ns = Some(
            crate::io::mono_instant(wire)
                .saturating_duration_since(epoch)
                .as_nanos() as u64,
        );
    }
    match sent {
        Ok(r) => Ok(r),
        Err(e) => {
            rec.end_ns = Some(ns(epoch));
            rec.outcome = Outcome::Failed {
                reason: format!("send request: {e}"),
            };
            if e.is_incomplete_message() || e.is_canceled() || e.is_closed() {
                return Err(SendOutcome::Stale);
            }
            Err(SendOutcome::Exchanged { reusable: false })
        }
    }
}

/// The lower end of `read`'s arrival interval on the `epoch` clock: no response byte can
/// precede the request's send, whatever the read knows.
fn bound_below(read: &ReadStamp, epoch: Instant, send_ns: Option<u64>) -> u64 {
    let upper = read.arrival().saturating_duration_since(epoch).as_nanos() as u64;
    let lower = read
        .lower_bound()
        .map(|l| l.saturating_duration_since(epoch).as_nanos() as u64);
    lower.max(send_ns).unwrap_or(upper).min(upper)
}

/// Makes a tail candidate exact when its read drained the queue and ended with the event's
/// terminator (optionally the chunk's CRLF): the newest segment of that read — whose
/// timestamp the read carries — then holds the event's last byte, even where the kernel
/// merged earlier segments into it.
fn confirm_tail(candidate: Option<(ReadStamp, usize)>, rec: &mut RequestRecord) {
    let Some((read, idx)) = candidate else {
        return;
    };
    if read.ends_exactly_with(b"\n\n") || read.ends_exactly_with(b"\n\n\r\n") {
        if let Some(w) = rec.content_event_width_ns.get_mut(idx) {
            *w = 0;
            rec.content_events_exact += 1;
        }
    }
}

/// The lower end of the arrival of a body's end, delivered by `read`: the read's own
/// timestamp where it was kernel-stamped and drained the queue (its newest segment holds the
/// body's last byte: nothing follows a response on an HTTP/1.1 connection before the next
/// request), else [`bound_below`].
fn body_end_lower(read: &ReadStamp, epoch: Instant, send_ns: Option<u64>) -> u64 {
    if read.lag_ns.is_some() && read.drained {
        read.arrival().saturating_duration_since(epoch).as_nanos() as u64
    } else {
        bound_below(read, epoch, send_ns)
    }
}

/// Reads an SSE body event by event.
async fn read_stream(
    conn: &mut Connection,
    mut body: Incoming,
    limits: StreamLimits,
    epoch: Instant,
    rules: StreamRules,
    rec: &mut RequestRecord,
    capture: Option<&mut String>,
) -> SendOutcome {
    let ns = |epoch: Instant| Instant::now().saturating_duration_since(epoch).as_nanos() as u64;
    let mut parser = SseParser::new(MAX_EVENT_BYTES);
    let (mut received_bytes, mut received_events) = (0u64, 0u64);
    let mut st = StreamState::default();
    let mut failure: Option<String> = None;
    let mut reusable = true;
    let mut last_content_read: Option<u64> = None;
    let mut read_clock_events = 0usize;
    // The content event that ended its read's frames, with that read: exact once the next
    // read shows nothing of the same read followed it (see `confirm_tail`).
    let mut tail: Option<(ReadStamp, usize)> = None;
    loop {
        match next_frame(&mut body).await {
            None => {
                confirm_tail(tail.take(), rec);
                break;
            }
            Some(Err(e)) => {
                failure = Some(format!("stream broke: {e}"));
                reusable = false;
                break;
            }
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                let read = *conn.reads.lock().expect("read log");
                match tail.take() {
                    Some(c) if c.0.seq != read.seq => confirm_tail(Some(c), rec),
                    _ => {}
                }
                let t = read.arrival().saturating_duration_since(epoch).as_nanos() as u64;
                let lower = bound_below(&read, epoch, rec.send_ns);
                if rec.first_byte_ns.is_none() {
                    rec.first_byte_ns = Some(t);
                }
                let mut last_event: Option<Option<usize>> = None;
                received_bytes = received_bytes.saturating_add(data.len() as u64);
                // Each event is handled as the parser completes it (no per-event copy); the
                // first failure in stream order ends the request.
                let step = within(received_bytes, limits.max_bytes, "bytes").and_then(|()| {
                    parser
                        .push_each(&data, |ev| {
                            received_events = received_events.saturating_add(1);
                            within(received_events, limits.max_events, "events")?;
                            let before = rec.content_event_ns.len();
                            on_event(ev, (t, lower), rec, &mut st)?;
                            last_event = Some(None);
                            if rec.content_event_ns.len() > before {
                                last_event = Some(Some(before));
                                if last_content_read == Some(read.seq) {
                                    rec.content_events_coalesced += 1;
                                }
                                last_content_read = Some(read.seq);
                                match read.lag_ns {
                                    Some(lag) => rec.content_read_lag_ns.push(lag),
                                    None => read_clock_events += 1,
                                }
                            }
                            Ok(())
                        })
                        .map_err(|e| match e {
                            PushError::Sse(e) => e.to_string(),
                            PushError::Handler(reason) => reason,
                        })
                });
                if let Err(reason) = step {
                    failure = Some(reason);
                    reusable = false;
                    break;
                }
                if let (Some(Some(idx)), false) = (last_event, parser.has_partial_event()) {
                    tail = Some((read, idx));
                }
            }
        }
    }
    rec.end_ns = Some(ns(epoch));
    let end_read = *conn.reads.lock().expect("read log");
    rec.end_lower_ns = Some(body_end_lower(&end_read, epoch, rec.send_ns));
    if !rec.content_event_ns.is_empty() {
        rec.clock_source = Some(if read_clock_events == 0 {
            ClockSource::KernelRxTimestamp
        } else {
            ClockSource::UserRead
        });
    }
    let verdict = failure
        .map(Err)
        .unwrap_or_else(|| finish(rec, &st, &parser, (rules, limits)));
    conclude(rec, verdict, st, capture);
    SendOutcome::Exchanged { reusable }
}

/// Sets the outcome and the output digest; hands the content to `capture`.
fn conclude(
    rec: &mut RequestRecord,
    verdict: Result<(), String>,
    st: StreamState,
    capture: Option<&mut String>,
) {
    match verdict {
        Ok(()) => {
            rec.outcome = Outcome::Succeeded;
        }
        Err(reason) => {
            rec.output_tokens = None;
            rec.outcome = Outcome::Failed { reason };
        }
    }
    if let Some(c) = capture {
        c.push_str(&st.content);
    }
    let mut digest_input = st.reasoning.as_bytes().to_vec();
    digest_input.push(0x1e);
    digest_input.extend_from_slice(st.content.as_bytes());
    rec.output_sha256 = Some(qual_json::sha256_prefixed(&digest_input));
    rec.output_text = Some(crate::record::OutputText {
        reasoning: st.reasoning,
        content: st.content,
    });
}

#[derive(Deserialize)]
struct Whole {
    #[serde(default)]
    choices: Option<Vec<WholeChoice>>,
    #[serde(default)]
    usage: Option<serde_json::Value>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct WholeChoice {
    #[serde(default)]
    message: Option<WholeMessage>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WholeMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
}

/// Reads a non-streamed JSON completion (bounded by `limits.max_bytes`).
async fn read_whole(
    conn: &mut Connection,
    mut body: Incoming,
    limits: StreamLimits,
    epoch: Instant,
    rules: StreamRules,
    rec: &mut RequestRecord,
    capture: Option<&mut String>,
) -> SendOutcome {
    let ns = |epoch: Instant| Instant::now().saturating_duration_since(epoch).as_nanos() as u64;
    let mut bytes = Vec::new();
    let mut failure = None;
    while let Some(f) = next_frame(&mut body).await {
        match f {
            Ok(f) => {
                if let Ok(d) = f.into_data() {
                    let read = *conn.reads.lock().expect("read log");
                    if rec.first_byte_ns.is_none() {
                        rec.first_byte_ns =
                            Some(read.arrival().saturating_duration_since(epoch).as_nanos() as u64);
                    }
                    bytes.extend_from_slice(&d);
                    if let Err(e) = within(bytes.len() as u64, limits.max_bytes, "bytes") {
                        failure = Some(e);
                        break;
                    }
                }
            }
            Err(e) => {
                failure = Some(format!("response body broke: {e}"));
                break;
            }
        }
    }
    rec.end_ns = Some(ns(epoch));
    let end_read = *conn.reads.lock().expect("read log");
    rec.end_lower_ns = Some(body_end_lower(&end_read, epoch, rec.send_ns));
    let reusable = failure.is_none();
    let mut st = StreamState {
        done: true,
        ..StreamState::default()
    };
    let verdict = match failure {
        Some(f) => Err(f),
        None => whole_response(&bytes, &mut st).and_then(|()| {
            if !st.content.is_empty() || !st.reasoning.is_empty() {
                // The whole response is the one content event, at the end of the body.
                // The read that ended the body (its last byte ends the only content event).
                let read = end_read;
                let t = read.arrival().saturating_duration_since(epoch).as_nanos() as u64;
                rec.content_event_ns.push(t);
                let lower = body_end_lower(&read, epoch, rec.send_ns);
                rec.content_events_exact += u64::from(lower == t);
                rec.content_event_width_ns.push(t - lower);
                rec.clock_source = Some(match read.lag_ns {
                    Some(lag) => {
                        rec.content_read_lag_ns.push(lag);
                        ClockSource::KernelRxTimestamp
                    }
                    None => ClockSource::UserRead,
                });
            }
            finish(rec, &st, &SseParser::default(), (rules, limits))
        }),
    };
    conclude(rec, verdict, st, capture);
    SendOutcome::Exchanged { reusable }
}

/// Interprets a non-streamed completion body into `st`.
fn whole_response(bytes: &[u8], st: &mut StreamState) -> Result<(), String> {
    let w: Whole = serde_json::from_slice(bytes)
        .map_err(|e| format!("response body is not a JSON completion object: {e}"))?;
    if let Some(err) = w.error.filter(|e| !e.is_null()) {
        let msg = err
            .get("message")
            .and_then(|m| m.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| err.to_string());
        return Err(format!("error response: {}", clip(&msg)));
    }
    for c in w.choices.unwrap_or_default() {
        if let Some(m) = c.message {
            st.content.push_str(m.content.as_deref().unwrap_or(""));
            for r in [m.reasoning_content, m.reasoning].into_iter().flatten() {
                st.reasoning.push_str(&r);
            }
        }
        if let Some(t) = c.text {
            st.content.push_str(&t);
        }
        if let Some(f) = c.finish_reason {
            st.finish.push(f);
        }
    }
    if let Some(u) = w.usage.filter(|u| !u.is_null()) {
        st.usage.push(u);
    }
    Ok(())
}

/// `Err` once a response carried more than its limit of `what`.
fn within(n: u64, limit: u64, what: &str) -> Result<(), String> {
    if n > limit {
        return Err(format!(
            "stream exceeded {limit} {what}, the limit for its max_tokens"
        ));
    }
    Ok(())
}

fn finish(
    rec: &mut RequestRecord,
    st: &StreamState,
    parser: &SseParser,
    (rules, limits): (StreamRules, StreamLimits),
) -> Result<(), String> {
    if parser.has_partial_event() {
        return Err("stream ended inside an event".into());
    }
    if !st.done && !rules.allow_missing_done {
        return Err("stream ended without data: [DONE]".into());
    }
    if rec.content_event_ns.is_empty() {
        return Err("stream carried no content event".into());
    }
    match st.finish.as_slice() {
        [one] => rec.finish_reason = Some(one.clone()),
        other => {
            return Err(format!(
                "expected exactly one finish reason, got {}",
                other.len()
            ))
        }
    }
    let client = claim_bound(
        rec.content_event_ns.len() as u64,
        (st.content.len() + st.reasoning.len()) as u64,
        None,
        limits.max_tokens,
    );
    rec.client_tokens = Some(client);
    match st.usage.as_slice() {
        [] if rules.allow_missing_usage => {
            rec.output_tokens = Some(TokenCount {
                value: rec.content_event_ns.len() as u64,
                source: TokenSource::ClientCount,
            });
        }
        [] => return Err(
            "stream carried no usage record although stream_options.include_usage was requested"
                .into(),
        ),
        [u] => {
            let usage = parse_usage(u)?;
            // Kept even when refused below: the record shows what the server claimed.
            rec.usage = Some(usage);
            if usage.completion_tokens == 0 {
                return Err(
                    "usage reports zero completion tokens for a stream with content".into(),
                );
            }
            check_claim(usage.completion_tokens, &client)?;
            rec.output_tokens = Some(TokenCount {
                value: usage.completion_tokens,
                source: TokenSource::ServerUsage,
            });
        }
        many => return Err(format!("stream carried {} usage records", many.len())),
    }
    Ok(())
}

/// Sends one non-streamed request (`GET` without a body, `POST` with a JSON body) on a fresh
/// connection and reads at most `max_bytes` of the answer, all within `timeout`; returns the
/// status and the body. Used for side channels that are not the measured traffic (a
/// Prometheus `/metrics` scrape, a `/tokenize` preflight, the numerical oracle's
/// `/completion` with `n_probs`): the one one-shot request path of the workspace.
pub async fn fetch(
    addr: SocketAddr,
    path: &str,
    json_body: Option<Vec<u8>>,
    timeout: Duration,
    max_bytes: usize,
) -> Result<(u16, Vec<u8>), String> {
    fetch_at(
        addr,
        &Target::plain(addr),
        path,
        json_body,
        timeout,
        max_bytes,
    )
    .await
}

/// [`fetch`] on `target`: its `Host` header, path prefix (prepended to `path`), credential
/// and TLS settings (`bench`'s `/tokenize` against the URL it was given).
pub async fn fetch_at(
    addr: SocketAddr,
    target: &Target,
    path: &str,
    json_body: Option<Vec<u8>>,
    timeout: Duration,
    max_bytes: usize,
) -> Result<(u16, Vec<u8>), String> {
    let fut = async {
        let mut conn = connect_to(addr, target)
            .await
            .map_err(|e| format!("connect: {}", qual_json::show::io_error(&e)))?;
        let uri = format!("{}{path}", target.base_path);
        let mut builder = match json_body {
            None => hyper::Request::get(uri.as_str()),
            Some(_) => hyper::Request::post(uri.as_str())
                .header(hyper::header::CONTENT_TYPE, "application/json"),
        };
        builder = target.decorate(builder.header(hyper::header::HOST, target.host.as_str()));
        let req = builder
            .body(
                json_body
                    .map(|b| FullBody::new(Bytes::from(b)))
                    .unwrap_or_default(),
            )
            .map_err(|e| e.to_string())?;
        let resp = conn
            .sender
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut bytes = Vec::new();
        while let Some(f) = next_frame(&mut body).await {
            if let Ok(d) = f.map_err(|e| format!("read body: {e}"))?.into_data() {
                if bytes.len() + d.len() > max_bytes {
                    return Err(format!("{path} answered more than {max_bytes} bytes"));
                }
                bytes.extend_from_slice(&d);
            }
        }
        Ok((status, bytes))
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| format!("{path} did not answer within {} s", timeout.as_secs_f64()))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Endpoint, Phase};

    fn run(events: &[&str], rules: StreamRules) -> RequestRecord {
        let mut rec = RequestRecord::scheduled(0, "x", Phase::Measured, Endpoint::Chat, 0);
        let mut st = StreamState::default();
        let parser = SseParser::default();
        let mut fail = None;
        for (i, e) in events.iter().enumerate() {
            let ev = SseEvent {
                event: None,
                data: e.to_string(),
            };
            if let Err(r) = on_event(&ev, (i as u64 * 10, i as u64 * 10), &mut rec, &mut st) {
                fail = Some(r);
                break;
            }
        }
        let v = fail.map(Err).unwrap_or_else(|| {
            finish(
                &mut rec,
                &st,
                &parser,
                (rules, StreamLimits::for_max_tokens(16)),
            )
        });
        rec.outcome = match v {
            Ok(()) => Outcome::Succeeded,
            Err(reason) => Outcome::Failed { reason },
        };
        rec
    }

    const STRICT: StreamRules = StreamRules {
        allow_missing_usage: false,
        allow_missing_done: false,
    };

    #[test]
    fn role_finish_and_usage_events_are_not_content() {
        let r = run(
            &[
                r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
                r#"{"choices":[{"delta":{"content":"a"}}]}"#,
                r#"{"choices":[{"delta":{"reasoning_content":"r"}}]}"#,
                r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":5,"total_tokens":7}}"#,
                "[DONE]",
            ],
            STRICT,
        );
        assert_eq!(r.outcome, Outcome::Succeeded);
        assert_eq!(r.content_event_ns, vec![10, 20]);
        assert_eq!(r.done_ns, Some(50));
        assert_eq!(
            r.output_tokens,
            Some(TokenCount {
                value: 5,
                source: TokenSource::ServerUsage
            })
        );
        assert_eq!(r.finish_reason.as_deref(), Some("length"));
    }

    #[test]
    fn escaped_text_and_several_choices_are_read_whole() {
        let mut rec = RequestRecord::scheduled(0, "x", Phase::Measured, Endpoint::Chat, 0);
        let mut st = StreamState::default();
        for (i, data) in [
            r#"{"choices":[{"delta":{"content":"plain "}}]}"#,
            r#"{"choices":[{"delta":{"content":"line\nbreak \u00e9 \"q\""}}]}"#,
            r#"{"choices":[{"text":"a"},{"text":"b","finish_reason":"st\u006fp"}]}"#,
        ]
        .iter()
        .enumerate()
        {
            let ev = SseEvent {
                event: None,
                data: data.to_string(),
            };
            on_event(&ev, (i as u64, i as u64), &mut rec, &mut st).unwrap();
        }
        assert_eq!(st.content, "plain line\nbreak é \"q\"ab");
        assert_eq!(st.finish, vec!["stop".to_string()]);
        assert_eq!(rec.content_event_ns, vec![0, 1, 2]);
        let bad = SseEvent {
            event: None,
            data: r#"{"choices":[{"delta":{"content":7}}]}"#.into(),
        };
        let err = on_event(&bad, (3, 3), &mut rec, &mut st).unwrap_err();
        assert!(err.contains("expected a string"), "{err}");
    }

    fn usage_event(completion: u64) -> String {
        format!(
            r#"{{"choices":[{{"delta":{{}},"finish_reason":"length"}}],"usage":{{"prompt_tokens":1,"completion_tokens":{completion},"total_tokens":{}}}}}"#,
            completion + 1
        )
    }

    #[test]
    fn a_claim_beyond_what_the_client_received_fails_by_name() {
        let one = r#"{"choices":[{"delta":{"content":"tok0 "}}]}"#;
        // One event, a billion tokens claimed: above max_tokens (16 in `run`).
        let lie = usage_event(1_000_000_000);
        let r = run(&[one, &lie, "[DONE]"], STRICT);
        assert_eq!(
            r.outcome,
            Outcome::Failed {
                reason: "usage claims 1000000000 completion tokens, more than the request's max_tokens 16".into()
            }
        );
        assert_eq!(r.output_tokens, None);
        // The claim and the client's side are both recorded.
        assert_eq!(r.usage.unwrap().completion_tokens, 1_000_000_000);
        let ct = r.client_tokens.unwrap();
        assert_eq!((ct.content_events, ct.content_bytes, ct.bound), (1, 5, 5));
        // Within max_tokens but above max(5 bytes, 4 × 1 event).
        let lie = usage_event(6);
        let r = run(&[one, &lie, "[DONE]"], STRICT);
        assert!(
            matches!(&r.outcome, Outcome::Failed { reason } if reason.starts_with("usage claims 6 completion tokens for 5 bytes of text in 1 content events received (at most 5")),
            "{:?}",
            r.outcome
        );
        // At the bound it is accepted and counted as claimed.
        let ok = usage_event(5);
        let r = run(&[one, &ok, "[DONE]"], STRICT);
        assert_eq!(r.outcome, Outcome::Succeeded);
        assert_eq!(r.output_tokens.unwrap().value, 5);
    }

    #[test]
    fn an_echoed_key_is_redacted_verbatim_escaped_and_clipped() {
        let t = Target::plain("127.0.0.1:1".parse().unwrap())
            .with_bearer("sk-abc\\\"def-123456")
            .unwrap();
        let key = "sk-abc\\\"def-123456";
        assert_eq!(
            t.redact(&format!("echo Bearer {key}!")),
            format!("echo Bearer {REDACTED}!")
        );
        let escaped = serde_json::Value::from(key).to_string();
        assert_eq!(
            t.redact(&format!("json {escaped}")),
            format!("json \"{REDACTED}\"")
        );
        assert_eq!(t.redact("cut sk-abc\\\"d…"), format!("cut {REDACTED}…"));
        assert_eq!(t.redact("sk- alone"), "sk- alone");
        let mut rec = RequestRecord::scheduled(0, "x", Phase::Measured, Endpoint::Chat, 0);
        rec.finish_reason = Some(format!("Bearer {key}"));
        rec.outcome = Outcome::Failed {
            reason: format!("http status 401: bad key {key}"),
        };
        rec.output_text = Some(crate::record::OutputText {
            reasoning: String::new(),
            content: format!("{key}{key}"),
        });
        t.redact_record(&mut rec);
        let all = format!("{rec:?}");
        assert!(!all.contains("def-123456"), "{all}");
        assert_eq!(rec.finish_reason.unwrap(), format!("Bearer {REDACTED}"));
    }

    #[test]
    fn the_credential_is_never_in_debug_output() {
        let t = Target::plain("127.0.0.1:1".parse().unwrap())
            .with_bearer("sk-very-secret")
            .unwrap();
        assert!(t.has_authorization());
        let d = format!("{t:?}");
        assert!(!d.contains("sk-very"), "{d}");
        assert!(d.contains("<redacted>"));
        assert!(Target::plain("127.0.0.1:1".parse().unwrap())
            .with_bearer("a\nb")
            .is_err());
    }

    #[test]
    fn whole_responses_are_read_like_streams() {
        let mut st = StreamState {
            done: true,
            ..StreamState::default()
        };
        whole_response(
            br#"{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#,
            &mut st,
        )
        .unwrap();
        assert_eq!(
            (st.content.as_str(), st.finish.len(), st.usage.len()),
            ("hi", 1, 1)
        );
        let mut st2 = StreamState {
            done: true,
            ..StreamState::default()
        };
        let e = whole_response(br#"{"error":{"message":"overloaded"}}"#, &mut st2).unwrap_err();
        assert_eq!(e, "error response: overloaded");
    }

    #[test]
    fn in_band_error_fails_the_request() {
        let r = run(
            &[
                r#"{"choices":[{"text":"a"}]}"#,
                r#"{"error":{"message":"boom"}}"#,
                "[DONE]",
            ],
            STRICT,
        );
        assert_eq!(
            r.outcome,
            Outcome::Failed {
                reason: "in-band error event: boom".into()
            }
        );
    }

    #[test]
    fn missing_usage_and_done_are_failures_unless_waived() {
        let ev = [
            r#"{"choices":[{"text":"a","finish_reason":null}]}"#,
            r#"{"choices":[{"text":"b","finish_reason":"stop"}]}"#,
        ];
        let r = run(&ev, STRICT);
        assert!(matches!(r.outcome, Outcome::Failed { ref reason } if reason.contains("[DONE]")));
        let r = run(
            &ev,
            StreamRules {
                allow_missing_usage: true,
                allow_missing_done: true,
            },
        );
        assert_eq!(
            r.output_tokens,
            Some(TokenCount {
                value: 2,
                source: TokenSource::ClientCount
            })
        );
        let mut with_done = ev.to_vec();
        with_done.push("[DONE]");
        let r = run(&with_done, STRICT);
        assert!(
            matches!(r.outcome, Outcome::Failed { ref reason } if reason.contains("no usage record"))
        );
    }

    #[test]
    fn malformed_usage_and_double_finish_fail() {
        let r = run(
            &[
                r#"{"choices":[{"text":"a","finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":3}}"#,
                "[DONE]",
            ],
            STRICT,
        );
        assert!(
            matches!(r.outcome, Outcome::Failed { ref reason } if reason.contains("total_tokens"))
        );
        let r = run(
            &[
                r#"{"choices":[{"text":"a","finish_reason":"stop"},{"text":"b","finish_reason":"stop"}]}"#,
                "[DONE]",
            ],
            STRICT,
        );
        assert!(
            matches!(r.outcome, Outcome::Failed { ref reason } if reason.contains("exactly one finish reason"))
        );
        let r = run(&["[1,2]"], STRICT);
        assert!(
            matches!(r.outcome, Outcome::Failed { ref reason } if reason.contains("not a JSON object"))
        );
    }
}
