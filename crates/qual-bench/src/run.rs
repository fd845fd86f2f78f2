//! One `bench` invocation: load points (one, a sweep, or an SLA search), repeats, and the
//! result document.
//!
//! Owns the order (for each point: `repeats` runs of the engine, each a fresh warmup and
//! measurement; metrics per run; the mean and 95 % t-interval of each headline metric over
//! repeats), the SLA search (bisection for the highest concurrency or rate whose every
//! repeat is valid, not stopped early, and meets the declared SLOs for at least the declared
//! fraction of measured requests; stated resolution; the knee is the highest passing
//! point), and the result document `kiln-qual.bench-result.v1`.
//!
//! Non-streamed requests: only E2E and throughput are defined; TTFT, ITL and TPOT are
//! reported as absent with that reason. Invariant: a run the validity gate refuses stays in
//! the result, marked `valid: false` with the gate's reasons; it never counts as passing a
//! search.

use crate::failures::{self, FailureGroup};
use crate::plot::Plot;
use crate::stats::{self, Interval, Summary};
use crate::telemetry::{Memory, ServerMetrics, Telemetry};
use crate::workload::Workload;
use qual_serve::client::{StreamRules, Target};
use qual_serve::load::{self, Arrival, EngineOptions, LoadSpec, ProgressSink, StopReason};
use qual_serve::metrics::{self, BoundedSample, ServingMetrics, Slo, ValidityLimits};
use qual_serve::record::RequestRecord;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One load level.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Point {
    /// Closed loop.
    Concurrency {
        /// Outstanding requests.
        concurrency: usize,
    },
    /// Open loop.
    Rate {
        /// Requests (sessions) per second.
        rate_per_second: f64,
        /// Poisson gaps instead of constant.
        poisson: bool,
        /// Gamma gaps of this shape instead (absent otherwise).
        #[serde(skip_serializing_if = "Option::is_none")]
        gamma_shape: Option<f64>,
    },
    /// Trace replay.
    Trace {
        /// Multiplies the trace's offsets (0.5 = twice as fast).
        time_scale: f64,
    },
}

impl Point {
    fn arrival(self) -> Arrival {
        match self {
            Point::Concurrency { concurrency } => Arrival::ClosedLoop { concurrency },
            Point::Rate {
                rate_per_second,
                gamma_shape: Some(shape),
                ..
            } => Arrival::Gamma {
                rate_per_second,
                shape,
            },
            Point::Rate {
                rate_per_second,
                poisson: false,
                ..
            } => Arrival::Constant { rate_per_second },
            Point::Rate {
                rate_per_second, ..
            } => Arrival::Poisson { rate_per_second },
            Point::Trace { .. } => Arrival::Constant {
                rate_per_second: 1.0,
            },
        }
    }

    /// A short label (`c=16`, `rate=5`, `trace×1`).
    pub fn label(self) -> String {
        match self {
            Point::Concurrency { concurrency } => format!("c={concurrency}"),
            Point::Rate {
                rate_per_second, ..
            } => format!("rate={rate_per_second}"),
            Point::Trace { time_scale } => format!("trace*{time_scale}"),
        }
    }

    fn with_level(self, x: f64) -> Point {
        match self {
            Point::Concurrency { .. } => Point::Concurrency {
                concurrency: x.round().max(1.0) as usize,
            },
            Point::Rate {
                poisson,
                gamma_shape,
                ..
            } => Point::Rate {
                rate_per_second: x,
                poisson,
                gamma_shape,
            },
            t => t,
        }
    }
}

/// An SLA search.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Search {
    /// Lowest level tried.
    pub low: f64,
    /// Highest level tried.
    pub high: f64,
    /// Stop when the bracket is this narrow (concurrency: at least 1).
    pub resolution: f64,
    /// Fraction of measured requests that must meet every SLO.
    pub min_attainment: f64,
}

