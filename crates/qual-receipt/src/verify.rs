//! `receipt verify`: a receipt recomputed from the run directory its runner retained.
//!
//! A receipt is a JSON file anyone can edit; the run directory
//! (`.qualification/runs/<receipt-id>/`) holds what the runner itself recorded. [`verify_run`]
//! recomputes from that evidence everything it allows, and reports every disagreement as a
//! [`Finding`]: a JSON pointer into the receipt (or into an evidence file,
//! `<path>#<pointer>`) and what differs, values in JSON spelling.
//!
//! What is recomputed:
//! - identity: `receipt_id` equals `run-config.json`'s and the run directory's name; a
//!   generated id (`<timestamp>-<backend>-<host>-<workload>-<identity>-v1`) names the recorded
//!   start, backend, host, workload and variant;
//! - the workload: its bytes at the receipt's `source.git_commit` and the recorded
//!   `workload_path`, read in-process through the hardened git binding; their digest, id, kind,
//!   seed, the variant's backend and effective config, the parameters (`variant_id` and the
//!   recorded variables);
//! - the results: one case directory per declared case × repetition, each `case-result.json`
//!   checked against the runner's own record of that execution in `run-config.json` (exit code,
//!   containment: residue, pipes, timeout, abort; `case_pass`) and against the workload's
//!   output assertions re-judged on the retained `stdout.log`/`stderr.log`, then
//!   aggregated, skip policy, infrastructure failures and the verdict applied with the
//!   runner's own code ([`crate::aggregate`]) and compared field by field: ids and order,
//!   `required` (from the workload), status, duration, every metric, details;
//! - the artifact list: exactly the evidence files of the run directory, in the runner's
//!   order, each with its digest and size (a file a case left in its own directory other
//!   than the four the runner names is the case's scratch, not evidence);
//! - the environment (`environment.json`) and the model (`model-fingerprint-initial.json`);
//! - time: `created_at_utc` equals `finished_at_utc`, which is `started_at_utc` plus
//!   `duration_seconds` to the millisecond, and the results' durations fit in the run.
//!
//! Nothing here trusts the receipt to locate evidence beyond its id: the run directory is
//! `<root>/.qualification/runs/<receipt_id>` unless the caller names one.

use std::fmt;
use std::path::{Path, PathBuf};

use qual_contract::{Producer, SkipPolicy, Workload};
use qual_json::{Object, Value};

use crate::aggregate::{
    aggregate_case, apply_infrastructure_failures, apply_skip_policy, runner_metric,
    unexecuted_results, verdict, ExecutionOutcome,
};
use crate::model::{generate_receipt_id, CaseResultEntry, Metric, ResultStatus, Verdict};
use crate::validate::{hash_file, parse_utc_timestamp};

/// The note the runner adds when it downgrades a would-be passed receipt.
pub const DOWNGRADE_NOTE: &str = "Receipt was downgraded because current-source validation failed.";

/// One disagreement between a receipt and its evidence.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// JSON pointer into the receipt (`/results/1/status`), or `<evidence path>#<pointer>`.
    pub pointer: String,
    /// What differs, reading after the pointer.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.pointer, self.message)
        }
    }
}

/// Escapes one JSON pointer token.
fn token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

fn json(v: &Value) -> String {
    qual_json::to_canonical_string(v)
}

fn jstr(s: &str) -> String {
    json(&Value::from(s))
}

struct Verifier<'a> {
    root: &'a Path,
    run_dir: PathBuf,
    run_dir_rel: String,
    /// `.qualification/runs/<receipt_id>`: where the runner recorded its artifacts (the
    /// directory may have been moved since; `--run-dir` names where it is now).
    recorded: String,
    out: Vec<Finding>,
}

