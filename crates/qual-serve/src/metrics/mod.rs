//! Serving metrics: one vocabulary, each metric with a written definition.
//!
//! Owns the computation from measured [`RequestRecord`]s to [`ServingMetrics`], the
//! percentile method and its sample minimums, the schedule-lag validity gate, and the
//! flattening into case-result metric rows. Definitions (also emitted verbatim in the
//! evidence, see [`DEFINITIONS`]):
//!
//! * TTFT = send → first content event (role-only and usage-only events are not content).
//! * E2E = send → last content event (`[DONE]` time is kept separately in the record).
//! * ITL = every gap between consecutive content events of one request, pooled.
//! * TPOT = (E2E − TTFT) / (output tokens − 1), per request with ≥ 2 output tokens.
//! * decode rate = 1 / TPOT (tokens per second), per request.
//! * request window = last completion (end of a successful stream) − first send (over every
//!   measured request, failed ones included).
//! * output tokens/s (request-window throughput) = Σ output tokens of successful requests /
//!   window; requests/s = successful requests / window.
//! * goodput = successful requests meeting every declared SLO (TTFT ≤, max ITL ≤, E2E ≤),
//!   per second of window, in requests and in output tokens.
//! * percentiles: Hyndman–Fan type 7 (linear interpolation between order statistics, numpy's
//!   default) over the sorted sample. A percentile is null with reason
//!   `insufficient_samples` below its minimum: p50 ≥ 1, p90 ≥ 64, p95 ≥ 133, p99 ≥ 662,
//!   p99.9 ≥ 6620 (p90 and p99 are the design's; p95 and p99.9 scale the p99 rule,
//!   6.62 / (1 − p), rounded up).
//!
//! * schedule lag = wire send − the latest of (scheduled time, establishment of a new
//!   connection for the request, start of a retry after the server closed a reused
//!   keep-alive connection): the client's own delay. Connection set-up and lost attempts are
//!   kept in each record (`connected_ns`, `first_attempt_send_ns`).
//!
//! * error bounds: every content event's arrival is known to lie in an interval
//!   (`content_event_ns − content_event_width_ns` ..= `content_event_ns`, from
//!   [`crate::rxclock`]); each
//!   sample (TTFT, E2E, ITL, TPOT, decode rate) carries the interval those arrivals allow and
//!   is reported at the interval's midpoint; each percentile and mean carries the same
//!   statistic of the lower and of the upper ends ([`Distribution::bounded`]: these
//!   statistics are monotone in every sample, so the truth lies between), the pooled ITL's
//!   percentiles and mean jointly over each request's arrivals ([`GapIntervals`]: the gaps of
//!   events that shared a read cannot all be wide at once); rates carry the
//!   window's bound, SLO attainment and goodput the counts of requests that surely and that
//!   possibly meet the SLOs. The error of a reported value is the larger distance to either
//!   end ([`Bound::error`]), shown as `±`.
//!
//! * measurement validity ([`Validity`]): a run is invalid when more than the accepted
//!   fraction of sends were late (a schedule that was not kept is not a measurement of it),
//!   or when a gated statistic's error is larger than its tolerance (default the larger of
//!   0.5 ms and 2 % of the value; the gated statistics are the ones the caller declares, by
//!   default the medians and the throughputs, plus SLO attainment and goodput under SLOs).
//!   Read lag, coalescing, run-queue wait and preemption are recorded signals, not gates:
//!   their effect on the numbers is what the bounds measure. Each refusal is one
//!   `invalid run: <statistic, value, bound, tolerance, what to do>` reason.
//!
//! Invariants: failed requests never enter a latency or throughput numerator; they are
//! counted. Warmup requests never enter anything. Every reported bounded value lies inside
//! its bound.
//!
//! The parts live in their own files: `distribution` (samples with their bounds, type-7
//! percentiles, distributions), `samples` (one request's samples and SLO verdicts),
//! `validity` (the limits, schedule lag, validity signals and the gate on bounds) and
//! `rows` (the flattening into metric rows). This file owns the constants and definitions,
//! [`ServingMetrics`] and [`compute_gated`], which puts them together.

