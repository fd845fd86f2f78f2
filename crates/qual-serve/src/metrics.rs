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
//!   statistics are monotone in every sample, so the truth lies between); rates carry the
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
    /// Largest accepted fraction of late sends (the gate); late reads, starved and
    /// preempted requests are counted against it too, as recorded signals only.
    pub max_disturbed_fraction: f64,
    /// A gated ms statistic is valid while its error bound is at most the larger of this
    /// (ms) and `tolerance_fraction` of its value.
    pub tolerance_ms: f64,
    /// Relative tolerance of gated statistics (rates: of the value; fractions: in points).
    pub tolerance_fraction: f64,
    /// Whether late sends make the run invalid: yes for a schedule (open loop); a closed
    /// loop has none to keep (the next send follows a completion), so its send lag is
    /// recorded, not gated.
    pub gate_late_sends: bool,
}

/// Default absolute tolerance of a gated ms statistic's error bound.
pub const DEFAULT_TOLERANCE_MS: f64 = 0.5;
/// Default relative tolerance of a gated statistic's error bound.
pub const DEFAULT_TOLERANCE_FRACTION: f64 = 0.02;

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
            tolerance_ms: DEFAULT_TOLERANCE_MS,
            tolerance_fraction: DEFAULT_TOLERANCE_FRACTION,
            gate_late_sends: true,
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
            tolerance_ms: f64::INFINITY,
            tolerance_fraction: f64::INFINITY,
            gate_late_sends: false,
        }
    }
}

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
    ("error_bound", "per content event: an interval holding its arrival (upper: the kernel receive timestamp of the newest segment its read consumed, else the read's return; lower: the latest of the previous stamped read's timestamp, the start of the latest recv that found the queue empty, the peeked first byte's timestamp, and the send; a point where every byte of the read carries one timestamp); each sample is reported at the midpoint of the interval its arrivals allow, each percentile and mean with the same statistic of the lower and of the upper ends; error = the larger distance from the reported value to either end; a gated statistic whose error exceeds max(tolerance_ms, tolerance_fraction x value) makes the run invalid"),
    ("read_lag_ms", "per content event stamped by the kernel: the time its read returned - the kernel's software receive timestamp (SO_TIMESTAMPNS) of the newest segment the read consumed; recorded, not gated (its effect is in the error bound)"),
    ("late_read_fraction", "content events of successful requests read more than max_read_lag_ms after the kernel received them / kernel-stamped content events"),
    ("coalesced_event_fraction", "content events of successful requests that shared one read with a later content event of the same request / content events; recorded, not gated (the error bound says what it cost)"),
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
    /// Where the true percentile lies, for distributions of arrival-bounded samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
}

/// A closed interval known to hold the true value of a statistic (`upper` null: unbounded
/// above, e.g. a decode rate whose TPOT may be 0).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Bound {
    /// Lower end.
    pub lower: f64,
    /// Upper end (`f64::INFINITY` serializes as null).
    #[serde(serialize_with = "finite_or_null")]
    pub upper: f64,
}

fn finite_or_null<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

impl Bound {
    /// A point (an exactly known value).
    pub fn point(v: f64) -> Bound {
        Bound { lower: v, upper: v }
    }

    /// The most `value` (a point inside the interval) can be off the truth.
    pub fn error(&self, value: f64) -> f64 {
        (value - self.lower).max(self.upper - value).max(0.0)
    }
}

/// One sample known only to lie in `[lower, upper]`, reported as `value` (inside).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoundedSample {
    /// Lower end.
    pub lower: f64,
    /// The reported value (the interval's midpoint for arrival intervals).
    pub value: f64,
    /// Upper end.
    pub upper: f64,
}

impl BoundedSample {
    /// An exactly known sample.
    pub fn exact(v: f64) -> BoundedSample {
        BoundedSample {
            lower: v,
            value: v,
            upper: v,
        }
    }
}

