//! The load generator — the one engine behind `serve` and `bench`: closed loop at a
//! concurrency, open loop at a rate or at a trace's timestamps.
//!
//! Owns scheduling and the per-request record lifecycle. What is sent is a [`RequestPlan`]
//! of sessions (a session is one request, or the turns of a conversation, sent one after
//! another on one connection with the earlier turns and the server's replies as history);
//! draw `j` is session `j mod n`, warmup draws first. `serve`'s corpus becomes a plan in the
//! order of [`corpus::permutation`] ([`RequestPlan::from_corpus`]). Warmup runs to completion
//! before measurement starts, as a closed loop at the measured concurrency (open loop:
//! concurrency 1), and is recorded with phase `warmup`.
//!
//! Idle keep-alive connections live in one pool shared by warmup and measurement, so warmup
//! opens the connections the measured requests reuse.
//!
//! * Closed loop: `concurrency` workers, each with its own keep-alive connection; a worker
//!   takes the next session the moment its previous one ends, which is the request's
//!   scheduled time. With a ramp-up, worker `i` of `c` starts at `i/c × ramp`.
//! * Open loop: session `i` is scheduled at `t0 + offset_i` (constant: `i / rate`; Poisson:
//!   cumulative exponential gaps with mean `1 / rate`, drawn from SplitMix64 seeded with the
//!   declared seed XOR `0x6f70656e5f6c6f6f`; with a ramp-up the offsets are warped so the
//!   rate rises linearly from 0; trace replay: the session's own offset × a scale) and sent
//!   at that instant by the sub-millisecond [`Pacer`] on an idle pooled connection or a new
//!   one. At most `max_in_flight` sessions are outstanding; a session that has to wait for a
//!   slot is still sent (late), never dropped, and its lag is recorded. A later turn is
//!   scheduled when the previous one ended.
//! * Ending early ([`EngineOptions`]): after a declared duration, or when an early-stop rule
//!   fires (error rate, or the fraction of late sends: over-saturation), no request starts;
//!   in-flight ones finish. The [`StopReason`] is returned.
//!
//! The whole generator runs on one thread with a single-threaded runtime (optionally pinned
//! to one CPU), so its capacity is a per-core number. Each request records that thread's
//! run-queue wait and involuntary context switches between its start and end
//! ([`crate::threadstat`]), for the measurement-validity gate. Invariants: every started
//! request yields exactly one record, returned in sequence order; [`run`] (serve's entry
//! point) returns one record per scheduled request, as it always has.

use crate::client::{self, Connection, Exchange, SendOutcome, StreamRules, Target};
use crate::corpus::{self, Corpus, SplitMix64};
use crate::pacer::Pacer;
use crate::record::{Endpoint, Outcome, Phase, RequestRecord, TokenSource};
use crate::threadstat::ThreadSample;
use hyper::body::Bytes;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How requests arrive.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Arrival {
    /// A fixed number of outstanding requests.
    ClosedLoop {
        /// Outstanding requests.
        concurrency: usize,
    },
    /// Evenly spaced sends.
    Constant {
        /// Requests per second.
        rate_per_second: f64,
    },
    /// Exponentially distributed gaps.
    Poisson {
        /// Mean requests per second.
        rate_per_second: f64,
    },
    /// Gamma-distributed gaps with mean `1 / rate_per_second`: `shape` 1 is Poisson, below
    /// 1 burstier (coefficient of variation `1 / √shape`), above 1 more regular.
    Gamma {
        /// Mean requests per second.
        rate_per_second: f64,
        /// The gaps' shape parameter (> 0).
        shape: f64,
    },
}

/// Everything the generator needs besides the corpus.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LoadSpec {
    /// Server address (127.0.0.1).
    pub addr: SocketAddr,
    /// The `model` sent in every request.
    pub model: String,
    /// Arrival process.
    pub arrival: Arrival,
    /// Warmup requests (excluded from metrics).
    pub warmup: usize,
    /// Measured requests.
    pub measured: usize,
    /// Order seed.
    pub seed: u64,
    /// Open-loop bound on outstanding requests.
    pub max_in_flight: usize,
    /// Per-request deadline.
    #[serde(serialize_with = "secs")]
    pub request_timeout: Duration,
    /// Stream acceptance switches.
    #[serde(skip)]
    pub rules: StreamRules,
    /// CPU to pin the generator thread to.
    pub pin_cpu: Option<usize>,
    /// Run the generator thread under `SCHED_FIFO` (priority [`REALTIME_PRIORITY`]), so it
    /// reads as soon as data arrives even on a loaded host; refused by name where the
    /// scheduler denies it (needs `CAP_SYS_NICE` or an `RLIMIT_RTPRIO`), never dropped.
    pub realtime_reader: bool,
}

/// The `SCHED_FIFO` priority of a realtime reader (low: above every normal thread, below
/// the kernel's own realtime threads).
pub const REALTIME_PRIORITY: i32 = 10;

/// Puts the calling thread under `SCHED_FIFO` at [`REALTIME_PRIORITY`].
fn realtime_thread() -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: REALTIME_PRIORITY,
    };
    // SAFETY: sched_setscheduler(0, …) affects only this thread; `param` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!("run the load generator under SCHED_FIFO (--realtime-reader; needs CAP_SYS_NICE or RLIMIT_RTPRIO, run without the flag otherwise): {e}"),
        ));
    }
    Ok(())
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// A progress snapshot, reported after each completed request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Completed requests (warmup included).
    pub done: u64,
    /// All requests (warmup included).
    pub total: u64,
    /// Failed requests so far.
    pub failed: u64,
    /// Output tokens of successful requests so far.
    pub output_tokens: u64,
    /// Time since the generator started.
    pub elapsed: Duration,
}

