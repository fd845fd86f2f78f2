//! One serving case from start to finish, and its two output documents.
//!
//! Owns the order of operations (read inputs → refuse a busy port → launch → readiness →
//! listener ownership → warmup and measured load → liveness → shutdown and residue proof →
//! metrics → verdict) and the writing of:
//!
//! * the case result, a `qualification-case-result-v1` closed object `{schema_version: 1,
//!   case_id, status, duration_seconds, effective_config, metrics, tolerances: [], details}`
//!   with metrics sorted and unique by name, every value finite. A metric whose value is null
//!   (too few samples for a percentile, no window…) is left out of `metrics` and listed with
//!   its reason in the evidence; when such a metric was explicitly selected (`--metric`) the
//!   case fails. `effective_config` is echoed from the caller (the workload variant's config,
//!   passed on the command line), because the runner requires an exact echo; the resolved
//!   load settings live in the evidence.
//! * the evidence, `<result stem>.serve-evidence.json` next to the result: definitions,
//!   percentile method and minimums, launch recipe and corpus digests, the `/v1/models` body
//!   digest, the lifecycle record, the load settings, every metric (with null reasons) and
//!   every per-request record.
//!
//! Both files are created exclusively (an existing file is never replaced). Invariant: the
//! status is `passed` only when the lifecycle passed, at least one measured request succeeded,
//! failed requests are within the allowance, every measurement-validity signal stayed within
//! its declared limit (otherwise one `invalid run: …` reason per signal, status `failed`)
//! and every selected metric has a value.

use crate::client::StreamRules;
use crate::corpus::{self, Corpus};
use crate::kiln_launch::{self, BaseUrl};
use crate::lifecycle::{LifecycleRecord, OwnedServer};
use crate::load::{self, Arrival, LoadSpec, ProgressSink};
use crate::metrics::{self, MetricRow, ServingMetrics, Slo, ValidityLimits};
use crate::recipe::{is_identifier, LaunchRecipe};
use crate::record::RequestRecord;
use qual_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `kiln-qual serve` was asked to do.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Launch recipe file.
    pub launch: PathBuf,
    /// Corpus file.
    pub corpus: PathBuf,
    /// Case-result path (the evidence goes next to it).
    pub result: PathBuf,
    /// Case id; defaults to the recipe id.
    pub case_id: Option<String>,
    /// The config object echoed as `effective_config` (default `{}`).
    pub effective_config: Value,
    /// Order seed.
    pub seed: u64,
    /// Warmup requests.
    pub warmup: usize,
    /// Measured requests (default: the corpus size).
    pub requests: Option<usize>,
    /// Arrival process.
    pub arrival: Arrival,
    /// Open-loop bound on outstanding requests.
    pub max_in_flight: usize,
    /// Per-request deadline.
    pub request_timeout: Duration,
    /// Declared SLOs.
    pub slo: Slo,
    /// Stream acceptance switches.
    pub rules: StreamRules,
    /// Failed measured requests tolerated before the case fails.
    pub max_failed_requests: usize,
    /// Metrics to emit (default: every metric that has a value).
    pub metrics: Option<Vec<String>>,
    /// Model id to request (default: the first id of `/v1/models`).
    pub model: Option<String>,
    /// Directory substituted for `${model_path}` in the launch recipe.
    pub model_path: Option<PathBuf>,
    /// CPU to pin the load generator to.
    pub pin_cpu: Option<usize>,
    /// Run the load generator under `SCHED_FIFO` ([`crate::load::LoadSpec::realtime_reader`]).
    pub realtime_reader: bool,
    /// Thresholds of the measurement-validity gate.
    pub validity: ValidityLimits,
}

/// The case status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    /// Every check passed.
    Passed,
    /// Something failed; the reasons say what.
    Failed,
}

