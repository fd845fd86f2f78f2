//! The Vulkan oracle and the cross-backend comparison, end to end on real parts:
//! `qualification/workloads/oracle-llama-cpp-vulkan-v1.json` runs through `kiln-qual run` for
//! both variants — `cpu` (Debian's llama-server on ggml's CPU backend) and `vulkan` (the same
//! server on ggml's Vulkan backend over the real-server root's lavapipe) — each against the
//! contained Hugging Face reference on the same Q4_1 GGUF weights. Then, from those two real
//! receipts and their oracle results: `oracle attribute` (which backend agrees with the
//! reference where the two diverge), `compare` (the declared cpu↔vulkan correctness pair is
//! admitted; a performance comparison across the two backends is refused with the contract's
//! reasons), and `report` (the backend matrix, the cross-backend comparison and the
//! software-device caveat).
//!
//! Needs what `scripts/setup-real-server` and `scripts/setup-reference-python` install and a
//! Vulkan driver with `vulkaninfo` on this host (the runner's device probe). Without them the
//! trial is reported ignored with the reason, and under `CI=true` it fails: neither a driver
//! nor a reference can be mocked here.

use crate::common;
use crate::vulkan_real::walk;

use qual_test_fixtures::harness::Trial;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const WORKLOAD: &str = "qualification/workloads/oracle-llama-cpp-vulkan-v1.json";

fn needs() -> Result<(), String> {
    crate::vulkan_real::vulkan_server_present()?;
    crate::oracle_real::needs_parts()
}

fn kiln(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(args)
        .current_dir(root)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs one variant, checks its receipt strictly; returns its oracle result's path.
fn run_variant(root: &Path, variant: &str) -> PathBuf {
    let model = common::repo_root().join(".cache/real-server/root/models/smollm2");
    let receipt = format!(".qualification/receipts/{variant}.json");
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args([
            "run",
            WORKLOAD,
            "--variant",
            variant,
            "--host-id",
            "ci-host",
        ])
        .arg("--model")
        .arg(&model)
        .args(["--output", &receipt, "--term-grace-seconds", "10"])
        .current_dir(root)
        .output()
        .unwrap();
    eprintln!(
        "{variant}: kiln-qual run took {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let check = kiln(
        root,
        &[
            "receipt",
            "check",
            "--require-current-source",
            "--require-local-artifacts",
            "--require-known-commit",
            &receipt,
        ],
    );
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(&receipt)).unwrap()).unwrap();
    assert_eq!(v["qualification"]["backend"], variant);
    let details = v["results"][0]["details"].as_str().unwrap();
    eprintln!("{variant}: {details}");
    assert!(details.contains("first divergence: capital"), "{details}");
    let results: Vec<PathBuf> = walk(&root.join(".qualification/runs"))
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".oracle-result.json"))
        .filter(|p| run_of(root, p) == v["receipt_id"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    let ok = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["oracle", "check", "--verify-inputs"])
        .arg(&results[0])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    results[0].clone()
}

/// The run directory (receipt id) an evidence file sits under.
fn run_of(root: &Path, p: &Path) -> String {
    p.strip_prefix(root.join(".qualification/runs"))
        .unwrap()
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned()
}

/// A copy of the workload whose policy asks for what the contract forbids, committed (the
/// comparator reads manifests at HEAD); returns its path.
fn committed_variant(root: &Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> String {
    let mut w: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(WORKLOAD)).unwrap()).unwrap();
    edit(&mut w);
    let rel = format!("qualification/workloads/{name}.json");
    std::fs::write(root.join(&rel), serde_json::to_vec_pretty(&w).unwrap()).unwrap();
    common::git(root, &["add", &rel]);
    common::git(root, &["commit", "-q", "-m", name]);
    rel
}

