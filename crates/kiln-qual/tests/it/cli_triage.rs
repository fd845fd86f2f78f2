//! `kiln-qual triage` on real failed runs: the runner runs a committed workload in a fresh git
//! repository (a case that exits 1, a case whose own metric gate fails, a case that writes no
//! result, a receipt whose recorded commit was rewritten away), and triage must name the stage
//! and the evidence file that shows each failure.

use crate::common::git;

use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_kiln-qual");

fn kiln_qual(root: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(root)
        .output()
        .unwrap()
}

/// One case running `./<script>`, with the given result protocol.
fn workload(id: &str, script: &str, producer: &str, metrics: &[&str]) -> Value {
    json!({
        "schema_version": 1,
        "workload_id": id,
        "kind": "environment",
        "description": "A triage fixture.",
        "determinism": {
            "seed": null, "seed_delivery": "not_applicable", "repetitions": 1,
            "case_order": "declared", "max_parallel_cases": 1, "network_access": "forbidden"
        },
        "variables": [],
        "comparison_policy": null,
        "variants": [{
            "id": "cpu", "description": "Host CPU.", "backend": "cpu",
            "device_requirement": "none", "skip_policy": "fail", "effective_config": {},
            "cases": [{
                "id": "probe-case", "description": "The fixture's one case.", "required": true,
                "command": [format!("./{script}")], "working_directory": ".", "environment": {},
                "timeout_seconds": 30, "expected_exit_codes": [0], "output_assertions": [],
                "result_protocol": {
                    "format": "qualification-case-result-v1", "producer": producer,
                    "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
                    "declared_metrics": metrics
                }
            }]
        }]
    })
}

/// A committed repository holding `workload` and the executable `script` with `body`.
fn repo(workload: &Value, script: &str, body: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let id = workload["workload_id"].as_str().unwrap();
    std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
    std::fs::write(
        root.join(format!("qualification/workloads/{id}.json")),
        serde_json::to_string_pretty(workload).unwrap(),
    )
    .unwrap();
    std::fs::write(root.join(script), body).unwrap();
    std::fs::set_permissions(root.join(script), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(root.join(".gitignore"), ".qualification/\n").unwrap();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "fixture"]);
    d
}

