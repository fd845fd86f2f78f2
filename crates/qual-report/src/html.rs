//! One self-contained, offline HTML page: no script, no external resource (a
//! `Content-Security-Policy` meta element forbids every fetch, so a mistake shows as a console
//! error in the browser test rather than as a silent request).
//!
//! Sections: the headline; the verdict matrix (newest first, failed rows marked in text and
//! colour); failing cases with reasons; per workload × variant × backend × host, each metric's
//! trend across runs (x = runs in time order labelled by commit, failed runs crossed out);
//! for serving evidence, TTFT / ITL / E2E CDFs from the per-request records of the newest run,
//! throughput against concurrency where a run has several, and the request timeline of one
//! run; `kiln-qual bench` results (`crate::bench`: per load point CDFs and a timeline, sweep
//! charts, the search's bracket, failure reasons, the verdict as written); the evidence scope
//! (what no receipt establishes, and each receipt's `unsupported` and `notes`); refused files. Each chart has a `<title>` and `<desc>` and its numbers in a
//! `<details>` table. The layout is one column that fits a phone and caps at 1200 px.

use crate::collect::{ReceiptView, ReportSet, ServeView};
use crate::matrix::{self, Row};
use crate::svg::{self, esc, Chart, Series};
use std::fmt::Write as _;

/// Most trend charts drawn (the rest are counted).
pub const MAX_TREND_CHARTS: usize = 300;
/// Most runs on one trend chart (the newest are kept).
pub const MAX_TREND_POINTS: usize = 200;
/// Most rows whose serving evidence is plotted.
pub const MAX_SERVING_ROWS: usize = 30;
/// Most receipts listed in the scope table.
pub const MAX_SCOPE_ROWS: usize = 500;

/// Metrics every runner result carries; they are pass/fail bookkeeping, not trends.
const BOOKKEEPING: [&str; 3] = ["case_pass", "exit_code", "output_assertion_failures"];

const STYLE: &str = "
:root{color-scheme:light dark;--fg:#1b1b1b;--bg:#fff;--muted:#666;--line:#ccc;--bad:#b00020;--good:#1b6e20}
@media (prefers-color-scheme:dark){:root{--fg:#e8e8e8;--bg:#161616;--muted:#aaa;--line:#444;--bad:#ff6b81;--good:#7bd88f}}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;max-width:1200px;padding:12px}
h1{font-size:1.5em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid var(--line)}h3{font-size:1.05em}
.wrap{overflow-x:auto}
table{border-collapse:collapse;font-size:.92em;min-width:100%}
th,td{border:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.failed td{background:rgba(176,0,32,.10)}
.bad{color:var(--bad);font-weight:600}.good{color:var(--good)}
code{font-size:.9em;word-break:break-all}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,520px),1fr));gap:12px}
figure{margin:0;border:1px solid var(--line);padding:6px}
figcaption{font-size:.9em;color:var(--muted)}
svg.chart{width:100%;height:auto;display:block}
svg.chart text{font-size:12px;fill:var(--fg)}
svg.chart .axis{stroke:var(--fg);fill:none}
svg.chart .grid{stroke:var(--line);fill:none}
svg.chart .line{fill:none;stroke-width:1.8}
svg.chart .band{fill:rgba(44,160,44,.15);stroke:none}
svg.chart .failmark{stroke:var(--bad);stroke-width:2;fill:none}
svg.chart .refusedmark{stroke:var(--fg);stroke-width:2;fill:var(--bg)}
details{margin:4px 0}
@media (max-width:640px){svg.chart text{font-size:15px}}
@media (max-width:640px){table.stack thead{display:none}table.stack,table.stack tbody,table.stack tr,table.stack td{display:block;min-width:0}table.stack tr{border:1px solid var(--line);margin-bottom:8px}table.stack td{border:none;padding:2px 6px}table.stack caption{display:block;text-align:left}table.stack td.n{text-align:left}table.stack td::before{content:attr(data-label) \": \";font-weight:600}}
";

/// Renders the page.
pub fn render(set: &ReportSet) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    o.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">");
    o.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">");
    o.push_str("<title>kiln-qual report</title><style>");
    o.push_str(STYLE);
    o.push_str("</style></head><body>\n<h1>kiln-qual report</h1>\n");
    let (n, passed, failed, hosts, commits) = matrix::counts(set);
    let _ = writeln!(
        o,
        "<p>{}: <strong class=\"good\">{passed} passed</strong>, <strong class=\"bad\">{failed} failed</strong> — {}, {}{}{}.</p>",
        crate::count(n, "receipt"),
        crate::count(hosts, "host"),
        crate::count(commits, "commit"),
        crate::bench::headline(&set.benches),
        if set.refused.is_empty() {
            String::new()
        } else {
            format!("; <strong class=\"bad\">{} files refused</strong>", set.refused.len())
        }
    );
    let rows = matrix::rows(set);
    verdict_matrix(&mut o, &rows);
    failures(&mut o, set);
    let mut chart_id = 0usize;
    trends(&mut o, &rows, &mut chart_id);
    serving(&mut o, &rows, &mut chart_id);
    throughput_across_variants(&mut o, &rows, &mut chart_id);
    crate::bounds::html(&mut o, set);
    crate::comparison::html(&mut o, &set.comparisons);
    crate::campaign::html(&mut o, &set.campaigns);
    crate::bench::html(&mut o, &set.benches, &mut chart_id);
    scope(&mut o, set);
    refused(&mut o, set);
    o.push_str("</body></html>\n");
    o
}