/// Receives progress snapshots (the CLI draws a progress bar).
pub trait ProgressSink: Send + Sync {
    /// Called after each completed request.
    fn update(&self, p: Progress);
}

/// Why the generator could not run at all (individual request failures are records).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Invalid arguments.
    #[error("plan the load: {0}")]
    Plan(String),
    /// The runtime or thread could not start.
    #[error("start the load generator: {0}")]
    Start(std::io::Error),
}

/// One request of a [`RequestPlan`]: one turn of a session.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedTurn {
    /// Identifier recorded as the record's `corpus_id`.
    pub id: String,
    /// Target endpoint.
    pub endpoint: Endpoint,
    /// The request object without history: `messages` holds this turn's own messages
    /// (chat), `prompt` this turn's prompt string (completions). The engine sets `stream`
    /// and `stream_options`.
    pub body: serde_json::Map<String, serde_json::Value>,
    /// The requested maximum of output tokens (a bound on the response, never a count).
    pub max_tokens: u64,
}

/// A sequence of turns sent one after another on one connection; each turn after the first
/// carries the earlier turns and the server's replies as history. A single request is a
/// session of one turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// The turns, in order.
    pub turns: Vec<PlannedTurn>,
    /// Trace replay: the first turn's send offset from the start of measurement, seconds.
    pub offset_s: Option<f64>,
}

/// The sessions a run draws from: draw `j` is `sessions[j mod n]`, warmup draws first.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestPlan {
    /// The sessions, in draw order.
    pub sessions: Vec<Session>,
}

impl RequestPlan {
    /// The plan of a corpus: one single-turn session per entry, in the seeded order of
    /// [`corpus::permutation`] (the order `serve` has always used).
    pub fn from_corpus(corpus: &Corpus, seed: u64) -> RequestPlan {
        let perm = corpus::permutation(corpus.entries.len(), seed);
        RequestPlan {
            sessions: perm
                .into_iter()
                .map(|i| {
                    let e = &corpus.entries[i];
                    let body = match serde_json::from_slice(&corpus::request_body(e, "")) {
                        Ok(serde_json::Value::Object(m)) => m,
                        _ => serde_json::Map::new(),
                    };
                    Session {
                        turns: vec![PlannedTurn {
                            id: e.id.clone(),
                            endpoint: e.endpoint,
                            body,
                            max_tokens: e.max_tokens,
                        }],
                        offset_s: None,
                    }
                })
                .collect(),
        }
    }

    /// Turns over all sessions.
    pub fn turn_count(&self) -> usize {
        self.sessions.iter().map(|s| s.turns.len()).sum()
    }
}

/// Counts tokens of response text on the client (a real tokenizer), used when the server
/// sends no usage record and that is allowed.
#[derive(Clone)]
pub struct TokenCounter(pub Arc<dyn Fn(&str) -> u64 + Send + Sync>);

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCounter")
    }
}

/// When to stop a run early, evaluated after every measured completion once
/// `min_requests` measured requests have completed.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct EarlyStop {
    /// Stop when failed / completed measured requests exceeds this.
    pub max_error_fraction: Option<f64>,
    /// Stop when the fraction of measured sends lagging their schedule by more than
    /// `late_send_ms` exceeds this (the client or the server cannot keep the schedule:
    /// over-saturation).
    pub max_late_send_fraction: Option<f64>,
    /// Lag beyond which a send is late, ms.
    pub late_send_ms: f64,
    /// Completions before the rules apply.
    pub min_requests: usize,
}

/// Why a run stopped.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "stop", rename_all = "snake_case")]
pub enum StopReason {
    /// Every planned request was sent and completed.
    Completed,
    /// The declared duration elapsed; no request was started after it.
    DurationElapsed {
        /// The declared duration.
        seconds: f64,
    },
    /// An early-stop rule fired; no request was started after it.
    EarlyStop {
        /// Which rule, with the observed value.
        reason: String,
    },
    /// SIGINT/SIGTERM.
    Interrupted {
        /// The signal number.
        signal: i32,
    },
}

/// Engine settings beyond [`LoadSpec`] (all optional; the default is what `serve` does).
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Host header, path prefix and credential (default: [`Target::plain`] of the address).
    pub target: Option<Target>,
    /// Streamed (SSE) requests; `false` sends `"stream": false` (only E2E and throughput
    /// are defined then).
    pub stream: bool,
    /// Closed loop: worker `i` of `c` starts at `i/c × ramp_up`. Open loop: the rate rises
    /// linearly from 0 to the target over `ramp_up` (the arrival times are warped).
    pub ramp_up: Duration,
    /// Stop starting requests this long after measurement began.
    pub duration: Option<Duration>,
    /// Early-stop rules.
    pub early_stop: Option<EarlyStop>,
    /// Trace replay: send each session at its `offset_s` × this scale (open loop; the
    /// arrival's rate is not used).
    pub trace_time_scale: Option<f64>,
    /// Client-side token counting: the count of responses without usage, and a bound on
    /// every server's claim (checked after the run).
    pub token_counter: Option<TokenCounter>,
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions {
            target: None,
            stream: true,
            ramp_up: Duration::ZERO,
            duration: None,
            early_stop: None,
            trace_time_scale: None,
            token_counter: None,
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    /// One record per started request, in sequence order (a request never started has no
    /// record).
    pub records: Vec<RequestRecord>,
    /// Why the run ended.
    pub stop: StopReason,
}

struct TurnData {
    id: String,
    endpoint: Endpoint,
    body: serde_json::Map<String, serde_json::Value>,
    first: Bytes,
    limits: client::StreamLimits,
}

