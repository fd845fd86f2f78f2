//! Hostile repository configurations: each one names a program that creates a marker file.
//! Every binding operation must still give the right answer, and the marker must never appear.
//! A control command with plain git then proves the configuration was live.

use crate::common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::{git, plain_git, repo, write, Trap};
use qual_git::{ObjectFormat, Repo};

/// Makes every tracked regular file stat-dirty (same bytes, old mtime), so `git status` would
/// re-read it through filters and fsmonitor.
fn stat_dirty(r: &Path) {
    for rel in ["a.txt", "bin/run.sh", "src/deep/lib.rs", ".gitignore"] {
        let f = std::fs::File::options()
            .write(true)
            .open(r.join(rel))
            .unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
            .unwrap();
    }
}

/// Calls every operation of the binding and checks its answer.
fn exercise(r: &Path, expected_status: &[&str], trap: &Trap) {
    let repo = Repo::new(r);
    let head = repo.head_commit().unwrap();
    assert_eq!(repo.head_id().unwrap().as_deref(), Some(head.as_str()));
    assert!(repo.has_commit(&head).unwrap());
    assert!(!repo.has_commit(&"0".repeat(40)).unwrap());
    assert_eq!(
        repo.show_head("a.txt").unwrap().as_deref(),
        Some(&b"alpha\n"[..])
    );
    assert_eq!(
        repo.blob_at(&head, "src/deep/lib.rs").unwrap().as_deref(),
        Some(&b"pub fn f() {}\n"[..])
    );
    assert_eq!(repo.blob_at(&head, "missing").unwrap(), None);
    let paths: Vec<String> = repo
        .index_entries()
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert!(paths.iter().any(|p| p == "src/deep/lib.rs"), "{paths:?}");
    assert!(repo.is_tracked("a.txt").unwrap());
    assert!(!repo.is_tracked("nope.txt").unwrap());
    assert!(repo.is_ignored("x.log").unwrap());
    assert!(!repo.is_ignored("a.txt").unwrap());
    assert_eq!(repo.abbrev_ref().unwrap(), "main");
    assert_eq!(
        repo.config_value("core.bare").unwrap().as_deref(),
        Some("false")
    );
    assert_eq!(repo.object_format().unwrap(), ObjectFormat::Sha1);
    let found = Repo::discover(&r.join("src/deep")).unwrap();
    assert_eq!(
        std::fs::canonicalize(found.root()).unwrap(),
        std::fs::canonicalize(r).unwrap()
    );
    assert_eq!(repo.status_lines().unwrap(), expected_status);
    assert_eq!(repo.is_clean().unwrap(), expected_status.is_empty());
    assert!(
        !trap.fired(),
        "the binding ran a repository program: {}",
        std::fs::read_to_string(&trap.marker).unwrap_or_default()
    );
}

type Setup = fn(&Path, &Trap);

/// One hostile configuration and the plain-git command that shows it is live (`None` where
/// no command can without a terminal or network).
fn check(setup: Setup, control: Option<&[&str]>) {
    let d = repo();
    let r = d.path();
    let trap = Trap::new();
    setup(r, &trap);
    trap.reset();

    stat_dirty(r);
    exercise(r, &[], &trap);

    write(r, "a.txt", "changed\n");
    stat_dirty(r);
    exercise(r, &["modified: a.txt"], &trap);
    write(r, "new.txt", "x");
    exercise(r, &["modified: a.txt", "untracked: new.txt"], &trap);
    std::fs::remove_file(r.join("new.txt")).unwrap();
    stage_raw(r, "a.txt", &trap);
    exercise(r, &["staged: a.txt"], &trap);

    if let Some(args) = control {
        write(r, "a.txt", "changed again\n");
        stat_dirty(r);
        let _ = plain_git(r, args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            trap.fired(),
            "control `git {args:?}` did not run the trap: the set-up is not live"
        );
    }
}

/// Stages the raw bytes of `rel` with plain git, no filter, hook or fsmonitor involved (the
/// set-up is not under test; the trap is reset in case plain git ran it anyway).
fn stage_raw(r: &Path, rel: &str, trap: &Trap) {
    let safe = [
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
    ];
    let hash = [&safe[..], &["hash-object", "-w", "--no-filters", rel]].concat();
    let oid = git(r, &hash);
    let info = format!("100644,{},{rel}", oid.trim());
    let update = [&safe[..], &["update-index", "--cacheinfo", &info]].concat();
    git(r, &update);
    trap.reset();
}

