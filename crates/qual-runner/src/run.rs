//! The orchestration of one run as named phases, each a function with typed inputs and
//! outputs: [`preflight`] → [`place`] (receipt id, receipt path, run directory) → [`bind`]
//! (model fingerprint, environment capture, `environment.json`) → [`execute_cases`] (every case
//! × repetition) → [`settle`] (drift checks) → [`check_policy_metrics`] and [`aggregate`]
//! (skip policy, infrastructure failures, verdict) → [`write_run_config`] →
//! [`assemble_receipt`] → [`self_validate`] → [`publish`]. [`execute_run`] strings together
//! the phases after placement; the facts found on the way (artifacts, infrastructure failures,
//! unsupported capabilities, notes) accumulate in one `Findings`.
//!
//! Lifecycle of the run directory `.qualification/runs/<receipt-id>/`: it is created
//! (exclusively) only after preflight passed; from then on any error or interruption removes
//! it before returning; it is released only after the receipt file exists. A `kill -9` of the
//! runner can leave a run directory behind, never a partial receipt (see
//! `qual_receipt::write::create_exclusive`).

use crate::progress::{CaseProgress, NoProgress, RunProgress};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use qual_contract::variables::RunnerValues;
use qual_contract::{DeviceRequirement, Producer, SkipPolicy};
use qual_json::{Object, Value};
use qual_probe::backend::{self, ProbeStatus};
use qual_probe::cuda::CudaVisibility;
use qual_probe::git::Repo;
use qual_probe::model::ModelFingerprint;
use qual_probe::{platform, source_tree};
use qual_receipt::model::{
    default_receipt_path, format_utc_millis, generate_receipt_id, is_valid_receipt_id, Artifact,
    ArtifactLocation, CaseResultEntry, Environment, OsIdentity, Qualification, Receipt,
    ResultStatus, Source, Verdict, WorkloadBinding,
};
use qual_receipt::write::{create_exclusive, to_pretty_json};
use serde::Serialize;

use crate::aggregate::{
    aggregate_case, apply_infrastructure_failures, apply_skip_policy, verdict, ExecutionOutcome,
};
use crate::details::join_details;
use crate::document::{to_value, Raw};
use crate::environment::{execution_environment_sha256, host_base_environment, redacted, POLICY};
use crate::error::{Refusal, RunError};
use crate::evidence::{
    EnvironmentDoc, EnvironmentEvidence, HostDoc, OsDoc, RawEnvironment, RunConfig,
    RunnerContainment,
};
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
    qual_json::file::display_relative(root, p)
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

fn write_document(
    root: &Path,
    path: &Path,
    kind: &str,
    doc: &impl Serialize,
) -> Result<Artifact, RunError> {
    write_evidence(root, path, kind, &to_value(doc).map_err(aborted)?)
}

/// Where one run's evidence and receipt go, settled before anything is executed.
struct Placement {
    receipt_id: String,
    receipt_rel: String,
    receipt_path: PathBuf,
    run_dir_rel: String,
    run_dir: PathBuf,
    started_wall: SystemTime,
    t0: Instant,
}

/// What the run collects on its way: artifacts in order, infrastructure failures, unsupported
/// capabilities and receipt notes.
#[derive(Default)]
struct Findings {
    artifacts: Vec<Artifact>,
    infra: Vec<String>,
    unsupported: Vec<String>,
    notes: Vec<String>,
}

/// What the bind phase established about the host and the model.
struct Bindings {
    base_env: BTreeMap<String, String>,
    env_sha: String,
    initial_model: Option<ModelFingerprint>,
    /// The initial fingerprint failed: no case runs.
    model_failed: bool,
    /// The variant requires a device the backend probe did not detect: no case runs, and
    /// this is the reason each result carries (`skipped`, so the skip policy decides).
    device_missing: Option<String>,
    environment: Environment,
}

impl Bindings {
    /// Whether something found before the first case stops every case from running.
    fn no_case_runs(&self) -> bool {
        self.model_failed || self.device_missing.is_some()
    }
}

/// Per-execution capture budgets.
struct Budgets {
    execution_count: u64,
    per_stream: u64,
    per_result: u64,
}

