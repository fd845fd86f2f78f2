//! `kiln-qual workload check|show` as a user sees it: exit codes, messages and snapshots
//! (paths and digests redacted), and bad input that must never panic.

use crate::common;

use assert_cmd::Command;
use std::io::Write;

fn kq() -> Command {
    let mut c = Command::cargo_bin("kiln-qual").unwrap();
    c.current_dir(common::repo_root());
    c
}

/// Replaces sha256 digests and temporary paths with stable markers.
fn redact(s: &str) -> String {
    let mut out = String::new();
    for line in s.lines() {
        let mut l = line.to_owned();
        while let Some(i) = l.find("sha256:") {
            let end = (i + 7 + 64).min(l.len());
            l.replace_range(i..end, "[DIGEST]");
        }
        if let Some(i) = l.find("/tmp/") {
            let end = l[i..].find([' ', ':']).map_or(l.len(), |e| i + e);
            l.replace_range(i..end, "[TMP]");
        }
        out.push_str(&l);
        out.push('\n');
    }
    out
}

#[test]
fn check_bundled_examples_ok() {
    let out = kq()
        .args([
            "workload",
            "check",
            "qualification/workloads/cpu-smoke-v1.json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!(redact(&String::from_utf8_lossy(&out.stdout)), @"OK qualification/workloads/cpu-smoke-v1.json [DIGEST]");
}

#[test]
fn check_reports_every_violation_with_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.json");
    let mut doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            common::repo_root().join("qualification/workloads/cpu-smoke-v1.json"),
        )
        .unwrap(),
    )
    .unwrap();
    doc["variants"][0]["cases"][0]["command"] = serde_json::json!(["bash", "-c", "uname ${seed}"]);
    doc["variants"][0]["cases"][0]["timeout_seconds"] = serde_json::json!(0);
    doc["surprise"] = serde_json::json!(true);
    std::fs::write(&p, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let out = kq().args(["workload", "check"]).arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(redact(&String::from_utf8_lossy(&out.stderr)), @r"
    FAILED [TMP]
      /: workload has unknown keys: surprise
      /variants/0/cases/0/command/2: workload.variants[0].cases[0].command[2] placeholders must occupy the entire argv or environment value
      /variants/0/cases/0/command: workload.variants[0].cases[0].command cannot use shell command-string evaluation
      /variants/0/cases/0/timeout_seconds: workload.variants[0].cases[0].timeout_seconds must be a positive integer
    1 of 1 workload files invalid
    ");
}

#[test]
fn check_json_is_stable() {
    let out = kq()
        .args([
            "workload",
            "check",
            "--json",
            "qualification/workloads/cpu-smoke-v1.json",
            "missing.json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["workloads"][0]["ok"], true);
    assert_eq!(v["workloads"][0]["variants"], serde_json::json!(["cpu"]));
    assert_eq!(v["workloads"][1]["ok"], false);
    assert!(v["workloads"][1]["sha256"].is_null());
    let msg = v["workloads"][1]["errors"][0]["message"].as_str().unwrap();
    assert!(msg.starts_with("cannot read missing.json"), "{msg}");
}

#[test]
fn usage_errors_exit_2() {
    kq().args(["workload", "check"]).assert().code(2);
    kq().args(["workload", "frobnicate"]).assert().code(2);
    kq().args(["no-such-command"]).assert().code(2);
}

fn one_line_failure(path: &std::path::Path) -> String {
    let out = kq().args(["workload", "check"]).arg(path).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let detail: Vec<&str> = stderr.lines().filter(|l| l.starts_with("  ")).collect();
    assert_eq!(detail.len(), 1, "{stderr}");
    detail[0].to_owned()
}

#[test]
fn bad_input_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    // Random bytes (deterministic pseudo-random).
    let mut x: u64 = 0x9E3779B97F4A7C15;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let random = dir.path().join("random.json");
    std::fs::write(&random, bytes).unwrap();
    one_line_failure(&random);

    // A 100 MB string: refused by the size limit before it is read whole.
    let big = dir.path().join("big.json");
    let mut f = std::fs::File::create(&big).unwrap();
    f.write_all(b"{\"description\": \"").unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..100 {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(b"\"}").unwrap();
    drop(f);
    assert!(one_line_failure(&big).contains("larger than the limit"));

    // 10 000 nested arrays.
    let deep = dir.path().join("deep.json");
    std::fs::write(
        &deep,
        format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)),
    )
    .unwrap();
    assert!(one_line_failure(&deep).contains("nesting deeper"));

    // A directory and an unreadable path.
    assert!(one_line_failure(dir.path()).contains("not a regular file (directory)"));
    assert!(one_line_failure(&dir.path().join("nope.json")).contains("cannot read"));
}

#[test]
fn show_describes_variants_and_policy() {
    let out = kq()
        .args([
            "workload",
            "show",
            "qualification/workloads/cpu-smoke-v1.json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!(redact(&String::from_utf8_lossy(&out.stdout)), @r"
    cpu-smoke-v1 (correctness)  [DIGEST]
    Smallest CPU qualification: the host answers basic identity probes with bounded, asserted output.
    seed: 20261129  repetitions: 1

    VARIANT  BACKEND  DEVICE  SKIP  CASES
    cpu      cpu      none    fail  kernel-identity

    comparison: self-contained correctness: the verdict comes from each case's own assertions; receipts are not compared
    ");
    let out = kq()
        .args([
            "workload",
            "show",
            "--json",
            "qualification/workloads/cpu-smoke-v1.json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["variants"][0]["cases"][0]["id"], "kernel-identity");
    assert_eq!(v["variants"][0]["device_requirement"], "none");
}
