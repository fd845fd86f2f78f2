//! `kiln-qual bench` result documents (`kiln-qual.bench-result.v1`, written by `bench
//! --output`/`--json`) as report inputs: the strict typed view ([`BenchView`]) and its
//! sections in every format.
//!
//! Reading: `qual_documents` recognizes the document by its `schema` while collecting; this
//! module deserializes it into closed types (`deny_unknown_fields`) for every part a report
//! shows — the top level, each load point, each run, its distributions, failure groups, plot
//! data, the SLA search and the verdict — each point and each run on its own, so a bad
//! document is refused with every violation found, each at its JSON pointer. The parts a
//! report does not show (settings, workload, definitions, per-turn statistics, the time
//! series, telemetry) are carried as opaque JSON; of the serving metrics (qual-serve's, open
//! here) only the request counts and the window are read. A CDF is drawn from the run's
//! `plot` quantiles (the page says when those were taken over every k-th sample of a large
//! distribution); documents written before runs carried `plot` are drawn from their
//! percentiles, and the page says so.
//!
//! Rendering, per document: the verdict exactly as written (a report never judges), the SLA
//! search's bracket when there is one, one row per load point × run (stop, validity, counts,
//! throughput, latency percentiles), the failure reasons (count per kind with one example,
//! as bench prints them); in HTML also, for sweeps, throughput and latency percentiles
//! against concurrency or rate, and per load point the TTFT / ITL / E2E CDFs (one line per
//! run) and the request timeline of its first run (at most `qual_bench::plot::MAX_TIMELINE`
//! requests, evenly sampled above that, said under the chart). JUnit: one case per load
//! point × run ([`junit_suite`]); CSV: one tidy row per metric observation ([`csv`]).

use crate::html::{cdf_figure, figure, CdfSeries};
use crate::svg::{self, esc, Chart, Series};
use qual_json::Violation;
use serde::Deserialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// The schema (the document table's, pinned there to `qual_bench::run::RESULT_SCHEMA`).
pub const SCHEMA: &str = qual_documents::BENCH_RESULT_SCHEMA;

/// Most load points whose CDFs and timeline are drawn (the rest are counted).
pub const MAX_POINT_CHARTS: usize = 12;

/// Most runs drawn on one CDF chart.
const MAX_CDF_RUNS: usize = 4;

/// One bench result document.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchView {
    /// Where it was read.
    pub path: PathBuf,
    /// `tool` (`kiln-qual 0.x`).
    pub tool: String,
    /// Every load point, in the order run.
    pub points: Vec<PointDoc>,
    /// The SLA search, when the document has one.
    pub search: Option<SearchDoc>,
    /// The verdict (`None`: written before documents recorded one).
    pub verdict: Option<VerdictDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopDoc {
    #[allow(dead_code)]
    schema: String,
    tool: String,
    #[allow(dead_code)]
    config: Json,
    #[allow(dead_code)]
    workload: Json,
    points: Vec<Json>,
    search: Option<SearchDoc>,
    #[serde(default)]
    verdict: Option<VerdictDoc>,
    #[allow(dead_code)]
    definitions: Json,
}

/// A load point over its runs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointDoc {
    /// The load level.
    pub point: Level,
    /// `c=16`, `rate=5`, `trace*1`.
    pub label: String,
    /// Each run (read one by one, see [`read`]).
    #[serde(skip)]
    pub runs: Vec<RunDoc>,
    /// The runs as written (replaced by `runs` once read).
    #[serde(rename = "runs")]
    raw_runs: Vec<Json>,
    /// Mean and 95 % t-interval of each headline metric over the runs.
    pub intervals: BTreeMap<String, IntervalDoc>,
    /// Whether the point passes (the search's bar).
    pub passes: bool,
}

/// A load level.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum Level {
    /// Closed loop.
    Concurrency {
        /// Outstanding requests.
        concurrency: u64,
    },
    /// Open loop.
    Rate {
        /// Requests per second.
        rate_per_second: f64,
        /// Poisson gaps.
        poisson: bool,
        /// Gamma gaps of this shape.
        #[serde(default)]
        gamma_shape: Option<f64>,
    },
    /// Trace replay.
    Trace {
        /// Multiplies the trace's offsets.
        time_scale: f64,
    },
}

impl Level {
    /// The level as a number and the axis it is drawn on.
    pub fn axis(self) -> (f64, &'static str) {
        match self {
            Level::Concurrency { concurrency } => (concurrency as f64, "concurrency"),
            Level::Rate {
                rate_per_second, ..
            } => (rate_per_second, "rate (requests/s)"),
            Level::Trace { time_scale } => (time_scale, "trace time scale"),
        }
    }
}

/// A mean over repeats.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalDoc {
    /// Mean.
    pub mean: f64,
    /// Runs that had the metric.
    pub repeats: u64,
    /// Half width of the 95 % t-interval (null below 2 repeats).
    pub half_width: Option<f64>,
}

/// One run of a load point.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunDoc {
    /// Repeat index.
    pub repeat: u64,
    /// Why it stopped.
    pub stop: Stop,
    /// `false` when the validity gate refused the timing.
    pub valid: bool,
    /// The gate's reasons.
    pub invalid_reasons: Vec<String>,
    /// Headline numbers (null when undefined).
    pub headline: BTreeMap<String, Option<f64>>,
    /// Why a headline metric is null.
    pub undefined: BTreeMap<String, String>,
    /// Distributions at the requested percentiles.
    pub distributions: BTreeMap<String, SummaryDoc>,
    #[serde(rename = "turns")]
    _turns: Json,
    /// Failed measured requests grouped by kind, most frequent first.
    pub failures: Vec<FailureDoc>,
    #[serde(rename = "time_series")]
    _time_series: Json,
    /// Server-reported minus planned prompt tokens (null without either).
    pub prompt_token_mismatches: Option<u64>,
    /// The request counts of the serving metrics.
    pub metrics: Counts,
    #[serde(default, rename = "server_metrics")]
    _server_metrics: Option<Json>,
    #[serde(default, rename = "memory")]
    _memory: Option<Json>,
    /// Plot data (absent from documents written before it was recorded).
    #[serde(default)]
    pub plot: Option<PlotDoc>,
}

