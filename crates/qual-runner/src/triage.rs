//! Failure triage (`kiln-qual triage`): a finished run's evidence read back in the seeds'
//! order — preflight, environment, execution, structured result, correctness gates, final
//! integrity — each failure with the evidence file that shows it (a path plus a JSON pointer
//! or a line).
//!
//! Nothing is re-parsed by hand: the receipt goes through `qual_receipt::validate` and
//! `qual_receipt::verify::verify_run`, the command's result through [`crate::case_result`],
//! the output assertions through `qual_contract::assertions` on the retained logs, exactly as
//! the runner judged them. What each stage reads:
//!
//! 1. preflight — the workload at the recorded commit, variant and parameters (the verifier's
//!    `/workload`, `/source/git_commit` and `/effective_config` findings), and executions that
//!    never started because their invocation could not be bound;
//! 2. environment — required probes of `environment.json` that did not pass, a required
//!    device that was not detected;
//! 3. execution — each execution's termination and exit code against the expected codes, with
//!    the last line of its `stderr.log` (else `stdout.log`), residue and open pipes, from
//!    `run-config.json`;
//! 4. structured result — a command-produced case whose result is missing or invalid;
//! 5. correctness gates — each output assertion re-judged, a case that reported `failed`
//!    itself, policy metrics, and any required case that did not pass;
//! 6. final integrity — source and model drift, receipt validation and every other
//!    disagreement the verifier finds, a receipt downgraded by current-source validation, a
//!    run directory without a receipt.
//!
//! What it cannot tell: a run refused by preflight left nothing to read (its one stderr line
//! is the whole evidence), and the failures are those the evidence records — triage judges
//! nothing the runner did not.

use std::path::{Path, PathBuf};

use qual_json::Value;
use serde::Serialize;

use crate::case_result;

/// The triage stages, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Clean worktree, committed workload, selected variant, resolved variables.
    Preflight,
    /// Backend visibility, selected device, required tools, probes.
    Environment,
    /// Exit code, timeout, truncation, process cleanup.
    Execution,
    /// The case result the command wrote.
    StructuredResult,
    /// Output assertions, the case's own verdict, policy metrics, required case status.
    CorrectnessGates,
    /// Source and model drift, artifacts, residue, receipt validation.
    FinalIntegrity,
}

/// Every stage, in order.
pub const STAGES: [Stage; 6] = [
    Stage::Preflight,
    Stage::Environment,
    Stage::Execution,
    Stage::StructuredResult,
    Stage::CorrectnessGates,
    Stage::FinalIntegrity,
];

impl Stage {
    /// The stage in words.
    pub fn title(self) -> &'static str {
        match self {
            Stage::Preflight => "preflight",
            Stage::Environment => "environment",
            Stage::Execution => "execution",
            Stage::StructuredResult => "structured result",
            Stage::CorrectnessGates => "correctness gates",
            Stage::FinalIntegrity => "final integrity",
        }
    }
}

/// Where a failure shows: a file (relative to the repository root when below it) and a JSON
/// pointer into it or a 1-based line of it with that line's text.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    /// The file.
    pub path: String,
    /// A JSON pointer into it.
    pub pointer: Option<String>,
    /// A line of it (1-based).
    pub line: Option<u64>,
    /// That line's text (at most 240 characters).
    pub text: Option<String>,
}

/// One failure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Failure {
    /// Its stage.
    pub stage: Stage,
    /// The case it belongs to, when it belongs to one.
    pub case_id: Option<String>,
    /// The repetition, for an execution's failure.
    pub repetition: Option<u64>,
    /// What failed.
    pub message: String,
    /// Where it shows.
    pub evidence: Evidence,
}

/// The triage of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Triage {
    /// The receipt read (none: only the run directory).
    pub receipt: Option<String>,
    /// The run directory read.
    pub run_dir: String,
    /// The receipt's verdict.
    pub verdict: Option<String>,
    /// Every failure, in stage order (then evidence order).
    pub failures: Vec<Failure>,
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

fn int(v: &Value) -> Option<i64> {
    v.as_int().and_then(|i| i.as_i64())
}

/// Collects failures with paths shown relative to the root.
struct Collector<'a> {
    root: &'a Path,
    out: Vec<Failure>,
}