/// What a case produced.
#[derive(Clone, Debug)]
pub struct ServeOutcome {
    /// Passed or failed.
    pub status: CaseStatus,
    /// Failure reasons (empty when passed).
    pub reasons: Vec<String>,
    /// Metrics, when the load ran.
    pub metrics: Option<ServingMetrics>,
    /// All metric rows (with nulls), when the load ran.
    pub rows: Vec<MetricRow>,
    /// Where the case result was written.
    pub result_path: PathBuf,
    /// Where the evidence was written.
    pub evidence_path: PathBuf,
}

/// Why no case result could be written at all.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Inputs are invalid and no case id is known (the result needs one).
    #[error("{0}")]
    Input(String),
    /// The result or evidence file could not be created.
    #[error("write {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Checks a config object (§7.1 of the workload contract): keys `^[a-z][a-z0-9_-]*$` at every
/// depth; values null, string, bool, finite number or object; no arrays. Returns every
/// violation with its pointer.
pub fn validate_config(v: &Value) -> Vec<String> {
    fn walk(v: &Value, ptr: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o.iter() {
                    let b = k.as_bytes();
                    let ok = !b.is_empty()
                        && b[0].is_ascii_lowercase()
                        && b.iter().all(|&c| {
                            c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-'
                        });
                    let p = format!("{ptr}/{k}");
                    if !ok {
                        out.push(format!("{p}: key must match ^[a-z][a-z0-9_-]*$"));
                    }
                    walk(x, &p, out);
                }
            }
            Value::Array(_) => out.push(format!(
                "{}: arrays are not allowed in a config object",
                if ptr.is_empty() { "/" } else { ptr }
            )),
            Value::Number(n) if n.as_f64().is_none_or(|f| !f.is_finite()) => {
                out.push(format!("{ptr}: number must be finite"))
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if v.as_object().is_none() {
        return vec!["/: effective config must be a JSON object".into()];
    }
    walk(v, "", &mut out);
    out
}

/// Every metric name a case can emit.
pub fn metric_names() -> Vec<String> {
    metrics::compute(&[], Slo::default(), ValidityLimits::default())
        .rows()
        .into_iter()
        .map(|r| r.name)
        .collect()
}

fn evidence_path_for(result: &Path) -> PathBuf {
    let stem = result
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "case-result".into());
    result.with_file_name(format!("{stem}.serve-evidence.json"))
}

struct Inputs {
    recipe: LaunchRecipe,
    corpus: Corpus,
    case_id: String,
}

fn read_inputs(
    o: &ServeOptions,
    base_url: Option<&BaseUrl>,
) -> Result<Inputs, (Option<String>, Vec<String>)> {
    let mut errs = Vec::new();
    let loaded = kiln_launch::load_launch(&o.launch, base_url)
        .map_err(|e| errs.push(format!("failed to read the launch recipe: {e}")))
        .ok();
    let recipe = loaded.as_ref().and_then(|r| {
        let model = o
            .model_path
            .as_ref()
            .map(|p| std::path::absolute(p).unwrap_or(p.clone()));
        r.with_model_path(model.as_deref())
            .map_err(|e| errs.push(format!("failed to apply the model path: {e}")))
            .ok()
    });
    let corpus = corpus::load(&o.corpus)
        .map_err(|e| errs.push(format!("failed to read the corpus: {e}")))
        .ok();
    let case_id = o
        .case_id
        .clone()
        .or_else(|| loaded.as_ref().map(|r| r.id.clone()));
    match &case_id {
        Some(id) if !is_identifier(id) => errs.push(format!(
            "case id {id:?} must match ^[a-z0-9][a-z0-9._-]{{2,127}}$"
        )),
        None => errs.push("no case id: pass --case-id or a valid launch recipe".into()),
        _ => {}
    }
    errs.extend(
        validate_config(&o.effective_config)
            .into_iter()
            .map(|m| format!("effective config {m}")),
    );
    if let Some(sel) = &o.metrics {
        let known = metric_names();
        for m in sel {
            if !known.contains(m) {
                errs.push(format!("unknown metric {m:?}"));
            }
        }
        let mut s = sel.clone();
        s.sort();
        s.dedup();
        if s.len() != sel.len() {
            errs.push("metric selection repeats a name".into());
        }
    }
    if o.requests == Some(0) {
        errs.push("at least one measured request is needed".into());
    }
    if !errs.is_empty() {
        return Err((case_id.filter(|c| is_identifier(c)), errs));
    }
    Ok(Inputs {
        recipe: recipe.expect("checked"),
        corpus: corpus.expect("checked"),
        case_id: case_id.expect("checked"),
    })
}

