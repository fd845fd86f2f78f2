//! `kiln-qual receipt check|show` and `kiln-qual compare` as a user sees them (snapshots with
//! temporary paths and digests redacted), and the strict checks on receipts written by our own
//! runner, each failing after the matching tampering.

use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::Path;

const RECEIPT: &str = r#"{
  "schema_version": 1,
  "receipt_id": "cli-environment-receipt-v1",
  "created_at_utc": "2026-07-28T22:25:40.500Z",
  "source": {"tree_hash_format": "kiln-source-tree-v1",
    "tree_hash": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
    "git_commit": "0123456789abcdef0123456789abcdef01234567", "git_worktree_clean": true},
  "qualification": {"kind": "environment", "backend": "rocm", "profile": "local-environment-v1",
    "verdict": "passed", "started_at_utc": "2026-07-28T22:25:35.119Z",
    "finished_at_utc": "2026-07-28T22:25:39.900Z", "duration_seconds": 4.781,
    "command": ["kiln-qual", "run", "qualification/workloads/local-environment-v1.json"]},
  "environment": {"host_id": "test-host",
    "os": {"name": "Linux", "version": "24.04", "kernel": "6.8.0", "architecture": "x86_64"},
    "device": {"name": "Test GPU", "architecture": "gfx1151", "memory_bytes": 1073741824,
      "unified_memory": true, "driver": "6.1.0"},
    "runtime": {"backend": "rocm", "rocm": "6.1.0"}, "compiler": {"rustc": "1.85.0"}},
  "model": null, "workload": null, "effective_config": {},
  "results": [{"id": "device-probe", "required": true, "status": "passed", "duration_seconds": 4.5,
    "details": null, "metrics": [
      {"name": "case_pass", "value": 1, "unit": "bool", "aggregation": "exact", "lower_is_better": false},
      {"name": "exit_code", "value": 0, "unit": "code", "aggregation": "exact", "lower_is_better": false},
      {"name": "output_assertion_failures", "value": 0, "unit": "count", "aggregation": "sum", "lower_is_better": true}]}],
  "metrics": [], "artifacts": [], "unsupported": [], "notes": []
}"#;

fn receipt() -> Value {
    serde_json::from_str(RECEIPT).unwrap()
}

fn write(dir: &Path, name: &str, v: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(v).unwrap() + "\n").unwrap();
    name.to_owned()
}

