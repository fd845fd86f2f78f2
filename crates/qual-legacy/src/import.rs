//! Importing a CI artifact bundle (`latency import ZIP_OR_DIR --fixture-id ID [--force]`).
//!
//! A bundle is a directory used in place, or a zip extracted into a fresh temporary
//! directory under `<root>/target/` (members that are absolute, contain `..`, or resolve
//! outside the extraction root are refused; so are symlink members). The importer selects
//! exactly one schema-3 result JSON (optionally by fixture id), finds its fixture and raw log,
//! checks the raw-log digest, copies both to their canonical places (refusing to replace
//! different bytes without `force`), then validates the copied result with strict provenance
//! and retention but *without* requiring thresholds. Any failure after copying rolls the
//! destination files back (old bytes restored, new files deleted), in reverse order.

use crate::artifact::{validate_result_artifact, ValidateOptions};
use crate::git::Repo;
use crate::paths::{
    is_canonical_raw_log_path, is_canonical_result_path, is_repo_relative, RESULT_DIR,
};
use crate::pyfmt::py_str_repr;
use crate::{LegacyError, Result};
use qual_json::Value;
use std::path::{Component, Path, PathBuf};

/// What to import.
#[derive(Clone, Debug)]
pub struct ImportRequest<'a> {
    /// Directory or zip.
    pub bundle: &'a Path,
    /// The manifest.
    pub manifest_path: &'a Path,
    /// Select the result by fixture id.
    pub fixture_id: Option<&'a str>,
    /// Replace existing different bytes.
    pub force: bool,
}

/// A successful import.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportReport {
    /// Fixture id.
    pub fixture_id: String,
    /// Backend.
    pub backend: String,
    /// Repo-relative result path.
    pub result_artifact: String,
    /// Repo-relative raw-log path.
    pub raw_log: String,
    /// Metric names, sorted.
    pub metrics: Vec<String>,
}

fn refuse<T>(msg: String) -> Result<T> {
    Err(LegacyError::Refused(msg))
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn extract_zip(zip_path: &Path, dest: &Path) -> Result<()> {
    let file = std::fs::File::open(zip_path)
        .map_err(|e| LegacyError::Refused(format!("cannot open {}: {e}", zip_path.display())))?;
    let mut archive = zip::ZipArchive::new(file)
        .map_err(|_| LegacyError::refused("artifact bundle is not a valid zip"))?;
    for i in 0..archive.len() {
        let mut entry = archive
            .by_index(i)
            .map_err(|_| LegacyError::refused("artifact bundle is not a valid zip"))?;
        let name = entry.name().to_owned();
        let rel = Path::new(&name);
        if rel.is_absolute()
            || name.starts_with('/')
            || name.starts_with('\\')
            || rel
                .components()
                .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
        {
            return refuse(format!(
                "artifact zip contains unsafe path: {}",
                py_str_repr(&name)
            ));
        }
        if entry.is_symlink() {
            return refuse(format!(
                "artifact zip contains a symlink member: {}",
                py_str_repr(&name)
            ));
        }
        let target = dest.join(rel);
        if !target.starts_with(dest) {
            return refuse(format!(
                "artifact zip escapes extraction root: {}",
                py_str_repr(&name)
            ));
        }
        if entry.is_dir() {
            std::fs::create_dir_all(&target)
                .map_err(|e| LegacyError::Refused(format!("cannot extract {name}: {e}")))?;
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| LegacyError::Refused(format!("cannot extract {name}: {e}")))?;
            let resolved = crate::paths::resolve(parent);
            if !resolved.starts_with(crate::paths::resolve(dest)) {
                return refuse(format!(
                    "artifact zip escapes extraction root: {}",
                    py_str_repr(&name)
                ));
            }
        }
        let mut out = std::fs::File::create(&target)
            .map_err(|e| LegacyError::Refused(format!("cannot extract {name}: {e}")))?;
        std::io::copy(&mut entry, &mut out)
            .map_err(|_| LegacyError::refused("artifact bundle is not a valid zip"))?;
    }
    Ok(())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            walk(&p, out);
        } else if ft.is_file() {
            out.push(p);
        }
    }
}