fn verdict_matrix(o: &mut String, rows: &[Row<'_>]) {
    o.push_str("<h2 id=\"matrix\">Verdict matrix</h2>\n");
    if rows.is_empty() {
        o.push_str("<p>No valid receipts.</p>\n");
        return;
    }
    o.push_str("<div class=\"wrap\"><table class=\"stack\"><caption>Newest run of each workload, variant, backend and host, newest first</caption><thead><tr><th scope=\"col\">workload</th><th scope=\"col\">variant</th><th scope=\"col\">backend</th><th scope=\"col\">host</th><th scope=\"col\">latest</th><th scope=\"col\">commit</th><th scope=\"col\">started (UTC)</th><th scope=\"col\">passed</th><th scope=\"col\">failed</th></tr></thead><tbody>\n");
    for row in rows {
        let r = row.latest();
        let (class, verdict) = if r.passed() {
            (
                "",
                format!("<span class=\"good\">✓ {}</span>", esc(&r.verdict)),
            )
        } else {
            (
                " class=\"failed\"",
                format!("<span class=\"bad\">✗ {}</span>", esc(&r.verdict)),
            )
        };
        let _ = writeln!(
            o,
            "<tr{class}><td data-label=\"workload\">{}</td><td data-label=\"variant\">{}</td><td data-label=\"backend\">{}</td><td data-label=\"host\">{}</td><td data-label=\"latest\">{verdict}</td><td data-label=\"commit\"><code>{}</code></td><td data-label=\"started\">{}</td><td class=\"n\" data-label=\"passed\">{}</td><td class=\"n\" data-label=\"failed\">{}</td></tr>",
            esc(&r.workload),
            esc(&r.variant),
            esc(&r.backend),
            esc(&r.host),
            esc(crate::short_commit(&r.commit)),
            esc(&r.started_at),
            row.passed(),
            row.failed()
        );
    }
    o.push_str("</tbody></table></div>\n");
}

fn failures(o: &mut String, set: &ReportSet) {
    let failures = matrix::failures(set);
    if failures.is_empty() {
        return;
    }
    o.push_str("<h2 id=\"failures\">Failing cases</h2>\n<div class=\"wrap\"><table class=\"stack\"><thead><tr><th scope=\"col\">case</th><th scope=\"col\">repetitions</th><th scope=\"col\">workload / variant / backend @ host</th><th scope=\"col\">commit</th><th scope=\"col\">receipt</th><th scope=\"col\">reason</th></tr></thead><tbody>\n");
    for f in failures.iter().take(crate::markdown::MAX_FAILURES * 4) {
        let r = f.receipt;
        let reps: Vec<String> = f.repetitions.iter().map(|n| format!("r{n}")).collect();
        let _ = writeln!(
            o,
            "<tr class=\"failed\"><td data-label=\"case\">{} ({})</td><td data-label=\"repetitions\">{}</td><td data-label=\"row\">{} / {} / {} @ {}</td><td data-label=\"commit\"><code>{}</code></td><td data-label=\"receipt\"><code>{}</code></td><td data-label=\"reason\">{}</td></tr>",
            esc(f.case),
            if f.required { "required" } else { "optional" },
            esc(&reps.join(", ")),
            esc(&r.workload),
            esc(&r.variant),
            esc(&r.backend),
            esc(&r.host),
            esc(crate::short_commit(&r.commit)),
            esc(&r.receipt_id),
            esc(&f.reason)
        );
    }
    o.push_str("</tbody></table></div>\n");
    if failures.len() > crate::markdown::MAX_FAILURES * 4 {
        let _ = writeln!(
            o,
            "<p>… and {} more failing cases.</p>",
            failures.len() - crate::markdown::MAX_FAILURES * 4
        );
    }
}

fn row_name(r: &ReceiptView) -> String {
    format!(
        "{} / {} / {} @ {}",
        r.workload, r.variant, r.backend, r.host
    )
}

/// A table of (label, value) pairs in a `<details>`: the chart's numbers as text.
fn data_table(o: &mut String, head: [&str; 2], rows: &[(String, String)]) {
    let _ = write!(
        o,
        "<details><summary>data</summary><table><thead><tr><th scope=\"col\">{}</th><th scope=\"col\">{}</th></tr></thead><tbody>",
        esc(head[0]),
        esc(head[1])
    );
    for (a, b) in rows {
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=\"n\">{}</td></tr>",
            esc(a),
            esc(b)
        );
    }
    o.push_str("</tbody></table></details>");
}

