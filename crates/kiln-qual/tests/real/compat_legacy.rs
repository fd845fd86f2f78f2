//! Compatibility of `kiln-qual latency` with Kiln's real legacy latency files
//! (`../shared/kiln-corpus/legacy-latency`): fixture digests, raw-log digests and parsed
//! metrics of the five committed artifacts; the non-strict and strict gates on the current
//! manifest; and the CLI pipeline (run → lock → strict check → tampering) in a real temporary
//! git repository. Without the corpus the corpus tests are reported ignored (failed when
//! the CI script asks for the corpus, `KIQ_REQUIRE_CORPUS=1`) by `qual_test_fixtures::harness`.

use crate::common;

use common::git;

use assert_cmd::Command;
use qual_test_fixtures::harness::{self, Trial};
use std::path::{Path, PathBuf};

fn corpus_present() -> Result<(), String> {
    harness::needs_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kiln-corpus/legacy-latency"),
        "the Kiln legacy-latency corpus",
    )
}

fn corpus() -> Option<PathBuf> {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kiln-corpus/legacy-latency");
    p.is_dir().then_some(p)
}

fn kq(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("kiln-qual")
        .unwrap()
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn json_out(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

const MANIFEST: &str = common::LATENCY_MANIFEST;

fn artifact_digests_raw_logs_and_metrics_agree() {
    let c = corpus().expect("checked by the harness");
    let load = |p: &Path| qual_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    let mut agree = 0;
    let mut total = 0;
    for entry in std::fs::read_dir(c.join("artifacts")).unwrap() {
        let art_path = entry.unwrap().path();
        let art = load(&art_path);
        let id = art
            .get("fixture_id")
            .and_then(qual_json::Value::as_str)
            .unwrap()
            .to_owned();
        for m in ["manifest-current.json", "manifest-covered.json"] {
            let manifest = load(&c.join(m));
            let fixture = qual_latency::manifest::find_fixture(&manifest, &id).unwrap();
            total += 1;
            let got = qual_latency::digest::fixture_spec_sha256(fixture).unwrap();
            assert_eq!(
                Some(got.as_str()),
                art.get("fixture_spec_sha256")
                    .and_then(qual_json::Value::as_str),
                "{id} in {m}"
            );
            agree += 1;
        }
        let raw_rel = art
            .get("raw_log")
            .and_then(qual_json::Value::as_str)
            .unwrap();
        let raw = c.join("raw").join(Path::new(raw_rel).file_name().unwrap());
        total += 2;
        assert_eq!(
            Some(qual_latency::sha256_file(&raw).unwrap().as_str()),
            art.get("raw_log_sha256").and_then(qual_json::Value::as_str),
            "{id}"
        );
        agree += 1;
        // The CLI writer, fed the real log, reproduces exactly the committed metrics.
        let dir = stub_repo(&c);
        let out = kq(
            dir.path(),
            &[
                "latency",
                "write",
                MANIFEST,
                &id,
                raw.to_str().unwrap(),
                "--output",
                "scratch/out.json",
                "--json",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let written = load(&dir.path().join("scratch/out.json"));
        assert_eq!(written.get("metrics"), art.get("metrics"), "{id}");
        assert_eq!(
            written.get("fixture_spec_sha256"),
            art.get("fixture_spec_sha256"),
            "{id}"
        );
        assert_eq!(
            written.get("raw_log_sha256"),
            art.get("raw_log_sha256"),
            "{id}"
        );
        // Byte for byte: with the run-specific fields taken from the committed artifact, our
        // writer's layout reproduces the committed file exactly.
        let mut same = written.as_object().unwrap().clone();
        for k in [
            "created_at_utc",
            "git_commit",
            "git_tracked_dirty",
            "source_sha256",
            "raw_log",
        ] {
            same.insert(k, art.get(k).unwrap().clone());
        }
        let text = qual_latency::jsonout::to_file_text(&qual_json::Value::Object(same), true);
        assert_eq!(
            text.as_bytes(),
            &std::fs::read(&art_path).unwrap()[..],
            "{id}"
        );
        agree += 1;
    }
    println!("{agree}/{total} verdicts agree");
    assert_eq!((agree, total), (20, 20));
}

/// A git repository laid out like Kiln: the current manifest at its newest path and stub
/// fixture sources (the real sources are not in the corpus).
fn stub_repo(c: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q"]);
    std::fs::write(root.join(".gitignore"), "*.log\ntarget/\n").unwrap();
    std::fs::create_dir_all(root.join("docs/contracts")).unwrap();
    std::fs::copy(c.join("manifest-current.json"), root.join(MANIFEST)).unwrap();
    for src in [
        "crates/kiln-tensor/tests/cuda_latency_bench.rs",
        "crates/kiln-tensor/tests/metal_matmul_bench.rs",
        "crates/kiln-tensor/tests/metal_sdpa_bench.rs",
        "crates/kiln-tensor/tests/rocm_latency_bench.rs",
        "crates/kiln-vulkan-kernel/src/bin/vulkan_decode_microbench.rs",
    ] {
        let p = root.join(src);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "// stub: the real source is not in the corpus\n").unwrap();
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "stub"]);
    dir
}

fn current_manifest_passes_non_strict_and_fails_the_covered_gate() {
    let c = corpus().expect("checked by the harness");
    let dir = stub_repo(&c);
    let root = dir.path();
    // The committed compact results, tracked like in Kiln.
    std::fs::create_dir_all(root.join("bench-results/backend-latency")).unwrap();
    for e in std::fs::read_dir(c.join("artifacts")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(
            e.path(),
            root.join("bench-results/backend-latency")
                .join(e.file_name()),
        )
        .unwrap();
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "results"]);

    let out = kq(root, &["latency", "check", MANIFEST, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_out(&out);
    assert_eq!(
        v,
        serde_json::json!({"ok": true, "status": "fixture_required", "fixtures": 5, "missing_fixture_slots": 0})
    );

    let out = kq(
        root,
        &["latency", "check", MANIFEST, "--require-covered", "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let v = json_out(&out);
    let errors: Vec<String> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect();
    assert!(errors.contains(&"status must be covered when --require-covered is set".to_string()));
    let pending: Vec<&String> = errors
        .iter()
        .filter(|e| {
            e.ends_with(".threshold_state must be locked_threshold when --require-covered is set")
        })
        .collect();
    assert_eq!(
        pending,
        [
            "fixture \"metal_apple_silicon_matmul_qwen35_4b\" at fixtures[1].threshold_state must be locked_threshold when --require-covered is set",
            "fixture \"metal_apple_silicon_sdpa_qwen35_4b\" at fixtures[2].threshold_state must be locked_threshold when --require-covered is set",
            "fixture \"vulkan_strix_halo_decode_microbench\" at fixtures[4].threshold_state must be locked_threshold when --require-covered is set"
        ]
    );
    let null_max = errors
        .iter()
        .filter(|e| e.ends_with(".max must be finite numeric when --require-covered is set"))
        .count();
    assert_eq!(null_max, 4 + 3 + 2);
    let none = errors
        .iter()
        .filter(|e| e.contains("does not satisfy <= null"))
        .count();
    assert_eq!(none, 4 + 3 + 2, "{errors:#?}");
    // The two locked fixtures' observed values satisfy their committed thresholds.
    assert!(!errors
        .iter()
        .any(|e| (e.contains(" at fixtures[0].metrics[")
            || e.contains(" at fixtures[3].metrics["))
            && e.contains("does not satisfy")));
    // Their artifacts still fail provenance here: the commits are not in this repository.
    assert!(errors.iter().any(|e| e.ends_with(" at fixtures[0].result_artifact.git_commit must exist in the local repository when --require-covered is set")));
    // Human output lists the same problems on stderr.
    let out = kq(root, &["latency", "check", MANIFEST, "--require-covered"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("kiln-qual: failed to check the latency fixture manifest:"),
        "{stderr}"
    );
    assert!(stderr.contains(
        " at fixtures[4].threshold_state must be locked_threshold when --require-covered is set"
    ));
}

fn plan_on_the_current_manifest() {
    let c = corpus().expect("checked by the harness");
    let dir = stub_repo(&c);
    let root = dir.path();
    std::fs::create_dir_all(root.join("bench-results/backend-latency")).unwrap();
    for e in std::fs::read_dir(c.join("artifacts")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(
            e.path(),
            root.join("bench-results/backend-latency")
                .join(e.file_name()),
        )
        .unwrap();
    }
    // A person gets a table; --json gets the full plan.
    let out = kq(root, &["latency", "plan", "--ref", "main"]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("fixture"), "{table}");
    assert!(table
        .lines()
        .any(|l| l.starts_with("metal_apple_silicon_matmul_qwen35_4b")
            && l.ends_with("needs --runner-labels-json")));
    let out = kq(root, &["latency", "plan", "--ref", "main", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_out(&out);
    let ids: Vec<&str> = v["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["fixture_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "metal_apple_silicon_matmul_qwen35_4b",
            "metal_apple_silicon_sdpa_qwen35_4b",
            "vulkan_strix_halo_decode_microbench"
        ]
    );
    assert_eq!(v["plans"][0]["needs_runner_labels"], true);
    assert_eq!(v["plans"][0]["gh_workflow_run"], serde_json::Value::Null);
    assert_eq!(
        v["plans"][2]["gh_workflow_run"],
        "gh workflow run perf-regression-nightly.yml --ref main --field ref=main --field latency_fixture_id=vulkan_strix_halo_decode_microbench --field 'latency_runner_labels_json=[\"self-hosted\",\"linux\",\"vulkan-strix-halo\"]'"
    );
    let out = kq(
        root,
        &[
            "latency",
            "plan",
            "--ref",
            "main",
            "--shell",
            "--fixture-id",
            "cuda_rtx4090_matmul_qwen35_4b",
        ],
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "gh workflow run perf-regression-nightly.yml --ref main --field ref=main --field latency_fixture_id=cuda_rtx4090_matmul_qwen35_4b --field 'latency_runner_labels_json=[\"self-hosted\",\"linux\",\"cuda-rtx4090\"]'\n"
    );
    let out = kq(root, &["latency", "plan", "--shell"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "runner labels are not declared for metal_apple_silicon_matmul_qwen35_4b, metal_apple_silicon_sdpa_qwen35_4b; pass --runner-labels-json with site-local labels"
    ));
    // Runner checks need GitHub; without a GitHub remote they refuse before any query, and
    // with an unreachable `gh` (none on PATH) they fail clearly. Never touches the network.
    let out = kq(root, &["latency", "plan", "--check-runners"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--check-runners requires --github-repo or a GitHub remote.origin.url"));
    // A PATH holding only `git` (needed to find the repository root), not `gh`.
    let only_git = tempfile::tempdir().unwrap();
    let git_bin = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH");
    std::os::unix::fs::symlink(&git_bin, only_git.path().join("git")).unwrap();
    let out = Command::cargo_bin("kiln-qual")
        .unwrap()
        .current_dir(root)
        .env("PATH", only_git.path())
        .args([
            "latency",
            "plan",
            "--check-runners",
            "--github-repo",
            "ericflo/kiln",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_out(&out),
        serde_json::json!({"ok": false, "error": "gh CLI is required for --check-runners"})
    );
}

fn cli_pipeline_run_lock_check_and_tampering() {
    let dir = common::latency_repo("bench-results/backend-latency/echo.json");
    let root = dir.path();

    let out = kq(
        root,
        &["latency", "run", MANIFEST, "echo_fixture", "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_out(&out);
    assert_eq!(v["metrics"], serde_json::json!(["latency_ms"]));
    assert!(v["raw_log"]
        .as_str()
        .unwrap()
        .contains("bench-results/backend-latency/raw/echo_fixture-"));

    let out = kq(
        root,
        &[
            "latency",
            "lock",
            MANIFEST,
            "--headroom",
            "0.10",
            "--check",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json_out(&out)["output"], serde_json::Value::Null);
    let out = kq(
        root,
        &["latency", "lock", MANIFEST, "--headroom", "0.10", "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_out(&out);
    assert_eq!(v["status"], "covered");
    assert_eq!(v["locked_fixture_ids"], "all");
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(MANIFEST)).unwrap()).unwrap();
    assert_eq!(
        m["fixtures"][0]["metrics"][0]["max"],
        serde_json::json!(10.45)
    );

    // Uncommitted result: the strict gate wants it tracked.
    let out = kq(
        root,
        &["latency", "check", MANIFEST, "--require-covered", "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_out(&out)["errors"],
        serde_json::json!(["fixture \"echo_fixture\" at fixtures[0].result_artifact must be tracked by git when --require-covered is set: bench-results/backend-latency/echo.json"])
    );
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "result"]);
    let out = kq(root, &["latency", "check", MANIFEST, "--require-covered"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Tampering: the source edited.
    std::fs::write(root.join("src/bench.rs"), "// edited\n").unwrap();
    let out = kq(
        root,
        &["latency", "check", MANIFEST, "--require-covered", "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_out(&out)["errors"],
        serde_json::json!(["fixture \"echo_fixture\" at fixtures[0].result_artifact.source_sha256 does not match source"])
    );
    git(root, &["checkout", "--", "src/bench.rs"]);
    // Tampering: the threshold edited by hand below the observation.
    let text = std::fs::read_to_string(root.join(MANIFEST)).unwrap();
    std::fs::write(root.join(MANIFEST), text.replace("10.45", "9.0")).unwrap();
    let out = kq(
        root,
        &["latency", "check", MANIFEST, "--require-covered", "--json"],
    );
    assert_eq!(
        json_out(&out)["errors"],
        serde_json::json!(["fixture \"echo_fixture\" at fixtures[0].metrics[0] observed value 9.5 does not satisfy <= 9.0"])
    );
    git(root, &["checkout", "--", MANIFEST]);
    let out = kq(root, &["latency", "check", MANIFEST, "--require-covered"]);
    assert!(out.status.success());

    // An absolute manifest path selects its own repository, whatever the current directory.
    let outside = tempfile::tempdir().unwrap();
    let abs = root.join(MANIFEST);
    let out = kq(
        outside.path(),
        &[
            "latency",
            "check",
            abs.to_str().unwrap(),
            "--require-covered",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kq(outside.path(), &["latency", "check", MANIFEST]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not inside a git repository"));

    // Bad usage exits 2; a refusal exits 1 with a readable message.
    let out = kq(root, &["latency", "lock", MANIFEST]);
    assert_eq!(out.status.code(), Some(2));
    let out = kq(root, &["latency", "run", MANIFEST, "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "kiln-qual: failed to run latency fixture nope: fixture id not found in manifest: nope\n"
    );
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::new(
            "artifact_digests_raw_logs_and_metrics_agree",
            artifact_digests_raw_logs_and_metrics_agree,
        )
        .needs_corpus(corpus_present()),
        Trial::new(
            "current_manifest_passes_non_strict_and_fails_the_covered_gate",
            current_manifest_passes_non_strict_and_fails_the_covered_gate,
        )
        .needs_corpus(corpus_present()),
        Trial::new("plan_on_the_current_manifest", plan_on_the_current_manifest)
            .needs_corpus(corpus_present()),
        Trial::new(
            "cli_pipeline_run_lock_check_and_tampering",
            cli_pipeline_run_lock_check_and_tampering,
        ),
    ]
}
