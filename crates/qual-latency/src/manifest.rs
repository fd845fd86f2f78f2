//! The fixture manifest (`schema_version` 1) and the checker (`latency check`).
//!
//! The top level is closed (`fixtures`, `missing_fixture_slots`, `policy`,
//! `required_backends`, `schema_version`, `status`); fixtures are closed over
//! [`FIXTURE_KEYS`]; metric objects are open. Non-strict checking never opens result
//! artifacts but does require each fixture `source` to exist. Strict checking
//! (`--require-covered`) additionally requires `covered`, no missing slots, every threshold
//! locked and finite, and for each fixture a tracked, canonical result artifact that passes
//! [`crate::artifact::validate_result_artifact`] with provenance, retention and thresholds on.
//! All problems are collected, in the original's order.

use crate::artifact::{validate_result_artifact, ValidateOptions};
use crate::git::Repo;
use crate::msg::{eq_int, finite_number, key_messages, list, quote};
use crate::paths::{is_canonical_result_path, is_repo_relative};
use crate::{LegacyError, Result, VALID_BACKENDS};
use qual_json::{Object, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level keys of a manifest.
pub const MANIFEST_KEYS: [&str; 6] = [
    "fixtures",
    "missing_fixture_slots",
    "policy",
    "required_backends",
    "schema_version",
    "status",
];

/// Allowed fixture keys.
pub const FIXTURE_KEYS: [&str; 10] = [
    "backend",
    "command",
    "hardware",
    "id",
    "metrics",
    "result_artifact",
    "runner_labels",
    "selected_cases",
    "source",
    "threshold_state",
];

/// Manifest status values.
pub const VALID_STATUS: [&str; 2] = ["covered", "fixture_required"];
/// Fixture threshold states.
pub const VALID_THRESHOLD_STATES: [&str; 2] = ["locked_threshold", "pending_fixture_result"];
/// Metric comparisons.
pub const VALID_COMPARISONS: [&str; 2] = ["<=", ">="];

/// The policy text a manifest must carry, in order.
pub const COVERED_GATE_REQUIRES: [&str; 4] = [
    "Every required backend has at least one known hardware fixture.",
    "Every fixture has locked numeric thresholds for its required measurements.",
    "Every locked threshold has a checked hardware-result artifact from the named fixture.",
    "Default-feature local tests must not mark the hardware latency gate covered.",
];

/// The manifest's conventional location in a Kiln checkout.
pub const DEFAULT_MANIFEST: &str = "docs/contracts/backend-latency-fixtures.json";

/// Reads a manifest with the strict JSON reader (`manifest is not readable JSON: …`).
pub fn load_manifest(path: &Path) -> Result<Value> {
    let limits = qual_json::Limits {
        max_bytes: 8 << 20,
        ..Default::default()
    };
    qual_json::load_file(path, limits)
        .map(|(v, _)| v)
        .map_err(|e| LegacyError::Refused(format!("manifest is not readable JSON: {e}")))
}

/// Finds a fixture by id (`manifest.fixtures must be an array`,
/// `fixture id not found in manifest: <id>`).
pub fn find_fixture<'a>(manifest: &'a Value, id: &str) -> Result<&'a Object> {
    let Some(fixtures) = manifest.get("fixtures").and_then(Value::as_array) else {
        return Err(LegacyError::refused("manifest.fixtures must be an array"));
    };
    fixtures
        .iter()
        .filter_map(Value::as_object)
        .find(|f| f.get("id").and_then(Value::as_str) == Some(id))
        .ok_or_else(|| LegacyError::Refused(format!("fixture id not found in manifest: {id}")))
}

/// A successful check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckSummary {
    /// Manifest `status`.
    pub status: String,
    /// Number of fixtures.
    pub fixtures: usize,
    /// Number of missing fixture slots.
    pub missing_fixture_slots: usize,
}

/// The verdict of `latency check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// No problem found.
    Passed(CheckSummary),
    /// Every problem found, in check order.
    Failed(Vec<String>),
}

/// Checks a manifest file (`require_covered` = `--require-covered`).
pub fn check_manifest_file(
    repo: &Repo,
    manifest_path: &Path,
    require_covered: bool,
) -> Result<CheckOutcome> {
    let manifest = load_manifest(manifest_path)?;
    let errors = validate_manifest(repo, &manifest, manifest_path, require_covered);
    if !errors.is_empty() {
        return Ok(CheckOutcome::Failed(errors));
    }
    let o = manifest.as_object().expect("validated as an object");
    Ok(CheckOutcome::Passed(CheckSummary {
        status: o
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into(),
        fixtures: o
            .get("fixtures")
            .and_then(Value::as_array)
            .map_or(0, Vec::len),
        missing_fixture_slots: o
            .get("missing_fixture_slots")
            .and_then(Value::as_array)
            .map_or(0, Vec::len),
    }))
}

