//! One test per rule class of the receipt validator, on hand-written receipts.

use crate::common;

use common::*;
use qual_receipt::validate::{self, check_file, FileOutcome, StrictChecks, Violation};
use serde_json::json;
use std::path::Path;

fn errors(v: &serde_json::Value) -> Vec<String> {
    validate::validate(&strict(v))
        .iter()
        .map(|v| validate::Dotted(v).to_string())
        .collect()
}

fn assert_has(errs: &[String], needle: &str) {
    assert!(
        errs.iter().any(|e| e.contains(needle)),
        "expected an error containing {needle:?}, got {errs:#?}"
    );
}

#[test]
fn fixture_is_valid() {
    assert_eq!(validate::validate(&environment()), Vec::<Violation>::new());
}

#[test]
fn closed_records_report_missing_and_unknown_keys_with_paths() {
    let mut r = environment_json();
    remove(&mut r, "/notes");
    set(&mut r, "/surprise", json!(1));
    set(&mut r, "/results/0/metrics/0/extra", json!("x"));
    let v = validate::validate(&strict(&r));
    assert!(v.contains(&Violation {
        pointer: "receipt".into(),
        message: "missing keys: notes".into()
    }));
    assert!(v.contains(&Violation {
        pointer: "receipt".into(),
        message: "has unknown keys: surprise".into()
    }));
    assert!(v.contains(&Violation {
        pointer: "receipt.results[0].metrics[0]".into(),
        message: "has unknown keys: extra".into()
    }));
    // notes missing is also reported as not an array: every violation is collected.
    assert!(v.iter().any(|x| x.pointer == "receipt.notes"));
}

#[test]
fn types_enums_and_syntax_are_checked() {
    let mut r = environment_json();
    set(&mut r, "/qualification/kind", json!("benchmark"));
    set(&mut r, "/qualification/backend", json!("opencl"));
    set(&mut r, "/results/0/status", json!("ok"));
    set(&mut r, "/environment/host_id", json!("Bad Host"));
    set(&mut r, "/source/git_commit", json!("ABC"));
    set(&mut r, "/artifacts/0/location", json!("remote"));
    set(&mut r, "/results/0/metrics/1/name", json!("Exit"));
    let e = errors(&r);
    assert_has(&e, "receipt.qualification.kind must be one of [\"correctness\", \"environment\", \"eval\", \"performance\", \"serving\", \"soak\", \"training\"]");
    assert_has(
        &e,
        "receipt.qualification.backend must be one of [\"cpu\", \"cuda\", \"metal\", \"rocm\", \"vulkan\"]",
    );
    assert_has(
        &e,
        "receipt.results[0].status must be one of [\"failed\", \"passed\", \"skipped\"]",
    );
    assert_has(&e, "receipt.environment.host_id has invalid syntax");
    assert_has(
        &e,
        "receipt.source.git_commit must be a lowercase 40-character commit",
    );
    assert_has(
        &e,
        "receipt.artifacts[0].location must be one of [\"external\", \"local_ignored\"]",
    );
    assert_has(
        &e,
        "receipt.results[0].metrics[1].name has invalid metric syntax",
    );
}

#[test]
fn finite_values_are_required_everywhere_a_number_is_allowed() {
    let mut r = environment_json();
    set(&mut r, "/results/0/metrics/0/value", json!(true));
    set(&mut r, "/effective_config/big", json!(1));
    let mut text = serde_json::to_string(&r).unwrap();
    text = text.replace("\"big\":1", &format!("\"big\":1{}", "0".repeat(500)));
    let e: Vec<String> = validate::validate(&parse(&text))
        .iter()
        .map(|v| validate::Dotted(v).to_string())
        .collect();
    assert_has(
        &e,
        "receipt.results[0].metrics[0].value must be finite numeric",
    );
    assert_has(
        &e,
        "receipt.effective_config.big must be a finite JSON scalar or nested object",
    );
}

