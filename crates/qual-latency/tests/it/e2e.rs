//! End to end in a real temporary git repository: a benchmark program prints metric lines;
//! run → artifact → lock (headroom 0.10) → strict check passes; then each tampering fails
//! with its documented reason. Also the importer (directory and zip bundles) and the
//! locker's and checker's refusals (the original `--self-test` cases).

use crate::common;

use common::*;
use qual_json::{Number, Object, Value};
use qual_latency::artifact::ValidateOptions;
use qual_latency::git::Repo;
use qual_latency::lock::{lock_thresholds, LockRequest};
use qual_latency::manifest::{check_manifest_file, CheckOutcome};
use qual_latency::run::{run_fixture, RunLimits, RunRequest};
use std::path::Path;

fn run(repo: &Repo) -> qual_latency::Result<qual_latency::run::RunReport> {
    run_fixture(
        repo,
        &RunRequest {
            manifest_path: &repo.join(MANIFEST),
            fixture_id: FIXTURE_ID,
            log_dir: "bench-results/backend-latency/raw",
            output: None,
            status: "passed",
            limits: RunLimits::default(),
            echo: false,
            // The box `latency run` gives fixture commands: the worktree writable, `.git`
            // read-only, the rest of the host read-only.
            sandbox: qual_exec::Sandbox {
                read_only: vec![repo.join(".git")],
                writable: vec![repo.root().to_path_buf()],
                host: qual_exec::HostFiles::ReadOnly,
            },
        },
    )
}

fn lock(repo: &Repo, check_only: bool) -> qual_latency::Result<qual_latency::lock::LockSummary> {
    lock_thresholds(
        repo,
        &LockRequest {
            manifest_path: &repo.join(MANIFEST),
            output: None,
            headroom: 0.10,
            fixture_ids: &[],
            check_only,
        },
    )
}

fn strict_errors(repo: &Repo) -> Vec<String> {
    match check_manifest_file(repo, &repo.join(MANIFEST), true).unwrap() {
        CheckOutcome::Passed(_) => Vec::new(),
        CheckOutcome::Failed(e) => e,
    }
}