/// Everything a bench invocation needs.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Resolved server address.
    pub addr: SocketAddr,
    /// The URL as given (without credentials).
    pub url: String,
    /// Host header, prefix, credential.
    pub target: Target,
    /// Model id.
    pub model: String,
    /// Load points (a sweep when several); with `search`, its template (mode).
    pub points: Vec<Point>,
    /// SLA search instead of the points.
    pub search: Option<Search>,
    /// Warmup sessions per run.
    pub warmup: usize,
    /// Measured sessions per run (a cap when `duration` is set).
    pub measured: usize,
    /// Seed (arrivals).
    pub seed: u64,
    /// Open-loop bound on outstanding sessions.
    pub max_in_flight: usize,
    /// Per-request deadline.
    pub request_timeout: Duration,
    /// Stream acceptance.
    pub rules: StreamRules,
    /// Generator CPU.
    pub pin_cpu: Option<usize>,
    /// Run the load generator under `SCHED_FIFO` (`qual_serve::load::LoadSpec::realtime_reader`).
    pub realtime_reader: bool,
    /// Engine options (stream, ramp-up, duration, early stop, counter); `target` and
    /// `trace_time_scale` are set per point.
    pub engine: EngineOptions,
    /// SLOs.
    pub slo: Slo,
    /// Validity gate.
    pub validity: ValidityLimits,
    /// Percentiles (fractions).
    pub percentiles: Vec<f64>,
    /// Runs per point.
    pub repeats: usize,
    /// The largest fraction of a run's measured requests that may fail before the verdict
    /// is `server_failed` (0: any failed request fails it).
    pub max_failure_rate: f64,
}

/// Per-turn statistics of a multi-turn run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TurnStats {
    /// Turn index.
    pub turn: usize,
    /// Successful requests.
    pub succeeded: usize,
    /// Failed requests.
    pub failed: usize,
    /// TTFT (ms).
    pub ttft_ms: Summary,
    /// E2E (ms).
    pub e2e_ms: Summary,
}

/// One engine run.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// Repeat index.
    pub repeat: usize,
    /// Why it stopped.
    pub stop: StopReason,
    /// `false` when the validity gate refused the timing.
    pub valid: bool,
    /// The gate's reasons.
    pub invalid_reasons: Vec<String>,
    /// Headline numbers (null when undefined; see `undefined`).
    pub headline: BTreeMap<String, Option<f64>>,
    /// Why a headline metric is null.
    pub undefined: BTreeMap<String, String>,
    /// Distributions at the requested percentiles.
    pub distributions: BTreeMap<String, Summary>,
    /// Per-turn statistics (multi-turn workloads).
    pub turns: Vec<TurnStats>,
    /// The failed measured requests grouped by kind, most frequent first (empty when none
    /// failed).
    pub failures: Vec<FailureGroup>,
    /// Per-second series.
    pub time_series: Vec<stats::Second>,
    /// Server-reported prompt tokens − the planned prompt tokens, over successful
    /// single-turn requests with usage (null without either).
    pub prompt_token_mismatches: Option<usize>,
    /// The full serving metrics (definitions in `qual-serve`), validity included.
    pub metrics: ServingMetrics,
    /// The server's Prometheus counters over the run (`--metrics-path`; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<ServerMetrics>,
    /// The memory sampled during the run (`--memory-source`; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// What a report draws: each distribution's quantiles at every percent and a bounded
    /// request timeline (`crate::plot`).
    pub plot: Plot,
    /// Per-request records (written to the records file, not the result).
    #[serde(skip)]
    pub records: Vec<RequestRecord>,
}

/// One load point over its repeats.
#[derive(Clone, Debug, Serialize)]
pub struct PointResult {
    /// The load point.
    pub point: Point,
    /// `c=16`…
    pub label: String,
    /// Each run.
    pub runs: Vec<RunResult>,
    /// Mean and 95 % t-interval of each headline metric over the runs that have it.
    pub intervals: BTreeMap<String, Interval>,
    /// Every run valid, none stopped early, and (with SLOs) attainment ≥ the search's bar.
    pub passes: bool,
}