fn files_sorted(root: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    walk(root, &mut v);
    v.retain(|p| {
        !p.strip_prefix(root)
            .map(|r| r.components().any(|c| c.as_os_str() == "__MACOSX"))
            .unwrap_or(false)
    });
    v.sort();
    v
}

enum Undo {
    Restore(PathBuf, Vec<u8>),
    Delete(PathBuf),
}

fn stage(src: &Path, dest: &Path, force: bool, undo: &mut Vec<Undo>) -> Result<()> {
    if crate::paths::resolve(src) == crate::paths::resolve(dest) {
        return Ok(());
    }
    let new = std::fs::read(src)
        .map_err(|e| LegacyError::Refused(format!("cannot read {}: {e}", src.display())))?;
    if dest.exists() || dest.symlink_metadata().is_ok() {
        let meta = dest
            .symlink_metadata()
            .map_err(|e| LegacyError::Refused(e.to_string()))?;
        if !meta.is_file() {
            return refuse(format!(
                "destination is not a regular file: {}",
                dest.display()
            ));
        }
        let old = std::fs::read(dest)
            .map_err(|e| LegacyError::Refused(format!("cannot read {}: {e}", dest.display())))?;
        if old == new {
            return Ok(());
        }
        if !force {
            return refuse(format!(
                "destination already exists with different content; pass --force to replace: {}",
                dest.display()
            ));
        }
        undo.push(Undo::Restore(dest.to_path_buf(), old));
    } else {
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                LegacyError::Refused(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        undo.push(Undo::Delete(dest.to_path_buf()));
    }
    std::fs::write(dest, &new)
        .map_err(|e| LegacyError::Refused(format!("cannot write {}: {e}", dest.display())))
}

fn rollback(undo: Vec<Undo>) {
    for u in undo.into_iter().rev() {
        match u {
            Undo::Restore(p, bytes) => {
                let _ = std::fs::write(p, bytes);
            }
            Undo::Delete(p) => {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// Imports a bundle.
pub fn import_bundle(repo: &Repo, req: &ImportRequest<'_>) -> Result<ImportReport> {
    let bundle = req.bundle;
    if !bundle.exists() {
        return refuse(format!(
            "artifact bundle does not exist: {}",
            bundle.display()
        ));
    }
    let _temp;
    let root: PathBuf = if bundle.is_dir() {
        bundle.to_path_buf()
    } else {
        let mut head = [0u8; 4];
        let is_zip = std::fs::File::open(bundle)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
            .is_ok()
            && (head == *b"PK\x03\x04" || head == *b"PK\x05\x06");
        if !is_zip {
            return refuse(format!(
                "artifact bundle must be a directory or zip: {}",
                bundle.display()
            ));
        }
        let target = repo.join("target");
        std::fs::create_dir_all(&target).map_err(|e| {
            LegacyError::Refused(format!("cannot create {}: {e}", target.display()))
        })?;
        let dir = target.join(format!(
            "backend-latency-artifact-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir(&dir)
            .map_err(|e| LegacyError::Refused(format!("cannot create {}: {e}", dir.display())))?;
        _temp = TempDir(dir.clone());
        extract_zip(bundle, &dir)?;
        dir
    };

    // Result selection.
    let files = files_sorted(&root);
    let mut candidates: Vec<(PathBuf, qual_json::Object)> = Vec::new();
    for f in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let Ok(Value::Object(o)) = crate::artifact::load_artifact_value(f) else {
            continue;
        };
        if !crate::pyfmt::eq_int(o.get("artifact_schema_version"), 3) {
            continue;
        }
        let Some(fid) = o
            .get("fixture_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            continue;
        };
        if req.fixture_id.is_some_and(|want| want != fid) {
            continue;
        }
        candidates.push((f.clone(), o));
    }
    let (result_file, result) = match candidates.len() {
        0 => {
            return refuse(match req.fixture_id {
                Some(id) => format!(
                    "no latency result artifact JSON found for fixture {}",
                    py_str_repr(id)
                ),
                None => "no latency result artifact JSON found".into(),
            })
        }
        1 => candidates.pop().expect("one candidate"),
        _ => {
            let shown: Vec<String> = candidates
                .iter()
                .map(|(p, _)| p.display().to_string())
                .collect();
            return refuse(format!(
                "artifact bundle contains multiple result artifacts; pass --fixture-id: {}",
                shown.join(", ")
            ));
        }
    };
    let fixture_id = result
        .get("fixture_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();

    // Fixture lookup.
    let manifest = crate::manifest::load_manifest(req.manifest_path)?;
    let fixture = crate::manifest::find_fixture(&manifest, &fixture_id)?;
    let result_rel = fixture
        .get("result_artifact")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && is_repo_relative(s) && is_canonical_result_path(s))
        .ok_or_else(|| {
            LegacyError::Refused(format!(
                "{fixture_id}.result_artifact must live under bench-results/backend-latency with a .json extension"
            ))
        })?
        .to_owned();

    // Raw log.
    let raw_log = result
        .get("raw_log")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty() && is_canonical_raw_log_path(r))
        .ok_or_else(|| {
            LegacyError::Refused(format!(
                "result raw_log must live under bench-results/backend-latency/raw with a .log extension: {}",
                crate::pyfmt::py_str(result.get("raw_log"))
            ))
        })?
        .to_owned();
    let raw_path = Path::new(&raw_log);
    let name = raw_path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    let mut found: Vec<PathBuf> = Vec::new();
    let mut direct = vec![root.join(raw_path)];
    if let Ok(rel) = raw_path.strip_prefix(RESULT_DIR) {
        direct.push(root.join(rel));
    }
    direct.push(root.join(&name));
    for c in direct {
        if c.is_file() {
            let r = crate::paths::resolve(&c);
            if !found.iter().any(|f| crate::paths::resolve(f) == r) {
                found.push(c);
            }
        }
    }
    let raw_found = match found.len() {
        1 => found.pop().expect("one"),
        0 => {
            let named: Vec<&PathBuf> = files
                .iter()
                .filter(|p| p.file_name() == Some(name.as_os_str()))
                .collect();
            match named.len() {
                1 => named[0].clone(),
                0 => return refuse(format!("raw log not found in artifact bundle: {raw_log}")),
                _ => {
                    let shown: Vec<String> =
                        named.iter().map(|p| p.display().to_string()).collect();
                    return refuse(format!(
                        "artifact bundle contains multiple raw logs named {}: {}",
                        name.to_string_lossy(),
                        shown.join(", ")
                    ));
                }
            }
        }
        _ => {
            let shown: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
            return refuse(format!(
                "artifact bundle contains multiple matching raw logs: {}",
                shown.join(", ")
            ));
        }
    };

    // Checksum.
    let want_sha = result
        .get("raw_log_sha256")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if crate::sha256_file(&raw_found).ok().as_deref() != Some(want_sha) {
        return refuse(format!(
            "raw log checksum does not match result raw_log_sha256: {raw_log}"
        ));
    }

    // Stage, copy, validate; roll back on any failure.
    let mut undo = Vec::new();
    let dest_result = repo.join(&result_rel);
    let dest_raw = repo.join(&raw_log);
    let outcome = (|| -> Result<()> {
        stage(&result_file, &dest_result, req.force, &mut undo)?;
        stage(&raw_found, &dest_raw, req.force, &mut undo)?;
        let errors = validate_result_artifact(
            repo,
            fixture,
            &dest_result,
            &format!("fixture {fixture_id}"),
            manifest.get("schema_version"),
            Some(req.manifest_path),
            ValidateOptions {
                require_covered_provenance: true,
                enforce_git_retention: true,
                require_threshold_pass: false,
            },
        );
        if !errors.is_empty() {
            let lines: Vec<String> = errors.iter().map(|e| format!("- {e}")).collect();
            return refuse(format!(
                "imported latency artifact failed validation:\n{}",
                lines.join("\n")
            ));
        }
        Ok(())
    })();
    if let Err(e) = outcome {
        rollback(undo);
        return Err(e);
    }
    let mut metrics: Vec<String> = result
        .get("metrics")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    metrics.sort();
    Ok(ImportReport {
        fixture_id,
        backend: result
            .get("backend")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into(),
        result_artifact: result_rel,
        raw_log,
        metrics,
    })
}
