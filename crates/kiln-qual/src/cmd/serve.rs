//! `kiln-qual serve` and `kiln-qual mock-server`: argument parsing, the progress bar and the
//! final metrics table. Every rule lives in `qual-serve`.
//!
//! Exit codes (the one table, `crate::exit`): `serve` 0 when the case passed, 1 when it failed
//! (the case result is written and says why), 2 for usage errors, 7 when the case result or
//! evidence could not be written. `mock-server` 0 after a
//! clean SIGTERM/SIGINT shutdown, 1 when it cannot bind or serve.

use crate::exit;
use crate::output;
use crate::output::{err, errln, esc, esc_path, outln};
use clap::Args;
use qual_serve::case::{self, CaseStatus, ServeOptions};
use qual_serve::client::StreamRules;
use qual_serve::kiln_launch::BaseUrl;
use qual_serve::load::{Arrival, ProgressSink};
use qual_serve::metrics::{MetricRow, Slo, ValidityLimits};
use qual_serve::mock::MockConfig;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::args::{count, cpu, f64_in, ms_in, seconds_in};

/// Longest injected delay or SLO bound, in ms (one day).
pub const MAX_MS: f64 = 86_400_000.0;

/// Open-loop arrival process.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrivalKind {
    /// Evenly spaced sends.
    Constant,
    /// Exponentially distributed gaps.
    Poisson,
    /// Gamma-distributed gaps (`--gamma-shape`: below 1 bursty, 1 Poisson).
    Gamma,
}

/// Arguments of `kiln-qual serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Launch recipe: `kiln-qual.serve-launch.v1`, or Kiln's
    /// `kiln.serving-benchmark-server-launch.v1` (then `--base-url` is required).
    #[arg(value_parser = super::args::Path, long, value_name = "RECIPE.json")]
    pub launch: PathBuf,
    /// Server URL for a `kiln.serving-benchmark-server-launch.v1` recipe (which has no port):
    /// origin-only loopback, `http://127.0.0.1|localhost|[::1][:PORT][/]`, port 80 by
    /// default. Refused for `kiln-qual.serve-launch.v1` recipes, which declare their port.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<BaseUrl>,
    /// Request corpus (JSONL, one strict request object per line).
    #[arg(value_parser = super::args::Path, long, value_name = "CORPUS.jsonl")]
    pub corpus: PathBuf,
    /// Case-result path (default: `$KILN_QUALIFICATION_CASE_RESULT`); the evidence is
    /// written next to it as `<stem>.serve-evidence.json`.
    #[arg(value_parser = super::args::Path, long, value_name = "PATH")]
    pub result: Option<PathBuf>,
    /// Case id (default: the launch recipe's id).
    #[arg(long)]
    pub case_id: Option<String>,
    /// Config object echoed as the case result's `effective_config` (must equal the workload
    /// variant's `effective_config`).
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub effective_config: String,
    /// Seed of the request order (and of Poisson arrivals).
    #[arg(long)]
    pub seed: u64,
    /// Warmup requests, excluded from every metric (0..=1000000).
    #[arg(long, default_value_t = 1, value_parser = count::<usize>(0..=1_000_000))]
    pub warmup: usize,
    /// Measured requests (default: the number of corpus entries; 1..=10000000).
    #[arg(long, value_parser = count::<usize>(1..=10_000_000))]
    pub requests: Option<usize>,
    /// Closed loop with this many outstanding requests (default 1; 1..=65536).
    #[arg(long, conflicts_with = "rate", value_parser = count::<usize>(1..=65_536))]
    pub concurrency: Option<usize>,
    /// Open loop at this many requests per second (0.001..=1000000).
    #[arg(long, value_parser = f64_in(0.001..=1e6))]
    pub rate: Option<f64>,
    /// Failed measured requests tolerated before the case fails.
    #[arg(long, default_value_t = 0, value_parser = count::<usize>(0..=10_000_000))]
    pub max_failed_requests: usize,
    /// Emit exactly these metrics (repeatable; default: every metric with a value). A selected
    /// metric without a value fails the case.
    #[arg(long = "metric", value_name = "NAME")]
    pub metrics: Vec<String>,
    /// Model id to request (default: the first id served by /v1/models).
    #[arg(long)]
    pub model: Option<String>,
    /// Directory substituted for `${model_path}` in the launch recipe (a workload passes the
    /// runner's `${model_path}` here). Refused when the recipe does not use it.
    #[arg(value_parser = super::args::Path, long, value_name = "DIR")]
    pub model_path: Option<PathBuf>,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Also print the outcome as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Load options shared by `serve` and `bench` (one engine, one spelling of its flags).
