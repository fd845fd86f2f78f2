//! Receipt comparison under a committed workload's comparison policy (the original
//! implementation's `compare_receipts.py`, version d457a89c).
//!
//! This module owns: loading two receipts (strictly, validated, identified by the SHA-256 of
//! their exact bytes), loading the workload manifest (it must resolve under
//! `<root>/qualification/workloads/`, equal its committed bytes at HEAD and validate), binding
//! each receipt to the manifest, selecting the comparison mode, the identity checks that produce
//! rejected and allowed differences, the evidence checks, and the metric rules evaluated in
//! exact decimal arithmetic.
//!
//! Invariants:
//! - nothing is compared unless it is admitted: any rejected difference or compatibility error
//!   means no metric is evaluated (`compatible: false`), and any evidence error (a failed
//!   verdict, a failed required result, a result outside the selected variant) means no metric
//!   is evaluated either — so failed rows never contribute a delta;
//! - "JSON equality" is canonical-JSON text equality, so `1`, `1.0` and `true` differ;
//! - the environment identity excludes [`VOLATILE_ENVIRONMENT_LEAVES`] (momentary free memory,
//!   temperatures, pressure); when those differ they are listed as allowed
//!   `environment_observation` differences (a deliberate difference from the original);
//! - a refusal to compare at all (unloadable or invalid input, a receipt bound to another
//!   workload, a vacuous self-comparison, an unsupported mode) is a [`CompareError`] whose text
//!   says what differed;
//! - the report is a plain data structure whose JSON form has sorted keys and is stable.

use crate::decimal::Decimal;
use crate::validate;
use qual_json::{Number, Object, Value};
use serde::Serialize;
use std::cmp::Ordering;
use std::path::{Path, PathBuf};

/// Repository-relative directory a workload manifest must live in.
pub const WORKLOAD_DIRECTORY: &str = "qualification/workloads";

/// Why two receipts could not be compared at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CompareError {
    /// What was refused and why (reads after "comparison failed: ").
    pub message: String,
}

fn refuse(message: impl Into<String>) -> CompareError {
    CompareError {
        message: message.into(),
    }
}

/// A receipt that loaded and passed basic validation.
#[derive(Clone, Debug)]
pub struct LoadedReceipt {
    /// The path as given.
    pub path: PathBuf,
    /// The strictly parsed document.
    pub value: Value,
    /// `sha256:` of the exact file bytes.
    pub sha256: String,
}

impl LoadedReceipt {
    /// Builds a loaded receipt from bytes (strict JSON, object, basic validation).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<LoadedReceipt, CompareError> {
        let value = qual_json::from_slice(bytes)
            .map_err(|e| refuse(format!("cannot load receipt {}: {e}", path.display())))?;
        if value.as_object().is_none() {
            return Err(refuse(format!(
                "receipt {} must be a JSON object",
                path.display()
            )));
        }
        let violations = validate::validate(&value);
        if !violations.is_empty() {
            let detail: String = violations.iter().map(|v| format!("\n  - {v}")).collect();
            return Err(refuse(format!(
                "receipt {} failed validation:{detail}",
                path.display()
            )));
        }
        Ok(LoadedReceipt {
            path: path.to_path_buf(),
            value,
            sha256: qual_json::sha256_prefixed(bytes),
        })
    }

    /// Reads and loads a receipt file.
    pub fn load(path: &Path) -> Result<LoadedReceipt, CompareError> {
        let bytes = qual_json::read_file_limited(path, 64 * 1024 * 1024)
            .map_err(|e| refuse(format!("cannot read receipt {}: {e}", path.display())))?;
        LoadedReceipt::from_bytes(path, &bytes)
    }
}

/// A workload manifest that is committed at HEAD, byte for byte, and valid.
#[derive(Clone, Debug)]
pub struct LoadedManifest {
    root: PathBuf,
    relative: PathBuf,
    value: Value,
    sha256: String,
}

impl LoadedManifest {
    /// The manifest path relative to the repository root.
    pub fn relative_path(&self) -> &Path {
        &self.relative
    }
    /// `sha256:` of the manifest bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
    /// The strictly parsed manifest.
    pub fn value(&self) -> &Value {
        &self.value
    }
}

fn committed_bytes(root: &Path, relative: &Path) -> Result<Vec<u8>, CompareError> {
    let rel = relative.to_string_lossy().replace('\\', "/");
    match qual_git::Repo::new(root).show_head(&rel) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(refuse(format!(
            "workload manifest must be committed at HEAD: {rel}"
        ))),
        Err(e) => Err(refuse(format!(
            "workload manifest must be committed at HEAD: {rel} (failed to read it: {e})"
        ))),
    }
}

/// Loads a workload manifest that must resolve under `<root>/qualification/workloads/`, end in
/// `.json`, equal its committed HEAD bytes exactly and pass workload validation.
pub fn load_committed_manifest(path: &Path, root: &Path) -> Result<LoadedManifest, CompareError> {
    let root = root
        .canonicalize()
        .map_err(|e| refuse(format!("cannot resolve root {}: {e}", root.display())))?;
    let workloads = root.join(WORKLOAD_DIRECTORY);
    let outside = || {
        refuse(format!(
            "workload manifest must resolve under {}",
            workloads.display()
        ))
    };
    let resolved = path.canonicalize().map_err(|_| outside())?;
    let relative = resolved
        .strip_prefix(&root)
        .map_err(|_| outside())?
        .to_path_buf();
    if !relative.starts_with(WORKLOAD_DIRECTORY) {
        return Err(outside());
    }
    if resolved.extension().and_then(|e| e.to_str()) != Some("json") {
        return Err(refuse("workload manifest must be a JSON file"));
    }
    let limit = 8 * 1024 * 1024;
    let bytes = qual_json::read_file_limited(&resolved, limit).map_err(|e| {
        refuse(format!(
            "cannot read workload manifest {}: {e}",
            resolved.display()
        ))
    })?;
    if bytes != committed_bytes(&root, &relative)? {
        return Err(refuse(format!(
            "workload manifest must exactly match its committed HEAD version: {}",
            relative.display()
        )));
    }
    let value = qual_json::from_slice(&bytes).map_err(|e| {
        refuse(format!(
            "cannot load workload manifest {}: {e}",
            relative.display()
        ))
    })?;
    if value.as_object().is_none() {
        return Err(refuse(format!(
            "workload manifest {} must be a JSON object",
            relative.display()
        )));
    }
    let violations = qual_contract::validate_workload(&value);
    if !violations.is_empty() {
        let detail: String = violations.iter().map(|v| format!("\n  - {v}")).collect();
        return Err(refuse(format!(
            "workload manifest {} failed validation:{detail}",
            relative.display()
        )));
    }
    let reread = qual_json::read_file_limited(&resolved, limit).ok();
    if reread.as_deref() != Some(&bytes[..]) {
        return Err(refuse(format!(
            "workload manifest changed while it was being loaded: {}",
            relative.display()
        )));
    }
    Ok(LoadedManifest {
        root,
        relative,
        sha256: qual_json::sha256_prefixed(&bytes),
        value,
    })
}