struct Ctx {
    spec: LoadSpec,
    opts: EngineOptions,
    target: Target,
    epoch: Instant,
    sessions: Vec<Vec<TurnData>>,
    offsets: Vec<Option<f64>>,
    turn_base: Vec<usize>,
    cycle_turns: usize,
    total_turns: u64,
    results: Mutex<Vec<(usize, RequestRecord)>>,
    done: AtomicU64,
    failed: AtomicU64,
    tokens: AtomicU64,
    measured_done: AtomicU64,
    measured_failed: AtomicU64,
    measured_late: AtomicU64,
    started: Instant,
    progress: Option<Arc<dyn ProgressSink>>,
    /// Idle keep-alive connections, shared by warmup and measurement (so warmup opens the
    /// connections the measurement uses).
    pool: Mutex<Vec<Connection>>,
    stop: AtomicBool,
    stop_reason: Mutex<Option<StopReason>>,
    deadline: OnceLock<Instant>,
}

/// The body of a turn with its history (earlier messages, or the earlier prompt text).
fn with_history(turn: &TurnData, history: &History, stream: bool) -> Bytes {
    let mut m = turn.body.clone();
    match turn.endpoint {
        Endpoint::Chat => {
            let mut msgs = history.messages.clone();
            if let Some(serde_json::Value::Array(own)) = m.get("messages") {
                msgs.extend(own.iter().cloned());
            }
            m.insert("messages".into(), serde_json::Value::Array(msgs));
        }
        Endpoint::Completions => {
            let own = m.get("prompt").and_then(|p| p.as_str()).unwrap_or("");
            let p = format!("{}{own}", history.text);
            m.insert("prompt".into(), p.into());
        }
    }
    set_stream(&mut m, stream);
    Bytes::from(serde_json::to_vec(&serde_json::Value::Object(m)).expect("body serializes"))
}

fn set_stream(m: &mut serde_json::Map<String, serde_json::Value>, stream: bool) {
    m.insert("stream".into(), stream.into());
    if stream {
        m.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": true}),
        );
    } else {
        m.remove("stream_options");
    }
}

#[derive(Default)]
struct History {
    messages: Vec<serde_json::Value>,
    text: String,
}

impl History {
    fn push(&mut self, turn: &TurnData, reply: &str) {
        match turn.endpoint {
            Endpoint::Chat => {
                if let Some(serde_json::Value::Array(own)) = turn.body.get("messages") {
                    self.messages.extend(own.iter().cloned());
                }
                self.messages
                    .push(serde_json::json!({"role": "assistant", "content": reply}));
            }
            Endpoint::Completions => {
                let own = turn
                    .body
                    .get("prompt")
                    .and_then(|p| p.as_str())
                    .unwrap_or("");
                self.text.push_str(own);
                self.text.push_str(reply);
            }
        }
    }
}

impl Ctx {
    fn now_ns(&self) -> u64 {
        Instant::now()
            .saturating_duration_since(self.epoch)
            .as_nanos() as u64
    }

    fn index(&self, j: usize, t: usize) -> usize {
        let n = self.sessions.len();
        (j / n) * self.cycle_turns + self.turn_base[j % n] + t
    }

    fn halt(&self, reason: StopReason) {
        let mut r = self.stop_reason.lock().expect("stop reason");
        if r.is_none() {
            *r = Some(reason);
        }
        self.stop.store(true, Ordering::Release);
    }

    /// Whether no further request may start.
    fn stopping(&self) -> bool {
        if self.stop.load(Ordering::Acquire) {
            return true;
        }
        if let Some(d) = self.deadline.get() {
            if Instant::now() >= *d {
                self.halt(StopReason::DurationElapsed {
                    seconds: self.opts.duration.map_or(0.0, |d| d.as_secs_f64()),
                });
                return true;
            }
        }
        false
    }

    fn record(&self, k: usize, rec: RequestRecord) {
        let failed = matches!(rec.outcome, Outcome::Failed { .. });
        if failed {
            self.failed.fetch_add(1, Ordering::Relaxed);
        } else if let Some(t) = rec.output_tokens {
            self.tokens.fetch_add(t.value, Ordering::Relaxed);
        }
        if rec.phase == Phase::Measured {
            self.check_early_stop(&rec, failed);
        }
        self.results.lock().expect("results").push((k, rec));
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(p) = &self.progress {
            p.update(Progress {
                done,
                total: self.total_turns,
                failed: self.failed.load(Ordering::Relaxed),
                output_tokens: self.tokens.load(Ordering::Relaxed),
                elapsed: self.started.elapsed(),
            });
        }
    }

    fn check_early_stop(&self, rec: &RequestRecord, failed: bool) {
        let Some(es) = self.opts.early_stop else {
            return;
        };
        let n = self.measured_done.fetch_add(1, Ordering::Relaxed) + 1;
        let nf = if failed {
            self.measured_failed.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.measured_failed.load(Ordering::Relaxed)
        };
        let reference = rec
            .scheduled_ns
            .max(rec.connected_ns.unwrap_or(0))
            .max(rec.retry_started_ns.unwrap_or(0));
        let late = rec
            .send_ns
            .is_some_and(|s| s.saturating_sub(reference) as f64 / 1e6 > es.late_send_ms);
        let nl = if late {
            self.measured_late.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.measured_late.load(Ordering::Relaxed)
        };
        if (n as usize) < es.min_requests.max(1) {
            return;
        }
        let frac = |x: u64| x as f64 / n as f64;
        if let Some(max) = es.max_error_fraction.filter(|&m| frac(nf) > m) {
            self.halt(StopReason::EarlyStop {
                reason: format!(
                    "error rate {:.2}% of {n} measured requests exceeded {:.2}%",
                    frac(nf) * 100.0,
                    max * 100.0
                ),
            });
        } else if let Some(max) = es.max_late_send_fraction.filter(|&m| frac(nl) > m) {
            self.halt(StopReason::EarlyStop {
                reason: format!(
                    "over-saturation: {:.2}% of {n} measured sends lagged their schedule by more than {} ms (limit {:.2}%)",
                    frac(nl) * 100.0,
                    es.late_send_ms,
                    max * 100.0
                ),
            });
        }
    }

