//! The worktree comparison that replaces `git status`: index entries against the files on
//! disk, hashed in process as git blobs, so no filter, textconv, external diff or fsmonitor
//! of the repository can ever run.

use std::collections::HashSet;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha1::Sha1;
use sha2::Digest;

use crate::tracked::{self, Budget};
use crate::{GitError, IndexEntry, Repo};

/// Submodules inside submodules are compared up to this depth; deeper nesting is an error.
pub const MAX_SUBMODULE_DEPTH: usize = 8;

/// The hash function of a repository's object ids (`git rev-parse --show-object-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectFormat {
    /// 40 hex digits.
    Sha1,
    /// 64 hex digits.
    Sha256,
}

impl ObjectFormat {
    /// Parses the output of `git rev-parse --show-object-format`.
    pub fn parse(text: &str) -> Option<ObjectFormat> {
        match text.trim() {
            "sha1" => Some(ObjectFormat::Sha1),
            "sha256" => Some(ObjectFormat::Sha256),
            _ => None,
        }
    }
}

/// The git object id of a blob with these bytes: the hash of `blob <len>\0<bytes>`, lowercase
/// hex.
pub fn blob_id(format: ObjectFormat, bytes: &[u8]) -> String {
    let mut h = BlobHasher::new(format, bytes.len() as u64);
    h.update(bytes);
    h.finish()
}

/// Why a path makes the worktree dirty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeKind {
    /// The index differs from HEAD at this path (added, changed or removed by `git add`/`rm`).
    Staged,
    /// The index holds a merge conflict for this path.
    Unmerged,
    /// The worktree bytes (or symlink target) differ from the index blob.
    Modified,
    /// The executable bit differs from the index mode (when `core.fileMode` is on).
    ModeChanged,
    /// A file became a symlink or directory, a symlink became something else, or a submodule
    /// directory became a file.
    TypeChanged,
    /// The tracked path is gone from the worktree (or a leading directory is now a symlink).
    Deleted,
    /// A checked-out submodule's HEAD is not the commit the index records.
    SubmoduleMoved,
    /// A checked-out submodule has changes of its own (any of these kinds).
    SubmoduleChanged,
    /// A file that is neither tracked nor ignored.
    Untracked,
}

