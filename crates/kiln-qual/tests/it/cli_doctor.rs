//! `kiln-qual doctor`: every backend and mechanism key in a stable tagged shape, and what it
//! reports agrees with what this host really does (the runner's own refusal, the probe tools
//! on `PATH`, the files the set-ups produce).

use crate::common::{git, repo_root};

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kiln-qual");

fn doctor_json(dir: &Path) -> Value {
    let o = Command::new(BIN)
        .args(["doctor", "--json"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "kiln-qual.doctor.v1");
    v
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false)
}

#[test]
fn doctor_json_has_every_backend_and_mechanism_and_matches_this_host() {
    let root = repo_root().canonicalize().unwrap();
    let v = doctor_json(&root);
    let backends: Vec<&str> = v["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["backend"].as_str().unwrap())
        .collect();
    assert_eq!(backends, ["cpu", "cuda", "metal", "rocm", "vulkan"]);
    for b in v["backends"].as_array().unwrap() {
        let status = b["status"].as_str().unwrap();
        assert!(status == "available" || status == "unavailable", "{b}");
        assert_eq!(status == "unavailable", b["fix"].is_string(), "{b}");
        assert_eq!(status == "available", b["device"].is_string(), "{b}");
    }
    // The device probe of each accelerator names the tool it ran; a tool that is not on PATH
    // cannot have passed.
    for (backend, tool) in [
        ("cuda", "nvidia-smi"),
        ("rocm", "rocminfo"),
        ("vulkan", "vulkaninfo"),
    ] {
        let b = v["backends"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["backend"] == backend)
            .unwrap();
        let probe = &b["probes"][0];
        assert_eq!(probe["tool"][0], tool, "{b}");
        if !on_path(tool) {
            assert_eq!(probe["status"], "failed", "{b}");
            assert_eq!(probe["details"], "executable not found", "{b}");
            assert_eq!(b["status"], "unavailable", "{b}");
        }
    }
    let cpu_named = std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| t.contains("model name"))
        .unwrap_or(false);
    assert_eq!(
        v["backends"][0]["status"] == "available",
        cpu_named,
        "{:#}",
        v["backends"][0]
    );
    let ids: Vec<&str> = v["containment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, qual_exec::mechanisms::MECHANISM_IDS);
    for m in v["containment"].as_array().unwrap() {
        let s = m["status"].as_str().unwrap();
        assert!(
            ["available", "missing", "not_checked", "not_needed"].contains(&s),
            "{m}"
        );
        assert_eq!(s == "missing", m["fix"].is_string(), "{m}");
    }
    // Set-ups: each produced file is reported present exactly when it exists.
    for s in v["setups"].as_array().unwrap() {
        assert!(root.join(s["script"].as_str().unwrap()).is_file(), "{s}");
        for p in s["produces"].as_array().unwrap() {
            let path = p["path"].as_str().unwrap();
            if let Some(program) = path.strip_prefix("PATH: ") {
                if p["present"] == true {
                    assert!(on_path(program), "{s}");
                }
            } else {
                assert_eq!(p["present"], root.join(path).exists(), "{s}");
            }
        }
        let complete = s["produces"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["present"] == true);
        if !complete {
            assert_eq!(s["status"], "missing", "{s}");
            assert_eq!(s["fix"], s["script"], "{s}");
        }
    }
}

/// The runner's verdict on this host's box is doctor's: a run of a one-case workload passes
/// exactly when doctor reports no mechanism missing, and is refused (exit 3) otherwise.
#[test]
fn doctor_containment_agrees_with_the_runner() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
    std::fs::copy(
        repo_root().join("qualification/workloads/cpu-environment-v1.json"),
        root.join("qualification/workloads/cpu-environment-v1.json"),
    )
    .unwrap();
    std::fs::write(root.join(".gitignore"), ".qualification/\n").unwrap();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "w"]);
    let v = doctor_json(root);
    assert_eq!(
        v["repository"],
        root.canonicalize().unwrap().to_str().unwrap()
    );
    // Not a kiln-qual checkout: no set-up applies.
    for s in v["setups"].as_array().unwrap() {
        assert_eq!(s["status"], "not_in_checkout", "{s}");
    }
    let missing: Vec<&Value> = v["containment"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["status"] == "missing")
        .collect();
    let o = Command::new(BIN)
        .args([
            "run",
            "qualification/workloads/cpu-environment-v1.json",
            "--variant",
            "cpu",
            "--host-id",
            "doctor-host",
            "--output",
            ".qualification/receipts/env.json",
        ])
        .current_dir(root)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    if missing.is_empty() {
        assert_ne!(
            o.status.code(),
            Some(3),
            "doctor saw the box complete: {stderr}"
        );
    } else {
        assert_eq!(
            o.status.code(),
            Some(3),
            "doctor saw {missing:?} missing: {stderr}"
        );
    }
}

