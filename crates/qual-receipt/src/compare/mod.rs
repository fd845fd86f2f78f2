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
//!
//! The rule families live in their own files: `load` (reading receipts and the committed
//! manifest, binding each receipt to it), `identity` (the identity checks that reject or
//! allow differences, by mode), `evidence` (what each receipt must show before any metric is
//! admitted) and `metrics` (the metric rules and their deltas). This file owns the report's
//! types, the JSON access helpers they share, and [`compare`], which runs them in order.

mod evidence;
mod identity;
mod load;
mod metrics;

pub use evidence::runner_metric_definition;
pub use identity::VOLATILE_ENVIRONMENT_LEAVES;
pub use load::{
    load_committed_manifest, CompareError, LoadedManifest, LoadedReceipt, WORKLOAD_DIRECTORY,
};

use evidence::{manifest_evidence_errors, verdict_errors};
use identity::{
    leaf_differences, manifest_bound, shared_identity, strict_no_workload, volatile_differences,
};
use load::{bind, refuse, verify_committed};
use metrics::{evaluate_rule, metric_policy_errors, metrics_by_scope};

use crate::validate;
use qual_json::{Number, Object, Value};
use serde::Serialize;

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

fn repr(text: &str) -> String {
    qual_json::show::quote(text)
}

fn side(r: &LoadedReceipt) -> Side {
    Side {
        path: r.path.display().to_string(),
        receipt_id: s(at(&r.value, "receipt_id")),
        sha256: r.sha256.clone(),
        verdict: s(at2(&r.value, "qualification", "verdict")),
    }
}

/// The selected mode, the policy it comes from, and the variants the receipts bind to.
struct Selection<'a> {
    mode: Mode,
    policy: Option<&'a Value>,
    variants: (String, String),
}

/// What the identity and evidence checks found, each list in report order.
#[derive(Default)]
struct Findings {
    allowed: Vec<Difference>,
    rejected: Vec<Difference>,
    compatibility_errors: Vec<String>,
    evidence_errors: Vec<String>,
}

/// Compares two loaded receipts, under the manifest's policy when one is given.
pub fn compare(
    baseline: &LoadedReceipt,
    candidate: &LoadedReceipt,
    manifest: Option<&LoadedManifest>,
) -> Result<ComparisonReport, CompareError> {
    let b = &baseline.value;
    let c = &candidate.value;
    let selection = select_mode(baseline, candidate, manifest)?;
    let mode = selection.mode;
    let mut found = Findings::default();
    shared_identity(&mut found.rejected, b, c);
    match manifest {
        None => {
            strict_no_workload(&mut found.rejected, b, c);
            found.evidence_errors.extend(verdict_errors(b, c));
        }
        Some(m) => {
            manifest_bound(&mut found, b, c, &m.value, &selection);
            let (bv, cv) = &selection.variants;
            found
                .evidence_errors
                .extend(manifest_evidence_errors(b, c, &m.value, bv, cv));
        }
    }
    let Findings {
        mut allowed,
        rejected,
        mut compatibility_errors,
        evidence_errors,
    } = found;
    allowed.extend(volatile_differences(
        at(b, "environment"),
        at(c, "environment"),
    ));
    let baseline_metrics = metrics_by_scope(b);
    let candidate_metrics = metrics_by_scope(c);
    if let Some(p) = selection.policy {
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
        if let Some(p) = selection.policy {
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
    let result_status_changes = if compatible {
        result_status_changes(b, c)
    } else {
        Vec::new()
    };
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

/// Refuses what cannot be compared at all and selects the mode: without a manifest, two
/// environment receipts naming no workload; with one, the committed manifest, both receipts
/// bound to it, distinct receipts, and the policy's mode.
fn select_mode<'a>(
    baseline: &LoadedReceipt,
    candidate: &LoadedReceipt,
    manifest: Option<&'a LoadedManifest>,
) -> Result<Selection<'a>, CompareError> {
    let b = &baseline.value;
    let c = &candidate.value;
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
    Ok(Selection {
        mode,
        policy,
        variants,
    })
}

/// The results present in both receipts whose status changed, by id.
fn result_status_changes(b: &Value, c: &Value) -> Vec<StatusChange> {
    let mut changes = Vec::new();
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
                changes.push(StatusChange {
                    baseline: before,
                    candidate: after,
                    id: id.clone(),
                });
            }
        }
    }
    changes
}
