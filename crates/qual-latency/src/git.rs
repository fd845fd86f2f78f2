//! Git facts the legacy pipeline binds, obtained through `qual_git`, kiln-qual's one hardened
//! git binding (closed environment, every repository-named program switched off, null stdin, a
//! deadline; no filter driver, textconv, external diff, hook or fsmonitor ever runs).
//!
//! Invariant: no query writes to the repository. `git_tracked_dirty` is true exactly when the
//! binding reports any change ([`Repo::status_lines`]). The original's rule was "`git status
//! --porcelain --untracked-files=all` prints anything after trimming": despite the name, new
//! untracked files make a checkout dirty too; ignored files (raw logs) do not. On honest
//! repositories the two agree; the deliberate difference is that a file whose committed bytes
//! only match after a clean filter or end-of-line conversion (git-lfs, `text=auto` with CRLF)
//! is dirty here, because kiln-qual never runs repository filters (see the `qual_git` docs).

use crate::{LegacyError, Result};
use qual_git::GitError;
use std::path::{Path, PathBuf};

/// A repository root and the git queries made against it.
#[derive(Clone, Debug)]
pub struct Repo {
    git: qual_git::Repo,
}

impl Repo {
    /// A repository rooted at `root` (made absolute and resolved).
    pub fn new(root: impl AsRef<Path>) -> Repo {
        Repo {
            git: qual_git::Repo::new(crate::paths::resolve(root.as_ref())),
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
        let found = qual_git::Repo::discover(dir).map_err(|e| {
            LegacyError::Refused(format!(
                "{} is not inside a git repository: {}",
                dir.display(),
                detail(&e)
            ))
        })?;
        Ok(Repo::new(found.root()))
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        self.git.root()
    }

    /// A path relative to the root (absolute paths stay).
    pub fn join(&self, p: &str) -> PathBuf {
        self.root().join(p)
    }

    /// HEAD, checked against `^[0-9a-f]{40}$`.
    pub fn head_commit(&self) -> Result<String> {
        self.git.head_commit().map_err(|e| {
            LegacyError::Refused(format!(
                "git rev-parse HEAD returned invalid commit: {}",
                detail(&e)
            ))
        })
    }

    /// Every reason the checkout is dirty, one `<kind>: <path>` line each (empty when clean).
    pub fn status_lines(&self) -> Result<Vec<String>> {
        self.git
            .status_lines()
            .map_err(|e| LegacyError::Refused(format!("git status failed: {}", detail(&e))))
    }

    /// `git_tracked_dirty`: tracked changes *or* untracked, non-ignored files.
    pub fn tracked_dirty(&self) -> Result<bool> {
        Ok(!self.status_lines()?.is_empty())
    }

    /// Whether a path is tracked (`git ls-files --error-unmatch -- <path>` succeeds), whether
    /// or not it exists on disk.
    pub fn is_tracked(&self, path: &str) -> bool {
        self.git.is_tracked(path).unwrap_or(false)
    }

    /// Whether git ignores a path (`git check-ignore -q -- <path>`; works for paths that do
    /// not exist yet).
    pub fn is_ignored(&self, path: &str) -> bool {
        self.git.is_ignored(path).unwrap_or(false)
    }

    /// Whether a commit exists locally.
    pub fn commit_exists(&self, commit: &str) -> bool {
        self.git.has_commit(commit).unwrap_or(false)
    }

    /// The stored bytes of `path` at `commit`, `None` when absent (or not a file).
    pub fn file_at_commit(&self, commit: &str, path: &str) -> Option<Vec<u8>> {
        self.git.blob_at(commit, path).ok().flatten()
    }

    /// SHA-256 of `path` at `commit`, `None` when the commit or file is absent.
    pub fn file_sha256_at_commit(&self, commit: &str, path: &str) -> Option<String> {
        self.file_at_commit(commit, path)
            .map(|b| crate::sha256_hex(&b))
    }

    /// `git rev-parse --abbrev-ref HEAD`, or `HEAD` on failure or empty output.
    pub fn abbrev_ref(&self) -> String {
        self.git
            .abbrev_ref()
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "HEAD".into())
    }

    /// `git config --get remote.origin.url`, when set.
    pub fn origin_url(&self) -> Option<String> {
        self.git
            .config_value("remote.origin.url")
            .ok()
            .flatten()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }
}

/// git's own words for a failed query (its stderr), else the binding's message.
fn detail(e: &GitError) -> String {
    match e {
        GitError::Failed { stderr, .. } if !stderr.is_empty() => stderr.clone(),
        other => other.to_string(),
    }
}
