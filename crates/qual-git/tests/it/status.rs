//! The in-process worktree comparison on honest repositories: every kind of change is
//! reported with its path, and "clean" agrees with `git status --porcelain
//! --untracked-files=all` wherever no filter or conversion is involved.

use crate::common;

use std::path::Path;

use common::{chmod, git, porcelain, repo, write};
use qual_git::{ChangeKind, GitError, Repo};

/// The binding's lines, after checking that clean agrees with plain `git status`.
fn lines(r: &Path) -> Vec<String> {
    let got = Repo::new(r).status_lines().unwrap();
    assert_eq!(
        got.is_empty(),
        porcelain(r).trim().is_empty(),
        "binding {got:?} vs git status {:?}",
        porcelain(r)
    );
    got
}

#[test]
fn a_committed_repository_with_ignored_files_is_clean() {
    let d = repo();
    let r = d.path();
    write(r, "build/out.log", "ignored");
    write(r, "x.log", "ignored");
    assert!(lines(r).is_empty());
    assert!(Repo::new(r).is_clean().unwrap());
}

#[test]
fn modified_files_are_found_by_content_even_with_the_same_size_and_mtime() {
    let d = repo();
    let r = d.path();
    let p = r.join("a.txt");
    let before = std::fs::metadata(&p).unwrap().modified().unwrap();
    std::fs::write(&p, "ALPHA\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(before)
        .unwrap();
    // The index's stat data now matches the file; the bytes do not.
    let got = Repo::new(r).status_lines().unwrap();
    assert_eq!(got, ["modified: a.txt"]);
}

#[test]
fn staged_untracked_and_deleted_files_are_named() {
    let d = repo();
    let r = d.path();
    write(r, "deep/new/file.txt", "x");
    assert_eq!(lines(r), ["untracked: deep/new/file.txt"]);
    std::fs::remove_dir_all(r.join("deep")).unwrap();

    write(r, "src/deep/lib.rs", "pub fn g() {}\n");
    git(r, &["add", "src/deep/lib.rs"]);
    assert_eq!(lines(r), ["staged: src/deep/lib.rs"]);
    write(r, "src/deep/lib.rs", "pub fn f() {}\n");
    assert_eq!(
        lines(r),
        ["staged: src/deep/lib.rs", "modified: src/deep/lib.rs"]
    );
    git(r, &["reset", "-q"]);
    assert!(lines(r).is_empty());

    std::fs::remove_file(r.join("a.txt")).unwrap();
    assert_eq!(lines(r), ["deleted: a.txt"]);
    git(r, &["rm", "-q", "--cached", "a.txt"]);
    assert_eq!(lines(r), ["staged: a.txt"]);
}

#[test]
fn mode_changes_count_unless_core_filemode_is_off() {
    let d = repo();
    let r = d.path();
    chmod(r, "a.txt", 0o755);
    chmod(r, "bin/run.sh", 0o644);
    assert_eq!(
        lines(r),
        ["mode changed: a.txt", "mode changed: bin/run.sh"]
    );
    git(r, &["config", "core.fileMode", "false"]);
    assert!(lines(r).is_empty());
}

#[test]
fn symlinks_are_compared_by_target_and_kind() {
    let d = repo();
    let r = d.path();
    std::fs::remove_file(r.join("link")).unwrap();
    std::os::unix::fs::symlink("bin/run.sh", r.join("link")).unwrap();
    assert_eq!(lines(r), ["modified: link"]);
    std::fs::remove_file(r.join("link")).unwrap();
    write(r, "link", "a.txt");
    assert_eq!(lines(r), ["type changed: link"]);
    std::fs::remove_file(r.join("link")).unwrap();
    std::os::unix::fs::symlink("a.txt", r.join("link")).unwrap();
    assert!(lines(r).is_empty());
    // A tracked file replaced by a symlink to identical bytes is a type change.
    std::fs::remove_file(r.join("a.txt")).unwrap();
    write(r, "copy.log", "alpha\n");
    std::os::unix::fs::symlink("copy.log", r.join("a.txt")).unwrap();
    assert_eq!(lines(r), ["type changed: a.txt"]);
}

#[test]
fn a_leading_directory_replaced_by_a_symlink_is_not_followed() {
    let d = repo();
    let r = d.path();
    // Same bytes elsewhere, reached through an ignored symlink named like the directory.
    std::fs::rename(r.join("src"), r.join("elsewhere.log")).unwrap();
    std::os::unix::fs::symlink("elsewhere.log", r.join("src")).unwrap();
    write(r, ".git/info/exclude", "src\n");
    assert_eq!(lines(r), ["deleted: src/deep/lib.rs"]);
}

#[test]
fn a_file_replaced_by_a_directory_is_a_type_change() {
    let d = repo();
    let r = d.path();
    std::fs::remove_file(r.join("a.txt")).unwrap();
    write(r, "a.txt/inner", "x");
    assert_eq!(lines(r), ["type changed: a.txt", "untracked: a.txt/inner"]);
}

#[test]
fn unborn_head_lists_every_index_entry_as_staged() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    git(r, &["init", "-q"]);
    assert!(lines(r).is_empty());
    write(r, "a.txt", "a");
    git(r, &["add", "a.txt"]);
    assert_eq!(lines(r), ["staged: a.txt"]);
    let repo = Repo::new(r);
    assert_eq!(repo.head_id().unwrap(), None);
    assert!(repo.head_commit().is_err());
}

