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
//!
//! The checks live by family: `identity` (receipt id and time), `workload` (the workload
//! at the recorded commit), `results` (each execution against the runner's record, then the
//! aggregated results) and `artifacts` (the evidence file list). This file owns the
//! [`Finding`] type, the `Verifier` that collects them, and [`verify_run`], which runs the
//! families in order.

mod artifacts;
mod identity;
mod results;
mod workload;

use artifacts::verify_artifacts;
use identity::{verify_identity, verify_time};
use results::verify_results;
use workload::verify_workload;

use std::path::{Path, PathBuf};

use qual_contract::{Producer, SkipPolicy, Workload};
use qual_json::{Object, Value};

use crate::aggregate::{
    aggregate_case, apply_infrastructure_failures, apply_skip_policy, runner_metric,
    skipped_results, unexecuted_results, verdict, ExecutionOutcome, PRE_CASE_DEVICE,
    PRE_CASE_MODEL,
};
use crate::model::{generate_receipt_id, CaseResultEntry, Metric, ResultStatus, Verdict};
use crate::validate::{hash_file, parse_utc_timestamp};

/// The note the runner adds when it downgrades a would-be passed receipt.
pub const DOWNGRADE_NOTE: &str = "Receipt was downgraded because current-source validation failed.";

/// One disagreement between a receipt and its evidence: the document layer's
/// [`qual_json::Violation`], whose `pointer` points into the receipt (`/results/1/status`) or
/// into an evidence file (`<evidence path>#<pointer>`) and whose `message` says what differs.
pub use qual_json::Violation as Finding;

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
    v.at_pointer(pointer)
}

fn rel(root: &Path, p: &Path) -> String {
    qual_json::file::display_relative(root, p)
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