/// Column headings and (label, value) rows of a chart's data table.
pub(crate) type DataTable<'a> = ([&'a str; 2], Vec<(String, String)>);

pub(crate) fn figure(o: &mut String, svg: &str, caption: &str, data: Option<DataTable<'_>>) {
    let _ = write!(o, "<figure>{svg}<figcaption>{}</figcaption>", esc(caption));
    if let Some((head, rows)) = data {
        data_table(o, head, &rows);
    }
    o.push_str("</figure>\n");
}

/// One line of a CDF chart: its name, its points (value, fraction ≤ value), its sample
/// count and the statistics its description and data table name (`p50`, `max`, …, in ms).
pub(crate) struct CdfSeries {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub n: usize,
    pub summary: Vec<(String, f64)>,
}

/// One CDF figure of `label` (`TTFT`, `ITL`, `E2E`) in ms over `series` (nothing when none
/// has points); `note` (possibly empty) ends the description and the caption.
pub(crate) fn cdf_figure(
    o: &mut String,
    chart_id: &mut usize,
    label: &str,
    series: Vec<CdfSeries>,
    note: &str,
) {
    let series: Vec<CdfSeries> = series
        .into_iter()
        .filter(|s| !s.points.is_empty())
        .collect();
    if series.is_empty() {
        return;
    }
    *chart_id += 1;
    let mut data = Vec::new();
    let mut desc = format!("Empirical CDF of {label} in ms.");
    for s in &series {
        let stats: Vec<String> = s
            .summary
            .iter()
            .map(|(k, v)| format!("{k} {} ms", crate::num(*v)))
            .collect();
        let _ = write!(desc, " {}: n={}, {}.", s.name, s.n, stats.join(", "));
        data.extend(
            s.summary
                .iter()
                .map(|(k, v)| (format!("{} {k}", s.name), crate::num(*v))),
        );
    }
    if !note.is_empty() {
        let _ = write!(desc, " {note}");
    }
    let chart = Chart {
        title: format!("{label} distribution (CDF)"),
        desc,
        x_label: format!("{label} (ms)"),
        y_label: "fraction of samples ≤ x".into(),
        series: series
            .into_iter()
            .map(|s| Series {
                name: s.name,
                points: s.points,
                ..Series::default()
            })
            .collect(),
        step: true,
        ..Chart::default()
    };
    let svg = svg::render(&chart, &format!("c{chart_id}"));
    let caption = if note.is_empty() {
        format!("{label} CDF")
    } else {
        format!("{label} CDF ({note})")
    };
    figure(o, &svg, &caption, Some((["sample", "ms"], data)));
}

