//! One case execution: argv and environment assembly, bounded execution through `qual-exec`,
//! raw evidence files, output assertions and the case-result protocol.
//!
//! Files here are created with `O_EXCL` and not synced one by one; the orchestrator syncs the
//! whole file system of the run directory once before it writes the receipt, so a receipt is
//! only ever written after every artifact it names is durable.
//!
//! Layout per execution: `<run_dir>/cases/<iii>-<case_id>-r<rrr>/` with `stdout.log`,
//! `stderr.log` (the kept head and tail of each stream, with a marker line where bytes were
//! dropped), `command-result.json` (the runner's copy of what the command wrote, when it
//! did) and `case-result.json` (the normalized record), all written exclusively by the
//! runner, and `scratch/`, the only directory the case can write. The command writes its
//! result to `scratch/command-result.json`; the case directory itself is read-only inside the
//! box (it lies below `.qualification/`), so a case can neither pre-create nor replace a file
//! the runner writes, and whatever it leaves in `scratch/` is its own, never evidence. The
//! runner reads the command's result once (bounded, no symlink followed), judges those bytes
//! and keeps exactly them as `command-result.json`.
//!
//! Phases of one execution ([`run_execution`]): lay out the case directory, bind the
//! invocation (argv, environment, working directory), execute it bounded, write the logs,
//! collect the contract failures, judge the command's result, settle the normalized outcome,
//! and write `case-result.json` and the run-config entry.
//!
//! Contract failures, in order: execution errors (spawn failure, an aborted execution,
//! lingering descendants, pipes held open), timeout, exit code outside
//! `expected_exit_codes`, output assertions, then case-result errors. A usable command result
//! keeps its status unless a contract failure downgrades it to `failed`; its reported duration
//! is replaced by the runner's monotonic measurement.
//!
//! Truncated output is not a failure by itself (the capture keeps a head and a tail while the
//! pipe keeps draining), but an output assertion on a stream whose middle was dropped cannot be
//! decided and fails the execution.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use qual_contract::variables::{substitute, ResolvedVariables, RunnerValues};
use qual_contract::{Case, Producer};
use qual_exec::{
    CaptureLimits, Captured, ExecError, ExecSpec, Execution, NetworkPolicy, Termination,
};
use qual_json::{Object, Value};
use qual_receipt::model::{Artifact, ArtifactLocation, Metric, ResultStatus};
use qual_receipt::write::to_pretty_json;
use serde::Serialize;

use crate::aggregate::{runner_metric, ExecutionOutcome};
use crate::case_result::{self, CommandResult, LoadFailure};
use crate::details::join_details;
use crate::document::to_value;
use crate::environment::{process_environment_sha256, CASE_RESULT_VAR, NETWORK_VAR, VARIANT_VAR};
use crate::evidence::{CaseResultDoc, ContainmentDoc, RunConfigCase};

/// Run-wide settings shared by every execution.
pub struct ExecContext<'a> {
    /// Paths read-only inside every case's box (git directory, `.qualification/`, the
    /// receipt's directory); the case's own directory stays writable.
    pub read_only: &'a [std::path::PathBuf],
    /// Repository root.
    pub root: &'a Path,
    /// Run directory (absolute).
    pub run_dir: &'a Path,
    /// Variant id.
    pub variant_id: &'a str,
    /// The variant's effective config.
    pub effective_config: &'a Value,
    /// Base environment.
    pub base_env: &'a std::collections::BTreeMap<String, String>,
    /// Resolved variables.
    pub variables: &'a ResolvedVariables,
    /// Runner placeholder values.
    pub runner_values: &'a RunnerValues,
    /// Network isolation mechanism id.
    pub network_mechanism: &'a str,
    /// Termination grace.
    pub term_grace: std::time::Duration,
    /// Bytes kept per output stream (head + tail).
    pub per_stream_limit: u64,
    /// Largest command result accepted.
    pub per_case_result_limit: u64,
}

/// What one execution produced.
pub struct ExecutionRecord {
    /// Normalized outcome.
    pub outcome: ExecutionOutcome,
    /// Whether the command's effective config was verified (or not applicable).
    pub config_verified: bool,
    /// Artifacts in order.
    pub artifacts: Vec<Artifact>,
    /// The run-config entry.
    pub run_config: Value,
    /// Containment evidence for the run config.
    pub containment: Value,
}

