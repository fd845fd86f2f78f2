//! The git binding the runner binds: commit, worktree cleanliness, committed bytes and the
//! index listing.
//!
//! This module only re-exports [`qual_git`], the one hardened git binding of kiln-qual: git
//! runs with a closed environment, command-line overrides that switch off every program a
//! repository can name (fsmonitor, hooks, pagers, helpers, …), null stdin and a deadline, and
//! "clean" is decided by an in-process comparison of the index with the worktree rather than
//! by `git status`, so no filter driver, textconv or external diff ever runs. See the
//! `qual_git` crate docs for the exact rule and its deliberate refusals (a repository whose
//! committed bytes only match after a clean filter or end-of-line conversion reads as dirty).
//!
//! Invariants: a commit is only ever reported as 40 lowercase hex digits; modified, staged,
//! unmerged, deleted and untracked files are dirty; ignored files are not.

pub use qual_git::{
    blob_id, is_commit_id, is_object_id, parse_ls_files_stage, state_dirs, Change, ChangeKind,
    GitError, IndexEntry, ObjectFormat, Repo,
};