fn kiln(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("kiln-qual")
        .unwrap()
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn snapshot(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(r"sha256:[0-9a-f]{64}", "sha256:[digest]");
    settings.add_filter(r"/tmp/[^\s/]+", "[tmp]");
    settings.bind(|| insta::assert_snapshot!(name, text));
}

fn invalid_receipt() -> Value {
    let mut r = receipt();
    r["qualification"]["verdict"] = json!("failed");
    r["results"][0]["metrics"][0]["value"] = json!("1");
    r["environment"]["device"]["surprise"] = json!(true);
    r
}

#[test]
fn check_text_and_exit_codes() {
    let d = tempfile::tempdir().unwrap();
    let ok = write(d.path(), "ok.json", &receipt());
    let bad = write(d.path(), "bad.json", &invalid_receipt());
    std::fs::write(d.path().join("dup.json"), r#"{"a": 1, "a": 2}"#).unwrap();

    let (code, out, err) = kiln(d.path(), &["receipt", "check", &ok]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "OK ok.json\n", ""));

    let (code, out, err) = kiln(d.path(), &["receipt", "check", &ok, &bad, "dup.json"]);
    assert_eq!(code, 1);
    snapshot("check_text", &format!("stdout:\n{out}stderr:\n{err}"));

    let (code, _, err) = kiln(d.path(), &["receipt", "check"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = kiln(d.path(), &["receipt", "check", "--no-such-flag", &ok]);
    assert_eq!(code, 2);
}

#[test]
fn check_json_is_stable() {
    let d = tempfile::tempdir().unwrap();
    let ok = write(d.path(), "ok.json", &receipt());
    let bad = write(d.path(), "bad.json", &invalid_receipt());
    let (code, out, err) = kiln(d.path(), &["receipt", "check", "--json", &ok, &bad]);
    assert_eq!(code, 1);
    assert_eq!(err, "");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["receipts"][0]["ok"], json!(true));
    snapshot("check_json", &out);
}

/// Bytes a terminal would act on, other than the tool's own line ends.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c != '\n' && qual_json::escape::needs_escape(c))
        .collect()
}

#[test]
fn untrusted_receipt_text_cannot_spoof_the_terminal() {
    let d = tempfile::tempdir().unwrap();
    let evil = "x\nOK fake.json\r\u{1b}[2Kverdict: passed \u{1b}]8;;http://e.example\u{7}link\u{1b}]8;;\u{7}\u{9b}31m\u{7f}\u{202e}";
    let mut failed = receipt();
    failed["qualification"]["verdict"] = json!("failed");
    failed["results"][0]["status"] = json!("failed");
    // (A failed result's runner-owned `case_pass` is 0: `receipt show` refuses a receipt
    // that contradicts itself.)
    failed["results"][0]["metrics"][0]["value"] = json!(0);
    failed["results"][0]["details"] = json!(evil);
    failed["environment"]["device"]["name"] = json!(evil);
    failed["environment"]["os"]["name"] = json!(evil);
    let f = write(d.path(), "failed.json", &failed);
    let (code, out, err) = kiln(d.path(), &["receipt", "show", &f]);
    assert_eq!(code, 0, "{err}");
    assert!(raw_controls(&out).is_empty(), "{out:?}");
    assert!(
        !out.lines()
            .any(|l| l.starts_with("OK ") || l.starts_with("verdict: passed")),
        "{out}"
    );
    assert!(
        out.contains("x\\x0aOK fake.json\\x0d\\x1b[2Kverdict"),
        "{out}"
    );

    // Key names and values of an invalid receipt reach the violation lines escaped.
    let mut bad = receipt();
    bad["environment"]["device"][evil] = json!(evil);
    let b = write(d.path(), "bad.json", &bad);
    let (code, out, err) = kiln(d.path(), &["receipt", "check", &b]);
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out}");
    assert!(raw_controls(&err).is_empty(), "{err:?}");
    assert!(!err.lines().any(|l| l.starts_with("OK ")), "{err}");
    let (code, out, _) = kiln(d.path(), &["receipt", "check", "--json", &b]);
    assert_eq!(code, 1);
    assert!(raw_controls(&out).is_empty(), "{out:?}");
    assert!(!out.contains('\u{9b}') && !out.contains('\u{7f}'));
}

#[test]
fn show_summarises_and_states_the_evidence_scope() {
    let d = tempfile::tempdir().unwrap();
    let ok = write(d.path(), "ok.json", &receipt());
    let (code, out, _) = kiln(d.path(), &["receipt", "show", &ok]);
    assert_eq!(code, 0);
    assert!(out.contains("It does not establish:"));
    snapshot("show_passed", &out);

    let mut failed = receipt();
    failed["qualification"]["verdict"] = json!("failed");
    failed["results"][0]["status"] = json!("failed");
    failed["results"][0]["metrics"][0]["value"] = json!(0);
    failed["results"][0]["details"] = json!("exit code 3 not in [0]");
    let f = write(d.path(), "failed.json", &failed);
    let (code, out, _) = kiln(d.path(), &["receipt", "show", &f]);
    assert_eq!(code, 0);
    assert!(out.contains("FAILED") && out.contains("never average failed rows"));
    assert!(
        out.contains("device-probe failed: exit code 3 not in [0]"),
        "{out}"
    );

    let bad = write(d.path(), "bad.json", &invalid_receipt());
    let (code, out, err) = kiln(d.path(), &["receipt", "show", &bad]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("the receipt is invalid"), "{err}");
}