/// Why an execution could not complete normally.
pub enum ExecStop {
    /// SIGINT/SIGTERM.
    Interrupted(i32),
    /// An evidence file could not be written.
    Io(String),
}

fn rel(root: &Path, p: &Path) -> String {
    qual_json::file::display_relative(root, p)
}

fn create_new(path: &Path, bytes: &[u8]) -> Result<(), ExecStop> {
    use std::io::Write;
    let mut f = qual_json::publish::create_new(path)
        .map_err(|e| ExecStop::Io(format!("cannot create {}: {e}", path.display())))?;
    f.write_all(bytes)
        .map_err(|e| ExecStop::Io(format!("cannot write {}: {e}", path.display())))
}

fn artifact(root: &Path, kind: &str, path: &Path, bytes: &[u8]) -> Artifact {
    Artifact {
        kind: kind.into(),
        location: ArtifactLocation::LocalIgnored,
        path: rel(root, path),
        sha256: qual_json::sha256_prefixed(bytes),
        bytes: bytes.len() as u64,
    }
}

fn document(doc: &impl Serialize) -> Result<Value, ExecStop> {
    to_value(doc).map_err(|e| ExecStop::Io(e.to_string()))
}

fn log_bytes(c: &Captured) -> Vec<u8> {
    let mut out = c.head.clone();
    if c.truncated {
        let dropped = c
            .total_bytes
            .saturating_sub(c.head.len() as u64 + c.tail.len() as u64);
        if !out.is_empty() && !out.ends_with(b"\n") {
            out.push(b'\n');
        }
        out.extend_from_slice(format!("[kiln-qual: {dropped} bytes omitted]\n").as_bytes());
    }
    out.extend_from_slice(&c.tail);
    out
}

fn exit_codes_text(codes: &[u8]) -> String {
    let inner: Vec<String> = codes.iter().map(u8::to_string).collect();
    format!("[{}]", inner.join(", "))
}

/// The directory layout of one execution (see the module docs).
struct CaseLayout {
    case_dir: PathBuf,
    scratch: PathBuf,
    /// What the command writes, in the one directory it can write.
    result_path: PathBuf,
    /// The runner's copy of it, beside the runner's other evidence.
    kept_result_path: PathBuf,
}

impl CaseLayout {
    /// Creates `<run_dir>/cases/<iii>-<case_id>-r<rrr>/` and its `scratch/`; never reuses an
    /// existing directory.
    fn create(run_dir: &Path, index: usize, case: &Case, rep: u64) -> Result<Self, ExecStop> {
        let case_dir = run_dir
            .join("cases")
            .join(format!("{index:03}-{}-r{rep:03}", case.id));
        std::fs::create_dir_all(case_dir.parent().expect("cases dir"))
            .map_err(|e| ExecStop::Io(format!("cannot create cases directory: {e}")))?;
        let scratch = case_dir.join("scratch");
        for d in [&case_dir, &scratch] {
            std::fs::create_dir(d)
                .map_err(|e| ExecStop::Io(format!("cannot create {}: {e}", d.display())))?;
        }
        Ok(CaseLayout {
            result_path: scratch.join("command-result.json"),
            kept_result_path: case_dir.join("command-result.json"),
            case_dir,
            scratch,
        })
    }
}

/// The bound invocation of a case: what it runs as, and the failures that keep it from
/// running at all (an unresolved placeholder, an unusable working directory).
struct Invocation {
    argv: Vec<String>,
    /// The case's own environment, placeholders resolved.
    overrides: BTreeMap<String, String>,
    /// The whole process environment (base, overrides, runner-owned variables).
    env: Vec<(String, String)>,
    cwd: Option<PathBuf>,
    failures: Vec<String>,
}

/// Binds argv, environment and working directory. Starts nothing.
fn bind_invocation(ctx: &ExecContext<'_>, case: &Case, layout: &CaseLayout) -> Invocation {
    let mut failures: Vec<String> = Vec::new();
    let mut argv = Vec::new();
    let mut overrides = BTreeMap::new();
    for a in &case.command {
        match substitute(a, ctx.variables, ctx.runner_values) {
            Ok(s) => argv.push(s),
            Err(n) => failures.push(format!("placeholder ${{{n}}} has no value")),
        }
    }
    let mut env: BTreeMap<String, String> = ctx.base_env.clone();
    for (k, v) in &case.environment {
        match substitute(v, ctx.variables, ctx.runner_values) {
            Ok(s) => {
                overrides.insert(k.clone(), s.clone());
                env.insert(k.clone(), s);
            }
            Err(n) => failures.push(format!("placeholder ${{{n}}} has no value")),
        }
    }
    env.insert(
        CASE_RESULT_VAR.into(),
        layout.result_path.to_string_lossy().into_owned(),
    );
    env.insert(VARIANT_VAR.into(), ctx.variant_id.into());
    env.insert(NETWORK_VAR.into(), ctx.network_mechanism.into());
    let cwd = working_directory(ctx, case, &mut failures);
    Invocation {
        argv,
        overrides,
        env: env.into_iter().collect(),
        cwd,
        failures,
    }
}

