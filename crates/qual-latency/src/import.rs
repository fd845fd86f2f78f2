//! Importing a CI artifact bundle (`latency import ZIP_OR_DIR --fixture-id ID [--force]`).
//!
//! A bundle is a directory used in place, or a zip of which only the members the importer
//! reads are extracted into a fresh temporary directory under `<root>/target/`: the result
//! candidates (`*.json`, at most 1 MiB each), then the members named like the raw log the
//! selected result names; nothing else is written out (members that are absolute, contain
//! `..`, or resolve outside the extraction root are refused anywhere in the archive; so are
//! symlink members). Each extracted member may expand to at most
//! [`MAX_EXPANSION_RATIO`] × its compressed size (or [`EXPANSION_FLOOR`]). The importer selects
//! exactly one schema-3 result JSON (optionally by fixture id), finds its fixture and raw log,
//! checks the raw-log digest, copies both to their canonical places (refusing to replace
//! different bytes without `force`), then validates the copied result with strict provenance
//! and retention but *without* requiring thresholds. Any failure after copying rolls the
//! destination files back (old files restored, new files deleted), in reverse order.
//!
//! Bounds: a zip is refused, not extracted, when it has more than [`ImportLimits::entries`]
//! members or its members declare more than [`ImportLimits::bytes`] in total, and extraction
//! stops at that many bytes actually written (declared sizes can lie). Files are hashed,
//! compared and copied as streams, so a raw log of any size costs bounded memory. The
//! temporary directory is removed on return, on SIGINT/SIGTERM (once
//! `qual_exec::signals::install_forwarding` ran, extraction and copying stop at the next
//! chunk), and, when a previous run was killed outright, by the next import, which sweeps
//! directories of processes that no longer exist.

use crate::artifact::{validate_result_artifact, ValidateOptions};
use crate::git::Repo;
use crate::msg::quote;
use crate::paths::{
    is_canonical_raw_log_path, is_canonical_result_path, is_repo_relative, RESULT_DIR,
};
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
    /// Bounds on a zip bundle.
    pub limits: ImportLimits,
}

/// Bounds on what a zip bundle may expand to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImportLimits {
    /// Most members (files and directories) a zip may have.
    pub entries: usize,
    /// Most bytes its members may expand to, in total.
    pub bytes: u64,
}

impl Default for ImportLimits {
    /// 10 000 members and 4 GiB (raw logs of long runs are large; a bundle holds one).
    fn default() -> Self {
        ImportLimits {
            entries: 10_000,
            bytes: 4 << 30,
        }
    }
}

/// The prefix of the temporary extraction directories under `<root>/target/`.
pub const TEMP_PREFIX: &str = "backend-latency-artifact-";

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

fn interrupted() -> Result<()> {
    match qual_exec::signals::interrupted() {
        Some(sig) => refuse(format!(
            "interrupted by {}; the temporary extraction was removed",
            qual_exec::signal_name(sig)
        )),
        None => Ok(()),
    }
}

/// Removes extraction directories left by imports whose process no longer exists (a run
/// killed with SIGKILL cannot clean up after itself). Best effort.
pub fn sweep_stale_temp_dirs(target: &Path) {
    let Ok(rd) = std::fs::read_dir(target) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(TEMP_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let alive = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if !alive && e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Copies at most `limit` bytes from `from` to `to` in chunks, stopping on SIGINT/SIGTERM;
/// `Ok(None)` when `from` holds more than `limit` bytes.
fn copy_bounded(
    from: &mut dyn std::io::Read,
    to: &mut dyn std::io::Write,
    limit: u64,
) -> std::io::Result<Option<u64>> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        if qual_exec::signals::interrupted().is_some() {
            return Err(std::io::Error::from(std::io::ErrorKind::Interrupted));
        }
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(Some(total));
        }
        total += n as u64;
        if total > limit {
            return Ok(None);
        }
        to.write_all(&buf[..n])?;
    }
}

fn too_big(limits: &ImportLimits) -> LegacyError {
    LegacyError::Refused(format!(
        "artifact zip expands to more than {} bytes; refused without extracting",
        limits.bytes
    ))
}

/// What [`extract_zip`] does with one member, chosen by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// Leave it in the archive (its name is still checked).
    Skip,
    /// Write it out (under the expansion bounds).
    Whole,
    /// Write it out if it expands to at most this many bytes, else leave it out (a result
    /// candidate larger than any result can be is not one).
    UpTo(u64),
}

/// A member may expand to this many times its compressed size (above
/// [`EXPANSION_FLOOR`]); deflate reaches ~1032×, text logs 5–50×.
pub const MAX_EXPANSION_RATIO: u64 = 200;