#[test]
fn compare_prints_a_table_or_every_refusal() {
    let d = tempfile::tempdir().unwrap();
    let a = write(d.path(), "a.json", &receipt());
    let (code, out, err) = kiln(d.path(), &["compare", &a, &a]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        "PASSED cli-environment-receipt-v1 -> cli-environment-receipt-v1 (strict_no_workload)\n"
    );

    let mut other = receipt();
    other["receipt_id"] = json!("cli-environment-receipt-v2");
    other["environment"]["runtime"]["rocm"] = json!("6.2.0");
    other["environment"]["device"]["driver"] = json!("6.2.0");
    let b = write(d.path(), "b.json", &other);
    let (code, out, err) = kiln(d.path(), &["compare", &a, &b]);
    assert_eq!(code, 1);
    snapshot(
        "compare_rejected_text",
        &format!("stdout:\n{out}stderr:\n{err}"),
    );

    let (code, out, _) = kiln(d.path(), &["compare", "--json", &a, &b]);
    assert_eq!(code, 1);
    snapshot("compare_rejected_json", &out);

    // A workload receipt cannot be compared without its manifest.
    let mut with_workload = receipt();
    with_workload["qualification"]["kind"] = json!("correctness");
    with_workload["workload"] = json!({"id": "w", "sha256": format!("sha256:{}", "2".repeat(64)), "seed": 1, "parameters": {"variant_id": "rocm"}});
    let w = write(d.path(), "w.json", &with_workload);
    let (code, out, _) = kiln(d.path(), &["compare", "--json", &w, &w]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], json!(false));
    assert!(v["error"]
        .as_str()
        .unwrap()
        .contains("--workload-manifest is required"));
    let (_, _, help) = kiln(d.path(), &["compare", "--help"]);
    assert!(!help.contains("--force"));
}

const PERF_WORKLOAD: &str = r#"{
  "schema_version": 1,
  "workload_id": "perf-ab-v1",
  "kind": "performance",
  "description": "Declared A/B of the scheduler batch size.",
  "determinism": {"seed": 7, "seed_delivery": "argv", "repetitions": 1, "case_order": "declared",
    "max_parallel_cases": 1, "network_access": "forbidden"},
  "variables": [],
  "variants": [
    {"id": "batch-1", "description": "batch 1", "backend": "cpu", "device_requirement": "none",
     "skip_policy": "fail", "effective_config": {"scheduler": {"max_batch": 1}},
     "cases": [{"id": "main-case", "description": "measured", "required": true,
       "command": ["bench-driver", "--seed", "${seed}", "--model", "${model_path}"],
       "working_directory": ".", "environment": {}, "timeout_seconds": 60,
       "expected_exit_codes": [0], "output_assertions": [],
       "result_protocol": {"format": "qualification-case-result-v1", "producer": "command",
         "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
         "declared_metrics": ["latency_p50_ms", "throughput_tps"]}}]},
    {"id": "batch-2", "description": "batch 2", "backend": "cpu", "device_requirement": "none",
     "skip_policy": "fail", "effective_config": {"scheduler": {"max_batch": 2}},
     "cases": [{"id": "main-case", "description": "measured", "required": true,
       "command": ["bench-driver", "--seed", "${seed}", "--model", "${model_path}"],
       "working_directory": ".", "environment": {}, "timeout_seconds": 60,
       "expected_exit_codes": [0], "output_assertions": [],
       "result_protocol": {"format": "qualification-case-result-v1", "producer": "command",
         "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
         "declared_metrics": ["latency_p50_ms", "throughput_tps"]}}]}
  ],
  "comparison_policy": {"mode": "declared_ab_variants",
    "variant_pairs": [{"baseline_variant_id": "batch-1", "candidate_variant_id": "batch-2",
      "allowed_effective_config_differences": ["scheduler.max_batch"]}],
    "backend_pairs": [],
    "metric_rules": [
      {"scope": "result", "result_id": "main-case", "metric": "throughput_tps", "metric_class": "performance",
       "unit": "tok/s", "aggregation": "mean", "lower_is_better": false, "operator": "not_less",
       "absolute_tolerance": 0, "relative_tolerance": 0.05, "required": true},
      {"scope": "result", "result_id": "main-case", "metric": "latency_p50_ms", "metric_class": "performance",
       "unit": "ms", "aggregation": "p50", "lower_is_better": true, "operator": "not_greater",
       "absolute_tolerance": 1.5, "relative_tolerance": 0, "required": false}
    ]}
}
"#;

fn perf_receipt(id: &str, sha: &str, variant: &str, batch: i64, tps: f64, p50: f64) -> Value {
    let mut r = receipt();
    r["receipt_id"] = json!(id);
    r["qualification"]["kind"] = json!("performance");
    r["qualification"]["backend"] = json!("cpu");
    r["qualification"]["profile"] = json!("perf-ab-v1");
    let h = format!("sha256:{}", "4".repeat(64));
    r["model"] = json!({"id": "tiny", "path": "/models/tiny", "config_hash": h, "tokenizer_hash": h,
        "chat_template_hash": null, "weight_files": [{"path": "model.safetensors", "sha256": h, "bytes": 104}]});
    r["workload"] = json!({"id": "perf-ab-v1", "sha256": sha, "seed": 7, "parameters": {"variant_id": variant}});
    r["effective_config"] = json!({"scheduler": {"max_batch": batch}});
    r["results"] = json!([{"id": "main-case", "required": true, "status": "passed", "duration_seconds": 4.5,
        "details": null, "metrics": [
          {"name": "latency_p50_ms", "value": p50, "unit": "ms", "aggregation": "p50", "lower_is_better": true},
          {"name": "throughput_tps", "value": tps, "unit": "tok/s", "aggregation": "mean", "lower_is_better": false}]}]);
    r
}

