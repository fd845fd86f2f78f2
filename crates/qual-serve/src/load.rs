//! The load generator: closed loop at a concurrency, open loop at a rate.
//!
//! Owns scheduling and the per-request record lifecycle. The request sequence comes from
//! [`corpus::permutation`] (warmup first, then measured). Warmup
//! runs to completion before measurement starts, as a closed loop at the measured
//! concurrency (open loop: concurrency 1), and is recorded with phase `warmup`.
//!
//! Idle keep-alive connections live in one pool shared by warmup and measurement, so warmup
//! opens the connections the measured requests reuse.
//!
//! * Closed loop: `concurrency` workers, each with its own keep-alive connection; a worker
//!   takes the next request the moment its previous one ends, which is the request's
//!   scheduled time.
//! * Open loop: request `i` is scheduled at `t0 + offset_i` (constant: `i / rate`; Poisson:
//!   cumulative exponential gaps with mean `1 / rate`, drawn from SplitMix64 seeded with the
//!   declared seed XOR `0x6f70656e5f6c6f6f`) and sent at that instant by the sub-millisecond
//!   [`Pacer`] on an idle pooled connection or a new one. At most
//!   `max_in_flight` requests are outstanding; a request that has to wait for a slot is
//!   still sent (late), never dropped, and its lag is recorded.
//!
//! The whole generator runs on one thread with a single-threaded runtime (optionally pinned
//! to one CPU), so its capacity is a per-core number. Each request records that thread's
//! run-queue wait and involuntary context switches between its start and end
//! ([`crate::threadstat`]), for the measurement-validity gate. Invariant: every scheduled request
//! yields exactly one record, in sequence order.

use crate::client::{self, Connection, SendOutcome, StreamRules};
use crate::corpus::{self, Corpus, SplitMix64};
use crate::pacer::Pacer;
use crate::record::{Outcome, Phase, RequestRecord};
use crate::threadstat::ThreadSample;
use hyper::body::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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

struct Ctx {
    spec: LoadSpec,
    epoch: Instant,
    items: Vec<(usize, Phase)>,
    ids: Vec<String>,
    endpoints: Vec<crate::record::Endpoint>,
    bodies: Vec<Bytes>,
    limits: Vec<client::StreamLimits>,
    results: Mutex<Vec<Option<RequestRecord>>>,
    done: AtomicU64,
    failed: AtomicU64,
    tokens: AtomicU64,
    started: Instant,
    progress: Option<Arc<dyn ProgressSink>>,
    /// Idle keep-alive connections, shared by warmup and measurement (so warmup opens the
    /// connections the measurement uses).
    pool: Mutex<Vec<Connection>>,
}

impl Ctx {
    fn now_ns(&self) -> u64 {
        Instant::now()
            .saturating_duration_since(self.epoch)
            .as_nanos() as u64
    }

    fn record(&self, k: usize, rec: RequestRecord) {
        if let Outcome::Failed { .. } = rec.outcome {
            self.failed.fetch_add(1, Ordering::Relaxed);
        } else if let Some(t) = rec.output_tokens {
            self.tokens.fetch_add(t.value, Ordering::Relaxed);
        }
        self.results.lock().expect("results")[k] = Some(rec);
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(p) = &self.progress {
            p.update(Progress {
                done,
                total: self.items.len() as u64,
                failed: self.failed.load(Ordering::Relaxed),
                output_tokens: self.tokens.load(Ordering::Relaxed),
                elapsed: self.started.elapsed(),
            });
        }
    }

