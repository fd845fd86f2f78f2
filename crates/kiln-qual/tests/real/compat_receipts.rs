//! Compatibility: `receipt check --json` (basic mode) reaches the original implementation's
//! verdict on every real receipt and every labelled receipt mutant of `../shared/kiln-corpus`.
//!
//! Labels: the real receipts are all valid except the two pre-c8d9 `*-cuda-rtx4090-laptop-*`
//! receipts (older platform shape); the mutants carry `labels.jsonl`. A disagreement is allowed
//! only when `compat/deliberate-differences.json` lists it with a reason. Also: every real
//! receipt re-serializes byte for byte with the receipt writer's `to_pretty_json`. Without the
//! corpus (a user's clone has no `../shared`) the trials are reported ignored, and fail with
//! `KIQ_REQUIRE_CORPUS=1` (`qual_test_fixtures::harness`).

use assert_cmd::Command;
use qual_test_fixtures::harness::{self, Trial};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn corpus_present() -> Result<(), String> {
    harness::needs_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kiln-corpus/receipts"),
        "the Kiln corpus",
    )
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn corpus() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kiln-corpus");
    dir.join("receipts").is_dir().then_some(dir)
}

/// `(corpus, file) -> reason` for the reasoned deliberate differences of this check.
fn deliberate_differences() -> BTreeMap<(String, String), String> {
    let path = repo_root().join("compat/deliberate-differences.json");
    let Ok(bytes) = std::fs::read(&path) else {
        return BTreeMap::new();
    };
    let list: Vec<serde_json::Value> =
        serde_json::from_slice(&bytes).expect("compat/deliberate-differences.json is an array");
    list.iter()
        .map(|d| {
            let field = |k: &str| {
                d[k].as_str()
                    .unwrap_or_else(|| panic!("deliberate difference without {k}: {d}"))
                    .to_owned()
            };
            let reason = field("reason");
            assert!(
                !reason.trim().is_empty(),
                "deliberate difference without a reason: {d}"
            );
            ((field("corpus"), field("file")), reason)
        })
        .collect()
}

fn check_json(files: &[PathBuf]) -> Vec<(String, bool, Vec<String>)> {
    let out = Command::cargo_bin("kiln-qual")
        .unwrap()
        .args(["receipt", "check", "--json"])
        .args(files)
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json report");
    let entries = report["receipts"].as_array().expect("receipts array");
    assert_eq!(entries.len(), files.len());
    assert_eq!(
        report["ok"].as_bool(),
        Some(entries.iter().all(|e| e["ok"] == true))
    );
    assert_eq!(
        out.status.code(),
        Some(if report["ok"] == true { 0 } else { 1 })
    );
    entries
        .iter()
        .map(|e| {
            let path = e["path"].as_str().unwrap();
            let file = Path::new(path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let errors = e["errors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_owned())
                .collect();
            (file, e["ok"].as_bool().unwrap(), errors)
        })
        .collect()
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name().is_some_and(|n| n != "labels.jsonl")
        })
        .collect();
    v.sort();
    v
}

/// Compares verdicts with labels, prints the agreement, and fails on any unreasoned
/// disagreement (and on a listed difference that no longer occurs).
fn assert_agreement(
    corpus: &str,
    ours: &[(String, bool, Vec<String>)],
    labels: &BTreeMap<String, bool>,
) {
    let deliberate = deliberate_differences();
    let mut agree = 0;
    let mut unreasoned = Vec::new();
    for (file, ok, errors) in ours {
        let expected = *labels
            .get(file)
            .unwrap_or_else(|| panic!("{corpus}/{file} has no label"));
        if *ok == expected {
            agree += 1;
            assert!(
                !deliberate.contains_key(&(corpus.to_owned(), file.clone())),
                "{corpus}/{file} is listed as a deliberate difference but agrees: remove it"
            );
            continue;
        }
        let key = (corpus.to_owned(), file.clone());
        match deliberate.get(&key) {
            Some(reason) => println!("deliberate difference {corpus}/{file}: {reason}"),
            None => unreasoned.push(format!(
                "{corpus}/{file}: label ok={expected}, ours ok={ok}; our errors: {errors:?}"
            )),
        }
    }
    println!("{corpus}: {agree}/{} verdicts agree", ours.len());
    for line in &unreasoned {
        println!("unexplained disagreement: {line}");
    }
    assert!(
        unreasoned.is_empty(),
        "{} unreasoned disagreements",
        unreasoned.len()
    );
}

fn real_receipts_get_their_labelled_verdicts() {
    let corpus = corpus().expect("checked by the harness");
    let files = json_files(&corpus.join("receipts"));
    assert_eq!(files.len(), 30, "the corpus holds 30 real receipts");
    let labels: BTreeMap<String, bool> = files
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            // The two receipts of the pre-c8d9 runner (platform with a thermal guard and no
            // observations) are invalid under the current validator; every other one is valid.
            let old_runner = name.contains("-cuda-rtx4090-laptop-") && !name.contains("-wsl2-");
            (name, !old_runner)
        })
        .collect();
    assert_eq!(labels.values().filter(|ok| !**ok).count(), 2);
    let ours = check_json(&files);
    assert_agreement("receipts", &ours, &labels);
}

fn labelled_receipt_mutants_agree() {
    let corpus = corpus().expect("checked by the harness");
    let dir = corpus.join("receipt-mutants");
    let text = std::fs::read_to_string(dir.join("labels.jsonl")).expect("labels.jsonl");
    let labels: BTreeMap<String, bool> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("label line");
            (
                v["file"].as_str().unwrap().to_owned(),
                v["ok"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(labels.len(), 300, "300 labelled receipt mutants");
    let files: Vec<PathBuf> = labels.keys().map(|f| dir.join(f)).collect();
    let ours = check_json(&files);
    assert_agreement("receipt-mutants", &ours, &labels);
}

/// The receipt writer reproduces every real receipt byte for byte.
fn real_receipts_reserialize_byte_identically() {
    let dir = corpus().expect("checked by the harness").join("receipts");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        let v = qual_json::from_slice(&bytes).unwrap();
        assert_eq!(
            qual_receipt::write::to_pretty_json(&v).as_bytes(),
            &bytes[..],
            "{}",
            p.display()
        );
        n += 1;
    }
    assert!(n > 0);
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::new(
            "real_receipts_reserialize_byte_identically",
            real_receipts_reserialize_byte_identically,
        )
        .needs_corpus(corpus_present()),
        Trial::new(
            "real_receipts_get_their_labelled_verdicts",
            real_receipts_get_their_labelled_verdicts,
        )
        .needs_corpus(corpus_present()),
        Trial::new(
            "labelled_receipt_mutants_agree",
            labelled_receipt_mutants_agree,
        )
        .needs_corpus(corpus_present()),
    ]
}
