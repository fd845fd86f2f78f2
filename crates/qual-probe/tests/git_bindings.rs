//! The git binding and the source-tree digest against real repositories made with `git`.

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;

use qual_probe::git::Repo;
use qual_probe::source_tree::{compute, SourceTreeProfile};

fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn kiln_repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    git(r, &["init", "-q"]);
    write(r, "Cargo.toml", "[workspace]\n");
    write(r, "crates/demo/src/lib.rs", "pub fn value() -> u32 { 1 }\n");
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "init"]);
    d
}

#[test]
fn golden_vector_from_a_real_git_index() {
    let d = kiln_repo();
    let t = compute(d.path(), SourceTreeProfile::Kiln).unwrap();
    assert_eq!(
        t.digest,
        "sha256:4cd7ed42f3d96cf8cf4a3a3767d84742fecc6915e7c7d09961bb5ca037977fc3"
    );
    assert_eq!(t.files.len(), 2);
}

#[test]
fn kiln_profile_ignores_receipts_docs_and_historical_artifacts() {
    let d = kiln_repo();
    let r = d.path();
    let base = compute(r, SourceTreeProfile::Kiln).unwrap().digest;
    for f in [
        "qualification/receipts/cpu/h/r.json",
        "docs/guide.md",
        "desktop/README.md",
        "assets/profiling/p.txt",
        "scripts/c2_artifacts/a.txt",
    ] {
        write(r, f, "x\n");
    }
    git(r, &["add", "-A"]);
    assert_eq!(compute(r, SourceTreeProfile::Kiln).unwrap().digest, base);
    // The generic profile sees docs but still not receipts.
    let g = compute(r, SourceTreeProfile::Generic).unwrap();
    assert!(g.files.iter().any(|f| f.path == "docs/guide.md"));
    assert!(!g
        .files
        .iter()
        .any(|f| f.path.starts_with("qualification/receipts/")));
    for f in [
        "scripts/qualification/tool.py",
        "qualification/schema/receipt.json",
        "qualification/workloads/smoke.json",
        "assets/logo.png",
        "desktop/src/main.rs",
    ] {
        let before = compute(r, SourceTreeProfile::Kiln).unwrap().digest;
        write(r, f, "y\n");
        git(r, &["add", "-A"]);
        assert_ne!(
            compute(r, SourceTreeProfile::Kiln).unwrap().digest,
            before,
            "{f}"
        );
    }
}

#[test]
fn working_tree_content_and_index_mode_both_count() {
    let d = kiln_repo();
    let r = d.path();
    let base = compute(r, SourceTreeProfile::Kiln).unwrap().digest;
    // Unstaged content changes count: the digest reads the working tree.
    write(r, "crates/demo/src/lib.rs", "pub fn value() -> u32 { 2 }\n");
    let changed = compute(r, SourceTreeProfile::Kiln).unwrap().digest;
    assert_ne!(changed, base);
    write(r, "crates/demo/src/lib.rs", "pub fn value() -> u32 { 1 }\n");
    assert_eq!(compute(r, SourceTreeProfile::Kiln).unwrap().digest, base);
    // The executable bit counts once the index records it.
    use std::os::unix::fs::PermissionsExt;
    let p = r.join("crates/demo/src/lib.rs");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    git(r, &["add", "crates/demo/src/lib.rs"]);
    let t = compute(r, SourceTreeProfile::Kiln).unwrap();
    assert_ne!(t.digest, base);
    assert!(t.files.iter().any(|f| f.mode == "100755"));
}

#[test]
fn clean_status_and_committed_bytes() {
    let d = kiln_repo();
    let r = d.path();
    let repo = Repo::new(r);
    assert!(repo.is_clean().unwrap());
    assert_eq!(repo.head_commit().unwrap().len(), 40);
    assert!(repo.has_commit(&repo.head_commit().unwrap()).unwrap());
    assert!(!repo
        .has_commit("0000000000000000000000000000000000000000")
        .unwrap());
    assert_eq!(
        repo.show_head("Cargo.toml").unwrap().unwrap(),
        b"[workspace]\n"
    );
    assert_eq!(repo.show_head("missing.toml").unwrap(), None);
    assert_eq!(
        repo.show_head("crates").unwrap(),
        None,
        "a tree is not a blob"
    );
    // Ignored files keep the worktree clean; untracked, modified and staged ones do not.
    write(r, ".gitignore", "ignored/\n");
    git(r, &["add", ".gitignore"]);
    git(r, &["commit", "-q", "-m", "ignore"]);
    write(r, "ignored/x", "x");
    assert!(repo.is_clean().unwrap());
    write(r, "deep/new/file", "x");
    assert!(!repo.is_clean().unwrap());
    std::fs::remove_dir_all(r.join("deep")).unwrap();
    write(r, "Cargo.toml", "[workspace]\nmembers = []\n");
    assert!(!repo.is_clean().unwrap());
    git(r, &["add", "Cargo.toml"]);
    assert!(!repo.is_clean().unwrap());
    // Discovery from a subdirectory finds the top level.
    let found = Repo::discover(&r.join("crates/demo")).unwrap();
    assert_eq!(
        std::fs::canonicalize(found.root()).unwrap(),
        std::fs::canonicalize(r).unwrap()
    );
}