fn create_new(path: &Path, bytes: &[u8]) -> Result<(), ServeError> {
    let w = |source| ServeError::Write {
        path: path.display().to_string(),
        source,
    };
    qual_json::publish::write_new(path, bytes).map_err(w)
}

/// What the server must not write: the directory of the case result and evidence, and git's
/// state (`qual_git::state_dirs`: `.git`, and for a linked worktree its gitdir and the common
/// git directory) and `.qualification/` of the repository around the working directory.
/// (Public for the paired campaign, whose servers get the same protection.)
pub fn protected_paths(result: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    // A bare file name (`--result r.json`) has an empty parent: the current directory.
    let parent = result
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let Ok(dir) = std::fs::canonicalize(parent) {
        out.push(dir);
    }
    if let Ok(cwd) = std::env::current_dir() {
        if let Some(top) = cwd.ancestors().find(|d| d.join(".git").exists()) {
            out.extend(qual_git::state_dirs(top));
            if top.join(".qualification").is_dir() {
                out.push(top.join(".qualification"));
            }
        }
    }
    out
}

/// Runs one serving case and writes its case result and evidence.
pub fn run(
    o: &ServeOptions,
    progress: Option<Arc<dyn ProgressSink>>,
) -> Result<ServeOutcome, ServeError> {
    run_with_base_url(o, None, progress)
}

/// [`run`] with the server URL of a `kiln.serving-benchmark-server-launch.v1` recipe (required
/// for that schema, refused for `kiln-qual.serve-launch.v1`, which declares its port).
pub fn run_with_base_url(
    o: &ServeOptions,
    base_url: Option<&BaseUrl>,
    progress: Option<Arc<dyn ProgressSink>>,
) -> Result<ServeOutcome, ServeError> {
    let epoch = Instant::now();
    let evidence_path = evidence_path_for(&o.result);
    check_output_paths(o, &evidence_path)?;
    let inputs = match read_inputs(o, base_url) {
        Ok(i) => i,
        Err((Some(case_id), errs)) => {
            let ev = EvidenceDoc {
                head: serde_json::json!({"schema": "kiln-qual.serve-evidence.v1", "case_id": case_id, "status": "failed", "reasons": errs}),
                requests: None,
            };
            return finish(
                o,
                &case_id,
                epoch,
                errs,
                None,
                Vec::new(),
                ev,
                evidence_path,
            );
        }
        Err((None, errs)) => return Err(ServeError::Input(errs.join("; "))),
    };
    let mut reasons: Vec<String> = Vec::new();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return Err(ServeError::Input(format!(
                "failed to start the probe runtime: {e}"
            )))
        }
    };
    let Served {
        lifecycle,
        records,
        server_info,
        load_spec,
    } = serve_and_load(o, &inputs, (&rt, epoch), progress, &mut reasons);
    if let Some(sig) = qual_exec::signals::interrupted() {
        reasons.push(format!(
            "interrupted by signal {sig}; the server was shut down"
        ));
    }
    reasons.extend(lifecycle.failures.iter().cloned());
    let ran = load_spec.is_some() && !records.is_empty();
    let mut limits = o.validity;
    limits.gate_late_sends &= !matches!(o.arrival, crate::load::Arrival::ClosedLoop { .. });
    let m = ran.then(|| metrics::compute_gated(&records, o.slo, limits, o.metrics.as_deref()));
    let rows = m.as_ref().map(|m| m.rows()).unwrap_or_default();
    outcome_reasons(o, m.as_ref(), &rows, &records, &mut reasons);
    let evidence = evidence_document(
        o,
        &inputs,
        epoch,
        &reasons,
        Served {
            lifecycle,
            records,
            server_info,
            load_spec,
        },
        (&m, &rows),
    );
    let case_id = inputs.case_id.clone();
    finish(
        o,
        &case_id,
        epoch,
        reasons,
        m,
        rows,
        evidence,
        evidence_path,
    )
}