impl Verifier<'_> {
    fn push(&mut self, pointer: impl Into<String>, message: impl Into<String>) {
        self.out.push(Finding {
            pointer: pointer.into(),
            message: message.into(),
        });
    }

    fn differs(&mut self, pointer: &str, got: &Value, expected: &Value, source: &str) {
        if json(got) != json(expected) {
            self.push(
                pointer,
                format!("is {}, {source} {}", json(got), json(expected)),
            );
        }
    }

    /// Leaf by leaf (objects by key; arrays of different length as a whole).
    fn diff(&mut self, pointer: &str, got: &Value, expected: &Value, source: &str) {
        match (got, expected) {
            (Value::Object(a), Value::Object(b)) => {
                let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let p = format!("{pointer}/{}", token(k));
                    match (a.get(k), b.get(k)) {
                        (Some(x), Some(y)) => self.diff(&p, x, y, source),
                        (Some(x), None) => {
                            self.push(p, format!("is {}, absent from {source}", json(x)))
                        }
                        (None, Some(y)) => self.push(p, format!("is absent, {source} {}", json(y))),
                        (None, None) => {}
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    self.diff(&format!("{pointer}/{i}"), x, y, source);
                }
            }
            _ => self.differs(pointer, got, expected, source),
        }
    }

    fn load(&mut self, rel: &str) -> Option<Value> {
        let path = self.run_dir.join(rel);
        let limits = qual_json::Limits {
            max_bytes: 64 * 1024 * 1024,
            ..qual_json::Limits::default()
        };
        match qual_json::load_file(&path, limits) {
            Ok((v, _)) if v.as_object().is_some() => Some(v),
            Ok(_) => {
                self.push(
                    format!("{}/{rel}", self.run_dir_rel),
                    "must be a JSON object",
                );
                None
            }
            Err(e) => {
                self.push(
                    format!("{}/{rel}", self.run_dir_rel),
                    format!("cannot be loaded: {e}"),
                );
                None
            }
        }
    }
}

fn get<'v>(v: &'v Value, pointer: &str) -> &'v Value {
    static NULL: Value = Value::Null;
    let mut cur = v;
    for t in pointer.split('/').skip(1) {
        cur = match cur {
            Value::Object(o) => o.get(t).unwrap_or(&NULL),
            Value::Array(a) => t
                .parse::<usize>()
                .ok()
                .and_then(|i| a.get(i))
                .unwrap_or(&NULL),
            _ => &NULL,
        };
    }
    cur
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_else(|_| p.to_string_lossy().into_owned())
}

/// Verifies a (basically valid) receipt against its retained run directory. `run_dir`
/// defaults to `<root>/.qualification/runs/<receipt_id>`; `root` is the repository the
/// receipt's commit and workload are read from.
pub fn verify_run(receipt: &Value, root: &Path, run_dir: Option<&Path>) -> Vec<Finding> {
    let receipt_id = get(receipt, "/receipt_id").as_str().unwrap_or_default();
    let run_dir = match run_dir {
        Some(d) if d.is_absolute() => d.to_path_buf(),
        Some(d) => std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf()),
        None => root.join(".qualification/runs").join(receipt_id),
    };
    let root = &root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let run_dir = run_dir.canonicalize().unwrap_or(run_dir);
    let mut v = Verifier {
        root,
        run_dir_rel: rel(root, &run_dir),
        recorded: format!(".qualification/runs/{receipt_id}"),
        run_dir,
        out: Vec::new(),
    };
    if !v.run_dir.is_dir() {
        let shown = v.run_dir_rel.clone();
        v.push(
            "/receipt_id",
            format!("names no retained run directory: {shown} is not a directory"),
        );
        return v.out;
    }
    let Some(config) = v.load("run-config.json") else {
        return v.out;
    };
    let Some(environment) = v.load("environment.json") else {
        return v.out;
    };
    verify_identity(&mut v, receipt, &config);
    v.diff(
        "/environment",
        get(receipt, "/environment"),
        get(&environment, "/environment"),
        "environment.json records",
    );
    v.differs(
        "/qualification/backend",
        get(receipt, "/qualification/backend"),
        get(&environment, "/raw/backend"),
        "environment.json records",
    );
    let model_file = v.run_dir.join("model-fingerprint-initial.json");
    let model = if model_file.exists() {
        v.load("model-fingerprint-initial.json")
            .unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    v.diff(
        "/model",
        get(receipt, "/model"),
        &model,
        "model-fingerprint-initial.json records",
    );
    verify_time(&mut v, receipt);
    if let Some(workload) = verify_workload(&mut v, receipt, &config) {
        verify_results(&mut v, receipt, &config, &workload);
    }
    verify_artifacts(&mut v, receipt, &config);
    v.out
}