/// The canonical working directory of a case, when it is a directory in the worktree that
/// cases may write.
fn working_directory(
    ctx: &ExecContext<'_>,
    case: &Case,
    failures: &mut Vec<String>,
) -> Option<PathBuf> {
    let wd = ctx.root.join(&case.working_directory);
    let cwd = std::fs::canonicalize(&wd)
        .ok()
        .filter(|p| p.starts_with(ctx.root) && p.is_dir());
    match &cwd {
        None => failures.push(format!(
            "case {} working directory is not a directory",
            qual_json::show::quote(&case.id)
        )),
        Some(c) => {
            if let Some(p) = crate::case_box::protected_working_directory(c, ctx.read_only) {
                failures.push(format!(
                    "case {} working directory {} is at or below {}, which is read-only to cases",
                    qual_json::show::quote(&case.id),
                    qual_json::show::quote(&case.working_directory),
                    p.display()
                ));
            }
        }
    }
    cwd
}

/// Executes the bound invocation in its box, bounded, unless binding already failed; an
/// execution error becomes a failure, an interruption stops the run. Returns the execution
/// (if one happened) and the runner's monotonic duration.
fn execute_bound(
    ctx: &ExecContext<'_>,
    case: &Case,
    layout: &CaseLayout,
    inv: &mut Invocation,
) -> Result<(Option<Execution>, f64), ExecStop> {
    let half = (ctx.per_stream_limit / 2).max(1) as usize;
    let limit = ctx.per_case_result_limit;
    let started = std::time::Instant::now();
    let mut execution: Option<Execution> = None;
    if inv.failures.is_empty() {
        let spec = ExecSpec {
            argv: inv.argv.clone(),
            cwd: inv.cwd.clone().unwrap_or_else(|| ctx.root.to_path_buf()),
            env: inv.env.clone(),
            timeout: std::time::Duration::from_secs(case.timeout_seconds),
            term_grace: ctx.term_grace,
            capture: CaptureLimits {
                head_bytes: half,
                tail_bytes: (ctx.per_stream_limit as usize).saturating_sub(half).max(1),
            },
            network: NetworkPolicy::LoopbackOnly,
            // The worktree and the case's scratch are writable; the case directory around
            // the scratch (the runner's logs and result copies) is not.
            sandbox: crate::case_box::sandbox(ctx.root, ctx.read_only, Some(&layout.scratch)),
        };
        let rp = layout.result_path.clone();
        let mut watch = move || {
            case_result::size_nofollow(&rp)
                .filter(|s| *s > limit)
                .map(|_| format!("command case result exceeded {limit} byte limit"))
        };
        match qual_exec::execute_watched(&spec, &mut watch) {
            Ok(e) => {
                if let Termination::Interrupted { .. } = e.termination {
                    let sig = qual_exec::signals::interrupted().unwrap_or(libc::SIGINT);
                    return Err(ExecStop::Interrupted(sig));
                }
                execution = Some(e);
            }
            Err(ExecError::Interrupted { signal }) => return Err(ExecStop::Interrupted(signal)),
            Err(e) => inv.failures.push(e.to_string()),
        }
    }
    let duration = execution
        .as_ref()
        .map(|e| e.wall.as_secs_f64())
        .unwrap_or_else(|| started.elapsed().as_secs_f64());
    Ok((execution, duration))
}

/// Writes `stdout.log` and `stderr.log` (kept head and tail, with the omission marker).
fn write_logs(
    ctx: &ExecContext<'_>,
    layout: &CaseLayout,
    out: &Captured,
    err: &Captured,
) -> Result<Vec<Artifact>, ExecStop> {
    let mut artifacts = Vec::new();
    for (name, kind, c) in [
        ("stdout.log", "case_stdout", out),
        ("stderr.log", "case_stderr", err),
    ] {
        let bytes = log_bytes(c);
        let p = layout.case_dir.join(name);
        create_new(&p, &bytes)?;
        artifacts.push(artifact(ctx.root, kind, &p, &bytes));
    }
    Ok(artifacts)
}

