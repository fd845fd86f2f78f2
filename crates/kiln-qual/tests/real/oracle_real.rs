//! The numerical-oracle example: `qualification/workloads/oracle-llama-cpp-cpu-v1.json` runs end
//! to end through `kiln-qual run` — `kiln-qual oracle greedy` owns Debian's `llama-server`
//! (the candidate) and runs the Hugging Face reference worker contained — for both variants:
//! `q4_1` (the GGUF `scripts/setup-real-server` installs) and `f32` (its F32 requantization,
//! made here with the Debian root's `llama-quantize`). Each receipt passes `receipt check` with
//! every strict flag and carries the agreement metrics and the first divergence per prompt.
//!
//! Needs `scripts/setup-real-server` (llama-server, llama-quantize, SmolLM2) and
//! `scripts/setup-reference-python` (torch, transformers, gguf). Without them the trials are
//! reported ignored with the reason, and under `CI=true` they fail.

use crate::common;

use common::repo_root;

use qual_test_fixtures::harness::{self, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the oracle trials need (also the Vulkan oracle's, `vulkan_oracle_real`).
pub(crate) fn needs_parts() -> Result<(), String> {
    let root = repo_root();
    harness::needs_file(
        &root.join(".cache/real-server/llama-server"),
        "llama-server (run scripts/setup-real-server)",
    )?;
    harness::needs_file(
        &root.join(".cache/real-server/root/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
        "SmolLM2 (run scripts/setup-real-server)",
    )?;
    harness::needs_file(
        &root.join(".cache/real-server/root/usr/bin/llama-quantize"),
        "llama-quantize from the Debian root (run scripts/setup-real-server)",
    )?;
    harness::needs_file(
        &root.join(".cache/venv-reference/.requirements-sha256"),
        "the reference Python environment (run scripts/setup-reference-python)",
    )
}

/// A throwaway repository holding the workload and what its cases run.
fn checkout() -> tempfile::TempDir {
    common::example_checkout(
        &[
            "qualification/workloads/oracle-llama-cpp-cpu-v1.json",
            "qualification/oracles/launch-smollm2-f32.json",
            "qualification/oracles/launch-smollm2-q4_1.json",
            "qualification/oracles/smollm2-prompts.json",
            "qualification/oracles/tolerances-f32.json",
            "qualification/oracles/tolerances-q4_1.json",
            "scripts/kiln-qual",
            "tools/reference/worker.py",
        ],
        "oracle example",
    )
}

/// Runs one variant and checks its receipt; returns the receipt text.
fn run_variant(root: &Path, variant: &str, model: &Path) -> String {
    let receipt = format!(".qualification/receipts/oracle-{variant}.json");
    let out = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args([
            "run",
            "qualification/workloads/oracle-llama-cpp-cpu-v1.json",
            "--variant",
            variant,
            "--host-id",
            "ci-host",
            "--model",
        ])
        .arg(model)
        .args(["--output", &receipt, "--term-grace-seconds", "10"])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let check = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args([
            "receipt",
            "check",
            "--require-current-source",
            "--require-local-artifacts",
            "--require-known-commit",
            &receipt,
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let text = std::fs::read_to_string(root.join(&receipt)).unwrap();
    for m in [
        "argmax_agreement",
        "top10_overlap_min",
        "max_abs_error",
        "mean_abs_error",
        "cosine_min",
        "kl_divergence_max",
        "first divergence: capital",
        "story",
    ] {
        assert!(text.contains(m), "receipt lacks {m}: {text:.3000}");
    }
    // Every oracle result the case wrote validates with `oracle check`.
    let results: Vec<PathBuf> = walk(&root.join(".qualification"))
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".oracle-result.json"))
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    let ok = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["oracle", "check", "--verify-inputs"])
        .args(&results)
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).starts_with("OK "));
    no_leftovers();
    text
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Nothing of the engine or the worker is left (a /proc scan).
fn no_leftovers() {
    let leftover: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("--port 18131") || c.contains("tools/reference/worker.py"))
        .collect();
    assert!(leftover.is_empty(), "leftover: {leftover:?}");
}

fn q4_1_variant_passes_within_its_tolerances() {
    let d = checkout();
    let model = repo_root().join(".cache/real-server/root/models/smollm2");
    run_variant(d.path(), "q4_1", &model);
}