fn read_json(path: &Path) -> Value {
    qual_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn write_json(path: &Path, v: &Value, sort: bool) {
    std::fs::write(path, qual_latency::jsonout::to_file_text(v, sort)).unwrap();
}

fn edit_object(v: &mut Value, f: impl FnOnce(&mut Object)) {
    let Value::Object(o) = v else {
        panic!("object")
    };
    f(o)
}

/// A covered repository: bench run, artifact, lock, everything committed.
fn covered_repo() -> (tempfile::TempDir, Value) {
    let dir = setup_repo(&bench_command(""));
    let repo = Repo::new(dir.path());
    let report = run(&repo).unwrap();
    assert!(report
        .raw_log
        .starts_with(repo.root().join("bench-results/backend-latency/raw")));
    assert!(!report.execution.group_residue);
    let artifact = read_json(&repo.join(RESULT));
    assert_eq!(artifact.get("git_tracked_dirty"), Some(&Value::Bool(false)));
    let summary = lock(&repo, false).unwrap();
    assert_eq!(summary.status, "covered");
    git(repo.root(), &["add", "-A"]);
    git(
        repo.root(),
        &["commit", "-q", "-m", "result and thresholds"],
    );
    (dir, artifact)
}

#[test]
fn run_lock_check_then_every_tampering_fails() {
    let (dir, artifact) = covered_repo();
    let repo = Repo::new(dir.path());

    // The artifact is closed, bound and clean.
    let keys: Vec<&String> = artifact.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 17);
    let text = std::fs::read_to_string(repo.join(RESULT)).unwrap();
    assert!(text.ends_with("}\n") && text.is_ascii());
    let raw_log = artifact
        .get("raw_log")
        .and_then(Value::as_str)
        .unwrap()
        .to_owned();
    assert!(raw_log.starts_with("bench-results/backend-latency/raw/cpu_mix_microbench-"));
    assert!(!repo.is_tracked(&raw_log));

    // Locked thresholds follow the spec's formula exactly.
    let manifest = read_json(&repo.join(MANIFEST));
    let fixture = qual_latency::manifest::find_fixture(&manifest, FIXTURE_ID).unwrap();
    assert_eq!(
        fixture.get("threshold_state").and_then(Value::as_str),
        Some("locked_threshold")
    );
    let metrics = fixture.get("metrics").and_then(Value::as_array).unwrap();
    let observed = artifact.get("metrics").unwrap();
    let ms = observed.get("mix_100k_ms").and_then(Value::as_f64).unwrap();
    let ops = observed
        .get("mix_100k_ops_per_s")
        .and_then(Value::as_f64)
        .unwrap();
    assert_eq!(
        metrics[0].get("max").and_then(Value::as_f64),
        Some(qual_latency::lock::round6(ms * 1.1))
    );
    assert_eq!(
        metrics[1].get("max").and_then(Value::as_f64),
        Some(qual_latency::lock::round6(ops * 0.9))
    );
    assert_eq!(
        manifest.get("status").and_then(Value::as_str),
        Some("covered")
    );

    // Strict gate passes; the non-strict one refuses a covered manifest.
    assert_eq!(strict_errors(&repo), Vec::<String>::new());
    let CheckOutcome::Failed(e) = check_manifest_file(&repo, &repo.join(MANIFEST), false).unwrap()
    else {
        panic!("non-strict check must refuse covered")
    };
    assert_eq!(e, ["status covered requires --require-covered"]);

    // The raw log may be absent from a clean checkout: compact evidence alone covers.
    {
        let copy = fresh_copy(repo.root());
        let r = Repo::new(copy.path());
        std::fs::remove_file(r.join(&raw_log)).unwrap();
        assert_eq!(strict_errors(&r), Vec::<String>::new());
    }

    let p = "fixture \"cpu_mix_microbench\" at fixtures[0].result_artifact.";
    type Tamper = Box<dyn Fn(&Repo)>;
    let cases: Vec<(&str, Tamper, Vec<String>)> = vec![
        (
            "source edited",
            Box::new(|r: &Repo| std::fs::write(r.join("src/bench.rs"), "// edited\n").unwrap()),
            vec![format!("{p}source_sha256 does not match source")],
        ),
        (
            "raw log altered",
            Box::new({
                let raw_log = raw_log.clone();
                move |r: &Repo| {
                    let path = r.join(&raw_log);
                    let text = std::fs::read_to_string(&path).unwrap();
                    std::fs::write(&path, text.replace("KILN_LATENCY_METRIC mix_100k_ms ", "KILN_LATENCY_METRIC mix_100k_ms 9")).unwrap();
                }
            }),
            vec![
                format!("{p}raw_log_sha256 does not match raw_log"),
                format!("{p}metrics.mix_100k_ms must match raw_log value"),
            ],
        ),
        (
            "raw log tracked",
            Box::new({
                let raw_log = raw_log.clone();
                move |r: &Repo| {
                    git(r.root(), &["add", "-f", &raw_log]);
                    git(r.root(), &["commit", "-q", "-m", "track raw log"]);
                    // Tracked is refused even when the file is gone from the checkout.
                    std::fs::remove_file(r.join(&raw_log)).unwrap();
                }
            }),
            vec![format!("{p}raw_log must not be tracked by git when --require-covered is set")],
        ),
        (
            "command changed",
            Box::new(|r: &Repo| {
                let mut m = read_json(&r.join(MANIFEST));
                edit_fixture(&mut m, |f| f.insert("command", Value::from(bench_command(" --iterations 4"))));
                write_json(&r.join(MANIFEST), &m, false);
            }),
            vec![format!("{p}fixture_spec_sha256 must be \""), format!("{p}command must be \"")],
        ),
        (
            "threshold edited by hand",
            Box::new(|r: &Repo| {
                let mut m = read_json(&r.join(MANIFEST));
                edit_fixture(&mut m, |f| {
                    let mut metrics = f.get("metrics").and_then(Value::as_array).unwrap().clone();
                    edit_object(&mut metrics[0], |mo| mo.insert("max", Value::Number(Number::Float(1e-9))));
                    f.insert("metrics", Value::Array(metrics));
                });
                write_json(&r.join(MANIFEST), &m, false);
            }),
            vec!["fixture \"cpu_mix_microbench\" at fixtures[0].metrics[0] observed value ".into(), " does not satisfy <= 1e-09".into()],
        ),
        (
            "unknown artifact key",
            Box::new(|r: &Repo| {
                let mut a = read_json(&r.join(RESULT));
                edit_object(&mut a, |o| o.insert("extra", Value::from(1i64)));
                write_json(&r.join(RESULT), &a, true);
            }),
            vec![format!("{p}contains unknown keys: [\"extra\"]")],
        ),
        (
            "unknown manifest key",
            Box::new(|r: &Repo| {
                let mut m = read_json(&r.join(MANIFEST));
                edit_object(&mut m, |o| o.insert("notes", Value::from("x")));
                write_json(&r.join(MANIFEST), &m, false);
            }),
            vec!["manifest contains unknown keys: [\"notes\"]".into()],
        ),
        (
            "unknown fixture key",
            Box::new(|r: &Repo| {
                let mut m = read_json(&r.join(MANIFEST));
                edit_fixture(&mut m, |f| f.insert("owner", Value::from("x")));
                write_json(&r.join(MANIFEST), &m, false);
            }),
            vec!["fixture \"cpu_mix_microbench\" at fixtures[0] contains unknown keys: [\"owner\"]".into()],
        ),
        (
            "result untracked",
            Box::new(|r: &Repo| {
                git(r.root(), &["rm", "-q", "--cached", RESULT]);
                git(r.root(), &["commit", "-q", "-m", "untrack"]);
            }),
            vec![format!("fixture \"cpu_mix_microbench\" at fixtures[0].result_artifact must be tracked by git when --require-covered is set: {RESULT}")],
        ),
    ];
    let mut agree = 0;
    for (name, tamper, wants) in &cases {
        let copy = fresh_copy(repo.root());
        let r = Repo::new(copy.path());
        assert_eq!(
            strict_errors(&r),
            Vec::<String>::new(),
            "{name}: copy must start clean"
        );
        tamper(&r);
        let errors = strict_errors(&r);
        for want in wants {
            assert!(
                errors.iter().any(|e| e.contains(want.as_str())),
                "{name}: expected {want:?} in {errors:#?}"
            );
        }
        if *name == "raw log tracked" {
            assert!(
                !errors.iter().any(|e| e.contains("raw_log_sha256")),
                "{errors:#?}"
            );
        }
        agree += 1;
    }
    println!(
        "{agree}/{} tamperings refused with their documented reason",
        cases.len()
    );
}

