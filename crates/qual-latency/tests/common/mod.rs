//! Shared helpers for qual-latency integration tests: real git repositories in temp dirs.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub const MANIFEST: &str = "docs/contracts/backend-latency-fixtures.json";
pub const FIXTURE_ID: &str = "cpu_mix_microbench";
pub const RESULT: &str = "bench-results/backend-latency/cpu-mix.json";

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The fixture command `kiln-latency-fixture-bench`, a bin of `qual-test-fixtures` found next
/// to this test binary: `cargo test --workspace` builds it; a run of this crate alone needs
/// `cargo build -p qual-test-fixtures --bins` first (cargo builds no bin of a dependency).
pub fn bench_bin() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let path = qual_test_fixtures::fixture_binary("kiln-latency-fixture-bench").expect(
            "kiln-latency-fixture-bench is not built: run cargo build -p qual-test-fixtures --bins",
        );
        path.to_str().expect("a UTF-8 target directory").to_owned()
    })
}

/// The manifest text of a one-fixture repository whose command is the bench program.
pub fn manifest_text(command: &str) -> String {
    let command = serde_json::to_string(command).unwrap();
    format!(
        r#"{{
  "schema_version": 1,
  "status": "fixture_required",
  "policy": {{
    "covered_gate_requires": [
      "Every required backend has at least one known hardware fixture.",
      "Every fixture has locked numeric thresholds for its required measurements.",
      "Every locked threshold has a checked hardware-result artifact from the named fixture.",
      "Default-feature local tests must not mark the hardware latency gate covered."
    ]
  }},
  "required_backends": [
    "cuda"
  ],
  "fixtures": [
    {{
      "id": "{FIXTURE_ID}",
      "backend": "cuda",
      "hardware": "CI CPU stand-in (caf\u00e9 \u00b5arch)",
      "runner_labels": [
        "self-hosted",
        "linux"
      ],
      "source": "src/bench.rs",
      "command": {command},
      "result_artifact": "{RESULT}",
      "threshold_state": "pending_fixture_result",
      "metrics": [
        {{
          "name": "mix_100k_ms",
          "unit": "ms",
          "comparison": "<=",
          "max": null
        }},
        {{
          "name": "mix_100k_ops_per_s",
          "unit": "ops/s",
          "comparison": ">=",
          "max": null
        }}
      ]
    }}
  ],
  "missing_fixture_slots": []
}}
"#
    )
}

/// A fresh repository with a committed bench source and manifest.
pub fn setup_repo(command: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join(".gitignore"), "*.log\ntarget/\n").unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/bench.rs"),
        "// the benchmark source bound by digest\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("docs/contracts")).unwrap();
    std::fs::write(root.join(MANIFEST), manifest_text(command)).unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "fixture"]);
    dir
}

pub fn bench_command(extra: &str) -> String {
    let bin = qual_latency::plan::shell_quote(bench_bin());
    format!("KILN_BENCH_LABEL=ci {bin} --iterations 3{extra}")
}

/// Copies a directory tree (including `.git` and ignored files).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let ft = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if ft.is_dir() {
            copy_tree(&e.path(), &dest);
        } else if ft.is_file() {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

pub fn fresh_copy(from: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(from, dir.path());
    dir
}

pub fn corpus_dir() -> Option<PathBuf> {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kiln-corpus/legacy-latency");
    p.is_dir().then_some(p)
}
