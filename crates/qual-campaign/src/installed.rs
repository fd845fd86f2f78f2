//! Installed bytes of a Python runtime, for [`crate::manifest`]: every file a distribution's
//! `RECORD` lists is hashed and compared with the hash `RECORD` gives for it (each
//! disagreement, missing file or unreadable file kept, by path), files `RECORD` lists without
//! a `sha256` are hashed and listed, and the files on the module path that no distribution
//! owns but that change what the interpreter does at start-up (`*.pth` in a site directory,
//! `sitecustomize` / `usercustomize` modules anywhere on `sys.path`) are hashed and listed.
//!
//! Bounds: `RECORD` and `METADATA` are read whole up to [`DIST_INFO_FILE_LIMIT`]; only
//! regular files are hashed (`qual_json::sha256_file`, streamed); a `sitecustomize` package
//! is walked to [`WALK_DEPTH`] levels and [`WALK_FILES`] files, symlinked directories not
//! followed. Everything is listed in sorted order so two captures of an unchanged runtime
//! are byte-identical.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The most a distribution's `METADATA` or `RECORD` may hold.
pub const DIST_INFO_FILE_LIMIT: usize = 64 << 20;
/// How deep a `sitecustomize` / `usercustomize` package is walked.
pub const WALK_DEPTH: usize = 16;
/// How many files of one such package are hashed at most.
pub const WALK_FILES: usize = 10_000;

/// A file hashed by the capture.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstalledFile {
    /// Path as `RECORD` spells it (relative to the site directory).
    pub path: String,
    /// Size.
    pub bytes: u64,
    /// `sha256:` of the content.
    pub sha256: String,
}

/// What was found where `RECORD` promised a hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum Found {
    /// The file's bytes hash differently.
    Differs {
        /// Size now.
        bytes: u64,
        /// `sha256:` now.
        sha256: String,
    },
    /// No file at the path.
    Missing,
    /// The path could not be hashed (not a regular file, unreadable).
    Unreadable {
        /// Why.
        error: String,
    },
}

/// One file whose bytes do not match its `RECORD` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordMismatch {
    /// Path as `RECORD` spells it.
    pub path: String,
    /// The hash field of `RECORD`, as written (`sha256=<urlsafe base64>`).
    pub recorded: String,
    /// What is there now.
    pub found: Found,
}

/// The installed files of one distribution, checked against its `RECORD`.
#[derive(Debug, Default)]
pub struct Checked {
    /// Entries listed in `RECORD`.
    pub record_files: u64,
    /// Files whose bytes match their `RECORD` hash.
    pub verified_files: u64,
    /// Files `RECORD` lists without a `sha256` (except `RECORD` itself), hashed here.
    pub unhashed_files: Vec<InstalledFile>,
    /// Disagreements with `RECORD`, sorted by path.
    pub mismatches: Vec<RecordMismatch>,
    /// Resolved paths of every listed file that exists (ownership for [`unowned`]).
    pub owned: BTreeSet<PathBuf>,
}

/// Why a file on the module path is listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnownedKind {
    /// A `*.pth` file of a site directory (its `import` lines run at every start-up).
    Pth,
    /// A `sitecustomize` module (imported at every start-up).
    Sitecustomize,
    /// A `usercustomize` module (imported at start-up when the user site is enabled).
    Usercustomize,
}

/// A start-up-affecting file on the module path that no distribution's `RECORD` lists.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnownedFile {
    /// Absolute path.
    pub path: String,
    /// Why it matters.
    pub kind: UnownedKind,
    /// Size.
    pub bytes: u64,
    /// `sha256:` of the content.
    pub sha256: String,
}

/// The fields of one `RECORD` line (CSV: quoted fields, `""` inside quotes).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let cur = fields.last_mut().expect("one field at least");
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) if cur.is_empty() => quoted = true,
            (',', false) => fields.push(String::new()),
            (c, _) => cur.push(c),
        }
    }
    fields
}

/// `sha256:<hex>` of a `RECORD` hash field `sha256=<urlsafe base64, padded or not>`; `None`
/// for another algorithm or no hash.
fn recorded_sha256(field: &str) -> Option<Result<String, ()>> {
    let b64 = field.strip_prefix("sha256=")?;
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::URL_SAFE,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    Some(match engine.decode(b64) {
        Ok(raw) if raw.len() == 32 => Ok(format!("sha256:{}", hex::encode(raw))),
        _ => Err(()),
    })
}

fn hash(path: &Path) -> Result<qual_json::FileHash, Found> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Found::Missing),
        _ => {}
    }
    qual_json::sha256_file(path, None).map_err(|e| Found::Unreadable {
        error: e.to_string(),
    })
}

