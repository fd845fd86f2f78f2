//! Shared helpers: a real temporary git repository with committed workloads, and run requests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use qual_runner::RunRequest;

/// The case command `qual-runner-fixture`, a bin of `qual-test-fixtures` found next to this
/// test binary: `cargo test --workspace` builds it; a run of this crate alone needs
/// `cargo build -p qual-test-fixtures --bins` first (cargo builds no bin of a dependency).
pub fn fixture() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let path = qual_test_fixtures::fixture_binary("qual-runner-fixture").expect(
            "qual-runner-fixture is not built: run cargo build -p qual-test-fixtures --bins",
        );
        path.to_str().expect("a UTF-8 target directory").to_owned()
    })
}

pub struct Repo {
    pub dir: tempfile::TempDir,
}

pub fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Repo {
    /// A repository with `.gitignore` (`.qualification/`, `models/`, `scratch/`), an empty
    /// `scratch/` (where cases may leave files for a test: the rest of the host is read-only
    /// to them), a tracked `src/lib.rs`, and the given workloads committed under
    /// `qualification/workloads/`.
    pub fn new(workloads: &[(&str, String)]) -> Repo {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        git(root, &["init", "-q"]);
        std::fs::write(
            root.join(".gitignore"),
            ".qualification/\nmodels/\nscratch/\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("scratch")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "pub fn v() -> u32 { 1 }\n").unwrap();
        std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
        for (name, text) in workloads {
            std::fs::write(root.join("qualification/workloads").join(name), text).unwrap();
        }
        git(root, &["add", "-A"]);
        git(root, &["commit", "-q", "-m", "init"]);
        Repo { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn request(&self, workload: &str, variant: &str) -> RunRequest {
        RunRequest {
            cwd: self.root().to_path_buf(),
            workload: PathBuf::from(format!("qualification/workloads/{workload}")),
            variant: variant.into(),
            host_id: "test-host".into(),
            output: None,
            vars: Vec::new(),
            model: None,
            model_id: None,
            receipt_id: Some("runner-test-receipt-v1".into()),
            term_grace_seconds: 1.0,
            command: vec!["kiln-qual".into(), "run".into()],
        }
    }

    /// Every path below the root except `.git`, sorted.
    pub fn snapshot(&self) -> Vec<String> {
        let mut out = Vec::new();
        fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let p = e.path();
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                if rel == ".git" {
                    continue;
                }
                out.push(rel);
                if e.file_type().unwrap().is_dir() {
                    walk(root, &p, out);
                }
            }
        }
        walk(self.root(), self.root(), &mut out);
        out.sort();
        out
    }
}

pub fn runner_protocol() -> &'static str {
    r#"{"format":"qualification-case-result-v1","producer":"runner","path_environment_variable":"KILN_QUALIFICATION_CASE_RESULT","declared_metrics":["case_pass","exit_code","output_assertion_failures"]}"#
}

pub fn command_protocol(metrics: &[&str]) -> String {
    let m: Vec<String> = metrics.iter().map(|m| format!("\"{m}\"")).collect();
    format!(
        r#"{{"format":"qualification-case-result-v1","producer":"command","path_environment_variable":"KILN_QUALIFICATION_CASE_RESULT","declared_metrics":[{}]}}"#,
        m.join(",")
    )
}

/// A case JSON object.
pub fn case(id: &str, argv: &[&str], env: &str, assertions: &str, protocol: &str) -> String {
    let argv: Vec<String> = argv
        .iter()
        .map(|a| serde_json::to_string(a).unwrap())
        .collect();
    format!(
        r#"{{"id":"{id}","description":"test case {id}","required":true,"command":[{}],"working_directory":".","environment":{env},"timeout_seconds":30,"expected_exit_codes":[0],"output_assertions":[{assertions}],"result_protocol":{protocol}}}"#,
        argv.join(",")
    )
}

/// A variant JSON object with backend cpu.
pub fn variant(id: &str, config: &str, cases: &[String]) -> String {
    format!(
        r#"{{"id": "{id}", "description": "host cpu", "backend": "cpu", "device_requirement": "none", "skip_policy": "fail", "effective_config": {config}, "cases": [{}]}}"#,
        cases.join(",")
    )
}

/// A correctness workload with one cpu variant.
pub fn workload(
    id: &str,
    kind: &str,
    variables: &str,
    config: &str,
    cases: &[String],
    reps: u64,
) -> String {
    workload_variants(id, kind, variables, &[variant("cpu", config, cases)], reps)
}

/// A workload with the given variants (ascending ids).
pub fn workload_variants(
    id: &str,
    kind: &str,
    variables: &str,
    variants: &[String],
    reps: u64,
) -> String {
    let (seed, delivery, policy) = if kind == "environment" {
        ("null", "not_applicable", "null".to_string())
    } else {
        (
            "7",
            "fixed_fixture",
            r#"{"mode":"self_contained_correctness","variant_pairs":[],"backend_pairs":[],"metric_rules":[]}"#
                .to_string(),
        )
    };
    format!(
        r#"{{
  "schema_version": 1,
  "workload_id": "{id}",
  "kind": "{kind}",
  "description": "runner integration test workload",
  "determinism": {{"seed": {seed}, "seed_delivery": "{delivery}", "repetitions": {reps}, "case_order": "declared", "max_parallel_cases": 1, "network_access": "forbidden"}},
  "variables": {variables},
  "variants": [{}],
  "comparison_policy": {policy}
}}
"#,
        variants.join(",")
    )
}

/// Loads a receipt, validates it strictly (local artifacts, known commit) and verifies it
/// against its run directory (`receipt verify`).
pub fn validate(root: &Path, path: &Path) -> qual_json::Value {
    let bytes = std::fs::read(path).unwrap();
    let v = qual_json::from_slice(&bytes).unwrap();
    assert_eq!(
        qual_receipt::write::to_pretty_json(&v).as_bytes(),
        &bytes[..]
    );
    let strict = qual_receipt::validate::StrictChecks {
        root: Some(root),
        current_source: None,
        local_artifacts: true,
        known_commit: true,
        publication: None,
    };
    let errs = qual_receipt::validate::validate_strict(&v, &strict);
    assert!(errs.is_empty(), "{errs:?}");
    // Every receipt the runner writes is recomputable from its retained run directory.
    let findings = qual_receipt::verify::verify_run(&v, root, None);
    assert!(findings.is_empty(), "receipt verify: {findings:#?}");
    v
}

pub fn details(v: &qual_json::Value, i: usize) -> String {
    v.get("results").unwrap().as_array().unwrap()[i]
        .get("details")
        .and_then(|d| d.as_str())
        .unwrap_or("")
        .to_string()
}

/// A marker unique to one test, for a case's environment (see [`marker_env`]): every process
/// the case starts inherits it, wherever it escapes to, so `/proc/<pid>/environ` finds them.
pub fn marker() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "kq-runner-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// The case `environment` object carrying `marker`, plus `extra` (`"NAME":"VALUE"` pairs).
pub fn marker_env(marker: &str, extra: &str) -> String {
    if extra.is_empty() {
        format!(r#"{{"KQ_TEST_MARKER":"{marker}"}}"#)
    } else {
        format!(r#"{{"KQ_TEST_MARKER":"{marker}",{extra}}}"#)
    }
}

pub use qual_test_fixtures::processes_with_marker;

/// Asserts that no process of the case is alive: `/proc` holds no process with its marker.
pub fn assert_no_case_process(marker: &str) {
    let left = processes_with_marker(marker);
    assert!(
        left.is_empty(),
        "processes of the case still alive: {left:?}"
    );
}