#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Open-loop arrival process.
    #[arg(long, value_enum, default_value = "constant", requires = "rate")]
    pub arrival: ArrivalKind,
    /// Shape of `--arrival gamma`'s gaps (mean 1/rate, coefficient of variation
    /// 1/sqrt(shape)): 0.25 is bursty, 1 Poisson, 4 nearly even.
    #[arg(long, default_value = "1", value_parser = f64_in(0.001..=1000.0))]
    pub gamma_shape: f64,
    /// Open-loop bound on outstanding requests (bench: sessions); later sends lag, none is
    /// dropped (1..=65536).
    #[arg(long, default_value_t = 1024, value_parser = count::<usize>(1..=65_536))]
    pub max_in_flight: usize,
    /// Per-request deadline in seconds (0.001..=86400).
    #[arg(long, default_value = "600", value_parser = seconds_in(0.001..=86_400.0))]
    pub request_timeout_seconds: f64,
    /// Goodput SLO: TTFT bound in ms.
    #[arg(long, value_parser = f64_in(0.001..=MAX_MS))]
    pub slo_ttft_ms: Option<f64>,
    /// Goodput SLO: bound on each request's largest ITL, in ms.
    #[arg(long, value_parser = f64_in(0.001..=MAX_MS))]
    pub slo_itl_ms: Option<f64>,
    /// Goodput SLO: E2E bound in ms.
    #[arg(long, value_parser = f64_in(0.001..=MAX_MS))]
    pub slo_e2e_ms: Option<f64>,
    /// Accept streams without a usage record (tokens then counted with bench's --tokenizer
    /// when given, else from content events).
    #[arg(long)]
    pub allow_missing_usage: bool,
    /// Accept streams that end without `data: [DONE]`.
    #[arg(long)]
    pub allow_missing_done: bool,
    /// Pin the load generator thread to this CPU (one that exists on this host).
    #[arg(long, value_parser = cpu)]
    pub pin_cpu: Option<usize>,
    /// Run the load generator thread under SCHED_FIFO so it reads as soon as data arrives on
    /// a loaded host (tighter timing bounds); needs CAP_SYS_NICE or RLIMIT_RTPRIO and is
    /// refused by name without it (never in a `kiln-qual run` case: the box drops every
    /// capability).
    #[arg(long)]
    pub realtime_reader: bool,
    #[command(flatten)]
    pub gate: GateArgs,
}

impl LoadArgs {
    /// The declared SLOs.
    pub fn slo(&self) -> Slo {
        Slo {
            ttft_ms: self.slo_ttft_ms,
            itl_ms: self.slo_itl_ms,
            e2e_ms: self.slo_e2e_ms,
        }
    }

    /// The stream acceptance switches.
    pub fn rules(&self) -> StreamRules {
        StreamRules {
            allow_missing_usage: self.allow_missing_usage,
            allow_missing_done: self.allow_missing_done,
        }
    }

    /// The per-request deadline.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.request_timeout_seconds)
    }
}

