//! The zero-compute OpenAI-compatible mock server.
//!
//! Owns: `GET /v1/models`, `GET /health`, `POST /tokenize` (one token per whitespace-separated
//! word, the count its usage reports for a prompt), streaming and non-streaming
//! `POST /v1/chat/completions` and `POST /v1/completions`, paced by the sub-millisecond
//! [`Pacer`], and the error injections the failure-mode tests rely on.
//! It is the test target, the client-headroom roofline and the README's serving example.
//!
//! Timing contract of a stream (chat): a role-only event at once, content event `k`
//! (0-based) at `start + ttft + k·itl` where `start` is when the request body was read, then a
//! finish event (empty delta, `finish_reason`), the usage event when
//! `stream_options.include_usage` is true, and `data: [DONE]`. Deadlines are absolute, so
//! pacing errors never accumulate. With zero TTFT and ITL the whole stream is one buffer.
//!
//! Requests are read the way the load generators engineers use write them: `max_tokens` or
//! `max_completion_tokens` (AIPerf), a `prompt` string or array, message `content` as a
//! string or an array of text parts (guidellm), `n` (only 1 is served; any other value is
//! answered 400), `stop`, `logprobs`/`top_logprobs`, `ignore_eos`, `temperature` and other
//! sampling fields (accepted and ignored: the output is deterministic filler); every chunk
//! carries the OpenAI `object`. Tested unmodified with AIPerf (crates/kiln-qual/tests/bench.rs).
//!
//! Listens on 127.0.0.1 only. Invariant: no injection is active unless its flag was given.
//! Bounded: a request's output is at most [`MAX_OUTPUT_TOKENS`] tokens (a larger
//! `max_tokens` is answered 400 by name), and a stream is built in one buffer only up to
//! [`MAX_BUFFERED_TOKENS`] events (beyond that it is sent event by event), so one request
//! holds at most a few tens of MB whatever it asks for.

/// The most output tokens one request is served; a larger `max_tokens` (or
/// `--output-tokens`) is refused.
pub const MAX_OUTPUT_TOKENS: u64 = 1 << 20;

/// Zero-delay streams up to this many events are sent as one buffer; longer ones event by
/// event through a bounded channel.
pub const MAX_BUFFERED_TOKENS: u64 = 4096;