fn edit_fixture(m: &mut Value, f: impl FnOnce(&mut Object)) {
    edit_object(m, |o| {
        let mut fixtures = o.get("fixtures").and_then(Value::as_array).unwrap().clone();
        edit_object(&mut fixtures[0], f);
        o.insert("fixtures", Value::Array(fixtures));
    });
}

#[test]
fn run_failures_carry_the_raw_log_tail() {
    for (extra, want) in [
        (
            " --skip",
            vec![
                "no KILN_LATENCY_METRIC lines found",
                "raw log tail:",
                "fixture skipped: no hardware device",
            ],
        ),
        (
            " --fail",
            vec![
                "fixture command exited with status 3",
                "raw log tail:",
                "KILN_LATENCY_METRIC mix_100k_ms",
            ],
        ),
    ] {
        let dir = setup_repo(&bench_command(extra));
        let repo = Repo::new(dir.path());
        let e = run(&repo).unwrap_err().to_string();
        for w in want {
            assert!(e.contains(w), "{extra}: {w:?} not in {e}");
        }
        assert!(!repo.join(RESULT).exists());
    }
    // A raw-log directory that git would not ignore is refused before anything runs.
    let dir = setup_repo(&bench_command(""));
    std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
    let e = run(&Repo::new(dir.path())).unwrap_err().to_string();
    assert!(
        e.starts_with("raw log bench-results/backend-latency/raw/cpu_mix_microbench-"),
        "{e}"
    );
    assert!(e.ends_with("would not be ignored by git; ignore bench-results/backend-latency/raw (e.g. in .gitignore) before running"), "{e}");
    assert!(!dir
        .path()
        .join("bench-results/backend-latency/raw")
        .read_dir()
        .unwrap()
        .any(|_| true));
    // A command that needs a shell is refused before anything runs.
    let dir = setup_repo("cargo bench | tee out.txt");
    let e = run(&Repo::new(dir.path())).unwrap_err().to_string();
    assert!(
        e.starts_with("cpu_mix_microbench.command: fixture command needs a shell feature (\"|\")"),
        "{e}"
    );
}