    async fn one(
        &self,
        conn: &mut Option<Connection>,
        k: usize,
        scheduled_ns: u64,
    ) -> RequestRecord {
        let (ci, phase) = self.items[k];
        let endpoint = self.endpoints[ci];
        let mut rec =
            RequestRecord::scheduled(k as u64, &self.ids[ci], phase, endpoint, scheduled_ns);
        let thread_before = ThreadSample::now();
        rec.started_ns = Some(self.now_ns());
        let timeout = self.spec.request_timeout;
        let fut = async {
            loop {
                let mut fresh = false;
                if conn.as_ref().is_none_or(|c| !c.is_usable()) {
                    match client::connect(self.spec.addr).await {
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
                let sent = client::stream_request(
                    c,
                    self.spec.addr,
                    client::StreamCall {
                        path: endpoint.path(),
                        body: self.bodies[ci].clone(),
                        limits: self.limits[ci],
                    },
                    self.epoch,
                    self.spec.rules,
                    &mut rec,
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
        rec
    }
}

async fn closed_loop(ctx: Arc<Ctx>, range: std::ops::Range<usize>, concurrency: usize) {
    let next = Arc::new(AtomicUsize::new(range.start));
    let mut handles = Vec::new();
    for _ in 0..concurrency.max(1) {
        let ctx = ctx.clone();
        let next = next.clone();
        let end = range.end;
        handles.push(tokio::spawn(async move {
            let mut conn: Option<Connection> = ctx.pool.lock().expect("pool").pop();
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= end {
                    break;
                }
                let scheduled = ctx.now_ns();
                let rec = ctx.one(&mut conn, k, scheduled).await;
                ctx.record(k, rec);
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

/// Open-loop send offsets from the start, in seconds.
pub fn open_loop_offsets(arrival: Arrival, n: usize, seed: u64) -> Vec<f64> {
    match arrival {
        Arrival::ClosedLoop { .. } => vec![0.0; n],
        Arrival::Constant { rate_per_second } => {
            (0..n).map(|i| i as f64 / rate_per_second).collect()
        }
        Arrival::Poisson { rate_per_second } => {
            let mut rng = SplitMix64::new(seed ^ 0x6f70_656e_5f6c_6f6f);
            let mut t = 0.0;
            (0..n)
                .map(|i| {
                    if i > 0 {
                        t += -rng.unit_open0().ln() / rate_per_second;
                    }
                    t
                })
                .collect()
        }
    }
}

async fn open_loop(ctx: Arc<Ctx>, range: std::ops::Range<usize>) {
    let offsets = open_loop_offsets(ctx.spec.arrival, range.len(), ctx.spec.seed);
    let sem = Arc::new(tokio::sync::Semaphore::new(ctx.spec.max_in_flight.max(1)));
    let pacer = Pacer::global();
    let t0 = Instant::now() + Duration::from_millis(20);
    let mut handles = Vec::new();
    for (i, k) in range.enumerate() {
        let deadline = t0 + Duration::from_secs_f64(offsets[i]);
        pacer.sleep_until(deadline).await;
        let scheduled_ns = deadline.saturating_duration_since(ctx.epoch).as_nanos() as u64;
        let permit = sem.clone().acquire_owned().await.expect("semaphore open");
        let ctx = ctx.clone();
        handles.push(tokio::spawn(async move {
            let mut conn = ctx.pool.lock().expect("pool").pop();
            let rec = ctx.one(&mut conn, k, scheduled_ns).await;
            if let Some(c) = conn.filter(|c| c.is_usable()) {
                ctx.pool.lock().expect("pool").push(c);
            }
            ctx.record(k, rec);
            drop(permit);
        }));
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
    match spec.arrival {
        Arrival::ClosedLoop { concurrency: 0 } => {
            return Err(LoadError::Plan("concurrency must be at least 1".into()))
        }
        Arrival::Constant { rate_per_second } | Arrival::Poisson { rate_per_second }
            if !(rate_per_second.is_finite() && rate_per_second > 0.0) =>
        {
            return Err(LoadError::Plan("rate must be a finite number > 0".into()))
        }
        _ => {}
    }
    let n = corpus.entries.len();
    let perm = corpus::permutation(n, spec.seed);
    let total = spec.warmup + spec.measured;
    let items: Vec<(usize, Phase)> = (0..total)
        .map(|k| {
            let phase = if k < spec.warmup {
                Phase::Warmup
            } else {
                Phase::Measured
            };
            (perm[k % n], phase)
        })
        .collect();
    let ctx = Arc::new(Ctx {
        spec: spec.clone(),
        epoch,
        items,
        ids: corpus.entries.iter().map(|e| e.id.clone()).collect(),
        endpoints: corpus.entries.iter().map(|e| e.endpoint).collect(),
        limits: corpus
            .entries
            .iter()
            .map(|e| client::StreamLimits::for_max_tokens(e.max_tokens))
            .collect(),
        bodies: corpus
            .entries
            .iter()
            .map(|e| Bytes::from(corpus::request_body(e, &spec.model)))
            .collect(),
        results: Mutex::new(vec![None; total]),
        done: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        tokens: AtomicU64::new(0),
        started: Instant::now(),
        progress,
        pool: Mutex::new(Vec::new()),
    });
    let worker = ctx.clone();
    let handle = std::thread::Builder::new()
        .name("qual-serve-load".into())
        .spawn(move || -> std::io::Result<()> {
            if let Some(cpu) = worker.spec.pin_cpu {
                pin_to(cpu)?;
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
                        closed_loop(worker.clone(), 0..w, warm_c).await;
                    }
                    let range = w..worker.items.len();
                    match worker.spec.arrival {
                        Arrival::ClosedLoop { concurrency } => {
                            closed_loop(worker.clone(), range, concurrency).await
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
    let results = std::mem::take(&mut *ctx.results.lock().expect("results"));
    Ok(results
        .into_iter()
        .enumerate()
        .map(|(k, r)| {
            r.unwrap_or_else(|| {
                let (ci, phase) = ctx.items[k];
                let mut rec =
                    RequestRecord::scheduled(k as u64, &ctx.ids[ci], phase, ctx.endpoints[ci], 0);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