fn verify_committed(manifest: &LoadedManifest) -> Result<(), CompareError> {
    let current = load_committed_manifest(&manifest.root.join(&manifest.relative), &manifest.root)?;
    if current.sha256 != manifest.sha256 || canon(&current.value) != canon(&manifest.value) {
        return Err(refuse(
            "comparison policy must come from the exact committed workload",
        ));
    }
    Ok(())
}

/// The comparison mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Two environment receipts without a workload: everything must be equal.
    StrictNoWorkload,
    /// Two receipts of an environment workload without a policy: strict equality.
    StrictEnvironmentWorkload,
    /// Same variant, same environment; metric rules decide.
    SameEnvironmentPerformance,
    /// A declared directional (baseline, candidate) variant pair.
    DeclaredAbVariants,
    /// A declared backend pair; correctness metrics must be equal; no deltas.
    CrossBackendCorrectness,
}

impl Mode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::StrictNoWorkload => "strict_no_workload",
            Mode::StrictEnvironmentWorkload => "strict_environment_workload",
            Mode::SameEnvironmentPerformance => "same_environment_performance",
            Mode::DeclaredAbVariants => "declared_ab_variants",
            Mode::CrossBackendCorrectness => "cross_backend_correctness",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rejected or allowed difference between the two receipts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    /// The baseline side's value (absent side: `null`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<serde_json::Value>,
    /// Whether the path exists in the baseline (environment differences only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_present: Option<bool>,
    /// The candidate side's value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate: Option<serde_json::Value>,
    /// Whether the path exists in the candidate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate_present: Option<bool>,
    /// What was compared: `source`, `model`, `workload`, `effective_config`, `environment`…
    pub compatibility: String,
    /// The declared configuration (effective-config side mismatches only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<serde_json::Value>,
    /// The receipt's configuration (effective-config side mismatches only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<serde_json::Value>,
    /// A dot-path inside the compared object, when the difference is about one leaf.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `baseline` or `candidate` (effective-config side mismatches only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side: Option<String>,
    /// Human lines naming each differing leaf (`environment.runtime.rocm: "6.1" -> "6.2"`).
    #[serde(skip)]
    pub detail: Vec<String>,
}

impl Difference {
    fn pair(compatibility: &str, baseline: &Value, candidate: &Value) -> Difference {
        Difference {
            baseline: Some(json_of(baseline)),
            baseline_present: None,
            candidate: Some(json_of(candidate)),
            candidate_present: None,
            compatibility: compatibility.to_owned(),
            expected: None,
            observed: None,
            path: None,
            side: None,
            detail: leaf_differences(baseline, candidate, ""),
        }
    }

    /// `compatibility[ path]`, as the text report names it.
    pub fn describe(&self) -> String {
        match (&self.path, &self.side) {
            (Some(p), _) => format!("{} {p}", self.compatibility),
            (None, Some(s)) => format!("{} ({s})", self.compatibility),
            _ => self.compatibility.clone(),
        }
    }
}

/// Both sides' differences, rejected and allowed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Compatibility {
    /// Differences the policy admits (listed, never hidden).
    pub allowed_differences: Vec<Difference>,
    /// Differences that make the receipts incomparable.
    pub rejected_differences: Vec<Difference>,
}

/// One receipt's identity in the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Side {
    /// Path (root-relative when possible).
    pub path: String,
    /// `receipt_id`.
    pub receipt_id: String,
    /// `sha256:` of the receipt bytes.
    pub sha256: String,
    /// `qualification.verdict`.
    pub verdict: String,
}

/// The manifest's identity in the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ManifestSide {
    /// Root-relative path.
    pub path: String,
    /// `sha256:` of the manifest bytes.
    pub sha256: String,
    /// `workload_id`.
    pub workload_id: String,
}

/// One metric rule's evaluation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evaluation {
    /// `candidate - baseline` (null when not finite or not computed).
    pub absolute_change: Option<serde_json::Value>,
    /// The rule's absolute tolerance.
    pub absolute_tolerance: serde_json::Value,
    /// The rule's aggregation.
    pub aggregation: String,
    /// The baseline value (null when missing).
    pub baseline: Option<serde_json::Value>,
    /// The candidate value (null when missing).
    pub candidate: Option<serde_json::Value>,
    /// Whether lower values are better.
    pub lower_is_better: bool,
    /// `correctness` or `performance`.
    pub metric_class: String,
    /// `equal`, `not_greater` or `not_less`.
    pub operator: String,
    /// Why the rule did not pass.
    pub reason: Option<String>,
    /// `change / |baseline| * 100` (null when the baseline is zero or not finite).
    pub relative_change_percent: Option<f64>,
    /// The rule's relative tolerance (a fraction).
    pub relative_tolerance: serde_json::Value,
    /// Whether a failure fails the comparison.
    pub required: bool,
    /// `results/<result_id>/metrics/<metric>`.
    pub scope: String,
    /// `passed`, `failed` or `skipped`.
    pub status: String,
    /// The rule's unit.
    pub unit: String,
}

impl Evaluation {
    /// A short text of the rule: `not_less, tolerance max(0, 10% of |baseline|)`.
    pub fn rule_text(&self) -> String {
        let abs = json_text(&self.absolute_tolerance);
        let rel = json_text(&self.relative_tolerance);
        format!("{} ±max({abs}, {rel}×|base|)", self.operator)
    }
}

/// A result whose status differs between the two receipts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatusChange {
    /// Baseline status.
    pub baseline: String,
    /// Candidate status.
    pub candidate: String,
    /// Result id.
    pub id: String,
}