/// The return code as the receipt records it: the exit code, or minus the signal.
fn return_code(t: &Termination) -> i64 {
    match t {
        Termination::Exited { code } => *code as i64,
        Termination::Signaled { signal } => -(*signal as i64),
        Termination::TimedOut { signal_used }
        | Termination::Interrupted { signal_used }
        | Termination::Aborted { signal_used, .. } => -(*signal_used as i64),
    }
}

/// What the contract checks found besides the failures they appended.
struct ContractFacts {
    returncode: Option<i64>,
    assertion_failures: i64,
}

/// Appends the contract failures in their order (execution errors, timeout, exit code, output
/// assertions).
fn contract_failures(
    case: &Case,
    execution: Option<&Execution>,
    out: &Captured,
    err: &Captured,
    failures: &mut Vec<String>,
) -> ContractFacts {
    let mut returncode: Option<i64> = None;
    if let Some(e) = execution {
        if let Termination::Aborted { reason, .. } = &e.termination {
            failures.push(reason.clone());
        }
        if !e.containment.residue.is_empty() {
            failures.push("command left descendant processes running".into());
        }
        if !e.containment.pipes_closed {
            failures.push("command output pipes remained open after process cleanup".into());
        }
        if let Termination::TimedOut { .. } = e.termination {
            failures.push(format!("timed out after {} seconds", case.timeout_seconds));
        }
        returncode = Some(return_code(&e.termination));
    }
    let expected_ok =
        returncode.is_some_and(|rc| case.expected_exit_codes.iter().any(|c| *c as i64 == rc));
    if !expected_ok {
        // The original's wording for an exit code (the corpus's receipts carry it); a command
        // that never ran has none, which is said as such rather than as `null`.
        failures.push(match returncode {
            Some(rc) => format!(
                "exit code {rc} not in {}",
                exit_codes_text(&case.expected_exit_codes)
            ),
            None => format!(
                "the command did not run, so it has no exit code (expected {})",
                exit_codes_text(&case.expected_exit_codes)
            ),
        });
    }
    let mut assertion_failures = 0i64;
    if execution.is_some() {
        let (so, se) = (out.kept_bytes(), err.kept_bytes());
        let failed = qual_contract::assertions::failures(
            &case.output_assertions,
            qual_contract::assertions::Captured {
                bytes: &so,
                truncated: out.truncated,
            },
            qual_contract::assertions::Captured {
                bytes: &se,
                truncated: err.truncated,
            },
        );
        assertion_failures = failed.len() as i64;
        failures.extend(failed);
    }
    ContractFacts {
        returncode,
        assertion_failures,
    }
}

/// The command's result as judged: the parsed result when valid, and the exact bytes read.
struct JudgedResult {
    command: Option<CommandResult>,
    /// The `details` of a result that parsed but did not validate (the command's own account).
    reported: Option<String>,
    config_verified: bool,
    kept: Option<Vec<u8>>,
}

/// Reads the command's result once (bounded, no symlink followed) and judges those bytes
/// against the case; appends case-result failures.
fn judge_command_result(
    ctx: &ExecContext<'_>,
    case: &Case,
    layout: &CaseLayout,
    failures: &mut Vec<String>,
) -> JudgedResult {
    let limit = ctx.per_case_result_limit;
    let result_path = &layout.result_path;
    let declared = &case.result_protocol.declared_metrics;
    let mut judged = JudgedResult {
        command: None,
        reported: None,
        config_verified: true,
        kept: None,
    };
    match case.result_protocol.producer {
        Producer::Runner => {
            if std::fs::symlink_metadata(result_path).is_ok() {
                failures
                    .push("runner-produced case unexpectedly wrote the command-result path".into());
                judged.kept = case_result::read_bounded(result_path, limit).ok();
            }
        }
        Producer::Command => {
            let read = case_result::read_bounded(result_path, limit);
            if let Ok(bytes) = &read {
                judged.kept = Some(bytes.clone());
            }
            match read.and_then(|b| case_result::parse(&b)) {
                Ok(v) => match case_result::validate(&v, &case.id, declared, true) {
                    Ok(cr) => {
                        if qual_json::to_canonical_string(&cr.effective_config)
                            != qual_json::to_canonical_string(ctx.effective_config)
                        {
                            failures.push(
                                "case result effective_config does not exactly match the selected variant"
                                    .into(),
                            );
                            judged.config_verified = false;
                        }
                        judged.command = Some(cr);
                    }
                    Err(errs) => {
                        judged.config_verified = false;
                        judged.reported = case_result::reported_details(&v);
                        failures.push(format!("invalid command case result: {}", errs.join("; ")));
                    }
                },
                Err(f) => {
                    judged.config_verified = false;
                    if matches!(f, LoadFailure::TooLarge { .. }) {
                        let _ = std::fs::remove_file(result_path);
                    }
                    failures.push(f.message());
                }
            }
        }
    }
    judged
}

