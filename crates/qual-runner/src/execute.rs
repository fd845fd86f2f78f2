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
//! Contract failures, in order: execution errors (spawn failure, an aborted execution,
//! lingering descendants, pipes held open), timeout, exit code outside
//! `expected_exit_codes`, output assertions, then case-result errors. A usable command result
//! keeps its status unless a contract failure downgrades it to `failed`; its reported duration
//! is replaced by the runner's monotonic measurement.
//!
//! Truncated output is not a failure by itself (the capture keeps a head and a tail while the
//! pipe keeps draining), but an output assertion on a stream whose middle was dropped cannot be
//! decided and fails the execution.

use std::path::Path;

use qual_contract::variables::{substitute, ResolvedVariables, RunnerValues};
use qual_contract::{Case, Producer};
use qual_exec::{
    CaptureLimits, Captured, ExecError, ExecSpec, Execution, NetworkPolicy, Termination,
};
use qual_json::{Object, Value};
use qual_receipt::model::{Artifact, ArtifactLocation, Metric, ResultStatus};
use qual_receipt::write::to_pretty_json;

use crate::aggregate::{runner_metric, ExecutionOutcome};
use crate::case_result::{self, LoadFailure};
use crate::details::join_details;
use crate::environment::{process_environment_sha256, CASE_RESULT_VAR, NETWORK_VAR, VARIANT_VAR};

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
    p.strip_prefix(root)
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_else(|_| p.to_string_lossy().into_owned())
}

fn create_new(path: &Path, bytes: &[u8]) -> Result<(), ExecStop> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
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

fn termination_value(t: &Termination) -> Value {
    let mut o = Object::new();
    let (status, k, v) = match t {
        Termination::Exited { code } => ("exited", "code", *code),
        Termination::Signaled { signal } => ("signaled", "signal", *signal),
        Termination::TimedOut { signal_used } => ("timed_out", "signal_used", *signal_used),
        Termination::Interrupted { signal_used } => ("interrupted", "signal_used", *signal_used),
        Termination::Aborted { signal_used, .. } => ("aborted", "signal_used", *signal_used),
    };
    o.insert("status", Value::from(status));
    o.insert(k, Value::from(v as i64));
    Value::Object(o)
}

fn containment_value(e: &Execution) -> Value {
    let c = &e.containment;
    let mut o = Object::new();
    o.insert("mechanism", Value::from(c.mechanism.as_str()));
    o.insert("network", Value::from(c.network.mechanism_id()));
    o.insert("box", sandbox_value(&c.sandbox));
    o.insert("group_killed", Value::Bool(c.group_killed));
    o.insert("pipes_closed", Value::Bool(c.pipes_closed));
    o.insert("clean", Value::Bool(c.clean));
    o.insert(
        "residue",
        Value::Array(
            c.residue
                .iter()
                .map(|r| {
                    let mut x = Object::new();
                    x.insert("pid", Value::from(r.pid as u64));
                    x.insert(
                        "box_pid",
                        r.box_pid
                            .map(|p| Value::from(p as u64))
                            .unwrap_or(Value::Null),
                    );
                    x.insert("session", Value::from(r.session as u64));
                    x.insert("cmdline", Value::from(r.cmdline.as_str()));
                    x.insert("signal", Value::from(r.signal as i64));
                    Value::Object(x)
                })
                .collect(),
        ),
    );
    o.insert("termination", termination_value(&e.termination));
    for (name, s) in [("stdout", &e.stdout), ("stderr", &e.stderr)] {
        let mut x = Object::new();
        x.insert("total_bytes", Value::from(s.total_bytes));
        x.insert("truncated", Value::Bool(s.truncated));
        o.insert(name, Value::Object(x));
    }
    Value::Object(o)
}