/// The measurement-validity gate's flags, shared by `serve` and `bench`.
#[derive(Args, Debug)]
pub struct GateArgs {
    /// Validity gate: a send lagging its schedule by more than this is late (ms).
    #[arg(long, default_value = "1", value_parser = f64_in(0.001..=MAX_MS))]
    pub late_send_ms: f64,
    /// Validity gate: a gated statistic (the `--metric` ones, else the medians and
    /// throughputs) is valid while its error bound is at most the larger of this and
    /// --tolerance-fraction of its value (ms).
    #[arg(long, default_value = "0.5", value_parser = f64_in(0.0..=MAX_MS))]
    pub tolerance_ms: f64,
    /// Validity gate: relative tolerance of a gated statistic's error bound (0..1; for
    /// fractions such as slo_attainment, in fraction points).
    #[arg(long, default_value = "0.02", value_parser = f64_in(0.0..=1.0))]
    pub tolerance_fraction: f64,
    /// Recorded signal (not a gate): a content event read more than this after the kernel
    /// received it counts as read late (ms).
    #[arg(long, default_value = "20", value_parser = f64_in(0.001..=MAX_MS))]
    pub max_read_lag_ms: f64,
    /// Recorded signal (not a gate): a request during which the load generator waited
    /// longer than this in the run queue counts as starved (ms).
    #[arg(long, default_value = "1", value_parser = f64_in(0.001..=MAX_MS))]
    pub max_run_queue_wait_ms: f64,
    /// Recorded signal (not a gate): a request during which the load generator was
    /// preempted more often than this counts as preempted.
    #[arg(long, default_value_t = 10)]
    pub max_involuntary_switches: u64,
    /// Validity gate: largest accepted fraction (0..1) of late sends.
    #[arg(long, default_value = "0.01", value_parser = f64_in(0.0..=1.0))]
    pub max_disturbed_fraction: f64,
}

impl GateArgs {
    /// The declared limits.
    pub fn limits(&self) -> ValidityLimits {
        ValidityLimits {
            late_send_ms: self.late_send_ms,
            max_read_lag_ms: self.max_read_lag_ms,
            max_run_queue_wait_ms: self.max_run_queue_wait_ms,
            max_involuntary_switches: self.max_involuntary_switches,
            max_disturbed_fraction: self.max_disturbed_fraction,
            tolerance_ms: self.tolerance_ms,
            tolerance_fraction: self.tolerance_fraction,
            gate_late_sends: true,
        }
    }
}

/// Arguments of `kiln-qual mock-server`.
#[derive(Args, Debug)]
pub struct MockServerArgs {
    /// Port on 127.0.0.1 (0 picks a free one; the bound port is printed on stdout).
    #[arg(long)]
    pub port: u16,
    /// Time from request to the first content event, in ms.
    #[arg(long, default_value = "0", value_parser = ms_in(0.0..=MAX_MS))]
    pub ttft_ms: Duration,
    /// Gap between content events, in ms.
    #[arg(long, default_value = "0", value_parser = ms_in(0.0..=MAX_MS))]
    pub itl_ms: Duration,
    /// Content events per response (default: the request's max_tokens; 0..=1048576, the
    /// most one request is served).
    #[arg(long, value_parser = count::<u64>(0..=qual_serve::mock::MAX_OUTPUT_TOKENS))]
    pub output_tokens: Option<u64>,
    /// Model id served by /v1/models.
    #[arg(long, default_value = "kiln-qual-mock")]
    pub model: String,
    /// Answer /v1/models with 503 until this many ms after start.
    #[arg(long, default_value = "0", value_parser = ms_in(0.0..=MAX_MS))]
    pub ready_after_ms: Duration,
    /// Never become ready.
    #[arg(long)]
    pub never_ready: bool,
    /// Injection: send an in-band error event after N content events.
    #[arg(long, value_name = "N")]
    pub error_event_after: Option<u64>,
    /// Injection: drop the connection after N content events.
    #[arg(long, value_name = "N")]
    pub drop_connection_after: Option<u64>,
    /// Injection: answer every N-th completion request with HTTP 500.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub http_500_every: Option<u64>,
    /// Injection: exit with code 3 when the N-th completion request arrives.
    #[arg(long, value_name = "N")]
    pub exit_after_requests: Option<u64>,
    /// Injection: keep running this many ms after SIGTERM.
    #[arg(long, default_value = "0", value_parser = ms_in(0.0..=MAX_MS))]
    pub slow_shutdown_ms: Duration,
    /// Injection: send --output-tokens content events even beyond the request's max_tokens.
    #[arg(long, requires = "output_tokens")]
    pub overrun_max_tokens: bool,
    /// Injection: ignore SIGTERM.
    #[arg(long)]
    pub ignore_sigterm: bool,
    /// Injection: start a child that ignores SIGTERM and outlives the server.
    #[arg(long)]
    pub leave_child: bool,
    /// Injection: start a child that escapes into its own session and outlives the server.
    #[arg(long)]
    pub leave_escaped_child: bool,
    /// Injection: start a plain sleeper (SIGTERM not ignored) in its own session, never
    /// stopped by the server.
    #[arg(long)]
    pub leave_escaped_sleeper: bool,
    /// Injection: echo the request's Authorization header as content and finish reason.
    #[arg(long)]
    pub echo_authorization: bool,
    /// Injection: claim N completion tokens in every usage record, whatever was sent.
    #[arg(long, value_name = "N")]
    pub usage_completion_tokens: Option<u64>,
    /// Injection: every N-th completion request (1: every one) sends no usage record, although
    /// the stream asked for one (`stream_options.include_usage`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub omit_usage_every: Option<u64>,
    /// Injection: every N-th completion request (1: every one) ends its stream without
    /// `data: [DONE]`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub omit_done_every: Option<u64>,
    /// Serve `GET /metrics` (Prometheus text): `kiln_qual_mock_requests_completed_total` and
    /// `kiln_qual_mock_completion_tokens_total`.
    #[arg(long)]
    pub metrics: bool,
    /// Injection: `/metrics` reports N fewer completed requests than were served.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "metrics")]
    pub metrics_undercount: u64,
    /// Answer completion requests without the header `NAME:VALUE` with HTTP 400 (a gateway
    /// that needs a tenant or routing header).
    #[arg(long, value_name = "NAME:VALUE", value_parser = super::args::header)]
    pub require_header: Option<(String, String)>,
}