#[test]
fn effective_config_has_canonical_keys_and_no_arrays() {
    let mut r = environment_json();
    set(
        &mut r,
        "/effective_config",
        json!({"BadKey": 1, "list": [1], "ok": {"x-y": null}}),
    );
    let e = errors(&r);
    assert_has(
        &e,
        "receipt.effective_config key \"BadKey\" must be a dot-path-compatible segment",
    );
    assert_has(
        &e,
        "receipt.effective_config.list must be a finite JSON scalar or nested object",
    );
    assert_eq!(e.len(), 2, "{e:#?}");
}

#[test]
fn timestamps_must_be_ordered_and_agree_with_duration() {
    let mut r = environment_json();
    set(&mut r, "/qualification/duration_seconds", json!(9.0));
    assert_has(&errors(&r), "differs from timestamps by more than 1 second");

    let mut r = environment_json();
    set(
        &mut r,
        "/qualification/finished_at_utc",
        json!("2026-07-28T22:25:30Z"),
    );
    let e = errors(&r);
    assert_has(
        &e,
        "receipt.qualification.finished_at_utc precedes started_at_utc",
    );
    assert!(!e.iter().any(|x| x.contains("differs from timestamps")));

    let mut r = environment_json();
    set(&mut r, "/created_at_utc", json!("2026-07-28T22:25:39.000Z"));
    assert_has(
        &errors(&r),
        "receipt.created_at_utc precedes qualification completion",
    );

    let mut r = environment_json();
    set(
        &mut r,
        "/created_at_utc",
        json!("2026-07-28T22:25:40+00:00"),
    );
    assert_has(&errors(&r), "must be an ISO-8601 UTC timestamp ending in Z");
    set(&mut r, "/created_at_utc", json!("2026-02-30T00:00:00Z"));
    assert_has(&errors(&r), "must be a valid ISO-8601 UTC timestamp");
}

#[test]
fn timestamp_parser_accepts_python_forms() {
    let t = |s| validate::parse_utc_timestamp(s);
    assert_eq!(t("1970-01-01T00:00:00Z"), Ok(0));
    assert_eq!(t("1970-01-01T00:00:01.5Z"), Ok(1_500_000));
    assert_eq!(t("1970-01-01T00:00:00.1234567Z"), Ok(123_456));
    assert_eq!(t("19700101T000001Z"), Ok(1_000_000));
    assert_eq!(t("1970-01-01 00:01Z"), Ok(60_000_000));
    assert!(t("2024-02-29T23:59:59Z").is_ok());
    assert!(t("2023-02-29T00:00:00Z").is_err());
    assert!(t("2023-01-01T24:00:00Z").is_err());
    assert!(t("2023-01-01T00:00:60Z").is_err());
    assert!(t("2023-01-01T00:00:00.Z").is_err());
    assert!(t("2023-01-01Z").is_err());
}

#[test]
fn verdict_must_agree_with_required_results_and_clean_tree() {
    let mut r = environment_json();
    set(&mut r, "/source/git_worktree_clean", json!(false));
    assert_has(&errors(&r), "git_worktree_clean=true");

    let mut r = environment_json();
    set(&mut r, "/results/0/status", json!("skipped"));
    assert_has(&errors(&r), "failed or skipped required results");

    let mut r = environment_json();
    set(&mut r, "/qualification/verdict", json!("failed"));
    assert_has(
        &errors(&r),
        "failed requires at least one failed or skipped required result",
    );

    // An optional failure does not fail a receipt, and a failed required one does.
    let mut r = environment_json();
    set(&mut r, "/results/0/required", json!(false));
    set(&mut r, "/results/0/status", json!("failed"));
    // ... but the status alone cannot be flipped: the runner's case_pass still says passed.
    assert_has(
        &errors(&r),
        "receipt.results[0].metrics[0].value is case_pass 1 but receipt.results[0].status is \"failed\"",
    );
    set(&mut r, "/results/0/metrics/0/value", json!(0));
    assert!(errors(&r).is_empty());
    set(&mut r, "/results/0/required", json!(true));
    set(&mut r, "/qualification/verdict", json!("failed"));
    assert!(errors(&r).is_empty());
}