/// The box evidence of one execution (what contained the case).
fn sandbox_value(b: &qual_exec::SandboxRecord) -> Value {
    let strings = |v: &[String]| Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect());
    let mut o = Object::new();
    o.insert("namespaces", strings(&b.namespaces));
    o.insert(
        "pid_namespace_init",
        Value::from(b.pid_namespace_init.as_str()),
    );
    o.insert("capabilities", Value::from(b.capabilities.as_str()));
    o.insert("no_new_privs", Value::Bool(b.no_new_privs));
    let mut sc = Object::new();
    sc.insert("filter", Value::from(b.seccomp.filter.as_str()));
    sc.insert("refused", strings(&b.seccomp.refused));
    o.insert("seccomp", Value::Object(sc));
    o.insert("read_only_paths", strings(&b.read_only_paths));
    o.insert("writable_paths", strings(&b.writable_paths));
    o.insert("host_files", Value::from(b.host_files.as_str()));
    o.insert("private_mounts", strings(&b.private_mounts));
    o.insert("devices", strings(&b.devices));
    o.insert("fresh_proc", Value::Bool(b.fresh_proc));
    o.insert("descriptors", Value::from(b.descriptors.as_str()));
    o.insert(
        "pid_limit",
        b.pid_limit.map(Value::from).unwrap_or(Value::Null),
    );
    o.insert("pid_limit_source", Value::from(b.pid_limit_source.as_str()));
    o.insert("enclosing_box", Value::Bool(b.enclosing_box));
    Value::Object(o)
}

