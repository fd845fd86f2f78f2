//! `kiln-qual compare --json` documents as report inputs: read strictly (the closed set of
//! members `qual_receipt::compare::ComparisonReport` writes, each evaluation's closed set too)
//! and rendered side by side — baseline and candidate value of every metric rule with the
//! rule and tolerance that decided it, its change and its status — in HTML and Markdown.
//!
//! A report never re-judges: the statuses, reasons and the overall `ok` are the comparison's.

use qual_json::Value;
use std::fmt::Write as _;
use std::path::PathBuf;

/// The members a comparison document has (sorted, as the comparator writes them).
const REPORT_KEYS: [&str; 12] = [
    "baseline",
    "candidate",
    "compatibility",
    "compatible",
    "errors",
    "evidence_errors",
    "metric_deltas",
    "metric_evaluations",
    "mode",
    "ok",
    "result_status_changes",
    "workload_manifest",
];

const EVALUATION_KEYS: [&str; 15] = [
    "absolute_change",
    "absolute_tolerance",
    "aggregation",
    "baseline",
    "candidate",
    "lower_is_better",
    "metric_class",
    "operator",
    "reason",
    "relative_change_percent",
    "relative_tolerance",
    "required",
    "scope",
    "status",
    "unit",
];

/// One side of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct SideView {
    /// `receipt_id`.
    pub receipt_id: String,
    /// Its verdict.
    pub verdict: String,
}

/// One metric rule's evaluation, as text ready to show.
#[derive(Clone, Debug, PartialEq)]
pub struct EvaluationView {
    /// `results/<id>/metrics/<name>`.
    pub scope: String,
    /// `not_less ±max(abs, rel×|base|)` and the unit.
    pub rule: String,
    /// Baseline value (`null` when missing).
    pub baseline: String,
    /// Candidate value.
    pub candidate: String,
    /// `+1.2 (+3.4%)`, or empty.
    pub change: String,
    /// `passed`, `failed` or `skipped`.
    pub status: String,
    /// Whether a failure fails the comparison.
    pub required: bool,
    /// Why the rule did not pass.
    pub reason: Option<String>,
}

/// One comparison document.
#[derive(Clone, Debug, PartialEq)]
pub struct ComparisonView {
    /// Where it was read.
    pub path: PathBuf,
    /// The comparison mode.
    pub mode: String,
    /// The comparison's overall answer.
    pub ok: bool,
    /// Baseline side.
    pub baseline: SideView,
    /// Candidate side.
    pub candidate: SideView,
    /// Every error the comparison reported (compatibility and evidence), in its order.
    pub errors: Vec<String>,
    /// Every metric rule's evaluation.
    pub evaluations: Vec<EvaluationView>,
}

fn text(v: Option<&Value>) -> String {
    qual_json::show::text(v)
}

/// The comparison document's phrasing: one message per key, unknown ones first in the
/// document's order, then missing ones in declared order.
const PHRASING: qual_json::Phrasing = qual_json::Phrasing {
    missing: "missing member {}",
    unknown: "unknown member {}",
    list: qual_json::KeyList::EachQuoted,
    unknown_first: true,
};

fn exact_members(obj: &Value, keys: &[&str], at: &str, errs: &mut Vec<String>) {
    let Some(o) = obj.as_object() else {
        errs.push(format!("{at}: must be an object"));
        return;
    };
    let diff = qual_json::ClosedKeys::new(keys)
        .missing_order(qual_json::Order::Declared)
        .unknown_order(qual_json::Order::Declared)
        .check(o);
    errs.extend(
        diff.messages(&PHRASING)
            .into_iter()
            .map(|m| format!("{at}: {m}")),
    );
}

fn side(v: &Value) -> SideView {
    SideView {
        receipt_id: text(v.get("receipt_id")),
        verdict: text(v.get("verdict")),
    }
}