    /// Runs every turn of session draw `j` on `conn`; the first turn is scheduled at
    /// `scheduled_ns`, each later one when the previous ended. A failed turn ends the
    /// session (its history is broken).
    async fn run_session(&self, conn: &mut Option<Connection>, j: usize, scheduled_ns: u64) {
        let turns = &self.sessions[j % self.sessions.len()];
        let phase = if j < self.spec.warmup {
            Phase::Warmup
        } else {
            Phase::Measured
        };
        let mut history = History::default();
        let mut scheduled = scheduled_ns;
        for (t, turn) in turns.iter().enumerate() {
            if t > 0 && self.stopping() {
                break;
            }
            let body = if t == 0 {
                turn.first.clone()
            } else {
                with_history(turn, &history, self.opts.stream)
            };
            // The reply text is kept only for the next turn's history (a tokenizer counts the
            // record's own text).
            let capture = t + 1 < turns.len();
            let mut reply = String::new();
            let k = self.index(j, t);
            let mut rec =
                RequestRecord::scheduled(k as u64, &turn.id, phase, turn.endpoint, scheduled);
            self.one(conn, turn, body, &mut rec, capture.then_some(&mut reply))
                .await;
            self.count_client_tokens(&mut rec);
            let ok = rec.outcome.is_success();
            self.record(k, rec);
            if !ok || t + 1 == turns.len() {
                break;
            }
            history.push(turn, &reply);
            scheduled = self.now_ns();
        }
    }

    /// A response without usage (allowed) is counted with the tokenizer when one is given
    /// (over its reasoning and content text); a non-streamed one without either cannot be
    /// counted and fails. (A server's claim is held to the tokenizer after the run, off the
    /// load thread: [`check_claims_with_tokenizer`].)
    fn count_client_tokens(&self, rec: &mut RequestRecord) {
        let Some(c) = rec.output_tokens else {
            return;
        };
        if c.source != TokenSource::ClientCount {
            return;
        }
        match &self.opts.token_counter {
            Some(counter) => {
                let counted = tokenizer_count(counter, rec);
                if let Some(ct) = &mut rec.client_tokens {
                    ct.tokenizer_tokens = Some(counted);
                }
                rec.output_tokens = Some(crate::record::TokenCount {
                    value: counted,
                    source: TokenSource::ClientTokenizer,
                });
            }
            None if !self.opts.stream => {
                rec.output_tokens = None;
                rec.outcome = Outcome::Failed {
                    reason: "non-streamed response carried no usage record and no tokenizer was given to count its tokens".into(),
                };
            }
            None => {}
        }
    }

    async fn one(
        &self,
        conn: &mut Option<Connection>,
        turn: &TurnData,
        body: Bytes,
        rec: &mut RequestRecord,
        mut capture: Option<&mut String>,
    ) {
        let thread_before = ThreadSample::now();
        rec.started_ns = Some(self.now_ns());
        let timeout = self.spec.request_timeout;
        let fut = async {
            loop {
                let mut fresh = false;
                if conn.as_ref().is_none_or(|c| !c.is_usable()) {
                    match client::connect_to(self.spec.addr, &self.target).await {
                        Ok(c) => {
                            *conn = Some(c);
                            fresh = true;
                            rec.connected_ns = Some(self.now_ns());
                        }
                        Err(e) => {
                            rec.end_ns = Some(self.now_ns());
                            rec.outcome = Outcome::Failed {
                                reason: format!("connect to {}: {e}", self.spec.addr),
                            };
                            return;
                        }
                    }
                }
                let c = conn.as_mut().expect("connected");
                if let Some(cap) = capture.as_deref_mut() {
                    cap.clear();
                }
                let sent = client::exchange(
                    c,
                    Exchange {
                        target: &self.target,
                        path: turn.endpoint.path(),
                        body: body.clone(),
                        limits: turn.limits,
                        stream: self.opts.stream,
                    },
                    self.epoch,
                    self.spec.rules,
                    rec,
                    capture.as_deref_mut(),
                )
                .await;
                match sent {
                    SendOutcome::Exchanged { reusable } => {
                        if !reusable {
                            *conn = None;
                        }
                        return;
                    }
                    SendOutcome::Stale => {
                        *conn = None;
                        // A reused connection the server had already closed: retry once on a
                        // fresh one. A fresh connection failing this way is a real failure.
                        if fresh || rec.stale_connection_retries > 0 {
                            return;
                        }
                        rec.stale_connection_retries += 1;
                        rec.first_attempt_send_ns = rec.send_ns.take();
                        rec.retry_started_ns = Some(self.now_ns());
                        rec.end_ns = None;
                    }
                }
            }
        };
        if tokio::time::timeout(timeout, fut).await.is_err() {
            *conn = None;
            rec.end_ns = Some(self.now_ns());
            rec.output_tokens = None;
            rec.outcome = Outcome::Failed {
                reason: format!("request timed out after {} s", timeout.as_secs_f64()),
            };
        }
        let thread = ThreadSample::now().since(&thread_before);
        rec.run_queue_wait_ns = thread.run_queue_wait_ns;
        rec.involuntary_switches = Some(thread.involuntary_switches);
    }
}