#[test]
fn compare_with_a_manifest_prints_the_metric_table() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    git(root, &["init", "-q"]);
    std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
    std::fs::write(
        root.join("qualification/workloads/perf-ab-v1.json"),
        PERF_WORKLOAD,
    )
    .unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "workload"]);
    let sha = qual_json::sha256_prefixed(PERF_WORKLOAD.as_bytes());
    let a = write(
        root,
        "a.json",
        &perf_receipt("ab-1", &sha, "batch-1", 1, 100.0, 20.0),
    );
    let b = write(
        root,
        "b.json",
        &perf_receipt("ab-2", &sha, "batch-2", 2, 96.0, 22.0),
    );
    let m = "qualification/workloads/perf-ab-v1.json";
    let (code, out, err) = kiln(root, &["compare", &a, &b, "--workload-manifest", m]);
    assert_eq!(code, 0, "{out}{err}");
    snapshot("compare_ab_table", &format!("stdout:\n{out}stderr:\n{err}"));

    // Below the 5 % tolerance: the required rule fails and the exit code says so.
    let c = write(
        root,
        "c.json",
        &perf_receipt("ab-3", &sha, "batch-2", 2, 90.0, 25.0),
    );
    let (code, out, err) = kiln(root, &["compare", &a, &c, "--workload-manifest", m]);
    assert_eq!(code, 1);
    snapshot(
        "compare_ab_failed",
        &format!("stdout:\n{out}stderr:\n{err}"),
    );

    // The reverse direction is not a declared pair.
    let (code, _, err) = kiln(root, &["compare", &b, &a, "--workload-manifest", m]);
    assert_eq!(code, 1);
    assert!(err.contains("directional A/B variant pair"), "{err}");

    // `report` renders the comparator's JSON side by side: every rule, the values, the rule
    // and tolerance that decided it, the status — as the comparison said, never re-judged.
    let (_, cmp, _) = kiln(
        root,
        &["compare", "--json", &a, &c, "--workload-manifest", m],
    );
    let cmp_path = root.join("cmp.json");
    std::fs::write(&cmp_path, &cmp).unwrap();
    let cmp_v: Value = serde_json::from_str(&cmp).unwrap();
    let evals = cmp_v["metric_evaluations"].as_array().unwrap();
    assert!(!evals.is_empty());
    let (code, md, err) = kiln(
        root,
        &["report", &a, &c, cmp_path.to_str().unwrap(), "--markdown"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(md.contains("### Comparisons"), "{md}");
    for e in evals {
        let scope = e["scope"].as_str().unwrap().replace('_', "\\_");
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {scope} |")))
            .unwrap_or_else(|| panic!("no row for {scope}: {md}"));
        assert!(row.contains(e["status"].as_str().unwrap()), "{row}");
        assert!(
            row.contains(e["operator"].as_str().unwrap().replace('_', "\\_").as_str()),
            "{row}"
        );
    }
    assert!(md.contains("not ok"), "{md}");
    let html = root.join("r.html");
    let (code, _, err) = kiln(
        root,
        &[
            "report",
            &a,
            &c,
            cmp_path.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("id=\"comparisons\""), "{page}");
    // A comparison document with a member the comparator never writes is refused.
    let mut bad = cmp_v.clone();
    bad["surprise"] = json!(1);
    let bad_path = root.join("bad-cmp.json");
    std::fs::write(&bad_path, bad.to_string()).unwrap();
    let (code, _, err) = kiln(root, &["report", bad_path.to_str().unwrap(), "--markdown"]);
    assert_eq!(code, 1, "{err}");
}

// ---- receipts written by our runner -------------------------------------------------------

fn git(root: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const ENV_WORKLOAD: &str = r#"{
  "schema_version": 1,
  "workload_id": "strict-env-v1",
  "kind": "environment",
  "description": "Kernel identity, for strict receipt checks.",
  "determinism": {"seed": null, "seed_delivery": "not_applicable", "repetitions": 1,
    "case_order": "declared", "max_parallel_cases": 1, "network_access": "forbidden"},
  "variables": [],
  "variants": [{"id": "cpu", "description": "Host CPU.", "backend": "cpu",
    "device_requirement": "none", "skip_policy": "fail", "effective_config": {},
    "cases": [{"id": "kernel-identity", "description": "uname", "required": true,
      "command": ["uname", "-s"], "working_directory": ".", "environment": {},
      "timeout_seconds": 30, "expected_exit_codes": [0], "output_assertions": [],
      "result_protocol": {"format": "qualification-case-result-v1", "producer": "runner",
        "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
        "declared_metrics": ["case_pass", "exit_code", "output_assertion_failures"]}}]}],
  "comparison_policy": null
}
"#;

/// A repository with one committed environment workload, run once by `kiln-qual run`.
fn runner_repo(output: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    git(root, &["init", "-q"]);
    std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("qualification/workloads/strict-env-v1.json"),
        ENV_WORKLOAD,
    )
    .unwrap();
    std::fs::write(root.join("src/lib.rs"), "pub fn answer() -> u32 { 42 }\n").unwrap();
    std::fs::write(root.join(".gitignore"), ".qualification/\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "source"]);
    let (code, out, err) = kiln(
        root,
        &[
            "run",
            "qualification/workloads/strict-env-v1.json",
            "--variant",
            "cpu",
            "--host-id",
            "strict-host",
            "--output",
            output,
        ],
    );
    assert_eq!(code, 0, "run failed:\n{out}\n{err}");
    assert!(root.join(output).is_file());
    d
}

const STRICT: [&str; 3] = [
    "--require-current-source",
    "--require-local-artifacts",
    "--require-known-commit",
];

fn strict_check(root: &Path, receipt: &str) -> (i32, String) {
    let mut args = vec!["receipt", "check", "--root", "."];
    args.extend(STRICT);
    args.push(receipt);
    let (code, out, err) = kiln(root, &args);
    (code, format!("{out}{err}"))
}

#[test]
fn runner_receipts_pass_every_strict_check_right_after_a_run() {
    let out = ".qualification/receipts/env.json";
    let d = runner_repo(out);
    let (code, text) = strict_check(d.path(), out);
    assert_eq!(code, 0, "{text}");
    assert_eq!(text, format!("OK {out}\n"));
}

#[test]
fn an_edited_source_file_fails_require_current_source() {
    let out = ".qualification/receipts/env.json";
    let d = runner_repo(out);
    std::fs::write(
        d.path().join("src/lib.rs"),
        "pub fn answer() -> u32 { 43 }\n",
    )
    .unwrap();
    let (code, text) = strict_check(d.path(), out);
    assert_eq!(code, 1);
    assert!(
        text.contains("receipt.source.tree_hash: is sha256:"),
        "{text}"
    );
    assert!(text.contains("current source tree is sha256:"), "{text}");
    // Only that check fails, and basic mode still accepts the receipt.
    assert_eq!(text.matches("\n  ").count(), 1, "{text}");
    assert_eq!(kiln(d.path(), &["receipt", "check", out]).0, 0);
}

#[test]
fn a_deleted_or_altered_artifact_fails_require_local_artifacts() {
    let out = ".qualification/receipts/env.json";
    let d = runner_repo(out);
    let receipt: Value =
        serde_json::from_slice(&std::fs::read(d.path().join(out)).unwrap()).unwrap();
    let artifacts = receipt["artifacts"].as_array().unwrap();
    assert!(!artifacts.is_empty());
    let local: Vec<&str> = artifacts
        .iter()
        .filter(|a| a["location"] == "local_ignored")
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    let first = d.path().join(local[0]);
    let original = std::fs::read(&first).unwrap();

    std::fs::write(&first, [original.as_slice(), b"tampered"].concat()).unwrap();
    let (code, text) = strict_check(d.path(), out);
    assert_eq!(code, 1);
    assert!(
        text.contains("sha256: does not match local artifact"),
        "{text}"
    );
    assert!(
        text.contains("bytes: does not match local artifact"),
        "{text}"
    );

    // Same length, different bytes: only the digest differs.
    let mut flipped = original.clone();
    flipped[0] ^= 0x01;
    std::fs::write(&first, &flipped).unwrap();
    let (code, text) = strict_check(d.path(), out);
    assert_eq!(code, 1);
    assert!(
        text.contains("sha256: does not match local artifact"),
        "{text}"
    );
    assert!(!text.contains("bytes: does not match"), "{text}");

    std::fs::remove_file(&first).unwrap();
    let (code, text) = strict_check(d.path(), out);
    assert_eq!(code, 1);
    assert!(
        text.contains("must exist under .qualification for local validation"),
        "{text}"
    );
}

#[test]
fn an_unknown_commit_fails_require_known_commit() {
    let out = ".qualification/receipts/env.json";
    let d = runner_repo(out);
    let path = d.path().join(out);
    let text = std::fs::read_to_string(&path).unwrap();
    let receipt: Value = serde_json::from_str(&text).unwrap();
    let commit = receipt["source"]["git_commit"].as_str().unwrap().to_owned();
    let unknown = "f".repeat(40);
    assert_ne!(commit, unknown);
    std::fs::write(&path, text.replace(&commit, &unknown)).unwrap();
    let (code, text) = strict_check(d.path(), out);
    assert_eq!(code, 1);
    assert!(
        text.contains(&format!(
            "receipt.source.git_commit: does not exist locally: {unknown}"
        )),
        "{text}"
    );
    assert_eq!(text.matches("\n  ").count(), 1, "{text}");
}

#[test]
fn two_runner_receipts_of_one_environment_workload_compare_strictly() {
    let d = runner_repo(".qualification/receipts/first.json");
    let (code, out, err) = kiln(
        d.path(),
        &[
            "run",
            "qualification/workloads/strict-env-v1.json",
            "--variant",
            "cpu",
            "--host-id",
            "strict-host",
            "--output",
            ".qualification/receipts/second.json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = kiln(
        d.path(),
        &[
            "compare",
            ".qualification/receipts/first.json",
            ".qualification/receipts/second.json",
            "--workload-manifest",
            "qualification/workloads/strict-env-v1.json",
            "--json",
        ],
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    assert_eq!(v["mode"], json!("strict_environment_workload"), "{out}");
    assert_eq!(
        v["workload_manifest"]["path"],
        json!("qualification/workloads/strict-env-v1.json")
    );
    // The runner records the device's momentary available memory; that observation is listed,
    // not treated as an identity difference, so two runs on one host compare.
    assert_eq!(v["ok"], json!(true), "{out}");
    assert_eq!(code, 0);
    for d in v["compatibility"]["allowed_differences"]
        .as_array()
        .unwrap()
    {
        assert_eq!(d["compatibility"], json!("environment_observation"), "{d}");
    }
}

// ---- a declared A/B pair qualified by our runner -------------------------------------------

/// The command of the A/B workload's case: this test binary, re-entered through libtest as
/// the ignored test below, which writes a `qualification-case-result-v1` document echoing the
/// variant's configuration and reporting the throughput given in its case environment.
#[test]
#[ignore = "driver side of runner_receipts_of_a_declared_ab_pair_compare"]
fn ab_case_driver() {
    let Ok(path) = std::env::var("KILN_QUALIFICATION_CASE_RESULT") else {
        return;
    };
    let batch: i64 = std::env::var("DRIVER_MAX_BATCH").unwrap().parse().unwrap();
    let tps: f64 = std::env::var("DRIVER_THROUGHPUT").unwrap().parse().unwrap();
    let result = json!({
        "schema_version": 1, "case_id": "main-case", "status": "passed", "duration_seconds": 0.01,
        "effective_config": {"scheduler": {"max_batch": batch}},
        "metrics": [{"name": "throughput_tps", "value": tps, "unit": "tok/s",
                     "aggregation": "mean", "lower_is_better": false}],
        "tolerances": [], "details": null
    });
    std::fs::write(path, serde_json::to_vec(&result).unwrap()).unwrap();
}

fn ab_variant(id: &str, batch: i64, tps: &str) -> Value {
    json!({"id": id, "description": "scheduler batch", "backend": "cpu", "device_requirement": "none",
        "skip_policy": "fail", "effective_config": {"scheduler": {"max_batch": batch}},
        "cases": [{"id": "main-case", "description": "measured", "required": true,
            "command": ["target/driver", "cli_receipt::ab_case_driver", "--exact", "--ignored", "--quiet",
                        "${seed}", "${model_path}"],
            "working_directory": ".",
            "environment": {"DRIVER_MAX_BATCH": batch.to_string(), "DRIVER_THROUGHPUT": tps},
            "timeout_seconds": 60, "expected_exit_codes": [0], "output_assertions": [],
            "result_protocol": {"format": "qualification-case-result-v1", "producer": "command",
                "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
                "declared_metrics": ["throughput_tps"]}}]})
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn runner_receipts_of_a_declared_ab_pair_compare() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let workload = json!({
        "schema_version": 1, "workload_id": "runner-ab-v1", "kind": "performance",
        "description": "Declared A/B of the scheduler batch size, measured by a test driver.",
        "determinism": {"seed": 11, "seed_delivery": "argv", "repetitions": 1, "case_order": "declared",
            "max_parallel_cases": 1, "network_access": "forbidden"},
        "variables": [],
        "variants": [ab_variant("batch-1", 1, "100.0"), ab_variant("batch-2", 2, "104.0")],
        "comparison_policy": {"mode": "declared_ab_variants",
            "variant_pairs": [{"baseline_variant_id": "batch-1", "candidate_variant_id": "batch-2",
                "allowed_effective_config_differences": ["scheduler.max_batch"]}],
            "backend_pairs": [],
            "metric_rules": [{"scope": "result", "result_id": "main-case", "metric": "throughput_tps",
                "metric_class": "performance", "unit": "tok/s", "aggregation": "mean",
                "lower_is_better": false, "operator": "not_less", "absolute_tolerance": 0,
                "relative_tolerance": 0.02, "required": true}]}
    });
    git(root, &["init", "-q"]);
    std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
    std::fs::write(
        root.join("qualification/workloads/runner-ab-v1.json"),
        serde_json::to_string_pretty(&workload).unwrap() + "\n",
    )
    .unwrap();
    let fixtures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../qualification/fixtures/tiny-model");
    copy_dir(&fixtures, &root.join("qualification/fixtures/tiny-model"));
    std::fs::write(root.join(".gitignore"), ".qualification/\ntarget/\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "workload"]);
    std::fs::create_dir_all(root.join("target")).unwrap();
    std::fs::copy(std::env::current_exe().unwrap(), root.join("target/driver")).unwrap();

    for (variant, out) in [("batch-1", "a.json"), ("batch-2", "b.json")] {
        let output = format!(".qualification/receipts/{out}");
        let (code, o, e) = kiln(
            root,
            &[
                "run",
                "qualification/workloads/runner-ab-v1.json",
                "--variant",
                variant,
                "--host-id",
                "ab-host",
                "--model",
                "qualification/fixtures/tiny-model",
                "--output",
                &output,
            ],
        );
        assert_eq!(code, 0, "run {variant}:\n{o}\n{e}");
        let (code, text) = strict_check(root, &output);
        assert_eq!(code, 0, "{text}");
    }
    let m = "qualification/workloads/runner-ab-v1.json";
    let (code, out, err) = kiln(
        root,
        &[
            "compare",
            ".qualification/receipts/a.json",
            ".qualification/receipts/b.json",
            "--workload-manifest",
            m,
            "--json",
        ],
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}"));
    assert_eq!(code, 0, "{out}");
    assert_eq!(v["mode"], json!("declared_ab_variants"));
    let allowed = v["compatibility"]["allowed_differences"]
        .as_array()
        .unwrap();
    assert_eq!(
        allowed[..2],
        [
            json!({"compatibility": "workload_variant", "baseline": "batch-1", "candidate": "batch-2"}),
            json!({"compatibility": "effective_config", "path": "scheduler.max_batch", "baseline": 1, "candidate": 2})
        ]
    );
    // Anything else allowed is a momentary observation (free memory), listed, never hidden.
    for d in &allowed[2..] {
        assert_eq!(d["compatibility"], json!("environment_observation"), "{d}");
    }
    let e = &v["metric_evaluations"][0];
    assert_eq!(e["status"], json!("passed"));
    assert_eq!(e["absolute_change"], json!(4.0));

    // The reverse direction is not declared: refused before any delta.
    let (code, out, _) = kiln(
        root,
        &[
            "compare",
            ".qualification/receipts/b.json",
            ".qualification/receipts/a.json",
            "--workload-manifest",
            m,
            "--json",
        ],
    );
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["compatible"], json!(false));
    assert_eq!(v["metric_deltas"], json!([]));
}
