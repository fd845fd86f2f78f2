//! The compact result artifact, schema version 3: building (the writer) and validating.
//!
//! An artifact is a closed JSON object of exactly [`RESULT_ARTIFACT_KEYS`]. The writer binds
//! it to the manifest (path and schema version), the fixture (`fixture_spec_sha256`, copied
//! hardware/source/command), the source bytes, the raw log (path and SHA-256), the commit and
//! the `git_tracked_dirty` flag, and keeps only declared metrics. It is written with indent 2,
//! sorted keys, ASCII escaping and a trailing newline.
//!
//! [`validate_result_artifact`] reproduces the original's checks in order, accumulating every
//! message with the `<ctx>.result_artifact.` prefix; see its docs for the three switches.

use crate::git::Repo;
use crate::metric::{self, Observations};
use crate::msg::{eq_int, finite_number, float, key_messages, list, text, value};
use crate::paths::{is_canonical_raw_log_path, is_repo_relative, repo_relative_path};
use crate::{is_checksum, is_git_commit, LegacyError, Result};
use qual_json::{Number, Object, Value};
use std::path::Path;

/// The artifact schema version this crate writes and accepts.
pub const ARTIFACT_SCHEMA_VERSION: i64 = 3;

/// The closed key set of an artifact.
pub const RESULT_ARTIFACT_KEYS: [&str; 17] = [
    "artifact_schema_version",
    "backend",
    "command",
    "created_at_utc",
    "fixture_id",
    "fixture_spec_sha256",
    "git_commit",
    "git_tracked_dirty",
    "hardware",
    "manifest",
    "manifest_schema_version",
    "metrics",
    "raw_log",
    "raw_log_sha256",
    "source",
    "source_sha256",
    "status",
];

/// Result statuses the writer may record; only `passed` validates.
pub const VALID_RESULT_STATUSES: [&str; 2] = ["failed", "passed"];

/// Declared metrics of a fixture, in manifest order: `(name, unit)`.
pub fn fixture_metric_specs(fixture: &Object) -> Result<Vec<(String, String)>> {
    let metrics = match fixture.get("metrics") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => {
            return Err(LegacyError::refused(
                "fixture.metrics must be a non-empty array",
            ))
        }
    };
    let mut specs: Vec<(String, String)> = Vec::new();
    for (i, m) in metrics.iter().enumerate() {
        let Value::Object(m) = m else {
            return Err(LegacyError::Refused(format!(
                "fixture.metrics[{i}] must be an object"
            )));
        };
        let name = non_empty(m.get("name")).ok_or_else(|| {
            LegacyError::Refused(format!(
                "fixture.metrics[{i}].name must be a non-empty string"
            ))
        })?;
        let unit = non_empty(m.get("unit")).ok_or_else(|| {
            LegacyError::Refused(format!(
                "fixture.metrics[{i}].unit must be a non-empty string"
            ))
        })?;
        // A later duplicate name replaces the earlier unit, as a Python dict would.
        if let Some(slot) = specs.iter_mut().find(|(n, _)| n == name) {
            slot.1 = unit.into();
        } else {
            specs.push((name.into(), unit.into()));
        }
    }
    Ok(specs)
}

fn non_empty(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Extracts the declared metrics from a log's observations (the writer's rules): missing
/// names first (sorted), then unit mismatches, then non-finite values.
pub fn extract_declared_metrics(
    fixture: &Object,
    observations: &Observations,
) -> Result<Vec<(String, f64)>> {
    let specs = fixture_metric_specs(fixture)?;
    let mut out = Vec::new();
    let mut missing = Vec::new();
    let mut mismatches = Vec::new();
    for (name, unit) in &specs {
        let Some(obs) = observations.get(name) else {
            missing.push(name.clone());
            continue;
        };
        if !obs.value.is_finite() {
            return Err(LegacyError::Refused(format!(
                "non-finite metric value for {}: {}",
                crate::msg::quote(name),
                float(obs.value)
                    .replace("Infinity", "inf")
                    .replace("NaN", "nan")
            )));
        }
        if &obs.unit != unit {
            mismatches.push(format!(
                "{name}: expected unit {}, got {}",
                crate::msg::quote(unit),
                crate::msg::quote(&obs.unit)
            ));
            continue;
        }
        out.push((name.clone(), obs.value));
    }
    if !missing.is_empty() {
        missing.sort();
        return Err(LegacyError::Refused(format!(
            "missing required metrics: {}",
            missing.join(", ")
        )));
    }
    if !mismatches.is_empty() {
        return Err(LegacyError::Refused(format!(
            "metric unit mismatch: {}",
            mismatches.join("; ")
        )));
    }
    Ok(out)
}