fn require_string<'a>(
    errors: &mut Vec<String>,
    obj: &'a Object,
    key: &str,
    ctx: &str,
) -> Option<&'a str> {
    match obj.get(key).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Some(s),
        _ => {
            errors.push(format!("{ctx}.{key} must be a non-empty string"));
            None
        }
    }
}

fn key_set(
    errors: &mut Vec<String>,
    obj: &Object,
    allowed: &[&str],
    required: &[&str],
    what: &str,
) {
    let keys = key_messages(obj, required, allowed);
    errors.extend(keys.into_iter().map(|m| format!("{what} {m}")));
}

/// Validates `runner_labels` (a non-empty array of non-empty strings). `ctx` names the field.
pub fn validate_runner_labels(v: &Value, ctx: &str) -> std::result::Result<Vec<String>, String> {
    let Some(items) = v.as_array().filter(|a| !a.is_empty()) else {
        return Err(format!("{ctx} must be a non-empty string array"));
    };
    let mut out = Vec::new();
    for (j, item) in items.iter().enumerate() {
        match item.as_str() {
            Some(s) if !s.is_empty() => out.push(s.to_owned()),
            _ => return Err(format!("{ctx}[{j}] must be a non-empty string")),
        }
    }
    Ok(out)
}

fn validate_metric(
    errors: &mut Vec<String>,
    metric: &Value,
    ctx: &str,
    threshold_state: Option<&str>,
    strict: bool,
) {
    let Some(m) = metric.as_object() else {
        errors.push(format!("{ctx} must be an object"));
        return;
    };
    require_string(errors, m, "name", ctx);
    require_string(errors, m, "unit", ctx);
    if let Some(c) = require_string(errors, m, "comparison", ctx) {
        if !VALID_COMPARISONS.contains(&c) {
            errors.push(format!(
                "{ctx}.comparison must be one of {}, got {}",
                list(&VALID_COMPARISONS),
                quote(c)
            ));
        }
    }
    let max = m.get("max");
    let finite = finite_number(max).is_some();
    if !matches!(max, None | Some(Value::Null)) && !finite {
        errors.push(format!("{ctx}.max must be null or finite numeric"));
    }
    if threshold_state == Some("locked_threshold") && !finite {
        errors.push(format!(
            "{ctx}.max must be finite numeric for locked_threshold"
        ));
    }
    if strict && !finite {
        errors.push(format!(
            "{ctx}.max must be finite numeric when --require-covered is set"
        ));
    }
}

/// All problems of a manifest (empty when it passes).
pub fn validate_manifest(
    repo: &Repo,
    manifest: &Value,
    manifest_path: &Path,
    strict: bool,
) -> Vec<String> {
    let mut errors = Vec::new();
    let Some(m) = manifest.as_object() else {
        errors.push("manifest must be a JSON object".into());
        return errors;
    };
    let status = check_manifest_head(&mut errors, m, strict);
    check_policy(&mut errors, m);
    let required_backends = required_backend_set(&mut errors, m);
    let empty = Vec::new();
    let fixtures = match m.get("fixtures").and_then(Value::as_array) {
        Some(f) if !f.is_empty() => f,
        _ => {
            errors.push("fixtures must be a non-empty array".into());
            &empty
        }
    };
    let mut tally = FixtureTally::default();
    for (idx, fixture) in fixtures.iter().enumerate() {
        check_fixture(
            &mut errors,
            repo,
            (m, manifest_path),
            strict,
            (idx, fixture),
            &mut tally,
        );
    }
    let (slots, slot_backends) = slot_backends(&mut errors, m);
    for b in &required_backends {
        if !tally.backends.contains(b) && !slot_backends.contains(b) {
            errors.push(format!(
                "required backend has no fixture or missing slot: {b}"
            ));
        }
    }
    if strict && !slots.is_empty() {
        errors.push("missing_fixture_slots must be empty when --require-covered is set".into());
    }
    if status == Some("covered") && (!slots.is_empty() || tally.pending > 0) {
        errors.push("covered manifest cannot have missing slots or pending thresholds".into());
    }
    errors
}