/// The headline metrics, in output order.
pub const HEADLINE: [&str; 12] = [
    "requests_per_second",
    "output_tokens_per_second",
    "goodput_requests_per_second",
    "slo_attainment",
    "ttft_ms.p50",
    "ttft_ms.p99",
    "itl_ms.p50",
    "itl_ms.p99",
    "e2e_ms.p50",
    "e2e_ms.p99",
    "tpot_ms.p50",
    "error_rate",
];

fn run_once(
    (cfg, wl, telemetry): (&BenchConfig, &Workload, &Telemetry),
    point: Point,
    repeat: usize,
    progress: Option<Arc<dyn ProgressSink>>,
) -> Result<RunResult, String> {
    let spec = LoadSpec {
        addr: cfg.addr,
        model: cfg.model.clone(),
        arrival: point.arrival(),
        // A trace is replayed as recorded, from its first line: no warmup draws.
        warmup: match point {
            Point::Trace { .. } => 0,
            _ => cfg.warmup,
        },
        measured: match point {
            Point::Trace { .. } => cfg.measured.min(wl.plan.sessions.len()),
            _ => cfg.measured,
        },
        seed: cfg.seed.wrapping_add(repeat as u64),
        max_in_flight: cfg.max_in_flight,
        request_timeout: cfg.request_timeout,
        rules: cfg.rules,
        pin_cpu: cfg.pin_cpu,
        realtime_reader: cfg.realtime_reader,
    };
    let mut opts = cfg.engine.clone();
    opts.target = Some(cfg.target.clone());
    opts.trace_time_scale = match point {
        Point::Trace { time_scale } => Some(time_scale),
        _ => None,
    };
    let before = telemetry.begin();
    let out = load::run_plan(&wl.plan, &spec, &opts, Instant::now(), progress)
        .map_err(|e| format!("failed to {e}"))?;
    let (server_metrics, memory) = telemetry.end(before, &out.records);
    let closed = matches!(spec.arrival, Arrival::ClosedLoop { .. });
    let mut run = summarize(cfg, wl, repeat, closed, out.stop, out.records);
    run.server_metrics = server_metrics;
    run.memory = memory;
    Ok(run)
}

/// What a non-streamed run's validity gate holds to the tolerance: E2E and throughput
/// only (`None`: a streamed run gates the default set).
fn gated_for_unary(cfg: &BenchConfig) -> Option<Vec<String>> {
    (!cfg.engine.stream).then(|| {
        let mut g = vec![
            "e2e_ms.p50".to_string(),
            "output_tokens_per_second".to_string(),
            "requests_per_second".to_string(),
        ];
        if cfg.slo.is_declared() {
            g.push("slo_attainment".into());
        }
        g
    })
}

