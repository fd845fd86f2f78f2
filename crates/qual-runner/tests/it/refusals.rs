//! Every preflight refusal leaves the repository exactly as it was.

use crate::common;

use common::*;
use qual_runner::{exit_code, run, Refusal, RunError, RunRequest};

fn variables() -> &'static str {
    r#"[
      {"name":"count","description":"an integer","type":"integer","required":false,"default":2,"constraints":{"allowed_values":[],"minimum":1,"maximum":10,"pattern":null}},
      {"name":"flag","description":"a boolean","type":"boolean","required":false,"default":false,"constraints":{"allowed_values":[],"minimum":null,"maximum":null,"pattern":null}},
      {"name":"spare","description":"not used by the variant","type":"string","required":false,"default":"x","constraints":{"allowed_values":[],"minimum":null,"maximum":null,"pattern":null}}
    ]"#
}

fn repo() -> Repo {
    let cases = vec![case(
        "var-case",
        &[fixture(), "print", "${count}"],
        r#"{"FLAG":"${flag}"}"#,
        "",
        runner_protocol(),
    )];
    let alt_cases = vec![case(
        "alt-case",
        &[fixture(), "print", "${spare}"],
        "{}",
        "",
        runner_protocol(),
    )];
    let env_cases = vec![case(
        "env-case",
        &[fixture(), "print", "x"],
        "{}",
        "",
        runner_protocol(),
    )];
    Repo::new(&[
        (
            "vars-v1.json",
            workload_variants(
                "vars-v1",
                "correctness",
                variables(),
                &[
                    variant("cpu", "{}", &cases),
                    variant("cpu-alt", "{}", &alt_cases),
                ],
                1,
            ),
        ),
        (
            "envkind-v1.json",
            workload("envkind-v1", "environment", "[]", "{}", &env_cases, 1),
        ),
        ("bad-v1.json", "{\"schema_version\": 1}\n".to_string()),
        (
            "needsmodel-v1.json",
            workload(
                "needsmodel-v1",
                "correctness",
                "[]",
                "{}",
                &[case(
                    "model-case",
                    &[fixture(), "print", "${model_path}"],
                    "{}",
                    "",
                    runner_protocol(),
                )],
                1,
            ),
        ),
    ])
}