mod distribution;
mod joint;
mod rows;
mod samples;
mod validity;

pub use distribution::*;
pub use joint::*;
pub use rows::MetricRow;
pub use samples::*;
pub use validity::*;

use crate::record::{Phase, RequestRecord};
use crate::rxclock::ClockSource;
use serde::Serialize;

/// The percentiles reported for every distribution: (label, p, minimum samples).
pub const PERCENTILES: [(&str, f64, usize); 5] = [
    ("p50", 0.50, 1),
    ("p90", 0.90, 64),
    ("p95", 0.95, 133),
    ("p99", 0.99, 662),
    ("p99.9", 0.999, 6620),
];

/// The name of the percentile method.
pub const PERCENTILE_METHOD: &str = "hyndman_fan_type7_linear";

/// Metric definitions, by id, as recorded in the evidence.
pub const DEFINITIONS: [(&str, &str); 15] = [
    ("ttft_ms", "send to the first event carrying non-empty content or reasoning; role-only and usage-only events excluded; per successful request"),
    ("e2e_ms", "send to the last content event; the [DONE] time is kept separately; per successful request"),
    ("itl_ms", "each gap between consecutive content events of one successful request, pooled over requests"),
    ("tpot_ms", "(e2e - ttft) / (output tokens - 1) per successful request with at least 2 output tokens"),
    ("decode_tokens_per_second", "1 / tpot per successful request"),
    ("output_tokens_per_second", "sum of output tokens of successful requests / request window; window = last completion of a successful request - first send of any measured request"),
    ("requests_per_second", "successful requests / request window"),
    ("goodput", "successful requests meeting every declared slo (ttft <=, max itl <=, e2e <=) per second of request window, in requests and in output tokens"),
    ("schedule_lag_ms", "actual send (first request byte written to the socket) - scheduled send per measured request (measured from the latest of: the schedule, the establishment of a new connection, the start of a retry after the server closed a reused keep-alive connection; connection set-up is the server's accept path and is recorded per request); the run is invalid when more than max_disturbed_fraction of sends lag by more than late_send_ms"),
    ("error_bound", "per content event: an interval holding its arrival (upper: the kernel receive timestamp of the newest segment its read consumed, else the read's return; lower: the latest of the previous stamped read's timestamp, the start of the latest recv that found the queue empty, the peeked first byte's timestamp, and the send; a point where every byte of the read carries one timestamp); each sample is reported at the midpoint of the interval its arrivals allow, each percentile and mean with the same statistic of the lower and of the upper ends, except the pooled itl percentiles and mean, bounded jointly over each request's arrivals (one request's gaps together span no more than its intervals allow; bound_method joint, else per_gap when too costly) and never wider than the per-gap bound; error = the larger distance from the reported value to either end; a gated statistic whose error exceeds max(tolerance_ms, tolerance_fraction x value) makes the run invalid"),
    ("read_lag_ms", "per content event stamped by the kernel: the time its read returned - the kernel's software receive timestamp (SO_TIMESTAMPNS) of the newest segment the read consumed; recorded, not gated (its effect is in the error bound)"),
    ("late_read_fraction", "content events of successful requests read more than max_read_lag_ms after the kernel received them / kernel-stamped content events"),
    ("coalesced_event_fraction", "content events of successful requests that shared one read with a later content event of the same request / content events; recorded, not gated (the error bound says what it cost)"),
    ("run_queue_wait_ms", "per measured request: time the load generator thread spent runnable but waiting for a cpu between the request's start and end (/proc/thread-self/schedstat); starved_request_fraction = requests stamped at read time above max_run_queue_wait_ms / requests stamped at read time (kernel-stamped requests are recorded, not gated: their disturbance shows as read lag and coalescing)"),
    ("involuntary_switches", "per measured request: involuntary context switches of the load generator thread between the request's start and end (getrusage RUSAGE_THREAD ru_nivcsw); preempted_request_fraction = requests stamped at read time above max_involuntary_switches / requests stamped at read time"),
];