/// What the writer needs besides the fixture and the parsed log.
#[derive(Clone, Debug)]
pub struct WriteInputs<'a> {
    /// `passed` or `failed`.
    pub status: &'a str,
    /// The raw log file (absolute or relative to the current directory).
    pub log_path: &'a Path,
    /// The manifest file.
    pub manifest_path: &'a Path,
    /// The manifest's `schema_version` value, as read.
    pub manifest_schema_version: Option<&'a Value>,
}

/// Builds an artifact (schema version 3) from a fixture and a parsed log, in the writer's
/// order of checks: status, metrics, id/backend, provenance.
pub fn build_result_artifact(
    repo: &Repo,
    fixture: &Object,
    observations: &Observations,
    inputs: &WriteInputs<'_>,
) -> Result<Value> {
    if !VALID_RESULT_STATUSES.contains(&inputs.status) {
        return Err(LegacyError::Refused(format!(
            "status must be one of {}",
            list(&VALID_RESULT_STATUSES)
        )));
    }
    let metrics = extract_declared_metrics(fixture, observations)?;
    let id = non_empty(fixture.get("id"))
        .ok_or_else(|| LegacyError::refused("fixture.id must be a non-empty string"))?;
    let backend = non_empty(fixture.get("backend"))
        .ok_or_else(|| LegacyError::refused("fixture.backend must be a non-empty string"))?;
    let mut copied = Vec::new();
    for key in ["hardware", "source", "command"] {
        let v = non_empty(fixture.get(key)).ok_or_else(|| {
            LegacyError::Refused(format!("fixture.{key} must be a non-empty string"))
        })?;
        copied.push((key, v.to_owned()));
    }
    let schema = match inputs.manifest_schema_version {
        Some(Value::Number(Number::Int(i))) => i.clone(),
        _ => {
            return Err(LegacyError::refused(
                "manifest.schema_version must be an integer",
            ))
        }
    };
    let source = &copied[1].1;
    let source_path = repo.join(source);
    if !source_path.is_file() {
        return Err(LegacyError::Refused(format!(
            "fixture.source does not exist: {source}"
        )));
    }
    let source_sha = crate::sha256_file(&source_path)
        .map_err(|e| LegacyError::Refused(format!("fixture.source is not readable: {e}")))?;
    let raw_sha = crate::sha256_file(inputs.log_path)
        .map_err(|e| LegacyError::Refused(format!("log is not readable: {e}")))?;
    let digest = crate::digest::fixture_spec_sha256(fixture)?;
    let git_commit = repo.head_commit()?;
    let dirty = repo.tracked_dirty()?;

    let mut o = Object::new();
    o.insert(
        "artifact_schema_version",
        Value::from(ARTIFACT_SCHEMA_VERSION),
    );
    o.insert("created_at_utc", Value::from(crate::timestamp::now_utc()));
    o.insert("fixture_id", Value::from(id));
    o.insert("backend", Value::from(backend));
    o.insert("status", Value::from(inputs.status));
    o.insert(
        "manifest",
        Value::from(repo_relative_path(repo.root(), inputs.manifest_path)),
    );
    o.insert(
        "manifest_schema_version",
        Value::Number(Number::Int(schema)),
    );
    o.insert("fixture_spec_sha256", Value::from(digest));
    for (k, v) in copied {
        o.insert(k, Value::from(v));
    }
    o.insert("source_sha256", Value::from(source_sha));
    o.insert(
        "raw_log",
        Value::from(repo_relative_path(repo.root(), inputs.log_path)),
    );
    o.insert("raw_log_sha256", Value::from(raw_sha));
    o.insert("git_commit", Value::from(git_commit));
    o.insert("git_tracked_dirty", Value::from(dirty));
    let mut m = Object::new();
    for (name, value) in metrics {
        m.insert(name, Value::Number(Number::Float(value)));
    }
    o.insert("metrics", Value::Object(m));
    Ok(Value::Object(o))
}

