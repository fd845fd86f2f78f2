//! A real Vulkan device through the whole runner: `qualification/workloads/vulkan-environment-v1.json`
//! on the host's own Vulkan driver (CI installs Debian's Mesa lavapipe, a conformant Vulkan
//! implementation on the CPU, and `vulkaninfo`), and the same workload with the driver hidden.
//!
//! Then the real server on Vulkan: `qualification/workloads/serving-llama-cpp-vulkan-v1.json`
//! (llama.cpp's ggml Vulkan backend on the real-server root's lavapipe, through
//! `.cache/real-server/llama-server-vulkan`; its `cpu` variant serves the same case on the CPU
//! backend, and `compare` refuses to compare the two for performance), and the same server with its driver hidden and no
//! `--device`, which ggml answers on the CPU after a warning: `serve` must refuse it because
//! the server never states its Vulkan device (the recipe's `device_report`).
//!
//! Needs `vulkaninfo` and a Vulkan ICD on this host (`apt-get install mesa-vulkan-drivers
//! vulkan-tools`), and for the server trials what `scripts/setup-real-server` installs; without
//! them each trial is reported ignored with the reason, and under `CI=true` it fails
//! (`qual_test_fixtures::harness`): a mock cannot stand in for a driver.

use crate::common;

use qual_test_fixtures::harness::{self, Trial};

use std::path::Path;
use std::process::Command;

const WORKLOAD: &str = "qualification/workloads/vulkan-environment-v1.json";

/// What the trials need: `vulkaninfo` on a trusted path and an installed ICD.
fn vulkan_present() -> Result<(), String> {
    harness::needs_file(
        Path::new("/usr/bin/vulkaninfo"),
        "vulkaninfo (apt-get install vulkan-tools)",
    )?;
    harness::needs_dir(
        Path::new("/usr/share/vulkan/icd.d"),
        "a Vulkan driver (apt-get install mesa-vulkan-drivers)",
    )
}

fn run(root: &Path, out: &str, hide_driver: bool) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiln-qual"));
    cmd.args([
        "run",
        WORKLOAD,
        "--variant",
        "vulkan",
        "--host-id",
        "ci-host",
        "--output",
        out,
    ])
    .current_dir(root);
    if hide_driver {
        // The loader finds no driver: the "no device" path, cheaply and for real.
        cmd.env("VK_ICD_FILENAMES", "/nonexistent/icd.json");
    }
    cmd.output().unwrap()
}

fn read(root: &Path, rel: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(root.join(rel)).unwrap()).unwrap()
}

fn the_host_vulkan_device_is_recorded_truthfully() {
    let d = common::example_checkout(&[WORKLOAD], "vulkan example");
    let root = d.path();
    let receipt = ".qualification/receipts/vulkan.json";
    let o = run(root, receipt, false);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let v = read(root, receipt);
    assert_eq!(v["qualification"]["backend"], "vulkan");
    let device = &v["environment"]["device"];
    let runtime = &v["environment"]["runtime"];
    // Every fact comes from the driver, never invented: a device type, a driver id, a
    // conformance version, a device uuid, and an architecture only where the name states one.
    let kind = runtime["vulkan_device_type"].as_str().unwrap();
    assert!(
        [
            "cpu",
            "integrated_gpu",
            "discrete_gpu",
            "virtual_gpu",
            "other"
        ]
        .contains(&kind),
        "{runtime}"
    );
    assert!(runtime["vulkan_driver_id"]
        .as_str()
        .unwrap()
        .starts_with("DRIVER_ID_"));
    assert!(runtime["vulkan_conformance_version"]
        .as_str()
        .unwrap()
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.'));
    assert!(device["device_uuid"].as_str().is_some(), "{device}");
    assert!(runtime["vulkan_memory_heaps"]
        .as_str()
        .unwrap()
        .starts_with("0: "));
    let name = device["name"].as_str().unwrap();
    if name.starts_with("llvmpipe") {
        assert_eq!(kind, "cpu");
        assert_eq!(device["architecture"], "unavailable", "{device}");
    }
    // The original validators' strict check accepts it; show names a software device.
    let check = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["receipt", "check", "--require-current-source", receipt])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let show = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["receipt", "show", receipt])
        .current_dir(root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert_eq!(
        text.contains("a CPU implementation of Vulkan"),
        kind == "cpu",
        "{text}"
    );
}

fn a_hidden_driver_fails_the_required_device_by_name() {
    let d = common::example_checkout(&[WORKLOAD], "vulkan example");
    let root = d.path();
    let receipt = ".qualification/receipts/no-device.json";
    let o = run(root, receipt, true);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    let v = read(root, receipt);
    assert_eq!(v["qualification"]["verdict"], "failed");
    let text = v.to_string();
    assert!(text.contains("vulkan-device-probe"), "{text:.3000}");
    assert!(
        text.contains("required vulkan device was not detected"),
        "{text:.3000}"
    );
    assert_eq!(v["environment"]["device"]["name"], "unavailable");
}

