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
//! * measurement validity ([`Validity`]): what can make client-side timing wrong, per run,
//!   against declared [`ValidityLimits`]: late sends (schedule lag above the limit), late
//!   reads (read lag = read returned − kernel receive timestamp, for kernel-stamped events),
//!   content events coalesced into one read with a later event (they carry a later time than
//!   their arrival), and requests stamped at read time during which the load generator thread
//!   waited in the run queue or was preempted more than allowed (for kernel-stamped requests
//!   those counters are recorded, not gated: their effect is measured directly as read lag,
//!   coalescing and send lag). Each exceeded limit is one `invalid run: <signal, how much>`
//!   reason.
//!
//! Invariants: failed requests never enter a latency or throughput numerator; they are
//! counted. Warmup requests never enter anything. A run whose validity signals exceed their
//! limits is invalid (defaults: more than 1 % of sends late by more than 1 ms, of content
//! events read late by more than 1 ms or coalesced, or of requests starved by more than 1 ms
//! of run-queue wait or preempted more than 10 times).

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

/// Default lag beyond which a send counts as late.
pub const LATE_SEND_NS: u64 = 1_000_000;
/// Default read-lag limit for kernel-stamped content events (ms).
pub const DEFAULT_MAX_READ_LAG_MS: f64 = 20.0;
/// Default largest accepted fraction of late sends (and of every other disturbed item).
pub const MAX_LATE_FRACTION: f64 = 0.01;

/// The declared thresholds of the measurement-validity gate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ValidityLimits {
    /// A send lagging its schedule by more than this is late (ms).
    pub late_send_ms: f64,
    /// A content event read more than this after the kernel received it is read late (ms).
    pub max_read_lag_ms: f64,
    /// A request during which the load thread waited longer than this in the run queue is
    /// starved (ms).
    pub max_run_queue_wait_ms: f64,
    /// A request during which the load thread was preempted more often than this is
    /// preempted.
    pub max_involuntary_switches: u64,
    /// Largest accepted fraction of late sends, late reads, coalesced content events,
    /// starved requests and preempted requests (each on its own).
    pub max_disturbed_fraction: f64,
}

impl Default for ValidityLimits {
    fn default() -> ValidityLimits {
        ValidityLimits {
            late_send_ms: LATE_SEND_NS as f64 / 1e6,
            // Kernel-stamped events carry their arrival time, so read lag alone does not
            // distort them (coalescing, gated separately, does): this limit only says the
            // client could not keep up at all.
            max_read_lag_ms: DEFAULT_MAX_READ_LAG_MS,
            max_run_queue_wait_ms: 1.0,
            max_involuntary_switches: 10,
            max_disturbed_fraction: MAX_LATE_FRACTION,
        }
    }
}

impl ValidityLimits {
    /// Limits no measurement can exceed (for tests and benchmarks that are not about
    /// timing; never a default).
    pub fn unlimited() -> ValidityLimits {
        ValidityLimits {
            late_send_ms: f64::INFINITY,
            max_read_lag_ms: f64::INFINITY,
            max_run_queue_wait_ms: f64::INFINITY,
            max_involuntary_switches: u64::MAX,
            max_disturbed_fraction: 1.0,
        }
    }
}

/// Metric definitions, by id, as recorded in the evidence.
pub const DEFINITIONS: [(&str, &str); 14] = [
    ("ttft_ms", "send to the first event carrying non-empty content or reasoning; role-only and usage-only events excluded; per successful request"),
    ("e2e_ms", "send to the last content event; the [DONE] time is kept separately; per successful request"),
    ("itl_ms", "each gap between consecutive content events of one successful request, pooled over requests"),
    ("tpot_ms", "(e2e - ttft) / (output tokens - 1) per successful request with at least 2 output tokens"),
    ("decode_tokens_per_second", "1 / tpot per successful request"),
    ("output_tokens_per_second", "sum of output tokens of successful requests / request window; window = last completion of a successful request - first send of any measured request"),
    ("requests_per_second", "successful requests / request window"),
    ("goodput", "successful requests meeting every declared slo (ttft <=, max itl <=, e2e <=) per second of request window, in requests and in output tokens"),
    ("schedule_lag_ms", "actual send (first request byte written to the socket) - scheduled send per measured request (measured from the latest of: the schedule, the establishment of a new connection, the start of a retry after the server closed a reused keep-alive connection; connection set-up is the server's accept path and is recorded per request); the run is invalid when more than max_disturbed_fraction of sends lag by more than late_send_ms"),
    ("read_lag_ms", "per content event stamped by the kernel: the time its read returned - the kernel's software receive timestamp (SO_TIMESTAMPNS) of the newest segment the read consumed; events carry the kernel timestamp, so read lag disturbs them only through coalescing"),
    ("late_read_fraction", "content events of successful requests read more than max_read_lag_ms after the kernel received them / kernel-stamped content events"),
    ("coalesced_event_fraction", "content events of successful requests that shared one read with a later content event of the same request (stamped with a time later than their own arrival) / content events"),
    ("run_queue_wait_ms", "per measured request: time the load generator thread spent runnable but waiting for a cpu between the request's start and end (/proc/thread-self/schedstat); starved_request_fraction = requests stamped at read time above max_run_queue_wait_ms / requests stamped at read time (kernel-stamped requests are recorded, not gated: their disturbance shows as read lag and coalescing)"),
    ("involuntary_switches", "per measured request: involuntary context switches of the load generator thread between the request's start and end (getrusage RUSAGE_THREAD ru_nivcsw); preempted_request_fraction = requests stamped at read time above max_involuntary_switches / requests stamped at read time"),
];