/// The full comparison report (fields in sorted order, so its JSON has sorted keys).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComparisonReport {
    /// The baseline receipt.
    pub baseline: Side,
    /// The candidate receipt.
    pub candidate: Side,
    /// True iff nothing was rejected and no compatibility error was found.
    pub compatible: bool,
    /// Rejected and allowed differences.
    pub compatibility: Compatibility,
    /// Every error, in report order.
    pub errors: Vec<String>,
    /// Evidence errors (verdicts, results outside the variant, runner-metric evidence).
    pub evidence_errors: Vec<String>,
    /// Copies of the evaluations, except in cross-backend mode (no deltas there).
    pub metric_deltas: Vec<Evaluation>,
    /// Every metric rule's evaluation (empty unless compatible with clean evidence).
    pub metric_evaluations: Vec<Evaluation>,
    /// The comparison mode.
    pub mode: Mode,
    /// True iff compatible, no evidence error and no required rule failed.
    pub ok: bool,
    /// Results whose status changed (only when compatible).
    pub result_status_changes: Vec<StatusChange>,
    /// The manifest, when one was used.
    pub workload_manifest: Option<ManifestSide>,
}

/// A qual-json value as serde JSON (integers beyond 64 bits become their decimal text).
pub fn json_of(v: &Value) -> serde_json::Value {
    v.to_serde().unwrap_or_else(|| match v {
        Value::Number(Number::Int(i)) => serde_json::Value::String(i.to_string()),
        Value::Array(a) => serde_json::Value::Array(a.iter().map(json_of).collect()),
        Value::Object(o) => {
            serde_json::Value::Object(o.iter().map(|(k, v)| (k.clone(), json_of(v))).collect())
        }
        _ => serde_json::Value::Null,
    })
}

fn json_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn canon(v: &Value) -> String {
    qual_json::to_canonical_string(v)
}

fn json_eq(a: &Value, b: &Value) -> bool {
    canon(a) == canon(b)
}

static NULL: Value = Value::Null;

fn at<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key).unwrap_or(&NULL)
}

fn at2<'a>(v: &'a Value, a: &str, b: &str) -> &'a Value {
    at(at(v, a), b)
}

fn s(v: &Value) -> String {
    v.as_str().map_or_else(|| canon(v), str::to_owned)
}

fn obj(entries: Vec<(&str, Value)>) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<Object>(),
    )
}

fn arr(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

/// Human lines naming each differing leaf between two values (dot paths; `<root>` for a
/// difference at the top).
fn leaf_differences(a: &Value, b: &Value, prefix: &str) -> Vec<String> {
    config_difference_paths(a, b, prefix)
        .into_iter()
        .map(|path| {
            let pick = |v: &Value| {
                if path == "<root>" {
                    Some(v.clone())
                } else {
                    dot_value(v, &path).cloned()
                }
            };
            let show = |x: Option<Value>| x.map_or_else(|| "(absent)".to_owned(), |v| canon(&v));
            format!("{path}: {} -> {}", show(pick(a)), show(pick(b)))
        })
        .collect()
}

/// The original's `_config_difference_paths`.
fn config_difference_paths(a: &Value, b: &Value, prefix: &str) -> Vec<String> {
    if json_eq(a, b) {
        return Vec::new();
    }
    if let (Some(x), Some(y)) = (a.as_object(), b.as_object()) {
        let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut out = Vec::new();
        for key in keys {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            match (x.get(key), y.get(key)) {
                (Some(p), Some(q)) => out.extend(config_difference_paths(p, q, &path)),
                _ => out.push(path),
            }
        }
        return out;
    }
    vec![if prefix.is_empty() {
        "<root>".to_owned()
    } else {
        prefix.to_owned()
    }]
}

fn dot_value<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for seg in path.split('.') {
        cur = cur.as_object()?.get(seg)?;
    }
    Some(cur)
}

fn model_identity(model: &Value) -> Value {
    if model.is_null() {
        return Value::Null;
    }
    let mut weights: Vec<Value> = arr(at(model, "weight_files")).to_vec();
    weights.sort_by_key(|p| s(at(p, "path")));
    obj(vec![
        ("id", at(model, "id").clone()),
        ("weight_files", Value::Array(weights)),
        ("config_hash", at(model, "config_hash").clone()),
        ("tokenizer_hash", at(model, "tokenizer_hash").clone()),
        (
            "chat_template_hash",
            at(model, "chat_template_hash").clone(),
        ),
    ])
}

fn metric_definition(metric: &Value) -> Value {
    obj(vec![
        ("name", at(metric, "name").clone()),
        ("unit", at(metric, "unit").clone()),
        ("aggregation", at(metric, "aggregation").clone()),
        ("lower_is_better", at(metric, "lower_is_better").clone()),
    ])
}

/// Metrics by scope: `receipt.metrics/<name>` and `results/<id>/metrics/<name>`.
fn metrics_by_scope(receipt: &Value) -> Vec<(String, &Value)> {
    fn put<'a>(out: &mut Vec<(String, &'a Value)>, scope: String, m: &'a Value) {
        if let Some(slot) = out.iter_mut().find(|(k, _)| *k == scope) {
            slot.1 = m;
        } else {
            out.push((scope, m));
        }
    }
    let mut out: Vec<(String, &Value)> = Vec::new();
    for m in arr(at(receipt, "metrics")) {
        put(&mut out, format!("receipt.metrics/{}", s(at(m, "name"))), m);
    }
    for r in arr(at(receipt, "results")) {
        for m in arr(at(r, "metrics")) {
            let scope = format!("results/{}/metrics/{}", s(at(r, "id")), s(at(m, "name")));
            put(&mut out, scope, m);
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn lookup<'a>(metrics: &[(String, &'a Value)], scope: &str) -> Option<&'a Value> {
    metrics.iter().find(|(k, _)| k == scope).map(|(_, v)| *v)
}

fn sorted_by_key(items: &[Value], key: &str) -> Vec<Value> {
    let mut v = items.to_vec();
    v.sort_by_key(|p| s(at(p, key)));
    v
}

fn metric_identity(receipt: &Value) -> Value {
    let results: Vec<Value> = sorted_by_key(arr(at(receipt, "results")), "id")
        .iter()
        .map(|r| {
            obj(vec![
                ("id", at(r, "id").clone()),
                ("required", at(r, "required").clone()),
            ])
        })
        .collect();
    let metrics: Object = metrics_by_scope(receipt)
        .into_iter()
        .map(|(scope, m)| (scope, metric_definition(m)))
        .collect();
    obj(vec![
        ("results", Value::Array(results)),
        ("metrics", Value::Object(metrics)),
    ])
}