/// Refuses to start when the result's directory is missing or either output file exists.
fn check_output_paths(o: &ServeOptions, evidence_path: &Path) -> Result<(), ServeError> {
    let parent = o
        .result
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(ServeError::Write {
            path: o.result.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the result's directory does not exist",
            ),
        });
    }
    for p in [o.result.as_path(), evidence_path] {
        if p.exists() {
            return Err(ServeError::Write {
                path: p.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "file already exists; refusing to replace it",
                ),
            });
        }
    }
    Ok(())
}

/// What the owned server and the load produced.
struct Served {
    lifecycle: LifecycleRecord,
    records: Vec<RequestRecord>,
    server_info: serde_json::Value,
    load_spec: Option<LoadSpec>,
}

/// Launches the server, waits for readiness, checks the model and the listener, runs the
/// load, checks liveness and shuts the server down (each failure a reason).
fn serve_and_load(
    o: &ServeOptions,
    inputs: &Inputs,
    (rt, epoch): (&tokio::runtime::Runtime, Instant),
    progress: Option<Arc<dyn ProgressSink>>,
    reasons: &mut Vec<String>,
) -> Served {
    let measured = o.requests.unwrap_or(inputs.corpus.entries.len());
    let mut records: Vec<RequestRecord> = Vec::new();
    let mut server_info = serde_json::Value::Null;
    let mut load_spec: Option<LoadSpec> = None;
    let protect = protected_paths(&o.result);
    let lifecycle: LifecycleRecord = match OwnedServer::launch(&inputs.recipe, epoch, &protect) {
        Err(not_running) => not_running.into_record(),
        Ok(mut server) => {
            if let Some((body, ids)) = server.wait_ready(rt) {
                let model = o.model.clone().unwrap_or_else(|| ids[0].clone());
                server_info = serde_json::json!({
                    "base_url": inputs.recipe.base_url(),
                    "model": model,
                    "served_models": ids,
                    "models_body_sha256": qual_json::sha256_prefixed(&body),
                });
                if o.model.is_some() && !ids.contains(&model) {
                    reasons.push(format!("model {model:?} is not served (served: {ids:?})"));
                } else if server.check_listener() && server.check_device_report() {
                    let spec = LoadSpec {
                        addr: server.addr(),
                        model,
                        arrival: o.arrival,
                        warmup: o.warmup,
                        measured,
                        seed: o.seed,
                        max_in_flight: o.max_in_flight,
                        request_timeout: o.request_timeout,
                        rules: o.rules,
                        pin_cpu: o.pin_cpu,
                        realtime_reader: o.realtime_reader,
                    };
                    match load::run(&inputs.corpus, &spec, epoch, progress) {
                        Ok(r) => records = r,
                        Err(e) => reasons.push(format!("failed to {e}")),
                    }
                    load_spec = Some(spec);
                    server.check_alive_after_run();
                }
            }
            server.shutdown()
        }
    };
    Served {
        lifecycle,
        records,
        server_info,
        load_spec,
    }
}