/// One percentile value, or null with a reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PercentileValue {
    /// `p50`, `p90`, …
    pub label: &'static str,
    /// The value, when there are enough samples.
    pub value: Option<f64>,
    /// Why the value is null.
    pub reason: Option<String>,
}

/// Summary of one distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Distribution {
    /// Sample count.
    pub n: usize,
    /// Arithmetic mean (null when empty).
    pub mean: Option<f64>,
    /// Smallest sample.
    pub min: Option<f64>,
    /// Largest sample.
    pub max: Option<f64>,
    /// The percentiles of [`PERCENTILES`], in order.
    pub percentiles: Vec<PercentileValue>,
}

/// Type-7 percentile of an ascending, non-empty slice.
pub fn percentile_type7(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 1 {
        return sorted[0];
    }
    let rank = (n - 1) as f64 * p;
    let lo = rank.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

impl Distribution {
    /// Summarises `samples` (any order).
    pub fn of(mut samples: Vec<f64>) -> Distribution {
        samples.sort_by(|a, b| a.total_cmp(b));
        let n = samples.len();
        let percentiles = PERCENTILES
            .iter()
            .map(|&(label, p, min)| {
                if n < min.max(1) {
                    PercentileValue {
                        label,
                        value: None,
                        reason: Some(format!(
                            "insufficient_samples: {label} needs at least {} samples, have {n}",
                            min.max(1)
                        )),
                    }
                } else {
                    PercentileValue {
                        label,
                        value: Some(percentile_type7(&samples, p)),
                        reason: None,
                    }
                }
            })
            .collect();
        Distribution {
            n,
            mean: (n > 0).then(|| samples.iter().sum::<f64>() / n as f64),
            min: samples.first().copied(),
            max: samples.last().copied(),
            percentiles,
        }
    }

    /// The value of one percentile label.
    pub fn get(&self, label: &str) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|p| p.label == label)
            .and_then(|p| p.value)
    }
}

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

/// Schedule-lag statistics of measured sends.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScheduleLag {
    /// Lag distribution in ms.
    pub lag_ms: Distribution,
    /// Sends lagging by more than 1 ms.
    pub late_sends: usize,
    /// `late_sends` / measured sends (0 when none).
    pub late_fraction: f64,
    /// Whether the schedule was kept (`late_fraction` within the limit).
    pub valid: bool,
}

/// The measurement-validity signals of one run and the limits they were held to.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Validity {
    /// The limits applied.
    pub limits: ValidityLimits,
    /// Successful requests whose every content event carries a kernel receive timestamp.
    pub kernel_clock_requests: usize,
    /// Successful requests with at least one event stamped at read time.
    pub user_clock_requests: usize,
    /// Read lag of kernel-stamped content events, in ms.
    pub read_lag_ms: Distribution,
    /// Content events read later than the limit.
    pub late_reads: usize,
    /// `late_reads` / kernel-stamped content events (0 when none).
    pub late_read_fraction: f64,
    /// Content events coalesced into one read with a later content event.
    pub coalesced_events: u64,
    /// `coalesced_events` / content events (0 when none).
    pub coalesced_event_fraction: f64,
    /// Load-thread run-queue wait per measured request (all), in ms.
    pub run_queue_wait_ms: Distribution,
    /// Requests stamped at read time (or without content) above the run-queue wait limit.
    pub starved_requests: usize,
    /// `starved_requests` / such requests with a run-queue sample.
    pub starved_request_fraction: f64,
    /// Load-thread involuntary context switches per measured request.
    pub involuntary_switches: Distribution,
    /// Requests stamped at read time (or without content) above the involuntary-switch limit.
    pub preempted_requests: usize,
    /// `preempted_requests` / such requests with a sample.
    pub preempted_request_fraction: f64,
    /// One `invalid run: …` reason per exceeded limit (empty: the measurement is valid).
    pub violations: Vec<String>,
}