fn verify_identity(v: &mut Verifier<'_>, receipt: &Value, config: &Value) {
    let id = get(receipt, "/receipt_id");
    v.differs(
        "/receipt_id",
        id,
        get(config, "/receipt_id"),
        "run-config.json records",
    );
    let dir_name = v
        .run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    v.differs(
        "/receipt_id",
        id,
        &Value::from(dir_name.as_str()),
        "the run directory is named",
    );
    for (pointer, key) in [
        ("/qualification/backend", "/backend"),
        ("/workload/id", "/workload_id"),
        ("/workload/sha256", "/workload_sha256"),
        ("/workload/parameters/variant_id", "/variant_id"),
    ] {
        v.differs(
            pointer,
            get(receipt, pointer),
            get(config, key),
            "run-config.json records",
        );
    }
    // A generated id carries the start time and the identity of what ran.
    let id = id.as_str().unwrap_or_default();
    let ts = id.get(..22).unwrap_or_default();
    let generated = ts.len() == 22
        && ts.as_bytes()[8] == b't'
        && ts.ends_with('z')
        && ts[..8]
            .bytes()
            .chain(ts[9..21].bytes())
            .all(|b| b.is_ascii_digit());
    if !generated {
        return;
    }
    let started = get(receipt, "/qualification/started_at_utc")
        .as_str()
        .and_then(|s| parse_utc_timestamp(s).ok());
    let id_time = parse_utc_timestamp(&format!(
        "{}-{}-{}T{}:{}:{}.{}Z",
        &ts[..4],
        &ts[4..6],
        &ts[6..8],
        &ts[9..11],
        &ts[11..13],
        &ts[13..15],
        &ts[15..21]
    ))
    .ok();
    if let (Some(started), Some(id_time)) = (started, id_time) {
        if started != id_time / 1000 * 1000 {
            v.push(
                "/qualification/started_at_utc",
                format!("disagrees with the start time in receipt_id {}", jstr(id)),
            );
        }
        let at = std::time::UNIX_EPOCH
            + std::time::Duration::from_micros(u64::try_from(id_time).unwrap_or(0));
        let s = |p: &str| get(receipt, p).as_str().unwrap_or_default().to_owned();
        let expected = generate_receipt_id(
            at,
            &s("/qualification/backend"),
            &s("/environment/host_id"),
            &s("/workload/id"),
            &s("/workload/parameters/variant_id"),
        );
        if expected != id {
            v.push(
                "/receipt_id",
                format!(
                    "is {}, the receipt's backend, host, workload and variant generate {}",
                    jstr(id),
                    jstr(&expected)
                ),
            );
        }
    }
}

fn verify_time(v: &mut Verifier<'_>, receipt: &Value) {
    let t = |p: &str| {
        get(receipt, p)
            .as_str()
            .and_then(|s| parse_utc_timestamp(s).ok())
    };
    let (Some(started), Some(finished), Some(created)) = (
        t("/qualification/started_at_utc"),
        t("/qualification/finished_at_utc"),
        t("/created_at_utc"),
    ) else {
        return;
    };
    if created != finished {
        v.push(
            "/created_at_utc",
            "differs from /qualification/finished_at_utc (the runner writes both at completion)",
        );
    }
    let Some(duration) = get(receipt, "/qualification/duration_seconds").as_f64() else {
        return;
    };
    let elapsed = (finished - started) as f64 / 1e6;
    if (elapsed - duration).abs() > 0.001 + 1e-9 {
        v.push(
            "/qualification/duration_seconds",
            format!(
                "is {}, the recorded start and finish are {} s apart (the runner derives finish from start + duration)",
                qual_json::python_float_repr(duration),
                qual_json::python_float_repr(elapsed)
            ),
        );
    }
    let cases: f64 = get(receipt, "/results")
        .as_array()
        .map(|rs| {
            rs.iter()
                .filter_map(|r| get(r, "/duration_seconds").as_f64())
                .sum()
        })
        .unwrap_or(0.0);
    if cases > duration + 1e-6 {
        v.push(
            "/qualification/duration_seconds",
            format!(
                "is {}, shorter than the {} s its results took",
                qual_json::python_float_repr(duration),
                qual_json::python_float_repr(cases)
            ),
        );
    }
}

