//! Real git repositories in temp directories for the qual-git tests.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs the plain, unhardened `git` (the tests' own set-up and control commands).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = plain_git(dir, args).output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The plain `git` command with a fixed identity and no user configuration.
pub fn plain_git(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("GIT_TERMINAL_PROMPT", "0");
    c
}

/// `git status --porcelain --untracked-files=all` as plain git prints it (for equivalence
/// checks on honest repositories).
pub fn porcelain(dir: &Path) -> String {
    git(dir, &["status", "--porcelain", "--untracked-files=all"])
}

pub fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

pub fn chmod(root: &Path, rel: &str, mode: u32) {
    std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A committed repository: a text file, an executable, a nested file, a symlink and a
/// `.gitignore` that ignores `*.log`.
pub fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    git(r, &["init", "-q", "-b", "main"]);
    write(r, "a.txt", "alpha\n");
    write(r, "bin/run.sh", "#!/bin/sh\necho run\n");
    chmod(r, "bin/run.sh", 0o755);
    write(r, "src/deep/lib.rs", "pub fn f() {}\n");
    write(r, ".gitignore", "*.log\n");
    std::os::unix::fs::symlink("a.txt", r.join("link")).unwrap();
    git(r, &["add", "-A"]);
    git(r, &["commit", "-q", "-m", "init"]);
    d
}

/// A program that creates `marker` whenever anything runs it (and prints nothing).
pub struct Trap {
    pub dir: tempfile::TempDir,
    pub program: PathBuf,
    pub marker: PathBuf,
}

impl Trap {
    pub fn new() -> Trap {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("marker");
        let program = dir.path().join("trap");
        std::fs::write(
            &program,
            format!(
                "#!/bin/sh\necho \"$0 $*\" >> '{}'\nexit 0\n",
                marker.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        Trap {
            dir,
            program,
            marker,
        }
    }

    pub fn fired(&self) -> bool {
        self.marker.exists()
    }

    pub fn reset(&self) {
        let _ = std::fs::remove_file(&self.marker);
    }

    pub fn program(&self) -> &str {
        self.program.to_str().unwrap()
    }
}