/// What the execute phase produced.
struct Executed {
    results: Vec<CaseResultEntry>,
    run_config_cases: Vec<Value>,
    config_verified: bool,
    effective_config: Value,
}

/// Runs one variant and writes its receipt: preflight, place, then `execute_run`; the run
/// directory is removed unless the receipt was written.
pub fn run(req: &RunRequest) -> Result<RunOutcome, RunError> {
    run_observed(req, &NoProgress)
}

/// [`run`], telling `progress` about every case execution as it starts and when all ended.
pub fn run_observed(req: &RunRequest, progress: &dyn RunProgress) -> Result<RunOutcome, RunError> {
    // Forwarding makes SIGINT/SIGTERM observable; failing to install it is not fatal.
    let _ = qual_exec::signals::install_forwarding();
    interrupted()?;
    // A tool preflight ran (git) may have died of the same Ctrl-C: an interruption, not a
    // refusal.
    let p = preflight(req).map_err(|e| match qual_exec::signals::interrupted() {
        Some(signal) => RunError::Interrupted { signal },
        None => RunError::Refused(e),
    })?;
    interrupted()?;
    let place = place(req, &p)?;
    let mut guard = RunDirGuard {
        path: place.run_dir.clone(),
        armed: true,
    };
    let receipt = execute_run(req, &p, &place, progress)?;
    guard.armed = false;
    Ok(RunOutcome {
        receipt_path: place.receipt_path,
        receipt_rel: place.receipt_rel,
        receipt,
        run_dir_rel: place.run_dir_rel,
    })
}

/// Place: the receipt id, the receipt path (which must not exist) and the run directory,
/// created exclusively. Takes the preflight result; returns where everything goes. Creates
/// nothing but the run directory (and its parents), and refuses rather than reuse one.
fn place(req: &RunRequest, p: &Prepared) -> Result<Placement, RunError> {
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
    Ok(Placement {
        receipt_id,
        receipt_rel,
        receipt_path,
        run_dir_rel,
        run_dir,
        started_wall,
        t0,
    })
}

/// The phases after placement: bind → execute → settle → aggregate → write run config →
/// assemble and self-validate the receipt → publish. Returns the receipt it wrote.
fn execute_run(
    req: &RunRequest,
    p: &Prepared,
    place: &Placement,
    progress: &dyn RunProgress,
) -> Result<Receipt, RunError> {
    let mut found = Findings::default();
    let bound = bind(req, p, &place.run_dir, &mut found)?;
    interrupted()?;
    let budgets = budgets(p, bound.no_case_runs());
    let mut executed = execute_cases(req, p, place, &bound, &budgets, &mut found, progress)?;
    interrupted()?;
    let clean_at_end = settle(req, p, &bound, &place.run_dir, &mut found)?;
    check_policy_metrics(p, &executed.results, &mut found.infra);
    let verdict_value = aggregate(p, &mut executed.results, &found.infra);
    write_run_config(p, place, &bound, &budgets, &executed, &mut found)?;
    let receipt = assemble_receipt(Assembly {
        req,
        p,
        place,
        bound,
        executed,
        verdict: verdict_value,
        clean_at_end,
        found,
    });
    let receipt = self_validate(receipt, &p.root)?;
    interrupted()?;
    publish(&p.root, &place.run_dir, &place.receipt_path, &receipt)?;
    Ok(receipt)
}

/// Bind: the initial model fingerprint, the environment capture (platform and backend probes)
/// and `environment.json`. Takes the preflight result; returns the bindings the execution
/// needs and appends what it found. Runs no case; after a failed fingerprint it starts no
/// backend probe.
fn bind(
    req: &RunRequest,
    p: &Prepared,
    run_dir: &Path,
    found: &mut Findings,
) -> Result<Bindings, RunError> {
    let root = &p.root;
    let base_env = host_base_environment();
    let env_sha = execution_environment_sha256(&base_env);
    let mut model_failed = false;
    let initial_model: Option<ModelFingerprint> = match &p.model_path {
        None => None,
        Some(mp) => match qual_probe::model::fingerprint(mp, req.model_id.as_deref()) {
            Ok(f) => Some(f),
            Err(e) => {
                model_failed = true;
                found
                    .infra
                    .push(format!("initial model fingerprint failed: {e}"));
                None
            }
        },
    };
    if let Some(m) = &initial_model {
        found.artifacts.push(write_evidence(
            root,
            &run_dir.join("model-fingerprint-initial.json"),
            "model_fingerprint_initial",
            &m.to_value(),
        )?);
    }
    interrupted()?;
    let (environment, device_missing) =
        capture_environment(req, p, &env_sha, model_failed, run_dir, found)?;
    Ok(Bindings {
        base_env,
        env_sha,
        initial_model,
        model_failed,
        device_missing,
        environment,
    })
}

