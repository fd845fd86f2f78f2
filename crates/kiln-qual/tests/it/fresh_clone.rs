//! The first hour from a fresh clone (issue 25): a real `git clone` of this repository into
//! a directory below `target/`, then `init --engine openai-compatible` without `--server`
//! (the bundled mock server, a real child process of `kiln-qual serve`), commit, and two
//! consecutive `run`s without `--output`: each writes its exploratory receipt below the
//! ignored `.qualification/receipts/`, so the second run still finds a clean worktree, both
//! receipts validate, and the clone is left as clean as it was.

use crate::common;

use common::{git, repo_root};
use std::path::Path;
use std::process::Command;

/// `kiln-qual` in `dir`, with the binary under test first on `PATH` (the scaffold's
/// `qualification/bin/kiln-qual` launcher runs kiln-qual from `PATH`, as after `cargo install`).
fn kq(dir: &Path, args: &[&str]) -> std::process::Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_kiln-qual"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(bin)
        .current_dir(dir)
        .env("PATH", path)
        .args(args)
        .output()
        .unwrap()
}

fn porcelain(root: &Path) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["status", "--porcelain", "--untracked-files=all"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn receipts(root: &Path) -> Vec<std::path::PathBuf> {
    let dir = root.join(".qualification/receipts/cpu/fresh-clone-host");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "json"));
    v.sort();
    v
}

#[test]
fn a_fresh_clone_scaffolds_the_mock_and_runs_twice_without_output() {
    let _g = crate::cli_init::SERIAL
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::Builder::new()
        .prefix("fresh-clone-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let root = tmp.path().join("kiln-qual");
    let out = Command::new("git")
        .args(["clone", "-q", "--no-hardlinks"])
        .arg(repo_root())
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git clone: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(porcelain(&root), "", "a fresh clone is clean");

    // init without --server: the bundled mock, said so, and a launch line that fits it.
    let out = kq(
        &root,
        &["init", "--engine", "openai-compatible", "--port", "18143"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("no --server: the launch recipe starts the bundled mock server"),
        "{err}"
    );
    let launch: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("qualification/serving/openai-compatible/launch.json")).unwrap(),
    )
    .unwrap();
    let command: Vec<&str> = launch["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(command[1], "mock-server", "{command:?}");
    assert!(
        command.ends_with(&["--port", "18143", "--model", "${model_path}"]),
        "{command:?}"
    );
    // The clone's .gitignore already ignores .qualification/: init leaves it alone.
    assert!(!err.contains("appended /.qualification/"), "{err}");
    git(&root, &["add", "-A"]);
    git(
        &root,
        &["commit", "-q", "-m", "scaffold serving qualification"],
    );

    // Two runs in a row, neither with --output; the model is the repository's tiny fixture.
    let workload = "qualification/workloads/serving-openai-compatible-v1.json";
    let run = [
        "run",
        workload,
        "--variant",
        "cpu",
        "--host-id",
        "fresh-clone-host",
        "--model",
        "qualification/fixtures/tiny-model",
    ];
    for n in 1..=2 {
        let out = kq(&root, &run);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !err.contains("worktree must be clean"),
            "run {n} was refused for a dirty tree: {err}"
        );
        common::passed_or_refused_by_the_gate(&root, &out);
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(
            printed
                .trim()
                .starts_with(".qualification/receipts/cpu/fresh-clone-host/"),
            "run {n} printed {printed:?}"
        );
        assert_eq!(receipts(&root).len(), n, "run {n}: {err}");
        assert_eq!(porcelain(&root), "", "run {n} left the worktree dirty");
    }
    for r in receipts(&root) {
        let out = kq(&root, &["receipt", "check", &r.to_string_lossy()]);
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The tracked receipt tree got nothing.
    assert!(!root.join("qualification/receipts").exists());
}