/// The centre of a finite bound (the value with the smallest largest error), else `value`.
pub fn centre(value: Option<f64>, bound: Option<Bound>) -> Option<f64> {
    match bound {
        Some(b) if b.upper.is_finite() && b.lower.is_finite() => Some((b.lower + b.upper) / 2.0),
        _ => value,
    }
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
    /// Where the true mean lies (bounded distributions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_bound: Option<Bound>,
    /// Where the true minimum lies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_bound: Option<Bound>,
    /// Where the true maximum lies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bound: Option<Bound>,
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
        samples.sort_unstable_by(|a, b| a.total_cmp(b));
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
                        bound: None,
                    }
                } else {
                    PercentileValue {
                        label,
                        value: Some(percentile_type7(&samples, p)),
                        reason: None,
                        bound: None,
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
            mean_bound: None,
            min_bound: None,
            max_bound: None,
        }
    }

    /// Summarises interval samples: each statistic with its bound, reported at the bound's
    /// centre (the value whose largest possible error is smallest); the mean is the mean of
    /// the samples' reported values (the centre of its bound for midpoint samples).
    ///
    /// Every statistic here (order statistics, type-7 interpolation between them, the mean)
    /// is non-decreasing in each sample, so the statistic of the lower ends bounds the true
    /// statistic from below and that of the upper ends from above, whatever the true samples
    /// inside their intervals are.
    pub fn bounded(samples: &[BoundedSample]) -> Distribution {
        let mut d = Distribution::of(samples.iter().map(|s| s.value).collect());
        if samples
            .iter()
            .all(|s| s.lower == s.value && s.upper == s.value)
        {
            // Every sample exact: each statistic is its own bound (no second and third sort).
            for p in &mut d.percentiles {
                p.bound = p.value.map(Bound::point);
            }
            d.mean_bound = d.mean.map(Bound::point);
            d.min_bound = d.min.map(Bound::point);
            d.max_bound = d.max.map(Bound::point);
            return d;
        }
        let lo = Distribution::of(samples.iter().map(|s| s.lower).collect());
        let hi = Distribution::of(samples.iter().map(|s| s.upper).collect());
        let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(lower), Some(upper)) => Some(Bound { lower, upper }),
            _ => None,
        };
        for ((p, l), h) in d
            .percentiles
            .iter_mut()
            .zip(&lo.percentiles)
            .zip(&hi.percentiles)
        {
            p.bound = pair(l.value, h.value);
            p.value = centre(p.value, p.bound);
        }
        d.mean_bound = pair(lo.mean, hi.mean);
        d.min_bound = pair(lo.min, hi.min);
        d.max_bound = pair(lo.max, hi.max);
        d.min = centre(d.min, d.min_bound);
        d.max = centre(d.max, d.max_bound);
        d
    }

    /// The bound of a statistic by its row suffix (`p50`, `mean`, `max`, …).
    pub fn bound_of(&self, label: &str) -> Option<Bound> {
        match label {
            "mean" => self.mean_bound,
            "min" => self.min_bound,
            "max" => self.max_bound,
            _ => self
                .percentiles
                .iter()
                .find(|p| p.label == label)
                .and_then(|p| p.bound),
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
    /// Content events of successful requests whose read was uniform (one kernel timestamp
    /// for all its bytes: a point interval, method `kernel_uniform`).
    pub exact_events: u64,
    /// The statistics whose bounds were held to the tolerance (metric row names).
    pub gated: Vec<String>,
    /// One `invalid run: …` reason per exceeded limit: late sends, and each gated statistic
    /// whose bound is wider than its tolerance (empty: the measurement is valid).
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
    if !schedule.valid && limits.gate_late_sends {
        violations.push(format!(
            "invalid run: {:.2}% of sends lagged their schedule by more than {} ms (limit {limit_pct}%; max {})",
            pct(schedule.late_fraction),
            limits.late_send_ms,
            fmt_ms(schedule.lag_ms.max)
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
        exact_events: ok.iter().map(|r| r.content_events_exact).sum(),
        gated: Vec::new(),
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

/// The arrival interval of content event `i` of `r`, in ns on the record's clock: the
/// stamp less its recorded width (none: a point).
fn event_interval(r: &RequestRecord, i: usize) -> (f64, f64) {
    let hi = r.content_event_ns[i];
    let lo = r.content_event_lower(i).unwrap_or(hi);
    (lo as f64, hi as f64)
}

/// Per-request samples, each with the interval the arrival intervals allow (ms).
#[derive(Clone, Debug, PartialEq)]
pub struct RequestSamples {
    /// Send to the first content event.
    pub ttft: BoundedSample,
    /// Send to the last content event.
    pub e2e: BoundedSample,
    /// Each gap between consecutive content events.
    pub itl: Vec<BoundedSample>,
    /// The largest gap.
    pub max_itl: Option<BoundedSample>,
}

/// The samples of one request sent at `send` with at least one content event (the one
/// definition `serve`, `bench` and `campaign` share).
pub fn request_samples(r: &RequestRecord, send: u64) -> RequestSamples {
    let send = send as f64;
    let ms_of = |ns: f64| ns / 1e6;
    let mid = |(lo, hi): (f64, f64)| (lo + hi) / 2.0;
    let n = r.content_event_ns.len();
    let iv: Vec<(f64, f64)> = (0..n).map(|i| event_interval(r, i)).collect();
    let since_send = |(lo, hi): (f64, f64)| BoundedSample {
        lower: ms_of((lo - send).max(0.0)),
        value: ms_of((mid((lo, hi)) - send).max(0.0)),
        upper: ms_of((hi - send).max(0.0)),
    };
    let itl: Vec<BoundedSample> = iv
        .windows(2)
        .map(|w| BoundedSample {
            lower: ms_of((w[1].0 - w[0].1).max(0.0)),
            value: ms_of((mid(w[1]) - mid(w[0])).max(0.0)),
            upper: ms_of((w[1].1 - w[0].0).max(0.0)),
        })
        .collect();
    let max_itl = itl.iter().copied().reduce(|a, b| BoundedSample {
        lower: a.lower.max(b.lower),
        value: a.value.max(b.value),
        upper: a.upper.max(b.upper),
    });
    RequestSamples {
        ttft: since_send(iv[0]),
        e2e: since_send(iv[n - 1]),
        itl,
        max_itl,
    }
}

/// TPOT of one request from its first and last arrival intervals (`tokens` ≥ 2).
pub fn tpot_sample(r: &RequestRecord, tokens: u64) -> BoundedSample {
    let n = r.content_event_ns.len();
    let (f_lo, f_hi) = event_interval(r, 0);
    let (l_lo, l_hi) = event_interval(r, n - 1);
    let per = |ns: f64| (ns.max(0.0) / 1e6) / (tokens - 1) as f64;
    BoundedSample {
        lower: per(l_lo - f_hi),
        value: per((l_lo + l_hi) / 2.0 - (f_lo + f_hi) / 2.0),
        upper: per(l_hi - f_lo),
    }
}

/// Decode rate (tokens/s) of a TPOT sample; unbounded above where TPOT may be 0.
fn decode_sample(tp: BoundedSample) -> BoundedSample {
    let rate = |ms: f64| {
        if ms > 0.0 {
            1000.0 / ms
        } else {
            f64::INFINITY
        }
    };
    BoundedSample {
        lower: rate(tp.upper),
        value: rate(tp.value),
        upper: rate(tp.lower),
    }
}

/// Whether a request meets every SLO, for its reported values and at the two ends of what
/// its intervals allow: (`meets_reported`, `meets_surely`, `meets_possibly`).
fn slo_verdicts(slo: &Slo, s: &RequestSamples) -> (bool, bool, bool) {
    let check = |pick: fn(&BoundedSample) -> f64| {
        slo.ttft_ms.is_none_or(|b| pick(&s.ttft) <= b)
            && slo.e2e_ms.is_none_or(|b| pick(&s.e2e) <= b)
            && slo
                .itl_ms
                .is_none_or(|b| s.max_itl.as_ref().is_none_or(|g| pick(g) <= b))
    };
    (check(|x| x.value), check(|x| x.upper), check(|x| x.lower))
}

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
    // (requests, tokens) meeting every SLO: reported, surely, possibly.
    let mut good = [(0usize, 0u64); 3];
    for r in &ok {
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
        let verdicts = slo_verdicts(&slo, &s);
        for (g, met) in good.iter_mut().zip([verdicts.0, verdicts.1, verdicts.2]) {
            if met {
                g.0 += 1;
                g.1 += tokens;
            }
        }
    }
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
    let per_s = |x: f64| window.map(|w| x / w);
    // x per second over a window in [window_lower, window]: in [x / window, x / window_lower].
    let rate_bound = |x: f64, x_lo: f64, x_hi: f64| match (window, window_lower) {
        (Some(w), Some(wl)) if wl > 0.0 => Some(Bound {
            lower: x_lo.min(x) / w,
            upper: x_hi.max(x) / wl,
        }),
        _ => None,
    };
    let schedule = schedule_lag(&measured, limits);
    let validity = validity(&measured, &ok, &schedule, limits);
    let declared = slo.is_declared();
    let n_measured = measured.len();
    let attainment = |i: usize| good[i].0 as f64 / n_measured.max(1) as f64;
    let bounds = StatBounds {
        output_tokens_per_second: rate_bound(
            tokens_total as f64,
            tokens_total as f64,
            tokens_total as f64,
        ),
        requests_per_second: rate_bound(ok.len() as f64, ok.len() as f64, ok.len() as f64),
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
    };
    let mut m = ServingMetrics {
        measured_requests: n_measured,
        succeeded_requests: ok.len(),
        failed_requests: n_measured - ok.len(),
        output_tokens_total: tokens_total,
        client_counted_requests: client_counted,
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
        ttft_ms: Distribution::bounded(&ttft),
        e2e_ms: Distribution::bounded(&e2e),
        itl_ms: Distribution::bounded(&itl),
        tpot_ms: Distribution::bounded(&tpot),
        decode_tokens_per_second: Distribution::bounded(&decode),
        schedule,
        validity,
        bounds,
    };
    let default_gated: Vec<String> = DEFAULT_GATED
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
        .collect();
    let names = gated.unwrap_or(&default_gated);
    let wide = gate_bounds(&m, names, limits);
    m.validity.violations.extend(wide);
    m.validity.gated = names.to_vec();
    m
}

/// Schedule-lag statistics of the measured sends.
fn schedule_lag(measured: &[&RequestRecord], limits: ValidityLimits) -> ScheduleLag {
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
    ScheduleLag {
        lag_ms: Distribution::of(lags.iter().map(|&l| ms(l)).collect()),
        late_sends: late,
        late_fraction,
        valid: late_fraction <= limits.max_disturbed_fraction,
    }
}

/// Bounds of the scalar statistics (the distributions carry their own).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StatBounds {
    /// Of `output_tokens_per_second`.
    pub output_tokens_per_second: Option<Bound>,
    /// Of `requests_per_second`.
    pub requests_per_second: Option<Bound>,
    /// Of `goodput_requests_per_second`.
    pub goodput_requests_per_second: Option<Bound>,
    /// Of `goodput_output_tokens_per_second`.
    pub goodput_output_tokens_per_second: Option<Bound>,
    /// Of `slo_attainment`.
    pub slo_attainment: Option<Bound>,
}

/// The tolerance a statistic's error is held to: for ms statistics the larger of the
/// absolute and the relative tolerance; for rates the relative one; for fractions (SLO
/// attainment) the relative tolerance as fraction points.
pub fn tolerance(unit: &str, value: f64, limits: ValidityLimits) -> f64 {
    match unit {
        "ms" => limits
            .tolerance_ms
            .max(limits.tolerance_fraction * value.abs()),
        "fraction" => limits.tolerance_fraction,
        _ => limits.tolerance_fraction * value.abs(),
    }
}

/// One `invalid run: …` reason per gated statistic whose bound is wider than its tolerance.
fn gate_bounds(m: &ServingMetrics, names: &[String], limits: ValidityLimits) -> Vec<String> {
    let rows = m.rows();
    let mut out = Vec::new();
    for name in names {
        let Some(row) = rows.iter().find(|r| &r.name == name) else {
            continue;
        };
        let (Some(v), Some(b)) = (row.value, row.bound) else {
            continue;
        };
        let err = b.error(v);
        let tol = tolerance(row.unit, v, limits);
        if err > tol {
            out.push(format!(
                "invalid run: {name} = {v:.3} {unit} is known only to ±{err:.3} {unit} (true value in [{lo:.3}, {hi}]; tolerance {tol:.3} {unit}): content events arrived while the load generator could not read them; run on a less loaded host, lower the concurrency, or raise --tolerance-ms/--tolerance-fraction",
                unit = row.unit,
                lo = b.lower,
                hi = if b.upper.is_finite() {
                    format!("{:.3}", b.upper)
                } else {
                    "inf".into()
                },
            ));
        }
    }
    out
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
    /// Where the true value lies, for statistics of arrival-bounded samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
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
                bound: None,
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
                bound: d.mean_bound,
            });
            rows.push(MetricRow {
                name: format!("{base}.max"),
                value: d.max,
                null_reason: d.max.is_none().then(|| "no samples".to_string()),
                unit,
                aggregation: "max".into(),
                lower_is_better: lower,
                bound: d.max_bound,
            });
            for p in &d.percentiles {
                rows.push(MetricRow {
                    name: format!("{base}.{}", p.label),
                    value: p.value,
                    null_reason: p.reason.clone(),
                    unit,
                    aggregation: p.label.to_string(),
                    lower_is_better: lower,
                    bound: p.bound,
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
        let b = &self.bounds;
        for (name, bound) in [
            ("output_tokens_per_second", b.output_tokens_per_second),
            ("requests_per_second", b.requests_per_second),
            ("goodput_requests_per_second", b.goodput_requests_per_second),
            (
                "goodput_output_tokens_per_second",
                b.goodput_output_tokens_per_second,
            ),
            ("slo_attainment", b.slo_attainment),
        ] {
            if let Some(row) = rows.iter_mut().find(|r| r.name == name) {
                row.bound = bound.filter(|_| row.value.is_some());
            }
        }
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

    /// Read lag, coalescing and scheduler counters are recorded, never gated: with exact
    /// arrival intervals the numbers are right whatever the reader went through.
    #[test]
    fn disturbance_signals_are_recorded_not_gated() {
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
        let mut recs: Vec<RequestRecord> = (0..10).map(|i| kernel(i, &[1000; 4], 4)).collect();
        recs[3] = kernel(3, &[1000, 25 * MS, 1000, 1000], 4);
        for r in &mut recs[5..] {
            r.clock_source = Some(ClockSource::UserRead);
            r.content_read_lag_ns.clear();
        }
        let v = compute(&recs, Slo::default(), limits).validity;
        assert!(v.violations.is_empty(), "{:?}", v.violations);
        assert_eq!(v.late_reads, 1);
        assert_eq!(v.coalesced_events, 40);
        assert_eq!(v.starved_requests, 5);
        assert_eq!(v.preempted_requests, 5);
        assert_eq!(v.gated, DEFAULT_GATED.map(String::from).to_vec());
    }

    /// A record whose content events arrived in `[lower, upper]` each (ns).
    fn bounded_rec(index: u64, send: u64, events: &[(u64, u64)], tokens: u64) -> RequestRecord {
        let upper: Vec<u64> = events.iter().map(|e| e.1).collect();
        let end = upper.last().copied().unwrap_or(send) + MS;
        let mut r = rec(index, send, &upper, end, tokens);
        r.content_event_width_ns = events.iter().map(|e| e.1 - e.0).collect();
        r.end_lower_ns = Some(end);
        r
    }

    /// Interval arithmetic on constructed timelines: exact events give zero-width bounds;
    /// two events coalesced into one read share an interval; a late read widens only what
    /// it delivered.
    #[test]
    fn interval_arithmetic_on_constructed_timelines() {
        // Exact: events at 10, 15, 20 ms after a send at 0, each a point.
        let exact = bounded_rec(
            0,
            0,
            &[(10 * MS, 10 * MS), (15 * MS, 15 * MS), (20 * MS, 20 * MS)],
            3,
        );
        let m = compute(&[exact], Slo::default(), ValidityLimits::default());
        assert_eq!(m.ttft_ms.get("p50"), Some(10.0));
        assert_eq!(m.ttft_ms.bound_of("p50"), Some(Bound::point(10.0)));
        assert_eq!(m.itl_ms.bound_of("p50"), Some(Bound::point(5.0)));
        assert_eq!(m.tpot_ms.bound_of("p50"), Some(Bound::point(5.0)));
        assert!(m.validity.violations.is_empty());
        // Coalesced: the first two events were delivered by one read at 15 ms whose lower
        // end is 9 ms (the queue was last seen empty then); the third was exact at 20 ms.
        let co = bounded_rec(
            1,
            0,
            &[(9 * MS, 15 * MS), (9 * MS, 15 * MS), (20 * MS, 20 * MS)],
            3,
        );
        let m = compute(&[co], Slo::default(), ValidityLimits::default());
        // TTFT in [9, 15], reported at the midpoint 12, error 3 ms.
        let b = m.ttft_ms.bound_of("p50").unwrap();
        assert_eq!((b.lower, b.upper), (9.0, 15.0));
        assert_eq!(m.ttft_ms.get("p50"), Some(12.0));
        assert_eq!(b.error(12.0), 3.0);
        // ITLs: between the coalesced pair [0, 6], then [5, 11]: pooled p50 in [2.5, 8.5],
        // reported at its centre 5.5.
        let b = m.itl_ms.bound_of("p50").unwrap();
        assert_eq!((b.lower, b.upper), (2.5, 8.5));
        assert_eq!(m.itl_ms.get("p50"), Some(5.5));
        // E2E exact at 20 ms.
        assert_eq!(m.e2e_ms.bound_of("p50"), Some(Bound::point(20.0)));
        // The gate names the statistic and its bound: TTFT p50 ±3 ms > 0.5 ms.
        let v = &m.validity.violations;
        assert!(
            v.iter().any(|r| r
                .starts_with("invalid run: ttft_ms.p50 = 12.000 ms is known only to ±3.000 ms")),
            "{v:?}"
        );
        // A wider declared tolerance accepts it; a statistic not gated is never refused.
        let wide = ValidityLimits {
            tolerance_ms: 3.5,
            ..ValidityLimits::default()
        };
        let co = bounded_rec(
            1,
            0,
            &[(9 * MS, 15 * MS), (9 * MS, 15 * MS), (20 * MS, 20 * MS)],
            3,
        );
        let v = compute(std::slice::from_ref(&co), Slo::default(), wide)
            .validity
            .violations;
        assert!(v.is_empty(), "{v:?}");
        let only_e2e = ["e2e_ms.p50".to_string()];
        let m = compute_gated(
            &[co],
            Slo::default(),
            ValidityLimits::default(),
            Some(&only_e2e),
        );
        assert!(
            m.validity.violations.is_empty(),
            "{:?}",
            m.validity.violations
        );
        // SLO attainment: TTFT ≤ 12 ms is possibly but not surely met for [9, 15].
        let co = bounded_rec(1, 0, &[(9 * MS, 15 * MS), (20 * MS, 20 * MS)], 2);
        let slo = Slo {
            ttft_ms: Some(12.5),
            itl_ms: None,
            e2e_ms: None,
        };
        let m = compute(&[co], slo, ValidityLimits::default());
        assert_eq!(m.slo_attainment, Some(1.0));
        assert_eq!(
            m.bounds.slo_attainment,
            Some(Bound {
                lower: 0.0,
                upper: 1.0
            })
        );
        assert!(m
            .validity
            .violations
            .iter()
            .any(|r| r.contains("slo_attainment")));
    }

    /// A late send stays a refusal in open loop and is recorded in a closed loop.
    #[test]
    fn late_sends_are_gated_only_where_a_schedule_was_declared() {
        let mut r = bounded_rec(0, 5 * MS, &[(10 * MS, 10 * MS)], 1);
        r.scheduled_ns = 0;
        let open = compute(&[r.clone()], Slo::default(), ValidityLimits::default());
        assert!(open.validity.violations[0].contains("sends lagged their schedule"));
        let closed = ValidityLimits {
            gate_late_sends: false,
            ..ValidityLimits::default()
        };
        let m = compute(&[r], Slo::default(), closed);
        assert!(m.validity.violations.is_empty());
        assert!(!m.schedule.valid);
    }

    proptest::proptest! {
        /// Whatever the true arrivals inside their intervals, every bounded statistic of the
        /// true samples lies inside the reported bound, and the reported value does too.
        #[test]
        fn the_true_value_lies_inside_the_bound(
            reqs in proptest::collection::vec(
                (0u64..5_000_000, proptest::collection::vec((1u64..8_000_000, 0u64..6_000_000, 0u64..=1_000), 1..12)),
                1..40,
            )
        ) {
            let mut records = Vec::new();
            let mut truths: Vec<(u64, Vec<u64>)> = Vec::new();
            for (i, (send, evs)) in reqs.iter().enumerate() {
                // True arrivals: increasing; each interval [true - a, true + b] clipped to
                // stay ordered (lower ends and upper ends non-decreasing).
                let mut t = *send;
                let (mut lo_prev, mut hi_prev) = (*send, *send);
                let mut ivs = Vec::new();
                let mut truth = Vec::new();
                for (gap, width, frac) in evs {
                    t += gap;
                    let lo = t.saturating_sub(width * frac / 1_000).max(lo_prev).max(*send);
                    let hi = (t + width * (1_000 - frac) / 1_000).max(hi_prev);
                    ivs.push((lo, hi));
                    truth.push(t);
                    lo_prev = lo;
                    hi_prev = hi;
                }
                records.push(bounded_rec(i as u64, *send, &ivs, evs.len() as u64));
                truths.push((*send, truth));
            }
            let m = compute(&records, Slo::default(), ValidityLimits::unlimited());
            let exact: Vec<RequestRecord> = truths
                .iter()
                .enumerate()
                .map(|(i, (send, t))| {
                    bounded_rec(i as u64, *send, &t.iter().map(|&x| (x, x)).collect::<Vec<_>>(), t.len() as u64)
                })
                .collect();
            let truth = compute(&exact, Slo::default(), ValidityLimits::unlimited());
            let eps = 1e-9;
            for (d, t) in [
                (&m.ttft_ms, &truth.ttft_ms),
                (&m.e2e_ms, &truth.e2e_ms),
                (&m.itl_ms, &truth.itl_ms),
                (&m.tpot_ms, &truth.tpot_ms),
            ] {
                for label in ["p50", "p90", "mean", "min", "max"] {
                    let tv = match label {
                        "mean" => t.mean,
                        "min" => t.min,
                        "max" => t.max,
                        l => t.get(l),
                    };
                    let (Some(tv), Some(b)) = (tv, d.bound_of(label)) else { continue };
                    proptest::prop_assert!(b.lower - eps <= tv && tv <= b.upper + eps, "{label}: {tv} outside {b:?}");
                    let v = match label {
                        "mean" => d.mean,
                        "min" => d.min,
                        "max" => d.max,
                        l => d.get(l),
                    }.unwrap();
                    proptest::prop_assert!(b.lower - eps <= v && v <= b.upper + eps, "{label}: reported {v} outside {b:?}");
                }
            }
        }
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