/// The workload at the receipt's commit: its bytes, digest and identity.
fn verify_workload(v: &mut Verifier<'_>, receipt: &Value, config: &Value) -> Option<Workload> {
    let commit = get(receipt, "/source/git_commit")
        .as_str()
        .unwrap_or_default();
    let Some(path) = get(config, "/workload_path").as_str() else {
        v.push(
            format!("{}/run-config.json#/workload_path", v.run_dir_rel),
            "is absent: the workload cannot be located",
        );
        return None;
    };
    let bytes = match qual_git::Repo::new(v.root).blob_at(commit, path) {
        Ok(Some(b)) => b,
        Ok(None) => {
            v.push(
                "/source/git_commit",
                format!("holds no workload at {} in this repository", jstr(path)),
            );
            return None;
        }
        Err(e) => {
            v.push(
                "/source/git_commit",
                format!("cannot be read for the workload {}: {e}", jstr(path)),
            );
            return None;
        }
    };
    let digest = qual_json::sha256_prefixed(&bytes);
    v.differs(
        "/workload/sha256",
        get(receipt, "/workload/sha256"),
        &Value::from(digest.as_str()),
        &format!("the workload at the recorded commit ({path}) hashes to"),
    );
    let value = match qual_contract::check_bytes(&bytes) {
        Ok(value) => value,
        Err(violations) => {
            v.push(
                "/workload",
                format!(
                    "names a workload that is invalid at the recorded commit ({} violations)",
                    violations.len()
                ),
            );
            return None;
        }
    };
    let w = match qual_contract::typed(&value) {
        Ok(w) => w,
        Err(e) => {
            v.push("/workload", format!("cannot be typed: {e}"));
            return None;
        }
    };
    let source = "the workload declares";
    v.differs(
        "/workload/id",
        get(receipt, "/workload/id"),
        &Value::from(w.workload_id.as_str()),
        source,
    );
    v.differs(
        "/qualification/kind",
        get(receipt, "/qualification/kind"),
        &Value::from(w.kind.as_str()),
        source,
    );
    let profile: String = w.workload_id.chars().take(128).collect();
    v.differs(
        "/qualification/profile",
        get(receipt, "/qualification/profile"),
        &Value::from(profile.as_str()),
        source,
    );
    v.differs(
        "/workload/seed",
        get(receipt, "/workload/seed"),
        &w.determinism.seed.map(Value::from).unwrap_or(Value::Null),
        source,
    );
    let variant_id = get(config, "/variant_id").as_str().unwrap_or_default();
    let Some(variant) = w.variant(variant_id) else {
        v.push(
            "/workload/parameters/variant_id",
            format!(
                "names variant {}, which the workload does not declare",
                jstr(variant_id)
            ),
        );
        return None;
    };
    v.differs(
        "/qualification/backend",
        get(receipt, "/qualification/backend"),
        &Value::from(variant.backend.as_str()),
        "the workload's variant declares",
    );
    let mut parameters = Object::new();
    parameters.insert("variant_id", Value::from(variant_id));
    if let Some(vars) = get(config, "/variables").as_object() {
        for (k, x) in vars.iter() {
            parameters.insert(k.clone(), x.clone());
        }
    }
    v.diff(
        "/workload/parameters",
        get(receipt, "/workload/parameters"),
        &Value::Object(parameters),
        "run-config.json records",
    );
    let config_value =
        Value::from_serde(&serde_json::Value::Object(variant.effective_config.clone()));
    let got = get(receipt, "/effective_config");
    if json(got) != "{}" && json(got) != json(&config_value) {
        v.push(
            "/effective_config",
            format!(
                "is {}, neither {{}} (unverified) nor the variant's {}",
                json(got),
                json(&config_value)
            ),
        );
    }
    Some(w)
}

fn metric_from(v: &Value) -> Option<Metric> {
    Some(Metric {
        name: get(v, "/name").as_str()?.to_owned(),
        value: match get(v, "/value") {
            Value::Number(n) => n.clone(),
            _ => return None,
        },
        unit: get(v, "/unit").as_str()?.to_owned(),
        aggregation: get(v, "/aggregation").as_str()?.to_owned(),
        lower_is_better: get(v, "/lower_is_better").as_bool()?,
    })
}

/// The exit code the runner derives from its containment record (`None`: never started).
fn return_code(termination: &Value) -> Option<i64> {
    let n = |k: &str| get(termination, k).as_int().and_then(|i| i.as_i64());
    match get(termination, "/status").as_str()? {
        "exited" => n("/code"),
        "signaled" => n("/signal").map(|s| -s),
        _ => n("/signal_used").map(|s| -s),
    }
}