/// What the server trials need: the Vulkan launcher of `scripts/setup-real-server`.
pub(crate) fn vulkan_server_present() -> Result<(), String> {
    vulkan_present()?;
    harness::needs_file(
        &common::repo_root().join(".cache/real-server/llama-server-vulkan"),
        "llama-server on ggml's Vulkan backend (run scripts/setup-real-server)",
    )
}

const SERVING: &str = "qualification/workloads/serving-llama-cpp-vulkan-v1.json";
const LAUNCH: &str = "qualification/serving/llama-cpp/launch-tiny-vulkan-workload.json";
const CPU_LAUNCH: &str = "qualification/serving/llama-cpp/launch-tiny-workload.json";
const CORPUS: &str = "qualification/serving/llama-cpp/corpus.jsonl";

fn llama_server_on_vulkan_qualifies_and_states_its_device() {
    let model = common::repo_root().join(".cache/real-server/root/models/tiny");
    let d = common::example_checkout(
        &[SERVING, LAUNCH, CPU_LAUNCH, CORPUS, "scripts/kiln-qual"],
        "vulkan serving example",
    );
    let root = d.path();
    let receipt = ".qualification/receipts/vulkan-serving.json";
    let out = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args([
            "run",
            SERVING,
            "--variant",
            "vulkan",
            "--host-id",
            "ci-host",
            "--model",
        ])
        .arg(&model)
        .args(["--output", receipt, "--term-grace-seconds", "10"])
        .current_dir(root)
        .output()
        .unwrap();
    common::passed_or_refused_by_the_gate(root, &out);
    let v = read(root, receipt);
    assert_eq!(v["qualification"]["backend"], "vulkan");
    // The server's own statement of its device is in the case's serve evidence.
    let evidence: Vec<String> = walk(&root.join(".qualification"))
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".serve-evidence.json"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(
        evidence
            .iter()
            .any(|e| e.contains("device_reported") && e.contains("using device Vulkan0 (")),
        "no device statement in {} evidence files",
        evidence.len()
    );
    // The same case on the CPU backend, then a performance comparison of the two: refused with
    // the contract's reasons (a performance comparison is one variant on one backend
    // environment), and no metric is evaluated.
    let cpu = ".qualification/receipts/cpu-serving.json";
    let out = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["run", SERVING, "--variant", "cpu", "--host-id", "ci-host"])
        .arg("--model")
        .arg(&model)
        .args(["--output", cpu, "--term-grace-seconds", "10"])
        .current_dir(root)
        .output()
        .unwrap();
    common::passed_or_refused_by_the_gate(root, &out);
    let o = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args([
            "compare",
            cpu,
            receipt,
            "--workload-manifest",
            SERVING,
            "--json",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["mode"], "same_environment_performance");
    assert_eq!(doc["compatible"], false, "{doc}");
    let errors = doc["errors"].to_string();
    for e in [
        "incompatible workload_variant identity",
        "incompatible backend_environment identity",
    ] {
        assert!(errors.contains(e), "{errors}");
    }
    assert_eq!(doc["metric_evaluations"], serde_json::json!([]), "{doc}");
}

/// Every file under `dir`, recursively.
pub(crate) fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
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

fn a_silent_cpu_fallback_is_refused() {
    let src = common::repo_root();
    let d = common::example_checkout(&[LAUNCH, CORPUS], "vulkan fallback");
    let root = d.path();
    // The same recipe without `--device Vulkan0` and with the driver hidden: ggml warns
    // "no usable GPU found" and serves on the CPU.
    let mut recipe: serde_json::Value =
        serde_json::from_slice(&std::fs::read(src.join(LAUNCH)).unwrap()).unwrap();
    let argv = recipe["command"].as_array_mut().unwrap();
    let i = argv.iter().position(|a| a == "--device").unwrap();
    argv.drain(i..i + 2);
    recipe["environment"]["VK_ICD_FILENAMES"] = "/nonexistent/icd.json".into();
    recipe["id"] = "llama-server-tiny-vulkan-hidden".into();
    let hidden = root.join("qualification/serving/llama-cpp/hidden.json");
    std::fs::write(&hidden, serde_json::to_vec_pretty(&recipe).unwrap()).unwrap();
    let model = src.join(".cache/real-server/root/models/tiny");
    let out = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["serve", "--launch"])
        .arg(&hidden)
        .args(["--corpus", CORPUS, "--seed", "1", "--model-path"])
        .arg(&model)
        .args([
            "--concurrency",
            "1",
            "--warmup",
            "0",
            "--requests",
            "2",
            "--result",
            "r.json",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the server did not report serving on Vulkan0"),
        "{stderr}"
    );
    let r = read(root, "r.json");
    assert_eq!(r["status"], "failed", "{r}");
    // It did answer (on the CPU): the refusal is about the device, not a dead server.
    let ev = std::fs::read_to_string(root.join("r.serve-evidence.json")).unwrap();
    assert!(ev.contains("\"ready\""), "{ev:.2000}");
}