/// Both commands come into completion scripts and the man page from the definition.
#[test]
fn doctor_and_triage_are_in_completions_and_the_man_page() {
    for args in [
        &["completions", "bash"][..],
        &["completions", "fish"],
        &["man"],
    ] {
        let o = Command::new(BIN).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}");
        let text = String::from_utf8_lossy(&o.stdout);
        for word in ["doctor", "triage"] {
            assert!(text.contains(word), "{args:?} lacks {word}");
        }
    }
    let o = Command::new(BIN)
        .args(["triage", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("RECEIPT|RUN_DIR"), "{help}");
}

/// A kernel that refuses a mechanism (a seccomp filter of the fixture denies its system call
/// to doctor and everything it starts): doctor names exactly that mechanism missing, with a
/// fix, the earlier ones available, and still exits 0.
#[test]
fn a_refused_mechanism_is_reported_missing_by_name() {
    let Some(fixture) = qual_test_fixtures::fixture_binary("qual-fixture") else {
        let why = "qual-fixture is not built (cargo build -p qual-test-fixtures --bins)";
        qual_test_fixtures::harness::skip(why);
        return;
    };
    let root_user = unsafe { libc::geteuid() } == 0;
    let unshare_mechanism = if root_user {
        "namespaces"
    } else {
        "user_namespaces"
    };
    for (syscall, mechanism) in [
        ("seccomp", "seccomp"),
        ("mount_setattr", "mount_setattr"),
        ("unshare", unshare_mechanism),
    ] {
        let o = Command::new(&fixture)
            .args(["deny-syscalls", syscall, "--", BIN, "doctor", "--json"])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let by_id = |id: &str| {
            v["containment"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["id"] == id)
                .unwrap()
                .clone()
        };
        let m = by_id(mechanism);
        assert_eq!(m["status"], "missing", "{syscall}: {:#}", v["containment"]);
        assert!(m["fix"].as_str().is_some_and(|f| !f.is_empty()), "{m}");
        assert!(
            m["reason"]
                .as_str()
                .unwrap()
                .contains("Operation not permitted"),
            "{m}"
        );
        assert_eq!(
            by_id("cgroup_delegation")["status"],
            "available",
            "{syscall}"
        );
        let missing = v["containment"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["status"] == "missing")
            .count();
        assert_eq!(missing, 1, "{syscall}: {:#}", v["containment"]);
    }
}

/// The text report names each probe tool's outcome once per backend (the Vulkan probe runs
/// vulkaninfo twice; its line once said "vulkaninfo passed, vulkaninfo passed").
#[test]
fn doctor_text_names_each_tool_outcome_once() {
    let root = repo_root().canonicalize().unwrap();
    let o = Command::new(BIN)
        .arg("doctor")
        .current_dir(&root)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut backend_lines = 0;
    let section = text
        .lines()
        .skip_while(|l| *l != "backends:")
        .skip(1)
        .take_while(|l| !l.is_empty());
    for line in section {
        if !(line.starts_with("  ok ") || line.starts_with("  missing ")) {
            continue;
        }
        backend_lines += 1;
        for tool in ["nvidia-smi", "rocminfo", "vulkaninfo"] {
            for outcome in ["passed", "failed"] {
                let said = format!("{tool} {outcome}");
                assert!(line.matches(&said).count() <= 1, "{line}");
            }
        }
    }
    assert_eq!(backend_lines, 5, "{text}");
}