impl Collector<'_> {
    fn show(&self, p: &Path) -> String {
        p.strip_prefix(self.root)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    }

    fn at(&self, p: &Path, pointer: &str) -> Evidence {
        Evidence {
            path: self.show(p),
            pointer: Some(pointer.to_string()),
            line: None,
            text: None,
        }
    }

    fn push(&mut self, stage: Stage, case: Option<(&str, u64)>, message: String, e: Evidence) {
        self.out.push(Failure {
            stage,
            case_id: case.map(|(c, _)| c.to_string()),
            repetition: case.map(|(_, r)| r).filter(|r| *r > 0),
            message,
            evidence: e,
        });
    }
}

fn load(path: &Path) -> Result<Value, String> {
    let limits = qual_json::Limits {
        max_bytes: 64 * 1024 * 1024,
        ..qual_json::Limits::default()
    };
    qual_json::load_file(path, limits)
        .map(|(v, _)| v)
        .map_err(|e| e.to_string())
}

fn read_log(path: &Path) -> Option<Vec<u8>> {
    qual_json::file::read_regular_file(path, 64 << 20)
        .ok()
        .flatten()
}

/// The last non-empty line of a log, with its number.
fn last_line(path: &Path, c: &Collector<'_>) -> Option<Evidence> {
    let bytes = read_log(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let (n, line) = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .last()?;
    Some(Evidence {
        path: c.show(path),
        pointer: None,
        line: Some(n as u64 + 1),
        text: Some(line.chars().take(240).collect()),
    })
}

/// Triage of the run in `run_dir` (and its receipt, when there is one) for the repository at
/// `root`.
pub fn triage(root: &Path, receipt: Option<(&Path, &Value)>, run_dir: &Path) -> Triage {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let run_dir = run_dir
        .canonicalize()
        .unwrap_or_else(|_| run_dir.to_path_buf());
    let mut c = Collector {
        root: &root,
        out: Vec::new(),
    };
    let config_path = run_dir.join("run-config.json");
    let config = match load(&config_path) {
        Ok(v) => Some(v),
        Err(e) => {
            let ev = c.at(&config_path, "");
            c.push(
                Stage::FinalIntegrity,
                None,
                format!("the run directory's record cannot be read: {e}"),
                ev,
            );
            None
        }
    };
    environment(&mut c, &run_dir);
    if let Some(config) = &config {
        executions(&mut c, &run_dir, config);
        infrastructure(&mut c, &config_path, config);
    }
    let verdict = match receipt {
        Some((path, value)) => {
            // Infrastructure failures fail every case: those results need no gate of their own.
            let infra = config.as_ref().is_some_and(|v| {
                get(v, "/infrastructure_failures")
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
            });
            receipt_checks(&mut c, path, value, &run_dir, !infra);
            get(value, "/qualification/verdict")
                .as_str()
                .map(str::to_string)
        }
        None => {
            let ev = c.at(&run_dir, "");
            c.push(
                Stage::FinalIntegrity,
                None,
                "no receipt names this run directory under qualification/receipts/ or .qualification/receipts/ (the run did not finish, or its receipt lies elsewhere: pass the receipt)".into(),
                ev,
            );
            None
        }
    };
    let mut failures = c.out;
    failures.sort_by_key(|f| f.stage);
    Triage {
        receipt: receipt.map(|(p, _)| show_path(&root, p)),
        run_dir: show_path(&root, &run_dir),
        verdict,
        failures,
    }
}

fn show_path(root: &Path, p: &Path) -> String {
    let abs = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    abs.strip_prefix(root)
        .unwrap_or(&abs)
        .to_string_lossy()
        .into_owned()
}

/// Required probes of `environment.json` that did not pass.
fn environment(c: &mut Collector<'_>, run_dir: &Path) {
    let path = run_dir.join("environment.json");
    let Ok(env) = load(&path) else {
        return; // reported by the verifier with the receipt
    };
    for (i, p) in get(&env, "/probe_results")
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let status = get(p, "/status").as_str().unwrap_or_default();
        if get(p, "/required").as_bool() == Some(true) && status != "passed" {
            let id = get(p, "/id").as_str().unwrap_or_default();
            let why = get(p, "/details").as_str().unwrap_or("no reason recorded");
            let ev = c.at(&path, &format!("/probe_results/{i}/details"));
            c.push(
                Stage::Environment,
                None,
                format!("required environment probe {id} {status}: {why}"),
                ev,
            );
        }
    }
}

/// One execution's directory, from the result path the runner recorded for it.
fn case_dir(run_dir: &Path, record: &Value) -> Option<PathBuf> {
    let recorded = get(record, "/case_result_path").as_str()?;
    let (_, tail) = recorded.split_once("/cases/")?;
    let dir = tail.split('/').next()?;
    Some(run_dir.join("cases").join(dir))
}