fn performance_comparisons_across_backends_are_refused(root: &Path) {
    let perf_rule = serde_json::json!({
        "scope": "result", "result_id": "smollm2-q4-1-greedy-oracle-short",
        "metric": "max_abs_error", "metric_class": "performance", "unit": "log_prob",
        "aggregation": "max_over_steps", "lower_is_better": true, "operator": "not_greater",
        "absolute_tolerance": 0, "relative_tolerance": 0.25, "required": true
    });
    let cross = committed_variant(root, "perf-rule-in-cross", |w| {
        w["comparison_policy"]["metric_rules"]
            .as_array_mut()
            .unwrap()
            .push(perf_rule.clone());
    });
    let same = committed_variant(root, "perf-mode-across-backends", |w| {
        w["kind"] = "performance".into();
        w["comparison_policy"]["mode"] = "same_environment_performance".into();
        for r in w["comparison_policy"]["metric_rules"]
            .as_array_mut()
            .unwrap()
        {
            r["metric_class"] = "performance".into();
        }
    });
    for (manifest, reasons) in [
        (
            cross.as_str(),
            &["cross-backend comparison forbids performance metrics"][..],
        ),
        (
            same.as_str(),
            &["mode same_environment_performance cannot declare variant or backend pairs"][..],
        ),
    ] {
        let o = compare(root, manifest, false);
        let t = text(&o);
        eprintln!("{manifest}: {t}");
        assert_eq!(o.status.code(), Some(1), "{t}");
        // Each violation on a line of its own (not `\x0a`-joined into the headline).
        assert!(!t.contains("\\x0a"), "{manifest}: {t}");
        for r in reasons {
            assert!(
                t.lines().any(|l| l.starts_with("  - ") && l.contains(r)),
                "{manifest}: {t}"
            );
        }
    }
}

/// `compare cpu.json vulkan.json --workload-manifest MANIFEST` (with `--json`).
fn compare(root: &Path, manifest: &str, json: bool) -> Output {
    let mut args = vec![
        "compare",
        ".qualification/receipts/cpu.json",
        ".qualification/receipts/vulkan.json",
        "--workload-manifest",
        manifest,
    ];
    if json {
        args.push("--json");
    }
    kiln(root, &args)
}

fn cross_backend_comparison(root: &Path) -> String {
    let o = compare(root, WORKLOAD, true);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["mode"], "cross_backend_correctness");
    assert_eq!(doc["ok"], true, "{doc}");
    assert_eq!(doc["metric_deltas"], serde_json::json!([]), "{doc}");
    let evaluations = doc["metric_evaluations"].as_array().unwrap();
    assert_eq!(evaluations.len(), 3, "{doc}");
    for e in evaluations {
        assert_eq!(e["status"], "passed", "{e}");
        assert_eq!(e["metric_class"], "correctness");
    }
    let allowed = doc["compatibility"]["allowed_differences"].to_string();
    assert!(allowed.contains("\"backend\""), "{allowed}");
    let path = "cpu-vs-vulkan.comparison.json";
    std::fs::write(root.join(path), &o.stdout).unwrap();
    path.into()
}

