//! Compatibility: `workload check --json` reaches the original implementation's verdict on
//! every real workload and every labelled mutant of `../shared/kiln-corpus`. Without the corpus
//! (a user's clone) both tests are reported ignored, and fail with `KIQ_REQUIRE_CORPUS=1`
//! (`qual_test_fixtures::harness`).

use crate::common;

use assert_cmd::Command;
use qual_test_fixtures::harness::{self, Trial};
use std::collections::BTreeMap;

fn corpus_present() -> Result<(), String> {
    harness::needs_dir(
        &common::repo_root().join("../shared/kiln-corpus"),
        "the Kiln corpus",
    )
}

fn check_json(files: &[std::path::PathBuf]) -> serde_json::Value {
    let out = Command::cargo_bin("kiln-qual")
        .unwrap()
        .args(["workload", "check", "--json"])
        .args(files)
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("json report")
}

fn json_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    v.sort();
    v
}

fn real_workloads_are_valid() {
    let corpus = common::corpus().expect("checked by the harness");
    let files = json_files(&corpus.join("workloads"));
    assert_eq!(files.len(), 31);
    let report = check_json(&files);
    let verdicts: Vec<(String, bool, bool, String)> = report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let path = w["path"].as_str().unwrap();
            let file = path.rsplit('/').next().unwrap().to_owned();
            (
                file,
                w["ok"].as_bool().unwrap(),
                true,
                w["errors"].to_string(),
            )
        })
        .collect();
    common::assert_verdicts("workloads", &verdicts);
}

fn labelled_mutants_agree() {
    let corpus = common::corpus().expect("checked by the harness");
    let dir = corpus.join("workload-mutants");
    let labels: BTreeMap<String, bool> = std::fs::read_to_string(dir.join("labels.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["file"].as_str().unwrap().to_owned(),
                v["ok"].as_bool().unwrap(),
            )
        })
        .collect();
    let files: Vec<_> = labels.keys().map(|f| dir.join(f)).collect();
    let report = check_json(&files);
    let verdicts: Vec<(String, bool, bool, String)> = report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let file = w["path"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned();
            let label = labels[&file];
            (
                file,
                w["ok"].as_bool().unwrap(),
                label,
                w["errors"].to_string(),
            )
        })
        .collect();
    assert_eq!(verdicts.len(), 400);
    common::assert_verdicts("workload-mutants", &verdicts);
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::new("real_workloads_are_valid", real_workloads_are_valid)
            .needs_corpus(corpus_present()),
        Trial::new("labelled_mutants_agree", labelled_mutants_agree).needs_corpus(corpus_present()),
    ]
}