fn strict_result_identity(receipt: &Value) -> Value {
    Value::Array(
        sorted_by_key(arr(at(receipt, "results")), "id")
            .iter()
            .map(|r| {
                obj(vec![
                    ("id", at(r, "id").clone()),
                    ("required", at(r, "required").clone()),
                    ("status", at(r, "status").clone()),
                    (
                        "metrics",
                        Value::Array(sorted_by_key(arr(at(r, "metrics")), "name")),
                    ),
                ])
            })
            .collect(),
    )
}

fn workload_base_identity(workload: &Value) -> Value {
    let params: Object = at(workload, "parameters")
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| k.as_str() != "variant_id")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    obj(vec![
        ("id", at(workload, "id").clone()),
        ("sha256", at(workload, "sha256").clone()),
        ("seed", at(workload, "seed").clone()),
        ("parameters", Value::Object(params)),
    ])
}

fn add_difference(out: &mut Vec<Difference>, compatibility: &str, a: &Value, b: &Value) {
    if !json_eq(a, b) {
        out.push(Difference::pair(compatibility, a, b));
    }
}

fn variant<'a>(manifest: &'a Value, id: &str) -> Option<&'a Value> {
    arr(at(manifest, "variants"))
        .iter()
        .find(|v| at(v, "id").as_str() == Some(id))
}

fn repr(text: &str) -> String {
    qual_json::show::quote(text)
}

/// Binds both receipts to the manifest; returns the selected variant ids.
fn bind(
    baseline: &LoadedReceipt,
    candidate: &LoadedReceipt,
    manifest: &LoadedManifest,
) -> Result<(String, String), CompareError> {
    let m = &manifest.value;
    let mut selected = Vec::with_capacity(2);
    for (label, receipt) in [("baseline", baseline), ("candidate", candidate)] {
        let workload = at(&receipt.value, "workload");
        if workload.as_object().is_none() {
            return Err(refuse(format!(
                "{label} receipt must name a workload manifest"
            )));
        }
        if !json_eq(at(workload, "id"), at(m, "workload_id")) {
            return Err(refuse(format!(
                "{label} receipt workload id {} does not match committed manifest {}",
                s(at(workload, "id")),
                s(at(m, "workload_id"))
            )));
        }
        if at(workload, "sha256").as_str() != Some(manifest.sha256.as_str()) {
            return Err(refuse(format!(
                "{label} receipt workload sha256 does not match exact committed manifest bytes \
                 ({} != {})",
                s(at(workload, "sha256")),
                manifest.sha256
            )));
        }
        if !json_eq(at(workload, "seed"), at2(m, "determinism", "seed")) {
            return Err(refuse(format!(
                "{label} receipt seed does not match workload manifest ({} != {})",
                canon(at(workload, "seed")),
                canon(at2(m, "determinism", "seed"))
            )));
        }
        let errors = qual_contract::validate_workload_parameters(m, at(workload, "parameters"));
        if !errors.is_empty() {
            let detail: String = errors.iter().map(|e| format!("\n  - {e}")).collect();
            return Err(refuse(format!(
                "{label} receipt parameters do not match committed workload:{detail}"
            )));
        }
        let variant_id = at2(workload, "parameters", "variant_id").as_str();
        let Some((variant_id, declared)) =
            variant_id.and_then(|id| variant(m, id).map(|v| (id, v)))
        else {
            return Err(refuse(format!(
                "{label} receipt workload.parameters.variant_id must name a declared variant"
            )));
        };
        let backend = at2(&receipt.value, "qualification", "backend");
        if !json_eq(backend, at(declared, "backend")) {
            return Err(refuse(format!(
                "{label} receipt backend {} does not match variant {} backend {}",
                repr(&s(backend)),
                repr(variant_id),
                repr(&s(at(declared, "backend")))
            )));
        }
        let kind = at2(&receipt.value, "qualification", "kind");
        if !json_eq(kind, at(m, "kind")) {
            return Err(refuse(format!(
                "{label} receipt kind {} does not match workload kind {}",
                repr(&s(kind)),
                repr(&s(at(m, "kind")))
            )));
        }
        selected.push(variant_id.to_owned());
    }
    let candidate_variant = selected.pop().unwrap_or_default();
    let baseline_variant = selected.pop().unwrap_or_default();
    Ok((baseline_variant, candidate_variant))
}

/// The canonical definition of a runner-owned metric (repetitions do not change it).
pub fn runner_metric_definition(name: &str) -> Option<(&'static str, &'static str, bool)> {
    match name {
        "case_pass" => Some(("bool", "exact", false)),
        "exit_code" => Some(("code", "exact", false)),
        "output_assertion_failures" => Some(("count", "sum", true)),
        _ => None,
    }
}