/// Declared service-level objectives (each optional).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Slo {
    /// TTFT bound in ms.
    pub ttft_ms: Option<f64>,
    /// Bound on each request's largest ITL, in ms.
    pub itl_ms: Option<f64>,
    /// E2E bound in ms.
    pub e2e_ms: Option<f64>,
}

impl Slo {
    /// Whether any objective is declared.
    pub fn is_declared(&self) -> bool {
        self.ttft_ms.is_some() || self.itl_ms.is_some() || self.e2e_ms.is_some()
    }
}

/// Everything computed from one campaign's measured records.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServingMetrics {
    /// Measured requests (warmup excluded).
    pub measured_requests: usize,
    /// Measured requests that succeeded.
    pub succeeded_requests: usize,
    /// Measured requests that failed.
    pub failed_requests: usize,
    /// Σ output tokens of successful requests.
    pub output_tokens_total: u64,
    /// How many successful requests took their count from the client (no server usage).
    pub client_counted_requests: usize,
    /// Σ content events of successful requests.
    pub content_events_total: u64,
    /// Request window in seconds (null without a successful request).
    pub window_seconds: Option<f64>,
    /// Request-window output throughput.
    pub output_tokens_per_second: Option<f64>,
    /// Successful requests per second of window.
    pub requests_per_second: Option<f64>,
    /// Goodput in requests per second (null without declared SLOs or window).
    pub goodput_requests_per_second: Option<f64>,
    /// Goodput in output tokens per second.
    pub goodput_output_tokens_per_second: Option<f64>,
    /// Fraction of measured requests meeting every SLO (failed ones count as misses).
    pub slo_attainment: Option<f64>,
    /// The SLOs applied.
    pub slo: Slo,
    /// TTFT in ms.
    pub ttft_ms: Distribution,
    /// E2E in ms.
    pub e2e_ms: Distribution,
    /// Pooled ITL in ms.
    pub itl_ms: Distribution,
    /// TPOT in ms.
    pub tpot_ms: Distribution,
    /// Decode rate in tokens/s.
    pub decode_tokens_per_second: Distribution,
    /// Schedule lag.
    pub schedule: ScheduleLag,
    /// Measurement-validity signals and violations.
    pub validity: Validity,
    /// Bounds of the scalar rates and of SLO attainment.
    pub bounds: StatBounds,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Statistics gated on their bound when the caller names none: the medians of every
/// latency, and the throughputs; plus SLO attainment and goodput when SLOs are declared.
pub const DEFAULT_GATED: [&str; 6] = [
    "ttft_ms.p50",
    "itl_ms.p50",
    "e2e_ms.p50",
    "tpot_ms.p50",
    "output_tokens_per_second",
    "requests_per_second",
];

/// Computes the metrics of the measured records in `records` (warmup rows are skipped) and
/// holds the measurement to `limits`, gating the [`DEFAULT_GATED`] statistics.
pub fn compute(records: &[RequestRecord], slo: Slo, limits: ValidityLimits) -> ServingMetrics {
    compute_gated(records, slo, limits, None)
}