/// Execution, structured result and correctness gates of every execution in
/// `run-config.json`.
fn executions(c: &mut Collector<'_>, run_dir: &Path, config: &Value) {
    let config_path = run_dir.join("run-config.json");
    for (i, record) in get(config, "/cases")
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let case_id = get(record, "/case_id").as_str().unwrap_or_default();
        let rep = int(get(record, "/repetition")).unwrap_or(0).max(0) as u64;
        let Some(dir) = case_dir(run_dir, record) else {
            let ev = c.at(&config_path, &format!("/cases/{i}/case_result_path"));
            c.push(
                Stage::FinalIntegrity,
                Some((case_id, rep)),
                "the run record names no case directory".into(),
                ev,
            );
            continue;
        };
        let at = format!("/cases/{i}");
        let started = !get(record, "/containment").is_null();
        if !started {
            not_started(c, &dir, case_id, rep);
            continue;
        }
        execution(c, &config_path, &at, record, &dir, (case_id, rep));
        structured(c, &config_path, &at, record, &dir, (case_id, rep));
        assertions(c, &at, record, &dir, (case_id, rep));
    }
}

/// An execution that never started: its invocation could not be bound (an unresolved
/// placeholder, a refused working directory).
fn not_started(c: &mut Collector<'_>, dir: &Path, case_id: &str, rep: u64) {
    let path = dir.join("case-result.json");
    let details = load(&path)
        .ok()
        .and_then(|v| get(&v, "/details").as_str().map(str::to_string))
        .unwrap_or_else(|| "no details recorded".into());
    let ev = c.at(&path, "/details");
    c.push(
        Stage::Preflight,
        Some((case_id, rep)),
        format!("the execution never started: {details}"),
        ev,
    );
}

fn execution(
    c: &mut Collector<'_>,
    config_path: &Path,
    at: &str,
    record: &Value,
    dir: &Path,
    case: (&str, u64),
) {
    let t = get(record, "/containment/termination");
    let status = get(t, "/status").as_str().unwrap_or_default();
    let code = int(get(t, "/code"));
    let expected: Vec<i64> = get(record, "/expected_exit_codes")
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(int)
        .collect();
    let log =
        last_line(&dir.join("stderr.log"), c).or_else(|| last_line(&dir.join("stdout.log"), c));
    let term = c.at(config_path, &format!("{at}/containment/termination"));
    let message = match (status, code) {
        ("exited", Some(code)) if expected.contains(&code) => None,
        ("exited", Some(code)) => Some(format!("exit code {code} not in {expected:?}")),
        ("signaled", _) => Some(format!(
            "killed by signal {}",
            int(get(t, "/signal")).unwrap_or_default()
        )),
        ("timed_out", _) => Some(format!(
            "timed out after {} seconds",
            int(get(record, "/timeout_seconds")).unwrap_or_default()
        )),
        (other, _) => Some(format!("ended {other}")),
    };
    if let Some(m) = message {
        let truncated: Vec<&str> = ["stdout", "stderr"]
            .into_iter()
            .filter(|s| get(record, &format!("/containment/{s}/truncated")).as_bool() == Some(true))
            .collect();
        let m = if truncated.is_empty() {
            m
        } else {
            format!("{m} ({} truncated)", truncated.join(" and "))
        };
        c.push(Stage::Execution, Some(case), m, log.unwrap_or(term));
    }
    let residue = get(record, "/containment/residue")
        .as_array()
        .map_or(0, Vec::len);
    if residue > 0 {
        let ev = c.at(config_path, &format!("{at}/containment/residue"));
        c.push(
            Stage::Execution,
            Some(case),
            format!("the command left {residue} descendant process(es) running (terminated by the runner)"),
            ev,
        );
    }
    if get(record, "/containment/pipes_closed").as_bool() == Some(false) {
        let ev = c.at(config_path, &format!("{at}/containment/pipes_closed"));
        c.push(
            Stage::Execution,
            Some(case),
            "the command's output pipes remained open after process cleanup".into(),
            ev,
        );
    }
}