async fn closed_loop(
    ctx: Arc<Ctx>,
    range: std::ops::Range<usize>,
    concurrency: usize,
    ramp_up: Duration,
) {
    let next = Arc::new(AtomicUsize::new(range.start));
    let t0 = Instant::now();
    let workers = concurrency.max(1);
    let mut handles = Vec::new();
    for w in 0..workers {
        let ctx = ctx.clone();
        let next = next.clone();
        let end = range.end;
        handles.push(tokio::spawn(async move {
            if !ramp_up.is_zero() && w > 0 {
                let at = t0 + ramp_up.mul_f64(w as f64 / workers as f64);
                Pacer::global().sleep_until(at).await;
            }
            let mut conn: Option<Connection> = ctx.pool.lock().expect("pool").pop();
            loop {
                if ctx.stopping() {
                    break;
                }
                let j = next.fetch_add(1, Ordering::Relaxed);
                if j >= end {
                    break;
                }
                let scheduled = ctx.now_ns();
                ctx.run_session(&mut conn, j, scheduled).await;
            }
            if let Some(c) = conn.filter(|c| c.is_usable()) {
                ctx.pool.lock().expect("pool").push(c);
            }
        }));
    }
    for h in handles {
        let _ = h.await;
    }
}

/// Arrival offsets, generated one at a time (a duration-bounded run may draw millions).
struct Offsets {
    arrival: Arrival,
    rng: SplitMix64,
    t: f64,
    i: usize,
    ramp_s: f64,
}

impl Offsets {
    fn new(arrival: Arrival, seed: u64, ramp_up: Duration) -> Offsets {
        Offsets {
            arrival,
            rng: SplitMix64::new(seed ^ 0x6f70_656e_5f6c_6f6f),
            t: 0.0,
            i: 0,
            ramp_s: ramp_up.as_secs_f64(),
        }
    }

    /// Warps an offset at the full rate into one under a linear ramp from rate 0 over
    /// `ramp_s`: arrivals by time `t` are `r t² / (2R)` before `R`, `r (t − R/2)` after.
    fn ramped(&self, u: f64) -> f64 {
        let r = self.ramp_s;
        if r <= 0.0 {
            u
        } else if u < r / 2.0 {
            (2.0 * r * u).sqrt()
        } else {
            u + r / 2.0
        }
    }
}

impl Iterator for Offsets {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        let u = match self.arrival {
            Arrival::ClosedLoop { .. } => 0.0,
            Arrival::Constant { rate_per_second } => self.i as f64 / rate_per_second,
            Arrival::Poisson { rate_per_second } => {
                if self.i > 0 {
                    self.t += -self.rng.unit_open0().ln() / rate_per_second;
                }
                self.t
            }
            Arrival::Gamma {
                rate_per_second,
                shape,
            } => {
                if self.i > 0 {
                    self.t += self.rng.gamma(shape) / (shape * rate_per_second);
                }
                self.t
            }
        };
        self.i += 1;
        Some(self.ramped(u))
    }
}

/// Open-loop send offsets from the start, in seconds.
pub fn open_loop_offsets(arrival: Arrival, n: usize, seed: u64) -> Vec<f64> {
    Offsets::new(arrival, seed, Duration::ZERO)
        .take(n)
        .collect()
}

/// Open-loop send offsets under a linear ramp-up (see [`EngineOptions::ramp_up`]).
pub fn ramped_offsets(arrival: Arrival, n: usize, seed: u64, ramp_up: Duration) -> Vec<f64> {
    Offsets::new(arrival, seed, ramp_up).take(n).collect()
}

async fn open_loop(ctx: Arc<Ctx>, range: std::ops::Range<usize>) {
    let mut offsets = Offsets::new(ctx.spec.arrival, ctx.spec.seed, ctx.opts.ramp_up);
    let sem = Arc::new(tokio::sync::Semaphore::new(ctx.spec.max_in_flight.max(1)));
    let pacer = Pacer::global();
    let t0 = Instant::now() + Duration::from_millis(20);
    let mut handles = Vec::new();
    for j in range {
        let offset = match ctx.opts.trace_time_scale {
            Some(scale) => ctx.offsets[j % ctx.sessions.len()].unwrap_or(0.0) * scale,
            None => offsets.next().unwrap_or(0.0),
        };
        let deadline = t0 + Duration::from_secs_f64(offset.max(0.0));
        if ctx.stopping() {
            break;
        }
        pacer.sleep_until(deadline).await;
        if ctx.stopping() {
            break;
        }
        let scheduled_ns = deadline.saturating_duration_since(ctx.epoch).as_nanos() as u64;
        let permit = sem.clone().acquire_owned().await.expect("semaphore open");
        let ctx = ctx.clone();
        handles.push(tokio::spawn(async move {
            let mut conn = ctx.pool.lock().expect("pool").pop();
            ctx.run_session(&mut conn, j, scheduled_ns).await;
            if let Some(c) = conn.filter(|c| c.is_usable()) {
                ctx.pool.lock().expect("pool").push(c);
            }
            drop(permit);
        }));
        // Completed tasks are dropped as we go so a long run holds only the in-flight ones.
        if handles.len() >= 4096 {
            let mut live = Vec::with_capacity(handles.len());
            for h in handles {
                if h.is_finished() {
                    let _ = h.await;
                } else {
                    live.push(h);
                }
            }
            handles = live;
        }
    }
    for h in handles {
        let _ = h.await;
    }
}

fn pin_to(cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::other(format!(
            "CPU {cpu} is beyond the affinity mask ({} CPUs)",
            libc::CPU_SETSIZE
        )));
    }
    // SAFETY: cpu_set_t is plain data; sched_setaffinity(0, …) affects only this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Runs warmup then measurement; returns one record per scheduled request, in order.