/// The manifest's keys, schema version and status (returned) against `--require-covered`.
fn check_manifest_head<'m>(
    errors: &mut Vec<String>,
    m: &'m Object,
    strict: bool,
) -> Option<&'m str> {
    key_set(errors, m, &MANIFEST_KEYS, &MANIFEST_KEYS, "manifest");

    if !eq_int(m.get("schema_version"), 1)
        || matches!(m.get("schema_version"), Some(Value::Bool(_)))
    {
        errors.push("schema_version must be 1".into());
    }
    let status = m.get("status").and_then(Value::as_str);
    if !status.is_some_and(|s| VALID_STATUS.contains(&s)) {
        errors.push(format!("status must be one of {}", list(&VALID_STATUS)));
    }
    if strict && status != Some("covered") {
        errors.push("status must be covered when --require-covered is set".into());
    }
    if !strict && status == Some("covered") {
        errors.push("status covered requires --require-covered".into());
    }
    status
}

/// `policy`: exactly the covered gate's requirements.
fn check_policy(errors: &mut Vec<String>, m: &Object) {
    match m.get("policy") {
        Some(Value::Object(policy)) => {
            let before = errors.len();
            key_set(
                errors,
                policy,
                &["covered_gate_requires"],
                &["covered_gate_requires"],
                "policy",
            );
            if errors.len() == before {
                let want: Vec<Value> = COVERED_GATE_REQUIRES
                    .iter()
                    .map(|s| Value::from(*s))
                    .collect();
                if policy.get("covered_gate_requires") != Some(&Value::Array(want)) {
                    errors.push(
                        "policy.covered_gate_requires must match the hardware latency gate policy"
                            .into(),
                    );
                }
            }
        }
        _ => errors.push("policy must be an object".into()),
    }
}

/// `required_backends`: a non-empty array of valid backends (the valid ones, as a set).
fn required_backend_set<'m>(errors: &mut Vec<String>, m: &'m Object) -> BTreeSet<&'m str> {
    let mut required_backends: BTreeSet<&str> = BTreeSet::new();
    match m.get("required_backends").and_then(Value::as_array) {
        Some(list) if !list.is_empty() => {
            for (i, b) in list.iter().enumerate() {
                match b.as_str().filter(|b| VALID_BACKENDS.contains(b)) {
                    Some(b) => {
                        required_backends.insert(b);
                    }
                    None => errors.push(format!(
                        "required_backends[{i}] is not a valid backend: {}",
                        crate::msg::value(Some(b))
                    )),
                }
            }
        }
        _ => errors.push("required_backends must be a non-empty array".into()),
    }
    required_backends
}

/// What the fixtures declare together: their ids, backends and pending thresholds.
#[derive(Default)]
struct FixtureTally<'m> {
    ids: BTreeSet<&'m str>,
    backends: BTreeSet<&'m str>,
    pending: usize,
}