#[test]
fn leftover_processes_are_killed_and_reported() {
    let dir = setup_repo(&bench_command(" --leak"));
    let repo = Repo::new(dir.path());
    let started = std::time::Instant::now();
    let report = run(&repo).unwrap();
    assert!(report.execution.group_residue);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn undeclared_metric_lines_are_dropped_by_the_writer() {
    let dir = setup_repo(&bench_command(" --extra-metric"));
    let repo = Repo::new(dir.path());
    let report = run(&repo).unwrap();
    assert_eq!(report.metrics, ["mix_100k_ms", "mix_100k_ops_per_s"]);
}

#[test]
fn untracked_files_make_the_capture_dirty_but_ignored_logs_do_not() {
    let dir = setup_repo(&bench_command(""));
    let repo = Repo::new(dir.path());
    std::fs::write(repo.join("ignored.log"), "x").unwrap();
    assert!(!repo.tracked_dirty().unwrap());
    std::fs::write(repo.join(".backend-latency-writer-untracked-probe"), "x").unwrap();
    assert!(repo.tracked_dirty().unwrap());
    assert_eq!(
        repo.status_lines().unwrap(),
        ["untracked: .backend-latency-writer-untracked-probe"]
    );
    let report = run(&repo).unwrap();
    assert_eq!(
        report.artifact.get("git_tracked_dirty"),
        Some(&Value::Bool(true))
    );
    // The locker refuses a dirty capture.
    let e = lock(&repo, true).unwrap_err().to_string();
    assert!(e.contains("git_tracked_dirty must be false"), "{e}");
}

#[test]
fn file_at_commit_matches_working_tree_and_missing_commit_is_none() {
    let dir = setup_repo(&bench_command(""));
    let repo = Repo::new(dir.path());
    let head = repo.head_commit().unwrap();
    assert_eq!(
        repo.file_sha256_at_commit(&head, "src/bench.rs"),
        Some(qual_latency::sha256_file(&repo.join("src/bench.rs")).unwrap())
    );
    assert_eq!(
        repo.file_sha256_at_commit(&"0".repeat(40), "src/bench.rs"),
        None
    );
}

/// A captured (unlocked, uncommitted-result) repository for the locker's refusal table.
fn captured_repo() -> (tempfile::TempDir, Value) {
    let dir = setup_repo(&bench_command(""));
    let repo = Repo::new(dir.path());
    run(&repo).unwrap();
    let art = read_json(&repo.join(RESULT));
    (dir, art)
}

#[test]
fn locker_refusals_match_the_original_self_test() {
    let (dir, artifact) = captured_repo();
    let repo = Repo::new(dir.path());
    let raw_log = artifact
        .get("raw_log")
        .and_then(Value::as_str)
        .unwrap()
        .to_owned();
    lock(&repo, true).expect("baseline locks");
    type Mutate = Box<dyn Fn(&Repo, &mut Value)>;
    let set = |k: &'static str, v: Value| -> Mutate {
        Box::new(move |_r: &Repo, a: &mut Value| edit_object(a, |o| o.insert(k, v.clone())))
    };
    let cases: Vec<(&str, Mutate, &str)> = vec![
        (
            "schema 2",
            set("artifact_schema_version", Value::from(2i64)),
            "artifact_schema_version must be 3",
        ),
        (
            "status pending",
            set("status", Value::from("pending")),
            "status must be passed",
        ),
        (
            "unknown key",
            set("extra", Value::Null),
            "contains unknown keys: [\"extra\"]",
        ),
        (
            "undeclared metric",
            Box::new(|_r: &Repo, a: &mut Value| {
                edit_object(a, |o| {
                    let mut m = o.get("metrics").and_then(Value::as_object).unwrap().clone();
                    m.insert("other_ms", Value::from(1.0));
                    o.insert("metrics", Value::Object(m));
                })
            }),
            "metrics contains undeclared metrics: [\"other_ms\"]",
        ),
        (
            "missing metric",
            Box::new(|_r: &Repo, a: &mut Value| {
                edit_object(a, |o| {
                    let mut m = o.get("metrics").and_then(Value::as_object).unwrap().clone();
                    m.remove("mix_100k_ms");
                    o.insert("metrics", Value::Object(m));
                })
            }),
            "metrics.mix_100k_ms must be finite numeric",
        ),
        (
            "bad digest",
            set("fixture_spec_sha256", Value::from("0".repeat(64))),
            "fixture_spec_sha256 must be \"",
        ),
        (
            "timestamp offset",
            set("created_at_utc", Value::from("2026-06-06T12:00:00-07:00")),
            "created_at_utc must be an ISO-8601 UTC timestamp ending in Z",
        ),
        (
            "dirty",
            set("git_tracked_dirty", Value::Bool(true)),
            "git_tracked_dirty must be false",
        ),
        (
            "unknown commit",
            set("git_commit", Value::from("0".repeat(40))),
            "git_commit must exist in the local repository",
        ),
        (
            "source path changed",
            Box::new(|r: &Repo, _a: &mut Value| {
                // Pointing the fixture at another file with the same bytes changes its identity.
                std::fs::copy(r.join("src/bench.rs"), r.join("src/bench2.rs")).unwrap();
                let mut m = read_json(&r.join(MANIFEST));
                edit_fixture(&mut m, |f| f.insert("source", Value::from("src/bench2.rs")));
                write_json(&r.join(MANIFEST), &m, false);
            }),
            "fixture_spec_sha256 must be \"",
        ),
        (
            "missing raw log",
            Box::new({
                let raw_log = raw_log.clone();
                move |r: &Repo, _a: &mut Value| std::fs::remove_file(r.join(&raw_log)).unwrap()
            }),
            "raw_log must exist before thresholds can lock",
        ),
        (
            "raw sha mismatch",
            set("raw_log_sha256", Value::from("a".repeat(64))),
            "raw_log_sha256 does not match raw_log",
        ),
        (
            "value differs from raw",
            Box::new(|_r: &Repo, a: &mut Value| {
                edit_object(a, |o| {
                    let mut m = o.get("metrics").and_then(Value::as_object).unwrap().clone();
                    m.insert("mix_100k_ms", Value::from(9.0));
                    o.insert("metrics", Value::Object(m));
                })
            }),
            "metrics.mix_100k_ms must match raw_log value",
        ),
        (
            "source sha mismatch",
            set("source_sha256", Value::from("b".repeat(64))),
            "source_sha256 does not match source",
        ),
        (
            "non-canonical raw path",
            set("raw_log", Value::from("logs/x.log")),
            "raw_log must live under bench-results/backend-latency/raw with a .log extension",
        ),
        (
            "absolute raw path",
            set("raw_log", Value::from("/tmp/x.log")),
            "raw_log must be repo-relative",
        ),
    ];
    let mut refused = 0;
    for (name, mutate, want) in &cases {
        let copy = fresh_copy(repo.root());
        let r = Repo::new(copy.path());
        let mut a = read_json(&r.join(RESULT));
        mutate(&r, &mut a);
        write_json(&r.join(RESULT), &a, true);
        let e = lock(&r, true).unwrap_err().to_string();
        assert!(e.contains(want), "{name}: expected {want:?} in {e}");
        assert!(e.starts_with("cpu_mix_microbench."), "{name}: {e}");
        refused += 1;
    }
    // A source absent at the artifact's commit (added after the capture).
    {
        let copy = fresh_copy(repo.root());
        let r = Repo::new(copy.path());
        git(r.root(), &["rm", "-q", "--cached", "src/bench.rs"]);
        git(r.root(), &["commit", "-q", "-m", "drop source"]);
        let mut a = read_json(&r.join(RESULT));
        let head = r.head_commit().unwrap();
        edit_object(&mut a, |o| o.insert("git_commit", Value::from(head)));
        write_json(&r.join(RESULT), &a, true);
        let e = lock(&r, true).unwrap_err().to_string();
        assert!(e.contains("source must exist at git_commit"), "{e}");
        refused += 1;
    }
    // Manifest-level and selection refusals.
    let e = lock_thresholds(
        &repo,
        &LockRequest {
            manifest_path: &repo.join(MANIFEST),
            output: None,
            headroom: 0.10,
            fixture_ids: &["nope".to_string()],
            check_only: true,
        },
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "requested fixture-id not present in manifest: nope"
    );
    for h in [1.0, -0.1, f64::NAN] {
        let e = lock_thresholds(
            &repo,
            &LockRequest {
                manifest_path: &repo.join(MANIFEST),
                output: None,
                headroom: h,
                fixture_ids: &[],
                check_only: true,
            },
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "--headroom must be >= 0 and < 1");
    }
    {
        let copy = fresh_copy(repo.root());
        let r = Repo::new(copy.path());
        let mut m = read_json(&r.join(MANIFEST));
        edit_object(&mut m, |o| {
            o.insert(
                "required_backends",
                qual_json::from_str(r#"["cuda","metal"]"#).unwrap(),
            )
        });
        write_json(&r.join(MANIFEST), &m, false);
        let e = lock(&r, true).unwrap_err().to_string();
        assert_eq!(
            e,
            "required backend has no fixture before thresholds can lock: metal"
        );
    }
    println!("{refused}/{} locker refusals agree", cases.len() + 1);
    // --check never writes.
    let before = std::fs::read(repo.join(MANIFEST)).unwrap();
    let s = lock(&repo, true).unwrap();
    assert_eq!(s.output, None);
    assert_eq!(std::fs::read(repo.join(MANIFEST)).unwrap(), before);
}

#[test]
fn partial_lock_leaves_others_pending_and_manifest_fixture_required() {
    let (dir, _) = captured_repo();
    let repo = Repo::new(dir.path());
    // Add a second, pending fixture on another backend.
    let mut m = read_json(&repo.join(MANIFEST));
    edit_object(&mut m, |o| {
        let mut fixtures = o.get("fixtures").and_then(Value::as_array).unwrap().clone();
        let mut other = fixtures[0].as_object().unwrap().clone();
        other.insert("id", Value::from("rocm_pending"));
        other.insert("backend", Value::from("rocm"));
        other.insert(
            "result_artifact",
            Value::from("bench-results/backend-latency/rocm.json"),
        );
        fixtures.push(Value::Object(other));
        o.insert("fixtures", Value::Array(fixtures));
    });
    write_json(&repo.join(MANIFEST), &m, false);
    let s = lock_thresholds(
        &repo,
        &LockRequest {
            manifest_path: &repo.join(MANIFEST),
            output: None,
            headroom: 0.10,
            fixture_ids: &[FIXTURE_ID.to_string()],
            check_only: false,
        },
    )
    .unwrap();
    assert_eq!(s.status, "fixture_required");
    assert_eq!(s.locked_fixture_ids, Some(vec![FIXTURE_ID.to_string()]));
    let m = read_json(&repo.join(MANIFEST));
    let other = qual_latency::manifest::find_fixture(&m, "rocm_pending").unwrap();
    assert_eq!(
        other.get("threshold_state").and_then(Value::as_str),
        Some("pending_fixture_result")
    );
    assert!(other
        .get("metrics")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x.get("max") == Some(&Value::Null)));
    // Output keeps key order and ASCII escaping.
    let text = std::fs::read_to_string(repo.join(MANIFEST)).unwrap();
    assert!(text.starts_with("{\n  \"schema_version\": 1,\n  \"status\": \"fixture_required\","));
    assert!(text.contains("caf\\u00e9 \\u00b5arch"));
}

