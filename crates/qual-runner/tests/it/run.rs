//! End-to-end runs in a real temporary git repository.

use crate::common;

use common::*;
use qual_receipt::model::Verdict;
use qual_runner::{exit_code, run, RunError};

fn smoke_cases() -> Vec<String> {
    vec![
        case(
            "print-case",
            &[fixture(), "print", "kiln-ready"],
            "{}",
            r#"{"stream":"stdout","match":"required","pattern":"^kiln-ready$"}"#,
            runner_protocol(),
        ),
        case(
            "env-case",
            &[fixture(), "env", "KILN_QUALIFICATION_VARIANT_ID"],
            r#"{"CASE_LABEL":"visible"}"#,
            r#"{"stream":"stdout","match":"required","pattern":"^cpu$"}"#,
            runner_protocol(),
        ),
    ]
}

#[test]
fn passing_run_writes_a_valid_receipt_and_evidence() {
    let repo = Repo::new(&[(
        "smoke-v1.json",
        workload("smoke-v1", "correctness", "[]", "{}", &smoke_cases(), 2),
    )]);
    let r = run(&repo.request("smoke-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 0, "{r:?}");
    let o = r.unwrap();
    assert_eq!(o.verdict(), Verdict::Passed);
    assert!(o
        .receipt_rel
        .starts_with(".qualification/receipts/cpu/test-host/runner-test-receipt-v1"));
    let v = validate(repo.root(), &o.receipt_path);
    let results = v.get("results").unwrap().as_array().unwrap();
    assert_eq!(results.len(), 2);
    let m = results[0].get("metrics").unwrap().as_array().unwrap();
    assert_eq!(
        qual_json::to_canonical_string(&m[0]),
        r#"{"aggregation":"exact","lower_is_better":false,"name":"case_pass","unit":"bool","value":1}"#
    );
    assert_eq!(
        v.get("workload")
            .unwrap()
            .get("parameters")
            .unwrap()
            .as_object()
            .unwrap()
            .len(),
        1
    );
    let run_dir = repo
        .root()
        .join(".qualification/runs/runner-test-receipt-v1");
    for f in [
        "environment.json",
        "run-config.json",
        "cases/001-print-case-r001/stdout.log",
        "cases/002-env-case-r002/case-result.json",
    ] {
        assert!(run_dir.join(f).is_file(), "{f}");
    }
    let cfg = std::fs::read_to_string(run_dir.join("run-config.json")).unwrap();
    assert!(cfg.contains("\"case_execution_count\": 4"));
    assert!(cfg.contains("\"KILN_QUALIFICATION_VARIANT_ID\": \"cpu\""));
    // The receipt is never replaced: a second run with the same id is refused.
    let again = run(&repo.request("smoke-v1.json", "cpu"));
    assert!(matches!(again, Err(RunError::Refused(_))), "{again:?}");
}

#[test]
fn case_environment_is_closed() {
    let cases = vec![case(
        "env-case",
        &[fixture(), "env", "KILN_UNDECLARED_RUNNER_TEST"],
        "{}",
        r#"{"stream":"stdout","match":"required","pattern":"^<unset>$"}"#,
        runner_protocol(),
    )];
    let repo = Repo::new(&[(
        "env-v1.json",
        workload("env-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    // The variable is set in this test process; the case must not see it.
    std::env::set_var("KILN_UNDECLARED_RUNNER_TEST", "leak");
    let r = run(&repo.request("env-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 0, "{r:?}");
}

#[test]
fn failing_exit_code_and_assertion_give_a_failed_receipt() {
    let cases = vec![
        case(
            "exit-case",
            &[fixture(), "exit", "7"],
            "{}",
            "",
            runner_protocol(),
        ),
        case(
            "assert-case",
            &[fixture(), "print", "nope"],
            "{}",
            r#"{"stream":"stdout","match":"required","pattern":"^READY$"}"#,
            runner_protocol(),
        ),
    ];
    let repo = Repo::new(&[(
        "fail-v1.json",
        workload("fail-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let r = run(&repo.request("fail-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 1);
    let o = r.unwrap();
    let v = validate(repo.root(), &o.receipt_path);
    assert!(
        details(&v, 0).contains("exit code 7 not in [0]"),
        "{}",
        details(&v, 0)
    );
    assert!(details(&v, 1).contains("required stdout pattern did not match: ^READY$"));
}

#[test]
fn command_results_are_checked_against_id_metrics_and_config() {
    let config = r#"{"scheduler":{"max_batch":4}}"#;
    let ok = case(
        "good-case",
        &[fixture(), "result", "passed", config, "sample_value=3"],
        r#"{"CASE_ID":"good-case"}"#,
        "",
        &command_protocol(&["sample_value"]),
    );
    let repo = Repo::new(&[(
        "cmd-v1.json",
        workload(
            "cmd-v1",
            "correctness",
            "[]",
            config,
            std::slice::from_ref(&ok),
            1,
        ),
    )]);
    let r = run(&repo.request("cmd-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 0, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert_eq!(
        qual_json::to_canonical_string(v.get("effective_config").unwrap()),
        config
    );
    // The runner's duration replaces the reported 123.0 seconds.
    let d = v.get("results").unwrap().as_array().unwrap()[0]
        .get("duration_seconds")
        .unwrap()
        .as_f64()
        .unwrap();
    assert!(d < 100.0, "{d}");

    let lies = vec![
        case(
            "wrong-config",
            &[
                fixture(),
                "result",
                "passed",
                r#"{"scheduler":{"max_batch":8}}"#,
                "sample_value=3",
            ],
            r#"{"CASE_ID":"wrong-config"}"#,
            "",
            &command_protocol(&["sample_value"]),
        ),
        case(
            "wrong-id",
            &[fixture(), "result", "passed", config, "sample_value=3"],
            r#"{"CASE_ID":"someone-else"}"#,
            "",
            &command_protocol(&["sample_value"]),
        ),
        case(
            "undeclared",
            &[
                fixture(),
                "result",
                "passed",
                config,
                "other=1",
                "sample_value=3",
            ],
            r#"{"CASE_ID":"undeclared"}"#,
            "",
            &command_protocol(&["sample_value"]),
        ),
        case(
            "no-result",
            &[fixture(), "print", "x"],
            "{}",
            "",
            &command_protocol(&["sample_value"]),
        ),
        // Claims `passed` and exits 3: the runner's evidence wins.
        case(
            "passed-but-exit-3",
            &[fixture(), "result", "passed", config, "sample_value=3"],
            r#"{"CASE_ID":"passed-but-exit-3","RESULT_EXIT_CODE":"3"}"#,
            "",
            &command_protocol(&["sample_value"]),
        ),
    ];
    let repo = Repo::new(&[(
        "lie-v1.json",
        workload("lie-v1", "correctness", "[]", config, &lies, 1),
    )]);
    let r = run(&repo.request("lie-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 1);
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert_eq!(
        qual_json::to_canonical_string(v.get("effective_config").unwrap()),
        "{}"
    );
    assert!(
        details(&v, 0).contains("does not exactly match"),
        "{}",
        details(&v, 0)
    );
    assert!(
        details(&v, 1).contains("does not match case"),
        "{}",
        details(&v, 1)
    );
    assert!(
        details(&v, 2).contains("undeclared metrics: other"),
        "{}",
        details(&v, 2)
    );
    assert!(details(&v, 3).contains("command did not create its case result"));
    assert!(
        details(&v, 4).contains("exit code 3 not in [0]"),
        "{}",
        details(&v, 4)
    );
    let results = v.get("results").unwrap().as_array().unwrap();
    assert_eq!(results.len(), 5);
    for r in results {
        assert_eq!(r.get("status").unwrap().as_str(), Some("failed"), "{r:?}");
    }
    // The lying result was a usable document: its metric is kept, its status downgraded.
    let m = results[4].get("metrics").unwrap().as_array().unwrap();
    assert_eq!(m.len(), 1, "{m:?}");
}

#[test]
fn source_drift_during_a_case_fails_the_receipt() {
    let mk = marker();
    let cases = vec![case(
        "mutate-case",
        &[fixture(), "copy", "scratch/new.rs", "src/lib.rs"],
        &marker_env(&mk, ""),
        "",
        runner_protocol(),
    )];
    let repo = Repo::new(&[(
        "drift-v1.json",
        workload("drift-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    std::fs::create_dir_all(repo.root().join("scratch")).unwrap();
    std::fs::write(
        repo.root().join("scratch/new.rs"),
        "pub fn v() -> u32 { 2 }\n",
    )
    .unwrap();
    let r = run(&repo.request("drift-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let o = r.unwrap();
    let v = validate(repo.root(), &o.receipt_path);
    let d = details(&v, 0);
    assert!(
        d.contains("source tree changed during qualification"),
        "{d}"
    );
    assert!(d.contains("Git worktree became dirty"), "{d}");
    assert_eq!(
        v.get("source").unwrap().get("git_worktree_clean"),
        Some(&qual_json::Value::Bool(false))
    );
    let m = v.get("results").unwrap().as_array().unwrap()[0]
        .get("metrics")
        .unwrap()
        .as_array()
        .unwrap()[0]
        .clone();
    assert_eq!(qual_json::to_canonical_string(m.get("value").unwrap()), "0");
    assert_no_case_process(&mk);
}

#[test]
fn model_drift_during_a_case_fails_the_receipt() {
    let mk = marker();
    let cases = vec![
        case(
            "model-case",
            &[fixture(), "print", "${model_path}"],
            "{}",
            "",
            runner_protocol(),
        ),
        case(
            "mutate-model",
            &[
                fixture(),
                "copy",
                "scratch/config.json",
                "models/m1/config.json",
            ],
            &marker_env(&mk, ""),
            "",
            runner_protocol(),
        ),
    ];
    let repo = Repo::new(&[(
        "model-v1.json",
        workload("model-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let m = repo.root().join("models/m1");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::write(m.join("config.json"), b"{\"a\":1}").unwrap();
    std::fs::write(m.join("tokenizer.json"), b"{}").unwrap();
    std::fs::write(m.join("model.safetensors"), b"weights").unwrap();
    std::fs::create_dir_all(repo.root().join("scratch")).unwrap();
    std::fs::write(repo.root().join("scratch/config.json"), b"{\"a\":2}").unwrap();
    let mut req = repo.request("model-v1.json", "cpu");
    req.model = Some("models/m1".into());
    let r = run(&req);
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert!(details(&v, 0).contains("model fingerprint changed during qualification"));
    let model = v.get("model").unwrap();
    assert_eq!(model.get("id").and_then(|x| x.as_str()), Some("m1"));
    let out =
        std::fs::read_to_string(repo.root().join(
            ".qualification/runs/runner-test-receipt-v1/cases/001-model-case-r001/stdout.log",
        ))
        .unwrap();
    assert_eq!(out.trim(), m.to_str().unwrap());
    assert_no_case_process(&mk);
}

#[test]
fn initial_model_fingerprint_failure_retains_a_failed_receipt() {
    let cases = vec![case(
        "model-case",
        &[fixture(), "print", "${model_path}"],
        "{}",
        "",
        runner_protocol(),
    )];
    let repo = Repo::new(&[(
        "m-v1.json",
        workload("m-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    std::fs::create_dir_all(repo.root().join("models/broken")).unwrap();
    std::fs::write(repo.root().join("models/broken/model.safetensors"), b"w").unwrap();
    let mut req = repo.request("m-v1.json", "cpu");
    req.model = Some("models/broken".into());
    let r = run(&req);
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let o = r.unwrap();
    let v = validate(repo.root(), &o.receipt_path);
    assert_eq!(v.get("model"), Some(&qual_json::Value::Null));
    assert!(
        details(&v, 0).contains("initial model fingerprint failed"),
        "{}",
        details(&v, 0)
    );
    let kinds: Vec<&str> = v
        .get("artifacts")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.get("kind").unwrap().as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["environment_probes", "effective_run_config"]);
    // No case ran.
    assert!(!repo
        .root()
        .join(".qualification/runs/runner-test-receipt-v1/cases")
        .exists());
}

#[test]
fn a_required_device_that_is_not_detected_runs_no_case_and_the_skip_policy_fails_it() {
    // Metal's probe tool (`system_profiler`) exists only on macOS: here the required device is
    // never detected, for real (no mock stands in for the probe).
    if std::path::Path::new("/usr/sbin/system_profiler").exists() {
        qual_test_fixtures::harness::skip("this host has system_profiler (macOS)");
        return;
    }
    let cases = vec![
        case(
            "first",
            &[fixture(), "print", "ran"],
            "{}",
            "",
            runner_protocol(),
        ),
        case(
            "second",
            &[fixture(), "print", "ran"],
            "{}",
            "",
            runner_protocol(),
        )
        .replace("\"required\":true", "\"required\":false"),
    ];
    let metal = variant("metal", "{}", &cases)
        .replace("\"backend\": \"cpu\"", "\"backend\": \"metal\"")
        .replace(
            "\"device_requirement\": \"none\"",
            "\"device_requirement\": \"required\"",
        );
    let repo = Repo::new(&[(
        "d-v1.json",
        workload_variants("d-v1", "correctness", "[]", &[metal], 1),
    )]);
    let r = run(&repo.request("d-v1.json", "metal"));
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    let results = v.get("results").unwrap().as_array().unwrap();
    let status = |i: usize| results[i].get("status").unwrap().as_str().unwrap();
    // skip_policy fail: the skipped cases fail the first required result; the optional one
    // stays skipped; each names the missing device.
    assert_eq!((status(0), status(1)), ("failed", "skipped"));
    for i in 0..2 {
        assert!(
            details(&v, i).starts_with("not executed: required metal device was not detected"),
            "{}",
            details(&v, i)
        );
    }
    assert!(details(&v, 0).contains("variant skip_policy forbids skipped cases"));
    let run_dir = repo
        .root()
        .join(".qualification/runs/runner-test-receipt-v1");
    assert!(!run_dir.join("cases").exists(), "a case ran");
    let config =
        qual_json::from_slice(&std::fs::read(run_dir.join("run-config.json")).unwrap()).unwrap();
    assert_eq!(
        config.get("pre_case_failure").and_then(|x| x.as_str()),
        Some("required_device_not_detected")
    );
    assert_eq!(
        config
            .get("case_execution_count")
            .map(qual_json::to_canonical_string),
        Some("0".into())
    );
}

#[test]
fn repeated_command_metrics_are_averaged_and_skips_fail_under_skip_policy() {
    let metric_case = case(
        "metric-case",
        &[fixture(), "result", "passed", "{}", "lat=3"],
        r#"{"CASE_ID":"metric-case"}"#,
        "",
        &command_protocol(&["lat"]),
    );
    let skip_case = case(
        "skip-case",
        &[fixture(), "result", "skipped", "{}", "lat=1"],
        r#"{"CASE_ID":"skip-case"}"#,
        "",
        &command_protocol(&["lat"]),
    )
    .replace("\"required\":true", "\"required\":false");
    let repo = Repo::new(&[(
        "r-v1.json",
        workload(
            "r-v1",
            "correctness",
            "[]",
            "{}",
            &[metric_case, skip_case],
            2,
        ),
    )]);
    let r = run(&repo.request("r-v1.json", "cpu"));
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    let res = v.get("results").unwrap().as_array().unwrap();
    let m = &res[0].get("metrics").unwrap().as_array().unwrap()[0];
    assert_eq!(
        qual_json::to_canonical_string(m),
        r#"{"aggregation":"mean_of_2_p50","lower_is_better":true,"name":"lat","unit":"count","value":3}"#
    );
    assert_eq!(res[0].get("status").unwrap().as_str(), Some("failed"));
    assert!(details(&v, 0).contains("variant skip_policy forbids skipped cases"));
    assert_eq!(res[1].get("status").unwrap().as_str(), Some("skipped"));
}

#[test]
fn a_wsl2_platform_object_satisfies_the_receipt_validator() {
    // Build a passing receipt here, then graft the WSL2 platform object this crate would emit
    // on a WSL2 host, and validate the result structurally.
    let repo = Repo::new(&[(
        "p-v1.json",
        workload("p-v1", "correctness", "[]", "{}", &smoke_cases(), 1),
    )]);
    let o = run(&repo.request("p-v1.json", "cpu")).unwrap();
    let mut plat = qual_probe::platform::probe();
    plat.wsl2 = true;
    plat.memory_total_bytes = Some(1 << 30);
    plat.memory_available_bytes = Some(1 << 29);
    let (pv, unsupported) =
        qual_probe::platform::wsl2_platform(&plat, Some("linux-netns-loopback-only-v1")).unwrap();
    let mut receipt = o.receipt.clone();
    receipt.environment.platform = Some(pv);
    receipt.unsupported.extend(unsupported);
    let errs = qual_receipt::validate::validate(&receipt.to_value());
    assert!(errs.is_empty(), "{errs:?}");
}

#[test]
fn a_model_file_removed_mid_run_fails_the_final_fingerprint() {
    let cases = vec![
        case(
            "model-case",
            &[fixture(), "print", "${model_path}"],
            "{}",
            "",
            runner_protocol(),
        ),
        case(
            "remove-config",
            &[fixture(), "remove", "models/m2/config.json"],
            "{}",
            "",
            runner_protocol(),
        ),
    ];
    let repo = Repo::new(&[(
        "rm-v1.json",
        workload("rm-v1", "correctness", "[]", "{}", &cases, 1),
    )]);
    let m = repo.root().join("models/m2");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::write(m.join("config.json"), b"{}").unwrap();
    std::fs::write(m.join("tokenizer.json"), b"{}").unwrap();
    std::fs::write(m.join("model.safetensors"), b"w").unwrap();
    let mut req = repo.request("rm-v1.json", "cpu");
    req.model = Some(m.clone());
    let r = run(&req);
    assert_eq!(exit_code(&r), 1, "{r:?}");
    let v = validate(repo.root(), &r.unwrap().receipt_path);
    assert!(
        details(&v, 0).contains("final model fingerprint failed"),
        "{}",
        details(&v, 0)
    );
}
