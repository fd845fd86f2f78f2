//! The serving example workload (`qualification/workloads/serving-mock-cpu-v1.json`) runs end
//! to end through the runner in a fresh git repository: `kiln-qual run` executes
//! `kiln-qual serve`, which owns the mock server, and the receipt validates. The case passes,
//! or — on a host too busy to measure — is declared `invalid run: …` by the product's
//! validity gate; nothing else is accepted.

use crate::common;

use common::{copy_dir, git, repo_root};

use std::process::Command;

#[test]
fn serving_mock_workload_passes_and_its_receipt_validates() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let src = repo_root();
    std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
    std::fs::copy(
        src.join("qualification/workloads/serving-mock-cpu-v1.json"),
        root.join("qualification/workloads/serving-mock-cpu-v1.json"),
    )
    .unwrap();
    copy_dir(
        &src.join("qualification/serving/mock"),
        &root.join("qualification/serving/mock"),
    );
    copy_dir(
        &src.join("qualification/fixtures/tiny-model"),
        &root.join("qualification/fixtures/tiny-model"),
    );
    // Commands find kiln-qual through the checkout's launcher (here: target/debug below).
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::copy(
        src.join("scripts/kiln-qual"),
        root.join("scripts/kiln-qual"),
    )
    .unwrap();
    std::fs::write(root.join(".gitignore"), ".qualification/\ntarget/\n").unwrap();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "serving example"]);
    std::fs::create_dir_all(root.join("target/debug")).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_kiln-qual"),
        root.join("target/debug/kiln-qual"),
    )
    .unwrap();

    let run = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .current_dir(root)
        .args([
            "run",
            "qualification/workloads/serving-mock-cpu-v1.json",
            "--variant",
            "cpu",
            "--host-id",
            "test-host",
            "--model",
            "qualification/fixtures/tiny-model",
            "--output",
            ".qualification/receipts/serving.json",
        ])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(matches!(run.status.code(), Some(0 | 1)), "{text}");
    let check = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .current_dir(root)
        .args(["receipt", "check", ".qualification/receipts/serving.json"])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let receipt: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join(".qualification/receipts/serving.json")).unwrap(),
    )
    .unwrap();
    let result = &receipt["results"][0];
    assert_eq!(result["id"], "mock-serving-c4");
    // On a busy host the product may refuse its own measurement (`invalid run: …`, exit 1);
    // that is the only failure accepted, and a wrong number never passes.
    if result["status"] == "failed" {
        let details = result.to_string();
        assert!(details.contains("invalid run: "), "{details}\n{text}");
        assert!(
            !details.contains("request failed") && !details.contains("lifecycle"),
            "{details}"
        );
        assert_eq!(run.status.code(), Some(1), "{text}");
    } else {
        assert_eq!(result["status"], "passed");
        assert_eq!(run.status.code(), Some(0), "{text}");
    }
    let names: Vec<&str> = result["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "itl_ms.p50",
            "output_tokens_per_second",
            "requests_failed",
            "slo_attainment",
            "ttft_ms.p50"
        ]
    );
    // The serving evidence sits next to the command's case result in the run directory.
    let runs = root.join(".qualification/runs");
    let mut found = false;
    for run_dir in std::fs::read_dir(&runs).unwrap() {
        let cases = run_dir.unwrap().path().join("cases");
        for case in std::fs::read_dir(cases).into_iter().flatten() {
            found |= case
                .unwrap()
                .path()
                .join("scratch/command-result.serve-evidence.json")
                .is_file();
        }
    }
    assert!(found, "serve evidence in the run directory");
}