fn required_result_errors(receipt: &Value, variant: &Value, label: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let results = arr(at(receipt, "results"));
    let find = |id: &str| results.iter().find(|r| at(r, "id").as_str() == Some(id));
    let cases = arr(at(variant, "cases"));
    if at2(receipt, "qualification", "verdict").as_str() != Some("passed") {
        errors.push(format!("{label} receipt verdict must be passed"));
    }
    let expected: Vec<String> = cases.iter().map(|c| s(at(c, "id"))).collect();
    let actual: Vec<String> = results.iter().map(|r| s(at(r, "id"))).collect();
    let mut missing: Vec<&String> = expected.iter().filter(|e| !actual.contains(e)).collect();
    missing.sort();
    let mut extra: Vec<&String> = actual.iter().filter(|a| !expected.contains(a)).collect();
    extra.sort();
    let join = |v: &[&String]| v.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(", ");
    if !missing.is_empty() {
        errors.push(format!(
            "{label} receipt is missing declared results: {}",
            join(&missing)
        ));
    }
    if !extra.is_empty() {
        errors.push(format!(
            "{label} receipt contains undeclared results: {}",
            join(&extra)
        ));
    }
    let mut both: Vec<&String> = expected.iter().filter(|e| actual.contains(e)).collect();
    both.sort();
    both.dedup();
    for id in both {
        let case_required = cases
            .iter()
            .find(|c| at(c, "id").as_str() == Some(id))
            .map(|c| at(c, "required"));
        let result_required = find(id).map(|r| at(r, "required"));
        if case_required.and_then(Value::as_bool).is_none()
            || case_required.and_then(Value::as_bool) != result_required.and_then(Value::as_bool)
        {
            errors.push(format!(
                "{label} result {} required flag does not match selected variant",
                repr(id)
            ));
        }
    }
    for case in cases {
        let id = s(at(case, "id"));
        let result = find(&id);
        let required = at(case, "required").as_bool() == Some(true);
        if required && result.is_some_and(|r| at(r, "status").as_str() != Some("passed")) {
            errors.push(format!(
                "{label} required result {} did not pass",
                repr(&id)
            ));
        }
        let protocol = at(case, "result_protocol");
        let Some(result) = result else { continue };
        let mut declared: Vec<String> = arr(at(protocol, "declared_metrics"))
            .iter()
            .map(s)
            .collect();
        declared.sort();
        declared.dedup();
        let mut names: Vec<String> = arr(at(result, "metrics"))
            .iter()
            .map(|m| s(at(m, "name")))
            .collect();
        names.sort();
        names.dedup();
        if names != declared {
            errors.push(format!(
                "{label} result {} metric names do not match selected variant",
                repr(&id)
            ));
        }
        if at(protocol, "producer").as_str() != Some("runner") {
            continue;
        }
        let metric = |name: &str| {
            arr(at(result, "metrics"))
                .iter()
                .rev()
                .find(|m| at(m, "name").as_str() == Some(name))
        };
        for name in arr(at(protocol, "declared_metrics")).iter().map(s) {
            let (Some(m), Some((unit, aggregation, lower))) =
                (metric(&name), runner_metric_definition(&name))
            else {
                continue;
            };
            if at(m, "unit").as_str() != Some(unit)
                || at(m, "aggregation").as_str() != Some(aggregation)
                || at(m, "lower_is_better").as_bool() != Some(lower)
            {
                errors.push(format!(
                    "{label} runner result {} metric {} has non-canonical definition",
                    repr(&id),
                    repr(&name)
                ));
            }
        }
        let Some(case_pass) = metric("case_pass") else {
            continue;
        };
        let status = s(at(result, "status"));
        let expected_value: i64 = if status == "passed" { 1 } else { 0 };
        let value = at(case_pass, "value");
        let valid = validate::is_finite_number(value)
            && validate::py_eq(value, &Value::from(expected_value));
        if !valid {
            errors.push(format!(
                "{label} runner result {} case_pass must be numeric {expected_value} for status {}",
                repr(&id),
                repr(&status)
            ));
        }
        if status == "passed" {
            if let Some(exit) = metric("exit_code") {
                let code = at(exit, "value");
                let allowed = code.as_int().is_some()
                    && arr(at(case, "expected_exit_codes"))
                        .iter()
                        .any(|c| validate::py_eq(c, code));
                if !allowed {
                    errors.push(format!(
                        "{label} passed runner result {} exit_code must be an allowed integer \
                         agreed across all repetitions",
                        repr(&id)
                    ));
                }
            }
            if let Some(failures) = metric("output_assertion_failures") {
                let v = at(failures, "value");
                let zero = !matches!(v, Value::Bool(_)) && validate::py_eq(v, &Value::from(0i64));
                if !zero {
                    errors.push(format!(
                        "{label} passed runner result {} output_assertion_failures must be numeric 0",
                        repr(&id)
                    ));
                }
            }
        }
    }
    errors
}

fn rule_scope(rule: &Value) -> String {
    format!(
        "results/{}/metrics/{}",
        s(at(rule, "result_id")),
        s(at(rule, "metric"))
    )
}

/// `candidate - baseline` with Python's numeric semantics, or `None` when not finite.
fn finite_change(candidate: &Value, baseline: &Value) -> Option<Value> {
    match (candidate, baseline) {
        (Value::Number(Number::Int(c)), Value::Number(Number::Int(b))) => {
            let d = Decimal::from_int(c).sub(&Decimal::from_int(b));
            let text = d.to_string();
            let int = qual_json::from_str(&text).ok()?;
            int.as_f64()?;
            Some(int)
        }
        _ => {
            let d = candidate.as_f64()? - baseline.as_f64()?;
            d.is_finite().then(|| Value::from(d))
        }
    }
}

fn evaluate_rule(
    rule: &Value,
    baseline_metrics: &[(String, &Value)],
    candidate_metrics: &[(String, &Value)],
) -> Evaluation {
    let scope = rule_scope(rule);
    let required = at(rule, "required").as_bool() == Some(true);
    let operator = s(at(rule, "operator"));
    let mut e = Evaluation {
        absolute_change: None,
        absolute_tolerance: json_of(at(rule, "absolute_tolerance")),
        aggregation: s(at(rule, "aggregation")),
        baseline: None,
        candidate: None,
        lower_is_better: at(rule, "lower_is_better").as_bool() == Some(true),
        metric_class: s(at(rule, "metric_class")),
        operator: operator.clone(),
        reason: None,
        relative_change_percent: None,
        relative_tolerance: json_of(at(rule, "relative_tolerance")),
        required,
        scope: scope.clone(),
        status: String::new(),
        unit: s(at(rule, "unit")),
    };
    let before = lookup(baseline_metrics, &scope);
    let after = lookup(candidate_metrics, &scope);
    let (Some(before), Some(after)) = (before, after) else {
        e.status = if required { "failed" } else { "skipped" }.to_owned();
        e.reason = Some("declared metric is missing from one or both receipts".to_owned());
        e.baseline = before.map(|m| json_of(at(m, "value")));
        e.candidate = after.map(|m| json_of(at(m, "value")));
        return e;
    };
    let b = at(before, "value");
    let c = at(after, "value");
    let change = finite_change(c, b);
    let decimals = (
        Decimal::from_value(b),
        Decimal::from_value(c),
        Decimal::from_value(at(rule, "absolute_tolerance")),
        Decimal::from_value(at(rule, "relative_tolerance")),
    );
    let (passed, violation, tolerance) = match decimals {
        (Some(bd), Some(cd), Some(abs_tol), Some(rel_tol)) => {
            let scaled = bd.abs().mul(&rel_tol);
            let tolerance = if scaled.cmp_value(&abs_tol) == Ordering::Greater {
                scaled
            } else {
                abs_tol
            };
            let positive = |d: Decimal| {
                if d.cmp_value(&Decimal::zero()) == Ordering::Greater {
                    d
                } else {
                    Decimal::zero()
                }
            };
            let violation = match operator.as_str() {
                "equal" => cd.sub(&bd).abs(),
                "not_greater" => positive(cd.sub(&bd)),
                _ => positive(bd.sub(&cd)),
            };
            let passed = violation.cmp_value(&tolerance) != Ordering::Greater;
            (passed, violation.to_string(), tolerance.to_string())
        }
        _ => (false, "NaN".to_owned(), "NaN".to_owned()),
    };
    let baseline_nonzero = !validate::py_eq(b, &Value::from(0i64));
    if baseline_nonzero {
        if let (Some(ch), Some(base)) = (change.as_ref().and_then(Value::as_f64), b.as_f64()) {
            let rel = ch / base.abs() * 100.0;
            if rel.is_finite() {
                e.relative_change_percent = Some(rel);
            }
        }
    }
    e.status = if passed { "passed" } else { "failed" }.to_owned();
    e.reason = (!passed).then(|| format!("violation {violation} exceeds tolerance {tolerance}"));
    e.baseline = Some(json_of(b));
    e.candidate = Some(json_of(c));
    e.absolute_change = change.as_ref().map(json_of);
    e
}