use crate::io::{BodyItem, ChannelBody, EitherBody, FullBody, TokioIo};
use crate::pacer::Pacer;
use hyper::body::{Body, Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything the mock server can be told. Field names follow the `mock-server` flags.
#[derive(Clone, Debug, PartialEq)]
pub struct MockConfig {
    /// TCP port on 127.0.0.1 (0 picks a free one; the bound port is reported).
    pub port: u16,
    /// Time from request read to the first content event.
    pub ttft: Duration,
    /// Gap between consecutive content events.
    pub itl: Duration,
    /// Content events per response; `None` = the request's `max_tokens` (default 16).
    pub output_tokens: Option<u64>,
    /// Injection: send `output_tokens` content events even beyond the request's `max_tokens`
    /// (a runaway stream).
    pub overrun_max_tokens: bool,
    /// Model id served by `/v1/models`.
    pub model: String,
    /// `/v1/models` answers 503 until this long after start (`u64::MAX` ms: never ready).
    pub ready_after: Duration,
    /// Send an in-band `{"error":…}` event after this many content events, then end.
    pub error_event_after: Option<u64>,
    /// Abort the connection (no terminating chunk) after this many content events.
    pub drop_connection_after: Option<u64>,
    /// Answer every n-th completion request (1-based count) with HTTP 500.
    pub http_500_every: Option<u64>,
    /// Exit the process with code 3 when this many completion requests have arrived.
    pub exit_after_requests: Option<u64>,
    /// On SIGTERM, keep running this long before exiting.
    pub slow_shutdown: Duration,
    /// Ignore SIGTERM entirely.
    pub ignore_sigterm: bool,
    /// Start a child process (same process group, SIGTERM ignored) that outlives the server.
    pub leave_child: bool,
    /// Start a child that escapes into its own session (`setsid`) and outlives the server.
    pub leave_escaped_child: bool,
    /// Start a plain sleeper in its own session (SIGTERM not ignored): only the server could
    /// have stopped it, and it does not.
    pub leave_escaped_sleeper: bool,
    /// Injection: report this `usage.completion_tokens` instead of the true count.
    pub usage_completion_tokens: Option<u64>,
    /// Injection: add the request's arrival number to `usage.prompt_tokens` (non-uniform
    /// prompt tokens for identical prompt lengths).
    pub vary_prompt_tokens: bool,
    /// Serve `GET /metrics` (Prometheus text): `kiln_qual_mock_requests_completed_total` and
    /// `kiln_qual_mock_completion_tokens_total`, counted when a stream's tail is sent.
    pub metrics: bool,
    /// Injection: `/metrics` reports this many fewer completed requests than were served.
    pub metrics_undercount: u64,
    /// Injection: echo the request's `Authorization` header back as the first content
    /// event's text and as the finish reason (and in an injected error event's message).
    pub echo_authorization: bool,
    /// Injection: every n-th completion request (1-based count; 1 = every one) streams no
    /// usage record although `stream_options.include_usage` asked for one.
    pub omit_usage_every: Option<u64>,
    /// Injection: every n-th completion request (1-based count; 1 = every one) ends its
    /// stream without `data: [DONE]`.
    pub omit_done_every: Option<u64>,
    /// Answer a completion request that lacks this header (name, value) with HTTP 400 (a
    /// gateway that needs a tenant or routing header).
    pub require_header: Option<(String, String)>,
}

impl Default for MockConfig {
    fn default() -> MockConfig {
        MockConfig {
            port: 0,
            ttft: Duration::ZERO,
            itl: Duration::ZERO,
            output_tokens: None,
            overrun_max_tokens: false,
            model: "kiln-qual-mock".into(),
            ready_after: Duration::ZERO,
            error_event_after: None,
            drop_connection_after: None,
            http_500_every: None,
            exit_after_requests: None,
            slow_shutdown: Duration::ZERO,
            ignore_sigterm: false,
            leave_child: false,
            leave_escaped_child: false,
            leave_escaped_sleeper: false,
            usage_completion_tokens: None,
            vary_prompt_tokens: false,
            metrics: false,
            metrics_undercount: 0,
            echo_authorization: false,
            omit_usage_every: None,
            omit_done_every: None,
            require_header: None,
        }
    }
}

/// Why the mock server could not run.
#[derive(Debug, thiserror::Error)]
pub enum MockError {
    /// Binding the port failed (already in use, permission…).
    #[error("bind 127.0.0.1:{port}: {source}")]
    Bind {
        /// The port asked for.
        port: u16,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Any other I/O failure (runtime, signal handler, child spawn).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Parses the `mock-server` flags (the same names as the CLI) from `args` (no program name).
/// Used by the test binary `qual-serve-mock`; the CLI parses them with clap.
pub fn parse_flags(args: &[String]) -> Result<MockConfig, String> {
    let mut c = MockConfig::default();
    let mut it = args.iter();
    let ms = |v: Option<&String>, f: &str| -> Result<Duration, String> {
        let v = v.ok_or(format!("{f} needs a value"))?;
        let x: f64 = v.parse().map_err(|_| format!("{f}: not a number: {v}"))?;
        if !(x.is_finite() && x >= 0.0) {
            return Err(format!("{f} must be a finite number >= 0"));
        }
        Duration::try_from_secs_f64(x / 1000.0).map_err(|_| format!("{f} is too large"))
    };
    let int = |v: Option<&String>, f: &str| -> Result<u64, String> {
        let v = v.ok_or(format!("{f} needs a value"))?;
        v.parse().map_err(|_| format!("{f}: not an integer: {v}"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--port" => c.port = int(it.next(), a)? as u16,
            "--ttft-ms" => c.ttft = ms(it.next(), a)?,
            "--itl-ms" => c.itl = ms(it.next(), a)?,
            "--output-tokens" => {
                let n = int(it.next(), a)?;
                if n > MAX_OUTPUT_TOKENS {
                    return Err(format!(
                        "--output-tokens must be at most {MAX_OUTPUT_TOKENS}"
                    ));
                }
                c.output_tokens = Some(n);
            }
            "--model" => c.model = it.next().ok_or("--model needs a value")?.clone(),
            "--ready-after-ms" => c.ready_after = ms(it.next(), a)?,
            "--never-ready" => c.ready_after = Duration::MAX,
            "--error-event-after" => c.error_event_after = Some(int(it.next(), a)?),
            "--drop-connection-after" => c.drop_connection_after = Some(int(it.next(), a)?),
            "--http-500-every" => c.http_500_every = Some(int(it.next(), a)?.max(1)),
            "--exit-after-requests" => c.exit_after_requests = Some(int(it.next(), a)?),
            "--slow-shutdown-ms" => c.slow_shutdown = ms(it.next(), a)?,
            "--ignore-sigterm" => c.ignore_sigterm = true,
            "--leave-child" => c.leave_child = true,
            "--leave-escaped-child" => c.leave_escaped_child = true,
            "--leave-escaped-sleeper" => c.leave_escaped_sleeper = true,
            "--overrun-max-tokens" => c.overrun_max_tokens = true,
            "--usage-completion-tokens" => c.usage_completion_tokens = Some(int(it.next(), a)?),
            "--vary-prompt-tokens" => c.vary_prompt_tokens = true,
            "--metrics" => c.metrics = true,
            "--metrics-undercount" => c.metrics_undercount = int(it.next(), a)?,
            "--echo-authorization" => c.echo_authorization = true,
            "--omit-usage-every" => c.omit_usage_every = Some(int(it.next(), a)?.max(1)),
            "--omit-done-every" => c.omit_done_every = Some(int(it.next(), a)?.max(1)),
            "--require-header" => {
                let v = it.next().ok_or("--require-header needs NAME:VALUE")?;
                let (n, x) = v
                    .split_once(':')
                    .ok_or("--require-header needs NAME:VALUE")?;
                c.require_header = Some((n.trim().to_string(), x.trim().to_string()));
            }
            other => return Err(format!("unknown flag: {other}")),
        }
    }
    Ok(c)
}

struct State {
    cfg: MockConfig,
    started: Instant,
    requests: AtomicU64,
    pacer: Pacer,
    completed: AtomicU64,
    completed_tokens: AtomicU64,
}

/// Runs the server until SIGTERM/SIGINT (honouring the shutdown injections). Blocking; builds
/// its own single-threaded runtime. `on_bound` receives the bound port before serving.
pub fn run_blocking(cfg: MockConfig, on_bound: impl FnOnce(u16)) -> Result<(), MockError> {
    if cfg.ignore_sigterm {
        // SAFETY: installing SIG_IGN has no preconditions.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| MockError::Io {
            what: "start the runtime",
            source,
        })?;
    rt.block_on(async move {
        let port = cfg.port;
        let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .await
            .map_err(|source| MockError::Bind { port, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| MockError::Io {
                what: "read the bound address",
                source,
            })?
            .port();
        if cfg.leave_child {
            spawn_lingering_child(false, true)?;
        }
        if cfg.leave_escaped_child {
            spawn_lingering_child(true, true)?;
        }
        if cfg.leave_escaped_sleeper {
            spawn_lingering_child(true, false)?;
        }
        on_bound(bound);
        let state = Arc::new(State {
            cfg: cfg.clone(),
            started: Instant::now(),
            requests: AtomicU64::new(0),
            pacer: Pacer::global(),
            completed: AtomicU64::new(0),
            completed_tokens: AtomicU64::new(0),
        });
        let mut term = if cfg.ignore_sigterm {
            None
        } else {
            Some(
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .map_err(|source| MockError::Io {
                        what: "install the SIGTERM handler",
                        source,
                    })?,
            )
        };
        let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .map_err(|source| MockError::Io {
                what: "install the SIGINT handler",
                source,
            })?;
        loop {
            tokio::select! {
                acc = listener.accept() => {
                    if let Ok((stream, _)) = acc {
                        let _ = stream.set_nodelay(true);
                        let st = state.clone();
                        tokio::spawn(async move {
                            let svc = hyper::service::service_fn(move |req| {
                                let st = st.clone();
                                async move { Ok::<_, std::convert::Infallible>(handle(st, req).await) }
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        });
                    }
                }
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {
                    if !cfg.slow_shutdown.is_zero() {
                        tokio::time::sleep(cfg.slow_shutdown).await;
                    }
                    report_usage(&state);
                    return Ok(());
                }
                _ = int.recv() => {
                    report_usage(&state);
                    return Ok(());
                }
            }
        }
    })
}

/// One line on stderr at shutdown: the server's own CPU time and request count, so a
/// benchmark can subtract the server from a client's process-tree CPU time.
fn report_usage(state: &State) {
    // SAFETY: getrusage writes one rusage for this process.
    let cpu = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        t(ru.ru_utime) + t(ru.ru_stime)
    };
    eprintln!(
        "mock-server: cpu_seconds {cpu:.6} requests {}",
        state.requests.load(Ordering::SeqCst)
    );
}

#[allow(clippy::disallowed_methods)] // the mock's lingering child is the residue serve's tests must find and kill
fn spawn_lingering_child(escape: bool, ignore_term: bool) -> Result<(), MockError> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|source| MockError::Io {
        what: "find the current executable",
        source,
    })?;
    let mut cmd = std::process::Command::new("/bin/sh");
    // The child (optionally ignoring SIGTERM: the inherited disposition survives exec) sleeps;
    // it is the "server leaves a child behind" injection. `exe` is only used to make the
    // process recognisable in listings.
    let script = if ignore_term {
        "trap '' TERM; while :; do sleep 1; done"
    } else {
        "while :; do sleep 1; done"
    };
    cmd.arg("-c")
        .arg(script)
        .arg(exe.as_os_str())
        .stdin(std::process::Stdio::null());
    // SAFETY: only async-signal-safe calls (signal, setsid) run between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if ignore_term {
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
            }
            if escape {
                libc::setsid();
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|source| MockError::Io {
        what: "spawn the lingering child",
        source,
    })?;
    Ok(())
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response<EitherBody> {
    let mut r = Response::new(EitherBody::Full(FullBody::new(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

async fn read_body(req: Request<Incoming>) -> Result<Vec<u8>, hyper::Error> {
    let mut body = req.into_body();
    let mut out = Vec::new();
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        if let Ok(d) = frame?.into_data() {
            out.extend_from_slice(&d);
        }
    }
    Ok(out)
}

#[derive(Clone, Copy, PartialEq)]
enum Endpoint {
    Chat,
    Completions,
}

async fn handle(st: Arc<State>, req: Request<Incoming>) -> Response<EitherBody> {
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, "/v1/models") => {
            if st.cfg.ready_after == Duration::MAX || st.started.elapsed() < st.cfg.ready_after {
                return json_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    serde_json::json!({"error": {"message": "loading model", "type": "unavailable"}}),
                );
            }
            json_response(
                StatusCode::OK,
                serde_json::json!({"object": "list", "data": [
                    {"id": st.cfg.model, "object": "model", "created": 0, "owned_by": "kiln-qual-mock"}
                ]}),
            )
        }
        (&Method::GET, "/metrics") if st.cfg.metrics => {
            let done = st
                .completed
                .load(Ordering::SeqCst)
                .saturating_sub(st.cfg.metrics_undercount);
            let text = format!(
                "# TYPE kiln_qual_mock_requests_completed_total counter\nkiln_qual_mock_requests_completed_total {done}\n# TYPE kiln_qual_mock_completion_tokens_total counter\nkiln_qual_mock_completion_tokens_total {}\n",
                st.completed_tokens.load(Ordering::SeqCst)
            );
            Response::builder()
                .status(StatusCode::OK)
                .header(hyper::header::CONTENT_TYPE, "text/plain; version=0.0.4")
                .body(EitherBody::Full(FullBody::new(Bytes::from(text))))
                .expect("static response")
        }
        (&Method::GET, "/health") => {
            json_response(StatusCode::OK, serde_json::json!({"status": "ok"}))
        }
        (&Method::POST, "/tokenize") => tokenize(req).await,
        (&Method::POST, "/v1/chat/completions") => completion(st, req, Endpoint::Chat).await,
        (&Method::POST, "/v1/completions") => completion(st, req, Endpoint::Completions).await,
        _ => json_response(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": {"message": "not found", "type": "not_found"}}),
        ),
    }
}

/// `POST /tokenize` as llama.cpp, vLLM and SGLang answer it (`{"tokens": [...], "count": n}`):
/// the text (`content` or `prompt`) split at whitespace, one id per word (FNV-1a of the word,
/// below 50000), so its counts agree with the `prompt_tokens` the mock reports.
async fn tokenize(req: Request<Incoming>) -> Response<EitherBody> {
    let bad = |m: &str| {
        json_response(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": {"message": m, "type": "invalid_request_error"}}),
        )
    };
    let Ok(body) = read_body(req).await else {
        return bad("unreadable body");
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return bad("invalid JSON body");
    };
    let Some(text) = v
        .get("content")
        .or_else(|| v.get("prompt"))
        .and_then(|t| t.as_str())
    else {
        return bad("content (or prompt) must be a string");
    };
    let ids: Vec<u64> = text
        .split_whitespace()
        .map(|w| {
            w.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
            }) % 50_000
        })
        .collect();
    json_response(
        StatusCode::OK,
        serde_json::json!({"count": ids.len(), "tokens": ids}),
    )
}

async fn completion(st: Arc<State>, req: Request<Incoming>, ep: Endpoint) -> Response<EitherBody> {
    let n = st.requests.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(limit) = st.cfg.exit_after_requests {
        if n >= limit {
            eprintln!("mock-server: exiting after {n} requests (injected)");
            std::process::exit(3);
        }
    }
    // The TTFT clock starts when the handler starts, before the body is read.
    let start = Instant::now();
    if let Some((name, value)) = &st.cfg.require_header {
        let got = req.headers().get(name.as_str()).map(|v| v.as_bytes());
        if got != Some(value.as_bytes()) {
            return json_response(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": {"message": format!("missing required header {name}"), "type": "invalid_request_error"}}),
            );
        }
    }
    let echo = st
        .cfg
        .echo_authorization
        .then(|| req.headers().get(hyper::header::AUTHORIZATION))
        .flatten()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(_) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": {"message": "unreadable body"}}),
            )
        }
    };
    if let Some(every) = st.cfg.http_500_every {
        if n.is_multiple_of(every) {
            return json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                serde_json::json!({"error": {"message": "injected internal error", "type": "server_error"}}),
            );
        }
    }
    let parsed: MockRequest = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": {"message": format!("invalid JSON body: {e}")}}),
            )
        }
    };
    if parsed.n.is_some_and(|n| n != 1) {
        return json_response(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": {"message": "only n=1 is supported", "type": "invalid_request_error"}}),
        );
    }
    let max_tokens = parsed
        .max_tokens
        .or(parsed.max_completion_tokens)
        .unwrap_or(16);
    if max_tokens > MAX_OUTPUT_TOKENS {
        return json_response(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": {"message": format!("max_tokens {max_tokens} exceeds the mock server's limit of {MAX_OUTPUT_TOKENS} output tokens"), "type": "invalid_request_error"}}),
        );
    }
    let stream = parsed.stream;
    let include_usage = parsed
        .stream_options
        .as_ref()
        .is_some_and(|o| o.include_usage);
    let (tokens, finish) = match st.cfg.output_tokens {
        Some(t) if st.cfg.overrun_max_tokens => (t.min(MAX_OUTPUT_TOKENS), "length"),
        Some(t) if t < max_tokens => (t, "stop"),
        _ => (max_tokens, "length"),
    };
    let finish = echo.clone().unwrap_or_else(|| finish.to_string());
    let mut prompt_tokens = prompt_token_count(&parsed, ep);
    if st.cfg.vary_prompt_tokens {
        prompt_tokens += n;
    }
    st.completed.fetch_add(1, Ordering::SeqCst);
    st.completed_tokens.fetch_add(tokens, Ordering::SeqCst);
    let plan = Plan {
        ep,
        id: format!("mock-{n}"),
        model: st.cfg.model.clone(),
        tokens,
        finish,
        prompt_tokens,
        include_usage,
        omit_usage: hits(st.cfg.omit_usage_every, n),
        send_done: !hits(st.cfg.omit_done_every, n),
        usage_completion_tokens: st.cfg.usage_completion_tokens,
        echo,
    };
    if !stream {
        if !st.cfg.ttft.is_zero() || !st.cfg.itl.is_zero() {
            let end = start + st.cfg.ttft + st.cfg.itl * tokens.saturating_sub(1) as u32;
            st.pacer.sleep_until(end).await;
        }
        return json_response(StatusCode::OK, plan.whole());
    }
    let resp_body = if st.cfg.ttft.is_zero()
        && st.cfg.itl.is_zero()
        && tokens <= MAX_BUFFERED_TOKENS
        && st.cfg.error_event_after.is_none()
        && st.cfg.drop_connection_after.is_none()
    {
        let mut all = Vec::new();
        if ep == Endpoint::Chat {
            all.extend_from_slice(&plan.role_event());
        }
        let (head, tail) = plan.content_frame();
        for k in 0..tokens {
            all.extend_from_slice(head.as_bytes());
            all.extend_from_slice(plan.escaped_text(k).as_bytes());
            all.extend_from_slice(tail.as_bytes());
        }
        all.extend_from_slice(&plan.tail());
        EitherBody::Full(FullBody::new(all))
    } else {
        let (tx, body) = ChannelBody::channel(16);
        let cfg = st.cfg.clone();
        let pacer = st.pacer.clone();
        tokio::spawn(async move { stream_paced(tx, plan, cfg, pacer, start).await });
        EitherBody::Channel(body)
    };
    let mut r = Response::new(resp_body);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    r.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    r
}