/// The environment capture of the bind phase: probes, the receipt's [`Environment`] and
/// `environment.json`; with it, the reason no case may run when the variant requires a device
/// the probe did not detect.
fn capture_environment(
    req: &RunRequest,
    p: &Prepared,
    env_sha: &str,
    model_failed: bool,
    run_dir: &Path,
    found: &mut Findings,
) -> Result<(Environment, Option<String>), RunError> {
    let backend = p.variant.backend.as_str();
    let plat = platform::probe();
    let capture = if model_failed {
        None
    } else {
        Some(backend::capture(backend, &plat, &cases_cuda_visibility(p)))
    };
    let (device, mut runtime, compiler, probes) = match &capture {
        Some(c) => (
            c.device.clone(),
            c.runtime.clone(),
            c.compiler.clone(),
            c.probes.clone(),
        ),
        None => (
            backend::Device::unavailable(),
            BTreeMap::from([(backend.to_string(), "unavailable".to_string())]),
            BTreeMap::from([("rustc".to_string(), "unavailable".to_string())]),
            Vec::new(),
        ),
    };
    runtime.insert("execution_environment_sha256".into(), env_sha.to_string());
    let mut device_missing = None;
    if let Some(c) = &capture {
        found.unsupported.extend(c.unsupported.iter().cloned());
        device_missing = probe_failures(c, p, &mut found.infra);
    }
    for u in &plat.unavailable {
        found.unsupported.push(format!("host_{u}"));
    }
    let os = OsIdentity {
        name: plat.os.name.clone(),
        version: plat.os.version.clone(),
        kernel: plat.os.kernel.clone(),
        architecture: plat.os.architecture.clone(),
    };
    let platform_object =
        platform::wsl2_platform(&plat, Some(&p.network_mechanism)).map(|(v, u)| {
            found.unsupported.extend(u);
            v
        });
    let environment = Environment {
        host_id: req.host_id.clone(),
        os,
        device: device.to_value(),
        runtime,
        compiler,
        platform: platform_object,
    };
    let captured: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| CAPTURED_PREFIXES.iter().any(|p| k.starts_with(p)))
        .collect();
    let probe_results = Value::Array(probes.iter().map(|p| p.to_value()).collect());
    let doc = EnvironmentEvidence {
        environment: EnvironmentDoc {
            host_id: &environment.host_id,
            os: OsDoc::of(&environment.os),
            device: &environment.device,
            runtime: &environment.runtime,
            compiler: &environment.compiler,
            platform: environment.platform.as_ref().map(Raw),
        },
        probe_results: &probe_results,
        raw: RawEnvironment {
            backend,
            captured_environment: redacted(&captured),
            host: HostDoc::of(&plat),
            runner_containment: RunnerContainment {
                network_isolation: &p.network_mechanism,
            },
            detail: model_failed.then_some(
                "environment capture was not started after initial model fingerprint failure",
            ),
        },
    };
    found.artifacts.push(write_document(
        &p.root,
        &run_dir.join("environment.json"),
        "environment_probes",
        &doc,
    )?);
    Ok((environment, device_missing))
}

/// Infrastructure failures of the backend capture: a required probe that did not pass, a
/// required device that was not detected (returned too: no case runs without it).
fn probe_failures(
    c: &backend::BackendCapture,
    p: &Prepared,
    infra: &mut Vec<String>,
) -> Option<String> {
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
    if p.variant.device_requirement == DeviceRequirement::Required && !c.device.detected() {
        let missing = format!(
            "required {} device was not detected (no device identified by name and architecture or uuid: see the device probe); run on a host with one, or pick a variant whose device_requirement is not \"required\"",
            c.backend
        );
        infra.push(missing.clone());
        return Some(missing);
    }
    None
}