/// The settled result of one execution, before the size bound.
struct Settled {
    status: ResultStatus,
    metrics: Vec<Metric>,
    tolerances: Value,
    effective_config: Value,
    details: Option<String>,
}

/// Settles status, metrics and details: a usable command result keeps its status unless a
/// failure downgrades it; otherwise the runner decides and, for a runner-produced case,
/// computes the declared runner metrics. The command's own details come first either way
/// (`reported`: those of a result that did not validate), so the cause it states is not
/// buried under what the runner concluded from it.
fn settle(
    case: &Case,
    (command, reported): (Option<CommandResult>, Option<String>),
    failures: &[String],
    facts: &ContractFacts,
) -> Settled {
    let status_if = |ok: ResultStatus| {
        if failures.is_empty() {
            ok
        } else {
            ResultStatus::Failed
        }
    };
    match command {
        Some(cr) => {
            let mut parts: Vec<String> = cr.details.iter().cloned().collect();
            parts.extend(failures.iter().cloned());
            Settled {
                status: status_if(cr.status),
                metrics: cr.metrics,
                tolerances: cr.tolerances,
                effective_config: cr.effective_config,
                details: join_details(&parts),
            }
        }
        None => {
            let status = status_if(ResultStatus::Passed);
            let metrics = if case.result_protocol.producer == Producer::Runner {
                runner_metrics(&case.result_protocol.declared_metrics, status, facts)
            } else {
                Vec::new()
            };
            Settled {
                status,
                metrics,
                tolerances: Value::Array(vec![]),
                effective_config: Value::Object(Object::new()),
                details: join_details(
                    &[reported.into_iter().collect(), failures.to_vec()].concat(),
                ),
            }
        }
    }
}

/// The declared runner metrics of a runner-produced case, in name order.
fn runner_metrics(declared: &[String], status: ResultStatus, facts: &ContractFacts) -> Vec<Metric> {
    let mut m: Vec<Metric> = declared
        .iter()
        .filter_map(|n| match n.as_str() {
            "case_pass" => runner_metric(n, i64::from(status == ResultStatus::Passed)),
            "exit_code" => runner_metric(n, facts.returncode.unwrap_or(-1)),
            "output_assertion_failures" => runner_metric(n, facts.assertion_failures),
            _ => None,
        })
        .collect();
    m.sort_by(|a, b| a.name.cmp(&b.name));
    m
}

/// The pretty text of a normalized record.
fn case_result_text(
    case_id: &str,
    outcome: &ExecutionOutcome,
    tolerances: &Value,
    effective_config: &Value,
) -> Result<String, ExecStop> {
    let metrics = Value::Array(outcome.metrics.iter().map(Metric::to_value).collect());
    let doc = CaseResultDoc {
        schema_version: 1,
        case_id,
        status: outcome.status.as_str(),
        duration_seconds: outcome.duration_seconds,
        effective_config,
        metrics: &metrics,
        tolerances,
        details: outcome.details.as_deref(),
    };
    Ok(to_pretty_json(&document(&doc)?))
}