/// Whether request `n` (1-based) is one of every `every`-th.
fn hits(every: Option<u64>, n: u64) -> bool {
    every.is_some_and(|e| n.is_multiple_of(e))
}

async fn stream_paced(
    tx: tokio::sync::mpsc::Sender<BodyItem>,
    plan: Plan,
    cfg: MockConfig,
    pacer: Pacer,
    start: Instant,
) {
    if plan.ep == Endpoint::Chat && tx.send(Ok(plan.role_event())).await.is_err() {
        return;
    }
    for k in 0..plan.tokens {
        if cfg.error_event_after == Some(k) {
            let msg = match &plan.echo {
                Some(e) => format!("injected error event: {e}"),
                None => "injected error event".into(),
            };
            let ev = sse(
                &serde_json::json!({"error": {"message": msg, "type": "server_error", "code": 500}}),
            );
            let _ = tx.send(Ok(ev)).await;
            return;
        }
        if cfg.drop_connection_after == Some(k) {
            let _ = tx.send(Err(crate::io::Dropped)).await;
            return;
        }
        let deadline = start + cfg.ttft + cfg.itl * k as u32;
        pacer.sleep_until(deadline).await;
        if tx.send(Ok(plan.content_event(k))).await.is_err() {
            return;
        }
    }
    let _ = tx.send(Ok(plan.tail())).await;
}

