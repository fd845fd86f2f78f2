//! Git facts the legacy pipeline binds, obtained from the real `git` binary.
//!
//! Invariant: every query runs `git -C <root>` with prompts disabled and never writes to the
//! repository. `git_tracked_dirty` is true exactly when
//! `git status --porcelain --untracked-files=all` prints anything after trimming: despite the
//! name, new untracked files make a checkout dirty too; ignored files (raw logs) do not.

use crate::{is_git_commit, LegacyError, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A repository root and the git queries made against it.
#[derive(Clone, Debug)]
pub struct Repo {
    root: PathBuf,
}

impl Repo {
    /// A repository rooted at `root` (made absolute and resolved).
    pub fn new(root: impl AsRef<Path>) -> Repo {
        Repo {
            root: crate::paths::resolve(root.as_ref()),
        }
    }

    /// The repository that contains the current directory.
    pub fn discover() -> Result<Repo> {
        Self::discover_from(
            &std::env::current_dir().map_err(|e| {
                LegacyError::Refused(format!("cannot read the current directory: {e}"))
            })?,
        )
    }

    /// The repository that contains `dir` (`git rev-parse --show-toplevel`).
    pub fn discover_from(dir: &Path) -> Result<Repo> {
        let out = git_in(dir, &["rev-parse", "--show-toplevel"])?;
        if !out.status.success() {
            return Err(LegacyError::Refused(format!(
                "{} is not inside a git repository: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let top = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok(Repo::new(top))
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A path relative to the root (absolute paths stay).
    pub fn join(&self, p: &str) -> PathBuf {
        self.root.join(p)
    }

    fn git(&self, args: &[&str]) -> Result<Output> {
        git_in(&self.root, args)
    }

    /// `git rev-parse HEAD`, checked against `^[0-9a-f]{40}$`.
    pub fn head_commit(&self) -> Result<String> {
        let out = self.git(&["rev-parse", "HEAD"])?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() || !is_git_commit(&text) {
            let shown = if out.status.success() {
                text
            } else {
                String::from_utf8_lossy(&out.stderr).trim().to_owned()
            };
            return Err(LegacyError::Refused(format!(
                "git rev-parse HEAD returned invalid commit: {shown}"
            )));
        }
        Ok(text)
    }

    /// The raw `git status --porcelain --untracked-files=all` text.
    pub fn status_porcelain(&self) -> Result<String> {
        let out = self.git(&["status", "--porcelain", "--untracked-files=all"])?;
        if !out.status.success() {
            return Err(LegacyError::Refused(format!(
                "git status failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `git_tracked_dirty`: tracked changes *or* untracked, non-ignored files.
    pub fn tracked_dirty(&self) -> Result<bool> {
        Ok(!self.status_porcelain()?.trim().is_empty())
    }

    /// Whether a path is tracked (`git ls-files --error-unmatch -- <path>` succeeds), whether
    /// or not it exists on disk.
    pub fn is_tracked(&self, path: &str) -> bool {
        self.git(&["ls-files", "--error-unmatch", "--", path])
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// Whether git ignores a path (`git check-ignore -q -- <path>`; works for paths that do
    /// not exist yet).
    pub fn is_ignored(&self, path: &str) -> bool {
        self.git(&["check-ignore", "-q", "--", path])
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// Whether a commit exists locally (`git cat-file -e <c>^{commit}`).
    pub fn commit_exists(&self, commit: &str) -> bool {
        self.git(&["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// The bytes of `path` at `commit` (`git show <commit>:<path>`), `None` when absent.
    pub fn file_at_commit(&self, commit: &str, path: &str) -> Option<Vec<u8>> {
        let out = self.git(&["show", &format!("{commit}:{path}")]).ok()?;
        out.status.success().then_some(out.stdout)
    }

    /// SHA-256 of `path` at `commit`, `None` when the commit or file is absent.
    pub fn file_sha256_at_commit(&self, commit: &str, path: &str) -> Option<String> {
        self.file_at_commit(commit, path)
            .map(|b| crate::sha256_hex(&b))
    }

    /// `git rev-parse --abbrev-ref HEAD`, or `HEAD` on failure or empty output.
    pub fn abbrev_ref(&self) -> String {
        match self.git(&["rev-parse", "--abbrev-ref", "HEAD"]) {
            Ok(o) if o.status.success() => {
                let s = String::from_utf8_lossy(&o.stdout).trim().to_owned();
                if s.is_empty() {
                    "HEAD".into()
                } else {
                    s
                }
            }
            _ => "HEAD".into(),
        }
    }

    /// `git config --get remote.origin.url`, when set.
    pub fn origin_url(&self) -> Option<String> {
        let o = self.git(&["config", "--get", "remote.origin.url"]).ok()?;
        let s = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        (o.status.success() && !s.is_empty()).then_some(s)
    }
}

fn git_in(dir: &Path, args: &[&str]) -> Result<Output> {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LegacyError::Refused(format!("cannot run git: {e}")))
}