pub fn run(
    corpus: &Corpus,
    spec: &LoadSpec,
    epoch: Instant,
    progress: Option<Arc<dyn ProgressSink>>,
) -> Result<Vec<RequestRecord>, LoadError> {
    if corpus.entries.is_empty() {
        return Err(LoadError::Plan("corpus is empty".into()));
    }
    let plan = RequestPlan::from_corpus(corpus, spec.seed);
    let out = run_plan(&plan, spec, &EngineOptions::default(), epoch, progress)?;
    let total = spec.warmup + spec.measured;
    let mut slots: Vec<Option<RequestRecord>> = vec![None; total];
    for r in out.records {
        let k = r.index as usize;
        if k < total {
            slots[k] = Some(r);
        }
    }
    let n = plan.sessions.len();
    Ok(slots
        .into_iter()
        .enumerate()
        .map(|(k, r)| {
            r.unwrap_or_else(|| {
                let t = &plan.sessions[k % n].turns[0];
                let phase = if k < spec.warmup {
                    Phase::Warmup
                } else {
                    Phase::Measured
                };
                let mut rec = RequestRecord::scheduled(k as u64, &t.id, phase, t.endpoint, 0);
                if let Some(sig) = qual_exec::signals::interrupted() {
                    rec.outcome = Outcome::Failed {
                        reason: format!("not completed: interrupted by signal {sig}"),
                    };
                }
                rec
            })
        })
        .collect())
}

fn check_plan(plan: &RequestPlan, spec: &LoadSpec, opts: &EngineOptions) -> Result<(), LoadError> {
    if plan.sessions.is_empty() || plan.sessions.iter().any(|s| s.turns.is_empty()) {
        return Err(LoadError::Plan(
            "the plan is empty or has a session without turns".into(),
        ));
    }
    match spec.arrival {
        Arrival::ClosedLoop { concurrency: 0 } => {
            return Err(LoadError::Plan("concurrency must be at least 1".into()))
        }
        Arrival::Constant { rate_per_second }
        | Arrival::Poisson { rate_per_second }
        | Arrival::Gamma {
            rate_per_second, ..
        } if !(rate_per_second.is_finite() && rate_per_second > 0.0) => {
            return Err(LoadError::Plan("rate must be a finite number > 0".into()))
        }
        Arrival::Gamma { shape, .. } if !(shape.is_finite() && shape > 0.0) => {
            return Err(LoadError::Plan(
                "the gamma shape must be a finite number > 0".into(),
            ))
        }
        _ => {}
    }
    if let Some(scale) = opts.trace_time_scale {
        if !(scale.is_finite() && scale >= 0.0) {
            return Err(LoadError::Plan(
                "trace time scale must be a finite number >= 0".into(),
            ));
        }
        if spec.warmup > 0 {
            return Err(LoadError::Plan(
                "trace replay takes no warmup (the trace is replayed from its first line)".into(),
            ));
        }
        if plan.sessions.iter().any(|s| s.offset_s.is_none()) {
            return Err(LoadError::Plan(
                "trace replay needs an offset on every session".into(),
            ));
        }
    }
    Ok(())
}

/// The tokenizer's count of a record's received text (reasoning and content, each counted).
fn tokenizer_count(counter: &TokenCounter, rec: &RequestRecord) -> u64 {
    rec.output_text.as_ref().map_or(0, |t| {
        (counter.0)(&t.reasoning).saturating_add((counter.0)(&t.content))
    })
}

/// A tokenizer's counts of the texts seen so far: a text repeated across responses (the same
/// prompt decoded greedily, a corpus replayed) is tokenized once. Counting is a pure function
/// of the text, so the memo changes no count; it holds each distinct text once, as the
/// records already do.
pub struct TokenMemo<'a> {
    counter: &'a TokenCounter,
    counts: HashMap<String, u64>,
}

impl<'a> TokenMemo<'a> {
    /// An empty memo over `counter`.
    pub fn new(counter: &'a TokenCounter) -> Self {
        Self {
            counter,
            counts: HashMap::new(),
        }
    }

    /// The tokenizer's count of `text`.
    pub fn count(&mut self, text: &str) -> u64 {
        if text.is_empty() {
            return (self.counter.0)(text);
        }
        if let Some(&n) = self.counts.get(text) {
            return n;
        }
        let n = (self.counter.0)(text);
        self.counts.insert(text.to_owned(), n);
        n
    }
}

/// Holds a successful request's server claim to the tokenizer's count of the text it
/// received ([`crate::claims::claim_bound`]); a claim above it fails the request by name. Runs
/// after the load, so tokenizing costs the measurement nothing.
pub fn check_claims_with_tokenizer(memo: &mut TokenMemo<'_>, rec: &mut RequestRecord) {
    let (Some(c), Some(ct)) = (rec.output_tokens, rec.client_tokens) else {
        return;
    };
    if c.source != TokenSource::ServerUsage || !rec.outcome.is_success() {
        return;
    }
    let counted = rec.output_text.as_ref().map_or(0, |t| {
        memo.count(&t.reasoning)
            .saturating_add(memo.count(&t.content))
    });
    let bounded = crate::claims::claim_bound(
        ct.content_events,
        ct.content_bytes,
        Some(counted),
        ct.max_tokens,
    );
    rec.client_tokens = Some(bounded);
    if let Err(reason) = crate::claims::check_claim(c.value, &bounded) {
        rec.output_tokens = None;
        rec.outcome = Outcome::Failed { reason };
    }
}

