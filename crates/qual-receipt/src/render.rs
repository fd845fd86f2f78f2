//! Human renderings: the summary of one receipt (`kiln-qual receipt show`) and the metric table
//! of one comparison (`kiln-qual compare`).
//!
//! Invariants: rendering never judges — it reads a receipt the validator already accepted (a
//! missing field prints as `-`, never panics), and it always ends a receipt summary with the
//! evidence scope: what the receipt does *not* establish, so a reader cannot mistake a bounded
//! pass for a general claim. Every string taken from a receipt or a report is shown through
//! `qual_json::escape_text`, so a receipt cannot print a line of its own (a fake `OK <path>` or
//! `verdict: passed`) or drive the terminal.

use crate::compare::{ComparisonReport, Evaluation};
use qual_json::{Number, Value};
use std::fmt::Write as _;

/// What no receipt establishes on its own (the seed's "Read the Verdict").
pub const NOT_ESTABLISHED: [&str; 7] = [
    "correctness outside the executed cases",
    "performance on another device",
    "high-concurrency behavior from a single-request run",
    "endurance beyond the measured interval",
    "native Linux behavior from a WSL2 run",
    "capacity for a different prompt or output shape",
    "product-wide support for every operation the backend can expose",
];

/// What a receipt whose Vulkan device is a CPU implementation (lavapipe, SwiftShader:
/// `environment.runtime.vulkan_device_type` = `cpu`, recorded by the Vulkan probe) does
/// not establish, beyond [`NOT_ESTABLISHED`].
pub const SOFTWARE_DEVICE_NOTE: &str = "GPU performance or GPU behaviour: the Vulkan device is a CPU implementation of Vulkan, which establishes the Vulkan code path only";

/// [`SOFTWARE_DEVICE_NOTE`] when receipt `r`'s device is a CPU implementation of Vulkan.
pub fn software_device_note(r: &Value) -> Option<&'static str> {
    (at(r, &["environment", "runtime", "vulkan_device_type"]).and_then(Value::as_str)
        == Some("cpu"))
    .then_some(SOFTWARE_DEVICE_NOTE)
}

fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(s)) => esc(s),
        Some(Value::Number(Number::Float(f))) => qual_json::python_float_repr(*f),
        Some(other) => qual_json::to_canonical_string(other),
    }
}

/// A string from a document, shown escaped.
fn esc(s: &str) -> String {
    qual_json::escape_text(s).into_owned()
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    Some(cur)
}

/// Seconds with millisecond precision (`4.781 s`), or `-`.
fn seconds(v: Option<&Value>) -> String {
    match v.and_then(Value::as_f64) {
        Some(f) => format!("{f:.3} s"),
        None => "-".to_owned(),
    }
}

fn bytes_text(v: Option<&Value>) -> Option<String> {
    let n = v?.as_f64()?;
    Some(format!("{:.1} GiB", n / (1024.0 * 1024.0 * 1024.0)))
}

/// The receipt line and what it binds: kind, workload, backend, device, host, source, model
/// and run times. Returns the verdict.
fn identity_lines(out: &mut String, r: &Value) -> String {
    let verdict = text(at(r, &["qualification", "verdict"]));
    let _ = writeln!(
        out,
        "receipt {} — {}",
        text(r.get("receipt_id")),
        verdict.to_uppercase()
    );
    let kind = text(at(r, &["qualification", "kind"]));
    let _ = writeln!(
        out,
        "  kind:      {kind} (profile {})",
        text(at(r, &["qualification", "profile"]))
    );
    match r.get("workload").filter(|w| !w.is_null()) {
        Some(w) => {
            let seed = text(w.get("seed"));
            let _ = writeln!(
                out,
                "  workload:  {} ({}), seed {seed}",
                text(w.get("id")),
                text(w.get("sha256"))
            );
            let _ = writeln!(
                out,
                "  variant:   {}",
                text(at(w, &["parameters", "variant_id"]))
            );
        }
        None => {
            let _ = writeln!(out, "  workload:  none (environment receipt)");
            let _ = writeln!(out, "  variant:   -");
        }
    }
    let _ = writeln!(
        out,
        "  backend:   {}",
        text(at(r, &["qualification", "backend"]))
    );
    let device = at(r, &["environment", "device"]);
    let mut device_line = format!(
        "{} ({}, driver {}",
        text(device.and_then(|d| d.get("name"))),
        text(device.and_then(|d| d.get("architecture"))),
        text(device.and_then(|d| d.get("driver")))
    );
    if let Some(mem) = bytes_text(device.and_then(|d| d.get("memory_bytes"))) {
        let _ = write!(device_line, ", {mem}");
    }
    if device
        .and_then(|d| d.get("unified_memory"))
        .and_then(Value::as_bool)
        == Some(true)
    {
        device_line.push_str(", unified memory");
    }
    device_line.push(')');
    let _ = writeln!(out, "  device:    {device_line}");
    if software_device_note(r).is_some() {
        let _ = writeln!(
            out,
            "             a CPU implementation of Vulkan (device type cpu): the Vulkan code path, not a GPU"
        );
    }
    let os = at(r, &["environment", "os"]);
    let platform = at(r, &["environment", "platform", "kind"]).and_then(Value::as_str);
    let _ = writeln!(
        out,
        "  host:      {} — {} {}, kernel {}, {}{}",
        text(at(r, &["environment", "host_id"])),
        text(os.and_then(|o| o.get("name"))),
        text(os.and_then(|o| o.get("version"))),
        text(os.and_then(|o| o.get("kernel"))),
        text(os.and_then(|o| o.get("architecture"))),
        platform
            .map(|p| format!(", platform {}", esc(p)))
            .unwrap_or_default()
    );
    let clean = at(r, &["source", "git_worktree_clean"]).and_then(Value::as_bool);
    let _ = writeln!(
        out,
        "  source:    commit {} ({}), tree {}",
        text(at(r, &["source", "git_commit"])),
        if clean == Some(true) {
            "clean"
        } else {
            "dirty"
        },
        text(at(r, &["source", "tree_hash"]))
    );
    match r.get("model").filter(|m| !m.is_null()) {
        Some(m) => {
            let weights = m
                .get("weight_files")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let _ = writeln!(
                out,
                "  model:     {} ({weights} weight files, tokenizer {})",
                text(m.get("id")),
                text(m.get("tokenizer_hash"))
            );
        }
        None => {
            let _ = writeln!(out, "  model:     none");
        }
    }
    let _ = writeln!(
        out,
        "  run:       {} → {} ({})",
        text(at(r, &["qualification", "started_at_utc"])),
        text(at(r, &["qualification", "finished_at_utc"])),
        seconds(at(r, &["qualification", "duration_seconds"]))
    );

    verdict
}