#[test]
fn model_and_workload_requirements_follow_kind_and_verdict() {
    let mut r = environment_json();
    set(&mut r, "/qualification/kind", json!("serving"));
    let e = errors(&r);
    assert_has(
        &e,
        "receipt.model is required for passed qualification kind \"serving\"",
    );
    assert_has(
        &e,
        "receipt.workload is required for qualification kind \"serving\"",
    );

    // A failed performance receipt (model preflight failed) may omit the model.
    let mut r = environment_json();
    set(&mut r, "/qualification/kind", json!("performance"));
    set(&mut r, "/qualification/verdict", json!("failed"));
    set(&mut r, "/results/0/status", json!("failed"));
    set(&mut r, "/results/0/metrics/0/value", json!(0));
    set(
        &mut r,
        "/workload",
        json!({"id": "w", "sha256": format!("sha256:{}", "3".repeat(64)), "seed": 1, "parameters": {}}),
    );
    assert!(errors(&r).is_empty(), "{:?}", errors(&r));

    // Correctness needs a workload but no model.
    set(&mut r, "/qualification/kind", json!("correctness"));
    assert!(errors(&r).is_empty());
    set(&mut r, "/workload/seed", json!(-1));
    assert_has(
        &errors(&r),
        "receipt.workload.seed must be null or a non-negative integer",
    );
}

#[test]
fn model_identity_is_closed_and_typed() {
    let mut r = environment_json();
    let h = format!("sha256:{}", "4".repeat(64));
    set(
        &mut r,
        "/model",
        json!({"id": "m", "path": "/models/m", "config_hash": h, "tokenizer_hash": h,
               "chat_template_hash": null,
               "weight_files": [{"path": "a.safetensors", "sha256": h, "bytes": 1},
                                {"path": "a.safetensors", "sha256": "sha256:x", "bytes": 0}]}),
    );
    let e = errors(&r);
    assert_has(
        &e,
        "receipt.model.weight_files contains duplicate path \"a.safetensors\"",
    );
    assert_has(
        &e,
        "receipt.model.weight_files[1].sha256 must match sha256:<64 lowercase hex characters>",
    );
    assert_has(
        &e,
        "receipt.model.weight_files[1].bytes must be a positive integer",
    );
    assert_eq!(e.len(), 3);
}

#[test]
fn duplicates_and_details_limit() {
    let mut r = environment_json();
    let metric = r.pointer("/results/0/metrics/0").unwrap().clone();
    r.pointer_mut("/results/0/metrics")
        .unwrap()
        .as_array_mut()
        .unwrap()
        .push(metric);
    let result = r.pointer("/results/0").unwrap().clone();
    r.pointer_mut("/results")
        .unwrap()
        .as_array_mut()
        .unwrap()
        .push(result);
    let artifact = r.pointer("/artifacts/0").unwrap().clone();
    r.pointer_mut("/artifacts")
        .unwrap()
        .as_array_mut()
        .unwrap()
        .push(artifact);
    set(&mut r, "/results/1/details", json!("x".repeat(2049)));
    let e = errors(&r);
    assert_has(
        &e,
        "receipt.results[0].metrics contains duplicate metric name \"case_pass\"",
    );
    assert_has(&e, "receipt.results contains duplicate id \"device-probe\"");
    assert_has(&e, "receipt.artifacts contains duplicate kind/path \"environment_probes\"/\".qualification/runs/r1/environment.json\"");
    assert_has(
        &e,
        "receipt.results[1].details must be at most 2048 characters",
    );
    // 2048 characters (not bytes) is fine, and an empty string is allowed.
    set(&mut r, "/results/1/details", json!("é".repeat(2048)));
    assert!(!errors(&r).iter().any(|x| x.contains("details")));
}