/// [`compute`], gating the bounds of the statistics named in `gated` (metric row names;
/// `None`: [`DEFAULT_GATED`], plus `slo_attainment` and the goodputs when SLOs are
/// declared).
pub fn compute_gated(
    records: &[RequestRecord],
    slo: Slo,
    limits: ValidityLimits,
    gated: Option<&[String]>,
) -> ServingMetrics {
    let (measured, ok) = measured_and_succeeded(records);
    let pooled = pool_samples(&ok, &slo);
    let good = pooled.good;
    let (tokens_total, events_total) = (pooled.tokens_total, pooled.events_total);
    let (window, window_lower) = request_window(&measured, &ok);
    let per_s = |x: f64| window.map(|w| x / w);
    let schedule = schedule_lag(&measured, limits);
    let validity = validity(&measured, &ok, &schedule, limits);
    let declared = slo.is_declared();
    let n_measured = measured.len();
    let attainment = |i: usize| good[i].0 as f64 / n_measured.max(1) as f64;
    let bounds = stat_bounds(
        &pooled,
        ok.len(),
        n_measured,
        declared,
        window,
        window_lower,
    );
    let mut m = ServingMetrics {
        measured_requests: n_measured,
        succeeded_requests: ok.len(),
        failed_requests: n_measured - ok.len(),
        output_tokens_total: tokens_total,
        client_counted_requests: pooled.client_counted,
        content_events_total: events_total,
        window_seconds: window,
        output_tokens_per_second: per_s(tokens_total as f64),
        requests_per_second: per_s(ok.len() as f64),
        goodput_requests_per_second: if declared {
            per_s(good[0].0 as f64)
        } else {
            None
        },
        goodput_output_tokens_per_second: if declared {
            per_s(good[0].1 as f64)
        } else {
            None
        },
        slo_attainment: (declared && n_measured > 0).then(|| attainment(0)),
        slo,
        ttft_ms: Distribution::bounded(&pooled.ttft),
        e2e_ms: Distribution::bounded(&pooled.e2e),
        itl_ms: {
            let mut d = Distribution::bounded(&pooled.itl);
            d.tighten_gaps(&pooled.gaps);
            d
        },
        tpot_ms: Distribution::bounded(&pooled.tpot),
        decode_tokens_per_second: Distribution::bounded(&pooled.decode),
        schedule,
        validity,
        bounds,
    };
    let default_gated = default_gated(declared);
    let names = gated.unwrap_or(&default_gated);
    let wide = gate_bounds(&m, names, limits);
    m.validity.violations.extend(wide);
    m.validity.gated = names.to_vec();
    m
}

/// The measured records (warmup skipped) and those of them that succeeded, in order.
pub fn measured_and_succeeded(
    records: &[RequestRecord],
) -> (Vec<&RequestRecord>, Vec<&RequestRecord>) {
    let measured: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.phase == Phase::Measured)
        .collect();
    let ok = measured
        .iter()
        .copied()
        .filter(|r| r.outcome.is_success())
        .collect();
    (measured, ok)
}

/// The samples of the successful measured requests, pooled, with their totals.
struct Pooled {
    ttft: Vec<BoundedSample>,
    e2e: Vec<BoundedSample>,
    itl: Vec<BoundedSample>,
    /// The same gaps' event intervals, for their joint bounds.
    gaps: GapIntervals,
    tpot: Vec<BoundedSample>,
    decode: Vec<BoundedSample>,
    tokens_total: u64,
    events_total: u64,
    client_counted: usize,
    /// (requests, tokens) meeting every SLO: reported, surely, possibly.
    good: [(usize, u64); 3],
}

/// Pools the samples of every successful request that was sent and has a content event.
fn pool_samples(ok: &[&RequestRecord], slo: &Slo) -> Pooled {
    let mut ttft = Vec::new();
    let mut e2e = Vec::new();
    let mut itl = Vec::new();
    let mut gaps = GapIntervals::default();
    let mut tpot = Vec::new();
    let mut decode = Vec::new();
    let mut tokens_total = 0u64;
    let mut events_total = 0u64;
    let mut client_counted = 0usize;
    // (requests, tokens) meeting every SLO: reported, surely, possibly.
    let mut good = [(0usize, 0u64); 3];
    for r in ok {
        let Some(send) = r.send_ns else {
            continue;
        };
        if r.content_event_ns.is_empty() {
            continue;
        }
        let s = request_samples(r, send);
        ttft.push(s.ttft);
        e2e.push(s.e2e);
        itl.extend_from_slice(&s.itl);
        gaps.push(event_intervals_ns(r));
        let tokens = r.output_tokens.map_or(0, |c| c.value);
        if r.output_tokens
            .is_some_and(|c| c.source != crate::record::TokenSource::ServerUsage)
        {
            client_counted += 1;
        }
        tokens_total += tokens;
        events_total += r.content_event_ns.len() as u64;
        if tokens >= 2 {
            let tp = tpot_sample(r, tokens);
            tpot.push(tp);
            if tp.value > 0.0 {
                decode.push(decode_sample(tp));
            }
        }
        let verdicts = slo_verdicts(slo, &s);
        for (g, met) in good.iter_mut().zip([verdicts.0, verdicts.1, verdicts.2]) {
            if met {
                g.0 += 1;
                g.1 += tokens;
            }
        }
    }
    Pooled {
        ttft,
        e2e,
        itl,
        gaps,
        tpot,
        decode,
        tokens_total,
        events_total,
        client_counted,
        good,
    }
}