/// The reasons the measured records give: no success, too many failures, failed warmup,
/// validity violations, a selected metric without a value.
fn outcome_reasons(
    o: &ServeOptions,
    m: Option<&ServingMetrics>,
    rows: &[MetricRow],
    records: &[RequestRecord],
    reasons: &mut Vec<String>,
) {
    if let Some(m) = m {
        if m.succeeded_requests == 0 {
            reasons.push("no measured request succeeded".into());
        }
        if m.failed_requests > o.max_failed_requests {
            let mut seen: Vec<String> = Vec::new();
            for r in records
                .iter()
                .filter(|r| r.phase == crate::record::Phase::Measured)
            {
                if let crate::record::Outcome::Failed { reason } = &r.outcome {
                    if !seen.contains(reason) && seen.len() < 3 {
                        seen.push(reason.clone());
                    }
                }
            }
            reasons.push(format!(
                "{} of {} measured requests failed (allowed: {}): {}",
                m.failed_requests,
                m.measured_requests,
                o.max_failed_requests,
                seen.join("; ")
            ));
        }
        let warm_failed = records
            .iter()
            .filter(|r| r.phase == crate::record::Phase::Warmup && !r.outcome.is_success())
            .count();
        if warm_failed > 0 {
            reasons.push(format!("{warm_failed} warmup request(s) failed"));
        }
        reasons.extend(m.validity.violations.iter().cloned());
        if let Some(sel) = &o.metrics {
            for name in sel {
                if let Some(r) = rows.iter().find(|r| &r.name == name) {
                    if r.value.is_none() {
                        reasons.push(format!(
                            "metric {name} has no value: {}",
                            r.null_reason.clone().unwrap_or_default()
                        ));
                    }
                }
            }
        }
    } else if reasons.is_empty() {
        reasons.push("the load did not run".into());
    }
}

/// The serve evidence document.
fn evidence_document(
    o: &ServeOptions,
    inputs: &Inputs,
    epoch: Instant,
    reasons: &[String],
    served: Served,
    (m, rows): (&Option<ServingMetrics>, &[MetricRow]),
) -> EvidenceDoc {
    let definitions: serde_json::Map<String, serde_json::Value> = metrics::DEFINITIONS
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    let minimums: serde_json::Map<String, serde_json::Value> = metrics::PERCENTILES
        .iter()
        .map(|(l, _, n)| (l.to_string(), serde_json::Value::from(*n)))
        .collect();
    let head = serde_json::json!({
        "schema": "kiln-qual.serve-evidence.v1",
        "case_id": inputs.case_id,
        "status": if reasons.is_empty() { "passed" } else { "failed" },
        "reasons": reasons,
        "tool": {"name": "kiln-qual", "version": env!("CARGO_PKG_VERSION")},
        "definitions": definitions,
        "percentile_method": metrics::PERCENTILE_METHOD,
        "percentile_minimum_samples": minimums,
        "late_send_threshold_ms": o.validity.late_send_ms,
        "max_late_send_fraction": o.validity.max_disturbed_fraction,
        "validity_limits": o.validity,
        "clock": {
            "source": "CLOCK_MONOTONIC",
            "epoch_monotonic_ns": crate::rxclock::monotonic_ns_of(epoch),
        },
        "launch": {
            "path": o.launch.display().to_string(),
            "file_sha256": inputs.recipe.file_sha256,
            "canonical_sha256": inputs.recipe.canonical_sha256,
            "recipe": inputs.recipe.document.to_serde(),
        },
        "model_path": o.model_path.as_ref().map(|p| p.display().to_string()),
        "corpus": {
            "path": o.corpus.display().to_string(),
            "sha256": inputs.corpus.sha256,
            "entries": inputs.corpus.entries.len(),
        },
        "load": served.load_spec,
        "stream_rules": {"allow_missing_usage": o.rules.allow_missing_usage, "allow_missing_done": o.rules.allow_missing_done},
        "slo": o.slo,
        "max_failed_requests": o.max_failed_requests,
        "server": served.server_info,
        "lifecycle": served.lifecycle,
        "metrics": m,
        "metric_rows": rows,
    });
    EvidenceDoc {
        head,
        requests: Some(served.records),
    }
}

/// The evidence document: its members as a JSON object, and the per-request records, which
/// are serialized straight from the records (as the member `requests`, at its place in the
/// sorted member order) rather than through a `serde_json::Value` tree: millions of
/// timestamps as `Value`s cost more memory and time than writing them.
struct EvidenceDoc {
    head: serde_json::Value,
    requests: Option<Vec<RequestRecord>>,
}