impl RunDoc {
    /// `completed`, `duration_elapsed`, `early_stop: …`, `interrupted (signal 2)`.
    pub fn stop_text(&self) -> String {
        match &self.stop {
            Stop::Completed => "completed".into(),
            Stop::DurationElapsed { seconds } => {
                format!("duration_elapsed ({} s)", crate::num(*seconds))
            }
            Stop::EarlyStop { reason } => format!("early_stop: {reason}"),
            Stop::Interrupted { signal } => format!("interrupted (signal {signal})"),
        }
    }

    fn headline(&self, key: &str) -> Option<f64> {
        self.headline.get(key).copied().flatten()
    }
}

/// Why a run stopped.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "stop", rename_all = "snake_case", deny_unknown_fields)]
pub enum Stop {
    /// Every planned request completed.
    Completed,
    /// The declared duration elapsed.
    DurationElapsed {
        /// The duration.
        seconds: f64,
    },
    /// An early-stop rule fired.
    EarlyStop {
        /// Which, with the observed value.
        reason: String,
    },
    /// SIGINT/SIGTERM.
    Interrupted {
        /// The signal.
        signal: i64,
    },
}

/// The counts of a run's serving metrics (qual-serve's document: open, only these read).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
pub struct Counts {
    /// Measured requests.
    pub measured_requests: u64,
    /// Of which succeeded.
    pub succeeded_requests: u64,
    /// Of which failed.
    pub failed_requests: u64,
    /// Request window (null without a successful request).
    pub window_seconds: Option<f64>,
}

/// One distribution.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryDoc {
    /// Samples.
    pub n: u64,
    /// Mean.
    pub mean: Option<f64>,
    /// Smallest.
    pub min: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// The requested percentiles.
    pub percentiles: Vec<PctDoc>,
    /// How pooled-gap bounds were established.
    #[serde(default)]
    pub bound_method: Option<String>,
}

impl SummaryDoc {
    /// The value at `label` (`p50`).
    pub fn get(&self, label: &str) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|p| p.label == label)
            .and_then(|p| p.value)
    }
}

/// One percentile.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PctDoc {
    /// `p50`, `p99.9`.
    pub label: String,
    /// The value.
    pub value: Option<f64>,
    /// Samples.
    pub n: u64,
    /// The documented minimum.
    pub min_samples: u64,
    /// `n < min_samples`.
    pub below_minimum: bool,
    /// Where the true percentile lies.
    #[serde(default)]
    pub bound: Option<BoundDoc>,
}

/// A percentile's bound (upper null: unbounded).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundDoc {
    /// Lower end.
    pub lower: f64,
    /// Upper end.
    pub upper: Option<f64>,
}

/// The failures of one kind.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureDoc {
    /// `missing_done`, `http_status_500`, …
    pub kind: String,
    /// Failed measured requests of this kind.
    pub count: u64,
    /// The first one's reason.
    pub example: String,
    /// Its `record.index`.
    pub example_index: u64,
    /// Its workload entry.
    pub example_corpus_id: String,
    /// The first failing requests' indices.
    pub request_indices: Vec<u64>,
}

/// What a report draws of a run.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlotDoc {
    /// Per distribution, the quantiles at 0, 0.01, …, 1.
    pub quantiles: BTreeMap<String, Vec<f64>>,
    /// Per distribution, how many samples its quantiles were taken over (every k-th of a
    /// large one).
    pub quantiles_from: BTreeMap<String, u64>,
    /// Measured requests in send order (evenly sampled when many).
    pub timeline: Vec<TimelineDoc>,
    /// Measured requests the timeline was drawn from.
    pub timeline_of: u64,
}

/// One request of a timeline (ms since the run's first measured send).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineDoc {
    /// `record.index`.
    pub index: u64,
    /// Sent.
    pub send_ms: f64,
    /// First content event.
    pub first_ms: Option<f64>,
    /// Last content event.
    pub last_ms: Option<f64>,
    /// Whether it succeeded.
    pub succeeded: bool,
}

/// The SLA search.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchDoc {
    /// Its settings.
    pub search: SearchSettings,
    /// The highest passing level (null: even the lowest failed).
    pub knee: Option<f64>,
    /// The lowest failing level above the knee (null: the highest passed).
    pub first_failing: Option<f64>,
    /// Why the search ended.
    pub conclusion: String,
}

/// The search's settings.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSettings {
    /// Lowest level tried.
    pub low: f64,
    /// Highest level tried.
    pub high: f64,
    /// Bracket width at which it stops.
    pub resolution: f64,
    /// Fraction of requests that must meet every SLO.
    pub min_attainment: f64,
}

/// The document's verdict.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum VerdictDoc {
    /// Passed.
    Passed,
    /// The server failed.
    ServerFailed {
        /// Which runs, and by how much.
        reasons: Vec<String>,
    },
    /// The measurement was refused.
    MeasurementRefused {
        /// Why.
        reason: String,
    },
}

impl BenchView {
    /// Whether the verdict is `passed`.
    pub fn passed(&self) -> bool {
        self.verdict == Some(VerdictDoc::Passed)
    }