impl ChangeKind {
    /// The label used in [`Change`]'s text.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Staged => "staged",
            ChangeKind::Unmerged => "unmerged",
            ChangeKind::Modified => "modified",
            ChangeKind::ModeChanged => "mode changed",
            ChangeKind::TypeChanged => "type changed",
            ChangeKind::Deleted => "deleted",
            ChangeKind::SubmoduleMoved => "submodule moved",
            ChangeKind::SubmoduleChanged => "submodule changed",
            ChangeKind::Untracked => "untracked",
        }
    }
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reason the worktree is not clean; displays as `<kind>: <path>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Change {
    /// The repository-relative path (lossy UTF-8 for untracked names that are not UTF-8).
    pub path: String,
    /// Why it is dirty.
    pub kind: ChangeKind,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.path)
    }
}

/// Every change of the repository at `depth` (0 for the top level), sorted by path and kind.
pub(crate) fn changes(repo: &Repo, depth: usize) -> Result<Vec<Change>, GitError> {
    let format = repo.object_format()?;
    let file_mode = repo.config_bool("core.filemode")?.unwrap_or(true);
    let entries = repo.index_entries()?;
    let mut out = Vec::new();
    let record = |out: &mut Vec<Change>, path: &str, kind| {
        out.push(Change {
            path: path.to_owned(),
            kind,
        })
    };

    // Index against HEAD: tree to index only, no worktree, no filters.
    match repo.head_id()? {
        Some(_) => {
            let staged = repo.output(&[
                "diff-index",
                "--cached",
                "--name-only",
                "-z",
                "--no-renames",
                "--no-ext-diff",
                "--no-textconv",
                "--ignore-submodules=none",
                "HEAD",
                "--",
            ])?;
            for p in nul_records(&staged) {
                record(&mut out, &String::from_utf8_lossy(p), ChangeKind::Staged);
            }
        }
        None => {
            for e in &entries {
                record(&mut out, &e.path, ChangeKind::Staged);
            }
        }
    }

    // Index against the worktree.
    let mut unmerged = HashSet::new();
    for e in entries.iter().filter(|e| e.stage != 0) {
        if unmerged.insert(e.path.as_str()) {
            record(&mut out, &e.path, ChangeKind::Unmerged);
        }
    }
    let merged: Vec<&IndexEntry> = entries
        .iter()
        .filter(|e| !unmerged.contains(e.path.as_str()))
        .collect();
    let budget = Budget::default();
    for (path, kinds) in compare_all(repo, &merged, format, file_mode, depth, &budget)? {
        for kind in kinds {
            record(&mut out, path, kind);
        }
    }

    // Files neither tracked nor ignored, every one listed (like `--untracked-files=all`).
    let untracked = repo.output(&["ls-files", "-o", "--exclude-standard", "-z"])?;
    for p in nul_records(&untracked) {
        record(&mut out, &String::from_utf8_lossy(p), ChangeKind::Untracked);
    }

    out.sort();
    out.dedup();
    Ok(out)
}

/// The non-empty NUL-terminated records of `-z` output.
pub(crate) fn nul_records(out: &[u8]) -> impl Iterator<Item = &[u8]> {
    out.split(|b| *b == 0).filter(|r| !r.is_empty())
}

type Compared<'a> = Vec<(&'a str, Vec<ChangeKind>)>;

/// Compares entries on a few threads; results come back in entry order.
fn compare_all<'a>(
    repo: &Repo,
    entries: &[&'a IndexEntry],
    format: ObjectFormat,
    file_mode: bool,
    depth: usize,
    budget: &Budget,
) -> Result<Compared<'a>, GitError> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(entries.len().max(1));
    let chunk = entries.len().div_ceil(threads).max(1);
    let results: Vec<Result<Compared<'a>, GitError>> = std::thread::scope(|s| {
        let handles: Vec<_> = entries
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    let mut dirs = HashSet::new();
                    let mut found = Vec::new();
                    let mut buf = vec![0u8; 1 << 16];
                    let mut ctx = Ctx {
                        format,
                        file_mode,
                        depth,
                        budget,
                        dirs: &mut dirs,
                        buf: &mut buf,
                    };
                    for e in part {
                        let kinds = compare(repo, e, &mut ctx)?;
                        if !kinds.is_empty() {
                            found.push((e.path.as_str(), kinds));
                        }
                    }
                    Ok(found)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worktree comparison thread panicked"))
            .collect()
    });
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    Ok(all)
}

/// What one comparison thread carries from entry to entry.
struct Ctx<'a> {
    format: ObjectFormat,
    file_mode: bool,
    depth: usize,
    budget: &'a Budget,
    dirs: &'a mut HashSet<String>,
    buf: &'a mut [u8],
}

/// Compares one stage-0 index entry with the worktree.
fn compare(repo: &Repo, e: &IndexEntry, ctx: &mut Ctx<'_>) -> Result<Vec<ChangeKind>, GitError> {
    let (format, file_mode, depth) = (ctx.format, ctx.file_mode, ctx.depth);
    let root = repo.root();
    let worktree_err = |source: tracked::TrackedError| GitError::Worktree {
        path: e.path.clone(),
        source,
    };
    if !leading_dirs_are_real(root, &e.path, ctx.dirs) {
        return Ok(vec![ChangeKind::Deleted]);
    }
    let full = root.join(&e.path);
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(m) => m,
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(vec![ChangeKind::Deleted])
        }
        Err(err) => return Err(worktree_err(err.into())),
    };
    let ft = meta.file_type();
    let mut kinds = Vec::new();
    match e.mode.as_str() {
        "160000" => {
            if !ft.is_dir() {
                kinds.push(ChangeKind::TypeChanged);
            } else {
                kinds.extend(compare_submodule(repo, e, depth)?);
            }
        }
        "120000" => {
            if !ft.is_symlink() {
                kinds.push(ChangeKind::TypeChanged);
            } else {
                let target = std::fs::read_link(&full).map_err(|err| worktree_err(err.into()))?;
                if blob_id(format, target.as_os_str().as_bytes()) != e.object {
                    kinds.push(ChangeKind::Modified);
                }
            }
        }
        "100644" | "100755" => {
            if !ft.is_file() {
                kinds.push(ChangeKind::TypeChanged);
            } else {
                let same = file_blob_id(&full, format, ctx.budget, ctx.buf)
                    .map_err(worktree_err)?
                    .is_some_and(|id| id == e.object);
                if !same {
                    kinds.push(ChangeKind::Modified);
                }
                let executable = meta.permissions().mode() & 0o100 != 0;
                if file_mode && executable != (e.mode == "100755") {
                    kinds.push(ChangeKind::ModeChanged);
                }
            }
        }
        other => {
            return Err(GitError::Unexpected {
                args: "ls-files -s -z".into(),
                detail: format!("unknown index mode {other} for {}", e.path),
            })
        }
    }
    Ok(kinds)
}

/// Whether every leading component of `rel` is a real directory (not a symlink), as git
/// requires before it looks at a tracked path. Checked directories are remembered.
fn leading_dirs_are_real(root: &Path, rel: &str, checked: &mut HashSet<String>) -> bool {
    let mut end = 0;
    while let Some(i) = rel[end..].find('/') {
        end += i;
        let dir = &rel[..end];
        if !checked.contains(dir) {
            match std::fs::symlink_metadata(root.join(dir)) {
                Ok(m) if m.file_type().is_dir() => {
                    checked.insert(dir.to_owned());
                }
                _ => return false,
            }
        }
        end += 1;
    }
    true
}

/// A gitlink: an unpopulated submodule (no `.git` inside the directory) is clean, as for
/// `git status`; a populated one must have the recorded commit checked out and be clean itself.
fn compare_submodule(
    repo: &Repo,
    e: &IndexEntry,
    depth: usize,
) -> Result<Vec<ChangeKind>, GitError> {
    let dir = repo.root().join(&e.path);
    if std::fs::symlink_metadata(dir.join(".git")).is_err() {
        return Ok(Vec::new());
    }
    if depth + 1 >= MAX_SUBMODULE_DEPTH {
        return Err(GitError::Unexpected {
            args: "ls-files -s -z".into(),
            detail: format!(
                "submodules nested deeper than {MAX_SUBMODULE_DEPTH} levels at {}",
                e.path
            ),
        });
    }
    let sub = repo.at(dir);
    let mut kinds = Vec::new();
    if sub.head_id()?.as_deref() != Some(e.object.as_str()) {
        kinds.push(ChangeKind::SubmoduleMoved);
    }
    if !changes(&sub, depth + 1)?.is_empty() {
        kinds.push(ChangeKind::SubmoduleChanged);
    }
    Ok(kinds)
}

/// The blob id of the regular file at `path` (opened and read under [`tracked`]'s rules),
/// `None` when its length changed while it was read (then it differs from the index anyway).
fn file_blob_id(
    path: &Path,
    format: ObjectFormat,
    budget: &Budget,
    buf: &mut [u8],
) -> Result<Option<String>, tracked::TrackedError> {
    let opened = tracked::open(path, false, budget)?;
    let len = opened.len;
    let mut h = BlobHasher::new(format, len);
    let read = opened.read_all(budget, buf, |chunk| h.update(chunk))?;
    Ok((read == len).then(|| h.finish()))
}

/// Hashes `blob <len>\0` followed by whatever is written to it.
enum BlobHasher {
    Sha1(Sha1),
    Sha256(qual_json::Sha256Stream),
}

impl BlobHasher {
    fn new(format: ObjectFormat, len: u64) -> BlobHasher {
        let header = format!("blob {len}\0");
        let mut h = match format {
            ObjectFormat::Sha1 => BlobHasher::Sha1(Sha1::new()),
            ObjectFormat::Sha256 => BlobHasher::Sha256(qual_json::Sha256Stream::new()),
        };
        h.update(header.as_bytes());
        h
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            BlobHasher::Sha1(h) => h.update(bytes),
            BlobHasher::Sha256(h) => h.update(bytes),
        }
    }

    fn finish(self) -> String {
        match self {
            BlobHasher::Sha1(h) => hex::encode(h.finalize()),
            BlobHasher::Sha256(h) => h.finish_hex(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_ids_match_git_hash_object() {
        // `git hash-object` of the empty file and of "hello\n", in both object formats.
        let vectors = [
            (
                ObjectFormat::Sha1,
                &b""[..],
                "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
            ),
            (
                ObjectFormat::Sha1,
                b"hello\n",
                "ce013625030ba8dba906f756967f9e9ca394464a",
            ),
            (
                ObjectFormat::Sha256,
                b"",
                "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813",
            ),
            (
                ObjectFormat::Sha256,
                b"hello\n",
                "2cf8d83d9ee29543b34a87727421fdecb7e3f3a183d337639025de576db9ebb4",
            ),
        ];
        for (format, bytes, id) in vectors {
            assert_eq!(blob_id(format, bytes), id);
        }
    }

    #[test]
    fn changes_read_as_kind_colon_path() {
        let c = Change {
            path: "src/a b.rs".into(),
            kind: ChangeKind::ModeChanged,
        };
        assert_eq!(c.to_string(), "mode changed: src/a b.rs");
        assert_eq!(ObjectFormat::parse("sha256\n"), Some(ObjectFormat::Sha256));
        assert_eq!(ObjectFormat::parse("md5"), None);
    }
}
