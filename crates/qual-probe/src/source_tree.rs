//! The source-tree digest `kiln-source-tree-v1`.
//!
//! # Format (byte for byte)
//!
//! 1. Inputs are the index entries of `git ls-files -s -z` (mode text and `/`-separated path).
//! 2. A profile selects paths (see [`SourceTreeProfile`]):
//!    - `kiln`: included when the path is exactly one of [`KILN_EXACT`]; otherwise excluded when
//!      it starts with `qualification/receipts/` or `scripts/c2_artifacts/`; otherwise included
//!      when it starts with one of [`KILN_PREFIXES`]. This is Kiln's `kiln-source-tree-v1`.
//!    - `generic` (the default for other repositories): every tracked path except those under
//!      `qualification/receipts/` (receipts describe the source; they are not part of it).
//! 3. Selected entries are sorted by the UTF-8 bytes of the path.
//! 4. The digest is SHA-256 over `b"kiln-source-tree-v1\0"` followed, for each entry, by
//!    `mode \0 path \0 decimal(len(content)) \0 hex(sha256(content)) \0`, where content is the
//!    **working-tree file** read from disk (for a mode-`120000` entry, the file its symlink
//!    leads to, as the original does), mode is the index mode text and hex is lowercase. The
//!    result is `sha256:<64 hex>`.
//!
//! Both profiles use the same byte stream and the same format name; only the path selection
//! differs, and the profile used is recorded beside the digest. No selected entry is an error
//! (`no tracked source inputs found`), as is an unreadable input.
//!
//! Inputs are read under `qual_git::tracked`'s rules, because a case may just have replaced
//! one: anything but a regular file (a FIFO, socket, device, directory, a symlink to a
//! device) is refused by path, and so is a symlink where the index records a regular file
//! (the original would follow it; such a tree is dirty anyway); a file above 1 GiB is refused
//! from its size, the whole digest reads at most 8 GiB and gives up after 120 s. Each refusal
//! is `cannot read tracked source input <path>: <reason>`.
//!
//! Files are hashed in parallel with rayon's work-stealing pool (one thread per core; a crate
//! made for exactly this, rather than a hand-rolled queue), each thread reusing one large read
//! buffer; results are collected in digest order, so the digest does not depend on the thread
//! count or the scheduling (the tests compare it with a one-thread run and a golden vector).

use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use crate::git::{GitError, IndexEntry, Repo};
pub use crate::policy::SourceTreeProfile;
use qual_git::tracked::{self, Budget, TrackedError};

/// The format name recorded as `source.tree_hash_format`.
pub const FORMAT: &str = "kiln-source-tree-v1";

/// Paths the `kiln` profile includes exactly.
pub const KILN_EXACT: &[&str] = &[
    ".dockerignore",
    "Cargo.lock",
    "Cargo.toml",
    "assets/logo.png",
    "about.hbs",
    "about.toml",
    "desktop/Cargo.lock",
    "desktop/Cargo.toml",
    "desktop/build.rs",
    "desktop/tauri.conf.json",
    "deny.toml",
    "kiln.example.toml",
];

/// Prefixes the `kiln` profile excludes (checked after [`KILN_EXACT`]).
pub const KILN_EXCLUDED_PREFIXES: &[&str] = &["qualification/receipts/", "scripts/c2_artifacts/"];

/// Prefixes the `kiln` profile includes.
pub const KILN_PREFIXES: &[&str] = &[
    "crates/",
    "deploy/",
    "desktop/capabilities/",
    "desktop/icons/",
    "desktop/src/",
    "desktop/ui/",
    "qualification/schema/",
    "qualification/workloads/",
    "scripts/",
];

/// Prefix the `generic` profile excludes.
pub const GENERIC_EXCLUDED_PREFIX: &str = "qualification/receipts/";

/// One hashed input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// Index mode text.
    pub mode: String,
    /// Repository-relative path.
    pub path: String,
    /// Content length in bytes.
    pub bytes: u64,
    /// `sha256:<hex>` of the content.
    pub sha256: String,
}