fn trends(o: &mut String, rows: &[Row<'_>], chart_id: &mut usize) {
    o.push_str("<h2 id=\"trends\">Metric trends across runs</h2>\n<p>Each chart is one case metric of one workload, variant, backend and host, runs in time order labelled by commit (several runs of one commit as <code>commit·1</code>, <code>commit·2</code>, …). The value axis always starts at zero, so a small wobble looks as small as it is. A crossed marker is a run whose verdict failed; an open diamond is a run the measurement-validity gate refused (its timings are not trustworthy measurements).</p>\n");
    let mut drawn = 0usize;
    let mut skipped = 0usize;
    for row in rows {
        if row.receipts.len() < 2 {
            continue;
        }
        let runs: Vec<&ReceiptView> = {
            let all: Vec<_> = row.chronological().collect();
            let from = all.len().saturating_sub(MAX_TREND_POINTS);
            all[from..].to_vec()
        };
        // (case, metric, unit) in first-seen order.
        let mut keys: Vec<(String, String, String, bool)> = Vec::new();
        for r in &runs {
            for c in &r.cases {
                for m in &c.metrics {
                    if BOOKKEEPING.contains(&m.name.as_str()) {
                        continue;
                    }
                    if !keys.iter().any(|k| k.0 == c.id && k.1 == m.name) {
                        keys.push((
                            c.id.clone(),
                            m.name.clone(),
                            m.unit.clone(),
                            m.lower_is_better,
                        ));
                    }
                }
            }
        }
        if keys.is_empty() {
            continue;
        }
        let labels = run_labels(&runs);
        let mut body = String::new();
        for (case, metric, unit, lower) in &keys {
            let TrendPoints {
                points,
                failed,
                refused,
                data,
            } = trend_points(&runs, &labels, case, metric);
            if points.len() < 2 {
                continue;
            }
            if drawn >= MAX_TREND_CHARTS {
                skipped += 1;
                continue;
            }
            drawn += 1;
            *chart_id += 1;
            let first = runs.first().map(|r| r.started_at.as_str()).unwrap_or("");
            let last = runs.last().map(|r| r.started_at.as_str()).unwrap_or("");
            let lo = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
            let hi = points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
            // The comparison policy's tolerance band against the oldest run shown.
            let rule = runs.iter().rev().find_map(|r| {
                r.rules.iter().find(|p| {
                    &p.metric == metric && p.result_id.as_deref().is_none_or(|id| id == case)
                })
            });
            let band = rule.map(|p| {
                let base = points[0].1;
                let (low, high) = p.band(base);
                (
                    low.unwrap_or(lo.min(base)),
                    high.unwrap_or(hi.max(base)),
                    p.operator.clone(),
                )
            });
            let chart = Chart {
                title: format!("{case}: {metric} ({unit}) across runs"),
                desc: format!(
                    "{} runs from {first} to {last}; values from {} to {} {unit} (axis from zero); {} is better; {} of these runs failed; {} were refused by the measurement-validity gate.{}",
                    points.len(),
                    crate::num(lo),
                    crate::num(hi),
                    if *lower { "lower" } else { "higher" },
                    failed.len(),
                    refused.len(),
                    band.as_ref().map_or_else(String::new, |(a, b, op)| format!(
                        " Shaded: the comparison policy's {op} tolerance against the oldest run, {} to {} {unit}.",
                        crate::num(*a),
                        crate::num(*b)
                    ))
                ),
                band: band.as_ref().map(|(a, b, _)| (*a, *b)),
                x_label: "run (commit, oldest to newest)".into(),
                y_label: unit.clone(),
                series: vec![Series {
                    name: metric.clone(),
                    points,
                    markers: true,
                    failed,
                    refused,
                }],
                x_categories: labels.clone(),
                y_from_zero: true,
                ..Chart::default()
            };
            let svg = svg::render(&chart, &format!("c{chart_id}"));
            figure(
                &mut body,
                &svg,
                &format!("{case} · {metric} ({unit})"),
                Some((["run", "value"], data)),
            );
        }
        if !body.is_empty() {
            let _ = writeln!(
                o,
                "<h3>{}</h3>\n<div class=\"charts\">{body}</div>",
                esc(&row_name(row.latest()))
            );
        }
    }
    if drawn == 0 {
        o.push_str("<p>No metric has two or more runs yet.</p>\n");
    }
    if skipped > 0 {
        let _ = writeln!(o, "<p>… and {skipped} more trend charts not drawn (limit {MAX_TREND_CHARTS}); the CSV export has every value.</p>");
    }
}

/// One metric's points across runs, with the failed and validity-refused ones marked and the
/// data table's rows.
struct TrendPoints {
    points: Vec<(f64, f64)>,
    failed: Vec<usize>,
    refused: Vec<usize>,
    data: Vec<(String, String)>,
}

fn trend_points(runs: &[&ReceiptView], labels: &[String], case: &str, metric: &str) -> TrendPoints {
    let mut points = Vec::new();
    let mut failed = Vec::new();
    let mut refused = Vec::new();
    let mut data = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let v = r
            .cases
            .iter()
            .find(|c| c.id == case)
            .and_then(|c| c.metrics.iter().find(|m| m.name == metric));
        if let Some(m) = v {
            if r.validity_refused() {
                refused.push(points.len());
            } else if !r.passed() {
                failed.push(points.len());
            }
            points.push((i as f64, m.value));
            data.push((
                format!(
                    "{} {} ({}{})",
                    labels[i],
                    r.started_at,
                    r.verdict,
                    if r.validity_refused() {
                        ", refused by the validity gate"
                    } else {
                        ""
                    }
                ),
                m.text.clone(),
            ));
        }
    }
    TrendPoints {
        points,
        failed,
        refused,
        data,
    }
}