/// The latency distributions of the successful requests (one definition of every sample:
/// qual-serve's metrics, with its arrival bound), why the undefined ones are, and the plot
/// data of the run's `records` from the same samples.
fn distributions_of(
    cfg: &BenchConfig,
    ok: &[&RequestRecord],
    records: &[RequestRecord],
) -> (BTreeMap<String, Summary>, BTreeMap<String, String>, Plot) {
    let ps = &cfg.percentiles;
    let per_request: Vec<(&RequestRecord, metrics::RequestSamples)> = ok
        .iter()
        .filter_map(|r| {
            let send = r.send_ns?;
            (!r.content_event_ns.is_empty()).then(|| (*r, metrics::request_samples(r, send)))
        })
        .collect();
    let pick = |f: fn(&metrics::RequestSamples) -> BoundedSample| -> Vec<BoundedSample> {
        per_request.iter().map(|(_, s)| f(s)).collect()
    };
    let mut distributions = BTreeMap::new();
    distributions.insert("e2e_ms".to_string(), Summary::bounded(&pick(|s| s.e2e), ps));
    let stream = cfg.engine.stream;
    let mut undefined = BTreeMap::new();
    if stream {
        distributions.insert(
            "ttft_ms".to_string(),
            Summary::bounded(&pick(|s| s.ttft), ps),
        );
        let itl: Vec<BoundedSample> = per_request
            .iter()
            .flat_map(|(_, s)| s.itl.iter().copied())
            .collect();
        let mut gaps = metrics::GapIntervals::default();
        for (r, _) in &per_request {
            gaps.push(metrics::event_intervals_ns(r));
        }
        let mut itl = Summary::bounded(&itl, ps);
        itl.tighten_gaps(&gaps, ps);
        distributions.insert("itl_ms".to_string(), itl);
        let tpot: Vec<BoundedSample> = per_request
            .iter()
            .filter_map(|(r, _)| {
                let n = r.output_tokens?.value;
                (n >= 2).then(|| metrics::tpot_sample(r, n))
            })
            .collect();
        distributions.insert("tpot_ms".to_string(), Summary::bounded(&tpot, ps));
    } else {
        for k in ["ttft_ms", "itl_ms", "tpot_ms"] {
            undefined.insert(
                k.to_string(),
                "not defined for non-streamed requests (only e2e and throughput are)".to_string(),
            );
        }
    }
    let samples: Vec<&metrics::RequestSamples> = per_request.iter().map(|(_, s)| s).collect();
    let plot = Plot::of(&samples, stream, records);
    (distributions, undefined, plot)
}

/// The headline values, each null one explained in `undefined`.
fn headline_of(
    cfg: &BenchConfig,
    m: &ServingMetrics,
    distributions: &BTreeMap<String, Summary>,
    undefined: &mut BTreeMap<String, String>,
) -> BTreeMap<String, Option<f64>> {
    let ps = &cfg.percentiles;
    let mut headline = BTreeMap::new();
    headline.insert("requests_per_second".into(), m.requests_per_second);
    headline.insert(
        "output_tokens_per_second".into(),
        m.output_tokens_per_second,
    );
    headline.insert(
        "goodput_requests_per_second".into(),
        m.goodput_requests_per_second,
    );
    headline.insert("slo_attainment".into(), m.slo_attainment);
    headline.insert(
        "error_rate".into(),
        (m.measured_requests > 0).then(|| m.failed_requests as f64 / m.measured_requests as f64),
    );
    for key in &HEADLINE[4..11] {
        let (dist, pl) = key.split_once('.').expect("dist.pct");
        let v = distributions.get(dist).and_then(|d| d.get(pl));
        if v.is_none() && !undefined.contains_key(*key) {
            if let Some(why) = undefined.get(dist).cloned() {
                undefined.insert(key.to_string(), why);
            } else if !ps.iter().any(|&p| stats::label(p) == pl) {
                undefined.insert(key.to_string(), format!("{pl} was not requested"));
            } else {
                undefined.insert(key.to_string(), "no samples".into());
            }
        }
        headline.insert(key.to_string(), v);
    }
    if !cfg.slo.is_declared() {
        for k in ["goodput_requests_per_second", "slo_attainment"] {
            undefined.insert(k.into(), "no slo declared".into());
        }
    }
    headline
}

/// Per-turn counts and latencies (multi-turn workloads only: empty for one turn).
fn turns_of(wl: &Workload, measured: &[&RequestRecord], ps: &[f64]) -> Vec<TurnStats> {
    let turn_of = |r: &RequestRecord| wl.info.get(&r.corpus_id).map_or(0, |i| i.turn);
    // One turn: nothing to split (and no request's samples to compute again).
    if measured.iter().all(|r| turn_of(r) == 0) {
        return Vec::new();
    }
    let mut by_turn: BTreeMap<usize, (usize, usize, Vec<BoundedSample>, Vec<BoundedSample>)> =
        BTreeMap::new();
    for r in measured {
        let e = by_turn.entry(turn_of(r)).or_default();
        if r.outcome.is_success() {
            e.0 += 1;
            if let (Some(send), false) = (r.send_ns, r.content_event_ns.is_empty()) {
                let s = metrics::request_samples(r, send);
                e.2.push(s.ttft);
                e.3.push(s.e2e);
            }
        } else {
            e.1 += 1;
        }
    }
    if by_turn.len() > 1 {
        by_turn
            .into_iter()
            .map(|(turn, (s, f, t, e))| TurnStats {
                turn,
                succeeded: s,
                failed: f,
                ttft_ms: Summary::bounded(&t, ps),
                e2e_ms: Summary::bounded(&e, ps),
            })
            .collect()
    } else {
        Vec::new()
    }
}