impl serde::Serialize for EvidenceDoc {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let empty = serde_json::Map::new();
        let head = self.head.as_object().unwrap_or(&empty);
        let mut map = s.serialize_map(Some(head.len() + usize::from(self.requests.is_some())))?;
        let mut pending = self.requests.as_deref();
        for (k, v) in head {
            if let Some(r) = pending.filter(|_| k.as_str() > "requests") {
                map.serialize_entry("requests", r)?;
                pending = None;
            }
            map.serialize_entry(k, v)?;
        }
        if let Some(r) = pending {
            map.serialize_entry("requests", r)?;
        }
        map.end()
    }
}

#[allow(clippy::too_many_arguments)]
fn finish(
    o: &ServeOptions,
    case_id: &str,
    epoch: Instant,
    reasons: Vec<String>,
    m: Option<ServingMetrics>,
    rows: Vec<MetricRow>,
    evidence: EvidenceDoc,
    evidence_path: PathBuf,
) -> Result<ServeOutcome, ServeError> {
    let status = if reasons.is_empty() {
        CaseStatus::Passed
    } else {
        CaseStatus::Failed
    };
    let selected: Vec<&MetricRow> = rows
        .iter()
        .filter(|r| r.value.is_some_and(f64::is_finite))
        .filter(|r| o.metrics.as_ref().is_none_or(|s| s.contains(&r.name)))
        .collect();
    let metrics: Vec<serde_json::Value> = selected
        .iter()
        .map(|r| {
            serde_json::json!({
                "name": r.name,
                "value": r.value,
                "unit": r.unit,
                "aggregation": r.aggregation,
                "lower_is_better": r.lower_is_better,
            })
        })
        .collect();
    let details = if reasons.is_empty() {
        serde_json::Value::Null
    } else {
        let mut d = reasons.join("; ");
        if d.chars().count() > 2048 {
            d = d.chars().take(2047).collect::<String>() + "…";
        }
        serde_json::Value::String(d)
    };
    let result = serde_json::json!({
        "schema_version": 1,
        "case_id": case_id,
        "status": status,
        "duration_seconds": epoch.elapsed().as_secs_f64(),
        "effective_config": o.effective_config.to_serde().unwrap_or(serde_json::json!({})),
        "metrics": metrics,
        "tolerances": [],
        "details": details,
    });
    // serde's pretty format with arrays of scalars on one line, not
    // `qual_json::to_pretty_json`: this document's bytes (field order, raw UTF-8, serde's
    // float spelling) are its format; the Python-compatible writer would change them. The
    // per-request timestamp arrays on one line keep millions of numbers off lines of their
    // own (see `qual_json::pretty`).
    let mut ev_bytes = qual_json::pretty::to_vec_serde_pretty_flat_scalars(&evidence)
        .expect("evidence serializes");
    ev_bytes.push(b'\n');
    create_new(&evidence_path, &ev_bytes)?;
    let mut bytes = serde_json::to_vec_pretty(&result).expect("result serializes");
    bytes.push(b'\n');
    create_new(&o.result, &bytes)?;
    Ok(ServeOutcome {
        status,
        reasons,
        metrics: m,
        rows,
        result_path: o.result.clone(),
        evidence_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_objects_are_checked() {
        let ok = qual_json::from_str(r#"{"a":{"b-c":1.5,"d":null,"e":"x"}}"#).unwrap();
        assert!(validate_config(&ok).is_empty());
        let bad = qual_json::from_str(r#"{"A":1,"b":[1],"c":{"_x":true}}"#).unwrap();
        let v = validate_config(&bad);
        assert_eq!(v.len(), 3, "{v:?}");
        assert!(v.iter().any(|m| m.starts_with("/b:")));
        assert!(v.iter().any(|m| m.starts_with("/c/_x:")));
    }

    #[test]
    fn evidence_sits_next_to_the_result() {
        assert_eq!(
            evidence_path_for(Path::new("/x/command-result.json")),
            PathBuf::from("/x/command-result.serve-evidence.json")
        );
    }

    #[test]
    fn metric_names_are_unique_and_sorted() {
        let n = metric_names();
        assert!(n.windows(2).all(|w| w[0] < w[1]));
        assert!(n.contains(&"ttft_ms.p50".to_string()));
        assert!(n.contains(&"itl_ms.p99.9".to_string()));
    }
}