fn fmt_value(v: Option<f64>, reason: Option<&str>) -> String {
    match v {
        Some(x) if x.abs() >= 1000.0 || x == x.trunc() => format!("{x:.1}"),
        Some(x) => format!("{x:.3}"),
        None => format!(
            "null ({})",
            reason
                .and_then(|r| r.split(':').next())
                .unwrap_or("no value")
        ),
    }
}

/// A percentile cell: the value, or `n<N` when the run had fewer samples than the percentile
/// needs (`N` from the reason `… needs at least N samples …`).
fn pct_cell(row: Option<&MetricRow>) -> String {
    match row {
        None => "-".to_owned(),
        Some(r) => match (r.value, r.null_reason.as_deref()) {
            (Some(v), _) => with_bound(fmt_value(r.value, None), v, r.bound),
            (None, Some(reason)) if reason.starts_with("insufficient_samples") => reason
                .split("at least ")
                .nth(1)
                .and_then(|t| t.split_whitespace().next())
                .map_or_else(|| "n<min".to_owned(), |n| format!("n<{n}")),
            (None, _) => "-".to_owned(),
        },
    }
}

/// `cell` followed by the value's error bound (`20.11 ±0.04`), when it has one.
fn with_bound(cell: String, value: f64, bound: Option<qual_serve::metrics::Bound>) -> String {
    match bound {
        Some(b) if b.upper.is_finite() => format!("{cell} ±{:.2}", b.error(value)),
        Some(_) => format!("{cell} ±inf"),
        None => cell,
    }
}

/// The default summary: request counts, TTFT/ITL/E2E p50/p90/p99, throughputs, SLO
/// attainment. A metric with too few samples for every percentile is shown once, as `n<N`.
fn compact_summary(rows: &[MetricRow]) -> String {
    let get = |name: &str| rows.iter().find(|r| r.name == name);
    let val = |name: &str| get(name).and_then(|r| r.value);
    let count = |name: &str| val(name).map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"));
    let mut s = format!(
        "requests: {} measured, {} succeeded, {} failed\n",
        count("requests_measured"),
        count("requests_succeeded"),
        count("requests_failed")
    );
    let mut table: Vec<Vec<String>> = Vec::new();
    for metric in ["ttft_ms", "itl_ms", "e2e_ms"] {
        let cells: Vec<String> = ["p50", "p90", "p99"]
            .iter()
            .map(|p| pct_cell(get(&format!("{metric}.{p}"))))
            .collect();
        if cells.iter().all(|c| c.starts_with("n<")) {
            table.push(vec![metric.to_owned(), cells[0].clone()]);
        } else {
            let mut row = vec![metric.to_owned()];
            row.extend(cells);
            table.push(row);
        }
    }
    s.push_str(&output::table(&["latency", "p50", "p90", "p99"], &table));
    let rate = |name: &str| match get(name).and_then(|r| r.value.map(|v| (v, r.bound))) {
        None => "-".to_owned(),
        Some((v, b)) => with_bound(format!("{v:.1}"), v, b),
    };
    s.push_str(&format!(
        "throughput: {} output tokens/s, {} requests/s; goodput {} requests/s\n",
        rate("output_tokens_per_second"),
        rate("requests_per_second"),
        rate("goodput_requests_per_second")
    ));
    if let Some(a) = val("slo_attainment") {
        let err = get("slo_attainment")
            .and_then(|r| r.bound)
            .map_or(0.0, |b| b.error(a));
        s.push_str(&format!(
            "slo attainment: {:.1}% ±{:.1}\n",
            a * 100.0,
            err * 100.0
        ));
    }
    s.push_str("(--verbose prints every metric; the evidence file holds the definitions)\n");
    s
}