#[test]
fn import_directory_then_zip_with_force() {
    let (src_dir, artifact) = captured_repo();
    let src = Repo::new(src_dir.path());
    // Commit the capture state so the artifact's commit exists in the copy too.
    let raw_log = artifact
        .get("raw_log")
        .and_then(Value::as_str)
        .unwrap()
        .to_owned();
    let raw_name = Path::new(&raw_log)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();

    // Build a bundle directory like the CI upload: result.json + raw/<name>.
    let bundle = tempfile::tempdir().unwrap();
    std::fs::copy(src.join(RESULT), bundle.path().join("result.json")).unwrap();
    std::fs::create_dir_all(bundle.path().join("raw")).unwrap();
    std::fs::copy(
        src.join(&raw_log),
        bundle.path().join("raw").join(&raw_name),
    )
    .unwrap();

    // Target: a copy of the repository without the capture outputs.
    let target_dir = fresh_copy(src.root());
    let target = Repo::new(target_dir.path());
    std::fs::remove_file(target.join(RESULT)).unwrap();
    std::fs::remove_file(target.join(&raw_log)).unwrap();

    let req = |bundle: &Path, force: bool| {
        qual_latency::import::import_bundle(
            &target,
            &qual_latency::import::ImportRequest {
                bundle,
                manifest_path: &target.join(MANIFEST),
                fixture_id: Some(FIXTURE_ID),
                force,
                limits: Default::default(),
            },
        )
    };
    let report = req(bundle.path(), false).unwrap();
    assert_eq!(report.result_artifact, RESULT);
    assert_eq!(report.raw_log, raw_log);
    assert_eq!(
        std::fs::read(target.join(RESULT)).unwrap(),
        std::fs::read(src.join(RESULT)).unwrap()
    );
    assert_eq!(
        std::fs::read(target.join(&raw_log)).unwrap(),
        std::fs::read(src.join(&raw_log)).unwrap()
    );
    // Re-import of identical bytes is a no-op.
    req(bundle.path(), false).unwrap();

    // A zip with different result bytes (same content, different layout) needs --force.
    let zip_path = bundle.path().join("../bundle-kiln-test.zip");
    {
        let f = std::fs::File::create(&zip_path).unwrap();
        let mut w = zip::ZipWriter::new(f);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        let mut a = read_json(&src.join(RESULT));
        edit_object(&mut a, |o| {
            o.insert("created_at_utc", Value::from("2026-06-06T12:00:00Z"))
        });
        w.start_file("result.json", opts).unwrap();
        std::io::Write::write_all(
            &mut w,
            qual_latency::jsonout::to_file_text(&a, true).as_bytes(),
        )
        .unwrap();
        w.start_file(format!("raw/{raw_name}"), opts).unwrap();
        std::io::Write::write_all(&mut w, &std::fs::read(src.join(&raw_log)).unwrap()).unwrap();
        w.finish().unwrap();
    }
    let e = req(&zip_path, false).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "destination already exists with different content; pass --force to replace:"
        ),
        "{e}"
    );
    let report = req(&zip_path, true).unwrap();
    assert_eq!(report.raw_log, raw_log);
    assert!(std::fs::read_to_string(target.join(RESULT))
        .unwrap()
        .contains("2026-06-06T12:00:00Z"));

    // A failing validation rolls back: a tampered raw log digest in a fresh target.
    let fresh = fresh_copy(src.root());
    let fresh_repo = Repo::new(fresh.path());
    std::fs::remove_file(fresh_repo.join(RESULT)).unwrap();
    std::fs::remove_file(fresh_repo.join(&raw_log)).unwrap();
    let mut bad = read_json(&src.join(RESULT));
    edit_object(&mut bad, |o| o.insert("hardware", Value::from("other")));
    write_json(&bundle.path().join("result.json"), &bad, true);
    let e = qual_latency::import::import_bundle(
        &fresh_repo,
        &qual_latency::import::ImportRequest {
            bundle: bundle.path(),
            manifest_path: &fresh_repo.join(MANIFEST),
            fixture_id: Some(FIXTURE_ID),
            force: false,
            limits: Default::default(),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("imported latency artifact failed validation:\n- fixture cpu_mix_microbench.result_artifact.hardware must be"), "{e}");
    assert!(!fresh_repo.join(RESULT).exists());
    assert!(!fresh_repo.join(&raw_log).exists());

    // Unsafe zip members are refused.
    let evil = bundle.path().join("../evil-kiln-test.zip");
    {
        let f = std::fs::File::create(&evil).unwrap();
        let mut w = zip::ZipWriter::new(f);
        w.start_file("../escape.json", zip::write::SimpleFileOptions::default())
            .unwrap();
        w.finish().unwrap();
    }
    let e = req(&evil, false).unwrap_err().to_string();
    assert_eq!(e, "artifact zip contains unsafe path: \"../escape.json\"");
    let _ = std::fs::remove_file(&zip_path);
    let _ = std::fs::remove_file(&evil);
    let e = req(&target.join("src/bench.rs"), false)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("artifact bundle must be a directory or zip:"),
        "{e}"
    );
}