#[test]
fn optional_device_keys_are_typed_and_bounded() {
    let mut r = environment_json();
    for (k, v) in [
        ("logical_index", json!(0)),
        ("device_uuid", json!("GPU-1")),
        ("pci_bus_id", json!(null)),
        ("compute_capability", json!("8.9")),
        ("compute_units", json!(40)),
        ("memory_available_bytes", json!(1024)),
    ] {
        set(&mut r, &format!("/environment/device/{k}"), v);
    }
    assert!(errors(&r).is_empty());
    set(&mut r, "/environment/device/logical_index", json!(-1));
    set(
        &mut r,
        "/environment/device/memory_available_bytes",
        json!(2147483648u64),
    );
    let e = errors(&r);
    assert_has(&e, "logical_index must be a non-negative integer or null");
    assert_has(&e, "memory_available_bytes exceeds memory_bytes");
}

#[test]
fn original_numeric_equality_quirks_are_kept() {
    // The original compares schema_version with Python `==`: 1.0 and true are accepted.
    for v in [json!(1.0), json!(true)] {
        let mut r = environment_json();
        set(&mut r, "/schema_version", v);
        assert!(errors(&r).is_empty());
    }
    let mut r = environment_json();
    set(&mut r, "/schema_version", json!(2));
    assert_has(&errors(&r), "receipt.schema_version must be 1");
    // Elsewhere integers must be integers.
    let mut r = environment_json();
    set(&mut r, "/artifacts/0/bytes", json!(10.0));
    assert_has(
        &errors(&r),
        "receipt.artifacts[0].bytes must be a non-negative integer",
    );
}

fn wsl2_platform() -> serde_json::Value {
    let caps: serde_json::Map<String, serde_json::Value> = validate::WSL2_CAPABILITY_KEYS
        .iter()
        .map(|k| ((*k).to_owned(), json!("available")))
        .collect();
    json!({
        "kind": "wsl2",
        "capabilities": caps,
        "details": {"wsl_version": "2.3"},
        "observations": {
            "host_temperatures": [{"source": "linux_hwmon", "name": "cpu", "temperature_millicelsius": 45000}],
            "gpu_temperature": {"source": "nvml", "device_uuid": "GPU-1", "temperature_millicelsius": 50000}
        }
    })
}

#[test]
fn wsl2_platform_capabilities_are_closed_and_consistent() {
    let mut r = environment_json();
    set(&mut r, "/environment/device/device_uuid", json!("GPU-1"));
    set(&mut r, "/environment/platform", wsl2_platform());
    assert!(errors(&r).is_empty(), "{:?}", errors(&r));

    let mut bad = r.clone();
    set(
        &mut bad,
        "/environment/platform/capabilities/nvml",
        json!("skipped"),
    );
    set(
        &mut bad,
        "/environment/platform/capabilities/surprise",
        json!("available"),
    );
    let e = errors(&bad);
    assert_has(&e, "receipt.environment.platform.capabilities.nvml must be one of [\"available\", \"unavailable\"]");
    assert_has(
        &e,
        "receipt.environment.platform.capabilities has unknown keys: surprise",
    );
    assert_has(&e, "gpu_temperature requires NVML");

    let mut bad = r.clone();
    set(
        &mut bad,
        "/environment/platform/capabilities/host_temperature",
        json!("unavailable"),
    );
    set(
        &mut bad,
        "/environment/platform/observations/gpu_temperature/temperature_millicelsius",
        json!(250000),
    );
    set(&mut bad, "/environment/device/device_uuid", json!(null));
    let e = errors(&bad);
    assert_has(&e, "host_temperature capability and observations disagree");
    assert_has(
        &e,
        "temperature_millicelsius must be an integer from 1000 through 150000",
    );
    assert_has(&e, "requires a selected device UUID");

    let mut bad = r.clone();
    set(
        &mut bad,
        "/environment/platform/capabilities/gpu_temperature",
        json!("unavailable"),
    );
    assert_has(
        &errors(&bad),
        "gpu_temperature capability and observations disagree",
    );

    // The pre-c8d9 platform shape (thermal guard, no observations) is invalid.
    let mut old = r.clone();
    remove(&mut old, "/environment/platform/observations");
    remove(
        &mut old,
        "/environment/platform/capabilities/host_temperature",
    );
    set(
        &mut old,
        "/environment/platform/capabilities/host_thermal_guard",
        json!("available"),
    );
    let e = errors(&old);
    assert_has(
        &e,
        "receipt.environment.platform missing keys: observations",
    );
    assert_has(
        &e,
        "receipt.environment.platform.capabilities has unknown keys: host_thermal_guard",
    );
}

