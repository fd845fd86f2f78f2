//! The comparator: every comparison mode and every refusal class, on hand-written receipts
//! bound to small workloads committed in throw-away git repositories.

use crate::common;

use qual_receipt::compare::{
    self, CompareError, ComparisonReport, LoadedManifest, LoadedReceipt, Mode,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const H1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const H4: &str = "sha256:4444444444444444444444444444444444444444444444444444444444444444";

fn git(root: &Path, args: &[&str]) {
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
}

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    /// A repository with the given workloads committed under qualification/workloads/.
    fn new(workloads: &[(&str, &Value)]) -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
        for (name, w) in workloads {
            let text = serde_json::to_string_pretty(w).unwrap() + "\n";
            std::fs::write(root.join("qualification/workloads").join(name), text).unwrap();
        }
        git(root, &["add", "-A"]);
        git(root, &["commit", "-q", "-m", "workloads"]);
        Repo { dir }
    }
    fn root(&self) -> &Path {
        self.dir.path()
    }
    fn path(&self, name: &str) -> PathBuf {
        self.root().join("qualification/workloads").join(name)
    }
    fn manifest(&self, name: &str) -> LoadedManifest {
        compare::load_committed_manifest(&self.path(name), self.root()).expect("manifest loads")
    }
    fn sha(&self, name: &str) -> String {
        qual_json::sha256_prefixed(&std::fs::read(self.path(name)).unwrap())
    }
}

fn command_case(id: &str, metrics: &[&str], model: bool) -> Value {
    let mut command = vec![json!("bench-driver"), json!("--seed"), json!("${seed}")];
    if model {
        command.extend([json!("--model"), json!("${model_path}")]);
    }
    command.extend([json!("--prompts"), json!("${prompt_file}")]);
    json!({
        "id": id, "description": "measured case", "required": true, "command": command,
        "working_directory": ".", "environment": {}, "timeout_seconds": 60,
        "expected_exit_codes": [0], "output_assertions": [],
        "result_protocol": {"format": "qualification-case-result-v1", "producer": "command",
            "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT", "declared_metrics": metrics}
    })
}

fn runner_case(id: &str) -> Value {
    json!({
        "id": id, "description": "runner case", "required": true, "command": ["probe-device"],
        "working_directory": ".", "environment": {}, "timeout_seconds": 60,
        "expected_exit_codes": [0], "output_assertions": [],
        "result_protocol": {"format": "qualification-case-result-v1", "producer": "runner",
            "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
            "declared_metrics": ["case_pass", "exit_code", "output_assertion_failures"]}
    })
}

fn perf_variant(id: &str, max_batch: i64) -> Value {
    json!({"id": id, "description": "variant", "backend": "cpu", "device_requirement": "none",
           "skip_policy": "fail", "effective_config": {"scheduler": {"max_batch": max_batch}},
           "cases": [command_case("main-case", &["throughput_tps"], true)]})
}

fn throughput_rule(operator: &str, lower_is_better: bool, abs: Value, rel: Value) -> Value {
    json!({"scope": "result", "result_id": "main-case", "metric": "throughput_tps",
           "metric_class": "performance", "unit": "tok/s", "aggregation": "mean",
           "lower_is_better": lower_is_better, "operator": operator,
           "absolute_tolerance": abs, "relative_tolerance": rel, "required": true})
}

fn prompt_variable() -> Value {
    json!([{"name": "prompt_file", "description": "prompt corpus", "type": "string", "required": true,
            "default": null, "constraints": {"allowed_values": [], "minimum": null, "maximum": null, "pattern": null}}])
}

fn perf_workload(id: &str, mode: &str, variants: Vec<Value>, pairs: Value, rule: Value) -> Value {
    json!({
        "schema_version": 1, "workload_id": id, "kind": "performance", "description": "perf",
        "determinism": {"seed": 7, "seed_delivery": "argv", "repetitions": 1, "case_order": "declared",
                        "max_parallel_cases": 1, "network_access": "forbidden"},
        "variables": prompt_variable(),
        "variants": variants,
        "comparison_policy": {"mode": mode, "variant_pairs": pairs, "backend_pairs": [], "metric_rules": [rule]}
    })
}