/// Runs `kiln-qual serve`.
pub fn serve(a: ServeArgs) -> i32 {
    let Some(result) = a
        .result
        .or_else(|| std::env::var_os("KILN_QUALIFICATION_CASE_RESULT").map(PathBuf::from))
    else {
        errln!("kiln-qual: failed to find the case-result path: pass --result or set KILN_QUALIFICATION_CASE_RESULT");
        return exit::USAGE;
    };
    let effective_config = match qual_json::from_str(&a.effective_config) {
        Ok(v) => v,
        Err(e) => {
            errln!(
                "kiln-qual: failed to parse --effective-config: {}",
                esc(&e.to_string())
            );
            return exit::USAGE;
        }
    };
    let arrival = match (a.rate, a.load.arrival) {
        (Some(r), ArrivalKind::Constant) => Arrival::Constant { rate_per_second: r },
        (Some(r), ArrivalKind::Poisson) => Arrival::Poisson { rate_per_second: r },
        (Some(r), ArrivalKind::Gamma) => Arrival::Gamma {
            rate_per_second: r,
            shape: a.load.gamma_shape,
        },
        (None, _) => Arrival::ClosedLoop {
            concurrency: a.concurrency.unwrap_or(1),
        },
    };
    let opts = ServeOptions {
        launch: a.launch,
        corpus: a.corpus,
        result,
        case_id: a.case_id,
        effective_config,
        seed: a.seed,
        warmup: a.warmup,
        requests: a.requests,
        arrival,
        max_in_flight: a.load.max_in_flight,
        request_timeout: a.load.request_timeout(),
        slo: a.load.slo(),
        rules: a.load.rules(),
        max_failed_requests: a.max_failed_requests,
        metrics: (!a.metrics.is_empty()).then_some(a.metrics),
        model: a.model,
        model_path: a.model_path,
        pin_cpu: a.load.pin_cpu,
        realtime_reader: a.load.realtime_reader,
        validity: a.load.gate.limits(),
    };
    let bar = Arc::new(crate::progress::Bar::requests());
    let sink: Option<Arc<dyn ProgressSink>> =
        bar.is_shown().then(|| bar.clone() as Arc<dyn ProgressSink>);
    // SIGINT/SIGTERM stop the load and shut the owned server down (a failed case result is
    // still written) instead of killing this process and orphaning the server.
    if let Err(e) = qual_exec::signals::install_forwarding() {
        errln!("kiln-qual: failed to install signal forwarding: {e}");
        return exit::FAILED;
    }
    let outcome = case::run_with_base_url(&opts, a.base_url.as_ref(), sink);
    bar.finish();
    let out = match outcome {
        Ok(o) => o,
        Err(e) => {
            errln!(
                "kiln-qual: failed to run the serving case: {}",
                esc(&e.to_string())
            );
            // The one exit-code table (crate::exit): an unwritable result is 7, as in bench.
            return match e {
                case::ServeError::Write { .. } => exit::OUTPUT_FAILED,
                case::ServeError::Input(_) => exit::FAILED,
            };
        }
    };
    if out.rows.is_empty() || output::quiet() {
        // Nothing measured, or `-q`: the verdict lines below say enough.
    } else if !output::verbose() {
        err!("{}", compact_summary(&out.rows));
    } else {
        let rows: Vec<Vec<String>> = out
            .rows
            .iter()
            .map(|r| {
                let cell = fmt_value(r.value, r.null_reason.as_deref());
                vec![
                    r.name.clone(),
                    match r.value {
                        Some(v) => with_bound(cell, v, r.bound),
                        None => cell,
                    },
                    r.unit.to_string(),
                ]
            })
            .collect();
        err!("{}", output::table(&["metric", "value", "unit"], &rows));
    }
    match out.status {
        CaseStatus::Passed => errln!("kiln-qual: serving case passed"),
        CaseStatus::Failed => {
            for r in &out.reasons {
                errln!("kiln-qual: serving case failed: {}", esc(r));
            }
        }
    }
    errln!("kiln-qual: case result: {}", esc_path(&out.result_path));
    errln!("kiln-qual: evidence: {}", esc_path(&out.evidence_path));
    if a.json {
        output::print_json(&serde_json::json!({
            "status": out.status,
            "reasons": out.reasons,
            "result": out.result_path.display().to_string(),
            "evidence": out.evidence_path.display().to_string(),
        }));
    }
    match out.status {
        CaseStatus::Passed => exit::OK,
        CaseStatus::Failed => exit::FAILED,
    }
}