/// Bytes this process has written through write(2) (`wchar` of `/proc/self/io`).
fn written_bytes() -> u64 {
    qual_exec::procfs::read_system_file("/proc/self/io")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A valid bundle zip with a 2 GiB padding member (and a 3 MiB `.json` that cannot be a
/// result): the import succeeds and writes out only what it reads — measured as the bytes
/// this process wrote and its peak memory during the import; a raw log that expands more
/// than 200× its compressed size is refused by name.
#[test]
fn zip_import_extracts_only_what_it_reads_with_a_bounded_expansion() {
    let (src_dir, artifact) = captured_repo();
    let src = Repo::new(src_dir.path());
    let raw_log = artifact
        .get("raw_log")
        .and_then(Value::as_str)
        .unwrap()
        .to_owned();
    let raw_name = Path::new(&raw_log)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let work = tempfile::tempdir().unwrap();
    let make_zip = |name: &str, raw: &[u8], padding: u64| {
        let path = work.path().join(name);
        let mut w = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            // Fast for the 2 GiB of padding; the best ratio for the bomb.
            .compression_level(Some(if padding > 0 { 1 } else { 9 }))
            .large_file(padding >= 1 << 32);
        w.start_file("result.json", opts).unwrap();
        std::io::Write::write_all(&mut w, &std::fs::read(src.join(RESULT)).unwrap()).unwrap();
        w.start_file(format!("raw/{raw_name}"), opts).unwrap();
        std::io::Write::write_all(&mut w, raw).unwrap();
        if padding > 0 {
            w.start_file("padding.bin", opts).unwrap();
            let chunk = vec![0u8; 1 << 20];
            for _ in 0..padding >> 20 {
                std::io::Write::write_all(&mut w, &chunk).unwrap();
            }
            w.start_file("big.json", opts).unwrap();
            std::io::Write::write_all(&mut w, &vec![b' '; 3 << 20]).unwrap();
        }
        w.finish().unwrap();
        path
    };
    let raw = std::fs::read(src.join(&raw_log)).unwrap();
    let padded = make_zip("padded.zip", &raw, 2 << 30);
    let bomb = make_zip("bomb.zip", &vec![b'0'; 32 << 20], 0);
    let target_dir = fresh_copy(src.root());
    let target = Repo::new(target_dir.path());
    std::fs::remove_file(target.join(RESULT)).unwrap();
    std::fs::remove_file(target.join(&raw_log)).unwrap();
    let req = |bundle: &Path| {
        qual_latency::import::import_bundle(
            &target,
            &qual_latency::import::ImportRequest {
                bundle,
                manifest_path: &target.join(MANIFEST),
                fixture_id: Some(FIXTURE_ID),
                force: false,
                limits: Default::default(),
            },
        )
    };
    let e = req(&bomb).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "artifact zip member \"raw/{raw_name}\" expands to more than 200 times its"
        )),
        "{e}"
    );
    let (w0, m0) = (
        written_bytes(),
        qual_exec::procfs::status_bytes(0, "VmHWM").unwrap(),
    );
    let report = req(&padded).unwrap();
    let (w1, m1) = (
        written_bytes(),
        qual_exec::procfs::status_bytes(0, "VmHWM").unwrap(),
    );
    eprintln!(
        "import wrote {} bytes, VmHWM grew {} bytes",
        w1 - w0,
        m1 - m0
    );
    assert_eq!(report.raw_log, raw_log);
    assert_eq!(std::fs::read(target.join(&raw_log)).unwrap(), raw);
    // Sibling tests write too: the bound is loose, the padding alone is 2 GiB.
    assert!(w1 - w0 < 256 << 20, "the import wrote {} bytes", w1 - w0);
    assert!(m1 - m0 < 256 << 20, "VmHWM grew {} bytes", m1 - m0);
}