/// How the variant's cases choose their NVIDIA GPU: `CUDA_VISIBLE_DEVICES` and
/// `CUDA_DEVICE_ORDER` from each case's own `environment` (the closed case environment
/// inherits neither), workload variables substituted; they must agree
/// ([`qual_probe::cuda::shared_visibility`]).
fn cases_cuda_visibility(p: &Prepared) -> Result<CudaVisibility, String> {
    let mut each = Vec::new();
    for case in &p.variant.cases {
        let var = |name: &str| -> Result<Option<String>, String> {
            case.environment
                .get(name)
                .map(|v| {
                    qual_contract::variables::substitute(v, &p.variables, &RunnerValues::default())
                        .map_err(|n| {
                            format!(
                                "case {}: {name} uses ${{{n}}}, which has no value before the cases run",
                                qual_json::show::quote(&case.id)
                            )
                        })
                })
                .transpose()
        };
        let v = CudaVisibility {
            visible_devices: var("CUDA_VISIBLE_DEVICES")?,
            device_order: var("CUDA_DEVICE_ORDER")?,
        };
        each.push((case.id.clone(), v));
    }
    qual_probe::cuda::shared_visibility(&each)
}

/// The capture budgets of each execution (zero when no case runs).
fn budgets(p: &Prepared, model_failed: bool) -> Budgets {
    let reps = p.loaded.workload.determinism.repetitions.max(1);
    let execution_count = reps * p.variant.cases.len() as u64;
    let (per_stream, per_result) = if model_failed {
        (0, 0)
    } else {
        (
            CASE_OUTPUT_LIMIT_BYTES.min(MAX_RUN_CAPTURE_BYTES / (2 * execution_count.max(1))),
            CASE_RESULT_LIMIT_BYTES.min(MAX_RUN_STRUCTURED_BYTES / (2 * execution_count.max(1))),
        )
    };
    Budgets {
        execution_count,
        per_stream,
        per_result,
    }
}

/// Execute: every case × repetition, serially, through [`run_execution`], each aggregated into
/// its result; after a failed initial fingerprint, every case as unexecuted. Seals the trusted
/// programs first. Stops at an interruption; never writes outside the run directory (and the
/// receipt's directory, created so that it can be bound read-only).
fn execute_cases(
    req: &RunRequest,
    p: &Prepared,
    place: &Placement,
    bound: &Bindings,
    budgets: &Budgets,
    found: &mut Findings,
    progress: &dyn RunProgress,
) -> Result<Executed, RunError> {
    let w = &p.loaded.workload;
    let variant = &p.variant;
    let root = &p.root;
    let runner_values = RunnerValues {
        seed: w.determinism.seed.map(|s| s.to_string()),
        model_path: bound.initial_model.as_ref().map(|m| m.path.clone()),
        host_id: Some(req.host_id.clone()),
    };
    let effective_config =
        Value::from_serde(&serde_json::Value::Object(variant.effective_config.clone()));
    let read_only = read_only_paths(p, &place.receipt_path)?;
    let ctx = ExecContext {
        read_only: &read_only,
        root,
        run_dir: &place.run_dir,
        variant_id: &variant.id,
        effective_config: &effective_config,
        base_env: &bound.base_env,
        variables: &p.variables,
        runner_values: &runner_values,
        network_mechanism: &p.network_mechanism,
        term_grace: p.term_grace,
        per_stream_limit: budgets.per_stream,
        per_case_result_limit: budgets.per_result,
    };
    let mut executed = Executed {
        results: Vec::new(),
        run_config_cases: Vec::new(),
        config_verified: !bound.no_case_runs(),
        effective_config: effective_config.clone(),
    };
    // Every program the runner starts from here on (git for the drift checks) was resolved
    // before the first case could plant one on PATH.
    qual_trusted::seal();
    if bound.model_failed {
        executed.results = crate::aggregate::unexecuted_results(
            variant.cases.iter().map(|c| (c.id.as_str(), c.required)),
            join_details(&found.infra),
        );
        found
            .notes
            .push("Model identity is absent because the initial model fingerprint failed.".into());
        return Ok(executed);
    }
    if let Some(missing) = &bound.device_missing {
        // Nothing the cases could show is about the declared device: none runs. Each is
        // skipped with the reason, and the variant's skip policy says what that means (`fail`,
        // the only one a required device allows, fails the first required result).
        executed.results = crate::aggregate::skipped_results(
            variant.cases.iter().map(|c| (c.id.as_str(), c.required)),
            format!("not executed: {missing}"),
        );
        found.notes.push(format!(
            "No case was executed because the required {} device was not detected.",
            variant.backend.as_str()
        ));
        return Ok(executed);
    }
    let reps = w.determinism.repetitions.max(1);
    let total = variant.cases.len() as u64 * reps;
    let mut done = 0u64;
    for (i, case) in variant.cases.iter().enumerate() {
        let mut outcomes: Vec<ExecutionOutcome> = Vec::new();
        for r in 1..=reps {
            interrupted()?;
            progress.update(CaseProgress {
                done,
                total,
                case_id: &case.id,
                repetition: r,
            });
            done += 1;
            let rec = match run_execution(&ctx, i + 1, case, r) {
                Ok(rec) => rec,
                Err(ExecStop::Interrupted(signal)) => return Err(RunError::Interrupted { signal }),
                Err(ExecStop::Io(e)) => return Err(aborted(e)),
            };
            executed.config_verified &= rec.config_verified;
            found.artifacts.extend(rec.artifacts);
            executed.run_config_cases.push(rec.run_config);
            outcomes.push(rec.outcome);
        }
        executed.results.push(aggregate_case(
            &case.id,
            case.required,
            case.result_protocol.producer == Producer::Runner,
            &outcomes,
        ));
    }
    progress.finished();
    Ok(executed)
}