/// Runs `kiln-qual mock-server`.
pub fn mock_server(a: MockServerArgs) -> i32 {
    let cfg = MockConfig {
        port: a.port,
        ttft: a.ttft_ms,
        itl: a.itl_ms,
        output_tokens: a.output_tokens,
        overrun_max_tokens: a.overrun_max_tokens,
        model: a.model,
        ready_after: if a.never_ready {
            Duration::MAX
        } else {
            a.ready_after_ms
        },
        error_event_after: a.error_event_after,
        drop_connection_after: a.drop_connection_after,
        http_500_every: a.http_500_every,
        exit_after_requests: a.exit_after_requests,
        slow_shutdown: a.slow_shutdown_ms,
        ignore_sigterm: a.ignore_sigterm,
        leave_child: a.leave_child,
        leave_escaped_child: a.leave_escaped_child,
        leave_escaped_sleeper: a.leave_escaped_sleeper,
        echo_authorization: a.echo_authorization,
        usage_completion_tokens: a.usage_completion_tokens,
        omit_usage_every: a.omit_usage_every,
        omit_done_every: a.omit_done_every,
        require_header: a.require_header,
        metrics: a.metrics,
        metrics_undercount: a.metrics_undercount,
        ..MockConfig::default()
    };
    let r = qual_serve::mock::run_blocking(cfg, |port| {
        outln!("listening on 127.0.0.1:{port}");
        errln!("kiln-qual: mock-server listening on 127.0.0.1:{port}");
    });
    match r {
        Ok(()) => exit::OK,
        Err(e) => {
            errln!(
                "kiln-qual: failed to run the mock server: {}",
                esc(&e.to_string())
            );
            exit::FAILED
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, value: Option<f64>, reason: Option<&str>) -> MetricRow {
        MetricRow {
            name: name.into(),
            value,
            null_reason: reason.map(str::to_owned),
            unit: "ms",
            aggregation: "p50".into(),
            lower_is_better: true,
            bound: None,
        }
    }

    #[test]
    fn compact_summary_shows_missing_percentiles_once() {
        let few = Some("insufficient_samples: p50 needs at least 64 samples, have 3");
        let rows = vec![
            row("requests_measured", Some(3.0), None),
            row("requests_succeeded", Some(3.0), None),
            row("requests_failed", Some(0.0), None),
            row("ttft_ms.p50", None, few),
            row("ttft_ms.p90", None, few),
            row("ttft_ms.p99", None, few),
            row("itl_ms.p50", Some(5.0), None),
            row("itl_ms.p90", Some(5.25), None),
            row(
                "itl_ms.p99",
                None,
                Some("insufficient_samples: p99 needs at least 662 samples, have 90"),
            ),
            row("slo_attainment", Some(1.0), None),
        ];
        let s = compact_summary(&rows);
        assert!(
            s.contains("requests: 3 measured, 3 succeeded, 0 failed"),
            "{s}"
        );
        assert!(s.lines().any(|l| l == "ttft_ms  n<64"), "{s}");
        assert!(
            s.lines()
                .any(|l| l.starts_with("itl_ms") && l.ends_with("n<662")),
            "{s}"
        );
        assert!(!s.contains("null") && !s.contains("None"), "{s}");
        assert!(s.contains("slo attainment: 100.0%"), "{s}");
    }
}