/// Writes an artifact (indent 2, sorted keys, ASCII, trailing newline) at `path`, which must be
/// confined to the repository at `root` (no symlink component: see `qual_json::confine`),
/// creating parents and replacing an earlier artifact.
pub fn write_artifact(root: &Path, path: &Path, artifact: &Value) -> Result<()> {
    qual_json::confine::replace_file(
        root,
        path,
        crate::jsonout::to_file_text(artifact, true).as_bytes(),
        0o644,
    )
    .map_err(|e| LegacyError::Refused(e.to_string()))
}

/// Switches of [`validate_result_artifact`].
#[derive(Clone, Copy, Debug)]
pub struct ValidateOptions {
    /// Strict provenance (`--require-covered`): commit exists, clean, repo-relative and
    /// canonical paths, source at commit, raw log listed metrics.
    pub require_covered_provenance: bool,
    /// A tracked raw log is an error.
    pub enforce_git_retention: bool,
    /// Observed values must satisfy the fixture thresholds.
    pub require_threshold_pass: bool,
}

/// Threshold rule: `<=` observed ≤ max, `>=` observed ≥ max; a non-numeric max or an unknown
/// comparison fails.
pub fn metric_threshold_passes(metric: &Object, observed: f64) -> bool {
    let Some(max) = finite_number(metric.get("max")) else {
        return false;
    };
    match metric.get("comparison").and_then(Value::as_str) {
        Some("<=") => observed <= max,
        Some(">=") => observed >= max,
        _ => false,
    }
}

/// Validates a compact artifact against its fixture. Returns every problem, in check order.
///
/// `ctx` is `fixtures[i]` (checker) or `fixture <id>` (importer); messages are prefixed with
/// `<ctx>.result_artifact.`. `manifest_path`, when given, must be what the artifact's
/// `manifest` field names (repo-relative when under the root).
pub fn validate_result_artifact(
    repo: &Repo,
    fixture: &Object,
    result_path: &Path,
    ctx: &str,
    manifest_schema_version: Option<&Value>,
    manifest_path: Option<&Path>,
    opts: ValidateOptions,
) -> Vec<String> {
    let p = format!("{ctx}.result_artifact.");
    let mut errors = Vec::new();
    let result = match load_artifact_value(result_path) {
        Ok(Value::Object(o)) => o,
        Ok(_) => {
            errors.push(format!("{p}must be a JSON object"));
            return errors;
        }
        Err(ArtifactLoadError::NonFiniteMetric(name)) => {
            errors.push(format!("{p}metrics.{name} must be finite numeric"));
            return errors;
        }
        Err(ArtifactLoadError::Unreadable(e)) => {
            errors.push(format!("{ctx}.result_artifact is not readable JSON: {e}"));
            return errors;
        }
    };

    check_artifact_shape(&mut errors, fixture, &result, &p);

    let raw_digest_ok = validate_provenance(
        repo,
        fixture,
        &result,
        &p,
        ctx,
        manifest_schema_version,
        manifest_path,
        opts,
        &mut errors,
    );

    let declared = declared_metrics(fixture);
    let empty = Object::new();
    let observed = check_metric_keys(&mut errors, &declared, &result, &p).unwrap_or(&empty);

    if raw_digest_ok {
        check_raw_log_metrics(&mut errors, repo, &declared, &result, observed, &p, opts);
    }

    check_metric_values(&mut errors, &declared, observed, &p, ctx, opts);
    errors
}

/// Steps 2–6: key set, identity, status, schema version, timestamp.
fn check_artifact_shape(errors: &mut Vec<String>, fixture: &Object, result: &Object, p: &str) {
    // 2. Key set.
    let keys = key_messages(result, &RESULT_ARTIFACT_KEYS, &RESULT_ARTIFACT_KEYS);
    errors.extend(keys.into_iter().map(|m| format!("{p}{m}")));

    // 3. Identity.
    for (field, fixture_key) in [("fixture_id", "id"), ("backend", "backend")] {
        if result.get(field) != fixture.get(fixture_key) {
            errors.push(format!(
                "{p}{field} must be {}, got {}",
                value(fixture.get(fixture_key)),
                value(result.get(field))
            ));
        }
    }

    // 4. Status.
    match result.get("status").and_then(Value::as_str) {
        Some("passed") => {}
        Some("failed") => errors.push(format!("{p}status must be passed")),
        _ => errors.push(format!(
            "{p}status must be one of {}",
            list(&VALID_RESULT_STATUSES)
        )),
    }

    // 5. Schema version.
    if !eq_int(
        result.get("artifact_schema_version"),
        ARTIFACT_SCHEMA_VERSION,
    ) || matches!(result.get("artifact_schema_version"), Some(Value::Bool(_)))
    {
        errors.push(format!(
            "{p}artifact_schema_version must be {ARTIFACT_SCHEMA_VERSION}"
        ));
    }

    // 6. Timestamp.
    let ts_ok = result
        .get("created_at_utc")
        .and_then(Value::as_str)
        .is_some_and(crate::timestamp::is_valid_created_at);
    if !ts_ok {
        errors.push(format!(
            "{p}created_at_utc must be an ISO-8601 UTC timestamp ending in Z"
        ));
    }
}