#[test]
fn checker_self_test_cases() {
    let (dir, _) = covered_repo();
    let repo = Repo::new(dir.path());
    let manifest = read_json(&repo.join(MANIFEST));
    let fixture = qual_latency::manifest::find_fixture(&manifest, FIXTURE_ID)
        .unwrap()
        .clone();
    let strict = ValidateOptions {
        require_covered_provenance: true,
        enforce_git_retention: true,
        require_threshold_pass: true,
    };
    let validate = |r: &Repo, f: &Object| {
        qual_latency::artifact::validate_result_artifact(
            r,
            f,
            &r.join(RESULT),
            "fixtures[0]",
            manifest.get("schema_version"),
            Some(&r.join(MANIFEST)),
            strict,
        )
    };
    assert_eq!(validate(&repo, &fixture), Vec::<String>::new());
    // Value 12.0 against a 10.0 ceiling: both the threshold and the raw-log mismatch.
    let mut f = fixture.clone();
    let mut metrics = f.get("metrics").and_then(Value::as_array).unwrap().clone();
    edit_object(&mut metrics[0], |m| m.insert("max", Value::from(10.0)));
    f.insert("metrics", Value::Array(metrics));
    let copy = fresh_copy(repo.root());
    let r = Repo::new(copy.path());
    let mut a = read_json(&r.join(RESULT));
    edit_object(&mut a, |o| {
        let mut m = o.get("metrics").and_then(Value::as_object).unwrap().clone();
        m.insert("mix_100k_ms", Value::from(12.0));
        o.insert("metrics", Value::Object(m));
    });
    write_json(&r.join(RESULT), &a, true);
    let errors = validate(&r, &f);
    assert!(
        errors
            .iter()
            .any(|e| e.ends_with("observed value 12.0 does not satisfy <= 10.0")),
        "{errors:#?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("metrics.mix_100k_ms must match raw_log value")),
        "{errors:#?}"
    );
    // Wrong fixture id, wrong hardware, inf metric, dirty, missing commit.
    for (key, value, want) in [
        (
            "fixture_id",
            "\"wrong\"",
            "fixture_id must be \"cpu_mix_microbench\", got \"wrong\"",
        ),
        ("hardware", "\"other\"", "hardware must be"),
        (
            "git_tracked_dirty",
            "true",
            "git_tracked_dirty must be false when --require-covered is set",
        ),
        (
            "git_commit",
            "\"1111111111111111111111111111111111111111\"",
            "git_commit must exist in the local repository when --require-covered is set",
        ),
        (
            "created_at_utc",
            "\"2026-06-06T12:00:00-07:00\"",
            "created_at_utc must be an ISO-8601 UTC timestamp ending in Z",
        ),
        ("raw_log", "\"/abs/x.log\"", "raw_log must be repo-relative"),
    ] {
        let copy = fresh_copy(repo.root());
        let r = Repo::new(copy.path());
        let mut a = read_json(&r.join(RESULT));
        edit_object(&mut a, |o| {
            o.insert(key, qual_json::from_str(value).unwrap())
        });
        write_json(&r.join(RESULT), &a, true);
        let errors = validate(&r, &fixture);
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{key}: {want:?} not in {errors:#?}"
        );
    }
    // An Infinity literal in metrics keeps the original's message.
    let copy = fresh_copy(repo.root());
    let r = Repo::new(copy.path());
    let text = std::fs::read_to_string(r.join(RESULT)).unwrap();
    let re = text.find("\"mix_100k_ms\": ").unwrap() + "\"mix_100k_ms\": ".len();
    let end = re + text[re..].find([',', '\n']).unwrap();
    std::fs::write(
        r.join(RESULT),
        format!("{}Infinity{}", &text[..re], &text[end..]),
    )
    .unwrap();
    assert_eq!(
        validate(&r, &fixture),
        ["fixtures[0].result_artifact.metrics.mix_100k_ms must be finite numeric"]
    );
}

#[test]
fn strict_checker_refuses_non_canonical_result_paths() {
    let (dir, _) = covered_repo();
    let repo = Repo::new(dir.path());
    for (path, want) in [
        ("results/cpu-mix.json", "fixture \"cpu_mix_microbench\" at fixtures[0].result_artifact must live under bench-results/backend-latency with a .json extension: results/cpu-mix.json"),
        ("bench-results/backend-latency/raw/cpu-mix.json", "fixture \"cpu_mix_microbench\" at fixtures[0].result_artifact must live under bench-results/backend-latency with a .json extension: bench-results/backend-latency/raw/cpu-mix.json"),
        ("/abs/cpu-mix.json", "fixture \"cpu_mix_microbench\" at fixtures[0].result_artifact must be repo-relative when --require-covered is set: /abs/cpu-mix.json"),
    ] {
        let copy = fresh_copy(repo.root());
        let r = Repo::new(copy.path());
        let mut m = read_json(&r.join(MANIFEST));
        edit_fixture(&mut m, |f| f.insert("result_artifact", Value::from(path)));
        write_json(&r.join(MANIFEST), &m, false);
        let errors = strict_errors(&r);
        assert!(errors.iter().any(|e| e == want), "{want:?} not in {errors:#?}");
    }
}

