//! The real-server example: `qualification/workloads/serving-llama-cpp-cpu-v1.json` runs end
//! to end through `kiln-qual run` (which runs `kiln-qual serve`, which owns Debian's
//! llama.cpp `llama-server`, run through its Debian root's own loader by
//! `.cache/real-server/llama-server` — servers have no capabilities, so no `chroot`), and the
//! receipt passes `receipt check` with every strict flag.
//!
//! Needs what `scripts/setup-real-server` installs under `.cache/real-server/` (CI runs it
//! first). Without it the test is reported ignored with the reason, and under `CI=true` it
//! fails (`qual_test_fixtures::harness`): it is a real third-party server, not something a mock
//! can stand in for.

use crate::common;

use common::repo_root;
use qual_test_fixtures::harness::{self, Trial};

use std::process::Command;

/// What the test needs: the installed server and its launcher.
fn real_server_present() -> Result<(), String> {
    let cache = repo_root().join(".cache/real-server");
    harness::needs_file(
        &cache.join("llama-server"),
        "llama-server (run scripts/setup-real-server)",
    )?;
    Ok(())
}

fn llama_server_workload_passes_and_its_receipt_validates() {
    let src = repo_root();
    let cache = src.join(".cache/real-server");
    let model = cache.join("root/models/tiny");

    let d = common::example_checkout(
        &[
            "qualification/workloads/serving-llama-cpp-cpu-v1.json",
            "qualification/serving/llama-cpp/launch-tiny-workload.json",
            "qualification/serving/llama-cpp/corpus.jsonl",
            "scripts/kiln-qual",
        ],
        "serving example",
    );
    let root = d.path();

    let receipt = ".qualification/receipts/llama.json";
    let out = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args([
            "run",
            "qualification/workloads/serving-llama-cpp-cpu-v1.json",
            "--variant",
            "cpu",
            "--host-id",
            "ci-host",
            "--model",
        ])
        .arg(&model)
        .args(["--output", receipt, "--term-grace-seconds", "10"])
        .current_dir(root)
        .output()
        .unwrap();
    // The real server's truth is unknown: passed, or refused by the validity gate (a busy
    // host) — never any other failure; the receipt validates strictly either way.
    common::passed_or_refused_by_the_gate(root, &out);

    let check = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args([
            "receipt",
            "check",
            "--require-current-source",
            "--require-local-artifacts",
            "--require-known-commit",
            receipt,
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

    // The receipt carries the server's measured metrics and the model identity.
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(receipt)).unwrap()).unwrap();
    let text = v.to_string();
    assert!(text.contains("output_tokens_per_second"), "{text:.2000}");
    assert!(text.contains("tiny.gguf"), "{text:.2000}");
    // Nothing of the server is left: no process runs the tiny model (a /proc scan, so the
    // check cannot be skipped for want of a tool).
    let leftover: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| {
            c.contains("/models/tiny/tiny.gguf") || c.contains("llama-server-tiny-workload")
        })
        .collect();
    assert!(leftover.is_empty(), "leftover: {leftover:?}");
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![Trial::new(
        "llama_server_workload_passes_and_its_receipt_validates",
        llama_server_workload_passes_and_its_receipt_validates,
    )
    .needs(real_server_present())]
}