/// The fixture's declared metrics that are objects, with their index.
fn declared_metrics(fixture: &Object) -> Vec<(usize, &Object)> {
    fixture
        .get("metrics")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .enumerate()
                .filter_map(|(i, m)| m.as_object().map(|o| (i, o)))
                .collect()
        })
        .unwrap_or_default()
}

/// Step 16: the artifact's `metrics` (`None` when not an object) names only declared metrics.
fn check_metric_keys<'r>(
    errors: &mut Vec<String>,
    declared: &[(usize, &Object)],
    result: &'r Object,
    p: &str,
) -> Option<&'r Object> {
    let declared_names: Vec<&str> = declared
        .iter()
        .filter_map(|(_, m)| m.get("name").and_then(Value::as_str))
        .collect();
    let observed = match result.get("metrics") {
        Some(Value::Object(m)) => Some(m),
        _ => {
            errors.push(format!("{p}metrics must be an object"));
            None
        }
    };
    let mut undeclared: Vec<&str> = observed
        .into_iter()
        .flat_map(|o| o.keys())
        .map(String::as_str)
        .filter(|k| !declared_names.contains(k))
        .collect();
    undeclared.sort();
    if !undeclared.is_empty() {
        errors.push(format!(
            "{p}metrics contains undeclared metrics: {}",
            list(&undeclared)
        ));
    }
    observed
}