/// Checks one execution's case result against the runner's record of it; returns the
/// outcome to aggregate.
fn execution(
    v: &mut Verifier<'_>,
    case: &qual_contract::Case,
    dir_rel: &str,
    record: Option<&Value>,
) -> Option<ExecutionOutcome> {
    let file = format!("{dir_rel}/case-result.json");
    let result = v.load(&file)?;
    let base = format!("{}/{file}", v.run_dir_rel);
    let ptr = |p: &str| format!("{base}#{p}");
    v.differs(
        &ptr("/case_id"),
        get(&result, "/case_id"),
        &Value::from(case.id.as_str()),
        "its directory names",
    );
    let status = get(&result, "/status")
        .as_str()
        .and_then(ResultStatus::parse);
    let Some(status) = status else {
        v.push(ptr("/status"), "is not a result status");
        return None;
    };
    let metrics: Vec<Metric> = get(&result, "/metrics")
        .as_array()
        .map(|ms| ms.iter().filter_map(metric_from).collect())
        .unwrap_or_default();
    let outcome = ExecutionOutcome {
        status,
        duration_seconds: get(&result, "/duration_seconds").as_f64().unwrap_or(-1.0),
        metrics,
        details: get(&result, "/details").as_str().map(str::to_owned),
    };
    let Some(record) = record else {
        v.push(
            ptr(""),
            "has no execution record in run-config.json (/cases)",
        );
        return Some(outcome);
    };
    let containment = get(record, "/containment");
    let rc = return_code(get(containment, "/termination"));
    let mut reasons = Vec::new();
    if !rc.is_some_and(|rc| case.expected_exit_codes.iter().any(|c| i64::from(*c) == rc)) {
        reasons.push(match rc {
            Some(rc) => format!("exit code {rc} is not expected"),
            None => "the command never ran".to_owned(),
        });
    }
    if get(containment, "/residue")
        .as_array()
        .is_some_and(|r| !r.is_empty())
    {
        reasons.push("descendant processes were left running".to_owned());
    }
    if get(containment, "/pipes_closed").as_bool() == Some(false) {
        reasons.push("output pipes stayed open".to_owned());
    }
    let runner = case.result_protocol.producer == Producer::Runner;
    // The output assertions, re-judged on the retained logs with the runner's own code.
    let failed_assertions = if containment.is_null() {
        None
    } else {
        // Logs hold at most the runner's capture bound (16 MiB per stream); regular files only.
        let log = |name: &str| {
            qual_json::file::read_regular_file(&v.run_dir.join(dir_rel).join(name), 64 << 20)
                .ok()
                .flatten()
                .ok_or(())
        };
        match (log("stdout.log"), log("stderr.log")) {
            (Ok(so), Ok(se)) => {
                let captured = |bytes, stream: &str| qual_contract::assertions::Captured {
                    bytes,
                    truncated: get(containment, &format!("/{stream}/truncated")).as_bool()
                        == Some(true),
                };
                Some(qual_contract::assertions::failures(
                    &case.output_assertions,
                    captured(&so, "stdout"),
                    captured(&se, "stderr"),
                ))
            }
            _ => {
                v.push(
                    ptr(""),
                    "has no readable stdout.log and stderr.log beside it",
                );
                None
            }
        }
    };
    if let Some(failed) = &failed_assertions {
        if !failed.is_empty() {
            reasons.push(format!("the retained output fails: {}", failed.join("; ")));
        }
    }
    for m in &outcome.metrics {
        let value = m.value.as_f64().unwrap_or(0.0);
        if runner && m.name == "exit_code" {
            let expected = Value::from(rc.unwrap_or(-1));
            v.differs(
                &ptr(&format!(
                    "/metrics/{}/value",
                    metric_index(&outcome, &m.name)
                )),
                &Value::Number(m.value.clone()),
                &expected,
                "the runner's containment record gives exit code",
            );
        }
        if runner && m.name == "output_assertion_failures" {
            if value > 0.0 {
                reasons.push(format!("{value} output assertions failed"));
            }
            if let Some(failed) = &failed_assertions {
                v.differs(
                    &ptr(&format!(
                        "/metrics/{}/value",
                        metric_index(&outcome, &m.name)
                    )),
                    &Value::Number(m.value.clone()),
                    &Value::from(failed.len() as u64),
                    "the retained output re-judged by the workload's assertions gives",
                );
            }
        }
        if runner && m.name == "case_pass" && (value == 1.0) != (status == ResultStatus::Passed) {
            v.push(
                ptr(&format!(
                    "/metrics/{}/value",
                    metric_index(&outcome, &m.name)
                )),
                format!(
                    "is case_pass {}, but the status is {}",
                    json(&Value::Number(m.value.clone())),
                    jstr(status.as_str())
                ),
            );
        }
    }
    if status != ResultStatus::Failed && !reasons.is_empty() {
        v.push(
            ptr("/status"),
            format!(
                "is {}, but the runner's record shows {}",
                jstr(status.as_str()),
                reasons.join("; ")
            ),
        );
    }
    Some(outcome)
}