/// One label per run, oldest first: the short commit, and for a commit with several runs its
/// occurrence (`abc1234·1`, `abc1234·2`), so no two runs share a label.
fn run_labels(runs: &[&ReceiptView]) -> Vec<String> {
    let short = |r: &ReceiptView| r.commit.get(..7).unwrap_or(&r.commit).to_owned();
    let mut total: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for r in runs {
        *total.entry(short(r)).or_default() += 1;
    }
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    runs.iter()
        .map(|r| {
            let c = short(r);
            let k = seen.entry(c.clone()).or_default();
            *k += 1;
            if total[&c] > 1 {
                format!("{c}·{k}")
            } else {
                c
            }
        })
        .collect()
}

fn serving(o: &mut String, rows: &[Row<'_>], chart_id: &mut usize) {
    let mut heading = false;
    let mut shown = 0usize;
    for row in rows.iter() {
        if shown == MAX_SERVING_ROWS {
            let _ = writeln!(
                o,
                "<p>Serving plots are drawn for the newest {MAX_SERVING_ROWS} rows only.</p>"
            );
            break;
        }
        let Some(r) = row.receipts.iter().find(|r| {
            r.cases
                .iter()
                .any(|c| c.repetitions.iter().any(|p| p.serve.is_some()))
        }) else {
            continue;
        };
        if !heading {
            o.push_str("<h2 id=\"serving\">Serving latency</h2>\n<p>From the per-request records of each row's newest run with serving evidence (measured phase, successful requests). Serving evidence files are not digest-bound by the receipt.</p>\n");
            heading = true;
        }
        shown += 1;
        let views: Vec<(String, &ServeView)> = r
            .cases
            .iter()
            .flat_map(|c| {
                c.repetitions.iter().filter_map(move |p| {
                    p.serve
                        .as_ref()
                        .map(|s| (format!("{} r{}", c.id, p.number), s))
                })
            })
            .collect();
        let _ = writeln!(
            o,
            "<h3>{} — receipt <code>{}</code>, commit <code>{}</code></h3>\n<div class=\"charts\">",
            esc(&row_name(r)),
            esc(&r.receipt_id),
            esc(crate::short_commit(&r.commit))
        );
        for (label, pick) in [
            (
                "TTFT",
                (|s: &ServeView| &s.ttft_ms) as fn(&ServeView) -> &Vec<f64>,
            ),
            ("ITL", |s: &ServeView| &s.itl_ms),
            ("E2E", |s: &ServeView| &s.e2e_ms),
        ] {
            let series: Vec<CdfSeries> = views
                .iter()
                .take(4)
                .filter(|(_, s)| !pick(s).is_empty())
                .map(|(name, s)| {
                    let xs = pick(s);
                    let q = |p: f64| xs[((xs.len() - 1) as f64 * p).round() as usize];
                    CdfSeries {
                        name: name.clone(),
                        points: svg::cdf(xs, 400),
                        n: xs.len(),
                        summary: vec![
                            ("p50".into(), q(0.5)),
                            ("p90".into(), q(0.9)),
                            ("max".into(), xs[xs.len() - 1]),
                        ],
                    }
                })
                .collect();
            cdf_figure(o, chart_id, label, series, "");
        }
        // Throughput against concurrency (several closed-loop concurrencies in one run).
        let mut tp: Vec<(f64, f64)> = views
            .iter()
            .filter_map(|(_, s)| Some((s.concurrency? as f64, s.output_tokens_per_second?)))
            .collect();
        tp.sort_by(|a, b| a.0.total_cmp(&b.0));
        let distinct =
            tp.windows(2).filter(|w| w[0].0 != w[1].0).count() + usize::from(!tp.is_empty());
        if distinct >= 2 {
            let labelled: Vec<(f64, f64, String)> = tp
                .iter()
                .map(|(c, t)| (*c, *t, format!("concurrency {}", crate::num(*c))))
                .collect();
            throughput_chart(
                o,
                chart_id,
                "Output throughput against concurrency",
                "throughput vs concurrency",
                "concurrency",
                &labelled,
            );
        }
        if let Some((name, s)) = views.iter().find(|(_, s)| !s.timeline.is_empty()) {
            *chart_id += 1;
            let failed = s.timeline.iter().filter(|t| t.1.is_none()).count();
            let svg = svg::timeline(
                &format!("Request timeline of {name}"),
                &format!(
                    "{} measured requests in send order: grey from send to the first content event (waiting), blue from the first to the last content event (streaming); {failed} failed.",
                    s.timeline.len()
                ),
                &s.timeline,
                &format!("c{chart_id}"),
            );
            figure(o, &svg, &format!("request timeline · {name}"), None);
        }
        o.push_str("</div>\n");
        for (name, s) in &views {
            if !s.reasons.is_empty() {
                let _ = writeln!(
                    o,
                    "<p class=\"bad\">{} failed: {}</p>",
                    esc(name),
                    esc(&s.reasons.join("; "))
                );
            }
        }
    }
}

/// Throughput against concurrency across the variants of one workload on one backend and
/// host (each variant's newest run with serving evidence; closed-loop runs only), where at
/// least two concurrencies exist.
fn throughput_across_variants(o: &mut String, rows: &[Row<'_>], chart_id: &mut usize) {
    type Key = (String, String, String);
    type Point = (f64, f64, String);
    let mut groups: Vec<(Key, Vec<Point>)> = Vec::new();
    for row in rows {
        let Some(r) = row.receipts.iter().find(|r| {
            r.cases
                .iter()
                .any(|c| c.repetitions.iter().any(|p| p.serve.is_some()))
        }) else {
            continue;
        };
        let key = (r.workload.clone(), r.backend.clone(), r.host.clone());
        let points = r.cases.iter().flat_map(|c| {
            c.repetitions.iter().filter_map(|p| {
                let s = p.serve.as_ref()?;
                Some((
                    s.concurrency? as f64,
                    s.output_tokens_per_second?,
                    r.variant.clone(),
                ))
            })
        });
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.extend(points),
            None => groups.push((key, points.collect())),
        }
    }
    let mut heading = false;
    for ((workload, backend, host), mut pts) in groups {
        let variants: std::collections::BTreeSet<&str> = pts.iter().map(|p| p.2.as_str()).collect();
        let concurrencies: std::collections::BTreeSet<u64> =
            pts.iter().map(|p| p.0 as u64).collect();
        if variants.len() < 2 || concurrencies.len() < 2 {
            continue;
        }
        if !heading {
            o.push_str("<h2 id=\"throughput\">Throughput against concurrency</h2>\n<p>Across the variants of one workload on one backend and host: each variant's newest run with serving evidence.</p>\n<div class=\"charts\">\n");
            heading = true;
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let labelled: Vec<(f64, f64, String)> = pts
            .into_iter()
            .map(|(c, t, v)| (c, t, format!("variant {v} (concurrency {})", crate::num(c))))
            .collect();
        throughput_chart(
            o,
            chart_id,
            &format!("Output throughput against concurrency · {workload} · {backend} · {host}"),
            &format!("throughput vs concurrency · {workload}"),
            "point",
            &labelled,
        );
    }
    if heading {
        o.push_str("</div>\n");
    }
}

/// One output-throughput-against-concurrency chart: `(concurrency, tokens/s, label)` points,
/// sorted by concurrency; the labels name each point in the description and the data table.
fn throughput_chart(
    o: &mut String,
    chart_id: &mut usize,
    title: &str,
    caption: &str,
    point_header: &'static str,
    pts: &[(f64, f64, String)],
) {
    *chart_id += 1;
    let chart = Chart {
        title: title.into(),
        desc: format!(
            "{} points: {}",
            pts.len(),
            pts.iter()
                .map(|(_, t, l)| format!("{l} → {} tokens/s", crate::num(*t)))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        x_label: "concurrency".into(),
        y_label: "output tokens/s".into(),
        series: vec![Series {
            name: "output tokens/s".into(),
            points: pts.iter().map(|(c, t, _)| (*c, *t)).collect(),
            markers: true,
            ..Series::default()
        }],
        ..Chart::default()
    };
    let svg = svg::render(&chart, &format!("c{chart_id}"));
    let data = pts
        .iter()
        .map(|(_, t, l)| (l.clone(), crate::num(*t)))
        .collect();
    figure(o, &svg, caption, Some(([point_header, "tokens/s"], data)));
}

fn scope(o: &mut String, set: &ReportSet) {
    o.push_str("<h2 id=\"scope\">What these receipts do not establish</h2>\n<p>Each receipt establishes only its declared workload on the recorded source, backend, device, model, configuration and environment. No receipt establishes:</p>\n<ul>");
    for item in qual_receipt::render::NOT_ESTABLISHED {
        let _ = write!(o, "<li>{}</li>", esc(item));
    }
    let software = set.software_device_receipts();
    if !software.is_empty() {
        let _ = write!(
            o,
            "<li>for the {} receipt(s) on a CPU implementation of Vulkan ({}): {}</li>",
            software.len(),
            esc(&software.join(", ")),
            esc(qual_receipt::render::SOFTWARE_DEVICE_NOTE)
        );
    }
    o.push_str("</ul>\n");
    let with_scope: Vec<&ReceiptView> = set
        .receipts
        .iter()
        .filter(|r| !r.unsupported.is_empty() || !r.notes.is_empty())
        .collect();
    if with_scope.is_empty() {
        return;
    }
    o.push_str("<details><summary>Each receipt's own limits (unsupported capabilities and notes)</summary><div class=\"wrap\"><table><thead><tr><th scope=\"col\">receipt</th><th scope=\"col\">verdict</th><th scope=\"col\">unsupported</th><th scope=\"col\">notes</th></tr></thead><tbody>\n");
    for r in with_scope.iter().take(MAX_SCOPE_ROWS) {
        let _ = writeln!(
            o,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.receipt_id),
            esc(&r.verdict),
            esc(&r.unsupported.join("; ")),
            esc(&r.notes.join("; "))
        );
    }
    o.push_str("</tbody></table></div></details>\n");
    if with_scope.len() > MAX_SCOPE_ROWS {
        let _ = writeln!(
            o,
            "<p>… and {} more receipts with notes.</p>",
            with_scope.len() - MAX_SCOPE_ROWS
        );
    }
}

fn refused(o: &mut String, set: &ReportSet) {
    if set.refused.is_empty() && set.evidence_notes.is_empty() {
        return;
    }
    if !set.refused.is_empty() {
        o.push_str("<h2 id=\"refused\">Refused files (not valid receipts)</h2>\n<ul>");
        for f in set.refused.iter().take(MAX_SCOPE_ROWS) {
            let _ = write!(
                o,
                "<li><code>{}</code>: {}</li>",
                esc(&f.path.to_string_lossy()),
                esc(&f.reasons.join("; "))
            );
        }
        o.push_str("</ul>\n");
    }
    if !set.evidence_notes.is_empty() {
        o.push_str("<h2 id=\"evidence\">Evidence not used</h2>\n<ul>");
        for n in set.evidence_notes.iter().take(MAX_SCOPE_ROWS) {
            let _ = write!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::{CaseView, Repetition};

    fn receipt(variant: &str, concurrency: u64, tps: f64) -> ReceiptView {
        ReceiptView {
            path: format!("{variant}.json").into(),
            receipt_id: format!("r-{variant}"),
            workload: "serving-w".into(),
            variant: variant.into(),
            backend: "cpu".into(),
            kind: "serving".into(),
            host: "h1".into(),
            commit: "a".repeat(40),
            started_at: "2026-12-01T00:00:00Z".into(),
            started_ms: 0,
            duration_seconds: 1.0,
            verdict: "passed".into(),
            cases: vec![CaseView {
                id: "serve".into(),
                required: true,
                status: "passed".into(),
                details: None,
                duration_seconds: 1.0,
                metrics: Vec::new(),
                repetitions: vec![Repetition {
                    number: 1,
                    status: "passed".into(),
                    details: None,
                    duration_seconds: 1.0,
                    metrics: Vec::new(),
                    serve: Some(ServeView {
                        concurrency: Some(concurrency),
                        output_tokens_per_second: Some(tps),
                        ..ServeView::default()
                    }),
                }],
            }],
            unsupported: Vec::new(),
            notes: Vec::new(),
            software_device: false,
            run_evidence: true,
            rules: Vec::new(),
        }
    }

    #[test]
    fn runs_of_one_commit_get_distinct_labels() {
        let mut a = receipt("c1", 1, 1.0);
        let b = receipt("c1", 1, 1.0);
        let mut c = receipt("c1", 1, 1.0);
        a.commit = "b".repeat(40);
        c.commit = "c".repeat(40);
        let runs = [&a, &b, &b, &c, &b];
        let labels = run_labels(&runs);
        assert_eq!(
            labels,
            ["bbbbbbb", "aaaaaaa·1", "aaaaaaa·2", "ccccccc", "aaaaaaa·3"]
        );
    }

    #[test]
    fn a_run_the_validity_gate_refused_is_known_as_such() {
        let mut r = receipt("c1", 1, 1.0);
        assert!(!r.validity_refused());
        if let Some(s) = r.cases[0].repetitions[0].serve.as_mut() {
            s.validity_violations = vec!["late sends".into()];
        }
        assert!(r.validity_refused());
    }

    #[test]
    fn throughput_is_drawn_across_variants_of_one_workload() {
        let set = ReportSet {
            receipts: vec![receipt("c1", 1, 180.0), receipt("c8", 8, 1200.5)],
            ..ReportSet::default()
        };
        let page = render(&set);
        assert!(page.contains("id=\"throughput\""), "{page}");
        assert!(
            page.contains("variant c8 (concurrency 8) → 1200.5 tokens/s"),
            "{page}"
        );
        // One variant alone draws no cross-variant chart.
        let one = ReportSet {
            receipts: vec![receipt("c1", 1, 180.0)],
            ..ReportSet::default()
        };
        assert!(!render(&one).contains("id=\"throughput\""));
    }

    #[test]
    fn a_software_vulkan_device_is_named_in_the_scope() {
        let mut lavapipe = receipt("vulkan", 1, 4.0);
        lavapipe.software_device = true;
        lavapipe.receipt_id = "r-lavapipe".into();
        let set = ReportSet {
            receipts: vec![receipt("cpu", 1, 180.0), lavapipe],
            ..ReportSet::default()
        };
        let page = render(&set);
        assert!(
            page.contains("on a CPU implementation of Vulkan (r-lavapipe)"),
            "{page}"
        );
        let md = crate::markdown::render(&set);
        assert!(
            md.contains("CPU implementation of Vulkan (r-lavapipe)"),
            "{md}"
        );
        let plain = ReportSet {
            receipts: vec![receipt("cpu", 1, 180.0)],
            ..ReportSet::default()
        };
        assert!(!render(&plain).contains("CPU implementation of Vulkan"));
    }
}