#[test]
fn import_needs_a_fixture_id_when_the_bundle_holds_several_results() {
    let (src_dir, artifact) = captured_repo();
    let src = Repo::new(src_dir.path());
    let bundle = tempfile::tempdir().unwrap();
    std::fs::copy(src.join(RESULT), bundle.path().join("a.json")).unwrap();
    let mut other = artifact.clone();
    edit_object(&mut other, |o| {
        o.insert("fixture_id", Value::from("other_fixture"))
    });
    write_json(&bundle.path().join("b.json"), &other, true);
    std::fs::write(
        bundle.path().join("notes.json"),
        "{\"artifact_schema_version\": 2}",
    )
    .unwrap();
    std::fs::create_dir_all(bundle.path().join("__MACOSX")).unwrap();
    std::fs::copy(src.join(RESULT), bundle.path().join("__MACOSX/c.json")).unwrap();
    let req = |id: Option<&str>| {
        qual_latency::import::import_bundle(
            &src,
            &qual_latency::import::ImportRequest {
                bundle: bundle.path(),
                manifest_path: &src.join(MANIFEST),
                fixture_id: id,
                force: false,
                limits: Default::default(),
            },
        )
        .unwrap_err()
        .to_string()
    };
    let e = req(None);
    assert!(
        e.starts_with("artifact bundle contains multiple result artifacts; pass --fixture-id:"),
        "{e}"
    );
    assert!(!e.contains("__MACOSX") && !e.contains("notes.json"), "{e}");
    assert_eq!(
        req(Some("missing")),
        "no latency result artifact JSON found for fixture \"missing\""
    );
    // The selected result's raw log is not in the bundle.
    let raw_log = artifact.get("raw_log").and_then(Value::as_str).unwrap();
    assert_eq!(
        req(Some(FIXTURE_ID)),
        format!("raw log not found in artifact bundle: {raw_log}")
    );
    // A raw log whose bytes differ from the recorded digest.
    std::fs::write(
        bundle.path().join(Path::new(raw_log).file_name().unwrap()),
        "tampered\n",
    )
    .unwrap();
    assert_eq!(
        req(Some(FIXTURE_ID)),
        format!("raw log checksum does not match result raw_log_sha256: {raw_log}")
    );
    let missing = bundle.path().join("nope");
    let e = qual_latency::import::import_bundle(
        &src,
        &qual_latency::import::ImportRequest {
            bundle: &missing,
            manifest_path: &src.join(MANIFEST),
            fixture_id: None,
            force: false,
            limits: Default::default(),
        },
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        format!("artifact bundle does not exist: {}", missing.display())
    );
}

#[test]
fn manifest_level_checks() {
    let dir = setup_repo(&bench_command(""));
    let repo = Repo::new(dir.path());
    let check = |m: &Value, strict: bool| {
        qual_latency::manifest::validate_manifest(&repo, m, &repo.join(MANIFEST), strict)
    };
    let base = read_json(&repo.join(MANIFEST));
    assert_eq!(check(&base, false), Vec::<String>::new());
    let mut m = base.clone();
    edit_fixture(&mut m, |f| {
        f.insert(
            "runner_labels",
            qual_json::from_str(r#"["self-hosted",""]"#).unwrap(),
        )
    });
    assert_eq!(
        check(&m, false),
        ["fixture \"cpu_mix_microbench\" at fixtures[0].runner_labels[1] must be a non-empty string"]
    );
    let mut m = base.clone();
    edit_object(&mut m, |o| {
        o.remove("policy");
    });
    assert_eq!(
        check(&m, false),
        [
            "manifest missing required keys: [\"policy\"]",
            "policy must be an object"
        ]
    );
    let mut m = base.clone();
    edit_fixture(&mut m, |f| {
        f.insert("source", Value::from("src/missing.rs"))
    });
    assert_eq!(
        check(&m, false),
        ["fixture \"cpu_mix_microbench\" at fixtures[0].source does not exist: src/missing.rs"]
    );
    let mut m = base.clone();
    edit_object(&mut m, |o| {
        o.insert(
            "required_backends",
            qual_json::from_str(r#"["cuda","tpu"]"#).unwrap(),
        )
    });
    assert_eq!(
        check(&m, false),
        ["required_backends[1] is not a valid backend: \"tpu\""]
    );
    let strict = check(&base, true);
    for want in [
        "status must be covered when --require-covered is set",
        "fixture \"cpu_mix_microbench\" at fixtures[0].result_artifact does not exist: bench-results/backend-latency/cpu-mix.json",
        "fixture \"cpu_mix_microbench\" at fixtures[0].threshold_state must be locked_threshold when --require-covered is set",
        "fixture \"cpu_mix_microbench\" at fixtures[0].metrics[0].max must be finite numeric when --require-covered is set",
        "fixture \"cpu_mix_microbench\" at fixtures[0].metrics[1].max must be finite numeric when --require-covered is set",
    ] {
        assert!(
            strict.iter().any(|e| e == want),
            "{want:?} not in {strict:#?}"
        );
    }
}
