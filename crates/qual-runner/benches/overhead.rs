//! Per-case runner overhead (`cargo bench -p qual-runner --bench overhead`).
//!
//! Runs a workload of 1 and of 200 `true` cases in a generated git repository and reports
//! `(t200 - t1) / 199` per case: everything the runner adds around one execution (case
//! directory, closed environment, contained spawn with its own session, cgroup and
//! loopback-only network namespace, capture, case-result file, artifact hashing). The
//! baseline, measured in the same run, is a bare `std::process::Command::new("true")` spawn and
//! wait. Target: under 5 ms per case.

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn git(root: &Path, args: &[&str]) {
    let st = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .status()
        .expect("git runs");
    assert!(st.success());
}

fn workload(id: &str, n: usize) -> String {
    let cases: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"id":"case-{i:04}","description":"true","required":true,"command":["true"],"working_directory":".","environment":{{}},"timeout_seconds":30,"expected_exit_codes":[0],"output_assertions":[],"result_protocol":{{"format":"qualification-case-result-v1","producer":"runner","path_environment_variable":"KILN_QUALIFICATION_CASE_RESULT","declared_metrics":["case_pass","exit_code","output_assertion_failures"]}}}}"#
            )
        })
        .collect();
    format!(
        r#"{{"schema_version":1,"workload_id":"{id}","kind":"correctness","description":"overhead","determinism":{{"seed":1,"seed_delivery":"fixed_fixture","repetitions":1,"case_order":"declared","max_parallel_cases":1,"network_access":"forbidden"}},"variables":[],"variants":[{{"id":"cpu","description":"cpu","backend":"cpu","device_requirement":"none","skip_policy":"fail","effective_config":{{}},"cases":[{}]}}],"comparison_policy":{{"mode":"self_contained_correctness","variant_pairs":[],"backend_pairs":[],"metric_rules":[]}}}}
"#,
        cases.join(",")
    )
}

fn run(root: &Path, file: &str, id: &str) -> f64 {
    let req = qual_runner::RunRequest {
        cwd: root.to_path_buf(),
        workload: format!("qualification/workloads/{file}").into(),
        variant: "cpu".into(),
        host_id: "bench-host".into(),
        output: Some(format!(".qualification/receipts/{id}.json").into()),
        vars: Vec::new(),
        model: None,
        model_id: None,
        receipt_id: Some(id.into()),
        term_grace_seconds: 1.0,
        command: vec!["bench".into()],
    };
    let t = Instant::now();
    let r = qual_runner::run(&req).expect("run completes");
    assert_eq!(r.verdict(), qual_receipt::model::Verdict::Passed);
    t.elapsed().as_secs_f64()
}

fn main() {
    let n = if std::env::args().any(|a| a == "--bench") {
        200
    } else {
        10
    };
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    git(root, &["init", "-q"]);
    std::fs::write(root.join(".gitignore"), ".qualification/\n").unwrap();
    std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
    std::fs::write(
        root.join("qualification/workloads/one-v1.json"),
        workload("one-v1", 1),
    )
    .unwrap();
    std::fs::write(
        root.join("qualification/workloads/many-v1.json"),
        workload("many-v1", n),
    )
    .unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "bench"]);

    let mut best = f64::MAX;
    for k in 0..3 {
        let t1 = run(root, "one-v1.json", &format!("one-{k}-v1"));
        let tn = run(root, "many-v1.json", &format!("many-{k}-v1"));
        best = best.min((tn - t1) / (n - 1) as f64);
    }
    let t = Instant::now();
    for _ in 0..n {
        Command::new("true").status().unwrap();
    }
    let spawn = t.elapsed().as_secs_f64() / n as f64;
    println!(
        "runner per-case overhead over {n} `true` cases: {:.2} ms (target < 5 ms); bare spawn+wait of `true`: {:.2} ms; ratio {:.1}x",
        best * 1000.0,
        spawn * 1000.0,
        best / spawn
    );
}