/// One fixture: its keys, strings, source, result artifact, threshold state, runner labels
/// and metrics, then (strict) the result artifact itself.
fn check_fixture<'m>(
    errors: &mut Vec<String>,
    repo: &Repo,
    (m, manifest_path): (&'m Object, &Path),
    strict: bool,
    (idx, fixture): (usize, &'m Value),
    tally: &mut FixtureTally<'m>,
) {
    let ctx = fixture_context(idx, fixture);
    let Some(f) = fixture.as_object() else {
        errors.push(format!("{ctx} must be an object"));
        return;
    };
    let keys = key_messages(f, &[], &FIXTURE_KEYS);
    errors.extend(keys.into_iter().map(|m| format!("{ctx} {m}")));
    if let Some(id) = require_string(errors, f, "id", &ctx) {
        if !tally.ids.insert(id) {
            errors.push(format!("{ctx}.id is duplicated: {id}"));
        }
    }
    if let Some(b) = require_string(errors, f, "backend", &ctx) {
        if VALID_BACKENDS.contains(&b) {
            tally.backends.insert(b);
        } else {
            errors.push(format!("{ctx}.backend is not valid: {}", quote(b)));
        }
    }
    require_string(errors, f, "hardware", &ctx);
    if let Some(source) = require_string(errors, f, "source", &ctx) {
        if !repo.join(source).is_file() {
            errors.push(format!("{ctx}.source does not exist: {source}"));
        }
        if strict && !is_repo_relative(source) {
            errors.push(format!(
                "{ctx}.source must be repo-relative when --require-covered is set: {source}"
            ));
        } else if let Some(why) = crate::paths::contained(repo.root(), source) {
            errors.push(format!("{ctx}.source {why}: {}", quote(source)));
        }
    }
    require_string(errors, f, "command", &ctx);
    let result_for_validation = fixture_result_path(errors, repo, f, &ctx, strict);
    let threshold_state = check_threshold_state(errors, f, &ctx, strict, &mut tally.pending);
    if let Some(labels) = f.get("runner_labels") {
        if let Err(e) = validate_runner_labels(labels, &format!("{ctx}.runner_labels")) {
            errors.push(e);
        }
    }
    match f.get("metrics").and_then(Value::as_array) {
        Some(metrics) if !metrics.is_empty() => {
            for (j, metric) in metrics.iter().enumerate() {
                validate_metric(
                    errors,
                    metric,
                    &format!("{ctx}.metrics[{j}]"),
                    threshold_state,
                    strict,
                );
            }
        }
        _ => errors.push(format!("{ctx}.metrics must be a non-empty array")),
    }
    if let Some(path) = result_for_validation {
        errors.extend(validate_result_artifact(
            repo,
            f,
            &path,
            &ctx,
            m.get("schema_version"),
            Some(manifest_path),
            ValidateOptions {
                require_covered_provenance: true,
                enforce_git_retention: true,
                require_threshold_pass: true,
            },
        ));
    }
}

/// The fixture's `result_artifact`, checked; its path when (strict) it is to be validated.
fn fixture_result_path(
    errors: &mut Vec<String>,
    repo: &Repo,
    f: &Object,
    ctx: &str,
    strict: bool,
) -> Option<PathBuf> {
    if let Some(result) = require_string(errors, f, "result_artifact", ctx) {
        let escapes = crate::paths::contained(repo.root(), result);
        if let (false, Some(why)) = (strict, escapes) {
            errors.push(format!("{ctx}.result_artifact {why}: {}", quote(result)));
        } else if strict {
            let path = repo.join(result);
            if !is_repo_relative(result) {
                errors.push(format!("{ctx}.result_artifact must be repo-relative when --require-covered is set: {result}"));
            } else if !is_canonical_result_path(result) {
                errors.push(format!(
                    "{ctx}.result_artifact must live under bench-results/backend-latency with a .json extension: {result}"
                ));
            } else if let Some(why) = escapes {
                errors.push(format!("{ctx}.result_artifact {why}: {}", quote(result)));
            } else if !path.is_file() {
                errors.push(format!("{ctx}.result_artifact does not exist: {result}"));
            } else {
                if !repo.is_tracked(result) {
                    errors.push(format!(
                        "{ctx}.result_artifact must be tracked by git when --require-covered is set: {result}"
                    ));
                }
                return Some(path);
            }
        }
    }
    None
}

/// The fixture's `threshold_state` (returned), counting a pending one.
fn check_threshold_state<'m>(
    errors: &mut Vec<String>,
    f: &'m Object,
    ctx: &str,
    strict: bool,
    pending: &mut usize,
) -> Option<&'m str> {
    let threshold_state = require_string(errors, f, "threshold_state", ctx);
    if let Some(state) = threshold_state {
        if !VALID_THRESHOLD_STATES.contains(&state) {
            errors.push(format!(
                "{ctx}.threshold_state must be one of {}",
                list(&VALID_THRESHOLD_STATES)
            ));
        } else if state == "pending_fixture_result" {
            *pending += 1;
            if strict {
                errors.push(format!(
                    "{ctx}.threshold_state must be locked_threshold when --require-covered is set"
                ));
            }
        }
    }
    threshold_state
}

/// `missing_fixture_slots` (an array when present) and the valid backends they name.
fn slot_backends<'m>(errors: &mut Vec<String>, m: &'m Object) -> (&'m [Value], BTreeSet<&'m str>) {
    let slots = match m.get("missing_fixture_slots") {
        Some(Value::Array(a)) => a.as_slice(),
        None => &[],
        Some(_) => {
            errors.push("missing_fixture_slots must be an array".into());
            &[]
        }
    };
    let mut slot_backends: BTreeSet<&str> = BTreeSet::new();
    for (idx, slot) in slots.iter().enumerate() {
        let ctx = format!("missing_fixture_slots[{idx}]");
        let Some(s) = slot.as_object() else {
            errors.push(format!("{ctx} must be an object"));
            continue;
        };
        if let Some(b) = require_string(errors, s, "backend", &ctx) {
            if VALID_BACKENDS.contains(&b) {
                slot_backends.insert(b);
            } else {
                errors.push(format!("{ctx}.backend is not valid: {}", quote(b)));
            }
        }
        require_string(errors, s, "required_source", &ctx);
        require_string(errors, s, "reason", &ctx);
    }
    (slots, slot_backends)
}

/// How a fixture is named in messages: its id and its place, `fixture "metal-decode" at
/// fixtures[1]` (just `fixtures[1]` when it has no string id), so a message reads with a
/// property path appended (`… at fixtures[1].backend must be …`).
pub fn fixture_context(index: usize, fixture: &Value) -> String {
    match fixture.get("id").and_then(Value::as_str) {
        Some(id) => format!("fixture {} at fixtures[{index}]", quote(id)),
        None => format!("fixtures[{index}]"),
    }
}