fn macos_platform() -> serde_json::Value {
    let caps: serde_json::Map<String, serde_json::Value> = validate::MACOS_CAPABILITY_KEYS
        .iter()
        .map(|k| {
            let status = if k.ends_with("temperature") {
                "unavailable"
            } else {
                "available"
            };
            ((*k).to_owned(), json!(status))
        })
        .collect();
    json!({
        "kind": "macos",
        "capabilities": caps,
        "details": {"sandbox": "sandbox-exec"},
        "observations": {
            "hardware_identity": {"machine_name": "MacBook Air", "machine_model": "MacBookAir10,1",
                "chip_type": "Test GPU", "cpu_brand": "Apple M1", "kernel_build": "23A",
                "gpu_core_count": 8, "physical_memory_bytes": 1073741824},
            "metal_runtime": {"name": "Test GPU", "has_unified_memory": true, "max_buffer_length_bytes": 1,
                "recommended_max_working_set_bytes": 1, "current_allocated_bytes": 0},
            "filesystem": {"root": "/", "source": "/dev/disk", "fstype": "apfs", "mount_point": "/",
                "atomic_replace": true, "full_file_sync": true, "directory_fsync": true,
                "hardlink": true, "symlink": true, "case_sensitive": false},
            "unified_memory": {"total_bytes": 1073741824, "swap_total_bytes": 2, "swap_used_bytes": 1, "swap_encrypted": true},
            "memory_pressure": {"free_percent": 50, "page_size_bytes": 16384, "pages_free": 1, "pages_active": 1,
                "pages_inactive": 1, "pages_wired_down": 1, "pages_occupied_by_compressor": 1, "pageins": 1,
                "pageouts": 1, "swapins": 1, "swapouts": 1},
            "thermal_pressure": {"thermal_warning": "none", "performance_warning": "none", "cpu_power_status": "none"},
            "host_temperature": null,
            "gpu_temperature": null
        }
    })
}

#[test]
fn macos_platform_observations_are_closed_and_bound_to_the_device() {
    let mut r = environment_json();
    set(&mut r, "/qualification/backend", json!("metal"));
    set(&mut r, "/environment/device/compute_units", json!(8));
    set(&mut r, "/environment/platform", macos_platform());
    assert!(errors(&r).is_empty(), "{:?}", errors(&r));

    let mut bad = r.clone();
    set(&mut bad, "/environment/device/compute_units", json!(7));
    set(
        &mut bad,
        "/environment/platform/observations/gpu_temperature",
        json!({"source": "x"}),
    );
    set(
        &mut bad,
        "/environment/platform/observations/memory_pressure/free_percent",
        json!(101),
    );
    set(
        &mut bad,
        "/environment/platform/observations/unified_memory/swap_used_bytes",
        json!(3),
    );
    set(
        &mut bad,
        "/environment/platform/observations/filesystem/hardlink",
        json!(false),
    );
    let e = errors(&bad);
    assert_has(
        &e,
        "hardware_identity.gpu_core_count must match the selected device",
    );
    assert_has(&e, "observations.gpu_temperature must be null on macOS");
    assert_has(
        &e,
        "memory_pressure.free_percent must be an integer from 0 through 100",
    );
    assert_has(
        &e,
        "unified_memory.swap_used_bytes exceeds swap_total_bytes",
    );
    assert_has(&e, "filesystem.hardlink must be true");

    let mut bad = r.clone();
    set(
        &mut bad,
        "/environment/platform/observations/thermal_pressure",
        json!(null),
    );
    assert_has(
        &errors(&bad),
        "thermal_pressure capability and observations disagree",
    );
}