fn refused(repo: &Repo, req: &RunRequest) -> Refusal {
    let before = repo.snapshot();
    let r = run(req);
    assert_eq!(exit_code(&r), qual_runner::EXIT_REFUSED, "{r:?}");
    assert_eq!(
        repo.snapshot(),
        before,
        "a refusal created or removed files"
    );
    match r {
        Err(RunError::Refused(e)) => {
            assert!(!e.to_string().contains('\n'), "one line: {e}");
            e
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn the_baseline_request_runs() {
    let repo = repo();
    let mut req = repo.request("vars-v1.json", "cpu");
    req.vars = vec!["count=3".into(), "flag=true".into()];
    let r = run(&req);
    assert_eq!(exit_code(&r), 0, "{r:?}");
    let p = r.unwrap().receipt.workload.unwrap().parameters;
    assert_eq!(
        qual_json::to_canonical_string(&qual_json::Value::Object(p)),
        r#"{"count":3,"flag":true,"variant_id":"cpu"}"#
    );
}

#[test]
fn dirty_worktrees_are_refused() {
    let repo = repo();
    let req = repo.request("vars-v1.json", "cpu");
    std::fs::write(repo.root().join("src/lib.rs"), "changed\n").unwrap();
    assert!(matches!(refused(&repo, &req), Refusal::DirtyWorktree(_)));
    git(repo.root(), &["add", "src/lib.rs"]);
    assert!(matches!(refused(&repo, &req), Refusal::DirtyWorktree(_)));
    git(repo.root(), &["reset", "-q", "--hard"]);
    std::fs::create_dir_all(repo.root().join("deep/dir")).unwrap();
    std::fs::write(repo.root().join("deep/dir/untracked.txt"), "x").unwrap();
    assert!(matches!(refused(&repo, &req), Refusal::DirtyWorktree(_)));
    std::fs::remove_dir_all(repo.root().join("deep")).unwrap();
    // Ignored files are fine.
    std::fs::create_dir_all(repo.root().join("scratch")).unwrap();
    std::fs::write(repo.root().join("scratch/ignored.txt"), "x").unwrap();
    assert_eq!(exit_code(&run(&req)), 0);
}

#[test]
fn uncommitted_modified_and_invalid_workloads_are_refused() {
    let repo = repo();
    let text =
        std::fs::read_to_string(repo.root().join("qualification/workloads/vars-v1.json")).unwrap();
    std::fs::write(
        repo.root().join("qualification/workloads/new-v1.json"),
        &text,
    )
    .unwrap();
    // Untracked workload: not committed (the dirty check comes later in the order).
    let e = refused(&repo, &repo.request("new-v1.json", "cpu"));
    assert!(matches!(e, Refusal::WorkloadNotCommitted(_)), "{e}");
    std::fs::remove_file(repo.root().join("qualification/workloads/new-v1.json")).unwrap();
    std::fs::write(
        repo.root().join("qualification/workloads/vars-v1.json"),
        text.replace("an integer", "an int"),
    )
    .unwrap();
    let e = refused(&repo, &repo.request("vars-v1.json", "cpu"));
    assert!(matches!(e, Refusal::WorkloadModified(_)), "{e}");
    git(repo.root(), &["checkout", "-q", "--", "."]);
    let e = refused(&repo, &repo.request("bad-v1.json", "cpu"));
    assert!(matches!(e, Refusal::InvalidWorkload(_)), "{e}");
    let mut req = repo.request("vars-v1.json", "cpu");
    req.workload = "src/lib.rs".into();
    assert!(matches!(refused(&repo, &req), Refusal::WorkloadPath(_)));
}

#[test]
fn unknown_variant_and_bad_host_id_are_refused() {
    let repo = repo();
    let e = refused(&repo, &repo.request("vars-v1.json", "gpu"));
    assert_eq!(
        e.to_string(),
        "unknown variant gpu; declared variants: [\"cpu\", \"cpu-alt\"]"
    );
    let mut req = repo.request("vars-v1.json", "cpu");
    req.host_id = "Bad Host".into();
    assert_eq!(refused(&repo, &req), Refusal::BadHostId);
    let mut req = repo.request("vars-v1.json", "cpu");
    req.term_grace_seconds = f64::NAN;
    assert_eq!(refused(&repo, &req), Refusal::GraceNotFinite);
    req.term_grace_seconds = 75.01;
    assert_eq!(refused(&repo, &req), Refusal::GraceTooLong);
}

#[test]
fn variable_errors_are_refused() {
    let repo = repo();
    for (vars, needle) in [
        (vec!["nope=1"], "unknown workload variable \"nope\""),
        (vec!["spare=y"], "is not used by the selected variant"),
        (vec!["count=2", "count=3"], "supplied more than once"),
        (vec!["count=1.0"], "invalid --var count"),
        (vec!["count=11"], "above its maximum"),
        (vec!["flag=yes"], "invalid --var flag"),
        (vec!["count"], "expected NAME=VALUE"),
    ] {
        let mut req = repo.request("vars-v1.json", "cpu");
        req.vars = vars.iter().map(|s| s.to_string()).collect();
        let e = refused(&repo, &req);
        assert!(matches!(e, Refusal::Variables(_)), "{e}");
        assert!(e.to_string().contains(needle), "{vars:?}: {e}");
    }
}

#[test]
fn receipt_and_run_directory_paths_are_refused() {
    let repo = repo();
    for out in [
        "src/receipt.json",
        "qualification/receipts/../../src/x.json",
        "/tmp/x.json",
        "qualification/receipts/r.txt",
        ".qualification/runs/runner-test-receipt-v1/environment.json",
    ] {
        let mut req = repo.request("vars-v1.json", "cpu");
        req.output = Some(out.into());
        let e = refused(&repo, &req);
        assert!(matches!(e, Refusal::ReceiptPath(_)), "{out}: {e}");
    }
    // Through a symlink.
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), repo.root().join(".qualification")).unwrap();
    let mut req = repo.request("vars-v1.json", "cpu");
    req.output = Some(".qualification/receipts/r.json".into());
    let e = refused(&repo, &req);
    assert!(e.to_string().contains("symlinks"), "{e}");
    let req = repo.request("vars-v1.json", "cpu");
    let e = refused(&repo, &req);
    assert!(matches!(e, Refusal::RunDirPath(_)), "{e}");
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    std::fs::remove_file(repo.root().join(".qualification")).unwrap();
    // Existing receipt and existing run directory.
    std::fs::create_dir_all(repo.root().join(".qualification/receipts")).unwrap();
    std::fs::write(repo.root().join(".qualification/receipts/r.json"), "keep").unwrap();
    let mut req = repo.request("vars-v1.json", "cpu");
    req.output = Some(".qualification/receipts/r.json".into());
    assert!(matches!(refused(&repo, &req), Refusal::ReceiptExists(_)));
    assert_eq!(
        std::fs::read_to_string(repo.root().join(".qualification/receipts/r.json")).unwrap(),
        "keep"
    );
    std::fs::create_dir_all(
        repo.root()
            .join(".qualification/runs/runner-test-receipt-v1"),
    )
    .unwrap();
    let req = repo.request("vars-v1.json", "cpu");
    assert!(matches!(refused(&repo, &req), Refusal::RunDirExists(_)));
    let mut req = repo.request("vars-v1.json", "cpu");
    req.receipt_id = Some("X".into());
    assert_eq!(refused(&repo, &req), Refusal::BadReceiptId);
}

#[test]
fn model_flags_must_fit_the_kind() {
    let repo = repo();
    let mut req = repo.request("vars-v1.json", "cpu");
    req.model_id = Some("m".into());
    assert_eq!(
        refused(&repo, &req).to_string(),
        "--model-id requires --model"
    );
    let mut req = repo.request("envkind-v1.json", "cpu");
    req.model = Some("models/m".into());
    assert_eq!(
        refused(&repo, &req).to_string(),
        "environment workloads do not accept --model"
    );
    // A case that uses ${model_path} needs --model.
    let req = repo.request("needsmodel-v1.json", "cpu");
    assert_eq!(
        refused(&repo, &req).to_string(),
        "--model is required for \"correctness\" workloads"
    );
}