/// The command's own result: missing, invalid, or reporting `failed`.
fn structured(
    c: &mut Collector<'_>,
    config_path: &Path,
    at: &str,
    record: &Value,
    dir: &Path,
    case: (&str, u64),
) {
    if get(record, "/result_protocol/producer").as_str() != Some("command") {
        return;
    }
    let path = dir.join("command-result.json");
    if std::fs::symlink_metadata(&path).is_err() {
        let ev = c.at(config_path, &format!("{at}/case_result_path"));
        c.push(
            Stage::StructuredResult,
            Some(case),
            "the command did not write its case result (the path in $KILN_QUALIFICATION_CASE_RESULT)".into(),
            ev,
        );
        return;
    }
    let declared: Vec<String> = get(record, "/result_protocol/declared_metrics")
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.as_str().map(str::to_string))
        .collect();
    let parsed = case_result::read_bounded(&path, 64 << 20)
        .and_then(|b| case_result::parse(&b))
        .map_err(|f| vec![f.message()])
        .and_then(|v| case_result::validate(&v, case.0, &declared, true));
    match parsed {
        Err(errors) => {
            let ev = c.at(&path, "");
            c.push(
                Stage::StructuredResult,
                Some(case),
                format!("invalid command case result: {}", errors.join("; ")),
                ev,
            );
        }
        Ok(cr) if cr.status.as_str() == "failed" => {
            let ev = c.at(&path, "/status");
            let why = cr.details.as_deref().unwrap_or("no details");
            c.push(
                Stage::CorrectnessGates,
                Some(case),
                format!("the case reported failed: {why}"),
                ev,
            );
        }
        Ok(_) => {}
    }
}

/// Each output assertion re-judged on the retained logs.
fn assertions(c: &mut Collector<'_>, at: &str, record: &Value, dir: &Path, case: (&str, u64)) {
    let list = get(record, "/output_assertions")
        .as_array()
        .cloned()
        .unwrap_or_default();
    if list.is_empty() {
        return;
    }
    let (Some(so), Some(se)) = (
        read_log(&dir.join("stdout.log")),
        read_log(&dir.join("stderr.log")),
    ) else {
        return; // reported by the verifier
    };
    let truncated =
        |s: &str| get(record, &format!("/containment/{s}/truncated")).as_bool() == Some(true);
    for (j, a) in list.iter().enumerate() {
        let Some(Ok(assertion)) = a
            .to_serde()
            .map(serde_json::from_value::<qual_contract::OutputAssertion>)
        else {
            continue;
        };
        let failed = qual_contract::assertions::failures(
            std::slice::from_ref(&assertion),
            qual_contract::assertions::Captured {
                bytes: &so,
                truncated: truncated("stdout"),
            },
            qual_contract::assertions::Captured {
                bytes: &se,
                truncated: truncated("stderr"),
            },
        );
        let stream = get(a, "/stream").as_str().unwrap_or("stdout");
        let log = if stream == "stderr" {
            "stderr.log"
        } else {
            "stdout.log"
        };
        for f in failed {
            let mut ev = c.at(&dir.join(log), "");
            ev.pointer = None;
            let m = format!("{f} (run-config.json#{at}/output_assertions/{j})");
            c.push(Stage::CorrectnessGates, Some(case), m, ev);
        }
    }
}

/// The stage of one of the runner's infrastructure failures (`run.rs` writes them: probe
/// failures, the device check, policy metrics, model and source drift); `None` for a probe
/// failure, which `environment.json` shows with its own evidence.
fn infra_stage(text: &str) -> Option<Stage> {
    Some(if text.starts_with("environment probe ") {
        return None;
    } else if text.starts_with("required backend device") {
        Stage::Environment
    } else if text.contains("policy metric") || text.ends_with("does not match committed policy") {
        Stage::CorrectnessGates
    } else {
        Stage::FinalIntegrity
    })
}

/// The runner's infrastructure failures not already read from their own evidence.
fn infrastructure(c: &mut Collector<'_>, config_path: &Path, config: &Value) {
    for (k, f) in get(config, "/infrastructure_failures")
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let Some(text) = f.as_str() else { continue };
        let Some(stage) = infra_stage(text) else {
            continue; // read from environment.json
        };
        let ev = c.at(config_path, &format!("/infrastructure_failures/{k}"));
        c.push(stage, None, text.to_string(), ev);
    }
}

