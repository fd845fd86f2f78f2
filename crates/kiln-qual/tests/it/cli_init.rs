//! `kiln-qual init`: every engine's scaffold passes `workload check`; `--dry-run` writes
//! nothing; nothing is ever overwritten; a missing engine executable is a clear refusal; and
//! the openai-compatible scaffold, pointed at a wrapper around the mock server, runs end to end
//! through `kiln-qual run` in a fresh git repository and its receipt validates.

use crate::common;

use common::{copy_dir, git, init_run_and_check, kq, repo_root};
use std::path::Path;
use std::process::Command;

const ENGINES: [&str; 6] = [
    "llama-cpp",
    "vllm",
    "sglang",
    "ollama",
    "tgi",
    "openai-compatible",
];

#[test]
fn every_engine_scaffolds_a_valid_workload_and_nothing_is_overwritten() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    git(root, &["init", "-q"]);
    let out = kq(
        root,
        &[
            "init",
            "--engine",
            "vllm",
            "--server",
            "/bin/true",
            "--dry-run",
        ],
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("serving-vllm-v1.json (would write)"));
    assert!(!root.join("qualification").exists(), "dry run wrote files");
    for e in ENGINES {
        let out = kq(root, &["init", "--engine", e, "--server", "/bin/true"]);
        assert!(
            out.status.success(),
            "{e}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let files: Vec<String> = ENGINES
        .iter()
        .map(|e| format!("qualification/workloads/serving-{e}-v1.json"))
        .collect();
    let mut args = vec!["workload", "check"];
    args.extend(files.iter().map(String::as_str));
    let out = kq(root, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let launch = root.join("qualification/serving/vllm/launch.json");
    let before = std::fs::read(&launch).unwrap();
    let out = kq(root, &["init", "--engine", "vllm", "--server", "/bin/true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refuse to overwrite"));
    assert_eq!(std::fs::read(&launch).unwrap(), before);
    let out = kq(root, &["init", "--engine", "openai-compatible"]);
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .current_dir(root)
        .env("PATH", "/nonexistent")
        .args(["init", "--engine", "tgi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("failed to find text-generation-launcher on PATH"));
}

/// The end-to-end scaffolds run one at a time (two servers and clients at once on a small
/// host would only measure each other).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn openai_compatible_scaffold_runs_end_to_end() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    copy_dir(
        &repo_root().join("qualification/fixtures/tiny-model"),
        &root.join("models/tiny"),
    );
    std::fs::create_dir_all(root.join("tools")).unwrap();
    let server = root.join("tools/server");
    std::fs::write(
        &server,
        format!(
            "#!/bin/sh\nexec {} mock-server --ttft-ms 20 --itl-ms 5 \"$@\"\n",
            env!("CARGO_BIN_EXE_kiln-qual")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&server, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(root.join(".gitignore"), ".qualification/\n").unwrap();
    init_run_and_check(root, "openai-compatible", "tools/server", "18137");
}

/// A served case whose server cannot start (a wrapper whose program is not on `PATH`: it
/// says so and exits 127): `run` fails and shows the cause itself — the exit code and the
/// server log's tail — not only the runner's `exit code 1 not in [0]`.
#[test]
fn run_names_why_the_server_did_not_start() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    copy_dir(
        &repo_root().join("qualification/fixtures/tiny-model"),
        &root.join("models/tiny"),
    );
    std::fs::create_dir_all(root.join("tools")).unwrap();
    let server = root.join("tools/server");
    std::fs::write(
        &server,
        "#!/bin/sh\necho 'tools/server: kq-no-such-engine: not found' >&2\nexit 127\n",
    )
    .unwrap();
    std::fs::set_permissions(&server, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(root.join(".gitignore"), ".qualification/\n").unwrap();
    git(root, &["init", "-q"]);
    let out = kq(
        root,
        &[
            "init",
            "--engine",
            "openai-compatible",
            "--server",
            "tools/server",
            "--port",
            "18139",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "scaffold"]);
    let out = kq(
        root,
        &[
            "run",
            "qualification/workloads/serving-openai-compatible-v1.json",
            "--variant",
            "cpu",
            "--host-id",
            "init-host",
            "--model",
            "models/tiny",
            "--output",
            ".qualification/receipts/failed.json",
        ],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("server exited before becoming ready (exited with code 127); log tail: tools/server: kq-no-such-engine: not found"),
        "{text}"
    );
}

/// Every file below `dir` (names only), for "nothing changed" checks.
fn names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            out.push(e.file_name().to_string_lossy().into_owned());
            out.extend(names(&e.path()));
        }
    }
    out.sort();
    out
}

#[test]
fn init_refuses_outside_a_git_repository_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("plain");
    std::fs::create_dir(&root).unwrap();
    for args in [
        &["init", "--engine", "vllm", "--server", "/bin/true"][..],
        &[
            "init",
            "--engine",
            "vllm",
            "--server",
            "/bin/true",
            "--root",
            ".",
        ],
    ] {
        let out = kq(&root, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("failed to scaffold: ") && err.contains("is not in a git repository"),
            "{err}"
        );
        assert!(names(d.path()) == ["plain"], "{:?}", names(d.path()));
    }
    // --root must be the repository's top level, not a directory inside it.
    git(&root, &["init", "-q"]);
    std::fs::create_dir(root.join("sub")).unwrap();
    let out = kq(
        &root,
        &[
            "init",
            "--engine",
            "vllm",
            "--server",
            "/bin/true",
            "--root",
            "sub",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not the top level of its git repository")
    );
    assert!(!root.join("sub/qualification").exists());
    assert!(!root.join("qualification").exists());
}

#[test]
fn init_refuses_a_symlinked_qualification_directory_and_writes_nothing_outside() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("repo");
    let outside = d.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    git(&root, &["init", "-q"]);
    std::os::unix::fs::symlink(&outside, root.join("qualification")).unwrap();
    let out = kq(
        &root,
        &["init", "--engine", "vllm", "--server", "/bin/true"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to write qualification/")
            && err.contains(": qualification is a symlink"),
        "{err}"
    );
    assert!(names(&outside).is_empty(), "{:?}", names(&outside));
    // A symlink deeper down is refused the same way.
    std::fs::remove_file(root.join("qualification")).unwrap();
    std::fs::create_dir_all(root.join("qualification")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("qualification/serving")).unwrap();
    let out = kq(
        &root,
        &["init", "--engine", "vllm", "--server", "/bin/true"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("qualification/serving is a symlink"));
    assert!(names(&outside).is_empty(), "{:?}", names(&outside));
    assert!(names(&root.join("qualification")) == ["serving"]);
}
