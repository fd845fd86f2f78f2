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

mod common;

use common::repo_root;

use qual_test_fixtures::harness::{self, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;

fn needs_parts() -> Result<(), String> {
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

fn f32_variant_is_like_for_like() {
    let d = checkout();
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
    let text = run_variant(d.path(), "f32", model.path());
    assert!(text.contains("none in 16 steps"), "{text:.3000}");
}

fn main() {
    harness::run(vec![
        Trial::new(
            "q4_1_variant_passes_within_its_tolerances",
            q4_1_variant_passes_within_its_tolerances,
        )
        .needs(needs_parts()),
        Trial::new("f32_variant_is_like_for_like", f32_variant_is_like_for_like)
            .needs(needs_parts()),
    ])
}