fn metric_index(o: &ExecutionOutcome, name: &str) -> usize {
    o.metrics.iter().position(|m| m.name == name).unwrap_or(0)
}

fn verify_results(v: &mut Verifier<'_>, receipt: &Value, config: &Value, w: &Workload) {
    let variant_id = get(config, "/variant_id").as_str().unwrap_or_default();
    let Some(variant) = w.variant(variant_id) else {
        return;
    };
    let infra: Vec<String> = get(config, "/infrastructure_failures")
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let records: Vec<&Value> = get(config, "/cases")
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let reps = w.determinism.repetitions.max(1);
    let mut expected: Vec<CaseResultEntry> = Vec::new();
    if get(config, "/pre_case_failure").is_null() {
        let executions = reps * variant.cases.len() as u64;
        v.differs(
            &format!("{}/run-config.json#/case_execution_count", v.run_dir_rel),
            get(config, "/case_execution_count"),
            &Value::from(executions),
            "the workload declares cases × repetitions",
        );
        for (i, case) in variant.cases.iter().enumerate() {
            let mut outcomes = Vec::new();
            for r in 1..=reps {
                let dir_rel = format!("cases/{:03}-{}-r{r:03}", i + 1, case.id);
                let record = records.iter().copied().find(|x| {
                    get(x, "/case_id").as_str() == Some(&case.id)
                        && get(x, "/repetition").as_int().and_then(|n| n.as_u64()) == Some(r)
                });
                if !v.run_dir.join(&dir_rel).is_dir() {
                    let shown = format!("{}/{dir_rel}", v.run_dir_rel);
                    v.push(
                        result_pointer(receipt, &case.id),
                        format!(
                            "repetition {r} of case {} has no case directory ({shown} is absent)",
                            jstr(&case.id)
                        ),
                    );
                    continue;
                }
                if let Some(o) = execution(v, case, &dir_rel, record) {
                    outcomes.push(o);
                }
            }
            if outcomes.is_empty() {
                continue;
            }
            expected.push(aggregate_case(
                &case.id,
                case.required,
                case.result_protocol.producer == Producer::Runner,
                &outcomes,
            ));
        }
        if records.len() as u64 != executions {
            v.push(
                format!("{}/run-config.json#/cases", v.run_dir_rel),
                format!(
                    "records {} executions, the workload declares {executions}",
                    records.len()
                ),
            );
        }
    } else {
        // The runner recorded the initial fingerprint failure first.
        expected = unexecuted_results(
            variant.cases.iter().map(|c| (c.id.as_str(), c.required)),
            crate::details::join_details(&infra[..infra.len().min(1)]),
        );
    }
    apply_skip_policy(&mut expected, variant.skip_policy == SkipPolicy::Fail);
    apply_infrastructure_failures(&mut expected, &infra);
    let downgraded = get(receipt, "/notes")
        .as_array()
        .is_some_and(|n| n.iter().any(|x| x.as_str() == Some(DOWNGRADE_NOTE)));
    let mut downgraded_id = None;
    if downgraded && verdict(&expected) == Verdict::Passed {
        if let Some(r) = expected.iter_mut().find(|r| r.required) {
            r.status = ResultStatus::Failed;
            for m in r.metrics.iter_mut().filter(|m| m.name == "case_pass") {
                *m = runner_metric("case_pass", 0).expect("runner metric");
            }
            downgraded_id = Some(r.id.clone());
        }
    }
    compare_results(v, receipt, &expected, downgraded_id.as_deref());
    let recomputed = verdict(&expected);
    v.differs(
        "/qualification/verdict",
        get(receipt, "/qualification/verdict"),
        &Value::from(recomputed.as_str()),
        "the retained case results and the workload's required cases give",
    );
}