fn fraction(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn fmt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.3} ms"))
}

fn validity(
    measured: &[&RequestRecord],
    ok: &[&RequestRecord],
    schedule: &ScheduleLag,
    limits: ValidityLimits,
) -> Validity {
    let pct = |f: f64| f * 100.0;
    let limit_pct = pct(limits.max_disturbed_fraction);
    let over = |f: f64| f > limits.max_disturbed_fraction;
    let lags: Vec<f64> = ok
        .iter()
        .flat_map(|r| r.content_read_lag_ns.iter().map(|&l| ms(l)))
        .collect();
    let late_reads = lags.iter().filter(|&&l| l > limits.max_read_lag_ms).count();
    let late_read_fraction = fraction(late_reads, lags.len());
    let events: u64 = ok.iter().map(|r| r.content_event_ns.len() as u64).sum();
    let coalesced: u64 = ok.iter().map(|r| r.content_events_coalesced).sum();
    let coalesced_event_fraction = fraction(coalesced as usize, events as usize);
    // The scheduler counters are held to their limits for requests stamped at read time:
    // there a run-queue wait delays the stamps themselves. Kernel-stamped requests carry
    // their arrival times regardless; what a starved thread does to them shows directly as
    // read lag and coalescing (gated above) and as send lag.
    let read_clocked = |r: &&&RequestRecord| r.clock_source != Some(ClockSource::KernelRxTimestamp);
    let waits: Vec<f64> = measured
        .iter()
        .filter_map(|r| r.run_queue_wait_ns.map(ms))
        .collect();
    let gated_waits: Vec<f64> = measured
        .iter()
        .filter(read_clocked)
        .filter_map(|r| r.run_queue_wait_ns.map(ms))
        .collect();
    let starved = gated_waits
        .iter()
        .filter(|&&w| w > limits.max_run_queue_wait_ms)
        .count();
    let starved_request_fraction = fraction(starved, gated_waits.len());
    let switches: Vec<u64> = measured
        .iter()
        .filter_map(|r| r.involuntary_switches)
        .collect();
    let gated_switches: Vec<u64> = measured
        .iter()
        .filter(read_clocked)
        .filter_map(|r| r.involuntary_switches)
        .collect();
    let preempted = gated_switches
        .iter()
        .filter(|&&n| n > limits.max_involuntary_switches)
        .count();
    let preempted_request_fraction = fraction(preempted, gated_switches.len());
    let read_lag_ms = Distribution::of(lags);
    let run_queue_wait_ms = Distribution::of(waits);
    let involuntary_switches = Distribution::of(switches.iter().map(|&n| n as f64).collect());
    let mut violations = Vec::new();
    if !schedule.valid {
        violations.push(format!(
            "invalid run: {:.2}% of sends lagged their schedule by more than {} ms (limit {limit_pct}%; max {})",
            pct(schedule.late_fraction),
            limits.late_send_ms,
            fmt_ms(schedule.lag_ms.max)
        ));
    }
    if over(late_read_fraction) {
        violations.push(format!(
            "invalid run: {:.2}% of content events were read more than {} ms after the kernel received them (limit {limit_pct}%; read lag p50 {}, max {})",
            pct(late_read_fraction),
            limits.max_read_lag_ms,
            fmt_ms(read_lag_ms.get("p50")),
            fmt_ms(read_lag_ms.max)
        ));
    }
    if over(coalesced_event_fraction) {
        violations.push(format!(
            "invalid run: {:.2}% of content events were coalesced into one read with a later event ({coalesced} of {events}; limit {limit_pct}%)",
            pct(coalesced_event_fraction)
        ));
    }
    if over(starved_request_fraction) {
        violations.push(format!(
            "invalid run: {:.2}% of requests stamped at read time saw more than {} ms of load-generator run-queue wait (limit {limit_pct}%; max {})",
            pct(starved_request_fraction),
            limits.max_run_queue_wait_ms,
            fmt_ms(run_queue_wait_ms.max)
        ));
    }
    if over(preempted_request_fraction) {
        violations.push(format!(
            "invalid run: {:.2}% of requests stamped at read time saw more than {} involuntary context switches of the load generator (limit {limit_pct}%; max {})",
            pct(preempted_request_fraction),
            limits.max_involuntary_switches,
            involuntary_switches.max.unwrap_or(0.0)
        ));
    }
    Validity {
        limits,
        kernel_clock_requests: ok
            .iter()
            .filter(|r| r.clock_source == Some(ClockSource::KernelRxTimestamp))
            .count(),
        user_clock_requests: ok
            .iter()
            .filter(|r| r.clock_source == Some(ClockSource::UserRead))
            .count(),
        read_lag_ms,
        late_reads,
        late_read_fraction,
        coalesced_events: coalesced,
        coalesced_event_fraction,
        run_queue_wait_ms,
        starved_requests: starved,
        starved_request_fraction,
        involuntary_switches,
        preempted_requests: preempted,
        preempted_request_fraction,
        violations,
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
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Computes the metrics of the measured records in `records` (warmup rows are skipped) and
/// holds the measurement to `limits`.
pub fn compute(records: &[RequestRecord], slo: Slo, limits: ValidityLimits) -> ServingMetrics {
    let measured: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.phase == Phase::Measured)
        .collect();
    let ok: Vec<&RequestRecord> = measured
        .iter()
        .copied()
        .filter(|r| r.outcome.is_success())
        .collect();
    let mut ttft = Vec::new();
    let mut e2e = Vec::new();
    let mut itl = Vec::new();
    let mut tpot = Vec::new();
    let mut decode = Vec::new();
    let mut tokens_total = 0u64;
    let mut events_total = 0u64;
    let mut client_counted = 0usize;
    let mut good = 0usize;
    let mut good_tokens = 0u64;
    for r in &ok {
        let (Some(send), Some(first), Some(last)) = (
            r.send_ns,
            r.content_event_ns.first().copied(),
            r.content_event_ns.last().copied(),
        ) else {
            continue;
        };
        let t = ms(first.saturating_sub(send));
        let e = ms(last.saturating_sub(send));
        ttft.push(t);
        e2e.push(e);
        let gaps: Vec<f64> = r
            .content_event_ns
            .windows(2)
            .map(|w| ms(w[1].saturating_sub(w[0])))
            .collect();
        let max_gap = gaps
            .iter()
            .copied()
            .fold(None, |m: Option<f64>, g| Some(m.map_or(g, |m| m.max(g))));
        itl.extend_from_slice(&gaps);
        let tokens = r.output_tokens.map_or(0, |c| c.value);
        if r.output_tokens
            .is_some_and(|c| c.source != crate::record::TokenSource::ServerUsage)
        {
            client_counted += 1;
        }
        tokens_total += tokens;
        events_total += r.content_event_ns.len() as u64;
        if tokens >= 2 {
            let tp = (e - t) / (tokens - 1) as f64;
            tpot.push(tp);
            if tp > 0.0 {
                decode.push(1000.0 / tp);
            }
        }
        let meets = slo.ttft_ms.is_none_or(|b| t <= b)
            && slo.e2e_ms.is_none_or(|b| e <= b)
            && slo.itl_ms.is_none_or(|b| max_gap.is_none_or(|g| g <= b));
        if meets {
            good += 1;
            good_tokens += tokens;
        }
    }
    let first_send = measured.iter().filter_map(|r| r.send_ns).min();
    let last_completion = ok.iter().filter_map(|r| r.end_ns).max();
    let window = match (first_send, last_completion) {
        (Some(a), Some(b)) if b > a => Some((b - a) as f64 / 1e9),
        _ => None,
    };
    let per_s = |x: f64| window.map(|w| x / w);
    let lags: Vec<u64> = measured
        .iter()
        .filter_map(|r| {
            let reference = r
                .scheduled_ns
                .max(r.connected_ns.unwrap_or(0))
                .max(r.retry_started_ns.unwrap_or(0));
            r.send_ns.map(|s| s.saturating_sub(reference))
        })
        .collect();
    let late = lags
        .iter()
        .filter(|&&l| ms(l) > limits.late_send_ms)
        .count();
    let late_fraction = fraction(late, lags.len());
    let schedule = ScheduleLag {
        lag_ms: Distribution::of(lags.iter().map(|&l| ms(l)).collect()),
        late_sends: late,
        late_fraction,
        valid: late_fraction <= limits.max_disturbed_fraction,
    };
    let validity = validity(&measured, &ok, &schedule, limits);
    ServingMetrics {
        measured_requests: measured.len(),
        succeeded_requests: ok.len(),
        failed_requests: measured.len() - ok.len(),
        output_tokens_total: tokens_total,
        client_counted_requests: client_counted,
        content_events_total: events_total,
        window_seconds: window,
        output_tokens_per_second: per_s(tokens_total as f64),
        requests_per_second: per_s(ok.len() as f64),
        goodput_requests_per_second: if slo.is_declared() {
            per_s(good as f64)
        } else {
            None
        },
        goodput_output_tokens_per_second: if slo.is_declared() {
            per_s(good_tokens as f64)
        } else {
            None
        },
        slo_attainment: (slo.is_declared() && !measured.is_empty())
            .then(|| good as f64 / measured.len() as f64),
        slo,
        ttft_ms: Distribution::of(ttft),
        e2e_ms: Distribution::of(e2e),
        itl_ms: Distribution::of(itl),
        tpot_ms: Distribution::of(tpot),
        decode_tokens_per_second: Distribution::of(decode),
        schedule,
        validity,
    }
}

/// One case-result metric row (value null when it cannot be computed, with the reason).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricRow {
    /// Metric name (`^[a-z][a-z0-9_.-]{0,127}$`).
    pub name: String,
    /// The value, or null.
    pub value: Option<f64>,
    /// Why the value is null.
    pub null_reason: Option<String>,
    /// Unit.
    pub unit: &'static str,
    /// Aggregation.
    pub aggregation: String,
    /// Direction.
    pub lower_is_better: bool,
}