fn metric_policy_errors(
    policy: &Value,
    baseline_metrics: &[(String, &Value)],
    candidate_metrics: &[(String, &Value)],
) -> Vec<String> {
    let mut errors = Vec::new();
    for rule in arr(at(policy, "metric_rules")) {
        let scope = rule_scope(rule);
        let expected = obj(vec![
            ("name", at(rule, "metric").clone()),
            ("unit", at(rule, "unit").clone()),
            ("aggregation", at(rule, "aggregation").clone()),
            ("lower_is_better", at(rule, "lower_is_better").clone()),
        ]);
        for (label, metrics) in [
            ("baseline", baseline_metrics),
            ("candidate", candidate_metrics),
        ] {
            if let Some(m) = lookup(metrics, &scope) {
                if !validate::py_eq(&metric_definition(m), &expected) {
                    errors.push(format!(
                        "{label} metric {} definition does not match committed rule",
                        repr(&scope)
                    ));
                }
            }
        }
    }
    errors
}

fn allowed_environment_differences(
    baseline: &Value,
    candidate: &Value,
    allowed_paths: &[String],
) -> (Vec<Difference>, Vec<Difference>, Vec<String>) {
    let mut allowed = Vec::new();
    let mut rejected = Vec::new();
    let mut errors = Vec::new();
    for path in allowed_paths {
        let before = dot_value(baseline, path);
        let after = dot_value(candidate, path);
        let composite = |v: Option<&Value>| matches!(v, Some(Value::Object(_) | Value::Array(_)));
        if before.is_none() && after.is_none() {
            errors.push(format!(
                "allowed environment path {} is absent from both receipts",
                repr(path)
            ));
        } else if composite(before) || composite(after) {
            errors.push(format!(
                "allowed environment path {} must name a scalar leaf",
                repr(path)
            ));
        } else if let (Some(x), Some(y)) = (before, after) {
            if json_eq(x, y) {
                errors.push(format!(
                    "allowed environment path {} is unused because its values are equal",
                    repr(path)
                ));
                continue;
            }
            allowed.push(env_allowed(path, before, after));
        } else {
            allowed.push(env_allowed(path, before, after));
        }
    }
    for path in config_difference_paths(baseline, candidate, "") {
        if !allowed_paths.contains(&path) {
            let mut d = Difference::pair("environment", baseline, candidate);
            d.detail = leaf_differences(baseline, candidate, "")
                .into_iter()
                .filter(|line| line.starts_with(&format!("{path}:")))
                .collect();
            d.path = Some(path);
            rejected.push(d);
        }
    }
    (allowed, rejected, errors)
}

fn env_allowed(path: &str, before: Option<&Value>, after: Option<&Value>) -> Difference {
    Difference {
        baseline: Some(before.map_or(serde_json::Value::Null, json_of)),
        baseline_present: Some(before.is_some()),
        candidate: Some(after.map_or(serde_json::Value::Null, json_of)),
        candidate_present: Some(after.is_some()),
        compatibility: "environment".to_owned(),
        expected: None,
        observed: None,
        path: Some(path.to_owned()),
        side: None,
        detail: Vec::new(),
    }
}

fn variant_difference(compatibility: &str, a: &str, b: &str) -> Difference {
    Difference::pair(compatibility, &Value::from(a), &Value::from(b))
}

/// Environment leaves that record a momentary observation of the machine (free memory, swap in
/// use, temperatures, pressure), not the identity of the environment. Two runs on one host
/// always differ there, so they are listed as allowed `environment_observation` differences
/// instead of making every pair of real receipts incomparable. (Deliberate difference: the
/// original compares them as identity.)
pub const VOLATILE_ENVIRONMENT_LEAVES: [&str; 7] = [
    "device.memory_available_bytes",
    "platform.observations.gpu_temperature",
    "platform.observations.host_temperatures",
    "platform.observations.memory_pressure",
    "platform.observations.metal_runtime.current_allocated_bytes",
    "platform.observations.thermal_pressure",
    "platform.observations.unified_memory.swap_used_bytes",
];