#[derive(serde::Deserialize)]
struct MockRequest {
    #[serde(default)]
    max_tokens: Option<u64>,
    /// The newer OpenAI name of `max_tokens` (AIPerf sends it).
    #[serde(default)]
    max_completion_tokens: Option<u64>,
    #[serde(default)]
    stream: bool,
    /// Choices per request: only 1 is served.
    #[serde(default)]
    n: Option<u64>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    /// A string, or an array of strings or token ids.
    #[serde(default)]
    prompt: Option<serde_json::Value>,
    #[serde(default)]
    messages: Option<Vec<Message>>,
}

#[derive(serde::Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

#[derive(serde::Deserialize)]
struct Message {
    /// A string, or an array of content parts (`{"type": "text", "text": …}`, as guidellm
    /// sends).
    #[serde(default)]
    content: Option<serde_json::Value>,
}

/// Words of a prompt or message content: a string, or an array of strings, text parts or
/// token ids (one word each).
fn words(v: &serde_json::Value) -> u64 {
    match v {
        serde_json::Value::String(s) => s.split_whitespace().count() as u64,
        serde_json::Value::Array(items) => items
            .iter()
            .map(|i| match i {
                serde_json::Value::Object(o) => o.get("text").map_or(0, words),
                serde_json::Value::Number(_) => 1,
                other => words(other),
            })
            .sum(),
        _ => 0,
    }
}