#[test]
fn merge_conflicts_are_unmerged() {
    let d = repo();
    let r = d.path();
    git(r, &["checkout", "-q", "-b", "other"]);
    write(r, "a.txt", "other\n");
    git(r, &["commit", "-q", "-am", "other"]);
    git(r, &["checkout", "-q", "main"]);
    write(r, "a.txt", "main\n");
    git(r, &["commit", "-q", "-am", "main"]);
    let out = common::plain_git(r, &["merge", "-q", "other"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let status = Repo::new(r).status().unwrap();
    assert!(
        status
            .iter()
            .any(|c| c.path == "a.txt" && c.kind == ChangeKind::Unmerged),
        "{status:?}"
    );
    assert!(!porcelain(r).is_empty());
}

#[test]
fn submodules_are_clean_when_unpopulated_or_at_the_recorded_commit() {
    let d = repo();
    let r = d.path();
    write(r, "sub/s.txt", "s\n");
    git(&r.join("sub"), &["init", "-q"]);
    git(&r.join("sub"), &["add", "s.txt"]);
    git(&r.join("sub"), &["commit", "-q", "-m", "s"]);
    let out = common::plain_git(r, &["add", "sub"]).output().unwrap();
    assert!(out.status.success());
    git(r, &["commit", "-q", "-m", "gitlink"]);
    assert!(lines(r).is_empty());

    write(r, "sub/s.txt", "changed\n");
    assert_eq!(lines(r), ["submodule changed: sub"]);
    git(&r.join("sub"), &["commit", "-q", "-am", "moved"]);
    assert_eq!(lines(r), ["submodule moved: sub"]);
    write(r, "sub/untracked", "u");
    assert_eq!(lines(r), ["submodule moved: sub", "submodule changed: sub"]);

    // An unpopulated submodule is an empty directory: clean. A missing one is deleted.
    std::fs::remove_dir_all(r.join("sub")).unwrap();
    std::fs::create_dir(r.join("sub")).unwrap();
    assert!(lines(r).is_empty());
    std::fs::remove_dir(r.join("sub")).unwrap();
    assert_eq!(lines(r), ["deleted: sub"]);
}

#[test]
fn sha256_repositories_hash_with_sha256() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    git(r, &["init", "-q", "--object-format=sha256"]);
    write(r, "a.txt", "a\n");
    git(r, &["add", "a.txt"]);
    git(r, &["commit", "-q", "-m", "a"]);
    let repo = Repo::new(r);
    assert_eq!(
        repo.object_format().unwrap(),
        qual_git::ObjectFormat::Sha256
    );
    assert!(lines(r).is_empty());
    write(r, "a.txt", "b\n");
    assert_eq!(lines(r), ["modified: a.txt"]);
    // A 64-digit HEAD is not a 40-digit commit id.
    assert!(matches!(
        repo.head_commit(),
        Err(GitError::Unexpected { .. })
    ));
    assert_eq!(repo.head_id().unwrap().unwrap().len(), 64);
}

#[test]
fn crlf_checkouts_of_text_auto_files_read_as_modified() {
    // kiln-qual never runs repository filters or conversions: bytes that match the index
    // only after end-of-line conversion are a change (git status would call them clean).
    let d = repo();
    let r = d.path();
    write(r, ".gitattributes", "*.txt text=auto\n");
    git(r, &["add", ".gitattributes"]);
    git(r, &["commit", "-q", "-m", "attributes"]);
    write(r, "a.txt", "alpha\r\n");
    git(r, &["-c", "core.autocrlf=true", "add", "a.txt"]);
    git(r, &["commit", "-q", "--allow-empty", "-m", "crlf"]);
    assert_eq!(Repo::new(r).status_lines().unwrap(), ["modified: a.txt"]);
}

#[test]
fn queries_outside_a_repository_fail_with_readable_errors() {
    let d = tempfile::tempdir().unwrap();
    let e = Repo::discover(d.path()).unwrap_err().to_string();
    assert!(
        e.starts_with("git rev-parse --show-toplevel exited with"),
        "{e}"
    );
    assert!(e.contains("not a git repository"), "{e}");
    let repo = Repo::new(d.path());
    assert!(repo.status().is_err());
    assert!(repo.show_head("a").is_err());
    assert!(repo.has_commit(&"0".repeat(40)).is_err());
}