#[test]
fn load_failures_make_a_file_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>); 6] = [
        ("dup.json", br#"{"a": 1, "\u0061": 2}"#.to_vec()),
        ("nan.json", br#"{"a": NaN}"#.to_vec()),
        ("bom.json", [&[0xEF, 0xBB, 0xBF][..], b"{}"].concat()),
        ("utf16.json", vec![0xFF, 0xFE, b'{', 0, b'}', 0]),
        ("lossy.json", br#"{"a": 9007199254740993.0}"#.to_vec()),
        ("array.json", b"[]".to_vec()),
    ];
    for (name, bytes) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let outcome = check_file(&p, &StrictChecks::default());
        assert!(
            matches!(outcome, FileOutcome::Unloadable { .. }),
            "{name}: {outcome:?}"
        );
    }
}

fn git(root: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn strict_local_artifacts_are_rehashed_under_dot_qualification() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".qualification/runs/r1")).unwrap();
    let body = b"raw log\n";
    std::fs::write(root.join(".qualification/runs/r1/environment.json"), body).unwrap();
    let mut r = environment_json();
    set(
        &mut r,
        "/artifacts/0/sha256",
        json!(qual_json::sha256_prefixed(body)),
    );
    set(&mut r, "/artifacts/0/bytes", json!(body.len()));
    set(
        &mut r,
        "/artifacts/1",
        json!({"kind": "external_log", "location": "external", "path": "https://example.invalid/x",
               "sha256": format!("sha256:{}", "5".repeat(64)), "bytes": 3}),
    );
    let strict_checks = StrictChecks {
        root: Some(root),
        local_artifacts: true,
        ..StrictChecks::default()
    };
    let check = |r: &serde_json::Value| -> Vec<String> {
        validate::validate_strict(&strict(r), &strict_checks)
            .iter()
            .map(|v| validate::Dotted(v).to_string())
            .collect()
    };
    assert!(check(&r).is_empty(), "{:?}", check(&r));

    std::fs::write(
        root.join(".qualification/runs/r1/environment.json"),
        b"raw LOG\n",
    )
    .unwrap();
    let e = check(&r);
    assert_has(
        &e,
        "receipt.artifacts[0].sha256 does not match local artifact",
    );
    assert_eq!(e.len(), 1);

    std::fs::write(
        root.join(".qualification/runs/r1/environment.json"),
        b"longer raw log\n",
    )
    .unwrap();
    assert_has(
        &check(&r),
        "receipt.artifacts[0].bytes does not match local artifact",
    );

    std::fs::remove_file(root.join(".qualification/runs/r1/environment.json")).unwrap();
    assert_has(
        &check(&r),
        "must exist under .qualification for local validation",
    );

    // A path escaping .qualification is refused even when the bytes match.
    std::fs::write(root.join("outside.txt"), body).unwrap();
    set(
        &mut r,
        "/artifacts/0/path",
        json!(".qualification/../outside.txt"),
    );
    assert_has(
        &check(&r),
        "must exist under .qualification for local validation",
    );
    // Basic mode never touches the file system.
    assert!(validate::validate(&strict(&r)).is_empty());
}

#[test]
fn strict_known_commit_asks_git() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q"]);
    std::fs::write(root.join("a.txt"), "a").unwrap();
    git(root, &["add", "a.txt"]);
    git(root, &["commit", "-q", "-m", "a"]);
    let head = git(root, &["rev-parse", "HEAD"]);
    let checks = StrictChecks {
        root: Some(root),
        known_commit: true,
        ..StrictChecks::default()
    };
    let mut r = environment_json();
    set(&mut r, "/source/git_commit", json!(head));
    assert!(validate::validate_strict(&strict(&r), &checks).is_empty());
    set(&mut r, "/source/git_commit", json!("f".repeat(40)));
    let v = validate::validate_strict(&strict(&r), &checks);
    assert_eq!(
        v,
        vec![Violation {
            pointer: "receipt.source.git_commit".into(),
            message: format!("does not exist locally: {}", "f".repeat(40)),
        }]
    );
}