fn config(r: &Path, key: &str, value: &str) {
    git(r, &["config", key, value]);
}

/// Writes a hook script that runs the trap.
fn hook(dir: &Path, name: &str, trap: &Trap) {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\nexec '{}' \"$@\"\n", trap.program())).unwrap();
    common::chmod(dir, name, 0o755);
}

const HOOKS: &[&str] = &[
    "post-index-change",
    "pre-commit",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "reference-transaction",
    "pre-auto-gc",
    "fsmonitor-watchman",
];

#[test]
fn fsmonitor() {
    check(
        |r, t| config(r, "core.fsmonitor", t.program()),
        Some(&["status"]),
    );
}

#[test]
fn fsmonitor_through_include_path() {
    check(
        |r, t| {
            let inc = t.dir.path().join("included.cfg");
            std::fs::write(&inc, format!("[core]\n\tfsmonitor = {}\n", t.program())).unwrap();
            config(r, "include.path", inc.to_str().unwrap());
        },
        Some(&["status"]),
    );
}

#[test]
fn fsmonitor_through_include_if() {
    check(
        |r, t| {
            let inc = t.dir.path().join("included.cfg");
            std::fs::write(&inc, format!("[core]\n\tfsmonitor = {}\n", t.program())).unwrap();
            config(r, "includeIf.gitdir:/.path", inc.to_str().unwrap());
        },
        Some(&["status"]),
    );
}

#[test]
fn clean_and_smudge_filters_from_a_committed_gitattributes() {
    check(
        |r, t| {
            write(r, ".gitattributes", "* filter=evil\n");
            git(r, &["add", ".gitattributes"]);
            git(r, &["commit", "-q", "-m", "attributes"]);
            config(r, "filter.evil.clean", t.program());
            config(r, "filter.evil.smudge", t.program());
            config(r, "filter.evil.required", "true");
        },
        Some(&["status"]),
    );
}

#[test]
fn process_filter_from_info_attributes() {
    check(
        |r, t| {
            write(r, ".git/info/attributes", "* filter=evil\n");
            config(r, "filter.evil.process", t.program());
        },
        Some(&["status"]),
    );
}

#[test]
fn textconv_driver() {
    check(
        |r, t| {
            write(r, ".git/info/attributes", "* diff=evil\n");
            config(r, "diff.evil.textconv", t.program());
        },
        Some(&["diff"]),
    );
}

#[test]
fn external_diff() {
    check(
        |r, t| config(r, "diff.external", t.program()),
        Some(&["diff"]),
    );
}

#[test]
fn pager() {
    check(
        |r, t| {
            config(r, "core.pager", t.program());
            config(r, "pager.status", t.program());
            config(r, "pager.ls-files", t.program());
        },
        None,
    );
}

#[test]
fn hooks_in_the_git_directory() {
    check(
        |r, t| {
            for h in HOOKS {
                hook(&r.join(".git/hooks"), h, t);
            }
        },
        Some(&["commit", "-q", "--allow-empty", "-m", "control"]),
    );
}

#[test]
fn hooks_through_core_hooks_path() {
    check(
        |r, t| {
            let dir = t.dir.path().join("hooks");
            for h in HOOKS {
                hook(&dir, h, t);
            }
            config(r, "core.hooksPath", dir.to_str().unwrap());
        },
        Some(&["commit", "-q", "--allow-empty", "-m", "control"]),
    );
}

#[test]
fn ssh_command_and_helpers() {
    check(
        |r, t| {
            config(r, "remote.origin.url", "ssh://example.invalid/repo.git");
            config(r, "core.sshCommand", t.program());
            config(r, "credential.helper", t.program());
            config(r, "core.askPass", t.program());
            config(r, "core.editor", t.program());
            config(r, "sequence.editor", t.program());
            config(r, "gpg.program", t.program());
            config(r, "log.showSignature", "true");
            config(r, "core.alternateRefsCommand", t.program());
        },
        Some(&["ls-remote", "origin"]),
    );
}

#[test]
fn everything_at_once() {
    check(
        |r, t| {
            write(r, ".git/info/attributes", "* filter=evil diff=evil\n");
            config(r, "filter.evil.clean", t.program());
            config(r, "diff.evil.textconv", t.program());
            config(r, "diff.external", t.program());
            config(r, "core.fsmonitor", t.program());
            config(r, "core.pager", t.program());
            config(r, "core.untrackedCache", "true");
            for h in HOOKS {
                hook(&r.join(".git/hooks"), h, t);
            }
        },
        Some(&["status"]),
    );
}