    /// The verdict as written: `passed`, `server_failed: …; …`, `measurement_refused: …`.
    pub fn verdict_text(&self) -> String {
        match &self.verdict {
            None => "not recorded (a document written before bench recorded its verdict)".into(),
            Some(VerdictDoc::Passed) => "passed".into(),
            Some(VerdictDoc::ServerFailed { reasons }) => {
                format!("server_failed: {}", reasons.join("; "))
            }
            Some(VerdictDoc::MeasurementRefused { reason }) => {
                format!("measurement_refused: {reason}")
            }
        }
    }

    /// The verdict's status word.
    pub fn status(&self) -> &'static str {
        match &self.verdict {
            None => "not_recorded",
            Some(VerdictDoc::Passed) => "passed",
            Some(VerdictDoc::ServerFailed { .. }) => "server_failed",
            Some(VerdictDoc::MeasurementRefused { .. }) => "measurement_refused",
        }
    }

    fn name(&self) -> String {
        self.path.file_name().map_or_else(
            || self.path.to_string_lossy().into_owned(),
            |n| n.to_string_lossy().into_owned(),
        )
    }
}

fn violation(pointer: String, e: serde_json::Error) -> Violation {
    Violation::new(pointer, e.to_string())
}

/// Reads a bench result document already parsed strictly from `path`: the view, or every
/// violation found, each at its JSON pointer (`/points/1/runs/0`: serde's message naming the
/// member; the root's pointer is empty).
pub fn read(path: PathBuf, value: &qual_json::Value) -> Result<BenchView, Vec<Violation>> {
    let Some(doc) = value.to_serde() else {
        return Err(vec![Violation::new(
            "",
            "holds a number JSON tools cannot represent",
        )]);
    };
    let top: TopDoc = serde_json::from_value(doc).map_err(|e| vec![violation(String::new(), e)])?;
    let mut violations = Vec::new();
    let mut points = Vec::new();
    for (i, p) in top.points.into_iter().enumerate() {
        let mut point: PointDoc = match serde_json::from_value(p) {
            Ok(p) => p,
            Err(e) => {
                violations.push(violation(format!("/points/{i}"), e));
                continue;
            }
        };
        for (j, r) in std::mem::take(&mut point.raw_runs).into_iter().enumerate() {
            match serde_json::from_value::<RunDoc>(r) {
                Ok(r) => point.runs.push(r),
                Err(e) => violations.push(violation(format!("/points/{i}/runs/{j}"), e)),
            }
        }
        points.push(point);
    }
    if !violations.is_empty() {
        return Err(violations);
    }
    Ok(BenchView {
        path,
        tool: top.tool,
        points,
        search: top.search,
        verdict: top.verdict,
    })
}

/// `; 2 bench results (1 passed)` for a report's headline (empty without any).
pub(crate) fn headline(benches: &[BenchView]) -> String {
    if benches.is_empty() {
        return String::new();
    }
    let passed = benches.iter().filter(|b| b.passed()).count();
    format!(
        "; {} ({passed} passed)",
        crate::count(benches.len(), "bench result")
    )
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), crate::num)
}

/// `p50 / p99` of a distribution, ms.
fn p50_p99(r: &RunDoc, dist: &str) -> String {
    match r.distributions.get(dist) {
        Some(d) => format!("{} / {}", opt(d.get("p50")), opt(d.get("p99"))),
        None => "-".into(),
    }
}

fn search_text(s: &SearchDoc) -> String {
    format!(
        "SLA search over [{}, {}] (resolution {}, at least {} of requests within every SLO): knee {}, first failing {}; {}",
        crate::num(s.search.low),
        crate::num(s.search.high),
        crate::num(s.search.resolution),
        crate::num(s.search.min_attainment),
        s.knee.map_or_else(|| "none".into(), crate::num),
        s.first_failing.map_or_else(|| "none".into(), crate::num),
        s.conclusion
    )
}

fn failure_text(f: &FailureDoc) -> String {
    format!(
        "{} {}, e.g. request {} ({}): {}",
        f.count, f.kind, f.example_index, f.example_corpus_id, f.example
    )
}

fn validity_text(r: &RunDoc) -> String {
    if r.valid {
        "valid".into()
    } else {
        format!("refused: {}", r.invalid_reasons.join("; "))
    }
}