/// Every workload variant on the Vulkan backend in `qualification/workloads/`, with the model
/// directory its cases need (`None`: no `${model_path}`).
fn vulkan_variants() -> Vec<(String, String, Option<&'static str>)> {
    let dir = common::repo_root().join("qualification/workloads");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        let w: serde_json::Value = serde_json::from_str(&text).unwrap();
        for v in w["variants"].as_array().unwrap() {
            if v["backend"] != "vulkan" {
                continue;
            }
            let model = if !text.contains("${model_path}") {
                None
            } else if text.contains("smollm2") {
                Some("smollm2")
            } else {
                Some("tiny")
            };
            let rel = format!(
                "qualification/workloads/{}",
                e.file_name().to_string_lossy()
            );
            out.push((rel, v["id"].as_str().unwrap().to_string(), model));
        }
    }
    out.sort();
    out
}

/// With the driver hidden from the runner's device probe, every Vulkan variant is handled as
/// its `skip_policy` says (all say `fail`: the contract allows nothing else with a required
/// device): no case runs, each result names the missing device, and the verdict is failed; the
/// receipt still validates and `receipt verify` recomputes it from the run directory.
fn a_hidden_driver_runs_no_vulkan_case_and_fails_as_the_skip_policy_says() {
    let variants = vulkan_variants();
    assert!(variants.len() >= 3, "{variants:?}");
    let files: Vec<&str> = variants.iter().map(|(w, _, _)| w.as_str()).collect();
    let d = common::example_checkout(&files, "vulkan no-device");
    let root = d.path();
    for (i, (workload, variant, model)) in variants.iter().enumerate() {
        let w: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join(workload)).unwrap()).unwrap();
        let declared = w["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["id"] == variant.as_str())
            .unwrap();
        let receipt = format!(".qualification/receipts/no-device-{i}.json");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiln-qual"));
        cmd.args([
            "run",
            workload,
            "--variant",
            variant,
            "--host-id",
            "ci-host",
        ])
        .args(["--output", &receipt])
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .current_dir(root);
        if let Some(m) = model {
            cmd.arg("--model").arg(
                common::repo_root()
                    .join(".cache/real-server/root/models")
                    .join(m),
            );
        }
        let o = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{workload} {variant}: {stderr}");
        let v = read(root, &receipt);
        assert_eq!(v["qualification"]["verdict"], "failed", "{workload}");
        assert_eq!(declared["skip_policy"], "fail", "{workload} {variant}");
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), declared["cases"].as_array().unwrap().len());
        for r in results {
            let details = r["details"].as_str().unwrap();
            assert!(
                details.starts_with("not executed: required vulkan device was not detected"),
                "{workload}: {details}"
            );
            assert_eq!(r["metrics"], serde_json::json!([]), "{workload}");
            assert_ne!(r["status"], "passed", "{workload}");
        }
        // `fail`: the skipped cases fail the first required result, by that rule's name.
        let first = results.iter().find(|r| r["required"] == true).unwrap();
        assert_eq!(first["status"], "failed");
        assert!(
            first["details"]
                .as_str()
                .unwrap()
                .contains("variant skip_policy forbids skipped cases"),
            "{first}"
        );
        let run_dir = root
            .join(".qualification/runs")
            .join(v["receipt_id"].as_str().unwrap());
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run_dir.join("run-config.json")).unwrap())
                .unwrap();
        assert_eq!(config["case_execution_count"], 0);
        assert_eq!(config["pre_case_failure"], "required_device_not_detected");
        assert!(!run_dir.join("cases").exists(), "{workload}: a case ran");
        for args in [&["receipt", "check"][..], &["receipt", "verify"][..]] {
            let c = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
                .args(args)
                .arg(&receipt)
                .current_dir(root)
                .output()
                .unwrap();
            assert_eq!(
                c.status.code(),
                Some(0),
                "{args:?} {workload}: {}",
                String::from_utf8_lossy(&c.stderr)
            );
        }
    }
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::new(
            "the_host_vulkan_device_is_recorded_truthfully",
            the_host_vulkan_device_is_recorded_truthfully,
        )
        .needs(vulkan_present()),
        Trial::new(
            "a_hidden_driver_fails_the_required_device_by_name",
            a_hidden_driver_fails_the_required_device_by_name,
        )
        .needs(vulkan_present()),
        Trial::new(
            "a_hidden_driver_runs_no_vulkan_case_and_fails_as_the_skip_policy_says",
            a_hidden_driver_runs_no_vulkan_case_and_fails_as_the_skip_policy_says,
        )
        .needs(vulkan_server_present()),
        Trial::new(
            "llama_server_on_vulkan_qualifies_and_states_its_device",
            llama_server_on_vulkan_qualifies_and_states_its_device,
        )
        .needs(vulkan_server_present()),
        Trial::new(
            "a_silent_cpu_fallback_is_refused",
            a_silent_cpu_fallback_is_refused,
        )
        .needs(vulkan_server_present()),
    ]
}