/// The paths read-only in every case's box: what judges a case, and a model outside the
/// worktree.
fn read_only_paths(p: &Prepared, receipt_path: &Path) -> Result<Vec<PathBuf>, RunError> {
    let root = &p.root;
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
    Ok(read_only)
}

/// Settle: the drift checks after the last case (final model fingerprint and its evidence,
/// HEAD, clean worktree, source-tree digest). Appends infrastructure failures and returns
/// whether the worktree was clean at the end; never changes a case result itself.
fn settle(
    req: &RunRequest,
    p: &Prepared,
    bound: &Bindings,
    run_dir: &Path,
    found: &mut Findings,
) -> Result<bool, RunError> {
    let mut final_model_value = None;
    if let (Some(initial), Some(mp)) = (&bound.initial_model, &p.model_path) {
        match qual_probe::model::fingerprint(mp, req.model_id.as_deref()) {
            Ok(f) => {
                if qual_json::to_canonical_string(&f.to_value())
                    != qual_json::to_canonical_string(&initial.to_value())
                {
                    found
                        .infra
                        .push("model fingerprint changed during qualification".into());
                }
                final_model_value = Some(f.to_value());
            }
            Err(e) => found
                .infra
                .push(format!("final model fingerprint failed: {e}")),
        }
    }
    if let Some(v) = &final_model_value {
        found.artifacts.push(write_evidence(
            &p.root,
            &run_dir.join("model-fingerprint-final.json"),
            "model_fingerprint_final",
            v,
        )?);
    }
    Ok(verify_source(p, &mut found.infra))
}

/// Final source verification: HEAD, clean worktree and source-tree digest unchanged. Returns
/// whether the worktree was still clean (`false` only when git said it was dirty).
fn verify_source(p: &Prepared, infra: &mut Vec<String>) -> bool {
    let mut clean_at_end = true;
    let repo = Repo::new(&p.root);
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
    match source_tree::compute(&p.root, p.policy.source_tree_profile) {
        Ok(t) if t.digest != p.source.digest => infra.push(format!(
            "source tree changed during qualification: {} -> {}",
            p.source.digest, t.digest
        )),
        Ok(_) => {}
        Err(e) => infra.push(format!("final source verification failed: {e}")),
    }
    clean_at_end
}