/// Members expanding to at most this many bytes are not held to [`MAX_EXPANSION_RATIO`].
pub const EXPANSION_FLOOR: u64 = 16 << 20;

/// Extracts the members of a bundle zip that `take` asks for into the existing directory
/// `dest` under `limits` (refusing unsafe member names and symlink members anywhere in the
/// archive, and bombs); each member written is bounded by [`MAX_EXPANSION_RATIO`] × its
/// compressed size (or [`EXPANSION_FLOOR`]) and all of them by `limits.bytes`. The steps of
/// [`import_bundle`]: result candidates first, then the raw log the result names.
pub fn extract_zip(
    zip_path: &Path,
    dest: &Path,
    limits: &ImportLimits,
    take: &dyn Fn(&str) -> Take,
) -> Result<()> {
    let file =
        qual_json::open_regular(zip_path).map_err(|e| LegacyError::Refused(e.to_string()))?;
    let mut archive = zip::ZipArchive::new(file)
        .map_err(|_| LegacyError::refused("artifact bundle is not a valid zip"))?;
    if archive.len() > limits.entries {
        return refuse(format!(
            "artifact zip has {} members, more than the limit of {}; refused without extracting",
            archive.len(),
            limits.entries
        ));
    }
    // Declared sizes first, so a zip bomb is refused before anything is written.
    let mut declared = 0u64;
    for i in 0..archive.len() {
        let entry = archive
            .by_index_raw(i)
            .map_err(|_| LegacyError::refused("artifact bundle is not a valid zip"))?;
        declared = declared.saturating_add(entry.size());
        if declared > limits.bytes {
            return Err(too_big(limits));
        }
    }
    let mut budget = limits.bytes;
    for i in 0..archive.len() {
        interrupted()?;
        let mut entry = archive
            .by_index(i)
            .map_err(|_| LegacyError::refused("artifact bundle is not a valid zip"))?;
        let name = entry.name().to_owned();
        let target = member_target(dest, &name, entry.is_symlink())?;
        if entry.is_dir() {
            continue;
        }
        let cap = match take(&name) {
            Take::Skip => continue,
            Take::Whole => None,
            Take::UpTo(n) => Some(n),
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                LegacyError::Refused(format!("cannot extract {}: {e}", quote(&name)))
            })?;
            let resolved = crate::paths::resolve(parent);
            if !resolved.starts_with(crate::paths::resolve(dest)) {
                return refuse(format!(
                    "artifact zip escapes extraction root: {}",
                    quote(&name)
                ));
            }
        }
        let ratio_cap = entry
            .compressed_size()
            .saturating_mul(MAX_EXPANSION_RATIO)
            .max(EXPANSION_FLOOR);
        let limit = budget.min(ratio_cap).min(cap.unwrap_or(u64::MAX));
        let mut out = std::fs::File::create_new(&target)
            .map_err(|e| LegacyError::Refused(format!("cannot extract {}: {e}", quote(&name))))?;
        match copy_bounded(&mut entry, &mut out, limit) {
            Ok(Some(n)) => budget -= n,
            Ok(None) if cap.is_some_and(|c| c == limit) => {
                drop(out);
                let _ = std::fs::remove_file(&target);
            }
            Ok(None) if limit == budget => return Err(too_big(limits)),
            Ok(None) => {
                return refuse(format!(
                    "artifact zip member {} expands to more than {MAX_EXPANSION_RATIO} times its {} compressed bytes; refused",
                    quote(&name),
                    entry.compressed_size()
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => interrupted()?,
            Err(_) => return refuse("artifact bundle is not a valid zip".into()),
        }
    }
    Ok(())
}

/// Where member `name` would be written below `dest`; refuses absolute names, `..`,
/// symlink members and names escaping the root (checked for every member, extracted or
/// not, so a bundle's verdict does not depend on what is read).
fn member_target(dest: &Path, name: &str, symlink: bool) -> Result<PathBuf> {
    let rel = Path::new(name);
    if rel.is_absolute()
        || name.starts_with('/')
        || name.starts_with('\\')
        || rel
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return refuse(format!(
            "artifact zip contains unsafe path: {}",
            quote(name)
        ));
    }
    if symlink {
        return refuse(format!(
            "artifact zip contains a symlink member: {}",
            quote(name)
        ));
    }
    let target = dest.join(rel);
    if !target.starts_with(dest) {
        return refuse(format!(
            "artifact zip escapes extraction root: {}",
            quote(name)
        ));
    }
    Ok(target)
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
    /// Move the saved old file (a sibling) back over the destination.
    Restore(PathBuf, PathBuf),
    /// Delete a destination that did not exist.
    Delete(PathBuf),
}

