//! The strict checks that read outside the document: a local artifact re-hashed under
//! `.qualification`, the publication gate (a pushed commit, a clean run), and the helpers
//! that stream a file's digest and ask git for a commit.

use super::*;

impl Checker {
    /// The strict source checks: the current source-tree digest and a locally known commit.
    pub(super) fn strict_source(
        &mut self,
        tree_hash: &str,
        commit: &Value,
        strict: &StrictChecks<'_>,
    ) {
        if let Some(digest_fn) = strict.current_source {
            if !tree_hash.is_empty() {
                let root = strict.root.unwrap_or(Path::new("."));
                match digest_fn(root) {
                    Err(e) => self.push(
                        "receipt.source.tree_hash",
                        format!("cannot be checked: failed to compute the current source tree hash: {e}"),
                    ),
                    Ok(current) if current != tree_hash => self.push(
                        "receipt.source.tree_hash",
                        format!("is {tree_hash}, current source tree is {current}"),
                    ),
                    Ok(_) => {}
                }
            }
        }

        if strict.known_commit {
            if let Some(commit) = commit.as_str() {
                let root = strict.root.unwrap_or(Path::new("."));
                if !git_commit_exists(root, commit) {
                    self.push(
                        "receipt.source.git_commit",
                        format!("does not exist locally: {commit}"),
                    );
                }
            }
        }
    }

    /// The publication gate (`receipt check --publication`): the commit is reachable from
    /// the upstream branch and the run was made from a clean worktree. Each refusal says why.
    pub(super) fn publication(
        &mut self,
        commit: &Value,
        clean: Option<bool>,
        strict: &StrictChecks<'_>,
    ) {
        let Some(upstream) = strict.publication else {
            return;
        };
        if clean == Some(false) {
            self.push(
                "receipt.source.git_worktree_clean",
                "is false: refused for publication, the run was not made from a clean worktree",
            );
        }
        let Some(commit) = commit.as_str().filter(|c| is_commit(c)) else {
            return;
        };
        let root = strict.root.unwrap_or(Path::new("."));
        match qual_git::Repo::new(root).is_ancestor(commit, upstream) {
            Ok(true) => {}
            Ok(false) => self.push(
                "receipt.source.git_commit",
                format!(
                    "is {commit}: refused for publication, the commit is not reachable from the upstream branch {upstream} (push it, then fetch)"
                ),
            ),
            Err(e) => self.push(
                "receipt.source.git_commit",
                format!("cannot be checked for publication: failed to ask git: {e}"),
            ),
        }
    }

    pub(super) fn local_artifact(
        &mut self,
        actx: &str,
        path_value: &str,
        expected_hash: &str,
        bytes: &Value,
        strict: &StrictChecks<'_>,
    ) {
        let root = strict.root.unwrap_or(Path::new("."));
        let mut path = PathBuf::from(path_value);
        if !path.is_absolute() {
            path = root.join(path);
        }
        let ignored_root = root
            .join(".qualification")
            .canonicalize()
            .unwrap_or_else(|_| {
                root.canonicalize()
                    .unwrap_or_else(|_| root.to_path_buf())
                    .join(".qualification")
            });
        let resolved = match path.canonicalize() {
            Ok(p) if p.starts_with(&ignored_root) => p,
            _ => {
                self.push(
                    format!("{actx}.path"),
                    "must exist under .qualification for local validation",
                );
                return;
            }
        };
        match hash_file(&resolved) {
            Err(e) => self.push(
                format!("{actx}.path"),
                format!("cannot be read for local validation: {e}"),
            ),
            Ok((digest, len)) => {
                if !expected_hash.is_empty() && digest != expected_hash {
                    self.push(format!("{actx}.sha256"), "does not match local artifact");
                }
                if let Some(expected) = strict_int(bytes) {
                    if *expected != Int::from(len) {
                        self.push(format!("{actx}.bytes"), "does not match local artifact");
                    }
                }
            }
        }
    }
}

/// Streams a regular file through SHA-256 (`qual_json::sha256_file`): (`sha256:<hex>`, byte
/// length), errors as the underlying I/O error.
pub fn hash_file(path: &Path) -> std::io::Result<(String, u64)> {
    let h = qual_json::sha256_file(path, None)?;
    Ok((h.sha256, h.bytes))
}

/// Whether `commit` names a commit object of the repository at `root`, asked through the
/// hardened binding (`qual_git`); a malformed commit never exists, and a failed query counts
/// as absent.
pub fn git_commit_exists(root: &Path, commit: &str) -> bool {
    is_commit(commit)
        && qual_git::Repo::new(root)
            .has_commit(commit)
            .unwrap_or(false)
}
