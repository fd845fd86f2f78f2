//! Measurement validity: the limits a run is held to, the schedule-lag statistics, the
//! recorded validity signals, and the gate that refuses a gated statistic whose bound is wider
//! than its tolerance.

use super::*;

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

pub(super) fn fraction(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

pub(super) fn fmt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.3} ms"))
}

pub(super) fn validity(
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

/// Schedule-lag statistics of the measured sends.
pub(super) fn schedule_lag(measured: &[&RequestRecord], limits: ValidityLimits) -> ScheduleLag {
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
pub(super) fn gate_bounds(
    m: &ServingMetrics,
    names: &[String],
    limits: ValidityLimits,
) -> Vec<String> {
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
