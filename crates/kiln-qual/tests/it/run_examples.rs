//! The bundled CPU example workloads run end to end through the `kiln-qual` binary in a fresh
//! git repository, and the binding commands print what the runner binds.

use crate::common;

use common::{copy_dir, git, repo_root};

use std::path::Path;
use std::process::Command;

/// A fresh repository holding the example workloads, the tiny model fixture and this build of
/// `kiln-qual` at `target/debug/kiln-qual` (ignored), as a user's checkout would after a build.
fn example_repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let src = repo_root();
    std::fs::create_dir_all(root.join("qualification/workloads")).unwrap();
    for w in ["cpu-environment-v1.json", "cpu-correctness-v1.json"] {
        std::fs::copy(
            src.join("qualification/workloads").join(w),
            root.join("qualification/workloads").join(w),
        )
        .unwrap();
    }
    copy_dir(
        &src.join("qualification/fixtures/tiny-model"),
        &root.join("qualification/fixtures/tiny-model"),
    );
    std::fs::write(root.join(".gitignore"), ".qualification/\ntarget/\n").unwrap();
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "examples"]);
    std::fs::create_dir_all(root.join("target/debug")).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_kiln-qual"),
        root.join("target/debug/kiln-qual"),
    )
    .unwrap();
    d
}

fn kiln_qual(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(args)
        .current_dir(root)
        .output()
        .unwrap()
}

#[test]
fn example_workloads_pass_and_print_the_receipt_path() {
    let d = example_repo();
    for (workload, variant, out) in [
        (
            "qualification/workloads/cpu-environment-v1.json",
            "cpu",
            ".qualification/receipts/env.json",
        ),
        (
            "qualification/workloads/cpu-correctness-v1.json",
            "cpu-debug",
            ".qualification/receipts/corr.json",
        ),
    ] {
        let o = kiln_qual(
            d.path(),
            &[
                "run",
                workload,
                "--variant",
                variant,
                "--host-id",
                "ci-host",
                "--output",
                out,
                "--term-grace-seconds",
                "2",
            ],
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{workload}: {stderr}");
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), out);
        assert!(stderr.contains("verdict: passed"), "{stderr}");
        let bytes = std::fs::read(d.path().join(out)).unwrap();
        let v = qual_json::from_slice(&bytes).unwrap();
        let errs = qual_receipt::validate::validate_strict(
            &v,
            &qual_receipt::validate::StrictChecks {
                root: Some(d.path()),
                current_source: None,
                local_artifacts: true,
                known_commit: true,
                publication: None,
            },
        );
        assert!(errs.is_empty(), "{errs:?}");
    }
}

#[test]
fn refusal_exit_code_is_three_and_nothing_is_created() {
    let d = example_repo();
    std::fs::write(d.path().join("untracked.txt"), "x").unwrap();
    let o = kiln_qual(
        d.path(),
        &[
            "run",
            "qualification/workloads/cpu-environment-v1.json",
            "--variant",
            "cpu",
            "--host-id",
            "ci-host",
        ],
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("must be clean"));
    assert!(!d.path().join(".qualification").exists());
    assert!(!d.path().join("qualification/receipts").exists());
}

#[test]
fn binding_commands_report_digests() {
    let d = example_repo();
    let o = kiln_qual(d.path(), &["source-tree", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v = qual_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v.get("format").and_then(|x| x.as_str()),
        Some("kiln-source-tree-v1")
    );
    assert_eq!(v.get("profile").and_then(|x| x.as_str()), Some("generic"));
    let o = kiln_qual(
        d.path(),
        &[
            "model",
            "fingerprint",
            "--model-path",
            "qualification/fixtures/tiny-model",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    let v = qual_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.get("id").and_then(|x| x.as_str()), Some("tiny-model"));
    let o = kiln_qual(
        d.path(),
        &["model", "fingerprint", "--model-path", "nowhere"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("model fingerprint failed:"));
}