fn build_ctx(
    plan: &RequestPlan,
    spec: &LoadSpec,
    opts: &EngineOptions,
    epoch: Instant,
    progress: Option<Arc<dyn ProgressSink>>,
) -> Ctx {
    let sessions: Vec<Vec<TurnData>> = plan
        .sessions
        .iter()
        .map(|s| {
            s.turns
                .iter()
                .map(|t| {
                    let mut body = t.body.clone();
                    body.insert("model".into(), spec.model.clone().into());
                    let mut first = body.clone();
                    set_stream(&mut first, opts.stream);
                    TurnData {
                        id: t.id.clone(),
                        endpoint: t.endpoint,
                        first: Bytes::from(
                            serde_json::to_vec(&serde_json::Value::Object(first))
                                .expect("body serializes"),
                        ),
                        body,
                        limits: client::StreamLimits::for_max_tokens(t.max_tokens),
                    }
                })
                .collect()
        })
        .collect();
    let mut turn_base = Vec::with_capacity(sessions.len());
    let mut acc = 0;
    for s in &sessions {
        turn_base.push(acc);
        acc += s.len();
    }
    let n = sessions.len();
    let total_turns: u64 = if opts.duration.is_some() {
        0
    } else {
        (0..spec.warmup + spec.measured)
            .map(|j| sessions[j % n].len() as u64)
            .sum()
    };
    Ctx {
        spec: spec.clone(),
        opts: opts.clone(),
        target: opts
            .target
            .clone()
            .unwrap_or_else(|| Target::plain(spec.addr)),
        epoch,
        offsets: plan.sessions.iter().map(|s| s.offset_s).collect(),
        sessions,
        turn_base,
        cycle_turns: acc,
        total_turns,
        results: Mutex::new(Vec::new()),
        done: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        tokens: AtomicU64::new(0),
        measured_done: AtomicU64::new(0),
        measured_failed: AtomicU64::new(0),
        measured_late: AtomicU64::new(0),
        started: Instant::now(),
        progress,
        pool: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
        stop_reason: Mutex::new(None),
        deadline: OnceLock::new(),
    }
}