/// How many first-turn successes reported a prompt-token count other than the workload's
/// (`None` when none could be checked).
fn prompt_token_mismatches(wl: &Workload, ok: &[&RequestRecord]) -> Option<usize> {
    let checked: Vec<(u64, u64)> = ok
        .iter()
        .filter_map(|r| {
            let info = wl.info.get(&r.corpus_id)?;
            (info.turn == 0).then_some(())?;
            Some((r.usage?.prompt_tokens, info.input_tokens?))
        })
        .collect();
    (!checked.is_empty()).then(|| checked.iter().filter(|(a, b)| a != b).count())
}

fn summarize(
    cfg: &BenchConfig,
    wl: &Workload,
    repeat: usize,
    closed_loop: bool,
    stop: StopReason,
    records: Vec<RequestRecord>,
) -> RunResult {
    // A closed loop has no schedule to keep: its send lag is recorded, not gated.
    let mut limits = cfg.validity;
    limits.gate_late_sends &= !closed_loop;
    // Non-streamed requests define only E2E and throughput: those are what is gated.
    let unary = gated_for_unary(cfg);
    let m = metrics::compute_gated(&records, cfg.slo, limits, unary.as_deref());
    let ps = &cfg.percentiles;
    let (measured, ok) = metrics::measured_and_succeeded(&records);
    let (distributions, mut undefined, plot) = distributions_of(cfg, &ok, &records);
    let headline = headline_of(cfg, &m, &distributions, &mut undefined);
    let turns = turns_of(wl, &measured, ps);
    let prompt_token_mismatches = prompt_token_mismatches(wl, &ok);
    RunResult {
        repeat,
        stop,
        valid: m.validity.violations.is_empty(),
        invalid_reasons: m.validity.violations.clone(),
        headline,
        undefined,
        distributions,
        turns,
        failures: failures::group(&records),
        time_series: stats::time_series(&records),
        prompt_token_mismatches,
        metrics: m,
        server_metrics: None,
        memory: None,
        plot,
        records,
    }
}

fn run_point(
    ctx: (&BenchConfig, &Workload, &Telemetry),
    point: Point,
    progress: &Option<Arc<dyn ProgressSink>>,
) -> Result<PointResult, String> {
    let cfg = ctx.0;
    let mut runs = Vec::new();
    for rep in 0..cfg.repeats.max(1) {
        runs.push(run_once(ctx, point, rep, progress.clone())?);
        if qual_exec::signals::interrupted().is_some() {
            break;
        }
    }
    let mut intervals = BTreeMap::new();
    for key in HEADLINE {
        let xs: Vec<f64> = runs.iter().filter_map(|r| r.headline[key]).collect();
        if let Some(i) = stats::t_interval(&xs) {
            intervals.insert(key.to_string(), i);
        }
    }
    let bar = cfg.search.map_or(0.0, |s| s.min_attainment);
    let passes = runs.iter().all(|r| {
        r.valid
            && !matches!(r.stop, StopReason::EarlyStop { .. })
            && r.metrics.succeeded_requests > 0
            && (!cfg.slo.is_declared() || r.metrics.slo_attainment.unwrap_or(0.0) >= bar)
    });
    Ok(PointResult {
        point,
        label: point.label(),
        runs,
        intervals,
        passes,
    })
}