/// The request window in seconds (first send to last completion) and its shortest possible
/// length (to the lower end of the read that ended the last stream).
fn request_window(
    measured: &[&RequestRecord],
    ok: &[&RequestRecord],
) -> (Option<f64>, Option<f64>) {
    let first_send = measured.iter().filter_map(|r| r.send_ns).min();
    let last_completion = ok.iter().filter_map(|r| r.end_ns).max();
    // The earliest the last completion can have happened: the lower end of the read that
    // ended each successful stream.
    let last_completion_lower = ok.iter().filter_map(|r| r.end_lower_ns.or(r.end_ns)).max();
    let window = match (first_send, last_completion) {
        (Some(a), Some(b)) if b > a => Some((b - a) as f64 / 1e9),
        _ => None,
    };
    let window_lower = match (first_send, last_completion_lower) {
        (Some(a), Some(b)) if b > a => Some((b - a) as f64 / 1e9),
        _ => window,
    };
    (window, window_lower)
}

/// The bounds of the rates (over a window in `[window_lower, window]`) and of SLO attainment.
fn stat_bounds(
    pooled: &Pooled,
    succeeded: usize,
    n_measured: usize,
    declared: bool,
    window: Option<f64>,
    window_lower: Option<f64>,
) -> StatBounds {
    let good = pooled.good;
    let tokens_total = pooled.tokens_total;
    // x per second over a window in [window_lower, window]: in [x / window, x / window_lower].
    let rate_bound = |x: f64, x_lo: f64, x_hi: f64| match (window, window_lower) {
        (Some(w), Some(wl)) if wl > 0.0 => Some(Bound {
            lower: x_lo.min(x) / w,
            upper: x_hi.max(x) / wl,
        }),
        _ => None,
    };
    let attainment = |i: usize| good[i].0 as f64 / n_measured.max(1) as f64;
    StatBounds {
        output_tokens_per_second: rate_bound(
            tokens_total as f64,
            tokens_total as f64,
            tokens_total as f64,
        ),
        requests_per_second: rate_bound(succeeded as f64, succeeded as f64, succeeded as f64),
        goodput_requests_per_second: declared
            .then(|| rate_bound(good[0].0 as f64, good[1].0 as f64, good[2].0 as f64))
            .flatten(),
        goodput_output_tokens_per_second: declared
            .then(|| rate_bound(good[0].1 as f64, good[1].1 as f64, good[2].1 as f64))
            .flatten(),
        slo_attainment: (declared && n_measured > 0).then(|| Bound {
            lower: attainment(1),
            upper: attainment(2),
        }),
    }
}

/// The statistics gated when the caller names none: [`DEFAULT_GATED`], plus SLO attainment
/// and the goodputs when SLOs are declared.
fn default_gated(declared: bool) -> Vec<String> {
    DEFAULT_GATED
        .iter()
        .map(|s| s.to_string())
        .chain(
            declared
                .then_some([
                    "slo_attainment",
                    "goodput_requests_per_second",
                    "goodput_output_tokens_per_second",
                ])
                .into_iter()
                .flatten()
                .map(str::to_string),
        )
        .collect()
}

#[cfg(test)]
mod tests;