/// A computed source-tree digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceTree {
    /// Always [`FORMAT`].
    pub format: &'static str,
    /// The profile that selected the paths.
    pub profile: SourceTreeProfile,
    /// `sha256:<64 hex>`.
    pub digest: String,
    /// The inputs in digest order.
    pub files: Vec<SourceFile>,
}

/// Why the digest could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum SourceTreeError {
    /// The index could not be listed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The profile selected nothing.
    #[error("no tracked source inputs found")]
    Empty,
    /// A selected file could not be read, or was refused (not a regular file, too large,
    /// not read in time: see `qual_git::tracked`).
    #[error("cannot read tracked source input {path}: {source}")]
    Read {
        /// Repository-relative path.
        path: String,
        /// Why.
        #[source]
        source: TrackedError,
    },
}

/// Whether `path` is selected by `profile`.
pub fn is_selected(profile: SourceTreeProfile, path: &str) -> bool {
    match profile {
        SourceTreeProfile::Kiln => {
            if KILN_EXACT.contains(&path) {
                return true;
            }
            if KILN_EXCLUDED_PREFIXES.iter().any(|p| path.starts_with(p)) {
                return false;
            }
            KILN_PREFIXES.iter().any(|p| path.starts_with(p))
        }
        SourceTreeProfile::Generic => !path.starts_with(GENERIC_EXCLUDED_PREFIX),
    }
}

/// Selects and sorts index entries for a profile (step 2 and 3 of the format).
pub fn select(profile: SourceTreeProfile, entries: Vec<IndexEntry>) -> Vec<IndexEntry> {
    let mut selected: Vec<IndexEntry> = entries
        .into_iter()
        .map(|mut e| {
            e.path = e.path.replace('\\', "/");
            e
        })
        .filter(|e| is_selected(profile, &e.path))
        .collect();
    selected.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    selected
}

/// The digest of already-hashed inputs, given in digest order (step 4 of the format).
pub fn digest_files(files: &[SourceFile]) -> String {
    let mut h = qual_json::Sha256Stream::new();
    h.update(FORMAT.as_bytes());
    h.update([0u8]);
    for f in files {
        h.update(f.mode.as_bytes());
        h.update([0u8]);
        h.update(f.path.as_bytes());
        h.update([0u8]);
        h.update(f.bytes.to_string().as_bytes());
        h.update([0u8]);
        h.update(
            f.sha256
                .strip_prefix("sha256:")
                .unwrap_or(&f.sha256)
                .as_bytes(),
        );
        h.update([0u8]);
    }
    h.finish()
}

/// Computes the digest of the repository at `root` under `profile`.
pub fn compute(root: &Path, profile: SourceTreeProfile) -> Result<SourceTree, SourceTreeError> {
    let entries = Repo::new(root).index_entries()?;
    compute_from_entries(root, profile, entries)
}

/// Computes the digest from an explicit index listing (used by tests and benchmarks).
pub fn compute_from_entries(
    root: &Path,
    profile: SourceTreeProfile,
    entries: Vec<IndexEntry>,
) -> Result<SourceTree, SourceTreeError> {
    let selected = select(profile, entries);
    if selected.is_empty() {
        return Err(SourceTreeError::Empty);
    }
    let files = hash_all(root, &selected)?;
    Ok(SourceTree {
        format: FORMAT,
        profile,
        digest: digest_files(&files),
        files,
    })
}

fn hash_all(root: &Path, selected: &[IndexEntry]) -> Result<Vec<SourceFile>, SourceTreeError> {
    // Work stealing over the entries (rayon's pool, one thread per core unless
    // RAYON_NUM_THREADS says otherwise). `collect` keeps index order, so the digest stream is
    // the sequential one whatever the scheduling. After a failure, entries after the earliest
    // failed one are skipped, and every entry before it is still read: the error reported is
    // always the first in digest order, as if read sequentially.
    let first_failed = AtomicUsize::new(usize::MAX);
    let budget = Budget::default();
    let hashed: Vec<Option<Result<SourceFile, SourceTreeError>>> = selected
        .par_iter()
        .enumerate()
        .map(|(i, e)| {
            if i > first_failed.load(Ordering::Relaxed) {
                return None;
            }
            let r = BUF
                .with_borrow_mut(|buf| hash_file(&root.join(&e.path), &e.mode, &budget, buf))
                .map(|(bytes, sha256)| SourceFile {
                    mode: e.mode.clone(),
                    path: e.path.clone(),
                    bytes,
                    sha256,
                })
                .map_err(|source| SourceTreeError::Read {
                    path: e.path.clone(),
                    source,
                });
            if r.is_err() {
                first_failed.fetch_min(i, Ordering::Relaxed);
            }
            Some(r)
        })
        .collect();
    let mut files = Vec::with_capacity(selected.len());
    for r in hashed.into_iter().flatten() {
        files.push(r?);
    }
    Ok(files)
}