#[test]
fn strict_current_source_compares_the_recomputed_digest() {
    let r = environment();
    let recorded = format!("sha256:{}", "1".repeat(64));
    let same = |_: &Path| Ok(recorded.clone());
    let other = |_: &Path| Ok(format!("sha256:{}", "9".repeat(64)));
    let broken = |_: &Path| Err("not a git repository".to_owned());
    let with = |f: &dyn Fn(&Path) -> Result<String, String>| {
        validate::validate_strict(
            &r,
            &StrictChecks {
                current_source: Some(f),
                ..StrictChecks::default()
            },
        )
        .iter()
        .map(|v| validate::Dotted(v).to_string())
        .collect::<Vec<_>>()
    };
    assert!(with(&same).is_empty());
    assert_has(&with(&other), "current source tree is sha256:9999");
    assert_has(
        &with(&broken),
        "failed to compute the current source tree hash: not a git repository",
    );
}

#[test]
fn arrays_maps_and_identity_strings_are_closed() {
    let mut r = environment_json();
    set(&mut r, "/environment/runtime", json!({}));
    set(&mut r, "/environment/compiler", json!({"rustc": ""}));
    set(&mut r, "/qualification/command", json!([]));
    set(&mut r, "/unsupported", json!(["", "gpu clocks"]));
    set(&mut r, "/notes", json!("note"));
    set(&mut r, "/source/tree_hash_format", json!("other-v1"));
    set(&mut r, "/receipt_id", json!("Ab"));
    let e = errors(&r);
    assert_has(&e, "receipt.environment.runtime must be a non-empty object");
    assert_has(
        &e,
        "receipt.environment.compiler.rustc must be a non-empty string",
    );
    assert_has(
        &e,
        "receipt.qualification.command must be a non-empty argv array",
    );
    assert_has(&e, "receipt.unsupported[0] must be a non-empty string");
    assert_has(&e, "receipt.notes must be an array");
    assert_has(
        &e,
        "receipt.source.tree_hash_format must be \"kiln-source-tree-v1\"",
    );
    assert_has(&e, "receipt.receipt_id has invalid syntax");
    assert_eq!(e.len(), 7, "{e:#?}");

    // An empty result list is invalid on its own; a passed verdict then has no failures.
    let mut r = environment_json();
    set(&mut r, "/results", json!([]));
    assert_eq!(errors(&r), ["receipt.results must be a non-empty array"]);
}

#[test]
fn wsl2_host_temperatures_are_unique_named_and_bounded() {
    let mut r = environment_json();
    set(&mut r, "/environment/device/device_uuid", json!("GPU-1"));
    set(&mut r, "/environment/platform", wsl2_platform());
    set(
        &mut r,
        "/environment/platform/observations/host_temperatures",
        json!([
            {"source": "linux_hwmon", "name": "cpu", "temperature_millicelsius": 45000},
            {"source": "linux_hwmon", "name": "cpu", "temperature_millicelsius": -60000},
            {"source": "acpi", "name": "  ", "temperature_millicelsius": 1}
        ]),
    );
    let e = errors(&r);
    assert_has(
        &e,
        "host_temperatures contains duplicate source/name (\"linux_hwmon\", \"cpu\")",
    );
    assert_has(&e, "host_temperatures[1].temperature_millicelsius must be an integer from -50000 through 200000");
    assert_has(&e, "host_temperatures[2].source must be one of [\"linux_hwmon\", \"windows_formatted_thermal_zone\"]");
    assert_has(
        &e,
        "host_temperatures[2].name must contain a non-whitespace character",
    );
    assert_eq!(e.len(), 4, "{e:#?}");
}