/// Runs execution `rep` (1-based) of case `index` (1-based).
pub fn run_execution(
    ctx: &ExecContext<'_>,
    index: usize,
    case: &Case,
    rep: u64,
) -> Result<ExecutionRecord, ExecStop> {
    let case_dir = ctx
        .run_dir
        .join("cases")
        .join(format!("{index:03}-{}-r{rep:03}", case.id));
    std::fs::create_dir_all(case_dir.parent().expect("cases dir"))
        .map_err(|e| ExecStop::Io(format!("cannot create cases directory: {e}")))?;
    let scratch = case_dir.join("scratch");
    for d in [&case_dir, &scratch] {
        std::fs::create_dir(d)
            .map_err(|e| ExecStop::Io(format!("cannot create {}: {e}", d.display())))?;
    }
    // What the command writes, in the one directory it can write.
    let result_path = scratch.join("command-result.json");
    // The runner's copy of it, beside the runner's other evidence.
    let kept_result_path = case_dir.join("command-result.json");

    let mut failures: Vec<String> = Vec::new();
    // argv and environment.
    let mut argv = Vec::new();
    let mut overrides = Object::new();
    for a in &case.command {
        match substitute(a, ctx.variables, ctx.runner_values) {
            Ok(s) => argv.push(s),
            Err(n) => failures.push(format!("placeholder ${{{n}}} has no value")),
        }
    }
    let mut env: std::collections::BTreeMap<String, String> = ctx.base_env.clone();
    for (k, v) in &case.environment {
        match substitute(v, ctx.variables, ctx.runner_values) {
            Ok(s) => {
                overrides.insert(k.clone(), Value::from(s.as_str()));
                env.insert(k.clone(), s);
            }
            Err(n) => failures.push(format!("placeholder ${{{n}}} has no value")),
        }
    }
    env.insert(
        CASE_RESULT_VAR.into(),
        result_path.to_string_lossy().into_owned(),
    );
    env.insert(VARIANT_VAR.into(), ctx.variant_id.into());
    env.insert(NETWORK_VAR.into(), ctx.network_mechanism.into());
    let env: Vec<(String, String)> = env.into_iter().collect();

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

    let half = (ctx.per_stream_limit / 2).max(1) as usize;
    let limit = ctx.per_case_result_limit;
    let started = std::time::Instant::now();
    let mut execution: Option<Execution> = None;
    if failures.is_empty() {
        let spec = ExecSpec {
            argv: argv.clone(),
            cwd: cwd.clone().unwrap_or_else(|| ctx.root.to_path_buf()),
            env: env.clone(),
            timeout: std::time::Duration::from_secs(case.timeout_seconds),
            term_grace: ctx.term_grace,
            capture: CaptureLimits {
                head_bytes: half,
                tail_bytes: (ctx.per_stream_limit as usize).saturating_sub(half).max(1),
            },
            network: NetworkPolicy::LoopbackOnly,
            // The worktree and the case's scratch are writable; the case directory around
            // the scratch (the runner's logs and result copies) is not.
            sandbox: crate::case_box::sandbox(ctx.root, ctx.read_only, Some(&scratch)),
        };
        let rp = result_path.clone();
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
            Err(e) => failures.push(e.to_string()),
        }
    }
    let duration = execution
        .as_ref()
        .map(|e| e.wall.as_secs_f64())
        .unwrap_or_else(|| started.elapsed().as_secs_f64());

    // Raw evidence.
    let empty = Captured::default();
    let (out, err) = execution
        .as_ref()
        .map(|e| (&e.stdout, &e.stderr))
        .unwrap_or((&empty, &empty));
    let mut artifacts = Vec::new();
    for (name, kind, c) in [
        ("stdout.log", "case_stdout", out),
        ("stderr.log", "case_stderr", err),
    ] {
        let bytes = log_bytes(c);
        let p = case_dir.join(name);
        create_new(&p, &bytes)?;
        artifacts.push(artifact(ctx.root, kind, &p, &bytes));
    }

    // Contract failures in order.
    let mut returncode: Option<i64> = None;
    if let Some(e) = &execution {
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
        returncode = Some(match &e.termination {
            Termination::Exited { code } => *code as i64,
            Termination::Signaled { signal } => -(*signal as i64),
            Termination::TimedOut { signal_used }
            | Termination::Interrupted { signal_used }
            | Termination::Aborted { signal_used, .. } => -(*signal_used as i64),
        });
    }
    let expected_ok =
        returncode.is_some_and(|rc| case.expected_exit_codes.iter().any(|c| *c as i64 == rc));
    if !expected_ok {
        let rc = returncode
            .map(|r| r.to_string())
            .unwrap_or_else(|| "null".into());
        failures.push(format!(
            "exit code {rc} not in {}",
            exit_codes_text(&case.expected_exit_codes)
        ));
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

    // Case-result protocol. The result is read once; the bytes judged are the bytes kept.
    let declared = &case.result_protocol.declared_metrics;
    let result_exists = std::fs::symlink_metadata(&result_path).is_ok();
    let mut command: Option<case_result::CommandResult> = None;
    let mut config_verified = true;
    let mut kept_result: Option<Vec<u8>> = None;
    match case.result_protocol.producer {
        Producer::Runner => {
            if result_exists {
                failures
                    .push("runner-produced case unexpectedly wrote the command-result path".into());
                kept_result = case_result::read_bounded(&result_path, limit).ok();
            }
        }
        Producer::Command => {
            let read = case_result::read_bounded(&result_path, limit);
            if let Ok(bytes) = &read {
                kept_result = Some(bytes.clone());
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
                            config_verified = false;
                        }
                        command = Some(cr);
                    }
                    Err(errs) => {
                        config_verified = false;
                        failures.push(format!("invalid command case result: {}", errs.join("; ")));
                    }
                },
                Err(f) => {
                    config_verified = false;
                    if matches!(f, LoadFailure::TooLarge { .. }) {
                        let _ = std::fs::remove_file(&result_path);
                    }
                    failures.push(f.message());
                }
            }
        }
    }

    let (status, metrics, tolerances, effective_config, details) = match command {
        Some(cr) => {
            let status = if failures.is_empty() {
                cr.status
            } else {
                ResultStatus::Failed
            };
            let mut parts: Vec<String> = cr.details.iter().cloned().collect();
            parts.extend(failures.iter().cloned());
            (
                status,
                cr.metrics,
                cr.tolerances,
                cr.effective_config,
                join_details(&parts),
            )
        }
        None => {
            let status = if failures.is_empty() {
                ResultStatus::Passed
            } else {
                ResultStatus::Failed
            };
            let metrics: Vec<Metric> = if case.result_protocol.producer == Producer::Runner {
                let mut m: Vec<Metric> = declared
                    .iter()
                    .filter_map(|n| match n.as_str() {
                        "case_pass" => runner_metric(n, i64::from(status == ResultStatus::Passed)),
                        "exit_code" => runner_metric(n, returncode.unwrap_or(-1)),
                        "output_assertion_failures" => runner_metric(n, assertion_failures),
                        _ => None,
                    })
                    .collect();
                m.sort_by(|a, b| a.name.cmp(&b.name));
                m
            } else {
                Vec::new()
            };
            (
                status,
                metrics,
                Value::Array(vec![]),
                Value::Object(Object::new()),
                join_details(&failures),
            )
        }
    };

    // Normalized record, bounded.
    let record = |status: ResultStatus,
                  metrics: &[Metric],
                  tol: &Value,
                  cfg: &Value,
                  details: &Option<String>| {
        let mut o = Object::new();
        o.insert("schema_version", Value::from(1u64));
        o.insert("case_id", Value::from(case.id.as_str()));
        o.insert("status", Value::from(status.as_str()));
        o.insert("duration_seconds", Value::from(duration));
        o.insert("effective_config", cfg.clone());
        o.insert(
            "metrics",
            Value::Array(metrics.iter().map(Metric::to_value).collect()),
        );
        o.insert("tolerances", tol.clone());
        o.insert(
            "details",
            details.as_deref().map(Value::from).unwrap_or(Value::Null),
        );
        to_pretty_json(&Value::Object(o))
    };
    let mut outcome = ExecutionOutcome {
        status,
        duration_seconds: duration,
        metrics,
        details,
    };
    let mut text = record(
        outcome.status,
        &outcome.metrics,
        &tolerances,
        &effective_config,
        &outcome.details,
    );
    if text.len() as u64 > limit {
        config_verified = false;
        let mut parts: Vec<String> = outcome.details.iter().cloned().collect();
        parts.push(format!(
            "normalized case result exceeded {limit} byte limit"
        ));
        outcome = ExecutionOutcome {
            status: ResultStatus::Failed,
            duration_seconds: duration,
            metrics: Vec::new(),
            details: join_details(&parts),
        };
        text = record(
            outcome.status,
            &[],
            &Value::Array(vec![]),
            &Value::Object(Object::new()),
            &outcome.details,
        );
        if text.len() as u64 > limit {
            return Err(ExecStop::Io(
                "structured evidence budget cannot hold a minimal failed case result".into(),
            ));
        }
    }
    let case_result_path = case_dir.join("case-result.json");
    create_new(&case_result_path, text.as_bytes())?;
    artifacts.push(artifact(
        ctx.root,
        "case_result",
        &case_result_path,
        text.as_bytes(),
    ));
    if let Some(bytes) = &kept_result {
        create_new(&kept_result_path, bytes)?;
        artifacts.push(artifact(
            ctx.root,
            "command_case_result",
            &kept_result_path,
            bytes,
        ));
    }

    // Run-config entry.
    let mut rc = Object::new();
    rc.insert("case_id", Value::from(case.id.as_str()));
    rc.insert("repetition", Value::from(rep));
    rc.insert(
        "argv",
        Value::Array(argv.iter().map(|s| Value::from(s.as_str())).collect()),
    );
    rc.insert(
        "executed_argv",
        Value::Array(argv.iter().map(|s| Value::from(s.as_str())).collect()),
    );
    rc.insert(
        "working_directory",
        Value::from(if case.working_directory.is_empty() {
            "."
        } else {
            case.working_directory.as_str()
        }),
    );
    rc.insert("environment_overrides", Value::Object(overrides));
    let mut renv = Object::new();
    renv.insert(NETWORK_VAR, Value::from(ctx.network_mechanism));
    renv.insert(VARIANT_VAR, Value::from(ctx.variant_id));
    rc.insert("runner_environment", Value::Object(renv));
    rc.insert("case_result_path", Value::from(rel(ctx.root, &result_path)));
    rc.insert(
        "process_environment_sha256",
        Value::from(process_environment_sha256(&env)),
    );
    rc.insert("timeout_seconds", Value::from(case.timeout_seconds));
    rc.insert(
        "expected_exit_codes",
        Value::Array(
            case.expected_exit_codes
                .iter()
                .map(|c| Value::from(*c as u64))
                .collect(),
        ),
    );
    use serde_like::ToJson;
    rc.insert("output_assertions", case.output_assertions.to_json());
    rc.insert("result_protocol", case.result_protocol.to_json());
    let containment = execution
        .as_ref()
        .map(containment_value)
        .unwrap_or(Value::Null);
    rc.insert("containment", containment.clone());

    Ok(ExecutionRecord {
        outcome,
        config_verified,
        artifacts,
        run_config: Value::Object(rc),
        containment,
    })
}

mod serde_like {
    //! Contract types to JSON through their serde shape (they serialize with the wire names).
    pub trait ToJson {
        fn to_json(&self) -> qual_json::Value;
    }
    impl<T: serde::Serialize> ToJson for T {
        fn to_json(&self) -> qual_json::Value {
            serde_json::to_value(self)
                .map(|v| qual_json::Value::from_serde(&v))
                .unwrap_or(qual_json::Value::Null)
        }
    }
}