/// Read buffer size: large enough that all but the biggest source files take one `read`.
const READ_BUF: usize = 1 << 20;

thread_local! {
    /// One read buffer per hashing thread, reused for every file it hashes.
    static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0u8; READ_BUF]);
}

/// Reads the working-tree file at `path` to its end and returns its length and
/// `sha256:<hex>`, under `qual_git::tracked`'s rules: a regular file only, bounded in bytes
/// and time; a symlink is followed only for a mode-`120000` entry (as the original's
/// `read_bytes` does), and must end at a regular file. The length is what was read.
fn hash_file(
    path: &Path,
    mode: &str,
    budget: &Budget,
    buf: &mut [u8],
) -> Result<(u64, String), TrackedError> {
    let mut h = qual_json::Sha256Stream::new();
    let total =
        tracked::open(path, mode == "120000", budget)?.read_all(budget, buf, |c| h.update(c))?;
    Ok((total, h.finish()))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make a FIFO with mkfifo
mod tests {
    use super::*;

    fn entry(mode: &str, path: &str) -> IndexEntry {
        IndexEntry {
            mode: mode.into(),
            object: "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391".into(),
            stage: 0,
            path: path.into(),
        }
    }

    #[test]
    fn golden_vector_reproduces_kiln_source_tree_v1() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[workspace]\n").unwrap();
        std::fs::create_dir_all(dir.path().join("crates/demo/src")).unwrap();
        std::fs::write(
            dir.path().join("crates/demo/src/lib.rs"),
            "pub fn value() -> u32 { 1 }\n",
        )
        .unwrap();
        let entries = vec![
            entry("100644", "crates/demo/src/lib.rs"),
            entry("100644", "Cargo.toml"),
        ];
        let t = compute_from_entries(dir.path(), SourceTreeProfile::Kiln, entries).unwrap();
        assert_eq!(
            t.digest,
            "sha256:4cd7ed42f3d96cf8cf4a3a3767d84742fecc6915e7c7d09961bb5ca037977fc3"
        );
        assert_eq!(t.files[0].path, "Cargo.toml");
    }

    #[test]
    fn digest_does_not_depend_on_thread_count_or_read_size() {
        // Files around and above the 1 MiB read buffer, empty files, many small ones; the
        // parallel digest equals a one-thread digest and a plain sequential recomputation.
        let dir = tempfile::tempdir().unwrap();
        let mut entries = Vec::new();
        let mut expected = Vec::new();
        for i in 0..300usize {
            let len = match i {
                0 => 0,
                1 => READ_BUF - 1,
                2 => READ_BUF,
                3 => READ_BUF + 1,
                4 => 3 * READ_BUF + 17,
                _ => (i * 7919) % 20_000,
            };
            let data: Vec<u8> = (0..len).map(|j| (j * 31 + i) as u8).collect();
            let path = format!("crates/c{}/f{i:03}.rs", i % 7);
            std::fs::create_dir_all(dir.path().join(&path).parent().unwrap()).unwrap();
            std::fs::write(dir.path().join(&path), &data).unwrap();
            entries.push(entry(if i % 5 == 0 { "100755" } else { "100644" }, &path));
            expected.push(SourceFile {
                mode: entries.last().unwrap().mode.clone(),
                path: path.clone(),
                bytes: len as u64,
                sha256: qual_json::sha256_prefixed(&data),
            });
        }
        expected.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        let parallel =
            compute_from_entries(dir.path(), SourceTreeProfile::Generic, entries.clone()).unwrap();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| compute_from_entries(dir.path(), SourceTreeProfile::Generic, entries))
            .unwrap();
        assert_eq!(parallel, one);
        assert_eq!(parallel.files, expected);
        assert_eq!(parallel.digest, digest_files(&expected));
    }

    #[test]
    fn the_first_unreadable_input_in_digest_order_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut entries = vec![entry("100644", "b-missing"), entry("100644", "a-missing")];
        for i in 0..50 {
            std::fs::write(dir.path().join(format!("f{i}")), "x").unwrap();
            entries.push(entry("100644", &format!("f{i}")));
        }
        let e = compute_from_entries(dir.path(), SourceTreeProfile::Generic, entries).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read tracked source input a-missing"),
            "{e}"
        );
    }

    #[test]
    fn a_git_symlink_is_read_through_its_link_and_anything_else_is_refused_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("real"), "content\n").unwrap();
        std::os::unix::fs::symlink("real", d.join("link")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(d.join("fifo"))
            .status()
            .unwrap()
            .success());
        // A mode-120000 entry hashes the file it leads to, exactly as a regular file would.
        let t = compute_from_entries(
            d,
            SourceTreeProfile::Generic,
            vec![entry("120000", "link"), entry("100644", "real")],
        )
        .unwrap();
        assert_eq!(t.files[0].sha256, t.files[1].sha256);
        assert_eq!(t.files[0].bytes, 8);
        for (mode, path, reason) in [
            ("100644", "link", "not a regular file (symlink)"),
            ("120000", "zero", "not a regular file (character device)"),
            ("100644", "zero", "not a regular file (symlink)"),
            ("100644", "fifo", "not a regular file (FIFO)"),
            ("120000", "fifo", "not a regular file (FIFO)"),
        ] {
            let e = compute_from_entries(d, SourceTreeProfile::Generic, vec![entry(mode, path)])
                .unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("cannot read tracked source input {path}: {reason}")
            );
        }
    }

    #[test]
    fn kiln_selection_follows_the_exact_prefix_and_exclusion_rules() {
        let k = SourceTreeProfile::Kiln;
        for p in [
            "Cargo.toml",
            "assets/logo.png",
            "desktop/src/main.rs",
            "crates/a/src/lib.rs",
            "scripts/qualification/tool.py",
            "qualification/schema/receipt.json",
            "qualification/workloads/smoke.json",
        ] {
            assert!(is_selected(k, p), "{p}");
        }
        for p in [
            "qualification/receipts/a.json",
            "docs/x.md",
            "desktop/README.md",
            "assets/profiling/x",
            "scripts/c2_artifacts/a",
            "README.md",
        ] {
            assert!(!is_selected(k, p), "{p}");
        }
        let g = SourceTreeProfile::Generic;
        assert!(is_selected(g, "README.md"));
        assert!(is_selected(g, "docs/x.md"));
        assert!(!is_selected(g, "qualification/receipts/cpu/h/r.json"));
    }

    #[test]
    fn empty_selection_and_unreadable_input_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let r = compute_from_entries(
            dir.path(),
            SourceTreeProfile::Kiln,
            vec![entry("100644", "docs/a.md")],
        );
        assert!(matches!(r, Err(SourceTreeError::Empty)));
        let r = compute_from_entries(
            dir.path(),
            SourceTreeProfile::Generic,
            vec![entry("100644", "missing.txt")],
        );
        let e = r.unwrap_err();
        assert!(e
            .to_string()
            .starts_with("cannot read tracked source input missing.txt"));
    }

    #[test]
    fn mode_and_content_both_change_the_digest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "x").unwrap();
        let d = |mode: &str| {
            compute_from_entries(
                dir.path(),
                SourceTreeProfile::Generic,
                vec![entry(mode, "a")],
            )
            .unwrap()
            .digest
        };
        let a = d("100644");
        assert_ne!(a, d("100755"));
        std::fs::write(dir.path().join("a"), "y").unwrap();
        assert_ne!(a, d("100644"));
    }
}