fn same_env_workload(rule: Value) -> Value {
    perf_workload(
        "perf-same-v1",
        "same_environment_performance",
        vec![perf_variant("cpu", 1)],
        json!([]),
        rule,
    )
}

fn ab_workload() -> Value {
    perf_workload(
        "perf-ab-v1",
        "declared_ab_variants",
        vec![perf_variant("baseline", 1), perf_variant("candidate", 2)],
        json!([{"baseline_variant_id": "baseline", "candidate_variant_id": "candidate",
                "allowed_effective_config_differences": ["scheduler.max_batch"]}]),
        throughput_rule("not_less", false, json!(0), json!(0.1)),
    )
}

fn cross_workload(mode: &str, rules: Value) -> Value {
    let variant = |id: &str| {
        json!({"id": id, "description": "variant", "backend": id, "device_requirement": "required",
               "skip_policy": "fail", "effective_config": {}, "cases": [runner_case("device-probe")]})
    };
    let pairs = if mode == "cross_backend_correctness" {
        json!([{"backend_a": "rocm", "variant_a_id": "rocm", "backend_b": "vulkan", "variant_b_id": "vulkan",
                "allowed_environment_differences": ["device.name", "runtime.rocm", "runtime.vulkan"]}])
    } else {
        json!([])
    };
    json!({
        "schema_version": 1, "workload_id": "core-v1", "kind": "correctness", "description": "core",
        "determinism": {"seed": 1, "seed_delivery": "fixed_fixture", "repetitions": 1, "case_order": "declared",
                        "max_parallel_cases": 1, "network_access": "forbidden"},
        "variables": [],
        "variants": [variant("rocm"), variant("vulkan")],
        "comparison_policy": {"mode": mode, "variant_pairs": [], "backend_pairs": pairs, "metric_rules": rules}
    })
}

fn case_pass_rule() -> Value {
    json!([{"scope": "result", "result_id": "device-probe", "metric": "case_pass", "metric_class": "correctness",
            "unit": "bool", "aggregation": "exact", "lower_is_better": false, "operator": "equal",
            "absolute_tolerance": 0, "relative_tolerance": 0, "required": true}])
}

fn model() -> Value {
    json!({"id": "tiny", "path": "/models/tiny", "config_hash": H4, "tokenizer_hash": H4,
           "chat_template_hash": null,
           "weight_files": [{"path": "model.safetensors", "sha256": H4, "bytes": 104}]})
}

/// A passed performance receipt bound to `workload_id`/`sha` and `variant`.
fn perf_receipt(id: &str, sha: &str, variant: &str, max_batch: i64, throughput: Value) -> Value {
    let mut r = common::environment_json();
    common::set(&mut r, "/receipt_id", json!(id));
    common::set(&mut r, "/qualification/kind", json!("performance"));
    common::set(&mut r, "/qualification/backend", json!("cpu"));
    common::set(&mut r, "/qualification/profile", json!("perf"));
    common::set(&mut r, "/model", model());
    common::set(
        &mut r,
        "/workload",
        json!({"id": "perf", "sha256": sha, "seed": 7, "parameters": {"variant_id": variant, "prompt_file": "prompts.jsonl"}}),
    );
    common::set(
        &mut r,
        "/effective_config",
        json!({"scheduler": {"max_batch": max_batch}}),
    );
    common::set(
        &mut r,
        "/results",
        json!([{"id": "main-case", "required": true, "status": "passed", "duration_seconds": 4.5, "details": null,
                "metrics": [{"name": "throughput_tps", "value": throughput, "unit": "tok/s",
                             "aggregation": "mean", "lower_is_better": false}]}]),
    );
    r
}

fn with_workload_id(mut r: Value, id: &str) -> Value {
    common::set(&mut r, "/workload/id", json!(id));
    r
}

fn cross_receipt(id: &str, sha: &str, backend: &str, case_pass: i64) -> Value {
    let mut r = common::environment_json();
    common::set(&mut r, "/receipt_id", json!(id));
    common::set(&mut r, "/qualification/kind", json!("correctness"));
    common::set(&mut r, "/qualification/backend", json!(backend));
    common::set(&mut r, "/qualification/profile", json!("core-v1"));
    common::set(
        &mut r,
        "/workload",
        json!({"id": "core-v1", "sha256": sha, "seed": 1, "parameters": {"variant_id": backend}}),
    );
    common::set(
        &mut r,
        "/environment/device/name",
        json!(format!("{backend} device")),
    );
    let runtime = if backend == "rocm" {
        json!({"rocm": "6.1"})
    } else {
        json!({"vulkan": "1.3"})
    };
    common::set(&mut r, "/environment/runtime", runtime);
    common::set(&mut r, "/results/0/metrics/0/value", json!(case_pass));
    r
}