/// The columns of a run row: (heading, cell text).
fn run_cells(r: &RunDoc) -> [(&'static str, String); 9] {
    let m = &r.metrics;
    [
        ("stop", r.stop_text()),
        ("validity", validity_text(r)),
        (
            "measured / ok / failed",
            format!(
                "{} / {} / {}",
                m.measured_requests, m.succeeded_requests, m.failed_requests
            ),
        ),
        ("req/s", opt(r.headline("requests_per_second"))),
        ("tok/s", opt(r.headline("output_tokens_per_second"))),
        ("TTFT p50/p99 ms", p50_p99(r, "ttft_ms")),
        ("ITL p50/p99 ms", p50_p99(r, "itl_ms")),
        ("E2E p50/p99 ms", p50_p99(r, "e2e_ms")),
        ("SLO attainment", opt(r.headline("slo_attainment"))),
    ]
}

/// The Markdown section.
pub fn markdown(o: &mut String, benches: &[BenchView]) {
    if benches.is_empty() {
        return;
    }
    let md = crate::md;
    let _ = writeln!(o, "### Bench results\n");
    for b in benches {
        let _ = writeln!(
            o,
            "**{}** ({}): {}\n",
            md(&b.path.to_string_lossy()),
            md(&b.tool),
            if b.passed() {
                "✅ passed".to_owned()
            } else {
                format!("❌ **{}**", md(&b.verdict_text()))
            }
        );
        if let Some(s) = &b.search {
            let _ = writeln!(o, "{}\n", md(&search_text(s)));
        }
        let Some(first) = b.points.iter().flat_map(|p| &p.runs).next() else {
            o.push_str("No load point measured.\n\n");
            continue;
        };
        let heads: Vec<&str> = run_cells(first).iter().map(|c| c.0).collect();
        let _ = writeln!(
            o,
            "| point | run | {} |\n|{}",
            heads.join(" | "),
            " --- |".repeat(heads.len() + 2)
        );
        for p in &b.points {
            for r in &p.runs {
                let cells: Vec<String> = run_cells(r).iter().map(|c| md(&c.1)).collect();
                let _ = writeln!(
                    o,
                    "| {} | r{} | {} |",
                    md(&p.label),
                    r.repeat,
                    cells.join(" | ")
                );
            }
        }
        o.push('\n');
        for p in &b.points {
            for r in &p.runs {
                for f in &r.failures {
                    let _ = writeln!(
                        o,
                        "- {} r{} failed: {}",
                        md(&p.label),
                        r.repeat,
                        md(&failure_text(f))
                    );
                }
            }
        }
        if b.points
            .iter()
            .flat_map(|p| &p.runs)
            .any(|r| !r.failures.is_empty())
        {
            o.push('\n');
        }
    }
}

/// The HTML section.
pub fn html(o: &mut String, benches: &[BenchView], chart_id: &mut usize) {
    if benches.is_empty() {
        return;
    }
    o.push_str("<h2 id=\"bench\">Bench results</h2>\n<p>Each <code>kiln-qual bench</code> document as written: its verdict, one row per load point × run, and its plots.</p>\n");
    for b in benches {
        let _ = writeln!(
            o,
            "<h3><code>{}</code> <span class=\"{}\">{}</span></h3>\n<p>{} · {}</p>",
            esc(&b.name()),
            if b.passed() { "good" } else { "bad" },
            esc(b.status()),
            esc(&b.tool),
            esc(&b.path.to_string_lossy())
        );
        if !b.passed() {
            let _ = writeln!(
                o,
                "<p class=\"bad\">verdict: {}</p>",
                esc(&b.verdict_text())
            );
        }
        if let Some(s) = &b.search {
            let _ = writeln!(o, "<p>{}</p>", esc(&search_text(s)));
        }
        runs_table(o, b);
        failures_html(o, b);
        o.push_str("<div class=\"charts\">\n");
        sweep_charts(o, b, chart_id);
        for p in b.points.iter().take(MAX_POINT_CHARTS) {
            point_charts(o, p, chart_id);
        }
        o.push_str("</div>\n");
        if b.points.len() > MAX_POINT_CHARTS {
            let _ = writeln!(
                o,
                "<p>CDFs and timelines are drawn for the first {MAX_POINT_CHARTS} of {} load points.</p>",
                b.points.len()
            );
        }
    }
}

fn runs_table(o: &mut String, b: &BenchView) {
    let Some(first) = b.points.iter().flat_map(|p| &p.runs).next() else {
        o.push_str("<p>No load point measured.</p>\n");
        return;
    };
    o.push_str("<div class=\"wrap\"><table class=\"stack\"><thead><tr><th scope=\"col\">point</th><th scope=\"col\">run</th>");
    for (h, _) in run_cells(first) {
        let _ = write!(o, "<th scope=\"col\">{}</th>", esc(h));
    }
    o.push_str("</tr></thead><tbody>\n");
    for p in &b.points {
        for r in &p.runs {
            let bad = !r.valid || r.metrics.failed_requests > 0;
            let _ = write!(
                o,
                "<tr{}><td data-label=\"point\">{}</td><td data-label=\"run\" class=\"n\">r{}</td>",
                if bad { " class=\"failed\"" } else { "" },
                esc(&p.label),
                r.repeat
            );
            for (h, v) in run_cells(r) {
                let _ = write!(o, "<td data-label=\"{}\">{}</td>", esc(h), esc(&v));
            }
            o.push_str("</tr>\n");
        }
    }
    o.push_str("</tbody></table></div>\n");
}

fn failures_html(o: &mut String, b: &BenchView) {
    let rows: Vec<String> = b
        .points
        .iter()
        .flat_map(|p| {
            p.runs.iter().flat_map(move |r| {
                r.failures
                    .iter()
                    .map(move |f| format!("{} r{}: {}", p.label, r.repeat, failure_text(f)))
            })
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    o.push_str("<p>Failed requests by reason:</p><ul>");
    for r in rows {
        let _ = write!(o, "<li class=\"bad\">{}</li>", esc(&r));
    }
    o.push_str("</ul>\n");
}

/// Points in level order: (level, the point).
fn by_level(b: &BenchView) -> Vec<(f64, &PointDoc)> {
    let mut pts: Vec<(f64, &PointDoc)> = b.points.iter().map(|p| (p.point.axis().0, p)).collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

/// A line chart against the load level: one series per `(name, metric)`, from each point's
/// mean over its runs; points with a refused run drawn as open diamonds.
fn level_chart(
    o: &mut String,
    chart_id: &mut usize,
    b: &BenchView,
    (title, y_label): (&str, &str),
    metrics: &[(&str, &str)],
) {
    let pts = by_level(b);
    let x_label = pts.first().map_or("level", |p| p.1.point.axis().1);
    let mut data = Vec::new();
    let series: Vec<Series> = metrics
        .iter()
        .map(|(name, key)| {
            let mut s = Series {
                name: (*name).into(),
                markers: true,
                ..Series::default()
            };
            for (x, p) in &pts {
                let Some(i) = p.intervals.get(*key) else {
                    continue;
                };
                if p.runs.iter().any(|r| !r.valid) {
                    s.refused.push(s.points.len());
                }
                s.points.push((*x, i.mean));
                data.push((format!("{} · {name}", p.label), crate::num(i.mean)));
            }
            s
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if series.is_empty() {
        return;
    }
    *chart_id += 1;
    let chart = Chart {
        title: format!("{title} against {x_label}"),
        desc: format!(
            "{} load points, the mean over each point's runs: {}.",
            pts.len(),
            data.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        x_label: x_label.into(),
        y_label: y_label.into(),
        series,
        ..Chart::default()
    };
    let svg = svg::render(&chart, &format!("c{chart_id}"));
    figure(
        o,
        &svg,
        &format!("{title} vs {x_label}"),
        Some((["point · metric", "mean"], data)),
    );
}

fn sweep_charts(o: &mut String, b: &BenchView, chart_id: &mut usize) {
    let pts = by_level(b);
    let distinct = pts.windows(2).filter(|w| w[0].0 != w[1].0).count() + 1;
    if pts.len() < 2 || distinct < 2 {
        return;
    }
    level_chart(
        o,
        chart_id,
        b,
        ("Output throughput", "output tokens/s"),
        &[("output tokens/s", "output_tokens_per_second")],
    );
    level_chart(
        o,
        chart_id,
        b,
        ("Request throughput", "requests/s"),
        &[
            ("requests/s", "requests_per_second"),
            ("goodput requests/s", "goodput_requests_per_second"),
        ],
    );
    level_chart(
        o,
        chart_id,
        b,
        ("Latency percentiles", "ms"),
        &[
            ("TTFT p50", "ttft_ms.p50"),
            ("TTFT p99", "ttft_ms.p99"),
            ("E2E p50", "e2e_ms.p50"),
            ("E2E p99", "e2e_ms.p99"),
        ],
    );
    level_chart(
        o,
        chart_id,
        b,
        ("Inter-token latency", "ms"),
        &[("ITL p50", "itl_ms.p50"), ("ITL p99", "itl_ms.p99")],
    );
}

/// How a CDF line was drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Drawn {
    /// From the quantiles of every sample.
    Exact,
    /// From the quantiles of every k-th sample: (used, of).
    Sampled(u64, u64),
    /// From the document's percentiles, minimum and maximum only.
    Percentiles,
}

/// One run's CDF line of `dist`: from its plot quantiles, or else from the document's
/// percentiles with its min and max.
fn cdf_line(p: &PointDoc, r: &RunDoc, dist: &str) -> Option<(CdfSeries, Drawn)> {
    let s = r.distributions.get(dist)?;
    let name = format!("{} r{}", p.label, r.repeat);
    let mut summary: Vec<(String, f64)> = s
        .percentiles
        .iter()
        .filter_map(|p| Some((p.label.clone(), p.value?)))
        .collect();
    summary.extend(s.max.map(|m| ("max".to_string(), m)));
    let n = usize::try_from(s.n).unwrap_or(usize::MAX);
    let line = |points, drawn| {
        Some((
            CdfSeries {
                name: name.clone(),
                points,
                n,
                summary: summary.clone(),
            },
            drawn,
        ))
    };
    if let Some(plot) = &r.plot {
        if let Some(q) = plot.quantiles.get(dist) {
            let last = q.len().saturating_sub(1).max(1) as f64;
            let points = q
                .iter()
                .enumerate()
                .map(|(i, v)| (*v, i as f64 / last))
                .collect();
            let used = plot.quantiles_from.get(dist).copied().unwrap_or(s.n);
            let drawn = if used < s.n {
                Drawn::Sampled(used, s.n)
            } else {
                Drawn::Exact
            };
            return line(points, drawn);
        }
    }
    let mut points: Vec<(f64, f64)> = s.min.map(|m| (m, 0.0)).into_iter().collect();
    for pc in &s.percentiles {
        let frac = pc.label.trim_start_matches('p').parse::<f64>().ok();
        if let (Some(v), Some(f)) = (pc.value, frac) {
            points.push((v, f / 100.0));
        }
    }
    points.extend(s.max.map(|m| (m, 1.0)));
    line(points, Drawn::Percentiles)
}

fn point_charts(o: &mut String, p: &PointDoc, chart_id: &mut usize) {
    for (label, dist) in [("TTFT", "ttft_ms"), ("ITL", "itl_ms"), ("E2E", "e2e_ms")] {
        let lines: Vec<(CdfSeries, Drawn)> = p
            .runs
            .iter()
            .take(MAX_CDF_RUNS)
            .filter_map(|r| cdf_line(p, r, dist))
            .collect();
        let mut note = p.label.clone();
        for (s, drawn) in &lines {
            match drawn {
                Drawn::Exact => {}
                Drawn::Sampled(used, of) => {
                    let _ = write!(
                        note,
                        "; {}: from every k-th of its samples ({used} of {of})",
                        s.name
                    );
                }
                Drawn::Percentiles => {
                    let _ = write!(
                        note,
                        "; {}: drawn from the document's percentiles only: it holds no per-percent quantiles",
                        s.name
                    );
                }
            }
        }
        let series = lines.into_iter().map(|(s, _)| s).collect();
        cdf_figure(o, chart_id, label, series, &note);
    }
    let Some((r, plot)) = p
        .runs
        .iter()
        .find_map(|r| r.plot.as_ref().map(|pl| (r, pl)))
    else {
        return;
    };
    if plot.timeline.is_empty() {
        return;
    }
    *chart_id += 1;
    let rows: Vec<(f64, Option<f64>, Option<f64>)> = plot
        .timeline
        .iter()
        .map(|t| (t.send_ms, t.first_ms, t.last_ms))
        .collect();
    let failed = plot.timeline.iter().filter(|t| !t.succeeded).count();
    let sampled = if plot.timeline.len() as u64 == plot.timeline_of {
        format!("all {} measured requests", plot.timeline_of)
    } else {
        format!(
            "{} of {} measured requests (evenly sampled in send order)",
            plot.timeline.len(),
            plot.timeline_of
        )
    };
    let name = format!("{} r{}", p.label, r.repeat);
    let svg = svg::timeline(
        &format!("Request timeline of {name}"),
        &format!("{sampled} in send order: grey from send to the first content event (waiting), blue from the first to the last content event (streaming); {failed} shown failed."),
        &rows,
        &format!("c{chart_id}"),
    );
    figure(
        o,
        &svg,
        &format!("request timeline · {name} · {sampled}"),
        None,
    );
}

/// The JUnit suite of one document.
pub(crate) fn junit_suite(b: &BenchView) -> crate::junit::Suite {
    let reasons: &[String] = match &b.verdict {
        Some(VerdictDoc::ServerFailed { reasons }) => reasons,
        _ => &[],
    };
    let mut used = vec![false; reasons.len()];
    let mut cases = Vec::new();
    for p in &b.points {
        for r in &p.runs {
            let prefix = format!("{} run {}: ", p.label, r.repeat);
            let mine: Vec<&String> = reasons
                .iter()
                .zip(used.iter_mut())
                .filter(|(t, _)| t.starts_with(&prefix))
                .map(|(t, u)| {
                    *u = true;
                    t
                })
                .collect();
            let mut body: Vec<String> = mine.iter().map(|t| t.to_string()).collect();
            body.extend(r.failures.iter().map(failure_text));
            let failure = if let Some(first) = mine.first() {
                Some((
                    "server_failed".to_string(),
                    first.to_string(),
                    body.join("\n"),
                ))
            } else if !r.valid {
                let reason = r.invalid_reasons.join("; ");
                body.insert(0, reason.clone());
                Some(("measurement_refused".to_string(), reason, body.join("\n")))
            } else {
                None
            };
            cases.push(crate::junit::JunitCase {
                name: format!("{} r{}", p.label, r.repeat),
                time: r.metrics.window_seconds.unwrap_or(0.0),
                failure,
                skipped: None,
            });
        }
    }
    let unplaced: Vec<&String> = reasons
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(t, _)| t)
        .collect();
    let none_failed = cases.iter().all(|c| c.failure.is_none());
    if !unplaced.is_empty() || (!b.passed() && none_failed) {
        let text = if unplaced.is_empty() {
            b.verdict_text()
        } else {
            unplaced
                .iter()
                .map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        };
        cases.push(crate::junit::JunitCase {
            name: "verdict".into(),
            time: 0.0,
            failure: Some((
                b.status().to_string(),
                text.lines().next().unwrap_or("").to_string(),
                text.clone(),
            )),
            skipped: None,
        });
    }
    let name = b.name();
    crate::junit::Suite {
        name: format!("bench {name}"),
        classname: format!("bench.{name}"),
        properties: vec![
            ("tool", b.tool.clone()),
            ("verdict", b.status().to_string()),
            ("path", b.path.to_string_lossy().into_owned()),
        ],
        cases,
    }
}

/// The header of `bench-rows.csv`.
pub const CSV_HEADER: &str =
    "document,verdict,point,mode,level,repeat,valid,stop,metric,value,n,below_minimum";

/// Headline metrics that are not a distribution's percentile.
const RATES: [&str; 5] = [
    "requests_per_second",
    "output_tokens_per_second",
    "goodput_requests_per_second",
    "slo_attainment",
    "error_rate",
];

/// `bench-rows.csv`: one row per metric observation of each run — the request counts, the
/// headline rates, each distribution's mean, min, max and requested percentiles (with `n` and
/// `below_minimum`), and each failure kind's count (`failures.<kind>`). Numbers are written in
/// Rust's shortest exact form; a metric without a value (undefined) has no row.
pub fn csv(benches: &[BenchView]) -> String {
    let cell = crate::csv::cell;
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for b in benches {
        let doc = cell(&b.path.to_string_lossy());
        for p in &b.points {
            let (level, _) = p.point.axis();
            let mode = match p.point {
                Level::Concurrency { .. } => "concurrency",
                Level::Rate { .. } => "rate",
                Level::Trace { .. } => "trace",
            };
            for r in &p.runs {
                let lead = [
                    doc.clone(),
                    b.status().to_string(),
                    cell(&p.label),
                    mode.to_string(),
                    level.to_string(),
                    r.repeat.to_string(),
                    r.valid.to_string(),
                    cell(&r.stop_text()),
                ]
                .join(",");
                let mut row = |metric: &str, value: String, n: String, below: String| {
                    let _ = writeln!(out, "{lead},{},{value},{n},{below}", cell(metric));
                };
                let m = &r.metrics;
                for (k, v) in [
                    ("measured_requests", m.measured_requests),
                    ("succeeded_requests", m.succeeded_requests),
                    ("failed_requests", m.failed_requests),
                ] {
                    row(k, v.to_string(), String::new(), String::new());
                }
                for k in RATES {
                    if let Some(v) = r.headline(k) {
                        row(k, v.to_string(), String::new(), String::new());
                    }
                }
                for (d, s) in &r.distributions {
                    let n = s.n.to_string();
                    for (k, v) in [("mean", s.mean), ("min", s.min), ("max", s.max)] {
                        if let Some(v) = v {
                            row(&format!("{d}.{k}"), v.to_string(), n.clone(), String::new());
                        }
                    }
                    for pc in &s.percentiles {
                        if let Some(v) = pc.value {
                            row(
                                &format!("{d}.{}", pc.label),
                                v.to_string(),
                                pc.n.to_string(),
                                pc.below_minimum.to_string(),
                            );
                        }
                    }
                }
                for f in &r.failures {
                    row(
                        &format!("failures.{}", f.kind),
                        f.count.to_string(),
                        String::new(),
                        String::new(),
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use qual_test_fixtures::synth::bench::{bench_document, BenchOptions};
    use serde_json::json;

    fn view_of(doc: &Json) -> Result<BenchView, Vec<String>> {
        let v = qual_json::from_str(&doc.to_string()).expect("strict json");
        read(PathBuf::from("out/bench.json"), &v)
            .map_err(|e| e.iter().map(ToString::to_string).collect())
    }

    fn view(o: &BenchOptions) -> BenchView {
        view_of(&bench_document(o)).expect("a valid document")
    }

    fn page(b: &BenchView) -> String {
        let mut o = String::new();
        html(&mut o, std::slice::from_ref(b), &mut 0);
        o
    }

    fn titles(h: &str) -> Vec<String> {
        h.split("<title id=\"")
            .skip(1)
            .filter_map(|t| t.split('>').nth(1)?.split('<').next().map(str::to_owned))
            .collect()
    }

    #[test]
    fn a_sweep_of_three_points_draws_sweep_charts_cdfs_and_timelines() {
        let b = view(&BenchOptions::default());
        assert_eq!(b.points.len(), 3);
        assert!(b.passed());
        let h = page(&b);
        let t = titles(&h);
        for want in [
            "Output throughput against concurrency",
            "Request throughput against concurrency",
            "Latency percentiles against concurrency",
            "Inter-token latency against concurrency",
        ] {
            assert_eq!(t.iter().filter(|x| *x == want).count(), 1, "{want}: {t:?}");
        }
        for want in [
            "TTFT distribution (CDF)",
            "ITL distribution (CDF)",
            "E2E distribution (CDF)",
        ] {
            assert_eq!(t.iter().filter(|x| *x == want).count(), 3, "{want}: {t:?}");
        }
        assert_eq!(
            t.iter()
                .filter(|x| x.starts_with("Request timeline of c="))
                .count(),
            3
        );
        assert!(h.contains("all 40 measured requests"));
        assert!(!h.contains("percentiles only"));
        // One point: no sweep charts.
        let one = view(&BenchOptions {
            levels: vec![4],
            ..BenchOptions::default()
        });
        assert!(!titles(&page(&one)).iter().any(|t| t.contains("against")));
    }

    #[test]
    fn an_empty_run_renders_without_plots_or_numbers() {
        let b = view(&BenchOptions {
            levels: vec![2],
            requests: 0,
            verdict: json!({"status": "measurement_refused", "reason": "no request was measured"}),
            ..BenchOptions::default()
        });
        let h = page(&b);
        assert!(!h.contains("<svg"), "{h}");
        assert!(h.contains("measurement_refused: no request was measured"));
        let mut m = String::new();
        markdown(&mut m, std::slice::from_ref(&b));
        assert!(
            m.contains("| c=2 | r0 | completed | valid | 0 / 0 / 0 | - | - | - / - |"),
            "{m}"
        );
        let s = junit_suite(&b);
        assert_eq!(s.cases.len(), 2);
        assert!(s.cases[0].failure.is_none());
        let v = s.cases[1].failure.as_ref().unwrap();
        assert_eq!(
            (v.0.as_str(), v.1.as_str()),
            (
                "measurement_refused",
                "measurement_refused: no request was measured"
            )
        );
        let c = csv(&[b]);
        assert!(c.contains(",measured_requests,0,,"), "{c}");
        assert!(!c.contains("requests_per_second"), "{c}");
    }

    #[test]
    fn a_refused_run_fails_its_case_and_is_marked_on_the_sweep() {
        let b = view(&BenchOptions {
            refused: vec![1],
            verdict: json!({"status": "passed"}),
            ..BenchOptions::default()
        });
        let s = junit_suite(&b);
        let names: Vec<&str> = s.cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["c=1 r0", "c=2 r0", "c=4 r0"]);
        let f = s.cases[1].failure.as_ref().expect("refused");
        assert_eq!(f.0, "measurement_refused");
        assert!(f.1.starts_with("invalid run: e2e_ms.p50"));
        assert!(s.cases[0].failure.is_none() && s.cases[2].failure.is_none());
        let h = page(&b);
        assert!(h.contains("class=\"refusedmark\" d=\"M"));
        assert!(h.contains("refused: invalid run"));
        assert!(csv(&[b]).contains(",c=2,concurrency,2,0,false,completed,"));
    }

    #[test]
    fn failures_are_listed_by_reason_with_an_example_everywhere() {
        let reason = "c=2 run 0: 10 of 40 measured requests failed (10 missing_done), more than the allowed failure rate 0";
        let b = view(&BenchOptions {
            failed: vec![1],
            verdict: json!({"status": "server_failed", "reasons": [reason, "no measured request succeeded"]}),
            ..BenchOptions::default()
        });
        assert_eq!(b.status(), "server_failed");
        let h = page(&b);
        assert!(h.contains("c=2 r0: 10 missing_done, e.g. request 3 (synthetic-3): stream ended without data: [DONE] &lt;b&gt;*x*&lt;/b&gt;"), "{h}");
        assert!(!h.contains("<b>"));
        assert!(h.contains("10 shown failed"));
        let mut m = String::new();
        markdown(&mut m, std::slice::from_ref(&b));
        assert!(
            m.contains("- c=2 r0 failed: 10 missing\\_done, e.g. request 3"),
            "{m}"
        );
        assert!(m.contains("\\<b\\>\\*x\\*\\</b\\>"), "{m}");
        let s = junit_suite(&b);
        let f = s.cases[1].failure.as_ref().expect("server failed");
        assert_eq!((f.0.as_str(), f.1.as_str()), ("server_failed", reason));
        assert!(f.2.contains("10 missing_done, e.g. request 3"));
        // The reason that names no run gets the verdict case.
        let last = s.cases.last().unwrap();
        assert_eq!(last.name, "verdict");
        assert_eq!(
            last.failure.as_ref().unwrap().1,
            "no measured request succeeded"
        );
        assert!(
            csv(&[b]).contains(",c=2,concurrency,2,0,true,completed,failures.missing_done,10,,")
        );
    }

    #[test]
    fn the_search_bracket_is_shown_with_and_without_a_knee() {
        let b = view(&BenchOptions {
            search: Some((Some(4.0), Some(5.0))),
            ..BenchOptions::default()
        });
        let want = "SLA search over [1, 8] (resolution 1, at least 0.9 of requests within every SLO): knee 4, first failing 5; bisection converged";
        assert!(page(&b).contains(want));
        let mut m = String::new();
        markdown(&mut m, std::slice::from_ref(&b));
        assert!(
            m.contains("SLA search over \\[1, 8\\] (resolution 1, at least 0.9 of requests within every SLO): knee 4, first failing 5;"),
            "{m}"
        );
        let none = view(&BenchOptions {
            search: Some((None, Some(1.0))),
            ..BenchOptions::default()
        });
        assert!(page(&none).contains("knee none, first failing 1;"));
        assert!(!page(&view(&BenchOptions::default())).contains("SLA search"));
    }

    #[test]
    fn a_document_without_plot_data_is_drawn_from_its_percentiles_and_says_so() {
        let b = view(&BenchOptions {
            plot: false,
            ..BenchOptions::default()
        });
        let h = page(&b);
        assert!(
            h.contains("drawn from the document&apos;s percentiles only"),
            "{h}"
        );
        assert!(!titles(&h).iter().any(|t| t.starts_with("Request timeline")));
    }

    #[test]
    fn a_big_run_timeline_says_it_is_sampled() {
        let mut doc = bench_document(&BenchOptions {
            levels: vec![1],
            ..BenchOptions::default()
        });
        let plot = &mut doc["points"][0]["runs"][0]["plot"];
        plot["timeline_of"] = json!(1200);
        plot["quantiles_from"]["itl_ms"] = json!(50);
        let b = view_of(&doc).unwrap();
        let h = page(&b);
        assert!(h.contains("40 of 1200 measured requests (evenly sampled in send order)"));
        assert!(
            h.contains("ITL CDF (c=1; c=1 r0: from every k-th of its samples (50 of 200))"),
            "{h}"
        );
        assert!(!h.contains("TTFT CDF (c=1;"));
    }

    #[test]
    fn every_violation_is_reported_with_its_pointer() {
        let mut doc = bench_document(&BenchOptions::default());
        doc["points"][0]["runs"][0]["surprise"] = json!(1);
        doc["points"][1]["runs"][0]["metrics"]["measured_requests"] = json!(1.5);
        doc["points"][2]["label"] = json!(7);
        let e = view_of(&doc).unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(
            e[0].starts_with("/points/0/runs/0: unknown field `surprise`"),
            "{e:?}"
        );
        assert!(e[1].starts_with("/points/1/runs/0: "), "{e:?}");
        assert!(e[2].starts_with("/points/2: invalid type"), "{e:?}");
        let mut top = bench_document(&BenchOptions::default());
        top["extra"] = json!(true);
        assert!(view_of(&top).unwrap_err()[0].starts_with("unknown field `extra`"));
        let mut verdict = bench_document(&BenchOptions::default());
        verdict["verdict"] = json!({"status": "great"});
        assert!(view_of(&verdict).is_err());
    }

    #[test]
    fn untrusted_text_is_escaped_in_every_format() {
        let evil = "<script>x</script>|*y*,=1\u{1b}[31m";
        let mut doc = bench_document(&BenchOptions::default());
        doc["tool"] = json!(evil);
        doc["points"][0]["label"] = json!(evil);
        let b = view_of(&doc).unwrap();
        let h = page(&b);
        assert!(!h.contains("<script>") && !h.contains('\u{1b}'), "{h}");
        let mut m = String::new();
        markdown(&mut m, std::slice::from_ref(&b));
        assert!(m.contains("\\<script\\>") && !m.contains('\u{1b}'), "{m}");
        let c = csv(std::slice::from_ref(&b));
        assert!(c.contains("\"<script>x</script>|*y*,=1\\x1b[31m\""), "{c}");
        let mut x = String::new();
        let s = junit_suite(&b);
        assert!(s.cases[0].name.starts_with("<script>"));
        x.push_str(&crate::junit::xml(&s.cases[0].name));
        assert!(!x.contains('<'));
    }

    #[test]
    fn collect_reads_bench_documents_and_refuses_a_bad_one_beside_them() {
        let d = tempfile::tempdir().unwrap();
        let good = d.path().join("good.json");
        std::fs::write(&good, bench_document(&BenchOptions::default()).to_string()).unwrap();
        let mut bad = bench_document(&BenchOptions::default());
        bad["points"][0]["runs"][0]["valid"] = json!("yes");
        bad["points"][1]["passes"] = json!(null);
        std::fs::write(d.path().join("bad.json"), bad.to_string()).unwrap();
        let set = crate::collect(&[d.path().to_path_buf()]);
        assert_eq!(set.benches.len(), 1);
        assert_eq!(set.benches[0].path, good);
        assert_eq!(set.refused.len(), 1);
        let r = &set.refused[0].reasons;
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(
            r[0].starts_with("/points/0/runs/0: ") && r[1].starts_with("/points/1: "),
            "{r:?}"
        );
        let j = crate::junit::render(&set);
        assert!(
            j.contains("<testsuite name=\"bench good.json\" tests=\"3\" failures=\"0\""),
            "{j}"
        );
        let md = crate::markdown::render(&set);
        assert!(md.contains("### Bench results"));
        assert!(
            md.contains(" — 0 hosts, 0 commits; 1 bench result (1 passed); **1 files refused**."),
            "{md}"
        );
    }
}
