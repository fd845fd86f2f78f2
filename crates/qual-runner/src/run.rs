//! The orchestration of one run: preflight, bindings, execution, drift checks, verdict and the
//! exclusively written receipt.
//!
//! Lifecycle of the run directory `.qualification/runs/<receipt-id>/`: it is created
//! (exclusively) only after preflight passed; from then on any error or interruption removes
//! it before returning; it is released only after the receipt file exists. A `kill -9` of the
//! runner can leave a run directory behind, never a partial receipt (see
//! `qual_receipt::write::create_exclusive`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use qual_contract::variables::RunnerValues;
use qual_contract::{DeviceRequirement, Producer, SkipPolicy};
use qual_json::{Object, Value};
use qual_probe::backend::{self, ProbeStatus};
use qual_probe::git::Repo;
use qual_probe::model::ModelFingerprint;
use qual_probe::{platform, source_tree};
use qual_receipt::model::{
    default_receipt_path, format_utc_millis, generate_receipt_id, is_valid_receipt_id, Artifact,
    ArtifactLocation, CaseResultEntry, Environment, OsIdentity, Qualification, Receipt,
    ResultStatus, Source, Verdict, WorkloadBinding,
};
use qual_receipt::write::{create_exclusive, to_pretty_json};

use crate::aggregate::{
    aggregate_case, apply_infrastructure_failures, apply_skip_policy, verdict, ExecutionOutcome,
};
use crate::details::join_details;
use crate::environment::{execution_environment_sha256, host_base_environment, redacted, POLICY};
use crate::error::{Refusal, RunError};
use crate::execute::{run_execution, ExecContext, ExecStop};
use crate::paths;
use crate::preflight::{preflight, Prepared};
use crate::RunRequest;

/// Per-stream capture bound for one execution.
pub const CASE_OUTPUT_LIMIT_BYTES: u64 = 16 * 1024 * 1024;
/// Capture budget of a whole run.
pub const MAX_RUN_CAPTURE_BYTES: u64 = 256 * 1024 * 1024;
/// Largest case result of one execution.
pub const CASE_RESULT_LIMIT_BYTES: u64 = 16 * 1024 * 1024;
/// Structured-evidence budget of a whole run.
pub const MAX_RUN_STRUCTURED_BYTES: u64 = 64 * 1024 * 1024;

/// Host variable prefixes recorded (redacted) as raw environment evidence.
pub const CAPTURED_PREFIXES: [&str; 11] = [
    "KILN_", "HIP_", "HSA_", "ROCR_", "VK_", "GGML_VK_", "CUDA_", "NVIDIA_", "CUDARC_", "METAL_",
    "MTL_",
];

/// What a finished run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// Absolute receipt path.
    pub receipt_path: PathBuf,
    /// Receipt path relative to the repository root.
    pub receipt_rel: String,
    /// The receipt.
    pub receipt: Receipt,
    /// Run directory relative to the repository root.
    pub run_dir_rel: String,
}

impl RunOutcome {
    /// The verdict.
    pub fn verdict(&self) -> Verdict {
        self.receipt.qualification.verdict
    }
}

/// Removes the run directory unless released.
struct RunDirGuard {
    path: PathBuf,
    armed: bool,
}

impl Drop for RunDirGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn interrupted() -> Result<(), RunError> {
    match qual_exec::signals::interrupted() {
        Some(signal) => Err(RunError::Interrupted { signal }),
        None => Ok(()),
    }
}

fn aborted(e: impl std::fmt::Display) -> RunError {
    RunError::Aborted(e.to_string())
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_else(|_| p.to_string_lossy().into_owned())
}

fn write_evidence(root: &Path, path: &Path, kind: &str, v: &Value) -> Result<Artifact, RunError> {
    let bytes = to_pretty_json(v).into_bytes();
    create_exclusive(path, &bytes).map_err(aborted)?;
    Ok(Artifact {
        kind: kind.into(),
        location: ArtifactLocation::LocalIgnored,
        path: rel(root, path),
        sha256: qual_json::sha256_prefixed(&bytes),
        bytes: bytes.len() as u64,
    })
}

