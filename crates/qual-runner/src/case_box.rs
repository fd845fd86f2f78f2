//! The box of a case, as the runner asks `qual-exec` for it: what judges the case and is
//! read-only inside its box, and what it may write.
//!
//! - Read-only (protected): git's state of the worktree (`.git`; for a linked worktree also
//!   `.git/worktrees/<name>` and the common git directory its `commondir` names, see
//!   `qual_git::state_dirs`), `.qualification/` (runs and receipts) and the receipt's
//!   directory.
//! - Writable: the worktree itself (e.g. `cargo build` into `target/`) and the execution's
//!   own case directory below `.qualification/`; a private `/tmp` and `/dev/shm`.
//! - Everything else of the host is read-only ([`qual_exec::HostFiles::ReadOnly`]).
//!
//! A working directory at or below a protected path is refused before anything runs
//! ([`protected_working_directory`]): the box would make it read-only, but a case has no
//! business starting inside what judges it.

use std::path::{Path, PathBuf};

/// What must be read-only to every case of a run at `root` (canonical) whose receipt goes
/// into `receipt_dir` (when known).
pub fn protected_paths(root: &Path, receipt_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut out = qual_probe::git::state_dirs(root);
    let q = root.join(".qualification");
    out.push(q.clone());
    if let Some(dir) = receipt_dir {
        if !dir.starts_with(&q) {
            out.push(dir.to_path_buf());
        }
    }
    out
}

/// The box of one execution: `protected` read-only, the worktree at `root` and the
/// execution's `case_dir` (when there is one) writable, the rest of the host read-only.
pub fn sandbox(root: &Path, protected: &[PathBuf], case_dir: Option<&Path>) -> qual_exec::Sandbox {
    let mut writable = vec![root.to_path_buf()];
    writable.extend(case_dir.map(Path::to_path_buf));
    qual_exec::Sandbox {
        read_only: protected.to_vec(),
        writable,
        host: qual_exec::HostFiles::ReadOnly,
    }
}

/// The box of a tool kiln-qual starts in `dir` outside a run (`kiln-qual cargo`, the fixture
/// commands of `latency run`): the worktree around `dir` (the nearest ancestor holding
/// `.git`) writable with its git state and `.qualification/` read-only; outside a
/// repository `dir` itself writable; the rest of the host read-only. Refused (with the
/// reason) when `dir` is at or below a protected path.
pub fn for_directory(dir: &Path) -> Result<qual_exec::Sandbox, String> {
    let dir = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let Some(top) = dir.ancestors().find(|d| d.join(".git").exists()) else {
        return Ok(sandbox(&dir, &[], None));
    };
    let protected = protected_paths(top, None);
    if let Some(p) = protected_working_directory(&dir, &protected) {
        return Err(format!(
            "working directory {} is at or below {}, which is read-only to the commands kiln-qual runs",
            dir.display(),
            p.display()
        ));
    }
    Ok(sandbox(top, &protected, None))
}

/// The protected path `cwd` (canonical) is at or below, if any.
pub fn protected_working_directory<'a>(cwd: &Path, protected: &'a [PathBuf]) -> Option<&'a Path> {
    protected
        .iter()
        .find(|p| cwd.starts_with(p))
        .map(PathBuf::as_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_directories_inside_what_judges_are_found() {
        let root = Path::new("/repo");
        let protected = protected_paths(root, Some(Path::new("/repo/receipts")));
        assert!(protected_working_directory(Path::new("/repo/.git"), &protected).is_some());
        assert!(protected_working_directory(Path::new("/repo/.git/hooks"), &protected).is_some());
        assert!(
            protected_working_directory(Path::new("/repo/.qualification/runs"), &protected)
                .is_some()
        );
        assert!(protected_working_directory(Path::new("/repo/receipts"), &protected).is_some());
        assert!(protected_working_directory(Path::new("/repo"), &protected).is_none());
        assert!(protected_working_directory(Path::new("/repo/.github"), &protected).is_none());
        let b = sandbox(
            root,
            &protected,
            Some(Path::new("/repo/.qualification/runs/x")),
        );
        assert_eq!(b.writable.len(), 2);
        assert_eq!(b.host, qual_exec::HostFiles::ReadOnly);
    }
}