/// A directory holding the F32 requantization of the SmolLM2 Q4_1 GGUF and its sidecars.
fn f32_model() -> tempfile::TempDir {
    let rs = repo_root().join(".cache/real-server/root");
    let model = tempfile::tempdir().unwrap();
    let lib = format!(
        "{0}/usr/lib/x86_64-linux-gnu/llama:{0}/usr/lib/x86_64-linux-gnu:{0}/lib/x86_64-linux-gnu",
        rs.display()
    );
    let q = Command::new(rs.join("usr/lib64/ld-linux-x86-64.so.2"))
        .arg("--library-path")
        .arg(lib)
        .arg(rs.join("usr/bin/llama-quantize"))
        .arg("--allow-requantize")
        .arg(rs.join("models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
        .arg(model.path().join("SmolLM2-135M-Instruct.F32.gguf"))
        .arg("F32")
        .output()
        .unwrap();
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    // The same model's sidecars (config, tokenizer, chat template) for the fingerprint.
    for f in ["config.json", "tokenizer.json", "chat_template.jinja"] {
        std::fs::copy(rs.join("models/smollm2").join(f), model.path().join(f)).unwrap();
    }
    model
}

fn f32_variant_is_like_for_like() {
    let d = checkout();
    let model = f32_model();
    let text = run_variant(d.path(), "f32", model.path());
    assert!(text.contains("none in 16 steps"), "{text:.3000}");
}

/// `oracle greedy --n-probs 10` (a top-k view) in the checkout; returns the oracle result.
fn top_10_run(root: &Path, variant: &str, model: &Path, gguf: &str) -> PathBuf {
    let result = root.join(format!("top10-{variant}.case-result.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["oracle", "greedy", "--case-id", "top10", "--launch"])
        .arg(format!(
            "qualification/oracles/launch-smollm2-{variant}.json"
        ))
        .arg("--model-path")
        .arg(model)
        .args([
            "--prompts",
            "qualification/oracles/smollm2-prompts.json",
            "--steps",
            "16",
            "--vocab",
            "49152",
            "--n-probs",
            "10",
            "--reference-model",
            gguf,
            "--result",
        ])
        .arg(&result)
        .current_dir(root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{variant} top-10:\n{err}");
    assert!(
        err.contains("candidate top-10 view (overlap k = 10)"),
        "{err}"
    );
    assert!(
        err.contains(
            "not established by a top-k view: cosine, kl_divergence, max_abs_error, mean_abs_error"
        ),
        "{err}"
    );
    let oracle = root.join(format!("top10-{variant}.case-result.oracle-result.json"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&oracle).unwrap()).unwrap();
    for c in doc["cases"].as_array().unwrap() {
        assert_eq!(c["outcome"]["status"], "compared_top_k", "{c}");
        assert_eq!(
            c["candidate"]["view"],
            serde_json::json!({"kind": "top_k", "k": 10})
        );
        let s = &c["outcome"]["summary"];
        assert_eq!(s["listed"], 10);
        assert!(s.get("min_cosine").is_none() && s.get("max_kl_divergence").is_none());
        assert_eq!(c["greedy"]["tokens"].as_array().unwrap().len(), 16);
    }
    let case: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    let names: Vec<&str> = case["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"reference_argmax_listed"), "{names:?}");
    assert!(!names.contains(&"cosine_min"), "{names:?}");
    let ok = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["oracle", "check"])
        .arg(&oracle)
        .output()
        .unwrap();
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    no_leftovers();
    oracle
}

fn top_10_views_and_f32_vs_q4_1_attribution() {
    let d = checkout();
    let q4 = repo_root().join(".cache/real-server/root/models/smollm2");
    let f32 = f32_model();
    let a = top_10_run(
        d.path(),
        "f32",
        f32.path(),
        "SmolLM2-135M-Instruct.F32.gguf",
    );
    let b = top_10_run(d.path(), "q4_1", &q4, "SmolLM2-135M-Instruct.Q4_1.gguf");
    attribute_checked(&a, &b, &d.path().join("attribution.json"), 5);
}

/// `oracle attribute A B --output OUT`, checked: no prompt refused (the two references read
/// bit-identical weights), each of the `prompts` identical or attributed, and `oracle check
/// --verify-inputs` accepts the document. Returns it.
pub(crate) fn attribute_checked(a: &Path, b: &Path, out: &Path, prompts: u64) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["oracle", "attribute"])
        .arg(a)
        .arg(b)
        .arg("--output")
        .arg(out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    eprintln!("attribution:\n{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    let c = &doc["counts"];
    assert_eq!(c["refused"], 0, "{doc}");
    let total: u64 = ["candidate_a", "candidate_b", "neither", "identical"]
        .iter()
        .map(|k| c[k].as_u64().unwrap())
        .sum();
    assert_eq!(total, prompts, "{doc}");
    let ok = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["oracle", "check", "--verify-inputs"])
        .arg(out)
        .output()
        .unwrap();
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    doc
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::new(
            "q4_1_variant_passes_within_its_tolerances",
            q4_1_variant_passes_within_its_tolerances,
        )
        .needs(needs_parts()),
        Trial::new("f32_variant_is_like_for_like", f32_variant_is_like_for_like)
            .needs(needs_parts()),
        Trial::new(
            "top_10_views_and_f32_vs_q4_1_attribution",
            top_10_views_and_f32_vs_q4_1_attribution,
        )
        .needs(needs_parts()),
    ]
}