/// The committed policy's metric definitions against the results: a named result or a
/// required metric that is missing, or a definition that differs, is an infrastructure
/// failure.
fn check_policy_metrics(p: &Prepared, results: &[CaseResultEntry], infra: &mut Vec<String>) {
    let Some(policy) = &p.loaded.workload.comparison_policy else {
        return;
    };
    let q = |s: &str| qual_json::show::quote(s);
    for rule in &policy.metric_rules {
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

/// Aggregate: the skip policy and the infrastructure failures applied to the results, then
/// the verdict.
fn aggregate(p: &Prepared, results: &mut [CaseResultEntry], infra: &[String]) -> Verdict {
    apply_skip_policy(results, p.variant.skip_policy == SkipPolicy::Fail);
    apply_infrastructure_failures(results, infra);
    verdict(results)
}

/// Writes `run-config.json` (the last evidence file before the receipt).
fn write_run_config(
    p: &Prepared,
    place: &Placement,
    bound: &Bindings,
    budgets: &Budgets,
    executed: &Executed,
    found: &mut Findings,
) -> Result<(), RunError> {
    let w = &p.loaded.workload;
    let doc = RunConfig {
        schema_version: 1,
        receipt_id: &place.receipt_id,
        workload_id: &w.workload_id,
        workload_sha256: &p.loaded.sha256,
        workload_path: &p.workload_rel,
        variant_id: &p.variant.id,
        backend: p.variant.backend.as_str(),
        variables: p
            .variables
            .values
            .iter()
            .map(|(k, v)| (k.as_str(), Raw(v)))
            .collect(),
        determinism: p.loaded.value.get("determinism").unwrap_or(&Value::Null),
        network_isolation: &p.network_mechanism,
        model_fingerprint_supervision: (),
        source_tree_profile: p.policy.source_tree_profile.as_str(),
        source_tree_file_count: p.source.files.len() as u64,
        case_execution_count: if bound.no_case_runs() {
            0
        } else {
            budgets.execution_count
        },
        per_stream_output_limit_bytes: budgets.per_stream,
        max_run_capture_bytes: MAX_RUN_CAPTURE_BYTES,
        per_case_result_limit_bytes: budgets.per_result,
        max_run_structured_bytes: MAX_RUN_STRUCTURED_BYTES,
        case_environment_policy: POLICY,
        case_base_environment_sha256: &bound.env_sha,
        case_base_environment: redacted(&bound.base_env),
        infrastructure_failures: &found.infra,
        pre_case_failure: if bound.model_failed {
            Some(crate::aggregate::PRE_CASE_MODEL)
        } else if bound.device_missing.is_some() {
            Some(crate::aggregate::PRE_CASE_DEVICE)
        } else {
            None
        },
        cases: executed.run_config_cases.iter().map(Raw).collect(),
    };
    let a = write_document(
        &p.root,
        &place.run_dir.join("run-config.json"),
        "effective_run_config",
        &doc,
    )?;
    found.artifacts.push(a);
    Ok(())
}

/// Everything the receipt is assembled from.
struct Assembly<'a> {
    req: &'a RunRequest,
    p: &'a Prepared,
    place: &'a Placement,
    bound: Bindings,
    executed: Executed,
    verdict: Verdict,
    clean_at_end: bool,
    found: Findings,
}

/// The receipt of the run, finished now. Pure: reads and writes nothing.
fn assemble_receipt(a: Assembly<'_>) -> Receipt {
    let Assembly {
        req,
        p,
        place,
        bound,
        executed,
        verdict,
        clean_at_end,
        mut found,
    } = a;
    let w = &p.loaded.workload;
    let duration = place.t0.elapsed();
    let finished = place.started_wall + duration;
    if p.policy.source_tree_profile == qual_probe::SourceTreeProfile::Generic {
        found.notes.push(
            "source.tree_hash uses the generic source-tree profile: every tracked file except qualification/receipts/"
                .into(),
        );
    }
    let parameters: Object =
        std::iter::once(("variant_id".to_string(), Value::from(p.variant.id.as_str())))
            .chain(
                p.variables
                    .values
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            )
            .collect();
    Receipt {
        receipt_id: place.receipt_id.clone(),
        created_at_utc: format_utc_millis(finished),
        source: Source {
            tree_hash_format: source_tree::FORMAT.into(),
            tree_hash: p.source.digest.clone(),
            git_commit: p.commit.clone(),
            git_worktree_clean: clean_at_end,
        },
        qualification: Qualification {
            kind: w.kind.as_str().into(),
            backend: p.variant.backend.as_str().into(),
            profile: w.workload_id.chars().take(128).collect(),
            verdict,
            started_at_utc: format_utc_millis(place.started_wall),
            finished_at_utc: format_utc_millis(finished),
            duration_seconds: duration.as_secs_f64(),
            command: req.command.clone(),
        },
        environment: bound.environment,
        model: bound.initial_model.as_ref().map(|m| m.to_value()),
        workload: Some(WorkloadBinding {
            id: w.workload_id.clone(),
            sha256: p.loaded.sha256.clone(),
            seed: w.determinism.seed.map(Value::from).unwrap_or(Value::Null),
            parameters,
        }),
        effective_config: if executed.config_verified {
            executed.effective_config
        } else {
            Value::Object(Object::new())
        },
        results: executed.results,
        metrics: Vec::new(),
        artifacts: found.artifacts,
        unsupported: found.unsupported,
        notes: found.notes,
    }
}

/// Self-validation: local artifacts always, current source for a would-be passed receipt. A
/// passed receipt that fails is downgraded to failed (and must then validate); a failed one
/// that fails aborts the run. Returns the receipt to publish.
fn self_validate(mut receipt: Receipt, root: &Path) -> Result<Receipt, RunError> {
    let digest_fn = |r: &Path| -> Result<String, String> {
        let policy = qual_probe::load_policy(r).map_err(|e| e.to_string())?;
        source_tree::compute(r, policy.source_tree_profile)
            .map(|t| t.digest)
            .map_err(|e| e.to_string())
    };
    let passed = receipt.qualification.verdict == Verdict::Passed;
    let strict = qual_receipt::validate::StrictChecks {
        root: Some(root),
        current_source: passed.then_some(&digest_fn as _),
        local_artifacts: true,
        known_commit: false,
        publication: None,
    };
    let violations = qual_receipt::validate::validate_strict(&receipt.to_value(), &strict);
    if violations.is_empty() {
        return Ok(receipt);
    }
    let text: Vec<String> = violations
        .iter()
        .map(|v| qual_receipt::validate::Dotted(v).to_string())
        .collect();
    if !passed {
        return Err(aborted(format!(
            "generated failed receipt is invalid: {}",
            text.join(" | ")
        )));
    }
    downgrade(&mut receipt, &text);
    let strict = qual_receipt::validate::StrictChecks {
        root: Some(root),
        current_source: None,
        local_artifacts: true,
        known_commit: false,
        publication: None,
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
    Ok(receipt)
}

/// Downgrades a would-be passed receipt whose validation failed: the first required result
/// fails with the violations, the verdict becomes failed, and a note says why.
fn downgrade(receipt: &mut Receipt, violations: &[String]) {
    if let Some(r) = receipt.results.iter_mut().find(|r| r.required) {
        r.status = ResultStatus::Failed;
        let mut parts: Vec<String> = r.details.iter().cloned().collect();
        parts.push(format!(
            "runner validation failed: {}",
            violations.join(" | ")
        ));
        r.details = join_details(&parts);
        for m in r.metrics.iter_mut().filter(|m| m.name == "case_pass") {
            *m = crate::aggregate::runner_metric("case_pass", 0).expect("runner metric");
        }
    }
    receipt.qualification.verdict = Verdict::Failed;
    receipt
        .notes
        .push("Receipt was downgraded because current-source validation failed.".into());
}

/// Publish: makes every artifact durable (one syncfs for the run directory's file system),
/// then writes the receipt last, exclusively. Never replaces anything at the receipt path.
fn publish(
    root: &Path,
    run_dir: &Path,
    receipt_path: &Path,
    receipt: &Receipt,
) -> Result<(), RunError> {
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
    Ok(())
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