/// Runs the fixture's workload; returns the receipt path (relative to the root).
fn run(root: &Path, id: &str, expect: i32) -> String {
    let out = ".qualification/receipts/r.json";
    let o = kiln_qual(
        root,
        &[
            "run",
            &format!("qualification/workloads/{id}.json"),
            "--variant",
            "cpu",
            "--host-id",
            "triage-host",
            "--output",
            out,
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(expect),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.into()
}

fn triage_json(root: &Path, target: &str) -> Value {
    let o = kiln_qual(root, &["triage", "--json", target]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "kiln-qual.triage.v1");
    v
}

fn run_dir(root: &Path) -> String {
    let runs = root.join(".qualification/runs");
    let e = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap();
    format!(".qualification/runs/{}", e.file_name().to_string_lossy())
}

#[test]
fn a_case_that_exits_1_is_an_execution_failure_shown_by_its_stderr_line() {
    let w = workload("exits-v1", "fail.sh", "runner", &["case_pass", "exit_code"]);
    let d = repo(
        &w,
        "fail.sh",
        "#!/bin/sh\necho starting\necho 'cannot open device 0' >&2\nexit 1\n",
    );
    let receipt = run(d.path(), "exits-v1", 1);
    let v = triage_json(d.path(), &receipt);
    let first = &v["failures"][0];
    assert_eq!(first["stage"], "execution", "{v:#}");
    assert_eq!(first["case_id"], "probe-case");
    assert_eq!(first["message"], "exit code 1 not in [0]");
    let dir = run_dir(d.path());
    assert_eq!(
        first["evidence"]["path"],
        format!("{dir}/cases/001-probe-case-r001/stderr.log")
    );
    assert_eq!(first["evidence"]["line"], 1);
    assert_eq!(first["evidence"]["text"], "cannot open device 0");
    // No later stage invents a failure the evidence does not hold.
    assert_eq!(v["failures"].as_array().unwrap().len(), 1, "{v:#}");
    // The run directory alone leads to the same receipt and the same first failure.
    let by_dir = triage_json(d.path(), &dir);
    assert_eq!(by_dir["receipt"], receipt);
    assert_eq!(by_dir["failures"][0], *first);
    // The text names the stage and the file:line.
    let o = kiln_qual(d.path(), &["triage", &receipt]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("first failure: execution (case probe-case, repetition 1)"),
        "{text}"
    );
    assert!(
        text.contains("cases/001-probe-case-r001/stderr.log:1  cannot open device 0"),
        "{text}"
    );
    assert!(text.contains("  correctness gates  ok"), "{text}");
}

#[test]
fn a_failed_metric_gate_is_a_correctness_failure_shown_by_the_command_result() {
    let w = workload("gate-v1", "gate.sh", "command", &["output_mismatch_count"]);
    let script = r#"#!/bin/sh
cat > "$KILN_QUALIFICATION_CASE_RESULT" <<'EOF'
{"schema_version": 1, "case_id": "probe-case", "status": "failed", "duration_seconds": 0.01,
 "effective_config": {}, "tolerances": [],
 "metrics": [{"name": "output_mismatch_count", "value": 1, "unit": "count",
              "aggregation": "exact", "lower_is_better": true}],
 "details": "output_mismatch_count=1, expected 0"}
EOF
"#;
    let d = repo(&w, "gate.sh", script);
    let receipt = run(d.path(), "gate-v1", 1);
    let v = triage_json(d.path(), &receipt);
    let first = &v["failures"][0];
    assert_eq!(first["stage"], "correctness_gates", "{v:#}");
    assert_eq!(
        first["message"],
        "the case reported failed: output_mismatch_count=1, expected 0"
    );
    assert_eq!(
        first["evidence"]["path"],
        format!(
            "{}/cases/001-probe-case-r001/command-result.json",
            run_dir(d.path())
        )
    );
    assert_eq!(first["evidence"]["pointer"], "/status");
    assert_eq!(v["failures"].as_array().unwrap().len(), 1, "{v:#}");
}

#[test]
fn a_command_that_writes_no_result_is_a_structured_result_failure() {
    let w = workload(
        "silent-v1",
        "silent.sh",
        "command",
        &["output_mismatch_count"],
    );
    let d = repo(&w, "silent.sh", "#!/bin/sh\nexit 0\n");
    let receipt = run(d.path(), "silent-v1", 1);
    let v = triage_json(d.path(), &receipt);
    let first = &v["failures"][0];
    assert_eq!(first["stage"], "structured_result", "{v:#}");
    assert_eq!(
        first["evidence"]["path"],
        format!("{}/run-config.json", run_dir(d.path()))
    );
    assert_eq!(first["evidence"]["pointer"], "/cases/0/case_result_path");
}

#[test]
fn a_receipt_whose_commit_was_rewritten_away_fails_preflight_at_its_commit() {
    let w = workload("passes-v1", "ok.sh", "runner", &["case_pass", "exit_code"]);
    let d = repo(&w, "ok.sh", "#!/bin/sh\necho fine\n");
    let root = d.path();
    let receipt = run(root, "passes-v1", 0);
    // Nothing failed yet.
    let o = kiln_qual(root, &["triage", &receipt]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // History rewritten: the recorded commit no longer exists, so the committed workload the
    // receipt binds cannot be shown.
    git(root, &["commit", "-q", "--amend", "-m", "rewritten"]);
    git(root, &["reflog", "expire", "--expire=now", "--all"]);
    git(root, &["gc", "-q", "--prune=now"]);
    let v = triage_json(root, &receipt);
    let first = &v["failures"][0];
    assert_eq!(first["stage"], "preflight", "{v:#}");
    assert_eq!(first["evidence"]["path"], receipt);
    assert_eq!(first["evidence"]["pointer"], "/source/git_commit");
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("qualification/workloads/passes-v1.json"),
        "{v:#}"
    );
}

#[test]
fn a_run_directory_without_a_receipt_and_an_unreadable_receipt_are_reported() {
    let d = tempfile::tempdir().unwrap();
    let dir = d
        .path()
        .join(".qualification/runs/20260101t000000000000z-cpu-h-x-0000000000-v1");
    std::fs::create_dir_all(&dir).unwrap();
    let v = triage_json(d.path(), dir.to_str().unwrap());
    let stages: Vec<&str> = v["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["final_integrity", "final_integrity"], "{v:#}");
    assert!(v["receipt"].is_null());
    let o = kiln_qual(d.path(), &["triage", "missing.json"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(
            "kiln-qual: failed to triage missing.json: no such receipt or run directory"
        ),
        "{err}"
    );
    // A file that is not a receipt is refused by the receipt reader, naming it.
    std::fs::write(d.path().join("notes.json"), "[1, 2]").unwrap();
    let o = kiln_qual(d.path(), &["triage", "notes.json"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("kiln-qual: failed to triage notes.json: the receipt cannot be read"),
        "{err}"
    );
}

#[test]
fn a_failed_output_assertion_is_a_correctness_failure_shown_by_its_log() {
    let mut w = workload(
        "asserts-v1",
        "say.sh",
        "runner",
        &["case_pass", "exit_code", "output_assertion_failures"],
    );
    w["variants"][0]["cases"][0]["output_assertions"] =
        json!([{"stream": "stdout", "match": "required", "pattern": "^ready$"}]);
    let d = repo(&w, "say.sh", "#!/bin/sh\necho 'not ready'\n");
    let receipt = run(d.path(), "asserts-v1", 1);
    let v = triage_json(d.path(), &receipt);
    let first = &v["failures"][0];
    assert_eq!(first["stage"], "correctness_gates", "{v:#}");
    assert_eq!(
        first["evidence"]["path"],
        format!("{}/cases/001-probe-case-r001/stdout.log", run_dir(d.path()))
    );
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .ends_with("(run-config.json#/cases/0/output_assertions/0)"),
        "{v:#}"
    );
    assert_eq!(v["failures"].as_array().unwrap().len(), 1, "{v:#}");
}

#[test]
fn a_backend_whose_device_probe_fails_is_an_environment_failure() {
    // Metal's probe tool (`system_profiler`) exists only on macOS.
    if Path::new("/usr/sbin/system_profiler").exists() {
        qual_test_fixtures::harness::skip("this host has system_profiler (macOS)");
        return;
    }
    let mut w = workload("metal-v1", "ok.sh", "runner", &["case_pass", "exit_code"]);
    w["variants"][0]["backend"] = json!("metal");
    w["variants"][0]["device_requirement"] = json!("required");
    let d = repo(&w, "ok.sh", "#!/bin/sh\necho fine\n");
    let receipt = run(d.path(), "metal-v1", 1);
    let v = triage_json(d.path(), &receipt);
    let first = &v["failures"][0];
    assert_eq!(first["stage"], "environment", "{v:#}");
    assert_eq!(
        first["evidence"]["path"],
        format!("{}/environment.json", run_dir(d.path()))
    );
    assert!(
        first["evidence"]["pointer"]
            .as_str()
            .unwrap()
            .starts_with("/probe_results/"),
        "{v:#}"
    );
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("metal-device-probe"),
        "{v:#}"
    );
    // Every case failed of the infrastructure failure: no gate is invented for them.
    assert!(
        v["failures"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["stage"] != "correctness_gates"),
        "{v:#}"
    );
}
