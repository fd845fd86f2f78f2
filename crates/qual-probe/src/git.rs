//! The git binding: commit, worktree cleanliness, committed bytes and the index listing.
//!
//! Everything here runs the real `git` binary found on `PATH` with `-C <root>`, a fixed
//! `LC_ALL=C` locale and `GIT_OPTIONAL_LOCKS=0` (a status query never takes the index lock),
//! and with the `GIT_DIR`/`GIT_WORK_TREE`/`GIT_INDEX_FILE` overrides removed so an inherited
//! environment cannot point the binding at another repository.
//!
//! Invariants: a commit is only ever reported as 40 lowercase hex digits; "clean" means
//! `git status --porcelain=v1 --untracked-files=all` printed nothing (modified, staged and
//! untracked files are dirty; ignored files are not).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why a git query failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` could not be started.
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    /// `git` exited non-zero.
    #[error("git {args} exited with {status}: {stderr}")]
    Failed {
        /// The arguments after `-C root`.
        args: String,
        /// The exit status text.
        status: String,
        /// The last part of stderr.
        stderr: String,
    },
    /// `git` printed something this binding cannot interpret.
    #[error("git {args} printed unexpected output: {detail}")]
    Unexpected {
        /// The arguments after `-C root`.
        args: String,
        /// What was wrong.
        detail: String,
    },
}

/// One entry of `git ls-files -s -z`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The index mode text (`100644`, `100755`, `120000`, `160000`).
    pub mode: String,
    /// The repository-relative path with `/` separators.
    pub path: String,
}

/// A repository root and the queries the runner binds.
#[derive(Clone, Debug)]
pub struct Repo {
    root: PathBuf,
}

impl Repo {
    /// Binds a repository at `root` (the worktree top level).
    pub fn new(root: impl Into<PathBuf>) -> Repo {
        Repo { root: root.into() }
    }

    /// The worktree root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Finds the worktree top level that contains `dir`.
    pub fn discover(dir: &Path) -> Result<Repo, GitError> {
        let out = git_in(dir, &["rev-parse", "--show-toplevel"])?;
        let text = String::from_utf8(out).map_err(|_| GitError::Unexpected {
            args: "rev-parse --show-toplevel".into(),
            detail: "path is not UTF-8".into(),
        })?;
        let top = text.trim_end_matches('\n');
        if top.is_empty() {
            return Err(GitError::Unexpected {
                args: "rev-parse --show-toplevel".into(),
                detail: "empty top level".into(),
            });
        }
        Ok(Repo::new(PathBuf::from(top)))
    }

    fn git(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        git_in(&self.root, args)
    }

    /// `git rev-parse HEAD`, checked to be 40 lowercase hex digits.
    pub fn head_commit(&self) -> Result<String, GitError> {
        let out = self.git(&["rev-parse", "--verify", "HEAD^{commit}"])?;
        let text = String::from_utf8_lossy(&out).trim().to_string();
        if !is_commit_id(&text) {
            return Err(GitError::Unexpected {
                args: "rev-parse HEAD".into(),
                detail: format!("HEAD is not a lowercase 40-character commit: {text:?}"),
            });
        }
        Ok(text)
    }

    /// The porcelain status lines (empty means clean). Untracked files in every directory
    /// count; ignored files do not.
    pub fn status_lines(&self) -> Result<Vec<String>, GitError> {
        let out = self.git(&["status", "--porcelain=v1", "--untracked-files=all", "-z"])?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect())
    }

    /// Whether the worktree is clean (see [`Repo::status_lines`]).
    pub fn is_clean(&self) -> Result<bool, GitError> {
        Ok(self.status_lines()?.is_empty())
    }

    /// The committed bytes of `rel` at HEAD, or `None` when HEAD has no such blob.
    pub fn show_head(&self, rel: &str) -> Result<Option<Vec<u8>>, GitError> {
        let spec = format!("HEAD:{rel}");
        // `cat-file -e` distinguishes "absent" from other failures.
        let exists = base_command(&self.root)
            .args(["cat-file", "-e", &spec])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(GitError::Spawn)?;
        if !exists.success() {
            return Ok(None);
        }
        let kind = self.git(&["cat-file", "-t", &spec])?;
        if String::from_utf8_lossy(&kind).trim() != "blob" {
            return Ok(None);
        }
        self.git(&["cat-file", "blob", &spec]).map(Some)
    }

    /// Whether `commit` names a commit object in this repository.
    pub fn has_commit(&self, commit: &str) -> Result<bool, GitError> {
        let status = base_command(&self.root)
            .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(GitError::Spawn)?;
        Ok(status.success())
    }

    /// The index (`git ls-files -s -z`): mode and path of every stage entry, in index order.
    pub fn index_entries(&self) -> Result<Vec<IndexEntry>, GitError> {
        let out = self.git(&["ls-files", "-s", "-z"])?;
        parse_ls_files_stage(&out)
    }
}

/// Parses `git ls-files -s -z` output (`<mode> <sha> <stage>\t<path>\0` records).
pub fn parse_ls_files_stage(out: &[u8]) -> Result<Vec<IndexEntry>, GitError> {
    let bad = |detail: String| GitError::Unexpected {
        args: "ls-files -s -z".into(),
        detail,
    };
    let mut entries = Vec::new();
    for record in out.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let tab = record
            .iter()
            .position(|b| *b == b'\t')
            .ok_or_else(|| bad("record without a tab".into()))?;
        let meta = &record[..tab];
        let space = meta
            .iter()
            .position(|b| *b == b' ')
            .ok_or_else(|| bad("record without a mode".into()))?;
        let mode = std::str::from_utf8(&meta[..space])
            .map_err(|_| bad("mode is not UTF-8".into()))?
            .to_string();
        let path = std::str::from_utf8(&record[tab + 1..])
            .map_err(|_| bad("tracked path is not UTF-8".into()))?
            .to_string();
        entries.push(IndexEntry { mode, path });
    }
    Ok(entries)
}

/// Whether `s` is 40 lowercase hex digits.
pub fn is_commit_id(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn base_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .env("LC_ALL", "C")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_COMMON_DIR")
        .stdin(Stdio::null());
    cmd
}

fn git_in(dir: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let out = base_command(dir)
        .args(args)
        .output()
        .map_err(GitError::Spawn)?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.trim();
        let tail: String = stderr
            .chars()
            .rev()
            .take(500)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(GitError::Failed {
            args: args.join(" "),
            status: out.status.to_string(),
            stderr: tail,
        });
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stage_records_with_tabs_and_spaces_in_paths() {
        let raw = b"100644 e69de29bb2d1d6434b8b29ae775ad8c2e48c5391 0\ta b.txt\x00100755 e69de29bb2d1d6434b8b29ae775ad8c2e48c5391 0\tbin/run\x00";
        let e = parse_ls_files_stage(raw).unwrap();
        assert_eq!(
            e,
            vec![
                IndexEntry {
                    mode: "100644".into(),
                    path: "a b.txt".into()
                },
                IndexEntry {
                    mode: "100755".into(),
                    path: "bin/run".into()
                },
            ]
        );
        assert!(parse_ls_files_stage(b"100644 abc 0 nopath\0").is_err());
    }

    #[test]
    fn commit_ids_are_lowercase_hex_of_forty() {
        assert!(is_commit_id("8e419e43051b83c001c0bc3a830aad559a5bf345"));
        assert!(!is_commit_id("8E419E43051B83C001C0BC3A830AAD559A5BF345"));
        assert!(!is_commit_id("8e419e4"));
    }
}