/// What the search found.
#[derive(Clone, Debug, Serialize)]
pub struct SearchResult {
    /// The search settings.
    pub search: Search,
    /// The highest passing level (null when even the lowest failed).
    pub knee: Option<f64>,
    /// The lowest failing level above the knee (null when the highest passed).
    pub first_failing: Option<f64>,
    /// Why the search ended.
    pub conclusion: String,
}

/// The schema of the result document.
pub const RESULT_SCHEMA: &str = "kiln-qual.bench-result.v1";

/// The result document.
#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    /// `kiln-qual.bench-result.v1`.
    pub schema: &'static str,
    /// Tool and version.
    pub tool: String,
    /// Settings (the credential's presence, never its value).
    pub config: serde_json::Value,
    /// The workload: how it was generated and the digest of the request set.
    pub workload: serde_json::Value,
    /// Every point, in the order run.
    pub points: Vec<PointResult>,
    /// The SLA search, when asked.
    pub search: Option<SearchResult>,
    /// What the runs add up to (the exit code follows it).
    pub verdict: Verdict,
    /// Metric definitions.
    pub definitions: serde_json::Value,
}

/// The outcome of the whole invocation, judged over every run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Verdict {
    /// Some run is valid, some measured request succeeded, and no run failed more of its
    /// measured requests than allowed.
    Passed,
    /// The server failed: in some run more than `max_failure_rate` of the measured requests
    /// failed, none succeeded in any run, or the server's counters (`--metrics-path`)
    /// account for fewer requests or tokens than the client saw.
    ServerFailed {
        /// Which runs, and by how much (reads after "failed: ").
        reasons: Vec<String>,
    },
    /// The measurement was refused: every run by the validity gate, or nothing was measured.
    MeasurementRefused {
        /// Why (reads after "failed: ").
        reason: String,
    },
}

/// Judges the runs: failed requests first (a finding about the server), then the
/// measurement's validity.
pub fn verdict(points: &[PointResult], max_failure_rate: f64) -> Verdict {
    let runs: Vec<(&str, &RunResult)> = points
        .iter()
        .flat_map(|p| p.runs.iter().map(move |r| (p.label.as_str(), r)))
        .collect();
    let mut reasons = Vec::new();
    for (label, r) in &runs {
        let (failed, measured) = (r.metrics.failed_requests, r.metrics.measured_requests);
        if measured > 0 && failed as f64 > max_failure_rate * measured as f64 {
            let kinds: Vec<String> = r
                .failures
                .iter()
                .map(|g| format!("{} {}", g.count, g.kind))
                .collect();
            reasons.push(format!(
                "{label} run {}: {failed} of {measured} measured requests failed ({}), more than the allowed failure rate {max_failure_rate}",
                r.repeat,
                kinds.join(", ")
            ));
        }
    }
    for (label, r) in &runs {
        if let Some(ServerMetrics::Scraped {
            path,
            accounting: Some(a),
            ..
        }) = &r.server_metrics
        {
            if !a.passed {
                reasons.push(format!(
                    "{label} run {}: the server's {path} accounts for less than the client saw: {}",
                    r.repeat, a.detail
                ));
            }
        }
    }
    let measured: usize = runs.iter().map(|(_, r)| r.metrics.measured_requests).sum();
    let succeeded: usize = runs.iter().map(|(_, r)| r.metrics.succeeded_requests).sum();
    if reasons.is_empty() && measured > 0 && succeeded == 0 {
        reasons.push("no measured request succeeded".into());
    }
    if !reasons.is_empty() {
        Verdict::ServerFailed { reasons }
    } else if measured == 0 {
        Verdict::MeasurementRefused {
            reason: "no request was measured".into(),
        }
    } else if runs.iter().all(|(_, r)| !r.valid) {
        Verdict::MeasurementRefused {
            reason: "every run was refused by the measurement-validity gate".into(),
        }
    } else {
        Verdict::Passed
    }
}