/// The receipt: validation, the verifier's recomputation, the downgrade note, and (with
/// `required_gate`) required cases that did not pass without an earlier failure explaining
/// why.
fn receipt_checks(
    c: &mut Collector<'_>,
    path: &Path,
    receipt: &Value,
    run_dir: &Path,
    required_gate: bool,
) {
    for v in qual_receipt::validate::validate(receipt) {
        let ev = c.at(path, &v.pointer);
        c.push(
            Stage::FinalIntegrity,
            None,
            format!("receipt validation: {}", v.message),
            ev,
        );
    }
    let root = c.root.to_path_buf();
    for f in qual_receipt::verify::verify_run(receipt, &root, Some(run_dir)) {
        let (file, pointer) = match f.pointer.split_once('#') {
            Some((file, p)) => (root.join(file), p.to_string()),
            None => (path.to_path_buf(), f.pointer.clone()),
        };
        let preflight = file == path
            && (pointer.starts_with("/workload")
                || pointer == "/source/git_commit"
                || pointer == "/effective_config");
        let stage = if preflight {
            Stage::Preflight
        } else {
            Stage::FinalIntegrity
        };
        let ev = c.at(&file, &pointer);
        c.push(stage, None, format!("{pointer} {}", f.message), ev);
    }
    for (k, n) in get(receipt, "/notes")
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if n.as_str() == Some(qual_receipt::verify::DOWNGRADE_NOTE) {
            let ev = c.at(path, &format!("/notes/{k}"));
            c.push(
                Stage::FinalIntegrity,
                None,
                "the receipt was downgraded: current-source validation failed".into(),
                ev,
            );
        }
    }
    for (i, r) in get(receipt, "/results")
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let id = get(r, "/id").as_str().unwrap_or_default();
        let status = get(r, "/status").as_str().unwrap_or_default();
        let explained = c.out.iter().any(|f| f.case_id.as_deref() == Some(id));
        let required = get(r, "/required").as_bool() == Some(true);
        if required_gate && required && status != "passed" && !explained {
            let why = get(r, "/details").as_str().unwrap_or("no details");
            let ev = c.at(path, &format!("/results/{i}/status"));
            c.push(
                Stage::CorrectnessGates,
                Some((id, 0)),
                format!("required case {id} is {status}: {why}"),
                ev,
            );
        }
    }
}

/// The receipt naming run `receipt_id` below the repository's receipt directories: first by
/// file name (`<receipt_id>.json`), then by the `receipt_id` of every `.json` file (at most
/// 10,000 files, 8 directories deep).
pub fn find_receipt(root: &Path, receipt_id: &str) -> Option<PathBuf> {
    let mut files = Vec::new();
    for base in ["qualification/receipts", ".qualification/receipts"] {
        walk(&root.join(base), 0, &mut files);
    }
    let name = format!("{receipt_id}.json");
    if let Some(p) = files
        .iter()
        .find(|p| p.file_name().is_some_and(|n| n == name.as_str()))
    {
        return Some(p.clone());
    }
    files.into_iter().find(|p| {
        load(p)
            .ok()
            .is_some_and(|v| get(&v, "/receipt_id").as_str() == Some(receipt_id))
    })
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 8 || out.len() >= 10_000 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let p = e.path();
        if t.is_dir() {
            walk(&p, depth + 1, out);
        } else if t.is_file() && p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
        if out.len() >= 10_000 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infrastructure_failures_go_to_their_stage() {
        let cases = [
            (
                "environment probe \"cuda-device-probe\" failed: executable not found",
                None,
            ),
            (
                "required backend device was not detected",
                Some(Stage::Environment),
            ),
            (
                "required policy metric \"tps\" is missing from result \"bench\"",
                Some(Stage::CorrectnessGates),
            ),
            (
                "policy metric \"tps\" names missing result \"bench\"",
                Some(Stage::CorrectnessGates),
            ),
            (
                "metric \"tps\" definition in result \"bench\" does not match committed policy",
                Some(Stage::CorrectnessGates),
            ),
            (
                "model fingerprint changed during qualification",
                Some(Stage::FinalIntegrity),
            ),
            (
                "Git worktree became dirty during qualification",
                Some(Stage::FinalIntegrity),
            ),
            (
                "source tree changed during qualification: sha256:a -> sha256:b",
                Some(Stage::FinalIntegrity),
            ),
        ];
        for (text, stage) in cases {
            assert_eq!(infra_stage(text), stage, "{text}");
        }
    }

    #[test]
    fn stages_sort_in_the_seeds_order_and_case_dirs_come_from_the_record() {
        let mut sorted = STAGES;
        sorted.reverse();
        sorted.sort();
        assert_eq!(sorted, STAGES);
        let record = qual_json::from_str(
            r#"{"case_result_path": ".qualification/runs/x/cases/002-b-r003/scratch/command-result.json"}"#,
        )
        .unwrap();
        assert_eq!(
            case_dir(Path::new("/r/run"), &record),
            Some(PathBuf::from("/r/run/cases/002-b-r003"))
        );
        assert_eq!(case_dir(Path::new("/r"), &Value::Null), None);
    }
}