/// The cases table, then the first line of each failing case's details.
fn cases_section(out: &mut String, r: &Value) {
    let results = r.get("results").and_then(Value::as_array);
    let count = results.map_or(0, Vec::len);
    let _ = writeln!(out, "\ncases ({count}):");
    let rows: Vec<[String; 4]> = results
        .into_iter()
        .flatten()
        .map(|res| {
            let required = res.get("required").and_then(Value::as_bool) == Some(true);
            [
                text(res.get("id")),
                if required { "required" } else { "optional" }.to_owned(),
                text(res.get("status")),
                seconds(res.get("duration_seconds")),
            ]
        })
        .collect();
    let header = ["case", "required", "status", "duration"];
    out.push_str(&qual_json::table::render_indented("  ", &header, &rows));

    for res in results.into_iter().flatten() {
        let status = res.get("status").and_then(Value::as_str).unwrap_or("-");
        let details = res.get("details").and_then(Value::as_str).unwrap_or("");
        if status != "passed" && !details.is_empty() {
            let first = details.lines().next().unwrap_or("");
            let shown = esc(&first.chars().take(200).collect::<String>());
            let more = if first.chars().count() > 200 || first.len() < details.len() {
                " …"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  {} {}: {shown}{more}",
                text(res.get("id")),
                esc(status)
            );
        }
    }
}

/// What the receipt does not establish (worded for a passed or a failed receipt).
fn limits_section(out: &mut String, verdict: &str, software_device: Option<&str>) {
    let _ = writeln!(out);
    if verdict == "passed" {
        let _ = writeln!(
            out,
            "This receipt establishes only the declared workload on the recorded source, backend, \
             device, model, configuration and environment. It does not establish:"
        );
    } else {
        let _ = writeln!(
            out,
            "This failed receipt is counterevidence for the failing cases above: keep the failed \
             verdict visible and never average failed rows into a performance claim. Even a \
             passing receipt would not establish:"
        );
    }
    for item in software_device.into_iter().chain(NOT_ESTABLISHED) {
        let _ = writeln!(out, "  - {item}");
    }
}

/// Renders the human summary of a (valid) receipt.
pub fn receipt_summary(r: &Value) -> String {
    let mut out = String::new();
    let verdict = identity_lines(&mut out, r);
    cases_section(&mut out, r);
    limits_section(&mut out, &verdict, software_device_note(r));
    out
}

fn num_text(v: &Option<serde_json::Value>) -> String {
    match v {
        None | Some(serde_json::Value::Null) => "-".to_owned(),
        Some(serde_json::Value::String(s)) => esc(s),
        Some(other) => esc(&other.to_string()),
    }
}

/// Renders a comparison: the header line, the allowed differences, the metric table
/// (baseline, candidate, delta, rule, verdict) and every error.
pub fn comparison_table(report: &ComparisonReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {} -> {} ({})",
        if report.ok { "PASSED" } else { "FAILED" },
        esc(&report.baseline.receipt_id),
        esc(&report.candidate.receipt_id),
        esc(&report.mode.to_string())
    );
    for allowed in &report.compatibility.allowed_differences {
        let _ = writeln!(out, "allowed {}", esc(&allowed.describe()));
    }
    if !report.metric_evaluations.is_empty() {
        let header = [
            "metric",
            "baseline",
            "candidate",
            "delta",
            "rule",
            "verdict",
        ];
        let rows: Vec<[String; 6]> = report
            .metric_evaluations
            .iter()
            .map(|e: &Evaluation| {
                let delta = match (&e.absolute_change, e.relative_change_percent) {
                    (Some(_), Some(p)) => {
                        format!("{} ({p:+.2}%)", num_text(&e.absolute_change))
                    }
                    (Some(_), None) => num_text(&e.absolute_change),
                    _ => "-".to_owned(),
                };
                [
                    esc(&e.scope),
                    num_text(&e.baseline),
                    num_text(&e.candidate),
                    delta,
                    esc(&e.rule_text()),
                    if e.required || e.status == "passed" {
                        e.status.to_uppercase()
                    } else {
                        format!("{} (advisory)", e.status.to_uppercase())
                    },
                ]
            })
            .collect();
        out.push_str(&qual_json::table::render(&header, &rows));
        for e in &report.metric_evaluations {
            if let Some(reason) = &e.reason {
                let _ = writeln!(out, "{}: {}", esc(&e.scope), esc(reason));
            }
        }
    }
    out
}