/// Runs the whole invocation, taking `telemetry` around each run.
pub fn bench(
    cfg: &BenchConfig,
    wl: &Workload,
    telemetry: &Telemetry,
    progress: Option<Arc<dyn ProgressSink>>,
) -> Result<BenchResult, String> {
    let ctx = (cfg, wl, telemetry);
    let mut points = Vec::new();
    let mut search_result = None;
    if let Some(s) = cfg.search {
        let template = *cfg.points.first().ok_or("a search needs a load mode")?;
        let res = match template {
            Point::Concurrency { .. } => s.resolution.max(1.0),
            _ => s.resolution,
        };
        let probe = |x: f64, points: &mut Vec<PointResult>| -> Result<bool, String> {
            let p = run_point(ctx, template.with_level(x), &progress)?;
            let pass = p.passes;
            points.push(p);
            Ok(pass)
        };
        let (mut lo, mut hi) = (s.low, s.high);
        let conclusion;
        let (knee, first_failing) = if probe(hi, &mut points)? {
            conclusion = "the highest level searched meets the slo".to_string();
            (Some(hi), None)
        } else if !probe(lo, &mut points)? {
            conclusion = "even the lowest level searched misses the slo".to_string();
            (None, Some(lo))
        } else {
            while hi - lo > res && qual_exec::signals::interrupted().is_none() {
                let mid = match template {
                    Point::Concurrency { .. } => ((lo + hi) / 2.0).floor(),
                    _ => (lo + hi) / 2.0,
                };
                if mid <= lo || mid >= hi {
                    break;
                }
                if probe(mid, &mut points)? {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            conclusion = format!(
                "bisection converged to a bracket of {} (resolution {res})",
                hi - lo
            );
            (Some(lo), Some(hi))
        };
        search_result = Some(SearchResult {
            search: s,
            knee,
            first_failing,
            conclusion,
        });
    } else {
        for &p in &cfg.points {
            points.push(run_point(ctx, p, &progress)?);
            if qual_exec::signals::interrupted().is_some() {
                break;
            }
        }
    }
    Ok(BenchResult {
        schema: RESULT_SCHEMA,
        tool: concat!("kiln-qual ", env!("CARGO_PKG_VERSION")).to_string(),
        config: config_json(cfg),
        workload: serde_json::json!({
            "description": wl.description,
            "sessions": wl.plan.sessions.len(),
            "turns": wl.plan.turn_count(),
            "request_set_sha256": wl.digest(),
        }),
        verdict: verdict(&points, cfg.max_failure_rate),
        points,
        search: search_result,
        definitions: definitions(),
    })
}

fn config_json(cfg: &BenchConfig) -> serde_json::Value {
    serde_json::json!({
        "url": cfg.url,
        "tls": cfg.target.is_tls(),
        "api_key": if cfg.target.has_authorization() { "present (not recorded)" } else { "absent" },
        "headers": cfg.target.header_names(),
        "model": cfg.model,
        "stream": cfg.engine.stream,
        "points": cfg.points,
        "warmup": cfg.warmup,
        "measured": cfg.measured,
        "seed": cfg.seed,
        "max_in_flight": cfg.max_in_flight,
        "request_timeout_seconds": cfg.request_timeout.as_secs_f64(),
        "ramp_up_seconds": cfg.engine.ramp_up.as_secs_f64(),
        "duration_seconds": cfg.engine.duration.map(|d| d.as_secs_f64()),
        "early_stop": cfg.engine.early_stop,
        "slo": cfg.slo,
        "validity_limits": cfg.validity,
        "percentiles": cfg.percentiles.iter().map(|&p| stats::label(p)).collect::<Vec<_>>(),
        "repeats": cfg.repeats,
        "max_failure_rate": cfg.max_failure_rate,
        "allow_missing_usage": cfg.rules.allow_missing_usage,
        "allow_missing_done": cfg.rules.allow_missing_done,
        "client_token_counter": cfg.engine.token_counter.is_some(),
    })
}

fn definitions() -> serde_json::Value {
    let mut d: serde_json::Map<String, serde_json::Value> = metrics::DEFINITIONS
        .iter()
        .map(|(k, v)| (k.to_string(), (*v).into()))
        .collect();
    d.insert(
        "percentile_method".into(),
        metrics::PERCENTILE_METHOD.into(),
    );
    d.insert("percentile_support".into(), "every requested percentile is reported with n and min_samples (p50 1, p90 64, p95 133, p99 662, p99.9 6620; other p > 0.5: ceil(6.62 / (1 - p))); below_minimum flags an unsupported estimate".into());
    d.insert("interval".into(), "mean over repeats with a two-sided 95% student t-interval: mean +- t(0.975, r-1) * s / sqrt(r)".into());
    d.insert("error_rate".into(), "failed / measured requests".into());
    d.insert("non_streamed".into(), "for non-streamed requests only e2e (send to the end of the response body) and throughput are defined".into());
    d.insert("sessions".into(), "warmup and measured count sessions (a multi-turn conversation is one session of several requests)".into());
    serde_json::Value::Object(d)
}

/// The CSV: one row per point and run, headline metrics then every requested percentile of
/// each distribution.
pub fn csv(r: &BenchResult, percentiles: &[f64]) -> String {
    let mut cols: Vec<String> = vec![
        "point".into(),
        "repeat".into(),
        "stop".into(),
        "valid".into(),
        "measured".into(),
        "succeeded".into(),
        "failed".into(),
    ];
    cols.extend(HEADLINE.iter().map(|s| s.to_string()));
    let dists = ["ttft_ms", "itl_ms", "e2e_ms", "tpot_ms"];
    for d in dists {
        for &p in percentiles {
            cols.push(format!("{d}.{}.value", stats::label(p)));
            cols.push(format!("{d}.{}.n", stats::label(p)));
        }
    }
    let mut out = cols.join(",");
    out.push('\n');
    let f = |v: Option<f64>| v.map_or_else(String::new, |x| format!("{x}"));
    for p in &r.points {
        for run in &p.runs {
            let stop = match &run.stop {
                StopReason::Completed => "completed",
                StopReason::DurationElapsed { .. } => "duration_elapsed",
                StopReason::EarlyStop { .. } => "early_stop",
                StopReason::Interrupted { .. } => "interrupted",
            };
            let mut row = vec![
                p.label.clone(),
                run.repeat.to_string(),
                stop.to_string(),
                run.valid.to_string(),
                run.metrics.measured_requests.to_string(),
                run.metrics.succeeded_requests.to_string(),
                run.metrics.failed_requests.to_string(),
            ];
            row.extend(HEADLINE.iter().map(|k| f(run.headline[*k])));
            for d in dists {
                for &pc in percentiles {
                    let s = run.distributions.get(d);
                    let pct =
                        s.and_then(|s| s.percentiles.iter().find(|x| x.label == stats::label(pc)));
                    row.push(f(pct.and_then(|x| x.value)));
                    row.push(pct.map_or_else(String::new, |x| x.n.to_string()));
                }
            }
            out.push_str(&row.join(","));
            out.push('\n');
        }
    }
    out
}

/// The per-request records as JSONL: `{"point", "repeat", "record"}` per line.
pub fn records_jsonl(r: &BenchResult) -> String {
    let mut out = String::new();
    for p in &r.points {
        for run in &p.runs {
            for rec in &run.records {
                let line =
                    serde_json::json!({"point": p.label, "repeat": run.repeat, "record": rec});
                out.push_str(&line.to_string());
                out.push('\n');
            }
        }
    }
    out
}

/// The first model id `GET /v1/models` serves on `target` (30 s bound).
pub fn discover_model(addr: SocketAddr, target: &Target) -> Result<String, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("start the probe runtime: {e}"))?;
    match rt.block_on(qual_serve::client::probe_models_at(
        addr,
        target,
        Duration::from_secs(30),
    )) {
        qual_serve::client::Probe::Ready { ids, .. } => Ok(ids[0].clone()),
        qual_serve::client::Probe::NotReady(why) => Err(why),
    }
}