impl ServingMetrics {
    /// Every metric this campaign can report, sorted by name.
    pub fn rows(&self) -> Vec<MetricRow> {
        let mut rows = Vec::new();
        let scalar = |rows: &mut Vec<MetricRow>,
                      name: &str,
                      value: Option<f64>,
                      reason: &str,
                      unit: &'static str,
                      agg: &str,
                      lower: bool| {
            rows.push(MetricRow {
                name: name.to_string(),
                value,
                null_reason: value.is_none().then(|| reason.to_string()),
                unit,
                aggregation: agg.to_string(),
                lower_is_better: lower,
            })
        };
        let dist = |rows: &mut Vec<MetricRow>,
                    base: &str,
                    d: &Distribution,
                    unit: &'static str,
                    lower: bool| {
            rows.push(MetricRow {
                name: format!("{base}.mean"),
                value: d.mean,
                null_reason: d.mean.is_none().then(|| "no samples".to_string()),
                unit,
                aggregation: "mean".into(),
                lower_is_better: lower,
            });
            rows.push(MetricRow {
                name: format!("{base}.max"),
                value: d.max,
                null_reason: d.max.is_none().then(|| "no samples".to_string()),
                unit,
                aggregation: "max".into(),
                lower_is_better: lower,
            });
            for p in &d.percentiles {
                rows.push(MetricRow {
                    name: format!("{base}.{}", p.label),
                    value: p.value,
                    null_reason: p.reason.clone(),
                    unit,
                    aggregation: p.label.to_string(),
                    lower_is_better: lower,
                });
            }
        };
        dist(&mut rows, "ttft_ms", &self.ttft_ms, "ms", true);
        dist(&mut rows, "e2e_ms", &self.e2e_ms, "ms", true);
        dist(&mut rows, "itl_ms", &self.itl_ms, "ms", true);
        dist(&mut rows, "tpot_ms", &self.tpot_ms, "ms", true);
        dist(
            &mut rows,
            "decode_tokens_per_second",
            &self.decode_tokens_per_second,
            "tokens/s",
            false,
        );
        dist(
            &mut rows,
            "schedule_lag_ms",
            &self.schedule.lag_ms,
            "ms",
            true,
        );
        let no_window = "no request window: no successful measured request";
        scalar(
            &mut rows,
            "output_tokens_per_second",
            self.output_tokens_per_second,
            no_window,
            "tokens/s",
            "rate",
            false,
        );
        scalar(
            &mut rows,
            "requests_per_second",
            self.requests_per_second,
            no_window,
            "requests/s",
            "rate",
            false,
        );
        let no_slo = if self.slo.is_declared() {
            no_window
        } else {
            "no slo declared"
        };
        scalar(
            &mut rows,
            "goodput_requests_per_second",
            self.goodput_requests_per_second,
            no_slo,
            "requests/s",
            "rate",
            false,
        );
        scalar(
            &mut rows,
            "goodput_output_tokens_per_second",
            self.goodput_output_tokens_per_second,
            no_slo,
            "tokens/s",
            "rate",
            false,
        );
        scalar(
            &mut rows,
            "slo_attainment",
            self.slo_attainment,
            if self.slo.is_declared() {
                "no measured request"
            } else {
                "no slo declared"
            },
            "fraction",
            "ratio",
            false,
        );
        scalar(
            &mut rows,
            "requests_measured",
            Some(self.measured_requests as f64),
            "",
            "count",
            "count",
            false,
        );
        scalar(
            &mut rows,
            "requests_succeeded",
            Some(self.succeeded_requests as f64),
            "",
            "count",
            "count",
            false,
        );
        scalar(
            &mut rows,
            "requests_failed",
            Some(self.failed_requests as f64),
            "",
            "count",
            "count",
            true,
        );
        scalar(
            &mut rows,
            "output_tokens_total",
            Some(self.output_tokens_total as f64),
            "",
            "tokens",
            "sum",
            false,
        );
        scalar(
            &mut rows,
            "content_events_total",
            Some(self.content_events_total as f64),
            "",
            "count",
            "sum",
            false,
        );
        scalar(
            &mut rows,
            "schedule_late_fraction",
            Some(self.schedule.late_fraction),
            "",
            "fraction",
            "ratio",
            true,
        );
        let v = &self.validity;
        dist(&mut rows, "read_lag_ms", &v.read_lag_ms, "ms", true);
        dist(
            &mut rows,
            "run_queue_wait_ms",
            &v.run_queue_wait_ms,
            "ms",
            true,
        );
        dist(
            &mut rows,
            "involuntary_switches",
            &v.involuntary_switches,
            "count",
            true,
        );
        for (name, value) in [
            ("late_read_fraction", v.late_read_fraction),
            ("coalesced_event_fraction", v.coalesced_event_fraction),
            ("starved_request_fraction", v.starved_request_fraction),
            ("preempted_request_fraction", v.preempted_request_fraction),
        ] {
            scalar(&mut rows, name, Some(value), "", "fraction", "ratio", true);
        }
        let clocked = v.kernel_clock_requests + v.user_clock_requests;
        scalar(
            &mut rows,
            "kernel_clock_request_fraction",
            (clocked > 0).then(|| fraction(v.kernel_clock_requests, clocked)),
            "no successful measured request",
            "fraction",
            "ratio",
            false,
        );
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Endpoint, Outcome, TokenCount, TokenSource};