/// Whether two regular files have the same bytes (streamed; sizes first).
pub fn same_bytes(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    let mut fa = qual_json::open_regular(a)?;
    let mut fb = qual_json::open_regular(b)?;
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(fb.read(&mut bb[..1])? == 0);
        }
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// A sibling path of `dest` for a staged or saved copy.
fn sibling(dest: &Path, what: &str) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".kiln-qual-{what}-{}", std::process::id()));
    dest.with_file_name(name)
}

fn stage(src: &Path, dest: &Path, force: bool, undo: &mut Vec<Undo>) -> Result<()> {
    let shown = |p: &Path| qual_json::escape_path(p);
    if crate::paths::resolve(src) == crate::paths::resolve(dest) {
        return Ok(());
    }
    let mut input =
        qual_json::open_regular(src).map_err(|e| LegacyError::Refused(e.to_string()))?;
    let existed = dest.symlink_metadata().is_ok();
    if existed {
        let meta = dest
            .symlink_metadata()
            .map_err(|e| LegacyError::Refused(e.to_string()))?;
        if !meta.is_file() {
            return refuse(format!(
                "destination is not a regular file: {}",
                shown(dest)
            ));
        }
        let same = same_bytes(src, dest)
            .map_err(|e| LegacyError::Refused(format!("cannot read {}: {e}", shown(dest))))?;
        if same {
            return Ok(());
        }
        if !force {
            return refuse(format!(
                "destination already exists with different content; pass --force to replace: {}",
                shown(dest)
            ));
        }
    } else if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| LegacyError::Refused(format!("cannot create {}: {e}", shown(parent))))?;
    }
    // Write a sibling, then rename it into place: the destination is never half-written.
    let staged = sibling(dest, "new");
    let written = (|| -> std::io::Result<()> {
        let mut out = std::fs::File::create(&staged)?;
        copy_bounded(&mut input, &mut out, u64::MAX)?;
        out.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&staged);
        interrupted()?;
        return refuse(format!("cannot write {}: {e}", shown(dest)));
    }
    if existed {
        let saved = sibling(dest, "old");
        std::fs::rename(dest, &saved)
            .map_err(|e| LegacyError::Refused(format!("cannot write {}: {e}", shown(dest))))?;
        undo.push(Undo::Restore(dest.to_path_buf(), saved));
    } else {
        undo.push(Undo::Delete(dest.to_path_buf()));
    }
    std::fs::rename(&staged, dest).map_err(|e| {
        let _ = std::fs::remove_file(&staged);
        LegacyError::Refused(format!("cannot write {}: {e}", shown(dest)))
    })
}