/// Checks every file `record` (the bytes of `info/RECORD`) lists against its hash; paths are
/// relative to `site`, the directory holding the `.dist-info`.
pub fn check_record(site: &Path, info: &Path, record: &[u8]) -> Checked {
    let text = String::from_utf8_lossy(record);
    let record_path = std::fs::canonicalize(info.join("RECORD")).ok();
    let mut c = Checked::default();
    let mut seen = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields = csv_fields(line);
        let rel = fields[0].clone();
        if rel.is_empty() || !seen.insert(rel.clone()) {
            continue;
        }
        c.record_files += 1;
        let file = site.join(&rel);
        let resolved = std::fs::canonicalize(&file).ok();
        if let Some(r) = &resolved {
            c.owned.insert(r.clone());
        }
        if resolved.is_some() && resolved == record_path {
            continue; // bound by the manifest's `record_sha256`
        }
        let field = fields.get(1).map(String::as_str).unwrap_or("");
        let mismatch = |found| RecordMismatch {
            path: rel.clone(),
            recorded: field.to_string(),
            found,
        };
        match (recorded_sha256(field), hash(&file)) {
            (Some(Ok(want)), Ok(h)) if h.sha256 == want => c.verified_files += 1,
            (Some(_), Ok(h)) => c.mismatches.push(mismatch(Found::Differs {
                bytes: h.bytes,
                sha256: h.sha256,
            })),
            (_, Err(found)) => c.mismatches.push(mismatch(found)),
            (None, Ok(h)) => c.unhashed_files.push(InstalledFile {
                path: rel.clone(),
                bytes: h.bytes,
                sha256: h.sha256,
            }),
        }
    }
    c.unhashed_files.sort_by(|a, b| a.path.cmp(&b.path));
    c.mismatches.sort_by(|a, b| a.path.cmp(&b.path));
    c
}

fn customize_kind(name: &str) -> Option<UnownedKind> {
    let stem = name.split('.').next().unwrap_or(name);
    match stem {
        "sitecustomize" => Some(UnownedKind::Sitecustomize),
        "usercustomize" => Some(UnownedKind::Usercustomize),
        _ => None,
    }
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Files under `dir` (symlinked directories not followed), bounded by [`WALK_DEPTH`] and
/// [`WALK_FILES`].
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    for p in sorted_entries(dir) {
        if out.len() >= WALK_FILES {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            if depth < WALK_DEPTH {
                walk(&p, depth + 1, out);
            }
        } else {
            out.push(p);
        }
    }
}

/// Candidate start-up files: `*.pth` at the top of each site directory, and every
/// `sitecustomize` / `usercustomize` module (file, package, compiled file in `__pycache__`)
/// in each directory of `module_path`.
fn candidates(sites: &[String], module_path: &[String]) -> Vec<(PathBuf, UnownedKind)> {
    let mut v = Vec::new();
    for s in sites {
        for p in sorted_entries(Path::new(s)) {
            if p.extension().is_some_and(|x| x == "pth") {
                v.push((p, UnownedKind::Pth));
            }
        }
    }
    for d in module_path {
        let dir = Path::new(d);
        let cached = sorted_entries(&dir.join("__pycache__"));
        for p in sorted_entries(dir).into_iter().chain(cached) {
            let Some(kind) = p
                .file_name()
                .and_then(|n| customize_kind(&n.to_string_lossy()))
            else {
                continue;
            };
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
                let mut files = Vec::new();
                walk(&p, 1, &mut files);
                v.extend(files.into_iter().map(|f| (f, kind)));
            } else {
                v.push((p, kind));
            }
        }
    }
    v
}

/// The start-up files no distribution owns (`owned`: resolved paths from every `RECORD`),
/// hashed, sorted by path; a file that cannot be hashed is an error naming it.
pub fn unowned(
    sites: &[String],
    module_path: &[String],
    owned: &BTreeSet<PathBuf>,
) -> Result<Vec<UnownedFile>, String> {
    let mut out = BTreeSet::new();
    for (p, kind) in candidates(sites, module_path) {
        let resolved = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        if owned.contains(&resolved) {
            continue;
        }
        let h = qual_json::sha256_file(&p, None).map_err(|e| e.to_string())?;
        out.insert(UnownedFile {
            path: p.display().to_string(),
            kind,
            bytes: h.bytes,
            sha256: h.sha256,
        });
    }
    Ok(out.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lines_are_csv() {
        assert_eq!(
            csv_fields("a/b.py,sha256=x,12"),
            ["a/b.py", "sha256=x", "12"]
        );
        assert_eq!(
            csv_fields("\"a,b \"\"c\"\".py\",,"),
            ["a,b \"c\".py", "", ""]
        );
    }

    #[test]
    fn record_hashes_decode_padded_or_not() {
        // sha256 of the empty string.
        let hex = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let b64 = "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU";
        assert_eq!(
            recorded_sha256(&format!("sha256={b64}")),
            Some(Ok(hex.into()))
        );
        assert_eq!(
            recorded_sha256(&format!("sha256={b64}=")),
            Some(Ok(hex.into()))
        );
        assert_eq!(recorded_sha256("sha256=!!"), Some(Err(())));
        assert_eq!(recorded_sha256("sha512=abc"), None);
        assert_eq!(recorded_sha256(""), None);
    }

    #[test]
    fn a_record_is_checked_file_by_file() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path();
        let info = site.join("p-1.dist-info");
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(site.join("empty.py"), b"").unwrap();
        std::fs::write(site.join("edited.py"), b"x").unwrap();
        std::fs::write(site.join("plain.txt"), b"y").unwrap();
        let empty = "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU";
        let record = format!(
            "empty.py,{empty},0\nedited.py,{empty},0\ngone.py,{empty},0\nplain.txt,,\np-1.dist-info/RECORD,,\n"
        );
        std::fs::write(info.join("RECORD"), &record).unwrap();
        let c = check_record(site, &info, record.as_bytes());
        assert_eq!((c.record_files, c.verified_files), (5, 1));
        let names: Vec<_> = c.mismatches.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(names, ["edited.py", "gone.py"]);
        assert!(matches!(
            c.mismatches[0].found,
            Found::Differs { bytes: 1, .. }
        ));
        assert_eq!(c.mismatches[1].found, Found::Missing);
        assert_eq!(c.unhashed_files.len(), 1);
        assert_eq!(c.unhashed_files[0].path, "plain.txt");
    }
}