fn result_pointer(receipt: &Value, id: &str) -> String {
    get(receipt, "/results")
        .as_array()
        .and_then(|rs| rs.iter().position(|r| get(r, "/id").as_str() == Some(id)))
        .map(|i| format!("/results/{i}"))
        .unwrap_or_else(|| "/results".to_owned())
}

fn compare_results(
    v: &mut Verifier<'_>,
    receipt: &Value,
    expected: &[CaseResultEntry],
    downgraded: Option<&str>,
) {
    let got: &[Value] = get(receipt, "/results")
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (k, r) in got.iter().enumerate() {
        let id = get(r, "/id").as_str().unwrap_or_default();
        if !expected.iter().any(|e| e.id == id) {
            v.push(
                format!("/results/{k}"),
                format!(
                    "is case {}, which the workload's variant does not declare or the run directory does not hold",
                    jstr(id)
                ),
            );
        }
    }
    for (e_index, e) in expected.iter().enumerate() {
        let Some(k) = got
            .iter()
            .position(|r| get(r, "/id").as_str() == Some(&e.id))
        else {
            v.push(
                "/results",
                format!(
                    "lacks case {} ({}, {}), which the workload declares and the run directory holds",
                    jstr(&e.id),
                    if e.required { "required" } else { "optional" },
                    e.status.as_str()
                ),
            );
            continue;
        };
        if k != e_index {
            v.push(
                format!("/results/{k}/id"),
                format!(
                    "is case {} at position {k}, declared at position {e_index}",
                    jstr(&e.id)
                ),
            );
        }
        let r = &got[k];
        let p = |f: &str| format!("/results/{k}/{f}");
        let source = "the retained case results give";
        v.differs(
            &p("required"),
            get(r, "/required"),
            &Value::Bool(e.required),
            "the workload declares",
        );
        v.differs(
            &p("status"),
            get(r, "/status"),
            &Value::from(e.status.as_str()),
            source,
        );
        v.differs(
            &p("duration_seconds"),
            get(r, "/duration_seconds"),
            &Value::from(e.duration_seconds),
            source,
        );
        let metrics: &[Value] = get(r, "/metrics")
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (j, m) in metrics.iter().enumerate() {
            let name = get(m, "/name").as_str().unwrap_or_default();
            match e.metrics.iter().find(|x| x.name == name) {
                None => v.push(
                    p(&format!("metrics/{j}")),
                    format!(
                        "is metric {}, which the retained case results do not report",
                        jstr(name)
                    ),
                ),
                Some(x) => v.diff(&p(&format!("metrics/{j}")), m, &x.to_value(), source),
            }
        }
        for x in &e.metrics {
            if !metrics
                .iter()
                .any(|m| get(m, "/name").as_str() == Some(&x.name))
            {
                v.push(
                    p("metrics"),
                    format!(
                        "lacks metric {} = {}",
                        jstr(&x.name),
                        json(&Value::Number(x.value.clone()))
                    ),
                );
            }
        }
        let details = get(r, "/details");
        if downgraded == Some(e.id.as_str()) {
            if !details
                .as_str()
                .is_some_and(|d| d.contains("runner validation failed: "))
            {
                v.push(
                    p("details"),
                    "lacks the runner's validation failure, although the receipt says it was downgraded",
                );
            }
        } else {
            v.differs(
                &p("details"),
                details,
                &e.details.as_deref().map(Value::from).unwrap_or(Value::Null),
                source,
            );
        }
    }
}

/// What kind of evidence a file of the run directory is (`None`: not evidence).
fn evidence_kind(rel: &str) -> Option<&'static str> {
    match rel {
        "environment.json" => return Some("environment_probes"),
        "run-config.json" => return Some("effective_run_config"),
        "model-fingerprint-initial.json" => return Some("model_fingerprint_initial"),
        "model-fingerprint-final.json" => return Some("model_fingerprint_final"),
        _ => {}
    }
    let (dir, file) = rel.rsplit_once('/')?;
    let case_dir = dir.strip_prefix("cases/")?;
    if case_dir.contains('/') {
        return None;
    }
    match file {
        "stdout.log" => Some("case_stdout"),
        "stderr.log" => Some("case_stderr"),
        "case-result.json" => Some("case_result"),
        "command-result.json" => Some("command_case_result"),
        _ => None,
    }
}

fn walk(
    dir: &Path,
    base: &Path,
    out: &mut Vec<(String, std::fs::Metadata)>,
) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let meta = std::fs::symlink_metadata(e.path())?;
        if meta.is_dir() {
            walk(&e.path(), base, out)?;
        } else {
            out.push((rel(base, &e.path()), meta));
        }
    }
    Ok(())
}

