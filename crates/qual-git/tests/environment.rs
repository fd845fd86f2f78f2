//! What the binding takes from kiln-qual's own environment: only `PATH`. One test, because
//! it changes the process environment.

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

mod common;

use std::time::{Duration, Instant};

use common::{repo, write, Trap};
use qual_git::{GitError, Repo};

#[test]
fn inherited_git_variables_are_ignored_and_the_deadline_kills_git() {
    let d = repo();
    let r = d.path();
    let trap = Trap::new();
    let home = tempfile::tempdir().unwrap();
    let user_config = format!("[core]\n\tfsmonitor = {}\n", trap.program());
    write(home.path(), ".gitconfig", &user_config);
    write(home.path(), "xdg/git/config", &user_config);
    let t = trap.program();
    let hostile = [
        ("HOME", home.path().to_str().unwrap().to_owned()),
        (
            "XDG_CONFIG_HOME",
            home.path().join("xdg").to_str().unwrap().to_owned(),
        ),
        ("GIT_DIR", "/nonexistent/.git".into()),
        ("GIT_WORK_TREE", "/nonexistent".into()),
        ("GIT_INDEX_FILE", "/nonexistent/index".into()),
        ("GIT_CONFIG_PARAMETERS", format!("'core.fsmonitor'='{t}'")),
        ("GIT_CONFIG_COUNT", "1".into()),
        ("GIT_CONFIG_KEY_0", "core.fsmonitor".into()),
        ("GIT_CONFIG_VALUE_0", t.into()),
        ("GIT_EXTERNAL_DIFF", t.into()),
        ("GIT_SSH_COMMAND", t.into()),
        ("GIT_PAGER", t.into()),
        ("GIT_ASKPASS", t.into()),
        ("GIT_EDITOR", t.into()),
        ("GIT_TRACE", "1".into()),
    ];
    for (k, v) in &hostile {
        std::env::set_var(k, v);
    }
    let repo = Repo::new(r);
    assert!(repo.is_clean().unwrap());
    write(r, "a.txt", "changed\n");
    assert_eq!(repo.status_lines().unwrap(), ["modified: a.txt"]);
    assert_eq!(repo.show_head("a.txt").unwrap().unwrap(), b"alpha\n");
    assert_eq!(repo.abbrev_ref().unwrap(), "main");
    assert!(!trap.fired(), "an inherited variable reached git");
    for (k, _) in &hostile {
        std::env::remove_var(k);
    }

    // A git that never answers is killed at the deadline. (The binding runs the git it
    // resolved once, so a slow one is made from repository state: `HEAD` as a FIFO blocks
    // git's repository discovery forever.)
    let slow = common::repo();
    let head = slow.path().join(".git/HEAD");
    std::fs::remove_file(&head).unwrap();
    let st = std::process::Command::new("mkfifo")
        .arg(&head)
        .status()
        .unwrap();
    assert!(st.success());
    let started = Instant::now();
    let e = Repo::new(slow.path())
        .with_deadline(Duration::from_millis(500))
        .head_commit()
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(e, GitError::Timeout { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "git rev-parse --verify HEAD^{commit} did not finish within 0.5 s and was killed"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}