/// The outcome and its record text within the structured-evidence bound: a record over the
/// bound is replaced by a minimal failed one (and the config counts as unverified).
fn bounded_record(
    case: &Case,
    settled: Settled,
    duration: f64,
    limit: u64,
    config_verified: &mut bool,
) -> Result<(ExecutionOutcome, String), ExecStop> {
    let outcome = ExecutionOutcome {
        status: settled.status,
        duration_seconds: duration,
        metrics: settled.metrics,
        details: settled.details,
    };
    let text = case_result_text(
        &case.id,
        &outcome,
        &settled.tolerances,
        &settled.effective_config,
    )?;
    if text.len() as u64 <= limit {
        return Ok((outcome, text));
    }
    *config_verified = false;
    let mut parts: Vec<String> = outcome.details.iter().cloned().collect();
    parts.push(format!(
        "normalized case result exceeded {limit} byte limit"
    ));
    let outcome = ExecutionOutcome {
        status: ResultStatus::Failed,
        duration_seconds: duration,
        metrics: Vec::new(),
        details: join_details(&parts),
    };
    let text = case_result_text(
        &case.id,
        &outcome,
        &Value::Array(vec![]),
        &Value::Object(Object::new()),
    )?;
    if text.len() as u64 > limit {
        return Err(ExecStop::Io(
            "structured evidence budget cannot hold a minimal failed case result".into(),
        ));
    }
    Ok((outcome, text))
}

/// The run-config entry of one execution.
fn run_config_entry(
    ctx: &ExecContext<'_>,
    case: &Case,
    rep: u64,
    layout: &CaseLayout,
    inv: &Invocation,
    containment: &Value,
) -> Result<Value, ExecStop> {
    let working_directory = if case.working_directory.is_empty() {
        "."
    } else {
        case.working_directory.as_str()
    };
    let doc = RunConfigCase {
        case_id: &case.id,
        repetition: rep,
        argv: &inv.argv,
        executed_argv: &inv.argv,
        working_directory,
        environment_overrides: &inv.overrides,
        runner_environment: BTreeMap::from([
            (NETWORK_VAR, ctx.network_mechanism),
            (VARIANT_VAR, ctx.variant_id),
        ]),
        case_result_path: rel(ctx.root, &layout.result_path),
        process_environment_sha256: process_environment_sha256(&inv.env),
        timeout_seconds: case.timeout_seconds,
        expected_exit_codes: &case.expected_exit_codes,
        output_assertions: &case.output_assertions,
        result_protocol: &case.result_protocol,
        containment,
    };
    document(&doc)
}

/// Runs execution `rep` (1-based) of case `index` (1-based): layout, bind, execute, logs,
/// contract failures, command result, settle, bounded record, run-config entry. Every file
/// it writes is new; it never writes outside the case directory.
pub fn run_execution(
    ctx: &ExecContext<'_>,
    index: usize,
    case: &Case,
    rep: u64,
) -> Result<ExecutionRecord, ExecStop> {
    let layout = CaseLayout::create(ctx.run_dir, index, case, rep)?;
    let mut inv = bind_invocation(ctx, case, &layout);
    let (execution, duration) = execute_bound(ctx, case, &layout, &mut inv)?;

    let empty = Captured::default();
    let (out, err) = execution
        .as_ref()
        .map(|e| (&e.stdout, &e.stderr))
        .unwrap_or((&empty, &empty));
    let mut artifacts = write_logs(ctx, &layout, out, err)?;

    let mut failures = std::mem::take(&mut inv.failures);
    let facts = contract_failures(case, execution.as_ref(), out, err, &mut failures);
    // The result is read once; the bytes judged are the bytes kept.
    let judged = judge_command_result(ctx, case, &layout, &mut failures);
    let mut config_verified = judged.config_verified;
    let settled = settle(case, (judged.command, judged.reported), &failures, &facts);
    let (outcome, text) = bounded_record(
        case,
        settled,
        duration,
        ctx.per_case_result_limit,
        &mut config_verified,
    )?;

    let case_result_path = layout.case_dir.join("case-result.json");
    create_new(&case_result_path, text.as_bytes())?;
    artifacts.push(artifact(
        ctx.root,
        "case_result",
        &case_result_path,
        text.as_bytes(),
    ));
    if let Some(bytes) = &judged.kept {
        create_new(&layout.kept_result_path, bytes)?;
        artifacts.push(artifact(
            ctx.root,
            "command_case_result",
            &layout.kept_result_path,
            bytes,
        ));
    }

    let containment = match &execution {
        Some(e) => document(&ContainmentDoc::of(e))?,
        None => Value::Null,
    };
    let run_config = run_config_entry(ctx, case, rep, &layout, &inv, &containment)?;
    Ok(ExecutionRecord {
        outcome,
        config_verified,
        artifacts,
        run_config,
        containment,
    })
}