/// Prompt "tokens" of the mock: whitespace-separated words (at least 1).
fn prompt_token_count(v: &MockRequest, ep: Endpoint) -> u64 {
    let n = match ep {
        Endpoint::Completions => v.prompt.as_ref().map_or(0, words),
        Endpoint::Chat => v.messages.as_ref().map_or(0, |ms| {
            ms.iter()
                .filter_map(|m| m.content.as_ref())
                .map(words)
                .sum()
        }),
    };
    n.max(1)
}

struct Plan {
    ep: Endpoint,
    id: String,
    model: String,
    tokens: u64,
    finish: String,
    prompt_tokens: u64,
    include_usage: bool,
    /// Send no usage record at all, streamed or not (the missing-usage injection).
    omit_usage: bool,
    /// End the stream with `data: [DONE]` (false: the missing-`[DONE]` injection).
    send_done: bool,
    usage_completion_tokens: Option<u64>,
    /// The echoed `Authorization` header (injection), the first event's text.
    echo: Option<String>,
}

fn sse(v: &serde_json::Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// The deterministic text of content event `k`: `"tok<k> "`.
pub fn token_text(k: u64) -> String {
    format!("tok{k} ")
}

impl Plan {
    /// Content event `k`'s text: [`token_text`], or the echo for event 0.
    fn text(&self, k: u64) -> String {
        match (&self.echo, k) {
            (Some(e), 0) => e.clone(),
            _ => token_text(k),
        }
    }

    /// [`Plan::text`] as the inside of a JSON string.
    fn escaped_text(&self, k: u64) -> String {
        let q = serde_json::Value::from(self.text(k)).to_string();
        q[1..q.len() - 1].to_string()
    }

    fn object(&self) -> &'static str {
        match self.ep {
            Endpoint::Chat => "chat.completion.chunk",
            Endpoint::Completions => "text_completion",
        }
    }

    fn chunk(&self, choice: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"id": self.id, "object": self.object(), "created": 0, "model": self.model, "choices": [choice]})
    }

    fn role_event(&self) -> Bytes {
        sse(&self.chunk(serde_json::json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null})))
    }

    /// The text around a content event's token (JSON-escaped id and model), so that a
    /// zero-delay stream of thousands of events costs one `format!` per event.
    fn content_frame(&self) -> (String, &'static str) {
        let q = |s: &str| serde_json::Value::from(s).to_string();
        match self.ep {
            Endpoint::Chat => (
                format!(
                    "data: {{\"id\":{},\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":{},\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"",
                    q(&self.id),
                    q(&self.model)
                ),
                "\"},\"finish_reason\":null}]}\n\n",
            ),
            Endpoint::Completions => (
                format!(
                    "data: {{\"id\":{},\"object\":\"text_completion\",\"created\":0,\"model\":{},\"choices\":[{{\"index\":0,\"text\":\"",
                    q(&self.id),
                    q(&self.model)
                ),
                "\",\"logprobs\":null,\"finish_reason\":null}]}\n\n",
            ),
        }
    }

    fn content_event(&self, k: u64) -> Bytes {
        let (head, tail) = self.content_frame();
        Bytes::from(format!("{head}{}{tail}", self.escaped_text(k)))
    }

    fn usage(&self) -> serde_json::Value {
        let tokens = self.usage_completion_tokens.unwrap_or(self.tokens);
        serde_json::json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": tokens, "total_tokens": self.prompt_tokens + tokens})
    }

    fn tail(&self) -> Bytes {
        let choice = match self.ep {
            Endpoint::Chat => {
                serde_json::json!({"index": 0, "delta": {}, "finish_reason": self.finish})
            }
            Endpoint::Completions => {
                serde_json::json!({"index": 0, "text": "", "logprobs": null, "finish_reason": self.finish})
            }
        };
        let mut out = Vec::new();
        out.extend_from_slice(&sse(&self.chunk(choice)));
        if self.include_usage && !self.omit_usage {
            let u = serde_json::json!({"id": self.id, "object": self.object(), "created": 0, "model": self.model, "choices": [], "usage": self.usage()});
            out.extend_from_slice(&sse(&u));
        }
        if self.send_done {
            out.extend_from_slice(b"data: [DONE]\n\n");
        }
        Bytes::from(out)
    }

    fn whole(&self) -> serde_json::Value {
        let text: String = (0..self.tokens).map(|k| self.text(k)).collect();
        let choice = match self.ep {
            Endpoint::Chat => {
                serde_json::json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": self.finish})
            }
            Endpoint::Completions => {
                serde_json::json!({"index": 0, "text": text, "logprobs": null, "finish_reason": self.finish})
            }
        };
        let object = match self.ep {
            Endpoint::Chat => "chat.completion",
            Endpoint::Completions => "text_completion",
        };
        let mut whole = serde_json::json!({"id": self.id, "object": object, "created": 0, "model": self.model, "choices": [choice]});
        if !self.omit_usage {
            whole["usage"] = self.usage();
        }
        whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_events_are_valid_json_with_escaped_fields() {
        for ep in [Endpoint::Chat, Endpoint::Completions] {
            let plan = Plan {
                ep,
                id: "mock-1".into(),
                model: "m\"odel".into(),
                tokens: 1,
                finish: "length".into(),
                prompt_tokens: 1,
                include_usage: true,
                omit_usage: false,
                send_done: true,
                usage_completion_tokens: None,
                echo: None,
            };
            let ev = plan.content_event(7);
            let text = std::str::from_utf8(&ev).unwrap();
            let json = text
                .strip_prefix("data: ")
                .unwrap()
                .strip_suffix("\n\n")
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(json).unwrap();
            assert_eq!(v["model"], "m\"odel");
            let got = match ep {
                Endpoint::Chat => &v["choices"][0]["delta"]["content"],
                Endpoint::Completions => &v["choices"][0]["text"],
            };
            assert_eq!(got, "tok7 ");
        }
    }

    #[test]
    fn prompts_count_words_in_strings_parts_and_token_arrays() {
        let v: MockRequest = serde_json::from_str(
            r#"{"max_completion_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"a b"},{"type":"text","text":"c"}]},{"content":"d e"}]}"#,
        )
        .unwrap();
        assert_eq!(prompt_token_count(&v, Endpoint::Chat), 5);
        assert_eq!(v.max_tokens.or(v.max_completion_tokens), Some(3));
        let v: MockRequest = serde_json::from_str(r#"{"prompt":[1,2,3,4]}"#).unwrap();
        assert_eq!(prompt_token_count(&v, Endpoint::Completions), 4);
    }

    #[test]
    fn flags_parse_and_reject_unknown() {
        let a: Vec<String> = [
            "--port",
            "8080",
            "--ttft-ms",
            "20",
            "--itl-ms",
            "5.5",
            "--ignore-sigterm",
            "--http-500-every",
            "3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let c = parse_flags(&a).unwrap();
        assert_eq!(c.port, 8080);
        assert_eq!(c.ttft, Duration::from_millis(20));
        assert_eq!(c.itl, Duration::from_micros(5500));
        assert!(c.ignore_sigterm);
        assert_eq!(c.http_500_every, Some(3));
        assert!(parse_flags(&["--bogus".to_string()]).is_err());
        assert!(parse_flags(&["--ttft-ms".to_string(), "-1".to_string()]).is_err());
    }
}
