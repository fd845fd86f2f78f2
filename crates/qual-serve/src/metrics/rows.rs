//! The flattening of [`ServingMetrics`] into case-result metric rows: every distribution's
//! mean, max and percentiles, the rates, counts and validity signals, with the rates' bounds.

use super::*;

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
        self.distribution_rows(&mut rows);
        self.rate_rows(&mut rows);
        self.count_rows(&mut rows);
        self.validity_rows(&mut rows);
        self.bound_rates(&mut rows);
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }

    /// The latency, decode-rate and schedule-lag distributions.
    fn distribution_rows(&self, rows: &mut Vec<MetricRow>) {
        dist(rows, "ttft_ms", &self.ttft_ms, "ms", true);
        dist(rows, "e2e_ms", &self.e2e_ms, "ms", true);
        dist(rows, "itl_ms", &self.itl_ms, "ms", true);
        dist(rows, "tpot_ms", &self.tpot_ms, "ms", true);
        dist(
            rows,
            "decode_tokens_per_second",
            &self.decode_tokens_per_second,
            "tokens/s",
            false,
        );
        dist(rows, "schedule_lag_ms", &self.schedule.lag_ms, "ms", true);
    }

    /// The throughputs, goodputs and SLO attainment (null with the reason there is none).
    fn rate_rows(&self, rows: &mut Vec<MetricRow>) {
        let no_window = "no request window: no successful measured request";
        scalar(
            rows,
            "output_tokens_per_second",
            self.output_tokens_per_second,
            no_window,
            "tokens/s",
            "rate",
            false,
        );
        scalar(
            rows,
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
            rows,
            "goodput_requests_per_second",
            self.goodput_requests_per_second,
            no_slo,
            "requests/s",
            "rate",
            false,
        );
        scalar(
            rows,
            "goodput_output_tokens_per_second",
            self.goodput_output_tokens_per_second,
            no_slo,
            "tokens/s",
            "rate",
            false,
        );
        scalar(
            rows,
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
    }

    /// The request, token and event counts and the late-send fraction.
    fn count_rows(&self, rows: &mut Vec<MetricRow>) {
        scalar(
            rows,
            "requests_measured",
            Some(self.measured_requests as f64),
            "",
            "count",
            "count",
            false,
        );
        scalar(
            rows,
            "requests_succeeded",
            Some(self.succeeded_requests as f64),
            "",
            "count",
            "count",
            false,
        );
        scalar(
            rows,
            "requests_failed",
            Some(self.failed_requests as f64),
            "",
            "count",
            "count",
            true,
        );
        scalar(
            rows,
            "output_tokens_total",
            Some(self.output_tokens_total as f64),
            "",
            "tokens",
            "sum",
            false,
        );
        scalar(
            rows,
            "content_events_total",
            Some(self.content_events_total as f64),
            "",
            "count",
            "sum",
            false,
        );
        scalar(
            rows,
            "schedule_late_fraction",
            Some(self.schedule.late_fraction),
            "",
            "fraction",
            "ratio",
            true,
        );
    }

    /// The recorded validity signals: read lag, run-queue wait, involuntary switches, their
    /// fractions, and the share of kernel-stamped requests.
    fn validity_rows(&self, rows: &mut Vec<MetricRow>) {
        let v = &self.validity;
        dist(rows, "read_lag_ms", &v.read_lag_ms, "ms", true);
        dist(rows, "run_queue_wait_ms", &v.run_queue_wait_ms, "ms", true);
        dist(
            rows,
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
            scalar(rows, name, Some(value), "", "fraction", "ratio", true);
        }
        let clocked = v.kernel_clock_requests + v.user_clock_requests;
        scalar(
            rows,
            "kernel_clock_request_fraction",
            (clocked > 0).then(|| fraction(v.kernel_clock_requests, clocked)),
            "no successful measured request",
            "fraction",
            "ratio",
            false,
        );
    }

    /// The rates' and SLO attainment's bounds, on the rows that have a value.
    fn bound_rates(&self, rows: &mut [MetricRow]) {
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
    }
}

/// One scalar row (null with `reason` when there is no value).
fn scalar(
    rows: &mut Vec<MetricRow>,
    name: &str,
    value: Option<f64>,
    reason: &str,
    unit: &'static str,
    agg: &str,
    lower: bool,
) {
    rows.push(MetricRow {
        name: name.to_string(),
        value,
        null_reason: value.is_none().then(|| reason.to_string()),
        unit,
        aggregation: agg.to_string(),
        lower_is_better: lower,
        bound: None,
    });
}

/// A distribution's rows: `<base>.mean`, `<base>.max` and one per percentile.
fn dist(rows: &mut Vec<MetricRow>, base: &str, d: &Distribution, unit: &'static str, lower: bool) {
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
}