    fn rec(index: u64, send: u64, events: &[u64], end: u64, tokens: u64) -> RequestRecord {
        let mut r = RequestRecord::scheduled(index, "x", Phase::Measured, Endpoint::Chat, send);
        r.send_ns = Some(send);
        r.content_event_ns = events.to_vec();
        r.end_ns = Some(end);
        r.done_ns = Some(end);
        r.output_tokens = Some(TokenCount {
            value: tokens,
            source: TokenSource::ServerUsage,
        });
        r.outcome = Outcome::Succeeded;
        r
    }

    const MS: u64 = 1_000_000;

    /// The metric-definition suite: one hand-built per-event trace; every expected value is
    /// computed by hand in the comments.
    #[test]
    fn hand_built_trace_yields_the_defined_values() {
        // Request A: sent at 0 ms; content events at 10, 15, 25 ms; stream end 27 ms; 3 tokens.
        //   TTFT 10, E2E 25, ITLs 5 and 10, TPOT (25-10)/(3-1) = 7.5, decode 1000/7.5 = 133.33…
        // Request B: sent at 2 ms (scheduled 0: lag 2 ms, late); events 22, 24 ms; end 30 ms;
        //   usage says 4 tokens (an event carried two). TTFT 20, E2E 22, ITL 2,
        //   TPOT (22-20)/(4-1) = 0.666…, decode 1500.
        // Request C: sent at 3 ms, failed (error event) — counted, never in numerators.
        // Warmup W: excluded from everything.
        let a = rec(1, 0, &[10 * MS, 15 * MS, 25 * MS], 27 * MS, 3);
        let mut b = rec(2, 2 * MS, &[22 * MS, 24 * MS], 30 * MS, 4);
        b.scheduled_ns = 0;
        let mut c = rec(3, 3 * MS, &[4 * MS], 5 * MS, 1);
        c.outcome = Outcome::Failed {
            reason: "in-band error event".into(),
        };
        let mut w = rec(0, 0, &[MS], 100 * MS, 1000);
        w.phase = Phase::Warmup;
        let slo = Slo {
            ttft_ms: Some(15.0),
            itl_ms: None,
            e2e_ms: None,
        };
        let m = compute(&[w, a, b, c], slo, ValidityLimits::default());
        assert_eq!(
            (m.measured_requests, m.succeeded_requests, m.failed_requests),
            (3, 2, 1)
        );
        assert_eq!(m.output_tokens_total, 7);
        assert_eq!(m.content_events_total, 5);
        // TTFT samples {10, 20}: mean 15, type-7 p50 = 10 + (20-10)*0.5 = 15.
        assert_eq!(m.ttft_ms.mean, Some(15.0));
        assert_eq!(m.ttft_ms.get("p50"), Some(15.0));
        // p90 needs 64 samples: null with a reason.
        assert_eq!(m.ttft_ms.get("p90"), None);
        assert!(m.ttft_ms.percentiles[1]
            .reason
            .as_deref()
            .unwrap()
            .starts_with("insufficient_samples"));
        // E2E {25, 22}.
        assert_eq!(m.e2e_ms.min, Some(22.0));
        assert_eq!(m.e2e_ms.max, Some(25.0));
        // ITL pooled {5, 10, 2}: sorted {2, 5, 10}, p50 = 5, mean 17/3.
        assert_eq!(m.itl_ms.n, 3);
        assert_eq!(m.itl_ms.get("p50"), Some(5.0));
        assert!((m.itl_ms.mean.unwrap() - 17.0 / 3.0).abs() < 1e-12);
        // TPOT {7.5, 2/3}; decode {133.33…, 1500}.
        assert!((m.tpot_ms.max.unwrap() - 7.5).abs() < 1e-12);
        assert!((m.tpot_ms.min.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        assert!((m.decode_tokens_per_second.max.unwrap() - 1500.0).abs() < 1e-9);
        assert!((m.decode_tokens_per_second.min.unwrap() - 1000.0 / 7.5).abs() < 1e-9);
        // Window: first send 0 (A), last completion 30 ms (B; C failed, W warmup) = 0.03 s.
        assert!((m.window_seconds.unwrap() - 0.03).abs() < 1e-12);
        // Output tokens/s = 7 / 0.03; requests/s = 2 / 0.03.
        assert!((m.output_tokens_per_second.unwrap() - 7.0 / 0.03).abs() < 1e-9);
        assert!((m.requests_per_second.unwrap() - 2.0 / 0.03).abs() < 1e-9);
        // Goodput with TTFT <= 15 ms: only A (3 tokens); attainment 1/3 (C counts as a miss).
        assert!((m.goodput_requests_per_second.unwrap() - 1.0 / 0.03).abs() < 1e-9);
        assert!((m.goodput_output_tokens_per_second.unwrap() - 3.0 / 0.03).abs() < 1e-9);
        assert!((m.slo_attainment.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        // Schedule lag: A 0, B 2 ms, C 0 (scheduled at its send): one late send of three,
        // 1/3 > 1 %, so the run is invalid.
        assert_eq!(m.schedule.late_sends, 1);
        assert!(!m.schedule.valid);
    }

    #[test]
    fn lag_reference_is_the_latest_of_schedule_connect_and_retry() {
        // Scheduled 0; new connection ready at 5 ms; sent at 5.2 ms: lag 0.2 ms, not 5.2.
        let mut a = rec(1, 5_200_000, &[6 * MS], 7 * MS, 1);
        a.scheduled_ns = 0;
        a.connected_ns = Some(5 * MS);
        // Scheduled 0; retry started at 3 ms after a stale connection; sent 4.5 ms: lag 1.5.
        let mut b = rec(2, 4_500_000, &[6 * MS], 7 * MS, 1);
        b.scheduled_ns = 0;
        b.retry_started_ns = Some(3 * MS);
        let m = compute(&[a, b], Slo::default(), ValidityLimits::default());
        assert!((m.schedule.lag_ms.min.unwrap() - 0.2).abs() < 1e-9);
        assert!((m.schedule.lag_ms.max.unwrap() - 1.5).abs() < 1e-9);
        assert_eq!(m.schedule.late_sends, 1);
    }

    /// The validity gate, signal by signal, on hand-built records.
    #[test]
    fn each_validity_signal_invalidates_past_its_limit() {
        let limits = ValidityLimits::default();
        let kernel = |i: u64, lags: &[u64], coalesced: u64| {
            let mut r = rec(i, 0, &[10 * MS, 15 * MS, 20 * MS, 25 * MS], 30 * MS, 4);
            r.clock_source = Some(ClockSource::KernelRxTimestamp);
            r.content_read_lag_ns = lags.to_vec();
            r.content_events_coalesced = coalesced;
            r.run_queue_wait_ns = Some(50 * MS);
            r.involuntary_switches = Some(100);
            r
        };
        // Clean kernel-stamped run: scheduler counters are recorded, not gated.
        let clean: Vec<RequestRecord> = (0..10).map(|i| kernel(i, &[1000; 4], 0)).collect();
        let m = compute(&clean, Slo::default(), limits);
        assert!(
            m.validity.violations.is_empty(),
            "{:?}",
            m.validity.violations
        );
        assert_eq!(m.validity.kernel_clock_requests, 10);
        assert_eq!(m.validity.run_queue_wait_ms.max, Some(50.0));
        // One event of 40 read 25 ms late (past the 20 ms default): 2.5% > 1%.
        let mut late = clean.clone();
        late[3] = kernel(3, &[1000, 25 * MS, 1000, 1000], 0);
        let v = compute(&late, Slo::default(), limits).validity;
        assert_eq!(v.late_reads, 1);
        assert_eq!(v.violations.len(), 1);
        assert!(v.violations[0]
            .starts_with("invalid run: 2.50% of content events were read more than 20 ms"));
        // 2 ms of read lag alone (no coalescing) is within the default.
        let mut lagged = clean.clone();
        lagged[3] = kernel(3, &[1000, 2 * MS, 1000, 1000], 0);
        assert!(compute(&lagged, Slo::default(), limits)
            .validity
            .violations
            .is_empty());
        // One coalesced event of 40.
        let mut co = clean.clone();
        co[0] = kernel(0, &[1000; 4], 1);
        let v = compute(&co, Slo::default(), limits).validity;
        assert_eq!(v.violations.len(), 1);
        assert!(v.violations[0].contains("coalesced into one read with a later event (1 of 40"));
        // Read-time stamps: run-queue wait and preemption are gated.
        let mut user = clean.clone();
        for r in &mut user {
            r.clock_source = Some(ClockSource::UserRead);
            r.content_read_lag_ns.clear();
        }
        let v = compute(&user, Slo::default(), limits).validity;
        assert_eq!(v.user_clock_requests, 10);
        assert_eq!(v.violations.len(), 2, "{:?}", v.violations);
        assert!(v.violations[0].contains("more than 1 ms of load-generator run-queue wait"));
        assert!(v.violations[1].contains("more than 10 involuntary context switches"));
        // Limits are the caller's: unlimited accepts everything.
        let v = compute(&user, Slo::default(), ValidityLimits::unlimited()).validity;
        assert!(v.violations.is_empty());
    }

    #[test]
    fn type7_matches_numpy_linear() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile_type7(&v, 0.5), 2.5);
        assert!((percentile_type7(&v, 0.9) - 3.7).abs() < 1e-12);
        assert_eq!(percentile_type7(&v, 1.0), 4.0);
        assert_eq!(percentile_type7(&[7.0], 0.99), 7.0);
    }

    #[test]
    fn sample_minimums_gate_each_percentile() {
        let d = Distribution::of((0..661).map(f64::from).collect());
        assert!(d.get("p90").is_some());
        assert!(d.get("p99").is_none());
        let d = Distribution::of((0..662).map(f64::from).collect());
        assert!(d.get("p99").is_some());
        let d = Distribution::of((0..63).map(f64::from).collect());
        assert!(d.get("p90").is_none());
        assert!(Distribution::of(vec![]).get("p50").is_none());
    }

    #[test]
    fn rows_are_sorted_unique_and_well_named() {
        let m = compute(&[], Slo::default(), ValidityLimits::default());
        let rows = m.rows();
        for w in rows.windows(2) {
            assert!(w[0].name < w[1].name);
        }
        for r in &rows {
            assert!(r
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c)));
            assert_eq!(r.value.is_none(), r.null_reason.is_some(), "{}", r.name);
        }
    }
}