fn without(v: &Value, path: &[&str]) -> Value {
    match (v, path) {
        (Value::Object(o), [key]) => Value::Object(
            o.iter()
                .filter(|(k, _)| k.as_str() != *key)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        (Value::Object(o), [key, rest @ ..]) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    let v = if k == key {
                        without(v, rest)
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        _ => v.clone(),
    }
}

/// The environment without its volatile observations.
fn stable_environment(env: &Value) -> Value {
    VOLATILE_ENVIRONMENT_LEAVES
        .iter()
        .fold(env.clone(), |acc, path| {
            without(&acc, &path.split('.').collect::<Vec<_>>())
        })
}

/// The volatile observations that differ, as allowed differences.
fn volatile_differences(baseline: &Value, candidate: &Value) -> Vec<Difference> {
    VOLATILE_ENVIRONMENT_LEAVES
        .iter()
        .filter_map(|path| {
            let before = dot_value(baseline, path);
            let after = dot_value(candidate, path);
            let same = match (before, after) {
                (Some(x), Some(y)) => json_eq(x, y),
                (None, None) => true,
                _ => false,
            };
            (!same).then(|| {
                let mut d = env_allowed(path, before, after);
                d.compatibility = "environment_observation".to_owned();
                d
            })
        })
        .collect()
}

fn backend_environment(receipt: &Value) -> Value {
    obj(vec![
        ("backend", at2(receipt, "qualification", "backend").clone()),
        (
            "environment",
            stable_environment(at(receipt, "environment")),
        ),
    ])
}

fn side(r: &LoadedReceipt) -> Side {
    Side {
        path: r.path.display().to_string(),
        receipt_id: s(at(&r.value, "receipt_id")),
        sha256: r.sha256.clone(),
        verdict: s(at2(&r.value, "qualification", "verdict")),
    }
}

/// Compares two loaded receipts, under the manifest's policy when one is given.
pub fn compare(
    baseline: &LoadedReceipt,
    candidate: &LoadedReceipt,
    manifest: Option<&LoadedManifest>,
) -> Result<ComparisonReport, CompareError> {
    let b = &baseline.value;
    let c = &candidate.value;
    let mut allowed: Vec<Difference> = Vec::new();
    let mut rejected: Vec<Difference> = Vec::new();
    let mut compatibility_errors: Vec<String> = Vec::new();
    let mut evidence_errors: Vec<String> = Vec::new();
    let mut policy: Option<&Value> = None;
    let mut variants = (String::new(), String::new());
    let mode = match manifest {
        None => {
            if !at(b, "workload").is_null() || !at(c, "workload").is_null() {
                return Err(refuse(
                    "--workload-manifest is required when either receipt names a workload",
                ));
            }
            if [b, c]
                .iter()
                .any(|r| at2(r, "qualification", "kind").as_str() != Some("environment"))
            {
                return Err(refuse(
                    "a committed workload manifest is required for non-environment receipts",
                ));
            }
            Mode::StrictNoWorkload
        }
        Some(m) => {
            verify_committed(m)?;
            variants = bind(baseline, candidate, m)?;
            if json_eq(at(b, "receipt_id"), at(c, "receipt_id")) {
                return Err(refuse(
                    "manifest-bound comparison requires distinct receipt IDs",
                ));
            }
            if baseline.sha256 == candidate.sha256 {
                return Err(refuse(
                    "manifest-bound comparison requires distinct receipt content",
                ));
            }
            let p = at(&m.value, "comparison_policy");
            if p.is_null() && at(&m.value, "kind").as_str() == Some("environment") {
                Mode::StrictEnvironmentWorkload
            } else if p.as_object().is_none() {
                return Err(refuse(
                    "the committed workload does not declare a comparison policy",
                ));
            } else {
                policy = Some(p);
                match at(p, "mode").as_str() {
                    Some("same_environment_performance") => Mode::SameEnvironmentPerformance,
                    Some("declared_ab_variants") => Mode::DeclaredAbVariants,
                    Some("cross_backend_correctness") => Mode::CrossBackendCorrectness,
                    _ => {
                        return Err(refuse(format!(
                            "unsupported workload comparison mode: {}",
                            repr(&s(at(p, "mode")))
                        )))
                    }
                }
            }
        }
    };

    add_difference(
        &mut rejected,
        "qualification_kind",
        at2(b, "qualification", "kind"),
        at2(c, "qualification", "kind"),
    );
    let source = |r: &Value| {
        obj(vec![
            (
                "tree_hash_format",
                at2(r, "source", "tree_hash_format").clone(),
            ),
            ("tree_hash", at2(r, "source", "tree_hash").clone()),
        ])
    };
    add_difference(&mut rejected, "source", &source(b), &source(c));
    add_difference(
        &mut rejected,
        "model",
        &model_identity(at(b, "model")),
        &model_identity(at(c, "model")),
    );
    add_difference(
        &mut rejected,
        "profile",
        at2(b, "qualification", "profile"),
        at2(c, "qualification", "profile"),
    );
    add_difference(
        &mut rejected,
        "metric_identity",
        &metric_identity(b),
        &metric_identity(c),
    );

    match manifest {
        None => {
            add_difference(
                &mut rejected,
                "workload",
                at(b, "workload"),
                at(c, "workload"),
            );
            add_difference(
                &mut rejected,
                "backend_environment",
                &backend_environment(b),
                &backend_environment(c),
            );
            add_difference(
                &mut rejected,
                "effective_config",
                at(b, "effective_config"),
                at(c, "effective_config"),
            );
            for (label, r) in [("baseline", b), ("candidate", c)] {
                if at2(r, "qualification", "verdict").as_str() != Some("passed") {
                    evidence_errors.push(format!("{label} receipt verdict must be passed"));
                }
            }
        }
        Some(m) => {
            let mv = &m.value;
            let (bv, cv) = (&variants.0, &variants.1);
            add_difference(
                &mut rejected,
                "workload",
                &workload_base_identity(at(b, "workload")),
                &workload_base_identity(at(c, "workload")),
            );
            let declared = |id: &str| variant(mv, id).cloned().unwrap_or(Value::Null);
            for (label, observed, id) in [
                ("baseline", at(b, "effective_config"), bv),
                ("candidate", at(c, "effective_config"), cv),
            ] {
                let expected = declared(id);
                let expected = at(&expected, "effective_config");
                if !json_eq(observed, expected) {
                    rejected.push(Difference {
                        baseline: None,
                        baseline_present: None,
                        candidate: None,
                        candidate_present: None,
                        compatibility: "effective_config".to_owned(),
                        expected: Some(json_of(expected)),
                        observed: Some(json_of(observed)),
                        path: None,
                        side: Some(label.to_owned()),
                        detail: leaf_differences(expected, observed, ""),
                    });
                }
            }
            let (be, ce) = (backend_environment(b), backend_environment(c));
            match mode {
                Mode::StrictEnvironmentWorkload | Mode::SameEnvironmentPerformance => {
                    if bv != cv {
                        rejected.push(variant_difference("workload_variant", bv, cv));
                    }
                    add_difference(&mut rejected, "backend_environment", &be, &ce);
                    if mode == Mode::StrictEnvironmentWorkload {
                        add_difference(
                            &mut rejected,
                            "result_evidence",
                            &strict_result_identity(b),
                            &strict_result_identity(c),
                        );
                        add_difference(
                            &mut rejected,
                            "unsupported",
                            at(b, "unsupported"),
                            at(c, "unsupported"),
                        );
                    }
                }
                Mode::DeclaredAbVariants => {
                    let p = policy.unwrap_or(&NULL);
                    let pair = arr(at(p, "variant_pairs")).iter().find(|pair| {
                        at(pair, "baseline_variant_id").as_str() == Some(bv.as_str())
                            && at(pair, "candidate_variant_id").as_str() == Some(cv.as_str())
                    });
                    match pair {
                        None => {
                            compatibility_errors.push(
                                "receipt variants do not match a declared directional A/B variant pair"
                                    .to_owned(),
                            );
                            if bv != cv {
                                rejected.push(variant_difference("workload_variant", bv, cv));
                            }
                        }
                        Some(_) => allowed.push(variant_difference("workload_variant", bv, cv)),
                    }
                    add_difference(&mut rejected, "backend_environment", &be, &ce);
                    if let Some(pair) = pair {
                        let (bcfg, ccfg) = (declared(bv), declared(cv));
                        for path in arr(at(pair, "allowed_effective_config_differences")) {
                            let path = s(path);
                            let before = dot_value(at(&bcfg, "effective_config"), &path);
                            let after = dot_value(at(&ccfg, "effective_config"), &path);
                            let mut d = Difference::pair(
                                "effective_config",
                                before.unwrap_or(&NULL),
                                after.unwrap_or(&NULL),
                            );
                            d.path = Some(path);
                            allowed.push(d);
                        }
                    }
                }
                Mode::CrossBackendCorrectness => {
                    let p = policy.unwrap_or(&NULL);
                    let bb = s(at2(b, "qualification", "backend"));
                    let cb = s(at2(c, "qualification", "backend"));
                    let mut observed = [(bb.clone(), bv.clone()), (cb.clone(), cv.clone())];
                    observed.sort();
                    let pair = arr(at(p, "backend_pairs")).iter().find(|pair| {
                        let mut declared = [
                            (s(at(pair, "backend_a")), s(at(pair, "variant_a_id"))),
                            (s(at(pair, "backend_b")), s(at(pair, "variant_b_id"))),
                        ];
                        declared.sort();
                        let mut obs = observed.to_vec();
                        obs.dedup();
                        let mut dec = declared.to_vec();
                        dec.dedup();
                        obs == dec
                    });
                    match pair {
                        None => {
                            compatibility_errors.push(
                                "receipt backend/variant endpoints do not match a declared cross-backend pair"
                                    .to_owned(),
                            );
                            if bv != cv {
                                rejected.push(variant_difference("workload_variant", bv, cv));
                            }
                            add_difference(&mut rejected, "backend_environment", &be, &ce);
                        }
                        Some(pair) => {
                            allowed.push(variant_difference("workload_variant", bv, cv));
                            allowed.push(variant_difference("backend", &bb, &cb));
                            let paths: Vec<String> =
                                arr(at(pair, "allowed_environment_differences"))
                                    .iter()
                                    .map(s)
                                    .collect();
                            let (a, r, e) = allowed_environment_differences(
                                &stable_environment(at(b, "environment")),
                                &stable_environment(at(c, "environment")),
                                &paths,
                            );
                            allowed.extend(a);
                            rejected.extend(r);
                            compatibility_errors.extend(e);
                        }
                    }
                }
                Mode::StrictNoWorkload => {}
            }
            evidence_errors.extend(required_result_errors(b, &declared(bv), "baseline"));
            evidence_errors.extend(required_result_errors(c, &declared(cv), "candidate"));
            for (label, r) in [("baseline", b), ("candidate", c)] {
                if !arr(at(r, "metrics")).is_empty() {
                    evidence_errors.push(format!(
                        "{label} manifest-bound receipt must keep metrics inside declared results"
                    ));
                }
            }
        }
    }

    allowed.extend(volatile_differences(
        at(b, "environment"),
        at(c, "environment"),
    ));
    let baseline_metrics = metrics_by_scope(b);
    let candidate_metrics = metrics_by_scope(c);
    if let Some(p) = policy {
        compatibility_errors.extend(metric_policy_errors(
            p,
            &baseline_metrics,
            &candidate_metrics,
        ));
    }
    let compatible = rejected.is_empty() && compatibility_errors.is_empty();
    let mut metric_evaluations = Vec::new();
    let mut metric_deltas = Vec::new();
    if compatible && evidence_errors.is_empty() {
        if let Some(p) = policy {
            metric_evaluations = arr(at(p, "metric_rules"))
                .iter()
                .map(|rule| evaluate_rule(rule, &baseline_metrics, &candidate_metrics))
                .collect();
            if mode != Mode::CrossBackendCorrectness {
                metric_deltas = metric_evaluations.clone();
            }
        }
    }
    let rule_failures: Vec<&Evaluation> = metric_evaluations
        .iter()
        .filter(|e| e.required && e.status != "passed")
        .collect();
    let mut result_status_changes = Vec::new();
    if compatible {
        let mut ids: Vec<String> = arr(at(b, "results"))
            .iter()
            .map(|r| s(at(r, "id")))
            .collect();
        ids.sort();
        for id in ids {
            let status = |r: &Value| {
                arr(at(r, "results"))
                    .iter()
                    .find(|x| at(x, "id").as_str() == Some(id.as_str()))
                    .map(|x| s(at(x, "status")))
            };
            if let (Some(before), Some(after)) = (status(b), status(c)) {
                if before != after {
                    result_status_changes.push(StatusChange {
                        baseline: before,
                        candidate: after,
                        id: id.clone(),
                    });
                }
            }
        }
    }
    let mut errors: Vec<String> = rejected
        .iter()
        .map(|d| format!("incompatible {} identity", d.compatibility))
        .collect();
    errors.extend(compatibility_errors.iter().cloned());
    errors.extend(evidence_errors.iter().cloned());
    errors.extend(
        rule_failures
            .iter()
            .map(|e| format!("required metric rule failed: {}", e.scope)),
    );
    let ok = compatible && evidence_errors.is_empty() && rule_failures.is_empty();
    Ok(ComparisonReport {
        baseline: side(baseline),
        candidate: side(candidate),
        compatible,
        compatibility: Compatibility {
            allowed_differences: allowed,
            rejected_differences: rejected,
        },
        errors,
        evidence_errors,
        metric_deltas,
        metric_evaluations,
        mode,
        ok,
        result_status_changes,
        workload_manifest: manifest.map(|m| ManifestSide {
            path: m.relative.display().to_string(),
            sha256: m.sha256.clone(),
            workload_id: s(at(&m.value, "workload_id")),
        }),
    })
}