/// Runs warmup then measurement of `plan` with the engine `opts`: `spec.warmup` then
/// `spec.measured` session draws (fewer when a duration or early-stop rule ends the run).
/// Records come back in sequence order, one per started request.
pub fn run_plan(
    plan: &RequestPlan,
    spec: &LoadSpec,
    opts: &EngineOptions,
    epoch: Instant,
    progress: Option<Arc<dyn ProgressSink>>,
) -> Result<RunOutcome, LoadError> {
    check_plan(plan, spec, opts)?;
    // Stamped reads from the first measured request on (a no-op once the kernel stamps).
    crate::rxclock::warm_kernel_timestamps(Duration::from_secs(1));
    let ctx = Arc::new(build_ctx(plan, spec, opts, epoch, progress));
    let worker = ctx.clone();
    let handle = std::thread::Builder::new()
        .name("qual-serve-load".into())
        .spawn(move || -> std::io::Result<()> {
            if let Some(cpu) = worker.spec.pin_cpu {
                pin_to(cpu)?;
            }
            if worker.spec.realtime_reader {
                realtime_thread()?;
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let work = async {
                    let warm_c = match worker.spec.arrival {
                        Arrival::ClosedLoop { concurrency } => concurrency,
                        _ => 1,
                    };
                    let w = worker.spec.warmup;
                    if w > 0 {
                        closed_loop(worker.clone(), 0..w, warm_c, Duration::ZERO).await;
                    }
                    if let Some(d) = worker.opts.duration {
                        let _ = worker.deadline.set(Instant::now() + d);
                    }
                    let range = w..w.saturating_add(worker.spec.measured);
                    match (worker.spec.arrival, worker.opts.trace_time_scale) {
                        (_, Some(_)) => open_loop(worker.clone(), range).await,
                        (Arrival::ClosedLoop { concurrency }, None) => {
                            closed_loop(worker.clone(), range, concurrency, worker.opts.ramp_up)
                                .await
                        }
                        _ => open_loop(worker.clone(), range).await,
                    }
                };
                // SIGINT/SIGTERM (when the caller installed qual-exec's forwarding) stops the
                // load at once; dropping the runtime cancels every request still in flight.
                let watch = async {
                    while qual_exec::signals::interrupted().is_none() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                };
                tokio::select! {
                    _ = work => {}
                    _ = watch => {}
                }
            });
            Ok(())
        })
        .map_err(LoadError::Start)?;
    handle
        .join()
        .map_err(|_| LoadError::Start(std::io::Error::other("load generator thread panicked")))?
        .map_err(LoadError::Start)?;
    let mut records: Vec<(usize, RequestRecord)> =
        std::mem::take(&mut *ctx.results.lock().expect("results"));
    records.sort_by_key(|(k, _)| *k);
    if let Some(counter) = &ctx.opts.token_counter {
        let mut memo = TokenMemo::new(counter);
        for (_, r) in &mut records {
            check_claims_with_tokenizer(&mut memo, r);
        }
    }
    let stop = match qual_exec::signals::interrupted() {
        Some(signal) => StopReason::Interrupted { signal },
        None => ctx
            .stop_reason
            .lock()
            .expect("stop reason")
            .clone()
            .unwrap_or(StopReason::Completed),
    };
    Ok(RunOutcome {
        records: records.into_iter().map(|(_, r)| r).collect(),
        stop,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_memo_counts_each_distinct_text_once_and_changes_no_count() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let counter = TokenCounter(Arc::new(move |s: &str| {
            seen.fetch_add(1, Ordering::Relaxed);
            s.split_whitespace().count() as u64
        }));
        let mut memo = TokenMemo::new(&counter);
        let texts = ["a b c", "a b", "a b c", "", "a b", "x"];
        let counts: Vec<u64> = texts.iter().map(|t| memo.count(t)).collect();
        assert_eq!(counts, [3, 2, 3, 0, 2, 1]);
        // "a b c", "a b", "x" once each; the empty text is always asked (it caches nothing).
        assert_eq!(calls.load(Ordering::Relaxed), 4);
    }

    /// Drops `CAP_SYS_NICE` from the calling thread's effective set (capabilities are per
    /// thread), so the scheduler judges it by `RLIMIT_RTPRIO` alone.
    fn drop_sys_nice_in_this_thread() {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut h = Header {
            version: 0x2008_0522,
            pid: 0,
        };
        let mut d = [Data::default(); 2];
        // SAFETY: capget/capset with a version-3 header and two data words, as documented.
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
            d[0].effective &= !(1 << 23); // CAP_SYS_NICE
            assert_eq!(libc::syscall(libc::SYS_capset, &h, d.as_ptr()), 0);
        }
    }

    /// `--realtime-reader` where the scheduler refuses it is an error naming the flag and
    /// what it needs — never a silent fall-back to the default scheduler; where it is
    /// allowed the thread really runs under SCHED_FIFO.
    #[test]
    fn a_realtime_reader_is_refused_by_name_where_the_scheduler_denies_it() {
        std::thread::spawn(|| {
            let mut old = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: plain getrlimit/setrlimit on a local struct; RLIMIT_RTPRIO only
            // matters to realtime scheduling requests, which no other test makes.
            unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut old) };
            let zero = libc::rlimit {
                rlim_cur: 0,
                rlim_max: old.rlim_max,
            };
            // SAFETY: as above.
            unsafe { libc::setrlimit(libc::RLIMIT_RTPRIO, &zero) };
            drop_sys_nice_in_this_thread();
            let e = realtime_thread().unwrap_err();
            // SAFETY: as above.
            unsafe { libc::setrlimit(libc::RLIMIT_RTPRIO, &old) };
            let msg = e.to_string();
            assert!(
                msg.contains("SCHED_FIFO") && msg.contains("--realtime-reader"),
                "{msg}"
            );
            // SAFETY: sched_getscheduler(0) reads this thread's policy.
            assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
        std::thread::spawn(|| {
            if realtime_thread().is_ok() {
                // SAFETY: as above.
                assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_FIFO);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn ramp_up_warps_offsets_to_a_linear_rate() {
        // Rate 10/s, ramp 2 s: arrivals by t are 10 t² / 4 before 2 s, then 10 (t − 1).
        let a = Arrival::Constant {
            rate_per_second: 10.0,
        };
        let o = ramped_offsets(a, 41, 0, Duration::from_secs(2));
        // Request i (i < 10) is sent when 10 t²/4 = i: t = sqrt(0.4 i).
        assert!((o[5] - 2f64.sqrt()).abs() < 1e-12);
        // Request 20 (after the ramp) at 20/10 + 1 = 3 s.
        assert!((o[20] - 3.0).abs() < 1e-12);
        assert!(o.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(
            ramped_offsets(a, 5, 0, Duration::ZERO),
            open_loop_offsets(a, 5, 0)
        );
    }

    #[test]
    fn later_turns_carry_the_history() {
        let chat = TurnData {
            id: "t".into(),
            endpoint: Endpoint::Chat,
            body: serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "b"}]})
                .as_object()
                .unwrap()
                .clone(),
            first: Bytes::new(),
            limits: client::StreamLimits::for_max_tokens(4),
        };
        let mut h = History::default();
        h.push(&chat, "reply");
        let v: serde_json::Value = serde_json::from_slice(&with_history(&chat, &h, false)).unwrap();
        assert_eq!(v["messages"].as_array().unwrap().len(), 3);
        assert_eq!(
            v["messages"][1],
            serde_json::json!({"role": "assistant", "content": "reply"})
        );
        assert_eq!(v["stream"], false);
        assert!(v.get("stream_options").is_none());
        let comp = TurnData {
            endpoint: Endpoint::Completions,
            body: serde_json::json!({"prompt": " next"})
                .as_object()
                .unwrap()
                .clone(),
            ..chat
        };
        let mut h = History::default();
        h.push(&comp, " out");
        let v: serde_json::Value = serde_json::from_slice(&with_history(&comp, &h, true)).unwrap();
        assert_eq!(v["prompt"], " next out next");
        assert_eq!(v["stream_options"]["include_usage"], true);
    }

    #[test]
    fn open_loop_offsets_follow_the_rate() {
        let c = open_loop_offsets(
            Arrival::Constant {
                rate_per_second: 4.0,
            },
            5,
            1,
        );
        assert_eq!(c, vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        let p = open_loop_offsets(
            Arrival::Poisson {
                rate_per_second: 100.0,
            },
            20001,
            9,
        );
        assert_eq!(
            p,
            open_loop_offsets(
                Arrival::Poisson {
                    rate_per_second: 100.0
                },
                20001,
                9
            )
        );
        assert!(p.windows(2).all(|w| w[1] >= w[0]));
        // Mean gap 1/100 s; with 20000 gaps the sample mean is within 3% (sd of mean 0.7%).
        let mean_gap = p[20000] / 20000.0;
        assert!((mean_gap - 0.01).abs() < 0.0003, "mean gap {mean_gap}");
    }

    #[test]
    fn gamma_gaps_keep_the_rate_and_set_the_burstiness() {
        for shape in [0.25, 1.0, 4.0] {
            let a = Arrival::Gamma {
                rate_per_second: 100.0,
                shape,
            };
            let g = open_loop_offsets(a, 40001, 3);
            assert_eq!(g, open_loop_offsets(a, 40001, 3));
            let gaps: Vec<f64> = g.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(gaps.iter().all(|&x| x >= 0.0));
            let n = gaps.len() as f64;
            let mean = gaps.iter().sum::<f64>() / n;
            let var = gaps.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            // Mean 1/rate (sd of the mean cv/√n: under 1.5% here); cv 1/√shape.
            assert!(
                (mean - 0.01).abs() < 0.0005,
                "shape {shape}: mean gap {mean}"
            );
            let cv = var.sqrt() / mean;
            let want = 1.0 / shape.sqrt();
            assert!(
                (cv - want).abs() < 0.06 * want,
                "shape {shape}: cv {cv}, want {want}"
            );
        }
    }
}