/// Step 17: the raw log, when present, reparsed: every declared metric in it, with the
/// declared unit and the artifact's value (skipped, like the rest of the provenance checks,
/// when `raw_log_sha256` is malformed: the caller's decision).
fn check_raw_log_metrics(
    errors: &mut Vec<String>,
    repo: &Repo,
    declared: &[(usize, &Object)],
    result: &Object,
    observed: &Object,
    p: &str,
    opts: ValidateOptions,
) {
    if let Some(raw_log) = result.get("raw_log").and_then(Value::as_str) {
        let raw_path = repo.join(raw_log);
        if !raw_log.is_empty() && raw_path.is_file() {
            match metric::parse_metric_log(&raw_path) {
                Err(e) => errors.push(format!("{p}raw_log metrics are invalid: {e}")),
                Ok(obs) => {
                    for (_, m) in declared {
                        let Some(name) = m.get("name").and_then(Value::as_str) else {
                            continue;
                        };
                        let Some(raw) = obs.get(name) else {
                            if opts.require_covered_provenance {
                                errors.push(format!("{p}raw_log missing metric {name}"));
                            }
                            continue;
                        };
                        if let Some(unit) = m.get("unit").and_then(Value::as_str) {
                            if raw.unit != unit {
                                errors.push(format!(
                                    "{p}raw_log metric {name} unit must be {}, got {}",
                                    crate::msg::quote(unit),
                                    crate::msg::quote(&raw.unit)
                                ));
                            }
                        }
                        if let Some(v) = observed.get(name).and_then(Value::as_f64) {
                            if v != raw.value {
                                errors.push(format!(
                                    "{p}metrics.{name} must match raw_log value {}",
                                    float(raw.value)
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Step 18: every declared value finite and (when required) within its threshold.
fn check_metric_values(
    errors: &mut Vec<String>,
    declared: &[(usize, &Object)],
    observed: &Object,
    p: &str,
    ctx: &str,
    opts: ValidateOptions,
) {
    // 18. Values and thresholds.
    for (i, m) in declared {
        let name = m.get("name").and_then(Value::as_str).unwrap_or_default();
        let value = observed.get(name);
        let Some(v) = finite_number(value) else {
            errors.push(format!("{p}metrics.{name} must be finite numeric"));
            continue;
        };
        if opts.require_threshold_pass && !metric_threshold_passes(m, v) {
            errors.push(format!(
                "{ctx}.metrics[{i}] observed value {} does not satisfy {} {}",
                text(value),
                text(m.get("comparison")),
                text(m.get("max"))
            ));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn validate_provenance(
    repo: &Repo,
    fixture: &Object,
    result: &Object,
    p: &str,
    ctx: &str,
    manifest_schema_version: Option<&Value>,
    manifest_path: Option<&Path>,
    opts: ValidateOptions,
    errors: &mut Vec<String>,
) -> bool {
    let strict = opts.require_covered_provenance;
    let commit = check_commit(errors, repo, result, p, strict);
    check_manifest_binding(
        errors,
        repo,
        result,
        p,
        (manifest_schema_version, manifest_path),
        strict,
    );
    check_fixture_binding(errors, fixture, result, p);
    check_source_digest(errors, repo, fixture, result, commit, (p, ctx), strict);
    // 14. Raw-log path.
    let raw_log = non_empty(result.get("raw_log"));
    match raw_log {
        None => errors.push(format!("{p}raw_log must be a non-empty string")),
        Some(r) if strict && !is_repo_relative(r) => errors.push(format!(
            "{p}raw_log must be repo-relative when --require-covered is set: {r}"
        )),
        Some(r) if strict && !is_canonical_raw_log_path(r) => errors.push(format!(
            "{p}raw_log must live under bench-results/backend-latency/raw with a .log extension when --require-covered is set: {r}"
        )),
        _ => {}
    }
    // 15. Raw-log digest and retention.
    let raw_sha = result
        .get("raw_log_sha256")
        .and_then(Value::as_str)
        .filter(|s| is_checksum(s));
    let Some(raw_sha) = raw_sha else {
        errors.push(format!(
            "{p}raw_log_sha256 must be a 64-character lowercase hex digest"
        ));
        return false;
    };
    if let Some(r) = raw_log {
        if opts.enforce_git_retention && repo.is_tracked(r) {
            errors.push(format!(
                "{p}raw_log must not be tracked by git when --require-covered is set"
            ));
        }
        let path = repo.join(r);
        if path.is_file() && crate::sha256_file(&path).ok().as_deref() != Some(raw_sha) {
            errors.push(format!("{p}raw_log_sha256 does not match raw_log"));
        }
    }
    true
}

/// Steps 7–8: a commit of this repository (returned when well-formed), and the dirty flag.
fn check_commit<'r>(
    errors: &mut Vec<String>,
    repo: &Repo,
    result: &'r Object,
    p: &str,
    strict: bool,
) -> Option<&'r str> {
    // 7. Commit.
    let commit = result
        .get("git_commit")
        .and_then(Value::as_str)
        .filter(|c| is_git_commit(c));
    match commit {
        None => errors.push(format!(
            "{p}git_commit must be a 40-character lowercase hex commit"
        )),
        Some(c) if strict && !repo.commit_exists(c) => errors.push(format!(
            "{p}git_commit must exist in the local repository when --require-covered is set"
        )),
        _ => {}
    }
    // 8. Dirty flag.
    match result.get("git_tracked_dirty") {
        Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) if strict => errors.push(format!(
            "{p}git_tracked_dirty must be false when --require-covered is set"
        )),
        Some(Value::Bool(true)) => {}
        _ => errors.push(format!("{p}git_tracked_dirty must be a boolean")),
    }
    commit
}

/// Steps 9–10: the manifest the artifact names, and its schema version.
fn check_manifest_binding(
    errors: &mut Vec<String>,
    repo: &Repo,
    result: &Object,
    p: &str,
    (manifest_schema_version, manifest_path): (Option<&Value>, Option<&Path>),
    strict: bool,
) {
    // 9. Manifest field.
    match non_empty(result.get("manifest")) {
        None => errors.push(format!("{p}manifest must be a non-empty string")),
        Some(m) => {
            if let Some(mp) = manifest_path {
                let want = repo_relative_path(repo.root(), mp);
                if m != want {
                    errors.push(format!(
                        "{p}manifest must be {}, got {}",
                        crate::msg::quote(&want),
                        crate::msg::quote(m)
                    ));
                }
            } else if strict && !is_repo_relative(m) {
                errors.push(format!(
                    "{p}manifest must be repo-relative when --require-covered is set: {m}"
                ));
            }
        }
    }
    // 10. Manifest schema version.
    if result.get("manifest_schema_version") != manifest_schema_version {
        errors.push(format!(
            "{p}manifest_schema_version must be {}, got {}",
            value(manifest_schema_version),
            value(result.get("manifest_schema_version"))
        ));
    }
}

/// Steps 11–12: the fixture's spec digest, and the fields copied from the fixture.
fn check_fixture_binding(errors: &mut Vec<String>, fixture: &Object, result: &Object, p: &str) {
    // 11. Fixture digest.
    match result.get("fixture_spec_sha256").and_then(Value::as_str) {
        Some(d) if is_checksum(d) => match crate::digest::fixture_spec_sha256(fixture) {
            Ok(want) if want == d => {}
            Ok(want) => errors.push(format!(
                "{p}fixture_spec_sha256 must be {}, got {}",
                crate::msg::quote(&want),
                crate::msg::quote(d)
            )),
            Err(e) => errors.push(format!("{p}fixture_spec_sha256 cannot be computed: {e}")),
        },
        _ => errors.push(format!(
            "{p}fixture_spec_sha256 must be a 64-character lowercase hex digest"
        )),
    }
    // 12. Copied fields.
    for key in ["hardware", "source", "command"] {
        if result.get(key) != fixture.get(key) {
            errors.push(format!(
                "{p}{key} must be {}, got {}",
                value(fixture.get(key)),
                value(result.get(key))
            ));
        }
    }
}

/// Step 13: the source digest, against the file now and (strict) at the artifact's commit.
fn check_source_digest(
    errors: &mut Vec<String>,
    repo: &Repo,
    fixture: &Object,
    result: &Object,
    commit: Option<&str>,
    (p, ctx): (&str, &str),
    strict: bool,
) {
    // 13. Source digest.
    let source_sha = result
        .get("source_sha256")
        .and_then(Value::as_str)
        .filter(|s| is_checksum(s));
    match source_sha {
        None => errors.push(format!(
            "{p}source_sha256 must be a 64-character lowercase hex digest"
        )),
        Some(sha) => {
            if let Some(source) = non_empty(fixture.get("source")) {
                let path = repo.join(source);
                if path.is_file() {
                    if crate::sha256_file(&path).ok().as_deref() != Some(sha) {
                        errors.push(format!("{p}source_sha256 does not match source"));
                    }
                    if strict {
                        if let Some(c) = commit {
                            match repo.file_sha256_at_commit(c, source) {
                                None => errors.push(format!(
                                    "{p}source must exist at git_commit {c}: {source}"
                                )),
                                Some(at) if at != sha => errors.push(format!(
                                    "{p}source_sha256 must match source at git_commit"
                                )),
                                Some(_) => {}
                            }
                        }
                    }
                } else if strict {
                    errors.push(format!(
                        "{ctx}.source must exist when --require-covered is set: {source}"
                    ));
                }
            }
        }
    }
}

/// Why an artifact file could not be read as a JSON value.
#[derive(Debug)]
pub enum ArtifactLoadError {
    /// The file is missing, unreadable, or not strict JSON.
    Unreadable(String),
    /// A `metrics` member holds `NaN`/`Infinity` (Python reads those; we refuse them with the
    /// original's "must be finite numeric" message).
    NonFiniteMetric(String),
}

/// The largest result artifact read (1 MiB): a larger JSON file is not a result.
pub const MAX_ARTIFACT_BYTES: usize = 1 << 20;

/// Reads an artifact with the strict reader (1 MiB limit).
pub fn load_artifact_value(path: &Path) -> std::result::Result<Value, ArtifactLoadError> {
    let limits = qual_json::Limits {
        max_bytes: MAX_ARTIFACT_BYTES,
        ..Default::default()
    };
    match qual_json::load_file(path, limits) {
        Ok((v, _)) => Ok(v),
        Err(qual_json::LoadError::Parse { error, .. })
            if matches!(
                error.reason,
                qual_json::Reason::NonFiniteConstant | qual_json::Reason::FloatOverflow
            ) && error.pointer.starts_with("/metrics/") =>
        {
            Err(ArtifactLoadError::NonFiniteMetric(
                error.pointer["/metrics/".len()..]
                    .replace("~1", "/")
                    .replace("~0", "~"),
            ))
        }
        Err(e) => Err(ArtifactLoadError::Unreadable(e.to_string())),
    }
}