fn string_map(m: &BTreeMap<String, String>) -> Value {
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect(),
    )
}

/// Runs one variant and writes its receipt.
pub fn run(req: &RunRequest) -> Result<RunOutcome, RunError> {
    // Forwarding makes SIGINT/SIGTERM observable; failing to install it is not fatal.
    let _ = qual_exec::signals::install_forwarding();
    interrupted()?;
    let p = preflight(req)?;
    interrupted()?;
    let w = &p.loaded.workload;
    let backend = p.variant.backend.as_str();
    let started_wall = SystemTime::now();
    let t0 = Instant::now();
    let receipt_id = match &req.receipt_id {
        Some(id) => id.clone(),
        None => generate_receipt_id(
            started_wall,
            backend,
            &req.host_id,
            &w.workload_id,
            &p.variant.id,
        ),
    };
    if !is_valid_receipt_id(&receipt_id) {
        return Err(Refusal::BadReceiptId.into());
    }
    let receipt_rel = p
        .output_rel
        .clone()
        .unwrap_or_else(|| default_receipt_path(backend, &req.host_id, &receipt_id));
    let receipt_rel = paths::check_receipt_output(&p.root, &p.root, Path::new(&receipt_rel))
        .map_err(Refusal::ReceiptPath)?;
    let receipt_path = p.root.join(&receipt_rel);
    if std::fs::symlink_metadata(&receipt_path).is_ok() {
        return Err(Refusal::ReceiptExists(receipt_rel).into());
    }
    let run_dir_rel = paths::check_run_dir(&p.root, &receipt_id).map_err(Refusal::RunDirPath)?;
    let run_dir = p.root.join(&run_dir_rel);
    if std::fs::symlink_metadata(&run_dir).is_ok() {
        return Err(Refusal::RunDirExists(run_dir_rel).into());
    }
    std::fs::create_dir_all(run_dir.parent().expect("runs root")).map_err(aborted)?;
    match std::fs::create_dir(&run_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(Refusal::RunDirExists(run_dir_rel).into())
        }
        Err(e) => return Err(aborted(format!("cannot create run directory: {e}"))),
    }
    let mut guard = RunDirGuard {
        path: run_dir.clone(),
        armed: true,
    };
    let receipt = execute_run(
        req,
        &p,
        &receipt_id,
        &run_dir,
        &receipt_path,
        started_wall,
        t0,
    )?;
    guard.armed = false;
    Ok(RunOutcome {
        receipt_path,
        receipt_rel,
        receipt,
        run_dir_rel,
    })
}