fn verify_artifacts(v: &mut Verifier<'_>, receipt: &Value, config: &Value) {
    let mut files = Vec::new();
    if let Err(e) = walk(&v.run_dir.clone(), &v.run_dir.clone(), &mut files) {
        v.push(
            "/artifacts",
            format!("cannot be checked: failed to list the run directory: {e}"),
        );
        return;
    }
    let result_limit = get(config, "/per_case_result_limit_bytes")
        .as_int()
        .and_then(|n| n.as_u64())
        .unwrap_or(u64::MAX);
    // The runner's order: initial fingerprint, environment, executions (stdout, stderr, case
    // result, command result), final fingerprint, run config.
    let rank = |rel: &str| -> (u8, String, u8) {
        match rel {
            "model-fingerprint-initial.json" => (0, String::new(), 0),
            "environment.json" => (1, String::new(), 0),
            "model-fingerprint-final.json" => (3, String::new(), 0),
            "run-config.json" => (4, String::new(), 0),
            _ => {
                let (dir, file) = rel.rsplit_once('/').unwrap_or_default();
                let f = match file {
                    "stdout.log" => 0,
                    "stderr.log" => 1,
                    "case-result.json" => 2,
                    _ => 3,
                };
                (2, dir.to_owned(), f)
            }
        }
    };
    let mut expected: Vec<(String, &'static str, std::fs::Metadata)> = Vec::new();
    for (rel, meta) in files {
        match evidence_kind(&rel) {
            Some("command_case_result") if !meta.is_file() || meta.len() > result_limit => {}
            Some(kind) => expected.push((rel, kind, meta)),
            None if rel.starts_with("cases/") && rel.matches('/').count() >= 2 => {}
            None => {
                let shown = format!("{}/{rel}", v.run_dir_rel);
                v.push(
                    "/artifacts",
                    format!("cannot account for {shown}: the runner writes no such file"),
                );
            }
        }
    }
    expected.sort_by_key(|a| rank(&a.0));
    let listed: &[Value] = get(receipt, "/artifacts")
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let prefix = format!("{}/", v.recorded);
    let mut order = Vec::new();
    for (k, a) in listed.iter().enumerate() {
        let path = get(a, "/path").as_str().unwrap_or_default();
        let inner = path.strip_prefix(&prefix);
        let found = inner.and_then(|inner| expected.iter().position(|e| e.0 == inner));
        let Some(e) = found else {
            v.push(
                format!("/artifacts/{k}/path"),
                format!(
                    "is {}, which is not evidence in the run directory",
                    jstr(path)
                ),
            );
            continue;
        };
        order.push(e);
        let (inner, kind, meta) = &expected[e];
        v.differs(
            &format!("/artifacts/{k}/kind"),
            get(a, "/kind"),
            &Value::from(*kind),
            "the runner names this file",
        );
        v.differs(
            &format!("/artifacts/{k}/location"),
            get(a, "/location"),
            &Value::from("local_ignored"),
            "the runner records",
        );
        if !meta.is_file() {
            v.push(
                format!("/artifacts/{k}/path"),
                "is not a regular file in the run directory",
            );
            continue;
        }
        match hash_file(&v.run_dir.join(inner)) {
            Ok((digest, len)) => {
                v.differs(
                    &format!("/artifacts/{k}/sha256"),
                    get(a, "/sha256"),
                    &Value::from(digest.as_str()),
                    "the file hashes to",
                );
                v.differs(
                    &format!("/artifacts/{k}/bytes"),
                    get(a, "/bytes"),
                    &Value::from(len),
                    "the file holds",
                );
            }
            Err(e) => v.push(
                format!("/artifacts/{k}/path"),
                format!("cannot be read: {e}"),
            ),
        }
    }
    for (e, (inner, kind, _)) in expected.iter().enumerate() {
        if !order.contains(&e) {
            v.push(
                "/artifacts",
                format!(
                    "does not list {} ({kind}), which the run directory holds",
                    jstr(&format!("{prefix}{inner}"))
                ),
            );
        }
    }
    if order.windows(2).any(|w| w[0] >= w[1]) {
        v.push(
            "/artifacts",
            "is not in the order the runner writes its evidence",
        );
    }
}