/// Reads a comparison document strictly; every violation is reported with its pointer.
pub fn read(path: PathBuf, v: &Value) -> Result<ComparisonView, Vec<String>> {
    let mut errs = Vec::new();
    exact_members(v, &REPORT_KEYS, "", &mut errs);
    let evals = v
        .get("metric_evaluations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut evaluations = Vec::new();
    for (i, e) in evals.iter().enumerate() {
        exact_members(
            e,
            &EVALUATION_KEYS,
            &format!("/metric_evaluations/{i}"),
            &mut errs,
        );
        let change = match (e.get("absolute_change"), e.get("relative_change_percent")) {
            (Some(Value::Null) | None, _) => String::new(),
            (Some(a), Some(Value::Null) | None) => text(Some(a)),
            (Some(a), Some(r)) => format!(
                "{} ({}%)",
                text(Some(a)),
                r.as_f64().map_or_else(|| text(Some(r)), crate::num)
            ),
        };
        evaluations.push(EvaluationView {
            scope: text(e.get("scope")),
            rule: format!(
                "{} ±max({}, {}×|baseline|) {}",
                text(e.get("operator")),
                text(e.get("absolute_tolerance")),
                text(e.get("relative_tolerance")),
                text(e.get("unit"))
            ),
            baseline: text(e.get("baseline")),
            candidate: text(e.get("candidate")),
            change,
            status: text(e.get("status")),
            required: e.get("required").and_then(Value::as_bool) == Some(true),
            reason: e.get("reason").and_then(Value::as_str).map(str::to_owned),
        });
    }
    let ok = match v.get("ok").and_then(Value::as_bool) {
        Some(b) => b,
        None => {
            errs.push("/ok: must be true or false".into());
            false
        }
    };
    if !errs.is_empty() {
        return Err(errs);
    }
    let strings = |k: &str| -> Vec<String> {
        v.get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|x| text(Some(x)))
            .collect()
    };
    Ok(ComparisonView {
        path,
        mode: text(v.get("mode")),
        ok,
        baseline: side(v.get("baseline").unwrap_or(&Value::Null)),
        candidate: side(v.get("candidate").unwrap_or(&Value::Null)),
        errors: strings("errors"),
        evaluations,
    })
}

/// The HTML section: one side-by-side table per comparison.
pub fn html(o: &mut String, comparisons: &[ComparisonView]) {
    if comparisons.is_empty() {
        return;
    }
    let esc = crate::svg::esc;
    o.push_str("<h2 id=\"comparisons\">Comparisons</h2>\n<p>Each row is one metric rule of the workload's comparison policy, as <code>kiln-qual compare</code> evaluated it: the rule and tolerance decided the status.</p>\n");
    for c in comparisons {
        let _ = writeln!(
            o,
            "<h3>{} → {} <span class=\"{}\">{}</span></h3>\n<p>baseline <code>{}</code> ({}), candidate <code>{}</code> ({}), mode <code>{}</code></p>",
            esc(&c.baseline.receipt_id),
            esc(&c.candidate.receipt_id),
            if c.ok { "good" } else { "bad" },
            if c.ok { "comparable, within policy" } else { "not ok" },
            esc(&c.baseline.receipt_id),
            esc(&c.baseline.verdict),
            esc(&c.candidate.receipt_id),
            esc(&c.candidate.verdict),
            esc(&c.mode)
        );
        for e in &c.errors {
            let _ = writeln!(o, "<p class=\"bad\">{}</p>", esc(e));
        }
        if c.evaluations.is_empty() {
            continue;
        }
        o.push_str("<div class=\"wrap\"><table class=\"stack\"><thead><tr><th scope=\"col\">metric</th><th scope=\"col\">rule</th><th scope=\"col\">baseline</th><th scope=\"col\">candidate</th><th scope=\"col\">change</th><th scope=\"col\">status</th></tr></thead><tbody>\n");
        for e in &c.evaluations {
            let class = match e.status.as_str() {
                "passed" => "good",
                "failed" => "bad",
                _ => "",
            };
            let _ = writeln!(
                o,
                "<tr><td><code>{}</code>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{}{}</td></tr>",
                esc(&e.scope),
                if e.required { "" } else { " (advisory)" },
                esc(&e.rule),
                esc(&e.baseline),
                esc(&e.candidate),
                esc(&e.change),
                esc(&e.status),
                e.reason
                    .as_ref()
                    .map(|r| format!(": {}", esc(r)))
                    .unwrap_or_default()
            );
        }
        o.push_str("</tbody></table></div>\n");
    }
}

/// The Markdown section: one table per comparison.
pub fn markdown(o: &mut String, comparisons: &[ComparisonView]) {
    if comparisons.is_empty() {
        return;
    }
    let cell = crate::md;
    o.push_str("\n### Comparisons\n");
    for c in comparisons {
        let _ = writeln!(
            o,
            "\n**{} → {}**: {} (mode `{}`)\n",
            cell(&c.baseline.receipt_id),
            cell(&c.candidate.receipt_id),
            if c.ok { "ok" } else { "not ok" },
            cell(&c.mode)
        );
        for e in &c.errors {
            let _ = writeln!(o, "- {}", cell(e));
        }
        if c.evaluations.is_empty() {
            continue;
        }
        o.push_str("| metric | rule | baseline | candidate | change | status |\n| --- | --- | --- | --- | --- | --- |\n");
        for e in &c.evaluations {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {}{} |",
                cell(&e.scope),
                cell(&e.rule),
                cell(&e.baseline),
                cell(&e.candidate),
                cell(&e.change),
                cell(&e.status),
                e.reason
                    .as_ref()
                    .map(|r| format!(": {}", cell(r)))
                    .unwrap_or_default()
            );
        }
    }
}