fn report(root: &Path, comparison: &str) {
    let o = kiln(
        root,
        &[
            "report",
            ".qualification/receipts",
            comparison,
            "--markdown",
            "--html",
            "report.html",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!("report:\n{md}");
    for needle in [
        "oracle-llama-cpp-vulkan-v1",
        "| cpu |",
        "| vulkan |",
        "mode `cross\\_backend\\_correctness`",
        "a CPU implementation of Vulkan",
    ] {
        assert!(md.contains(needle), "the Markdown lacks {needle:?}:\n{md}");
    }
    let html = std::fs::read_to_string(root.join("report.html")).unwrap();
    for needle in [
        "cross_backend_correctness",
        "a CPU implementation of Vulkan",
    ] {
        assert!(html.contains(needle), "the HTML lacks {needle:?}");
    }
}

fn cpu_and_vulkan_oracles_attribute_compare_and_report() {
    let d = common::example_checkout(
        &[
            WORKLOAD,
            "qualification/oracles/launch-smollm2-q4_1.json",
            "qualification/oracles/launch-smollm2-q4_1-vulkan.json",
            "qualification/oracles/smollm2-prompts-short.json",
            "qualification/oracles/tolerances-q4_1.json",
            "qualification/oracles/tolerances-q4_1-vulkan.json",
            "scripts/kiln-qual",
            "tools/reference/worker.py",
        ],
        "vulkan oracle example",
    );
    let root = d.path();
    let cpu = run_variant(root, "cpu");
    let vulkan = run_variant(root, "vulkan");
    // The Vulkan run's server stated its device (a silent CPU fallback fails the case).
    let stated = walk(&root.join("target/serving-logs"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("vulkan-oracle"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .any(|log| log.contains("using device Vulkan0 ("));
    assert!(stated, "the Vulkan server's log does not state Vulkan0");
    // A = cpu, B = vulkan. Both references teacher-force the same weights on the CPU: where
    // the two backends' prefixes agree, so do the two reference runs.
    let out = root.join("cpu-vs-vulkan.attribution.json");
    crate::oracle_real::attribute_checked(&cpu, &vulkan, &out, 3);
    let comparison = cross_backend_comparison(root);
    report(root, &comparison);
    performance_comparisons_across_backends_are_refused(root);
}

/// The Vulkan oracle's recipe without `--device` and with the driver hidden: ggml warns and
/// serves on the CPU, so `oracle greedy` must fail before any request because the server
/// never states its Vulkan device; no reference runs and nothing is compared.
fn the_oracle_refuses_a_silent_cpu_fallback() {
    let launch = "qualification/oracles/launch-smollm2-q4_1-vulkan.json";
    let prompts = "qualification/oracles/smollm2-prompts-short.json";
    let tolerances = "qualification/oracles/tolerances-q4_1-vulkan.json";
    let d = common::example_checkout(
        &[launch, prompts, tolerances, "tools/reference/worker.py"],
        "vulkan oracle fallback",
    );
    let root = d.path();
    let mut recipe: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(launch)).unwrap()).unwrap();
    let argv = recipe["command"].as_array_mut().unwrap();
    let i = argv.iter().position(|a| a == "--device").unwrap();
    argv.drain(i..i + 2);
    recipe["environment"]["VK_ICD_FILENAMES"] = "/nonexistent/icd.json".into();
    let hidden = "qualification/oracles/hidden.json";
    std::fs::write(
        root.join(hidden),
        serde_json::to_vec_pretty(&recipe).unwrap(),
    )
    .unwrap();
    let model = common::repo_root().join(".cache/real-server/root/models/smollm2");
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["oracle", "greedy", "--launch", hidden, "--model-path"])
        .arg(&model)
        .args(["--prompts", prompts, "--steps", "8", "--vocab", "49152"])
        .args(["--reference-model", "SmolLM2-135M-Instruct.Q4_1.gguf"])
        .args([
            "--tolerances",
            "qualification/oracles/tolerances-q4_1-vulkan.json",
        ])
        .args(["--result", "r.json"])
        .current_dir(root)
        .output()
        .unwrap();
    eprintln!("refused in {:.1} s", t.elapsed().as_secs_f64());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("the server did not report serving on Vulkan0"),
        "{t}"
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("r.json")).unwrap()).unwrap();
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["metrics"], serde_json::json!([]), "{r}");
    // No reference ran: nothing was compared against a CPU run posing as Vulkan.
    assert!(!root.join("r.reference-capital.safetensors").exists());
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::new(
            "cpu_and_vulkan_oracles_attribute_compare_and_report",
            cpu_and_vulkan_oracles_attribute_compare_and_report,
        )
        .needs(needs()),
        Trial::new(
            "the_oracle_refuses_a_silent_cpu_fallback",
            the_oracle_refuses_a_silent_cpu_fallback,
        )
        .needs(needs()),
    ]
}