#[allow(clippy::too_many_arguments)]
fn execute_run(
    req: &RunRequest,
    p: &Prepared,
    receipt_id: &str,
    run_dir: &Path,
    receipt_path: &Path,
    started_wall: SystemTime,
    t0: Instant,
) -> Result<Receipt, RunError> {
    let w = &p.loaded.workload;
    let variant = &p.variant;
    let backend = variant.backend.as_str();
    let root = &p.root;
    let repo = Repo::new(root);
    let mut infra: Vec<String> = Vec::new();
    let mut artifacts: Vec<Artifact> = Vec::new();
    let mut unsupported: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let base_env = host_base_environment();
    let env_sha = execution_environment_sha256(&base_env);

    // Initial model fingerprint.
    let mut model_failed = false;
    let initial_model: Option<ModelFingerprint> = match &p.model_path {
        None => None,
        Some(mp) => match qual_probe::model::fingerprint(mp, req.model_id.as_deref()) {
            Ok(f) => Some(f),
            Err(e) => {
                model_failed = true;
                infra.push(format!("initial model fingerprint failed: {e}"));
                None
            }
        },
    };
    if let Some(m) = &initial_model {
        artifacts.push(write_evidence(
            root,
            &run_dir.join("model-fingerprint-initial.json"),
            "model_fingerprint_initial",
            &m.to_value(),
        )?);
    }
    interrupted()?;

    // Environment capture.
    let plat = platform::probe();
    let capture = if model_failed {
        None
    } else {
        Some(backend::capture(backend, &plat))
    };
    let (device, mut runtime, compiler, probes) = match &capture {
        Some(c) => (
            c.device.clone(),
            c.runtime.clone(),
            c.compiler.clone(),
            c.probes.clone(),
        ),
        None => {
            let mut r = BTreeMap::new();
            r.insert(backend.to_string(), "unavailable".to_string());
            let mut c = BTreeMap::new();
            c.insert("rustc".to_string(), "unavailable".to_string());
            (backend::Device::unavailable(), r, c, Vec::new())
        }
    };
    runtime.insert("execution_environment_sha256".into(), env_sha.clone());
    if let Some(c) = &capture {
        unsupported.extend(c.unsupported.iter().cloned());
        for pr in &c.probes {
            if pr.required && pr.status != ProbeStatus::Passed {
                infra.push(match &pr.details {
                    Some(d) => format!(
                        "environment probe {} failed: {d}",
                        qual_json::show::quote(&pr.id)
                    ),
                    None => format!(
                        "environment probe {} failed",
                        qual_json::show::quote(&pr.id)
                    ),
                });
            }
        }
        if variant.device_requirement == DeviceRequirement::Required && !c.device.detected() {
            infra.push("required backend device was not detected".into());
        }
    }
    for u in &plat.unavailable {
        unsupported.push(format!("host_{u}"));
    }
    let os = OsIdentity {
        name: plat.os.name.clone(),
        version: plat.os.version.clone(),
        kernel: plat.os.kernel.clone(),
        architecture: plat.os.architecture.clone(),
    };
    let platform_object =
        platform::wsl2_platform(&plat, Some(&p.network_mechanism)).map(|(v, u)| {
            unsupported.extend(u);
            v
        });
    let environment = Environment {
        host_id: req.host_id.clone(),
        os: os.clone(),
        device: device.to_value(),
        runtime: runtime.clone(),
        compiler: compiler.clone(),
        platform: platform_object.clone(),
    };
    {
        let mut env_obj = Object::new();
        let mut e = Object::new();
        e.insert("host_id", Value::from(req.host_id.as_str()));
        let mut o = Object::new();
        o.insert("name", Value::from(os.name.as_str()));
        o.insert("version", Value::from(os.version.as_str()));
        o.insert("kernel", Value::from(os.kernel.as_str()));
        o.insert("architecture", Value::from(os.architecture.as_str()));
        e.insert("os", Value::Object(o));
        e.insert("device", device.to_value());
        e.insert("runtime", string_map(&runtime));
        e.insert("compiler", string_map(&compiler));
        if let Some(pv) = &platform_object {
            e.insert("platform", pv.clone());
        }
        env_obj.insert("environment", Value::Object(e));
        env_obj.insert(
            "probe_results",
            Value::Array(probes.iter().map(|p| p.to_value()).collect()),
        );
        let captured: BTreeMap<String, String> = std::env::vars()
            .filter(|(k, _)| CAPTURED_PREFIXES.iter().any(|p| k.starts_with(p)))
            .collect();
        let mut raw = Object::new();
        raw.insert("backend", Value::from(backend));
        raw.insert("captured_environment", redacted(&captured));
        let mut host = Object::new();
        host.insert(
            "cpu_model",
            plat.cpu_model
                .as_deref()
                .map(Value::from)
                .unwrap_or(Value::Null),
        );
        host.insert(
            "logical_cpus",
            plat.logical_cpus.map(Value::from).unwrap_or(Value::Null),
        );
        host.insert(
            "memory_total_bytes",
            plat.memory_total_bytes
                .map(Value::from)
                .unwrap_or(Value::Null),
        );
        host.insert(
            "memory_available_bytes",
            plat.memory_available_bytes
                .map(Value::from)
                .unwrap_or(Value::Null),
        );
        host.insert("wsl2", Value::Bool(plat.wsl2));
        host.insert("macos", Value::Bool(plat.macos));
        host.insert(
            "unavailable",
            Value::Array(
                plat.unavailable
                    .iter()
                    .map(|s| Value::from(s.as_str()))
                    .collect(),
            ),
        );
        raw.insert("host", Value::Object(host));
        let mut rc = Object::new();
        rc.insert(
            "network_isolation",
            Value::from(p.network_mechanism.as_str()),
        );
        raw.insert("runner_containment", Value::Object(rc));
        if model_failed {
            raw.insert(
                "detail",
                Value::from(
                    "environment capture was not started after initial model fingerprint failure",
                ),
            );
        }
        env_obj.insert("raw", Value::Object(raw));
        artifacts.push(write_evidence(
            root,
            &run_dir.join("environment.json"),
            "environment_probes",
            &Value::Object(env_obj),
        )?);
    }
    interrupted()?;

    // Budgets.
    let reps = w.determinism.repetitions.max(1);
    let execution_count = reps * variant.cases.len() as u64;
    let (per_stream, per_result) = if model_failed {
        (0, 0)
    } else {
        (
            CASE_OUTPUT_LIMIT_BYTES.min(MAX_RUN_CAPTURE_BYTES / (2 * execution_count.max(1))),
            CASE_RESULT_LIMIT_BYTES.min(MAX_RUN_STRUCTURED_BYTES / (2 * execution_count.max(1))),
        )
    };

    // Execution.
    let runner_values = RunnerValues {
        seed: w.determinism.seed.map(|s| s.to_string()),
        model_path: initial_model.as_ref().map(|m| m.path.clone()),
        host_id: Some(req.host_id.clone()),
    };
    let effective_config =
        Value::from_serde(&serde_json::Value::Object(variant.effective_config.clone()));
    let mut read_only = judged_paths(root, receipt_path).map_err(aborted)?;
    // A model outside the worktree is visible in the box, read-only, wherever it lives (one
    // below the host's `/tmp` is bound into the box's private `/tmp` at its place); one in
    // the worktree stays as writable as the worktree, its drift caught by the fingerprints.
    if let Some(mp) = &p.model_path {
        let mp = std::fs::canonicalize(mp).unwrap_or_else(|_| mp.clone());
        let top = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        if !mp.starts_with(&top) {
            read_only.push(mp);
        }
    }
    let ctx = ExecContext {
        read_only: &read_only,
        root,
        run_dir,
        variant_id: &variant.id,
        effective_config: &effective_config,
        base_env: &base_env,
        variables: &p.variables,
        runner_values: &runner_values,
        network_mechanism: &p.network_mechanism,
        term_grace: p.term_grace,
        per_stream_limit: per_stream,
        per_case_result_limit: per_result,
    };
    let mut config_verified = !model_failed;
    let mut run_config_cases = Vec::new();
    // Every program the runner starts from here on (git for the drift checks) was resolved
    // before the first case could plant one on PATH.
    qual_trusted::seal();
    let mut results: Vec<CaseResultEntry> = Vec::new();
    if model_failed {
        results = crate::aggregate::unexecuted_results(
            variant.cases.iter().map(|c| (c.id.as_str(), c.required)),
            join_details(&infra),
        );
        notes.push("Model identity is absent because the initial model fingerprint failed.".into());
    } else {
        for (i, case) in variant.cases.iter().enumerate() {
            let mut outcomes: Vec<ExecutionOutcome> = Vec::new();
            for r in 1..=reps {
                interrupted()?;
                let rec = match run_execution(&ctx, i + 1, case, r) {
                    Ok(rec) => rec,
                    Err(ExecStop::Interrupted(signal)) => {
                        return Err(RunError::Interrupted { signal })
                    }
                    Err(ExecStop::Io(e)) => return Err(aborted(e)),
                };
                config_verified &= rec.config_verified;
                artifacts.extend(rec.artifacts);
                run_config_cases.push(rec.run_config);
                outcomes.push(rec.outcome);
            }
            results.push(aggregate_case(
                &case.id,
                case.required,
                case.result_protocol.producer == Producer::Runner,
                &outcomes,
            ));
        }
    }
    interrupted()?;

    // Final model fingerprint.
    let mut final_model_value = None;
    if let (Some(initial), Some(mp)) = (&initial_model, &p.model_path) {
        match qual_probe::model::fingerprint(mp, req.model_id.as_deref()) {
            Ok(f) => {
                if qual_json::to_canonical_string(&f.to_value())
                    != qual_json::to_canonical_string(&initial.to_value())
                {
                    infra.push("model fingerprint changed during qualification".into());
                }
                final_model_value = Some(f.to_value());
            }
            Err(e) => infra.push(format!("final model fingerprint failed: {e}")),
        }
    }
    if let Some(v) = &final_model_value {
        artifacts.push(write_evidence(
            root,
            &run_dir.join("model-fingerprint-final.json"),
            "model_fingerprint_final",
            v,
        )?);
    }

    // Final source verification.
    let mut clean_at_end = true;
    match repo.head_commit() {
        Ok(h) if h != p.commit => infra.push(format!(
            "Git HEAD changed during qualification: {} -> {h}",
            p.commit
        )),
        Ok(_) => {}
        Err(e) => infra.push(format!("final source verification failed: {e}")),
    }
    match repo.is_clean() {
        Ok(true) => {}
        Ok(false) => {
            clean_at_end = false;
            infra.push("Git worktree became dirty during qualification".into());
        }
        Err(e) => infra.push(format!("final source verification failed: {e}")),
    }
    match source_tree::compute(root, p.policy.source_tree_profile) {
        Ok(t) if t.digest != p.source.digest => infra.push(format!(
            "source tree changed during qualification: {} -> {}",
            p.source.digest, t.digest
        )),
        Ok(_) => {}
        Err(e) => infra.push(format!("final source verification failed: {e}")),
    }

    // Committed policy metric definitions.
    if let Some(policy) = &w.comparison_policy {
        for rule in &policy.metric_rules {
            let q = |s: &str| qual_json::show::quote(s);
            match results.iter().find(|r| r.id == rule.result_id) {
                None => infra.push(format!(
                    "policy metric {} names missing result {}",
                    q(&rule.metric),
                    q(&rule.result_id)
                )),
                Some(r) => match r.metrics.iter().find(|m| m.name == rule.metric) {
                    None if rule.required => infra.push(format!(
                        "required policy metric {} is missing from result {}",
                        q(&rule.metric),
                        q(&rule.result_id)
                    )),
                    None => {}
                    Some(m)
                        if (m.unit.as_str(), m.aggregation.as_str(), m.lower_is_better)
                            != (
                                rule.unit.as_str(),
                                rule.aggregation.as_str(),
                                rule.lower_is_better,
                            ) =>
                    {
                        infra.push(format!(
                            "metric {} definition in result {} does not match committed policy",
                            q(&rule.metric),
                            q(&rule.result_id)
                        ));
                    }
                    Some(_) => {}
                },
            }
        }
    }

    apply_skip_policy(&mut results, variant.skip_policy == SkipPolicy::Fail);
    apply_infrastructure_failures(&mut results, &infra);
    let mut verdict_value = verdict(&results);

    // run-config.json.
    let mut rc = Object::new();
    rc.insert("schema_version", Value::from(1u64));
    rc.insert("receipt_id", Value::from(receipt_id));
    rc.insert("workload_id", Value::from(w.workload_id.as_str()));
    rc.insert("workload_sha256", Value::from(p.loaded.sha256.as_str()));
    rc.insert("workload_path", Value::from(p.workload_rel.as_str()));
    rc.insert("variant_id", Value::from(variant.id.as_str()));
    rc.insert("backend", Value::from(backend));
    rc.insert(
        "variables",
        Value::Object(
            p.variables
                .values
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
    );
    rc.insert(
        "determinism",
        p.loaded
            .value
            .get("determinism")
            .cloned()
            .unwrap_or(Value::Null),
    );
    rc.insert(
        "network_isolation",
        Value::from(p.network_mechanism.as_str()),
    );
    rc.insert("model_fingerprint_supervision", Value::Null);
    rc.insert(
        "source_tree_profile",
        Value::from(p.policy.source_tree_profile.as_str()),
    );
    rc.insert(
        "source_tree_file_count",
        Value::from(p.source.files.len() as u64),
    );
    rc.insert(
        "case_execution_count",
        Value::from(if model_failed { 0 } else { execution_count }),
    );
    rc.insert("per_stream_output_limit_bytes", Value::from(per_stream));
    rc.insert("max_run_capture_bytes", Value::from(MAX_RUN_CAPTURE_BYTES));
    rc.insert("per_case_result_limit_bytes", Value::from(per_result));
    rc.insert(
        "max_run_structured_bytes",
        Value::from(MAX_RUN_STRUCTURED_BYTES),
    );
    rc.insert("case_environment_policy", Value::from(POLICY));
    rc.insert(
        "case_base_environment_sha256",
        Value::from(env_sha.as_str()),
    );
    rc.insert("case_base_environment", redacted(&base_env));
    rc.insert(
        "infrastructure_failures",
        Value::Array(infra.iter().map(|s| Value::from(s.as_str())).collect()),
    );
    if model_failed {
        rc.insert("pre_case_failure", Value::from("initial_model_fingerprint"));
    }
    rc.insert("cases", Value::Array(run_config_cases));
    artifacts.push(write_evidence(
        root,
        &run_dir.join("run-config.json"),
        "effective_run_config",
        &Value::Object(rc),
    )?);

    // Receipt.
    let duration = t0.elapsed();
    let finished = started_wall + duration;
    if p.policy.source_tree_profile == qual_probe::SourceTreeProfile::Generic {
        notes.push(
            "source.tree_hash uses the generic source-tree profile: every tracked file except qualification/receipts/"
                .into(),
        );
    }
    let mut parameters = Object::new();
    parameters.insert("variant_id", Value::from(variant.id.as_str()));
    for (k, v) in &p.variables.values {
        parameters.insert(k.clone(), v.clone());
    }
    let mut receipt = Receipt {
        receipt_id: receipt_id.to_string(),
        created_at_utc: format_utc_millis(finished),
        source: Source {
            tree_hash_format: source_tree::FORMAT.into(),
            tree_hash: p.source.digest.clone(),
            git_commit: p.commit.clone(),
            git_worktree_clean: clean_at_end,
        },
        qualification: Qualification {
            kind: w.kind.as_str().into(),
            backend: backend.into(),
            profile: w.workload_id.chars().take(128).collect(),
            verdict: verdict_value,
            started_at_utc: format_utc_millis(started_wall),
            finished_at_utc: format_utc_millis(finished),
            duration_seconds: duration.as_secs_f64(),
            command: req.command.clone(),
        },
        environment,
        model: initial_model.as_ref().map(|m| m.to_value()),
        workload: Some(WorkloadBinding {
            id: w.workload_id.clone(),
            sha256: p.loaded.sha256.clone(),
            seed: w.determinism.seed.map(Value::from).unwrap_or(Value::Null),
            parameters,
        }),
        effective_config: if config_verified {
            effective_config.clone()
        } else {
            Value::Object(Object::new())
        },
        results,
        metrics: Vec::new(),
        artifacts,
        unsupported,
        notes,
    };

    // Self-validation: local artifacts always, current source for a would-be passed receipt.
    let digest_fn = |r: &Path| -> Result<String, String> {
        let policy = qual_probe::load_policy(r).map_err(|e| e.to_string())?;
        source_tree::compute(r, policy.source_tree_profile)
            .map(|t| t.digest)
            .map_err(|e| e.to_string())
    };
    let strict = qual_receipt::validate::StrictChecks {
        root: Some(root),
        current_source: (verdict_value == Verdict::Passed).then_some(&digest_fn as _),
        local_artifacts: true,
        known_commit: false,
    };
    let violations = qual_receipt::validate::validate_strict(&receipt.to_value(), &strict);
    if !violations.is_empty() {
        let text: Vec<String> = violations
            .iter()
            .map(|v| qual_receipt::validate::Dotted(v).to_string())
            .collect();
        if verdict_value == Verdict::Passed {
            if let Some(r) = receipt.results.iter_mut().find(|r| r.required) {
                r.status = ResultStatus::Failed;
                let mut parts: Vec<String> = r.details.iter().cloned().collect();
                parts.push(format!("runner validation failed: {}", text.join(" | ")));
                r.details = join_details(&parts);
                for m in r.metrics.iter_mut().filter(|m| m.name == "case_pass") {
                    *m = crate::aggregate::runner_metric("case_pass", 0).expect("runner metric");
                }
            }
            verdict_value = Verdict::Failed;
            receipt.qualification.verdict = verdict_value;
            receipt
                .notes
                .push("Receipt was downgraded because current-source validation failed.".into());
            let strict = qual_receipt::validate::StrictChecks {
                root: Some(root),
                current_source: None,
                local_artifacts: true,
                known_commit: false,
            };
            let again = qual_receipt::validate::validate_strict(&receipt.to_value(), &strict);
            if !again.is_empty() {
                let t: Vec<String> = again
                    .iter()
                    .map(|v| qual_receipt::validate::Dotted(v).to_string())
                    .collect();
                return Err(aborted(format!(
                    "generated failed receipt is invalid: {}",
                    t.join(" | ")
                )));
            }
        } else {
            return Err(aborted(format!(
                "generated failed receipt is invalid: {}",
                text.join(" | ")
            )));
        }
    }
    interrupted()?;

    // Make every artifact durable (one syncfs for the run directory's file system), then
    // write the receipt last.
    sync_filesystem(run_dir).map_err(|e| aborted(format!("cannot sync run evidence: {e}")))?;
    let parent = receipt_path.parent().expect("receipt parent");
    std::fs::create_dir_all(parent)
        .map_err(|e| aborted(format!("cannot create receipt directory: {e}")))?;
    paths::check_receipt_output(root, root, receipt_path).map_err(aborted)?;
    if std::fs::symlink_metadata(receipt_path).is_ok() {
        return Err(aborted(format!(
            "something appeared at the receipt path {} during the run (not written by this run; \
             left untouched, and it is not this run's receipt)",
            receipt_path.display()
        )));
    }
    create_exclusive(receipt_path, to_pretty_json(&receipt.to_value()).as_bytes())
        .map_err(aborted)?;
    Ok(receipt)
}

/// What judges a case and must be read-only inside its box (see [`crate::case_box`]), with
/// the receipt's directory created now so that it can be bound.
fn judged_paths(root: &Path, receipt_path: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let parent = receipt_path.parent().expect("receipt parent");
    std::fs::create_dir_all(parent).map_err(|e| format!("cannot create receipt directory: {e}"))?;
    Ok(crate::case_box::protected_paths(root, Some(parent)))
}

/// `syncfs(2)` on the file system holding `dir`.
fn sync_filesystem(dir: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(dir)?;
    // SAFETY: `f` is an open descriptor for the duration of the call.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