fn rollback(undo: Vec<Undo>) {
    for u in undo.into_iter().rev() {
        match u {
            Undo::Restore(p, saved) => {
                let _ = std::fs::rename(saved, p);
            }
            Undo::Delete(p) => {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// Removes the saved old files once the import stands.
fn commit(undo: Vec<Undo>) {
    for u in undo {
        if let Undo::Restore(_, saved) = u {
            let _ = std::fs::remove_file(saved);
        }
    }
}

/// The bundle's root: the directory itself, or a zip extracted below `target/` (removed
/// when the returned guard drops).
fn bundle_root(repo: &Repo, req: &ImportRequest<'_>) -> Result<(PathBuf, Option<TempDir>)> {
    let bundle = req.bundle;
    if bundle.is_dir() {
        return Ok((bundle.to_path_buf(), None));
    }
    let mut head = [0u8; 4];
    let mut f = qual_json::open_regular(bundle).map_err(|e| LegacyError::Refused(e.to_string()))?;
    let is_zip = std::io::Read::read_exact(&mut f, &mut head).is_ok()
        && (head == *b"PK\x03\x04" || head == *b"PK\x05\x06");
    if !is_zip {
        return refuse(format!(
            "artifact bundle must be a directory or zip: {}",
            bundle.display()
        ));
    }
    let target = repo.join("target");
    std::fs::create_dir_all(&target)
        .map_err(|e| LegacyError::Refused(format!("cannot create {}: {e}", target.display())))?;
    sweep_stale_temp_dirs(&target);
    let dir = target.join(format!(
        "{TEMP_PREFIX}{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir(&dir)
        .map_err(|e| LegacyError::Refused(format!("cannot create {}: {e}", dir.display())))?;
    let temp = TempDir(dir.clone());
    // Only the result candidates now; the raw log once the result names it.
    let json = |name: &str| {
        if Path::new(name).extension().is_some_and(|e| e == "json") {
            Take::UpTo(crate::artifact::MAX_ARTIFACT_BYTES as u64)
        } else {
            Take::Skip
        }
    };
    extract_zip(bundle, &dir, &req.limits, &json)?;
    Ok((dir, Some(temp)))
}

/// The one v3 result artifact of the bundle (for `--fixture-id` when given).
fn select_result(
    files: &[PathBuf],
    req: &ImportRequest<'_>,
) -> Result<(PathBuf, qual_json::Object)> {
    let mut candidates: Vec<(PathBuf, qual_json::Object)> = Vec::new();
    for f in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let Ok(Value::Object(o)) = crate::artifact::load_artifact_value(f) else {
            continue;
        };
        if !crate::msg::eq_int(o.get("artifact_schema_version"), 3) {
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
    match candidates.len() {
        0 => refuse(match req.fixture_id {
            Some(id) => format!(
                "no latency result artifact JSON found for fixture {}",
                quote(id)
            ),
            None => "no latency result artifact JSON found".into(),
        }),
        1 => Ok(candidates.pop().expect("one candidate")),
        _ => {
            let shown: Vec<String> = candidates
                .iter()
                .map(|(p, _)| p.display().to_string())
                .collect();
            refuse(format!(
                "artifact bundle contains multiple result artifacts; pass --fixture-id: {}",
                shown.join(", ")
            ))
        }
    }
}

/// The one raw log of the bundle the result names: at its path, below the result directory
/// or at the top, else the one file of its name anywhere in the bundle.
fn find_raw_log(root: &Path, files: &[PathBuf], raw_log: &str) -> Result<PathBuf> {
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
    match found.len() {
        1 => Ok(found.pop().expect("one")),
        0 => {
            let named: Vec<&PathBuf> = files
                .iter()
                .filter(|p| p.file_name() == Some(name.as_os_str()))
                .collect();
            match named.len() {
                1 => Ok(named[0].clone()),
                0 => refuse(format!("raw log not found in artifact bundle: {raw_log}")),
                _ => {
                    let shown: Vec<String> =
                        named.iter().map(|p| p.display().to_string()).collect();
                    refuse(format!(
                        "artifact bundle contains multiple raw logs named {}: {}",
                        name.to_string_lossy(),
                        shown.join(", ")
                    ))
                }
            }
        }
        _ => {
            let shown: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
            refuse(format!(
                "artifact bundle contains multiple matching raw logs: {}",
                shown.join(", ")
            ))
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
    let (root, temp) = bundle_root(repo, req)?;

    // Result selection.
    let files = files_sorted(&root);
    let (result_file, result) = select_result(&files, req)?;
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
                crate::msg::text(result.get("raw_log"))
            ))
        })?
        .to_owned();
    let mut files = files;
    if temp.is_some() {
        // The second extraction: members named like the raw log, nothing else.
        let name = Path::new(&raw_log).file_name().map(|n| n.to_os_string());
        let raw = |member: &str| {
            if Path::new(member).file_name().map(|n| n.to_os_string()) == name {
                Take::Whole
            } else {
                Take::Skip
            }
        };
        extract_zip(bundle, &root, &req.limits, &raw)?;
        files = files_sorted(&root);
    }
    let raw_found = find_raw_log(&root, &files, &raw_log)?;

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
    commit(undo);
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

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests read back what they extracted
mod tests {
    use super::*;
    use std::io::Write;

    fn zip_of(path: &Path, members: &[(&str, usize)]) {
        let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, len) in members {
            w.start_file(*name, opts).unwrap();
            w.write_all(&vec![b'0'; *len]).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn zip_bombs_are_refused_before_anything_is_written() {
        let d = tempfile::tempdir().unwrap();
        let z = d.path().join("b.zip");
        zip_of(&z, &[("a", 1000), ("b", 1000), ("c", 1000)]);
        let out = d.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let few = ImportLimits {
            entries: 2,
            bytes: 1 << 20,
        };
        let all = |_: &str| Take::Whole;
        let e = extract_zip(&z, &out, &few, &all).unwrap_err().to_string();
        assert!(e.contains("has 3 members, more than the limit of 2"), "{e}");
        let small = ImportLimits {
            entries: 10,
            bytes: 2500,
        };
        let e = extract_zip(&z, &out, &small, &all).unwrap_err().to_string();
        assert!(e.contains("expands to more than 2500 bytes"), "{e}");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
        extract_zip(&z, &out, &ImportLimits::default(), &all).unwrap();
        assert_eq!(std::fs::read(out.join("c")).unwrap().len(), 1000);
    }

    #[test]
    fn stale_extraction_directories_of_dead_processes_are_swept() {
        let d = tempfile::tempdir().unwrap();
        let dead = d.path().join(format!("{TEMP_PREFIX}999999999-1"));
        let live = d
            .path()
            .join(format!("{TEMP_PREFIX}{}-1", std::process::id()));
        let other = d.path().join("something-else");
        for p in [&dead, &live, &other] {
            std::fs::create_dir(p).unwrap();
        }
        sweep_stale_temp_dirs(d.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
    }
}