fn load(v: &Value) -> LoadedReceipt {
    let bytes = serde_json::to_vec_pretty(v).unwrap();
    LoadedReceipt::from_bytes(Path::new("receipt.json"), &bytes)
        .expect("receipt loads and validates")
}

fn run(b: &Value, c: &Value, m: Option<&LoadedManifest>) -> ComparisonReport {
    compare::compare(&load(b), &load(c), m).expect("comparison runs")
}

fn refused(b: &Value, c: &Value, m: Option<&LoadedManifest>) -> CompareError {
    compare::compare(&load(b), &load(c), m).expect_err("comparison is refused")
}

fn has(list: &[String], needle: &str) -> bool {
    list.iter().any(|e| e.contains(needle))
}

/// Sets the receipts' workload id to the manifest's.
fn bound(r: Value, workload_id: &str) -> Value {
    with_workload_id(r, workload_id)
}

#[test]
fn fixtures_are_valid_workloads() {
    for w in [
        same_env_workload(throughput_rule("not_less", false, json!(0), json!(0.1))),
        ab_workload(),
        cross_workload("cross_backend_correctness", case_pass_rule()),
    ] {
        let v = qual_json::from_str(&w.to_string()).unwrap();
        let errors = qual_contract::validate_workload(&v);
        assert!(
            errors.is_empty(),
            "{}",
            errors
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn same_environment_performance_uses_only_declared_rules() {
    let w = same_env_workload(throughput_rule("not_less", false, json!(0), json!(0.1)));
    let repo = Repo::new(&[("perf.json", &w)]);
    let m = repo.manifest("perf.json");
    let sha = repo.sha("perf.json");
    let b = bound(
        perf_receipt("perf-baseline-r1", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    let mut c = bound(
        perf_receipt("perf-candidate-r1", &sha, "cpu", 1, json!(9.5)),
        "perf-same-v1",
    );
    // A different commit and model path are host placement, not identity.
    common::set(
        &mut c,
        "/source/git_commit",
        json!("89abcdef0123456789abcdef0123456789abcdef"),
    );
    common::set(&mut c, "/model/path", json!("/elsewhere/tiny"));
    let report = run(&b, &c, Some(&m));
    assert!(report.ok, "{:?}", report.errors);
    assert_eq!(report.mode, Mode::SameEnvironmentPerformance);
    assert_eq!(report.metric_evaluations.len(), 1);
    assert_eq!(report.metric_deltas.len(), 1);
    let e = &report.metric_evaluations[0];
    assert_eq!(e.scope, "results/main-case/metrics/throughput_tps");
    assert_eq!(e.status, "passed");
    assert_eq!(e.absolute_change, Some(json!(-0.5)));
    assert_eq!(e.relative_change_percent, Some(-5.0));

    // A required rule failure: compatible, evaluated, not ok, with the exact decimal reason.
    let c = bound(
        perf_receipt("perf-candidate-r2", &sha, "cpu", 1, json!(8.0)),
        "perf-same-v1",
    );
    let report = run(&b, &c, Some(&m));
    assert!(report.compatible && !report.ok);
    assert_eq!(report.metric_evaluations[0].status, "failed");
    assert_eq!(
        report.metric_evaluations[0].reason.as_deref(),
        Some("violation 2.0 exceeds tolerance 1.00")
    );
    assert!(has(
        &report.errors,
        "required metric rule failed: results/main-case/metrics/throughput_tps"
    ));
}

#[test]
fn immutable_identity_differences_are_rejected_before_any_delta() {
    let w = same_env_workload(throughput_rule("not_less", false, json!(0), json!(0.1)));
    let repo = Repo::new(&[("perf.json", &w)]);
    let m = repo.manifest("perf.json");
    let sha = repo.sha("perf.json");
    let b = bound(
        perf_receipt("perf-baseline-r1", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    let edits: [(&str, Value, &str); 7] = [
        ("/source/tree_hash", json!(H4), "source"),
        ("/model/tokenizer_hash", json!(H1), "model"),
        ("/model/weight_files/0/sha256", json!(H1), "model"),
        ("/qualification/profile", json!("other"), "profile"),
        (
            "/environment/runtime/rocm",
            json!("6.2"),
            "backend_environment",
        ),
        (
            "/effective_config/scheduler/max_batch",
            json!(4),
            "effective_config",
        ),
        (
            "/results/0/metrics/0/unit",
            json!("req/s"),
            "metric_identity",
        ),
    ];
    for (pointer, value, compatibility) in edits {
        let mut c = bound(
            perf_receipt("perf-candidate-r1", &sha, "cpu", 1, json!(10.0)),
            "perf-same-v1",
        );
        common::set(&mut c, pointer, value);
        let report = run(&b, &c, Some(&m));
        assert!(!report.ok && !report.compatible, "{pointer}");
        assert!(
            has(
                &report.errors,
                &format!("incompatible {compatibility} identity")
            ),
            "{pointer}: {:?}",
            report.errors
        );
        assert!(report.metric_evaluations.is_empty() && report.metric_deltas.is_empty());
    }
}

#[test]
fn native_linux_and_wsl2_are_never_compared_as_one_platform() {
    let w = same_env_workload(throughput_rule("not_less", false, json!(0), json!(0.1)));
    let repo = Repo::new(&[("perf.json", &w)]);
    let m = repo.manifest("perf.json");
    let sha = repo.sha("perf.json");
    let b = bound(
        perf_receipt("perf-linux", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    let mut c = bound(
        perf_receipt("perf-wsl2", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    let caps: serde_json::Map<String, Value> = qual_receipt::validate::WSL2_CAPABILITY_KEYS
        .iter()
        .map(|k| ((*k).to_owned(), json!("unavailable")))
        .collect();
    common::set(
        &mut c,
        "/environment/platform",
        json!({"kind": "wsl2", "capabilities": caps, "details": {"wsl": "2"},
               "observations": {"host_temperatures": [], "gpu_temperature": null}}),
    );
    let report = run(&b, &c, Some(&m));
    assert!(!report.compatible);
    let d = &report.compatibility.rejected_differences[0];
    assert_eq!(d.compatibility, "backend_environment");
    assert!(
        d.detail
            .iter()
            .any(|l| l.starts_with("environment.platform:")),
        "{:?}",
        d.detail
    );
    assert!(report.metric_evaluations.is_empty());
}

#[test]
fn failed_rows_are_never_compared() {
    let w = same_env_workload(throughput_rule("not_less", false, json!(0), json!(0.1)));
    let repo = Repo::new(&[("perf.json", &w)]);
    let m = repo.manifest("perf.json");
    let sha = repo.sha("perf.json");
    let b = bound(
        perf_receipt("perf-baseline-r1", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    let mut c = bound(
        perf_receipt("perf-candidate-r1", &sha, "cpu", 1, json!(50.0)),
        "perf-same-v1",
    );
    common::set(&mut c, "/qualification/verdict", json!("failed"));
    common::set(&mut c, "/results/0/status", json!("failed"));
    let report = run(&b, &c, Some(&m));
    assert!(report.compatible && !report.ok);
    assert!(has(
        &report.evidence_errors,
        "candidate receipt verdict must be passed"
    ));
    assert!(has(
        &report.evidence_errors,
        "candidate required result \"main-case\" did not pass"
    ));
    assert!(
        report.metric_evaluations.is_empty(),
        "a failed row's throughput must not be evaluated"
    );
    assert_eq!(report.result_status_changes.len(), 1);
}

#[test]
fn different_prompts_sampling_and_repetitions_are_refused() {
    let w = same_env_workload(throughput_rule("not_less", false, json!(0), json!(0.1)));
    let mut w2 = w.clone();
    w2["determinism"]["repetitions"] = json!(2);
    w2["workload_id"] = json!("perf-same-v1");
    let repo = Repo::new(&[("perf.json", &w), ("perf-r2.json", &w2)]);
    let m = repo.manifest("perf.json");
    let sha = repo.sha("perf.json");
    let b = bound(
        perf_receipt("perf-baseline-r1", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );

    // A different prompt corpus (a workload parameter): rejected workload identity.
    let mut c = bound(
        perf_receipt("perf-candidate-r1", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    common::set(
        &mut c,
        "/workload/parameters/prompt_file",
        json!("long-prompts.jsonl"),
    );
    let report = run(&b, &c, Some(&m));
    assert!(has(&report.errors, "incompatible workload identity"));
    assert!(report.metric_evaluations.is_empty());

    // Different sampling settings than the variant declares: rejected effective_config.
    let mut c = bound(
        perf_receipt("perf-candidate-r2", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    common::set(
        &mut c,
        "/effective_config/sampling",
        json!({"temperature": 0.7}),
    );
    let report = run(&b, &c, Some(&m));
    let d = report
        .compatibility
        .rejected_differences
        .iter()
        .find(|d| d.side.as_deref() == Some("candidate"))
        .expect("candidate effective_config rejected");
    assert_eq!(d.compatibility, "effective_config");

    // Different repetitions live in another manifest: the receipt cannot bind to this one.
    let c = bound(
        perf_receipt(
            "perf-candidate-r3",
            &repo.sha("perf-r2.json"),
            "cpu",
            1,
            json!(10.0),
        ),
        "perf-same-v1",
    );
    let e = refused(&b, &c, Some(&m));
    assert!(
        e.to_string().contains(
            "candidate receipt workload sha256 does not match exact committed manifest bytes"
        ),
        "{e}"
    );
}

#[test]
fn matching_metric_names_alone_never_make_receipts_comparable() {
    let w = same_env_workload(throughput_rule("not_less", false, json!(0), json!(0.1)));
    let repo = Repo::new(&[("perf.json", &w)]);
    let m = repo.manifest("perf.json");
    let sha = repo.sha("perf.json");
    let b = bound(
        perf_receipt("perf-baseline-r1", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    // Same metric names, but a receipt of another workload.
    let c = bound(
        perf_receipt("other-r1", H1, "cpu", 1, json!(10.0)),
        "other-workload-v1",
    );
    let e = refused(&b, &c, Some(&m));
    assert!(
        e.to_string().contains("candidate receipt workload id"),
        "{e}"
    );
    // Without a manifest, non-environment receipts are never compared.
    let e = refused(&b, &b, None);
    assert!(
        e.to_string().contains("--workload-manifest is required"),
        "{e}"
    );
}

#[test]
fn vacuous_and_uncommitted_comparisons_are_refused() {
    let w = same_env_workload(throughput_rule("not_less", false, json!(0), json!(0.1)));
    let repo = Repo::new(&[("perf.json", &w)]);
    let m = repo.manifest("perf.json");
    let sha = repo.sha("perf.json");
    let b = bound(
        perf_receipt("perf-baseline-r1", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    let e = refused(&b, &b, Some(&m));
    assert!(e.to_string().contains("distinct receipt IDs"), "{e}");

    // An edited working copy no longer matches HEAD.
    let mut edited = w.clone();
    edited["description"] = json!("edited");
    std::fs::write(
        repo.path("perf.json"),
        serde_json::to_string_pretty(&edited).unwrap(),
    )
    .unwrap();
    let e = compare::load_committed_manifest(&repo.path("perf.json"), repo.root()).unwrap_err();
    assert!(
        e.to_string()
            .contains("must exactly match its committed HEAD version"),
        "{e}"
    );
    // And the manifest loaded earlier is re-verified before its policy is used.
    let c = bound(
        perf_receipt("perf-candidate-r1", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    assert!(refused(&b, &c, Some(&m))
        .to_string()
        .contains("committed HEAD"));

    // Uncommitted and outside files.
    std::fs::write(repo.path("new.json"), "{}").unwrap();
    let e = compare::load_committed_manifest(&repo.path("new.json"), repo.root()).unwrap_err();
    assert!(e.to_string().contains("must be committed at HEAD"), "{e}");
    std::fs::write(repo.root().join("elsewhere.json"), "{}").unwrap();
    let e = compare::load_committed_manifest(&repo.root().join("elsewhere.json"), repo.root())
        .unwrap_err();
    assert!(e.to_string().contains("must resolve under"), "{e}");
}

#[test]
fn declared_ab_pair_allows_only_the_named_config_path_and_is_directional() {
    let w = ab_workload();
    let repo = Repo::new(&[("ab.json", &w)]);
    let m = repo.manifest("ab.json");
    let sha = repo.sha("ab.json");
    let b = bound(
        perf_receipt("ab-baseline", &sha, "baseline", 1, json!(10.0)),
        "perf-ab-v1",
    );
    let c = bound(
        perf_receipt("ab-candidate", &sha, "candidate", 2, json!(12)),
        "perf-ab-v1",
    );
    let report = run(&b, &c, Some(&m));
    assert!(report.ok, "{:?}", report.errors);
    assert_eq!(report.mode, Mode::DeclaredAbVariants);
    let allowed: Vec<String> = report
        .compatibility
        .allowed_differences
        .iter()
        .map(|d| d.describe())
        .collect();
    assert_eq!(
        allowed,
        ["workload_variant", "effective_config scheduler.max_batch"]
    );
    let json = serde_json::to_value(&report.compatibility.allowed_differences).unwrap();
    assert_eq!(
        json,
        json!([{"compatibility": "workload_variant", "baseline": "baseline", "candidate": "candidate"},
               {"compatibility": "effective_config", "path": "scheduler.max_batch", "baseline": 1, "candidate": 2}])
    );
    assert_eq!(
        report.metric_evaluations[0].absolute_change,
        Some(json!(2.0))
    );

    // Reversed direction: not a declared pair.
    let report = run(&c, &b, Some(&m));
    assert!(!report.compatible);
    assert!(has(&report.errors, "directional A/B variant pair"));
    assert!(report.metric_deltas.is_empty());

    // The pair admits only its own path: another config change is rejected.
    let mut c2 = bound(
        perf_receipt("ab-candidate-2", &sha, "candidate", 2, json!(12)),
        "perf-ab-v1",
    );
    common::set(&mut c2, "/effective_config/scheduler/prefill", json!(true));
    let report = run(&b, &c2, Some(&m));
    assert!(has(
        &report.errors,
        "incompatible effective_config identity"
    ));
}

#[test]
fn cross_backend_correctness_uses_the_declared_endpoint_pair_and_no_deltas() {
    let w = cross_workload("cross_backend_correctness", case_pass_rule());
    let repo = Repo::new(&[("core.json", &w)]);
    let m = repo.manifest("core.json");
    let sha = repo.sha("core.json");
    let b = cross_receipt("core-rocm", &sha, "rocm", 1);
    let c = cross_receipt("core-vulkan", &sha, "vulkan", 1);
    let report = run(&b, &c, Some(&m));
    assert!(report.ok, "{:?}", report.errors);
    assert_eq!(report.mode, Mode::CrossBackendCorrectness);
    assert_eq!(report.metric_evaluations.len(), 1);
    assert_eq!(report.metric_evaluations[0].status, "passed");
    assert!(
        report.metric_deltas.is_empty(),
        "cross-backend comparisons never produce deltas"
    );
    let allowed: Vec<String> = report
        .compatibility
        .allowed_differences
        .iter()
        .map(|d| d.describe())
        .collect();
    assert_eq!(
        allowed,
        [
            "workload_variant",
            "backend",
            "environment device.name",
            "environment runtime.rocm",
            "environment runtime.vulkan"
        ]
    );

    // An incorrect candidate is not hidden behind equality: a passed result whose case_pass is
    // 0 contradicts itself, so the receipt does not even load for comparison.
    let bad = cross_receipt("core-vulkan-bad", &sha, "vulkan", 0);
    let bytes = serde_json::to_vec_pretty(&bad).unwrap();
    let err = LoadedReceipt::from_bytes(Path::new("receipt.json"), &bytes)
        .expect_err("an inconsistent receipt is refused");
    assert!(
        err.to_string()
            .contains("receipt.results[0].metrics[0].value is case_pass 0 but receipt.results[0].status is \"passed\""),
        "{err:?}"
    );

    // Host drift is not an allowed environment difference.
    let mut drift = cross_receipt("core-vulkan-drift", &sha, "vulkan", 1);
    common::set(&mut drift, "/environment/host_id", json!("other-host"));
    let report = run(&b, &drift, Some(&m));
    assert!(report
        .compatibility
        .rejected_differences
        .iter()
        .any(|d| d.compatibility == "environment" && d.path.as_deref() == Some("host_id")));

    // Same backend on both sides is not a declared endpoint pair.
    let b2 = cross_receipt("core-rocm-2", &sha, "rocm", 1);
    let report = run(&b, &b2, Some(&m));
    assert!(has(&report.errors, "cross-backend pair"));

    // A WSL2 platform on one side is an undeclared environment difference.
    let mut wsl = cross_receipt("core-vulkan-wsl", &sha, "vulkan", 1);
    let caps: serde_json::Map<String, Value> = qual_receipt::validate::WSL2_CAPABILITY_KEYS
        .iter()
        .map(|k| ((*k).to_owned(), json!("unavailable")))
        .collect();
    common::set(
        &mut wsl,
        "/environment/platform",
        json!({"kind": "wsl2", "capabilities": caps, "details": {"wsl": "2"},
               "observations": {"host_temperatures": [], "gpu_temperature": null}}),
    );
    let report = run(&b, &wsl, Some(&m));
    assert!(report
        .compatibility
        .rejected_differences
        .iter()
        .any(|d| d.path.as_deref() == Some("platform")));
}

#[test]
fn results_outside_the_selected_variant_are_evidence_errors() {
    let w = cross_workload("cross_backend_correctness", case_pass_rule());
    let repo = Repo::new(&[("core.json", &w)]);
    let m = repo.manifest("core.json");
    let sha = repo.sha("core.json");
    let mut b = cross_receipt("core-rocm", &sha, "rocm", 1);
    let mut c = cross_receipt("core-vulkan", &sha, "vulkan", 1);
    for r in [&mut b, &mut c] {
        let extra = r["results"][0].clone();
        let mut extra = extra;
        extra["id"] = json!("undeclared-case");
        r["results"].as_array_mut().unwrap().push(extra);
    }
    let report = run(&b, &c, Some(&m));
    assert!(report.compatible && !report.ok);
    assert!(has(&report.errors, "undeclared results: undeclared-case"));
    assert!(report.metric_evaluations.is_empty());
}

#[test]
fn metric_rule_definitions_and_exact_decimals() {
    // A unit that differs from the committed rule on both sides.
    let w = same_env_workload(throughput_rule("not_less", false, json!(0), json!(0.1)));
    let repo = Repo::new(&[("perf.json", &w)]);
    let m = repo.manifest("perf.json");
    let sha = repo.sha("perf.json");
    let mut b = bound(
        perf_receipt("perf-baseline-r1", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    let mut c = bound(
        perf_receipt("perf-candidate-r1", &sha, "cpu", 1, json!(10.0)),
        "perf-same-v1",
    );
    common::set(&mut b, "/results/0/metrics/0/unit", json!("tokens/s"));
    common::set(&mut c, "/results/0/metrics/0/unit", json!("tokens/s"));
    let report = run(&b, &c, Some(&m));
    assert!(has(
        &report.errors,
        "definition does not match committed rule"
    ));

    // More than 80 significant digits: 10^100 vs 10^100 - 2 with a relative tolerance 1e-100.
    let w = same_env_workload(throughput_rule("equal", false, json!(0), json!(1e-100)));
    let repo = Repo::new(&[("perf.json", &w)]);
    let m = repo.manifest("perf.json");
    let sha = repo.sha("perf.json");
    let big = format!("1{}", "0".repeat(100));
    let smaller = format!("99{}8", "9".repeat(97));
    let b = bound(
        perf_receipt("perf-big-b", &sha, "cpu", 1, json!(1)),
        "perf-same-v1",
    );
    let c = bound(
        perf_receipt("perf-big-c", &sha, "cpu", 1, json!(2)),
        "perf-same-v1",
    );
    let patch = |v: &Value, n: &str| {
        let text = serde_json::to_string(v).unwrap();
        let text = text
            .replace("\"value\":1}", &format!("\"value\":{n}}}"))
            .replace("\"value\":2}", &format!("\"value\":{n}}}"));
        LoadedReceipt::from_bytes(Path::new("r.json"), text.as_bytes()).unwrap()
    };
    let report = compare::compare(&patch(&b, &big), &patch(&c, &smaller), Some(&m)).unwrap();
    let e = &report.metric_evaluations[0];
    assert_eq!(e.status, "failed");
    assert!(
        e.reason
            .as_deref()
            .unwrap()
            .starts_with("violation 2 exceeds tolerance 1.000"),
        "{:?}",
        e.reason
    );

    // Opposite extremes do not overflow: the change is not finite, the rule fails.
    let w = same_env_workload(throughput_rule("equal", false, json!(2.0), json!(0)));
    let repo = Repo::new(&[("perf.json", &w)]);
    let m = repo.manifest("perf.json");
    let sha = repo.sha("perf.json");
    let b = bound(
        perf_receipt("perf-hi", &sha, "cpu", 1, json!(1e308)),
        "perf-same-v1",
    );
    let c = bound(
        perf_receipt("perf-lo", &sha, "cpu", 1, json!(-1.1e308)),
        "perf-same-v1",
    );
    let report = run(&b, &c, Some(&m));
    let e = &report.metric_evaluations[0];
    assert_eq!(e.status, "failed");
    assert_eq!(e.absolute_change, None);
    assert_eq!(e.relative_change_percent, None);
}

#[test]
fn unsupported_mode_and_strict_no_workload() {
    let w = cross_workload("self_contained_correctness", json!([]));
    let repo = Repo::new(&[("core.json", &w)]);
    let m = repo.manifest("core.json");
    let sha = repo.sha("core.json");
    let b = cross_receipt("core-rocm", &sha, "rocm", 1);
    let c = cross_receipt("core-vulkan", &sha, "vulkan", 1);
    let e = refused(&b, &c, Some(&m));
    assert_eq!(
        e.message,
        "unsupported workload comparison mode: \"self_contained_correctness\""
    );

    // Two environment receipts without a workload: strict equality.
    let env = common::environment_json();
    let report = run(&env, &env, None);
    assert!(report.ok && report.mode == Mode::StrictNoWorkload);
    assert!(report.metric_evaluations.is_empty());
    let mut other = env.clone();
    common::set(&mut other, "/environment/device/driver", json!("6.2.0"));
    let report = run(&env, &other, None);
    assert!(!report.ok);
    assert!(has(
        &report.errors,
        "incompatible backend_environment identity"
    ));
    let d = &report.compatibility.rejected_differences[0];
    assert_eq!(
        d.detail,
        ["environment.device.driver: \"6.1.0\" -> \"6.2.0\""]
    );
}

#[test]
fn report_json_is_stable_and_sorted() {
    let env = common::environment_json();
    let report = run(&env, &env, None);
    let text = serde_json::to_string(&report).unwrap();
    let keys: Vec<&str> = [
        "baseline",
        "candidate",
        "compatible",
        "compatibility",
        "errors",
        "evidence_errors",
        "metric_deltas",
        "metric_evaluations",
        "mode",
        "ok",
        "result_status_changes",
        "workload_manifest",
    ]
    .to_vec();
    let positions: Vec<usize> = keys
        .iter()
        .map(|k| text.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert_eq!(text, serde_json::to_string(&run(&env, &env, None)).unwrap());
}

#[test]
fn momentary_observations_are_listed_not_compared_as_identity() {
    let env = common::environment_json();
    let mut other = env.clone();
    common::set(
        &mut other,
        "/receipt_id",
        json!("test-environment-receipt-v2"),
    );
    common::set(
        &mut other,
        "/environment/device/memory_available_bytes",
        json!(1024),
    );
    let report = run(&env, &other, None);
    assert!(report.ok, "{:?}", report.errors);
    let allowed = serde_json::to_value(&report.compatibility.allowed_differences).unwrap();
    assert_eq!(
        allowed,
        json!([{"compatibility": "environment_observation", "path": "device.memory_available_bytes",
                "baseline": null, "candidate": 1024, "baseline_present": false, "candidate_present": true}])
    );
    // Total memory is identity.
    common::set(
        &mut other,
        "/environment/device/memory_bytes",
        json!(2147483648u64),
    );
    let report = run(&env, &other, None);
    assert!(has(
        &report.errors,
        "incompatible backend_environment identity"
    ));
}
